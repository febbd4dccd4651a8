//! Fault isolation and restart of `flowpath switch` on live ports, as
//! root: three namespaces on veths (the `ofnet` helpers), the switch's
//! ports an AF_XDP port (generic mode), AF_PACKET ports and a tap.
//!
//! - A panic in a control command, a revalidator round, the sampler or
//!   an OpenFlow connection (made with the `debug/panic` test hook, present only with
//!   `FLOWPATH_TEST_HOOKS=1`) does not stop forwarding: ping still
//!   passes, the control socket answers, revalidator rounds go on, the
//!   panic is logged and counted. A panic in a PMD thread stops the
//!   switch cleanly with status 70 (no socket, XDP program or tap left).
//! - After SIGKILL, the switch starts again at once with the same
//!   arguments although the first one's control and OpenFlow sockets
//!   and pidfile are left behind, and forwards again.
//! - `--monitor` starts the switch again when its child is killed (and
//!   after a PMD panic), and SIGTERM to the monitor stops both.
//!
//! Each test makes its own namespaces, veths and run directory, named
//! after this process, removed (and the processes it started killed by
//! PID) even when it fails. Without root they say they are skipped.

mod ofnet;

use ofnet::{can_run, sh, wait_until, Topo, BIN};
use std::process::{Command, Output};
use std::sync::Mutex;
use std::time::Duration;

/// One switch at a time (they would share CPU and namespaces' names).
static LOCK: Mutex<()> = Mutex::new(());

const RULES: &str = "priority=0,actions=NORMAL\n";

/// The switch's arguments (after `switch`): afxdp on veth 1, afpacket on
/// veths 2 and 3, a tap, a pidfile, the run directory's control socket.
fn switch_args(t: &Topo) -> Vec<String> {
    let rules = t.path("start.flows");
    std::fs::write(&rules, RULES).unwrap();
    vec![
        "switch".into(),
        "--rules".into(),
        rules.display().to_string(),
        "--port".into(),
        format!("1=afxdp:{},mode=generic", t.veth(1)),
        "--port".into(),
        format!("2=afpacket:{}", t.veth(2)),
        "--port".into(),
        format!("3=afpacket:{}", t.veth(3)),
        "--port".into(),
        format!("4=tap:{}", tap(t)),
        "--ctl".into(),
        t.path("flowpath.ctl").display().to_string(),
        "--pidfile".into(),
        t.path("switch.pid").display().to_string(),
    ]
}

fn tap(t: &Topo) -> String {
    format!("{}t", t.tag)
}

/// Starts `flowpath ARGS` (with the test hooks if `hooks`), logging to
/// `log`; its index in the topology's processes.
fn start(t: &mut Topo, args: &[String], hooks: bool, log: &str) -> usize {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    if hooks {
        cmd.env("FLOWPATH_TEST_HOOKS", "1");
    } else {
        cmd.env_remove("FLOWPATH_TEST_HOOKS");
    }
    t.start(cmd, log)
}

/// `flowpath ctl` against the switch (bounded: 20 s).
fn ctl(t: &Topo, args: &str) -> Output {
    sh(&format!(
        "timeout 20 {BIN} ctl --ctl {} {args}",
        t.path("flowpath.ctl").display()
    ))
}

fn ctl_ok(t: &Topo, args: &str) -> String {
    let o = ctl(t, args);
    assert!(
        o.status.success(),
        "ctl {args}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The pid in the switch's pidfile, if it names one.
fn pidfile(t: &Topo) -> Option<u32> {
    std::fs::read_to_string(t.path("switch.pid"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Waits (generously) until the switch `pid` wrote its pidfile and
/// answers on its control socket.
fn wait_up(t: &Topo, pid: impl Fn(u32) -> bool, log: &str) {
    assert!(
        wait_until(Duration::from_secs(20), || pidfile(t).is_some_and(&pid)
            && ctl(t, "version").status.success()),
        "switch did not start: {}",
        t.log(log)
    );
}

/// Pings 1 → 2 until it passes (at most 10 s).
fn ping_works(t: &Topo) -> bool {
    wait_until(Duration::from_secs(10), || t.ping(1, 2))
}

fn caught(t: &Topo, part: &str) -> u64 {
    let cov = ctl_ok(t, "coverage/show");
    let row = format!("panic_caught_{part}");
    cov.lines()
        .find(|l| l.starts_with(&row))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {row} in coverage/show: {cov}"))
}

fn rounds(t: &Topo) -> u64 {
    let j: serde_json::Value =
        serde_json::from_str(&ctl_ok(t, "upcall/show --json")).expect("upcall/show --json");
    j["rounds"].as_u64().expect("rounds")
}

fn xdp_attached(t: &Topo) -> bool {
    String::from_utf8_lossy(&sh(&format!("ip link show {}", t.veth(1))).stdout).contains("xdp")
}

fn exists(name: &str) -> bool {
    sh(&format!("ip link show {name}")).status.success()
}

#[test]
fn panics_in_control_threads_leave_forwarding_and_a_pmd_panic_stops_cleanly() {
    if !can_run("fault_isolation", &["ip", "ping", "ovs-ofctl"]) {
        return;
    }
    let _l = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let mut t = Topo::new("fi");
    let args = switch_args(&t);
    let k = start(&mut t, &args, true, "switch.log");
    let pid = t.kids[k].id();
    wait_up(&t, |p| p == pid, "switch.log");
    assert!(ping_works(&t), "no ping before: {}", t.log("switch.log"));

    // A panicking command: an error reply, the server goes on.
    let o = ctl(&t, "debug/panic control");
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("internal error"), "{err}");
    assert!(ctl_ok(&t, "version").contains("flowpath"));
    assert_eq!(caught(&t, "control"), 1);

    // A panicking revalidator round: dropped; rounds go on.
    let before = rounds(&t);
    ctl_ok(&t, "debug/panic revalidator");
    assert!(
        wait_until(Duration::from_secs(10), || caught(&t, "revalidator") == 1),
        "revalidator panic not caught: {}",
        t.log("switch.log")
    );
    ctl_ok(&t, "revalidator/wait");
    ctl_ok(&t, "revalidator/wait");
    assert!(rounds(&t) > before, "no revalidator round after the panic");

    // A panicking sampler batch.
    ctl_ok(&t, "debug/panic sampler");
    assert!(
        wait_until(Duration::from_secs(10), || caught(&t, "sampler") == 1),
        "sampler panic not caught: {}",
        t.log("switch.log")
    );

    // A panicking OpenFlow connection: closed; the next one is served.
    ctl_ok(&t, "debug/panic openflow");
    let o = t.ofctl_output("dump-flows br0");
    assert!(!o.status.success(), "the panicking connection answered");
    assert!(t.ofctl("dump-flows br0").contains("actions=NORMAL"));
    assert_eq!(caught(&t, "openflow"), 1);

    assert!(ping_works(&t), "no ping after the panics");
    assert!(ctl_ok(&t, "dpctl/show").contains(&t.veth(1)));
    let log = t.log("switch.log");
    for part in ["control", "revalidator", "sampler", "openflow"] {
        assert!(
            log.contains(&format!(
                "{part} thread panicked: debug/panic {part}: panic requested"
            )),
            "{part}'s panic not logged: {log}"
        );
    }

    // A PMD's panic stops the switch cleanly, with status 70.
    assert!(xdp_attached(&t) && exists(&tap(&t)));
    ctl_ok(&t, "debug/panic pmd");
    assert!(
        wait_until(Duration::from_secs(20), || t.kids[k]
            .try_wait()
            .unwrap()
            .is_some()),
        "the switch did not stop after a PMD panic"
    );
    let status = t.kids[k].wait().unwrap();
    assert_eq!(status.code(), Some(70), "{}", t.log("switch.log"));
    assert!(t.log("switch.log").contains("pmd thread panicked"));
    assert!(!t.path("flowpath.ctl").exists(), "control socket left");
    assert!(!t.path("switch.pid").exists(), "pidfile left");
    assert!(!xdp_attached(&t), "XDP program left attached");
    assert!(!exists(&tap(&t)), "tap left");
}

#[test]
fn a_killed_switch_starts_again_at_once_with_the_same_ports() {
    if !can_run("fault_isolation", &["ip", "ping"]) {
        return;
    }
    let _l = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let mut t = Topo::new("fk");
    let args = switch_args(&t);
    let k = start(&mut t, &args, false, "switch1.log");
    let pid = t.kids[k].id();
    wait_up(&t, |p| p == pid, "switch1.log");
    assert!(ping_works(&t), "no ping before: {}", t.log("switch1.log"));
    assert!(xdp_attached(&t) && exists(&tap(&t)));
    // No test hooks without the variable.
    let o = ctl(&t, "debug/panic control");
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a valid command"));

    t.kill(k); // SIGKILL, by PID
               // What it leaves: its sockets' files and its pidfile.
    for f in ["flowpath.ctl", "br0.mgmt", "switch.pid"] {
        assert!(t.path(f).exists(), "{f} not left by the killed switch");
    }
    assert_eq!(pidfile(&t), Some(pid));

    let k2 = start(&mut t, &args, false, "switch2.log");
    let pid2 = t.kids[k2].id();
    wait_up(&t, |p| p == pid2, "switch2.log");
    assert!(
        t.kids[k2].try_wait().unwrap().is_none(),
        "second start failed: {}",
        t.log("switch2.log")
    );
    assert!(
        ping_works(&t),
        "no ping after the restart: {}",
        t.log("switch2.log")
    );
    assert!(xdp_attached(&t) && exists(&tap(&t)));
    let show = ctl_ok(&t, "dpctl/show");
    assert!(show.contains(&tap(&t)), "{show}");
    // A clean stop removes everything.
    ctl_ok(&t, "exit");
    assert!(wait_until(Duration::from_secs(20), || t.kids[k2]
        .try_wait()
        .unwrap()
        .is_some()));
    assert!(!t.path("flowpath.ctl").exists() && !t.path("switch.pid").exists());
    assert!(!xdp_attached(&t) && !exists(&tap(&t)));
}

#[test]
fn the_monitor_restarts_a_killed_or_crashed_switch_and_stops_it() {
    if !can_run("fault_isolation", &["ip", "ping", "kill"]) {
        return;
    }
    let _l = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let mut t = Topo::new("fm");
    let mut args = switch_args(&t);
    args.push("--monitor".into());
    let m = start(&mut t, &args, true, "monitor.log");
    let monitor = t.kids[m].id();
    wait_up(&t, |p| p != monitor, "monitor.log");
    let child = pidfile(&t).unwrap();
    assert!(ping_works(&t), "no ping: {}", t.log("monitor.log"));

    // SIGKILL to the child (its pid from its pidfile): restarted.
    assert!(sh(&format!("kill -9 {child}")).status.success());
    wait_up(&t, |p| p != child && p != monitor, "monitor.log");
    let child2 = pidfile(&t).unwrap();
    assert!(
        ping_works(&t),
        "no ping after SIGKILL: {}",
        t.log("monitor.log")
    );
    assert!(t
        .log("monitor.log")
        .contains(&format!("switch (pid {child}) died (signal 9); restarting")));

    // A PMD panic (exit status 70): restarted too.
    ctl_ok(&t, "debug/panic pmd");
    wait_up(
        &t,
        |p| p != child2 && p != child && p != monitor,
        "monitor.log",
    );
    let child3 = pidfile(&t).unwrap();
    assert!(
        ping_works(&t),
        "no ping after a PMD panic: {}",
        t.log("monitor.log")
    );
    assert!(t.log("monitor.log").contains(&format!(
        "switch (pid {child2}) died (exit status 70); restarting"
    )));

    // SIGTERM to the monitor stops both, cleanly.
    assert!(sh(&format!("kill -TERM {monitor}")).status.success());
    assert!(
        wait_until(Duration::from_secs(20), || t.kids[m]
            .try_wait()
            .unwrap()
            .is_some()),
        "the monitor did not stop"
    );
    assert_eq!(t.kids[m].wait().unwrap().code(), Some(0));
    assert!(!std::path::Path::new(&format!("/proc/{child3}")).exists());
    assert!(!t.path("flowpath.ctl").exists() && !t.path("switch.pid").exists());
    assert!(!xdp_attached(&t) && !exists(&tap(&t)));
}
