//! The replay loop: a workload through the whole datapath, from memory, on
//! the calling thread.
//!
//! What one run does, per configuration: a fresh worker
//! ([`flowpath_datapath::switch::Switch`], the same glue `flowpath run`
//! uses); then, as a PMD thread polls its rx queues, it takes bursts of
//! [`BATCH_SIZE`] frames from each input port in turn (round robin; a
//! port's frames are a ring, as DPDK `net_pcap` with `infinite_rx=1`). The
//! switch copies each frame into an rx buffer (what `net_pcap` does into a
//! fresh mbuf, or a NIC by DMA), extracts its flow key and hash, classifies
//! the batch (`Datapath::process_batch`, upcalls translated by the rule
//! tables inline, as the PMD does) and executes the actions; outputs go to
//! a counting sink (OVS's `net_null` port). Between bursts it does its
//! housekeeping (idle expiry). First for the warm-up interval, then, after
//! the statistics are cleared, for the measured interval.
//!
//! Cycles: the whole loop is "processing" (the source never runs dry, so
//! there is no idle time, as in the harness where idle ≈ 0 %). Each
//! measured interval is timed with the TSC (`flowpath_io::tsc`), so
//! `avg_processing_cycles_per_packet` is in the unit of OVS's
//! `pmd-stats-show`, and Mpps = packets × TSC rate / cycles, as the OVS
//! harness computes it; `mpps_wall` is the same count over wall-clock time,
//! as a cross-check (the harness's `Mpps(w)`).
//!
//! [`run_interleaved`] does the same for several configurations at once,
//! side by side: one worker each, taking turns (see there).
//!
//! Time is read here, by the benchmark, never by the datapath: `now_ms`
//! is passed in (subtable re-ranking and the CD's adaptation use it).
//!
//! Threads: runs on the caller's thread; pin it first
//! ([`flowpath_io::affinity`]).

use crate::grid::BenchConfig;
use crate::result::AutoChoice;
use crate::result::BenchResult;
use crate::workload::Workload;
use flowpath_datapath::execute::NullSink;
use flowpath_datapath::switch::Switch;
use flowpath_datapath::PmdStats;
use flowpath_datapath::{ConfigError, BATCH_SIZE};
use flowpath_io::tsc::{rdtsc, UNIT};
use flowpath_ofproto::normal::{Bridge, MacTable, PortVlans};
use flowpath_slowpath::SlowPath;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Default warm-up: just over one second, so that the datapath's periodic
/// decisions, which it takes once per second of the time it is given
/// (subtable re-ranking, the Cuckoo Distributor's on/off switch), have been
/// taken once before the measurement starts.
pub const DEFAULT_WARMUP: Duration = Duration::from_millis(1100);
/// Default measured interval.
pub const DEFAULT_DURATION: Duration = Duration::from_millis(1500);
/// TSC rate assumed when none can be detected (this project's reference
/// machine).
pub const FALLBACK_TSC_MHZ: f64 = 2600.0;

/// How long to run, and how to convert time to cycles.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunOptions {
    /// Warm-up before the statistics are cleared.
    pub warmup: Duration,
    /// Length of one measured interval.
    pub duration: Duration,
    /// Measured intervals, back to back after one warm-up (as the OVS
    /// harness's `-r`); `mpps` is their mean.
    pub intervals: u32,
    /// TSC rate in MHz.
    pub tsc_mhz: f64,
    /// Bytes between the starts of stored frames (0 = back to back; see
    /// [`Workload::set_frame_stride`]).
    pub frame_stride: usize,
    /// Rounds over the whole plan ([`crate::run_plan`] reports the median
    /// round of each run).
    pub rounds: u32,
    /// `Some(slice)`: the configurations of a workload run side by side,
    /// taking turns of `slice` ([`run_interleaved`]), instead of one after
    /// the other.
    pub interleave: Option<Duration>,
    /// Workers at once, as PMD threads ([`crate::pmds::run_pmds`]; 1 =
    /// the calling thread alone).
    pub pmds: u32,
    /// With several workers: (the CPU worker 0 is pinned to, the number
    /// of CPUs) to pin the others ([`crate::pmds::worker_cpu`]); `None`
    /// leaves them unpinned.
    pub pin: Option<(usize, usize)>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            warmup: DEFAULT_WARMUP,
            duration: DEFAULT_DURATION,
            intervals: 1,
            tsc_mhz: detect_tsc_mhz().unwrap_or(FALLBACK_TSC_MHZ),
            frame_stride: 0,
            rounds: 1,
            interleave: None,
            pmds: 1,
            pin: None,
        }
    }
}

/// The TSC rate as the kernel reported it at boot (`tsc: Detected X MHz`
/// in the kernel log, as the OVS harness reads it), else the first `cpu
/// MHz` of `/proc/cpuinfo`.
pub fn detect_tsc_mhz() -> Option<f64> {
    let from_dmesg = std::process::Command::new("dmesg")
        .output()
        .ok()
        .and_then(|o| {
            let text = String::from_utf8_lossy(&o.stdout).to_string();
            text.lines()
                .rev()
                .find_map(|l| l.split("tsc: Detected ").nth(1))
                .and_then(|r| r.split_whitespace().next())
                .and_then(|v| v.parse::<f64>().ok())
        });
    if UNIT != "cycles" {
        // No TSC: the counter counts nanoseconds.
        return Some(1000.0);
    }
    from_dmesg.or_else(|| {
        let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
        text.lines()
            .find(|l| l.starts_with("cpu MHz"))
            .and_then(|l| l.split(':').nth(1))
            .and_then(|v| v.trim().parse().ok())
    })
}

/// The state of one replay: the worker ([`Switch`]: rx buffers, extract,
/// cascade, slow path, action execution), the output sink, port cursors.
struct Replay<'w> {
    w: &'w Workload,
    sw: Switch<SlowPath>,
    sink: NullSink,
    cursors: Vec<usize>,
    port: usize,
    /// TSC at the end of the previous burst.
    last_tsc: u64,
    /// Time this replay has run ([`Replay::run_for`]: its clock, which
    /// stands still while other replays take their turns).
    own: Duration,
}

impl<'w> Replay<'w> {
    fn new(w: &'w Workload, cfg: &BenchConfig) -> Result<Self, ConfigError> {
        Ok(Replay {
            w,
            // NORMAL learns into a table of this replay's own, flooding
            // to LOCAL too, as an OVS bridge.
            sw: Switch::new(
                cfg.dp.clone(),
                SlowPath::with_bridge(
                    Arc::clone(&w.tables),
                    Arc::new(Bridge::new(MacTable::default(), PortVlans::default(), true)),
                ),
            )?,
            sink: NullSink::default(),
            cursors: vec![0; w.ports.len()],
            port: 0,
            last_tsc: rdtsc(),
            own: Duration::ZERO,
        })
    }

    /// One rx burst from the next port: copy, extract, classify, execute.
    #[inline(never)]
    fn burst(&mut self, now_ms: u64) {
        let pi = self.port;
        self.port = if pi + 1 == self.w.ports.len() {
            0
        } else {
            pi + 1
        };
        let port = &self.w.ports[pi];
        let n_frames = port.len();
        let mut cur = self.cursors[pi];
        for _ in 0..BATCH_SIZE {
            // Cannot fail: the batch is flushed after BATCH_SIZE pushes.
            let _ = self.sw.push(port.in_port, port.frame(cur), 0);
            cur += 1;
            if cur == n_frames {
                cur = 0;
            }
        }
        self.cursors[pi] = cur;
        self.sw.flush(now_ms, &mut self.sink);
        self.sw.housekeeping(now_ms);
        // Per burst, as a PMD measures them, for auto (the statistics
        // get the whole interval's cycles at the end).
        let t = rdtsc();
        self.sw.note_batch_cycles(t.wrapping_sub(self.last_tsc));
        self.last_tsc = t;
    }

    /// Bursts until `until` has passed; returns the time of the last
    /// clock read. `t0` is the start of the run (for `now_ms`).
    fn run_until(&mut self, t0: Instant, until: Instant) -> Instant {
        loop {
            let now = Instant::now();
            if now >= until {
                return now;
            }
            let now_ms = now.duration_since(t0).as_millis() as u64;
            self.burst(now_ms);
        }
    }
}

impl Replay<'_> {
    /// What auto chose, with `second-level = auto`.
    fn auto_choice(&self) -> Option<AutoChoice> {
        self.sw.datapath().auto_report().map(|a| AutoChoice {
            arm: a.arm.name().to_string(),
            switches: a.switches,
            costs: a.costs,
        })
    }

    /// Bursts for `d` of this replay's own time: `now_ms` is the time it
    /// has run, so a replay that takes turns with others sees one
    /// continuous clock (auto's exploration gaps, the re-ranking interval
    /// and idle expiry are in the time the worker actually ran).
    fn run_for(&mut self, d: Duration) {
        let start = Instant::now();
        // The previous burst of this replay ended before the other
        // replays' turns: those cycles are not this one's batch's.
        self.last_tsc = rdtsc();
        loop {
            let e = start.elapsed();
            if e >= d {
                self.own += e;
                return;
            }
            self.burst((self.own + e).as_millis() as u64);
        }
    }
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The configuration is invalid.
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// The workload has no input port.
    #[error("workload {0} has no packets")]
    Empty(String),
    /// A worker of `--pmds` could not be pinned.
    #[error("worker {worker}: cannot pin to CPU {cpu}: {reason}")]
    Pin {
        /// The worker.
        worker: usize,
        /// The CPU.
        cpu: usize,
        /// The OS's reason.
        reason: String,
    },
}

/// Replays `w` under `cfg`: warm-up, then the measured interval. See the
/// module documentation.
pub fn run(w: &Workload, cfg: &BenchConfig, opts: &RunOptions) -> Result<BenchResult, RunError> {
    if w.ports.is_empty() || w.ports.iter().any(|p| p.is_empty()) {
        return Err(RunError::Empty(w.spec.name()));
    }
    let mut r = Replay::new(w, cfg)?;
    let t0 = Instant::now();
    let warm_end = r.run_until(t0, t0 + opts.warmup);
    r.sw.clear_stats();
    r.sink = NullSink::default();
    r.last_tsc = rdtsc();
    let cpu0 = flowpath_io::affinity::thread_cpu_time_ns();
    let start = Instant::now().max(warm_end);
    let tsc_start = rdtsc();
    let (mut interval_mpps, mut wall_mpps) = (Vec::new(), Vec::new());
    let (mut t, mut tsc) = (start, tsc_start);
    let mut seen = 0u64;
    for _ in 0..opts.intervals.max(1) {
        let end = r.run_until(t0, t + opts.duration);
        let tsc_end = rdtsc();
        let received = r.sw.report().packets_received;
        let pkts = (received - seen) as f64;
        let cycles = tsc_end.saturating_sub(tsc);
        if cycles > 0 {
            interval_mpps.push(pkts * opts.tsc_mhz / cycles as f64);
        }
        let secs = end.duration_since(t).as_secs_f64();
        if secs > 0.0 {
            wall_mpps.push(pkts / secs / 1e6);
        }
        (seen, t, tsc) = (received, end, tsc_end);
    }
    let cpu1 = flowpath_io::affinity::thread_cpu_time_ns();
    let elapsed = t.duration_since(start);
    let secs = elapsed.as_secs_f64();
    r.sw.add_processing_cycles(tsc.saturating_sub(tsc_start));
    let stats = r.sw.report();
    let mean = |v: &[f64]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let mpps = mean(&interval_mpps);
    let mpps_wall = mean(&wall_mpps);
    let oncpu_pct = match (cpu0, cpu1) {
        (Some(a), Some(b)) if elapsed.as_nanos() > 0 => {
            Some(100.0 * (b.saturating_sub(a)) as f64 / elapsed.as_nanos() as f64)
        }
        _ => None,
    };
    Ok(BenchResult {
        workload: w.spec.name(),
        config: cfg.label.clone(),
        mpps,
        stats,
        mpps_wall,
        flows: w.spec.flow_count(),
        family: w.spec.family(),
        input_ports: w.ports.len(),
        pcap_packets: w.packet_count(),
        measured_s: secs,
        mpps_intervals: interval_mpps,
        mpps_rounds: Vec::new(),
        mpps_by_round: Vec::new(),
        tx_packets: r.sink.packets,
        oncpu_pct,
        tsc_mhz: opts.tsc_mhz,
        frame_stride: opts.frame_stride,
        auto: r.auto_choice(),
        mpps_per_pmd: Vec::new(),
    })
}

/// What one replay measured over the turns of [`run_interleaved`].
struct Measured {
    /// The counters' deltas over the measured parts, with the TSC cycles
    /// of those parts as `processing_cycles`.
    stats: PmdStats,
    tx_packets: u64,
    wall: Duration,
    /// On-CPU time of the measured parts, if every read of it worked.
    cpu_ns: Option<u64>,
    interval_mpps: Vec<f64>,
}

/// Mpps of `s`'s packets (recirculations not counted) over its
/// `processing_cycles` at `tsc_mhz`, as [`run`] computes it.
fn mpps_of(s: &PmdStats, tsc_mhz: f64) -> f64 {
    let pkts = s.packets_received - s.recirculations.min(s.packets_received);
    if s.processing_cycles == 0 {
        0.0
    } else {
        pkts as f64 * tsc_mhz / s.processing_cycles as f64
    }
}

/// Runs every configuration of `cfgs` on `w` side by side, on the calling
/// thread: one worker per configuration, all alive at once, taking turns
/// of `slice` (their order rotating from turn to turn), first for the
/// warm-up, then until each has `opts.intervals` x `opts.duration` of
/// measured time. The first tenth of every turn is run but not measured:
/// it reloads the caches the other workers' turns evicted. What each
/// result counts (tiers, cycles, packets sent) is the measured parts only.
///
/// Why: on a shared machine the speed of a core moves by ±30 % from one
/// second to the next (clock boost, neighbours), so two configurations
/// measured one after the other differ by that much even when they run
/// the same code; alternating them every few tens of milliseconds exposes
/// both to the same spells, and their ratio becomes resolvable. Each
/// worker's clock runs only during its own turns.
pub fn run_interleaved(
    w: &Workload,
    cfgs: &[BenchConfig],
    opts: &RunOptions,
    slice: Duration,
) -> Result<Vec<BenchResult>, RunError> {
    if w.ports.is_empty() || w.ports.iter().any(|p| p.is_empty()) {
        return Err(RunError::Empty(w.spec.name()));
    }
    let mut rs = cfgs
        .iter()
        .map(|c| Replay::new(w, c))
        .collect::<Result<Vec<_>, _>>()?;
    let n = rs.len();
    if n == 0 {
        return Ok(Vec::new());
    }
    let slice = slice.max(Duration::from_millis(1));
    let skip = slice / 10;
    let mut turn = 0usize;
    // Warm-up, in turns too, so that every worker's tables are in the
    // state they will be in while measured.
    while rs.iter().any(|r| r.own < opts.warmup) {
        for j in 0..n {
            let r = &mut rs[(j + turn) % n];
            let left = opts.warmup.saturating_sub(r.own);
            if !left.is_zero() {
                r.run_for(left.min(slice));
            }
        }
        turn += 1;
    }
    for r in &mut rs {
        r.sw.clear_stats();
        r.sink = NullSink::default();
    }
    let mut m: Vec<Measured> = (0..n)
        .map(|_| Measured {
            stats: PmdStats::default(),
            tx_packets: 0,
            wall: Duration::ZERO,
            cpu_ns: Some(0),
            interval_mpps: Vec::new(),
        })
        .collect();
    for _ in 0..opts.intervals.max(1) {
        // This interval's counters and measured time, per worker.
        let mut iv = vec![(PmdStats::default(), Duration::ZERO); n];
        while iv.iter().any(|(_, d)| *d < opts.duration) {
            for j in 0..n {
                let i = (j + turn) % n;
                if iv[i].1 >= opts.duration {
                    continue;
                }
                let r = &mut rs[i];
                r.run_for(skip);
                let before = *r.sw.datapath().stats();
                let tx0 = r.sink.packets;
                let cpu0 = flowpath_io::affinity::thread_cpu_time_ns();
                let t0 = Instant::now();
                let tsc0 = rdtsc();
                r.run_for(slice - skip);
                let tsc1 = rdtsc();
                let wall = t0.elapsed();
                let cpu1 = flowpath_io::affinity::thread_cpu_time_ns();
                let mut d = r.sw.datapath().stats().since(&before);
                d.processing_cycles = tsc1.saturating_sub(tsc0);
                let mi = &mut m[i];
                mi.stats.add(&d);
                mi.tx_packets += r.sink.packets - tx0;
                mi.wall += wall;
                mi.cpu_ns = match (mi.cpu_ns, cpu0, cpu1) {
                    (Some(acc), Some(a), Some(b)) => Some(acc + b.saturating_sub(a)),
                    _ => None,
                };
                iv[i].0.add(&d);
                iv[i].1 += wall;
            }
            turn += 1;
        }
        for (mi, (s, _)) in m.iter_mut().zip(iv) {
            mi.interval_mpps.push(mpps_of(&s, opts.tsc_mhz));
        }
    }
    let mut out = Vec::with_capacity(n);
    for ((r, cfg), mi) in rs.iter().zip(cfgs).zip(m) {
        let stats = mi.stats.report(r.sw.datapath().megaflow_count());
        let secs = mi.wall.as_secs_f64();
        out.push(BenchResult {
            workload: w.spec.name(),
            config: cfg.label.clone(),
            mpps: mpps_of(&mi.stats, opts.tsc_mhz),
            mpps_wall: if secs > 0.0 {
                stats.packets_received as f64 / secs / 1e6
            } else {
                0.0
            },
            stats,
            flows: w.spec.flow_count(),
            family: w.spec.family(),
            input_ports: w.ports.len(),
            pcap_packets: w.packet_count(),
            measured_s: secs,
            mpps_intervals: mi.interval_mpps,
            mpps_rounds: Vec::new(),
            mpps_by_round: Vec::new(),
            tx_packets: mi.tx_packets,
            oncpu_pct: mi
                .cpu_ns
                .filter(|_| !mi.wall.is_zero())
                .map(|c| 100.0 * c as f64 / mi.wall.as_nanos() as f64),
            tsc_mhz: opts.tsc_mhz,
            frame_stride: opts.frame_stride,
            auto: r.auto_choice(),
            mpps_per_pmd: Vec::new(),
        });
    }
    Ok(out)
}

/// How fast an EMC fills: packets replayed from a fresh datapath until
/// `target` of the EMC's entries hold live megaflows.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct EmcFill {
    /// Workload name.
    pub workload: String,
    /// Configuration label.
    pub config: String,
    /// Fraction of the entries aimed for.
    pub target: f64,
    /// Packets it took, or `None` if `max_packets` were not enough.
    pub packets: Option<u64>,
    /// Occupancy reached (fraction of entries) when the run stopped.
    pub occupancy: f64,
}

/// Replays `w` under `cfg` (untimed) until the EMC is `target` full,
/// checking every 1024 packets, for at most `max_packets`.
pub fn emc_fill(
    w: &Workload,
    cfg: &BenchConfig,
    target: f64,
    max_packets: u64,
) -> Result<EmcFill, RunError> {
    if w.ports.is_empty() || w.ports.iter().any(|p| p.is_empty()) {
        return Err(RunError::Empty(w.spec.name()));
    }
    let mut r = Replay::new(w, cfg)?;
    let entries = r.sw.datapath().emc_entries() as f64;
    let mut bursts = 0u64;
    let mut occ = 0.0;
    let packets = loop {
        let sent = r.sw.datapath().stats().packets_received;
        if bursts.is_multiple_of(32) {
            occ = r.sw.datapath().emc_occupancy() as f64 / entries;
            if occ >= target {
                break Some(sent);
            }
        }
        if sent >= max_packets {
            break None;
        }
        r.burst(bursts);
        bursts += 1;
    };
    Ok(EmcFill {
        workload: w.spec.name(),
        config: cfg.label.clone(),
        target,
        packets,
        occupancy: occ,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::parse_config;
    use crate::workload::{load, WorkloadSpec};
    use flowpath_trafficgen::Order;

    fn short() -> RunOptions {
        RunOptions {
            warmup: Duration::from_millis(5),
            duration: Duration::from_millis(20),
            intervals: 1,
            tsc_mhz: 2600.0,
            frame_stride: 0,
            rounds: 1,
            interleave: None,
            pmds: 1,
            pin: None,
        }
    }

    #[test]
    fn tiers_add_up_and_emc_takes_few_flows() {
        let w = load(&WorkloadSpec::Flows {
            flows: 16,
            order: Order::RoundRobin,
        })
        .unwrap();
        let r = run(&w, &parse_config("emc:1").unwrap(), &short()).unwrap();
        assert!(r.is_consistent(), "{r:?}");
        assert!(r.stats.packets_received > 0);
        assert!(r.pct(r.stats.emc_hits) > 99.0, "{r:?}");
        assert_eq!(r.tx_packets, r.stats.packets_received, "all udp → output:2");
        assert_eq!(r.stats.megaflows, 1);
        assert!(r.mpps > 0.0);
        let cyc = r.stats.avg_processing_cycles_per_packet;
        assert!((r.mpps * cyc - 2600.0).abs() < 1.0, "Mpps = TSC / cycles");
        let mut o = short();
        o.intervals = 3;
        let r = run(&w, &parse_config("emc").unwrap(), &o).unwrap();
        assert_eq!(r.mpps_intervals.len(), 3);
        assert!(r.is_consistent());
    }

    #[test]
    fn interleaved_workers_each_count_only_their_measured_turns() {
        let w = load(&WorkloadSpec::Flows {
            flows: 16,
            order: Order::RoundRobin,
        })
        .unwrap();
        let cfgs = [
            parse_config("emc:1").unwrap(),
            parse_config("none").unwrap(),
            parse_config("auto").unwrap(),
        ];
        let mut o = short();
        o.intervals = 2;
        let rs = run_interleaved(&w, &cfgs, &o, Duration::from_millis(4)).unwrap();
        assert_eq!(rs.len(), 3);
        for (r, c) in rs.iter().zip(&cfgs) {
            assert_eq!(r.config, c.label);
            assert!(r.is_consistent(), "{r:?}");
            assert!(r.stats.packets_received > 0, "{r:?}");
            assert_eq!(r.tx_packets, r.stats.packets_received, "all udp → output:2");
            assert_eq!(r.mpps_intervals.len(), 2);
            // Each worker measured at least its 2 x 20 ms, in turns of
            // 4 ms of which 0.4 are not measured.
            assert!(r.measured_s >= 0.040, "{r:?}");
            let cyc = r.stats.avg_processing_cycles_per_packet;
            assert!(
                (r.mpps * cyc - 2600.0).abs() < 1.0,
                "Mpps = TSC / cycles: {r:?}"
            );
        }
        assert!(rs[0].pct(rs[0].stats.emc_hits) > 99.0, "{:?}", rs[0]);
        assert_eq!(rs[1].stats.emc_hits + rs[1].second_level_hits(), 0);
        assert!(rs[1].stats.megaflow_hits > 0);
        assert!(rs[2].auto.is_some() && rs[0].auto.is_none());
    }

    #[test]
    fn no_caches_and_subtables() {
        let w = load(&WorkloadSpec::Subtables {
            subtables: 5,
            dsts: 100,
        })
        .unwrap();
        let r = run(&w, &parse_config("none").unwrap(), &short()).unwrap();
        assert!(r.is_consistent());
        assert_eq!(r.stats.emc_hits + r.second_level_hits(), 0);
        assert_eq!(r.stats.megaflows, 5);
        assert!(r.stats.avg_subtable_lookups_per_megaflow_hit >= 1.0);
    }

    #[test]
    fn emc_fills() {
        let w = load(&WorkloadSpec::Flows {
            flows: 20_000,
            order: Order::RoundRobin,
        })
        .unwrap();
        let f = emc_fill(&w, &parse_config("emc:1").unwrap(), 0.5, 1_000_000).unwrap();
        assert!(f.packets.is_some_and(|p| p < 200_000), "{f:?}");
        let f = emc_fill(&w, &parse_config("emc:0").unwrap(), 0.5, 10_000).unwrap();
        assert_eq!(f.packets, None);
    }
}
