//! Worker statistics, named as `ovs-appctl dpif-netdev/pmd-stats-show`.
//!
//! What: [`PmdStats`], the raw counters a worker keeps (plain `u64` adds on
//! the hot path, per batch where possible), and [`PmdStatsReport`], the
//! derived view with averages that is printed (`Display`, in
//! pmd-stats-show's wording) and serialized (JSON keys fixed: they are an
//! interface of `flowpath bench`).
//!
//! Invariant: every received packet is counted in exactly one of emc hits,
//! smc hits, dfc hits, cd hits, hybrid hits, other tiers' hits (a tier
//! from outside the crate), megaflow hits, miss with success upcall,
//! miss with failed upcall and lost ([`PmdStats::decided`] equals
//! `packets_received` after every batch).
//!
//! Threads: owned by one worker; readers get copies.

use serde::Serialize;
use std::fmt;

/// Raw counters of one worker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PmdStats {
    /// Packets handed to `process_batch` (each pass of a recirculated
    /// packet counts).
    pub packets_received: u64,
    /// Of `packets_received`: passes of recirculated packets.
    pub recirculations: u64,
    /// Decided by the EMC.
    pub emc_hits: u64,
    /// Decided by the SMC.
    pub smc_hits: u64,
    /// Decided by the DFC.
    pub dfc_hits: u64,
    /// Decided by a Cuckoo Distributor directed subtable lookup.
    pub cd_hits: u64,
    /// Decided by the hybrid table (a megaflow entry, or a subtable entry
    /// that directed the dpcls search).
    pub hybrid_hits: u64,
    /// Decided by tiers from outside the crate.
    pub other_hits: u64,
    /// Decided by the ranked dpcls search.
    pub megaflow_hits: u64,
    /// Subtable lookups made for the megaflow hits (1 per hit in the
    /// top-ranked subtable, 2 in the second, ...; a CD misdirection adds
    /// its wasted lookup).
    pub subtable_lookups: u64,
    /// Missed everywhere, upcall succeeded and the megaflow was installed.
    pub miss_with_success_upcall: u64,
    /// Missed everywhere; the upcall failed, or succeeded but nothing was
    /// installed because of the flow limit.
    pub miss_with_failed_upcall: u64,
    /// Missed everywhere and the slow path could not take the packet.
    pub lost: u64,
    /// Cycles spent processing, as reported by the caller.
    pub processing_cycles: u64,
    /// Of `miss_with_failed_upcall`: misses dropped by the upcall budget
    /// without an upcall.
    pub upcall_budget_drops: u64,
    /// Megaflows installed under a wider-than-computed mask because their
    /// port was at its mask budget.
    pub masks_widened: u64,
}

/// Applies `$f` to every counter of the given [`PmdStats`] values,
/// building a new one (so a counter added later cannot be forgotten by
/// [`PmdStats::since`] or [`PmdStats::add`]).
macro_rules! each_counter {
    ($a:expr, $b:expr, $f:expr) => {
        PmdStats {
            packets_received: $f($a.packets_received, $b.packets_received),
            recirculations: $f($a.recirculations, $b.recirculations),
            emc_hits: $f($a.emc_hits, $b.emc_hits),
            smc_hits: $f($a.smc_hits, $b.smc_hits),
            dfc_hits: $f($a.dfc_hits, $b.dfc_hits),
            cd_hits: $f($a.cd_hits, $b.cd_hits),
            hybrid_hits: $f($a.hybrid_hits, $b.hybrid_hits),
            other_hits: $f($a.other_hits, $b.other_hits),
            megaflow_hits: $f($a.megaflow_hits, $b.megaflow_hits),
            subtable_lookups: $f($a.subtable_lookups, $b.subtable_lookups),
            miss_with_success_upcall: $f($a.miss_with_success_upcall, $b.miss_with_success_upcall),
            miss_with_failed_upcall: $f($a.miss_with_failed_upcall, $b.miss_with_failed_upcall),
            lost: $f($a.lost, $b.lost),
            processing_cycles: $f($a.processing_cycles, $b.processing_cycles),
            upcall_budget_drops: $f($a.upcall_budget_drops, $b.upcall_budget_drops),
            masks_widened: $f($a.masks_widened, $b.masks_widened),
        }
    };
}

impl PmdStats {
    /// Counts `n` packets decided by a tier of kind `kind` (the EMC, a
    /// second-level cache, or a tier from elsewhere).
    #[inline(always)]
    pub fn count_tier_hits(&mut self, kind: crate::tier::TierKind, n: u32) {
        use crate::tier::TierKind;
        let n = u64::from(n);
        match kind {
            TierKind::Emc => self.emc_hits += n,
            TierKind::Smc => self.smc_hits += n,
            TierKind::Dfc => self.dfc_hits += n,
            TierKind::Cd => self.cd_hits += n,
            TierKind::Hybrid => self.hybrid_hits += n,
            TierKind::Other => self.other_hits += n,
        }
    }

    /// What was counted between the snapshot `earlier` of the same
    /// worker's counters and these (counters never go down between two
    /// snapshots unless cleared; a cleared one gives 0).
    pub fn since(&self, earlier: &PmdStats) -> PmdStats {
        each_counter!(self, earlier, u64::saturating_sub)
    }

    /// These counters plus `other`'s (summing the deltas of several
    /// measured stretches).
    pub fn add(&mut self, other: &PmdStats) {
        *self = each_counter!(self, other, u64::saturating_add);
    }

    /// Sum of the per-tier outcomes (equals `packets_received`).
    pub fn decided(&self) -> u64 {
        self.emc_hits
            + self.smc_hits
            + self.dfc_hits
            + self.cd_hits
            + self.hybrid_hits
            + self.other_hits
            + self.megaflow_hits
            + self.miss_with_success_upcall
            + self.miss_with_failed_upcall
            + self.lost
    }

    /// The derived report, given the number of live megaflows.
    pub fn report(&self, megaflows: usize) -> PmdStatsReport {
        let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        let received = self.packets_received - self.recirculations.min(self.packets_received);
        PmdStatsReport {
            packets_received: received,
            packet_recirculations: self.recirculations,
            avg_datapath_passes_per_packet: ratio(self.packets_received, received),
            hybrid_hits: self.hybrid_hits,
            other_hits: self.other_hits,
            emc_hits: self.emc_hits,
            smc_hits: self.smc_hits,
            dfc_hits: self.dfc_hits,
            cd_hits: self.cd_hits,
            megaflow_hits: self.megaflow_hits,
            avg_subtable_lookups_per_megaflow_hit: ratio(self.subtable_lookups, self.megaflow_hits),
            miss_with_success_upcall: self.miss_with_success_upcall,
            miss_with_failed_upcall: self.miss_with_failed_upcall,
            lost: self.lost,
            processing_cycles: self.processing_cycles,
            // Per received packet, as OVS (not per datapath pass: a
            // packet that recirculates costs its passes together).
            avg_processing_cycles_per_packet: ratio(self.processing_cycles, received),
            megaflows: megaflows as u64,
        }
    }
}

/// The printable, serializable statistics of one worker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct PmdStatsReport {
    /// Packets received (as OVS: without the recirculations; the tiers'
    /// counts below add up to both).
    pub packets_received: u64,
    /// EMC hits.
    pub emc_hits: u64,
    /// SMC hits.
    pub smc_hits: u64,
    /// DFC hits.
    pub dfc_hits: u64,
    /// CD hits.
    pub cd_hits: u64,
    /// Megaflow (ranked dpcls) hits.
    pub megaflow_hits: u64,
    /// Subtable lookups per megaflow hit.
    pub avg_subtable_lookups_per_megaflow_hit: f64,
    /// Misses whose upcall installed a megaflow.
    pub miss_with_success_upcall: u64,
    /// Misses whose upcall failed or installed nothing.
    pub miss_with_failed_upcall: u64,
    /// Packets lost.
    pub lost: u64,
    /// Processing cycles.
    pub processing_cycles: u64,
    /// Processing cycles per received packet.
    pub avg_processing_cycles_per_packet: f64,
    /// Live megaflows.
    pub megaflows: u64,
    /// Passes of recirculated packets (last: the columns before keep
    /// their places in `flowpath bench`'s CSV).
    pub packet_recirculations: u64,
    /// Datapath passes per received packet.
    pub avg_datapath_passes_per_packet: f64,
    /// Hybrid table hits (after the older columns, for the same reason).
    pub hybrid_hits: u64,
    /// Hits of tiers from outside the crate.
    pub other_hits: u64,
}

impl PmdStatsReport {
    /// The cycle lines of `pmd-stats-show` in Open vSwitch 3.1's layout,
    /// given the worker's idle cycles: idle and processing cycles with
    /// their shares, then cycles per received packet, all and processing
    /// only, each with its `(cycles/packets)`.
    pub fn cycle_lines(&self, idle_cycles: u64) -> String {
        let busy = self.processing_cycles;
        let total = idle_cycles + busy;
        let pct = |c: u64| {
            if total == 0 {
                0.0
            } else {
                100.0 * c as f64 / total as f64
            }
        };
        let mut out = format!(
            "  idle cycles: {idle_cycles} ({:.2}%)\n  processing cycles: {busy} ({:.2}%)\n",
            pct(idle_cycles),
            pct(busy)
        );
        let n = self.packets_received;
        if n != 0 {
            out.push_str(&format!(
                "  avg cycles per packet: {:.2} ({total}/{n})\n  avg processing cycles per packet: {:.2} ({busy}/{n})\n",
                total as f64 / n as f64,
                busy as f64 / n as f64
            ));
        }
        out
    }
}

impl fmt::Display for PmdStatsReport {
    /// Prints the body of a pmd-stats-show block (the caller prints the
    /// `pmd thread numa_id N core_id M:` header) up to the cycles
    /// ([`PmdStatsReport::cycle_lines`] follow): Open vSwitch 3.1's lines
    /// in its order (its hardware-offload, miniflow-extract and simple-match
    /// tiers, which flowpath has not, at 0; not its output batch size,
    /// which flowpath does not count), then flowpath's own (its other
    /// tiers, lost packets and live megaflows).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "  packets received: {}", self.packets_received)?;
        writeln!(f, "  packet recirculations: {}", self.packet_recirculations)?;
        writeln!(
            f,
            "  avg. datapath passes per packet: {:.2}",
            self.avg_datapath_passes_per_packet
        )?;
        writeln!(f, "  phwol hits: 0")?;
        writeln!(f, "  mfex opt hits: 0")?;
        writeln!(f, "  simple match hits: 0")?;
        writeln!(f, "  emc hits: {}", self.emc_hits)?;
        writeln!(f, "  smc hits: {}", self.smc_hits)?;
        writeln!(f, "  megaflow hits: {}", self.megaflow_hits)?;
        writeln!(
            f,
            "  avg. subtable lookups per megaflow hit: {:.2}",
            self.avg_subtable_lookups_per_megaflow_hit
        )?;
        writeln!(
            f,
            "  miss with success upcall: {}",
            self.miss_with_success_upcall
        )?;
        writeln!(
            f,
            "  miss with failed upcall: {}",
            self.miss_with_failed_upcall
        )?;
        writeln!(f, "  dfc hits: {}", self.dfc_hits)?;
        writeln!(f, "  cd hits: {}", self.cd_hits)?;
        writeln!(f, "  hybrid hits: {}", self.hybrid_hits)?;
        if self.other_hits != 0 {
            writeln!(f, "  other tiers' hits: {}", self.other_hits)?;
        }
        writeln!(f, "  lost: {}", self.lost)?;
        writeln!(f, "  megaflows: {}", self.megaflows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_of_snapshots_add_up_to_the_whole() {
        let at = |k: u64| PmdStats {
            packets_received: 13 * k,
            recirculations: k,
            emc_hits: 3 * k,
            smc_hits: k,
            dfc_hits: k,
            cd_hits: k,
            hybrid_hits: k,
            other_hits: k,
            megaflow_hits: 2 * k,
            subtable_lookups: 5 * k,
            miss_with_success_upcall: k,
            miss_with_failed_upcall: k,
            lost: k,
            processing_cycles: 1000 * k,
            upcall_budget_drops: k,
            masks_widened: k,
        };
        // Two measured stretches, 1..3 and 4..9, with 3..4 not measured.
        let mut sum = at(3).since(&at(1));
        assert_eq!(sum, at(2), "each counter's own delta");
        sum.add(&at(9).since(&at(4)));
        assert_eq!(sum, at(7));
        assert_eq!(sum.decided(), sum.packets_received);
        assert_eq!(at(1).since(&at(3)), PmdStats::default(), "cleared: 0");
    }

    #[test]
    fn report_json_keys_and_display() {
        let s = PmdStats {
            packets_received: 10,
            emc_hits: 4,
            megaflow_hits: 4,
            subtable_lookups: 6,
            miss_with_success_upcall: 2,
            processing_cycles: 1234,
            ..PmdStats::default()
        };
        assert_eq!(s.decided(), 10);
        let r = s.report(2);
        let v = serde_json::to_value(r).unwrap();
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        let mut want = vec![
            "packets_received",
            "packet_recirculations",
            "avg_datapath_passes_per_packet",
            "emc_hits",
            "smc_hits",
            "dfc_hits",
            "cd_hits",
            "hybrid_hits",
            "other_hits",
            "megaflow_hits",
            "avg_subtable_lookups_per_megaflow_hit",
            "miss_with_success_upcall",
            "miss_with_failed_upcall",
            "lost",
            "processing_cycles",
            "avg_processing_cycles_per_packet",
            "megaflows",
        ];
        want.sort_unstable();
        assert_eq!(keys, want);
        assert_eq!(v["avg_subtable_lookups_per_megaflow_hit"], 1.5);
        let text = r.to_string();
        assert!(text.contains("  emc hits: 4\n"), "{text}");
        assert!(text.contains("  cd hits: 0\n  hybrid hits: 0\n"), "{text}");
        assert!(text.contains("  avg. subtable lookups per megaflow hit: 1.50\n"));
        let cycles = r.cycle_lines(766);
        assert_eq!(
            cycles,
            "  idle cycles: 766 (38.30%)\n  processing cycles: 1234 (61.70%)\n  \
             avg cycles per packet: 200.00 (2000/10)\n  \
             avg processing cycles per packet: 123.40 (1234/10)\n"
        );
        // OVS's lines in OVS's order, flowpath's after them.
        let at = |l: &str| text.find(l).unwrap_or_else(|| panic!("{l}: {text}"));
        assert!(at("  packet recirculations:") < at("  phwol hits: 0\n"));
        assert!(at("  simple match hits: 0\n") < at("  emc hits:"));
        assert!(at("  miss with failed upcall:") < at("  dfc hits:"));
        assert_eq!(
            PmdStats::default()
                .report(0)
                .avg_processing_cycles_per_packet,
            0.0
        );
        // 10 packets received, each recirculated once: 20 passes. The
        // cycles are per received packet (OVS's pmd-stats-show divides
        // by packets received, not passes).
        let two_pass = PmdStats {
            packets_received: 20,
            recirculations: 10,
            processing_cycles: 3000,
            ..PmdStats::default()
        }
        .report(0);
        assert_eq!(two_pass.packets_received, 10);
        assert_eq!(two_pass.avg_datapath_passes_per_packet, 2.0);
        assert_eq!(two_pass.avg_processing_cycles_per_packet, 300.0);
    }
}
