//! Tunnel ports, routes, the option map.

use super::*;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn tunnel_port_options_parse_and_refuse() {
    let t = TunnelPort::parse(10, "vxlan:remote_ip=172.31.1.1,key=5,csum=true").unwrap();
    assert_eq!(t.remote, Remote::Ip(ip("172.31.1.1")));
    assert_eq!(
        (t.key, t.dst_port, t.csum),
        (Key::Fixed(5), 4789, Some(true))
    );
    assert_eq!(t.describe(), "vxlan:remote_ip=172.31.1.1,key=5,csum=true");
    assert_eq!(t.out_key, Key::Fixed(5), "key= is both keys");
    let io = TunnelPort::parse(12, "gre:remote_ip=1.1.1.1,in_key=7,out_key=flow").unwrap();
    assert_eq!((io.key, io.out_key), (Key::Fixed(7), Key::Flow));
    assert_eq!(io.describe(), "gre:remote_ip=1.1.1.1,in_key=7,out_key=flow");
    assert_eq!(TunnelPort::parse(12, &io.describe()).unwrap(), io);
    let inh = TunnelPort::parse(13, "vxlan:remote_ip=1.1.1.1,tos=inherit,ttl=inherit").unwrap();
    assert!(inh.tos_inherit && inh.ttl_inherit);
    assert_eq!(TunnelPort::parse(13, &inh.describe()).unwrap(), inh);
    let g = TunnelPort::parse(11, "geneve:remote_ip=flow,key=flow").unwrap();
    assert_eq!(
        (g.remote, g.key, g.dst_port),
        (Remote::Flow, Key::Flow, 6081)
    );
    for (bad, needle) in [
        ("vxlan:key=1", "needs remote_ip"),
        ("vxlan:remote_ip=1.2.3", "not an IP address"),
        ("vxlan:remote_ip=1.1.1.1,key=0x1000000", "24-bit key"),
        ("gre:remote_ip=1.1.1.1,dst_port=5", "no UDP port"),
        ("vxlan:remote_ip=1.1.1.1,ttl=x", "or 'inherit' expected"),
        ("vxlan:remote_ip=1.1.1.1,out_key=0x1000000", "24-bit key"),
        (
            "vxlan:remote_ip=1.1.1.1,colour=blue",
            "unknown tunnel option 'colour'",
        ),
        ("lisp:remote_ip=1.1.1.1", "not a tunnel kind"),
    ] {
        let e = TunnelPort::parse(1, bad).unwrap_err();
        assert!(e.contains(needle), "{bad}: {e}");
    }
    // Options real deployments set that change nothing here, as in OVS
    // 3.1's userspace datapath; those that would, refused by name.
    let quiet = TunnelPort::parse(
        14,
        "vxlan:remote_ip=1.1.1.1,egress_pkt_mark=0,exts=gbp,packet_type=legacy_l2",
    )
    .unwrap();
    assert_eq!(
        quiet,
        TunnelPort::parse(14, "vxlan:remote_ip=1.1.1.1").unwrap()
    );
    for (bad, needle) in [
        ("vxlan:remote_ip=1.1.1.1,exts=gpe", "not supported"),
        ("gre:remote_ip=1.1.1.1,exts=gbp", "not supported"),
        ("gre:remote_ip=1.1.1.1,packet_type=ptap", "not supported"),
        ("gre:remote_ip=1.1.1.1,seq=true", "not supported"),
        ("geneve:remote_ip=1.1.1.1,psk=secret", "IPsec"),
    ] {
        let e = TunnelPort::parse(15, bad).unwrap_err();
        assert!(e.contains(needle), "{bad}: {e}");
    }
}

#[test]
fn tlv_maps_add_and_refuse() {
    let t = TlvTable::default();
    t.add(
        "{class=0x102,type=0x80,len=4}->tun_metadata0,{class=0xffff,type=1,len=8}->tun_metadata3",
    )
    .unwrap();
    assert_eq!(
        t.get()[0],
        TlvEntry {
            class: 0x102,
            typ: 0x80,
            len: 4
        }
    );
    assert_eq!(t.get()[3].len, 8);
    assert!(format_tlv_map(&t.get()).contains("\n  0x102  0x80       4  tun_metadata0\n"));
    // The same again is fine; another option on a mapped field is not.
    t.add("{class=0x102,type=0x80,len=4}->tun_metadata0")
        .unwrap();
    let e = t
        .add("{class=0x102,type=0x81,len=4}->tun_metadata0")
        .unwrap_err();
    assert!(e.contains("already mapped"), "{e}");
    for (bad, needle) in [
        ("{class=1,type=1,len=12}->tun_metadata1", "4 or 8 bytes"),
        (
            "{class=1,type=1,len=4}->tun_metadata8",
            "tun_metadata0 to tun_metadata7",
        ),
        ("{class=1,type=1}->tun_metadata1", "len= is missing"),
        ("class=1->tun_metadata1", "expected {"),
    ] {
        let e = t.add(bad).unwrap_err();
        assert!(e.contains(needle), "{bad}: {e}");
    }
    t.del("", 0).unwrap();
    assert_eq!(t.get(), TlvMap::default());
    // OpenFlow's TLV table mod, with OVS's errors.
    t.modify(0, &[(0x102, 0x80, 4, 0)], 0).unwrap();
    assert_eq!(t.mappings(), vec![(0x102, 0x80, 4, 0)]);
    assert_eq!(
        t.modify(0, &[(0x102, 0x81, 4, 0)], 0),
        Err(TlvModError::AlreadyMapped)
    );
    assert_eq!(
        t.modify(0, &[(0x102, 0x80, 4, 1)], 0),
        Err(TlvModError::DupEntry)
    );
    assert_eq!(
        t.modify(0, &[(1, 1, 12, 1)], 0),
        Err(TlvModError::BadOptLen)
    );
    assert_eq!(
        t.modify(0, &[(1, 1, 4, 64)], 0),
        Err(TlvModError::BadFieldIdx)
    );
    assert_eq!(t.modify(7, &[], 0), Err(TlvModError::BadCommand));
    t.modify(1, &[(0, 0, 0, 0)], 0).unwrap();
    assert!(t.mappings().is_empty());
}

/// A mapping that a flow or a group uses (in its match or its actions)
/// is not deleted, as OVS 3.1's `NXTTMFC_INVALID_TLV_DEL` (checked with
/// `ovs-ofctl del-tlv-map` against flows matching and setting the field).
#[test]
fn a_mapping_in_use_is_not_deleted() {
    use crate::parse::parse_rule;
    let rules: Vec<crate::rule::Rule> = [
        "tun_metadata0=5,actions=drop",
        "priority=5,actions=set_field:7->tun_metadata1",
        "priority=4,actions=move:NXM_NX_TUN_METADATA2[0..7]->NXM_NX_REG0[0..7]",
        "priority=3,actions=output:1",
    ]
    .iter()
    .map(|r| parse_rule(r).unwrap())
    .collect();
    let groups = [crate::group::parse_group(
        "group_id=1,type=all,bucket=load:0x1->NXM_NX_TUN_METADATA6[0..3],output:2",
    )
    .unwrap()];
    let used = tlv_fields_used(&rules, &groups);
    assert_eq!(used, 0b0100_0111);
    assert_eq!(tlv_fields_used(&rules[3..], &[]), 0);
    let t = TlvTable::default();
    let all = "{class=1,type=0,len=4}->tun_metadata0,{class=1,type=1,len=4}->tun_metadata1,\
               {class=1,type=2,len=4}->tun_metadata2,{class=1,type=3,len=4}->tun_metadata3,\
               {class=1,type=6,len=4}->tun_metadata6";
    t.add(all).unwrap();
    for i in [0u16, 1, 2, 6] {
        assert_eq!(
            t.modify(1, &[(1, i as u8, 4, i)], used),
            Err(TlvModError::InvalidTlvDel),
            "{i}"
        );
        let e = t
            .del(
                &format!("{{class=1,type={i},len=4}}->tun_metadata{i}"),
                used,
            )
            .unwrap_err();
        assert!(e.contains(&format!("tun_metadata{i} is used")), "{e}");
    }
    assert_eq!(t.modify(2, &[], used), Err(TlvModError::InvalidTlvDel));
    assert!(t.del("", used).is_err());
    assert_eq!(t.mappings().len(), 5, "nothing deleted");
    // One nothing uses goes; with the flows gone, all go.
    t.modify(1, &[(1, 3, 4, 3)], used).unwrap();
    assert_eq!(t.mappings().len(), 4);
    t.del("", 0).unwrap();
    assert!(t.mappings().is_empty());
}

#[test]
fn receive_picks_the_most_specific_port() {
    let ports = vec![
        TunnelPort::parse(1, "vxlan:remote_ip=flow,key=flow").unwrap(),
        TunnelPort::parse(2, "vxlan:remote_ip=10.0.0.2").unwrap(),
        TunnelPort::parse(3, "vxlan:remote_ip=10.0.0.2,key=7").unwrap(),
        TunnelPort::parse(4, "geneve:remote_ip=10.0.0.2").unwrap(),
    ];
    let t = Tunnels::new(ports, None, &[]);
    let vx = t.vport(&t.port(1).unwrap());
    let ge = t.vport(&t.port(4).unwrap());
    assert_ne!(vx, ge);
    let (s, d) = (ip("10.0.0.2"), ip("10.0.0.1"));
    assert_eq!(t.receive(vx, s, d, 7), Some(3));
    assert_eq!(t.receive(vx, s, d, 0), Some(2));
    assert_eq!(t.receive(vx, ip("10.0.0.9"), d, 7), Some(1));
    assert_eq!(t.receive(ge, s, d, 0), Some(4));
    assert_eq!(t.receive(ge, ip("10.0.0.9"), d, 0), None);
    assert_eq!(t.vport_kind(ge), Some(TunnelKind::Geneve));
}

#[test]
fn ports_added_and_removed_while_running() {
    let t = Tunnels::new(
        vec![TunnelPort::parse(1, "vxlan:remote_ip=10.0.0.2").unwrap()],
        None,
        &[],
    );
    let vx = t.vport(&t.port(1).unwrap());
    let (s, d) = (ip("10.0.0.3"), ip("10.0.0.1"));
    assert_eq!(t.receive(vx, s, d, 0), None);
    // Same class: same datapath port; a new kind: a new one.
    t.add_port(TunnelPort::parse(5, "vxlan:remote_ip=10.0.0.3").unwrap())
        .unwrap();
    t.add_port(TunnelPort::parse(6, "gre:remote_ip=10.0.0.3").unwrap())
        .unwrap();
    assert_eq!(t.vport(&t.port(5).unwrap()), vx);
    let gre = t.vport(&t.port(6).unwrap());
    assert_eq!(gre, vx + 1);
    assert_eq!(t.vport_kind(gre), Some(TunnelKind::Gre));
    assert_eq!(t.receive(vx, s, d, 0), Some(5));
    assert_eq!(t.receive(gre, s, d, 0), Some(6));
    assert!(t
        .add_port(TunnelPort::parse(5, "geneve:remote_ip=10.0.0.4").unwrap())
        .unwrap_err()
        .contains("port 5 exists"));
    assert!(t.del_port(5));
    assert!(!t.del_port(5));
    assert_eq!(t.receive(vx, s, d, 0), None);
    // The class stays (its number is in megaflows).
    assert_eq!(t.classes().len(), 2);
    assert_eq!(
        t.ports().iter().map(|p| p.ofport).collect::<Vec<_>>(),
        vec![1, 6]
    );
}

#[test]
fn routes_and_neighbours() {
    let u = Underlay {
        port: UNDERLAY_PORT,
        name: "u0".into(),
        mac: [2, 0, 0, 0, 0, 1],
        addrs: vec![(ip("172.31.1.100"), 24)],
        kernel: false,
    };
    let t = Tunnels::new(vec![], Some(u), &[ip("172.31.1.254")]);
    assert_eq!(
        t.route(ip("172.31.1.7")),
        Some((ip("172.31.1.7"), ip("172.31.1.100")))
    );
    assert_eq!(
        t.route(ip("8.8.8.8")),
        Some((ip("172.31.1.254"), ip("172.31.1.100")))
    );
    assert_eq!(t.route(ip("fd00::1")), None);
    t.add_route(ip("10.9.0.0"), 16, Some(ip("172.31.1.9")))
        .unwrap();
    assert_eq!(t.route(ip("10.9.1.1")).unwrap().0, ip("172.31.1.9"));
    assert!(t.del_route(ip("10.9.0.0"), 16));
    assert!(t.add_route(ip("fd00::"), 64, None).is_err());
    let g0 = t.neigh.generation();
    t.neigh.want(ip("172.31.1.7"));
    t.neigh.learn(ip("172.31.1.7"), [2, 0, 0, 0, 0, 7], 5);
    assert!(
        t.neigh.take_wanted().is_empty(),
        "learned: no longer wanted"
    );
    assert_eq!(t.neigh.lookup(ip("172.31.1.7")), Some([2, 0, 0, 0, 0, 7]));
    assert!(t.neigh.generation() > g0);
    t.neigh.set(ip("172.31.1.7"), [2, 0, 0, 0, 0, 8], 6);
    t.neigh.learn(ip("172.31.1.7"), [2, 0, 0, 0, 0, 9], 7);
    assert_eq!(
        t.neigh.lookup(ip("172.31.1.7")),
        Some([2, 0, 0, 0, 0, 8]),
        "hand-set stays"
    );
    t.neigh.flush();
    assert!(t.neigh.entries().is_empty());
}

/// The fields a flow uses that the map does not map (an OpenFlow flow_mod
/// with any is refused with `NXFMFC_INVALID_TLV_FIELD`, as OVS 3.1 refuses
/// it): in the match (a value, `=0`, a mask), in set_field, load, move
/// and nested actions; none for a flow that names no option field.
#[test]
fn unmapped_fields_of_a_flow() {
    use crate::parse::parse_rule;
    let mut map = TlvMap::default();
    for (n, e) in parse_tlv_map("{class=0x102,type=0x80,len=4}->tun_metadata0").unwrap() {
        map[n] = e;
    }
    let un = |text: &str| unmapped_tlv_fields(&parse_rule(text).unwrap(), &map);
    assert_eq!(un("priority=3,ip,actions=output:1,resubmit(,2)"), 0);
    assert_eq!(un("tun_metadata0=5,actions=set_field:1->tun_metadata0"), 0);
    assert_eq!(un("tun_metadata3=0,actions=drop"), 1 << 3);
    assert_eq!(un("tun_metadata2=0x10/0xf0,actions=drop"), 1 << 2);
    assert_eq!(un("ip,actions=set_field:7->tun_metadata1"), 1 << 1);
    assert_eq!(
        un("ip,actions=move:NXM_NX_TUN_METADATA5[0..7]->NXM_NX_REG0[0..7]"),
        1 << 5
    );
    assert_eq!(
        un("ip,actions=clone(load:1->NXM_NX_TUN_METADATA7[0..3],output:2)"),
        1 << 7
    );
    // Nothing is mapped without tunnels.
    let none = TlvMap::default();
    let r = parse_rule("tun_metadata0=5,actions=drop").unwrap();
    assert_eq!(unmapped_tlv_fields(&r, &none), 1);
}
