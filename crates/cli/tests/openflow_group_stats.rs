//! Group statistics with `ovs-ofctl dump-group-stats` against a running
//! `flowpath switch` whose port 1 receives a capture once (a known number
//! of frames): the packets that went through each group and bucket,
//! credited by the revalidator, equal their flows' counters and the
//! buckets' sum their group's, in OpenFlow 1.0 (`NXST_GROUP`), 1.3 and
//! 1.5; as in Open vSwitch every frame counts, the packets whose upcalls
//! installed the megaflows included, so the groups at the ends of the
//! paths make the frames sent. A modified group starts again from 0 and a
//! group deleted and added again too.

mod ofctl_util;

use ofctl_util::{have_ofctl, ofctl_ok, pcap_file, Sw, BIN};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// UDP frames (to the select group).
const UDP: u32 = 120;
/// TCP frames (to the indirect group that sends to the `all` group).
const TCP: u32 = 40;
/// ICMP frames (to the select group hashed in the datapath).
const ICMP: u32 = 60;

/// One Ethernet/IPv4 frame of protocol `proto` from port `sport`, with
/// `pad` bytes of payload.
fn frame(proto: u8, i: u32, pad: usize) -> Vec<u8> {
    let l4 = match proto {
        6 => 20,
        1 => 0,
        _ => 8,
    };
    let mut f = vec![0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 1, 0x08, 0x00];
    let total = (20 + l4 + pad) as u16;
    f.extend([
        0x45,
        0,
        (total >> 8) as u8,
        total as u8,
        0,
        0,
        0,
        0,
        64,
        proto,
    ]);
    f.extend([0, 0, 10, 0, 0, (i % 4) as u8, 10, 1, 0, (i % 251) as u8]);
    if proto == 1 {
        f.extend([8, 0, 0, 0, 0, 1, 0, (i % 256) as u8]);
        f.resize(f.len() + pad, 0xab);
        return f;
    }
    let sport = 1024 + i as u16;
    f.extend(sport.to_be_bytes());
    f.extend(80u16.to_be_bytes());
    if proto == 6 {
        f.extend([0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0]);
    } else {
        f.extend(((8 + pad) as u16).to_be_bytes());
        f.extend([0, 0]);
    }
    f.resize(f.len() + pad, 0xab);
    f
}

/// Writes the capture; returns the bytes of its UDP, TCP and ICMP
/// frames.
fn write_pcap(path: &Path) -> [u64; 3] {
    let mut bytes = [0; 3];
    let mut frames = Vec::new();
    for i in 0..UDP + TCP + ICMP {
        let (k, f) = if i < UDP {
            (0, frame(17, i, 18 + (i % 7) as usize))
        } else if i < UDP + TCP {
            (1, frame(6, i, (i % 5) as usize))
        } else {
            (2, frame(1, i, 20 + (i % 3) as usize))
        };
        bytes[k] += f.len() as u64;
        frames.push(f);
    }
    std::fs::write(path, pcap_file(&frames)).unwrap();
    bytes
}

fn ctl(sw: &Sw, args: &[&str]) -> String {
    let o = Command::new(BIN)
        .arg("ctl")
        .arg("--ctl")
        .arg(sw.dir.join("flowpath.ctl"))
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "ctl {args:?}");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `NAME=N` in `line` (the first one).
fn field(line: &str, name: &str) -> u64 {
    let key = format!("{name}=");
    line.split([',', ' '])
        .find_map(|w| w.trim().strip_prefix(key.as_str()))
        .and_then(|v| v.trim_end_matches('s').parse::<f64>().ok())
        .map_or_else(|| panic!("no {name} in {line}"), |v| v as u64)
}

/// Group `id`'s line of `dump-group-stats` in OpenFlow version `v`:
/// (packets, bytes, [(bucket packets, bucket bytes)]).
fn group(sw: &Sw, v: &str, id: u32) -> (u64, u64, Vec<(u64, u64)>) {
    let sel = format!("group_id={id}");
    let out = ofctl_ok(sw, &["-O", v, "dump-group-stats", "br0", &sel]);
    let line = out
        .lines()
        .find(|l| l.contains(&format!("group_id={id},")))
        .unwrap_or_else(|| panic!("{v}: no group {id}: {out}"))
        .to_string();
    let mut parts = line.split(":packet_count=");
    let head = parts.next().unwrap_or("");
    let buckets = parts
        .map(|b| {
            let p = b.split(',').next().unwrap().parse().unwrap();
            (p, field(b, "byte_count"))
        })
        .collect();
    (
        field(head, "packet_count"),
        field(head, "byte_count"),
        buckets,
    )
}

/// The `n_packets` and `n_bytes` of the flow whose dump line has `m`.
fn flow(sw: &Sw, m: &str) -> (u64, u64) {
    let out = ofctl_ok(sw, &["-O", "OpenFlow13", "dump-flows", "br0"]);
    let l = out.lines().find(|l| l.contains(m)).unwrap();
    (field(l, "n_packets"), field(l, "n_bytes"))
}

/// The packets that missed every megaflow cache and went up to the slow
/// path, first passes and passes after recirculation.
fn upcalls(sw: &Sw) -> u64 {
    let s: serde_json::Value =
        serde_json::from_str(&ctl(sw, &["dpif-netdev/pmd-stats-show", "--json"])).unwrap();
    s.as_array()
        .unwrap()
        .iter()
        .map(|p| p["miss_with_success_upcall"].as_u64().unwrap())
        .sum()
}

#[test]
fn dump_group_stats_counts_what_went_through_groups_and_buckets() {
    if !have_ofctl() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("fpgs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("in.pcap");
    let [udp_bytes, tcp_bytes, icmp_bytes] = write_pcap(&pcap);
    std::fs::write(
        dir.join("r.flows"),
        "in_port=1,udp,actions=group:1\nin_port=1,tcp,actions=group:3\n\
         in_port=1,icmp,actions=group:4\n",
    )
    .unwrap();
    // 1: the bucket chosen in the slow path by the source address (four
    // of them: four megaflows); 4: hashed in the datapath, the bucket
    // chosen after recirculation.
    std::fs::write(
        dir.join("g.groups"),
        "group_id=1,type=select,selection_method=hash,fields(nw_src),\
         bucket=output:2,bucket=output:3\n\
         group_id=2,type=all,bucket=output:3,bucket=output:4\n\
         group_id=3,type=indirect,bucket=group:2\n\
         group_id=4,type=select,bucket=output:2,bucket=output:3,bucket=output:4\n",
    )
    .unwrap();
    let child = Command::new(BIN)
        .arg("switch")
        .arg("--rules")
        .arg(dir.join("r.flows"))
        .arg("--groups")
        .arg(dir.join("g.groups"))
        .arg("--port")
        .arg(format!("1=pcap:{}", pcap.display()))
        .args(["--port", "2=null", "--port", "3=null", "--port", "4=null"])
        .arg("--ctl")
        .arg(dir.join("flowpath.ctl"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let sw = Sw { child, dir };
    let t0 = Instant::now();
    while !sw.dir.join("br0.mgmt").exists() {
        assert!(t0.elapsed() < Duration::from_secs(10), "no switch");
        std::thread::sleep(Duration::from_millis(20));
    }
    let frames = u64::from(UDP + TCP + ICMP);
    // Until the revalidator has credited every frame: the groups at the
    // end of each path make the frames (the upcalled packets too, as OVS
    // counts them; the ICMP packets once, after their recirculation).
    let mut seen = Vec::new();
    loop {
        ctl(&sw, &["revalidator/wait"]);
        let ends: Vec<u64> = [1, 2, 4]
            .iter()
            .map(|&g| group(&sw, "OpenFlow13", g).0)
            .collect();
        let up = upcalls(&sw);
        seen.push((ends.clone(), up));
        if ends.iter().sum::<u64>() == frames {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "{seen:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (udp, tcp, icmp) = (flow(&sw, "udp"), flow(&sw, "tcp"), flow(&sw, "icmp"));
    // Every packet and byte, the upcalled ones (four megaflows for UDP,
    // one for TCP) included.
    assert_eq!(udp, (u64::from(UDP), udp_bytes));
    assert_eq!(tcp, (u64::from(TCP), tcp_bytes));
    assert_eq!(icmp, (u64::from(ICMP), icmp_bytes));
    for v in ["OpenFlow10", "OpenFlow13", "OpenFlow15"] {
        // The select group: what its flow counted, shared by its buckets.
        let (p, b, buckets) = group(&sw, v, 1);
        assert_eq!((p, b), udp, "{v}");
        assert_eq!(buckets.len(), 2, "{v}");
        let sum = buckets.iter().fold((0, 0), |s, b| (s.0 + b.0, s.1 + b.1));
        assert_eq!(sum, (p, b), "{v}: {buckets:?}");
        assert!(buckets.iter().all(|b| b.0 > 0), "{v}: {buckets:?}");
        // The indirect group and the `all` group it sends to: every
        // bucket sees every packet of the TCP flow.
        assert_eq!(group(&sw, v, 3), (tcp.0, tcp.1, vec![tcp]), "{v}");
        assert_eq!(group(&sw, v, 2), (tcp.0, tcp.1, vec![tcp, tcp]), "{v}");
        // Hashed in the datapath: credited by the recirculated megaflows
        // (each knows its bucket), their upcalled packets included.
        let (p, b, buckets) = group(&sw, v, 4);
        assert_eq!((p, b), icmp, "{v}: {buckets:?}");
        let sum = buckets.iter().fold((0, 0), |s, b| (s.0 + b.0, s.1 + b.1));
        assert_eq!(sum, (p, b), "{v}: {buckets:?}");
    }
    // Modified: the counters start again; the others keep theirs.
    ofctl_ok(
        &sw,
        &[
            "-O",
            "OpenFlow13",
            "mod-group",
            "br0",
            "group_id=2,type=all,bucket=output:4",
        ],
    );
    assert_eq!(group(&sw, "OpenFlow13", 2), (0, 0, vec![(0, 0)]));
    assert_eq!(group(&sw, "OpenFlow13", 1).0, udp.0);
    // Deleted (with its flow) and added again: from 0.
    ofctl_ok(
        &sw,
        &["-O", "OpenFlow13", "del-groups", "br0", "group_id=1"],
    );
    ofctl_ok(
        &sw,
        &[
            "-O",
            "OpenFlow13",
            "add-group",
            "br0",
            "group_id=1,type=select,bucket=output:2,bucket=output:3",
        ],
    );
    ctl(&sw, &["revalidator/wait"]);
    assert_eq!(group(&sw, "OpenFlow13", 1), (0, 0, vec![(0, 0), (0, 0)]));
    // The durations are printed.
    let out = ofctl_ok(&sw, &["-O", "OpenFlow13", "dump-group-stats", "br0"]);
    assert!(
        out.lines().skip(1).all(|l| l.contains("duration=")),
        "{out}"
    );
}
