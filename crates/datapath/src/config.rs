//! Run-time configuration of a datapath worker.
//!
//! What: every knob of the cascade, with OVS's names and defaults where
//! they exist (`emc-enable`, `emc-insert-inv-prob`, `smc-enable`,
//! `flow-limit`, `max-idle`, `upcall/disable-megaflows`), plus the sizes
//! of each cache and the choice of second-level cache.
//!
//! Why one struct: [`crate::Datapath::set_config`] takes a whole new
//! config between batches and rebuilds only what changed, so the control
//! path can publish configs as immutable values.
//!
//! Invariants (checked by [`Config::validate`]): cache sizes are powers of
//! two within each cache's limits.
//!
//! Threads: plain data.

use crate::auto::AUTO_SAMPLES;
use crate::cd::{CD_DEFAULT_BUCKETS, CD_DEFAULT_WAYS};
use crate::dfc::DFC_DEFAULT_ENTRIES;
use crate::emc::EMC_DEFAULT_ENTRIES;
use crate::hybrid::HYBRID_DEFAULT_BUCKETS;
use crate::smc::SMC_DEFAULT_ENTRIES;
use crate::tier::TierKind;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Which second-level cache sits between the EMC and the dpcls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SecondLevel {
    /// Signature match cache (OVS `smc-enable=true`).
    Smc,
    /// Datapath flow cache (the 2017 ovs-dev proposal).
    Dfc,
    /// Cuckoo Distributor (the 2017 ovs-dev proposal).
    Cd,
    /// None (OVS's default).
    None,
    /// One signature table whose entries name a megaflow or a subtable
    /// ([`crate::hybrid`]).
    Hybrid,
    /// EMC and hybrid switched on and off by measurement ([`crate::auto`]).
    Auto,
}

impl SecondLevel {
    /// All choices, for sweeps and tests.
    pub const ALL: [SecondLevel; 6] = [
        SecondLevel::Smc,
        SecondLevel::Dfc,
        SecondLevel::Cd,
        SecondLevel::None,
        SecondLevel::Hybrid,
        SecondLevel::Auto,
    ];

    /// The configuration name: `smc`, `dfc`, `cd`, `none`, `hybrid` or
    /// `auto`.
    pub fn name(self) -> &'static str {
        match self.tier() {
            Some(t) => t.name(),
            None if self == SecondLevel::Auto => "auto",
            None => "none",
        }
    }

    /// The cache tier this choice puts after the EMC (`auto` switches
    /// the hybrid table but is named for itself; `none` has none).
    pub fn tier(self) -> Option<TierKind> {
        match self {
            SecondLevel::Smc => Some(TierKind::Smc),
            SecondLevel::Dfc => Some(TierKind::Dfc),
            SecondLevel::Cd => Some(TierKind::Cd),
            SecondLevel::Hybrid => Some(TierKind::Hybrid),
            SecondLevel::None | SecondLevel::Auto => None,
        }
    }
}

impl fmt::Display for SecondLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown second-level cache name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown second-level cache {0:?} (expected {names})", names = crate::keys::cache_names())]
pub struct UnknownSecondLevel(pub String);

impl FromStr for SecondLevel {
    type Err = UnknownSecondLevel;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SecondLevel::ALL
            .into_iter()
            .find(|l| l.name() == s)
            .ok_or_else(|| UnknownSecondLevel(s.to_string()))
    }
}

/// A configuration value out of range.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid datapath config: {0}")]
pub struct ConfigError(pub &'static str);

fn default_hybrid_buckets() -> usize {
    HYBRID_DEFAULT_BUCKETS
}

fn default_auto_interval_ms() -> u64 {
    1000
}

fn default_auto_samples() -> usize {
    AUTO_SAMPLES
}

/// Configuration of one datapath worker. See the module documentation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Config {
    /// `emc-enable` (default true).
    pub emc_enable: bool,
    /// `emc-insert-inv-prob`: insert on a miss with probability 1/N
    /// (default 100; 1 = always; 0 = never).
    pub emc_insert_inv_prob: u32,
    /// EMC entries (power of two, 2..=65536; default 8192).
    pub emc_entries: usize,
    /// EMC candidate slots per key: 2 (OVS) or 1 (the DFC proposal).
    pub emc_ways: u32,
    /// The second-level cache (default SMC).
    pub second_level: SecondLevel,
    /// SMC entries (power of two ≥ 4; default 1M).
    pub smc_entries: usize,
    /// DFC entries (power of two; default 1M).
    pub dfc_entries: usize,
    /// CD buckets (power of two; default 64K).
    pub cd_buckets: usize,
    /// CD entries per bucket: 8 or 16 (default 16).
    pub cd_ways: usize,
    /// Interval over which CD measures its benefit (ms, default 1000).
    pub cd_adapt_interval_ms: u64,
    /// Hybrid table buckets of 16 entries (power of two; default 64K).
    #[serde(default = "default_hybrid_buckets")]
    pub hybrid_buckets: usize,
    /// `auto`: interval between explorations of the tiers while the arm
    /// holds (ms, default 1000); after a change of arm the next comes after
    /// an eighth of it, and the gap doubles back.
    #[serde(default = "default_auto_interval_ms")]
    pub auto_interval_ms: u64,
    /// `auto`: measured batches per tier choice and exploration
    /// (1..=128, default 128).
    #[serde(default = "default_auto_samples")]
    pub auto_samples: usize,
    /// `flow-limit`: no megaflow is installed while this many are live
    /// (default 200000).
    pub flow_limit: usize,
    /// Megaflows on (default); off installs exact-match megaflows, as
    /// `ovs-appctl upcall/disable-megaflows`.
    pub megaflows: bool,
    /// `max-idle` (ms, default 10000): the idle time after which
    /// [`crate::Datapath::expire_idle`] callers usually remove a megaflow.
    pub max_idle_ms: u64,
    /// Upcall budget (a defence against new-flow storms; 0 = none, OVS's
    /// behaviour): each input port (16 fair buckets, by `in_port mod 16`)
    /// may make at most this many upcalls per millisecond of the
    /// datapath's clock; further misses in that millisecond are dropped
    /// without reaching the slow path, counted as failed upcalls and in
    /// `upcall_budget_drops`.
    #[serde(default)]
    pub upcall_budget_per_ms: u32,
    /// Longest sleep (µs) of an idle PMD of `flowpath switch` (OVS's
    /// `pmd-maxsleep`): 0 never sleeps (spins, as OVS's default); the
    /// default, 10000, lets an idle switch cost almost no CPU. (The
    /// datapath itself does not sleep; the switch's PMD loop reads it.)
    #[serde(default = "default_pmd_maxsleep_us")]
    pub pmd_maxsleep_us: u32,
    /// Mask budget per input port (a defence against the Tuple Space
    /// Explosion attack; 0 = none, OVS's behaviour): once a port's dpcls
    /// has this many subtables, a megaflow whose mask has no subtable yet
    /// is installed under the widest existing mask that covers it (more
    /// bits exact: still correct, just narrower), or, if none does, under
    /// the exact-match mask — so the port never has more than budget + 1
    /// subtables. Counted in `masks_widened`.
    #[serde(default)]
    pub mask_budget: usize,
    /// Subtable re-ranking interval (ms, default 1000).
    pub subtable_rerank_interval_ms: u64,
    /// Seed of the caches' PRNGs (insertion probability, replacement).
    pub seed: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            emc_enable: true,
            emc_insert_inv_prob: 100,
            emc_entries: EMC_DEFAULT_ENTRIES,
            emc_ways: 2,
            second_level: SecondLevel::Smc,
            smc_entries: SMC_DEFAULT_ENTRIES,
            dfc_entries: DFC_DEFAULT_ENTRIES,
            cd_buckets: CD_DEFAULT_BUCKETS,
            cd_ways: CD_DEFAULT_WAYS,
            cd_adapt_interval_ms: 1000,
            hybrid_buckets: HYBRID_DEFAULT_BUCKETS,
            auto_interval_ms: 1000,
            auto_samples: AUTO_SAMPLES,
            flow_limit: 200_000,
            megaflows: true,
            max_idle_ms: 10_000,
            upcall_budget_per_ms: 0,
            pmd_maxsleep_us: default_pmd_maxsleep_us(),
            mask_budget: 0,
            subtable_rerank_interval_ms: 1000,
            seed: 0x5eed_f10f_9a7b_0001,
        }
    }
}

/// `pmd-maxsleep`'s default: 10 ms.
fn default_pmd_maxsleep_us() -> u32 {
    10_000
}

impl Config {
    /// The configuration proposed with the DFC patch: DFC as second level
    /// and a 1-way, 16K-entry EMC.
    pub fn dfc_proposal() -> Self {
        Config {
            second_level: SecondLevel::Dfc,
            emc_entries: 1 << 14,
            emc_ways: 1,
            ..Config::default()
        }
    }

    /// Checks sizes and ways.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let pow2 = |n: usize| n.is_power_of_two();
        if !pow2(self.emc_entries) || !(2..=1 << 16).contains(&self.emc_entries) {
            return Err(ConfigError(
                "emc_entries must be a power of two in 2..=65536",
            ));
        }
        if self.emc_ways != 1 && self.emc_ways != 2 {
            return Err(ConfigError("emc_ways must be 1 or 2"));
        }
        if !pow2(self.smc_entries) || self.smc_entries < 4 {
            return Err(ConfigError("smc_entries must be a power of two >= 4"));
        }
        if !pow2(self.dfc_entries) {
            return Err(ConfigError("dfc_entries must be a power of two"));
        }
        if !pow2(self.cd_buckets) {
            return Err(ConfigError("cd_buckets must be a power of two"));
        }
        if self.cd_ways != 8 && self.cd_ways != 16 {
            return Err(ConfigError("cd_ways must be 8 or 16"));
        }
        if self.pmd_maxsleep_us > 10_000 {
            return Err(ConfigError("pmd-maxsleep must be at most 10000 (µs)"));
        }
        if !(1..=AUTO_SAMPLES).contains(&self.auto_samples) {
            return Err(ConfigError("auto_samples must be in 1..=128"));
        }
        if !pow2(self.hybrid_buckets) {
            return Err(ConfigError("hybrid_buckets must be a power of two"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_defaults_validate() {
        for l in SecondLevel::ALL {
            assert_eq!(l.name().parse::<SecondLevel>(), Ok(l));
        }
        assert!("emc".parse::<SecondLevel>().is_err());
        assert_eq!(Config::default().validate(), Ok(()));
        assert_eq!(Config::dfc_proposal().validate(), Ok(()));
        let bad = Config {
            emc_entries: 100,
            ..Config::default()
        };
        assert!(bad.validate().is_err());
        let bad = Config {
            cd_ways: 4,
            ..Config::default()
        };
        assert!(bad.validate().is_err());
    }
}
