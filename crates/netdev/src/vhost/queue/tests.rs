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
    slot_with(m, Offloads::default())
}

/// [`slot_over`] with `offloads` negotiated.
fn slot_with(m: Vec<u8>, offloads: Offloads) -> (Arc<QueueSlot>, Arc<GuestMemory>) {
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
        ring: AnyRing::Split(vring),
        cfg: RingCfg {
            call: -1,
            hdr_len: 12,
            mergeable: false,
            offloads,
        },
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

/// Ethernet + IPv4 + TCP with `payload` bytes, its TCP checksum left
/// partial (the pseudo-header sum, as a guest leaves it for the device).
fn partial_tcp4(payload: usize) -> Vec<u8> {
    let mut f = Vec::new();
    etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .tcp(1000, 80, 7, 65535)
        .ack(1)
        .psh()
        .write(&mut f, &(0..payload).map(|i| i as u8).collect::<Vec<_>>())
        .unwrap();
    let len = (f.len() - 34) as u32;
    let ps = fold(words(&f[26..34]) + 6 + len);
    f[50..52].copy_from_slice(&ps.to_be_bytes());
    f
}

fn words(b: &[u8]) -> u32 {
    b.chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum()
}

fn fold(mut s: u32) -> u16 {
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// Whether an Ethernet/IPv4/TCP frame's IPv4 and TCP checksums are right.
fn tcp4_checksums_ok(f: &[u8]) -> bool {
    let tcp_len = f.len() - 34;
    fold(words(&f[14..34])) == 0xffff
        && fold(words(&f[26..34]) + 6 + tcp_len as u32 + words(&f[34..])) == 0xffff
}

const NEEDS_CSUM: VnetHdr = VnetHdr {
    flags: F_NEEDS_CSUM,
    gso_type: GSO_NONE,
    hdr_len: 0,
    gso_size: 0,
    csum_start: 34,
    csum_offset: 16,
};

#[test]
fn offloads_follow_the_negotiated_features() {
    use crate::vhost::protocol::feature as f;
    let all = Offloads::of(f::OFFERED);
    assert_eq!(
        all,
        Offloads {
            from_guest: true,
            host_tso4: true,
            host_tso6: true,
            host_ecn: true,
            csum: true,
            tso4: true,
            tso6: true,
            ecn: true,
        }
    );
    // ECN without segmentation is not on either.
    let ecn_only =
        Offloads::of(f::NET_CSUM | f::NET_GUEST_CSUM | f::NET_GUEST_ECN | f::NET_HOST_ECN);
    assert!(!ecn_only.ecn && !ecn_only.host_ecn);
    // Segmentation without the checksum feature it depends on is not on.
    let bare = Offloads::of(f::NET_GUEST_TSO4 | f::NET_HOST_TSO6 | f::VERSION_1);
    assert_eq!(bare, Offloads::default());
    let tso4 = VnetHdr {
        gso_type: GSO_TCPV4,
        gso_size: 1448,
        ..NEEDS_CSUM
    };
    let csum_only = Offloads::of(f::NET_GUEST_CSUM);
    assert!(csum_only.takes(&NEEDS_CSUM) && !csum_only.takes(&tso4));
    assert!(all.takes(&tso4));
    let ecn = VnetHdr {
        gso_type: GSO_TCPV4 | GSO_ECN,
        ..tso4
    };
    assert!(all.takes(&ecn));
    let no_ecn = Offloads::of(f::OFFERED & !f::NET_GUEST_ECN);
    assert!(
        no_ecn.takes(&tso4) && !no_ecn.takes(&ecn),
        "GUEST_ECN not negotiated"
    );
    assert!(!Offloads::default().takes(&NEEDS_CSUM));
}

#[test]
fn an_ecn_mark_needs_host_ecn() {
    use crate::vhost::protocol::feature as f;
    let tso4_ecn = VnetHdr {
        gso_type: GSO_TCPV4 | GSO_ECN,
        gso_size: 1448,
        ..NEEDS_CSUM
    };
    let all = Offloads::of(f::OFFERED);
    assert_eq!(all.check_guest(tso4_ecn, 3000), Ok(Some(tso4_ecn)));
    let no_ecn = Offloads::of(f::OFFERED & !f::NET_HOST_ECN);
    assert_eq!(no_ecn.check_guest(tso4_ecn, 3000), Err(()));
    // Unmarked super-frames and a mark on a frame that is not one (its
    // mark dropped) stay as before.
    let tso4 = VnetHdr {
        gso_type: GSO_TCPV4,
        ..tso4_ecn
    };
    assert_eq!(no_ecn.check_guest(tso4, 3000), Ok(Some(tso4)));
    let marked_plain = VnetHdr {
        gso_type: GSO_ECN,
        ..NEEDS_CSUM
    };
    assert_eq!(
        all.check_guest(marked_plain, 100),
        Ok(Some(NEEDS_CSUM)),
        "mark dropped"
    );
}

#[test]
fn a_guest_frame_brings_its_offload_state_checked() {
    let f = partial_tcp4(100);
    let h = |v: &VnetHdr| [&v.to_bytes()[..], &[1, 0]].concat();
    let tso6 = VnetHdr {
        gso_type: GSO_TCPV6,
        gso_size: 1400,
        ..NEEDS_CSUM
    };
    let tso4 = VnetHdr {
        gso_type: GSO_TCPV4,
        gso_size: 1448,
        hdr_len: 54,
        ..NEEDS_CSUM
    };
    let outside = VnetHdr {
        csum_start: (f.len() - 1) as u16,
        ..NEEDS_CSUM
    };
    let no_csum_gso = VnetHdr { flags: 0, ..tso4 };
    // Heads: partial checksum; plain; checksum place outside the frame;
    // TSO6 (not negotiated); TSO4; a super-frame without partial checksum.
    let chains: Vec<Vec<u8>> = [
        NEEDS_CSUM,
        VnetHdr::default(),
        outside,
        tso6,
        tso4,
        no_csum_gso,
    ]
    .iter()
    .map(|v| [h(v), f.clone()].concat())
    .collect();
    let table: Vec<D> = (0..chains.len())
        .map(|i| (0x2000 + 0x200 * i as u64, chains[i].len() as u32, 0, 0))
        .collect();
    let fill: Vec<(u64, &[u8])> = (0..chains.len())
        .map(|i| (0x2000 + 0x200 * i as u64, &chains[i][..]))
        .collect();
    let heads: Vec<u16> = (0..chains.len() as u16).collect();
    let offloads = Offloads {
        from_guest: true,
        host_tso4: true,
        ..Offloads::default()
    };
    let (slot, _mem) = slot_with(image(&table, &heads, &fill), offloads);
    let mut rx = VhostRx::new("test", slot);
    let mut got = Vec::new();
    rx.recv(32, &mut |d, m| got.push((d.to_vec(), m.vnet)))
        .unwrap();
    assert_eq!(
        got,
        vec![
            (f.clone(), Some(NEEDS_CSUM)),
            (f.clone(), None),
            (f.clone(), Some(tso4))
        ]
    );
    let s = rx.stats();
    assert_eq!((s.packets, s.errors), (3, 3));

    // A guest that did not negotiate `CSUM`: its headers are not read.
    let (slot, _mem) = slot_over(image(&table, &heads, &fill));
    let mut rx = VhostRx::new("test", slot);
    let mut plain = 0;
    rx.recv(32, &mut |_, m| plain += usize::from(m.vnet.is_none()))
        .unwrap();
    assert_eq!(plain, chains.len());
}

#[test]
fn a_guest_gets_offload_state_it_negotiated_and_finished_frames_otherwise() {
    let f = partial_tcp4(100);
    let gso = partial_tcp4(3000);
    let tso4 = VnetHdr {
        gso_type: GSO_TCPV4,
        hdr_len: 54,
        gso_size: 1448,
        ..NEEDS_CSUM
    };
    let table: Vec<D> = (0..6)
        .map(|i| (0x2000 + 0x1000 * i as u64, 0x1000, DESC_F_WRITE, 0))
        .collect();
    let heads: Vec<u16> = (0..6).collect();
    let send = |tx: &mut VhostTx, frames: &[(&[u8], VnetHdr)]| {
        let mut it = frames.iter().map(|(d, v)| TxFrame {
            data: d,
            vnet: Some(*v),
            timestamp_ns: 0,
        });
        tx.send(&mut it)
    };

    // GUEST_CSUM and GUEST_TSO4: both frames as they are, each header
    // saying what is left to do.
    let offloads = Offloads {
        csum: true,
        tso4: true,
        ..Offloads::default()
    };
    let (slot, mem) = slot_with(image(&table, &heads, &[]), offloads);
    let mut tx = VhostTx::new(vec![slot], 0);
    assert_eq!(send(&mut tx, &[(&f, NEEDS_CSUM), (&gso, tso4)]), 2);
    let b = read(&mem, 0x2000, 12 + f.len());
    assert_eq!(&b[..10], &NEEDS_CSUM.to_bytes());
    assert_eq!(&b[10..12], &[1, 0]);
    assert_eq!(&b[12..], &f[..]);
    let b = read(&mem, 0x3000, 12 + gso.len());
    assert_eq!(&b[..10], &tso4.to_bytes());
    assert_eq!(&b[12..], &gso[..]);

    // A guest without offloads: the checksum completed, the super-frame
    // cut into three segments, every header plain.
    let (slot, mem) = slot_over(image(&table, &heads, &[]));
    let mut tx = VhostTx::new(vec![slot], 0);
    assert_eq!(send(&mut tx, &[(&f, NEEDS_CSUM), (&gso, tso4)]), 2);
    assert_eq!(tx.stats().packets, 4);
    let (idx, e) = used(&mem, 4);
    assert_eq!(idx, 4);
    let mut payload = Vec::new();
    for (i, (id, len)) in e.iter().enumerate() {
        let at = 0x2000 + 0x1000 * u64::from(*id);
        let b = read(&mem, at, *len as usize);
        assert_eq!(&b[..12], &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0], "frame {i}");
        assert!(tcp4_checksums_ok(&b[12..]), "frame {i}'s checksums");
        if i == 0 {
            assert_eq!(b[12..].len(), f.len());
        } else {
            payload.extend_from_slice(&b[12 + 54..]);
        }
    }
    assert_eq!(payload, gso[54..]);
}
