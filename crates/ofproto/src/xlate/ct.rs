//! Translating `ct(...)` and `ct_clear`, as OVS's
//! `compose_conntrack_action` and `compose_ct_clear_action`.
//!
//! A `ct` first commits the packet's pending header changes (the tracker
//! sees the packet as the actions before left it), runs its `exec(...)`
//! writes to `ct_mark`/`ct_label` (they become the datapath action's
//! `mark=`/`label=` with the bits written as mask), and emits the
//! datapath `ct(...)`. With `table=N` the translation then freezes a
//! state that resumes in table N and emits `recirc(ID)` (the tracked
//! packet comes back with its `ct_*` fields set; a thaw keeps them), and
//! goes on — "forks" — with the rest of the actions. Either way the rest
//! of this translation sees the packet untracked: its `ct_*` fields are
//! cleared (they are known only to the recirculated pass).

use super::CtRecirc;
use super::*;
use crate::ct::CtZone;
use flowpath_odp::{CtAction, CtNat};

/// Clears every connection-tracking field of `k` (untracked).
pub(super) fn clear_ct(k: &mut FlowKey) {
    k.set_ct_state(0);
    k.set_ct_zone(0);
    k.set_ct_mark(0);
    k.set_ct_label(0);
    k.set_ct_nw_proto(0);
    k.set_ct_nw_src(0);
    k.set_ct_nw_dst(0);
    k.set_ct_ipv6_src(0);
    k.set_ct_ipv6_dst(0);
    k.set_ct_tp_src(0);
    k.set_ct_tp_dst(0);
}

impl<L: Lookup> Ctx<'_, '_, L> {
    pub(super) fn ct_action(&mut self, id: u32, indent: u32) -> Step {
        let Some(ct) = crate::ct::get(id) else {
            self.error = Some(format!("unknown ct action {id}"));
            return Step::Stop;
        };
        let zone = match ct.zone {
            CtZone::Imm(z) => z,
            // (Registers are never in a megaflow; another field's bits
            // become significant.)
            CtZone::Field(sf) => self.read_subfield(sf).unwrap_or(0) as u16,
        };
        self.commit();
        let (mut mark, mut mark_mask, mut label, mut label_mask) = (0u32, 0u32, 0u128, 0u128);
        for a in &ct.exec {
            let (field, value, mask) = match *a {
                Action::SetField {
                    field, value, mask, ..
                } => (field, value, mask),
                Action::Load { dst, value } => (dst.field, value << dst.ofs, dst.mask()),
                Action::Move { src, dst } => {
                    let v = self.read_subfield(src).unwrap_or(0);
                    (dst.field, v << dst.ofs, dst.mask())
                }
                _ => continue,
            };
            match field {
                FieldId::CtMark => {
                    let m = mask as u32;
                    mark = (mark & !m) | (value as u32 & m);
                    mark_mask |= m;
                }
                FieldId::CtLabel => {
                    label = (label & !mask) | (value & mask);
                    label_mask |= mask;
                }
                _ => {}
            }
        }
        // (As OVS: the writes reach the flow, which a trace's next pass
        // starts from.)
        self.flow
            .set_ct_mark((self.flow.ct_mark() & !mark_mask) | (mark & mark_mask));
        self.flow
            .set_ct_label((self.flow.ct_label() & !label_mask) | (label & label_mask));
        let action = CtAction {
            zone,
            // As OVS: the datapath's force_commit instead of commit.
            commit: ct.commit && !ct.force,
            force: ct.force,
            mark: (mark_mask != 0).then_some((mark, mark_mask)),
            label: (label_mask != 0).then_some((label, label_mask)),
            helper: ct.helper(),
            nat: ct.nat,
        };
        self.odp.push(DpAction::Ct(action));
        if let Some(table) = ct.table {
            self.ct_recirculate(table, zone, ct.nat, indent);
        }
        clear_ct(&mut self.flow);
        self.conntracked = false;
        if self.tracing {
            self.note(
                indent + 1,
                "Sets the packet to an untracked state, and clears all the conntrack fields.",
            );
        }
        Step::Next
    }

    /// `ct(table=N)`'s recirculation: a frozen state with no actions left
    /// that looks the tracked packet up in table `table`.
    fn ct_recirculate(&mut self, table: u8, zone: u16, nat: Option<CtNat>, indent: u32) {
        let state = FrozenState {
            segments: Vec::new(),
            action_set: self.action_set.clone(),
            stack: self.stack.clone(),
            regs: self.regs,
            in_port: self.flow.in_port(),
            table,
            conntracked: true,
        };
        let Some(id) = crate::recirc::alloc(state) else {
            self.error = Some("Failed to allocate recirculation id".into());
            return;
        };
        self.odp.push(DpAction::Recirc(id));
        if self.tracing {
            self.note(indent + 1, &format!("recirc({id:#x})"));
        }
        let mut packet = self.flow;
        packet.set_in_port(self.orig.in_port());
        packet.set_recirc_id(0);
        packet.set_ct_zone(zone);
        self.recirculations.push(Recirculation {
            id,
            packet,
            dp_hash: None,
            ct: Some(CtRecirc { table, zone, nat }),
        });
    }

    /// `ct_clear`: as OVS, only where the packet is tracked (see
    /// `conntracked`); elsewhere it does nothing, and emits nothing.
    pub(super) fn ct_clear_action(&mut self) -> Step {
        if !self.conntracked {
            return Step::Next;
        }
        self.conntracked = false;
        clear_ct(&mut self.flow);
        self.odp.push(DpAction::CtClear);
        Step::Next
    }
}
