//! IPv6 headers (RFC 8200) and the extension headers a datapath walks.
//!
//! - [`Ipv6Packet`]: the 40-byte fixed header. `check_len` accepts version
//!   6 with `40 + payload length ≤ bytes available`; bytes past that
//!   (padding) are not part of the payload. A payload length of 0 is taken
//!   literally (no jumbogram support).
//! - [`Ipv6ExtHeader`]: hop-by-hop (0), routing (43), destination options
//!   (60), whose length is `(len + 1) * 8`, and the authentication header
//!   (51, RFC 4302), whose length is `(len + 2) * 4`. Only the next-header
//!   and length bytes are interpreted.
//! - [`Ipv6FragHeader`]: the 8-byte fragment header (44).
//!
//! IPv6 has no header checksum; transport views patch their pseudo-header
//! sums when an address is rewritten.
//!
//! After `check_len` succeeds no accessor panics (and none does before:
//! see the crate docs).

use core::net::Ipv6Addr;

use crate::bytes::{array_at, be16, be32, set_be16, set_be32, set_bytes_at, set_u8_at, sub, u8_at};
use crate::{checksum, ip_proto};
use crate::{Error, Result};

/// True for the extension headers that [`Ipv6ExtHeader`] and
/// [`Ipv6FragHeader`] cover (hop-by-hop, routing, destination options,
/// authentication, fragment).
#[inline(always)]
pub fn is_ext_header(next_header: u8) -> bool {
    matches!(
        next_header,
        ip_proto::HOPOPTS
            | ip_proto::ROUTING
            | ip_proto::DSTOPTS
            | ip_proto::AH
            | ip_proto::FRAGMENT
    )
}

mod field {
    use crate::Field;
    pub const VER_TC_FLOW: Field = 0..4;
    pub const LENGTH: Field = 4..6;
    pub const NXT_HDR: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC_ADDR: Field = 8..24;
    pub const DST_ADDR: Field = 24..40;
}

/// A read/write view of an IPv6 packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Length of the fixed header.
    pub const HEADER_LEN: usize = 40;

    /// Wraps `buffer` without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6Packet { buffer }
    }

    /// Wraps `buffer` after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// [`Error::Truncated`] when the buffer is shorter than 40 bytes or than
    /// 40 + payload length; [`Error::Malformed`] when the version is not 6.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < Self::HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 6 {
            return Err(Error::Malformed);
        }
        if len < Self::HEADER_LEN + usize::from(self.payload_len()) {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The first 32-bit word: version, traffic class, flow label.
    #[inline(always)]
    pub fn ver_tc_flow(&self) -> u32 {
        be32(self.buffer.as_ref(), field::VER_TC_FLOW)
    }

    /// IP version (6 for a valid packet).
    #[inline(always)]
    pub fn version(&self) -> u8 {
        u8_at(self.buffer.as_ref(), 0) >> 4
    }

    /// Traffic class (DSCP << 2 | ECN).
    #[inline(always)]
    pub fn traffic_class(&self) -> u8 {
        (self.ver_tc_flow() >> 20) as u8
    }

    /// Flow label (20 bits).
    #[inline(always)]
    pub fn flow_label(&self) -> u32 {
        self.ver_tc_flow() & 0x000f_ffff
    }

    /// Payload length (everything after the fixed header).
    #[inline(always)]
    pub fn payload_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Next header.
    #[inline(always)]
    pub fn next_header(&self) -> u8 {
        u8_at(self.buffer.as_ref(), field::NXT_HDR)
    }

    /// Hop limit.
    #[inline(always)]
    pub fn hop_limit(&self) -> u8 {
        u8_at(self.buffer.as_ref(), field::HOP_LIMIT)
    }

    /// Source address octets.
    #[inline(always)]
    pub fn src_bytes(&self) -> [u8; 16] {
        array_at(self.buffer.as_ref(), field::SRC_ADDR.start)
    }

    /// Destination address octets.
    #[inline(always)]
    pub fn dst_bytes(&self) -> [u8; 16] {
        array_at(self.buffer.as_ref(), field::DST_ADDR.start)
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.src_bytes())
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.dst_bytes())
    }

    /// The payload (extension headers and upper layer): 40 .. 40 + payload
    /// length, padding excluded.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        sub(
            self.buffer.as_ref(),
            Self::HEADER_LEN,
            Self::HEADER_LEN + usize::from(self.payload_len()),
        )
    }

    /// The pseudo-header sum for an upper-layer packet of `len` bytes with
    /// protocol `proto` (the addresses are this header's; with a routing
    /// header the checksum uses the final destination, which the caller
    /// must then supply itself).
    pub fn pseudo_header_sum(&self, proto: u8, len: u32) -> u16 {
        checksum::pseudo_header_v6(self.src_bytes(), self.dst_bytes(), proto, len)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Sets version 6, keeping traffic class and flow label.
    pub fn set_version(&mut self) {
        let w = (self.ver_tc_flow() & 0x0fff_ffff) | 0x6000_0000;
        set_be32(self.buffer.as_mut(), field::VER_TC_FLOW, w);
    }

    /// Sets the traffic class.
    pub fn set_traffic_class(&mut self, tc: u8) {
        let w = (self.ver_tc_flow() & 0xf00f_ffff) | (u32::from(tc) << 20);
        set_be32(self.buffer.as_mut(), field::VER_TC_FLOW, w);
    }

    /// Sets the flow label (low 20 bits of `label`).
    pub fn set_flow_label(&mut self, label: u32) {
        let w = (self.ver_tc_flow() & 0xfff0_0000) | (label & 0x000f_ffff);
        set_be32(self.buffer.as_mut(), field::VER_TC_FLOW, w);
    }

    /// Sets the payload length.
    pub fn set_payload_len(&mut self, len: u16) {
        set_be16(self.buffer.as_mut(), field::LENGTH, len);
    }

    /// Sets the next header.
    pub fn set_next_header(&mut self, nh: u8) {
        set_u8_at(self.buffer.as_mut(), field::NXT_HDR, nh);
    }

    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, hl: u8) {
        set_u8_at(self.buffer.as_mut(), field::HOP_LIMIT, hl);
    }

    /// Sets the source address (transport checksums are not touched).
    pub fn set_src_addr(&mut self, a: Ipv6Addr) {
        set_bytes_at(self.buffer.as_mut(), field::SRC_ADDR.start, &a.octets());
    }

    /// Sets the destination address (transport checksums are not touched).
    pub fn set_dst_addr(&mut self, a: Ipv6Addr) {
        set_bytes_at(self.buffer.as_mut(), field::DST_ADDR.start, &a.octets());
    }
}

mod ext_field {
    pub const NXT_HDR: usize = 0;
    pub const LENGTH: usize = 1;
}

/// A hop-by-hop, routing, destination-options or authentication header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6ExtHeader<T: AsRef<[u8]>> {
    buffer: T,
    is_ah: bool,
}

impl<T: AsRef<[u8]>> Ipv6ExtHeader<T> {
    /// Every extension header is at least 8 bytes.
    pub const MIN_LEN: usize = 8;

    /// Wraps `buffer`, the header whose type is `kind` (the next-header
    /// value that announced it; 51 selects the AH length rule), unchecked.
    pub const fn new_unchecked(buffer: T, kind: u8) -> Self {
        Ipv6ExtHeader {
            buffer,
            is_ah: kind == ip_proto::AH,
        }
    }

    /// Wraps `buffer` after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T, kind: u8) -> Result<Self> {
        let h = Self::new_unchecked(buffer, kind);
        h.check_len()?;
        Ok(h)
    }

    /// [`Error::Truncated`] unless 8 bytes and the whole header are present.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < Self::MIN_LEN || len < self.header_len() {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// Next header.
    #[inline(always)]
    pub fn next_header(&self) -> u8 {
        u8_at(self.buffer.as_ref(), ext_field::NXT_HDR)
    }

    /// The raw length byte.
    pub fn raw_len(&self) -> u8 {
        u8_at(self.buffer.as_ref(), ext_field::LENGTH)
    }

    /// Header length in bytes: `(len + 1) * 8`, or `(len + 2) * 4` for AH.
    #[inline(always)]
    pub fn header_len(&self) -> usize {
        let l = usize::from(self.raw_len());
        if self.is_ah {
            (l + 2) * 4
        } else {
            (l + 1) * 8
        }
    }

    /// The header's bytes after next-header and length.
    pub fn data(&self) -> &[u8] {
        sub(self.buffer.as_ref(), 2, self.header_len())
    }

    /// What follows the header.
    pub fn payload(&self) -> &[u8] {
        let d = self.buffer.as_ref();
        sub(d, self.header_len(), d.len())
    }
}

mod frag_field {
    use crate::Field;
    pub const NXT_HDR: usize = 0;
    pub const OFF_FLG: Field = 2..4;
    pub const IDENT: Field = 4..8;
}

/// The IPv6 fragment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6FragHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6FragHeader<T> {
    /// Length of the header.
    pub const HEADER_LEN: usize = 8;

    /// Wraps `buffer` without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6FragHeader { buffer }
    }

    /// Wraps `buffer` after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let h = Self::new_unchecked(buffer);
        h.check_len()?;
        Ok(h)
    }

    /// [`Error::Truncated`] unless 8 bytes are present.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < Self::HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// Next header.
    #[inline(always)]
    pub fn next_header(&self) -> u8 {
        u8_at(self.buffer.as_ref(), frag_field::NXT_HDR)
    }

    /// The raw offset/flags word (offset << 3 | reserved << 1 | M).
    #[inline(always)]
    pub fn offset_flags(&self) -> u16 {
        be16(self.buffer.as_ref(), frag_field::OFF_FLG)
    }

    /// Fragment offset in 8-byte units.
    #[inline(always)]
    pub fn frag_offset(&self) -> u16 {
        self.offset_flags() >> 3
    }

    /// The M (more fragments) flag.
    pub fn more_frags(&self) -> bool {
        self.offset_flags() & 1 != 0
    }

    /// Identification.
    pub fn ident(&self) -> u32 {
        be32(self.buffer.as_ref(), frag_field::IDENT)
    }

    /// What follows the header.
    pub fn payload(&self) -> &[u8] {
        let d = self.buffer.as_ref();
        sub(d, Self::HEADER_LEN, d.len())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6FragHeader<T> {
    /// Writes next header, offset (8-byte units), M flag and identification.
    pub fn set(&mut self, next_header: u8, offset: u16, more: bool, ident: u32) {
        let d = self.buffer.as_mut();
        set_u8_at(d, frag_field::NXT_HDR, next_header);
        set_u8_at(d, 1, 0);
        set_be16(d, frag_field::OFF_FLG, (offset << 3) | u16::from(more));
        set_be32(d, frag_field::IDENT, ident);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet() -> [u8; 56] {
        let mut b = [0u8; 56];
        let mut p = Ipv6Packet::new_unchecked(&mut b[..]);
        p.set_version();
        p.set_traffic_class(0xb9);
        p.set_flow_label(0xabcde);
        p.set_payload_len(16);
        p.set_next_header(ip_proto::HOPOPTS);
        p.set_hop_limit(255);
        p.set_src_addr("2001:db8::1".parse().unwrap());
        p.set_dst_addr("ff02::1".parse().unwrap());
        // HBH, length 0 (8 bytes), then a fragment header.
        b[40] = ip_proto::FRAGMENT;
        b[41] = 0;
        Ipv6FragHeader::new_unchecked(&mut b[48..]).set(ip_proto::UDP, 0x100, true, 7);
        b
    }

    #[test]
    fn parse_fixed_header() {
        let b = packet();
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0xb9);
        assert_eq!(p.flow_label(), 0xabcde);
        assert_eq!(p.payload_len(), 16);
        assert_eq!(p.next_header(), 0);
        assert_eq!(p.hop_limit(), 255);
        assert_eq!(p.src_addr(), "2001:db8::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(p.dst_addr(), "ff02::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(p.payload().len(), 16);
    }

    #[test]
    fn check_len_cases() {
        let b = packet();
        assert_eq!(
            Ipv6Packet::new_checked(&b[..39]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Ipv6Packet::new_checked(&b[..55]).unwrap_err(),
            Error::Truncated
        );
        let mut v4 = b;
        v4[0] = 0x45;
        assert_eq!(
            Ipv6Packet::new_checked(&v4[..]).unwrap_err(),
            Error::Malformed
        );
    }

    #[test]
    fn walk_ext_headers() {
        let b = packet();
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert!(is_ext_header(p.next_header()));
        let h = Ipv6ExtHeader::new_checked(p.payload(), p.next_header()).unwrap();
        assert_eq!(h.header_len(), 8);
        assert_eq!(h.next_header(), ip_proto::FRAGMENT);
        assert_eq!(h.data().len(), 6);
        let f = Ipv6FragHeader::new_checked(h.payload()).unwrap();
        assert_eq!(f.next_header(), ip_proto::UDP);
        assert_eq!(f.frag_offset(), 0x100);
        assert!(f.more_frags());
        assert_eq!(f.ident(), 7);
        assert!(f.payload().is_empty());
        assert!(!is_ext_header(f.next_header()));
    }

    #[test]
    fn ah_length_rule() {
        let ah = [
            ip_proto::TCP,
            4,
            0,
            0,
            0,
            0,
            0,
            1,
            0,
            0,
            0,
            1,
            9,
            9,
            9,
            9,
            9,
            9,
            9,
            9,
            9,
            9,
            9,
            9,
        ];
        let h = Ipv6ExtHeader::new_checked(&ah[..], ip_proto::AH).unwrap();
        assert_eq!(h.header_len(), 24);
        let zero = [ip_proto::TCP, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            Ipv6ExtHeader::new_checked(&zero[..], ip_proto::AH)
                .unwrap()
                .header_len(),
            8
        );
        let long = [ip_proto::TCP, 1, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            Ipv6ExtHeader::new_checked(&long[..], ip_proto::DSTOPTS).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Ipv6ExtHeader::new_checked(&long[..7], ip_proto::AH).unwrap_err(),
            Error::Truncated
        );
    }
}
