//! Unit tests of action execution ([`super`]), checked against independent
//! computations: rewritten frames are re-parsed with `etherparse`, whose
//! checksum functions (IPv4 header, TCP, UDP and ICMPv6 with their
//! pseudo-headers) must agree with the stored checksums; SCTP's CRC32c is
//! recomputed by a bitwise implementation written here.

use super::*;
use etherparse::{NetHeaders, PacketBuilder, PacketHeaders, TransportHeader, VlanHeader, VlanId};
use flowpath_flow::extract::extract_with_layers;
use proptest::prelude::*;

const SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];

fn tcp4(payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    PacketBuilder::ethernet2(SRC_MAC, DST_MAC)
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .tcp(1234, 80, 7, 1000)
        .write(&mut v, payload)
        .unwrap();
    v
}

fn udp4(payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    PacketBuilder::ethernet2(SRC_MAC, DST_MAC)
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .udp(5000, 53)
        .write(&mut v, payload)
        .unwrap();
    v
}

const V6_SRC: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const V6_DST: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

fn v6(proto: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    let b = PacketBuilder::ethernet2(SRC_MAC, DST_MAC).ipv6(V6_SRC, V6_DST, 64);
    match proto {
        6 => b.tcp(1234, 80, 7, 1000).write(&mut v, payload).unwrap(),
        17 => b.udp(5000, 53).write(&mut v, payload).unwrap(),
        _ => b.icmpv6_echo_request(9, 1).write(&mut v, payload).unwrap(),
    }
    v
}

/// A packet buffer and its metadata, as the switch prepares them.
fn load(frame: &[u8]) -> (PacketBuf, PacketMeta) {
    let mut p = PacketBuf::new();
    p.load(frame).unwrap();
    let (k, l) = extract_with_layers(p.data(), 1);
    (p, PacketMeta::new(&k, &l))
}

/// A `set` action: `f` fills the new values and the mask.
fn set(header: SetHeader, f: impl FnOnce(&mut FlowKey, &mut FlowKey)) -> DpAction {
    let (mut k, mut m) = (FlowKey::zero(), FlowKey::zero());
    f(&mut k, &mut m);
    DpAction::Set {
        header,
        key: k,
        mask: FlowMask::from_key(&m),
    }
}

fn run(frame: &[u8], actions: &[DpAction]) -> Vec<u8> {
    let (mut p, mut meta) = load(frame);
    for a in actions {
        apply(&mut p, &mut meta, a).unwrap();
    }
    p.data().to_vec()
}

/// Checks every checksum etherparse knows for `frame`; returns the headers.
fn parse_valid(frame: &[u8]) -> PacketHeaders<'_> {
    let h = PacketHeaders::from_ethernet_slice(frame).unwrap();
    let payload = h.payload.slice();
    match (&h.net, &h.transport) {
        (Some(NetHeaders::Ipv4(ip, _)), t) => {
            assert_eq!(
                ip.header_checksum,
                ip.calc_header_checksum(),
                "IPv4 header checksum"
            );
            match t {
                Some(TransportHeader::Tcp(tcp)) => assert_eq!(
                    tcp.checksum,
                    tcp.calc_checksum_ipv4(ip, payload).unwrap(),
                    "TCP checksum"
                ),
                Some(TransportHeader::Udp(udp)) if udp.checksum != 0 => assert_eq!(
                    udp.checksum,
                    udp.calc_checksum_ipv4(ip, payload).unwrap(),
                    "UDP checksum"
                ),
                _ => {}
            }
        }
        (Some(NetHeaders::Ipv6(ip, _)), t) => match t {
            Some(TransportHeader::Tcp(tcp)) => assert_eq!(
                tcp.checksum,
                tcp.calc_checksum_ipv6(ip, payload).unwrap(),
                "TCP checksum"
            ),
            Some(TransportHeader::Udp(udp)) => assert_eq!(
                udp.checksum,
                udp.calc_checksum_ipv6(ip, payload).unwrap(),
                "UDP checksum"
            ),
            Some(TransportHeader::Icmpv6(icmp)) => assert_eq!(
                icmp.checksum,
                icmp.icmp_type
                    .calc_checksum(ip.source, ip.destination, payload)
                    .unwrap(),
                "ICMPv6 checksum"
            ),
            _ => {}
        },
        _ => {}
    }
    h
}

fn ipv4_of<'a>(h: &'a PacketHeaders<'_>) -> &'a etherparse::Ipv4Header {
    match &h.net {
        Some(NetHeaders::Ipv4(ip, _)) => ip,
        other => panic!("not IPv4: {other:?}"),
    }
}

fn ipv6_of<'a>(h: &'a PacketHeaders<'_>) -> &'a etherparse::Ipv6Header {
    match &h.net {
        Some(NetHeaders::Ipv6(ip, _)) => ip,
        other => panic!("not IPv6: {other:?}"),
    }
}

#[test]
fn ipv4_tcp_addresses_tos_ttl_with_valid_checksums() {
    let f = tcp4(b"hello world");
    parse_valid(&f);
    let a = set(SetHeader::Ipv4, |k, m| {
        k.set_nw_src(0xc0a8_0101);
        m.set_nw_src(u32::MAX);
        k.set_nw_dst(0x0808_0808);
        m.set_nw_dst(u32::MAX);
        k.set_nw_tos(0xb8);
        m.set_nw_tos(0xff);
        k.set_nw_ttl(63);
        m.set_nw_ttl(0xff);
    });
    let out = run(&f, &[a]);
    let h = parse_valid(&out);
    let ip = ipv4_of(&h);
    assert_eq!(ip.source, [192, 168, 1, 1]);
    assert_eq!(ip.destination, [8, 8, 8, 8]);
    assert_eq!(ip.time_to_live, 63);
    assert_eq!((ip.dscp.value(), ip.ecn.value()), (0xb8 >> 2, 0));
    assert_eq!(h.payload.slice(), b"hello world");
}

#[test]
fn ipv4_masked_set_changes_only_masked_bits() {
    let f = udp4(b"abc");
    let a = set(SetHeader::Ipv4, |k, m| {
        k.set_nw_dst(0xac10_ffff);
        m.set_nw_dst(0xffff_0000);
        k.set_nw_tos(0x03);
        m.set_nw_tos(0x03);
    });
    let out = run(&f, &[a]);
    let h = parse_valid(&out);
    let ip = ipv4_of(&h);
    assert_eq!(ip.destination, [172, 16, 0, 2]);
    assert_eq!(ip.ecn.value(), 3);
    assert_eq!(ip.source, [10, 0, 0, 1]);
}

#[test]
fn udp_zero_checksum_stays_zero() {
    let mut f = udp4(b"payload!");
    f[40..42].copy_from_slice(&[0, 0]);
    let a = set(SetHeader::Ipv4, |k, m| {
        k.set_nw_src(0x0102_0304);
        m.set_nw_src(u32::MAX);
    });
    let b = set(SetHeader::Udp, |k, m| {
        k.set_tp_dst(5353);
        m.set_tp_dst(0xffff);
    });
    let out = run(&f, &[a, b]);
    let h = parse_valid(&out);
    match h.transport {
        Some(TransportHeader::Udp(u)) => {
            assert_eq!(u.checksum, 0);
            assert_eq!(u.destination_port, 5353);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn tcp_and_udp_ports_masked_with_valid_checksums() {
    let a = set(SetHeader::Tcp, |k, m| {
        k.set_tp_src(0xab00);
        m.set_tp_src(0xff00);
        k.set_tp_dst(8080);
        m.set_tp_dst(0xffff);
    });
    let out = run(&tcp4(b"x"), &[a]);
    match parse_valid(&out).transport {
        Some(TransportHeader::Tcp(t)) => {
            assert_eq!(t.source_port, 0xab00 | (1234 & 0xff));
            assert_eq!(t.destination_port, 8080);
        }
        other => panic!("{other:?}"),
    }
    let b = set(SetHeader::Udp, |k, m| {
        k.set_tp_src(7);
        m.set_tp_src(0xffff);
    });
    let out = run(&udp4(b"yy"), &[b]);
    match parse_valid(&out).transport {
        Some(TransportHeader::Udp(u)) => assert_eq!(u.source_port, 7),
        other => panic!("{other:?}"),
    }
}

#[test]
fn ipv6_fields_and_l4_checksums() {
    for proto in [6u8, 17, 58] {
        let f = v6(proto, b"some payload");
        parse_valid(&f);
        let a = set(SetHeader::Ipv6, |k, m| {
            k.set_ipv6_src(0xfe80_0000_0000_0000_0000_0000_0000_0abc);
            m.set_ipv6_src(u128::MAX);
            k.set_ipv6_dst(0x2001_0db8_ffff_0000_0000_0000_0000_0000);
            m.set_ipv6_dst(0xffff_ffff_ffff_ffff_0000_0000_0000_0000);
            k.set_ipv6_label(0x12345);
            m.set_ipv6_label(0xfffff);
            k.set_nw_tos(0x28);
            m.set_nw_tos(0xff);
            k.set_nw_ttl(9);
            m.set_nw_ttl(0xff);
        });
        let out = run(&f, &[a]);
        let h = parse_valid(&out);
        let ip = ipv6_of(&h);
        assert_eq!(
            u128::from_be_bytes(ip.source),
            0xfe80_0000_0000_0000_0000_0000_0000_0abc
        );
        assert_eq!(
            u128::from_be_bytes(ip.destination),
            0x2001_0db8_ffff_0000_0000_0000_0000_0002
        );
        assert_eq!(ip.flow_label.value(), 0x12345);
        assert_eq!(ip.traffic_class, 0x28);
        assert_eq!(ip.hop_limit, 9);
        assert!(h.transport.is_some(), "proto {proto}");
    }
}

/// IPv6 + routing header (segments left 1) + UDP, built by hand.
fn v6_routing_udp() -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&DST_MAC);
    f.extend_from_slice(&SRC_MAC);
    f.extend_from_slice(&[0x86, 0xdd]);
    let udp_len = 8 + 4;
    let mut ip = vec![0x60, 0, 0, 0];
    ip.extend_from_slice(&((8 + udp_len) as u16).to_be_bytes());
    ip.extend_from_slice(&[43, 64]);
    ip.extend_from_slice(&V6_SRC);
    ip.extend_from_slice(&V6_DST);
    f.extend_from_slice(&ip);
    f.extend_from_slice(&[17, 0, 0, 1, 0, 0, 0, 0]);
    f.extend_from_slice(&[0x13, 0x88, 0, 53, 0, udp_len as u8, 0x12, 0x34, 1, 2, 3, 4]);
    f
}

#[test]
fn ipv6_dst_change_with_routing_header_keeps_l4_checksum() {
    let f = v6_routing_udp();
    let csum = |d: &[u8]| [d[14 + 40 + 8 + 6], d[14 + 40 + 8 + 7]];
    let dst = set(SetHeader::Ipv6, |k, m| {
        k.set_ipv6_dst(1);
        m.set_ipv6_dst(u128::MAX);
    });
    let out = run(&f, &[dst]);
    assert_eq!(csum(&out), csum(&f));
    assert_eq!(&out[14 + 24..14 + 40], &1u128.to_be_bytes());
    let src = set(SetHeader::Ipv6, |k, m| {
        k.set_ipv6_src(1);
        m.set_ipv6_src(u128::MAX);
    });
    let out = run(&f, &[src]);
    assert_ne!(csum(&out), csum(&f));
}

/// CRC32c, bit by bit (independent of the table-driven one in `wire`).
fn crc32c_bitwise(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for b in data {
        crc ^= u32::from(*b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82f6_3b78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// Ethernet + IPv4 + SCTP (12-byte common header + 8 bytes of chunk) with
/// a correct CRC32c, plus 4 bytes of Ethernet padding.
fn sctp4() -> Vec<u8> {
    let mut f = Vec::new();
    PacketBuilder::ethernet2(SRC_MAC, DST_MAC)
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .write(&mut f, etherparse::IpNumber(132), &[0u8; 20])
        .unwrap();
    let s = &mut f[34..54];
    s[..4].copy_from_slice(&[0x0b, 0xb8, 0x0b, 0xb9]);
    s[4..8].copy_from_slice(&[1, 2, 3, 4]);
    s[12..20].copy_from_slice(&[0, 0, 0, 8, 9, 9, 9, 9]);
    let c = crc32c_bitwise(s);
    s[8..12].copy_from_slice(&c.to_le_bytes());
    f.extend_from_slice(&[0xee; 4]);
    f
}

fn sctp_crc_ok(f: &[u8]) -> bool {
    let mut s = f[34..54].to_vec();
    let stored = u32::from_le_bytes([s[8], s[9], s[10], s[11]]);
    s[8..12].fill(0);
    crc32c_bitwise(&s) == stored
}

#[test]
fn sctp_ports_keep_a_good_crc_good_and_a_bad_one_bad() {
    let f = sctp4();
    assert!(sctp_crc_ok(&f));
    let a = set(SetHeader::Sctp, |k, m| {
        k.set_tp_src(1);
        m.set_tp_src(0xffff);
        k.set_tp_dst(0x0200);
        m.set_tp_dst(0xff00);
    });
    let out = run(&f, std::slice::from_ref(&a));
    assert_eq!(&out[34..38], &[0, 1, 0x02, 0xb9]);
    assert!(sctp_crc_ok(&out));
    assert_eq!(&out[54..], &[0xee; 4], "padding untouched");
    let mut bad = f.clone();
    bad[42] ^= 0x55;
    let out = run(&bad, &[a]);
    assert_eq!(&out[34..38], &[0, 1, 0x02, 0xb9]);
    assert!(!sctp_crc_ok(&out));
}

#[test]
fn eth_masked_set() {
    let a = set(SetHeader::Eth, |k, m| {
        k.set_dl_src(0x0a0b_0c0d_0e0f);
        m.set_dl_src(0xffff_ffff_ffff);
        k.set_dl_dst(0xaa00_0000_0000);
        m.set_dl_dst(0xff00_0000_0000);
    });
    let out = run(&tcp4(b""), &[a]);
    assert_eq!(&out[..6], &[0xaa, 0, 0, 0, 0, 2]);
    assert_eq!(&out[6..12], &[0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f]);
}

#[test]
fn push_and_pop_vlan_produce_correct_frames() {
    let plain = tcp4(b"data");
    let mut tagged = Vec::new();
    PacketBuilder::ethernet2(SRC_MAC, DST_MAC)
        .single_vlan(VlanId::try_new(10).unwrap())
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .tcp(1234, 80, 7, 1000)
        .write(&mut tagged, b"data")
        .unwrap();
    // push_vlan(vid=10,pcp=0) on the untagged frame gives etherparse's
    // tagged frame; pop_vlan gives the untagged one back.
    let pushed = run(
        &plain,
        &[DpAction::PushVlan {
            tpid: 0x8100,
            tci: 10,
        }],
    );
    assert_eq!(pushed, tagged);
    let popped = run(&tagged, &[DpAction::PopVlan]);
    assert_eq!(popped, plain);
    // Actions after a push or pop find the IP header at its new offset.
    let ttl = set(SetHeader::Ipv4, |k, m| {
        k.set_nw_ttl(5);
        m.set_nw_ttl(0xff);
    });
    let out = run(
        &plain,
        &[
            DpAction::PushVlan {
                tpid: 0x88a8,
                tci: 0x6005,
            },
            DpAction::PushVlan {
                tpid: 0x8100,
                tci: 7,
            },
            ttl,
        ],
    );
    let h = parse_valid(&out);
    match &h.vlan {
        Some(VlanHeader::Double(d)) => {
            assert_eq!(d.outer.vlan_id.value(), 7);
            assert_eq!(d.inner.vlan_id.value(), 5);
            assert_eq!(d.inner.pcp.value(), 3);
            assert_eq!(d.inner.ether_type.0, 0x0800);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(&out[12..14], &[0x81, 0x00]);
    assert_eq!(&out[16..18], &[0x88, 0xa8]);
    assert_eq!(ipv4_of(&h).time_to_live, 5);
    let back = run(&out, &[DpAction::PopVlan, DpAction::PopVlan]);
    let mut want = plain.clone();
    want[14 + 8] = 5;
    let hdr = PacketHeaders::from_ethernet_slice(&back).unwrap();
    assert!(hdr.vlan.is_none());
    assert_eq!(&back[..23], &want[..23]);
    parse_valid(&back);
}

#[test]
fn headerless_and_untagged_frames_are_left_unchanged() {
    let short = [0u8; 10];
    let (mut p, mut meta) = load(&short);
    let ttl = set(SetHeader::Ipv4, |k, m| {
        k.set_nw_ttl(1);
        m.set_nw_ttl(0xff);
    });
    assert_eq!(apply(&mut p, &mut meta, &ttl), Err(ExecError::NoHeader));
    let eth = set(SetHeader::Eth, |k, m| {
        k.set_dl_src(1);
        m.set_dl_src(1);
    });
    assert_eq!(apply(&mut p, &mut meta, &eth), Err(ExecError::NoHeader));
    assert_eq!(
        apply(&mut p, &mut meta, &DpAction::PopVlan),
        Err(ExecError::NoVlan)
    );
    let push = DpAction::PushVlan {
        tpid: 0x8100,
        tci: 1,
    };
    assert_eq!(apply(&mut p, &mut meta, &push), Err(ExecError::NoHeadroom));
    assert_eq!(p.data(), &short);
    // A TCP set on a UDP packet, an L4 set on a later fragment.
    let f = udp4(b"q");
    let (mut p, mut meta) = load(&f);
    let tcp = set(SetHeader::Tcp, |k, m| {
        k.set_tp_dst(1);
        m.set_tp_dst(0xffff);
    });
    assert_eq!(apply(&mut p, &mut meta, &tcp), Err(ExecError::NoHeader));
    // The headroom runs out after HEADROOM / 4 pushes.
    let f = tcp4(b"");
    let (mut p, mut meta) = load(&f);
    for _ in 0..crate::packet::HEADROOM / 4 {
        apply(&mut p, &mut meta, &push).unwrap();
    }
    assert_eq!(apply(&mut p, &mut meta, &push), Err(ExecError::NoHeadroom));
}

/// Collects what a sink receives: (port, bytes, tag).
#[derive(Default)]
struct Collect(Vec<(u32, Vec<u8>, u64)>);

impl PortSink for Collect {
    fn send(&mut self, port: u32, packets: Outputs<'_>) {
        assert!(!packets.is_empty());
        let sum: u64 = packets.iter().map(|p| p.data.len() as u64).sum();
        assert_eq!(
            packets.bytes(),
            sum,
            "Outputs::bytes against the bytes delivered"
        );
        for p in packets.iter() {
            self.0.push((port, p.data.to_vec(), p.tag));
        }
    }
}

#[test]
fn outputs_before_a_change_carry_the_earlier_bytes() {
    let f = tcp4(b"zz");
    let ttl = set(SetHeader::Ipv4, |k, m| {
        k.set_nw_ttl(1);
        m.set_nw_ttl(0xff);
    });
    let actions = [
        DpAction::Output(2),
        ttl,
        DpAction::Output(3),
        DpAction::PushVlan {
            tpid: 0x8100,
            tci: 4,
        },
        DpAction::Output(4),
        DpAction::PopVlan,
        DpAction::Output(5),
    ];
    let (mut p, mut meta) = load(&f);
    let mut ex = Executor::new();
    ex.execute(0, &mut p, &mut meta, &actions, 99, &FlowKey::zero());
    let mut sink = Collect::default();
    ex.flush(std::slice::from_ref(&p), &mut sink);
    let got = sink.0;
    assert_eq!(
        got.iter().map(|g| g.0).collect::<Vec<_>>(),
        vec![2, 3, 4, 5]
    );
    assert!(got.iter().all(|g| g.2 == 99));
    assert_eq!(got[0].1, f);
    let f_ttl1 = run(&f, &actions[1..2]);
    assert_eq!(got[1].1, f_ttl1);
    assert_eq!(got[2].1.len(), f.len() + 4);
    assert_eq!(&got[2].1[12..16], &[0x81, 0, 0, 4]);
    assert_eq!(got[3].1, f_ttl1);
    assert_eq!(ex.stats().clones, 3);
    assert_eq!(ex.queued(), 0);
}

#[test]
fn trunc_cuts_only_the_next_output() {
    let f = tcp4(&[7; 40]);
    let ttl = set(SetHeader::Ipv4, |k, m| {
        k.set_nw_ttl(1);
        m.set_nw_ttl(0xff);
    });
    let actions = [
        DpAction::Trunc(20),
        DpAction::Output(2),
        DpAction::Output(3),
        DpAction::Trunc(1000),
        ttl,
        DpAction::Output(4),
    ];
    let (mut p, mut meta) = load(&f);
    let mut ex = Executor::new();
    ex.execute(0, &mut p, &mut meta, &actions, 1, &FlowKey::zero());
    let mut sink = Collect::default();
    ex.flush(std::slice::from_ref(&p), &mut sink);
    let got = sink.0;
    assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), vec![2, 3, 4]);
    assert_eq!(got[0].1, f[..20], "truncated copy");
    assert_eq!(
        got[1].1, f,
        "the next output is whole (and before the change)"
    );
    assert_eq!(
        got[2].1,
        run(&f, &actions[4..5]),
        "longer than the packet: whole"
    );
    assert_eq!(ex.stats().truncated, 1);
}

#[test]
fn flush_groups_per_port_in_order_and_counts() {
    let frames: Vec<Vec<u8>> = (0..5u8).map(|i| tcp4(&[i; 3])).collect();
    let mut bufs: Vec<PacketBuf> = Vec::new();
    let mut ex = Executor::new();
    let plans: [&[DpAction]; 5] = [
        &[DpAction::Output(3), DpAction::Output(1)],
        &[],
        &[DpAction::Output(1)],
        &[DpAction::CONTROLLER],
        &[DpAction::Output(3), DpAction::Output(3)],
    ];
    for (i, f) in frames.iter().enumerate() {
        let (mut p, mut meta) = load(f);
        ex.execute(i, &mut p, &mut meta, plans[i], i as u64, &FlowKey::zero());
        bufs.push(p);
    }
    let mut calls: Vec<(u32, Vec<u64>)> = Vec::new();
    let mut sink = |port: u32, out: Outputs<'_>| {
        assert_eq!(out.len(), out.iter().len());
        for (j, p) in out.iter().enumerate() {
            assert_eq!(out.get(j), Some(p));
            assert_eq!(p.data, &frames[p.tag as usize][..]);
        }
        calls.push((port, out.iter().map(|p| p.tag).collect()));
    };
    ex.flush(&bufs, &mut sink);
    assert_eq!(calls, vec![(3, vec![0, 4, 4]), (1, vec![0, 2])]);
    let s = ex.stats();
    assert_eq!(
        (
            s.packets,
            s.output_packets,
            s.dropped,
            s.controller,
            s.clones
        ),
        (5, 5, 1, 1, 0)
    );
    let ports: Vec<(u32, u64)> = ex
        .port_stats()
        .iter()
        .map(|p| (p.port, p.packets))
        .collect();
    assert_eq!(ports, vec![(3, 3), (1, 2)]);
    // Nothing queued: no call.
    let mut none = |_: u32, _: Outputs<'_>| panic!("no outputs expected");
    ex.flush(&bufs, &mut none);
}

fn action_strategy() -> impl Strategy<Value = DpAction> {
    let word = proptest::collection::vec(any::<u64>(), flowpath_flow::FLOW_WORDS).prop_map(|v| {
        let mut a = [0u64; flowpath_flow::FLOW_WORDS];
        a.copy_from_slice(&v);
        a
    });
    prop_oneof![
        (0u32..4).prop_map(DpAction::Output),
        Just(DpAction::PopVlan),
        Just(DpAction::CONTROLLER),
        (any::<u16>(), any::<u16>()).prop_map(|(tpid, tci)| DpAction::PushVlan { tpid, tci }),
        (0usize..11, word.clone(), word).prop_map(|(h, k, m)| DpAction::Set {
            header: [
                SetHeader::Eth,
                SetHeader::Ipv4,
                SetHeader::Ipv6,
                SetHeader::Tcp,
                SetHeader::Udp,
                SetHeader::Sctp,
                SetHeader::Arp,
                SetHeader::Icmp,
                SetHeader::Icmpv6,
                SetHeader::Nd,
                SetHeader::NdExt,
            ][h],
            key: FlowKey { w: k },
            mask: FlowMask { w: m },
        }),
    ]
}

fn frame_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..80),
        (
            0usize..5,
            proptest::collection::vec(any::<(usize, u8)>(), 0..6)
        )
            .prop_map(|(k, edits)| {
                let mut f = match k {
                    0 => tcp4(b"abcdef"),
                    1 => udp4(b"abc"),
                    2 => v6(58, b"x"),
                    3 => v6_routing_udp(),
                    _ => sctp4(),
                };
                for (at, b) in edits {
                    let n = f.len();
                    f[at % n] = b;
                }
                f
            }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Any action list on any frame: no panic, offsets stay inside the
    /// frame, outputs come out in order.
    #[test]
    fn random_actions_on_random_frames_never_panic(
        frame in frame_strategy(),
        actions in proptest::collection::vec(action_strategy(), 0..8),
    ) {
        let (mut p, mut meta) = load(&frame);
        let mut ex = Executor::new();
        ex.execute(0, &mut p, &mut meta, &actions, 0, &FlowKey::zero());
        for o in [meta.l3, meta.l4] {
            prop_assert!(o == NONE || usize::from(o) <= p.len());
        }
        let mut sink = NullSink::default();
        ex.flush(std::slice::from_ref(&p), &mut sink);
        let outputs = actions.iter().filter(|a| matches!(a, DpAction::Output(_))).count();
        prop_assert_eq!(sink.packets, outputs as u64);
    }
}

/// `check_pkt_len`: the branch the frame's length picks runs, the other
/// does not; nested checks; actions after the check run in both cases;
/// the length is the frame's as it is then (after a `push_vlan`).
#[test]
fn check_pkt_len_runs_the_branch_the_length_picks() {
    let c = |size, gt, le| DpAction::CheckPktLen { size, gt, le };
    let o = DpAction::Output;
    // check_pkt_len(size=S,gt(2,check_pkt_len(size=T,gt(5),le(6))),le(3)),4
    let list = |s: u16, t: u16| vec![c(s, 4, 1), o(2), c(t, 1, 1), o(5), o(6), o(3), o(4)];
    let ports = |frame: &[u8], actions: &[DpAction]| {
        let (mut p, mut meta) = load(frame);
        let mut ex = Executor::new();
        ex.execute(0, &mut p, &mut meta, actions, 0, &FlowKey::zero());
        let mut sink = Collect::default();
        ex.flush(std::slice::from_ref(&p), &mut sink);
        let s = ex.stats();
        (
            sink.0.iter().map(|g| g.0).collect::<Vec<_>>(),
            s.check_pkt_len_gt,
            s.check_pkt_len_le,
        )
    };
    let f = tcp4(&[1; 46]); // 100 bytes
    assert_eq!(f.len(), 100);
    assert_eq!(ports(&f, &list(99, 99)), (vec![2, 5, 4], 2, 0));
    assert_eq!(ports(&f, &list(99, 100)), (vec![2, 6, 4], 1, 1));
    // "Greater than": a frame of exactly the size is not.
    assert_eq!(ports(&f, &list(100, 0)), (vec![3, 4], 0, 1));
    assert_eq!(ports(&f, &list(1500, 0)), (vec![3, 4], 0, 1));
    // Empty branches: nothing sent, counted as a drop.
    let (mut p, mut meta) = load(&f);
    let mut ex = Executor::new();
    ex.execute(0, &mut p, &mut meta, &[c(10, 0, 0)], 0, &FlowKey::zero());
    assert_eq!((ex.stats().dropped, ex.queued()), (1, 0));
    // The length after a push_vlan counts.
    let push = DpAction::PushVlan {
        tpid: 0x8100,
        tci: 7,
    };
    assert_eq!(
        ports(&f, &[push, c(102, 1, 1), o(2), o(3)]),
        (vec![2], 1, 0)
    );
}

/// An output in one branch before a change in the same branch carries the
/// bytes as they were; a change in the branch not taken changes nothing.
#[test]
fn check_pkt_len_branches_change_only_their_packet() {
    let f = tcp4(b"zz");
    let ttl = set(SetHeader::Ipv4, |k, m| {
        k.set_nw_ttl(1);
        m.set_nw_ttl(0xff);
    });
    let c = DpAction::CheckPktLen {
        size: 10,
        gt: 3,
        le: 2,
    };
    let actions = [
        c,
        DpAction::Output(2),
        ttl,
        DpAction::Output(3),
        ttl,
        DpAction::Output(4),
        DpAction::Output(5),
    ];
    let (mut p, mut meta) = load(&f);
    let mut ex = Executor::new();
    ex.execute(0, &mut p, &mut meta, &actions, 0, &FlowKey::zero());
    let mut sink = Collect::default();
    ex.flush(std::slice::from_ref(&p), &mut sink);
    let got = sink.0;
    assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), vec![2, 3, 5]);
    let f_ttl1 = run(&f, &[ttl]);
    assert_eq!(got[0].1, f, "output before the branch's change");
    assert_eq!(got[1].1, f_ttl1);
    assert_eq!(got[2].1, f_ttl1);
}

/// One action of the lists `execute_outputs` is tested on: mostly outputs,
/// sometimes one it must refuse.
fn run_action() -> impl Strategy<Value = DpAction> {
    prop_oneof![
        6 => (1u32..5).prop_map(DpAction::Output),
        1 => Just(DpAction::CONTROLLER),
        1 => Just(DpAction::Trunc(20)),
        1 => Just(set(SetHeader::Ipv4, |k, m| {
            k.set_nw_ttl(1);
            m.set_nw_ttl(0xff);
        })),
        1 => Just(DpAction::PopVlan),
    ]
}

proptest! {
    /// `execute_outputs` on a run of packets gives what `execute` packet by
    /// packet gives: the same sink calls (ports, order, bytes, tags) and
    /// counters; it takes exactly the lists made only of outputs.
    #[test]
    fn a_run_of_outputs_is_executed_as_packet_by_packet(
        actions in proptest::collection::vec(run_action(), 0..5),
        before in 0usize..3,
        len in 1usize..9,
    ) {
        // Lengths differ from packet to packet: the run's queued lengths
        // must be each packet's own (the port's byte counter compares).
        let frames: Vec<Vec<u8>> = (0..before + len).map(|i| tcp4(&vec![i as u8; 30 + i % 7])).collect();
        let tags: Vec<u64> = (0..frames.len() as u64).map(|t| 100 + t).collect();
        let run_exec = |whole: bool| {
            let mut ex = Executor::new();
            let mut bufs = Vec::new();
            let mut metas = Vec::new();
            for f in &frames {
                let (p, m) = load(f);
                bufs.push(p);
                metas.push(m);
            }
            // Packets before the run: one output each.
            for i in 0..before {
                ex.execute(i, &mut bufs[i], &mut metas[i], &[DpAction::Output(9)], tags[i], &FlowKey::zero());
            }
            let lens: Vec<u32> = frames[before..].iter().map(|f| f.len() as u32).collect();
            let taken = whole && ex.execute_outputs(before, &tags[before..], &lens, &actions);
            if !taken {
                for i in before..frames.len() {
                    ex.execute(i, &mut bufs[i], &mut metas[i], &actions, tags[i], &FlowKey::zero());
                }
            }
            let mut sink = Collect::default();
            ex.flush(&bufs, &mut sink);
            (taken, sink.0, *ex.stats(), ex.port_stats().to_vec())
        };
        let (taken, got, stats, ports) = run_exec(true);
        let (_, want, want_stats, want_ports) = run_exec(false);
        let only_outputs = actions.iter().all(|a| matches!(a, DpAction::Output(_)));
        prop_assert_eq!(taken, only_outputs);
        prop_assert_eq!(got, want);
        prop_assert_eq!(stats, want_stats);
        prop_assert_eq!(ports, want_ports);
    }
}

#[test]
fn clone_changes_only_its_copy() {
    let f = tcp4(b"payload bytes");
    let ttl = set(SetHeader::Ipv4, |k, m| {
        k.set_nw_ttl(1);
        m.set_nw_ttl(0xff);
    });
    // clone(trunc(20),set(ipv4(ttl=1)),2,clone(3)),4 — then the original
    // packet, unchanged, to port 4.
    let actions = [
        DpAction::Clone { len: 5 },
        DpAction::Trunc(20),
        ttl,
        DpAction::Output(2),
        DpAction::Clone { len: 1 },
        DpAction::Output(3),
        DpAction::Output(4),
    ];
    assert_eq!(
        flowpath_odp::format_actions(&actions),
        "clone(trunc(20),set(ipv4(ttl=1)),2,clone(3)),4"
    );
    let (mut p, mut meta) = load(&f);
    let mut ex = Executor::new();
    ex.execute(0, &mut p, &mut meta, &actions, 0, &FlowKey::zero());
    let mut sink = Collect::default();
    ex.flush(std::slice::from_ref(&p), &mut sink);
    let got = sink.0;
    assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), vec![2, 3, 4]);
    let f_ttl1 = run(&f, &[ttl]);
    assert_eq!(got[0].1, f_ttl1[..20], "truncated inside the clone");
    assert_eq!(got[1].1, f_ttl1, "the clone's packet, whole");
    assert_eq!(got[2].1, f, "the packet after the clone is as before");
    assert_eq!(p.data(), &f[..]);
    assert_eq!(ex.stats().dropped, 0);
}

mod arp_icmp_nd;
mod partial;
mod tunnel;
