//! Parsing one action (`ovs-ofctl` syntax): [`parse_one`] recognises the
//! name and hands the argument to the function of the action's family.

use super::parse::*;
use super::*;
use flowpath_flow::value::parse_uint;

/// One action as written: its text, name, lowercase name and argument.
#[derive(Clone, Copy)]
pub(super) struct Item<'a> {
    pub(super) item: &'a str,
    pub(super) name: &'a str,
    pub(super) lname: &'a str,
    pub(super) arg: Arg<'a>,
}

pub(super) fn parse_one(
    item: &str,
    matching: &Match,
    table: u8,
) -> Result<Option<Action>, RuleError> {
    let (name, arg) = split_action(item)?;
    let lname = name.to_ascii_lowercase();
    if !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()) {
        if !matches!(arg, Arg::None) {
            return fail(name, format!("'{item}' is not an action"));
        }
        return parse_port(name, name).map(|p| Some(port_action(p)));
    }
    let it = Item {
        item,
        name,
        lname: &lname,
        arg,
    };
    match lname.as_str() {
        "drop" | "output" | "in_port" | "all" | "flood" | "normal" | "local" | "controller"
        | "set_queue" | "pop_queue" | "enqueue" => ports_family(it, matching, table),
        "resubmit" | "goto_table" | "check_pkt_larger" | "fin_timeout" | "learn"
        | "conjunction" | "group" | "clear_actions" | "write_actions" | "apply_actions" => {
            walk_family(it, matching, table)
        }
        "set_field" | "set_tunnel" | "set_tunnel64" | "load" | "move" | "push" | "pop"
        | "write_metadata" | "mod_nw_ttl" | "mod_nw_ecn" | "dec_ttl" => {
            field_family(it, matching, table)
        }
        "push_vlan" | "pop_vlan" | "strip_vlan" | "push_mpls" | "pop_mpls" | "set_mpls_label"
        | "set_mpls_tc" | "set_mpls_ttl" | "dec_mpls_ttl" | "mod_vlan_vid" | "mod_vlan_pcp" => {
            tag_family(it, matching, table)
        }
        "bundle" | "bundle_load" | "multipath" => choice_family(it, matching),
        "sample" => parse_sample(it).map(Some),
        "ct" => {
            let text = match arg {
                Arg::None => "",
                Arg::Paren(s) => s,
                Arg::Colon(_) => {
                    return fail(name, "ct takes its arguments in parentheses: ct(...)")
                }
            };
            // (A group bucket's actions are not checked against a match:
            // OVS parses them without `check_CT`.)
            let check = !std::ptr::eq(matching, bucket_context());
            let ct = crate::ct::parse_ct(text, matching, check)?;
            Ok(Some(Action::Ct(crate::ct::intern(ct))))
        }
        "ct_clear" => no_arg(name, arg, Action::CtClear).map(Some),
        "nat" => fail(name, "Cannot have NAT action outside of \"ct\" action"),
        _ => other_action(it),
    }
}

/// Outputs, the controller, queues, `drop`.
fn ports_family(it: Item<'_>, _matching: &Match, _table: u8) -> Result<Option<Action>, RuleError> {
    let Item {
        name, arg, lname, ..
    } = it;
    let a = match lname {
        "drop" => {
            check_no_arg(name, arg)?;
            return Ok(None);
        }
        "output" => match arg {
            Arg::Paren(s) => {
                let mut port = None;
                let mut max_len = None;
                for kv in s.split(',').map(str::trim) {
                    match kv.split_once('=') {
                        Some((k, v)) if k.trim() == "port" => port = Some(v),
                        Some((k, v)) if k.trim() == "max_len" => {
                            let n = parse_uint(v).map_err(|e| RuleError::new(Some(name), e.0))?;
                            if n < 14 {
                                return fail(
                                    name,
                                    format!("max_len {n} is less than the minimum value 14"),
                                );
                            }
                            if n > u128::from(u32::MAX) {
                                return fail(name, format!("max_len {n} is out of range"));
                            }
                            max_len = Some(n as u32);
                        }
                        // `output(3)`: the port alone.
                        None if port.is_none() && !kv.is_empty() => port = Some(kv),
                        _ => return fail(name, format!("unexpected '{kv}' in output(...)")),
                    }
                }
                let Some(p) = port else {
                    return fail(name, "output(...) needs port=PORT");
                };
                let dest = parse_port(name, p)?;
                match (max_len, dest) {
                    (None, d) => port_action(d),
                    (Some(max_len), Dest::Number(port)) => Action::OutputTrunc { port, max_len },
                    (Some(_), _) => {
                        return fail(
                            name,
                            format!("output to unsupported truncate port: {}", p.trim()),
                        )
                    }
                }
            }
            Arg::Colon(s) if s.contains('[') => {
                // `output:NXM_NX_REG0[0..15]`: the port a field holds.
                let src = Subfield::parse(s).map_err(|e| RuleError::new(Some(name), e))?;
                Action::OutputReg { src }
            }
            _ => port_action(parse_port(name, need_arg(name, arg)?)?),
        },
        "in_port" => no_arg(name, arg, Action::InPort)?,
        "all" => no_arg(name, arg, Action::All)?,
        "flood" => no_arg(name, arg, Action::Flood)?,
        "normal" => no_arg(name, arg, Action::Normal)?,
        "local" => no_arg(name, arg, Action::Output(OFPP_LOCAL))?,
        "controller" => parse_controller(name, arg)?,
        "set_queue" => {
            let s = need_arg(name, arg)?;
            let q = parse_uint(s.trim()).map_err(|e| RuleError::new(Some(name), e.0))?;
            if q > u128::from(u32::MAX) {
                return fail(name, format!("{} is not a queue id", s.trim()));
            }
            Action::SetQueue(q as u32)
        }
        "pop_queue" => no_arg(name, arg, Action::PopQueue)?,
        "enqueue" => {
            let s = match arg {
                Arg::Colon(s) => s.replacen(':', ",", 1),
                Arg::Paren(s) => s.to_string(),
                Arg::None => return fail(name, "enqueue needs PORT:QUEUE"),
            };
            let Some((p, q)) = s.split_once(',') else {
                return fail(name, format!("'{s}' is not PORT:QUEUE"));
            };
            let port = match parse_port(name, p)? {
                Dest::Number(n) => n,
                _ => return fail(name, format!("{} is not a port enqueue can use", p.trim())),
            };
            let q = parse_uint(q.trim()).map_err(|e| RuleError::new(Some(name), e.0))?;
            if q > u128::from(u32::MAX) {
                return fail(name, format!("{} is not a queue id", q));
            }
            Action::Enqueue {
                port,
                queue: q as u32,
            }
        }
        _ => return fail(name, "unknown action"),
    };
    Ok(Some(a))
}

/// What changes the walk: resubmit, goto_table, groups, instructions,
/// `check_pkt_larger`, `learn`, `conjunction`, `fin_timeout`, `bundle`,
/// `multipath`.
fn walk_family(it: Item<'_>, matching: &Match, table: u8) -> Result<Option<Action>, RuleError> {
    let Item {
        item,
        name,
        lname,
        arg,
    } = it;
    let a = match lname {
        "resubmit" => parse_resubmit(name, arg)?,
        "goto_table" => {
            let t = parse_table(name, need_arg(name, arg)?)?;
            if t <= table {
                return fail(
                    name,
                    format!(
                        "goto_table:{t} must go to a later table than this rule's table {table}"
                    ),
                );
            }
            Action::GotoTable(t)
        }
        "check_pkt_larger" => parse_check_pkt_larger(item, arg, matching)?,
        "fin_timeout" => {
            let Arg::Paren(s) = arg else {
                return fail(name, "fin_timeout takes (idle_timeout=I,hard_timeout=H)");
            };
            let (mut idle, mut hard) = (0u16, 0u16);
            for kv in s.split(',').map(str::trim).filter(|kv| !kv.is_empty()) {
                let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                let n = parse_small(name, v, 0xffff, "timeout")? as u16;
                match k.trim() {
                    "idle_timeout" => idle = n,
                    "hard_timeout" => hard = n,
                    _ => return fail(name, format!("invalid key '{}' in fin_timeout", k.trim())),
                }
            }
            Action::FinTimeout { idle, hard }
        }
        "learn" => {
            let Arg::Paren(s) = arg else {
                return fail(name, "learn(table=T,...,SPEC,...)");
            };
            let l = crate::learn::parse(s)?;
            // The packet bits it reads must exist where the rule applies.
            if !std::ptr::eq(matching, bucket_context()) {
                for sf in l.sources() {
                    matching
                        .check_prereqs(sf.field.info())
                        .map_err(|e| RuleError::new(Some(name), e))?;
                }
            }
            Action::Learn(crate::learn::intern(l))
        }
        "conjunction" => {
            let Arg::Paren(s) = arg else {
                return fail(name, "conjunction(ID,K/N)");
            };
            let Some((id, kn)) = s.split_once(',') else {
                return fail(name, format!("'{s}' is not ID,K/N"));
            };
            let Some((k, n)) = kn.split_once('/') else {
                return fail(name, format!("'{kn}' is not K/N"));
            };
            let num = |x: &str, what: &str| {
                parse_uint(x.trim())
                    .ok()
                    .filter(|v| *v <= u128::from(u32::MAX))
                    .map(|v| v as u32)
                    .ok_or_else(|| {
                        RuleError::new(Some(name), format!("'{}' is not a {what}", x.trim()))
                    })
            };
            let (id, k, n) = (
                num(id, "conjunction id")?,
                num(k, "clause")?,
                num(n, "clause count")?,
            );
            if n < 2 {
                return fail(name, "conjunction must have at least 2 clauses");
            }
            if n > 64 {
                return fail(name, "conjunction must have at most 64 clauses");
            }
            if k == 0 {
                return fail(name, "clause index must be positive");
            }
            if k > n {
                return fail(
                    name,
                    "clause index must be less than or equal to number of clauses",
                );
            }
            Action::Conjunction {
                id,
                k: k as u8,
                n: n as u8,
            }
        }
        "group" => {
            let s = need_arg(name, arg)?;
            let g = parse_uint(s.trim()).map_err(|e| RuleError::new(Some(name), e.0))?;
            if g > 0xffff_ff00 {
                return fail(
                    name,
                    format!("{} is not a group id (0 to 4294967040)", s.trim()),
                );
            }
            Action::Group(g as u32)
        }
        "clear_actions" | "write_actions" | "apply_actions" => {
            return fail(name, "an instruction cannot be nested in an action list")
        }
        _ => return fail(name, "unknown action"),
    };
    Ok(Some(a))
}
/// `bundle`, `bundle_load` and `multipath`: a port or a link chosen by a
/// hash of the packet's fields.
fn choice_family(it: Item<'_>, matching: &Match) -> Result<Option<Action>, RuleError> {
    let Item {
        name, lname, arg, ..
    } = it;
    let a = match lname {
        "bundle" | "bundle_load" => {
            let load = lname == "bundle_load";
            let usage = if load {
                "bundle_load(FIELDS,BASIS,ALGORITHM,ofport,DST[a..b],members:P,...)"
            } else {
                "bundle(FIELDS,BASIS,ALGORITHM,ofport,members:P,...)"
            };
            let Arg::Paren(s) = arg else {
                return fail(name, usage);
            };
            let parts: Vec<&str> = s
                .splitn(if load { 6 } else { 5 }, ',')
                .map(str::trim)
                .collect();
            let (head, dst, members) = match (load, &parts[..]) {
                (false, [a, b, c, d, m]) => ([*a, *b, *c, *d], None, *m),
                (true, [a, b, c, d, dst, m]) => ([*a, *b, *c, *d], Some(*dst), *m),
                _ => return fail(name, usage),
            };
            let [fname, basis, alg, ofport] = head;
            let fields = hash_fields(name, fname)?;
            let basis = hash_basis(name, basis)?;
            let hrw = match alg {
                "hrw" => true,
                "active_backup" => false,
                _ => {
                    return fail(
                        name,
                        format!("'{alg}' is not a bundle algorithm (active_backup, hrw)"),
                    )
                }
            };
            if ofport != "ofport" {
                return fail(
                    name,
                    format!("'{ofport}': bundle members must be given as ofport"),
                );
            }
            let load = match dst {
                Some(d) => {
                    let sf = parse_dst(name, d, matching)?;
                    if sf.n_bits < 16 {
                        return fail(
                            name,
                            format!("{d}: a bundle_load destination must be at least 16 bits"),
                        );
                    }
                    Some(sf)
                }
                None => None,
            };
            let Some(list) = members
                .strip_prefix("members:")
                .or(members.strip_prefix("slaves:"))
            else {
                return fail(name, "bundle needs members:P,P,...");
            };
            let mut m = [0u16; MAX_BUNDLE_MEMBERS];
            let mut n = 0;
            for p in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                let Dest::Number(port) = parse_port(name, p)? else {
                    return fail(name, format!("{p} is not a port a bundle can have"));
                };
                if n == MAX_BUNDLE_MEMBERS {
                    return unsupported(
                        name,
                        &format!("bundle with more than {MAX_BUNDLE_MEMBERS} members"),
                    );
                }
                m[n] = port as u16;
                n += 1;
            }
            Action::Bundle {
                fields,
                basis,
                hrw,
                members: m,
                n: n as u8,
                load,
            }
        }
        "multipath" => {
            let usage = "multipath(FIELDS,BASIS,ALGORITHM,N_LINKS,ARG,DST[a..b])";
            let Arg::Paren(s) = arg else {
                return fail(name, usage);
            };
            let parts: Vec<&str> = s.splitn(6, ',').map(str::trim).collect();
            let [fname, basis, alg, n_links, a, dst] = parts[..] else {
                return fail(name, usage);
            };
            let fields = hash_fields(name, fname)?;
            let basis = hash_basis(name, basis)?;
            let Some(alg) = MULTIPATH_ALGORITHMS.iter().position(|x| *x == alg) else {
                return fail(
                    name,
                    format!(
                        "'{alg}' is not a multipath algorithm ({})",
                        MULTIPATH_ALGORITHMS.join(", ")
                    ),
                );
            };
            let n_links = parse_uint(n_links)
                .ok()
                .filter(|n| (1..=65536).contains(n))
                .ok_or_else(|| {
                    RuleError::new(
                        Some(name),
                        format!("n_links {n_links} is not in valid range 1 to 65536"),
                    )
                })? as u32;
            let arg = parse_uint(a)
                .ok()
                .filter(|v| *v <= u128::from(u32::MAX))
                .ok_or_else(|| RuleError::new(Some(name), format!("'{a}' is not a number")))?
                as u32;
            let dst = parse_dst(name, dst, matching)?;
            if dst.n_bits < 32 && n_links > 1u32 << dst.n_bits {
                return fail(
                    name,
                    format!(
                        "{}-bit destination field has {} possible values, less than specified n_links {n_links}",
                        dst.n_bits,
                        1u32 << dst.n_bits
                    ),
                );
            }
            Action::Multipath {
                fields,
                basis,
                alg: alg as u8,
                n_links,
                arg,
                dst,
            }
        }
        _ => return fail(name, "unknown action"),
    };
    Ok(Some(a))
}

/// Field writes: `set_field`, `set_tunnel`, `load`, `move`, the stack,
/// metadata, TTL and ECN writes, `dec_ttl`.
fn field_family(it: Item<'_>, matching: &Match, _table: u8) -> Result<Option<Action>, RuleError> {
    let Item {
        name, lname, arg, ..
    } = it;
    let a = match lname {
        "set_field" => parse_set_field(name, arg, matching)?,
        // The whole tunnel id (ovs-ofctl prints a value over 32 bits as
        // set_tunnel64 whichever was written).
        "set_tunnel" | "set_tunnel64" => {
            let s = need_arg(name, arg)?;
            let value = parse_uint(s.trim())
                .ok()
                .filter(|v| *v <= u128::from(u64::MAX))
                .ok_or_else(|| {
                    RuleError::new(Some(name), format!("'{}' is not a 64-bit tunnel id", s.trim()))
                })?;
            Action::SetField {
                field: FieldId::TunId,
                value,
                mask: u128::from(u64::MAX),
                legacy: true,
            }
        }
        "load" => {
            let s = need_arg(name, arg)?;
            let Some((v, dst)) = s.split_once("->") else {
                return fail(name, format!("'{s}' is not VALUE->DST[BITS]"));
            };
            let dst = parse_dst(name, dst, matching)?;
            let value = parse_uint(v.trim()).map_err(|e| RuleError::new(Some(name), e.0))?;
            if value & !(dst.mask() >> dst.ofs) != 0 {
                return fail(
                    name,
                    format!("value {} does not fit in {} bits", v.trim(), dst.n_bits),
                );
            }
            Action::Load { dst, value }
        }
        "move" => {
            let s = need_arg(name, arg)?;
            let Some((src, dst)) = s.split_once("->") else {
                return fail(name, format!("'{s}' is not SRC[BITS]->DST[BITS]"));
            };
            let src = parse_src(name, src, matching)?;
            let dst = parse_dst(name, dst, matching)?;
            if src.n_bits != dst.n_bits {
                return fail(
                    name,
                    format!(
                        "source field is {} bits wide but destination is {} bits wide",
                        src.n_bits, dst.n_bits
                    ),
                );
            }
            Action::Move { src, dst }
        }
        "push" => Action::Push(parse_src(name, need_arg(name, arg)?, matching)?),
        "pop" => Action::Pop(parse_dst(name, need_arg(name, arg)?, matching)?),
        "write_metadata" => {
            return fail(
                name,
                "write_metadata is an instruction: it comes after the actions and write_actions(...), before goto_table",
            )
        }
        // OpenFlow 1.1's TTL and ECN actions: unlike the 1.0 `mod_*`
        // actions, OVS demands that the match pin IP (as set_field does),
        // so they are `set_field`s (and print as such).
        "mod_nw_ttl" | "mod_nw_ecn" => {
            let v = match arg {
                Arg::Colon(v) | Arg::Paren(v) => v.trim(),
                Arg::None => return fail(name, format!("{name} needs a value")),
            };
            let field = if lname == "mod_nw_ttl" {
                "nw_ttl"
            } else {
                "nw_ecn"
            };
            let text = format!("{v}->{field}");
            match parse_set_field(name, Arg::Colon(&text), matching)? {
                // mod_nw_ttl is OVS's own action (printed as written);
                // mod_nw_ecn is a set_field for OVS too.
                Action::SetField {
                    field: FieldId::NwTtl,
                    value,
                    mask,
                    ..
                } => Action::SetField {
                    field: FieldId::NwTtl,
                    value,
                    mask,
                    legacy: true,
                },
                a => a,
            }
        }
        "dec_ttl" => match arg {
            Arg::None => Action::DecTtl,
            Arg::Paren(s) if s.trim().is_empty() => Action::DecTtl,
            // Controller ids: an expired TTL sends a packet-in to each.
            Arg::Paren(s) => {
                let mut ids = [0u16; MAX_DEC_TTL_IDS];
                let mut n = 0;
                for x in s.split(',') {
                    let id = parse_uint(x.trim())
                        .ok()
                        .filter(|v| *v <= 0xffff)
                        .ok_or_else(|| {
                            RuleError::new(
                                Some(name),
                                format!("'{}' is not a controller id (0 to 65535)", x.trim()),
                            )
                        })?;
                    if n == MAX_DEC_TTL_IDS {
                        return unsupported(
                            name,
                            &format!("dec_ttl with more than {MAX_DEC_TTL_IDS} controller ids"),
                        );
                    }
                    ids[n] = id as u16;
                    n += 1;
                }
                Action::DecTtlIds { ids, n: n as u8 }
            }
            _ => return fail(name, "dec_ttl takes controller ids: dec_ttl(ID,ID,...)"),
        },
        _ => return fail(name, "unknown action"),
    };
    Ok(Some(a))
}

/// VLAN and MPLS tags: push, pop, label/TC/TTL/VID/PCP writes.
fn tag_family(it: Item<'_>, _matching: &Match, _table: u8) -> Result<Option<Action>, RuleError> {
    let Item {
        name, arg, lname, ..
    } = it;
    let a = match lname {
        "push_vlan" => {
            let s = need_arg(name, arg)?;
            let tpid = parse_uint(s).map_err(|e| RuleError::new(Some(name), e.0))?;
            if tpid != 0x8100 && tpid != 0x88a8 {
                return fail(
                    name,
                    format!(
                        "'{}' is not a VLAN TPID (0x8100 or 0x88a8 expected)",
                        s.trim()
                    ),
                );
            }
            Action::PushVlan(tpid as u16)
        }
        "pop_vlan" | "strip_vlan" => no_arg(name, arg, Action::PopVlan)?,
        "push_mpls" => {
            let s = need_arg(name, arg)?;
            let t = parse_small(name, s, 0xffff, "EtherType")? as u16;
            // ovs-vswitchd refuses any other (OFPBAC_BAD_ARGUMENT).
            if !matches!(t, 0x8847 | 0x8848) {
                return fail(
                    name,
                    format!("'{}' is not an MPLS EtherType (0x8847 or 0x8848)", s.trim()),
                );
            }
            Action::PushMpls(t)
        }
        "pop_mpls" => {
            Action::PopMpls(parse_small(name, need_arg(name, arg)?, 0xffff, "EtherType")? as u16)
        }
        "set_mpls_label" => {
            Action::SetMplsLabel(
                parse_small(name, need_arg(name, arg)?, 0xfffff, "MPLS label")? as u32,
            )
        }
        "set_mpls_tc" => {
            Action::SetMplsTc(parse_small(name, need_arg(name, arg)?, 7, "MPLS TC")? as u8)
        }
        "set_mpls_ttl" => {
            Action::SetMplsTtl(parse_small(name, need_arg(name, arg)?, 255, "MPLS TTL")? as u8)
        }
        "dec_mpls_ttl" => no_arg(name, arg, Action::DecMplsTtl)?,
        "mod_vlan_vid" => {
            Action::ModVlanVid(parse_small(name, need_arg(name, arg)?, 4095, "VLAN ID")? as u16)
        }
        "mod_vlan_pcp" => {
            Action::ModVlanPcp(parse_small(name, need_arg(name, arg)?, 7, "VLAN priority")? as u8)
        }
        _ => return fail(name, "unknown action"),
    };
    Ok(Some(a))
}

/// The rest: legacy `mod_*` spellings, what flowpath refuses, and what is
/// not an action at all.
fn other_action(it: Item<'_>) -> Result<Option<Action>, RuleError> {
    let Item {
        item,
        name,
        lname,
        arg,
    } = it;
    let a = {
        if let Some(&(_, id)) = LEGACY.iter().find(|(n, _)| *n == lname) {
            parse_legacy(name, arg, id)?
        } else if UNSUPPORTED.contains(&lname) {
            return unsupported(name, &format!("action {name}"));
        } else if is_match_word(name) && matches!(arg, Arg::Colon(_)) && item.contains('=') {
            return fail(
                name,
                "is a match field or rule keyword: actions=... must come last",
            );
        } else if name.is_empty() {
            return fail("actions", format!("'{item}' is not an action"));
        } else {
            return fail(name, "unknown action");
        }
    };
    Ok(Some(a))
}

/// `sample(probability=N,collector_set_id=C,obs_domain_id=D,obs_point_id=P)`.
fn parse_sample(it: Item<'_>) -> Result<Action, RuleError> {
    let Item { name, arg, .. } = it;
    let Arg::Paren(s) = arg else {
        return fail(name, "sample needs (probability=N,...)");
    };
    let (mut p, mut c, mut d, mut o) = (None, 0u32, 0u32, 0u32);
    let mut port = None;
    let mut direction = super::SampleDirection::Default;
    for kv in s.split(',').map(str::trim).filter(|kv| !kv.is_empty()) {
        match kv {
            "ingress" => {
                direction = super::SampleDirection::Ingress;
                continue;
            }
            "egress" => {
                direction = super::SampleDirection::Egress;
                continue;
            }
            _ => {}
        }
        let Some((k, v)) = kv.split_once('=') else {
            return fail(name, format!("invalid key \"{kv}\" in \"sample\" argument"));
        };
        let n32 = |what: &str| -> Result<u32, RuleError> {
            Ok(super::parse::parse_small(name, v, u128::from(u32::MAX), what)? as u32)
        };
        match k.trim() {
            "probability" => {
                let n = super::parse::parse_small(name, v, 0xffff, "probability")? as u16;
                if n == 0 {
                    return fail(name, "invalid probability value \"0\"");
                }
                p = Some(n);
            }
            "collector_set_id" => c = n32("collector_set_id")?,
            "obs_domain_id" => d = n32("obs_domain_id")?,
            "obs_point_id" => o = n32("obs_point_id")?,
            "sampling_port" => port = sample_port(name, v)?,
            _ => {
                return fail(
                    name,
                    format!("invalid key \"{}\" in \"sample\" argument", k.trim()),
                )
            }
        }
    }
    let Some(probability) = p else {
        return fail(name, "non-zero \"probability\" must be specified on sample");
    };
    Ok(Action::Sample {
        probability,
        collector_set_id: c,
        obs_domain_id: d,
        obs_point_id: o,
        sampling_port: port,
        direction,
    })
}

/// A `sampling_port=` value: a port number (16-bit OpenFlow numbering) or
/// a reserved port's name; `NONE`/`ANY` mean none (as OVS).
fn sample_port(name: &str, v: &str) -> Result<Option<u32>, RuleError> {
    let v = v.trim();
    let named = match v.to_ascii_uppercase().as_str() {
        "IN_PORT" => Some(0xfff8),
        "TABLE" => Some(0xfff9),
        "NORMAL" => Some(0xfffa),
        "FLOOD" => Some(0xfffb),
        "ALL" => Some(0xfffc),
        "CONTROLLER" => Some(0xfffd),
        "LOCAL" => Some(0xfffe),
        "NONE" | "ANY" => return Ok(None),
        _ => None,
    };
    if named.is_some() {
        return Ok(named);
    }
    match parse_uint(v) {
        Ok(0xffff) => Ok(None),
        Ok(n) if n <= 0xffff => Ok(Some(n as u32)),
        _ => fail(name, format!("{v}: unknown port")),
    }
}
