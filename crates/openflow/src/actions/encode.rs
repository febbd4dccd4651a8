//! Encoding: flowpath's actions as OpenFlow and Nicira actions, the way
//! Open vSwitch writes them for each version.

use super::*;
use crate::buf::Writer;
use crate::header::{NX_VENDOR_ID, OFP10, OFP12, OFP15};
use crate::nxm;

fn legacy_type(version: u8, f: FieldId) -> Option<u16> {
    let of10 = match f {
        FieldId::EthSrc => 4,
        FieldId::EthDst => 5,
        FieldId::NwSrc => 6,
        FieldId::NwDst => 7,
        FieldId::NwTos => 8,
        FieldId::TpSrc => 9,
        FieldId::TpDst => 10,
        _ => return None,
    };
    Some(if version == OFP10 || of10 >= 9 {
        of10
    } else {
        of10 - 1
    })
}

fn nx_start(w: &mut Writer, subtype: u16) -> usize {
    let start = w.len();
    w.u16(0xffff);
    w.u16(0);
    w.u32(NX_VENDOR_ID);
    w.u16(subtype);
    start
}

fn of_start(w: &mut Writer, atype: u16) -> usize {
    let start = w.len();
    w.u16(atype);
    w.u16(0);
    start
}

fn end(w: &mut Writer, start: usize) {
    w.pad8_from(start);
    let n = (w.len() - start) as u16;
    w.patch_u16(start + 2, n);
}

fn ofs_nbits(s: &Subfield) -> u16 {
    (u16::from(s.ofs) << 6) | (u16::from(s.n_bits) - 1)
}

fn sub_header(s: &Subfield) -> Result<u32, String> {
    nxm::subfield_header(s.field).ok_or_else(|| format!("{:?} has no NXM/OXM name", s.field))
}

fn put_port(w: &mut Writer, version: u8, p: u32) {
    if version == OFP10 {
        w.u16(p as u16);
    } else {
        w.u32(port::to_of11(p));
    }
}

fn put_output(w: &mut Writer, version: u8, p: u32, max_len: u16) {
    let s = of_start(w, 0);
    put_port(w, version, p);
    w.u16(max_len);
    end(w, s);
}

/// An OXM entry for a Set-Field (value, and mask unless full).
fn put_oxm_value(
    w: &mut Writer,
    f: FieldId,
    value: u128,
    mask: u128,
    oxm: bool,
) -> Result<(), String> {
    let mut m = Match::catchall();
    let info = f.info();
    let (f, value, mask) = if f == FieldId::NwTos && oxm {
        (FieldId::IpDscp, value >> 2, mask >> 2)
    } else {
        (f, value, mask)
    };
    // in_port is written with its NXM name (OXM's 32-bit in_port is a
    // read-only field for Open vSwitch).
    let oxm = oxm && f != FieldId::InPort;
    let h = nxm::header_of(f, oxm)
        .ok_or_else(|| format!("{} cannot be set over OpenFlow", info.name))?;
    let n = nxm::len_of(h);
    let full = f.info().full_mask();
    let _ = &mut m;
    if mask & full == full {
        w.u32(h);
        w.uint(value, n);
    } else {
        w.u32((h & !0xff) | 0x100 | (2 * n) as u32);
        w.uint(value, n);
        w.uint(mask, n);
    }
    Ok(())
}

/// Writes `actions` (a flat list; no instruction markers but those
/// OpenFlow 1.0 expresses as actions).
pub fn put_actions(w: &mut Writer, actions: &[Action], cx: Ctx<'_>) -> Result<(), String> {
    let v = cx.version;
    let mut i = 0;
    while i < actions.len() {
        let a = actions[i];
        i += 1;
        match a {
            Action::Ct(id) => super::ct::put_ct(w, id, cx)?,
            Action::CtClear => super::ct::put_ct_clear(w),
            Action::Note(i) => {
                let s = nx_start(w, NXAST_NOTE);
                w.bytes(&flowpath_ofproto::action::userdata::get(i));
                end(w, s);
            }
            Action::Output(p) => put_output(w, v, p, 0),
            Action::InPort => put_output(w, v, u32::from(OFPP_IN_PORT), 0),
            Action::All => put_output(w, v, u32::from(OFPP_ALL), 0),
            Action::Flood => put_output(w, v, u32::from(OFPP_FLOOD), 0),
            Action::Normal => put_output(w, v, u32::from(OFPP_NORMAL), 0),
            Action::Controller { max_len, .. } if a.is_plain_controller() => {
                put_output(w, v, u32::from(OFPP_CONTROLLER), max_len)
            }
            Action::Controller {
                max_len,
                reason,
                id,
                userdata,
                pause,
                meter_id,
            } => {
                if userdata == 0 && !pause && meter_id.is_none() {
                    let s = nx_start(w, NXAST_CONTROLLER);
                    w.u16(max_len);
                    w.u16(id);
                    w.u8(reason);
                    end(w, s);
                } else {
                    let s = nx_start(w, NXAST_CONTROLLER2);
                    w.zeros(6);
                    let prop = |w: &mut Writer, t: u16, body: &[u8]| {
                        let ps = w.len();
                        w.u16(t);
                        w.u16((4 + body.len()) as u16);
                        w.bytes(body);
                        w.pad8_from(ps);
                    };
                    if max_len != flowpath_ofproto::action::CONTROLLER_MAX_LEN {
                        prop(w, 0, &max_len.to_be_bytes());
                    }
                    if id != 0 {
                        prop(w, 1, &id.to_be_bytes());
                    }
                    if reason != 1 {
                        prop(w, 2, &[reason]);
                    }
                    if userdata != 0 {
                        prop(w, 3, &flowpath_ofproto::action::userdata::get(userdata));
                    }
                    if pause {
                        prop(w, 4, &[]);
                    }
                    if let Some(m) = meter_id {
                        prop(w, 5, &m.to_be_bytes());
                    }
                    end(w, s);
                }
            }
            Action::OutputTrunc { port, max_len } => {
                let s = nx_start(w, NXAST_OUTPUT_TRUNC);
                w.u16(port as u16);
                w.u32(max_len);
                end(w, s);
            }
            Action::Group(g) => {
                if v == OFP10 {
                    // Two bytes of padding, then the group (as OVS).
                    let s = nx_start(w, NXAST_GROUP);
                    w.zeros(2);
                    w.u32(g);
                    end(w, s);
                } else {
                    let s = of_start(w, 22);
                    w.u32(g);
                    end(w, s);
                }
            }
            Action::Bundle {
                fields,
                basis,
                hrw,
                members,
                n,
                load,
            } => {
                let s = nx_start(
                    w,
                    if load.is_some() {
                        NXAST_BUNDLE_LOAD
                    } else {
                        NXAST_BUNDLE
                    },
                );
                w.u16(u16::from(hrw));
                w.u16(u16::from(fields));
                w.u16(basis);
                w.u32(nxm::header(0, 0, 2));
                w.u16(u16::from(n));
                match load {
                    Some(d) => {
                        w.u16(ofs_nbits(&d));
                        w.u32(sub_header(&d)?);
                    }
                    None => {
                        w.u16(0);
                        w.u32(0);
                    }
                }
                w.zeros(4);
                for m in &members[..usize::from(n)] {
                    w.u16(*m);
                }
                end(w, s);
            }
            Action::Multipath {
                fields,
                basis,
                alg,
                n_links,
                arg,
                dst,
            } => {
                let s = nx_start(w, NXAST_MULTIPATH);
                w.u16(u16::from(fields));
                w.u16(basis);
                w.u16(0);
                w.u16(u16::from(alg));
                w.u16((n_links - 1) as u16);
                w.u32(arg);
                w.u16(0);
                w.u16(ofs_nbits(&dst));
                w.u32(sub_header(&dst)?);
                end(w, s);
            }
            Action::SetQueue(q) => {
                if v == OFP10 {
                    let s = nx_start(w, NXAST_SET_QUEUE);
                    w.u16(0);
                    w.u32(q);
                    end(w, s);
                } else {
                    let s = of_start(w, 21);
                    w.u32(q);
                    end(w, s);
                }
            }
            Action::PopQueue => {
                let s = nx_start(w, NXAST_POP_QUEUE);
                end(w, s);
            }
            Action::Enqueue { port, queue } => {
                if v != OFP10 {
                    return Err("enqueue exists only in OpenFlow 1.0".into());
                }
                let s = of_start(w, 11);
                w.u16(port as u16);
                w.zeros(6);
                w.u32(queue);
                end(w, s);
            }
            Action::OutputReg { src } => {
                let s = nx_start(w, NXAST_OUTPUT_REG);
                w.u16(ofs_nbits(&src));
                w.u32(sub_header(&src)?);
                w.u16(0);
                end(w, s);
            }
            Action::Sample {
                probability,
                collector_set_id,
                obs_domain_id,
                obs_point_id,
                sampling_port,
                direction,
            } => {
                // As OVS: NXAST_SAMPLE3 with a direction, NXAST_SAMPLE2
                // with a sampling port, NXAST_SAMPLE otherwise.
                let kind = if direction != SampleDirection::Default {
                    NXAST_SAMPLE3
                } else if sampling_port.is_some() {
                    NXAST_SAMPLE2
                } else {
                    NXAST_SAMPLE
                };
                let s = nx_start(w, kind);
                w.u16(probability);
                w.u32(collector_set_id);
                w.u32(obs_domain_id);
                w.u32(obs_point_id);
                if kind != NXAST_SAMPLE {
                    w.u16(sampling_port.map_or(0xffff, |p| p as u16));
                    w.u8(direction.code());
                    w.zeros(5);
                }
                end(w, s);
            }
            Action::Clone { len } => {
                let n = usize::from(len);
                let body = actions.get(i..i + n).ok_or("clone(...) is cut short")?;
                let s = nx_start(w, NXAST_CLONE);
                w.zeros(6);
                put_actions(w, body, cx)?;
                end(w, s);
                i += n;
            }
            Action::Resubmit { port, table } => match table {
                None => {
                    let s = nx_start(w, NXAST_RESUBMIT);
                    w.u16(port.unwrap_or(u32::from(OFPP_IN_PORT)) as u16);
                    end(w, s);
                }
                Some(t) => {
                    let s = nx_start(w, NXAST_RESUBMIT_TABLE);
                    w.u16(port.unwrap_or(u32::from(OFPP_IN_PORT)) as u16);
                    w.u8(t);
                    end(w, s);
                }
            },
            Action::GotoTable(t) => {
                // OpenFlow 1.0 has no instructions: Open vSwitch sends
                // goto_table as resubmit(,T).
                let s = nx_start(w, NXAST_RESUBMIT_TABLE);
                w.u16(OFPP_IN_PORT);
                w.u8(t);
                end(w, s);
            }
            Action::WriteMetadata { value, mask } => {
                let s = nx_start(w, NXAST_WRITE_METADATA);
                w.zeros(6);
                w.u64(value);
                w.u64(mask);
                end(w, s);
            }
            Action::SetField {
                field,
                value,
                mask,
                legacy,
            } => put_set_field(w, cx, field, value, mask, legacy)?,
            Action::DecTtl => {
                if v == OFP10 {
                    let s = nx_start(w, NXAST_DEC_TTL);
                    end(w, s);
                } else {
                    let s = of_start(w, 24);
                    end(w, s);
                }
            }
            Action::DecTtlIds { ids, n } => {
                let s = nx_start(w, NXAST_DEC_TTL_CNT_IDS);
                w.u16(u16::from(n));
                w.zeros(4);
                for id in &ids[..usize::from(n)] {
                    w.u16(*id);
                }
                end(w, s);
            }
            Action::PushVlan(tpid) => {
                // OpenFlow 1.0: the push is implied by the SET_VLAN_* that
                // follows (as Open vSwitch).
                if v != OFP10 {
                    let s = of_start(w, 17);
                    w.u16(tpid);
                    end(w, s);
                }
            }
            Action::PopVlan => {
                let s = of_start(w, if v == OFP10 { 3 } else { 18 });
                end(w, s);
            }
            Action::ModVlanVid(vid) => {
                if v >= OFP12 {
                    push_vlan_if_needed(w, cx);
                    put_set_field(
                        w,
                        cx,
                        FieldId::VlanVid,
                        u128::from(vid | 0x1000),
                        0x1fff,
                        false,
                    )?;
                } else {
                    let s = of_start(w, 1);
                    w.u16(vid);
                    end(w, s);
                }
            }
            Action::ModVlanPcp(pcp) => {
                if v >= OFP12 {
                    push_vlan_if_needed(w, cx);
                    put_set_field(w, cx, FieldId::DlVlanPcp, u128::from(pcp), 7, false)?;
                } else {
                    let s = of_start(w, 2);
                    w.u8(pcp);
                    end(w, s);
                }
            }
            Action::Load { dst, value } => {
                // (A `tun_metadataN` is variable-length for Open vSwitch:
                // a Set-Field or NXAST_REG_LOAD2, never NXAST_REG_LOAD.)
                let tun_md = dst.field.tun_metadata_index().is_some();
                if dst.n_bits <= 64 && v < OFP15 && !tun_md {
                    let s = nx_start(w, NXAST_REG_LOAD);
                    w.u16(ofs_nbits(&dst));
                    w.u32(sub_header(&dst)?);
                    w.u64(value as u64);
                    end(w, s);
                } else if v >= OFP15 {
                    // OpenFlow 1.5's Set-Field takes a mask.
                    let s = of_start(w, 25);
                    put_oxm_value(w, dst.field, value << dst.ofs, dst.mask(), true)?;
                    end(w, s);
                } else if !tun_md
                    && nxm::header_of(dst.field, false).is_some_and(|h| nxm::class_of(h) <= 1)
                {
                    // Wider than 64 bits (ct_label, xxreg): NXAST_REG_LOADs
                    // of 64 bits each, as Open vSwitch writes a field with
                    // an NXM name (`set_field_to_nxast`).
                    put_reg_load_runs(w, dst.field, value << dst.ofs, dst.mask())?;
                } else {
                    // The OXM entry right after the subtype (no padding).
                    let s = nx_start(w, NXAST_REG_LOAD2);
                    put_oxm_value(w, dst.field, value << dst.ofs, dst.mask(), v >= OFP12)?;
                    end(w, s);
                }
            }
            Action::Move { src, dst } if v >= OFP15 => {
                let s = of_start(w, 28);
                w.u16(u16::from(src.n_bits));
                w.u16(u16::from(src.ofs));
                w.u16(u16::from(dst.ofs));
                w.u16(0);
                w.u32(sub_header(&src)?);
                w.u32(sub_header(&dst)?);
                end(w, s);
            }
            Action::Move { src, dst } => {
                let s = nx_start(w, NXAST_REG_MOVE);
                w.u16(u16::from(src.n_bits));
                w.u16(u16::from(src.ofs));
                w.u16(u16::from(dst.ofs));
                w.u32(sub_header(&src)?);
                w.u32(sub_header(&dst)?);
                end(w, s);
            }
            Action::Push(f) | Action::Pop(f) => {
                let st = if matches!(a, Action::Push(_)) {
                    NXAST_STACK_PUSH
                } else {
                    NXAST_STACK_POP
                };
                let s = nx_start(w, st);
                w.u16(u16::from(f.ofs));
                w.u32(sub_header(&f)?);
                w.u16(u16::from(f.n_bits));
                end(w, s);
            }
            Action::Conjunction { id, k, n } => {
                let s = nx_start(w, NXAST_CONJUNCTION);
                w.u8(k - 1);
                w.u8(n);
                w.u32(id);
                end(w, s);
            }
            Action::Learn(id) => {
                let l = flowpath_ofproto::learn::get(id)
                    .ok_or_else(|| format!("learn #{id} is not registered"))?;
                super::learn::put_learn(w, &l)?;
            }
            Action::CheckPktLarger { len, dst } => {
                let s = nx_start(w, NXAST_CHECK_PKT_LARGER);
                w.u16(len);
                w.u16(u16::from(dst.ofs));
                w.u32(sub_header(&dst)?);
                end(w, s);
            }
            Action::FinTimeout { idle, hard } => {
                let s = nx_start(w, NXAST_FIN_TIMEOUT);
                w.u16(idle);
                w.u16(hard);
                end(w, s);
            }
            Action::PushMpls(e) | Action::PopMpls(e) => {
                let push = matches!(a, Action::PushMpls(_));
                if v == OFP10 {
                    let s = nx_start(
                        w,
                        if push {
                            NXAST_PUSH_MPLS
                        } else {
                            NXAST_POP_MPLS
                        },
                    );
                    w.u16(e);
                    end(w, s);
                } else {
                    let s = of_start(w, if push { 19 } else { 20 });
                    w.u16(e);
                    end(w, s);
                }
            }
            Action::SetMplsLabel(l) => {
                if v >= OFP12 {
                    put_set_field(w, cx, FieldId::MplsLabel, u128::from(l), 0xfffff, false)?;
                } else {
                    let s = nx_start(w, NXAST_SET_MPLS_LABEL);
                    w.u16(0);
                    w.u32(l);
                    end(w, s);
                }
            }
            Action::SetMplsTc(tc) => {
                if v >= OFP12 {
                    put_set_field(w, cx, FieldId::MplsTc, u128::from(tc), 7, false)?;
                } else {
                    let s = nx_start(w, NXAST_SET_MPLS_TC);
                    w.u8(tc);
                    end(w, s);
                }
            }
            Action::SetMplsTtl(ttl) => {
                if v == OFP10 {
                    let s = nx_start(w, NXAST_SET_MPLS_TTL);
                    w.u8(ttl);
                    end(w, s);
                } else {
                    let s = of_start(w, 15);
                    w.u8(ttl);
                    end(w, s);
                }
            }
            Action::DecMplsTtl => {
                if v == OFP10 {
                    let s = nx_start(w, NXAST_DEC_MPLS_TTL);
                    end(w, s);
                } else {
                    let s = of_start(w, 16);
                    end(w, s);
                }
            }
            Action::ClearActions | Action::WriteActions | Action::UnrollXlate { .. } => {
                return Err(format!("{a} cannot be sent as an action"));
            }
        }
    }
    Ok(())
}

/// `mod_vlan_vid`/`mod_vlan_pcp` push a tag on an untagged packet;
/// OpenFlow 1.2+'s Set-Field does not, so Open vSwitch writes a
/// `push_vlan` before it unless the flow matches tagged packets only.
fn push_vlan_if_needed(w: &mut Writer, cx: Ctx<'_>) {
    let (tci, mask) = nxm::field_get(cx.matching, FieldId::VlanTci.info());
    if tci & 0x1000 == 0 || mask & 0x1000 == 0 {
        let s = of_start(w, 17);
        w.u16(0x8100);
        end(w, s);
    }
}

fn put_set_field(
    w: &mut Writer,
    cx: Ctx<'_>,
    field: FieldId,
    value: u128,
    mask: u128,
    legacy: bool,
) -> Result<(), String> {
    let v = cx.version;
    let full = field.info().full_mask();
    if field == FieldId::TunId && legacy {
        // set_tunnel / set_tunnel64, in every version.
        if value <= u128::from(u32::MAX) {
            let s = nx_start(w, NXAST_SET_TUNNEL);
            w.u16(0);
            w.u32(value as u32);
            end(w, s);
        } else {
            let s = nx_start(w, NXAST_SET_TUNNEL64);
            w.zeros(6);
            w.u64(value as u64);
            end(w, s);
        }
        return Ok(());
    }
    if field == FieldId::NwTtl && legacy {
        // mod_nw_ttl: OpenFlow 1.1+'s action, a load in 1.0.
        if v == OFP10 {
            return put_reg_load_runs(w, field, value, full);
        }
        let s = of_start(w, 23);
        w.u8(value as u8);
        end(w, s);
        return Ok(());
    }
    let tp_field = |src: bool| -> Option<FieldId> {
        let proto = nxm::field_get(cx.matching, FieldId::NwProto.info());
        match (proto.1 == 0xff).then_some(proto.0) {
            Some(6) => Some(if src {
                FieldId::TcpSrc
            } else {
                FieldId::TcpDst
            }),
            Some(17) => Some(if src {
                FieldId::UdpSrc
            } else {
                FieldId::UdpDst
            }),
            Some(132) => Some(if src {
                FieldId::SctpSrc
            } else {
                FieldId::SctpDst
            }),
            _ => None,
        }
    };
    let mut field = field;
    if matches!(field, FieldId::TpSrc | FieldId::TpDst) {
        match (v >= OFP12, tp_field(field == FieldId::TpSrc)) {
            (true, Some(f)) => field = f,
            _ => {
                let t = legacy_type(v, field).unwrap_or(9);
                let s = of_start(w, t);
                w.u16(value as u16);
                end(w, s);
                return Ok(());
            }
        }
    }
    if v < OFP12 && mask == full {
        // OpenFlow 1.0 has actions for some fields (Open vSwitch writes a
        // set_field of them so), loads for the rest.
        let of10 = match field {
            FieldId::TcpSrc | FieldId::UdpSrc | FieldId::SctpSrc => Some((FieldId::TpSrc, value)),
            FieldId::TcpDst | FieldId::UdpDst | FieldId::SctpDst => Some((FieldId::TpDst, value)),
            FieldId::IpDscp => Some((FieldId::NwTos, value << 2)),
            f if legacy_type(v, f).is_some() => Some((f, value)),
            _ => None,
        };
        if let Some((f, value)) = of10 {
            if let Some(t) = legacy_type(v, f) {
                let s = of_start(w, t);
                match f {
                    FieldId::EthSrc | FieldId::EthDst => w.uint(value, 6),
                    FieldId::NwSrc | FieldId::NwDst => w.u32(value as u32),
                    FieldId::TpSrc | FieldId::TpDst => w.u16(value as u16),
                    _ => w.u8(value as u8),
                }
                end(w, s);
                return Ok(());
            }
        }
        if field == FieldId::VlanVid && v == OFP10 {
            if value & 0x1000 == 0 {
                let s = of_start(w, 3);
                end(w, s);
            } else {
                let s = of_start(w, 1);
                w.u16(value as u16 & 0xfff);
                end(w, s);
            }
            return Ok(());
        }
        if field == FieldId::DlVlanPcp && v == OFP10 {
            let s = of_start(w, 2);
            w.u8(value as u8);
            end(w, s);
            return Ok(());
        }
    }
    if v >= OFP12 && (mask == full || v >= OFP15) {
        let s = of_start(w, 25);
        put_oxm_value(w, field, value, mask, true)?;
        end(w, s);
        return Ok(());
    }
    // A field with an NXM name: NXAST_REG_LOADs, one per run of mask
    // bits (Open vSwitch's `set_field_to_nxast`); NXAST_REG_LOAD2 for the
    // others.
    // (A `tun_metadataN` is variable-length for Open vSwitch: never as
    // NXAST_REG_LOAD.)
    if field.tun_metadata_index().is_none()
        && nxm::header_of(field, false).is_some_and(|h| nxm::class_of(h) <= 1)
    {
        return put_reg_load_runs(w, field, value, mask);
    }
    let s = nx_start(w, NXAST_REG_LOAD2);
    put_oxm_value(w, field, value, mask, v >= OFP12)?;
    end(w, s);
    Ok(())
}

/// A set_field as `NXAST_REG_LOAD`s, one per run of 1-bits of the mask
/// (Open vSwitch's form in OpenFlow 1.0; printed as `load:`).
fn put_reg_load_runs(
    w: &mut Writer,
    field: FieldId,
    value: u128,
    mask: u128,
) -> Result<(), String> {
    let h = nxm::subfield_header(field).ok_or("field without an NXM name")?;
    let mut m = mask;
    while m != 0 {
        let ofs = m.trailing_zeros();
        let run = (m >> ofs).trailing_ones().min(64);
        let bits = if run >= 128 {
            u128::MAX
        } else {
            ((1u128 << run) - 1) << ofs
        };
        let s = nx_start(w, NXAST_REG_LOAD);
        w.u16(((ofs as u16) << 6) | (run as u16 - 1));
        w.u32(h);
        w.u64(((value & bits) >> ofs) as u64);
        end(w, s);
        m &= !bits;
    }
    Ok(())
}

/// Writes a flow's instructions (OpenFlow 1.1+): apply-actions, then
/// clear-actions, write-actions, write-metadata and goto-table, in the
/// order OpenFlow demands.
pub fn put_instructions(
    w: &mut Writer,
    actions: &[Action],
    write_set: &[Action],
    cx: Ctx<'_>,
) -> Result<(), String> {
    let mut apply = Vec::new();
    let (mut clear, mut write, mut meta, mut goto) = (false, false, None, None);
    for a in actions {
        match *a {
            Action::ClearActions => clear = true,
            Action::WriteActions => write = true,
            Action::WriteMetadata { value, mask } => meta = Some((value, mask)),
            Action::GotoTable(t) => goto = Some(t),
            a => apply.push(a),
        }
    }
    if !apply.is_empty() {
        let s = of_start(w, OFPIT_APPLY_ACTIONS);
        w.zeros(4);
        put_actions(w, &apply, cx)?;
        end(w, s);
    }
    if clear {
        let s = of_start(w, OFPIT_CLEAR_ACTIONS);
        w.zeros(4);
        end(w, s);
    }
    if write {
        let s = of_start(w, OFPIT_WRITE_ACTIONS);
        w.zeros(4);
        put_actions(w, write_set, cx)?;
        end(w, s);
    }
    if let Some((value, mask)) = meta {
        let s = of_start(w, OFPIT_WRITE_METADATA);
        w.zeros(4);
        w.u64(value);
        w.u64(mask);
        end(w, s);
    }
    if let Some(t) = goto {
        let s = of_start(w, OFPIT_GOTO_TABLE);
        w.u8(t);
        w.zeros(3);
        end(w, s);
    }
    Ok(())
}

/// Writes a flow's actions for OpenFlow 1.0: instructions as Open vSwitch
/// writes them there; `write_actions`/`clear_actions` have no OpenFlow
/// 1.0 form and are left out, as Open vSwitch leaves them out.
pub fn put_of10_actions(
    w: &mut Writer,
    actions: &[Action],
    _write_set: &[Action],
    cx: Ctx<'_>,
) -> Result<(), String> {
    let kept: Vec<Action> = actions
        .iter()
        .copied()
        .filter(|a| !matches!(a, Action::ClearActions | Action::WriteActions))
        .collect();
    put_actions(w, &kept, cx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actions::pull_actions;
    use crate::buf::Reader;
    use flowpath_ofproto::parse::parse_rule;

    fn encode(text: &str, version: u8) -> Vec<u8> {
        let rule = parse_rule(text).unwrap();
        let mut w = Writer::new();
        let cx = Ctx {
            version,
            matching: &rule.matching,
        };
        put_actions(&mut w, &rule.actions, cx).unwrap();
        w.buf
    }

    /// `sample`: NXAST_SAMPLE, NXAST_SAMPLE2 with a sampling port,
    /// NXAST_SAMPLE3 with a direction — the bytes `ovs-ofctl parse-actions
    /// OpenFlow10` reads as the same text; what OVS refuses is refused.
    #[test]
    fn sample_forms_as_open_vswitch_writes_them() {
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        for (text, want) in [
            (
                "sample(probability=6554,collector_set_id=1,obs_domain_id=2,obs_point_id=3)",
                "ffff001800002320001d199a000000010000000200000003",
            ),
            (
                "sample(probability=100,collector_set_id=1,obs_domain_id=2,obs_point_id=3,sampling_port=3)",
                "ffff002000002320002600640000000100000002000000030003000000000000",
            ),
            (
                "sample(probability=100,collector_set_id=1,obs_domain_id=2,obs_point_id=3,sampling_port=3,egress)",
                "ffff002000002320002900640000000100000002000000030003020000000000",
            ),
            (
                "sample(probability=100,collector_set_id=1,obs_domain_id=2,obs_point_id=3,ingress)",
                "ffff00200000232000290064000000010000000200000003ffff010000000000",
            ),
        ] {
            for v in [OFP10, crate::header::OFP13] {
                let b = encode(&format!("actions={text}"), v);
                assert_eq!(hex(&b), want, "{text}");
                let mut out = Vec::new();
                pull_actions(&mut Reader::new(&b), v, &mut out).unwrap();
                assert_eq!(flowpath_ofproto::action::format_actions(&out), text);
            }
        }
        let bad = |h: &str| {
            let b: Vec<u8> = (0..h.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
                .collect();
            pull_actions(&mut Reader::new(&b), OFP10, &mut Vec::new()).unwrap_err()
        };
        // Probability 0; a direction that is none of the three; padding
        // that is not zero.
        let e = bad("ffff001800002320001d0000000000010000000200000003");
        assert_eq!(e.name, "OFPBAC_BAD_ARGUMENT");
        let e = bad("ffff00200000232000290064000000010000000200000003ffff030000000000");
        assert_eq!(e.name, "OFPBAC_BAD_ARGUMENT");
        let e = bad("ffff00200000232000290064000000010000000200000003ffff000000000100");
        assert_eq!(e.name, "NXBRC_MUST_BE_ZERO");
    }

    /// `NXAST_REG_LOAD2`: the OXM entry right after the subtype, as Open
    /// vSwitch writes and reads it.
    #[test]
    fn reg_load2_has_its_oxm_after_the_subtype() {
        let b = encode("actions=set_field:0x5/0xff->metadata", OFP10);
        let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
        assert_eq!(
            hex,
            "ffff002000002320002180000510000000000000000500000000000000ff0000"
        );
        let mut out = Vec::new();
        pull_actions(&mut Reader::new(&b), OFP10, &mut out).unwrap();
        assert_eq!(
            flowpath_ofproto::action::format_actions(&out),
            "set_field:0x5/0xff->metadata"
        );
    }
}
