//! ICMPv6 (RFC 4443) and neighbor discovery (RFC 4861).
//!
//! [`Icmpv6Packet`] is the 8-byte header (type, code, checksum, four
//! type-specific bytes); its checksum covers an IPv6 pseudo-header, so an
//! address rewrite patches it with [`Icmpv6Packet::update_checksum_for_addr`].
//!
//! [`NdPacket`] reads neighbor solicitations and advertisements: the target
//! address (bytes 8..24) and the options that follow, which
//! [`NdPacket::options`] iterates. Each option is `type, length in 8-byte
//! units, data`; an option of length 0 or one running past the buffer ends
//! the iteration with [`Error::Malformed`] / [`Error::Truncated`].
//!
//! After `check_len` succeeds no accessor panics (and none does before:
//! see the crate docs).

use core::net::Ipv6Addr;

use crate::bytes::{array_at, be16, set_be16, set_bytes_at, set_u8_at, sub, u8_at};
use crate::checksum;
use crate::ethernet::EthernetAddress;
use crate::{Error, Result};

/// ICMPv6 message types.
pub mod msg_type {
    /// Destination unreachable.
    pub const DEST_UNREACHABLE: u8 = 0x01;
    /// Packet too big.
    pub const PACKET_TOO_BIG: u8 = 0x02;
    /// Time exceeded.
    pub const TIME_EXCEEDED: u8 = 0x03;
    /// Parameter problem.
    pub const PARAM_PROBLEM: u8 = 0x04;
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 0x80;
    /// Echo reply.
    pub const ECHO_REPLY: u8 = 0x81;
    /// Router solicitation.
    pub const ROUTER_SOLICIT: u8 = 0x85;
    /// Router advertisement.
    pub const ROUTER_ADVERT: u8 = 0x86;
    /// Neighbor solicitation.
    pub const NEIGHBOR_SOLICIT: u8 = 0x87;
    /// Neighbor advertisement.
    pub const NEIGHBOR_ADVERT: u8 = 0x88;
    /// Redirect.
    pub const REDIRECT: u8 = 0x89;
}

/// Neighbor discovery option types.
pub mod nd_opt {
    /// Source link-layer address.
    pub const SOURCE_LL_ADDR: u8 = 0x01;
    /// Target link-layer address.
    pub const TARGET_LL_ADDR: u8 = 0x02;
    /// Prefix information.
    pub const PREFIX_INFO: u8 = 0x03;
    /// MTU.
    pub const MTU: u8 = 0x05;
}

mod field {
    use crate::Field;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Field = 2..4;
    pub const DATA: usize = 4;
    pub const ND_TARGET: Field = 8..24;
    pub const ND_OPTIONS: usize = 24;
}

/// A read/write view of an ICMPv6 message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Icmpv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
    /// Length of the header.
    pub const HEADER_LEN: usize = 8;

    /// Wraps `buffer` without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        Icmpv6Packet { buffer }
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

    /// The four type-specific bytes after the checksum.
    pub fn data_word(&self) -> [u8; 4] {
        array_at(self.buffer.as_ref(), field::DATA)
    }

    /// Everything after the 8-byte header.
    pub fn payload(&self) -> &[u8] {
        let d = self.buffer.as_ref();
        sub(d, Self::HEADER_LEN, d.len())
    }

    /// True when the checksum is right given the pseudo-header sum (the
    /// buffer must be exactly the message).
    pub fn verify_checksum(&self, pseudo_header_sum: u16) -> bool {
        checksum::add(pseudo_header_sum, checksum::sum(self.buffer.as_ref())) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv6Packet<T> {
    /// Sets the type.
    pub fn set_msg_type(&mut self, t: u8) {
        set_u8_at(self.buffer.as_mut(), field::TYPE, t);
    }

    /// Sets the code.
    pub fn set_msg_code(&mut self, c: u8) {
        set_u8_at(self.buffer.as_mut(), field::CODE, c);
    }

    /// Sets the stored checksum.
    pub fn set_checksum(&mut self, c: u16) {
        set_be16(self.buffer.as_mut(), field::CHECKSUM, c);
    }

    /// Computes and stores the checksum.
    pub fn fill_checksum(&mut self, pseudo_header_sum: u16) {
        self.set_checksum(0);
        let s = checksum::add(pseudo_header_sum, checksum::sum(self.buffer.as_ref()));
        self.set_checksum(!s);
    }

    /// Patches the checksum for a pseudo-header address that changed.
    pub fn update_checksum_for_addr(&mut self, old: &[u8], new: &[u8]) {
        self.set_checksum(checksum::update_bytes(self.checksum(), old, new));
    }
}

/// A neighbor solicitation or advertisement (the whole ICMPv6 message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NdPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> NdPacket<T> {
    /// ICMPv6 header plus target address.
    pub const MIN_LEN: usize = 24;

    /// Wraps `buffer` without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        NdPacket { buffer }
    }

    /// Wraps `buffer` after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// [`Error::Truncated`] unless the header and the target are present.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < Self::MIN_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The ICMPv6 view of the same bytes.
    pub fn icmpv6(&self) -> Icmpv6Packet<&[u8]> {
        Icmpv6Packet::new_unchecked(self.buffer.as_ref())
    }

    /// Target address octets.
    #[inline(always)]
    pub fn target_bytes(&self) -> [u8; 16] {
        array_at(self.buffer.as_ref(), field::ND_TARGET.start)
    }

    /// Target address.
    pub fn target_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.target_bytes())
    }

    /// Router / solicited / override flags of an advertisement (the high
    /// three bits of byte 4).
    pub fn na_flags(&self) -> u8 {
        u8_at(self.buffer.as_ref(), field::DATA) & 0xe0
    }

    /// The option bytes.
    pub fn options_bytes(&self) -> &[u8] {
        let d = self.buffer.as_ref();
        sub(d, field::ND_OPTIONS, d.len())
    }

    /// Iterates the options.
    pub fn options(&self) -> NdOptions<'_> {
        NdOptions {
            rest: self.options_bytes(),
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> NdPacket<T> {
    /// Sets the target address.
    pub fn set_target_addr(&mut self, a: Ipv6Addr) {
        set_bytes_at(self.buffer.as_mut(), field::ND_TARGET.start, &a.octets());
    }
}

/// One neighbor discovery option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NdOption<'a> {
    /// The whole option, type and length bytes included.
    pub bytes: &'a [u8],
}

impl<'a> NdOption<'a> {
    /// Option type.
    pub fn kind(&self) -> u8 {
        u8_at(self.bytes, 0)
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Always false: an option has at least 8 bytes.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The Ethernet address of a source/target link-layer address option of
    /// exactly 8 bytes, else `None`.
    pub fn link_layer_addr(&self) -> Option<EthernetAddress> {
        let k = self.kind();
        if (k == nd_opt::SOURCE_LL_ADDR || k == nd_opt::TARGET_LL_ADDR) && self.len() == 8 {
            Some(EthernetAddress(array_at(self.bytes, 2)))
        } else {
            None
        }
    }
}

/// Iterator over neighbor discovery options; yields an error (once) for a
/// zero-length or truncated option and stops. Fewer than 8 trailing bytes
/// end the iteration silently.
#[derive(Debug, Clone)]
pub struct NdOptions<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for NdOptions<'a> {
    type Item = Result<NdOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.len() < 8 {
            return None;
        }
        let len = usize::from(u8_at(self.rest, 1)) * 8;
        if len == 0 {
            self.rest = &[];
            return Some(Err(Error::Malformed));
        }
        match (self.rest.get(..len), self.rest.get(len..)) {
            (Some(opt), Some(rest)) => {
                self.rest = rest;
                Some(Ok(NdOption { bytes: opt }))
            }
            _ => {
                self.rest = &[];
                Some(Err(Error::Truncated))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    fn ns() -> [u8; 40] {
        let mut b = [0u8; 40];
        b[0] = msg_type::NEIGHBOR_SOLICIT;
        NdPacket::new_unchecked(&mut b[..]).set_target_addr("fe80::1".parse().unwrap());
        b[24..32].copy_from_slice(&[1, 1, 0, 0x11, 0x22, 0x33, 0x44, 0x55]);
        b[32..40].copy_from_slice(&[14, 1, 1, 2, 3, 4, 5, 6]); // nonce option
        b
    }

    #[test]
    fn header() {
        let b = ns();
        let p = Icmpv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!((p.msg_type(), p.msg_code()), (135, 0));
        assert_eq!(p.data_word(), [0; 4]);
        assert_eq!(p.payload().len(), 32);
        assert_eq!(
            Icmpv6Packet::new_checked(&b[..7]).unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn nd_options() {
        let b = ns();
        let nd = NdPacket::new_checked(&b[..]).unwrap();
        assert_eq!(nd.target_addr(), "fe80::1".parse::<Ipv6Addr>().unwrap());
        let opts: Vec<_> = nd.options().collect();
        assert_eq!(opts.len(), 2);
        let sll = opts[0].unwrap();
        assert_eq!(sll.kind(), nd_opt::SOURCE_LL_ADDR);
        assert_eq!(sll.link_layer_addr().unwrap().to_u64(), 0x0011_2233_4455);
        assert_eq!(opts[1].unwrap().link_layer_addr(), None);
        assert_eq!(
            NdPacket::new_checked(&b[..23]).unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn bad_options() {
        let mut b = ns();
        b[25] = 0;
        let nd = NdPacket::new_checked(&b[..]).unwrap();
        let opts: Vec<_> = nd.options().collect();
        assert_eq!(opts, [Err(Error::Malformed)]);
        b[25] = 3;
        let nd = NdPacket::new_checked(&b[..]).unwrap();
        let opts: Vec<_> = nd.options().collect();
        assert_eq!(opts, [Err(Error::Truncated)]);
        // Fewer than 8 trailing bytes: silently done.
        let nd = NdPacket::new_checked(&b[..31]).unwrap();
        let opts: Vec<_> = nd.options().collect();
        assert!(opts.is_empty());
    }

    #[test]
    fn checksum_and_addr_update() {
        let src = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let dst = [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 1];
        let mut b = ns();
        let ph = checksum::pseudo_header_v6(src, dst, 0x3a, 40);
        let mut p = Icmpv6Packet::new_checked(&mut b[..]).unwrap();
        p.fill_checksum(ph);
        assert!(p.verify_checksum(ph));
        let mut src2 = src;
        src2[15] = 9;
        p.update_checksum_for_addr(&src, &src2);
        assert!(p.verify_checksum(checksum::pseudo_header_v6(src2, dst, 0x3a, 40)));
    }
}
