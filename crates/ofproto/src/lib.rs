//! The slow path: OpenFlow-style rule tables, the rule classifier with
//! wildcard tracking, and translation to datapath actions plus the widest
//! correct megaflow.
//!
//! - [`parse`], [`rule`], [`action`]: `ovs-ofctl add-flow(s)` syntax in and out;
//! - [`classifier`] (+ [`trie`]): one table's tuple space search with staged
//!   lookup, prefix and port tracking;
//! - [`tables`]: a bridge's tables; [`linear`]: the linear-scan reference;
//! - [`xlate`]: the walk through the tables → datapath actions ([`flowpath_odp`]) and
//!   the megaflow mask.
//!
//! Works on `FlowKey`s only: it never touches packet bytes, does no I/O and
//! reads no clock.

#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod action;
pub mod classifier;
pub mod ct;
pub mod dpflow;
pub mod group;
pub mod learn;
pub mod linear;
pub mod normal;
pub mod parse;
pub mod recirc;
pub mod rule;
pub mod tables;
#[cfg(feature = "test-utils")]
pub mod testgen;
pub mod trie;
pub mod tunnel;
mod tunnel_dad;
mod tunnel_neigh;
mod tunnel_route;
mod tunnel_tlv;
pub mod xlate;
