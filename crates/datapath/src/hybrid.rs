//! Hybrid second level: one signature table whose entries name either a
//! megaflow (as the DFC) or a subtable (as the Cuckoo Distributor).
//!
//! What: the design the DFC/CD thread on ovs-dev (seed 002) ended with and
//! nobody shipped. Buckets of [`HYBRID_WAYS`] 32-bit entries, one 64-byte
//! line each; an entry packs a 12-bit signature with its target (as the
//! CD, 4 bytes an entry: the table has the CD's footprint); two candidate
//! buckets per packet as the CD (the primary from the packet hash's low
//! bits, the alternative derived from the primary and the signature). A
//! target is either
//! - a **megaflow** slot (below 2^19; a slot beyond gets a subtable entry):
//!   a hit is confirmed by one masked compare against
//!   the megaflow's hot line (the DFC's cheap hit; counted as a DFC hit), or
//! - a **subtable** of the packet's in_port dpcls: the packet is looked up
//!   in that one subtable (the CD's directed lookup; counted as a CD hit),
//!   falling back to the ranked search when it misses there.
//!
//! Which one an entry holds is chosen per entry: a new entry names the
//! megaflow while the datapath has at most [`Hybrid::megaflow_limit`] live
//! megaflows (entries / 8: a megaflow entry stays valid and its megaflow's
//! line is likely cached), and the subtable beyond that (many megaflows:
//! most entries are touched once, and a subtable entry survives its
//! megaflow being replaced or evicted). A subtable entry that is hit again
//! — the access locality that makes a megaflow entry pay — is promoted to
//! the megaflow it found ([`Hybrid::promote`]).
//!
//! Why: the DFC's hits are the cheapest (no subtable probe) but it is
//! direct-mapped, so colliding flows evict each other; the CD's entries are
//! way-associative (better hit rate and footprint) but every hit costs a
//! subtable probe. One table with both kinds of entries has the CD's
//! associativity and the DFC's hit cost for the flows that recur.
//!
//! Default size: 64K buckets × 16 = 1M entries, 4 MB (as the DFC and the
//! CD), on 2 MB pages ([`crate::hugepage`]). A 12-bit signature makes a
//! false match of one of a bucket's 16 entries 0.4 % likely; it costs one
//! compare (megaflow) or one directed lookup (subtable) and is never
//! wrong.
//!
//! Invariants: an entry of 0 is empty (signatures are never 0); a megaflow target may
//! name a dead or reused slot and a subtable target a stale subtable (both
//! caught by the compare on use).
//!
//! Threads: one per datapath worker.

use crate::batch::BATCH_SIZE;
use crate::dpcls::NO_SUBTABLE;
use crate::hash::Rng;
use crate::hugepage::HugeVec;
use crate::megaflow::{MegaflowRef, MegaflowTable};
use crate::prefetch::prefetch_indexed;
use crate::simd::match16;
use flowpath_flow::FlowKey;

/// Default number of buckets (16 entries each: 1M entries, 4 MB).
pub const HYBRID_DEFAULT_BUCKETS: usize = 1 << 16;
/// Entries per bucket (sixteen 32-bit entries fill one line).
pub const HYBRID_WAYS: usize = 16;
/// Entry layout: `[subtable?:1][signature:12][payload:19]`; 0 = empty.
const SUB: u32 = 1 << 31;
const SIG_SHIFT: u32 = 19;
const SIG_MASK: u32 = 0xfff;
const PAYLOAD: u32 = (1 << SIG_SHIFT) - 1;
/// Megaflow slots from this index on cannot be named by an entry (they get
/// subtable entries).
pub const HYBRID_MAX_MEGAFLOW_INDEX: u32 = PAYLOAD;

#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Bucket([u32; HYBRID_WAYS]);

const EMPTY_BUCKET: Bucket = Bucket([0; HYBRID_WAYS]);

/// What one batch lookup found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HybridFound {
    /// Packets confirmed in a megaflow (their refs are in `out`).
    pub megaflow: u32,
    /// Packets directed to one subtable (ids in `subs`, entry positions in
    /// `pos` for [`Hybrid::promote`]).
    pub subtable: u32,
}

/// The hybrid second-level table. See the module documentation.
#[derive(Clone, Debug)]
pub struct Hybrid {
    buckets: HugeVec<Bucket>,
    mask: u32,
    rng: Rng,
    megaflow_limit: usize,
}

/// The 12-bit signature: hash bits 20..32 (the bucket comes from the low
/// bits), never 0 so that an empty entry matches no packet.
#[inline(always)]
fn sig_of(hash: u32) -> u32 {
    match hash >> 20 {
        0 => 1,
        s => s,
    }
}

impl Hybrid {
    /// An empty table of `buckets` buckets (a power of two).
    pub fn new(buckets: usize, seed: u64) -> Self {
        assert!(
            buckets.is_power_of_two(),
            "hybrid buckets must be a power of two"
        );
        Hybrid {
            buckets: HugeVec::new(buckets, EMPTY_BUCKET),
            mask: buckets as u32 - 1,
            rng: Rng::new(seed),
            megaflow_limit: buckets * HYBRID_WAYS / 8,
        }
    }

    /// Bytes of its tables.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.buckets)
    }

    /// Number of entries.
    pub fn entries(&self) -> usize {
        self.buckets.len() * HYBRID_WAYS
    }

    /// Up to this many live megaflows, new entries name megaflows; beyond,
    /// subtables.
    pub fn megaflow_limit(&self) -> usize {
        self.megaflow_limit
    }

    /// Empties the table.
    pub fn clear(&mut self) {
        self.buckets.fill(EMPTY_BUCKET);
    }

    #[inline(always)]
    fn buckets_of(&self, hash: u32) -> (usize, usize, u32) {
        let sig = sig_of(hash);
        let b1 = hash & self.mask;
        let b2 = (b1 ^ sig.wrapping_mul(0x5bd1_e995) >> 7) & self.mask;
        (b1 as usize, b2 as usize, sig)
    }

    /// Bitmap of bucket `b`'s entries with signature `sig` (0: the empty
    /// ones).
    #[inline(always)]
    fn sig_matches(&self, b: usize, sig: u32) -> u32 {
        match16(&self.buckets[b].0, SIG_MASK << SIG_SHIFT, sig << SIG_SHIFT)
    }

    /// Looks up every packet of `todo`. Packets whose entry names a
    /// megaflow that matches go to `out` (bitmap `megaflow`); packets whose
    /// entry names a subtable get its id in `subs` and the entry's
    /// position in `pos` (bitmap `subtable`). The rest found nothing.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn lookup_batch(
        &self,
        keys: &[FlowKey],
        hashes: &[u32],
        todo: u32,
        table: &MegaflowTable,
        out: &mut [MegaflowRef; BATCH_SIZE],
        subs: &mut [u16; BATCH_SIZE],
        pos: &mut [u32; BATCH_SIZE],
    ) -> HybridFound {
        // Pass 0: start loading every packet's primary bucket.
        prefetch_indexed(&self.buckets, hashes, self.mask, todo);
        // Pass 1: the entry (primary bucket, else alternative); start
        // loading the megaflows named.
        let mut target = [0u32; BATCH_SIZE];
        let mut has = 0u32;
        let mut m = todo;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            let (b1, b2, sig) = self.buckets_of(hashes[i]);
            let (b, c) = match self.sig_matches(b1, sig) {
                0 => (b2, self.sig_matches(b2, sig)),
                c => (b1, c),
            };
            if c == 0 {
                continue;
            }
            let w = c.trailing_zeros() as usize;
            let e = self.buckets[b].0[w];
            target[i] = e;
            pos[i] = (b * HYBRID_WAYS + w) as u32;
            has |= 1 << i;
            if e & SUB == 0 {
                table.prefetch(e & PAYLOAD);
            }
        }
        // Pass 2: confirm megaflow entries; hand subtable entries on.
        let mut found = HybridFound::default();
        let mut m = has;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            let e = target[i];
            let t = e & PAYLOAD;
            if e & SUB != 0 {
                subs[i] = t as u16;
                found.subtable |= 1 << i;
            } else if let Some(r) = table.live_at(t) {
                if table.matches(t, &keys[i]) {
                    out[i] = r;
                    found.megaflow |= 1 << i;
                }
            }
        }
        found
    }

    /// Starts loading the primary buckets of the packets of `todo`, which
    /// are about to be [`Hybrid::insert`]ed.
    #[inline]
    pub fn prefetch_for_insert(&self, hashes: &[u32], todo: u32) {
        prefetch_indexed(&self.buckets, hashes, self.mask, todo);
    }

    /// Records that the packet with `hash` matched megaflow slot `flow` in
    /// subtable `sub`, with `live` megaflows in the datapath.
    pub fn insert(&mut self, hash: u32, flow: u32, sub: u16, live: usize) {
        let (b1, b2, sig) = self.buckets_of(hash);
        let t = if (live <= self.megaflow_limit || sub == NO_SUBTABLE)
            && flow < HYBRID_MAX_MEGAFLOW_INDEX
        {
            flow
        } else if sub != NO_SUBTABLE {
            SUB | u32::from(sub)
        } else {
            return;
        };
        for b in [b1, b2] {
            let m = self.sig_matches(b, sig);
            if m != 0 {
                self.set(b, m.trailing_zeros() as usize, sig, t);
                return;
            }
        }
        for b in [b1, b2] {
            let m = self.sig_matches(b, 0);
            if m != 0 {
                self.set(b, m.trailing_zeros() as usize, sig, t);
                return;
            }
        }
        let w = self.rng.next_u32() as usize % HYBRID_WAYS;
        self.set(b1, w, sig, t);
    }

    #[inline(always)]
    fn set(&mut self, b: usize, w: usize, sig: u32, t: u32) {
        self.buckets[b].0[w] = (t & SUB) | sig << SIG_SHIFT | (t & PAYLOAD);
    }

    /// Turns the subtable entry at `pos` (from [`Hybrid::lookup_batch`],
    /// for the packet with `hash`) into an entry for megaflow slot `flow`,
    /// which the directed lookup found: the flow recurred. Does nothing if
    /// the entry has been reused meanwhile.
    #[inline]
    pub fn promote(&mut self, hash: u32, pos: u32, flow: u32) {
        let (b, w) = (pos as usize / HYBRID_WAYS, pos as usize % HYBRID_WAYS);
        let sig = sig_of(hash);
        if flow >= HYBRID_MAX_MEGAFLOW_INDEX {
            return;
        }
        if let Some(e) = self.buckets.get_mut(b).map(|bk| &mut bk.0[w]) {
            if (*e >> SIG_SHIFT) & SIG_MASK == sig && *e & SUB != 0 {
                *e = sig << SIG_SHIFT | flow;
            }
        }
    }

    /// Entries in use, and how many of them name a subtable (scans the
    /// table: for reports and tests, not the packet path).
    pub fn occupancy(&self) -> (usize, usize) {
        let (mut used, mut subs) = (0, 0);
        for b in self.buckets.iter() {
            for &e in &b.0 {
                if e != 0 {
                    used += 1;
                    subs += usize::from(e & SUB != 0);
                }
            }
        }
        (used, subs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::packet_hash;
    use crate::testutil::key;
    use flowpath_flow::FlowMask;

    struct Found {
        flow: Option<MegaflowRef>,
        sub: Option<(u16, u32)>,
    }

    fn lookup(h: &Hybrid, t: &MegaflowTable, k: &FlowKey) -> Found {
        let mut out = [MegaflowRef::NONE; BATCH_SIZE];
        let mut subs = [0u16; BATCH_SIZE];
        let mut pos = [0u32; BATCH_SIZE];
        let f = h.lookup_batch(
            std::slice::from_ref(k),
            &[packet_hash(k)],
            1,
            t,
            &mut out,
            &mut subs,
            &mut pos,
        );
        Found {
            flow: (f.megaflow == 1).then_some(out[0]),
            sub: (f.subtable == 1).then_some((subs[0], pos[0])),
        }
    }

    #[test]
    fn megaflow_entries_against_oracle_with_invalidation() {
        let mut t = MegaflowTable::new();
        let mut m = FlowMask::catchall();
        m.w[0] = 0xffff_ffff;
        m.w[1] = 0xffff_fff0;
        let refs: Vec<_> = (0..100u32)
            .map(|i| t.insert(&key(i << 4), &m, vec![], 0).unwrap())
            .collect();
        let mut h = Hybrid::new(128, 1);
        assert_eq!(h.entries(), 2048);
        assert!(t.len() <= h.megaflow_limit());
        for i in 0..1600u32 {
            let k = key(i);
            let (want, sub) = refs[(i >> 4) as usize];
            let f = lookup(&h, &t, &k);
            assert!(f.sub.is_none(), "few megaflows: megaflow entries only");
            match f.flow {
                Some(r) => {
                    assert_eq!(r, want, "a hit is the right megaflow");
                }
                None => {
                    h.insert(packet_hash(&k), want.index, sub, t.len());
                    assert_eq!(lookup(&h, &t, &k).flow, Some(want), "found after insert");
                }
            }
        }
        let k = key(17);
        h.insert(packet_hash(&k), refs[1].0.index, refs[1].1, t.len());
        assert!(lookup(&h, &t, &k).flow.is_some());
        t.remove(refs[1].0);
        assert_eq!(lookup(&h, &t, &k).flow, None, "removed megaflow misses");
        h.clear();
        assert_eq!(h.occupancy(), (0, 0));
    }

    #[test]
    fn subtable_entries_beyond_the_limit_and_promotion() {
        let t = MegaflowTable::new();
        let mut h = Hybrid::new(4, 1);
        let limit = h.megaflow_limit();
        assert_eq!(limit, 8);
        let k = key(9);
        let hash = packet_hash(&k);
        h.insert(hash, 77, 3, limit + 1);
        let f = lookup(&h, &t, &k);
        assert!(f.flow.is_none());
        let (sub, pos) = f.sub.expect("subtable entry");
        assert_eq!(sub, 3);
        assert_eq!(h.occupancy(), (1, 1));
        // Promotion with another packet's hash (entry reused) does nothing.
        h.promote(packet_hash(&key(10)) ^ 0xffff_0000, pos, 77);
        assert_eq!(h.occupancy(), (1, 1));
        h.promote(hash, pos, 77);
        assert_eq!(h.occupancy(), (1, 0), "now a megaflow entry");
        // Update in place, and a full tiny table still finds fresh inserts.
        h.insert(hash, 5, 2, limit + 1);
        assert_eq!(lookup(&h, &t, &k).sub.map(|s| s.0), Some(2));
        for i in 0..500u32 {
            let k = key(1000 + i);
            h.insert(packet_hash(&k), 1, 4, limit + 1);
            assert_eq!(lookup(&h, &t, &k).sub.map(|s| s.0), Some(4));
        }
        assert_eq!(h.occupancy().0, h.entries());
    }
}
