//! Connection tracking on the live switch, as root, between network
//! namespaces (own namespaces and veths, removed even when a test fails;
//! processes stopped by PID): the stateful firewall of Open vSwitch's
//! conntrack tutorial — A (namespace 1, port 1) may open connections to
//! B (namespace 2, port 2), B may only answer — checked with ping,
//! iperf3 and nmap, and the tracker's table read with
//! `ovs-appctl dpctl/dump-conntrack` in OVS's format.

mod ofnet;

use ofnet::{can_run, Topo};
use std::time::Duration;

/// The tutorial's table (ARP by NORMAL).
const FIREWALL: &str = "\
table=0,priority=1,actions=drop
table=0,priority=10,arp,actions=NORMAL
table=0,priority=100,ip,ct_state=-trk,actions=ct(table=1)
table=1,in_port=1,ip,ct_state=+trk+new,actions=ct(commit),output:2
table=1,in_port=1,ip,ct_state=+trk+est,actions=output:2
table=1,in_port=2,ip,ct_state=+trk+new,actions=drop
table=1,in_port=2,ip,ct_state=+trk+est,actions=output:1
";

#[test]
fn tutorial_firewall_with_iperf3_and_nmap() {
    if !can_run(
        "tutorial_firewall_with_iperf3_and_nmap",
        &["ip", "iperf3", "nmap", "ovs-appctl"],
    ) {
        return;
    }
    let mut t = Topo::new("ct");
    t.switch_with_rules(FIREWALL, &[]);
    // A reaches B; B cannot open anything towards A.
    assert!(t.ping(1, 2), "A cannot ping B: {}", t.log("switch.log"));
    assert!(!t.ping(2, 1), "B opened a connection to A");
    // TCP from A to B: a server in B, a client in A.
    // (Servers are the topology's children, stopped by PID at the end:
    // a daemonized one outlived the test when no client came.)
    let server = t.ns_command(2, "iperf3 -s -1");
    t.start(server, "iperf3-a.log");
    assert!(t.listening_in(2, 5201), "{}", t.log("iperf3-a.log"));
    let client = t.in_ns(1, 30, "iperf3 -c 10.77.0.2 -t 2 -J");
    assert!(
        client.status.success(),
        "iperf3: {}",
        String::from_utf8_lossy(&client.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&client.stdout).unwrap();
    let bps = j["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0);
    eprintln!("iperf3 A->B through the firewall: {:.2} Gbit/s", bps / 1e9);
    assert!(bps > 1e7, "{bps} bit/s");
    // The tracker's table, in OVS's format: the ping and the iperf3
    // connections, in the original direction A -> B.
    let dump = t.appctl("dpctl/dump-conntrack");
    assert!(
        dump.lines().any(
            |l| l.starts_with("tcp,orig=(src=10.77.0.1,dst=10.77.0.2,sport=")
                && l.contains(",dport=5201),reply=(src=10.77.0.2,dst=10.77.0.1,sport=5201,")
        ),
        "{dump}"
    );
    assert!(
        dump.lines()
            .any(|l| l.starts_with("icmp,orig=(src=10.77.0.1,dst=10.77.0.2,id=")),
        "{dump}"
    );
    assert!(!dump.contains("orig=(src=10.77.0.2,"), "B opened: {dump}");
    let stats = t.appctl("dpctl/ct-stats-show");
    assert!(
        stats.starts_with("Connections Stats:\n    Total: "),
        "{stats}"
    );
    let n: u32 = t.appctl("dpctl/ct-get-nconns").trim().parse().unwrap();
    assert!(n >= 2, "{n}");
    // nmap's SYN scan from B: every port filtered (nothing answers B's
    // new connections). From A: B's iperf3 port open (a new server).
    let server = t.ns_command(2, "iperf3 -s -1");
    t.start(server, "iperf3-b.log");
    assert!(t.listening_in(2, 5201), "{}", t.log("iperf3-b.log"));
    let from_b = t.in_ns(
        2,
        120,
        "nmap -sS -Pn -n -T4 --max-retries 1 -p 1-100,5201 10.77.0.1",
    );
    let out = String::from_utf8_lossy(&from_b.stdout);
    assert!(
        out.contains("101 filtered")
            || out.contains("All 101 scanned ports on 10.77.0.1 are in ignored states")
            || out.contains("are filtered"),
        "{out}"
    );
    assert!(!out.contains("open"), "{out}");
    let from_a = t.in_ns(1, 120, "nmap -sS -Pn -n -T4 -p 5201 10.77.0.2");
    let out = String::from_utf8_lossy(&from_a.stdout);
    assert!(out.contains("5201/tcp open"), "{out}");
    // Flushing empties the table.
    t.appctl("dpctl/flush-conntrack");
    assert_eq!(t.appctl("dpctl/ct-get-nconns").trim(), "0");
    // ofproto/trace follows the ct(table=1) pass with --ct-next's state.
    let tr = t.appctl(
        "ofproto/trace br0 in_port=2,tcp,nw_src=10.77.0.2,nw_dst=10.77.0.1,tp_src=5201,tp_dst=4000 --ct-next 'trk|est|rpl'",
    );
    assert!(
        tr.contains(" - resume conntrack with ct_state=est|rpl|trk\n"),
        "{tr}"
    );
    assert!(tr.trim_end().ends_with("Datapath actions: 1"), "{tr}");
    let tr = t.appctl("ofproto/trace br0 in_port=2,tcp,nw_src=10.77.0.2,nw_dst=10.77.0.1");
    assert!(tr.trim_end().ends_with("Datapath actions: drop"), "{tr}");
    // The timeouts are configuration keys.
    let shown = t.appctl("config/set ct-timeout-tcp_established=120 ct-timeout-udp_first=5");
    assert!(
        shown.contains("ct-timeout-tcp_established=120\n")
            && shown.contains("ct-timeout-udp_first=5\n"),
        "{shown}"
    );
    assert!(t
        .appctl("config/show")
        .contains("ct-timeout-icmp_reply=30\n"));
    assert!(t.appctl("config/set ct-timeout-tcp_bogus=5").is_empty());
}

/// The MAC address of namespace `i`'s interface.
fn mac_of(t: &Topo, i: u32) -> String {
    let o = t.in_ns(i, 5, &format!("cat /sys/class/net/{}p{i}/address", t.tag));
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// SNAT: A's connections to B leave with the address 10.77.0.100
/// (`ct(commit,nat(src=...))`); B's answers come back to A through the
/// reverse translation (`ct(nat)`), as `tcpdump` in B and iperf3 show.
#[test]
fn snat_live() {
    if !can_run("snat_live", &["ip", "iperf3", "tcpdump", "ovs-appctl"]) {
        return;
    }
    let mut t = Topo::new("sn");
    let rules = "\
table=0,priority=10,arp,actions=NORMAL
table=0,priority=100,in_port=1,ip,actions=ct(commit,zone=1,nat(src=10.77.0.100)),output:2
table=0,priority=100,in_port=2,ip,actions=ct(zone=1,nat,table=1)
table=1,in_port=2,ip,ct_state=+trk+est,actions=output:1
table=1,priority=0,actions=drop
";
    t.switch_with_rules(rules, &[]);
    // B answers the NAT address at A's MAC (nothing answers ARP for it).
    let a_mac = mac_of(&t, 1);
    let o = t.in_ns(
        2,
        5,
        &format!("ip neigh add 10.77.0.100 lladdr {a_mac} dev {}p2", t.tag),
    );
    assert!(o.status.success(), "{o:?}");
    let cap = t.path("b.pcap");
    let mut dump = std::process::Command::new("ip");
    dump.args(["netns", "exec", &t.ns(2), "tcpdump", "-n", "-U", "-i"])
        .arg(format!("{}p2", t.tag))
        .args(["-w", &ofnet::s(&cap), "icmp or tcp port 5201"]);
    let k = t.start(dump, "tcpdump.log");
    std::thread::sleep(Duration::from_millis(800));
    assert!(t.ping(1, 2), "{}", t.log("switch.log"));
    let server = t.ns_command(2, "iperf3 -s -1");
    t.start(server, "iperf3.log");
    assert!(t.listening_in(2, 5201), "{}", t.log("iperf3.log"));
    let client = t.in_ns(1, 30, "iperf3 -c 10.77.0.2 -t 1 -J");
    assert!(
        client.status.success(),
        "{}",
        String::from_utf8_lossy(&client.stderr)
    );
    std::thread::sleep(Duration::from_millis(300));
    t.kill(k);
    let seen = ofnet::sh(&format!("tcpdump -n -r {} 2>/dev/null", ofnet::s(&cap)));
    let seen = String::from_utf8_lossy(&seen.stdout);
    assert!(
        seen.contains("IP 10.77.0.100 > 10.77.0.2: ICMP echo request"),
        "{seen}"
    );
    assert!(seen.contains("IP 10.77.0.100."), "{seen}");
    assert!(
        !seen.contains("IP 10.77.0.1 >") && !seen.contains("IP 10.77.0.1."),
        "A's address leaked: {seen}"
    );
    let ct = t.appctl("dpctl/dump-conntrack zone=1");
    assert!(
        ct.lines()
            .any(|l| l.starts_with("tcp,orig=(src=10.77.0.1,dst=10.77.0.2,")
                && l.contains("reply=(src=10.77.0.2,dst=10.77.0.100,")
                && l.contains("zone=1")),
        "{ct}"
    );
}

/// DNAT load balancing: A's connections to the virtual address
/// 10.77.0.100:8080 are spread by a select group over two servers (B
/// and C) with `ct(commit,nat(dst=...),table=1)` buckets, as OVN's load
/// balancers write them; replies come back from the virtual address.
#[test]
fn dnat_load_balancer_live() {
    if !can_run(
        "dnat_load_balancer_live",
        &["ip", "curl", "python3", "ovs-appctl"],
    ) {
        return;
    }
    let mut t = Topo::new("lb");
    let (m2, m3) = (mac_of(&t, 2), mac_of(&t, 3));
    let vmac = "02:00:00:00:01:00";
    let rules = format!(
        "\
table=0,priority=10,arp,actions=NORMAL
table=0,priority=100,in_port=1,ip,nw_dst=10.77.0.100,actions=ct(zone=1,nat,table=1)
table=1,in_port=1,ip,ct_state=+trk+new-dnat,actions=group:1
table=1,in_port=1,ip,ct_state=+trk+dnat,nw_dst=10.77.0.2,actions=mod_dl_dst:{m2},output:2
table=1,in_port=1,ip,ct_state=+trk+dnat,nw_dst=10.77.0.3,actions=mod_dl_dst:{m3},output:3
table=0,priority=100,in_port=2,ip,actions=ct(zone=1,nat,table=2)
table=0,priority=100,in_port=3,ip,actions=ct(zone=1,nat,table=2)
table=2,ip,ct_state=+trk+est,actions=mod_dl_src:{vmac},output:1
table=2,priority=0,actions=drop
"
    );
    let groups = t.path("lb.groups");
    std::fs::write(
        &groups,
        "group_id=1,type=select,bucket=ct(commit,zone=1,nat(dst=10.77.0.2),table=1),\
         bucket=ct(commit,zone=1,nat(dst=10.77.0.3),table=1)\n",
    )
    .unwrap();
    t.switch_with_rules(&rules, &["--groups".into(), ofnet::s(&groups)]);
    let o = t.in_ns(
        1,
        5,
        &format!("ip neigh add 10.77.0.100 lladdr {vmac} dev {}p1", t.tag),
    );
    assert!(o.status.success(), "{o:?}");
    for i in [2u32, 3] {
        let root = t.path(&format!("www{i}"));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("who"), format!("server{i}")).unwrap();
        let mut c = std::process::Command::new("ip");
        c.args([
            "netns",
            "exec",
            &t.ns(i),
            "python3",
            "-m",
            "http.server",
            "8080",
            "-d",
        ])
        .arg(&root);
        t.start(c, &format!("http{i}.log"));
    }
    assert!(t.listening_in(2, 8080) && t.listening_in(3, 8080));
    let mut got = std::collections::HashMap::<String, u32>::new();
    for _ in 0..16 {
        let o = t.in_ns(1, 10, "curl -s -m 5 http://10.77.0.100:8080/who");
        *got.entry(String::from_utf8_lossy(&o.stdout).into_owned())
            .or_default() += 1;
    }
    assert_eq!(got.values().sum::<u32>(), 16);
    assert!(
        got.get("server2").copied().unwrap_or(0) >= 1
            && got.get("server3").copied().unwrap_or(0) >= 1
            && got.get("server2").copied().unwrap_or(0) + got.get("server3").copied().unwrap_or(0)
                == 16,
        "{got:?}\n{}",
        t.appctl("dpctl/dump-flows")
    );
    let ct = t.appctl("dpctl/dump-conntrack zone=1");
    assert!(
        ct.lines().any(
            |l| l.starts_with("tcp,orig=(src=10.77.0.1,dst=10.77.0.100,")
                && l.contains("reply=(src=10.77.0.2,dst=10.77.0.1,")
        ),
        "{ct}"
    );
}

/// Sends TCP SYNs from random sources to `dst_ip`:80 out of `dev`, from
/// `src_mac` to `dst_mac`, at about `pps` for `secs` seconds (standard
/// library only: an AF_PACKET socket).
const SYN_FLOOD: &str = r#"
import os, random, socket, struct, sys, time
dev, src_mac, dst_mac, dst_ip, pps, secs = sys.argv[1:7]
pps, secs = int(pps), float(secs)
mac = lambda m: bytes(int(x, 16) for x in m.split(":"))
def csum(b):
    if len(b) % 2: b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16: s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((dev, 0))
dst = socket.inet_aton(dst_ip)
end = time.time() + secs
sent = 0
while time.time() < end:
    t0 = time.time()
    for _ in range(max(1, pps // 100)):
        src = bytes([10, 77, random.randrange(1, 255), random.randrange(1, 255)])
        sport = random.randrange(1024, 65535)
        tcp = struct.pack("!HHIIBBHHH", sport, 80, random.getrandbits(32), 0, 5 << 4, 0x02, 64240, 0, 0)
        pseudo = src + dst + struct.pack("!BBH", 0, 6, len(tcp))
        tcp = tcp[:16] + struct.pack("!H", csum(pseudo + tcp)) + tcp[18:]
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0, 64, 6, 0, src, dst)
        ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
        s.send(mac(dst_mac) + mac(src_mac) + b"\x08\x00" + ip + tcp)
        sent += 1
    time.sleep(max(0.0, 0.01 - (time.time() - t0)))
print(sent)
"#;

/// A SYN flood at a zone with a limit: the zone's table holds its limit
/// (commits over it fail, counted), and an established iperf3 connection
/// through the same zone is not starved: it keeps at least half of its
/// throughput. The share it keeps is printed, not asserted closely (77-95 %
/// on a 2-vCPU guest whose speed moves by a third from second to second):
/// a test bounds behaviour, benchmarks measure speed.
#[test]
fn syn_flood_at_a_limited_zone() {
    if !can_run(
        "syn_flood_at_a_limited_zone",
        &["ip", "iperf3", "python3", "ovs-appctl"],
    ) {
        return;
    }
    let mut t = Topo::new("sf");
    let rules = "\
table=0,priority=1,actions=drop
table=0,priority=10,arp,actions=NORMAL
table=0,priority=100,ip,ct_state=-trk,actions=ct(table=1,zone=7)
table=1,in_port=1,ip,ct_state=+trk+new,actions=ct(commit,zone=7),output:2
table=1,in_port=1,ip,ct_state=+trk+est,actions=output:2
table=1,in_port=2,ip,ct_state=+trk+est,actions=output:1
table=1,priority=0,actions=drop
";
    t.switch_with_rules(rules, &[]);
    t.appctl("dpctl/ct-set-limits zone=7,limit=300");
    assert!(t.ping(1, 2), "{}", t.log("switch.log"));
    let server = t.ns_command(2, "iperf3 -s -1");
    t.start(server, "iperf3.log");
    assert!(t.listening_in(2, 5201), "{}", t.log("iperf3.log"));
    // iperf3 for 8 s (1-s intervals); the flood runs from the 3rd to the
    // 7th second.
    let iperf = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            &t.ns(1),
            "iperf3",
            "-c",
            "10.77.0.2",
            "-t",
            "8",
            "-J",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    let script = t.path("synflood.py");
    std::fs::write(&script, SYN_FLOOD).unwrap();
    let (a_mac, b_mac) = (mac_of(&t, 1), mac_of(&t, 2));
    let flood = t.in_ns(
        1,
        30,
        &format!(
            "python3 {} {}p1 {a_mac} {b_mac} 10.77.0.2 5000 4",
            ofnet::s(&script),
            t.tag
        ),
    );
    assert!(
        flood.status.success(),
        "{}",
        String::from_utf8_lossy(&flood.stderr)
    );
    let sent: u64 = String::from_utf8_lossy(&flood.stdout)
        .trim()
        .parse()
        .unwrap();
    // The zone holds its limit.
    let limits = t.appctl("dpctl/ct-get-limits zone=7");
    let count: u32 = limits
        .lines()
        .find_map(|l| l.strip_prefix("zone=7,limit=300,count="))
        .and_then(|c| c.trim().parse().ok())
        .unwrap_or_else(|| panic!("{limits}"));
    assert!((250..=300).contains(&count), "{limits}");
    let out = iperf.wait_with_output().unwrap();
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let iv: Vec<f64> = j["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["sum"]["bits_per_second"].as_f64().unwrap_or(0.0))
        .collect();
    assert!(iv.len() >= 7, "{iv:?}");
    let before = (iv[0] + iv[1]) / 2.0;
    let during = (iv[3] + iv[4] + iv[5]) / 3.0;
    eprintln!(
        "SYN flood of {sent} packets in 4 s at zone 7 (limit 300, held {count}): iperf3 {:.2} Gbit/s before, {:.2} during ({:.0} %)",
        before / 1e9,
        during / 1e9,
        100.0 * during / before
    );
    assert!(sent > 10_000, "{sent}");
    assert!(during >= 0.5 * before, "starved by the flood: {iv:?}");
}

/// The virtualenv's python with pyftpdlib 1.5.9 (made on first use).
fn ftpd_python() -> std::path::PathBuf {
    ofnet::venv_python(
        "pyftpdlib-1.5.9-venv",
        "pyftpdlib==1.5.9",
        "import pyftpdlib.servers",
    )
}

/// FTP through a firewall that lets A open only port 21 and lets data
/// connections in when they are related (`ct(alg=ftp,commit)` on the
/// control connection): passive (PASV) and active (PORT) transfers of a
/// file come out whole; without the ALG the same transfer fails. (As
/// Open vSwitch's ALG, IPv4 FTP is PORT/PASV: curl is told not to use
/// EPRT/EPSV.)
#[test]
fn ftp_through_the_firewall_with_alg_ftp() {
    if !can_run(
        "ftp_through_the_firewall_with_alg_ftp",
        &["ip", "curl", "python3", "ovs-appctl"],
    ) {
        return;
    }
    let py = ftpd_python();
    let mut t = Topo::new("ft");
    let with_alg = "\
table=0,priority=1,actions=drop
table=0,priority=10,arp,actions=NORMAL
table=0,priority=100,ip,ct_state=-trk,actions=ct(table=1)
table=1,in_port=1,tcp,ct_state=+trk+new,tp_dst=21,actions=ct(alg=ftp,commit),output:2
table=1,in_port=1,ip,ct_state=+trk+est,actions=output:2
table=1,in_port=1,tcp,ct_state=+trk+rel,actions=ct(commit),output:2
table=1,in_port=2,ip,ct_state=+trk+est,actions=output:1
table=1,in_port=2,tcp,ct_state=+trk+rel,actions=ct(commit),output:1
";
    t.switch_with_rules(with_alg, &[]);
    let www = t.path("www");
    std::fs::create_dir_all(&www).unwrap();
    let data: Vec<u8> = (0..300_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(www.join("data.bin"), &data).unwrap();
    let mut c = std::process::Command::new("ip");
    c.args(["netns", "exec", &t.ns(2)])
        .arg(&py)
        .args(["-m", "pyftpdlib", "-p", "21", "-i", "10.77.0.2", "-d"])
        .arg(&www);
    t.start(c, "ftpd.log");
    assert!(t.listening_in(2, 21));
    let fetch = |t: &Topo, how: &str, out: &str| -> bool {
        let dst = t.path(out);
        let o = t.in_ns(
            1,
            20,
            &format!(
                "curl -s -m 8 {how} ftp://10.77.0.2/data.bin -o {}",
                ofnet::s(&dst)
            ),
        );
        o.status.success() && std::fs::read(&dst).is_ok_and(|d| d == data)
    };
    assert!(
        fetch(&t, "--disable-epsv", "passive.bin"),
        "passive: {}",
        t.log("ftpd.log")
    );
    assert!(
        fetch(&t, "--disable-eprt -P 10.77.0.1", "active.bin"),
        "active: {}",
        t.log("ftpd.log")
    );
    let ct = t.appctl("dpctl/dump-conntrack");
    assert!(
        ct.contains("dport=21),") && ct.contains("helper=ftp"),
        "{ct}"
    );
    // Without the ALG the data connections are new ones: dropped.
    let rules = t.path("no-alg.flows");
    std::fs::write(&rules, with_alg.replace("ct(alg=ftp,commit)", "ct(commit)")).unwrap();
    t.appctl(&format!("replace-flows {}", ofnet::s(&rules)));
    t.appctl("dpctl/flush-conntrack");
    assert!(
        !fetch(&t, "--disable-epsv", "passive2.bin"),
        "passive worked without the ALG"
    );
}
