//! The TPACKET_V2 rx ring of `afpacket:` ports (`ring=v2`, the default).
//!
//! One fixed slot per frame: the kernel writes a frame into the next free
//! slot and flips that slot's status word to "user", so the switch sees
//! each frame as soon as it is written and `poll(2)` wakes on the first
//! one — no block to fill or time out, which is what keeps a sparse
//! conversation's latency at the kernel's own. A slot is 2 KiB (an
//! Ethernet frame of the usual MTU with the kernel's headers and a VLAN
//! tag); a larger frame (a GSO super-frame from the local TCP stack, a
//! jumbo frame) is written truncated with `TP_STATUS_COPY`, and the whole
//! frame waits in the socket's receive queue (`PACKET_COPY_THRESH`): the
//! port reads it from there with one `recvmsg`, offload header and
//! stripped VLAN tag included (`PACKET_AUXDATA`), in ring order.
//!
//! Invariants: a slot is read only while its status says it is the
//! user's and given back (status = kernel, release order) once its frame
//! was passed on; every offset read from the ring is checked against the
//! slot before it is used. No allocation after open (the large-frame
//! buffer is allocated once).
//!
//! Threads: an [`AfPacketRxV2`] is used by one thread at a time (`Send`,
//! not `Sync`).
#![allow(unsafe_code)]

use crate::afpacket::{
    attach_rx, insert_tag, ring_stats, vnet_socket, PACKET_OUTGOING, PACKET_RX_RING,
    PACKET_VERSION, SLL_PKTTYPE, SOL_PACKET, TP_STATUS_KERNEL, TP_STATUS_USER,
    TP_STATUS_VLAN_TPID_VALID, TP_STATUS_VLAN_VALID,
};
use crate::offload::{VnetHdr, VNET_HDR_LEN};
use crate::sys::{self, Mmap};
use crate::{NetdevError, QueueStats, RxMeta, RxQueue};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};

const TPACKET_V2: i32 = 1;
const PACKET_COPY_THRESH: i32 = 7;
const PACKET_AUXDATA: i32 = 8;
const TP_STATUS_COPY: u32 = 0x2;

/// Ring geometry: 4,096 slots of 2 KiB in blocks of 64 KiB (8 MiB, as the
/// TPACKET_V3 ring).
const FRAME_SIZE: usize = 2048;
const BLOCK_SIZE: usize = 1 << 16;
const FRAME_NR: usize = 4096;
// Slots tile the blocks, so slot `i` is at `i * FRAME_SIZE`.
const _: () = assert!(
    BLOCK_SIZE.is_multiple_of(FRAME_SIZE) && (FRAME_NR * FRAME_SIZE).is_multiple_of(BLOCK_SIZE)
);

/// Offsets in `struct tpacket2_hdr`.
const H_STATUS: usize = 0;
const H_LEN: usize = 4;
const H_SNAPLEN: usize = 8;
const H_MAC: usize = 12;
const H_SEC: usize = 16;
const H_NSEC: usize = 20;
const H_VLAN_TCI: usize = 24;
const H_VLAN_TPID: usize = 26;
/// `TPACKET_ALIGN(sizeof(struct tpacket2_hdr))`; the `sockaddr_ll`
/// follows it.
const HDR_LEN: usize = 32;
/// End of the `sockaddr_ll` (the frame's offload header comes after it).
const SLL_END: usize = HDR_LEN + 20;
// A tagged frame of MTU 1500 fits a slot, after the headers the kernel
// puts before it (at most 16 bytes of alignment padding).
const _: () = assert!(SLL_END + 16 + VNET_HDR_LEN + 1518 <= FRAME_SIZE);

/// The largest frame the socket queue can hand over: a 64 KiB GSO frame
/// with its Ethernet header and a re-inserted VLAN tag.
const BIG: usize = 65_536 + 64;

/// `struct tpacket_req`.
#[derive(Clone, Copy, Default)]
#[repr(C)]
struct TpacketReq {
    block_size: u32,
    block_nr: u32,
    frame_size: u32,
    frame_nr: u32,
}

/// `struct tpacket_auxdata`.
#[derive(Clone, Copy, Default)]
#[repr(C)]
struct TpacketAuxdata {
    status: u32,
    len: u32,
    snaplen: u32,
    mac: u16,
    net: u16,
    vlan_tci: u16,
    vlan_tpid: u16,
}

/// One rx queue: a socket with its mapped TPACKET_V2 ring.
pub struct AfPacketRxV2 {
    port: String,
    fd: OwnedFd,
    ring: Mmap,
    /// Next slot to read.
    slot: usize,
    /// Where frames too large for a slot are read to: 4 bytes of room
    /// for a VLAN tag, the offload header, the frame.
    big: Box<[u8]>,
    stats: QueueStats,
    /// Kernel drops read so far (PACKET_STATISTICS resets on read).
    kernel_drops: std::cell::Cell<u64>,
}

impl std::fmt::Debug for AfPacketRxV2 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfPacketRxV2")
            .field("port", &self.port)
            .finish()
    }
}

impl AfPacketRxV2 {
    fn slot_ptr(&self, i: usize) -> *mut u8 {
        // SAFETY: i < FRAME_NR and the mapping is FRAME_NR * FRAME_SIZE
        // bytes (BLOCK_SIZE is a multiple of FRAME_SIZE: slots are
        // contiguous).
        unsafe { self.ring.ptr().add(i * FRAME_SIZE) }
    }

    fn status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: the status word is the first, 4-byte aligned field of
        // the slot, shared with the kernel only through atomic accesses.
        unsafe { &*(self.slot_ptr(i).add(H_STATUS) as *const AtomicU32) }
    }

    fn read_u32(&self, i: usize, off: usize) -> u32 {
        // SAFETY: every caller passes a header offset below HDR_LEN, inside
        // slot `i`.
        unsafe { std::ptr::read_unaligned(self.slot_ptr(i).add(off) as *const u32) }
    }

    fn read_u16(&self, i: usize, off: usize) -> u16 {
        // SAFETY: as `read_u32`.
        unsafe { std::ptr::read_unaligned(self.slot_ptr(i).add(off) as *const u16) }
    }

    /// Reads the frame slot `i` stands for from the socket queue and
    /// passes it on; false when it is not there (counted as an error).
    fn recv_big(&mut self, ts: u64, f: &mut dyn FnMut(&[u8], RxMeta)) -> bool {
        let mut aux = [0u64; 8];
        let mut iov = libc::iovec {
            iov_base: self.big[4..].as_mut_ptr().cast(),
            iov_len: self.big.len() - 4,
        };
        // SAFETY: msghdr is plain data; all-zero is valid.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = aux.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&aux) as _;
        // SAFETY: `msg` points at `iov` (into `self.big`) and `aux`, both
        // alive and of the sizes given, for the duration of the call.
        let r = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
        if r < VNET_HDR_LEN as isize + 14 || msg.msg_flags & libc::MSG_TRUNC != 0 {
            return false;
        }
        let mut vh = [0u8; VNET_HDR_LEN];
        vh.copy_from_slice(&self.big[4..4 + VNET_HDR_LEN]);
        let mut vnet = VnetHdr::from_bytes(&vh);
        let mut start = 4 + VNET_HDR_LEN;
        let mut len = r as usize - VNET_HDR_LEN;
        // SAFETY: CMSG_* walk the control buffer the kernel filled, within
        // `msg_controllen`.
        let mut c = unsafe { libc::CMSG_FIRSTHDR(&msg) };
        // SAFETY: pure arithmetic on a size.
        let aux_len = unsafe { libc::CMSG_LEN(std::mem::size_of::<TpacketAuxdata>() as u32) };
        while !c.is_null() {
            // SAFETY: `c` is a valid cmsghdr inside `aux` (CMSG_FIRSTHDR /
            // CMSG_NXTHDR return null past the end).
            let h = unsafe { &*c };
            if h.cmsg_level == SOL_PACKET
                && h.cmsg_type == PACKET_AUXDATA
                && h.cmsg_len as usize >= aux_len as usize
            {
                // SAFETY: the payload holds a whole tpacket_auxdata
                // (length checked above).
                let a: TpacketAuxdata = unsafe {
                    std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const TpacketAuxdata)
                };
                if a.status & TP_STATUS_VLAN_VALID != 0 {
                    let tpid = if a.status & TP_STATUS_VLAN_TPID_VALID != 0 {
                        a.vlan_tpid
                    } else {
                        0x8100
                    };
                    start = insert_tag(&mut self.big, start, tpid, a.vlan_tci, &mut vnet);
                    len += 4;
                }
            }
            // SAFETY: as CMSG_FIRSTHDR.
            c = unsafe { libc::CMSG_NXTHDR(&msg, c) };
        }
        self.stats.packets += 1;
        self.stats.bytes += len as u64;
        f(
            &self.big[start..start + len],
            RxMeta {
                vnet: Some(vnet),
                timestamp_ns: ts,
            },
        );
        true
    }
}

impl RxQueue for AfPacketRxV2 {
    fn recv(&mut self, max: usize, f: &mut dyn FnMut(&[u8], RxMeta)) -> Result<usize, NetdevError> {
        let mut n = 0;
        while n < max {
            let i = self.slot;
            let status = self.status(i).load(Ordering::Acquire);
            if status & TP_STATUS_USER == 0 {
                break;
            }
            let len = self.read_u32(i, H_LEN) as usize;
            let snaplen = self.read_u32(i, H_SNAPLEN) as usize;
            let mac = usize::from(self.read_u16(i, H_MAC));
            let ts = u64::from(self.read_u32(i, H_SEC)) * 1_000_000_000
                + u64::from(self.read_u32(i, H_NSEC));
            // SAFETY: inside the slot (SLL_END < FRAME_SIZE).
            let pkttype = unsafe { *self.slot_ptr(i).add(HDR_LEN + SLL_PKTTYPE) };
            if pkttype == PACKET_OUTGOING {
                // Our own transmit (kernels without PACKET_IGNORE_OUTGOING);
                // its copy in the socket queue, if any, is dropped too.
                if status & TP_STATUS_COPY != 0 {
                    self.recv_big(ts, &mut |_, _| {});
                }
            } else if status & TP_STATUS_COPY != 0 {
                if self.recv_big(ts, f) {
                    n += 1;
                } else {
                    self.stats.errors += 1;
                }
            } else if mac < SLL_END + VNET_HDR_LEN
                || mac + snaplen > FRAME_SIZE
                || snaplen < len
                || len < 12
            {
                // Malformed, or truncated without a copy (the socket's
                // receive buffer was full).
                self.stats.errors += 1;
            } else {
                let mut vh = [0u8; VNET_HDR_LEN];
                // SAFETY: `mac - VNET_HDR_LEN >= SLL_END` (checked), inside
                // the slot.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        self.slot_ptr(i).add(mac - VNET_HDR_LEN),
                        vh.as_mut_ptr(),
                        VNET_HDR_LEN,
                    )
                };
                let mut vnet = VnetHdr::from_bytes(&vh);
                // SAFETY: `mac + snaplen <= FRAME_SIZE` (checked): the slot
                // is the user's until its status is given back below, and
                // nothing else refers to it meanwhile.
                let slot = unsafe { std::slice::from_raw_parts_mut(self.slot_ptr(i), FRAME_SIZE) };
                let mut start = mac;
                let mut flen = len;
                if status & TP_STATUS_VLAN_VALID != 0 {
                    let tci = u16::from_ne_bytes([slot[H_VLAN_TCI], slot[H_VLAN_TCI + 1]]);
                    let tpid = if status & TP_STATUS_VLAN_TPID_VALID != 0 {
                        u16::from_ne_bytes([slot[H_VLAN_TPID], slot[H_VLAN_TPID + 1]])
                    } else {
                        0x8100
                    };
                    // Into the offload header's bytes (read above).
                    start = insert_tag(slot, start, tpid, tci, &mut vnet);
                    flen += 4;
                }
                self.stats.packets += 1;
                self.stats.bytes += flen as u64;
                f(
                    &slot[start..start + flen],
                    RxMeta {
                        vnet: Some(vnet),
                        timestamp_ns: ts,
                    },
                );
                n += 1;
            }
            self.status(i).store(TP_STATUS_KERNEL, Ordering::Release);
            self.slot = (i + 1) % FRAME_NR;
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

/// Opens one rx socket with its TPACKET_V2 ring.
pub(crate) fn open_rx(
    port: &str,
    ifindex: u32,
    fanout: Option<u32>,
) -> Result<AfPacketRxV2, NetdevError> {
    let fd = vnet_socket(port)?;
    let raw = fd.as_raw_fd();
    sys::setsockopt(
        port,
        raw,
        SOL_PACKET,
        PACKET_VERSION,
        &TPACKET_V2,
        "PACKET_VERSION",
    )?;
    // Frames larger than a slot: whole into the socket queue, with their
    // stripped VLAN tag in the ancillary data.
    sys::setsockopt(
        port,
        raw,
        SOL_PACKET,
        PACKET_COPY_THRESH,
        &1i32,
        "PACKET_COPY_THRESH",
    )?;
    sys::setsockopt(
        port,
        raw,
        SOL_PACKET,
        PACKET_AUXDATA,
        &1i32,
        "PACKET_AUXDATA",
    )?;
    // Room for several GSO frames in the queue (as root, past rmem_max).
    let rcvbuf = 4i32 << 20;
    if sys::setsockopt(
        port,
        raw,
        libc::SOL_SOCKET,
        libc::SO_RCVBUFFORCE,
        &rcvbuf,
        "SO_RCVBUFFORCE",
    )
    .is_err()
    {
        let _ = sys::setsockopt(
            port,
            raw,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &rcvbuf,
            "SO_RCVBUF",
        );
    }
    let req = TpacketReq {
        block_size: BLOCK_SIZE as u32,
        block_nr: (FRAME_NR * FRAME_SIZE / BLOCK_SIZE) as u32,
        frame_size: FRAME_SIZE as u32,
        frame_nr: FRAME_NR as u32,
    };
    sys::setsockopt(
        port,
        raw,
        SOL_PACKET,
        PACKET_RX_RING,
        &req,
        "PACKET_RX_RING",
    )?;
    let ring = Mmap::map(port, raw, FRAME_NR * FRAME_SIZE, 0, "mmap rx ring")?;
    attach_rx(port, raw, ifindex, fanout)?;
    Ok(AfPacketRxV2 {
        port: port.to_string(),
        fd,
        ring,
        slot: 0,
        big: vec![0u8; BIG].into_boxed_slice(),
        stats: QueueStats::default(),
        kernel_drops: std::cell::Cell::new(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_goes_back_after_the_addresses() {
        let mut b = [0u8; 4 + 14];
        for (i, x) in b[4..].iter_mut().enumerate() {
            *x = i as u8;
        }
        let mut v = VnetHdr {
            csum_start: 34,
            csum_offset: 16,
            ..VnetHdr::default()
        };
        let s = insert_tag(&mut b, 4, 0x88a8, 0x0123, &mut v);
        assert_eq!((v.csum_start, v.csum_offset, v.hdr_len), (38, 16, 0));
        assert_eq!(s, 0);
        assert_eq!(&b[0..12], &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
        assert_eq!(&b[12..16], &[0x88, 0xa8, 0x01, 0x23]);
        assert_eq!(&b[16..18], &[12, 13]);
    }
}
