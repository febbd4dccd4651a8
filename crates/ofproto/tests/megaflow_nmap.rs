//! The two reference points measured with OVS 3.1 itself: an nmap SYN scan
//! from 7.7.7.1 to 7.7.7.101–200 over all 65535 TCP ports installs 17
//! distinct megaflows with `tp_dst=90` dropped, and 119 when a
//! higher-priority `nw_dst=7.7.7.104,tp_dst=90` allow rule sits above the
//! drop. We count distinct megaflows over the full scan, the way the
//! datapath would install them (a packet already covered by an installed
//! megaflow does not reach the slow path).

use flowpath_flow::{FlowKey, FlowMask, Match, Style};
use flowpath_odp::format_actions;
use flowpath_ofproto::classifier::DEFAULT_PREFIXES;
use flowpath_ofproto::parse::{parse_match, parse_rules};
use flowpath_ofproto::tables::RuleTables;
use flowpath_ofproto::xlate::xlate;
use std::collections::HashSet;

/// Runs the scan and returns the installed megaflows (as text) with their
/// actions. Installed megaflows are kept per mask, like dpcls subtables.
fn scan(rules: &str) -> Vec<(String, String)> {
    let tables = RuleTables::new(parse_rules(rules, None).unwrap(), DEFAULT_PREFIXES);
    let base = parse_match("in_port=1,tcp,nw_src=7.7.7.1,tp_src=40000,tcp_flags=0x002")
        .unwrap()
        .key;
    // Most packets hit the megaflow the previous one hit: the last mask
    // hit is probed first (the datapath's order does not change which
    // megaflow covers a packet: installed megaflows never overlap).
    let mut installed: Vec<(FlowMask, HashSet<FlowKey, foldhash::fast::RandomState>)> = Vec::new();
    let mut out = Vec::new();
    for host in 101..=200u32 {
        for port in 1..=65535u16 {
            let mut k = base;
            k.set_nw_dst(0x0707_0700 | host);
            k.set_tp_dst(port);
            if let Some(i) = installed
                .iter()
                .position(|(m, set)| set.contains(&k.masked(m)))
            {
                installed.swap(0, i);
                continue;
            }
            let x = xlate(&tables, &k, false);
            let i = match installed.iter().position(|(m, _)| *m == x.megaflow) {
                Some(i) => i,
                None => {
                    installed.push((x.megaflow, HashSet::default()));
                    installed.len() - 1
                }
            };
            installed[i].1.insert(k.masked(&x.megaflow));
            out.push((
                Match::new(&k, &x.megaflow).format(Style::Megaflow),
                format_actions(&x.actions),
            ));
        }
    }
    out
}

#[test]
fn nmap_scan_port90_drop_gives_17_megaflows() {
    let flows = scan("priority=65535,tcp,tp_dst=90,actions=drop\npriority=0,actions=output:2\n");
    let distinct: HashSet<&String> = flows.iter().map(|(m, _)| m).collect();
    assert_eq!(distinct.len(), 17, "{flows:#?}");
    assert_eq!(flows.len(), 17);
    // The megaflows OVS 3.1's ofproto/trace prints for these packets.
    assert!(flows.contains(&(
        "recirc_id=0,eth,tcp,in_port=1,nw_frag=no,tp_dst=90".to_string(),
        "drop".to_string()
    )));
    assert!(flows.contains(&(
        "recirc_id=0,eth,tcp,in_port=1,nw_frag=no,tp_dst=0x60/0xffe0".to_string(),
        "2".to_string()
    )));
    assert!(flows.contains(&(
        "recirc_id=0,eth,tcp,in_port=1,nw_frag=no,tp_dst=0x8000/0x8000".to_string(),
        "2".to_string()
    )));
}

#[test]
fn nmap_scan_allow_over_drop_gives_119_megaflows() {
    let flows = scan(
        "priority=65535,tcp,nw_dst=7.7.7.104,tp_dst=90,actions=output:2\n\
         priority=65533,tcp,tp_dst=90,actions=drop\n\
         priority=0,actions=output:2\n",
    );
    let distinct: HashSet<&String> = flows.iter().map(|(m, _)| m).collect();
    assert_eq!(distinct.len(), 119);
    let allowed: Vec<_> = flows
        .iter()
        .filter(|(m, _)| m.contains("nw_dst=7.7.7.104,") && m.ends_with("tp_dst=90"))
        .collect();
    assert_eq!(allowed.len(), 1);
    assert_eq!(allowed[0].1, "2");
    let dropped = flows.iter().filter(|(_, a)| a == "drop").count();
    // Every destination class but 7.7.7.104 drops port 90.
    assert_eq!(dropped, 6);
    assert!(
        flows
            .iter()
            .any(|(m, _)| m
                == "recirc_id=0,eth,tcp,in_port=1,nw_dst=7.7.7.96/29,nw_frag=no,tp_dst=90")
    );
}

#[test]
fn no_prefix_tracking_gives_exact_destinations() {
    // With prefix tracking off (OVS: Flow_Table prefixes=none), every
    // destination that reaches the nw_dst=7.7.7.104 subtable un-wildcards
    // all 32 address bits; values checked against OVS 3.1.
    let rules = "priority=65535,tcp,nw_dst=7.7.7.104,tp_dst=90,actions=output:2\n\
                 priority=65533,tcp,tp_dst=90,actions=drop\n\
                 priority=0,actions=output:2\n";
    let tables = RuleTables::new(parse_rules(rules, None).unwrap(), &[]);
    let k = parse_match("in_port=1,tcp,nw_src=7.7.7.1,nw_dst=7.7.7.150,tp_dst=80")
        .unwrap()
        .key;
    let x = xlate(&tables, &k, false);
    assert_eq!(
        x.megaflow_text(&k),
        "recirc_id=0,eth,tcp,in_port=1,nw_dst=7.7.7.150,nw_frag=no,tp_dst=0x50/0xfff8"
    );
    // With the default prefixes (as OVS 3.1 prints for the same packet).
    let tables = RuleTables::new(parse_rules(rules, None).unwrap(), DEFAULT_PREFIXES);
    let x = xlate(&tables, &k, false);
    assert_eq!(
        x.megaflow_text(&k),
        "recirc_id=0,eth,tcp,in_port=1,nw_dst=7.7.7.128/25,nw_frag=no,tp_dst=0x50/0xfff8"
    );
}
