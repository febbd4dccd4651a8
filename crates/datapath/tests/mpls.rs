//! MPLS frames through a real datapath: the top label stack entry is in the
//! key, rules match it, megaflows keep only the bits the rules looked at,
//! and frames that differ only in a label the rules never read share a
//! megaflow.

use flowpath_datapath::{Config, Outputs, Switch};
use flowpath_ofproto::parse::parse_rules;
use flowpath_ofproto::tables::RuleTables;
use std::sync::Arc;

const RULES: &str = "priority=30,mpls,mpls_label=100,mpls_bos=1,actions=output:2
priority=20,mpls,mpls_label=100,actions=output:3
priority=10,mplsm,actions=output:4
priority=5,ip,nw_dst=10.0.0.2,actions=output:5
priority=0,actions=drop";

/// An Ethernet frame of type `ty` carrying these label stack entries
/// (label, bos) and a few payload bytes.
fn frame(ty: u16, labels: &[(u32, bool)]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
    f.extend(ty.to_be_bytes());
    for &(label, bos) in labels {
        let lse = (label << 12) | (u32::from(bos) << 8) | 64;
        f.extend(lse.to_be_bytes());
    }
    f.resize(60, 0x45);
    f
}

#[test]
fn mpls_frames_are_switched_by_their_top_label() {
    let mut t = RuleTables::new(parse_rules(RULES, None).unwrap(), &[]);
    t.set_ports(vec![1, 2, 3, 4, 5]);
    let mut sw = Switch::with_rules(Config::default(), Arc::new(t)).unwrap();
    let cases: [(Vec<u8>, Option<u32>); 7] = [
        (frame(0x8847, &[(100, true)]), Some(2)),
        (frame(0x8847, &[(100, false), (7, true)]), Some(3)),
        (frame(0x8847, &[(100, false), (8, true)]), Some(3)),
        (frame(0x8847, &[(101, true)]), None),
        (frame(0x8848, &[(100, true)]), Some(4)),
        (frame(0x8848, &[(5, false), (6, true)]), Some(4)),
        // An MPLS frame whose label stack is cut: label 0, no entry.
        (frame(0x8847, &[]).into_iter().take(15).collect(), None),
    ];
    for (i, (f, want)) in cases.iter().enumerate() {
        let mut got = Vec::new();
        let mut sink = |p: u32, pk: Outputs<'_>| got.extend(pk.iter().map(|_| p));
        sw.process(1, [(&f[..], 0u64)], i as u64, &mut sink);
        assert_eq!(got, want.iter().copied().collect::<Vec<_>>(), "case {i}");
    }
    // The second label is never significant: case 2 hits the megaflow of
    // case 1. (Cases 4 and 5 do not share one: the staged lookup of the
    // label-100 subtables un-wildcards their whole L2 stage — dl_type and
    // the label — as OVS's does.)
    let r = sw.report();
    assert_eq!(
        (r.miss_with_success_upcall, r.megaflow_hits),
        (6, 1),
        "{r:?}"
    );
    assert_eq!(sw.datapath().megaflow_count(), 6);
}
