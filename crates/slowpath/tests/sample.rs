//! `sample(...)` through a real datapath: on a bridge with flow-sample
//! collector sets the megaflow's `sample` action hands a share of the
//! packets (their headers as the action saw them, with the action's
//! cookie) to the sampler's queue, the packets themselves going on; on a
//! bridge without, nothing is sampled (as OVS).

use flowpath_datapath::execute::SampledPacket;
use flowpath_datapath::{Config, Outputs, Switch};
use flowpath_ofproto::parse::parse_rules;
use flowpath_ofproto::tables::RuleTables;
use flowpath_slowpath::{RuleSwitch, RulesWorker};
use std::sync::mpsc::sync_channel;
use std::sync::Arc;

const RULES: &str = "priority=10,udp,tp_dst=1,actions=sample(probability=65535,collector_set_id=1,obs_domain_id=7,obs_point_id=9),mod_nw_tos:8,output:2
priority=10,udp,tp_dst=2,actions=mod_nw_tos:4,sample(probability=32768,collector_set_id=2,obs_domain_id=1,obs_point_id=1,sampling_port=3,egress),output:2
priority=0,actions=output:3";

/// A UDP frame to port `dport` from source port `sport`.
fn udp(sport: u16, dport: u16) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    f.extend([0x45, 0, 0, 46, 0, 0, 0, 0, 64, 17, 0, 0]);
    f.extend([10, 0, 0, 1, 10, 0, 0, 2]);
    f.extend(sport.to_be_bytes());
    f.extend(dport.to_be_bytes());
    f.extend(26u16.to_be_bytes());
    f.extend([0, 0]);
    f.resize(80, 0x55);
    f
}

fn switch(sampling: bool) -> RulesWorker {
    let mut t = RuleTables::new(parse_rules(RULES, None).unwrap(), &[]);
    t.set_ports(vec![1, 2, 3]);
    t.set_sampling(sampling);
    Switch::with_rules(Config::default(), Arc::new(t)).unwrap()
}

/// Sends `n` frames of flow `dport` (a few source ports, so several
/// megaflow hits and misses) through `sw`; returns the frames output on
/// port 2.
fn send(sw: &mut RulesWorker, dport: u16, n: usize) -> usize {
    let mut out = 0;
    for i in 0..n {
        let f = udp(1000 + (i % 4) as u16, dport);
        let mut sink = |p: u32, pk: Outputs<'_>| {
            if p == 2 {
                out += pk.len();
            }
        };
        sw.process(1, [(&f[..], 0u64)], i as u64, &mut sink);
    }
    out
}

#[test]
fn every_packet_at_full_probability_with_its_headers_and_cookie() {
    let mut sw = switch(true);
    let (tx, rx) = sync_channel::<SampledPacket>(10_000);
    sw.set_sample_sink(Some(tx));
    assert_eq!(send(&mut sw, 1, 500), 500, "sampled packets go on");
    let got: Vec<SampledPacket> = rx.try_iter().collect();
    assert_eq!(got.len(), 500);
    let p = &got[0];
    assert_eq!(p.len, 80);
    assert_eq!(p.in_port, 1);
    assert_eq!(
        (
            p.sample.collector_set_id,
            p.sample.obs_domain_id,
            p.sample.obs_point_id
        ),
        (1, 7, 9)
    );
    assert_eq!(p.sample.output_port, u32::MAX);
    // Sampled before the rewrite that follows it: ToS still 0.
    assert_eq!(p.headers[15], 0);
    assert_eq!(sw.exec_stats().sampled, 500);
}

#[test]
fn half_probability_samples_about_half_after_the_rewrite() {
    let mut sw = switch(true);
    let (tx, rx) = sync_channel::<SampledPacket>(20_000);
    sw.set_sample_sink(Some(tx));
    let n = 20_000;
    assert_eq!(send(&mut sw, 2, n), n);
    let got: Vec<SampledPacket> = rx.try_iter().collect();
    // Binomial(20000, 0.5): mean 10000, sd ~71; 10 sd either side.
    assert!(
        (9_300..=10_700).contains(&got.len()),
        "{} of {n} sampled",
        got.len()
    );
    let p = &got[0];
    assert_eq!(p.headers[15], 4, "the ToS rewrite before the sample is in");
    assert_eq!((p.sample.output_port, p.sample.direction), (3, 2));
}

#[test]
fn nothing_is_sampled_without_collector_sets_and_a_full_queue_counts() {
    let mut sw = switch(false);
    let (tx, rx) = sync_channel::<SampledPacket>(10);
    sw.set_sample_sink(Some(tx));
    assert_eq!(send(&mut sw, 1, 100), 100);
    assert_eq!(rx.try_iter().count(), 0);
    assert_eq!(sw.exec_stats().sampled, 0);
    // With sets but a queue of 10: the rest are dropped and counted.
    let mut sw = switch(true);
    let (tx, rx) = sync_channel::<SampledPacket>(10);
    sw.set_sample_sink(Some(tx));
    assert_eq!(send(&mut sw, 1, 100), 100);
    assert_eq!(rx.try_iter().count(), 10);
    let st = sw.exec_stats();
    assert_eq!((st.sampled, st.sample_dropped), (100, 90));
}
