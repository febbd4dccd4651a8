//! Which flows a flow_mod or a statistics request selects, and the checks
//! of a flow read from the wire.

use flowpath_ofproto::action::Action;
use flowpath_ofproto::rule::Rule;
use flowpath_openflow::error::{self as ofe, OfError};
use flowpath_openflow::msg::{FlowMod, FlowStatsRequest};

/// Checks a decoded flow as the rule parser checks a flow from a file
/// (prerequisites of `set_field`, tables of `goto_table`, ...): None when
/// the flow is good as it is, else the parser's reading of its text (the
/// canonical form).
pub(super) fn validate(rule: &Rule) -> Result<Option<Rule>, OfError> {
    // Most flows from a controller or `ovs-ofctl` need no reading back
    // (the text round trip was a third of a 100,000-flow bundle's cost).
    if flowpath_ofproto::parse::is_canonical(rule) {
        return Ok(None);
    }
    validate_as_text(rule).map(Some)
}

/// [`validate`] the long way: the rule's text through the rule parser.
pub(super) fn validate_as_text(rule: &Rule) -> Result<Rule, OfError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use flowpath_openflow::actions::{put_instructions, put_of10_actions, Ctx};
    use flowpath_openflow::buf::Writer;
    use flowpath_openflow::msg::{self, ConnState, Request};

    /// Every rule of the recorded Open vSwitch rule sets.
    fn golden_rules() -> Vec<Rule> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../ofproto/tests/data");
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if !(name.starts_with("ovs31-") && name.ends_with(".jsonl")) {
                continue;
            }
            for line in std::fs::read_to_string(&p).unwrap().lines() {
                let v: serde_json::Value = serde_json::from_str(line).unwrap();
                for t in v["rules"].as_array().into_iter().flatten() {
                    let t = t.as_str().unwrap();
                    let r = flowpath_ofproto::parse::parse_rule(t)
                        .unwrap_or_else(|e| panic!("{name}: {t}: {e}"));
                    out.push(r);
                }
            }
        }
        out
    }

    /// `r` as an OpenFlow 1.3 FLOW_MOD add (None where 1.3 cannot say it).
    fn of13(r: &Rule) -> Option<Vec<u8>> {
        let mut w = Writer::new();
        w.u8(4);
        w.u8(14);
        w.u16(0);
        w.u32(7);
        w.u64(r.cookie);
        w.u64(0);
        w.u8(r.table);
        w.u8(0);
        w.u16(r.idle_timeout);
        w.u16(r.hard_timeout);
        w.u16(r.priority);
        w.u32(u32::MAX);
        w.u32(u32::MAX);
        w.u32(u32::MAX);
        w.u16(u16::from(r.flags));
        w.u16(0);
        msg::put_oxm_match(&mut w, &r.matching).ok()?;
        let cx = Ctx {
            version: 4,
            matching: &r.matching,
        };
        put_instructions(&mut w, &r.actions, &r.write_actions, cx).ok()?;
        let n = w.len() as u16;
        w.patch_u16(2, n);
        Some(w.buf)
    }

    /// `r` as a Nicira NXT_FLOW_MOD add in OpenFlow 1.0 (the table in the
    /// command's high byte), as `ovs-ofctl` sends flows with registers.
    fn nx(r: &Rule) -> Option<Vec<u8>> {
        let mut w = Writer::new();
        w.u8(1);
        w.u8(4);
        w.u16(0);
        w.u32(7);
        w.u32(0x2320);
        w.u32(13);
        w.u64(r.cookie);
        w.u16(u16::from(r.table) << 8);
        w.u16(r.idle_timeout);
        w.u16(r.hard_timeout);
        w.u16(r.priority);
        w.u32(u32::MAX);
        w.u16(0xffff);
        w.u16(u16::from(r.flags));
        let ml_at = w.len();
        w.u16(0);
        w.zeros(6);
        let ms = w.len();
        flowpath_openflow::nxm::put_match(&mut w, &r.matching, false).ok()?;
        let ml = (w.len() - ms) as u16;
        w.patch_u16(ml_at, ml);
        w.pad8_from(ms);
        let cx = Ctx {
            version: 1,
            matching: &r.matching,
        };
        put_of10_actions(&mut w, &r.actions, &r.write_actions, cx).ok()?;
        let n = w.len() as u16;
        w.patch_u16(2, n);
        Some(w.buf)
    }

    fn decoded(bytes: &[u8]) -> Option<Rule> {
        let st = ConnState {
            flow_mod_table_id: true,
        };
        match msg::decode(bytes, st).ok()?.request {
            Request::FlowMod(fm) => Some(fm.rule),
            _ => None,
        }
    }

    /// The fast check never lets through a flow the rule parser would
    /// refuse or change: over every recorded rule set's flows, as
    /// OpenFlow 1.3 and as Nicira flow_mods decode them.
    #[test]
    fn flows_taken_as_they_are_read_back_the_same() {
        let (mut fast, mut total) = (0, 0);
        for r in golden_rules() {
            for bytes in [of13(&r), nx(&r)].into_iter().flatten() {
                let Some(got) = decoded(&bytes) else { continue };
                total += 1;
                if flowpath_ofproto::parse::is_canonical(&got) {
                    fast += 1;
                    assert_eq!(validate_as_text(&got), Ok(got.clone()), "{r}");
                }
                let v = validate(&got).map(|r| r.unwrap_or_else(|| got.clone()));
                assert_eq!(v, validate_as_text(&got), "{r}");
            }
        }
        eprintln!("{fast} of {total} flows took the fast way");
        // Most recorded flows take the fast way (the test exercises it).
        assert!(total > 20_000 && fast * 4 > total, "{fast} of {total}");
    }

    /// A flow whose match lacks a field's prerequisite, or whose
    /// `goto_table` goes back, takes the long way and gets the parser's
    /// error.
    #[test]
    fn flows_with_missing_prerequisites_are_refused() {
        use flowpath_flow::field::FieldId;
        let r = flowpath_ofproto::parse::parse_rule(
            "priority=5,tcp,nw_src=10.0.0.1,tp_dst=80,actions=output:2",
        )
        .unwrap();
        assert!(flowpath_ofproto::parse::is_canonical(&r));
        assert_eq!(validate(&r), Ok(None));
        for id in [FieldId::EthType, FieldId::NwProto] {
            let mut bad = r.clone();
            id.info().set_mask(&mut bad.matching.mask, 0);
            id.info().set(&mut bad.matching.key, 0);
            assert!(!flowpath_ofproto::parse::is_canonical(&bad), "{id:?}");
            assert_eq!(validate(&bad), Err(ofe::BAC_MATCH_INCONSISTENT), "{id:?}");
        }
        let mut back = r.clone();
        back.table = 3;
        back.actions = vec![Action::GotoTable(2)];
        assert!(!flowpath_ofproto::parse::is_canonical(&back));
        assert!(validate(&back).is_err());
    }
}
