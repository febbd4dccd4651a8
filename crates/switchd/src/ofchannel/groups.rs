//! Groups over the OpenFlow channel: `OFPT_GROUP_MOD` changes the group
//! table with Open vSwitch's semantics, and the GROUP_DESC, GROUP and
//! GROUP_FEATURES statistics describe it.
//!
//! - add: a group with that id must not exist (`OFPGMFC_GROUP_EXISTS`),
//!   its id must be at most `OFPG_MAX` (`OFPGMFC_INVALID_GROUP`);
//! - modify: the group must exist (`OFPGMFC_UNKNOWN_GROUP`); it is
//!   replaced; OpenFlow 1.5's insert-bucket and remove-bucket keep its
//!   type and selection method and change its buckets around
//!   `command_bucket_id` (`OFPGMFC_UNKNOWN_BUCKET`,
//!   `OFPGMFC_BUCKET_EXISTS`);
//! - delete: the group (every group for `OFPG_ALL`; an unknown one is no
//!   error) and, as Open vSwitch, every flow that sends to it;
//! - a bucket may send to a group that does not exist (yet), and a group
//!   other groups' buckets send to may be deleted: translation drops at
//!   the missing group, as Open vSwitch.
//!
//! Every change is all or nothing and reaches the PMDs as flow changes
//! do. Group statistics carry each group's reference count (the flows
//! that send to it), its age and the packets and bytes that went through
//! it and each of its buckets (see [`crate::group_stats`]: a modified
//! group's counters start again from 0).

use super::*;
use crate::rules::RuleSet;
use flowpath_ofproto::action::Action;
use flowpath_ofproto::group::{Bucket, Group};
use flowpath_openflow::msg::{
    GroupCommand, GroupMod, BUCKET_ALL, BUCKET_FIRST, BUCKET_LAST, OFPG_ALL, OFPG_MAX,
};

fn sends_to(acts: &[Action], ids: &[u32]) -> bool {
    acts.iter()
        .any(|a| matches!(a, Action::Group(g) if ids.contains(g)))
}

fn rule_sends_to(r: &Rule, ids: &[u32]) -> bool {
    sends_to(&r.actions, ids) || sends_to(&r.write_actions, ids)
}

/// `old`'s buckets with `new` inserted at `at` (OpenFlow 1.5's
/// insert-bucket).
fn insert_buckets(old: &[Bucket], new: Vec<Bucket>, at: u32) -> Result<Vec<Bucket>, OfError> {
    let pos = match at {
        BUCKET_FIRST => 0,
        BUCKET_LAST => old.len(),
        id => {
            old.iter()
                .position(|b| b.id == id)
                .ok_or(ofe::GMFC_UNKNOWN_BUCKET)?
                + 1
        }
    };
    if new.iter().any(|n| old.iter().any(|o| o.id == n.id)) {
        return Err(ofe::GMFC_BUCKET_EXISTS);
    }
    let mut out = old[..pos].to_vec();
    out.extend(new);
    out.extend_from_slice(&old[pos..]);
    Ok(out)
}

/// `old`'s buckets less the one `at` names (OpenFlow 1.5's
/// remove-bucket).
fn remove_buckets(old: &[Bucket], at: u32) -> Result<Vec<Bucket>, OfError> {
    let skip = match at {
        BUCKET_ALL => return Ok(Vec::new()),
        BUCKET_FIRST => 0,
        BUCKET_LAST => old.len().saturating_sub(1),
        id => old
            .iter()
            .position(|b| b.id == id)
            .ok_or(ofe::GMFC_UNKNOWN_BUCKET)?,
    };
    let mut out = old.to_vec();
    if skip < out.len() {
        out.remove(skip);
    }
    Ok(out)
}

/// A group statistics reply of `stype` (the Nicira stats `nx` in
/// OpenFlow 1.0).
fn reply(version: u8, xid: u32, stype: u16, nx: u32) -> msg::StatsReply {
    if version == ofh::OFP10 {
        msg::StatsReply::new(version, xid, msg::stats::VENDOR, Some(nx))
    } else {
        msg::StatsReply::new(version, xid, stype, None)
    }
}

/// Applies a group_mod to `rules` (all or nothing: a group's flows go
/// only with it, and nothing else can fail once they are gone); the
/// flows deleted with their groups come back.
pub(in crate::ofchannel) fn apply_group_mod(
    rules: &mut RuleSet,
    gm: GroupMod,
) -> Result<(flowmod::Applied, Vec<u32>), OfError> {
    let mut groups: Vec<Group> = rules.groups().to_vec();
    let id = gm.group.id;
    let existing = groups.iter().position(|g| g.id == id);
    let mut deleted: Vec<u32> = Vec::new();
    // An existing group that is replaced or changes buckets.
    let modified = existing.is_some() && gm.command != GroupCommand::Delete;
    match gm.command {
        GroupCommand::Delete => {
            deleted = if id == OFPG_ALL {
                groups.iter().map(|g| g.id).collect()
            } else {
                existing.map(|_| vec![id]).unwrap_or_default()
            };
            groups.retain(|g| !deleted.contains(&g.id));
        }
        GroupCommand::Add | GroupCommand::Modify | GroupCommand::AddOrModify => {
            if id > OFPG_MAX {
                return Err(ofe::GMFC_INVALID_GROUP);
            }
            match (existing, gm.command) {
                (Some(_), GroupCommand::Add) => return Err(ofe::GMFC_GROUP_EXISTS),
                (None, GroupCommand::Modify) => return Err(ofe::GMFC_UNKNOWN_GROUP),
                (Some(i), _) => groups[i] = gm.group,
                (None, _) => groups.push(gm.group),
            }
        }
        GroupCommand::InsertBucket | GroupCommand::RemoveBucket => {
            let i = existing.ok_or(ofe::GMFC_UNKNOWN_GROUP)?;
            let old = &groups[i];
            let buckets = if gm.command == GroupCommand::InsertBucket {
                insert_buckets(&old.buckets, gm.group.buckets, gm.command_bucket_id)?
            } else {
                remove_buckets(&old.buckets, gm.command_bucket_id)?
            };
            let mut g = old.clone();
            g.buckets = buckets;
            msg::refresh_dp_hash(&mut g);
            groups[i] = g;
        }
    }
    groups.sort_by_key(|g| g.id);
    let mut applied = flowmod::Applied {
        reason: flowmod::REASON_GROUP_DELETE,
        ..Default::default()
    };
    // Flows that send to a deleted group go with it (as OVS).
    if !deleted.is_empty()
        && rules
            .rules()
            .iter()
            .any(|r| rule_sends_to(&r.rule, &deleted))
    {
        applied.removed = rules.delete_where(|r| rule_sends_to(r, &deleted));
    }
    rules
        .set_groups_chained(groups)
        .map_err(|_| ofe::BAC_BAD_OUT_GROUP)?;
    if modified {
        rules.groups_modified(&[id]);
    }
    Ok((applied, deleted))
}

impl Session {
    /// Applies a group_mod (all or nothing) and marks the flow table
    /// for publishing.
    pub(super) fn group_mod(&mut self, gm: GroupMod, xid: u32) -> Result<(), OfError> {
        if self.info.role.load(Ordering::Relaxed) == 3 {
            return Err(ofe::BRC_IS_SECONDARY);
        }
        let (applied, deleted) = apply_group_mod(&mut self.ctl.state().rules, gm)?;
        self.groups_deleted(&deleted);
        self.after_changes(vec![applied], xid);
        Ok(())
    }

    /// Learned flows that send to deleted groups go with them.
    pub(super) fn groups_deleted(&self, deleted: &[u32]) {
        if !deleted.is_empty() {
            self.sh
                .bridge
                .learned
                .remove_where(|r| rule_sends_to(r, deleted));
        }
    }

    /// The GROUP_DESC reply: every group (or group `id`).
    pub(super) fn group_desc(&self, xid: u32, id: u32) -> Result<Vec<Vec<u8>>, OfError> {
        let v = self.version;
        let groups: Vec<Group> = self.ctl.state().rules.groups().to_vec();
        let mut r = reply(v, xid, msg::stats::GROUP_DESC, msg::stats::NXST_GROUP_DESC);
        for g in groups.iter().filter(|g| id == OFPG_ALL || g.id == id) {
            let e = msg::group_desc_entry(v, g).map_err(|_| ofe::BAC_BAD_TYPE)?;
            r.push(&e);
        }
        Ok(r.finish())
    }

    /// The GROUP statistics reply: reference counts (the flows that send
    /// to each group), packet and byte counters of each group and bucket
    /// (as the revalidator last credited them) and each group's age.
    pub(super) fn group_stats(&self, xid: u32, id: u32) -> Vec<Vec<u8>> {
        let v = self.version;
        let st = self.ctl.state();
        let now = std::time::Instant::now();
        let mut r = reply(v, xid, msg::stats::GROUP, msg::stats::NXST_GROUP);
        for g in st
            .rules
            .groups()
            .iter()
            .filter(|g| id == OFPG_ALL || g.id == id)
        {
            let refs = st
                .rules
                .rules()
                .iter()
                .filter(|r| rule_sends_to(&r.rule, &[g.id]))
                .count() as u32;
            let (counters, buckets, age) = match st.rules.group_counters().get(g.id) {
                Some(s) => (
                    (s.packets, s.bytes),
                    s.buckets.clone(),
                    now.saturating_duration_since(s.added),
                ),
                None => ((0, 0), Vec::new(), std::time::Duration::ZERO),
            };
            // (Counters follow the group table: one per bucket.)
            let mut buckets = buckets;
            buckets.resize(g.buckets.len(), (0, 0));
            let duration = (
                u32::try_from(age.as_secs()).unwrap_or(u32::MAX),
                age.subsec_nanos(),
            );
            r.push(&msg::group_stats_entry(
                v, g.id, refs, counters, &buckets, duration,
            ));
        }
        r.finish()
    }

    /// The GROUP_FEATURES reply.
    pub(super) fn group_features(&self, xid: u32) -> Vec<Vec<u8>> {
        let mut r = reply(
            self.version,
            xid,
            msg::stats::GROUP_FEATURES,
            msg::stats::NXST_GROUP_FEATURES,
        );
        r.push(&msg::group_features_body(self.version));
        r.finish()
    }
}
