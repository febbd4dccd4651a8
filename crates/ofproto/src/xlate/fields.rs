//! Field writes and reads: `set_field`, `load`, `move`, the stack, VLAN
//! tag writes, `check_pkt_larger`'s two branches (the flow state each runs
//! from), and `learn`.

use super::*;

impl<L: Lookup> Ctx<'_, '_, L> {
    /// `clone(...)`'s actions, as OVS 3.1 translates a clone. When none of
    /// its own actions needs the datapath's help (`output` with a
    /// `max_len` does: the truncation must not outlive the clone), inline,
    /// with a copy of the action set (run at the clone's end) and of the
    /// stack; afterwards the flow and registers are as before it, while
    /// what was committed stays committed (the next output commits the way
    /// back). Otherwise the pending changes are committed and the actions
    /// go inside a datapath `clone(...)` (left out when empty), after which
    /// the packet is as the commit left it.
    pub(super) fn clone_actions(&mut self, body: &[Action], table: u8, last: bool) {
        let stack = self.stack.clone();
        let action_set = self.action_set.clone();
        // A truncated output among the clone's own actions (not those of
        // clones inside it). (As OVS: the translation's last action needs
        // no datapath clone.)
        let mut truncates = false;
        let mut i = 0;
        while let Some(a) = body.get(i) {
            truncates |= matches!(a, Action::OutputTrunc { .. });
            i += 1 + match *a {
                Action::Clone { len } => usize::from(len),
                _ => 0,
            };
        }
        let datapath = !last && truncates;
        let at = if datapath {
            self.commit();
            self.odp.push(DpAction::Clone { len: 0 });
            Some(self.odp.len() - 1)
        } else {
            None
        };
        let saved = self.flow_state();
        // (As OVS: a `ct` or `ct_clear` in the clone leaves the packet
        // outside tracked as it was.)
        let conntracked = self.conntracked;
        // A datapath clone's actions are the last of their own list.
        let level = std::mem::replace(&mut self.last_level, datapath || last);
        self.do_actions(body, &[], table);
        if self.error.is_none() && self.freezing.is_none() && !self.paused {
            self.cur_table = table;
            self.run_action_set();
        }
        self.last_level = level;
        if self.error.is_none() && self.freezing.is_some() {
            self.finish_freezing();
        }
        self.stack = stack;
        self.action_set = action_set;
        self.cur_table = table;
        self.conntracked = conntracked;
        if let Some(at) = at {
            let n = self.odp.len() - at - 1;
            match u16::try_from(n) {
                Ok(0) => {
                    self.odp.truncate(at);
                }
                Ok(len) => self.odp[at] = DpAction::Clone { len },
                Err(_) => {
                    self.error = Some("a clone is too long".into());
                }
            }
            self.set_flow_state(saved);
            return;
        }
        self.flow = saved.flow;
        self.regs = saved.regs;
        self.flow_tpid = saved.flow_tpid;
        // The packet's tags are the flow's as before unless the clone
        // changed them; then compare the flow's tags in full.
        self.tag_src = if self.base_tpid == saved.base_tpid
            && self.base.vlan_tci() == saved.base.vlan_tci()
            && self.base.vlan_tci_inner() == saved.base.vlan_tci_inner()
        {
            saved.tag_src
        } else {
            [None, None]
        };
    }

    /// The flow, the registers and what has been committed: what a
    /// `check_pkt_larger` branch starts from.
    pub(super) fn flow_state(&self) -> FlowState {
        FlowState {
            flow: self.flow,
            regs: self.regs,
            base: self.base,
            flow_tpid: self.flow_tpid,
            base_tpid: self.base_tpid,
            tag_src: self.tag_src,
            was_mpls: self.was_mpls,
        }
    }

    pub(super) fn set_flow_state(&mut self, s: FlowState) {
        self.flow = s.flow;
        self.regs = s.regs;
        self.base = s.base;
        self.flow_tpid = s.flow_tpid;
        self.base_tpid = s.base_tpid;
        self.tag_src = s.tag_src;
        self.was_mpls = s.was_mpls;
    }

    /// `check_pkt_larger(len)->dst`, as OVS 3.1 translates it for a
    /// datapath with `check_pkt_len`: the pending changes are committed,
    /// then `rest` (the actions after it in the same list) and the action
    /// set are translated twice from the same state — with the `dst` bit 1
    /// into the greater-than branch, with it 0 into the less-or-equal one.
    /// The flow, registers and committed state are restored after each
    /// branch; the `push`/`pop` stack and the action set are copied once
    /// for both branches (the first branch's run of the action set empties
    /// it for the second, as in OVS) and restored at the end. The megaflow
    /// gets both branches' bits; the packet length is not in it (the
    /// datapath checks it per packet).
    pub(super) fn check_pkt_larger(
        &mut self,
        len: u16,
        dst: crate::action::Subfield,
        rest: &[Action],
        write_set: &[Action],
        table: u8,
    ) {
        let indent = self.depth + 1;
        self.commit();
        let stack = self.stack.clone();
        let action_set = self.action_set.clone();
        let saved = self.flow_state();
        let conntracked = self.conntracked;
        let at = self.odp.len();
        self.odp.push(DpAction::CheckPktLen {
            size: len,
            gt: 0,
            le: 0,
        });
        let info = dst.field.info();
        let mut lens = [0u16; 2];
        for (k, bit) in [1u128, 0].into_iter().enumerate() {
            if self.error.is_some() {
                return;
            }
            if self.odp.len() > MAX_DP_ACTIONS {
                self.error = Some(format!(
                    "over {MAX_DP_ACTIONS} datapath actions (check_pkt_larger branches)"
                ));
                return;
            }
            if self.tracing {
                let cmp = if bit == 1 { "longer" } else { "not longer" };
                self.note(
                    indent,
                    &format!("(packets {cmp} than {len} bytes: {dst}={bit})"),
                );
            }
            let start = self.odp.len();
            info.set_regs_masked(&mut self.regs, bit << dst.ofs, dst.mask());
            // (As OVS: each branch is the last of the translation.)
            let level = std::mem::replace(&mut self.last_level, true);
            self.do_actions(rest, write_set, table);
            self.last_level = level;
            if self.error.is_none() && self.freezing.is_none() {
                self.cur_table = table;
                self.run_action_set();
            }
            // As OVS: a freeze in a branch recirculates from that branch.
            if self.error.is_none() {
                self.finish_freezing();
            }
            match u16::try_from(self.odp.len() - start) {
                Ok(n) => lens[k] = n,
                Err(_) => {
                    self.error = Some("a check_pkt_larger branch is too long".into());
                    return;
                }
            }
            self.set_flow_state(saved);
            self.conntracked = conntracked;
        }
        self.odp[at] = DpAction::CheckPktLen {
            size: len,
            gt: lens[0],
            le: lens[1],
        };
        self.stack = stack;
        self.action_set = action_set;
        self.cur_table = table;
    }

    /// Writes `v` (right-aligned) into the bits of `sf`, as `move` and
    /// `pop` do: the bits become significant, but — unlike `set_field` and
    /// `load` (checked against OVS 3.1) — not nw_proto.
    pub(super) fn move_to(&mut self, sf: crate::action::Subfield, v: u128) {
        let info = sf.field.info();
        let m = sf.mask() >> sf.ofs;
        let (value, mask) = ((v & m) << sf.ofs, sf.mask());
        match sf.field {
            FieldId::VlanTci | FieldId::VlanVid | FieldId::DlVlan | FieldId::DlVlanPcp => {
                self.set_field(sf.field, value, mask, false)
            }
            _ if info.is_reg() => info.set_regs_masked(&mut self.regs, value, mask),
            _ => {
                info.or_mask(&mut self.wc, mask);
                info.set_masked(&mut self.flow, value, mask);
            }
        }
    }

    /// `learn`: the sources become significant (OVS's `learn_mask`); with
    /// side effects, the flow is made for the caller to add.
    /// Stores `learn`'s success in its `result_dst` bit, if it has one.
    pub(super) fn learn_result(&mut self, l: &crate::learn::Learn, ok: bool) {
        if let Some(d) = l.result_dst {
            let info = d.field.info();
            info.set_regs_masked(&mut self.regs, u128::from(ok) << d.ofs, d.mask());
        }
    }

    pub(super) fn learn(&mut self, id: u32, indent: u32) {
        let Some(l) = crate::learn::get(id) else {
            return;
        };
        for sf in l.sources() {
            let info = sf.field.info();
            if !info.is_reg() {
                info.or_mask(&mut self.wc, sf.mask());
            }
        }
        if !self.side_effects {
            // As OVS 3.1: `ofproto/trace` ignores the action; a
            // revalidation (no trace) takes learning as succeeded.
            if !self.tracing && l.flow(&self.flow, &self.regs).is_some() {
                self.learn_result(&l, true);
            }
            self.note(
                indent + 1,
                ">> suppressing side effects, so learn action ignored",
            );
            return;
        }
        match l.flow(&self.flow, &self.regs) {
            Some(r) => {
                let ok = crate::tables::learn_allowed(
                    self.tables.all_rules(),
                    &self.learned,
                    &r,
                    l.limit,
                );
                if !ok {
                    self.note(indent + 1, "Limit exceeded, learn failed");
                } else {
                    if self.tracing {
                        self.note(indent + 1, &format!("learned: {r}"));
                    }
                    self.learned.push(r);
                }
                self.learn_result(&l, ok);
            }
            None => self.note(
                indent + 1,
                "the learned match lacks prerequisites: nothing learned",
            ),
        }
    }

    /// True when the flow has `field`'s prerequisites (nw_proto becomes
    /// significant when they involve it).
    pub(super) fn prereqs_ok(&mut self, field: FieldId) -> bool {
        let info = field.info();
        if !matches!(info.prereq.proto, flowpath_flow::field::ProtoReq::Any) {
            FieldId::NwProto.info().or_mask(&mut self.wc, 0xff);
        }
        self.nd_read(field);
        info.prereq.ok_for(&self.flow)
    }

    /// A neighbour-discovery field's prerequisite reads the ICMPv6 code,
    /// then (when it is 0) the type, as OVS's `is_nd`.
    pub(super) fn nd_read(&mut self, field: FieldId) {
        if field.info().prereq.icmp6_types.is_empty()
            || !(self.flow.is_ipv6() && self.flow.nw_proto() == 58)
        {
            return;
        }
        let mut m = self.wc.to_key();
        m.set_tp_dst(m.tp_dst() | 0xff);
        if self.flow.tp_dst() & 0xff == 0 {
            m.set_tp_src(m.tp_src() | 0xff);
        }
        self.wc = FlowMask::from_key(&m);
    }

    /// Reads the bits of `sf` (right-aligned), making them significant;
    /// `None` when the flow lacks the field's prerequisites.
    pub(super) fn read_subfield(&mut self, sf: crate::action::Subfield) -> Option<u128> {
        if !self.prereqs_ok(sf.field) {
            return None;
        }
        let info = sf.field.info();
        let v = if info.is_reg() {
            info.get_regs(&self.regs)
        } else {
            info.or_mask(&mut self.wc, sf.mask());
            info.get(&self.flow)
        };
        Some((v & sf.mask()) >> sf.ofs)
    }

    /// Sets bits `bits` of the outer VLAN TCI to `value`, pushing a tag
    /// first when there is none and `push_if_needed`.
    pub(super) fn set_vlan(&mut self, bits: u16, value: u16, push_if_needed: bool) {
        let mut m = self.wc.to_key();
        m.set_vlan_tci(m.vlan_tci() | bits | VLAN_CFI);
        self.wc = FlowMask::from_key(&m);
        let tci = self.flow.vlan_tci();
        if tci & VLAN_CFI != 0 || push_if_needed {
            if tci & VLAN_CFI == 0 {
                self.flow_tpid[0] = 0x8100;
            }
            // The bits written are significant on the packet's outer tag:
            // another tag becomes a made one.
            if tci & VLAN_CFI == 0 || self.tag_src[0] != Some(0) {
                self.tag_src[0] = None;
            }
            self.flow.set_vlan_tci((tci & !bits) | value | VLAN_CFI);
        }
    }

    pub(super) fn set_field(&mut self, field: FieldId, value: u128, mask: u128, legacy: bool) {
        let info = field.info();
        if info.is_reg() {
            // Translation state: never part of the megaflow.
            info.set_regs_masked(&mut self.regs, value, mask);
            return;
        }
        let is_l4 = matches!(
            field,
            FieldId::TpSrc
                | FieldId::TpDst
                | FieldId::TcpSrc
                | FieldId::TcpDst
                | FieldId::UdpSrc
                | FieldId::UdpDst
                | FieldId::SctpSrc
                | FieldId::SctpDst
        );
        match field {
            FieldId::DlVlan => return self.set_vlan(0x0fff, (value as u16) & 0x0fff, legacy),
            FieldId::DlVlanPcp => return self.set_vlan(0xe000, ((value as u16) & 7) << 13, legacy),
            // OpenFlow's vlan_vid: the TCI's VID and CFI (present) bits, a
            // tag made where the present bit is written on an untagged
            // packet (as OVS's flow_set_vlan_vid and flow_fix_vlan_tpid).
            FieldId::VlanVid => {
                return self.set_field(FieldId::VlanTci, value & 0x1fff, mask & 0x1fff, legacy)
            }
            // An 8-bit value in OVS's 16-bit place: a write is of the low 8.
            FieldId::NdOptionsType if mask & !0xff != 0 => {
                return self.set_field(field, value & 0xff, mask & 0xff, legacy)
            }
            FieldId::VlanTci => {
                let mut m = self.wc.to_key();
                m.set_vlan_tci(m.vlan_tci() | mask as u16);
                self.wc = FlowMask::from_key(&m);
                if self.tag_src[0] != Some(0) {
                    self.tag_src[0] = None;
                }
                let tci = self.flow.vlan_tci();
                let new = (tci & !(mask as u16)) | (value as u16 & mask as u16);
                // Writing the CFI bit of an untagged packet makes a tag: an
                // 802.1Q one (checked against OVS 3.1).
                if tci & VLAN_CFI == 0 && new & VLAN_CFI != 0 {
                    self.flow_tpid[0] = 0x8100;
                }
                self.flow.set_vlan_tci(new);
                return;
            }
            _ => {}
        }
        // (The ND prerequisites are read whether they hold or not.)
        self.nd_read(field);
        let applies = if legacy && is_l4 {
            self.flow.is_ip_any() && self.flow.nw_frag() & FRAG_LATER == 0
        } else if legacy {
            match info.prereq.eth {
                flowpath_flow::field::EthReq::Ipv4 => self.flow.is_ipv4(),
                flowpath_flow::field::EthReq::Ip => self.flow.is_ip_any(),
                _ => true,
            }
        } else {
            info.prereq.ok_for(&self.flow)
        };
        if !applies {
            self.note(
                self.depth + 2,
                "skipped: the packet lacks this field's prerequisites",
            );
            return;
        }
        // Reading the prerequisites makes them significant; like OVS 3.1,
        // any L3 or L4 rewrite makes nw_proto significant.
        // (ARP's too: its opcode is where nw_proto is.)
        let is_l3 = matches!(
            info.prereq.eth,
            flowpath_flow::field::EthReq::Ip
                | flowpath_flow::field::EthReq::Ipv4
                | flowpath_flow::field::EthReq::Ipv6
                | flowpath_flow::field::EthReq::Arp
        );
        if is_l3 || is_l4 || !matches!(info.prereq.proto, flowpath_flow::field::ProtoReq::Any) {
            FieldId::NwProto.info().or_mask(&mut self.wc, 0xff);
        }
        info.or_mask(&mut self.wc, mask);
        info.set_masked(&mut self.flow, value, mask);
    }
}
