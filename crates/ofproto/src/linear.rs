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
    frag_mode: crate::tables::FragMode,
    sampling: bool,
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
            frag_mode: Default::default(),
            sampling: false,
        }
    }

    /// Replaces the port list used by `ALL` and `FLOOD`.
    pub fn set_ports(&mut self, ports: Vec<u32>) {
        self.ports = ports;
    }

    /// Sets how IP fragments are looked up.
    pub fn set_frag_mode(&mut self, mode: crate::tables::FragMode) {
        self.frag_mode = mode;
    }

    /// The bridge has flow-sample collector sets.
    pub fn set_sampling(&mut self, on: bool) {
        self.sampling = on;
    }

    /// Installs the groups (unchecked).
    pub fn set_groups(&mut self, groups: Vec<crate::group::Group>) {
        self.groups = groups;
    }
}

impl LinearTables {
    /// The best ordinary rule, unless higher-priority conjunctive flows
    /// complete a conjunction whose `conj_id` lookup finds a rule (tried
    /// from the highest priority of conjunctive flows down), as OpenFlow
    /// conjunctive matches are defined.
    fn scan(&self, table: u8, key: &FlowKey, regs: &Regs, allow_conj: bool) -> Option<&Rule> {
        let matching = || {
            self.rules
                .iter()
                .filter(move |r| r.table == table && r.matching.matches_with(key, regs))
        };
        // In the conj_id lookup, as OVS's classifier: an ordinary flow with
        // the same match as a higher-priority conjunctive flow is hidden
        // behind it (OVS's lookup sees one flow per match and skips
        // conjunctive ones there).
        let hidden = |r: &Rule| {
            !allow_conj
                && self.rules.iter().any(|c| {
                    c.table == r.table
                        && c.matching == r.matching
                        && c.priority > r.priority
                        && !c.clauses().is_empty()
                })
        };
        let mut hard: Option<&Rule> = None;
        for r in matching().filter(|r| r.clauses().is_empty() && !hidden(r)) {
            if hard.is_none_or(|b| r.priority > b.priority) {
                hard = Some(r);
            }
        }
        if !allow_conj {
            return hard;
        }
        let hard_pri = hard.map_or(-1, |h| i32::from(h.priority));
        let mut prios: Vec<u16> = matching()
            .filter(|r| !r.clauses().is_empty() && i32::from(r.priority) > hard_pri)
            .map(|r| r.priority)
            .collect();
        prios.sort_unstable_by(|a, b| b.cmp(a));
        prios.dedup();
        for p in prios {
            let clauses: Vec<_> = matching()
                .filter(|r| r.priority == p)
                .flat_map(|r| r.clauses())
                .collect();
            let mut ids: Vec<u32> = clauses.iter().map(|c| c.id).collect();
            ids.sort_unstable();
            ids.dedup();
            for id in ids {
                let of_id: Vec<_> = clauses.iter().filter(|c| c.id == id).collect();
                let n = of_id[0].n;
                let complete = (1..=n).all(|k| of_id.iter().any(|c| c.k == k && c.n == n));
                if complete {
                    let mut r2 = *regs;
                    r2.w[flowpath_flow::key::W_CONJ_ID] = u64::from(id);
                    if let Some(r) = self.scan(table, key, &r2, false) {
                        return Some(r);
                    }
                }
            }
        }
        hard
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
        self.scan(table, key, regs, true)
    }

    fn ports(&self) -> &[u32] {
        &self.ports
    }

    fn group(&self, id: u32) -> Option<&crate::group::Group> {
        self.groups.iter().find(|g| g.id == id)
    }

    fn all_rules(&self) -> &[Rule] {
        &self.rules
    }

    fn frag_mode(&self) -> crate::tables::FragMode {
        self.frag_mode
    }

    fn sampling(&self) -> bool {
        self.sampling
    }
}
