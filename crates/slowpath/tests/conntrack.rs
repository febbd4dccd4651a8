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
    // The first pass of each port, and second passes told apart by their
    // ct_state in the key: A's new (committed, with the mark), B's new
    // (port 9), both sides' established.
    for want in [
        "recirc_id=0,ct_state=-trk,eth,ip,in_port=1,nw_frag=no,",
        "recirc_id=0,ct_state=-trk,eth,ip,in_port=2,nw_frag=no,",
        "actions:ct(commit,mark=0x2a/0xffffffff),2",
        "ct_state=+new+trk,eth,ip,in_port=2,nw_frag=no,",
        "ct_state=-new+est+trk,ct_mark=0x2a,eth,ip,in_port=2,nw_frag=no,",
        "ct_state=-new+est+trk,eth,ip,in_port=1,nw_frag=no,",
    ] {
        assert!(dump.contains(want), "{want} not in:\n{dump}");
    }
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

/// An IPv4 fragment of a UDP datagram from A to B: `offset` in 8-byte
/// units, `more` the MF flag, `payload` this fragment's bytes of the IP
/// payload (the UDP header is in the first).
fn ipv4_fragment(id: u16, offset: u16, more: bool, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    let total = 20 + payload.len() as u16;
    let flags = (u16::from(more) << 13) | offset;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&id.to_be_bytes());
    f.extend_from_slice(&flags.to_be_bytes());
    f.extend_from_slice(&[64, 17, 0, 0]);
    f.extend_from_slice(&A);
    f.extend_from_slice(&B);
    let c = flowpath_wire::checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// Fragments are reassembled before the tracker (as OVS's `ipf`): the
/// first fragment of a datagram waits for the rest; when the datagram is
/// whole it is tracked (committed here), and both fragments go out with
/// its state, in order; a lone fragment never completes and is not
/// forwarded.
#[test]
fn fragments_are_tracked_as_their_datagram() {
    let mut sw = switch(FIREWALL);
    // A UDP datagram of 8 + 1992 bytes in two fragments of 1480 and 520
    // bytes (a first fragment is at least 1200 bytes, OVS's minimum).
    let mut udp = vec![0x9c, 0x40, 0x00, 0x35, 0x07, 0xd0, 0, 0];
    udp.extend((0..1992u32).map(|i| i as u8));
    let (first, second) = udp.split_at(1480);
    let f1 = ipv4_fragment(77, 0, true, first);
    let f2 = ipv4_fragment(77, 185, false, second);
    let run = |sw: &mut RulesWorker, f: &[u8], now: u64| {
        let mut got = Vec::new();
        let mut sink = |p: u32, o: Outputs<'_>| {
            for x in o.iter() {
                got.push((p, x.data.to_vec()));
            }
        };
        sw.process(1, [(f, 0u64)], now, &mut sink);
        got
    };
    let got = run(&mut sw, &f1, 1);
    assert!(got.is_empty(), "the first fragment went out alone: {got:?}");
    let got = run(&mut sw, &f2, 2);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0], (2, f1.clone()));
    assert_eq!(got[1], (2, f2.clone()));
    // The datagram's connection was committed (the +new rule).
    let conns = sw.conntrack().dump(None);
    assert_eq!(conns.len(), 1, "{conns:?}");
    assert!(flowpath_conntrack::format_entry(&conns[0], false, false)
        .starts_with("udp,orig=(src=10.0.0.1,dst=10.0.0.2,sport=40000,dport=53)"));
    // A lone later fragment of another datagram is held, not forwarded.
    let lone = ipv4_fragment(78, 185, false, second);
    let got = run(&mut sw, &lone, 3);
    assert!(got.is_empty(), "{got:?}");
    // Held: the first fragment in each of the datagram's two passes (the
    // `ct(commit)` of the second pass reassembles it again, as OVS's
    // does), and the lone one.
    assert_eq!(sw.exec_stats().ipf_held, 3);
}

/// A UDP datagram from `src` to `dst`.
fn udp(src: ([u8; 4], u16), dst: ([u8; 4], u16)) -> Vec<u8> {
    let mut out = Vec::new();
    PacketBuilder::ethernet2([2, 0, 0, 0, 0, src.0[3]], [2, 0, 0, 0, 0, dst.0[3]])
        .ipv4(src.0, dst.0, 64)
        .udp(src.1, dst.1)
        .write(&mut out, b"data")
        .unwrap();
    out
}

/// Sends `frames` in on `port` in one go (batches of 32: the datapath
/// prefetches their connections and hands each packet's tuple hash to
/// its `ct`); returns how many went out of each of ports 1, 2 and 9.
fn send_all(sw: &mut RulesWorker, port: u32, frames: &[Vec<u8>], now_ms: u64) -> [usize; 3] {
    let mut got = [0usize; 3];
    let mut sink = |p: u32, o: Outputs<'_>| {
        let i = match p {
            1 => 0,
            2 => 1,
            _ => 2,
        };
        got[i] += o.len();
    };
    sw.process(
        port,
        frames.iter().map(|f| (&f[..], 0u64)),
        now_ms,
        &mut sink,
    );
    got
}

#[test]
fn whole_batches_find_their_connections() {
    // 100 connections, each direction sent as whole batches: every reply
    // must find its connection (a batch's lookups are prefetched and
    // hashed ahead of the `ct`; a wrong hash would make replies `+new`,
    // counted on port 9).
    let mut sw = switch(FIREWALL);
    let n = 100u16;
    let fwd: Vec<Vec<u8>> = (0..n).map(|i| udp((A, 1000 + i), (B, 53))).collect();
    let rev: Vec<Vec<u8>> = (0..n).map(|i| udp((B, 53), (A, 1000 + i))).collect();
    let stray: Vec<Vec<u8>> = (0..n).map(|i| udp((B, 53), (A, 5000 + i))).collect();
    assert_eq!(send_all(&mut sw, 1, &fwd, 1), [0, 100, 0], "A opens");
    for t in 2..5 {
        assert_eq!(send_all(&mut sw, 2, &rev, t), [100, 0, 0], "B answers");
        assert_eq!(send_all(&mut sw, 1, &fwd, t), [0, 100, 0], "A again");
    }
    assert_eq!(
        send_all(&mut sw, 2, &stray, 6),
        [0, 0, 100],
        "B cannot open"
    );
}

#[test]
fn the_pass_after_nat_sees_the_translated_headers() {
    // The second pass of an unchanged packet starts from the first pass's
    // key; one that NAT rewrote is parsed again: the address it matches
    // on is the translated one (or nothing would leave on port 2), and
    // its reply's pass the one translated back.
    let mut sw = switch(
        "table=0,priority=10,ip,in_port=1,ct_state=-trk,actions=ct(commit,nat(src=10.200.0.7),table=1)\n\
         table=0,priority=10,ip,in_port=2,ct_state=-trk,actions=ct(nat,table=1)\n\
         table=1,priority=10,ip,nw_src=10.200.0.7,actions=output:2\n\
         table=1,priority=10,ip,nw_dst=10.0.0.1,actions=output:1\n\
         table=1,priority=0,actions=output:9\n",
    );
    let fwd: Vec<Vec<u8>> = (0..40u16).map(|i| udp((A, 1000 + i), (B, 53))).collect();
    let rev: Vec<Vec<u8>> = (0..40u16)
        .map(|i| udp((B, 53), ([10, 200, 0, 7], 1000 + i)))
        .collect();
    for t in 1..4 {
        assert_eq!(
            send_all(&mut sw, 1, &fwd, t),
            [0, 40, 0],
            "A out, round {t}"
        );
        assert_eq!(
            send_all(&mut sw, 2, &rev, t),
            [40, 0, 0],
            "replies, round {t}"
        );
    }
}

/// The (not inverted) pseudo-header sum of an Ethernet/IPv4/TCP frame.
fn tcp4_pseudo_sum(f: &[u8]) -> u16 {
    let mut s: u32 = 6 + (f.len() - 34) as u32;
    for c in f[26..34].chunks(2) {
        s += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

#[test]
fn nat_keeps_a_partial_checksum_a_pseudo_header_sum() {
    // A segment whose checksum was left to offload (from a port with
    // offloads: `push_offloaded`) goes through source NAT of its address
    // and port: its checksum field must stay the pseudo-header's sum, now
    // over the new address (the ports are not in it).
    let mut sw = switch(
        "table=0,priority=10,ip,in_port=1,ct_state=-trk,actions=ct(commit,nat(src=10.200.0.7:2000),table=1)\n\
         table=1,priority=10,ip,actions=output:2\n",
    );
    let mut f = tcp((A, 1000), (B, 80), "S", 100, 0, &[]);
    let s = tcp4_pseudo_sum(&f);
    f[50..52].copy_from_slice(&s.to_be_bytes());
    let mut got = Vec::new();
    let mut sink = |_: u32, o: Outputs<'_>| {
        for x in o.iter() {
            got.push(x.data.to_vec());
        }
    };
    sw.push_offloaded(1, &f, 0, true).unwrap();
    sw.flush(1, &mut sink);
    assert_eq!(got.len(), 1);
    let out = &got[0];
    assert_eq!(&out[26..30], &[10, 200, 0, 7], "source address translated");
    assert_eq!(u16::from_be_bytes([out[34], out[35]]), 2000, "source port");
    assert_eq!(
        u16::from_be_bytes([out[50], out[51]]),
        tcp4_pseudo_sum(out),
        "the field is the new pseudo-header's sum"
    );
}
