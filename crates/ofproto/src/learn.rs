//! The `learn(...)` action: a flow built from the packet being translated.
//!
//! # What
//!
//! `learn(table=T,priority=P,idle_timeout=I,hard_timeout=H,cookie=C,SPEC,...)`
//! makes a flow for table `T` whose match and actions come from the specs,
//! in `ovs-actions(7)`'s syntax:
//!
//! - `FIELD[a..b]=SRC[c..d]`: match FIELD's bits on the packet's SRC bits;
//!   `FIELD[a..b]` alone is `FIELD[a..b]=FIELD[a..b]`; `FIELD=VALUE`
//!   matches a constant;
//! - `load:SRC[c..d]->DST[a..b]` / `load:VALUE->DST[a..b]`: the flow loads
//!   the packet's bits (a constant) into DST;
//! - `output:SRC[c..d]`: the flow outputs to the port the packet's bits
//!   name.
//!
//! Translating a `learn` makes every source bit significant in the megaflow
//! (as OVS's `learn_mask`) and, when side effects are allowed (an upcall,
//! not a trace or a revalidation), yields the flow ([`Learn::flow`]); the
//! slow path adds it to the tables after the batch.
//!
//! # Storage
//!
//! Actions are small `Copy` values; a learn's specs are not, so
//! `Action::Learn` holds an index into an append-only process-wide registry
//! of parsed learns ([`intern`], [`get`]), identical texts sharing one
//! entry. The registry grows with the distinct learn actions ever parsed.

use crate::action::{is_unsupported_field, Action, Subfield};
use crate::rule::{Rule, RuleError, DEFAULT_PRIORITY};
use flowpath_flow::field;
use flowpath_flow::value::{parse_uint, parse_value};
use flowpath_flow::{FlowKey, Match, Regs};
use std::fmt;
use std::sync::{Arc, OnceLock, RwLock};

/// Where a spec's value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Src {
    /// The packet's (or the registers') bits.
    Field(Subfield),
    /// A constant (right-aligned).
    Value(u128),
}

/// One spec of a `learn`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Spec {
    /// The learned flow matches `dst`'s bits on `src`.
    Match {
        /// The bits matched.
        dst: Subfield,
        /// Their value.
        src: Src,
    },
    /// The learned flow loads `src` into `dst`.
    Load {
        /// The bits loaded.
        dst: Subfield,
        /// Their value.
        src: Src,
    },
    /// The learned flow outputs to the port in `src`.
    Output(Subfield),
}

/// A parsed `learn(...)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Learn {
    /// The learned flow's table.
    pub table: u8,
    /// Its priority.
    pub priority: u16,
    /// Its idle timeout (seconds, 0 = none).
    pub idle_timeout: u16,
    /// Its hard timeout.
    pub hard_timeout: u16,
    /// `fin_idle_timeout`, `fin_hard_timeout` (kept and printed).
    pub fin_timeouts: (u16, u16),
    /// Its cookie.
    pub cookie: u64,
    /// `send_flow_rem`, `delete_learned` (kept and printed).
    pub flags: (bool, bool),
    /// `limit=N`: no new flow is learned while the learned flow's table
    /// holds `N` or more flows with its cookie (0: no limit), as OVS.
    pub limit: u32,
    /// `result_dst=BIT`: where translation stores whether learning
    /// succeeded (1) or hit the limit (0); a register or `metadata` bit.
    pub result_dst: Option<Subfield>,
    /// The specs, in order.
    pub specs: Vec<Spec>,
}

fn registry() -> &'static RwLock<Vec<Arc<Learn>>> {
    static R: OnceLock<RwLock<Vec<Arc<Learn>>>> = OnceLock::new();
    R.get_or_init(|| RwLock::new(Vec::new()))
}

/// The registry index of `l` (added if new).
pub fn intern(l: Learn) -> u32 {
    let r = registry();
    if let Ok(v) = r.read() {
        if let Some(i) = v.iter().position(|x| **x == l) {
            return i as u32;
        }
    }
    let mut v = match r.write() {
        Ok(v) => v,
        Err(p) => p.into_inner(),
    };
    if let Some(i) = v.iter().position(|x| **x == l) {
        return i as u32;
    }
    v.push(Arc::new(l));
    (v.len() - 1) as u32
}

/// The learn at index `id` (every index comes from [`intern`]).
pub fn get(id: u32) -> Option<Arc<Learn>> {
    let v = match registry().read() {
        Ok(v) => v,
        Err(p) => p.into_inner(),
    };
    v.get(id as usize).cloned()
}

fn fail<T>(msg: impl Into<String>) -> Result<T, RuleError> {
    Err(RuleError::new(Some("learn"), msg))
}

/// Parses the text inside `learn(...)`.
pub fn parse(text: &str) -> Result<Learn, RuleError> {
    let mut l = Learn {
        table: 1,
        priority: DEFAULT_PRIORITY,
        idle_timeout: 0,
        hard_timeout: 0,
        fin_timeouts: (0, 0),
        cookie: 0,
        flags: (false, false),
        limit: 0,
        result_dst: None,
        specs: Vec::new(),
    };
    let sub = |s: &str| Subfield::parse(s).map_err(|e| RuleError::new(Some("learn"), e));
    let num = |k: &str, v: &str, max: u128| -> Result<u128, RuleError> {
        parse_uint(v.trim())
            .ok()
            .filter(|n| *n <= max)
            .ok_or_else(|| {
                RuleError::new(Some("learn"), format!("{k}={v}: not a number up to {max}"))
            })
    };
    for item in split_top(text) {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        if let Some(rest) = item.strip_prefix("load:") {
            let Some((src, dst)) = rest.split_once("->") else {
                return fail(format!("'{item}' is not load:SRC->DST"));
            };
            let dst = sub(dst)?;
            if !dst.field.info().writable {
                return fail(format!(
                    "{}: destination not writable",
                    dst.field.info().name
                ));
            }
            let src = src_of(src.trim(), dst.n_bits)?;
            l.specs.push(Spec::Load { dst, src });
            continue;
        }
        if let Some(rest) = item.strip_prefix("output:") {
            l.specs.push(Spec::Output(sub(rest)?));
            continue;
        }
        let (k, v) = match item.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim())),
            None => (item, None),
        };
        match (k, v) {
            ("table", Some(v)) => l.table = num(k, v, 254)? as u8,
            ("priority", Some(v)) => l.priority = num(k, v, 0xffff)? as u16,
            ("idle_timeout", Some(v)) => l.idle_timeout = num(k, v, 0xffff)? as u16,
            ("hard_timeout", Some(v)) => l.hard_timeout = num(k, v, 0xffff)? as u16,
            ("fin_idle_timeout", Some(v)) => l.fin_timeouts.0 = num(k, v, 0xffff)? as u16,
            ("fin_hard_timeout", Some(v)) => l.fin_timeouts.1 = num(k, v, 0xffff)? as u16,
            ("cookie", Some(v)) => l.cookie = num(k, v, u128::from(u64::MAX))? as u64,
            ("send_flow_rem", None) => l.flags.0 = true,
            ("delete_learned", None) => l.flags.1 = true,
            ("limit", Some(v)) => l.limit = num(k, v, u128::from(u32::MAX))? as u32,
            ("result_dst", Some(v)) => {
                let d = sub(v)?;
                if d.n_bits != 1 {
                    return fail("result_dst in 'learn' action must be a single bit");
                }
                if !d.field.info().is_reg() {
                    return fail(format!(
                        "flowpath takes result_dst in a register or metadata bit, not in {}",
                        d.field.info().name
                    ));
                }
                l.result_dst = Some(d);
            }
            (k, v) => {
                let name = k.split('[').next().unwrap_or(k);
                if field::lookup(name).is_none() {
                    if is_unsupported_field(name) {
                        return Err(RuleError::new(
                            Some("learn"),
                            format!("field {name} is not supported by flowpath"),
                        ));
                    }
                    return fail(format!("unknown field or keyword '{k}'"));
                }
                let dst = sub(k)?;
                let src = match v {
                    None => Src::Field(dst),
                    // FIELD=VALUE (a constant in the field's syntax) or
                    // FIELD[..]=SRC[..].
                    Some(v)
                        if !k.contains('[')
                            && field::lookup(v.split('[').next().unwrap_or(v)).is_none() =>
                    {
                        let info = dst.field.info();
                        let (value, mask) =
                            parse_value(info, v).map_err(|e| RuleError::new(Some("learn"), e.0))?;
                        if mask != info.full_mask() {
                            return fail(format!("{k}={v}: a learned match takes no mask"));
                        }
                        Src::Value(value)
                    }
                    Some(v) => src_of(v, dst.n_bits)?,
                };
                l.specs.push(Spec::Match { dst, src });
            }
        }
    }
    // As ovs-ofctl: the learned flow's match must pin the prerequisites
    // of the fields it matches (`dl_type=0x800,nw_proto=6,NXM_OF_TCP_SRC[]`).
    let mut template = Match::catchall();
    for sp in &l.specs {
        if let Spec::Match {
            dst,
            src: Src::Value(v),
        } = sp
        {
            template.set_field_masked(dst.field.info(), *v << dst.ofs, dst.mask());
        }
    }
    for sp in &l.specs {
        if let Spec::Match { dst, .. } = sp {
            if let Err(e) = template.check_prereqs(dst.field.info()) {
                return fail(format!(
                    "field {} lacks correct prerequisites in the learned flow's match ({e})",
                    dst.field.info().name
                ));
            }
        }
    }
    Ok(l)
}

/// A source: a bit range of `n_bits` bits or a number that fits in them.
fn src_of(s: &str, n_bits: u8) -> Result<Src, RuleError> {
    if let Ok(v) = parse_uint(s) {
        if n_bits < 128 && v >> n_bits != 0 {
            return fail(format!("{s} does not fit in {n_bits} bits"));
        }
        return Ok(Src::Value(v));
    }
    let sf = Subfield::parse(s).map_err(|e| RuleError::new(Some("learn"), e))?;
    if sf.n_bits != n_bits {
        return fail(format!(
            "{s}: source is {} bits wide but destination is {n_bits} bits wide",
            sf.n_bits
        ));
    }
    Ok(Src::Field(sf))
}

/// Splits at commas outside brackets and parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn read(sf: &Subfield, key: &FlowKey, regs: &Regs) -> u128 {
    let info = sf.field.info();
    let v = if info.is_reg() {
        info.get_regs(regs)
    } else {
        info.get(key)
    };
    (v & sf.mask()) >> sf.ofs
}

impl Learn {
    /// Every source bit the learned flow is made of (they become
    /// significant in the megaflow, as OVS's `learn_mask` makes them).
    pub fn sources(&self) -> impl Iterator<Item = &Subfield> {
        self.specs.iter().filter_map(|s| match s {
            Spec::Match {
                src: Src::Field(f), ..
            }
            | Spec::Load {
                src: Src::Field(f), ..
            }
            | Spec::Output(f) => Some(f),
            _ => None,
        })
    }

    /// The flow learned from a packet with key `key` and registers `regs`;
    /// `None` when its match would lack a field's prerequisites (as OVS,
    /// which then learns nothing).
    pub fn flow(&self, key: &FlowKey, regs: &Regs) -> Option<Rule> {
        let mut m = Match::catchall();
        let mut actions = Vec::new();
        // As OVS: the fin timeouts become the learned flow's first action.
        if self.fin_timeouts != (0, 0) {
            actions.push(Action::FinTimeout {
                idle: self.fin_timeouts.0,
                hard: self.fin_timeouts.1,
            });
        }
        for s in &self.specs {
            match s {
                Spec::Match { dst, src } => {
                    let v = match src {
                        Src::Field(f) => read(f, key, regs),
                        Src::Value(v) => *v,
                    };
                    m.set_field_masked(dst.field.info(), v << dst.ofs, dst.mask());
                }
                Spec::Load { dst, src } => {
                    let value = match src {
                        Src::Field(f) => read(f, key, regs),
                        Src::Value(v) => *v,
                    };
                    actions.push(Action::Load { dst: *dst, value });
                }
                Spec::Output(f) => actions.push(Action::Output(read(f, key, regs) as u32)),
            }
        }
        for s in &self.specs {
            if let Spec::Match { dst, .. } = s {
                m.prereqs_met(dst.field.info()).then_some(())?;
            }
        }
        let mut r = Rule::new(m, actions);
        r.table = self.table;
        r.priority = self.priority;
        r.cookie = self.cookie;
        r.idle_timeout = self.idle_timeout;
        r.hard_timeout = self.hard_timeout;
        Some(r)
    }
}

impl fmt::Display for Learn {
    /// As `ovs-ofctl dump-flows` prints it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "learn(table={}", self.table)?;
        if self.idle_timeout != 0 {
            write!(f, ",idle_timeout={}", self.idle_timeout)?;
        }
        if self.hard_timeout != 0 {
            write!(f, ",hard_timeout={}", self.hard_timeout)?;
        }
        if self.fin_timeouts.0 != 0 {
            write!(f, ",fin_idle_timeout={}", self.fin_timeouts.0)?;
        }
        if self.fin_timeouts.1 != 0 {
            write!(f, ",fin_hard_timeout={}", self.fin_timeouts.1)?;
        }
        if self.priority != DEFAULT_PRIORITY {
            write!(f, ",priority={}", self.priority)?;
        }
        if self.flags.0 {
            f.write_str(",send_flow_rem")?;
        }
        if self.flags.1 {
            f.write_str(",delete_learned")?;
        }
        if self.cookie != 0 {
            write!(f, ",cookie={:#x}", self.cookie)?;
        }
        if self.limit != 0 {
            write!(f, ",limit={}", self.limit)?;
        }
        if let Some(d) = self.result_dst {
            write!(f, ",result_dst={d}")?;
        }
        let src = |s: &Src| match s {
            Src::Field(sf) => sf.to_string(),
            Src::Value(v) => format!("{v:#x}"),
        };
        for s in &self.specs {
            match s {
                Spec::Match {
                    dst,
                    src: Src::Field(sf),
                } if sf == dst => write!(f, ",{dst}")?,
                Spec::Match { dst, src: s } => write!(f, ",{dst}={}", src(s))?,
                Spec::Load { dst, src: s } => write!(f, ",load:{}->{dst}", src(s))?,
                Spec::Output(sf) => write!(f, ",output:{sf}")?,
            }
        }
        f.write_str(")")
    }
}

/// The flows `learn` made on a bridge, shared by its workers (which add
/// them after an upcall batch and rebuild their tables when the set
/// changes) and its control path (`dump-flows`). A flow learned again
/// replaces the one with the same table, priority and match, restarting
/// its hard timeout (as OVS's learn refresh sets the rule's modification
/// time). [`LearnedFlows::expire`] enforces both timeouts as OVS's
/// `rule_expire` does: the hard timeout from the last (re)learning, the
/// idle timeout from the last packet that went through the flow, which
/// the workers report with [`LearnedFlows::touch`] once a second from
/// their megaflows' use (and the flows those megaflows' packets learn are
/// refreshed, [`LearnedFlows::refresh`], as OVS's translation cache does);
/// the idle timeout is enforced with [`IDLE_SLACK_MS`] of slack (one
/// reporting interval).
#[derive(Debug, Default)]
pub struct LearnedFlows {
    flows: std::sync::Mutex<Vec<Learned>>,
    seq: std::sync::atomic::AtomicU64,
}

/// What a TCP FIN or RST through `rule` does to its timeouts when its
/// actions hold a `fin_timeout` (the first one): each comes down to the
/// action's where the action gives one and it is lower, or the rule had
/// none (OVS's `reduce_timeout`). Returns whether anything changed.
pub fn reduce_timeouts(rule: &mut Rule) -> bool {
    let Some((idle, hard)) = rule.actions.iter().find_map(|a| match a {
        Action::FinTimeout { idle, hard } => Some((*idle, *hard)),
        _ => None,
    }) else {
        return false;
    };
    let reduce = |max: u16, t: &mut u16| {
        if max != 0 && (*t == 0 || *t > max) {
            *t = max;
            true
        } else {
            false
        }
    };
    let a = reduce(idle, &mut rule.idle_timeout);
    let b = reduce(hard, &mut rule.hard_timeout);
    a || b
}

/// How late an idle learned flow may be removed: the workers report use
/// once a second.
pub const IDLE_SLACK_MS: u64 = 1000;

#[derive(Debug)]
struct Learned {
    rule: Rule,
    /// Learned or last relearned (the hard timeout's start).
    modified_ms: u64,
    /// Learned, or last used by a packet (the idle timeout's start).
    used_ms: u64,
}

impl Learned {
    fn same_flow(&self, r: &Rule) -> bool {
        self.rule.table == r.table
            && self.rule.priority == r.priority
            && self.rule.matching == r.matching
    }
}

impl LearnedFlows {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Learned>> {
        match self.flows.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Adds (or refreshes) `rules`, learned at `now_ms`. The change number
    /// moves only when the set of flows changed.
    pub fn add(&self, rules: Vec<Rule>, now_ms: u64) {
        self.refresh(rules.into_iter().map(|r| (r, now_ms)).collect());
    }

    /// Records that packets went through these flows (same table,
    /// priority and match), each by its time. The change number does not
    /// move.
    pub fn touch<'a>(&self, used: impl IntoIterator<Item = (&'a Rule, u64)>) {
        let mut v = self.lock();
        for (r, t) in used {
            if let Some(x) = v.iter_mut().find(|x| x.same_flow(r)) {
                x.used_ms = x.used_ms.max(t);
            }
        }
    }

    /// Adds or refreshes flows learned at the given times (by an upcall,
    /// or by their megaflows' use without one): a flow there restarts its
    /// hard timeout from then (its actions replaced if they changed; its
    /// timeouts, perhaps reduced by a FIN, kept); a new one — or one that
    /// expired meanwhile, as OVS's translation cache re-creates it — is
    /// added. The change number moves only when the set of flows changed.
    pub fn refresh(&self, flows: Vec<(Rule, u64)>) {
        let mut v = self.lock();
        let mut changed = false;
        for (r, t) in flows {
            match v.iter_mut().find(|x| x.same_flow(&r)) {
                Some(x) => {
                    x.modified_ms = x.modified_ms.max(t);
                    if x.rule.actions != r.actions {
                        x.rule = r;
                        changed = true;
                    }
                }
                None => {
                    v.push(Learned {
                        rule: r,
                        modified_ms: t,
                        used_ms: t,
                    });
                    changed = true;
                }
            }
        }
        if changed {
            self.seq.fetch_add(1, std::sync::atomic::Ordering::Release);
        }
    }

    /// Records that TCP FIN or RST packets went through these flows: a
    /// flow with a `fin_timeout` action gets its idle and hard timeouts
    /// reduced to that action's (OVS's `ofproto_rule_reduce_timeouts`: a
    /// timeout comes down to the action's when the action gives one and it
    /// is lower or there was none). The change number does not move
    /// (translation does not depend on timeouts).
    pub fn saw_fin<'a>(&self, flows: impl IntoIterator<Item = &'a Rule>) {
        let mut v = self.lock();
        for r in flows {
            if let Some(x) = v.iter_mut().find(|x| x.same_flow(r)) {
                reduce_timeouts(&mut x.rule);
            }
        }
    }

    /// Whether some learned flow has a timeout or a `fin_timeout` action
    /// (only then do the workers report use and refresh them).
    pub fn has_timeouts(&self) -> bool {
        self.lock().iter().any(|x| {
            x.rule.idle_timeout != 0
                || x.rule.hard_timeout != 0
                || x.rule
                    .actions
                    .iter()
                    .any(|a| matches!(a, Action::FinTimeout { .. }))
        })
    }

    /// Removes the flows whose hard timeout has passed at `now_ms` since
    /// they were (re)learned, or whose idle timeout (plus
    /// [`IDLE_SLACK_MS`]) has since a packet last went through them.
    pub fn expire(&self, now_ms: u64) {
        let mut v = self.lock();
        let n = v.len();
        v.retain(|x| {
            let hard = u64::from(x.rule.hard_timeout) * 1000;
            let idle = u64::from(x.rule.idle_timeout) * 1000;
            (hard == 0 || now_ms < x.modified_ms + hard)
                && (idle == 0 || now_ms < x.used_ms + idle + IDLE_SLACK_MS)
        });
        if v.len() != n {
            self.seq.fetch_add(1, std::sync::atomic::Ordering::Release);
        }
    }

    /// Removes the learned flows `pred` selects (`del-flows`); returns how
    /// many.
    pub fn remove_where(&self, pred: impl Fn(&Rule) -> bool) -> usize {
        let mut v = self.lock();
        let n = v.len();
        v.retain(|x| !pred(&x.rule));
        let removed = n - v.len();
        if removed > 0 {
            self.seq.fetch_add(1, std::sync::atomic::Ordering::Release);
        }
        removed
    }

    /// The change number (moves when flows are added, changed or removed).
    pub fn seq(&self) -> u64 {
        self.seq.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The learned flows, oldest first.
    pub fn flows(&self) -> Vec<Rule> {
        self.lock().iter().map(|x| x.rule.clone()).collect()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}
