//! Properties of the generated workloads: flow counts, orders, rule sets,
//! determinism and header validity (checked with `etherparse`).

use std::collections::{HashMap, HashSet};

use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use flowpath_trafficgen::{
    generate, ChurnSpec, Error, FlowsSpec, NmapRuleSet, NmapSpec, Options, Order, Profile,
    ScanOrder, SubtablesSpec, UdpChecksum, Workload,
};

/// What a test needs to know of a parsed frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Tuple {
    src: [u8; 4],
    dst: [u8; 4],
    proto: u8,
    sport: u16,
    dport: u16,
    syn: bool,
}

/// Parses a frame and checks every checksum it carries.
fn parse(frame: &[u8]) -> Tuple {
    let p = SlicedPacket::from_ethernet(frame).expect("frame parses");
    let Some(NetSlice::Ipv4(ip)) = &p.net else {
        panic!("not IPv4")
    };
    let ip_hdr = ip.header().to_header();
    assert_eq!(
        ip_hdr.header_checksum,
        ip_hdr.calc_header_checksum(),
        "IPv4 checksum"
    );
    assert_eq!(ip_hdr.time_to_live, 64);
    match p.transport.as_ref().expect("transport header") {
        TransportSlice::Udp(u) => {
            if u.checksum() != 0 {
                let want = u
                    .to_header()
                    .calc_checksum_ipv4(&ip_hdr, u.payload())
                    .expect("checksum computable");
                assert_eq!(u.checksum(), want, "UDP checksum");
            }
            assert_eq!(usize::from(u.length()), frame.len() - 34, "UDP length");
            Tuple {
                src: ip_hdr.source,
                dst: ip_hdr.destination,
                proto: 17,
                sport: u.source_port(),
                dport: u.destination_port(),
                syn: false,
            }
        }
        TransportSlice::Tcp(t) => {
            let want = t
                .calc_checksum_ipv4(ip_hdr.source, ip_hdr.destination)
                .expect("computable");
            assert_eq!(t.checksum(), want, "TCP checksum");
            assert!(t.payload().is_empty());
            Tuple {
                src: ip_hdr.source,
                dst: ip_hdr.destination,
                proto: 6,
                sport: t.source_port(),
                dport: t.destination_port(),
                syn: t.syn() && !t.ack() && !t.fin() && !t.rst(),
            }
        }
        other => panic!("unexpected transport {other:?}"),
    }
}

fn gen(profile: Profile, opts: Options) -> Workload {
    generate(&profile, &opts).expect("workload generates")
}

fn flows(n: u64, order: Order) -> Profile {
    Profile::Flows(FlowsSpec { flows: n, order })
}

fn opts_packets(packets: u64) -> Options {
    Options {
        packets: Some(packets),
        ..Options::default()
    }
}

fn packet_tuples(w: &Workload) -> Vec<Tuple> {
    w.packets().map(|p| parse(p.data)).collect()
}

fn bytes(w: &Workload) -> Vec<u8> {
    let mut v = w.to_frames().as_bytes().to_vec();
    v.extend_from_slice(w.rules_text().as_bytes());
    v
}

fn option_of(e: Error) -> &'static str {
    match e {
        Error::InvalidValue { option, .. } => option,
        Error::Conflict(a, _) => a,
    }
}

// ---- flows ----

#[test]
fn flows_have_n_distinct_five_tuples() {
    for n in [1, 7, 1000, 5000] {
        let w = gen(flows(n, Order::RoundRobin), Options::default());
        assert_eq!(w.flow_count() as u64, n);
        let distinct: HashSet<Tuple> = packet_tuples(&w).into_iter().collect();
        assert_eq!(distinct.len() as u64, n, "n={n}");
        assert_eq!(w.frame_len(), 60);
    }
}

#[test]
fn flows_addressing_matches_gen_pcap() {
    let w = gen(flows(300, Order::RoundRobin), Options::default());
    let t = parse(w.flow_frames().get(299).expect("flow 299"));
    assert_eq!(t.src, [10, 0, 1, 43]);
    assert_eq!(t.dst, [20, 0, 1, 43]);
    assert_eq!((t.proto, t.sport, t.dport), (17, 1024, 5001));
}

#[test]
fn rr_every_window_of_n_holds_each_flow_once() {
    let n = 37usize;
    let w = gen(
        flows(n as u64, Order::RoundRobin),
        opts_packets(37 * 5 + 11),
    );
    let seq = w.sequence();
    assert_eq!(seq.len(), 37 * 5 + 11);
    for win in seq.windows(n) {
        let set: HashSet<u32> = win.iter().copied().collect();
        assert_eq!(set.len(), n);
    }
}

#[test]
fn rr_default_repeats_small_workloads_to_min_packets() {
    assert_eq!(
        gen(flows(1, Order::RoundRobin), Options::default()).packet_count(),
        4096
    );
    assert_eq!(
        gen(flows(100, Order::RoundRobin), Options::default()).packet_count(),
        4100
    );
    assert_eq!(
        gen(flows(5000, Order::RoundRobin), Options::default()).packet_count(),
        5000
    );
    assert_eq!(
        gen(flows(100, Order::Uniform), Options::default()).packet_count(),
        4096
    );
}

#[test]
fn uniform_spreads_evenly() {
    let w = gen(flows(100, Order::Uniform), opts_packets(100_000));
    let mut counts = vec![0u32; 100];
    for &i in w.sequence() {
        counts[i as usize] += 1;
    }
    // Expected 1000 each, sd ~31.5: a fixed seed keeps this stable.
    assert!(
        counts.iter().all(|&c| (850..1150).contains(&c)),
        "{counts:?}"
    );
}

#[test]
fn zipf_has_elephants_and_mice() {
    let w = gen(flows(1000, Order::Zipf(1.0)), opts_packets(200_000));
    let mut counts = vec![0u32; 1000];
    for &i in w.sequence() {
        counts[i as usize] += 1;
    }
    let share = |c: u32| f64::from(c) / 200_000.0;
    // Theory: 1/H(1000) = 13.4 % for the top flow; top 10 % ~69 %.
    assert!(
        (0.125..0.143).contains(&share(counts[0])),
        "top {}",
        share(counts[0])
    );
    let top100: u32 = counts[..100].iter().sum();
    assert!(
        (0.66..0.72).contains(&share(top100)),
        "top 10 % {}",
        share(top100)
    );
    assert!(counts[0] > counts[9] && counts[9] > counts[99]);
    assert!(counts[0] > 100 * counts[999].max(1));
}

#[test]
fn zipf_zero_is_uniform_and_default_exponent_is_one() {
    assert_eq!("zipf".parse::<Order>(), Ok(Order::Zipf(1.0)));
    assert_eq!("zipf:0.8".parse::<Order>(), Ok(Order::Zipf(0.8)));
    assert_eq!("random".parse::<Order>(), Ok(Order::Uniform));
    assert_eq!("rr".parse::<Order>(), Ok(Order::RoundRobin));
    let w = gen(flows(10, Order::Zipf(0.0)), opts_packets(50_000));
    let mut counts = [0u32; 10];
    for &i in w.sequence() {
        counts[i as usize] += 1;
    }
    assert!(
        counts.iter().all(|&c| (4500..5500).contains(&c)),
        "{counts:?}"
    );
}

#[test]
fn bad_order_names_the_option() {
    for bad in ["zipf:-1", "zipf:x", "zipf:inf", "lru", ""] {
        let e = bad.parse::<Order>().expect_err(bad);
        assert_eq!(option_of(e.clone()), "--order");
        assert!(e.to_string().contains("--order"), "{e}");
    }
}

#[test]
fn flows_rules_text() {
    let w = gen(flows(10, Order::RoundRobin), Options::default());
    assert_eq!(
        w.rules_text(),
        "priority=10,udp,actions=output:2\npriority=0,actions=drop\n"
    );
}

#[test]
fn flows_limits_name_the_option() {
    let o = Options::default();
    assert_eq!(
        option_of(generate(&flows(0, Order::RoundRobin), &o).expect_err("0")),
        "--flows"
    );
    assert_eq!(
        option_of(generate(&flows((1 << 24) + 1, Order::RoundRobin), &o).expect_err("big")),
        "--flows"
    );
    let bad = Options {
        frame_size: 63,
        ..o
    };
    let e = generate(&flows(1, Order::RoundRobin), &bad).expect_err("63");
    assert_eq!(option_of(e.clone()), "--frame-size");
    assert_eq!(e.to_string(), "invalid value '63' for --frame-size: the wire frame size (with FCS) must be 64..=9216 bytes");
    let e = generate(&flows(1, Order::RoundRobin), &opts_packets(0)).expect_err("0 packets");
    assert_eq!(option_of(e), "--packets");
}

// ---- subtables ----

fn subtables(s: u64, d: u64) -> Profile {
    Profile::Subtables(SubtablesSpec {
        subtables: s,
        dsts: d,
    })
}

/// (prefix length, tp_src matched) of a subtables rule: its mask.
fn mask_of(rule: &str) -> (u32, bool) {
    let prefix = rule
        .split('/')
        .nth(1)
        .and_then(|r| r.split(',').next())
        .expect("prefix");
    (
        prefix.parse().expect("number"),
        rule.contains("tp_src=1024"),
    )
}

#[test]
fn subtables_rules_have_distinct_masks() {
    let w = gen(subtables(30, 4), Options::default());
    let rules = w.rules();
    assert_eq!(rules.len(), 31);
    assert_eq!(
        rules[0],
        "priority=10,udp,nw_src=1.0.0.0/8,actions=output:2"
    );
    assert_eq!(
        rules[24],
        "priority=10,udp,nw_src=25.0.0.0/32,actions=output:2"
    );
    assert_eq!(
        rules[25],
        "priority=10,udp,nw_src=26.0.0.0/8,tp_src=1024,actions=output:2"
    );
    assert_eq!(
        rules[29],
        "priority=10,udp,nw_src=30.0.0.0/12,tp_src=1024,actions=output:2"
    );
    assert_eq!(rules[30], "priority=0,actions=drop");
    let masks: HashSet<(u32, bool)> = rules[..30].iter().map(|r| mask_of(r)).collect();
    assert_eq!(masks.len(), 30);
}

#[test]
fn subtables_have_s_times_d_flows_each_matching_its_rule() {
    let (s, d) = (12u64, 9u64);
    let w = gen(subtables(s, d), Options::default());
    assert_eq!(w.flow_count() as u64, s * d);
    assert_eq!(w.packet_count(), 4096);
    let all: Vec<Tuple> = w.flow_frames().iter().map(parse).collect();
    let distinct: HashSet<Tuple> = all.iter().copied().collect();
    assert_eq!(distinct.len() as u64, s * d);
    for (i, t) in all.iter().enumerate() {
        let k = i as u64 / d + 1;
        assert_eq!(t.src, [k as u8, 0, 0, 0]);
        assert_eq!(t.dst, [30, 0, 0, (i as u64 % d) as u8]);
        // Matches exactly rule k: the only rule whose /(7+K) prefix covers it.
        let matching: Vec<u64> = (1..=s)
            .filter(|&r| {
                let len = 7 + r as u32;
                let net = (r as u32) << 24;
                u32::from_be_bytes(t.src) >> (32 - len) == net >> (32 - len)
            })
            .collect();
        assert_eq!(matching, vec![k]);
    }
    // Uniform order: every flow shows up with 4096 draws over 108 flows.
    let seen: HashSet<u32> = w.sequence().iter().copied().collect();
    assert_eq!(seen.len() as u64, s * d);
}

#[test]
fn subtables_limits_name_the_option() {
    let o = Options::default();
    assert_eq!(
        option_of(generate(&subtables(51, 1), &o).expect_err("51")),
        "--subtables"
    );
    assert_eq!(
        option_of(generate(&subtables(0, 1), &o).expect_err("0")),
        "--subtables"
    );
    assert_eq!(
        option_of(generate(&subtables(2, 1 << 24), &o).expect_err("2^25")),
        "--dsts"
    );
    assert!(generate(&subtables(50, 1), &o).is_ok());
}

// ---- nmap ----

fn nmap(h: u64, p: u64, order: ScanOrder, rules: NmapRuleSet) -> Profile {
    Profile::Nmap(NmapSpec {
        hosts: h,
        ports: p,
        order,
        rules,
        normal: false,
    })
}

#[test]
fn nmap_scans_every_port_of_every_host_once() {
    let (h, p) = (3u64, 500u64);
    let w = gen(
        nmap(h, p, ScanOrder::Random, NmapRuleSet::Port90),
        Options::default(),
    );
    assert_eq!(w.packet_count() as u64, h * p);
    let mut seen: HashMap<([u8; 4], u16), u32> = HashMap::new();
    for t in packet_tuples(&w) {
        assert!(t.syn, "SYN only");
        assert_eq!((t.src, t.sport, t.proto), ([7, 7, 7, 1], 40000, 6));
        *seen.entry((t.dst, t.dport)).or_default() += 1;
    }
    assert_eq!(seen.len() as u64, h * p);
    assert!(seen.values().all(|&c| c == 1));
    for host in 0..h {
        for port in 1..=p as u16 {
            assert!(seen.contains_key(&([7, 7, 7, 101 + host as u8], port)));
        }
    }
    // Random, not the generation order.
    let sorted: Vec<u32> = (0..(h * p) as u32).collect();
    assert_ne!(w.sequence(), &sorted[..]);
}

#[test]
fn nmap_port_major_probes_each_port_on_every_host_in_turn() {
    let w = gen(
        nmap(2, 3, ScanOrder::PortMajor, NmapRuleSet::Port90),
        Options::default(),
    );
    let got: Vec<([u8; 4], u16)> = packet_tuples(&w).iter().map(|t| (t.dst, t.dport)).collect();
    let h = |i: u8| [7u8, 7, 7, 101 + i];
    assert_eq!(
        got,
        vec![
            (h(0), 1),
            (h(1), 1),
            (h(0), 2),
            (h(1), 2),
            (h(0), 3),
            (h(1), 3)
        ]
    );
}

#[test]
fn nmap_packets_repeat_the_scan() {
    let w = gen(
        nmap(1, 10, ScanOrder::Random, NmapRuleSet::Port90),
        opts_packets(25),
    );
    assert_eq!(w.packet_count(), 25);
    assert_eq!(w.sequence()[..10], w.sequence()[10..20]);
    assert_eq!(w.sequence()[..5], w.sequence()[20..25]);
}

#[test]
fn nmap_rule_sets_exact_text() {
    let cases: [(&str, &str); 8] = [
        ("port90", "priority=65535,tcp,tp_dst=90,actions=drop\n"),
        (
            "ports90-91",
            "priority=65535,tcp,tp_dst=90,actions=drop\npriority=65535,tcp,tp_dst=91,actions=drop\n",
        ),
        (
            "ports22-5900",
            "priority=65535,tcp,tp_dst=22,actions=drop\npriority=65535,tcp,tp_dst=5900,actions=drop\n",
        ),
        ("mask0x58", "priority=65535,tcp,tp_dst=0x58/0xfff8,actions=drop\n"),
        (
            "ports90-95",
            "priority=65535,tcp,tp_dst=90,actions=drop\n\
             priority=65535,tcp,tp_dst=91,actions=drop\n\
             priority=65535,tcp,tp_dst=92,actions=drop\n\
             priority=65535,tcp,tp_dst=93,actions=drop\n\
             priority=65535,tcp,tp_dst=94,actions=drop\n\
             priority=65535,tcp,tp_dst=95,actions=drop\n",
        ),
        (
            "nested",
            "priority=65535,tcp,tp_dst=90,actions=drop\n\
             priority=65534,tcp,nw_dst=7.7.7.0/24,actions=output:2\n",
        ),
        (
            "nested-same-prio",
            "priority=65535,tcp,tp_dst=90,actions=drop\n\
             priority=65535,tcp,nw_dst=7.7.7.0/24,actions=output:2\n",
        ),
        (
            "allow-over-drop",
            "priority=65535,tcp,nw_dst=7.7.7.104,tp_dst=90,actions=output:2\n\
             priority=65533,tcp,tp_dst=90,actions=drop\n",
        ),
    ];
    for (name, text) in cases {
        let set: NmapRuleSet = name.parse().expect(name);
        assert_eq!(set.name(), name);
        let w = gen(nmap(1, 10, ScanOrder::Random, set), Options::default());
        assert_eq!(
            w.rules_text(),
            format!("{text}priority=0,actions=output:2\n"),
            "{name}"
        );
    }
    let e = "port91".parse::<NmapRuleSet>().expect_err("unknown");
    assert_eq!(option_of(e.clone()), "--rules-set");
    assert!(e.to_string().contains("allow-over-drop"));
}

#[test]
fn nmap_verdicts_follow_the_rules() {
    let h = |i: u32| u32::from_be_bytes([7, 7, 7, 101]) + i;
    let dropped = |set: NmapRuleSet| -> Vec<u16> {
        (1..=6000u16)
            .filter(|&p| set.drops(h(0), p) == Some(true))
            .collect()
    };
    assert_eq!(dropped(NmapRuleSet::Port90), vec![90]);
    assert_eq!(dropped(NmapRuleSet::Ports90To91), vec![90, 91]);
    assert_eq!(dropped(NmapRuleSet::Ports22And5900), vec![22, 5900]);
    assert_eq!(
        dropped(NmapRuleSet::Mask0x58),
        (88..=95).collect::<Vec<_>>()
    );
    assert_eq!(
        dropped(NmapRuleSet::Ports90To95),
        (90..=95).collect::<Vec<_>>()
    );
    assert_eq!(dropped(NmapRuleSet::Nested), vec![90]);
    assert_eq!(NmapRuleSet::NestedSamePrio.drops(h(0), 90), None);
    assert_eq!(NmapRuleSet::NestedSamePrio.drops(h(0), 91), Some(false));
    assert_eq!(NmapRuleSet::AllowOverDrop.drops(h(3), 90), Some(false)); // 7.7.7.104
    assert_eq!(NmapRuleSet::AllowOverDrop.drops(h(2), 90), Some(true));
}

#[test]
fn nmap_limits_name_the_option() {
    let o = Options::default();
    let p = |h, ports| nmap(h, ports, ScanOrder::Random, NmapRuleSet::Port90);
    assert_eq!(
        option_of(generate(&p(155, 1), &o).expect_err("hosts")),
        "--hosts"
    );
    assert_eq!(
        option_of(generate(&p(1, 65536), &o).expect_err("ports")),
        "--ports"
    );
    assert_eq!(
        option_of(generate(&p(1, 0), &o).expect_err("ports")),
        "--ports"
    );
    assert_eq!(
        "sideways".parse::<ScanOrder>().map_err(option_of),
        Err("--order")
    );
}

// ---- churn ----

fn churn(n: u64, r: u64, duration_ns: Option<u64>, pps: Option<u64>) -> ChurnSpec {
    ChurnSpec {
        flows: n,
        new_per_sec: r,
        duration_ns,
        pps,
    }
}

#[test]
fn churn_flows_arrive_at_the_rate_and_live_a_few_packets() {
    let spec = churn(50, 1000, None, None); // P = 4000 pps, lifetime 50 ms
    let no_min = Options {
        min_packets: 0,
        ..Options::default()
    };
    let w = gen(Profile::Churn(spec.clone()), no_min);
    assert_eq!(w.pps(), 4000);
    // Default length: 2N/R = 0.1 s = 400 packets.
    assert_eq!(w.packet_count(), 400);
    assert_eq!(w.timestamp_ns(1), 250_000);
    assert_eq!(w.packet(399).map(|p| p.timestamp_ns), Some(99_750_000));

    // Flow ids from the source address (10.0.0.0 + id).
    let mut by_flow: HashMap<u32, Vec<u64>> = HashMap::new();
    for p in w.packets() {
        let t = parse(p.data);
        let id = u32::from_be_bytes(t.src) - u32::from_be_bytes([10, 0, 0, 0]);
        assert_eq!(
            u32::from_be_bytes(t.dst) - u32::from_be_bytes([20, 0, 0, 0]),
            id
        );
        by_flow.entry(id).or_default().push(p.timestamp_ns);
    }
    assert_eq!(by_flow.len(), w.flow_count());
    let (n, r) = (50u64, 1000u64);
    for (&id, times) in &by_flow {
        let id = u64::from(id);
        // Lives from (id-N+1)/R (or 0) to (id+1)/R seconds.
        let start = (id + 1).saturating_sub(n) * 1_000_000_000 / r;
        let end = (id + 1) * 1_000_000_000 / r;
        assert!(
            times.iter().all(|&t| start <= t && t < end),
            "flow {id}: {times:?}"
        );
        // Full-lifetime flows get P/R = 4 packets.
        if id >= n && end <= 100_000_000 {
            assert_eq!(times.len(), 4, "flow {id}");
        }
    }
    // New flows per second ~ R: ids first seen in [50 ms, 100 ms) ~ 50.
    let new_in_window = by_flow
        .values()
        .filter(|t| (50_000_000..100_000_000).contains(&t[0]))
        .count();
    assert!((45..=55).contains(&new_in_window), "{new_in_window}");
}

#[test]
fn churn_duration_and_limits() {
    let o = Options::default();
    let w = gen(
        Profile::Churn(churn(10, 100, Some(2_000_000_000), Some(1000))),
        o,
    );
    assert_eq!(w.packet_count(), 2000);
    assert_eq!(w.timestamp_ns(1999), 1_999_000_000);
    let e = generate(&Profile::Churn(churn(10, 100, None, Some(99))), &o).expect_err("pps < R");
    assert_eq!(option_of(e), "--pps");
    let e = generate(
        &Profile::Churn(churn(10, 100, Some(1_000_000_000), None)),
        &opts_packets(5),
    )
    .expect_err("conflict");
    assert_eq!(e, Error::Conflict("--duration", "--packets"));
    let e = generate(&Profile::Churn(churn(0, 100, None, None)), &o).expect_err("0 flows");
    assert_eq!(option_of(e), "--flows");
    let e = generate(&Profile::Churn(churn(10, 100, Some(1), None)), &o).expect_err("too short");
    assert_eq!(option_of(e), "--duration");
}

// ---- all profiles ----

fn all_profiles() -> Vec<Profile> {
    vec![
        flows(50, Order::Uniform),
        flows(50, Order::Zipf(1.2)),
        subtables(5, 7),
        nmap(2, 100, ScanOrder::Random, NmapRuleSet::Port90),
    ]
}

#[test]
fn same_seed_same_bytes_other_seed_other_bytes() {
    for p in all_profiles() {
        let a = bytes(&gen(
            p.clone(),
            Options {
                seed: 7,
                ..Options::default()
            },
        ));
        let b = bytes(&gen(
            p.clone(),
            Options {
                seed: 7,
                ..Options::default()
            },
        ));
        let c = bytes(&gen(
            p.clone(),
            Options {
                seed: 8,
                ..Options::default()
            },
        ));
        assert_eq!(a, b, "{p:?}");
        assert_ne!(a, c, "{p:?}");
    }
}

#[test]
fn headers_and_checksums_are_valid_at_every_size() {
    let mut profiles = all_profiles();
    profiles.push(Profile::Churn(churn(5, 100, None, None)));
    for p in profiles {
        for (size, csum) in [
            (64, UdpChecksum::Zero),
            (64, UdpChecksum::Computed),
            (1518, UdpChecksum::Computed),
        ] {
            let o = Options {
                frame_size: size,
                udp_checksum: csum,
                ..Options::default()
            };
            let w = gen(p.clone(), o);
            assert_eq!(w.frame_len(), size - 4);
            for f in w.flow_frames().iter() {
                assert_eq!(f.len(), size - 4);
                let t = parse(f); // checks every checksum
                if t.proto == 17 {
                    let udp_csum = u16::from_be_bytes([f[40], f[41]]);
                    assert_eq!(udp_csum == 0, csum == UdpChecksum::Zero, "{p:?} {size}");
                }
            }
        }
    }
}

#[test]
fn to_frames_materialises_the_sequence() {
    let w = gen(flows(3, Order::Uniform), opts_packets(10));
    let f = w.to_frames();
    assert_eq!(f.len(), 10);
    for (i, frame) in f.iter().enumerate() {
        assert_eq!(Some(frame), w.flow_frames().get(w.sequence()[i] as usize));
    }
    assert!(w
        .description()
        .starts_with("workload=flows flows=3 order=uniform packets=10"));
}
