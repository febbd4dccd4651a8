//! CD: the Cuckoo Distributor proposed on ovs-dev (Yipeng Wang, Intel,
//! 2017, "dpif-netdev: Add Cuckoo Distributor to Accelerate Megaflow
//! Search"; v2 "Cuckoo-Distributor implementation").
//!
//! What: a table of 16-bit signatures, each naming the dpcls subtable that
//! the flow with that signature last hit. A packet whose signature is found
//! is looked up in that one subtable only; if it misses there (signatures
//! are not keys, so false positives happen, and a subtable id may be stale)
//! it falls back to the ranked subtable search.
//!
//! Why: with many subtables hit evenly (high-entropy traffic from a
//! physical port), ranking cannot help and a ranked search costs on
//! average half the subtables per packet; CD makes it about one. When the
//! top-ranked subtable already takes nearly all hits, CD cannot save
//! lookups and only costs its probe, so it switches itself off.
//!
//! Shape (after the v2 patch): two hash functions — the primary bucket is
//! taken from the packet hash's low bits, the alternative bucket is the
//! primary XOR a hash of the signature (as a cuckoo filter, so either
//! bucket can be derived from the other and the signature). Buckets have 8
//! or 16 entries; a bucket's signatures are contiguous (16 × 2 bytes) and
//! followed by its subtable ids, so a 16-way bucket is exactly one 64-byte
//! line (an 8-way bucket half a line) and the signature scan vectorizes.
//! Like v2, a full pair of buckets does not displace entries (the table is
//! a cache: a random entry of the primary bucket is replaced), so only one
//! signature per entry needs storing.
//!
//! Subtable ids are those of the packet's in_port dpcls (the CD is one per
//! datapath; the hash covers in_port, so ports rarely share a signature
//! and a wrong port's id only causes a fallback).
//!
//! Adaptivity: over each interval (`cd-adapt-interval`, 1000 ms by
//! default, time passed in) CD accumulates, for every packet that the
//! dpcls tier decides (CD hits and ranked hits), the rank the matching
//! subtable has in the ranked search — what the ranked search costs for it
//! — and, while active, the lookups it saved (rank − 1 per CD hit) minus
//! the lookups it wasted (directed lookups that missed). At the end of an
//! interval with at least [`CD_MIN_SAMPLES`] samples:
//! - active and (average rank < [`CD_OFF_AVG_RANK`] or net saving < 0):
//!   switch off (the top subtable takes ≳ 95 % of hits, or CD misdirects
//!   more than it saves);
//! - inactive and average rank > [`CD_ON_AVG_RANK`]: switch on.
//!
//! Invariants: a signature of 0 marks an empty entry (real signatures are
//! remapped from 0 to 1).
//!
//! Threads: one per datapath worker.

use crate::batch::BATCH_SIZE;
use crate::dpcls::NO_SUBTABLE;
use crate::hash::Rng;
use crate::hugepage::HugeVec;
use crate::prefetch::prefetch;

/// Default number of buckets (16 entries each: 1M entries, 4 MB).
pub const CD_DEFAULT_BUCKETS: usize = 1 << 16;
/// Default entries per bucket.
pub const CD_DEFAULT_WAYS: usize = 16;
/// Switch off when the average rank of matching subtables falls below this.
pub const CD_OFF_AVG_RANK: f64 = 1.05;
/// Switch on when the average rank of matching subtables exceeds this.
pub const CD_ON_AVG_RANK: f64 = 1.2;
/// Minimum samples in an interval for a decision.
pub const CD_MIN_SAMPLES: u64 = 64;

#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Line([u16; 32]);

/// The Cuckoo Distributor. See the module documentation.
#[derive(Clone, Debug)]
pub struct Cd {
    lines: HugeVec<Line>,
    ways: usize,
    mask: u32,
    rng: Rng,
    active: bool,
    interval_ms: u64,
    next_eval_ms: Option<u64>,
    samples: u64,
    rank_sum: u64,
    saved: u64,
    wasted: u64,
    toggles: u64,
}

/// What the CD measured over its last completed interval.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CdReport {
    /// Whether CD is on.
    pub active: bool,
    /// Times it switched itself on or off.
    pub toggles: u64,
}

#[inline(always)]
fn sig_of(hash: u32) -> u16 {
    match (hash >> 16) as u16 {
        0 => 1,
        s => s,
    }
}

impl Cd {
    /// An empty, active CD with `buckets` buckets (a power of two) of
    /// `ways` (8 or 16) entries, re-evaluating itself every `interval_ms`.
    pub fn new(buckets: usize, ways: usize, interval_ms: u64, seed: u64) -> Self {
        assert!(
            buckets.is_power_of_two(),
            "CD buckets must be a power of two"
        );
        assert!(ways == 8 || ways == 16, "CD ways must be 8 or 16");
        let n_lines = (buckets * ways * 2).div_ceil(32);
        Cd {
            lines: HugeVec::new(n_lines, Line([0; 32])),
            ways,
            mask: buckets as u32 - 1,
            rng: Rng::new(seed),
            active: true,
            interval_ms,
            next_eval_ms: None,
            samples: 0,
            rank_sum: 0,
            saved: 0,
            wasted: 0,
            toggles: 0,
        }
    }

    /// Bytes of its tables.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.lines)
    }

    /// Whether CD is currently used.
    #[inline(always)]
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// Its state.
    pub fn report(&self) -> CdReport {
        CdReport {
            active: self.active,
            toggles: self.toggles,
        }
    }

    /// Number of entries.
    pub fn entries(&self) -> usize {
        (self.mask as usize + 1) * self.ways
    }

    /// Empties the table.
    pub fn clear(&mut self) {
        self.lines.iter_mut().for_each(|l| l.0 = [0; 32]);
    }

    #[inline(always)]
    fn buckets(&self, hash: u32) -> (usize, usize, u16) {
        let sig = sig_of(hash);
        let b1 = hash & self.mask;
        let b2 = (b1 ^ u32::from(sig).wrapping_mul(0x5bd1_e995) >> 7) & self.mask;
        (b1 as usize, b2 as usize, sig)
    }

    /// Flat u16 index of entry `w`'s signature in bucket `b` (its subtable
    /// id is `ways` further).
    #[inline(always)]
    fn at(&self, b: usize, w: usize) -> (usize, usize) {
        let flat = b * self.ways * 2 + w;
        (flat / 32, flat % 32)
    }

    #[inline(always)]
    fn sig_matches(&self, b: usize, sig: u16) -> u32 {
        let (l, o) = self.at(b, 0);
        let sigs = &self.lines[l].0[o..o + self.ways];
        let mut m = 0u32;
        for (w, s) in sigs.iter().enumerate() {
            m |= u32::from(*s == sig) << w;
        }
        m
    }

    #[inline(always)]
    fn sub_at(&self, b: usize, w: usize) -> u16 {
        let (l, o) = self.at(b, w + self.ways);
        self.lines[l].0[o]
    }

    #[inline(always)]
    fn set(&mut self, b: usize, w: usize, sig: u16, sub: u16) {
        let (l, o) = self.at(b, w);
        self.lines[l].0[o] = sig;
        let (l, o) = self.at(b, w + self.ways);
        self.lines[l].0[o] = sub;
    }

    /// For every packet of `todo` whose signature is found, writes the
    /// subtable id to `out` and sets its bit in the returned bitmap.
    #[inline]
    pub fn lookup_batch(&self, hashes: &[u32], todo: u32, out: &mut [u16; BATCH_SIZE]) -> u32 {
        // Pass 0: start loading every packet's primary bucket (the 4 MB
        // table misses the CPU caches with many flows; see `prefetch`).
        let mut m = todo;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            let (b1, _, _) = self.buckets(hashes[i]);
            if let Some(line) = self.lines.get(self.at(b1, 0).0) {
                prefetch(line);
            }
        }
        // Pass 1: primary buckets of all packets (insertion fills the
        // primary bucket first, so most hits are there).
        let mut c1 = [0u32; BATCH_SIZE];
        let mut bk = [0usize; BATCH_SIZE];
        let mut m = todo;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            let (b1, _, sig) = self.buckets(hashes[i]);
            bk[i] = b1;
            c1[i] = self.sig_matches(b1, sig);
        }
        // Pass 2: the subtable id, or the alternative bucket.
        let mut found = 0;
        let mut m = todo;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            let sub = if c1[i] != 0 {
                self.sub_at(bk[i], c1[i].trailing_zeros() as usize)
            } else {
                let (_, b2, sig) = self.buckets(hashes[i]);
                let c2 = self.sig_matches(b2, sig);
                if c2 == 0 {
                    continue;
                }
                self.sub_at(b2, c2.trailing_zeros() as usize)
            };
            if sub != NO_SUBTABLE {
                out[i] = sub;
                found |= 1 << i;
            }
        }
        found
    }

    /// Records that the packet with `hash` matched in subtable `sub`.
    pub fn insert(&mut self, hash: u32, sub: u16) {
        let (b1, b2, sig) = self.buckets(hash);
        for b in [b1, b2] {
            let m = self.sig_matches(b, sig);
            if m != 0 {
                let w = m.trailing_zeros() as usize;
                self.set(b, w, sig, sub);
                return;
            }
        }
        for b in [b1, b2] {
            let m = self.sig_matches(b, 0);
            if m != 0 {
                let w = m.trailing_zeros() as usize;
                self.set(b, w, sig, sub);
                return;
            }
        }
        let w = self.rng.next_u32() as usize % self.ways;
        self.set(b1, w, sig, sub);
    }

    /// Accounts a packet decided in the dpcls tier by the subtable at
    /// 1-based rank `rank`; `cd_hit` when CD directed it there.
    #[inline(always)]
    pub fn record_hit(&mut self, rank: usize, cd_hit: bool) {
        self.samples += 1;
        self.rank_sum += rank as u64;
        if cd_hit {
            self.saved += rank as u64 - 1;
        }
    }

    /// Accounts directed lookups that missed (each cost one lookup).
    #[inline(always)]
    pub fn record_wasted(&mut self, n: u64) {
        self.wasted += n;
    }

    /// Ends the interval if `now_ms` has reached its end and decides
    /// whether to be on or off. Returns true when it toggled.
    pub fn evaluate(&mut self, now_ms: u64) -> bool {
        let Some(next) = self.next_eval_ms else {
            self.next_eval_ms = Some(now_ms + self.interval_ms);
            return false;
        };
        if now_ms < next {
            return false;
        }
        self.next_eval_ms = Some(now_ms + self.interval_ms);
        let mut toggled = false;
        if self.samples >= CD_MIN_SAMPLES {
            let avg_rank = self.rank_sum as f64 / self.samples as f64;
            if self.active && (avg_rank < CD_OFF_AVG_RANK || self.saved < self.wasted) {
                self.active = false;
                toggled = true;
            } else if !self.active && avg_rank > CD_ON_AVG_RANK {
                self.active = true;
                toggled = true;
            }
        }
        if toggled {
            self.toggles += 1;
        }
        self.samples = 0;
        self.rank_sum = 0;
        self.saved = 0;
        self.wasted = 0;
        toggled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::packet_hash;
    use flowpath_flow::FlowKey;

    fn h(i: u32) -> u32 {
        let mut k = FlowKey::zero();
        k.set_nw_src(i);
        packet_hash(&k)
    }

    fn lookup(c: &Cd, hash: u32) -> Option<u16> {
        let mut out = [0u16; BATCH_SIZE];
        (c.lookup_batch(&[hash], 1, &mut out) == 1).then_some(out[0])
    }

    #[test]
    fn insert_lookup_update_and_replacement() {
        for ways in [8, 16] {
            let mut c = Cd::new(1024, ways, 1000, 1);
            for i in 0..2000u32 {
                c.insert(h(i), (i % 50) as u16);
            }
            let mut correct = 0;
            for i in 0..2000u32 {
                if lookup(&c, h(i)) == Some((i % 50) as u16) {
                    correct += 1;
                }
            }
            assert!(correct > 1900, "ways {ways}: {correct}");
            c.insert(h(7), 49);
            assert_eq!(lookup(&c, h(7)), Some(49), "update in place");
            // Overfill a tiny table: every fresh insert is found.
            let mut c = Cd::new(2, ways, 1000, 1);
            for i in 0..500u32 {
                c.insert(h(i), 3);
                assert_eq!(lookup(&c, h(i)), Some(3));
            }
            assert_eq!(c.entries(), 2 * ways);
            c.clear();
            assert_eq!(lookup(&c, h(1)), None);
        }
    }

    #[test]
    fn switches_off_with_one_dominant_subtable_and_back_on() {
        let mut c = Cd::new(64, 16, 100, 1);
        assert!(c.is_active());
        assert!(!c.evaluate(0), "first call starts the interval");
        // 99 % of hits in the top subtable.
        for i in 0..1000 {
            c.record_hit(if i % 100 == 0 { 2 } else { 1 }, true);
        }
        assert!(!c.evaluate(50), "interval not over");
        assert!(c.evaluate(100));
        assert!(!c.is_active());
        // Spread over 10 subtables: average rank 5.5.
        for i in 0..1000 {
            c.record_hit(1 + i % 10, false);
        }
        assert!(c.evaluate(200));
        assert!(c.is_active());
        // Too few samples: no decision.
        c.record_hit(1, false);
        assert!(!c.evaluate(300));
        assert!(c.is_active());
        // Active but misdirecting more than it saves: off.
        for _ in 0..100 {
            c.record_hit(3, false);
        }
        c.record_hit(2, true);
        c.record_wasted(100);
        assert!(c.evaluate(400));
        assert_eq!(
            c.report(),
            CdReport {
                active: false,
                toggles: 3
            }
        );
    }
}
