//! One measurement: a workload under a configuration.
//!
//! [`BenchResult`] serializes to the JSON object `flowpath bench --json`
//! prints (and the CSV row it writes): `workload`, `config`, `mpps`, the
//! statistics keys of `flowpath run --json` (those of
//! [`PmdStatsReport`], flattened: `packets_received`, `emc_hits`, …,
//! `avg_processing_cycles_per_packet`, `megaflows`), then the context of the
//! measurement (flows, ports, interval, on-CPU share, TSC rate).
//!
//! Invariant (checked by [`BenchResult::is_consistent`]): the per-tier
//! outcomes add up to `packets_received`.

use flowpath_datapath::PmdStatsReport;
use serde::Serialize;

/// One measured (workload, configuration) pair. See the module
/// documentation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BenchResult {
    /// Workload name (`flows-rr-1000`, `subtables-20x50000`, …).
    pub workload: String,
    /// Configuration label.
    pub config: String,
    /// Millions of packets per second: the mean over the measured
    /// intervals (with one interval = TSC rate / processing cycles per
    /// packet).
    pub mpps: f64,
    /// The datapath statistics of the measured interval; processing cycles
    /// are TSC cycles of the whole replay loop (copy into the rx buffers,
    /// extract, classify, execute), as OVS charges its PMD's.
    #[serde(flatten)]
    pub stats: PmdStatsReport,
    /// The same packets over wall-clock time (Mpps), a cross-check of the
    /// TSC rate.
    pub mpps_wall: f64,
    /// Distinct flows of the workload, if known.
    pub flows: Option<u64>,
    /// Workload family (one line in plots).
    pub family: String,
    /// Input ports the workload is replayed from.
    pub input_ports: usize,
    /// Frames held in memory over all ports.
    pub pcap_packets: usize,
    /// Total length of the measured intervals in seconds.
    pub measured_s: f64,
    /// Mpps of each measured interval (`mpps` is their mean).
    pub mpps_intervals: Vec<f64>,
    /// With several rounds: every round's Mpps, sorted (this result is the
    /// median round); empty for a single run.
    pub mpps_rounds: Vec<f64>,
    /// With several rounds: every round's Mpps in round order (index k is
    /// round k for every configuration of the run, so two configurations
    /// can be compared round by round, each pair measured seconds apart);
    /// empty for a single run.
    pub mpps_by_round: Vec<f64>,
    /// Packets sent to output ports during the interval.
    pub tx_packets: u64,
    /// Share of the interval the measuring thread was on its CPU (%), when
    /// the kernel reports it; below ~98 % the run was disturbed.
    pub oncpu_pct: Option<f64>,
    /// TSC rate used to convert cycles to time (MHz).
    pub tsc_mhz: f64,
    /// Bytes between stored frames (0 = back to back).
    pub frame_stride: usize,
    /// With `auto`: the tiers it had chosen at the end (`emc+hybrid`,
    /// `hybrid`, `emc`, `none`), how often it switched, and the cycles
    /// per packet it measured for each choice at its last exploration.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto: Option<AutoChoice>,
    /// With `--pmds N` (N > 1): each worker's Mpps (`mpps` is their sum).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mpps_per_pmd: Vec<f64>,
}

/// What `auto` decided during a measurement.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AutoChoice {
    /// The tiers in use at the end.
    pub arm: String,
    /// Times the choice changed.
    pub switches: u64,
    /// Median cycles per packet measured per choice (`emc+hybrid`,
    /// `hybrid`, `emc`, `none`; 0 = not tried).
    pub costs: [f64; 4],
}

impl BenchResult {
    /// Sum of the per-tier outcomes (EMC, SMC, DFC, CD, hybrid, other
    /// tiers, megaflow hits and upcall outcomes).
    pub fn decided(&self) -> u64 {
        let s = &self.stats;
        s.emc_hits
            + s.smc_hits
            + s.dfc_hits
            + s.cd_hits
            + s.hybrid_hits
            + s.other_hits
            + s.megaflow_hits
            + s.miss_with_success_upcall
            + s.miss_with_failed_upcall
            + s.lost
    }

    /// True when the tiers add up to the packets received.
    pub fn is_consistent(&self) -> bool {
        self.decided() == self.stats.packets_received
    }

    /// Share of received packets (%) of a counter.
    pub fn pct(&self, n: u64) -> f64 {
        if self.stats.packets_received == 0 {
            0.0
        } else {
            100.0 * n as f64 / self.stats.packets_received as f64
        }
    }

    /// Upcalls (successful and failed) and lost packets.
    pub fn misses(&self) -> u64 {
        self.stats.miss_with_success_upcall + self.stats.miss_with_failed_upcall + self.stats.lost
    }

    /// The hits of the tiers between the EMC and the dpcls (SMC, DFC, CD,
    /// hybrid and any other; one second-level cache is on at a time).
    pub fn second_level_hits(&self) -> u64 {
        let s = &self.stats;
        s.smc_hits + s.dfc_hits + s.cd_hits + s.hybrid_hits + s.other_hits
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A result with the given counters, for output tests.
    pub(crate) fn sample(workload: &str, config: &str, flows: u64, mpps: f64) -> BenchResult {
        BenchResult {
            workload: workload.into(),
            config: config.into(),
            mpps,
            stats: PmdStatsReport {
                packets_received: 100,
                emc_hits: 60,
                smc_hits: 10,
                megaflow_hits: 29,
                miss_with_success_upcall: 1,
                avg_subtable_lookups_per_megaflow_hit: 1.0,
                processing_cycles: 10_000,
                avg_processing_cycles_per_packet: 100.0,
                megaflows: 1,
                ..PmdStatsReport::default()
            },
            mpps_wall: mpps,
            flows: Some(flows),
            family: "flows-rr".into(),
            input_ports: 1,
            pcap_packets: 4096,
            measured_s: 1.5,
            mpps_intervals: vec![mpps],
            mpps_rounds: vec![],
            mpps_by_round: vec![],
            tx_packets: 100,
            oncpu_pct: Some(99.5),
            tsc_mhz: 2600.0,
            frame_stride: 0,
            auto: None,
            mpps_per_pmd: Vec::new(),
        }
    }

    #[test]
    fn consistency_and_shares() {
        let mut r = sample("flows-rr-1", "emc", 1, 20.0);
        assert!(r.is_consistent());
        assert_eq!(r.pct(r.stats.emc_hits), 60.0);
        assert_eq!(r.misses(), 1);
        assert_eq!(r.second_level_hits(), 10);
        r.stats.lost = 1;
        assert!(!r.is_consistent());
    }

    #[test]
    fn json_keys() {
        let v = serde_json::to_value(sample("w", "c", 1, 1.0)).unwrap();
        let o = v.as_object().unwrap();
        for k in [
            "workload",
            "config",
            "mpps",
            "avg_processing_cycles_per_packet",
            "packets_received",
            "emc_hits",
            "smc_hits",
            "dfc_hits",
            "cd_hits",
            "hybrid_hits",
            "megaflow_hits",
            "avg_subtable_lookups_per_megaflow_hit",
            "miss_with_success_upcall",
            "miss_with_failed_upcall",
            "lost",
            "processing_cycles",
            "megaflows",
        ] {
            assert!(o.contains_key(k), "{k}");
        }
        let text = serde_json::to_string(&sample("w", "c", 1, 1.0)).unwrap();
        assert!(
            text.starts_with(r#"{"workload":"w","config":"c","mpps":1.0,"#),
            "{text}"
        );
    }
}
