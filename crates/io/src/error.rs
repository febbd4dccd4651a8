//! The io crate's error type: every variant names the file, and the record
//! where one is involved.
//!
//! A "record" is the 1-based index of a packet record in a pcap file, or of
//! a block in a pcapng file (section headers and interface descriptions
//! count), so `tcpdump -r` numbering matches for pcap.

use std::path::PathBuf;

/// What went wrong reading or writing a capture file.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    /// The file could not be opened or created.
    #[error("{}: cannot open: {source}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Reading failed after the file was opened.
    #[error("{}: read error: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file has no bytes at all.
    #[error("{}: empty file, not a capture", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// The file is compressed (zstd, gzip, ...).
    #[error("{}: compressed capture ({kind}), not supported; decompress it first", path.display())]
    Compressed {
        /// The file.
        path: PathBuf,
        /// The compression format, from its magic number.
        kind: &'static str,
    },
    /// The first bytes are not a pcap or pcapng magic number.
    #[error("{}: not a pcap or pcapng file (magic {magic:02x?})", path.display())]
    UnknownFormat {
        /// The file.
        path: PathBuf,
        /// The first (up to four) bytes.
        magic: Vec<u8>,
    },
    /// The pcap file header or the first pcapng section header is invalid.
    #[error("{}: bad file header: {reason}", path.display())]
    BadHeader {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A record or block is invalid; reading stops there.
    #[error("{}: record {record}: {reason}; reading stopped", path.display())]
    BadRecord {
        /// The file.
        path: PathBuf,
        /// 1-based record (pcap) or block (pcapng) number.
        record: u64,
        /// What is wrong.
        reason: String,
    },
    /// The file ends inside a record or block; reading stops there.
    #[error(
        "{}: record {record}: truncated, file ends after {have} of its {need} bytes; reading stopped",
        path.display()
    )]
    Truncated {
        /// The file.
        path: PathBuf,
        /// 1-based record (pcap) or block (pcapng) number.
        record: u64,
        /// Bytes of the record present.
        have: u64,
        /// Bytes the record needs (at least).
        need: u64,
    },
    /// A packet's link type is not Ethernet where Ethernet is required.
    #[error(
        "{}: record {record}: link type {link_type} ({}) is not Ethernet (1)",
        path.display(),
        crate::link_type_name(*link_type)
    )]
    NotEthernet {
        /// The file.
        path: PathBuf,
        /// 1-based record (pcap) or block (pcapng) number.
        record: u64,
        /// The packet's link type.
        link_type: u16,
    },
    /// Writing failed.
    #[error("{}: write error: {reason}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// What failed.
        reason: String,
    },
}

impl IoError {
    /// The file the error is about.
    pub fn path(&self) -> &std::path::Path {
        match self {
            IoError::Open { path, .. }
            | IoError::Read { path, .. }
            | IoError::Empty { path }
            | IoError::Compressed { path, .. }
            | IoError::UnknownFormat { path, .. }
            | IoError::BadHeader { path, .. }
            | IoError::BadRecord { path, .. }
            | IoError::Truncated { path, .. }
            | IoError::NotEthernet { path, .. }
            | IoError::Write { path, .. } => path,
        }
    }
}
