//! Recirculation through a real datapath: select groups by the datapath
//! hash (OVS's default) and the recirculation depth limit.

mod common;

use common::udp_frame;
use flowpath_datapath::execute::MAX_RECIRC_DEPTH;
use flowpath_datapath::{Config, Outputs, Switch};
use flowpath_ofproto::group::parse_groups;
use flowpath_ofproto::parse::parse_rules;
use flowpath_ofproto::tables::RuleTables;
use flowpath_slowpath::{RuleSwitch, RulesWorker};
use std::collections::HashMap;
use std::sync::Arc;

fn switch(rules: &str, groups: &str) -> RulesWorker {
    let mut t = RuleTables::new(parse_rules(rules, None).unwrap(), &[]);
    t.set_ports(vec![1, 2, 3, 4]);
    t.set_groups(parse_groups(groups, None).unwrap()).unwrap();
    Switch::with_rules(Config::default(), Arc::new(t)).unwrap()
}

/// Every packet of a select group takes two datapath passes — the first
/// computes the hash and recirculates, the second outputs by the bucket
/// its hash's slot names — and is output exactly once; one connection
/// always takes one bucket, in either direction; the buckets share the
/// connections about as their weights say; the megaflows are the first
/// pass's one and one per slot used (OVS's).
#[test]
fn select_groups_hash_in_the_datapath() {
    let mut sw = switch(
        "in_port=1,actions=group:1\nin_port=4,actions=group:1",
        "group_id=1,type=select,bucket=weight:1,output:2,bucket=weight:3,output:3",
    );
    let mac = |i: u8| [2, 0, 0, 0, 0, i];
    let mut port_of: HashMap<u16, u32> = HashMap::new();
    let mut per_port: HashMap<u32, usize> = HashMap::new();
    let n = 400u16;
    for round in 0..2 {
        for i in 0..n {
            // (Addresses differ per connection: OVS's sym_l4 hash leaves
            // UDP ports out.)
            let ip = [10, 1, (i >> 8) as u8, i as u8];
            let f = udp_frame(mac(1), mac(2), (ip, [10, 0, 0, 2]), (1000 + i, 53));
            let mut got = Vec::new();
            let mut sink = |p: u32, o: Outputs<'_>| got.extend(o.iter().map(|_| p));
            sw.process(1, [(&f[..], 0u64)], 0, &mut sink);
            assert_eq!(got.len(), 1, "flow {i}: {got:?}");
            if round == 0 {
                port_of.insert(i, got[0]);
                *per_port.entry(got[0]).or_default() += 1;
            } else {
                assert_eq!(port_of[&i], got[0], "flow {i} changed bucket");
            }
            // The reverse direction (from port 4) hashes alike.
            let rev = udp_frame(mac(2), mac(1), ([10, 0, 0, 2], ip), (53, 1000 + i));
            let mut back = Vec::new();
            let mut sink = |p: u32, o: Outputs<'_>| back.extend(o.iter().map(|_| p));
            sw.process(4, [(&rev[..], 0u64)], 0, &mut sink);
            assert_eq!(back, vec![port_of[&i]], "flow {i} reversed");
        }
    }
    let (two, three) = (per_port[&2], per_port[&3]);
    assert_eq!(two + three, usize::from(n));
    // Weights 1:3 over 16 slots (4 and 12): a quarter, give or take.
    assert!((40..=160).contains(&two), "{per_port:?}");
    let r = sw.report();
    assert_eq!(r.packets_received, 4 * u64::from(n));
    assert_eq!(r.packet_recirculations, r.packets_received, "{r:?}");
    assert!((r.avg_datapath_passes_per_packet - 2.0).abs() < 1e-9);
    assert_eq!(sw.exec_stats().recirculated, 4 * u64::from(n));
    // One first-pass megaflow per input port, and at most one second-pass
    // megaflow per input port and slot.
    let m = sw.datapath().megaflow_count();
    assert!((2 + 2..=2 + 2 * 16).contains(&m), "{m} megaflows");
    let dump = sw.datapath().dump_flows(0);
    assert!(
        dump.contains("recirc_id=0,eth,ip,in_port=1,nw_frag=no,")
            && dump.contains("actions:hash(sym_l4(0)),recirc(0x"),
        "{dump}"
    );
    assert!(dump.contains(",dp_hash="), "{dump}");
}

/// The datapath computes the hash translation predicts (OVS's, see
/// `flowpath_flow::ovs_hash`): for `hash(sym_l4)` of the packet as the
/// first pass changed it, for `hash(l4(B))` from the received packet's
/// 5-tuple (its RSS hash) even when the first pass rewrote the
/// addresses. Each packet leaves by the bucket translation's second pass
/// picks with that hash, and the second-pass megaflow names its bits.
#[test]
fn datapath_hash_is_the_one_translation_predicts() {
    use flowpath_flow::extract::extract;
    use flowpath_odp::DpAction;
    use flowpath_ofproto::xlate::xlate;
    // (rules, group, how many buckets the packets reach: one when the
    // first pass makes the hashed fields alike — sym_l4 leaves UDP ports
    // out — which shows the hash is of the changed packet.)
    for (rules, group, buckets) in [
        (
            "in_port=1,actions=group:1",
            "group_id=1,type=select,bucket=output:2,bucket=output:3,bucket=weight:2,output:4",
            3,
        ),
        (
            "in_port=1,actions=mod_nw_src:192.168.9.9,mod_tp_dst:7,group:1",
            "group_id=1,type=select,bucket=output:2,bucket=output:3,bucket=weight:2,output:4",
            1,
        ),
        (
            "in_port=1,actions=mod_nw_src:192.168.9.9,mod_tp_dst:7,group:1",
            "group_id=1,type=select,selection_method=dp_hash,selection_method_param=77,\
             bucket=output:2,bucket=output:3,bucket=weight:2,output:4",
            3,
        ),
    ] {
        let mut t = RuleTables::new(parse_rules(rules, None).unwrap(), &[]);
        t.set_ports(vec![1, 2, 3, 4]);
        t.set_groups(parse_groups(group, None).unwrap()).unwrap();
        let mut sw = switch(rules, group);
        let mut seen = HashMap::<u32, usize>::new();
        for i in 0..300u16 {
            let f = udp_frame(
                [2, 0, 0, 0, 0, 1],
                [2, 0, 0, 0, 0, 2],
                ([10, 0, (i >> 8) as u8, i as u8], [10, 0, 0, 2]),
                (1000 + 7 * i, 53 + i),
            );
            let key = extract(&f, 1);
            let x = xlate(&t, &key, false);
            assert_eq!(x.recirculations.len(), 1, "{rules}: {:?}", x.actions);
            let rc = x.recirculations[0];
            let h = rc.dp_hash.expect("a hash before the recirculation");
            let mut k2 = rc.packet;
            k2.set_recirc_id(rc.id);
            k2.set_dp_hash(flowpath_flow::key::dp_hash_bits(h));
            let x2 = xlate(&t, &k2, false);
            let want: Vec<u32> = x2
                .actions
                .iter()
                .filter_map(|a| match a {
                    DpAction::Output(p) => Some(*p),
                    _ => None,
                })
                .collect();
            let mut got = Vec::new();
            let mut sink = |p: u32, o: Outputs<'_>| got.extend(o.iter().map(|_| p));
            sw.process(1, [(&f[..], 0u64)], 0, &mut sink);
            assert_eq!(got, want, "{rules} / {group}: packet {i}, hash {h:#x}");
            *seen.entry(got[0]).or_default() += 1;
        }
        assert_eq!(seen.len(), buckets, "{rules}: {seen:?}");
    }
}

/// A translation that recirculates on every pass (pop_mpls, then a table
/// lookup that pushes and pops again) stops at OVS's depth: the packet is
/// dropped after MAX_RECIRC_DEPTH recirculations, counted.
#[test]
fn recirculation_stops_at_the_depth_limit() {
    let mut sw = switch(
        "table=0,mpls,actions=pop_mpls:0x0800,resubmit(,1)\n\
         table=1,ip,actions=push_mpls:0x8847,pop_mpls:0x0800,resubmit(,1)",
        "",
    );
    let mut f = udp_frame(
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2],
        ([10, 0, 0, 1], [10, 0, 0, 2]),
        (1, 2),
    );
    // Label 16, bottom of stack, TTL 64, behind the Ethernet header.
    f.splice(12..14, [0x88, 0x47, 0x00, 0x01, 0x01, 0x40]);
    assert_eq!(&f[12..18], &[0x88, 0x47, 0x00, 0x01, 0x01, 0x40]);
    let mut got = 0;
    let mut sink = |_: u32, o: Outputs<'_>| got += o.len();
    sw.process(1, [(&f[..], 0u64)], 0, &mut sink);
    assert_eq!(got, 0);
    let e = sw.exec_stats();
    assert_eq!(e.recirculated, u64::from(MAX_RECIRC_DEPTH), "{e:?}");
    assert_eq!(e.recirc_too_deep, 1, "{e:?}");
    let r = sw.report();
    assert_eq!(r.packets_received, 1);
    assert_eq!(r.packet_recirculations, u64::from(MAX_RECIRC_DEPTH));
}

/// Groups whose buckets each recirculate multiply a batch; the packets
/// waiting for their next pass are bounded (MAX_RECIRC_PENDING), the rest
/// dropped and counted, and everything kept is still output once.
#[test]
fn recirculated_packets_waiting_are_bounded() {
    use flowpath_datapath::execute::MAX_RECIRC_PENDING;
    let buckets = vec!["bucket=group:2"; 40].join(",");
    let mut sw = switch(
        "in_port=1,actions=group:1",
        &format!(
            "group_id=1,type=all,{buckets}\ngroup_id=2,type=select,bucket=output:2,bucket=output:3"
        ),
    );
    let frames: Vec<Vec<u8>> = (0..32u16)
        .map(|i| {
            udp_frame(
                [2, 0, 0, 0, 0, 1],
                [2, 0, 0, 0, 0, 2],
                ([10, 0, 0, 1], [10, 0, 0, 2]),
                (1000 + i, 53),
            )
        })
        .collect();
    let mut got = 0usize;
    let mut sink = |_: u32, o: Outputs<'_>| got += o.len();
    sw.process(1, frames.iter().map(|f| (&f[..], 0u64)), 0, &mut sink);
    let e = sw.exec_stats();
    assert_eq!(e.recirculated as usize, MAX_RECIRC_PENDING, "{e:?}");
    assert_eq!(e.recirc_overflow as usize, 32 * 40 - MAX_RECIRC_PENDING);
    assert_eq!(got, MAX_RECIRC_PENDING);
}
