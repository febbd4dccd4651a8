//! Traces that follow `ct(table=N)` recirculations, as OVS's
//! `ofproto/trace ... --ct-next STATE`: the packet's pass, then each
//! tracked pass it leads to, with the connection-tracking state given
//! (default `trk|new`) and the NAT simulated ([`super::Recirculation::next_key`]).

use super::{xlate_on, Lookup, XlateMode};
use flowpath_flow::FlowKey;

/// A key as `trace` (and OVS's `ofproto/trace`) takes it back: the packet
/// fields whose prerequisites it meets (an ICMPv6 echo has no `nd_target`,
/// a UDP packet no `tcp_flags`), the second VLAN tag and the MPLS entries
/// below the top only when the packet has them.
pub fn packet_text(k: &flowpath_flow::FlowKey) -> String {
    let mut m = flowpath_flow::FlowMask::catchall();
    for f in flowpath_flow::field::FIELDS {
        if !f.is_reg() && f.prereq.ok_for(k) {
            f.or_mask(&mut m, f.full_mask());
        }
    }
    let mut mk = m.to_key();
    // The connection-tracking fields only where they have a value.
    for f in [
        flowpath_flow::FieldId::CtState,
        flowpath_flow::FieldId::CtZone,
        flowpath_flow::FieldId::CtMark,
        flowpath_flow::FieldId::CtLabel,
        flowpath_flow::FieldId::CtNwProto,
        flowpath_flow::FieldId::CtNwSrc,
        flowpath_flow::FieldId::CtNwDst,
        flowpath_flow::FieldId::CtIpv6Src,
        flowpath_flow::FieldId::CtIpv6Dst,
        flowpath_flow::FieldId::CtTpSrc,
        flowpath_flow::FieldId::CtTpDst,
    ] {
        let info = f.info();
        if info.get(k) == 0 {
            info.set_masked(&mut mk, 0, info.full_mask());
        }
    }
    if k.ct_state() == 0 || k.ct_nw_proto() == 0 {
        // (ct_tp_* print with ct_nw_proto only.)
        for f in [
            flowpath_flow::FieldId::CtTpSrc,
            flowpath_flow::FieldId::CtTpDst,
        ] {
            f.info().set_masked(&mut mk, 0, f.info().full_mask());
        }
    }
    mk.set_in_port(u32::MAX);
    mk.set_dl_type(0xffff);
    mk.set_vlan_tci(0xffff);
    mk.set_vlan_tci_inner(if k.vlan_tci_inner() == 0 { 0 } else { 0xffff });
    if k.is_ip_any() {
        mk.set_nw_frag(0x3);
    }
    if !matches!(k.dl_type(), 0x8847 | 0x8848) || k.mpls_lse1() == 0 {
        mk.set_mpls_lse1(0);
    }
    if !matches!(k.dl_type(), 0x8847 | 0x8848) || k.mpls_lse2() == 0 {
        mk.set_mpls_lse2(0);
    }
    let m = flowpath_flow::FlowMask::from_key(&mk);
    let text = flowpath_flow::Match::new(k, &m).format(flowpath_flow::Style::Rule);
    // (As input, in OVS's syntax too, `icmp_type` is ICMPv4's and
    // `tp_src` TCP's.)
    let text = if k.is_ipv6() {
        text.replace("icmp_type=", "icmpv6_type=")
            .replace("icmp_code=", "icmpv6_code=")
    } else {
        text
    };
    match (k.is_ip_any(), k.nw_proto()) {
        (true, 17) => text
            .replace("tp_src=", "udp_src=")
            .replace("tp_dst=", "udp_dst="),
        (true, 132) => text
            .replace("tp_src=", "sctp_src=")
            .replace("tp_dst=", "sctp_dst="),
        _ => text,
    }
}

/// The `ct_state` a resumed pass gets: the next of `ct_next`, or OVS's
/// default `trk|new`; with the banner's note.
pub fn next_ct_state(ct_next: &mut impl Iterator<Item = u8>) -> (u8, String) {
    use flowpath_flow::key::ct_state;
    match ct_next.next() {
        Some(s) => {
            let f = flowpath_flow::FieldId::CtState.info();
            let t = flowpath_flow::value::format_value(f, u128::from(s), 0xff);
            (s, format!(" - resume conntrack with ct_state={t}"))
        }
        None => (
            ct_state::TRK | ct_state::NEW,
            " - resume conntrack with default ct_state=trk|new (use --ct-next to customize)"
                .to_string(),
        ),
    }
}

/// The banner OVS prints before a resumed pass.
pub fn resume_banner(id: u32, note: &str) -> String {
    let bar = "=".repeat(79);
    format!("\n{bar}\nrecirc({id:#x}){note}\n{bar}\n")
}

/// `ofproto/trace`'s text for `key` (written `text`) and every
/// `ct(table=N)` pass it leads to, each resumed with the next state of
/// `ct_next`.
pub fn trace_with_ct<L: Lookup>(
    tables: &L,
    bridge: Option<&crate::normal::Bridge>,
    key: &FlowKey,
    text: &str,
    ct_next: &[u8],
    now_ms: u64,
) -> String {
    let mode = XlateMode {
        trace: true,
        ..XlateMode::default()
    };
    let mut states = ct_next.iter().copied();
    let mut out = String::new();
    let mut queue: std::collections::VecDeque<(FlowKey, String, Option<String>)> =
        std::collections::VecDeque::from([(*key, text.to_string(), None)]);
    while let Some((k, t, banner)) = queue.pop_front() {
        let x = xlate_on(tables, bridge, &k, now_ms, mode);
        if let Some(b) = banner {
            out.push_str(&b);
            out.push('\n');
        }
        out.push_str(&x.report(&k, &t));
        out.push('\n');
        for rc in x.recirculations.iter().filter(|rc| rc.ct.is_some()) {
            let (state, note) = next_ct_state(&mut states);
            let next = rc.next_key(state);
            let text = format!("recirc_id={:#x},{}", rc.id, packet_text(&next));
            queue.push_back((next, text, Some(resume_banner(rc.id, &note))));
        }
    }
    out
}
