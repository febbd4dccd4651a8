//! The revalidator: every 500 ms (and at once after a rule change or
//! `revalidator/purge`) it dumps every PMD's megaflows through the PMD's
//! command queue and, off the PMDs:
//!
//! - expires megaflows idle for longer than `max-idle`;
//! - re-translates each megaflow against the current rules (only when
//!   the rules changed since it last did, as OVS's ukeys remember) and
//!   deletes those whose actions changed or whose megaflow the new
//!   translation would make narrower — so rule changes reach every PMD
//!   without a PMD translating anything;
//! - applies `fin_timeout` to the rules that a megaflow which saw a TCP
//!   FIN or RST went through;
//! - pushes each megaflow's packet and byte deltas to the rules its
//!   translation went through (`dump-flows`' `n_packets`, `n_bytes`,
//!   `idle_age`) and to the groups and buckets it took (group
//!   statistics), and expires rules by their `idle_timeout` and
//!   `hard_timeout`;
//! - adjusts the flow limit as OVS's `udpif_revalidator` does, from how
//!   long the dump and revalidation took: above 2000 ms the limit is
//!   divided by the duration in seconds, above 1300 ms it takes 3/4, below
//!   1000 ms it grows by 1000 while under `flows × 1000 / duration`;
//!   never below 1000, never above the configured `flow-limit`.
//!
//! [`Revalidator`] is the logic, driven by dumps and time passed in (so it
//! is tested without threads); [`run`] is the thread around it.
//!
//! Threads: the revalidator thread owns a [`Revalidator`]; it reads the
//! published rules, sends PMDs commands and waits for their answers
//! (bounded), and takes the control lock only briefly to credit rule
//! statistics and expire rules. Control handlers never hold that lock
//! while they wait for a round.

use crate::fault::Part;
use crate::group_stats::GroupDelta;
use crate::pmd::PmdCmd;
use crate::rules::Published;
use crate::shared::{RevalCmd, Shared, UpcallStats};
use flowpath_datapath::dump::idle_expired;
use flowpath_datapath::{DumpEntry, MegaflowRef};
use flowpath_odp::DpAction;
use flowpath_ofproto::normal::Bridge;
use flowpath_ofproto::xlate::XlateMode;
use flowpath_slowpath::{recheck, uses_normal};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Interval between rounds (OVS's revalidator wakes every 500 ms).
pub const ROUND_INTERVAL: Duration = Duration::from_millis(500);
/// The flow limit never goes below this.
pub const MIN_FLOW_LIMIT: usize = 1000;

/// What the revalidator remembers of a megaflow (OVS's ukey).
#[derive(Clone, Debug, Default)]
struct Ukey {
    packets: u64,
    bytes: u64,
    /// Uids of the rules its translation went through.
    rules: Vec<u64>,
    /// The groups its translation went through: (group id, counters'
    /// uid, bucket index or `None` for every bucket).
    groups: Vec<(u32, u64, Option<u32>)>,
    /// Rules version it was last translated with.
    version: u64,
    /// The neighbour table's generation it was translated with (a
    /// tunnel output's outer Ethernet header comes from it).
    neigh: u64,
}

/// The outcome of one round.
#[derive(Clone, Debug, Default)]
pub struct RoundOutcome {
    /// Per PMD, the megaflows to delete.
    pub deletions: Vec<Vec<MegaflowRef>>,
    /// `(rule uid, packets, bytes)` to credit.
    pub rule_deltas: Vec<(u64, u64, u64)>,
    /// Packets and bytes to credit to groups and their buckets, in
    /// order.
    pub group_deltas: Vec<GroupDelta>,
    /// Uids of the rules that TCP FIN or RST packets went through since
    /// the last round (for their `fin_timeout` actions), ascending.
    pub fin_rules: Vec<u64>,
    /// Megaflows deleted for idleness.
    pub expired: usize,
    /// Megaflows deleted because the rules now translate them otherwise.
    pub changed: usize,
    /// Megaflows translated this round.
    pub translated: usize,
    /// Megaflows deleted because a PMD held more than the flow limit
    /// (the least recently used ones).
    pub over_limit: usize,
    /// Megaflows seen.
    pub flows: usize,
}

/// The revalidator's state and logic (no threads, no clock).
#[derive(Debug)]
pub struct Revalidator {
    ukeys: Vec<HashMap<MegaflowRef, Ukey>>,
    /// Current (dynamic) flow limit.
    pub flow_limit: usize,
    /// Figures for `upcall/show`.
    pub stats: UpcallStats,
    /// `NORMAL`'s state (translations look it up without learning).
    pub bridge: Option<Arc<Bridge>>,
    /// The published rules plus the learned flows, for (rules version,
    /// learned flows' change number): rebuilt only when either moves;
    /// with whether the published rules keep their indexes in it.
    merged: Option<(u64, u64, Arc<flowpath_ofproto::tables::RuleTables>, bool)>,
}

impl Revalidator {
    /// For `n_pmds` PMDs, starting at `flow_limit`.
    pub fn new(n_pmds: usize, flow_limit: usize) -> Revalidator {
        Revalidator {
            ukeys: (0..n_pmds).map(|_| HashMap::new()).collect(),
            flow_limit,
            stats: UpcallStats {
                limit: flow_limit,
                ..UpcallStats::default()
            },
            bridge: None,
            merged: None,
        }
    }

    /// Follows the PMDs' number: with another number (the PMDs were
    /// replaced, their megaflows with them) every megaflow is forgotten.
    pub fn set_pmds(&mut self, n: usize) {
        if self.ukeys.len() != n {
            self.ukeys = (0..n).map(|_| HashMap::new()).collect();
        }
    }

    /// Forgets every megaflow (after a purge: their handles are gone).
    pub fn forget(&mut self) {
        for u in &mut self.ukeys {
            u.clear();
        }
    }

    /// Revalidates one dump per PMD at datapath time `now_ms`.
    pub fn revalidate(
        &mut self,
        dumps: &[Vec<DumpEntry>],
        rules: &Published,
        now_ms: u64,
        max_idle_ms: u64,
    ) -> RoundOutcome {
        let mut out = RoundOutcome {
            deletions: vec![Vec::new(); dumps.len()],
            ..RoundOutcome::default()
        };
        let mut deltas: HashMap<u64, (u64, u64)> = HashMap::new();
        let mut group_deltas: HashMap<(u32, u64, Option<u32>), (u64, u64)> = HashMap::new();
        let mut fin: std::collections::BTreeSet<u64> = std::collections::BTreeSet::new();
        // The tables the PMDs translate with: the published rules and the
        // flows `learn` made (appended: the published rules keep their
        // indexes for the statistics).
        let seq = self.bridge.as_ref().map_or(0, |b| b.learned.seq());
        let (tables, indexes_ok) = match &self.merged {
            Some((v, q, t, ok)) if *v == rules.version && *q == seq => (t.clone(), *ok),
            _ => {
                let learned = self
                    .bridge
                    .as_ref()
                    .map(|b| b.learned.flows())
                    .unwrap_or_default();
                let t: Arc<flowpath_ofproto::tables::RuleTables> = if learned.is_empty() {
                    rules.tables.clone()
                } else {
                    Arc::new(rules.tables.with_added(&learned))
                };
                // Rule indexes are the published ones unless a learned
                // flow replaced a published rule (then no statistics).
                // Compared once per rules version, not every round (a
                // comparison of 100,000 rules).
                let n = rules.tables.rules().len();
                let ok = Arc::ptr_eq(&t, &rules.tables)
                    || t.rules().get(..n) == Some(rules.tables.rules());
                self.merged = Some((rules.version, seq, t.clone(), ok));
                (t, ok)
            }
        };
        let tables = &*tables;
        // NORMAL's table is locked per translation only if the rules use it.
        let bridge = self.bridge.as_deref().filter(|_| uses_normal(tables));
        let neigh_gen =
            flowpath_ofproto::tables::Lookup::tunnels(tables).map_or(0, |t| t.neigh.generation());
        for (pmd, dump) in dumps.iter().enumerate() {
            if pmd >= self.ukeys.len() {
                self.ukeys.resize_with(pmd + 1, HashMap::new);
            }
            let mut old = std::mem::take(&mut self.ukeys[pmd]);
            let mut new = HashMap::with_capacity(dump.len());
            let mut kept: Vec<(u64, MegaflowRef)> = Vec::new();
            for e in dump {
                out.flows += 1;
                let mut u = old.remove(&e.mf).unwrap_or_default();
                let mut keep = true;
                // A new ukey has version 0, which no published rule set
                // has (the first is 1).
                if u.version != rules.version || u.neigh != neigh_gen {
                    let record = XlateMode {
                        record: true,
                        ..XlateMode::default()
                    };
                    let (k, x) =
                        recheck(tables, bridge, &e.key, &e.mask, &e.actions, now_ms, record);
                    out.translated += 1;
                    keep = k;
                    u.rules = x
                        .rules
                        .iter()
                        .filter(|_| indexes_ok)
                        .filter_map(|i| rules.uids.get(*i as usize).copied())
                        .collect();
                    u.groups = x
                        .groups
                        .iter()
                        .filter_map(|&(g, b)| Some((g, *rules.group_uids.get(&g)?, b)))
                        .collect();
                    u.version = rules.version;
                    u.neigh = neigh_gen;
                }
                // Statistics first: a deleted megaflow's last packets count.
                // The packet whose upcall installed it counts for the
                // rules too (as OVS credits it at translation).
                let (ep, eb) = (
                    e.packets + u64::from(e.upcall_bytes > 0),
                    e.bytes + u64::from(e.upcall_bytes),
                );
                let (dp, db) = (ep.saturating_sub(u.packets), eb.saturating_sub(u.bytes));
                if dp > 0 || db > 0 {
                    for uid in &u.rules {
                        let d = deltas.entry(*uid).or_default();
                        d.0 += dp;
                        d.1 += db;
                    }
                    for g in &u.groups {
                        let d = group_deltas.entry(*g).or_default();
                        d.0 += dp;
                        d.1 += db;
                    }
                    // The flags are the megaflow's since it was installed:
                    // a FIN or RST may be older than this round's packets
                    // (reducing timeouts twice changes nothing).
                    if e.tcp_flags & flowpath_flow::key::TCP_FIN_RST != 0 {
                        fin.extend(u.rules.iter().copied());
                    }
                }
                u.packets = ep;
                u.bytes = eb;
                if !keep {
                    out.changed += 1;
                    out.deletions[pmd].push(e.mf);
                } else if idle_expired(e.last_used_ms(), now_ms, max_idle_ms) {
                    out.expired += 1;
                    out.deletions[pmd].push(e.mf);
                } else {
                    kept.push((e.used_ms.unwrap_or(e.created_ms), e.mf));
                    new.insert(e.mf, u);
                }
            }
            // Over the (lowered) flow limit: the least recently used go.
            if kept.len() > self.flow_limit {
                kept.sort_unstable_by_key(|k| k.0);
                let excess = kept.len() - self.flow_limit;
                for (_, mf) in kept.into_iter().take(excess) {
                    new.remove(&mf);
                    out.deletions[pmd].push(mf);
                    out.over_limit += 1;
                }
            }
            self.ukeys[pmd] = new;
        }
        out.rule_deltas = deltas.into_iter().map(|(k, (p, b))| (k, p, b)).collect();
        out.rule_deltas.sort_unstable();
        out.group_deltas = group_deltas
            .into_iter()
            .map(|((group, uid, bucket), (packets, bytes))| GroupDelta {
                group,
                uid,
                bucket,
                packets,
                bytes,
            })
            .collect();
        out.group_deltas.sort_unstable();
        out.fin_rules = fin.into_iter().collect();
        let s = &mut self.stats;
        s.rounds += 1;
        s.current = out.flows;
        s.max = s.max.max(out.flows);
        s.avg = ((s.avg as u64 * (s.rounds - 1) + out.flows as u64) / s.rounds) as usize;
        s.expired += out.expired as u64;
        s.revalidated += out.changed as u64;
        out
    }

    /// OVS's flow-limit adjustment after a round that took `duration_ms`
    /// with `n_flows` megaflows; `max_limit` is the configured
    /// `flow-limit`. Returns the new limit.
    pub fn adjust_flow_limit(
        &mut self,
        duration_ms: u64,
        n_flows: usize,
        max_limit: usize,
    ) -> usize {
        let duration = duration_ms.max(1) as usize;
        let mut limit = self.flow_limit;
        if duration > 2000 {
            limit /= duration / 1000;
        } else if duration > 1300 {
            limit = limit * 3 / 4;
        } else if duration < 1000 && limit < n_flows.saturating_mul(1000) / duration {
            limit += 1000;
        }
        limit = limit.max(MIN_FLOW_LIMIT).min(max_limit.max(MIN_FLOW_LIMIT));
        self.flow_limit = limit;
        self.stats.limit = limit;
        self.stats.dump_duration_ms = duration_ms;
        limit
    }
}

/// The revalidator thread's body.
pub fn run(sh: Arc<Shared>, cmds: Receiver<RevalCmd>) {
    let limit = sh.flow_limit_cfg.load(Ordering::Relaxed);
    let mut r = Revalidator::new(sh.pmds().len(), limit);
    r.bridge = Some(sh.bridge.clone());
    let mut next = Instant::now() + ROUND_INTERVAL;
    while !sh.stop.load(Ordering::Relaxed) {
        let wait = next
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(50));
        let mut waiters = Vec::new();
        match cmds.recv_timeout(wait) {
            Ok(RevalCmd::RunNow(w)) => waiters.extend(w),
            Ok(RevalCmd::Purge(w)) => {
                for p in sh.pmds().iter() {
                    let (tx, rx) = sync_channel(1);
                    if p.send(PmdCmd::DelFlows(tx)).is_ok() {
                        let _ = rx.recv_timeout(Duration::from_secs(5));
                    }
                }
                r.forget();
                waiters.push(w);
            }
            Err(RecvTimeoutError::Timeout) => {
                if Instant::now() < next {
                    continue;
                }
            }
            Err(RecvTimeoutError::Disconnected) => return,
        }
        // Requests that came in meanwhile join this round.
        while let Ok(c) = cmds.try_recv() {
            match c {
                RevalCmd::RunNow(w) => waiters.extend(w),
                RevalCmd::Purge(w) => waiters.push(w),
            }
        }
        // A panicking round is dropped (logged and counted); the next
        // runs on time and the waiters are answered either way.
        crate::fault::guard(Part::Revalidator, "the round is dropped", || {
            crate::fault::hook(Part::Revalidator);
            round(&sh, &mut r);
        });
        for w in waiters {
            let _ = w.send(());
        }
        next = Instant::now() + ROUND_INTERVAL;
    }
}

/// The recirculation ids `dumps` name: in keys (second passes), in
/// `recirc(ID)` actions (first passes) and in paused controller actions
/// (continuations).
pub fn recirc_ids_in_use(dumps: &[Vec<DumpEntry>]) -> HashSet<u32> {
    let mut ids = HashSet::new();
    for e in dumps.iter().flatten() {
        if e.key.recirc_id() != 0 {
            ids.insert(e.key.recirc_id());
        }
        for a in e.actions.iter() {
            match a {
                DpAction::Recirc(id) => {
                    ids.insert(*id);
                }
                DpAction::Controller { cont, .. } if *cont != 0 => {
                    ids.insert(*cont);
                }
                _ => {}
            }
        }
    }
    ids
}

/// One round against the PMDs.
fn round(sh: &Shared, r: &mut Revalidator) {
    let t0 = Instant::now();
    let published = sh.published();
    // Frozen translations no megaflow names are freed after the dumps
    // (see `RecircTable::sweep`).
    let recirc = flowpath_ofproto::recirc::RecircTable::global();
    let recirc_round = recirc.begin_round();
    let pmds = sh.pmds();
    // New PMDs (another number of them): their megaflows are new too.
    r.set_pmds(pmds.len());
    let mut dumps = Vec::new();
    for p in pmds.iter() {
        let (tx, rx) = sync_channel(1);
        if p.send(PmdCmd::Dump(tx)).is_err() {
            dumps.push(Vec::new());
            continue;
        }
        dumps.push(rx.recv_timeout(Duration::from_secs(5)).unwrap_or_default());
    }
    let now_ms = sh.started.elapsed().as_millis() as u64;
    // Expired connections go here, off the PMDs (as OVS's conntrack
    // sweeper thread).
    r.stats.ct_expired += sh.conntrack.sweep(now_ms) as u64;
    // Fragments whose datagram never completed: dropped (counted by the
    // reassembler as expired).
    let _ = sh.ipf.expire(now_ms);
    let max_idle = sh.max_idle_ms.load(Ordering::Relaxed);
    let out = r.revalidate(&dumps, &published, now_ms, max_idle);
    r.stats.recirc_freed += recirc.sweep(&recirc_ids_in_use(&dumps), recirc_round) as u64;
    r.stats.recirc_ids = recirc.count();
    for (p, del) in pmds.iter().zip(&out.deletions) {
        if del.is_empty() {
            continue;
        }
        let (tx, rx) = sync_channel(1);
        if p.send(PmdCmd::Delete(del.clone(), tx)).is_ok() {
            let _ = rx.recv_timeout(Duration::from_secs(5));
        }
    }
    // Rule statistics and rule timeouts.
    let expired_rules = {
        let mut st = sh.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        st.rules.credit(&out.rule_deltas, now);
        st.rules.credit_groups(&out.group_deltas);
        st.rules.saw_fin(&out.fin_rules);
        let gone = st.rules.expire_removed(now);
        let n = gone.len();
        if n > 0 {
            let p = st.rules.publish();
            drop(st);
            if let Some(hook) = sh.on_expired.get() {
                hook(gone);
            }
            sh.set_published(p.clone());
            for pmd in pmds.iter() {
                let (tx, rx) = sync_channel(1);
                if pmd
                    .cmds
                    .send(PmdCmd::SwapRules(p.tables.clone(), tx))
                    .is_ok()
                {
                    let _ = rx.recv_timeout(Duration::from_secs(5));
                }
            }
        }
        n
    };
    let duration = t0.elapsed().as_millis() as u64;
    let max = sh.flow_limit_cfg.load(Ordering::Relaxed);
    let old = r.flow_limit;
    let limit = r.adjust_flow_limit(duration, out.flows, max);
    if limit != old {
        for p in pmds.iter() {
            let _ = p.try_send(PmdCmd::SetFlowLimit(limit));
        }
    }
    *sh.upcall_stats.lock().unwrap_or_else(|p| p.into_inner()) = r.stats;
    if expired_rules > 0 {
        // Megaflows of expired rules go at the next round, right away.
        let _ = sh.reval_kick();
    }
}
