//! UDP datagram headers (RFC 768).
//!
//! `check_len` requires the 8-byte header only (as a datapath does: the
//! ports are all it reads); [`UdpPacket::check_len_field`] also checks that
//! the length field is between 8 and the buffer length.
//!
//! Checksum 0 means "no checksum" (IPv4 only): the `rewrite_*` helpers leave
//! it 0, and a computed checksum of 0 is stored as 0xffff.
//!
//! After `check_len` succeeds no accessor panics (and none does before:
//! see the crate docs).

use crate::bytes::{be16, set_be16, sub, sub_mut};
use crate::checksum;
use crate::{Error, Result};

mod field {
    use crate::Field;
    pub const SRC_PORT: Field = 0..2;
    pub const DST_PORT: Field = 2..4;
    pub const LENGTH: Field = 4..6;
    pub const CHECKSUM: Field = 6..8;
}

/// A read/write view of a UDP datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Length of the header.
    pub const HEADER_LEN: usize = 8;

    /// Wraps `buffer` without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        UdpPacket { buffer }
    }

    /// Wraps `buffer` after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// [`Error::Truncated`] unless the 8-byte header is present.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < Self::HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// [`check_len`](Self::check_len), plus [`Error::Malformed`] when the
    /// length field is below 8 and [`Error::Truncated`] when it exceeds the
    /// buffer.
    pub fn check_len_field(&self) -> Result<()> {
        self.check_len()?;
        let l = usize::from(self.len());
        if l < Self::HEADER_LEN {
            Err(Error::Malformed)
        } else if l > self.buffer.as_ref().len() {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Source port.
    #[inline(always)]
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::SRC_PORT)
    }

    /// Destination port.
    #[inline(always)]
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// The length field (header + data).
    pub fn len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH)
    }

    /// True when the length field says there is no data.
    pub fn is_empty(&self) -> bool {
        usize::from(self.len()) <= Self::HEADER_LEN
    }

    /// Stored checksum (0 = none).
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// The data: 8 .. length field, clamped to the buffer.
    pub fn payload(&self) -> &[u8] {
        sub(
            self.buffer.as_ref(),
            Self::HEADER_LEN,
            usize::from(self.len()),
        )
    }

    /// True when the checksum is absent (0) or right, given the
    /// pseudo-header sum (checksummed: the first `len()` bytes).
    pub fn verify_checksum(&self, pseudo_header_sum: u16) -> bool {
        if self.checksum() == 0 {
            return true;
        }
        let d = sub(self.buffer.as_ref(), 0, usize::from(self.len()));
        checksum::add(pseudo_header_sum, checksum::sum(d)) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Sets the source port (no checksum update).
    pub fn set_src_port(&mut self, p: u16) {
        set_be16(self.buffer.as_mut(), field::SRC_PORT, p);
    }

    /// Sets the destination port (no checksum update).
    pub fn set_dst_port(&mut self, p: u16) {
        set_be16(self.buffer.as_mut(), field::DST_PORT, p);
    }

    /// Sets the length field.
    pub fn set_len(&mut self, l: u16) {
        set_be16(self.buffer.as_mut(), field::LENGTH, l);
    }

    /// Sets the stored checksum.
    pub fn set_checksum(&mut self, c: u16) {
        set_be16(self.buffer.as_mut(), field::CHECKSUM, c);
    }

    /// Computes and stores the checksum over the first `len()` bytes
    /// (0 is stored as 0xffff).
    pub fn fill_checksum(&mut self, pseudo_header_sum: u16) {
        self.set_checksum(0);
        let d = sub(self.buffer.as_ref(), 0, usize::from(self.len()));
        let c = !checksum::add(pseudo_header_sum, checksum::sum(d));
        self.set_checksum(if c == 0 { 0xffff } else { c });
    }

    fn patch(&mut self, f: impl FnOnce(u16) -> u16) {
        let c = self.checksum();
        if c != 0 {
            let n = f(c);
            self.set_checksum(if n == 0 { 0xffff } else { n });
        }
    }

    /// Sets the source port and patches the checksum (if there is one).
    pub fn rewrite_src_port(&mut self, p: u16) {
        let old = self.src_port();
        self.set_src_port(p);
        self.patch(|c| checksum::update(c, old, p));
    }

    /// Sets the destination port and patches the checksum (if there is one).
    pub fn rewrite_dst_port(&mut self, p: u16) {
        let old = self.dst_port();
        self.set_dst_port(p);
        self.patch(|c| checksum::update(c, old, p));
    }

    /// Patches the checksum (if there is one) for a pseudo-header address
    /// that changed from `old` to `new`.
    pub fn update_checksum_for_addr(&mut self, old: &[u8], new: &[u8]) {
        self.patch(|c| checksum::update_bytes(c, old, new));
    }

    /// The data, mutable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let l = usize::from(self.len());
        sub_mut(self.buffer.as_mut(), Self::HEADER_LEN, l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn datagram() -> [u8; 12] {
        let mut b = [0u8; 12];
        let mut u = UdpPacket::new_unchecked(&mut b[..]);
        u.set_src_port(53);
        u.set_dst_port(33333);
        u.set_len(11);
        b[8..11].copy_from_slice(b"abc");
        b
    }

    #[test]
    fn parse() {
        let b = datagram();
        let u = UdpPacket::new_checked(&b[..]).unwrap();
        assert_eq!((u.src_port(), u.dst_port(), u.len()), (53, 33333, 11));
        assert_eq!(u.payload(), b"abc");
        assert!(!u.is_empty());
        assert!(u.check_len_field().is_ok());
        assert!(u.verify_checksum(0), "zero checksum means none");
        assert_eq!(
            UdpPacket::new_checked(&b[..7]).unwrap_err(),
            Error::Truncated
        );
        let mut bad = b;
        bad[5] = 7;
        assert_eq!(
            UdpPacket::new_checked(&bad[..]).unwrap().check_len_field(),
            Err(Error::Malformed)
        );
        bad[5] = 13;
        assert_eq!(
            UdpPacket::new_checked(&bad[..]).unwrap().check_len_field(),
            Err(Error::Truncated)
        );
    }

    #[test]
    fn zero_checksum_stays_zero() {
        let mut b = datagram();
        let mut u = UdpPacket::new_checked(&mut b[..]).unwrap();
        u.rewrite_src_port(9);
        u.update_checksum_for_addr(&[1, 2, 3, 4], &[5, 6, 7, 8]);
        assert_eq!(u.checksum(), 0);
        assert_eq!(u.src_port(), 9);
    }

    #[test]
    fn checksum_fill_and_incremental() {
        let ph = checksum::pseudo_header_v4([10, 0, 0, 1], [10, 0, 0, 2], 0x11, 11);
        let mut b = datagram();
        let mut u = UdpPacket::new_checked(&mut b[..]).unwrap();
        u.fill_checksum(ph);
        assert_ne!(u.checksum(), 0);
        assert!(u.verify_checksum(ph));
        u.rewrite_dst_port(1);
        u.rewrite_src_port(2);
        assert!(u.verify_checksum(ph));
        let ph2 = checksum::pseudo_header_v4([10, 0, 0, 1], [172, 16, 0, 9], 0x11, 11);
        u.update_checksum_for_addr(&[10, 0, 0, 2], &[172, 16, 0, 9]);
        assert!(u.verify_checksum(ph2));
    }

    #[test]
    fn computed_zero_is_stored_as_ffff() {
        // Find a pseudo-header sum that makes the checksum come out as 0.
        let b = datagram();
        let s = checksum::sum(&b[..11]);
        let ph = !s; // sum + !sum = 0xffff, so !0xffff = 0
        let mut b2 = b;
        let mut u = UdpPacket::new_checked(&mut b2[..]).unwrap();
        u.fill_checksum(ph);
        assert_eq!(u.checksum(), 0xffff);
        assert!(u.verify_checksum(ph));
    }
}
