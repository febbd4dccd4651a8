//! The connection table: connections indexed by both of their tuples,
//! sharded so that packets of different connections rarely contend.
//!
//! What: a connection ([`Conn`]) is found by its original tuple (`key`)
//! and by its reply tuple (`rev_key`). With NAT the reply tuple is not the
//! reverse of the original (a SNAT'd connection 10.0.0.1:1000→8.8.8.8:53
//! expects replies 8.8.8.8:53→192.0.2.1:5000), so the two tuples are two
//! independent index entries, each in the shard its own hash picks, each
//! pointing at the same `Arc<Conn>` and saying which direction it is.
//! A connection's *home* shard (its original tuple's) also holds it in a
//! slab slot; the slot number and a generation form the opaque handle the
//! datapath keeps in the packet metadata between recirculations.
//!
//! Why shaped so: a lookup takes one shard lock for the duration of a hash
//! probe and an `Arc` clone — the per-bucket locking of Open vSwitch's
//! userspace tracker without RCU. Updating a connection's state takes only
//! that connection's own lock. Creating a connection (rare, and the only
//! place that allocates) is serialised by one insertion lock, held across
//! "is either tuple taken?" and the two inserts, so two threads committing
//! the same connection, or NAT choosing the same free tuple, cannot race.
//!
//! Invariants:
//! - at most one *live* connection per tuple; an expired connection's
//!   entries may linger until swept or replaced, and lookups ignore them;
//! - an index entry is removed only by the connection it points to
//!   (`Arc::ptr_eq`), so a stale removal never deletes a successor;
//! - [`Table::remove`] succeeds once per connection (the `removed` flag),
//!   so the caller's counters are decremented exactly once;
//! - no code path holds two shard locks at once (no lock-order deadlock).
//!
//! Thread-safety: `Table` is `Send + Sync`; every method takes `&self`.
//! A poisoned lock (a panic elsewhere while holding it) is recovered, not
//! propagated: the protected data is always left consistent.

use crate::key::ConnKey;
use crate::proto::L4;
use crate::Alg;
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

/// The shards' hasher: a folded multiply per 64-bit word (the product's
/// high and low halves XORed), keyed with a per-table random seed.
///
/// Why not the standard library's SipHash: the table is probed once or
/// twice per packet, and SipHash over a tuple's six words cost more than
/// the rest of the lookup (by `perf`, 20 % of an established packet's
/// cycles). The folded multiply mixes every input bit into the state, and
/// the random seed keeps remote hosts from choosing tuples that collide
/// (the tuples are partly theirs).
#[derive(Clone, Copy)]
struct TupleHasherBuilder {
    seed: u64,
}

struct TupleHasher {
    state: u64,
}

const MUL: u64 = 0x9e37_79b9_7f4a_7c15;

#[inline(always)]
fn folded(a: u64, b: u64) -> u64 {
    let p = u128::from(a).wrapping_mul(u128::from(b));
    (p as u64) ^ ((p >> 64) as u64)
}

impl BuildHasher for TupleHasherBuilder {
    type Hasher = TupleHasher;
    #[inline]
    fn build_hasher(&self) -> TupleHasher {
        TupleHasher { state: self.seed }
    }
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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

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

struct Entry {
    conn: Arc<Conn>,
    reply: bool,
}

struct Slot {
    gen: u16,
    conn: Option<Arc<Conn>>,
}

struct Shard {
    map: HashMap<ConnKey, Entry, TupleHasherBuilder>,
    slab: Vec<Slot>,
    free: Vec<u32>,
}

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
fn make_handle(shard: usize, slot: u32, gen: u16) -> u64 {
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

/// The sharded connection table.
pub struct Table {
    shards: Box<[Mutex<Shard>]>,
    seed: u64,
    insert_lock: Mutex<()>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Table {
    /// A table with `shards` shards (at least 1, at most 65,536).
    pub fn new(shards: usize) -> Table {
        let n = shards.clamp(1, 1 << 16);
        let rs = RandomState::new();
        let mut h = rs.build_hasher();
        h.write_u64(0x5eed);
        let seed = h.finish() | 1;
        let shards = (0..n)
            .map(|_| {
                Mutex::new(Shard {
                    map: HashMap::with_hasher(TupleHasherBuilder { seed: seed ^ MUL }),
                    slab: Vec::new(),
                    free: Vec::new(),
                })
            })
            .collect();
        Table {
            shards,
            seed,
            insert_lock: Mutex::new(()),
        }
    }

    /// The number of shards.
    pub fn n_shards(&self) -> usize {
        self.shards.len()
    }

    /// The shard a tuple lives in: a cheap salted mix (the shard map itself
    /// uses a keyed hash, so a skewed spread only costs contention).
    fn shard_of(&self, k: &ConnKey) -> usize {
        let w = |a: &[u8; 16]| {
            let mut x = 0u64;
            for c in a.chunks_exact(8) {
                let mut b = [0u8; 8];
                b.copy_from_slice(c);
                x ^= u64::from_le_bytes(b);
            }
            x
        };
        let mut h = self.seed;
        for v in [
            w(&k.src.addr),
            w(&k.dst.addr),
            (u64::from(k.src.port) << 16) | u64::from(k.dst.port),
            (u64::from(k.proto) << 32) | (u64::from(k.zone) << 8) | u64::from(k.src.icmp_type),
        ] {
            h = (h ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            h ^= h >> 29;
        }
        (h % self.shards.len() as u64) as usize
    }

    fn shard(&self, i: usize) -> Option<MutexGuard<'_, Shard>> {
        self.shards.get(i).map(lock)
    }

    /// Finds the live connection owning tuple `k`; `true` = `k` is its
    /// reply tuple.
    pub fn lookup(&self, k: &ConnKey, now_ms: u64) -> Option<(Arc<Conn>, bool)> {
        let s = self.shard(self.shard_of(k))?;
        let e = s.map.get(k)?;
        if e.conn.expired(now_ms) {
            return None;
        }
        Some((Arc::clone(&e.conn), e.reply))
    }

    /// The connection behind a handle, if it is still in the table.
    pub fn by_handle(&self, handle: u64) -> Option<Arc<Conn>> {
        let (h, _, _) = handle_split(handle);
        let shard = ((h >> 32) & 0xffff) as usize;
        let slot = (h & 0xffff_ffff) as usize;
        let gen = ((h >> 48) & GEN_MASK) as u16;
        let s = self.shard(shard)?;
        let sl = s.slab.get(slot)?;
        if sl.gen != gen {
            return None;
        }
        sl.conn.clone()
    }

    /// Serialises connection creation: hold the guard across the checks
    /// that choose tuples and the [`Table::insert`].
    pub fn insert_guard(&self) -> MutexGuard<'_, ()> {
        lock(&self.insert_lock)
    }

    /// Whether tuple `k` is owned by a live connection.
    pub fn taken(&self, k: &ConnKey, now_ms: u64) -> bool {
        self.lookup(k, now_ms).is_some()
    }

    /// Inserts a connection under both tuples. The caller holds the
    /// [`Table::insert_guard`]. Expired connections still holding either
    /// tuple are removed first and returned, so the caller can count them
    /// out.
    pub fn insert(
        &self,
        conn: Conn,
        now_ms: u64,
        evicted: &mut Vec<Arc<Conn>>,
    ) -> Result<Arc<Conn>, InsertError> {
        for k in [conn.key, conn.rev_key] {
            let old = {
                let Some(s) = self.shard(self.shard_of(&k)) else {
                    return Err(InsertError::Full);
                };
                match s.map.get(&k) {
                    Some(e) if !e.conn.expired(now_ms) => return Err(InsertError::Exists),
                    Some(e) => Some(Arc::clone(&e.conn)),
                    None => None,
                }
            };
            if let Some(old) = old {
                if self.remove(&old) {
                    evicted.push(old);
                }
            }
        }
        let home = self.shard_of(&conn.key);
        let arc = Arc::new(conn);
        {
            let Some(mut s) = self.shard(home) else {
                return Err(InsertError::Full);
            };
            let slot = match s.free.pop() {
                Some(i) => i,
                None => {
                    let n = s.slab.len();
                    let Ok(i) = u32::try_from(n) else {
                        return Err(InsertError::Full);
                    };
                    s.slab.push(Slot { gen: 0, conn: None });
                    i
                }
            };
            let Some(sl) = s.slab.get_mut(slot as usize) else {
                return Err(InsertError::Full);
            };
            sl.gen = sl.gen.wrapping_add(1) & GEN_MASK as u16;
            if sl.gen == 0 {
                sl.gen = 1;
            }
            sl.conn = Some(Arc::clone(&arc));
            arc.handle
                .store(make_handle(home, slot, sl.gen), Ordering::Relaxed);
        }
        for (k, reply) in [(arc.key, false), (arc.rev_key, true)] {
            if reply && k == arc.key {
                // A tuple that is its own reverse (same address both ways,
                // no ports): one entry, original direction, as a lookup
                // that tries the original tuple first would find it.
                break;
            }
            if let Some(mut s) = self.shard(self.shard_of(&k)) {
                s.map.insert(
                    k,
                    Entry {
                        conn: Arc::clone(&arc),
                        reply,
                    },
                );
            }
        }
        Ok(arc)
    }

    /// Removes a connection from the table. Returns `true` for the one
    /// call that actually removed it.
    pub fn remove(&self, conn: &Arc<Conn>) -> bool {
        if conn.removed.swap(true, Ordering::AcqRel) {
            return false;
        }
        conn.force_expire();
        for k in [conn.key, conn.rev_key] {
            if let Some(mut s) = self.shard(self.shard_of(&k)) {
                if s.map.get(&k).is_some_and(|e| Arc::ptr_eq(&e.conn, conn)) {
                    s.map.remove(&k);
                }
            }
        }
        let h = conn.handle.load(Ordering::Relaxed);
        let shard = ((h >> 32) & 0xffff) as usize;
        let slot = (h & 0xffff_ffff) as u32;
        if let Some(mut s) = self.shard(shard) {
            let hit = s
                .slab
                .get(slot as usize)
                .and_then(|sl| sl.conn.as_ref())
                .is_some_and(|c| Arc::ptr_eq(c, conn));
            if hit {
                if let Some(sl) = s.slab.get_mut(slot as usize) {
                    sl.conn = None;
                }
                s.free.push(slot);
            }
        }
        true
    }

    /// Every connection in the table (expired ones included), shard by
    /// shard. Allocates: for dumps and flushes, not for packets.
    pub fn all(&self) -> Vec<Arc<Conn>> {
        let mut out = Vec::new();
        for m in self.shards.iter() {
            let s = lock(m);
            out.extend(s.slab.iter().filter_map(|sl| sl.conn.clone()));
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
        let Some(s) = self.shard(i) else {
            return 0;
        };
        out.extend(
            s.slab
                .iter()
                .filter_map(|sl| sl.conn.as_ref())
                .filter(|c| c.expired(now_ms))
                .cloned(),
        );
        s.slab.len()
    }

    /// Index entries (two per connection) and slab slots, for the memory
    /// estimate.
    pub fn index_sizes(&self) -> (usize, usize, usize) {
        let mut entries = 0;
        let mut cap = 0;
        let mut slots = 0;
        for m in self.shards.iter() {
            let s = lock(m);
            entries += s.map.len();
            cap += s.map.capacity();
            slots += s.slab.capacity();
        }
        (entries, cap, slots)
    }
}

/// Bytes of one index entry (tuple + pointer + direction), before the hash
/// map's own overhead (one control byte per bucket, load factor ≤ 7/8).
pub const INDEX_ENTRY_BYTES: usize = std::mem::size_of::<(ConnKey, Entry)>();
/// Bytes of one slab slot.
pub const SLOT_BYTES: usize = std::mem::size_of::<Slot>();

#[cfg(test)]
mod tests {
    use super::*;
    use crate::other::OtherState;

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

    #[test]
    fn both_directions_and_nat_reply_tuple() {
        let t = Table::new(8);
        let k = key(1, 1000);
        let mut rev = k.reverse();
        rev.dst.addr[0] = 99; // SNAT: replies go to another address
        let c = Conn::new(k, rev, L4::Other(OtherState::First), 1000);
        let mut ev = Vec::new();
        let g = t.insert_guard();
        let arc = t.insert(c, 0, &mut ev).expect("insert");
        drop(g);
        assert!(ev.is_empty());
        let (f, r) = t.lookup(&k, 10).expect("orig");
        assert!(Arc::ptr_eq(&f, &arc) && !r);
        let (f, r) = t.lookup(&rev, 10).expect("reply");
        assert!(Arc::ptr_eq(&f, &arc) && r);
        assert!(t.lookup(&k.reverse(), 10).is_none());
        // The handle finds it; after removal neither tuple nor handle does.
        let h = arc.handle.load(Ordering::Relaxed);
        assert_ne!(h, 0);
        assert!(t.by_handle(handle_with_dir(h, true, false)).is_some());
        assert!(t.remove(&arc));
        assert!(!t.remove(&arc));
        assert!(t.lookup(&k, 10).is_none() && t.lookup(&rev, 10).is_none());
        assert!(t.by_handle(h).is_none());
        assert_eq!(t.index_sizes().0, 0);
    }

    #[test]
    fn duplicates_refused_expired_replaced() {
        let t = Table::new(4);
        let k = key(1, 1);
        let mut ev = Vec::new();
        let a = t
            .insert(
                Conn::new(k, k.reverse(), L4::Other(OtherState::First), 100),
                0,
                &mut ev,
            )
            .expect("first");
        let dup = Conn::new(k, k.reverse(), L4::Other(OtherState::First), 100);
        assert_eq!(t.insert(dup, 50, &mut ev).err(), Some(InsertError::Exists));
        // After expiry the tuple may be reused; the old one is evicted.
        let again = Conn::new(k, k.reverse(), L4::Other(OtherState::First), 500);
        let b = t.insert(again, 200, &mut ev).expect("replace");
        assert_eq!(ev.len(), 1);
        assert!(Arc::ptr_eq(&ev[0], &a));
        assert!(Arc::ptr_eq(&t.lookup(&k, 300).expect("b").0, &b));
        // The old handle does not reach the new connection.
        assert!(t.by_handle(a.handle.load(Ordering::Relaxed)).is_none());
        assert_eq!(t.all().len(), 1);
        assert_eq!(t.expired_in(0, 4, 1000).len(), 1);
    }
}
