//! Flow changes from OpenFlow: one flow_mod applied to the rule list
//! (with Open vSwitch's add / modify / delete semantics per version), and
//! bundles: messages collected per connection and committed all or none.

use super::select::{overlaps, validate, Sel};
use crate::rules::{InstalledRule, RuleSet};
use flowpath_ofproto::rule::{flags, Rule};
use flowpath_openflow::error::{self as ofe, OfError};
use flowpath_openflow::msg::{BundleAdd, BundleControl, Command, FlowMod, Request};
use std::collections::HashMap;

/// `OFPRR_DELETE`.
pub(super) const REASON_DELETE: u8 = 2;
/// `OFPRR_GROUP_DELETE`.
pub(super) const REASON_GROUP_DELETE: u8 = 3;

/// What applying a flow_mod did, for what follows it outside the rule
/// list: learned flows to delete, flow-removed messages, monitors.
pub(super) struct Applied {
    /// Learned flows to delete with the rules (selector and strictness;
    /// boxed: a selector holds a rule, and a bundle keeps one `Applied`
    /// per message).
    pub learned: Option<Box<(Sel, bool)>>,
    /// The rules deleted.
    pub removed: Vec<InstalledRule>,
    /// The rules added or modified (as they are now), when some flow
    /// monitor is there to see them.
    pub changed: Vec<Rule>,
    /// Whether `changed` were modified (not added).
    pub modified: bool,
    /// Why `removed` went (`OFPRR_*`).
    pub reason: u8,
}

impl Default for Applied {
    fn default() -> Self {
        Applied {
            learned: None,
            removed: Vec::new(),
            changed: Vec::new(),
            modified: false,
            reason: REASON_DELETE,
        }
    }
}

/// Applies one flow_mod to `rules` (nothing changes on an error). The
/// rules added or modified are copied into the result only with
/// `monitored` (a flow monitor is open somewhere).
pub(super) fn apply(
    rules: &mut RuleSet,
    fm: &FlowMod,
    monitored: bool,
) -> Result<Applied, OfError> {
    let rule = check(rules, fm)?.unwrap_or_else(|| fm.rule.clone());
    apply_checked(rules, fm, rule, monitored)
}

/// The checks of [`apply`] that do not change `rules`: the flow a flow_mod
/// installs, as the rule parser reads it (None: `fm.rule` as it is), with
/// its groups in `rules`.
pub(super) fn check(rules: &RuleSet, fm: &FlowMod) -> Result<Option<Rule>, OfError> {
    if fm.buffer_id != u32::MAX {
        return Err(ofe::BRC_BUFFER_UNKNOWN);
    }
    let needs_rule = matches!(
        fm.command,
        Command::Add | Command::Modify | Command::ModifyStrict
    );
    if !needs_rule {
        return Ok(None);
    }
    let read = validate(&fm.rule)?;
    let rule = read.as_ref().unwrap_or(&fm.rule);
    // A Geneve option field must be mapped (`add-tlv-map`) before a flow
    // uses it.
    if flowpath_ofproto::tunnel::unmapped_tlv_fields(rule, &rules.tlv_map()) != 0 {
        return Err(ofe::FMFC_INVALID_TLV_FIELD);
    }
    rules
        .check_groups(std::slice::from_ref(rule))
        .map_err(|_| ofe::BAC_BAD_OUT_GROUP)?;
    Ok(read)
}

/// [`apply`] with `rule` from [`check`]: fails only on an add with
/// `check_overlap` that overlaps a flow.
fn apply_checked(
    rules: &mut RuleSet,
    fm: &FlowMod,
    rule: Rule,
    monitored: bool,
) -> Result<Applied, OfError> {
    let mut out = Applied::default();
    match fm.command {
        Command::Add => {
            if rule.flags & flags::CHECK_OVERLAP != 0
                && rules.rules().iter().any(|r| overlaps(&r.rule, &rule))
            {
                return Err(ofe::FMFC_OVERLAP);
            }
            if monitored {
                out.changed.push(rule.clone());
            }
            rules.add_one(rule);
        }
        Command::Modify | Command::ModifyStrict => {
            let sel = Sel::from_flow_mod(fm);
            let strict = fm.command == Command::ModifyStrict;
            let reset = rule.flags & flags::RESET_COUNTS != 0;
            let changed = if strict {
                rules.modify_exact(
                    fm.table,
                    &rule,
                    |r| sel.selects(r, true),
                    reset,
                    fm.new_cookie,
                )
            } else {
                rules.modify_where(|r| sel.selects(r, false), &rule, reset, fm.new_cookie)
            };
            if changed.is_empty() && fm.cookie_mask == 0 && fm.new_cookie.is_some() {
                if monitored {
                    out.changed.push(rule.clone());
                }
                rules.add_one(rule);
            } else {
                out.modified = true;
                out.changed = changed;
            }
        }
        Command::Delete | Command::DeleteStrict => {
            let sel = Sel::from_flow_mod(fm);
            let strict = fm.command == Command::DeleteStrict;
            out.removed = if strict {
                let (p, m) = (fm.rule.priority, fm.rule.matching);
                rules.delete_exact(fm.table, p, &m, |r| sel.selects(r, true))
            } else {
                rules.delete_where(|r| sel.selects(r, false))
            };
            out.learned = Some(Box::new((sel, strict)));
        }
    }
    Ok(out)
}

/// At most this many bundles open on one connection.
pub(super) const MAX_BUNDLES: usize = 64;
/// At most this many messages in one connection's bundles together
/// (memory is bounded; Open vSwitch has no such limit).
pub(super) const MAX_BUNDLED_MESSAGES: usize = 1_000_000;

/// One open bundle.
pub(super) struct Bundle {
    flags: u16,
    closed: bool,
    msgs: Vec<BundleAdd>,
}

/// A connection's bundles.
#[derive(Default)]
pub(super) struct Bundles {
    open: HashMap<u32, Bundle>,
    n_msgs: usize,
}

/// The outcome of a bundle control request.
pub(super) enum CtrlOutcome {
    /// Answer with the reply.
    Reply,
    /// Commit these messages (the bundle is gone from the table).
    Commit(Vec<BundleAdd>),
}

impl Bundles {
    /// Open, close or discard as Open vSwitch does (a failed open or close
    /// throws the bundle away); a commit hands the messages back.
    pub(super) fn control(&mut self, c: &BundleControl) -> Result<CtrlOutcome, OfError> {
        use flowpath_openflow::msg::BundleCtrl::*;
        match c.ctrl {
            Open => {
                if self.remove(c.id).is_some() {
                    return Err(ofe::BFC_BAD_ID);
                }
                if self.open.len() >= MAX_BUNDLES {
                    return Err(ofe::BFC_OUT_OF_BUNDLES);
                }
                self.open.insert(
                    c.id,
                    Bundle {
                        flags: c.flags,
                        closed: false,
                        msgs: Vec::new(),
                    },
                );
                Ok(CtrlOutcome::Reply)
            }
            Close => {
                let b = self.open.get_mut(&c.id).ok_or(ofe::BFC_BAD_ID)?;
                if b.closed {
                    self.remove(c.id);
                    return Err(ofe::BFC_BUNDLE_CLOSED);
                }
                if b.flags != c.flags {
                    self.remove(c.id);
                    return Err(ofe::BFC_BAD_FLAGS);
                }
                b.closed = true;
                Ok(CtrlOutcome::Reply)
            }
            Discard => {
                self.remove(c.id).ok_or(ofe::BFC_BAD_ID)?;
                Ok(CtrlOutcome::Reply)
            }
            Commit => {
                let b = self.remove(c.id).ok_or(ofe::BFC_BAD_ID)?;
                if b.flags != c.flags {
                    return Err(ofe::BFC_BAD_FLAGS);
                }
                Ok(CtrlOutcome::Commit(b.msgs))
            }
        }
    }

    /// Adds a message (opening the bundle if it is not open).
    pub(super) fn add(&mut self, a: BundleAdd) -> Result<(), OfError> {
        if self.n_msgs >= MAX_BUNDLED_MESSAGES {
            return Err(ofe::BFC_MSG_TOO_MANY);
        }
        match self.open.get(&a.id) {
            None => {
                if self.open.len() >= MAX_BUNDLES {
                    return Err(ofe::BFC_OUT_OF_BUNDLES);
                }
                self.open.insert(
                    a.id,
                    Bundle {
                        flags: a.flags,
                        closed: false,
                        msgs: Vec::new(),
                    },
                );
            }
            Some(b) if b.closed => {
                self.remove(a.id);
                return Err(ofe::BFC_BUNDLE_CLOSED);
            }
            Some(b) if b.flags != a.flags => {
                self.remove(a.id);
                return Err(ofe::BFC_BAD_FLAGS);
            }
            Some(_) => {}
        }
        if let Some(b) = self.open.get_mut(&a.id) {
            b.msgs.push(a);
            self.n_msgs += 1;
        }
        Ok(())
    }

    fn remove(&mut self, id: u32) -> Option<Bundle> {
        let b = self.open.remove(&id)?;
        self.n_msgs -= b.msgs.len();
        Some(b)
    }
}

/// What a committed bundle did.
#[derive(Default)]
pub(super) struct Committed {
    /// Each flow_mod's and group_mod's effects, in order.
    pub applied: Vec<Applied>,
    /// Groups deleted.
    pub groups_deleted: Vec<u32>,
    /// Packet-outs to run now that the flows are in place.
    pub packet_outs: Vec<flowpath_openflow::msg::PacketOut>,
    /// Port changes to make after the commit (checked already).
    pub port_mods: Vec<flowpath_openflow::msg::PortMod>,
}

/// Applies a bundle's messages to `rules`, all or none: on the first
/// failure `rules` is as before and the error comes back with the failing
/// message's bytes (Open vSwitch answers it, then fails the commit with
/// `OFPBFC_MSG_FAILED`). Port changes are checked against `ports` and
/// made after the commit, as Open vSwitch: not in an atomic bundle
/// (`OFPBFC_MSG_FAILED`).
pub(super) fn commit(
    rules: &mut RuleSet,
    msgs: Vec<BundleAdd>,
    ports: &[flowpath_openflow::msg::PortInfo],
    monitored: bool,
) -> Result<Committed, (OfError, Vec<u8>)> {
    if msgs.iter().all(checked_up_front) {
        return commit_checked(rules, msgs, ports, monitored);
    }
    let backup = rules.clone();
    let mut done = make_room(rules, &msgs);
    for m in msgs {
        let r = match m.inner.request {
            Request::FlowMod(fm) => apply(rules, &fm, monitored).map(|a| done.applied.push(a)),
            Request::GroupMod(gm) => {
                super::session::apply_group_mod(rules, gm).map(|(a, deleted)| {
                    done.applied.push(a);
                    done.groups_deleted.extend(deleted);
                })
            }
            Request::PacketOut(po) => {
                done.packet_outs.push(po);
                Ok(())
            }
            Request::PortMod(pm) => check_port_mod(&m, &pm, ports).map(|_| {
                done.port_mods.push(pm);
            }),
            _ => Err(ofe::BFC_MSG_UNSUP),
        };
        if let Err(e) = r {
            *rules = backup;
            return Err((e, m.raw));
        }
    }
    Ok(done)
}

/// An empty result for `msgs`, with room made in it and in `rules` for
/// what they add.
fn make_room(rules: &mut RuleSet, msgs: &[BundleAdd]) -> Committed {
    let mut done = Committed::default();
    done.applied.reserve(msgs.len());
    let adds = msgs
        .iter()
        .filter(|m| matches!(&m.inner.request, Request::FlowMod(fm) if fm.command == Command::Add))
        .count();
    // Room for adds into a smaller table (a bundle replacing a large
    // table's flows adds in place: no copy of it to make room).
    if adds > rules.rules().len() {
        rules.reserve(adds);
    }
    done
}

/// Whether a bundled message can only fail in checks made before the
/// bundle changes anything (not a group_mod, not an add with
/// `check_overlap`: those depend on what earlier messages did).
fn checked_up_front(m: &BundleAdd) -> bool {
    match &m.inner.request {
        Request::FlowMod(fm) => {
            fm.command != Command::Add || fm.rule.flags & flags::CHECK_OVERLAP == 0
        }
        Request::PacketOut(_) | Request::PortMod(_) => true,
        _ => false,
    }
}

/// A port change's check in a bundle.
fn check_port_mod(
    m: &BundleAdd,
    pm: &flowpath_openflow::msg::PortMod,
    ports: &[flowpath_openflow::msg::PortInfo],
) -> Result<(), OfError> {
    if m.flags & flowpath_openflow::msg::BF_ATOMIC != 0 {
        return Err(ofe::BFC_MSG_FAILED);
    }
    match ports.iter().find(|p| p.no == pm.port) {
        None => Err(ofe::PMFC_BAD_PORT),
        Some(p) if p.mac != pm.hw_addr => Err(ofe::PMFC_BAD_HW_ADDR),
        Some(_) => Ok(()),
    }
}

/// [`commit`] of messages that all pass [`checked_up_front`]: every
/// message is checked first, in order, then applied, so that a failure
/// leaves `rules` untouched without a copy of them (a copy of 100,000
/// flows was a tenth of a large bundle's commit).
fn commit_checked(
    rules: &mut RuleSet,
    msgs: Vec<BundleAdd>,
    ports: &[flowpath_openflow::msg::PortInfo],
    monitored: bool,
) -> Result<Committed, (OfError, Vec<u8>)> {
    let mut checked = Vec::with_capacity(msgs.len());
    for m in &msgs {
        let r = match &m.inner.request {
            Request::FlowMod(fm) => check(rules, fm),
            Request::PortMod(pm) => check_port_mod(m, pm, ports).map(|_| None),
            _ => Ok(None),
        };
        match r {
            Ok(r) => checked.push(r),
            Err(e) => return Err((e, m.raw.clone())),
        }
    }
    let mut done = make_room(rules, &msgs);
    for (m, rule) in msgs.into_iter().zip(checked) {
        match (m.inner.request, rule) {
            (Request::FlowMod(mut fm), read) => {
                // The flow as it came, unless the parser read it
                // differently (an add's is moved, not copied: the
                // selector of a modify or delete needs it).
                let rule = match read {
                    Some(r) => r,
                    None if fm.command == Command::Add => std::mem::take(&mut fm.rule),
                    None => fm.rule.clone(),
                };
                // No check_overlap here: nothing fails.
                match apply_checked(rules, &fm, rule, monitored) {
                    Ok(a) => done.applied.push(a),
                    Err(e) => return Err((e, m.raw)),
                }
            }
            (Request::PacketOut(po), _) => done.packet_outs.push(po),
            (Request::PortMod(pm), _) => done.port_mods.push(pm),
            _ => {}
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowpath_openflow::header::Header;
    use flowpath_openflow::msg::{Command, FlowMod};
    use flowpath_openflow::msg::{Decoded, PortInfo, PortMod, BF_ATOMIC, BF_ORDERED};

    fn add(flags: u16, port: u32, hw_addr: [u8; 6]) -> BundleAdd {
        BundleAdd {
            id: 1,
            flags,
            raw: vec![1, 15, 0, 8, 0, 0, 0, 0],
            inner: Box::new(Decoded {
                header: Header::new(1, 15, 0),
                request: Request::PortMod(PortMod {
                    port,
                    hw_addr,
                    config: 1,
                    mask: 1,
                }),
            }),
        }
    }

    fn flow_add(text: &str, raw: u8) -> BundleAdd {
        let rule = flowpath_ofproto::parse::parse_rule(text).unwrap();
        BundleAdd {
            id: 1,
            flags: BF_ATOMIC,
            raw: vec![raw],
            inner: Box::new(Decoded {
                header: Header::new(4, 14, 0),
                request: Request::FlowMod(FlowMod {
                    command: Command::Add,
                    rule,
                    table: Some(0),
                    cookie: 0,
                    cookie_mask: 0,
                    new_cookie: None,
                    out_port: None,
                    out_group: None,
                    buffer_id: u32::MAX,
                }),
            }),
        }
    }

    /// A bundle whose third flow is refused changes nothing, whether its
    /// messages are all checked first or applied one by one on a copy
    /// (an add with `check_overlap`), and the failing message is named.
    #[test]
    fn a_failed_bundle_changes_nothing() {
        use flowpath_flow::field::FieldId;
        let base = "priority=9,ip,nw_src=10.0.0.9,actions=output:1";
        for overlap_check in ["", "check_overlap,"] {
            let mut rules = RuleSet::new(vec![], vec![], vec![], vec![1, 2]);
            commit(&mut rules, vec![flow_add(base, 0)], &[], false).unwrap();
            let before: Vec<String> = rules.rules().iter().map(|r| r.rule.to_string()).collect();
            let mut bad = flow_add("priority=5,tcp,tp_dst=80,actions=output:2", 3);
            if let Request::FlowMod(fm) = &mut bad.inner.request {
                // The match loses `tcp`'s nw_proto: tp_dst lacks its
                // prerequisite.
                FieldId::NwProto
                    .info()
                    .set_mask(&mut fm.rule.matching.mask, 0);
                FieldId::NwProto.info().set(&mut fm.rule.matching.key, 0);
            }
            let msgs = vec![
                flow_add(&format!("{overlap_check}priority=1,ip,actions=output:2"), 1),
                flow_add("priority=9,ip,nw_src=10.0.0.9,actions=output:2", 2),
                bad,
                flow_add("priority=3,actions=drop", 4),
            ];
            let (e, raw) = commit(&mut rules, msgs, &[], false).err().unwrap();
            assert_eq!((e, raw), (ofe::BAC_MATCH_INCONSISTENT, vec![3]));
            let after: Vec<String> = rules.rules().iter().map(|r| r.rule.to_string()).collect();
            assert_eq!(before, after, "{overlap_check}");
            // Without the bad flow the same bundle commits.
            let msgs = vec![
                flow_add(&format!("{overlap_check}priority=1,ip,actions=output:2"), 1),
                flow_add("priority=9,ip,nw_src=10.0.0.9,actions=output:2", 2),
            ];
            let done = commit(&mut rules, msgs, &[], false).unwrap();
            assert_eq!(done.applied.len(), 2);
            let now: Vec<String> = rules.rules().iter().map(|r| r.rule.to_string()).collect();
            assert_eq!(now.len(), 2, "{now:?}");
            assert!(now
                .iter()
                .any(|r| r.contains("nw_src=10.0.0.9") && r.ends_with("output:2")));
        }
    }

    #[test]
    fn port_mods_commit_only_in_non_atomic_bundles() {
        let mac = [2, 0, 0, 0, 0, 1];
        let ports = [PortInfo {
            no: 1,
            name: "p1".into(),
            mac,
            up: true,
            config: 0,
        }];
        let mut rules = RuleSet::new(Vec::new(), Vec::new(), Vec::new(), vec![1]);
        let done = commit(&mut rules, vec![add(BF_ORDERED, 1, mac)], &ports, false).unwrap();
        assert_eq!(done.port_mods.len(), 1);
        let err = |a| {
            commit(&mut rules.clone(), vec![a], &ports, false)
                .err()
                .unwrap()
                .0
        };
        assert_eq!(err(add(BF_ATOMIC, 1, mac)), ofe::BFC_MSG_FAILED);
        assert_eq!(err(add(0, 2, mac)), ofe::PMFC_BAD_PORT);
        assert_eq!(err(add(0, 1, [0; 6])), ofe::PMFC_BAD_HW_ADDR);
    }
}
