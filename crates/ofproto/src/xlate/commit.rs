//! Commit: before every output, the datapath `set`, `push_vlan`,
//! `pop_vlan` and MPLS actions that turn the packet as the datapath has it
//! into the packet as the rules made it, and the megaflow mask's final
//! touches.

use super::*;

impl<L: Lookup> Ctx<'_, '_, L> {
    pub(super) fn output(&mut self, port: u32) {
        use crate::tables::port_config::{NO_FWD, PORT_DOWN};
        let tables = self.tables;
        if let Some(t) = tables.tunnels() {
            if let Some(p) = t.port(port) {
                let p = p.clone();
                self.tunnel_output(&p, t);
                return;
            }
        }
        let config = self.tables.port_config(port);
        if config & (NO_FWD | PORT_DOWN) != 0 {
            let why = if config & NO_FWD != 0 {
                "OFPPC_NO_FWD set, skipping output"
            } else {
                "OFPPC_PORT_DOWN set, skipping output"
            };
            self.note(self.depth + 1, why);
            return;
        }
        self.commit();
        self.odp.push(DpAction::Output(port));
    }

    /// Emits the datapath actions that make the packet (`base`) look like
    /// the flow, in OVS's order: Ethernet, L3, L4, then VLAN tags.
    pub(super) fn commit(&mut self) {
        use FieldId::*;
        // The rewritable fields of each header, as OVS's datapath `set`
        // attributes group them (the ToS byte is one field: DSCP + ECN).
        const ETH: &[&[FieldId]] = &[&[EthSrc], &[EthDst]];
        const IPV4: &[&[FieldId]] = &[&[NwSrc], &[NwDst], &[NwTos, NwEcn], &[NwTtl]];
        const IPV6: &[&[FieldId]] = &[
            &[Ipv6Src],
            &[Ipv6Dst],
            &[Ipv6Label],
            &[NwTos, NwEcn],
            &[NwTtl],
        ];
        const L4: &[&[FieldId]] = &[&[TpSrc], &[TpDst]];
        self.commit_header(SetHeader::Eth, ETH);
        // As OVS: a packet that stops being MPLS does so before the L3
        // and L4 rewrites (which would otherwise do nothing); other MPLS
        // changes come after them.
        let mpls_first = is_mpls(self.base.dl_type()) && !is_mpls(self.flow.dl_type());
        if mpls_first {
            self.commit_mpls();
        }
        // As OVS: no L3 rewrite when nw_proto is 0. A rewrite pending
        // makes nw_proto significant (a set_field has already made it so;
        // after a `move` or `pop` alone OVS 3.1 leaves it out, and its
        // megaflow then also covers packets with nw_proto 0, which get no
        // rewrite).
        const ARP: &[&[FieldId]] = &[&[ArpSpa], &[ArpTpa], &[ArpOp], &[ArpSha], &[ArpTha]];
        let is_arp = matches!(self.base.dl_type(), 0x0806 | 0x8035);
        let l3: &[&[FieldId]] = if self.base.is_ipv4() {
            IPV4
        } else if self.base.is_ipv6() {
            IPV6
        } else if is_arp {
            ARP
        } else {
            &[]
        };
        // (Only while nw_proto is still the packet's: after a push_mpls
        // or pop_mpls it is the flow's, 0, whatever the packet's.)
        if self.flow.dl_type() == self.base.dl_type()
            && !self.was_mpls
            && self.flow.nw_proto() == self.base.nw_proto()
            && self.pending(l3)
        {
            FieldId::NwProto.info().or_mask(&mut self.wc, 0xff);
        }
        if self.flow.nw_proto() != 0 && self.base.is_ipv4() {
            self.commit_header(SetHeader::Ipv4, IPV4);
        } else if self.flow.nw_proto() != 0 && self.base.is_ipv6() {
            self.commit_header(SetHeader::Ipv6, IPV6);
            // Neighbour discovery after IPv6, as OVS (masked sets): the
            // extensions first.
            if self.base.nw_proto() == 58 && is_nd(&self.base) {
                let n = self.odp.len();
                self.commit_header(SetHeader::NdExt, &[&[NdReserved], &[NdOptionsType]]);
                if self.odp.len() > n {
                    // As OVS (its nd_ext key's option type is 8 bits): a
                    // commit leaves the 16-bit mask of the option type as
                    // its low 8 bits.
                    let f = NdOptionsType.info();
                    let m = f.get_mask(&self.wc);
                    f.set_mask(&mut self.wc, m & 0xff);
                }
                self.commit_header(SetHeader::Nd, &[&[NdTarget], &[NdSll], &[NdTll]]);
            }
        } else if self.flow.nw_proto() != 0 && is_arp {
            // ARP (its opcode is where nw_proto is): a masked set.
            self.commit_header(SetHeader::Arp, ARP);
        }
        if self.flow.nw_proto() != 0
            && self.base.is_ip_any()
            && self.base.nw_frag() & FRAG_LATER == 0
        {
            match self.flow.nw_proto() {
                6 => self.commit_header(SetHeader::Tcp, L4),
                17 => self.commit_header(SetHeader::Udp, L4),
                132 => self.commit_header(SetHeader::Sctp, L4),
                _ => {}
            }
        }
        self.commit_icmp();
        if !mpls_first {
            self.commit_mpls();
        }
        self.commit_vlan();
        // As OVS: the priority last; its change makes it significant.
        let p = self.flow.skb_priority();
        if p != self.base.skb_priority() {
            let mut m = self.wc.to_key();
            m.set_skb_priority(u32::MAX);
            self.wc = FlowMask::from_key(&m);
            self.odp.push(DpAction::SetPriority(p));
            self.base.set_skb_priority(p);
        }
        // Then the mark, as OVS: a masked set under the mark's megaflow
        // bits (every write made its bits significant), a plain set when
        // all 32 are.
        let mark = self.flow.pkt_mark();
        if mark != self.base.pkt_mark() {
            let mut m = self.wc.to_key();
            let mask = m.pkt_mark();
            self.odp.push(DpAction::SetMark {
                value: mark & mask,
                mask,
            });
            m.set_pkt_mark(mask);
            self.wc = FlowMask::from_key(&m);
            self.base.set_pkt_mark(mark);
        }
    }

    /// ICMP type and code, as OVS commits them: when either significant
    /// one differs, a set of both (not masked), both then significant.
    fn commit_icmp(&mut self) {
        let header = match (self.flow.dl_type(), self.flow.nw_proto()) {
            (0x0800, 1) => SetHeader::Icmp,
            (0x86dd, 58) => SetHeader::Icmpv6,
            _ => return,
        };
        let m = group_mask(&[FieldId::IcmpType, FieldId::IcmpCode]);
        if self.flow.eq_masked(&self.base, &m.intersect(&self.wc)) {
            return;
        }
        self.wc.or_assign(&m);
        let key = self.flow.masked(&m);
        self.emit_set(header, key, m);
    }

    /// True when a field (group) of `fields` differs, in its significant
    /// bits, between the flow and the datapath packet.
    fn pending(&self, fields: &[&[FieldId]]) -> bool {
        fields.iter().any(|group| {
            !self
                .flow
                .eq_masked(&self.base, &group_mask(group).intersect(&self.wc))
        })
    }

    /// Emits one `set` for `header` carrying every field (group) whose
    /// significant bits differ between the flow and the datapath packet;
    /// each such field is written under its megaflow mask, as OVS's masked
    /// set actions do.
    pub(super) fn commit_header(&mut self, header: SetHeader, fields: &[&[FieldId]]) {
        let mut key = FlowKey::zero();
        let mut mask = FlowMask::catchall();
        for group in fields {
            let m = group_mask(group).intersect(&self.wc);
            if !self.flow.eq_masked(&self.base, &m) {
                for i in 0..flowpath_flow::FLOW_WORDS {
                    key.w[i] |= self.flow.w[i] & m.w[i];
                }
                mask.or_assign(&m);
            }
        }
        self.emit_set(header, key, mask);
    }

    pub(super) fn emit_set(&mut self, header: SetHeader, key: FlowKey, mask: FlowMask) {
        if mask.is_catchall() {
            return;
        }
        let key = key.masked(&mask);
        // The datapath packet now carries these values.
        for i in 0..flowpath_flow::FLOW_WORDS {
            self.base.w[i] = (self.base.w[i] & !mask.w[i]) | key.w[i];
        }
        self.odp.push(DpAction::Set { header, key, mask });
    }

    /// Pops the packet's tags that differ from the flow's (outermost
    /// first) and pushes the flow's (innermost first), comparing from the
    /// innermost tag outwards as OVS does.
    pub(super) fn commit_vlan(&mut self) {
        let tags = |k: &FlowKey, tp: [u16; 2]| -> Vec<(u16, u16)> {
            let mut v = Vec::new();
            if k.vlan_tci() & VLAN_CFI != 0 {
                v.push((tp[0], k.vlan_tci()));
                if k.vlan_tci_inner() & VLAN_CFI != 0 {
                    v.push((tp[1], k.vlan_tci_inner()));
                }
            }
            v
        };
        let b = tags(&self.base, self.base_tpid);
        let f = tags(&self.flow, self.flow_tpid);
        let (mut bn, mut fn_) = (b.len() as isize - 1, f.len() as isize - 1);
        // Comparing a tag the actions made (or another of the packet's
        // tags) with the packet's reads the whole of both packet tags.
        let mut read = [false; 2];
        let mut compare = |bn: isize, fn_: isize| {
            let src = self.tag_src[fn_ as usize];
            if src != Some(bn as u8) {
                read[bn as usize] = true;
                if let Some(k) = src {
                    read[usize::from(k).min(1)] = true;
                }
            }
        };
        while bn >= 0 && fn_ >= 0 {
            compare(bn, fn_);
            if b[bn as usize] != f[fn_ as usize] {
                break;
            }
            bn -= 1;
            fn_ -= 1;
        }
        let mut m = self.wc.to_key();
        if read[0] {
            m.set_vlan_tci(0xffff);
        }
        if read[1] {
            m.set_vlan_tci_inner(0xffff);
        }
        self.wc = FlowMask::from_key(&m);
        if bn < 0 && fn_ < 0 {
            return;
        }
        let mut m = self.wc.to_key();
        for i in (0..=bn).rev() {
            self.odp.push(DpAction::PopVlan);
            if i == 0 {
                m.set_vlan_tci(0xffff);
            } else {
                m.set_vlan_tci_inner(0xffff);
            }
        }
        self.wc = FlowMask::from_key(&m);
        for i in (0..=fn_).rev() {
            let (tpid, tci) = f[i as usize];
            self.odp.push(DpAction::PushVlan {
                tpid,
                tci: tci & !VLAN_CFI,
            });
        }
        self.base.set_vlan_tci(self.flow.vlan_tci());
        self.base.set_vlan_tci_inner(self.flow.vlan_tci_inner());
        self.base_tpid = self.flow_tpid;
        self.tag_src = [Some(0), Some(1)];
    }

    pub(super) fn finish_wc(&mut self) {
        let mut m = self.wc.to_key();
        let is_icmp = (self.flow.is_ipv4() && self.flow.nw_proto() == 1)
            || (self.flow.is_ipv6() && self.flow.nw_proto() == 58);
        if is_icmp {
            m.set_tp_src(m.tp_src() & 0xff);
            m.set_tp_dst(m.tp_dst() & 0xff);
        }
        // Whether a tag is present is always part of a megaflow (OVS's
        // datapath keys encode it structurally); an absent tag's TCI bits are
        // all zero, so the CFI bit alone matches "no tag".
        let orig = self.orig;
        self.cfi_read = orig.vlan_tci() & VLAN_CFI != 0 && m.vlan_tci() == VLAN_CFI;
        if orig.vlan_tci() & VLAN_CFI == 0 {
            m.set_vlan_tci(VLAN_CFI);
            m.set_vlan_tci_inner(0);
        } else {
            m.set_vlan_tci(m.vlan_tci() | VLAN_CFI);
            if orig.vlan_tci_inner() & VLAN_CFI == 0 {
                m.set_vlan_tci_inner(VLAN_CFI);
            } else {
                m.set_vlan_tci_inner(m.vlan_tci_inner() | VLAN_CFI);
            }
        }
        if self.orig.nw_frag() & FRAG_LATER != 0 {
            m.set_tp_src(0);
            m.set_tp_dst(0);
        }
        // A lookup that failed on the L2 stage makes the MPLS bits of its
        // subtable significant whatever the packet: a packet that is not
        // MPLS has none (its dl_type, always significant, says so), as
        // OVS's datapath key leaves them out.
        if !is_mpls(self.orig.dl_type()) {
            m.w[W_MPLS] = 0;
            // (An ICMPv6 packet's ND reserved word is where the third
            // entry is: read by an ND lookup, it stays, as OVS's.)
            if !(self.orig.is_ip_any() && self.orig.nw_proto() == 58) {
                m.set_mpls_lse2(0);
            }
        }
        // Tunnel metadata: a packet that came through no tunnel (no
        // tunnel destination) keeps it out of its megaflow (its in_port,
        // always exact, is no tunnel's), as OVS's datapath key; one that did matches
        // what OVS's `tnl_wc_init` makes significant (the tunnel's
        // identity, ToS and the datapath flags; never the outer ports
        // or TTL).
        if self.orig.has_tunnel() {
            use flowpath_flow::key::tnl_flags;
            m.set_tun_id(u64::MAX);
            if self.orig.tun_dst() != 0 {
                m.set_tun_src(u32::MAX);
                m.set_tun_dst(u32::MAX);
            } else {
                m.set_tun_ipv6_src(u128::MAX);
                m.set_tun_ipv6_dst(u128::MAX);
            }
            m.set_tun_dp_flags(m.tun_dp_flags() | tnl_flags::DF | tnl_flags::CSUM | tnl_flags::KEY);
            m.set_tun_tos(0xff);
            m.set_tun_ttl(0);
            m.set_tun_tp_src(0);
            m.set_tun_tp_dst(0);
            if self.orig.is_ip_any() && self.orig.tun_tos() & 3 == 3 {
                m.set_nw_tos(m.nw_tos() | 3);
            }
        } else if self.orig.recirc_id() == 0 || self.orig.tunnel_is_zero() {
            // (As OVS's xlate_wc_finish: a first pass without a tunnel
            // destination leaves the tunnel out whatever other tunnel
            // fields it carries (a trace can give it some; a datapath
            // key of a packet from no tunnel has none). A later pass's
            // key carries what the actions set before the recirculation,
            // so what was read of it stays.)
            m.clear_tunnel();
        }
        self.wc = FlowMask::from_key(&m);
    }
}

/// An IPv6 neighbour solicitation or advertisement (code 0), as OVS's
/// `is_nd`.
fn is_nd(k: &FlowKey) -> bool {
    k.is_ipv6()
        && k.nw_proto() == 58
        && matches!(k.tp_src() & 0xff, 135 | 136)
        && k.tp_dst() & 0xff == 0
}

/// The key bits of a field group (fields a datapath `set` writes as one).
fn group_mask(group: &[FieldId]) -> FlowMask {
    let mut m = FlowMask::catchall();
    for f in group {
        m.or_assign(&f.info().storage_mask());
    }
    m
}
