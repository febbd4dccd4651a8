//! Property tests: random sequences of packets (TCP, UDP, ICMP, ICMP
//! errors, IPv6, other protocols; corrupted and truncated ones too) with
//! random `ct` arguments (zones, commit, force, NAT, marks) never panic,
//! and keep the tracker's invariants: both tuples of every committed
//! connection find it, the connection count matches the dump and the
//! zone counts, NAT keeps checksums right, and the state bits are
//! consistent.

#[path = "../src/testpkt.rs"]
mod testpkt;

use flowpath_conntrack::{
    state, Alg, Config, Conntrack, CtArgs, CtMeta, NatKind, NatRange, NatSpec,
};
use proptest::prelude::*;
use std::net::{IpAddr, Ipv4Addr};
use testpkt::*;

#[derive(Debug, Clone)]
struct Op {
    kind: u8,
    a: u8,
    b: u8,
    sport: u16,
    dport: u16,
    flags: u16,
    seq: u32,
    ack: u32,
    commit: bool,
    force: bool,
    zone: u16,
    nat: u8,
    mark: Option<u32>,
    corrupt: Option<(usize, u8)>,
    truncate: Option<usize>,
    keep_md: bool,
    csum_ok: bool,
    dt: u64,
}

fn op() -> impl Strategy<Value = Op> {
    (
        (0u8..9, 1u8..5, 1u8..5, 0u16..4, 0u16..4, any::<u16>()),
        (0u32..4, 0u32..4, any::<bool>(), 0u8..8, 0u16..3, 0u8..7),
        (
            proptest::option::of(any::<u32>()),
            proptest::option::weighted(0.1, (0usize..120, any::<u8>())),
            proptest::option::weighted(0.1, 0usize..120),
            any::<bool>(),
            any::<bool>(),
            0u64..20_000,
        ),
    )
        .prop_map(
            |(
                (kind, a, b, sp, dp, fl),
                (seq, ack, commit, force, zone, nat),
                (mark, corrupt, truncate, keep_md, csum_ok, dt),
            )| Op {
                kind,
                a,
                b,
                sport: 1000 + sp,
                dport: if dp == 0 { 21 } else { 80 + dp },
                // Mostly sensible flag combinations, sometimes anything.
                flags: match fl % 8 {
                    0 => TCP_SYN,
                    1 => TCP_SYN | TCP_ACK,
                    2 | 3 => TCP_ACK,
                    4 => TCP_ACK | TCP_PSH,
                    5 => TCP_FIN | TCP_ACK,
                    6 => TCP_RST,
                    _ => fl & 0x3f,
                },
                seq: seq.wrapping_mul(1000),
                ack: ack.wrapping_mul(1000),
                commit,
                force: force == 0,
                zone,
                nat,
                mark,
                corrupt,
                truncate,
                keep_md,
                csum_ok,
                dt,
            },
        )
}

fn host(n: u8) -> [u8; 4] {
    [10, 0, 0, n]
}

fn frame(o: &Op) -> Vec<u8> {
    let (a, b) = (host(o.a), host(o.b));
    match o.kind {
        0 => {
            let payload: &[u8] = if o.flags & 0x08 != 0 {
                b"PORT 10,0,0,1,4,1\r\n"
            } else if o.seq.is_multiple_of(3000) {
                b"227 Entering Passive Mode (10,0,0,2,4,2)\r\n"
            } else {
                b"data"
            };
            tcp4(a, b, o.sport, o.dport, o.seq, o.ack, o.flags, payload)
        }
        1 => udp4(a, b, o.sport, o.dport, b"udp"),
        2 => icmp4_echo(a, b, if o.flags & 1 == 0 { 8 } else { 0 }, o.sport, 1),
        3 => {
            let quoted = udp4(b, a, o.dport, o.sport, b"q");
            icmp4_error(a, b, 3, 3, &quoted[14..])
        }
        4 => udp6(v6a(o.a), v6a(o.b), o.sport, o.dport, b"six"),
        5 => tcp6(v6a(o.a), v6a(o.b), o.sport, o.dport, o.seq, o.ack, o.flags),
        6 => icmp6_echo(
            v6a(o.a),
            v6a(o.b),
            if o.flags & 1 == 0 { 128 } else { 129 },
            o.sport,
            1,
        ),
        7 => other4(a, b, 47),
        _ => {
            let quoted = tcp6(v6a(o.b), v6a(o.a), o.dport, o.sport, 1, 0, TCP_SYN);
            let mut e = icmp6_echo(v6a(o.a), v6a(o.b), 128, 1, 1);
            e.truncate(54);
            let _ = quoted;
            e
        }
    }
}

fn nat_spec(n: u8, v6: bool) -> Option<NatSpec> {
    let mk = |kind, lo: IpAddr, hi: IpAddr, pmin, pmax| {
        Some(NatSpec {
            kind,
            range: Some(NatRange {
                min_addr: lo,
                max_addr: hi,
                min_port: pmin,
                max_port: pmax,
            }),
            persistent: false,
            hash: false,
            random: false,
        })
    };
    let v4 = |x: [u8; 4]| IpAddr::V4(Ipv4Addr::from(x));
    let six = |x: u8| IpAddr::V6(v6a(x).into());
    match (n, v6) {
        (1, false) => mk(
            Some(NatKind::Src),
            v4([192, 0, 2, 1]),
            v4([192, 0, 2, 1]),
            0,
            0,
        ),
        (2, false) => mk(
            Some(NatKind::Src),
            v4([192, 0, 2, 1]),
            v4([192, 0, 2, 2]),
            5000,
            5001,
        ),
        (3, false) => mk(
            Some(NatKind::Dst),
            v4([10, 0, 0, 9]),
            v4([10, 0, 0, 9]),
            8080,
            8080,
        ),
        (1 | 2, true) => mk(Some(NatKind::Src), six(0x91), six(0x92), 0, 0),
        (3, true) => mk(Some(NatKind::Dst), six(0x99), six(0x99), 0, 0),
        (4, _) => Some(NatSpec {
            kind: None,
            range: None,
            persistent: false,
            hash: false,
            random: false,
        }),
        _ => None,
    }
}

fn check_invariants(ct: &Conntrack, now: u64) {
    ct.sweep_all(now);
    let dump = ct.dump_at(None, now);
    assert_eq!(ct.n_conns() as usize, dump.len(), "count matches dump");
    let zone_sum: u32 = ct.zone_limits_of(&[0, 1, 2]).iter().map(|z| z.2).sum();
    assert_eq!(zone_sum, ct.n_conns(), "zone counts match");
    for e in &dump {
        let (f, r) = ct
            .find(&Conntrack::key_of(&e.orig, e.zone), now)
            .expect("original tuple finds the connection");
        assert!(!r);
        assert_eq!(f.orig, e.orig);
        let (f, r) = ct
            .find(&Conntrack::key_of(&e.reply, e.zone), now)
            .expect("reply tuple finds the connection");
        let self_reverse =
            Conntrack::key_of(&e.reply, e.zone) == Conntrack::key_of(&e.orig, e.zone);
        assert!(r || self_reverse, "reply tuple is the reply direction");
        assert_eq!(f.orig, e.orig);
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 500,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_sequences_keep_invariants(ops in proptest::collection::vec(op(), 1..60)) {
        let ct = Conntrack::new(Config { shards: 4, max_conns: 40, ..Config::default() });
        ct.set_zone_limit(2, 3);
        let mut now = 1_000u64;
        let mut md = CtMeta::default();
        for o in &ops {
            now += o.dt;
            let mut f = frame(o);
            let pristine = o.corrupt.is_none() && o.truncate.is_none();
            if let Some((at, x)) = o.corrupt {
                if let Some(b) = f.get_mut(14 + at) {
                    *b ^= x | 1;
                }
            }
            if let Some(n) = o.truncate {
                f.truncate(14 + n);
            }
            if !o.keep_md {
                md = CtMeta::default();
            }
            let v6 = matches!(o.kind, 4 | 5 | 6 | 8);
            let args = CtArgs {
                zone: o.zone,
                commit: o.commit,
                force: o.force,
                set_mark: o.mark.map(|m| (m, 0xffff)),
                set_label: o.mark.map(|m| (u128::from(m) << 64, u128::MAX)),
                nat: nat_spec(o.nat, v6),
                helper: match o.nat {
                    5 => Some(Alg::Ftp),
                    6 => Some(Alg::Tftp),
                    _ => None,
                },
            };
            let dl = if v6 { 0x86dd } else { 0x0800 };
            ct.execute(&mut f, 14, dl, o.csum_ok, &args, &mut md, now);
            prop_assert!(md.state & state::TRK != 0);
            // An FTP control message the helper rejects is `+inv` on top
            // of its connection's verdict, as in Open vSwitch.
            if md.state & state::INV != 0 && args.helper != Some(Alg::Ftp) {
                prop_assert_eq!(md.state & (state::NEW | state::EST), 0);
            }
            prop_assert!(md.state & (state::NEW | state::EST) != (state::NEW | state::EST));
            if pristine && !o.keep_md && o.kind != 8 {
                prop_assert!(checksums_ok(&f), "checksums after NAT: {:?}", o);
            }
            if o.dt % 7 == 0 {
                ct.sweep(now);
            }
        }
        check_invariants(&ct, now);
        if std::env::var_os("CT_PROP_VERBOSE").is_some() {
            eprintln!("{:?}", ct.stats());
        }
    }
}

#[test]
fn garbage_frames_never_panic() {
    let ct = Conntrack::new(Config::default());
    let mut seed = 0x1234_5678u64;
    for len in 0..200usize {
        for _ in 0..20 {
            let mut f: Vec<u8> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect();
            // Make some of them look like IP.
            if let Some(b) = f.get_mut(14) {
                *b = if seed & 1 == 0 { 0x45 } else { 0x60 };
            }
            let mut md = CtMeta {
                conn: seed,
                state: seed as u8,
                ..CtMeta::default()
            };
            for dl in [0x0800u16, 0x86dd] {
                let args = CtArgs {
                    commit: true,
                    nat: nat_spec((seed % 5) as u8, dl == 0x86dd),
                    ..CtArgs::default()
                };
                ct.execute(&mut f, 14, dl, seed & 2 == 0, &args, &mut md, len as u64);
                ct.execute(&mut f, usize::MAX, dl, false, &args, &mut md, len as u64);
            }
        }
    }
    check_invariants(&ct, 1_000);
}
