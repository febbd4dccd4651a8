//! [`Workload`]: a generated packet sequence, its rule set and its timing.
//!
//! A workload is stored compactly as one frame per distinct flow plus the
//! sequence of flow indices, one per packet: 1M packets of 1M flows take
//! 60 MB of frames and 4 MB of sequence, and a packet is a slice into the
//! flow's frame. [`Workload::to_frames`] materialises the whole packet
//! sequence when a flat buffer is wanted.
//!
//! Timing: packet `i` is sent at `i * 10^9 / pps` nanoseconds. Every profile
//! but `churn` uses 1,000,000 packets/s, i.e. packet `i` at `i` µs — the
//! timestamps `gen-pcap.py` writes.

use crate::frame::Frames;

/// A generated workload: frames of the distinct flows, the packet order,
/// the packet rate, the matching rules and a one-line description.
///
/// Invariant: every entry of the sequence indexes an existing flow frame.
#[derive(Clone, Debug)]
pub struct Workload {
    flows: Frames,
    sequence: Vec<u32>,
    pps: u64,
    rules: Vec<String>,
    description: String,
}

/// One packet of a workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    /// Send time, nanoseconds from the start of the workload.
    pub timestamp_ns: u64,
    /// Index of the packet's flow (see [`Workload::flow_frames`]).
    pub flow: u32,
    /// The frame, without FCS.
    pub data: &'a [u8],
}

impl Workload {
    /// Assembles a workload. Every `sequence` entry must be `< flows.len()`
    /// and `pps` must be non-zero (checked in debug builds; the profiles
    /// build them so).
    pub(crate) fn new(
        flows: Frames,
        sequence: Vec<u32>,
        pps: u64,
        rules: Vec<String>,
        description: String,
    ) -> Self {
        debug_assert!(pps > 0);
        debug_assert!(sequence.iter().all(|&i| (i as usize) < flows.len()));
        Workload {
            flows,
            sequence,
            pps,
            rules,
            description,
        }
    }

    /// Number of distinct flows (frames in [`Self::flow_frames`]).
    pub fn flow_count(&self) -> usize {
        self.flows.len()
    }

    /// Number of packets.
    pub fn packet_count(&self) -> usize {
        self.sequence.len()
    }

    /// Stored bytes per frame (wire size minus the 4-byte FCS).
    pub fn frame_len(&self) -> usize {
        self.flows.frame_len()
    }

    /// One frame per distinct flow.
    pub fn flow_frames(&self) -> &Frames {
        &self.flows
    }

    /// The flow index of every packet, in sending order.
    pub fn sequence(&self) -> &[u32] {
        &self.sequence
    }

    /// Packets per second that the timestamps reflect.
    pub fn pps(&self) -> u64 {
        self.pps
    }

    /// Send time of packet `i` in nanoseconds.
    pub fn timestamp_ns(&self, i: usize) -> u64 {
        // i < 2^32 and 10^9 < 2^30: the product fits in u128 trivially and
        // the quotient (<= i * 10^9) in u64.
        ((i as u128 * 1_000_000_000) / u128::from(self.pps)) as u64
    }

    /// Packet `i`, or `None` past the end.
    pub fn packet(&self, i: usize) -> Option<Packet<'_>> {
        let flow = *self.sequence.get(i)?;
        let data = self.flows.get(flow as usize)?;
        Some(Packet {
            timestamp_ns: self.timestamp_ns(i),
            flow,
            data,
        })
    }

    /// All packets in sending order.
    pub fn packets(&self) -> impl ExactSizeIterator<Item = Packet<'_>> + '_ {
        self.sequence
            .iter()
            .enumerate()
            .map(move |(i, &flow)| Packet {
                timestamp_ns: self.timestamp_ns(i),
                flow,
                // The constructor's invariant: every sequence entry indexes a
                // frame; an empty slice would only show a bug, never panic.
                data: self.flows.get(flow as usize).unwrap_or_default(),
            })
    }

    /// The whole packet sequence as one flat buffer of frames.
    pub fn to_frames(&self) -> Frames {
        let mut out = Frames::with_capacity(self.frame_len(), self.packet_count());
        for p in self.packets() {
            out.push_copy(p.data);
        }
        out
    }

    /// The rules, one `ovs-ofctl add-flows` line each, without newlines.
    pub fn rules(&self) -> &[String] {
        &self.rules
    }

    /// The rules as an `ovs-ofctl add-flows` file: one per line, each line
    /// ending in a newline.
    pub fn rules_text(&self) -> String {
        let mut s = String::new();
        for r in &self.rules {
            s.push_str(r);
            s.push('\n');
        }
        s
    }

    /// A one-line description of the workload and its parameters.
    pub fn description(&self) -> &str {
        &self.description
    }
}
