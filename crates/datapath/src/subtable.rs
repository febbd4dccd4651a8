//! A dpcls subtable: every megaflow of one mask, in a hash table.
//!
//! What: the megaflows of one in_port's classifier that share a mask, as
//! an index of 8-slot buckets with linear probing between buckets: each
//! slot holds a megaflow's 32-bit hash and its megaflow index. The key
//! itself — gathered under the mask, only the mask's non-zero words — is
//! stored once, in the megaflow's own record ([`KeyStore`]: the megaflow
//! table's 64-byte hot line, see [`crate::megaflow`]), where a cache hit of
//! any tier reads it too.
//!
//! Why this shape: at subtable creation the mask's non-zero words are
//! listed once (`words`, with their mask values in `mvals`), so the mask
//! lives once per subtable and a key costs only its own words. A bucket is
//! one 64-byte line: eight hashes, then the eight megaflow indices they
//! belong to; a lookup reads the bucket, compares its eight hashes at once
//! (the compiler vectorizes it) and reads a megaflow's key only when a hash
//! matches — two cache lines per hit, and the second is the line the hit's
//! liveness check, actions and statistics need anyway. A slot costs 8
//! bytes, two to four per megaflow at a load factor between 1/8 and 1/2.
//! In tuple space search most subtable lookups are misses, and a miss
//! stops at the first bucket with a free slot: with the load factor kept
//! ≤ 1/2 that is the home bucket ~95 % of the time, so a miss costs one
//! line. Growing rehashes nothing (the hashes are stored); deletion shifts
//! slots of later buckets back (no tombstones), and the index halves when
//! it falls under 1/8 full: memory follows the megaflows installed.
//!
//! Batched lookup ([`Subtable::lookup_batch`]) works in three passes over
//! the batch's unclassified packets, so that the loads of all packets in a
//! pass are independent and the CPU keeps many cache misses in flight:
//! hash every packet and match its home bucket ([`Subtable::probe_start`]);
//! read the first candidate's key ([`Subtable::probe_touch`]); compare
//! keys ([`Subtable::probe_finish`]). Packets with no matching hash and a
//! non-full bucket drop out after the first pass. No allocation.
//!
//! Invariants: a slot is empty iff its hash is 0 (real hashes 0 are stored
//! as 1); a slot whose home bucket is `h` and that sits in bucket `x`
//! implies buckets `h..x` (cyclic, `x` excluded) are full; a slot's hash is
//! the hash of its megaflow's stored words; `len * 2 <= slots`; one
//! megaflow per distinct masked key (the dpcls never installs two
//! megaflows with the same mask and masked key).
//!
//! Threads: owned by its worker's dpcls.

use crate::batch::BATCH_SIZE;
use crate::hash::hash_compact;
use crate::hugepage::HugeVec;
use flowpath_flow::key::Word;
use flowpath_flow::{FlowKey, FlowMask, FLOW_WORDS};

/// Slots per bucket.
const WAYS: usize = 8;

/// Where megaflows' gathered keys live (the megaflow table's records).
pub trait KeyStore {
    /// The `n` stored words of megaflow `flow`.
    fn words(&self, flow: u32, n: usize) -> &[u64];
    /// Stores megaflow `flow`'s words (install path).
    fn set_words(&mut self, flow: u32, words: &[u64]);
}

/// One line of the hash index: eight hashes (0 = empty slot) and the
/// megaflows they belong to.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
struct Bucket {
    hashes: [u32; WAYS],
    flows: [u32; WAYS],
}

impl Bucket {
    /// Bitmap of the slots holding hash `h` ([`crate::simd::match8`]:
    /// written as a loop, the compiler built the bitmap with ~40
    /// shuffles, shifts and ORs per bucket).
    #[inline(always)]
    fn matches(&self, h: u32) -> u32 {
        crate::simd::match8(&self.hashes, h)
    }

    #[inline(always)]
    fn is_full(&self) -> bool {
        self.matches(0) == 0
    }
}

/// Hash 0 marks empty slots: real hashes of 0 are stored as 1.
#[inline(always)]
fn nonzero(h: u32) -> u32 {
    if h == 0 {
        1
    } else {
        h
    }
}

/// Word-wise equality without a `memcmp` call (keys are 1–16 words).
#[inline(always)]
fn keys_equal(a: &[u64], b: &[u64]) -> bool {
    a.iter().zip(b).fold(0u64, |d, (x, y)| d | (x ^ y)) == 0
}

/// Whether `key`'s words `words[i]` under `mvals[i]` equal `stored[i]`,
/// for each stored word (a mask's non-zero words against a megaflow's
/// stored key): read straight from the key, no gathered copy.
#[inline(always)]
pub(crate) fn masked_words_eq(
    key: &FlowKey,
    words: &[Word],
    mvals: &[u64],
    stored: &[u64],
) -> bool {
    stored
        .iter()
        .zip(words)
        .zip(mvals)
        .fold(0u64, |d, ((s, &w), &m)| d | ((key.word(w) & m) ^ s))
        == 0
}

/// Makes room for `extra` more elements, growing by an eighth of the
/// current capacity (at least `min_step`) instead of doubling, so the
/// unused tail stays small. Install path only.
pub(crate) fn reserve_gently<T>(v: &mut Vec<T>, extra: usize, min_step: usize) {
    if v.len() + extra > v.capacity() {
        v.reserve_exact((v.capacity() / 8).max(min_step).max(extra));
    }
}

/// One subtable. See the module documentation.
#[derive(Clone, Debug)]
pub struct Subtable {
    mask: FlowMask,
    n: usize,
    words: [Word; FLOW_WORDS],
    mvals: [u64; FLOW_WORDS],
    buckets: HugeVec<Bucket>,
    len: usize,
}

/// A lookup between [`Subtable::probe_start`] and
/// [`Subtable::probe_finish`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe {
    /// Bits 0..8: candidate slots of the home bucket; above: the home
    /// bucket's index (tables stay far below 2^24 buckets).
    cand: u32,
    /// The key's hash under the mask (kept: the last pass does not hash
    /// again).
    h: u32,
    again: bool,
    k0: u64,
}

impl Probe {
    /// A probe that finishes as a miss.
    pub const NONE: Probe = Probe {
        cand: 0,
        h: 0,
        again: false,
        k0: 0,
    };
}

/// Result of [`Subtable::insert`] when a megaflow with the same masked key
/// exists already: its index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Duplicate(pub u32);

impl Subtable {
    /// An empty subtable for `mask`.
    pub fn new(mask: &FlowMask) -> Self {
        let mut words = [Word::W0; FLOW_WORDS];
        let mut mvals = [0u64; FLOW_WORDS];
        let mut n = 0;
        for w in Word::ALL {
            if mask.w[w.index()] != 0 {
                words[n] = w;
                mvals[n] = mask.w[w.index()];
                n += 1;
            }
        }
        Subtable {
            mask: *mask,
            n,
            words,
            mvals,
            buckets: HugeVec::new(1, Bucket::default()),
            len: 0,
        }
    }

    /// The subtable's mask.
    pub fn mask(&self) -> &FlowMask {
        &self.mask
    }

    /// Number of non-zero mask words (what a lookup hashes and compares,
    /// and what a megaflow stores).
    pub fn n_words(&self) -> usize {
        self.n
    }

    /// The non-zero mask words: their positions and mask values.
    pub fn mask_words(&self) -> (&[Word], &[u64]) {
        (&self.words[..self.n], &self.mvals[..self.n])
    }

    /// Number of megaflows.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when it holds no megaflow.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Heap bytes held (the index, capacity included).
    pub fn heap_bytes(&self) -> usize {
        self.buckets.allocated_bytes()
    }

    /// Calls `f` with `key`'s words under the mask (`n` of them, in a
    /// fixed-size array for the common small word counts, so the loops
    /// unroll and the words stay in registers; the branch on `n` is
    /// predictable within a batch).
    #[inline(always)]
    fn with_gathered<R>(&self, key: &FlowKey, f: impl FnOnce(&[u64]) -> R) -> R {
        match self.n {
            1 => f(&self.gathered::<1>(key)),
            2 => f(&self.gathered::<2>(key)),
            3 => f(&self.gathered::<3>(key)),
            4 => f(&self.gathered::<4>(key)),
            5 => f(&self.gathered::<5>(key)),
            n => {
                let mut g = [0u64; FLOW_WORDS];
                for ((o, &w), &m) in g.iter_mut().zip(&self.words).zip(&self.mvals).take(n) {
                    *o = key.word(w) & m;
                }
                f(&g[..n])
            }
        }
    }

    #[inline(always)]
    fn gathered<const N: usize>(&self, key: &FlowKey) -> [u64; N] {
        let mut v = [0u64; N];
        for ((o, &w), &m) in v.iter_mut().zip(&self.words).zip(&self.mvals) {
            *o = key.word(w) & m;
        }
        v
    }

    /// Gathers `key`'s words under the mask into `out[..n]`; returns the
    /// hash (never 0).
    #[inline(always)]
    fn gather(&self, key: &FlowKey, out: &mut [u64; FLOW_WORDS]) -> u32 {
        self.with_gathered(key, |v| {
            out[..v.len()].copy_from_slice(v);
            nonzero(hash_compact(v))
        })
    }

    /// The hash [`Subtable::gather`] returns, without writing the words
    /// anywhere.
    #[inline(always)]
    fn hash_of(&self, key: &FlowKey) -> u32 {
        self.with_gathered(key, |v| nonzero(hash_compact(v)))
    }

    /// Whether `key` under the mask equals a megaflow's stored words
    /// (`stored`: [`Subtable::n_words`] of them), read straight from the
    /// key: no gathered copy.
    #[inline(always)]
    fn masked_eq(&self, key: &FlowKey, stored: &[u64]) -> bool {
        masked_words_eq(key, &self.words, &self.mvals, stored)
    }

    #[inline(always)]
    fn bucket_mask(&self) -> usize {
        self.buckets.len() - 1
    }

    /// The megaflow in slot `slot` (which must be occupied).
    #[inline(always)]
    fn flow_of(&self, slot: usize) -> u32 {
        self.buckets[slot / WAYS].flows[slot % WAYS]
    }

    /// Finds the slot whose megaflow has hash `h` and stored words that
    /// `eq` accepts, starting at bucket `b` whose hash matches are `m`.
    #[inline(always)]
    fn probe<K: KeyStore>(
        &self,
        eq: impl Fn(&[u64]) -> bool,
        h: u32,
        mut b: usize,
        mut m: u32,
        ks: &K,
    ) -> Option<usize> {
        let bm = self.bucket_mask();
        loop {
            while m != 0 {
                let slot = b * WAYS + m.trailing_zeros() as usize;
                m &= m - 1;
                if eq(ks.words(self.flow_of(slot), self.n)) {
                    return Some(slot);
                }
            }
            if !self.buckets[b].is_full() {
                return None;
            }
            b = (b + 1) & bm;
            m = self.buckets[b].matches(h);
        }
    }

    #[inline(always)]
    fn find<K: KeyStore>(&self, g: &[u64], h: u32, ks: &K) -> Option<usize> {
        let b = h as usize & self.bucket_mask();
        self.probe(|s| keys_equal(s, g), h, b, self.buckets[b].matches(h), ks)
    }

    /// Looks up one key; returns the megaflow index.
    pub fn lookup_one<K: KeyStore>(&self, key: &FlowKey, ks: &K) -> Option<u32> {
        let mut g = [0u64; FLOW_WORDS];
        let h = self.gather(key, &mut g);
        self.find(&g[..self.n], h, ks).map(|s| self.flow_of(s))
    }

    /// First pass of a lookup: hashes `key` and matches its home bucket.
    #[inline(always)]
    pub fn probe_start(&self, key: &FlowKey) -> Probe {
        let h = self.hash_of(key);
        let bucket = &self.buckets[h as usize & self.bucket_mask()];
        let cand = bucket.matches(h);
        Probe {
            cand: cand | ((h as usize & self.bucket_mask()) as u32) << WAYS,
            h,
            again: cand != 0 || bucket.is_full(),
            k0: 0,
        }
    }

    /// Second pass: reads the first word of the first candidate's key (so
    /// that all packets' key loads are in flight together).
    #[inline(always)]
    pub fn probe_touch<K: KeyStore>(&self, p: &mut Probe, ks: &K) {
        let cand = p.cand & ((1 << WAYS) - 1);
        if cand != 0 && self.n != 0 {
            let slot = (p.cand >> WAYS) as usize * WAYS + cand.trailing_zeros() as usize;
            p.k0 = ks.words(self.flow_of(slot), self.n)[0];
        }
    }

    /// Last pass: compares keys; returns the megaflow index.
    #[inline(always)]
    pub fn probe_finish<K: KeyStore>(&self, key: &FlowKey, p: Probe, ks: &K) -> Option<u32> {
        if !p.again {
            return None;
        }
        let h = p.h;
        let b = h as usize & self.bucket_mask();
        let mut cand = p.cand & ((1 << WAYS) - 1);
        if cand != 0 {
            // The first word of the first candidate's key was read by
            // `probe_touch` (for n = 0 there is nothing to compare).
            let slot = b * WAYS + cand.trailing_zeros() as usize;
            let f = self.flow_of(slot);
            if self.n == 0
                || (p.k0 == key.word(self.words[0]) & self.mvals[0]
                    && self.masked_eq(key, ks.words(f, self.n)))
            {
                return Some(f);
            }
            cand &= cand - 1;
        }
        self.probe(|s| self.masked_eq(key, s), h, b, cand, ks)
            .map(|s| self.flow_of(s))
    }

    /// Looks up every packet of `keys` whose bit is set in `todo`; writes
    /// the megaflow index of each hit into `out` and returns the bitmap of
    /// hits. See the module documentation for the passes.
    #[inline]
    pub fn lookup_batch<K: KeyStore>(
        &self,
        keys: &[FlowKey],
        todo: u32,
        out: &mut [u32; BATCH_SIZE],
        ks: &K,
    ) -> u32 {
        let mut probes = [Probe::NONE; BATCH_SIZE];
        let mut again = 0u32;
        let mut m = todo;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            probes[i] = self.probe_start(&keys[i]);
            again |= u32::from(probes[i].again) << i;
        }
        let mut m = again;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            self.probe_touch(&mut probes[i], ks);
        }
        let mut found = 0u32;
        let mut m = again;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            if let Some(f) = self.probe_finish(&keys[i], probes[i], ks) {
                out[i] = f;
                found |= 1 << i;
            }
        }
        found
    }

    /// Inserts megaflow `flow` with key `key` (masked here): stores its
    /// words in `ks` and indexes it. Grows the index when it would pass
    /// half full (allocates: install path only).
    pub fn insert<K: KeyStore>(
        &mut self,
        key: &FlowKey,
        flow: u32,
        ks: &mut K,
    ) -> Result<(), Duplicate> {
        let mut g = [0u64; FLOW_WORDS];
        let h = self.gather(key, &mut g);
        if let Some(s) = self.find(&g[..self.n], h, ks) {
            return Err(Duplicate(self.flow_of(s)));
        }
        if (self.len + 1) * 2 > self.buckets.len() * WAYS {
            self.rebuild(self.buckets.len() * 2);
        }
        ks.set_words(flow, &g[..self.n]);
        self.place(h, flow);
        self.len += 1;
        Ok(())
    }

    /// Puts (hash, flow) in the first free slot from its home bucket on.
    fn place(&mut self, h: u32, flow: u32) {
        let bm = self.bucket_mask();
        let mut b = h as usize & bm;
        loop {
            let free = self.buckets[b].matches(0);
            if free != 0 {
                let w = free.trailing_zeros() as usize;
                self.buckets[b].hashes[w] = h;
                self.buckets[b].flows[w] = flow;
                return;
            }
            b = (b + 1) & bm;
        }
    }

    /// Rebuilds the index with `nb` buckets (a power of two that keeps the
    /// load ≤ 1/2); nothing is rehashed.
    fn rebuild(&mut self, nb: usize) {
        let old = std::mem::replace(&mut self.buckets, HugeVec::new(nb, Bucket::default()));
        for bucket in old.iter() {
            for (&h, &f) in bucket.hashes.iter().zip(&bucket.flows) {
                if h != 0 {
                    self.place(h, f);
                }
            }
        }
    }

    fn move_slot(&mut self, from: usize, to: usize) {
        let (fb, fw, tb, tw) = (from / WAYS, from % WAYS, to / WAYS, to % WAYS);
        self.buckets[tb].hashes[tw] = self.buckets[fb].hashes[fw];
        self.buckets[tb].flows[tw] = self.buckets[fb].flows[fw];
        self.buckets[fb].hashes[fw] = 0;
    }

    /// The slot holding megaflow `flow`, whose hash is `h`.
    fn slot_of(&self, flow: u32, h: u32) -> Option<usize> {
        let bm = self.bucket_mask();
        let mut b = h as usize & bm;
        for _ in 0..self.buckets.len() {
            let bucket = &self.buckets[b];
            let mut m = bucket.matches(h);
            while m != 0 {
                let w = m.trailing_zeros() as usize;
                m &= m - 1;
                if bucket.flows[w] == flow {
                    return Some(b * WAYS + w);
                }
            }
            if !bucket.is_full() {
                return None;
            }
            b = (b + 1) & bm;
        }
        None
    }

    /// Empties slot `s` and restores the probing invariant: a slot of a
    /// later bucket whose probe path crosses the hole's bucket moves into
    /// the hole.
    fn clear_slot(&mut self, s: usize) {
        self.buckets[s / WAYS].hashes[s % WAYS] = 0;
        let bm = self.bucket_mask();
        let mut hole = s;
        let mut j = (s / WAYS + 1) & bm;
        while j != s / WAYS {
            let hb = hole / WAYS;
            let mut moved = false;
            for w in 0..WAYS {
                let eh = self.buckets[j].hashes[w];
                if eh == 0 {
                    continue;
                }
                let home = eh as usize & bm;
                if (j.wrapping_sub(home) & bm) >= (j.wrapping_sub(hb) & bm) {
                    self.move_slot(j * WAYS + w, hole);
                    hole = j * WAYS + w;
                    moved = true;
                    break;
                }
            }
            if !moved && !self.buckets[j].is_full() {
                break;
            }
            j = (j + 1) & bm;
        }
    }

    /// Removes megaflow `flow` (its words are read from `ks`, which must
    /// still hold them). Returns false if it is not here.
    pub fn remove<K: KeyStore>(&mut self, flow: u32, ks: &K) -> bool {
        let h = nonzero(hash_compact(ks.words(flow, self.n)));
        let Some(s) = self.slot_of(flow, h) else {
            return false;
        };
        self.clear_slot(s);
        self.len -= 1;
        let mut nb = self.buckets.len();
        while nb > 1 && self.len * 8 < nb * WAYS {
            nb /= 2;
        }
        if nb != self.buckets.len() {
            self.rebuild(nb);
        }
        true
    }

    /// Megaflow indices of all entries (any order).
    pub fn flows(&self) -> impl Iterator<Item = u32> + '_ {
        self.buckets.iter().flat_map(|b| {
            b.hashes
                .iter()
                .zip(&b.flows)
                .filter(|(h, _)| **h != 0)
                .map(|(_, f)| *f)
        })
    }
}

/// A key store for the subtable and dpcls unit tests: each megaflow's
/// words in a map.
#[cfg(test)]
#[derive(Default)]
pub(crate) struct TestKeys(std::collections::HashMap<u32, Vec<u64>>);

#[cfg(test)]
impl KeyStore for TestKeys {
    fn words(&self, flow: u32, n: usize) -> &[u64] {
        &self.0[&flow][..n]
    }
    fn set_words(&mut self, flow: u32, words: &[u64]) {
        self.0.insert(flow, words.to_vec());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    type Keys = TestKeys;

    fn mask(words: &[(usize, u64)]) -> FlowMask {
        let mut m = FlowMask::catchall();
        for &(i, v) in words {
            m.w[i] = v;
        }
        m
    }

    fn key(a: u64, b: u64) -> FlowKey {
        let mut k = FlowKey::zero();
        k.w[1] = a;
        k.w[5] = b;
        k
    }

    #[test]
    fn words_listed() {
        let st = Subtable::new(&mask(&[(1, 0xff), (5, 1)]));
        assert_eq!(st.n_words(), 2);
        assert_eq!(
            st.mask_words(),
            (&[Word::W1, Word::W5][..], &[0xffu64, 1][..])
        );
    }

    #[test]
    fn insert_lookup_remove_many_with_batch() {
        let m = mask(&[(1, 0xffff), (5, 0xf0)]);
        let mut st = Subtable::new(&m);
        let mut ks = Keys::default();
        for i in 0..1000u64 {
            st.insert(&key(i, i << 4), i as u32, &mut ks).unwrap();
        }
        assert_eq!(st.len(), 1000);
        assert_eq!(
            ks.words(7, 2),
            &[7, 7 << 4],
            "gathered, masked words stored"
        );
        assert_eq!(
            st.insert(&key(5, 5 << 4 | 3), 99, &mut ks),
            Err(Duplicate(5)),
            "same masked key"
        );
        // Bits outside the mask do not matter.
        assert_eq!(st.lookup_one(&key(7 | 1 << 40, 7 << 4 | 0xf), &ks), Some(7));
        assert_eq!(st.lookup_one(&key(7, 8 << 4), &ks), None);
        // Remove every third; the rest stay findable (backward shift).
        for i in (0..1000u64).step_by(3) {
            assert!(st.remove(i as u32, &ks));
        }
        assert!(!st.remove(0, &ks));
        let keys: Vec<FlowKey> = (0..32u64).map(|i| key(i * 31, (i * 31) << 4)).collect();
        let mut out = [0u32; BATCH_SIZE];
        let found = st.lookup_batch(&keys, u32::MAX, &mut out, &ks);
        for i in 0..32u64 {
            let want = (i * 31) % 3 != 0;
            assert_eq!(found >> i & 1 == 1, want, "packet {i}");
            if want {
                assert_eq!(out[i as usize], (i * 31) as u32);
            }
            assert_eq!(st.lookup_one(&keys[i as usize], &ks).is_some(), want);
        }
        let found = st.lookup_batch(&keys, 0b1010, &mut out, &ks);
        assert_eq!(found, 0b0010, "key 31 present, key 93 removed");
        assert_eq!(st.flows().count(), st.len());
    }

    #[test]
    fn deletion_keeps_overflowed_entries_reachable() {
        // Enough entries that some buckets overflow into their neighbours.
        let m = mask(&[(1, u64::MAX)]);
        let mut st = Subtable::new(&m);
        let mut ks = Keys::default();
        let n = 40_000u64;
        for i in 0..n {
            st.insert(&key(i, 0), i as u32, &mut ks).unwrap();
        }
        let full = st.buckets.iter().filter(|b| b.is_full()).count();
        assert!(full > 30, "test needs full buckets: {full}");
        let mut x = 12345u64;
        let mut present = vec![true; n as usize];
        for round in 0..4 {
            for _ in 0..n / 8 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let i = (x >> 33) % n;
                assert_eq!(st.remove(i as u32, &ks), present[i as usize]);
                present[i as usize] = false;
            }
            for i in 0..n {
                assert_eq!(
                    st.lookup_one(&key(i, 0), &ks),
                    present[i as usize].then_some(i as u32),
                    "round {round} key {i}"
                );
            }
        }
        assert_eq!(st.len(), present.iter().filter(|p| **p).count());
        // Emptying it gives the index's memory back.
        let big = st.heap_bytes();
        for i in 0..n {
            if present[i as usize] {
                assert!(st.remove(i as u32, &ks));
            }
        }
        assert!(st.is_empty());
        assert!(
            st.heap_bytes() * 100 < big,
            "{} of {big} bytes kept",
            st.heap_bytes()
        );
        assert_eq!(st.lookup_one(&key(3, 0), &ks), None);
    }

    #[test]
    fn catchall_mask() {
        let mut st = Subtable::new(&FlowMask::catchall());
        let mut ks = Keys::default();
        assert_eq!(st.lookup_one(&key(1, 2), &ks), None);
        st.insert(&key(1, 2), 4, &mut ks).unwrap();
        assert_eq!(st.lookup_one(&key(9, 9), &ks), Some(4));
        let mut out = [0u32; BATCH_SIZE];
        assert_eq!(st.lookup_batch(&[key(3, 3)], 1, &mut out, &ks), 1);
        assert!(st.remove(4, &ks));
        assert!(st.is_empty());
    }
}
