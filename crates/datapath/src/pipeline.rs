//! The pipeline: one datapath worker's cascade of caches.
//!
//! What: [`Datapath`] owns a worker's configuration, EMC, the list of
//! cache tiers after it ([`crate::tier`]: the configured second level —
//! SMC, DFC, Cuckoo Distributor, hybrid — and any tier pushed from
//! outside), one dpcls per in_port, the megaflow table and the statistics,
//! and classifies a [`Batch`] at a time ([`Datapath::process_batch`]):
//!
//! 1. EMC (if `emc-enable`): exact key compare.
//! 2. The tiers, in order: megaflow hits (signature/index → megaflow,
//!    masked compare; a hit is promoted into the EMC with probability 1/N);
//!    then, in the dpcls stage, the subtable directions some tiers give
//!    (the CD, the hybrid table's subtable entries).
//! 3. dpcls: ranked tuple space search of the packet's in_port classifier.
//!    A hit fills every tier and, with probability 1/N, the EMC.
//! 4. Upcall: the slow path returns actions and a mask; the megaflow is
//!    installed (with in_port made exact, or as an exact-match megaflow when
//!    megaflows are off) unless `flow-limit` megaflows are live, in which
//!    case the packet gets the actions and nothing is installed.
//!
//! Why this shape: each tier takes the whole batch (bitmap of unclassified
//! packets) so memory accesses overlap; caches hold indices, so removal is
//! O(1) and never leaves a dangling reference; time (`now_ms`) and cycle
//! counts come from the caller, so the worker reads no clock and tests are
//! deterministic. Nothing on the hit path allocates, locks or makes a
//! syscall; installation (upcall path) may allocate.
//!
//! Periodic work happens at the start of a batch, from `now_ms`: subtable
//! re-ranking (every `subtable-rerank-interval`) and the CD's on/off
//! decision. Idle expiry and revalidation are calls between batches
//! ([`Datapath::expire_idle`], [`Datapath::remove_megaflow`],
//! [`Datapath::flush`]).
//!
//! Invariants: every packet of a processed batch has a verdict other than
//! `Pending` and is counted in exactly one outcome counter; every megaflow
//! in a dpcls is live in the megaflow table and vice versa; every installed
//! megaflow's mask covers in_port exactly, so a cache shared by all ports
//! (EMC, SMC, DFC) can never answer with another port's megaflow.
//!
//! Threads: one `Datapath` per worker thread; no sharing.

use crate::auto::{Auto, AutoReport};
use crate::batch::{Batch, DropReason, Tier, Verdict, BATCH_SIZE};
use crate::cd::CdReport;
use crate::config::{Config, ConfigError, SecondLevel};
use crate::dpcls::{Dpcls, NO_SUBTABLE};
use crate::emc::Emc;
use crate::megaflow::{InstallError, Megaflow, MegaflowRef, MegaflowTable};
use crate::stats::{PmdStats, PmdStatsReport};
use crate::tier::{AnyTier, CacheTier, Probe};
use crate::upcall::{Upcall, UpcallError};
use flowpath_flow::extract::possible_words;
use flowpath_flow::key::{
    W_ARP_SHA, W_ARP_THA, W_IPV6_MISC, W_L2_DST, W_L2_SRC, W_META, W_NW, W_TP,
};
use flowpath_flow::{FlowKey, FlowMask};
use flowpath_odp::{DpAction, DpActions};

/// The mask of an exact-match megaflow (megaflows off): every bit a key
/// built by the extractor can have.
pub const EXACT_MASK: FlowMask = {
    let mut w = [0u64; flowpath_flow::FLOW_WORDS];
    w[W_META] = (1 << 58) - 1;
    w[W_NW] = u64::MAX;
    w[W_TP] = 0xffff_0fff_ffff_ffff;
    w[W_L2_DST] = u64::MAX;
    w[W_L2_SRC] = u64::MAX;
    w[W_ARP_SHA] = (1 << 48) - 1;
    w[W_ARP_THA] = (1 << 48) - 1;
    w[W_IPV6_MISC] = (1 << 20) - 1;
    let mut i = 8;
    while i < 14 {
        w[i] = u64::MAX;
        i += 1;
    }
    FlowMask { w }
};

/// The exact-match mask for `key`'s kind of packet (as OVS's
/// `flow_wildcards_init_for_packet`): [`EXACT_MASK`] limited to the words
/// the extractor can fill for its `dl_type` and `nw_proto`
/// ([`possible_words`]; both fields are exact in the mask, so every packet
/// of the megaflow shares them). An IPv4 exact-match megaflow needs five
/// words instead of fourteen. (Any mask that covers the slow path's is
/// correct; this one also keeps the megaflow exact.)
pub fn exact_mask_for(key: &FlowKey) -> FlowMask {
    let words = possible_words(key.dl_type(), key.nw_proto());
    let mut m = EXACT_MASK;
    for (i, w) in m.w.iter_mut().enumerate() {
        if words >> i & 1 == 0 {
            *w = 0;
        }
    }
    m
}

/// The in_port and recirc_id bits of the mask, always made exact in megaflows.
const IN_PORT_MASK: u64 = 0xffff_ffff;

/// One datapath worker. See the module documentation.
#[derive(Debug)]
pub struct Datapath {
    cfg: Config,
    emc: Emc,
    /// The tiers after the EMC, in cascade order: the configured
    /// second-level cache (if any, first), then tiers pushed from outside.
    tiers: Vec<AnyTier>,
    /// Whether `tiers[0]` is the configured second-level cache.
    configured_tier: bool,
    /// The megaflows, with the per-in_port dpcls that hold their keys.
    flows: MegaflowTable,
    stats: PmdStats,
    next_rerank_ms: Option<u64>,
    /// The upcall budget's current millisecond and the upcalls each input
    /// port bucket made in it.
    budget_ms: u64,
    budget_used: [u32; 16],
    /// `auto`'s tuner, when the second level is `auto`.
    auto: Option<Auto>,
    /// The tiers the current batch goes through (the configuration's, or
    /// `auto`'s arm).
    emc_active: bool,
    second_active: bool,
    /// The EMC inserts every miss (`auto` warming it for an exploration
    /// turn), not at the configured probability.
    emc_warming: bool,
    /// Packets processed since the caller last reported cycles.
    batch_packets: u32,
    /// Changes every batch: which packets' hashes select them for filling
    /// `auto`'s hybrid table while it is off.
    fill_salt: u32,
    /// The packets of the current batch so chosen (bitmap; 0 unless `auto`
    /// has the hybrid table off).
    off_fill: u32,
}

/// While `auto` has the hybrid table off, 1 in this many of the ranked
/// hits that needed one subtable still fill it.
const AUTO_OFF_FILL_ONE_IN: u32 = 32;

/// Whether the packet with `hash` is one of those that fill `auto`'s
/// hybrid table while it is off, in the batch with `salt`.
#[inline(always)]
fn chosen_for_off_fill(hash: u32, salt: u32) -> bool {
    hash.wrapping_add(salt).is_multiple_of(AUTO_OFF_FILL_ONE_IN)
}

/// The packets of a batch (`hashes`, batch salt `salt`) that fill `auto`'s
/// hybrid table while it is off: every packet in the pre-warm window
/// before an exploration ([`Auto::prewarming`]), else those
/// [`chosen_for_off_fill`].
fn off_fill_set(hashes: &[u32], salt: u32, prewarm: bool) -> u32 {
    if prewarm {
        return ((1u64 << hashes.len()) - 1) as u32;
    }
    let mut set = 0u32;
    for (i, &hash) in hashes.iter().enumerate() {
        set |= u32::from(chosen_for_off_fill(hash, salt)) << i;
    }
    set
}

fn auto_for(cfg: &Config) -> Option<Auto> {
    (cfg.second_level == SecondLevel::Auto)
        .then(|| Auto::new(cfg.auto_interval_ms, cfg.auto_samples, cfg.emc_enable))
}

/// Bitmap of the packets of `todo` whose in_port is `port`.
#[inline(always)]
fn port_group(keys: &[FlowKey], todo: u32, port: u32) -> u32 {
    let mut g = 0;
    let mut m = todo;
    while m != 0 {
        let i = m.trailing_zeros() as usize;
        m &= m - 1;
        g |= u32::from(keys[i].in_port() == port) << i;
    }
    g
}

impl Datapath {
    /// A worker with empty caches and tables.
    pub fn new(cfg: Config) -> Result<Self, ConfigError> {
        cfg.validate()?;
        Ok(Datapath {
            emc: Emc::new(
                cfg.emc_entries,
                cfg.emc_ways,
                cfg.emc_insert_inv_prob,
                cfg.seed,
            ),
            tiers: AnyTier::for_config(&cfg).into_iter().collect(),
            configured_tier: cfg.second_level != SecondLevel::None,
            flows: MegaflowTable::new(),
            stats: PmdStats::default(),
            next_rerank_ms: None,
            budget_ms: 0,
            budget_used: [0; 16],
            auto: auto_for(&cfg),
            emc_active: cfg.emc_enable,
            emc_warming: false,
            second_active: true,
            batch_packets: 0,
            fill_salt: 0,
            off_fill: 0,
            cfg,
        })
    }

    /// The current configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Applies a new configuration between batches; rebuilds (empties)
    /// only the caches whose kind or geometry changed. Megaflows stay.
    pub fn set_config(&mut self, cfg: Config) -> Result<(), ConfigError> {
        cfg.validate()?;
        let old = &self.cfg;
        if cfg.emc_entries != old.emc_entries
            || cfg.emc_ways != old.emc_ways
            || cfg.seed != old.seed
        {
            self.emc = Emc::new(
                cfg.emc_entries,
                cfg.emc_ways,
                cfg.emc_insert_inv_prob,
                cfg.seed,
            );
        } else {
            self.emc.set_inv_prob(cfg.emc_insert_inv_prob);
        }
        self.emc_warming = false;
        let second_changed = cfg.second_level != old.second_level
            || cfg.seed != old.seed
            || match cfg.second_level {
                SecondLevel::Smc => cfg.smc_entries != old.smc_entries,
                SecondLevel::Dfc => cfg.dfc_entries != old.dfc_entries,
                SecondLevel::Cd => {
                    cfg.cd_buckets != old.cd_buckets
                        || cfg.cd_ways != old.cd_ways
                        || cfg.cd_adapt_interval_ms != old.cd_adapt_interval_ms
                }
                SecondLevel::Hybrid | SecondLevel::Auto => {
                    cfg.hybrid_buckets != old.hybrid_buckets
                        || (cfg.second_level == SecondLevel::Hybrid)
                            != (old.second_level == SecondLevel::Hybrid)
                }
                SecondLevel::None => false,
            };
        if second_changed {
            if self.configured_tier {
                self.tiers.remove(0);
            }
            let configured = AnyTier::for_config(&cfg);
            self.configured_tier = configured.is_some();
            if let Some(t) = configured {
                self.tiers.insert(0, t);
            }
        }
        if second_changed
            || cfg.auto_interval_ms != old.auto_interval_ms
            || cfg.auto_samples != old.auto_samples
            || cfg.emc_enable != old.emc_enable
        {
            self.auto = auto_for(&cfg);
        }
        if cfg.subtable_rerank_interval_ms != old.subtable_rerank_interval_ms {
            self.next_rerank_ms = None;
        }
        self.cfg = cfg;
        Ok(())
    }

    /// The raw counters.
    pub fn stats(&self) -> &PmdStats {
        &self.stats
    }

    /// The pmd-stats-show view of the counters.
    pub fn report(&self) -> PmdStatsReport {
        self.stats.report(self.flows.len())
    }

    /// Zeroes the counters (`pmd-stats-clear`).
    pub fn clear_stats(&mut self) {
        self.stats = PmdStats::default();
    }

    /// Counts `n` of the packets handed to [`Datapath::process_batch`] as
    /// passes of recirculated packets.
    pub fn note_recirculations(&mut self, n: u64) {
        self.stats.recirculations += n;
    }

    /// Adds `cycles` of processing time (measured by the caller around
    /// `process_batch`).
    /// `auto` learns from these when they come per batch, as a PMD
    /// measures them.
    pub fn add_processing_cycles(&mut self, cycles: u64) {
        self.stats.processing_cycles += cycles;
        self.note_batch_cycles(cycles);
    }

    /// Tells `auto` what the batches since the last call cost, without
    /// counting the cycles in the statistics (for callers that account
    /// processing cycles over a whole interval themselves).
    pub fn note_batch_cycles(&mut self, cycles: u64) {
        if let Some(a) = &mut self.auto {
            a.record_batch(self.batch_packets, cycles);
        }
        self.batch_packets = 0;
    }

    /// The megaflow table.
    pub fn megaflows(&self) -> &MegaflowTable {
        &self.flows
    }

    /// Number of live megaflows.
    pub fn megaflow_count(&self) -> usize {
        self.flows.len()
    }

    /// The megaflow `r` names, if live.
    pub fn megaflow(&self, r: MegaflowRef) -> Option<Megaflow<'_>> {
        self.flows.get(r)
    }

    /// The actions of megaflow `r` (empty if it is no longer live).
    #[inline(always)]
    pub fn actions(&self, r: MegaflowRef) -> &[DpAction] {
        self.flows.actions(r)
    }

    /// The dpcls of `in_port`, if it has live megaflows.
    pub fn dpcls(&self, in_port: u32) -> Option<&Dpcls> {
        self.flows.dpcls(in_port)
    }

    /// Number of EMC entries naming a live megaflow (scans the EMC: for
    /// benchmarks and tests, not the packet path).
    pub fn emc_occupancy(&self) -> usize {
        self.emc.occupancy(&self.flows)
    }

    /// Number of EMC entries.
    pub fn emc_entries(&self) -> usize {
        self.emc.entries()
    }

    /// The Cuckoo Distributor's state, when it is the second level.
    pub fn cd_report(&self) -> Option<CdReport> {
        self.tiers.iter().find_map(AnyTier::cd_report)
    }

    /// Adds a cache tier at the end of the cascade (after the configured
    /// second-level cache, before the dpcls). Its hits are counted as
    /// `other_hits` ([`crate::PmdStats`]); like the second level, it is
    /// consulted only while `auto` (if configured) has the second level
    /// on. It stays across configuration changes.
    pub fn push_tier(&mut self, tier: Box<dyn CacheTier>) {
        self.tiers.push(AnyTier::Boxed(tier));
    }

    /// The tiers after the EMC, in cascade order.
    pub fn tiers(&self) -> &[AnyTier] {
        &self.tiers
    }

    /// What `auto` decided, when it is the second level.
    pub fn auto_report(&self) -> Option<AutoReport> {
        self.auto.as_ref().map(Auto::report)
    }

    /// Periodic work driven by the passed-in time.
    fn tick(&mut self, now_ms: u64) {
        match self.next_rerank_ms {
            None => self.next_rerank_ms = Some(now_ms + self.cfg.subtable_rerank_interval_ms),
            Some(t) if now_ms >= t => {
                for c in self.flows.classifiers_mut() {
                    c.rerank();
                }
                self.next_rerank_ms = Some(now_ms + self.cfg.subtable_rerank_interval_ms);
            }
            Some(_) => {}
        }
        for t in &mut self.tiers {
            t.tick(now_ms);
        }
        if let Some(a) = &mut self.auto {
            a.tick(now_ms);
        }
    }

    /// The mask a megaflow for `key` is installed with, given the slow
    /// path's.
    fn effective_mask(&self, key: &FlowKey, mask: &FlowMask) -> FlowMask {
        let mut m = if self.cfg.megaflows {
            *mask
        } else {
            mask.union(&exact_mask_for(key))
        };
        m.w[W_META] |= IN_PORT_MASK;
        m
    }

    /// Installs a megaflow for `key` under `mask` (in_port is made exact;
    /// megaflows off → exact-match). Returns the new ref and its subtable,
    /// or those of an existing megaflow with the same mask and masked key;
    /// gives the actions back if the port's dpcls has no room for another
    /// mask. Ignores the flow limit (the caller decides).
    pub fn install(
        &mut self,
        key: &FlowKey,
        mask: &FlowMask,
        actions: DpActions,
        now_ms: u64,
    ) -> Result<(MegaflowRef, u16), DpActions> {
        let mut mask = self.effective_mask(key, mask);
        let budget = self.cfg.mask_budget;
        if budget > 0 {
            if let Some(cls) = self.flows.dpcls(key.in_port()) {
                if cls.n_subtables() >= budget && cls.find_subtable(&mask).is_none() {
                    // Un-wildcard more bits: the widest existing mask that
                    // covers this one, else exact match. Either way the
                    // megaflow only shrinks, so it stays correct.
                    let bits = |m: &FlowMask| m.w.iter().map(|w| w.count_ones()).sum::<u32>();
                    mask = cls
                        .ranked()
                        .iter()
                        .filter_map(|&id| cls.subtable(id))
                        .map(|s| *s.mask())
                        .filter(|m| mask.is_subset_of(m))
                        .min_by_key(bits)
                        .unwrap_or_else(|| {
                            let mut m = mask.union(&exact_mask_for(key));
                            m.w[W_META] |= IN_PORT_MASK;
                            m
                        });
                    self.stats.masks_widened += 1;
                }
            }
        }
        match self.flows.insert(key, &mask, actions, now_ms) {
            Ok(x) => Ok(x),
            // Unreachable in the pipeline (it looks a key up before
            // installing); kept total.
            Err(InstallError::Duplicate(r, sub)) => Ok((r, sub)),
            Err(InstallError::NoRoom(actions)) => Err(actions),
        }
    }

    /// Removes a megaflow from the table and its dpcls; every cache then
    /// misses it. Returns false if `r` was not live.
    pub fn remove_megaflow(&mut self, r: MegaflowRef) -> bool {
        self.flows.remove(r)
    }

    /// Removes every megaflow not hit for more than `max_idle_ms` (a
    /// never-hit megaflow counts from its installation). Returns how many.
    pub fn expire_idle(&mut self, now_ms: u64, max_idle_ms: u64) -> usize {
        let mut n = 0;
        for i in 0..self.flows.capacity() as u32 {
            let Some(r) = self.flows.live_at(i) else {
                continue;
            };
            let last = self.flows.last_used_ms(r).unwrap_or(now_ms);
            if crate::dump::idle_expired(last, now_ms, max_idle_ms) {
                self.remove_megaflow(r);
                n += 1;
            }
        }
        n
    }

    /// Removes every megaflow and empties every cache.
    pub fn flush(&mut self) {
        self.flows.clear();
        self.emc.clear();
        for t in &mut self.tiers {
            t.clear();
        }
    }

    /// Classifies every packet of `batch`; returns the verdicts (also kept
    /// in the batch). See the module documentation for the tiers.
    pub fn process_batch<'b, U: Upcall + ?Sized>(
        &mut self,
        batch: &'b mut Batch,
        now_ms: u64,
        upcall: &mut U,
    ) -> &'b [Verdict] {
        let n = batch.len();
        if n == 0 {
            return &batch.verdicts[..0];
        }
        self.tick(now_ms);
        let all = batch.all();
        self.stats.packets_received += n as u64;
        self.batch_packets = self.batch_packets.saturating_add(n as u32);
        let mut prewarm = false;
        let mut resting = false;
        let (emc_on, second_on) = match &self.auto {
            Some(a) => {
                self.fill_salt = self.fill_salt.wrapping_add(1);
                prewarm = a.prewarming();
                resting = a.resting();
                let arm = a.arm();
                // (Not when insertion is off: `emc-insert-inv-prob=0`.)
                let warming = a.warming() && self.cfg.emc_insert_inv_prob != 0;
                if warming != self.emc_warming {
                    self.emc_warming = warming;
                    let inv_prob = if warming {
                        1
                    } else {
                        self.cfg.emc_insert_inv_prob
                    };
                    self.emc.set_inv_prob(inv_prob);
                }
                (self.cfg.emc_enable && arm.emc, arm.second)
            }
            None => (self.cfg.emc_enable, true),
        };
        self.emc_active = emc_on;
        self.second_active = second_on;
        let ct = batch.ct_packets();
        let Batch {
            keys,
            hashes,
            sizes,
            verdicts,
            upcall_actions,
            ..
        } = batch;
        let keys = &keys[..n];
        let hashes = &hashes[..n];
        self.off_fill = 0;
        if !second_on && self.auto.is_some() && !resting {
            // auto has the hybrid table off: the packets chosen to fill it
            // (in dpcls_stage) start loading their buckets now, so that
            // their insert does not wait for memory.
            if let Some(t) = self.tiers.first() {
                self.off_fill = off_fill_set(hashes, self.fill_salt, prewarm);
                t.prefetch_for_insert(hashes, self.off_fill);
            }
        }
        let mut rem = all;
        let mut refs = [MegaflowRef::NONE; BATCH_SIZE];

        if emc_on {
            // (The packets with extension words are checked against
            // their megaflow too: see `emc`.)
            let f = self
                .emc
                .lookup_batch(keys, hashes, rem, ct, &self.flows, &mut refs);
            self.stats.emc_hits += u64::from(f.count_ones());
            mark(verdicts, &refs, f, Tier::Emc);
            rem &= !f;
        }

        if rem != 0 && second_on {
            let probe = Probe {
                keys,
                ct,
                hashes,
                flows: &self.flows,
            };
            for t in &mut self.tiers {
                let f = t.lookup_batch(&probe, rem, &mut refs);
                if f == 0 {
                    continue;
                }
                let kind = t.kind();
                self.stats.count_tier_hits(kind, f.count_ones());
                mark(verdicts, &refs, f, kind.verdict());
                if emc_on {
                    each(f, |i| {
                        self.emc
                            .maybe_insert(&keys[i], hashes[i], refs[i], &self.flows);
                    });
                }
                rem &= !f;
                if rem == 0 {
                    break;
                }
            }
        }

        if rem != 0 {
            rem = self.dpcls_stage(keys, hashes, rem, verdicts);
        }

        if rem != 0 {
            self.upcall_stage(keys, hashes, rem, verdicts, upcall_actions, now_ms, upcall);
        }

        // Megaflow statistics, one update per run of consecutive packets
        // of the same megaflow (as OVS updates a flow's stats once per
        // batch): with few flows, updating per packet made a chain of
        // dependent read-modify-writes of one counter line.
        let mut run = MegaflowRef::NONE;
        let (mut pkts, mut bytes, mut flags) = (0u64, 0u64, 0u16);
        for i in 0..n {
            if let Verdict::Megaflow { flow, tier } = verdicts[i] {
                if tier != Tier::Upcall {
                    if flow != run {
                        if pkts != 0 {
                            self.flows.account_n(run, pkts, bytes, flags, now_ms);
                        }
                        (run, pkts, bytes, flags) = (flow, 0, 0, 0);
                    }
                    pkts += 1;
                    bytes += u64::from(sizes[i]);
                    flags |= keys[i].tcp_flags();
                } else {
                    // Not a hit (as OVS's datapath counts), but the rules
                    // count it: kept apart for the revalidator.
                    self.flows.note_upcall(flow, sizes[i]);
                }
            }
        }
        if pkts != 0 {
            self.flows.account_n(run, pkts, bytes, flags, now_ms);
        }
        &batch.verdicts[..n]
    }

    /// CD-directed and ranked dpcls lookups, per in_port group. Returns the
    /// packets still unclassified.
    fn dpcls_stage(
        &mut self,
        keys: &[FlowKey],
        hashes: &[u32],
        rem: u32,
        verdicts: &mut [Verdict; BATCH_SIZE],
    ) -> u32 {
        let emc_on = self.emc_active;
        let second_on = self.second_active;
        let mut left = rem;
        let mut todo = rem;
        while todo != 0 {
            let port = keys[todo.trailing_zeros() as usize].in_port();
            let grp = port_group(keys, todo, port);
            todo &= !grp;
            let Some(ci) = self.flows.classifier_index(port) else {
                continue;
            };
            let mut idx = [0u32; BATCH_SIZE];
            let mut sub = [NO_SUBTABLE; BATCH_SIZE];
            let mut grp_rem = grp;
            let mut misdirected = 0u32;

            if second_on {
                // Tiers that direct packets to a subtable (the Cuckoo
                // Distributor, the hybrid table's subtable entries).
                for t in &mut self.tiers {
                    let directed = t.direct(hashes, grp_rem, &mut sub);
                    if directed == 0 {
                        continue;
                    }
                    let f = self
                        .flows
                        .dpcls_lookup_directed(ci, &sub, keys, directed, &mut idx);
                    let cls = self.flows.classifier(ci);
                    let kind = t.kind();
                    let mut hit = 0u32;
                    each(f, |j| {
                        if let Some(r) = self.flows.live_at(idx[j]) {
                            verdicts[j] = Verdict::Megaflow {
                                flow: r,
                                tier: kind.verdict(),
                            };
                            t.directed_hit(j, hashes[j], cls, sub[j], idx[j]);
                            if emc_on {
                                self.emc.maybe_insert(&keys[j], hashes[j], r, &self.flows);
                            }
                            hit |= 1 << j;
                        }
                    });
                    self.stats.count_tier_hits(kind, hit.count_ones());
                    let missed = directed & !f;
                    t.directed_misses(missed.count_ones());
                    misdirected |= missed;
                    grp_rem &= !hit;
                    if grp_rem == 0 {
                        break;
                    }
                }
            }

            if grp_rem == 0 {
                left &= !grp;
                continue;
            }
            let mut lookups = 0u64;
            let f =
                self.flows
                    .dpcls_lookup_batch(ci, keys, grp_rem, &mut idx, &mut sub, &mut lookups);
            let cls = self.flows.classifier(ci);
            self.stats.subtable_lookups += lookups + u64::from((misdirected & f).count_ones());
            let mut hit = 0u32;
            each(f, |j| {
                let Some(r) = self.flows.live_at(idx[j]) else {
                    return; // unreachable: dpcls entries are live
                };
                hit |= 1 << j;
                verdicts[j] = Verdict::Megaflow {
                    flow: r,
                    tier: Tier::Megaflow,
                };
                if second_on {
                    for t in &mut self.tiers {
                        t.ranked_hit(cls, sub[j]);
                        t.insert(&keys[j], hashes[j], r, sub[j], &self.flows);
                    }
                } else if self.auto.as_ref().is_some_and(|a| !a.resting()) {
                    // auto has the hybrid table off: keep it warm, so that
                    // the next exploration measures it warm, not empty:
                    // where it would pay most (the ranked search needed
                    // more than one subtable) and from 1 in
                    // AUTO_OFF_FILL_ONE_IN of the other hits (a packet is
                    // chosen by its hash plus a salt that changes every
                    // batch, so that in periodic traffic every flow's turn
                    // comes; chosen in process_batch).
                    if cls.rank_of(sub[j]).unwrap_or(1) > 1 || self.off_fill & (1 << j) != 0 {
                        for t in &mut self.tiers {
                            t.insert(&keys[j], hashes[j], r, sub[j], &self.flows);
                        }
                    }
                }
                if emc_on {
                    self.emc.maybe_insert(&keys[j], hashes[j], r, &self.flows);
                }
            });
            self.stats.megaflow_hits += u64::from(hit.count_ones());
            left &= !((grp & !grp_rem) | hit);
        }
        left
    }

    /// Upcalls for the packets of `rem`, in order, installing megaflows.
    #[allow(clippy::too_many_arguments)]
    fn upcall_stage<U: Upcall + ?Sized>(
        &mut self,
        keys: &[FlowKey],
        hashes: &[u32],
        rem: u32,
        verdicts: &mut [Verdict; BATCH_SIZE],
        upcall_actions: &mut [DpActions; BATCH_SIZE],
        now_ms: u64,
        upcall: &mut U,
    ) {
        let emc_on = self.emc_active;
        let second_on = self.second_active;
        let mut installed = false;
        let mut m = rem;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            let key = &keys[i];
            // An earlier packet of this batch may have installed a megaflow
            // that covers this one: look again before asking the slow path.
            if installed {
                if let Some((idx, sub)) = self.flows.dpcls_lookup_one(key.in_port(), key) {
                    if let Some(cls) = self.flows.dpcls(key.in_port()) {
                        if let Some(r) = self.flows.live_at(idx) {
                            verdicts[i] = Verdict::Megaflow {
                                flow: r,
                                tier: Tier::Megaflow,
                            };
                            self.stats.megaflow_hits += 1;
                            self.stats.subtable_lookups += cls.rank_of(sub).unwrap_or(1) as u64;
                            if second_on {
                                for t in &mut self.tiers {
                                    t.insert(key, hashes[i], r, sub, &self.flows);
                                }
                            }
                            continue;
                        }
                    }
                }
            }
            let budget = self.cfg.upcall_budget_per_ms;
            if budget > 0 {
                if now_ms != self.budget_ms {
                    self.budget_ms = now_ms;
                    self.budget_used = [0; 16];
                }
                let b = &mut self.budget_used[(key.in_port() & 15) as usize];
                if *b >= budget {
                    verdicts[i] = Verdict::Drop(DropReason::UpcallFailed);
                    self.stats.miss_with_failed_upcall += 1;
                    self.stats.upcall_budget_drops += 1;
                    continue;
                }
                *b += 1;
            }
            match upcall.upcall_at(key, now_ms) {
                Ok((actions, mask)) => {
                    if self.flows.len() >= self.cfg.flow_limit {
                        upcall_actions[i] = actions;
                        verdicts[i] = Verdict::SlowPath;
                        self.stats.miss_with_failed_upcall += 1;
                    } else {
                        match self.install(key, &mask, actions, now_ms) {
                            Ok((r, sub)) => {
                                installed = true;
                                verdicts[i] = Verdict::Megaflow {
                                    flow: r,
                                    tier: Tier::Upcall,
                                };
                                self.stats.miss_with_success_upcall += 1;
                                if second_on {
                                    for t in &mut self.tiers {
                                        t.insert(key, hashes[i], r, sub, &self.flows);
                                    }
                                }
                                if emc_on {
                                    self.emc.maybe_insert(key, hashes[i], r, &self.flows);
                                }
                            }
                            Err(actions) => {
                                upcall_actions[i] = actions;
                                verdicts[i] = Verdict::SlowPath;
                                self.stats.miss_with_failed_upcall += 1;
                            }
                        }
                    }
                }
                Err(UpcallError::Failed) => {
                    verdicts[i] = Verdict::Drop(DropReason::UpcallFailed);
                    self.stats.miss_with_failed_upcall += 1;
                }
                Err(UpcallError::Lost) => {
                    verdicts[i] = Verdict::Drop(DropReason::Lost);
                    self.stats.lost += 1;
                }
            }
        }
    }
}

/// Calls `f` for each set bit of `m`, lowest first.
#[inline(always)]
fn each(mut m: u32, mut f: impl FnMut(usize)) {
    while m != 0 {
        let i = m.trailing_zeros() as usize;
        m &= m - 1;
        f(i);
    }
}

#[inline(always)]
fn mark(
    verdicts: &mut [Verdict; BATCH_SIZE],
    refs: &[MegaflowRef; BATCH_SIZE],
    f: u32,
    tier: Tier,
) {
    each(f, |i| {
        verdicts[i] = Verdict::Megaflow {
            flow: refs[i],
            tier,
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flow_fills_the_hybrid_table_in_its_turn() {
        // Over AUTO_OFF_FILL_ONE_IN consecutive batches each packet hash
        // is chosen exactly once, whatever the hash.
        for hash in [0u32, 1, 31, 32, 0xdead_beef, u32::MAX] {
            let chosen = (0..AUTO_OFF_FILL_ONE_IN)
                .filter(|&salt| chosen_for_off_fill(hash, salt))
                .count();
            assert_eq!(chosen, 1, "hash {hash:#x}");
        }
        // In one batch, about 1 in AUTO_OFF_FILL_ONE_IN hashes.
        let mut rng = crate::hash::Rng::new(7);
        let n = 32_000;
        let chosen = (0..n)
            .filter(|_| chosen_for_off_fill(rng.next_u32(), 5))
            .count();
        let expect = n / AUTO_OFF_FILL_ONE_IN as usize;
        assert!(chosen.abs_diff(expect) < expect / 5, "{chosen} of {n}");
    }

    #[test]
    fn the_prewarm_window_fills_every_packet_of_the_batch() {
        let hashes: Vec<u32> = (0..BATCH_SIZE as u32).map(|i| i * 7919).collect();
        for n in [1, 5, BATCH_SIZE] {
            let h = &hashes[..n];
            let all = ((1u64 << n) - 1) as u32;
            assert_eq!(off_fill_set(h, 3, true), all, "{n} packets");
            let chosen = off_fill_set(h, 3, false);
            for (i, &hash) in h.iter().enumerate() {
                assert_eq!(
                    chosen >> i & 1 == 1,
                    chosen_for_off_fill(hash, 3),
                    "packet {i}"
                );
            }
            assert_eq!(chosen & !all, 0);
        }
        // Outside the window, a batch fills about 1 in AUTO_OFF_FILL_ONE_IN.
        let full = off_fill_set(&hashes, 3, false).count_ones();
        assert!(full < BATCH_SIZE as u32 / 2, "{full}");
    }
}
