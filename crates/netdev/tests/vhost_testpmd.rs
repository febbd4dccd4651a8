//! A live vhost-user test against DPDK's `dpdk-testpmd` with a
//! `net_virtio_user` device (the DPDK driver side over the port's
//! socket), in `txonly` mode: testpmd's frames reach the port's receive
//! queue, and the port's frames land in testpmd's receive ring; over a
//! split ring and over a packed one (`packed_vq=1`). Skipped,
//! with the reason printed, where `dpdk-testpmd` is not installed
//! (Debian: package `dpdk-dev`).

use flowpath_netdev::{open_with, PortSpec, TxFrame};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn testpmd() -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| std::path::Path::new(d).join("dpdk-testpmd"))
        .find(|p| p.exists())
}

#[test]
fn testpmd_virtio_user_exchanges_frames_with_the_port() {
    exchange("split", "");
}

#[test]
fn testpmd_over_a_packed_ring() {
    exchange("packed", ",packed_vq=1");
}

/// testpmd with `vdev` options `extra` against a port; `tag` names the
/// run's directory.
fn exchange(tag: &str, extra: &str) {
    let Some(bin) = testpmd() else {
        eprintln!("skipped: dpdk-testpmd is not installed (Debian package dpdk-dev)");
        return;
    };
    let dir = std::env::temp_dir().join(format!(
        "flowpath-vhost-testpmd-{tag}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("vhost.sock");
    let spec = PortSpec::VhostUser {
        path: sock.clone(),
        client: false,
        queues: 1,
    };
    let mut port = open_with(&spec, 1).expect("open vhost-user port");
    let log = std::fs::File::create(dir.join("testpmd.log")).unwrap();
    let mut child = Command::new(bin)
        .args([
            "-l",
            "0-1",
            "--no-huge",
            "-m",
            "512",
            "--no-pci",
            // (Its initialisation log names the ring layout it chose.)
            "--log-level=pmd.net.virtio.init:debug",
            &format!("--file-prefix=flowpath-vhost-{tag}-{}", std::process::id()),
            "--vdev",
            &format!("net_virtio_user0,path={},queues=1{extra}", sock.display()),
            "--",
            "--no-numa",
            "--total-num-mbufs=16384",
            "--forward-mode=txonly",
            "--auto-start",
        ])
        .stdin(Stdio::piped())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("start dpdk-testpmd");
    let frame = {
        let mut f = vec![0u8; 64];
        f[0..6].copy_from_slice(&[0xff; 6]);
        f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
        f
    };
    let mut got = 0u64;
    let mut lens_ok = true;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(30) && (got < 10_000 || port.tx.stats().packets == 0) {
        let n = port.rxqs[0]
            .recv(64, &mut |b, _| {
                got += 1;
                lens_ok &= b.len() >= 60;
            })
            .unwrap();
        port.tx.send(&mut std::iter::repeat_n(
            TxFrame {
                data: &frame,
                vnet: None,
                timestamp_ns: 0,
            },
            4,
        ));
        if n == 0 {
            std::thread::sleep(Duration::from_micros(100));
        }
        if let Ok(Some(st)) = child.try_wait() {
            panic!(
                "dpdk-testpmd exited early ({st}): {}",
                std::fs::read_to_string(dir.join("testpmd.log")).unwrap_or_default()
            );
        }
    }
    // Enter (or end of input) stops testpmd.
    drop(child.stdin.take());
    let t1 = Instant::now();
    while child.try_wait().ok().flatten().is_none() && t1.elapsed() < Duration::from_secs(10) {
        // Keep draining so testpmd's shutdown is not blocked on a full ring.
        port.rxqs[0].recv(64, &mut |_, _| {}).unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    if child.try_wait().ok().flatten().is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let log = std::fs::read_to_string(dir.join("testpmd.log")).unwrap_or_default();
    let tx = port.tx.stats();
    let rx = port.rxqs[0].stats();
    drop(port);
    eprintln!("{log}");
    eprintln!(
        "from testpmd: {got} frames; to testpmd: {} sent, {} dropped",
        tx.packets, tx.dropped
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        got >= 10_000,
        "only {got} frames from testpmd; its log:\n{log}"
    );
    assert!(lens_ok, "short frames from testpmd");
    assert!(
        tx.packets > 0,
        "testpmd's receive ring took nothing; its log:\n{log}"
    );
    assert_eq!(rx.errors, 0, "testpmd's chains refused");
    // The layout asked for is the one negotiated.
    assert_eq!(
        log.contains("using packed ring"),
        tag == "packed",
        "ring layout; testpmd's log:\n{log}"
    );
}
