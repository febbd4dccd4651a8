//! Ports removed and added while the switch runs, on real interfaces:
//! three namespaces on veths behind a `NORMAL` switch; `dpctl/del-if`
//! cuts namespace 3 off at once (and releases its interface: it can be
//! added again), `dpctl/add-if` brings it back; `ovs-ofctl show` lists
//! the ports as they are, and an OpenFlow monitor gets the PORT_STATUS
//! messages (delete, add).

mod ofnet;

use ofnet::{can_run, wait_until, Topo};
use std::process::Command;
use std::time::Duration;

#[test]
fn a_port_removed_and_added_again_while_running() {
    if !can_run(
        "port_admin_live",
        &["ip", "ping", "ovs-ofctl", "ovs-appctl"],
    ) {
        return;
    }
    let mut t = Topo::new("pa");
    t.switch_with_rules("actions=NORMAL\n", &[]);
    assert!(t.ping(1, 3), "ping before: {}", t.log("switch.log"));
    // An OpenFlow monitor for the port changes (with a miss length: as in
    // Open vSwitch, a connection to br0.mgmt gets asynchronous messages
    // only once it asks; given half a second to start; it writes what it
    // saw when stopped with SIGTERM).
    let mut mon = Command::new("ovs-ofctl");
    mon.args(["monitor", "br0", "65534"])
        .env("OVS_RUNDIR", &t.dir);
    let m = t.start(mon, "monitor.log");
    std::thread::sleep(Duration::from_millis(500));
    let v3 = t.veth(3);
    let out = t.appctl(&format!("dpctl/del-if {v3}"));
    assert!(
        out.contains(&format!("port 3: afpacket:{v3} removed")),
        "{out}"
    );
    assert!(!t.ping(1, 3), "port 3 is gone");
    assert!(t.ping(1, 2), "the others go on");
    let show = t.ofctl("show br0");
    assert!(
        !show.contains(&format!("({v3})")) && !show.contains(" 3("),
        "{show}"
    );
    // Released: the same interface comes back as port 3.
    let out = t.appctl(&format!("dpctl/add-if 3=afpacket:{v3}"));
    assert!(
        out.contains(&format!("port 3: afpacket:{v3} added")),
        "{out}"
    );
    assert!(
        wait_until(Duration::from_secs(10), || t.ping(1, 3)),
        "ping after add-if: {}",
        t.log("switch.log")
    );
    let show = t.ofctl("show br0");
    assert!(show.contains(" 3("), "{show}");
    std::thread::sleep(Duration::from_millis(300));
    let pid = t.kids[m].id().to_string();
    let _ = Command::new("kill").arg(&pid).status();
    let _ = t.kids[m].wait();
    let log = t.log("monitor.log");
    let del = log.find("DEL: 3(").unwrap_or_else(|| panic!("{log}"));
    let add = log.find("ADD: 3(").unwrap_or_else(|| panic!("{log}"));
    assert!(del < add, "{log}");
}
