//! `afpacket:IFNAME[,queues=N]`: AF_PACKET sockets on a Linux interface.
//!
//! Receive: one socket per rx queue, each with a ring mapped into the
//! process, in one `PACKET_FANOUT` hash group when there are several, so a
//! flow always reaches the same queue. The ring is TPACKET_V2 by default
//! (`ring=v2`, [`crate::RingKind::Frames`]: one slot per frame, handed over
//! at once; see `afpacket_v2`) or TPACKET_V3 (`ring=v3`: blocks of frames
//! the kernel fills and hands over by flipping the block's status word,
//! when full or 1 ms after their first frame — fewer cache misses at high
//! rates, up to a millisecond of delay for sparse traffic). The interface is put in promiscuous
//! mode for as long as the sockets live (a switch port receives every
//! frame), and frames this port itself sends are not received
//! (`PACKET_IGNORE_OUTGOING`). A VLAN tag the NIC stripped (TP_STATUS_VLAN_VALID)
//! is put back into the frame before the datapath sees it.
//!
//! Transmit: one more socket, bound to the interface, that receives
//! nothing; bursts go out in one `sendmmsg` call, bypassing the qdisc
//! layer (`PACKET_QDISC_BYPASS`) as a NIC driver queue would be fed.
//!
//! Offloads: every socket has `PACKET_VNET_HDR`, so frames come with a
//! [`VnetHdr`] — GSO super-frames (up to 64 KiB) and partial checksums
//! from the local TCP stack stay as they are — and frames sent carry one
//! (all zero for frames that need nothing). That is what lets a
//! userspace switch keep the kernel's TCP throughput between two such
//! ports; to any other port the switch finishes the frame in software
//! first ([`crate::offload`]).
//!
//! Invariants: a ring block is read only while its status says it is the
//! user's, and given back (status = kernel, release order) once all its
//! frames were passed on; every offset read from the ring is checked
//! against the block before it is used. No allocation after open.
//!
//! Threads: each [`AfPacketRx`] and the [`AfPacketTx`] are used by one
//! thread at a time (they are `Send`, not `Sync`).
#![allow(unsafe_code)]

use crate::offload::{VnetHdr, VNET_HDR_LEN};
use crate::sys::{self, Mmap};
use crate::{
    NetdevError, OpenPort, PortSpec, QueueStats, RingKind, RxMeta, RxQueue, TxFrame, TxQueue,
};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};

pub(crate) const SOL_PACKET: i32 = 263;
const PACKET_ADD_MEMBERSHIP: i32 = 1;
pub(crate) const PACKET_RX_RING: i32 = 5;
const PACKET_STATISTICS: i32 = 6;
pub(crate) const PACKET_VERSION: i32 = 10;
const PACKET_VNET_HDR: i32 = 15;
const PACKET_FANOUT: i32 = 18;
const PACKET_QDISC_BYPASS: i32 = 20;
const PACKET_IGNORE_OUTGOING: i32 = 23;
const TPACKET_V3: i32 = 2;
const PACKET_FANOUT_HASH: u32 = 0;
const PACKET_FANOUT_FLAG_DEFRAG: u32 = 0x8000;
const PACKET_MR_PROMISC: u16 = 1;
pub(crate) const PACKET_OUTGOING: u8 = 4;
const ETH_P_ALL: u16 = 0x0003;

pub(crate) const TP_STATUS_KERNEL: u32 = 0;
pub(crate) const TP_STATUS_USER: u32 = 1;
pub(crate) const TP_STATUS_VLAN_VALID: u32 = 0x10;
pub(crate) const TP_STATUS_VLAN_TPID_VALID: u32 = 0x40;

/// Ring geometry: 32 blocks of 256 KiB (a block must hold a 64 KiB GSO
/// frame with its headers), retired after at most 1 ms.
const BLOCK_SIZE: u32 = 1 << 18;
const BLOCK_NR: u32 = 32;
const FRAME_SIZE: u32 = 2048;
const RETIRE_TOV_MS: u32 = 1;

/// Offsets in `struct tpacket_block_desc` (linux/if_packet.h).
const BD_BLOCK_STATUS: usize = 8;
const BD_NUM_PKTS: usize = 12;
const BD_OFFSET_TO_FIRST_PKT: usize = 16;
/// Offsets in `struct tpacket3_hdr`.
const H_NEXT_OFFSET: usize = 0;
const H_SEC: usize = 4;
const H_NSEC: usize = 8;
const H_SNAPLEN: usize = 12;
const H_STATUS: usize = 20;
const H_MAC: usize = 24;
const H_VLAN_TCI: usize = 32;
const H_VLAN_TPID: usize = 36;
/// Puts a stripped VLAN tag back into the frame at `buf[start..]`, moving
/// its MAC addresses 4 bytes earlier (the caller guarantees `start >= 4`
/// and at least 12 bytes of frame), and moves the offsets of its offload
/// header with it; returns the frame's new start.
pub(crate) fn insert_tag(
    buf: &mut [u8],
    start: usize,
    tpid: u16,
    tci: u16,
    vnet: &mut VnetHdr,
) -> usize {
    if vnet.csum_start != 0 {
        vnet.csum_start += 4;
    }
    if vnet.hdr_len != 0 {
        vnet.hdr_len += 4;
    }
    buf.copy_within(start..start + 12, start - 4);
    buf[start + 8..start + 10].copy_from_slice(&tpid.to_be_bytes());
    buf[start + 10..start + 12].copy_from_slice(&tci.to_be_bytes());
    start - 4
}

/// `sizeof(struct tpacket3_hdr)`, rounded to TPACKET_ALIGNMENT (16); the
/// `sockaddr_ll` follows it.
const H_LEN: usize = 48;
/// Offset of `sll_pkttype` in `struct sockaddr_ll`.
pub(crate) const SLL_PKTTYPE: usize = 10;

/// `struct tpacket_req3`.
#[derive(Clone, Copy, Default)]
#[repr(C)]
struct TpacketReq3 {
    block_size: u32,
    block_nr: u32,
    frame_size: u32,
    frame_nr: u32,
    retire_blk_tov: u32,
    sizeof_priv: u32,
    feature_req_word: u32,
}

/// `struct tpacket_stats`.
#[derive(Clone, Copy, Default)]
#[repr(C)]
struct TpacketStats {
    packets: u32,
    drops: u32,
}

/// `struct packet_mreq`.
#[derive(Clone, Copy, Default)]
#[repr(C)]
struct PacketMreq {
    ifindex: i32,
    kind: u16,
    alen: u16,
    address: [u8; 8],
}

/// One rx queue: a socket with its mapped TPACKET_V3 ring.
pub struct AfPacketRx {
    port: String,
    fd: OwnedFd,
    ring: Mmap,
    /// Block being read, frame index within it, and that frame's offset.
    block: u32,
    pkt: u32,
    pkt_off: usize,
    stats: QueueStats,
    /// Kernel drops read so far (PACKET_STATISTICS resets on read).
    kernel_drops: std::cell::Cell<u64>,
}

impl std::fmt::Debug for AfPacketRx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfPacketRx")
            .field("port", &self.port)
            .finish()
    }
}

impl AfPacketRx {
    fn block_ptr(&self, b: u32) -> *mut u8 {
        // SAFETY: b < BLOCK_NR, so the offset stays inside the mapping of
        // BLOCK_SIZE * BLOCK_NR bytes.
        unsafe { self.ring.ptr().add(b as usize * BLOCK_SIZE as usize) }
    }

    fn block_status(&self, b: u32) -> &AtomicU32 {
        // SAFETY: the status word is a 4-byte-aligned u32 inside block `b`
        // (blocks are page aligned), shared with the kernel, which is why
        // it is only accessed atomically.
        unsafe { &*(self.block_ptr(b).add(BD_BLOCK_STATUS) as *const AtomicU32) }
    }

    fn read_u32(&self, b: u32, off: usize) -> u32 {
        if off + 4 > BLOCK_SIZE as usize {
            return 0;
        }
        // SAFETY: `off + 4 <= BLOCK_SIZE` (checked), inside block `b`,
        // which the user owns while this is called.
        unsafe { std::ptr::read_unaligned(self.block_ptr(b).add(off) as *const u32) }
    }

    fn read_u16(&self, b: u32, off: usize) -> u16 {
        if off + 2 > BLOCK_SIZE as usize {
            return 0;
        }
        // SAFETY: as `read_u32`.
        unsafe { std::ptr::read_unaligned(self.block_ptr(b).add(off) as *const u16) }
    }
}

impl RxQueue for AfPacketRx {
    fn recv(&mut self, max: usize, f: &mut dyn FnMut(&[u8], RxMeta)) -> Result<usize, NetdevError> {
        let mut n = 0;
        let bs = BLOCK_SIZE as usize;
        while n < max {
            let b = self.block;
            if self.block_status(b).load(Ordering::Acquire) & TP_STATUS_USER == 0 {
                break;
            }
            let num = self.read_u32(b, BD_NUM_PKTS);
            if self.pkt == 0 {
                self.pkt_off = self.read_u32(b, BD_OFFSET_TO_FIRST_PKT) as usize;
            }
            while self.pkt < num && n < max {
                let h = self.pkt_off;
                if h + H_LEN + 16 > bs {
                    self.stats.errors += 1;
                    self.pkt = num;
                    break;
                }
                let next = self.read_u32(b, h + H_NEXT_OFFSET) as usize;
                let snaplen = self.read_u32(b, h + H_SNAPLEN) as usize;
                let status = self.read_u32(b, h + H_STATUS);
                let mac = usize::from(self.read_u16(b, h + H_MAC));
                let pkttype = if h + H_LEN + SLL_PKTTYPE < bs {
                    // SAFETY: inside the block (checked).
                    unsafe { *self.block_ptr(b).add(h + H_LEN + SLL_PKTTYPE) }
                } else {
                    0
                };
                let mut start = h + mac;
                let mut len = snaplen;
                let ok = mac >= H_LEN + VNET_HDR_LEN + 4 && start + len <= bs;
                if ok && pkttype != PACKET_OUTGOING {
                    let mut vh = [0u8; VNET_HDR_LEN];
                    // SAFETY: `start - VNET_HDR_LEN >= h + H_LEN` (mac is at
                    // least that far in, checked), inside the block.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            self.block_ptr(b).add(start - VNET_HDR_LEN),
                            vh.as_mut_ptr(),
                            VNET_HDR_LEN,
                        )
                    };
                    let mut vnet = VnetHdr::from_bytes(&vh);
                    if status & TP_STATUS_VLAN_VALID != 0 && len >= 12 {
                        let tci = self.read_u32(b, h + H_VLAN_TCI) as u16;
                        let tpid = if status & TP_STATUS_VLAN_TPID_VALID != 0 {
                            self.read_u16(b, h + H_VLAN_TPID)
                        } else {
                            0x8100
                        };
                        // Put the stripped tag back, into the header area
                        // before the frame (read above, no longer needed).
                        // SAFETY: the block is the user's until its status
                        // is given back, and nothing else refers to it.
                        let block =
                            unsafe { std::slice::from_raw_parts_mut(self.block_ptr(b), bs) };
                        // `start - 4 >= h + H_LEN` (checked via mac).
                        start = insert_tag(block, start, tpid, tci, &mut vnet);
                        len += 4;
                    }
                    let ts = u64::from(self.read_u32(b, h + H_SEC)) * 1_000_000_000
                        + u64::from(self.read_u32(b, h + H_NSEC));
                    // SAFETY: `start + len <= BLOCK_SIZE` (checked, and the
                    // VLAN case moved start back by the 4 bytes it added).
                    let data =
                        unsafe { std::slice::from_raw_parts(self.block_ptr(b).add(start), len) };
                    self.stats.packets += 1;
                    self.stats.bytes += len as u64;
                    f(
                        data,
                        RxMeta {
                            vnet: Some(vnet),
                            timestamp_ns: ts,
                        },
                    );
                    n += 1;
                } else if !ok {
                    self.stats.errors += 1;
                }
                self.pkt += 1;
                self.pkt_off = h + next;
                if next == 0 {
                    self.pkt = num;
                }
            }
            if self.pkt >= num {
                self.block_status(b)
                    .store(TP_STATUS_KERNEL, Ordering::Release);
                self.block = (b + 1) % BLOCK_NR;
                self.pkt = 0;
                self.pkt_off = 0;
            }
        }
        Ok(n)
    }

    fn poll_fd(&self) -> Option<RawFd> {
        Some(self.fd.as_raw_fd())
    }

    fn stats(&self) -> QueueStats {
        ring_stats(
            &self.port,
            self.fd.as_raw_fd(),
            self.stats,
            &self.kernel_drops,
        )
    }
}

/// An rx socket's counters: ours, with the kernel's drops (ring full)
/// added to `dropped`; `kernel_drops` keeps their sum, as the kernel
/// resets its counters on each read.
pub(crate) fn ring_stats(
    port: &str,
    fd: RawFd,
    ours: QueueStats,
    kernel_drops: &std::cell::Cell<u64>,
) -> QueueStats {
    // `struct tpacket_stats` is the start of V3's `tpacket_stats_v3`; the
    // kernel copies as much as asked.
    if let Ok(s) = sys::getsockopt::<TpacketStats>(
        port,
        fd,
        SOL_PACKET,
        PACKET_STATISTICS,
        "PACKET_STATISTICS",
    ) {
        kernel_drops.set(kernel_drops.get() + u64::from(s.drops));
    }
    QueueStats {
        dropped: ours.dropped + kernel_drops.get(),
        ..ours
    }
}

/// Most frames one `sendmmsg` call carries.
const TX_BURST: usize = 64;

/// The transmit socket and its preallocated `sendmmsg` arrays.
pub struct AfPacketTx {
    fd: OwnedFd,
    hdrs: Box<[[u8; VNET_HDR_LEN]; TX_BURST]>,
    iovs: Box<[[libc::iovec; 2]; TX_BURST]>,
    msgs: Box<[libc::mmsghdr; TX_BURST]>,
    stats: QueueStats,
}

// SAFETY: the raw pointers inside `iovs`/`msgs` are scratch space that is
// rewritten before every use and only points into this value's own
// buffers or the caller's frames during one `send` call.
unsafe impl Send for AfPacketTx {}

impl std::fmt::Debug for AfPacketTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfPacketTx").finish()
    }
}

impl AfPacketTx {
    /// Sends the first `n` prepared messages; counts what went and what
    /// did not.
    fn submit(&mut self, n: usize, bytes: &[u64; TX_BURST]) -> usize {
        let mut done = 0;
        let mut retries = 0;
        while done < n {
            // SAFETY: msgs[done..n] are initialised mmsghdrs whose iovecs
            // point at live buffers (this value's headers and the caller's
            // frames, alive for the whole `send` call).
            let r = unsafe {
                libc::sendmmsg(
                    self.fd.as_raw_fd(),
                    self.msgs.as_mut_ptr().add(done),
                    (n - done) as u32,
                    libc::MSG_DONTWAIT,
                )
            };
            if r > 0 {
                for b in &bytes[done..done + r as usize] {
                    self.stats.bytes += b;
                }
                self.stats.packets += r as u64;
                done += r as usize;
                continue;
            }
            let e = std::io::Error::last_os_error().raw_os_error();
            if matches!(e, Some(libc::EAGAIN) | Some(libc::ENOBUFS)) && retries < 2 {
                retries += 1;
                continue;
            }
            // The frame at `done` cannot go (too long, bad offload header,
            // interface down): drop it and go on with the rest.
            self.stats.dropped += 1;
            if !matches!(e, Some(libc::EAGAIN) | Some(libc::ENOBUFS)) {
                self.stats.errors += 1;
            }
            done += 1;
        }
        self.stats.packets as usize
    }
}

impl TxQueue for AfPacketTx {
    fn send(&mut self, frames: &mut dyn Iterator<Item = TxFrame<'_>>) -> usize {
        let before = self.stats.packets;
        let mut bytes = [0u64; TX_BURST];
        let mut n = 0;
        for f in frames {
            self.hdrs[n] = f.vnet.unwrap_or_default().to_bytes();
            self.iovs[n] = [
                libc::iovec {
                    iov_base: self.hdrs[n].as_mut_ptr().cast(),
                    iov_len: VNET_HDR_LEN,
                },
                libc::iovec {
                    iov_base: f.data.as_ptr() as *mut libc::c_void,
                    iov_len: f.data.len(),
                },
            ];
            self.msgs[n].msg_hdr.msg_iov = self.iovs[n].as_mut_ptr();
            self.msgs[n].msg_hdr.msg_iovlen = 2;
            bytes[n] = f.data.len() as u64;
            n += 1;
            if n == TX_BURST {
                self.submit(n, &bytes);
                n = 0;
            }
        }
        if n > 0 {
            self.submit(n, &bytes);
        }
        (self.stats.packets - before) as usize
    }

    fn takes_vnet_hdr(&self) -> bool {
        true
    }

    fn stats(&self) -> QueueStats {
        self.stats
    }
}

/// `struct sockaddr_ll` for binding to `ifindex` with `proto`.
fn sockaddr_ll(ifindex: u32, proto: u16) -> libc::sockaddr_ll {
    libc::sockaddr_ll {
        sll_family: libc::AF_PACKET as u16,
        sll_protocol: proto.to_be(),
        sll_ifindex: ifindex as i32,
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 0,
        sll_addr: [0; 8],
    }
}

fn bind(port: &str, fd: RawFd, ifindex: u32, proto: u16) -> Result<(), NetdevError> {
    let sa = sockaddr_ll(ifindex, proto);
    // SAFETY: `sa` is a valid sockaddr_ll of the size passed.
    let rc = unsafe {
        libc::bind(
            fd,
            (&sa as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(NetdevError::last_os(port, "bind"));
    }
    Ok(())
}

/// An AF_PACKET socket with virtio-net headers on (they must be set
/// before a ring is).
pub(crate) fn vnet_socket(port: &str) -> Result<OwnedFd, NetdevError> {
    let fd = sys::socket(port, libc::AF_PACKET, libc::SOCK_RAW, 0)?;
    sys::setsockopt(
        port,
        fd.as_raw_fd(),
        SOL_PACKET,
        PACKET_VNET_HDR,
        &1i32,
        "PACKET_VNET_HDR",
    )?;
    Ok(fd)
}

/// Opens one rx socket with its ring.
fn open_rx(port: &str, ifindex: u32, fanout: Option<u32>) -> Result<AfPacketRx, NetdevError> {
    let fd = vnet_socket(port)?;
    let raw = fd.as_raw_fd();
    sys::setsockopt(
        port,
        raw,
        SOL_PACKET,
        PACKET_VERSION,
        &TPACKET_V3,
        "PACKET_VERSION",
    )?;
    let req = TpacketReq3 {
        block_size: BLOCK_SIZE,
        block_nr: BLOCK_NR,
        frame_size: FRAME_SIZE,
        frame_nr: BLOCK_SIZE / FRAME_SIZE * BLOCK_NR,
        retire_blk_tov: RETIRE_TOV_MS,
        ..TpacketReq3::default()
    };
    sys::setsockopt(
        port,
        raw,
        SOL_PACKET,
        PACKET_RX_RING,
        &req,
        "PACKET_RX_RING",
    )?;
    let ring = Mmap::map(
        port,
        raw,
        (BLOCK_SIZE * BLOCK_NR) as usize,
        0,
        "mmap rx ring",
    )?;
    attach_rx(port, raw, ifindex, fanout)?;
    Ok(AfPacketRx {
        port: port.to_string(),
        fd,
        ring,
        block: 0,
        pkt: 0,
        pkt_off: 0,
        stats: QueueStats::default(),
        kernel_drops: std::cell::Cell::new(0),
    })
}

/// What every rx socket does once its ring is mapped: skip its own
/// transmits, bind to the interface, promiscuous mode, the fanout group.
pub(crate) fn attach_rx(
    port: &str,
    raw: RawFd,
    ifindex: u32,
    fanout: Option<u32>,
) -> Result<(), NetdevError> {
    // Best effort (Linux ≥ 4.20): without it our own transmits come back
    // and are skipped by their packet type.
    let _ = sys::setsockopt(
        port,
        raw,
        SOL_PACKET,
        PACKET_IGNORE_OUTGOING,
        &1i32,
        "PACKET_IGNORE_OUTGOING",
    );
    bind(port, raw, ifindex, ETH_P_ALL)?;
    let mreq = PacketMreq {
        ifindex: ifindex as i32,
        kind: PACKET_MR_PROMISC,
        ..PacketMreq::default()
    };
    sys::setsockopt(
        port,
        raw,
        SOL_PACKET,
        PACKET_ADD_MEMBERSHIP,
        &mreq,
        "promiscuous mode",
    )?;
    if let Some(group) = fanout {
        let arg: u32 = group | ((PACKET_FANOUT_HASH | PACKET_FANOUT_FLAG_DEFRAG) << 16);
        sys::setsockopt(port, raw, SOL_PACKET, PACKET_FANOUT, &arg, "PACKET_FANOUT")?;
    }
    Ok(())
}

/// Opens a transmit socket bound to `ifindex` (it receives nothing).
fn open_tx(port: &str, ifindex: u32) -> Result<AfPacketTx, NetdevError> {
    let fd = vnet_socket(port)?;
    let raw = fd.as_raw_fd();
    let _ = sys::setsockopt(
        port,
        raw,
        SOL_PACKET,
        PACKET_QDISC_BYPASS,
        &1i32,
        "PACKET_QDISC_BYPASS",
    );
    // Protocol 0: this socket receives nothing.
    bind(port, raw, ifindex, 0)?;
    // SAFETY: mmsghdr and iovec are plain data for which all-zero is valid
    // (null pointers, zero lengths); they are filled before each use.
    let msgs: Box<[libc::mmsghdr; TX_BURST]> = Box::new(unsafe { std::mem::zeroed() });
    // SAFETY: as above.
    let iovs: Box<[[libc::iovec; 2]; TX_BURST]> = Box::new(unsafe { std::mem::zeroed() });
    Ok(AfPacketTx {
        fd,
        hdrs: Box::new([[0; VNET_HDR_LEN]; TX_BURST]),
        iovs,
        msgs,
        stats: QueueStats::default(),
    })
}

/// Opens an `afpacket:` port with `extra` more transmit sockets.
pub fn open(spec: &PortSpec, extra: usize) -> Result<OpenPort, NetdevError> {
    let port = spec.to_string();
    let PortSpec::AfPacket {
        ifname,
        queues,
        ring,
    } = spec
    else {
        return Err(NetdevError::BadSpec {
            spec: port,
            reason: "not an afpacket port".into(),
        });
    };
    let ifindex = sys::ifindex(&port, ifname)?;
    // A fanout group id unique to this process and interface.
    let fanout = (*queues > 1).then(|| (std::process::id() ^ (ifindex << 8)) & 0xffff);
    let mut rxqs: Vec<Box<dyn RxQueue>> = Vec::new();
    for _ in 0..*queues {
        rxqs.push(match ring {
            RingKind::Frames => Box::new(crate::afpacket_v2::open_rx(&port, ifindex, fanout)?),
            RingKind::Blocks => Box::new(open_rx(&port, ifindex, fanout)?),
        });
    }
    let tx = open_tx(&port, ifindex)?;
    let mut more_tx: Vec<Box<dyn TxQueue>> = Vec::new();
    for _ in 0..extra {
        more_tx.push(Box::new(open_tx(&port, ifindex)?));
    }
    Ok(OpenPort {
        spec: spec.clone(),
        kind: "afpacket",
        detail: format!(
            "{}, vnet_hdr, {queues} rxq",
            match ring {
                RingKind::Frames => "TPACKET_V2",
                RingKind::Blocks => "TPACKET_V3",
            }
        ),
        rxqs,
        tx: Box::new(tx),
        more_tx,
        guard: None,
    })
}
