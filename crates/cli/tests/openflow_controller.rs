//! Real controllers drive `flowpath switch` over OpenFlow, as root: three
//! network namespaces on afpacket ports, Debian's `ovs-testcontroller`
//! (an L2 learning controller) as the only source of flows.
//!
//! - `--fail-mode secure`: with no flows, every first packet goes to the
//!   controller (packet-in), which installs flows (flow_mod) and sends
//!   the packet on (packet-out); all pings succeed, in OpenFlow 1.0 and
//!   1.3, and `ovs-ofctl dump-flows` shows the controller's flows.
//! - `--fail-mode standalone`: when the controller is killed, the switch
//!   forwards as `NORMAL` (pings still succeed).
//! - `ovs-ofctl packet-out` puts a frame out of a port: the namespace
//!   behind it receives it.
//!
//! Each test makes its own namespaces and veths (names unique to the
//! process) and removes them, and stops the processes it started (by
//! PID), even when it fails. Without root or the tools the tests say they
//! are skipped (and fail under CI, which runs as root with the tools).

mod ofnet;

use ofnet::{can_run, sh, Topo};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const TOOLS: &[&str] = &["ip", "ping", "ovs-testcontroller", "ovs-ofctl"];

/// `ovs-testcontroller -O PROTO ptcp:PORT:127.0.0.1`; its index in
/// `t.kids`.
fn controller(t: &mut Topo, port: u16, proto: &str) -> usize {
    t.testcontroller(proto, &[], &format!("ptcp:{port}:127.0.0.1"))
}

/// The switch with `--controller tcp:127.0.0.1:PORT`.
fn switch(t: &mut Topo, port: u16, fail_mode: &str) {
    t.switch_controlled(&format!("tcp:127.0.0.1:{port}"), fail_mode, &[]);
}

fn learning_controller_secure(proto: &str, port: u16) {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let mut t = Topo::new(&proto[8..]);
    controller(&mut t, port, proto);
    switch(&mut t, port, "secure");
    // The controller connects within the first back-off second.
    std::thread::sleep(Duration::from_millis(1500));
    for (a, b) in [(1, 2), (2, 3), (3, 1)] {
        assert!(
            t.ping(a, b),
            "{proto}: ping h{a} -> h{b} through the controller's flows"
        );
    }
    let d = t.ofctl(&format!("-O {proto} dump-flows br0"));
    let learned = d.lines().filter(|l| l.contains("actions=output:")).count();
    assert!(learned >= 4, "{proto}: the controller's flows:\n{d}");
    // OpenFlow 1.3's learning switch adds a table-miss flow; 1.0's relies
    // on the switch sending misses (OVS's default while an OpenFlow
    // 1.0-1.2 controller is connected).
    if proto == "OpenFlow13" {
        assert!(d.contains("priority=0 actions=CONTROLLER"), "{d}");
    }
}

#[test]
fn ovs_testcontroller_openflow10_secure() {
    if can_run("ovs_testcontroller_openflow10_secure", TOOLS) {
        learning_controller_secure("OpenFlow10", 16630);
    }
}

#[test]
fn ovs_testcontroller_openflow13_secure() {
    if can_run("ovs_testcontroller_openflow13_secure", TOOLS) {
        learning_controller_secure("OpenFlow13", 16631);
    }
}

#[test]
fn standalone_forwards_when_the_controller_dies_and_packet_out_sends() {
    if !can_run(
        "standalone_forwards_when_the_controller_dies_and_packet_out_sends",
        TOOLS,
    ) {
        return;
    }
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let mut t = Topo::new("sa");
    let ct = controller(&mut t, 16632, "OpenFlow13");
    switch(&mut t, 16632, "standalone");
    std::thread::sleep(Duration::from_millis(1500));
    assert!(t.ping(1, 2), "with the controller");
    t.kill(ct);
    // The connection ends at once (TCP reset): fail-open.
    std::thread::sleep(Duration::from_millis(500));
    t.ofctl("del-flows br0");
    assert!(t.ping(1, 3), "standalone after the controller is gone");
    assert!(t.ping(3, 2), "standalone after the controller is gone");
    // packet-out: a broadcast frame out of port 2 reaches h2.
    let rx = || -> u64 {
        let o = sh(&format!(
            "ip netns exec {} cat /sys/class/net/{}p2/statistics/rx_packets",
            t.ns(2),
            t.tag
        ));
        String::from_utf8_lossy(&o.stdout)
            .trim()
            .parse()
            .unwrap_or(0)
    };
    let before = rx();
    let frame = "ffffffffffff02000000000108060001080006040001020000000001\
                 0a4d00630000000000000a4d0002";
    for _ in 0..3 {
        t.ofctl(&format!(
            "-O OpenFlow13 packet-out br0 'in_port=CONTROLLER packet={frame} actions=output:2'"
        ));
    }
    let t0 = Instant::now();
    while rx() < before + 3 && t0.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        rx() >= before + 3,
        "packet-out frames reached h2 ({} -> {})",
        before,
        rx()
    );
}
