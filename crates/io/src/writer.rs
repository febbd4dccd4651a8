//! [`PcapWriter`]: writes a classic pcap file (little-endian, nanosecond
//! timestamps, one link type) through `pcap-file`'s writer.
//!
//! Frames longer than the snaplen are cut to it, with the original length
//! recorded, as a capture would. Call [`PcapWriter::finish`] to flush and
//! see write errors; dropping the writer flushes but loses them.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket};
use pcap_file::{DataLink, Endianness, TsResolution};

use crate::{IoError, LINKTYPE_ETHERNET};

/// Snaplen used when 0 is asked for (libpcap's maximum).
pub const DEFAULT_SNAPLEN: u32 = 262_144;

/// Writes packets to a pcap file.
pub struct PcapWriter {
    path: PathBuf,
    inner: pcap_file::pcap::PcapWriter<BufWriter<File>>,
    snaplen: u32,
    written: u64,
}

impl PcapWriter {
    /// Creates (truncates) `path` as an Ethernet pcap with the given
    /// snaplen (0 = [`DEFAULT_SNAPLEN`]).
    pub fn create(path: impl AsRef<Path>, snaplen: u32) -> Result<PcapWriter, IoError> {
        Self::create_with_link_type(path, LINKTYPE_ETHERNET, snaplen)
    }

    /// Creates `path` as a pcap of any link type.
    pub fn create_with_link_type(
        path: impl AsRef<Path>,
        link_type: u16,
        snaplen: u32,
    ) -> Result<PcapWriter, IoError> {
        let path = path.as_ref().to_path_buf();
        let snaplen = if snaplen == 0 {
            DEFAULT_SNAPLEN
        } else {
            snaplen
        };
        let file = File::create(&path).map_err(|source| IoError::Open {
            path: path.clone(),
            source,
        })?;
        let header = PcapHeader {
            version_major: 2,
            version_minor: 4,
            ts_correction: 0,
            ts_accuracy: 0,
            snaplen,
            datalink: DataLink::from(u32::from(link_type)),
            ts_resolution: TsResolution::NanoSecond,
            endianness: Endianness::Little,
        };
        let inner = pcap_file::pcap::PcapWriter::with_header(BufWriter::new(file), header)
            .map_err(|e| IoError::Write {
                path: path.clone(),
                reason: e.to_string(),
            })?;
        Ok(PcapWriter {
            path,
            inner,
            snaplen,
            written: 0,
        })
    }

    /// Appends a packet captured at `timestamp_ns` (since the Unix epoch;
    /// must be before 2106, the limit of the format).
    pub fn write(&mut self, timestamp_ns: u64, data: &[u8]) -> Result<(), IoError> {
        let orig_len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        self.write_with_orig_len(timestamp_ns, data, orig_len)
    }

    /// Appends a packet whose wire length was `orig_len` (at least
    /// `data.len()`, raised to it otherwise).
    pub fn write_with_orig_len(
        &mut self,
        timestamp_ns: u64,
        data: &[u8],
        orig_len: u32,
    ) -> Result<(), IoError> {
        let cut = data.len().min(self.snaplen as usize);
        let data = &data[..cut];
        let orig_len = orig_len.max(cut as u32);
        let pkt = PcapPacket::new(Duration::from_nanos(timestamp_ns), orig_len, data);
        self.inner.write_packet(&pkt).map_err(|e| IoError::Write {
            path: self.path.clone(),
            reason: format!("packet {}: {e}", self.written + 1),
        })?;
        self.written += 1;
        Ok(())
    }

    /// Packets written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// The snaplen in the file header.
    pub fn snaplen(&self) -> u32 {
        self.snaplen
    }

    /// Flushes the file and reports any error.
    pub fn finish(self) -> Result<(), IoError> {
        let path = self.path;
        self.inner
            .into_writer()
            .into_inner()
            .map(drop)
            .map_err(|e| IoError::Write {
                path,
                reason: e.error().to_string(),
            })
    }
}
