//! The ring walk: unit tests of each refusal, and a property test that
//! compares every walk with rust-vmm's `virtio-queue` (the oracle): where
//! the oracle's chain ends cleanly ours yields the same buffers or refuses
//! it for one of the rules `virtio-queue` leaves to its users (zero or
//! huge lengths, buffers outside memory, direction, a chained indirect
//! descriptor); where the oracle's chain is cut short (a loop, a `next`
//! out of range, a bad indirect table), ours is refused.

use super::*;
use proptest::prelude::*;
use virtio_queue::{Queue, QueueOwnedT, QueueT};
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

pub(crate) const MEM: usize = 0x10000;
pub(crate) const DESC: u64 = 0x0;
const INDIRECT: u64 = 0x1000;
pub(crate) const AVAIL: u64 = 0x800;
pub(crate) const USED: u64 = 0xc00;

pub(crate) type D = (u64, u32, u16, u16);
/// A refusal case: name, table, indirect table, head, the error.
type Case = (&'static str, Vec<D>, Vec<D>, u16, ChainError);

pub(crate) fn put_descs(mem: &mut [u8], at: u64, descs: &[D]) {
    for (i, (addr, len, flags, next)) in descs.iter().enumerate() {
        let o = at as usize + 16 * i;
        mem[o..o + 8].copy_from_slice(&addr.to_le_bytes());
        mem[o + 8..o + 12].copy_from_slice(&len.to_le_bytes());
        mem[o + 12..o + 14].copy_from_slice(&flags.to_le_bytes());
        mem[o + 14..o + 16].copy_from_slice(&next.to_le_bytes());
    }
}

/// Guest memory with `table` at DESC, `indirect` at INDIRECT, and `head`
/// offered once on the available ring.
fn image(table: &[D], indirect: &[D], head: u16) -> Vec<u8> {
    let mut m = vec![0u8; MEM];
    // Valid descriptors around the tables, so a walk that strays past a
    // table's end finds something it would accept.
    let filler = [(0x2000u64, 8u32, 0u16, 0u16); 128];
    put_descs(&mut m, DESC, &filler);
    put_descs(&mut m, INDIRECT, &filler[..64]);
    put_descs(&mut m, INDIRECT + 0x400, &filler[..64]);
    put_descs(&mut m, DESC, table);
    put_descs(&mut m, INDIRECT, indirect);
    let a = AVAIL as usize;
    m[a + 2..a + 4].copy_from_slice(&1u16.to_le_bytes());
    m[a + 4..a + 6].copy_from_slice(&head.to_le_bytes());
    m
}

fn ring_over(m: Vec<u8>, size: u16) -> Vring {
    let mem = GuestMemory::from_owned(vec![(0, m.into_boxed_slice())]).unwrap();
    Vring::new(
        Arc::new(mem),
        RingAddrs {
            desc: DESC,
            avail: AVAIL,
            used: USED,
        },
        size,
        0,
        false,
    )
    .unwrap()
}

/// Ours: the chain's (gpa, len) list or the refusal.
fn ours(m: &[u8], size: u16, writable: bool) -> Result<Vec<(u64, u32)>, ChainError> {
    let mut r = ring_over(m.to_vec(), size);
    assert_eq!(r.pending(), Ok(1));
    let head = r.take_head();
    let base = r.mem().gpa(0, 1).unwrap() as u64;
    let mut segs = Vec::with_capacity(MAX_SEGS);
    r.walk(head, writable, u64::MAX, &mut segs)?;
    Ok(segs.iter().map(|s| (s.host as u64 - base, s.len)).collect())
}

/// The oracle: the descriptors `virtio-queue` yields, and whether the
/// chain ended cleanly (the last one has no NEXT).
fn oracle(m: &[u8], size: u16) -> (Vec<(u64, u32, u16)>, bool) {
    let mem: GuestMemoryMmap<()> = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), MEM)]).unwrap();
    mem.write_slice(m, GuestAddress(0)).unwrap();
    let mut q = Queue::new(size).unwrap();
    q.set_size(size);
    q.set_desc_table_address(Some(DESC as u32), Some(0));
    q.set_avail_ring_address(Some(AVAIL as u32), Some(0));
    q.set_used_ring_address(Some(USED as u32), Some(0));
    q.set_ready(true);
    let mut it = q.iter(&mem).unwrap();
    let chain = it.next().unwrap();
    let v: Vec<(u64, u32, u16)> = chain.map(|d| (d.addr().0, d.len(), d.flags())).collect();
    let clean = v.last().is_some_and(|d| d.2 & DESC_F_NEXT == 0);
    (v, clean)
}

#[test]
fn a_plain_chain_and_an_indirect_one_are_walked() {
    let t = [(0x2000, 100, DESC_F_NEXT, 1), (0x3000, 50, 0, 0)];
    let m = image(&t, &[], 0);
    assert_eq!(ours(&m, 8, false), Ok(vec![(0x2000, 100), (0x3000, 50)]));
    let t = [(INDIRECT, 32, DESC_F_INDIRECT, 0)];
    let ind = [(0x4000, 10, DESC_F_NEXT, 1), (0x5000, 20, 0, 0)];
    let m = image(&t, &ind, 0);
    assert_eq!(ours(&m, 8, false), Ok(vec![(0x4000, 10), (0x5000, 20)]));
}

#[test]
fn each_rule_refuses_its_chain() {
    let cases: Vec<Case> = vec![
        ("head", vec![], vec![], 9, ChainError::HeadIndex),
        (
            "next",
            vec![(0x2000, 1, DESC_F_NEXT, 8)],
            vec![],
            0,
            ChainError::NextIndex,
        ),
        (
            "loop",
            vec![(0x2000, 1, DESC_F_NEXT, 1), (0x2000, 1, DESC_F_NEXT, 0)],
            vec![],
            0,
            ChainError::Loop,
        ),
        (
            "zero",
            vec![(0x2000, 0, 0, 0)],
            vec![],
            0,
            ChainError::ZeroLen,
        ),
        (
            "huge",
            vec![(0x2000, MAX_DESC_LEN + 1, 0, 0)],
            vec![],
            0,
            ChainError::HugeLen,
        ),
        (
            "outside",
            vec![(MEM as u64 - 4, 8, 0, 0)],
            vec![],
            0,
            ChainError::OutsideMemory,
        ),
        (
            "wraps",
            vec![(u64::MAX - 2, 8, 0, 0)],
            vec![],
            0,
            ChainError::OutsideMemory,
        ),
        (
            "direction",
            vec![(0x2000, 8, DESC_F_WRITE, 0)],
            vec![],
            0,
            ChainError::Direction,
        ),
        (
            "ind len",
            vec![(INDIRECT, 17, DESC_F_INDIRECT, 0)],
            vec![],
            0,
            ChainError::BadIndirect,
        ),
        (
            "ind empty",
            vec![(INDIRECT, 0, DESC_F_INDIRECT, 0)],
            vec![],
            0,
            ChainError::BadIndirect,
        ),
        (
            "ind outside",
            vec![(MEM as u64 - 16, 32, DESC_F_INDIRECT, 0)],
            vec![],
            0,
            ChainError::BadIndirect,
        ),
        (
            "ind next",
            vec![(INDIRECT, 16, DESC_F_INDIRECT | DESC_F_NEXT, 1)],
            vec![(0x2000, 8, 0, 0)],
            0,
            ChainError::BadIndirect,
        ),
        (
            "nested",
            vec![(INDIRECT, 16, DESC_F_INDIRECT, 0)],
            vec![(INDIRECT, 16, DESC_F_INDIRECT, 0)],
            0,
            ChainError::NestedIndirect,
        ),
        (
            "ind loop",
            vec![(INDIRECT, 32, DESC_F_INDIRECT, 0)],
            vec![(0x2000, 8, DESC_F_NEXT, 1), (0x2000, 8, DESC_F_NEXT, 0)],
            0,
            ChainError::Loop,
        ),
        (
            "ind next out",
            vec![(INDIRECT, 32, DESC_F_INDIRECT, 0)],
            vec![(0x2000, 8, DESC_F_NEXT, 2)],
            0,
            ChainError::NextIndex,
        ),
    ];
    for (name, t, ind, head, want) in cases {
        let m = image(&t, &ind, head);
        assert_eq!(ours(&m, 8, false), Err(want), "{name}");
    }
}

#[test]
fn an_avail_index_jump_breaks_the_ring() {
    let mut m = image(&[(0x2000, 8, 0, 0)], &[], 0);
    m[AVAIL as usize + 2..AVAIL as usize + 4].copy_from_slice(&9u16.to_le_bytes());
    let mut r = ring_over(m, 8);
    assert_eq!(r.pending(), Err(ChainError::AvailIdx));
    assert!(r.is_broken());
    assert_eq!(r.pending(), Ok(0));
}

#[test]
fn used_entries_and_interrupt_decisions() {
    let m = image(&[(0x2000, 8, 0, 0)], &[], 0);
    let mut r = ring_over(m, 8);
    r.pending().unwrap();
    let h = r.take_head();
    r.push_used(h, 8);
    assert!(r.publish(), "flags 0: interrupt");
    assert!(!r.publish(), "nothing new");
    assert!(need_event(5, 6, 5));
    assert!(!need_event(7, 6, 5));
    assert!(need_event(0xffff, 0, 0xfffe), "wraps");
}

fn desc_strategy(size: u16) -> impl Strategy<Value = D> {
    let addr = prop_oneof![
        8 => 0x2000u64..0xf000,
        1 => Just(INDIRECT),
        1 => any::<u64>(),
    ];
    let len = prop_oneof![8 => 1u32..2048, 1 => Just(0u32), 1 => any::<u32>(), 1 => (1u32..5).prop_map(|k| 16 * k)];
    let flags = prop_oneof![
        6 => Just(DESC_F_NEXT),
        4 => Just(0),
        1 => Just(DESC_F_INDIRECT),
        1 => Just(DESC_F_INDIRECT | DESC_F_NEXT),
        1 => Just(DESC_F_WRITE | DESC_F_NEXT),
    ];
    (addr, len, flags, 0..size + 2)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn the_walk_agrees_with_virtio_queue(
        size in prop_oneof![Just(4u16), Just(8), Just(16)],
        table in proptest::collection::vec(desc_strategy(16), 16),
        ind in proptest::collection::vec(desc_strategy(6), 6),
        head in 0u16..16,
    ) {
        let head = head % size;
        let m = image(&table[..usize::from(size)], &ind, head);
        let (o, clean) = oracle(&m, size);
        match ours(&m, size, false) {
            Ok(segs) => {
                prop_assert!(clean, "ours accepted a chain the oracle cut: {o:?}");
                let o2: Vec<(u64, u32)> = o.iter().map(|d| (d.0, d.1)).collect();
                prop_assert_eq!(segs, o2);
            }
            Err(e) => {
                let extra = o.iter().any(|d| {
                    d.1 == 0
                        || d.1 > MAX_DESC_LEN
                        || d.0.checked_add(u64::from(d.1)).is_none_or(|end| end > MEM as u64)
                        || d.2 & DESC_F_WRITE != 0
                });
                // Rules virtio-queue leaves to its users: a chained
                // indirect descriptor, an indirect table that virtio-queue
                // reads and we find outside memory or too large.
                let indirect_rule = matches!(e, ChainError::BadIndirect);
                prop_assert!(!clean || extra || indirect_rule,
                    "ours refused ({e:?}) a clean chain: {o:?}");
            }
        }
    }
}

/// Dirty logging: a receive chain written across a page boundary marks
/// exactly the pages written, and the used area's page when its address
/// was given; nothing while logging is off.
#[test]
fn writes_into_guest_memory_are_logged_by_page() {
    use crate::vhost::log::{DirtyLog, LOG_PAGE};
    let t = [
        (0x2ff0, 0x20, DESC_F_WRITE | DESC_F_NEXT, 1),
        (0x7000, 0x100, DESC_F_WRITE, 0),
    ];
    // (logging, the used area's address, the pages marked in the end)
    let cases: [(bool, Option<u64>, &[u64]); 3] = [
        (false, Some(USED), &[]),
        (true, None, &[2, 3, 7]),
        // The used area (0xc00) lives in page 0.
        (true, Some(USED), &[0, 2, 3, 7]),
    ];
    for (logging, used, want) in cases {
        let mut r = ring_over(image(&t, &[], 0), 8);
        let log = Arc::new(DirtyLog::owned(MEM / LOG_PAGE as usize / 8));
        if logging {
            r.set_log(Some(log.clone()), used);
        }
        assert_eq!(r.pending(), Ok(1));
        let head = r.take_head();
        let mut segs = Vec::with_capacity(MAX_SEGS);
        r.walk(head, true, u64::MAX, &mut segs).unwrap();
        // From offset 8: 0x2ff8..0x3000 (page 2), 0x3000..0x3010 (page 3),
        // then 8 bytes into the second buffer (page 7).
        let n = r.scatter(&segs, 8, &[&[1u8; 16], &[2u8; 16]]);
        assert_eq!(n, 32);
        r.push_used(head, n as u32);
        r.publish();
        assert_eq!(log.marked(), want, "logging {logging}, used {used:?}");
        // Logging stops when the log is taken away.
        r.set_log(None, used);
        let log2 = Arc::new(DirtyLog::owned(MEM / LOG_PAGE as usize / 8));
        r.scatter(&segs, 0, &[&[3u8; 8]]);
        r.publish();
        assert_eq!(log2.marked(), Vec::<u64>::new());
        assert_eq!(log.marked(), want);
    }
}
