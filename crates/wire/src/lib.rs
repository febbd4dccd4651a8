//! Zero-copy checked packet views, in the style of smoltcp's `wire` module.
//!
//! One module per protocol. Each packet type is a view
//! `XxxPacket<T: AsRef<[u8]>>` over a byte buffer that it does not copy:
//!
//! - `new_checked(buffer)` validates the lengths the protocol needs and
//!   returns [`Error::Truncated`] or [`Error::Malformed`];
//! - `new_unchecked(buffer)` wraps without validation, and `check_len`
//!   validates later;
//! - field accessors read through the byte ranges in each module's
//!   `mod field` (`pub const SRC: Field = 12..16;`);
//! - with `T: AsMut<[u8]>` the setters write fields in place, and the
//!   `rewrite_*` helpers patch checksums incrementally (RFC 1624) so the
//!   datapath can rewrite addresses, ports, TTL and ToS without re-summing.
//!
//! **Contract:** after `check_len` succeeds no accessor panics. In fact no
//! accessor ever panics, on any input: every read goes through a
//! bounds-checked `get()` and a read past the end of the buffer (possible
//! only on an unchecked view) yields zero bytes, every out-of-range write is
//! dropped. The crate forbids `unsafe` and allocates nothing (`no_std`).
//!
//! Supported: Ethernet II with 802.1Q / 802.1ad tags and 802.2 LLC/SNAP
//! ([`ethernet`]), ARP for Ethernet/IPv4 ([`arp`]), IPv4 with options
//! ([`ipv4`]), IPv6 with the hop-by-hop, routing, destination-options,
//! fragment and authentication extension headers ([`ipv6`]), TCP ([`tcp`]),
//! UDP ([`udp`]), SCTP common header with CRC32c ([`sctp`]), ICMP ([`icmp`])
//! and ICMPv6 with neighbor discovery ([`icmpv6`]); Internet checksums
//! ([`checksum`]).
//!
//! Not supported (yet): MPLS, IPv4 option parsing beyond exposing the bytes,
//! TCP option parsing, ESP, tunnels (GRE, VXLAN, Geneve), 802.1ah PBB.

#![no_std]
#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

#[cfg(test)]
extern crate std;

mod bytes;

pub mod arp;
pub mod checksum;
pub mod ethernet;
pub mod icmp;
pub mod icmpv6;
pub mod ipv4;
pub mod ipv6;
pub mod sctp;
pub mod tcp;
pub mod tunnel;
pub mod udp;

pub use arp::ArpPacket;
pub use ethernet::{EthernetAddress, EthernetFrame, VlanTag};
pub use icmp::IcmpPacket;
pub use icmpv6::{Icmpv6Packet, NdPacket};
pub use ipv4::Ipv4Packet;
pub use ipv6::{Ipv6ExtHeader, Ipv6FragHeader, Ipv6Packet};
pub use sctp::SctpPacket;
pub use tcp::TcpPacket;
pub use udp::UdpPacket;

/// A byte range of a header field.
pub type Field = core::ops::Range<usize>;
/// The bytes from an offset to the end of the buffer.
pub type Rest = core::ops::RangeFrom<usize>;

/// Why a buffer is not a valid packet of the requested kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// The buffer is shorter than the header (or the length fields) require.
    Truncated,
    /// A field has a value the protocol forbids (version, header length...).
    Malformed,
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::Truncated => f.write_str("truncated packet"),
            Error::Malformed => f.write_str("malformed packet"),
        }
    }
}

impl core::error::Error for Error {}

/// Result type of the checked constructors.
pub type Result<T> = core::result::Result<T, Error>;

/// IP protocol numbers (IPv4 `protocol`, IPv6 `next header`).
pub mod ip_proto {
    /// IPv6 hop-by-hop options.
    pub const HOPOPTS: u8 = 0x00;
    /// ICMP for IPv4.
    pub const ICMP: u8 = 0x01;
    /// IGMP.
    pub const IGMP: u8 = 0x02;
    /// TCP.
    pub const TCP: u8 = 0x06;
    /// UDP.
    pub const UDP: u8 = 0x11;
    /// IPv6 routing header.
    pub const ROUTING: u8 = 0x2b;
    /// IPv6 fragment header.
    pub const FRAGMENT: u8 = 0x2c;
    /// IPsec Encapsulating Security Payload.
    pub const ESP: u8 = 0x32;
    /// IPsec Authentication Header.
    pub const AH: u8 = 0x33;
    /// ICMPv6.
    pub const ICMPV6: u8 = 0x3a;
    /// IPv6 "no next header".
    pub const NO_NEXT: u8 = 0x3b;
    /// IPv6 destination options.
    pub const DSTOPTS: u8 = 0x3c;
    /// SCTP.
    pub const SCTP: u8 = 0x84;
}
