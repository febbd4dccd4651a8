//! ICMP for IPv4 (RFC 792).
//!
//! The 8-byte header: type, code, checksum and four type-specific bytes
//! (identifier and sequence number for echo). The checksum covers the whole
//! message and no pseudo-header, so address rewrites do not touch it.
//!
//! After `check_len` succeeds no accessor panics (and none does before:
//! see the crate docs).

use crate::bytes::{be16, set_be16, set_u8_at, sub, u8_at};
use crate::checksum;
use crate::{Error, Result};

/// ICMP message types.
pub mod msg_type {
    /// Echo reply.
    pub const ECHO_REPLY: u8 = 0x00;
    /// Destination unreachable.
    pub const DEST_UNREACHABLE: u8 = 0x03;
    /// Redirect.
    pub const REDIRECT: u8 = 0x05;
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 0x08;
    /// Time exceeded.
    pub const TIME_EXCEEDED: u8 = 0x0b;
    /// Parameter problem.
    pub const PARAM_PROBLEM: u8 = 0x0c;
}

mod field {
    use crate::Field;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Field = 2..4;
    pub const ECHO_IDENT: Field = 4..6;
    pub const ECHO_SEQNO: Field = 6..8;
}

/// A read/write view of an ICMP message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IcmpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> IcmpPacket<T> {
    /// Length of the header (OVS's `ICMP_HEADER_LEN`).
    pub const HEADER_LEN: usize = 8;

    /// Wraps `buffer` without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        IcmpPacket { buffer }
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

    /// Message type.
    #[inline(always)]
    pub fn msg_type(&self) -> u8 {
        u8_at(self.buffer.as_ref(), field::TYPE)
    }

    /// Message code.
    #[inline(always)]
    pub fn msg_code(&self) -> u8 {
        u8_at(self.buffer.as_ref(), field::CODE)
    }

    /// Stored checksum.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Echo identifier (bytes 4..6).
    pub fn echo_ident(&self) -> u16 {
        be16(self.buffer.as_ref(), field::ECHO_IDENT)
    }

    /// Echo sequence number (bytes 6..8).
    pub fn echo_seq_no(&self) -> u16 {
        be16(self.buffer.as_ref(), field::ECHO_SEQNO)
    }

    /// Everything after the 8-byte header.
    pub fn payload(&self) -> &[u8] {
        let d = self.buffer.as_ref();
        sub(d, Self::HEADER_LEN, d.len())
    }

    /// True when the checksum over the whole buffer is right.
    pub fn verify_checksum(&self) -> bool {
        checksum::sum(self.buffer.as_ref()) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> IcmpPacket<T> {
    /// Sets the type.
    pub fn set_msg_type(&mut self, t: u8) {
        set_u8_at(self.buffer.as_mut(), field::TYPE, t);
    }

    /// Sets the code.
    pub fn set_msg_code(&mut self, c: u8) {
        set_u8_at(self.buffer.as_mut(), field::CODE, c);
    }

    /// Sets the echo identifier.
    pub fn set_echo_ident(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::ECHO_IDENT, v);
    }

    /// Sets the echo sequence number.
    pub fn set_echo_seq_no(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::ECHO_SEQNO, v);
    }

    /// Sets the stored checksum.
    pub fn set_checksum(&mut self, c: u16) {
        set_be16(self.buffer.as_mut(), field::CHECKSUM, c);
    }

    /// Computes and stores the checksum over the whole buffer.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.buffer.as_ref());
        self.set_checksum(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_request() {
        let mut b = [0u8; 12];
        let mut p = IcmpPacket::new_unchecked(&mut b[..]);
        p.set_msg_type(msg_type::ECHO_REQUEST);
        p.set_msg_code(0);
        p.set_echo_ident(0x1234);
        p.set_echo_seq_no(7);
        p.fill_checksum();
        assert!(p.verify_checksum());
        let p = IcmpPacket::new_checked(&b[..]).unwrap();
        assert_eq!((p.msg_type(), p.msg_code()), (8, 0));
        assert_eq!((p.echo_ident(), p.echo_seq_no()), (0x1234, 7));
        assert_eq!(p.payload().len(), 4);
        assert_eq!(
            IcmpPacket::new_checked(&b[..7]).unwrap_err(),
            Error::Truncated
        );
    }
}
