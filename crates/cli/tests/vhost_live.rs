//! `flowpath switch` with two vhost-user ports, one in server mode and
//! one in client mode, and DPDK's `dpdk-testpmd` attached to both with
//! `net_virtio_user` devices in `io` forwarding mode: testpmd sends a
//! first burst (`--tx-first`) out of its port 0, the switch's rules cross
//! it to port 2, testpmd forwards what it receives on its port 1 back,
//! and round it goes — frames keep circulating only if both directions of
//! both ports work. Skipped, with the reason printed, where `dpdk-testpmd`
//! is not installed (Debian: package `dpdk-dev`).
//!
//! Checksum offload from a guest, live: DPDK's `dpdk-testpmd` attached
//! to two vhost-user ports with `net_virtio_user` devices negotiates
//! `VIRTIO_NET_F_CSUM` (`--tx-offloads` TCP and UDP checksums) and runs
//! its `csum` engine with TCP checksums left to the device (`csum set tcp
//! hw`): every TCP segment it forwards leaves it with a partial checksum
//! and a virtio-net header saying so. The switch feeds it TCP segments
//! from a looped capture on port 2's side and writes what comes back on
//! port 1 to a capture (a port without offloads): the switch must have
//! finished those checksums (counted in `offload_finished`), and every
//! segment in the capture must carry a valid one.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_flowpath");

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One testpmd at a time (two on two cores would mostly wait).
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

fn testpmd() -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join("dpdk-testpmd"))
        .find(|p| p.exists())
}

/// `RX-packets` of testpmd's port `port` in its closing statistics.
fn rx_packets(log: &str, port: u32) -> Option<u64> {
    let at = log.find(&format!("Forward statistics for port {port}"))?;
    let rest = &log[at..];
    let v = rest.split("RX-packets:").nth(1)?;
    v.split_whitespace().next()?.parse().ok()
}

/// A fresh directory under the system temp dir (socket paths must stay
/// under 108 bytes).
fn scratch_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fp-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `flowpath switch` with `rules` and `ports`, its control socket at
/// `ctl`; returns once `ctl` and every path of `wait` exist (20 s at most).
fn start_switch(rules: &Path, ports: &[String], ctl: &Path, wait: &[&Path]) -> Killed {
    let mut cmd = Command::new(BIN);
    cmd.arg("switch").arg("--rules").arg(rules);
    for p in ports {
        cmd.arg("--port").arg(p);
    }
    let sw = Killed(
        cmd.arg("--ctl")
            .arg(ctl)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let t0 = Instant::now();
    while !(ctl.exists() && wait.iter().all(|p| p.exists())) {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the switch never came up"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    sw
}

/// Asks the switch to exit, waits for it (10 s at most) and returns what
/// it wrote to stderr.
fn stop_switch(mut sw: Killed, sock: &Path) -> String {
    let _ = ctl(sock, &["exit"]);
    let t0 = Instant::now();
    while sw.0.try_wait().ok().flatten().is_none() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut err = String::new();
    if let Some(mut e) = sw.0.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    err
}

/// testpmd with two virtio-user devices (`vdevs`), no huge pages, its
/// output to `log`; the caller adds testpmd's own arguments after `--`.
fn testpmd_cmd(pmd: &Path, prefix: &str, vdevs: [String; 2], log: &Path) -> Command {
    let log = std::fs::File::create(log).unwrap();
    let mut cmd = Command::new(pmd);
    cmd.args(["-l", "0-1", "--no-huge", "-m", "512", "--no-pci"])
        .arg(format!("--file-prefix=fp-{prefix}-{}", std::process::id()))
        .arg("--vdev")
        .arg(&vdevs[0])
        .arg("--vdev")
        .arg(&vdevs[1])
        .args(["--", "--no-numa", "--total-num-mbufs=16384"])
        .stdin(Stdio::piped())
        .stdout(log.try_clone().unwrap())
        .stderr(log);
    cmd
}

/// Closes testpmd's stdin (the Enter that stops it) and waits for it to
/// print its statistics and exit (15 s at most).
fn stop_testpmd(mut tp: Killed) {
    drop(tp.0.stdin.take());
    let t0 = Instant::now();
    while tp.0.try_wait().ok().flatten().is_none() && t0.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn testpmd_frames_circulate_through_a_server_and_a_client_port() {
    let Some(pmd) = testpmd() else {
        eprintln!("skipped: dpdk-testpmd is not installed (Debian package dpdk-dev)");
        return;
    };
    let _one = one_at_a_time();
    let dir = scratch_dir("vhost-live");
    let (a, b, ctl_sock) = (dir.join("a.sock"), dir.join("b.sock"), dir.join("fp.ctl"));
    let rules = dir.join("cross.flows");
    std::fs::write(
        &rules,
        "in_port=1,actions=output:2\nin_port=2,actions=output:1\n",
    )
    .unwrap();
    let sw = start_switch(
        &rules,
        &[
            format!("1=vhost-user:{}", a.display()),
            format!("2=vhost-user:{},client", b.display()),
        ],
        &ctl_sock,
        &[&a],
    );
    let log_path = dir.join("testpmd.log");
    let vdevs = [
        format!("net_virtio_user0,path={},queues=1", a.display()),
        format!("net_virtio_user1,path={},queues=1,server=1", b.display()),
    ];
    let tp = Killed(
        testpmd_cmd(&pmd, "vhost-live", vdevs, &log_path)
            .args(["--forward-mode=io", "--tx-first", "--auto-start"])
            .spawn()
            .unwrap(),
    );
    // Let frames go round for a few seconds, then Enter stops testpmd.
    std::thread::sleep(Duration::from_secs(5));
    stop_testpmd(tp);
    let show = ctl(&ctl_sock, &["dpctl/show"]);
    let err = stop_switch(sw, &ctl_sock);
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    let (rx0, rx1) = (rx_packets(&log, 0), rx_packets(&log, 1));
    eprintln!("testpmd received {rx0:?} on port 0, {rx1:?} on port 1; the switch:\n{show}");
    assert!(
        rx0.unwrap_or(0) > 1000 && rx1.unwrap_or(0) > 1000,
        "frames did not circulate; testpmd:\n{log}\nswitch:\n{show}\n{err}"
    );
    assert!(show.contains("vhost-user: server") && show.contains("vhost-user: client"));
}

/// A capture of `n` TCP segments from 10.0.0.1:1000+i to 10.0.0.2:80
/// (checksums right).
fn tcp_capture(path: &Path, n: u16) {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&65535u32.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    for i in 0..n {
        let mut f = Vec::new();
        etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .tcp(1000 + i, 80, 7, 65535)
            .ack(1)
            .psh()
            .write(&mut f, b"offloaded checksum")
            .unwrap();
        for v in [0u32, 0, f.len() as u32, f.len() as u32] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&f);
    }
    std::fs::write(path, out).unwrap();
}

/// The frames of a classic little-endian capture.
fn frames(path: &Path) -> Vec<Vec<u8>> {
    let b = std::fs::read(path).unwrap_or_default();
    let mut out = Vec::new();
    let mut at = 24;
    while at + 16 <= b.len() {
        let n = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
        let Some(f) = b.get(at + 16..at + 16 + n) else {
            break;
        };
        out.push(f.to_vec());
        at += 16 + n;
    }
    out
}

/// Whether an Ethernet/IPv4/TCP frame's TCP checksum is right.
fn tcp_checksum_ok(f: &[u8]) -> bool {
    let ihl = usize::from(f[14] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([f[16], f[17]]));
    let seg = &f[14 + ihl..14 + total];
    let mut s: u32 = 6 + seg.len() as u32;
    for c in f[26..34].chunks(2).chain(seg.chunks(2)) {
        s += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    s == 0xffff
}

fn ctl(sock: &Path, args: &[&str]) -> String {
    let o = Command::new(BIN)
        .args(["ctl", "--ctl"])
        .arg(sock)
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn partial_checksums_from_testpmd_are_finished_for_a_capture() {
    let Some(pmd) = testpmd() else {
        eprintln!("skipped: dpdk-testpmd is not installed (Debian package dpdk-dev)");
        return;
    };
    let _one = one_at_a_time();
    let dir = scratch_dir("vhost-offl");
    let (a, b, ctl_sock) = (dir.join("a.sock"), dir.join("b.sock"), dir.join("fp.ctl"));
    let (input, output) = (dir.join("in.pcap"), dir.join("out.pcap"));
    // 1,000 segments looped; one flow of them is captured on the way back.
    tcp_capture(&input, 1000);
    let rules = dir.join("r.flows");
    std::fs::write(
        &rules,
        "in_port=4,actions=output:2\n\
         in_port=1,tcp,tcp_src=1000,actions=output:3\n\
         priority=0,actions=drop\n",
    )
    .unwrap();
    let sw = start_switch(
        &rules,
        &[
            format!("1=vhost-user:{}", a.display()),
            format!("2=vhost-user:{}", b.display()),
            format!("3=pcap-out:{}", output.display()),
            format!("4=pcap:{},loop", input.display()),
        ],
        &ctl_sock,
        &[&a, &b],
    );
    let cmds = dir.join("cmds.txt");
    std::fs::write(
        &cmds,
        "port stop all\ncsum set tcp hw 0\ncsum set tcp hw 1\nport start all\n",
    )
    .unwrap();
    let log_path = dir.join("testpmd.log");
    let vdevs = [
        format!("net_virtio_user0,path={},queues=1", a.display()),
        format!("net_virtio_user1,path={},queues=1", b.display()),
    ];
    let tp = Killed(
        testpmd_cmd(&pmd, "vhost-offl", vdevs, &log_path)
            .args(["--forward-mode=csum", "--tx-offloads=0xc"])
            .arg(format!("--cmdline-file={}", cmds.display()))
            .arg("--auto-start")
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_secs(3));
    stop_testpmd(tp);
    let stats = ctl(&ctl_sock, &["dpif-netdev/pmd-stats-show", "--json"]);
    let show = ctl(&ctl_sock, &["dpctl/show"]);
    let err = stop_switch(sw, &ctl_sock);
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    let got = frames(&output);
    let _ = std::fs::remove_dir_all(&dir);
    let finished: u64 = serde_json::from_str::<serde_json::Value>(&stats)
        .ok()
        .and_then(|v| {
            let pmds = v.as_array().cloned().unwrap_or_else(|| vec![v]);
            pmds.iter()
                .map(|p| p["output"]["offload_finished"].as_u64())
                .sum::<Option<u64>>()
        })
        .unwrap_or(0);
    eprintln!(
        "{} segments captured, {finished} finished in software; the switch:\n{show}",
        got.len()
    );
    assert!(
        log.contains("TCP checksum offload is hw"),
        "testpmd did not take the checksum offload:\n{log}\n{err}"
    );
    assert!(
        got.len() >= 10,
        "too few segments came back: {}\ntestpmd:\n{log}\nswitch:\n{show}\n{err}",
        got.len()
    );
    assert!(
        finished >= got.len() as u64,
        "{finished} finished for {} captured:\n{stats}",
        got.len()
    );
    for (i, f) in got.iter().enumerate() {
        assert!(tcp_checksum_ok(f), "segment {i} has a bad checksum");
    }
}
