//! The reference classifier: a linear scan over all rules.
//!
//! Obviously correct and slow; it records no wildcards. Property tests use
//! it as the oracle for the megaflow invariant: every packet inside a
//! megaflow computed by [`crate::tables::RuleTables`] must get, from this
//! scan, exactly the actions of the packet the megaflow was computed for.

use crate::rule::Rule;
use crate::tables::{ports_of_rules, Lookup};
use flowpath_flow::{FlowKey, FlowMask, Regs};

/// Rules scanned linearly, highest priority first (ties: earliest rule).
#[derive(Clone, Debug)]
pub struct LinearTables {
    rules: Vec<Rule>,
    ports: Vec<u32>,
    groups: Vec<crate::group::Group>,
}

impl LinearTables {
    /// Wraps a rule list (later identical table/match/priority replaces earlier).
    pub fn new(rules: Vec<Rule>) -> Self {
        let mut kept: Vec<Rule> = Vec::new();
        for r in rules {
            kept.retain(|k| {
                !(k.table == r.table && k.priority == r.priority && k.matching == r.matching)
            });
            kept.push(r);
        }
        let ports = ports_of_rules(&kept);
        LinearTables {
            rules: kept,
            ports,
            groups: Vec::new(),
        }
    }

    /// Replaces the port list used by `ALL` and `FLOOD`.
    pub fn set_ports(&mut self, ports: Vec<u32>) {
        self.ports = ports;
    }

    /// Installs the groups (unchecked).
    pub fn set_groups(&mut self, groups: Vec<crate::group::Group>) {
        self.groups = groups;
    }
}

impl Lookup for LinearTables {
    fn lookup(
        &self,
        table: u8,
        key: &FlowKey,
        regs: &Regs,
        _wc: Option<&mut FlowMask>,
    ) -> Option<&Rule> {
        let mut best: Option<&Rule> = None;
        for r in &self.rules {
            if r.table == table
                && r.matching.matches_with(key, regs)
                && best.is_none_or(|b| r.priority > b.priority)
            {
                best = Some(r);
            }
        }
        best
    }

    fn ports(&self) -> &[u32] {
        &self.ports
    }

    fn group(&self, id: u32) -> Option<&crate::group::Group> {
        self.groups.iter().find(|g| g.id == id)
    }
}
