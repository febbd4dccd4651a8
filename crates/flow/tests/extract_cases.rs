//! Hand-built frames, one per extraction rule of `flowpath_flow::extract`
//! (see that module's docs for the rules, which follow OVS 3.x).

use flowpath_flow::extract::{extract, extract_with_layers, Layers, NONE};
use flowpath_flow::key::{FlowKey, FRAG_ANY, FRAG_LATER, VLAN_CFI};

const DST: [u8; 6] = [0x00, 0x11, 0x22, 0x33, 0x44, 0x55];
const SRC: [u8; 6] = [0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb];
const V6A: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const V6B: [u8; 16] = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

fn eth(ty: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&DST);
    f.extend_from_slice(&SRC);
    f.extend_from_slice(&ty.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn tagged(tags: &[(u16, u16)], ty: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&DST);
    f.extend_from_slice(&SRC);
    for (tpid, tci) in tags {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&tci.to_be_bytes());
    }
    f.extend_from_slice(&ty.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// IPv4 header (+ options) + payload; total length covers both.
fn ipv4(proto: u8, flags_frag: u16, options: &[u8], payload: &[u8]) -> Vec<u8> {
    let hl = 20 + options.len();
    let total = (hl + payload.len()) as u16;
    let mut h = vec![
        0x40 | (hl / 4) as u8,
        0xb9,
        0,
        0,
        0x12,
        0x34,
        0,
        0,
        64,
        proto,
        0,
        0,
        10,
        0,
        0,
        1,
        192,
        168,
        1,
        2,
    ];
    h[2..4].copy_from_slice(&total.to_be_bytes());
    h[6..8].copy_from_slice(&flags_frag.to_be_bytes());
    h.extend_from_slice(options);
    h.extend_from_slice(payload);
    h
}

fn ipv6(next: u8, payload: &[u8]) -> Vec<u8> {
    let mut h = vec![0x6b, 0x9a, 0xbc, 0xde, 0, 0, next, 33];
    h[4..6].copy_from_slice(&(payload.len() as u16).to_be_bytes());
    h.extend_from_slice(&V6A);
    h.extend_from_slice(&V6B);
    h.extend_from_slice(payload);
    h
}

fn tcp(sport: u16, dport: u16, offset_words: u8, flags: u16, total_len: usize) -> Vec<u8> {
    let mut t = vec![0u8; total_len];
    t[0..2].copy_from_slice(&sport.to_be_bytes());
    t[2..4].copy_from_slice(&dport.to_be_bytes());
    let w = (u16::from(offset_words) << 12) | flags;
    t[12..14].copy_from_slice(&w.to_be_bytes());
    t
}

fn udp(sport: u16, dport: u16) -> Vec<u8> {
    let mut u = vec![0u8; 12];
    u[0..2].copy_from_slice(&sport.to_be_bytes());
    u[2..4].copy_from_slice(&dport.to_be_bytes());
    u[4..6].copy_from_slice(&12u16.to_be_bytes());
    u
}

fn ext(next: u8, len_byte: u8) -> Vec<u8> {
    let mut e = vec![0u8; (usize::from(len_byte) + 1) * 8];
    e[0] = next;
    e[1] = len_byte;
    e
}

fn frag6(next: u8, offset: u16, more: bool) -> Vec<u8> {
    let mut f = vec![next, 0, 0, 0, 0, 0, 0, 9];
    f[2..4].copy_from_slice(&((offset << 3) | u16::from(more)).to_be_bytes());
    f
}

fn mac(b: [u8; 6]) -> u64 {
    u64::from_be_bytes([0, 0, b[0], b[1], b[2], b[3], b[4], b[5]])
}

fn l2_only(k: &FlowKey, dl_type: u16) {
    let mut e = FlowKey::zero();
    e.set_in_port(k.in_port());
    e.set_dl_dst(mac(DST));
    e.set_dl_src(mac(SRC));
    e.set_vlan_tci(k.vlan_tci());
    e.set_vlan_tci_inner(k.vlan_tci_inner());
    e.set_dl_type(dl_type);
    assert_eq!(*k, e);
}

#[test]
fn short_frame_has_only_in_port() {
    for len in 0..14 {
        let f = vec![0xffu8; len];
        let (k, l) = extract_with_layers(&f, 7);
        let mut e = FlowKey::zero();
        e.set_in_port(7);
        assert_eq!(k, e);
        assert_eq!(l, Layers::EMPTY);
    }
}

#[test]
fn unknown_ethertype_is_l2_only() {
    let f = eth(0x88cc, &[1, 2, 3]);
    let (k, l) = extract_with_layers(&f, 1);
    l2_only(&k, 0x88cc);
    assert_eq!(
        l,
        Layers {
            l3: 14,
            l4: NONE,
            vlan_count: 0
        }
    );
}

/// MPLS: the label stack entries (the first three), nothing after them.
#[test]
fn mpls_label_stack() {
    let lse = |label: u32, tc: u32, bos: bool, ttl: u32| {
        (label << 12) | (tc << 9) | (u32::from(bos) << 8) | ttl
    };
    // One entry (bottom of stack: label 1, tc 0, ttl 64), then IPv4: the
    // IPv4 header is not parsed.
    let f = eth(0x8847, &[0, 0, 0x11, 0x40, 0x45, 0, 0, 20]);
    let k = extract(&f, 1);
    assert_eq!(k.mpls_lse0(), lse(1, 0, true, 64));
    assert_eq!(k.mpls_lse1(), 0);
    assert_eq!((k.nw_src(), k.nw_proto()), (0, 0));
    let mut e = k;
    e.set_mpls_lse0(0);
    l2_only(&e, 0x8847);
    // Four entries: the first three kept; multicast MPLS too.
    let mut body = Vec::new();
    for x in [
        lse(100, 5, false, 9),
        lse(0xfffff, 7, false, 255),
        lse(3, 0, false, 1),
        lse(4, 0, true, 1),
    ] {
        body.extend(x.to_be_bytes());
    }
    let k = extract(&eth(0x8848, &body), 1);
    assert_eq!(k.dl_type(), 0x8848);
    assert_eq!(k.mpls_lse0(), lse(100, 5, false, 9));
    assert_eq!(k.mpls_lse1(), lse(0xfffff, 7, false, 255));
    assert_eq!(k.mpls_lse2(), lse(3, 0, false, 1));
    // A bottom second entry: the third is not read.
    let mut body = Vec::new();
    for x in [lse(1, 0, false, 1), lse(2, 0, true, 1), lse(3, 0, true, 1)] {
        body.extend(x.to_be_bytes());
    }
    let k = extract(&eth(0x8847, &body), 1);
    assert_eq!((k.mpls_lse1(), k.mpls_lse2()), (lse(2, 0, true, 1), 0));
    // A bottom entry first: the second is not read.
    let mut body = lse(7, 1, true, 2).to_be_bytes().to_vec();
    body.extend(lse(8, 0, true, 3).to_be_bytes());
    assert_eq!(extract(&eth(0x8847, &body), 1).mpls_lse1(), 0);
    // A cut entry is not read.
    let k = extract(&eth(0x8847, &[0, 0, 0x11]), 1);
    assert_eq!(k.mpls_lse0(), 0);
    let k = extract(&eth(0x8847, &[0, 0, 0x10, 0x40, 0, 0]), 1);
    assert_eq!((k.mpls_lse0(), k.mpls_lse1()), (lse(1, 0, false, 64), 0));
}

#[test]
fn vlan_tags() {
    let f = tagged(&[(0x8100, 0xb064)], 0x88cc, &[]);
    let (k, l) = extract_with_layers(&f, 1);
    assert_eq!(k.vlan_tci(), 0xb064 | VLAN_CFI);
    assert_eq!(k.vlan_tci_inner(), 0);
    assert_eq!(k.dl_type(), 0x88cc);
    assert_eq!((l.l3, l.vlan_count), (18, 1));

    let f = tagged(&[(0x88a8, 0x00c8), (0x8100, 0x07d1)], 0x0806, &[]);
    let (k, l) = extract_with_layers(&f, 1);
    assert_eq!(k.vlan_tci(), 0x10c8);
    assert_eq!(k.vlan_tci_inner(), 0x17d1);
    assert_eq!(k.dl_type(), 0x0806);
    assert_eq!((l.l3, l.vlan_count), (22, 2));

    // A third tag is not parsed: its TPID is the dl_type.
    let f = tagged(&[(0x8100, 1), (0x8100, 2), (0x8100, 3)], 0x0800, &[]);
    let (k, l) = extract_with_layers(&f, 1);
    assert_eq!((k.vlan_tci(), k.vlan_tci_inner()), (0x1001, 0x1002));
    assert_eq!(k.dl_type(), 0x8100);
    assert_eq!(l.l3, 22);

    // 0x9100 is not a TPID flowpath parses.
    let f = tagged(&[(0x9100, 5)], 0x0800, &[]);
    let k = extract(&f, 1);
    assert_eq!((k.vlan_tci(), k.dl_type()), (0, 0x9100));
}

#[test]
fn truncated_vlan_tag_stops_at_the_tpid() {
    // Tag present but no room for the following type field.
    let mut f = eth(0x8100, &[0x00, 0x05, 0x08]);
    let (k, l) = extract_with_layers(&f, 1);
    assert_eq!((k.vlan_tci(), k.dl_type()), (0, 0x8100));
    assert_eq!((l.l3, l.vlan_count), (14, 0));
    f.truncate(14);
    assert_eq!(extract(&f, 1).dl_type(), 0x8100);
    // Second tag truncated: first kept, dl_type is the second TPID.
    let f = tagged(&[(0x88a8, 9)], 0x8100, &[0, 1]);
    let (k, l) = extract_with_layers(&f, 1);
    assert_eq!(
        (k.vlan_tci(), k.vlan_tci_inner(), k.dl_type()),
        (0x1009, 0, 0x8100)
    );
    assert_eq!(l.vlan_count, 1);
}

#[test]
fn llc_and_snap() {
    // SNAP with the Ethernet OUI carrying IPv4.
    let mut p = vec![0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00];
    p.extend(ipv4(17, 0, &[], &udp(53, 1024)));
    let f = eth(p.len() as u16, &p);
    let (k, l) = extract_with_layers(&f, 1);
    assert_eq!(k.dl_type(), 0x0800);
    assert_eq!((k.tp_src(), k.tp_dst()), (53, 1024));
    assert_eq!((l.l3, l.l4), (22, 42));
    // STP over LLC: no SNAP.
    let f = eth(38, &[0x42, 0x42, 0x03, 0, 0, 0, 0, 0, 0]);
    let (k, l) = extract_with_layers(&f, 1);
    l2_only(&k, 0x05ff);
    assert_eq!(l.l3, 14);
    // SNAP with a non-Ethernet OUI (Cisco CDP), and with a length-like type.
    l2_only(
        &extract(&eth(30, &[0xaa, 0xaa, 0x03, 0, 0, 0x0c, 0x20, 0]), 1),
        0x05ff,
    );
    let (k, l) = extract_with_layers(&eth(30, &[0xaa, 0xaa, 0x03, 0, 0, 0, 0x05, 0xdc]), 1);
    l2_only(&k, 0x05ff);
    assert_eq!(l.l3, 14);
    // Too short for LLC/SNAP.
    l2_only(&extract(&eth(3, &[0xaa, 0xaa, 0x03]), 1), 0x05ff);
}

#[test]
fn ipv4_tcp() {
    let seg = tcp(49152, 80, 5, 0x0c2, 20);
    let f = eth(0x0800, &ipv4(6, 0x4000, &[], &seg));
    let (k, l) = extract_with_layers(&f, 3);
    assert_eq!(k.in_port(), 3);
    assert_eq!(k.dl_type(), 0x0800);
    assert_eq!(k.nw_src(), 0x0a00_0001);
    assert_eq!(k.nw_dst(), 0xc0a8_0102);
    assert_eq!(k.nw_proto(), 6);
    assert_eq!(k.nw_tos(), 0xb9);
    assert_eq!(k.nw_ttl(), 64);
    assert_eq!(k.nw_frag(), 0);
    assert_eq!((k.tp_src(), k.tp_dst(), k.tcp_flags()), (49152, 80, 0x0c2));
    assert_eq!(
        l,
        Layers {
            l3: 14,
            l4: 34,
            vlan_count: 0
        }
    );
    assert_eq!(k.w[14] | k.w[15], 0);
    assert_eq!(k.ipv6_label(), 0);
}

#[test]
fn ipv4_options_and_padding() {
    let seg = tcp(1, 2, 5, 0xfff, 20);
    let mut f = eth(0x0800, &ipv4(6, 0, &[1, 1, 1, 0], &seg));
    f.extend_from_slice(&[0xee; 10]); // Ethernet padding
    let (k, l) = extract_with_layers(&f, 1);
    assert_eq!((k.tp_src(), k.tp_dst(), k.tcp_flags()), (1, 2, 0xfff));
    assert_eq!(l.l4, 38);
}

#[test]
fn ipv4_fragments() {
    let f = eth(0x0800, &ipv4(17, 0x2000, &[], &udp(7, 8)));
    let k = extract(&f, 1);
    assert_eq!(k.nw_frag(), FRAG_ANY);
    assert_eq!((k.tp_src(), k.tp_dst()), (7, 8), "first fragment keeps L4");
    let f = eth(0x0800, &ipv4(17, 0x0001, &[], &udp(7, 8)));
    let (k, l) = extract_with_layers(&f, 1);
    assert_eq!(k.nw_frag(), FRAG_ANY | FRAG_LATER);
    assert_eq!((k.tp_src(), k.tp_dst(), l.l4), (0, 0, NONE));
    assert_eq!(k.nw_proto(), 17);
    // DF and the reserved bit alone are not fragments.
    let f = eth(0x0800, &ipv4(17, 0xc000, &[], &udp(7, 8)));
    assert_eq!(extract(&f, 1).nw_frag(), 0);
}

#[test]
fn ipv4_invalid_headers_give_no_l3() {
    let good = ipv4(17, 0, &[], &udp(7, 8));
    let cases: Vec<Vec<u8>> = vec![
        good[..19].to_vec(),
        {
            let mut p = good.clone();
            p[0] = 0x65; // version 6
            p
        },
        {
            let mut p = good.clone();
            p[0] = 0x44; // IHL 4
            p
        },
        {
            let mut p = good.clone();
            p[0] = 0x4f; // IHL 15 > bytes
            p
        },
        {
            let mut p = good.clone();
            p[2..4].copy_from_slice(&19u16.to_be_bytes()); // total < IHL
            p
        },
        {
            let mut p = good.clone();
            p[2..4].copy_from_slice(&((good.len() + 1) as u16).to_be_bytes());
            p
        },
    ];
    for p in cases {
        let (k, l) = extract_with_layers(&eth(0x0800, &p), 1);
        l2_only(&k, 0x0800);
        assert_eq!((l.l3, l.l4), (14, NONE));
    }
    // More than 65535 bytes of padding after the total length: OVS refuses.
    let mut p = good.clone();
    p.resize(good.len() + 65536, 0);
    l2_only(&extract(&eth(0x0800, &p), 1), 0x0800);
    p.truncate(good.len() + 65535);
    assert_eq!(extract(&eth(0x0800, &p), 1).tp_dst(), 8);
}

#[test]
fn ipv4_transport_protocols() {
    // UDP needs 8 bytes, SCTP 12, ICMP and IGMP 8.
    let mut sctp = vec![0u8; 12];
    sctp[0..4].copy_from_slice(&[0x0b, 0x59, 0x0b, 0x80]);
    let k = extract(&eth(0x0800, &ipv4(132, 0, &[], &sctp)), 1);
    assert_eq!((k.tp_src(), k.tp_dst()), (2905, 2944));
    let k = extract(&eth(0x0800, &ipv4(132, 0, &[], &sctp[..11])), 1);
    assert_eq!((k.nw_proto(), k.tp_src()), (132, 0));
    let k = extract(&eth(0x0800, &ipv4(1, 0, &[], &[3, 3, 0, 0, 0, 0, 0, 0])), 1);
    assert_eq!((k.tp_src(), k.tp_dst()), (3, 3));
    let k = extract(&eth(0x0800, &ipv4(1, 0, &[], &[3, 3, 0, 0, 0, 0, 0])), 1);
    assert_eq!((k.tp_src(), k.tp_dst()), (0, 0));
    let k = extract(
        &eth(0x0800, &ipv4(2, 0, &[], &[0x16, 0, 0, 0, 224, 0, 0, 1])),
        1,
    );
    assert_eq!((k.tp_src(), k.tp_dst()), (0x16, 0));
    let (k, l) = extract_with_layers(&eth(0x0800, &ipv4(17, 0, &[], &udp(1, 2)[..7])), 1);
    assert_eq!((k.tp_src(), l.l4), (0, NONE));
    // TCP: data offset < 5, or larger than the bytes: no L4 fields.
    let k = extract(&eth(0x0800, &ipv4(6, 0, &[], &tcp(1, 2, 4, 2, 20))), 1);
    assert_eq!((k.tp_src(), k.tcp_flags()), (0, 0));
    let k = extract(&eth(0x0800, &ipv4(6, 0, &[], &tcp(1, 2, 7, 2, 24))), 1);
    assert_eq!((k.tp_src(), k.tcp_flags()), (0, 0));
    let k = extract(&eth(0x0800, &ipv4(6, 0, &[], &tcp(1, 2, 6, 2, 24))), 1);
    assert_eq!((k.tp_src(), k.tcp_flags()), (1, 2));
    // Unknown protocol: L3 only.
    let (k, l) = extract_with_layers(&eth(0x0800, &ipv4(47, 0, &[], &[0; 8])), 1);
    assert_eq!((k.nw_proto(), k.tp_src(), l.l4), (47, 0, NONE));
}

#[test]
fn ipv6_extension_chain_with_first_fragment() {
    let mut p = ext(60, 0); // HBH -> DSTOPTS
    p.extend(ext(43, 1)); // DSTOPTS (16 bytes) -> ROUTING
    p.extend(ext(51, 0)); // ROUTING -> AH
    let mut ah = vec![44, 2, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0xaa, 0xbb, 0xcc, 0xdd]; // 16 bytes
    ah[1] = 2; // (2 + 2) * 4 = 16
    p.extend(ah);
    p.extend(frag6(6, 0, true));
    p.extend(tcp(443, 50000, 5, 0x010, 20));
    let f = eth(0x86dd, &ipv6(0, &p));
    let (k, l) = extract_with_layers(&f, 1);
    assert_eq!(k.dl_type(), 0x86dd);
    assert_eq!(k.ipv6_src(), u128::from_be_bytes(V6A));
    assert_eq!(k.ipv6_dst(), u128::from_be_bytes(V6B));
    assert_eq!(k.ipv6_label(), 0xabcde);
    assert_eq!(k.nw_tos(), 0xb9);
    assert_eq!(k.nw_ttl(), 33);
    assert_eq!(k.nw_proto(), 6);
    assert_eq!(k.nw_frag(), FRAG_ANY);
    assert_eq!((k.tp_src(), k.tp_dst(), k.tcp_flags()), (443, 50000, 0x010));
    assert_eq!(l.l4 as usize, 14 + 40 + 8 + 16 + 8 + 16 + 8);
    assert_eq!(k.nw_src() | k.nw_dst(), 0, "IPv4 fields stay zero");
}

#[test]
fn ipv6_later_fragment_reports_proto_44() {
    let mut p = frag6(17, 100, false);
    p.extend(udp(1, 2));
    let (k, l) = extract_with_layers(&eth(0x86dd, &ipv6(44, &p)), 1);
    assert_eq!(k.nw_frag(), FRAG_ANY | FRAG_LATER);
    assert_eq!(k.nw_proto(), 44);
    assert_eq!((k.tp_src(), l.l4), (0, NONE));
    assert_eq!(k.nw_ttl(), 33);
}

#[test]
fn ipv6_atomic_fragment_is_not_a_fragment() {
    let mut p = frag6(17, 0, false);
    p.extend(udp(1, 2));
    let k = extract(&eth(0x86dd, &ipv6(44, &p)), 1);
    assert_eq!((k.nw_frag(), k.nw_proto(), k.tp_dst()), (0, 17, 2));
    // Reserved bits alone count as "fragment" (OVS tests the whole word).
    let mut p = frag6(17, 0, false);
    p[3] = 0x06;
    p.extend(udp(1, 2));
    let k = extract(&eth(0x86dd, &ipv6(44, &p)), 1);
    assert_eq!((k.nw_frag(), k.tp_dst()), (FRAG_ANY, 2));
}

#[test]
fn ipv6_truncated_extension_header() {
    // DSTOPTS claims 16 bytes, only 8 in the payload.
    let mut p = ext(17, 1);
    p.truncate(8);
    let (k, l) = extract_with_layers(&eth(0x86dd, &ipv6(60, &p)), 1);
    assert_eq!(k.ipv6_src(), u128::from_be_bytes(V6A));
    assert_eq!(k.ipv6_label(), 0xabcde);
    assert_eq!(
        (k.nw_proto(), k.nw_tos(), k.nw_ttl(), k.nw_frag()),
        (0, 0, 0, 0)
    );
    assert_eq!((l.l3, l.l4), (14, NONE));
    // Fewer than 8 bytes for the next header.
    let k = extract(&eth(0x86dd, &ipv6(0, &[17, 0, 0, 0])), 1);
    assert_eq!((k.nw_proto(), k.nw_ttl()), (0, 0));
    // A fragment header cut short.
    let k = extract(&eth(0x86dd, &ipv6(44, &[17, 0, 0, 0, 0])), 1);
    assert_eq!((k.nw_proto(), k.nw_frag()), (0, 0));
}

#[test]
fn ipv6_terminal_next_headers() {
    for nh in [50u8, 59, 135, 4, 41] {
        let (k, l) = extract_with_layers(&eth(0x86dd, &ipv6(nh, &[0; 16])), 1);
        assert_eq!((k.nw_proto(), k.nw_ttl(), l.l4), (nh, 33, NONE));
    }
}

#[test]
fn ipv6_invalid_headers_give_no_l3() {
    let good = ipv6(17, &udp(5, 6));
    let mut bad_version = good.clone();
    bad_version[0] = 0x4b;
    let mut long = good.clone();
    long[4..6].copy_from_slice(&21u16.to_be_bytes());
    for p in [good[..39].to_vec(), bad_version, long] {
        let (k, l) = extract_with_layers(&eth(0x86dd, &p), 1);
        l2_only(&k, 0x86dd);
        assert_eq!(l.l4, NONE);
    }
    // Payload length 0 with bytes after it: those are padding.
    let mut zero = good.clone();
    zero[4..6].copy_from_slice(&[0, 0]);
    let k = extract(&eth(0x86dd, &zero), 1);
    assert_eq!((k.nw_proto(), k.tp_src()), (17, 0));
}

fn icmp6(ty: u8, code: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![ty, code, 0, 0, 0, 0, 0, 0];
    m.extend_from_slice(body);
    m
}

fn nd_body(opts: &[&[u8]]) -> Vec<u8> {
    let mut b = V6B.to_vec();
    for o in opts {
        b.extend_from_slice(o);
    }
    b
}

const SLL: [u8; 8] = [1, 1, 0x02, 0, 0, 0, 0, 0x0a];
const TLL: [u8; 8] = [2, 1, 0x02, 0, 0, 0, 0, 0x0b];

fn nd_key(ty: u8, code: u8, body: &[u8]) -> FlowKey {
    extract(&eth(0x86dd, &ipv6(58, &icmp6(ty, code, body))), 1)
}

#[test]
fn icmpv6_neighbor_discovery() {
    let k = nd_key(135, 0, &nd_body(&[&SLL, &[14, 1, 0, 0, 0, 0, 0, 0]]));
    assert_eq!((k.tp_src(), k.tp_dst()), (135, 0));
    assert_eq!(k.nd_target(), u128::from_be_bytes(V6B));
    assert_eq!((k.arp_sha(), k.arp_tha()), (0x0200_0000_000a, 0));

    let k = nd_key(136, 0, &nd_body(&[&TLL]));
    assert_eq!(k.nd_target(), u128::from_be_bytes(V6B));
    assert_eq!((k.arp_sha(), k.arp_tha()), (0, 0x0200_0000_000b));

    // SLL in an NA and TLL in an NS are not stored.
    let k = nd_key(136, 0, &nd_body(&[&SLL]));
    assert_eq!((k.arp_sha(), k.nd_target()), (0, u128::from_be_bytes(V6B)));
    let k = nd_key(135, 0, &nd_body(&[&TLL, &SLL]));
    assert_eq!((k.arp_sha(), k.arp_tha()), (0x0200_0000_000a, 0));

    // A 16-byte SLL option is skipped, not stored.
    let k = nd_key(
        135,
        0,
        &nd_body(&[&[1, 2, 1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 0, 0, 0, 0]]),
    );
    assert_eq!((k.arp_sha(), k.nd_target()), (0, u128::from_be_bytes(V6B)));
}

#[test]
fn icmpv6_invalid_nd_options_clear_the_nd_part() {
    let zero_len: &[u8] = &[1, 0, 0, 0, 0, 0, 0, 0];
    let truncated: &[u8] = &[2, 2, 1, 2, 3, 4, 5, 6];
    for body in [
        nd_body(&[&SLL, zero_len]),
        nd_body(&[&SLL, truncated]),
        nd_body(&[&SLL, &SLL]),
    ] {
        let k = nd_key(135, 0, &body);
        assert_eq!((k.tp_src(), k.tp_dst()), (135, 0), "type and code stay");
        assert_eq!((k.nd_target(), k.arp_sha(), k.arp_tha()), (0, 0, 0));
    }
    let k = nd_key(136, 0, &nd_body(&[&TLL, &TLL]));
    assert_eq!((k.nd_target(), k.arp_tha()), (0, 0));
    // OVS detects a duplicate only after a non-zero first address.
    let zero_sll: &[u8] = &[1, 1, 0, 0, 0, 0, 0, 0];
    let k = nd_key(135, 0, &nd_body(&[zero_sll, &SLL]));
    assert_eq!(k.arp_sha(), 0x0200_0000_000a);
    // Fewer than 8 trailing bytes are ignored.
    let k = nd_key(135, 0, &nd_body(&[&SLL, &[1, 1, 0]]));
    assert_eq!(k.arp_sha(), 0x0200_0000_000a);
}

#[test]
fn icmpv6_short_and_non_nd() {
    // No room for the target: only type and code.
    let k = nd_key(135, 0, &V6B[..15]);
    assert_eq!((k.tp_src(), k.nd_target()), (135, 0));
    // Code != 0: not ND.
    let k = nd_key(135, 1, &nd_body(&[&SLL]));
    assert_eq!((k.tp_dst(), k.nd_target(), k.arp_sha()), (1, 0, 0));
    // Echo request.
    let (k, l) = extract_with_layers(&eth(0x86dd, &ipv6(58, &icmp6(128, 0, &[]))), 1);
    assert_eq!((k.tp_src(), k.tp_dst(), l.l4), (128, 0, 54));
    // Under 8 bytes: nothing.
    let (k, l) = extract_with_layers(&eth(0x86dd, &ipv6(58, &[128, 0, 0])), 1);
    assert_eq!((k.nw_proto(), k.tp_src(), l.l4), (58, 0, NONE));
}

fn arp_body(htype: u16, ptype: u16, hlen: u8, plen: u8, op: u16) -> Vec<u8> {
    let mut a = Vec::new();
    a.extend_from_slice(&htype.to_be_bytes());
    a.extend_from_slice(&ptype.to_be_bytes());
    a.extend_from_slice(&[hlen, plen]);
    a.extend_from_slice(&op.to_be_bytes());
    a.extend_from_slice(&SRC);
    a.extend_from_slice(&[10, 0, 0, 1]);
    a.extend_from_slice(&DST);
    a.extend_from_slice(&[10, 0, 0, 2]);
    a
}

#[test]
fn arp_and_rarp() {
    for ty in [0x0806u16, 0x8035] {
        let (k, l) = extract_with_layers(&eth(ty, &arp_body(1, 0x0800, 6, 4, 2)), 1);
        assert_eq!(k.dl_type(), ty);
        assert_eq!(k.nw_proto(), 2);
        assert_eq!((k.nw_src(), k.nw_dst()), (0x0a00_0001, 0x0a00_0002));
        assert_eq!((k.arp_sha(), k.arp_tha()), (mac(SRC), mac(DST)));
        assert_eq!((l.l3, l.l4), (14, NONE));
        assert_eq!((k.nw_tos(), k.nw_ttl(), k.nw_frag()), (0, 0, 0));
    }
    let k = extract(&eth(0x0806, &arp_body(1, 0x0800, 6, 4, 0x0100)), 1);
    assert_eq!((k.nw_proto(), k.nw_src()), (0, 0x0a00_0001));
    for bad in [
        arp_body(6, 0x0800, 6, 4, 1),
        arp_body(1, 0x86dd, 6, 4, 1),
        arp_body(1, 0x0800, 14, 4, 1),
        arp_body(1, 0x0800, 6, 16, 1),
        arp_body(1, 0x0800, 6, 4, 1)[..27].to_vec(),
    ] {
        l2_only(&extract(&eth(0x0806, &bad), 1), 0x0806);
    }
}

#[test]
fn vlan_then_ipv6_offsets() {
    let f = tagged(&[(0x8100, 10)], 0x86dd, &ipv6(17, &udp(1000, 2000)));
    let (k, l) = extract_with_layers(&f, 1);
    assert_eq!((k.tp_src(), k.tp_dst()), (1000, 2000));
    assert_eq!(
        l,
        Layers {
            l3: 18,
            l4: 58,
            vlan_count: 1
        }
    );
}

#[test]
fn extract_is_extract_with_layers() {
    let f = eth(0x0800, &ipv4(6, 0, &[], &tcp(1, 2, 5, 2, 20)));
    assert_eq!(extract(&f, 9), extract_with_layers(&f, 9).0);
}

/// Regression: fuzz target `extract`, crash-8b03bf17f9cac7fc (CI, after
/// MPLS extraction landed): an MPLS multicast frame whose key's word 15
/// holds its label stack entry, which the target still asserted to be
/// zero. The extraction is right; the invariant is now "word 15 only for
/// MPLS".
#[test]
fn fuzz_extract_crash_8b03bf17_mpls_multicast_label_in_word_15() {
    let data: [u8; 50] = [
        10, 121, 48, 0, 9, 122, 0, 0, 247, 255, 255, 41, 217, 42, 8, 0, 136, 72, 0, 0, 33, 0, 0, 0,
        0, 1, 58, 0, 0, 0, 0, 0, 10, 0, 37, 16, 0, 0, 0, 228, 255, 48, 0, 255, 0, 255, 255, 255,
        255, 255,
    ];
    let port = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
    let (k, l) = extract_with_layers(&data[4..], port);
    assert_eq!(k.dl_type(), 0x8848);
    // Label 2, tc 0, bottom of stack, TTL 0.
    assert_eq!((k.mpls_lse0(), k.mpls_lse1()), ((2 << 12) | (1 << 8), 0));
    assert_eq!(k.w[14], 0);
    assert_eq!((k.nw_src(), k.nw_proto(), k.tp_src()), (0, 0, 0));
    assert_eq!(l.l4, NONE);
}

/// Regression: fuzz target `extract`, crash-9735ce44 (CI, after the ND
/// extensions landed): an IPv4 frame carrying an ICMPv6 neighbour
/// solicitation (OVS reads ICMPv6 inside IPv4 too) whose reserved word is
/// kept where the third MPLS entry is, which the target still asserted to
/// be zero. The extraction is right; the invariant is now "the third
/// entry's bits only for MPLS or ND".
#[test]
fn fuzz_extract_crash_9735ce44_nd_reserved_inside_ipv4() {
    let data: [u8; 82] = [
        0, 0, 0, 0, 96, 165, 128, 40, 255, 255, 96, 103, 255, 255, 255, 0, 8, 0, 75, 52, 0, 61, 0,
        0, 0, 0, 0, 58, 0, 155, 155, 155, 155, 27, 155, 28, 155, 0, 0, 0, 0, 165, 128, 40, 255,
        255, 96, 103, 251, 255, 255, 1, 0, 0, 0, 0, 0, 0, 60, 17, 0, 0, 135, 0, 21, 0, 155, 155,
        155, 155, 155, 0, 0, 0, 0, 0, 0, 210, 135, 196, 120, 135,
    ];
    let port = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
    let (k, _) = extract_with_layers(&data[4..], port);
    assert_eq!((k.dl_type(), k.nw_proto()), (0x0800, 58));
    assert_eq!((k.tp_src(), k.tp_dst()), (135, 0));
    let icmp = &data[4 + 14 + 44..];
    assert_eq!(
        k.nd_reserved(),
        u32::from_be_bytes([icmp[4], icmp[5], icmp[6], icmp[7]])
    );
    assert_ne!(k.nd_reserved(), 0);
    assert_eq!(k.w[15], 0);
}
