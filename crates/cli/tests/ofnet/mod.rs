//! Helpers of the OpenFlow tests that run `flowpath switch` against real
//! controllers, as root: three network namespaces `{tag}h1..3`
//! (10.77.0.1..3/24) on veths `{tag}v1..3` that are the switch's afpacket
//! ports, a run directory, and the processes started, killed by PID (and
//! the namespaces and veths removed) when the topology is dropped, even
//! when a test fails.

// Each test binary uses its own part of these helpers.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The `flowpath` binary.
pub const BIN: &str = env!("CARGO_BIN_EXE_flowpath");

/// Runs a shell command.
pub fn sh(cmd: &str) -> Output {
    Command::new("sh").arg("-c").arg(cmd).output().unwrap()
}

/// Runs `cmd` (by `sh -c`), which must succeed.
pub fn ok(cmd: &str) {
    let o = sh(cmd);
    assert!(
        o.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Whether the test can run: root and `tools` on PATH. Without them the
/// test says it is skipped (and fails under CI, which has both).
pub fn can_run(test: &str, tools: &[&str]) -> bool {
    let root = sh("id -u").stdout.starts_with(b"0");
    let have = tools
        .iter()
        .all(|t| sh(&format!("command -v {t}")).status.success());
    if root && have {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{test}: needs root and {}",
        tools.join(", ")
    );
    eprintln!("{test}: skipped (needs root and {})", tools.join(", "));
    false
}

/// Waits (at most `limit`) until `ok` holds; whether it did.
pub fn wait_until(limit: Duration, mut ok: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    loop {
        if ok() {
            return true;
        }
        if t0.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The namespaces, the run directory and the processes started.
pub struct Topo {
    /// Prefix of the namespaces' and veths' names.
    pub tag: String,
    /// The run directory (the switch's control and br0.mgmt sockets).
    pub dir: PathBuf,
    /// The processes started (killed by PID on drop).
    pub kids: Vec<Child>,
    /// Whether namespaces were made.
    netns: bool,
}

impl Topo {
    /// A run directory and three namespaces on veths.
    pub fn new(name: &str) -> Topo {
        let mut t = Topo::bare(name);
        t.netns = true;
        for i in 1..=3 {
            let (n, v, p) = (t.ns(i), t.veth(i), format!("{}p{i}", t.tag));
            for c in [
                format!("ip netns add {n}"),
                format!("ip link add {v} type veth peer name {p}"),
                format!("ip link set {p} netns {n}"),
                format!("ip -n {n} addr add 10.77.0.{i}/24 dev {p}"),
                format!("ip -n {n} link set {p} up"),
                format!("ip -n {n} link set lo up"),
                format!("ip link set {v} up"),
            ] {
                let o = sh(&c);
                assert!(
                    o.status.success(),
                    "{c}: {}",
                    String::from_utf8_lossy(&o.stderr)
                );
            }
        }
        t
    }

    /// A run directory only (no namespaces).
    pub fn bare(name: &str) -> Topo {
        let tag = format!("fo{}{}", name, std::process::id() % 10000);
        let dir = std::env::temp_dir().join(&tag);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Topo {
            tag,
            dir,
            kids: Vec::new(),
            netns: false,
        }
    }

    /// Namespace `i`.
    pub fn ns(&self, i: u32) -> String {
        format!("{}h{i}", self.tag)
    }

    /// The switch side of namespace `i`'s veth.
    pub fn veth(&self, i: u32) -> String {
        format!("{}v{i}", self.tag)
    }

    /// Starts a process (output to `log` in the run directory); its index
    /// in `kids`.
    pub fn start(&mut self, mut cmd: Command, log: &str) -> usize {
        let out = std::fs::File::create(self.dir.join(log)).unwrap();
        let err = out.try_clone().unwrap();
        let c = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap();
        self.kids.push(c);
        self.kids.len() - 1
    }

    /// What a process started with `start` wrote.
    pub fn log(&self, log: &str) -> String {
        std::fs::read_to_string(self.dir.join(log)).unwrap_or_default()
    }

    /// Kills process `i` (by PID) and waits for it.
    pub fn kill(&mut self, i: usize) {
        let _ = self.kids[i].kill();
        let _ = self.kids[i].wait();
    }

    /// `ovs-testcontroller -O PROTO [ARGS] TARGET`.
    pub fn testcontroller(&mut self, proto: &str, args: &[&str], target: &str) -> usize {
        let mut c = Command::new("ovs-testcontroller");
        c.args(["-O", proto])
            .arg(format!("--unixctl={}", self.dir.join("ct.ctl").display()))
            .args(args)
            .arg(target);
        self.start(c, "testcontroller.log")
    }

    /// `flowpath switch` with no flows, the three namespaces' veths as
    /// ports (or one `null` port without namespaces) and `args`; waits
    /// for its OpenFlow socket.
    pub fn switch(&mut self, args: &[String]) -> usize {
        self.switch_with_rules("", args)
    }

    /// `flowpath switch` as [`Topo::switch`], loaded with `rules`.
    pub fn switch_with_rules(&mut self, rules_text: &str, args: &[String]) -> usize {
        let rules = self.dir.join("start.flows");
        std::fs::write(&rules, rules_text).unwrap();
        let mut cmd = Command::new(BIN);
        cmd.arg("switch").arg("--rules").arg(&rules);
        if self.netns {
            for i in 1..=3 {
                cmd.arg("--port")
                    .arg(format!("{i}=afpacket:{}", self.veth(i)));
            }
        } else {
            cmd.arg("--port").arg("1=null");
        }
        cmd.arg("--ctl")
            .arg(self.dir.join("flowpath.ctl"))
            .args(args);
        let k = self.start(cmd, "switch.log");
        let mgmt = self.dir.join("br0.mgmt");
        assert!(
            wait_until(Duration::from_secs(10), || mgmt.exists()),
            "switch did not start: {}",
            self.log("switch.log")
        );
        k
    }

    /// The switch with `--controller TARGET --fail-mode MODE` and `args`.
    pub fn switch_controlled(&mut self, target: &str, fail_mode: &str, args: &[String]) -> usize {
        let mut all = vec![
            "--controller".to_string(),
            target.to_string(),
            "--fail-mode".into(),
            fail_mode.into(),
        ];
        all.extend_from_slice(args);
        self.switch(&all)
    }

    /// Two pings from namespace `from` to namespace `to`.
    pub fn ping(&self, from: u32, to: u32) -> bool {
        sh(&format!(
            "ip netns exec {} ping -c 2 -i 0.2 -W 2 10.77.0.{to}",
            self.ns(from)
        ))
        .status
        .success()
    }

    /// `ovs-appctl -t CTL ARGS` against the switch's control socket
    /// (bounded: 20 s): its standard output.
    pub fn appctl(&self, args: &str) -> String {
        let o = sh(&format!(
            "timeout 20 ovs-appctl -t {} {args}",
            self.dir.join("flowpath.ctl").display()
        ));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// Runs `cmd` in namespace `i` (bounded by `timeout`).
    pub fn in_ns(&self, i: u32, secs: u32, cmd: &str) -> Output {
        sh(&format!(
            "timeout {secs} ip netns exec {} {cmd}",
            self.ns(i)
        ))
    }

    /// TCP from namespace `client` to an iperf3 server on `ip` in
    /// namespace `server`, 3 s: the bits per second received (the run
    /// must succeed).
    pub fn iperf3_bps(&self, server: u32, ip: &str, client: u32) -> f64 {
        let mut srv = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.ns(server),
                "iperf3",
                "-s",
                "-1",
                "-B",
                ip,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        assert!(
            self.listening_in(server, 5201),
            "iperf3 server did not start"
        );
        let o = self.in_ns(client, 30, &format!("iperf3 -c {ip} -t 3 -J"));
        let _ = srv.kill();
        let _ = srv.wait();
        assert!(
            o.status.success(),
            "iperf3: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .unwrap_or(0.0)
    }

    /// A command that runs `argv` in namespace `i` (to `start`).
    pub fn ns_command(&self, i: u32, argv: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns(i)])
            .args(argv.split_whitespace());
        c
    }

    /// Whether something listens on TCP `port` in namespace `i` (waits
    /// up to 10 s for it).
    pub fn listening_in(&self, i: u32, port: u16) -> bool {
        let want = format!(":{port} ");
        wait_until(Duration::from_secs(10), || {
            String::from_utf8_lossy(&self.in_ns(i, 5, "ss -ltnH").stdout)
                .lines()
                .any(|l| l.contains(&want))
        })
    }

    /// `ovs-ofctl ARGS` with OVS_RUNDIR the run directory (must succeed).
    pub fn ofctl(&self, args: &str) -> String {
        let o = self.ofctl_output(args);
        assert!(
            o.status.success(),
            "ovs-ofctl {args}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// `ovs-ofctl ARGS` with OVS_RUNDIR the run directory (bounded: 20 s).
    pub fn ofctl_output(&self, args: &str) -> Output {
        Command::new("sh")
            .arg("-c")
            .arg(format!("timeout 20 ovs-ofctl {args}"))
            .env("OVS_RUNDIR", &self.dir)
            .output()
            .unwrap()
    }

    /// A path in the run directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Drop for Topo {
    fn drop(&mut self) {
        for k in self.kids.iter_mut() {
            let _ = k.kill();
            let _ = k.wait();
        }
        if self.netns {
            for i in 1..=3 {
                let _ = sh(&format!("ip netns del {}", self.ns(i)));
                let _ = sh(&format!("ip link del {}", self.veth(i)));
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether something listens on TCP `port` of 127.0.0.1.
pub fn listening(port: u16) -> bool {
    std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
}

/// A file's path as a string (for command lines).
pub fn s(p: &Path) -> String {
    p.display().to_string()
}

/// The python of a virtualenv `name` under the tests' temporary directory
/// with `pip_spec` installed (made on first use, beside and then moved in
/// place, so an interrupted install leaves no half venv), checked by
/// running `probe` (a line of Python that imports the package).
pub fn venv_python(name: &str, pip_spec: &str, probe: &str) -> PathBuf {
    let venv = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let py = venv.join("bin/python3");
    let works = |py: &PathBuf| {
        Command::new(py)
            .args(["-c", probe])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if works(&py) {
        return py;
    }
    let tmp = venv.with_extension(format!("tmp{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let o = sh(&format!(
        "python3 -m venv {t} && timeout 300 {t}/bin/pip install -q '{pip_spec}'",
        t = s(&tmp)
    ));
    assert!(
        o.status.success(),
        "cannot install {pip_spec} in a virtualenv (python3 -m venv, then pip \
         install from PyPI; Debian needs python3-venv): {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let _ = std::fs::remove_dir_all(&venv);
    std::fs::rename(&tmp, &venv).unwrap();
    // The venv's scripts name its path: the python itself works moved.
    assert!(works(&py), "{probe} fails with {}", py.display());
    py
}

pub const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

// --- OVSDB: a private ovsdb-server with Open vSwitch's schema ---

/// Held by each test of a binary that makes bridges named `br0` over the
/// OVSDB: each bridge's LOCAL port is a tap named after it, so two such
/// switches at once would contend for the name.
pub fn one_bridge_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// `ovs-vsctl --db=unix:DIR/db.sock --timeout=20 ARGS` (must succeed):
/// its output, trimmed.
pub fn vsctl(dir: &Path, args: &str) -> String {
    let o = sh(&format!(
        "ovs-vsctl --db=unix:{}/db.sock --timeout=20 {args}",
        dir.display()
    ));
    assert!(
        o.status.success(),
        "ovs-vsctl {args}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

pub fn start_db(t: &mut Topo) -> usize {
    let dir = t.dir.clone();
    // (A killed server leaves its socket file behind.)
    let _ = std::fs::remove_file(dir.join("db.sock"));
    let mut c = Command::new("ovsdb-server");
    c.arg(dir.join("conf.db"))
        .arg(format!("--remote=punix:{}", dir.join("db.sock").display()))
        .arg(format!("--unixctl={}", dir.join("ovsdb.ctl").display()))
        .arg(format!("--log-file={}", dir.join("ovsdb.log").display()));
    let k = t.start(c, "ovsdb-server.out");
    assert!(
        wait_until(Duration::from_secs(10), || dir.join("db.sock").exists()),
        "ovsdb-server did not start: {}",
        t.log("ovsdb-server.out")
    );
    k
}

/// A new database (Open vSwitch's schema) in the topology's directory,
/// its server started and `ovs-vsctl init` run: the server's child index.
pub fn new_db(t: &mut Topo) -> usize {
    let o = sh(&format!(
        "ovsdb-tool create {}/conf.db {SCHEMA}",
        t.dir.display()
    ));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let db = start_db(t);
    vsctl(&t.dir, "--no-wait init");
    db
}

/// `flowpath switch --ovsdb` (the database beside its control socket),
/// waited for until br0's OpenFlow socket is there: its child index.
pub fn start_switch(t: &mut Topo) -> usize {
    start_switch_with(t, &[])
}

/// [`start_switch`] with more arguments.
pub fn start_switch_with(t: &mut Topo, extra: &[&str]) -> usize {
    let mut c = Command::new(BIN);
    c.arg("switch")
        .args(extra)
        .arg("--ovsdb")
        .arg("--ctl")
        .arg(t.dir.join("flowpath.ctl"));
    let k = t.start(c, "switch.log");
    let mgmt = t.dir.join("br0.mgmt");
    assert!(
        wait_until(Duration::from_secs(10), || mgmt.exists()),
        "switch did not start: {}",
        t.log("switch.log")
    );
    k
}
