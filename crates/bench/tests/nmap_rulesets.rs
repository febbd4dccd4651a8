//! The nmap rule sets that `flowpath gen nmap` emits give, through the
//! datapath with the real slow path, the megaflow counts that OVS 3.1
//! installs for the full scan 7.7.7.1 → 7.7.7.101–200 × TCP ports 1–65535:
//! 17 for `port90` and 119 for `allow-over-drop` (the slow-path issue's
//! reference points, measured with OVS itself).
//!
//! The scan's packets are the generator's own SYN probes (`nmap::probe`),
//! extracted from their frames, so rule text, frames and datapath are the
//! ones `flowpath bench` runs.

use flowpath_datapath::{Batch, Config, Datapath, SecondLevel};
use flowpath_flow::extract::extract;
use flowpath_ofproto::classifier::DEFAULT_PREFIXES;
use flowpath_ofproto::parse::parse_rules;
use flowpath_ofproto::tables::RuleTables;
use flowpath_slowpath::SlowPath;
use flowpath_trafficgen::frame::write_tcp_syn;
use flowpath_trafficgen::nmap::{probe, NmapRuleSet};
use std::sync::Arc;

/// Runs every (host, port) of the scan through a datapath (EMC off, no
/// second-level cache: every packet goes to dpcls or the slow path) and
/// returns the number of megaflows installed.
fn installed_megaflows(set: NmapRuleSet) -> usize {
    let text = set.rules().join("\n");
    let rules = parse_rules(&text, None).unwrap();
    let mut slow = SlowPath::new(Arc::new(RuleTables::new(rules, DEFAULT_PREFIXES)));
    let cfg = Config {
        emc_enable: false,
        second_level: SecondLevel::None,
        ..Config::default()
    };
    let mut dp = Datapath::new(cfg).unwrap();
    let mut batch = Batch::new();
    let mut frame = [0u8; 60];
    for host in 0..100u64 {
        for port in 1..=65535u16 {
            write_tcp_syn(&mut frame, &probe(host, port));
            let key = extract(&frame, 1);
            assert_eq!(
                u64::from(key.nw_dst()),
                0x0707_0765 + host,
                "probe addresses"
            );
            assert_eq!(key.tp_dst(), port);
            batch.push(key, frame.len() as u32).unwrap();
            if batch.is_full() {
                dp.process_batch(&mut batch, 0, &mut slow);
                batch.clear();
            }
        }
    }
    dp.process_batch(&mut batch, 0, &mut slow);
    let s = dp.report();
    assert_eq!(s.packets_received, 100 * 65535);
    assert_eq!(s.miss_with_failed_upcall + s.lost, 0);
    dp.megaflow_count()
}

#[test]
fn port90_rule_set_installs_17_megaflows() {
    assert_eq!(installed_megaflows(NmapRuleSet::Port90), 17);
}

#[test]
fn allow_over_drop_rule_set_installs_119_megaflows() {
    assert_eq!(installed_megaflows(NmapRuleSet::AllowOverDrop), 119);
}
