//! Fuzz target `extract`: `flowpath_flow::extract::extract_with_layers` on
//! arbitrary bytes must not panic, and its result must satisfy the
//! extractor's documented invariants.
//!
//! The first four input bytes choose the input port (its low 16 bits: ports
//! are 16 bits); the rest is the frame.
//! Run with `cargo +nightly fuzz run extract` (from the workspace root).

#![no_main]

use flowpath_flow::extract::{extract, extract_with_layers, Layers, NONE};
use flowpath_flow::key::{FRAG_LATER, VLAN_CFI};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (port, frame) = match data {
        [a, b, c, d, rest @ ..] => (u32::from_le_bytes([*a, *b, *c, *d]) & 0xffff, rest),
        _ => (0, data),
    };
    let (k, l) = extract_with_layers(frame, port);

    // Pure and consistent with the key-only entry point.
    assert_eq!(k, extract(frame, port));
    assert_eq!(k.in_port(), port);
    // No recirculation metadata on a received frame.
    assert_eq!((k.recirc_id(), k.dp_hash()), (0, 0));
    // Unused key words stay zero: word 14 always (datapath metadata),
    // word 15 and the high half of word 7 (MPLS label stack entries)
    // unless the frame is MPLS — the high half of word 7 also holds an
    // ICMPv6 neighbour solicitation's or advertisement's reserved word.
    assert_eq!(k.w[14], 0);
    if !matches!(k.dl_type(), 0x8847 | 0x8848) {
        assert_eq!(k.w[15], 0);
        let nd = k.is_ip_any()
            && k.nw_proto() == 58
            && matches!(k.tp_src(), 135 | 136)
            && k.tp_dst() == 0;
        if !nd {
            assert_eq!(k.mpls_lse2(), 0);
        }
    }

    // Layer offsets lie inside the frame and in order.
    if frame.len() < 14 {
        assert_eq!(l, Layers::EMPTY);
        assert_eq!(k.dl_type(), 0);
    } else {
        assert!(l.l3 != NONE && usize::from(l.l3) >= 14 && usize::from(l.l3) <= frame.len());
    }
    if l.l4 != NONE {
        assert!(l.l3 != NONE && l.l4 > l.l3, "{l:?}");
        assert!(usize::from(l.l4) <= frame.len());
        assert!(k.is_ip_any(), "transport fields only under IP");
        assert_eq!(k.nw_frag() & FRAG_LATER, 0, "no L4 in later fragments");
    }
    assert!(l.vlan_count <= 2);

    // Tag presence is marked by the CFI bit, and an inner tag needs an outer.
    assert_eq!(k.vlan_tci() != 0, l.vlan_count >= 1);
    assert_eq!(k.vlan_tci_inner() != 0, l.vlan_count == 2);
    if k.vlan_tci() != 0 {
        assert_ne!(k.vlan_tci() & VLAN_CFI, 0);
    }

    // Later fragments carry no transport fields.
    if k.nw_frag() & FRAG_LATER != 0 {
        assert_eq!((k.tp_src(), k.tp_dst(), k.tcp_flags()), (0, 0, 0));
    }
    // IPv4 and IPv6 address storage never mix.
    if k.is_ipv6() {
        assert_eq!((k.nw_src(), k.nw_dst()), (0, 0));
    }
    if k.is_ipv4() {
        assert_eq!((k.ipv6_src(), k.ipv6_dst(), k.ipv6_label()), (0, 0, 0));
    }
});
