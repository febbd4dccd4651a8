//! SCTP common header (RFC 9260 section 3.1).
//!
//! Twelve bytes: ports, verification tag and a CRC32c checksum over the
//! whole packet (stored little-endian, RFC 3309). Chunks are not parsed.
//! A CRC cannot be patched like an Internet checksum, so the port
//! `rewrite_*` helpers recompute it over the whole buffer.
//!
//! After `check_len` succeeds no accessor panics (and none does before:
//! see the crate docs).

use crate::bytes::{array_at, be16, be32, set_be16, set_be32, set_bytes_at, sub};
use crate::checksum;
use crate::{Error, Result};

mod field {
    use crate::Field;
    pub const SRC_PORT: Field = 0..2;
    pub const DST_PORT: Field = 2..4;
    pub const VERIFICATION_TAG: Field = 4..8;
    pub const CHECKSUM: Field = 8..12;
}

/// A read/write view of an SCTP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SctpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> SctpPacket<T> {
    /// Length of the common header.
    pub const HEADER_LEN: usize = 12;

    /// Wraps `buffer` without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        SctpPacket { buffer }
    }

    /// Wraps `buffer` after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// [`Error::Truncated`] unless the 12-byte common header is present.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < Self::HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
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

    /// Verification tag.
    pub fn verification_tag(&self) -> u32 {
        be32(self.buffer.as_ref(), field::VERIFICATION_TAG)
    }

    /// Stored CRC32c (as the number the little-endian bytes encode).
    pub fn checksum(&self) -> u32 {
        u32::from_le_bytes(array_at(self.buffer.as_ref(), field::CHECKSUM.start))
    }

    /// The chunks.
    pub fn payload(&self) -> &[u8] {
        let d = self.buffer.as_ref();
        sub(d, Self::HEADER_LEN, d.len())
    }

    /// The CRC32c of the buffer with the checksum field taken as zero.
    pub fn compute_checksum(&self) -> u32 {
        let d = self.buffer.as_ref();
        let mut state = checksum::crc32c_update(!0, sub(d, 0, field::CHECKSUM.start));
        state = checksum::crc32c_update(state, &[0; 4]);
        state = checksum::crc32c_update(state, sub(d, field::CHECKSUM.end, d.len()));
        !state
    }

    /// True when the stored CRC32c is right (the buffer must be exactly the
    /// SCTP packet).
    pub fn verify_checksum(&self) -> bool {
        self.compute_checksum() == self.checksum()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SctpPacket<T> {
    /// Sets the source port (checksum not updated).
    pub fn set_src_port(&mut self, p: u16) {
        set_be16(self.buffer.as_mut(), field::SRC_PORT, p);
    }

    /// Sets the destination port (checksum not updated).
    pub fn set_dst_port(&mut self, p: u16) {
        set_be16(self.buffer.as_mut(), field::DST_PORT, p);
    }

    /// Sets the verification tag.
    pub fn set_verification_tag(&mut self, v: u32) {
        set_be32(self.buffer.as_mut(), field::VERIFICATION_TAG, v);
    }

    /// Computes and stores the CRC32c.
    pub fn fill_checksum(&mut self) {
        let c = self.compute_checksum();
        set_bytes_at(
            self.buffer.as_mut(),
            field::CHECKSUM.start,
            &c.to_le_bytes(),
        );
    }

    /// Sets the source port and recomputes the CRC32c.
    pub fn rewrite_src_port(&mut self, p: u16) {
        self.set_src_port(p);
        self.fill_checksum();
    }

    /// Sets the destination port and recomputes the CRC32c.
    pub fn rewrite_dst_port(&mut self, p: u16) {
        self.set_dst_port(p);
        self.fill_checksum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_checksum() {
        let mut b = [0u8; 16];
        let mut s = SctpPacket::new_unchecked(&mut b[..]);
        s.set_src_port(2905);
        s.set_dst_port(2944);
        s.set_verification_tag(0xdead_beef);
        s.fill_checksum();
        assert!(s.verify_checksum());
        assert_eq!(s.checksum(), s.compute_checksum());
        s.rewrite_dst_port(1);
        assert!(s.verify_checksum());
        assert_eq!((s.src_port(), s.dst_port()), (2905, 1));
        assert_eq!(s.verification_tag(), 0xdead_beef);
        assert_eq!(s.payload().len(), 4);
        // The one-shot CRC over the packet with a zeroed checksum field.
        let mut z = b;
        z[8..12].copy_from_slice(&[0; 4]);
        assert_eq!(
            checksum::crc32c(&z),
            u32::from_le_bytes([b[8], b[9], b[10], b[11]])
        );
        assert_eq!(
            SctpPacket::new_checked(&b[..11]).unwrap_err(),
            Error::Truncated
        );
    }
}
