//! The vhost-user message codec (backend side): headers, the requests a
//! network backend handles, their payloads, and replies. No I/O: the
//! control thread (`conn`) reads bytes and descriptors from the socket and
//! hands them here.
//!
//! Facts from the vhost-user specification (QEMU's
//! `docs/interop/vhost-user.rst`): a message is a 12-byte header —
//! request (u32), flags (u32: version 1 in bits 0–1, `REPLY` 0x4,
//! `NEED_REPLY` 0x8), payload size (u32) — then the payload, all
//! little-endian; descriptors travel as `SCM_RIGHTS` with the header.
//!
//! Contract: [`Header::parse`] and [`decode`] never panic; a payload of
//! the wrong size for its request is an error, never a partial read.

use super::memory::{RegionDesc, MAX_REGIONS};
use super::ring::RingAddrs;

/// Request codes (`VHOST_USER_*`) this backend knows.
pub mod req {
    #![allow(missing_docs)]
    pub const GET_FEATURES: u32 = 1;
    pub const SET_FEATURES: u32 = 2;
    pub const SET_OWNER: u32 = 3;
    pub const RESET_OWNER: u32 = 4;
    pub const SET_MEM_TABLE: u32 = 5;
    pub const SET_LOG_BASE: u32 = 6;
    pub const SET_LOG_FD: u32 = 7;
    pub const SET_VRING_NUM: u32 = 8;
    pub const SET_VRING_ADDR: u32 = 9;
    pub const SET_VRING_BASE: u32 = 10;
    pub const GET_VRING_BASE: u32 = 11;
    pub const SET_VRING_KICK: u32 = 12;
    pub const SET_VRING_CALL: u32 = 13;
    pub const SET_VRING_ERR: u32 = 14;
    pub const GET_PROTOCOL_FEATURES: u32 = 15;
    pub const SET_PROTOCOL_FEATURES: u32 = 16;
    pub const GET_QUEUE_NUM: u32 = 17;
    pub const SET_VRING_ENABLE: u32 = 18;
    pub const SEND_RARP: u32 = 19;
    pub const NET_SET_MTU: u32 = 20;
    pub const RESET_DEVICE: u32 = 34;
    pub const SET_STATUS: u32 = 39;
    pub const GET_STATUS: u32 = 40;
}

/// Header flag: protocol version 1.
pub const FLAG_VERSION: u32 = 0x1;
/// Header flag: this is a reply.
pub const FLAG_REPLY: u32 = 0x4;
/// Header flag: the frontend wants an acknowledgement (`REPLY_ACK`).
pub const FLAG_NEED_REPLY: u32 = 0x8;
/// Header length.
pub const HDR_LEN: usize = 12;
/// Largest payload accepted.
pub const MAX_PAYLOAD: usize = 4096;
/// Most descriptors one message may carry.
pub const MAX_FDS: usize = MAX_REGIONS;

/// Virtio feature bits offered (and their names for the docs).
pub mod feature {
    /// `VIRTIO_NET_F_CSUM`: the guest may send frames whose transport
    /// checksum is left to the device (`NEEDS_CSUM`).
    pub const NET_CSUM: u64 = 1 << 0;
    /// `VIRTIO_NET_F_GUEST_CSUM`: the guest takes frames with such a
    /// partial checksum.
    pub const NET_GUEST_CSUM: u64 = 1 << 1;
    /// `VIRTIO_NET_F_GUEST_TSO4`: the guest takes TCP/IPv4 super-frames.
    pub const NET_GUEST_TSO4: u64 = 1 << 7;
    /// `VIRTIO_NET_F_GUEST_TSO6`: the guest takes TCP/IPv6 super-frames.
    pub const NET_GUEST_TSO6: u64 = 1 << 8;
    /// `VIRTIO_NET_F_GUEST_ECN`: the guest takes TCP super-frames marked
    /// ECN (`VIRTIO_NET_HDR_GSO_ECN`: CWR set on the first segment only).
    pub const NET_GUEST_ECN: u64 = 1 << 9;
    /// `VIRTIO_NET_F_HOST_TSO4`: the guest may send TCP/IPv4 super-frames.
    pub const NET_HOST_TSO4: u64 = 1 << 11;
    /// `VIRTIO_NET_F_HOST_TSO6`: the guest may send TCP/IPv6 super-frames.
    pub const NET_HOST_TSO6: u64 = 1 << 12;
    /// `VIRTIO_NET_F_HOST_ECN`: the guest may send TCP super-frames
    /// marked ECN.
    pub const NET_HOST_ECN: u64 = 1 << 13;
    /// `VIRTIO_NET_F_MRG_RXBUF`: receive buffers merged for one frame.
    pub const NET_MRG_RXBUF: u64 = 1 << 15;
    /// `VIRTIO_NET_F_GUEST_ANNOUNCE`: the guest announces itself
    /// (gratuitous ARP, unsolicited neighbour advertisements) when the
    /// frontend asks, as after a live migration.
    pub const NET_GUEST_ANNOUNCE: u64 = 1 << 21;
    /// `VIRTIO_NET_F_MQ`: several queue pairs.
    pub const NET_MQ: u64 = 1 << 22;
    /// `VHOST_F_LOG_ALL`: every write into guest memory is logged in the
    /// dirty-page bitmap (live migration).
    pub const LOG_ALL: u64 = 1 << 26;
    /// `VIRTIO_RING_F_INDIRECT_DESC`.
    pub const RING_INDIRECT_DESC: u64 = 1 << 28;
    /// `VIRTIO_RING_F_EVENT_IDX`.
    pub const RING_EVENT_IDX: u64 = 1 << 29;
    /// `VHOST_USER_F_PROTOCOL_FEATURES`.
    pub const PROTOCOL_FEATURES: u64 = 1 << 30;
    /// `VIRTIO_F_VERSION_1`.
    pub const VERSION_1: u64 = 1 << 32;
    /// `VIRTIO_F_RING_PACKED`: the packed virtqueue layout.
    pub const RING_PACKED: u64 = 1 << 34;
    /// All of the above: what `GET_FEATURES` answers.
    pub const OFFERED: u64 = NET_CSUM
        | NET_GUEST_CSUM
        | NET_GUEST_TSO4
        | NET_GUEST_TSO6
        | NET_HOST_TSO4
        | NET_HOST_TSO6
        | NET_GUEST_ECN
        | NET_HOST_ECN
        | NET_MRG_RXBUF
        | NET_GUEST_ANNOUNCE
        | NET_MQ
        | LOG_ALL
        | RING_INDIRECT_DESC
        | RING_EVENT_IDX
        | PROTOCOL_FEATURES
        | VERSION_1
        | RING_PACKED;
}

/// vhost-user protocol feature bits offered.
pub mod protocol_feature {
    /// `VHOST_USER_PROTOCOL_F_MQ`.
    pub const MQ: u64 = 1 << 0;
    /// `VHOST_USER_PROTOCOL_F_LOG_SHMFD`: the dirty-page bitmap comes as
    /// shared memory with `SET_LOG_BASE`.
    pub const LOG_SHMFD: u64 = 1 << 1;
    /// `VHOST_USER_PROTOCOL_F_RARP`: after a migration the frontend may
    /// ask the backend to announce a guest that cannot announce itself.
    pub const RARP: u64 = 1 << 2;
    /// `VHOST_USER_PROTOCOL_F_REPLY_ACK`.
    pub const REPLY_ACK: u64 = 1 << 3;
    /// `VHOST_USER_PROTOCOL_F_STATUS`.
    pub const STATUS: u64 = 1 << 16;
    /// What `GET_PROTOCOL_FEATURES` answers.
    pub const OFFERED: u64 = MQ | LOG_SHMFD | RARP | REPLY_ACK | STATUS;
}

/// Why a message could not be understood (the connection is closed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    /// Not protocol version 1.
    #[error("unsupported protocol version (flags {0:#x})")]
    Version(u32),
    /// Payload larger than [`MAX_PAYLOAD`].
    #[error("payload of {0} bytes is too large")]
    TooLarge(u32),
    /// Payload of the wrong size for the request.
    #[error("request {0}: payload of {1} bytes is malformed")]
    BadPayload(u32, usize),
}

/// A message header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Request code ([`req`]).
    pub request: u32,
    /// Flags.
    pub flags: u32,
    /// Payload size.
    pub size: u32,
}

impl Header {
    /// Parses and checks a header.
    pub fn parse(b: &[u8; HDR_LEN]) -> Result<Header, ProtoError> {
        let h = Header {
            request: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            flags: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            size: u32::from_le_bytes([b[8], b[9], b[10], b[11]]),
        };
        if h.flags & 0x3 != FLAG_VERSION {
            return Err(ProtoError::Version(h.flags));
        }
        if h.size as usize > MAX_PAYLOAD {
            return Err(ProtoError::TooLarge(h.size));
        }
        Ok(h)
    }

    /// The frontend asked for an acknowledgement.
    pub fn need_reply(&self) -> bool {
        self.flags & FLAG_NEED_REPLY != 0
    }
}

/// A ring index with a number (`struct vhost_vring_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VringState {
    /// Virtqueue index.
    pub index: u32,
    /// The number (size, base, enable).
    pub num: u32,
}

/// A decoded request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Msg {
    /// `GET_FEATURES`.
    GetFeatures,
    /// `SET_FEATURES`.
    SetFeatures(u64),
    /// `SET_OWNER`.
    SetOwner,
    /// `RESET_OWNER` (and `RESET_DEVICE`).
    ResetOwner,
    /// `SET_MEM_TABLE`: the regions (one descriptor each comes with it).
    SetMemTable(Vec<RegionDesc>),
    /// `SET_LOG_BASE`: the dirty-page bitmap, `size` bytes at `offset`
    /// in the descriptor that comes with it.
    SetLogBase {
        /// Bytes of bitmap.
        size: u64,
        /// Where it starts in the descriptor.
        offset: u64,
    },
    /// `SET_LOG_FD`: an eventfd for log updates (kept unused).
    SetLogFd,
    /// `SET_VRING_NUM`.
    SetVringNum(VringState),
    /// `SET_VRING_ADDR`.
    SetVringAddr {
        /// Virtqueue index.
        index: u32,
        /// The three areas.
        addrs: RingAddrs,
        /// The used area's guest-physical address, when it is to be
        /// logged (`VHOST_VRING_F_LOG`).
        log: Option<u64>,
    },
    /// `SET_VRING_BASE`.
    SetVringBase(VringState),
    /// `GET_VRING_BASE`.
    GetVringBase(u32),
    /// `SET_VRING_KICK`/`CALL`/`ERR`: the index, and whether no descriptor
    /// comes with it (bit 8).
    SetVringFd {
        /// Which of the three.
        request: u32,
        /// Virtqueue index.
        index: u32,
        /// No descriptor (polling mode).
        nofd: bool,
    },
    /// `GET_PROTOCOL_FEATURES`.
    GetProtocolFeatures,
    /// `SET_PROTOCOL_FEATURES`.
    SetProtocolFeatures(u64),
    /// `GET_QUEUE_NUM`.
    GetQueueNum,
    /// `SET_VRING_ENABLE`.
    SetVringEnable(VringState),
    /// `GET_STATUS`.
    GetStatus,
    /// `SET_STATUS`.
    SetStatus(u64),
    /// `SEND_RARP`: broadcast a RARP from the guest with this MAC.
    SendRarp([u8; 6]),
    /// Understood and ignored (`NET_SET_MTU`).
    Ignored,
    /// Not handled by this backend.
    Unknown(u32),
}

/// Decodes the payload of a request.
pub fn decode(h: &Header, p: &[u8]) -> Result<Msg, ProtoError> {
    let bad = || ProtoError::BadPayload(h.request, p.len());
    let u64_at = |at: usize| -> Option<u64> {
        let b: [u8; 8] = p.get(at..at + 8)?.try_into().ok()?;
        Some(u64::from_le_bytes(b))
    };
    let u32_at = |at: usize| -> Option<u32> {
        let b: [u8; 4] = p.get(at..at + 4)?.try_into().ok()?;
        Some(u32::from_le_bytes(b))
    };
    let one_u64 = || u64_at(0).ok_or_else(bad);
    let state = || -> Result<VringState, ProtoError> {
        Ok(VringState {
            index: u32_at(0).ok_or_else(bad)?,
            num: u32_at(4).ok_or_else(bad)?,
        })
    };
    Ok(match h.request {
        req::GET_FEATURES => Msg::GetFeatures,
        req::SET_FEATURES => Msg::SetFeatures(one_u64()?),
        req::SET_OWNER => Msg::SetOwner,
        req::RESET_OWNER | req::RESET_DEVICE => Msg::ResetOwner,
        req::SET_MEM_TABLE => {
            let n = u32_at(0).ok_or_else(bad)? as usize;
            if n == 0 || n > MAX_REGIONS || p.len() < 8 + 32 * n {
                return Err(bad());
            }
            let mut v = Vec::with_capacity(n);
            for i in 0..n {
                let at = 8 + 32 * i;
                v.push(RegionDesc {
                    gpa: u64_at(at).ok_or_else(bad)?,
                    size: u64_at(at + 8).ok_or_else(bad)?,
                    uva: u64_at(at + 16).ok_or_else(bad)?,
                    mmap_offset: u64_at(at + 24).ok_or_else(bad)?,
                });
            }
            Msg::SetMemTable(v)
        }
        req::SET_LOG_BASE => Msg::SetLogBase {
            size: u64_at(0).ok_or_else(bad)?,
            offset: u64_at(8).ok_or_else(bad)?,
        },
        req::SET_LOG_FD => Msg::SetLogFd,
        req::SET_VRING_NUM => Msg::SetVringNum(state()?),
        req::SET_VRING_ADDR => Msg::SetVringAddr {
            index: u32_at(0).ok_or_else(bad)?,
            addrs: RingAddrs {
                desc: u64_at(8).ok_or_else(bad)?,
                used: u64_at(16).ok_or_else(bad)?,
                avail: u64_at(24).ok_or_else(bad)?,
            },
            // VHOST_VRING_F_LOG (bit 0 of the flags): log_guest_addr holds.
            log: if u32_at(4).ok_or_else(bad)? & 1 != 0 {
                Some(u64_at(32).ok_or_else(bad)?)
            } else {
                None
            },
        },
        req::SET_VRING_BASE => Msg::SetVringBase(state()?),
        req::GET_VRING_BASE => Msg::GetVringBase(state()?.index),
        req::SET_VRING_KICK | req::SET_VRING_CALL | req::SET_VRING_ERR => {
            let v = one_u64()?;
            Msg::SetVringFd {
                request: h.request,
                index: (v & 0xff) as u32,
                nofd: v & 0x100 != 0,
            }
        }
        req::GET_PROTOCOL_FEATURES => Msg::GetProtocolFeatures,
        req::SET_PROTOCOL_FEATURES => Msg::SetProtocolFeatures(one_u64()?),
        req::GET_QUEUE_NUM => Msg::GetQueueNum,
        req::SET_VRING_ENABLE => Msg::SetVringEnable(state()?),
        req::GET_STATUS => Msg::GetStatus,
        req::SET_STATUS => Msg::SetStatus(one_u64()?),
        req::SEND_RARP => {
            let b = one_u64()?.to_le_bytes();
            Msg::SendRarp([b[0], b[1], b[2], b[3], b[4], b[5]])
        }
        req::NET_SET_MTU => Msg::Ignored,
        r => Msg::Unknown(r),
    })
}

/// Whether a request has a reply of its own (others are acknowledged
/// only when `NEED_REPLY` was set and `REPLY_ACK` negotiated).
pub fn has_reply(request: u32) -> bool {
    matches!(
        request,
        req::GET_FEATURES
            | req::GET_PROTOCOL_FEATURES
            | req::GET_VRING_BASE
            | req::GET_QUEUE_NUM
            | req::GET_STATUS
            | req::SET_LOG_BASE
    )
}

/// A message: header and payload (both for requests and replies).
pub fn encode(request: u32, flags: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(HDR_LEN + payload.len());
    v.extend_from_slice(&request.to_le_bytes());
    v.extend_from_slice(&flags.to_le_bytes());
    v.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    v.extend_from_slice(payload);
    v
}

/// A reply carrying one u64.
pub fn reply_u64(request: u32, v: u64) -> Vec<u8> {
    encode(request, FLAG_VERSION | FLAG_REPLY, &v.to_le_bytes())
}

/// A reply carrying a `vhost_vring_state`.
pub fn reply_state(request: u32, s: VringState) -> Vec<u8> {
    let mut p = [0u8; 8];
    p[..4].copy_from_slice(&s.index.to_le_bytes());
    p[4..].copy_from_slice(&s.num.to_le_bytes());
    encode(request, FLAG_VERSION | FLAG_REPLY, &p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdr(request: u32, size: u32) -> Header {
        Header {
            request,
            flags: FLAG_VERSION,
            size,
        }
    }

    #[test]
    fn headers_are_checked() {
        let b = encode(req::GET_FEATURES, FLAG_VERSION | FLAG_NEED_REPLY, &[]);
        let h = Header::parse(b[..12].try_into().unwrap()).unwrap();
        assert_eq!(h.request, req::GET_FEATURES);
        assert!(h.need_reply());
        let b = encode(req::GET_FEATURES, 2, &[]);
        assert_eq!(
            Header::parse(b[..12].try_into().unwrap()),
            Err(ProtoError::Version(2))
        );
        let mut b = encode(1, 1, &[]);
        b[8..12].copy_from_slice(&100_000u32.to_le_bytes());
        assert!(Header::parse(b[..12].try_into().unwrap()).is_err());
    }

    #[test]
    fn payloads_decode_or_are_refused() {
        let mut p = vec![0u8; 40];
        p[0] = 1;
        p[8] = 0x10; // gpa
        p[16] = 0x20; // size
        let m = decode(&hdr(req::SET_MEM_TABLE, 40), &p).unwrap();
        assert_eq!(
            m,
            Msg::SetMemTable(vec![RegionDesc {
                gpa: 0x10,
                size: 0x20,
                uva: 0,
                mmap_offset: 0
            }])
        );
        // Nine regions, or fewer bytes than the count says.
        p[0] = 9;
        assert!(decode(&hdr(req::SET_MEM_TABLE, 40), &p).is_err());
        p[0] = 2;
        assert!(decode(&hdr(req::SET_MEM_TABLE, 40), &p).is_err());
        assert!(decode(&hdr(req::SET_FEATURES, 4), &[0; 4]).is_err());
        assert!(decode(&hdr(req::SET_VRING_ADDR, 20), &[0; 20]).is_err());
        let m = decode(&hdr(req::SET_VRING_KICK, 8), &0x103u64.to_le_bytes()).unwrap();
        assert_eq!(
            m,
            Msg::SetVringFd {
                request: req::SET_VRING_KICK,
                index: 3,
                nofd: true
            }
        );
        assert_eq!(decode(&hdr(999, 0), &[]).unwrap(), Msg::Unknown(999));
        // A ring's addresses, with and without its used area logged.
        let mut a = vec![0u8; 40];
        a[0] = 2;
        a[16] = 0x40; // used
        a[32..40].copy_from_slice(&0x1234_5000u64.to_le_bytes());
        let m = decode(&hdr(req::SET_VRING_ADDR, 40), &a).unwrap();
        assert!(matches!(
            m,
            Msg::SetVringAddr {
                index: 2,
                log: None,
                ..
            }
        ));
        a[4] = 1;
        let m = decode(&hdr(req::SET_VRING_ADDR, 40), &a).unwrap();
        assert!(
            matches!(m, Msg::SetVringAddr { log: Some(0x1234_5000), addrs, .. } if addrs.used == 0x40)
        );
        assert!(decode(&hdr(req::SET_VRING_ADDR, 32), &a[..32]).is_err());
        let mut l = [0u8; 16];
        l[0] = 0x80;
        l[8] = 0x10;
        assert_eq!(
            decode(&hdr(req::SET_LOG_BASE, 16), &l).unwrap(),
            Msg::SetLogBase {
                size: 0x80,
                offset: 0x10
            }
        );
        assert!(decode(&hdr(req::SET_LOG_BASE, 8), &l[..8]).is_err());
        let mac = [0x52u8, 0x54, 0, 0x12, 0x34, 0x56, 0, 0];
        assert_eq!(
            decode(&hdr(req::SEND_RARP, 8), &mac).unwrap(),
            Msg::SendRarp([0x52, 0x54, 0, 0x12, 0x34, 0x56])
        );
        assert!(decode(&hdr(req::SEND_RARP, 6), &mac[..6]).is_err());
    }
}
