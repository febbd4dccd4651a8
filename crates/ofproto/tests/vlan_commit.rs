//! A tag the actions rebuild that equals the packet's own: no VLAN action
//! is needed, but only because the packet's whole tag (PCP included) is
//! what it is, so the megaflow must match all of it.
//!
//! OVS 3.1 gets this wrong: for `dl_vlan=3,actions=strip_vlan,NORMAL` on
//! an access port of VLAN 3 flooding to trunks, `ofproto/trace` of a
//! PCP-0 packet gives no VLAN action and a megaflow with `dl_vlan=3` but
//! no PCP, while a PCP-5 packet needs `pop_vlan,push_vlan(vid=3,pcp=0)`
//! (checked with tools/ovs-sandbox.sh). flowpath's megaflow for the PCP-0
//! packet has `dl_vlan_pcp=0`: narrower than OVS's, and correct.

use flowpath_odp::format_actions;
use flowpath_ofproto::normal::{MacTable, NormalEnv, PortVlans, VlanMode};
use flowpath_ofproto::parse::{parse_match, parse_rules};
use flowpath_ofproto::tables::RuleTables;
use flowpath_ofproto::xlate::{xlate, xlate_with, Xlate};

fn tables(rules: &str) -> RuleTables {
    let mut t = RuleTables::new(parse_rules(rules, None).unwrap(), &[]);
    t.set_ports(vec![1, 2, 3, 4]);
    t
}

/// Both packets' translations, and that the first's megaflow does not
/// admit the second.
fn check(run: impl Fn(&str) -> Xlate, pcp0: &str, pcp5: &str) {
    let (k0, k5) = (
        parse_match(pcp0).unwrap().key,
        parse_match(pcp5).unwrap().key,
    );
    let (a, b) = (run(pcp0), run(pcp5));
    assert_ne!(
        format_actions(&a.actions),
        format_actions(&b.actions),
        "the PCP matters here"
    );
    assert!(
        !k5.eq_masked(&k0, &a.megaflow),
        "megaflow {} admits the PCP-5 packet",
        a.megaflow_text(&k0)
    );
    assert!(a.megaflow_text(&k0).contains("dl_vlan_pcp=0"));
}

#[test]
fn normal_rebuilding_the_packets_tag() {
    let t = tables("priority=0,actions=NORMAL\npriority=747,dl_vlan=3,actions=strip_vlan,NORMAL");
    let mut vlans = PortVlans::default();
    vlans.set(1, VlanMode::Access(3));
    vlans.set(4, VlanMode::Access(2));
    let run = |p: &str| {
        let mut macs = MacTable::default();
        let env = NormalEnv {
            vlans: &vlans,
            macs: &mut macs,
            now_ms: 0,
            learn: false,
            local: true,
        };
        xlate_with(&t, &parse_match(p).unwrap().key, false, false, Some(env))
    };
    let p = "in_port=1,dl_src=50:54:00:00:00:01,dl_dst=01:00:5e:00:00:01,ipv6,dl_vlan=3";
    check(
        run,
        &format!("{p},dl_vlan_pcp=0"),
        &format!("{p},dl_vlan_pcp=5"),
    );
}

#[test]
fn push_and_set_rebuilding_the_packets_tag() {
    let t = tables("dl_vlan=3,actions=strip_vlan,push_vlan:0x8100,mod_vlan_vid:3,output:2");
    let run = |p: &str| xlate(&t, &parse_match(p).unwrap().key, false);
    check(
        run,
        "in_port=1,ip,dl_vlan=3,dl_vlan_pcp=0",
        "in_port=1,ip,dl_vlan=3,dl_vlan_pcp=5",
    );
}

/// Loading the CFI bit into an untagged packet's TCI makes an 802.1Q tag
/// (OVS 3.1: `push_vlan(vid=0,pcp=0),2`).
#[test]
fn loading_the_cfi_bit_pushes_an_8021q_tag() {
    let t = tables("ip,actions=load:0x1->NXM_OF_VLAN_TCI[12],output:2");
    let x = xlate(&t, &parse_match("in_port=1,ip").unwrap().key, false);
    assert_eq!(format_actions(&x.actions), "push_vlan(vid=0,pcp=0),2");
}
