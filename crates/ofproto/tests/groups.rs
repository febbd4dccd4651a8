//! Group semantics beyond the golden traces: select groups (the slow-path
//! hash, OVS's function, and the datapath-hash
//! method with its recirculation and Webster table) and group-table
//! checks. `all`, `indirect` and `ff` are compared with OVS 3.1 in the
//! golden traces (`ovs_golden.rs`).

use flowpath_odp::{format_actions, DpAction};
use flowpath_ofproto::group::{parse_group, parse_groups};
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
        // `hash` without fields: OVS's default slow-path hash.
        "group_id=1,type=select,selection_method=hash,bucket=output:2,bucket=output:3,bucket=weight:0,output:4",
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
    // With fields(...), only those fields count and become exact (OVS
    // 3.1's megaflow: nw_proto stays wildcarded, as nothing hashed needs
    // it).
    let t = tables(
        "actions=group:1",
        "group_id=1,type=select,selection_method=hash,fields(ip_dst),bucket=output:2,bucket=output:3",
    );
    let k = parse_match("in_port=1,tcp,nw_src=1.1.1.1,nw_dst=2.2.2.2,tp_dst=80")
        .unwrap()
        .key;
    let mf = xlate(&t, &k, false).megaflow_text(&k);
    assert_eq!(mf, "recirc_id=0,eth,ip,in_port=1,nw_dst=2.2.2.2,nw_frag=no");
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

/// The datapath-hash method (OVS 3.1's default for select groups): the
/// first translation emits `hash(sym_l4(0)),recirc(ID)` with the group and
/// what follows it frozen; the recirculated packet's translation picks the
/// bucket of slot `dp_hash & mask`, those bits significant in its megaflow,
/// skipping dead buckets to the next live slot; weights are shared out by
/// Webster's method over 16..256 slots, and more than 256 needed falls
/// back to the slow-path hash.
#[test]
fn select_by_datapath_hash_recirculates_and_thaws() {
    let t = tables(
        "in_port=1,actions=group:1,output:4",
        "group_id=1,type=select,bucket=weight:1,output:2,bucket=weight:2,output:3,bucket=weight:0,output:4",
    );
    let pkt = "in_port=1,udp,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src=5,tp_dst=6";
    let k = parse_match(pkt).unwrap().key;
    let x = xlate(&t, &k, false);
    let acts = format_actions(&x.actions);
    let id = match x.actions.as_slice() {
        [DpAction::Hash {
            symmetric: true,
            basis: 0,
        }, DpAction::Recirc(id)] => *id,
        _ => panic!("{acts}"),
    };
    assert_eq!(
        x.megaflow_text(&k),
        "recirc_id=0,eth,ip,in_port=1,nw_frag=no",
        "nothing of the packet is read before the hash"
    );
    // Thawed: every slot of 16 (weights 1:2:0) picks by its hash's low
    // four bits; the frozen output:4 follows the bucket.
    let mut per_bucket = std::collections::BTreeMap::new();
    for h in 1..=16u32 {
        let mut r = k;
        r.set_recirc_id(id);
        r.set_dp_hash(h);
        let y = xlate(&t, &r, false);
        let a = format_actions(&y.actions);
        assert!(a == "2,4" || a == "3,4", "slot {h}: {a}");
        *per_bucket.entry(a.clone()).or_insert(0) += 1;
        let mf = y.megaflow_text(&r);
        // (OVS prints a zero hash as 0, not 0x0.)
        let slot = match h & 0xf {
            0 => "0".to_string(),
            s => format!("{s:#x}"),
        };
        assert_eq!(
            mf,
            format!("recirc_id={id:#x},dp_hash={slot}/0xf,eth,ip,in_port=1,nw_frag=no")
        );
        // Another hash with the same low bits: the same actions.
        r.set_dp_hash(h | 0x7f0);
        assert_eq!(format_actions(&xlate(&t, &r, false).actions), a);
    }
    // Webster: 16 slots for weights 1 and 2 are 5 and 11.
    assert_eq!(per_bucket.get("2,4"), Some(&5), "{per_bucket:?}");
    assert_eq!(per_bucket.get("3,4"), Some(&11), "{per_bucket:?}");
    // An unknown id: the translation fails, as OVS's does.
    let mut r = k;
    r.set_recirc_id(0xfff0);
    r.set_dp_hash(3);
    let y = xlate(&t, &r, false);
    assert!(y.actions.is_empty() && y.error.is_some(), "{y:?}");

    // A dead bucket (watch_port not a bridge port) hands its slots on to
    // the next live slot's bucket.
    let t = tables(
        "in_port=1,actions=group:1",
        "group_id=1,type=select,bucket=watch_port:9,output:2,bucket=output:3",
    );
    let x = xlate(&t, &k, false);
    let Some(DpAction::Recirc(id)) = x.actions.last().copied() else {
        panic!("{:?}", x.actions)
    };
    for h in 1..=16u32 {
        let mut r = k;
        r.set_recirc_id(id);
        r.set_dp_hash(h);
        assert_eq!(format_actions(&xlate(&t, &r, false).actions), "3");
    }

    // selection_method=dp_hash: algorithm and basis from the parameter.
    for (param, want) in [
        ("", "hash(l4(0))"),
        (",selection_method_param=0x100000007", "hash(sym_l4(7))"),
    ] {
        let t = tables(
            "in_port=1,actions=group:1",
            &format!("group_id=1,type=select,selection_method=dp_hash{param},bucket=output:2"),
        );
        let a = format_actions(&xlate(&t, &k, false).actions);
        assert!(a.starts_with(want), "{param}: {a}");
    }
}

#[test]
fn dp_hash_tables_follow_the_weights() {
    let g = |text: &str| parse_group(text).unwrap();
    // Equal weights: slots dealt in turn.
    let t = g("group_id=1,type=select,bucket=output:1,bucket=output:2,bucket=output:3")
        .dp_hash
        .unwrap();
    assert_eq!(t.mask, 15);
    assert_eq!(t.slots[..6], [0, 1, 2, 0, 1, 2]);
    // Every bucket within one slot of its share; the slots are a power of
    // two, at least 16, enough for the smallest weight.
    for weights in [
        vec![1u16, 2],
        vec![3, 5, 7],
        vec![1, 100],
        vec![10, 10, 1, 50],
    ] {
        let text = weights
            .iter()
            .map(|w| format!("bucket=weight:{w},output:1"))
            .collect::<Vec<_>>()
            .join(",");
        let t = g(&format!("group_id=1,type=select,{text}"))
            .dp_hash
            .unwrap();
        let n = f64::from(t.mask + 1);
        let total: f64 = weights.iter().map(|w| f64::from(*w)).sum();
        let min = f64::from(*weights.iter().min().unwrap());
        assert!(n >= 16.0 && n >= total / min, "{weights:?}: {n}");
        for (i, w) in weights.iter().enumerate() {
            let got = t.slots.iter().filter(|s| usize::from(**s) == i).count() as f64;
            let share = n * f64::from(*w) / total;
            assert!(
                (got - share).abs() < 1.0,
                "{weights:?}: bucket {i}: {got} vs {share}"
            );
        }
    }
    // More than 256 slots needed, or no weight at all: the slow path.
    assert!(
        g("group_id=1,type=select,bucket=weight:1,output:1,bucket=weight:300,output:2")
            .dp_hash
            .is_none()
    );
    assert!(g("group_id=1,type=select,bucket=weight:0,output:1")
        .dp_hash
        .is_none());
    assert!(
        g("group_id=1,type=select,selection_method=hash,bucket=output:1")
            .dp_hash
            .is_none()
    );
    // OVS's checks of the method's arguments.
    assert!(parse_group("group_id=1,type=select,fields(ip_src),bucket=output:1").is_err());
    assert!(
        parse_group("group_id=1,type=select,selection_method_param=5,bucket=output:1").is_err()
    );
}

/// A recording translation names the groups it went through and the
/// bucket taken in each (every bucket for `all` and `indirect`), nested
/// groups included; a select group still to be hashed in the datapath is
/// named only after recirculation, and a plain translation records
/// nothing.
#[test]
fn recording_translations_name_groups_and_buckets() {
    use flowpath_ofproto::xlate::xlate_recording_rules;
    let t = tables(
        "in_port=1,actions=group:1\nin_port=2,actions=group:4\nin_port=3,actions=group:5",
        "group_id=1,type=all,bucket=output:2,bucket=group:2\n\
         group_id=2,type=indirect,bucket=group:3\n\
         group_id=3,type=ff,bucket=watch_port:9,output:9,bucket=watch_port:4,output:4\n\
         group_id=4,type=select,selection_method=hash,bucket=output:3,bucket=output:4\n\
         group_id=5,type=select,bucket=output:1,bucket=output:2",
    );
    let key = |m: &str| parse_match(m).unwrap().key;
    let x = xlate_recording_rules(&t, &key("in_port=1,ip"));
    assert_eq!(x.groups, vec![(1, None), (2, None), (3, Some(1))]);
    assert!(xlate(&t, &key("in_port=1,ip"), false).groups.is_empty());
    // The bucket recorded is the one whose output the actions carry.
    for i in 0..20 {
        let m = format!("in_port=2,tcp,nw_src=10.0.0.{i},tp_src={}", 1000 + i);
        let x = xlate_recording_rules(&t, &key(&m));
        let [(4, Some(b))] = x.groups[..] else {
            panic!("{m}: {:?}", x.groups)
        };
        assert_eq!(x.actions[..], [DpAction::Output(3 + b)], "{m}");
    }
    let x = xlate_recording_rules(&t, &key("in_port=3,ip"));
    assert!(
        x.groups.is_empty(),
        "hashed in the datapath: {:?}",
        x.groups
    );
}
