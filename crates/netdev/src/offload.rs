//! Offload state carried with frames (virtio-net headers) and finishing
//! it in software for ports that cannot take it.
//!
//! An AF_PACKET socket with `PACKET_VNET_HDR` hands each frame over with a
//! `struct virtio_net_hdr`: whether the L4 checksum is still to be
//! completed (`NEEDS_CSUM`: the field holds the pseudo-header sum,
//! `csum_start`/`csum_offset` say where), and whether the frame is a
//! GSO super-frame of `gso_size`-byte segments. Forwarding both as they
//! are to another such socket keeps the kernel's TCP throughput; a port
//! without offloads (AF_XDP, a capture) gets the frame finished here.

/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`.
pub const F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_F_DATA_VALID`.
pub const F_DATA_VALID: u8 = 2;
/// `VIRTIO_NET_HDR_GSO_NONE`.
pub const GSO_NONE: u8 = 0;
/// `VIRTIO_NET_HDR_GSO_TCPV4`.
pub const GSO_TCPV4: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_UDP`.
pub const GSO_UDP: u8 = 3;
/// `VIRTIO_NET_HDR_GSO_TCPV6`.
pub const GSO_TCPV6: u8 = 4;
/// `VIRTIO_NET_HDR_GSO_UDP_L4`.
pub const GSO_UDP_L4: u8 = 5;
/// `VIRTIO_NET_HDR_GSO_ECN`.
pub const GSO_ECN: u8 = 0x80;
/// Size of `struct virtio_net_hdr`.
pub const VNET_HDR_LEN: usize = 10;

/// `struct virtio_net_hdr`, host byte order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VnetHdr {
    /// `F_NEEDS_CSUM`, `F_DATA_VALID`.
    pub flags: u8,
    /// `GSO_*`.
    pub gso_type: u8,
    /// Length of the headers to copy into each segment.
    pub hdr_len: u16,
    /// Payload bytes per segment.
    pub gso_size: u16,
    /// Where checksumming starts.
    pub csum_start: u16,
    /// Offset of the checksum field from `csum_start`.
    pub csum_offset: u16,
}

impl VnetHdr {
    /// Decodes the 10 bytes the kernel wrote (little endian, as the kernel
    /// writes for a little-endian host's packet sockets).
    pub fn from_bytes(b: &[u8; VNET_HDR_LEN]) -> VnetHdr {
        let u = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u(2),
            gso_size: u(4),
            csum_start: u(6),
            csum_offset: u(8),
        }
    }

    /// Encodes for the kernel.
    pub fn to_bytes(&self) -> [u8; VNET_HDR_LEN] {
        let mut b = [0u8; VNET_HDR_LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
        b
    }

    /// True if the frame needs nothing done (no GSO, checksum complete).
    pub fn is_plain(&self) -> bool {
        self.gso_type & !GSO_ECN == GSO_NONE && self.flags & F_NEEDS_CSUM == 0
    }
}

/// Why a frame could not be finished in software.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishError {
    /// Offsets in the header point outside the frame, or headers are not
    /// what the GSO type says.
    Malformed,
    /// A GSO type this code does not segment (UDP fragmentation offload).
    Unsupported,
}

/// Hands `out` the frame as a port without offloads must send it: the
/// checksum completed (`NEEDS_CSUM`), and a GSO super-frame cut into
/// `gso_size`-byte TCP segments (IPv4 or IPv6), each with its own
/// lengths, sequence number, IPv4 id and checksums. `scratch` is reused
/// between calls (it grows to the largest segment once). A plain frame
/// is passed through untouched.
pub fn finish(
    frame: &[u8],
    vnet: &VnetHdr,
    scratch: &mut Vec<u8>,
    out: &mut dyn FnMut(&[u8]),
) -> Result<usize, FinishError> {
    let gso = vnet.gso_type & !GSO_ECN;
    if gso == GSO_NONE {
        if vnet.flags & F_NEEDS_CSUM == 0 {
            out(frame);
            return Ok(1);
        }
        scratch.clear();
        scratch.extend_from_slice(frame);
        complete_csum(scratch, vnet.csum_start.into(), vnet.csum_offset.into())?;
        out(scratch);
        return Ok(1);
    }
    if gso != GSO_TCPV4 && gso != GSO_TCPV6 {
        return Err(FinishError::Unsupported);
    }
    let l3 = l3_offset(frame).ok_or(FinishError::Malformed)?;
    let v4 = gso == GSO_TCPV4;
    let l4 = usize::from(vnet.csum_start);
    if l4 <= l3 || l4 + 20 > frame.len() {
        return Err(FinishError::Malformed);
    }
    let thl = usize::from(frame[l4 + 12] >> 4) * 4;
    let hdr_end = l4 + thl;
    let mss = usize::from(vnet.gso_size);
    if thl < 20 || hdr_end > frame.len() || mss == 0 {
        return Err(FinishError::Malformed);
    }
    // The L4 header starts after a whole IP header.
    if v4 && (frame.len() < l3 + 20 || frame[l3] >> 4 != 4 || l4 < l3 + 20) {
        return Err(FinishError::Malformed);
    }
    if !v4 && (frame.len() < l3 + 40 || frame[l3] >> 4 != 6 || l4 < l3 + 40) {
        return Err(FinishError::Malformed);
    }
    let payload = &frame[hdr_end..];
    let seq0 = u32::from_be_bytes([frame[l4 + 4], frame[l4 + 5], frame[l4 + 6], frame[l4 + 7]]);
    let flags0 = frame[l4 + 13];
    let id0 = u16::from_be_bytes([frame[l3 + 4], frame[l3 + 5]]);
    let nseg = payload.len().div_ceil(mss).max(1);
    for i in 0..nseg {
        let chunk = &payload[(i * mss).min(payload.len())..((i + 1) * mss).min(payload.len())];
        scratch.clear();
        scratch.extend_from_slice(&frame[..hdr_end]);
        scratch.extend_from_slice(chunk);
        let last = i + 1 == nseg;
        // TCP: sequence number; FIN and PSH only on the last segment, CWR
        // only on the first.
        let seq = seq0.wrapping_add((i * mss) as u32);
        scratch[l4 + 4..l4 + 8].copy_from_slice(&seq.to_be_bytes());
        let mut fl = flags0;
        if !last {
            fl &= !(0x01 | 0x08);
        }
        if i > 0 {
            fl &= !0x80;
        }
        scratch[l4 + 13] = fl;
        let l4_len = thl + chunk.len();
        if v4 {
            let tot = (l4 - l3 + l4_len) as u16;
            scratch[l3 + 2..l3 + 4].copy_from_slice(&tot.to_be_bytes());
            scratch[l3 + 4..l3 + 6].copy_from_slice(&id0.wrapping_add(i as u16).to_be_bytes());
            scratch[l3 + 10..l3 + 12].copy_from_slice(&[0, 0]);
            let ihl = usize::from(scratch[l3] & 0x0f) * 4;
            let c = !fold(sum(&scratch[l3..l3 + ihl.min(l4 - l3)], 0));
            scratch[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
        } else {
            let pl = (l4 - l3 - 40 + l4_len) as u16;
            scratch[l3 + 4..l3 + 6].copy_from_slice(&pl.to_be_bytes());
        }
        // Full TCP checksum: pseudo-header, header and payload.
        scratch[l4 + 16..l4 + 18].copy_from_slice(&[0, 0]);
        let mut s = if v4 {
            sum(&scratch[l3 + 12..l3 + 20], 0)
        } else {
            sum(&scratch[l3 + 8..l3 + 40], 0)
        };
        s += 6 + l4_len as u64;
        let c = !fold(sum(&scratch[l4..], s));
        scratch[l4 + 16..l4 + 18].copy_from_slice(&c.to_be_bytes());
        out(scratch);
    }
    Ok(nseg)
}

/// Completes a partial checksum in place: the field at `start + offset`
/// holds the pseudo-header sum; the checksum covers `start..`.
fn complete_csum(f: &mut [u8], start: usize, offset: usize) -> Result<(), FinishError> {
    let at = start + offset;
    if at + 2 > f.len() {
        return Err(FinishError::Malformed);
    }
    let mut c = !fold(sum(&f[start..], 0));
    // A UDP checksum of 0 means "none": send 0xffff instead (RFC 768).
    if c == 0 && offset == 6 {
        c = 0xffff;
    }
    f[at..at + 2].copy_from_slice(&c.to_be_bytes());
    Ok(())
}

/// Offset of the L3 header after Ethernet and any VLAN tags.
fn l3_offset(f: &[u8]) -> Option<usize> {
    let mut off = 12;
    loop {
        let t = u16::from_be_bytes([*f.get(off)?, *f.get(off + 1)?]);
        if t == 0x8100 || t == 0x88a8 {
            off += 4;
        } else {
            return Some(off + 2);
        }
    }
}

/// Ones'-complement sum of `data` (big-endian 16-bit words) added to `acc`.
fn sum(data: &[u8], mut acc: u64) -> u64 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [b] = chunks.remainder() {
        acc += u64::from(*b) << 8;
    }
    acc
}

fn fold(mut s: u64) -> u16 {
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ethernet + IPv4 + TCP with `payload` bytes, checksums filled.
    fn tcp4(payload: usize, flags: u8) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 20 + payload];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let tot = (40 + payload) as u16;
        f[14] = 0x45;
        f[16..18].copy_from_slice(&tot.to_be_bytes());
        f[18..20].copy_from_slice(&[0x12, 0x34]);
        f[22] = 64;
        f[23] = 6;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 0, 0, 2]);
        f[34..36].copy_from_slice(&1000u16.to_be_bytes());
        f[36..38].copy_from_slice(&80u16.to_be_bytes());
        f[38..42].copy_from_slice(&7u32.to_be_bytes());
        f[46] = 0x50;
        f[47] = flags;
        for (i, b) in f[54..].iter_mut().enumerate() {
            *b = i as u8;
        }
        f
    }

    fn ipv4_ok(f: &[u8]) -> bool {
        fold(sum(&f[14..34], 0)) == 0xffff
    }

    fn tcp4_ok(f: &[u8]) -> bool {
        let len = f.len() - 34;
        let s = sum(&f[26..34], 6 + len as u64);
        fold(sum(&f[34..], s)) == 0xffff
    }

    #[test]
    fn partial_checksum_is_completed() {
        let mut f = tcp4(100, 0x18);
        // Pseudo-header sum in the field, as the kernel leaves it.
        let ps = fold(sum(&f[26..34], 6 + 120));
        f[50..52].copy_from_slice(&ps.to_be_bytes());
        let v = VnetHdr {
            flags: F_NEEDS_CSUM,
            csum_start: 34,
            csum_offset: 16,
            ..VnetHdr::default()
        };
        let mut got = Vec::new();
        let n = finish(&f, &v, &mut Vec::new(), &mut |s| got.push(s.to_vec())).unwrap();
        assert_eq!(n, 1);
        assert!(tcp4_ok(&got[0]));
    }

    #[test]
    fn gso_frame_is_cut_into_valid_segments() {
        let f = tcp4(3000, 0x19); // FIN|PSH|ACK
        let v = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            hdr_len: 54,
            gso_size: 1448,
            csum_start: 34,
            csum_offset: 16,
        };
        let mut segs = Vec::new();
        let n = finish(&f, &v, &mut Vec::new(), &mut |s| segs.push(s.to_vec())).unwrap();
        assert_eq!(n, 3);
        let payload: Vec<u8> = segs.iter().flat_map(|s| s[54..].to_vec()).collect();
        assert_eq!(payload, f[54..]);
        for (i, s) in segs.iter().enumerate() {
            assert!(ipv4_ok(s) && tcp4_ok(s), "segment {i}");
            let seq = u32::from_be_bytes([s[38], s[39], s[40], s[41]]);
            assert_eq!(seq, 7 + 1448 * i as u32);
            assert_eq!(s[47] & 0x09 != 0, i == 2, "FIN/PSH on the last only");
            assert_eq!(
                usize::from(u16::from_be_bytes([s[16], s[17]])),
                s.len() - 14
            );
        }
    }

    /// Found by the `netdev_offload` fuzz target
    /// (crash-698842a4e9b833683ed42cf6070247ea18aa4441): an IPv6 GSO frame
    /// whose `csum_start` points inside the IPv6 header underflowed the
    /// payload length computation.
    #[test]
    fn fuzz_crash_698842a4_ipv6_l4_inside_the_ip_header() {
        let input: [u8; 166] = [
            59, 4, 0, 0, 0, 255, 24, 0, 0, 0, 0, 0, 1, 255, 255, 255, 255, 255, 255, 107, 107, 107,
            107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107,
            107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107,
            107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107,
            107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107, 107,
            107, 107, 107, 255, 255, 0, 0, 0, 64, 0, 0, 0, 0, 0, 255, 24, 0, 0, 0, 0, 0, 1, 255,
            255, 255, 255, 255, 255, 255, 255, 0, 0, 0, 64, 0, 0, 0, 165, 85, 85, 254, 205, 205,
            205, 205, 205, 205, 205, 205, 205, 205, 205, 205, 205, 205, 205, 205, 205, 205, 205,
            205, 255, 255, 255, 0, 193, 0, 255, 85, 23, 5, 0, 0, 0, 0, 0,
        ];
        let mut h = [0u8; VNET_HDR_LEN];
        h.copy_from_slice(&input[..VNET_HDR_LEN]);
        let v = VnetHdr::from_bytes(&h);
        let r = finish(&input[VNET_HDR_LEN..], &v, &mut Vec::new(), &mut |_| {});
        assert_eq!(r, Err(FinishError::Malformed));
    }

    #[test]
    fn bad_offsets_are_refused_not_panicking() {
        let f = tcp4(10, 0x10);
        for v in [
            VnetHdr {
                flags: F_NEEDS_CSUM,
                csum_start: 60,
                csum_offset: 16,
                ..VnetHdr::default()
            },
            VnetHdr {
                gso_type: GSO_TCPV4,
                gso_size: 0,
                csum_start: 34,
                ..VnetHdr::default()
            },
            VnetHdr {
                gso_type: GSO_TCPV6,
                gso_size: 100,
                csum_start: 34,
                ..VnetHdr::default()
            },
        ] {
            assert!(
                finish(&f, &v, &mut Vec::new(), &mut |_| {}).is_err(),
                "{v:?}"
            );
        }
        let v = VnetHdr {
            gso_type: GSO_UDP,
            ..VnetHdr::default()
        };
        assert_eq!(
            finish(&f, &v, &mut Vec::new(), &mut |_| {}),
            Err(FinishError::Unsupported)
        );
    }
}
