//! Fuzz target `netdev_offload`: finishing a frame's offload state in
//! software (checksum completion, TCP segmentation) on arbitrary frames
//! and virtio-net headers must not panic, and every segment it produces
//! must fit the frame's headers plus one segment's payload.
//!
//! Run with `cargo +nightly fuzz run netdev_offload`.

#![no_main]

use flowpath_netdev::offload::{finish, VnetHdr, VNET_HDR_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < VNET_HDR_LEN {
        return;
    }
    let mut h = [0u8; VNET_HDR_LEN];
    h.copy_from_slice(&data[..VNET_HDR_LEN]);
    let v = VnetHdr::from_bytes(&h);
    let frame = &data[VNET_HDR_LEN..];
    let mut scratch = Vec::new();
    let limit = frame.len() + usize::from(v.gso_size);
    let _ = finish(frame, &v, &mut scratch, &mut |seg| {
        assert!(seg.len() <= limit.max(frame.len()));
    });
});
