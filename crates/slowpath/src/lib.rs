//! The slow path behind the datapath's upcall.
//!
//! What: [`SlowPath`] is the `Upcall` the running switch, `flowpath run`
//! and the benchmark plug into the datapath: it translates a miss through
//! the OpenFlow rule tables (`flowpath_ofproto::xlate`) into datapath
//! actions and a megaflow mask, keeps `NORMAL`'s MAC learning and the
//! flows `learn` made, and revalidates the datapath's megaflows when its
//! own state changes. [`revalidate`](mod@revalidate) holds the one
//! keep/delete test of an installed megaflow, used here and by the
//! switch's revalidator thread. [`RuleSwitch`] builds a datapath worker
//! over rule tables and publishes new ones.
//!
//! Why a crate of its own: the fast path (`flowpath_datapath`) knows
//! nothing of OpenFlow, and OpenFlow (`flowpath_ofproto`) nothing of
//! caches; this crate sits above both and joins them through the
//! datapath's [`Upcall`](flowpath_datapath::Upcall) interface, as Open vSwitch's
//! `ofproto-dpif-upcall` joins `ofproto-dpif-xlate` and `dpif-netdev`.
//!
//! Threads: a [`SlowPath`] belongs to one worker and is called on its
//! thread; rule tables are shared read-only (`Arc`), the `NORMAL` bridge
//! state behind its own lock.

#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod revalidate;
mod slowpath;

pub use revalidate::{recheck, revalidate, revalidate_where};
pub use slowpath::{uses_normal, SlowPath, SlowPathStats, XLATE_CACHE_ENTRIES};

use flowpath_datapath::{Config, ConfigError, Switch};
use flowpath_ofproto::tables::RuleTables;
use std::sync::Arc;

/// A datapath worker over rule tables.
pub type RulesWorker = Switch<SlowPath>;

/// Rule tables as the slow path of a datapath worker ([`Switch`]).
pub trait RuleSwitch: Sized {
    /// A worker whose slow path is `tables`.
    fn with_rules(cfg: Config, tables: Arc<RuleTables>) -> Result<Self, ConfigError>;

    /// Publishes a new rule version (between batches): megaflows whose
    /// translation changed are removed ([`revalidate()`]), then upcalls
    /// use the new tables. Returns how many megaflows were removed.
    fn publish_rules(&mut self, tables: Arc<RuleTables>) -> usize;

    /// Upcalls use `tables` from now on (with the flows `learn` made);
    /// the installed megaflows are left to a revalidator.
    fn swap_rules(&mut self, tables: Arc<RuleTables>);
}

impl RuleSwitch for Switch<SlowPath> {
    fn with_rules(cfg: Config, tables: Arc<RuleTables>) -> Result<Self, ConfigError> {
        Switch::new(cfg, SlowPath::new(tables))
    }

    fn publish_rules(&mut self, tables: Arc<RuleTables>) -> usize {
        let (sp, dp) = self.upcall_and_datapath();
        // The new tables with the flows `learn` made.
        sp.set_tables(tables);
        let merged = sp.tables().clone();
        sp.revalidate(dp, &merged)
    }

    fn swap_rules(&mut self, tables: Arc<RuleTables>) {
        self.upcall_and_datapath().0.set_tables(tables);
    }
}
