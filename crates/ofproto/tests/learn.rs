//! `learn(...)`: syntax, printing and the flows it makes, against what
//! OVS 3.1 printed (`ovs-ofctl dump-flows` after `ofproto/trace
//! -generate`, tools/ovs-sandbox.sh). Its megaflows are in the golden
//! traces (`ovs_golden.rs`, `--regs`), learning on a live datapath in
//! the datapath's and the switch's tests.

use flowpath_odp::format_actions;
use flowpath_ofproto::parse::{parse_match, parse_rules};
use flowpath_ofproto::tables::RuleTables;
use flowpath_ofproto::xlate::{xlate, xlate_on, XlateMode};

const RULE: &str = "table=0,actions=learn(table=1,hard_timeout=60,priority=100,NXM_OF_VLAN_TCI[0..11],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],load:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..15]),resubmit(,1)\n\
table=1,priority=0,actions=output:4";

const PACKET: &str =
    "in_port=1,dl_src=50:54:00:00:00:05,dl_dst=50:54:00:00:00:07,ip,nw_src=1.1.1.1";

#[test]
fn prints_and_learns_as_ovs_3_1() {
    let rules = parse_rules(RULE, None).unwrap();
    assert_eq!(
        rules[0].to_string(),
        "priority=32768 actions=learn(table=1,hard_timeout=60,priority=100,NXM_OF_VLAN_TCI[0..11],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],load:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..15]),resubmit(,1)"
    );
    let mut t = RuleTables::new(rules, &[]);
    t.set_ports(vec![1, 2, 3, 4]);
    let key = parse_match(PACKET).unwrap().key;
    // A trace: no side effect, the sources significant (OVS's megaflow).
    let x = xlate(&t, &key, false);
    assert!(x.learned.is_empty());
    assert_eq!(
        x.megaflow_text(&key),
        "recirc_id=0,eth,ip,in_port=1,dl_src=50:54:00:00:00:05,nw_frag=no"
    );
    assert_eq!(format_actions(&x.actions), "4");
    // An upcall: the flow OVS's dump-flows then shows.
    let mode = XlateMode {
        learn: true,
        ..XlateMode::default()
    };
    let x = xlate_on(&t, None, &key, 0, mode);
    assert_eq!(x.learned.len(), 1);
    assert_eq!(
        x.learned[0].to_string(),
        "table=1, hard_timeout=60, priority=100,vlan_tci=0x0000/0x0fff,dl_dst=50:54:00:00:00:05 actions=load:0x1->NXM_NX_REG0[0..15]"
    );
    // Added to the tables, it carries the reply.
    let t2 = t.with_added(&x.learned);
    let reply = parse_match("in_port=2,dl_src=50:54:00:00:00:07,dl_dst=50:54:00:00:00:05,ip")
        .unwrap()
        .key;
    let y = xlate(&t2, &reply, true);
    assert!(
        y.trace.contains("dl_dst=50:54:00:00:00:05, priority 100"),
        "{}",
        y.trace
    );
}

#[test]
fn errors_as_ovs_ofctl() {
    for (bad, needle) in [
        // The learned match must pin its fields' prerequisites.
        (
            "tcp,actions=learn(table=1,NXM_OF_TCP_SRC[])",
            "lacks correct prerequisites",
        ),
        // What it reads must exist where the rule applies.
        (
            "actions=learn(table=2,dl_type=0x800,NXM_NX_IP_TTL[])",
            "nw_ttl requires ip",
        ),
        (
            "actions=learn(table=1,NXM_NX_REG0[0..7]=NXM_OF_ETH_SRC[])",
            "8 bits wide",
        ),
        (
            "actions=learn(table=1,result_dst=reg0[3..4],NXM_OF_ETH_SRC[])",
            "single bit",
        ),
        (
            "actions=learn(table=1,load:NXM_OF_ETH_SRC[]->NXM_OF_ETH_TYPE[])",
            "not writable",
        ),
        (
            "actions=learn(table=1,frobnicate)",
            "unknown field or keyword",
        ),
    ] {
        let e = parse_rules(bad, None).unwrap_err().to_string();
        assert!(e.contains(needle), "{bad}: {e}");
    }
    // Accepted (as ovs-ofctl accepts it): the learned match pins ip.
    parse_rules(
        "ip,actions=learn(table=2,dl_type=0x800,NXM_NX_IP_TTL[],output:NXM_OF_IN_PORT[])",
        None,
    )
    .unwrap();
}

/// `limit=` and `result_dst=`, packet after packet with side effects, as
/// OVS 3.1's `ofproto/trace -generate` answered for these rules and
/// packets (tools/ovs-sandbox.sh): the existing cookie-5 flow of table 1
/// counts towards the limit of 2, so one flow is learned; a flow already
/// there is refreshed (success); the bit says which. Without side effects
/// (a plain trace) the action is ignored and the bit stays 0, as OVS.
#[test]
fn limit_and_result_dst_as_ovs_3_1() {
    let text = "table=0,in_port=1,actions=learn(table=1,limit=2,cookie=0x5,result_dst=reg0[0],priority=10,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[]),resubmit(,2)\n\
table=0,in_port=2,actions=learn(table=1,result_dst=reg0[1],priority=10,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[]),resubmit(,2)\n\
table=1,cookie=0x5,priority=1,dl_dst=00:00:00:00:00:99,actions=drop\n\
table=2,priority=5,reg0=0x1/0x1,actions=output:3\n\
table=2,priority=5,reg0=0x2/0x2,actions=output:1\n\
table=2,priority=0,actions=output:4";
    let base = parse_rules(text, None).unwrap();
    assert!(base[0]
        .to_string()
        .contains("learn(table=1,priority=10,cookie=0x5,limit=2,result_dst=NXM_NX_REG0[0],"));
    let mut learned: Vec<flowpath_ofproto::rule::Rule> = Vec::new();
    let mut actions = Vec::new();
    for src in [1, 2, 3, 1, 4] {
        let mut t = RuleTables::new(base.iter().chain(&learned).cloned().collect(), &[]);
        t.set_ports(vec![1, 2, 3, 4]);
        let key = parse_match(&format!("in_port=1,dl_src=00:00:00:00:00:{src:02x}"))
            .unwrap()
            .key;
        let mode = XlateMode {
            learn: true,
            ..XlateMode::default()
        };
        let x = xlate_on(&t, None, &key, 0, mode);
        actions.push(format_actions(&x.actions));
        learned.extend(x.learned);
    }
    assert_eq!(actions, ["3", "4", "4", "3", "4"]);
    // Learned once, refreshed once.
    assert_eq!(learned.len(), 2);
    assert!(learned
        .iter()
        .all(|r| r.to_string().contains("dl_dst=00:00:00:00:00:01")));
    let mut t = RuleTables::new(base, &[]);
    t.set_ports(vec![1, 2, 3, 4]);
    let key = parse_match("in_port=1,dl_src=00:00:00:00:00:07")
        .unwrap()
        .key;
    assert_eq!(format_actions(&xlate(&t, &key, true).actions), "4");
    for bad in [
        "actions=learn(table=1,result_dst=reg0[3..4],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[])",
        "actions=learn(table=1,limit=4294967296,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[])",
        "actions=learn(table=1,result_dst=eth_src[2],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[])",
    ] {
        assert!(parse_rules(bad, None).is_err(), "{bad}");
    }
}
