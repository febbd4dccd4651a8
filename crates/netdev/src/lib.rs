//! Live ports: where a running switch's packets come from and go to.
//!
//! What: a port is opened from a spec string ([`PortSpec`], e.g.
//! `afxdp:p1,mode=generic`, `afpacket:p2,queues=2`, `tap:fp0`,
//! `pcap:in.pcap,loop`, `pcap-out:out.pcap`, `vhost-user:/run/vm1.sock`,
//! `patch:NAME,peer=PEER`, `null`) into an [`OpenPort`]:
//! zero or more receive queues ([`RxQueue`]), one transmit side
//! ([`TxQueue`]), and the resources that must be given back when the port
//! closes (XDP program, tap interface, mapped rings), released on `Drop`.
//!
//! Why shaped so: the datapath copies each received frame into its own rx
//! buffer anyway (as a NIC or DPDK's pcap device does), so receiving is a
//! callback over frames that live in the port's ring only for the call —
//! no copy, no allocation, ring slots handed back after the burst. A
//! transmit takes a burst and makes one kick (syscall) per burst where the
//! kind of port needs one.
//!
//! Offloads: an AF_PACKET port with `PACKET_VNET_HDR` receives GSO
//! super-frames and partial checksums from the kernel with a
//! [`VnetHdr`]; it travels with the frame ([`RxMeta`] → [`TxFrame`]), and
//! a port that cannot take it ([`TxQueue::takes_vnet_hdr`] false) gets
//! the frame finished in software first ([`offload::finish`]: checksum
//! completed, segments cut). AF_XDP carries no offload state: an
//! `afxdp:` port finishes in place the partial checksums a software peer
//! sends anyway ([`offload::finish_partial_csum`]) and counts them
//! ([`QueueStats::csum_partial`]), and counts the GSO frames the kernel
//! dropped for it ([`QueueStats::too_big`]); see the `xsk_offload`
//! module.
//!
//! Invariants: no rx or tx call panics on any input or allocates per
//! packet; every frame offered to `send` is counted as sent or dropped;
//! every error names the port. All `unsafe` (syscalls, mapped rings) is in
//! this crate, fenced in the `sys`, `afpacket`, `afpacket_v2`, `afxdp`, `tap`, `patch` and `vhost`
//! modules,
//! each block with a `// SAFETY:` comment.
//!
//! Threads: an `RxQueue` is polled by one thread at a time (it is `Send`,
//! so the switch hands each to the PMD thread that polls it); a `TxQueue`
//! is `Send` and used by one thread at a time (the switch wraps a shared
//! one in a lock taken per burst).

pub mod afpacket;
mod afpacket_v2;
pub mod afxdp;
mod error;
pub mod null;
pub mod offload;
pub mod patch;
pub mod pcap;
pub mod spec;
mod sys;
pub mod tap;
pub mod tapoff;
pub mod vhost;
pub mod xdp_attached;
mod xsk_offload;

pub use error::NetdevError;
pub use offload::VnetHdr;
pub use spec::{PortSpec, RingKind, XdpMode};
pub use sys::{wait_readable, wait_readable_us};

use std::os::fd::RawFd;

/// What came with a received frame besides its bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxMeta {
    /// Offload state from the kernel (AF_PACKET with vnet headers only).
    pub vnet: Option<VnetHdr>,
    /// Capture timestamp in ns (pcap ports), 0 elsewhere.
    pub timestamp_ns: u64,
}

/// One frame to transmit.
#[derive(Clone, Copy, Debug)]
pub struct TxFrame<'a> {
    /// The Ethernet frame.
    pub data: &'a [u8],
    /// Offload state the frame still carries (see the crate docs).
    pub vnet: Option<VnetHdr>,
    /// Timestamp for capture outputs (ns); 0 = now.
    pub timestamp_ns: u64,
}

/// Counters of one queue or port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Frames received or sent.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Frames dropped: ring full, no buffer, too long, send error.
    pub dropped: u64,
    /// Errors (failed syscalls, malformed ring entries).
    pub errors: u64,
    /// Received frames whose TCP/UDP checksum the sender had left to
    /// offload, finished in software (AF_XDP ports; see
    /// [`offload::finish_partial_csum`]).
    pub csum_partial: u64,
    /// Received frames the kernel dropped as too big for the port (AF_XDP:
    /// GSO super-frames from the peer; also counted in `dropped`).
    pub too_big: u64,
}

impl QueueStats {
    /// Adds `o` to `self`.
    pub fn add(&mut self, o: &QueueStats) {
        self.packets += o.packets;
        self.bytes += o.bytes;
        self.dropped += o.dropped;
        self.errors += o.errors;
        self.csum_partial += o.csum_partial;
        self.too_big += o.too_big;
    }
}

/// A receive queue.
pub trait RxQueue: Send {
    /// Receives up to `max` frames, calling `f` on each; the slice is valid
    /// only during the call (it lives in the port's ring). Returns how many
    /// frames were passed to `f`. `Ok(0)` = nothing waiting. An error is
    /// returned only when the queue can no longer work (e.g. the interface
    /// went away); a pcap queue that reached its end returns `Ok(0)` and
    /// [`RxQueue::exhausted`] true.
    fn recv(&mut self, max: usize, f: &mut dyn FnMut(&[u8], RxMeta)) -> Result<usize, NetdevError>;

    /// A file descriptor that becomes readable when frames wait, for an
    /// idle poller's `poll(2)`; `None` if the queue has none (pcap).
    fn poll_fd(&self) -> Option<RawFd> {
        None
    }

    /// Called by an idle poller just before it waits on
    /// [`RxQueue::poll_fd`]: the queue arranges for the descriptor to
    /// become readable when a frame arrives (a virtio ring asks its guest
    /// to kick) and returns false if frames are already waiting (poll
    /// again instead of waiting). Queues whose descriptor needs nothing
    /// keep the default. A busy poller never calls it, so a guest is not
    /// asked for notifications (system calls on its side) while the PMD
    /// would find its frames anyway.
    fn arm_wakeup(&mut self) -> bool {
        true
    }

    /// True once a non-looping capture has delivered its last frame.
    fn exhausted(&self) -> bool {
        false
    }

    /// Receive counters.
    fn stats(&self) -> QueueStats;
}

/// The transmit side of a port.
pub trait TxQueue: Send {
    /// Sends a burst; every frame is counted as sent or dropped. Returns
    /// how many were sent.
    fn send(&mut self, frames: &mut dyn Iterator<Item = TxFrame<'_>>) -> usize;

    /// Whether frames may carry a [`VnetHdr`] (GSO, partial checksum)
    /// as they are; otherwise the caller finishes them first
    /// ([`offload::finish`]).
    fn takes_vnet_hdr(&self) -> bool {
        false
    }

    /// Completes pending work (written captures are flushed, completions
    /// reaped). Called between bursts when idle and before closing.
    fn flush(&mut self) -> Result<(), NetdevError> {
        Ok(())
    }

    /// Transmit counters.
    fn stats(&self) -> QueueStats;
}

/// An opened port: its queues, and what closes it.
pub struct OpenPort {
    /// The spec it was opened from.
    pub spec: PortSpec,
    /// Kind name as `dpctl/show` prints it (`afxdp`, `afpacket`, `tap`,
    /// `pcap`, `pcap-out`, `vhost-user`, `null`).
    pub kind: &'static str,
    /// Extra facts for `dpctl/show` (e.g. `mode=generic, copy`).
    pub detail: String,
    /// Receive queues (none for tx-only ports).
    pub rxqs: Vec<Box<dyn RxQueue>>,
    /// The transmit side.
    pub tx: Box<dyn TxQueue>,
    /// More independent transmit queues, when asked for ([`open_with`])
    /// and the kind of port has them: one per PMD thread, so PMDs do not
    /// share a queue (AF_PACKET: a socket each; AF_XDP: the tx ring of
    /// each rx queue's socket; tap: a descriptor each; null).
    pub more_tx: Vec<Box<dyn TxQueue>>,
    /// Dropped last, after the queues: detaches programs, deletes
    /// interfaces the port created.
    pub guard: Option<Box<dyn Send>>,
}

impl std::fmt::Debug for OpenPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenPort")
            .field("spec", &self.spec)
            .field("kind", &self.kind)
            .field("rxqs", &self.rxqs.len())
            .finish()
    }
}

impl Drop for OpenPort {
    fn drop(&mut self) {
        let _ = self.tx.flush();
        // Queues (rings, sockets) go before the guard (program, interface).
        self.rxqs.clear();
        self.guard.take();
    }
}

/// Opens `spec` with one transmit queue. Errors name the port and the
/// reason; on error nothing is left attached or created.
pub fn open(spec: &PortSpec) -> Result<OpenPort, NetdevError> {
    open_with(spec, 1)
}

/// Opens `spec` with up to `txqs` transmit queues (`tx` plus
/// `more_tx`), as many as the kind of port has.
pub fn open_with(spec: &PortSpec, txqs: usize) -> Result<OpenPort, NetdevError> {
    let extra = txqs.saturating_sub(1);
    match spec {
        PortSpec::AfXdp { .. } => afxdp::open(spec, extra),
        PortSpec::AfPacket { .. } => afpacket::open(spec, extra),
        PortSpec::Tap { .. } => tap::open(spec, extra),
        PortSpec::Pcap { .. } | PortSpec::PcapOut { .. } => pcap::open(spec),
        PortSpec::Null => Ok(null::open(spec, extra)),
        PortSpec::VhostUser { .. } => vhost::open(spec, extra),
        PortSpec::Patch { .. } => patch::open(spec, extra),
        PortSpec::Local { .. } => tapoff::open(spec, extra),
    }
}
