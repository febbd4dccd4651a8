//! Fuzz target `netdev_offload`: finishing a frame's offload state in
//! software (checksum completion, TCP segmentation) on arbitrary frames
//! and virtio-net headers must not panic, and every segment it produces
//! must fit the frame's headers plus one segment's payload. Finishing a
//! partial checksum found in a frame (AF_XDP) must not panic, must change
//! at most the checksum field, and must find nothing left to do in the
//! frame it finished.
//!
//! Run with `cargo +nightly fuzz run netdev_offload`.

#![no_main]

use flowpath_netdev::offload::{finish, finish_partial_csum, VnetHdr, VNET_HDR_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut f = data.to_vec();
    if finish_partial_csum(&mut f) {
        assert_eq!(f.len(), data.len());
        assert!(f.iter().zip(data).filter(|(a, b)| a != b).count() <= 2);
        assert!(!finish_partial_csum(&mut f));
    } else {
        assert_eq!(f, data);
    }
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
