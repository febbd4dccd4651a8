//! Miniflow extraction: Ethernet frame → [`FlowKey`]. (Being written.)

use crate::key::FlowKey;

/// Extracts the flow key of `frame` as received on `in_port`.
pub fn extract(frame: &[u8], in_port: u32) -> FlowKey {
    let _ = frame;
    let mut k = FlowKey::zero();
    k.set_in_port(in_port);
    k
}
