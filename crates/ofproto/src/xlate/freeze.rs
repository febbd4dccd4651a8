//! Freezing and thawing a translation (OVS's freeze/unroll): the actions
//! each level had left are kept with the action set, the stack and the
//! registers under a recirculation id (a recirculation, or a paused
//! packet-in's continuation), and a later translation resumes from them.

use super::*;

impl<L: Lookup> Ctx<'_, '_, L> {
    /// Keeps `rest` (the actions a level had left when translation froze)
    /// for after recirculation.
    ///
    /// As OVS's `freeze_unroll_actions`: before the first action that may
    /// send a packet-in (which names the rule's table and cookie) an
    /// `UnrollXlate` marker keeps them, unless the last marker of this
    /// freeze has the same; `write_metadata` becomes the `set_field` it
    /// means.
    pub(super) fn unroll(&mut self, rest: &[Action], write_set: &[Action], table: u8) {
        if rest.is_empty() {
            return;
        }
        let mut actions = Vec::with_capacity(rest.len() + 1);
        for a in rest {
            let may_packet_in = matches!(
                a,
                Action::Output(_)
                    | Action::OutputTrunc { .. }
                    | Action::InPort
                    | Action::All
                    | Action::Flood
                    | Action::Normal
                    | Action::Controller { .. }
                    | Action::Group(_)
                    | Action::DecTtl
                    | Action::DecTtlIds { .. }
                    | Action::DecMplsTtl
                    | Action::Resubmit { table: None, .. }
            );
            if may_packet_in && self.unrolled != Some((table, self.cookie)) {
                self.unrolled = Some((table, self.cookie));
                actions.push(Action::UnrollXlate {
                    table,
                    cookie: self.cookie,
                });
            }
            actions.push(match *a {
                Action::WriteMetadata { value, mask } => Action::SetField {
                    field: FieldId::Metadata,
                    value: u128::from(value & mask),
                    mask: u128::from(mask),
                    legacy: false,
                },
                a => a,
            });
        }
        self.frozen.push(Segment {
            actions,
            write_set: write_set.to_vec(),
            table,
        });
    }

    /// Ends a freeze (at the top of the pipeline, at the end of a group
    /// bucket or of a `check_pkt_larger` branch, as OVS): commits the
    /// packet's changes, keeps the state under a recirculation id and emits
    /// `[hash(...),]recirc(ID)`. Nothing when not freezing.
    pub(super) fn finish_freezing(&mut self) {
        let Some(hash) = self.freezing.take() else {
            return;
        };
        self.unrolled = None;
        self.commit();
        let state = FrozenState {
            segments: std::mem::take(&mut self.frozen),
            action_set: self.action_set.clone(),
            stack: self.stack.clone(),
            regs: self.regs,
            in_port: self.flow.in_port(),
            table: 0,
            conntracked: self.conntracked,
        };
        let paused_at = self.pausing.map(|_| {
            state
                .segments
                .last()
                .map_or((self.cur_table, self.cookie), |seg| {
                    seg.actions
                        .iter()
                        .find_map(|a| match *a {
                            Action::UnrollXlate { table, cookie } => Some((table, cookie)),
                            _ => None,
                        })
                        .unwrap_or((seg.table, self.cookie))
                })
        });
        let Some(id) = crate::recirc::alloc(state) else {
            self.error = Some("Failed to allocate recirculation id".into());
            return;
        };
        if let Some(at) = self.pausing.take() {
            // A pause: the controller action carries the frozen state;
            // nothing recirculates, and nothing after it runs (a pause in
            // a clone or a bucket ends the translation there, as OVS).
            self.paused = true;
            // As OVS, the packet-in names the table and cookie of the
            // outermost level frozen (where the translation is back at
            // when the freeze ends).
            let (t, k) = paused_at.unwrap_or((self.cur_table, self.cookie));
            if let Some(DpAction::Controller {
                cont,
                table,
                cookie,
                ..
            }) = self.odp.get_mut(at)
            {
                *cont = id;
                *table = t;
                *cookie = k;
            }
            if self.tracing {
                self.note(
                    self.depth,
                    &format!("continuation {id:#x}: translation frozen"),
                );
            }
            return;
        }
        // The hash the datapath computes (as OVS's userspace datapath):
        // sym_l4 of the packet as it is now; l4 from the received
        // packet's 5-tuple hash (its RSS hash).
        let dp_hash = hash.map(|(symmetric, basis)| {
            self.odp.push(DpAction::Hash { symmetric, basis });
            if symmetric {
                flowpath_flow::ovs_hash::symmetric_l3l4(&self.flow, basis, false)
            } else {
                let rss = flowpath_flow::ovs_hash::hash_5tuple(&self.orig, 0);
                flowpath_flow::ovs_hash::hash_int(rss, basis)
            }
        });
        self.odp.push(DpAction::Recirc(id));
        if self.tracing {
            self.note(self.depth, &format!("recirc({id:#x}): translation frozen"));
        }
        let mut packet = self.flow;
        packet.set_in_port(self.orig.in_port());
        packet.set_recirc_id(0);
        packet.set_dp_hash(0);
        self.recirculations.push(Recirculation {
            id,
            packet,
            dp_hash,
            ct: None,
        });
    }

    /// Resumes the translation frozen under recirculation id `id` (the
    /// packet is the recirculated one: parsed again, with its `dp_hash`):
    /// the metadata, stack and action set come back, then the actions left
    /// run, innermost level first; without any, a lookup in its table.
    pub(super) fn thaw(&mut self, id: u32) {
        let Some(st) = crate::recirc::find(id) else {
            self.note(
                0,
                &format!("     >>>> Recirculation context not found for ID {id:x} <<<<"),
            );
            self.error = Some("No recirculation context".into());
            return;
        };
        self.regs = st.regs;
        self.stack = st.stack.clone();
        self.action_set = st.action_set.clone();
        self.flow.set_in_port(st.in_port);
        // As OVS: only a `ct(table=N)`'s pass sees the tracker's result.
        self.conntracked = st.conntracked;
        if !st.conntracked {
            super::ct::clear_ct(&mut self.flow);
        }
        self.cur_table = st.table;
        if self.tracing {
            self.note(0, &format!("thaw (recirc_id {id:#x})"));
            self.note(1, &format!("Resuming from table {}", st.table));
            if !st.action_set.is_empty() {
                let set = crate::action::format_actions(&st.action_set);
                self.note(1, &format!("Restoring action set {set}"));
            }
        }
        if st.segments.is_empty() {
            self.xlate_table(st.table, None);
            return;
        }
        for (k, seg) in st.segments.iter().enumerate() {
            if self.error.is_some() {
                return;
            }
            if self.freezing.is_some() {
                self.frozen.extend(st.segments[k..].iter().cloned());
                return;
            }
            if self.tracing {
                let acts = crate::action::format_actions(&seg.actions);
                self.note(1, &format!("Restoring actions {acts}"));
            }
            self.cur_table = seg.table;
            self.do_actions(&seg.actions, &seg.write_set, seg.table);
        }
    }
}
