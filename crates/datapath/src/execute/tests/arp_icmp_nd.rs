//! Rewrites of ARP, ICMP, ICMPv6 and neighbour-discovery fields: the
//! rewritten frames read back by the extractor, checksums checked by
//! etherparse or by an independent sum.

use super::*;

/// An ARP request (Ethernet/IPv4) from 10.0.0.1 asking for 10.0.0.2.
fn arp_request() -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&[0xff; 6]);
    v.extend_from_slice(&SRC_MAC);
    v.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
    v.extend_from_slice(&SRC_MAC);
    v.extend_from_slice(&[10, 0, 0, 1]);
    v.extend_from_slice(&[0; 6]);
    v.extend_from_slice(&[10, 0, 0, 2]);
    v
}

#[test]
fn arp_responder_rewrite() {
    // What an ARP responder's actions commit: a reply from 10.0.0.2
    // (opcode 2, the addresses swapped, a new sender MAC).
    let a = set(SetHeader::Arp, |k, m| {
        k.set_nw_proto(2);
        m.set_nw_proto(0xff);
        k.set_nw_src(0x0a00_0002);
        m.set_nw_src(u32::MAX);
        k.set_nw_dst(0x0a00_0001);
        m.set_nw_dst(u32::MAX);
        k.set_arp_sha(0x5054_0000_0001);
        m.set_arp_sha(0xffff_ffff_ffff);
        k.set_arp_tha(0x0200_0000_0001);
        m.set_arp_tha(0xffff_ffff_ffff);
    });
    let f = run(&arp_request(), &[a]);
    let h = &f[14..];
    assert_eq!(h[..8], [0, 1, 8, 0, 6, 4, 0, 2], "opcode 2");
    assert_eq!(h[8..14], [0x50, 0x54, 0, 0, 0, 1]);
    assert_eq!(h[14..18], [10, 0, 0, 2]);
    assert_eq!(h[18..24], SRC_MAC);
    assert_eq!(h[24..28], [10, 0, 0, 1]);
    // The extractor reads back what was written.
    let k = flowpath_flow::extract::extract(&f, 1);
    assert_eq!(
        (k.nw_proto(), k.nw_src(), k.arp_sha()),
        (2, 0x0a00_0002, 0x5054_0000_0001)
    );
    // A masked set changes only its bits.
    let b = set(SetHeader::Arp, |k, m| {
        k.set_nw_dst(0x0000_00fe);
        m.set_nw_dst(0x0000_00ff);
    });
    let g = run(&arp_request(), &[b]);
    assert_eq!(g[14 + 24..14 + 28], [10, 0, 0, 0xfe]);
    assert_eq!(g[..14 + 24], arp_request()[..14 + 24]);
}

#[test]
fn icmp_type_and_code_with_valid_checksums() {
    let mut v = Vec::new();
    PacketBuilder::ethernet2(SRC_MAC, DST_MAC)
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .icmpv4_echo_request(7, 1)
        .write(&mut v, b"ping payload")
        .unwrap();
    // An echo request made a "destination unreachable, host" (3/1).
    let a = set(SetHeader::Icmp, |k, m| {
        k.set_tp_src(3);
        k.set_tp_dst(1);
        m.set_tp_src(0xff);
        m.set_tp_dst(0xff);
    });
    let f = run(&v, &[a]);
    assert_eq!(f[34..36], [3, 1]);
    // The ICMP message (from offset 34) sums to all ones with its
    // checksum: computed here, word by word.
    let sum = f[34..].chunks(2).fold(0u32, |s, c| {
        s + u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))
    });
    let folded = (sum & 0xffff) + (sum >> 16);
    assert_eq!((folded & 0xffff) + (folded >> 16), 0xffff, "ICMP checksum");
    // ICMPv6: an echo request made a reply.
    let a = set(SetHeader::Icmpv6, |k, m| {
        k.set_tp_src(129);
        m.set_tp_src(0xff);
        m.set_tp_dst(0xff);
    });
    let f = run(&v6(58, b"x"), &[a]);
    let h = parse_valid(&f);
    assert!(matches!(
        &h.transport,
        Some(TransportHeader::Icmpv6(i)) if matches!(i.icmp_type, etherparse::Icmpv6Type::EchoReply(_))
    ));
    // Not the header the packet has: left unchanged.
    let (mut p, mut meta) = load(&tcp4(b"x"));
    assert_eq!(
        apply(
            &mut p,
            &mut meta,
            &set(SetHeader::Icmp, |_, m| m.set_tp_src(0xff))
        ),
        Err(ExecError::NoHeader)
    );
}

/// A neighbour solicitation for `target` with a source link-layer address
/// option.
fn neighbour_solicitation(target: [u8; 16]) -> Vec<u8> {
    let mut body = vec![135, 0, 0, 0, 0, 0, 0, 0];
    body.extend_from_slice(&target);
    body.extend_from_slice(&[1, 1]);
    body.extend_from_slice(&SRC_MAC);
    let mut v = Vec::new();
    PacketBuilder::ethernet2(SRC_MAC, DST_MAC)
        .ipv6(V6_SRC, V6_DST, 255)
        .icmpv6(etherparse::Icmpv6Type::Unknown {
            type_u8: 135,
            code_u8: 0,
            bytes5to8: [0; 4],
        })
        .write(&mut v, &body[8..])
        .unwrap();
    v
}

#[test]
fn nd_target_and_link_layer_option_with_valid_checksum() {
    let mut t = V6_DST;
    t[15] = 9;
    let a = set(SetHeader::Nd, |k, m| {
        k.set_nd_target(u128::from_be_bytes(t));
        m.set_nd_target(u128::MAX);
        k.set_arp_sha(0x5054_0000_0007);
        m.set_arp_sha(0xffff_ffff_ffff);
    });
    let f = run(&neighbour_solicitation(V6_SRC), &[a]);
    parse_valid(&f);
    let k = flowpath_flow::extract::extract(&f, 1);
    assert_eq!(k.nd_target(), u128::from_be_bytes(t));
    assert_eq!(k.arp_sha(), 0x5054_0000_0007, "the SLL option rewritten");
    // No TLL option in a solicitation: a write to it changes nothing.
    let b = set(SetHeader::Nd, |k, m| {
        k.set_arp_tha(1);
        m.set_arp_tha(0xffff_ffff_ffff);
    });
    let orig = neighbour_solicitation(V6_SRC);
    assert_eq!(run(&orig, &[b]), orig);
}

#[test]
fn nd_reserved_and_option_type_with_valid_checksum() {
    let a = set(SetHeader::NdExt, |k, m| {
        k.set_nd_reserved(0x6000_0000);
        m.set_nd_reserved(u32::MAX);
        k.set_nd_options_type(2);
        m.set_nd_options_type(0xff);
    });
    let f = run(&neighbour_solicitation(V6_SRC), &[a]);
    parse_valid(&f);
    let l4 = 14 + 40;
    assert_eq!(f[l4 + 4..l4 + 8], [0x60, 0, 0, 0]);
    assert_eq!(f[l4 + 24], 2, "the first option's type");
    let k = flowpath_flow::extract::extract(&f, 1);
    assert_eq!((k.nd_reserved(), k.nd_options_type()), (0x6000_0000, 2));
    // Only the reserved word's masked bits.
    let b = set(SetHeader::NdExt, |k, m| {
        k.set_nd_reserved(0x1);
        m.set_nd_reserved(0xf);
    });
    let g = run(&neighbour_solicitation(V6_SRC), &[b]);
    parse_valid(&g);
    assert_eq!(g[l4 + 4..l4 + 8], [0, 0, 0, 1]);
    assert_eq!(g[l4 + 24], 1, "the option type unchanged");
}
