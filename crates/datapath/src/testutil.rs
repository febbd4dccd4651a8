//! Helpers of the crate's unit tests.

use flowpath_flow::FlowKey;

/// A key on in_port 2 with `nw_src` = `i` (the caches' tests).
pub fn key(i: u32) -> FlowKey {
    let mut k = FlowKey::zero();
    k.set_in_port(2);
    k.set_nw_src(i);
    k
}
