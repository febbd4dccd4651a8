//! Conjunctive matches, on a table whose answers were taken from OVS 3.1's
//! `ofproto/trace` (tools/ovs-sandbox.sh): megaflows and actions of twelve
//! packets, including a flow hidden behind a conjunctive flow with the same
//! match (OVS's classifier falls back to it when no conjunction completes).
//! Random rule sets are compared with OVS in `ovs_golden.rs` (recorded with
//! `tools/ovs-compare.py --conj`) and with the linear-scan reference in the
//! megaflow-invariant property test.

use flowpath_odp::format_actions;
use flowpath_ofproto::classifier::DEFAULT_PREFIXES;
use flowpath_ofproto::parse::{parse_match, parse_rules};
use flowpath_ofproto::tables::RuleTables;
use flowpath_ofproto::xlate::xlate;

const RULES: &str = "conj_id=1,actions=output:3
priority=100,ip,ip_src=10.0.0.1,actions=conjunction(1,1/2)
priority=100,ip,ip_src=10.0.0.4,actions=conjunction(1,1/2)
priority=100,ip,ip_src=10.0.0.6,actions=conjunction(1,1/2)
priority=100,ip,ip_src=10.0.0.7,actions=conjunction(1,1/2)
priority=100,ip,ip_dst=10.0.0.2,actions=conjunction(1,2/2)
priority=100,ip,ip_dst=10.0.0.5,actions=conjunction(1,2/2)
priority=100,ip,ip_dst=10.0.0.6,actions=conjunction(1,2/2)
priority=100,ip,ip_dst=10.0.0.7,actions=conjunction(1,2/2)
priority=51,ip,ip_dst=10.0.0.7,actions=output:4
priority=0,actions=drop";

/// (source, destination last octets, OVS's megaflow source part, actions).
const OVS: &[(u8, u8, &str, &str)] = &[
    (1, 2, "10.0.0.1", "3"),
    (1, 3, "10.0.0.1", "drop"),
    (1, 7, "10.0.0.1", "3"),
    (2, 2, "10.0.0.2/31", "drop"),
    (2, 3, "10.0.0.2/31", "drop"),
    (2, 7, "10.0.0.2/31", "4"),
    (4, 2, "10.0.0.4", "3"),
    (4, 3, "10.0.0.4", "drop"),
    (4, 7, "10.0.0.4", "3"),
    (7, 2, "10.0.0.7", "3"),
    (7, 3, "10.0.0.7", "drop"),
    (7, 7, "10.0.0.7", "3"),
];

#[test]
fn single_conjunctive_match_as_ovs_3_1() {
    let mut t = RuleTables::new(parse_rules(RULES, None).unwrap(), DEFAULT_PREFIXES);
    t.set_ports(vec![1, 2, 3, 4]);
    for &(s, d, mf_src, actions) in OVS {
        let p = format!("in_port=1,ip,nw_src=10.0.0.{s},nw_dst=10.0.0.{d}");
        let key = parse_match(&p).unwrap().key;
        let x = xlate(&t, &key, false);
        assert_eq!(format_actions(&x.actions), actions, "{p}");
        assert_eq!(
            x.megaflow_text(&key),
            format!("recirc_id=0,eth,ip,in_port=1,nw_src={mf_src},nw_dst=10.0.0.{d},nw_frag=no"),
            "{p}"
        );
    }
}

#[test]
fn conjunction_syntax_as_ovs_ofctl() {
    for (bad, needle) in [
        (
            "ip,actions=conjunction(1,1/2),output:1",
            "not any other kind of action (such as the \"output\" action used here)",
        ),
        ("ip,actions=conjunction(1,1/1)", "at least 2 clauses"),
        (
            "ip,actions=conjunction(1,3/2)",
            "less than or equal to number of clauses",
        ),
        ("ip,actions=conjunction(1,0/2)", "must be positive"),
        ("ip,actions=conjunction(1,1/65)", "at most 64 clauses"),
        ("conj_id=0x5/0xf,actions=drop", "mask"),
    ] {
        let e = parse_rules(bad, None).unwrap_err().to_string();
        assert!(e.contains(needle), "{bad}: {e}");
    }
    let r = parse_rules(
        "conj_id=5,ip,actions=conjunction(2,1/2),conjunction(3,2/2)",
        None,
    )
    .unwrap();
    assert_eq!(
        r[0].to_string(),
        "priority=32768,conj_id=5,ip actions=conjunction(2,1/2),conjunction(3,2/2)"
    );
}
