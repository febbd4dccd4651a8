//! TCP segment headers (RFC 9293).
//!
//! `check_len` requires 20 bytes, a data offset of at least 5 words and the
//! whole header (data offset × 4) in the buffer. [`TcpPacket::flags`] is the
//! low 12 bits of the offset/flags word (the nine flags plus the three
//! reserved bits), which is what OVS matches as `tcp_flags`.
//!
//! Checksums: [`TcpPacket::fill_checksum`] / [`TcpPacket::verify_checksum`]
//! take the pseudo-header sum from the IP view
//! (`Ipv4Packet::pseudo_header_sum`, `Ipv6Packet::pseudo_header_sum`); the
//! `rewrite_*_port` setters and [`TcpPacket::update_checksum_for_addr`]
//! patch the checksum incrementally (RFC 1624) when the datapath rewrites a
//! port or an address covered by the pseudo-header.
//!
//! After `check_len` succeeds no accessor panics (and none does before:
//! see the crate docs).

use crate::bytes::{be16, be32, set_be16, set_be32, sub, sub_mut, u8_at};
use crate::checksum;
use crate::{Error, Result};

/// TCP flag bits as they appear in [`TcpPacket::flags`].
pub mod flags {
    /// No more data from sender.
    pub const FIN: u16 = 0x001;
    /// Synchronize sequence numbers.
    pub const SYN: u16 = 0x002;
    /// Reset the connection.
    pub const RST: u16 = 0x004;
    /// Push function.
    pub const PSH: u16 = 0x008;
    /// Acknowledgment field is significant.
    pub const ACK: u16 = 0x010;
    /// Urgent pointer is significant.
    pub const URG: u16 = 0x020;
    /// ECN echo.
    pub const ECE: u16 = 0x040;
    /// Congestion window reduced.
    pub const CWR: u16 = 0x080;
    /// ECN nonce (RFC 3540, historic) / AccECN AE bit.
    pub const NS: u16 = 0x100;
}

mod field {
    use crate::Field;
    pub const SRC_PORT: Field = 0..2;
    pub const DST_PORT: Field = 2..4;
    pub const SEQ_NUM: Field = 4..8;
    pub const ACK_NUM: Field = 8..12;
    pub const FLAGS: Field = 12..14;
    pub const WIN_SIZE: Field = 14..16;
    pub const CHECKSUM: Field = 16..18;
    pub const URGENT: Field = 18..20;
}

/// A read/write view of a TCP segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Length of a header without options.
    pub const MIN_HEADER_LEN: usize = 20;

    /// Wraps `buffer` without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        TcpPacket { buffer }
    }

    /// Wraps `buffer` after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// [`Error::Truncated`] when fewer than 20 bytes or fewer than the data
    /// offset says; [`Error::Malformed`] when the data offset is below 5.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < Self::MIN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let hl = self.header_len();
        if hl < Self::MIN_HEADER_LEN {
            return Err(Error::Malformed);
        }
        if len < hl {
            return Err(Error::Truncated);
        }
        Ok(())
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

    /// Sequence number.
    pub fn seq_number(&self) -> u32 {
        be32(self.buffer.as_ref(), field::SEQ_NUM)
    }

    /// Acknowledgment number.
    pub fn ack_number(&self) -> u32 {
        be32(self.buffer.as_ref(), field::ACK_NUM)
    }

    /// Header length in bytes (data offset × 4).
    #[inline(always)]
    pub fn header_len(&self) -> usize {
        usize::from(u8_at(self.buffer.as_ref(), field::FLAGS.start) >> 4) * 4
    }

    /// The low 12 bits of the offset/flags word (see [`flags`]).
    #[inline(always)]
    pub fn flags(&self) -> u16 {
        be16(self.buffer.as_ref(), field::FLAGS) & 0x0fff
    }

    /// True when all of `f` (a mask of [`flags`]) are set.
    pub fn has_flags(&self, f: u16) -> bool {
        self.flags() & f == f
    }

    /// Window size.
    pub fn window_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::WIN_SIZE)
    }

    /// Stored checksum.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Urgent pointer.
    pub fn urgent_at(&self) -> u16 {
        be16(self.buffer.as_ref(), field::URGENT)
    }

    /// Options (bytes 20 .. header length).
    pub fn options(&self) -> &[u8] {
        sub(
            self.buffer.as_ref(),
            Self::MIN_HEADER_LEN,
            self.header_len(),
        )
    }

    /// The data after the header.
    pub fn payload(&self) -> &[u8] {
        let d = self.buffer.as_ref();
        sub(d, self.header_len(), d.len())
    }

    /// True when the checksum is right, given the pseudo-header sum (the
    /// buffer must be exactly the segment).
    pub fn verify_checksum(&self, pseudo_header_sum: u16) -> bool {
        checksum::add(pseudo_header_sum, checksum::sum(self.buffer.as_ref())) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    /// Sets the source port (no checksum update).
    pub fn set_src_port(&mut self, p: u16) {
        set_be16(self.buffer.as_mut(), field::SRC_PORT, p);
    }

    /// Sets the destination port (no checksum update).
    pub fn set_dst_port(&mut self, p: u16) {
        set_be16(self.buffer.as_mut(), field::DST_PORT, p);
    }

    /// Sets the sequence number.
    pub fn set_seq_number(&mut self, v: u32) {
        set_be32(self.buffer.as_mut(), field::SEQ_NUM, v);
    }

    /// Sets the acknowledgment number.
    pub fn set_ack_number(&mut self, v: u32) {
        set_be32(self.buffer.as_mut(), field::ACK_NUM, v);
    }

    /// Sets the header length (multiple of 4, 20..=60) and the 12 flag bits.
    pub fn set_header_len_and_flags(&mut self, header_len: usize, flags: u16) {
        let off = ((header_len / 4) & 0x0f) as u16;
        set_be16(
            self.buffer.as_mut(),
            field::FLAGS,
            (off << 12) | (flags & 0x0fff),
        );
    }

    /// Sets the window size.
    pub fn set_window_len(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::WIN_SIZE, v);
    }

    /// Sets the stored checksum.
    pub fn set_checksum(&mut self, c: u16) {
        set_be16(self.buffer.as_mut(), field::CHECKSUM, c);
    }

    /// Recomputes the checksum over the whole buffer (the segment).
    pub fn fill_checksum(&mut self, pseudo_header_sum: u16) {
        self.set_checksum(0);
        let s = checksum::add(pseudo_header_sum, checksum::sum(self.buffer.as_ref()));
        self.set_checksum(!s);
    }

    /// Sets the source port and patches the checksum.
    pub fn rewrite_src_port(&mut self, p: u16) {
        let old = self.src_port();
        self.set_src_port(p);
        self.set_checksum(checksum::update(self.checksum(), old, p));
    }

    /// Sets the destination port and patches the checksum.
    pub fn rewrite_dst_port(&mut self, p: u16) {
        let old = self.dst_port();
        self.set_dst_port(p);
        self.set_checksum(checksum::update(self.checksum(), old, p));
    }

    /// Patches the checksum for a pseudo-header address that changed from
    /// `old` to `new` (4 bytes for IPv4, 16 for IPv6).
    pub fn update_checksum_for_addr(&mut self, old: &[u8], new: &[u8]) {
        self.set_checksum(checksum::update_bytes(self.checksum(), old, new));
    }

    /// The data after the header, mutable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        let len = self.buffer.as_ref().len();
        sub_mut(self.buffer.as_mut(), hl, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment() -> [u8; 24] {
        let mut b = [0u8; 24];
        let mut t = TcpPacket::new_unchecked(&mut b[..]);
        t.set_src_port(49152);
        t.set_dst_port(80);
        t.set_seq_number(1);
        t.set_ack_number(2);
        t.set_header_len_and_flags(20, flags::SYN | flags::ACK);
        t.set_window_len(0xffff);
        b[20..].copy_from_slice(b"GET ");
        b
    }

    const PSEUDO: u16 = 0x1234;

    #[test]
    fn parse() {
        let b = segment();
        let t = TcpPacket::new_checked(&b[..]).unwrap();
        assert_eq!((t.src_port(), t.dst_port()), (49152, 80));
        assert_eq!((t.seq_number(), t.ack_number()), (1, 2));
        assert_eq!(t.header_len(), 20);
        assert_eq!(t.flags(), 0x012);
        assert!(t.has_flags(flags::SYN | flags::ACK) && !t.has_flags(flags::FIN));
        assert_eq!(t.window_len(), 0xffff);
        assert_eq!(t.urgent_at(), 0);
        assert_eq!(t.payload(), b"GET ");
        assert!(t.options().is_empty());
    }

    #[test]
    fn flags_include_reserved_bits() {
        let mut b = segment();
        b[12] = 0x5f;
        b[13] = 0xff;
        assert_eq!(TcpPacket::new_checked(&b[..]).unwrap().flags(), 0xfff);
    }

    #[test]
    fn check_len_cases() {
        let b = segment();
        assert_eq!(
            TcpPacket::new_checked(&b[..19]).unwrap_err(),
            Error::Truncated
        );
        let mut off4 = b;
        off4[12] = 0x40;
        assert_eq!(
            TcpPacket::new_checked(&off4[..]).unwrap_err(),
            Error::Malformed
        );
        let mut off7 = b;
        off7[12] = 0x70;
        assert_eq!(
            TcpPacket::new_checked(&off7[..]).unwrap_err(),
            Error::Truncated
        );
        let mut off6 = b;
        off6[12] = 0x60;
        let t = TcpPacket::new_checked(&off6[..]).unwrap();
        assert_eq!(t.options(), b"GET ");
        assert!(t.payload().is_empty());
    }

    #[test]
    fn checksum_fill_and_incremental() {
        let mut b = segment();
        let mut t = TcpPacket::new_checked(&mut b[..]).unwrap();
        t.fill_checksum(PSEUDO);
        assert!(t.verify_checksum(PSEUDO));
        t.rewrite_src_port(1);
        t.rewrite_dst_port(0xffff);
        assert!(t.verify_checksum(PSEUDO));
        // An address change in the pseudo-header.
        let old = [10, 0, 0, 1];
        let new = [192, 0, 2, 77];
        let p_old = checksum::pseudo_header_v4(old, [1, 1, 1, 1], 6, 24);
        let p_new = checksum::pseudo_header_v4(new, [1, 1, 1, 1], 6, 24);
        t.fill_checksum(p_old);
        t.update_checksum_for_addr(&old, &new);
        assert!(t.verify_checksum(p_new));
    }
}
