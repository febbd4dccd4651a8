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

/// Finishes, in place, a TCP or UDP checksum that the sender left to
/// offload, in a frame that arrived without offload state (AF_XDP): a
/// veth (or tap, virtio) peer with tx checksum offload on hands the frame
/// over with the L4 checksum field holding the folded pseudo-header sum
/// instead of the checksum, and nothing says so. Returns true when the
/// frame was such a frame and its checksum is now complete.
///
/// The test is cheap and reads no payload: Ethernet (any VLAN tags),
/// IPv4 (not a fragment) or IPv6 (TCP or UDP as the first next header),
/// and the checksum field compared with the pseudo-header sum. Only on a
/// match is the segment summed; a valid frame whose checksum happens to
/// equal its pseudo-header sum (one in 65536) sums to the same value and
/// is reported as untouched (false). Never panics, never allocates.
#[inline]
pub fn finish_partial_csum(f: &mut [u8]) -> bool {
    let be = |b: &[u8], i: usize| u32::from(u16::from_be_bytes([b[i], b[i + 1]]));
    let l3 = match f.get(12..14) {
        Some([0x81, 0x00] | [0x88, 0xa8]) => match l3_offset(f) {
            Some(l3) => l3,
            None => return false,
        },
        Some(_) => 14,
        None => return false,
    };
    // The EtherType (read above) is just before `l3`.
    let (l4, l4_len, proto, ps) = match (f[l3 - 2], f[l3 - 1]) {
        (0x08, 0x00) => {
            let Some(ip) = f.get(l3..l3 + 20) else {
                return false;
            };
            let ihl = usize::from(ip[0] & 0x0f) * 4;
            let tot = be(ip, 2) as usize;
            // Version 4, no fragment (MF or an offset), the lengths inside
            // the frame.
            if ip[0] >> 4 != 4 || ihl < 20 || tot < ihl || l3 + tot > f.len() {
                return false;
            }
            if ip[6] & 0x3f != 0 || ip[7] != 0 {
                return false;
            }
            let a = be(ip, 12) + be(ip, 14) + be(ip, 16) + be(ip, 18);
            (l3 + ihl, tot - ihl, ip[9], a)
        }
        (0x86, 0xdd) => {
            let Some(ip) = f.get(l3..l3 + 40) else {
                return false;
            };
            let pl = be(ip, 4) as usize;
            if ip[0] >> 4 != 6 || l3 + 40 + pl > f.len() {
                return false;
            }
            let a = (8..40).step_by(2).map(|i| be(ip, i)).sum::<u32>();
            (l3 + 40, pl, ip[6], a)
        }
        _ => return false,
    };
    // Where the checksum field is, and the smallest header.
    let (off, min) = match proto {
        6 => (16, 20),
        17 => (6, 8),
        _ => return false,
    };
    if l4_len < min {
        return false;
    }
    let at = l4 + off;
    let field = u16::from_be_bytes([f[at], f[at + 1]]);
    // The pseudo-header sum: addresses, protocol, L4 length (< 2^16).
    if field != fold(u64::from(ps) + u64::from(proto) + l4_len as u64) {
        return false;
    }
    // The field holds the pseudo-header sum: what the checksum over the
    // segment needs as its start (Ethernet padding left out).
    if complete_csum(&mut f[l4..l4 + l4_len], 0, off).is_err() {
        return false;
    }
    u16::from_be_bytes([f[at], f[at + 1]]) != field
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

    /// A frame built (checksums right) by etherparse: TCP or UDP over
    /// IPv4 or IPv6, optionally VLAN-tagged; with the offset of its L4
    /// header and of the checksum field.
    fn built(v6: bool, tcp: bool, vlan: bool, payload: &[u8]) -> (Vec<u8>, usize, usize) {
        use etherparse::PacketBuilder;
        let eth = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
        let ip = match (vlan, v6) {
            (false, false) => eth.ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64),
            (false, true) => eth.ipv6([0xfd; 16], [0xfe; 16], 64),
            (true, false) => eth
                .single_vlan(etherparse::VlanId::try_new(7).unwrap())
                .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64),
            (true, true) => eth
                .single_vlan(etherparse::VlanId::try_new(7).unwrap())
                .ipv6([0xfd; 16], [0xfe; 16], 64),
        };
        let mut f = Vec::new();
        if tcp {
            ip.tcp(40000, 5201, 12345, 64000)
                .ack(99)
                .psh()
                .write(&mut f, payload)
                .unwrap();
        } else {
            ip.udp(40000, 5201).write(&mut f, payload).unwrap();
        }
        let l4 = 14 + if vlan { 4 } else { 0 } + if v6 { 40 } else { 20 };
        (f, l4, l4 + if tcp { 16 } else { 6 })
    }

    /// `good` with its checksum field replaced by the pseudo-header sum,
    /// as a sender with tx checksum offload hands it over (the sum from
    /// the wire crate).
    fn partial_of(good: &[u8], v6: bool, tcp: bool, l4: usize, at: usize) -> Vec<u8> {
        use flowpath_wire::checksum::{pseudo_header_v4, pseudo_header_v6};
        let proto = if tcp { 6 } else { 17 };
        let len = good.len() - l4;
        let l3 = l4 - if v6 { 40 } else { 20 };
        let ps = if v6 {
            let a: [u8; 16] = good[l3 + 8..l3 + 24].try_into().unwrap();
            let b: [u8; 16] = good[l3 + 24..l3 + 40].try_into().unwrap();
            pseudo_header_v6(a, b, proto, len as u32)
        } else {
            let a: [u8; 4] = good[l3 + 12..l3 + 16].try_into().unwrap();
            let b: [u8; 4] = good[l3 + 16..l3 + 20].try_into().unwrap();
            pseudo_header_v4(a, b, proto, len as u16)
        };
        let mut p = good.to_vec();
        p[at..at + 2].copy_from_slice(&ps.to_be_bytes());
        p
    }

    /// Whether etherparse finds the frame's L4 checksum right.
    fn l4_checksum_ok(f: &[u8]) -> bool {
        use etherparse::{NetSlice, SlicedPacket, TransportSlice};
        let p = SlicedPacket::from_ethernet(f).unwrap();
        let t = p.transport.unwrap();
        match (p.net.unwrap(), t) {
            (NetSlice::Ipv4(ip), TransportSlice::Tcp(t)) => {
                let h = ip.header();
                t.calc_checksum_ipv4(h.source(), h.destination()).unwrap() == t.checksum()
            }
            (NetSlice::Ipv6(ip), TransportSlice::Tcp(t)) => {
                let h = ip.header();
                t.calc_checksum_ipv6(h.source(), h.destination()).unwrap() == t.checksum()
            }
            (NetSlice::Ipv4(ip), TransportSlice::Udp(u)) => {
                let h = ip.header();
                let want = u
                    .to_header()
                    .calc_checksum_ipv4_raw(h.source(), h.destination(), u.payload())
                    .unwrap();
                want == u.checksum()
            }
            (NetSlice::Ipv6(ip), TransportSlice::Udp(u)) => {
                let h = ip.header();
                let want = u
                    .to_header()
                    .calc_checksum_ipv6_raw(h.source(), h.destination(), u.payload())
                    .unwrap();
                want == u.checksum()
            }
            _ => panic!("not TCP/UDP over IP"),
        }
    }

    #[test]
    fn partial_l4_checksums_are_finished_valid_frames_untouched() {
        let payload: Vec<u8> = (0..1001u32).map(|i| (i * 7 + 3) as u8).collect();
        for v6 in [false, true] {
            for tcp in [false, true] {
                for vlan in [false, true] {
                    for n in [0, 1, 2, 1001] {
                        let what = format!("v6={v6} tcp={tcp} vlan={vlan} payload={n}");
                        let (good, l4, at) = built(v6, tcp, vlan, &payload[..n]);
                        assert!(l4_checksum_ok(&good), "{what}: etherparse built it right");
                        let mut f = good.clone();
                        assert!(!finish_partial_csum(&mut f), "{what}: valid frame");
                        assert_eq!(f, good, "{what}: valid frame untouched");
                        let mut p = partial_of(&good, v6, tcp, l4, at);
                        assert_ne!(p, good, "{what}");
                        assert!(!l4_checksum_ok(&p), "{what}: partial is not valid");
                        assert!(finish_partial_csum(&mut p), "{what}: partial detected");
                        assert!(l4_checksum_ok(&p), "{what}: finished");
                        assert_eq!(p, good, "{what}: the sender's checksum");
                        // Ethernet padding after the IP packet is left out.
                        let mut padded = partial_of(&good, v6, tcp, l4, at);
                        padded.extend_from_slice(&[0xab; 17]);
                        assert!(finish_partial_csum(&mut padded), "{what}: padded");
                        assert_eq!(&padded[..good.len()], &good[..], "{what}: padded");
                    }
                }
            }
        }
    }

    #[test]
    fn partial_check_leaves_other_frames_alone_and_never_panics() {
        let (good, l4, at) = built(false, true, false, b"hello");
        let partial = partial_of(&good, false, true, l4, at);
        // Every truncation of a partial frame: no panic, and never
        // "finished" (the IP length no longer fits).
        for n in 0..partial.len() {
            let mut f = partial[..n].to_vec();
            assert!(!finish_partial_csum(&mut f), "truncated to {n}");
            assert_eq!(f, partial[..n], "truncated to {n}");
        }
        // A fragment (MF set) is not touched.
        let mut frag = partial.clone();
        frag[20] |= 0x20;
        assert!(!finish_partial_csum(&mut frag.clone()));
        frag[20] &= !0x20;
        frag[21] = 1;
        let before = frag.clone();
        assert!(!finish_partial_csum(&mut frag));
        assert_eq!(frag, before);
        // Not IP (ARP), and not TCP/UDP (ICMP with the same bytes).
        let mut arp = partial.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert!(!finish_partial_csum(&mut arp));
        let mut icmp = partial.clone();
        icmp[23] = 1;
        assert!(!finish_partial_csum(&mut icmp));
        // A UDP/IPv4 datagram without a checksum (0) stays so.
        let (udp, ..) = built(false, false, false, b"x");
        let mut none = udp.clone();
        none[40..42].copy_from_slice(&[0, 0]);
        let before = none.clone();
        assert!(!finish_partial_csum(&mut none));
        assert_eq!(none, before);
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
