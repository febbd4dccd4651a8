//! `afxdp:IFNAME[,mode=native|generic][,queues=N]`: AF_XDP sockets, one
//! per rx queue, fed by our own XDP program.
//!
//! What happens on open (facts from the kernel's AF_XDP documentation):
//!
//! 1. Per queue, an `AF_XDP` socket with its own UMEM (an anonymous
//!    mapping of [`NUM_FRAMES`] frames of [`FRAME_SIZE`] bytes; the first
//!    half is for receiving, the second for transmitting), its four rings
//!    (fill, completion, rx, tx; [`RING_SIZE`] entries each) mapped into
//!    the process, the fill ring stocked, and a bind to (interface, queue)
//!    in zero-copy mode, falling back to copy mode when the driver has no
//!    zero-copy (veth has none). `XDP_USE_NEED_WAKEUP` is asked for, so the
//!    kernel says when it needs a kick.
//! 2. An `XSKMAP` with each socket at its queue's index.
//! 3. The XDP program, six hand-assembled eBPF instructions: redirect the
//!    frame to the socket of its rx queue (`bpf_redirect_map(map,
//!    ctx->rx_queue_index, XDP_PASS)`), or pass it to the kernel when that
//!    queue has none. No BTF is needed.
//! 4. The program is attached with a BPF link (`BPF_LINK_CREATE`,
//!    native/driver mode where the driver has it, else generic), so it is
//!    detached when the link's descriptor closes — when the port closes,
//!    and also if the process dies. An interface that already has an XDP
//!    program is refused, unless that program is the switch's own
//!    (`xdp_attached`), which a switch that just died still holds while
//!    the kernel releases it: that one is waited for (at most
//!    [`RELEASE_WAIT`]), as is a queue its socket still holds.
//!
//! Receive: descriptors are read from the rx ring and each frame handed
//! to the caller straight from the UMEM; the frames go back to the fill
//! ring at once (no allocation, no syscall unless the kernel asks for a
//! wake-up). Transmit (on queue 0's socket): completions are reaped, each
//! frame copied into a free tx frame, the burst submitted and the kernel
//! kicked with one `sendto` (copy mode always needs the kick; the kernel
//! sends a limited number per kick, so the kick repeats a few times while
//! the ring still holds frames).
//!
//! Offload state: AF_XDP carries none, yet a software peer with tx
//! checksum offload on sends frames with partial checksums, and one with
//! TSO on (in generic mode) GSO super-frames the kernel drops: each rx
//! queue finishes the former in place and watches for the latter, counts
//! both and logs them once per port with the remedy
//! (the `xsk_offload` module).
//!
//! Invariants: ring indices shared with the kernel are read with acquire
//! and published with release ordering; each ring has exactly one user
//! (the rx queue owns rx + fill, the tx side owns tx + completion), which
//! is what makes the socket safe to share between the two; descriptors
//! from the kernel are bounds-checked against the UMEM before use.
#![allow(unsafe_code)]

use crate::sys::{self, Mmap};
use crate::xdp_attached;
use crate::xsk_offload::{too_big, RxOffload};
use crate::{
    NetdevError, OpenPort, PortSpec, QueueStats, RxMeta, RxQueue, TxFrame, TxQueue, XdpMode,
};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Frames per UMEM (half rx, half tx).
pub const NUM_FRAMES: u32 = 4096;
/// Bytes per frame (a page would also do; 2 KiB fits any 1500-byte MTU
/// frame with the kernel's headroom).
pub const FRAME_SIZE: u32 = 2048;
/// Entries per ring.
pub const RING_SIZE: u32 = 2048;

/// How long opening waits for a queue or an XDP attachment that a
/// switch which just died still holds (the kernel releases its sockets
/// and links shortly after the process is gone).
pub const RELEASE_WAIT: Duration = Duration::from_secs(5);

const AF_XDP: i32 = 44;
const SOL_XDP: i32 = 283;
const XDP_MMAP_OFFSETS: i32 = 1;
const XDP_RX_RING: i32 = 2;
const XDP_TX_RING: i32 = 3;
const XDP_UMEM_REG: i32 = 4;
const XDP_UMEM_FILL_RING: i32 = 5;
const XDP_UMEM_COMPLETION_RING: i32 = 6;
const XDP_STATISTICS: i32 = 7;
const XDP_PGOFF_RX_RING: i64 = 0;
const XDP_PGOFF_TX_RING: i64 = 0x8000_0000;
const XDP_UMEM_PGOFF_FILL_RING: i64 = 0x1_0000_0000;
const XDP_UMEM_PGOFF_COMPLETION_RING: i64 = 0x1_8000_0000;
const XDP_COPY: u16 = 1 << 1;
const XDP_ZEROCOPY: u16 = 1 << 2;
const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
const XDP_RING_NEED_WAKEUP: u32 = 1;

const BPF_MAP_CREATE: i64 = 0;
const BPF_MAP_UPDATE_ELEM: i64 = 2;
const BPF_PROG_LOAD: i64 = 5;
const BPF_LINK_CREATE: i64 = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
const XDP_PASS: i32 = 2;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;

/// `struct xdp_umem_reg` (with `flags` and `tx_metadata_len`).
#[derive(Clone, Copy, Default)]
#[repr(C)]
struct UmemReg {
    addr: u64,
    len: u64,
    chunk_size: u32,
    headroom: u32,
    flags: u32,
    tx_metadata_len: u32,
}

/// `struct xdp_ring_offset`.
#[derive(Clone, Copy, Default, Debug)]
#[repr(C)]
struct RingOffset {
    producer: u64,
    consumer: u64,
    desc: u64,
    flags: u64,
}

/// `struct xdp_mmap_offsets`.
#[derive(Clone, Copy, Default, Debug)]
#[repr(C)]
struct MmapOffsets {
    rx: RingOffset,
    tx: RingOffset,
    fr: RingOffset,
    cr: RingOffset,
}

/// `struct xdp_statistics`.
#[derive(Clone, Copy, Default)]
#[repr(C)]
struct XdpStatistics {
    rx_dropped: u64,
    rx_invalid_descs: u64,
    tx_invalid_descs: u64,
    rx_ring_full: u64,
    rx_fill_ring_empty_descs: u64,
    tx_ring_empty_descs: u64,
}

/// `struct sockaddr_xdp`.
#[repr(C)]
struct SockaddrXdp {
    family: u16,
    flags: u16,
    ifindex: u32,
    queue_id: u32,
    shared_umem_fd: u32,
}

/// One mapped ring: the kernel's producer/consumer words, flags, and the
/// entries (`u64` addresses for fill/completion, 16-byte descriptors for
/// rx/tx).
struct Ring {
    _map: Mmap,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    desc: *mut u8,
    mask: u32,
}

impl Ring {
    fn map(
        port: &str,
        fd: RawFd,
        off: &RingOffset,
        entry: usize,
        pgoff: i64,
        what: &str,
    ) -> Result<Ring, NetdevError> {
        let len = off.desc as usize + RING_SIZE as usize * entry;
        let map = Mmap::map(port, fd, len, pgoff, what)?;
        let base = map.ptr();
        // SAFETY: the offsets come from the kernel (XDP_MMAP_OFFSETS) for
        // this very mapping, all below `off.desc` < `len`; the words are
        // 4-byte aligned u32s shared with the kernel, only accessed
        // atomically.
        unsafe {
            Ok(Ring {
                producer: base.add(off.producer as usize) as *const AtomicU32,
                consumer: base.add(off.consumer as usize) as *const AtomicU32,
                flags: base.add(off.flags as usize) as *const AtomicU32,
                desc: base.add(off.desc as usize),
                mask: RING_SIZE - 1,
                _map: map,
            })
        }
    }

    fn prod(&self) -> &AtomicU32 {
        // SAFETY: points into `_map`, alive as long as `self` (see `map`).
        unsafe { &*self.producer }
    }

    fn cons(&self) -> &AtomicU32 {
        // SAFETY: as `prod`.
        unsafe { &*self.consumer }
    }

    fn needs_wakeup(&self) -> bool {
        // SAFETY: as `prod`.
        unsafe { &*self.flags }.load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP != 0
    }

    /// Reads the 16-byte descriptor at index `i`: (addr, len).
    fn desc_at(&self, i: u32) -> (u64, u32) {
        // SAFETY: `(i & mask) * 16 + 16 <= RING_SIZE * 16`, inside the
        // mapping; the entry is owned by the user between the kernel's
        // producer and our consumer index.
        unsafe {
            let p = self.desc.add((i & self.mask) as usize * 16);
            (
                std::ptr::read_unaligned(p as *const u64),
                std::ptr::read_unaligned(p.add(8) as *const u32),
            )
        }
    }

    fn set_desc(&self, i: u32, addr: u64, len: u32) {
        // SAFETY: as `desc_at`; the slot is ours until we publish it.
        unsafe {
            let p = self.desc.add((i & self.mask) as usize * 16);
            std::ptr::write_unaligned(p as *mut u64, addr);
            std::ptr::write_unaligned(p.add(8) as *mut u32, len);
            std::ptr::write_unaligned(p.add(12) as *mut u32, 0);
        }
    }

    fn addr_at(&self, i: u32) -> u64 {
        // SAFETY: `(i & mask) * 8 + 8 <= RING_SIZE * 8`, inside the mapping.
        unsafe {
            std::ptr::read_unaligned(self.desc.add((i & self.mask) as usize * 8) as *const u64)
        }
    }

    fn set_addr(&self, i: u32, addr: u64) {
        // SAFETY: as `addr_at`; the slot is ours until we publish it.
        unsafe {
            std::ptr::write_unaligned(
                self.desc.add((i & self.mask) as usize * 8) as *mut u64,
                addr,
            )
        }
    }
}

/// A socket with its UMEM and rings.
struct Xsk {
    port: String,
    fd: OwnedFd,
    umem: Mmap,
    fill: Ring,
    comp: Ring,
    rx: Ring,
    tx: Ring,
    zero_copy: bool,
}

// SAFETY: the raw pointers point into mappings this value owns. The rings
// are used by exactly one party each — the rx queue uses `rx` and `fill`
// (and the rx half of the UMEM), the tx side uses `tx` and `comp` (and
// the tx half) — so sharing the socket between the two threads that own
// those parties touches no memory from two threads.
unsafe impl Send for Xsk {}
// SAFETY: as above.
unsafe impl Sync for Xsk {}

impl Xsk {
    /// A received frame, writable: only the rx queue calls this, for a
    /// frame between rx consume and its return to the fill ring.
    #[allow(clippy::mut_from_ref)]
    fn rx_frame(&self, addr: u64, len: u32) -> Option<&mut [u8]> {
        let a = usize::try_from(addr).ok()?;
        let end = a.checked_add(len as usize)?;
        // The rx half of the UMEM only (the tx side owns the rest).
        if end > (NUM_FRAMES / 2 * FRAME_SIZE) as usize || end > self.umem.len() {
            return None;
        }
        // SAFETY: `a..end` is inside the UMEM's rx half (checked). The
        // frame is the user's between rx consume and its return to the
        // fill ring: the kernel does not touch it, the tx side never
        // touches the rx half, and the one rx queue (the caller, through
        // `&mut XskRx`) holds no other reference to it.
        Some(unsafe { std::slice::from_raw_parts_mut(self.umem.ptr().add(a), len as usize) })
    }

    /// The kernel's counters of this socket (zero if unreadable).
    fn kernel_stats(&self) -> XdpStatistics {
        sys::getsockopt::<XdpStatistics>(
            &self.port,
            self.fd.as_raw_fd(),
            SOL_XDP,
            XDP_STATISTICS,
            "XDP_STATISTICS",
        )
        .unwrap_or_default()
    }

    /// Frames the kernel dropped as too big for a UMEM frame.
    fn too_big(&self) -> u64 {
        let k = self.kernel_stats();
        too_big(k.rx_dropped, k.rx_fill_ring_empty_descs)
    }

    /// Wakes the kernel for the fill/rx side (recvfrom, non-blocking).
    fn kick_rx(&self) {
        // SAFETY: a zero-length receive into no buffer, non-blocking.
        unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
    }

    /// Asks the kernel to send what the tx ring holds.
    fn kick_tx(&self) -> Result<(), i32> {
        // SAFETY: a zero-length send of no buffer, non-blocking.
        let r = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if r < 0 {
            let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            if !matches!(e, libc::EAGAIN | libc::EBUSY | libc::ENOBUFS | libc::EINTR) {
                return Err(e);
            }
        }
        Ok(())
    }
}

/// One rx queue: a socket's rx and fill rings.
pub struct XskRx {
    xsk: Arc<Xsk>,
    stats: QueueStats,
    offload: RxOffload,
}

impl std::fmt::Debug for XskRx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XskRx")
            .field("port", &self.xsk.port)
            .finish()
    }
}

impl RxQueue for XskRx {
    fn recv(&mut self, max: usize, f: &mut dyn FnMut(&[u8], RxMeta)) -> Result<usize, NetdevError> {
        let x = &*self.xsk;
        let cons = x.rx.cons().load(Ordering::Relaxed);
        let prod = x.rx.prod().load(Ordering::Acquire);
        let n = prod.wrapping_sub(cons).min(max as u32);
        if n == 0 {
            if x.fill.needs_wakeup() {
                x.kick_rx();
            }
            self.offload.empty_poll(|| x.too_big());
            return Ok(0);
        }
        let fprod = x.fill.prod().load(Ordering::Relaxed);
        for i in 0..n {
            let (addr, len) = x.rx.desc_at(cons.wrapping_add(i));
            match x.rx_frame(addr, len) {
                Some(data) => {
                    self.stats.packets += 1;
                    self.stats.bytes += u64::from(len);
                    self.offload.frame(data, &mut self.stats);
                    f(data, RxMeta::default());
                }
                None => self.stats.errors += 1,
            }
            // The frame goes straight back to the fill ring (its start:
            // the address may include the kernel's headroom).
            x.fill
                .set_addr(fprod.wrapping_add(i), addr & !u64::from(FRAME_SIZE - 1));
        }
        x.rx.cons().store(cons.wrapping_add(n), Ordering::Release);
        x.fill
            .prod()
            .store(fprod.wrapping_add(n), Ordering::Release);
        if x.fill.needs_wakeup() {
            x.kick_rx();
        }
        self.offload.burst(|| x.too_big());
        Ok(n as usize)
    }

    fn poll_fd(&self) -> Option<RawFd> {
        Some(self.xsk.fd.as_raw_fd())
    }

    fn stats(&self) -> QueueStats {
        let k = self.xsk.kernel_stats();
        QueueStats {
            dropped: k.rx_dropped + k.rx_ring_full,
            errors: self.stats.errors + k.rx_invalid_descs,
            too_big: too_big(k.rx_dropped, k.rx_fill_ring_empty_descs),
            ..self.stats
        }
    }
}

/// The transmit side: queue 0's tx and completion rings, the UMEM's tx
/// half.
pub struct XskTx {
    xsk: Arc<Xsk>,
    free: Vec<u64>,
    stats: QueueStats,
}

impl std::fmt::Debug for XskTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XskTx")
            .field("port", &self.xsk.port)
            .finish()
    }
}

impl XskTx {
    fn reap(&mut self) {
        let x = &*self.xsk;
        let cons = x.comp.cons().load(Ordering::Relaxed);
        let prod = x.comp.prod().load(Ordering::Acquire);
        let n = prod.wrapping_sub(cons);
        for i in 0..n {
            self.free.push(x.comp.addr_at(cons.wrapping_add(i)));
        }
        x.comp.cons().store(prod, Ordering::Release);
    }

    fn kick(&mut self) {
        let x = &*self.xsk;
        // Copy mode sends only when kicked; zero-copy only when the kernel
        // asks for a wake-up.
        if x.zero_copy && !x.tx.needs_wakeup() {
            return;
        }
        for _ in 0..8 {
            if x.kick_tx().is_err() {
                self.stats.errors += 1;
                return;
            }
            let pending =
                x.tx.prod().load(Ordering::Relaxed) != x.tx.cons().load(Ordering::Acquire);
            if !pending {
                return;
            }
        }
    }
}

impl TxQueue for XskTx {
    fn send(&mut self, frames: &mut dyn Iterator<Item = TxFrame<'_>>) -> usize {
        self.reap();
        let x = self.xsk.clone();
        let prod = x.tx.prod().load(Ordering::Relaxed);
        let room = RING_SIZE - prod.wrapping_sub(x.tx.cons().load(Ordering::Acquire));
        let mut n = 0u32;
        for f in frames {
            let len = f.data.len();
            if len > FRAME_SIZE as usize || n >= room {
                self.stats.dropped += 1;
                continue;
            }
            let Some(addr) = self.free.pop() else {
                self.stats.dropped += 1;
                continue;
            };
            // SAFETY: `addr` is a tx frame of FRAME_SIZE bytes inside the
            // UMEM (we put only such addresses in `free`), owned by us
            // until submitted; `len <= FRAME_SIZE`.
            unsafe {
                std::ptr::copy_nonoverlapping(f.data.as_ptr(), x.umem.ptr().add(addr as usize), len)
            };
            x.tx.set_desc(prod.wrapping_add(n), addr, len as u32);
            n += 1;
            self.stats.packets += 1;
            self.stats.bytes += len as u64;
        }
        if n > 0 {
            x.tx.prod().store(prod.wrapping_add(n), Ordering::Release);
            self.kick();
        }
        n as usize
    }

    fn flush(&mut self) -> Result<(), NetdevError> {
        self.reap();
        let x = &*self.xsk;
        if x.tx.prod().load(Ordering::Relaxed) != x.tx.cons().load(Ordering::Acquire) {
            self.kick();
        }
        Ok(())
    }

    fn stats(&self) -> QueueStats {
        self.stats
    }
}

/// What closes the port: the link (detaches the program), the program and
/// the map.
struct XdpGuard {
    _link: OwnedFd,
    _prog: OwnedFd,
    _map: OwnedFd,
}

/// `bpf(cmd, attr, size)`, returning a new descriptor.
fn bpf_fd(port: &str, cmd: i64, attr: &mut [u8; 128], what: &str) -> Result<OwnedFd, NetdevError> {
    // SAFETY: `attr` is a live, zero-padded bpf_attr of the size passed;
    // the kernel reads it (and writes into buffers it points to, which the
    // caller keeps alive).
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), attr.len()) };
    if r < 0 {
        return Err(NetdevError::last_os(port, what));
    }
    // SAFETY: `r` is a descriptor the kernel just returned, owned by nobody.
    Ok(unsafe { OwnedFd::from_raw_fd(r as RawFd) })
}

fn put_u32(a: &mut [u8; 128], off: usize, v: u32) {
    a[off..off + 4].copy_from_slice(&v.to_ne_bytes());
}

fn put_u64(a: &mut [u8; 128], off: usize, v: u64) {
    a[off..off + 8].copy_from_slice(&v.to_ne_bytes());
}

/// One eBPF instruction.
fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[0] = code;
    b[1] = dst | (src << 4);
    b[2..4].copy_from_slice(&off.to_ne_bytes());
    b[4..8].copy_from_slice(&imm.to_ne_bytes());
    b
}

/// The redirect program for map `map_fd`.
fn program(map_fd: RawFd) -> Vec<u8> {
    const BPF_PSEUDO_MAP_FD: u8 = 1;
    [
        // r2 = *(u32 *)(r1 + 16): xdp_md.rx_queue_index
        insn(0x61, 2, 1, 16, 0),
        // r1 = map (ld_imm64, two slots)
        insn(0x18, 1, BPF_PSEUDO_MAP_FD, 0, map_fd),
        insn(0, 0, 0, 0, 0),
        // r3 = XDP_PASS: the action when the queue has no socket
        insn(0xb7, 3, 0, 0, XDP_PASS),
        // call bpf_redirect_map
        insn(0x85, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),
        // exit
        insn(0x95, 0, 0, 0, 0),
    ]
    .concat()
}

/// Opens one socket on `queue`.
fn open_xsk(port: &str, ifindex: u32, queue: u32) -> Result<Xsk, NetdevError> {
    let fd = sys::socket(port, AF_XDP, libc::SOCK_RAW, 0)?;
    let raw = fd.as_raw_fd();
    let umem = Mmap::anonymous(port, (NUM_FRAMES * FRAME_SIZE) as usize)?;
    let reg = UmemReg {
        addr: umem.ptr() as u64,
        len: umem.len() as u64,
        chunk_size: FRAME_SIZE,
        ..UmemReg::default()
    };
    sys::setsockopt(port, raw, SOL_XDP, XDP_UMEM_REG, &reg, "XDP_UMEM_REG")?;
    for (opt, what) in [
        (XDP_UMEM_FILL_RING, "XDP_UMEM_FILL_RING"),
        (XDP_UMEM_COMPLETION_RING, "XDP_UMEM_COMPLETION_RING"),
        (XDP_RX_RING, "XDP_RX_RING"),
        (XDP_TX_RING, "XDP_TX_RING"),
    ] {
        sys::setsockopt(port, raw, SOL_XDP, opt, &RING_SIZE, what)?;
    }
    let off: MmapOffsets =
        sys::getsockopt(port, raw, SOL_XDP, XDP_MMAP_OFFSETS, "XDP_MMAP_OFFSETS")?;
    let fill = Ring::map(
        port,
        raw,
        &off.fr,
        8,
        XDP_UMEM_PGOFF_FILL_RING,
        "mmap fill ring",
    )?;
    let comp = Ring::map(
        port,
        raw,
        &off.cr,
        8,
        XDP_UMEM_PGOFF_COMPLETION_RING,
        "mmap completion ring",
    )?;
    let rx = Ring::map(port, raw, &off.rx, 16, XDP_PGOFF_RX_RING, "mmap rx ring")?;
    let tx = Ring::map(port, raw, &off.tx, 16, XDP_PGOFF_TX_RING, "mmap tx ring")?;
    // Stock the fill ring with the rx half of the UMEM.
    let n_rx = (NUM_FRAMES / 2).min(RING_SIZE);
    for i in 0..n_rx {
        fill.set_addr(i, u64::from(i * FRAME_SIZE));
    }
    fill.prod().store(n_rx, Ordering::Release);
    let mut zero_copy = true;
    let bind = |flags: u16| -> std::io::Result<()> {
        let sa = SockaddrXdp {
            family: AF_XDP as u16,
            flags: flags | XDP_USE_NEED_WAKEUP,
            ifindex,
            queue_id: queue,
            shared_umem_fd: 0,
        };
        // SAFETY: `sa` is a valid sockaddr_xdp of the size passed.
        let r = unsafe {
            libc::bind(
                raw,
                (&sa as *const SockaddrXdp).cast(),
                std::mem::size_of::<SockaddrXdp>() as libc::socklen_t,
            )
        };
        if r < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(())
        }
    };
    // A queue still held by the socket of a switch that just died (the
    // kernel releases it shortly after the process is gone) is waited
    // for, at most RELEASE_WAIT.
    let deadline = Instant::now() + RELEASE_WAIT;
    loop {
        if bind(XDP_ZEROCOPY).is_ok() {
            break;
        }
        zero_copy = false;
        match bind(XDP_COPY) {
            Ok(()) => break,
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(NetdevError::os(port, format!("bind to queue {queue}"), e)),
        }
    }
    Ok(Xsk {
        port: port.to_string(),
        fd,
        umem,
        fill,
        comp,
        rx,
        tx,
        zero_copy,
    })
}

/// The interface's rx queue count (from sysfs), or 1 if unknown.
fn rx_queue_count(ifname: &str) -> u32 {
    std::fs::read_dir(format!("/sys/class/net/{ifname}/queues"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                .count() as u32
        })
        .unwrap_or(1)
        .max(1)
}

/// Opens an `afxdp:` port; up to `extra` more transmit queues (the tx
/// rings of queues 1, 2, ... — as many as the port has rx queues).
pub fn open(spec: &PortSpec, extra: usize) -> Result<OpenPort, NetdevError> {
    let port = spec.to_string();
    let PortSpec::AfXdp {
        ifname,
        mode,
        queues,
    } = spec
    else {
        return Err(NetdevError::BadSpec {
            spec: port,
            reason: "not an afxdp port".into(),
        });
    };
    let ifindex = sys::ifindex(&port, ifname)?;
    let have = rx_queue_count(ifname);
    if *queues > have {
        return Err(NetdevError::BadSpec {
            spec: port,
            reason: format!("queues={queues}, but {ifname} has {have} rx queue(s)"),
        });
    }
    let mut xsks = Vec::new();
    for q in 0..*queues {
        xsks.push(Arc::new(open_xsk(&port, ifindex, q)?));
    }
    // The XSKMAP, one slot per interface rx queue.
    let mut a = [0u8; 128];
    put_u32(&mut a, 0, BPF_MAP_TYPE_XSKMAP);
    put_u32(&mut a, 4, 4);
    put_u32(&mut a, 8, 4);
    put_u32(&mut a, 12, have);
    let map = bpf_fd(&port, BPF_MAP_CREATE, &mut a, "create the XSKMAP")?;
    for (q, x) in xsks.iter().enumerate() {
        let key = q as u32;
        let val = x.fd.as_raw_fd() as u32;
        let mut a = [0u8; 128];
        put_u32(&mut a, 0, map.as_raw_fd() as u32);
        put_u64(&mut a, 8, &key as *const u32 as u64);
        put_u64(&mut a, 16, &val as *const u32 as u64);
        // SAFETY: `a` is a MAP_UPDATE_ELEM bpf_attr whose key and value
        // pointers point at live u32s for the duration of the call.
        let r =
            unsafe { libc::syscall(libc::SYS_bpf, BPF_MAP_UPDATE_ELEM, a.as_mut_ptr(), a.len()) };
        if r < 0 {
            return Err(NetdevError::last_os(&port, "put the socket in the XSKMAP"));
        }
    }
    let prog = load_program(&port, &map)?;
    let (link, mode_name) = attach(&port, ifname, ifindex, *mode, &prog)?;
    let zc = xsks.iter().all(|x| x.zero_copy);
    let offload = RxOffload::new(&port, ifname);
    let tx_of = |x: &Arc<Xsk>| XskTx {
        xsk: x.clone(),
        free: (NUM_FRAMES / 2..NUM_FRAMES)
            .map(|i| u64::from(i * FRAME_SIZE))
            .collect(),
        stats: QueueStats::default(),
    };
    let tx = tx_of(&xsks[0]);
    let more_tx: Vec<Box<dyn TxQueue>> = xsks
        .iter()
        .skip(1)
        .take(extra)
        .map(|x| Box::new(tx_of(x)) as Box<dyn TxQueue>)
        .collect();
    let rxqs: Vec<Box<dyn RxQueue>> = xsks
        .into_iter()
        .map(|xsk| {
            Box::new(XskRx {
                xsk,
                stats: QueueStats::default(),
                offload: offload.clone(),
            }) as Box<dyn RxQueue>
        })
        .collect();
    Ok(OpenPort {
        spec: spec.clone(),
        kind: "afxdp",
        detail: format!(
            "mode={mode_name}, {}, {} rxq",
            if zc { "zero-copy" } else { "copy" },
            rxqs.len()
        ),
        rxqs,
        tx: Box::new(tx),
        more_tx,
        guard: Some(Box::new(XdpGuard {
            _link: link,
            _prog: prog,
            _map: map,
        })),
    })
}

/// Loads the XDP program that redirects to the sockets of `map`.
fn load_program(port: &str, map: &OwnedFd) -> Result<OwnedFd, NetdevError> {
    // The program.
    let code = program(map.as_raw_fd());
    let license = c"Apache-2.0";
    let mut log = vec![0u8; 4096];
    let mut a = [0u8; 128];
    put_u32(&mut a, 0, BPF_PROG_TYPE_XDP);
    put_u32(&mut a, 4, (code.len() / 8) as u32);
    put_u64(&mut a, 8, code.as_ptr() as u64);
    put_u64(&mut a, 16, license.as_ptr() as u64);
    put_u32(&mut a, 24, 1);
    put_u32(&mut a, 28, log.len() as u32);
    put_u64(&mut a, 32, log.as_mut_ptr() as u64);
    let name = xdp_attached::PROG_NAME.as_bytes();
    a[48..48 + name.len()].copy_from_slice(name);
    bpf_fd(port, BPF_PROG_LOAD, &mut a, "load the XDP program").map_err(|e| {
        let l = String::from_utf8_lossy(&log);
        let l = l.trim_end_matches('\0').trim();
        if l.is_empty() {
            e
        } else {
            NetdevError::BadSpec {
                spec: port.to_string(),
                reason: format!("{e}; verifier: {l}"),
            }
        }
    })
}

/// Attaches `prog` to `ifname` through a link (detached when the link
/// closes), in the first of `mode`'s attach modes that works; returns the
/// link and the mode's name.
fn attach(
    port: &str,
    ifname: &str,
    ifindex: u32,
    mode: XdpMode,
    prog: &OwnedFd,
) -> Result<(OwnedFd, &'static str), NetdevError> {
    let modes: &[(u32, &'static str)] = match mode {
        XdpMode::Native => &[(XDP_FLAGS_DRV_MODE, "native")],
        XdpMode::Generic => &[(XDP_FLAGS_SKB_MODE, "generic")],
        XdpMode::Auto => &[
            (XDP_FLAGS_DRV_MODE, "native"),
            (XDP_FLAGS_SKB_MODE, "generic"),
        ],
    };
    let mut last_err = None;
    let mut attached = None;
    let deadline = Instant::now() + RELEASE_WAIT;
    for (flags, name) in modes {
        let mut a = [0u8; 128];
        put_u32(&mut a, 0, prog.as_raw_fd() as u32);
        put_u32(&mut a, 4, ifindex);
        put_u32(&mut a, 8, BPF_XDP);
        put_u32(&mut a, 12, *flags);
        let r = loop {
            match bpf_fd(
                port,
                BPF_LINK_CREATE,
                &mut a.clone(),
                "attach the XDP program",
            ) {
                Err(NetdevError::Os { err: source, .. })
                    if matches!(source.raw_os_error(), Some(libc::EBUSY | libc::EEXIST)) =>
                {
                    // The switch's own program, of a switch that just
                    // died, is waited for; anybody else's is refused.
                    let what = match xdp_attached::by_link(ifindex) {
                        Some(p) if p.is_ours() && Instant::now() < deadline => {
                            std::thread::sleep(Duration::from_millis(20));
                            continue;
                        }
                        Some(p) if p.is_ours() => format!(
                            "{ifname} already has this switch's XDP {p} attached \
                             (is another flowpath switch running on it?)"
                        ),
                        Some(p) => format!(
                            "{ifname} already has an XDP {p} attached that is not this \
                             switch's (not replaced; detach it with \
                             `ip link set dev {ifname} xdp off` if it is not needed)"
                        ),
                        None => format!(
                            "{ifname} already has an XDP program attached that is not this \
                             switch's (not replaced; detach it with \
                             `ip link set dev {ifname} xdp off` if it is not needed)"
                        ),
                    };
                    return Err(NetdevError::os(port, what, source));
                }
                r => break r,
            }
        };
        match r {
            Ok(l) => {
                attached = Some((l, *name));
                break;
            }
            Err(e) => last_err = Some(e),
        }
    }
    attached.ok_or_else(|| {
        last_err.unwrap_or_else(|| NetdevError::BadSpec {
            spec: port.to_string(),
            reason: "no XDP attach mode".into(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_is_six_instructions_with_the_map_fd() {
        let p = program(7);
        assert_eq!(p.len(), 48);
        assert_eq!(p[8], 0x18);
        assert_eq!(p[9], 1 | (1 << 4));
        assert_eq!(i32::from_ne_bytes([p[12], p[13], p[14], p[15]]), 7);
        assert_eq!(p[40], 0x95);
    }

    #[test]
    fn struct_sizes_match_the_kernel() {
        assert_eq!(std::mem::size_of::<UmemReg>(), 32);
        assert_eq!(std::mem::size_of::<MmapOffsets>(), 128);
        assert_eq!(std::mem::size_of::<SockaddrXdp>(), 16);
        assert_eq!(std::mem::size_of::<XdpStatistics>(), 48);
    }
}
