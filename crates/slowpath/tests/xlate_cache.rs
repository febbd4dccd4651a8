//! The slow path's translation cache (megaflows off): every packet of
//! random rule sets (`testgen`, NORMAL with a learning MAC table included)
//! gets the same datapath actions as with megaflows on, and the cache is
//! used.

use flowpath_datapath::{Batch, Config, Datapath, Upcall};
use flowpath_ofproto::group::parse_groups;
use flowpath_ofproto::normal::Bridge;
use flowpath_ofproto::tables::RuleTables;
use flowpath_ofproto::testgen::{packet, rule_set, Rng, GROUPS};
use flowpath_slowpath::SlowPath;
use std::sync::Arc;

fn worker(megaflows: bool, tables: &Arc<RuleTables>) -> (Datapath, SlowPath) {
    let cfg = Config {
        megaflows,
        ..Config::default()
    };
    let dp = Datapath::new(cfg).unwrap();
    let sp = SlowPath::with_bridge(tables.clone(), Arc::new(Bridge::default()));
    (dp, sp)
}

#[test]
fn megaflows_off_with_cache_forwards_as_megaflows_on() {
    let mut cached = 0;
    for seed in 1..=60u64 {
        let mut r = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let (rules, text) = rule_set(&mut r);
        let mut t = RuleTables::new(rules.clone(), &[]);
        t.set_ports(vec![1, 2, 3, 4]);
        t.set_groups(parse_groups(GROUPS, None).unwrap()).unwrap();
        let t = Arc::new(t);
        let (mut on, mut sp_on) = worker(true, &t);
        let (mut off, mut sp_off) = worker(false, &t);
        // The cache turns on after the first batch.
        sp_off.after_batch(&mut off, 0);
        // Few distinct packets, each many times: misses whose megaflow was
        // translated before.
        let pool: Vec<_> = (0..12).map(|_| packet(&mut r, &rules)).collect();
        for round in 0..8u64 {
            let keys: Vec<_> = (0..32).map(|_| pool[r.below(12) as usize]).collect();
            let (mut b1, mut b2) = (Batch::new(), Batch::new());
            for k in &keys {
                b1.push(*k, 64).unwrap();
                b2.push(*k, 64).unwrap();
            }
            on.process_batch(&mut b1, round, &mut sp_on);
            off.process_batch(&mut b2, round, &mut sp_off);
            for (i, k) in keys.iter().enumerate() {
                assert_eq!(
                    b1.actions(i, &on),
                    b2.actions(i, &off),
                    "seed {seed}: {k:?}\n{text}"
                );
            }
            sp_on.after_batch(&mut on, round);
            sp_off.after_batch(&mut off, round);
            // Megaflows off: exact-match flows only; expire them so the
            // next round misses again and asks the slow path.
            off.flush();
        }
        cached += sp_off.stats().cached;
        assert_eq!(sp_on.stats().cached, 0, "no cache with megaflows on");
    }
    assert!(cached > 1000, "the cache answered only {cached} upcalls");
}
