//! `learn(...)`: syntax, printing and the flows it makes, against what
//! OVS 3.1 printed (`ovs-ofctl dump-flows` after `ofproto/trace
//! -generate`, tools/ovs-sandbox.sh). Its megaflows are in the golden
//! traces (`ovs_golden.rs`, `--regs`), learning on a live datapath in
//! the datapath's and the switch's tests.

use flowpath_ofproto::odp::format_actions;
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
            "actions=learn(table=1,limit=10,NXM_OF_ETH_SRC[])",
            "not supported by flowpath",
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
