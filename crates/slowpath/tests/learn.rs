//! `learn` on a running datapath: the flows learned from one packet's
//! upcall join the tables after its batch (the megaflows are revalidated)
//! and carry later packets; hard timeouts remove them.

mod common;

use flowpath_datapath::{Config, Outputs, Switch};
use flowpath_ofproto::normal::Bridge;
use flowpath_ofproto::parse::parse_rules;
use flowpath_ofproto::tables::RuleTables;
use std::collections::BTreeMap;
use std::sync::Arc;

/// OVS's MAC learning with `learn` (ovs-actions(7)'s example): table 0
/// learns "to this source MAC, output to this input port" into table 1,
/// table 1 floods what it does not know.
const RULES: &str = "table=0,actions=learn(table=1,hard_timeout=10,priority=10,NXM_OF_VLAN_TCI[0..11],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[]),resubmit(,1)
table=1,priority=0,actions=FLOOD";

fn frame(src: u8, dst: u8) -> Vec<u8> {
    common::udp_frame(
        [2, 0, 0, 0, 0, dst],
        [2, 0, 0, 0, 0, src],
        ([10, 0, 0, 1], [10, 0, 0, 2]),
        (1024, 80),
    )
}

/// Receives one frame on `port` at `now`; returns the ports it left on.
fn send(
    sw: &mut Switch<flowpath_slowpath::SlowPath>,
    port: u32,
    f: &[u8],
    now: u64,
) -> BTreeMap<u32, u16> {
    let mut out = BTreeMap::new();
    let mut sink = |p: u32, pk: Outputs<'_>| {
        *out.entry(p).or_insert(0) += pk.iter().count() as u16;
    };
    sw.process(port, [(f, 0u64)], now, &mut sink);
    out
}

/// The text of the flow learned towards MAC ...:0a, if there is one.
fn to_a(bridge: &Bridge) -> Option<String> {
    bridge
        .learned
        .flows()
        .into_iter()
        .find(|r| r.to_string().contains("dl_dst=02:00:00:00:00:0a"))
        .map(|r| r.to_string())
}

/// A switch on ports 1-4 running `rules`, and its bridge.
fn switch(rules: &str) -> (Switch<flowpath_slowpath::SlowPath>, Arc<Bridge>) {
    let mut t = RuleTables::new(parse_rules(rules, None).unwrap(), &[]);
    t.set_ports(vec![1, 2, 3, 4]);
    let bridge = Arc::new(Bridge::default());
    let sw = Switch::new(
        Config::default(),
        flowpath_slowpath::SlowPath::with_bridge(Arc::new(t), bridge.clone()),
    )
    .unwrap();
    (sw, bridge)
}

#[test]
fn learned_flows_forward_and_expire() {
    let (mut sw, bridge) = switch(RULES);
    // A (on port 1) to B: B unknown, flooded; A learned.
    let o = send(&mut sw, 1, &frame(0xa, 0xb), 0);
    assert_eq!(o.keys().copied().collect::<Vec<_>>(), vec![2, 3, 4]);
    assert_eq!(bridge.learned.flows().len(), 1);
    assert_eq!(
        bridge.learned.flows()[0].to_string(),
        "table=1, hard_timeout=10, priority=10,vlan_tci=0x0000/0x0fff,dl_dst=02:00:00:00:00:0a actions=output:1"
    );
    // B (on port 2) to A: forwarded to port 1 by the learned flow.
    let o = send(&mut sw, 2, &frame(0xb, 0xa), 100);
    assert_eq!(o.keys().copied().collect::<Vec<_>>(), vec![1]);
    // A to B again: B was learned too, and the first megaflow (flooding)
    // was revalidated away.
    let o = send(&mut sw, 1, &frame(0xa, 0xb), 200);
    assert_eq!(o.keys().copied().collect::<Vec<_>>(), vec![2]);
    // After the hard timeout (10 s) without relearning B: flooded again
    // (A is relearned by this very packet).
    sw.housekeeping(12_000);
    assert_eq!(bridge.learned.flows().len(), 0);
    let o = send(&mut sw, 1, &frame(0xa, 0xb), 12_100);
    assert_eq!(o.keys().copied().collect::<Vec<_>>(), vec![2, 3, 4]);
}

/// `idle_timeout` of a learned flow, as OVS's `rule_expire`: the flow
/// stays while packets go through it (here: through the megaflows that
/// use it, reported once a second) and goes `idle_timeout` seconds (plus
/// one reporting interval) after the last one; relearning does not reset
/// the idle timer.
#[test]
fn learned_flows_expire_when_idle() {
    let rules = "table=0,actions=learn(table=1,idle_timeout=2,priority=10,NXM_OF_VLAN_TCI[0..11],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[]),resubmit(,1)
table=1,priority=0,actions=FLOOD";
    let (mut sw, bridge) = switch(rules);
    // A learned (idle 2 s).
    send(&mut sw, 1, &frame(0xa, 0xb), 0);
    assert!(to_a(&bridge).is_some());
    // B to A every 700 ms for 6 s: forwarded by the learned flow, which
    // stays although it was learned 6 s ago.
    let mut now = 0;
    while now < 6000 {
        now += 700;
        let o = send(&mut sw, 2, &frame(0xb, 0xa), now);
        assert_eq!(
            o.keys().copied().collect::<Vec<_>>(),
            vec![1],
            "at {now} ms"
        );
        sw.housekeeping(now);
        assert!(to_a(&bridge).is_some(), "used, yet expired at {now} ms");
    }
    // No more traffic to A: gone after 2 s (+ 1 s of reporting slack).
    let last = now;
    while now < last + 3500 {
        now += 250;
        sw.housekeeping(now);
    }
    assert_eq!(to_a(&bridge), None, "idle for 3.5 s, still there");
    // B to A floods again (and the megaflow that used the flow is gone).
    let o = send(&mut sw, 2, &frame(0xb, 0xa), now + 10);
    assert_eq!(o.keys().copied().collect::<Vec<_>>(), vec![1, 3, 4]);
}

/// A TCP frame from MAC `src` to MAC `dst` with these flags
/// (`etherparse`'s builder).
fn tcp(src: u8, dst: u8, fin: bool) -> Vec<u8> {
    let mut v = Vec::new();
    let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, src], [2, 0, 0, 0, 0, dst])
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .tcp(1234, 80, 1, 1000);
    let b = if fin { b.fin() } else { b.ack(1) };
    b.write(&mut v, &[]).unwrap();
    v
}

/// `learn(...,fin_idle_timeout=1,...)`: the learned flow carries
/// `fin_timeout(idle_timeout=1)` (as OVS makes it); a FIN through it brings
/// its idle timeout from 60 s down to 1 s.
#[test]
fn a_fin_through_a_learned_flow_shortens_its_timeouts() {
    let rules = "table=0,actions=learn(table=1,idle_timeout=60,fin_idle_timeout=1,priority=10,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[]),resubmit(,1)
table=1,priority=0,actions=FLOOD";
    let (mut sw, bridge) = switch(rules);
    send(&mut sw, 1, &tcp(0xa, 0xb, false), 0);
    let flow = to_a(&bridge).unwrap();
    assert!(
        flow.contains("idle_timeout=60")
            && flow.contains("actions=fin_timeout(idle_timeout=1),output:1"),
        "{flow}"
    );
    // B to A, not ending: installs the megaflow, then hits it.
    send(&mut sw, 2, &tcp(0xb, 0xa, false), 100);
    send(&mut sw, 2, &tcp(0xb, 0xa, false), 200);
    sw.housekeeping(1100);
    assert!(to_a(&bridge).unwrap().contains("idle_timeout=60"));
    // A FIN from B to A (same megaflow: the flags are not in it).
    let o = send(&mut sw, 2, &tcp(0xb, 0xa, true), 1200);
    assert_eq!(o.keys().copied().collect::<Vec<_>>(), vec![1]);
    sw.housekeeping(2200);
    let flow = to_a(&bridge).unwrap();
    assert!(flow.contains("idle_timeout=1,"), "{flow}");
    // Idle from 1200 ms: gone 1 s (+ 1 s of slack) later.
    sw.housekeeping(3300);
    sw.housekeeping(4400);
    assert_eq!(to_a(&bridge), None);
}

/// A learned flow whose learning traffic keeps hitting a megaflow (no
/// upcall) is relearned from that megaflow's use, restarting its hard
/// timeout, as OVS's translation cache relearns on revalidation; once
/// that traffic stops, the hard timeout runs out.
#[test]
fn learning_traffic_through_megaflows_refreshes_hard_timeouts() {
    let (mut sw, bridge) = switch(RULES);
    // A (port 1) to B every 2 s for 30 s: learned once by the upcall, then
    // carried by its megaflow; the flow to A (hard_timeout=10) stays.
    let mut now = 0;
    while now <= 30_000 {
        send(&mut sw, 1, &frame(0xa, 0xb), now);
        sw.housekeeping(now + 1);
        assert!(to_a(&bridge).is_some(), "expired at {now} ms");
        now += 2_000;
    }
    let r = sw.report();
    assert!(r.miss_with_success_upcall <= 2, "{r:?}");
    // B to A: forwarded by it.
    let o = send(&mut sw, 2, &frame(0xb, 0xa), now);
    assert_eq!(o.keys().copied().collect::<Vec<_>>(), vec![1]);
    // A silent for over 10 s: gone.
    sw.housekeeping(now + 11_500);
    sw.housekeeping(now + 12_600);
    assert_eq!(to_a(&bridge), None);
}
