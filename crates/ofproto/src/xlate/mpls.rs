//! MPLS: the label stack in the flow (up to three LSEs), push and pop,
//! label/TC/TTL writes, and the datapath actions that commit them.

use super::*;

/// The bottom-of-stack bit of an MPLS label stack entry.
pub(super) const MPLS_BOS: u32 = 1 << 8;

/// Label stack entries a flow keeps (OVS's `FLOW_MAX_MPLS_LABELS`).
pub(super) const MPLS_MAX_LABELS: usize = 3;

pub(super) fn is_mpls(dl_type: u16) -> bool {
    matches!(dl_type, 0x8847 | 0x8848)
}

/// OVS's `flow_count_mpls_labels` on `k`: the labels in its stack (up to
/// three: the entries to the first bottom of stack, or the non-zero ones
/// when none of the three is the bottom), and whether a bottom was found.
pub(super) fn mpls_label_count(k: &FlowKey) -> (usize, bool) {
    if !is_mpls(k.dl_type()) {
        return (0, true);
    }
    let mut cnt = 0;
    for i in 0..MPLS_MAX_LABELS {
        let lse = k.mpls_lse(i);
        if lse & MPLS_BOS != 0 {
            return (i + 1, true);
        }
        if lse != 0 {
            cnt += 1;
        }
    }
    (cnt, false)
}

/// Moves the top `n` label stack entries of `k` one place down (entry
/// `n` is overwritten), making room for a new top entry.
pub(super) fn lse_shift_down(k: &mut FlowKey, n: usize) {
    for i in (1..=n).rev() {
        let v = k.mpls_lse(i - 1);
        k.set_mpls_lse(i, v);
    }
}

/// Removes the top of the `n` label stack entries of `k` (the others move
/// up; entry `n - 1` becomes 0).
pub(super) fn lse_shift_up(k: &mut FlowKey, n: usize) {
    for i in 1..n {
        let v = k.mpls_lse(i);
        k.set_mpls_lse(i - 1, v);
    }
    k.set_mpls_lse(n - 1, 0);
}

/// Clears every L3 and L4 field of `k` (OVS's `flow_push_mpls` on the
/// flow: an MPLS payload is opaque).
pub(super) fn clear_l3(k: &mut FlowKey) {
    use flowpath_flow::key::{W_ARP_SHA, W_ARP_THA, W_IPV6_SRC, W_ND_TARGET, W_NW, W_TP};
    k.set_nw_proto(0);
    k.set_nw_frag(0);
    k.set_ipv6_label(0);
    for w in [W_NW, W_TP, W_ARP_SHA, W_ARP_THA] {
        k.w[w] = 0;
    }
    for w in W_IPV6_SRC..W_ND_TARGET + 2 {
        k.w[w] = 0;
    }
}

impl<L: Lookup> Ctx<'_, '_, L> {
    /// OVS's `flow_count_mpls_labels`: the labels in the flow's stack (up
    /// to three), making the bottom-of-stack bits it reads significant
    /// (and, without a bottom among them, the three entries).
    pub(super) fn count_mpls_labels(&mut self) -> usize {
        let (n, bottom) = mpls_label_count(&self.flow);
        if bottom {
            // The bottom-of-stack bits read up to the bottom.
            for i in 0..n {
                self.or_lse_mask(i, MPLS_BOS);
            }
        } else {
            // No bottom in the first three: the count also depends on
            // which entries are zero, which only whole entries pin (OVS's
            // megaflow keeps only the bottom-of-stack bits here, so that a
            // packet with a zero entry under it would count differently):
            // all three become significant.
            for i in 0..MPLS_MAX_LABELS {
                self.or_lse_mask(i, u32::MAX);
            }
        }
        n
    }

    /// Makes bits of label stack entry `i` significant.
    pub(super) fn or_lse_mask(&mut self, i: usize, bits: u32) {
        let mut m = self.wc.to_key();
        let v = m.mpls_lse(i) | bits;
        m.set_mpls_lse(i, v);
        self.wc = FlowMask::from_key(&m);
    }

    /// `set_mpls_label`/`tc`/`ttl`: the bits of the top entry, when the
    /// packet is MPLS (significant; nothing otherwise).
    pub(super) fn set_mpls_bits(&mut self, mask: u32, value: u32) {
        if is_mpls(self.flow.dl_type()) {
            self.or_lse_mask(0, mask);
            let lse = self.flow.mpls_lse0();
            self.flow.set_mpls_lse0((lse & !mask) | (value & mask));
        }
    }

    /// OVS's `flow_push_mpls` on the flow (`n` labels now, fewer than
    /// three): the first label is made from the IP header (label 0, or 2
    /// for IPv6; TC the low bits of the DSCP; TTL the IP TTL, 64 if none;
    /// bottom of stack), and the L3 and L4 fields are cleared (the payload
    /// is opaque now); a later one copies the top entry (not bottom of
    /// stack), making the entries there significant.
    pub(super) fn push_mpls(&mut self, n: usize, ethertype: u16) {
        if n > 0 {
            for i in 0..n {
                self.or_lse_mask(i, u32::MAX);
            }
            let f = &mut self.flow;
            lse_shift_down(f, n);
            f.set_mpls_lse0(f.mpls_lse1() & !MPLS_BOS);
        } else {
            let f = self.flow;
            let label: u32 = if f.is_ipv6() { 2 } else { 0 };
            let (mut tc, mut ttl) = (0u32, 64u32);
            if f.is_ip_any() {
                tc = u32::from((f.nw_tos() & 0xfc) >> 2) & 7;
                if f.nw_ttl() != 0 {
                    ttl = u32::from(f.nw_ttl());
                }
                let mut m = self.wc.to_key();
                m.set_nw_tos(m.nw_tos() | 0xfc);
                m.set_nw_ttl(0xff);
                self.wc = FlowMask::from_key(&m);
            }
            let f = &mut self.flow;
            f.set_mpls_lse0((label << 12) | (tc << 9) | MPLS_BOS | ttl);
            clear_l3(f);
        }
        self.flow.set_dl_type(ethertype);
    }

    /// OVS's `flow_pop_mpls` on the flow (`n` labels now): false when
    /// there is nothing to pop, or three labels of which the third is not
    /// the bottom (what would fill its place is unknown).
    pub(super) fn pop_mpls(&mut self, n: usize, ethertype: u16) -> bool {
        if n == 0 {
            return false;
        }
        if n == MPLS_MAX_LABELS {
            self.or_lse_mask(n - 1, MPLS_BOS);
            if self.flow.mpls_lse(n - 1) & MPLS_BOS == 0 {
                return false;
            }
        }
        for i in 1..n {
            self.or_lse_mask(i, u32::MAX);
        }
        lse_shift_up(&mut self.flow, n);
        self.flow.set_dl_type(ethertype);
        true
    }

    /// OVS's MPLS commit: the datapath packet's label stack (`base`) is
    /// made the flow's by popping the entries not shared with it (the
    /// stacks compared from the bottom up), or rewriting the top one with
    /// `set(mpls(...))` when the flow has an entry in its place, then
    /// pushing the flow's extra entries.
    pub(super) fn commit_mpls(&mut self) {
        let flow = self.flow;
        let flow_n = mpls_label_count(&flow).0;
        let mut base_n = mpls_label_count(&self.base).0;
        let mut common = 0;
        for i in 0..flow_n.min(base_n) {
            if flow.mpls_lse(flow_n - 1 - i) != self.base.mpls_lse(base_n - 1 - i) {
                break;
            }
            common += 1;
        }
        while base_n > common {
            if base_n - 1 == common && flow_n > common {
                let lse = flow.mpls_lse(flow_n - base_n);
                self.odp.push(DpAction::SetMpls(lse));
                // The set writes the whole entry, bits the actions left as
                // the packet had them too: unlike OVS 3.1 (whose megaflow
                // keeps only the changed bits, so that a packet with
                // another TTL under it would get this one's), every entry
                // of the packet's stack becomes significant.
                for i in 0..mpls_label_count(&self.orig).0 {
                    self.or_lse_mask(i, u32::MAX);
                }
                self.base.set_mpls_lse0(lse);
                common += 1;
            } else {
                // The last pop gives the flow's EtherType; an earlier one
                // (the packet stays MPLS) an MPLS one.
                let t = if !is_mpls(flow.dl_type()) && base_n > 1 {
                    0x8847
                } else {
                    flow.dl_type()
                };
                self.odp.push(DpAction::PopMpls(t));
                lse_shift_up(&mut self.base, base_n);
                self.base.set_dl_type(flow.dl_type());
                base_n -= 1;
            }
        }
        while base_n < flow_n {
            let lse = flow.mpls_lse(flow_n - base_n - 1);
            self.odp.push(DpAction::PushMpls {
                ethertype: flow.dl_type(),
                lse,
            });
            // The datapath packet keeps its L3 fields (a later restore of
            // the flow, after a group bucket, compares against them).
            let b = &mut self.base;
            lse_shift_down(b, base_n);
            b.set_mpls_lse0(lse);
            b.set_dl_type(flow.dl_type());
            base_n += 1;
        }
    }
}
