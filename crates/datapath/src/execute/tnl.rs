//! `tnl_push` and `tnl_pop`: a tunnel's outer headers put on and taken off
//! in the datapath (native tunnelling), with `flowpath_wire::tunnel`'s
//! codec.
//!
//! A push copies the action's template into the packet's headroom and
//! fills in the per-packet fields (the UDP source port from the packet's
//! 5-tuple hash, as OVS, so the underlay's ECMP spreads flows). A pop
//! checks the outer headers, strips them and sends the inner frame back
//! for another pass (recirculation id 0) with the tunnel's port as its
//! in_port and the outer headers' metadata in its key's tunnel words.
//! Either failing changes nothing it should not and is counted.

use super::{Executor, PacketMeta};
use crate::packet::PacketBuf;
use flowpath_flow::extract::NONE;
use flowpath_flow::FlowKey;
use flowpath_odp::TnlPush;
use flowpath_wire::tunnel::{self, TunnelKind};

impl Executor {
    /// `tnl_push(...)`.
    pub(super) fn tnl_push(
        &mut self,
        pkt: &mut PacketBuf,
        meta: &mut PacketMeta,
        t: &TnlPush,
        key: &FlowKey,
    ) {
        // The UDP source port spreads the flows over the underlay's paths:
        // any hash of the 5-tuple serves (the RSS hash when the packet has
        // one; else a multiply over the key's address and port words).
        let rss = meta.rss.unwrap_or_else(|| flow_hash(key));
        let h = t.header();
        let Some(front) = pkt.insert_front(0, h.len()) else {
            self.stats.tnl_push_failed += 1;
            return;
        };
        front.copy_from_slice(h);
        let sport = tunnel::src_port_in(rss, t.port_min, t.port_max);
        if !tunnel::finish_push(pkt.data_mut(), h.len(), sport) {
            self.stats.tnl_push_failed += 1;
            return;
        }
        // The packet is now the outer one: the inner headers' offsets no
        // longer hold (a later `set` finds no header, counted).
        meta.l3 = NONE;
        meta.l4 = NONE;
        self.stats.tnl_pushed += 1;
    }

    /// `tnl_pop(port)`. With `take`, the packet's buffer itself goes to
    /// the recirculation pool (swapped, no copy): nothing may read it
    /// afterwards.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn tnl_pop(
        &mut self,
        pkt: &mut PacketBuf,
        meta: &mut PacketMeta,
        port: u32,
        kind: TunnelKind,
        tlv: &tunnel::TlvMap,
        tag: u64,
        take: bool,
    ) {
        let mut tm = tunnel::TunnelMeta::default();
        let inner = match tunnel::decap_into(pkt.data(), kind, tlv, &mut tm) {
            Ok(n) => n,
            Err(_) => {
                self.stats.tnl_pop_failed += 1;
                return;
            }
        };
        if !pkt.remove_front(0, inner) {
            self.stats.tnl_pop_failed += 1;
            return;
        }
        let frame = if take {
            super::recirc::Frame::Take(pkt)
        } else {
            super::recirc::Frame::Copy(pkt)
        };
        let Some(r) = self.recirculate_frame(frame, meta, 0, tag, None) else {
            return;
        };
        // A new packet: its own in_port, hash and datapath metadata, no
        // connection-tracking state (OVS resets the packet's metadata).
        // (Patched in place: building the metadata apart and copying it
        // stalled on store forwarding; the tunnel words are written
        // straight into the record, each once.)
        r.meta.in_port = port;
        r.meta.rss = None;
        r.meta.dp_hash = 0;
        r.meta.skb_priority = 0;
        r.meta.pkt_mark = 0;
        r.meta.ct = flowpath_conntrack::CtMeta::default();
        r.meta.csum_partial = false;
        r.tnl_set = true;
        flowpath_flow::key::tunnel_words(&tm, &mut r.tnl);
        self.stats.tnl_popped += 1;
    }
}

/// A cheap hash of a key's addresses, protocol and ports.
#[inline]
fn flow_hash(key: &FlowKey) -> u32 {
    use flowpath_flow::key::{W_IPV6_DST, W_IPV6_SRC, W_META, W_NW, W_TP};
    let mut x = (key.w[W_META] >> 32) ^ key.w[W_NW] ^ (key.w[W_TP] & 0xffff_ffff).rotate_left(29);
    if key.is_ipv6() {
        x ^= key.w[W_IPV6_SRC] ^ key.w[W_IPV6_SRC + 1].rotate_left(7);
        x ^= key.w[W_IPV6_DST].rotate_left(13) ^ key.w[W_IPV6_DST + 1].rotate_left(19);
    }
    let m = u128::from(x) * 0x9e37_79b9_7f4a_7c15;
    ((m >> 64) as u64 ^ m as u64) as u32
}
