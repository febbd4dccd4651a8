//! The PMD side of a vhost-user port: [`VhostRx`] (the guest's transmit
//! virtqueues 1, 3, …) and [`VhostTx`] (its receive virtqueues 0, 2, …),
//! and the slot through which the control thread hands each ring over.
//!
//! The hand-over (why a PMD never touches unmapped memory): each
//! virtqueue has a [`QueueSlot`] with two flags, `running` (written by the
//! control thread) and `busy` (taken by a PMD), and the ring state in a
//! cell. A PMD *claims* the slot for one burst: it sets `busy` (a
//! compare-and-swap, so two transmit queues never share a ring) and only
//! then reads `running`; if that is false it lets go without touching the
//! cell. The control thread *withdraws* a ring by clearing `running` and
//! then waiting until `busy` is clear; only after that does it read or
//! replace the cell, close the ring's descriptors, or unmap memory. Both
//! sides use sequentially consistent order on the two flags, so either
//! the PMD sees `running` false or the control thread sees `busy` true
//! (the store-then-load pattern of Dekker's algorithm). A ring is
//! *installed* by writing the cell and then setting `running` (release).
//! The cost to a PMD is one atomic read-modify-write and one store per
//! burst: no lock, no system call. A transmit queue whose own ring does
//! not run (the guest enabled fewer queue pairs) claims another running
//! one, spinning for at most about a burst's time while another PMD
//! holds it, and drops the burst (counted) if it stays held.
//!
//! Data path: a guest frame is gathered (copied) out of its descriptor
//! chain into the queue's buffer after the 12-byte (10 without
//! `VERSION_1`/`MRG_RXBUF`) virtio-net header, which is skipped (no
//! offloads are offered, so it carries nothing). A frame for the guest is
//! written after a zeroed header into as many receive buffers as it needs
//! (`MRG_RXBUF`; `num_buffers` set), or into one buffer without
//! mergeable buffers. When the guest has no buffers left, the frame and
//! the rest of the burst are counted as dropped at once. The guest's
//! `call` eventfd is written only when it asked for an interrupt
//! (`EVENT_IDX` or the ring's flags): a guest that polls (DPDK) costs no
//! system call.
//!
//! Why in two steps: the rings and buffers were last written by the
//! guest's core, so nearly every first touch of them waits for a cache
//! line to come over. A burst therefore first walks its chains (and
//! claims the guest's receive buffers) and only then copies the frames,
//! one after the other: the transfers of a burst overlap instead of each
//! waiting behind the last (BENCHMARKS.md, "Virtual machine ports", has
//! the rates before and after). The common case — a frame in one buffer —
//! takes this way; a chain of several buffers is copied in its turn, the
//! walked ones before it first, so frames and used entries stay in ring
//! order.
//!
//! Kicks: the PMD polls, so the guest is asked not to kick while frames
//! flow (the used ring's `NO_NOTIFY` flag, or `avail_event` left behind
//! with `EVENT_IDX`). A receive queue that finds its ring empty asks for
//! a kick and looks once more (a frame posted before the guest saw the
//! request would get none), so an idle PMD can sleep on
//! [`RxQueue::poll_fd`]: an eventfd of the slot's own, written by the
//! control thread when the guest's kick eventfd fires (one read of it by
//! the PMD per kick, none while frames flow).
//!
//! Layouts: a burst claims the ring and dispatches once on its layout
//! (split or packed, [`AnyRing`]) to code written once over
//! [`VirtRing`] and compiled for each.
//!
//! Invariants: no allocation per packet (buffers and segment lists are
//! made at open); every frame offered to `send` is counted sent or
//! dropped; a malformed chain from the guest is counted in `errors` and
//! given back unused (transmit side) or stops that receive ring until the
//! frontend starts it again (receive side, where a half-written frame
//! cannot be taken back).
#![allow(unsafe_code)]

use super::packed::PackedRing;
use super::ring::{Seg, VirtRing, Vring, MAX_SEGS};
use crate::offload::{
    self, VnetHdr, F_NEEDS_CSUM, GSO_ECN, GSO_NONE, GSO_TCPV4, GSO_TCPV6, VNET_HDR_LEN,
};
use crate::{NetdevError, QueueStats, RxMeta, RxQueue, TxFrame, TxQueue};
use std::cell::UnsafeCell;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::Arc;

/// Largest frame taken from the guest (64 KiB plus Ethernet and VLAN
/// headers), header excluded.
pub const MAX_FRAME: usize = 65_536 + 64;

/// How often a transmit queue tries again for a ring that another PMD
/// holds (about a burst's time) before it drops the burst.
const SHARE_SPINS: u32 = 20_000;

/// A ring as the PMD uses it.
#[derive(Debug)]
pub(crate) struct ActiveRing {
    /// The virtqueue.
    pub ring: AnyRing,
    /// How the port uses it.
    pub cfg: RingCfg,
}

/// A virtqueue of either layout (`VIRTIO_F_RING_PACKED` decides).
#[derive(Debug)]
pub(crate) enum AnyRing {
    /// The split ring.
    Split(Vring),
    /// The packed ring.
    Packed(PackedRing),
}

impl AnyRing {
    /// Where the ring stopped, as `GET_VRING_BASE` answers it.
    pub(crate) fn base(&self) -> u32 {
        match self {
            AnyRing::Split(r) => u32::from(r.last_avail()),
            AnyRing::Packed(r) => r.base(),
        }
    }
}

/// What the port knows of a running ring besides the ring itself.
#[derive(Debug)]
pub(crate) struct RingCfg {
    /// The guest's `call` eventfd (-1: none); owned by the control thread,
    /// which closes it only after withdrawing the ring.
    pub call: RawFd,
    /// Virtio-net header length (12 or 10).
    pub hdr_len: usize,
    /// `MRG_RXBUF` negotiated.
    pub mergeable: bool,
    /// The checksum and segmentation offloads negotiated.
    pub offloads: Offloads,
}

/// The checksum and segmentation offloads a guest negotiated, as the PMDs
/// use them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Offloads {
    /// `CSUM`: the guest's frames say in their header when their transport
    /// checksum is left to complete (and, with `HOST_TSO4`/`HOST_TSO6`,
    /// when they are TCP super-frames).
    pub from_guest: bool,
    /// `HOST_TSO4`.
    pub host_tso4: bool,
    /// `HOST_TSO6`.
    pub host_tso6: bool,
    /// `HOST_ECN`: the guest's super-frames may be marked ECN.
    pub host_ecn: bool,
    /// `GUEST_CSUM`: the guest takes frames with a partial checksum.
    pub csum: bool,
    /// `GUEST_TSO4`.
    pub tso4: bool,
    /// `GUEST_TSO6`.
    pub tso6: bool,
    /// `GUEST_ECN`: the guest takes super-frames marked ECN.
    pub ecn: bool,
}

impl Offloads {
    /// The offloads of negotiated `features`.
    pub(crate) fn of(features: u64) -> Offloads {
        use super::protocol::feature as f;
        let on = |bit: u64| features & bit != 0;
        let from_guest = on(f::NET_CSUM);
        let csum = on(f::NET_GUEST_CSUM);
        let host_tso4 = from_guest && on(f::NET_HOST_TSO4);
        let host_tso6 = from_guest && on(f::NET_HOST_TSO6);
        let tso4 = csum && on(f::NET_GUEST_TSO4);
        let tso6 = csum && on(f::NET_GUEST_TSO6);
        // (ECN marks only mean something on super-frames: each needs a
        // TSO feature beside it, as the virtio spec says.)
        Offloads {
            from_guest,
            host_tso4,
            host_tso6,
            host_ecn: (host_tso4 || host_tso6) && on(f::NET_HOST_ECN),
            csum,
            tso4,
            tso6,
            ecn: (tso4 || tso6) && on(f::NET_GUEST_ECN),
        }
    }

    /// Whether the guest takes a frame with offload state `v` as it is
    /// (an ECN-marked super-frame only with `GUEST_ECN`).
    fn takes(&self, v: &VnetHdr) -> bool {
        (v.flags & F_NEEDS_CSUM == 0 || self.csum)
            && (v.gso_type & GSO_ECN == 0 || self.ecn)
            && match v.gso_type & !GSO_ECN {
                GSO_NONE => true,
                GSO_TCPV4 => self.tso4,
                GSO_TCPV6 => self.tso6,
                _ => false,
            }
    }

    /// The offload state of a `len`-byte frame the guest sent with header
    /// `h`: `Ok(None)` for a complete frame, `Err` for a header that does
    /// not describe the frame or asks for an offload not negotiated (the
    /// guest is not trusted: the checksum's place must lie in the frame,
    /// after the Ethernet header; a super-frame must be TCP with a segment
    /// size and a partial checksum).
    fn check_guest(&self, h: VnetHdr, len: usize) -> Result<Option<VnetHdr>, ()> {
        let needs_csum = h.flags & F_NEEDS_CSUM != 0;
        let gso = h.gso_type & !GSO_ECN;
        if !needs_csum {
            // (A super-frame without a partial checksum is not one the
            // spec allows.)
            return if gso == GSO_NONE { Ok(None) } else { Err(()) };
        }
        let end = usize::from(h.csum_start) + usize::from(h.csum_offset) + 2;
        if h.csum_start < 14 || end > len {
            return Err(());
        }
        let ecn = h.gso_type & GSO_ECN != 0;
        let ok = match gso {
            // (A mark without segmentation means nothing: dropped below.)
            GSO_NONE => true,
            _ if ecn && !self.host_ecn => false,
            GSO_TCPV4 => self.host_tso4 && h.gso_size > 0,
            GSO_TCPV6 => self.host_tso6 && h.gso_size > 0,
            _ => false,
        };
        if !ok {
            return Err(());
        }
        Ok(Some(VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: if gso == GSO_NONE {
                GSO_NONE
            } else {
                h.gso_type
            },
            ..h
        }))
    }
}

/// The offload state the guest wrote in the header of the chain `segs`
/// (a `len`-byte frame) when it negotiated offloads (see
/// [`Offloads::check_guest`]).
fn guest_offload<R: VirtRing>(
    r: &R,
    c: &RingCfg,
    segs: &[Seg],
    len: usize,
) -> Result<Option<VnetHdr>, ()> {
    if !c.offloads.from_guest {
        return Ok(None);
    }
    let mut b = [0u8; VNET_HDR_LEN];
    if !r.read_head(segs, &mut b) {
        return Err(());
    }
    c.offloads.check_guest(VnetHdr::from_bytes(&b), len)
}

/// One virtqueue's hand-over point (module docs).
#[derive(Debug)]
pub(crate) struct QueueSlot {
    running: AtomicBool,
    busy: AtomicBool,
    ring: UnsafeCell<Option<ActiveRing>>,
    /// An eventfd of our own, for the whole life of the port: what an idle
    /// PMD waits on ([`RxQueue::poll_fd`]); the control thread writes it
    /// when the guest kicks.
    wake: OwnedFd,
    /// `wake` was written and not yet drained.
    kicked: AtomicBool,
    /// A frame the control thread puts in front of the guest's (the RARP
    /// announcing a migrated guest): the flag is tested once per receive
    /// call, the lock taken only when it is set.
    injected: std::sync::Mutex<Option<Vec<u8>>>,
    has_injected: AtomicBool,
}

// SAFETY: the cell is only accessed by the one thread that holds `busy`
// while `running` is set (a PMD), or by the control thread after it
// cleared `running` and saw `busy` clear (module docs).
unsafe impl Sync for QueueSlot {}

/// A PMD's hold on a running ring for one burst.
pub(crate) struct Claim<'a> {
    slot: &'a QueueSlot,
}

impl Claim<'_> {
    fn ring(&mut self) -> Option<&mut ActiveRing> {
        // SAFETY: this claim holds `busy` and saw `running` set, so the
        // control thread does not touch the cell until the claim drops.
        unsafe { (*self.slot.ring.get()).as_mut() }
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.slot.busy.store(false, Ordering::Release);
    }
}

impl QueueSlot {
    /// A slot with no ring, for port `port`.
    pub(crate) fn new(port: &str) -> Result<QueueSlot, NetdevError> {
        Ok(QueueSlot {
            running: AtomicBool::new(false),
            busy: AtomicBool::new(false),
            ring: UnsafeCell::new(None),
            wake: crate::sys::eventfd(port)?,
            kicked: AtomicBool::new(false),
            injected: std::sync::Mutex::new(None),
            has_injected: AtomicBool::new(false),
        })
    }

    /// Control side: the guest kicked; wakes a PMD waiting on `wake`.
    pub(crate) fn kick(&self) {
        if !self.kicked.swap(true, Ordering::AcqRel) {
            interrupt(self.wake.as_raw_fd());
        }
    }

    /// Control side: hands `frame` to the PMD as if the guest had sent it
    /// (it comes before the guest's next frames) and wakes the PMD.
    pub(crate) fn inject(&self, frame: Vec<u8>) {
        if let Ok(mut g) = self.injected.lock() {
            *g = Some(frame);
            self.has_injected.store(true, Ordering::Release);
        }
        self.kick();
    }

    /// PMD side: the injected frame, if one waits.
    fn take_injected(&self) -> Option<Vec<u8>> {
        if !self.has_injected.load(Ordering::Acquire) {
            return None;
        }
        self.has_injected.store(false, Ordering::Relaxed);
        self.injected.lock().ok()?.take()
    }

    /// Whether a kick is waiting for the PMD (the control thread stops
    /// watching the guest's kicks until the PMD has seen it, so a guest
    /// that kicks without end costs at most one wake-up per poll).
    pub(crate) fn kicked(&self) -> bool {
        self.kicked.load(Ordering::Acquire)
    }

    /// PMD side: clears a kick (one read of `wake`, only after a kick).
    fn drain_kick(&self) {
        if self.kicked.load(Ordering::Relaxed) && self.kicked.swap(false, Ordering::AcqRel) {
            let mut v = 0u64;
            // SAFETY: reading 8 bytes into a live u64 from our own
            // non-blocking eventfd.
            unsafe { libc::read(self.wake.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
        }
    }

    /// PMD side: holds the ring for a burst, if it runs and nobody else
    /// holds it.
    pub(crate) fn claim(&self) -> Option<Claim<'_>> {
        if self
            .busy
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::Relaxed)
            .is_err()
        {
            return None;
        }
        let c = Claim { slot: self };
        if !self.running.load(Ordering::SeqCst) {
            return None; // `c` drops: busy cleared.
        }
        Some(c)
    }

    /// Whether the ring runs (a hint: it may stop at any time).
    pub(crate) fn is_running(&self) -> bool {
        self.running.load(Ordering::Relaxed)
    }

    /// Control side: stops PMDs using the ring and takes its state.
    pub(crate) fn withdraw(&self) -> Option<ActiveRing> {
        self.running.store(false, Ordering::SeqCst);
        while self.busy.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        // SAFETY: `running` is clear and no PMD holds `busy` with it set,
        // so no PMD touches the cell (module docs).
        unsafe { (*self.ring.get()).take() }
    }

    /// Control side: hands a ring to the PMDs (after [`QueueSlot::withdraw`]).
    pub(crate) fn install(&self, r: ActiveRing) {
        if self.running.load(Ordering::SeqCst) {
            // Not the control thread's habit; withdrawing first keeps the
            // hand-over sound even so.
            self.withdraw();
        }
        // SAFETY: `running` is clear (the control thread withdrew the
        // ring first), so no PMD touches the cell.
        unsafe { *self.ring.get() = Some(r) };
        self.running.store(true, Ordering::SeqCst);
    }
}

/// Writes the guest's `call` eventfd.
fn interrupt(fd: RawFd) {
    if fd >= 0 {
        let one = 1u64;
        // SAFETY: writing 8 bytes from a live u64 to a descriptor the
        // control thread keeps open while the ring runs.
        unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
    }
}

/// Frames the guest transmits (one of its transmit virtqueues).
pub struct VhostRx {
    port: String,
    slot: Arc<QueueSlot>,
    segs: Vec<Seg>,
    buf: Vec<u8>,
    /// Walked one-buffer chains (head, buffer) not yet copied out.
    ready: Vec<(u16, Seg)>,
    stats: QueueStats,
}

/// Most one-buffer chains a receive call walks before copying them out.
const READY_MAX: usize = 64;

/// Copies the frame of the walked chain `segs` out into `buf` and hands it
/// to `f` with its offload state (counted); a frame that does not fit or
/// whose header fails its checks is counted in `errors`. Whether it was
/// handed over.
fn hand_over<R: VirtRing>(
    r: &R,
    c: &RingCfg,
    segs: &[Seg],
    buf: &mut Vec<u8>,
    stats: &mut QueueStats,
    f: &mut dyn FnMut(&[u8], RxMeta),
) -> bool {
    let vnet = match r.gather(segs, c.hdr_len, buf) {
        true => guest_offload(r, c, segs, buf.len()),
        false => Err(()),
    };
    let Ok(vnet) = vnet else {
        stats.errors += 1;
        return false;
    };
    stats.packets += 1;
    stats.bytes += buf.len() as u64;
    f(
        buf,
        RxMeta {
            vnet,
            ..RxMeta::default()
        },
    );
    true
}

/// Copies the frames of the walked chains in `ready` out (each handed to
/// `f`) and returns their buffers, in order; returns how many were
/// handed over.
fn take_ready<R: VirtRing>(
    r: &mut R,
    c: &RingCfg,
    ready: &mut Vec<(u16, Seg)>,
    buf: &mut Vec<u8>,
    stats: &mut QueueStats,
    f: &mut dyn FnMut(&[u8], RxMeta),
) -> usize {
    let mut n = 0;
    for (head, seg) in ready.iter() {
        n += usize::from(hand_over(r, c, std::slice::from_ref(seg), buf, stats, f));
        r.push_used(*head, 0);
    }
    ready.clear();
    n
}

/// One receive burst on ring `r` (see [`VhostRx`]'s `recv`).
#[allow(clippy::too_many_arguments)]
fn recv_burst<R: VirtRing>(
    r: &mut R,
    c: &RingCfg,
    max: usize,
    segs: &mut Vec<Seg>,
    buf: &mut Vec<u8>,
    ready: &mut Vec<(u16, Seg)>,
    stats: &mut QueueStats,
    f: &mut dyn FnMut(&[u8], RxMeta),
) -> usize {
    let mut n = 0;
    // Chains of one buffer are walked first and copied out together
    // (their first lines asked for in one go): the guest wrote them
    // from its own core. Others are taken in their turn.
    let max_total = (c.hdr_len + MAX_FRAME) as u64;
    while n + ready.len() < max {
        match r.pending() {
            // (Kicks are asked for only by an idle PMD: `arm_wakeup`.)
            Ok(0) => break,
            Ok(_) => r.set_notify(false),
            Err(_) => {
                stats.errors += 1;
                break;
            }
        }
        let head = r.take_head();
        match r.walk_chain(head, false, max_total, segs) {
            Ok(total)
                if total as usize > c.hdr_len && segs.len() == 1 && ready.len() < READY_MAX =>
            {
                r.prefetch_seg(&segs[0], c.hdr_len);
                ready.push((head, segs[0]));
                continue;
            }
            walked => {
                // Keep the used ring in order: the chains before first.
                n += take_ready(r, c, ready, buf, stats, f);
                match walked {
                    Ok(total) if total as usize > c.hdr_len => {
                        n += usize::from(hand_over(r, c, segs, buf, stats, f));
                    }
                    _ => stats.errors += 1,
                }
                if walked.is_ok() {
                    r.push_used(head, 0);
                } else {
                    r.refuse(head);
                }
            }
        }
    }
    n += take_ready(r, c, ready, buf, stats, f);
    if r.publish() {
        interrupt(c.call);
    }
    n
}

/// Asks the guest on ring `r` for a kick, then looks once more: whether
/// the ring is still empty.
fn arm<R: VirtRing>(r: &mut R) -> bool {
    // A frame posted before the guest saw the request would get no kick.
    // (`recv` withdraws the request when it finds frames.)
    r.set_notify(true);
    fence(Ordering::SeqCst);
    r.pending() == Ok(0)
}

impl std::fmt::Debug for VhostRx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VhostRx").field("port", &self.port).finish()
    }
}

impl VhostRx {
    pub(crate) fn new(port: &str, slot: Arc<QueueSlot>) -> VhostRx {
        VhostRx {
            port: port.to_string(),
            slot,
            segs: Vec::with_capacity(MAX_SEGS),
            buf: Vec::with_capacity(MAX_FRAME),
            ready: Vec::with_capacity(READY_MAX),
            stats: QueueStats::default(),
        }
    }
}

impl RxQueue for VhostRx {
    fn recv(&mut self, max: usize, f: &mut dyn FnMut(&[u8], RxMeta)) -> Result<usize, NetdevError> {
        let VhostRx {
            slot,
            segs,
            buf,
            ready,
            stats,
            ..
        } = self;
        slot.drain_kick();
        let mut n = 0;
        if let Some(frame) = slot.take_injected() {
            stats.packets += 1;
            stats.bytes += frame.len() as u64;
            f(&frame, RxMeta::default());
            n = 1;
        }
        let Some(mut claim) = slot.claim() else {
            return Ok(n);
        };
        let Some(a) = claim.ring() else {
            return Ok(n);
        };
        let max = max.saturating_sub(n);
        Ok(n + match &mut a.ring {
            AnyRing::Split(r) => recv_burst(r, &a.cfg, max, segs, buf, ready, stats, f),
            AnyRing::Packed(r) => recv_burst(r, &a.cfg, max, segs, buf, ready, stats, f),
        })
    }

    fn poll_fd(&self) -> Option<RawFd> {
        Some(self.slot.wake.as_raw_fd())
    }

    fn arm_wakeup(&mut self) -> bool {
        let Some(mut claim) = self.slot.claim() else {
            // Not running: the control thread wakes the PMD when it
            // installs the ring.
            return true;
        };
        let Some(a) = claim.ring() else {
            return true;
        };
        match &mut a.ring {
            AnyRing::Split(r) => arm(r),
            AnyRing::Packed(r) => arm(r),
        }
    }

    fn stats(&self) -> QueueStats {
        self.stats
    }
}

/// Frames for the guest (its receive virtqueues; this queue prefers one
/// and takes another that runs when that one does not, waiting for it
/// while another transmit queue holds it).
pub struct VhostTx {
    slots: Vec<Arc<QueueSlot>>,
    first: usize,
    segs: Vec<Seg>,
    hdr_segs: Vec<Seg>,
    /// The burst's frames that fit one receive buffer, written into the
    /// guest's memory together before the burst is published.
    later: Vec<Later>,
    /// Where a frame with offload state the guest did not negotiate is
    /// finished (its checksum completed, a super-frame's segments).
    scratch: Vec<u8>,
    stats: QueueStats,
}

/// A frame to write into one receive buffer of the guest: a virtio-net
/// header (zeros, one buffer) and `len` bytes from `src` at `dst`.
struct Later {
    dst: Seg,
    src: *const u8,
    len: usize,
}

// SAFETY: a `Later` lives only inside one `send` call (the list is empty
// between calls), on the thread making it.
unsafe impl Send for Later {}

/// Most frames a burst keeps for writing together (a PMD's output batch
/// is 32; a longer burst writes every `LATER_MAX` frames).
const LATER_MAX: usize = 64;

/// The virtio-net header of a frame in one buffer: no offload, and (with
/// the 12-byte header) `num_buffers` 1.
const HDR_ONE_BUFFER: [u8; 12] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0];

impl std::fmt::Debug for VhostTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VhostTx")
            .field("first", &self.first)
            .finish()
    }
}

impl VhostTx {
    /// `slots`: the guest's receive virtqueues; `first`: the preferred one.
    pub(crate) fn new(slots: Vec<Arc<QueueSlot>>, first: usize) -> VhostTx {
        VhostTx {
            slots,
            first,
            segs: Vec::with_capacity(MAX_SEGS),
            hdr_segs: Vec::with_capacity(MAX_SEGS),
            later: Vec::with_capacity(LATER_MAX),
            scratch: Vec::new(),
            stats: QueueStats::default(),
        }
    }
}

/// Writes the frames kept in `later` into the guest's buffers: one after
/// the other, with nothing in between, so the cache lines the guest's core
/// holds are fetched together.
fn write_later<R: VirtRing>(r: &R, c: &RingCfg, later: &mut Vec<Later>) {
    for l in later.iter() {
        // SAFETY: `src` points at `len` bytes of a frame the caller of
        // `send` lent for the whole call (written before it returns), and
        // `dst` was checked by `deliver` to hold the header and the frame.
        let data = unsafe { std::slice::from_raw_parts(l.src, l.len) };
        r.scatter(
            std::slice::from_ref(&l.dst),
            0,
            &[&HDR_ONE_BUFFER[..c.hdr_len], data],
        );
    }
    later.clear();
}

/// Why a frame was not delivered.
enum Undelivered {
    /// No (big enough) buffer: dropped; so will the rest of the burst be.
    Full,
    /// The guest's chain was malformed: the ring is stopped.
    Bad,
}

/// Writes one frame into the guest's receive buffers; one without offload
/// header (`offload` None) that fits its first buffer is only claimed and
/// kept in `later` (its used entry is not published before the caller
/// writes it: [`write_later`]); one with it is written at once, its
/// virtio-net header saying `offload`.
fn deliver<R: VirtRing>(
    r: &mut R,
    c: &RingCfg,
    data: &[u8],
    offload: Option<&VnetHdr>,
    segs: &mut Vec<Seg>,
    hdr_segs: &mut Vec<Seg>,
    later: &mut Vec<Later>,
) -> Result<(), Undelivered> {
    let need = c.hdr_len + data.len();
    if offload.is_none() && later.len() < LATER_MAX {
        match r.pending() {
            Ok(0) => return Err(Undelivered::Full),
            Ok(_) => {}
            Err(_) => return Err(Undelivered::Bad),
        }
        let mark = r.mark();
        let head = r.take_head();
        if r.walk_chain(head, true, u64::MAX, segs).is_err() {
            r.rewind(mark);
            r.set_broken();
            return Err(Undelivered::Bad);
        }
        if let [seg] = segs[..] {
            if seg.len() as usize >= need {
                later.push(Later {
                    dst: seg,
                    src: data.as_ptr(),
                    len: data.len(),
                });
                r.push_used(head, need as u32);
                return Ok(());
            }
        }
        // Several buffers: written at once below.
        r.rewind(mark);
    }
    let mut hdr = [0u8; 12];
    if let Some(v) = offload {
        hdr[..VNET_HDR_LEN].copy_from_slice(&v.to_bytes());
    }
    let hdr = &hdr[..c.hdr_len];
    let mark = r.mark();
    let mut done = 0usize;
    let mut bufs = 0u16;
    while done < need {
        match r.pending() {
            Ok(0) => {
                r.rewind(mark);
                return Err(Undelivered::Full);
            }
            Ok(_) => {}
            Err(_) => {
                r.rewind(mark);
                return Err(Undelivered::Bad);
            }
        }
        let head = r.take_head();
        if r.walk_chain(head, true, u64::MAX, segs).is_err() {
            r.rewind(mark);
            r.set_broken();
            return Err(Undelivered::Bad);
        }
        let h = &hdr[done.min(hdr.len())..];
        let d = &data[done.saturating_sub(hdr.len()).min(data.len())..];
        let n = r.scatter(segs, 0, &[h, d]);
        if bufs == 0 {
            hdr_segs.clear();
            hdr_segs.extend_from_slice(segs);
        }
        r.push_used(head, n as u32);
        done += n;
        bufs += 1;
        if done < need && !c.mergeable {
            r.rewind(mark);
            return Err(Undelivered::Full);
        }
    }
    if c.hdr_len == 12 {
        r.scatter(hdr_segs, 10, &[&bufs.to_le_bytes()]);
    }
    Ok(())
}

/// Counts what [`deliver`] did with a `len`-byte frame (`full` set once a
/// frame found no room: the rest of the burst is dropped); true if sent.
fn count(r: Result<(), Undelivered>, len: usize, stats: &mut QueueStats, full: &mut bool) -> bool {
    match r {
        Ok(()) => {
            stats.packets += 1;
            stats.bytes += len as u64;
            true
        }
        Err(Undelivered::Full) => {
            stats.dropped += 1;
            *full = true;
            false
        }
        Err(Undelivered::Bad) => {
            stats.errors += 1;
            stats.dropped += 1;
            *full = true;
            false
        }
    }
}

/// The scratch lists of a transmit queue: segments, the first buffer's
/// segments, frames kept for writing together, the finishing buffer.
type TxBufs<'a> = (
    &'a mut Vec<Seg>,
    &'a mut Vec<Seg>,
    &'a mut Vec<Later>,
    &'a mut Vec<u8>,
);

/// One transmit burst on ring `r` (see [`VhostTx`]'s `send`); how many
/// frames were sent.
fn send_burst<R: VirtRing>(
    r: &mut R,
    c: &RingCfg,
    frames: &mut dyn Iterator<Item = TxFrame<'_>>,
    (segs, hdr_segs, later, scratch): TxBufs<'_>,
    stats: &mut QueueStats,
) -> usize {
    let mut sent = 0;
    let mut full = false;
    for f in frames {
        if full {
            stats.dropped += 1;
            continue;
        }
        if later.len() == LATER_MAX {
            write_later(r, c, later);
        }
        let v = f.vnet.filter(|v| !v.is_plain());
        match v {
            // The guest takes the offload state as it is, or nothing
            // is left to do.
            None => {
                sent += usize::from(count(
                    deliver(r, c, f.data, None, segs, hdr_segs, later),
                    f.data.len(),
                    stats,
                    &mut full,
                ))
            }
            Some(v) if c.offloads.takes(&v) => {
                sent += usize::from(count(
                    deliver(r, c, f.data, Some(&v), segs, hdr_segs, later),
                    f.data.len(),
                    stats,
                    &mut full,
                ));
            }
            // Finished here (each piece written at once: `scratch`
            // holds one piece at a time).
            Some(v) => {
                let zero = VnetHdr::default();
                let mut any = false;
                let r = offload::finish(f.data, &v, scratch, &mut |seg| {
                    if !full {
                        any |= count(
                            deliver(r, c, seg, Some(&zero), segs, hdr_segs, later),
                            seg.len(),
                            stats,
                            &mut full,
                        );
                    } else {
                        stats.dropped += 1;
                    }
                });
                if r.is_err() {
                    stats.errors += 1;
                    stats.dropped += 1;
                }
                sent += usize::from(any);
            }
        }
    }
    write_later(r, c, later);
    if r.publish() {
        interrupt(c.call);
    }
    sent
}

impl TxQueue for VhostTx {
    fn send(&mut self, frames: &mut dyn Iterator<Item = TxFrame<'_>>) -> usize {
        let VhostTx {
            slots,
            first,
            segs,
            hdr_segs,
            later,
            scratch,
            stats,
        } = self;
        let k = slots.len();
        // Our own ring first, then any other that runs; if every running
        // one is held by another PMD, wait for one (a burst's time).
        let mut claim = None;
        for round in 0..SHARE_SPINS {
            claim = (0..k).find_map(|i| slots[(*first + i) % k].claim());
            if claim.is_some() || (round == 0 && !slots.iter().any(|s| s.is_running())) {
                break;
            }
            std::hint::spin_loop();
        }
        let Some(a) = claim.as_mut().and_then(|c| c.ring()) else {
            stats.dropped += frames.count() as u64;
            return 0;
        };
        let bufs = (segs, hdr_segs, later, scratch);
        match &mut a.ring {
            AnyRing::Split(r) => send_burst(r, &a.cfg, frames, bufs, stats),
            AnyRing::Packed(r) => send_burst(r, &a.cfg, frames, bufs, stats),
        }
    }

    fn takes_vnet_hdr(&self) -> bool {
        // (What a guest did not negotiate is finished in `send`.)
        true
    }

    fn stats(&self) -> QueueStats {
        self.stats
    }
}

#[cfg(test)]
mod tests;
