//! The `ct` action (`ct(commit,zone=1,table=2,exec(...),nat(...),alg=ftp)`)
//! and `ct_clear`: parsed and printed as `ovs-ofctl` does.
//!
//! What: [`Ct`] is one `ct(...)` action's arguments: `commit`, `force`,
//! the zone (a number or a subfield read at translation), the table the
//! packet continues in after the tracker (`table=`; none: the packet is
//! tracked and the pipeline goes on without the result), the actions run
//! "inside" the tracker (`exec(...)`: only writes to `ct_mark` and
//! `ct_label`, which set the committed connection's mark and label), the
//! NAT ([`CtNat`], shared with the datapath action) and the ALG.
//!
//! Why interned: `Action` is a small `Copy` value; a `ct` holds a nested
//! action list, so `Action::Ct` carries an index into an append-only
//! process-wide registry (as `learn` does), and equal actions share an
//! index.
//!
//! Checks, as OVS's `parse_CT`/`parse_NAT`/`check_CT`/`check_NAT`: `force`
//! needs `commit`; `table` is 0..=254; the rule must match IP (or IPv6);
//! `alg=ftp` needs TCP, `alg=tftp` UDP; a NAT range's family must be the
//! match's; `exec` holds only `set_field`/`load` of `ct_mark`/`ct_label`;
//! `nat` takes at most one of `src`/`dst`, flags only with one, not both
//! `hash` and `random`.
//!
//! Thread-safety: the registry is behind a lock, taken at parse and
//! translation time only (never by the datapath).

use crate::action::{Action, Subfield};
use crate::rule::RuleError;
use flowpath_flow::field::FieldId;
use flowpath_flow::Match;
use flowpath_odp::{CtHelper, CtNat, NatKind};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, OnceLock, RwLock};

/// Where a `ct` action's zone comes from.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum CtZone {
    /// A number (`zone=5`; 0 when not given).
    Imm(u16),
    /// Bits of a field or register (`zone=NXM_NX_REG0[0..15]`), read when
    /// the packet is translated (and so significant in its megaflow).
    Field(Subfield),
}

/// One `ct(...)` action. See the module documentation.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Ct {
    /// `commit`.
    pub commit: bool,
    /// `force` (needs `commit`).
    pub force: bool,
    /// `table=N`: the packet, tracked, is looked up again in this table.
    pub table: Option<u8>,
    /// The zone.
    pub zone: CtZone,
    /// `nat` / `nat(...)`.
    pub nat: Option<CtNat>,
    /// `exec(...)`: `ct_mark`/`ct_label` writes.
    pub exec: Vec<Action>,
    /// Where the NAT stands among the nested actions: how many of
    /// `exec` come before it. OVS keeps the written order (and the wire
    /// order): 0 prints `nat(...)` before `exec(...)`, more prints it
    /// inside, after those writes (`ct(exec(set_field:1->ct_mark),nat)`
    /// prints as `ct(exec(set_field:1->ct_mark,nat))`).
    pub nat_pos: usize,
    /// `alg=`: 0 none, 21 FTP, 69 TFTP.
    pub alg: u16,
}

impl Ct {
    /// The datapath's helper for `alg`.
    pub fn helper(&self) -> CtHelper {
        match self.alg {
            21 => CtHelper::Ftp,
            69 => CtHelper::Tftp,
            _ => CtHelper::None,
        }
    }
}

fn registry() -> &'static RwLock<Vec<Arc<Ct>>> {
    static R: OnceLock<RwLock<Vec<Arc<Ct>>>> = OnceLock::new();
    R.get_or_init(|| RwLock::new(Vec::new()))
}

/// Interns `ct`, returning its index (the same index for an equal action).
pub fn intern(ct: Ct) -> u32 {
    let r = registry();
    if let Some(i) = r
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .position(|c| **c == ct)
    {
        return i as u32;
    }
    let mut w = r.write().unwrap_or_else(|e| e.into_inner());
    if let Some(i) = w.iter().position(|c| **c == ct) {
        return i as u32;
    }
    w.push(Arc::new(ct));
    (w.len() - 1) as u32
}

/// The action interned under `id`.
pub fn get(id: u32) -> Option<Arc<Ct>> {
    registry()
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(id as usize)
        .cloned()
}

fn fail<T>(msg: impl Into<String>) -> Result<T, RuleError> {
    Err(RuleError::new(Some("ct"), msg.into()))
}

/// Splits `text` at the commas that are not inside parentheses.
fn split_args(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    let last = text[start..].trim();
    if !last.is_empty() {
        out.push(last);
    }
    out.retain(|s| !s.is_empty());
    out
}

/// `key`, `key=value`, `key:value` or `key(value)`.
fn key_value(item: &str) -> (&str, &str) {
    let cut = item.find(['=', ':', '(']);
    match cut {
        None => (item, ""),
        Some(i) if item.as_bytes()[i] == b'(' => {
            let v = item[i + 1..].strip_suffix(')').unwrap_or(&item[i + 1..]);
            (&item[..i], v)
        }
        Some(i) => (&item[..i], &item[i + 1..]),
    }
}

/// Parses the argument of `ct(...)` for a rule whose match is `matching`;
/// `check`: make OVS's `check_CT` checks against it (not for group
/// buckets, which have no match).
pub fn parse_ct(arg: &str, matching: &Match, check: bool) -> Result<Ct, RuleError> {
    let mut ct = Ct {
        commit: false,
        force: false,
        table: None,
        zone: CtZone::Imm(0),
        nat: None,
        exec: Vec::new(),
        nat_pos: 0,
        alg: 0,
    };
    for item in split_args(arg) {
        let (key, value) = key_value(item);
        match key {
            "commit" => ct.commit = true,
            "force" => ct.force = true,
            "table" => {
                let t = crate::action::parse_table_arg("ct", value)?;
                ct.table = Some(t);
            }
            "zone" => {
                ct.zone = match parse_u16(value) {
                    Some(z) => CtZone::Imm(z),
                    None => {
                        CtZone::Field(crate::action::parse_subfield_arg("ct", value, matching)?)
                    }
                };
            }
            "alg" => {
                ct.alg = match value {
                    "ftp" => 21,
                    "tftp" => 69,
                    _ => {
                        return fail(format!(
                            "{value}: unknown connection helper (ftp or tftp expected)"
                        ))
                    }
                }
            }
            "nat" => set_nat(&mut ct, parse_nat(value)?)?,
            "exec" => parse_exec(value, &mut ct)?,
            _ => return fail(format!("invalid argument to \"ct\" action: `{key}'")),
        }
    }
    if ct.force && !ct.commit {
        return fail("\"force\" flag requires \"commit\" flag.");
    }
    if check {
        check_ct(&ct, matching)?;
    }
    Ok(ct)
}

fn parse_u16(s: &str) -> Option<u16> {
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u16::from_str_radix(h, 16).ok()
    } else {
        s.parse().ok()
    }
}

/// As OVS's `check_CT`/`check_NAT`: the match must be IP, the ALG's
/// protocol the match's, the NAT range's family the match's.
fn check_ct(ct: &Ct, matching: &Match) -> Result<(), RuleError> {
    let dl_type = matching.exact_dl_type();
    let ip = matches!(dl_type, Some(0x0800 | 0x86dd));
    let proto = matching.exact_nw_proto();
    if !ip {
        return fail(
            "ct requires a match on ip or ipv6 (OpenFlow error: OFPBAC_MATCH_INCONSISTENT)",
        );
    }
    if ct.commit && matching.key.ct_state() & flowpath_flow::key::ct_state::INV != 0 {
        return fail(
            "ct(commit) cannot apply to packets matched as +inv (OFPBAC_MATCH_INCONSISTENT)",
        );
    }
    match ct.alg {
        21 if proto != Some(6) => {
            return fail("alg=ftp requires a match on tcp (OFPBAC_MATCH_INCONSISTENT)")
        }
        69 if proto != Some(17) => {
            return fail("alg=tftp requires a match on udp (OFPBAC_MATCH_INCONSISTENT)")
        }
        _ => {}
    }
    if let Some(n) = &ct.nat {
        if n.has_addr && (n.v6 != (dl_type == Some(0x86dd))) {
            return fail(
                "the nat range's address family is not the match's (OFPBAC_MATCH_INCONSISTENT)",
            );
        }
    }
    Ok(())
}

/// Records the `ct`'s NAT, after the writes parsed so far (OVS takes
/// several; flowpath's `ct` holds one).
fn set_nat(ct: &mut Ct, nat: CtNat) -> Result<(), RuleError> {
    if ct.nat.is_some() {
        return fail("ct takes one nat action");
    }
    ct.nat = Some(nat);
    ct.nat_pos = ct.exec.len();
    Ok(())
}

/// `exec(...)`: writes to `ct_mark` and `ct_label` only, and a `nat`
/// (as OVS prints a NAT that follows writes).
fn parse_exec(text: &str, ct: &mut Ct) -> Result<(), RuleError> {
    let any_ip = {
        let mut m = Match::catchall();
        m.set_field_masked(FieldId::EthType.info(), 0x0800, 0xffff);
        m
    };
    let mut acts = Vec::new();
    for item in split_args(text) {
        let (key, value) = key_value(item);
        if key == "nat" {
            ct.exec.append(&mut check_exec(acts)?);
            acts = Vec::new();
            set_nat(ct, parse_nat(value)?)?;
        } else {
            acts.extend(crate::action::parse_ct_exec(item, &any_ip)?);
        }
    }
    ct.exec.append(&mut check_exec(acts)?);
    Ok(())
}

fn check_exec(acts: Vec<Action>) -> Result<Vec<Action>, RuleError> {
    for a in &acts {
        let field = match a {
            Action::SetField { field, .. } => Some(*field),
            Action::Load { dst, .. } => Some(dst.field),
            Action::Move { dst, .. } => Some(dst.field),
            _ => None,
        };
        match field {
            Some(FieldId::CtMark | FieldId::CtLabel) => {}
            Some(f) => {
                return fail(format!(
                    "ct action doesn't support nested modification of {}",
                    f.info().name
                ))
            }
            None => {
                return fail(format!("ct action doesn't support nested action {a}"));
            }
        }
    }
    Ok(acts)
}

/// Parses `nat`'s argument (empty for a plain `nat`).
pub fn parse_nat(text: &str) -> Result<CtNat, RuleError> {
    let mut n = CtNat::default();
    let mut has_kind = false;
    let mut flags = false;
    for item in split_args(text) {
        let (key, value) = match item.split_once('=') {
            Some((k, v)) => (k, v),
            None => (item, ""),
        };
        match key {
            "src" | "dst" => {
                if has_kind {
                    return fail("May only specify one of \"src\" or \"dst\".");
                }
                has_kind = true;
                n.kind = if key == "src" {
                    NatKind::Src
                } else {
                    NatKind::Dst
                };
                if !value.is_empty() {
                    parse_range(value, &mut n)?;
                }
            }
            "persistent" => {
                n.persistent = true;
                flags = true;
            }
            "hash" => {
                n.hash = true;
                flags = true;
            }
            "random" => {
                n.random = true;
                flags = true;
            }
            _ => return fail(format!("invalid key \"{key}\" in \"nat\" argument")),
        }
    }
    if !has_kind && flags {
        return fail("Flags allowed only with \"src\" or \"dst\".");
    }
    if n.hash && n.random {
        return fail("Both \"hash\" and \"random\" are not allowed.");
    }
    Ok(n)
}

/// `IP[-IP][:PORT[-PORT]]`, IPv6 optionally in brackets.
fn parse_range(s: &str, n: &mut CtNat) -> Result<(), RuleError> {
    let bad = || RuleError::new(Some("ct"), format!("invalid nat range \"{s}\""));
    // Split off the ports: after the last ':' outside brackets, when the
    // address part is IPv4 or bracketed IPv6.
    let (addrs, ports) = if s.contains('[') || s.matches(':').count() <= 1 {
        match s.rfind(':') {
            Some(i) if !s[i..].contains(']') => (&s[..i], Some(&s[i + 1..])),
            _ => (s, None),
        }
    } else {
        (s, None)
    };
    let (a, b) = match addrs.split_once('-') {
        Some((a, b)) => (a, Some(b)),
        None => (addrs, None),
    };
    let unbracket = |x: &str| x.trim_start_matches('[').trim_end_matches(']').to_string();
    if let Ok(v4) = a.parse::<Ipv4Addr>() {
        n.v6 = false;
        n.addr_min = u128::from(u32::from(v4));
        if let Some(b) = b {
            let hi = b.parse::<Ipv4Addr>().map_err(|_| bad())?;
            if u32::from(hi) < u32::from(v4) {
                return Err(bad());
            }
            n.addr_max = u128::from(u32::from(hi));
        }
    } else if let Ok(v6) = unbracket(a).parse::<Ipv6Addr>() {
        n.v6 = true;
        n.addr_min = u128::from(v6);
        if let Some(b) = b {
            let hi = unbracket(b).parse::<Ipv6Addr>().map_err(|_| bad())?;
            if u128::from(hi) < u128::from(v6) {
                return Err(bad());
            }
            n.addr_max = u128::from(hi);
        }
    } else {
        return Err(bad());
    }
    n.has_addr = true;
    if let Some(p) = ports {
        let (lo, hi) = match p.split_once('-') {
            Some((lo, hi)) => (lo, Some(hi)),
            None => (p, None),
        };
        n.port_min = lo.parse().map_err(|_| bad())?;
        if let Some(hi) = hi {
            n.port_max = hi.parse().map_err(|_| bad())?;
            if n.port_max < n.port_min {
                return Err(bad());
            }
        }
    }
    Ok(())
}

/// Prints `ct` as `ovs-ofctl dump-flows` does:
/// `ct(commit,force,table=N,zone=Z,nat(...),exec(...),alg=ftp)`.
pub fn format_ct(ct: &Ct) -> String {
    let mut parts: Vec<String> = Vec::new();
    if ct.commit {
        parts.push("commit".into());
    }
    if ct.force {
        parts.push("force".into());
    }
    if let Some(t) = ct.table {
        parts.push(format!("table={t}"));
    }
    match ct.zone {
        CtZone::Imm(0) => {}
        CtZone::Imm(z) => parts.push(format!("zone={z}")),
        CtZone::Field(sf) => parts.push(format!("zone={}", crate::action::format_subfield(&sf))),
    }
    let pos = ct.nat_pos.min(ct.exec.len());
    match &ct.nat {
        Some(n) if pos == 0 => parts.push(n.format()),
        _ => {}
    }
    if !ct.exec.is_empty() {
        let mut inner = crate::action::format_actions(&ct.exec[..pos]);
        if let Some(n) = ct.nat.as_ref().filter(|_| pos > 0) {
            inner.push(',');
            inner.push_str(&n.format());
            if pos < ct.exec.len() {
                inner.push(',');
                inner.push_str(&crate::action::format_actions(&ct.exec[pos..]));
            }
        } else {
            inner = crate::action::format_actions(&ct.exec);
        }
        parts.push(format!("exec({inner})"));
    }
    match ct.alg {
        0 => {}
        21 => parts.push("alg=ftp".into()),
        69 => parts.push("alg=tftp".into()),
        p => parts.push(format!("alg={p}")),
    }
    format!("ct({})", parts.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse_match;

    fn round(arg: &str, m: &str) -> Result<String, String> {
        let m = parse_match(m).map_err(|e| e.to_string())?;
        parse_ct(arg, &m, true)
            .map(|c| format_ct(&c))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn prints_back_as_ovs_ofctl() {
        assert_eq!(
            round("commit,zone=1,table=2", "ip").unwrap(),
            "ct(commit,table=2,zone=1)"
        );
        assert_eq!(round("table=1", "tcp").unwrap(), "ct(table=1)");
        assert_eq!(round("", "ip").unwrap(), "ct()");
        assert_eq!(
            round(
                "commit,exec(set_field:0x1->ct_mark),nat(src=10.0.0.1-10.0.0.3:1000-2000,random)",
                "ip"
            )
            .unwrap(),
            "ct(commit,exec(set_field:0x1->ct_mark,nat(src=10.0.0.1-10.0.0.3:1000-2000,random)))"
        );
        assert_eq!(
            round(
                "commit,nat(src=10.0.0.1),exec(set_field:0x1->ct_mark)",
                "ip"
            )
            .unwrap(),
            "ct(commit,nat(src=10.0.0.1),exec(set_field:0x1->ct_mark))"
        );
        // Printed inside exec, read back the same.
        assert_eq!(
            round(
                "commit,exec(set_field:0x1->ct_mark,nat(dst=10.0.0.2))",
                "ip"
            )
            .unwrap(),
            "ct(commit,exec(set_field:0x1->ct_mark,nat(dst=10.0.0.2)))"
        );
        assert_eq!(round("nat", "ip").unwrap(), "ct(nat)");
        assert_eq!(
            round("commit,alg=ftp", "tcp").unwrap(),
            "ct(commit,alg=ftp)"
        );
        assert_eq!(
            round("zone=NXM_NX_REG0[0..15],table=3", "ip").unwrap(),
            "ct(table=3,zone=NXM_NX_REG0[0..15])"
        );
        assert_eq!(
            round("commit,nat(dst=[fe80::1]:80)", "ipv6").unwrap(),
            "ct(commit,nat(dst=[fe80::1]:80))"
        );
    }

    #[test]
    fn refuses_what_ovs_refuses() {
        for (arg, m) in [
            ("force", "ip"),
            ("commit", "arp"),
            ("commit", ""),
            ("alg=ftp", "udp"),
            ("alg=tftp", "tcp"),
            ("alg=http", "tcp"),
            ("nat(src=10.0.0.1)", "ipv6"),
            ("nat(src=10.0.0.1,dst=10.0.0.2)", "ip"),
            ("nat(random)", "ip"),
            ("nat(src=10.0.0.1,hash,random)", "ip"),
            ("nat(src=10.0.0.9-10.0.0.1)", "ip"),
            ("exec(set_field:1->reg0)", "ip"),
            ("exec(output:1)", "ip"),
            ("bogus", "ip"),
            ("table=255", "ip"),
        ] {
            assert!(round(arg, m).is_err(), "ct({arg}) with {m} should fail");
        }
    }

    #[test]
    fn equal_actions_share_an_index() {
        let m = parse_match("ip").unwrap();
        let a = intern(parse_ct("commit,zone=7", &m, true).unwrap());
        let b = intern(parse_ct("zone=7,commit", &m, true).unwrap());
        assert_eq!(a, b);
        assert_eq!(get(a).unwrap().zone, CtZone::Imm(7));
    }
}
