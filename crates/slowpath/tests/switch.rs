//! The datapath worker ([`Switch`]) over rule tables: frames in, outputs
//! out, counters, housekeeping and rule publication.

use flowpath_datapath::{Config, NullSink, Outputs, Switch};
use flowpath_ofproto::parse::parse_rules;
use flowpath_ofproto::tables::RuleTables;
use flowpath_slowpath::RuleSwitch;
use std::sync::Arc;

fn rules(text: &str) -> Arc<RuleTables> {
    Arc::new(RuleTables::new(parse_rules(text, None).unwrap(), &[]))
}

/// An Ethernet + IPv4 + UDP frame with a zero UDP checksum.
fn udp_frame(dst_port: u16, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len.max(42)];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip_len = (f.len() - 14) as u16;
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
    ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
    let c = flowpath_wire::checksum::checksum(ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f[36..38].copy_from_slice(&dst_port.to_be_bytes());
    f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    f
}

#[test]
fn frames_in_outputs_out_with_tags_and_counters() {
    let t = rules(
        "priority=10,udp,tp_dst=53,actions=output:2\n\
         priority=10,udp,tp_dst=54,actions=output:3,output:2\n\
         priority=0,actions=drop\n",
    );
    let mut sw = Switch::with_rules(Config::default(), t).unwrap();
    let frames: Vec<Vec<u8>> = (0..70)
        .map(|i| udp_frame([53, 54, 99][i % 3], 60 + i))
        .collect();
    let mut got: Vec<(u32, u64, usize)> = Vec::new();
    let mut sink = |port: u32, out: Outputs<'_>| {
        for p in out.iter() {
            got.push((port, p.tag, p.data.len()));
        }
    };
    let n = sw.process(
        1,
        frames.iter().enumerate().map(|(i, f)| (&f[..], i as u64)),
        5,
        &mut sink,
    );
    assert_eq!(n, 70);
    assert_eq!(sw.pending(), 0);
    // Port 2 gets frames 0, 1, 3, 4, ... in order; port 3 gets 1, 4, ...
    let p2: Vec<u64> = got.iter().filter(|g| g.0 == 2).map(|g| g.1).collect();
    let p3: Vec<u64> = got.iter().filter(|g| g.0 == 3).map(|g| g.1).collect();
    assert_eq!(p2, (0..70).filter(|i| i % 3 != 2).collect::<Vec<_>>());
    assert_eq!(p3, (0..70).filter(|i| i % 3 == 1).collect::<Vec<_>>());
    assert!(got.iter().all(|g| g.2 == 60 + g.1 as usize));
    let r = sw.report();
    assert_eq!(r.packets_received, 70);
    assert_eq!(r.miss_with_success_upcall, 3);
    assert_eq!(sw.rx_stats().packets, 70);
    assert_eq!(sw.exec_stats().dropped, 23);
    assert_eq!(sw.exec_stats().output_packets, 47 + 23);
    let ports: Vec<(u32, u64)> = sw
        .port_stats()
        .iter()
        .map(|p| (p.port, p.packets))
        .collect();
    assert_eq!(ports, vec![(2, 47), (3, 23)]);
}

#[test]
fn never_valid_frames_cost_no_upcall() {
    let mut sw = Switch::with_rules(Config::default(), rules("actions=output:2\n")).unwrap();
    let mut sink = NullSink::default();
    let runt = [0u8; 10];
    let mut bad_ihl = udp_frame(1, 60);
    bad_ihl[14] = 0x42;
    let good = udp_frame(1, 60);
    sw.process(
        1,
        [(&runt[..], 0), (&bad_ihl[..], 1), (&good[..], 2)],
        0,
        &mut sink,
    );
    assert_eq!(sw.rx_stats().invalid, 2);
    assert_eq!(sw.report().packets_received, 1);
    assert_eq!(sw.report().miss_with_success_upcall, 1);
    assert_eq!(sink.packets, 1);
}

#[test]
fn oversize_frames_are_counted_not_processed() {
    let mut sw = Switch::with_rules(Config::default(), rules("actions=output:2\n")).unwrap();
    let big = vec![0u8; flowpath_datapath::packet::MAX_FRAME_LEN + 1];
    let jumbo = udp_frame(1, 9000);
    let mut sink = NullSink::default();
    sw.process(1, [(&big[..], 0), (&jumbo[..], 1)], 0, &mut sink);
    assert_eq!(sw.rx_stats().oversize, 1);
    assert_eq!(sw.report().packets_received, 1);
    assert_eq!((sink.packets, sink.bytes), (1, 9000));
}

#[test]
fn housekeeping_expires_idle_megaflows() {
    let cfg = Config {
        max_idle_ms: 1000,
        ..Config::default()
    };
    let mut sw = Switch::with_rules(cfg, rules("udp,actions=output:2\n")).unwrap();
    let mut sink = NullSink::default();
    let f = udp_frame(1, 60);
    sw.process(1, [(&f[..], 0)], 0, &mut sink);
    assert_eq!(sw.datapath().megaflow_count(), 1);
    assert_eq!(sw.housekeeping(0), 0);
    assert_eq!(sw.housekeeping(600), 0);
    assert_eq!(sw.housekeeping(1100), 1);
    assert_eq!(sw.datapath().megaflow_count(), 0);
}

#[test]
fn upcall_budget_is_per_port_and_per_millisecond() {
    let cfg = Config {
        megaflows: false,
        upcall_budget_per_ms: 4,
        ..Config::default()
    };
    let mut sw = Switch::with_rules(cfg, rules("udp,actions=output:9\n")).unwrap();
    let mut sink = NullSink::default();
    let flood: Vec<Vec<u8>> = (0..32).map(|i| udp_frame(1000 + i, 60)).collect();
    let frames = |port_base: u16| -> Vec<Vec<u8>> {
        (0..32).map(|i| udp_frame(port_base + i, 60)).collect()
    };
    // 32 new flows on port 1 and 32 on port 2 in the same millisecond:
    // 4 upcalls each, the others dropped without one.
    sw.process(1, flood.iter().map(|f| (&f[..], 0)), 7, &mut sink);
    let p2 = frames(2000);
    sw.process(2, p2.iter().map(|f| (&f[..], 0)), 7, &mut sink);
    let st = *sw.datapath().stats();
    assert_eq!(st.miss_with_success_upcall, 8);
    assert_eq!(st.upcall_budget_drops, 56);
    assert_eq!(st.miss_with_failed_upcall, 56);
    assert_eq!(sink.packets, 8);
    // The next millisecond has a fresh budget; installed flows hit.
    sw.process(1, flood.iter().map(|f| (&f[..], 0)), 8, &mut sink);
    let st = *sw.datapath().stats();
    assert_eq!(st.miss_with_success_upcall, 12);
    assert_eq!(st.upcall_budget_drops, 56 + 24);
    assert_eq!(st.decided(), st.packets_received);
}

/// Tuple space explosion in miniature: ports differing from the allowed
/// one at each bit make port-prefix tracking produce a mask per bit.
#[test]
fn mask_budget_bounds_subtables_and_keeps_actions() {
    let attack: Vec<Vec<u8>> = (0..16).map(|b| udp_frame(80 ^ (1 << b), 60)).collect();
    let count = |budget: usize| {
        let cfg = Config {
            mask_budget: budget,
            ..Config::default()
        };
        let t = rules("priority=10,udp,tp_dst=80,actions=output:2\npriority=0,actions=drop\n");
        let mut sw = Switch::with_rules(cfg, t).unwrap();
        let mut sink = NullSink::default();
        sw.process(1, attack.iter().map(|f| (&f[..], 0)), 0, &mut sink);
        let legit = udp_frame(80, 60);
        sw.process(1, [(&legit[..], 0)], 1, &mut sink);
        // Replayed: every packet now hits an installed megaflow.
        sw.process(1, attack.iter().map(|f| (&f[..], 0)), 2, &mut sink);
        let subtables = sw.datapath().dpcls(1).map_or(0, |c| c.n_subtables());
        (
            subtables,
            sw.datapath().stats().masks_widened,
            sink.packets,
            *sw.datapath().stats(),
        )
    };
    let (free, w0, out0, _) = count(0);
    assert!(free >= 16, "the attack makes a mask per bit: {free}");
    assert_eq!(w0, 0);
    let (bounded, w, out, st) = count(4);
    assert!(bounded <= 5, "{bounded} subtables with a budget of 4");
    assert!(w > 0);
    assert_eq!((out, out0), (1, 1), "only the allowed port is output");
    assert_eq!(
        st.miss_with_success_upcall, 17,
        "each packet installed once"
    );
}

#[test]
fn publish_rules_revalidates() {
    let mut sw = Switch::with_rules(Config::default(), rules("udp,actions=output:2\n")).unwrap();
    let f = udp_frame(1, 60);
    let mut last_port = 0;
    let mut sink = |p: u32, _: Outputs<'_>| last_port = p;
    sw.process(1, [(&f[..], 0)], 0, &mut sink);
    assert_eq!(sw.publish_rules(rules("udp,actions=output:7\n")), 1);
    sw.process(1, [(&f[..], 0)], 1, &mut sink);
    assert_eq!(last_port, 7);
}
