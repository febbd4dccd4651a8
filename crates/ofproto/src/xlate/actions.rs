//! The actions of a rule, by family: [`Ctx::do_actions`] walks a list and
//! hands each action to the function of its family here. Each says
//! whether the list goes on ([`Step::Next`]) or this level of the walk
//! ends ([`Step::Stop`]: a goto, a freeze, an exception, an error).

use super::*;

/// Whether the walk of an action list goes on after an action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// The next action of the list.
    Next,
    /// This list ends here (the caller's continues).
    Stop,
}

/// Where in its list an action is (what the control-flow actions need).
pub(super) struct At<'x> {
    /// Its index in `actions`.
    pub(super) i: usize,
    /// The list.
    pub(super) actions: &'x [Action],
    /// The rule's write-actions set.
    pub(super) write_set: &'x [Action],
    /// The table the rule is in.
    pub(super) table: u8,
    /// Trace indentation.
    pub(super) indent: u32,
}

/// The action an OpenFlow port number (16 bits, as `output:REG` reads
/// it) outputs with; `None` for 0, NONE, TABLE and numbers past 16 bits.
fn port_of(port: u128) -> Option<Action> {
    Some(match port {
        1..0xff00 => Action::Output(port as u32),
        0xfff8 => Action::InPort,
        0xfffa => Action::Normal,
        0xfffb => Action::Flood,
        0xfffc => Action::All,
        0xfffd => Action::controller(u16::MAX),
        0xfffe => Action::Output(crate::action::OFPP_LOCAL),
        _ => return None,
    })
}

impl<L: Lookup> Ctx<'_, '_, L> {
    /// A packet-in: the pending changes committed, then the datapath's
    /// `userspace(controller(...))` (an action-reason one from a
    /// table-miss rule is an explicit miss).
    pub(super) fn packet_in(&mut self, reason: u8, id: u16, max_len: u16) {
        self.packet_in_with(reason, id, max_len, 0);
    }

    /// [`Self::packet_in`] with `controller(userdata=...)`'s index.
    pub(super) fn packet_in_with(&mut self, reason: u8, id: u16, max_len: u16, userdata: u32) {
        self.commit();
        let reason = if reason == 1 && self.miss_rule {
            6
        } else {
            reason
        };
        // (u64::MAX: no rule's, as a packet-out's own actions.)
        let cookie = self.cookie;
        self.odp.push(DpAction::Controller {
            reason,
            id,
            max_len,
            cookie,
            table: self.cur_table,
            userdata,
            cont: 0,
        });
    }

    /// `sample(...)`, as OVS 3.1's `xlate_sample_action`: nothing without
    /// flow-sample collector sets on the bridge; else the pending changes
    /// committed and the datapath's flow-sample action (its
    /// `output_port` the sampling port's, when that is another port than
    /// the input).
    pub(super) fn sample(&mut self, a: &Action, indent: u32) {
        let Action::Sample {
            probability,
            collector_set_id,
            obs_domain_id,
            obs_point_id,
            sampling_port,
            direction,
        } = *a
        else {
            return;
        };
        if !self.tables.sampling() {
            self.note(
                indent + 1,
                "no flow-sample collector set on the bridge: nothing sampled",
            );
            return;
        }
        let mut output_port = u32::MAX;
        if let Some(p) = sampling_port.filter(|p| *p != self.flow.in_port()) {
            if !(p < 0xff00 && self.is_port(p)) {
                // (OVS reports it and goes on: no error for the
                // translation.)
                self.note(
                    indent + 1,
                    &format!("can't use unknown port {p} in flow sample action"),
                );
                return;
            }
            output_port = p;
        }
        self.commit();
        let p = u32::from(probability);
        self.odp.push(DpAction::Sample(flowpath_odp::FlowSample {
            probability: (p << 16) | p,
            of_probability: probability,
            collector_set_id,
            obs_domain_id,
            obs_point_id,
            output_port,
            direction: direction.code(),
        }));
    }

    /// True when `p` is a port of the bridge: LOCAL, one of its ports
    /// (any but 0 when the tables know no port list, as when `flowpath
    /// run`'s rules name none).
    fn is_port(&self, p: u32) -> bool {
        let ports = self.tables.ports();
        p != 0 && (p == crate::action::OFPP_LOCAL || ports.is_empty() || ports.contains(&p))
    }

    /// Outputs and where they go: ports, `IN_PORT`, `ALL`/`FLOOD`, the
    /// controller, `NORMAL`, queues.
    pub(super) fn output_action(&mut self, a: &Action, indent: u32) -> Step {
        match *a {
            Action::Output(port) => {
                if port == self.flow.in_port() {
                    self.note(indent + 1, "skipping output to input port");
                } else {
                    self.output(port);
                }
            }
            Action::InPort => {
                let p = self.flow.in_port();
                // (An in_port a load changed may name no port: as OVS,
                // nothing is output.)
                if self.is_port(p) {
                    self.output(p);
                } else {
                    self.note(
                        indent + 1,
                        &format!("no port {p} on the bridge: nothing output"),
                    );
                }
            }
            Action::OutputTrunc { port, max_len } => {
                if port == self.flow.in_port() {
                    self.note(indent + 1, "skipping output to input port");
                } else {
                    // As OVS: trunc(N) comes before the commit.
                    self.odp.push(DpAction::Trunc(max_len));
                    self.output(port);
                }
            }
            Action::All | Action::Flood => {
                let in_port = self.flow.in_port();
                // FLOOD leaves out the ports with NO_FLOOD set; ALL does not.
                let skip = if matches!(a, Action::Flood) {
                    crate::tables::port_config::NO_FLOOD
                } else {
                    0
                };
                let ports: Vec<u32> = self
                    .tables
                    .ports()
                    .iter()
                    .copied()
                    .filter(|p| *p != in_port && self.tables.port_config(*p) & skip == 0)
                    .collect();
                for p in ports {
                    self.output(p);
                }
            }
            Action::Controller {
                max_len,
                reason,
                id,
                pause,
                userdata,
                ..
            } => {
                // A plain one is OpenFlow's output to CONTROLLER: its
                // reason comes from where it runs.
                let reason = if a.is_plain_controller() {
                    if self.in_bucket {
                        4
                    } else if self.in_action_set {
                        3
                    } else {
                        1
                    }
                } else {
                    reason
                };
                self.packet_in_with(reason, id, max_len, userdata);
                if pause {
                    // As OVS: the translation freezes here; the rest (this
                    // level's actions left and every level's above, the
                    // action set, the stack, the registers) waits for the
                    // controller to send the packet back with the
                    // continuation (the freeze ends with no
                    // recirculation: `finish_freezing`).
                    self.note(indent + 1, "pausing: the rest waits for the controller");
                    self.pausing = Some(self.odp.len() - 1);
                    self.freezing = Some(None);
                }
            }
            Action::OutputReg { src } => {
                let port = self.read_subfield(src).unwrap_or(0);
                // As OVS: a number that is not one of the bridge's ports
                // outputs nothing.
                match port_of(port).filter(|a| !matches!(*a, Action::Output(p) if !self.is_port(p)))
                {
                    Some(a) => return self.output_action(&a, indent),
                    None => self.note(
                        indent + 1,
                        &format!("output port {port} is out of range or not a port"),
                    ),
                }
            }
            Action::Normal => self.xlate_normal(indent + 1),
            // As OVS: a queue action makes the priority significant
            // whether or not an output follows.
            Action::SetQueue(q) => {
                self.priority_significant();
                self.flow.set_skb_priority(q);
            }
            Action::PopQueue => {
                self.priority_significant();
                self.flow.set_skb_priority(self.orig.skb_priority());
            }
            Action::Enqueue { port, queue } => {
                self.priority_significant();
                if port == self.flow.in_port() {
                    self.note(indent + 1, "skipping output to input port");
                } else {
                    let saved = self.flow.skb_priority();
                    self.flow.set_skb_priority(queue);
                    self.output(port);
                    self.flow.set_skb_priority(saved);
                }
            }
            _ => {}
        }
        Step::Next
    }

    /// `bundle` and `multipath`: a port or a link chosen by a hash.
    pub(super) fn choice_action(&mut self, a: &Action, indent: u32) -> Step {
        match *a {
            Action::Bundle {
                fields,
                basis,
                hrw,
                members,
                n,
                load,
            } => {
                let members = &members[..usize::from(n)];
                let chosen = if hrw {
                    // As OVS's: the hash's fields significant when
                    // there is a choice; of the live members, the one
                    // whose hash_2words(index, hash) is highest (the
                    // first on ties).
                    if members.len() > 1 {
                        self.mask_hash_fields(fields);
                    }
                    let h = flowpath_flow::ovs_hash::hash_fields(&self.flow, fields, basis);
                    let mut best: Option<(u16, u32)> = None;
                    for (i, &p) in members.iter().enumerate() {
                        if self.port_live(u32::from(p)) {
                            let w = flowpath_flow::ovs_hash::hash_2words(i as u32, h);
                            if best.is_none_or(|(_, b)| w > b) {
                                best = Some((p, w));
                            }
                        }
                    }
                    best.map(|(p, _)| p)
                } else {
                    members
                        .iter()
                        .copied()
                        .find(|&p| self.port_live(u32::from(p)))
                };
                match (load, chosen) {
                    // bundle_load: OFPP_NONE when no member is live.
                    (Some(dst), c) => {
                        let v = u128::from(c.unwrap_or(0xffff));
                        self.set_field(dst.field, v << dst.ofs, dst.mask(), false);
                    }
                    (None, Some(p)) if u32::from(p) == self.flow.in_port() => {
                        self.note(indent + 1, "skipping output to input port");
                    }
                    (None, Some(p)) => self.output(u32::from(p)),
                    (None, None) => self.note(indent + 1, "no live bundle member: drop"),
                }
            }
            Action::Multipath {
                fields,
                basis,
                alg,
                n_links,
                arg,
                dst,
            } => {
                self.mask_hash_fields(fields);
                let h = flowpath_flow::ovs_hash::hash_fields(&self.flow, fields, basis);
                let link = multipath_link(h, alg, n_links, arg);
                self.set_field(dst.field, u128::from(link) << dst.ofs, dst.mask(), false);
            }
            _ => {}
        }
        Step::Next
    }

    /// What changes the walk: groups, resubmits, `goto_table`, the action
    /// set, `check_pkt_larger`, `learn`, `conjunction`, `fin_timeout`.
    pub(super) fn control_action(&mut self, a: &Action, at: &At<'_>) -> Step {
        let At {
            i,
            actions,
            write_set,
            table,
            indent,
        } = *at;
        match *a {
            Action::Group(id) => {
                // Groups nest (a bucket may send to a group): they count
                // towards the resubmit and depth limits.
                if !self.enter_resubmit() {
                    return Step::Stop;
                }
                self.depth += 1;
                self.xlate_group(id, table);
                self.depth -= 1;
                if self.freezing.is_some() {
                    // The group froze to recirculate (a datapath hash
                    // to compute, or L3 to parse): it runs again then.
                    self.unroll(&actions[i..], write_set, table);
                    return Step::Stop;
                }
            }
            Action::ClearActions => self.action_set.clear(),
            // A frozen translation's marker: the rule's table and
            // cookie again (flowpath's thawed levels carry their table).
            Action::UnrollXlate { cookie, .. } => self.cookie = cookie,
            Action::WriteActions => self.action_set.extend_from_slice(write_set),
            Action::Resubmit { port, table: t } => {
                let target = t.unwrap_or(table);
                if !self.enter_resubmit() {
                    return Step::Stop;
                }
                // A change of in_port by the resubmitted rule's actions
                // stays, as in OVS.
                self.depth += 1;
                self.xlate_table(target, port);
                self.depth -= 1;
            }
            Action::GotoTable(t) => {
                if !self.enter_resubmit() {
                    return Step::Stop;
                }
                self.xlate_table(t, None);
                return Step::Stop;
            }
            // A conjunctive flow is never the classifier's answer: its
            // clauses only make the `conj_id` flow match.
            Action::Conjunction { .. } | Action::Note(_) => {}
            Action::Learn(id) => self.learn(id, indent),
            // As OVS 3.1: nw_proto becomes significant (whether the
            // packet can carry a FIN); the timeouts come down outside
            // translation, from the megaflows' TCP flags (the learned
            // flows' in the slow path, the rules' in the revalidator).
            Action::FinTimeout { .. } => {
                let mut m = self.wc.to_key();
                m.set_nw_proto(0xff);
                self.wc = FlowMask::from_key(&m);
            }
            Action::CheckPktLarger { len, dst } => {
                // As OVS: the rest of this list runs in both branches,
                // then this list ends (the caller's continues).
                let rest = actions.get(i + 1..).unwrap_or(&[]);
                self.check_pkt_larger(len, dst, rest, write_set, table);
                return Step::Stop;
            }
            _ => {}
        }
        Step::Next
    }

    /// Field writes: `set_field`, `load`, `move`, the stack, TTLs, VLAN
    /// tags, metadata.
    pub(super) fn fields_action(&mut self, a: &Action, indent: u32) -> Step {
        match *a {
            Action::SetField {
                field,
                value,
                mask,
                legacy,
            } => self.set_field(field, value, mask, legacy),
            Action::DecTtl | Action::DecTtlIds { .. } => {
                let packet_ins = match *a {
                    Action::DecTtlIds { n, .. } => usize::from(n),
                    _ => 1,
                };
                // As OVS 3.1: the TTL and nw_proto become significant
                // whatever the packet (an ARP packet's megaflow gets
                // arp_op and nw_ttl); only IP packets are changed.
                let mut m = self.wc.to_key();
                m.set_nw_ttl(0xff);
                m.set_nw_proto(0xff);
                self.wc = FlowMask::from_key(&m);
                if !self.flow.is_ip_any() {
                    return Step::Next;
                }
                let ttl = self.flow.nw_ttl();
                if ttl > 1 {
                    self.flow.set_nw_ttl(ttl - 1);
                } else {
                    let v = if self.flow.is_ipv4() { 4 } else { 6 };
                    self.note(indent + 1, &format!("IPv{v} decrement TTL exception"));
                    // As OVS: the packet goes to the controller (reason
                    // "invalid TTL") and this table's remaining actions
                    // are skipped.
                    self.commit();
                    for k in 0..packet_ins {
                        let id = match *a {
                            Action::DecTtlIds { ids, .. } => ids[k],
                            _ => 0,
                        };
                        self.packet_in(2, id, u16::MAX);
                    }
                    return Step::Stop;
                }
            }
            Action::PushVlan(tpid) => {
                // Existing tags become significant (they move inward).
                let mut m = self.wc.to_key();
                if self.flow.vlan_tci() & VLAN_CFI != 0 {
                    m.set_vlan_tci(0xffff);
                    if self.flow.vlan_tci_inner() & VLAN_CFI != 0 {
                        m.set_vlan_tci_inner(0xffff);
                    }
                }
                self.wc = FlowMask::from_key(&m);
                self.flow.set_vlan_tci_inner(self.flow.vlan_tci());
                self.flow.set_vlan_tci(VLAN_CFI);
                self.flow_tpid = [tpid, self.flow_tpid[0]];
                self.tag_src = [None, self.tag_src[0]];
            }
            Action::PopVlan => {
                let mut m = self.wc.to_key();
                if self.flow.vlan_tci_inner() & VLAN_CFI != 0 {
                    m.set_vlan_tci_inner(0xffff);
                }
                self.wc = FlowMask::from_key(&m);
                self.flow.set_vlan_tci(self.flow.vlan_tci_inner());
                self.flow.set_vlan_tci_inner(0);
                self.flow_tpid = [self.flow_tpid[1], 0];
                self.tag_src = [self.tag_src[1], None];
            }
            Action::ModVlanVid(vid) => self.set_vlan(0x0fff, vid & 0x0fff, true),
            Action::ModVlanPcp(pcp) => self.set_vlan(0xe000, u16::from(pcp & 7) << 13, true),
            Action::Load { dst, value } => {
                self.set_field(dst.field, value << dst.ofs, dst.mask(), false)
            }
            Action::Move { src, dst } => {
                // As OVS: both ends' bits become significant; nothing
                // is copied when either lacks its prerequisites (only
                // possible in a group bucket).
                if !self.prereqs_ok(dst.field) {
                    self.note(indent + 1, "skipped: the packet lacks the destination");
                    return Step::Next;
                }
                match self.read_subfield(src) {
                    Some(v) => self.move_to(dst, v),
                    None => self.note(indent + 1, "skipped: the packet lacks the source"),
                }
            }
            Action::Push(sf) => {
                let v = self.read_subfield(sf).unwrap_or(0);
                self.stack.push(v);
            }
            Action::Pop(sf) => match self.stack.pop() {
                Some(v) => {
                    if self.prereqs_ok(sf.field) {
                        self.move_to(sf, v);
                    }
                }
                None => self.note(indent + 1, "stack underflow: nothing popped"),
            },
            Action::WriteMetadata { value, mask } => {
                let md = FieldId::Metadata.info();
                md.set_regs_masked(&mut self.regs, u128::from(value), u128::from(mask));
            }
            _ => {}
        }
        Step::Next
    }

    /// MPLS: push, pop, label/TC/TTL writes, TTL decrement.
    pub(super) fn mpls_action(&mut self, a: &Action, indent: u32) -> Step {
        match *a {
            Action::PushMpls(ethertype) => {
                let n = self.count_mpls_labels();
                if n == 0 {
                    self.commit();
                } else if n >= MPLS_MAX_LABELS {
                    self.error = Some(format!(
                        "dropping packet on which an MPLS push action can't be performed \
                         as it would have more MPLS LSEs than the {MPLS_MAX_LABELS} supported"
                    ));
                    return Step::Stop;
                }
                self.push_mpls(n, ethertype);
            }
            Action::PopMpls(ethertype) => {
                let n = self.count_mpls_labels();
                if self.pop_mpls(n, ethertype) {
                    if !is_mpls(ethertype) {
                        self.was_mpls = true;
                    }
                } else if n >= MPLS_MAX_LABELS {
                    self.error = Some(format!(
                        "dropping packet on which an MPLS pop action can't be performed \
                         as it has more MPLS LSEs than the {MPLS_MAX_LABELS} supported"
                    ));
                    return Step::Stop;
                }
            }
            Action::SetMplsLabel(label) => self.set_mpls_bits(0xffff_f000, label << 12),
            Action::SetMplsTc(tc) => self.set_mpls_bits(0xe00, u32::from(tc) << 9),
            Action::SetMplsTtl(ttl) => self.set_mpls_bits(0xff, u32::from(ttl)),
            Action::DecMplsTtl => {
                // As OVS: an expired TTL goes to the controller, and
                // this list's remaining actions are skipped, also (with
                // no packet-in) for a packet that is not MPLS.
                if is_mpls(self.flow.dl_type()) {
                    let lse = self.flow.mpls_lse0();
                    let ttl = lse & 0xff;
                    self.or_lse_mask(0, 0xff);
                    if ttl > 1 {
                        self.flow.set_mpls_lse0((lse & !0xff) | (ttl - 1));
                        return Step::Next;
                    }
                    self.packet_in(2, 0, u16::MAX);
                }
                self.note(indent + 1, "MPLS decrement TTL exception");
                return Step::Stop;
            }
            _ => {}
        }
        Step::Next
    }
}
