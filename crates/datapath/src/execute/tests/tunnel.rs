//! `tnl_push` / `tnl_pop` execution, checked with etherparse (outer
//! headers and their checksums) and by a round trip.

use super::*;
use flowpath_wire::tunnel::{build_header, HeaderSpec, OuterIp, TunnelKind, MAX_HEADER};

fn push_action(kind: TunnelKind, v6: bool, csum: bool) -> DpAction {
    let spec = HeaderSpec {
        kind,
        eth_dst: [2, 0, 0, 0, 0, 9],
        eth_src: [2, 0, 0, 0, 0, 8],
        ip: if v6 {
            OuterIp::V6 {
                src: V6_SRC,
                dst: V6_DST,
            }
        } else {
            OuterIp::V4 {
                src: [172, 31, 1, 100],
                dst: [172, 31, 1, 1],
                df: true,
            }
        },
        tos: 0,
        ttl: 64,
        udp_dst: kind.default_port(),
        csum,
        key: Some(0x2a),
        oam: false,
        geneve_opts: &[],
    };
    let mut h = [0u8; MAX_HEADER];
    let n = build_header(&spec, &mut h).unwrap();
    DpAction::TnlPush(flowpath_odp::TnlPush::new(4789, 100, kind, &h[..n]).unwrap())
}

fn pushed(frame: &[u8], a: &DpAction) -> (Vec<u8>, ExecStats) {
    let (mut p, mut meta) = load(frame);
    let key = extract_with_layers(frame, 1).0;
    let mut ex = Executor::new();
    let DpAction::TnlPush(t) = a else {
        unreachable!()
    };
    ex.tnl_push(&mut p, &mut meta, t, &key);
    (p.data().to_vec(), *ex.stats())
}

#[test]
fn push_builds_valid_outer_headers_around_the_frame() {
    let inner = tcp4(b"hello through the tunnel");
    for kind in [TunnelKind::Vxlan, TunnelKind::Geneve, TunnelKind::Gre] {
        for v6 in [false, true] {
            for csum in [false, true] {
                let (out, st) = pushed(&inner, &push_action(kind, v6, csum));
                assert_eq!(st.tnl_pushed, 1);
                // The inner frame follows the headers, unchanged.
                assert!(out.ends_with(&inner), "{kind:?} v6={v6}");
                // (A zero UDP checksum over IPv6, which etherparse calls
                // wrong, is what a tunnel may send: RFC 6935.)
                if kind != TunnelKind::Gre && (csum || !v6) {
                    // etherparse checks the outer IPv4 header checksum and
                    // a UDP checksum when there is one.
                    let h = parse_valid(&out);
                    let Some(TransportHeader::Udp(udp)) = &h.transport else {
                        panic!("no UDP: {h:?}");
                    };
                    assert_eq!(udp.destination_port, kind.default_port());
                    assert!((32768..61000).contains(&udp.source_port));
                    assert_eq!(
                        usize::from(udp.length),
                        out.len() - 14 - if v6 { 40 } else { 20 }
                    );
                    assert_eq!(udp.checksum != 0, csum);
                    if !v6 {
                        assert_eq!(usize::from(ipv4_of(&h).total_len), out.len() - 14);
                    }
                }
                let d = flowpath_wire::tunnel::decap(&out, kind).unwrap();
                assert_eq!(d.meta.tun_id, 0x2a);
                assert_eq!(&out[d.inner..], &inner[..]);
            }
        }
    }
}

#[test]
fn the_longest_geneve_header_fits_the_headroom() {
    // Every option field mapped with 8 bytes and present: 96 bytes of
    // options over an IPv6 underlay, the longest header a push makes.
    use flowpath_wire::tunnel::{encode_geneve_opts, TlvEntry, MAX_GENEVE_OPTS, TLV_FIELDS};
    let mut map = [TlvEntry::default(); TLV_FIELDS];
    let mut values = [0u64; TLV_FIELDS];
    for (i, (e, v)) in map.iter_mut().zip(&mut values).enumerate() {
        *e = TlvEntry {
            class: 0x102,
            typ: i as u8,
            len: 8,
        };
        *v = 0x1111_1111_1111_1111 * (i as u64 + 1);
    }
    let mut opts = [0u8; MAX_GENEVE_OPTS];
    let n = encode_geneve_opts(&map, &values, 0xff, &mut opts).unwrap();
    assert_eq!(n, 96);
    let spec = HeaderSpec {
        kind: TunnelKind::Geneve,
        eth_dst: [2, 0, 0, 0, 0, 9],
        eth_src: [2, 0, 0, 0, 0, 8],
        ip: OuterIp::V6 {
            src: V6_SRC,
            dst: V6_DST,
        },
        tos: 0,
        ttl: 64,
        udp_dst: 6081,
        csum: true,
        key: Some(7),
        oam: false,
        geneve_opts: &opts[..n],
    };
    let mut h = [0u8; MAX_HEADER];
    let hlen = build_header(&spec, &mut h).unwrap();
    assert_eq!(hlen, MAX_HEADER);
    let a = DpAction::TnlPush(
        flowpath_odp::TnlPush::new(6081, 100, TunnelKind::Geneve, &h[..hlen]).unwrap(),
    );
    let inner = tcp4(b"many options");
    let (out, st) = pushed(&inner, &a);
    assert_eq!((st.tnl_pushed, st.dropped), (1, 0));
    assert_eq!(out.len(), hlen + inner.len());
    let h = parse_valid(&out);
    assert!(
        matches!(h.transport, Some(TransportHeader::Udp(_))),
        "{h:?}"
    );
    let d = flowpath_wire::tunnel::decap_mapped(&out, TunnelKind::Geneve, &map).unwrap();
    assert_eq!((d.meta.md, d.meta.md_present), (values, 0xff));
    assert_eq!(&out[d.inner..], &inner[..]);
}

#[test]
fn pop_sends_the_inner_frame_back_with_the_tunnel_metadata() {
    // Copied (the packet's buffer stays as it was) or taken (swapped
    // into the pool: the only action of the list).
    for take in [false, true] {
        pop_and_check(take);
    }
}

fn pop_and_check(take: bool) {
    let inner = udp4(b"inner payload");
    let (outer, _) = pushed(&inner, &push_action(TunnelKind::Vxlan, false, true));
    let (mut p, mut meta) = load(&outer);
    meta.pkt_mark = 7;
    let mut ex = Executor::new();
    ex.tnl_pop(
        &mut p,
        &mut meta,
        4789,
        TunnelKind::Vxlan,
        &Default::default(),
        3,
        take,
    );
    assert_eq!(ex.stats().tnl_popped, 1);
    // The packet itself: the inner frame (copied), or the pool's spare
    // buffer (taken: empty here).
    assert_eq!(p.data().is_empty(), take);
    if !take {
        assert_eq!(p.data(), &inner[..]);
    }
    let mut back = Vec::new();
    assert_eq!(ex.swap_recirculated(&mut back), 1);
    let r = &back[0];
    assert_eq!(r.buf.data(), &inner[..]);
    assert_eq!(
        (r.recirc_id, r.meta.in_port, r.meta.pkt_mark, r.tag),
        (0, 4789, 0, 3)
    );
    let mut k = FlowKey::zero();
    k.w[flowpath_flow::key::W_TUN_FIRST..].copy_from_slice(&r.tnl);
    assert_eq!(k.tun_id(), 0x2a);
    assert_eq!((k.tun_src(), k.tun_dst()), (0xac1f_0164, 0xac1f_0101));
    assert_eq!(k.tun_ttl(), 64);
    assert_eq!(k.tun_tp_dst(), 4789);
    use flowpath_flow::key::tnl_flags;
    assert_eq!(
        k.tun_dp_flags(),
        tnl_flags::DF | tnl_flags::CSUM | tnl_flags::KEY
    );
    assert!(k.has_tunnel());
}

#[test]
fn a_bad_tunnel_packet_is_dropped_and_counted() {
    let inner = udp4(b"x");
    let (mut outer, _) = pushed(&inner, &push_action(TunnelKind::Vxlan, false, true));
    let n = outer.len();
    outer[n - 1] ^= 0xff; // The UDP checksum no longer holds.
    let (mut p, mut meta) = load(&outer);
    let mut ex = Executor::new();
    ex.tnl_pop(
        &mut p,
        &mut meta,
        4789,
        TunnelKind::Vxlan,
        &Default::default(),
        0,
        false,
    );
    assert_eq!(ex.stats().tnl_pop_failed, 1);
    assert!(!ex.has_recirculated());
    // Not a tunnel packet at all.
    let (mut p, mut meta) = load(&inner);
    ex.tnl_pop(
        &mut p,
        &mut meta,
        4789,
        TunnelKind::Vxlan,
        &Default::default(),
        0,
        false,
    );
    assert_eq!(ex.stats().tnl_pop_failed, 2);
}

#[test]
fn tnl_push_prints_as_ovs() {
    let a = push_action(TunnelKind::Vxlan, false, false);
    assert_eq!(
        a.to_string(),
        "tnl_push(tnl_port(4789),header(size=50,type=4,eth(dst=02:00:00:00:00:09,src=02:00:00:00:00:08,dl_type=0x0800),\
         ipv4(src=172.31.1.100,dst=172.31.1.1,proto=17,tos=0,ttl=64,frag=0x4000),udp(src=0,dst=4789,csum=0x0),\
         vxlan(flags=0x8000000,vni=0x2a)),out_port(100))"
    );
    let g = push_action(TunnelKind::Gre, true, true);
    assert!(
        g.to_string().contains("type=109,")
            && g.to_string()
                .contains("gre((flags=0xa000,proto=0x6558),csum=0x0,key=0x2a)"),
        "{g}"
    );
}
