//! Differential property test of the whole cascade: for every
//! configuration (EMC on/off × SMC/DFC/CD/none × megaflows on/off), every
//! packet of random traffic over random rules gets exactly the actions a
//! linear scan of the rules gives, and the statistics add up.

mod common;

use common::{key_strategy, oracle, rule_strategy, MaskMode, MockUpcall};
use flowpath_datapath::{
    Batch, Config, Datapath, DropReason, SecondLevel, Tier, Verdict, BATCH_SIZE,
};
use flowpath_flow::FlowKey;
use proptest::prelude::*;
use proptest::strategy::ValueTree;

fn configs(small: bool) -> Vec<Config> {
    let mut v = Vec::new();
    for emc_enable in [true, false] {
        for second_level in SecondLevel::ALL {
            for megaflows in [true, false] {
                let base = Config {
                    emc_enable,
                    second_level,
                    megaflows,
                    emc_insert_inv_prob: 2,
                    subtable_rerank_interval_ms: 3,
                    cd_adapt_interval_ms: 4,
                    auto_interval_ms: 5,
                    auto_samples: 2,
                    ..Config::default()
                };
                v.push(if small {
                    Config {
                        emc_entries: 16,
                        smc_entries: 16,
                        dfc_entries: 16,
                        cd_buckets: 2,
                        cd_ways: 8,
                        hybrid_buckets: 2,
                        ..base
                    }
                } else {
                    base
                });
            }
        }
    }
    v
}

struct Outcome {
    tiers: [u64; 8],
}

/// Runs `traffic` through a datapath with `cfg`; checks every verdict.
fn run(
    cfg: &Config,
    upcall: &mut MockUpcall,
    traffic: &[FlowKey],
    churn: bool,
) -> Result<Outcome, TestCaseError> {
    let mut dp = Datapath::new(cfg.clone()).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mut batch = Batch::new();
    let mut tiers = [0u64; 8];
    let mut sent = 0u64;
    let mut pos = 0;
    let mut bn = 0;
    while pos < traffic.len() {
        // Varying batch sizes (1..=32), full batches most of the time.
        let size = if bn % 4 == 3 {
            1 + (bn * 7) % BATCH_SIZE
        } else {
            BATCH_SIZE
        };
        let chunk = &traffic[pos..traffic.len().min(pos + size)];
        pos += chunk.len();
        let now = bn as u64;
        batch.clear();
        for k in chunk {
            batch.push(*k, 64).unwrap();
        }
        sent += chunk.len() as u64;
        dp.process_batch(&mut batch, now, upcall);
        // Pseudo-random batch costs: auto explores and switches its tiers.
        dp.add_processing_cycles(u64::from((bn as u32).wrapping_mul(2_654_435_761) >> 20));
        for (i, k) in chunk.iter().enumerate() {
            let want = oracle(&upcall.rules, k);
            match batch.verdicts()[i] {
                Verdict::Drop(DropReason::UpcallFailed) => {
                    prop_assert_eq!(Some(k.tp_src()), upcall.fail_tp_src)
                }
                Verdict::Drop(DropReason::Lost) => {
                    prop_assert_eq!(Some(k.tp_src()), upcall.lost_tp_src)
                }
                Verdict::Pending => prop_assert!(false, "pending after process_batch"),
                v => {
                    if let Verdict::Megaflow { flow, tier } = v {
                        tiers[tier as usize] += 1;
                        let mf = dp.megaflow(flow).unwrap();
                        prop_assert!(mf.matches(k), "megaflow does not match the packet");
                        prop_assert_eq!(mf.mask.w[0] & 0xffff_ffff, 0xffff_ffff, "in_port exact");
                    }
                    prop_assert_eq!(
                        batch.actions(i, &dp),
                        &want[..],
                        "packet {:?} via {:?}",
                        k,
                        v
                    );
                }
            }
        }
        let s = dp.stats();
        prop_assert_eq!(s.packets_received, sent);
        prop_assert_eq!(s.decided(), sent, "every packet counted once: {:?}", s);
        prop_assert!(dp.megaflow_count() <= cfg.flow_limit);
        if churn {
            // Revalidator-like churn between batches.
            if bn % 7 == 3 {
                let victim = dp.megaflows().live_refs().nth(bn % 3);
                if let Some(r) = victim {
                    prop_assert!(dp.remove_megaflow(r));
                    prop_assert!(dp.megaflow(r).is_none());
                }
            }
            if bn % 11 == 10 {
                dp.expire_idle(now, 2);
            }
            if bn % 29 == 28 {
                dp.flush();
                prop_assert_eq!(dp.megaflow_count(), 0);
            }
        }
        bn += 1;
    }
    // The megaflow invariant for every installed megaflow: its own key
    // (any packet inside it) gets its actions.
    for r in dp.megaflows().live_refs() {
        let mf = dp.megaflow(r).unwrap();
        prop_assert_eq!(&mf.actions, &oracle(&upcall.rules, &mf.key));
    }
    let n_sub: usize = [1u32, 2]
        .iter()
        .filter_map(|p| dp.dpcls(*p))
        .map(|c| c.n_megaflows())
        .sum();
    prop_assert_eq!(n_sub, dp.megaflow_count(), "dpcls and megaflow table agree");
    // Each tier's hits are counted under its own name.
    let s = dp.stats();
    for (tier, counted) in [
        (Tier::Emc, s.emc_hits),
        (Tier::Smc, s.smc_hits),
        (Tier::Dfc, s.dfc_hits),
        (Tier::Cd, s.cd_hits),
        (Tier::Hybrid, s.hybrid_hits),
        (Tier::Megaflow, s.megaflow_hits),
    ] {
        prop_assert_eq!(tiers[tier as usize], counted, "{:?}", tier);
    }
    Ok(Outcome { tiers })
}

fn traffic_strategy() -> impl Strategy<Value = Vec<FlowKey>> {
    (
        proptest::collection::vec(key_strategy(), 1..40),
        proptest::collection::vec(any::<prop::sample::Index>(), 100..400),
    )
        .prop_map(|(keys, picks)| picks.iter().map(|ix| keys[ix.index(keys.len())]).collect())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn every_config_matches_linear_scan(
        rules in proptest::collection::vec(rule_strategy(), 1..10),
        traffic in traffic_strategy(),
        mode_all in any::<bool>(),
        small in any::<bool>(),
        churn in any::<bool>(),
    ) {
        let mode = if mode_all { MaskMode::AllRules } else { MaskMode::AtLeastWinner };
        let mut tier_total = [0u64; 8];
        for cfg in configs(small) {
            let mut up = MockUpcall::new(rules.clone(), mode);
            let out = run(&cfg, &mut up, &traffic, churn)?;
            for (t, n) in tier_total.iter_mut().zip(out.tiers) {
                *t += n;
            }
            if !cfg.emc_enable {
                prop_assert_eq!(out.tiers[Tier::Emc as usize], 0);
            }
            match cfg.second_level {
                SecondLevel::Smc => prop_assert_eq!(out.tiers[Tier::Dfc as usize] + out.tiers[Tier::Cd as usize] + out.tiers[Tier::Hybrid as usize], 0),
                SecondLevel::Dfc => prop_assert_eq!(out.tiers[Tier::Smc as usize] + out.tiers[Tier::Cd as usize] + out.tiers[Tier::Hybrid as usize], 0),
                SecondLevel::Cd => prop_assert_eq!(out.tiers[Tier::Smc as usize] + out.tiers[Tier::Dfc as usize] + out.tiers[Tier::Hybrid as usize], 0),
                SecondLevel::None => prop_assert_eq!(out.tiers[Tier::Smc as usize] + out.tiers[Tier::Dfc as usize] + out.tiers[Tier::Cd as usize] + out.tiers[Tier::Hybrid as usize], 0),
                // The hybrid table's hits are its own, never SMC's, DFC's
                // or CD's.
                SecondLevel::Hybrid | SecondLevel::Auto => prop_assert_eq!(out.tiers[Tier::Smc as usize] + out.tiers[Tier::Dfc as usize] + out.tiers[Tier::Cd as usize], 0),
            }
        }
        // With repeats in the traffic the upcall tier must not take everything.
        prop_assert!(tier_total[Tier::Upcall as usize] < tier_total.iter().sum::<u64>());
    }

    #[test]
    fn failures_losses_and_flow_limit(
        rules in proptest::collection::vec(rule_strategy(), 1..10),
        traffic in traffic_strategy(),
        limit in 0usize..4,
    ) {
        for cfg in configs(true) {
            let cfg = Config { flow_limit: limit, ..cfg };
            let mut up = MockUpcall::new(rules.clone(), MaskMode::AtLeastWinner);
            up.fail_tp_src = Some(2);
            up.lost_tp_src = Some(3);
            run(&cfg, &mut up, &traffic, false)?;
        }
    }
}

/// Every tier is exercised by the default configuration on simple
/// traffic (so the differential test above is not vacuous).
#[test]
fn tiers_are_reached() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let rules = proptest::collection::vec(rule_strategy(), 4..8)
        .new_tree(&mut runner)
        .unwrap()
        .current();
    let keys: Vec<FlowKey> = (0..30)
        .map(|_| key_strategy().new_tree(&mut runner).unwrap().current())
        .collect();
    let traffic: Vec<FlowKey> = (0..3000).map(|i| keys[(i * 7 + i / 30) % 30]).collect();
    for (second, tier) in [
        (SecondLevel::Smc, Tier::Smc),
        (SecondLevel::Dfc, Tier::Dfc),
        (SecondLevel::Cd, Tier::Cd),
        (SecondLevel::Hybrid, Tier::Hybrid),
        (SecondLevel::None, Tier::Megaflow),
    ] {
        let cfg = Config {
            second_level: second,
            emc_insert_inv_prob: 100,
            ..Config::default()
        };
        let mut up = MockUpcall::new(rules.clone(), MaskMode::AtLeastWinner);
        let out = run(&cfg, &mut up, &traffic, false).unwrap();
        assert!(
            out.tiers[Tier::Emc as usize] > 0,
            "{second}: {:?}",
            out.tiers
        );
        assert!(out.tiers[tier as usize] > 0, "{second}: {:?}", out.tiers);
        assert!(out.tiers[Tier::Upcall as usize] > 0);
    }
}
