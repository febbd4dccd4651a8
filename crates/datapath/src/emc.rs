//! EMC: the exact match cache (full packet key → megaflow).
//!
//! What: a small hash table of whole flow keys, each naming the megaflow
//! that last matched it. Default 8192 entries with 2 candidate slots per
//! key (OVS's `EM_FLOW_HASH_SHIFT` 13 and `EM_FLOW_HASH_SEGS` 2: slot `i`
//! is taken from hash bits `13·i .. 13·i+13`). Also configurable as the
//! variant proposed with the DFC patch (1-way, 16K entries).
//!
//! Why this layout: the 32-bit hashes of all entries are stored
//! contiguously, apart from the 128-byte keys, so checking both candidates
//! of a packet touches one or two 4-byte words instead of two key lines
//! (OVS's EMC memory-layout series measured +20 % throughput at 10k flows
//! and +40 % at 100k). A key is read only when its hash matches.
//!
//! Insertion is conditional (OVS's `emc-insert-inv-prob`, default 100): on
//! a miss the key is inserted with probability 1/N (N = 1: always; N = 0:
//! never, the EMC only serves existing entries), drawn from a PRNG held in
//! the EMC, so that many short flows do not thrash it. Replacement prefers
//! an entry whose megaflow is dead or empty, else the candidate with the
//! smaller stored hash (a cheap pseudo-random choice, as OVS).
//!
//! Only a key's words `0..W_CT_FIRST` are stored and compared (128 bytes,
//! two cache lines, as before the key grew its connection-tracking and
//! tunnel words): the extension words `W_CT_FIRST..` are zero in every
//! received packet's key. A key that has them set (a packet recirculated
//! after `ct` or decapsulated by `tnl_pop`: a batch's `ct_packets`) is
//! stored by its first words too, under its hash xor a salt made from its
//! extension words ([`ext_salt`], never 0: its entry is never a candidate
//! for a key without extension words, nor the other way round, and keys
//! that differ only there — one inner flow in several tunnels or
//! connection states — mostly get slots of their own), and a hit on it also checks the megaflow's match on
//! the whole key ([`MegaflowTable::matches`], the mask's words only: a
//! tunnel megaflow's three or four): the entry is exact on the first words
//! and the megaflow decides the rest. Storing and comparing all 40 words
//! would make every EMC hit touch five lines of the entry and of the key.
//!
//! Invariants: an entry whose megaflow ref is not live is empty (checked on
//! every hit against the megaflow table's generation); entries are never
//! trusted without a full key compare (of the stored words, and for a key
//! with extension words the megaflow's match); an entry from a key with
//! extension words is stored under the salted hash, and a lookup says
//! which of its keys have them (the caller's `ext`, the batch's
//! `ct_packets`).
//!
//! Threads: one per worker.

use crate::batch::BATCH_SIZE;
use crate::hash::{insert_threshold, Rng};
use crate::hugepage::HugeVec;
use crate::megaflow::{MegaflowRef, MegaflowTable};
use crate::prefetch::prefetch;
use flowpath_flow::key::W_CT_FIRST;
use flowpath_flow::FlowKey;

/// Default number of entries (OVS: 1 << 13).
pub const EMC_DEFAULT_ENTRIES: usize = 1 << 13;

/// What an entry keeps of a key: its words before the connection-tracking
/// ones (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(64))]
struct EmcKey([u64; W_CT_FIRST]);

impl EmcKey {
    const ZERO: EmcKey = EmcKey([0; W_CT_FIRST]);

    fn of(key: &FlowKey) -> Self {
        let mut k = EmcKey::ZERO;
        k.0.copy_from_slice(&key.w[..W_CT_FIRST]);
        k
    }
}

/// Equality of the stored words as straight-line word compares (no
/// `memcmp` call).
#[inline(always)]
fn key_eq(a: &EmcKey, b: &FlowKey) -> bool {
    a.0.iter().zip(&b.w).fold(0u64, |d, (x, y)| d | (x ^ y)) == 0
}

/// Whether `key` has extension words set (connection-tracking state or
/// tunnel metadata).
#[inline(always)]
fn has_ext(key: &FlowKey) -> bool {
    key.w[W_CT_FIRST..].iter().fold(0u64, |a, &w| a | w) != 0
}

/// What the hash of a key with extension words is xored with (see the
/// module documentation): a multiplicative hash of those words, odd so
/// that it is never 0.
#[inline]
pub fn ext_salt(key: &FlowKey) -> u32 {
    let x = key.w[W_CT_FIRST..]
        .iter()
        .enumerate()
        .fold(0u64, |a, (i, &w)| a ^ w.rotate_left(i as u32 * 7));
    let m = u128::from(x) * 0x9e37_79b9_7f4a_7c15;
    ((m >> 64) as u32 ^ m as u32) | 1
}

/// `key`'s hash for the EMC: `hash`, salted when the key has extension
/// words (`ext`).
#[inline(always)]
fn salted(key: &FlowKey, hash: u32, ext: bool) -> u32 {
    if ext {
        hash ^ ext_salt(key)
    } else {
        hash
    }
}

/// The exact match cache. See the module documentation.
#[derive(Clone, Debug)]
pub struct Emc {
    hashes: HugeVec<u32>,
    flows: HugeVec<MegaflowRef>,
    keys: HugeVec<EmcKey>,
    mask: u32,
    shift: u32,
    ways: u32,
    threshold: Option<u32>,
    rng: Rng,
}

impl Emc {
    /// An empty EMC of `entries` (a power of two, 2..=65536) slots with
    /// `ways` (1 or 2) candidates per key, inserting with probability
    /// 1/`inv_prob`.
    pub fn new(entries: usize, ways: u32, inv_prob: u32, seed: u64) -> Self {
        assert!(
            entries.is_power_of_two() && (2..=1 << 16).contains(&entries),
            "EMC entries must be a power of two in 2..=65536"
        );
        assert!(ways == 1 || ways == 2, "EMC ways must be 1 or 2");
        Emc {
            hashes: HugeVec::new(entries, 0),
            flows: HugeVec::new(entries, MegaflowRef::NONE),
            keys: HugeVec::new(entries, EmcKey::ZERO),
            mask: entries as u32 - 1,
            shift: entries.trailing_zeros(),
            ways,
            threshold: insert_threshold(inv_prob),
            rng: Rng::new(seed),
        }
    }

    /// Bytes of its tables.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.hashes)
            + std::mem::size_of_val(&*self.flows)
            + std::mem::size_of_val(&*self.keys)
    }

    /// Number of slots.
    pub fn entries(&self) -> usize {
        self.hashes.len()
    }

    /// Sets the insertion probability to 1/`inv_prob` (0 = never).
    pub fn set_inv_prob(&mut self, inv_prob: u32) {
        self.threshold = insert_threshold(inv_prob);
    }

    /// Empties every slot.
    pub fn clear(&mut self) {
        self.hashes.iter_mut().for_each(|h| *h = 0);
        self.flows.iter_mut().for_each(|f| *f = MegaflowRef::NONE);
    }

    /// Number of slots naming a live megaflow.
    pub fn occupancy(&self, table: &MegaflowTable) -> usize {
        self.flows.iter().filter(|f| table.is_live(**f)).count()
    }

    #[inline(always)]
    fn slots(&self, hash: u32) -> [usize; 2] {
        let s0 = (hash & self.mask) as usize;
        let s1 = if self.ways == 2 {
            ((hash >> self.shift) & self.mask) as usize
        } else {
            s0
        };
        [s0, s1]
    }

    /// Looks up every packet of `todo`. Writes hits to `out` and returns
    /// their bitmap. First pass: read both candidates' hashes for every
    /// packet; second pass: compare keys and check liveness. `ext` must
    /// name the keys with non-zero extension words (the batch's
    /// `ct_packets`): their hits are checked against the megaflow too.
    #[inline]
    pub fn lookup_batch(
        &self,
        keys: &[FlowKey],
        hashes: &[u32],
        todo: u32,
        ext: u32,
        table: &MegaflowTable,
        out: &mut [MegaflowRef; BATCH_SIZE],
    ) -> u32 {
        // Pass 1: candidate bitmap per packet (bit 0 = slot 0's hash
        // matches, bit 1 = slot 1's). Only the compact hash array is read.
        let mut cand = [0u8; BATCH_SIZE];
        let mut slot = [[0usize; 2]; BATCH_SIZE];
        let mut m = todo;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            let h = salted(&keys[i], hashes[i], ext >> i & 1 != 0);
            let s = self.slots(h);
            slot[i] = s;
            let c = u8::from(self.hashes[s[0]] == h) | (u8::from(self.hashes[s[1]] == h) << 1);
            cand[i] = c;
            // The candidate's key (two cache lines), requested for the whole
            // batch before pass 2 compares any: with 1,000 flows the keys
            // are L2-resident, and perf put ~30 % of the batch loop's
            // samples on pass 2's first loads of them.
            if c != 0 {
                let k = &self.keys[s[usize::from(c & 1 == 0)]];
                prefetch(&k.0[0]);
                prefetch(&k.0[8]);
            }
        }
        // Pass 2: compare keys, check liveness. (Reading the candidate key's
        // first word in pass 1 was measured slower: the EMC's keys are
        // cache-resident in the cases where the EMC helps.)
        let mut found = 0;
        let mut m = todo;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            let e = ext >> i & 1 != 0;
            debug_assert_eq!(e, has_ext(&keys[i]), "the caller names the ext keys");
            let mut c = cand[i];
            while c != 0 {
                let w = c.trailing_zeros() as usize;
                c &= c - 1;
                let s = slot[i][w];
                let f = self.flows[s];
                if key_eq(&self.keys[s], &keys[i])
                    && table.is_live(f)
                    && (!e || table.matches(f.index, &keys[i]))
                {
                    out[i] = f;
                    found |= 1 << i;
                    break;
                }
            }
        }
        found
    }

    /// Inserts (or updates) `key` → `flow` unconditionally (`hash` is the
    /// key's packet hash; salted here when the key has extension words).
    pub fn insert(&mut self, key: &FlowKey, hash: u32, flow: MegaflowRef, table: &MegaflowTable) {
        let hash = salted(key, hash, has_ext(key));
        let [s0, s1] = self.slots(hash);
        let same = |s: usize| self.hashes[s] == hash && key_eq(&self.keys[s], key);
        let free = |s: usize| !table.is_live(self.flows[s]);
        let victim = if self.ways == 1 || same(s0) {
            s0
        } else if same(s1) {
            s1
        } else if free(s0) {
            s0
        } else if free(s1) || self.hashes[s1] < self.hashes[s0] {
            s1
        } else {
            s0
        };
        self.hashes[victim] = hash;
        self.flows[victim] = flow;
        self.keys[victim] = EmcKey::of(key);
    }

    /// Inserts with probability 1/`inv_prob`; returns whether it did.
    #[inline]
    pub fn maybe_insert(
        &mut self,
        key: &FlowKey,
        hash: u32,
        flow: MegaflowRef,
        table: &MegaflowTable,
    ) -> bool {
        match self.threshold {
            Some(t) if self.rng.next_u32() <= t => {
                self.insert(key, hash, flow, table);
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::packet_hash;
    use flowpath_flow::FlowMask;
    use flowpath_odp::DpAction;

    fn key(i: u32) -> FlowKey {
        let mut k = FlowKey::zero();
        k.set_in_port(1);
        k.set_dl_type(0x0800);
        k.set_nw_src(i);
        k
    }

    fn table_with(n: u32) -> (MegaflowTable, Vec<MegaflowRef>) {
        let mut t = MegaflowTable::new();
        let mut full = FlowMask::catchall();
        full.w[0] = u64::MAX;
        full.w[1] = u64::MAX;
        let refs = (0..n)
            .map(|i| t.insert(&key(i), &full, vec![], 0).unwrap().0)
            .collect();
        (t, refs)
    }

    fn lookup(e: &Emc, t: &MegaflowTable, k: &FlowKey) -> Option<MegaflowRef> {
        let mut out = [MegaflowRef::NONE; BATCH_SIZE];
        let ext = u32::from(has_ext(k));
        (e.lookup_batch(
            std::slice::from_ref(k),
            &[packet_hash(k)],
            1,
            ext,
            t,
            &mut out,
        ) == 1)
            .then_some(out[0])
    }

    #[test]
    fn hit_miss_and_generation_invalidation() {
        let (mut t, refs) = table_with(100);
        let mut e = Emc::new(1024, 2, 1, 7);
        for i in 0..100 {
            assert!(e.maybe_insert(&key(i), packet_hash(&key(i)), refs[i as usize], &t));
        }
        // Against the oracle: every hit names the megaflow of exactly that key.
        let mut hits = 0;
        for i in 0..200 {
            match lookup(&e, &t, &key(i)) {
                Some(r) => {
                    assert_eq!(r, refs[i as usize]);
                    hits += 1;
                }
                None => assert!(i >= 100 || e.occupancy(&t) < 100),
            }
        }
        assert!(hits >= 95, "2-way, 10 % load: {hits}");
        t.remove(refs[3]);
        assert_eq!(lookup(&e, &t, &key(3)), None, "dead megaflow is a miss");
        // Its slot is now free and is taken before a live one.
        let r = t
            .insert(&key(3), &FlowMask::catchall(), vec![], 0)
            .unwrap()
            .0;
        e.insert(&key(3), packet_hash(&key(3)), r, &t);
        assert_eq!(lookup(&e, &t, &key(3)), Some(r));
    }

    #[test]
    fn keys_with_extension_words_hit_through_their_megaflow() {
        // Words 0..W_CT_FIRST are stored; a key with extension words is
        // stored under the salted hash and its hits are checked against
        // its megaflow's match on the whole key.
        let mut t = MegaflowTable::new();
        let mut mask = FlowMask::catchall();
        mask.w[0] = u64::MAX;
        mask.w[1] = u64::MAX;
        // The megaflow reads ct_mark (not the tunnel id).
        let mut bits = FlowKey::zero();
        bits.set_ct_mark(u32::MAX);
        for (m, b) in mask.w.iter_mut().zip(&bits.w).skip(W_CT_FIRST) {
            *m |= b;
        }
        let mut a = key(1);
        a.set_ct_mark(5);
        let fa = t.insert(&a, &mask, vec![], 0).unwrap().0;
        let plain = key(1);
        let mut plain_mask = FlowMask::catchall();
        plain_mask.w[0] = u64::MAX;
        plain_mask.w[1] = u64::MAX;
        let fp = t
            .insert(&plain, &plain_mask, vec![DpAction::Output(1)], 0)
            .unwrap()
            .0;
        let mut e = Emc::new(1024, 2, 1, 7);
        assert!(e.maybe_insert(&a, packet_hash(&a), fa, &t));
        assert_eq!(lookup(&e, &t, &a), Some(fa));
        // The same first words without extension words: not this entry
        // (the salt), although they compare equal.
        assert_eq!(lookup(&e, &t, &plain), None);
        // Another ct_mark: outside the megaflow.
        let mut b = key(1);
        b.set_ct_mark(6);
        assert_eq!(lookup(&e, &t, &b), None);
        // A tunnel id the megaflow does not read: inside it, with an
        // entry of its own (another salt).
        let mut d = a;
        d.set_tun_id(9);
        assert_ne!(ext_salt(&d), ext_salt(&a));
        e.insert(&d, packet_hash(&d), fa, &t);
        assert_eq!(lookup(&e, &t, &d), Some(fa));
        assert_eq!(lookup(&e, &t, &a), Some(fa));
        // Both kinds side by side, each finding its own.
        e.insert(&plain, packet_hash(&plain), fp, &t);
        assert_eq!(lookup(&e, &t, &plain), Some(fp));
        assert_eq!(lookup(&e, &t, &a), Some(fa));
        assert_eq!(e.occupancy(&t), 3);
        // Against the oracle: every hit is a megaflow the key falls in.
        for (k, want) in [(a, Some(fa)), (b, None), (d, Some(fa)), (plain, Some(fp))] {
            let got = lookup(&e, &t, &k);
            assert_eq!(got, want);
            if let Some(r) = got {
                assert!(t.get(r).unwrap().matches(&k));
            }
        }
        assert_eq!(e.memory_bytes(), 1024 * (4 + 8 + 128), "two lines a key");
    }

    #[test]
    fn replacement_in_tiny_cache() {
        let (t, refs) = table_with(64);
        for ways in [1, 2] {
            let mut e = Emc::new(4, ways, 1, 1);
            for i in 0..64 {
                e.insert(&key(i), packet_hash(&key(i)), refs[i as usize], &t);
                // The key just inserted is always found.
                assert_eq!(lookup(&e, &t, &key(i)), Some(refs[i as usize]));
            }
            assert!(e.occupancy(&t) <= 4);
            let found = (0..64)
                .filter(|&i| lookup(&e, &t, &key(i)).is_some())
                .count();
            assert!((1..=4).contains(&found), "{found}");
        }
    }

    #[test]
    fn insertion_probability() {
        let (t, refs) = table_with(1);
        let k = key(0);
        let h = packet_hash(&k);
        let count = |inv: u32| {
            let mut e = Emc::new(8192, 2, inv, 42);
            (0..100_000)
                .filter(|_| e.maybe_insert(&k, h, refs[0], &t))
                .count()
        };
        assert_eq!(count(1), 100_000);
        assert_eq!(count(0), 0);
        let n = count(100);
        assert!((900..1100).contains(&n), "1 % of 100000: {n}");
        let mut e = Emc::new(8192, 2, 0, 42);
        assert!(!e.maybe_insert(&k, h, refs[0], &t));
        e.set_inv_prob(1);
        assert!(e.maybe_insert(&k, h, refs[0], &t));
        e.clear();
        assert_eq!(lookup(&e, &t, &k), None);
    }
}
