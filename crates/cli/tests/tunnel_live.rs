//! VXLAN between `flowpath switch` and the Linux kernel's own `vxlan`
//! device, as root: namespace 1 (10.88.0.1/24 on its veth) is behind the
//! switch's port 1; namespace 2 is the remote host: its veth
//! (10.77.0.2/24) is the switch's underlay, on which flowpath owns the
//! tunnel endpoint 10.77.0.100/24, and it holds a kernel `vxlan` device
//! (VNI 5, remote 10.77.0.100) with the overlay address 10.88.0.2/24.
//! The switch's port 10 is `vxlan:remote_ip=10.77.0.2,key=5`.
//!
//! Checked: ping both ways across the tunnel; the underlay neighbour
//! learned (`tnl/neigh/show`); `tnl_pop` and `tnl_push` megaflows in
//! `dpctl/dump-flows`; `tnl/ports/show` and `ovs/route/show`; iperf3 TCP
//! across the tunnel (the rate is printed). The namespaces, veths and the
//! switch (by PID) are removed even when a check fails.

mod ofnet;

use ofnet::{can_run, ok, sh, wait_until, Topo, BIN};
use std::process::Command;
use std::time::Duration;

const RULES: &str = "in_port=1,actions=output:10\nin_port=10,actions=output:1\n";

/// The topology, the switch started on it; `v6`: the underlay is IPv6
/// (fd00:77::2 and flowpath's fd00:77::100).
fn setup(t: &mut Topo, v6: bool) {
    let (h1, h2) = (t.ns(1), t.ns(2));
    let p2 = format!("{}p2", t.tag);
    // Host 1's overlay address on its link to port 1; host 2's on the
    // kernel's VXLAN device over its link to the underlay. Checksum
    // offload off on host 2's underlay link, as Open vSwitch's own system
    // tests do for tunnels.
    ok(&format!("ip -n {h1} addr add 10.88.0.1/24 dev {}p1", t.tag));
    let (remote, local, mine) = if v6 {
        ok(&format!(
            "ip netns exec {h2} sysctl -qw net.ipv6.conf.{p2}.disable_ipv6=0"
        ));
        ok(&format!("ip -n {h2} addr add fd00:77::2/64 dev {p2} nodad"));
        ("fd00:77::100", "fd00:77::2", "fd00:77::100/64")
    } else {
        ("10.77.0.100", "10.77.0.2", "10.77.0.100/24")
    };
    ok(&format!(
        "ip -n {h2} link add vx{0} type vxlan id 5 remote {remote} local {local} dstport 4789 dev {p2}",
        t.tag
    ));
    ok(&format!("ip -n {h2} addr add 10.88.0.2/24 dev vx{}", t.tag));
    ok(&format!("ip -n {h2} link set vx{} up", t.tag));
    let _ = sh(&format!("ip netns exec {h2} ethtool -K {p2} tx off"));
    // The overlay's MTU leaves room for the outer headers (the kernel's
    // device makes its own the same way).
    let mtu = if v6 { 1430 } else { 1450 };
    ok(&format!("ip -n {h1} link set {}p1 mtu {mtu}", t.tag));
    start(t, local, &format!("ip={mine}"));
    let mgmt = t.path("br0.mgmt");
    assert!(
        wait_until(Duration::from_secs(10), || mgmt.exists()),
        "switch did not start: {}",
        t.log("switch.log")
    );
}

/// Starts the switch: port 1 on veth 1, port 10 a VXLAN tunnel (VNI 5) to
/// `remote`, the underlay on veth 2 with `addrs` (`ip=...[,ip=...]`).
fn start(t: &mut Topo, remote: &str, addrs: &str) {
    let rules = t.path("tunnel.flows");
    std::fs::write(&rules, RULES).unwrap();
    let mut cmd = Command::new(BIN);
    cmd.arg("switch")
        .arg("--rules")
        .arg(&rules)
        .arg("--port")
        .arg(format!("1=afpacket:{}", t.veth(1)))
        .arg("--port")
        .arg(format!("10=vxlan:remote_ip={remote},key=5"))
        .arg("--underlay")
        .arg(format!("afpacket:{},{addrs}", t.veth(2)))
        .arg("--ctl")
        .arg(t.path("flowpath.ctl"));
    t.start(cmd, "switch.log");
}

fn ctl(t: &Topo, args: &[&str]) -> String {
    let o = Command::new(BIN)
        .arg("ctl")
        .arg("--ctl")
        .arg(t.path("flowpath.ctl"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "ctl {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn ping(t: &Topo, from: u32, to: &str) -> bool {
    t.in_ns(from, 10, &format!("ping -c 3 -i 0.2 -W 2 {to}"))
        .status
        .success()
}

#[test]
fn vxlan_with_the_kernel() {
    if !can_run("vxlan_with_the_kernel", &["ip", "ping", "iperf3"]) {
        return;
    }
    let mut t = Topo::new("vx");
    setup(&mut t, false);
    check(&t, "10.77.0.2 ");
}

/// The same over an IPv6 underlay: the kernel finds flowpath's endpoint by
/// neighbour discovery, flowpath the kernel's by a solicitation.
#[test]
fn vxlan_with_the_kernel_over_ipv6() {
    if !can_run("vxlan_with_the_kernel_over_ipv6", &["ip", "ping", "iperf3"]) {
        return;
    }
    let mut t = Topo::new("v6");
    setup(&mut t, true);
    check(&t, "fd00:77::2 ");
}

/// Duplicate address detection on the underlay: namespace 2 already has
/// the IPv6 endpoint address flowpath is given; the switch says so and
/// drops it (no route through it), keeping its IPv4 one.
#[test]
fn a_duplicate_ipv6_endpoint_address_is_detected() {
    if !can_run("a_duplicate_ipv6_endpoint_address_is_detected", &["ip"]) {
        return;
    }
    let mut t = Topo::new("dd");
    let (h2, p2) = (t.ns(2), format!("{}p2", t.tag));
    ok(&format!(
        "ip netns exec {h2} sysctl -qw net.ipv6.conf.{p2}.disable_ipv6=0"
    ));
    ok(&format!(
        "ip -n {h2} addr add fd00:77::100/64 dev {p2} nodad"
    ));
    start(&mut t, "fd00:77::2", "ip=fd00:77::100/64,ip=10.77.0.100/24");
    assert!(
        wait_until(Duration::from_secs(10), || t
            .log("switch.log")
            .contains("fd00:77::100 is in use by another node")),
        "{}",
        t.log("switch.log")
    );
    let routes = ctl(&t, &["ovs/route/show"]);
    assert!(
        !routes.contains("fd00:77::") && routes.contains("10.77.0.0/24"),
        "{routes}"
    );
}

/// The kernel as the other node: once the switch's IPv6 endpoint address
/// is usable, a namespace given the same address (with detection)
/// hears it defended and marks its copy `dadfailed`; the switch keeps it.
#[test]
fn a_usable_ipv6_endpoint_address_is_defended() {
    if !can_run("a_usable_ipv6_endpoint_address_is_defended", &["ip"]) {
        return;
    }
    let mut t = Topo::new("df");
    let (h2, p2) = (t.ns(2), format!("{}p2", t.tag));
    ok(&format!(
        "ip netns exec {h2} sysctl -qw net.ipv6.conf.{p2}.disable_ipv6=0 net.ipv6.conf.{p2}.accept_dad=1"
    ));
    start(&mut t, "fd00:78::2", "ip=fd00:78::100/64");
    let sock = t.path("flowpath.ctl");
    assert!(
        wait_until(Duration::from_secs(10), || sock.exists()),
        "{}",
        t.log("switch.log")
    );
    // Our own detection first: a solicitation in the neighbour thread's
    // first round, then a second's wait; the address is usable after it
    // (a detection meanwhile would be simultaneous: both give up).
    std::thread::sleep(Duration::from_secs(3));
    assert!(ctl(&t, &["ovs/route/show"]).contains("fd00:78::"));
    ok(&format!("ip -n {h2} addr add fd00:78::100/64 dev {p2}"));
    let show = || {
        std::process::Command::new("ip")
            .args(["-n", &h2, "-6", "addr", "show", "dev", &p2])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    };
    assert!(
        wait_until(Duration::from_secs(10), || show().contains("dadfailed")),
        "the kernel's detection did not fail: {}\n{}",
        show(),
        t.log("switch.log")
    );
    assert!(
        ctl(&t, &["ovs/route/show"]).contains("fd00:78::"),
        "the switch keeps its address"
    );
    assert!(!t.log("switch.log").contains("fd00:78::100 is in use"));
}

/// Ping both ways, the neighbour `neigh` learned, the megaflows and
/// commands, iperf3.
fn check(t: &Topo, neigh_ip: &str) {
    // The first pings may be lost while the neighbours are learned.
    assert!(
        wait_until(Duration::from_secs(10), || ping(t, 1, "10.88.0.2")),
        "no ping across the tunnel: {}\n{}\n{}",
        ctl(t, &["tnl/neigh/show"]),
        ctl(t, &["dpctl/dump-flows"]),
        t.log("switch.log")
    );
    assert!(ping(t, 2, "10.88.0.1"), "no ping back");
    let neigh = ctl(t, &["tnl/neigh/show"]);
    assert!(neigh.contains(neigh_ip), "{neigh}");
    let flows = ctl(t, &["dpctl/dump-flows"]);
    assert!(flows.contains("tnl_pop("), "{flows}");
    assert!(flows.contains("tnl_push(tnl_port("), "{flows}");
    assert!(flows.contains("vxlan(flags=0x8000000,vni=0x5)"), "{flows}");
    let ports = ctl(t, &["tnl/ports/show"]);
    assert!(ports.contains("vxlan_sys_4789"), "{ports}");
    let routes = ctl(t, &["ovs/route/show"]);
    assert!(routes.contains(" dev "), "{routes}");
    // TCP across the tunnel, both offload directions.
    let bps = t.iperf3_bps(2, "10.88.0.2", 1);
    eprintln!(
        "iperf3 over VXLAN ({}underlay; flowpath afpacket ↔ kernel vxlan): {:.2} Gbit/s",
        neigh_ip,
        bps / 1e9
    );
    assert!(bps > 0.0, "no TCP across the tunnel");
}

/// A veth pair in the root namespace, removed when dropped.
struct Link(String);

impl Drop for Link {
    fn drop(&mut self) {
        let _ = sh(&format!("ip link del {}", self.0));
    }
}

/// Two `flowpath switch`es joined by a tunnel of `kind` over an underlay
/// veth pair: namespace 1 (10.88.0.1) behind switch A's port 1,
/// namespace 2 (10.88.0.2) behind switch B's; ping both ways.
fn two_switches(name: &str, tag: &str, kind: &str, v6: bool, opts: bool) {
    if !can_run(name, &["ip", "ping", "ovs-ofctl"]) {
        return;
    }
    let mut t = Topo::new(tag);
    let (ua, ub) = (format!("{}ua", t.tag), format!("{}ub", t.tag));
    ok(&format!("ip link add {ua} type veth peer name {ub}"));
    let _link = Link(ua.clone());
    ok(&format!("ip link set {ua} up && ip link set {ub} up"));
    for i in 1..=2 {
        ok(&format!(
            "ip -n {} addr add 10.88.0.{i}/24 dev {}p{i} && ip -n {} link set {}p{i} mtu 1400",
            t.ns(i),
            t.tag,
            t.ns(i),
            t.tag
        ));
    }
    let addr = |i: u32| {
        if v6 {
            format!("fd00:99::{i}")
        } else {
            format!("10.99.0.{i}")
        }
    };
    let plen = if v6 { 64 } else { 24 };
    for (i, (port, under, peer)) in [(1, &ua, 2), (2, &ub, 1)].into_iter().enumerate() {
        let sw = ["A", "B"][i];
        // With options: each side sends its own value in tun_metadata0
        // and takes only the other's.
        let rules = t.path(&format!("{sw}.flows"));
        let text = if opts {
            let (mine, theirs) = [(0xa1, 0xb2), (0xb2, 0xa1)][i];
            format!(
                "in_port=1,actions=set_field:{mine:#x}->tun_metadata0,output:10\n\
                 in_port=10,tun_metadata0={theirs:#x},actions=output:1\n\
                 priority=1,actions=drop\n"
            )
        } else {
            RULES.to_string()
        };
        std::fs::write(&rules, text).unwrap();
        let mut cmd = Command::new(BIN);
        cmd.arg("switch")
            .arg("--rules")
            .arg(&rules)
            .arg("--port")
            .arg(format!("1=afpacket:{}", t.veth(port)))
            .arg("--port")
            .arg(format!("10={kind}:remote_ip={},key=7", addr(peer)))
            .arg("--underlay")
            .arg(format!("afpacket:{under},ip={}/{plen}", addr(port)))
            .arg("--bridge")
            .arg(format!("br{sw}"))
            .arg("--ctl")
            .arg(t.path(&format!("{sw}.ctl")));
        t.start(cmd, &format!("{sw}.log"));
        let mgmt = t.path(&format!("br{sw}.mgmt"));
        assert!(
            wait_until(Duration::from_secs(10), || mgmt.exists()),
            "switch {sw} did not start: {}",
            t.log(&format!("{sw}.log"))
        );
        if opts && sw == "A" {
            ok(&format!(
                "{BIN} ctl --ctl {} add-tlv-map br{sw} '{{class=0x102,type=0x80,len=4}}->tun_metadata0'",
                t.path(&format!("{sw}.ctl")).display()
            ));
        } else if opts {
            // Over OpenFlow, as a controller (OVN's) maps its option.
            t.ofctl("add-tlv-map brB '{class=0x102,type=0x80,len=4}->tun_metadata0'");
            let dump = t.ofctl("dump-tlv-map brB");
            assert!(
                dump.contains("  0x102  0x80       4  tun_metadata0"),
                "{dump}"
            );
            let e =
                t.ofctl_output("add-tlv-map brB '{class=0x102,type=0x81,len=4}->tun_metadata0'");
            assert!(
                String::from_utf8_lossy(&e.stderr).contains("NXTTMFC_ALREADY_MAPPED"),
                "{}",
                String::from_utf8_lossy(&e.stderr)
            );
        }
    }
    let dump = |sw: &str| {
        let o = Command::new(BIN)
            .args(["ctl", "--ctl"])
            .arg(t.path(&format!("{sw}.ctl")))
            .arg("dpctl/dump-flows")
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    assert!(
        wait_until(Duration::from_secs(10), || ping(&t, 1, "10.88.0.2")),
        "{kind}: no ping across the tunnel:\nA: {}\nB: {}\n{}\n{}",
        dump("A"),
        dump("B"),
        t.log("A.log"),
        t.log("B.log")
    );
    assert!(ping(&t, 2, "10.88.0.1"), "{kind}: no ping back");
    let a = dump("A");
    let want = if kind == "gre" {
        "gre((flags=0x2000,proto=0x6558),key=0x7)"
    } else if opts {
        "geneve(crit,vni=0x7,"
    } else {
        "geneve(vni=0x7)"
    };
    assert!(a.contains(want), "{a}");
    assert!(a.contains("tun_id=0x7,"), "{a}");
    if opts {
        assert!(
            a.contains("options({class=0x102,type=0x80,len=4,0xa1})")
                && a.contains("tun_metadata0=0xb2"),
            "{a}"
        );
        // The rules use tun_metadata0: its mapping stays, over OpenFlow
        // and on the control socket, as OVS refuses it.
        let e = t.ofctl_output("del-tlv-map brB");
        assert!(
            String::from_utf8_lossy(&e.stderr).contains("NXTTMFC_INVALID_TLV_DEL"),
            "{}",
            String::from_utf8_lossy(&e.stderr)
        );
        assert!(t.ofctl("dump-tlv-map brB").contains("tun_metadata0"));
        let o = Command::new(BIN)
            .args(["ctl", "--ctl"])
            .arg(t.path("A.ctl"))
            .args(["del-tlv-map", "brA"])
            .output()
            .unwrap();
        assert!(
            !o.status.success()
                && String::from_utf8_lossy(&o.stderr).contains("tun_metadata0 is used"),
            "{o:?}"
        );
    }
}

#[test]
fn geneve_between_two_switches() {
    two_switches("geneve_between_two_switches", "gv", "geneve", false, false);
}

#[test]
fn gre_between_two_switches() {
    two_switches("gre_between_two_switches", "gr", "gre", false, false);
}

#[test]
fn geneve_between_two_switches_over_ipv6() {
    two_switches(
        "geneve_between_two_switches_over_ipv6",
        "g6",
        "geneve",
        true,
        false,
    );
}

/// Geneve with an option set by a rule on one side and read by a rule on
/// the other (each side's rule takes only the other's value).
#[test]
fn geneve_options_between_two_switches() {
    two_switches(
        "geneve_options_between_two_switches",
        "go",
        "geneve",
        false,
        true,
    );
}
