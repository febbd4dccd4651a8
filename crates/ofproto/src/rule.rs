//! `Rule`: one OpenFlow-style flow of a rule table, and `RuleError`, why a
//! flow's text was refused.
//!
//! What: a rule is a table id, a priority, a cookie, timeouts, a
//! [`Match`] and an action list, as `ovs-ofctl add-flow` takes them. Its
//! `Display` prints the canonical form, in the order `ovs-ofctl dump-flows`
//! uses (cookie, table, idle_timeout, hard_timeout when non-default, then
//! priority always, then the match, then `actions=`), without the
//! statistics.
//!
//! Invariant (tested, including by proptest): for every rule that
//! [`crate::parse::parse_rule`] returns, printing it and parsing the text
//! again gives an equal rule. `line` is where the rule came from in an
//! `add-flows` file (1-based; 0 for a rule not read from a file) and is not
//! printed.
//!
//! Thread-safety: plain data.

use crate::action::{format_instructions, Action};
use flowpath_flow::{Match, Style};
use std::fmt;

/// The priority of a rule that gives none (OpenFlow's default, 0x8000).
pub const DEFAULT_PRIORITY: u16 = 0x8000;

/// Flow flags (`ovs-ofctl` keywords), [`Rule::flags`] bits.
pub mod flags {
    /// `send_flow_rem`: tell the controller when the flow is removed
    /// (flowpath has no controller connection: kept and printed only).
    pub const SEND_FLOW_REM: u8 = 1;
    /// `check_overlap`: refuse the flow if one of the same table and
    /// priority overlaps it (checked when the rules are loaded).
    pub const CHECK_OVERLAP: u8 = 2;
    /// `reset_counts`: a modification zeroes the flow's counters.
    pub const RESET_COUNTS: u8 = 4;
    /// `no_packet_counts`: the flow keeps no packet count.
    pub const NO_PACKET_COUNTS: u8 = 8;
    /// `no_byte_counts`: the flow keeps no byte count.
    pub const NO_BYTE_COUNTS: u8 = 16;
    /// Keywords and bits, in the order `ovs-ofctl` prints them.
    pub const NAMES: [(&str, u8); 5] = [
        ("send_flow_rem", SEND_FLOW_REM),
        ("check_overlap", CHECK_OVERLAP),
        ("reset_counts", RESET_COUNTS),
        ("no_packet_counts", NO_PACKET_COUNTS),
        ("no_byte_counts", NO_BYTE_COUNTS),
    ];
}

/// One flow of a rule table.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Rule {
    /// The table the rule lives in (0..=254).
    pub table: u8,
    /// Higher wins among rules matching a packet in one table.
    pub priority: u16,
    /// Opaque controller-chosen identifier.
    pub cookie: u64,
    /// Seconds without a hit after which the rule expires (0 = never).
    pub idle_timeout: u16,
    /// Seconds after which the rule expires whatever its hits (0 = never).
    pub hard_timeout: u16,
    /// Eviction importance (`importance=`; flowpath evicts no flows: kept
    /// and printed).
    pub importance: u16,
    /// [`flags`] bits.
    pub flags: u8,
    /// The packets the rule applies to.
    pub matching: Match,
    /// What it does with them; empty means drop. May hold the
    /// [`Action::ClearActions`] and [`Action::WriteActions`] instruction
    /// markers.
    pub actions: Vec<Action>,
    /// The actions `write_actions(...)` adds to the action set (empty when
    /// the rule has no such instruction).
    pub write_actions: Vec<Action>,
    /// 1-based line of the `add-flows` file it came from, 0 if none.
    pub line: usize,
}

impl Rule {
    /// The `conjunction(id,k/n)` clauses this flow is (empty for an
    /// ordinary flow).
    pub fn clauses(&self) -> Vec<crate::classifier::Clause> {
        self.actions
            .iter()
            .filter_map(|a| match *a {
                crate::action::Action::Conjunction { id, k, n } => {
                    Some(crate::classifier::Clause { id, k, n })
                }
                _ => None,
            })
            .collect()
    }

    /// A rule in table 0 with the default priority, no cookie and no
    /// timeouts.
    pub fn new(matching: Match, actions: Vec<Action>) -> Rule {
        Rule {
            table: 0,
            priority: DEFAULT_PRIORITY,
            cookie: 0,
            idle_timeout: 0,
            hard_timeout: 0,
            importance: 0,
            flags: 0,
            matching,
            actions,
            write_actions: Vec::new(),
            line: 0,
        }
    }
}

impl Default for Rule {
    /// The catch-all drop rule in table 0 with the default priority.
    fn default() -> Self {
        Rule::new(Match::catchall(), Vec::new())
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.cookie != 0 {
            write!(f, "cookie={:#x}, ", self.cookie)?;
        }
        if self.table != 0 {
            write!(f, "table={}, ", self.table)?;
        }
        if self.idle_timeout != 0 {
            write!(f, "idle_timeout={}, ", self.idle_timeout)?;
        }
        if self.hard_timeout != 0 {
            write!(f, "hard_timeout={}, ", self.hard_timeout)?;
        }
        if self.importance != 0 {
            write!(f, "importance={}, ", self.importance)?;
        }
        for (name, bit) in flags::NAMES {
            if self.flags & bit != 0 {
                write!(f, "{name}, ")?;
            }
        }
        write!(f, "priority={}", self.priority)?;
        let m = self.matching.format(Style::Rule);
        if !m.is_empty() {
            write!(f, ",{m}")?;
        }
        write!(
            f,
            " actions={}",
            format_instructions(&self.actions, &self.write_actions)
        )
    }
}

/// Why a flow (or a line of a flows file) was refused.
///
/// Displays as `FILE:LINE: FIELD: MESSAGE`, e.g.
/// `rules.flows:12: nw_src: '10.0.0.300' is not an IPv4 address (a.b.c.d
/// expected)`; the file part is `line N: ` without a file and absent for a
/// single flow (line 0), and `FIELD: ` is left out when there is no field or
/// the message already starts with the field's name (`tp_dst requires ...`).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RuleError {
    /// The file the flow came from, if any.
    pub file: Option<String>,
    /// 1-based line in that file (0 for a flow not read from a file).
    pub line: usize,
    /// The field, keyword or action at fault, as written.
    pub field: Option<String>,
    /// What is wrong.
    pub msg: String,
}

impl RuleError {
    /// An error about `field` (if any), with no location yet.
    pub fn new(field: Option<&str>, msg: impl Into<String>) -> RuleError {
        RuleError {
            file: None,
            line: 0,
            field: field.map(str::to_owned),
            msg: msg.into(),
        }
    }

    /// The same error, located at `line` of `file`.
    pub fn at(mut self, file: Option<&str>, line: usize) -> RuleError {
        self.file = file.map(str::to_owned);
        self.line = line;
        self
    }
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, self.line) {
            (Some(file), 0) => write!(f, "{file}: ")?,
            (Some(file), n) => write!(f, "{file}:{n}: ")?,
            (None, 0) => {}
            (None, n) => write!(f, "line {n}: ")?,
        }
        if let Some(field) = &self.field {
            let named = self
                .msg
                .strip_prefix(field.as_str())
                .is_some_and(|rest| rest.starts_with(' '));
            if !named {
                write!(f, "{field}: ")?;
            }
        }
        f.write_str(&self.msg)
    }
}

impl std::error::Error for RuleError {}

#[cfg(test)]
mod tests {
    use super::*;
    use flowpath_flow::field::lookup;

    #[test]
    fn prints_in_dump_flows_order() {
        let mut m = Match::catchall();
        assert!(m.set_protocol("tcp"));
        m.set_field_text(lookup("nw_src").unwrap(), "10.0.0.0/8")
            .unwrap();
        m.set_field_text(lookup("tp_dst").unwrap(), "80").unwrap();
        let mut r = Rule::new(m, vec![Action::Output(2)]);
        r.table = 1;
        r.priority = 100;
        assert_eq!(
            r.to_string(),
            "table=1, priority=100,tcp,nw_src=10.0.0.0/8,tp_dst=80 actions=output:2"
        );
        r.cookie = 0x1f;
        r.idle_timeout = 10;
        r.hard_timeout = 20;
        r.actions.clear();
        assert_eq!(
            r.to_string(),
            "cookie=0x1f, table=1, idle_timeout=10, hard_timeout=20, priority=100,tcp,nw_src=10.0.0.0/8,tp_dst=80 actions=drop"
        );
        assert_eq!(Rule::default().to_string(), "priority=32768 actions=drop");
    }

    #[test]
    fn error_display() {
        let e = RuleError::new(
            Some("nw_src"),
            "'10.0.0.300' is not an IPv4 address (a.b.c.d expected)",
        )
        .at(Some("rules.flows"), 12);
        assert_eq!(
            e.to_string(),
            "rules.flows:12: nw_src: '10.0.0.300' is not an IPv4 address (a.b.c.d expected)"
        );
        let e = RuleError::new(
            Some("tp_dst"),
            "tp_dst requires ip or ipv6 with tcp, udp or sctp",
        );
        assert_eq!(
            e.to_string(),
            "tp_dst requires ip or ipv6 with tcp, udp or sctp"
        );
        let e = RuleError::new(None, "must specify an action").at(None, 3);
        assert_eq!(e.to_string(), "line 3: must specify an action");
        let e = RuleError::new(Some("tp"), "tp_dst x").at(Some("f"), 0);
        assert_eq!(e.to_string(), "f: tp: tp_dst x");
    }
}
