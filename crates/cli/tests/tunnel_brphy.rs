//! Open vSwitch's userspace-tunnelling layout driven only by `ovs-vsctl`,
//! `ovs-appctl` and `ip`, as its documentation sets it up: `br0` holds
//! namespace 1's port and a VXLAN tunnel port; `br-phy` holds the
//! physical port (namespace 2's veth) and carries the tunnel endpoint's
//! address in the kernel (`ip addr add 172.31.77.100/24 dev br-phy`), no
//! `--underlay`. Namespace 2 is the remote host with the kernel's own
//! `vxlan` device (VNI 5, remote 172.31.77.100) and the overlay address
//! 10.88.0.2/24.
//!
//! Both over an IPv4 and an IPv6 underlay (fd00:77::100 on br-phy).
//!
//! Checked: ping across the tunnel; the host still owns the endpoint
//! address (it pings namespace 2 through `br-phy`, the kernel answering
//! ARP); `ovs/route/show` lists the kernel's route through `br-phy`;
//! `tnl/neigh/show` the learned remote; `tnl_push` and `tnl_pop` in
//! `br0`'s megaflows, and the outer packets through `br-phy`'s; iperf3
//! TCP across the tunnel (the rate is printed). The
//! namespaces, veths, bridges' taps and the processes (by PID) go even
//! when a check fails.

mod ofnet;

use ofnet::{can_run, new_db, ok, sh, start_switch, vsctl, wait_until, Topo};
use std::time::Duration;

#[test]
fn vxlan_over_a_br_phy_bridge_from_the_database() {
    run("tp", false);
}

/// The same over an IPv6 underlay: the kernel answers neighbour
/// solicitations for br-phy's address; flowpath learns the remote from
/// its advertisement.
#[test]
fn vxlan_over_a_br_phy_bridge_over_ipv6() {
    run("t6", true);
}

/// The layout over an IPv4 or (`v6`) IPv6 underlay; `name` tags the
/// namespaces.
fn run(name: &str, v6: bool) {
    let tools = [
        "ip",
        "ping",
        "ovsdb-server",
        "ovsdb-tool",
        "ovs-vsctl",
        "ovs-appctl",
        "iperf3",
    ];
    if !can_run("tunnel_brphy", &tools) {
        return;
    }
    let _one = ofnet::one_bridge_at_a_time();
    let mut t = Topo::new(name);
    // (remote host, endpoint, subnet's prefix length, the routes' text)
    let (remote, me, plen, net) = if v6 {
        ("fd00:77::2", "fd00:77::100", 64, "fd00:77::/64")
    } else {
        ("172.31.77.2", "172.31.77.100", 24, "172.31.77.0/24")
    };
    let nodad = if v6 { " nodad" } else { "" };
    let dir = t.dir.clone();
    let (h1, h2) = (t.ns(1), t.ns(2));
    let (p1, p2, vx) = (
        format!("{}p1", t.tag),
        format!("{}p2", t.tag),
        format!("vx{}", t.tag),
    );
    ok(&format!("ip -n {h1} addr add 10.88.0.1/24 dev {p1}"));
    let mtu = if v6 { 1430 } else { 1450 };
    ok(&format!("ip -n {h1} link set {p1} mtu {mtu}"));
    if v6 {
        ok(&format!(
            "ip netns exec {h2} sysctl -qw net.ipv6.conf.{p2}.disable_ipv6=0"
        ));
    }
    ok(&format!(
        "ip -n {h2} addr add {remote}/{plen} dev {p2}{nodad}"
    ));
    ok(&format!(
        "ip -n {h2} link add {vx} type vxlan id 5 remote {me} local {remote} dstport 4789 dev {p2}"
    ));
    ok(&format!("ip -n {h2} addr add 10.88.0.2/24 dev {vx}"));
    ok(&format!("ip -n {h2} link set {vx} up"));
    let _ = sh(&format!("ip netns exec {h2} ethtool -K {p2} tx off"));
    new_db(&mut t);
    let sw = start_switch(&mut t);
    vsctl(&dir, "add-br br0 -- set bridge br0 datapath_type=netdev");
    vsctl(&dir, &format!("add-port br0 {}", t.veth(1)));
    vsctl(
        &dir,
        "add-br br-phy -- set bridge br-phy datapath_type=netdev",
    );
    vsctl(&dir, &format!("add-port br-phy {}", t.veth(2)));
    assert!(
        wait_until(Duration::from_secs(10), || sh("ip link show br-phy")
            .status
            .success()),
        "br-phy's tap: {}",
        t.log("switch.log")
    );
    ok(&format!("ip addr add {me}/{plen} dev br-phy{nodad}"));
    ok("ip link set br-phy up");
    vsctl(
        &dir,
        &format!("add-port br0 vx1 -- set interface vx1 type=vxlan options:remote_ip={remote} options:key=5"),
    );
    t.ofctl("add-flow br0 actions=NORMAL");
    t.ofctl("add-flow br-phy actions=NORMAL");
    let ping = |to: &str| {
        t.in_ns(1, 10, &format!("ping -c 2 -i 0.2 -W 2 {to}"))
            .status
            .success()
    };
    assert!(
        wait_until(Duration::from_secs(15), || ping("10.88.0.2")),
        "no ping across the tunnel over br-phy: {}\n{}\n{}\n{}",
        t.appctl("tnl/neigh/show"),
        t.appctl("ovs/route/show"),
        t.appctl("dpctl/dump-flows br-phy"),
        t.log("switch.log")
    );
    // The host still owns the address: the kernel answers ARP through
    // br-phy's tap, and reaches namespace 2 itself.
    assert!(
        sh(&format!("ping -c 2 -i 0.2 -W 2 {remote}"))
            .status
            .success(),
        "the host through br-phy"
    );
    let routes = t.appctl("ovs/route/show");
    assert!(
        routes.contains(&format!("Cached: {net} dev br-phy SRC {me}")),
        "{routes}"
    );
    let neigh = t.appctl("tnl/neigh/show");
    assert!(
        neigh
            .lines()
            .any(|l| l.starts_with(&format!("{remote} ")) && l.contains("br-phy")),
        "{neigh}"
    );
    let flows = t.appctl("dpctl/dump-flows br0");
    assert!(
        flows.contains("tnl_push(tnl_port(65024),")
            && flows.contains(&format!("src={me},dst={remote}"))
            && flows.contains("actions:tnl_pop(65024)"),
        "{flows}"
    );
    // br-phy carried the outer packets between its LOCAL port and the
    // physical one.
    let phy = t.appctl("dpctl/dump-flows br-phy");
    let ip = if v6 { "ipv6" } else { "ip" };
    let used = |from: &str, to: &str| {
        phy.lines().any(|l| {
            l.contains(&format!("eth,{ip},in_port={from},"))
                && l.ends_with(&format!("actions:{to}"))
                && !l.contains("packets:0,")
        })
    };
    assert!(used("65534", "1") && used("1", "65534"), "{phy}");
    let bps = t.iperf3_bps(2, "10.88.0.2", 1);
    eprintln!(
        "iperf3 over VXLAN through br-phy ({me}; flowpath afpacket ↔ kernel vxlan): {:.2} Gbit/s",
        bps / 1e9
    );
    assert!(bps > 0.0, "no TCP across the tunnel");
    t.kill(sw);
}
