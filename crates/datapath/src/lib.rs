//! The fast path: the cache cascade of one datapath worker.
//!
//! A packet's [`FlowKey`](flowpath_flow::FlowKey) and 32-bit hash (computed
//! once, [`hash::packet_hash`]) enter a [`Batch`] of up to 32 packets;
//! [`Datapath::process_batch`] classifies the batch through
//!
//! ```text
//! EMC ─► SMC | DFC | CD | hybrid | none ─► dpcls (per in_port, ranked subtables) ─► Upcall
//! ```
//!
//! and leaves per packet a [`Verdict`]: a [`MegaflowRef`] (whose actions
//! [`Batch::actions`] returns), the slow path's actions when nothing could
//! be installed, or a drop. Statistics use OVS's `pmd-stats-show` names
//! ([`PmdStatsReport`]); [`Datapath::dump_flows`] prints megaflows like
//! `dpctl/dump-flows`.
//!
//! Module map (each file's doc says what, why, invariants and threads):
//!
//! | module | what |
//! |---|---|
//! | [`hash`] | per-packet and per-subtable hashes; the caches' PRNG |
//! | [`megaflow`] | the slab of megaflows, addressed by index + generation |
//! | [`subtable`], [`dpcls`] | tuple space search, one subtable per mask |
//! | [`emc`] | exact match cache |
//! | [`smc`], [`dfc`], [`cd`], [`hybrid`] | the second-level caches |
//! | [`auto`] | the self-tuning cascade (`second-level = auto`) |
//! | [`tier`] | what a cache tier is (the trait every cache implements), the tier names |
//! | [`batch`], [`pipeline`], [`upcall`] | the cascade and its interfaces |
//! | [`config`], [`keys`], [`stats`] | run-time knobs and their names, counters |
//! | [`prefetch`] | the software prefetch hint (fenced `unsafe`) |
//! | [`hugepage`] | cache tables on 2 MB pages (re-exported from `flowpath_io`, where its syscalls are fenced) |
//! | [`simd`] | SSE2 bucket compares with their scalar reference (fenced `unsafe`) |
//! | [`packet`], [`execute`] | packet buffers with headroom; actions on bytes, outputs per port |
//! | [`switch`] | the worker loop: frames in, cascade, actions, frames out |
//!
//! The crate knows nothing of OpenFlow: the actions it executes are
//! `flowpath_odp`'s, and the slow path behind a miss is any [`Upcall`]
//! (the rule tables' one is `flowpath_slowpath::SlowPath`, a crate above
//! this one).
//!
//! Rules of the crate: no I/O, no clock reads, no locks and no allocation on
//! the packet path (time and cycles are arguments); caches store indices,
//! never references; no system calls, and no `unsafe` outside
//! [`prefetch`] (one fenced intrinsic call) and [`simd`] (SSE2 compares).

#![deny(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod auto;
pub mod batch;
pub mod cd;
pub mod config;
pub mod dfc;
pub mod dpcls;
pub mod dump;
pub mod emc;
pub mod execute;
pub mod hash;
pub mod hybrid;
/// Table storage on 2 MB pages (`flowpath_io`'s, where its syscalls live).
pub use flowpath_io::hugepage;
pub mod keys;
pub mod megaflow;
pub mod packet;
pub mod pipeline;
pub mod prefetch;
pub mod simd;
pub mod smc;
pub mod stats;
pub mod subtable;
pub mod switch;
pub mod tier;
pub mod upcall;

#[cfg(test)]
mod testutil;

pub use batch::{Batch, BatchFull, DropReason, Tier, Verdict, BATCH_SIZE};
pub use config::{Config, ConfigError, SecondLevel};
pub use dump::DumpEntry;
pub use execute::{NullSink, OutPacket, Outputs, PortSink};
pub use megaflow::{InstallError, Megaflow, MegaflowRef, MegaflowStats, MemoryReport};
pub use packet::PacketBuf;
pub use pipeline::{exact_mask_for, Datapath, EXACT_MASK};
pub use stats::{PmdStats, PmdStatsReport};
pub use switch::Switch;
pub use tier::{CacheTier, TierKind};
pub use upcall::{Upcall, UpcallError};
