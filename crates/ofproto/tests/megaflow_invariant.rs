//! The megaflow invariant, property-tested: every packet inside a megaflow
//! computed by the classifier (staged lookup, prefix and port tracking) gets
//! exactly the datapath actions that a straightforward linear scan of the
//! rules gives it.
//!
//! Rule sets come from [`flowpath_ofproto::testgen`]: several tables chained
//! by resubmit/goto_table, random priorities, protocols, in_port, VLAN and
//! masked MAC matches, CIDR and arbitrary masks on addresses, arbitrary
//! masks on ports, and actions that rewrite fields, decrement the TTL,
//! push/pop VLAN tags, go to the controller or loop.

use flowpath_flow::field::FieldId;
use flowpath_flow::{FlowKey, FlowMask, FLOW_WORDS};
use flowpath_ofproto::linear::LinearTables;
use flowpath_ofproto::tables::RuleTables;
use flowpath_ofproto::testgen::{normalize, packet, rule_set, Rng};
use flowpath_ofproto::xlate::xlate;
use proptest::prelude::*;

fn check(seed: u64, prefixes: &[FieldId]) -> Result<(), TestCaseError> {
    let mut r = Rng(seed | 1);
    let (rules, _) = rule_set(&mut r);
    let mut fast = RuleTables::new(rules.clone(), prefixes);
    fast.set_ports(vec![1, 2, 3, 4]);
    let mut slow = LinearTables::new(rules.clone());
    slow.set_ports(vec![1, 2, 3, 4]);
    for _ in 0..24 {
        let pkt = packet(&mut r, &rules);
        let x = xlate(&fast, &pkt, false);
        let reference = xlate(&slow, &pkt, false);
        prop_assert_eq!(
            &x.actions,
            &reference.actions,
            "classifier disagrees with linear scan for {:?}",
            pkt
        );
        let m: FlowMask = x.megaflow;
        for _ in 0..12 {
            let mut s = FlowKey::zero();
            for i in 0..FLOW_WORDS {
                s.w[i] = (pkt.w[i] & m.w[i]) | (r.next_u64() & !m.w[i]);
            }
            s.w[14] = 0;
            s.w[15] = 0;
            let s = normalize(s);
            prop_assert!(s.eq_masked(&pkt, &m));
            let y = xlate(&slow, &s, false);
            let rules_text: Vec<String> = rules.iter().map(|r| r.to_string()).collect();
            prop_assert_eq!(
                &y.actions,
                &x.actions,
                "megaflow {} of {:?} admits {:?} which gets other actions; rules:\n{}",
                x.megaflow_text(&pkt),
                pkt,
                s,
                rules_text.join("\n")
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn megaflows_are_correct_with_default_prefixes(seed in any::<u64>()) {
        check(seed, &[FieldId::NwDst, FieldId::NwSrc])?;
    }

    #[test]
    fn megaflows_are_correct_without_prefix_tracking(seed in any::<u64>()) {
        check(seed, &[])?;
    }

    #[test]
    fn megaflows_are_correct_with_ipv6_prefixes(seed in any::<u64>()) {
        check(seed, &[FieldId::Ipv6Dst, FieldId::NwSrc, FieldId::NwDst])?;
    }
}
