//! Byte identity with the team's reference generator `gen-pcap.py`
//! (`shared/anchors/ovs-dpdk/gen-pcap.py`): for the same workload and seed,
//! the frames, their order, their timestamps and the rule text must be the
//! same.
//!
//! The script is run with `python3` (standard library only). If `python3` or
//! the script is missing, each test prints why and passes without
//! comparing; set `FLOWPATH_GEN_PCAP` to point at the script elsewhere.

use std::path::{Path, PathBuf};
use std::process::Command;

use flowpath_trafficgen::{
    generate, FlowsSpec, NmapRuleSet, NmapSpec, Options, Order, Profile, ScanOrder, SubtablesSpec,
    Workload,
};

/// The classic pcap global header `gen-pcap.py` writes (little endian,
/// microseconds, v2.4, snaplen 65535, Ethernet).
const PCAP_GLOBAL: [u8; 24] = [
    0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0,
];

fn script() -> PathBuf {
    match std::env::var_os("FLOWPATH_GEN_PCAP") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/anchors/ovs-dpdk/gen-pcap.py"),
    }
}

/// Runs gen-pcap.py with `args` into a fresh directory and returns the
/// output prefix, or `None` (with a message) if it cannot run here.
fn run_script(case: &str, args: &[&str]) -> Option<PathBuf> {
    let script = script();
    if !script.is_file() {
        assert!(
            std::env::var_os("CI").is_none(),
            "gen-pcap.py comparison cannot run in CI (script or python3 missing)"
        );
        eprintln!(
            "SKIPPED {case}: {} not found (set FLOWPATH_GEN_PCAP)",
            script.display()
        );
        return None;
    }
    if Command::new("python3").arg("--version").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "gen-pcap.py comparison cannot run in CI (script or python3 missing)"
        );
        eprintln!("SKIPPED {case}: python3 is not installed");
        return None;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("gen-pcap-py")
        .join(case);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let out = dir.join("w");
    let status = Command::new("python3")
        .arg(&script)
        .arg("-o")
        .arg(&out)
        .args(args)
        .output()
        .expect("python3 runs");
    assert!(
        status.status.success(),
        "gen-pcap.py {args:?} failed: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    Some(out)
}

/// Compares gen-pcap.py's `OUT.pcap` and `OUT.rules` with `w`.
fn assert_identical(out: &Path, w: &Workload) {
    let pcap = std::fs::read(out.with_extension("pcap")).expect("single pcap file");
    assert_eq!(pcap[..24], PCAP_GLOBAL, "global header");
    let mut rest = &pcap[24..];
    let mut i = 0usize;
    while !rest.is_empty() {
        let field = |o: usize| u32::from_le_bytes([rest[o], rest[o + 1], rest[o + 2], rest[o + 3]]);
        let (sec, usec, incl, orig) = (field(0), field(4), field(8) as usize, field(12));
        let p = w
            .packet(i)
            .unwrap_or_else(|| panic!("gen-pcap.py has more than {i} packets"));
        let us = p.timestamp_ns / 1000;
        assert_eq!(
            (u64::from(sec), u64::from(usec)),
            (us / 1_000_000, us % 1_000_000),
            "ts {i}"
        );
        assert_eq!(
            (incl, orig as usize),
            (p.data.len(), p.data.len()),
            "length {i}"
        );
        assert!(rest[16..16 + incl] == *p.data, "frame {i} differs");
        rest = &rest[16 + incl..];
        i += 1;
    }
    assert_eq!(i, w.packet_count(), "packet count");
    let rules = std::fs::read_to_string(out.with_extension("rules")).expect("rules file");
    assert_eq!(rules, w.rules_text());
}

fn check(case: &str, args: &[&str], profile: Profile, opts: Options) {
    let Some(out) = run_script(case, args) else {
        return;
    };
    let w = generate(&profile, &opts).expect("generates");
    assert_identical(&out, &w);
}

fn flows(n: u64, order: Order) -> Profile {
    Profile::Flows(FlowsSpec { flows: n, order })
}

fn seeded(seed: u64) -> Options {
    Options {
        seed,
        ..Options::default()
    }
}

#[test]
fn flows_rr_is_byte_identical() {
    for n in [1u64, 100, 5000] {
        let ns = n.to_string();
        check(
            &format!("flows-rr-{n}"),
            &["flows", "--n", &ns, "--order", "rr"],
            flows(n, Order::RoundRobin),
            Options::default(),
        );
    }
}

#[test]
fn flows_random_is_byte_identical() {
    check(
        "flows-random-1000",
        &["flows", "--n", "1000", "--order", "random"],
        flows(1000, Order::Uniform),
        Options::default(),
    );
    check(
        "flows-random-10-pkts",
        &[
            "--seed", "42", "--pkts", "777", "flows", "--n", "10", "--order", "random",
        ],
        flows(10, Order::Uniform),
        Options {
            seed: 42,
            packets: Some(777),
            ..Options::default()
        },
    );
}

#[test]
fn subtables_are_byte_identical() {
    check(
        "subtables-3x5",
        &["subtables", "--s", "3", "--d", "5"],
        Profile::Subtables(SubtablesSpec {
            subtables: 3,
            dsts: 5,
        }),
        Options::default(),
    );
    check(
        "subtables-30x200",
        &["--seed", "9", "subtables", "--s", "30", "--d", "200"],
        Profile::Subtables(SubtablesSpec {
            subtables: 30,
            dsts: 200,
        }),
        seeded(9),
    );
}

#[test]
fn nmap_is_byte_identical() {
    let nmap = |hosts, ports, order| {
        Profile::Nmap(NmapSpec {
            hosts,
            ports,
            order,
            rules: NmapRuleSet::Port90,
            normal: false,
        })
    };
    check(
        "nmap-2x300",
        &["nmap", "--dsts", "2", "--port-hi", "300"],
        nmap(2, 300, ScanOrder::Random),
        Options::default(),
    );
    check(
        "nmap-1x1000-port-major",
        &[
            "--seed",
            "3",
            "nmap",
            "--dsts",
            "1",
            "--port-hi",
            "1000",
            "--order",
            "port-major",
        ],
        nmap(1, 1000, ScanOrder::PortMajor),
        seeded(3),
    );
    // All 65535 ports of two hosts: 131,070 SYNs, still one pcap file.
    check(
        "nmap-2x65535",
        &["--seed", "5", "nmap", "--dsts", "2"],
        nmap(2, 65535, ScanOrder::Random),
        seeded(5),
    );
}
