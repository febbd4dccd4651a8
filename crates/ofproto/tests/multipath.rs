//! `multipath` and `bundle_load`: flowpath hashes with its own function
//! (OVS's link numbers differ, said in the README), so these check the
//! properties instead: every link used, the same link both ways for the
//! symmetric field sets, the hashed fields exact in the megaflow, the
//! value stored where the action says; `bundle_load`'s `active_backup` and
//! one-link `multipath` are compared with OVS 3.1 in `ovs_golden.rs`.

use flowpath_odp::format_actions;
use flowpath_ofproto::parse::{parse_match, parse_rules};
use flowpath_ofproto::tables::RuleTables;
use flowpath_ofproto::xlate::xlate;
use std::collections::BTreeSet;

fn tables(rules: &str) -> RuleTables {
    let mut t = RuleTables::new(parse_rules(rules, None).unwrap(), &[]);
    t.set_ports(vec![1, 2, 3, 4]);
    t
}

#[test]
fn multipath_spreads_symmetrically_over_the_links() {
    for alg in ["modulo_n", "hash_threshold", "hrw", "iter_hash"] {
        let t = tables(&format!(
            "table=0,actions=multipath(symmetric_l4,7,{alg},3,4,NXM_NX_REG1[4..5]),resubmit(,1)\n\
             table=1,reg1=0x00/0x30,actions=output:1\n\
             table=1,reg1=0x10/0x30,actions=output:2\n\
             table=1,reg1=0x20/0x30,actions=output:3\n\
             table=1,reg1=0x30/0x30,actions=output:4"
        ));
        let mut seen = BTreeSet::new();
        for i in 0..300u32 {
            let fwd = format!(
                "in_port=9,tcp,nw_src=10.0.0.{},nw_dst=10.0.1.1,tp_src={},tp_dst=80",
                i % 200,
                2000 + i
            );
            let rev = format!(
                "in_port=9,tcp,nw_src=10.0.1.1,nw_dst=10.0.0.{},tp_src=80,tp_dst={}",
                i % 200,
                2000 + i
            );
            let k = parse_match(&fwd).unwrap().key;
            let a = xlate(&t, &k, false);
            let b = xlate(&t, &parse_match(&rev).unwrap().key, false);
            assert_eq!(a.actions, b.actions, "{alg}: both directions, one link");
            let out = format_actions(&a.actions);
            assert_ne!(out, "4", "{alg}: link 3 of 3 links");
            seen.insert(out);
            let mf = a.megaflow_text(&k);
            for f in ["nw_src=", "nw_dst=", "tp_src=", "tp_dst="] {
                assert!(mf.contains(f), "{alg}: {mf} lacks {f}");
            }
        }
        assert_eq!(seen.len(), 3, "{alg}: every link used: {seen:?}");
    }
}

#[test]
fn bundle_load_stores_the_member_or_none() {
    let t = tables(
        "table=0,priority=1,actions=bundle_load(eth_src,0,active_backup,ofport,NXM_NX_REG0[],members:7,3,2),resubmit(,1)\n\
         table=0,priority=9,in_port=4,actions=bundle_load(eth_src,0,hrw,ofport,NXM_NX_REG0[],members:8,9),resubmit(,1)\n\
         table=1,reg0=3,actions=output:3\n\
         table=1,reg0=0xffff,actions=output:2",
    );
    let run = |p: &str| format_actions(&xlate(&t, &parse_match(p).unwrap().key, false).actions);
    // 7 is not on the bridge: the first live member is 3.
    assert_eq!(run("in_port=1,ip"), "3");
    // No live member: OFPP_NONE.
    assert_eq!(run("in_port=4,ip"), "2");
}

#[test]
fn syntax_as_ovs_ofctl() {
    for (bad, needle) in [
        (
            "actions=multipath(symmetric_l4,0,hrw,300,0,NXM_NX_REG0[0..7])",
            "8-bit destination field has 256 possible values, less than specified n_links 300",
        ),
        ("actions=multipath(symmetric_l4,0,hrw,0,0,NXM_NX_REG0[])", "not in valid range 1 to 65536"),
        ("actions=multipath(symmetric_l4,0,best,2,0,NXM_NX_REG0[])", "not a multipath algorithm"),
        ("actions=multipath(ip_ttl,0,hrw,2,0,NXM_NX_REG0[])", "not a field set"),
        (
            "actions=bundle_load(eth_src,0,active_backup,ofport,NXM_NX_REG0[0..7],members:2,3)",
            "at least 16 bits",
        ),
        (
            "ip,actions=write_actions(bundle_load(eth_src,0,active_backup,ofport,NXM_NX_REG0[],members:2),output:1)",
            "disallowed action in action set",
        ),
    ] {
        let e = parse_rules(bad, None).unwrap_err().to_string();
        assert!(e.contains(needle), "{bad}: {e}");
    }
    let r = parse_rules(
        "actions=multipath(symmetric_l3l4+udp,1024,iter_hash,5,4,NXM_NX_REG0[0..2]),bundle_load(nw_dst,3,hrw,ofport,NXM_NX_REG1[],members:1,2)",
        None,
    )
    .unwrap();
    assert_eq!(
        r[0].to_string(),
        "priority=32768 actions=multipath(symmetric_l3l4+udp,1024,iter_hash,5,4,NXM_NX_REG0[0..2]),bundle_load(nw_dst,3,hrw,ofport,NXM_NX_REG1[],members:1,2)"
    );
}
