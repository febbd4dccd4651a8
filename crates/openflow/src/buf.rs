//! Big-endian reading and writing of OpenFlow bytes.
//!
//! [`Reader`] never panics: a read past the end is an [`OfError`] of type
//! `BAD_LEN` for the request being decoded, as OVS answers a short
//! message. [`Writer`] appends to a `Vec<u8>`.

use crate::error::{OfError, BAD_REQUEST, BRC_BAD_LEN};

/// A cursor over received bytes.
#[derive(Clone, Copy, Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Reads `buf` from its start.
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The unread bytes.
    pub fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    /// The next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], OfError> {
        if self.remaining() < n {
            return Err(OfError::new(BAD_REQUEST, BRC_BAD_LEN));
        }
        let b = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(b)
    }

    /// Skips `n` bytes.
    pub fn skip(&mut self, n: usize) -> Result<(), OfError> {
        self.bytes(n).map(|_| ())
    }

    /// One byte.
    pub fn u8(&mut self) -> Result<u8, OfError> {
        Ok(self.bytes(1)?[0])
    }

    /// A big-endian u16.
    pub fn u16(&mut self) -> Result<u16, OfError> {
        let b = self.bytes(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    /// A big-endian u32.
    pub fn u32(&mut self) -> Result<u32, OfError> {
        let b = self.bytes(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A big-endian u64.
    pub fn u64(&mut self) -> Result<u64, OfError> {
        Ok((u64::from(self.u32()?) << 32) | u64::from(self.u32()?))
    }

    /// A big-endian unsigned number of `n` (≤ 16) bytes.
    pub fn uint(&mut self, n: usize) -> Result<u128, OfError> {
        Ok(self
            .bytes(n)?
            .iter()
            .fold(0u128, |a, b| (a << 8) | u128::from(*b)))
    }
}

/// Appends OpenFlow bytes.
#[derive(Clone, Debug, Default)]
pub struct Writer {
    /// The bytes so far.
    pub buf: Vec<u8>,
}

impl Writer {
    /// An empty writer.
    pub fn new() -> Writer {
        Writer::default()
    }

    /// Bytes written.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// True when nothing is written.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// One byte.
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    /// A big-endian u16.
    pub fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// A big-endian u32.
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// A big-endian u64.
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// The low `n` bytes of `v`, big-endian.
    pub fn uint(&mut self, v: u128, n: usize) {
        let b = v.to_be_bytes();
        self.buf.extend_from_slice(&b[16 - n..]);
    }

    /// `n` zero bytes.
    pub fn zeros(&mut self, n: usize) {
        self.buf.resize(self.buf.len() + n, 0);
    }

    /// Raw bytes.
    pub fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    /// Zero bytes up to a multiple of 8 counted from `start`.
    pub fn pad8_from(&mut self, start: usize) {
        let n = (self.buf.len() - start).next_multiple_of(8) - (self.buf.len() - start);
        self.zeros(n);
    }

    /// Writes the u16 length field at `at` (a placeholder written before).
    pub fn patch_u16(&mut self, at: usize, v: u16) {
        self.buf[at..at + 2].copy_from_slice(&v.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_was_written_and_refuses_short_input() {
        let mut w = Writer::new();
        w.u8(1);
        w.u16(0x0203);
        w.u32(0x0405_0607);
        w.u64(0x0809_0a0b_0c0d_0e0f);
        w.uint(0x10_1112, 3);
        let start = w.len();
        w.u8(9);
        w.pad8_from(start);
        assert_eq!(w.len(), 18 + 8);
        let mut r = Reader::new(&w.buf);
        assert_eq!(r.u8().unwrap(), 1);
        assert_eq!(r.u16().unwrap(), 0x0203);
        assert_eq!(r.u32().unwrap(), 0x0405_0607);
        assert_eq!(r.u64().unwrap(), 0x0809_0a0b_0c0d_0e0f);
        assert_eq!(r.uint(3).unwrap(), 0x10_1112);
        assert_eq!(r.remaining(), 8);
        assert!(r.bytes(9).is_err());
        assert_eq!(r.remaining(), 8);
    }
}
