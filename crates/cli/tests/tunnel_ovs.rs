//! Tunnels between `flowpath switch` and Open vSwitch 3.1's userspace
//! datapath (its own native tunnelling), as root: OVS runs in a network
//! namespace of its own (so its `br-phy`/`br-int` taps stay there) with
//! `br-int` (an internal port `vm0` 10.88.0.2/24 and the tunnel port) and
//! `br-phy` (its underlay veth, 10.99.0.2/24 on the bridge's LOCAL
//! port); flowpath owns 10.99.0.1/24 on the other end of that veth, and a
//! namespace (10.88.0.1/24) is behind its port 1. VXLAN, Geneve and GRE:
//! ping both ways; iperf3 over VXLAN. Daemons are stopped by the PIDs in
//! their pidfiles, namespaces and veths removed, even when a check fails.

mod ofnet;

use ofnet::{can_run, sh, wait_until, BIN};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const VSWITCHD: &str = "/usr/lib/openvswitch-switch/ovs-vswitchd";

/// Everything one test made.
struct Net {
    tag: String,
    dir: PathBuf,
    flowpath: Option<Child>,
}

impl Net {
    fn ns(&self, n: &str) -> String {
        format!("{}{n}", self.tag)
    }

    fn run(&self, cmd: &str) {
        let o = Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .env("OVS_RUNDIR", self.dir.join("run"))
            .env("OVS_LOGDIR", self.dir.join("log"))
            .env("OVS_DBDIR", self.dir.join("db"))
            .env("OVS_SYSCONFDIR", &self.dir)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{cmd}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }

    fn vsctl(&self, args: &str) {
        self.run(&format!(
            "timeout 30 ovs-vsctl --db=unix:{}/run/db.sock --timeout=20 {args}",
            self.dir.display()
        ));
    }

    fn appctl(&self, args: &str) -> String {
        let o = sh(&format!(
            "ip netns exec {} timeout 20 ovs-appctl -t {}/run/ovs-vswitchd.ctl {args}",
            self.ns("O"),
            self.dir.display()
        ));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        if let Some(mut c) = self.flowpath.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for d in ["ovs-vswitchd", "ovsdb-server"] {
            if let Ok(p) = std::fs::read_to_string(self.dir.join(format!("run/{d}.pid"))) {
                let _ = sh(&format!("kill {}", p.trim()));
            }
        }
        std::thread::sleep(Duration::from_millis(300));
        for n in ["O", "h1"] {
            let _ = sh(&format!("ip netns del {}", self.ns(n)));
        }
        for l in ["v1", "uF"] {
            let _ = sh(&format!("ip link del {} 2>/dev/null", self.ns(l)));
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// OVS and flowpath joined by a tunnel of `kind`.
fn setup(tag: &str, kind: &str) -> Net {
    let tag = format!("{tag}{}", std::process::id() % 10000);
    let dir = std::env::temp_dir().join(format!("fpovs{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    for d in ["run", "log", "db"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    let mut n = Net {
        tag,
        dir,
        flowpath: None,
    };
    let (o, h1) = (n.ns("O"), n.ns("h1"));
    let (v1, p1, uf, uo) = (n.ns("v1"), n.ns("p1"), n.ns("uF"), n.ns("uO"));
    let d = n.dir.display().to_string();
    for c in [
        format!("ip netns add {o}"),
        format!("ip netns add {h1}"),
        format!("ip link add {v1} type veth peer name {p1} netns {h1}"),
        format!("ip link add {uf} type veth peer name {uo} netns {o}"),
        format!("ip -n {h1} addr add 10.88.0.1/24 dev {p1}"),
        format!("ip -n {h1} link set {p1} mtu 1450 up"),
        format!("ip -n {h1} link set lo up"),
        format!("ip link set {v1} up"),
        format!("ip link set {uf} up"),
        format!("ip -n {o} link set {uo} up"),
        format!("ip -n {o} link set lo up"),
        format!("ovsdb-tool create {d}/db/conf.db /usr/share/openvswitch/vswitch.ovsschema"),
        format!(
            "ip netns exec {o} ovsdb-server {d}/db/conf.db --remote=punix:{d}/run/db.sock \
             --pidfile={d}/run/ovsdb-server.pid --detach --no-chdir \
             --log-file={d}/log/ovsdb-server.log -vconsole:off"
        ),
    ] {
        n.run(&c);
    }
    n.vsctl("--no-wait init");
    n.run(&format!(
        "ip netns exec {o} {VSWITCHD} unix:{d}/run/db.sock --pidfile={d}/run/ovs-vswitchd.pid \
         --unixctl={d}/run/ovs-vswitchd.ctl --detach --no-chdir \
         --log-file={d}/log/ovs-vswitchd.log -vconsole:off"
    ));
    n.vsctl("add-br br-phy -- set bridge br-phy datapath_type=netdev");
    n.vsctl(&format!("add-port br-phy {uo}"));
    n.vsctl("add-br br-int -- set bridge br-int datapath_type=netdev");
    n.vsctl(&format!(
        "add-port br-int vx -- set interface vx type={kind} options:remote_ip=10.99.0.1 options:key=5 ofport_request=10"
    ));
    n.vsctl("add-port br-int vm0 -- set interface vm0 type=internal ofport_request=1");
    for c in [
        format!("ip -n {o} addr add 10.99.0.2/24 dev br-phy"),
        format!("ip -n {o} link set br-phy up"),
        format!("ip -n {o} addr add 10.88.0.2/24 dev vm0"),
        format!("ip -n {o} link set vm0 mtu 1450 up"),
        // Checksum offload off where OVS's userspace datapath sends and
        // receives TCP (as its own docs ask for AF_PACKET/tap ports).
        format!("ip netns exec {o} ethtool -K vm0 tx off"),
        format!("ip netns exec {h1} ethtool -K {p1} tx off"),
    ] {
        n.run(&c);
    }
    let rules = n.dir.join("tunnel.flows");
    std::fs::write(
        &rules,
        "in_port=1,actions=output:10\nin_port=10,actions=output:1\n",
    )
    .unwrap();
    let child = Command::new(BIN)
        .arg("switch")
        .arg("--rules")
        .arg(&rules)
        .args(["--port", &format!("1=afpacket:{v1}")])
        .args(["--port", &format!("10={kind}:remote_ip=10.99.0.2,key=5")])
        .args(["--underlay", &format!("afpacket:{uf},ip=10.99.0.1/24")])
        .arg("--ctl")
        .arg(n.dir.join("run/fp.ctl"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(n.dir.join("log/flowpath.log")).unwrap())
        .spawn()
        .unwrap();
    n.flowpath = Some(child);
    let ctl = n.dir.join("run/fp.ctl");
    assert!(
        wait_until(Duration::from_secs(10), || ctl.exists()),
        "flowpath did not start"
    );
    n
}

fn ping(n: &Net, ns: &str, to: &str) -> bool {
    sh(&format!(
        "ip netns exec {} timeout 10 ping -c 3 -i 0.2 -W 2 {to}",
        n.ns(ns)
    ))
    .status
    .success()
}

fn interop(name: &str, tag: &str, kind: &str, iperf: bool) {
    if !can_run(
        name,
        &[
            "ip",
            "ping",
            "iperf3",
            "ovs-vsctl",
            "ovsdb-server",
            VSWITCHD,
        ],
    ) {
        return;
    }
    let n = setup(tag, kind);
    assert!(
        wait_until(Duration::from_secs(15), || ping(&n, "h1", "10.88.0.2")),
        "{kind}: no ping from flowpath's side to OVS's:\nOVS: {}\n{}",
        n.appctl("dpctl/dump-flows"),
        std::fs::read_to_string(n.dir.join("log/ovs-vswitchd.log")).unwrap_or_default()
    );
    assert!(ping(&n, "O", "10.88.0.1"), "{kind}: no ping back");
    let flows = n.appctl("dpctl/dump-flows");
    assert!(
        flows.contains("tnl_push(") && flows.contains("tunnel(tun_id=0x5"),
        "{flows}"
    );
    if !iperf {
        return;
    }
    let mut srv = Command::new("ip")
        .args([
            "netns",
            "exec",
            &n.ns("O"),
            "iperf3",
            "-s",
            "-1",
            "-B",
            "10.88.0.2",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let o = sh(&format!(
        "ip netns exec {} timeout 30 iperf3 -c 10.88.0.2 -t 3 -J",
        n.ns("h1")
    ));
    let _ = srv.kill();
    let _ = srv.wait();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
    let bps = v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0);
    eprintln!(
        "iperf3 over {kind}, flowpath ↔ OVS 3.1 userspace: {:.2} Gbit/s",
        bps / 1e9
    );
    assert!(bps > 0.0, "no TCP: {}", String::from_utf8_lossy(&o.stdout));
}

#[test]
fn vxlan_with_ovs() {
    interop("vxlan_with_ovs", "ov", "vxlan", true);
}

#[test]
fn geneve_with_ovs() {
    interop("geneve_with_ovs", "og", "geneve", false);
}

#[test]
fn gre_with_ovs() {
    interop("gre_with_ovs", "or", "gre", false);
}
