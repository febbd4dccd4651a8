//! End-to-end tests of `flowpath gen sfr`: expand the seed's TRex profile
//! (`shared/trex-sfr/` beside the repository) for a short duration and
//! check the summary and both captures against the profile's arithmetic.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use pcap_file::pcap::PcapReader;

mod cmdline;

use cmdline::{fails, ok, s, temp_dir};

fn trex_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/trex-sfr")
}

/// The seed's profile, or None (the test is skipped) without shared/.
fn seed_profile() -> Option<PathBuf> {
    let p = trex_dir().join("sfr_delay_10_1g.yaml");
    if p.is_file() {
        Some(p)
    } else {
        eprintln!("{} not found: skipping", p.display());
        None
    }
}

/// (timestamp ns, frame) of every record.
fn read_pcap(path: &Path) -> Vec<(u128, Vec<u8>)> {
    let file = std::fs::File::open(path).expect("pcap exists");
    let mut r = PcapReader::new(file).expect("pcap header");
    let mut v = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.expect("pcap record");
        v.push((p.timestamp.as_nanos(), p.data.into_owned()));
    }
    v
}

/// The (name, cps) of every template, read from the YAML by line.
fn templates(yaml: &str) -> Vec<(String, f64)> {
    let mut v: Vec<(String, f64)> = Vec::new();
    for line in yaml.lines() {
        let line = line.trim().trim_start_matches("- ");
        if let Some(n) = line.strip_prefix("name:") {
            v.push((n.trim().to_string(), 0.0));
        } else if let Some(c) = line.strip_prefix("cps :") {
            v.last_mut().expect("cps after name").1 = c.trim().parse().expect("cps");
        }
    }
    v
}

/// The numbers in a line, in order.
fn numbers(line: &str) -> Vec<f64> {
    line.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter_map(|w| w.trim_matches('.').parse().ok())
        .collect()
}

fn ones_sum(b: &[u8]) -> u32 {
    b.chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum()
}

/// Whether an IPv4 TCP/UDP frame's checksums verify (UDP 0 = none).
fn checksums_ok(frame: &[u8]) -> bool {
    let fold = |mut s: u32| {
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        s
    };
    let ip = &frame[14..];
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    if fold(ones_sum(&ip[..ihl])) != 0xffff {
        return false;
    }
    let l4 = &ip[ihl..total];
    let proto = ip[9];
    if proto == 17 && l4[6..8] == [0, 0] {
        return true;
    }
    let mut pseudo = ip[12..20].to_vec();
    pseudo.extend_from_slice(&[0, proto]);
    pseudo.extend_from_slice(&(l4.len() as u16).to_be_bytes());
    fold(ones_sum(&pseudo) + ones_sum(l4)) == 0xffff
}

fn in_range(a: [u8; 4], lo: [u8; 4], hi: [u8; 4]) -> bool {
    let a = u32::from(Ipv4Addr::from(a));
    (u32::from(Ipv4Addr::from(lo))..=u32::from(Ipv4Addr::from(hi))).contains(&a)
}

/// The profile's figures at M = 1 are TRex's (shared/trex-sfr/README.md),
/// and the captures hold cps × M × duration copies of every template.
#[test]
fn sfr_expansion_matches_the_profile() {
    let Some(profile) = seed_profile() else {
        return;
    };
    let d = temp_dir("expand");
    let out = d.join("sfr");
    let duration = 0.2;
    let stdout = ok(&["gen", "sfr", "--duration", "0.2", "-o", s(&out)]);
    let lines: Vec<&str> = stdout.lines().collect();

    // TRex at -m 1: 4,083.9 new flows/s, 215,136 packets/s, 583 B average,
    // about 1 Gbit/s, ~2,966 concurrent flows.
    let fig = numbers(lines[0]);
    assert!(lines[0].starts_with("profile x1:"), "{}", lines[0]);
    assert_eq!(fig[1], 4083.9, "{}", lines[0]);
    assert_eq!(fig[2].round(), 215_136.0, "{}", lines[0]);
    assert_eq!(fig[3].floor(), 583.0, "{}", lines[0]);
    assert!((fig[4] - 1000.0).abs() < 10.0, "{}", lines[0]);
    assert_eq!(fig[5], 2966.0, "{}", lines[0]);

    // Per template: ceil(cps × duration) copies, each the whole capture.
    let yaml = std::fs::read_to_string(&profile).expect("profile");
    let specs = templates(&yaml);
    assert_eq!(specs.len(), 18);
    let (mut want_packets, mut want_bad, mut want_flows) = (0u64, 0u64, 0u64);
    for (name, cps) in &specs {
        let line = lines
            .iter()
            .find(|l| l.starts_with(&format!("template {name}:")))
            .unwrap_or_else(|| panic!("no line for {name} in {stdout}"));
        let n = numbers(line.split_once(':').expect("colon").1);
        let (flows, packets) = (n[0], n[2] as u64);
        let expected = cps * duration;
        assert!(
            flows >= expected && flows < expected + 1.0,
            "{name}: {flows} copies for cps {cps} x {duration} s"
        );
        let file = Path::new(name).file_name().expect("file name");
        let tpl = read_pcap(&trex_dir().join(file));
        assert_eq!(packets, flows as u64 * tpl.len() as u64, "{line}");
        want_packets += packets;
        want_flows += flows as u64;
        want_bad += flows as u64 * tpl.iter().filter(|(_, f)| !checksums_ok(f)).count() as u64;
    }
    let written = numbers(lines[1]);
    assert_eq!(written[0] as u64, want_flows, "{}", lines[1]);
    assert_eq!(written[2] as u64, want_packets, "{}", lines[1]);

    let parts = std::fs::read_to_string(d.join("sfr.parts")).expect("parts");
    assert_eq!(parts, "sfr-c2s.pcap\nsfr-s2c.pcap\n");
    let rules = std::fs::read_to_string(d.join("sfr.flows")).expect("rules");
    assert_eq!(rules, "priority=0,actions=NORMAL\n");

    let clients = ([16, 0, 0, 1], [16, 0, 1, 255]);
    let servers = ([48, 0, 0, 1], [48, 0, 21, 245]);
    let (mut total, mut bad) = (0u64, 0u64);
    for (file, c2s) in [("sfr-c2s.pcap", true), ("sfr-s2c.pcap", false)] {
        let frames = read_pcap(&d.join(file));
        assert!(!frames.is_empty(), "{file} is empty");
        total += frames.len() as u64;
        let mut last = 0;
        for (i, (ts, f)) in frames.iter().enumerate() {
            assert!(*ts >= last, "{file} frame {i}: time goes back");
            last = *ts;
            let p = SlicedPacket::from_ethernet(f)
                .unwrap_or_else(|e| panic!("{file} frame {i} does not parse: {e}"));
            let Some(NetSlice::Ipv4(ip)) = &p.net else {
                panic!("{file} frame {i}: not IPv4");
            };
            let (src, dst) = (ip.header().source(), ip.header().destination());
            let (client, server) = if c2s { (src, dst) } else { (dst, src) };
            assert!(
                in_range(client, clients.0, clients.1),
                "{file} frame {i}: client {client:?}"
            );
            assert!(
                in_range(server, servers.0, servers.1),
                "{file} frame {i}: server {server:?}"
            );
            let (sport, dport) = match &p.transport {
                Some(TransportSlice::Tcp(t)) => (t.source_port(), t.destination_port()),
                Some(TransportSlice::Udp(u)) => (u.source_port(), u.destination_port()),
                _ => panic!("{file} frame {i}: neither TCP nor UDP"),
            };
            let client_port = if c2s { sport } else { dport };
            assert!(
                client_port >= 1024,
                "{file} frame {i}: client port {client_port}"
            );
            let client_mac = [0, 0, 0, 1, 0, 0];
            let mac = if c2s { &f[6..12] } else { &f[0..6] };
            assert_eq!(mac, client_mac, "{file} frame {i}: client side MAC");
            bad += u64::from(!checksums_ok(f));
        }
    }
    assert_eq!(total, want_packets);
    // Rewriting keeps every checksum as right (or wrong: the RTP templates
    // carry some bad ones) as the template's.
    assert_eq!(bad, want_bad);
}

#[test]
fn sfr_is_deterministic_and_scales_with_the_multiplier() {
    let Some(_) = seed_profile() else {
        return;
    };
    let d = temp_dir("determinism");
    let (a, b, m) = (d.join("a"), d.join("b.pcap"), d.join("m"));
    ok(&["gen", "sfr", "-d", "0.05", "-o", s(&a)]);
    ok(&["gen", "sfr", "-d", "0.05", "-o", s(&b)]);
    for suffix in ["-c2s.pcap", "-s2c.pcap"] {
        let x = std::fs::read(d.join(format!("a{suffix}"))).expect("a");
        let y = std::fs::read(d.join(format!("b{suffix}"))).expect("b");
        assert!(x == y, "{suffix} differs between two runs");
    }
    let out = ok(&["gen", "sfr", "-m", "3", "-d", "0.05", "-o", s(&m)]);
    let dns = out
        .lines()
        .find(|l| l.starts_with("template avl/delay_10_dns_0.pcap:"))
        .expect("dns line");
    // 1975.015 × 3 × 0.05 = 296.25 copies.
    assert!(dns.contains(": 297 flows (296.252 expected)"), "{dns}");
    assert!(out.starts_with("profile x3: 12251.6 flows/s"), "{out}");
}

#[test]
fn sfr_errors_name_the_file_field_and_value() {
    let Some(profile) = seed_profile() else {
        return;
    };
    let d = temp_dir("errors");
    let yaml = std::fs::read_to_string(&profile).expect("profile");
    let bad = yaml.replacen("cps : 404.52", "cps : fast", 1);
    let line = bad
        .lines()
        .position(|l| l.contains("cps : fast"))
        .expect("replaced")
        + 1;
    let bad_path = d.join("bad.yaml");
    std::fs::write(&bad_path, bad).expect("write");
    let err = fails(&[
        "gen",
        "sfr",
        "--profile",
        s(&bad_path),
        "-o",
        s(&d.join("x")),
    ]);
    let want = format!(
        "{}:{line}:14: cap_info[0].cps: expected a number, got 'fast'",
        bad_path.display()
    );
    assert!(err.contains(&want), "{err}\nwanted {want}");

    // A template that is no capture: the error names the file.
    std::fs::write(d.join("junk.pcap"), b"not a capture").expect("write");
    let junk = d.join("junk.yaml");
    std::fs::write(
        &junk,
        "- duration: 1\n  generator:\n    distribution: seq\n    clients_start: 16.0.0.1\n    \
         clients_end: 16.0.0.9\n    servers_start: 48.0.0.1\n    servers_end: 48.0.0.9\n  \
         cap_ipg: true\n  cap_info:\n    - name: avl/junk.pcap\n      cps: 1\n",
    )
    .expect("write");
    let err = fails(&["gen", "sfr", "--profile", s(&junk), "-o", s(&d.join("x"))]);
    assert!(err.contains("junk.pcap"), "{err}");

    let missing = d.join("missing.yaml");
    let err = fails(&[
        "gen",
        "sfr",
        "--profile",
        s(&missing),
        "-o",
        s(&d.join("x")),
    ]);
    assert!(err.contains(s(&missing)), "{err}");
}
