//! The worker loop: frames in, cascade, actions, frames out.
//!
//! What: [`Switch`] is one datapath worker with everything around the
//! cascade — rx buffers, extraction, the [`Datapath`], the slow path (any
//! [`Upcall`], by default the rule tables' [`SlowPath`]), action execution
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
//! [`SWEEP_INTERVAL_MS`], with the configured `max-idle`), publish new
//! rules ([`Switch::publish_rules`], which revalidates the megaflows) and
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
use crate::execute::{ExecStats, Executor, PacketMeta, PortSink, PortStats, Recirculated};
use crate::packet::PacketBuf;
use crate::pipeline::Datapath;
use crate::slowpath::SlowPath;
use crate::stats::PmdStatsReport;
use crate::upcall::Upcall;
use flowpath_flow::extract::{extract_into, extract_into_checked, Layers};
use flowpath_ofproto::tables::RuleTables;
use std::sync::Arc;

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
pub struct Switch<U: Upcall = SlowPath> {
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
    exec: Executor,
    rx: RxStats,
    next_sweep_ms: Option<u64>,
    /// Recirculated packets being run (swapped with the executor's pool).
    recirc: Vec<Recirculated>,
}

impl Switch<SlowPath> {
    /// A worker whose slow path is `tables`.
    pub fn with_rules(cfg: Config, tables: Arc<RuleTables>) -> Result<Self, ConfigError> {
        Switch::new(cfg, SlowPath::new(tables))
    }

    /// Publishes a new rule version (between batches): megaflows whose
    /// translation changed are removed ([`crate::slowpath::revalidate`]), then upcalls use
    /// the new tables. Returns how many megaflows were removed.
    pub fn publish_rules(&mut self, tables: Arc<RuleTables>) -> usize {
        // The new tables with the flows `learn` made.
        self.upcall.set_tables(tables);
        let merged = self.upcall.tables().clone();
        self.upcall.revalidate(&mut self.dp, &merged)
    }
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
        // (those it answers are well-formed IPv4).
        let mut layers = Layers::EMPTY;
        let pushed = self.batch.push_with(len, |k| {
            let (l, short) = extract_into_checked(frame, in_port, k).ok()?;
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
        self.rx.packets += 1;
        self.rx.bytes += u64::from(len);
        Ok(())
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
                for k in i..j {
                    if !metas_set {
                        self.metas[k] = PacketMeta::new(&self.batch.keys()[k], &self.layers[k]);
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
                    let md = r.meta;
                    let pushed = self.batch.push_with(len, |k| {
                        layers = extract_into(buf.data(), md.in_port, k);
                        k.set_recirc_id(r.recirc_id);
                        k.set_dp_hash(md.dp_hash);
                        k.set_skb_priority(md.skb_priority);
                        k.set_pkt_mark(md.pkt_mark);
                        Some(false)
                    });
                    if pushed.is_err() {
                        break; // (not full: checked above)
                    }
                    // New layers; the metadata the earlier pass left.
                    let fresh = PacketMeta::new(&self.batch.keys()[i], &layers);
                    self.metas[i] = PacketMeta {
                        l3: fresh.l3,
                        l4: fresh.l4,
                        nw_proto: fresh.nw_proto,
                        ..md
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

    /// The datapath, mutable (configuration, flushes, expiry).
    pub fn datapath_mut(&mut self) -> &mut Datapath {
        &mut self.dp
    }

    /// The slow path.
    pub fn upcall(&self) -> &U {
        &self.upcall
    }

    /// The slow path, mutable.
    pub fn upcall_mut(&mut self) -> &mut U {
        &mut self.upcall
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

    /// Zeroes every counter (datapath, rx, execution); caches and
    /// megaflows stay.
    pub fn clear_stats(&mut self) {
        self.dp.clear_stats();
        self.exec.clear_stats();
        self.rx = RxStats::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::execute::{NullSink, Outputs};
    use flowpath_ofproto::parse::parse_rules;

    fn rules(text: &str) -> Arc<RuleTables> {
        Arc::new(RuleTables::new(parse_rules(text, None).unwrap(), &[]))
    }

    /// An Ethernet + IPv4 + UDP frame with a zero UDP checksum.
    fn udp_frame(dst_port: u16, len: usize) -> Vec<u8> {
        let mut f = vec![0u8; len.max(42)];
        f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let ip_len = (f.len() - 14) as u16;
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
        ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
        let c = flowpath_wire::checksum::checksum(ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f[36..38].copy_from_slice(&dst_port.to_be_bytes());
        f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
        f
    }

    #[test]
    fn frames_in_outputs_out_with_tags_and_counters() {
        let t = rules(
            "priority=10,udp,tp_dst=53,actions=output:2\n\
             priority=10,udp,tp_dst=54,actions=output:3,output:2\n\
             priority=0,actions=drop\n",
        );
        let mut sw = Switch::with_rules(Config::default(), t).unwrap();
        let frames: Vec<Vec<u8>> = (0..70)
            .map(|i| udp_frame([53, 54, 99][i % 3], 60 + i))
            .collect();
        let mut got: Vec<(u32, u64, usize)> = Vec::new();
        let mut sink = |port: u32, out: Outputs<'_>| {
            for p in out.iter() {
                got.push((port, p.tag, p.data.len()));
            }
        };
        let n = sw.process(
            1,
            frames.iter().enumerate().map(|(i, f)| (&f[..], i as u64)),
            5,
            &mut sink,
        );
        assert_eq!(n, 70);
        assert_eq!(sw.pending(), 0);
        // Port 2 gets frames 0, 1, 3, 4, ... in order; port 3 gets 1, 4, ...
        let p2: Vec<u64> = got.iter().filter(|g| g.0 == 2).map(|g| g.1).collect();
        let p3: Vec<u64> = got.iter().filter(|g| g.0 == 3).map(|g| g.1).collect();
        assert_eq!(p2, (0..70).filter(|i| i % 3 != 2).collect::<Vec<_>>());
        assert_eq!(p3, (0..70).filter(|i| i % 3 == 1).collect::<Vec<_>>());
        assert!(got.iter().all(|g| g.2 == 60 + g.1 as usize));
        let r = sw.report();
        assert_eq!(r.packets_received, 70);
        assert_eq!(r.miss_with_success_upcall, 3);
        assert_eq!(sw.rx_stats().packets, 70);
        assert_eq!(sw.exec_stats().dropped, 23);
        assert_eq!(sw.exec_stats().output_packets, 47 + 23);
        let ports: Vec<(u32, u64)> = sw
            .port_stats()
            .iter()
            .map(|p| (p.port, p.packets))
            .collect();
        assert_eq!(ports, vec![(2, 47), (3, 23)]);
    }

    #[test]
    fn batch_hashes_are_packet_hashes() {
        // Frames the straight-line extraction answers (the batch hashes
        // their keys without reading words 5..16) and others: every
        // packet's batch hash is `packet_hash` of its key, which the
        // caches recompute when they insert.
        let mut sw =
            Switch::with_rules(Config::default(), rules("priority=0,actions=drop\n")).unwrap();
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

    #[test]
    fn never_valid_frames_cost_no_upcall() {
        let mut sw = Switch::with_rules(Config::default(), rules("actions=output:2\n")).unwrap();
        let mut sink = NullSink::default();
        let runt = [0u8; 10];
        let mut bad_ihl = udp_frame(1, 60);
        bad_ihl[14] = 0x42;
        let good = udp_frame(1, 60);
        sw.process(
            1,
            [(&runt[..], 0), (&bad_ihl[..], 1), (&good[..], 2)],
            0,
            &mut sink,
        );
        assert_eq!(sw.rx_stats().invalid, 2);
        assert_eq!(sw.report().packets_received, 1);
        assert_eq!(sw.report().miss_with_success_upcall, 1);
        assert_eq!(sink.packets, 1);
    }

    #[test]
    fn oversize_frames_are_counted_not_processed() {
        let mut sw = Switch::with_rules(Config::default(), rules("actions=output:2\n")).unwrap();
        let big = vec![0u8; crate::packet::MAX_FRAME_LEN + 1];
        let jumbo = udp_frame(1, 9000);
        let mut sink = NullSink::default();
        sw.process(1, [(&big[..], 0), (&jumbo[..], 1)], 0, &mut sink);
        assert_eq!(sw.rx_stats().oversize, 1);
        assert_eq!(sw.report().packets_received, 1);
        assert_eq!((sink.packets, sink.bytes), (1, 9000));
    }

    #[test]
    fn housekeeping_expires_idle_megaflows() {
        let cfg = Config {
            max_idle_ms: 1000,
            ..Config::default()
        };
        let mut sw = Switch::with_rules(cfg, rules("udp,actions=output:2\n")).unwrap();
        let mut sink = NullSink::default();
        let f = udp_frame(1, 60);
        sw.process(1, [(&f[..], 0)], 0, &mut sink);
        assert_eq!(sw.datapath().megaflow_count(), 1);
        assert_eq!(sw.housekeeping(0), 0);
        assert_eq!(sw.housekeeping(600), 0);
        assert_eq!(sw.housekeeping(1100), 1);
        assert_eq!(sw.datapath().megaflow_count(), 0);
    }

    #[test]
    fn upcall_budget_is_per_port_and_per_millisecond() {
        let cfg = Config {
            megaflows: false,
            upcall_budget_per_ms: 4,
            ..Config::default()
        };
        let mut sw = Switch::with_rules(cfg, rules("udp,actions=output:9\n")).unwrap();
        let mut sink = NullSink::default();
        let flood: Vec<Vec<u8>> = (0..32).map(|i| udp_frame(1000 + i, 60)).collect();
        let frames = |port_base: u16| -> Vec<Vec<u8>> {
            (0..32).map(|i| udp_frame(port_base + i, 60)).collect()
        };
        // 32 new flows on port 1 and 32 on port 2 in the same millisecond:
        // 4 upcalls each, the others dropped without one.
        sw.process(1, flood.iter().map(|f| (&f[..], 0)), 7, &mut sink);
        let p2 = frames(2000);
        sw.process(2, p2.iter().map(|f| (&f[..], 0)), 7, &mut sink);
        let st = *sw.datapath().stats();
        assert_eq!(st.miss_with_success_upcall, 8);
        assert_eq!(st.upcall_budget_drops, 56);
        assert_eq!(st.miss_with_failed_upcall, 56);
        assert_eq!(sink.packets, 8);
        // The next millisecond has a fresh budget; installed flows hit.
        sw.process(1, flood.iter().map(|f| (&f[..], 0)), 8, &mut sink);
        let st = *sw.datapath().stats();
        assert_eq!(st.miss_with_success_upcall, 12);
        assert_eq!(st.upcall_budget_drops, 56 + 24);
        assert_eq!(st.decided(), st.packets_received);
    }

    /// Tuple space explosion in miniature: ports differing from the allowed
    /// one at each bit make port-prefix tracking produce a mask per bit.
    #[test]
    fn mask_budget_bounds_subtables_and_keeps_actions() {
        let attack: Vec<Vec<u8>> = (0..16).map(|b| udp_frame(80 ^ (1 << b), 60)).collect();
        let count = |budget: usize| {
            let cfg = Config {
                mask_budget: budget,
                ..Config::default()
            };
            let t = rules("priority=10,udp,tp_dst=80,actions=output:2\npriority=0,actions=drop\n");
            let mut sw = Switch::with_rules(cfg, t).unwrap();
            let mut sink = NullSink::default();
            sw.process(1, attack.iter().map(|f| (&f[..], 0)), 0, &mut sink);
            let legit = udp_frame(80, 60);
            sw.process(1, [(&legit[..], 0)], 1, &mut sink);
            // Replayed: every packet now hits an installed megaflow.
            sw.process(1, attack.iter().map(|f| (&f[..], 0)), 2, &mut sink);
            let subtables = sw.datapath().dpcls(1).map_or(0, |c| c.n_subtables());
            (
                subtables,
                sw.datapath().stats().masks_widened,
                sink.packets,
                *sw.datapath().stats(),
            )
        };
        let (free, w0, out0, _) = count(0);
        assert!(free >= 16, "the attack makes a mask per bit: {free}");
        assert_eq!(w0, 0);
        let (bounded, w, out, st) = count(4);
        assert!(bounded <= 5, "{bounded} subtables with a budget of 4");
        assert!(w > 0);
        assert_eq!((out, out0), (1, 1), "only the allowed port is output");
        assert_eq!(
            st.miss_with_success_upcall, 17,
            "each packet installed once"
        );
    }

    #[test]
    fn publish_rules_revalidates() {
        let mut sw =
            Switch::with_rules(Config::default(), rules("udp,actions=output:2\n")).unwrap();
        let f = udp_frame(1, 60);
        let mut last_port = 0;
        let mut sink = |p: u32, _: Outputs<'_>| last_port = p;
        sw.process(1, [(&f[..], 0)], 0, &mut sink);
        assert_eq!(sw.publish_rules(rules("udp,actions=output:7\n")), 1);
        sw.process(1, [(&f[..], 0)], 1, &mut sink);
        assert_eq!(last_port, 7);
    }
}
