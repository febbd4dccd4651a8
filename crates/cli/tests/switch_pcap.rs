//! `flowpath switch` with capture ports (no privileges needed): the seed's
//! megaflows-off nmap scan (`flowpath gen nmap`, 983,025 new flows,
//! looped) against the flow limit. Round after round (`revalidator/wait`
//! then `upcall/show --json`), the PMD never holds more megaflows than the
//! limit in force, and the limit moves exactly as OVS's rule says for the
//! dump durations measured (an independent transcription of the rule is
//! the oracle here).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_flowpath");

struct Sw(Child);

impl Drop for Sw {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn ctl(sock: &Path, args: &[&str]) -> String {
    let o = Command::new(BIN)
        .arg("ctl")
        .arg("--ctl")
        .arg(sock)
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "ctl {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// OVS's flow-limit rule (ofproto-dpif-upcall.c, udpif_revalidator).
fn ovs_rule(limit: u64, duration_ms: u64, flows: u64, max: u64) -> u64 {
    let d = duration_ms.max(1);
    let mut l = limit;
    if d > 2000 {
        l /= d / 1000;
    } else if d > 1300 {
        l = l * 3 / 4;
    } else if d < 1000 && l < flows * 1000 / d {
        l += 1000;
    }
    l.max(1000).min(max.max(1000))
}

#[test]
fn megaflows_off_nmap_scan_respects_the_dynamic_flow_limit() {
    let dir: PathBuf = Path::new(env!("CARGO_TARGET_TMPDIR")).join("switch-nmap");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("nmap.pcap");
    let rules = dir.join("nmap.flows");
    let g = Command::new(BIN)
        .args([
            "gen",
            "nmap",
            "--hosts",
            "15",
            "--ports",
            "65535",
            "--rules-set",
            "port90",
        ])
        .arg("-o")
        .arg(&pcap)
        .arg("--rules-out")
        .arg(&rules)
        .output()
        .unwrap();
    assert!(g.status.success(), "{}", String::from_utf8_lossy(&g.stderr));
    // Under SUN_LEN (108 bytes) whatever the checkout's depth.
    let sock = std::env::temp_dir().join(format!("fpnm{}.ctl", std::process::id()));
    let max = 1_000_000u64;
    let child = Command::new(BIN)
        .arg("switch")
        .arg("--rules")
        .arg(&rules)
        .arg("--port")
        .arg(format!("1=pcap:{},loop", pcap.display()))
        .args(["--port", "2=null", "--no-megaflows", "--flow-limit"])
        .arg(max.to_string())
        .arg("--ctl")
        .arg(&sock)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _sw = Sw(child);
    let t0 = Instant::now();
    while !sock.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "switch did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut prev_limit = max;
    let mut prev_prev_limit = max;
    let mut prev_round = 0;
    let mut seen = Vec::new();
    let start = Instant::now();
    // Rounds until the limit came down (dumps of several hundred thousand
    // megaflows take over 1.3 s) and two more rounds, or 14 rounds.
    let mut lowered_at = None;
    loop {
        assert!(start.elapsed() < Duration::from_secs(120), "{seen:?}");
        std::thread::sleep(Duration::from_millis(200));
        ctl(&sock, &["revalidator/wait"]);
        let v: serde_json::Value =
            serde_json::from_str(&ctl(&sock, &["upcall/show", "--json"])).unwrap();
        let g = |k: &str| v[k].as_u64().unwrap();
        let (round, cur, limit, dur) =
            (g("rounds"), g("current"), g("limit"), g("dump_duration_ms"));
        seen.push((cur, limit, dur));
        // The PMD stops installing at the limit in force. When the limit
        // comes down, the megaflows already over it go at the next round
        // (least recently used first), so a dump sees at most the larger
        // of the last two limits.
        let bound = prev_limit.max(prev_prev_limit);
        assert!(
            cur <= bound,
            "{cur} megaflows over the limits in force ({bound}): {seen:?}"
        );
        if round == prev_round + 1 {
            assert_eq!(
                limit,
                ovs_rule(prev_limit, dur, cur, max),
                "round {round}: {seen:?}"
            );
        }
        prev_prev_limit = prev_limit;
        prev_limit = limit;
        prev_round = round;
        if limit < max && lowered_at.is_none() {
            lowered_at = Some(seen.len());
        }
        if lowered_at.is_some_and(|l| seen.len() >= l + 2) || seen.len() >= 14 {
            break;
        }
    }
    println!("nmap megaflows off, flow-limit {max}: (current, limit, dump ms) per round: {seen:?}");
    // The scan keeps bringing new flows: once the limit has come down
    // below them, upcalls fail (counted; the packets still get their
    // actions). If it never came down (dumps under 1.3 s: the CI machine
    // did that once), the scan's 983,025 flows fit under the 1,000,000
    // limit and whether any upcall failed depends on later rounds.
    let s: serde_json::Value =
        serde_json::from_str(&ctl(&sock, &["dpif-netdev/pmd-stats-show", "--json"])).unwrap();
    if lowered_at.is_some() {
        assert!(s[0]["miss_with_failed_upcall"].as_u64().unwrap() > 0, "{s}");
    }
    // Dumps this large are slow on the Zen 1 VM of this project (1.4-2.1 s
    // in a release build): there the limit came down, as the round-by-round
    // check above requires whenever a dump takes over 1300 ms. A machine
    // fast enough to dump a million megaflows in under 1.3 s keeps it up,
    // as OVS would.
    let slow = seen.iter().any(|(_, _, d)| *d > 1300);
    assert_eq!(
        slow,
        lowered_at.is_some(),
        "slow dumps lower the limit: {seen:?}"
    );
    println!("dumps over 1300 ms seen: {slow}");
    let text = ctl(&sock, &["upcall/show"]);
    assert!(
        text.contains("flows         : (current ") && text.contains("dump duration : "),
        "{text}"
    );
}
