//! The rule classifier of one OpenFlow table: tuple space search with
//! priorities, staged lookup and prefix tracking, recording which key bits
//! each lookup consulted.
//!
//! # What
//!
//! Rules are grouped into *subtables*, one per distinct mask. A lookup
//! visits subtables in descending order of their highest rule priority and
//! stops as soon as no remaining subtable can beat the best match so far.
//! Within a subtable one hash probe of the packet key under the mask finds
//! the candidate rules.
//!
//! # Un-wildcarding
//!
//! Besides the winning rule, a lookup with a wildcard accumulator (`wc`)
//! records every key bit whose value influenced the result: the megaflow the
//! slow path installs may wildcard every other bit, because any packet that
//! agrees on the recorded bits takes the same path through the classifier.
//! Three refinements, as in Open vSwitch's classifier, keep the recorded set
//! small so that megaflows are wide:
//!
//! - **Staged lookup.** A subtable's mask is split into stages (metadata →
//!   L2 → L3 → L4). For every stage but the last the subtable keeps the set of
//!   the hashes of its rules' values on the stages so far (as OVS); when the
//!   hash of the packet's value is not in that set the subtable cannot
//!   match, and only the bits of the stages examined so far are recorded
//!   (e.g. an L3 miss never un-wildcards ports). A hash that collides only
//!   takes the lookup one stage further (64-bit hashes: practically never).
//! - **Prefix tracking.** For the configured prefix fields (default
//!   `nw_dst,nw_src`, like OVS's `Flow_Table:prefixes`) a table-wide trie of
//!   the rules' prefixes tells, before a subtable's stage that holds the
//!   field is hashed, whether any rule of that subtable's prefix length can
//!   contain the packet's address. If not, the subtable is skipped and only
//!   the address bits the trie needed are recorded — not the whole prefix.
//! - **Port tracking.** When the final stage (the transport ports) misses,
//!   a per-subtable trie over the rules' 32-bit `tp_src:tp_dst` values says
//!   how many leading port bits were needed to exclude them; only those are
//!   recorded.
//!
//! # Invariants
//!
//! - `subtables` is sorted by `max_priority`, highest first.
//! - A rule's key has no bit outside its mask.
//! - The recorded bits are a superset of what decides the result: every
//!   packet agreeing with the looked-up key on `wc` gets the same rule
//!   (checked by the megaflow-invariant property test against
//!   [`crate::linear`]).
//!
//! # Threads
//!
//! Built once per rule-table version and then only read; lookups take
//! `&self` and can run on any number of threads.

use crate::trie::{Plens, Trie};
use flowpath_flow::field::FieldId;
use flowpath_flow::value::prefix_mask;
use flowpath_flow::{FlowKey, FlowMask, Match, Regs};
/// The classifier's maps: keyed by masked rule values, hashed with
/// foldhash (seeded per process) — the build of 100,000 rules spent a
/// tenth of its time in the standard library's SipHash.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
type HashSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;
use std::hash::BuildHasher;
use std::sync::OnceLock;

/// Most prefix-tracking fields per table (as OVS's `CLS_MAX_TRIES`).
pub const MAX_TRIES: usize = 3;

/// Fields usable for prefix tracking.
pub const PREFIX_FIELDS: &[FieldId] = &[
    FieldId::NwDst,
    FieldId::NwSrc,
    FieldId::Ipv6Dst,
    FieldId::Ipv6Src,
];

/// Default prefix-tracking fields (OVS's default for `Flow_Table:prefixes`).
pub const DEFAULT_PREFIXES: &[FieldId] = &[FieldId::NwDst, FieldId::NwSrc];

/// The stage a field belongs to: 0 metadata, 1 L2, 2 L3, 3 L4.
fn stage_masks() -> &'static [FlowMask; 4] {
    static MASKS: OnceLock<[FlowMask; 4]> = OnceLock::new();
    MASKS.get_or_init(|| {
        use FieldId::*;
        let groups: [&[FieldId]; 4] = [
            // (The registers and `metadata`, outside the key, belong here
            // too: see `Subtable::new`.) Connection tracking's state,
            // zone, mark, label and original protocol are metadata; its
            // original addresses are L3 and ports L4 (where OVS's struct
            // flow keeps them, which makes its stages).
            &[InPort, PktMark, CtState, CtZone, CtMark, CtLabel, CtNwProto],
            // MPLS label stack entries follow the Ethernet header: L2, as
            // in OVS's flow layout.
            &[
                EthSrc, EthDst, EthType, VlanTci, MplsLabel, MplsTc, MplsBos, MplsTtl,
            ],
            &[
                NwSrc, NwDst, NwProto, NwTos, NwEcn, NwTtl, NwFrag, Ipv6Src, Ipv6Dst, Ipv6Label,
                CtNwSrc, CtNwDst, CtIpv6Src, CtIpv6Dst,
            ],
            // As OVS 3.1 (checked with its ofproto/trace): the ND target
            // and link-layer addresses, ARP hardware addresses and TCP
            // flags belong to the last stage, with the ports.
            // The ND extensions too (OVS keeps them with the transport
            // fields).
            &[
                TpSrc,
                TpDst,
                TcpFlags,
                ArpSha,
                ArpTha,
                NdTarget,
                NdReserved,
                NdOptionsType,
                CtTpSrc,
                CtTpDst,
            ],
        ];
        let mut out = [FlowMask::catchall(); 4];
        for (i, g) in groups.iter().enumerate() {
            for f in g.iter() {
                out[i].or_assign(&f.info().storage_mask());
            }
        }
        // The tunnel metadata is metadata (OVS's struct flow starts with
        // it): every bit of the tunnel words, the datapath's flags too.
        for w in flowpath_flow::key::W_TUN_FIRST..flowpath_flow::FLOW_WORDS {
            out[0].w[w] = u64::MAX;
        }
        // The inner VLAN tag is L2 too (not a registry field).
        let mut k = out[1].to_key();
        k.set_vlan_tci_inner(0xffff);
        out[1] = FlowMask::from_key(&k);
        out
    })
}

fn stage_of(field: FieldId) -> usize {
    let m = field.info().storage_mask();
    stage_masks()
        .iter()
        .position(|s| !m.intersect(s).is_catchall())
        .unwrap_or(3)
}

/// The mask a rule is classified under. As OVS, which keeps ICMP type and
/// code in the 16-bit transport port fields under a full 16-bit mask: an
/// ICMP/ICMPv6 rule that matches the whole 8-bit type (code) matches all
/// 16 bits of `tp_src` (`tp_dst`) — the same for ICMP packets, whose high
/// byte is 0, but it puts such rules in the same subtables and port tries
/// as TCP/UDP rules on whole ports, which shapes other packets' megaflows
/// (checked against OVS 3.1's `ofproto/trace`).
fn classifier_mask(m: &Match) -> FlowMask {
    let (k, mk) = (m.key, m.mask.to_key());
    let icmp = mk.dl_type() == 0xffff
        && mk.nw_proto() == 0xff
        && matches!((k.dl_type(), k.nw_proto()), (0x0800, 1) | (0x86dd, 58));
    if !icmp {
        return m.mask;
    }
    let mut out = mk;
    if mk.tp_src() & 0xff == 0xff {
        out.set_tp_src(0xffff);
    }
    if mk.tp_dst() & 0xff == 0xff {
        out.set_tp_dst(0xffff);
    }
    FlowMask::from_key(&out)
}

fn ports_of(k: &FlowKey) -> u32 {
    (u32::from(k.tp_src()) << 16) | u32::from(k.tp_dst())
}

fn set_ports(k: &mut FlowKey, v: u32) {
    k.set_tp_src((v >> 16) as u16);
    k.set_tp_dst(v as u16);
}

/// A classifier key (or mask): the packet key and the registers. The
/// registers belong to the metadata stage; bits recorded for them are not
/// reported (they never reach a megaflow: every packet enters with them
/// zero, and the actions that copy packet bits into them make those bits
/// significant themselves).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Debug)]
struct CKey {
    f: FlowKey,
    r: Regs,
}

impl CKey {
    fn from_mask(f: &FlowMask, r: &Regs) -> CKey {
        CKey {
            f: f.to_key(),
            r: *r,
        }
    }

    fn flow_mask(&self) -> FlowMask {
        FlowMask::from_key(&self.f)
    }

    fn or_assign(&mut self, o: &CKey) {
        for i in 0..flowpath_flow::FLOW_WORDS {
            self.f.w[i] |= o.f.w[i];
        }
        self.r.or_assign(&o.r);
    }

    fn is_zero(&self) -> bool {
        self.f.w.iter().all(|w| *w == 0) && self.r.is_zero()
    }

    /// Word `i` of the key words then the register words.
    #[inline(always)]
    fn word(&self, i: usize) -> u64 {
        if i < flowpath_flow::FLOW_WORDS {
            self.f.w[i]
        } else {
            self.r.w[i - flowpath_flow::FLOW_WORDS]
        }
    }

    /// The words of this mask that have a significant bit: (index as in
    /// [`CKey::word`], mask word).
    fn words(&self) -> Box<[(u8, u64)]> {
        (0..flowpath_flow::FLOW_WORDS + flowpath_flow::key::REG_WORDS)
            .filter_map(|i| {
                let w = self.word(i);
                (w != 0).then_some((i as u8, w))
            })
            .collect()
    }
}

/// Hash of `key` under a mask given by its significant words (the masked
/// key's other words are zero: hashing only these is hashing the masked
/// key, without masking the whole key first).
#[inline]
fn sparse_hash(h: &foldhash::fast::RandomState, key: &CKey, words: &[(u8, u64)]) -> u64 {
    use std::hash::Hasher;
    let mut s = h.build_hasher();
    for &(i, m) in words {
        s.write_u64(key.word(usize::from(i)) & m);
    }
    s.finish()
}

/// [`sparse_hash`] of a stored key (its significant words, masked).
#[inline]
fn stored_hash(h: &foldhash::fast::RandomState, stored: &[u64]) -> u64 {
    use std::hash::Hasher;
    let mut s = h.build_hasher();
    for &w in stored {
        s.write_u64(w);
    }
    s.finish()
}

/// Whether a stored key (its significant words, masked, at the start of
/// `stored`) is `key` under the mask of `words`.
#[inline]
fn stored_eq(stored: &[u64], key: &CKey, words: &[(u8, u64)]) -> bool {
    words
        .iter()
        .zip(stored)
        .all(|(&(i, m), &s)| s == key.word(usize::from(i)) & m)
}

/// A rule as the classifier sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    priority: u16,
    id: u32,
    /// 1 + index of its conjunction clauses in `Classifier::conj` (a
    /// conjunctive flow, a "soft" match), 0 for an ordinary rule.
    conj: u32,
}

/// The rules of one masked key, highest priority first. Most keys have
/// one rule: it is kept inline (a build of 100,000 rules made 100,000
/// one-element allocations).
#[derive(Clone, Debug)]
enum Entries {
    One([Entry; 1]),
    Many(Vec<Entry>),
}

impl Entries {
    fn as_slice(&self) -> &[Entry] {
        match self {
            Entries::One(a) => a,
            Entries::Many(v) => v,
        }
    }

    /// Adds `e` after the rules of its priority or higher.
    fn insert(&mut self, e: Entry) {
        let mut v = match std::mem::replace(self, Entries::Many(Vec::new())) {
            Entries::One([x]) => vec![x],
            Entries::Many(v) => v,
        };
        let pos = v
            .iter()
            .position(|x| x.priority < e.priority)
            .unwrap_or(v.len());
        v.insert(pos, e);
        *self = Entries::Many(v);
    }
}

/// One clause of a conjunctive match: `conjunction(id, k/n)`, `k` 1-based.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clause {
    /// The conjunctive match.
    pub id: u32,
    /// This clause, 1..=n.
    pub k: u8,
    /// Clauses in all.
    pub n: u8,
}

#[derive(Clone, Debug)]
struct Subtable {
    mask: CKey,
    max_priority: u16,
    /// Non-empty stages of `mask`: (stage id, cumulative mask up to it).
    stages: Vec<(usize, CKey)>,
    /// For every stage but the last: the hashes of the rules' values
    /// under the cumulative mask (as OVS's stage indices: a hash absent
    /// means no rule can match, so the lookup stops there; a hash present
    /// only lets it go on to the next stage, where the rules' map
    /// decides). Hashes, not keys: a key per stage and rule would cost
    /// its significant words again for every stage.
    indices: Vec<HashSet<u64>>,
    /// The significant words of each stage's cumulative mask (as
    /// `stages`), and of the whole mask.
    stage_words: Vec<Box<[(u8, u64)]>>,
    words: Box<[(u8, u64)]>,
    /// Hashes the stage values and the keys (one seed for inserts and
    /// lookups); only the mask's words are hashed and compared (a key is
    /// 400 bytes, a mask has a few words).
    stage_hash: foldhash::fast::RandomState,
    /// The masked keys with their rules (highest priority first), and
    /// their positions there hashed by key: a table growing moves
    /// positions, not 400-byte keys (growing the map of keys was two
    /// fifths of a 100,000-rule build).
    /// Keys are stored by their significant words only (`words.len()`
    /// words each, in `words` order): a rule costs a few words, not 400
    /// bytes.
    keys: Vec<u64>,
    entries: Vec<Entries>,
    rules: hashbrown::HashTable<u32>,
    /// Per configured trie: this subtable's prefix length on the field (0 = trie not usable).
    trie_plen: [u32; MAX_TRIES],
    /// 32-bit tp_src:tp_dst mask and its length up to the last 1 bit.
    ports_mask: u32,
    ports_mask_len: u32,
    ports_trie: Trie,
}

impl Subtable {
    fn new(mask: CKey, tries: &[TrieSpec]) -> Self {
        let stages_all = stage_masks();
        let mut stages = Vec::new();
        let mut cum = CKey::default();
        for (i, s) in stages_all.iter().enumerate() {
            // The registers are metadata: stage 0.
            let regs = if i == 0 { mask.r } else { Regs::zero() };
            let part = CKey::from_mask(&mask.flow_mask().intersect(s), &regs);
            if !part.is_zero() {
                cum.or_assign(&part);
                stages.push((i, cum));
            }
        }
        let fmask = mask.flow_mask();
        let n_idx = stages.len().saturating_sub(1);
        let mut trie_plen = [0u32; MAX_TRIES];
        for (j, t) in tries.iter().enumerate() {
            let info = t.field.info();
            trie_plen[j] =
                flowpath_flow::value::prefix_len(info.get_mask(&fmask), t.bits).unwrap_or(0);
        }
        let ports_mask = ports_of(&mask.f);
        let ports_mask_len = 32 - ports_mask.trailing_zeros();
        let stage_words = stages.iter().map(|(_, cum)| cum.words()).collect();
        Subtable {
            mask,
            max_priority: 0,
            stages,
            indices: vec![HashSet::default(); n_idx],
            stage_words,
            words: mask.words(),
            stage_hash: Default::default(),
            keys: Vec::new(),
            entries: Vec::new(),
            rules: hashbrown::HashTable::new(),
            trie_plen,
            ports_mask,
            ports_mask_len,
            ports_trie: Trie::new(32),
        }
    }

    /// The rules whose masked key is `key` under this subtable's mask.
    #[inline]
    fn get(&self, key: &CKey) -> Option<&[Entry]> {
        let h = sparse_hash(&self.stage_hash, key, &self.words);
        let n = self.words.len();
        self.rules
            .find(h, |&i| {
                stored_eq(&self.keys[i as usize * n..], key, &self.words)
            })
            .map(|&i| self.entries[i as usize].as_slice())
    }

    /// Whether some rule's key agrees with `key` on stage `i`'s mask.
    #[inline]
    fn stage_has(&self, i: usize, key: &CKey) -> bool {
        self.indices[i].contains(&sparse_hash(&self.stage_hash, key, &self.stage_words[i]))
    }

    fn insert(&mut self, key: CKey, e: Entry) {
        for (i, set) in self.indices.iter_mut().enumerate() {
            set.insert(sparse_hash(&self.stage_hash, &key, &self.stage_words[i]));
        }
        if self.ports_mask_len > 0 {
            self.ports_trie.insert(
                u128::from(ports_of(&key.f) & self.ports_mask),
                self.ports_mask_len,
            );
        }
        let (words, hasher, keys) = (&self.words, &self.stage_hash, &mut self.keys);
        let n = words.len();
        let h = sparse_hash(hasher, &key, words);
        match self
            .rules
            .find(h, |&i| stored_eq(&keys[i as usize * n..], &key, words))
        {
            Some(&i) => self.entries[i as usize].insert(e),
            None => {
                let i = self.entries.len() as u32;
                self.entries.push(Entries::One([e]));
                keys.extend(words.iter().map(|&(w, _)| key.word(usize::from(w))));
                self.rules.insert_unique(h, i, |&j| {
                    stored_hash(hasher, &keys[j as usize * n..j as usize * n + n])
                });
            }
        }
        self.max_priority = self.max_priority.max(e.priority);
    }
}

#[derive(Clone, Debug)]
struct TrieSpec {
    field: FieldId,
    bits: u32,
    stage: usize,
    trie: Trie,
}

/// Per-lookup lazily computed trie results.
#[derive(Clone, Copy, Default)]
struct TrieCtx {
    done: bool,
    maskbits: u32,
    plens: Plens,
}

/// One table's classifier. See the module documentation.
#[derive(Clone, Debug)]
pub struct Classifier {
    subtables: Vec<Subtable>,
    by_mask: HashMap<CKey, usize>,
    /// The subtable of the last insert (consecutive rules mostly share a
    /// mask: one comparison instead of hashing a 400-byte mask).
    last_insert: usize,
    /// The clauses of the conjunctive flows (see [`Entry::conj`]).
    conj: Vec<Box<[Clause]>>,
    tries: Vec<TrieSpec>,
    n_rules: usize,
}

/// Error for an unusable prefix-field list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PrefixError(pub String);

/// Parses a `--prefixes` value: `none` or a comma-separated list of up to
/// three of nw_dst, nw_src, ipv6_dst, ipv6_src (aliases accepted).
pub fn parse_prefixes(s: &str) -> Result<Vec<FieldId>, PrefixError> {
    let s = s.trim();
    if s == "none" || s.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for name in s.split(',') {
        let name = name.trim();
        let f = flowpath_flow::field::lookup(name)
            .filter(|f| PREFIX_FIELDS.contains(&f.id))
            .ok_or_else(|| PrefixError(format!("'{name}' cannot be a prefix field (nw_dst, nw_src, ipv6_dst or ipv6_src expected)")))?;
        if out.contains(&f.id) {
            return Err(PrefixError(format!("prefix field '{name}' given twice")));
        }
        out.push(f.id);
    }
    if out.len() > MAX_TRIES {
        return Err(PrefixError(format!(
            "at most {MAX_TRIES} prefix fields (got {})",
            out.len()
        )));
    }
    Ok(out)
}

impl Classifier {
    /// An empty classifier tracking prefixes on `prefix_fields` (at most
    /// [`MAX_TRIES`] of [`PREFIX_FIELDS`]; others are ignored).
    pub fn new(prefix_fields: &[FieldId]) -> Self {
        let tries = prefix_fields
            .iter()
            .filter(|f| PREFIX_FIELDS.contains(f))
            .take(MAX_TRIES)
            .map(|&field| {
                let bits = u32::from(field.info().bits);
                TrieSpec {
                    field,
                    bits,
                    stage: stage_of(field),
                    trie: Trie::new(bits),
                }
            })
            .collect();
        Classifier {
            subtables: Vec::new(),
            by_mask: HashMap::default(),
            last_insert: usize::MAX,
            conj: Vec::new(),
            tries,
            n_rules: 0,
        }
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.n_rules
    }

    /// True when there is no rule.
    pub fn is_empty(&self) -> bool {
        self.n_rules == 0
    }

    /// Number of subtables (distinct masks).
    pub fn n_subtables(&self) -> usize {
        self.subtables.len()
    }

    /// Adds a rule with match `m`, `priority` and caller's `id`. Rules with
    /// the same match and priority should be replaced by the caller before
    /// (OVS semantics: an identical rule is a modification).
    pub fn insert(&mut self, m: &Match, priority: u16, id: u32) {
        self.insert_conj(m, priority, id, &[]);
    }

    /// [`Classifier::insert`] for a conjunctive flow (`clauses` non-empty:
    /// its actions are these `conjunction(...)`s); with no clause, an
    /// ordinary rule.
    pub fn insert_conj(&mut self, m: &Match, priority: u16, id: u32, clauses: &[Clause]) {
        let conj = if clauses.is_empty() {
            0
        } else {
            self.conj.push(clauses.into());
            self.conj.len() as u32
        };
        let mask = classifier_mask(m);
        let regs = m.regs.masked(&m.regs_mask);
        let cmask = CKey::from_mask(&mask, &m.regs_mask);
        let m = &Match::new(&m.key, &mask);
        let key = m.key.masked(&m.mask);
        for t in self.tries.iter_mut() {
            let info = t.field.info();
            if let Some(plen) = flowpath_flow::value::prefix_len(info.get_mask(&m.mask), t.bits) {
                if plen > 0 {
                    t.trie.insert(info.get(&key), plen);
                }
            }
        }
        let last = self.subtables.get(self.last_insert);
        let idx = match last.filter(|st| st.mask == cmask).map(|_| self.last_insert) {
            Some(i) => i,
            None => match self.by_mask.get(&cmask) {
                Some(&i) => i,
                None => {
                    let st = Subtable::new(cmask, &self.tries);
                    self.subtables.push(st);
                    self.by_mask.insert(cmask, self.subtables.len() - 1);
                    self.subtables.len() - 1
                }
            },
        };
        self.last_insert = idx;
        self.subtables[idx].insert(CKey { f: key, r: regs }, Entry { priority, id, conj });
        self.n_rules += 1;
        // The subtables stay ranked by their highest priority; only an
        // insert that moved this one's above its predecessor's re-ranks
        // them (a re-rank rebuilds the mask index).
        if idx > 0 && self.subtables[idx - 1].max_priority < self.subtables[idx].max_priority {
            self.sort();
        }
    }

    fn sort(&mut self) {
        self.last_insert = usize::MAX;
        self.subtables
            .sort_by_key(|s| std::cmp::Reverse(s.max_priority));
        self.by_mask = self
            .subtables
            .iter()
            .enumerate()
            .map(|(i, s)| (s.mask, i))
            .collect();
    }

    /// Finds the highest-priority rule matching `key` with registers
    /// `regs`, returning its id and priority. With `wc`, ORs into it every
    /// bit of `key` the answer depended on.
    ///
    /// Conjunctive flows (OVS's `conjunction(id,k/n)`) are "soft" matches:
    /// when the highest-priority matches are soft and, at that priority,
    /// every clause of some conjunction `id` matched, the lookup is run
    /// again with `conj_id` = `id` (soft matches ignored) and its answer is
    /// the answer; otherwise the next lower priority of soft matches is
    /// tried, down to the best ordinary match — as OVS's classifier does,
    /// with the bits both lookups consulted in `wc`.
    pub fn lookup(
        &self,
        key: &FlowKey,
        regs: &Regs,
        wc: Option<&mut FlowMask>,
    ) -> Option<(u32, u16)> {
        self.lookup__(&CKey { f: *key, r: *regs }, wc, true)
    }

    fn lookup__(
        &self,
        key: &CKey,
        mut wc: Option<&mut FlowMask>,
        allow_conj: bool,
    ) -> Option<(u32, u16)> {
        let mut ctx = [TrieCtx::default(); MAX_TRIES];
        let mut hard: Option<Entry> = None;
        // Soft matches: a conjunctive flow and the list of rules with its
        // exact match (highest priority first), by position.
        let mut soft: Vec<(&[Entry], usize)> = Vec::new();
        for st in &self.subtables {
            if let Some(b) = hard {
                if st.max_priority <= b.priority {
                    break;
                }
            }
            let found = match wc.as_deref_mut() {
                Some(wc) => self.find_match_wc(st, key, &mut ctx, wc),
                None => st.get(key).and_then(|l| l.first().copied()),
            };
            let Some(e) = found else { continue };
            if hard.is_some_and(|b| e.priority <= b.priority) {
                continue;
            }
            if e.conj == 0 {
                hard = Some(e);
            } else if allow_conj {
                if let Some(list) = st.get(key) {
                    soft.push((list, 0));
                }
            }
        }
        loop {
            let hard_pri = hard.map_or(-1, |h| i32::from(h.priority));
            soft.retain(|&(l, i)| i32::from(l[i].priority) > hard_pri);
            let Some(soft_pri) = soft.iter().map(|&(l, i)| l[i].priority).max() else {
                break;
            };
            // Clauses seen per conjunction id, in the order the soft
            // matches were found; the first id complete wins if the
            // `conj_id` lookup finds a rule.
            let at = |&&(l, i): &&(&[Entry], usize)| l[i].priority == soft_pri;
            let n_at = soft.iter().filter(at).count();
            let mut seen: Vec<(u32, u64)> = Vec::new();
            for &(l, i) in soft.iter().filter(at) {
                for c in self.conj[l[i].conj as usize - 1].iter() {
                    if usize::from(c.n) > n_at {
                        continue;
                    }
                    let j = match seen.iter().position(|(id, _)| *id == c.id) {
                        Some(j) => j,
                        None => {
                            let unused = u64::MAX.checked_shl(u32::from(c.n)).unwrap_or(0);
                            seen.push((c.id, unused));
                            seen.len() - 1
                        }
                    };
                    seen[j].1 |= 1 << (c.k - 1);
                    if seen[j].1 == u64::MAX {
                        let mut k2 = *key;
                        k2.r.w[flowpath_flow::key::W_CONJ_ID] = u64::from(c.id);
                        if let Some(r) = self.lookup__(&k2, wc.as_deref_mut(), false) {
                            return Some(r);
                        }
                    }
                }
            }
            // No conjunction at this priority: the rules with the same
            // match at lower priorities (which the soft matches hid) get
            // their turn, as hard or soft matches.
            let mut next = Vec::with_capacity(soft.len());
            for &(l, i) in &soft {
                if l[i].priority != soft_pri {
                    next.push((l, i));
                } else if let Some(e) = l.get(i + 1) {
                    if e.conj != 0 {
                        next.push((l, i + 1));
                    } else if hard.is_none_or(|h| e.priority > h.priority) {
                        hard = Some(*e);
                    }
                }
            }
            soft = next;
        }
        hard.map(|e| (e.id, e.priority))
    }

    /// Prefix-trie check before hashing stage `stage` of `st`: true when
    /// the subtable can be skipped (the needed bits are then in `wc`).
    fn check_tries(
        &self,
        st: &Subtable,
        stage: usize,
        key: &CKey,
        ctx: &mut [TrieCtx; MAX_TRIES],
        wc: &mut FlowMask,
    ) -> bool {
        for (j, t) in self.tries.iter().enumerate() {
            let plen = st.trie_plen[j];
            if plen == 0 || t.stage != stage {
                continue;
            }
            let c = &mut ctx[j];
            if !c.done {
                let info = t.field.info();
                if info.prereq.ok_for(&key.f) {
                    let (bits, plens) = t.trie.lookup(info.get(&key.f));
                    c.maskbits = bits;
                    c.plens = plens;
                } else {
                    c.maskbits = 0;
                    c.plens = Plens::ALL;
                }
                c.done = true;
            }
            if !c.plens.contains(plen) {
                let info = t.field.info();
                let want = prefix_mask(c.maskbits, t.bits);
                if c.maskbits <= plen {
                    info.or_mask(wc, want);
                    return true;
                }
                if info.get_mask(wc) & want == want {
                    return true;
                }
            }
        }
        false
    }

    fn find_match_wc(
        &self,
        st: &Subtable,
        key: &CKey,
        ctx: &mut [TrieCtx; MAX_TRIES],
        wc: &mut FlowMask,
    ) -> Option<Entry> {
        let n_idx = st.indices.len();
        let mut seen = FlowMask::catchall();
        for i in 0..n_idx {
            let (stage, cum) = st.stages[i];
            if self.check_tries(st, stage, key, ctx, wc) {
                wc.or_assign(&seen);
                return None;
            }
            seen = cum.flow_mask();
            if !st.stage_has(i, key) {
                wc.or_assign(&seen);
                return None;
            }
        }
        if let Some(&(stage, _)) = st.stages.last() {
            if self.check_tries(st, stage, key, ctx, wc) {
                wc.or_assign(&seen);
                return None;
            }
        }
        let found = st.get(key).and_then(|l| l.first().copied());
        if found.is_none() && st.ports_mask_len > 0 {
            let value = ports_of(&key.f) & st.ports_mask;
            let (mbits, _) = st.ports_trie.lookup(u128::from(value));
            let need = st.ports_mask & (prefix_mask(mbits, 32) as u32);
            let mut k = wc.to_key();
            let cur = ports_of(&k);
            set_ports(&mut k, cur | need);
            *wc = FlowMask::from_key(&k);
            wc.or_assign(&seen);
            // As OVS 3.1: the final stage's other fields (TCP flags, ND
            // target, ARP/ND link-layer addresses) are un-wildcarded in
            // full; only the ports are narrowed to the trie's prefix.
            let mut rest = st.mask.f;
            set_ports(&mut rest, 0);
            wc.or_assign(&FlowMask::from_key(&rest));
            return None;
        }
        wc.or_assign(&st.mask.flow_mask());
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowpath_flow::field::lookup;

    fn m(spec: &str) -> Match {
        let mut m = Match::catchall();
        for part in spec.split(',').filter(|s| !s.is_empty()) {
            match part.split_once('=') {
                Some((n, v)) => m.set_field_text(lookup(n).unwrap(), v).unwrap(),
                None => assert!(m.set_protocol(part), "{part}"),
            }
        }
        m
    }

    fn pkt(spec: &str) -> FlowKey {
        m(spec).key
    }

    #[test]
    fn priority_and_early_stop() {
        let mut c = Classifier::new(DEFAULT_PREFIXES);
        c.insert(&m("tcp,tp_dst=90"), 65535, 1);
        c.insert(&m(""), 0, 2);
        let mut wc = FlowMask::catchall();
        assert_eq!(
            c.lookup(
                &pkt("in_port=1,tcp,tp_dst=90"),
                &Regs::zero(),
                Some(&mut wc)
            ),
            Some((1, 65535))
        );
        let fmt =
            Match::new(&pkt("in_port=1,tcp,tp_dst=90"), &wc).format(flowpath_flow::Style::Rule);
        assert_eq!(fmt, "tcp,tp_dst=90");
        let mut wc = FlowMask::catchall();
        assert_eq!(
            c.lookup(&pkt("tcp,tp_dst=91"), &Regs::zero(), Some(&mut wc)),
            Some((2, 0))
        );
        // 91 differs from 90 in the last bit: all 16 bits of tp_dst needed.
        assert_eq!(wc.to_key().tp_dst(), 0xffff);
        let mut wc = FlowMask::catchall();
        assert_eq!(
            c.lookup(&pkt("tcp,tp_dst=0x8000"), &Regs::zero(), Some(&mut wc)),
            Some((2, 0))
        );
        assert_eq!(wc.to_key().tp_dst(), 0x8000);
        assert_eq!(wc.to_key().tp_src(), 0);
    }

    #[test]
    fn staged_lookup_stops_at_l3() {
        let mut c = Classifier::new(&[]);
        c.insert(&m("tcp,nw_src=10.0.0.1,tp_dst=80"), 100, 1);
        let mut wc = FlowMask::catchall();
        assert_eq!(
            c.lookup(
                &pkt("tcp,nw_src=10.0.0.2,tp_dst=80"),
                &Regs::zero(),
                Some(&mut wc)
            ),
            None
        );
        // The L3 stage missed: ports not looked at.
        assert_eq!(wc.to_key().tp_dst(), 0);
        assert_eq!(wc.to_key().nw_src(), u32::MAX);
        // An L2 miss (not IPv4) does not even look at nw_src.
        let mut wc = FlowMask::catchall();
        assert_eq!(c.lookup(&pkt("arp"), &Regs::zero(), Some(&mut wc)), None);
        assert_eq!(wc.to_key().nw_src(), 0);
        assert_eq!(wc.to_key().dl_type(), 0xffff);
    }

    #[test]
    fn prefix_tracking_unwildcards_only_needed_bits() {
        let mut c = Classifier::new(DEFAULT_PREFIXES);
        c.insert(&m("ip,nw_dst=10.0.0.0/8"), 100, 1);
        let mut wc = FlowMask::catchall();
        assert_eq!(
            c.lookup(&pkt("ip,nw_dst=192.168.0.1"), &Regs::zero(), Some(&mut wc)),
            None
        );
        // 192 = 0b1100_0000 differs from 10 = 0b0000_1010 at the first bit.
        assert_eq!(wc.to_key().nw_dst(), 0x8000_0000);
        let mut no_trie = Classifier::new(&[]);
        no_trie.insert(&m("ip,nw_dst=10.0.0.0/8"), 100, 1);
        let mut wc = FlowMask::catchall();
        no_trie.lookup(&pkt("ip,nw_dst=192.168.0.1"), &Regs::zero(), Some(&mut wc));
        assert_eq!(wc.to_key().nw_dst(), 0xff00_0000);
    }

    #[test]
    fn prefixes_option() {
        assert_eq!(parse_prefixes("none").unwrap(), vec![]);
        assert_eq!(
            parse_prefixes("nw_dst,ip_src").unwrap(),
            vec![FieldId::NwDst, FieldId::NwSrc]
        );
        assert!(parse_prefixes("tp_dst").is_err());
        assert!(parse_prefixes("nw_dst,nw_dst").is_err());
        assert!(parse_prefixes("nw_dst,nw_src,ipv6_dst,ipv6_src").is_err());
    }

    #[test]
    fn same_mask_different_priorities() {
        let mut c = Classifier::new(&[]);
        c.insert(&m("tcp,tp_dst=80"), 10, 1);
        c.insert(&m("tcp,tp_dst=80"), 20, 2);
        c.insert(&m("tcp,tp_dst=81"), 30, 3);
        assert_eq!(
            c.lookup(&pkt("tcp,tp_dst=80"), &Regs::zero(), None),
            Some((2, 20))
        );
        assert_eq!(c.n_subtables(), 1);
        assert_eq!(c.len(), 3);
    }
}
