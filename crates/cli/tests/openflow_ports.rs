//! Port configuration over OpenFlow on a live `flowpath switch` (four
//! null ports, and a capture port that receives one frame over and
//! over): `ovs-ofctl mod-port` changes what the datapath does, seen in
//! the transmit counters (`dump-ports`) of packet-outs and of received
//! traffic, and in `ofproto/trace`; `mod-table` and `dump-table-desc`.
//! Skipped without `ovs-ofctl`.

mod ofctl_util;

use ofctl_util::{have_ofctl, ofctl, ofctl_ok, read_msg, Sw, BIN};
use std::process::Command;

/// A switch (see [`ofctl_util::start_with`]), or None (the test is
/// skipped) without `ovs-ofctl`.
fn switch(tag: &str, extra: &[&str]) -> Option<Sw> {
    if !have_ofctl() {
        eprintln!("skipped: no ovs-ofctl");
        return None;
    }
    Some(ofctl_util::start_with(tag, extra))
}

/// Transmitted packets of ports 1-4 (`dump-ports`).
fn tx(sw: &Sw) -> [u64; 4] {
    let out = ofctl_ok(sw, &["dump-ports", "br0"]);
    let mut v = [0u64; 4];
    let mut port = None;
    for l in out.lines() {
        let l = l.trim();
        if let Some(rest) = l.strip_prefix("port") {
            port = rest
                .split(':')
                .next()
                .and_then(|p| p.trim().parse::<usize>().ok());
        } else if let (Some(p), Some(rest)) = (port, l.strip_prefix("tx pkts=")) {
            if (1..=4).contains(&p) {
                v[p - 1] = rest.split(',').next().unwrap().parse().unwrap();
            }
        }
    }
    v
}

/// Sends one frame out with `actions` (in_port none) and returns which
/// ports transmitted it.
fn sent(sw: &Sw, actions: &str) -> [u64; 4] {
    let before = tx(sw);
    ofctl_ok(
        sw,
        &[
            "packet-out",
            "br0",
            "none",
            actions,
            "0000000000020000000000010800",
        ],
    );
    let after = tx(sw);
    let mut d = [0; 4];
    for i in 0..4 {
        d[i] = after[i] - before[i];
    }
    d
}

fn trace(sw: &Sw, flow: &str) -> String {
    let o = Command::new(BIN)
        .arg("ctl")
        .arg("--ctl")
        .arg(sw.dir.join("flowpath.ctl"))
        .args(["ofproto/trace", "br0", flow])
        .output()
        .unwrap();
    assert!(o.status.success());
    let s = String::from_utf8_lossy(&o.stdout).into_owned();
    s.lines()
        .find_map(|l| l.strip_prefix("Datapath actions: "))
        .unwrap_or_else(|| panic!("{s}"))
        .to_string()
}

fn config_of(sw: &Sw, version: &str, port: u32) -> (String, String) {
    let out = ofctl_ok(sw, &["-O", version, "dump-ports-desc", "br0"]);
    let mut lines = out
        .lines()
        .skip_while(|l| !l.trim_start().starts_with(&format!("{port}(")));
    lines.next().expect("port listed");
    let mut field = |name: &str| {
        lines
            .next()
            .and_then(|l| l.trim().strip_prefix(name))
            .map(|v| v.trim().to_string())
            .unwrap_or_default()
    };
    let c = field("config:");
    (c, field("state:"))
}

#[test]
fn mod_port_changes_the_datapath() {
    let Some(sw) = switch("ports", &[]) else {
        return;
    };
    assert_eq!(sent(&sw, "FLOOD"), [1, 1, 1, 1]);
    ofctl_ok(&sw, &["mod-port", "br0", "2", "noflood"]);
    ofctl_ok(&sw, &["mod-port", "br0", "3", "noforward"]);
    assert_eq!(sent(&sw, "FLOOD"), [1, 0, 0, 1]);
    assert_eq!(sent(&sw, "ALL"), [1, 1, 0, 1]);
    assert_eq!(sent(&sw, "output:3"), [0, 0, 0, 0]);
    ofctl_ok(&sw, &["mod-port", "br0", "4", "down"]);
    assert_eq!(sent(&sw, "output:4,output:1"), [1, 0, 0, 0]);
    assert_eq!(
        config_of(&sw, "OpenFlow13", 4),
        ("PORT_DOWN".to_string(), "LINK_DOWN".to_string())
    );
    assert_eq!(
        config_of(&sw, "OpenFlow10", 2),
        ("NO_FLOOD".to_string(), "0".to_string())
    );
    // Back up: forwarding again.
    for (p, a) in [("2", "flood"), ("3", "forward"), ("4", "up")] {
        ofctl_ok(&sw, &["mod-port", "br0", p, a]);
    }
    assert_eq!(sent(&sw, "FLOOD"), [1, 1, 1, 1]);
    assert_eq!(
        config_of(&sw, "OpenFlow15", 4),
        ("0".to_string(), "LIVE".to_string())
    );

    // Receiving: the flows' translation.
    ofctl_ok(&sw, &["add-flow", "br0", "in_port=2,actions=output:3"]);
    assert_eq!(trace(&sw, "in_port=2"), "3");
    ofctl_ok(&sw, &["mod-port", "br0", "2", "noreceive"]);
    assert_eq!(trace(&sw, "in_port=2"), "drop");
    ofctl_ok(&sw, &["mod-port", "br0", "2", "receive"]);
    ofctl_ok(&sw, &["mod-port", "br0", "3", "down"]);
    assert_eq!(trace(&sw, "in_port=2"), "drop");
    ofctl_ok(&sw, &["mod-port", "br0", "3", "up"]);
    assert_eq!(trace(&sw, "in_port=2"), "3");
}

#[test]
fn mod_table_settings_show_in_the_table_description() {
    let Some(sw) = switch("tables", &[]) else {
        return;
    };
    let o14 = ["-O", "OpenFlow14"];
    let run = |args: &[&str]| {
        let a: Vec<&str> = o14.iter().chain(args).copied().collect();
        ofctl(&sw, &a)
    };
    assert!(run(&["mod-table", "br0", "0", "evict"]).0);
    assert!(run(&["mod-table", "br0", "1", "vacancy:10,90"]).0);
    let (ok, out, _) = run(&["dump-table-desc", "br0"]);
    assert!(ok);
    let text: Vec<&str> = out.lines().map(str::trim).collect();
    assert_eq!(
        text[1..3],
        [
            "table 0:",
            "eviction=on eviction_flags=OTHER|IMPORTANCE|LIFETIME"
        ]
    );
    assert!(
        text.contains(&"vacancy=on vacancy_down=10% vacancy_up=90% vacancy=100%"),
        "{out}"
    );
    // Table 254 is read-only.
    let (ok, _, err) = run(&["mod-table", "br0", "254", "evict"]);
    assert!(!ok && err.contains("OFPTMFC_EPERM"), "{err}");
    // Every table at once.
    assert!(run(&["mod-table", "br0", "all", "noevict"]).0);
    let (_, out, _) = run(&["dump-table-desc", "br0"]);
    assert!(!out.contains("eviction=on"), "{out}");
    assert_eq!(out.matches("table ").count(), 254);
}

/// A capture file of one Ethernet frame (IPv4/UDP, 60 bytes).
fn one_frame_pcap(path: &std::path::Path) {
    let mut f = 0xa1b2_c3d4u32.to_le_bytes().to_vec();
    f.extend_from_slice(&2u16.to_le_bytes());
    f.extend_from_slice(&4u16.to_le_bytes());
    f.extend_from_slice(&[0; 8]);
    f.extend_from_slice(&65535u32.to_le_bytes());
    f.extend_from_slice(&1u32.to_le_bytes());
    let mut frame = vec![0u8; 60];
    frame[..12].copy_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
    frame[12..14].copy_from_slice(&[8, 0]);
    frame[14] = 0x45;
    frame[16..18].copy_from_slice(&46u16.to_be_bytes());
    frame[22] = 64;
    frame[23] = 17;
    for w in [0u32, 0, 60, 60] {
        f.extend_from_slice(&w.to_le_bytes());
    }
    f.extend_from_slice(&frame);
    std::fs::write(path, f).unwrap();
}

/// Whether port 2 transmits within a second (its counter grows).
fn forwarding(sw: &Sw) -> bool {
    let before = tx(sw)[1];
    let t0 = std::time::Instant::now();
    while t0.elapsed() < std::time::Duration::from_secs(1) {
        std::thread::sleep(std::time::Duration::from_millis(100));
        if tx(sw)[1] > before {
            return true;
        }
    }
    false
}

#[test]
fn received_traffic_stops_and_resumes_with_the_port_config() {
    let pcap = std::env::temp_dir().join(format!("fpof-rx-{}.pcap", std::process::id()));
    one_frame_pcap(&pcap);
    let spec = format!("5=pcap:{},loop", pcap.display());
    let Some(sw) = switch("rx", &["--port", &spec]) else {
        return;
    };
    ofctl_ok(&sw, &["add-flow", "br0", "in_port=5,actions=output:2"]);
    assert!(forwarding(&sw));
    // Cached megaflows are revalidated: the traffic stops.
    ofctl_ok(&sw, &["mod-port", "br0", "5", "noreceive"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(!forwarding(&sw));
    ofctl_ok(&sw, &["mod-port", "br0", "5", "receive"]);
    assert!(forwarding(&sw));
    ofctl_ok(&sw, &["mod-port", "br0", "2", "noforward"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(!forwarding(&sw));
    ofctl_ok(&sw, &["mod-port", "br0", "2", "forward"]);
    assert!(forwarding(&sw));
    ofctl_ok(&sw, &["mod-port", "br0", "5", "down"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(!forwarding(&sw));
    drop(sw);
    let _ = std::fs::remove_file(&pcap);
}

#[test]
fn port_mod_checks_the_port_and_its_address() {
    use std::io::Write;
    let Some(sw) = switch("pmerr", &[]) else {
        return;
    };
    let mut s = std::os::unix::net::UnixStream::connect(sw.dir.join("br0.mgmt")).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    s.write_all(&[1, 0, 0, 8, 0, 0, 0, 1]).unwrap();
    assert_eq!(read_msg(&mut s)[1], 0, "hello");
    // OpenFlow 1.0 PORT_MOD: port, hw_addr, config, mask, advertise, pad.
    let port_mod = |port: u16, mac: [u8; 6], xid: u8| {
        let mut m = vec![1, 15, 0, 32, 0, 0, 0, xid];
        m.extend_from_slice(&port.to_be_bytes());
        m.extend_from_slice(&mac);
        m.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
        m.extend_from_slice(&[0; 8]);
        m
    };
    let barrier = |xid: u8| vec![1, 18, 0, 8, 0, 0, 0, xid];
    // (type, code) of the error answering `m`, or None when the barrier
    // after it comes back first.
    let mut answer = |m: Vec<u8>, xid: u8| {
        s.write_all(&m).unwrap();
        s.write_all(&barrier(xid + 100)).unwrap();
        let r = read_msg(&mut s);
        if r[1] == 1 {
            assert_eq!(r[7], xid);
            let code = (
                u16::from_be_bytes([r[8], r[9]]),
                u16::from_be_bytes([r[10], r[11]]),
            );
            assert_eq!(read_msg(&mut s)[1], 19, "barrier reply");
            Some(code)
        } else {
            assert_eq!(r[1], 19, "barrier reply");
            None
        }
    };
    let mac1 = [2, 0, 0, 0, 0, 1];
    assert_eq!(answer(port_mod(9, mac1, 1), 1), Some((4, 0)), "BAD_PORT");
    assert_eq!(
        answer(port_mod(1, [2, 0, 0, 0, 0, 9], 2), 2),
        Some((4, 1)),
        "BAD_HW_ADDR"
    );
    assert_eq!(answer(port_mod(1, mac1, 3), 3), None);
    let desc = ofctl_ok(&sw, &["dump-ports-desc", "br0"]);
    assert!(desc.contains("PORT_DOWN"), "{desc}");
}
