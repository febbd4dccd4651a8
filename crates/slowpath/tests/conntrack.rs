//! Connection tracking through a real datapath: the stateful firewall of
//! Open vSwitch's conntrack tutorial (A on port 1 may open connections
//! to B on port 2; B may only answer), with `ct(table=1)` recirculating
//! each packet once and `ct(commit)` creating the connection.

use etherparse::PacketBuilder;
use flowpath_datapath::{Config, Outputs, Switch};
use flowpath_ofproto::parse::parse_rules;
use flowpath_ofproto::tables::RuleTables;
use flowpath_slowpath::{RuleSwitch, RulesWorker};
use std::sync::Arc;

/// The tutorial's table (zone 0), with the rejected new connections of B
/// counted by going to port 9 instead of a drop.
const FIREWALL: &str = "\
table=0,priority=1,actions=drop
table=0,priority=10,arp,actions=NORMAL
table=0,priority=100,ip,ct_state=-trk,actions=ct(table=1)
table=1,in_port=1,ip,ct_state=+trk+new,actions=ct(commit,exec(set_field:0x2a->ct_mark)),output:2
table=1,in_port=1,ip,ct_state=+trk+est,actions=output:2
table=1,in_port=2,ip,ct_state=+trk+new,actions=output:9
table=1,in_port=2,ip,ct_state=+trk+est,ct_mark=0x2a,actions=output:1
table=1,priority=0,actions=drop";

fn switch(rules: &str) -> RulesWorker {
    let mut t = RuleTables::new(parse_rules(rules, None).unwrap(), &[]);
    t.set_ports(vec![1, 2, 9]);
    Switch::with_rules(Config::default(), Arc::new(t)).unwrap()
}

const A: [u8; 4] = [10, 0, 0, 1];
const B: [u8; 4] = [10, 0, 0, 2];

/// A TCP segment from `src` to `dst` with these flags, sequence and
/// acknowledgement numbers.
fn tcp(
    src: ([u8; 4], u16),
    dst: ([u8; 4], u16),
    flags: &str,
    seq: u32,
    ack: u32,
    payload: &[u8],
) -> Vec<u8> {
    let mut b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, src.0[3]], [2, 0, 0, 0, 0, dst.0[3]])
        .ipv4(src.0, dst.0, 64)
        .tcp(src.1, dst.1, seq, 64240);
    if flags.contains('S') {
        b = b.syn();
    }
    if flags.contains('A') {
        b = b.ack(ack);
    }
    if flags.contains('F') {
        b = b.fin();
    }
    if flags.contains('R') {
        b = b.rst();
    }
    let mut out = Vec::new();
    b.write(&mut out, payload).unwrap();
    out
}

/// Sends `frame` in on `port`; returns the ports it went out of.
fn send(sw: &mut RulesWorker, port: u32, frame: &[u8], now_ms: u64) -> Vec<u32> {
    let mut got = Vec::new();
    let mut sink = |p: u32, o: Outputs<'_>| got.extend(o.iter().map(|_| p));
    sw.process(port, [(frame, 0u64)], now_ms, &mut sink);
    got
}

#[test]
fn tutorial_firewall_lets_a_open_and_b_only_answer() {
    let mut sw = switch(FIREWALL);
    let (a, b) = ((A, 40000), (B, 80));
    // The three-way handshake, data both ways, and the close.
    assert_eq!(send(&mut sw, 1, &tcp(a, b, "S", 100, 0, &[]), 1), vec![2]);
    assert_eq!(
        send(&mut sw, 2, &tcp(b, a, "SA", 500, 101, &[]), 2),
        vec![1]
    );
    assert_eq!(send(&mut sw, 1, &tcp(a, b, "A", 101, 501, &[]), 3), vec![2]);
    assert_eq!(
        send(&mut sw, 1, &tcp(a, b, "A", 101, 501, b"GET /"), 4),
        vec![2]
    );
    assert_eq!(
        send(&mut sw, 2, &tcp(b, a, "A", 501, 106, b"200 OK"), 5),
        vec![1]
    );
    // B opening a connection of its own is refused (port 9), as is a
    // segment of B's that belongs to no connection (an ACK scan).
    assert_eq!(
        send(&mut sw, 2, &tcp((B, 22), (A, 5555), "S", 7, 0, &[]), 6),
        vec![9]
    );
    let ack_scan = send(&mut sw, 2, &tcp((B, 23), (A, 5556), "A", 7, 9, &[]), 7);
    assert!(!ack_scan.contains(&1), "{ack_scan:?}");
    // Exactly one connection, committed by A's SYN, with the mark the
    // commit set, in the tutorial's zone 0.
    let ct = sw.conntrack();
    let conns = ct.dump(None);
    assert_eq!(conns.len(), 1, "{conns:?}");
    let line = flowpath_conntrack::format_entry(&conns[0], false, false);
    assert!(
        line.starts_with("tcp,orig=(src=10.0.0.1,dst=10.0.0.2,sport=40000,dport=80),reply=(src=10.0.0.2,dst=10.0.0.1,sport=80,dport=40000)"),
        "{line}"
    );
    assert!(line.contains("mark=42"), "{line}");
    // Every packet took two datapath passes.
    let r = sw.report();
    assert_eq!(r.packet_recirculations, r.packets_received, "{r:?}");
    let dump = sw.datapath().dump_flows(0);
    assert!(dump.contains("actions:ct,recirc(0x"), "{dump}");
    eprintln!("{dump}");
    assert!(
        dump.contains("ct_state=+new-est+trk") || dump.contains("+trk"),
        "{dump}"
    );
}

/// The first pass's megaflow is shared by every packet; the second pass's
/// megaflows tell the connection states apart (ct_state is in the key),
/// so established traffic of many connections hits cached megaflows.
#[test]
fn established_traffic_hits_megaflows_after_the_first_packets() {
    let mut sw = switch(FIREWALL);
    for i in 0..50u16 {
        let a = (A, 1000 + i);
        let b = (B, 80);
        assert_eq!(send(&mut sw, 1, &tcp(a, b, "S", 1, 0, &[]), 10), vec![2]);
        assert_eq!(send(&mut sw, 2, &tcp(b, a, "SA", 9, 2, &[]), 10), vec![1]);
        assert_eq!(send(&mut sw, 1, &tcp(a, b, "A", 2, 10, b"x"), 10), vec![2]);
    }
    assert_eq!(sw.conntrack().n_conns(), 50);
    let r = sw.report();
    // Far fewer upcalls than packets: one per distinct (pass, state,
    // port) megaflow.
    assert!(r.miss_with_success_upcall < 20, "{r:?}");
}
