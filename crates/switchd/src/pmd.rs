//! A PMD (poll-mode driver) thread: polls its rx queues, runs each burst
//! through its own [`Switch`] (EMC, second-level cache, dpcls, upcalls
//! inline) and hands each output port its packets.
//!
//! What a PMD owns: its `Switch` (caches, megaflows), its rx queues and
//! their counters. What it shares: the ports' transmit sides (a lock per
//! port, taken once per output burst — uncontended with one PMD) and the
//! rule tables (an `Arc` swapped by a command).
//!
//! How other threads reach it: through a bounded command queue it drains
//! between bursts ([`PmdCmd`]); each command carries the channel its
//! answer goes back on. Nothing on the per-packet path takes a lock
//! other than the tx burst lock, allocates or makes a syscall besides the
//! ports' own rx/tx calls.
//!
//! Idle back-off: after traffic the PMD busy-polls for a window of
//! 200 µs to 1 ms that adapts to the gaps between bursts (`next_spin`);
//! after that it waits in `poll(2)` on its queues' descriptors for up to
//! `pmd-maxsleep` (10 ms) at a time, waking at once when a frame arrives,
//! so an idle switch costs almost no CPU — OVS's `pmd-maxsleep` idea,
//! with a wake-up on traffic.
//!
//! Time: the PMD reads the monotonic clock once per loop iteration (vDSO,
//! no syscall) and passes milliseconds since the switch started to the
//! datapath, which reads no clock itself. Processing cycles are TSC
//! cycles around each burst (receive, classify, execute, transmit), as
//! OVS counts them; idle cycles are the rest of the loop.

use crate::ports::{TxPort, TxTable};
use flowpath_datapath::{Config, DumpEntry, Outputs, PmdStatsReport, PortSink, Switch, BATCH_SIZE};
use flowpath_io::tsc;
use flowpath_netdev::offload::finish;
use flowpath_netdev::{wait_readable_us, QueueStats, RxMeta, RxQueue, TxFrame};
use flowpath_ofproto::tables::RuleTables;
use flowpath_ofproto::tunnel::UNDERLAY_PORT;
use flowpath_slowpath::{RuleSwitch, SlowPath};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Busy-poll at least this long after the last packet before sleeping.
const SPIN_MIN: Duration = Duration::from_micros(200);
/// ... and at most this long: a conversation whose packets come closer
/// together than this is served by a spinning PMD (see [`next_spin`]).
const SPIN_MAX: Duration = Duration::from_micros(1000);

/// The busy-poll window after traffic, adapted to the gap `gap` between
/// the last two bursts (as a hypervisor adapts its halt polling): a gap
/// the window just missed but that is at most [`SPIN_MAX`] grows the
/// window to cover such gaps (the next packet of a request/response
/// exchange then finds the PMD awake, not asleep in `poll(2)`: a wake-up
/// costs tens of µs on a virtual CPU); a longer gap halves it back
/// towards [`SPIN_MIN`]. Gaps inside the window leave it as it is.
pub(crate) fn next_spin(spin: Duration, gap: Duration) -> Duration {
    if gap > SPIN_MAX {
        (spin / 2).max(SPIN_MIN)
    } else if gap > spin {
        (gap + gap / 4).min(SPIN_MAX)
    } else {
        spin
    }
}
/// Longest single sleep of an idle PMD (bounds command latency too).
const IDLE_SLEEP_US: u32 = 10_000;

/// One rx queue as a PMD polls it.
pub struct RxqSlot {
    /// Datapath (OpenFlow) port number.
    pub port_no: u32,
    /// Port name for `pmd-rxq-show`.
    pub port_name: String,
    /// Queue id within the port.
    pub queue_id: usize,
    /// The queue.
    pub rxq: Box<dyn RxQueue>,
    /// Processing cycles spent on this queue's bursts.
    pub cycles: u64,
    /// Set when the queue failed; it is no longer polled.
    pub failed: Option<String>,
}

impl From<crate::ports::PendingRxq> for RxqSlot {
    /// A queue just opened: no cycles spent, not failed.
    fn from(q: crate::ports::PendingRxq) -> Self {
        RxqSlot {
            port_no: q.port_no,
            port_name: q.name,
            queue_id: q.queue_id,
            rxq: q.rxq,
            cycles: 0,
            failed: None,
        }
    }
}

/// A snapshot of one rx queue, for `pmd-rxq-show` and `dpctl/show`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RxqInfo {
    /// Port number.
    pub port_no: u32,
    /// Port name.
    pub port: String,
    /// Queue id.
    pub queue_id: usize,
    /// Counters.
    #[serde(skip)]
    pub stats: QueueStats,
    /// Processing cycles on this queue.
    pub cycles: u64,
    /// Why the queue stopped, if it did.
    pub failed: Option<String>,
}

/// What a PMD answers to [`PmdCmd::Stats`].
#[derive(Clone, Debug)]
pub struct PmdSnapshot {
    /// PMD index.
    pub id: usize,
    /// CPU it is pinned to.
    pub core: Option<usize>,
    /// Datapath counters.
    pub report: PmdStatsReport,
    /// Idle cycles (loop iterations that processed nothing).
    pub idle_cycles: u64,
    /// Output-side counters.
    pub sink: SinkStats,
    /// Receive-side frames refused as oversize.
    pub rx_oversize: u64,
    /// Its rx queues.
    pub rxqs: Vec<RxqInfo>,
    /// The EMC's entries in use.
    pub emc_occupancy: usize,
    /// Misses dropped by the upcall budget.
    pub upcall_budget_drops: u64,
    /// Frames dropped before classification as never valid.
    pub rx_invalid: u64,
    /// Heap bytes of its megaflows (slab, dpcls, actions).
    pub memory: flowpath_datapath::MemoryReport,
}

/// Commands a PMD executes between bursts.
pub enum PmdCmd {
    /// Answer a [`PmdSnapshot`].
    Stats(SyncSender<PmdSnapshot>),
    /// Zero the counters.
    ClearStats(SyncSender<()>),
    /// Answer the megaflows as `dpctl/dump-flows` text.
    DumpFlows(SyncSender<String>),
    /// Answer the megaflows as JSON objects.
    DumpFlowsJson(SyncSender<Vec<serde_json::Value>>),
    /// Remove every megaflow (and cache entry); answer how many.
    DelFlows(SyncSender<usize>),
    /// Upcalls use these rule tables from now on (the revalidator deals
    /// with the installed megaflows); answer when swapped.
    SwapRules(Arc<RuleTables>, SyncSender<()>),
    /// Apply a datapath configuration; answer the outcome.
    SetConfig(Box<Config>, SyncSender<Result<(), String>>),
    /// Answer a dump of the megaflows for the revalidator.
    Dump(SyncSender<Vec<DumpEntry>>),
    /// Delete these megaflows (stale handles are ignored); answer how many
    /// went.
    Delete(Vec<flowpath_datapath::MegaflowRef>, SyncSender<usize>),
    /// The revalidator's dynamic flow limit.
    SetFlowLimit(usize),
    /// Poll these rx queues too (a port added at run time); answer when
    /// they are polled.
    AddRxqs(Vec<RxqSlot>, SyncSender<()>),
    /// Stop polling port N's rx queues (and drop them); answer when done.
    RemovePort(u32, SyncSender<()>),
    /// Transmit through this table from now on (a port added or removed);
    /// answer when swapped.
    SetTx(Arc<TxTable>, SyncSender<()>),
    /// Stop polling port N's rx queues and hand them over (they move to
    /// another PMD).
    TakeRxqs(u32, SyncSender<Vec<RxqSlot>>),
    /// Run on this CPU from now on; answer the outcome.
    Pin(usize, SyncSender<Result<(), String>>),
    /// Hand every rx queue over and stop (the PMD threads are being
    /// replaced).
    Retire(SyncSender<Vec<RxqSlot>>),
}

/// OpenFlow packet-outs run on the thread that received them, as Open
/// vSwitch's main thread runs them: no hand-off to a PMD and back, and
/// the packet-ins they cause come back to that thread (a controller's
/// packet-out → packet-in round trip crosses no other thread). A
/// datapath of its own executes the translated actions (its caches stay
/// empty: a packet-out is never looked up), sending through PMD 0's
/// transmit queue of each port (locked per queue, as PMDs share queues).
pub struct ControlExec {
    sw: Switch<SlowPath>,
    pins: Receiver<flowpath_datapath::execute::PacketIn>,
    /// Output-side counters of packet-outs.
    pub stats: SinkStats,
}

impl ControlExec {
    /// A packet-out datapath translating with `tables` and `bridge`,
    /// sampling into `samples`, tracking connections in `conntrack`.
    pub(crate) fn new(
        tables: Arc<RuleTables>,
        bridge: Arc<flowpath_ofproto::normal::Bridge>,
        samples: flowpath_datapath::execute::SampleSender,
        conntrack: Arc<flowpath_conntrack::Conntrack>,
        ipf: Arc<flowpath_conntrack::ipf::Ipf>,
    ) -> Result<ControlExec, String> {
        let sp = SlowPath::with_bridge(tables, bridge);
        // Caches as small as they come: nothing is ever looked up here.
        let cfg = Config {
            emc_enable: false,
            emc_entries: 2,
            second_level: flowpath_datapath::SecondLevel::None,
            smc_entries: 4,
            dfc_entries: 1,
            cd_buckets: 1,
            hybrid_buckets: 1,
            ..Config::default()
        };
        let mut sw = Switch::new(cfg, sp).map_err(|e| e.to_string())?;
        // One packet-out causes at most a few packet-ins (one per
        // `controller` action it runs).
        let (tx, pins) = std::sync::mpsc::sync_channel(256);
        sw.set_packet_in_sink(Some(tx));
        sw.set_sample_sink(Some(samples));
        sw.set_conntrack(Some(conntrack));
        sw.set_ipf(Some(ipf));
        Ok(ControlExec {
            sw,
            pins,
            stats: SinkStats::default(),
        })
    }

    /// Runs datapath `actions` on `frame` as if it came in on `in_port`;
    /// false if the frame could not be parsed. The packet-ins it caused
    /// go into `pins`.
    pub(crate) fn run(
        &mut self,
        tx: &TxTable,
        in_port: u32,
        frame: &[u8],
        actions: &[flowpath_odp::DpAction],
        now_ms: u64,
        pins: &mut Vec<flowpath_datapath::execute::PacketIn>,
    ) -> bool {
        let metas = [RxMeta::default(); BATCH_SIZE];
        let mut scratch = [Vec::new(), Vec::new()];
        let mut sink = Sink {
            pmd: 0,
            tx,
            metas: &metas,
            scratch: &mut scratch,
            stats: &mut self.stats,
        };
        let ok = self
            .sw
            .execute_packet(in_port, frame, actions, now_ms, &mut sink);
        tx.flush_for(0);
        pins.extend(self.pins.try_iter());
        ok
    }
}

/// Output-side counters of a PMD.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct SinkStats {
    /// Packets sent to a port number the switch does not have.
    pub no_such_port: u64,
    /// Frames finished in software (checksum, segmentation) for a port
    /// without offloads.
    pub offload_finished: u64,
    /// Frames that could not be finished (malformed or unsupported
    /// offload state): dropped.
    pub offload_dropped: u64,
    /// Output bursts that found their port's tx lock taken.
    pub tx_lock_contended: u64,
}

/// The PMD's output side: one tx burst per port per batch.
struct Sink<'a> {
    pmd: usize,
    tx: &'a TxTable,
    metas: &'a [RxMeta; BATCH_SIZE],
    /// Software offload's buffers: the frame being finished, and an
    /// encapsulated segment.
    scratch: &'a mut [Vec<u8>; 2],
    stats: &'a mut SinkStats,
}

impl PortSink for Sink<'_> {
    fn send(&mut self, port: u32, packets: Outputs<'_>) {
        let Some(txp) = self.tx.get(port) else {
            self.stats.no_such_port += packets.len() as u64;
            return;
        };
        let metas = self.metas;
        let meta = |tag: u64| metas.get(tag as usize).copied().unwrap_or_default();
        let qm = txp.queue_for(self.pmd);
        let mut q = match qm.try_lock() {
            Ok(q) => q,
            Err(std::sync::TryLockError::WouldBlock) => {
                self.stats.tx_lock_contended += 1;
                TxPort::lock(qm)
            }
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
        };
        let needs =
            |p: &flowpath_datapath::OutPacket<'_>| meta(p.tag).vnet.is_some_and(|v| !v.is_plain());
        if port == UNDERLAY_PORT {
            // Tunnel packets keep their inner frame's offload state, whose
            // offsets are the inner frame's: finished and encapsulated
            // again, segment by segment.
            let [seg, outer] = &mut *self.scratch;
            let stats = &mut *self.stats;
            in_runs(&mut **q, &packets, &meta, needs, |q, p| {
                let m = meta(p.tag);
                let v = m.vnet.unwrap_or_default();
                let Some(hlen) = flowpath_wire::tunnel::encap_len(p.data) else {
                    q.send(&mut std::iter::once(TxFrame {
                        data: p.data,
                        vnet: None,
                        timestamp_ns: m.timestamp_ns,
                    }));
                    return;
                };
                let (hdr, inner) = p.data.split_at(hlen);
                let sport = flowpath_wire::tunnel::udp_src_port(hdr);
                let r = finish(inner, &v, seg, &mut |s| {
                    outer.clear();
                    outer.extend_from_slice(hdr);
                    outer.extend_from_slice(s);
                    flowpath_wire::tunnel::finish_push(outer, hlen, sport);
                    q.send(&mut std::iter::once(TxFrame {
                        data: outer,
                        vnet: None,
                        timestamp_ns: m.timestamp_ns,
                    }));
                });
                match r {
                    Ok(_) => stats.offload_finished += 1,
                    Err(_) => stats.offload_dropped += 1,
                }
            });
            return;
        }
        if txp.takes_vnet_hdr {
            q.send(&mut packets.iter().map(|p| {
                let m = meta(p.tag);
                TxFrame {
                    data: p.data,
                    vnet: m.vnet,
                    timestamp_ns: m.timestamp_ns,
                }
            }));
            return;
        }
        // A port without offloads: a frame with offload state is finished
        // in software, in order.
        let stats = &mut *self.stats;
        let scratch = &mut self.scratch[0];
        in_runs(&mut **q, &packets, &meta, needs, |q, p| {
            let m = meta(p.tag);
            let v = m.vnet.unwrap_or_default();
            let r = finish(p.data, &v, scratch, &mut |seg| {
                q.send(&mut std::iter::once(TxFrame {
                    data: seg,
                    vnet: None,
                    timestamp_ns: m.timestamp_ns,
                }));
            });
            match r {
                Ok(_) => stats.offload_finished += 1,
                Err(_) => stats.offload_dropped += 1,
            }
        });
    }
}

/// Sends `packets` to `q`: each run of frames that do not `need` more as
/// one burst, each frame that does through `each`, in order.
fn in_runs<'a>(
    q: &mut dyn flowpath_netdev::TxQueue,
    packets: &Outputs<'a>,
    meta: &dyn Fn(u64) -> RxMeta,
    need: impl Fn(&flowpath_datapath::OutPacket<'a>) -> bool,
    mut each: impl FnMut(&mut dyn flowpath_netdev::TxQueue, flowpath_datapath::OutPacket<'a>),
) {
    let n = packets.len();
    let mut i = 0;
    while i < n {
        let start = i;
        while packets.get(i).is_some_and(|p| !need(&p)) {
            i += 1;
        }
        if i > start {
            q.send(
                &mut (start..i).filter_map(|j| packets.get(j)).map(|p| TxFrame {
                    data: p.data,
                    vnet: None,
                    timestamp_ns: meta(p.tag).timestamp_ns,
                }),
            );
        }
        if let Some(p) = packets.get(i) {
            each(q, p);
        }
        i += 1;
    }
}

/// A PMD thread's state.
pub struct Pmd {
    /// Index.
    pub id: usize,
    /// CPU to pin to.
    pub core: Option<usize>,
    /// The datapath worker.
    pub sw: Switch<SlowPath>,
    /// Rx queues polled.
    pub rxqs: Vec<RxqSlot>,
    /// Transmit sides of all ports.
    pub tx: Arc<TxTable>,
    /// Commands.
    pub cmds: Receiver<PmdCmd>,
    /// Read end of the wake-up socket pair (non-blocking): a byte means
    /// a command is queued.
    pub wake: std::os::unix::net::UnixStream,
    /// Set to stop.
    pub stop: Arc<AtomicBool>,
    /// Time zero of the datapath clock.
    pub epoch: Instant,
    /// The flow limit the revalidator set last, if any.
    pub dyn_limit: Option<usize>,
    /// The rx queues changed: the descriptors to wait on are made again.
    pub rxqs_changed: bool,
    /// Told to stop (its queues handed over): the loop ends.
    pub retired: bool,
}

/// What an idle PMD waits on: its rx queues' descriptors and the wake-up
/// socket's; whether some queue has none (captures, polled every
/// millisecond while idle).
fn poll_set(rxqs: &[RxqSlot], wake: &std::os::unix::net::UnixStream) -> (Vec<RawFd>, bool) {
    let mut fds: Vec<RawFd> = rxqs.iter().filter_map(|s| s.rxq.poll_fd()).collect();
    let fdless = rxqs.iter().any(|s| s.rxq.poll_fd().is_none()) || fds.is_empty();
    fds.push(std::os::unix::io::AsRawFd::as_raw_fd(wake));
    (fds, fdless)
}

impl Pmd {
    /// The thread's body: poll until `stop`.
    pub fn run(mut self) {
        if let Some(c) = self.core {
            if let Err(e) = flowpath_io::affinity::pin_current_thread(c) {
                eprintln!("flowpath: pmd {}: cannot pin to CPU {c}: {e}", self.id);
            }
        }
        let mut metas = [RxMeta::default(); BATCH_SIZE];
        let mut scratch: [Vec<u8>; 2] = [Vec::with_capacity(65_536), Vec::with_capacity(2048)];
        let mut sink_stats = SinkStats::default();
        let mut idle_cycles = 0u64;
        let mut last_traffic = Instant::now();
        let mut spin = SPIN_MIN;
        let (mut fds, mut fdless) = poll_set(&self.rxqs, &self.wake);
        let mut drain = [0u8; 64];
        while !self.stop.load(Ordering::Relaxed) && !self.retired {
            let loop_start = tsc::rdtsc();
            let now = Instant::now();
            let now_ms = now.duration_since(self.epoch).as_millis() as u64;
            let mut got = 0usize;
            for slot in self.rxqs.iter_mut() {
                if slot.failed.is_some() {
                    continue;
                }
                let t0 = tsc::rdtsc();
                let sw = &mut self.sw;
                let port = slot.port_no;
                let r = slot.rxq.recv(BATCH_SIZE, &mut |frame, meta| {
                    let i = sw.pending();
                    if let Some(m) = metas.get_mut(i) {
                        *m = meta;
                        // (A checksum left to offload: header rewrites
                        // keep it the pseudo-header's sum.)
                        let partial = meta
                            .vnet
                            .is_some_and(|v| v.flags & flowpath_netdev::offload::F_NEEDS_CSUM != 0);
                        // Cannot fail: at most BATCH_SIZE frames per burst.
                        let _ = sw.push_offloaded(port, frame, i as u64, partial);
                    }
                });
                match r {
                    Ok(0) => {}
                    Ok(n) => {
                        got += n;
                        let mut sink = Sink {
                            pmd: self.id,
                            tx: &self.tx,
                            metas: &metas,
                            scratch: &mut scratch,
                            stats: &mut sink_stats,
                        };
                        self.sw.flush(now_ms, &mut sink);
                        let c = tsc::rdtsc().wrapping_sub(t0);
                        self.sw.add_processing_cycles(c);
                        slot.cycles += c;
                    }
                    Err(e) => {
                        eprintln!("flowpath: pmd {}: {e}; queue no longer polled", self.id);
                        slot.failed = Some(e.to_string());
                    }
                }
            }
            self.drain_commands(now_ms, &mut sink_stats, idle_cycles);
            if self.rxqs_changed {
                self.rxqs_changed = false;
                (fds, fdless) = poll_set(&self.rxqs, &self.wake);
            }
            if got > 0 {
                spin = next_spin(spin, now.duration_since(last_traffic));
                last_traffic = now;
            } else {
                idle_cycles += tsc::rdtsc().wrapping_sub(loop_start);
                // `pmd-maxsleep`: 0 spins (as OVS's default); else an
                // idle PMD sleeps at most that long.
                let max_us = self.sw.config().pmd_maxsleep_us;
                if max_us == 0 {
                    self.tx.flush_for(self.id);
                } else if now.duration_since(last_traffic) > spin {
                    self.tx.flush_for(self.id);
                    // Queues without a descriptor (captures) are polled
                    // every millisecond while idle.
                    let cap = if fdless { 1000 } else { IDLE_SLEEP_US };
                    // Queues that must ask for a wake-up do it now (a
                    // virtio guest kicks only when asked); one that finds
                    // frames already there keeps the PMD awake.
                    let mut armed = true;
                    for s in self.rxqs.iter_mut().filter(|s| s.failed.is_none()) {
                        armed &= s.rxq.arm_wakeup();
                    }
                    if !armed {
                        continue;
                    }
                    // Only a wake-up (or a frame) ends the wait early: after
                    // a timeout there is nothing to drain.
                    if wait_readable_us(&fds, u64::from(max_us.min(cap))) > 0 {
                        while matches!(std::io::Read::read(&mut &self.wake, &mut drain), Ok(n) if n > 0)
                        {
                        }
                    }
                }
            }
        }
        self.tx.flush_all();
    }

    fn drain_commands(&mut self, now_ms: u64, sink: &mut SinkStats, idle: u64) {
        crate::fault::hook(crate::fault::Part::Pmd);
        loop {
            let cmd = match self.cmds.try_recv() {
                Ok(c) => c,
                Err(TryRecvError::Empty) | Err(TryRecvError::Disconnected) => return,
            };
            // A reply channel whose requester gave up is not an error.
            match cmd {
                PmdCmd::Stats(r) => {
                    let _ = r.send(self.snapshot(*sink, idle));
                }
                PmdCmd::ClearStats(r) => {
                    self.sw.clear_stats();
                    *sink = SinkStats::default();
                    for s in self.rxqs.iter_mut() {
                        s.cycles = 0;
                    }
                    let _ = r.send(());
                }
                PmdCmd::DumpFlows(r) => {
                    let _ = r.send(self.sw.dump_flows(now_ms));
                }
                PmdCmd::DumpFlowsJson(r) => {
                    let _ = r.send(
                        self.sw
                            .dump()
                            .iter()
                            .map(|e| dump_json(e, now_ms))
                            .collect(),
                    );
                }
                PmdCmd::DelFlows(r) => {
                    let _ = r.send(self.sw.delete_all_megaflows());
                }
                PmdCmd::SwapRules(t, r) => {
                    self.sw.swap_rules(t);
                    let _ = r.send(());
                }
                PmdCmd::SetConfig(cfg, r) => {
                    let mut cfg = *cfg;
                    if let Some(l) = self.dyn_limit {
                        cfg.flow_limit = cfg.flow_limit.min(l);
                    }
                    let res = self.sw.set_config(cfg).map_err(|e| e.to_string());
                    let _ = r.send(res);
                }
                PmdCmd::Dump(r) => {
                    let _ = r.send(self.sw.dump());
                }
                PmdCmd::Delete(refs, r) => {
                    let _ = r.send(self.sw.delete_megaflows(&refs));
                }
                PmdCmd::AddRxqs(slots, r) => {
                    self.rxqs.extend(slots);
                    self.rxqs_changed = true;
                    let _ = r.send(());
                }
                PmdCmd::RemovePort(no, r) => {
                    self.tx.flush_for(self.id);
                    self.rxqs.retain(|s| s.port_no != no);
                    self.rxqs_changed = true;
                    let _ = r.send(());
                }
                PmdCmd::TakeRxqs(no, r) => {
                    let (take, keep): (Vec<RxqSlot>, Vec<RxqSlot>) = std::mem::take(&mut self.rxqs)
                        .into_iter()
                        .partition(|s| s.port_no == no);
                    self.rxqs = keep;
                    self.rxqs_changed = true;
                    let _ = r.send(take);
                }
                PmdCmd::Retire(r) => {
                    self.tx.flush_for(self.id);
                    self.retired = true;
                    let _ = r.send(std::mem::take(&mut self.rxqs));
                    return;
                }
                PmdCmd::Pin(c, r) => {
                    let res = flowpath_io::affinity::pin_current_thread(c)
                        .map_err(|e| format!("cannot pin to CPU {c}: {e}"));
                    if res.is_ok() {
                        self.core = Some(c);
                    }
                    let _ = r.send(res);
                }
                PmdCmd::SetTx(t, r) => {
                    self.tx.flush_for(self.id);
                    self.tx = t;
                    let _ = r.send(());
                }
                PmdCmd::SetFlowLimit(l) => {
                    self.dyn_limit = Some(l);
                    // Only the limit changes: cannot fail validation (the
                    // limit is at least 1000).
                    let _ = self.sw.set_flow_limit(l);
                }
            }
        }
    }

    fn snapshot(&self, sink: SinkStats, idle_cycles: u64) -> PmdSnapshot {
        PmdSnapshot {
            id: self.id,
            core: self.core,
            report: self.sw.report(),
            idle_cycles,
            sink,
            rx_oversize: self.sw.rx_stats().oversize,
            rxqs: self
                .rxqs
                .iter()
                .map(|s| RxqInfo {
                    port_no: s.port_no,
                    port: s.port_name.clone(),
                    queue_id: s.queue_id,
                    stats: s.rxq.stats(),
                    cycles: s.cycles,
                    failed: s.failed.clone(),
                })
                .collect(),
            emc_occupancy: self.sw.datapath().emc_occupancy(),
            upcall_budget_drops: self.sw.datapath().stats().upcall_budget_drops,
            rx_invalid: self.sw.rx_stats().invalid,
            memory: self.sw.datapath().megaflows().memory(),
        }
    }
}

/// One megaflow as a JSON object (`megaflow`, `packets`, `bytes`,
/// `used_ms_ago`, `actions`).
fn dump_json(e: &DumpEntry, now_ms: u64) -> serde_json::Value {
    serde_json::json!({
        "megaflow": e.megaflow(),
        "packets": e.packets,
        "bytes": e.bytes,
        "used_ms_ago": e.used_ms_ago(now_ms),
        "actions": flowpath_odp::format_actions(&e.actions),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn the_spin_window_follows_a_conversation_and_falls_back_when_it_ends() {
        // Gaps inside the window change nothing.
        assert_eq!(next_spin(SPIN_MIN, us(50)), SPIN_MIN);
        // A 500 µs request/response rhythm: the window grows past it ...
        let w = next_spin(SPIN_MIN, us(500));
        assert!(w > us(500) && w <= SPIN_MAX, "{w:?}");
        // ... and stays while the rhythm holds.
        assert_eq!(next_spin(w, us(500)), w);
        // Never beyond the cap, however close the miss.
        assert_eq!(next_spin(us(900), us(990)), SPIN_MAX);
        // Quiet spells halve it back, not below the floor.
        assert_eq!(next_spin(SPIN_MAX, us(200_000)), SPIN_MAX / 2);
        let mut w = SPIN_MAX;
        for _ in 0..10 {
            w = next_spin(w, Duration::from_millis(200));
        }
        assert_eq!(w, SPIN_MIN);
    }
}
