//! Ethernet II frames, 802.1Q / 802.1ad VLAN tags and 802.2 LLC/SNAP.
//!
//! [`EthernetFrame`] covers the 14-byte header (destination, source,
//! EtherType-or-length). A VLAN tag is the TPID in the EtherType position
//! followed by [`VlanTag`]: the 16-bit TCI and the next EtherType, so a
//! tagged frame is read as `EthernetFrame` → `VlanTag` → `VlanTag` ... .
//! A type field below 0x0600 is an 802.3 length and the payload starts with
//! an 802.2 LLC header; [`llc_snap_ethertype`] recognises SNAP with the
//! Ethernet OUI (RFC 1042).
//!
//! After `check_len` succeeds no accessor panics (and none does before:
//! see the crate docs).

use crate::bytes::{array_at, be16, set_be16, set_bytes_at, sub, sub_mut};
use crate::{Error, Result};

/// EtherType values.
pub mod ethertype {
    /// IPv4.
    pub const IPV4: u16 = 0x0800;
    /// ARP.
    pub const ARP: u16 = 0x0806;
    /// Reverse ARP.
    pub const RARP: u16 = 0x8035;
    /// 802.1Q customer VLAN tag.
    pub const VLAN: u16 = 0x8100;
    /// 802.1ad service VLAN tag (QinQ).
    pub const QINQ: u16 = 0x88a8;
    /// IPv6.
    pub const IPV6: u16 = 0x86dd;
    /// MPLS unicast.
    pub const MPLS: u16 = 0x8847;
    /// MPLS multicast.
    pub const MPLS_MCAST: u16 = 0x8848;
    /// Smallest value that is an EtherType rather than an 802.3 length.
    pub const MIN: u16 = 0x0600;
    /// What OVS (and flowpath) report for frames with no EtherType (802.3
    /// frames that are not SNAP): `FLOW_DL_TYPE_NONE`.
    pub const NONE: u16 = 0x05ff;
}

/// True for the TPIDs flowpath parses as VLAN tags (0x8100, 0x88a8).
#[inline(always)]
pub fn is_vlan_tpid(t: u16) -> bool {
    t == ethertype::VLAN || t == ethertype::QINQ
}

/// A 48-bit MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: EthernetAddress = EthernetAddress([0xff; 6]);

    /// The address as a number, first octet most significant.
    #[inline(always)]
    pub fn to_u64(self) -> u64 {
        let b = self.0;
        u64::from_be_bytes([0, 0, b[0], b[1], b[2], b[3], b[4], b[5]])
    }

    /// The address whose number (first octet most significant) is the low
    /// 48 bits of `v`.
    pub fn from_u64(v: u64) -> Self {
        let b = v.to_be_bytes();
        EthernetAddress([b[2], b[3], b[4], b[5], b[6], b[7]])
    }

    /// True for 00:00:00:00:00:00.
    pub fn is_zero(&self) -> bool {
        self.0 == [0; 6]
    }

    /// True for group (multicast and broadcast) addresses.
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// True for the broadcast address.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }
}

impl core::fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl core::fmt::Debug for EthernetAddress {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Display::fmt(self, f)
    }
}

mod field {
    use crate::{Field, Rest};
    pub const DESTINATION: Field = 0..6;
    pub const SOURCE: Field = 6..12;
    pub const ETHERTYPE: Field = 12..14;
    pub const PAYLOAD: Rest = 14..;
}

/// A read/write view of an Ethernet II (or 802.3) frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Length of the header (no tags).
    pub const HEADER_LEN: usize = 14;

    /// Wraps `buffer` without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        EthernetFrame { buffer }
    }

    /// Wraps `buffer` after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// Fails with [`Error::Truncated`] when the header does not fit.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < Self::HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Destination address.
    #[inline(always)]
    pub fn dst_addr(&self) -> EthernetAddress {
        EthernetAddress(array_at(self.buffer.as_ref(), field::DESTINATION.start))
    }

    /// Source address.
    #[inline(always)]
    pub fn src_addr(&self) -> EthernetAddress {
        EthernetAddress(array_at(self.buffer.as_ref(), field::SOURCE.start))
    }

    /// The raw type field: an EtherType (≥ 0x0600), a TPID, or an 802.3
    /// length.
    #[inline(always)]
    pub fn ethertype(&self) -> u16 {
        be16(self.buffer.as_ref(), field::ETHERTYPE)
    }

    /// Everything after the 14-byte header.
    #[inline(always)]
    pub fn payload(&self) -> &[u8] {
        self.buffer.as_ref().get(field::PAYLOAD).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: EthernetAddress) {
        set_bytes_at(self.buffer.as_mut(), field::DESTINATION.start, &a.0);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: EthernetAddress) {
        set_bytes_at(self.buffer.as_mut(), field::SOURCE.start, &a.0);
    }

    /// Sets the type field.
    pub fn set_ethertype(&mut self, t: u16) {
        set_be16(self.buffer.as_mut(), field::ETHERTYPE, t);
    }

    /// The payload, mutable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let len = self.buffer.as_ref().len();
        sub_mut(self.buffer.as_mut(), field::PAYLOAD.start, len)
    }
}

mod vlan_field {
    use crate::Field;
    pub const TCI: Field = 0..2;
    pub const ETHERTYPE: Field = 2..4;
}

/// The four bytes that follow a VLAN TPID: the tag control information and
/// the EtherType (or next TPID) of what follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlanTag<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VlanTag<T> {
    /// Bytes of TCI + EtherType.
    pub const HEADER_LEN: usize = 4;

    /// Wraps `buffer` without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        VlanTag { buffer }
    }

    /// Wraps `buffer` after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let t = Self::new_unchecked(buffer);
        t.check_len()?;
        Ok(t)
    }

    /// Fails with [`Error::Truncated`] when the four bytes are not there.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < Self::HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The whole 16-bit TCI (PCP, DEI, VID).
    #[inline(always)]
    pub fn tci(&self) -> u16 {
        be16(self.buffer.as_ref(), vlan_field::TCI)
    }

    /// Priority code point (3 bits).
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    /// Drop eligible indicator (formerly CFI).
    pub fn dei(&self) -> bool {
        self.tci() & 0x1000 != 0
    }

    /// VLAN identifier (12 bits).
    pub fn vid(&self) -> u16 {
        self.tci() & 0x0fff
    }

    /// The EtherType (or TPID of a further tag) after this tag.
    #[inline(always)]
    pub fn ethertype(&self) -> u16 {
        be16(self.buffer.as_ref(), vlan_field::ETHERTYPE)
    }

    /// What follows the tag.
    pub fn payload(&self) -> &[u8] {
        let d = self.buffer.as_ref();
        sub(d, Self::HEADER_LEN, d.len())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VlanTag<T> {
    /// Sets the TCI.
    pub fn set_tci(&mut self, tci: u16) {
        set_be16(self.buffer.as_mut(), vlan_field::TCI, tci);
    }

    /// Sets the EtherType after the tag.
    pub fn set_ethertype(&mut self, t: u16) {
        set_be16(self.buffer.as_mut(), vlan_field::ETHERTYPE, t);
    }
}

/// Length of an 802.2 LLC header plus SNAP header.
pub const LLC_SNAP_LEN: usize = 8;

const LLC_SNAP_PREFIX: [u8; 6] = [0xaa, 0xaa, 0x03, 0x00, 0x00, 0x00];

/// If `payload` (what follows an 802.3 length field) starts with LLC
/// `AA AA 03` and SNAP OUI `00 00 00`, the SNAP protocol id; else `None`.
/// The id is returned whatever its value (callers decide whether a value
/// below 0x0600 counts).
#[inline]
pub fn llc_snap_ethertype(payload: &[u8]) -> Option<u16> {
    let h: [u8; LLC_SNAP_LEN] = match payload.get(..LLC_SNAP_LEN) {
        Some(_) => array_at(payload, 0),
        None => return None,
    };
    if h[..6] == LLC_SNAP_PREFIX {
        Some(u16::from_be_bytes([h[6], h[7]]))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    const FRAME: [u8; 22] = [
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, // dst
        0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, // src
        0x81, 0x00, 0xb0, 0x64, // tag: PCP 5, DEI 1, VID 100
        0x08, 0x00, // IPv4
        0x45, 0x00, 0x00, 0x14,
    ];

    #[test]
    fn reads_header_and_tag() {
        let f = EthernetFrame::new_checked(&FRAME[..]).unwrap();
        assert_eq!(f.dst_addr().to_u64(), 0x0011_2233_4455);
        assert_eq!(f.src_addr().to_string(), "66:77:88:99:aa:bb");
        assert_eq!(f.ethertype(), ethertype::VLAN);
        assert!(is_vlan_tpid(f.ethertype()));
        let t = VlanTag::new_checked(f.payload()).unwrap();
        assert_eq!(t.tci(), 0xb064);
        assert_eq!(t.pcp(), 5);
        assert!(t.dei());
        assert_eq!(t.vid(), 100);
        assert_eq!(t.ethertype(), ethertype::IPV4);
        assert_eq!(t.payload(), &FRAME[18..]);
    }

    #[test]
    fn short_buffers() {
        assert_eq!(
            EthernetFrame::new_checked(&FRAME[..13]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            VlanTag::new_checked(&[0u8; 3][..]).unwrap_err(),
            Error::Truncated
        );
        // Unchecked views read zeros instead of panicking.
        let f = EthernetFrame::new_unchecked(&FRAME[..3]);
        assert_eq!(f.ethertype(), 0);
        assert!(f.src_addr().is_zero());
        assert!(f.payload().is_empty());
    }

    #[test]
    fn setters() {
        let mut buf = FRAME;
        let mut f = EthernetFrame::new_checked(&mut buf[..]).unwrap();
        f.set_dst_addr(EthernetAddress::BROADCAST);
        f.set_src_addr(EthernetAddress::from_u64(0x0200_0000_0001));
        f.set_ethertype(ethertype::QINQ);
        let mut t = VlanTag::new_checked(f.payload_mut()).unwrap();
        t.set_tci(0x0005);
        t.set_ethertype(ethertype::IPV6);
        assert!(f.dst_addr().is_broadcast() && f.dst_addr().is_multicast());
        assert_eq!(f.src_addr().0, [2, 0, 0, 0, 0, 1]);
        assert_eq!(&buf[12..18], &[0x88, 0xa8, 0x00, 0x05, 0x86, 0xdd]);
    }

    #[test]
    fn snap() {
        let p = [0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00, 0x45];
        assert_eq!(llc_snap_ethertype(&p), Some(0x0800));
        assert_eq!(llc_snap_ethertype(&p[..7]), None);
        let cisco = [0xaa, 0xaa, 0x03, 0, 0, 0x0c, 0x20, 0x00];
        assert_eq!(llc_snap_ethertype(&cisco), None);
        let stp = [0x42, 0x42, 0x03, 0, 0, 0, 0, 0];
        assert_eq!(llc_snap_ethertype(&stp), None);
    }
}
