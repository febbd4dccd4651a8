//! Which flows a flow_mod or a statistics request selects, and the checks
//! of a flow read from the wire.

use flowpath_ofproto::action::Action;
use flowpath_ofproto::rule::Rule;
use flowpath_openflow::error::{self as ofe, OfError};
use flowpath_openflow::msg::{FlowMod, FlowStatsRequest};

/// Reads a decoded flow back through the rule parser: the same checks as
/// a flow from a file (prerequisites of `set_field`, tables of
/// `goto_table`, ...), and the canonical form.
pub(super) fn validate(rule: &Rule) -> Result<Rule, OfError> {
    let text = rule.to_string();
    flowpath_ofproto::parse::parse_rule(&text).map_err(|e| {
        let m = e.to_string();
        if m.contains("requires") {
            ofe::BAC_MATCH_INCONSISTENT
        } else if m.contains("goto_table") || m.contains("table") {
            ofe::BIC_BAD_TABLE_ID
        } else {
            ofe::BAC_BAD_ARGUMENT
        }
    })
}

/// Which flows a modify, delete or statistics request selects.
pub(super) struct Sel {
    pub(super) table: Option<u8>,
    pub(super) rule: Rule,
    pub(super) cookie: u64,
    pub(super) cookie_mask: u64,
    pub(super) out_port: Option<u32>,
    pub(super) out_group: Option<u32>,
}

impl Sel {
    pub(super) fn from_flow_mod(fm: &FlowMod) -> Sel {
        Sel {
            table: fm.table,
            rule: fm.rule.clone(),
            cookie: fm.cookie,
            cookie_mask: fm.cookie_mask,
            out_port: fm.out_port,
            out_group: fm.out_group,
        }
    }

    pub(super) fn from_stats(req: &FlowStatsRequest) -> Sel {
        Sel {
            table: req.table,
            rule: Rule::new(req.matching, Vec::new()),
            cookie: req.cookie,
            cookie_mask: req.cookie_mask,
            out_port: req.out_port,
            out_group: req.out_group,
        }
    }

    pub(super) fn selects(&self, r: &Rule, strict: bool) -> bool {
        if self.table.is_some_and(|t| t != r.table) {
            return false;
        }
        if (r.cookie ^ self.cookie) & self.cookie_mask != 0 {
            return false;
        }
        let m = &self.rule.matching;
        let rm = &r.matching;
        let covers = if strict {
            rm == m && r.priority == self.rule.priority
        } else {
            m.mask.is_subset_of(&rm.mask)
                && rm.key.eq_masked(&m.key, &m.mask)
                && regs_subset(&m.regs_mask, &rm.regs_mask)
                && regs_eq(&rm.regs, &m.regs, &m.regs_mask)
        };
        if !covers {
            return false;
        }
        if let Some(p) = self.out_port {
            if !outputs_to(r, p) {
                return false;
            }
        }
        if let Some(g) = self.out_group {
            let all = r.actions.iter().chain(&r.write_actions);
            if !all.clone().any(|a| *a == Action::Group(g)) {
                return false;
            }
        }
        true
    }
}

fn regs_subset(a: &flowpath_flow::key::Regs, b: &flowpath_flow::key::Regs) -> bool {
    a.w.iter().zip(&b.w).all(|(x, y)| x & !y == 0)
}

fn regs_eq(
    a: &flowpath_flow::key::Regs,
    b: &flowpath_flow::key::Regs,
    m: &flowpath_flow::key::Regs,
) -> bool {
    a.w.iter()
        .zip(&b.w)
        .zip(&m.w)
        .all(|((x, y), k)| (x ^ y) & k == 0)
}

/// Whether `r` outputs to OpenFlow 1.0 port `p` (OVS's out_port filter).
fn outputs_to(r: &Rule, p: u32) -> bool {
    r.actions.iter().chain(&r.write_actions).any(|a| match *a {
        Action::Output(x) => x == p,
        Action::OutputTrunc { port, .. } => port == p,
        Action::Enqueue { port, .. } => port == p,
        Action::InPort => p == 0xfff8,
        Action::Normal => p == 0xfffa,
        Action::Flood => p == 0xfffb,
        Action::All => p == 0xfffc,
        Action::Controller { .. } => p == 0xfffd,
        _ => false,
    })
}

/// Two flows of one table and priority that some packet matches both.
pub(super) fn overlaps(a: &Rule, b: &Rule) -> bool {
    if a.table != b.table || a.priority != b.priority {
        return false;
    }
    let (x, y) = (&a.matching, &b.matching);
    let common = x.mask.intersect(&y.mask);
    let regs_ok = x
        .regs
        .w
        .iter()
        .zip(&y.regs.w)
        .zip(x.regs_mask.w.iter().zip(&y.regs_mask.w))
        .all(|((p, q), (m, n))| (p ^ q) & m & n == 0);
    x.key.eq_masked(&y.key, &common) && regs_ok
}
