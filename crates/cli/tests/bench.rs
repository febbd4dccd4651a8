//! End-to-end tests of `flowpath bench`: run the built binary on a tiny
//! grid with very short intervals and check the shape of what it prints
//! and writes (never its speed).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_flowpath");

/// A fresh, empty directory for one test.
fn temp_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("cli-bench")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create temp dir");
    d
}

fn flowpath(args: &[&str], dir: &Path) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run flowpath")
}

/// The tier counters, which must add up to `packets_received`.
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

/// The keys every result object has (those of `flowpath run --json` plus
/// workload, config and mpps).
const KEYS: [&str; 16] = [
    "workload",
    "config",
    "mpps",
    "avg_processing_cycles_per_packet",
    "packets_received",
    "emc_hits",
    "smc_hits",
    "dfc_hits",
    "cd_hits",
    "megaflow_hits",
    "avg_subtable_lookups_per_megaflow_hit",
    "miss_with_success_upcall",
    "miss_with_failed_upcall",
    "lost",
    "processing_cycles",
    "megaflows",
];

#[test]
fn tiny_grid_json_csv_svg() {
    let dir = temp_dir("tiny");
    let out = flowpath(
        &[
            "bench",
            "--flows",
            "1,1000",
            "--config",
            "emc,none",
            "--duration-ms",
            "50",
            "--warmup-ms",
            "10",
            "--no-pin",
            "--json",
            "--csv",
            "r.csv",
            "--plot",
            "r.svg",
        ],
        &dir,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("stdout is one JSON array");
    let rs = v.as_array().expect("array");
    assert_eq!(rs.len(), 4, "2 workloads x 2 configs");
    let mut seen = Vec::new();
    for r in rs {
        for k in KEYS {
            assert!(r.get(k).is_some(), "missing {k} in {r}");
        }
        let rx = r["packets_received"].as_u64().expect("count");
        assert!(rx > 0, "{r}");
        let sum: u64 = TIERS.iter().map(|k| r[*k].as_u64().expect("count")).sum();
        assert_eq!(sum, rx, "tiers add up: {r}");
        assert!(r["mpps"].as_f64().expect("mpps") > 0.0);
        seen.push((
            r["workload"].as_str().expect("name").to_string(),
            r["config"].as_str().expect("name").to_string(),
        ));
        if r["config"] == "none" {
            assert_eq!(r["emc_hits"], 0, "no caches: {r}");
        }
    }
    assert_eq!(
        seen,
        [
            ("flows-rr-1", "emc"),
            ("flows-rr-1", "none"),
            ("flows-rr-1000", "emc"),
            ("flows-rr-1000", "none")
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    // The tables go to stderr with --json.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("| workload"), "{err}");
    assert!(err.contains("gain vs emc"), "{err}");

    let csv = std::fs::read_to_string(dir.join("r.csv")).expect("csv written");
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 5);
    assert!(
        lines[0].starts_with("workload,config,mpps,"),
        "{}",
        lines[0]
    );
    let svg = std::fs::read_to_string(dir.join("r.svg")).expect("svg written");
    assert!(svg.starts_with("<svg") && svg.contains("<polyline"));
    // Nothing else is written when files are named explicitly.
    assert!(!dir.join("bench-results.json").exists());
}

#[test]
fn out_dir_gets_all_three_files_and_bad_config_fails() {
    let dir = temp_dir("outdir");
    let out = flowpath(
        &[
            "bench",
            "--flows",
            "1",
            "--config",
            "emc+smc",
            "--duration-ms",
            "20",
            "--warmup-ms",
            "5",
            "--no-pin",
            "--quiet",
            "--out-dir",
            "res",
        ],
        &dir,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for f in [
        "bench-results.csv",
        "bench-results.json",
        "bench-results.svg",
    ] {
        assert!(dir.join("res").join(f).exists(), "{f}");
    }
    let out = flowpath(&["bench", "--flows", "1", "--config", "emc+bogus"], &dir);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("bogus"));
}

#[test]
fn capture_with_groups() {
    let dir = temp_dir("groups");
    let out = flowpath(
        &[
            "gen",
            "flows",
            "--flows",
            "64",
            "--packets",
            "2000",
            "-o",
            "f.pcap",
        ],
        &dir,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(
        dir.join("r.flows"),
        "priority=10,udp,actions=group:1\npriority=0,actions=drop\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("g.groups"),
        // (dp_hash's `l4` hash: the generated flows differ in their UDP
        // ports only, which OVS's default sym_l4 hash leaves out.)
        "group_id=1,type=select,selection_method=dp_hash,bucket=output:2,bucket=output:3\n",
    )
    .unwrap();
    let args = [
        "bench",
        "--pcap",
        "f.pcap",
        "--rules",
        "r.flows",
        "--groups",
        "g.groups",
        "--config",
        "emc",
        "--duration-ms",
        "30",
        "--warmup-ms",
        "5",
        "--no-pin",
        "--json",
    ];
    let out = flowpath(&args, &dir);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let v = &all[0];
    assert!(v["packets_received"].as_u64().unwrap() > 0, "{v}");
    // As OVS 3.1: the select group hashes in the datapath and
    // recirculates: one megaflow for the first pass, one per slot of its
    // 16-slot hash table (low 4 bits of dp_hash) that the 64 flows'
    // hashes reach for the second (15 of them); every packet makes two
    // passes and is output once.
    let m = v["megaflows"].as_u64().unwrap();
    assert!((1 + 10..=1 + 16).contains(&m), "{v}");
    assert_eq!(v["packet_recirculations"], v["packets_received"], "{v}");
    assert_eq!(
        v["avg_datapath_passes_per_packet"].as_f64(),
        Some(2.0),
        "{v}"
    );
    assert_eq!(v["tx_packets"], v["packets_received"], "{v}");
    // Without the group table, the rules are refused, naming the group.
    let without: Vec<&str> = args
        .iter()
        .copied()
        .filter(|a| *a != "--groups" && *a != "g.groups")
        .collect();
    let out = flowpath(&without, &dir);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("group") && err.contains('1'), "{err}");
}

/// The files the README's first command (`flowpath bench` on its
/// defaults, in the checkout) writes are ignored by git, so they do not
/// show up as untracked changes.
#[test]
fn default_bench_outputs_are_ignored_by_git() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    if !root.join(".git").exists() {
        eprintln!("SKIPPED default_bench_outputs_are_ignored_by_git: not a git checkout");
        return;
    }
    for f in [
        "bench-results.csv",
        "bench-results.json",
        "bench-results.svg",
        "bench-cd.csv",
    ] {
        let st = std::process::Command::new("git")
            .arg("-C")
            .arg(&root)
            .args(["check-ignore", "-q", f])
            .status();
        match st {
            Ok(s) => assert!(s.success(), "{f} is not ignored by git"),
            Err(e) => {
                eprintln!("SKIPPED default_bench_outputs_are_ignored_by_git: no git ({e})");
                return;
            }
        }
    }
}
