//! Flow sampling on a running `flowpath switch`: a capture played once
//! into port 1 through rules with `sample(...)`; `ovs-ofctl
//! dump-ipfix-flow` shows each flow-sample collector set's counters as Open
//! vSwitch counts them (sampled packets, IPv4 ok, errors, flows, messages
//! sent), and the set's IPFIX collector (a UDP socket here) receives
//! records whose packet counts add up to the sampled packets. Without
//! collector sets the request gets OVS's `NXST_NOT_CONFIGURED`.

mod ofctl_util;

use ofctl_util::{have_ofctl, ofctl, pcap_file, spawn_in, start_with, BIN};
use std::net::UdpSocket;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// UDP frames (sampled at 100 %).
const UDP: u32 = 90;
/// GRE frames (IPv4 of a protocol no record describes: errors).
const GRE: u32 = 10;

/// One Ethernet/IPv4 frame of protocol `proto`, flow `i % 3`.
fn frame(proto: u8, i: u32) -> Vec<u8> {
    let mut f = vec![0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 1, 0x08, 0x00];
    f.extend([0x45, 0, 0, 50, 0, 0, 0, 0, 64, proto, 0, 0]);
    f.extend([10, 0, 0, 1, 10, 1, 0, (i % 3) as u8]);
    f.extend((1024 + (i % 3) as u16).to_be_bytes());
    f.extend(80u16.to_be_bytes());
    f.extend(30u16.to_be_bytes());
    f.extend([0, 0]);
    f.resize(64, 0xab);
    f
}

fn write_pcap(path: &Path) {
    let frames: Vec<Vec<u8>> = (0..UDP + GRE)
        .map(|i| frame(if i < UDP { 17 } else { 47 }, i))
        .collect();
    std::fs::write(path, pcap_file(&frames)).unwrap();
}

/// `NAME=N` in `text` (the first one).
fn field(text: &str, name: &str) -> u64 {
    let key = format!("{name}=");
    let at = text
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in {text}"));
    text[at + key.len()..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("bad {name} in {text}"))
}

/// The sum of the packetDeltaCount fields of the IPFIX messages `sock`
/// has received (flowpath's template: the count at byte 75 of each
/// 107-byte record), and the number of messages.
fn collected(sock: &UdpSocket) -> (u64, u64) {
    let (mut pkts, mut msgs) = (0, 0);
    let mut buf = [0u8; 4096];
    while let Ok(n) = sock.recv(&mut buf) {
        let m = &buf[..n];
        assert_eq!(u16::from_be_bytes([m[0], m[1]]), 10, "IPFIX version");
        assert_eq!(usize::from(u16::from_be_bytes([m[2], m[3]])), n);
        assert_eq!(u32::from_be_bytes([m[12], m[13], m[14], m[15]]), 3);
        msgs += 1;
        // The template set, then the data set.
        let t = 16 + usize::from(u16::from_be_bytes([m[18], m[19]]));
        assert_eq!(u16::from_be_bytes([m[t], m[t + 1]]), 256);
        let end = t + usize::from(u16::from_be_bytes([m[t + 2], m[t + 3]]));
        let mut r = t + 4;
        assert_eq!((end - r) % 107, 0, "whole records");
        while r + 107 <= end {
            pkts += u64::from_be_bytes(m[r + 75..r + 83].try_into().unwrap());
            r += 107;
        }
    }
    (pkts, msgs)
}

#[test]
fn without_collector_sets_ipfix_is_not_configured() {
    if !have_ofctl() {
        return;
    }
    let sw = start_with("ipfix0", &[]);
    for cmd in ["dump-ipfix-flow", "dump-ipfix-bridge"] {
        // (`ovs-ofctl` prints the error and exits 0, as with OVS.)
        let (_, out, err) = ofctl(&sw, &[cmd, "br0"]);
        assert!(
            out.contains("OFPT_ERROR") && out.contains("NXST_NOT_CONFIGURED"),
            "{cmd}: {out} {err}"
        );
    }
}

#[test]
fn dump_ipfix_flow_counts_and_the_collector_gets_the_records() {
    if !have_ofctl() {
        return;
    }
    let collector = UdpSocket::bind("127.0.0.1:0").unwrap();
    collector
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let target = collector.local_addr().unwrap();
    let dir = std::env::temp_dir().join(format!("fpipfix-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("in.pcap");
    write_pcap(&pcap);
    std::fs::write(
        dir.join("r.flows"),
        "in_port=1,ip,actions=sample(probability=65535,collector_set_id=5,obs_domain_id=3,obs_point_id=4),output:2\n",
    )
    .unwrap();
    let mut cmd = Command::new(BIN);
    cmd.arg("switch")
        .arg("--rules")
        .arg(dir.join("r.flows"))
        .arg("--port")
        .arg(format!("1=pcap:{}", pcap.display()))
        .args(["--port", "2=null"])
        .arg("--sample-collector-set")
        .arg(format!("5={target}"))
        .args(["--sample-collector-set", "6"]);
    let sw = spawn_in(dir, &mut cmd);
    let t0 = Instant::now();
    let want = u64::from(UDP + GRE);
    let mut text;
    loop {
        let (ok, out, err) = ofctl(&sw, &["dump-ipfix-flow", "br0"]);
        assert!(ok, "{err}");
        text = out;
        if text.contains("id   5:") && field(&text, "sampled pkts") == want {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "{text}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // As OVS prints it: both sets, in id order.
    assert!(text.starts_with("NXST_IPFIX_FLOW reply"), "{text}");
    assert!(text.contains(" 2 ids"), "{text}");
    let five = &text[text.find("id   5:").unwrap()..text.find("id   6:").unwrap()];
    let six = &text[text.find("id   6:").unwrap()..];
    assert_eq!(field(five, "ipv4 ok"), u64::from(UDP), "{five}");
    assert_eq!(field(five, "ipv4 errs"), u64::from(GRE), "{five}");
    assert_eq!(field(five, "pkts errs"), u64::from(GRE), "{five}");
    assert_eq!(field(five, "ipv6 ok"), 0, "{five}");
    assert!(
        field(five, "flows") >= 6,
        "three UDP and three GRE flows: {five}"
    );
    assert_eq!(field(six, "sampled pkts"), 0, "{six}");
    // The records reach the collector: their packet counts add up.
    let (mut pkts, mut msgs) = (0, 0);
    while pkts < want {
        let (p, m) = collected(&collector);
        pkts += p;
        msgs += m;
        assert!(t0.elapsed() < Duration::from_secs(30), "{pkts} of {want}");
    }
    assert_eq!(pkts, want);
    let (_, out, _) = ofctl(&sw, &["dump-ipfix-flow", "br0"]);
    let five = &out[out.find("id   5:").unwrap()..out.find("id   6:").unwrap()];
    assert_eq!(field(five, "tx pkts"), msgs, "{five}");
    assert_eq!(field(five, "tx errs"), 0, "{five}");
    assert_eq!(field(five, "current flows"), 0, "{five}");
}
