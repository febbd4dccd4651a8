//! A dpcls subtable: every megaflow of one mask, in a hash table.
//!
//! What: the megaflows of one in_port's classifier that share a mask. Each
//! megaflow is an *entry*: its key gathered under the mask (only the mask's
//! non-zero words, masked) followed by its megaflow index, packed densely
//! in `keys` (stride `n + 1` words, no holes). A hash index of 8-slot
//! buckets with linear probing between buckets maps (32-bit hash) → entry.
//!
//! Why this shape: at subtable creation the mask's non-zero words are
//! listed once (`words`, with their mask values in `mvals`), so the mask
//! lives once per subtable and a key costs only its own words: an IPv4
//! exact-match megaflow (five words) is 48 bytes of entry. The entry is the
//! megaflow's only copy of its key: the megaflow table points here
//! (subtable, entry) instead of keeping a key and mask per megaflow, and
//! the second-level caches confirm their hits against it. A bucket is one
//! 64-byte line: eight 32-bit hashes, then the eight entries they index;
//! a lookup reads the bucket, compares its eight hashes at once (the
//! compiler vectorizes it) and reads an entry only when a hash matches —
//! the same two cache lines per hit as a layout with keys in the slots,
//! but the slots (two to four per megaflow at a load factor between 1/4
//! and 1/2) cost 8 bytes each instead of a whole key. In tuple space search
//! most subtable lookups are misses, and a miss stops at the first bucket
//! with a free slot: with the load factor kept ≤ 1/2 that is the home
//! bucket ~95 % of the time, so a miss costs one line. Deletion shifts
//! slots of later buckets back (no tombstones) and moves the last entry
//! into the freed one (the caller learns which megaflow moved); the index
//! halves when it falls under 1/8 full, and the entries' storage grows and
//! shrinks in steps of 1/8 (not doubling): memory follows the megaflows
//! installed.
//!
//! Batched lookup ([`Subtable::lookup_batch`]) works in three passes over
//! the batch's unclassified packets, so that the loads of all packets in a
//! pass are independent and the CPU keeps many cache misses in flight:
//! hash every packet and match its home bucket ([`Subtable::probe_start`]);
//! read the first candidate's entry ([`Subtable::probe_touch`]); compare
//! keys ([`Subtable::probe_finish`]). Packets with no matching hash and a
//! non-full bucket drop out after the first pass. No allocation.
//!
//! Invariants: a slot is empty iff its hash is 0 (real hashes 0 are stored
//! as 1); a slot whose home bucket is `h` and that sits in bucket `x`
//! implies buckets `h..x` (cyclic, `x` excluded) are full; every entry
//! `0..len` is indexed by exactly one slot, whose hash is its key's;
//! `len * 2 <= slots`; one entry per distinct masked key (the dpcls never
//! installs two megaflows with the same mask and masked key).
//!
//! Threads: owned by its worker's dpcls.

use crate::batch::BATCH_SIZE;
use crate::hash::hash_compact;
use crate::prefetch::prefetch;
use flowpath_flow::{FlowKey, FlowMask, FLOW_WORDS};

/// Slots per bucket.
const WAYS: usize = 8;

/// One line of the hash index: eight hashes (0 = empty slot) and the
/// entries they index.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
struct Bucket {
    hashes: [u32; WAYS],
    entries: [u32; WAYS],
}

impl Bucket {
    /// Bitmap of the slots holding hash `h`.
    #[inline(always)]
    fn matches(&self, h: u32) -> u32 {
        let mut m = 0u32;
        for (w, x) in self.hashes.iter().enumerate() {
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

/// Makes room for `extra` more elements, growing by an eighth of the
/// current capacity (at least `min_step`) instead of doubling, so the
/// unused tail stays small. Install path only.
pub(crate) fn reserve_gently<T>(v: &mut Vec<T>, extra: usize, min_step: usize) {
    if v.len() + extra > v.capacity() {
        v.reserve_exact((v.capacity() / 8).max(min_step).max(extra));
    }
}

/// Gives back storage when less than half of it is used (keeps an eighth
/// spare). Removal path only.
pub(crate) fn shrink_gently<T>(v: &mut Vec<T>, min_cap: usize) {
    if v.capacity() > min_cap && v.len() * 2 < v.capacity() {
        v.shrink_to((v.len() + v.len() / 8).max(min_cap));
    }
}

/// One subtable. See the module documentation.
#[derive(Clone, Debug)]
pub struct Subtable {
    mask: FlowMask,
    n: usize,
    words: [u8; FLOW_WORDS],
    mvals: [u64; FLOW_WORDS],
    buckets: Vec<Bucket>,
    keys: Vec<u64>,
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

/// What a removal did: the removed entry's megaflow index, and the
/// megaflow whose entry moved into the freed place (its new entry), if
/// one did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Removed {
    /// Megaflow index of the removed entry.
    pub flow: u32,
    /// `(megaflow index, new entry)` of the entry moved into the hole.
    pub moved: Option<(u32, u32)>,
}

/// Fewest buckets; also the smallest entry storage step (in entries).
const MIN_BUCKETS: usize = 1;
const MIN_ENTRY_STEP: usize = 8;

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
            buckets: vec![Bucket::default(); MIN_BUCKETS],
            keys: Vec::new(),
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

    /// Heap bytes held (index and entries, capacity included).
    pub fn heap_bytes(&self) -> usize {
        self.buckets.capacity() * std::mem::size_of::<Bucket>()
            + self.keys.capacity() * std::mem::size_of::<u64>()
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
            5 => self.gather_n::<5>(key, out),
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

    /// The entry in slot `slot` (which must be occupied).
    #[inline(always)]
    fn entry_of(&self, slot: usize) -> usize {
        self.buckets[slot / WAYS].entries[slot % WAYS] as usize
    }

    /// The gathered key words of entry `e`.
    #[inline(always)]
    fn key_of(&self, e: usize) -> &[u64] {
        let r = e * (self.n + 1);
        &self.keys[r..r + self.n]
    }

    /// The megaflow index of entry `e`.
    #[inline(always)]
    fn flow_of(&self, e: usize) -> u32 {
        self.keys[e * (self.n + 1) + self.n] as u32
    }

    /// Finds the slot whose entry has gathered key `g` and hash `h`,
    /// starting at bucket `b` whose hash matches are `m`.
    #[inline(always)]
    fn probe(&self, g: &[u64], h: u32, mut b: usize, mut m: u32) -> Option<usize> {
        let bm = self.bucket_mask();
        loop {
            while m != 0 {
                let slot = b * WAYS + m.trailing_zeros() as usize;
                m &= m - 1;
                if keys_equal(self.key_of(self.entry_of(slot)), g) {
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
        self.find(&g[..self.n], h)
            .map(|s| self.flow_of(self.entry_of(s)))
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

    /// Second pass: reads the first word of the first candidate's entry
    /// (so that all packets' entry loads are in flight together).
    #[inline(always)]
    pub fn probe_touch(&self, p: &mut Probe) {
        let cand = p.cand & ((1 << WAYS) - 1);
        if cand != 0 {
            let slot = (p.cand >> WAYS) as usize * WAYS + cand.trailing_zeros() as usize;
            p.k0 = self.keys[self.entry_of(slot) * (self.n + 1)];
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
            // The first word of the first candidate's entry was read by
            // `probe_touch` (for n = 0 it is the megaflow index: the
            // comparison is skipped).
            let slot = b * WAYS + cand.trailing_zeros() as usize;
            let e = self.entry_of(slot);
            if (self.n == 0 || p.k0 == g[0]) && keys_equal(self.key_of(e), g) {
                return Some(self.flow_of(e));
            }
            cand &= cand - 1;
        }
        self.probe(g, h, b, cand)
            .map(|s| self.flow_of(self.entry_of(s)))
    }

    /// Looks up every packet of `keys` whose bit is set in `todo`; writes
    /// the megaflow index of each hit into `out` and returns the bitmap of
    /// hits. See the module documentation for the passes.
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

    /// True when `packet` falls inside entry `e` (false for an entry that
    /// does not exist).
    #[inline(always)]
    pub fn entry_matches(&self, e: u32, packet: &FlowKey) -> bool {
        let r = e as usize * (self.n + 1);
        let Some(k) = self.keys.get(r..r + self.n) else {
            return false;
        };
        let mut diff = 0u64;
        for ((&w, &m), &v) in self.words.iter().zip(&self.mvals).zip(k) {
            diff |= (packet.w[w as usize & (FLOW_WORDS - 1)] & m) ^ v;
        }
        diff == 0
    }

    /// Starts loading entry `e`'s first line.
    #[inline(always)]
    pub fn prefetch_entry(&self, e: u32) {
        if let Some(x) = self.keys.get(e as usize * (self.n + 1)) {
            prefetch(x);
        }
    }

    /// The masked key of entry `e`, expanded to a whole [`FlowKey`] (zero
    /// outside the mask), if the entry exists.
    pub fn entry_key(&self, e: u32) -> Option<FlowKey> {
        let r = e as usize * (self.n + 1);
        let k = self.keys.get(r..r + self.n)?;
        let mut key = FlowKey::zero();
        for (&w, &v) in self.words.iter().zip(k) {
            key.w[w as usize] = v;
        }
        Some(key)
    }

    /// The megaflow index of entry `e`, if it exists.
    pub fn entry_flow(&self, e: u32) -> Option<u32> {
        ((e as usize) < self.len).then(|| self.flow_of(e as usize))
    }

    /// Inserts the megaflow `flow` with key `key` (masked here); returns
    /// its entry. Grows the index when it would pass half full and the
    /// entries' storage by an eighth when full (allocates: install path
    /// only).
    pub fn insert(&mut self, key: &FlowKey, flow: u32) -> Result<u32, Duplicate> {
        let mut g = [0u64; FLOW_WORDS];
        let h = self.gather(key, &mut g);
        if let Some(s) = self.find(&g[..self.n], h) {
            return Err(Duplicate(self.flow_of(self.entry_of(s))));
        }
        if (self.len + 1) * 2 > self.buckets.len() * WAYS {
            self.rebuild(self.buckets.len() * 2);
        }
        let stride = self.n + 1;
        reserve_gently(&mut self.keys, stride, MIN_ENTRY_STEP * stride);
        let e = self.len as u32;
        self.keys.extend_from_slice(&g[..self.n]);
        self.keys.push(u64::from(flow));
        self.place(h, e);
        self.len += 1;
        Ok(e)
    }

    /// Puts (hash, entry) in the first free slot from its home bucket on.
    fn place(&mut self, h: u32, e: u32) {
        let bm = self.bucket_mask();
        let mut b = h as usize & bm;
        loop {
            let free = self.buckets[b].matches(0);
            if free != 0 {
                let w = free.trailing_zeros() as usize;
                self.buckets[b].hashes[w] = h;
                self.buckets[b].entries[w] = e;
                return;
            }
            b = (b + 1) & bm;
        }
    }

    /// Rebuilds the index with `nb` buckets (a power of two that keeps the
    /// load ≤ 1/2); entries stay where they are.
    fn rebuild(&mut self, nb: usize) {
        let old = std::mem::replace(&mut self.buckets, vec![Bucket::default(); nb]);
        for bucket in &old {
            for (&h, &e) in bucket.hashes.iter().zip(&bucket.entries) {
                if h != 0 {
                    self.place(h, e);
                }
            }
        }
    }

    fn move_slot(&mut self, from: usize, to: usize) {
        let (fb, fw, tb, tw) = (from / WAYS, from % WAYS, to / WAYS, to % WAYS);
        self.buckets[tb].hashes[tw] = self.buckets[fb].hashes[fw];
        self.buckets[tb].entries[tw] = self.buckets[fb].entries[fw];
        self.buckets[fb].hashes[fw] = 0;
    }

    /// The hash of entry `e`'s key (as stored in its slot).
    fn hash_of(&self, e: usize) -> u32 {
        nonzero(hash_compact(self.key_of(e)))
    }

    /// The slot indexing entry `e`.
    fn slot_of(&self, e: usize) -> Option<usize> {
        let h = self.hash_of(e);
        let bm = self.bucket_mask();
        let mut b = h as usize & bm;
        for _ in 0..self.buckets.len() {
            let bucket = &self.buckets[b];
            let mut m = bucket.matches(h);
            while m != 0 {
                let w = m.trailing_zeros() as usize;
                m &= m - 1;
                if bucket.entries[w] as usize == e {
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

    /// Removes entry `e`: the last entry moves into its place. Returns
    /// what happened, or `None` if there is no entry `e`.
    pub fn remove_entry(&mut self, e: u32) -> Option<Removed> {
        let e = e as usize;
        if e >= self.len {
            return None;
        }
        let s = self.slot_of(e)?;
        let flow = self.flow_of(e);
        self.clear_slot(s);
        let last = self.len - 1;
        let stride = self.n + 1;
        let mut moved = None;
        if e != last {
            // Re-point the last entry's slot, then move its words.
            if let Some(ls) = self.slot_of(last) {
                self.buckets[ls / WAYS].entries[ls % WAYS] = e as u32;
            }
            self.keys
                .copy_within(last * stride..(last + 1) * stride, e * stride);
            moved = Some((self.flow_of(e), e as u32));
        }
        self.keys.truncate(last * stride);
        self.len = last;
        shrink_gently(&mut self.keys, MIN_ENTRY_STEP * stride);
        let mut nb = self.buckets.len();
        while nb > MIN_BUCKETS && self.len * 8 < nb * WAYS {
            nb /= 2;
        }
        if nb != self.buckets.len() {
            self.rebuild(nb);
        }
        Some(Removed { flow, moved })
    }

    /// Removes the entry for `key` (masked here).
    pub fn remove(&mut self, key: &FlowKey) -> Option<Removed> {
        let mut g = [0u64; FLOW_WORDS];
        let h = self.gather(key, &mut g);
        let s = self.find(&g[..self.n], h)?;
        self.remove_entry(self.entry_of(s) as u32)
    }

    /// Megaflow indices of all entries, in entry order.
    pub fn flows(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.len).map(|e| self.flow_of(e))
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
            assert_eq!(
                st.insert(&key(i, i << 4), i as u32),
                Ok(i as u32),
                "entries are dense"
            );
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
            assert_eq!(st.remove(&key(i, i << 4)).map(|r| r.flow), Some(i as u32));
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
        // Where each megaflow's entry is, kept as the megaflow table keeps
        // it: from insert's answer and every removal's `moved`.
        let mut entry: Vec<Option<u32>> = vec![None; n as usize];
        for i in 0..n {
            entry[i as usize] = Some(st.insert(&key(i, 0), i as u32).unwrap());
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
                let r = if round % 2 == 0 {
                    st.remove(&key(i, 0))
                } else {
                    entry[i as usize].and_then(|e| st.remove_entry(e))
                };
                assert_eq!(r.is_some(), present[i as usize]);
                if let Some(r) = r {
                    assert_eq!(r.flow, i as u32);
                    entry[i as usize] = None;
                    if let Some((f, e)) = r.moved {
                        entry[f as usize] = Some(e);
                    }
                }
                present[i as usize] = false;
            }
            for i in 0..n {
                assert_eq!(
                    st.lookup_one(&key(i, 0)),
                    present[i as usize].then_some(i as u32),
                    "round {round} key {i}"
                );
                if let Some(e) = entry[i as usize] {
                    assert_eq!(st.entry_flow(e), Some(i as u32), "round {round} key {i}");
                    assert!(st.entry_matches(e, &key(i, 0)));
                    assert!(!st.entry_matches(e, &key(i + 1, 0)));
                    assert_eq!(st.entry_key(e), Some(key(i, 0)));
                }
            }
        }
        assert_eq!(st.len(), present.iter().filter(|p| **p).count());
        // Emptying it gives the memory back.
        let big = st.heap_bytes();
        for i in 0..n {
            if let Some(e) = entry[i as usize] {
                let r = st.remove_entry(e).unwrap();
                if let Some((f, e)) = r.moved {
                    entry[f as usize] = Some(e);
                }
            }
        }
        assert!(st.is_empty());
        assert!(
            st.heap_bytes() * 100 < big,
            "{} of {big} bytes kept",
            st.heap_bytes()
        );
    }

    #[test]
    fn catchall_mask() {
        let mut st = Subtable::new(&FlowMask::catchall());
        assert_eq!(st.lookup_one(&key(1, 2)), None);
        st.insert(&key(1, 2), 4).unwrap();
        assert_eq!(st.lookup_one(&key(9, 9)), Some(4));
        let mut out = [0u32; BATCH_SIZE];
        assert_eq!(st.lookup_batch(&[key(3, 3)], 1, &mut out), 1);
        assert_eq!(st.remove(&key(0, 0)).map(|r| r.flow), Some(4));
        assert!(st.is_empty());
    }
}
