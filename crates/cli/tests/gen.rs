//! End-to-end tests of `flowpath gen`: run the built binary, read back the
//! pcap and rules files it writes.

use std::path::Path;
use std::process::Command;

use pcap_file::pcap::PcapReader;

mod cmdline;

use cmdline::{fails, ok, s, temp_dir};

/// (timestamp in µs, frame) of every record.
fn read_pcap(path: &Path) -> Vec<(u128, Vec<u8>)> {
    let file = std::fs::File::open(path).expect("pcap exists");
    let mut r = PcapReader::new(file).expect("pcap header");
    let mut v = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.expect("pcap record");
        assert_eq!(p.orig_len as usize, p.data.len());
        v.push((p.timestamp.as_micros(), p.data.into_owned()));
    }
    v
}

#[test]
fn flows_writes_pcap_and_rules() {
    let d = temp_dir("flows");
    let pcap = d.join("f.pcap");
    let stdout = ok(&[
        "gen",
        "flows",
        "--flows",
        "100",
        "--order",
        "rr",
        "-o",
        s(&pcap),
    ]);
    assert!(
        stdout.starts_with("100 flows, 4100 packets, 2 rules -> "),
        "{stdout}"
    );
    assert!(
        stdout.contains("f.pcap") && stdout.contains("f.flows"),
        "{stdout}"
    );
    assert_eq!(stdout.lines().count(), 1);
    let packets = read_pcap(&pcap);
    assert_eq!(packets.len(), 4100);
    assert!(packets.iter().all(|(_, f)| f.len() == 60));
    assert_eq!(packets[0].1, packets[100].1, "round robin");
    assert_ne!(packets[0].1, packets[1].1);
    assert_eq!(packets[4099].0, 4099, "packet i at i µs");
    let rules = std::fs::read_to_string(d.join("f.flows")).expect("rules file");
    assert_eq!(
        rules,
        "priority=10,udp,actions=output:2\npriority=0,actions=drop\n"
    );
}

#[test]
fn nmap_with_rule_set_rules_out_and_frame_size() {
    let d = temp_dir("nmap");
    let pcap = d.join("scan.pcap");
    let rules = d.join("scan-rules.txt");
    ok(&[
        "gen",
        "nmap",
        "--hosts",
        "4",
        "--ports",
        "100",
        "--rules-set",
        "allow-over-drop",
        "-o",
        s(&pcap),
        "--rules-out",
        s(&rules),
        "--frame-size",
        "128",
        "--seed",
        "11",
    ]);
    let packets = read_pcap(&pcap);
    assert_eq!(packets.len(), 400);
    assert!(
        packets.iter().all(|(_, f)| f.len() == 124 && f[47] == 0x02),
        "SYNs of 124 bytes"
    );
    let text = std::fs::read_to_string(&rules).expect("rules");
    assert_eq!(
        text,
        "priority=65535,tcp,nw_dst=7.7.7.104,tp_dst=90,actions=output:2\n\
         priority=65533,tcp,tp_dst=90,actions=drop\n\
         priority=0,actions=output:2\n"
    );
    assert!(!d.join("scan.flows").exists());
}

#[test]
fn same_seed_same_file() {
    let d = temp_dir("seed");
    let run = |name: &str, seed: &str| {
        let p = d.join(name);
        ok(&[
            "gen",
            "subtables",
            "--subtables",
            "4",
            "--dsts",
            "8",
            "--seed",
            seed,
            "-o",
            s(&p),
        ]);
        std::fs::read(p).expect("pcap")
    };
    let (a, b, c) = (run("a.pcap", "5"), run("b.pcap", "5"), run("c.pcap", "6"));
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn churn_timestamps_follow_the_rate() {
    let d = temp_dir("churn");
    let pcap = d.join("c.pcap");
    let stdout = ok(&[
        "gen",
        "churn",
        "--flows",
        "10",
        "--new-per-sec",
        "1000",
        "--pps",
        "100000",
        "--duration",
        "0.01",
        "-o",
        s(&pcap),
        "--udp-checksum",
    ]);
    assert!(stdout.contains("1000 packets"), "{stdout}");
    let packets = read_pcap(&pcap);
    assert_eq!(packets.len(), 1000);
    for (j, (ts, f)) in packets.iter().enumerate() {
        assert_eq!(*ts, j as u128 * 10, "packet {j} at j/P");
        assert_ne!(&f[40..42], &[0, 0], "UDP checksum filled in");
    }
}

#[test]
fn errors_name_the_bad_option() {
    let d = temp_dir("errors");
    let out = d.join("x.pcap");
    let o = s(&out);
    // (command line without -o, words the error must contain)
    let cases: [(&[&str], &[&str]); 6] = [
        (
            &["flows", "--flows", "10", "--order", "zipf:-2"],
            &["--order", "zipf:-2"],
        ),
        (
            &["subtables", "--subtables", "51", "--dsts", "1"],
            &["--subtables", "51"],
        ),
        (
            &["flows", "--flows", "10", "--frame-size", "40"],
            &["--frame-size"],
        ),
        (
            &["nmap", "--rules-set", "port91"],
            &["--rules-set", "port91"],
        ),
        (
            &[
                "churn",
                "--flows",
                "5",
                "--new-per-sec",
                "10",
                "--duration",
                "1",
                "--packets",
                "9",
            ],
            &["--duration", "--packets"],
        ),
        (
            &[
                "churn",
                "--flows",
                "5",
                "--new-per-sec",
                "10",
                "--duration",
                "0",
            ],
            &["--duration"],
        ),
    ];
    for (args, words) in cases {
        let mut cmd = vec!["gen"];
        cmd.extend_from_slice(args);
        cmd.extend_from_slice(&["-o", o]);
        let e = fails(&cmd);
        for w in words {
            assert!(e.contains(w), "{cmd:?}: error lacks {w}: {e}");
        }
    }
    let e = fails(&["gen", "flows", "--flows", "10"]);
    assert!(e.contains("--output"), "{e}");
    assert!(!out.exists(), "no file written on error");
}

#[test]
fn help_explains_every_profile_and_rule_set() {
    let h = ok(&["gen", "--help"]);
    for p in ["flows", "subtables", "nmap", "churn", "gen-pcap.py"] {
        assert!(h.contains(p), "gen --help lacks {p}");
    }
    let h = ok(&["gen", "nmap", "--help"]);
    for set in [
        "port90",
        "ports90-91",
        "ports22-5900",
        "mask0x58",
        "ports90-95",
        "nested",
        "nested-same-prio",
        "allow-over-drop",
        "--frame-size",
        "--seed",
    ] {
        assert!(h.contains(set), "nmap --help lacks {set}");
    }
}

#[test]
fn byte_identical_to_gen_pcap_py() {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/anchors/ovs-dpdk/gen-pcap.py");
    if !flowpath_io::corpus::shared_available(&script, "byte_identical_to_gen_pcap_py") {
        return;
    }
    if Command::new("python3").arg("--version").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "gen-pcap.py comparison cannot run in CI (script or python3 missing)"
        );
        eprintln!("SKIPPED: python3 is not installed");
        return;
    }
    let d = temp_dir("gen-pcap-py");
    let cases: [(&str, &[&str], &[&str]); 3] = [
        (
            "flows",
            &["--seed", "4", "flows", "--n", "300", "--order", "random"],
            &[
                "flows", "--flows", "300", "--order", "uniform", "--seed", "4",
            ],
        ),
        (
            "subtables",
            &["subtables", "--s", "27", "--d", "3"],
            &["subtables", "--subtables", "27", "--dsts", "3"],
        ),
        (
            "nmap",
            &["nmap", "--dsts", "3", "--port-hi", "1000"],
            &["nmap", "--hosts", "3", "--ports", "1000"],
        ),
    ];
    for (name, py_args, our_args) in cases {
        let py_out = d.join(format!("py-{name}"));
        let st = Command::new("python3")
            .arg(&script)
            .arg("-o")
            .arg(&py_out)
            .args(py_args)
            .status()
            .expect("python3 runs");
        assert!(st.success(), "gen-pcap.py {py_args:?}");
        let ours = d.join(format!("ours-{name}.pcap"));
        let mut args = vec!["gen"];
        args.extend_from_slice(our_args);
        args.extend_from_slice(&["-o", s(&ours)]);
        ok(&args);
        let a = std::fs::read(py_out.with_extension("pcap")).expect("python pcap");
        let b = std::fs::read(&ours).expect("our pcap");
        assert!(
            a == b,
            "{name}: pcap files differ ({} vs {} bytes)",
            a.len(),
            b.len()
        );
        let ra = std::fs::read_to_string(py_out.with_extension("rules")).expect("python rules");
        let rb = std::fs::read_to_string(ours.with_extension("flows")).expect("our rules");
        assert_eq!(ra, rb, "{name}: rules differ");
    }
}
