//! Packet sources and sinks: capture files in and out.
//!
//! - [`PcapReader`] reads pcap (both byte orders, micro- and nanosecond)
//!   and pcapng (per-interface link type, snaplen and timestamp
//!   resolution), recognising the format by its magic number. It streams:
//!   packets are borrowed from one growable buffer
//!   ([`PcapReader::next_packet`]) or copied out (its `Iterator` impl).
//! - [`PcapWriter`] writes Ethernet (or any link type) pcap files.
//! - [`load_ethernet_frames`] loads a whole Ethernet capture into one flat
//!   buffer, rejecting other link types.
//!
//! Robustness is the point: the corpus in `shared/pcaps` (199 files, many
//! fuzzed or truncated) opens and reads to the end or to one clear
//! [`IoError`] naming the file and the record, never a panic. Compressed
//! files are recognised and refused. Parsing of the container is delegated
//! to the `pcap-file` crate where its lower-level parsers fit; see
//! [`reader`] for what is done here instead and why.
//!
//! Thread-safety: readers and writers are `Send`, used by one thread.
//! Besides capture files, this crate holds system facilities that need
//! fenced `unsafe`: CPU affinity ([`affinity`]), the time-stamp counter
//! ([`tsc`]), memory on 2 MB pages ([`hugepage`], the datapath's table
//! storage) and signalling child processes ([`process`], for the switch's
//! `--monitor`). The ports' own syscalls live in `flowpath-netdev`.

pub mod affinity;
pub mod corpus;
pub mod error;
pub mod frames;
pub mod hugepage;
pub mod process;
pub mod reader;
pub mod tsc;
pub mod writer;

pub use error::IoError;
pub use frames::{load_ethernet_frames, EthernetFrames};
pub use reader::{FileFormat, Interface, Packet, PacketRef, PcapReader};
pub use writer::PcapWriter;

/// LINKTYPE_ETHERNET.
pub const LINKTYPE_ETHERNET: u16 = 1;

/// A short name for common link types (for messages), "unknown" otherwise.
pub fn link_type_name(link_type: u16) -> &'static str {
    match link_type {
        0 => "NULL",
        1 => "ETHERNET",
        9 => "PPP",
        12 | 14 | 101 => "RAW",
        100 => "ATM_RFC1483",
        104 => "C_HDLC",
        105 => "IEEE802_11",
        113 => "LINUX_SLL",
        127 => "IEEE802_11_RADIOTAP",
        147..=162 => "USER",
        228 => "IPV4",
        229 => "IPV6",
        239 => "NFLOG",
        253 => "NETANALYZER",
        258 => "PKTAP",
        271 => "VSOCK",
        274 => "ETHERNET_MPACKET",
        276 => "LINUX_SLL2",
        284 => "DSA_TAG_DSA",
        _ => "unknown",
    }
}
