use super::*;
use flowpath_odp::DpAction;

fn k(x: u64) -> FlowKey {
    let mut k = FlowKey::zero();
    k.set_in_port(1);
    k.w[1] = x;
    k
}

fn m() -> FlowMask {
    let mut m = FlowMask::catchall();
    m.w[1] = 0xff;
    m
}

fn ins(t: &mut MegaflowTable, key: u64, actions: DpActions, now: u64) -> MegaflowRef {
    t.insert(&k(key), &m(), actions, now).unwrap().0
}

#[test]
fn insert_get_remove_reuse() {
    let mut t = MegaflowTable::new();
    let a = ins(&mut t, 0x1ff, vec![DpAction::Output(1)], 5);
    let _keep = ins(&mut t, 0x1, vec![], 5);
    assert_eq!(t.get(a).unwrap().key.w[1], 0xff, "key is masked");
    assert_eq!(t.get(a).unwrap().in_port, 1);
    assert_eq!(t.get(a).unwrap().mask, m());
    assert_eq!(t.len(), 2);
    assert!(t.get(a).unwrap().matches(&k(0x3ff)));
    assert!(!t.get(a).unwrap().matches(&k(0x3fe)));
    assert!(t.matches(a.index, &k(0x3ff)));
    assert!(!t.matches(a.index, &k(0x3fe)));
    assert_eq!(t.live_at(a.index), Some(a));
    assert_eq!(
        t.insert(&k(0x2ff), &m(), vec![], 6),
        Err(InstallError::Duplicate(a, t.get(a).unwrap().subtable))
    );
    assert!(t.remove(a));
    assert!(!t.is_live(a));
    assert!(
        !t.matches(a.index, &k(0x3ff)),
        "a free slot matches nothing"
    );
    assert!(!t.remove(a), "double remove is a no-op");
    assert_eq!(t.len(), 1);
    let b = ins(&mut t, 2, vec![], 6);
    assert_eq!(b.index, a.index, "slot reused");
    assert_ne!(b.gen, a.gen);
    assert!(!t.is_live(a), "old ref stays dead after reuse");
    assert!(t.is_live(b));
    assert!(!t.is_live(MegaflowRef::NONE));
    assert_eq!(t.live_refs().count(), 2);
}

#[test]
fn stats_accumulate() {
    let mut t = MegaflowTable::new();
    let a = ins(&mut t, 1, vec![], 5);
    assert_eq!(t.stats(a).unwrap().used_ms, None);
    assert_eq!(t.last_used_ms(a), Some(5));
    t.account(a, 60, 0x02, 7);
    t.account(a, 40, 0x10, 9);
    let s = t.stats(a).unwrap();
    assert_eq!(
        (s.packets, s.bytes, s.used_ms, s.created_ms, s.tcp_flags),
        (2, 100, Some(9), 5, 0x12)
    );
    assert!(t.set_actions(a, vec![DpAction::Output(3)]));
    assert_eq!(t.get(a).unwrap().actions, &[DpAction::Output(3)]);
    assert_eq!(t.actions(a), &[DpAction::Output(3)]);
}

#[test]
fn action_lists_are_shared_and_freed_with_their_last_megaflow() {
    let mut t = MegaflowTable::new();
    let out = |p| vec![DpAction::Output(p)];
    let refs: Vec<MegaflowRef> = (0..100)
        .map(|i| ins(&mut t, i, out(i as u32 % 3), 0))
        .collect();
    assert_eq!(t.memory().action_lists, 3);
    let same = |a: MegaflowRef, b: MegaflowRef| std::ptr::eq(t.actions(a), t.actions(b));
    assert!(same(refs[0], refs[3]), "equal lists are one list");
    let shared = t.actions_shared(refs[0]).unwrap();
    assert!(Arc::ptr_eq(&shared, &t.actions_shared(refs[3]).unwrap()));
    assert!(!same(refs[0], refs[1]));
    // Revalidation moves one megaflow to a new list, and back.
    assert!(t.set_actions(refs[0], out(7)));
    assert_eq!(t.memory().action_lists, 4);
    assert!(t.set_actions(refs[0], out(0)));
    assert_eq!(t.memory().action_lists, 3);
    for r in refs.iter().filter(|r| r.index % 3 == 1) {
        assert!(t.remove(*r));
    }
    assert_eq!(
        t.memory().action_lists,
        2,
        "output:1's list went with its last megaflow"
    );
    assert_eq!(t.actions(refs[2]), &[DpAction::Output(2)]);
}

#[test]
fn removal_keeps_every_slot_pointing_at_its_entry() {
    // Removing from the middle moves the subtable's last entry; the
    // moved megaflow's slot must follow.
    let mut t = MegaflowTable::new();
    let refs: Vec<MegaflowRef> = (0..64).map(|i| ins(&mut t, i, vec![], 0)).collect();
    for r in refs.iter().step_by(2) {
        assert!(t.remove(*r));
    }
    for (i, r) in refs.iter().enumerate() {
        if i % 2 == 1 {
            assert!(t.matches(r.index, &k(i as u64)), "megaflow {i}");
            assert_eq!(t.get(*r).unwrap().key.w[1], i as u64);
        } else {
            assert!(t.get(*r).is_none());
        }
    }
}

#[test]
fn long_keys_spill_and_come_back() {
    // A mask of ten words: keys longer than the hot line's six.
    let mut wide = FlowMask::catchall();
    for w in 0..10 {
        wide.w[w] = u64::MAX;
    }
    let key = |i: u64| {
        let mut k = k(i);
        for w in 2..10 {
            k.w[w] = i * 31 + w as u64;
        }
        k
    };
    let mut t = MegaflowTable::new();
    let short = ins(&mut t, 0xfe, vec![], 0);
    let refs: Vec<MegaflowRef> = (0..100)
        .map(|i| t.insert(&key(i), &wide, vec![], 0).unwrap().0)
        .collect();
    for r in refs.iter().step_by(3) {
        assert!(t.remove(*r));
    }
    // Freed spill records are reused.
    let more: Vec<MegaflowRef> = (100..120)
        .map(|i| t.insert(&key(i), &wide, vec![], 0).unwrap().0)
        .collect();
    for (i, r) in (0..100).zip(&refs).chain((100..120).zip(&more)) {
        let live = i >= 100 || i % 3 != 0;
        assert_eq!(t.matches(r.index, &key(i)), live, "megaflow {i}");
        assert_eq!(
            t.dpcls_lookup_one(1, &key(i)).map(|x| x.0),
            live.then_some(r.index)
        );
        if live {
            assert_eq!(t.get(*r).unwrap().key, key(i));
            assert_eq!(t.get(*r).unwrap().mask, wide);
        }
    }
    assert!(t.matches(short.index, &k(0xfe)));
    assert!(t.memory().records >= 80 * 128, "{:?}", t.memory());
}

#[test]
fn emptying_the_table_frees_it_and_keeps_old_refs_dead() {
    let mut t = MegaflowTable::new();
    let refs: Vec<MegaflowRef> = (0..200).map(|i| ins(&mut t, i, vec![], 0)).collect();
    assert!(t.memory().total() > 200 * 16);
    for r in &refs {
        assert!(t.remove(*r));
    }
    assert_eq!(t.memory().total(), 0, "{:?}", t.memory());
    let again: Vec<MegaflowRef> = (0..200).map(|i| ins(&mut t, i, vec![], 0)).collect();
    assert!(
        refs.iter().all(|r| !t.is_live(*r)),
        "no old ref comes back to life"
    );
    assert!(again.iter().all(|r| t.is_live(*r)));
    t.clear();
    assert!(t.is_empty() && again.iter().all(|r| !t.is_live(*r)));
}
