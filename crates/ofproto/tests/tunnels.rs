//! Native tunnelling in translation: outputs to tunnel ports, the
//! underlay's ARP and tunnel packets, and decapsulated packets' in_port.

use flowpath_odp::format_actions;
use flowpath_ofproto::parse::{parse_packet, parse_rules};
use flowpath_ofproto::tables::RuleTables;
use flowpath_ofproto::tunnel::{TunnelPort, Tunnels, Underlay, FIRST_VPORT, UNDERLAY_PORT};
use flowpath_ofproto::xlate::{xlate_on, XlateMode};
use std::net::IpAddr;
use std::sync::Arc;

const LEARN: XlateMode = XlateMode {
    trace: true,
    record: false,
    learn: true,
    relearn: false,
};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn setup() -> (RuleTables, Arc<Tunnels>) {
    let rules = parse_rules(
        "in_port=1,actions=output:10\nin_port=10,actions=output:1\nin_port=2,actions=set_field:172.31.1.7->tun_dst,set_field:9->tun_id,output:11\n",
        None,
    )
    .unwrap();
    let mut t = RuleTables::new(rules, &[]);
    let tun = Arc::new(Tunnels::new(
        vec![
            TunnelPort::parse(10, "vxlan:remote_ip=172.31.1.1,key=5").unwrap(),
            TunnelPort::parse(11, "geneve:remote_ip=flow,key=flow").unwrap(),
        ],
        Some(Underlay {
            port: UNDERLAY_PORT,
            name: "u0".into(),
            mac: [2, 0, 0, 0, 0, 0x64],
            addrs: vec![(ip("172.31.1.100"), 24), (ip("fd00::100"), 64)],
            kernel: false,
        }),
        &[],
    ));
    t.set_tunnels(Some(tun.clone()));
    (t, tun)
}

#[test]
fn output_to_a_tunnel_waits_for_the_neighbour_then_encapsulates() {
    let (t, tun) = setup();
    let pkt = parse_packet("in_port=1,udp,nw_src=10.0.0.1,nw_dst=10.0.0.2").unwrap();
    let x = xlate_on(&t, None, &pkt, 0, LEARN);
    assert!(x.actions.is_empty(), "{}", format_actions(&x.actions));
    assert!(
        x.trace.contains("neighbor cache miss for 172.31.1.1"),
        "{}",
        x.trace
    );
    assert_eq!(tun.neigh.take_wanted(), vec![ip("172.31.1.1")]);
    tun.neigh.set(ip("172.31.1.1"), [2, 0, 0, 0, 0, 1], 0);
    let x = xlate_on(&t, None, &pkt, 0, LEARN);
    assert_eq!(
        format_actions(&x.actions),
        format!(
            "tnl_push(tnl_port({FIRST_VPORT}),header(size=50,type=4,eth(dst=02:00:00:00:00:01,src=02:00:00:00:00:64,dl_type=0x0800),\
             ipv4(src=172.31.1.100,dst=172.31.1.1,proto=17,tos=0,ttl=64,frag=0x4000),udp(src=0,dst=4789,csum=0x0),\
             vxlan(flags=0x8000000,vni=0x5)),out_port({UNDERLAY_PORT})),{UNDERLAY_PORT}"
        )
    );
    // remote_ip=flow, key=flow: from the rule's set_field (a Geneve port:
    // its own datapath port).
    tun.neigh.set(ip("172.31.1.7"), [2, 0, 0, 0, 0, 7], 0);
    let p2 = parse_packet("in_port=2,tcp").unwrap();
    let x = xlate_on(&t, None, &p2, 0, LEARN);
    let a = format_actions(&x.actions);
    assert!(a.contains(&format!("tnl_port({})", FIRST_VPORT + 1)), "{a}");
    assert!(
        a.contains("dst=172.31.1.7") && a.contains("geneve(vni=0x9)"),
        "{a}"
    );
}

#[test]
fn the_underlay_answers_arp_and_decapsulates() {
    let (t, tun) = setup();
    let arp = parse_packet(&format!(
        "in_port={UNDERLAY_PORT},arp,dl_src=02:00:00:00:00:01,dl_dst=ff:ff:ff:ff:ff:ff,arp_op=1,arp_spa=172.31.1.1,arp_tpa=172.31.1.100,arp_sha=02:00:00:00:00:01"
    ))
    .unwrap();
    let x = xlate_on(&t, None, &arp, 0, LEARN);
    let a = format_actions(&x.actions);
    assert!(a.ends_with(&format!(",{UNDERLAY_PORT}")), "{a}");
    assert!(a.contains("set(arp(") && a.contains("op=2"), "{a}");
    assert_eq!(
        tun.neigh.lookup(ip("172.31.1.1")),
        Some([2, 0, 0, 0, 0, 1]),
        "snooped"
    );
    // ARP for another address: learned from, not answered.
    let other = parse_packet(&format!(
        "in_port={UNDERLAY_PORT},arp,arp_op=1,arp_spa=172.31.1.2,arp_tpa=172.31.1.3,arp_sha=02:00:00:00:00:02"
    ))
    .unwrap();
    assert!(xlate_on(&t, None, &other, 0, LEARN).actions.is_empty());
    assert!(tun.neigh.lookup(ip("172.31.1.2")).is_some());
    // VXLAN to the endpoint: popped on the VXLAN class's port.
    let vx = parse_packet(&format!(
        "in_port={UNDERLAY_PORT},udp,dl_dst=02:00:00:00:00:64,nw_dst=172.31.1.100,udp_dst=4789"
    ))
    .unwrap();
    let x = xlate_on(&t, None, &vx, 0, LEARN);
    assert_eq!(
        format_actions(&x.actions),
        format!("tnl_pop({FIRST_VPORT})")
    );
    // To another MAC or another UDP port: dropped.
    for bad in [
        "dl_dst=02:00:00:00:00:99,nw_dst=172.31.1.100,udp_dst=4789",
        "dl_dst=02:00:00:00:00:64,nw_dst=172.31.1.100,udp_dst=53",
        "dl_dst=02:00:00:00:00:64,nw_dst=172.31.1.5,udp_dst=4789",
    ] {
        let p = parse_packet(&format!("in_port={UNDERLAY_PORT},udp,{bad}")).unwrap();
        assert!(xlate_on(&t, None, &p, 0, LEARN).actions.is_empty(), "{bad}");
    }
}

#[test]
fn a_decapsulated_packet_comes_in_on_its_tunnel_port() {
    let (t, _) = setup();
    let p = parse_packet(&format!(
        "in_port={FIRST_VPORT},tun_id=5,tun_src=172.31.1.1,tun_dst=172.31.1.100,udp,nw_dst=10.0.0.1"
    ))
    .unwrap();
    let x = xlate_on(&t, None, &p, 0, LEARN);
    assert_eq!(format_actions(&x.actions), "1");
    // The megaflow holds the tunnel's identity.
    let text = x.megaflow_text(&p);
    assert!(
        text.contains("tun_id=0x5,tun_src=172.31.1.1,tun_dst=172.31.1.100"),
        "{text}"
    );
    // Another key: no tunnel port has it.
    let q = parse_packet(&format!(
        "in_port={FIRST_VPORT},tun_id=6,tun_src=172.31.1.1,tun_dst=172.31.1.100,udp"
    ))
    .unwrap();
    let x = xlate_on(&t, None, &q, 0, LEARN);
    assert!(x.actions.is_empty());
    assert!(
        x.trace.contains("receive tunnel port not found"),
        "{}",
        x.trace
    );
}

#[test]
fn the_underlay_answers_neighbour_solicitations() {
    let (t, tun) = setup();
    let ns = parse_packet(&format!(
        "in_port={UNDERLAY_PORT},icmp6,dl_src=02:00:00:00:00:01,dl_dst=33:33:ff:00:01:00,ipv6_src=fd00::1,ipv6_dst=ff02::1:ff00:100,nw_ttl=255,icmp_type=135,icmp_code=0,nd_target=fd00::100,nd_sll=02:00:00:00:00:01,nd_options_type=1"
    ))
    .unwrap();
    let x = xlate_on(&t, None, &ns, 0, LEARN);
    let a = format_actions(&x.actions);
    assert!(
        a.ends_with(&format!(",{UNDERLAY_PORT}")),
        "{a}\n{}",
        x.trace
    );
    assert!(
        a.contains("src=fd00::100") && a.contains("dst=fd00::1"),
        "{a}"
    );
    assert!(a.contains("type=136"), "{a}");
    assert!(a.contains("tll=02:00:00:00:00:64"), "{a}");
    assert_eq!(
        tun.neigh.lookup(ip("fd00::1")),
        Some([2, 0, 0, 0, 0, 1]),
        "snooped"
    );
    // An advertisement: learned from, not answered.
    let na = parse_packet(&format!(
        "in_port={UNDERLAY_PORT},icmp6,ipv6_src=fd00::2,ipv6_dst=fd00::100,icmp_type=136,icmp_code=0,nd_target=fd00::2,nd_tll=02:00:00:00:00:02,nd_options_type=2"
    ))
    .unwrap();
    assert!(xlate_on(&t, None, &na, 0, LEARN).actions.is_empty());
    assert_eq!(tun.neigh.lookup(ip("fd00::2")), Some([2, 0, 0, 0, 0, 2]));
}

/// Duplicate address detection: a tentative address is not answered
/// for and takes no tunnel packets; an advertisement of it from another
/// node makes it a duplicate (and is not learned as a neighbour); an
/// uncontested one becomes usable after the wait.
#[test]
fn tentative_addresses_are_detected_before_use() {
    let (t, tun) = setup();
    let (me, other): (std::net::Ipv6Addr, std::net::Ipv6Addr) =
        ("fd00::100".parse().unwrap(), "fd00::200".parse().unwrap());
    let u = Underlay {
        port: UNDERLAY_PORT,
        name: "u0".into(),
        mac: [2, 0, 0, 0, 0, 0x64],
        addrs: vec![(ip("fd00::100"), 64), (ip("fd00::200"), 64)],
        kernel: false,
    };
    let routes = flowpath_ofproto::tunnel::connected_routes(&u, &[]);
    tun.set_underlay(Some(u), routes);
    assert!(tun.routes().iter().any(|r| r.src == ip("fd00::200")));
    tun.dad.begin([me, other]);
    assert_eq!(tun.dad_round(0), vec![me, other], "a solicitation each");
    let ns = |target: &str| {
        parse_packet(&format!(
            "in_port={UNDERLAY_PORT},icmp6,dl_src=02:00:00:00:00:01,dl_dst=33:33:ff:00:01:00,ipv6_src=fd00::1,ipv6_dst=ff02::1:ff00:100,nw_ttl=255,icmp_type=135,icmp_code=0,nd_target={target},nd_sll=02:00:00:00:00:01,nd_options_type=1"
        ))
        .unwrap()
    };
    let x = xlate_on(&t, None, &ns("fd00::100"), 0, LEARN);
    assert!(x.actions.is_empty(), "tentative: not answered\n{}", x.trace);
    let vx = parse_packet(&format!(
        "in_port={UNDERLAY_PORT},udp6,dl_dst=02:00:00:00:00:64,ipv6_src=fd00::1,ipv6_dst=fd00::100,tp_dst=4789"
    ))
    .unwrap();
    assert!(
        xlate_on(&t, None, &vx, 0, LEARN).actions.is_empty(),
        "no tnl_pop while tentative"
    );
    // Another node advertises fd00::200: a duplicate.
    let na = parse_packet(&format!(
        "in_port={UNDERLAY_PORT},icmp6,ipv6_src=fd00::200,ipv6_dst=ff02::1,icmp_type=136,icmp_code=0,nd_target=fd00::200,nd_tll=02:00:00:00:00:09,nd_options_type=2"
    ))
    .unwrap();
    let x = xlate_on(&t, None, &na, 0, LEARN);
    assert!(
        x.trace.contains("duplicate address detection"),
        "{}",
        x.trace
    );
    assert_eq!(tun.dad.duplicates(), vec![other]);
    assert_eq!(
        tun.neigh.lookup(ip("fd00::200")),
        None,
        "our own address is no neighbour"
    );
    assert!(tun.dad_round(500).is_empty());
    assert!(!tun.is_local(ip("fd00::100")));
    tun.dad_round(1000);
    assert!(tun.is_local(ip("fd00::100")) && !tun.is_local(ip("fd00::200")));
    let a = format_actions(&xlate_on(&t, None, &ns("fd00::100"), 0, LEARN).actions);
    assert!(a.contains("type=136"), "usable: answered: {a}");
    assert!(
        format_actions(&xlate_on(&t, None, &vx, 0, LEARN).actions).contains("tnl_pop("),
        "usable: decapsulated"
    );
    assert!(xlate_on(&t, None, &ns("fd00::200"), 0, LEARN)
        .actions
        .is_empty());
    tun.drop_address(ip("fd00::200"));
    assert!(tun.routes().iter().all(|r| r.src != ip("fd00::200")));
    assert_eq!(tun.underlay().unwrap().addrs, vec![(ip("fd00::100"), 64)]);
    // Another node's detection of usable fd00::100 (a solicitation from
    // ::, no option): not answered in the datapath, queued to be
    // defended (once), and the address stays ours.
    let dad_ns = parse_packet(&format!(
        "in_port={UNDERLAY_PORT},icmp6,dl_src=02:00:00:00:00:09,dl_dst=33:33:ff:00:01:00,ipv6_src=::,ipv6_dst=ff02::1:ff00:100,nw_ttl=255,icmp_type=135,icmp_code=0,nd_target=fd00::100"
    ))
    .unwrap();
    for _ in 0..2 {
        let x = xlate_on(&t, None, &dad_ns, 0, LEARN);
        assert!(x.actions.is_empty(), "{}", x.trace);
        assert!(x.trace.contains("defending"), "{}", x.trace);
    }
    assert_eq!(tun.dad.take_defend(), vec![me]);
    assert!(tun.dad.take_defend().is_empty());
    assert!(tun.is_local(ip("fd00::100")) && !tun.dad.duplicates().contains(&me));
    // One that is not ours is not defended.
    let other_ns = parse_packet(&format!(
        "in_port={UNDERLAY_PORT},icmp6,ipv6_src=::,ipv6_dst=ff02::1:ff00:300,nw_ttl=255,icmp_type=135,icmp_code=0,nd_target=fd00::300"
    ))
    .unwrap();
    xlate_on(&t, None, &other_ns, 0, LEARN);
    assert!(tun.dad.take_defend().is_empty());
}

#[test]
fn geneve_options_are_set_by_rules_and_read_by_rules() {
    let rules = parse_rules(
        "in_port=2,actions=set_field:172.31.1.7->tun_dst,set_field:0xab->tun_metadata0,output:11\n\
         in_port=11,tun_metadata0=0xcd,actions=output:2\n\
         in_port=11,priority=1,actions=drop\n",
        None,
    )
    .unwrap();
    let (_, tun) = setup();
    let mut t = RuleTables::new(rules, &[]);
    t.set_tunnels(Some(tun.clone()));
    tun.add_tlv("{class=0x102,type=0x80,len=4}->tun_metadata0")
        .unwrap();
    tun.neigh.set(ip("172.31.1.7"), [2, 0, 0, 0, 0, 7], 0);
    let x = xlate_on(&t, None, &parse_packet("in_port=2,tcp").unwrap(), 0, LEARN);
    let a = format_actions(&x.actions);
    assert!(
        a.contains("geneve(crit,vni=0x0,options({class=0x102,type=0x80,len=4,0xab}))"),
        "{a}"
    );
    // Received with the option: the rule reads it.
    let vport = FIRST_VPORT + 1;
    let p = parse_packet(&format!(
        "in_port={vport},tun_src=172.31.1.7,tun_dst=172.31.1.100,tun_metadata0=0xcd,tcp"
    ))
    .unwrap();
    let x = xlate_on(&t, None, &p, 0, LEARN);
    assert_eq!(format_actions(&x.actions), "2");
    assert!(
        x.megaflow_text(&p).contains("tun_metadata0=0xcd"),
        "{}",
        x.megaflow_text(&p)
    );
    let q = parse_packet(&format!(
        "in_port={vport},tun_src=172.31.1.7,tun_dst=172.31.1.100,tun_metadata0=0xab,tcp"
    ))
    .unwrap();
    assert!(xlate_on(&t, None, &q, 0, LEARN).actions.is_empty());
    // The underlay's pop carries the map to the datapath.
    let vx = parse_packet(&format!(
        "in_port={UNDERLAY_PORT},udp,dl_dst=02:00:00:00:00:64,nw_dst=172.31.1.100,udp_dst=6081"
    ))
    .unwrap();
    let x = xlate_on(&t, None, &vx, 0, LEARN);
    match x.actions.as_slice() {
        [flowpath_odp::DpAction::TnlPop { port, tlv, .. }] => {
            assert_eq!(*port, vport);
            assert_eq!(tlv[0].class, 0x102);
        }
        a => panic!("{a:?}"),
    }
}
