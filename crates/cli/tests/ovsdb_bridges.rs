//! Several bridges from the OVSDB in one `flowpath switch`, joined by
//! patch ports, as OVN lays out a host (`br-int` for the workloads,
//! `br-ex` for the physical network, a patch pair between them): only
//! `ovs-vsctl`, `ovs-ofctl` and `ovs-appctl` drive it. Pings cross both
//! bridges; each bridge has its own OpenFlow socket and tables (a drop
//! flow on the second bridge cuts the path); commands name the bridge;
//! removing the second bridge stops it and frees its interface, adding it
//! again restores the path; a restarted switch rebuilds both.

mod ofnet;

use ofnet::{can_run, new_db, sh, start_switch, vsctl, wait_until, Topo};
use std::time::Duration;

/// Whether the tools (space-separated) are here and this runs as root;
/// then the test's turn among the bridge-making tests.
fn ready(tools: &str) -> Option<std::sync::MutexGuard<'static, ()>> {
    let tools: Vec<&str> = tools.split(' ').collect();
    can_run("ovsdb_bridges", &tools).then(ofnet::one_bridge_at_a_time)
}

#[test]
fn two_bridges_joined_by_patch_ports() {
    let Some(_one) = ready("ip ping ovsdb-server ovsdb-tool ovs-vsctl ovs-ofctl ovs-appctl") else {
        return;
    };
    let mut t = Topo::new("ob");
    let dir = t.dir.clone();
    new_db(&mut t);
    let mut sw = start_switch(&mut t);
    let (v1, v2) = (t.veth(1), t.veth(2));
    let add_ex = format!(
        "add-br br-ex -- set bridge br-ex datapath_type=netdev \
         -- add-port br-ex {v2} \
         -- add-port br-ex patch-int -- set Interface patch-int type=patch options:peer=patch-ex"
    );
    vsctl(&dir, "add-br br0 -- set bridge br0 datapath_type=netdev");
    vsctl(&dir, &format!("add-port br0 {v1}"));
    vsctl(
        &dir,
        "add-port br0 patch-ex -- set Interface patch-ex type=patch options:peer=patch-int",
    );
    vsctl(&dir, &add_ex);
    // Each bridge has its own OpenFlow socket.
    t.ofctl("add-flow br0 priority=0,actions=NORMAL");
    t.ofctl("add-flow br-ex priority=0,actions=NORMAL");
    assert!(
        wait_until(Duration::from_secs(10), || t.ping(1, 2)),
        "ping 1 -> 2 across br0, the patch pair and br-ex: {}",
        t.log("switch.log")
    );
    assert_eq!(vsctl(&dir, &format!("get Interface {v1} ofport")), "1");
    assert_eq!(vsctl(&dir, "get Interface patch-ex ofport"), "2");
    // (br-ex's two ports came in one transaction: either order.)
    let pi = vsctl(&dir, "get Interface patch-int ofport");
    let mut nums = [
        vsctl(&dir, &format!("get Interface {v2} ofport")),
        pi.clone(),
    ];
    nums.sort();
    assert_eq!(nums, ["1", "2"]);
    assert_eq!(vsctl(&dir, "get Interface br-ex ofport"), "65534");
    let show = t.ofctl("show br-ex");
    assert!(
        show.contains(&format!("{pi}(patch-int)")) && show.contains(&v2) && !show.contains(&v1),
        "{show}"
    );
    // Two datapath ids (the first bridge's is 1).
    let dpid = vsctl(&dir, "get Bridge br-ex datapath_id");
    assert!(dpid.len() == 18 && dpid != "\"0000000000000001\"", "{dpid}");
    assert!(
        show.contains(&format!("dpid:{}", dpid.trim_matches('"'))),
        "{show}"
    );
    // One control socket: commands name the bridge.
    let list = t.appctl("ofproto/list");
    assert_eq!(list.lines().collect::<Vec<_>>(), ["br0", "br-ex"], "{list}");
    let fdb = t.appctl("fdb/show br-ex");
    assert!(
        fdb.lines()
            .any(|l| l.split_whitespace().next() == Some(pi.as_str())),
        "br-ex learned a MAC behind its patch port ({pi}): {fdb}"
    );
    // Each bridge is its own datapath: h1's ARP request came in on
    // br0's port 1 and on br-ex's patch port.
    let arp_in = |dump: &str| -> Option<String> {
        dump.lines()
            .find(|l| l.contains("arp_spa=10.77.0.1") && l.contains("ff:ff:ff:ff:ff:ff"))
            .and_then(|l| l.split(',').find(|f| f.starts_with("in_port=")))
            .map(str::to_string)
    };
    let ex = t.appctl("dpctl/dump-flows br-ex");
    let br0 = t.appctl("dpctl/dump-flows");
    assert_eq!(arp_in(&ex), Some(format!("in_port={pi}")), "{ex}");
    assert_eq!(arp_in(&br0), Some("in_port=1".to_string()), "{br0}");
    // Each bridge's LOCAL port is a tap named after it: the host reaches
    // h2 through br-ex's, and h1 beyond the patch pair.
    assert!(sh("ip link show br-ex").status.success());
    assert!(sh("ip addr add 10.77.0.200/24 dev br-ex").status.success());
    for to in ["10.77.0.2", "10.77.0.1"] {
        assert!(
            wait_until(Duration::from_secs(10), || sh(&format!(
                "ping -c 1 -W 1 {to}"
            ))
            .status
            .success()),
            "the host through br-ex's LOCAL port to {to}"
        );
    }
    // OVS-DPDK's server-mode vhost-user interface: a socket named after
    // it in the run directory, for a VM to attach to.
    vsctl(
        &dir,
        "add-port br0 vhu0 -- set Interface vhu0 type=dpdkvhostuser",
    );
    assert_eq!(vsctl(&dir, "get Interface vhu0 ofport"), "3");
    {
        use std::os::unix::fs::FileTypeExt;
        let m = std::fs::metadata(dir.join("vhu0")).expect("the vhost-user socket");
        assert!(m.file_type().is_socket());
    }
    assert!(t.appctl("dpctl/show").contains("vhost-user"));
    vsctl(&dir, "del-port br0 vhu0");
    // The second bridge's tables are in the path (and the trace names it).
    let trace = t.appctl(&format!(
        "ofproto/trace br-ex in_port={pi},dl_dst=ff:ff:ff:ff:ff:ff"
    ));
    assert!(
        trace.contains("bridge(\"br-ex\")\n---------------\n") && trace.contains("NORMAL"),
        "{trace}"
    );
    t.ofctl(&format!(
        "add-flow br-ex priority=100,in_port={pi},actions=drop"
    ));
    assert!(
        wait_until(Duration::from_secs(10), || !t.ping(1, 2)),
        "a drop flow on br-ex's patch port cuts the path: {}\n{}\n{}",
        t.ofctl("dump-flows br-ex"),
        t.appctl("dpctl/dump-flows br-ex"),
        t.log("switch.log")
    );
    t.ofctl(&format!("del-flows br-ex in_port={pi}"));
    assert!(wait_until(Duration::from_secs(10), || t.ping(1, 2)));
    // Removing br-ex stops it: its socket goes, its interface is freed.
    vsctl(&dir, "del-br br-ex");
    assert!(!t.ping(1, 2));
    assert!(!dir.join("br-ex.mgmt").exists(), "br-ex.mgmt removed");
    assert!(
        !sh("ip link show br-ex").status.success(),
        "br-ex's tap removed"
    );
    assert_eq!(t.appctl("ofproto/list").trim(), "br0");
    assert_eq!(vsctl(&dir, "get Interface patch-ex ofport"), "2");
    vsctl(&dir, &add_ex);
    t.ofctl("add-flow br-ex actions=NORMAL");
    assert!(
        wait_until(Duration::from_secs(10), || t.ping(1, 2)),
        "br-ex added again: {}",
        t.log("switch.log")
    );
    let pi = vsctl(&dir, "get Interface patch-int ofport");
    // A restarted switch rebuilds both bridges from the database (the
    // flows come from OpenFlow, so they are set again).
    t.kill(sw);
    sw = start_switch(&mut t);
    // (The killed switch left its sockets' files: wait for answers.)
    for br in ["br0", "br-ex"] {
        assert!(
            wait_until(Duration::from_secs(10), || t
                .ofctl_output(&format!("show {br}"))
                .status
                .success()),
            "{br} after a restart: {}",
            t.log("switch.log")
        );
    }
    t.ofctl("add-flow br0 actions=NORMAL");
    t.ofctl("add-flow br-ex actions=NORMAL");
    assert!(
        wait_until(Duration::from_secs(10), || t.ping(1, 2)),
        "after a restart: {}",
        t.log("switch.log")
    );
    assert_eq!(vsctl(&dir, "get Interface patch-int ofport"), pi);
    t.kill(sw);
}

/// The core whose PMD polls interface `iface` in `pmd-rxq-show`.
fn core_polling(t: &Topo, iface: &str) -> Option<String> {
    let show = t.appctl("dpif-netdev/pmd-rxq-show");
    let mut core = None;
    for l in show.lines() {
        if let Some(rest) = l.strip_prefix("pmd thread numa_id 0 core_id ") {
            core = Some(rest.trim_end_matches(':').to_string());
        } else if l.contains("port:") && l.contains(iface) {
            return core;
        }
    }
    None
}

#[test]
fn pmd_cpu_mask_and_rxq_affinity_from_the_database() {
    let Some(_one) = ready("ip ping ovsdb-server ovsdb-tool ovs-vsctl ovs-ofctl ovs-appctl") else {
        return;
    };
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("ovsdb_bridges: skipped (needs 2 CPUs)");
        return;
    }
    let mut t = Topo::new("oc");
    let dir = t.dir.clone();
    new_db(&mut t);
    // The mask in the database when the switch starts: its PMDs.
    vsctl(
        &dir,
        "--no-wait set Open_vSwitch . other_config:pmd-cpu-mask=0x1",
    );
    let mut sw = start_switch(&mut t);
    let (v1, v2) = (t.veth(1), t.veth(2));
    vsctl(&dir, "add-br br0 -- set bridge br0 datapath_type=netdev");
    vsctl(&dir, &format!("add-port br0 {v1} -- add-port br0 {v2}"));
    t.ofctl("add-flow br0 actions=NORMAL");
    assert!(wait_until(Duration::from_secs(10), || t.ping(1, 2)));
    assert_eq!(core_polling(&t, &v1).as_deref(), Some("0"));
    // A mask with as many CPUs moves the PMD thread.
    vsctl(&dir, "set Open_vSwitch . other_config:pmd-cpu-mask=0x2");
    assert_eq!(
        core_polling(&t, &v1).as_deref(),
        Some("1"),
        "{}",
        t.log("switch.log")
    );
    assert!(t.ping(1, 2));
    // Another number of CPUs replaces the PMD threads: two now, the
    // queues spread over them; forwarding goes on.
    vsctl(&dir, "set Open_vSwitch . other_config:pmd-cpu-mask=0x3");
    let show = t.appctl("dpif-netdev/pmd-rxq-show");
    assert_eq!(
        show.matches("pmd thread numa_id 0 core_id").count(),
        2,
        "{show}\n{}",
        t.log("switch.log")
    );
    assert_ne!(core_polling(&t, &v1), core_polling(&t, &v2), "{show}");
    assert!(wait_until(Duration::from_secs(10), || t.ping(1, 2)));
    // And back to one.
    vsctl(&dir, "set Open_vSwitch . other_config:pmd-cpu-mask=0x1");
    let show = t.appctl("dpif-netdev/pmd-rxq-show");
    assert_eq!(show.matches("core_id").count(), 1, "{show}");
    assert_eq!(core_polling(&t, &v2).as_deref(), Some("0"));
    assert!(wait_until(Duration::from_secs(10), || t.ping(1, 2)));
    // Restarted, the switch makes a PMD thread per CPU of the mask; the
    // interfaces' queues go where pmd-rxq-affinity says, and move when
    // it changes.
    t.kill(sw);
    vsctl(
        &dir,
        "--no-wait set Open_vSwitch . other_config:pmd-cpu-mask=0x3",
    );
    vsctl(
        &dir,
        &format!("--no-wait set Interface {v1} other_config:pmd-rxq-affinity=0:1"),
    );
    vsctl(
        &dir,
        &format!("--no-wait set Interface {v2} other_config:pmd-rxq-affinity=0:0"),
    );
    sw = start_switch(&mut t);
    assert!(
        wait_until(Duration::from_secs(10), || t
            .ofctl_output("show br0")
            .status
            .success()),
        "{}",
        t.log("switch.log")
    );
    assert!(
        wait_until(Duration::from_secs(10), || core_polling(&t, &v1).as_deref()
            == Some("1")
            && core_polling(&t, &v2).as_deref() == Some("0")),
        "{}",
        t.appctl("dpif-netdev/pmd-rxq-show")
    );
    vsctl(
        &dir,
        &format!("set Interface {v1} other_config:pmd-rxq-affinity=0:0"),
    );
    assert_eq!(core_polling(&t, &v1).as_deref(), Some("0"));
    vsctl(
        &dir,
        &format!("set Interface {v2} other_config:pmd-rxq-affinity=0:1"),
    );
    assert_eq!(core_polling(&t, &v2).as_deref(), Some("1"));
    t.ofctl("add-flow br0 actions=NORMAL");
    assert!(wait_until(Duration::from_secs(10), || t.ping(1, 2)));
    t.kill(sw);
}

/// A `Controller` row's `inactivity_probe` (ms): a controller that
/// answers HELLO and then stays silent gets an echo request after the
/// probe and its connection is dropped after twice that (the switch
/// connects again); `inactivity_probe=0` stops the probing.
#[test]
fn controller_inactivity_probe_from_the_database() {
    let Some(_one) = ready("ip python3 ovsdb-server ovsdb-tool ovs-vsctl") else {
        return;
    };
    let mut t = Topo::bare("op");
    let dir = t.dir.clone();
    new_db(&mut t);
    let port = 20000 + std::process::id() % 10000;
    let counts = dir.join("counts");
    // A controller that says HELLO and nothing else; it writes how many
    // connections and echo requests it saw.
    let script = format!(
        r#"
import socket, threading
conns = echoes = 0
lock = threading.Lock()
def save():
    open("{counts}", "w").write("%d %d" % (conns, echoes))
def serve(c):
    global echoes
    c.sendall(bytes([4, 0, 0, 8, 0, 0, 0, 1]))
    buf = b""
    while True:
        d = c.recv(65536)
        if not d:
            return
        buf += d
        while len(buf) >= 8:
            n = int.from_bytes(buf[2:4], "big")
            if len(buf) < n:
                break
            if buf[1] == 2:
                with lock:
                    echoes += 1
                    save()
            buf = buf[n:]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", {port}))
s.listen(8)
save()
while True:
    c, _ = s.accept()
    with lock:
        conns += 1
        save()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#,
        counts = counts.display()
    );
    let mut py = std::process::Command::new("python3");
    py.arg("-c").arg(script);
    t.start(py, "controller.log");
    assert!(wait_until(Duration::from_secs(5), || counts.exists()));
    let read = || -> (u32, u32) {
        let s = std::fs::read_to_string(&counts).unwrap_or_default();
        let mut it = s.split_whitespace().map(|x| x.parse().unwrap_or(0));
        (it.next().unwrap_or(0), it.next().unwrap_or(0))
    };
    let sw = start_switch(&mut t);
    vsctl(&dir, "add-br br0 -- set bridge br0 datapath_type=netdev");
    vsctl(
        &dir,
        &format!(
            "set-controller br0 tcp:127.0.0.1:{port} -- set Controller br0 inactivity_probe=500"
        ),
    );
    assert!(
        wait_until(Duration::from_secs(8), || {
            let (c, e) = read();
            c >= 2 && e >= 1
        }),
        "probed and dropped: (connections, echo requests) = {:?}\n{}",
        read(),
        t.log("switch.log")
    );
    // No probing: the connection stays, no echo request.
    vsctl(&dir, "set Controller br0 inactivity_probe=0");
    // (The connection up when the change came may still be probed once.)
    std::thread::sleep(Duration::from_millis(1500));
    let before = read();
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(read(), before, "inactivity_probe=0: nothing more");
    t.kill(sw);
}
