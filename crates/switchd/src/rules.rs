//! The bridge's OpenFlow rules as the control commands change them:
//! `add-flow`, `add-flows`, `del-flows [MATCH]`, `replace-flows`, and
//! `dump-flows` printed as `ovs-ofctl dump-flows` prints them.
//!
//! A [`RuleSet`] is the editable list (with each rule's install time);
//! every change builds a new immutable [`RuleTables`] that the switch
//! publishes to its PMD threads. Changes are all or nothing: a file with
//! one bad line changes nothing, and the error names the file, line and
//! field.
//!
//! Threads: owned by the control side (behind the switch's state lock);
//! never touched by a PMD.

use flowpath_flow::{FieldId, Match, Style};
use flowpath_ofproto::odp::format_actions;
use flowpath_ofproto::parse::{parse_match, parse_rule, parse_rules};
use flowpath_ofproto::rule::{Rule, RuleError};
use flowpath_ofproto::tables::RuleTables;
use std::sync::Arc;
use std::time::Instant;

/// A rule with the time it was installed.
#[derive(Clone, Debug)]
pub struct InstalledRule {
    /// The rule.
    pub rule: Rule,
    /// When it was added (or last replaced).
    pub added: Instant,
}

/// The editable rule list and the table options it is built with.
#[derive(Clone, Debug)]
pub struct RuleSet {
    rules: Vec<InstalledRule>,
    prefixes: Vec<FieldId>,
    per_table: Vec<(u8, Vec<FieldId>)>,
    ports: Vec<u32>,
}

impl RuleSet {
    /// A rule set with prefix tracking on `prefixes` (and `per_table`
    /// overrides); `ALL` and `FLOOD` reach `ports`.
    pub fn new(
        rules: Vec<Rule>,
        prefixes: Vec<FieldId>,
        per_table: Vec<(u8, Vec<FieldId>)>,
        ports: Vec<u32>,
    ) -> RuleSet {
        let mut s = RuleSet {
            rules: Vec::new(),
            prefixes,
            per_table,
            ports,
        };
        s.add(rules);
        s
    }

    /// The rules, in installation order.
    pub fn rules(&self) -> &[InstalledRule] {
        &self.rules
    }

    /// The immutable tables for the PMDs.
    pub fn tables(&self) -> Arc<RuleTables> {
        let rules: Vec<Rule> = self.rules.iter().map(|r| r.rule.clone()).collect();
        let mut t = RuleTables::with_table_prefixes(rules, &self.prefixes, &self.per_table);
        t.set_ports(self.ports.clone());
        Arc::new(t)
    }

    /// Adds `rules`; a rule with the same table, priority and match as an
    /// existing one replaces it (as `ovs-ofctl add-flow` does).
    pub fn add(&mut self, rules: Vec<Rule>) {
        let now = Instant::now();
        for rule in rules {
            let same = |r: &InstalledRule| {
                r.rule.table == rule.table
                    && r.rule.priority == rule.priority
                    && r.rule.matching == rule.matching
            };
            self.rules.retain(|r| !same(r));
            self.rules.push(InstalledRule { rule, added: now });
        }
    }

    /// Replaces every rule with `rules`.
    pub fn replace(&mut self, rules: Vec<Rule>) {
        self.rules.clear();
        self.add(rules);
    }

    /// Deletes the rules `sel` selects (non-strict, as `ovs-ofctl
    /// del-flows`): those whose match covers every field `sel` names with
    /// the same values, in `sel`'s table if it names one. Returns how many.
    pub fn delete(&mut self, sel: &Selector) -> usize {
        let before = self.rules.len();
        self.rules.retain(|r| !sel.selects(&r.rule));
        before - self.rules.len()
    }
}

/// What `del-flows` and `dump-flows` select: an optional table and a
/// match (catch-all selects everything).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector {
    /// `table=N`, if given.
    pub table: Option<u8>,
    /// The fields given.
    pub matching: Match,
}

impl Selector {
    /// Parses `[table=N,]FIELD=VALUE,...` (empty = every rule).
    pub fn parse(text: &str) -> Result<Selector, RuleError> {
        let mut table = None;
        let mut rest = Vec::new();
        for tok in text.split([',', ' ', '\t']).filter(|t| !t.is_empty()) {
            match tok.split_once('=') {
                Some(("table", v)) => {
                    let t: u8 = v.trim().parse().ok().filter(|t| *t < 255).ok_or_else(|| {
                        RuleError::new(Some("table"), format!("'{v}' is not a table (0 to 254)"))
                    })?;
                    table = Some(t);
                }
                _ => rest.push(tok),
            }
        }
        let matching = if rest.is_empty() {
            Match::catchall()
        } else {
            parse_match(&rest.join(","))?
        };
        Ok(Selector { table, matching })
    }

    /// Whether `r` is selected.
    pub fn selects(&self, r: &Rule) -> bool {
        if self.table.is_some_and(|t| t != r.table) {
            return false;
        }
        let m = &self.matching;
        m.mask.is_subset_of(&r.matching.mask) && r.matching.key.eq_masked(&m.key, &m.mask)
    }
}

/// Parses one rule given on the command line (`add-flow`).
pub fn parse_one(text: &str) -> Result<Rule, RuleError> {
    parse_rule(text)
}

/// Reads and parses a rule file (`add-flows`, `replace-flows`); all or
/// nothing, errors name the file, line and field.
pub fn load_file(path: &str) -> Result<Vec<Rule>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    parse_rules(&text, Some(path)).map_err(|e| e.to_string())
}

/// The `dump-flows` text: one line per rule, as `ovs-ofctl dump-flows`
/// prints it (` cookie=0x0, duration=1.234s, table=0, n_packets=…,
/// n_bytes=…, priority=…,MATCH actions=…`), sorted by table and then by
/// descending priority. `counts` gives each rule's packets and bytes
/// (same order as [`RuleSet::rules`]), when the switch keeps them.
pub fn dump_flows(set: &RuleSet, sel: &Selector, counts: Option<&[(u64, u64)]>) -> String {
    let now = Instant::now();
    let mut rows: Vec<(usize, &InstalledRule)> = set
        .rules
        .iter()
        .enumerate()
        .filter(|(_, r)| sel.selects(&r.rule))
        .collect();
    rows.sort_by(|a, b| {
        (a.1.rule.table, std::cmp::Reverse(a.1.rule.priority))
            .cmp(&(b.1.rule.table, std::cmp::Reverse(b.1.rule.priority)))
    });
    let mut out = String::new();
    for (i, ir) in rows {
        let r = &ir.rule;
        let dur = now.duration_since(ir.added).as_secs_f64();
        out.push_str(&format!(
            " cookie={:#x}, duration={dur:.3}s, table={}, ",
            r.cookie, r.table
        ));
        if let Some(c) = counts.and_then(|c| c.get(i)) {
            out.push_str(&format!("n_packets={}, n_bytes={}, ", c.0, c.1));
        }
        if r.idle_timeout != 0 {
            out.push_str(&format!("idle_timeout={}, ", r.idle_timeout));
        }
        if r.hard_timeout != 0 {
            out.push_str(&format!("hard_timeout={}, ", r.hard_timeout));
        }
        out.push_str(&format!("priority={}", r.priority));
        let m = r.matching.format(Style::Rule);
        if !m.is_empty() {
            out.push(',');
            out.push_str(&m);
        }
        out.push_str(&format!(" actions={}\n", format_actions_of(r)));
    }
    out
}

/// A rule's actions as `ovs-ofctl` prints them (`drop` when empty).
pub fn format_actions_of(r: &Rule) -> String {
    let s = flowpath_ofproto::action::format_actions(&r.actions);
    if s.is_empty() {
        "drop".to_string()
    } else {
        s
    }
}

/// Datapath actions as `dpctl/dump-flows` prints them.
pub fn format_dp_actions(a: &[flowpath_ofproto::odp::DpAction]) -> String {
    format_actions(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(text: &str) -> RuleSet {
        RuleSet::new(parse_rules(text, None).unwrap(), vec![], vec![], vec![1, 2])
    }

    #[test]
    fn add_replaces_same_match_and_priority() {
        let mut s = set("priority=10,tcp,actions=output:2\npriority=5,actions=drop\n");
        s.add(vec![parse_one("priority=10,tcp,actions=output:1").unwrap()]);
        assert_eq!(s.rules().len(), 2);
        let d = dump_flows(&s, &Selector::parse("").unwrap(), None);
        assert!(d.contains("priority=10,tcp actions=output:1"), "{d}");
        assert!(!d.contains("output:2"), "{d}");
        assert!(d.starts_with(" cookie=0x0, duration="), "{d}");
    }

    #[test]
    fn delete_is_non_strict() {
        let mut s = set("priority=10,tcp,tp_dst=80,actions=output:2\n\
             priority=9,tcp,actions=output:2\n\
             priority=8,udp,actions=output:2\n\
             table=1,priority=8,tcp,actions=output:2\n\
             priority=1,actions=drop\n");
        assert_eq!(s.delete(&Selector::parse("table=0,tcp").unwrap()), 2);
        assert_eq!(s.rules().len(), 3);
        assert_eq!(s.delete(&Selector::parse("tcp").unwrap()), 1);
        assert_eq!(s.delete(&Selector::parse("").unwrap()), 2);
        assert!(s.rules().is_empty());
        assert!(Selector::parse("table=x").is_err());
        assert!(Selector::parse("nw_dst=1.2.3.400").is_err());
    }
}
