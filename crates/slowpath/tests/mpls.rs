//! MPLS frames through a real datapath: the top label stack entry is in the
//! key, rules match it, megaflows keep only the bits the rules looked at,
//! and frames that differ only in a label the rules never read share a
//! megaflow.

use flowpath_datapath::{Config, Outputs, Switch};
use flowpath_ofproto::parse::parse_rules;
use flowpath_ofproto::tables::RuleTables;
use flowpath_slowpath::{RuleSwitch, RulesWorker};
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

/// An IPv4 frame (ToS 0x48, TTL 33), with an 802.1Q tag when `vlan`.
fn ipv4_frame(vlan: bool) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
    if vlan {
        f.extend([0x81, 0x00, 0x00, 0x05]);
    }
    f.extend([0x08, 0x00]);
    // (The header checksum is left 0: nothing here checks it.)
    f.extend([
        0x45, 0x48, 0, 28, 0, 0, 0, 0, 33, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ]);
    f.extend([0x30, 0x39, 0, 53, 0, 8, 0, 0]);
    f
}

fn lse(label: u32, tc: u32, bos: bool, ttl: u32) -> [u8; 4] {
    ((label << 12) | (tc << 9) | (u32::from(bos) << 8) | ttl).to_be_bytes()
}

/// MPLS actions executed on real frames: push_mpls puts the entry the
/// translation made (label, TC from the DSCP, TTL from the IP TTL, bottom
/// of stack) behind the EtherType and any VLAN tag; pop_mpls takes it off
/// again (the frame comes back as it was); set(mpls) rewrites the top
/// entry; a pop followed by a table lookup recirculates, as in OVS.
#[test]
fn mpls_actions_rewrite_frames() {
    let rules = "in_port=1,ip,actions=push_mpls:0x8847,set_mpls_label:16,output:2
in_port=2,mpls,actions=pop_mpls:0x0800,output:3
in_port=3,mpls,actions=set_mpls_ttl:5,set_field:3->mpls_tc,output:4
in_port=4,ip,actions=push_mpls:0x8848,push_mpls:0x8847,output:1
in_port=5,mpls,actions=pop_mpls:0x0800,resubmit(,1)
table=1,ip,nw_dst=10.0.0.2,actions=output:1
table=1,priority=0,actions=drop";
    let mut t = RuleTables::new(parse_rules(rules, None).unwrap(), &[]);
    t.set_ports(vec![1, 2, 3, 4, 5]);
    let mut sw = Switch::with_rules(Config::default(), Arc::new(t)).unwrap();
    let send = |sw: &mut RulesWorker, port: u32, f: &[u8]| -> Vec<(u32, Vec<u8>)> {
        let mut got = Vec::new();
        let mut sink =
            |p: u32, pk: Outputs<'_>| got.extend(pk.iter().map(|o| (p, o.data.to_vec())));
        sw.process(port, [(f, 0u64)], 0, &mut sink);
        got
    };
    for vlan in [false, true] {
        let ip = ipv4_frame(vlan);
        let at = if vlan { 16 } else { 12 };
        // Push: tos 0x48 is DSCP 18, whose low three bits are TC 2.
        let out = send(&mut sw, 1, &ip);
        assert_eq!(out.len(), 1, "{out:?}");
        let (p, m) = &out[0];
        assert_eq!(*p, 2);
        assert_eq!(m.len(), ip.len() + 4);
        assert_eq!(m[..at], ip[..at]);
        assert_eq!(m[at..at + 2], [0x88, 0x47]);
        assert_eq!(m[at + 2..at + 6], lse(16, 2, true, 33));
        assert_eq!(m[at + 6..], ip[at + 2..]);
        // Pop: the IPv4 frame again, byte for byte.
        let back = send(&mut sw, 2, m);
        assert_eq!(back, vec![(3, ip.clone())]);
        // Set: TTL and TC of the top entry.
        let set = send(&mut sw, 3, m);
        assert_eq!(set.len(), 1);
        assert_eq!(set[0].1[at + 2..at + 6], lse(16, 3, true, 5));
        assert_eq!(set[0].1[at + 6..], ip[at + 2..]);
        // Two pushes: the second copies the first (not bottom of stack).
        let two = send(&mut sw, 4, &ip);
        assert_eq!(two.len(), 1);
        let m2 = &two[0].1;
        assert_eq!(m2[at..at + 2], [0x88, 0x47]);
        assert_eq!(m2[at + 2..at + 6], lse(0, 2, false, 33));
        assert_eq!(m2[at + 6..at + 10], lse(0, 2, true, 33));
        assert_eq!(m2[at + 10..], ip[at + 2..]);
    }
    // Pop then a table lookup: as OVS, the datapath pops, recirculates,
    // parses the IPv4 packet behind the label and looks it up again with
    // the translation's recirculation id; table 1 then reads its nw_dst.
    let before = sw.report();
    let ip = ipv4_frame(false);
    let pushed = send(&mut sw, 1, &ip).remove(0).1;
    let mut other = pushed.clone();
    other[12 + 4 + 19] = 3; // nw_dst 10.0.0.3
    assert_eq!(send(&mut sw, 5, &pushed), vec![(1, ip.clone())]);
    assert!(send(&mut sw, 5, &other).is_empty());
    assert_eq!(send(&mut sw, 5, &pushed), vec![(1, ip.clone())]);
    let r = sw.report();
    // Four packets received (the push and three pops), three passes more.
    assert_eq!(r.packets_received - before.packets_received, 4, "{r:?}");
    assert_eq!(r.packet_recirculations - before.packet_recirculations, 3);
    // Misses: the pops' first pass (one megaflow for both pops, which
    // read no L3) and each destination's second pass; the last pop hits
    // twice.
    assert_eq!(
        r.miss_with_success_upcall - before.miss_with_success_upcall,
        3,
        "{r:?}"
    );
    let flows = sw.datapath().dump_flows(0);
    assert!(
        flows.contains("recirc_id=0,eth,mpls,in_port=5,")
            && flows.contains("actions:pop_mpls(eth_type=0x800),recirc(0x"),
        "{flows}"
    );
    assert!(
        flows.contains(",eth,ip,in_port=5,nw_dst=10.0.0.2,nw_frag=no,")
            && flows.contains("actions:1\n"),
        "{flows}"
    );
}
