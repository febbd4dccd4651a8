//! [`PcapReader`]: streaming reader for pcap and pcapng files.
//!
//! The format is chosen by the magic number, never by the file name. The
//! reader keeps one growable buffer: it parses records in place and hands
//! out borrowed packets ([`PcapReader::next_packet`]), or owned ones through
//! its `Iterator` impl. Framing and block bodies are parsed with the
//! `pcap-file` crate's lower-level parsers (`PcapHeader`, `RawPcapPacket`,
//! `RawBlock`, `SectionHeaderBlock`, `InterfaceDescriptionBlock`,
//! `EnhancedPacketBlock`); the reader itself does what those leave out or
//! get wrong for real-world files:
//!
//! - the pcap link-type field is masked with 0xffff (fuzzed files put
//!   garbage in the upper bits, bits 26..31 carry FCS information);
//! - records with caplen > snaplen are accepted (libpcap accepts them too),
//!   and so are sub-second fields out of range (the timestamp just rolls
//!   over into the next second);
//! - pcapng: link type, snaplen and timestamp resolution (`if_tsresol`) are
//!   tracked per interface and per section; a block whose options do not
//!   parse (bad UTF-8, missing end-of-options) falls back to its fixed
//!   fields; the obsolete Packet Block is parsed here (pcap-file reads its
//!   timestamp as one 64-bit word, wrong for little-endian files);
//! - a file that ends inside a record yields one [`IoError::Truncated`] and
//!   then ends; a corrupt record yields one [`IoError::BadRecord`] and ends;
//!   a record claiming more than [`MAX_RECORD_LEN`] bytes is corrupt.
//!
//! Never panics on file contents.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use byteorder_slice::{BigEndian, ByteOrder, LittleEndian};
use pcap_file::pcap::{PcapHeader, RawPcapPacket};
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::blocks::section_header::SectionHeaderBlock;
use pcap_file::pcapng::{PcapNgBlock, RawBlock};
use pcap_file::{Endianness, TsResolution};

use crate::IoError;

/// Largest record (pcap) or block (pcapng) accepted, 64 MiB; anything
/// claiming more is treated as corrupt.
pub const MAX_RECORD_LEN: usize = 64 << 20;

const SHB_TYPE: u32 = 0x0a0d_0d0a;
const IDB_TYPE: u32 = 0x0000_0001;
const OPB_TYPE: u32 = 0x0000_0002;
const SPB_TYPE: u32 = 0x0000_0003;
const EPB_TYPE: u32 = 0x0000_0006;

/// Container format of an open file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    /// Classic libpcap format.
    Pcap {
        /// Header and records are big-endian.
        big_endian: bool,
        /// Timestamps are in nanoseconds (magic 0xa1b23c4d).
        nanosecond: bool,
    },
    /// pcapng.
    PcapNg,
}

/// A capture interface: the pcap file header, or a pcapng IDB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interface {
    /// Link type (LINKTYPE_*), masked to 16 bits.
    pub link_type: u16,
    /// Snapshot length (0 = unlimited in pcapng).
    pub snaplen: u32,
    /// Timestamp unit: `10^-n` seconds, or `2^-n` if bit 7 is set
    /// (`if_tsresol`; 6 = microseconds, 9 = nanoseconds).
    pub ts_resolution: u8,
}

/// A packet borrowed from the reader's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketRef<'a> {
    /// Link type of the interface the packet was captured on.
    pub link_type: u16,
    /// Capture time, nanoseconds since the Unix epoch.
    pub timestamp_ns: u64,
    /// The captured bytes (possibly fewer than `orig_len`).
    pub data: &'a [u8],
    /// Length of the packet on the wire.
    pub orig_len: u32,
    /// 1-based record (pcap) or block (pcapng) number.
    pub record: u64,
    /// Interface index within the pcapng section (0 for pcap).
    pub interface: u32,
}

/// An owned packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    /// Link type of the interface the packet was captured on.
    pub link_type: u16,
    /// Capture time, nanoseconds since the Unix epoch.
    pub timestamp_ns: u64,
    /// The captured bytes (possibly fewer than `orig_len`).
    pub data: Vec<u8>,
    /// Length of the packet on the wire.
    pub orig_len: u32,
    /// 1-based record (pcap) or block (pcapng) number.
    pub record: u64,
    /// Interface index within the pcapng section (0 for pcap).
    pub interface: u32,
}

impl PacketRef<'_> {
    /// Copies the packet out of the reader's buffer.
    pub fn to_owned(&self) -> Packet {
        Packet {
            link_type: self.link_type,
            timestamp_ns: self.timestamp_ns,
            data: self.data.to_vec(),
            orig_len: self.orig_len,
            record: self.record,
            interface: self.interface,
        }
    }
}

/// Reads packets from a pcap or pcapng file. See the module docs.
pub struct PcapReader {
    path: PathBuf,
    src: Box<dyn Read + Send>,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    done: bool,
    record: u64,
    format: FileFormat,
    state: State,
}

/// Container state needed to parse the next record.
struct State {
    big_endian: bool,
    nanosecond: bool,
    interfaces: Vec<Interface>,
}

/// What parsing at the front of the buffer found.
enum Step {
    /// At least this many bytes are needed from the front of the buffer.
    Need(usize),
    /// A record that is not a packet: consume it.
    Skip(usize),
    /// A packet record.
    Packet(Found),
    /// The record is corrupt.
    Bad(String),
}

/// A packet record at the front of the buffer.
struct Found {
    consumed: usize,
    data_off: usize,
    data_len: usize,
    orig_len: u32,
    timestamp_ns: u64,
    interface: u32,
}

impl PcapReader {
    /// Opens `path` and reads its file header (pcap) or first section
    /// header (pcapng).
    pub fn open(path: impl AsRef<Path>) -> Result<PcapReader, IoError> {
        let path = path.as_ref().to_path_buf();
        let file = File::open(&path).map_err(|source| IoError::Open {
            path: path.clone(),
            source,
        })?;
        Self::from_reader(path, file)
    }

    /// Reads a capture from any byte stream; `name` is used in errors.
    pub fn from_reader(
        name: impl Into<PathBuf>,
        src: impl Read + Send + 'static,
    ) -> Result<PcapReader, IoError> {
        let mut r = PcapReader {
            path: name.into(),
            src: Box::new(src),
            buf: vec![0; 64 << 10],
            start: 0,
            end: 0,
            eof: false,
            done: false,
            record: 0,
            format: FileFormat::PcapNg,
            state: State {
                big_endian: false,
                nanosecond: false,
                interfaces: Vec::new(),
            },
        };
        r.read_file_header()?;
        Ok(r)
    }

    /// The file this reader reads.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The container format.
    pub fn format(&self) -> FileFormat {
        self.format
    }

    /// The interfaces known so far: the single pcap "interface" from the
    /// file header, or the IDBs of the current pcapng section.
    pub fn interfaces(&self) -> &[Interface] {
        &self.state.interfaces
    }

    /// The next packet, borrowed from the reader's buffer; `None` at the
    /// end of the file or after an error has been returned.
    pub fn next_packet(&mut self) -> Option<Result<PacketRef<'_>, IoError>> {
        let found = loop {
            if self.done {
                return None;
            }
            let avail = &self.buf[self.start..self.end];
            let step = match self.format {
                FileFormat::Pcap { .. } => self.state.step_pcap(avail),
                FileFormat::PcapNg => self.state.step_pcapng(avail),
            };
            match step {
                Step::Need(n) => {
                    if n > MAX_RECORD_LEN {
                        return self.fail_bad(
                            self.record + 1,
                            format!("claims {n} bytes, more than the {MAX_RECORD_LEN}-byte limit"),
                        );
                    }
                    if let Err(e) = self.fill(n) {
                        self.done = true;
                        return Some(Err(e));
                    }
                    let have = self.end - self.start;
                    if have < n {
                        // The source is exhausted.
                        self.done = true;
                        if have == 0 {
                            return None;
                        }
                        return Some(Err(IoError::Truncated {
                            path: self.path.clone(),
                            record: self.record + 1,
                            have: have as u64,
                            need: n as u64,
                        }));
                    }
                }
                Step::Skip(n) => {
                    self.record += 1;
                    self.start += n;
                }
                Step::Packet(f) => {
                    self.record += 1;
                    break f;
                }
                Step::Bad(reason) => return self.fail_bad(self.record + 1, reason),
            }
        };
        let base = self.start;
        self.start += found.consumed;
        let link_type = self
            .state
            .interfaces
            .get(found.interface as usize)
            .map_or(0, |i| i.link_type);
        let from = base + found.data_off;
        let data = self.buf.get(from..from + found.data_len).unwrap_or(&[]);
        Some(Ok(PacketRef {
            link_type,
            timestamp_ns: found.timestamp_ns,
            data,
            orig_len: found.orig_len,
            record: self.record,
            interface: found.interface,
        }))
    }

    fn fail_bad<T>(&mut self, record: u64, reason: String) -> Option<Result<T, IoError>> {
        self.done = true;
        Some(Err(IoError::BadRecord {
            path: self.path.clone(),
            record,
            reason,
        }))
    }

    /// Reads until at least `want` bytes are buffered or the source ends.
    fn fill(&mut self, want: usize) -> Result<(), IoError> {
        while self.end - self.start < want && !self.eof {
            if self.start > 0 && self.end == self.buf.len() {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.end == self.buf.len() {
                let grow = (self.buf.len() * 2).max(want.min(MAX_RECORD_LEN));
                self.buf.resize(grow, 0);
            }
            match self.src.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(IoError::Read {
                        path: self.path.clone(),
                        source,
                    })
                }
            }
        }
        Ok(())
    }

    fn read_file_header(&mut self) -> Result<(), IoError> {
        self.fill(4)?;
        let magic = &self.buf[self.start..self.end.min(self.start + 4)];
        let path = self.path.clone();
        match magic {
            [] => Err(IoError::Empty { path }),
            [0xd4, 0xc3, 0xb2, 0xa1]
            | [0xa1, 0xb2, 0xc3, 0xd4]
            | [0x4d, 0x3c, 0xb2, 0xa1]
            | [0xa1, 0xb2, 0x3c, 0x4d] => self.read_pcap_header(),
            [0x0a, 0x0d, 0x0d, 0x0a] => self.read_first_section(),
            [0x28, 0xb5, 0x2f, 0xfd] => Err(IoError::Compressed { path, kind: "zstd" }),
            [0x1f, 0x8b, ..] => Err(IoError::Compressed { path, kind: "gzip" }),
            [0x42, 0x5a, 0x68, ..] => Err(IoError::Compressed {
                path,
                kind: "bzip2",
            }),
            [0xfd, 0x37, 0x7a, 0x58] => Err(IoError::Compressed { path, kind: "xz" }),
            m => Err(IoError::UnknownFormat {
                path,
                magic: m.to_vec(),
            }),
        }
    }

    fn read_pcap_header(&mut self) -> Result<(), IoError> {
        self.fill(24)?;
        let avail = &self.buf[self.start..self.end];
        let (_, h) = PcapHeader::from_slice(avail).map_err(|e| IoError::BadHeader {
            path: self.path.clone(),
            reason: format!("pcap file header: {e}"),
        })?;
        let big_endian = h.endianness == Endianness::Big;
        let nanosecond = h.ts_resolution == TsResolution::NanoSecond;
        self.format = FileFormat::Pcap {
            big_endian,
            nanosecond,
        };
        self.state.big_endian = big_endian;
        self.state.nanosecond = nanosecond;
        self.state.interfaces = vec![Interface {
            link_type: (u32::from(h.datalink) & 0xffff) as u16,
            snaplen: h.snaplen,
            ts_resolution: if nanosecond { 9 } else { 6 },
        }];
        self.start += 24;
        Ok(())
    }

    fn read_first_section(&mut self) -> Result<(), IoError> {
        self.format = FileFormat::PcapNg;
        let mut want = 12;
        loop {
            self.fill(want)?;
            let avail = &self.buf[self.start..self.end];
            let step = if avail.len() < want {
                Step::Bad(format!(
                    "file ends inside the first section header block ({} of {want} bytes)",
                    avail.len()
                ))
            } else {
                self.state.step_pcapng(avail)
            };
            match step {
                Step::Need(n) if n > want && n <= MAX_RECORD_LEN => want = n,
                Step::Skip(n) => {
                    self.record = 1;
                    self.start += n;
                    return Ok(());
                }
                Step::Bad(reason) => {
                    return Err(IoError::BadHeader {
                        path: self.path.clone(),
                        reason,
                    })
                }
                Step::Need(n) => {
                    return Err(IoError::BadHeader {
                        path: self.path.clone(),
                        reason: format!("section header block claims {n} bytes"),
                    })
                }
                // The magic is the SHB type, so the first block cannot be a
                // packet.
                Step::Packet(_) => {
                    return Err(IoError::BadHeader {
                        path: self.path.clone(),
                        reason: "pcapng file does not start with a section header block".into(),
                    })
                }
            }
        }
    }
}

impl Iterator for PcapReader {
    type Item = Result<Packet, IoError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_packet().map(|r| r.map(|p| p.to_owned()))
    }
}

#[inline]
fn rd16(b: &[u8], at: usize, big: bool) -> u16 {
    let mut a = [0u8; 2];
    if let Some(s) = b.get(at..at + 2) {
        a.copy_from_slice(s);
    }
    if big {
        u16::from_be_bytes(a)
    } else {
        u16::from_le_bytes(a)
    }
}

#[inline]
fn rd32(b: &[u8], at: usize, big: bool) -> u32 {
    let mut a = [0u8; 4];
    if let Some(s) = b.get(at..at + 4) {
        a.copy_from_slice(s);
    }
    if big {
        u32::from_be_bytes(a)
    } else {
        u32::from_le_bytes(a)
    }
}

/// Converts a timestamp in units of `resol` (`if_tsresol`) to nanoseconds,
/// saturating.
fn to_ns(raw: u64, resol: u8) -> u64 {
    let ns: u128 = if resol & 0x80 == 0 {
        let e = u32::from(resol);
        if e <= 9 {
            u128::from(raw) * 10u128.pow(9 - e)
        } else {
            u128::from(raw) / 10u128.pow((e - 9).min(38))
        }
    } else {
        let e = u32::from(resol & 0x7f);
        (u128::from(raw) * 1_000_000_000) >> e.min(127)
    };
    u64::try_from(ns).unwrap_or(u64::MAX)
}

impl State {
    fn step_pcap(&self, avail: &[u8]) -> Step {
        const HDR: usize = 16;
        if avail.len() < HDR {
            return Step::Need(HDR);
        }
        let caplen = rd32(avail, 8, self.big_endian) as usize;
        let need = HDR.saturating_add(caplen);
        if avail.len() < need {
            return Step::Need(need);
        }
        let parsed = if self.big_endian {
            RawPcapPacket::from_slice::<BigEndian>(avail)
        } else {
            RawPcapPacket::from_slice::<LittleEndian>(avail)
        };
        let raw = match parsed {
            Ok((_, raw)) => raw,
            Err(e) => return Step::Bad(format!("pcap record: {e}")),
        };
        let frac = u64::from(raw.ts_frac) * if self.nanosecond { 1 } else { 1000 };
        Step::Packet(Found {
            consumed: need,
            data_off: HDR,
            data_len: raw.data.len(),
            orig_len: raw.orig_len,
            timestamp_ns: u64::from(raw.ts_sec) * 1_000_000_000 + frac,
            interface: 0,
        })
    }

    fn step_pcapng(&mut self, avail: &[u8]) -> Step {
        if avail.len() < 12 {
            return Step::Need(12);
        }
        let ty = rd32(avail, 0, self.big_endian);
        let big = if ty == SHB_TYPE {
            // A new section may switch byte order: its magic decides.
            match avail[8..12] {
                [0x1a, 0x2b, 0x3c, 0x4d] => true,
                [0x4d, 0x3c, 0x2b, 0x1a] => false,
                _ => return Step::Bad("section header with a bad byte-order magic".into()),
            }
        } else {
            self.big_endian
        };
        let len = rd32(avail, 4, big) as usize;
        if len < 12 || !len.is_multiple_of(4) {
            return Step::Bad(format!("block type {ty:#x} has an invalid length {len}"));
        }
        if avail.len() < len {
            return Step::Need(len);
        }
        let block = &avail[..len];
        let raw = if big {
            RawBlock::from_slice::<BigEndian>(block)
        } else {
            RawBlock::from_slice::<LittleEndian>(block)
        };
        let raw = match raw {
            Ok((_, raw)) => raw,
            Err(e) => return Step::Bad(format!("block type {ty:#x}: {e}")),
        };
        let body: &[u8] = &raw.body;
        let r = if big {
            self.block::<BigEndian>(ty, body, big)
        } else {
            self.block::<LittleEndian>(ty, body, big)
        };
        match r {
            Ok(Some(mut f)) => {
                f.consumed = len;
                Step::Packet(f)
            }
            Ok(None) => Step::Skip(len),
            Err(reason) => Step::Bad(reason),
        }
    }

    /// Handles one pcapng block body; `Some` for a packet (whose
    /// `consumed` the caller sets).
    fn block<B: ByteOrder>(
        &mut self,
        ty: u32,
        body: &[u8],
        big: bool,
    ) -> Result<Option<Found>, String> {
        // Offset of the body within the block.
        const BODY: usize = 8;
        match ty {
            SHB_TYPE => {
                // pcap-file validates the version fields and options; when
                // the options do not parse, the magic already told us the
                // byte order, which is all we need.
                let big = match SectionHeaderBlock::from_slice::<BigEndian>(body) {
                    Ok((_, shb)) => shb.endianness == Endianness::Big,
                    Err(_) => big,
                };
                self.big_endian = big;
                self.interfaces.clear();
                Ok(None)
            }
            IDB_TYPE => {
                let iface = match InterfaceDescriptionBlock::from_slice::<B>(body) {
                    Ok((_, idb)) => Interface {
                        link_type: (u32::from(idb.linktype) & 0xffff) as u16,
                        snaplen: idb.snaplen,
                        ts_resolution: idb
                            .options
                            .iter()
                            .find_map(|o| match o {
                                InterfaceDescriptionOption::IfTsResol(r) => Some(*r),
                                _ => None,
                            })
                            .unwrap_or(6),
                    },
                    // Options that do not parse: keep the fixed fields.
                    Err(_) if body.len() >= 8 => Interface {
                        link_type: rd16(body, 0, big),
                        snaplen: rd32(body, 4, big),
                        ts_resolution: 6,
                    },
                    Err(e) => return Err(format!("interface description block: {e}")),
                };
                self.interfaces.push(iface);
                Ok(None)
            }
            EPB_TYPE => {
                let (interface, ts_raw, orig_len, data_len) =
                    match EnhancedPacketBlock::from_slice::<B>(body) {
                        Ok((_, epb)) => (
                            epb.interface_id,
                            u64::try_from(epb.timestamp.as_nanos()).unwrap_or(u64::MAX),
                            epb.original_len,
                            epb.data.len(),
                        ),
                        Err(e) => {
                            // Fixed fields only (options unparsable).
                            let caplen = rd32(body, 12, big) as usize;
                            if body.len() < 20 || caplen > body.len() - 20 {
                                return Err(format!("enhanced packet block: {e}"));
                            }
                            let ts = (u64::from(rd32(body, 4, big)) << 32)
                                | u64::from(rd32(body, 8, big));
                            (rd32(body, 0, big), ts, rd32(body, 16, big), caplen)
                        }
                    };
                let iface = self.interface(interface)?;
                Ok(Some(Found {
                    consumed: 0,
                    data_off: BODY + 20,
                    data_len,
                    orig_len,
                    timestamp_ns: to_ns(ts_raw, iface.ts_resolution),
                    interface,
                }))
            }
            SPB_TYPE => {
                if body.len() < 4 {
                    return Err("simple packet block shorter than 4 bytes".into());
                }
                let iface = self.interface(0)?;
                let orig_len = rd32(body, 0, big);
                let mut caplen = (orig_len as usize).min(body.len() - 4);
                if iface.snaplen != 0 {
                    caplen = caplen.min(iface.snaplen as usize);
                }
                Ok(Some(Found {
                    consumed: 0,
                    data_off: BODY + 4,
                    data_len: caplen,
                    orig_len,
                    timestamp_ns: 0,
                    interface: 0,
                }))
            }
            OPB_TYPE => {
                // Obsolete Packet Block: iface u16, drops u16, ts high, ts
                // low, caplen, origlen, data.
                let caplen = rd32(body, 12, big) as usize;
                if body.len() < 20 || caplen > body.len() - 20 {
                    return Err("packet block: captured length exceeds the block".into());
                }
                let interface = u32::from(rd16(body, 0, big));
                let iface = self.interface(interface)?;
                let ts = (u64::from(rd32(body, 4, big)) << 32) | u64::from(rd32(body, 8, big));
                Ok(Some(Found {
                    consumed: 0,
                    data_off: BODY + 20,
                    data_len: caplen,
                    orig_len: rd32(body, 16, big),
                    timestamp_ns: to_ns(ts, iface.ts_resolution),
                    interface,
                }))
            }
            // Name resolution, statistics, journal, custom, unknown: skip.
            _ => Ok(None),
        }
    }

    fn interface(&self, id: u32) -> Result<Interface, String> {
        self.interfaces.get(id as usize).copied().ok_or_else(|| {
            format!(
                "packet on interface {id}, but the section describes only {}",
                self.interfaces.len()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamp_units() {
        assert_eq!(to_ns(5, 6), 5_000);
        assert_eq!(to_ns(5, 9), 5);
        assert_eq!(to_ns(5_000, 12), 5);
        assert_eq!(to_ns(1, 0x80 | 1), 500_000_000);
        assert_eq!(to_ns(u64::MAX, 0), u64::MAX);
        assert_eq!(to_ns(7, 200), 0);
    }

    #[test]
    fn reads_are_endian_aware_and_total() {
        let b = [1u8, 2, 3, 4];
        assert_eq!(rd32(&b, 0, true), 0x0102_0304);
        assert_eq!(rd32(&b, 0, false), 0x0403_0201);
        assert_eq!(rd32(&b, 1, true), 0);
        assert_eq!(rd16(&b, 2, true), 0x0304);
        assert_eq!(rd16(&b, 3, true), 0);
    }
}
