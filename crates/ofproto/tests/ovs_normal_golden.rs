//! `NORMAL` (MAC learning, 802.1Q access and trunk ports, flooding)
//! against answers recorded from Open vSwitch 3.1.
//!
//! `tests/data/ovs31-normal-traces.jsonl` holds, one JSON object per
//! packet, the rule set (`set` names it; every set is traced from an empty
//! MAC table), the ports' VLAN configuration as `--port-vlan` options, a
//! packet, and the `Megaflow:` and `Datapath actions:` lines of `ovs-appctl
//! ofproto/trace br0 PACKET -generate` (which learns from the packet, as a
//! received one would) on a bridge with ports 1–4 and LOCAL. Recorded with
//! `tools/ovs-compare.py --normal --record` against the OVS of
//! `tools/ovs-sandbox.sh`.
//!
//! Every packet, traced in order with learning, must get the same
//! megaflow and the same datapath actions (same outputs, same order: OVS
//! floods LOCAL first, then by port number, as flowpath does).

use flowpath_ofproto::classifier::DEFAULT_PREFIXES;
use flowpath_ofproto::normal::{parse_vlan_mode, MacTable, NormalEnv, PortVlans};
use flowpath_ofproto::odp::format_actions;
use flowpath_ofproto::parse::{parse_packet, parse_rules};
use flowpath_ofproto::tables::RuleTables;
use flowpath_ofproto::xlate::xlate_with;

fn strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn normal_traces_match_ovs_3_1() {
    let data = include_str!("data/ovs31-normal-traces.jsonl");
    let mut n = 0;
    let mut sets = 0;
    let mut failures = Vec::new();
    let mut current = String::new();
    let mut tables = RuleTables::new(Vec::new(), DEFAULT_PREFIXES);
    let mut vlans = PortVlans::default();
    let mut macs = MacTable::default();
    for line in data.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let set = v["set"].as_str().unwrap();
        let rules = strings(&v["rules"]).join("\n");
        if set != current {
            current = set.to_string();
            sets += 1;
            tables = RuleTables::new(parse_rules(&rules, None).unwrap(), DEFAULT_PREFIXES);
            tables.set_ports(vec![1, 2, 3, 4]);
            vlans = PortVlans::default();
            let opts = strings(&v["vlans"]);
            for o in opts.iter().filter(|o| *o != "--port-vlan") {
                let (p, mode) = o.split_once('=').unwrap();
                vlans.set(p.parse().unwrap(), parse_vlan_mode(mode).unwrap());
            }
            macs = MacTable::default();
        }
        let pkt = v["packet"].as_str().unwrap();
        let key = parse_packet(pkt).unwrap();
        let env = NormalEnv {
            vlans: &vlans,
            macs: &mut macs,
            now_ms: 0,
            learn: true,
            local: true,
        };
        let x = xlate_with(&tables, &key, false, false, Some(env));
        let actions = format_actions(&x.actions).replace("65534", "LOCAL");
        let ovs_actions = v["actions"].as_str().unwrap().replace("65534", "LOCAL");
        let megaflow = x.megaflow_text(&key);
        if actions != ovs_actions || megaflow != v["megaflow"].as_str().unwrap() {
            failures.push(format!(
                "set {set}\nrules:\n{rules}\nvlans: {:?}\npacket: {pkt}\n ovs: {} / {ovs_actions}\nours: {megaflow} / {actions}",
                v["vlans"], v["megaflow"]
            ));
        }
        n += 1;
    }
    assert!(sets >= 150 && n >= 3000, "only {sets} sets, {n} traces");
    assert!(
        failures.is_empty(),
        "{} of {n} differ:\n{}",
        failures.len(),
        failures
            .iter()
            .take(10)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n\n")
    );
}
