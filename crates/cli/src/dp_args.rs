//! The datapath options shared by `flowpath run` and `flowpath switch`
//! (OVS's other_config names and defaults).

use flowpath_datapath::{Config, SecondLevel};

/// The second-level cache, as named on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SecondArg {
    /// Signature match cache (OVS `smc-enable=true`).
    Smc,
    /// Datapath flow cache (the 2017 ovs-dev proposal).
    Dfc,
    /// Cuckoo Distributor (the 2017 ovs-dev proposal).
    Cd,
    /// No second-level cache (OVS's default).
    None,
    /// One signature table whose entries name a megaflow or a subtable.
    Hybrid,
    /// EMC and hybrid table, each switched on or off by measurement every
    /// second (--no-emc keeps the EMC out).
    Auto,
}

impl From<SecondArg> for SecondLevel {
    fn from(s: SecondArg) -> Self {
        match s {
            SecondArg::Smc => SecondLevel::Smc,
            SecondArg::Dfc => SecondLevel::Dfc,
            SecondArg::Cd => SecondLevel::Cd,
            SecondArg::None => SecondLevel::None,
            SecondArg::Hybrid => SecondLevel::Hybrid,
            SecondArg::Auto => SecondLevel::Auto,
        }
    }
}

/// Datapath options.
#[derive(clap::Args)]
pub struct DatapathArgs {
    /// Second-level cache between the EMC and the megaflow classifier.
    #[arg(long, value_enum, value_name = "CACHE", default_value = "none")]
    second_level: SecondArg,
    /// EMC insertion: a miss is inserted with probability 1/N (1 = always,
    /// 0 = never), as OVS's other_config:emc-insert-inv-prob.
    #[arg(long, value_name = "N", default_value_t = 100)]
    emc_insert_inv_prob: u32,
    /// Turn the exact match cache off (OVS's emc-enable=false).
    #[arg(long)]
    no_emc: bool,
    /// Install exact-match megaflows, as `ovs-appctl
    /// upcall/disable-megaflows`.
    #[arg(long)]
    no_megaflows: bool,
    /// No megaflow is installed while this many are live (the packet still
    /// gets its actions; counted as a failed upcall).
    #[arg(long, value_name = "N", default_value_t = 200_000)]
    flow_limit: usize,
    /// Megaflows idle for longer than this (ms of datapath time) are
    /// removed (checked every 500 ms).
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    max_idle: u64,
    /// Upcall budget against new-flow storms: at most N upcalls per input
    /// port per millisecond; further misses are dropped before the slow
    /// path (counted as failed upcalls). 0 = no budget (OVS).
    #[arg(long, value_name = "N", default_value_t = 0)]
    upcall_budget: u32,
    /// Mask budget against tuple space explosion: once an input port has
    /// N megaflow masks (subtables), new megaflows are widened into an
    /// existing mask or exact match. 0 = no budget (OVS).
    #[arg(long, value_name = "N", default_value_t = 0)]
    mask_budget: usize,
    /// Allocate the large tables (EMC, SMC, DFC, CD, hybrid, the megaflow
    /// slab and the dpcls indexes) on ordinary 4 KB pages instead of
    /// advising 2 MB transparent huge pages.
    #[arg(long)]
    no_huge_pages: bool,
}

impl DatapathArgs {
    /// Applies the process-wide settings (page size of the cache tables);
    /// call before building datapaths.
    pub fn apply_process_settings(&self) {
        flowpath_datapath::hugepage::set_enabled(!self.no_huge_pages);
    }

    /// The datapath configuration these options give.
    pub fn config(&self) -> Config {
        Config {
            emc_enable: !self.no_emc,
            emc_insert_inv_prob: self.emc_insert_inv_prob,
            second_level: self.second_level.into(),
            megaflows: !self.no_megaflows,
            flow_limit: self.flow_limit,
            max_idle_ms: self.max_idle,
            upcall_budget_per_ms: self.upcall_budget,
            mask_budget: self.mask_budget,
            ..Config::default()
        }
    }
}
