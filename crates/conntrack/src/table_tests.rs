//! Tests of the connection table (`table.rs`).

use super::*;
use crate::other::OtherState;
use crate::proto::L4;
use proptest::prelude::*;
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;

fn key(a: u8, sp: u16) -> ConnKey {
    let mut k = ConnKey {
        proto: 17,
        ..ConnKey::default()
    };
    k.src.addr[0] = a;
    k.dst.addr[0] = 200;
    k.src.port = sp;
    k.dst.port = 53;
    k
}

fn conn(k: ConnKey, rev: ConnKey, exp: u64) -> Conn {
    Conn::new(k, rev, L4::Other(OtherState::First), exp)
}

fn insert<'g>(t: &'g Table, c: Conn, now: u64, g: &'g Guard) -> Result<&'g Conn, InsertError> {
    let mut w = t.insert_guard();
    let mut ev = Vec::new();
    t.insert(&mut w, c, now, &mut ev, g)
}

#[test]
fn both_directions_and_nat_reply_tuple() {
    let t = Table::new(8);
    let g = pin();
    let k = key(1, 1000);
    let mut rev = k.reverse();
    rev.dst.addr[0] = 99; // SNAT: replies go to another address
    let c = insert(&t, conn(k, rev, 1000), 0, &g).expect("insert");
    let (f, r) = t.lookup(&k, 10, &g).expect("orig");
    assert!(std::ptr::eq(f, c) && !r);
    let (f, r) = t.lookup(&rev, 10, &g).expect("reply");
    assert!(std::ptr::eq(f, c) && r);
    assert!(t.lookup(&k.reverse(), 10, &g).is_none());
    // The handle finds it; after removal neither tuple nor handle does.
    let h = c.handle();
    assert_ne!(h, 0);
    assert!(t.by_handle(handle_with_dir(h, true, false), &g).is_some());
    assert!(t.remove(c));
    assert!(!t.remove(c));
    assert!(t.lookup(&k, 10, &g).is_none() && t.lookup(&rev, 10, &g).is_none());
    assert!(t.by_handle(h, &g).is_none());
    assert_eq!(t.index_sizes().0, 0);
}

#[test]
fn duplicates_refused_expired_replaced() {
    let t = Table::new(4);
    let g = pin();
    let k = key(1, 1);
    let a = insert(&t, conn(k, k.reverse(), 100), 0, &g).expect("first");
    let a_handle = a.handle();
    let dup = conn(k, k.reverse(), 100);
    assert_eq!(insert(&t, dup, 50, &g).err(), Some(InsertError::Exists));
    // After expiry the tuple may be reused; the old one is evicted.
    let mut w = t.insert_guard();
    let mut ev = Vec::new();
    let b = t
        .insert(&mut w, conn(k, k.reverse(), 500), 200, &mut ev, &g)
        .expect("replace");
    drop(w);
    assert_eq!(ev.len(), 1);
    assert!(std::ptr::eq(ev[0], a));
    assert!(std::ptr::eq(t.lookup(&k, 300, &g).expect("b").0, b));
    // The old handle does not reach the new connection (its slot is
    // reused with another generation).
    assert!(t.by_handle(a_handle, &g).is_none());
    assert_eq!(t.all(&g).len(), 1);
    assert_eq!(t.expired(1000, &g).len(), 1);
}

proptest! {
    // Both directions of a tuple hash alike (one entry serves both);
    // a change in any one field of the tuple changes the hash.
    #[test]
    fn the_hash_is_symmetric_and_reads_every_field(
        sa in any::<[u8; 16]>(), da in any::<[u8; 16]>(), sp in any::<u16>(),
        dp in any::<u16>(), st in any::<u8>(), dt in any::<u8>(), proto in any::<u8>(),
        zone in any::<u16>(), v6 in any::<bool>(), field in 0usize..7, bit in 0u32..8,
    ) {
        let t = Table::new(4);
        let mut k = ConnKey { proto, zone, v6, ..ConnKey::default() };
        k.src.addr = sa;
        k.dst.addr = da;
        k.src.port = sp;
        k.dst.port = dp;
        k.src.icmp_type = st;
        k.dst.icmp_type = dt;
        prop_assert_eq!(t.hash(&k), t.hash(&k.reverse()));
        let mut o = k;
        let flip = 1u8 << bit;
        match field {
            0 => o.src.addr[usize::from(proto) % 16] ^= flip,
            1 => o.dst.addr[usize::from(proto) % 16] ^= flip,
            2 => o.src.port ^= u16::from(flip),
            3 => o.dst.port ^= u16::from(flip) << 8,
            4 => o.src.icmp_code ^= flip,
            5 => o.proto ^= flip,
            _ => o.zone ^= u16::from(flip),
        }
        prop_assert_ne!(t.hash(&k), t.hash(&o));
    }
}

// The sweeper's units cover every slot once; removed connections
// are not handed out again; the slot of a removed connection is
// filled again once the collector gives it back.
#[test]
fn sweep_units_cover_every_slot_once() {
    let t = Table::new(4);
    let g = pin();
    let mut made = Vec::new();
    for i in 0..10_000u16 {
        let k = key(9, i);
        let exp = if i % 3 == 0 { 10 } else { 1000 };
        made.push(insert(&t, conn(k, k.reverse(), exp), 0, &g).expect("insert"));
    }
    for c in made.iter().step_by(7) {
        assert!(t.remove(c));
    }
    assert_eq!(t.sweep_units(), 10_000usize.div_ceil(SWEEP_UNIT));
    let mut out = Vec::new();
    let mut looked = 0;
    for u in 0..t.sweep_units() {
        looked += t.expired_in_unit(u, 500, &mut out, &g);
    }
    assert_eq!(looked, 10_000);
    let want = (0..10_000).filter(|i| i % 3 == 0 && i % 7 != 0).count();
    assert_eq!(out.len(), want);
    assert!(out
        .iter()
        .all(|c| c.expired(500) && c.key.src.port % 3 == 0));
    assert_eq!(t.all(&g).len(), 10_000 - 10_000usize.div_ceil(7));
    drop(g);
    // Once no reader is pinned, the collector hands the freed slots back
    // (other tests' threads may hold the epoch back for a while: bounded
    // wait), and they are reused before fresh ones: a thousand more
    // connections leave the slab all but as long.
    let removed = 10_000usize.div_ceil(7);
    let t0 = std::time::Instant::now();
    while t.reusable_slots() < removed && t0.elapsed() < std::time::Duration::from_secs(30) {
        pin().flush();
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(t.reusable_slots(), removed, "freed slots never came back");
    for i in 0..1000u16 {
        let g = pin();
        g.flush();
        let k = key(10, i);
        insert(&t, conn(k, k.reverse(), 1000), 0, &g).expect("insert");
    }
    let slots = t.index_sizes().2;
    assert!(slots < 10_100, "{slots} slots: freed ones were not reused");
    assert_eq!(t.all(&pin()).len(), 10_000 - 10_000usize.div_ceil(7) + 1000);
}

#[test]
fn a_tuple_that_is_its_own_reverse_has_one_entry() {
    let t = Table::new(2);
    let g = pin();
    let mut k = key(7, 0);
    k.dst = k.src;
    assert_eq!(k, k.reverse());
    let c = insert(&t, conn(k, k, 100), 0, &g).expect("insert");
    assert_eq!(t.index_sizes().0, 1);
    assert!(t
        .lookup(&k, 0, &g)
        .is_some_and(|(f, r)| std::ptr::eq(f, c) && !r));
    assert!(t.remove(c));
    assert_eq!(t.index_sizes().0, 0);
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u16, u16, bool),
    Remove(u16),
    Lookup(u16, u16),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u16..600, 0u16..600, any::<bool>()).prop_map(|(a, b, n)| Op::Insert(a, b, n)),
        2 => (0u16..600).prop_map(Op::Remove),
        2 => (0u16..600, 0u16..600).prop_map(|(a, b)| Op::Lookup(a, b)),
    ]
}

fn tuple(i: u16) -> ConnKey {
    let mut k = key((i % 200) as u8, 1000 + i);
    k.dst.port = 53 + (i % 3);
    k
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    // The table against a plain map of tuples: every lookup (by either
    // tuple, by handle), through growth, rebuilds and tombstones.
    #[test]
    fn agrees_with_a_map(ops in prop::collection::vec(op(), 1..1500), shards in 1usize..5) {
        let t = Table::new(shards);
        let g = pin();
        // original tuple id -> (reply tuple, handle)
        let mut model: HashMap<u16, (ConnKey, u64)> = HashMap::new();
        let mut owner: HashMap<ConnKey, (u16, bool)> = HashMap::new();
        for o in ops {
            match o {
                Op::Insert(a, b, nat) => {
                    let k = tuple(a);
                    let mut rev = tuple(b).reverse();
                    if !nat {
                        rev = k.reverse();
                    }
                    let taken = owner.contains_key(&k) || owner.contains_key(&rev);
                    let r = insert(&t, conn(k, rev, u64::MAX), 0, &g);
                    prop_assert_eq!(r.is_ok(), !taken);
                    if let Ok(c) = r {
                        model.insert(a, (rev, c.handle()));
                        owner.insert(k, (a, false));
                        owner.entry(rev).or_insert((a, true));
                    }
                }
                Op::Remove(a) => {
                    let k = tuple(a);
                    if let Some((c, r)) = t.lookup(&k, 0, &g) {
                        prop_assert!(!r || owner.get(&k).is_some_and(|o| o.1));
                        let (id, _) = owner[&k];
                        let (rev, _) = model[&id];
                        prop_assert!(t.remove(c));
                        owner.remove(&tuple(id));
                        owner.remove(&rev);
                        model.remove(&id);
                    } else {
                        prop_assert!(!owner.contains_key(&k));
                    }
                }
                Op::Lookup(a, b) => {
                    for k in [tuple(a), tuple(b).reverse()] {
                        let got = t.lookup(&k, 0, &g);
                        match owner.get(&k) {
                            None => prop_assert!(got.is_none()),
                            Some(&(id, reply)) => {
                                let (c, r) = got.expect("present");
                                prop_assert_eq!(r, reply);
                                prop_assert_eq!(c.key, tuple(id));
                                let h = model[&id].1;
                                prop_assert!(t.by_handle(h, &g).is_some_and(|x| std::ptr::eq(x, c)));
                            }
                        }
                    }
                }
            }
        }
        // One entry per connection, two when NAT made its reply tuple
        // other than the original reversed.
        let want: usize = model
            .iter()
            .map(|(id, (rev, _))| if *rev != tuple(*id).reverse() { 2 } else { 1 })
            .sum();
        let (entries, cap, _) = t.index_sizes();
        prop_assert_eq!(entries, want);
        prop_assert!(entries * 4 <= cap * 3);
        prop_assert_eq!(t.all(&g).len(), model.len());
    }
}

// Readers on other threads while one thread creates and removes
// connections: a stable connection is always found, by both tuples
// and its handle; no lookup ever returns a connection that does not
// own the tuple it was asked for.
#[test]
fn readers_never_see_a_wrong_connection() {
    let t = Arc::new(Table::new(4));
    let stable: Vec<ConnKey> = (0..64).map(|i| key(1, i)).collect();
    let mut handles = Vec::new();
    {
        let g = pin();
        for k in &stable {
            let c = insert(&t, conn(*k, k.reverse(), u64::MAX), 0, &g).expect("stable");
            handles.push(c.handle());
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (t, stop, stable, handles) = (
                Arc::clone(&t),
                Arc::clone(&stop),
                stable.clone(),
                handles.clone(),
            );
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) || n < 1000 {
                    let g = pin();
                    for (i, k) in stable.iter().enumerate() {
                        let (c, rep) = t.lookup(k, 0, &g).expect("stable found");
                        assert!(!rep && c.key == *k);
                        let (c2, rep) = t.lookup(&k.reverse(), 0, &g).expect("reply found");
                        assert!(rep && std::ptr::eq(c, c2));
                        assert!(t
                            .by_handle(handles[i], &g)
                            .is_some_and(|x| std::ptr::eq(x, c)));
                    }
                    for j in 0..256u16 {
                        let k = key(2 + r, j);
                        if let Some((c, rep)) = t.lookup(&k, 0, &g) {
                            assert!(if rep { c.rev_key() == k } else { c.key == k });
                        }
                    }
                    n += 1;
                }
            })
        })
        .collect();
    for round in 0..40u16 {
        let g = pin();
        let mut made = Vec::new();
        for j in 0..256u16 {
            for r in 0..2u8 {
                let k = key(2 + r, j);
                if let Ok(c) = insert(&t, conn(k, k.reverse(), u64::MAX), 0, &g) {
                    made.push(c);
                }
            }
        }
        for c in made.iter().skip(usize::from(round % 2)).step_by(2) {
            assert!(t.remove(c));
        }
        for c in made.iter().skip(1 - usize::from(round % 2)).step_by(2) {
            assert!(t.remove(c));
        }
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().expect("reader");
    }
    assert_eq!(t.all(&pin()).len(), stable.len());
}
