//! A cache tier: what the pipeline asks of every cache in front of the
//! megaflow classifier.
//!
//! What: the [`CacheTier`] trait — look up a batch, point the dpcls at a
//! subtable, learn from the dpcls' outcome, insert, empty, age, report
//! memory — and [`TierKind`], the one list of tier names (the names
//! `pmd-stats-show` counts hits under, the `second-level` values, the
//! verdicts' [`Tier`]). The EMC, SMC, DFC, Cuckoo Distributor and hybrid
//! table implement it; [`AnyTier`] holds the configured second-level tier
//! (or a tier from elsewhere, boxed) and dispatches to it. The pipeline
//! holds a list of `AnyTier`s and goes through it in order; a new tier is
//! a type that implements the trait, plugged in with
//! [`crate::Datapath::push_tier`] — the pipeline does not change.
//!
//! The EMC stays a field of its own at the head of the cascade: it is
//! looked up first, and every hit of a later tier and of the dpcls is
//! offered to it (OVS's promotion, with its insertion probability). Called
//! through its own type, its lookup is inlined into the batch loop, which
//! the hit path measurably needs (a dispatch per batch would not cost
//! much, but it would keep the compiler from merging the EMC's two passes
//! with the batch's bookkeeping).
//!
//! A tier's two ways to help:
//!
//! - **megaflow hits** ([`CacheTier::lookup_batch`]): the packet's
//!   megaflow, confirmed by a masked compare (SMC, DFC, hybrid);
//! - **directions** ([`CacheTier::direct`]): the subtable of the packet's
//!   in_port dpcls to search first (Cuckoo Distributor, hybrid's subtable
//!   entries); a directed search that hits counts as the tier's hit.
//!
//! Invariants: a tier answers only with live megaflows (it checks the
//! generation of what it stored); `clear` forgets everything; nothing here
//! allocates, locks or makes a system call per packet.
//!
//! Threads: a tier belongs to one worker's [`crate::Datapath`].

use crate::batch::{Tier, BATCH_SIZE};
use crate::cd::{Cd, CdReport};
use crate::config::{Config, SecondLevel};
use crate::dfc::Dfc;
use crate::dpcls::{Dpcls, NO_SUBTABLE};
use crate::emc::Emc;
use crate::hybrid::Hybrid;
use crate::megaflow::{MegaflowRef, MegaflowTable};
use crate::smc::Smc;
use flowpath_flow::FlowKey;
use std::fmt;

/// The kinds of cache tier, with the names their hits are counted under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TierKind {
    /// Exact match cache.
    Emc,
    /// Signature match cache (OVS's `smc-enable`).
    Smc,
    /// Datapath flow cache (the 2017 ovs-dev proposal).
    Dfc,
    /// Cuckoo Distributor (the 2017 ovs-dev proposal).
    Cd,
    /// One signature table naming a megaflow or a subtable.
    Hybrid,
    /// A tier from outside the crate ([`crate::Datapath::push_tier`]).
    Other,
}

impl TierKind {
    /// Every kind, in cascade order.
    pub const ALL: [TierKind; 6] = [
        TierKind::Emc,
        TierKind::Smc,
        TierKind::Dfc,
        TierKind::Cd,
        TierKind::Hybrid,
        TierKind::Other,
    ];

    /// The name: `emc`, `smc`, `dfc`, `cd`, `hybrid`, `other` (in
    /// `pmd-stats-show`: "NAME hits").
    pub fn name(self) -> &'static str {
        match self {
            TierKind::Emc => "emc",
            TierKind::Smc => "smc",
            TierKind::Dfc => "dfc",
            TierKind::Cd => "cd",
            TierKind::Hybrid => "hybrid",
            TierKind::Other => "other",
        }
    }

    /// The verdict tier of a packet this kind of tier decided.
    pub fn verdict(self) -> Tier {
        match self {
            TierKind::Emc => Tier::Emc,
            TierKind::Smc => Tier::Smc,
            TierKind::Dfc => Tier::Dfc,
            TierKind::Cd => Tier::Cd,
            TierKind::Hybrid => Tier::Hybrid,
            TierKind::Other => Tier::Other,
        }
    }
}

/// What a tier sees of a batch: the packets' keys and hashes, and the
/// megaflows its entries name.
#[derive(Clone, Copy)]
pub struct Probe<'a> {
    /// The batch's keys.
    pub keys: &'a [FlowKey],
    /// Bitmap of the keys with non-zero extension words (connection
    /// tracking, tunnel: [`crate::Batch::ct_packets`]): an EMC tier checks
    /// their hits against the megaflow.
    pub ct: u32,
    /// Their hashes.
    pub hashes: &'a [u32],
    /// The megaflow table.
    pub flows: &'a MegaflowTable,
}

/// A cache tier. See the module documentation.
pub trait CacheTier: fmt::Debug + Send {
    /// Its kind (its name and statistics counter).
    fn kind(&self) -> TierKind;

    /// Its name in statistics.
    fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// Looks up the packets of `todo` (bitmap of batch positions): for
    /// each megaflow hit, writes the megaflow to `out` and sets its bit in
    /// the returned bitmap.
    fn lookup_batch(
        &mut self,
        probe: &Probe<'_>,
        todo: u32,
        out: &mut [MegaflowRef; BATCH_SIZE],
    ) -> u32;

    /// For the packets of `grp` (one in_port's, none of them hit), the
    /// subtable to search first: writes `sub[j]` and returns the packets it
    /// directed. Called after [`CacheTier::lookup_batch`] in the same
    /// batch.
    #[inline(always)]
    fn direct(&mut self, _hashes: &[u32], _grp: u32, _sub: &mut [u16; BATCH_SIZE]) -> u32 {
        0
    }

    /// The directed search of packet `j` (hash `hash`) hit megaflow slot
    /// `idx` in subtable `sub` of classifier `cls`.
    #[inline(always)]
    fn directed_hit(&mut self, _j: usize, _hash: u32, _cls: &Dpcls, _sub: u16, _idx: u32) {}

    /// `n` directed searches missed (the ranked search follows).
    #[inline(always)]
    fn directed_misses(&mut self, _n: u32) {}

    /// A ranked dpcls search hit in subtable `sub` of classifier `cls`.
    #[inline(always)]
    fn ranked_hit(&mut self, _cls: &Dpcls, _sub: u16) {}

    /// The packet (`key`, `hash`) belongs to megaflow `flow`, found in (or
    /// installed into) subtable `sub` of its dpcls: remember it.
    fn insert(
        &mut self,
        key: &FlowKey,
        hash: u32,
        flow: MegaflowRef,
        sub: u16,
        flows: &MegaflowTable,
    );

    /// The packets of `todo` may be inserted soon: start loading where
    /// they go.
    #[inline(always)]
    fn prefetch_for_insert(&self, _hashes: &[u32], _todo: u32) {}

    /// Forgets every entry.
    fn clear(&mut self);

    /// Periodic work at the start of a batch, at `now_ms`.
    #[inline(always)]
    fn tick(&mut self, _now_ms: u64) {}

    /// Bytes of its tables.
    fn memory_bytes(&self) -> usize;
}

impl CacheTier for Emc {
    fn kind(&self) -> TierKind {
        TierKind::Emc
    }
    #[inline(always)]
    fn lookup_batch(
        &mut self,
        p: &Probe<'_>,
        todo: u32,
        out: &mut [MegaflowRef; BATCH_SIZE],
    ) -> u32 {
        Emc::lookup_batch(self, p.keys, p.hashes, todo, p.ct, p.flows, out)
    }
    #[inline(always)]
    fn insert(&mut self, key: &FlowKey, hash: u32, flow: MegaflowRef, _: u16, f: &MegaflowTable) {
        self.maybe_insert(key, hash, flow, f);
    }
    fn clear(&mut self) {
        Emc::clear(self);
    }
    fn memory_bytes(&self) -> usize {
        Emc::memory_bytes(self)
    }
}

impl CacheTier for Smc {
    fn kind(&self) -> TierKind {
        TierKind::Smc
    }
    #[inline(always)]
    fn lookup_batch(
        &mut self,
        p: &Probe<'_>,
        todo: u32,
        out: &mut [MegaflowRef; BATCH_SIZE],
    ) -> u32 {
        Smc::lookup_batch(self, p.keys, p.hashes, todo, p.flows, out)
    }
    #[inline(always)]
    fn insert(&mut self, _: &FlowKey, hash: u32, flow: MegaflowRef, _: u16, f: &MegaflowTable) {
        Smc::insert(self, hash, flow.index, f);
    }
    fn clear(&mut self) {
        Smc::clear(self);
    }
    fn memory_bytes(&self) -> usize {
        Smc::memory_bytes(self)
    }
}

impl CacheTier for Dfc {
    fn kind(&self) -> TierKind {
        TierKind::Dfc
    }
    #[inline(always)]
    fn lookup_batch(
        &mut self,
        p: &Probe<'_>,
        todo: u32,
        out: &mut [MegaflowRef; BATCH_SIZE],
    ) -> u32 {
        Dfc::lookup_batch(self, p.keys, p.hashes, todo, p.flows, out)
    }
    #[inline(always)]
    fn insert(&mut self, _: &FlowKey, hash: u32, flow: MegaflowRef, _: u16, _: &MegaflowTable) {
        Dfc::insert(self, hash, flow.index);
    }
    fn clear(&mut self) {
        Dfc::clear(self);
    }
    fn memory_bytes(&self) -> usize {
        Dfc::memory_bytes(self)
    }
}

impl CacheTier for Cd {
    fn kind(&self) -> TierKind {
        TierKind::Cd
    }
    #[inline(always)]
    fn lookup_batch(&mut self, _: &Probe<'_>, _: u32, _: &mut [MegaflowRef; BATCH_SIZE]) -> u32 {
        0
    }
    #[inline(always)]
    fn direct(&mut self, hashes: &[u32], grp: u32, sub: &mut [u16; BATCH_SIZE]) -> u32 {
        if self.is_active() {
            Cd::lookup_batch(self, hashes, grp, sub)
        } else {
            0
        }
    }
    #[inline(always)]
    fn directed_hit(&mut self, _: usize, _: u32, cls: &Dpcls, sub: u16, _: u32) {
        self.record_hit(cls.rank_of(sub).unwrap_or(1), true);
    }
    #[inline(always)]
    fn directed_misses(&mut self, n: u32) {
        if n != 0 {
            self.record_wasted(u64::from(n));
        }
    }
    #[inline(always)]
    fn ranked_hit(&mut self, cls: &Dpcls, sub: u16) {
        self.record_hit(cls.rank_of(sub).unwrap_or(1), false);
    }
    #[inline(always)]
    fn insert(&mut self, _: &FlowKey, hash: u32, _: MegaflowRef, sub: u16, _: &MegaflowTable) {
        if self.is_active() && sub != NO_SUBTABLE {
            Cd::insert(self, hash, sub);
        }
    }
    fn clear(&mut self) {
        Cd::clear(self);
    }
    fn tick(&mut self, now_ms: u64) {
        self.evaluate(now_ms);
    }
    fn memory_bytes(&self) -> usize {
        Cd::memory_bytes(self)
    }
}

/// The hybrid table with the subtable entries its last lookup found (for
/// [`CacheTier::direct`] in the same batch).
#[derive(Debug)]
pub struct HybridTier {
    table: Hybrid,
    hinted: u32,
    subs: [u16; BATCH_SIZE],
    pos: [u32; BATCH_SIZE],
}

impl HybridTier {
    /// A hybrid table of `buckets` buckets.
    pub fn new(buckets: usize, seed: u64) -> Self {
        HybridTier {
            table: Hybrid::new(buckets, seed),
            hinted: 0,
            subs: [NO_SUBTABLE; BATCH_SIZE],
            pos: [0; BATCH_SIZE],
        }
    }
}

impl CacheTier for HybridTier {
    fn kind(&self) -> TierKind {
        TierKind::Hybrid
    }
    #[inline(always)]
    fn lookup_batch(
        &mut self,
        p: &Probe<'_>,
        todo: u32,
        out: &mut [MegaflowRef; BATCH_SIZE],
    ) -> u32 {
        let found = self.table.lookup_batch(
            p.keys,
            p.hashes,
            todo,
            p.flows,
            out,
            &mut self.subs,
            &mut self.pos,
        );
        self.hinted = found.subtable;
        found.megaflow
    }
    #[inline(always)]
    fn direct(&mut self, _: &[u32], grp: u32, sub: &mut [u16; BATCH_SIZE]) -> u32 {
        let h = self.hinted & grp;
        let mut m = h;
        while m != 0 {
            let j = m.trailing_zeros() as usize;
            m &= m - 1;
            sub[j] = self.subs[j];
        }
        h
    }
    #[inline(always)]
    fn directed_hit(&mut self, j: usize, hash: u32, _: &Dpcls, _: u16, idx: u32) {
        self.table.promote(hash, self.pos[j], idx);
    }
    #[inline(always)]
    fn insert(&mut self, _: &FlowKey, hash: u32, flow: MegaflowRef, sub: u16, f: &MegaflowTable) {
        self.table.insert(hash, flow.index, sub, f.len());
    }
    #[inline(always)]
    fn prefetch_for_insert(&self, hashes: &[u32], todo: u32) {
        self.table.prefetch_for_insert(hashes, todo);
    }
    fn clear(&mut self) {
        self.table.clear();
        self.hinted = 0;
    }
    fn memory_bytes(&self) -> usize {
        self.table.memory_bytes()
    }
}

/// A tier of the pipeline's list: the built-in second-level caches by
/// value (their calls inline into the batch loop), any other tier boxed.
#[derive(Debug)]
pub enum AnyTier {
    /// Signature match cache.
    Smc(Smc),
    /// Datapath flow cache.
    Dfc(Dfc),
    /// Cuckoo Distributor.
    Cd(Cd),
    /// Hybrid table.
    Hybrid(HybridTier),
    /// A tier from elsewhere.
    Boxed(Box<dyn CacheTier>),
}

impl AnyTier {
    /// The second-level tier `cfg` asks for, if any (`auto` runs the
    /// hybrid table).
    pub fn for_config(cfg: &Config) -> Option<AnyTier> {
        Some(match cfg.second_level {
            SecondLevel::Smc => AnyTier::Smc(Smc::new(cfg.smc_entries, cfg.seed ^ 0x51)),
            SecondLevel::Dfc => AnyTier::Dfc(Dfc::new(cfg.dfc_entries)),
            SecondLevel::Cd => AnyTier::Cd(Cd::new(
                cfg.cd_buckets,
                cfg.cd_ways,
                cfg.cd_adapt_interval_ms,
                cfg.seed ^ 0xcd,
            )),
            SecondLevel::Hybrid | SecondLevel::Auto => {
                AnyTier::Hybrid(HybridTier::new(cfg.hybrid_buckets, cfg.seed ^ 0x4b))
            }
            SecondLevel::None => return None,
        })
    }

    /// The Cuckoo Distributor's state, if this is one.
    pub fn cd_report(&self) -> Option<CdReport> {
        match self {
            AnyTier::Cd(c) => Some(c.report()),
            _ => None,
        }
    }
}

/// Calls `$call` on whichever tier `$t` holds (`ref` or `mut` says how
/// a boxed tier is borrowed); trait methods are called by their full name
/// so that the caches' inherent methods of the same names are not taken.
macro_rules! dispatch {
    ($t:expr, ref $x:ident => $call:expr) => {
        match $t {
            AnyTier::Smc($x) => $call,
            AnyTier::Dfc($x) => $call,
            AnyTier::Cd($x) => $call,
            AnyTier::Hybrid($x) => $call,
            AnyTier::Boxed(b) => {
                let $x: &dyn CacheTier = b.as_ref();
                $call
            }
        }
    };
    ($t:expr, mut $x:ident => $call:expr) => {
        match $t {
            AnyTier::Smc($x) => $call,
            AnyTier::Dfc($x) => $call,
            AnyTier::Cd($x) => $call,
            AnyTier::Hybrid($x) => $call,
            AnyTier::Boxed(b) => {
                let $x: &mut dyn CacheTier = b.as_mut();
                $call
            }
        }
    };
}

impl CacheTier for AnyTier {
    #[inline(always)]
    fn kind(&self) -> TierKind {
        dispatch!(self, ref t => CacheTier::kind(t))
    }
    #[inline(always)]
    fn name(&self) -> &'static str {
        dispatch!(self, ref t => CacheTier::name(t))
    }
    #[inline(always)]
    fn lookup_batch(
        &mut self,
        p: &Probe<'_>,
        todo: u32,
        out: &mut [MegaflowRef; BATCH_SIZE],
    ) -> u32 {
        dispatch!(self, mut t => CacheTier::lookup_batch(t, p, todo, out))
    }
    #[inline(always)]
    fn direct(&mut self, hashes: &[u32], grp: u32, sub: &mut [u16; BATCH_SIZE]) -> u32 {
        dispatch!(self, mut t => CacheTier::direct(t, hashes, grp, sub))
    }
    #[inline(always)]
    fn directed_hit(&mut self, j: usize, hash: u32, cls: &Dpcls, sub: u16, idx: u32) {
        dispatch!(self, mut t => CacheTier::directed_hit(t, j, hash, cls, sub, idx))
    }
    #[inline(always)]
    fn directed_misses(&mut self, n: u32) {
        dispatch!(self, mut t => CacheTier::directed_misses(t, n))
    }
    #[inline(always)]
    fn ranked_hit(&mut self, cls: &Dpcls, sub: u16) {
        dispatch!(self, mut t => CacheTier::ranked_hit(t, cls, sub))
    }
    #[inline(always)]
    fn insert(
        &mut self,
        key: &FlowKey,
        hash: u32,
        flow: MegaflowRef,
        sub: u16,
        flows: &MegaflowTable,
    ) {
        dispatch!(self, mut t => CacheTier::insert(t, key, hash, flow, sub, flows))
    }
    #[inline(always)]
    fn prefetch_for_insert(&self, hashes: &[u32], todo: u32) {
        dispatch!(self, ref t => CacheTier::prefetch_for_insert(t, hashes, todo))
    }
    fn clear(&mut self) {
        dispatch!(self, mut t => CacheTier::clear(t))
    }
    #[inline(always)]
    fn tick(&mut self, now_ms: u64) {
        dispatch!(self, mut t => CacheTier::tick(t, now_ms))
    }
    fn memory_bytes(&self) -> usize {
        dispatch!(self, ref t => CacheTier::memory_bytes(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_verdicts_are_one_per_kind() {
        let names: std::collections::HashSet<&str> =
            TierKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(names.len(), TierKind::ALL.len());
        let verdicts: std::collections::HashSet<Tier> =
            TierKind::ALL.iter().map(|k| k.verdict()).collect();
        assert_eq!(verdicts.len(), TierKind::ALL.len());
        // Every second-level cache but auto (the hybrid table, switched)
        // and none names its tier.
        for l in SecondLevel::ALL {
            let cfg = Config {
                second_level: l,
                smc_entries: 64,
                dfc_entries: 64,
                cd_buckets: 64,
                hybrid_buckets: 64,
                ..Config::default()
            };
            match AnyTier::for_config(&cfg) {
                Some(t) if l != SecondLevel::Auto => {
                    assert_eq!(t.name(), l.name());
                    assert!(t.memory_bytes() > 0, "{l}");
                }
                Some(t) => assert_eq!(t.kind(), TierKind::Hybrid),
                None => assert_eq!(l, SecondLevel::None),
            }
        }
    }
}
