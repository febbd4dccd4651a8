//! SMC: the signature match cache, as in OVS 2.10+ (`smc-enable`).
//!
//! What: 1M entries (default) in 4-way buckets. A packet's hash picks the
//! bucket (low bits) and gives a 16-bit signature (high 16 bits); each
//! entry maps a signature to a megaflow index. A signature match is only a
//! candidate: the hit is confirmed by a masked compare of the packet key
//! against the megaflow's (key, mask), so a wrong or stale entry costs a
//! compare, never a wrong answer.
//!
//! Why: at ~8 bytes per flow (vs 128+ for an EMC entry) it covers a million
//! flows in a few MB, so it catches the many-flows traffic that thrashes
//! the EMC, and costs one bucket read plus one megaflow compare instead of
//! a ranked subtable search. It is filled on every dpcls hit and every
//! installed upcall (insertion is cheap and the table large).
//!
//! Layout: a bucket is `{ sigs: [u16; 4], flows: [u32; 4] }` padded to 32
//! bytes and 32-byte aligned, so one bucket is one cache-line access.
//! flowpath stores 32-bit megaflow indices (OVS stores 16-bit ones, which
//! caps it at 64K megaflows while the flow limit is 200K).
//!
//! Insertion: if the signature is already in the bucket its entry is
//! updated; else an empty entry (or one naming a dead megaflow) is used;
//! else a random entry is replaced.
//!
//! Invariants: an entry with `flow == EMPTY` is empty; a non-empty entry
//! may name a dead or reused megaflow slot (checked on use).
//!
//! Threads: one per datapath worker.

use crate::batch::BATCH_SIZE;
use crate::hash::Rng;
use crate::hugepage::HugeVec;
use crate::megaflow::{MegaflowRef, MegaflowTable};
use crate::prefetch::prefetch_indexed;
use flowpath_flow::FlowKey;

/// Default number of entries (OVS: `SMC_ENTRIES` = 1 << 20).
pub const SMC_DEFAULT_ENTRIES: usize = 1 << 20;
/// Entries per bucket (OVS: `SMC_ENTRY_PER_BUCKET`).
pub const SMC_WAYS: usize = 4;
const EMPTY: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
#[repr(C, align(32))]
struct Bucket {
    sigs: [u16; SMC_WAYS],
    flows: [u32; SMC_WAYS],
}

const EMPTY_BUCKET: Bucket = Bucket {
    sigs: [0; SMC_WAYS],
    flows: [EMPTY; SMC_WAYS],
};

/// The signature match cache. See the module documentation.
#[derive(Clone, Debug)]
pub struct Smc {
    buckets: HugeVec<Bucket>,
    mask: u32,
    rng: Rng,
}

#[inline(always)]
fn sig_of(hash: u32) -> u16 {
    (hash >> 16) as u16
}

impl Smc {
    /// An empty SMC of `entries` entries (a power of two ≥ 4).
    pub fn new(entries: usize, seed: u64) -> Self {
        assert!(
            entries.is_power_of_two() && entries >= SMC_WAYS,
            "SMC entries must be a power of two >= 4"
        );
        let n = entries / SMC_WAYS;
        Smc {
            buckets: HugeVec::new(n, EMPTY_BUCKET),
            mask: n as u32 - 1,
            rng: Rng::new(seed),
        }
    }

    /// Bytes of its tables.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.buckets)
    }

    /// Number of entries.
    pub fn entries(&self) -> usize {
        self.buckets.len() * SMC_WAYS
    }

    /// Empties the cache.
    pub fn clear(&mut self) {
        self.buckets.iter_mut().for_each(|b| *b = EMPTY_BUCKET);
    }

    /// Looks up every packet of `todo`; hits (confirmed by masked compare)
    /// go to `out`; returns their bitmap. First pass: read every packet's
    /// bucket and match signatures; second pass: confirm candidates.
    #[inline]
    pub fn lookup_batch(
        &self,
        keys: &[FlowKey],
        hashes: &[u32],
        todo: u32,
        table: &MegaflowTable,
        out: &mut [MegaflowRef; BATCH_SIZE],
    ) -> u32 {
        // Pass 0: start loading every packet's bucket.
        prefetch_indexed(&self.buckets, hashes, self.mask, todo);
        let mut cand = [0u8; BATCH_SIZE];
        let mut bidx = [0usize; BATCH_SIZE];
        let mut m = todo;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            let h = hashes[i];
            let b = (h & self.mask) as usize;
            let sig = sig_of(h);
            let sigs = &self.buckets[b].sigs;
            let mut c = 0u8;
            for (w, s) in sigs.iter().enumerate() {
                c |= u8::from(*s == sig) << w;
            }
            cand[i] = c;
            bidx[i] = b;
        }
        // Pass 2: prefetch the first candidate's compare line so the cache
        // misses of all packets overlap.
        let mut m = todo;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            if cand[i] != 0 {
                table.prefetch(self.buckets[bidx[i]].flows[cand[i].trailing_zeros() as usize]);
            }
        }
        // Pass 3: confirm by masked compare (other candidates only when the
        // first fails: two flows with one signature in one bucket).
        let mut found = 0;
        let mut m = todo;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            let mut c = cand[i];
            let bucket = &self.buckets[bidx[i]];
            while c != 0 {
                let w = c.trailing_zeros() as usize;
                c &= c - 1;
                let f = bucket.flows[w];
                if let Some(r) = table.live_at(f) {
                    if table.matches(f, &keys[i]) {
                        out[i] = r;
                        found |= 1 << i;
                        break;
                    }
                }
            }
        }
        found
    }

    /// Records that the packet with `hash` hit megaflow slot `flow`.
    pub fn insert(&mut self, hash: u32, flow: u32, table: &MegaflowTable) {
        let b = &mut self.buckets[(hash & self.mask) as usize];
        let sig = sig_of(hash);
        let mut free = None;
        for w in 0..SMC_WAYS {
            if b.sigs[w] == sig && b.flows[w] != EMPTY {
                b.flows[w] = flow;
                return;
            }
            if free.is_none() && table.live_at(b.flows[w]).is_none() {
                free = Some(w);
            }
        }
        let w = free.unwrap_or(self.rng.next_u32() as usize % SMC_WAYS);
        b.sigs[w] = sig;
        b.flows[w] = flow;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::packet_hash;
    use flowpath_flow::FlowMask;

    fn key(i: u32) -> FlowKey {
        let mut k = FlowKey::zero();
        k.set_in_port(1);
        k.set_nw_src(i);
        k.set_nw_dst(i.wrapping_mul(7));
        k
    }

    fn lookup(s: &Smc, t: &MegaflowTable, k: &FlowKey) -> Option<MegaflowRef> {
        let mut out = [MegaflowRef::NONE; BATCH_SIZE];
        (s.lookup_batch(std::slice::from_ref(k), &[packet_hash(k)], 1, t, &mut out) == 1)
            .then_some(out[0])
    }

    /// Megaflows on nw_src/24 (nw_dst wildcarded), one per /24.
    fn setup() -> (MegaflowTable, Vec<MegaflowRef>) {
        let mut t = MegaflowTable::new();
        let mut m = FlowMask::catchall();
        m.w[0] = 0xffff_ffff;
        m.w[1] = 0xffff_ff00;
        let refs = (0..64u32)
            .map(|i| t.insert(&key(i << 8), &m, vec![], 0).unwrap().0)
            .collect();
        (t, refs)
    }

    #[test]
    fn against_oracle_with_eviction() {
        let (t, refs) = setup();
        // Small cache: 16 entries for 64 × 16 keys → heavy replacement.
        let mut s = Smc::new(16, 3);
        for round in 0..2 {
            for i in 0..64u32 * 16 {
                let k = key(i << 4);
                if let Some(r) = lookup(&s, &t, &k) {
                    // Oracle: the megaflow that matches the key.
                    assert!(t.get(r).unwrap().matches(&k));
                    assert_eq!(r, refs[(i >> 4) as usize]);
                } else {
                    s.insert(packet_hash(&k), refs[(i >> 4) as usize].index, &t);
                    assert!(
                        lookup(&s, &t, &k).is_some(),
                        "just inserted (round {round})"
                    );
                }
            }
        }
    }

    #[test]
    fn other_keys_of_the_megaflow_hit_and_removal_misses() {
        let (mut t, refs) = setup();
        let mut s = Smc::new(SMC_DEFAULT_ENTRIES, 3);
        let k = key(5 << 8 | 1);
        s.insert(packet_hash(&k), refs[5].index, &t);
        assert_eq!(lookup(&s, &t, &k), Some(refs[5]));
        // Another key with the same hash bits but outside the megaflow would
        // fail the masked compare: simulate by pointing the entry elsewhere.
        s.insert(packet_hash(&k), refs[6].index, &t);
        assert_eq!(lookup(&s, &t, &k), None, "signature hit, compare fails");
        s.insert(packet_hash(&k), refs[5].index, &t);
        t.remove(refs[5]);
        assert_eq!(lookup(&s, &t, &k), None, "dead megaflow");
        s.clear();
        assert_eq!(s.entries(), SMC_DEFAULT_ENTRIES);
    }
}
