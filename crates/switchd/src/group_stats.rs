//! Group statistics: each group's and each bucket's packet and byte
//! counters and the time the group was added (OpenFlow's group
//! statistics, `ovs-ofctl dump-group-stats`).
//!
//! Counters are credited as rule counters are: a translation records the
//! groups a megaflow went through and the bucket taken in each (every
//! bucket of an `all` or `indirect` group), and the revalidator pushes the
//! megaflow's packet and byte deltas to them. Nothing is counted per
//! packet.
//!
//! As Open vSwitch: a group that is modified (replaced, or a bucket
//! inserted or removed) starts its counters again from 0 and keeps its
//! age; a group deleted and added again is a new group.
//!
//! Threads: owned by the control side with the rules (behind the switch's
//! state lock).

use flowpath_ofproto::group::Group;
use std::collections::HashMap;
use std::time::Instant;

/// One group's counters.
#[derive(Clone, Debug)]
pub struct GroupStats {
    /// Unique for the switch's lifetime and new whenever the counters
    /// restart: credits translated against an older version of the group
    /// do not reach it.
    pub uid: u64,
    /// When the group was added.
    pub added: Instant,
    /// Packets that went through the group.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// `(packets, bytes)` of each bucket, in the group's bucket order.
    pub buckets: Vec<(u64, u64)>,
}

/// Packets and bytes to credit to a group (and one or every bucket).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupDelta {
    /// The group id.
    pub group: u32,
    /// The [`GroupStats::uid`] the translation saw.
    pub uid: u64,
    /// The bucket's index in the group (`None`: every bucket).
    pub bucket: Option<u32>,
    /// Packets.
    pub packets: u64,
    /// Bytes.
    pub bytes: u64,
}

/// The counters of every group.
#[derive(Clone, Debug)]
pub struct GroupCounters {
    by_id: HashMap<u32, GroupStats>,
    next_uid: u64,
}

impl Default for GroupCounters {
    fn default() -> Self {
        GroupCounters {
            by_id: HashMap::new(),
            next_uid: 1,
        }
    }
}

impl GroupCounters {
    fn fresh(&mut self, g: &Group, added: Instant) -> GroupStats {
        let uid = self.next_uid;
        self.next_uid += 1;
        GroupStats {
            uid,
            added,
            packets: 0,
            bytes: 0,
            buckets: vec![(0, 0); g.buckets.len()],
        }
    }

    /// Follows a new group table: counters for groups that are new, none
    /// for groups that are gone; a group whose number of buckets changed
    /// starts again (as modified).
    pub fn sync(&mut self, groups: &[Group], now: Instant) {
        let ids: std::collections::HashSet<u32> = groups.iter().map(|g| g.id).collect();
        self.by_id.retain(|id, _| ids.contains(id));
        for g in groups {
            let restart = match self.by_id.get(&g.id) {
                None => Some(now),
                Some(s) if s.buckets.len() != g.buckets.len() => Some(s.added),
                Some(_) => None,
            };
            if let Some(added) = restart {
                let s = self.fresh(g, added);
                self.by_id.insert(g.id, s);
            }
        }
    }

    /// The groups `ids` of `groups` were modified: their counters start
    /// again from 0, their age stays.
    pub fn modified(&mut self, groups: &[Group], ids: &[u32]) {
        for g in groups.iter().filter(|g| ids.contains(&g.id)) {
            let added = self.by_id.get(&g.id).map_or_else(Instant::now, |s| s.added);
            let s = self.fresh(g, added);
            self.by_id.insert(g.id, s);
        }
    }

    /// Group `id`'s counters.
    pub fn get(&self, id: u32) -> Option<&GroupStats> {
        self.by_id.get(&id)
    }

    /// The uid of each group's counters, by group id.
    pub fn uids(&self) -> HashMap<u32, u64> {
        self.by_id.iter().map(|(id, s)| (*id, s.uid)).collect()
    }

    /// Adds `deltas` to the groups (and buckets) they name; a delta for a
    /// group that is gone or whose counters restarted since is ignored.
    pub fn credit(&mut self, deltas: &[GroupDelta]) {
        for d in deltas {
            let Some(s) = self.by_id.get_mut(&d.group).filter(|s| s.uid == d.uid) else {
                continue;
            };
            s.packets += d.packets;
            s.bytes += d.bytes;
            let one = d.bucket.map(|b| b as usize);
            for (k, b) in s.buckets.iter_mut().enumerate() {
                if one.is_none_or(|o| o == k) {
                    b.0 += d.packets;
                    b.1 += d.bytes;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowpath_ofproto::group::parse_groups;

    fn groups(text: &str) -> Vec<Group> {
        parse_groups(text, None).unwrap()
    }

    fn delta(g: &GroupCounters, group: u32, bucket: Option<u32>, p: u64) -> GroupDelta {
        GroupDelta {
            group,
            uid: g.get(group).unwrap().uid,
            bucket,
            packets: p,
            bytes: p * 100,
        }
    }

    #[test]
    fn credits_groups_and_buckets() {
        let gs = groups(
            "group_id=1,type=select,bucket=output:2,bucket=output:3\n\
             group_id=2,type=all,bucket=output:2,bucket=output:3\n",
        );
        let mut c = GroupCounters::default();
        c.sync(&gs, Instant::now());
        let d = [
            delta(&c, 1, Some(1), 3),
            delta(&c, 1, Some(0), 2),
            delta(&c, 2, None, 4),
            // A bucket the group does not have counts for the group only.
            delta(&c, 1, Some(7), 1),
        ];
        c.credit(&d);
        let s1 = c.get(1).unwrap();
        assert_eq!((s1.packets, s1.bytes), (6, 600));
        assert_eq!(s1.buckets, vec![(2, 200), (3, 300)]);
        let s2 = c.get(2).unwrap();
        assert_eq!((s2.packets, s2.bytes), (4, 400));
        assert_eq!(s2.buckets, vec![(4, 400), (4, 400)]);
    }

    #[test]
    fn modify_restarts_counters_and_keeps_age_delete_forgets() {
        let gs = groups("group_id=1,type=all,bucket=output:2\n");
        let t0 = Instant::now();
        let mut c = GroupCounters::default();
        c.sync(&gs, t0);
        let old = delta(&c, 1, None, 5);
        c.credit(&[old]);
        assert_eq!(c.get(1).unwrap().packets, 5);
        // Unchanged table: the counters stay.
        c.sync(&gs, t0 + std::time::Duration::from_secs(1));
        assert_eq!(c.get(1).unwrap().packets, 5);
        c.modified(&gs, &[1]);
        let s = c.get(1).unwrap();
        assert_eq!((s.packets, s.added), (0, t0));
        // Credits translated against the old group do not count.
        c.credit(&[old]);
        assert_eq!(c.get(1).unwrap().packets, 0);
        // Deleted and added again: a new group.
        c.sync(&[], t0);
        assert!(c.get(1).is_none());
        let t1 = t0 + std::time::Duration::from_secs(2);
        c.sync(&gs, t1);
        assert_eq!(c.get(1).unwrap().added, t1);
        c.credit(&[old]);
        assert_eq!(c.get(1).unwrap().packets, 0);
    }
}
