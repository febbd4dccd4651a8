//! ARP and RARP (RFC 826, RFC 903) packets.
//!
//! The header is 8 fixed bytes (hardware type, protocol type, the two
//! address lengths, opcode) followed by sender and target hardware and
//! protocol addresses whose sizes come from the length fields. The generic
//! accessors ([`ArpPacket::sender_hw_addr`] ...) follow the length fields;
//! the `*_eth` / `*_ipv4` accessors read the fixed Ethernet/IPv4 layout
//! (28 bytes), which is what [`ArpPacket::is_eth_ipv4`] tests for.
//!
//! After `check_len` succeeds no accessor panics (and none does before:
//! see the crate docs).

use core::net::Ipv4Addr;

use crate::bytes::{array_at, be16, set_be16, set_bytes_at, sub, u8_at};
use crate::ethernet::{ethertype, EthernetAddress};
use crate::{Error, Result};

/// ARP opcodes.
pub mod op {
    /// ARP request.
    pub const REQUEST: u16 = 0x0001;
    /// ARP reply.
    pub const REPLY: u16 = 0x0002;
    /// RARP request.
    pub const RARP_REQUEST: u16 = 0x0003;
    /// RARP reply.
    pub const RARP_REPLY: u16 = 0x0004;
}

/// Hardware type of Ethernet.
pub const HTYPE_ETHERNET: u16 = 0x0001;

mod field {
    use crate::Field;
    pub const HTYPE: Field = 0..2;
    pub const PTYPE: Field = 2..4;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: Field = 6..8;
    // Fixed offsets for the Ethernet/IPv4 layout.
    pub const SHA_ETH: Field = 8..14;
    pub const SPA_IPV4: Field = 14..18;
    pub const THA_ETH: Field = 18..24;
    pub const TPA_IPV4: Field = 24..28;
}

/// A read/write view of an ARP or RARP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Length of the fixed part.
    pub const FIXED_LEN: usize = 8;
    /// Length of an Ethernet/IPv4 ARP packet.
    pub const ETH_IPV4_LEN: usize = 28;

    /// Wraps `buffer` without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        ArpPacket { buffer }
    }

    /// Wraps `buffer` after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Fails with [`Error::Truncated`] unless the fixed part and the four
    /// addresses (as long as the length fields say) are present.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < Self::FIXED_LEN || len < self.total_len() {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// Bytes the header occupies according to its length fields.
    pub fn total_len(&self) -> usize {
        Self::FIXED_LEN + 2 * (usize::from(self.hw_len()) + usize::from(self.proto_len()))
    }

    /// Hardware type (1 = Ethernet).
    #[inline(always)]
    pub fn hw_type(&self) -> u16 {
        be16(self.buffer.as_ref(), field::HTYPE)
    }

    /// Protocol type (0x0800 = IPv4).
    #[inline(always)]
    pub fn proto_type(&self) -> u16 {
        be16(self.buffer.as_ref(), field::PTYPE)
    }

    /// Hardware address length.
    #[inline(always)]
    pub fn hw_len(&self) -> u8 {
        u8_at(self.buffer.as_ref(), field::HLEN)
    }

    /// Protocol address length.
    #[inline(always)]
    pub fn proto_len(&self) -> u8 {
        u8_at(self.buffer.as_ref(), field::PLEN)
    }

    /// Opcode.
    #[inline(always)]
    pub fn operation(&self) -> u16 {
        be16(self.buffer.as_ref(), field::OPER)
    }

    /// True when the packet is Ethernet/IPv4 (htype 1, ptype 0x0800, hlen 6,
    /// plen 4) and all 28 bytes are present.
    #[inline(always)]
    pub fn is_eth_ipv4(&self) -> bool {
        self.buffer.as_ref().len() >= Self::ETH_IPV4_LEN
            && self.hw_type() == HTYPE_ETHERNET
            && self.proto_type() == ethertype::IPV4
            && self.hw_len() == 6
            && self.proto_len() == 4
    }

    fn addr(&self, idx: usize) -> &[u8] {
        let h = usize::from(self.hw_len());
        let p = usize::from(self.proto_len());
        let (start, len) = match idx {
            0 => (Self::FIXED_LEN, h),
            1 => (Self::FIXED_LEN + h, p),
            2 => (Self::FIXED_LEN + h + p, h),
            _ => (Self::FIXED_LEN + 2 * h + p, p),
        };
        sub(self.buffer.as_ref(), start, start + len)
    }

    /// Sender hardware address (`hw_len` bytes).
    pub fn sender_hw_addr(&self) -> &[u8] {
        self.addr(0)
    }

    /// Sender protocol address (`proto_len` bytes).
    pub fn sender_proto_addr(&self) -> &[u8] {
        self.addr(1)
    }

    /// Target hardware address.
    pub fn target_hw_addr(&self) -> &[u8] {
        self.addr(2)
    }

    /// Target protocol address.
    pub fn target_proto_addr(&self) -> &[u8] {
        self.addr(3)
    }

    /// Sender MAC, Ethernet/IPv4 layout.
    #[inline(always)]
    pub fn sender_eth(&self) -> EthernetAddress {
        EthernetAddress(array_at(self.buffer.as_ref(), field::SHA_ETH.start))
    }

    /// Sender IPv4 address, Ethernet/IPv4 layout.
    #[inline(always)]
    pub fn sender_ipv4(&self) -> Ipv4Addr {
        Ipv4Addr::from(array_at::<4>(self.buffer.as_ref(), field::SPA_IPV4.start))
    }

    /// Target MAC, Ethernet/IPv4 layout.
    #[inline(always)]
    pub fn target_eth(&self) -> EthernetAddress {
        EthernetAddress(array_at(self.buffer.as_ref(), field::THA_ETH.start))
    }

    /// Target IPv4 address, Ethernet/IPv4 layout.
    #[inline(always)]
    pub fn target_ipv4(&self) -> Ipv4Addr {
        Ipv4Addr::from(array_at::<4>(self.buffer.as_ref(), field::TPA_IPV4.start))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Sets the opcode.
    pub fn set_operation(&mut self, op: u16) {
        set_be16(self.buffer.as_mut(), field::OPER, op);
    }

    /// Writes the fixed part for Ethernet/IPv4 (htype, ptype, lengths).
    pub fn set_eth_ipv4_header(&mut self) {
        let d = self.buffer.as_mut();
        set_be16(d, field::HTYPE, HTYPE_ETHERNET);
        set_be16(d, field::PTYPE, ethertype::IPV4);
        set_bytes_at(d, field::HLEN, &[6, 4]);
    }

    /// Sets the sender MAC (Ethernet/IPv4 layout).
    pub fn set_sender_eth(&mut self, a: EthernetAddress) {
        set_bytes_at(self.buffer.as_mut(), field::SHA_ETH.start, &a.0);
    }

    /// Sets the sender IPv4 address (Ethernet/IPv4 layout).
    pub fn set_sender_ipv4(&mut self, a: Ipv4Addr) {
        set_bytes_at(self.buffer.as_mut(), field::SPA_IPV4.start, &a.octets());
    }

    /// Sets the target MAC (Ethernet/IPv4 layout).
    pub fn set_target_eth(&mut self, a: EthernetAddress) {
        set_bytes_at(self.buffer.as_mut(), field::THA_ETH.start, &a.0);
    }

    /// Sets the target IPv4 address (Ethernet/IPv4 layout).
    pub fn set_target_ipv4(&mut self, a: Ipv4Addr) {
        set_bytes_at(self.buffer.as_mut(), field::TPA_IPV4.start, &a.octets());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REQ: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, // fixed
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 10, 0, 0, 1, // sender
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 10, 0, 0, 2, // target
    ];

    #[test]
    fn parse_request() {
        let p = ArpPacket::new_checked(&REQ[..]).unwrap();
        assert!(p.is_eth_ipv4());
        assert_eq!(p.operation(), op::REQUEST);
        assert_eq!(p.sender_eth().to_u64(), 0x0011_2233_4455);
        assert_eq!(p.sender_ipv4(), Ipv4Addr::new(10, 0, 0, 1));
        assert!(p.target_eth().is_zero());
        assert_eq!(p.target_ipv4(), Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(p.sender_hw_addr(), &REQ[8..14]);
        assert_eq!(p.target_proto_addr(), &[10, 0, 0, 2]);
    }

    #[test]
    fn lengths_follow_fields() {
        assert_eq!(
            ArpPacket::new_checked(&REQ[..27]).unwrap_err(),
            Error::Truncated
        );
        let mut odd = REQ;
        odd[4] = 14; // hlen 14: needs 8 + 2 * 18 bytes
        let p = ArpPacket::new_unchecked(&odd[..]);
        assert!(!p.is_eth_ipv4());
        assert_eq!(p.check_len(), Err(Error::Truncated));
        assert_eq!(p.target_proto_addr(), &[] as &[u8]);
        let zero = [0u8, 1, 0x08, 0, 0, 0, 0, 3];
        let p = ArpPacket::new_checked(&zero[..]).unwrap();
        assert!(p.sender_hw_addr().is_empty());
    }

    #[test]
    fn setters() {
        let mut buf = [0u8; 28];
        let mut p = ArpPacket::new_unchecked(&mut buf[..]);
        p.set_eth_ipv4_header();
        p.set_operation(op::REPLY);
        p.set_sender_eth(EthernetAddress([1, 2, 3, 4, 5, 6]));
        p.set_sender_ipv4(Ipv4Addr::new(1, 1, 1, 1));
        p.set_target_eth(EthernetAddress([6, 5, 4, 3, 2, 1]));
        p.set_target_ipv4(Ipv4Addr::new(2, 2, 2, 2));
        assert!(p.is_eth_ipv4());
        assert_eq!(p.operation(), 2);
        assert_eq!(p.target_eth().0, [6, 5, 4, 3, 2, 1]);
        assert_eq!(p.sender_ipv4(), Ipv4Addr::new(1, 1, 1, 1));
    }
}
