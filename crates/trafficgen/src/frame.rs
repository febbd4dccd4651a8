//! Hand-built Ethernet/IPv4/UDP and Ethernet/IPv4/TCP frames.
//!
//! The frames are laid out exactly as the team's `gen-pcap.py` packs them, so
//! that workloads can be compared byte for byte:
//!
//! - Ethernet: destination `02:00:00:00:00:02`, source `02:00:00:00:00:01`,
//!   EtherType `0x0800`; no VLAN tag.
//! - IPv4: version 4, IHL 5, DSCP/ECN 0, identification 0, no fragmentation
//!   flags, TTL 64, header checksum computed (RFC 1071).
//! - UDP: the rest of the frame is a zero payload, so the IPv4 total length
//!   and the UDP length cover the whole frame. The UDP checksum is 0 by
//!   default ("no checksum", legal for UDP over IPv4 per RFC 768, and what
//!   `gen-pcap.py` writes); [`UdpChecksum::Computed`] fills it in.
//! - TCP: a bare SYN (sequence `0x1234`, window 1024, data offset 5, no
//!   options, no payload) with its checksum computed over the pseudo-header;
//!   the frame is then padded with zeros to its size, as Ethernet padding
//!   (the IPv4 total length stays 40).
//!
//! Sizes: a frame's *wire size* counts the 4-byte FCS, the stored frame (the
//! pcap record) does not: the default 64-byte wire frame is 60 bytes in the
//! pcap. Every frame of a workload has the same size.

/// Destination MAC address of every frame.
pub const DST_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x02];
/// Source MAC address of every frame.
pub const SRC_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x01];
/// Bytes of the Ethernet frame check sequence, counted on the wire but not
/// stored in a pcap record.
pub const FCS_LEN: usize = 4;
/// Smallest wire frame size accepted (the Ethernet minimum).
pub const MIN_WIRE_SIZE: usize = 64;
/// Largest wire frame size accepted (a common jumbo-frame limit).
pub const MAX_WIRE_SIZE: usize = 9216;

const ETH_LEN: usize = 14;
const IPV4_LEN: usize = 20;
const TCP_LEN: usize = 20;
const IPPROTO_TCP: u8 = 0x06;
const IPPROTO_UDP: u8 = 0x11;
const ETHERTYPE_IPV4: [u8; 2] = [0x08, 0x00];
const TCP_FLAG_SYN: u8 = 0x02;
/// Sequence number of every generated SYN (as `gen-pcap.py`).
pub const SYN_SEQ: u32 = 0x1234;
/// TCP window of every generated SYN.
pub const SYN_WINDOW: u16 = 1024;

/// Whether UDP frames carry a computed checksum.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UdpChecksum {
    /// Checksum field 0: "transmitter generated no checksum" (RFC 768),
    /// byte-identical to `gen-pcap.py`.
    #[default]
    Zero,
    /// The real one's-complement checksum over the pseudo-header and datagram.
    Computed,
}

/// A fixed-size run of frames stored back to back in one buffer.
///
/// Frame `i` is `data[i * frame_len .. (i + 1) * frame_len]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Frames {
    data: Vec<u8>,
    frame_len: usize,
}

impl Frames {
    /// An empty run of frames of `frame_len` bytes each (`frame_len > 0`).
    pub fn new(frame_len: usize) -> Self {
        debug_assert!(frame_len > 0);
        Frames {
            data: Vec::new(),
            frame_len,
        }
    }

    /// An empty run with room for `n` frames.
    pub fn with_capacity(frame_len: usize, n: usize) -> Self {
        Frames {
            data: Vec::with_capacity(frame_len * n),
            frame_len,
        }
    }

    /// Bytes per frame (as stored: without FCS).
    pub fn frame_len(&self) -> usize {
        self.frame_len
    }

    /// Number of frames.
    pub fn len(&self) -> usize {
        self.data.len().checked_div(self.frame_len).unwrap_or(0)
    }

    /// True if there is no frame.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Frame `i`, or `None` past the end.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        let start = i.checked_mul(self.frame_len)?;
        self.data.get(start..start.checked_add(self.frame_len)?)
    }

    /// All frames in order.
    pub fn iter(&self) -> std::slice::ChunksExact<'_, u8> {
        self.data.chunks_exact(self.frame_len.max(1))
    }

    /// The whole buffer, frames back to back.
    pub fn as_bytes(&self) -> &[u8] {
        &self.data
    }

    /// Appends one zeroed frame and returns it for filling in.
    fn push_zeroed(&mut self) -> &mut [u8] {
        let start = self.data.len();
        self.data.resize(start + self.frame_len, 0);
        &mut self.data[start..]
    }

    /// Appends a copy of `frame`, which must be `frame_len` bytes long
    /// (checked in debug builds; a shorter one is zero-padded, a longer one
    /// cut).
    pub fn push_copy(&mut self, frame: &[u8]) {
        debug_assert_eq!(frame.len(), self.frame_len);
        let dst = self.push_zeroed();
        let n = dst.len().min(frame.len());
        dst[..n].copy_from_slice(&frame[..n]);
    }

    /// Appends a UDP frame (see [`write_udp`]).
    pub fn push_udp(&mut self, flow: &UdpFlow, csum: UdpChecksum) {
        write_udp(self.push_zeroed(), flow, csum);
    }

    /// Appends a TCP SYN frame (see [`write_tcp_syn`]).
    pub fn push_tcp_syn(&mut self, flow: &TcpSyn) {
        write_tcp_syn(self.push_zeroed(), flow);
    }
}

/// A UDP/IPv4 5-tuple (protocol implied).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UdpFlow {
    /// IPv4 source address, host order.
    pub src: u32,
    /// IPv4 destination address, host order.
    pub dst: u32,
    /// UDP source port.
    pub sport: u16,
    /// UDP destination port.
    pub dport: u16,
}

/// A TCP SYN's addresses and ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TcpSyn {
    /// IPv4 source address, host order.
    pub src: u32,
    /// IPv4 destination address, host order.
    pub dst: u32,
    /// TCP source port.
    pub sport: u16,
    /// TCP destination port.
    pub dport: u16,
}

/// Stored frame length (without FCS) for a wire size.
pub fn stored_len(wire_size: usize) -> usize {
    wire_size - FCS_LEN
}

/// Writes a UDP frame filling all of `buf` (at least 42 bytes long): the
/// UDP payload is the rest of the buffer, all zeros.
pub fn write_udp(buf: &mut [u8], flow: &UdpFlow, csum: UdpChecksum) {
    buf.fill(0);
    let udp_len = buf.len() - ETH_LEN - IPV4_LEN;
    write_eth(buf);
    write_ipv4(
        &mut buf[ETH_LEN..],
        flow.src,
        flow.dst,
        IPPROTO_UDP,
        udp_len,
    );
    let udp = &mut buf[ETH_LEN + IPV4_LEN..];
    udp[0..2].copy_from_slice(&flow.sport.to_be_bytes());
    udp[2..4].copy_from_slice(&flow.dport.to_be_bytes());
    // udp_len <= MAX_WIRE_SIZE, so it fits 16 bits.
    udp[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    if csum == UdpChecksum::Computed {
        let mut c = transport_checksum(flow.src, flow.dst, IPPROTO_UDP, &udp[..udp_len]);
        if c == 0 {
            c = 0xffff; // RFC 768: a computed 0 is sent as all ones.
        }
        udp[6..8].copy_from_slice(&c.to_be_bytes());
    }
}

/// Writes a TCP SYN frame filling all of `buf` (at least 54 bytes): the
/// bytes after the TCP header are zeros (Ethernet padding).
pub fn write_tcp_syn(buf: &mut [u8], flow: &TcpSyn) {
    buf.fill(0);
    write_eth(buf);
    write_ipv4(
        &mut buf[ETH_LEN..],
        flow.src,
        flow.dst,
        IPPROTO_TCP,
        TCP_LEN,
    );
    let tcp = &mut buf[ETH_LEN + IPV4_LEN..ETH_LEN + IPV4_LEN + TCP_LEN];
    tcp[0..2].copy_from_slice(&flow.sport.to_be_bytes());
    tcp[2..4].copy_from_slice(&flow.dport.to_be_bytes());
    tcp[4..8].copy_from_slice(&SYN_SEQ.to_be_bytes());
    // ack = 0
    tcp[12] = 5 << 4; // data offset: 5 words, no options
    tcp[13] = TCP_FLAG_SYN;
    tcp[14..16].copy_from_slice(&SYN_WINDOW.to_be_bytes());
    let c = transport_checksum(flow.src, flow.dst, IPPROTO_TCP, tcp);
    tcp[16..18].copy_from_slice(&c.to_be_bytes());
}

fn write_eth(buf: &mut [u8]) {
    buf[0..6].copy_from_slice(&DST_MAC);
    buf[6..12].copy_from_slice(&SRC_MAC);
    buf[12..14].copy_from_slice(&ETHERTYPE_IPV4);
}

fn write_ipv4(ip: &mut [u8], src: u32, dst: u32, proto: u8, payload_len: usize) {
    let total = (IPV4_LEN + payload_len) as u16; // <= MAX_WIRE_SIZE
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    // identification 0, flags/fragment offset 0
    ip[8] = 64; // TTL
    ip[9] = proto;
    ip[12..16].copy_from_slice(&src.to_be_bytes());
    ip[16..20].copy_from_slice(&dst.to_be_bytes());
    let c = checksum(&ip[..IPV4_LEN]);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
}

/// Checksum of a TCP or UDP segment with the IPv4 pseudo-header.
fn transport_checksum(src: u32, dst: u32, proto: u8, segment: &[u8]) -> u16 {
    let mut pseudo = [0u8; 12];
    pseudo[0..4].copy_from_slice(&src.to_be_bytes());
    pseudo[4..8].copy_from_slice(&dst.to_be_bytes());
    pseudo[9] = proto;
    pseudo[10..12].copy_from_slice(&(segment.len() as u16).to_be_bytes());
    fold(sum_words(&pseudo, 0) + sum_words(segment, 0))
}

/// The Internet checksum (RFC 1071) of `data`: the one's complement of the
/// one's-complement sum of its 16-bit big-endian words (odd length padded
/// with a zero byte).
pub fn checksum(data: &[u8]) -> u16 {
    fold(sum_words(data, 0))
}

fn sum_words(data: &[u8], mut acc: u64) -> u64 {
    let mut chunks = data.chunks_exact(2);
    for w in &mut chunks {
        acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u64::from(*last) << 8;
    }
    acc
}

fn fold(mut s: u64) -> u16 {
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_of_valid_header_is_zero() {
        let mut f = Frames::new(60);
        f.push_udp(
            &UdpFlow {
                src: 0x0a00_0001,
                dst: 0x1400_0001,
                sport: 1024,
                dport: 5001,
            },
            UdpChecksum::Zero,
        );
        let frame = f.get(0).expect("one frame");
        assert_eq!(checksum(&frame[14..34]), 0);
        assert_eq!(&frame[40..42], &[0, 0], "no UDP checksum by default");
    }

    #[test]
    fn computed_udp_checksum_verifies() {
        let flow = UdpFlow {
            src: 0x0a00_0001,
            dst: 0x1400_0001,
            sport: 1024,
            dport: 5001,
        };
        let mut f = Frames::new(60);
        f.push_udp(&flow, UdpChecksum::Computed);
        let frame = f.get(0).expect("one frame");
        assert_ne!(&frame[40..42], &[0, 0]);
        assert_eq!(
            transport_checksum(flow.src, flow.dst, IPPROTO_UDP, &frame[34..]),
            0
        );
    }

    #[test]
    fn odd_length_checksum_pads_with_zero() {
        assert_eq!(checksum(&[0x12]), !0x1200);
        assert_eq!(checksum(&[0xff, 0xff, 0x00, 0x01]), 0xfffe);
    }

    #[test]
    fn frames_indexing() {
        let mut f = Frames::with_capacity(60, 2);
        assert!(f.is_empty());
        let syn = TcpSyn {
            src: 1,
            dst: 2,
            sport: 3,
            dport: 4,
        };
        f.push_tcp_syn(&syn);
        f.push_tcp_syn(&syn);
        assert_eq!(f.len(), 2);
        assert_eq!(f.iter().count(), 2);
        assert!(f.get(2).is_none());
        assert_eq!(f.as_bytes().len(), 120);
        assert_eq!(f.get(1).map(|b| b[47]), Some(TCP_FLAG_SYN));
        assert!(f.get(0).is_some_and(|b| b[54..].iter().all(|&x| x == 0)));
    }
}
