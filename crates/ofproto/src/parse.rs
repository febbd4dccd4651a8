//! Reading flows in `ovs-ofctl add-flow` / `add-flows` syntax.
//!
//! What: [`parse_rule`] reads one flow, [`parse_rules`] an `add-flows` file
//! (one flow per line; `#` starts a comment; blank lines are skipped; the
//! first error is returned and nothing is loaded), [`parse_match`] just a
//! match (`in_port=1,tcp,tp_dst=80`, as `flowpath trace` takes a packet).
//!
//! The syntax (ovs-ofctl(8), "Flow Syntax"): `key=value` pairs and bare
//! keywords separated by commas and/or white space (white space around `=`
//! is tolerated); `actions=` (or `action=`) comes last and takes the rest
//! of the text.
//! Keys are the rule keywords (`table`, `priority`, `cookie`,
//! `idle_timeout`, `hard_timeout`), the field names and aliases of the
//! registry ([`flowpath_flow::field`]), with their value syntax
//! ([`flowpath_flow::value`]); bare keywords are the protocol shorthands
//! (`ip`, `tcp6`, `arp`, ...). The statistics that `dump-flows` prints
//! (`duration`, `n_packets`, `n_bytes`, `idle_age`, `hard_age`) are ignored,
//! as OVS does, so its output can be read back.
//!
//! Checks, as OVS makes them: prerequisites are checked once the whole match
//! is read (`tp_dst=80,tcp` is fine), naming the field and what it needs;
//! a field given twice (or two fields sharing bits, `tp_dst` and `tcp_dst`)
//! is refused (but register views, `xreg0` and `reg1`, may overlap: the
//! later bits win, as in OVS); a protocol keyword that contradicts a field or another
//! keyword (`tcp,udp`) is refused, one that agrees (`ip,tcp`) is not. As in
//! OVS's flow syntax, `nw_src`/`nw_dst`/`nw_proto` mean `arp_spa`/`arp_tpa`/
//! `arp_op` in an ARP match, and `icmp_type`/`icmp_code` mean the ICMPv6
//! ones in an `icmp6` match (which is how such matches print).
//! Things OVS has and flowpath has not (tunnel and conntrack fields, MPLS,
//! `learn`, `conjunction`, ...) are refused as "not supported
//! by flowpath" rather than as unknown.
//!
//! Invariant: every function here is total: no input makes it panic
//! (proptest over arbitrary strings).

use crate::action::{is_unsupported_field, parse_instructions};
use crate::rule::{flags, Rule, RuleError};
use flowpath_flow::field::{self, FieldId, FieldInfo};
use flowpath_flow::matching::PROTOCOLS;
use flowpath_flow::value::{parse_uint, parse_value};
use flowpath_flow::{FlowMask, Match, Regs};

/// One piece of a flow's text.
#[derive(Debug, PartialEq, Eq)]
enum Item<'a> {
    /// A bare word (`tcp`).
    Word(&'a str),
    /// `key=value`.
    Pair(&'a str, &'a str),
    /// The text after `actions=`.
    Actions(&'a str),
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_sep(b: u8) -> bool {
    b == b',' || is_space(b)
}

/// Splits a flow into items. Only ASCII bytes are looked for, so every
/// slice boundary is a char boundary.
fn tokenize(text: &str) -> Result<Vec<Item<'_>>, RuleError> {
    let b = text.as_bytes();
    let n = b.len();
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while i < n && is_sep(b[i]) {
            i += 1;
        }
        if i == n {
            return Ok(out);
        }
        let start = i;
        while i < n && !is_sep(b[i]) && b[i] != b'=' {
            i += 1;
        }
        let key = &text[start..i];
        let mut j = i;
        while j < n && is_space(b[j]) {
            j += 1;
        }
        if j < n && b[j] == b'=' {
            if key.is_empty() {
                return Err(RuleError::new(
                    None,
                    format!("'=' without a field name in '{}'", text.trim()),
                ));
            }
            j += 1;
            if key == "actions" || key == "action" {
                out.push(Item::Actions(&text[j..]));
                return Ok(out);
            }
            let after_eq = j;
            while j < n && is_space(b[j]) {
                j += 1;
            }
            let vstart = j;
            while j < n && !is_sep(b[j]) {
                j += 1;
            }
            let value = &text[vstart..j];
            if vstart > after_eq && value.contains('=') {
                // `tp_dst= actions=drop`: the next word is a pair of its
                // own, so this value is empty.
                out.push(Item::Pair(key, ""));
                i = after_eq;
            } else {
                out.push(Item::Pair(key, value));
                i = j;
            }
        } else {
            out.push(Item::Word(key));
        }
    }
}

/// Rule keywords that take a value (not match fields).
const RULE_KEYWORDS: &[&str] = &[
    "table",
    "priority",
    "cookie",
    "idle_timeout",
    "hard_timeout",
    "importance",
];

/// What `dump-flows` prints and OVS ignores on input.
const IGNORED: &[&str] = &["duration", "n_packets", "n_bytes", "idle_age", "hard_age"];

/// Flow flags and keywords OVS has that flowpath does not.
const UNSUPPORTED_WORDS: &[&str] = &["no_readonly_table", "allow_hidden_fields", "mpls", "mplsm"];

/// Builds a match field by field, remembering what was given explicitly
/// for the duplicate and prerequisite checks.
struct MatchBuilder<'a> {
    m: Match,
    /// Fields given explicitly: as written, registry entry, storage bits.
    given: Vec<(&'a str, &'static FieldInfo, (FlowMask, Regs))>,
}

fn overlaps(a: &(FlowMask, Regs), b: &(FlowMask, Regs)) -> bool {
    !a.0.intersect(&b.0).is_catchall() || !a.1.intersect(&b.1).is_zero()
}

/// The key and register bits a field occupies.
fn storage_of(f: &FieldInfo) -> (FlowMask, Regs) {
    let mut regs = Regs::zero();
    f.set_regs_masked(&mut regs, u128::MAX, u128::MAX);
    (f.storage_mask(), regs)
}

fn exact(m: &Match, id: FieldId) -> Option<u128> {
    let f = id.info();
    (f.get_mask(&m.mask) == f.full_mask()).then(|| f.get(&m.key))
}

/// The field `f` stands for in match `m`: `nw_src` is `arp_spa` in an ARP
/// match, `icmp_type` is `icmpv6_type` in an ICMPv6 match.
fn effective(f: &'static FieldInfo, m: &Match) -> &'static FieldInfo {
    let dl_type = exact(m, FieldId::EthType);
    let is_arp = matches!(dl_type, Some(0x0806 | 0x8035));
    let is_icmp6 = dl_type == Some(0x86dd) && exact(m, FieldId::NwProto) == Some(58);
    let id = match f.id {
        FieldId::NwSrc if is_arp => FieldId::ArpSpa,
        FieldId::NwDst if is_arp => FieldId::ArpTpa,
        FieldId::NwProto if is_arp => FieldId::ArpOp,
        FieldId::IcmpType if is_icmp6 => FieldId::Icmpv6Type,
        FieldId::IcmpCode if is_icmp6 => FieldId::Icmpv6Code,
        _ => return f,
    };
    id.info()
}

impl<'a> MatchBuilder<'a> {
    fn new() -> Self {
        MatchBuilder {
            m: Match::catchall(),
            given: Vec::new(),
        }
    }

    /// Applies a bare word: a protocol keyword, or an error.
    fn word(&mut self, w: &str) -> Result<(), RuleError> {
        if let Some(&(_, dl_type, proto)) = PROTOCOLS.iter().find(|(n, _, _)| *n == w) {
            let agrees = |id: FieldId, v: u128| {
                let f = id.info();
                let m = f.get_mask(&self.m.mask);
                f.get(&self.m.key) & m == v & m
            };
            if (dl_type != 0 && !agrees(FieldId::EthType, u128::from(dl_type)))
                || proto.is_some_and(|p| !agrees(FieldId::NwProto, u128::from(p)))
            {
                return Err(RuleError::new(
                    Some(w),
                    format!("{w} contradicts a protocol or field given earlier"),
                ));
            }
            self.m.set_protocol(w);
            return Ok(());
        }
        if UNSUPPORTED_WORDS.contains(&w) || is_unsupported_field(w) {
            return Err(RuleError::new(
                Some(w),
                format!("{w} is not supported by flowpath"),
            ));
        }
        if field::lookup(w).is_some() || RULE_KEYWORDS.contains(&w) || IGNORED.contains(&w) {
            return Err(RuleError::new(
                Some(w),
                format!("{w} needs a value ({w}=...)"),
            ));
        }
        if w == "actions" {
            return Err(RuleError::new(None, "actions must be written actions=..."));
        }
        Err(RuleError::new(Some(w), "unknown field or keyword"))
    }

    /// Applies `key=value` for a match field.
    fn field(&mut self, key: &'a str, value: &str) -> Result<(), RuleError> {
        let Some(f) = field::lookup(key) else {
            if is_unsupported_field(key) || UNSUPPORTED_WORDS.contains(&key) {
                return Err(RuleError::new(
                    Some(key),
                    format!("{key} is not supported by flowpath"),
                ));
            }
            if PROTOCOLS.iter().any(|(n, _, _)| *n == key) {
                return Err(RuleError::new(
                    Some(key),
                    format!("{key} is a protocol keyword and takes no value"),
                ));
            }
            if matches!(key, "out_port" | "out_group") {
                return Err(RuleError::new(
                    Some(key),
                    "only del-flows and dump-flows take it, not add-flow",
                ));
            }
            return Err(RuleError::new(Some(key), "unknown field or keyword"));
        };
        let (v, mask) = parse_value(f, value).map_err(|e| RuleError::new(Some(key), e.0))?;
        let storage = storage_of(f);
        // Register views overlap by design (`xreg0` is `reg0` and `reg1`):
        // as OVS, the later one's bits win; the same field twice is still
        // an error.
        if let Some((earlier, ef, _)) = self.given.iter().find(|(_, ef, s)| {
            overlaps(s, &storage) && (ef.id == f.id || !(f.is_reg() && ef.is_reg()))
        }) {
            let msg = if ef.id == f.id {
                format!("{key} given twice")
            } else {
                format!("{key} overlaps {earlier}, given earlier")
            };
            return Err(RuleError::new(Some(key), msg));
        }
        if overlaps(&(self.m.mask, Regs::zero()), &storage) {
            // Bits pinned by a protocol keyword: the value must agree.
            let pinned = f.get_mask(&self.m.mask) & mask;
            if f.get(&self.m.key) & pinned != v & pinned {
                return Err(RuleError::new(
                    Some(key),
                    format!("{key}={value} contradicts a protocol keyword given earlier"),
                ));
            }
        }
        if f.is_reg() {
            // As OVS: a register field given replaces all of its bits (an
            // earlier overlapping view keeps only the others).
            f.set_regs_masked(&mut self.m.regs_mask, 0, u128::MAX);
            f.set_regs_masked(&mut self.m.regs, 0, u128::MAX);
        }
        self.m.set_field_masked(f, v, mask);
        self.given.push((key, f, storage));
        Ok(())
    }

    /// Checks every given field's prerequisites against the whole match.
    fn finish(self) -> Result<Match, RuleError> {
        for (key, f, _) in &self.given {
            let eff = effective(f, &self.m);
            if let Err(msg) = self.m.check_prereqs(eff) {
                let msg = match f.id {
                    FieldId::NwSrc | FieldId::NwDst => format!("{key} requires ip, arp or rarp"),
                    FieldId::NwProto => format!("{key} requires ip, ipv6, arp or rarp"),
                    FieldId::IcmpType | FieldId::IcmpCode => {
                        format!("{key} requires icmp or icmp6")
                    }
                    // Name the field as it was written (an alias, maybe).
                    _ => match msg.strip_prefix(eff.name) {
                        Some(rest) if rest.starts_with(' ') => format!("{key}{rest}"),
                        _ => msg,
                    },
                };
                return Err(RuleError::new(Some(key), msg));
            }
        }
        Ok(self.m)
    }
}

fn number(key: &str, value: &str, max: u128) -> Result<u128, RuleError> {
    let n = parse_uint(value).map_err(|e| RuleError::new(Some(key), e.0))?;
    if n > max {
        return Err(RuleError::new(
            Some(key),
            format!("{} is out of range (0 to {max})", value.trim()),
        ));
    }
    Ok(n)
}

/// The bit of a flow-flag keyword (`send_flow_rem`, ...).
fn flag_bit(w: &str) -> Option<u8> {
    flags::NAMES.iter().find(|(n, _)| *n == w).map(|(_, b)| *b)
}

/// True when some packet matches both `a` and `b`: they agree on every bit
/// both care about.
fn overlap(a: &Match, b: &Match) -> bool {
    (0..flowpath_flow::FLOW_WORDS).all(|i| {
        let both = a.mask.w[i] & b.mask.w[i];
        (a.key.w[i] ^ b.key.w[i]) & both == 0
    })
}

/// Parses one flow in `ovs-ofctl add-flow` syntax (`line` is 0).
pub fn parse_rule(text: &str) -> Result<Rule, RuleError> {
    let mut rule = Rule::default();
    let mut b = MatchBuilder::new();
    let mut seen: Vec<&str> = Vec::new();
    let mut actions = None;
    for item in tokenize(text)? {
        match item {
            Item::Word(w) if flag_bit(w).is_some() => {
                rule.flags |= flag_bit(w).unwrap_or(0);
            }
            Item::Word(w) => b.word(w)?,
            Item::Pair(k, v) if RULE_KEYWORDS.contains(&k) => {
                if seen.contains(&k) {
                    return Err(RuleError::new(Some(k), format!("{k} given twice")));
                }
                seen.push(k);
                match k {
                    "table" => rule.table = number(k, v, 254)? as u8,
                    "priority" => rule.priority = number(k, v, 0xffff)? as u16,
                    "idle_timeout" => rule.idle_timeout = number(k, v, 0xffff)? as u16,
                    "hard_timeout" => rule.hard_timeout = number(k, v, 0xffff)? as u16,
                    "importance" => rule.importance = number(k, v, 0xffff)? as u16,
                    _ => {
                        if v.contains('/') {
                            return Err(RuleError::new(
                                Some(k),
                                "cookie=VALUE/MASK selects flows for del-flows and dump-flows; add-flow takes cookie=VALUE",
                            ));
                        }
                        rule.cookie = number(k, v, u128::from(u64::MAX))? as u64;
                    }
                }
            }
            Item::Pair(k, _) if IGNORED.contains(&k) => {}
            Item::Pair(k, v) => b.field(k, v)?,
            Item::Actions(a) => actions = Some(a),
        }
    }
    rule.matching = b.finish()?;
    let Some(a) = actions else {
        return Err(RuleError::new(None, "must specify an action (actions=...)"));
    };
    (rule.actions, rule.write_actions) = parse_instructions(a, &rule.matching, rule.table)?;
    Ok(rule)
}

/// True when `rule` (decoded from the wire or built in code) is already
/// what [`parse_rule`] gives back for its text, so that reading it through
/// the parser would check and change nothing: every significant bit of its
/// match belongs to a field whose prerequisites the match meets (a
/// non-maskable field matched whole), and its instructions are only of
/// the kinds the parser checks against nothing but the rule's own table
/// (outputs to numbered ports, `NORMAL`, `FLOOD`, `ALL`, `IN_PORT`,
/// `controller`, `group`, `resubmit`, `goto_table` to a later table). False means "not
/// known": read the rule through `parse_rule(&rule.to_string())`, which
/// names what is wrong if something is.
pub fn is_canonical(rule: &Rule) -> bool {
    use crate::action::Action;
    let numbered = |p: u32| (1..0xff00).contains(&p);
    let plain = |a: &Action| match *a {
        Action::Output(p) => numbered(p),
        Action::Normal
        | Action::Flood
        | Action::All
        | Action::InPort
        | Action::Group(_)
        | Action::Controller { .. } => true,
        Action::Resubmit { port, table } => {
            port.is_none_or(numbered) && table.is_none_or(|t| t <= 254)
        }
        Action::GotoTable(t) => t > rule.table && t <= 254,
        _ => false,
    };
    let n = rule.actions.len();
    let goto_last = rule.actions[..n.saturating_sub(1)]
        .iter()
        .all(|a| !matches!(a, Action::GotoTable(_)));
    if !rule.write_actions.is_empty() || !goto_last || !rule.actions.iter().all(plain) {
        return false;
    }
    let m = &rule.matching;
    let mut covered = FlowMask::catchall();
    let by_word = fields_by_word();
    let present = m.mask.w.iter().enumerate().filter(|(_, w)| **w != 0);
    for f in present.flat_map(|(i, _)| by_word[i].iter().copied()) {
        let fm = f.get_mask(&m.mask);
        if fm == 0 {
            continue;
        }
        // A partly masked non-maskable field (dl_vlan within vlan_tci)
        // covers nothing: another field must.
        if (f.maskable || fm == f.full_mask()) && m.prereqs_met(effective(f, m)) {
            f.add_storage_to(&mut covered);
        }
    }
    m.mask.is_subset_of(&covered)
}

/// For each word of a flow key, the fields stored in it (registers
/// aside).
fn fields_by_word() -> &'static [Vec<&'static FieldInfo>] {
    static BY_WORD: std::sync::OnceLock<Vec<Vec<&'static FieldInfo>>> = std::sync::OnceLock::new();
    BY_WORD.get_or_init(|| {
        (0..flowpath_flow::FLOW_WORDS)
            .map(|i| {
                field::FIELDS
                    .iter()
                    .filter(|f| f.word_bits() & (1 << i) != 0)
                    .collect()
            })
            .collect()
    })
}

/// Parses an `add-flows` file: one flow per line, `#` to the end of a line
/// is a comment, blank lines are skipped, a line ending in `\` continues on
/// the next (as `ovs-ofctl` reads files). All or nothing: the first error
/// is returned (located at the 1-based line of `file` where the flow
/// starts) and no rule is. A flow with `check_overlap` is refused if an
/// earlier flow of the same table and priority overlaps it.
pub fn parse_rules(text: &str, file: Option<&str>) -> Result<Vec<Rule>, RuleError> {
    let mut rules: Vec<Rule> = Vec::new();
    for (start, text) in logical_lines(text, file)? {
        let mut rule = parse_rule(&text).map_err(|e| e.at(file, start))?;
        rule.line = start;
        if rule.flags & flags::CHECK_OVERLAP != 0 {
            if let Some(o) = rules.iter().find(|o| {
                o.table == rule.table
                    && o.priority == rule.priority
                    && overlap(&o.matching, &rule.matching)
            }) {
                return Err(RuleError::new(
                    Some("check_overlap"),
                    format!(
                        "overlaps the flow on line {} (same table and priority)",
                        o.line
                    ),
                )
                .at(file, start));
            }
        }
        rules.push(rule);
    }
    Ok(rules)
}

/// The non-blank logical lines of an `ovs-ofctl` file with their first
/// physical line: `#` starts a comment, a line ending in `\` continues on
/// the next. Fails if the last line continues.
pub(crate) fn logical_lines(
    text: &str,
    file: Option<&str>,
) -> Result<Vec<(usize, String)>, RuleError> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut start = 0;
    for (i, line) in text.lines().enumerate() {
        let part = line.split('#').next().unwrap_or("");
        if cur.is_empty() {
            start = i + 1;
        }
        if let Some(head) = part.trim_end().strip_suffix('\\') {
            cur.push_str(head);
            cur.push(' ');
            continue;
        }
        cur.push_str(part);
        let t = std::mem::take(&mut cur);
        if !t.trim().is_empty() {
            out.push((start, t));
        }
    }
    if !cur.trim().is_empty() {
        return Err(
            RuleError::new(None, "the last line ends with '\\' but no line follows")
                .at(file, start),
        );
    }
    Ok(out)
}

/// Parses a packet description for `flowpath trace`: an `ovs-ofctl` match
/// (`in_port=1,tcp,tp_dst=80`) or a datapath flow
/// (`in_port(1),eth(...),eth_type(0x0800),ipv4(...)`), as `ofproto/trace`
/// takes either. Fields not given are 0.
pub fn parse_packet(text: &str) -> Result<flowpath_flow::FlowKey, RuleError> {
    if crate::dpflow::is_dp_flow(text) {
        return crate::dpflow::parse_dp_flow(text).map(|(k, _)| k);
    }
    // A recirculated packet's metadata (`recirc_id=ID,dp_hash=H`), as
    // `ofproto/trace` takes it: the translation frozen under ID resumes.
    let (mut recirc_id, mut dp_hash) = (0u32, 0u32);
    let m = parse_match_with(text, &mut |k, v| {
        let slot = match k {
            "recirc_id" => &mut recirc_id,
            "dp_hash" => &mut dp_hash,
            _ => return None,
        };
        let n = parse_uint(v)
            .ok()
            .and_then(|x| u32::try_from(x).ok())
            .ok_or_else(|| RuleError::new(Some(k), format!("{k}: '{v}' is not a 32-bit number")));
        Some(n.map(|n| *slot = n))
    })?;
    if recirc_id > 0xffff {
        return Err(RuleError::new(
            Some("recirc_id"),
            format!("recirc_id={recirc_id:#x}: flowpath's ids are below 0x10000"),
        ));
    }
    let mut key = m.key;
    key.set_recirc_id(recirc_id);
    // The key keeps the hash's low 16 bits; a non-zero hash stays non-zero.
    if dp_hash != 0 {
        key.set_dp_hash(flowpath_flow::key::dp_hash_bits(dp_hash));
    }
    // As `ofproto/trace` would have them: every packet enters the pipeline
    // with its registers zero (a recirculated one gets its translation's).
    if !m.regs_mask.is_zero() {
        return Err(RuleError::new(
            None,
            "registers and metadata are not part of a packet (every packet starts with them zero)",
        ));
    }
    Ok(key)
}

/// Parses just a match (`in_port=1,tcp,tp_dst=80`): fields and protocol
/// keywords, with the same syntax and checks as a rule's match.
pub fn parse_match(text: &str) -> Result<Match, RuleError> {
    parse_match_with(text, &mut |_, _| None)
}

/// Takes a `KEY=VALUE` pair it knows (returning `Some`) before the match.
type ExtraPair<'a> = dyn FnMut(&str, &str) -> Option<Result<(), RuleError>> + 'a;

/// [`parse_match`] where `extra` takes the pairs it knows first.
fn parse_match_with(text: &str, extra: &mut ExtraPair<'_>) -> Result<Match, RuleError> {
    let mut b = MatchBuilder::new();
    for item in tokenize(text)? {
        if let Item::Pair(k, v) = &item {
            if let Some(r) = extra(k, v) {
                r?;
                continue;
            }
        }
        match item {
            Item::Word(w) => b.word(w)?,
            Item::Pair(k, _) if RULE_KEYWORDS.contains(&k) || IGNORED.contains(&k) => {
                return Err(RuleError::new(
                    Some(k),
                    format!("{k} belongs to a rule, not to a match"),
                ));
            }
            Item::Pair(k, v) => b.field(k, v)?,
            Item::Actions(_) => {
                return Err(RuleError::new(
                    Some("actions"),
                    "actions belong to a rule, not to a match",
                ))
            }
        }
    }
    b.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::Action;
    use crate::rule::DEFAULT_PRIORITY;
    use flowpath_flow::Style;

    #[test]
    fn tokens() {
        assert_eq!(
            tokenize("tcp tp_dst = 80 ,, priority=5 actions=output:1, 2").unwrap(),
            vec![
                Item::Word("tcp"),
                Item::Pair("tp_dst", "80"),
                Item::Pair("priority", "5"),
                Item::Actions("output:1, 2"),
            ]
        );
        assert!(tokenize("=5").is_err());
        assert_eq!(
            tokenize("tp_dst= actions=drop").unwrap(),
            vec![Item::Pair("tp_dst", ""), Item::Actions("drop")]
        );
        assert_eq!(tokenize(" \t, ").unwrap(), vec![]);
        // `action=` is accepted for `actions=`, as OVS does.
        assert_eq!(
            tokenize("table=0 in_port=1 priority=16,tcp,action=output(3)").unwrap(),
            vec![
                Item::Pair("table", "0"),
                Item::Pair("in_port", "1"),
                Item::Pair("priority", "16"),
                Item::Word("tcp"),
                Item::Actions("output(3)"),
            ]
        );
    }

    #[test]
    fn separators() {
        let a = parse_rule("tcp,tp_dst=80 actions=drop").unwrap();
        let b = parse_rule("tcp tp_dst=80,actions=drop").unwrap();
        assert_eq!(a, b);
        let c = parse_rule("priority=5 ,  dl_type=0x800 actions=1").unwrap();
        assert_eq!(c.priority, 5);
        assert_eq!(c.matching.format(Style::Rule), "ip");
        assert_eq!(c.actions, vec![Action::Output(1)]);
    }

    #[test]
    fn order_free_prereqs_and_aliases() {
        let a = parse_rule("tp_dst=80,tcp,actions=drop").unwrap();
        assert_eq!(a.to_string(), "priority=32768,tcp,tp_dst=80 actions=drop");
        let r = parse_rule("arp,nw_src=10.0.0.1,nw_proto=1 actions=drop").unwrap();
        assert_eq!(
            r.matching.format(Style::Rule),
            "arp,arp_spa=10.0.0.1,arp_op=1"
        );
        let r = parse_rule("icmp6,icmp_type=135,nd_target=fe80::1 actions=drop").unwrap();
        assert_eq!(
            r.matching.format(Style::Rule),
            "icmp6,icmp_type=135,nd_target=fe80::1"
        );
        assert!(parse_rule("icmp_type=3 actions=drop").is_err());
        let e = parse_rule("ip_ecn=1 actions=drop").unwrap_err();
        assert_eq!(e.to_string(), "ip_ecn requires ip or ipv6");
    }

    #[test]
    fn duplicates_and_conflicts() {
        assert!(parse_rule("tcp,tp_dst=80,tp_dst=81 actions=drop").is_err());
        assert!(parse_rule("tcp,tp_dst=80,tcp_dst=80 actions=drop").is_err());
        assert!(parse_rule("priority=1,priority=2 actions=drop").is_err());
        assert!(parse_rule("tcp,udp actions=drop").is_err());
        assert!(parse_rule("dl_type=0x86dd,tcp actions=drop").is_err());
        assert!(parse_rule("tcp,nw_proto=17 actions=drop").is_err());
        assert!(parse_rule("ip,tcp actions=drop").is_ok());
        assert!(parse_rule("ip,nw_proto=47 actions=drop").is_ok());
        assert!(parse_rule("dl_vlan=5,dl_vlan_pcp=3 actions=drop").is_ok());
        assert!(parse_rule("dl_vlan=5,vlan_tci=0x1005 actions=drop").is_err());
    }

    #[test]
    fn rule_keywords() {
        let r =
            parse_rule("cookie=0x10 table=3 idle_timeout=5 hard_timeout=6 priority=0 actions=drop")
                .unwrap();
        assert_eq!(
            (
                r.cookie,
                r.table,
                r.idle_timeout,
                r.hard_timeout,
                r.priority
            ),
            (16, 3, 5, 6, 0)
        );
        assert_eq!(
            parse_rule("actions=drop").unwrap().priority,
            DEFAULT_PRIORITY
        );
        assert!(parse_rule("table=255 actions=drop").is_err());
        assert!(parse_rule("priority=65536 actions=drop").is_err());
        assert!(parse_rule("cookie=1/1 actions=drop").is_err());
        let r = parse_rule(
            " cookie=0x0, duration=3.5s, table=0, n_packets=4, n_bytes=240, idle_age=1, priority=7,ip actions=output:1",
        )
        .unwrap();
        assert_eq!(r.priority, 7);
        assert!(parse_rule("tcp")
            .unwrap_err()
            .msg
            .contains("must specify an action"));
    }

    #[test]
    fn matches_alone() {
        let m = parse_match("in_port=1,tcp,nw_dst=7.7.7.104,tp_dst=90").unwrap();
        assert_eq!(
            m.format(Style::Rule),
            "tcp,in_port=1,nw_dst=7.7.7.104,tp_dst=90"
        );
        assert_eq!(parse_match("").unwrap(), Match::catchall());
        assert!(parse_match("priority=1").is_err());
        assert!(parse_match("tcp actions=drop").is_err());
        assert!(parse_match("tp_dst=80").is_err());
    }

    #[test]
    fn flags_importance_and_continuations() {
        let r = parse_rule("importance=7 send_flow_rem no_byte_counts priority=3 actions=drop")
            .unwrap();
        assert_eq!(r.importance, 7);
        assert_eq!(r.flags, flags::SEND_FLOW_REM | flags::NO_BYTE_COUNTS);
        assert_eq!(
            r.to_string(),
            "importance=7, send_flow_rem, no_byte_counts, priority=3 actions=drop"
        );
        assert_eq!(parse_rule(&r.to_string()).unwrap(), r);
        let rules = parse_rules(
            "priority=5,ip,\\\n  nw_dst=10.0.0.0/8 \\\n actions=output:1\nip actions=drop\n",
            Some("c.flows"),
        )
        .unwrap();
        assert_eq!((rules[0].line, rules[1].line), (1, 4));
        assert_eq!(
            rules[0].matching.format(Style::Rule),
            "ip,nw_dst=10.0.0.0/8"
        );
        let e = parse_rules("ip actions=drop \\\n", Some("c.flows")).unwrap_err();
        assert!(e.to_string().contains("no line follows"), "{e}");
        // check_overlap: an overlapping flow of the same table and priority
        // is refused, naming the earlier one; other priorities are fine.
        let e = parse_rules(
            "priority=5,ip,nw_dst=10.0.0.0/8 actions=drop\npriority=5,check_overlap,ip,nw_src=1.2.3.4 actions=drop\n",
            Some("o.flows"),
        )
        .unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.to_string().contains("overlaps the flow on line 1"), "{e}");
        assert!(parse_rules(
            "priority=5,ip,nw_dst=10.0.0.0/8 actions=drop\npriority=5,check_overlap,ip,nw_dst=11.0.0.0/8 actions=drop\npriority=6,check_overlap,ip actions=drop\n",
            None,
        )
        .is_ok());
    }

    #[test]
    fn files() {
        let rules = parse_rules(
            "# comment\n\npriority=1,actions=drop # trailing\r\n  ip actions=1\n",
            Some("x.flows"),
        )
        .unwrap();
        assert_eq!(rules.len(), 2);
        assert_eq!((rules[0].line, rules[1].line), (3, 4));
        let e = parse_rules(
            "actions=1\nactions=2\nnw_src=1.2.3.4 actions=3\n",
            Some("x.flows"),
        )
        .unwrap_err();
        assert_eq!(e.line, 3);
        assert!(
            e.to_string().starts_with("x.flows:3: nw_src requires"),
            "{e}"
        );
    }
}
