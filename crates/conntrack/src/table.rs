//! The connection table: connections indexed by both of their tuples,
//! read without locks.
//!
//! What: a connection ([`Conn`]) is found by its original tuple (`key`)
//! and by its reply tuple (`rev_key`). With NAT the reply tuple is not the
//! reverse of the original (a SNAT'd connection 10.0.0.1:1000→8.8.8.8:53
//! expects replies 8.8.8.8:53→192.0.2.1:5000), so the two tuples are two
//! independent index entries, each in the shard its own hash picks, each
//! pointing at the same connection. A connection's *home* shard (its
//! original tuple's) also holds it in a slab slot; the slot number and a
//! generation form the opaque handle the datapath keeps in the packet
//! metadata between recirculations.
//!
//! Layout: each shard's index is an open-addressing array of 64-byte
//! buckets of four entries (a 32-bit tag from the tuple's hash and a
//! pointer to the connection), probed linearly bucket by bucket; at most
//! five eighths of the entries are in use (removed entries are tombstones
//! until the shard's array is rebuilt), so a lookup almost always reads
//! one bucket — one cache line — and then the connection it points to.
//! [`Table::prefetch`] and [`Table::prefetch_conn`] start those two loads
//! ahead of time for a batch of packets.
//!
//! Why shaped so: the previous form (a hash map per shard behind a mutex,
//! connections behind `Arc`s cloned per lookup) cost six atomic
//! read-modify-writes per packet and three to four cache misses per lookup
//! once the table outgrew the caches. Now a lookup takes no lock and
//! changes no shared cache line: readers are protected by epoch-based
//! reclamation (`crossbeam-epoch`, as Open vSwitch's `cmap` relies on RCU):
//! a removed connection, an index array replaced by a rebuild and a slab
//! array replaced by growth are freed only after every thread that could
//! have seen them has left its critical section. Updating a connection's
//! state takes only that connection's own lock. Every change of the index
//! or the slabs (creating, removing, rebuilding) is serialised by one
//! writer lock, as Open vSwitch serialises connection creation with
//! `ct_lock`; creation holds it across "is either tuple taken?" and the
//! two inserts, so two threads committing the same connection, or NAT
//! choosing the same free tuple, cannot race.
//!
//! Invariants:
//! - at most one *live* connection per tuple; an expired connection's
//!   entries may linger until swept or replaced, and lookups ignore them;
//! - a connection is owned by its slab slot (one strong count, given to
//!   the epoch collector when it is removed); index entries are borrowed
//!   pointers valid while the slot holds it or a reader's guard is older
//!   than the removal;
//! - an entry's pointer is written before its tag (release), and a reader
//!   compares the whole tuple with the connection's own, so a reader that
//!   races with a writer sees either the old or the new entry, never a
//!   wrong connection;
//! - [`Table::remove`] succeeds once per connection (the `removed` flag),
//!   so the caller's counters are decremented exactly once.
//!
//! Thread-safety: `Table` is `Send + Sync`; every method takes `&self`.
//! A poisoned writer lock (a panic elsewhere while holding it) is
//! recovered, not propagated: every change leaves the table consistent.
//!
//! Safety: the `unsafe` of the crate lives here, in four kinds of places,
//! each with its argument: dereferencing an index entry's or a slab slot's
//! pointer while pinned; turning a slot's strong count back into an `Arc`
//! to drop or clone it; the epoch's shared pointers to the arrays; the
//! prefetch hint.

#![allow(unsafe_code)]

use crate::key::ConnKey;
use crate::proto::L4;
use crate::Alg;
use crossbeam_epoch::{self as epoch, Atomic, Guard, Owned, Shared};
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

pub use crossbeam_epoch::Guard as TableGuard;

/// The tuples' hasher: a folded multiply per 64-bit word (the product's
/// high and low halves XORed), keyed with a per-table random seed.
///
/// Why not the standard library's SipHash: the table is probed once or
/// twice per packet, and SipHash over a tuple's six words cost more than
/// the rest of the lookup (by `perf`, 20 % of an established packet's
/// cycles). The folded multiply mixes every input bit into the state, and
/// the random seed keeps remote hosts from choosing tuples that collide
/// (the tuples are partly theirs).
struct TupleHasher {
    state: u64,
}

const MUL: u64 = 0x9e37_79b9_7f4a_7c15;

#[inline(always)]
fn folded(a: u64, b: u64) -> u64 {
    let p = u128::from(a).wrapping_mul(u128::from(b));
    (p as u64) ^ ((p >> 64) as u64)
}

impl Hasher for TupleHasher {
    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.state = folded(self.state ^ x, MUL);
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        // (ConnKey writes whole words; anything else goes through here.)
        for c in bytes.chunks(8) {
            let mut b = [0u8; 8];
            for (d, s) in b.iter_mut().zip(c) {
                *d = *s;
            }
            self.write_u64(u64::from_le_bytes(b));
        }
    }
    #[inline]
    fn finish(&self) -> u64 {
        folded(self.state, MUL ^ 0x5555_5555_5555_5555)
    }
}
/// NAT action bits of a connection.
pub mod nat_bits {
    /// Source address translated.
    pub const SRC: u8 = 0x01;
    /// Source port translated.
    pub const SRC_PORT: u8 = 0x02;
    /// Destination address translated.
    pub const DST: u8 = 0x04;
    /// Destination port translated.
    pub const DST_PORT: u8 = 0x08;
}

/// The mutable part of a connection, under its lock.
#[derive(Clone, Copy, Debug)]
pub struct ConnMut {
    /// ct_mark.
    pub mark: u32,
    /// ct_label.
    pub label: u128,
    /// Protocol state.
    pub l4: L4,
}

/// One tracked connection.
#[derive(Debug)]
pub struct Conn {
    /// Original-direction tuple.
    pub key: ConnKey,
    /// Reply-direction tuple (after NAT).
    pub rev_key: ConnKey,
    /// NAT applied to the original direction ([`nat_bits`]).
    pub nat_action: u8,
    /// Helper (ALG) of the connection.
    pub alg: Option<Alg>,
    /// The control connection's tuple, for a connection an ALG expected.
    pub parent: Option<Box<ConnKey>>,
    /// Opaque handle (slot, shard, generation); 0 until inserted.
    pub handle: AtomicU64,
    /// Expiry time in ms; 0 = force-expired.
    pub expiration: AtomicU64,
    /// Set once by the thread that removes it from the table.
    pub removed: AtomicBool,
    /// Mark, label and protocol state.
    pub state: Mutex<ConnMut>,
}

impl Conn {
    /// A new connection record (not yet in a table).
    pub fn new(key: ConnKey, rev_key: ConnKey, l4: L4, expiration: u64) -> Conn {
        Conn {
            key,
            rev_key,
            nat_action: 0,
            alg: None,
            parent: None,
            handle: AtomicU64::new(0),
            expiration: AtomicU64::new(expiration),
            removed: AtomicBool::new(false),
            state: Mutex::new(ConnMut {
                mark: 0,
                label: 0,
                l4,
            }),
        }
    }

    /// Whether the connection's time is up.
    pub fn expired(&self, now_ms: u64) -> bool {
        now_ms >= self.expiration.load(Ordering::Relaxed)
    }

    /// Makes the connection expire now (it stays in the table until swept
    /// or replaced; lookups no longer see it).
    pub fn force_expire(&self) {
        self.expiration.store(0, Ordering::Relaxed);
    }

    /// Locks the mutable state.
    pub fn lock(&self) -> MutexGuard<'_, ConnMut> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Entries per bucket: four 16-byte entries fill a 64-byte cache line.
const WAYS: usize = 4;
/// Buckets of a shard's first index array.
const MIN_BUCKETS: usize = 8;

/// One index entry: the tuple's tag and the connection it belongs to.
/// Empty: tag 0 (a probe stops at a bucket with an empty entry).
/// Tombstone: a tag and a null pointer (a removed connection's; the probe
/// goes on). Live: a tag and a pointer.
#[derive(Default)]
struct Entry {
    tag: AtomicU32,
    /// 1: the entry is the connection's reply tuple (read by writers only,
    /// to rehash on a rebuild).
    reply: AtomicU32,
    conn: AtomicPtr<Conn>,
}

#[derive(Default)]
#[repr(C, align(64))]
struct Bucket {
    e: [Entry; WAYS],
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
}

/// A new, empty index array of at least `n_buckets` buckets, as the word
/// that publishes it.
fn new_index(n_buckets: usize) -> usize {
    let n = n_buckets.max(MIN_BUCKETS).next_power_of_two();
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

/// A slab slot: the connection it owns (one strong count) and the slot's
/// generation (bumped on each reuse, so old handles miss).
#[derive(Default)]
struct Slot {
    gen: AtomicU32,
    conn: AtomicPtr<Conn>,
}

/// One shard: its slab, replaceable as a whole. (Its index word is in
/// [`Table`]'s `index`, packed with the other shards' words.)
struct Shard {
    slab: Atomic<Box<[Slot]>>,
    /// Slots of the slab handed out so far (the rest were never used).
    slots: AtomicUsize,
}

/// A shard's bookkeeping, under the writer lock.
#[derive(Default)]
struct ShardCounts {
    /// Live entries of the index.
    live: usize,
    /// Live entries and tombstones.
    used: usize,
    /// Slots of the slab handed out so far (free ones included).
    slots: usize,
    /// Free slots.
    free: Vec<u32>,
}

/// The writer lock's guard: hold it across the checks that choose tuples
/// and the [`Table::insert`] (see [`Table::insert_guard`]).
pub struct WriteGuard<'a>(MutexGuard<'a, Box<[ShardCounts]>>);

/// Why an insertion failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InsertError {
    /// A live connection already owns one of the tuples.
    Exists,
    /// The home shard has no slot left (2^32 slots).
    Full,
}

/// Handle layout: bit 63 reply, bit 62 related, bits 48..62 generation,
/// bits 32..48 shard, bits 0..32 slot.
const GEN_MASK: u64 = 0x3fff;

/// Builds the handle of slot `slot` of shard `shard`, generation `gen`.
fn make_handle(shard: usize, slot: u32, gen: u32) -> u64 {
    ((u64::from(gen) & GEN_MASK) << 48) | (((shard as u64) & 0xffff) << 32) | u64::from(slot)
}

/// Adds the direction bits a packet's metadata carries to a handle.
pub fn handle_with_dir(handle: u64, reply: bool, related: bool) -> u64 {
    handle | (u64::from(reply) << 63) | (u64::from(related) << 62)
}

/// Splits a metadata handle into (connection handle, reply, related).
pub fn handle_split(h: u64) -> (u64, bool, bool) {
    (h & !(3 << 62), h >> 63 != 0, (h >> 62) & 1 != 0)
}

/// The tag an entry of a tuple with hash `h` carries (never 0).
#[inline(always)]
fn tag_of(h: u64) -> u32 {
    ((h >> 32) as u32) | 1
}

/// Starts loading the cache line at `p` (a hint: never faults, changes
/// nothing).
#[inline(always)]
fn prefetch_ptr(p: *const u8) {
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
    shards: Box<[Shard]>,
    seed: u64,
    writer: Mutex<Box<[ShardCounts]>>,
}

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
        let shards = (0..n)
            .map(|_| Shard {
                slab: Atomic::new(Vec::new().into_boxed_slice()),
                slots: AtomicUsize::new(0),
            })
            .collect();
        let counts = (0..n).map(|_| ShardCounts::default()).collect();
        let index = (0..n)
            .map(|_| AtomicUsize::new(new_index(MIN_BUCKETS)))
            .collect();
        Table {
            index,
            shards,
            seed,
            writer: Mutex::new(counts),
        }
    }

    /// The number of shards.
    pub fn n_shards(&self) -> usize {
        self.shards.len()
    }

    /// The tuple's 64-bit hash (keyed with the table's seed).
    #[inline]
    pub fn hash(&self, k: &ConnKey) -> u64 {
        let mut h = TupleHasher { state: self.seed };
        k.hash(&mut h);
        h.finish()
    }

    /// The hash of a tuple given as the six words its `Hash` writes
    /// (`crate::key::quick_words_v4`): equal to [`Table::hash`] of it.
    #[inline]
    pub fn hash_words(&self, w: &[u64; 6]) -> u64 {
        let mut h = TupleHasher { state: self.seed };
        for x in w {
            h.write_u64(*x);
        }
        h.finish()
    }

    /// The shard of a hash (bits apart from the bucket's and the tag's).
    #[inline(always)]
    fn shard_of(&self, h: u64) -> usize {
        ((h >> 16) as usize) & (self.shards.len() - 1)
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
            if let Some(b) = ix.buckets.get(h as usize & ix.mask) {
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
        let Some(b) = ix.buckets.get(h as usize & ix.mask) else {
            return;
        };
        let tag = tag_of(h);
        for e in &b.e {
            if e.tag.load(Ordering::Relaxed) == tag {
                let p = e.conn.load(Ordering::Relaxed).cast::<u8>().cast_const();
                if !p.is_null() {
                    for off in [0usize, 64, 128, 192] {
                        prefetch_ptr(p.wrapping_add(off));
                    }
                }
            }
        }
    }

    /// The connection (live or not) owning tuple `k` of hash `h`; `true`:
    /// `k` is its reply tuple.
    #[inline]
    fn find<'g>(&self, k: &ConnKey, h: u64, g: &'g Guard) -> Option<(&'g Conn, bool)> {
        let ix = self.index_of(h, g)?;
        let tag = tag_of(h);
        let mut b = h as usize & ix.mask;
        for _ in 0..=ix.mask {
            let bucket = ix.buckets.get(b)?;
            let mut open = false;
            for e in &bucket.e {
                let t = e.tag.load(Ordering::Acquire);
                if t == tag {
                    let p = e.conn.load(Ordering::Acquire);
                    // SAFETY: a non-null entry pointer came from a slab
                    // slot's `Arc::into_raw`; the connection is freed only
                    // through the epoch collector after it was unlinked
                    // from every entry and slot, i.e. not while `g`, pinned
                    // before this load, lives.
                    if let Some(c) = unsafe { p.as_ref() } {
                        if c.key == *k {
                            return Some((c, false));
                        }
                        if c.rev_key == *k {
                            return Some((c, true));
                        }
                    }
                } else if t == 0 {
                    open = true;
                }
            }
            if open {
                return None;
            }
            b = (b + 1) & ix.mask;
        }
        None
    }

    /// Finds the live connection owning tuple `k`; `true` = `k` is its
    /// reply tuple.
    #[inline]
    pub fn lookup<'g>(&self, k: &ConnKey, now_ms: u64, g: &'g Guard) -> Option<(&'g Conn, bool)> {
        self.lookup_hashed(k, self.hash(k), now_ms, g)
    }

    /// [`Table::lookup`] with the tuple's [`Table::hash`] already known.
    #[inline]
    pub fn lookup_hashed<'g>(
        &self,
        k: &ConnKey,
        h: u64,
        now_ms: u64,
        g: &'g Guard,
    ) -> Option<(&'g Conn, bool)> {
        self.find(k, h, g).filter(|(c, _)| !c.expired(now_ms))
    }

    /// The connection behind a handle, if it is still in the table.
    #[inline]
    pub fn by_handle<'g>(&self, handle: u64, g: &'g Guard) -> Option<&'g Conn> {
        let (h, _, _) = handle_split(handle);
        let shard = ((h >> 32) & 0xffff) as usize;
        let slot = (h & 0xffff_ffff) as usize;
        let gen = ((h >> 48) & GEN_MASK) as u32;
        let sh = self.shards.get(shard)?;
        let slab = sh.slab.load(Ordering::Acquire, g);
        // SAFETY: a slab array is replaced only by growth, which defers
        // freeing the old one past every guard alive now, `g` included.
        let slab = unsafe { slab.as_ref() }?;
        let sl = slab.get(slot)?;
        if sl.gen.load(Ordering::Acquire) != gen {
            return None;
        }
        let p = sl.conn.load(Ordering::Acquire);
        // SAFETY: as in `find`: a slot's pointer is a connection freed only
        // through the epoch collector after being unlinked.
        let c = unsafe { p.as_ref() }?;
        // (The generation and the pointer are two loads: the connection's
        // own handle settles which one this is.)
        (c.handle.load(Ordering::Relaxed) == h).then_some(c)
    }

    /// Takes the writer lock: hold it across the checks that choose tuples
    /// and the [`Table::insert`].
    pub fn insert_guard(&self) -> WriteGuard<'_> {
        WriteGuard(self.writer.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Inserts a connection under both tuples, with the writer lock `w`
    /// held. Expired connections still holding either tuple are removed
    /// first and returned, so the caller can count them out.
    pub fn insert<'g>(
        &self,
        w: &mut WriteGuard<'_>,
        conn: Conn,
        now_ms: u64,
        evicted: &mut Vec<Arc<Conn>>,
        g: &'g Guard,
    ) -> Result<&'g Conn, InsertError> {
        for k in [conn.key, conn.rev_key] {
            match self.find(&k, self.hash(&k), g) {
                Some((c, _)) if !c.expired(now_ms) => return Err(InsertError::Exists),
                Some((c, _)) => {
                    if let Some(old) = self.remove_locked(w, c, g) {
                        evicted.push(old);
                    }
                }
                None => {}
            }
        }
        let h_key = self.hash(&conn.key);
        let home = self.shard_of(h_key);
        let counts = w.0.get_mut(home).ok_or(InsertError::Full)?;
        let slot = match counts.free.pop() {
            Some(i) => i,
            None => {
                let i = u32::try_from(counts.slots).map_err(|_| InsertError::Full)?;
                counts.slots += 1;
                i
            }
        };
        let sh = self.shards.get(home).ok_or(InsertError::Full)?;
        sh.slots.store(counts.slots, Ordering::Relaxed);
        let slab = self.slab_with(sh, slot as usize, g);
        let sl = slab.get(slot as usize).ok_or(InsertError::Full)?;
        let mut gen = (sl.gen.load(Ordering::Relaxed).wrapping_add(1)) & GEN_MASK as u32;
        if gen == 0 {
            gen = 1;
        }
        conn.handle
            .store(make_handle(home, slot, gen), Ordering::Relaxed);
        let p = Arc::into_raw(Arc::new(conn)).cast_mut();
        // SAFETY: `p` was just made from a live `Arc`, whose strong count
        // the slot now holds.
        let c: &'g Conn = unsafe { &*p };
        sl.conn.store(p, Ordering::Release);
        sl.gen.store(gen, Ordering::Release);
        let h_rev = self.hash(&c.rev_key);
        self.link(w, h_key, p, false, g);
        if c.rev_key != c.key {
            // (A tuple that is its own reverse — same address both ways,
            // no ports — has one entry, original direction, which a lookup
            // comparing the original tuple first finds.)
            self.link(w, h_rev, p, true, g);
        }
        Ok(c)
    }

    /// The slab of `sh`, grown (a copy; the old array to the collector)
    /// if it has no slot `slot` yet. Writer lock held.
    fn slab_with<'g>(&self, sh: &Shard, slot: usize, g: &'g Guard) -> &'g [Slot] {
        let cur = sh.slab.load(Ordering::Acquire, g);
        // SAFETY: the writer lock is held, so no other thread replaces the
        // array; readers' copies are freed through the collector.
        let old: &'g [Slot] = unsafe { cur.as_ref() }.map_or(&[], |b| &b[..]);
        if slot < old.len() {
            return old;
        }
        let n = (old.len() * 2).max(slot + 1).max(64);
        let new: Box<[Slot]> = (0..n)
            .map(|i| match old.get(i) {
                Some(s) => Slot {
                    gen: AtomicU32::new(s.gen.load(Ordering::Relaxed)),
                    conn: AtomicPtr::new(s.conn.load(Ordering::Relaxed)),
                },
                None => Slot::default(),
            })
            .collect();
        let new = Owned::new(new).into_shared(g);
        let prev = sh.slab.swap(new, Ordering::AcqRel, g);
        // SAFETY: `prev` is unlinked (the shard points at the new array)
        // and is freed only after every guard that could have loaded it.
        // It owns no connection: the strong counts moved with the pointers.
        unsafe { g.defer_destroy(prev) };
        // SAFETY: just published; replaced only under the writer lock.
        unsafe { new.as_ref() }.map_or(&[], |b| &b[..])
    }

    /// Adds an entry for connection `p` under the tuple of hash `h`,
    /// rebuilding the shard's index first if it would pass 5/8 full.
    /// Writer lock held.
    fn link(&self, w: &mut WriteGuard<'_>, h: u64, p: *mut Conn, reply: bool, g: &Guard) {
        let s = self.shard_of(h);
        let Some(counts) = w.0.get_mut(s) else {
            return;
        };
        let full = self
            .index_at(s, g)
            .is_none_or(|ix| (counts.used + 1) * 8 > ix.entries() * 5);
        if full {
            self.rebuild(s, counts, counts.live + 1, g);
        }
        let Some(ix) = self.index_at(s, g) else {
            return;
        };
        let mut b = h as usize & ix.mask;
        for _ in 0..=ix.mask {
            if let Some(bucket) = ix.buckets.get(b) {
                for e in &bucket.e {
                    if e.conn.load(Ordering::Relaxed).is_null() {
                        if e.tag.load(Ordering::Relaxed) == 0 {
                            counts.used += 1;
                        }
                        e.reply.store(u32::from(reply), Ordering::Relaxed);
                        e.conn.store(p, Ordering::Release);
                        e.tag.store(tag_of(h), Ordering::Release);
                        counts.live += 1;
                        return;
                    }
                }
            }
            b = (b + 1) & ix.mask;
        }
    }

    /// Replaces a shard's index by one sized for `live` entries at most
    /// a third full, holding its live entries (tombstones dropped).
    /// Writer lock held.
    fn rebuild(&self, s: usize, counts: &mut ShardCounts, live: usize, g: &Guard) {
        let Some(word) = self.index.get(s) else {
            return;
        };
        let old_w = word.load(Ordering::Acquire);
        let new_w = new_index((live * 3).div_ceil(WAYS));
        // SAFETY: `new_w` was just made by `new_index`; it is published
        // below and from then on freed only through the collector.
        let Some(ix) = (unsafe { index_from(new_w) }) else {
            return;
        };
        let mut n = 0;
        if let Some(old) = self.index_at(s, g) {
            for e in old.buckets.iter().flat_map(|b| b.e.iter()) {
                let p = e.conn.load(Ordering::Relaxed);
                // SAFETY: a live entry's connection, not freed while the
                // writer lock is held (removal takes it).
                let Some(c) = (unsafe { p.as_ref() }) else {
                    continue;
                };
                let reply = e.reply.load(Ordering::Relaxed) != 0;
                let h = self.hash(if reply { &c.rev_key } else { &c.key });
                let mut b = h as usize & ix.mask;
                'probe: for _ in 0..=ix.mask {
                    if let Some(bucket) = ix.buckets.get(b) {
                        for ne in &bucket.e {
                            if ne.tag.load(Ordering::Relaxed) == 0 {
                                ne.reply.store(u32::from(reply), Ordering::Relaxed);
                                ne.conn.store(p, Ordering::Relaxed);
                                ne.tag.store(tag_of(h), Ordering::Relaxed);
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

    /// [`Table::remove`] with the writer lock held; returns a counted
    /// reference to the removed connection.
    fn remove_locked(&self, w: &mut WriteGuard<'_>, conn: &Conn, g: &Guard) -> Option<Arc<Conn>> {
        if conn.removed.swap(true, Ordering::AcqRel) {
            return None;
        }
        conn.force_expire();
        let me: *const Conn = conn;
        for (k, reply) in [(&conn.key, false), (&conn.rev_key, true)] {
            let h = self.hash(k);
            let s = self.shard_of(h);
            let (Some(ix), Some(counts)) = (self.index_at(s, g), w.0.get_mut(s)) else {
                continue;
            };
            let mut b = h as usize & ix.mask;
            'probe: for _ in 0..=ix.mask {
                let Some(bucket) = ix.buckets.get(b) else {
                    break;
                };
                let mut open = false;
                for e in &bucket.e {
                    if std::ptr::eq(e.conn.load(Ordering::Relaxed), me)
                        && (e.reply.load(Ordering::Relaxed) != 0) == reply
                    {
                        // A tombstone: the tag stays, the probe goes on.
                        e.conn.store(std::ptr::null_mut(), Ordering::Release);
                        counts.live -= 1;
                        break 'probe;
                    }
                    open |= e.tag.load(Ordering::Relaxed) == 0;
                }
                if open {
                    break;
                }
                b = (b + 1) & ix.mask;
            }
        }
        let h = conn.handle.load(Ordering::Relaxed);
        let shard = ((h >> 32) & 0xffff) as usize;
        let slot = (h & 0xffff_ffff) as u32;
        let sh = self.shards.get(shard)?;
        // SAFETY: see `by_handle`.
        let slab = unsafe { sh.slab.load(Ordering::Acquire, g).as_ref() }?;
        let sl = slab.get(slot as usize)?;
        if !std::ptr::eq(sl.conn.load(Ordering::Relaxed), me) {
            return None;
        }
        sl.conn.store(std::ptr::null_mut(), Ordering::Release);
        if let Some(counts) = w.0.get_mut(shard) {
            counts.free.push(slot);
        }
        // SAFETY: the slot held one strong count of this connection (from
        // `Arc::into_raw` at insertion); it is taken back exactly once,
        // here, after the slot was cleared.
        let owned = unsafe { Arc::from_raw(me) };
        let counted = Arc::clone(&owned);
        // Readers pinned now may still hold `conn`: the slot's count is
        // dropped only after they unpin.
        g.defer(move || drop(owned));
        Some(counted)
    }

    /// A counted reference to every connection in shard `i`'s slab that
    /// `keep` accepts; returns how many slots it looked at.
    fn collect_shard(
        &self,
        i: usize,
        out: &mut Vec<Arc<Conn>>,
        keep: impl Fn(&Conn) -> bool,
    ) -> usize {
        let g = pin();
        let Some(sh) = self.shards.get(i) else {
            return 0;
        };
        // SAFETY: see `by_handle`.
        let Some(slab) = (unsafe { sh.slab.load(Ordering::Acquire, &g).as_ref() }) else {
            return 0;
        };
        let n = sh.slots.load(Ordering::Relaxed).min(slab.len());
        for sl in slab.iter().take(n) {
            let p = sl.conn.load(Ordering::Acquire);
            // SAFETY: see `by_handle`: pinned, so not yet freed.
            if let Some(c) = unsafe { p.as_ref() } {
                if keep(c) {
                    // SAFETY: the connection's strong count is at least
                    // one until its deferred drop, which waits for `g`.
                    unsafe { Arc::increment_strong_count(p) };
                    // SAFETY: the count just taken is this `Arc`'s.
                    out.push(unsafe { Arc::from_raw(p) });
                }
            }
        }
        n
    }

    /// Every connection in the table (expired ones included), shard by
    /// shard. Allocates: for dumps and flushes, not for packets.
    pub fn all(&self) -> Vec<Arc<Conn>> {
        let mut out = Vec::new();
        for i in 0..self.shards.len() {
            self.collect_shard(i, &mut out, |_| true);
        }
        out
    }

    /// The expired connections of shards `from..to`.
    pub fn expired_in(&self, from: usize, to: usize, now_ms: u64) -> Vec<Arc<Conn>> {
        let mut out = Vec::new();
        for i in from..to.min(self.shards.len()) {
            self.expired_in_shard(i, now_ms, &mut out);
        }
        out
    }

    /// Appends shard `i`'s expired connections to `out`; returns how many
    /// slots it looked at.
    pub fn expired_in_shard(&self, i: usize, now_ms: u64, out: &mut Vec<Arc<Conn>>) -> usize {
        self.collect_shard(i, out, |c| c.expired(now_ms))
    }

    /// Live index entries (two per connection), index entries in all
    /// (capacity) and slab slots, for the memory estimate.
    pub fn index_sizes(&self) -> (usize, usize, usize) {
        let g = pin();
        let w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let mut entries = 0;
        let mut cap = 0;
        let mut slots = 0;
        for (i, (sh, counts)) in self.shards.iter().zip(w.iter()).enumerate() {
            entries += counts.live;
            if let Some(ix) = self.index_at(i, &g) {
                cap += ix.entries();
            }
            // SAFETY: as above.
            if let Some(s) = unsafe { sh.slab.load(Ordering::Acquire, &g).as_ref() } {
                slots += s.len();
            }
        }
        (entries, cap, slots)
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no other thread can reach the table, so the
        // arrays and connections can be taken without a guard.
        let g = unsafe { epoch::unprotected() };
        for sh in self.shards.iter() {
            let slab = sh.slab.swap(Shared::null(), Ordering::AcqRel, g);
            if !slab.is_null() {
                // SAFETY: as above; the array was made by `Owned::new`.
                let slab = unsafe { slab.into_owned() };
                for sl in slab.iter() {
                    let p = sl.conn.load(Ordering::Relaxed);
                    if !p.is_null() {
                        // SAFETY: the slot's strong count (see `insert`).
                        drop(unsafe { Arc::from_raw(p) });
                    }
                }
            }
        }
        for word in self.index.iter() {
            // SAFETY: as above; each word's array is freed once, here (the
            // replaced ones went to the collector); it owns no connection.
            unsafe { free_index(word.swap(0, Ordering::AcqRel)) };
        }
    }
}

/// Bytes of one index entry (tag, direction, pointer).
pub const INDEX_ENTRY_BYTES: usize = std::mem::size_of::<Entry>();
/// Bytes of one slab slot.
pub const SLOT_BYTES: usize = std::mem::size_of::<Slot>();

#[cfg(test)]
mod tests {
    use super::*;
    use crate::other::OtherState;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn key(a: u8, sp: u16) -> ConnKey {
        let mut k = ConnKey {
            proto: 17,
            ..ConnKey::default()
        };
        k.src.addr[0] = a;
        k.dst.addr[0] = 200;
        k.src.port = sp;
        k.dst.port = 53;
        k
    }

    fn conn(k: ConnKey, rev: ConnKey, exp: u64) -> Conn {
        Conn::new(k, rev, L4::Other(OtherState::First), exp)
    }

    fn insert<'g>(t: &Table, c: Conn, now: u64, g: &'g Guard) -> Result<&'g Conn, InsertError> {
        let mut w = t.insert_guard();
        let mut ev = Vec::new();
        t.insert(&mut w, c, now, &mut ev, g)
    }

    #[test]
    fn both_directions_and_nat_reply_tuple() {
        let t = Table::new(8);
        let g = pin();
        let k = key(1, 1000);
        let mut rev = k.reverse();
        rev.dst.addr[0] = 99; // SNAT: replies go to another address
        let c = insert(&t, conn(k, rev, 1000), 0, &g).expect("insert");
        let (f, r) = t.lookup(&k, 10, &g).expect("orig");
        assert!(std::ptr::eq(f, c) && !r);
        let (f, r) = t.lookup(&rev, 10, &g).expect("reply");
        assert!(std::ptr::eq(f, c) && r);
        assert!(t.lookup(&k.reverse(), 10, &g).is_none());
        // The handle finds it; after removal neither tuple nor handle does.
        let h = c.handle.load(Ordering::Relaxed);
        assert_ne!(h, 0);
        assert!(t.by_handle(handle_with_dir(h, true, false), &g).is_some());
        assert!(t.remove(c));
        assert!(!t.remove(c));
        assert!(t.lookup(&k, 10, &g).is_none() && t.lookup(&rev, 10, &g).is_none());
        assert!(t.by_handle(h, &g).is_none());
        assert_eq!(t.index_sizes().0, 0);
    }

    #[test]
    fn duplicates_refused_expired_replaced() {
        let t = Table::new(4);
        let g = pin();
        let k = key(1, 1);
        let a = insert(&t, conn(k, k.reverse(), 100), 0, &g).expect("first");
        let a_handle = a.handle.load(Ordering::Relaxed);
        let dup = conn(k, k.reverse(), 100);
        assert_eq!(insert(&t, dup, 50, &g).err(), Some(InsertError::Exists));
        // After expiry the tuple may be reused; the old one is evicted.
        let mut w = t.insert_guard();
        let mut ev = Vec::new();
        let b = t
            .insert(&mut w, conn(k, k.reverse(), 500), 200, &mut ev, &g)
            .expect("replace");
        drop(w);
        assert_eq!(ev.len(), 1);
        assert!(std::ptr::eq(&*ev[0], a));
        assert!(std::ptr::eq(t.lookup(&k, 300, &g).expect("b").0, b));
        // The old handle does not reach the new connection (its slot is
        // reused with another generation).
        assert!(t.by_handle(a_handle, &g).is_none());
        assert_eq!(t.all().len(), 1);
        assert_eq!(t.expired_in(0, 4, 1000).len(), 1);
    }

    #[test]
    fn a_tuple_that_is_its_own_reverse_has_one_entry() {
        let t = Table::new(2);
        let g = pin();
        let mut k = key(7, 0);
        k.dst = k.src;
        assert_eq!(k, k.reverse());
        let c = insert(&t, conn(k, k, 100), 0, &g).expect("insert");
        assert_eq!(t.index_sizes().0, 1);
        assert!(t
            .lookup(&k, 0, &g)
            .is_some_and(|(f, r)| std::ptr::eq(f, c) && !r));
        assert!(t.remove(c));
        assert_eq!(t.index_sizes().0, 0);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u16, u16, bool),
        Remove(u16),
        Lookup(u16, u16),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0u16..600, 0u16..600, any::<bool>()).prop_map(|(a, b, n)| Op::Insert(a, b, n)),
            2 => (0u16..600).prop_map(Op::Remove),
            2 => (0u16..600, 0u16..600).prop_map(|(a, b)| Op::Lookup(a, b)),
        ]
    }

    fn tuple(i: u16) -> ConnKey {
        let mut k = key((i % 200) as u8, 1000 + i);
        k.dst.port = 53 + (i % 3);
        k
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        // The table against a plain map of tuples: every lookup (by either
        // tuple, by handle), through growth, rebuilds and tombstones.
        #[test]
        fn agrees_with_a_map(ops in prop::collection::vec(op(), 1..1500), shards in 1usize..5) {
            let t = Table::new(shards);
            let g = pin();
            // original tuple id -> (reply tuple, handle)
            let mut model: HashMap<u16, (ConnKey, u64)> = HashMap::new();
            let mut owner: HashMap<ConnKey, (u16, bool)> = HashMap::new();
            for o in ops {
                match o {
                    Op::Insert(a, b, nat) => {
                        let k = tuple(a);
                        let mut rev = tuple(b).reverse();
                        if !nat {
                            rev = k.reverse();
                        }
                        let taken = owner.contains_key(&k) || owner.contains_key(&rev);
                        let r = insert(&t, conn(k, rev, u64::MAX), 0, &g);
                        prop_assert_eq!(r.is_ok(), !taken);
                        if let Ok(c) = r {
                            model.insert(a, (rev, c.handle.load(Ordering::Relaxed)));
                            owner.insert(k, (a, false));
                            owner.entry(rev).or_insert((a, true));
                        }
                    }
                    Op::Remove(a) => {
                        let k = tuple(a);
                        if let Some((c, r)) = t.lookup(&k, 0, &g) {
                            prop_assert!(!r || owner.get(&k).is_some_and(|o| o.1));
                            let (id, _) = owner[&k];
                            let (rev, _) = model[&id];
                            prop_assert!(t.remove(c));
                            owner.remove(&tuple(id));
                            owner.remove(&rev);
                            model.remove(&id);
                        } else {
                            prop_assert!(!owner.contains_key(&k));
                        }
                    }
                    Op::Lookup(a, b) => {
                        for k in [tuple(a), tuple(b).reverse()] {
                            let got = t.lookup(&k, 0, &g);
                            match owner.get(&k) {
                                None => prop_assert!(got.is_none()),
                                Some(&(id, reply)) => {
                                    let (c, r) = got.expect("present");
                                    prop_assert_eq!(r, reply);
                                    prop_assert_eq!(c.key, tuple(id));
                                    let h = model[&id].1;
                                    prop_assert!(t.by_handle(h, &g).is_some_and(|x| std::ptr::eq(x, c)));
                                }
                            }
                        }
                    }
                }
            }
            let (entries, cap, _) = t.index_sizes();
            prop_assert_eq!(entries, owner.len());
            prop_assert!(entries * 8 <= cap * 5);
            prop_assert_eq!(t.all().len(), model.len());
        }
    }

    // Readers on other threads while one thread creates and removes
    // connections: a stable connection is always found, by both tuples
    // and its handle; no lookup ever returns a connection that does not
    // own the tuple it was asked for.
    #[test]
    fn readers_never_see_a_wrong_connection() {
        let t = Arc::new(Table::new(4));
        let stable: Vec<ConnKey> = (0..64).map(|i| key(1, i)).collect();
        let mut handles = Vec::new();
        {
            let g = pin();
            for k in &stable {
                let c = insert(&t, conn(*k, k.reverse(), u64::MAX), 0, &g).expect("stable");
                handles.push(c.handle.load(Ordering::Relaxed));
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|r| {
                let (t, stop, stable, handles) = (
                    Arc::clone(&t),
                    Arc::clone(&stop),
                    stable.clone(),
                    handles.clone(),
                );
                std::thread::spawn(move || {
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) || n < 1000 {
                        let g = pin();
                        for (i, k) in stable.iter().enumerate() {
                            let (c, rep) = t.lookup(k, 0, &g).expect("stable found");
                            assert!(!rep && c.key == *k);
                            let (c2, rep) = t.lookup(&k.reverse(), 0, &g).expect("reply found");
                            assert!(rep && std::ptr::eq(c, c2));
                            assert!(t
                                .by_handle(handles[i], &g)
                                .is_some_and(|x| std::ptr::eq(x, c)));
                        }
                        for j in 0..256u16 {
                            let k = key(2 + r, j);
                            if let Some((c, rep)) = t.lookup(&k, 0, &g) {
                                assert!(if rep { c.rev_key == k } else { c.key == k });
                            }
                        }
                        n += 1;
                    }
                })
            })
            .collect();
        for round in 0..40u16 {
            let g = pin();
            let mut made = Vec::new();
            for j in 0..256u16 {
                for r in 0..2u8 {
                    let k = key(2 + r, j);
                    if let Ok(c) = insert(&t, conn(k, k.reverse(), u64::MAX), 0, &g) {
                        made.push(c);
                    }
                }
            }
            for c in made.iter().skip(usize::from(round % 2)).step_by(2) {
                assert!(t.remove(c));
            }
            for c in made.iter().skip(1 - usize::from(round % 2)).step_by(2) {
                assert!(t.remove(c));
            }
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            r.join().expect("reader");
        }
        assert_eq!(t.all().len(), stable.len());
    }
}
