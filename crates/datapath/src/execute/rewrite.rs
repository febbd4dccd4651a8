//! Rewrites of a packet's bytes: `set` of Ethernet, IPv4, IPv6 and L4
//! fields with incremental checksum updates, VLAN and MPLS push and pop,
//! the datapath hash. See the parent module for the rules they keep.

use super::*;

/// `(old & !mask) | (key & mask)`.
#[inline(always)]
pub(super) fn masked<T>(old: T, key: T, mask: T) -> T
where
    T: Copy + BitAnd<Output = T> + BitOr<Output = T> + Not<Output = T>,
{
    (old & !mask) | (key & mask)
}

/// The `hash` action: the packet's datapath hash, as OVS's userspace
/// datapath computes it, into `meta.dp_hash` (the key's bits of it,
/// [`flowpath_flow::key::dp_hash_bits`]). `sym_l4`: OVS's
/// `flow_hash_symmetric_l3l4` of the packet as it is now (`key`, the key
/// of this pass, when `unchanged`: no action of the pass changed the
/// packet before; else parsed again). `l4`: `hash_int` of the received
/// packet's 5-tuple hash (its RSS hash: `key`'s when no earlier pass
/// changed the packet, else already in `meta`) with `basis`.
#[cold]
#[inline(never)]
pub(super) fn hash_action(
    pkt: &PacketBuf,
    meta: &mut PacketMeta,
    key: &FlowKey,
    unchanged: bool,
    symmetric: bool,
    basis: u32,
) {
    use flowpath_flow::ovs_hash::{hash_5tuple, hash_int, symmetric_l3l4};
    let h = if symmetric && unchanged {
        symmetric_l3l4(key, basis, false)
    } else if symmetric {
        symmetric_l3l4(
            &flowpath_flow::extract::extract(pkt.data(), 0),
            basis,
            false,
        )
    } else {
        let rss = *meta.rss.get_or_insert_with(|| hash_5tuple(key, 0));
        hash_int(rss, basis)
    };
    meta.dp_hash = flowpath_flow::key::dp_hash_bits(h);
}

/// True for the datapath actions that change the packet's bytes.
#[inline]
pub(super) fn changes_packet(a: &DpAction) -> bool {
    !matches!(
        a,
        DpAction::Output(_)
            | DpAction::Controller { .. }
            | DpAction::Trunc(_)
            | DpAction::SetPriority(_)
            | DpAction::SetMark { .. }
            | DpAction::Hash { .. }
            | DpAction::Recirc(_)
            | DpAction::CheckPktLen { .. }
            | DpAction::Clone { .. }
            | DpAction::CtClear
            | DpAction::Sample(_)
            | DpAction::TnlPop { .. }
    )
}

/// Whether `a` may leave the packet's headers other than extraction
/// made them: [`changes_packet`], except that a `ct` without NAT does not
/// (the tracker reads the packet; only NAT rewrites it; a fragment the
/// reassembler holds or gives back whole leaves the action list there).
#[inline]
pub(super) fn rewrites_headers(a: &DpAction) -> bool {
    match a {
        DpAction::Ct(ct) => ct.nat.is_some(),
        a => changes_packet(a),
    }
}

/// Applies one action other than an output or a controller action (which
/// are no-ops here: [`Executor::execute`] handles them).
#[inline]
pub fn apply(
    pkt: &mut PacketBuf,
    meta: &mut PacketMeta,
    action: &DpAction,
) -> Result<(), ExecError> {
    match action {
        DpAction::Set { header, key, mask } => match header {
            SetHeader::Eth => set_eth(pkt, key, mask),
            SetHeader::Ipv4 => set_ipv4(pkt, meta, key, mask),
            SetHeader::Ipv6 => set_ipv6(pkt, meta, key, mask),
            SetHeader::Tcp | SetHeader::Udp | SetHeader::Sctp => {
                set_l4(pkt, meta, *header, key, mask)
            }
            SetHeader::Arp => set_arp(pkt, meta, key, mask),
            SetHeader::Icmp | SetHeader::Icmpv6 => set_icmp(pkt, meta, *header, key, mask),
            SetHeader::Nd => set_nd(pkt, meta, key, mask),
            SetHeader::NdExt => set_nd_ext(pkt, meta, key, mask),
        },
        DpAction::PushVlan { tpid, tci } => push_vlan(pkt, meta, *tpid, *tci),
        DpAction::PopVlan => pop_vlan(pkt, meta),
        DpAction::PushMpls { ethertype, lse } => push_mpls(pkt, meta, *ethertype, *lse),
        DpAction::PopMpls(ethertype) => pop_mpls(pkt, meta, *ethertype),
        DpAction::SetMpls(lse) => set_mpls(pkt, *lse),
        // The priority and the mark are metadata no port acts on (no QoS
        // queues; the mark does not leave the switch).
        DpAction::SetPriority(p) => {
            meta.skb_priority = *p;
            Ok(())
        }
        DpAction::SetMark { value, mask } => {
            meta.pkt_mark = masked(meta.pkt_mark, *value, *mask);
            Ok(())
        }
        DpAction::Output(_)
        | DpAction::Hash { .. }
        | DpAction::Controller { .. }
        | DpAction::Trunc(_)
        | DpAction::Recirc(_)
        | DpAction::CheckPktLen { .. }
        | DpAction::Clone { .. }
        | DpAction::Ct(_)
        | DpAction::CtClear
        | DpAction::Sample(_)
        // (Run by the executor: they need the packet's hash, or end its
        // pass.)
        | DpAction::TnlPush(_)
        | DpAction::TnlPop { .. } => Ok(()),
    }
}

/// Rewrites the masked bits of the Ethernet source and destination.
pub fn set_eth(pkt: &mut PacketBuf, key: &FlowKey, mask: &FlowMask) -> Result<(), ExecError> {
    let mk = mask.to_key();
    let d = pkt.data_mut();
    let h = d.get_mut(..12).ok_or(ExecError::NoHeader)?;
    let mut eth = EthernetFrame::new_unchecked(h);
    if mk.dl_dst() != 0 {
        let new = masked(eth.dst_addr().to_u64(), key.dl_dst(), mk.dl_dst());
        eth.set_dst_addr(EthernetAddress::from_u64(new));
    }
    if mk.dl_src() != 0 {
        let new = masked(eth.src_addr().to_u64(), key.dl_src(), mk.dl_src());
        eth.set_src_addr(EthernetAddress::from_u64(new));
    }
    Ok(())
}

/// Rewrites the masked bits of the IPv4 source, destination, ToS and TTL,
/// patching the header checksum and, for address changes, the TCP or UDP
/// checksum.
pub fn set_ipv4(
    pkt: &mut PacketBuf,
    meta: &PacketMeta,
    key: &FlowKey,
    mask: &FlowMask,
) -> Result<(), ExecError> {
    if meta.l3 == NONE {
        return Err(ExecError::NoHeader);
    }
    let mk = mask.to_key();
    let l3 = usize::from(meta.l3);
    let d = pkt.data_mut();
    let (old, new, proto) = {
        let h = d.get_mut(l3..).ok_or(ExecError::NoHeader)?;
        let mut ip = Ipv4Packet::new_checked(h).map_err(|_| ExecError::NoHeader)?;
        let mut old = [0u8; 8];
        old[..4].copy_from_slice(&ip.src_bytes());
        old[4..].copy_from_slice(&ip.dst_bytes());
        if mk.nw_src() != 0 {
            let o = u32::from_be_bytes(ip.src_bytes());
            let n = masked(o, key.nw_src(), mk.nw_src());
            if n != o {
                ip.rewrite_src_addr(Ipv4Addr::from(n));
            }
        }
        if mk.nw_dst() != 0 {
            let o = u32::from_be_bytes(ip.dst_bytes());
            let n = masked(o, key.nw_dst(), mk.nw_dst());
            if n != o {
                ip.rewrite_dst_addr(Ipv4Addr::from(n));
            }
        }
        if mk.nw_tos() != 0 {
            let n = masked(ip.tos(), key.nw_tos(), mk.nw_tos());
            if n != ip.tos() {
                ip.rewrite_tos(n);
            }
        }
        if mk.nw_ttl() != 0 {
            let n = masked(ip.ttl(), key.nw_ttl(), mk.nw_ttl());
            if n != ip.ttl() {
                ip.rewrite_ttl(n);
            }
        }
        let mut new = [0u8; 8];
        new[..4].copy_from_slice(&ip.src_bytes());
        new[4..].copy_from_slice(&ip.dst_bytes());
        (old, new, ip.protocol())
    };
    if old != new && meta.l4 != NONE {
        pseudo_header_changed(
            d,
            usize::from(meta.l4),
            proto,
            &old,
            &new,
            meta.csum_partial,
        );
    }
    Ok(())
}

/// Patches the transport checksum at `l4` (protocol `proto`) for a
/// pseudo-header address change from `old` to `new`. `partial`: the field
/// holds the pseudo-header's sum itself, not a checksum (offload
/// completes it): it becomes the new pseudo-header's sum.
#[inline]
pub(super) fn pseudo_header_changed(
    d: &mut [u8],
    l4: usize,
    proto: u8,
    old: &[u8],
    new: &[u8],
    partial: bool,
) {
    let Some(t) = d.get_mut(l4..) else {
        return;
    };
    if partial {
        partial_sum_changed(t, proto, old, new);
        return;
    }
    match proto {
        ip_proto::TCP => TcpPacket::new_unchecked(t).update_checksum_for_addr(old, new),
        ip_proto::UDP => UdpPacket::new_unchecked(t).update_checksum_for_addr(old, new),
        ip_proto::ICMPV6 => Icmpv6Packet::new_unchecked(t).update_checksum_for_addr(old, new),
        _ => {}
    }
}

/// [`pseudo_header_changed`] for a TCP or UDP header `t` whose checksum
/// field holds the pseudo-header's sum (ones' complement, not inverted):
/// the sum less `old`, plus `new`.
#[cold]
pub(super) fn partial_sum_changed(t: &mut [u8], proto: u8, old: &[u8], new: &[u8]) {
    let at = match proto {
        ip_proto::TCP => 16,
        ip_proto::UDP => 6,
        _ => return,
    };
    if let Some(f) = t.get_mut(at..at + 2) {
        let sum = u16::from_be_bytes([f[0], f[1]]);
        f.copy_from_slice(&partial_sum_replace(sum, old, new).to_be_bytes());
    }
}

/// A pseudo-header sum (not inverted) after the bytes `old` in it became
/// `new`: the sum less `old`, plus `new` ([`csum_replace`] works on the
/// inverted form).
#[inline]
pub(super) fn partial_sum_replace(sum: u16, old: &[u8], new: &[u8]) -> u16 {
    !csum_replace(!sum, old, new)
}

/// Rewrites the masked bits of the IPv6 source, destination, flow label,
/// traffic class and hop limit, patching the TCP, UDP or ICMPv6 checksum
/// for address changes.
pub fn set_ipv6(
    pkt: &mut PacketBuf,
    meta: &PacketMeta,
    key: &FlowKey,
    mask: &FlowMask,
) -> Result<(), ExecError> {
    if meta.l3 == NONE {
        return Err(ExecError::NoHeader);
    }
    let mk = mask.to_key();
    let l3 = usize::from(meta.l3);
    let d = pkt.data_mut();
    let (old_src, new_src, old_dst, new_dst) = {
        let h = d.get_mut(l3..).ok_or(ExecError::NoHeader)?;
        let mut ip = Ipv6Packet::new_checked(h).map_err(|_| ExecError::NoHeader)?;
        let old_src = ip.src_bytes();
        let old_dst = ip.dst_bytes();
        let mut new_src = old_src;
        let mut new_dst = old_dst;
        if mk.ipv6_src() != 0 {
            let n = masked(u128::from_be_bytes(old_src), key.ipv6_src(), mk.ipv6_src());
            new_src = n.to_be_bytes();
            if new_src != old_src {
                ip.set_src_addr(Ipv6Addr::from(n));
            }
        }
        if mk.ipv6_dst() != 0 {
            let n = masked(u128::from_be_bytes(old_dst), key.ipv6_dst(), mk.ipv6_dst());
            new_dst = n.to_be_bytes();
            if new_dst != old_dst {
                ip.set_dst_addr(Ipv6Addr::from(n));
            }
        }
        if mk.ipv6_label() != 0 {
            let n = masked(ip.flow_label(), key.ipv6_label(), mk.ipv6_label());
            ip.set_flow_label(n);
        }
        if mk.nw_tos() != 0 {
            let n = masked(ip.traffic_class(), key.nw_tos(), mk.nw_tos());
            ip.set_traffic_class(n);
        }
        if mk.nw_ttl() != 0 {
            let n = masked(ip.hop_limit(), key.nw_ttl(), mk.nw_ttl());
            ip.set_hop_limit(n);
        }
        (old_src, new_src, old_dst, new_dst)
    };
    if meta.l4 != NONE {
        let l4 = usize::from(meta.l4);
        if new_src != old_src {
            pseudo_header_changed(d, l4, meta.nw_proto, &old_src, &new_src, meta.csum_partial);
        }
        if new_dst != old_dst && !routing_segments_left(d, l3, l4) {
            pseudo_header_changed(d, l4, meta.nw_proto, &old_dst, &new_dst, meta.csum_partial);
        }
    }
    Ok(())
}

/// True when the IPv6 packet at `l3` has a routing header with segments
/// left among the extension headers before `l4`.
pub(super) fn routing_segments_left(d: &[u8], l3: usize, l4: usize) -> bool {
    let (Some(ip), Some(mut rest)) = (d.get(l3..), d.get(l3 + 40..l4)) else {
        return false;
    };
    let mut next = Ipv6Packet::new_unchecked(ip).next_header();
    while is_ext_header(next) && !rest.is_empty() {
        let len = if next == ip_proto::FRAGMENT {
            let f = Ipv6FragHeader::new_unchecked(rest);
            next = f.next_header();
            Ipv6FragHeader::<&[u8]>::HEADER_LEN
        } else {
            let Ok(h) = Ipv6ExtHeader::new_checked(rest, next) else {
                return false;
            };
            // Routing header: type, then segments left.
            if next == ip_proto::ROUTING && h.data().get(1).is_some_and(|s| *s != 0) {
                return true;
            }
            next = h.next_header();
            h.header_len()
        };
        rest = rest.get(len..).unwrap_or(&[]);
    }
    false
}

/// The end of the IP packet at `l3` (its length field; padding excluded),
/// at most the frame's length.
pub(super) fn ip_end(d: &[u8], l3: usize) -> usize {
    let h = d.get(l3..).unwrap_or(&[]);
    let end = match h.first().map(|b| b >> 4) {
        Some(4) => l3 + usize::from(Ipv4Packet::new_unchecked(h).total_len()),
        Some(6) => l3 + 40 + usize::from(Ipv6Packet::new_unchecked(h).payload_len()),
        _ => d.len(),
    };
    end.min(d.len())
}

/// Rewrites the masked bits of the TCP, UDP or SCTP ports (`header` names
/// which; the packet's protocol must be that one).
pub fn set_l4(
    pkt: &mut PacketBuf,
    meta: &PacketMeta,
    header: SetHeader,
    key: &FlowKey,
    mask: &FlowMask,
) -> Result<(), ExecError> {
    let proto = match header {
        SetHeader::Tcp => ip_proto::TCP,
        SetHeader::Udp => ip_proto::UDP,
        SetHeader::Sctp => ip_proto::SCTP,
        _ => return Err(ExecError::NoHeader),
    };
    if meta.l4 == NONE || meta.nw_proto != proto {
        return Err(ExecError::NoHeader);
    }
    let mk = mask.to_key();
    let (ms, md) = (mk.tp_src(), mk.tp_dst());
    let l4 = usize::from(meta.l4);
    let d = pkt.data_mut();
    match header {
        SetHeader::Tcp => {
            let t = d.get_mut(l4..).ok_or(ExecError::NoHeader)?;
            let mut tcp = TcpPacket::new_checked(t).map_err(|_| ExecError::NoHeader)?;
            let (s, ds) = (tcp.src_port(), tcp.dst_port());
            let (ns, nd) = (masked(s, key.tp_src(), ms), masked(ds, key.tp_dst(), md));
            // (A partial checksum covers no ports yet: it stays.)
            let field = tcp.checksum();
            if ns != s {
                tcp.rewrite_src_port(ns);
            }
            if nd != ds {
                tcp.rewrite_dst_port(nd);
            }
            if meta.csum_partial {
                tcp.set_checksum(field);
            }
        }
        SetHeader::Udp => {
            let t = d.get_mut(l4..).ok_or(ExecError::NoHeader)?;
            if t.len() < UdpPacket::<&[u8]>::HEADER_LEN {
                return Err(ExecError::NoHeader);
            }
            let mut udp = UdpPacket::new_unchecked(t);
            let (s, ds) = (udp.src_port(), udp.dst_port());
            let (ns, nd) = (masked(s, key.tp_src(), ms), masked(ds, key.tp_dst(), md));
            let field = udp.checksum();
            if ns != s {
                udp.rewrite_src_port(ns);
            }
            if nd != ds {
                udp.rewrite_dst_port(nd);
            }
            if meta.csum_partial {
                udp.set_checksum(field);
            }
        }
        _ => {
            let end = ip_end(d, usize::from(meta.l3)).max(l4);
            let t = d.get_mut(l4..end).ok_or(ExecError::NoHeader)?;
            let mut sctp = SctpPacket::new_checked(t).map_err(|_| ExecError::NoHeader)?;
            let (s, ds) = (sctp.src_port(), sctp.dst_port());
            let (ns, nd) = (masked(s, key.tp_src(), ms), masked(ds, key.tp_dst(), md));
            if (ns, nd) == (s, ds) {
                return Ok(());
            }
            let stored = sctp.checksum();
            let before = sctp.compute_checksum();
            sctp.set_src_port(ns);
            sctp.set_dst_port(nd);
            let after = sctp.compute_checksum();
            let c = (stored ^ before ^ after).to_le_bytes();
            if let Some(f) = d.get_mut(l4 + 8..l4 + 12) {
                f.copy_from_slice(&c);
            }
        }
    }
    Ok(())
}

/// The Internet checksum `csum` (as stored) after the bytes `old` became
/// `new` at an even offset of the checksummed data (RFC 1624, eqn. 3).
pub(super) fn csum_replace(csum: u16, old: &[u8], new: &[u8]) -> u16 {
    let mut sum = u32::from(!csum);
    for (o, n) in old.chunks(2).zip(new.chunks(2)) {
        let w = |c: &[u8]| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
        sum += u32::from(!(w(o) as u16)) + w(n);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Rewrites the masked bits of an Ethernet/IPv4 ARP packet's sender and
/// target addresses and opcode (no checksum).
pub fn set_arp(
    pkt: &mut PacketBuf,
    meta: &PacketMeta,
    key: &FlowKey,
    mask: &FlowMask,
) -> Result<(), ExecError> {
    if meta.l3 == NONE {
        return Err(ExecError::NoHeader);
    }
    let l3 = usize::from(meta.l3);
    let h = pkt
        .data_mut()
        .get_mut(l3..l3 + 28)
        .ok_or(ExecError::NoHeader)?;
    if h[..6] != [0, 1, 8, 0, 6, 4] {
        return Err(ExecError::NoHeader);
    }
    let mk = mask.to_key();
    // The key's opcode is its low byte (OVS's, as it keeps it).
    h[7] = masked(h[7], key.nw_proto(), mk.nw_proto());
    let mac = |b: &mut [u8], v: u64, m: u64| {
        let mut o = [0u8; 8];
        o[2..].copy_from_slice(b);
        let n = masked(u64::from_be_bytes(o), v, m).to_be_bytes();
        b.copy_from_slice(&n[2..]);
    };
    let ip = |b: &mut [u8], v: u32, m: u32| {
        let o = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        b.copy_from_slice(&masked(o, v, m).to_be_bytes());
    };
    mac(&mut h[8..14], key.arp_sha(), mk.arp_sha());
    ip(&mut h[14..18], key.nw_src(), mk.nw_src());
    mac(&mut h[18..24], key.arp_tha(), mk.arp_tha());
    ip(&mut h[24..28], key.nw_dst(), mk.nw_dst());
    Ok(())
}

/// Rewrites the masked bits of an ICMPv4 or ICMPv6 type and code, patching
/// the checksum.
pub fn set_icmp(
    pkt: &mut PacketBuf,
    meta: &PacketMeta,
    header: SetHeader,
    key: &FlowKey,
    mask: &FlowMask,
) -> Result<(), ExecError> {
    let proto = if header == SetHeader::Icmp {
        ip_proto::ICMP
    } else {
        ip_proto::ICMPV6
    };
    if meta.l4 == NONE || meta.nw_proto != proto {
        return Err(ExecError::NoHeader);
    }
    let mk = mask.to_key();
    let l4 = usize::from(meta.l4);
    let t = pkt
        .data_mut()
        .get_mut(l4..l4 + 4)
        .ok_or(ExecError::NoHeader)?;
    let old = [t[0], t[1]];
    let new = [
        masked(t[0], key.tp_src() as u8, mk.tp_src() as u8),
        masked(t[1], key.tp_dst() as u8, mk.tp_dst() as u8),
    ];
    if new != old {
        t[..2].copy_from_slice(&new);
        let c = csum_replace(u16::from_be_bytes([t[2], t[3]]), &old, &new);
        t[2..4].copy_from_slice(&c.to_be_bytes());
    }
    Ok(())
}

/// The neighbour solicitation or advertisement of an ICMPv6 packet (its
/// whole message, from the ICMPv6 header to the end of the IP payload).
fn nd_message<'p>(pkt: &'p mut PacketBuf, meta: &PacketMeta) -> Result<&'p mut [u8], ExecError> {
    if meta.l4 == NONE || meta.nw_proto != ip_proto::ICMPV6 {
        return Err(ExecError::NoHeader);
    }
    let l4 = usize::from(meta.l4);
    let d = pkt.data_mut();
    let end = ip_end(d, usize::from(meta.l3)).max(l4);
    let t = d.get_mut(l4..end).ok_or(ExecError::NoHeader)?;
    if t.len() < 24 || !matches!(t[0], 135 | 136) {
        return Err(ExecError::NoHeader);
    }
    Ok(t)
}

/// Rewrites the masked bits of a neighbour solicitation's or
/// advertisement's target and of its source/target link-layer address
/// options (where the packet has them), patching the ICMPv6 checksum.
pub fn set_nd(
    pkt: &mut PacketBuf,
    meta: &PacketMeta,
    key: &FlowKey,
    mask: &FlowMask,
) -> Result<(), ExecError> {
    let mk = mask.to_key();
    let t = nd_message(pkt, meta)?;
    let mut csum = u16::from_be_bytes([t[2], t[3]]);
    let mut patch = |t: &mut [u8], at: usize, new: &[u8]| {
        let old = t[at..at + new.len()].to_vec();
        if old != new {
            csum = csum_replace(csum, &old, new);
            t[at..at + new.len()].copy_from_slice(new);
        }
    };
    let target = u128::from_be_bytes(t[8..24].try_into().map_err(|_| ExecError::NoHeader)?);
    let n = masked(target, key.nd_target(), mk.nd_target()).to_be_bytes();
    patch(t, 8, &n);
    // Options: type, length in units of 8 bytes, data.
    let mut o = 24;
    while o + 8 <= t.len() {
        let (kind, len) = (t[o], usize::from(t[o + 1]) * 8);
        if len == 0 || o + len > t.len() {
            break;
        }
        let (v, m) = match kind {
            1 => (key.arp_sha(), mk.arp_sha()),
            2 => (key.arp_tha(), mk.arp_tha()),
            _ => (0, 0),
        };
        if m != 0 {
            let mut b = [0u8; 8];
            b[2..].copy_from_slice(&t[o + 2..o + 8]);
            let n = masked(u64::from_be_bytes(b), v, m).to_be_bytes();
            patch(t, o + 2, &n[2..]);
        }
        o += len;
    }
    t[2..4].copy_from_slice(&csum.to_be_bytes());
    Ok(())
}

/// Rewrites the masked bits of a neighbour solicitation's or
/// advertisement's reserved word (an NA's R/S/O flags) and of its first
/// option's type (when it has an option), patching the ICMPv6 checksum.
pub fn set_nd_ext(
    pkt: &mut PacketBuf,
    meta: &PacketMeta,
    key: &FlowKey,
    mask: &FlowMask,
) -> Result<(), ExecError> {
    let mk = mask.to_key();
    let t = nd_message(pkt, meta)?;
    let mut csum = u16::from_be_bytes([t[2], t[3]]);
    let old = [t[4], t[5], t[6], t[7]];
    let reserved = masked(u32::from_be_bytes(old), key.nd_reserved(), mk.nd_reserved());
    let new = reserved.to_be_bytes();
    if new != old {
        csum = csum_replace(csum, &old, &new);
        t[4..8].copy_from_slice(&new);
    }
    let m = mk.nd_options_type();
    if m != 0 && t.len() >= 26 {
        // The option's type and length bytes, one 16-bit word.
        let old = [t[24], t[25]];
        let new = [masked(t[24], key.nd_options_type(), m), t[25]];
        if new != old {
            csum = csum_replace(csum, &old, &new);
            t[24] = new[0];
        }
    }
    t[2..4].copy_from_slice(&csum.to_be_bytes());
    Ok(())
}

/// Pushes a VLAN tag (`tpid`, `tci`) in front of the frame's EtherType,
/// using 4 bytes of headroom.
pub fn push_vlan(
    pkt: &mut PacketBuf,
    meta: &mut PacketMeta,
    tpid: u16,
    tci: u16,
) -> Result<(), ExecError> {
    if pkt.len() < 12 {
        return Err(ExecError::NoHeadroom);
    }
    let tag = pkt.insert_front(12, 4).ok_or(ExecError::NoHeadroom)?;
    tag[..2].copy_from_slice(&tpid.to_be_bytes());
    tag[2..].copy_from_slice(&tci.to_be_bytes());
    meta.shift(4);
    Ok(())
}

/// Removes the outermost VLAN tag (TPID 0x8100 or 0x88a8); a frame
/// without one is left unchanged.
pub fn pop_vlan(pkt: &mut PacketBuf, meta: &mut PacketMeta) -> Result<(), ExecError> {
    let d = pkt.data();
    let tagged = d.len() >= 18 && is_vlan_tpid(u16::from_be_bytes([d[12], d[13]]));
    if !tagged || !pkt.remove_front(12, 4) {
        return Err(ExecError::NoVlan);
    }
    meta.shift(-4);
    Ok(())
}

/// Offset of the frame's EtherType field: past the addresses and any VLAN
/// tags (`None` for a frame too short to have one).
pub(super) fn ethertype_at(d: &[u8]) -> Option<usize> {
    let mut o = 12;
    while d.len() >= o + 4 && is_vlan_tpid(u16::from_be_bytes([d[o], d[o + 1]])) {
        o += 4;
    }
    (d.len() >= o + 2).then_some(o)
}

/// Offset of the EtherType of an MPLS frame with a whole top label stack
/// entry behind it (`None` otherwise).
pub(super) fn mpls_ethertype_at(d: &[u8]) -> Option<usize> {
    let at = ethertype_at(d)?;
    let mpls = matches!(u16::from_be_bytes([d[at], d[at + 1]]), 0x8847 | 0x8848);
    (mpls && d.len() >= at + 6).then_some(at)
}

/// Pushes the MPLS label stack entry `lse` behind the EtherType (on top of
/// the stack of an MPLS frame) and sets the EtherType to `ethertype`; the
/// L2 header moves 4 bytes into the headroom. The L3/L4 offsets shift with
/// the headers behind the new entry.
pub fn push_mpls(
    pkt: &mut PacketBuf,
    meta: &mut PacketMeta,
    ethertype: u16,
    lse: u32,
) -> Result<(), ExecError> {
    let at = ethertype_at(pkt.data()).ok_or(ExecError::NoMpls)?;
    let entry = pkt.insert_front(at + 2, 4).ok_or(ExecError::NoHeadroom)?;
    entry.copy_from_slice(&lse.to_be_bytes());
    pkt.data_mut()[at..at + 2].copy_from_slice(&ethertype.to_be_bytes());
    meta.shift(4);
    Ok(())
}

/// Removes the top MPLS label stack entry of an MPLS frame and sets the
/// EtherType to `ethertype`; the L2 header moves 4 bytes forward. A frame
/// that is not MPLS is left unchanged (as OVS leaves it).
pub fn pop_mpls(
    pkt: &mut PacketBuf,
    meta: &mut PacketMeta,
    ethertype: u16,
) -> Result<(), ExecError> {
    let at = mpls_ethertype_at(pkt.data()).ok_or(ExecError::NoMpls)?;
    pkt.data_mut()[at..at + 2].copy_from_slice(&ethertype.to_be_bytes());
    if !pkt.remove_front(at + 2, 4) {
        return Err(ExecError::NoMpls);
    }
    // An L3 header behind entries this list pushed moves with them; the
    // L3 offset of a received MPLS frame is its stack, which stays where
    // the removed entry was (its L3 header was never parsed).
    if meta.l3 != NONE && usize::from(meta.l3) >= at + 6 {
        meta.shift(-4);
    }
    Ok(())
}

/// Rewrites the top MPLS label stack entry of an MPLS frame.
pub fn set_mpls(pkt: &mut PacketBuf, lse: u32) -> Result<(), ExecError> {
    let d = pkt.data_mut();
    let at = mpls_ethertype_at(d).ok_or(ExecError::NoMpls)?;
    d[at + 2..at + 6].copy_from_slice(&lse.to_be_bytes());
    Ok(())
}
