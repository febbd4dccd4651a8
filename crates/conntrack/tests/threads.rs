//! Several threads share one tracker, as PMD threads do: they commit the
//! same and different connections, in both directions and with NAT, while
//! another thread sweeps and flushes. Afterwards the table is consistent:
//! no tuple is owned twice, counts match the dump, and both tuples of
//! every connection find it.

#[path = "../src/testpkt.rs"]
mod testpkt;

use flowpath_conntrack::{Config, Conntrack, CtArgs, CtMeta, NatKind, NatRange, NatSpec};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use testpkt::*;

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn shared_by_threads() {
    assert_send_sync::<Conntrack>();
    let ct = Arc::new(Conntrack::new(Config {
        shards: 8,
        max_conns: 500,
        ..Config::default()
    }));
    let snat = CtArgs {
        commit: true,
        nat: Some(NatSpec {
            kind: Some(NatKind::Src),
            range: Some(NatRange {
                min_addr: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
                max_addr: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
                min_port: 10000,
                max_port: 10100,
            }),
            persistent: false,
            hash: false,
            random: false,
        }),
        ..CtArgs::default()
    };
    let mut handles = Vec::new();
    for t in 0..4u16 {
        let ct = Arc::clone(&ct);
        handles.push(std::thread::spawn(move || {
            for i in 0..2000u16 {
                let now = u64::from(i) * 10;
                let p = 1000 + (i % 150);
                let mut md = CtMeta::default();
                let args = CtArgs {
                    zone: t % 2,
                    commit: true,
                    ..CtArgs::default()
                };
                let mut f = udp4([10, 0, 0, 1], [10, 0, 0, 2], p, 53, b"q");
                ct.execute(&mut f, 14, 0x0800, false, &args, &mut md, now);
                let mut r = udp4([10, 0, 0, 2], [10, 0, 0, 1], 53, p, b"r");
                ct.execute(&mut r, 14, 0x0800, false, &args, &mut md, now);
                let mut n = udp4([10, 0, 1, t as u8], [8, 8, 8, 8], p, 53, b"n");
                let mut md = CtMeta::default();
                ct.execute(&mut n, 14, 0x0800, false, &snat, &mut md, now);
                assert!(checksums_ok(&n));
            }
        }));
    }
    {
        let ct = Arc::clone(&ct);
        handles.push(std::thread::spawn(move || {
            for i in 0..400u64 {
                ct.sweep(i * 50);
                if i % 100 == 99 {
                    ct.flush(Some(1), None);
                }
            }
        }));
    }
    for h in handles {
        h.join().expect("no thread panicked");
    }
    let now = 20_000;
    ct.sweep_all(now);
    let dump = ct.dump_at(None, now);
    assert_eq!(dump.len(), ct.n_conns() as usize);
    assert!(ct.n_conns() <= 500);
    let mut seen = std::collections::HashSet::new();
    for e in &dump {
        let ko = Conntrack::key_of(&e.orig, e.zone);
        let kr = Conntrack::key_of(&e.reply, e.zone);
        assert!(seen.insert(ko), "tuple owned twice");
        assert!(seen.insert(kr), "tuple owned twice");
        assert_eq!(
            ct.find(&ko, now).map(|(x, r)| (x.orig, r)),
            Some((e.orig, false))
        );
        assert_eq!(
            ct.find(&kr, now).map(|(x, r)| (x.orig, r)),
            Some((e.orig, true))
        );
    }
    let zone_sum: u32 = ct.zone_limits_of(&[0, 1]).iter().map(|z| z.2).sum();
    assert_eq!(zone_sum, ct.n_conns());
}
