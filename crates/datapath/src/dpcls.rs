//! dpcls: the megaflow classifier of one in_port.
//!
//! What: tuple space search over [`Subtable`]s, one per distinct megaflow
//! mask. A batch is looked up subtable by subtable, in rank order, each
//! subtable taking the whole set of still-unclassified packets; the search
//! stops as soon as that set is empty.
//!
//! Why ranked: most traffic usually hits few masks. Each subtable counts
//! its hits; [`Dpcls::rerank`] (called by the datapath every
//! `subtable-rerank-interval`, 1000 ms by default as OVS's
//! `dpcls_sort_subtable_vector`) sorts the search order by the hits of the
//! past interval and resets the counters. The number of subtable lookups
//! each hit needed (its subtable's 1-based rank) is accumulated so the
//! datapath can report "avg. subtable lookups per megaflow hit".
//!
//! Subtables live in slots whose index (the subtable id) is stable while
//! the subtable exists; the search order is a separate list of ids. The
//! Cuckoo Distributor and the megaflow table name subtables by id. An empty
//! subtable is removed at once and its slot reused later: a stale id held
//! by the Cuckoo Distributor can then name another mask, which only costs
//! a wasted lookup (every hit is confirmed by a key compare).
//!
//! Megaflows of a dpcls are assumed not to overlap in a way that matters:
//! any megaflow that matches a packet is a correct answer (the slow path
//! guarantees every packet inside a megaflow gets that megaflow's actions).
//!
//! Invariants: `ranked` lists exactly the ids of existing subtables, each
//! once; `rank_of[id]` is its position; `by_mask` maps each existing
//! subtable's mask to its id (install path only: finding a mask's subtable
//! stays O(1) with thousands of masks); no subtable is empty.
//!
//! Threads: owned by one worker.

use crate::batch::BATCH_SIZE;
use crate::subtable::{Duplicate, KeyStore, Probe, Subtable};
use flowpath_flow::{FlowKey, FlowMask};
use std::collections::HashMap;

/// Marks "no subtable" in rank and id arrays.
pub const NO_SUBTABLE: u16 = u16::MAX;

/// Most subtables one classifier holds (ids are `u16`, `NO_SUBTABLE`
/// excluded). Past it, new masks are not installed (the packet still gets
/// its actions): a defence against tuple-space explosion.
pub const MAX_SUBTABLES: usize = NO_SUBTABLE as usize;

/// Why [`Dpcls::insert`] installed nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InsertError {
    /// A megaflow with the same mask and masked key exists: its index.
    Duplicate(u32),
    /// The classifier already has [`MAX_SUBTABLES`] subtables.
    Full,
}

/// One in_port's classifier. See the module documentation.
#[derive(Clone, Debug, Default)]
pub struct Dpcls {
    subtables: Vec<Option<Subtable>>,
    hits: Vec<u64>,
    free: Vec<u16>,
    ranked: Vec<u16>,
    rank_of: Vec<u16>,
    by_mask: HashMap<FlowMask, u16>,
}

impl Dpcls {
    /// An empty classifier.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of subtables.
    pub fn n_subtables(&self) -> usize {
        self.ranked.len()
    }

    /// Number of megaflows over all subtables.
    pub fn n_megaflows(&self) -> usize {
        self.ranked
            .iter()
            .filter_map(|&id| self.subtable(id))
            .map(Subtable::len)
            .sum()
    }

    /// The subtable with id `id`, if it exists.
    #[inline(always)]
    pub fn subtable(&self, id: u16) -> Option<&Subtable> {
        self.subtables.get(id as usize).and_then(Option::as_ref)
    }

    /// The 1-based search position of subtable `id` (what a ranked search
    /// costs to reach it), or `None` if it does not exist.
    #[inline(always)]
    pub fn rank_of(&self, id: u16) -> Option<usize> {
        match self.rank_of.get(id as usize) {
            Some(&r) if r != NO_SUBTABLE => Some(r as usize + 1),
            _ => None,
        }
    }

    /// Subtable ids in search order.
    pub fn ranked(&self) -> &[u16] {
        &self.ranked
    }

    /// Ranked batched lookup: for each packet of `todo` found, writes the
    /// megaflow index to `out` and the subtable id to `out_sub`, and adds
    /// the subtable's rank to `lookups`. Returns the bitmap of hits.
    #[inline]
    pub fn lookup_batch<K: KeyStore>(
        &mut self,
        keys: &[FlowKey],
        todo: u32,
        out: &mut [u32; BATCH_SIZE],
        out_sub: &mut [u16; BATCH_SIZE],
        lookups: &mut u64,
        ks: &K,
    ) -> u32 {
        let mut rem = todo;
        for (pos, &id) in self.ranked.iter().enumerate() {
            if rem == 0 {
                break;
            }
            let Some(st) = self.subtables[id as usize].as_ref() else {
                continue; // unreachable by the `ranked` invariant
            };
            let f = st.lookup_batch(keys, rem, out, ks);
            if f != 0 {
                let n = u64::from(f.count_ones());
                self.hits[id as usize] += n;
                *lookups += n * (pos as u64 + 1);
                let mut m = f;
                while m != 0 {
                    let i = m.trailing_zeros() as usize;
                    m &= m - 1;
                    out_sub[i] = id;
                }
                rem &= !f;
            }
        }
        todo & !rem
    }

    /// Looks each packet of `todo` up in the subtable `subs[i]` only (the
    /// Cuckoo Distributor's directed lookup), all packets' first halves
    /// before any second half. Hits count towards their subtable's rank.
    #[inline]
    pub fn lookup_directed<K: KeyStore>(
        &mut self,
        subs: &[u16; BATCH_SIZE],
        keys: &[FlowKey],
        todo: u32,
        out: &mut [u32; BATCH_SIZE],
        ks: &K,
    ) -> u32 {
        let mut probes = [Probe::NONE; BATCH_SIZE];
        let mut m = todo;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            if let Some(st) = self.subtable(subs[i]) {
                probes[i] = st.probe_start(&keys[i]);
            }
        }
        let mut m = todo;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            if let Some(st) = self.subtable(subs[i]) {
                st.probe_touch(&mut probes[i], ks);
            }
        }
        let mut found = 0;
        let mut m = todo;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            let Some(st) = self.subtable(subs[i]) else {
                continue;
            };
            if let Some(f) = st.probe_finish(&keys[i], probes[i], ks) {
                out[i] = f;
                found |= 1 << i;
                self.hits[subs[i] as usize] += 1;
            }
        }
        found
    }

    /// Looks one key up in rank order; returns (megaflow index, subtable id).
    pub fn lookup_one<K: KeyStore>(&self, key: &FlowKey, ks: &K) -> Option<(u32, u16)> {
        self.ranked.iter().find_map(|&id| {
            self.subtable(id)
                .and_then(|st| st.lookup_one(key, ks))
                .map(|f| (f, id))
        })
    }

    /// The subtable holding megaflows with exactly `mask`, if any.
    pub fn find_subtable(&self, mask: &FlowMask) -> Option<u16> {
        self.by_mask.get(mask).copied()
    }

    /// True when a megaflow with `mask` can be inserted (its subtable
    /// exists, or there is room for one more).
    pub fn has_room_for(&self, mask: &FlowMask) -> bool {
        self.ranked.len() < MAX_SUBTABLES || self.find_subtable(mask).is_some()
    }

    /// Inserts megaflow `flow` (key, mask) into the subtable for `mask`,
    /// creating it (last in rank) if needed; its words go to `ks`. Returns
    /// the subtable id.
    pub fn insert<K: KeyStore>(
        &mut self,
        key: &FlowKey,
        mask: &FlowMask,
        flow: u32,
        ks: &mut K,
    ) -> Result<u16, InsertError> {
        let id = match self.find_subtable(mask) {
            Some(id) => id,
            None if self.ranked.len() < MAX_SUBTABLES => self.add_subtable(mask),
            None => return Err(InsertError::Full),
        };
        let Some(st) = self.subtables[id as usize].as_mut() else {
            return Err(InsertError::Full); // unreachable: id was just found or created
        };
        match st.insert(key, flow, ks) {
            Ok(()) => Ok(id),
            Err(Duplicate(existing)) => {
                if st.is_empty() {
                    self.remove_subtable(id);
                }
                Err(InsertError::Duplicate(existing))
            }
        }
    }

    fn add_subtable(&mut self, mask: &FlowMask) -> u16 {
        let st = Some(Subtable::new(mask));
        let id = if let Some(id) = self.free.pop() {
            self.subtables[id as usize] = st;
            self.hits[id as usize] = 0;
            id
        } else {
            // < MAX_SUBTABLES (checked by the caller), so it fits a u16.
            let id = self.subtables.len();
            self.subtables.push(st);
            self.hits.push(0);
            self.rank_of.push(NO_SUBTABLE);
            id as u16
        };
        self.rank_of[id as usize] = self.ranked.len() as u16;
        self.ranked.push(id);
        self.by_mask.insert(*mask, id);
        id
    }

    fn remove_subtable(&mut self, id: u16) {
        if let Some(st) = self.subtables[id as usize].take() {
            self.by_mask.remove(st.mask());
        }
        self.free.push(id);
        let pos = self.rank_of[id as usize] as usize;
        self.ranked.remove(pos);
        self.rank_of[id as usize] = NO_SUBTABLE;
        for (p, &other) in self.ranked.iter().enumerate().skip(pos) {
            self.rank_of[other as usize] = p as u16;
        }
    }

    /// Removes megaflow `flow` from subtable `id` (its words are read from
    /// `ks`); removes the subtable when it becomes empty. Returns false if
    /// it was not there.
    pub fn remove<K: KeyStore>(&mut self, id: u16, flow: u32, ks: &K) -> bool {
        let Some(st) = self.subtables.get_mut(id as usize).and_then(Option::as_mut) else {
            return false;
        };
        if !st.remove(flow, ks) {
            return false;
        }
        if st.is_empty() {
            self.remove_subtable(id);
        }
        true
    }

    /// Heap bytes held by the subtables and the classifier's own tables.
    pub fn heap_bytes(&self) -> usize {
        let subtables: usize = self
            .subtables
            .iter()
            .flatten()
            .map(Subtable::heap_bytes)
            .sum();
        subtables
            + self.subtables.capacity() * std::mem::size_of::<Option<Subtable>>()
            + self.by_mask.capacity() * (std::mem::size_of::<(FlowMask, u16)>() + 1)
            + (self.hits.capacity() * 8 + self.free.capacity() * 2)
            + (self.ranked.capacity() + self.rank_of.capacity()) * 2
    }

    /// Sorts the search order by hits since the last call (most first;
    /// ties keep their order) and resets the hit counters.
    pub fn rerank(&mut self) {
        let hits = &self.hits;
        let rank_of = &self.rank_of;
        self.ranked.sort_unstable_by_key(|&id| {
            (std::cmp::Reverse(hits[id as usize]), rank_of[id as usize])
        });
        for (p, &id) in self.ranked.iter().enumerate() {
            self.rank_of[id as usize] = p as u16;
        }
        self.hits.iter_mut().for_each(|h| *h = 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subtable::TestKeys as Keys;

    fn mask_bits(w1: u64) -> FlowMask {
        let mut m = FlowMask::catchall();
        m.w[1] = w1;
        m
    }

    fn key(v: u64) -> FlowKey {
        let mut k = FlowKey::zero();
        k.w[1] = v;
        k
    }

    #[test]
    fn subtables_created_ranked_and_removed() {
        let mut c = Dpcls::new();
        let mut ks = Keys::default();
        let a = c.insert(&key(0x01), &mask_bits(0xff), 10, &mut ks).unwrap();
        let b = c
            .insert(&key(0x200), &mask_bits(0xff00), 11, &mut ks)
            .unwrap();
        assert_eq!(c.insert(&key(0x02), &mask_bits(0xff), 12, &mut ks), Ok(a));
        assert_eq!(
            c.insert(&key(0x101), &mask_bits(0xff), 13, &mut ks),
            Err(InsertError::Duplicate(10))
        );
        assert_eq!(c.n_subtables(), 2);
        assert_eq!(c.ranked(), &[a, b]);
        // Hits on b only → b first after rerank.
        let keys = [key(0x200), key(0x2ff)];
        let (mut out, mut sub, mut lk) = ([0; BATCH_SIZE], [0; BATCH_SIZE], 0);
        assert_eq!(
            c.lookup_batch(&keys, 0b11, &mut out, &mut sub, &mut lk, &ks),
            0b11
        );
        assert_eq!((out[0], sub[0], lk), (11, b, 4), "2 lookups each at rank 2");
        c.rerank();
        assert_eq!(c.ranked(), &[b, a]);
        assert_eq!(c.rank_of(b), Some(1));
        lk = 0;
        c.lookup_batch(&keys, 0b11, &mut out, &mut sub, &mut lk, &ks);
        assert_eq!(lk, 2);
        // Removing the last megaflow of b removes b.
        assert!(c.remove(b, 11, &ks));
        assert!(!c.remove(b, 11, &ks));
        assert_eq!(c.n_subtables(), 1);
        assert_eq!(c.rank_of(b), None);
        assert_eq!(c.rank_of(a), Some(1));
        assert_eq!(c.lookup_one(&key(0x1200), &ks), None);
        assert_eq!(c.lookup_one(&key(0x1202), &ks), Some((12, a)));
        let mut subs = [b; BATCH_SIZE];
        assert_eq!(
            c.lookup_directed(&subs, &keys, 0b11, &mut out, &ks),
            0,
            "stale id misses"
        );
        subs[1] = a;
        assert_eq!(
            c.lookup_directed(&subs, &[key(0x1202), key(0x1202)], 0b11, &mut out, &ks),
            0b10
        );
        assert_eq!(out[1], 12);
        assert_eq!(c.n_megaflows(), 2);
    }

    #[test]
    fn subtable_limit_refuses_new_masks_only() {
        let mut c = Dpcls::new();
        let mut ks = Keys::default();
        for i in 0..MAX_SUBTABLES as u64 {
            c.insert(&key(0), &mask_bits(i + 1), i as u32, &mut ks)
                .unwrap();
        }
        let new_mask = mask_bits(1 << 40);
        assert!(!c.has_room_for(&new_mask));
        assert_eq!(
            c.insert(&key(0), &new_mask, 7, &mut ks),
            Err(InsertError::Full)
        );
        assert!(c.has_room_for(&mask_bits(1)));
        assert!(c.insert(&key(1), &mask_bits(1), 9, &mut ks).is_ok());
    }
}
