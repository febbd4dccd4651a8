//! The whole cascade over the real slow path, differentially: for every
//! cache configuration (EMC on/off × SMC/DFC/CD/none × megaflows on/off),
//! random OpenFlow rule sets (several tables, priorities, CIDR and
//! arbitrary masks, rewrites, VLAN push/pop, `dec_ttl`, resubmits —
//! written as `ovs-ofctl` text and parsed) and random traffic with
//! repeats, every packet gets exactly the datapath actions that the slow
//! path alone (`xlate` on the packet's key) gives it, and the statistics
//! add up: every packet is counted in exactly one tier, and each tier's
//! counter grows by the number of verdicts it gave.
//!
//! The traffic goes through idle expiry, a flow limit (for some runs),
//! translation failures (resubmit loops) and a change of rule tables
//! half-way (published with revalidation), after which the new tables are
//! the reference.

use flowpath_datapath::{
    Batch, Config, Datapath, DropReason, PmdStats, SecondLevel, Tier, Verdict, BATCH_SIZE,
    EXACT_MASK,
};
use flowpath_flow::FlowKey;
use flowpath_ofproto::rule::Rule;
use flowpath_ofproto::tables::RuleTables;
use flowpath_ofproto::xlate::xlate;
use flowpath_slowpath::{revalidate, SlowPath};
use proptest::prelude::*;
use std::sync::Arc;

use flowpath_ofproto::testgen::{rule_set, Rng};

/// A random packet as the extractor could produce it, with no bit the
/// datapath's exact-match mask leaves out.
fn packet(r: &mut Rng, rules: &[Rule]) -> FlowKey {
    let mut k = flowpath_ofproto::testgen::packet(r, rules);
    for (w, m) in k.w.iter_mut().zip(EXACT_MASK.w) {
        *w &= m;
    }
    k
}

/// Traffic with repeats: a pool of distinct packets, drawn with a skew.
fn traffic(r: &mut Rng, rules: &[Rule], n: usize) -> Vec<FlowKey> {
    let pool: Vec<FlowKey> = (0..2 + r.below(60)).map(|_| packet(r, rules)).collect();
    (0..n)
        .map(|_| {
            let a = r.below(pool.len() as u64);
            let b = r.below(pool.len() as u64);
            pool[a.min(b) as usize]
        })
        .collect()
}

fn configs(limit: usize) -> Vec<Config> {
    let mut v = Vec::new();
    for emc_enable in [true, false] {
        for second_level in SecondLevel::ALL {
            for megaflows in [true, false] {
                v.push(Config {
                    emc_enable,
                    second_level,
                    megaflows,
                    emc_insert_inv_prob: 2,
                    emc_entries: 16,
                    smc_entries: 16,
                    dfc_entries: 16,
                    cd_buckets: 2,
                    cd_ways: 8,
                    subtable_rerank_interval_ms: 7,
                    cd_adapt_interval_ms: 5,
                    flow_limit: limit,
                    ..Config::default()
                });
            }
        }
    }
    // The mask budget (a TSE defence) active: 1 or 2 subtables per port
    // before megaflows are widened into existing ones or exact match.
    for (mask_budget, second_level) in [(1, SecondLevel::Smc), (2, SecondLevel::None)] {
        v.push(Config {
            mask_budget,
            second_level,
            emc_entries: 16,
            smc_entries: 16,
            flow_limit: limit,
            ..Config::default()
        });
    }
    // The upcall budget (a storm defence) active: 1 or 3 upcalls per port
    // per millisecond.
    for (budget, megaflows) in [(1, true), (3, false)] {
        v.push(Config {
            megaflows,
            upcall_budget_per_ms: budget,
            emc_entries: 16,
            smc_entries: 16,
            flow_limit: limit,
            ..Config::default()
        });
    }
    v
}

/// Counts of verdicts by outcome, in `PmdStats` order.
fn tally(verdicts: &[Verdict]) -> PmdStats {
    let mut s = PmdStats {
        packets_received: verdicts.len() as u64,
        ..PmdStats::default()
    };
    for v in verdicts {
        match v {
            Verdict::Megaflow { tier, .. } => match tier {
                Tier::Emc => s.emc_hits += 1,
                Tier::Smc => s.smc_hits += 1,
                Tier::Dfc => s.dfc_hits += 1,
                Tier::Cd => s.cd_hits += 1,
                Tier::Hybrid => s.hybrid_hits += 1,
                Tier::Other => s.other_hits += 1,
                Tier::Megaflow => s.megaflow_hits += 1,
                Tier::Upcall => s.miss_with_success_upcall += 1,
            },
            Verdict::SlowPath | Verdict::Drop(DropReason::UpcallFailed) => {
                s.miss_with_failed_upcall += 1
            }
            Verdict::Drop(DropReason::Lost) => s.lost += 1,
            Verdict::Pending => {}
        }
    }
    s
}

/// Runs `phases` (rule tables and their traffic, one after the other)
/// through a datapath with `cfg`; checks every packet and the counters.
/// Returns the verdict tallies.
fn run(
    cfg: &Config,
    phases: &[(Arc<RuleTables>, Vec<FlowKey>)],
    seed: u64,
) -> Result<PmdStats, TestCaseError> {
    let mut r = Rng(seed | 1);
    let mut dp = Datapath::new(cfg.clone()).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mut sp = SlowPath::new(phases[0].0.clone());
    let mut batch = Batch::new();
    let mut total = PmdStats::default();
    let mut now = 0u64;
    for (pi, (tables, keys)) in phases.iter().enumerate() {
        if pi > 0 {
            sp.set_tables(tables.clone());
            let merged = sp.tables().clone();
            revalidate(&mut dp, &merged);
        }
        // What the slow path translates with: the phase's tables plus the
        // flows `learn` actions made in earlier phases (they outlive a
        // rule change, as in OVS).
        let tables = &sp.tables().clone();
        let mut pos = 0;
        while pos < keys.len() {
            let size = 1 + r.below(BATCH_SIZE as u64) as usize;
            let chunk = &keys[pos..keys.len().min(pos + size)];
            pos += chunk.len();
            now += r.below(40);
            batch.clear();
            for k in chunk {
                batch
                    .push(*k, 60)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
            }
            let before = *dp.stats();
            let mut budget_drops = 0u64;
            dp.process_batch(&mut batch, now, &mut sp);
            for (i, k) in chunk.iter().enumerate() {
                let want = xlate(&**tables, k, false);
                let v = batch.verdicts()[i];
                if let Verdict::Drop(reason) = v {
                    prop_assert_eq!(reason, DropReason::UpcallFailed);
                    if want.error.is_none() {
                        // Only the upcall budget drops a packet the rules
                        // would forward.
                        prop_assert!(
                            cfg.upcall_budget_per_ms > 0,
                            "dropped {:?} but xlate succeeds",
                            k
                        );
                        budget_drops += 1;
                    }
                    continue;
                }
                prop_assert!(v != Verdict::Pending);
                prop_assert!(want.error.is_none(), "{:?} got {:?} but xlate fails", k, v);
                prop_assert_eq!(
                    batch.actions(i, &dp),
                    &want.actions[..],
                    "packet {:?} via {:?} in phase {}",
                    k,
                    v,
                    pi
                );
                if let Verdict::Megaflow { flow, .. } = v {
                    let mf = dp
                        .megaflow(flow)
                        .ok_or_else(|| TestCaseError::fail("dead megaflow"))?;
                    prop_assert!(mf.matches(k));
                }
            }
            let after = *dp.stats();
            let t = tally(batch.verdicts());
            let delta = PmdStats {
                packets_received: after.packets_received - before.packets_received,
                emc_hits: after.emc_hits - before.emc_hits,
                smc_hits: after.smc_hits - before.smc_hits,
                dfc_hits: after.dfc_hits - before.dfc_hits,
                cd_hits: after.cd_hits - before.cd_hits,
                hybrid_hits: after.hybrid_hits - before.hybrid_hits,
                other_hits: after.other_hits - before.other_hits,
                megaflow_hits: after.megaflow_hits - before.megaflow_hits,
                miss_with_success_upcall: after.miss_with_success_upcall
                    - before.miss_with_success_upcall,
                miss_with_failed_upcall: after.miss_with_failed_upcall
                    - before.miss_with_failed_upcall,
                lost: after.lost - before.lost,
                ..PmdStats::default()
            };
            prop_assert_eq!(delta, t, "counters vs verdicts");
            // Budget drops are failed upcalls, each counted once more in
            // their own counter; a failed translation is never one.
            let bd = after.upcall_budget_drops - before.upcall_budget_drops;
            prop_assert!(bd >= budget_drops && bd <= delta.miss_with_failed_upcall);
            prop_assert_eq!(after.decided(), after.packets_received);
            prop_assert!(dp.megaflow_count() <= cfg.flow_limit);
            total = PmdStats {
                packets_received: total.packets_received + t.packets_received,
                emc_hits: total.emc_hits + t.emc_hits,
                smc_hits: total.smc_hits + t.smc_hits,
                dfc_hits: total.dfc_hits + t.dfc_hits,
                cd_hits: total.cd_hits + t.cd_hits,
                hybrid_hits: total.hybrid_hits + t.hybrid_hits,
                other_hits: total.other_hits + t.other_hits,
                megaflow_hits: total.megaflow_hits + t.megaflow_hits,
                miss_with_success_upcall: total.miss_with_success_upcall
                    + t.miss_with_success_upcall,
                miss_with_failed_upcall: total.miss_with_failed_upcall + t.miss_with_failed_upcall,
                lost: total.lost + t.lost,
                ..PmdStats::default()
            };
            if r.chance(10) {
                dp.expire_idle(now, 30);
            }
        }
        // Every live megaflow still gives every packet it covers (its own
        // key, in particular) the current tables' actions.
        for rf in dp.megaflows().live_refs() {
            let mf = dp.megaflow(rf).ok_or_else(|| TestCaseError::fail("dead"))?;
            prop_assert_eq!(&mf.actions, &xlate(&**tables, &mf.key, false).actions);
        }
    }
    Ok(total)
}

fn check(seed: u64, limit: usize) -> Result<PmdStats, TestCaseError> {
    let mut r = Rng(seed | 1);
    let (rules1, _) = rule_set(&mut r);
    let (rules2, _) = rule_set(&mut r);
    let t1 = Arc::new(RuleTables::new(
        rules1.clone(),
        flowpath_ofproto::classifier::DEFAULT_PREFIXES,
    ));
    let t2 = Arc::new(RuleTables::new(rules2.clone(), &[]));
    let k1 = traffic(&mut r, &rules1, 250);
    // The second phase replays some of the first phase's packets.
    let mut k2 = traffic(&mut r, &rules2, 150);
    k2.extend_from_slice(&k1[..100]);
    let phases = vec![(t1, k1), (t2, k2)];
    let mut sum = PmdStats::default();
    for cfg in configs(limit) {
        let s = run(&cfg, &phases, seed)?;
        if !cfg.emc_enable {
            prop_assert_eq!(s.emc_hits, 0);
        }
        let second = match cfg.second_level {
            SecondLevel::Smc => s.dfc_hits + s.cd_hits + s.hybrid_hits,
            SecondLevel::Dfc => s.smc_hits + s.cd_hits + s.hybrid_hits,
            SecondLevel::Cd => s.smc_hits + s.dfc_hits + s.hybrid_hits,
            SecondLevel::None => s.smc_hits + s.dfc_hits + s.cd_hits + s.hybrid_hits,
            SecondLevel::Hybrid | SecondLevel::Auto => s.smc_hits + s.dfc_hits + s.cd_hits,
        };
        prop_assert_eq!(second, 0, "hits in a disabled tier: {:?}", s);
        sum.packets_received += s.packets_received;
        sum.emc_hits += s.emc_hits;
        sum.megaflow_hits += s.megaflow_hits + s.smc_hits + s.dfc_hits + s.cd_hits + s.hybrid_hits;
        sum.miss_with_success_upcall += s.miss_with_success_upcall;
        sum.miss_with_failed_upcall += s.miss_with_failed_upcall;
    }
    Ok(sum)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn every_config_gives_the_slow_paths_actions(seed in any::<u64>()) {
        let s = check(seed, 200_000)?;
        // Repeats make the caches answer most packets.
        prop_assert!(s.miss_with_success_upcall < s.packets_received);
    }

    #[test]
    fn every_config_gives_the_slow_paths_actions_at_the_flow_limit(seed in any::<u64>(), limit in 0usize..4) {
        check(seed, limit)?;
    }
}

/// The generators reach every outcome the test is about, so it is not
/// vacuous: cache hits of every kind, installs, failures, slow-path-only
/// packets (flow limit).
#[test]
fn outcomes_are_reached() {
    let mut total = PmdStats::default();
    for seed in 1..40u64 {
        for limit in [200_000, 2] {
            let mut r = Rng(seed * 7919);
            let (rules, _) = rule_set(&mut r);
            let t = Arc::new(RuleTables::new(rules.clone(), &[]));
            let keys = traffic(&mut r, &rules, 300);
            for cfg in configs(limit) {
                let s = run(&cfg, &[(t.clone(), keys.clone())], seed).unwrap();
                total.emc_hits += s.emc_hits;
                total.smc_hits += s.smc_hits;
                total.dfc_hits += s.dfc_hits;
                total.cd_hits += s.cd_hits;
                total.hybrid_hits += s.hybrid_hits;
                total.megaflow_hits += s.megaflow_hits;
                total.miss_with_success_upcall += s.miss_with_success_upcall;
                total.miss_with_failed_upcall += s.miss_with_failed_upcall;
            }
        }
    }
    for (name, n) in [
        ("emc", total.emc_hits),
        ("smc", total.smc_hits),
        ("dfc", total.dfc_hits),
        ("cd", total.cd_hits),
        ("hybrid", total.hybrid_hits),
        ("megaflow", total.megaflow_hits),
        ("upcall", total.miss_with_success_upcall),
        ("failed", total.miss_with_failed_upcall),
    ] {
        assert!(n > 0, "{name} never reached: {total:?}");
    }
}
