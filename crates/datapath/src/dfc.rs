//! DFC: the datapath flow cache proposed on ovs-dev (Jan Scheurich, 2017,
//! "dpif-netdev: Refactor datapath flow cache"; rebased with the Cuckoo
//! Distributor series in 2018).
//!
//! What: 1M entries (default), directly indexed by the low 20 bits of the
//! packet hash, each naming the megaflow that packets with those hash bits
//! last hit. A hit is confirmed by a masked compare of the packet key
//! against the megaflow's (key, mask).
//!
//! Why: direct mapping is the cheapest possible lookup (one 4-byte read and
//! one megaflow compare). The table is large, so thrashing is rare and
//! every dpcls hit (and every installed upcall) inserts immediately; this
//! also accelerates short-lived flows. In the proposal a DFC hit promotes
//! the flow into the EMC with probability 1/N (the pipeline does that),
//! and the EMC shrinks to a 1-way 16K cache for the few elephant flows
//! ([`crate::config::Config::dfc_proposal`]).
//!
//! flowpath stores a 32-bit megaflow index per entry (the proposal stored a
//! pointer), so 1M entries take 4 MB.
//!
//! Invariants: `EMPTY` marks an empty entry; a non-empty entry may name a
//! dead or reused megaflow slot (checked on use).
//!
//! Threads: one per datapath worker.

use crate::batch::BATCH_SIZE;
use crate::hugepage::HugeVec;
use crate::megaflow::{MegaflowRef, MegaflowTable};
use flowpath_flow::FlowKey;

/// Default number of entries (the proposal: 1 << 20).
pub const DFC_DEFAULT_ENTRIES: usize = 1 << 20;
const EMPTY: u32 = u32::MAX;

/// The datapath flow cache. See the module documentation.
#[derive(Clone, Debug)]
pub struct Dfc {
    flows: HugeVec<u32>,
    mask: u32,
}

impl Dfc {
    /// An empty DFC of `entries` entries (a power of two).
    pub fn new(entries: usize) -> Self {
        assert!(
            entries.is_power_of_two(),
            "DFC entries must be a power of two"
        );
        Dfc {
            flows: HugeVec::new(entries, EMPTY),
            mask: entries as u32 - 1,
        }
    }

    /// Bytes of its tables.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.flows)
    }

    /// Number of entries.
    pub fn entries(&self) -> usize {
        self.flows.len()
    }

    /// Empties the cache.
    pub fn clear(&mut self) {
        self.flows.iter_mut().for_each(|f| *f = EMPTY);
    }

    /// Looks up every packet of `todo`; confirmed hits go to `out`;
    /// returns their bitmap. First pass: read every packet's entry; second
    /// pass: confirm by masked compare.
    #[inline]
    pub fn lookup_batch(
        &self,
        keys: &[FlowKey],
        hashes: &[u32],
        todo: u32,
        table: &MegaflowTable,
        out: &mut [MegaflowRef; BATCH_SIZE],
    ) -> u32 {
        // Pass 1: every packet's entry.
        let mut idx = [EMPTY; BATCH_SIZE];
        let mut m = todo;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            idx[i] = self.flows[(hashes[i] & self.mask) as usize];
        }
        // Pass 1b: start loading every megaflow's hot line (liveness, key,
        // actions) so the batch's misses overlap.
        let mut m = todo;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            table.prefetch(idx[i]);
        }
        // Pass 2: liveness.
        let mut live = 0u32;
        let mut refs = [MegaflowRef::NONE; BATCH_SIZE];
        let mut m = todo;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            if let Some(r) = table.live_at(idx[i]) {
                refs[i] = r;
                live |= 1 << i;
            }
        }
        // Pass 3: confirm by masked compare.
        let mut found = 0;
        let mut m = live;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            if table.matches(idx[i], &keys[i]) {
                out[i] = refs[i];
                found |= 1 << i;
            }
        }
        found
    }

    /// Records that the packet with `hash` hit megaflow slot `flow`.
    #[inline]
    pub fn insert(&mut self, hash: u32, flow: u32) {
        self.flows[(hash & self.mask) as usize] = flow;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::packet_hash;
    use crate::testutil::key;
    use flowpath_flow::FlowMask;

    #[test]
    fn against_oracle_with_collisions_and_invalidation() {
        let mut t = MegaflowTable::new();
        let mut m = FlowMask::catchall();
        m.w[0] = 0xffff_ffff;
        m.w[1] = 0xffff_fff0;
        let refs: Vec<_> = (0..100u32)
            .map(|i| t.insert(&key(i << 4), &m, vec![], 0).unwrap().0)
            .collect();
        let mut d = Dfc::new(64);
        let lookup = |d: &Dfc, t: &MegaflowTable, k: &FlowKey| {
            let mut out = [MegaflowRef::NONE; BATCH_SIZE];
            (d.lookup_batch(std::slice::from_ref(k), &[packet_hash(k)], 1, t, &mut out) == 1)
                .then_some(out[0])
        };
        for i in 0..1600u32 {
            let k = key(i);
            let want = refs[(i >> 4) as usize];
            match lookup(&d, &t, &k) {
                Some(r) => assert_eq!(r, want),
                None => {
                    d.insert(packet_hash(&k), want.index);
                    assert_eq!(lookup(&d, &t, &k), Some(want));
                }
            }
        }
        let k = key(17);
        d.insert(packet_hash(&k), refs[1].index);
        assert!(lookup(&d, &t, &k).is_some());
        t.remove(refs[1]);
        assert_eq!(lookup(&d, &t, &k), None, "removed megaflow misses");
        // Slot reused by a megaflow that does not match: still a miss.
        t.insert(&key(1000 << 4), &m, vec![], 0).unwrap();
        assert_eq!(lookup(&d, &t, &k), None);
        d.clear();
        assert_eq!(d.entries(), 64);
    }
}
