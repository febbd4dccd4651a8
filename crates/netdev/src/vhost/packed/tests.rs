//! The packed ring against a driver written here from the specification
//! (virtio 1.1, 2.8: how a driver makes buffers available and reads used
//! ones): buffers of one to four descriptors and indirect ones, over many
//! laps of a small ring (a property test: every buffer comes back used
//! once, in order, with its id and length, whatever the mix), event
//! suppression, rewinding, the base a ring resumes from, and each rule
//! that stops the ring.

use super::*;
use crate::vhost::ring::{MAX_DESC_LEN, MAX_SEGS};
use proptest::prelude::*;

const MEM: usize = 0x10000;
const RING: u64 = 0x0;
const DRIVER: u64 = 0x800;
const DEVICE: u64 = 0x810;
const TABLES: u64 = 0x1000;
const BUFS: u64 = 0x4000;

/// A buffer the driver posts: address, length, flags.
type Buf = (u64, u32, u16);

fn write(mem: &GuestMemory, at: u64, b: &[u8]) {
    let p = mem.gpa(at, b.len() as u64).unwrap();
    // SAFETY: `gpa` checked the range; the test is the only other user.
    unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), p, b.len()) };
}

fn read(mem: &GuestMemory, at: u64, len: usize) -> Vec<u8> {
    let p = mem.gpa(at, len as u64).unwrap();
    // SAFETY: as in `write`.
    unsafe { std::slice::from_raw_parts(p, len).to_vec() }
}

fn desc_bytes(addr: u64, len: u32, id: u16, flags: u16) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&addr.to_le_bytes());
    b[8..12].copy_from_slice(&len.to_le_bytes());
    b[12..14].copy_from_slice(&id.to_le_bytes());
    b[14..].copy_from_slice(&flags.to_le_bytes());
    b
}

/// The driver side of one packed ring.
struct Driver {
    mem: Arc<GuestMemory>,
    size: u16,
    next_avail: u16,
    avail_wrap: bool,
    next_used: u16,
    used_wrap: bool,
    /// Slots each outstanding buffer id took.
    slots: Vec<u16>,
    next_id: u16,
}

impl Driver {
    fn new(size: u16) -> Driver {
        let mem = GuestMemory::from_owned(vec![(0, vec![0u8; MEM].into_boxed_slice())]).unwrap();
        Driver {
            mem: Arc::new(mem),
            size,
            next_avail: 0,
            avail_wrap: true,
            next_used: 0,
            used_wrap: true,
            slots: vec![0; usize::from(size)],
            next_id: 0,
        }
    }

    fn ring(&self) -> PackedRing {
        self.ring_at(0x8000)
    }

    fn ring_at(&self, base: u32) -> PackedRing {
        let addrs = RingAddrs {
            desc: RING,
            avail: DRIVER,
            used: DEVICE,
        };
        PackedRing::new(self.mem.clone(), addrs, self.size, base, true).unwrap()
    }

    fn avail_flags(&self) -> u16 {
        if self.avail_wrap {
            DESC_F_AVAIL
        } else {
            DESC_F_USED
        }
    }

    /// Makes a buffer of `bufs` (address, length, flags) available — in
    /// the ring, or (`indirect`) in a table at `TABLES` — under the next
    /// id; that id. The head's flags are written last.
    fn post(&mut self, bufs: &[(u64, u32, u16)], indirect: bool) -> u16 {
        let id = self.next_id;
        self.next_id = (self.next_id + 1) % self.size;
        let head = self.next_avail;
        let head_flags;
        if indirect {
            let t = TABLES + 0x100 * u64::from(id);
            for (i, &(a, l, f)) in bufs.iter().enumerate() {
                write(&self.mem, t + 16 * i as u64, &desc_bytes(a, l, 0, f));
            }
            let len = 16 * bufs.len() as u32;
            write(
                &self.mem,
                RING + 16 * u64::from(head),
                &desc_bytes(t, len, id, 0),
            );
            head_flags = DESC_F_INDIRECT | self.avail_flags();
            self.slots[usize::from(id)] = 1;
            self.step_avail();
        } else {
            let mut first = 0;
            for (i, &(a, l, f)) in bufs.iter().enumerate() {
                let next = if i + 1 < bufs.len() { DESC_F_NEXT } else { 0 };
                let flags = f | next | self.avail_flags();
                let pos = self.next_avail;
                let written = if i == 0 {
                    first = flags;
                    0
                } else {
                    flags
                };
                write(
                    &self.mem,
                    RING + 16 * u64::from(pos),
                    &desc_bytes(a, l, id, written),
                );
                self.step_avail();
            }
            head_flags = first;
            self.slots[usize::from(id)] = bufs.len() as u16;
        }
        write(
            &self.mem,
            RING + 16 * u64::from(head) + 14,
            &head_flags.to_le_bytes(),
        );
        id
    }

    fn step_avail(&mut self) {
        self.next_avail += 1;
        if self.next_avail == self.size {
            self.next_avail = 0;
            self.avail_wrap = !self.avail_wrap;
        }
    }

    /// The next used buffer, if the device handed one back: (id, len).
    fn take_used(&mut self) -> Option<(u16, u32)> {
        let d = read(&self.mem, RING + 16 * u64::from(self.next_used), 16);
        let flags = u16::from_le_bytes([d[14], d[15]]);
        let used = (flags & DESC_F_AVAIL != 0) == self.used_wrap
            && (flags & DESC_F_USED != 0) == self.used_wrap;
        if !used {
            return None;
        }
        let id = u16::from_le_bytes([d[12], d[13]]);
        let len = u32::from_le_bytes(d[8..12].try_into().unwrap());
        let n = self.slots[usize::from(id)];
        for _ in 0..n {
            self.next_used += 1;
            if self.next_used == self.size {
                self.next_used = 0;
                self.used_wrap = !self.used_wrap;
            }
        }
        Some((id, len))
    }

    /// The driver's event suppression: `flags`, at `off_wrap`.
    fn set_event(&self, flags: u16, off_wrap: u16) {
        let mut b = [0u8; 4];
        b[..2].copy_from_slice(&off_wrap.to_le_bytes());
        b[2..].copy_from_slice(&flags.to_le_bytes());
        write(&self.mem, DRIVER, &b);
    }
}

/// Walks the next chain; its (address, length) list.
fn walk(r: &mut PackedRing, writable: bool) -> Result<(u16, Vec<(u64, u32)>), ChainError> {
    assert_eq!(r.pending(), Ok(1));
    let head = r.take_head();
    let mut segs = Vec::with_capacity(MAX_SEGS);
    r.walk_chain(head, writable, u64::MAX, &mut segs)?;
    let base = r.mem().gpa(0, 1).unwrap() as u64;
    Ok((
        head,
        segs.iter()
            .map(|s| (s.host() as u64 - base, s.len()))
            .collect(),
    ))
}

#[test]
fn buffers_of_each_shape_come_back_used() {
    let mut d = Driver::new(8);
    let mut r = d.ring();
    assert_eq!(r.pending(), Ok(0));
    let one = [(BUFS, 100, 0)];
    let three = [
        (BUFS + 0x100, 10, 0),
        (BUFS + 0x200, 20, 0),
        (BUFS + 0x300, 30, 0),
    ];
    let id1 = d.post(&one, false);
    let id3 = d.post(&three, false);
    let idi = d.post(&three, true);
    let (h, segs) = walk(&mut r, false).unwrap();
    assert_eq!(segs, vec![(BUFS, 100)]);
    r.push_used(h, 0);
    let (h, segs) = walk(&mut r, false).unwrap();
    assert_eq!(segs.len(), 3);
    r.push_used(h, 0);
    let (h, segs) = walk(&mut r, false).unwrap();
    assert_eq!(
        segs,
        vec![(BUFS + 0x100, 10), (BUFS + 0x200, 20), (BUFS + 0x300, 30)]
    );
    r.push_used(h, 7);
    assert_eq!(r.pending(), Ok(0));
    // Nothing is visible before the publish.
    assert_eq!(d.take_used(), None);
    d.set_event(EVENT_ENABLE, 0);
    assert!(r.publish());
    assert_eq!(d.take_used(), Some((id1, 0)));
    assert_eq!(d.take_used(), Some((id3, 0)));
    assert_eq!(d.take_used(), Some((idi, 7)));
    assert_eq!(d.take_used(), None);
    // Five slots used of eight: positions and wrap counters in the base.
    assert_eq!(r.base(), 5 | 0x8000 | ((5 | 0x8000) << 16));
}

#[test]
fn a_rewound_chain_is_read_again_as_the_guest_wrote_it() {
    let mut d = Driver::new(4);
    let mut r = d.ring();
    d.post(
        &[(BUFS, 64, DESC_F_WRITE), (BUFS + 64, 64, DESC_F_WRITE)],
        false,
    );
    let mark = r.mark();
    let (h, first) = walk(&mut r, true).unwrap();
    r.push_used(h, 128);
    r.rewind(mark);
    assert!(!r.publish(), "nothing to publish after the rewind");
    assert_eq!(d.take_used(), None);
    let (h, again) = walk(&mut r, true).unwrap();
    assert_eq!(again, first);
    r.push_used(h, 100);
    r.publish();
    assert_eq!(d.take_used(), Some((0, 100)));
}

#[test]
fn interrupts_follow_the_drivers_event_suppression() {
    let mut d = Driver::new(8);
    let mut r = d.ring();
    let use_one = |d: &mut Driver, r: &mut PackedRing| {
        d.post(&[(BUFS, 10, 0)], false);
        let (h, _) = walk(r, false).unwrap();
        r.push_used(h, 0);
        let irq = r.publish();
        assert!(d.take_used().is_some());
        irq
    };
    d.set_event(EVENT_DISABLE, 0);
    assert!(!use_one(&mut d, &mut r));
    d.set_event(EVENT_ENABLE, 0);
    assert!(use_one(&mut d, &mut r));
    // Used position is 2 (wrap 1): ask to be told once position 4 is used.
    d.set_event(EVENT_DESC, 4 | 0x8000);
    assert!(!use_one(&mut d, &mut r), "position 2");
    assert!(!use_one(&mut d, &mut r), "position 3");
    assert!(use_one(&mut d, &mut r), "position 4");
    assert!(!use_one(&mut d, &mut r), "position 5");
    // Across the wrap: position 1 of the next lap (wrap counter 0).
    d.set_event(EVENT_DESC, 1);
    assert!(!use_one(&mut d, &mut r), "position 6");
    assert!(!use_one(&mut d, &mut r), "position 7");
    assert!(!use_one(&mut d, &mut r), "position 0, next lap");
    assert!(use_one(&mut d, &mut r), "position 1, next lap");
}

#[test]
fn kicks_are_asked_for_in_the_devices_area() {
    let d = Driver::new(8);
    let mut r = d.ring();
    let flags = |d: &Driver| u16::from_le_bytes(read(&d.mem, DEVICE + 2, 2).try_into().unwrap());
    assert_eq!(flags(&d), EVENT_DISABLE);
    r.set_notify(true);
    assert_eq!(flags(&d), EVENT_ENABLE);
    r.set_notify(false);
    assert_eq!(flags(&d), EVENT_DISABLE);
}

#[test]
fn a_ring_resumes_from_its_base() {
    let mut d = Driver::new(4);
    let mut r = d.ring();
    for _ in 0..6 {
        d.post(&[(BUFS, 10, 0)], false);
        let (h, _) = walk(&mut r, false).unwrap();
        r.push_used(h, 0);
        r.publish();
        assert!(d.take_used().is_some());
    }
    // Two laps of four, less two: position 2, wrap counter 0.
    let base = r.base();
    assert_eq!(base & 0xffff, 2);
    let mut r = d.ring_at(base);
    d.post(&[(BUFS + 0x40, 11, 0)], false);
    let (h, segs) = walk(&mut r, false).unwrap();
    assert_eq!(segs, vec![(BUFS + 0x40, 11)]);
    r.push_used(h, 0);
    r.publish();
    assert!(d.take_used().is_some());
    let addrs = RingAddrs {
        desc: RING,
        avail: DRIVER,
        used: DEVICE,
    };
    assert!(PackedRing::new(d.mem.clone(), addrs, 4, 4, false).is_err());
    assert!(PackedRing::new(d.mem.clone(), addrs, 0, 0, false).is_err());
    let far = RingAddrs {
        desc: MEM as u64 - 16,
        ..addrs
    };
    assert!(PackedRing::new(d.mem.clone(), far, 4, 0, false).is_err());
}

#[test]
fn each_rule_stops_the_ring() {
    let cases: Vec<(&str, Vec<Buf>, bool, ChainError)> = vec![
        (
            "zero length",
            vec![(BUFS, 0, 0)],
            false,
            ChainError::ZeroLen,
        ),
        (
            "huge",
            vec![(BUFS, MAX_DESC_LEN + 1, 0)],
            false,
            ChainError::HugeLen,
        ),
        (
            "outside",
            vec![(MEM as u64 - 8, 16, 0)],
            false,
            ChainError::OutsideMemory,
        ),
        (
            "direction",
            vec![(BUFS, 16, DESC_F_WRITE)],
            false,
            ChainError::Direction,
        ),
        (
            "nested",
            vec![(BUFS, 16, DESC_F_INDIRECT)],
            true,
            ChainError::NestedIndirect,
        ),
    ];
    for (name, bufs, indirect, want) in cases {
        let mut d = Driver::new(8);
        let mut r = d.ring();
        d.post(&bufs, indirect);
        assert_eq!(walk(&mut r, false).map(|_| ()), Err(want), "{name}");
        r.refuse(0);
        assert_eq!(r.pending(), Ok(0), "{name}: the ring stops");
    }
    // A chain whose every slot says NEXT: longer than the ring.
    let mut d = Driver::new(4);
    let mut r = d.ring();
    let bufs = [(BUFS, 8, DESC_F_NEXT); 4];
    d.post(&bufs, false);
    // (The driver's last descriptor has no NEXT; give it one.)
    write(
        &d.mem,
        RING + 16 * 3 + 14,
        &(DESC_F_NEXT | DESC_F_AVAIL).to_le_bytes(),
    );
    assert!(walk(&mut r, false).is_err());
    // A chain that runs into a slot not made available.
    let mut d = Driver::new(4);
    let mut r = d.ring();
    d.post(&[(BUFS, 8, DESC_F_NEXT)], false);
    assert_eq!(walk(&mut r, false).map(|_| ()), Err(ChainError::NextIndex));
    // An indirect table that is empty or not whole descriptors.
    let d = Driver::new(4);
    let mut r = d.ring();
    write(
        &d.mem,
        RING,
        &desc_bytes(TABLES, 24, 0, DESC_F_INDIRECT | DESC_F_AVAIL),
    );
    assert_eq!(
        walk(&mut r, false).map(|_| ()),
        Err(ChainError::BadIndirect)
    );
    // A buffer id past the ring.
    let mut d = Driver::new(4);
    let mut r = d.ring();
    d.post(&[(BUFS, 8, 0)], false);
    write(&d.mem, RING + 12, &9u16.to_le_bytes());
    assert_eq!(walk(&mut r, false).map(|_| ()), Err(ChainError::HeadIndex));
}

proptest! {
    /// Any mix of buffers (one to four descriptors, or indirect) over
    /// many laps of a 16-slot ring: each comes back used once, in order,
    /// with its id and length, and the device's segments are the
    /// driver's buffers.
    #[test]
    fn every_buffer_comes_back_once_in_order(
        shapes in proptest::collection::vec((1usize..=4, any::<bool>(), 1u32..3000), 1..120),
        batch in 1usize..6,
    ) {
        let mut d = Driver::new(16);
        let mut r = d.ring();
        d.set_event(EVENT_ENABLE, 0);
        let mut k = 0;
        while k < shapes.len() {
            let end = (k + batch).min(shapes.len());
            let mut want = Vec::new();
            let mut posted = 0;
            for (i, &(n, indirect, len)) in shapes[k..end].iter().enumerate() {
                // Room: slots taken by outstanding buffers stay below 16.
                if posted + if indirect { 1 } else { n } > 16 {
                    break;
                }
                posted += if indirect { 1 } else { n };
                let bufs: Vec<(u64, u32, u16)> = (0..n)
                    .map(|j| (BUFS + 0x1000 * j as u64, len + j as u32, DESC_F_WRITE))
                    .collect();
                let id = d.post(&bufs, indirect);
                want.push((id, bufs, (k + i) as u32));
            }
            let took = want.len();
            prop_assert!(took > 0);
            for (_, bufs, tag) in &want {
                let (h, segs) = walk(&mut r, true).unwrap();
                let expect: Vec<(u64, u32)> = bufs.iter().map(|b| (b.0, b.1)).collect();
                prop_assert_eq!(segs, expect);
                r.push_used(h, *tag);
            }
            prop_assert_eq!(r.pending(), Ok(0));
            prop_assert!(r.publish());
            for (id, _, tag) in &want {
                prop_assert_eq!(d.take_used(), Some((*id, *tag)));
            }
            prop_assert_eq!(d.take_used(), None);
            k += took;
        }
    }
}
