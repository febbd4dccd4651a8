//! What a controller action hands to the OpenFlow channel and a flow-sample
//! action to the sampler, and how the executor hands them (off the fast
//! path: bounded queues, a full one drops and counts).

use super::Executor;
use flowpath_odp::DpAction;

/// A packet a `userspace(controller(...))` action sends to the
/// controllers (the OpenFlow channel turns it into a PACKET_IN).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketIn {
    /// The frame as it is at the action.
    pub frame: Vec<u8>,
    /// The port it came in on.
    pub in_port: u32,
    /// OpenFlow packet-in reason (0 no match, 1 action, ...).
    pub reason: u8,
    /// `controller(id=...)`: 0 for every controller.
    pub controller_id: u16,
    /// Bytes of the frame to send (the rest is cut).
    pub max_len: u16,
    /// The cookie of the flow that sent it.
    pub cookie: u64,
    /// That flow's table.
    pub table: u8,
    /// `controller(userdata=...)`'s index in the process's userdata
    /// table (0: none).
    pub userdata: u32,
    /// `controller(pause)`: the frozen rest of the translation (0: none).
    pub cont: u32,
    /// The packet's connection-tracking state at the action (as the last
    /// `ct` left it; untracked: the default), for the packet-in's
    /// metadata.
    pub ct: flowpath_conntrack::CtMeta,
}

/// Where the executor hands packets for the controllers: a bounded
/// queue; a full queue drops the packet (counted in
/// [`super::ExecStats::controller_dropped`]), so a slow controller never stalls
/// the PMD.
pub type PacketInSender = std::sync::mpsc::SyncSender<PacketIn>;

impl Executor {
    /// Controller actions hand their packets to `tx` from now on.
    pub fn set_packet_in_sink(&mut self, tx: Option<PacketInSender>) {
        self.packet_in = tx;
    }

    /// A controller action: the packet goes to the packet-in queue (a
    /// copy: the controller path, off the fast path, as OVS's upcall),
    /// or is counted as dropped when the queue is full or absent.
    #[cold]
    pub(super) fn send_to_controller(
        &mut self,
        frame: &[u8],
        in_port: u32,
        ct: &flowpath_conntrack::CtMeta,
        a: &DpAction,
    ) {
        let DpAction::Controller {
            reason,
            id,
            max_len,
            cookie,
            table,
            userdata,
            cont,
        } = *a
        else {
            return;
        };
        self.stats.controller += 1;
        let sent = self.packet_in.as_ref().is_some_and(|tx| {
            tx.try_send(PacketIn {
                frame: frame.to_vec(),
                in_port,
                ct: *ct,
                reason,
                controller_id: id,
                max_len,
                cookie,
                table,
                userdata,
                cont,
            })
            .is_ok()
        });
        if !sent {
            self.stats.controller_dropped += 1;
        }
    }
}

/// A packet a flow-sample action picked (`userspace(flow_sample(...))`):
/// its headers as they were at the action, for the sampler's counters and
/// flow records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SampledPacket {
    /// The first [`SAMPLE_HEADER_BYTES`] bytes of the frame (all of a
    /// shorter one).
    pub headers: Vec<u8>,
    /// The frame's whole length.
    pub len: usize,
    /// The port it came in on.
    pub in_port: u32,
    /// The action's cookie (collector set, observation domain and
    /// point, ...).
    pub sample: flowpath_odp::FlowSample,
}

/// How much of a sampled frame goes to the sampler (IPFIX exports headers,
/// as OVS's 128-byte section).
pub const SAMPLE_HEADER_BYTES: usize = 128;

/// Where the executor hands sampled packets.
pub type SampleSender = std::sync::mpsc::SyncSender<SampledPacket>;

/// The flow-sample actions' state: the queue and the random draw (a
/// per-worker xorshift: no lock, no syscall).
#[derive(Debug, Default)]
pub(super) struct Sampler {
    tx: Option<SampleSender>,
    rng: u64,
}

impl Executor {
    /// Flow-sample actions hand their packets to `tx` from now on (none:
    /// counted only).
    pub fn set_sample_sink(&mut self, tx: Option<SampleSender>) {
        self.sampler.tx = tx;
    }

    /// A flow-sample action: with its probability, the packet's headers
    /// go to the sampler's queue.
    #[inline]
    pub(super) fn sample(&mut self, frame: &[u8], in_port: u32, fs: &flowpath_odp::FlowSample) {
        if fs.probability != u32::MAX {
            let s = &mut self.sampler.rng;
            if *s == 0 {
                *s = 0x9e37_79b9_7f4a_7c15;
            }
            *s ^= *s << 13;
            *s ^= *s >> 7;
            *s ^= *s << 17;
            // As OVS's datapath: sampled when the draw is below the
            // probability.
            if (*s >> 32) as u32 >= fs.probability {
                return;
            }
        }
        self.hand_sample(frame, in_port, fs);
    }

    #[cold]
    fn hand_sample(&mut self, frame: &[u8], in_port: u32, fs: &flowpath_odp::FlowSample) {
        self.stats.sampled += 1;
        let sent = self.sampler.tx.as_ref().is_some_and(|tx| {
            tx.try_send(SampledPacket {
                headers: frame[..frame.len().min(SAMPLE_HEADER_BYTES)].to_vec(),
                len: frame.len(),
                in_port,
                sample: *fs,
            })
            .is_ok()
        });
        if !sent {
            self.stats.sample_dropped += 1;
        }
    }
}
