//! `flowpath switch` with two vhost-user ports, one in server mode and
//! one in client mode, and DPDK's `dpdk-testpmd` attached to both with
//! `net_virtio_user` devices in `io` forwarding mode: testpmd sends a
//! first burst (`--tx-first`) out of its port 0, the switch's rules cross
//! it to port 2, testpmd forwards what it receives on its port 1 back,
//! and round it goes — frames keep circulating only if both directions of
//! both ports work. Skipped, with the reason printed, where `dpdk-testpmd`
//! is not installed (Debian: package `dpdk-dev`).

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
