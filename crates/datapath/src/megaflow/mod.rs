//! The megaflow table: a per-worker slab of installed megaflows, with the
//! dpcls classifiers that index them.
//!
//! What: every megaflow the worker has installed, addressed by
//! [`MegaflowRef`] `{ index, gen }`, and the per-in_port [`Dpcls`]
//! classifiers. A megaflow is stored once, in pieces sized by who reads
//! them:
//! - `hot`: one 64-byte line per megaflow — generation, action-list id,
//!   mask id, dpcls (classifier, subtable) and the key: the mask's non-zero
//!   words of the masked key, inline up to six words (an IPv4 exact-match
//!   megaflow has five; typical megaflows two or three), in a spill slab
//!   beyond. A hit of any tier reads this one line: the EMC's liveness
//!   check and actions, SMC/DFC's masked compare, the dpcls' key compare
//!   (its buckets hold the megaflow index next to the hash).
//! - masks: once per distinct mask (`Masks`, reference-counted by the
//!   megaflows using it), with the list of its non-zero words that a
//!   compare walks.
//! - actions: interned. Megaflows with equal datapath actions share one
//!   immutable list (`ActionTable`, reference-counted, freed with its
//!   last megaflow); the hot line holds its 4-byte id.
//! - `counters`: packets, bytes, last use, TCP flags — 32 bytes, written on
//!   every hit, apart so hits do not dirty the hot lines.
//! - `created`: installation time, cold (dumps and idle expiry only).
//!
//! Why: the caches (EMC, SMC, DFC) must not hold references (a freed
//! megaflow would dangle or be kept alive) and must not be scanned on
//! every removal. They store an index (+ generation); removal bumps the
//! slot's generation, so a stale [`MegaflowRef`] fails the cheap
//! [`MegaflowTable::is_live`] check. SMC and DFC store the bare index and
//! confirm every hit by a masked compare against the megaflow's key: if
//! the slot was reused for another megaflow that also matches the packet,
//! that megaflow is a correct answer too. Storing each piece once, and
//! sharing what megaflows have in common (mask, actions), is what makes a
//! megaflow cost ~150 bytes instead of ~2.5 KB (BENCHMARKS.md, "Memory per
//! megaflow"). The hot lines and counters are on 2 MB pages once they
//! span one ([`crate::hugepage::HugeGrowVec`]: a hit at 100K+ megaflows
//! lands on a random page). Every array grows by an eighth when full (not
//! doubling), free slots form a list threaded through the hot lines, and
//! when the last megaflow goes everything is freed: no allocation per
//! install in the common case, and memory follows the megaflows installed.
//!
//! Invariants:
//! - a slot is live iff its `gen` is odd; a free slot's `actions` is the
//!   next free slot (`NIL` ends the list); `gen` is the generation of the
//!   ref handed out for the live megaflow in the slot;
//! - removal and reuse each bump the generation, and slots created after
//!   the table was emptied start above every generation handed out, so no
//!   stale ref is ever live;
//! - a live slot is indexed by exactly one subtable slot, of the subtable
//!   (`cls`, `sub`), whose mask is the slot's mask id's; its stored words
//!   are its key gathered under that mask;
//! - a live slot's action id and mask id are counted in their tables'
//!   reference counts; a spill record is owned by exactly one live slot.
//!
//! Threads: owned by one datapath worker; the revalidator's decisions
//! reach it as calls between batches.

use crate::batch::BATCH_SIZE;
use crate::dpcls::{Dpcls, InsertError};
use crate::hugepage::HugeGrowVec;
use crate::prefetch::prefetch;
use crate::subtable::{reserve_gently, KeyStore};
use flowpath_flow::key::Word;
use flowpath_flow::{FlowKey, FlowMask, FLOW_WORDS};
use flowpath_odp::{DpAction, DpActions};
use std::collections::HashMap;
use std::sync::Arc;

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
    /// The length of the packet whose upcall installed it (0: none was
    /// counted): not among `packets`, as in OVS's datapath, but the rules
    /// it went through count it (OVS credits it at translation).
    pub upcall_bytes: u32,
}

/// One megaflow's match and actions, as read back from the table (the key
/// and mask are expanded from the subtable's compact entry).
#[derive(Clone, Debug, PartialEq)]
pub struct Megaflow<'a> {
    /// Key, zero outside `mask`.
    pub key: FlowKey,
    /// Significant bits.
    pub mask: FlowMask,
    /// The datapath actions (shared with every megaflow that has them).
    pub actions: &'a [DpAction],
    /// Input port (the dpcls it lives in).
    pub in_port: u32,
    /// Id of its subtable in that dpcls.
    pub subtable: u16,
}

impl Megaflow<'_> {
    /// True when `packet` falls inside this megaflow.
    pub fn matches(&self, packet: &FlowKey) -> bool {
        packet.masked(&self.mask) == self.key
    }
}

/// Why [`MegaflowTable::insert`] installed nothing.
#[derive(Clone, Debug, PartialEq)]
pub enum InstallError {
    /// A megaflow with the same mask and masked key is live: it, and its
    /// subtable.
    Duplicate(MegaflowRef, u16),
    /// The in_port's classifier has no room for another mask: the actions
    /// are given back.
    NoRoom(DpActions),
}

/// Ends the free list.
const NIL: u32 = u32::MAX;

/// Hot lines, counters and creation times grow by at least this many.
const MIN_STEP: usize = 256;

/// Key words kept in the hot line; longer keys go to the spill slab.
const INLINE: usize = 6;

/// What a hit reads: one cache line. See the module documentation.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Hot {
    gen: u32,
    /// Action-list id (live) or the next free slot (free).
    actions: u32,
    /// Mask id (`Masks`).
    mask: u16,
    /// Classifier position and subtable id in it.
    cls: u16,
    sub: u16,
    _pad: u16,
    /// The key's words under the mask (n ≤ `INLINE`), or in `key[0]` the
    /// index of its spill record.
    key: [u64; INLINE],
}

impl Hot {
    const FREE: Hot = Hot {
        gen: 0,
        actions: NIL,
        mask: 0,
        cls: 0,
        sub: 0,
        _pad: 0,
        key: [0; INLINE],
    };
}

/// The hot lines and the spill slab: where the dpcls finds megaflows'
/// keys.
#[derive(Debug)]
struct Records {
    hot: HugeGrowVec<Hot>,
    spill: Vec<[u64; FLOW_WORDS]>,
    spill_free: Vec<u32>,
}

impl Default for Records {
    fn default() -> Self {
        Records {
            hot: HugeGrowVec::new(MIN_STEP),
            spill: Vec::new(),
            spill_free: Vec::new(),
        }
    }
}

impl KeyStore for Records {
    #[inline(always)]
    fn words(&self, flow: u32, n: usize) -> &[u64] {
        // `flow` comes from a subtable slot: a live slot by the invariants.
        let h = &self.hot[flow as usize];
        if n <= INLINE {
            &h.key[..n]
        } else {
            &self.spill[h.key[0] as usize][..n]
        }
    }

    fn set_words(&mut self, flow: u32, words: &[u64]) {
        let n = words.len();
        if n <= INLINE {
            self.hot[flow as usize].key[..n].copy_from_slice(words);
            return;
        }
        let i = match self.spill_free.pop() {
            Some(i) => i as usize,
            None => {
                reserve_gently(&mut self.spill, 1, 16);
                self.spill.push([0; FLOW_WORDS]);
                self.spill.len() - 1
            }
        };
        self.spill[i][..n].copy_from_slice(words);
        self.hot[flow as usize].key[0] = i as u64;
    }
}

impl Records {
    /// Frees slot `flow`'s spill record, if its key (of `n` words) has one.
    fn release_spill(&mut self, flow: u32, n: usize) {
        if n > INLINE {
            let i = self.hot[flow as usize].key[0];
            self.spill_free.push(i as u32);
        }
    }
}

/// One distinct mask, and what a masked compare walks: its non-zero
/// words and their mask values.
#[derive(Clone, Copy, Debug)]
struct MaskView {
    mask: FlowMask,
    n: usize,
    words: [Word; FLOW_WORDS],
    mvals: [u64; FLOW_WORDS],
}

impl MaskView {
    fn new(mask: &FlowMask) -> Self {
        let mut v = MaskView {
            mask: *mask,
            n: 0,
            words: [Word::W0; FLOW_WORDS],
            mvals: [0; FLOW_WORDS],
        };
        for (&w, &m) in Word::ALL.iter().zip(&mask.w) {
            if m != 0 {
                v.words[v.n] = w;
                v.mvals[v.n] = m;
                v.n += 1;
            }
        }
        v
    }
}

/// The distinct masks of the live megaflows, reference-counted.
#[derive(Debug, Default)]
struct Masks {
    views: Vec<MaskView>,
    refs: Vec<u32>,
    by_mask: HashMap<FlowMask, u16>,
    free: Vec<u16>,
}

impl Masks {
    /// The id of `mask`, adding a reference; `None` if 65,535 distinct
    /// masks are live.
    fn acquire(&mut self, mask: &FlowMask) -> Option<u16> {
        if let Some(&id) = self.by_mask.get(mask) {
            self.refs[id as usize] += 1;
            return Some(id);
        }
        let id = match self.free.pop() {
            Some(id) => {
                self.views[id as usize] = MaskView::new(mask);
                self.refs[id as usize] = 1;
                id
            }
            None if self.views.len() < usize::from(u16::MAX) => {
                self.views.push(MaskView::new(mask));
                self.refs.push(1);
                (self.views.len() - 1) as u16
            }
            None => return None,
        };
        self.by_mask.insert(*mask, id);
        Some(id)
    }

    /// Drops a reference; the mask is forgotten with its last one.
    fn release(&mut self, id: u16) {
        let i = id as usize;
        self.refs[i] -= 1;
        if self.refs[i] == 0 {
            self.by_mask.remove(&self.views[i].mask);
            self.free.push(id);
        }
    }

    fn heap_bytes(&self) -> usize {
        self.views.capacity() * std::mem::size_of::<MaskView>()
            + self.refs.capacity() * 4
            + self.free.capacity() * 2
            + self.by_mask.capacity() * (std::mem::size_of::<(FlowMask, u16)>() + 1)
    }
}

/// What a hit writes.
#[derive(Clone, Copy, Debug)]
struct Counters {
    packets: u64,
    bytes: u64,
    /// `NEVER` until the first hit.
    used_ms: u64,
    tcp_flags: u16,
    /// See [`MegaflowStats::upcall_bytes`] (in the padding: the counters
    /// stay 32 bytes).
    upcall_bytes: u32,
}

const NEVER: u64 = u64::MAX;

impl Counters {
    const ZERO: Counters = Counters {
        packets: 0,
        bytes: 0,
        used_ms: NEVER,
        tcp_flags: 0,
        upcall_bytes: 0,
    };
}

/// One interned action list.
#[derive(Debug)]
struct ActionList {
    actions: Arc<[DpAction]>,
    refs: u32,
}

/// Interned datapath action lists: equal lists share one id.
#[derive(Debug)]
struct ActionTable {
    lists: Vec<ActionList>,
    by_value: HashMap<Arc<[DpAction]>, u32>,
    free: Vec<u32>,
    /// What freed ids point to (shared, never allocated again).
    empty: Arc<[DpAction]>,
}

impl Default for ActionTable {
    fn default() -> Self {
        ActionTable {
            lists: Vec::new(),
            by_value: HashMap::new(),
            free: Vec::new(),
            empty: Arc::from(Vec::new()),
        }
    }
}

impl ActionTable {
    /// The id of `actions`, adding a reference (install path).
    fn intern(&mut self, actions: DpActions) -> u32 {
        if let Some(&id) = self.by_value.get(&actions[..]) {
            self.lists[id as usize].refs += 1;
            return id;
        }
        let list: Arc<[DpAction]> = Arc::from(actions);
        let entry = ActionList {
            actions: Arc::clone(&list),
            refs: 1,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.lists[id as usize] = entry;
                id
            }
            None => {
                self.lists.push(entry);
                (self.lists.len() - 1) as u32
            }
        };
        self.by_value.insert(list, id);
        id
    }

    /// Drops a reference; the list is freed with its last one.
    fn release(&mut self, id: u32) {
        let Some(l) = self.lists.get_mut(id as usize) else {
            return;
        };
        l.refs -= 1;
        if l.refs == 0 {
            let list = std::mem::replace(&mut l.actions, Arc::clone(&self.empty));
            self.by_value.remove(&list[..]);
            self.free.push(id);
        }
    }

    #[inline(always)]
    fn get(&self, id: u32) -> &[DpAction] {
        self.lists.get(id as usize).map_or(&[], |l| &l.actions)
    }

    fn len(&self) -> usize {
        self.lists.len() - self.free.len()
    }

    fn heap_bytes(&self) -> usize {
        let lists: usize = self
            .lists
            .iter()
            .filter(|l| l.refs > 0)
            .map(|l| 16 + std::mem::size_of_val::<[DpAction]>(&l.actions))
            .sum();
        lists
            + self.lists.capacity() * std::mem::size_of::<ActionList>()
            + self.by_value.capacity() * (std::mem::size_of::<(Arc<[DpAction]>, u32)>() + 1)
            + self.free.capacity() * 4
    }
}

/// Heap bytes held by a [`MegaflowTable`], by part.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct MemoryReport {
    /// Live megaflows.
    pub megaflows: usize,
    /// Hot lines (64 bytes each, capacity included) and spilled keys.
    pub records: usize,
    /// Hit counters and creation times.
    pub counters: usize,
    /// The dpcls classifiers (subtables' indexes) and the distinct masks.
    pub dpcls: usize,
    /// Interned action lists.
    pub actions: usize,
    /// Distinct action lists.
    pub action_lists: usize,
}

impl MemoryReport {
    /// Sum of the parts.
    pub fn total(&self) -> usize {
        self.records + self.counters + self.dpcls + self.actions
    }
}

/// The slab. See the module documentation.
#[derive(Debug)]
pub struct MegaflowTable {
    records: Records,
    counters: HugeGrowVec<Counters>,
    created: Vec<u64>,
    masks: Masks,
    free_head: u32,
    /// Generation of slots created from now on (odd).
    gen_floor: u32,
    n_live: usize,
    classifiers: Vec<(u32, Dpcls)>,
    actions: ActionTable,
}

impl Default for MegaflowTable {
    fn default() -> Self {
        MegaflowTable {
            records: Records::default(),
            counters: HugeGrowVec::new(MIN_STEP),
            created: Vec::new(),
            masks: Masks::default(),
            free_head: NIL,
            gen_floor: 1,
            n_live: 0,
            classifiers: Vec::new(),
            actions: ActionTable::default(),
        }
    }
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
        self.records.hot.len()
    }

    /// Position of `port`'s classifier, if it has one.
    #[inline(always)]
    pub fn classifier_index(&self, port: u32) -> Option<usize> {
        self.classifiers.iter().position(|(p, _)| *p == port)
    }

    /// The classifier at position `ci` (from [`Self::classifier_index`]).
    #[inline(always)]
    pub fn classifier(&self, ci: usize) -> &Dpcls {
        &self.classifiers[ci].1
    }

    /// The dpcls of `in_port`, if it has live megaflows.
    pub fn dpcls(&self, in_port: u32) -> Option<&Dpcls> {
        self.classifier_index(in_port).map(|ci| self.classifier(ci))
    }

    /// Every classifier, mutable (re-ranking).
    pub fn classifiers_mut(&mut self) -> impl Iterator<Item = &mut Dpcls> {
        self.classifiers.iter_mut().map(|(_, c)| c)
    }

    /// Ranked batched lookup in classifier `ci` ([`Dpcls::lookup_batch`]).
    #[inline]
    pub fn dpcls_lookup_batch(
        &mut self,
        ci: usize,
        keys: &[FlowKey],
        todo: u32,
        out: &mut [u32; BATCH_SIZE],
        out_sub: &mut [u16; BATCH_SIZE],
        lookups: &mut u64,
    ) -> u32 {
        let (cls, records) = self.split(ci);
        cls.lookup_batch(keys, todo, out, out_sub, lookups, records)
    }

    /// Directed lookup in classifier `ci` ([`Dpcls::lookup_directed`]).
    #[inline]
    pub fn dpcls_lookup_directed(
        &mut self,
        ci: usize,
        subs: &[u16; BATCH_SIZE],
        keys: &[FlowKey],
        todo: u32,
        out: &mut [u32; BATCH_SIZE],
    ) -> u32 {
        let (cls, records) = self.split(ci);
        cls.lookup_directed(subs, keys, todo, out, records)
    }

    /// Classifier `ci`, mutable (lookups count hits), with the records
    /// its subtables compare keys against.
    #[inline(always)]
    fn split(&mut self, ci: usize) -> (&mut Dpcls, &Records) {
        (&mut self.classifiers[ci].1, &self.records)
    }

    /// One key looked up in `in_port`'s classifier, in rank order: the
    /// megaflow index and its subtable.
    pub fn dpcls_lookup_one(&self, in_port: u32, key: &FlowKey) -> Option<(u32, u16)> {
        self.dpcls(in_port)?.lookup_one(key, &self.records)
    }

    /// Installs a megaflow for `key` (masked here) under `mask` in
    /// `key.in_port()`'s classifier, created on first use. Allocates only
    /// when an array must grow (install happens on the upcall path).
    pub fn insert(
        &mut self,
        key: &FlowKey,
        mask: &FlowMask,
        actions: DpActions,
        now_ms: u64,
    ) -> Result<(MegaflowRef, u16), InstallError> {
        let port = key.in_port();
        let ci = match self.classifier_index(port) {
            Some(ci) => ci,
            None if self.classifiers.len() < usize::from(u16::MAX) => {
                self.classifiers.push((port, Dpcls::new()));
                self.classifiers.len() - 1
            }
            None => return Err(InstallError::NoRoom(actions)),
        };
        // The slot first: the subtable writes the key into it.
        let pushed = self.free_head == NIL;
        let index = if pushed {
            if self.records.hot.len() >= NIL as usize {
                return Err(InstallError::NoRoom(actions));
            }
            self.records.hot.push(Hot {
                gen: self.gen_floor.wrapping_sub(1),
                ..Hot::FREE
            });
            (self.records.hot.len() - 1) as u32
        } else {
            self.free_head
        };
        let undo = |t: &mut MegaflowTable| {
            if pushed {
                t.records.hot.pop();
            }
        };
        let Some(mask_id) = self.masks.acquire(mask) else {
            undo(self);
            return Err(InstallError::NoRoom(actions));
        };
        let sub = match self.classifiers[ci]
            .1
            .insert(key, mask, index, &mut self.records)
        {
            Ok(sub) => sub,
            Err(e) => {
                undo(self);
                self.masks.release(mask_id);
                return Err(match e {
                    InsertError::Duplicate(existing) => match self.live_at(existing) {
                        Some(r) => {
                            InstallError::Duplicate(r, self.records.hot[r.index as usize].sub)
                        }
                        // Unreachable by the invariants (every indexed slot is live).
                        None => InstallError::NoRoom(actions),
                    },
                    InsertError::Full => InstallError::NoRoom(actions),
                });
            }
        };
        let i = index as usize;
        if !pushed {
            self.free_head = self.records.hot[i].actions;
        }
        let h = &mut self.records.hot[i];
        h.gen = h.gen.wrapping_add(1);
        h.actions = self.actions.intern(actions);
        h.mask = mask_id;
        h.cls = ci as u16;
        h.sub = sub;
        let gen = h.gen;
        if pushed {
            reserve_gently(&mut self.created, 1, MIN_STEP);
            self.counters.push(Counters::ZERO);
            self.created.push(now_ms);
        } else {
            self.counters[i] = Counters::ZERO;
            self.created[i] = now_ms;
        }
        self.n_live += 1;
        Ok((MegaflowRef { index, gen }, sub))
    }

    /// True when `r` names a live megaflow.
    #[inline(always)]
    pub fn is_live(&self, r: MegaflowRef) -> bool {
        self.records
            .hot
            .get(r.index as usize)
            .is_some_and(|h| h.gen == r.gen && r.gen & 1 == 1)
    }

    /// The ref of the live megaflow in slot `index`, if any.
    #[inline(always)]
    pub fn live_at(&self, index: u32) -> Option<MegaflowRef> {
        match self.records.hot.get(index as usize) {
            Some(h) if h.gen & 1 == 1 => Some(MegaflowRef { index, gen: h.gen }),
            _ => None,
        }
    }

    /// True when `packet` falls inside the megaflow in slot `index` (false
    /// if the slot is free). Compares the mask's non-zero words only, from
    /// the slot's hot line.
    #[inline(always)]
    pub fn matches(&self, index: u32, packet: &FlowKey) -> bool {
        let Some(h) = self.records.hot.get(index as usize) else {
            return false;
        };
        if h.gen & 1 == 0 {
            return false;
        }
        let Some(v) = self.masks.views.get(h.mask as usize) else {
            return false;
        };
        let k = self.records.words(index, v.n);
        crate::subtable::masked_words_eq(packet, &v.words, &v.mvals, k)
    }

    /// Starts loading slot `index`'s hot line (everything a hit reads), so
    /// a batch can start all its cache misses before reading any.
    #[inline(always)]
    pub fn prefetch(&self, index: u32) {
        if let Some(h) = self.records.hot.get(index as usize) {
            prefetch(h);
        }
    }

    /// The megaflow `r` names, if live (key and mask expanded: dumps and
    /// revalidation, not the packet path).
    pub fn get(&self, r: MegaflowRef) -> Option<Megaflow<'_>> {
        if !self.is_live(r) {
            return None;
        }
        let h = &self.records.hot[r.index as usize];
        let v = self.masks.views.get(h.mask as usize)?;
        let (in_port, _) = self.classifiers.get(h.cls as usize)?;
        let mut key = FlowKey::zero();
        for (&w, &x) in v.words.iter().zip(self.records.words(r.index, v.n)) {
            key.w[w as usize] = x;
        }
        Some(Megaflow {
            key,
            mask: v.mask,
            actions: self.actions.get(h.actions),
            in_port: *in_port,
            subtable: h.sub,
        })
    }

    /// The actions of megaflow `r` (empty if it is no longer live).
    #[inline(always)]
    pub fn actions(&self, r: MegaflowRef) -> &[DpAction] {
        match self.records.hot.get(r.index as usize) {
            Some(h) if h.gen == r.gen && r.gen & 1 == 1 => self.actions.get(h.actions),
            _ => &[],
        }
    }

    /// The actions of megaflow `r` as the shared, immutable list every
    /// megaflow with them holds (a reference count, no copy: dumps).
    pub fn actions_shared(&self, r: MegaflowRef) -> Option<Arc<[DpAction]>> {
        if !self.is_live(r) {
            return None;
        }
        let h = &self.records.hot[r.index as usize];
        self.actions
            .lists
            .get(h.actions as usize)
            .map(|l| Arc::clone(&l.actions))
    }

    /// The statistics of the megaflow `r` names, if live.
    pub fn stats(&self, r: MegaflowRef) -> Option<MegaflowStats> {
        if !self.is_live(r) {
            return None;
        }
        let i = r.index as usize;
        let c = &self.counters[i];
        Some(MegaflowStats {
            packets: c.packets,
            bytes: c.bytes,
            used_ms: (c.used_ms != NEVER).then_some(c.used_ms),
            created_ms: self.created[i],
            tcp_flags: c.tcp_flags,
            upcall_bytes: c.upcall_bytes,
        })
    }

    /// Records that the upcall of a packet of `bytes` installed `r`
    /// (see [`MegaflowStats::upcall_bytes`]).
    pub fn note_upcall(&mut self, r: MegaflowRef, bytes: u32) {
        if self.is_live(r) {
            if let Some(c) = self.counters.get_mut(r.index as usize) {
                c.upcall_bytes = bytes.max(1);
            }
        }
    }

    /// Time of the last hit, or of installation if never hit, of the
    /// megaflow `r` names, if live (idle expiry).
    pub fn last_used_ms(&self, r: MegaflowRef) -> Option<u64> {
        if !self.is_live(r) {
            return None;
        }
        let i = r.index as usize;
        let used = self.counters[i].used_ms;
        Some(if used == NEVER { self.created[i] } else { used })
    }

    /// Replaces the actions of a live megaflow (revalidation). Returns
    /// false if `r` is stale.
    pub fn set_actions(&mut self, r: MegaflowRef, actions: DpActions) -> bool {
        if !self.is_live(r) {
            return false;
        }
        let id = self.actions.intern(actions);
        let old = std::mem::replace(&mut self.records.hot[r.index as usize].actions, id);
        self.actions.release(old);
        true
    }

    /// Counts a hit. `r` must be live (the caller has just found it).
    #[inline(always)]
    pub fn account(&mut self, r: MegaflowRef, bytes: u32, tcp_flags: u16, now_ms: u64) {
        self.account_n(r, 1, u64::from(bytes), tcp_flags, now_ms);
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
        if let Some(c) = self.counters.get_mut(r.index as usize) {
            c.packets += packets;
            c.bytes += bytes;
            c.used_ms = now_ms;
            c.tcp_flags |= tcp_flags;
        }
    }

    /// Removes the megaflow `r` names from its dpcls and frees its slot;
    /// every cache then misses it. Returns false if `r` is stale.
    pub fn remove(&mut self, r: MegaflowRef) -> bool {
        if !self.is_live(r) {
            return false;
        }
        let i = r.index as usize;
        let h = self.records.hot[i];
        let n = self.masks.views.get(h.mask as usize).map_or(0, |v| v.n);
        if let Some((_, cls)) = self.classifiers.get_mut(h.cls as usize) {
            cls.remove(h.sub, r.index, &self.records);
        }
        self.records.release_spill(r.index, n);
        self.masks.release(h.mask);
        self.actions.release(h.actions);
        let slot = &mut self.records.hot[i];
        slot.gen = h.gen.wrapping_add(1);
        slot.actions = self.free_head;
        self.free_head = r.index;
        self.n_live -= 1;
        if self.n_live == 0 {
            self.clear();
        }
        true
    }

    /// Removes every megaflow and classifier and gives the memory back.
    pub fn clear(&mut self) {
        let max_gen = self.records.hot.iter().map(|h| h.gen).max().unwrap_or(0);
        // Slots created from now on start above every generation handed
        // out so far, so no ref held anywhere becomes live again.
        self.gen_floor = self.gen_floor.max(max_gen.wrapping_add(2) | 1);
        self.records = Records::default();
        self.counters = HugeGrowVec::new(MIN_STEP);
        self.created = Vec::new();
        self.masks = Masks::default();
        self.free_head = NIL;
        self.n_live = 0;
        self.classifiers = Vec::new();
        self.actions = ActionTable::default();
    }

    /// Refs of all live megaflows, in slot order.
    pub fn live_refs(&self) -> impl Iterator<Item = MegaflowRef> + '_ {
        (0..self.records.hot.len() as u32).filter_map(|i| self.live_at(i))
    }

    /// Heap bytes held, by part.
    pub fn memory(&self) -> MemoryReport {
        let r = &self.records;
        MemoryReport {
            megaflows: self.n_live,
            records: r.hot.allocated_bytes()
                + r.spill.capacity() * std::mem::size_of::<[u64; FLOW_WORDS]>()
                + r.spill_free.capacity() * 4,
            counters: self.counters.allocated_bytes() + self.created.capacity() * 8,
            dpcls: self
                .classifiers
                .iter()
                .map(|(_, c)| c.heap_bytes())
                .sum::<usize>()
                + self.classifiers.capacity() * std::mem::size_of::<(u32, Dpcls)>()
                + self.masks.heap_bytes(),
            actions: self.actions.heap_bytes(),
            action_lists: self.actions.len(),
        }
    }
}

#[cfg(test)]
mod tests;
