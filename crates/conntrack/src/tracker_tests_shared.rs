//! Unit tests of the tracker shared by threads and fed by the datapath's
//! prefetch: the prefetch hash against the lookup's, several threads at
//! once. (Test-only module.)

use super::*;
use crate::state as s;
use crate::testpkt::*;

use super::tests::{commit, ct, lookup, run, B};

// The prefetch's tuple hash, taken straight from the frame, is the hash of
// the key the tracker then extracts: otherwise every prefetch would load
// the wrong bucket (a silent slowdown, not an error).
proptest::proptest! {
    #[test]
    fn prefetch_hash_is_the_lookup_hash(
        src in proptest::prelude::any::<[u8; 4]>(),
        dst in proptest::prelude::any::<[u8; 4]>(),
        sp in proptest::prelude::any::<u16>(),
        dp in proptest::prelude::any::<u16>(),
        zone in proptest::prelude::any::<u16>(),
        tcp in proptest::prelude::any::<bool>(),
        opts in 0usize..3,
    ) {
        let ct = ct();
        let mut f = if tcp {
            tcp4(src, dst, sp, dp, 1, 0, TCP_SYN, b"x")
        } else {
            udp4(src, dst, sp, dp, b"x")
        };
        if opts > 0 {
            // IPv4 options (NOPs): the ports move.
            let at = 14 + 20;
            for _ in 0..opts * 4 {
                f.insert(at, 1);
            }
            f[14] = 0x45 + opts as u8;
            let total = u16::from_be_bytes([f[16], f[17]]) + (opts * 4) as u16;
            f[16..18].copy_from_slice(&total.to_be_bytes());
            fix_ipv4_csum(&mut f);
        }
        let key = crate::key::extract(&f, 14, crate::key::ETH_TYPE_IPV4, zone, true)
            .expect("valid packet")
            .key;
        let w = crate::key::quick_words_v4(&f, 14, crate::key::ETH_TYPE_IPV4, zone).expect("words");
        proptest::prop_assert_eq!(ct.table.hash_words(&w), ct.table.hash(&key));
        let g = table::pin();
        proptest::prop_assert_eq!(ct.prefetch(&f, 14, crate::key::ETH_TYPE_IPV4, zone, &g), ct.table.hash(&key));
    }
}

// Several threads through one tracker at once, as PMDs share it: two
// commit and answer their own connections (both directions), a third
// flushes, sweeps and dumps meanwhile. Every answer found its connection
// unless that connection was flushed in between (then it is `+new`, never
// `+inv` or another connection's state); at the end the count agrees
// with the table and a final sweep empties it.
#[test]
fn threads_commit_look_up_and_remove_at_once() {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    let ct = Arc::new(Conntrack::new(Config {
        shards: 4,
        ..Config::default()
    }));
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..2u8)
        .map(|w| {
            let ct = Arc::clone(&ct);
            std::thread::spawn(move || {
                let mut answered = 0u32;
                for round in 0..100u16 {
                    for i in 0..200u16 {
                        let a = [10, w, (i >> 8) as u8, i as u8];
                        let sp = 1000 + round;
                        let mut f = udp4(a, B, sp, 53, b"q");
                        let md = run(&ct, &mut f, &commit(0), u64::from(round));
                        assert_eq!(md.state & s::TRK, s::TRK);
                        assert_eq!(md.state & s::INV, 0, "valid UDP is never +inv");
                        let mut r = udp4(B, a, 53, sp, b"r");
                        let md = run(&ct, &mut r, &lookup(0), u64::from(round));
                        assert_eq!(md.state & s::INV, 0);
                        if md.state & s::EST != 0 {
                            assert_eq!(md.state & s::RPL, s::RPL, "an answer is a reply");
                            answered += 1;
                        } else {
                            assert_eq!(md.state & s::NEW, s::NEW, "flushed meanwhile: new");
                        }
                    }
                }
                answered
            })
        })
        .collect();
    let sweeper = {
        let (ct, stop) = (Arc::clone(&ct), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                ct.flush(Some(0), None);
                ct.sweep(n);
                let _ = ct.dump(Some(0));
                n += 1;
                std::thread::yield_now();
            }
        })
    };
    let answered: u32 = workers.into_iter().map(|t| t.join().expect("worker")).sum();
    stop.store(true, Ordering::Relaxed);
    sweeper.join().expect("sweeper");
    assert!(answered > 0, "some answers found their connection");
    assert_eq!(ct.n_conns() as usize, ct.dump(None).len());
    // One index entry per connection (no NAT: the reply tuple is the
    // original reversed, found through the same entry).
    assert_eq!(ct.table.index_sizes().0, ct.n_conns() as usize);
    ct.sweep_all(u64::MAX / 2);
    assert_eq!(ct.n_conns(), 0);
    assert!(ct.dump(None).is_empty());
}
