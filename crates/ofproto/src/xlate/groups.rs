//! Groups, bundles and multipath: choosing among ports or buckets (OVS's
//! select-group hashing, bucket liveness, `bundle`'s and `multipath`'s
//! link choice), and the fields such a choice makes significant.

use super::*;

/// `multipath`'s link for hash `h`, as OVS's `multipath_algorithm`:
/// `modulo_n` the remainder, `hash_threshold` equal slices of the hash
/// space, `hrw` (up to 64 links) the link whose `hash_2words(h, link)` is
/// highest (the lowest on ties), `iter_hash` (and `hrw` past 64 links)
/// `hash_2words(h, i) % m` for i = 0, 1, ... until it names a link, `m`
/// being `arg` if it lies in `n_links..=2 n_links + 1`, else the power of
/// two at or above `n_links`.
pub(super) fn multipath_link(h: u32, alg: u8, n_links: u32, arg: u32) -> u32 {
    use flowpath_flow::ovs_hash::hash_2words;
    let n = n_links.max(1);
    let iter_hash = |modulo: u32| {
        let m = if modulo < n || modulo / 2 > n {
            n.next_power_of_two()
        } else {
            modulo
        };
        // (Each try fails with probability under 1/2: 64 tries never
        // all fail in practice; the remainder is a bound, not a choice.)
        (0..64u32)
            .map(|i| hash_2words(h, i) % m)
            .find(|&l| l < n)
            .unwrap_or(h % n)
    };
    match alg {
        0 => h % n,
        1 if n == 1 => 0,
        1 => h / (u32::MAX / n + 1),
        2 if n <= 64 => {
            let mut best = (0, hash_2words(h, 0));
            for l in 1..n {
                let w = hash_2words(h, l);
                if w > best.1 {
                    best = (l, w);
                }
            }
            best.0
        }
        2 => iter_hash(0),
        _ => iter_hash(arg),
    }
}

/// Makes the symmetric L4 part of OVS's hashes significant in `m`:
/// nw_proto, and the ports of TCP, SCTP and, if `udp`, UDP (not of a
/// later fragment).
pub(super) fn sym_l4(f: &FlowKey, m: &mut FlowKey, udp: bool) {
    m.set_nw_proto(0xff);
    let ports = match f.nw_proto() {
        6 | 132 => true,
        17 => udp,
        _ => false,
    };
    if ports && f.nw_frag() & FRAG_LATER == 0 {
        m.set_tp_src(0xffff);
        m.set_tp_dst(0xffff);
    }
}

impl<L: Lookup> Ctx<'_, '_, L> {
    /// Sends the packet through group `id` (see [`crate::group`]).
    pub(super) fn xlate_group(&mut self, id: u32, table: u8) {
        use crate::group::GroupType;
        let tables = self.tables;
        let indent = self.depth;
        let Some(g) = tables.group(id) else {
            self.note(indent, &format!("group {id} does not exist: drop"));
            return;
        };
        match g.kind {
            GroupType::All => {
                self.record_group(id, None);
                // (As OVS: only the last bucket of the group's is the
                // last of the translation.)
                let level = self.last_level;
                let n = g.buckets.len();
                for (k, b) in g.buckets.iter().enumerate() {
                    self.last_level = level && k + 1 == n;
                    self.xlate_bucket(b, table);
                }
                self.last_level = level;
            }
            GroupType::Indirect => {
                self.record_group(id, None);
                if let Some(b) = g.buckets.first() {
                    self.xlate_bucket(b, table);
                }
            }
            GroupType::FastFailover => match g
                .buckets
                .iter()
                .enumerate()
                .find(|(_, b)| self.bucket_live(b, GroupType::FastFailover, 0))
            {
                Some((k, b)) => {
                    self.record_group(id, Some(k as u32));
                    self.xlate_bucket(b, table);
                }
                None => self.note(indent, &format!("group {id}: no live bucket: drop")),
            },
            GroupType::Select => {
                if self.was_mpls {
                    // As OVS: the bucket choice may read L3 (the caller
                    // keeps this group for after recirculation).
                    self.freezing = Some(None);
                    return;
                }
                if let Some(t) = &g.dp_hash {
                    let h = self.flow.dp_hash();
                    if h == 0 {
                        // No datapath hash yet: the datapath computes it
                        // and recirculates; the caller keeps this group.
                        self.note(indent, &format!("group {id}: hashing in the datapath"));
                        self.freezing = Some(Some((t.symmetric, t.basis)));
                        return;
                    }
                    let mut m = self.wc.to_key();
                    m.set_dp_hash(m.dp_hash() | t.mask);
                    self.wc = FlowMask::from_key(&m);
                    // As OVS: from the hash's slot on, the first live
                    // bucket (so the weights still hold when some die).
                    let live = (0..=t.mask).find_map(|i| {
                        let slot = h.wrapping_add(i) & t.mask;
                        let k = *t.slots.get(slot as usize)?;
                        let b = g.buckets.get(usize::from(k))?;
                        self.bucket_live(b, GroupType::Select, 0).then_some((k, b))
                    });
                    match live {
                        Some((k, b)) => {
                            self.record_group(id, Some(u32::from(k)));
                            self.note(indent, &format!("group {id}: dp_hash bucket {}", b.id));
                            self.xlate_bucket(b, table);
                        }
                        None => self.note(indent, &format!("group {id}: no live bucket: drop")),
                    }
                    return;
                }
                // As OVS's slow-path methods: the fields of the symmetric
                // L4 hash (UDP ports not among them) or of `fields(...)`
                // significant; of the live buckets, the one with the
                // highest score, hash_int(bucket id, hash)'s low 16 bits
                // × weight, the later one on ties (so weight 0 only when
                // every live bucket scores 0).
                let h = self.select_hash(g.fields.as_deref(), g.param);
                let mut best: Option<(usize, &crate::group::Bucket, u32)> = None;
                for (k, b) in g.buckets.iter().enumerate() {
                    if !self.bucket_live(b, GroupType::Select, 0) {
                        continue;
                    }
                    let score =
                        (flowpath_flow::ovs_hash::hash_int(b.id, h) & 0xffff) * u32::from(b.weight);
                    if best.is_none_or(|(_, _, s)| score >= s) {
                        best = Some((k, b, score));
                    }
                }
                match best {
                    Some((k, b, _)) => {
                        self.record_group(id, Some(k as u32));
                        self.note(indent, &format!("group {id}: selected bucket {}", b.id));
                        self.xlate_bucket(b, table);
                    }
                    None => self.note(indent, &format!("group {id}: no bucket: drop")),
                }
            }
        }
    }

    /// Records (when recording) that the packet went through group `id`
    /// and its bucket `bucket` (`None`: every bucket).
    fn record_group(&mut self, id: u32, bucket: Option<u32>) {
        if let Some(seen) = self.groups.as_mut() {
            seen.push((id, bucket));
        }
    }

    /// Runs a bucket on the packet as it was before the group. As OVS
    /// (and OpenFlow), a bucket's actions are an action set: ordered as
    /// [`action_set_order`] orders them, nothing at all without an output.
    pub(super) fn xlate_bucket(&mut self, b: &crate::group::Bucket, table: u8) {
        let Some(list) = action_set_order(&b.actions) else {
            self.note(self.depth, "bucket without output: nothing to do");
            return;
        };
        let (flow, tpid, src) = (self.flow, self.flow_tpid, self.tag_src);
        let was_mpls = self.was_mpls;
        let was_bucket = std::mem::replace(&mut self.in_bucket, true);
        self.do_actions(&list, &[], table);
        self.in_bucket = was_bucket;
        // As OVS: a freeze in a bucket recirculates a copy from there; the
        // actions after the group go on with the packet as it was.
        if self.error.is_none() {
            self.finish_freezing();
        }
        self.flow = flow;
        self.flow_tpid = tpid;
        self.tag_src = src;
        // As OVS: a bucket's pop_mpls has no effect after the bucket.
        self.was_mpls = was_mpls;
    }

    /// A port is live when it is a port of the bridge (LOCAL when the
    /// bridge has one).
    pub(super) fn port_live(&self, p: u32) -> bool {
        let local = self.normal.as_ref().is_some_and(|e| e.local);
        self.tables.ports().contains(&p) || (p == OFPP_LOCAL && local)
    }

    /// Makes the fields that `bundle`'s and `multipath`'s field set
    /// ([`crate::action::BUNDLE_FIELDS`]) hashes significant, as OVS 3.1's
    /// `flow_mask_hash_fields` (the hash itself:
    /// [`flowpath_flow::ovs_hash::hash_fields`]).
    pub(super) fn mask_hash_fields(&mut self, set: u8) {
        if set == 1 {
            // OVS's symmetric_l4: L4 ports of TCP and SCTP only.
            self.mask_symmetric_l4();
            return;
        }
        let f = self.flow;
        let mut m = self.wc.to_key();
        let (v4, v6) = (f.is_ipv4(), f.is_ip_any() && !f.is_ipv4());
        match set {
            0 => {
                m.set_dl_src(0xffff_ffff_ffff);
            }
            4 if v4 => {
                m.set_nw_src(u32::MAX);
            }
            4 if v6 => {
                m.set_ipv6_src(u128::MAX);
            }
            5 if v4 => {
                m.set_nw_dst(u32::MAX);
            }
            5 if v6 => {
                m.set_ipv6_dst(u128::MAX);
            }
            2 | 3 if !v4 && !v6 => {
                // symmetric_l3l4 of a packet that is not IP hashes its L2
                // fields (OVS's flow_hash_symmetric_l2), which OVS 3.1
                // leaves out of the megaflow: then other packets of it
                // would reuse this packet's choice. flowpath makes them
                // significant (its megaflow is narrower than OVS's here,
                // on purpose).
                m.set_dl_src(0xffff_ffff_ffff);
                m.set_dl_dst(0xffff_ffff_ffff);
                m.set_vlan_tci(m.vlan_tci() | 0x0fff);
                m.set_vlan_tci_inner(m.vlan_tci_inner() | 0x0fff);
            }
            2 | 3 | 6 if v4 || v6 => {
                // symmetric_l3 (6), symmetric_l3l4 (2), +udp (3).
                if v4 {
                    m.set_nw_src(u32::MAX);
                    m.set_nw_dst(u32::MAX);
                } else {
                    m.set_ipv6_src(u128::MAX);
                    m.set_ipv6_dst(u128::MAX);
                }
                if set != 6 {
                    sym_l4(&f, &mut m, set == 3);
                }
            }
            _ => {}
        }
        self.wc = FlowMask::from_key(&m);
    }

    /// Bucket liveness, as OVS's: a bucket of a group of `kind` is live if
    /// it watches nothing, a port of the bridge, or a group with a live
    /// bucket — but never, in a select group, with weight 0.
    pub(super) fn bucket_live(
        &self,
        b: &crate::group::Bucket,
        kind: crate::group::GroupType,
        depth: u32,
    ) -> bool {
        if kind == crate::group::GroupType::Select && b.weight == 0 {
            return false;
        }
        if b.watch_port.is_none() && b.watch_group.is_none() {
            return true;
        }
        let port_live = b.watch_port.is_some_and(|p| self.port_live(p));
        port_live
            || (depth < 32
                && b.watch_group
                    .and_then(|g| self.tables.group(g))
                    .is_some_and(|g| {
                        g.buckets
                            .iter()
                            .any(|x| self.bucket_live(x, g.kind, depth + 1))
                    }))
    }

    /// A slow-path select group's hash of the packet, as OVS 3.1's: of
    /// `fields` (each whose prerequisites the packet meets, under its
    /// mask, in OVS's field order, from `hash_uint64(param)`), or OVS's
    /// `flow_hash_symmetric_l4`; the bits read become significant.
    pub(super) fn select_hash(
        &mut self,
        fields: Option<&[crate::group::SelectField]>,
        param: u64,
    ) -> u32 {
        use flowpath_flow::ovs_hash::{hash_bytes, hash_uint64, symmetric_l4};
        let Some(fields) = fields else {
            self.mask_symmetric_l4();
            return symmetric_l4(&self.flow, 0);
        };
        let f = self.flow;
        let mut basis = hash_uint64(param);
        for sf in fields {
            if !self.select_prereq_ok(sf) {
                continue;
            }
            let info = sf.id.info();
            let value = if info.is_reg() {
                info.get_regs(&self.regs)
            } else {
                info.get(&f)
            };
            let n = sf.n_bytes();
            let bytes = (value & sf.mask).to_be_bytes();
            basis = hash_bytes(&bytes[16 - n..], basis);
            let mut mask = self.wc;
            // As OVS's setters of vlan_vid and vlan_pcp (on the mask):
            // the VID with the present bit as masked, the priority with
            // the present bit.
            let tci_bits = match sf.id {
                FieldId::VlanVid => Some((sf.mask & 0x1fff) as u16),
                FieldId::DlVlanPcp => Some(((sf.mask & 7) as u16) << 13 | VLAN_CFI),
                _ => None,
            };
            match tci_bits {
                Some(bits) => {
                    let mut m = mask.to_key();
                    m.set_vlan_tci(m.vlan_tci() | bits);
                    mask = FlowMask::from_key(&m);
                }
                None => info.or_mask(&mut mask, sf.mask),
            }
            self.wc = mask;
        }
        basis
    }

    /// Whether the packet meets `sf`'s prerequisites, as OVS's
    /// `mf_are_prereqs_ok` decides it (the bits it reads become
    /// significant: nw_proto when it checks an IP packet's protocol, the
    /// tag's present bit, ICMPv6 type and code for ND fields).
    pub(super) fn select_prereq_ok(&mut self, sf: &crate::group::SelectField) -> bool {
        use FieldId as F;
        let f = self.flow;
        let t = f.dl_type();
        let mut m = self.wc.to_key();
        let mut proto = |want: u8, v4_only: bool, v6_only: bool| {
            let ip = if v4_only {
                t == 0x0800
            } else if v6_only {
                t == 0x86dd
            } else {
                f.is_ip_any()
            };
            if !ip {
                return false;
            }
            m.set_nw_proto(0xff);
            f.nw_proto() == want
        };
        let later = f.nw_frag() & FRAG_LATER != 0;
        let ok = match sf.id {
            F::DlVlanPcp => {
                m.set_vlan_tci(m.vlan_tci() | VLAN_CFI);
                f.vlan_tci() & VLAN_CFI != 0
            }
            F::MplsLabel | F::MplsTc | F::MplsBos | F::MplsTtl => matches!(t, 0x8847 | 0x8848),
            F::NwSrc | F::NwDst => t == 0x0800,
            F::Ipv6Src | F::Ipv6Dst | F::Ipv6Label => t == 0x86dd,
            F::NwProto | F::NwTos | F::IpDscp | F::NwEcn | F::NwTtl | F::NwFrag => f.is_ip_any(),
            F::ArpOp | F::ArpSpa | F::ArpTpa | F::ArpSha | F::ArpTha => {
                matches!(t, 0x0806 | 0x8035)
            }
            F::TpSrc | F::TpDst | F::TcpSrc | F::TcpDst | F::TcpFlags => {
                proto(6, false, false) && !later
            }
            F::UdpSrc | F::UdpDst => proto(17, false, false) && !later,
            F::SctpSrc | F::SctpDst => proto(132, false, false) && !later,
            F::IcmpType | F::IcmpCode => proto(1, true, false),
            F::Icmpv6Type | F::Icmpv6Code => proto(58, false, true),
            F::NdTarget | F::NdSll | F::NdTll => {
                proto(58, false, true) && {
                    m.set_tp_src(0xffff);
                    let ty = f.tp_src();
                    let type_ok = match sf.id {
                        F::NdSll => ty == 135,
                        F::NdTll => ty == 136,
                        _ => ty == 135 || ty == 136,
                    };
                    type_ok && {
                        m.set_tp_dst(0xffff);
                        f.tp_dst() == 0
                    }
                }
            }
            _ => true,
        };
        self.wc = FlowMask::from_key(&m);
        ok
    }

    /// Makes the fields of OVS's `symmetric_l4` hash significant: Ethernet
    /// addresses, type and VLAN; IP addresses and protocol; the ports of
    /// every IP packet but UDP's.
    pub(super) fn mask_symmetric_l4(&mut self) {
        let f = self.flow;
        let mut m = self.wc.to_key();
        m.set_dl_src(0xffff_ffff_ffff);
        m.set_dl_dst(0xffff_ffff_ffff);
        // Both tags' VIDs are hashed (OVS: every `FLOW_MAX_VLAN_HEADERS`).
        m.set_vlan_tci(m.vlan_tci() | 0x1fff);
        m.set_vlan_tci_inner(m.vlan_tci_inner() | 0x1fff);
        if f.is_ip_any() {
            if f.is_ipv4() {
                m.set_nw_src(u32::MAX);
                m.set_nw_dst(u32::MAX);
            } else {
                m.set_ipv6_src(u128::MAX);
                m.set_ipv6_dst(u128::MAX);
            }
            m.set_nw_proto(0xff);
            // As OVS's symmetric_l4: the ports of every IP packet but
            // UDP are significant, hashed or not (checked against OVS
            // 3.1: ICMP type and code, zero ports of other protocols).
            if f.nw_proto() != 17 {
                m.set_tp_src(0xffff);
                m.set_tp_dst(0xffff);
            }
        }
        self.wc = FlowMask::from_key(&m);
    }
}
