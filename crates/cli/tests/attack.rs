//! The attack workloads end to end: `flowpath gen tse|storm` write the
//! mix they promise, and through `flowpath run` the defences keep every
//! legitimate packet's forwarding while bounding the attack's cost (masks
//! for TSE, upcalls for the storm).

use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_flowpath");

fn dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("attack")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn ok(args: &[&str]) -> String {
    let o = Command::new(BIN).args(args).output().unwrap();
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn run_json(rules: &Path, pcap: &Path, extra: &[&str]) -> serde_json::Value {
    let mut a = vec![
        "run",
        "--rules",
        rules.to_str().unwrap(),
        "--pcap",
        pcap.to_str().unwrap(),
        "--json",
    ];
    a.extend_from_slice(extra);
    serde_json::from_str(&ok(&a)).unwrap()
}

/// `flowpath gen KIND --share SHARE --flows 100 --packets 20000` into a
/// fresh directory: (directory, capture, gen's summary line).
fn generate(kind: &str, share: &str) -> (PathBuf, PathBuf, String) {
    let d = dir(kind);
    let pcap = d.join(format!("{kind}.pcap"));
    let out = ok(&[
        "gen",
        kind,
        "--share",
        share,
        "--flows",
        "100",
        "--packets",
        "20000",
        "-o",
        pcap.to_str().unwrap(),
    ]);
    (d, pcap, out)
}

#[test]
fn tse_makes_masks_and_the_mask_budget_bounds_them() {
    let (d, pcap, out) = generate("tse", "50");
    assert!(out.contains("attack_packets=9950"), "{out}");
    let rules = d.join("tse.flows");
    let text = std::fs::read_to_string(&rules).unwrap();
    assert!(
        text.contains("nw_src=10.0.0.0/8,nw_dst=10.1.2.3,tp_dst=80"),
        "{text}"
    );
    let free = run_json(&rules, &pcap, &[]);
    let capped = run_json(&rules, &pcap, &["--mask-budget", "8"]);
    // Every legitimate packet is forwarded either way; the attack is dropped.
    assert_eq!(free["output_packets"]["2"], 10050);
    assert_eq!(capped["output_packets"]["2"], 10050);
    let (mf, mfc) = (
        free["megaflows"].as_u64().unwrap(),
        capped["megaflows"].as_u64().unwrap(),
    );
    assert!(mf >= 50, "one megaflow per attack mask and more: {mf}");
    assert!(
        mfc >= mf,
        "widened megaflows are narrower, so at least as many: {mfc}"
    );
}

#[test]
fn storm_floods_upcalls_and_the_budget_caps_them() {
    let (d, pcap, out) = generate("storm", "10");
    assert!(out.contains("new_flows=1990"), "{out}");
    let rules = d.join("storm.flows");
    let free = run_json(&rules, &pcap, &["--no-megaflows"]);
    assert!(free["miss_with_success_upcall"].as_u64().unwrap() >= 1990);
    assert_eq!(free["output_packets"]["2"], 20000);
    // The capture's clock is 1 µs per packet: 1000 packets and ~100 new
    // flows per ms; a budget of 20 per ms leaves most of them unanswered.
    let capped = run_json(&rules, &pcap, &["--no-megaflows", "--upcall-budget", "20"]);
    let ups = capped["miss_with_success_upcall"].as_u64().unwrap();
    let failed = capped["miss_with_failed_upcall"].as_u64().unwrap();
    assert!(
        ups <= 20 * 21,
        "at most 20 upcalls per ms over ~20 ms: {ups}"
    );
    assert!(
        failed > 1000,
        "the storm's packets mostly dropped: {failed}"
    );
    assert_eq!(
        capped["packets_received"].as_u64().unwrap(),
        capped["emc_hits"].as_u64().unwrap()
            + capped["megaflow_hits"].as_u64().unwrap()
            + ups
            + failed,
        "every packet counted once: {capped}"
    );
    // The established flows get their megaflows within the first
    // milliseconds (sharing the budget with the storm) and are forwarded
    // from then on: most of their 18,010 packets go out.
    assert!(
        capped["output_packets"]["2"].as_u64().unwrap() >= 15_000,
        "{capped}"
    );
    let e = Command::new(BIN)
        .args(["gen", "storm", "--share", "120", "-o"])
        .arg(d.join("x.pcap"))
        .output()
        .unwrap();
    assert!(!e.status.success());
    assert!(String::from_utf8_lossy(&e.stderr).contains("--share"));
}
