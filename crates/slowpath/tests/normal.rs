//! `NORMAL` through the whole datapath: packets received by a `Switch`
//! whose slow path learns into a shared MAC table; megaflows that flooded
//! are revalidated when their destination is learned, moves, ages out or
//! the table is flushed, so the next packet goes where the table says.

mod common;

use flowpath_datapath::{Config, Outputs, SecondLevel, Switch};
use flowpath_ofproto::normal::{Bridge, MacTable, PortVlans, VlanMode};
use flowpath_ofproto::parse::parse_rules;
use flowpath_ofproto::tables::RuleTables;
use flowpath_slowpath::SlowPath;
use std::collections::BTreeMap;
use std::sync::Arc;

const A: [u8; 6] = [0x50, 0x54, 0, 0, 0, 0x0a];
const B: [u8; 6] = [0x50, 0x54, 0, 0, 0, 0x0b];
const BCAST: [u8; 6] = [0xff; 6];

/// An Ethernet + IPv4 + UDP frame from `src` to `dst`.
fn frame(src: [u8; 6], dst: [u8; 6]) -> Vec<u8> {
    common::udp_frame(dst, src, ([10, 0, 0, 1], [10, 0, 0, 2]), (1024, 80))
}

fn switch(vlans: PortVlans, aging_s: u64) -> (Switch<SlowPath>, Arc<Bridge>) {
    let mut tables = RuleTables::new(parse_rules("actions=NORMAL", None).unwrap(), &[]);
    tables.set_ports(vec![1, 2, 3]);
    let bridge = Arc::new(Bridge::new(MacTable::new(16, aging_s), vlans, false));
    let cfg = Config {
        second_level: SecondLevel::Smc,
        ..Config::default()
    };
    let sp = SlowPath::with_bridge(Arc::new(tables), bridge.clone());
    (Switch::new(cfg, sp).unwrap(), bridge)
}

/// Receives one frame on `port` at `now`; returns the ports it left on
/// (with the frame's VLAN TCI there, 0 if untagged).
fn send(sw: &mut Switch<SlowPath>, port: u32, f: &[u8], now: u64) -> BTreeMap<u32, u16> {
    let mut out = BTreeMap::new();
    let mut sink = |p: u32, pk: Outputs<'_>| {
        for o in pk.iter() {
            let d = o.data;
            let tci = if d[12..14] == [0x81, 0x00] {
                u16::from_be_bytes([d[14], d[15]])
            } else {
                0
            };
            out.insert(p, tci);
        }
    };
    sw.process(port, [(f, 0u64)], now, &mut sink);
    out
}

fn ports(m: &BTreeMap<u32, u16>) -> Vec<u32> {
    m.keys().copied().collect()
}

#[test]
fn learns_revalidates_moves_ages_and_flushes() {
    let (mut sw, bridge) = switch(PortVlans::default(), 300);
    // A -> B: B unknown, flood (not back to port 1).
    assert_eq!(ports(&send(&mut sw, 1, &frame(A, B), 0)), vec![2, 3]);
    assert_eq!(bridge.macs().lookup(0, 0x5054_0000_000a, 0), Some(1));
    // Again: a megaflow hit, still flooding.
    assert_eq!(ports(&send(&mut sw, 1, &frame(A, B), 1)), vec![2, 3]);
    let hits = sw.report().megaflow_hits + sw.report().emc_hits + sw.report().smc_hits;
    assert!(hits >= 1, "second packet hit the cache");
    // B -> A: A known on 1; B learned on 2.
    assert_eq!(ports(&send(&mut sw, 2, &frame(B, A), 2)), vec![1]);
    // The flooding megaflow for A -> B was revalidated: now only port 2.
    assert_eq!(ports(&send(&mut sw, 1, &frame(A, B), 3)), vec![2]);
    // B moves to port 3 (a broadcast from there): A -> B follows it.
    assert_eq!(ports(&send(&mut sw, 3, &frame(B, BCAST), 4)), vec![1, 2]);
    assert_eq!(ports(&send(&mut sw, 1, &frame(A, B), 5)), vec![3]);
    assert_eq!(bridge.macs().stats.moved, 1);
    // Flush: A -> B floods again (once the worker has looked: between
    // batches).
    bridge.macs().flush();
    sw.housekeeping(6);
    assert_eq!(ports(&send(&mut sw, 1, &frame(A, B), 6)), vec![2, 3]);
    // Learn B again, then let it age out: flooding resumes.
    send(&mut sw, 2, &frame(B, A), 7);
    assert_eq!(ports(&send(&mut sw, 1, &frame(A, B), 8)), vec![2]);
    let later = 8 + 300_000 + 2_000;
    assert_eq!(
        ports(&send(&mut sw, 3, &frame(A, BCAST), later)),
        vec![1, 2]
    );
    assert_eq!(
        ports(&send(&mut sw, 1, &frame(A, B), later + 1)),
        vec![2, 3]
    );
}

#[test]
fn access_and_trunk_ports() {
    let mut vlans = PortVlans::default();
    vlans.set(1, VlanMode::Access(10));
    vlans.set(2, VlanMode::Trunk(vec![10, 20]));
    vlans.set(3, VlanMode::Access(20));
    let (mut sw, _) = switch(vlans, 300);
    // Untagged on access port 1 is VLAN 10: to trunk 2 tagged 10, not to 3.
    let out = send(&mut sw, 1, &frame(A, BCAST), 0);
    assert_eq!(out, BTreeMap::from([(2, 10)]));
    // Tagged 20 on the trunk: to access port 3 untagged.
    let mut f = frame(B, BCAST);
    f.splice(12..12, [0x81, 0x00, 0x00, 20]);
    assert_eq!(send(&mut sw, 2, &f, 1), BTreeMap::from([(3, 0)]));
    // Tagged 30 on the trunk (not trunked): dropped.
    let mut f = frame(B, BCAST);
    f.splice(12..12, [0x81, 0x00, 0x00, 30]);
    assert!(send(&mut sw, 2, &f, 2).is_empty());
    // Tagged on an access port: dropped.
    let mut f = frame(A, BCAST);
    f.splice(12..12, [0x81, 0x00, 0x00, 10]);
    assert!(send(&mut sw, 1, &f, 3).is_empty());
}

/// MACs whose packets keep hitting megaflows (so never reach the slow
/// path again) do not age out: their use refreshes their entries, as OVS's
/// revalidator refreshes MAC learning from the megaflows' statistics
/// (translation cache), so a long conversation is never flooded. Without
/// traffic they age out as before.
#[test]
fn traffic_through_megaflows_keeps_its_sources_learned() {
    let (mut sw, bridge) = switch(PortVlans::default(), 5);
    // A (port 1) to B: flooded, A learned. B (port 2) to A: to port 1, B
    // learned.
    assert_eq!(ports(&send(&mut sw, 1, &frame(A, B), 0)), vec![2, 3]);
    assert_eq!(ports(&send(&mut sw, 2, &frame(B, A), 10)), vec![1]);
    // A and B talk for 12 s (aging is 5 s): megaflow hits only, no flood.
    let mut now = 10;
    while now < 12_000 {
        now += 500;
        assert_eq!(
            ports(&send(&mut sw, 1, &frame(A, B), now)),
            vec![2],
            "A at {now}"
        );
        assert_eq!(
            ports(&send(&mut sw, 2, &frame(B, A), now)),
            vec![1],
            "B at {now}"
        );
        sw.housekeeping(now);
    }
    assert_eq!(bridge.macs().lookup(0, 0x5054_0000_000a, now), Some(1));
    assert_eq!(bridge.macs().lookup(0, 0x5054_0000_000b, now), Some(2));
    // Quiet for longer than the aging time: both age out, flooding.
    sw.housekeeping(now + 6_000);
    sw.housekeeping(now + 7_100);
    assert_eq!(bridge.macs().lookup(0, 0x5054_0000_000a, now + 7_100), None);
    assert_eq!(
        ports(&send(&mut sw, 2, &frame(B, A), now + 7_200)),
        vec![1, 3]
    );
}
