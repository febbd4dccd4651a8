//! Action execution: datapath actions applied to packets' bytes, outputs
//! grouped per port.
//!
//! What:
//! - [`apply`] (and [`set_eth`], [`set_ipv4`], [`set_ipv6`], [`set_l4`],
//!   [`push_vlan`], [`pop_vlan`]) rewrites one [`PacketBuf`] in place, at
//!   the header offsets the extractor found ([`PacketMeta`], from
//!   `flowpath_flow::extract::extract_with_layers`), through the checked
//!   views of `flowpath_wire`. A masked set writes, per field,
//!   `new = (old & !mask) | (key & mask)`. Checksums are patched
//!   incrementally (RFC 1624), never recomputed: the IPv4 header checksum;
//!   the TCP and UDP checksums when an IPv4 or IPv6 address of their
//!   pseudo-header changes, and the ICMPv6 checksum likewise; TCP/UDP port
//!   rewrites. A UDP checksum of zero ("none", IPv4) stays zero and a
//!   patched UDP checksum that comes out zero is stored as 0xffff. The SCTP
//!   CRC32c is changed by the difference between the CRCs of the packet
//!   before and after the rewrite, so a correct CRC stays correct and a
//!   wrong one stays wrong (as OVS does). An IPv6 destination change leaves
//!   the transport checksum alone while a routing header has segments left
//!   (the pseudo-header then holds the final destination, not this one).
//!   Transport checksums are only touched when the extractor found the
//!   transport header (not in later fragments).
//! - `push_vlan` moves the 12 address bytes 4 bytes into the headroom and
//!   writes the tag behind them; `pop_vlan` moves them 4 bytes forward. Both
//!   shift the L3/L4 offsets so later actions of the same list find their
//!   headers. `push_mpls` / `pop_mpls` do the same with a label stack entry
//!   behind the EtherType (after the VLAN tags), and set the EtherType;
//!   `set(mpls(...))` rewrites the top entry.
//! - `hash(...)` computes the packet's datapath hash (OVS's) into
//!   its metadata; `recirc(ID)` keeps a copy of the packet (a reused
//!   buffer) with its metadata for another datapath pass, which
//!   [`crate::switch::Switch`] runs after the batch
//!   ([`Executor::swap_recirculated`]); past [`MAX_RECIRC_DEPTH`]
//!   recirculations, or with [`MAX_RECIRC_PENDING`] packets already
//!   waiting, the packet is dropped there, counted.
//! - [`Executor`] runs a packet's whole action list and queues its outputs;
//!   at the end of the batch [`Executor::flush`] hands each output port all
//!   its packets in one [`PortSink::send`] call (ports in order of first
//!   output, packets in the order they were output). An output that a
//!   later action of the same list would change is a copy of the bytes at
//!   output time, taken into a per-batch clone pool; other outputs refer to
//!   the packet's own buffer (zero copy).
//!
//! A set whose header is missing or invalid (a frame too short for its
//! Ethernet addresses, an IP header that fails its checks, no transport
//! header) changes nothing and is counted ([`ExecStats::set_no_header`]),
//! as is a `push_vlan` without headroom or a `pop_vlan` on an untagged
//! frame (which OVS also leaves unchanged). None of them panics.
//!
//! Why here: the datapath is the one place that knows which actions a
//! packet gets; keeping execution next to it makes `flowpath run` and the
//! benchmark share one code path ([`crate::switch::Switch`]).
//!
//! Invariants: no allocation per packet once the executor's queues and
//! clone pool have grown to the batch's needs (they are reused); header
//! offsets in a [`PacketMeta`] always point into the current frame or are
//! [`NONE`].
//!
//! Threads: an [`Executor`] belongs to one worker.

use crate::packet::{PacketBuf, DATA_ROOM};
use flowpath_flow::extract::{Layers, NONE};
use flowpath_flow::{FlowKey, FlowMask};
use flowpath_odp::{DpAction, SetHeader};
use flowpath_wire::ethernet::is_vlan_tpid;
use flowpath_wire::ipv6::is_ext_header;
use flowpath_wire::{
    ip_proto, EthernetAddress, EthernetFrame, Icmpv6Packet, Ipv4Packet, Ipv6ExtHeader,
    Ipv6FragHeader, Ipv6Packet, SctpPacket, TcpPacket, UdpPacket,
};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::ops::{BitAnd, BitOr, Not};

mod branch;
mod ct;
mod packet_in;
mod recirc;
mod rewrite;
mod tnl;
pub use ct::put_in_key as put_ct_in_key;
pub use packet_in::{PacketIn, PacketInSender, SampleSender, SampledPacket, SAMPLE_HEADER_BYTES};

pub use rewrite::{
    apply, pop_mpls, pop_vlan, push_mpls, push_vlan, set_eth, set_ipv4, set_ipv6, set_l4, set_mpls,
};
use rewrite::{changes_packet, hash_action, rewrites_headers};

/// Where a packet's headers are, and its transport protocol: what action
/// execution needs besides the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketMeta {
    /// Offset of the L3 header in the frame, or [`NONE`].
    pub l3: u16,
    /// Offset of the transport header, or [`NONE`] when the extractor did
    /// not find one (absent, truncated, later fragment).
    pub l4: u16,
    /// The key's `nw_proto` for IP packets (IPv6: the last next header),
    /// 0 otherwise.
    pub nw_proto: u8,
    /// Datapath passes so far (0 on receipt, 1 after one recirculation).
    pub passes: u8,
    /// The datapath port the packet came in on.
    pub in_port: u32,
    /// The datapath metadata a recirculated packet keeps: the priority and
    /// mark as the actions set them, and the hash a `hash` action computed
    /// (0: none).
    pub skb_priority: u32,
    /// See `skb_priority`.
    pub pkt_mark: u32,
    /// See `skb_priority`.
    pub dp_hash: u32,
    /// The received packet's 5-tuple hash (OVS's RSS hash when the NIC
    /// gives none), once a `hash(l4)` action or a recirculation after a
    /// change needed it; kept through recirculations as OVS keeps it.
    pub rss: Option<u32>,
    /// The connection-tracking state the last `ct` action gave the packet
    /// (untracked: the default), kept through recirculation as OVS keeps
    /// it in the packet's metadata.
    pub ct: flowpath_conntrack::CtMeta,
    /// The TCP/UDP checksum field holds only the pseudo-header's sum, the
    /// rest left to checksum offload (a frame from a port with offloads
    /// whose sender left it so): rewrites of the addresses update it as
    /// such a sum, rewrites of the ports leave it alone.
    pub csum_partial: bool,
}

impl PacketMeta {
    /// No header known.
    pub const EMPTY: PacketMeta = PacketMeta {
        l3: NONE,
        l4: NONE,
        nw_proto: 0,
        passes: 0,
        in_port: 0,
        skb_priority: 0,
        pkt_mark: 0,
        dp_hash: 0,
        rss: None,
        ct: ct::UNTRACKED,
        csum_partial: false,
    };

    /// The metadata of a received packet whose key and layers
    /// `extract_with_layers` returned.
    #[inline(always)]
    pub fn new(key: &FlowKey, layers: &Layers) -> Self {
        PacketMeta {
            l3: layers.l3,
            l4: layers.l4,
            nw_proto: if key.is_ip_any() { key.nw_proto() } else { 0 },
            // A received packet: no datapath metadata yet (a recirculated
            // one's comes from its earlier pass, set by the caller).
            passes: 0,
            in_port: key.in_port(),
            skb_priority: 0,
            pkt_mark: 0,
            dp_hash: 0,
            rss: None,
            ct: ct::UNTRACKED,
            csum_partial: false,
        }
    }

    fn shift(&mut self, by: i32) {
        let f = |o: u16| {
            if o == NONE {
                return NONE;
            }
            let v = i32::from(o) + by;
            u16::try_from(v).ok().filter(|v| *v != NONE).unwrap_or(NONE)
        };
        self.l3 = f(self.l3);
        self.l4 = f(self.l4);
    }
}

impl Default for PacketMeta {
    fn default() -> Self {
        PacketMeta::EMPTY
    }
}

/// Why an action left a packet unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum ExecError {
    /// The header a `set` rewrites is missing, truncated or invalid.
    #[error("header to rewrite is missing")]
    NoHeader,
    /// No headroom left for `push_vlan` (or no Ethernet addresses to move).
    #[error("no room to push a VLAN tag")]
    NoHeadroom,
    /// `pop_vlan` on a frame without a VLAN tag.
    #[error("no VLAN tag to pop")]
    NoVlan,
    /// `pop_mpls` or `set(mpls(...))` on a frame without an MPLS label
    /// stack entry (or `push_mpls` on a frame too short for an EtherType).
    #[error("no MPLS label stack entry")]
    NoMpls,
}

/// Receives the packets a batch sends to each output port.
pub trait PortSink {
    /// `packets` were output to `port` during the batch, in order. Called
    /// once per port per batch.
    fn send(&mut self, port: u32, packets: Outputs<'_>);
}

impl<F: FnMut(u32, Outputs<'_>)> PortSink for F {
    fn send(&mut self, port: u32, packets: Outputs<'_>) {
        self(port, packets)
    }
}

/// A sink that only counts (the benchmark's "null device").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NullSink {
    /// Packets received.
    pub packets: u64,
    /// Bytes received.
    pub bytes: u64,
    /// `send` calls (one per port per batch).
    pub calls: u64,
}

impl PortSink for NullSink {
    #[inline]
    fn send(&mut self, _port: u32, packets: Outputs<'_>) {
        self.calls += 1;
        self.packets += packets.len() as u64;
        self.bytes += packets.bytes();
    }
}

/// Marks a queued output that refers to the clone pool.
const CLONE: u32 = 1 << 31;

/// One queued output.
#[derive(Clone, Copy, Debug, Default)]
struct OutEntry {
    port: u32,
    /// Packet slot in the batch, or `CLONE | index` in the clone pool.
    src: u32,
    /// Index of the port's slot in `Executor::slots` (set by `flush`).
    slot: u32,
    /// Bytes sent: the packet's length when it was queued (a queued packet
    /// that a later action changes is a copy, so the bytes a sink gets
    /// have this length).
    len: u32,
    tag: u64,
}

/// One output of a batch as a sink sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutPacket<'a> {
    /// The bytes as they were when the packet was output.
    pub data: &'a [u8],
    /// The tag the packet was received with (e.g. its capture time).
    pub tag: u64,
}

/// The packets a batch sends to one port.
#[derive(Clone, Copy, Debug)]
pub struct Outputs<'a> {
    entries: &'a [OutEntry],
    packets: &'a [PacketBuf],
    clones: &'a [Vec<u8>],
    bytes: u64,
}

impl<'a> Outputs<'a> {
    /// Number of packets.
    #[inline]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there is none.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Their total length in bytes (counted as they were queued: no walk
    /// over the packets).
    #[inline]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    #[inline(always)]
    fn resolve(&self, e: &OutEntry) -> OutPacket<'a> {
        let data: &'a [u8] = if e.src & CLONE != 0 {
            self.clones
                .get((e.src & !CLONE) as usize)
                .map_or(&[], |c| c.as_slice())
        } else {
            self.packets.get(e.src as usize).map_or(&[], |p| p.data())
        };
        OutPacket { data, tag: e.tag }
    }

    /// Packet `i`.
    pub fn get(&self, i: usize) -> Option<OutPacket<'a>> {
        self.entries.get(i).map(|e| self.resolve(e))
    }

    /// The packets, in output order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = OutPacket<'a>> + 'a {
        let this = *self;
        self.entries.iter().map(move |e| this.resolve(e))
    }
}

/// Counters of action execution.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExecStats {
    /// Packets whose actions were executed.
    pub packets: u64,
    /// Packets handed to output ports (a packet output twice counts twice).
    pub output_packets: u64,
    /// Packets that were neither output nor sent to the controller.
    pub dropped: u64,
    /// Controller actions executed.
    pub controller: u64,
    /// Of those, packets dropped because the controller queue was full
    /// (or no OpenFlow channel listens).
    pub controller_dropped: u64,
    /// Packets a flow-sample action picked.
    pub sampled: u64,
    /// Of those, packets the sampler's queue had no room for (or no
    /// sampler listens).
    pub sample_dropped: u64,
    /// Copies made because a packet changed after being output.
    pub clones: u64,
    /// Sets whose header was missing (packet left unchanged).
    pub set_no_header: u64,
    /// `push_vlan` without room (packet left unchanged).
    pub push_no_room: u64,
    /// `pop_vlan` on an untagged frame (packet left unchanged).
    pub pop_no_vlan: u64,
    /// `pop_mpls` / `set(mpls)` on a frame without an MPLS label stack
    /// entry (packet left unchanged).
    pub mpls_no_stack: u64,
    /// Outputs cut to a `trunc(N)` length (a shorter copy sent).
    pub truncated: u64,
    /// `check_pkt_len` actions that took their greater-than branch.
    pub check_pkt_len_gt: u64,
    /// `check_pkt_len` actions that took their less-or-equal branch.
    pub check_pkt_len_le: u64,
    /// Packets sent back into the datapath by `recirc(ID)`.
    pub recirculated: u64,
    /// `recirc(ID)` on a packet already recirculated
    /// [`MAX_RECIRC_DEPTH`] times: dropped there (as OVS).
    pub recirc_too_deep: u64,
    /// `recirc(ID)` with [`MAX_RECIRC_PENDING`] packets already waiting
    /// for their next pass: dropped there.
    pub recirc_overflow: u64,
    /// Packets run through the connection tracker (`ct` actions).
    pub conntracked: u64,
    /// Fragments the reassembler holds until their datagram is whole (a
    /// `ct` on a fragment; they go on when it is).
    pub ipf_held: u64,
    /// Packets encapsulated by `tnl_push`.
    pub tnl_pushed: u64,
    /// `tnl_push`es that found no headroom (or a template it could not
    /// finish): the packet went on unchanged.
    pub tnl_push_failed: u64,
    /// Packets decapsulated by `tnl_pop`.
    pub tnl_popped: u64,
    /// `tnl_pop`s of packets whose outer headers were not a well-formed
    /// tunnel packet (truncated, bad checksum, bad tunnel header): dropped.
    pub tnl_pop_failed: u64,
}

/// The most times one packet is recirculated (OVS's `MAX_RECIRC_DEPTH`).
pub const MAX_RECIRC_DEPTH: u8 = 6;

/// The most recirculated packets waiting for their next pass at once (a
/// pass's): the bound on what groups of buckets that each recirculate can
/// multiply a batch into (and on the pool's memory).
pub const MAX_RECIRC_PENDING: usize = 32 * crate::BATCH_SIZE;

/// A packet a `recirc(ID)` sent back into the datapath: its bytes as the
/// actions before left them, and what its next pass needs (in_port,
/// priority, mark, `dp_hash`, passes so far in `meta`).
#[derive(Clone, Debug, Default)]
pub struct Recirculated {
    /// The frame, in a buffer the worker swaps with an rx buffer (no copy
    /// back).
    pub buf: PacketBuf,
    /// The recirculation id its next lookup carries.
    pub recirc_id: u32,
    /// Its metadata (`passes` already counts the pass that sent it back).
    pub meta: PacketMeta,
    /// The tag it was received with.
    pub tag: u64,
    /// Its tunnel metadata (the key's words `W_TUN_FIRST..`, zero for a
    /// packet that came through no tunnel).
    pub tnl: [u64; TNL_WORDS],
    /// Whether any word of `tnl` is set (false: all zero, and the next
    /// pass skips them — the common case of a packet that came through
    /// no tunnel).
    pub tnl_set: bool,
    /// The first [`HEAD_WORDS`] words of the key the packet had in the
    /// pass that sent it back, when that pass left its headers as they
    /// were extracted (`head_valid`): the next pass starts from them
    /// instead of parsing the frame again (its metadata and
    /// connection-tracking fields set afresh).
    pub head: [u64; HEAD_WORDS],
    /// Whether `head` holds the packet's extracted key.
    pub head_valid: bool,
}

/// Number of words of a key that extraction writes (the others are
/// connection-tracking and tunnel metadata).
pub const HEAD_WORDS: usize = flowpath_flow::key::W_CT_FIRST;

/// Number of tunnel-metadata words of a key.
pub const TNL_WORDS: usize = flowpath_flow::FLOW_WORDS - flowpath_flow::key::W_TUN_FIRST;

/// Cumulative output counters of one port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Datapath port number.
    pub port: u32,
    /// Packets sent.
    pub packets: u64,
    /// Bytes sent.
    pub bytes: u64,
}

/// One packet's run through its action list.
struct Run<'k> {
    /// The key of the packet's pass.
    key: &'k FlowKey,
    slot: usize,
    tag: u64,
    /// Outputs at a (whole-list) index below this carry a copy.
    copy_before: usize,
    trunc: Option<usize>,
    delivered: bool,
    /// A `ct` or `ct_clear` ran in this pass: a packet-in shows no
    /// tracker state (OVS clears the `ct_*` fields of the translation's
    /// flow after a `ct`; they are the next pass's).
    ct_ran: bool,
}

/// Per-batch bookkeeping of one port.
#[derive(Clone, Copy, Debug, Default)]
struct PortSlot {
    port: u32,
    count: u32,
    next: u32,
    bytes: u64,
}

/// Executes batches' actions and delivers their outputs. See the module
/// documentation.
#[derive(Debug, Default)]
pub struct Executor {
    /// Where controller actions send their packets (none: counted only).
    packet_in: Option<PacketInSender>,
    /// Where flow-sample actions send their packets.
    sampler: packet_in::Sampler,
    queue: Vec<OutEntry>,
    grouped: Vec<OutEntry>,
    slots: Vec<PortSlot>,
    clones: Vec<Vec<u8>>,
    clones_used: usize,
    stats: ExecStats,
    ports: Vec<PortStats>,
    /// Packets sent back by `recirc` since the last
    /// [`Executor::swap_recirculated`] (the first `recirc_used`; the others
    /// are buffers kept for reuse).
    recirc: Vec<Recirculated>,
    recirc_used: usize,
    /// Spare buffers for `clone(...)`'s copies (one per nesting level in
    /// use; made on first use, then reused).
    clone_bufs: Vec<PacketBuf>,
    /// The buffer the fragments of a reassembled datagram run in, one
    /// after the other.
    frag_buf: PacketBuf,
    /// The connection tracker `ct` actions use (shared by the workers of
    /// one switch; made on first use when none was given).
    conntrack: ct::Tracker,
    /// The time of the batch being run (ms), for the tracker.
    now_ms: u64,
    /// Per batch slot: the tuple hash the connection tracker's prefetch
    /// computed for the packet's first `ct` (0: none), used once.
    ct_hints: [u64; crate::BATCH_SIZE],
}

impl Executor {
    /// An executor with room for a typical batch's outputs.
    pub fn new() -> Self {
        Executor {
            queue: Vec::with_capacity(4 * crate::BATCH_SIZE),
            grouped: Vec::with_capacity(4 * crate::BATCH_SIZE),
            slots: Vec::with_capacity(16),
            ..Executor::default()
        }
    }

    /// The counters.
    pub fn stats(&self) -> &ExecStats {
        &self.stats
    }

    /// Output counters per port, in order of each port's first output.
    pub fn port_stats(&self) -> &[PortStats] {
        &self.ports
    }

    /// Zeroes the counters.
    pub fn clear_stats(&mut self) {
        self.stats = ExecStats::default();
        self.ports.clear();
    }

    /// Executes `actions` on the packet in batch slot `slot`, queueing its
    /// outputs (tagged `tag`) for [`Executor::flush`]. `packets[slot]` at
    /// flush time must be this packet.
    #[inline]
    pub fn execute(
        &mut self,
        slot: usize,
        pkt: &mut PacketBuf,
        meta: &mut PacketMeta,
        actions: &[DpAction],
        tag: u64,
        key: &FlowKey,
    ) {
        self.stats.packets += 1;
        // Outputs before the last action that changes the packet carry a
        // copy; the others carry the packet itself. (Over a
        // `check_pkt_len`'s branches this is the last change in either:
        // a copy too many at worst.)
        let copy_before = actions
            .iter()
            .rposition(changes_packet)
            .map_or(0, |i| i + 1);
        let mut delivered = false;
        // See `Run::ct_ran`.
        let mut ct_ran = false;
        // `trunc(N)`: the next output carries at most N bytes (a copy).
        let mut trunc: Option<usize> = None;
        for (j, a) in actions.iter().enumerate() {
            match a {
                DpAction::Trunc(n) => trunc = Some(*n as usize),
                DpAction::Output(port) => {
                    self.output(pkt, *port, &mut trunc, j < copy_before, slot, tag);
                    delivered = true;
                }
                DpAction::Controller { .. } => {
                    trunc = None;
                    let ct = if ct_ran { &ct::UNTRACKED } else { &meta.ct };
                    self.send_to_controller(pkt.data(), meta.in_port, ct, a);
                    delivered = true;
                }
                DpAction::Recirc(id) => {
                    // The RSS hash is the received packet's: keep it
                    // before a change makes the next pass's key another.
                    let changed = actions
                        .get(..j)
                        .is_some_and(|a| a.iter().any(rewrites_headers));
                    // The last action, with nothing queued that refers to
                    // the packet: the pool takes its buffer (no copy).
                    let take = !delivered && j + 1 == actions.len();
                    self.recirculate(pkt, meta, *id, tag, changed.then_some(key), key, take);
                    delivered = true;
                }
                DpAction::Hash { symmetric, basis } => {
                    let unchanged = actions
                        .get(..j)
                        .is_some_and(|a| !a.iter().any(rewrites_headers));
                    hash_action(pkt, meta, key, unchanged, *symmetric, *basis);
                }
                DpAction::Ct(ct) => {
                    // The prefetch's hash holds for the first `ct` of an
                    // unchanged packet only.
                    let hint = match self.ct_hints.get_mut(slot) {
                        Some(h)
                            if !ct_ran
                                && actions
                                    .get(..j)
                                    .is_some_and(|a| !a.iter().any(changes_packet)) =>
                        {
                            std::mem::take(h)
                        }
                        _ => 0,
                    };
                    match self.conntrack(pkt, meta, key, ct, hint) {
                        ct::CtOutcome::Done => ct_ran = true,
                        ct::CtOutcome::Held => {
                            delivered = true;
                            break;
                        }
                        ct::CtOutcome::Fragments(frags) => {
                            let rest = actions.get(j + 1..).unwrap_or(&[]);
                            self.run_fragments(frags, meta, rest, j + 1, slot, tag);
                            delivered = true;
                            break;
                        }
                    }
                }
                DpAction::CtClear => {
                    meta.ct = ct::UNTRACKED;
                    ct_ran = true;
                }
                DpAction::Sample(fs) => self.sample(pkt.data(), meta.in_port, fs),
                DpAction::TnlPush(t) => self.tnl_push(pkt, meta, t, key),
                DpAction::TnlPop { port, kind, tlv } => {
                    // The only action (the underlay's megaflow): nothing
                    // else refers to the packet's buffer, the pool takes
                    // it.
                    let take = actions.len() == 1;
                    self.tnl_pop(pkt, meta, *port, *kind, tlv, tag, take);
                    delivered = true;
                }
                DpAction::CheckPktLen { .. } | DpAction::Clone { .. } => {
                    // Branches and clones: the rest of the list by the
                    // general interpreter (off the common path).
                    let mut run = Run {
                        slot,
                        tag,
                        copy_before,
                        trunc,
                        delivered,
                        key,
                        ct_ran,
                    };
                    self.run_rest(pkt, meta, actions, j, &mut run);
                    delivered = run.delivered;
                    break;
                }
                _ => {
                    if let Err(e) = apply(pkt, meta, a) {
                        self.count_exec_error(e);
                    }
                }
            }
        }
        if !delivered {
            self.stats.dropped += 1;
        }
        // (A hint left unused must not reach the slot's next packet.)
        if let Some(h) = self.ct_hints.get_mut(slot) {
            *h = 0;
        }
    }

    /// Executes `actions` on a run of packets in consecutive batch slots
    /// from `first` (one per tag in `tags`, in order; `lens` are their
    /// lengths in bytes, as many), when the list is only outputs (or
    /// empty: a drop): the same outputs, counters and queue order as
    /// [`Executor::execute`] per packet, with the list inspected once. Returns false, doing nothing, for any other list
    /// (the caller executes those packet by packet).
    ///
    /// Why: a run of packets of one megaflow (one flow, or many flows one
    /// megaflow covers) is the common case of a batch; per packet this is
    /// one queue entry instead of the interpreter's walk (by callgrind,
    /// about 60 instructions per packet less on the EMC-hit path).
    #[inline]
    pub fn execute_outputs(
        &mut self,
        first: usize,
        tags: &[u64],
        lens: &[u32],
        actions: &[DpAction],
    ) -> bool {
        debug_assert_eq!(tags.len(), lens.len());
        let n = tags.len() as u64;
        match actions {
            [] => {
                self.stats.packets += n;
                self.stats.dropped += n;
            }
            // One output, the common list, apart: by callgrind the general
            // arm below costs 19 instructions per packet more for it.
            [DpAction::Output(port)] => {
                self.stats.packets += n;
                let port = *port;
                self.queue
                    .extend(
                        tags.iter()
                            .zip(lens)
                            .enumerate()
                            .map(|(k, (&tag, &len))| OutEntry {
                                port,
                                src: (first + k) as u32,
                                slot: 0,
                                len,
                                tag,
                            }),
                    );
            }
            _ if actions.iter().all(|a| matches!(a, DpAction::Output(_))) => {
                self.stats.packets += n;
                for (k, (&tag, &len)) in tags.iter().zip(lens).enumerate() {
                    for a in actions {
                        if let DpAction::Output(port) = a {
                            self.queue.push(OutEntry {
                                port: *port,
                                src: (first + k) as u32,
                                slot: 0,
                                len,
                                tag,
                            });
                        }
                    }
                }
            }
            _ => return false,
        }
        true
    }

    /// Queues the packet (in batch slot `slot`) for `port`: itself, or a
    /// copy of its bytes as they are now when `copy` (a later action
    /// changes it), or at most `trunc` of them (once).
    #[inline(always)]
    fn output(
        &mut self,
        pkt: &PacketBuf,
        port: u32,
        trunc: &mut Option<usize>,
        copy: bool,
        slot: usize,
        tag: u64,
    ) {
        let full = pkt.data().len();
        let (src, len) = match trunc.take() {
            Some(n) if n < full => {
                self.stats.truncated += 1;
                (self.clone_of(&pkt.data()[..n]), n)
            }
            _ if copy => (self.clone_of(pkt.data()), full),
            _ => (slot as u32, full),
        };
        self.queue.push(OutEntry {
            port,
            src,
            slot: 0,
            len: len as u32,
            tag,
        });
    }

    fn count_exec_error(&mut self, e: ExecError) {
        match e {
            ExecError::NoHeader => self.stats.set_no_header += 1,
            ExecError::NoHeadroom => self.stats.push_no_room += 1,
            ExecError::NoVlan => self.stats.pop_no_vlan += 1,
            ExecError::NoMpls => self.stats.mpls_no_stack += 1,
        }
    }

    /// Runs `actions[from..]` (which starts with a `check_pkt_len`) with the
    /// general interpreter.
    #[cold]
    #[inline(never)]
    fn run_rest(
        &mut self,
        pkt: &mut PacketBuf,
        meta: &mut PacketMeta,
        actions: &[DpAction],
        from: usize,
        run: &mut Run,
    ) {
        if let Some(rest) = actions.get(from..) {
            self.run_list(pkt, meta, rest, from, run);
        }
    }

    /// Runs `actions`, which start at index `base` of the packet's whole
    /// list: the interpreter for lists with `check_pkt_len` (recursive over
    /// the branches).
    fn run_list(
        &mut self,
        pkt: &mut PacketBuf,
        meta: &mut PacketMeta,
        actions: &[DpAction],
        base: usize,
        run: &mut Run,
    ) {
        // Past a `check_pkt_len`, its branches (run by `check_pkt_len`).
        let mut skip_to = 0usize;
        for (j, a) in actions.iter().enumerate() {
            if j < skip_to {
                continue;
            }
            match a {
                // `trunc(N)`: the next output carries at most N bytes (a
                // copy).
                DpAction::Trunc(n) => run.trunc = Some(*n as usize),
                DpAction::Output(port) => {
                    let copy = base + j < run.copy_before;
                    self.output(pkt, *port, &mut run.trunc, copy, run.slot, run.tag);
                    run.delivered = true;
                }
                DpAction::Controller { .. } => {
                    run.trunc = None;
                    let ct = if run.ct_ran { &ct::UNTRACKED } else { &meta.ct };
                    self.send_to_controller(pkt.data(), meta.in_port, ct, a);
                    run.delivered = true;
                }
                DpAction::Recirc(id) => {
                    // (Whether the branch's packet changed is not tracked
                    // here: its RSS hash is kept in any case.)
                    self.recirculate(pkt, meta, *id, run.tag, Some(run.key), run.key, false);
                    run.delivered = true;
                }
                DpAction::Hash { symmetric, basis } => {
                    // (A branch: whether the packet changed before is not
                    // tracked here; parsed again.)
                    hash_action(pkt, meta, run.key, false, *symmetric, *basis);
                }
                DpAction::Ct(ct) => match self.conntrack(pkt, meta, run.key, ct, 0) {
                    ct::CtOutcome::Done => run.ct_ran = true,
                    ct::CtOutcome::Held => {
                        run.delivered = true;
                        return;
                    }
                    ct::CtOutcome::Fragments(frags) => {
                        let rest = actions.get(j + 1..).unwrap_or(&[]);
                        self.run_fragments(frags, meta, rest, base + j + 1, run.slot, run.tag);
                        run.delivered = true;
                        return;
                    }
                },
                DpAction::CtClear => {
                    meta.ct = ct::UNTRACKED;
                    run.ct_ran = true;
                }
                DpAction::Sample(fs) => self.sample(pkt.data(), meta.in_port, fs),
                DpAction::TnlPush(t) => self.tnl_push(pkt, meta, t, run.key),
                DpAction::TnlPop { port, kind, tlv } => {
                    self.tnl_pop(pkt, meta, *port, *kind, tlv, run.tag, false);
                    run.delivered = true;
                }
                DpAction::CheckPktLen { .. } => {
                    self.check_pkt_len(pkt, meta, actions, j, base, run);
                    skip_to = j + a.flat_len();
                }
                DpAction::Clone { .. } => {
                    self.clone_run(pkt, meta, actions, j, base, run);
                    skip_to = j + a.flat_len();
                }
                _ => {
                    if let Err(e) = apply(pkt, meta, a) {
                        self.count_exec_error(e);
                    }
                }
            }
        }
    }

    /// True when `recirc` sent packets back since the last
    /// [`Executor::swap_recirculated`].
    #[inline]
    pub fn has_recirculated(&self) -> bool {
        self.recirc_used != 0
    }

    /// Hands over the packets `recirc` sent back since the last call:
    /// swaps the pool with `other` (whose buffers are reused from then on)
    /// and returns how many of `other`'s first entries are packets.
    pub fn swap_recirculated(&mut self, other: &mut Vec<Recirculated>) -> usize {
        std::mem::swap(&mut self.recirc, other);
        std::mem::take(&mut self.recirc_used)
    }

    /// Copies `data` into the clone pool; returns its queue reference.
    fn clone_of(&mut self, data: &[u8]) -> u32 {
        if self.clones_used == self.clones.len() {
            self.clones.push(Vec::with_capacity(DATA_ROOM));
        }
        let c = &mut self.clones[self.clones_used];
        c.clear();
        c.extend_from_slice(data);
        self.clones_used += 1;
        self.stats.clones += 1;
        CLONE | (self.clones_used - 1) as u32
    }

    /// Number of outputs queued since the last flush.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Hands every queued output to `sink`, one call per port, and empties
    /// the queue. `packets` are the batch's buffers (indexed by slot).
    pub fn flush<S: PortSink + ?Sized>(&mut self, packets: &[PacketBuf], sink: &mut S) {
        let Executor {
            queue,
            grouped,
            slots,
            clones,
            clones_used,
            stats,
            ports,
            ..
        } = self;
        if queue.is_empty() {
            *clones_used = 0;
            return;
        }
        // Count per port, remembering each entry's port slot.
        slots.clear();
        let mut last = 0usize;
        for e in queue.iter_mut() {
            let s = if slots.get(last).is_some_and(|s| s.port == e.port) {
                last
            } else if let Some(s) = slots.iter().position(|s| s.port == e.port) {
                s
            } else {
                slots.push(PortSlot {
                    port: e.port,
                    count: 0,
                    next: 0,
                    bytes: 0,
                });
                slots.len() - 1
            };
            slots[s].count += 1;
            slots[s].bytes += u64::from(e.len);
            e.slot = s as u32;
            last = s;
        }
        let clones = &clones[..*clones_used];
        stats.output_packets += queue.len() as u64;
        let mut deliver = |port: u32, entries: &[OutEntry], bytes: u64| {
            let out = Outputs {
                entries,
                packets,
                clones,
                bytes,
            };
            debug_assert_eq!(
                bytes,
                out.iter().map(|p| p.data.len() as u64).sum::<u64>(),
                "queued lengths differ from the bytes delivered"
            );
            let ps = match ports.iter().position(|p| p.port == port) {
                Some(i) => &mut ports[i],
                None => {
                    ports.push(PortStats {
                        port,
                        ..PortStats::default()
                    });
                    let n = ports.len() - 1;
                    &mut ports[n]
                }
            };
            ps.packets += entries.len() as u64;
            ps.bytes += bytes;
            sink.send(port, out);
        };
        if slots.len() == 1 {
            deliver(slots[0].port, queue, slots[0].bytes);
        } else {
            // Stable counting sort by port slot.
            let mut off = 0u32;
            for s in slots.iter_mut() {
                s.next = off;
                off += s.count;
            }
            grouped.clear();
            grouped.resize(queue.len(), OutEntry::default());
            for e in queue.iter() {
                let s = &mut slots[e.slot as usize];
                grouped[s.next as usize] = *e;
                s.next += 1;
            }
            for s in slots.iter() {
                let start = (s.next - s.count) as usize;
                deliver(s.port, &grouped[start..s.next as usize], s.bytes);
            }
        }
        queue.clear();
        *clones_used = 0;
    }
}

#[cfg(test)]
mod tests;
