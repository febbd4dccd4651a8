//! flowpath's connection tracker: the `ct` datapath action, with the
//! semantics of Open vSwitch 3.1's userspace tracker.
//!
//! # What
//!
//! [`Conntrack::execute`] runs one packet through the tracker in a zone:
//! it extracts the packet's tuple ([`key`]), finds its connection in
//! either direction ([`table`]), runs the protocol state machine ([`tcp`]
//! with window tracking, [`icmp`], [`other`] for UDP and everything else),
//! creates the connection if the action commits it (subject to the global
//! and per-zone limits, [`limits`]), applies NAT ([`nat`]) and writes the
//! result into the packet's [`CtMeta`]: `ct_state`
//! (`+trk` with `+new`/`+est`/`+rel`/`+rpl`/`+inv`/`+snat`/`+dnat`), zone,
//! mark, label, the original-direction tuple and an opaque handle that
//! lets a recirculated packet skip the lookup. [`Conntrack::sweep`]
//! expires connections; [`Conntrack::dump`], [`Conntrack::flush`] and the
//! text of [`mod@format`] serve `dpctl/dump-conntrack`, `dpctl/flush-conntrack`,
//! `dpctl/ct-stats-show` and `dpctl/ct-get-limits`.
//!
//! # Usage
//!
//! ```
//! use flowpath_conntrack::{state, Config, Conntrack, CtArgs, CtMeta};
//!
//! let ct = Conntrack::new(Config::default()); // share it: Arc<Conntrack>
//! // An Ethernet + IPv4 + UDP frame 10.0.0.1:5000 -> 10.0.0.2:53.
//! let mut frame = vec![0u8; 14 + 20 + 8];
//! frame[12..14].copy_from_slice(&[0x08, 0x00]);
//! frame[14..34].copy_from_slice(&[
//!     0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
//! ]);
//! frame[34..42].copy_from_slice(&[0x13, 0x88, 0, 53, 0, 8, 0, 0]);
//! let commit = CtArgs { zone: 1, commit: true, ..CtArgs::default() };
//! let mut md = CtMeta::default(); // a fresh packet: untracked
//! // `csum_ok`: the NIC (or the test) vouches for the checksums.
//! ct.execute(&mut frame, 14, 0x0800, true, &commit, &mut md, 0);
//! assert_eq!(md.state, state::TRK | state::NEW);
//! assert_eq!(ct.n_conns(), 1);
//! // The sweeping thread, every 100 ms - 1 s:
//! ct.sweep(60_000);
//! assert_eq!(ct.n_conns(), 0, "UDP's first-packet timeout is 60 s");
//! ```
//!
//! # Why it is shaped so
//!
//! The tracker is shared by every PMD thread (`Arc<Conntrack>`). A packet's
//! lookup takes no lock and writes no shared memory (the [`table`]'s index
//! is read under epoch-based reclamation, as Open vSwitch reads its `cmap`
//! under RCU); its state update takes only its connection's own lock.
//! Creating and removing connections (creation is the only allocation)
//! are serialised by one writer lock, as Open vSwitch serialises them with
//! `ct_lock`. [`Conntrack::prefetch`] lets a caller with a batch of
//! packets start the table's loads ahead. The crate does no I/O and reads
//! no clock: time comes in as `now_ms`, so tests are deterministic.
//!
//! # Invariants
//!
//! - No input makes it panic: every read of packet bytes is bounds-checked
//!   (no indexing into packet bytes; the crate's only `unsafe` is the
//!   table's lock-free index, see [`table`]).
//! - A connection is findable by both its original and its reply tuple
//!   from the moment it is committed until it is removed; no two live
//!   connections share a tuple.
//! - `n_conns()` never exceeds `max_conns()` through commits (lowering
//!   the maximum does not evict).
//!
//! # Not supported (yet)
//!
//! Fragments reaching [`Conntrack::execute`] are `+inv`: the datapath
//! reassembles them first with [`ipf::Ipf`] (a separate module, as Open
//! vSwitch's `ipf`). The FTP and TFTP helpers ([`alg`]) create
//! expectations but do not rewrite FTP messages for NAT. Not supported: SCTP
//! and DCCP state machines (tracked as "other"), timeout policies per
//! zone (one policy for the tracker), per-connection packet/byte counters.
//!
//! # Thread-safety
//!
//! `Conntrack` is `Send + Sync`; every method takes `&self`.

#![deny(unsafe_code)]
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod alg;
mod conn;
pub mod format;
pub mod icmp;
pub mod ipf;
pub mod key;
pub mod limits;
pub mod nat;
pub mod other;
pub mod proto;
mod slab;
pub mod table;
pub mod tcp;
pub mod timeouts;
mod tracker;

#[cfg(test)]
mod testpkt;

pub use format::{format_entry, format_stats, format_zone_limits};
pub use key::ConnKey;
pub use table::{pin, TableGuard};
pub use timeouts::Timeouts;
pub use tracker::Conntrack;

use std::net::IpAddr;

/// ct_state bits, as OpenFlow's `ct_state` field numbers them (the flow
/// key's own constants: one definition for the tracker and the key).
pub use flowpath_flow::key::ct_state as state;

/// The original-direction tuple of a packet's connection (or, for a
/// connection an ALG expected, of its parent), as Open vSwitch's
/// `ct_nw_src`/`ct_ipv6_src`/`ct_tp_src`/... fields. For ICMP,
/// `src_port` is the request's type and `dst_port` its code.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OrigTuple {
    /// IPv6 tuple.
    pub v6: bool,
    /// Source address (IPv4 in the first 4 bytes).
    pub src: [u8; 16],
    /// Destination address (IPv4 in the first 4 bytes).
    pub dst: [u8; 16],
    /// Source port, or ICMP type.
    pub src_port: u16,
    /// Destination port, or ICMP code.
    pub dst_port: u16,
    /// IP protocol.
    pub proto: u8,
}

/// The connection-tracking metadata a packet carries (Open vSwitch's
/// `pkt_metadata` ct fields). `Default` is "untracked".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtMeta {
    /// ct_state bits ([`state`]).
    pub state: u8,
    /// ct_zone.
    pub zone: u16,
    /// ct_mark.
    pub mark: u32,
    /// ct_label.
    pub label: u128,
    /// The original-direction tuple, when known.
    pub orig: Option<OrigTuple>,
    /// Opaque handle of the connection found (0 = none), kept through
    /// recirculation so a second `ct` in the same zone need not look it up
    /// again.
    pub conn: u64,
}

/// Which address a NAT translates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NatKind {
    /// Source NAT.
    Src,
    /// Destination NAT.
    Dst,
}

/// A NAT address and port range. Ports 0 = keep the packet's port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NatRange {
    /// First address.
    pub min_addr: IpAddr,
    /// Last address (≥ `min_addr`).
    pub max_addr: IpAddr,
    /// First port (0: no port translation).
    pub min_port: u16,
    /// Last port.
    pub max_port: u16,
}

/// The `nat(...)` argument of a `ct` action (`Default`: plain `nat`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NatSpec {
    /// `None`: plain `nat`, which only applies an existing connection's
    /// translation.
    pub kind: Option<NatKind>,
    /// Addresses and ports to choose from (`None`: keep the packet's).
    pub range: Option<NatRange>,
    /// `persistent` flag (accepted, no effect, as in OVS userspace).
    pub persistent: bool,
    /// `hash` flag (accepted, no effect).
    pub hash: bool,
    /// `random` flag (accepted, no effect).
    pub random: bool,
}

/// Application-layer gateways.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alg {
    /// FTP.
    Ftp,
    /// TFTP.
    Tftp,
}

impl Alg {
    /// The helper's name as dumps print it.
    pub fn name(self) -> &'static str {
        match self {
            Alg::Ftp => "ftp",
            Alg::Tftp => "tftp",
        }
    }
}

/// One `ct(...)` datapath action's arguments.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtArgs {
    /// Zone.
    pub zone: u16,
    /// Create the connection if it does not exist.
    pub commit: bool,
    /// Delete a connection found in the reply direction and start anew
    /// (implies commit).
    pub force: bool,
    /// Set the mark: (value, mask).
    pub set_mark: Option<(u32, u32)>,
    /// Set the label: (value, mask).
    pub set_label: Option<(u128, u128)>,
    /// NAT.
    pub nat: Option<NatSpec>,
    /// Helper.
    pub helper: Option<Alg>,
}

/// Tracker configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Most connections tracked (Open vSwitch's default: 3,000,000).
    pub max_conns: u32,
    /// Shards of the connection table (rounded up to a power of two).
    pub shards: usize,
    /// Timeout policy.
    pub timeouts: Timeouts,
    /// TCP sequence checking (`dpctl/ct-enable-tcp-seq-chk`), on by default.
    pub tcp_seq_check: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_conns: 3_000_000,
            shards: 256,
            timeouts: Timeouts::default(),
            tcp_seq_check: true,
        }
    }
}

/// One side of a dumped connection (`ct_dpif_tuple`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tuple {
    /// IP protocol.
    pub proto: u8,
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Source port (0 for ICMP).
    pub src_port: u16,
    /// Destination port (0 for ICMP).
    pub dst_port: u16,
    /// ICMP identifier.
    pub icmp_id: u16,
    /// ICMP type.
    pub icmp_type: u8,
    /// ICMP code.
    pub icmp_code: u8,
}

/// TCP protocol information of a dumped connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpInfo {
    /// State of the original sender (see [`tcp::st`]).
    pub state_orig: u8,
    /// State of the responder.
    pub state_reply: u8,
    /// Window scale of the original sender.
    pub wscale_orig: u8,
    /// Window scale of the responder.
    pub wscale_reply: u8,
    /// Flags of the original sender (bit 0 WINDOW_SCALE, bit 3 BE_LIBERAL).
    pub flags_orig: u8,
    /// Flags of the responder.
    pub flags_reply: u8,
}

/// One connection as `dpctl/dump-conntrack` shows it (`ct_dpif_entry`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnEntry {
    /// Original direction.
    pub orig: Tuple,
    /// Reply direction (after NAT).
    pub reply: Tuple,
    /// Zone.
    pub zone: u16,
    /// Mark.
    pub mark: u32,
    /// Label.
    pub label: u128,
    /// Seconds until expiry.
    pub timeout: u32,
    /// TCP state, for TCP connections.
    pub tcp: Option<TcpInfo>,
    /// Helper.
    pub helper: Option<Alg>,
    /// Parent connection's tuple, for a connection an ALG expected.
    pub parent: Option<Tuple>,
}

/// Fields a flush may match on one side of a connection; `None` = any.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TupleMatch {
    /// Source address.
    pub src: Option<IpAddr>,
    /// Destination address.
    pub dst: Option<IpAddr>,
    /// Source port.
    pub src_port: Option<u16>,
    /// Destination port.
    pub dst_port: Option<u16>,
    /// ICMP identifier.
    pub icmp_id: Option<u16>,
    /// ICMP type.
    pub icmp_type: Option<u8>,
    /// ICMP code.
    pub icmp_code: Option<u8>,
}

/// What `dpctl/flush-conntrack` with tuples selects: connections whose
/// protocol and both sides match (fields left `None` match anything).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlushTuple {
    /// IP protocol.
    pub proto: Option<u8>,
    /// Original direction.
    pub orig: TupleMatch,
    /// Reply direction.
    pub reply: TupleMatch,
}

/// Tracker counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Connections in the table.
    pub n_conns: u32,
    /// Maximum connections.
    pub max_conns: u32,
    /// Connections committed.
    pub committed: u64,
    /// Connections removed (expired, flushed or replaced).
    pub removed: u64,
    /// Commits refused: the tracker was full (`conntrack_full`).
    pub full: u64,
    /// Commits refused: the zone was at its limit.
    pub zone_limited: u64,
    /// Commits refused: no free NAT tuple.
    pub nat_exhausted: u64,
    /// Packets that could not be parsed (bad headers, bad checksums,
    /// fragments, unsupported ICMP types).
    pub unparsable: u64,
    /// Packets marked `+inv` (including the unparsable ones).
    pub invalid: u64,
}
