//! End-to-end tests of `flowpath trace` (the built binary).

use std::path::PathBuf;
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_flowpath"))
}

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

fn tmp(name: &str, text: &str) -> PathBuf {
    // (Under the build's own scratch directory, not /tmp: nothing is left
    // behind on the machine.)
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("trace-test");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn text_report_shows_rule_megaflow_and_actions() {
    let out = bin()
        .args(["trace", "--rules"])
        .arg(example("nmap.flows"))
        .arg("in_port=1,tcp,nw_src=7.7.7.1,nw_dst=7.7.7.104,tp_src=1234,tp_dst=100")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8(out.stdout).unwrap();
    assert!(s.contains(" 0. priority 0\n    output:2\n"), "{s}");
    assert!(
        s.contains("Megaflow: recirc_id=0,eth,tcp,in_port=1,nw_frag=no,tp_dst=0x60/0xffe0\n"),
        "{s}"
    );
    assert!(s.ends_with("Datapath actions: 2\n"), "{s}");
}

#[test]
fn json_lines_for_a_packet_file() {
    let packets = tmp("p.txt", "# comment\nin_port=1,tcp,nw_dst=7.7.7.104,tp_dst=90\n\nin_port=1,udp,udp_src=1,udp_dst=90\n");
    let out = bin()
        .args(["trace", "--json", "--rules"])
        .arg(example("nmap.flows"))
        .arg("--packets")
        .arg(&packets)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(
        lines[0],
        r#"{"packet":"in_port=1,tcp,nw_dst=7.7.7.104,tp_dst=90","megaflow":"recirc_id=0,eth,tcp,in_port=1,nw_frag=no,tp_dst=90","actions":"drop"}"#
    );
    assert_eq!(
        lines[1],
        r#"{"packet":"in_port=1,udp,udp_src=1,udp_dst=90","megaflow":"recirc_id=0,eth,udp,in_port=1,nw_frag=no","actions":"2"}"#
    );
}

#[test]
fn prefixes_none_changes_the_megaflow() {
    let run = |prefixes: &str| {
        let out = bin()
            .args(["trace", "--json", "--prefixes", prefixes, "--rules"])
            .arg(example("allow-over-drop.flows"))
            .arg("in_port=1,tcp,nw_src=7.7.7.1,nw_dst=7.7.7.150,tp_dst=80")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    assert!(run("nw_dst,nw_src").contains("nw_dst=7.7.7.128/25"));
    assert!(run("none").contains("nw_dst=7.7.7.150,"));
}

#[test]
fn bad_rule_file_names_file_line_and_field() {
    let rules = tmp(
        "bad.flows",
        "priority=1,actions=drop\n# fine\ntcp,nw_src=10.0.0.300,actions=drop\n",
    );
    let out = bin()
        .args(["trace", "--rules"])
        .arg(&rules)
        .arg("in_port=1")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = String::from_utf8(out.stderr).unwrap();
    assert!(e.contains("bad.flows:3:"), "{e}");
    assert!(e.contains("nw_src"), "{e}");
    assert!(e.contains("10.0.0.300"), "{e}");
}

#[test]
fn bad_packet_and_missing_files_are_reported() {
    let out = bin()
        .args(["trace", "--rules"])
        .arg(example("nmap.flows"))
        .arg("in_port=1,tcp,tp_dst=zz")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("tp_dst"));
    let out = bin()
        .args(["trace", "--rules", "/nonexistent.flows", "in_port=1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent.flows"));
    let out = bin()
        .args(["trace", "--rules"])
        .arg(example("nmap.flows"))
        .args(["--prefixes", "tp_dst", "in_port=1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("tp_dst"));
}

/// `--ct-next`: each `ct(table=N)` pass is traced after its packet with
/// the state given (OVS's banner, default `trk|new`), and NAT is simulated
/// with the range's first address and port, as `ofproto/trace` does.
#[test]
fn ct_passes_follow_with_ct_next_states() {
    let rules = tmp(
        "ct.flows",
        "table=0,priority=100,ip,ct_state=-trk,actions=ct(table=1,zone=3,nat)\n\
         table=1,ip,ct_state=+trk+new,actions=ct(commit,zone=3,nat(dst=10.9.9.9:8080),table=2)\n\
         table=1,ip,ct_state=+trk+est,ct_zone=3,actions=output:2\n\
         table=2,tcp,ct_state=+trk+dnat,nw_dst=10.9.9.9,tp_dst=8080,actions=output:3\n\
         table=2,priority=0,actions=drop\n",
    );
    let run = |next: &[&str]| {
        let mut c = bin();
        c.args(["trace", "--rules"]).arg(&rules);
        for n in next {
            c.args(["--ct-next", n]);
        }
        let out = c
            .arg("in_port=1,tcp,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src=1000,tp_dst=80")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let s = run(&["trk|est"]);
    assert!(
        s.contains("Datapath actions: ct(zone=3,nat),recirc(0x"),
        "{s}"
    );
    assert!(
        s.contains(") - resume conntrack with ct_state=est|trk\n"),
        "{s}"
    );
    assert!(s.ends_with("Datapath actions: 2\n"), "{s}");
    // The first resumed pass new (default), the second translated.
    let s = run(&[]);
    assert!(
        s.contains(
            " - resume conntrack with default ct_state=trk|new (use --ct-next to customize)"
        ),
        "{s}"
    );
    assert!(
        s.contains("Datapath actions: ct(commit,zone=3,nat(dst=10.9.9.9:8080)),recirc(0x"),
        "{s}"
    );
    let s = run(&["trk|new", "trk|new|dnat"]);
    assert!(
        s.contains(" - resume conntrack with ct_state=new|trk|dnat\n"),
        "{s}"
    );
    assert!(s.ends_with("Datapath actions: 3\n"), "{s}");
    // A state that is not one.
    let out = bin()
        .args(["trace", "--rules"])
        .arg(&rules)
        .args(["--ct-next", "bogus", "in_port=1,ip"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[test]
fn tunnel_ports_push_headers_and_take_tunnel_metadata() {
    let rules = tmp(
        "tun.flows",
        "in_port=1,actions=set_field:9->tun_id,output:10\nin_port=10,tun_id=5,actions=output:1\n",
    );
    let out = bin()
        .args(["trace", "--json", "--ports", "1", "--rules"])
        .arg(&rules)
        .args([
            "--underlay",
            "null,ip=172.31.1.100/24,mac=aa:55:aa:55:00:00",
            "--neigh",
            "172.31.1.1=aa:55:aa:55:00:01",
            "--port",
            "10=vxlan:remote_ip=172.31.1.1,key=flow",
            "--packets",
        ])
        .arg(tmp(
            "tun.txt",
            "in_port=1,udp,nw_ecn=1\ntun_id=5,tun_src=172.31.1.1,tun_dst=172.31.1.100,in_port=10,tcp\n",
        ))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<serde_json::Value> = s
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Out: the header OVS 3.1 builds (the ECN copied to the outer ToS).
    assert_eq!(
        lines[0]["actions"],
        "tnl_push(tnl_port(65024),header(size=50,type=4,eth(dst=aa:55:aa:55:00:01,src=aa:55:aa:55:00:00,dl_type=0x0800),\
         ipv4(src=172.31.1.100,dst=172.31.1.1,proto=17,tos=0x1,ttl=64,frag=0x4000),udp(src=0,dst=4789,csum=0x0),\
         vxlan(flags=0x8000000,vni=0x9)),out_port(64768)),64768"
    );
    assert_eq!(
        lines[0]["megaflow"],
        "recirc_id=0,eth,ip,in_port=1,nw_ecn=1,nw_frag=no"
    );
    // In: the tunnel's identity in the megaflow.
    assert_eq!(lines[1]["actions"], "1");
    assert_eq!(
        lines[1]["megaflow"],
        "recirc_id=0,eth,ip,tun_id=0x5,tun_src=172.31.1.1,tun_dst=172.31.1.100,tun_tos=0,tun_flags=-df-csum-key,in_port=10,nw_frag=no"
    );
    // A tunnel port without an underlay is refused.
    let out = bin()
        .args(["trace", "--rules"])
        .arg(&rules)
        .args(["--port", "10=gre:remote_ip=flow", "in_port=1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("needs an underlay"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
