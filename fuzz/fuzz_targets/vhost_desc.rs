//! Fuzz target `vhost_desc`: a vhost-user port's walk of a guest's split
//! ring over arbitrary guest memory — descriptor tables, indirect tables,
//! available ring — must never panic or touch memory outside the guest's
//! region, must refuse or accept every chain, and an accepted chain must
//! hold at most `MAX_SEGS` buffers of at most `MAX_DESC_LEN` bytes each,
//! all inside the region, whose bytes gather to exactly its length.
//!
//! Input: byte 0 picks the ring size (2^(b % 8): 1 to 128 entries), byte
//! 1 the base index; the rest is guest memory from guest-physical 0, laid
//! out so that short inputs reach every part: the available ring at 0,
//! the descriptor table at 0x200; indirect tables and buffers wherever
//! the descriptors point (the region is 64 KiB); the used ring, which
//! only the port writes, at 0xf000.
//!
//! Run with `cargo +nightly fuzz run vhost_desc`.

#![no_main]

use flowpath_netdev::vhost::memory::GuestMemory;
use flowpath_netdev::vhost::ring::{RingAddrs, Vring, MAX_DESC_LEN, MAX_SEGS};
use libfuzzer_sys::fuzz_target;
use std::sync::Arc;

const MEM: usize = 0x10000;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let size = 1u16 << (data[0] % 8);
    let base = u16::from(data[1]);
    let mut m = vec![0u8; MEM];
    let n = (data.len() - 2).min(MEM);
    m[..n].copy_from_slice(&data[2..2 + n]);
    let mem = GuestMemory::from_owned(vec![(0, m.into_boxed_slice())]).unwrap();
    let addrs = RingAddrs {
        desc: 0x200,
        avail: 0,
        used: 0xf000,
    };
    // Every area fits the region: the ring must be accepted.
    let mut ring = Vring::new(Arc::new(mem), addrs, size, base, false).unwrap();
    let mut segs = Vec::with_capacity(MAX_SEGS);
    let mut out = Vec::with_capacity(65_536 + 64);
    let mut rounds = 0;
    while let Ok(p) = ring.pending() {
        if p == 0 || rounds > 64 {
            break;
        }
        rounds += 1;
        let head = ring.take_head();
        for writable in [false, true] {
            if let Ok(total) = ring.walk(head, writable, u64::MAX, &mut segs) {
                assert!(!segs.is_empty() && segs.len() <= MAX_SEGS);
                assert!(segs.iter().all(|s| s.len() > 0 && s.len() <= MAX_DESC_LEN));
                assert_eq!(total, segs.iter().map(|s| u64::from(s.len())).sum::<u64>());
            }
        }
        if let Ok(total) = ring.read_chain(head, 12, &mut segs, &mut out) {
            assert_eq!(out.len() as u64, total.saturating_sub(12));
        }
        if head < ring.size() {
            ring.push_used(head, 0);
        }
    }
    let _ = ring.publish();
});
