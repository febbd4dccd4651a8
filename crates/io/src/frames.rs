//! [`load_ethernet_frames`]: a whole Ethernet capture in memory, as one
//! flat buffer plus offsets (what the replay benchmarks iterate over).

use std::path::Path;

use crate::{IoError, PcapReader, LINKTYPE_ETHERNET};

/// The Ethernet frames of a capture, back to back in one buffer.
#[derive(Debug, Default)]
pub struct EthernetFrames {
    /// All captured bytes, frame after frame.
    pub data: Vec<u8>,
    /// `offsets[i]..offsets[i + 1]` is frame `i`; `len() + 1` entries.
    pub offsets: Vec<usize>,
    /// Capture time of each frame, nanoseconds since the Unix epoch.
    pub timestamps_ns: Vec<u64>,
    /// Set when the file ended inside a record or had a corrupt record
    /// after at least the file header: the frames before it are kept.
    pub stopped_early: Option<IoError>,
}

impl EthernetFrames {
    /// Number of frames.
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// True when there is no frame.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Frame `i`, if it exists.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        let (a, b) = (*self.offsets.get(i)?, *self.offsets.get(i + 1)?);
        self.data.get(a..b)
    }

    /// The frames in order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.offsets
            .windows(2)
            .map(|w| self.data.get(w[0]..w[1]).unwrap_or(&[]))
    }
}

/// Reads every packet of `path` into memory. Fails if the file cannot be
/// read at all or if any packet's link type is not Ethernet (the error
/// names the file, the record and the link type); a truncated or corrupt
/// record after the header ends the load, reported in
/// [`EthernetFrames::stopped_early`].
pub fn load_ethernet_frames(path: impl AsRef<Path>) -> Result<EthernetFrames, IoError> {
    let mut r = PcapReader::open(path.as_ref())?;
    let mut out = EthernetFrames {
        offsets: vec![0],
        ..EthernetFrames::default()
    };
    while let Some(p) = r.next_packet() {
        match p {
            Ok(p) => {
                if p.link_type != LINKTYPE_ETHERNET {
                    return Err(IoError::NotEthernet {
                        path: path.as_ref().to_path_buf(),
                        record: p.record,
                        link_type: p.link_type,
                    });
                }
                out.data.extend_from_slice(p.data);
                out.offsets.push(out.data.len());
                out.timestamps_ns.push(p.timestamp_ns);
            }
            Err(e @ (IoError::Truncated { .. } | IoError::BadRecord { .. })) => {
                out.stopped_early = Some(e);
                break;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}
