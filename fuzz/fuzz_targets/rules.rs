//! Fuzz target `rules`: the `ovs-ofctl add-flows` parser on arbitrary text
//! must not panic; whatever it accepts must print back to text that parses
//! to the same rules, and translating a packet through the accepted rules
//! must not panic either.
//!
//! Run with `cargo +nightly fuzz run rules` (from the workspace root).

#![no_main]

use flowpath_flow::FlowKey;
use flowpath_ofproto::classifier::DEFAULT_PREFIXES;
use flowpath_ofproto::parse::{parse_match, parse_rule, parse_rules};
use flowpath_ofproto::tables::RuleTables;
use flowpath_ofproto::xlate::xlate;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = parse_match(text);
    let Ok(rules) = parse_rules(text, Some("fuzz.flows")) else {
        return;
    };
    for r in &rules {
        let printed = r.to_string();
        let again = parse_rule(&printed).unwrap_or_else(|e| panic!("{printed}: {e}"));
        assert_eq!(again.matching, r.matching, "{printed}");
        assert_eq!(again.actions, r.actions, "{printed}");
        assert_eq!(again.priority, r.priority, "{printed}");
        assert_eq!(again.table, r.table, "{printed}");
    }
    let tables = RuleTables::new(rules.clone(), DEFAULT_PREFIXES);
    for r in &rules {
        // A packet inside each rule's match, with every other bit set.
        let mut k = FlowKey::zero();
        for i in 0..14 {
            k.w[i] = r.matching.key.w[i] | (!r.matching.mask.w[i] & 0x5555_5555_5555_5555);
        }
        let x = xlate(&tables, &k, true);
        assert!(k.eq_masked(&k, &x.megaflow));
    }
});
