//! Printing actions as `ovs-ofctl dump-flows` does.

use super::*;

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Action::Output(OFPP_LOCAL) => f.write_str("LOCAL"),
            Action::Output(p) => write!(f, "output:{p}"),
            Action::OutputTrunc { port, max_len } => {
                f.write_str("output(port=")?;
                write_port(f, port)?;
                write!(f, ",max_len={max_len})")
            }
            Action::InPort => f.write_str("IN_PORT"),
            Action::Group(g) => write!(f, "group:{g}"),
            Action::SetQueue(q) => write!(f, "set_queue:{q}"),
            Action::Bundle { .. } | Action::Multipath { .. } => fmt_choice(self, f),
            Action::PopQueue => f.write_str("pop_queue"),
            Action::Note(i) => {
                f.write_str("note:")?;
                let b = super::userdata::get(i);
                let hex: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
                f.write_str(&hex.join("."))
            }
            Action::Enqueue { port, queue } => {
                f.write_str("enqueue:")?;
                write_port(f, port)?;
                write!(f, ":{queue}")
            }
            Action::All => f.write_str("ALL"),
            Action::Flood => f.write_str("FLOOD"),
            Action::Normal => f.write_str("NORMAL"),
            Action::Controller { max_len, .. } if self.is_plain_controller() => {
                write!(f, "CONTROLLER:{max_len}")
            }
            Action::Controller {
                max_len,
                reason,
                id,
                userdata,
                pause,
                meter_id,
            } => {
                // As OVS: the options that differ from the defaults.
                let mut parts: Vec<String> = Vec::new();
                if reason != 1 {
                    let name = PACKET_IN_REASONS
                        .get(usize::from(reason))
                        .copied()
                        .unwrap_or("action");
                    parts.push(format!("reason={name}"));
                }
                if max_len != CONTROLLER_MAX_LEN {
                    parts.push(format!("max_len={max_len}"));
                }
                if id != 0 {
                    parts.push(format!("id={id}"));
                }
                let bytes = userdata::get(userdata);
                if !bytes.is_empty() {
                    let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
                    parts.push(format!("userdata={}", hex.join(".")));
                }
                if pause {
                    parts.push("pause".into());
                }
                if let Some(m) = meter_id {
                    parts.push(format!("meter_id={m}"));
                }
                write!(f, "controller({})", parts.join(","))
            }
            Action::OutputReg { src } => write!(f, "output:{src}"),
            Action::Sample {
                probability,
                collector_set_id,
                obs_domain_id,
                obs_point_id,
                sampling_port,
                direction,
            } => {
                write!(
                    f,
                    "sample(probability={probability},collector_set_id={collector_set_id},obs_domain_id={obs_domain_id},obs_point_id={obs_point_id}"
                )?;
                if let Some(p) = sampling_port {
                    write!(f, ",sampling_port={}", super::sample_port_name(p))?;
                }
                match direction {
                    super::SampleDirection::Default => {}
                    super::SampleDirection::Ingress => f.write_str(",ingress")?,
                    super::SampleDirection::Egress => f.write_str(",egress")?,
                }
                f.write_str(")")
            }
            // (The list printers print the actions it holds.)
            Action::Clone { .. } => f.write_str("clone"),
            Action::Resubmit { port, table } => match (port, table) {
                (None, None) => f.write_str("resubmit:IN_PORT"),
                (Some(p), None) => {
                    f.write_str("resubmit:")?;
                    write_port(f, p)
                }
                (None, Some(t)) => write!(f, "resubmit(,{t})"),
                (Some(p), Some(t)) => {
                    f.write_str("resubmit(")?;
                    write_port(f, p)?;
                    write!(f, ",{t})")
                }
            },
            Action::GotoTable(t) => write!(f, "goto_table:{t}"),
            Action::SetField {
                field,
                value,
                mask,
                legacy,
            } => {
                let info = field.info();
                if field == FieldId::TunId && legacy {
                    return if value <= u128::from(u32::MAX) {
                        write!(f, "set_tunnel:{value:#x}")
                    } else {
                        write!(f, "set_tunnel64:{value:#x}")
                    };
                }
                if field == FieldId::NwTtl && legacy {
                    // OpenFlow 1.1's set-TTL action, as OVS prints it.
                    return write!(f, "mod_nw_ttl:{value}");
                }
                let legacy_name = LEGACY.iter().find(|(_, id)| *id == field).map(|(n, _)| n);
                match legacy_name {
                    Some(name) if legacy && mask == info.full_mask() => {
                        write!(f, "{name}:{}", format_value(info, value, mask))
                    }
                    _ => write!(
                        f,
                        "set_field:{}->{}",
                        format_value(info, value, mask),
                        info.name
                    ),
                }
            }
            Action::DecTtl => f.write_str("dec_ttl"),
            Action::ClearActions => f.write_str("clear_actions"),
            Action::WriteActions => f.write_str("write_actions"),
            Action::DecTtlIds { ids, n } => {
                f.write_str("dec_ttl(")?;
                for (i, id) in ids.iter().take(usize::from(n)).enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{id}")?;
                }
                f.write_str(")")
            }
            Action::PushVlan(tpid) => write!(f, "push_vlan:{tpid:#06x}"),
            Action::PushMpls(t) => write!(f, "push_mpls:{t:#06x}"),
            Action::PopMpls(t) => write!(f, "pop_mpls:{t:#06x}"),
            Action::SetMplsLabel(v) => write!(f, "set_mpls_label({v})"),
            Action::SetMplsTc(v) => write!(f, "set_mpls_tc({v})"),
            Action::SetMplsTtl(v) => write!(f, "set_mpls_ttl({v})"),
            Action::DecMplsTtl => f.write_str("dec_mpls_ttl"),
            Action::UnrollXlate { table, cookie } => {
                write!(f, "unroll_xlate(table={table}, cookie={cookie})")
            }
            Action::PopVlan => f.write_str("pop_vlan"),
            Action::ModVlanVid(v) => write!(f, "mod_vlan_vid:{v}"),
            Action::ModVlanPcp(p) => write!(f, "mod_vlan_pcp:{p}"),
            Action::Load { dst, value } => write!(f, "load:{value:#x}->{dst}"),
            Action::Move { src, dst } => write!(f, "move:{src}->{dst}"),
            Action::Push(sf) => write!(f, "push:{sf}"),
            Action::Conjunction { id, k, n } => write!(f, "conjunction({id},{k}/{n})"),
            Action::Ct(id) => match crate::ct::get(id) {
                Some(ct) => f.write_str(&crate::ct::format_ct(&ct)),
                None => write!(f, "ct(?{id})"),
            },
            Action::CtClear => f.write_str("ct_clear"),
            Action::Learn(id) => match crate::learn::get(id) {
                Some(l) => write!(f, "{l}"),
                None => f.write_str("learn(?)"),
            },
            Action::Pop(sf) => write!(f, "pop:{sf}"),
            Action::CheckPktLarger { len, dst } => write!(f, "check_pkt_larger({len})->{dst}"),
            Action::FinTimeout { idle, hard } => {
                f.write_str("fin_timeout(")?;
                let mut sep = "";
                if idle != 0 {
                    write!(f, "idle_timeout={idle}")?;
                    sep = ",";
                }
                if hard != 0 {
                    write!(f, "{sep}hard_timeout={hard}")?;
                }
                f.write_str(")")
            }
            Action::WriteMetadata { value, mask } => {
                if mask == u64::MAX {
                    write!(f, "write_metadata:{value:#x}")
                } else {
                    write!(f, "write_metadata:{value:#x}/{mask:#x}")
                }
            }
        }
    }
}

/// `bundle` and `multipath`: their hash, algorithm and members or links.
fn fmt_choice(a: &Action, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match *a {
        Action::Bundle {
            fields,
            basis,
            hrw,
            members,
            n,
            load,
        } => {
            let alg = if hrw { "hrw" } else { "active_backup" };
            let name = BUNDLE_FIELDS
                .get(usize::from(fields))
                .copied()
                .unwrap_or("?");
            match load {
                None => write!(f, "bundle({name},{basis},{alg},ofport,members:")?,
                Some(dst) => write!(f, "bundle_load({name},{basis},{alg},ofport,{dst},members:")?,
            }
            for (i, m) in members.iter().take(usize::from(n)).enumerate() {
                if i > 0 {
                    f.write_str(",")?;
                }
                write!(f, "{m}")?;
            }
            f.write_str(")")
        }
        Action::Multipath {
            fields,
            basis,
            alg,
            n_links,
            arg,
            dst,
        } => write!(
            f,
            "multipath({},{basis},{},{n_links},{arg},{dst})",
            BUNDLE_FIELDS
                .get(usize::from(fields))
                .copied()
                .unwrap_or("?"),
            MULTIPATH_ALGORITHMS
                .get(usize::from(alg))
                .copied()
                .unwrap_or("?")
        ),
        _ => Ok(()),
    }
}

/// Prints an action list as `ovs-ofctl dump-flows` does: comma-separated,
/// `drop` when empty.
pub fn format_actions(actions: &[Action]) -> String {
    if actions.is_empty() {
        return "drop".into();
    }
    format_list(actions, &|a| a.to_string())
}

/// Prints `actions` comma-separated, each by `one`, a `clone` with the
/// actions it holds in parentheses.
fn format_list(actions: &[Action], one: &dyn Fn(&Action) -> String) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < actions.len() {
        let a = &actions[i];
        if let Action::Clone { len } = *a {
            let end = (i + 1 + usize::from(len)).min(actions.len());
            out.push(format!("clone({})", format_list(&actions[i + 1..end], one)));
            i = end;
            continue;
        }
        out.push(one(a));
        i += 1;
    }
    out.join(",")
}

/// Prints a rule's instructions: its actions, with the
/// [`Action::WriteActions`] marker expanded to `write_actions(...)` of
/// `write_set` (`drop` when there is nothing).
pub fn format_instructions(actions: &[Action], write_set: &[Action]) -> String {
    if actions.is_empty() {
        return "drop".into();
    }
    format_list(actions, &|a| match a {
        Action::WriteActions if write_set.is_empty() => "write_actions()".to_string(),
        Action::WriteActions => format!("write_actions({})", format_actions(write_set)),
        a => a.to_string(),
    })
}
