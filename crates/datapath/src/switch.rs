//! The worker loop: frames in, cascade, actions, frames out.
//!
//! What: [`Switch`] is one datapath worker with everything around the
//! cascade — rx buffers, extraction, the [`Datapath`], the slow path (any
//! [`Upcall`]; the rule tables' is `flowpath_slowpath::SlowPath`), action execution
//! and output delivery. Per batch:
//!
//! 1. [`Switch::push`] copies each arriving frame into the next rx
//!    [`PacketBuf`] (as a NIC or DPDK's pcap device does), extracts its key
//!    and header offsets (`extract_with_layers`) and adds it to the
//!    [`Batch`] (≤ [`BATCH_SIZE`]); each frame carries a caller's `tag`
//!    (e.g. its capture time) through to its outputs.
//! 2. [`Switch::flush`] classifies the batch
//!    ([`Datapath::process_batch`], upcalls inline), executes each packet's
//!    actions on its buffer ([`Executor`]) and hands each output port its
//!    packets in one [`PortSink::send`] call. Packets that a `recirc(ID)`
//!    sent back are then parsed again and run the same way, in batches,
//!    pass after pass, before `flush` returns.
//!
//! [`Switch::process`] does both for a run of frames. Between batches the
//! caller may call [`Switch::housekeeping`] (idle expiry every
//! [`SWEEP_INTERVAL_MS`], with the configured `max-idle`), let the slow
//! path revalidate ([`Switch::upcall_and_datapath`]: the slow path's
//! `publish_rules` revalidates the megaflows against new rules) and
//! add the processing cycles it measured around the batch
//! ([`Switch::add_processing_cycles`]).
//!
//! Why one type: `flowpath run` and `flowpath bench` must measure and
//! exercise the same code path; this is it. Time (`now_ms`) and cycle
//! counts come from the caller: the worker reads no clock.
//!
//! Invariants: the rx buffers, metadata and tags at index `i` belong to
//! the batch's packet `i` between `push` and the end of `flush`; after
//! `flush` the batch is empty; nothing on the per-packet path allocates
//! once buffers and queues have grown to the traffic (a frame longer than
//! any before grows its rx buffer once; a miss's upcall allocates).
//! Counters: every pushed frame is either refused as oversize
//! ([`RxStats::oversize`]) or as never valid ([`RxStats::invalid`]), or
//! counted in the datapath's
//! `packets_received`, and then in exactly one of its tiers.
//!
//! Threads: a `Switch` is owned by its worker thread; rule tables are
//! shared read-only (`Arc`) and replaced between batches.

use crate::batch::{Batch, BatchFull, Verdict, BATCH_SIZE};
use crate::config::{Config, ConfigError};
use crate::dump::DumpEntry;
use crate::execute::{
    ExecStats, Executor, PacketMeta, PortSink, PortStats, Recirculated, HEAD_WORDS,
};
use crate::megaflow::MegaflowRef;
use crate::packet::PacketBuf;
use crate::pipeline::Datapath;
use crate::stats::PmdStatsReport;
use crate::upcall::Upcall;
use flowpath_flow::extract::{
    extract_into_checked, extract_into_rx, extract_into_zeroed_ext, Layers,
};

/// How often [`Switch::housekeeping`] sweeps idle megaflows (ms; OVS's
/// revalidator wakes every 500 ms by default).
pub const SWEEP_INTERVAL_MS: u64 = 500;

/// Receive counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxStats {
    /// Frames accepted into a batch.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Frames refused for exceeding [`crate::packet::MAX_FRAME_LEN`].
    pub oversize: u64,
    /// Frames dropped before classification as never valid (shorter
    /// than an Ethernet header, or impossible IPv4 header lengths: see
    /// [`flowpath_flow::extract::never_valid`]): no upcall, no megaflow.
    pub invalid: u64,
}

/// One datapath worker with its buffers. See the module documentation.
#[derive(Debug)]
pub struct Switch<U: Upcall> {
    dp: Datapath,
    upcall: U,
    batch: Box<Batch>,
    bufs: Vec<PacketBuf>,
    /// Where each received packet's headers are (its [`PacketMeta`] is
    /// built from them only if its actions run packet by packet).
    layers: [Layers; BATCH_SIZE],
    /// The packets' metadata for the per-packet interpreter: built there
    /// from `layers` for received packets, set by `run_recirculated` for
    /// recirculated ones.
    metas: [PacketMeta; BATCH_SIZE],
    tags: [u64; BATCH_SIZE],
    /// Bit `i`: the packet in batch slot `i` has a partial transport
    /// checksum ([`PacketMeta::csum_partial`]; [`Switch::push_offloaded`]).
    partial: u32,
    exec: Executor,
    rx: RxStats,
    next_sweep_ms: Option<u64>,
    /// Recirculated packets being run (swapped with the executor's pool).
    recirc: Vec<Recirculated>,
}

impl<U: Upcall> Switch<U> {
    /// A worker with empty caches and [`BATCH_SIZE`] rx buffers.
    pub fn new(cfg: Config, upcall: U) -> Result<Self, ConfigError> {
        Ok(Switch {
            dp: Datapath::new(cfg)?,
            upcall,
            batch: Box::new(Batch::new()),
            bufs: (0..BATCH_SIZE).map(|_| PacketBuf::new()).collect(),
            layers: [Layers::EMPTY; BATCH_SIZE],
            metas: [PacketMeta::EMPTY; BATCH_SIZE],
            tags: [0; BATCH_SIZE],
            partial: 0,
            exec: Executor::new(),
            rx: RxStats::default(),
            next_sweep_ms: None,
            recirc: Vec::new(),
        })
    }

    /// Receives `frame` on `in_port`: copies it into the next rx buffer,
    /// extracts its key and adds it to the batch. `tag` comes back with
    /// each of its outputs. A frame longer than
    /// [`crate::packet::MAX_FRAME_LEN`] is counted in
    /// [`RxStats::oversize`] and dropped (still `Ok`). Fails only when the
    /// batch is full: [`Switch::flush`] first.
    #[inline]
    pub fn push(&mut self, in_port: u32, frame: &[u8], tag: u64) -> Result<(), BatchFull> {
        self.push_offloaded(in_port, frame, tag, false)
    }

    /// [`Switch::push`] for a frame from a port with checksum offload:
    /// `csum_partial` says its TCP/UDP checksum field holds only the
    /// pseudo-header's sum (`NEEDS_CSUM` in its virtio-net header), which
    /// header rewrites then keep one ([`PacketMeta::csum_partial`]).
    #[inline]
    pub fn push_offloaded(
        &mut self,
        in_port: u32,
        frame: &[u8],
        tag: u64,
        csum_partial: bool,
    ) -> Result<(), BatchFull> {
        if self.batch.is_full() {
            return Err(BatchFull);
        }
        let i = self.batch.len();
        if self.bufs[i].load(frame).is_err() {
            self.rx.oversize += 1;
            return Ok(());
        }
        let len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        // The key is extracted straight into the batch's slot (no copy of
        // a temporary: see `extract_into`), from the frame as it arrived,
        // not from the copy just made: the same bytes, and reading the
        // copy back stalled on its stores (loads that straddle two of the
        // copy's wide stores cannot be forwarded from them; by `perf`, 14 %
        // of the receive loop's samples sat on two such loads).
        // Frames that can never be valid are dropped here, counted; the
        // check runs only on frames the straight line does not answer
        // (those it answers are well-formed IPv4). The slot's
        // connection-tracking words are zero (`push_with`) and stay so:
        // `extract_into_rx` writes only the words before them.
        let mut layers = Layers::EMPTY;
        let pushed = self.batch.push_with(len, |k| {
            let (l, short) = extract_into_rx(frame, in_port, k).ok()?;
            layers = l;
            Some(short)
        })?;
        if pushed.is_none() {
            self.rx.invalid += 1;
            return Ok(());
        }
        // Only the offsets: the metadata is built if the packet's actions
        // run packet by packet (most batches queue runs of outputs, which
        // need none).
        self.layers[i] = layers;
        self.tags[i] = tag;
        self.partial = self.partial & !(1 << i) | u32::from(csum_partial) << i;
        self.rx.packets += 1;
        self.rx.bytes += u64::from(len);
        Ok(())
    }

    /// The connection tracker this worker's `ct` actions use (the
    /// workers of one switch share one; without one, a worker makes its
    /// own on its first `ct`).
    pub fn set_conntrack(&mut self, ct: Option<std::sync::Arc<flowpath_conntrack::Conntrack>>) {
        self.exec.set_conntrack(ct);
    }

    /// The fragment reassembler this worker's `ct` actions use (shared
    /// like the tracker).
    pub fn set_ipf(&mut self, ipf: Option<std::sync::Arc<flowpath_conntrack::ipf::Ipf>>) {
        self.exec.set_ipf(ipf);
    }

    /// This worker's tracker (made now if it has none).
    pub fn conntrack(&mut self) -> std::sync::Arc<flowpath_conntrack::Conntrack> {
        self.exec.conntrack_handle()
    }

    /// Controller actions hand their packets to `tx` (see
    /// [`crate::execute::PacketIn`]).
    pub fn set_packet_in_sink(&mut self, tx: Option<crate::execute::PacketInSender>) {
        self.exec.set_packet_in_sink(tx);
    }

    /// Flow-sample actions hand their packets to `tx` (see
    /// [`crate::execute::SampledPacket`]).
    pub fn set_sample_sink(&mut self, tx: Option<crate::execute::SampleSender>) {
        self.exec.set_sample_sink(tx);
    }

    /// Runs `actions` on `frame` as if it had come in on `in_port` (an
    /// OpenFlow packet-out), delivering its outputs to `sink` and running
    /// its recirculations; call with an empty batch (between bursts).
    /// Returns false, doing nothing, when the batch is not empty or the
    /// frame is too long or not a frame.
    pub fn execute_packet<S: PortSink + ?Sized>(
        &mut self,
        in_port: u32,
        frame: &[u8],
        actions: &[flowpath_odp::DpAction],
        now_ms: u64,
        sink: &mut S,
    ) -> bool {
        if !self.batch.is_empty() || self.bufs[0].load(frame).is_err() {
            return false;
        }
        let mut key = flowpath_flow::FlowKey::default();
        let Ok((layers, _)) = extract_into_checked(frame, in_port, &mut key) else {
            return false;
        };
        let mut meta = PacketMeta::new(&key, &layers);
        self.exec.set_now(now_ms);
        self.exec
            .execute(0, &mut self.bufs[0], &mut meta, actions, 0, &key);
        self.exec.flush(&self.bufs[..1], sink);
        if self.exec.has_recirculated() {
            self.run_recirculated(now_ms, sink);
        }
        true
    }

    /// Packets waiting in the batch.
    pub fn pending(&self) -> usize {
        self.batch.len()
    }

    /// True when the batch is full.
    pub fn is_full(&self) -> bool {
        self.batch.is_full()
    }

    /// Processes the batch at time `now_ms`: classification, actions,
    /// outputs to `sink`. Returns the number of packets processed.
    pub fn flush<S: PortSink + ?Sized>(&mut self, now_ms: u64, sink: &mut S) -> usize {
        let n = self.batch.len();
        if n == 0 {
            return 0;
        }
        self.run_batch(now_ms, sink, false);
        if self.exec.has_recirculated() {
            self.run_recirculated(now_ms, sink);
        }
        self.upcall.after_batch(&mut self.dp, now_ms);
        n
    }

    /// Classifies the batch, executes its actions and delivers its
    /// outputs; empties it. (Not inlined: by callgrind, inlined into
    /// `flush` it cost 10 instructions per packet more.)
    /// `metas_set`: the packets' [`PacketMeta`] are already in `metas`
    /// (recirculated packets); else they are built from `layers` for the
    /// packets whose actions run packet by packet.
    #[inline(never)]
    fn run_batch<S: PortSink + ?Sized>(&mut self, now_ms: u64, sink: &mut S, metas_set: bool) {
        let n = self.batch.len();
        self.exec.set_now(now_ms);
        self.dp
            .process_batch(&mut self.batch, now_ms, &mut self.upcall);
        // Runs of consecutive packets of one megaflow share its actions:
        // a list of outputs is queued for the whole run at once, any other
        // list runs packet by packet.
        let mut i = 0;
        while i < n {
            let verdicts = self.batch.verdicts();
            let mut j = i + 1;
            if let Verdict::Megaflow { flow, .. } = verdicts[i] {
                while j < n && matches!(verdicts[j], Verdict::Megaflow { flow: f, .. } if f == flow)
                {
                    j += 1;
                }
            }
            let actions = self.batch.actions(i, &self.dp);
            let lens = &self.batch.sizes[i..j];
            if !self
                .exec
                .execute_outputs(i, &self.tags[i..j], lens, actions)
            {
                // Packets about to go through the connection tracker: their
                // connections' loads start a few packets ahead (a bucket
                // CT_AHEAD packets ahead, the connection it points to half
                // as far), so a large table's cache misses overlap with
                // the work on the packets before them. The thread stays
                // pinned for the tracker's lock-free reads meanwhile.
                let mut hs = [0u64; BATCH_SIZE];
                // Starts loading the connection-table bucket of batch
                // packet `$k`'s tuple in `$zone`; its hash goes to `hs[$k]`
                // and, as a hint for its first `ct`, to the executor.
                macro_rules! ct_prefetch {
                    ($k:expr, $zone:expr, $g:expr) => {{
                        let k = $k;
                        let l3 = if metas_set {
                            self.metas[k].l3
                        } else {
                            self.layers[k].l3
                        };
                        let h = if l3 == flowpath_flow::extract::NONE {
                            0
                        } else {
                            let dl_type = self.batch.keys()[k].dl_type();
                            self.exec.ct_prefetch(
                                self.bufs[k].data(),
                                usize::from(l3),
                                dl_type,
                                $zone,
                                $g,
                            )
                        };
                        if let Some(slot) = hs.get_mut(k) {
                            *slot = h;
                        }
                        self.exec.set_ct_hint(k, h);
                    }};
                }
                let ct_zone = first_ct_zone(actions);
                let _pin = ct_zone.map(|_| flowpath_conntrack::pin());
                if let (Some(zone), Some(g)) = (ct_zone, _pin.as_ref()) {
                    for k in i..j.min(i + CT_AHEAD) {
                        ct_prefetch!(k, zone, g);
                    }
                    for h in hs.get(i..j.min(i + CT_AHEAD / 2)).unwrap_or(&[]) {
                        self.exec.ct_prefetch_conn(*h, g);
                    }
                }
                for k in i..j {
                    if let (Some(zone), Some(g)) = (ct_zone, _pin.as_ref()) {
                        if k + CT_AHEAD < j {
                            ct_prefetch!(k + CT_AHEAD, zone, g);
                        }
                        if k + CT_AHEAD / 2 < j {
                            let h = hs.get(k + CT_AHEAD / 2).copied().unwrap_or(0);
                            self.exec.ct_prefetch_conn(h, g);
                        }
                    }
                    if !metas_set {
                        self.metas[k] = PacketMeta::new(&self.batch.keys()[k], &self.layers[k]);
                        self.metas[k].csum_partial = self.partial >> k & 1 != 0;
                    }
                    self.exec.execute(
                        k,
                        &mut self.bufs[k],
                        &mut self.metas[k],
                        actions,
                        self.tags[k],
                        &self.batch.keys()[k],
                    );
                }
            }
            i = j;
        }
        self.exec.flush(&self.bufs[..n], sink);
        self.batch.clear();
    }

    /// Runs the packets that `recirc(ID)` actions sent back, pass after
    /// pass (a pass's recirculations run after the whole pass), in
    /// batches: each is parsed again from its bytes, and its key gets the
    /// recirculation id and the metadata it kept (in_port, priority, mark,
    /// `dp_hash`). Its passes count in the datapath's `packets_received`
    /// and `recirculations`; past [`crate::execute::MAX_RECIRC_DEPTH`]
    /// recirculations the executor drops it.
    #[cold]
    #[inline(never)]
    fn run_recirculated<S: PortSink + ?Sized>(&mut self, now_ms: u64, sink: &mut S) {
        loop {
            let m = self.exec.swap_recirculated(&mut self.recirc);
            if m == 0 {
                return;
            }
            let mut j = 0;
            while j < m {
                while j < m && !self.batch.is_full() {
                    let r = &mut self.recirc[j];
                    j += 1;
                    let i = self.batch.len();
                    // The frame's buffer becomes the rx buffer (the old rx
                    // buffer goes to the pool): no copy.
                    std::mem::swap(&mut self.bufs[i], &mut r.buf);
                    let buf = &self.bufs[i];
                    let len = u32::try_from(buf.data().len()).unwrap_or(u32::MAX);
                    let mut layers = Layers::EMPTY;
                    let md = &r.meta;
                    // (Connection-tracking state and tunnel metadata set
                    // here go into the key's words W_CT_FIRST.. and
                    // the batch is told whether there are any: the EMC
                    // checks such packets' hits against the megaflow.)
                    // (ct_state and ct_zone live in the first words.)
                    let ct = &md.ct;
                    let ext = r.tnl_set
                        || ct.state != 0 && (ct.mark != 0 || ct.label != 0 || ct.orig.is_some());
                    let reuse = r.head_valid;
                    let pushed = self.batch.push_with_ext(len, ext, |k| {
                        if reuse {
                            // The pass before left the headers as they
                            // were: its key's, the metadata set below.
                            // (Connection-tracking fields in the head:
                            // those the metadata's do not overwrite.)
                            // (Words HEAD_WORDS.. come zero: a free slot.)
                            k.w[..HEAD_WORDS].copy_from_slice(&r.head);
                            if ct.state == 0 {
                                k.set_ct_state(0);
                                k.set_ct_zone(0);
                            }
                            if ct.state == 0 || ct.orig.is_none() {
                                k.set_ct_nw_proto(0);
                            }
                        } else {
                            layers = extract_into_zeroed_ext(buf.data(), md.in_port, k);
                        }
                        k.set_recirc_id(r.recirc_id);
                        k.set_dp_hash(md.dp_hash);
                        k.set_skb_priority(md.skb_priority);
                        k.set_pkt_mark(md.pkt_mark);
                        crate::execute::put_ct_in_key(&md.ct, k);
                        // (And its tunnel metadata, after a `tnl_pop`.)
                        if r.tnl_set {
                            k.w[flowpath_flow::key::W_TUN_FIRST..].copy_from_slice(&r.tnl);
                        }
                        Some(false)
                    });
                    if pushed.is_err() {
                        break; // (not full: checked above)
                    }
                    #[cfg(debug_assertions)]
                    if reuse {
                        check_reused_key(buf.data(), &self.batch.keys()[i]);
                    }
                    // New layers (an unchanged packet's are where they
                    // were); the metadata the earlier pass left.
                    self.metas[i] = if reuse {
                        *md
                    } else {
                        let fresh = PacketMeta::new(&self.batch.keys()[i], &layers);
                        PacketMeta {
                            l3: fresh.l3,
                            l4: fresh.l4,
                            nw_proto: fresh.nw_proto,
                            ..*md
                        }
                    };
                    self.tags[i] = r.tag;
                }
                self.dp.note_recirculations(self.batch.len() as u64);
                self.run_batch(now_ms, sink, true);
            }
        }
    }

    /// Receives `frames` (each with its tag) on `in_port` and processes
    /// them in batches of [`BATCH_SIZE`], all at time `now_ms`, flushing
    /// at the end. Returns the number of frames taken.
    pub fn process<'f, I, S>(&mut self, in_port: u32, frames: I, now_ms: u64, sink: &mut S) -> usize
    where
        I: IntoIterator<Item = (&'f [u8], u64)>,
        S: PortSink + ?Sized,
    {
        let mut n = 0;
        for (frame, tag) in frames {
            if self.batch.is_full() {
                self.flush(now_ms, sink);
            }
            // The batch has room: it was just flushed if it was full.
            let _ = self.push(in_port, frame, tag);
            n += 1;
        }
        self.flush(now_ms, sink);
        n
    }

    /// Periodic work between batches: lets the slow path revalidate what
    /// its own state changes made stale ([`Upcall::after_batch`]: MAC
    /// learning), and every [`SWEEP_INTERVAL_MS`] of the caller's clock
    /// removes the megaflows idle for longer than the configured
    /// `max_idle_ms`. Returns how many idle megaflows were removed.
    pub fn housekeeping(&mut self, now_ms: u64) -> usize {
        self.upcall.after_batch(&mut self.dp, now_ms);
        match self.next_sweep_ms {
            Some(t) if now_ms < t => 0,
            None => {
                self.next_sweep_ms = Some(now_ms + SWEEP_INTERVAL_MS);
                0
            }
            Some(_) => {
                self.next_sweep_ms = Some(now_ms + SWEEP_INTERVAL_MS);
                let max_idle = self.dp.config().max_idle_ms;
                self.dp.expire_idle(now_ms, max_idle)
            }
        }
    }

    /// Adds processing cycles measured by the caller around a batch.
    pub fn add_processing_cycles(&mut self, cycles: u64) {
        self.dp.add_processing_cycles(cycles);
    }

    /// The datapath (caches, megaflows, pmd statistics).
    pub fn datapath(&self) -> &Datapath {
        &self.dp
    }

    /// The slow path.
    pub fn upcall(&self) -> &U {
        &self.upcall
    }

    // The control commands: what the control path asks of a worker
    // between batches. The worker's caches and tables are reached only
    // through these (and the read-only accessors above), never by handing
    // out the datapath itself.

    /// Every live megaflow (see [`Datapath::dump`]).
    pub fn dump(&self) -> Vec<DumpEntry> {
        self.dp.dump()
    }

    /// The `dpctl/dump-flows` text, `used` relative to `now_ms`.
    pub fn dump_flows(&self, now_ms: u64) -> String {
        self.dp.dump_flows(now_ms)
    }

    /// Removes these megaflows (stale handles are ignored); returns how
    /// many went.
    pub fn delete_megaflows(&mut self, refs: &[MegaflowRef]) -> usize {
        self.dp.delete_megaflows(refs)
    }

    /// Removes every megaflow and cache entry (`dpctl/del-flows`);
    /// returns how many megaflows there were.
    pub fn delete_all_megaflows(&mut self) -> usize {
        let n = self.dp.megaflow_count();
        self.dp.flush();
        n
    }

    /// The current configuration.
    pub fn config(&self) -> &Config {
        self.dp.config()
    }

    /// Applies a configuration (rebuilding only what changed).
    pub fn set_config(&mut self, cfg: Config) -> Result<(), ConfigError> {
        self.dp.set_config(cfg)
    }

    /// Sets the flow limit alone (the revalidator's dynamic limit).
    pub fn set_flow_limit(&mut self, limit: usize) -> Result<(), ConfigError> {
        let mut cfg = self.dp.config().clone();
        cfg.flow_limit = limit;
        self.dp.set_config(cfg)
    }

    /// Tells the self-tuning cascade the cycles one batch took (as a PMD
    /// measures them around its bursts).
    pub fn note_batch_cycles(&mut self, cycles: u64) {
        self.dp.note_batch_cycles(cycles);
    }

    /// The pmd-stats-show view of the datapath's counters.
    pub fn report(&self) -> PmdStatsReport {
        self.dp.report()
    }

    /// Receive counters.
    pub fn rx_stats(&self) -> &RxStats {
        &self.rx
    }

    /// Action execution counters.
    pub fn exec_stats(&self) -> &ExecStats {
        self.exec.stats()
    }

    /// Output counters per port, in order of each port's first output.
    pub fn port_stats(&self) -> &[PortStats] {
        self.exec.port_stats()
    }

    /// The slow path and the datapath together, between batches: what a
    /// slow path needs to revalidate the megaflows after its own state
    /// changed (new rules). Not for the packet path.
    pub fn upcall_and_datapath(&mut self) -> (&mut U, &mut Datapath) {
        (&mut self.upcall, &mut self.dp)
    }

    /// Zeroes every counter (datapath, rx, execution); caches and
    /// megaflows stay.
    pub fn clear_stats(&mut self) {
        self.dp.clear_stats();
        self.exec.clear_stats();
        self.rx = RxStats::default();
    }
}

/// The zone of the first `ct` of a list of datapath actions, if any: the
/// batch prefetches those packets' connections.
#[inline]
fn first_ct_zone(actions: &[flowpath_odp::DpAction]) -> Option<u16> {
    actions.iter().find_map(|a| match a {
        flowpath_odp::DpAction::Ct(ct) => Some(ct.zone),
        _ => None,
    })
}

/// How many packets ahead of the one being executed the connection
/// tracker's loads start (see `run_batch`).
const CT_AHEAD: usize = 4;

/// Debug builds: a key a recirculated packet reuses from its pass before
/// is what extraction makes of its frame (metadata, connection-tracking
/// and tunnel fields aside).
#[cfg(debug_assertions)]
fn check_reused_key(frame: &[u8], reused: &flowpath_flow::FlowKey) {
    let mut extracted = flowpath_flow::FlowKey::default();
    let _ = flowpath_flow::extract::extract_into(frame, reused.in_port(), &mut extracted);
    let mut reused = *reused;
    for k in [&mut extracted, &mut reused] {
        k.set_recirc_id(0);
        k.set_dp_hash(0);
        k.set_skb_priority(0);
        k.set_pkt_mark(0);
        k.set_ct_state(0);
        k.set_ct_zone(0);
        k.set_ct_nw_proto(0);
        k.w[HEAD_WORDS..].fill(0);
    }
    assert_eq!(reused.w, extracted.w, "a recirculated packet's reused key");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_hashes_are_packet_hashes() {
        // Frames the straight-line extraction answers (the batch hashes
        // their keys without reading words 5..16) and others: every
        // packet's batch hash is `packet_hash` of its key, which the
        // caches recompute when they insert.
        let drop_all =
            |_: &flowpath_flow::FlowKey| Ok((Vec::new(), flowpath_flow::FlowMask::catchall()));
        let mut sw = Switch::new(Config::default(), drop_all).unwrap();
        let mut frames: Vec<Vec<u8>> = Vec::new();
        for i in 0..20u8 {
            let mut f = vec![0u8; 64];
            f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, i]);
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            f[14] = if i % 5 == 0 { 0x46 } else { 0x45 };
            f[16..18].copy_from_slice(&50u16.to_be_bytes());
            f[23] = if i % 2 == 0 { 17 } else { 6 };
            f[26..30].copy_from_slice(&[10, 0, 0, i]);
            f[46] = 0x50;
            if i % 7 == 0 {
                f[12..14].copy_from_slice(&[0x86, 0xdd]);
            }
            frames.push(f);
        }
        for (i, f) in frames.iter().enumerate() {
            sw.push(1 + i as u32 % 3, f, 0).unwrap();
        }
        let b = &sw.batch;
        assert_eq!(b.len(), frames.len());
        for (k, h) in b.keys().iter().zip(b.hashes()) {
            assert_eq!(*h, crate::hash::packet_hash(k), "{k:?}");
        }
    }
}
