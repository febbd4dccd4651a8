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

#[test]
fn testpmd_frames_circulate_through_a_server_and_a_client_port() {
    let Some(pmd) = testpmd() else {
        eprintln!("skipped: dpdk-testpmd is not installed (Debian package dpdk-dev)");
        return;
    };
    let _one = one_at_a_time();
    // Socket paths must stay under 108 bytes: the system temp dir.
    let dir = std::env::temp_dir().join(format!("fp-vhost-live-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b, ctl) = (dir.join("a.sock"), dir.join("b.sock"), dir.join("fp.ctl"));
    let rules = dir.join("cross.flows");
    std::fs::write(
        &rules,
        "in_port=1,actions=output:2\nin_port=2,actions=output:1\n",
    )
    .unwrap();
    let sw = Killed(
        Command::new(BIN)
            .arg("switch")
            .arg("--rules")
            .arg(&rules)
            .arg("--port")
            .arg(format!("1=vhost-user:{}", a.display()))
            .arg("--port")
            .arg(format!("2=vhost-user:{},client", b.display()))
            .arg("--ctl")
            .arg(&ctl)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let t0 = Instant::now();
    while !(a.exists() && ctl.exists()) {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the switch never came up"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let log_path = dir.join("testpmd.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut tp = Killed(
        Command::new(pmd)
            .args(["-l", "0-1", "--no-huge", "-m", "512", "--no-pci"])
            .arg(format!(
                "--file-prefix=fp-vhost-live-{}",
                std::process::id()
            ))
            .arg("--vdev")
            .arg(format!("net_virtio_user0,path={},queues=1", a.display()))
            .arg("--vdev")
            .arg(format!(
                "net_virtio_user1,path={},queues=1,server=1",
                b.display()
            ))
            .args([
                "--",
                "--no-numa",
                "--total-num-mbufs=16384",
                "--forward-mode=io",
                "--tx-first",
                "--auto-start",
            ])
            .stdin(Stdio::piped())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    // Let frames go round for a few seconds, then Enter stops testpmd.
    std::thread::sleep(Duration::from_secs(5));
    drop(tp.0.stdin.take());
    let t1 = Instant::now();
    while tp.0.try_wait().ok().flatten().is_none() && t1.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let show = Command::new(BIN)
        .args(["ctl", "--ctl"])
        .arg(&ctl)
        .arg("dpctl/show")
        .output()
        .unwrap();
    let show = String::from_utf8_lossy(&show.stdout).into_owned();
    drop(tp);
    let _ = Command::new(BIN)
        .args(["ctl", "--ctl"])
        .arg(&ctl)
        .arg("exit")
        .output();
    let mut sw = sw;
    let t2 = Instant::now();
    while sw.0.try_wait().ok().flatten().is_none() && t2.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut err = String::new();
    if let Some(mut e) = sw.0.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
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
    let dir = std::env::temp_dir().join(format!("fp-vhost-offl-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
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
    let sw = Killed(
        Command::new(BIN)
            .arg("switch")
            .arg("--rules")
            .arg(&rules)
            .arg("--port")
            .arg(format!("1=vhost-user:{}", a.display()))
            .arg("--port")
            .arg(format!("2=vhost-user:{}", b.display()))
            .arg("--port")
            .arg(format!("3=pcap-out:{}", output.display()))
            .arg("--port")
            .arg(format!("4=pcap:{},loop", input.display()))
            .arg("--ctl")
            .arg(&ctl_sock)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let t0 = Instant::now();
    while !(a.exists() && b.exists() && ctl_sock.exists()) {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the switch never came up"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let cmds = dir.join("cmds.txt");
    std::fs::write(
        &cmds,
        "port stop all\ncsum set tcp hw 0\ncsum set tcp hw 1\nport start all\n",
    )
    .unwrap();
    let log_path = dir.join("testpmd.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut tp = Killed(
        Command::new(pmd)
            .args(["-l", "0-1", "--no-huge", "-m", "512", "--no-pci"])
            .arg(format!(
                "--file-prefix=fp-vhost-offl-{}",
                std::process::id()
            ))
            .arg("--vdev")
            .arg(format!("net_virtio_user0,path={},queues=1", a.display()))
            .arg("--vdev")
            .arg(format!("net_virtio_user1,path={},queues=1", b.display()))
            .args([
                "--",
                "--no-numa",
                "--total-num-mbufs=16384",
                "--forward-mode=csum",
                "--tx-offloads=0xc",
            ])
            .arg(format!("--cmdline-file={}", cmds.display()))
            .arg("--auto-start")
            .stdin(Stdio::piped())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_secs(3));
    drop(tp.0.stdin.take());
    let t1 = Instant::now();
    while tp.0.try_wait().ok().flatten().is_none() && t1.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(tp);
    let stats = ctl(&ctl_sock, &["dpif-netdev/pmd-stats-show", "--json"]);
    let show = ctl(&ctl_sock, &["dpctl/show"]);
    let _ = ctl(&ctl_sock, &["exit"]);
    let mut sw = sw;
    let t2 = Instant::now();
    while sw.0.try_wait().ok().flatten().is_none() && t2.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut err = String::new();
    if let Some(mut e) = sw.0.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
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
