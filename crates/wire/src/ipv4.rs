//! IPv4 headers (RFC 791).
//!
//! [`Ipv4Packet::check_len`] accepts exactly what a datapath may parse
//! further: at least 20 bytes, version 4, IHL ≥ 5, `IHL*4 ≤ total length ≤
//! bytes available`. Bytes past the total length (Ethernet padding) are not
//! part of [`Ipv4Packet::payload`].
//!
//! The `rewrite_*` setters change a field and patch the header checksum
//! incrementally (RFC 1624); a transport checksum that covers a rewritten
//! address is patched by the transport view (`TcpPacket::
//! update_checksum_for_addr`, ...).
//!
//! After `check_len` succeeds no accessor panics (and none does before:
//! see the crate docs).

use core::net::Ipv4Addr;

use crate::bytes::{array_at, be16, set_be16, set_bytes_at, set_u8_at, sub, sub_mut, u8_at};
use crate::checksum;
use crate::{Error, Result};

mod field {
    use crate::Field;
    pub const VER_IHL: usize = 0;
    pub const TOS: usize = 1;
    pub const LENGTH: Field = 2..4;
    pub const IDENT: Field = 4..6;
    pub const FLG_OFF: Field = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Field = 10..12;
    pub const SRC_ADDR: Field = 12..16;
    pub const DST_ADDR: Field = 16..20;
}

/// "More fragments" flag in the flags/offset word.
pub const FLAG_MF: u16 = 0x2000;
/// "Don't fragment" flag in the flags/offset word.
pub const FLAG_DF: u16 = 0x4000;
/// Fragment offset bits (in 8-byte units) of the flags/offset word.
pub const FRAG_OFFSET_MASK: u16 = 0x1fff;

/// A read/write view of an IPv4 packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Length of a header without options.
    pub const MIN_HEADER_LEN: usize = 20;

    /// Wraps `buffer` without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv4Packet { buffer }
    }

    /// Wraps `buffer` after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Validates the lengths and the version: [`Error::Truncated`] when the
    /// buffer is shorter than 20 bytes, the header or the total length;
    /// [`Error::Malformed`] when the version is not 4, IHL < 5 or the total
    /// length is below the header length.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < Self::MIN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 4 {
            return Err(Error::Malformed);
        }
        let hlen = self.header_len();
        if hlen < Self::MIN_HEADER_LEN {
            return Err(Error::Malformed);
        }
        if len < hlen {
            return Err(Error::Truncated);
        }
        let total = usize::from(self.total_len());
        if total < hlen {
            return Err(Error::Malformed);
        }
        if len < total {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// IP version (4 for a valid packet).
    #[inline(always)]
    pub fn version(&self) -> u8 {
        u8_at(self.buffer.as_ref(), field::VER_IHL) >> 4
    }

    /// Header length in bytes (IHL × 4).
    #[inline(always)]
    pub fn header_len(&self) -> usize {
        usize::from(u8_at(self.buffer.as_ref(), field::VER_IHL) & 0x0f) * 4
    }

    /// The whole ToS byte (DSCP << 2 | ECN).
    #[inline(always)]
    pub fn tos(&self) -> u8 {
        u8_at(self.buffer.as_ref(), field::TOS)
    }

    /// Differentiated services code point (6 bits).
    pub fn dscp(&self) -> u8 {
        self.tos() >> 2
    }

    /// Explicit congestion notification (2 bits).
    pub fn ecn(&self) -> u8 {
        self.tos() & 0x03
    }

    /// Total length (header + payload) in bytes.
    #[inline(always)]
    pub fn total_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Identification.
    pub fn ident(&self) -> u16 {
        be16(self.buffer.as_ref(), field::IDENT)
    }

    /// The raw flags/fragment-offset word.
    #[inline(always)]
    pub fn flags_frag(&self) -> u16 {
        be16(self.buffer.as_ref(), field::FLG_OFF)
    }

    /// The DF flag.
    pub fn dont_frag(&self) -> bool {
        self.flags_frag() & FLAG_DF != 0
    }

    /// The MF flag.
    pub fn more_frags(&self) -> bool {
        self.flags_frag() & FLAG_MF != 0
    }

    /// Fragment offset in 8-byte units.
    pub fn frag_offset(&self) -> u16 {
        self.flags_frag() & FRAG_OFFSET_MASK
    }

    /// True for any fragment (MF set or offset ≠ 0).
    #[inline(always)]
    pub fn is_fragment(&self) -> bool {
        self.flags_frag() & (FLAG_MF | FRAG_OFFSET_MASK) != 0
    }

    /// True for a fragment other than the first (offset ≠ 0).
    #[inline(always)]
    pub fn is_later_fragment(&self) -> bool {
        self.flags_frag() & FRAG_OFFSET_MASK != 0
    }

    /// Time to live.
    #[inline(always)]
    pub fn ttl(&self) -> u8 {
        u8_at(self.buffer.as_ref(), field::TTL)
    }

    /// Protocol of the payload.
    #[inline(always)]
    pub fn protocol(&self) -> u8 {
        u8_at(self.buffer.as_ref(), field::PROTOCOL)
    }

    /// Stored header checksum.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Source address.
    #[inline(always)]
    pub fn src_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.src_bytes())
    }

    /// Destination address.
    #[inline(always)]
    pub fn dst_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.dst_bytes())
    }

    /// Source address octets.
    #[inline(always)]
    pub fn src_bytes(&self) -> [u8; 4] {
        array_at(self.buffer.as_ref(), field::SRC_ADDR.start)
    }

    /// Destination address octets.
    #[inline(always)]
    pub fn dst_bytes(&self) -> [u8; 4] {
        array_at(self.buffer.as_ref(), field::DST_ADDR.start)
    }

    /// Options (bytes 20 .. header length).
    pub fn options(&self) -> &[u8] {
        sub(
            self.buffer.as_ref(),
            Self::MIN_HEADER_LEN,
            self.header_len(),
        )
    }

    /// The payload: header length .. total length (padding excluded).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        sub(
            self.buffer.as_ref(),
            self.header_len(),
            usize::from(self.total_len()),
        )
    }

    /// True when the header checksum is right.
    pub fn verify_checksum(&self) -> bool {
        let h = sub(self.buffer.as_ref(), 0, self.header_len());
        checksum::sum(h) == 0xffff
    }

    /// The sum of the pseudo-header for this packet's payload (for
    /// transport checksums).
    pub fn pseudo_header_sum(&self) -> u16 {
        let len = usize::from(self.total_len()).saturating_sub(self.header_len());
        checksum::pseudo_header_v4(
            self.src_bytes(),
            self.dst_bytes(),
            self.protocol(),
            len as u16,
        )
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Sets version 4 and the header length (a multiple of 4, 20..=60).
    pub fn set_version_and_header_len(&mut self, header_len: usize) {
        let ihl = ((header_len / 4) & 0x0f) as u8;
        set_u8_at(self.buffer.as_mut(), field::VER_IHL, 0x40 | ihl);
    }

    /// Sets the ToS byte (no checksum update).
    pub fn set_tos(&mut self, tos: u8) {
        set_u8_at(self.buffer.as_mut(), field::TOS, tos);
    }

    /// Sets the total length (no checksum update).
    pub fn set_total_len(&mut self, len: u16) {
        set_be16(self.buffer.as_mut(), field::LENGTH, len);
    }

    /// Sets the identification (no checksum update).
    pub fn set_ident(&mut self, id: u16) {
        set_be16(self.buffer.as_mut(), field::IDENT, id);
    }

    /// Sets the flags/fragment-offset word (no checksum update).
    pub fn set_flags_frag(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::FLG_OFF, v);
    }

    /// Sets the TTL (no checksum update).
    pub fn set_ttl(&mut self, ttl: u8) {
        set_u8_at(self.buffer.as_mut(), field::TTL, ttl);
    }

    /// Sets the protocol (no checksum update).
    pub fn set_protocol(&mut self, p: u8) {
        set_u8_at(self.buffer.as_mut(), field::PROTOCOL, p);
    }

    /// Sets the stored header checksum.
    pub fn set_checksum(&mut self, c: u16) {
        set_be16(self.buffer.as_mut(), field::CHECKSUM, c);
    }

    /// Sets the source address (no checksum update).
    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        set_bytes_at(self.buffer.as_mut(), field::SRC_ADDR.start, &a.octets());
    }

    /// Sets the destination address (no checksum update).
    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        set_bytes_at(self.buffer.as_mut(), field::DST_ADDR.start, &a.octets());
    }

    /// Recomputes the header checksum from scratch.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let hl = self.header_len();
        let c = checksum::checksum(sub(self.buffer.as_ref(), 0, hl));
        self.set_checksum(c);
    }

    /// Sets the source address and patches the header checksum (RFC 1624).
    pub fn rewrite_src_addr(&mut self, a: Ipv4Addr) {
        let old = u32::from(self.src_addr());
        self.set_src_addr(a);
        self.set_checksum(checksum::update32(self.checksum(), old, u32::from(a)));
    }

    /// Sets the destination address and patches the header checksum.
    pub fn rewrite_dst_addr(&mut self, a: Ipv4Addr) {
        let old = u32::from(self.dst_addr());
        self.set_dst_addr(a);
        self.set_checksum(checksum::update32(self.checksum(), old, u32::from(a)));
    }

    /// Sets the TTL and patches the header checksum.
    pub fn rewrite_ttl(&mut self, ttl: u8) {
        let old = u16::from_be_bytes([self.ttl(), self.protocol()]);
        self.set_ttl(ttl);
        let new = u16::from_be_bytes([ttl, self.protocol()]);
        self.set_checksum(checksum::update(self.checksum(), old, new));
    }

    /// Sets the ToS byte and patches the header checksum.
    pub fn rewrite_tos(&mut self, tos: u8) {
        let vi = u8_at(self.buffer.as_ref(), field::VER_IHL);
        let old = u16::from_be_bytes([vi, self.tos()]);
        self.set_tos(tos);
        self.set_checksum(checksum::update(
            self.checksum(),
            old,
            u16::from_be_bytes([vi, tos]),
        ));
    }

    /// The payload, mutable (header length .. total length).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (hl, tl) = (self.header_len(), usize::from(self.total_len()));
        sub_mut(self.buffer.as_mut(), hl, tl)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // 192.168.0.1 -> 192.168.0.199, UDP, total length 28, two bytes of
    // Ethernet padding after it.
    fn packet() -> [u8; 30] {
        let mut b = [0u8; 30];
        b[..20].copy_from_slice(&[
            0x45, 0x00, 0x00, 0x1c, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ]);
        let mut p = Ipv4Packet::new_unchecked(&mut b[..]);
        p.fill_checksum();
        b
    }

    #[test]
    fn parse() {
        let b = packet();
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.total_len(), 28);
        assert_eq!(p.ident(), 0x1234);
        assert!(p.dont_frag() && !p.more_frags() && !p.is_fragment());
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.protocol(), 0x11);
        assert_eq!(p.src_addr(), Ipv4Addr::new(192, 168, 0, 1));
        assert_eq!(p.dst_addr(), Ipv4Addr::new(192, 168, 0, 199));
        assert_eq!(p.payload().len(), 8, "padding is not payload");
        assert!(p.options().is_empty());
        assert!(p.verify_checksum());
    }

    #[test]
    fn check_len_cases() {
        let b = packet();
        assert_eq!(
            Ipv4Packet::new_checked(&b[..19]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Ipv4Packet::new_checked(&b[..27]).unwrap_err(),
            Error::Truncated
        );
        assert!(Ipv4Packet::new_checked(&b[..28]).is_ok());
        let mut v6 = b;
        v6[0] = 0x65;
        assert_eq!(
            Ipv4Packet::new_checked(&v6[..]).unwrap_err(),
            Error::Malformed
        );
        let mut ihl4 = b;
        ihl4[0] = 0x44;
        assert_eq!(
            Ipv4Packet::new_checked(&ihl4[..]).unwrap_err(),
            Error::Malformed
        );
        let mut ihl15 = b;
        ihl15[0] = 0x4f;
        assert_eq!(
            Ipv4Packet::new_checked(&ihl15[..]).unwrap_err(),
            Error::Truncated
        );
        let mut tot0 = b;
        tot0[2..4].copy_from_slice(&[0, 0]);
        assert_eq!(
            Ipv4Packet::new_checked(&tot0[..]).unwrap_err(),
            Error::Malformed
        );
    }

    #[test]
    fn fragments() {
        let mut b = packet();
        let mut p = Ipv4Packet::new_unchecked(&mut b[..]);
        p.set_flags_frag(FLAG_MF);
        assert!(p.is_fragment() && !p.is_later_fragment());
        p.set_flags_frag(0x0010);
        assert!(p.is_fragment() && p.is_later_fragment());
        assert_eq!(p.frag_offset(), 0x10);
        p.set_flags_frag(FLAG_DF | 0x8000);
        assert!(!p.is_fragment());
    }

    #[test]
    fn rewrites_keep_checksum_valid() {
        let mut b = packet();
        let mut p = Ipv4Packet::new_checked(&mut b[..]).unwrap();
        p.rewrite_src_addr(Ipv4Addr::new(10, 1, 2, 3));
        assert!(p.verify_checksum());
        p.rewrite_dst_addr(Ipv4Addr::new(255, 255, 255, 255));
        assert!(p.verify_checksum());
        p.rewrite_ttl(1);
        assert!(p.verify_checksum());
        p.rewrite_tos(0xb8);
        assert!(p.verify_checksum());
        assert_eq!((p.dscp(), p.ecn()), (46, 0));
        let c = p.checksum();
        p.fill_checksum();
        assert_eq!(c, p.checksum());
    }

    #[test]
    fn unchecked_short_buffer_reads_zero() {
        let p = Ipv4Packet::new_unchecked(&[0x45u8, 0][..]);
        assert_eq!(p.total_len(), 0);
        assert_eq!(p.src_addr(), Ipv4Addr::UNSPECIFIED);
        assert!(p.payload().is_empty());
        assert!(p.options().is_empty());
    }
}
