//! The megaflow table: a per-worker slab of installed megaflows.
//!
//! What: every megaflow the worker has installed — masked key, mask,
//! datapath actions, statistics, and where it lives in the dpcls — in a
//! slab addressed by [`MegaflowRef`] `{ index, gen }`.
//!
//! Why a slab with generations: the caches (EMC, SMC, DFC) must not hold
//! references (a freed megaflow would dangle or be kept alive) and must not
//! be scanned on every removal. They store an index (+ generation); removal
//! bumps the slot's generation, so a stale [`MegaflowRef`] fails the cheap
//! [`MegaflowTable::is_live`] check. SMC and DFC store the bare index and
//! confirm every hit by a masked compare against the slot's (key, mask):
//! if the slot was reused for another megaflow that also matches the
//! packet, that megaflow is a correct answer too.
//!
//! Layout, by who reads what on the packet path:
//! - `gens`: one `u32` per slot, odd = live. A liveness check (every cache
//!   hit) reads 4 bytes from a compact array (400 KB for 100K megaflows).
//! - `hot`: what a masked compare (SMC, DFC) reads — the word map and the
//!   (mask, key) pairs of the mask's non-zero words, packed, 64-byte
//!   aligned: a megaflow over ≤ 3 words (IPv4 5-tuple: meta, addresses,
//!   ports) is compared from a single cache line.
//! - `stats`: written on every hit, apart so hits do not dirty `hot`.
//! - `cold`: the full key, mask and actions (dump, revalidation, action
//!   execution).
//!
//! Invariants:
//! - a slot is live iff `gens[i]` is odd iff it is not on the free list;
//!   `gens[i]` is the generation of the ref handed out for the live
//!   megaflow in slot `i`;
//! - removal and reuse each bump the generation, so a freed slot's
//!   generation is even (no ref has it) and a reused slot's is new: no stale
//!   ref is ever live;
//! - `key` has no bit outside `mask`; `hot[i]` is derived from `cold[i]`.
//!
//! Threads: owned by one datapath worker; the revalidator's decisions
//! reach it as calls between batches.

use crate::prefetch::prefetch;
use flowpath_flow::{FlowKey, FlowMask, FLOW_WORDS};
use flowpath_ofproto::odp::DpActions;

/// Names an installed megaflow: slab index plus the slot's generation.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct MegaflowRef {
    /// Slot in the megaflow table.
    pub index: u32,
    /// Generation of the slot when the megaflow was installed.
    pub gen: u32,
}

impl MegaflowRef {
    /// A ref that is never live (marks empty cache entries).
    pub const NONE: MegaflowRef = MegaflowRef {
        index: u32::MAX,
        gen: 0,
    };
}

/// Statistics of one megaflow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MegaflowStats {
    /// Packets that hit the megaflow (the packet whose upcall installed it
    /// is not counted, as in OVS).
    pub packets: u64,
    /// Bytes of those packets.
    pub bytes: u64,
    /// Time of the last hit (ms), `None` if never hit.
    pub used_ms: Option<u64>,
    /// Time of installation (ms).
    pub created_ms: u64,
    /// OR of the TCP flags seen.
    pub tcp_flags: u16,
}

/// One megaflow's match and actions.
#[derive(Clone, Debug)]
pub struct Megaflow {
    /// Key, zero outside `mask`.
    pub key: FlowKey,
    /// Significant bits.
    pub mask: FlowMask,
    /// Bitmap of the words of `mask` that are non-zero.
    pub word_map: u16,
    /// The datapath actions.
    pub actions: DpActions,
    /// Input port (the dpcls it lives in).
    pub in_port: u32,
    /// Slot of its subtable in that dpcls.
    pub subtable: u16,
}

impl Megaflow {
    /// True when `packet` falls inside this megaflow (compares only the
    /// mask's non-zero words).
    #[inline(always)]
    pub fn matches(&self, packet: &FlowKey) -> bool {
        let mut map = self.word_map;
        let mut diff = 0u64;
        while map != 0 {
            let i = map.trailing_zeros() as usize;
            map &= map - 1;
            diff |= (packet.w[i] & self.mask.w[i]) ^ self.key.w[i];
        }
        diff == 0
    }
}

/// The compare-side copy of a megaflow: (mask, key) of the non-zero mask
/// words, in word order.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Hot {
    word_map: u16,
    n: u8,
    pairs: [[u64; 2]; FLOW_WORDS],
}

impl Hot {
    fn new(key: &FlowKey, mask: &FlowMask) -> Self {
        let mut h = Hot {
            word_map: word_map(mask),
            n: 0,
            pairs: [[0; 2]; FLOW_WORDS],
        };
        for i in 0..FLOW_WORDS {
            if mask.w[i] != 0 {
                h.pairs[h.n as usize] = [mask.w[i], key.w[i] & mask.w[i]];
                h.n += 1;
            }
        }
        h
    }
}

/// The slab. See the module documentation.
#[derive(Debug, Default)]
pub struct MegaflowTable {
    gens: Vec<u32>,
    hot: Vec<Hot>,
    stats: Vec<MegaflowStats>,
    cold: Vec<Megaflow>,
    free: Vec<u32>,
    n_live: usize,
}

/// Bitmap of the non-zero words of `mask`.
pub fn word_map(mask: &FlowMask) -> u16 {
    let mut map = 0u16;
    for i in 0..FLOW_WORDS {
        if mask.w[i] != 0 {
            map |= 1 << i;
        }
    }
    map
}

impl MegaflowTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of live megaflows.
    pub fn len(&self) -> usize {
        self.n_live
    }

    /// True when no megaflow is live.
    pub fn is_empty(&self) -> bool {
        self.n_live == 0
    }

    /// Slots ever allocated (live + free).
    pub fn capacity(&self) -> usize {
        self.cold.len()
    }

    /// Installs a megaflow; `key` is masked here. Allocates only when the
    /// free list is empty (install happens on the upcall path).
    pub fn insert(
        &mut self,
        key: &FlowKey,
        mask: &FlowMask,
        actions: DpActions,
        in_port: u32,
        subtable: u16,
        now_ms: u64,
    ) -> MegaflowRef {
        let mf = Megaflow {
            key: key.masked(mask),
            mask: *mask,
            word_map: word_map(mask),
            actions,
            in_port,
            subtable,
        };
        let hot = Hot::new(key, mask);
        let st = MegaflowStats {
            created_ms: now_ms,
            ..MegaflowStats::default()
        };
        self.n_live += 1;
        if let Some(i) = self.free.pop() {
            let iu = i as usize;
            self.cold[iu] = mf;
            self.hot[iu] = hot;
            self.stats[iu] = st;
            self.gens[iu] = self.gens[iu].wrapping_add(1);
            MegaflowRef {
                index: i,
                gen: self.gens[iu],
            }
        } else {
            let i = self.cold.len();
            assert!(
                i < u32::MAX as usize,
                "megaflow table index space exhausted"
            );
            self.cold.push(mf);
            self.hot.push(hot);
            self.stats.push(st);
            self.gens.push(1);
            MegaflowRef {
                index: i as u32,
                gen: 1,
            }
        }
    }

    /// True when `r` names a live megaflow.
    #[inline(always)]
    pub fn is_live(&self, r: MegaflowRef) -> bool {
        self.gens.get(r.index as usize) == Some(&r.gen) && r.gen & 1 == 1
    }

    /// The ref of the live megaflow in slot `index`, if any.
    #[inline(always)]
    pub fn live_at(&self, index: u32) -> Option<MegaflowRef> {
        match self.gens.get(index as usize) {
            Some(&gen) if gen & 1 == 1 => Some(MegaflowRef { index, gen }),
            _ => None,
        }
    }

    /// True when `packet` falls inside the megaflow in slot `index` (live
    /// or not: check liveness first). Reads only the packed (mask, key)
    /// pairs of the mask's non-zero words.
    #[inline(always)]
    pub fn matches(&self, index: u32, packet: &FlowKey) -> bool {
        let h = &self.hot[index as usize];
        let mut map = h.word_map;
        let mut diff = 0u64;
        let mut j = 0;
        while map != 0 {
            let i = map.trailing_zeros() as usize;
            map &= map - 1;
            let [m, k] = h.pairs[j];
            diff |= (packet.w[i] & m) ^ k;
            j += 1;
        }
        diff == 0
    }

    /// Starts loading the first line of slot `index`'s compare data, so a
    /// batch can start all its cache misses before comparing any.
    #[inline(always)]
    pub fn prefetch(&self, index: u32) {
        if let Some(h) = self.hot.get(index as usize) {
            prefetch(h);
        }
    }

    /// The megaflow `r` names, if live.
    #[inline(always)]
    pub fn get(&self, r: MegaflowRef) -> Option<&Megaflow> {
        self.is_live(r).then(|| &self.cold[r.index as usize])
    }

    /// The statistics of the megaflow `r` names, if live.
    pub fn stats(&self, r: MegaflowRef) -> Option<&MegaflowStats> {
        self.is_live(r).then(|| &self.stats[r.index as usize])
    }

    /// Replaces the actions of a live megaflow (revalidation). Returns
    /// false if `r` is stale.
    pub fn set_actions(&mut self, r: MegaflowRef, actions: DpActions) -> bool {
        if !self.is_live(r) {
            return false;
        }
        self.cold[r.index as usize].actions = actions;
        true
    }

    /// Records the dpcls subtable a live megaflow was placed in.
    pub fn set_subtable(&mut self, r: MegaflowRef, subtable: u16) {
        if self.is_live(r) {
            self.cold[r.index as usize].subtable = subtable;
        }
    }

    /// Counts a hit. `r` must be live (the caller has just found it).
    #[inline(always)]
    pub fn account(&mut self, r: MegaflowRef, bytes: u32, tcp_flags: u16, now_ms: u64) {
        let s = &mut self.stats[r.index as usize];
        s.packets += 1;
        s.bytes += u64::from(bytes);
        s.used_ms = Some(now_ms);
        s.tcp_flags |= tcp_flags;
    }

    /// Counts `packets` hits totalling `bytes` at once (a run of
    /// consecutive packets of one batch that hit the same megaflow). `r`
    /// must be live.
    #[inline(always)]
    pub fn account_n(
        &mut self,
        r: MegaflowRef,
        packets: u64,
        bytes: u64,
        tcp_flags: u16,
        now_ms: u64,
    ) {
        let s = &mut self.stats[r.index as usize];
        s.packets += packets;
        s.bytes += bytes;
        s.used_ms = Some(now_ms);
        s.tcp_flags |= tcp_flags;
    }

    /// Frees the slot of `r` and returns its megaflow's (in_port,
    /// subtable, key) so the caller can remove it from its dpcls; `None`
    /// if `r` is stale.
    pub fn remove(&mut self, r: MegaflowRef) -> Option<(u32, u16, FlowKey)> {
        if !self.is_live(r) {
            return None;
        }
        let i = r.index as usize;
        self.gens[i] = self.gens[i].wrapping_add(1);
        self.free.push(r.index);
        self.n_live -= 1;
        let e = &mut self.cold[i];
        // Drop the actions now rather than at reuse.
        e.actions = DpActions::new();
        Some((e.in_port, e.subtable, e.key))
    }

    /// Refs of all live megaflows, in slot order.
    pub fn live_refs(&self) -> impl Iterator<Item = MegaflowRef> + '_ {
        (0..self.gens.len() as u32).filter_map(|i| self.live_at(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowpath_ofproto::odp::DpAction;

    fn k(x: u64) -> FlowKey {
        let mut k = FlowKey::zero();
        k.w[1] = x;
        k
    }

    fn m() -> FlowMask {
        let mut m = FlowMask::catchall();
        m.w[1] = 0xff;
        m
    }

    #[test]
    fn insert_get_remove_reuse() {
        let mut t = MegaflowTable::new();
        let a = t.insert(&k(0x1ff), &m(), vec![DpAction::Output(1)], 1, 0, 5);
        assert_eq!(t.get(a).unwrap().key.w[1], 0xff, "key is masked");
        assert_eq!(t.len(), 1);
        assert!(t.get(a).unwrap().matches(&k(0x3ff)));
        assert!(!t.get(a).unwrap().matches(&k(0x3fe)));
        assert!(t.matches(a.index, &k(0x3ff)));
        assert!(!t.matches(a.index, &k(0x3fe)));
        assert_eq!(t.live_at(a.index), Some(a));
        assert_eq!(t.remove(a).map(|x| x.0), Some(1));
        assert!(!t.is_live(a));
        assert!(t.remove(a).is_none(), "double remove is a no-op");
        assert_eq!(t.len(), 0);
        let b = t.insert(&k(2), &m(), vec![], 1, 0, 6);
        assert_eq!(b.index, a.index, "slot reused");
        assert_ne!(b.gen, a.gen);
        assert!(!t.is_live(a), "old ref stays dead after reuse");
        assert!(t.is_live(b));
        assert!(!t.is_live(MegaflowRef::NONE));
        assert_eq!(t.live_refs().collect::<Vec<_>>(), vec![b]);
    }

    #[test]
    fn stats_accumulate() {
        let mut t = MegaflowTable::new();
        let a = t.insert(&k(1), &m(), vec![], 1, 0, 5);
        assert_eq!(t.stats(a).unwrap().used_ms, None);
        t.account(a, 60, 0x02, 7);
        t.account(a, 40, 0x10, 9);
        let s = t.stats(a).unwrap();
        assert_eq!(
            (s.packets, s.bytes, s.used_ms, s.tcp_flags),
            (2, 100, Some(9), 0x12)
        );
        assert!(t.set_actions(a, vec![DpAction::Output(3)]));
        assert_eq!(t.get(a).unwrap().actions, vec![DpAction::Output(3)]);
    }
}
