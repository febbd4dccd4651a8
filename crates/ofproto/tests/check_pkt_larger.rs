//! `check_pkt_larger(N)->BIT`: translation as OVS 3.1 does it for a
//! datapath with `check_pkt_len`, on hand-made cases whose expected
//! `Megaflow:` and `Datapath actions:` lines are what OVS 3.1's
//! `ofproto/trace` printed for them (bridge with ports 1-4,
//! `fail-mode=secure`); the random comparison is in `ovs_golden.rs`
//! (`ovs31-cpl-traces.jsonl`).

use flowpath_odp::format_actions;
use flowpath_ofproto::parse::{parse_match, parse_packet, parse_rules};
use flowpath_ofproto::tables::RuleTables;
use flowpath_ofproto::xlate::xlate;

fn check(rules: &str, cases: &[(&str, &str, &str)]) {
    let mut t = RuleTables::new(parse_rules(rules, None).unwrap(), &[]);
    t.set_ports(vec![1, 2, 3, 4]);
    for (pkt, megaflow, actions) in cases {
        let key = parse_packet(pkt).unwrap();
        let x = xlate(&t, &key, true);
        assert_eq!(
            (
                x.megaflow_text(&key).as_str(),
                format_actions(&x.actions).as_str()
            ),
            (*megaflow, *actions),
            "{pkt}\n{}",
            x.trace
        );
    }
}

const TCP: &str = "tcp,nw_src=1.1.1.1,nw_dst=2.2.2.2,tp_dst=80";

#[test]
fn the_rest_of_the_list_runs_in_both_branches() {
    check(
        "table=0,priority=10,in_port=1,ip actions=mod_nw_dst:9.9.9.9,check_pkt_larger(200)->reg0[0],resubmit(,1),output:4\n\
         table=0,priority=5,in_port=2 actions=resubmit(,2),output:4\n\
         table=1,priority=10,reg0=0x1/0x1,tcp actions=output:2\n\
         table=1,priority=5,reg0=0/0x1 actions=output:3\n\
         table=1,priority=1 actions=drop\n\
         table=2,priority=10 actions=check_pkt_larger(100)->NXM_NX_REG1[5],output:3",
        &[
            (
                &format!("in_port=1,{TCP}"),
                "recirc_id=0,eth,tcp,in_port=1,nw_dst=2.2.2.2,nw_frag=no",
                "set(ipv4(dst=9.9.9.9)),check_pkt_len(size=200,gt(2,4),le(3,4))",
            ),
            // The check ends its own list only: the resubmitting rule's
            // output:4 follows.
            (
                &format!("in_port=2,{TCP}"),
                "recirc_id=0,eth,ip,in_port=2,nw_frag=no",
                "check_pkt_len(size=100,gt(3),le(3)),4",
            ),
        ],
    );
}

#[test]
fn each_branch_runs_the_action_set_and_the_first_empties_it() {
    check(
        "table=0,priority=10,in_port=1 actions=resubmit(,1),output:2,write_actions(output:4)\n\
         table=0,priority=10,in_port=2 actions=write_actions(output:4),goto_table:1\n\
         table=0,priority=10,in_port=3 actions=check_pkt_larger(100)->reg0[0],resubmit(,2),write_actions(output:4)\n\
         table=0,priority=10,in_port=4 actions=resubmit(,5),output:1\n\
         table=1,priority=10 actions=check_pkt_larger(100)->reg0[0],resubmit(,2),output:3\n\
         table=2,priority=10,reg0=1/1 actions=output:1\n\
         table=2,priority=5 actions=write_actions(output:2)\n\
         table=5,priority=5 actions=goto_table:6\n\
         table=6,priority=5 actions=check_pkt_larger(100)->reg0[0],resubmit(,2),output:3",
        &[
            (
                &format!("in_port=1,{TCP}"),
                "recirc_id=0,eth,ip,in_port=1,nw_frag=no",
                "check_pkt_len(size=100,gt(3),le(3,2)),2,4",
            ),
            (
                &format!("in_port=2,{TCP}"),
                "recirc_id=0,eth,ip,in_port=2,nw_frag=no",
                "check_pkt_len(size=100,gt(1,3,4),le(3)),4",
            ),
            (
                &format!("in_port=3,{TCP}"),
                "recirc_id=0,eth,ip,in_port=3,nw_frag=no",
                "check_pkt_len(size=100,gt(1,4),le(4))",
            ),
            (
                &format!("in_port=4,{TCP}"),
                "recirc_id=0,eth,ip,in_port=4,nw_frag=no",
                "check_pkt_len(size=100,gt(1,3),le(3,2)),1",
            ),
        ],
    );
}

#[test]
fn nested_checks_empty_branches_and_pending_changes() {
    check(
        "table=0,priority=10,in_port=1 actions=check_pkt_larger(100)->reg0[0]\n\
         table=0,priority=10,in_port=2 actions=check_pkt_larger(100)->reg0[0],check_pkt_larger(300)->reg0[1],resubmit(,1)\n\
         table=0,priority=10,in_port=3 actions=push_vlan:0x8100,check_pkt_larger(64)->reg0[0],output:1,pop_vlan,output:2\n\
         table=1,priority=10,reg0=1/1 actions=output:1\n\
         table=1,priority=10,reg0=2/2 actions=output:3\n\
         table=1,priority=5,tcp actions=mod_tp_dst:99,output:4",
        &[
            (
                &format!("in_port=1,{TCP}"),
                "recirc_id=0,eth,ip,in_port=1,nw_frag=no",
                "check_pkt_len(size=100,gt(drop),le(drop))",
            ),
            (
                &format!("in_port=2,{TCP}"),
                "recirc_id=0,eth,tcp,in_port=2,nw_frag=no,tp_dst=80",
                "check_pkt_len(size=100,gt(check_pkt_len(size=300,gt(1),le(1))),\
                 le(check_pkt_len(size=300,gt(3),le(set(tcp(dst=99)),4))))",
            ),
            (
                &format!("in_port=3,{TCP}"),
                "recirc_id=0,eth,ip,in_port=3,nw_frag=no",
                "push_vlan(vid=0,pcp=0),check_pkt_len(size=64,gt(1,pop_vlan,2),le(1,pop_vlan,2))",
            ),
        ],
    );
}

/// OVS's own "ofproto-dpif - check_pkt_larger action" test
/// (tests/ofproto-dpif.at, transcribed in `ovs-at-megaflow.jsonl`): its
/// steps that need nothing flowpath lacks (the others use `clone`, `ct`,
/// controller continuations and a datapath-feature toggle).
#[test]
fn ovs_check_pkt_larger_action_test() {
    let pkt = "in_port(1),eth(src=50:54:00:00:00:09,dst=50:54:00:00:00:0a),eth_type(0x0800),\
               ipv4(src=10.10.10.2,dst=10.10.10.1,proto=1,tos=1,ttl=128,frag=no),icmp(type=8,code=0)";
    let any = "recirc_id=0,eth,ip,in_port=1,nw_frag=no";
    let steps: [(&str, &str); 4] = [
        (
            "table=0,in_port=1 actions=check_pkt_larger(200)->NXM_NX_REG0[0],resubmit(,1)\n\
             table=1,in_port=1,reg0=0x1/0x1 actions=output:2,resubmit(,2)\n\
             table=1,in_port=1,actions=output:3,resubmit(,2)\n\
             table=2,in_port=1,actions=mod_dl_dst:82:82:82:82:82:82,output:4",
            "check_pkt_len(size=200,gt(2,set(eth(dst=82:82:82:82:82:82)),4),le(3,set(eth(dst=82:82:82:82:82:82)),4))",
        ),
        (
            "table=0,in_port=1 actions=check_pkt_larger(200)->NXM_NX_REG0[0],resubmit(,1)\n\
             table=1,in_port=1,priority=200,reg0=0x1/0x1 actions=output:2",
            "check_pkt_len(size=200,gt(2),le(drop))",
        ),
        (
            "table=0,in_port=1 actions=check_pkt_larger(200)->NXM_NX_REG0[0]",
            "check_pkt_len(size=200,gt(drop),le(drop))",
        ),
        (
            "table=0,in_port=1 actions=load:0x1->NXM_NX_REG1[],resubmit(,1),load:0x2->NXM_NX_REG1[],resubmit(,1),load:0x3->NXM_NX_REG1[],resubmit(,1)\n\
             table=1,in_port=1,reg1=0x1 actions=check_pkt_larger(200)->NXM_NX_REG0[0],resubmit(,4)\n\
             table=1,in_port=1,reg1=0x2 actions=output:2\n\
             table=1,in_port=1,reg1=0x3 actions=output:4\n\
             table=4,in_port=1 actions=output:3",
            "check_pkt_len(size=200,gt(3),le(3)),2,4",
        ),
    ];
    for (rules, actions) in steps {
        let t = RuleTables::new(parse_rules(rules, None).unwrap(), &[]);
        let key = parse_packet(pkt).unwrap();
        let x = xlate(&t, &key, false);
        assert_eq!(format_actions(&x.actions), actions, "{rules}");
    }
    // The last step's megaflow, as the test gives it.
    check(steps[3].0, &[(pkt, any, steps[3].1)]);
}

#[test]
fn parses_prints_and_refuses_as_ovs_ofctl() {
    let r = parse_rules("actions=check_pkt_larger(1500)->reg0[0],output:1", None).unwrap();
    assert_eq!(
        flowpath_ofproto::action::format_actions(&r[0].actions),
        "check_pkt_larger(1500)->NXM_NX_REG0[0],output:1"
    );
    for (text, msg) in [
        (
            "actions=check_pkt_larger(100)->reg0[0..1]",
            "Only 1-bit destination field is allowed",
        ),
        ("actions=check_pkt_larger(10)", "missing `->'"),
        ("actions=check_pkt_larger(0x10000)->reg0[1]", "0x10000"),
        ("actions=check_pkt_larger(abc)->reg0[1]", "abc"),
        ("actions=check_pkt_larger(100)->eth_src[0]", "register"),
        (
            "actions=write_actions(check_pkt_larger(10)->reg0[0])",
            "disallowed",
        ),
    ] {
        let e = parse_rules(text, None).unwrap_err().to_string();
        assert!(e.contains(msg), "{text}: {e}");
    }
}

/// Nested checks double what follows them: a translation that would grow
/// past the limit is cut short (no actions), not run for ever.
#[test]
fn runaway_nesting_is_cut_short() {
    let checks: Vec<String> = (0..24)
        .map(|i| format!("check_pkt_larger({})->reg0[{i}]", 64 + i))
        .collect();
    let rules = format!("actions={},output:2", checks.join(","));
    let mut t = RuleTables::new(parse_rules(&rules, None).unwrap(), &[]);
    t.set_ports(vec![1, 2]);
    let key = parse_match("in_port=1,tcp").unwrap().key;
    let x = xlate(&t, &key, false);
    assert!(x.error.is_some());
    assert!(x.actions.is_empty());
}

/// Found by the random comparison (not a check_pkt_larger matter): reading
/// only the CFI bit of a present tag makes OVS print it in the megaflow,
/// although a tagged packet's megaflow always matches it.
#[test]
fn a_read_cfi_bit_alone_is_printed_as_ovs_prints_it() {
    let pkt =
        "in_port=3,dl_vlan=2,tcp6,ipv6_src=2001:db8::1,ipv6_dst=2001:db8::9,nw_ttl=64,tp_dst=90";
    check(
        "table=0,priority=41358,ipv6,actions=move:NXM_OF_VLAN_TCI[12]->OXM_OF_METADATA[10],goto_table:1\n\
         table=1,priority=1,actions=output:2",
        &[(
            pkt,
            "recirc_id=0,eth,ipv6,in_port=3,vlan_tci=0x1000/0x1000,nw_frag=no",
            "2",
        )],
    );
    // Not read: not printed.
    check(
        "table=0,ipv6,actions=output:2",
        &[(pkt, "recirc_id=0,eth,ipv6,in_port=3,nw_frag=no", "2")],
    );
}
