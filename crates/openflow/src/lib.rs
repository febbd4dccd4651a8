//! OpenFlow for flowpath: the messages `ovs-ofctl` and SDN controllers
//! exchange with a switch, encoded and decoded without I/O.
//!
//! Versions 1.0, 1.3, 1.4 and 1.5, with Open vSwitch's Nicira extensions
//! (NXM matches, `NXT_FLOW_MOD`, `NXST_FLOW`, the `NXAST_*` actions).
//! Decoding never panics: bad input is an [`error::OfError`], the error
//! Open vSwitch would send back.
//!
//! Layout: [`buf`] reads and writes big-endian bytes, [`header`] the
//! message header and type numbers, [`error`] the error codes, [`port`]
//! port numbers, [`nxm`] matches (NXM/OXM), [`ofp10`] OpenFlow 1.0's
//! fixed match, [`actions`] actions and instructions, [`msg`] the
//! messages.

pub mod actions;
pub mod buf;
pub mod error;
pub mod header;
pub mod msg;
pub mod nxm;
pub mod ofp10;
pub mod port;
