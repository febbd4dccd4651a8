//! The PMD side of the rings against guest memory laid out by hand: a
//! burst to the guest mixes frames kept for writing together with one
//! that needs a chain of two buffers, and one that finds no buffer; a
//! burst from the guest mixes one-buffer chains (walked first, copied out
//! together) with a two-buffer chain and a malformed one. Every frame
//! must arrive whole and in order, every chain go back on the used ring
//! in the order it was offered, and the counters add up.

use super::*;
use crate::vhost::memory::GuestMemory;
use crate::vhost::ring::tests::{put_descs, AVAIL, D, DESC, MEM, USED};
use crate::vhost::ring::{RingAddrs, DESC_F_NEXT, DESC_F_WRITE};

const SIZE: u16 = 16;

/// Guest memory with descriptor table `table` and `heads` offered on the
/// available ring, `fill` written at the given addresses.
fn image(table: &[D], heads: &[u16], fill: &[(u64, &[u8])]) -> Vec<u8> {
    let mut m = vec![0u8; MEM];
    put_descs(&mut m, DESC, table);
    let a = AVAIL as usize;
    m[a + 2..a + 4].copy_from_slice(&(heads.len() as u16).to_le_bytes());
    for (i, h) in heads.iter().enumerate() {
        m[a + 4 + 2 * i..a + 6 + 2 * i].copy_from_slice(&h.to_le_bytes());
    }
    for (at, bytes) in fill {
        m[*at as usize..*at as usize + bytes.len()].copy_from_slice(bytes);
    }
    m
}

/// A running slot over `m` (12-byte headers, no merged buffers) and the
/// guest memory, to read back.
fn slot_over(m: Vec<u8>) -> (Arc<QueueSlot>, Arc<GuestMemory>) {
    let mem = Arc::new(GuestMemory::from_owned(vec![(0, m.into_boxed_slice())]).unwrap());
    let vring = Vring::new(
        mem.clone(),
        RingAddrs {
            desc: DESC,
            avail: AVAIL,
            used: USED,
        },
        SIZE,
        0,
        false,
    )
    .unwrap();
    let slot = Arc::new(QueueSlot::new("test").unwrap());
    slot.install(ActiveRing {
        vring,
        call: -1,
        hdr_len: 12,
        mergeable: false,
    });
    (slot, mem)
}

/// `len` bytes of guest memory at `at`.
fn read(mem: &GuestMemory, at: u64, len: usize) -> Vec<u8> {
    let p = mem.gpa(at, len as u64).unwrap();
    // SAFETY: `gpa` checked the range lies in the (owned) memory, which
    // nothing writes while the test reads.
    unsafe { std::slice::from_raw_parts(p, len).to_vec() }
}

/// The used ring: its index and its first `n` entries (id, len).
fn used(mem: &GuestMemory, n: usize) -> (u16, Vec<(u32, u32)>) {
    let r = read(mem, USED, 4 + 8 * n);
    let idx = u16::from_le_bytes([r[2], r[3]]);
    let e = (0..n)
        .map(|i| {
            let o = 4 + 8 * i;
            (
                u32::from_le_bytes(r[o..o + 4].try_into().unwrap()),
                u32::from_le_bytes(r[o + 4..o + 8].try_into().unwrap()),
            )
        })
        .collect();
    (idx, e)
}

fn frame(tag: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| tag ^ (i as u8)).collect()
}

#[test]
fn a_burst_to_the_guest_arrives_whole_and_in_order() {
    // Heads 0, 1, 3, 4: one 256-byte buffer each; head 2: 40 bytes chained
    // to 256 more (a frame of 60 bytes and its header need both).
    let table: Vec<D> = vec![
        (0x2000, 0x100, DESC_F_WRITE, 0),
        (0x2100, 0x100, DESC_F_WRITE, 0),
        (0x2200, 40, DESC_F_WRITE | DESC_F_NEXT, 5),
        (0x2300, 0x100, DESC_F_WRITE, 0),
        (0x2400, 0x100, DESC_F_WRITE, 0),
        (0x2500, 0x100, DESC_F_WRITE, 0),
    ];
    let (slot, mem) = slot_over(image(&table, &[0, 1, 2, 3, 4], &[]));
    let mut tx = VhostTx::new(vec![slot], 0);
    let frames: Vec<Vec<u8>> = (0..6).map(|i| frame(0x10 * (i + 1), 60)).collect();
    let mut it = frames.iter().map(|f| TxFrame {
        data: f,
        vnet: None,
        timestamp_ns: 0,
    });
    // Five buffers for six frames: the last finds none.
    assert_eq!(tx.send(&mut it), 5);
    let s = tx.stats();
    assert_eq!((s.packets, s.dropped, s.errors), (5, 1, 0));
    let hdr = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0];
    for (i, at) in [(0, 0x2000), (1, 0x2100), (3, 0x2300), (4, 0x2400)] {
        let b = read(&mem, at, 72);
        assert_eq!(&b[..12], &hdr, "frame {i}'s header");
        assert_eq!(&b[12..], &frames[i][..], "frame {i}");
    }
    // Frame 2: its header and 28 bytes in the first buffer, the rest in
    // the second.
    let mut b = read(&mem, 0x2200, 40);
    b.extend(read(&mem, 0x2500, 32));
    assert_eq!(&b[..12], &hdr);
    assert_eq!(&b[12..], &frames[2][..]);
    let (idx, e) = used(&mem, 5);
    assert_eq!(idx, 5);
    assert_eq!(e, vec![(0, 72), (1, 72), (2, 72), (3, 72), (4, 72)]);
}

#[test]
fn a_burst_from_the_guest_is_taken_whole_and_in_order() {
    let hdr = [0u8; 12];
    let (a, b, c, d) = (
        frame(0xa0, 60),
        frame(0xb0, 100),
        frame(0xc0, 64),
        frame(0xd0, 70),
    );
    let one = |f: &[u8]| [&hdr[..], f].concat();
    let (a1, c1, d1) = (one(&a), one(&c), one(&d));
    // Head 0: A in one buffer; head 1: B's header and 20 bytes, then the
    // rest (head 6); head 2: a zero-length buffer (refused); head 3: C;
    // head 4: D.
    let table: Vec<D> = vec![
        (0x2000, a1.len() as u32, 0, 0),
        (0x2100, 32, DESC_F_NEXT, 6),
        (0x2200, 0, 0, 0),
        (0x2300, c1.len() as u32, 0, 0),
        (0x2400, d1.len() as u32, 0, 0),
        (0x2500, 8, 0, 0),
        (0x2600, 80, 0, 0),
    ];
    let b1 = [&hdr[..], &b[..20]].concat();
    let fill: Vec<(u64, &[u8])> = vec![
        (0x2000, &a1),
        (0x2100, &b1),
        (0x2600, &b[20..]),
        (0x2300, &c1),
        (0x2400, &d1),
    ];
    let (slot, mem) = slot_over(image(&table, &[0, 1, 2, 3, 4], &fill));
    let mut rx = VhostRx::new("test", slot);
    let mut got: Vec<Vec<u8>> = Vec::new();
    let n = rx.recv(32, &mut |f, _| got.push(f.to_vec())).expect("recv");
    assert_eq!(n, 4);
    assert_eq!(got, vec![a.clone(), b.clone(), c.clone(), d.clone()]);
    let s = rx.stats();
    assert_eq!((s.packets, s.errors), (4, 1));
    assert_eq!(s.bytes, (a.len() + b.len() + c.len() + d.len()) as u64);
    let (idx, e) = used(&mem, 5);
    assert_eq!(idx, 5);
    assert_eq!(e, vec![(0, 0), (1, 0), (2, 0), (3, 0), (4, 0)]);
    // Nothing more: the next call finds the ring empty.
    assert_eq!(rx.recv(32, &mut |_, _| panic!("no frame")).unwrap(), 0);
}

#[test]
fn a_burst_from_the_guest_stops_at_max() {
    let hdr = [0u8; 12];
    let frames: Vec<Vec<u8>> = (0..6).map(|i| [&hdr[..], &frame(i, 60)].concat()).collect();
    let table: Vec<D> = (0..6).map(|i| (0x2000 + 0x100 * i, 72, 0, 0)).collect();
    let fill: Vec<(u64, &[u8])> = (0..6)
        .map(|i| (0x2000 + 0x100 * i as u64, &frames[i][..]))
        .collect();
    let (slot, mem) = slot_over(image(&table, &[0, 1, 2, 3, 4, 5], &fill));
    let mut rx = VhostRx::new("test", slot);
    let mut got = Vec::new();
    assert_eq!(rx.recv(4, &mut |f, _| got.push(f[0])).unwrap(), 4);
    assert_eq!(used(&mem, 4).0, 4);
    assert_eq!(rx.recv(4, &mut |f, _| got.push(f[0])).unwrap(), 2);
    assert_eq!(got, (0..6u8).collect::<Vec<_>>());
    assert_eq!(used(&mem, 6), (6, (0..6).map(|i| (i, 0)).collect()));
}
