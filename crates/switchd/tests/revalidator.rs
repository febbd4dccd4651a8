//! The revalidator's logic, deterministically: a datapath worker driven
//! with keys and passed-in time, the revalidator fed its dumps, no
//! threads.
//!
//! - After random rule changes, what the revalidator keeps is exactly what
//!   the slow path alone gives under the new rules (every kept megaflow's
//!   actions, and every packet processed afterwards).
//! - Rule counters: for single-table rule sets the sum of the rules'
//!   `n_packets` equals the packets the megaflows carried, the packet
//!   whose upcall installed each included (as OVS counts it).
//! - Idle megaflows expire after `max-idle`; rules expire by their idle
//!   and hard timeouts.
//! - Each step of OVS's dynamic flow limit, and the least recently used
//!   megaflows going when a PMD holds more than the limit.

use flowpath_datapath::{Batch, Config, Datapath, BATCH_SIZE, EXACT_MASK};
use flowpath_flow::FlowKey;
use flowpath_ofproto::parse::parse_rules;
use flowpath_ofproto::testgen::{rule_set, Rng};
use flowpath_ofproto::xlate::xlate;
use flowpath_slowpath::SlowPath;
use flowpath_switchd::revalidator::Revalidator;
use flowpath_switchd::rules::RuleSet;
use std::time::{Duration, Instant};

/// Processes `keys` in batches at time `now`; returns the actions each
/// packet got.
fn process(dp: &mut Datapath, sp: &mut SlowPath, keys: &[FlowKey], now: u64) -> Vec<String> {
    let mut out = Vec::new();
    let mut batch = Batch::new();
    for chunk in keys.chunks(BATCH_SIZE) {
        batch.clear();
        for k in chunk {
            batch.push(*k, 100).unwrap();
        }
        dp.process_batch(&mut batch, now, sp);
        for i in 0..chunk.len() {
            out.push(format!("{:?}", batch.actions(i, dp)));
        }
    }
    out
}

fn exact(mut k: FlowKey) -> FlowKey {
    for (w, m) in k.w.iter_mut().zip(EXACT_MASK.w) {
        *w &= m;
    }
    k
}

#[test]
fn random_rule_changes_keep_only_what_the_new_rules_say() {
    let mut total_changed = 0;
    for seed in 1..=40u64 {
        let mut r = Rng(seed * 7919);
        let (a, _) = rule_set(&mut r);
        let (b, _) = rule_set(&mut r);
        let mut rs = RuleSet::new(a.clone(), vec![], vec![], vec![1, 2, 3, 4]);
        let pa = rs.publish();
        let keys: Vec<FlowKey> = (0..300)
            .map(|_| exact(flowpath_ofproto::testgen::packet(&mut r, &a)))
            .collect();
        let mut dp = Datapath::new(Config::default()).unwrap();
        let mut sp = SlowPath::new(pa.tables.clone());
        process(&mut dp, &mut sp, &keys, 10);
        let mut rv = Revalidator::new(1, 200_000);
        let o = rv.revalidate(&[dp.dump()], &pa, 20, 10_000);
        assert_eq!(o.changed + o.expired, 0, "seed {seed}: nothing changes");
        // The rules change; the PMD only swaps its tables.
        rs.replace(b.clone());
        let pb = rs.publish();
        sp.set_tables(pb.tables.clone());
        let o = rv.revalidate(&[dp.dump()], &pb, 30, 10_000);
        total_changed += o.changed;
        assert_eq!(dp.delete_megaflows(&o.deletions[0]), o.deletions[0].len());
        for e in dp.dump() {
            let x = xlate(&*pb.tables, &e.key, false);
            assert_eq!(
                x.actions[..],
                e.actions[..],
                "seed {seed}: kept megaflow {:?}",
                e.key
            );
            assert!(x.megaflow.is_subset_of(&e.mask), "seed {seed}");
        }
        let got = process(&mut dp, &mut sp, &keys, 40);
        for (k, g) in keys.iter().zip(&got) {
            let want = xlate(&*pb.tables, k, false);
            if want.error.is_none() {
                assert_eq!(*g, format!("{:?}", &want.actions[..]), "seed {seed}: {k:?}");
            }
        }
    }
    assert!(
        total_changed > 40,
        "the rule changes did change megaflows: {total_changed}"
    );
}

/// A megaflow's packets as the rules count them: its hits and the
/// packet whose upcall installed it.
fn carried_packets(e: &flowpath_datapath::DumpEntry) -> u64 {
    e.packets + u64::from(e.upcall_bytes > 0)
}

fn tcp(dst: u16, src: u16) -> FlowKey {
    let mut k = FlowKey::zero();
    k.set_in_port(1);
    k.set_dl_type(0x0800);
    k.set_nw_proto(6);
    k.set_nw_ttl(64);
    k.set_tp_dst(dst);
    k.set_tp_src(src);
    exact(k)
}

#[test]
fn rule_counters_add_up_to_the_megaflows_packets() {
    let text = "priority=30,tcp,tp_dst=80,actions=output:2\n\
                priority=20,tcp,tp_dst=0x100/0xff00,actions=output:3\n\
                priority=10,tcp,actions=output:4\n\
                priority=0,actions=drop\n";
    let mut rs = RuleSet::new(
        parse_rules(text, None).unwrap(),
        vec![],
        vec![],
        vec![1, 2, 3, 4],
    );
    let p = rs.publish();
    let mut dp = Datapath::new(Config::default()).unwrap();
    let mut sp = SlowPath::new(p.tables.clone());
    let mut rv = Revalidator::new(1, 200_000);
    let mut r = Rng(99);
    for round in 0..5u64 {
        let keys: Vec<FlowKey> = (0..500)
            .map(|_| {
                let d = [80, 0x105, 0x1ff, 22, 443][r.below(5) as usize];
                tcp(d, 1000 + r.below(20) as u16)
            })
            .collect();
        process(&mut dp, &mut sp, &keys, round * 100);
        let o = rv.revalidate(&[dp.dump()], &p, round * 100 + 50, 10_000);
        rs.credit(&o.rule_deltas, Instant::now());
    }
    // What the megaflows carried, with the packet whose upcall installed
    // each (which the rules count, as in OVS).
    let carried: u64 = dp.dump().iter().map(carried_packets).sum();
    let counted: u64 = rs.rules().iter().map(|r| r.packets).sum();
    assert!(carried > 2000, "{carried}");
    assert_eq!(counted, carried);
    let bytes: u64 = rs.rules().iter().map(|r| r.bytes).sum();
    assert_eq!(bytes, carried * 100);
    let by_prio: Vec<(u16, u64)> = rs
        .rules()
        .iter()
        .map(|r| (r.rule.priority, r.packets))
        .collect();
    assert!(
        by_prio.iter().all(|(p, n)| *p == 0 || *n > 0),
        "{by_prio:?}"
    );
    let d = flowpath_switchd::rules::dump_flows(
        &rs,
        &flowpath_switchd::rules::Selector::parse("").unwrap(),
    );
    assert!(d.contains(&format!("n_packets={}", by_prio[0].1)), "{d}");
}

/// `tcp,actions=output:2` published, and a datapath with megaflows off
/// (one exact-match megaflow per packet) and its slow path.
fn exact_match_tcp() -> (flowpath_switchd::rules::Published, Datapath, SlowPath) {
    let p = RuleSet::new(
        parse_rules("tcp,actions=output:2\n", None).unwrap(),
        vec![],
        vec![],
        vec![1, 2],
    )
    .publish();
    let dp = Datapath::new(Config {
        megaflows: false,
        ..Config::default()
    })
    .unwrap();
    let sp = SlowPath::new(p.tables.clone());
    (p, dp, sp)
}

#[test]
fn idle_megaflows_expire_after_max_idle() {
    let (p, mut dp, mut sp) = exact_match_tcp();
    let keys: Vec<FlowKey> = (0..100).map(|i| tcp(80, i)).collect();
    process(&mut dp, &mut sp, &keys, 1000);
    process(&mut dp, &mut sp, &keys[..50], 3000);
    let mut rv = Revalidator::new(1, 200_000);
    let o = rv.revalidate(&[dp.dump()], &p, 5000, 10_000);
    assert_eq!(o.expired, 0);
    // Flows first seen at 1000 and never hit again are idle since 1000;
    // those hit at 3000 since 3000.
    let o = rv.revalidate(&[dp.dump()], &p, 12_000, 10_000);
    assert_eq!(o.expired, 50);
    dp.delete_megaflows(&o.deletions[0]);
    assert_eq!(dp.megaflow_count(), 50);
    let o = rv.revalidate(&[dp.dump()], &p, 14_000, 10_000);
    assert_eq!(o.expired, 50);
    dp.delete_megaflows(&o.deletions[0]);
    assert_eq!(dp.megaflow_count(), 0);
    assert_eq!(rv.stats.expired, 100);
}

#[test]
fn rules_expire_by_idle_and_hard_timeouts() {
    let text = "priority=3,idle_timeout=1,tcp,actions=output:2\n\
                priority=2,hard_timeout=2,udp,actions=output:2\n\
                priority=1,actions=drop\n";
    let mut rs = RuleSet::new(parse_rules(text, None).unwrap(), vec![], vec![], vec![1, 2]);
    let t0 = Instant::now();
    let ms = |n: u64| t0 + Duration::from_millis(n);
    assert_eq!(rs.expire(ms(500)), 0);
    let idle_uid = rs.rules()[0].uid;
    rs.credit(&[(idle_uid, 5, 500)], ms(800));
    assert_eq!(rs.expire(ms(1500)), 0, "the idle rule was used at 0.8 s");
    assert_eq!(rs.expire(ms(1900)), 1, "idle for more than 1 s");
    assert_eq!(rs.rules().len(), 2);
    assert_eq!(rs.expire(ms(1950)), 0);
    assert_eq!(rs.expire(ms(2100)), 1, "hard timeout 2 s");
    assert_eq!(rs.rules().len(), 1);
    assert_eq!(rs.rules()[0].rule.priority, 1);
}

#[test]
fn dynamic_flow_limit_steps() {
    let mut rv = Revalidator::new(1, 200_000);
    // Above 2000 ms: divided by the duration in seconds.
    assert_eq!(rv.adjust_flow_limit(2500, 150_000, 200_000), 100_000);
    // Above 1300 ms: three quarters.
    assert_eq!(rv.adjust_flow_limit(1500, 100_000, 200_000), 75_000);
    // Between 1000 and 1300 ms: unchanged.
    assert_eq!(rv.adjust_flow_limit(1100, 100_000, 200_000), 75_000);
    // Below 1000 ms while under flows × 1000 / duration: +1000.
    assert_eq!(rv.adjust_flow_limit(500, 100_000, 200_000), 76_000);
    // ... but not when the flows are few.
    assert_eq!(rv.adjust_flow_limit(500, 10, 200_000), 76_000);
    // Never above the configured flow-limit, never below 1000.
    assert_eq!(rv.adjust_flow_limit(10, 1_000_000, 76_500), 76_500);
    assert_eq!(rv.adjust_flow_limit(9000, 1_000_000, 200_000), 8_500);
    assert_eq!(rv.adjust_flow_limit(9000, 1_000_000, 200_000), 1_000);
    assert_eq!(rv.stats.limit, 1_000);
    assert_eq!(rv.stats.dump_duration_ms, 9000);
}

#[test]
fn least_recently_used_megaflows_go_above_the_limit() {
    let (p, mut dp, mut sp) = exact_match_tcp();
    let keys: Vec<FlowKey> = (0..1500).map(|i| tcp(80, i)).collect();
    process(&mut dp, &mut sp, &keys, 0);
    process(&mut dp, &mut sp, &keys[1000..], 100);
    let mut rv = Revalidator::new(1, 1000);
    let o = rv.revalidate(&[dp.dump()], &p, 200, 10_000);
    assert_eq!(o.over_limit, 500);
    dp.delete_megaflows(&o.deletions[0]);
    assert_eq!(dp.megaflow_count(), 1000);
    // The ones used at 100 stayed.
    let kept: Vec<u16> = dp.dump().iter().map(|e| e.key.tp_src()).collect();
    assert!(
        kept.iter().filter(|s| **s >= 1000).count() == 500,
        "{}",
        kept.len()
    );
}

/// `fin_timeout`: once a megaflow through the rule has carried a TCP FIN
/// (or RST), the revalidator brings the rule's timeouts down to the
/// action's; a rule no FIN went through keeps its own.
#[test]
fn a_fin_through_a_rule_applies_its_fin_timeout() {
    let text = "idle_timeout=60,priority=10,tcp,tp_dst=80,actions=fin_timeout(idle_timeout=5,hard_timeout=9),output:2\n\
                idle_timeout=60,priority=5,tcp,actions=fin_timeout(idle_timeout=5),output:3\n";
    let mut rs = RuleSet::new(
        parse_rules(text, None).unwrap(),
        vec![],
        vec![],
        vec![1, 2, 3],
    );
    let p = rs.publish();
    let mut dp = Datapath::new(Config::default()).unwrap();
    let mut sp = SlowPath::new(p.tables.clone());
    let mut rv = Revalidator::new(1, 200_000);
    let flags = |mut k: FlowKey, f: u16| {
        k.set_tcp_flags(f);
        k
    };
    // Port 80: SYN (installs), ACK, FIN (hits). Port 22: SYN, ACK.
    let keys = [
        flags(tcp(80, 1000), 0x002),
        flags(tcp(80, 1000), 0x010),
        flags(tcp(80, 1000), 0x011),
        flags(tcp(22, 1000), 0x002),
        flags(tcp(22, 1000), 0x010),
    ];
    process(&mut dp, &mut sp, &keys[..1], 0);
    process(&mut dp, &mut sp, &keys[3..4], 0);
    process(&mut dp, &mut sp, &keys[1..3], 10);
    process(&mut dp, &mut sp, &keys[4..], 10);
    let o = rv.revalidate(&[dp.dump()], &p, 50, 10_000);
    assert_eq!(o.fin_rules.len(), 1, "{:?}", o.fin_rules);
    rs.credit(&o.rule_deltas, Instant::now());
    rs.saw_fin(&o.fin_rules);
    let t: Vec<(u16, u16, u16)> = rs
        .rules()
        .iter()
        .map(|r| (r.rule.priority, r.rule.idle_timeout, r.rule.hard_timeout))
        .collect();
    assert_eq!(t, vec![(10, 5, 9), (5, 60, 0)]);
}

/// Frozen translations are freed once no megaflow names them: while the
/// first pass's megaflow (`recirc(ID)`) is installed the revalidator's
/// rounds keep ID, after it is gone the next round frees it, and a later
/// packet of the same flow gets a frozen translation again.
#[test]
fn recirculation_ids_are_freed_when_no_megaflow_names_them() {
    use flowpath_odp::DpAction;
    use flowpath_ofproto::group::parse_groups;
    use flowpath_ofproto::recirc::RecircTable;
    use flowpath_ofproto::tables::RuleTables;
    use flowpath_switchd::revalidator::recirc_ids_in_use;
    use std::sync::Arc;

    // A select group of its own (its frozen state is this test's only).
    let mut t = RuleTables::new(
        parse_rules("in_port=3,actions=group:77,output:4", None).unwrap(),
        &[],
    );
    t.set_ports(vec![1, 2, 3, 4]);
    t.set_groups(
        parse_groups(
            "group_id=77,type=select,bucket=output:1,bucket=output:2",
            None,
        )
        .unwrap(),
    )
    .unwrap();
    let mut dp = Datapath::new(Config::default()).unwrap();
    let mut sp = SlowPath::new(Arc::new(t));
    let mut k = FlowKey::zero();
    k.set_in_port(3);
    k.set_dl_type(0x0800);
    let acts = process(&mut dp, &mut sp, &[k], 10);
    let dumped = dp.dump();
    assert_eq!(dumped.len(), 1, "{acts:?}");
    let Some(DpAction::Recirc(id)) = dumped[0].actions.last().copied() else {
        panic!("{acts:?}")
    };
    let table = RecircTable::global();
    // A round with the megaflow installed keeps the id.
    let round = table.begin_round();
    let in_use = recirc_ids_in_use(&[dp.dump()]);
    assert!(in_use.contains(&id));
    table.sweep(&in_use, round);
    assert!(table.find(id).is_some());
    // The megaflow goes; the round after next frees the id (a state
    // named or thawed in a round is kept through the next).
    assert_eq!(dp.delete_megaflows(&[dumped[0].mf]), 1);
    let round = table.begin_round();
    table.sweep(&recirc_ids_in_use(&[dp.dump()]), round);
    let round = table.begin_round();
    table.sweep(&recirc_ids_in_use(&[dp.dump()]), round);
    assert!(table.find(id).is_none(), "id {id} freed");
    // The flow's next packet freezes again (under a new id or a reused
    // one), and that state is found.
    process(&mut dp, &mut sp, &[k], 20);
    let Some(DpAction::Recirc(again)) = dp.dump()[0].actions.last().copied() else {
        panic!()
    };
    assert!(table.find(again).is_some());
}

/// Group counters ride on the megaflows as rule counters do: a select
/// group hashed in the datapath counts on the recirculated megaflows
/// (which know their bucket), its buckets share its packets, and an `all`
/// group counts each packet in every bucket and equals its flow's counter.
#[test]
fn group_counters_follow_the_megaflows() {
    use flowpath_odp::DpAction;
    use flowpath_ofproto::group::parse_groups;

    let rules = parse_rules(
        "in_port=1,actions=group:1\nin_port=2,actions=group:2\n",
        None,
    )
    .unwrap();
    let mut rs = RuleSet::new(rules, vec![], vec![], vec![1, 2, 3, 4]);
    rs.set_groups(
        parse_groups(
            "group_id=1,type=select,bucket=output:3,bucket=output:4\n\
             group_id=2,type=all,bucket=output:3,bucket=output:4\n",
            None,
        )
        .unwrap(),
    )
    .unwrap();
    let p = rs.publish();
    let mut dp = Datapath::new(Config::default()).unwrap();
    let mut sp = SlowPath::new(p.tables.clone());
    let key = |port: u32, i: u32| {
        let mut k = FlowKey::zero();
        k.set_in_port(port);
        k.set_dl_type(0x0800);
        k.set_nw_proto(6);
        k.set_nw_src(0x0a00_0000 + i);
        k.set_tp_src(1000 + i as u16);
        k
    };
    let keys: Vec<FlowKey> = (0..64)
        .map(|i| key(1, i))
        .chain((0..5).map(|i| key(2, i)))
        .collect();
    // Twice: the second time every packet hits installed megaflows.
    process(&mut dp, &mut sp, &keys, 10);
    process(&mut dp, &mut sp, &keys, 20);
    let Some(DpAction::Recirc(id)) = dp
        .dump()
        .iter()
        .find_map(|e| e.actions.last().copied().filter(|_| e.key.in_port() == 1))
    else {
        panic!("group 1 hashes in the datapath: {:?}", dp.dump());
    };
    // The datapath's second pass: the packets with their hash.
    let second: Vec<FlowKey> = (0..64u32)
        .map(|i| {
            let mut k = key(1, i);
            k.set_recirc_id(id);
            k.set_dp_hash(i + 1);
            k
        })
        .collect();
    process(&mut dp, &mut sp, &second, 10);
    process(&mut dp, &mut sp, &second, 20);
    let mut rv = Revalidator::new(1, 200_000);
    let o = rv.revalidate(&[dp.dump()], &p, 30, 10_000);
    // The megaflow of the hash's slot 0 (its masked hash is 0) stays too.
    assert_eq!(o.changed, 0);
    rs.credit(&o.rule_deltas, Instant::now());
    rs.credit_groups(&o.group_deltas);
    let carried = |f: &dyn Fn(&FlowKey) -> bool| -> u64 {
        dp.dump()
            .iter()
            .filter(|e| f(&e.key))
            .map(carried_packets)
            .sum()
    };
    let hashed = carried(&|k| k.recirc_id() == id);
    let to_all = carried(&|k| k.in_port() == 2);
    assert!(hashed > 64 && to_all > 5, "{hashed} {to_all}");
    let flow = |m: &str| {
        let r = rs.rules().iter().find(|r| r.rule.to_string().contains(m));
        r.map(|r| r.packets).unwrap()
    };
    let g1 = rs.group_counters().get(1).unwrap().clone();
    let g2 = rs.group_counters().get(2).unwrap().clone();
    assert_eq!((g1.packets, g1.bytes), (hashed, hashed * 100));
    assert_eq!(g1.buckets.iter().map(|b| b.0).sum::<u64>(), hashed);
    assert!(g1.buckets.iter().all(|b| b.0 > 0), "{:?}", g1.buckets);
    assert_eq!((g2.packets, g2.bytes), (to_all, to_all * 100));
    assert_eq!(g2.packets, flow("in_port=2"));
    assert_eq!(g2.buckets, vec![(to_all, to_all * 100); 2]);
    // Nothing new: nothing more to credit.
    let o = rv.revalidate(&[dp.dump()], &p, 40, 10_000);
    assert!(o.group_deltas.is_empty(), "{:?}", o.group_deltas);
}
