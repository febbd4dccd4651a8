//! `check_pkt_larger` through a real datapath: one megaflow (the packet
//! length is not in it) whose `check_pkt_len` action sends short and long
//! packets to different ports, each packet by its own length, whichever
//! packet installed the megaflow.

mod common;

use flowpath_datapath::{Config, Outputs, Switch};
use flowpath_ofproto::parse::parse_rules;
use flowpath_ofproto::tables::RuleTables;
use flowpath_slowpath::RuleSwitch;
use std::collections::BTreeMap;
use std::sync::Arc;

const RULES: &str = "table=0,in_port=1,actions=check_pkt_larger(100)->reg0[0],resubmit(,1)
table=1,priority=10,ip,reg0=1/1,actions=mod_nw_ttl:9,output:2
table=1,priority=5,actions=output:3";

/// A UDP frame padded to `len` bytes (its IP length says 46 bytes of IP:
/// the rest is Ethernet padding, which counts in the frame's length).
fn frame(len: usize, sport: u16) -> Vec<u8> {
    let mut f = common::udp_frame(
        [2, 0, 0, 0, 0, 2],
        [2, 0, 0, 0, 0, 1],
        ([10, 0, 0, 1], [10, 0, 0, 2]),
        (sport, 80),
    );
    f.resize(len, 0);
    f
}

#[test]
fn each_packet_takes_the_branch_its_length_picks() {
    let mut t = RuleTables::new(parse_rules(RULES, None).unwrap(), &[]);
    t.set_ports(vec![1, 2, 3]);
    let mut sw = Switch::with_rules(Config::default(), Arc::new(t)).unwrap();
    // Short first (it installs the megaflow), then long, then both
    // again: cache hits must pick per packet too.
    for (i, len) in [60usize, 150, 100, 101, 60, 1500].into_iter().enumerate() {
        let mut out: BTreeMap<u32, Vec<Vec<u8>>> = BTreeMap::new();
        let mut sink = |p: u32, pk: Outputs<'_>| {
            out.entry(p)
                .or_default()
                .extend(pk.iter().map(|x| x.data.to_vec()));
        };
        let f = frame(len, 1000);
        sw.process(1, [(&f[..], 0u64)], i as u64, &mut sink);
        let (port, ttl) = if len > 100 { (2, 9) } else { (3, 64) };
        assert_eq!(out.keys().copied().collect::<Vec<_>>(), vec![port], "{len}");
        let sent = &out[&port][0];
        assert_eq!(sent.len(), len);
        assert_eq!(sent[22], ttl, "{len}: TTL");
    }
    let s = sw.exec_stats();
    assert_eq!((s.check_pkt_len_gt, s.check_pkt_len_le), (3, 3));
    let r = sw.report();
    assert_eq!(
        r.miss_with_success_upcall, 1,
        "one megaflow for every length"
    );
    assert_eq!(sw.datapath().megaflow_count(), 1);
}
