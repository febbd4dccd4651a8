//! What the `ovs-ofctl` tests share: a `flowpath switch` with null ports
//! in its own run directory, `ovs-ofctl` run against it, and the
//! normalisation the recorders (tools/ofctl-record*.py) apply to
//! Open vSwitch's answers.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_flowpath");

/// A running switch; killed and its directory removed when dropped.
pub struct Sw {
    pub child: Child,
    pub dir: PathBuf,
}

impl Drop for Sw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether `ovs-ofctl` is installed (under CI it must be).
pub fn have_ofctl() -> bool {
    let ok = Command::new("ovs-ofctl")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "ovs-ofctl is missing (apt-get install openvswitch-common)"
        );
        eprintln!("skipped: ovs-ofctl not installed");
    }
    ok
}

/// Starts a switch with four null ports and no rules; its run directory
/// is unique (short enough for a Unix socket path).
pub fn start(tag: &str) -> Sw {
    start_with(tag, &[])
}

/// [`start`] with more `flowpath switch` arguments.
pub fn start_with(tag: &str, extra: &[&str]) -> Sw {
    let dir = std::env::temp_dir().join(format!("fpof-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let rules = dir.join("empty.flows");
    std::fs::write(&rules, "").unwrap();
    let mut cmd = Command::new(BIN);
    cmd.arg("switch").arg("--rules").arg(&rules);
    for p in 1..=4 {
        cmd.arg("--port").arg(format!("{p}=null"));
    }
    cmd.args(extra);
    spawn_in(dir, &mut cmd)
}

/// Starts `cmd` (a `flowpath switch` command line) with its control
/// socket in `dir`; waits for the bridge's OpenFlow socket.
pub fn spawn_in(dir: PathBuf, cmd: &mut Command) -> Sw {
    let child = cmd
        .arg("--ctl")
        .arg(dir.join("flowpath.ctl"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let sw = Sw { child, dir };
    let t0 = Instant::now();
    while !sw.dir.join("br0.mgmt").exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "switch did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    sw
}

/// Runs `ovs-ofctl ARGS` against the switch: (success, stdout, stderr).
pub fn ofctl(sw: &Sw, args: &[&str]) -> (bool, String, String) {
    let o = Command::new("ovs-ofctl")
        .env("OVS_RUNDIR", &sw.dir)
        .args(args)
        .output()
        .unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// [`ofctl`] that must succeed; its stdout.
pub fn ofctl_ok(sw: &Sw, args: &[&str]) -> String {
    let (ok, out, err) = ofctl(sw, args);
    assert!(ok, "ovs-ofctl {args:?}: {err}");
    out
}

/// Runs one recorded step (`cmd` with its file arguments already put in,
/// as `full`) in OpenFlow version `ver` and checks it against Open
/// vSwitch's answer: success, error name, normalised output.
pub fn check_step(sw: &Sw, ver: &str, full: Vec<String>, step: &serde_json::Value, ctx: &str) {
    let cmd: Vec<String> = serde_json::from_value(step["cmd"].clone()).unwrap();
    let mut args = vec!["-O".to_string(), ver.to_string()];
    args.extend(full);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, out, err) = ofctl(sw, &args);
    assert_eq!(ok, step["ok"].as_bool().unwrap(), "{ctx}: {err}{out}");
    if !ok {
        assert_eq!(
            error_name(&err),
            step["error"].as_str().unwrap(),
            "{ctx}: {err}"
        );
    }
    let want: Vec<String> = serde_json::from_value(step["out"].clone()).unwrap();
    assert_eq!(norm(&cmd, &out), want, "{ctx}");
}

/// The first OpenFlow error name in `ovs-ofctl`'s complaint (as the
/// recorders extract it).
pub fn error_name(stderr: &str) -> String {
    stderr
        .split(|c: char| !(c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit()))
        .find(|w| {
            (w.starts_with("OFP") || w.starts_with("NX"))
                && w.contains('_')
                && !w.starts_with("OFPT_")
        })
        .unwrap_or("")
        .to_string()
}

/// Output lines as the recorder keeps them: flow dumps sorted; group
/// dumps without durations, the groups sorted (Open vSwitch lists them in
/// hash order); xids dropped.
pub fn norm(cmd: &[String], out: &str) -> Vec<String> {
    // A step may name its own version (`-O V` first) and flags
    // (`--bundle`, `--strict`).
    let cmd = if cmd.first().is_some_and(|a| a == "-O") {
        &cmd[2..]
    } else {
        cmd
    };
    let cmd: Vec<&String> = cmd.iter().filter(|a| !a.starts_with("--")).collect();
    let lines = out
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty());
    if cmd[0] == "dump-flows" || cmd[0] == "diff-flows" {
        let mut v: Vec<String> = lines
            .filter(|l| !l.contains("reply"))
            .map(|l| l.trim().to_string())
            .collect();
        v.sort();
        return v;
    }
    if cmd[0] == "show" || cmd[0] == "dump-ports-desc" {
        return norm_ports(lines);
    }
    // Tables 0 and 1 of a table description (the others are alike).
    let lines = lines.take(if cmd[0] == "dump-table-desc" {
        7
    } else {
        usize::MAX
    });
    let mut v: Vec<String> = lines
        .map(|l| match l.find(" (xid=0x") {
            Some(i) => {
                let end = l[i..].find(')').map_or(l.len(), |j| i + j + 1);
                format!("{}{}", &l[..i], &l[end..])
            }
            None => l.to_string(),
        })
        .map(|l| drop_duration(&l))
        .collect();
    if cmd[0] == "dump-groups" || cmd[0] == "dump-group-stats" {
        if let Some(rest) = v.get_mut(1..) {
            rest.sort();
        }
    }
    v
}

/// Ports 1-4 of a port listing (`show`, `dump-ports-desc`): each number,
/// its config and state lines (names, addresses, speeds and the switch's
/// own port differ between Open vSwitch's sandbox and flowpath).
fn norm_ports<'a>(lines: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out = Vec::new();
    let mut keep = false;
    for l in lines {
        let num: String = l
            .strip_prefix(' ')
            .unwrap_or("")
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if !num.is_empty() && l[1 + num.len()..].starts_with('(') {
            keep = true;
            out.push(num);
        } else if !l.starts_with(' ') || !l[1..].starts_with(' ') {
            keep = false;
        } else if keep {
            let name = l.split(':').next().unwrap_or("").trim();
            if name == "config" || name == "state" {
                out.push(l.trim().to_string());
            }
        }
    }
    out
}

/// `l` without its `duration=N.Ns,` (group statistics).
pub fn drop_duration(l: &str) -> String {
    let Some(i) = l.find("duration=") else {
        return l.to_string();
    };
    let tail = &l[i + "duration=".len()..];
    let n = tail
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(tail.len());
    match tail[n..].strip_prefix("s,") {
        Some(rest) if n > 0 => format!("{}{rest}", &l[..i]),
        _ => l.to_string(),
    }
}

/// Open vSwitch 3.1's recorded answers: `tests/data/NAME`, one JSON value
/// per line (tools/ofctl-record*.py).
pub fn recorded(name: &str) -> Vec<serde_json::Value> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Reads one OpenFlow message (header and body) from `s`.
pub fn read_msg(s: &mut std::os::unix::net::UnixStream) -> Vec<u8> {
    use std::io::Read;
    let mut h = [0u8; 8];
    s.read_exact(&mut h).unwrap();
    let len = usize::from(u16::from_be_bytes([h[2], h[3]]));
    let mut m = h.to_vec();
    m.resize(len, 0);
    s.read_exact(&mut m[8..]).unwrap();
    m
}

/// A classic pcap file (Ethernet, microsecond timestamps) holding
/// `frames`, frame `i` at time `i` seconds.
pub fn pcap_file(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend(0xa1b2_c3d4u32.to_le_bytes());
    out.extend(2u16.to_le_bytes());
    out.extend(4u16.to_le_bytes());
    out.extend([0u8; 8]);
    out.extend(65535u32.to_le_bytes());
    out.extend(1u32.to_le_bytes());
    for (i, f) in frames.iter().enumerate() {
        out.extend((i as u32).to_le_bytes());
        out.extend(0u32.to_le_bytes());
        out.extend((f.len() as u32).to_le_bytes());
        out.extend((f.len() as u32).to_le_bytes());
        out.extend(f);
    }
    out
}
