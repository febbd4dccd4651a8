//! Flow keys, masks and matches; the field registry; miniflow extraction.
//!
//! This crate is the vocabulary every other flowpath crate speaks:
//!
//! - [`FlowKey`] / [`FlowMask`]: the fixed 16-word packet key and its mask
//!   (see [`key`] for the layout and its reasons);
//! - [`field`]: the registry of OVS match fields (names, storage,
//!   prerequisites, value syntax);
//! - [`Match`]: a key under a mask, parsed and printed in `ovs-ofctl` syntax;
//! - [`extract`]: Ethernet frame → `FlowKey`, robust to any input.
//!
//! It knows nothing of caches or rules, does no I/O and never panics on
//! packet data.

#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod extract;
pub mod field;
pub mod key;
pub mod matching;
pub mod ovs_hash;
pub mod value;

pub use field::{FieldId, FieldInfo, FIELDS};
pub use key::{FlowKey, FlowMask, Regs, FLOW_WORDS};
pub use matching::{Match, Style};
