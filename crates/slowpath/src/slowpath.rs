//! The slow path behind the upcall: OpenFlow-style rule tables, translated.
//!
//! What: [`SlowPath`] implements [`Upcall`] over an immutable
//! [`RuleTables`] version: a miss is translated by
//! `flowpath_ofproto::xlate::xlate` into datapath actions and the megaflow
//! mask; a translation error (too deep, too many resubmits) is
//! [`UpcallError::Failed`] — the packet is dropped and counted as "miss
//! with failed upcall", as in OVS. [`crate::revalidate`] re-checks installed
//! megaflows against a new rule version, as OVS's revalidator does.
//!
//! Why: the datapath crate knows the slow path only through the [`Upcall`]
//! trait; this is the real implementation that `flowpath run` and the
//! benchmark plug in (the tests also use mock ones).
//!
//! Invariants: every `Ok` answer satisfies the megaflow invariant of
//! `xlate` (every key that agrees with the packet's on the mask gets the
//! same actions); after [`crate::revalidate()`], every live megaflow's actions are
//! what the new tables give every packet it covers.
//!
//! Threads: the tables are shared read-only behind an [`Arc`]: the control
//! path builds a new `RuleTables` and publishes it to each worker between
//! batches ([`SlowPath::set_tables`], or
//! [`crate::RuleSwitch::publish_rules`], which also revalidates). The
//! worker calls the upcall inline on its own thread. Translation
//! allocates (it is the miss path, not the per-packet hit path).

use crate::revalidate::revalidate_where;
use flowpath_datapath::{Datapath, Megaflow, Upcall, UpcallError};
use flowpath_flow::key::VLAN_CFI;
use flowpath_flow::{FlowKey, FlowMask};
use flowpath_odp::DpActions;
use flowpath_ofproto::action::Action;
use flowpath_ofproto::learn::LearnedFlows;
use flowpath_ofproto::normal::{Bridge, MacChanges};
use flowpath_ofproto::tables::RuleTables;
use flowpath_ofproto::xlate::{xlate_on, XlateMode};
use std::collections::HashSet;
use std::sync::Arc;

/// How often each worker sweeps aged-out MACs from the learning table.
const MAC_EXPIRE_INTERVAL_MS: u64 = 1000;

/// True when some rule of `tables` uses `NORMAL` (only then is the learning
/// table locked for a translation).
pub fn uses_normal(tables: &RuleTables) -> bool {
    tables
        .rules()
        .iter()
        .any(|r| r.actions.contains(&Action::Normal))
}

/// Counters of the slow path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlowPathStats {
    /// Upcalls handled.
    pub upcalls: u64,
    /// Upcalls whose translation failed.
    pub failed: u64,
    /// Upcalls answered from the translation cache (megaflows off).
    pub cached: u64,
}

/// Most translations the slow path's translation cache keeps (megaflows
/// off; it starts over when full).
pub const XLATE_CACHE_ENTRIES: usize = 65_536;

/// Translations reused by megaflow while the datapath runs with megaflows
/// off: every miss is still an upcall installing an exact-match flow, but
/// a key inside the megaflow of an earlier translation gets that
/// translation's actions without translating again — correct for the same
/// reason a megaflow is (every key agreeing on the mask's bits translates
/// the same), as long as the tables, the MAC table and the learned flows
/// have not changed since (any change empties it). Translations with side
/// effects (`learn`) are not kept. A slow-path structure: it allocates.
#[derive(Clone, Debug, Default)]
struct XlateCache {
    on: bool,
    /// The MAC table's change number the entries were made at.
    mac_seq: u64,
    /// One map per distinct megaflow mask, most used first.
    masks: Vec<(FlowMask, CacheMap)>,
    entries: usize,
}

/// A masked key, hashed with the datapath's packet hash over the key
/// XORed with a per-process random secret (SipHash over 128 bytes per
/// probe costs more than the lookup saves; the secret keeps crafted
/// packets from piling up in one bucket).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct CacheKey(FlowKey);

fn cache_secret() -> &'static FlowKey {
    use std::hash::{BuildHasher, Hasher};
    static S: std::sync::OnceLock<FlowKey> = std::sync::OnceLock::new();
    S.get_or_init(|| {
        let mut k = FlowKey::zero();
        let seed = std::collections::hash_map::RandomState::new();
        for (i, w) in k.w.iter_mut().enumerate() {
            let mut h = seed.build_hasher();
            h.write_usize(i);
            *w = h.finish();
        }
        k
    })
}

impl std::hash::Hash for CacheKey {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        let s = cache_secret();
        let mut k = self.0;
        for (w, x) in k.w.iter_mut().zip(s.w.iter()) {
            *w ^= x;
        }
        h.write_u64(u64::from(flowpath_datapath::hash::packet_hash(&k)));
    }
}

/// Passes [`CacheKey`]'s hash through.
#[derive(Clone, Copy, Debug, Default)]
struct PassThrough(u64);

impl std::hash::Hasher for PassThrough {
    fn finish(&self) -> u64 {
        // Spread the 32-bit hash over the table's index and tag bits.
        self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

type CacheMap =
    std::collections::HashMap<CacheKey, DpActions, std::hash::BuildHasherDefault<PassThrough>>;

impl XlateCache {
    fn clear(&mut self) {
        self.masks.clear();
        self.entries = 0;
    }

    fn get(&mut self, key: &FlowKey) -> Option<(DpActions, FlowMask)> {
        for (i, (m, map)) in self.masks.iter().enumerate() {
            if let Some(a) = map.get(&CacheKey(key.masked(m))) {
                let hit = (a.clone(), *m);
                if i > 0 {
                    self.masks.swap(i, i - 1);
                }
                return Some(hit);
            }
        }
        None
    }

    fn put(&mut self, key: &FlowKey, actions: &DpActions, mask: &FlowMask) {
        if self.entries >= XLATE_CACHE_ENTRIES {
            self.clear();
        }
        let i = match self.masks.iter().position(|(m, _)| m == mask) {
            Some(i) => i,
            None => {
                self.masks.push((*mask, Default::default()));
                self.masks.len() - 1
            }
        };
        let map = &mut self.masks[i].1;
        if map
            .insert(CacheKey(key.masked(mask)), actions.clone())
            .is_none()
        {
            self.entries += 1;
        }
    }
}

/// The rule tables as an [`Upcall`]. See the module documentation.
#[derive(Clone, Debug)]
pub struct SlowPath {
    /// The tables translation uses: `base` plus the learned flows.
    tables: Arc<RuleTables>,
    /// The published tables (without learned flows).
    base: Arc<RuleTables>,
    /// The flows `learn` made (the bridge's when there is one).
    learned: Arc<LearnedFlows>,
    /// The learned flows' change number `tables` reflects.
    learned_seen: u64,
    next_learn_expire_ms: u64,
    /// When this worker last reported its megaflows' use of learned flows
    /// (see [`SlowPath::report_learned_use`]).
    last_use_report_ms: Option<u64>,
    /// When this worker last refreshed the learning table from its
    /// megaflows' use (see [`refresh_macs`]).
    last_mac_refresh_ms: Option<u64>,
    /// Translations by megaflow, reused while the datapath runs without
    /// megaflows (see [`XlateCache`]).
    cache: XlateCache,
    /// Whether `tables` use `NORMAL`.
    normal: bool,
    bridge: Option<Arc<Bridge>>,
    /// The learning table's change number this worker has revalidated up
    /// to.
    mac_seen: u64,
    next_expire_ms: u64,
    last_now_ms: u64,
    stats: SlowPathStats,
    last_error: Option<String>,
}

impl SlowPath {
    /// A slow path over `tables` (`NORMAL` sees an empty learning table
    /// and learns nothing: see [`SlowPath::with_bridge`]).
    pub fn new(tables: Arc<RuleTables>) -> Self {
        SlowPath {
            normal: uses_normal(&tables),
            base: tables.clone(),
            tables,
            learned: Arc::default(),
            learned_seen: 0,
            next_learn_expire_ms: 0,
            last_use_report_ms: None,
            last_mac_refresh_ms: None,
            cache: XlateCache::default(),
            bridge: None,
            mac_seen: 0,
            next_expire_ms: 0,
            last_now_ms: 0,
            stats: SlowPathStats::default(),
            last_error: None,
        }
    }

    /// A slow path over `tables` whose `NORMAL` learns into and forwards
    /// by `bridge`'s table (shared with the bridge's other workers).
    pub fn with_bridge(tables: Arc<RuleTables>, bridge: Arc<Bridge>) -> Self {
        let mut sp = SlowPath::new(tables);
        sp.mac_seen = bridge.seq();
        sp.learned = bridge.learned.clone();
        sp.bridge = Some(bridge);
        sp.merge_learned();
        sp
    }

    /// The bridge state `NORMAL` uses, if any.
    pub fn bridge(&self) -> Option<&Arc<Bridge>> {
        self.bridge.as_ref()
    }

    /// Re-checks every live megaflow of `dp` against `tables` (with this
    /// slow path's bridge state, without learning): see
    /// [`crate::revalidate()`].
    pub fn revalidate(&self, dp: &mut Datapath, tables: &RuleTables) -> usize {
        let bridge = self.bridge.as_deref().filter(|_| uses_normal(tables));
        revalidate_where(dp, tables, bridge, self.last_now_ms, |_| true)
    }

    /// The bridge, if the current tables use `NORMAL`.
    fn normal_bridge(&self) -> Option<&Bridge> {
        self.bridge.as_deref().filter(|_| self.normal)
    }

    /// The current rule tables.
    pub fn tables(&self) -> &Arc<RuleTables> {
        &self.tables
    }

    /// Replaces the rule tables (between batches; the learned flows stay);
    /// returns the old ones. Installed megaflows are not checked: see
    /// [`crate::revalidate()`].
    pub fn set_tables(&mut self, tables: Arc<RuleTables>) -> Arc<RuleTables> {
        let old = std::mem::replace(&mut self.base, tables);
        self.merge_learned();
        old
    }

    /// The flows `learn` made here (the bridge's, when there is one).
    pub fn learned(&self) -> &Arc<LearnedFlows> {
        &self.learned
    }

    /// Rebuilds the tables translation uses from the published ones and
    /// the learned flows.
    fn merge_learned(&mut self) {
        self.cache.clear();
        self.learned_seen = self.learned.seq();
        let flows = self.learned.flows();
        self.tables = if flows.is_empty() {
            self.base.clone()
        } else {
            Arc::new(self.base.with_added(&flows))
        };
        self.normal = uses_normal(&self.tables);
    }

    /// When flows were learned (here or by another worker), refreshed into
    /// a new set or expired since the tables were built: rebuilds them and
    /// re-checks every megaflow. Returns how many megaflows were removed.
    fn sync_learned(&mut self, dp: &mut Datapath, now_ms: u64) -> usize {
        if self.learned.seq() == self.learned_seen {
            return 0;
        }
        self.merge_learned();
        let bridge = self.bridge.clone().filter(|_| self.normal);
        revalidate_where(dp, &self.tables, bridge.as_deref(), now_ms, |_| true)
    }

    /// Tells the learned flows which of them packets went through since
    /// the last report (for their idle timeouts; the flows those packets
    /// learn are refreshed, restarting their hard timeouts, as OVS's
    /// translation cache relearns on revalidation), and which of them TCP
    /// FIN or RST packets went through (`fin_timeout`; from the
    /// megaflows' TCP flags, which leave out the packet of the upcall that
    /// installed each): every megaflow installed
    /// or hit since then is translated again, recording the rules its
    /// packets pass, as OVS's revalidator pushes megaflow statistics to
    /// rules. Once a second, only while a learned flow has a timeout or a
    /// `fin_timeout`; one translation per megaflow active in that second.
    fn report_learned_use(&mut self, dp: &Datapath, now_ms: u64) {
        // Megaflows installed or hit after the last report (in an earlier
        // batch than the one after which it ran, at its millisecond or
        // later: a hit in its very millisecond was reported then).
        let since = self.last_use_report_ms.replace(now_ms);
        let tables = self.tables.clone();
        let base_len = self.base.rules().len();
        let learned = tables.rules().get(base_len..).unwrap_or(&[]);
        if learned.is_empty() {
            return;
        }
        let bridge = self.bridge.clone().filter(|_| self.normal);
        // Per learned flow: the last use, whether a FIN/RST went through.
        let mut used = vec![None::<u64>; learned.len()];
        let mut fin = vec![false; learned.len()];
        let mut relearned: Vec<(flowpath_ofproto::rule::Rule, u64)> = Vec::new();
        let mode = XlateMode {
            record: true,
            relearn: true,
            ..XlateMode::default()
        };
        let table = dp.megaflows();
        for r in table.live_refs() {
            let Some(st) = table.stats(r) else {
                continue;
            };
            let after = |t: u64| since.is_none_or(|s| t > s);
            if !after(st.created_ms) && !st.used_ms.is_some_and(after) {
                continue;
            }
            let Some(m) = dp.megaflow(r) else {
                continue;
            };
            let t = st.used_ms.unwrap_or(0).max(st.created_ms);
            let x = xlate_on(&*tables, bridge.as_deref(), &m.key, now_ms, mode);
            let fin_rst = st.tcp_flags & flowpath_flow::key::TCP_FIN_RST != 0;
            for i in x.rules {
                if let Some(j) = (i as usize).checked_sub(base_len) {
                    if let Some(u) = used.get_mut(j) {
                        *u = Some(u.map_or(t, |u| u.max(t)));
                    }
                    if let Some(f) = fin.get_mut(j) {
                        *f |= fin_rst;
                    }
                }
            }
            relearned.extend(x.learned.into_iter().map(|r| (r, t)));
        }
        self.learned.touch(
            learned
                .iter()
                .zip(&used)
                .filter_map(|(r, u)| u.map(|t| (r, t))),
        );
        self.learned.saw_fin(
            learned
                .iter()
                .zip(&fin)
                .filter(|(_, f)| **f)
                .map(|(r, _)| r),
        );
        if !relearned.is_empty() {
            self.learned.refresh(relearned);
        }
    }

    /// The counters.
    pub fn stats(&self) -> SlowPathStats {
        self.stats
    }

    /// The message of the last failed translation.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }
}

impl Upcall for SlowPath {
    fn upcall(&mut self, key: &FlowKey) -> Result<(DpActions, FlowMask), UpcallError> {
        let now = self.last_now_ms;
        self.upcall_at(key, now)
    }

    fn upcall_at(
        &mut self,
        key: &FlowKey,
        now_ms: u64,
    ) -> Result<(DpActions, FlowMask), UpcallError> {
        self.stats.upcalls += 1;
        self.last_now_ms = self.last_now_ms.max(now_ms);
        if self.cache.on {
            // A MAC learned, moved or expired changes translations.
            if let Some(seq) = self.normal_bridge().map(Bridge::seq) {
                if seq != self.cache.mac_seq {
                    self.cache.clear();
                    self.cache.mac_seq = seq;
                }
            }
            if let Some(hit) = self.cache.get(key) {
                self.stats.cached += 1;
                return Ok(hit);
            }
        }
        let learn = XlateMode {
            learn: true,
            ..XlateMode::default()
        };
        let x = xlate_on(&*self.tables, self.normal_bridge(), key, now_ms, learn);
        let side_effects = !x.learned.is_empty();
        if side_effects {
            self.learned.add(x.learned, now_ms);
        }
        if let Some(e) = x.error {
            self.stats.failed += 1;
            self.last_error = Some(e);
            return Err(UpcallError::Failed);
        }
        if self.cache.on && !side_effects {
            self.cache.put(key, &x.actions, &x.megaflow);
        }
        Ok((x.actions, x.megaflow))
    }

    /// Ages the learning table (once a second) and revalidates the
    /// megaflows whose destination MAC's entry changed since this worker
    /// last looked (learned, moved, expired, evicted; everything after a
    /// flush). Lock-free when nothing changed.
    fn after_batch(&mut self, dp: &mut Datapath, now_ms: u64) -> usize {
        // Per batch: a few branches and atomic loads when nothing changed
        // (no lock, no reference-count traffic).
        let cache = !dp.config().megaflows;
        if cache != self.cache.on {
            self.cache.clear();
            self.cache.on = cache;
        }
        let mut removed = 0;
        if now_ms >= self.next_learn_expire_ms && self.learned_seen != 0 {
            self.next_learn_expire_ms = now_ms + MAC_EXPIRE_INTERVAL_MS;
            if self.learned.has_timeouts() {
                // The report reads the tables' learned part: up to date.
                removed += self.sync_learned(dp, now_ms);
                self.report_learned_use(dp, now_ms);
            }
            self.learned.expire(now_ms);
        }
        removed += self.sync_learned(dp, now_ms);
        if !self.normal {
            return removed;
        }
        let Some(b) = self.bridge.as_deref() else {
            return 0;
        };
        self.last_now_ms = self.last_now_ms.max(now_ms);
        if now_ms >= self.next_expire_ms {
            self.next_expire_ms = now_ms + MAC_EXPIRE_INTERVAL_MS;
            let since = self.last_mac_refresh_ms.replace(now_ms);
            refresh_macs(dp, b, since, now_ms);
            b.macs().expire(now_ms);
        }
        if b.seq() == self.mac_seen {
            return removed;
        }
        let (changes, seq) = b.macs().changes_since(self.mac_seen);
        self.mac_seen = seq;
        let dl_dst_exact = |m: &Megaflow<'_>| m.mask.to_key().dl_dst() == 0xffff_ffff_ffff;
        removed
            + match changes {
                MacChanges::None => 0,
                MacChanges::All => {
                    revalidate_where(dp, &self.tables, Some(b), now_ms, dl_dst_exact)
                }
                MacChanges::Some(v) => {
                    let macs: HashSet<u64> = v.iter().map(|&(_, mac)| mac).collect();
                    revalidate_where(dp, &self.tables, Some(b), now_ms, |m| {
                        dl_dst_exact(m) && macs.contains(&m.key.dl_dst())
                    })
                }
            }
    }
}

/// Keeps the learning-table entries of the sources whose packets hit
/// megaflows since `since` (exclusive) fresh: a megaflow that matches its
/// source MAC, input port and (tagged) VLAN id exactly — as every megaflow
/// through `NORMAL` does — refreshes the entry of that MAC on that port in
/// the port's VLAN, if it still says so ([`MacTable::refresh`]). So a
/// conversation carried by megaflows alone does not age out and flood, as
/// in OVS, whose revalidator refreshes learning from the megaflows'
/// statistics. Once a second per worker, one lock of the table.
///
/// [`MacTable::refresh`]: flowpath_ofproto::normal::MacTable::refresh
fn refresh_macs(dp: &Datapath, bridge: &Bridge, since: Option<u64>, now_ms: u64) {
    let table = dp.megaflows();
    let mut seen: Vec<(u16, u64, u32)> = Vec::new();
    for r in table.live_refs() {
        let Some(used) = table.stats(r).and_then(|st| st.used_ms) else {
            continue;
        };
        if since.is_some_and(|s| used <= s) {
            continue;
        }
        let Some(m) = dp.megaflow(r) else {
            continue;
        };
        let mk = m.mask.to_key();
        if mk.dl_src() != 0xffff_ffff_ffff || mk.in_port() != 0xffff {
            continue;
        }
        let tci = m.key.vlan_tci();
        let vid = if tci & VLAN_CFI != 0 {
            if mk.vlan_tci() & 0x0fff != 0x0fff {
                continue;
            }
            tci & 0x0fff
        } else {
            0
        };
        let port = m.key.in_port();
        if let Some(vlan) = bridge.vlans().get(port).input_vlan(vid) {
            seen.push((vlan, m.key.dl_src(), port));
        }
    }
    if seen.is_empty() {
        return;
    }
    let mut macs = bridge.macs();
    for (vlan, mac, port) in seen {
        macs.refresh(vlan, mac, port, now_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::revalidate::revalidate;
    use flowpath_datapath::{Batch, Config, Tier, Verdict};
    use flowpath_odp::DpAction;
    use flowpath_ofproto::parse::parse_rules;

    fn tables(text: &str) -> Arc<RuleTables> {
        Arc::new(RuleTables::new(parse_rules(text, None).unwrap(), &[]))
    }

    fn tcp(port: u32, dst: u16) -> FlowKey {
        let mut k = FlowKey::zero();
        k.set_in_port(port);
        k.set_dl_type(0x0800);
        k.set_nw_proto(6);
        k.set_nw_ttl(64);
        k.set_tp_dst(dst);
        k
    }

    #[test]
    fn upcall_translates_and_counts_failures() {
        let mut sp = SlowPath::new(tables("priority=10,tcp,tp_dst=80,actions=output:2\n"));
        let (a, m) = sp.upcall(&tcp(1, 80)).unwrap();
        assert_eq!(a, vec![DpAction::Output(2)]);
        assert_eq!(m.to_key().tp_dst(), 0xffff);
        assert_eq!(sp.upcall(&tcp(1, 81)).unwrap().0, vec![]);
        // A resubmit loop exceeds the translation depth: failed upcall.
        let mut sp = SlowPath::new(tables("actions=resubmit(,0)\n"));
        assert_eq!(sp.upcall(&tcp(1, 80)), Err(UpcallError::Failed));
        assert_eq!(
            sp.stats(),
            SlowPathStats {
                upcalls: 1,
                failed: 1,
                cached: 0
            }
        );
        assert!(
            sp.last_error().unwrap().contains("depth"),
            "{:?}",
            sp.last_error()
        );
    }

    #[test]
    fn revalidation_removes_only_changed_megaflows() {
        let v1 = tables("priority=10,tcp,tp_dst=80,actions=output:2\npriority=5,tcp,tp_dst=22,actions=output:3\n");
        let mut sp = SlowPath::new(v1);
        let mut dp = Datapath::new(Config::default()).unwrap();
        let mut b = Batch::new();
        b.push(tcp(1, 80), 64).unwrap();
        b.push(tcp(1, 22), 64).unwrap();
        dp.process_batch(&mut b, 0, &mut sp);
        assert_eq!(dp.megaflow_count(), 2);
        // v2 changes where port 80 goes; port 22 is unchanged.
        let v2 = tables("priority=10,tcp,tp_dst=80,actions=output:4\npriority=5,tcp,tp_dst=22,actions=output:3\n");
        assert_eq!(revalidate(&mut dp, &v2), 1);
        sp.set_tables(v2);
        b.clear();
        b.push(tcp(1, 80), 64).unwrap();
        b.push(tcp(1, 22), 64).unwrap();
        dp.process_batch(&mut b, 1, &mut sp);
        assert!(matches!(
            b.verdicts()[0],
            Verdict::Megaflow {
                tier: Tier::Upcall,
                ..
            }
        ));
        assert_eq!(b.actions(0, &dp), &[DpAction::Output(4)]);
        assert_eq!(b.actions(1, &dp), &[DpAction::Output(3)]);
        assert_ne!(b.verdicts()[1], b.verdicts()[0]);
    }
}
