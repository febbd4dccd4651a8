//! AF_XDP ports whose veth peers keep tx checksum offload on, as root:
//! namespaces 1 and 2 (own namespaces and veths, removed even when the
//! test fails; processes stopped by PID) joined through the switch's
//! `afxdp:` ports, the namespace ends left with their default offloads.
//!
//! Native mode (the peer's TSO is turned off by the kernel): TCP frames
//! reach the switch with partial checksums, which AF_XDP does not flag;
//! the switch must finish them (iperf3 passes data), count them
//! (`rx_csum_partial` in `dpctl/show`) and say so once per port with the
//! remedy — not stall silently. Generic mode (the peer keeps TSO): the
//! kernel drops the GSO super-frames before the socket sees them; the
//! switch must count them (`rx_too_big`) and say so once, with the remedy.

mod ofnet;

use ofnet::{can_run, sh, wait_until, Topo, BIN};
use std::process::{Command, Output};
use std::sync::Mutex;
use std::time::Duration;

/// One topology at a time (iperf3 would otherwise measure the other).
static LOCK: Mutex<()> = Mutex::new(());

const FWD: &str = "\
priority=10,in_port=1,actions=output:2
priority=10,in_port=2,actions=output:1
priority=0,actions=drop
";

/// What the log line says (once per port).
const LOG_LINE: &str = "peer sends partial checksums (tx checksum offload on): finished in \
                        software; for speed: ethtool -K PEER tx off";

/// `flowpath ctl --ctl CTL ARGS`, which must succeed: its stdout.
fn ctl(t: &Topo, args: &[&str]) -> String {
    let o = Command::new(BIN)
        .arg("ctl")
        .arg("--ctl")
        .arg(t.path("flowpath.ctl"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "ctl {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Namespaces 1 and 2 joined by a switch with `afxdp:` ports (`opts`
/// appended to each spec), the peers' offloads as they are by default.
fn topo_and_switch(tag: &str, opts: &str) -> Topo {
    let mut t = Topo::new(tag);
    for i in 1..=2 {
        // The precondition of the test: the namespace end hands frames
        // over with the checksum left to offload.
        let k = t.in_ns(i, 10, &format!("ethtool -k {}p{i}", t.tag));
        let k = String::from_utf8_lossy(&k.stdout).into_owned();
        assert!(
            k.lines().any(|l| l.trim() == "tx-checksumming: on"),
            "peer {i}: tx checksum offload is not on: {k}"
        );
        // Native XDP on veth wants NAPI (GRO) on the receiving end.
        let _ = sh(&format!("ethtool -K {} gro on", t.veth(i)));
        let _ = t.in_ns(i, 10, &format!("ethtool -K {}p{i} gro on", t.tag));
    }
    let rules = t.path("fwd.flows");
    std::fs::write(&rules, FWD).unwrap();
    let mut cmd = Command::new(BIN);
    cmd.arg("switch")
        .arg("--rules")
        .arg(&rules)
        .arg("--ctl")
        .arg(t.path("flowpath.ctl"));
    for i in 1..=2 {
        cmd.arg("--port")
            .arg(format!("{i}=afxdp:{}{opts}", t.veth(i)));
    }
    t.start(cmd, "switch.log");
    let ctl_path = t.path("flowpath.ctl");
    assert!(
        wait_until(Duration::from_secs(10), || ctl_path.exists()),
        "switch did not start: {}",
        t.log("switch.log")
    );
    assert!(t.ping(1, 2), "ping 1 -> 2: {}", t.log("switch.log"));
    t
}

/// iperf3 from namespace 1 to namespace 2 with `args` (bounded: 20 s).
fn iperf(t: &mut Topo, args: &str) -> Output {
    let mut server = Command::new("ip");
    server.args(["netns", "exec", &t.ns(2), "iperf3", "-s", "-1"]);
    t.start(server, "iperf3-server.log");
    assert!(t.listening_in(2, 5201), "{}", t.log("iperf3-server.log"));
    t.in_ns(1, 20, &format!("iperf3 -c 10.77.0.2 -J {args}"))
}

/// Port `port`'s counter `key` in `dpctl/show --json`.
fn counter(show: &serde_json::Value, port: u64, key: &str) -> u64 {
    show["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["port_no"] == port)
        .and_then(|p| p[key].as_u64())
        .unwrap_or(0)
}

/// How many lines of the switch's log name port `i` and say `what`.
fn log_lines(t: &Topo, i: u32, what: &str) -> usize {
    let port = format!("port 'afxdp:{}", t.veth(i));
    t.log("switch.log")
        .lines()
        .filter(|l| l.contains(&port) && l.contains(what))
        .count()
}

#[test]
fn afxdp_with_peer_checksum_offload_on_forwards_counts_and_says_so() {
    let test = "afxdp_with_peer_checksum_offload_on_forwards_counts_and_says_so";
    if !can_run(test, &["ip", "ping", "iperf3", "ethtool"]) {
        return;
    }
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let mut t = topo_and_switch("xc", "");
    let client = iperf(&mut t, "-t 2");
    let out = String::from_utf8_lossy(&client.stdout);
    assert!(
        client.status.success(),
        "iperf3 failed (a stall?): {out}\nswitch: {}",
        t.log("switch.log")
    );
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    let bytes = j["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
    let bps = j["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0);
    eprintln!(
        "{test}: iperf3 TCP 1 stream, 2 s, peers' tx checksum offload on: {:.2} Gbit/s",
        bps / 1e9
    );
    assert!(bytes > 0, "no TCP data passed: {out}");

    // UDP for 1 s: the datagrams' checksums are finished too (a receiver
    // drops every one with a partial checksum).
    let client = iperf(&mut t, "-u -b 100M -t 1");
    let out = String::from_utf8_lossy(&client.stdout);
    assert!(client.status.success(), "iperf3 -u failed: {out}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    let (sent, lost) = (
        j["end"]["sum"]["packets"].as_u64().unwrap_or(0),
        j["end"]["sum"]["lost_packets"].as_u64().unwrap_or(0),
    );
    eprintln!("{test}: iperf3 UDP 100 Mbit/s, 1 s: {lost} of {sent} datagrams lost");
    assert!(sent > 0 && lost < sent, "no UDP datagram arrived: {out}");

    // The counter: both peers sent partial checksums (data one way, ACKs
    // the other).
    let show: serde_json::Value =
        serde_json::from_str(&ctl(&t, &["dpctl/show", "--json"])).unwrap();
    let (p1, p2) = (
        counter(&show, 1, "rx_csum_partial"),
        counter(&show, 2, "rx_csum_partial"),
    );
    eprintln!("{test}: rx_csum_partial port 1: {p1}, port 2: {p2}");
    assert!(p1 > 0 && p2 > 0, "rx_csum_partial: {show}");
    let text = ctl(&t, &["dpctl/show"]);
    let shown: Vec<u64> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("rx_csum_partial:"))
        .map(|n| n.split(' ').next().unwrap().parse().unwrap())
        .collect();
    assert!(shown.len() == 2 && shown.iter().all(|&n| n > 0), "{text}");

    // The log line, once per port, naming the port and the remedy.
    let log = t.log("switch.log");
    for i in 1..=2 {
        assert_eq!(log_lines(&t, i, LOG_LINE), 1, "port {i}: {log}");
        assert!(
            log.contains(&format!("or use afpacket:{}", t.veth(i))),
            "{log}"
        );
    }
    assert_eq!(log_lines(&t, 1, TOO_BIG), 0, "{log}");
}

/// What the log says of GSO super-frames (once per port).
const TOO_BIG: &str = "bytes dropped by the kernel (AF_XDP takes no GSO super-frames)";

#[test]
fn afxdp_generic_mode_with_peer_tso_on_counts_and_says_so() {
    let test = "afxdp_generic_mode_with_peer_tso_on_counts_and_says_so";
    if !can_run(test, &["ip", "ping", "iperf3", "ethtool"]) {
        return;
    }
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let mut t = topo_and_switch("xg", ",mode=generic");
    let k = t.in_ns(1, 10, &format!("ethtool -k {}p1", t.tag));
    let k = String::from_utf8_lossy(&k.stdout).into_owned();
    assert!(
        k.lines()
            .any(|l| l.trim() == "tcp-segmentation-offload: on"),
        "the peer's TSO is not on: {k}"
    );
    // TCP barely passes (only retransmitted single segments fit): what
    // matters is that the switch says why. (A kernel that segmented GSO
    // frames for generic XDP would let TCP pass: then there is nothing to
    // say.)
    let client = iperf(&mut t, "-t 2");
    let j: serde_json::Value = serde_json::from_slice(&client.stdout).unwrap_or_default();
    let bps = j["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0);
    eprintln!(
        "{test}: iperf3 TCP 1 stream, 2 s, generic mode, peers' TSO on: {:.4} Gbit/s",
        bps / 1e9
    );
    let logged = wait_until(Duration::from_secs(5), || log_lines(&t, 1, TOO_BIG) == 1);
    let show: serde_json::Value =
        serde_json::from_str(&ctl(&t, &["dpctl/show", "--json"])).unwrap();
    let big = counter(&show, 1, "rx_too_big");
    eprintln!(
        "{test}: rx_too_big port 1: {big}, rx_csum_partial port 1: {}",
        counter(&show, 1, "rx_csum_partial")
    );
    if bps > 1e8 && big == 0 {
        eprintln!("{test}: this kernel hands generic XDP no GSO frames; nothing to say");
        return;
    }
    assert!(big > 0, "TCP stalled, no frame counted too big: {show}");
    assert!(logged, "no log line: {}", t.log("switch.log"));
    let log = t.log("switch.log");
    assert!(
        log.contains("remedy: ethtool -K PEER tx off") && log.contains("mode=native"),
        "{log}"
    );
    assert_eq!(log_lines(&t, 1, TOO_BIG), 1, "{log}");
}
