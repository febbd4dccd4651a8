//! Scenario tests of the pipeline through the public API.

use flowpath_datapath::{
    exact_mask_for, Batch, Config, Datapath, DropReason, SecondLevel, Tier, UpcallError, Verdict,
    EXACT_MASK,
};
use flowpath_flow::{FlowKey, FlowMask};
use flowpath_odp::{DpAction, DpActions};

fn tcp(port: u32, src: u32, dst: u32, sport: u16) -> FlowKey {
    let mut k = FlowKey::zero();
    k.set_in_port(port);
    k.set_dl_type(0x0800);
    k.set_nw_proto(6);
    k.set_nw_src(src);
    k.set_nw_dst(dst);
    k.set_tp_src(sport);
    k.set_tp_dst(80);
    k
}

/// Slow path: output to port 2, megaflow on tcp + nw_dst/24.
fn dst24(_: &FlowKey) -> Result<(DpActions, FlowMask), UpcallError> {
    let mut m = FlowKey::zero();
    m.set_dl_type(0xffff);
    m.set_nw_proto(0xff);
    m.set_nw_dst(0xffff_ff00);
    Ok((vec![DpAction::Output(2)], FlowMask::from_key(&m)))
}

fn run(
    dp: &mut Datapath,
    keys: &[FlowKey],
    now: u64,
    up: &mut impl flowpath_datapath::Upcall,
) -> Vec<Verdict> {
    let mut b = Batch::new();
    for k in keys {
        b.push(*k, 64).unwrap();
    }
    dp.process_batch(&mut b, now, up).to_vec()
}

fn tier(v: &Verdict) -> Option<Tier> {
    match v {
        Verdict::Megaflow { tier, .. } => Some(*tier),
        _ => None,
    }
}

#[test]
fn tiers_in_order_and_removal_invalidates_every_cache() {
    for second in SecondLevel::ALL {
        let cfg = Config {
            second_level: second,
            emc_insert_inv_prob: 1,
            ..Config::default()
        };
        let mut dp = Datapath::new(cfg).unwrap();
        let mut up = dst24;
        let a = tcp(1, 1, 0x0a00_0001, 1000);
        let b = tcp(1, 2, 0x0a00_0002, 1001); // same megaflow, other key
        let v = run(&mut dp, &[a], 0, &mut up);
        assert_eq!(tier(&v[0]), Some(Tier::Upcall), "{second}");
        let r = match v[0] {
            Verdict::Megaflow { flow, .. } => flow,
            _ => unreachable!(),
        };
        let v = run(&mut dp, &[a, b], 1, &mut up);
        assert_eq!(tier(&v[0]), Some(Tier::Emc), "{second}");
        assert_eq!(
            tier(&v[1]),
            Some(Tier::Megaflow),
            "{second}: b's hash is new"
        );
        // With the EMC off, b is found by the second level, filled by its
        // dpcls hit.
        let emc_on = dp.config().clone();
        dp.set_config(Config {
            emc_enable: false,
            ..emc_on.clone()
        })
        .unwrap();
        let v = run(&mut dp, &[b], 1, &mut up);
        let want_b = match second {
            SecondLevel::Smc => Tier::Smc,
            SecondLevel::Dfc => Tier::Dfc,
            SecondLevel::Cd => Tier::Cd,
            SecondLevel::None => Tier::Megaflow,
            // Few megaflows: the hybrid entry names the megaflow.
            SecondLevel::Hybrid | SecondLevel::Auto => Tier::Hybrid,
        };
        assert_eq!(tier(&v[0]), Some(want_b), "{second}");
        dp.set_config(emc_on).unwrap();
        assert_eq!(dp.megaflows().stats(r).unwrap().packets, 3);
        assert_eq!(dp.megaflows().stats(r).unwrap().bytes, 192);
        assert!(dp.remove_megaflow(r));
        assert!(!dp.remove_megaflow(r));
        let v = run(&mut dp, &[a, b], 2, &mut up);
        assert_eq!(
            tier(&v[0]),
            Some(Tier::Upcall),
            "{second}: EMC must miss the removed megaflow"
        );
        assert_eq!(
            tier(&v[1]),
            Some(Tier::Megaflow),
            "{second}: installed by a, found by b"
        );
        assert_eq!(dp.megaflow_count(), 1);
        let s = dp.stats();
        assert_eq!(s.decided(), s.packets_received);
        assert_eq!(s.miss_with_success_upcall, 2);
    }
}

#[test]
fn cd_switches_itself_off_and_on_in_the_pipeline() {
    let cfg = Config {
        second_level: SecondLevel::Cd,
        emc_enable: false,
        cd_adapt_interval_ms: 10,
        subtable_rerank_interval_ms: 10,
        ..Config::default()
    };
    let mut dp = Datapath::new(cfg).unwrap();
    // Ten masks: nw_src plus a distinct bit of tp_dst per mask class.
    let mut up = |k: &FlowKey| -> Result<(DpActions, FlowMask), UpcallError> {
        let class = k.nw_src() % 10;
        let mut m = FlowKey::zero();
        m.set_nw_src(u32::MAX);
        m.set_tp_dst(1 << class);
        Ok((vec![DpAction::Output(class)], FlowMask::from_key(&m)))
    };
    let mut now = 0;
    // Phase 1: one subtable takes every hit.
    let keys: Vec<FlowKey> = (0..32).map(|i| tcp(1, i * 10, 7, i as u16)).collect();
    for _ in 0..40 {
        run(&mut dp, &keys, now, &mut up);
        now += 1;
    }
    assert_eq!(dp.dpcls(1).unwrap().n_subtables(), 1);
    assert!(
        !dp.cd_report().unwrap().active,
        "one dominant subtable → off"
    );
    // Phase 2: ten subtables, hits spread evenly.
    let keys: Vec<FlowKey> = (0..320).map(|i| tcp(1, 1000 + i, 7, i as u16)).collect();
    for _ in 0..40 {
        for c in keys.chunks(32) {
            run(&mut dp, c, now, &mut up);
        }
        now += 1;
    }
    assert_eq!(dp.dpcls(1).unwrap().n_subtables(), 10);
    let rep = dp.cd_report().unwrap();
    assert!(rep.active, "spread hits → on: {rep:?}");
    let before = dp.stats().cd_hits;
    for c in keys.chunks(32) {
        run(&mut dp, c, now, &mut up);
    }
    assert!(
        dp.stats().cd_hits - before > 300,
        "CD directs nearly every packet"
    );
    let r = dp.report();
    assert!(r.cd_hits > 0 && r.megaflow_hits > 0);
}

#[test]
fn flow_limit_forwards_without_installing() {
    let cfg = Config {
        flow_limit: 2,
        megaflows: false,
        ..Config::default()
    };
    let mut dp = Datapath::new(cfg).unwrap();
    let mut up = dst24;
    let keys: Vec<FlowKey> = (0..5).map(|i| tcp(1, i, 0x0a00_0001, 5)).collect();
    let mut b = Batch::new();
    for k in &keys {
        b.push(*k, 100).unwrap();
    }
    let v = dp.process_batch(&mut b, 0, &mut up).to_vec();
    assert_eq!(tier(&v[0]), Some(Tier::Upcall));
    assert_eq!(
        tier(&v[1]),
        Some(Tier::Upcall),
        "megaflows off: exact match, no sharing"
    );
    assert_eq!(v[2], Verdict::SlowPath);
    assert_eq!(b.actions(2, &dp), &[DpAction::Output(2)]);
    assert_eq!(b.actions(0, &dp), &[DpAction::Output(2)]);
    assert_eq!(dp.megaflow_count(), 2);
    let s = dp.stats();
    assert_eq!(
        (s.miss_with_success_upcall, s.miss_with_failed_upcall),
        (2, 3)
    );
    let r = match v[0] {
        Verdict::Megaflow { flow, .. } => flow,
        _ => unreachable!(),
    };
    let mf = dp.megaflow(r).unwrap();
    assert_eq!(mf.mask, exact_mask_for(&keys[0]));
    assert!(
        mf.mask.is_subset_of(&EXACT_MASK) && mf.mask != EXACT_MASK,
        "IPv4: five words, not fourteen"
    );
}

#[test]
fn failed_and_lost_upcalls_drop() {
    let mut dp = Datapath::new(Config::default()).unwrap();
    let mut up = |k: &FlowKey| -> Result<(DpActions, FlowMask), UpcallError> {
        if k.tp_src() == 1 {
            Err(UpcallError::Failed)
        } else {
            Err(UpcallError::Lost)
        }
    };
    let v = run(&mut dp, &[tcp(1, 1, 1, 1), tcp(1, 1, 1, 2)], 0, &mut up);
    assert_eq!(
        v,
        vec![
            Verdict::Drop(DropReason::UpcallFailed),
            Verdict::Drop(DropReason::Lost)
        ]
    );
    let s = dp.stats();
    assert_eq!((s.miss_with_failed_upcall, s.lost, s.decided()), (1, 1, 2));
}

#[test]
fn emc_insert_probability_in_the_pipeline() {
    for (inv, emc_hits) in [(1u32, true), (0, false)] {
        let cfg = Config {
            emc_insert_inv_prob: inv,
            second_level: SecondLevel::None,
            ..Config::default()
        };
        let mut dp = Datapath::new(cfg).unwrap();
        let k = tcp(1, 1, 1, 1);
        for t in 0..10 {
            run(&mut dp, &[k], t, &mut dst24);
        }
        assert_eq!(dp.stats().emc_hits > 0, emc_hits, "inv_prob {inv}");
        assert_eq!(dp.stats().emc_hits + dp.stats().megaflow_hits, 9);
    }
}

#[test]
fn ports_have_separate_classifiers() {
    let mut dp = Datapath::new(Config::default()).unwrap();
    let a = tcp(1, 1, 0x0a00_0001, 1);
    let b = tcp(2, 1, 0x0a00_0001, 1); // same headers, other port
    let v = run(&mut dp, &[a, b, a, b], 0, &mut dst24);
    assert_eq!(tier(&v[0]), Some(Tier::Upcall));
    assert_eq!(
        tier(&v[1]),
        Some(Tier::Upcall),
        "port 2 needs its own megaflow"
    );
    assert_eq!(tier(&v[2]), Some(Tier::Megaflow));
    assert_eq!(tier(&v[3]), Some(Tier::Megaflow));
    assert_eq!(dp.megaflow_count(), 2);
    assert_eq!(dp.dpcls(1).unwrap().n_megaflows(), 1);
    assert_eq!(dp.dpcls(2).unwrap().n_megaflows(), 1);
    let v = run(&mut dp, &[b, a], 1, &mut dst24);
    assert!(v.iter().all(|v| tier(v) != Some(Tier::Upcall)));
}

#[test]
fn dump_flows_like_dpctl() {
    let mut dp = Datapath::new(Config::default()).unwrap();
    let k = tcp(1, 1, 0x0a00_0001, 1);
    run(&mut dp, &[k], 1000, &mut dst24);
    assert_eq!(
        dp.dump_flows(1000),
        "recirc_id=0,eth,tcp,in_port=1,nw_dst=10.0.0.0/24, packets:0, bytes:0, used:never, actions:2\n"
    );
    run(&mut dp, &[k, k], 1500, &mut dst24);
    assert_eq!(
        dp.dump_flows(3750),
        "recirc_id=0,eth,tcp,in_port=1,nw_dst=10.0.0.0/24, packets:2, bytes:128, used:2.250s, actions:2\n"
    );
}

#[test]
fn idle_expiry_and_flush() {
    let mut dp = Datapath::new(Config::default()).unwrap();
    let a = tcp(1, 1, 0x0a00_0001, 1);
    let b = tcp(1, 1, 0x0b00_0001, 1);
    let c = tcp(1, 1, 0x0c00_0001, 1);
    run(&mut dp, &[a, b, c], 0, &mut dst24);
    run(&mut dp, &[a], 5, &mut dst24);
    run(&mut dp, &[b], 6000, &mut dst24);
    assert_eq!(
        dp.expire_idle(10_005, 10_000),
        1,
        "c: never used, installed at 0"
    );
    assert_eq!(dp.expire_idle(10_006, 10_000), 1, "a: used at 5");
    assert_eq!(dp.megaflow_count(), 1);
    let v = run(&mut dp, &[a, b], 10_007, &mut dst24);
    assert_eq!(
        tier(&v[0]),
        Some(Tier::Upcall),
        "expired megaflow is gone from every cache"
    );
    assert_ne!(tier(&v[1]), Some(Tier::Upcall));
    dp.flush();
    assert_eq!(dp.megaflow_count(), 0);
    assert_eq!(dp.dump_flows(0), "");
    let v = run(&mut dp, &[a, b], 10_008, &mut dst24);
    assert!(v.iter().all(|v| tier(v) == Some(Tier::Upcall)));
}

#[test]
fn config_changes_at_run_time() {
    let mut dp = Datapath::new(Config::default()).unwrap();
    let keys: Vec<FlowKey> = (0..20)
        .map(|i| tcp(1, i, 0x0a00_0001 + (i << 8), 1))
        .collect();
    for (t, second) in SecondLevel::ALL.into_iter().cycle().take(8).enumerate() {
        let cfg = Config {
            second_level: second,
            emc_enable: t % 3 != 0,
            emc_insert_inv_prob: [0, 1, 100][t % 3],
            emc_entries: [8192, 16][t % 2],
            ..Config::default()
        };
        dp.set_config(cfg).unwrap();
        let v = run(&mut dp, &keys, t as u64, &mut dst24);
        for (i, v) in v.iter().enumerate() {
            if let Verdict::Megaflow { flow, .. } = v {
                assert!(dp.megaflow(*flow).unwrap().matches(&keys[i]));
            } else {
                panic!("{v:?}");
            }
        }
    }
    assert_eq!(dp.megaflow_count(), 20);
    assert!(dp
        .set_config(Config {
            smc_entries: 3,
            ..Config::default()
        })
        .is_err());
    let report = dp.report();
    assert_eq!(report.megaflows, 20);
    assert_eq!(report.packets_received, 160);
    dp.add_processing_cycles(1600);
    let text = dp.report().cycle_lines(0);
    assert!(
        text.contains("  avg processing cycles per packet: 10.00 (1600/160)\n"),
        "{text}"
    );
    dp.clear_stats();
    assert_eq!(dp.stats().packets_received, 0);
}

#[test]
fn worker_state_can_move_to_its_thread() {
    fn is_send<T: Send>() {}
    is_send::<Datapath>();
    is_send::<Batch>();
}

#[test]
fn keys_with_connection_tracking_state_match_in_full() {
    // The EMC keeps only the words before the connection-tracking ones: a
    // packet recirculated after `ct` (ct_mark set here) with the same
    // headers as a cached one must not take the cached entry, nor one of
    // another ct_mark; its own entry (checked against its megaflow) it
    // may. The slow path's megaflows match ct_mark exactly.
    fn by_mark(k: &FlowKey) -> Result<(DpActions, FlowMask), UpcallError> {
        let mut m = FlowKey::zero();
        m.set_dl_type(0xffff);
        m.set_nw_proto(0xff);
        m.set_nw_dst(0xffff_ff00);
        m.set_ct_mark(u32::MAX);
        let out = 2 + k.ct_mark();
        Ok((vec![DpAction::Output(out)], FlowMask::from_key(&m)))
    }
    for second in SecondLevel::ALL {
        let cfg = Config {
            second_level: second,
            emc_insert_inv_prob: 1,
            ..Config::default()
        };
        let mut dp = Datapath::new(cfg).unwrap();
        let mut up = by_mark;
        let plain = tcp(1, 1, 0x0a00_0001, 1);
        let mut tracked = plain;
        tracked.set_ct_mark(5);
        let mut other = plain;
        other.set_ct_mark(6);
        let out = |dp: &Datapath, v: &Verdict| match v {
            Verdict::Megaflow { flow, .. } => dp.actions(*flow).to_vec(),
            _ => vec![],
        };
        // Installs the plain packet's megaflow and its EMC entry.
        run(&mut dp, &[plain, plain], 0, &mut up);
        for round in 0..3 {
            let v = run(
                &mut dp,
                &[plain, tracked, tracked, other, plain],
                1 + round,
                &mut up,
            );
            assert_eq!(tier(&v[0]), Some(Tier::Emc), "{second:?}");
            assert_eq!(tier(&v[4]), Some(Tier::Emc), "{second:?}");
            for v in &v[1..3] {
                assert_eq!(
                    out(&dp, v),
                    vec![DpAction::Output(7)],
                    "{second:?} round {round}"
                );
            }
            assert_eq!(
                out(&dp, &v[3]),
                vec![DpAction::Output(8)],
                "{second:?} round {round}"
            );
            if round > 0 {
                // Cached by now, in the EMC too (the megaflow's match
                // checked on the hit).
                assert_eq!(tier(&v[1]), Some(Tier::Emc), "{second:?} round {round}");
                assert_eq!(tier(&v[3]), Some(Tier::Emc), "{second:?} round {round}");
            }
            assert_eq!(out(&dp, &v[0]), vec![DpAction::Output(2)]);
            assert_eq!(out(&dp, &v[4]), vec![DpAction::Output(2)]);
        }
        assert_eq!(dp.megaflow_count(), 3, "{second:?}");
    }
}
