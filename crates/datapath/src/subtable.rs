//! A dpcls subtable: every megaflow of one mask, in a hash table.
//!
//! What: the megaflows of one in_port's classifier that share a mask,
//! stored as (hash, masked key → megaflow index) in an open-addressing
//! table of 8-slot buckets with linear probing between buckets.
//!
//! Why this shape: at subtable creation the mask's non-zero words are
//! listed once (`words`, with their mask values in `mvals`). A stored key is
//! just those words, gathered and masked, followed by its megaflow index,
//! packed contiguously (`recs`, stride `n + 1` words), so an IPv4 5-tuple
//! mask of three words costs 32 bytes per entry, a lookup hashes and
//! compares three words, not sixteen, and the index comes with the key's
//! cache line. The
//! 32-bit hashes live apart from the keys, eight to a 32-byte bucket, so a
//! lookup reads one bucket and compares its eight hashes at once (the
//! compiler vectorizes it); the key is read only when a hash matches. In
//! tuple space search most subtable lookups are misses, and a miss stops at
//! the first bucket with a free slot: with the load factor kept ≤ 1/2 that
//! is the home bucket ~95 % of the time, so a miss costs one 32-byte read.
//! Deletion shifts entries of later buckets back (no tombstones).
//! (A variant with 16-bit signatures packed eight to 16 bytes and matched
//! with SWAR arithmetic was measured 10–15 % slower on cache-resident
//! subtables — 121 vs 106 ns/packet for 20 subtables — and only ~5 %
//! faster at 100K flows, so the 32-bit layout stays.)
//!
//! Batched lookup ([`Subtable::lookup_batch`]) works in three passes over
//! the batch's unclassified packets, so that the loads of all packets in a
//! pass are independent and the CPU keeps many cache misses in flight:
//! hash every packet and match its home bucket ([`Subtable::probe_start`]);
//! read the first candidate's record ([`Subtable::probe_touch`]); compare
//! keys ([`Subtable::probe_finish`]). Packets with no matching hash and a
//! non-full bucket drop out after the first pass. No allocation.
//!
//! Invariants: a slot is empty iff its hash is 0 (real hashes 0 are stored
//! as 1); an entry whose home bucket is `h` and that sits in bucket `x`
//! implies buckets `h..x` (cyclic, `x` excluded) are full; `len * 2 <=
//! capacity`; one entry per distinct masked key (the dpcls never installs
//! two megaflows with the same mask and masked key).
//!
//! Threads: owned by its worker's dpcls.

use crate::batch::BATCH_SIZE;
use crate::hash::hash_compact;
use flowpath_flow::{FlowKey, FlowMask, FLOW_WORDS};

/// Slots per bucket.
const WAYS: usize = 8;

#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(32))]
struct Bucket([u32; WAYS]);

impl Bucket {
    /// Bitmap of the slots holding hash `h`.
    #[inline(always)]
    fn matches(&self, h: u32) -> u32 {
        let mut m = 0u32;
        for (w, x) in self.0.iter().enumerate() {
            m |= u32::from(*x == h) << w;
        }
        m
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

/// One subtable. See the module documentation.
#[derive(Clone, Debug)]
pub struct Subtable {
    mask: FlowMask,
    n: usize,
    words: [u8; FLOW_WORDS],
    mvals: [u64; FLOW_WORDS],
    buckets: Vec<Bucket>,
    recs: Vec<u64>,
    len: usize,
}

/// A lookup between [`Subtable::probe_start`] and
/// [`Subtable::probe_finish`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe {
    /// Bits 0..8: candidate slots of the home bucket; above: the home
    /// bucket's index (tables stay far below 2^24 buckets).
    cand: u32,
    again: bool,
    k0: u64,
}

impl Probe {
    /// A probe that finishes as a miss.
    pub const NONE: Probe = Probe {
        cand: 0,
        again: false,
        k0: 0,
    };
}

/// Result of [`Subtable::insert`] when an entry with the same masked key
/// exists already: its megaflow index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Duplicate(pub u32);

impl Subtable {
    /// An empty subtable for `mask`.
    pub fn new(mask: &FlowMask) -> Self {
        let mut words = [0u8; FLOW_WORDS];
        let mut mvals = [0u64; FLOW_WORDS];
        let mut n = 0;
        for i in 0..FLOW_WORDS {
            if mask.w[i] != 0 {
                words[n] = i as u8;
                mvals[n] = mask.w[i];
                n += 1;
            }
        }
        Subtable {
            mask: *mask,
            n,
            words,
            mvals,
            buckets: vec![Bucket::default(); 1],
            recs: vec![0; WAYS * (n + 1)],
            len: 0,
        }
    }

    /// The subtable's mask.
    pub fn mask(&self) -> &FlowMask {
        &self.mask
    }

    /// Number of non-zero mask words (what a lookup hashes and compares).
    pub fn n_words(&self) -> usize {
        self.n
    }

    /// Number of megaflows.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when it holds no megaflow.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Gathers `key`'s words under the mask into `out[..n]`; returns the
    /// hash (never 0). Specialized for the common small word counts so the
    /// loops unroll (the branch on `n` is predictable within a batch).
    #[inline(always)]
    fn gather(&self, key: &FlowKey, out: &mut [u64; FLOW_WORDS]) -> u32 {
        match self.n {
            1 => self.gather_n::<1>(key, out),
            2 => self.gather_n::<2>(key, out),
            3 => self.gather_n::<3>(key, out),
            4 => self.gather_n::<4>(key, out),
            _ => self.gather_any(key, out),
        }
    }

    #[inline(always)]
    fn gather_n<const N: usize>(&self, key: &FlowKey, out: &mut [u64; FLOW_WORDS]) -> u32 {
        let mut v = [0u64; N];
        for ((o, &w), &m) in v.iter_mut().zip(&self.words).zip(&self.mvals) {
            *o = key.w[w as usize & (FLOW_WORDS - 1)] & m;
        }
        out[..N].copy_from_slice(&v);
        nonzero(hash_compact(&v))
    }

    #[inline(always)]
    fn gather_any(&self, key: &FlowKey, out: &mut [u64; FLOW_WORDS]) -> u32 {
        for ((o, &w), &m) in out
            .iter_mut()
            .zip(&self.words)
            .zip(&self.mvals)
            .take(self.n)
        {
            *o = key.w[w as usize] & m;
        }
        nonzero(hash_compact(&out[..self.n]))
    }

    #[inline(always)]
    fn bucket_mask(&self) -> usize {
        self.buckets.len() - 1
    }

    #[inline(always)]
    fn key_at(&self, slot: usize) -> &[u64] {
        let r = slot * (self.n + 1);
        &self.recs[r..r + self.n]
    }

    #[inline(always)]
    fn flow_at(&self, slot: usize) -> u32 {
        self.recs[slot * (self.n + 1) + self.n] as u32
    }

    /// Finds the slot of the entry with gathered key `g` and hash `h`,
    /// starting at bucket `b` whose hash matches are `m`.
    #[inline(always)]
    fn probe(&self, g: &[u64], h: u32, mut b: usize, mut m: u32) -> Option<usize> {
        let bm = self.bucket_mask();
        loop {
            while m != 0 {
                let slot = b * WAYS + m.trailing_zeros() as usize;
                m &= m - 1;
                if keys_equal(self.key_at(slot), g) {
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
    fn find(&self, g: &[u64], h: u32) -> Option<usize> {
        let b = h as usize & self.bucket_mask();
        self.probe(g, h, b, self.buckets[b].matches(h))
    }

    /// Looks up one key; returns the megaflow index.
    pub fn lookup_one(&self, key: &FlowKey) -> Option<u32> {
        let mut g = [0u64; FLOW_WORDS];
        let h = self.gather(key, &mut g);
        self.find(&g[..self.n], h).map(|s| self.flow_at(s))
    }

    /// First pass of a lookup: hashes `key` and matches its home bucket.
    #[inline(always)]
    pub fn probe_start(&self, key: &FlowKey) -> Probe {
        let mut g = [0u64; FLOW_WORDS];
        let h = self.gather(key, &mut g);
        let bucket = &self.buckets[h as usize & self.bucket_mask()];
        let cand = bucket.matches(h);
        Probe {
            cand: cand | ((h as usize & self.bucket_mask()) as u32) << WAYS,
            again: cand != 0 || bucket.is_full(),
            k0: 0,
        }
    }

    /// Second pass: reads the first word of the first candidate's record
    /// (so that all packets' record loads are in flight together).
    #[inline(always)]
    pub fn probe_touch(&self, p: &mut Probe) {
        let cand = p.cand & ((1 << WAYS) - 1);
        if cand != 0 {
            let slot = (p.cand >> WAYS) as usize * WAYS + cand.trailing_zeros() as usize;
            p.k0 = self.recs[slot * (self.n + 1)];
        }
    }

    /// Last pass: compares keys; returns the megaflow index.
    #[inline(always)]
    pub fn probe_finish(&self, key: &FlowKey, p: Probe) -> Option<u32> {
        if !p.again {
            return None;
        }
        let mut g = [0u64; FLOW_WORDS];
        let h = self.gather(key, &mut g);
        let g = &g[..self.n];
        let b = h as usize & self.bucket_mask();
        let mut cand = p.cand & ((1 << WAYS) - 1);
        if cand != 0 {
            // The first word of the first candidate's record was read by
            // `probe_touch` (for n = 0 it is the megaflow index: the
            // comparison is skipped).
            let slot = b * WAYS + cand.trailing_zeros() as usize;
            if (self.n == 0 || p.k0 == g[0]) && keys_equal(self.key_at(slot), g) {
                return Some(self.flow_at(slot));
            }
            cand &= cand - 1;
        }
        self.probe(g, h, b, cand).map(|s| self.flow_at(s))
    }

    /// Looks up every packet of `keys` whose bit is set in `todo`; writes
    /// the megaflow index of each hit into `out` and returns the bitmap of
    /// hits. See the module documentation for the two passes.
    #[inline]
    pub fn lookup_batch(&self, keys: &[FlowKey], todo: u32, out: &mut [u32; BATCH_SIZE]) -> u32 {
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
            self.probe_touch(&mut probes[i]);
        }
        let mut found = 0u32;
        let mut m = again;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            if let Some(f) = self.probe_finish(&keys[i], probes[i]) {
                out[i] = f;
                found |= 1 << i;
            }
        }
        found
    }

    /// Inserts the megaflow `flow` with key `key` (masked here). Grows the
    /// table when it would pass half full (allocates: install path only).
    pub fn insert(&mut self, key: &FlowKey, flow: u32) -> Result<(), Duplicate> {
        let mut g = [0u64; FLOW_WORDS];
        let h = self.gather(key, &mut g);
        if let Some(s) = self.find(&g[..self.n], h) {
            return Err(Duplicate(self.flow_at(s)));
        }
        if (self.len + 1) * 2 > self.buckets.len() * WAYS {
            self.grow();
        }
        self.place(&g[..self.n], h, flow);
        self.len += 1;
        Ok(())
    }

    fn place(&mut self, g: &[u64], h: u32, flow: u32) {
        let bm = self.bucket_mask();
        let mut b = h as usize & bm;
        loop {
            let free = self.buckets[b].matches(0);
            if free != 0 {
                let w = free.trailing_zeros() as usize;
                self.buckets[b].0[w] = h;
                let r = (b * WAYS + w) * (self.n + 1);
                self.recs[r..r + self.n].copy_from_slice(g);
                self.recs[r + self.n] = u64::from(flow);
                return;
            }
            b = (b + 1) & bm;
        }
    }

    fn grow(&mut self) {
        let nb = self.buckets.len() * 2;
        let stride = self.n + 1;
        let old_b = std::mem::replace(&mut self.buckets, vec![Bucket::default(); nb]);
        let old_r = std::mem::replace(&mut self.recs, vec![0; nb * WAYS * stride]);
        for (b, bucket) in old_b.iter().enumerate() {
            for (w, &h) in bucket.0.iter().enumerate() {
                if h != 0 {
                    let r = (b * WAYS + w) * stride;
                    self.place(&old_r[r..r + self.n], h, old_r[r + self.n] as u32);
                }
            }
        }
    }

    fn move_slot(&mut self, from: usize, to: usize) {
        let stride = self.n + 1;
        self.buckets[to / WAYS].0[to % WAYS] = self.buckets[from / WAYS].0[from % WAYS];
        self.buckets[from / WAYS].0[from % WAYS] = 0;
        self.recs
            .copy_within(from * stride..(from + 1) * stride, to * stride);
    }

    /// Removes the entry for `key` (masked here); returns its megaflow
    /// index.
    pub fn remove(&mut self, key: &FlowKey) -> Option<u32> {
        let mut g = [0u64; FLOW_WORDS];
        let h = self.gather(key, &mut g);
        let s = self.find(&g[..self.n], h)?;
        let flow = self.flow_at(s);
        self.buckets[s / WAYS].0[s % WAYS] = 0;
        self.len -= 1;
        // Restore the invariant: an entry of a later bucket whose probe
        // path crosses the hole's bucket moves into the hole.
        let bm = self.bucket_mask();
        let mut hole = s;
        let mut j = (s / WAYS + 1) & bm;
        while j != s / WAYS {
            let hb = hole / WAYS;
            let mut moved = false;
            for w in 0..WAYS {
                let eh = self.buckets[j].0[w];
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
        Some(flow)
    }

    /// Megaflow indices of all entries (any order).
    pub fn flows(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.buckets.len() * WAYS)
            .filter(|&s| self.buckets[s / WAYS].0[s % WAYS] != 0)
            .map(|s| self.flow_at(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    #[test]
    fn insert_lookup_remove_many_with_batch() {
        let m = mask(&[(1, 0xffff), (5, 0xf0)]);
        let mut st = Subtable::new(&m);
        for i in 0..1000u64 {
            st.insert(&key(i, i << 4), i as u32).unwrap();
        }
        assert_eq!(st.len(), 1000);
        assert_eq!(
            st.insert(&key(5, 5 << 4 | 3), 99),
            Err(Duplicate(5)),
            "same masked key"
        );
        // Bits outside the mask do not matter.
        assert_eq!(st.lookup_one(&key(7 | 1 << 40, 7 << 4 | 0xf)), Some(7));
        assert_eq!(st.lookup_one(&key(7, 8 << 4)), None);
        // Remove every third; the rest stay findable (backward shift).
        for i in (0..1000u64).step_by(3) {
            assert_eq!(st.remove(&key(i, i << 4)), Some(i as u32));
        }
        assert_eq!(st.remove(&key(0, 0)), None);
        let keys: Vec<FlowKey> = (0..32u64).map(|i| key(i * 31, (i * 31) << 4)).collect();
        let mut out = [0u32; BATCH_SIZE];
        let found = st.lookup_batch(&keys, u32::MAX, &mut out);
        for i in 0..32u64 {
            let want = (i * 31) % 3 != 0;
            assert_eq!(found >> i & 1 == 1, want, "packet {i}");
            if want {
                assert_eq!(out[i as usize], (i * 31) as u32);
            }
            assert_eq!(st.lookup_one(&keys[i as usize]).is_some(), want);
        }
        let found = st.lookup_batch(&keys, 0b1010, &mut out);
        assert_eq!(found, 0b0010, "key 31 present, key 93 removed");
        assert_eq!(st.flows().count(), st.len());
    }

    #[test]
    fn deletion_keeps_overflowed_entries_reachable() {
        // Enough entries that some buckets overflow into their neighbours.
        let m = mask(&[(1, u64::MAX)]);
        let mut st = Subtable::new(&m);
        let n = 40_000u64;
        for i in 0..n {
            st.insert(&key(i, 0), i as u32).unwrap();
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
                let r = st.remove(&key(i, 0));
                assert_eq!(r.is_some(), present[i as usize]);
                present[i as usize] = false;
            }
            for i in 0..n {
                assert_eq!(
                    st.lookup_one(&key(i, 0)),
                    present[i as usize].then_some(i as u32),
                    "round {round} key {i}"
                );
            }
        }
        assert_eq!(st.len(), present.iter().filter(|p| **p).count());
    }

    #[test]
    fn catchall_mask() {
        let mut st = Subtable::new(&FlowMask::catchall());
        assert_eq!(st.lookup_one(&key(1, 2)), None);
        st.insert(&key(1, 2), 4).unwrap();
        assert_eq!(st.lookup_one(&key(9, 9)), Some(4));
        let mut out = [0u32; BATCH_SIZE];
        assert_eq!(st.lookup_batch(&[key(3, 3)], 1, &mut out), 1);
        assert_eq!(st.remove(&key(0, 0)), Some(4));
        assert!(st.is_empty());
    }
}
