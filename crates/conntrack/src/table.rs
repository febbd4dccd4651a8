//! The connection table: connections found by either of their tuples,
//! read without locks.
//!
//! What: a connection ([`Conn`]) is found by its original tuple (`key`)
//! and by its reply tuple ([`Conn::rev_key`]). A tuple's hash is
//! symmetric (a tuple and its reverse hash alike), so a connection without
//! NAT — whose reply tuple is its original one reversed — needs one index
//! entry, found from either direction. With NAT the reply tuple is not
//! the reverse of the original (a SNAT'd connection 10.0.0.1:1000→
//! 8.8.8.8:53 expects replies 8.8.8.8:53→192.0.2.1:5000), so such a
//! connection has a second entry, marked as the reply tuple's, in the
//! shard its own hash picks. The connection itself lives in a slot of the
//! table's slab (`slab.rs`), filled in order (freed slots first); the slot
//! number and a generation form the opaque handle the datapath keeps in
//! the packet metadata between recirculations.
//!
//! Layout: each shard's index is an open-addressing array of 64-byte
//! buckets of eight 8-byte entries (a 32-bit tag from the tuple's hash,
//! with one bit saying "reply tuple", and the connection's 32-bit slot),
//! probed linearly bucket by bucket from the one the tag's top bits
//! name (so growing the array moves entries without reading their
//! connections); at most three quarters of the
//! entries are in use (removed entries are tombstones until the shard's
//! array is rebuilt), so a lookup almost
//! always reads one bucket — one cache line — and then the connection's
//! two lines. [`Table::prefetch`] and [`Table::prefetch_conn`] start
//! those loads ahead of time for a batch of packets.
//!
//! Memory: a connection without NAT costs its 128-byte slot and one
//! 8-byte entry in an index between three eighths and three quarters
//! full (about 150 bytes in all); with NAT, a second entry and a small
//! allocation holding the reply tuple.
//!
//! Why shaped so: an earlier form (a hash map per shard behind a mutex,
//! connections behind `Arc`s cloned per lookup) cost six atomic
//! read-modify-writes per packet and three to four cache misses per
//! lookup; the next (reference-counted records, 16-byte entries holding
//! pointers, two entries per connection) took no lock but over 300 bytes
//! per connection. Now a lookup takes no lock and changes no shared cache
//! line: readers are protected by epoch-based reclamation
//! (`crossbeam-epoch`, as Open vSwitch's `cmap` relies on RCU): a removed
//! connection's slot is reused, and an index array replaced by a rebuild
//! is freed, only after every thread that could have seen them has left
//! its critical section. Updating a connection's state takes only that
//! connection's own lock. Every change of the index or the slabs
//! (creating, removing, rebuilding) is serialised by one writer lock, as
//! Open vSwitch serialises connection creation with `ct_lock`; creation
//! holds it across "is either tuple taken?" and the inserts, so two
//! threads committing the same connection, or NAT choosing the same free
//! tuple, cannot race.
//!
//! Invariants:
//! - at most one *live* connection per tuple; an expired connection's
//!   entries may linger until swept or replaced, and lookups ignore them;
//! - an entry is one atomic word (tag and location together), so a
//!   reader that races with a writer sees either the old or the new
//!   entry; it compares the whole tuple with the connection's own, so it
//!   never returns a wrong connection;
//! - a connection's handle is published after the rest of its slot and
//!   marked dead when it is removed: [`Table::by_handle`] finds live
//!   connections only, and [`Table::remove`] succeeds once per connection,
//!   so the caller's counters are decremented exactly once.
//!
//! Thread-safety: `Table` is `Send + Sync`; every method takes `&self`.
//! A poisoned writer lock (a panic elsewhere while holding it) is
//! recovered, not propagated: every change leaves the table consistent.
//!
//! Safety: the `unsafe` of this file is of three kinds, each with its
//! argument: reading a slot an index entry or a handle names while
//! pinned; the epoch's deferred freeing of replaced index arrays; the
//! prefetch hint. The slots' own `unsafe` is in `slab.rs`.

#![allow(unsafe_code)]

use crate::key::ConnKey;
use crate::slab::Slab;
use crossbeam_epoch::{self as epoch, Guard};
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::conn::DEAD;
pub use crate::conn::{nat_bits, Conn, ConnMut};
pub use crate::slab::SLOT_BYTES;
pub use crossbeam_epoch::Guard as TableGuard;

/// The tuples' hash: a folded multiply per 64-bit word (the product's
/// high and low halves XORed), keyed with a per-table random seed; each
/// endpoint (address, port, ICMP type and code) is hashed on its own and
/// the two results added, so a tuple and its reverse hash alike.
///
/// Why not the standard library's SipHash: the table is probed once or
/// twice per packet, and SipHash over a tuple's words cost more than the
/// rest of the lookup (by `perf`, 20 % of an established packet's
/// cycles). The folded multiply mixes every input bit into the state, and
/// the random seed keeps remote hosts from choosing tuples that collide
/// (the tuples are partly theirs).
pub(crate) const MUL: u64 = 0x9e37_79b9_7f4a_7c15;

/// The product of `a` and `b` with its high and low halves XORed.
#[inline(always)]
pub(crate) fn folded(a: u64, b: u64) -> u64 {
    let p = u128::from(a).wrapping_mul(u128::from(b));
    (p as u64) ^ ((p >> 64) as u64)
}

/// A tuple as its hash reads it: the source endpoint's three words (the
/// address's two halves, then port, ICMP type and code), the
/// destination's three, and a word of zone, protocol and family.
pub type TupleWords = [u64; 7];

/// The port word of an endpoint.
#[inline(always)]
pub(crate) fn port_word(port: u16, icmp_type: u8, icmp_code: u8) -> u64 {
    (u64::from(port) << 16) | (u64::from(icmp_type) << 8) | u64::from(icmp_code)
}

/// The word of zone, protocol and family.
#[inline(always)]
pub(crate) fn meta_word(zone: u16, proto: u8, v6: bool) -> u64 {
    (u64::from(zone) << 16) | (u64::from(proto) << 8) | u64::from(v6)
}

/// The words of a tuple.
#[inline]
pub fn tuple_words(k: &ConnKey) -> TupleWords {
    let w = |a: &[u8; 16]| {
        let [a0, a1, a2, a3, a4, a5, a6, a7, b0, b1, b2, b3, b4, b5, b6, b7] = *a;
        (
            u64::from_le_bytes([a0, a1, a2, a3, a4, a5, a6, a7]),
            u64::from_le_bytes([b0, b1, b2, b3, b4, b5, b6, b7]),
        )
    };
    let (s0, s1) = w(&k.src.addr);
    let (d0, d1) = w(&k.dst.addr);
    [
        s0,
        s1,
        port_word(k.src.port, k.src.icmp_type, k.src.icmp_code),
        d0,
        d1,
        port_word(k.dst.port, k.dst.icmp_type, k.dst.icmp_code),
        meta_word(k.zone, k.proto, k.v6),
    ]
}

/// Entries per bucket: eight 8-byte entries fill a 64-byte cache line.
const WAYS: usize = 8;
/// Buckets of a shard's first index array.
const MIN_BUCKETS: usize = 4;
/// An entry's location for a removed connection (a tombstone).
const NONE: u32 = u32::MAX;

/// One index entry, one atomic word: low half the tag (bit 0 always set,
/// bits 1-2 the entry's kind), high half the connection's slot. Empty: 0
/// (a probe stops at an empty entry: entries are filled in probe order
/// and emptied only by a rebuild, so none of the tuple's can follow it).
/// Tombstone: a tag and [`NONE`] (the probe goes on).
type Entry = AtomicU64;

/// Entry kind: the original tuple of a connection under NAT.
const KIND_ORIG: u32 = 0;
/// Entry kind: the reply tuple of a connection under NAT.
pub(crate) const KIND_REPLY: u32 = 2;
/// Entry kind: both tuples of a connection without NAT (its reply tuple
/// is the original reversed, which hashes alike).
pub(crate) const KIND_BOTH: u32 = 4;
/// The kind bits of a tag.
const KIND_MASK: u32 = 6;

#[derive(Default)]
#[repr(C, align(64))]
struct Bucket {
    e: [Entry; WAYS],
}

/// The tag of hash `h` with every kind bit set (what a probe compares
/// an entry's tag ORed with the kind bits to).
#[inline(always)]
fn tag_of(h: u64) -> u32 {
    ((h >> 32) as u32) | 1 | KIND_MASK
}

/// The entry word for tuple hash `h`, location `loc`, kind `kind`.
#[inline(always)]
fn entry_word(h: u64, loc: u32, kind: u32) -> u64 {
    let t = (tag_of(h) & !KIND_MASK) | kind;
    (u64::from(loc) << 32) | u64::from(t)
}

/// A shard's index array (a power of two of buckets), as a reader sees
/// it. The array itself is published as one word: its address (64-byte
/// aligned) with log2 of its length in the six low bits, so a reader
/// finds its bucket with one load and no header to read first.
struct Index<'g> {
    mask: usize,
    buckets: &'g [Bucket],
}

impl Index<'_> {
    fn entries(&self) -> usize {
        self.buckets.len() * WAYS
    }

    /// The first bucket a tuple of hash `h` is probed from: the top bits
    /// of its tag (see [`Index::bucket_of_tag`]).
    #[inline(always)]
    fn bucket(&self, h: u64) -> usize {
        self.bucket_of_tag((h >> 32) as u32)
    }

    /// The first bucket of an entry whose tag is `t`: the tag's top log2
    /// (buckets) bits (a multiply-shift by the power-of-two length). The
    /// kind and marker bits (0 to 2) never reach them while an array has
    /// at most 2^29 buckets ([`MAX_BUCKETS`]), so a rebuild places an entry
    /// from its own word, without reading its connection.
    #[inline(always)]
    fn bucket_of_tag(&self, t: u32) -> usize {
        ((u64::from(t) * (self.mask as u64 + 1)) >> 32) as usize
    }
}

/// The most buckets of one shard's index array (see
/// [`Index::bucket_of_tag`]).
const MAX_BUCKETS: usize = 1 << 29;

/// A new, empty index array of at least `n_buckets` buckets, as the word
/// that publishes it.
fn new_index(n_buckets: usize) -> usize {
    let n = n_buckets
        .clamp(MIN_BUCKETS, MAX_BUCKETS)
        .next_power_of_two();
    let b: Box<[Bucket]> = (0..n).map(|_| Bucket::default()).collect();
    let p = Box::into_raw(b).cast::<Bucket>();
    (p as usize) | (n.trailing_zeros() as usize)
}

/// The array a published word names (see [`Index`]).
///
/// # Safety
///
/// `w` is 0 or a word from [`new_index`] whose array has not been freed,
/// and stays so for `'g`.
unsafe fn index_from<'g>(w: usize) -> Option<Index<'g>> {
    if w == 0 {
        return None;
    }
    let len = 1usize << (w & 63);
    let p = (w & !63) as *const Bucket;
    // SAFETY: `new_index` made `len` initialised buckets at `p` (a
    // `Box<[Bucket]>` of that length), alive for 'g by the caller's word.
    let buckets = unsafe { std::slice::from_raw_parts(p, len) };
    Some(Index {
        mask: len - 1,
        buckets,
    })
}

/// Frees the array a published word names.
///
/// # Safety
///
/// `w` came from [`new_index`], is no longer reachable by any reader, and
/// is freed once.
unsafe fn free_index(w: usize) {
    if w == 0 {
        return;
    }
    let len = 1usize << (w & 63);
    let p = (w & !63) as *mut Bucket;
    // SAFETY: the caller's contract; this is the `Box<[Bucket]>` of
    // `new_index`, rebuilt with its own address and length.
    drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, len)) });
}

/// A shard's index bookkeeping, under the writer lock.
#[derive(Default)]
struct ShardCounts {
    /// Live entries of the index.
    live: usize,
    /// Live entries and tombstones.
    used: usize,
}

/// What the writer lock guards.
struct Writer {
    /// Per shard, its index's counts.
    shards: Box<[ShardCounts]>,
    /// Free slots (their connections' readers are gone).
    free: Vec<u32>,
}

/// The writer lock's guard: hold it across the checks that choose tuples
/// and the [`Table::insert`] (see [`Table::insert_guard`]).
pub struct WriteGuard<'a>(MutexGuard<'a, Writer>);

/// Why an insertion failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InsertError {
    /// A live connection already owns one of the tuples.
    Exists,
    /// No slot left (2^32 - 1 connections), or no memory for another
    /// chunk.
    Full,
}

/// Handle layout: bit 63 reply, bit 62 related, bits 48..62 generation,
/// bits 0..32 slot.
const GEN_MASK: u64 = 0x3fff;

/// Builds the handle of slot `slot`, generation `gen`.
fn make_handle(slot: u32, gen: u32) -> u64 {
    ((u64::from(gen) & GEN_MASK) << 48) | u64::from(slot)
}

/// Adds the direction bits a packet's metadata carries to a handle.
pub fn handle_with_dir(handle: u64, reply: bool, related: bool) -> u64 {
    handle | (u64::from(reply) << 63) | (u64::from(related) << 62)
}

/// Splits a metadata handle into (connection handle, reply, related).
pub fn handle_split(h: u64) -> (u64, bool, bool) {
    (h & !(3 << 62), h >> 63 != 0, (h >> 62) & 1 != 0)
}

/// Starts loading the cache line at `p` (a hint: never faults, changes
/// nothing).
#[inline(always)]
pub(crate) fn prefetch_ptr(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: PREFETCHT0 is part of SSE, which every x86_64 CPU has; it
        // is a hint that neither faults (even on an invalid address) nor
        // writes memory.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast::<i8>()) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = p;
    }
}

/// The sharded, lock-free-to-read connection table.
pub struct Table {
    /// Per shard, the word publishing its index array (see [`Index`]).
    index: Box<[AtomicUsize]>,
    /// The connections.
    slab: Slab,
    seed: u64,
    writer: Mutex<Writer>,
    /// Slots of removed connections whose readers are gone (filled by
    /// the epoch collector, emptied into the free list by the writer).
    reclaimed: Arc<Mutex<Vec<u32>>>,
}

// SAFETY: the slabs' cells are written only by the writer (writer lock)
// into slots no reader can reach (see `slab.rs`); everything else a
// reader touches is atomic or behind a lock.
unsafe impl Sync for Slab {}
// SAFETY: a slab owns its chunks and the connections in them, which are
// `Send`; nothing in it is tied to a thread.
unsafe impl Send for Slab {}

/// Pins the calling thread for lock-free reads of a [`Table`]: references
/// a lookup returns live as long as the guard. Cheap when the thread is
/// already pinned (the datapath pins once per batch).
#[inline]
pub fn pin() -> Guard {
    epoch::pin()
}

impl Table {
    /// A table with `shards` shards (rounded up to a power of two, at
    /// most 65,536).
    pub fn new(shards: usize) -> Table {
        let n = shards.clamp(1, 1 << 16).next_power_of_two();
        let rs = RandomState::new();
        let mut h = rs.build_hasher();
        h.write_u64(0x5eed);
        let seed = h.finish() | 1;
        let counts = (0..n).map(|_| ShardCounts::default()).collect();
        let index = (0..n)
            .map(|_| AtomicUsize::new(new_index(MIN_BUCKETS)))
            .collect();
        Table {
            index,
            slab: Slab::new(),
            seed,
            writer: Mutex::new(Writer {
                shards: counts,
                free: Vec::new(),
            }),
            reclaimed: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// The number of index shards.
    pub fn n_shards(&self) -> usize {
        self.index.len()
    }

    /// The number of pieces the slots are swept in
    /// ([`Table::expired_in_unit`]): one per [`SWEEP_UNIT`] slots in use.
    pub fn sweep_units(&self) -> usize {
        self.slab.len().div_ceil(SWEEP_UNIT).max(1)
    }

    /// The tuple's 64-bit hash (keyed with the table's seed; a tuple and
    /// its reverse hash alike).
    #[inline]
    pub fn hash(&self, k: &ConnKey) -> u64 {
        self.hash_words(&tuple_words(k))
    }

    /// The hash of a tuple given as its words ([`tuple_words`], or
    /// `crate::key::quick_words_v4` straight from a frame).
    #[inline]
    pub fn hash_words(&self, w: &TupleWords) -> u64 {
        let side =
            |a: u64, b: u64, p: u64| folded(folded(folded(self.seed ^ a, MUL) ^ b, MUL) ^ p, MUL);
        let s = side(w[0], w[1], w[2]).wrapping_add(side(w[3], w[4], w[5]));
        folded(s ^ w[6], MUL ^ 0x5555_5555_5555_5555)
    }

    /// The shard of a hash (bits apart from the bucket's and the tag's).
    #[inline(always)]
    fn shard_of(&self, h: u64) -> usize {
        ((h >> 16) as usize) & (self.index.len() - 1)
    }

    /// The connection at location `loc` (any occupant, live or not).
    ///
    /// # Safety
    ///
    /// `loc` was read from a live index entry (or is the location of a
    /// connection the caller reached otherwise) while `_g` was pinned: the
    /// slot is not reused before `_g` unpins.
    #[inline(always)]
    unsafe fn conn_at<'a>(&'a self, loc: u32, _g: &'a Guard) -> Option<&'a Conn> {
        // SAFETY: the caller's contract.
        unsafe { self.slab.get(loc as usize) }
    }

    /// The index of hash `h`'s shard, while pinned.
    #[inline(always)]
    fn index_of<'g>(&self, h: u64, g: &'g Guard) -> Option<Index<'g>> {
        self.index_at(self.shard_of(h), g)
    }

    /// Shard `s`'s index, while pinned.
    #[inline(always)]
    fn index_at<'g>(&self, s: usize, _g: &'g Guard) -> Option<Index<'g>> {
        let w = self.index.get(s)?.load(Ordering::Acquire);
        // SAFETY: an index array is replaced only by a rebuild, which
        // defers freeing the old one until every thread pinned now has
        // unpinned; `_g` pins this thread for the reference's lifetime.
        unsafe { index_from(w) }
    }

    /// Starts loading the bucket where tuple hash `h` lives (a batch's
    /// first pass; see [`Table::prefetch_conn`] for the second).
    #[inline]
    pub fn prefetch(&self, h: u64, g: &Guard) {
        if let Some(ix) = self.index_of(h, g) {
            if let Some(b) = ix.buckets.get(ix.bucket(h)) {
                prefetch_ptr((b as *const Bucket).cast());
            }
        }
    }

    /// Starts loading the connections whose entries in hash `h`'s bucket
    /// carry its tag (a batch's second pass, once the bucket is loaded):
    /// the tuples, the expiry time and the state the lookup reads next.
    #[inline]
    pub fn prefetch_conn(&self, h: u64, g: &Guard) {
        let Some(ix) = self.index_of(h, g) else {
            return;
        };
        let Some(b) = ix.buckets.get(ix.bucket(h)) else {
            return;
        };
        let tag = tag_of(h);
        for e in &b.e {
            let v = e.load(Ordering::Relaxed);
            if v == 0 {
                break;
            }
            let loc = (v >> 32) as u32;
            if (v as u32) | KIND_MASK == tag && loc != NONE {
                self.slab.prefetch(loc as usize);
            }
        }
    }

    /// The connection (live or not) owning tuple `k` of hash `h`; `true`:
    /// `k` is its reply tuple.
    #[inline]
    fn find<'a>(&'a self, k: &ConnKey, h: u64, g: &'a Guard) -> Option<(&'a Conn, bool)> {
        let ix = self.index_of(h, g)?;
        let tag = tag_of(h);
        let mut b = ix.bucket(h);
        for _ in 0..=ix.mask {
            let bucket = ix.buckets.get(b)?;
            for e in &bucket.e {
                let v = e.load(Ordering::Acquire);
                let t = v as u32;
                if t | KIND_MASK == tag {
                    let loc = (v >> 32) as u32;
                    if loc == NONE {
                        continue;
                    }
                    // SAFETY: `loc` was just read from a live entry while
                    // `g` was pinned.
                    if let Some(c) = unsafe { self.conn_at(loc, g) } {
                        if let Some(reply) = c.owns(k, t & KIND_MASK) {
                            return Some((c, reply));
                        }
                    }
                } else if t == 0 {
                    return None;
                }
            }
            b = (b + 1) & ix.mask;
        }
        None
    }

    /// Finds the live connection owning tuple `k`; `true` = `k` is its
    /// reply tuple.
    #[inline]
    pub fn lookup<'a>(
        &'a self,
        k: &ConnKey,
        now_ms: u64,
        g: &'a Guard,
    ) -> Option<(&'a Conn, bool)> {
        self.lookup_hashed(k, self.hash(k), now_ms, g)
    }

    /// [`Table::lookup`] with the tuple's [`Table::hash`] already known.
    #[inline]
    pub fn lookup_hashed<'a>(
        &'a self,
        k: &ConnKey,
        h: u64,
        now_ms: u64,
        g: &'a Guard,
    ) -> Option<(&'a Conn, bool)> {
        self.find(k, h, g).filter(|(c, _)| !c.expired(now_ms))
    }

    /// The connection behind a handle, if it is still in the table.
    #[inline]
    pub fn by_handle<'a>(&'a self, handle: u64, _g: &'a Guard) -> Option<&'a Conn> {
        let (h, _, _) = handle_split(handle);
        if h == 0 {
            return None;
        }
        let slot = (h & 0xffff_ffff) as usize;
        if self.slab.handle_of(slot)?.load(Ordering::Acquire) != h {
            return None;
        }
        // SAFETY: the slot's handle is this live connection's (a removed
        // one's is marked dead before its slot can be freed), read with
        // acquire after it was published; its slot is not reused before
        // `_g` unpins.
        unsafe { self.slab.get(slot) }
    }

    /// Takes the writer lock: hold it across the checks that choose tuples
    /// and the [`Table::insert`].
    pub fn insert_guard(&self) -> WriteGuard<'_> {
        WriteGuard(self.writer.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Moves the slots the collector handed back into the free list.
    /// Writer lock held.
    fn take_reclaimed(&self, w: &mut WriteGuard<'_>) {
        let mut r = self.reclaimed.lock().unwrap_or_else(|e| e.into_inner());
        w.0.free.append(&mut r);
    }

    /// The slot the next insertion will fill (writer lock held).
    fn next_slot(&self, w: &WriteGuard<'_>) -> usize {
        w.0.free.last().map_or(self.slab.len(), |&i| i as usize)
    }

    /// Inserts a connection under its tuples, with the writer lock `w`
    /// held. Expired connections still holding either tuple are removed
    /// first and handed to `evicted`, so the caller can count them out.
    pub fn insert<'a>(
        &'a self,
        w: &mut WriteGuard<'_>,
        conn: Conn,
        now_ms: u64,
        evicted: &mut Vec<&'a Conn>,
        g: &'a Guard,
    ) -> Result<&'a Conn, InsertError> {
        let rev = conn.rev_key();
        // (The hash is symmetric: a reply tuple that is the original
        // reversed, as without NAT, hashes as the original.)
        let h_key = self.hash(&conn.key);
        let h_rev = if rev == conn.key.reverse() {
            h_key
        } else {
            self.hash(&rev)
        };
        for (k, h) in [(conn.key, h_key), (rev, h_rev)] {
            match self.find(&k, h, g) {
                Some((c, _)) if !c.expired(now_ms) => return Err(InsertError::Exists),
                Some((c, _)) => {
                    if let Some(old) = self.remove_locked(w, c, g) {
                        evicted.push(old);
                    }
                }
                None => {}
            }
        }
        if w.0.free.is_empty() {
            self.take_reclaimed(w);
        }
        let (slot, reused) = match w.0.free.pop() {
            Some(i) => (i, true),
            None => match u32::try_from(self.slab.len()) {
                Ok(i) if i != NONE => (i, false),
                _ => return Err(InsertError::Full),
            },
        };
        let old = self
            .slab
            .handle_of(slot as usize)
            .map_or(0, |h| h.load(Ordering::Relaxed));
        let mut gen = (((old >> 48) & GEN_MASK) as u32 + 1) & GEN_MASK as u32;
        if gen == 0 {
            gen = 1;
        }
        let natted = conn.natted();
        // SAFETY: the writer lock is held, and the slot is fresh or was
        // handed back by the collector after every reader of its last
        // occupant left.
        let Some(c) = (unsafe { self.slab.put(slot as usize, conn, make_handle(slot, gen)) })
        else {
            if reused {
                w.0.free.push(slot);
            }
            return Err(InsertError::Full);
        };
        let kind = if natted { KIND_ORIG } else { KIND_BOTH };
        self.link(w, h_key, slot, kind, g);
        if natted && rev != c.key {
            // (A tuple that is its own reverse, or a connection without
            // NAT, has one entry: the symmetric hash finds it from both
            // directions.)
            self.link(w, h_rev, slot, KIND_REPLY, g);
        }
        // The next connection's slot, asked for now: writing a connection
        // into lines no cache holds stalls its creator (the fresh slots
        // follow one another, so this is usually the next two lines).
        self.slab.prefetch(self.next_slot(w));
        Ok(c)
    }

    /// Adds an entry for the connection at `loc` under the tuple of hash
    /// `h`, rebuilding the shard's index first if it would pass three
    /// quarters full. Writer lock held.
    fn link(&self, w: &mut WriteGuard<'_>, h: u64, loc: u32, kind: u32, g: &Guard) {
        let s = self.shard_of(h);
        let Some(counts) = w.0.shards.get_mut(s) else {
            return;
        };
        let full = self
            .index_at(s, g)
            .is_none_or(|ix| (counts.used + 1) * 4 > ix.entries() * 3);
        if full {
            self.rebuild(s, counts, counts.live + 1, g);
        }
        let Some(ix) = self.index_at(s, g) else {
            return;
        };
        let mut b = ix.bucket(h);
        for _ in 0..=ix.mask {
            if let Some(bucket) = ix.buckets.get(b) {
                for e in &bucket.e {
                    let v = e.load(Ordering::Relaxed);
                    if v == 0 || (v >> 32) as u32 == NONE {
                        if v == 0 {
                            counts.used += 1;
                        }
                        e.store(entry_word(h, loc, kind), Ordering::Release);
                        counts.live += 1;
                        return;
                    }
                }
            }
            b = (b + 1) & ix.mask;
        }
    }

    /// Replaces a shard's index by one sized for `live` entries at most
    /// three eighths full, holding its live entries (tombstones dropped).
    /// Writer lock held.
    fn rebuild(&self, s: usize, counts: &mut ShardCounts, live: usize, g: &Guard) {
        let Some(word) = self.index.get(s) else {
            return;
        };
        let old_w = word.load(Ordering::Acquire);
        let new_w = new_index((live * 8).div_ceil(3 * WAYS));
        // SAFETY: `new_w` was just made by `new_index`; it is published
        // below and from then on freed only through the collector.
        let Some(ix) = (unsafe { index_from(new_w) }) else {
            return;
        };
        let mut n = 0;
        if let Some(old) = self.index_at(s, g) {
            for e in old.buckets.iter().flat_map(|b| b.e.iter()) {
                let v = e.load(Ordering::Relaxed);
                let loc = (v >> 32) as u32;
                if v == 0 || loc == NONE {
                    continue;
                }
                // (Placed by its tag: the connection is not read, so a
                // rebuild of a large table does not miss the cache once
                // per connection.)
                let mut b = ix.bucket_of_tag(v as u32);
                'probe: for _ in 0..=ix.mask {
                    if let Some(bucket) = ix.buckets.get(b) {
                        for ne in &bucket.e {
                            if ne.load(Ordering::Relaxed) == 0 {
                                ne.store(v, Ordering::Relaxed);
                                n += 1;
                                break 'probe;
                            }
                        }
                    }
                    b = (b + 1) & ix.mask;
                }
            }
        }
        counts.live = n;
        counts.used = n;
        word.store(new_w, Ordering::Release);
        // SAFETY: unlinked just now; freed (once) after every guard that
        // could have loaded the old word. It owns no connection.
        unsafe { g.defer_unchecked(move || free_index(old_w)) };
    }

    /// Removes a connection from the table. Returns `true` for the one
    /// call that actually removed it.
    pub fn remove(&self, conn: &Conn) -> bool {
        let g = pin();
        let mut w = self.insert_guard();
        self.remove_locked(&mut w, conn, &g).is_some()
    }

    /// [`Table::remove`] with the writer lock held; returns the removed
    /// connection (readable until `g` unpins).
    fn remove_locked<'c>(
        &self,
        w: &mut WriteGuard<'_>,
        conn: &'c Conn,
        g: &Guard,
    ) -> Option<&'c Conn> {
        let h = conn.handle.fetch_or(DEAD, Ordering::AcqRel);
        if h & DEAD != 0 || h == 0 {
            return None;
        }
        conn.force_expire();
        let loc = (h & 0xffff_ffff) as u32;
        let rev = conn.rev_key();
        let natted = conn.natted();
        let first = if natted { KIND_ORIG } else { KIND_BOTH };
        let tuples = [(conn.key, first), (rev, KIND_REPLY)];
        let n = if natted && rev != conn.key { 2 } else { 1 };
        for (k, kind) in tuples.iter().take(n) {
            let h = self.hash(k);
            let s = self.shard_of(h);
            let (Some(ix), Some(counts)) = (self.index_at(s, g), w.0.shards.get_mut(s)) else {
                continue;
            };
            let want = entry_word(h, loc, *kind);
            let mut b = ix.bucket(h);
            'probe: for _ in 0..=ix.mask {
                let Some(bucket) = ix.buckets.get(b) else {
                    break;
                };
                let mut open = false;
                for e in &bucket.e {
                    let v = e.load(Ordering::Relaxed);
                    if v == want {
                        // A tombstone: the tag stays, the probe goes on.
                        let tomb = (u64::from(NONE) << 32) | (v & 0xffff_ffff);
                        e.store(tomb, Ordering::Release);
                        counts.live -= 1;
                        break 'probe;
                    }
                    open |= v == 0;
                }
                if open {
                    break;
                }
                b = (b + 1) & ix.mask;
            }
        }
        // The slot goes back to the free list once every reader pinned now
        // has left (one of them may still hold `conn`).
        let reclaimed = Arc::clone(&self.reclaimed);
        g.defer(move || {
            reclaimed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(loc);
        });
        Some(conn)
    }

    /// Every connection in sweep unit `i` (slots `i * SWEEP_UNIT..`) that
    /// `keep` accepts; returns how many slots it looked at.
    fn collect_unit<'a>(
        &'a self,
        i: usize,
        out: &mut Vec<&'a Conn>,
        keep: impl Fn(&Conn) -> bool,
        _g: &'a Guard,
    ) -> usize {
        let from = i.saturating_mul(SWEEP_UNIT);
        let to = from.saturating_add(SWEEP_UNIT).min(self.slab.len());
        for slot in from..to {
            let Some(h) = self.slab.handle_of(slot) else {
                continue;
            };
            let h = h.load(Ordering::Acquire);
            if h == 0 || h & DEAD != 0 {
                continue;
            }
            // SAFETY: a live connection's slot (its handle is not dead),
            // not reused before `_g` unpins.
            if let Some(c) = unsafe { self.slab.get(slot) } {
                if keep(c) {
                    out.push(c);
                }
            }
        }
        to.saturating_sub(from)
    }

    /// Every connection in the table (expired ones included). Allocates:
    /// for dumps and flushes, not for packets.
    pub fn all<'a>(&'a self, g: &'a Guard) -> Vec<&'a Conn> {
        let mut out = Vec::new();
        for i in 0..self.sweep_units() {
            self.collect_unit(i, &mut out, |_| true, g);
        }
        out
    }

    /// The expired connections.
    pub fn expired<'a>(&'a self, now_ms: u64, g: &'a Guard) -> Vec<&'a Conn> {
        let mut out = Vec::new();
        for i in 0..self.sweep_units() {
            self.expired_in_unit(i, now_ms, &mut out, g);
        }
        out
    }

    /// Appends sweep unit `i`'s expired connections to `out`; returns how
    /// many slots it looked at.
    pub fn expired_in_unit<'a>(
        &'a self,
        i: usize,
        now_ms: u64,
        out: &mut Vec<&'a Conn>,
        g: &'a Guard,
    ) -> usize {
        self.collect_unit(i, out, |c| c.expired(now_ms), g)
    }

    /// Live index entries (one per connection, two with NAT), index
    /// entries in all (capacity) and slab slots in use (live, or waiting
    /// for reuse), for the memory estimate.
    pub fn index_sizes(&self) -> (usize, usize, usize) {
        let g = pin();
        let w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let mut entries = 0;
        let mut cap = 0;
        for (i, counts) in w.shards.iter().enumerate() {
            entries += counts.live;
            if let Some(ix) = self.index_at(i, &g) {
                cap += ix.entries();
            }
        }
        (entries, cap, self.slab.len())
    }

    /// Freed slots ready for reuse (handed back by the collector, or in
    /// the free list already).
    #[cfg(test)]
    pub(crate) fn reusable_slots(&self) -> usize {
        let w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let r = self.reclaimed.lock().unwrap_or_else(|e| e.into_inner());
        w.free.len() + r.len()
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        // (The slabs drop their connections and chunks themselves.)
        for word in self.index.iter() {
            // SAFETY: `&mut self`: no reader; each word's array is freed
            // once, here (the replaced ones went to the collector); it owns
            // no connection.
            unsafe { free_index(word.swap(0, Ordering::AcqRel)) };
        }
    }
}

/// Slots per sweep unit: what one [`Table::expired_in_unit`] looks at.
pub const SWEEP_UNIT: usize = 4096;

/// Bytes of one index entry (tag, direction, location).
pub const INDEX_ENTRY_BYTES: usize = std::mem::size_of::<Entry>();

#[cfg(test)]
#[path = "table_tests.rs"]
mod tests;
