//! Parsing action lists: splitting a list into actions, the shared
//! argument parsers (ports, tables, subfields, numbers), instructions.

use super::parse_one::parse_one;
use super::*;
use flowpath_flow::value::{parse_uint, parse_value};

/// How an action's argument was written.
#[derive(Clone, Copy)]
pub(super) enum Arg<'a> {
    /// `name` alone.
    None,
    /// `name:arg` or `name=arg`.
    Colon(&'a str),
    /// `name(arg)`.
    Paren(&'a str),
}

/// Splits an action list at top-level commas and white space; commas inside
/// parentheses belong to the action (`resubmit(,2)`).
pub(super) fn split_actions(text: &str) -> Result<Vec<&str>, RuleError> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth.checked_sub(1).ok_or_else(|| {
                    RuleError::new(
                        Some("actions"),
                        format!("unbalanced ')' in '{}'", text.trim()),
                    )
                })?;
            }
            ',' | ' ' | '\t' | '\r' | '\n' if depth == 0 => {
                if i > start {
                    out.push(&text[start..i]);
                }
                // The separator is one ASCII byte.
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(RuleError::new(
            Some("actions"),
            format!("unbalanced '(' in '{}'", text.trim()),
        ));
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    Ok(out)
}

/// Splits `name:arg`, `name=arg` or `name(arg)`.
pub(super) fn split_action(item: &str) -> Result<(&str, Arg<'_>), RuleError> {
    // `check_pkt_larger(N)->DST` has text after its ')': all of it is the
    // argument (`parse_check_pkt_larger` reads it).
    if let Some(name) = item
        .get(..16)
        .filter(|p| p.eq_ignore_ascii_case("check_pkt_larger"))
    {
        return Ok((name, Arg::Colon(&item[16..])));
    }
    let Some(i) = item.find([':', '=', '(']) else {
        return Ok((item, Arg::None));
    };
    let name = &item[..i];
    let rest = &item[i + 1..];
    if item.as_bytes()[i] == b'(' {
        // split_actions only yields items with balanced parentheses, so
        // the argument closes at the item's last ')'.
        match rest.strip_suffix(')') {
            Some(arg) => Ok((name, Arg::Paren(arg))),
            None => Err(RuleError::new(
                Some(name),
                format!("unexpected text after ')' in '{item}'"),
            )),
        }
    } else {
        Ok((name, Arg::Colon(rest)))
    }
}

pub(super) fn fail<T>(name: &str, msg: impl Into<String>) -> Result<T, RuleError> {
    Err(RuleError::new(Some(name), msg))
}

pub(super) fn unsupported<T>(name: &str, what: &str) -> Result<T, RuleError> {
    fail(name, format!("{what} is not supported by flowpath"))
}

/// Where a port argument sends the packet.
pub(super) enum Dest {
    Number(u32),
    InPort,
    All,
    Flood,
    Controller,
    Normal,
}

pub(super) const PORT_RANGE: &str = "1 to 65279, or IN_PORT, ALL, FLOOD, CONTROLLER, LOCAL, NORMAL";

pub(super) fn parse_port(name: &str, s: &str) -> Result<Dest, RuleError> {
    let s = s.trim();
    let by_name = match s.to_ascii_lowercase().as_str() {
        "in_port" => Some(Dest::InPort),
        "all" => Some(Dest::All),
        "flood" => Some(Dest::Flood),
        "controller" => Some(Dest::Controller),
        "local" => Some(Dest::Number(OFPP_LOCAL)),
        "normal" => Some(Dest::Normal),
        "table" => return unsupported(name, &format!("port {s}")),
        "none" | "any" => return fail(name, format!("{s} is not a valid port ({PORT_RANGE})")),
        _ => None,
    };
    if let Some(p) = by_name {
        return Ok(p);
    }
    if s.starts_with("NXM_") || s.starts_with("OXM_") || s.starts_with("reg") {
        return unsupported(name, &format!("a port taken from a field ('{s}')"));
    }
    let n =
        parse_uint(s).map_err(|e| RuleError::new(Some(name), format!("{e} (port expected)")))?;
    match n {
        1..0xff00 => Ok(Dest::Number(n as u32)),
        0xfff8 => Ok(Dest::InPort),
        0xfffb => Ok(Dest::Flood),
        0xfffc => Ok(Dest::All),
        0xfffd => Ok(Dest::Controller),
        0xfffe => Ok(Dest::Number(OFPP_LOCAL)),
        0xfffa => Ok(Dest::Normal),
        0xfff9 => unsupported(name, &format!("reserved port {n:#x}")),
        _ => fail(name, format!("port {s} is out of range ({PORT_RANGE})")),
    }
}

pub(super) fn port_action(p: Dest) -> Action {
    match p {
        Dest::Number(n) => Action::Output(n),
        Dest::InPort => Action::InPort,
        Dest::All => Action::All,
        Dest::Flood => Action::Flood,
        Dest::Controller => Action::controller(CONTROLLER_MAX_LEN),
        Dest::Normal => Action::Normal,
    }
}

pub(super) fn parse_table(name: &str, s: &str) -> Result<u8, RuleError> {
    let n =
        parse_uint(s).map_err(|e| RuleError::new(Some(name), format!("{e} (table expected)")))?;
    if n > 254 {
        return fail(
            name,
            format!("table {} is out of range (0 to 254)", s.trim()),
        );
    }
    Ok(n as u8)
}

pub(super) fn parse_small(name: &str, s: &str, max: u128, what: &str) -> Result<u128, RuleError> {
    let n = parse_uint(s).map_err(|e| RuleError::new(Some(name), e.0))?;
    if n > max {
        return fail(
            name,
            format!("{what} {} is out of range (0 to {max})", s.trim()),
        );
    }
    Ok(n)
}

pub(super) fn parse_controller(name: &str, arg: Arg<'_>) -> Result<Action, RuleError> {
    let (mut max_len, mut reason, mut id) = (CONTROLLER_MAX_LEN, 1u8, 0u16);
    let (mut userdata, mut pause, mut meter_id) = (0u32, false, None);
    match arg {
        Arg::None => {}
        Arg::Colon(s) => max_len = parse_small(name, s, 0xffff, "max_len")? as u16,
        Arg::Paren(s) => {
            for kv in s.split(',').map(str::trim).filter(|kv| !kv.is_empty()) {
                let (k, v) = match kv.split_once('=') {
                    Some((k, v)) => (k.trim(), Some(v.trim())),
                    None => (kv, None),
                };
                match (k, v) {
                    ("max_len", Some(v)) => {
                        max_len = parse_small(name, v, 0xffff, "max_len")? as u16
                    }
                    ("id", Some(v)) => id = parse_small(name, v, 0xffff, "controller id")? as u16,
                    ("meter_id", Some(v)) => {
                        meter_id =
                            Some(parse_small(name, v, u128::from(u32::MAX), "meter id")? as u32)
                    }
                    ("reason", Some(v)) => {
                        let Some(r) = PACKET_IN_REASONS.iter().position(|n| *n == v) else {
                            return fail(
                                name,
                                format!(
                                    "unknown reason \"{v}\" (expected one of {})",
                                    PACKET_IN_REASONS.join(", ")
                                ),
                            );
                        };
                        reason = r as u8;
                    }
                    ("userdata", Some(v)) => {
                        let Some(bytes) = parse_hex_bytes(v) else {
                            return fail(
                                name,
                                format!("userdata '{v}' is not hex bytes (userdata=00.11.22)"),
                            );
                        };
                        userdata = if bytes.is_empty() {
                            0
                        } else {
                            super::userdata::intern(&bytes)
                        };
                    }
                    ("pause", None) => pause = true,
                    _ => return fail(name, format!("unknown controller option '{kv}'")),
                }
            }
        }
    }
    Ok(Action::Controller {
        max_len,
        reason,
        id,
        userdata,
        pause,
        meter_id,
    })
}

/// `00.11.22` (the form of `note:` and `controller(userdata=)`): the
/// bytes, or `None` when a part is not one or two hex digits (empty parts
/// are skipped, as OVS skips them).
fn parse_hex_bytes(text: &str) -> Option<Vec<u8>> {
    text.split('.')
        .filter(|b| !b.is_empty())
        .map(|b| {
            (b.len() <= 2)
                .then(|| u8::from_str_radix(b, 16).ok())
                .flatten()
        })
        .collect()
}

pub(super) fn parse_resubmit(name: &str, arg: Arg<'_>) -> Result<Action, RuleError> {
    let port_of = |s: &str| -> Result<Option<u32>, RuleError> {
        match parse_port(name, s)? {
            Dest::Number(n) => Ok(Some(n)),
            Dest::InPort => Ok(None),
            _ => fail(
                name,
                format!("{} is not a port that resubmit can use", s.trim()),
            ),
        }
    };
    match arg {
        Arg::None => fail(name, "resubmit needs a port or a table (resubmit:PORT, resubmit(,TABLE), resubmit(PORT,TABLE))"),
        Arg::Colon(s) => Ok(Action::Resubmit {
            port: port_of(s)?,
            table: None,
        }),
        Arg::Paren(s) => {
            let parts: Vec<&str> = s.split(',').map(str::trim).collect();
            if parts.len() > 2 {
                return unsupported(name, &format!("resubmit with a third argument ('{}')", parts[2]));
            }
            let p = parts.first().copied().unwrap_or("");
            let t = parts.get(1).copied().unwrap_or("");
            if p.is_empty() && t.is_empty() {
                return fail(name, "at least one of the port and the table must be given");
            }
            let port = if p.is_empty() { None } else { port_of(p)? };
            let table = if t.is_empty() {
                None
            } else {
                Some(parse_table(name, t)?)
            };
            Ok(Action::Resubmit { port, table })
        }
    }
}

/// True for names of match fields flowpath does not implement (registers,
/// metadata, tunnel and conntrack fields, MPLS, ...).
pub fn is_unsupported_field(name: &str) -> bool {
    const NAMES: &[&str] = &[
        "skb_priority",
        "actset_output",
        "dp_hash",
        "recirc_id",
        "packet_type",
        "in_port_oxm",
        "vlan_tpid",
        "ipv6_exthdr",
    ];
    const PREFIXES: &[&str] = &[
        "NXM_NX_TUN",
        "OXM_OF_TUNNEL_ID",
        "OXM_OF_MPLS",
        "tun_",
        "mpls",
        "nsh_",
        "erspan",
        "cvlan",
        "vlan_pcp_",
    ];
    NAMES.contains(&name) || PREFIXES.iter().any(|p| name.starts_with(p))
}

/// The "match" group buckets are parsed with ([`parse_bucket_actions`]):
/// `set_field` prerequisites are then checked per packet, not at parse
/// time.
pub(super) fn bucket_context() -> &'static Match {
    static M: std::sync::OnceLock<Match> = std::sync::OnceLock::new();
    M.get_or_init(Match::catchall)
}

/// Parses a group bucket's actions (no match to check `set_field`
/// prerequisites against: they are checked when the bucket runs, as OVS
/// does).
pub fn parse_bucket_actions(text: &str) -> Result<Vec<Action>, RuleError> {
    let actions = parse_actions(text, bucket_context(), 0)?;
    // A bucket runs as an action set, which has no place for it.
    if let Some(a) = actions
        .iter()
        .find(|a| matches!(a, Action::CheckPktLarger { .. }))
    {
        return fail(
            "check_pkt_larger",
            format!("disallowed action in a group bucket (an action set): {a}"),
        );
    }
    Ok(actions)
}

/// A `bundle`/`multipath` field set by name.
pub(super) fn hash_fields(name: &str, fname: &str) -> Result<u8, RuleError> {
    match BUNDLE_FIELDS.iter().position(|f| *f == fname) {
        Some(i) => Ok(i as u8),
        None => fail(
            name,
            format!(
                "'{fname}' is not a field set to hash ({})",
                BUNDLE_FIELDS.join(", ")
            ),
        ),
    }
}

/// A hash basis, 0 to 65535.
pub(super) fn hash_basis(name: &str, basis: &str) -> Result<u16, RuleError> {
    parse_uint(basis)
        .ok()
        .filter(|b| *b <= 0xffff)
        .map(|b| b as u16)
        .ok_or_else(|| RuleError::new(Some(name), format!("'{basis}' is not a basis (0 to 65535)")))
}

/// A bit range read by an action: it must exist and, unless in a group
/// bucket, its prerequisites must be met by the rule's match (as
/// ovs-ofctl checks).
pub(super) fn parse_src(name: &str, text: &str, matching: &Match) -> Result<Subfield, RuleError> {
    let sf = Subfield::parse(text).map_err(|e| RuleError::new(Some(name), e))?;
    if !std::ptr::eq(matching, bucket_context()) {
        matching
            .check_prereqs(sf.field.info())
            .map_err(|e| RuleError::new(Some(name), e))?;
    }
    Ok(sf)
}

/// A bit range written by an action: as [`parse_src`], and writable.
pub(super) fn parse_dst(name: &str, text: &str, matching: &Match) -> Result<Subfield, RuleError> {
    let sf = parse_src(name, text, matching)?;
    let info = sf.field.info();
    if !info.writable {
        return fail(
            name,
            format!("destination field {} is not writable", info.name),
        );
    }
    Ok(sf)
}

pub(super) fn parse_set_field(
    name: &str,
    arg: Arg<'_>,
    matching: &Match,
) -> Result<Action, RuleError> {
    let s = match arg {
        Arg::Colon(s) | Arg::Paren(s) => s,
        Arg::None => return fail(name, "set_field needs VALUE->FIELD"),
    };
    let Some((v, dst)) = s.rsplit_once("->") else {
        return fail(name, format!("'{s}' is not VALUE->FIELD"));
    };
    let dst = dst.trim();
    let Some(info) = field::lookup(dst) else {
        if is_unsupported_field(dst) {
            return unsupported(name, &format!("field {dst}"));
        }
        return fail(name, format!("unknown field '{dst}'"));
    };
    if !info.writable {
        return fail(name, format!("{} is not writable", info.name));
    }
    let (value, mask) = parse_value(info, v).map_err(|e| RuleError::new(Some(name), e.0))?;
    if info.id == FieldId::DlVlan && value > 0xfff {
        return fail(name, "dl_vlan=0xffff (no VLAN) cannot be set; use pop_vlan");
    }
    // As OpenFlow 1.2+ (and OVS decoding it): the present bit must be set
    // in the value and in the mask.
    if info.id == FieldId::VlanVid && (value & 0x1000 == 0 || mask & 0x1000 == 0) {
        return fail(
            name,
            format!(
                "set_field:{v}->vlan_vid: the present bit OFPVID_PRESENT (0x1000) must be set \
                 (VLAN 100 is 4196, 0x1000|100; mod_vlan_vid:100 sets the VID alone)"
            ),
        );
    }
    // A group bucket has no match: as OVS, its set_field is checked
    // against each packet when it runs (skipped without the prerequisites).
    if !std::ptr::eq(matching, bucket_context()) {
        matching
            .check_prereqs(info)
            .map_err(|e| RuleError::new(Some(name), e))?;
    }
    Ok(Action::SetField {
        field: info.id,
        value,
        mask,
        legacy: false,
    })
}

pub(super) fn parse_legacy(name: &str, arg: Arg<'_>, id: FieldId) -> Result<Action, RuleError> {
    let s = match arg {
        Arg::Colon(s) | Arg::Paren(s) => s.trim(),
        Arg::None => return fail(name, format!("{name} needs a value")),
    };
    let info: &FieldInfo = id.info();
    if s.contains('/') {
        return fail(name, format!("{name} does not take a mask (use set_field)"));
    }
    let value = if id == FieldId::NwTos {
        let n = parse_uint(s).map_err(|e| RuleError::new(Some(name), e.0))?;
        if n > 255 || n % 4 != 0 {
            return fail(
                name,
                format!("'{s}' is not a ToS value (a multiple of 4 from 0 to 252)"),
            );
        }
        n
    } else {
        parse_value(info, s)
            .map_err(|e| RuleError::new(Some(name), e.0))?
            .0
    };
    Ok(Action::SetField {
        field: id,
        value,
        mask: info.full_mask(),
        legacy: true,
    })
}

pub(super) fn check_no_arg(name: &str, arg: Arg<'_>) -> Result<(), RuleError> {
    match arg {
        Arg::None => Ok(()),
        Arg::Paren(s) if s.trim().is_empty() => Ok(()),
        _ => fail(name, format!("{name} takes no argument")),
    }
}

pub(super) fn no_arg(name: &str, arg: Arg<'_>, a: Action) -> Result<Action, RuleError> {
    check_no_arg(name, arg).map(|()| a)
}

pub(super) fn need_arg<'a>(name: &str, arg: Arg<'a>) -> Result<&'a str, RuleError> {
    match arg {
        Arg::Colon(s) | Arg::Paren(s) => Ok(s),
        Arg::None => fail(name, format!("{name} needs an argument ({name}:VALUE)")),
    }
}

/// Words that belong before `actions=`, for a better message when they
/// turn up after it.
pub(super) fn is_match_word(name: &str) -> bool {
    field::lookup(name).is_some()
        || flowpath_flow::matching::PROTOCOLS
            .iter()
            .any(|(p, _, _)| *p == name)
        || matches!(
            name,
            "priority" | "table" | "cookie" | "idle_timeout" | "hard_timeout"
        )
}

/// Parses one action; `Ok(None)` is `drop`.
/// `check_pkt_larger(LEN)->DST[bit]` (its argument is not in the usual
/// `name(arg)` form); ovs-ofctl's checks and messages.
pub(super) fn parse_check_pkt_larger(
    item: &str,
    arg: Arg<'_>,
    matching: &Match,
) -> Result<Action, RuleError> {
    let name = "check_pkt_larger";
    let Arg::Colon(rest) = arg else {
        return fail(
            name,
            format!("'{item}' is not check_pkt_larger(LEN)->DST[BIT]"),
        );
    };
    let Some((len, dst)) = rest.split_once("->") else {
        return fail(name, format!("{}: missing `->'", rest.trim()));
    };
    let Some(len) = len
        .trim()
        .strip_prefix('(')
        .and_then(|l| l.strip_suffix(')'))
    else {
        return fail(
            name,
            format!("'{item}' is not check_pkt_larger(LEN)->DST[BIT]"),
        );
    };
    let len = match parse_uint(len.trim()) {
        Ok(n) if n <= u128::from(u16::MAX) => n as u16,
        _ => return fail(name, format!("invalid packet length \"{}\"", len.trim())),
    };
    let dst = parse_dst(name, dst, matching)?;
    if dst.n_bits != 1 {
        return fail(name, "Only 1-bit destination field is allowed");
    }
    if !dst.field.info().is_reg() {
        return fail(
            name,
            format!(
                "flowpath takes the result in a register or metadata bit, not in {}",
                dst.field.info().name
            ),
        );
    }
    Ok(Action::CheckPktLarger { len, dst })
}

/// Parses the text after `actions=` with OpenFlow 1.1+ instructions, as
/// `ovs-ofctl` takes them, in their order: actions (applied at once;
/// `apply_actions(...)` is refused as `ovs-ofctl` refuses it),
/// `clear_actions`, `write_actions(...)`, `goto_table:T`. Returns the rule's action list (with the
/// [`Action::ClearActions`] / [`Action::WriteActions`] markers where the
/// instructions are) and the write set. Errors name the instruction; an
/// out-of-order one is refused as `ovs-ofctl` refuses it.
pub fn parse_instructions(
    text: &str,
    matching: &Match,
    table: u8,
) -> Result<(Vec<Action>, Vec<Action>), RuleError> {
    let mut list = Vec::new();
    let mut write_set = Vec::new();
    // 0: actions, 1: clear_actions seen, 2: write_actions seen,
    // 3: write_metadata seen.
    let mut phase = 0;
    let mut plain = String::new();
    let flush = |plain: &mut String, list: &mut Vec<Action>| -> Result<(), RuleError> {
        if !plain.is_empty() {
            list.extend(parse_actions(plain, matching, table)?);
            plain.clear();
        }
        Ok(())
    };
    for item in split_actions(text)? {
        let (name, arg) = split_action(item)?;
        let order = |what: &str, before: &str| {
            fail(
                what,
                format!(
                    "invalid instruction ordering: {what} must appear before {before}, for OpenFlow 1.1+ compatibility"
                ),
            )
        };
        let later = |p: i32| match p {
            3 => "write_metadata",
            2 => "write_actions",
            _ => "clear_actions",
        };
        match name.to_ascii_lowercase().as_str() {
            // As ovs-ofctl: actions are applied without naming the
            // instruction.
            "apply_actions" => {
                return fail(name, "apply_actions is the default instruction");
            }
            "clear_actions" => {
                check_no_arg(name, arg)?;
                if phase > 0 {
                    return order("clear_actions", later(phase));
                }
                flush(&mut plain, &mut list)?;
                list.push(Action::ClearActions);
                phase = 1;
            }
            "write_actions" => {
                let Arg::Paren(inner) = arg else {
                    return fail(
                        name,
                        "write_actions takes a list: write_actions(ACTION,...)",
                    );
                };
                if phase == 2 {
                    return fail(name, "write_actions given twice");
                }
                if phase == 3 {
                    return order("write_actions", "write_metadata");
                }
                flush(&mut plain, &mut list)?;
                write_set = parse_actions(inner, matching, table)?;
                check_write_set(name, &write_set)?;
                list.push(Action::WriteActions);
                phase = 2;
            }
            "write_metadata" => {
                if phase == 3 {
                    return fail(name, "write_metadata given twice");
                }
                let a = parse_write_metadata(name, arg)?;
                flush(&mut plain, &mut list)?;
                list.push(a);
                phase = 3;
            }
            "goto_table" if phase > 0 => {
                let a = parse_one(item, matching, table)?;
                list.extend(a);
            }
            _ => {
                if phase > 0 {
                    return order("apply_actions", later(phase));
                }
                if !plain.is_empty() {
                    plain.push(',');
                }
                plain.push_str(item);
            }
        }
    }
    flush(&mut plain, &mut list)?;
    check_instruction_list(&list, &write_set)?;
    Ok((list, write_set))
}

/// What an action set may not hold: instructions, and the actions OVS
/// refuses there.
fn check_write_set(name: &str, write_set: &[Action]) -> Result<(), RuleError> {
    if write_set.iter().any(|a| {
        matches!(
            a,
            Action::GotoTable(_) | Action::ClearActions | Action::WriteActions
        )
    }) {
        return fail(name, "write_actions cannot hold instructions");
    }
    if let Some(a) = write_set.iter().find(|a| {
        matches!(
            a,
            Action::Push(_)
                | Action::Pop(_)
                | Action::Multipath { .. }
                | Action::Bundle { load: Some(_), .. }
                | Action::CheckPktLarger { .. }
                | Action::FinTimeout { .. }
        )
    }) {
        return fail(name, format!("disallowed action in action set: {a}"));
    }
    Ok(())
}

/// `write_metadata:VALUE[/MASK]`.
fn parse_write_metadata(name: &str, arg: Arg<'_>) -> Result<Action, RuleError> {
    let s = need_arg(name, arg)?.trim();
    let (v, m) = match s.split_once('/') {
        Some((v, m)) => (v, Some(m)),
        None => (s, None),
    };
    let num = |x: &str| {
        parse_uint(x.trim())
            .ok()
            .filter(|n| *n <= u128::from(u64::MAX))
            .map(|n| n as u64)
            .ok_or_else(|| {
                RuleError::new(Some(name), format!("'{}' is not a 64-bit number", x.trim()))
            })
    };
    let value = num(v)?;
    let mask = match m {
        Some(m) => num(m)?,
        None => u64::MAX,
    };
    // The value is kept as written (bits outside the mask included), as
    // Open vSwitch keeps and prints it; only masked bits are written.
    Ok(Action::WriteMetadata { value, mask })
}

/// The checks of a whole instruction list: conjunctions go with nothing
/// else (but notes), as in ovs-ofctl; `goto_table` is last.
fn check_instruction_list(list: &[Action], write_set: &[Action]) -> Result<(), RuleError> {
    if list.iter().any(|a| matches!(a, Action::Conjunction { .. }))
        || write_set
            .iter()
            .any(|a| matches!(a, Action::Conjunction { .. }))
    {
        if let Some(other) = list
            .iter()
            .chain(write_set.iter())
            .find(|a| !matches!(a, Action::Conjunction { .. } | Action::Note(_)))
        {
            let what = match other {
                Action::WriteActions => "write_actions".to_string(),
                a => a.to_string(),
            };
            let what = what.split(['(', ':']).next().unwrap_or("").to_string();
            return fail(
                "conjunction",
                format!("\"conjunction\" actions may be used along with \"note\" but not any other kind of action (such as the \"{what}\" action used here)"),
            );
        }
    }
    if let Some(i) = list.iter().position(|a| matches!(a, Action::GotoTable(_))) {
        if i + 1 != list.len() {
            return fail("goto_table", "goto_table must be the last action");
        }
    }
    Ok(())
}

/// As ovs-ofctl checks a list: writing `vlan_vid` (`set_field`, `load`)
/// needs a tag, from the match (`dl_vlan=`, `vlan_vid=0x1000/0x1000`, ...)
/// or an earlier `push_vlan`/`mod_vlan_vid`; `pop_vlan` takes it away.
fn track_vlan(a: &Action, cur: &mut Option<Match>, matching: &Match) -> Result<(), RuleError> {
    let tagged = |m: &Match| m.key.vlan_tci() & flowpath_flow::key::VLAN_CFI != 0;
    let set_cfi = |cur: &mut Option<Match>, on: bool| {
        let mut m = cur.take().unwrap_or(*matching);
        let tci = FieldId::VlanTci.info();
        let v = if on { 0x1000 } else { 0 };
        m.set_field_masked(tci, v, 0x1000);
        *cur = Some(m);
    };
    match *a {
        Action::SetField {
            field: FieldId::VlanVid,
            ..
        }
        | Action::Load {
            dst:
                Subfield {
                    field: FieldId::VlanVid,
                    ..
                },
            ..
        } if !tagged(cur.as_ref().unwrap_or(matching)) => {
            let what = if matches!(a, Action::Load { .. }) {
                "load"
            } else {
                "set_field"
            };
            return fail(
                what,
                format!(
                    "{a}: vlan_vid lacks its prerequisite: the packet has no VLAN tag here \
                     (match dl_vlan=N or vlan_vid=0x1000/0x1000, or push_vlan first)"
                ),
            );
        }
        Action::PushVlan(_) | Action::ModVlanVid(_) => set_cfi(cur, true),
        Action::PopVlan => set_cfi(cur, false),
        _ => {}
    }
    Ok(())
}

/// Parses the text after `actions=` for a rule in `table` whose match is
/// `matching` (`set_field` must have its prerequisites met by it;
/// `goto_table` must go to a later table). An empty text or `drop` is the
/// empty list. Errors name the action as written. Instructions
/// (`write_actions`, ...) are read by [`parse_instructions`].
pub fn parse_actions(text: &str, matching: &Match, table: u8) -> Result<Vec<Action>, RuleError> {
    parse_actions_in(text, matching, table, false)
}

/// The field an action writes, if any.
fn written_field(a: &Action) -> Option<FieldId> {
    match a {
        Action::SetField { field, .. } => Some(*field),
        Action::Load { dst, .. } | Action::Move { dst, .. } | Action::Pop(dst) => Some(dst.field),
        _ => None,
    }
}

/// [`parse_actions`]; `in_ct`: the list is a `ct(exec(...))`, where
/// `ct_mark` and `ct_label` may be written (anywhere else they may not,
/// as OVS: "cannot set CT fields outside of ct action").
pub(super) fn parse_actions_in(
    text: &str,
    matching: &Match,
    table: u8,
    in_ct: bool,
) -> Result<Vec<Action>, RuleError> {
    let mut actions = Vec::new();
    let mut dropped = false;
    let mut cur: Option<Match> = None;
    for item in split_actions(text)? {
        // `note:HEX`: a comment for the controller that does nothing, as in
        // OVS (flowpath does not keep it: dump-flows does not show it).
        if let Some(hex) = item.trim().strip_prefix("note:") {
            let Some(bytes) = parse_hex_bytes(hex) else {
                return fail("note", format!("'{hex}' is not hex bytes (note:00.11.22)"));
            };
            actions.push(Action::Note(super::userdata::intern(&bytes)));
            continue;
        }
        if let Some(inner) = item
            .trim()
            .strip_prefix("clone(")
            .and_then(|r| r.strip_suffix(')'))
        {
            // The actions it holds, checked against the match as the list
            // has it here; what they change does not leak out.
            let body = parse_actions(inner, cur.as_ref().unwrap_or(matching), table)?;
            if let Some(bad) = body.iter().find(|a| {
                matches!(
                    a,
                    Action::GotoTable(_)
                        | Action::WriteActions
                        | Action::ClearActions
                        | Action::WriteMetadata { .. }
                )
            }) {
                return fail(
                    "clone",
                    format!("{bad} is an instruction: not allowed inside clone(...)"),
                );
            }
            let len = u16::try_from(body.len())
                .map_err(|_| RuleError::new(Some("clone"), "too many actions".to_string()))?;
            actions.push(Action::Clone { len });
            actions.extend(body);
            continue;
        }
        match parse_one(item, cur.as_ref().unwrap_or(matching), table)? {
            Some(a) => {
                if !in_ct && matches!(written_field(&a), Some(FieldId::CtMark | FieldId::CtLabel)) {
                    return fail(item, "cannot set CT fields outside of ct action");
                }
                if !std::ptr::eq(matching, bucket_context()) {
                    track_vlan(&a, &mut cur, matching)?;
                }
                // As ovs-ofctl checks a list: after push_mpls/pop_mpls the
                // later actions see the new EtherType (and, after a push,
                // no network protocol).
                if let Action::PushMpls(t) | Action::PopMpls(t) = a {
                    if !std::ptr::eq(matching, bucket_context()) {
                        let mut m = cur.take().unwrap_or(*matching);
                        m.set_field_masked(FieldId::EthType.info(), u128::from(t), 0xffff);
                        if matches!(a, Action::PushMpls(_)) {
                            m.set_field_masked(FieldId::NwProto.info(), 0, 0xff);
                        }
                        cur = Some(m);
                    }
                }
                actions.push(a)
            }
            None => dropped = true,
        }
    }
    if dropped && !actions.is_empty() {
        return fail("drop", "drop must be the only action");
    }
    if let Some(i) = actions
        .iter()
        .position(|a| matches!(a, Action::GotoTable(_)))
    {
        if i + 1 != actions.len() {
            return fail("goto_table", "goto_table must be the last action");
        }
    }
    Ok(actions)
}
