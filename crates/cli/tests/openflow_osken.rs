//! os-ken (OpenStack's Ryu) controls `flowpath switch`, as root: three
//! network namespaces on afpacket ports, and a small OpenFlow 1.3
//! learning-switch app (`data/osken_learning_switch13.py`) run by os-ken
//! 4.2 from PyPI, in a virtualenv made once under the build directory.
//!
//! - `--fail-mode secure`: the app installs a table-miss flow
//!   (`actions=CONTROLLER:65535`), learns from packet-ins and installs a
//!   flow per pair (flow_mod), sending each first packet on (packet-out
//!   with no buffer); all pings succeed and `ovs-ofctl dump-flows` shows
//!   the flows.
//! - `--fail-mode standalone`: when the controller is killed, the switch
//!   forwards as `NORMAL`.
//!
//! Without root or the tools the tests say they are skipped (and fail
//! under CI). Without os-ken (no venv module, or pip cannot install it)
//! they fail, saying so.

mod ofnet;

use ofnet::{can_run, listening, wait_until, Topo};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The virtualenv's python with os-ken 4.2 (made on first use).
fn osken_python() -> PathBuf {
    ofnet::venv_python(
        "osken-4.2-venv",
        "os-ken==4.2.*",
        "import os_ken.base.app_manager",
    )
}

/// Starts the os-ken app on `port`; its index in `t.kids`.
fn osken(t: &mut Topo, port: u16) -> usize {
    let app = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/osken_learning_switch13.py"
    );
    let mut c = Command::new(osken_python());
    c.arg(app)
        .args(["--ofp-listen-host", "127.0.0.1"])
        .arg("--ofp-tcp-listen-port")
        .arg(port.to_string());
    let k = t.start(c, "osken.log");
    assert!(
        wait_until(Duration::from_secs(20), || listening(port)),
        "os-ken did not listen: {}",
        t.log("osken.log")
    );
    k
}

/// Starts the switch with `--controller tcp:127.0.0.1:PORT` and waits
/// for the app's table-miss flow.
fn switch(t: &mut Topo, port: u16, fail_mode: &str) {
    t.switch_controlled(&format!("tcp:127.0.0.1:{port}"), fail_mode, &[]);
    assert!(
        wait_until(Duration::from_secs(10), || t
            .ofctl("-O OpenFlow13 dump-flows br0")
            .contains("priority=0 actions=CONTROLLER:65535")),
        "no table-miss flow from os-ken:\n{}\n{}\n{}",
        t.ofctl("-O OpenFlow13 dump-flows br0"),
        t.log("switch.log"),
        t.log("osken.log")
    );
}

#[test]
fn osken_learning_switch_secure() {
    if !can_run(
        "osken_learning_switch_secure",
        &["ip", "ping", "ovs-ofctl", "python3"],
    ) {
        return;
    }
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let t0 = Instant::now();
    let mut t = Topo::new("ok");
    let port = 16652;
    osken(&mut t, port);
    switch(&mut t, port, "secure");
    for (a, b) in [(1, 2), (2, 3), (3, 1)] {
        assert!(
            t.ping(a, b),
            "ping h{a} -> h{b} through os-ken's flows:\n{}\n{}",
            t.ofctl("-O OpenFlow13 dump-flows br0"),
            t.log("osken.log")
        );
    }
    let d = t.ofctl("-O OpenFlow13 dump-flows br0");
    let learned = d
        .lines()
        .filter(|l| l.contains("priority=1,in_port=") && l.contains("actions=output:"))
        .count();
    assert!(learned >= 6, "os-ken's flows:\n{d}");
    let log = t.log("osken.log");
    assert!(log.contains("packet-in"), "{log}");
    eprintln!("os-ken secure: {:.1} s", t0.elapsed().as_secs_f64());
}

#[test]
fn osken_standalone_forwards_when_the_controller_dies() {
    if !can_run(
        "osken_standalone_forwards_when_the_controller_dies",
        &["ip", "ping", "ovs-ofctl", "python3"],
    ) {
        return;
    }
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let t0 = Instant::now();
    let mut t = Topo::new("oks");
    let port = 16653;
    let ct = osken(&mut t, port);
    switch(&mut t, port, "standalone");
    assert!(t.ping(1, 2), "with os-ken: {}", t.log("osken.log"));
    t.kill(ct);
    assert!(
        wait_until(Duration::from_secs(5), || t.ping(1, 3)),
        "standalone after os-ken is gone"
    );
    assert!(t.ping(3, 2), "standalone after os-ken is gone");
    eprintln!("os-ken standalone: {:.1} s", t0.elapsed().as_secs_f64());
}
