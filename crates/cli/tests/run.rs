//! End-to-end tests of `flowpath run` (the built binary): a generated
//! capture through rules that drop, output to several ports and rewrite
//! fields, checked packet by packet in the per-port output captures
//! against frames built independently with `etherparse`; every capture of
//! the shared corpus; the JSON statistics; the megaflow dump; errors.

use etherparse::{NetHeaders, PacketBuilder, PacketHeaders, TransportHeader, VlanId};
use flowpath_io::{load_ethernet_frames, PcapReader, PcapWriter};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod cmdline;

use cmdline::{fails, flowpath, ok, s, temp_dir};

const SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
const V6_A: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const V6_B: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

const RULES: &str = "\
# drop, output, rewrite
priority=100,udp,tp_dst=9,actions=drop
priority=90,tcp,nw_dst=10.0.0.2,tp_dst=80,actions=mod_nw_dst:192.168.1.1,mod_tp_dst:8080,output:2
priority=80,tcp,tp_dst=22,actions=output:3,dec_ttl,output:4
priority=70,udp,dl_vlan=10,actions=strip_vlan,output:5
priority=60,udp,actions=mod_vlan_vid:42,output:6
priority=50,ipv6,actions=dec_ttl,output:7
priority=0,actions=drop
";

/// The kinds of generated packets, with the outputs the rules give them.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// UDP to port 9: dropped.
    Discard,
    /// TCP to 10.0.0.2:80: rewritten to 192.168.1.1:8080, port 2.
    Web,
    /// TCP to port 22: original to port 3, TTL-1 to port 4.
    Ssh,
    /// UDP tagged VLAN 10: untagged to port 5.
    Tagged,
    /// Other UDP: tagged VLAN 42 to port 6.
    Plain,
    /// IPv6 UDP: hop limit - 1 to port 7.
    V6,
}

/// The frame of packet `i` of kind `k` (`src_port` varies the flow).
/// `ttl`, `dst`, `dport`, `vlan` override the header values (to build
/// the expected rewritten frames the same way).
struct Spec {
    ttl: u8,
    dst: [u8; 4],
    dport: u16,
    vlan: Option<u16>,
}

fn tcp(sport: u16, sp: &Spec, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    PacketBuilder::ethernet2(SRC_MAC, DST_MAC)
        .ipv4([10, 0, 0, 1], sp.dst, sp.ttl)
        .tcp(sport, sp.dport, 1000 + u32::from(sport), 4096)
        .write(&mut v, payload)
        .unwrap();
    v
}

fn udp(sport: u16, sp: &Spec, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    let eth = PacketBuilder::ethernet2(SRC_MAC, DST_MAC);
    match sp.vlan {
        Some(vid) => eth
            .single_vlan(VlanId::try_new(vid).unwrap())
            .ipv4([10, 0, 0, 1], sp.dst, sp.ttl)
            .udp(sport, sp.dport)
            .write(&mut v, payload)
            .unwrap(),
        None => eth
            .ipv4([10, 0, 0, 1], sp.dst, sp.ttl)
            .udp(sport, sp.dport)
            .write(&mut v, payload)
            .unwrap(),
    }
    v
}

fn udp6(sport: u16, hop: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    PacketBuilder::ethernet2(SRC_MAC, DST_MAC)
        .ipv6(V6_A, V6_B, hop)
        .udp(sport, 53)
        .write(&mut v, payload)
        .unwrap();
    v
}

/// Input frame and expected (port, frame) outputs, in action order.
fn packet(kind: Kind, sport: u16) -> (Vec<u8>, Vec<(u32, Vec<u8>)>) {
    let payload: Vec<u8> = (0..(sport % 50) as u8).collect();
    let base = Spec {
        ttl: 64,
        dst: [10, 0, 0, 2],
        dport: 0,
        vlan: None,
    };
    match kind {
        Kind::Discard => (udp(sport, &Spec { dport: 9, ..base }, &payload), vec![]),
        Kind::Web => {
            let input = tcp(sport, &Spec { dport: 80, ..base }, &payload);
            let want = tcp(
                sport,
                &Spec {
                    dport: 8080,
                    dst: [192, 168, 1, 1],
                    ..base
                },
                &payload,
            );
            (input, vec![(2, want)])
        }
        Kind::Ssh => {
            let input = tcp(sport, &Spec { dport: 22, ..base }, &payload);
            let want = tcp(
                sport,
                &Spec {
                    dport: 22,
                    ttl: 63,
                    ..base
                },
                &payload,
            );
            (input.clone(), vec![(3, input), (4, want)])
        }
        Kind::Tagged => {
            let sp = Spec {
                dport: 53,
                vlan: Some(10),
                ..base
            };
            let want = udp(sport, &Spec { vlan: None, ..sp }, &payload);
            (udp(sport, &sp, &payload), vec![(5, want)])
        }
        Kind::Plain => {
            let sp = Spec { dport: 53, ..base };
            let want = udp(
                sport,
                &Spec {
                    vlan: Some(42),
                    ..sp
                },
                &payload,
            );
            (udp(sport, &sp, &payload), vec![(6, want)])
        }
        Kind::V6 => (
            udp6(sport, 64, &payload),
            vec![(7, udp6(sport, 63, &payload))],
        ),
    }
}

const KINDS: [Kind; 6] = [
    Kind::Discard,
    Kind::Web,
    Kind::Ssh,
    Kind::Tagged,
    Kind::Plain,
    Kind::V6,
];

/// Packets in the generated capture.
const N: usize = 600;

/// The kind of packet `i` of the generated capture: repeating flows,
/// kinds interleaved irregularly.
fn kind_of(i: usize) -> Kind {
    KINDS[(i * 7 + i / 13) % KINDS.len()]
}

/// Per output port, the expected (timestamp, frame) list.
type PortFrames = BTreeMap<u32, Vec<(u64, Vec<u8>)>>;

/// Writes the generated capture; returns what each port must send and the
/// number of input packets.
fn generated_capture(dir: &Path) -> (PathBuf, PortFrames, usize) {
    let path = dir.join("in.pcap");
    let mut w = PcapWriter::create(&path, 0).unwrap();
    let mut want = PortFrames::new();
    let base_ns = 1_700_000_000_000_000_000u64;
    let n = N;
    for i in 0..n {
        // Repeating flows (10 per kind), in bursts of a few per ms.
        let kind = kind_of(i);
        let sport = 1000 + (i % 10) as u16;
        let ts = base_ns + (i as u64 / 5) * 1_000_000 + i as u64;
        let (input, outs) = packet(kind, sport);
        w.write(ts, &input).unwrap();
        for (port, frame) in outs {
            want.entry(port).or_default().push((ts, frame));
        }
    }
    w.finish().unwrap();
    (path, want, n)
}

/// Checks every checksum of `frame` that etherparse can compute.
fn assert_checksums(frame: &[u8]) {
    let h = PacketHeaders::from_ethernet_slice(frame).unwrap();
    let payload = h.payload.slice();
    match (&h.net, &h.transport) {
        (Some(NetHeaders::Ipv4(ip, _)), t) => {
            assert_eq!(ip.header_checksum, ip.calc_header_checksum());
            match t {
                Some(TransportHeader::Tcp(tcp)) => {
                    assert_eq!(tcp.checksum, tcp.calc_checksum_ipv4(ip, payload).unwrap())
                }
                Some(TransportHeader::Udp(udp)) => {
                    assert_eq!(udp.checksum, udp.calc_checksum_ipv4(ip, payload).unwrap())
                }
                _ => {}
            }
        }
        (Some(NetHeaders::Ipv6(ip, _)), Some(TransportHeader::Udp(udp))) => {
            assert_eq!(udp.checksum, udp.calc_checksum_ipv6(ip, payload).unwrap())
        }
        other => panic!("unexpected headers {other:?}"),
    }
}

fn read_capture(path: &Path) -> Vec<(u64, Vec<u8>)> {
    let mut r = PcapReader::open(path).unwrap();
    let mut v = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.unwrap();
        assert_eq!(p.link_type, 1);
        v.push((p.timestamp_ns, p.data.to_vec()));
    }
    v
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

const TIERS: [&str; 10] = [
    "emc_hits",
    "smc_hits",
    "dfc_hits",
    "cd_hits",
    "hybrid_hits",
    "other_hits",
    "megaflow_hits",
    "miss_with_success_upcall",
    "miss_with_failed_upcall",
    "lost",
];

#[test]
fn generated_capture_outputs_match_packet_by_packet() {
    let dir = temp_dir("generated");
    let rules = dir.join("r.flows");
    std::fs::write(&rules, RULES).unwrap();
    let (pcap, want, _) = generated_capture(&dir);
    for (second, extra) in [
        ("none", &[][..]),
        ("smc", &["--no-megaflows"][..]),
        ("cd", &["--no-emc"][..]),
        ("dfc", &[][..]),
    ] {
        let out = dir.join(format!("out-{second}"));
        let mut args = vec![
            "run",
            "--rules",
            s(&rules),
            "--pcap",
            s(&pcap),
            "--out-dir",
            s(&out),
            "--second-level",
            second,
        ];
        args.extend_from_slice(extra);
        let text = ok(&args);
        assert!(
            text.starts_with("pmd thread numa_id 0 core_id 0:\n  packets received: 600\n"),
            "{text}"
        );
        for (port, frames) in &want {
            let got = read_capture(&out.join(format!("port-{port}.pcap")));
            assert_eq!(got.len(), frames.len(), "port {port} ({second})");
            for (j, ((gts, g), (wts, w))) in got.iter().zip(frames).enumerate() {
                assert_eq!(gts, wts, "port {port} packet {j}: timestamp");
                assert_eq!(g, w, "port {port} packet {j}: bytes ({second})");
                assert_checksums(g);
            }
            assert!(
                text.contains(&format!("  port {port}: packets:{}, ", frames.len())),
                "{text}"
            );
        }
        // Dropped packets go nowhere; no file for ports without output.
        let files: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(files.len(), want.len(), "{files:?}");
        let dropped = (0..N)
            .filter(|i| matches!(kind_of(*i), Kind::Discard))
            .count();
        assert!(dropped > 50);
        assert!(text.contains(&format!("  dropped: {dropped}\n")), "{text}");
    }
}

#[test]
fn json_statistics_add_up() {
    let dir = temp_dir("json");
    let rules = dir.join("r.flows");
    std::fs::write(&rules, RULES).unwrap();
    let (pcap, want, n) = generated_capture(&dir);
    for second in ["none", "smc", "dfc", "cd"] {
        for inv in ["1", "100", "0"] {
            let v = json(&ok(&[
                "run",
                "--rules",
                s(&rules),
                "--pcap",
                s(&pcap),
                "--json",
                "--second-level",
                second,
                "--emc-insert-inv-prob",
                inv,
            ]));
            let obj = v.as_object().unwrap();
            let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
            keys.sort_unstable();
            let mut expect = vec![
                "packets_received",
                "avg_subtable_lookups_per_megaflow_hit",
                "processing_cycles",
                "avg_processing_cycles_per_packet",
                "megaflows",
                "output_packets",
                "rx_invalid",
                "packet_recirculations",
                "avg_datapath_passes_per_packet",
            ];
            expect.extend_from_slice(&TIERS);
            expect.sort_unstable();
            assert_eq!(keys, expect);
            let received = v["packets_received"].as_u64().unwrap();
            assert_eq!(received, n as u64);
            let sum: u64 = TIERS.iter().map(|t| v[t].as_u64().unwrap()).sum();
            // Every pass (a recirculation is one more) is in one tier.
            let recirc = v["packet_recirculations"].as_u64().unwrap();
            assert_eq!(sum, received + recirc, "tiers add up: {v}");
            assert!(v["processing_cycles"].as_u64().unwrap() > 0);
            // Six kinds of packets × 10 flows; megaflows cover whole kinds.
            assert!(v["miss_with_success_upcall"].as_u64().unwrap() <= 60, "{v}");
            if inv == "0" {
                assert_eq!(v["emc_hits"], 0);
            } else {
                assert!(v["emc_hits"].as_u64().unwrap() > 0);
            }
            let second_hits = match second {
                "smc" => "smc_hits",
                "dfc" => "dfc_hits",
                "cd" => "cd_hits",
                _ => "megaflow_hits",
            };
            if inv == "0" || second == "none" {
                assert!(v[second_hits].as_u64().unwrap() > 0, "{second}: {v}");
            }
            for (port, frames) in &want {
                assert_eq!(v["output_packets"][port.to_string()], frames.len() as u64);
            }
        }
    }
}

#[test]
fn dump_flows_text_and_json() {
    let dir = temp_dir("dump");
    let rules = dir.join("r.flows");
    std::fs::write(&rules, RULES).unwrap();
    let (pcap, _, _) = generated_capture(&dir);
    let text = ok(&[
        "run",
        "--rules",
        s(&rules),
        "--pcap",
        s(&pcap),
        "--dump-flows",
    ]);
    let (_, dump) = text
        .split_once("megaflows (dpctl/dump-flows):\n")
        .expect("dump header");
    let lines: Vec<&str> = dump.lines().collect();
    let megaflows: usize = text
        .lines()
        .find_map(|l| l.strip_prefix("  megaflows: "))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(lines.len(), megaflows);
    assert!(megaflows >= 6, "{text}");
    for l in &lines {
        assert!(l.starts_with("recirc_id=0,eth,"), "{l}");
        assert!(
            l.contains(", packets:") && l.contains(", bytes:") && l.contains(", used:"),
            "{l}"
        );
    }
    assert!(
        lines.iter().any(|l| l.contains(",in_port=1,")
            && l.contains("actions:set(ipv4(dst=192.168.1.1)),set(tcp(dst=8080)),2")),
        "{dump}"
    );
    assert!(
        lines.iter().any(|l| l.ends_with("actions:pop_vlan,5")),
        "{dump}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.ends_with("actions:push_vlan(vid=42,pcp=0),6")),
        "{dump}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.ends_with("actions:3,set(ipv4(ttl=63)),4")),
        "{dump}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("udp") && l.ends_with("actions:drop")),
        "{dump}"
    );

    let v = json(&ok(&[
        "run",
        "--rules",
        s(&rules),
        "--pcap",
        s(&pcap),
        "--dump-flows",
        "--json",
    ]));
    let flows = v["flows"].as_array().unwrap();
    assert_eq!(flows.len() as u64, v["megaflows"].as_u64().unwrap());
    let mut hits = 0;
    for f in flows {
        let o = f.as_object().unwrap();
        let mut keys: Vec<&str> = o.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["actions", "bytes", "megaflow", "packets"]);
        assert!(f["megaflow"]
            .as_str()
            .unwrap()
            .starts_with("recirc_id=0,eth,"));
        hits += f["packets"].as_u64().unwrap();
    }
    // A megaflow counts its hits, not the packet whose upcall installed it.
    let received = v["packets_received"].as_u64().unwrap();
    assert_eq!(
        hits,
        received - v["miss_with_success_upcall"].as_u64().unwrap()
    );
    // Without --dump-flows there is no "flows" key.
    let v = json(&ok(&[
        "run",
        "--rules",
        s(&rules),
        "--pcap",
        s(&pcap),
        "--json",
    ]));
    assert!(v.get("flows").is_none());
}

fn walk(d: &Path, out: &mut Vec<PathBuf>) {
    let files =
        flowpath_io::corpus::capture_files(d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
    out.extend(files);
}

#[test]
fn every_corpus_capture_runs_or_fails_clearly() {
    let Some(dir) = flowpath_io::corpus::corpus_or_skip(
        env!("CARGO_MANIFEST_DIR"),
        "every_corpus_capture_runs_or_fails_clearly",
    ) else {
        return;
    };
    assert!(
        dir.is_dir(),
        "pcap corpus missing: {} (set FLOWPATH_PCAPS)",
        dir.display()
    );
    let mut files = Vec::new();
    walk(&dir, &mut files);
    assert!(
        files.len() >= 150,
        "only {} captures in {}",
        files.len(),
        dir.display()
    );
    let tmp = temp_dir("corpus");
    let rules = tmp.join("r.flows");
    std::fs::write(&rules, "priority=0,actions=output:2\n").unwrap();
    let (mut ran, mut refused, mut packets, mut invalid_total) = (0, 0, 0u64, 0u64);
    for f in &files {
        let args = ["run", "--rules", s(&rules), "--pcap", s(f), "--json"];
        match load_ethernet_frames(f) {
            Ok(frames) => {
                let v = json(&ok(&args));
                let n = frames.len() as u64;
                let received = v["packets_received"].as_u64().unwrap();
                let invalid = v["rx_invalid"].as_u64().unwrap();
                assert_eq!(received + invalid, n, "{}", f.display());
                let sent = v["output_packets"]
                    .get("2")
                    .map_or(0, |x| x.as_u64().unwrap());
                assert_eq!(
                    sent,
                    received,
                    "{}: every valid packet output to port 2",
                    f.display()
                );
                invalid_total += invalid;
                ran += 1;
                packets += n;
            }
            Err(e) => {
                let err = fails(&args);
                assert!(err.starts_with("flowpath: "), "{err}");
                assert!(
                    err.contains(&f.display().to_string()),
                    "names the file: {err}"
                );
                assert!(!err.contains("panicked"), "{err}");
                if let flowpath_io::IoError::NotEthernet { link_type, .. } = e {
                    assert!(err.contains(&format!("link type {link_type} (")), "{err}");
                    assert!(err.contains("is not Ethernet"), "{err}");
                }
                refused += 1;
            }
        }
    }
    println!(
        "{ran} captures run ({packets} packets, {invalid_total} never valid), {refused} refused"
    );
    assert!(
        invalid_total < packets / 100,
        "few frames are never valid: {invalid_total}"
    );
    assert!(ran >= 100 && refused >= 5, "{ran} run, {refused} refused");
    assert!(packets >= 100_000);
}

#[test]
fn bad_inputs_give_clear_errors() {
    let dir = temp_dir("errors");
    let rules = dir.join("r.flows");
    std::fs::write(&rules, "priority=0,actions=output:2\n").unwrap();
    let (pcap, _, _) = generated_capture(&dir);
    let missing = dir.join("missing.pcap");
    let err = fails(&["run", "--rules", s(&rules), "--pcap", s(&missing)]);
    assert!(
        err.contains(s(&missing)) && err.contains("cannot open"),
        "{err}"
    );
    assert_eq!(err.matches("No such file").count(), 1, "{err}");

    let bad = dir.join("bad.flows");
    std::fs::write(
        &bad,
        "priority=1,actions=output:2\npriority=2,nw_dst=1.2.3.400,actions=drop\n",
    )
    .unwrap();
    let err = fails(&["run", "--rules", s(&bad), "--pcap", s(&pcap)]);
    assert!(
        err.contains(&format!("{}:2", bad.display())),
        "names file and line: {err}"
    );

    let err = fails(&[
        "run",
        "--rules",
        s(&dir.join("nope.flows")),
        "--pcap",
        s(&pcap),
    ]);
    assert!(
        err.contains("cannot read rule file") && err.contains("nope.flows"),
        "{err}"
    );

    let raw = dir.join("raw-ipv4.pcap");
    let mut w = PcapWriter::create_with_link_type(&raw, 228, 0).unwrap();
    w.write(
        1,
        &[
            0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2,
        ],
    )
    .unwrap();
    w.finish().unwrap();
    let err = fails(&["run", "--rules", s(&rules), "--pcap", s(&raw)]);
    assert!(
        err.contains(s(&raw)) && err.contains("link type 228 (IPV4) is not Ethernet"),
        "{err}"
    );

    let err = fails(&[
        "run",
        "--rules",
        s(&rules),
        "--pcap",
        s(&pcap),
        "--second-level",
        "emc",
    ]);
    assert!(
        err.contains("--second-level") && err.contains("smc, dfc, cd, none"),
        "{err}"
    );
    let err = fails(&[
        "run",
        "--rules",
        s(&rules),
        "--pcap",
        s(&pcap),
        "--prefixes",
        "tp_dst",
    ]);
    assert!(err.contains("--prefixes"), "{err}");
    let file = dir.join("a-file");
    std::fs::write(&file, "x").unwrap();
    let err = fails(&[
        "run",
        "--rules",
        s(&rules),
        "--pcap",
        s(&pcap),
        "--out-dir",
        s(&file.join("sub")),
    ]);
    assert!(err.contains("--out-dir") && err.contains("a-file"), "{err}");
}

/// The seed evaluation's bridge: `gen nmap --normal` writes
/// `priority=0,actions=NORMAL` as the catch-all; `run` learns the
/// scanner's MAC, floods the probes (their targets never answer) to the
/// other ports and LOCAL, and installs OVS's NORMAL megaflows (both MACs
/// exact) — 17 of them for the port-90 drop rule, as OVS 3.1.
#[test]
fn nmap_scan_through_normal() {
    let d = temp_dir("nmap-normal");
    let pcap = d.join("scan.pcap");
    let rules = d.join("scan.flows");
    ok(&[
        "gen",
        "nmap",
        "--hosts",
        "2",
        "--normal",
        "-o",
        s(&pcap),
        "--rules-out",
        s(&rules),
    ]);
    let text = std::fs::read_to_string(&rules).unwrap();
    assert_eq!(
        text,
        "priority=65535,tcp,tp_dst=90,actions=drop\npriority=0,actions=NORMAL\n"
    );
    let out = ok(&[
        "run",
        "--rules",
        s(&rules),
        "--pcap",
        s(&pcap),
        "--ports",
        "1,2",
        "--json",
        "--dump-flows",
    ]);
    let v = json(&out);
    assert_eq!(v["packets_received"], 131_070, "{v}");
    assert_eq!(v["megaflows"], 17, "{v}");
    assert_eq!(v["output_packets"]["2"], 131_068, "{v}");
    assert_eq!(v["output_packets"]["65534"], 131_068, "{v}");
    assert_eq!(v["fdb"][0]["port"], "1", "{v}");
    // NORMAL's megaflows match both MACs; the drop rule's does not (the
    // packet never reached NORMAL).
    for f in v["flows"].as_array().unwrap() {
        let mf = f["megaflow"].as_str().unwrap();
        let macs = mf.contains("dl_src=02:00:00:00:00:01,dl_dst=02:00:00:00:00:02");
        assert_eq!(macs, f["actions"] != "drop", "{f}");
    }
    // Without --ports the bridge has no port but LOCAL: a warning says so.
    let o = flowpath(&["run", "--rules", s(&rules), "--pcap", s(&pcap)]);
    assert!(o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("give the bridge's ports with --ports"),
        "{o:?}"
    );
}

#[test]
fn learn_shows_its_flows() {
    let dir = temp_dir("learn");
    let pcap = dir.join("f.pcap");
    ok(&[
        "gen",
        "flows",
        "--flows",
        "3",
        "--packets",
        "30",
        "-o",
        s(&pcap),
    ]);
    let rules = dir.join("r.flows");
    std::fs::write(
        &rules,
        "table=0,ip,actions=learn(table=1,hard_timeout=30,dl_type=0x800,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],NXM_OF_IP_DST[]=NXM_OF_IP_SRC[],output:NXM_OF_IN_PORT[]),resubmit(,1)\n\
         table=1,priority=0,actions=output:2\n",
    )
    .unwrap();
    let v: serde_json::Value = serde_json::from_str(&ok(&[
        "run",
        "--rules",
        s(&rules),
        "--pcap",
        s(&pcap),
        "--json",
    ]))
    .unwrap();
    let learned: Vec<&str> = v["learned_flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    // One flow per source address of the three flows, to their port.
    assert_eq!(learned.len(), 3, "{v}");
    assert!(
        learned.iter().all(|l| l
            .starts_with("table=1, hard_timeout=30, priority=32768,ip,dl_dst=")
            && l.ends_with(" actions=output:1")),
        "{learned:?}"
    );
    assert_eq!(v["output_packets"]["2"], 30, "{v}");
    // A learned match without its prerequisites is refused, naming them.
    std::fs::write(
        &rules,
        "actions=learn(table=1,NXM_OF_IP_DST[]=NXM_OF_IP_SRC[])\n",
    )
    .unwrap();
    let out = flowpath(&["run", "--rules", s(&rules), "--pcap", s(&pcap)]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("r.flows:1") && err.contains("nw_dst"), "{err}");
}
