//! The running switch with capture ports (no privileges needed): frames
//! from a `pcap:` port go through the PMD and the rules to a `pcap-out:`
//! port exactly as the rules say; rules and configuration change at run
//! time through the control socket; `exit` stops the switch.

use flowpath_datapath::Config;
use flowpath_io::{load_ethernet_frames, PcapWriter};
use flowpath_netdev::PortSpec;
use flowpath_ofproto::normal::{Bridge, MacTable, PortVlans, VlanMode};
use flowpath_ofproto::parse::parse_rules;
use flowpath_switchd::rules::RuleSet;
use flowpath_switchd::{Switchd, SwitchdConfig};
use flowpath_unixctl::Client;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn temp_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("switchd")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Ethernet + IPv4 + UDP to `dst_port`, `len` bytes.
fn udp_frame(src_port: u16, dst_port: u16, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len.max(42)];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip_len = (f.len() - 14) as u16;
    f[14] = 0x45;
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[10, 0, 0, 1]);
    f[30..34].copy_from_slice(&[10, 0, 0, 2]);
    f[34..36].copy_from_slice(&src_port.to_be_bytes());
    f[36..38].copy_from_slice(&dst_port.to_be_bytes());
    f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    f
}

/// A control socket path under SUN_LEN (108 bytes) whatever the
/// checkout's depth: in the system temp dir, named after the test's dir.
fn short_sock(dir: &Path) -> PathBuf {
    let name = dir
        .file_name()
        .map_or("x".into(), |n| n.to_string_lossy().into_owned());
    std::env::temp_dir().join(format!("fp{}-{name}.ctl", std::process::id()))
}

fn write_capture(path: &Path, frames: &[Vec<u8>]) {
    let mut w = PcapWriter::create(path, 0).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write(1_000_000_000 + i as u64 * 1000, f).unwrap();
    }
    w.finish().unwrap();
}

fn start(dir: &Path, rules: &str, ports: Vec<(u32, PortSpec)>) -> (Switchd, PathBuf) {
    let dp = Config {
        second_level: flowpath_datapath::SecondLevel::None,
        ..Config::default()
    };
    start_pmds(dir, rules, ports, Vec::new(), dp)
}

/// A `pcap:` port spec.
fn pcap_in(path: PathBuf, looped: bool) -> PortSpec {
    PortSpec::Pcap { path, looped }
}

fn call(ctl: &Path, method: &str, params: &[&str]) -> Result<String, String> {
    let mut c = Client::connect(ctl, Duration::from_secs(10)).unwrap();
    let p: Vec<String> = params.iter().map(|s| s.to_string()).collect();
    c.call(method, &p).unwrap()
}

fn json(ctl: &Path, method: &str) -> serde_json::Value {
    let out = call(ctl, method, &["--json"]).unwrap();
    serde_json::from_str(&out).unwrap()
}

fn port_tx(ctl: &Path, port: u32) -> u64 {
    let v = json(ctl, "dpctl/show");
    v["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["port_no"] == port)
        .unwrap()["tx"]["packets"]
        .as_u64()
        .unwrap()
}

/// Waits (bounded) until `cond` holds.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < Duration::from_secs(20), "timed out: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn capture_through_the_switch_as_the_rules_say() {
    let dir = temp_dir("capture");
    let frames: Vec<Vec<u8>> = (0..1000)
        .map(|i| udp_frame(5000 + (i % 7) as u16, 1000 + (i % 10) as u16, 60 + i % 50))
        .collect();
    let input = dir.join("in.pcap");
    write_capture(&input, &frames);
    let out = dir.join("out.pcap");
    let rules = "priority=10,udp,tp_dst=1005,actions=drop\npriority=1,in_port=1,actions=output:2\n";
    let (sw, ctl) = start(
        &dir,
        rules,
        vec![
            (1, pcap_in(input, false)),
            (2, PortSpec::PcapOut { path: out.clone() }),
        ],
    );
    assert!(dir.join("fp.pid").exists());
    wait_for("all frames received", || {
        json(&ctl, "dpif-netdev/pmd-stats-show")[0]["packets_received"] == 1000
    });
    let text = call(&ctl, "dpif-netdev/pmd-stats-show", &[]).unwrap();
    assert!(
        text.starts_with("pmd thread numa_id 0 core_id any:\n  packets received: 1000\n"),
        "{text}"
    );
    // Open vSwitch 3.1's lines (its tiers flowpath has not at 0), the
    // cycles per received packet with their (cycles/packets).
    assert!(
        text.contains("  avg. datapath passes per packet: 1.00\n  phwol hits: 0\n"),
        "{text}"
    );
    let per_packet = text
        .lines()
        .find(|l| l.starts_with("  avg processing cycles per packet: "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(per_packet.ends_with("/1000)"), "{text}");
    assert!(
        text.contains("main thread:\n  packets received: 0\n"),
        "{text}"
    );
    assert_eq!(port_tx(&ctl, 2), 900);
    let flows = call(&ctl, "dpctl/dump-flows", &[]).unwrap();
    assert!(
        flows.contains("actions:drop") && flows.contains("actions:2"),
        "{flows}"
    );
    let rxq = call(&ctl, "dpif-netdev/pmd-rxq-show", &[]).unwrap();
    assert!(
        rxq.contains("port: pcap:") && rxq.contains("queue-id:  0"),
        "{rxq}"
    );
    // memory/show: the megaflows dpctl/dump-flows lists, and what they cost.
    let n_flows = flows.lines().count() as u64;
    let mem = json(&ctl, "memory/show");
    let m = &mem["pmds"][0]["memory"];
    assert_eq!(m["megaflows"].as_u64(), Some(n_flows), "{mem}");
    assert_eq!(
        m["action_lists"].as_u64(),
        Some(2),
        "drop and output:2: {mem}"
    );
    assert!(m["records"].as_u64().unwrap() >= 64 * n_flows, "{mem}");
    assert!(mem["rss_kb"].as_u64().unwrap() > 0, "{mem}");
    let text = call(&ctl, "memory/show", &[]).unwrap();
    assert!(
        text.starts_with(&format!("pmd 0: megaflows:{n_flows} bytes:")),
        "{text}"
    );
    sw.shutdown();
    assert!(!ctl.exists(), "control socket removed");
    assert!(!dir.join("fp.pid").exists(), "pidfile removed");
    let got = load_ethernet_frames(&out).unwrap();
    let want: Vec<&Vec<u8>> = frames
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 10 != 5)
        .map(|(_, f)| f)
        .collect();
    assert_eq!(got.len(), want.len());
    for (i, w) in want.iter().enumerate() {
        assert_eq!(got.get(i), Some(&w[..]), "frame {i} in order, unchanged");
    }
}

#[test]
fn rules_and_config_change_at_run_time() {
    let dir = temp_dir("runtime");
    let frames: Vec<Vec<u8>> = (0..64).map(|i| udp_frame(7, 2000 + i, 64)).collect();
    let input = dir.join("loop.pcap");
    write_capture(&input, &frames);
    let fwd = "priority=1,in_port=1,actions=output:2\n";
    let (sw, ctl) = start(
        &dir,
        fwd,
        vec![
            (1, pcap_in(input, true)),
            (2, PortSpec::Null),
            (3, PortSpec::Null),
        ],
    );
    wait_for("traffic on port 2", || port_tx(&ctl, 2) > 10_000);

    // replace-flows: from the reply on, nothing reaches port 2.
    let to3 = dir.join("to3.flows");
    std::fs::write(&to3, "priority=1,in_port=1,actions=output:3\n").unwrap();
    let r = call(&ctl, "replace-flows", &[to3.to_str().unwrap()]).unwrap();
    assert!(r.contains("rules replaced"), "{r}");
    let at_reply = port_tx(&ctl, 2);
    wait_for("traffic on port 3", || port_tx(&ctl, 3) > 10_000);
    assert_eq!(port_tx(&ctl, 2), at_reply, "no packet by the old rules");

    // add-flow / del-flows / dump-flows.
    call(
        &ctl,
        "add-flow",
        &["priority=5,udp,tp_dst=2001,actions=output:2"],
    )
    .unwrap();
    let d = call(&ctl, "dump-flows", &[]).unwrap();
    let lines: Vec<&str> = d.lines().collect();
    assert_eq!(lines.len(), 2, "{d}");
    assert!(
        lines[0].contains("priority=5,udp,tp_dst=2001 actions=output:2"),
        "{d}"
    );
    let before = port_tx(&ctl, 2);
    wait_for("udp 2001 reaches port 2", || {
        port_tx(&ctl, 2) > before + 100
    });
    let r = call(&ctl, "del-flows", &["udp"]).unwrap();
    assert!(r.starts_with("1 rules deleted"), "{r}");
    let e = call(
        &ctl,
        "add-flow",
        &["priority=5,udp,tp_dst=99999,actions=drop"],
    )
    .unwrap_err();
    assert!(e.contains("tp_dst"), "{e}");

    // Configuration.
    let c = call(
        &ctl,
        "config/set",
        &["second-level=smc", "emc-enable=false"],
    )
    .unwrap();
    assert!(
        c.contains("second-level=smc") && c.contains("emc-enable=false"),
        "{c}"
    );
    let v = json(&ctl, "config/show");
    assert_eq!(v["second-level"], "smc");
    // auto at run time: the PMDs keep forwarding while it explores.
    call(
        &ctl,
        "config/set",
        &["second-level=auto", "emc-enable=true"],
    )
    .unwrap();
    assert_eq!(json(&ctl, "config/show")["second-level"], "auto");
    let before = port_tx(&ctl, 3);
    wait_for("traffic under auto", || port_tx(&ctl, 3) > before + 10_000);
    call(
        &ctl,
        "config/set",
        &["second-level=smc", "emc-enable=false"],
    )
    .unwrap();
    call(&ctl, "config/set", &["upcall-budget=5"]).unwrap();
    assert_eq!(json(&ctl, "config/show")["upcall-budget"], 5);
    call(&ctl, "config/set", &["upcall-budget=0"]).unwrap();
    let e = call(&ctl, "config/set", &["flow-limit=x"]).unwrap_err();
    assert!(e.contains("flow-limit=x"), "{e}");
    let e = call(&ctl, "config/set", &["colour=blue"]).unwrap_err();
    assert!(e.contains("unknown key 'colour'"), "{e}");
    call(&ctl, "dpif-netdev/pmd-stats-clear", &[]).unwrap();
    wait_for("smc hits after the change", || {
        json(&ctl, "dpif-netdev/pmd-stats-show")[0]["smc_hits"]
            .as_u64()
            .unwrap()
            > 100
    });
    let trace = call(
        &ctl,
        "ofproto/trace",
        &["in_port=1,udp,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_dst=2000"],
    )
    .unwrap();
    assert!(trace.contains("Datapath actions: 3"), "{trace}");

    // exit stops the switch.
    let stop = sw.stop_flag();
    call(&ctl, "exit", &[]).unwrap();
    assert!(stop.load(Ordering::Relaxed));
    sw.shutdown();
    assert!(!ctl.exists());
}

#[test]
fn bad_capture_port_fails_naming_it() {
    let dir = temp_dir("bad");
    let missing = dir.join("missing.pcap");
    let cfg = SwitchdConfig {
        bridge: Default::default(),
        openflow: Default::default(),
        sample_sets: vec![],
        ovsdb: None,
        tunnels: Vec::new(),
        underlay: None,
        ports: vec![(1, pcap_in(missing.clone(), false))],
        pmd_cpus: Vec::new(),
        datapath: Config::default(),
        rules: RuleSet::new(Vec::new(), vec![], vec![], vec![1]),
        ctl_path: short_sock(&dir),
        pidfile: None,
    };
    let e = Switchd::start(cfg).err().expect("fails").to_string();
    assert!(
        e.contains("port 'pcap:") && e.contains("missing.pcap"),
        "{e}"
    );
    assert!(!short_sock(&dir).exists());
}

fn start_pmds(
    dir: &Path,
    rules: &str,
    ports: Vec<(u32, PortSpec)>,
    pmd_cpus: Vec<usize>,
    dp: Config,
) -> (Switchd, PathBuf) {
    start_bridge(dir, rules, ports, pmd_cpus, dp, Bridge::default())
}

fn start_bridge(
    dir: &Path,
    rules: &str,
    ports: Vec<(u32, PortSpec)>,
    pmd_cpus: Vec<usize>,
    dp: Config,
    bridge: Bridge,
) -> (Switchd, PathBuf) {
    start_bridge_arc(dir, rules, ports, pmd_cpus, dp, Arc::new(bridge))
}

fn start_bridge_arc(
    dir: &Path,
    rules: &str,
    ports: Vec<(u32, PortSpec)>,
    pmd_cpus: Vec<usize>,
    dp: Config,
    bridge: Arc<Bridge>,
) -> (Switchd, PathBuf) {
    let ctl = short_sock(dir);
    let nums = ports.iter().map(|p| p.0).collect();
    let cfg = SwitchdConfig {
        bridge,
        openflow: Default::default(),
        sample_sets: vec![],
        ovsdb: None,
        tunnels: Vec::new(),
        underlay: None,
        ports,
        pmd_cpus,
        datapath: dp,
        rules: RuleSet::new(parse_rules(rules, None).unwrap(), vec![], vec![], nums),
        ctl_path: ctl.clone(),
        pidfile: Some(dir.join("fp.pid")),
    };
    (Switchd::start(cfg).expect("switch starts"), ctl)
}

#[test]
fn two_pmds_forward_exactly_and_take_rule_changes() {
    let dir = temp_dir("two-pmds");
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pmd_cpus = if cpus >= 2 { vec![0, 1] } else { vec![0, 0] };
    let a: Vec<Vec<u8>> = (0..3000)
        .map(|i| udp_frame(1, 3000 + (i % 50) as u16, 70))
        .collect();
    let b: Vec<Vec<u8>> = (0..2000)
        .map(|i| udp_frame(2, 4000 + (i % 30) as u16, 90))
        .collect();
    let (pa, pb) = (dir.join("a.pcap"), dir.join("b.pcap"));
    write_capture(&pa, &a);
    write_capture(&pb, &b);
    let out = dir.join("out.pcap");
    let rules = "priority=1,in_port=1,actions=output:3\npriority=1,in_port=2,actions=output:4\n";
    let (sw, ctl) = start_pmds(
        &dir,
        rules,
        vec![
            (1, pcap_in(pa, false)),
            (2, pcap_in(pb, false)),
            (3, PortSpec::PcapOut { path: out.clone() }),
            (4, PortSpec::Null),
        ],
        pmd_cpus,
        Config::default(),
    );
    wait_for("both captures received", || {
        let v = json(&ctl, "dpif-netdev/pmd-stats-show");
        v.as_array()
            .unwrap()
            .iter()
            .map(|p| p["packets_received"].as_u64().unwrap())
            .sum::<u64>()
            == 5000
    });
    let v = json(&ctl, "dpif-netdev/pmd-stats-show");
    let per: Vec<u64> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["packets_received"].as_u64().unwrap())
        .collect();
    assert_eq!(per.len(), 2);
    let mut sorted = per.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, vec![2000, 3000], "one capture per PMD: {per:?}");
    let rxq = json(&ctl, "dpif-netdev/pmd-rxq-show");
    for p in rxq.as_array().unwrap() {
        assert_eq!(p["rxqs"].as_array().unwrap().len(), 1, "{rxq}");
    }
    assert_eq!(port_tx(&ctl, 3), 3000);
    assert_eq!(port_tx(&ctl, 4), 2000);
    // null ports have a tx queue per PMD; a capture output has one, shared.
    let show = json(&ctl, "dpctl/show");
    let txq: Vec<u64> = show["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["n_txq"].as_u64().unwrap())
        .collect();
    assert_eq!(txq, vec![1, 1, 1, 2], "{show}");
    // Rule statistics reach dump-flows after a revalidator round.
    call(&ctl, "revalidator/wait", &[]).unwrap();
    let d = call(&ctl, "dump-flows", &[]).unwrap();
    let counted: u64 = d
        .lines()
        .filter_map(|l| {
            l.split("n_packets=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum();
    let megaflow_pkts: u64 = json(&ctl, "dpctl/dump-flows")
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["packets"].as_u64().unwrap())
        .sum();
    // Every frame counts for its rule, as in OVS: the megaflows' hits
    // and the packets whose upcalls installed them (which, as in OVS's
    // datapath, the megaflows leave out).
    let upcalls: u64 = json(&ctl, "dpif-netdev/pmd-stats-show")
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["miss_with_success_upcall"].as_u64().unwrap())
        .sum();
    assert_eq!(counted, 5000, "{d}");
    assert_eq!(megaflow_pkts + upcalls, 5000, "{d}");
    let u = call(&ctl, "upcall/show", &[]).unwrap();
    assert!(
        u.contains("flows         : (current 2)") && u.contains("(limit 200000)"),
        "{u}"
    );
    sw.shutdown();
    let got = load_ethernet_frames(&out).unwrap();
    assert_eq!(got.len(), 3000);
    for (i, f) in a.iter().enumerate() {
        assert_eq!(got.get(i), Some(&f[..]), "frame {i}");
    }
}

#[test]
fn two_pmds_looped_replace_flows_reaches_both() {
    let dir = temp_dir("two-pmds-loop");
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pmd_cpus = if cpus >= 2 { vec![0, 1] } else { vec![0, 0] };
    let a: Vec<Vec<u8>> = (0..64).map(|i| udp_frame(1, 3000 + i, 64)).collect();
    let (pa, pb) = (dir.join("a.pcap"), dir.join("b.pcap"));
    write_capture(&pa, &a);
    write_capture(&pb, &a);
    let rules = "priority=1,actions=output:3\n";
    let (sw, ctl) = start_pmds(
        &dir,
        rules,
        vec![
            (1, pcap_in(pa, true)),
            (2, pcap_in(pb, true)),
            (3, PortSpec::Null),
            (4, PortSpec::Null),
        ],
        pmd_cpus,
        Config::default(),
    );
    wait_for("traffic on port 3", || port_tx(&ctl, 3) > 20_000);
    let f = dir.join("to4.flows");
    std::fs::write(&f, "priority=1,actions=output:4\n").unwrap();
    call(&ctl, "replace-flows", &[f.to_str().unwrap()]).unwrap();
    let at_reply = port_tx(&ctl, 3);
    wait_for("traffic on port 4", || port_tx(&ctl, 4) > 20_000);
    assert_eq!(port_tx(&ctl, 3), at_reply, "neither PMD used the old rules");
    let v = json(&ctl, "dpif-netdev/pmd-stats-show");
    for p in v.as_array().unwrap() {
        assert!(p["packets_received"].as_u64().unwrap() > 1000, "{v}");
    }
    // The per-PMD megaflow dump names each PMD.
    let d = call(&ctl, "dpctl/dump-flows", &[]).unwrap();
    assert_eq!(
        d.matches("flow-dump from pmd on cpu core").count(),
        2,
        "{d}"
    );
    sw.shutdown();
}

#[test]
fn normal_learns_floods_by_vlan_and_shows_its_table() {
    let dir = temp_dir("normal");
    let input = dir.join("in.pcap");
    // 100 frames from 02:00:00:00:00:01 to 02:00:00:00:00:02 (unknown:
    // flooded to the other ports of VLAN 0).
    let frames: Vec<Vec<u8>> = (0..100).map(|i| udp_frame(1000 + i, 80, 60)).collect();
    write_capture(&input, &frames);
    let mut vlans = PortVlans::default();
    vlans.set(4, VlanMode::Access(10));
    let bridge = Bridge::new(MacTable::new(16, 300), vlans, false);
    let (sw, ctl) = start_bridge(
        &dir,
        "priority=0,actions=NORMAL\n",
        vec![
            (1, pcap_in(input, false)),
            (
                2,
                PortSpec::PcapOut {
                    path: dir.join("out2.pcap"),
                },
            ),
            (3, PortSpec::Null),
            (4, PortSpec::Null),
        ],
        Vec::new(),
        Config::default(),
        bridge,
    );
    wait_for("all frames received", || {
        json(&ctl, "dpif-netdev/pmd-stats-show")[0]["packets_received"] == 100
    });
    assert_eq!(port_tx(&ctl, 2), 100);
    assert_eq!(port_tx(&ctl, 3), 100);
    assert_eq!(port_tx(&ctl, 4), 0, "port 4 is an access port of VLAN 10");
    let fdb = call(&ctl, "fdb/show", &["br0"]).unwrap();
    assert_eq!(
        fdb.lines().next(),
        Some(" port  VLAN  MAC                Age"),
        "{fdb}"
    );
    assert!(
        fdb.lines()
            .nth(1)
            .unwrap()
            .starts_with("    1     0  02:00:00:00:00:01"),
        "{fdb}"
    );
    let v = json(&ctl, "fdb/show");
    assert_eq!(v[0]["mac"], "02:00:00:00:00:01", "{v}");
    let stats = call(&ctl, "fdb/stats-show", &[]).unwrap();
    assert!(
        stats.contains("Current/maximum MAC entries in the table: 1/16")
            && stats.contains("Total number of learned MAC entries     : 1"),
        "{stats}"
    );
    // The megaflow NORMAL installed matches both MACs exactly.
    let flows = call(&ctl, "dpctl/dump-flows", &[]).unwrap();
    assert!(
        flows.contains("dl_src=02:00:00:00:00:01,dl_dst=02:00:00:00:00:02")
            && flows.contains("actions:2,3"),
        "{flows}"
    );
    // A trace (datapath-flow syntax) of the reply: forwarded to port 1,
    // and the trace does not learn.
    let t = call(
        &ctl,
        "ofproto/trace",
        &["br0", "in_port(2),eth(src=02:00:00:00:00:02,dst=02:00:00:00:00:01),eth_type(0x0800),ipv4(src=10.0.0.2,dst=10.0.0.1,proto=17,ttl=64,frag=no),udp(src=80,dst=1000)"],
    )
    .unwrap();
    assert!(t.contains("Datapath actions: 1"), "{t}");
    assert_eq!(call(&ctl, "fdb/show", &[]).unwrap().lines().count(), 2);
    assert_eq!(
        call(&ctl, "fdb/flush", &["br0"]).unwrap(),
        "table successfully flushed\n"
    );
    assert_eq!(call(&ctl, "fdb/show", &[]).unwrap().lines().count(), 1);
    sw.shutdown();
}

#[test]
fn groups_change_at_run_time() {
    let dir = temp_dir("groups");
    let input = dir.join("in.pcap");
    let frames: Vec<Vec<u8>> = (0..50).map(|i| udp_frame(1000 + i, 80, 60)).collect();
    write_capture(&input, &frames);
    let (sw, ctl) = start(
        &dir,
        "priority=0,actions=drop\n",
        vec![
            (1, pcap_in(input, true)),
            (2, PortSpec::Null),
            (3, PortSpec::Null),
        ],
    );
    let all = "group_id=1,type=all,bucket=output:2,bucket=output:3";
    assert!(call(&ctl, "add-group", &[all])
        .unwrap()
        .starts_with("group 1 installed;"));
    assert!(call(&ctl, "add-group", &[all])
        .unwrap_err()
        .contains("exists"));
    let dump = call(&ctl, "dump-groups", &[]).unwrap();
    assert_eq!(
        dump,
        format!(
            " {}\n",
            "group_id=1,type=all,bucket=actions=output:2,bucket=actions=output:3"
        )
    );
    call(&ctl, "add-flow", &["priority=5,udp,actions=group:1"]).unwrap();
    assert!(call(&ctl, "add-flow", &["priority=6,tcp,actions=group:9"])
        .unwrap_err()
        .contains("group:9: no such group"));
    wait_for("both buckets send", || {
        port_tx(&ctl, 2) > 100 && port_tx(&ctl, 3) > 100
    });
    // In use: not deleted.
    assert!(call(&ctl, "del-groups", &[])
        .unwrap_err()
        .contains("groups unchanged"));
    // Modified to one bucket: port 3 stops growing.
    call(&ctl, "mod-group", &["group_id=1,type=all,bucket=output:2"]).unwrap();
    let t3 = port_tx(&ctl, 3);
    let t2 = port_tx(&ctl, 2);
    wait_for("port 2 keeps receiving", || port_tx(&ctl, 2) > t2 + 100);
    assert!(
        port_tx(&ctl, 3) <= t3 + 64,
        "at most the batches in flight reach port 3"
    );
    call(&ctl, "del-flows", &["udp"]).unwrap();
    assert!(call(&ctl, "del-groups", &["group_id=1"])
        .unwrap()
        .contains("1 groups deleted"));
    assert_eq!(call(&ctl, "dump-groups", &[]).unwrap(), "");
    sw.shutdown();
}

#[test]
fn learn_adds_flows_shown_traced_and_deleted() {
    let dir = temp_dir("learn");
    let input = dir.join("in.pcap");
    // 50 frames from 02:00:00:00:00:01 (port 1) to 02:00:00:00:00:02.
    let frames: Vec<Vec<u8>> = (0..50).map(|i| udp_frame(1000 + i, 80, 60)).collect();
    write_capture(&input, &frames);
    let bridge = Arc::new(Bridge::default());
    let (sw, ctl) = start_bridge_arc(
        &dir,
        "table=0,actions=learn(table=1,hard_timeout=300,priority=10,NXM_OF_VLAN_TCI[0..11],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[]),resubmit(,1)\n\
         table=1,priority=0,actions=output:2\n",
        vec![
            (1, pcap_in(input, false)),
            (2, PortSpec::Null),
            (3, PortSpec::Null),
        ],
        Vec::new(),
        Config::default(),
        bridge.clone(),
    );
    wait_for("all frames received", || {
        json(&ctl, "dpif-netdev/pmd-stats-show")[0]["packets_received"] == 50
    });
    assert_eq!(port_tx(&ctl, 2), 50);
    // The learned flow, as OVS's dump-flows prints it.
    let dump = call(&ctl, "dump-flows", &[]).unwrap();
    assert!(
        dump.contains("table=1, hard_timeout=300, priority=10,vlan_tci=0x0000/0x0fff,dl_dst=02:00:00:00:00:01 actions=output:1"),
        "{dump}"
    );
    let v = json(&ctl, "dump-flows");
    assert!(
        v.as_array().unwrap().iter().any(|f| f["learned"] == true),
        "{v}"
    );
    // A reply to the learned MAC goes to port 1 (the trace sees the
    // learned flow).
    let reply = "in_port=3,dl_src=02:00:00:00:00:02,dl_dst=02:00:00:00:00:01,ip";
    let t = call(&ctl, "ofproto/trace", &["br0", reply]).unwrap();
    assert!(t.contains("Datapath actions: 1"), "{t}");
    // del-flows removes learned flows too.
    call(&ctl, "del-flows", &["table=1"]).unwrap();
    let dump = call(&ctl, "dump-flows", &[]).unwrap();
    assert!(!dump.contains("dl_dst=02:00:00:00:00:01"), "{dump}");
    // So does replace-flows (the table becomes the file, as ovs-ofctl's):
    // a flow learned again (put in the bridge's store, as a PMD does) goes.
    let learned = flowpath_ofproto::parse::parse_rules(
        "table=1,priority=10,dl_dst=02:00:00:00:00:09,actions=output:3",
        None,
    )
    .unwrap();
    bridge.learned.add(learned, 0);
    assert!(call(&ctl, "dump-flows", &[])
        .unwrap()
        .contains("02:00:00:00:00:09"));
    let file = dir.join("new.flows");
    std::fs::write(&file, "priority=0,actions=output:2\n").unwrap();
    call(&ctl, "replace-flows", &[file.to_str().unwrap()]).unwrap();
    let dump = call(&ctl, "dump-flows", &[]).unwrap();
    assert!(!dump.contains("02:00:00:00:00:09"), "{dump}");
    sw.shutdown();
}

/// `config/show` lists every configuration key and `config/set` takes
/// every key back, live, with the value that differs from its default
/// (the key table is also what the command line flags and the bench
/// tokens are made of: their tests check them against the same table).
#[test]
fn config_show_lists_every_key_config_set_accepts() {
    use flowpath_datapath::keys;
    let dir = temp_dir("keys");
    let frames: Vec<Vec<u8>> = (0..10).map(|i| udp_frame(1000 + i, 2000, 60)).collect();
    let cap = dir.join("in.pcap");
    write_capture(&cap, &frames);
    let (sw, ctl) = start(
        &dir,
        "actions=output:2\n",
        vec![(1, pcap_in(cap, true)), (2, PortSpec::Null)],
    );
    let text = call(&ctl, "config/show", &[]).unwrap();
    let shown: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, _)| k)
        .collect();
    // The datapath's keys, the bridge's frag mode, the tracker's
    // timeouts.
    let mut want = keys::key_names();
    want.push("frag-mode");
    let timeouts: Vec<String> = flowpath_conntrack::timeouts::NAMES
        .iter()
        .map(|n| format!("ct-timeout-{n}"))
        .collect();
    want.extend(timeouts.iter().map(String::as_str));
    assert_eq!(shown, want, "{text}");
    let v = json(&ctl, "config/show");
    for k in keys::KEYS {
        assert!(v.get(k.name).is_some(), "--json lacks {}: {v}", k.name);
        // A valid value other than the current one.
        let new = match k.kind {
            keys::KeyKind::Bool => (k.get(&keys::defaults()) != "true").to_string(),
            keys::KeyKind::Cache => "hybrid".to_string(),
            _ => "8".to_string(),
        };
        let out = call(&ctl, "config/set", &[&format!("{}={new}", k.name)])
            .unwrap_or_else(|e| panic!("config/set {}={new}: {e}", k.name));
        assert!(out.contains(&format!("{}={new}\n", k.name)), "{out}");
    }
    let e = call(&ctl, "config/set", &["cd-ways=3"]).unwrap_err();
    assert!(e.contains("cd_ways"), "{e}");
    sw.shutdown();
}

/// `config/set frag-mode=` changes how the running switch looks IP
/// fragments up (its traces and megaflows follow); a bad mode changes
/// nothing.
#[test]
fn frag_mode_changes_at_run_time() {
    let dir = temp_dir("frag-mode");
    let frames: Vec<Vec<u8>> = (0..4).map(|i| udp_frame(1000 + i, 2000, 60)).collect();
    let cap = dir.join("in.pcap");
    write_capture(&cap, &frames);
    let (sw, ctl) = start(
        &dir,
        "priority=100,udp,tp_dst=53,actions=drop\npriority=10,actions=output:2\n",
        vec![(1, pcap_in(cap, true)), (2, PortSpec::Null)],
    );
    let first = "in_port=1,udp,nw_src=10.0.0.1,nw_dst=10.0.0.2,nw_frag=first,udp_src=7,udp_dst=53";
    let trace = |ctl: &std::path::Path| call(ctl, "ofproto/trace", &[first]).unwrap();
    assert!(json(&ctl, "config/show")["frag-mode"] == "normal");
    // OVS's default: the first fragment looked up with ports 0.
    assert!(
        trace(&ctl).contains("Datapath actions: 2"),
        "{}",
        trace(&ctl)
    );
    let out = call(&ctl, "config/set", &["frag-mode=nx-match"]).unwrap();
    assert!(out.contains("frag-mode=nx-match\n"), "{out}");
    assert!(
        trace(&ctl).contains("Datapath actions: drop"),
        "{}",
        trace(&ctl)
    );
    call(&ctl, "config/set", &["frag-mode=drop"]).unwrap();
    let t = trace(&ctl);
    assert!(t.contains("fragment handling mode is \"drop\""), "{t}");
    let e = call(&ctl, "config/set", &["frag-mode=reassemble"]).unwrap_err();
    assert!(e.contains("not supported"), "{e}");
    let e = call(&ctl, "config/set", &["frag-mode=sideways", "flow-limit=5"]).unwrap_err();
    assert!(e.contains("frag-mode"), "{e}");
    let v = json(&ctl, "config/show");
    assert_eq!(v["frag-mode"], "drop", "unchanged by the refused change");
    assert_ne!(v["flow-limit"], 5, "all or nothing");
    sw.shutdown();
}

/// Ports added and removed while traffic flows: `dpctl/add-if` makes a
/// port `FLOOD` reaches at once (the megaflows revalidated), numbered as
/// asked or the lowest free number; `dpctl/del-if` takes it out of
/// `dpctl/show` and the flood while the other ports go on; bad requests
/// are refused naming the port, changing nothing.
#[test]
fn ports_added_and_removed_at_run_time() {
    let dir = temp_dir("add-del");
    let frames: Vec<Vec<u8>> = (0..64).map(|i| udp_frame(1, 5000 + i, 80)).collect();
    let pa = dir.join("a.pcap");
    write_capture(&pa, &frames);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pmd_cpus = if cpus >= 2 { vec![0, 1] } else { vec![0, 0] };
    let (sw, ctl) = start_pmds(
        &dir,
        "in_port=1,actions=FLOOD\n",
        vec![(1, pcap_in(pa, true)), (2, PortSpec::Null)],
        pmd_cpus,
        Config::default(),
    );
    let ports = |ctl: &Path| -> Vec<u64> {
        json(ctl, "dpctl/show")["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["port_no"].as_u64().unwrap())
            .collect()
    };
    let grows = |ctl: &Path, port: u32| {
        let a = port_tx(ctl, port);
        wait_for(&format!("port {port} sends"), || port_tx(ctl, port) > a);
    };
    grows(&ctl, 2);
    assert_eq!(ports(&ctl), vec![1, 2]);
    let out = call(&ctl, "dpctl/add-if", &["3=null"]).unwrap();
    assert_eq!(out, "port 3: null added\n");
    grows(&ctl, 3);
    // The lowest free number; the same spec twice; taken and bad numbers;
    // a bad spec: refused, nothing changed.
    assert_eq!(
        call(&ctl, "dpctl/add-if", &["netdev@ovs-netdev", "tap:fpadd0"]).unwrap(),
        "port 4: tap:fpadd0 added\n"
    );
    for (arg, says) in [
        ("3=null", "port 3 exists"),
        ("5=tap:fpadd0", "already port 4"),
        ("0=null", "1 to 65279"),
        ("70000=null", "1 to 65279"),
        ("bogus:x", "bogus:x"),
    ] {
        let e = call(&ctl, "dpctl/add-if", &[arg]).unwrap_err();
        assert!(e.contains(says), "{arg}: {e}");
    }
    assert_eq!(ports(&ctl), vec![1, 2, 3, 4]);
    grows(&ctl, 4);
    // Removed by number and by interface name.
    assert_eq!(
        call(&ctl, "dpctl/del-if", &["3"]).unwrap(),
        "port 3: null removed\n"
    );
    assert_eq!(
        call(&ctl, "dpctl/del-if", &["fpadd0"]).unwrap(),
        "port 4: tap:fpadd0 removed\n"
    );
    assert_eq!(ports(&ctl), vec![1, 2]);
    let tap_gone = !Path::new("/sys/class/net/fpadd0").exists();
    assert!(tap_gone, "the tap is deleted with its port");
    let e = call(&ctl, "dpctl/del-if", &["9"]).unwrap_err();
    assert!(e.contains("9: no such port"), "{e}");
    grows(&ctl, 2);
    // Back again.
    call(&ctl, "dpctl/add-if", &["3=null"]).unwrap();
    grows(&ctl, 3);
    let rxq = json(&ctl, "dpif-netdev/pmd-rxq-show");
    let polled: usize = rxq
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["rxqs"].as_array().unwrap().len())
        .sum();
    assert_eq!(polled, 1, "null ports have no rx queue: {rxq}");
    sw.shutdown();
}

/// `pmd-maxsleep`: 0 (a spinning PMD) still forwards and takes commands;
/// beyond 10000 µs is refused, naming the limit.
#[test]
fn pmd_maxsleep_zero_spins_and_forwards() {
    let dir = temp_dir("maxsleep");
    let pa = dir.join("a.pcap");
    let frames: Vec<Vec<u8>> = (0..200).map(|i| udp_frame(1, 6000 + i, 80)).collect();
    write_capture(&pa, &frames);
    let (sw, ctl) = start(
        &dir,
        "in_port=1,actions=output:2\n",
        vec![(1, pcap_in(pa, true)), (2, PortSpec::Null)],
    );
    let out = call(&ctl, "config/set", &["pmd-maxsleep=0"]).unwrap();
    assert!(out.contains("pmd-maxsleep=0"), "{out}");
    let a = port_tx(&ctl, 2);
    wait_for("port 2 sends while the PMD spins", || port_tx(&ctl, 2) > a);
    let e = call(&ctl, "config/set", &["pmd-maxsleep=20000"]).unwrap_err();
    assert!(e.contains("at most 10000"), "{e}");
    let out = call(&ctl, "config/set", &["pmd-maxsleep=500"]).unwrap();
    assert!(out.contains("pmd-maxsleep=500"), "{out}");
    sw.shutdown();
}
