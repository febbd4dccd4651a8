//! Group semantics that OVS 3.1 cannot be compared with directly (select
//! groups: OVS hashes in the datapath and recirculates) and group-table
//! checks. `all`, `indirect` and `ff` are compared with OVS 3.1 in the
//! golden traces (`ovs_golden.rs`).

use flowpath_ofproto::group::parse_groups;
use flowpath_ofproto::odp::{format_actions, DpAction};
use flowpath_ofproto::parse::{parse_match, parse_rules};
use flowpath_ofproto::tables::RuleTables;
use flowpath_ofproto::xlate::xlate;

fn tables(rules: &str, groups: &str) -> RuleTables {
    let mut t = RuleTables::new(parse_rules(rules, None).unwrap(), &[]);
    t.set_ports(vec![1, 2, 3, 4]);
    t.set_groups(parse_groups(groups, None).unwrap()).unwrap();
    t
}

#[test]
fn select_is_symmetric_weighted_and_exact_on_the_5_tuple() {
    let t = tables(
        "actions=group:1",
        "group_id=1,type=select,bucket=output:2,bucket=output:3,bucket=weight:0,output:4",
    );
    let mut seen = std::collections::BTreeSet::new();
    for i in 0..200u32 {
        let fwd = format!(
            "in_port=1,tcp,nw_src=10.0.0.{},nw_dst=10.0.1.1,tp_src={},tp_dst=80",
            i % 250,
            1000 + i
        );
        let rev = format!(
            "in_port=1,tcp,nw_src=10.0.1.1,nw_dst=10.0.0.{},tp_src=80,tp_dst={}",
            i % 250,
            1000 + i
        );
        let a = xlate(&t, &parse_match(&fwd).unwrap().key, false);
        let b = xlate(&t, &parse_match(&rev).unwrap().key, false);
        assert_eq!(a.actions, b.actions, "both directions take one bucket");
        assert_eq!(a.actions.len(), 1);
        assert_ne!(
            a.actions[0],
            DpAction::Output(4),
            "weight 0 is never chosen"
        );
        seen.insert(format_actions(&a.actions));
        let mf = a.megaflow_text(&parse_match(&fwd).unwrap().key);
        assert!(
            mf.contains("nw_src=")
                && mf.contains("nw_dst=")
                && mf.contains("tp_src=")
                && mf.contains("tp_dst="),
            "{mf}"
        );
    }
    assert_eq!(seen.len(), 2, "both weighted buckets are used: {seen:?}");
    // With fields(...), only those fields count and become exact.
    let t = tables(
        "actions=group:1",
        "group_id=1,type=select,selection_method=hash,fields(ip_dst),bucket=output:2,bucket=output:3",
    );
    let k = parse_match("in_port=1,tcp,nw_src=1.1.1.1,nw_dst=2.2.2.2,tp_dst=80")
        .unwrap()
        .key;
    let mf = xlate(&t, &k, false).megaflow_text(&k);
    assert_eq!(
        mf,
        "recirc_id=0,eth,tcp,in_port=1,nw_dst=2.2.2.2,nw_frag=no"
    );
}

#[test]
fn fast_failover_watches_the_bridge_ports_and_groups() {
    let t = tables(
        "actions=group:1",
        "group_id=2,type=ff,bucket=watch_port:9,output:9\n\
         group_id=1,type=ff,bucket=watch_port:7,output:1,bucket=watch_group:2,output:2,bucket=watch_port:3,output:3",
    );
    let k = parse_match("in_port=4,ip").unwrap().key;
    // Port 7 is not a bridge port, group 2 has no live bucket: port 3.
    assert_eq!(format_actions(&xlate(&t, &k, false).actions), "3");
}

#[test]
fn missing_groups_are_refused_naming_the_rule() {
    let mut t = RuleTables::new(
        parse_rules("ip actions=drop\nactions=group:5", None).unwrap(),
        &[],
    );
    let e = t.set_groups(Vec::new()).unwrap_err();
    assert_eq!(e, "line 2: group:5: no such group");
    let e = t
        .set_groups(parse_groups("group_id=5,type=all,bucket=group:6", None).unwrap())
        .unwrap_err();
    assert_eq!(e, "group 5: group:6: no such group");
    // A loop of groups is cut by the resubmit limit, not a hang.
    let mut t = RuleTables::new(parse_rules("actions=group:1", None).unwrap(), &[]);
    t.set_groups(
        parse_groups(
            "group_id=1,type=all,bucket=group:2\ngroup_id=2,type=all,bucket=group:1",
            None,
        )
        .unwrap(),
    )
    .unwrap();
    let x = xlate(&t, &parse_match("in_port=1").unwrap().key, false);
    assert!(x.error.is_some(), "{x:?}");
}
