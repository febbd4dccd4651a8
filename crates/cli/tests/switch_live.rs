//! `flowpath switch` on live interfaces, end to end, as root: two network
//! namespaces joined through the switch (namespace A ↔ veth ↔ port 1,
//! port 2 ↔ veth ↔ namespace B), for each pair of port kinds.
//!
//! Each test builds its own namespaces and veth pairs with names unique to
//! this process, and a guard removes them (and stops the switch it
//! started, by PID) even when the test fails. The tests take one lock so
//! that only one topology and one switch exist at a time (iperf3 and nmap
//! would otherwise measure each other). Without root they say they are
//! skipped (and fail under CI, which runs as root).
//!
//! What is checked: ping both ways, iperf3 TCP for 3 s (the rate is
//! printed), an nmap SYN scan of ports 1-2000 against a rule that drops
//! port 90 (port 90 `filtered`, no other port filtered), `replace-flows`
//! under traffic (nothing forwarded after the reply to a drop table;
//! forwarding back after the reply restoring it), every control command
//! through both `flowpath ctl` and the real `ovs-appctl`, a tap port
//! reachable from a namespace, the idle switch's CPU use, and SIGTERM
//! under traffic: exit 0 within a second, no XDP program and no tap left.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_flowpath");

/// One topology at a time.
static LOCK: Mutex<()> = Mutex::new(());
static SEQ: AtomicU32 = AtomicU32::new(0);

const FWD_RULES: &str = "\
priority=100,tcp,tp_dst=90,actions=drop
priority=10,in_port=1,actions=output:2
priority=10,in_port=2,actions=output:1
priority=0,actions=drop
";

const DROP_RULES: &str = "priority=0,actions=drop\n";

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Whether the live tests can run here; says why not (and fails under CI).
fn can_run(test: &str, tools: &[&str]) -> bool {
    let mut missing: Vec<&str> = tools.iter().copied().filter(|t| !have(t)).collect();
    if !is_root() {
        missing.push("root");
    }
    if missing.is_empty() {
        return true;
    }
    assert!(
        !flowpath_io::corpus::under_ci(),
        "{test}: needs {missing:?}, which CI must provide (.ci/run installs the tools)"
    );
    eprintln!("SKIPPED {test}: needs {missing:?}");
    false
}

/// Runs `cmd` with `sh -c`; returns its output.
fn sh(cmd: &str) -> Output {
    Command::new("sh")
        .args(["-c", cmd])
        .output()
        .unwrap_or_else(|e| panic!("sh -c {cmd}: {e}"))
}

/// Runs `cmd`, which must succeed; returns stdout.
fn sh_ok(cmd: &str) -> String {
    let o = sh(cmd);
    assert!(
        o.status.success(),
        "{cmd}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Two namespaces, each joined by a veth pair to the root namespace.
/// `a`/`b` are the namespaces, `pa`/`pb` the root-side ends (the switch's
/// ports), `ea`/`eb` the namespace-side ends (10.77.0.1 and 10.77.0.2).
struct Topo {
    a: String,
    b: String,
    pa: String,
    pb: String,
    ea: String,
    eb: String,
    extra_links: Vec<String>,
}

impl Topo {
    fn new() -> Topo {
        let id = format!(
            "{}{}",
            std::process::id() % 100_000,
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let t = Topo {
            a: format!("fpA{id}"),
            b: format!("fpB{id}"),
            pa: format!("fpa{id}"),
            pb: format!("fpb{id}"),
            ea: format!("fea{id}"),
            eb: format!("feb{id}"),
            extra_links: Vec::new(),
        };
        for (ns, p, e, addr, mac) in [
            (&t.a, &t.pa, &t.ea, "10.77.0.1/24", "02:00:00:77:00:01"),
            (&t.b, &t.pb, &t.eb, "10.77.0.2/24", "02:00:00:77:00:02"),
        ] {
            sh_ok(&format!("ip netns add {ns}"));
            sh_ok(&format!(
                "ip link add {p} type veth peer name {e} netns {ns}"
            ));
            sh_ok(&format!(
                "ip netns exec {ns} sysctl -qw net.ipv6.conf.all.disable_ipv6=1 && \
                 ip netns exec {ns} ip link set {e} address {mac} up && \
                 ip netns exec {ns} ip addr add {addr} dev {e} && \
                 ip netns exec {ns} ip link set lo up && ip link set {p} up"
            ));
            // Native XDP on veth needs NAPI (GRO) on the receiving end.
            let _ = sh(&format!("ethtool -K {p} gro on"));
            let _ = sh(&format!("ip netns exec {ns} ethtool -K {e} gro on"));
        }
        t
    }

    /// Turns checksum offload (and with it TSO) off on the namespace end
    /// of `ns`, as AF_XDP ports need (they carry no offload state).
    fn offload_off(&self, a_side: bool) {
        let (ns, e) = if a_side {
            (&self.a, &self.ea)
        } else {
            (&self.b, &self.eb)
        };
        sh_ok(&format!(
            "ip netns exec {ns} ethtool -K {e} tx off >/dev/null"
        ));
    }

    fn exec(&self, ns: &str, cmd: &str) -> Output {
        sh(&format!("ip netns exec {ns} {cmd}"))
    }
}

impl Drop for Topo {
    fn drop(&mut self) {
        for l in [&self.pa, &self.pb].into_iter().chain(&self.extra_links) {
            let _ = sh(&format!("ip link del {l} 2>/dev/null"));
        }
        for ns in [&self.a, &self.b] {
            let _ = sh(&format!("ip netns del {ns} 2>/dev/null"));
        }
    }
}

/// A `flowpath switch` this test started; killed (by PID) if still running
/// when dropped.
struct Sw {
    child: Option<Child>,
    ctl: PathBuf,
    dir: PathBuf,
}

impl Sw {
    fn start(name: &str, rules: &str, ports: &[String], extra: &[&str]) -> Sw {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("switch-live")
            .join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let rf = dir.join("rules.flows");
        std::fs::write(&rf, rules).unwrap();
        // Socket paths must stay under SUN_LEN (108 bytes), whatever the
        // depth of the checkout: the socket lives in the system temp dir.
        let ctl = std::env::temp_dir().join(format!(
            "fp{}-{}.ctl",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let mut cmd = Command::new(BIN);
        cmd.arg("switch")
            .arg("--rules")
            .arg(&rf)
            .arg("--ctl")
            .arg(&ctl);
        for p in ports {
            cmd.arg("--port").arg(p);
        }
        cmd.args(extra)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("stderr")).unwrap());
        let child = cmd.spawn().expect("start flowpath switch");
        let sw = Sw {
            child: Some(child),
            ctl,
            dir,
        };
        let t0 = Instant::now();
        while !sw.ctl.exists() {
            if t0.elapsed() > Duration::from_secs(10) {
                panic!("switch did not start: {}", sw.stderr());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        sw
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, |c| c.id())
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.join("stderr")).unwrap_or_default()
    }

    /// `flowpath ctl` COMMAND ARGS: (exit code, stdout, stderr).
    fn ctl(&self, args: &[&str]) -> (i32, String, String) {
        let o = Command::new(BIN)
            .arg("ctl")
            .arg("--ctl")
            .arg(&self.ctl)
            .args(args)
            .output()
            .unwrap();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    fn ctl_ok(&self, args: &[&str]) -> String {
        let (code, out, err) = self.ctl(args);
        assert_eq!(code, 0, "ctl {args:?}: {err}");
        out
    }

    fn json(&self, args: &[&str]) -> serde_json::Value {
        let out = self.ctl_ok(args);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
    }

    /// Packets port `port` has transmitted (dpctl/show).
    fn tx_packets(&self, port: u32) -> u64 {
        let v = self.json(&["dpctl/show", "--json"]);
        v["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["port_no"] == port)
            .map_or(0, |p| p["tx"]["packets"].as_u64().unwrap())
    }

    /// SIGTERM; returns (exit status, how long it took).
    fn terminate(&mut self) -> (Option<i32>, Duration) {
        let mut child = self.child.take().expect("running");
        let t0 = Instant::now();
        sh_ok(&format!("kill -TERM {}", child.id()));
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                return (st.code(), t0.elapsed());
            }
            if t0.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
                let _ = child.wait();
                return (None, t0.elapsed());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Sw {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn ping(t: &Topo, from_a: bool) -> bool {
    let (ns, dst) = if from_a {
        (&t.a, "10.77.0.2")
    } else {
        (&t.b, "10.77.0.1")
    };
    t.exec(ns, &format!("ping -c 3 -i 0.2 -W 2 {dst}"))
        .status
        .success()
}

/// iperf3 TCP from A to B for `secs`; returns Gbit/s.
fn iperf(t: &Topo, secs: u32, streams: u32) -> f64 {
    let port = 5201 + (std::process::id() % 1000) as u16;
    let mut server = Command::new("ip")
        .args(["netns", "exec", &t.b, "iperf3", "-s", "-1", "-p"])
        .arg(port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let out = t.exec(
        &t.a,
        &format!(
            "timeout {} iperf3 -c 10.77.0.2 -p {port} -t {secs} -P {streams} -J",
            secs + 15
        ),
    );
    let _ = server.kill();
    let _ = server.wait();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "iperf3 failed: {text}");
    let v: serde_json::Value = serde_json::from_str(&text).expect("iperf3 JSON");
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .expect("bits_per_second")
        / 1e9
}

/// nmap SYN scan of ports 1-2000 from A to B; returns the ports reported
/// `filtered`.
fn nmap_filtered(t: &Topo) -> Vec<u16> {
    let out = t.exec(
        &t.a,
        "timeout 120 nmap -sS -n -Pn -T4 --max-retries 1 -p 1-2000 10.77.0.2",
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "nmap: {text}");
    assert!(
        text.contains("closed tcp ports") || text.contains("closed ports"),
        "nmap saw the closed ports: {text}"
    );
    let mut filtered: Vec<u16> = text
        .lines()
        .filter(|l| l.contains("/tcp") && l.contains("filtered"))
        .filter_map(|l| l.split('/').next()?.trim().parse().ok())
        .collect();
    // "Not shown: N filtered tcp ports" would mean many filtered.
    if text.contains("filtered tcp ports") {
        filtered.push(0);
    }
    filtered
}

/// The forwarding test for one pair of port kinds.
fn forwarding(test: &str, kind_a: &str, kind_b: &str) {
    if !can_run(test, &["ip", "ping", "iperf3", "nmap", "ethtool"]) {
        return;
    }
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let t = Topo::new();
    if kind_a == "afxdp" {
        t.offload_off(true);
    }
    if kind_b == "afxdp" {
        t.offload_off(false);
    }
    let ports = [
        format!("1={kind_a}:{}", t.pa),
        format!("2={kind_b}:{}", t.pb),
    ];
    let mut sw = Sw::start(test, FWD_RULES, &ports, &[]);
    assert!(ping(&t, true), "ping A→B ({test}): {}", sw.stderr());
    assert!(ping(&t, false), "ping B→A ({test})");
    let gbps = iperf(&t, 3, 1);
    println!("{test}: iperf3 TCP 1 stream, 3 s: {gbps:.2} Gbit/s");
    assert!(gbps > 0.01, "{gbps}");
    let filtered = nmap_filtered(&t);
    assert_eq!(filtered, vec![90], "{test}: only port 90 filtered");
    let stats = sw.ctl_ok(&["dpif-netdev/pmd-stats-show"]);
    assert!(stats.contains("packets received: "), "{stats}");
    let (code, took) = sw.terminate();
    assert_eq!(code, Some(0), "{test}: exit status; {}", sw.stderr());
    assert!(took < Duration::from_secs(1), "{test}: exit took {took:?}");
    for p in [&t.pa, &t.pb] {
        let l = sh_ok(&format!("ip link show dev {p}"));
        assert!(!l.contains("xdp"), "{test}: XDP program left on {p}: {l}");
    }
    assert!(!sw.ctl.exists(), "control socket removed");
}

#[test]
fn afxdp_to_afxdp() {
    forwarding("afxdp_to_afxdp", "afxdp", "afxdp");
}

#[test]
fn afpacket_to_afpacket() {
    forwarding("afpacket_to_afpacket", "afpacket", "afpacket");
}

#[test]
fn afxdp_to_afpacket() {
    forwarding("afxdp_to_afpacket", "afxdp", "afpacket");
}

#[test]
fn replace_flows_under_traffic_and_ovs_appctl() {
    let test = "replace_flows_under_traffic_and_ovs_appctl";
    if !can_run(test, &["ip", "ping", "ovs-appctl", "ethtool"]) {
        return;
    }
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let t = Topo::new();
    let ports = [
        format!("1=afpacket:{}", t.pa),
        format!("2=afpacket:{}", t.pb),
    ];
    let sw = Sw::start(test, FWD_RULES, &ports, &[]);
    assert!(ping(&t, true));
    let drop_file = sw.dir.join("drop.flows");
    std::fs::write(&drop_file, DROP_RULES).unwrap();
    let fwd_file = sw.dir.join("fwd.flows");
    std::fs::write(&fwd_file, FWD_RULES).unwrap();
    // Steady traffic A → B: 100 pings a second.
    let mut flood = Command::new("ip")
        .args([
            "netns",
            "exec",
            &t.a,
            "ping",
            "-i",
            "0.01",
            "-W",
            "1",
            "10.77.0.2",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let moving = sw.tx_packets(2);
    assert!(moving > 10, "traffic flows before: {moving}");
    sw.ctl_ok(&["replace-flows", drop_file.to_str().unwrap()]);
    let after_reply = sw.tx_packets(2);
    std::thread::sleep(Duration::from_millis(500));
    let later = sw.tx_packets(2);
    assert_eq!(
        later, after_reply,
        "nothing forwarded by the old rules after the reply"
    );
    let dump = sw.ctl_ok(&["dump-flows"]);
    assert!(
        dump.contains("priority=0 actions=drop") && !dump.contains("output"),
        "{dump}"
    );
    sw.ctl_ok(&["replace-flows", fwd_file.to_str().unwrap()]);
    std::thread::sleep(Duration::from_millis(500));
    assert!(sw.tx_packets(2) > later + 10, "forwarding restored");
    let _ = flood.kill();
    let _ = flood.wait();

    // A bad file changes nothing, and the error names line and field.
    let bad = sw.dir.join("bad.flows");
    std::fs::write(
        &bad,
        "priority=1,actions=drop\npriority=2,nw_dst=1.2.3.400,actions=drop\n",
    )
    .unwrap();
    let (code, _, err) = sw.ctl(&["replace-flows", bad.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        err.contains("bad.flows:2") && err.contains("nw_dst"),
        "{err}"
    );
    assert!(sw.ctl_ok(&["dump-flows"]).contains("output:2"));

    // Every command through the real ovs-appctl prints what flowpath ctl
    // prints (numbers that move between two calls masked).
    let mask = |s: &str| -> String {
        s.chars()
            .map(|c| if c.is_ascii_digit() { '#' } else { c })
            .collect::<String>()
    };
    let trace_flow = "in_port=1,tcp,nw_src=10.77.0.1,nw_dst=10.77.0.2,tp_dst=90";
    let cmds: Vec<Vec<&str>> = vec![
        vec!["list-commands"],
        vec!["version"],
        vec!["dpif-netdev/pmd-stats-show"],
        vec!["dpif-netdev/pmd-stats-show", "--json"],
        vec!["dpif-netdev/pmd-rxq-show"],
        vec!["dpctl/show"],
        vec!["dpctl/show", "--json"],
        vec!["dpctl/dump-flows"],
        vec!["ofproto/trace", trace_flow],
        vec!["dump-flows"],
        vec!["config/show"],
        vec!["config/show", "--json"],
        vec!["config/set", "emc-insert-inv-prob=1"],
        vec!["add-flow", "priority=5,udp,actions=drop"],
        vec!["del-flows", "udp"],
        vec!["no-such-command"],
        vec!["dpif-netdev/pmd-stats-clear"],
        vec!["dpctl/del-flows"],
    ];
    let appctl = |c: &[&str]| {
        Command::new("ovs-appctl")
            .arg("-t")
            .arg(&sw.ctl)
            .args(c)
            .output()
            .unwrap()
    };
    for c in &cmds {
        let (code, mut out, err) = sw.ctl(c);
        let o = appctl(c);
        let mut oout = String::from_utf8_lossy(&o.stdout).into_owned();
        // The namespaces' own traffic (ARP, IPv6 neighbour discovery) may
        // add a megaflow between the two calls: ask both again.
        for _ in 0..5 {
            if mask(&out) == mask(&oout) {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
            out = sw.ctl(c).1;
            oout = String::from_utf8_lossy(&appctl(c).stdout).into_owned();
        }
        let c0 = c[0];
        if c0 == "no-such-command" {
            assert_eq!(code, 2);
            assert_eq!(o.status.code(), Some(2));
            assert!(err.contains("is not a valid command"), "{err}");
            continue;
        }
        assert_eq!(code, 0, "{c:?}: {err}");
        assert_eq!(
            o.status.code(),
            Some(0),
            "ovs-appctl {c:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        if matches!(
            c0,
            "add-flow" | "del-flows" | "dpctl/del-flows" | "config/set"
        ) {
            continue; // changes state: compared by effect below
        }
        assert_eq!(mask(&out), mask(&oout), "{c:?}");
    }
    let trace = sw.ctl_ok(&["ofproto/trace", trace_flow]);
    assert!(trace.contains("Datapath actions: drop"), "{trace}");
    assert!(sw
        .ctl_ok(&["config/show"])
        .contains("emc-insert-inv-prob=1"));
    let (code, _, err) = sw.ctl(&["config/set", "second-level=fast"]);
    assert_eq!(code, 2);
    assert!(err.contains("second-level=fast"), "{err}");
}

#[test]
fn tap_port_idle_cpu_and_sigterm_under_traffic() {
    let test = "tap_port_idle_cpu_and_sigterm_under_traffic";
    if !can_run(test, &["ip", "ping", "ethtool"]) {
        return;
    }
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let mut t = Topo::new();
    let tap = format!("fpt{}", std::process::id() % 100_000);
    t.extra_links.push(tap.clone());
    let rules = "priority=10,in_port=1,actions=output:3\npriority=10,in_port=3,actions=output:1\n";
    let ports = [format!("1=afxdp:{}", t.pa), format!("3=tap:{tap}")];
    t.offload_off(true);
    let mut sw = Sw::start(test, rules, &ports, &[]);
    sh_ok(&format!("ip addr add 10.77.0.3/24 dev {tap}"));
    let ok = t
        .exec(&t.a, "ping -c 3 -i 0.2 -W 2 10.77.0.3")
        .status
        .success();
    assert!(
        ok,
        "the tap's address answers through the switch: {}",
        sw.stderr()
    );

    // Idle: under 5 % of a core over 2 s, after a second without traffic.
    std::thread::sleep(Duration::from_secs(1));
    let cpu = |pid: u32| -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let f: Vec<&str> = s.rsplit(')').next().unwrap().split_whitespace().collect();
        f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
    };
    let hz = String::from_utf8_lossy(&sh("getconf CLK_TCK").stdout)
        .trim()
        .parse::<f64>()
        .unwrap_or(100.0);
    let c0 = cpu(sw.pid());
    std::thread::sleep(Duration::from_secs(2));
    let share = (cpu(sw.pid()) - c0) as f64 / hz / 2.0;
    println!("{test}: idle switch CPU {:.2} % of a core", share * 100.0);
    assert!(share < 0.05, "idle CPU {share}");

    // SIGTERM under traffic.
    let mut flood = Command::new("ip")
        .args(["netns", "exec", &t.a, "ping", "-f", "-W", "1", "10.77.0.3"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let (code, took) = sw.terminate();
    let _ = flood.kill();
    let _ = flood.wait();
    assert_eq!(code, Some(0), "{}", sw.stderr());
    assert!(took < Duration::from_secs(1), "exit took {took:?}");
    let l = sh_ok(&format!("ip link show dev {}", t.pa));
    assert!(!l.contains("xdp"), "XDP program left: {l}");
    assert!(
        !sh(&format!("ip link show dev {tap}")).status.success(),
        "tap deleted"
    );
}

#[test]
fn bad_ports_fail_clearly_and_leave_nothing() {
    let test = "bad_ports_fail_clearly_and_leave_nothing";
    if !can_run(test, &["ip"]) {
        return;
    }
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let t = Topo::new();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("switch-live-bad");
    std::fs::create_dir_all(&dir).unwrap();
    let rf = dir.join("r.flows");
    std::fs::write(&rf, FWD_RULES).unwrap();
    let tap = format!("fpu{}", std::process::id() % 100_000);
    let run = |ports: &[String]| -> (Option<i32>, String) {
        let mut c = Command::new(BIN);
        c.arg("switch")
            .arg("--rules")
            .arg(&rf)
            .arg("--ctl")
            .arg(std::env::temp_dir().join(format!("fpbad{}.ctl", std::process::id())));
        for p in ports {
            c.arg("--port").arg(p);
        }
        let o = c.output().unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    for (ports, want) in [
        (
            vec![format!("1=afxdp:nosuchif0")],
            "no such interface 'nosuchif0'",
        ),
        (
            vec![format!("1=bogus:{}", t.pa)],
            "unknown port kind 'bogus'",
        ),
        (vec![format!("0=afpacket:{}", t.pa)], "port number"),
        (
            vec![format!("1=afpacket:{}", t.pa), format!("1=null")],
            "given twice",
        ),
        // A tap created first, then a bad port: the tap must be gone.
        (
            vec![format!("3=tap:{tap}"), format!("1=afxdp:nosuchif0")],
            "nosuchif0",
        ),
        // The same interface twice as AF_XDP: the second attach fails, the
        // first is detached again.
        (
            vec![format!("1=afxdp:{}", t.pa), format!("2=afxdp:{}", t.pa)],
            t.pa.as_str(),
        ),
    ] {
        let (code, err) = run(&ports);
        assert_eq!(code, Some(1), "{ports:?}: {err}");
        assert!(err.contains(want), "{ports:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(
            !sh(&format!("ip link show dev {tap}")).status.success(),
            "no tap left"
        );
        let l = sh_ok(&format!("ip link show dev {}", t.pa));
        assert!(!l.contains("xdp"), "no XDP program left: {l}");
    }
}

#[test]
fn two_pmds_two_queues_iperf_and_rule_counters() {
    let test = "two_pmds_two_queues_iperf_and_rule_counters";
    if !can_run(test, &["ip", "ping", "iperf3", "ethtool"]) {
        return;
    }
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let t = Topo::new();
    let ports = [
        format!("1=afpacket:{},queues=2", t.pa),
        format!("2=afpacket:{},queues=2", t.pb),
    ];
    let sw = Sw::start(test, FWD_RULES, &ports, &["--pmd-cpus", "0,1"]);
    assert!(ping(&t, true), "{}", sw.stderr());
    let rxq = sw.json(&["dpif-netdev/pmd-rxq-show", "--json"]);
    let per_pmd: Vec<usize> = rxq
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["rxqs"].as_array().unwrap().len())
        .collect();
    assert_eq!(per_pmd, vec![2, 2], "{rxq}");
    let n_packets = |sw: &Sw| -> u64 {
        let d = sw.ctl_ok(&["dump-flows", "in_port=1"]);
        d.split("n_packets=")
            .nth(1)
            .and_then(|s| s.split(',').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{d}"))
    };
    sw.ctl_ok(&["revalidator/wait"]);
    let before = n_packets(&sw);
    // 8 streams: the fanout hash spreads flows over the two queues (each
    // PMD polls one queue of each port); with 4 streams all eight
    // directions landed on one PMD's queues about once in a hundred runs.
    let gbps = iperf(&t, 3, 8);
    println!("{test}: iperf3 TCP 8 streams, 3 s, 2 PMDs: {gbps:.2} Gbit/s");
    sw.ctl_ok(&["revalidator/wait"]);
    let after = n_packets(&sw);
    assert!(after > before + 1000, "n_packets grew: {before} -> {after}");
    let stats = sw.json(&["dpif-netdev/pmd-stats-show", "--json"]);
    let busy: Vec<u64> = stats
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["packets_received"].as_u64().unwrap())
        .collect();
    println!("{test}: packets per PMD {busy:?}");
    assert!(busy.iter().all(|n| *n > 0), "both PMDs received: {busy:?}");
    // A tx queue per PMD on each port: no tx lock was ever contended.
    let show = sw.json(&["dpctl/show", "--json"]);
    for p in show["ports"].as_array().unwrap() {
        assert_eq!(p["n_txq"], 2, "{show}");
    }
    for p in stats.as_array().unwrap() {
        assert_eq!(p["output"]["tx_lock_contended"], 0, "{stats}");
    }
}
