//! Decoding: OpenFlow and Nicira actions and OpenFlow 1.1+ instructions
//! into flowpath's actions, refused as Open vSwitch refuses them.

use super::*;
use crate::buf::Reader;
use crate::error::*;
use crate::header::{NX_VENDOR_ID, OFP10, OFP15};
use crate::nxm;

pub(super) fn sub_from(h: u32, ofs: u16, n_bits: u16) -> Result<Subfield, OfError> {
    let field = nxm::field_of_header(h).ok_or(BAC_BAD_SET_TYPE)?;
    let width = if nxm::tun_md_len(h).is_some() {
        // (Named with Open vSwitch's 124 bytes; flowpath keeps 8.)
        64
    } else if nxm::len_of(nxm::unmasked(h)) == 0 {
        0
    } else {
        nxm::len_of(nxm::unmasked(h)) * 8
    };
    if n_bits == 0 || usize::from(ofs) + usize::from(n_bits) > width {
        return Err(BAC_BAD_SET_LEN);
    }
    Ok(Subfield {
        field,
        ofs: ofs as u8,
        n_bits: n_bits as u8,
    })
}

fn sub_ofs_nbits(h: u32, on: u16) -> Result<Subfield, OfError> {
    sub_from(h, on >> 6, (on & 0x3f) + 1)
}

fn out_port(version: u8, r: &mut Reader<'_>) -> Result<u32, OfError> {
    if version == OFP10 {
        Ok(u32::from(r.u16()?))
    } else {
        port::from_of11(r.u32()?).ok_or(BAC_BAD_OUT_PORT)
    }
}

fn output_action(p: u32, max_len: u16) -> Result<Action, OfError> {
    let p16 = p as u16;
    Ok(match p16 {
        _ if p > 0xffff => return Err(BAC_BAD_OUT_PORT),
        OFPP_IN_PORT => Action::InPort,
        OFPP_NORMAL => Action::Normal,
        OFPP_FLOOD => Action::Flood,
        OFPP_ALL => Action::All,
        OFPP_CONTROLLER => Action::controller(max_len),
        // A packet-out's output:TABLE: through the tables from table 0
        // (Open vSwitch translates it as this resubmit).
        port::OFPP_TABLE => Action::Resubmit {
            port: None,
            table: Some(0),
        },
        OFPP_LOCAL => Action::Output(p),
        0 => return Err(BAC_BAD_OUT_PORT),
        x if x >= port::OFPP_MAX => return Err(BAC_BAD_OUT_PORT),
        _ => Action::Output(p),
    })
}

/// Reads one OXM entry of a Set-Field (value and optional mask).
fn pull_oxm_value(r: &mut Reader<'_>) -> Result<(FieldId, u128, u128), OfError> {
    let h = r.u32().map_err(|_| BAC_BAD_SET_LEN)?;
    let f = nxm::field_of_header(h).ok_or(BAC_BAD_SET_TYPE)?;
    let n = nxm::len_of(nxm::unmasked(h));
    let info = f.info();
    if let Some(n) = nxm::tun_md_len(h) {
        // A `tun_metadataN` value as long as it needs (see
        // `nxm::tun_md_len`).
        let bad = |e| {
            if e == BMC_BAD_LEN {
                BAC_BAD_SET_LEN
            } else {
                BAC_BAD_SET_ARGUMENT
            }
        };
        let value = nxm::pull_tun_md(r, n).map_err(bad)?;
        let mask = if nxm::has_mask(h) {
            nxm::pull_tun_md(r, n).map_err(bad)?
        } else {
            info.full_mask()
        };
        if value & !mask != 0 {
            return Err(BMC_BAD_WILDCARDS);
        }
        return Ok((f, value, mask));
    }
    let mut value = r.uint(n).map_err(|_| BAC_BAD_SET_LEN)?;
    let mut mask = if nxm::has_mask(h) {
        r.uint(n).map_err(|_| BAC_BAD_SET_LEN)?
    } else {
        info.full_mask()
    };
    if value & !mask != 0 {
        // Open vSwitch refuses value bits outside the mask.
        return Err(BMC_BAD_WILDCARDS);
    }
    if f == FieldId::InPort && n == 4 {
        value = u128::from(port::from_of11(value as u32).ok_or(BAC_BAD_SET_ARGUMENT)?);
        mask = if nxm::has_mask(h) {
            mask & 0xffff
        } else {
            info.full_mask()
        };
    }
    let (f, value, mask) = if f == FieldId::IpDscp {
        (FieldId::NwTos, value << 2, mask << 2)
    } else {
        (f, value, mask)
    };
    if value & !f.info().full_mask() != 0 {
        return Err(BAC_BAD_SET_ARGUMENT);
    }
    Ok((f, value & mask, mask & f.info().full_mask()))
}

/// Reads an action list (all of `r`) for `version` into `out`.
pub fn pull_actions(r: &mut Reader<'_>, version: u8, out: &mut Vec<Action>) -> Result<(), OfError> {
    while r.remaining() > 0 {
        if r.remaining() < 8 {
            return Err(BAC_BAD_LEN);
        }
        let mut peek = *r;
        let atype = peek.u16()?;
        let len = usize::from(peek.u16()?);
        if len < 8 || len % 8 != 0 || len > r.remaining() {
            return Err(BAC_BAD_LEN);
        }
        let body = r.bytes(len)?;
        let mut b = Reader::new(&body[4..]);
        pull_one(atype, &mut b, version, out).map_err(|e| {
            if e == BRC_BAD_LEN_E {
                BAC_BAD_LEN
            } else {
                e
            }
        })?;
    }
    Ok(())
}

/// A Set-Field (or `NXAST_REG_LOAD2`) as an action: a masked write to a
/// field whose text form takes no mask is the equivalent bit-range
/// `load` (the mask must be one run of bits).
fn set_field_action(field: FieldId, value: u128, mask: u128) -> Result<Action, OfError> {
    let info = field.info();
    if mask == info.full_mask() || info.maskable {
        return Ok(Action::SetField {
            field,
            value,
            mask,
            legacy: false,
        });
    }
    if mask == 0 || mask & !info.full_mask() != 0 {
        return Err(BAC_BAD_SET_ARGUMENT);
    }
    let ofs = mask.trailing_zeros();
    let run = mask >> ofs;
    if run & (run + 1) != 0 {
        return Err(BAC_BAD_SET_ARGUMENT);
    }
    Ok(Action::Load {
        dst: Subfield {
            field,
            ofs: ofs as u8,
            n_bits: run.count_ones() as u8,
        },
        value: value >> ofs,
    })
}

fn legacy_set(f: FieldId, value: u128) -> Action {
    Action::SetField {
        field: f,
        value,
        mask: f.info().full_mask(),
        legacy: true,
    }
}

fn pull_one(atype: u16, b: &mut Reader<'_>, v: u8, out: &mut Vec<Action>) -> Result<(), OfError> {
    let of10 = v == OFP10;
    let a = match (of10, atype) {
        (_, 0) => {
            let p = out_port(v, b)?;
            let max_len = b.u16()?;
            output_action(p, max_len)?
        }
        (_, 0xffff) => return pull_nx(b, v, out),
        (_, 1) => {
            let vid = b.u16()?;
            if vid > 4095 {
                return Err(BAC_BAD_ARGUMENT);
            }
            Action::ModVlanVid(vid)
        }
        (_, 2) => {
            let pcp = b.u8()?;
            if pcp > 7 {
                return Err(BAC_BAD_ARGUMENT);
            }
            Action::ModVlanPcp(pcp)
        }
        (true, 3) | (false, 18) => Action::PopVlan,
        (true, 4) | (false, 3) => legacy_set(FieldId::EthSrc, b.uint(6)?),
        (true, 5) | (false, 4) => legacy_set(FieldId::EthDst, b.uint(6)?),
        (true, 6) | (false, 5) => legacy_set(FieldId::NwSrc, u128::from(b.u32()?)),
        (true, 7) | (false, 6) => legacy_set(FieldId::NwDst, u128::from(b.u32()?)),
        (true, 8) | (false, 7) => {
            let tos = b.u8()?;
            if tos & 3 != 0 {
                return Err(BAC_BAD_ARGUMENT);
            }
            legacy_set(FieldId::NwTos, u128::from(tos))
        }
        (_, 9) => legacy_set(FieldId::TpSrc, u128::from(b.u16()?)),
        (_, 10) => legacy_set(FieldId::TpDst, u128::from(b.u16()?)),
        (true, 11) => {
            let port = u32::from(b.u16()?);
            b.skip(6)?;
            Action::Enqueue {
                port,
                queue: b.u32()?,
            }
        }
        (false, 23) => legacy_set(FieldId::NwTtl, u128::from(b.u8()?)),
        (false, 15) => Action::SetMplsTtl(b.u8()?),
        (false, 16) => Action::DecMplsTtl,
        (false, 17) => {
            let t = b.u16()?;
            if t != 0x8100 && t != 0x88a8 {
                return Err(BAC_BAD_ARGUMENT);
            }
            Action::PushVlan(t)
        }
        (false, 19) => Action::PushMpls(b.u16()?),
        (false, 20) => Action::PopMpls(b.u16()?),
        (false, 21) => Action::SetQueue(b.u32()?),
        (false, 22) => Action::Group(b.u32()?),
        (false, 24) => Action::DecTtl,
        (false, 28) if v >= OFP15 => {
            // OpenFlow 1.5's copy-field: Open vSwitch's move.
            let n = b.u16()?;
            let so = b.u16()?;
            let d_o = b.u16()?;
            b.skip(2)?;
            let sh = b.u32()?;
            let dh = b.u32()?;
            Action::Move {
                src: sub_from(sh, so, n)?,
                dst: sub_from(dh, d_o, n)?,
            }
        }
        (false, 25) => {
            let (field, value, mask) = pull_oxm_value(b)?;
            // OpenFlow 1.5: a VLAN_VID set-field has OFPVID_PRESENT in its
            // value and mask.
            if field == FieldId::VlanVid && (value & 0x1000 == 0 || mask & 0x1000 == 0) {
                return Err(BAC_BAD_SET_ARGUMENT);
            }
            set_field_action(field, value, mask)?
        }
        _ => return Err(BAC_BAD_TYPE),
    };
    out.push(a);
    Ok(())
}

fn pull_nx(b: &mut Reader<'_>, v: u8, out: &mut Vec<Action>) -> Result<(), OfError> {
    if b.u32()? != NX_VENDOR_ID {
        return Err(BAC_BAD_VENDOR);
    }
    let st = b.u16()?;
    let a = match st {
        NXAST_RESUBMIT | NXAST_RESUBMIT_TABLE => {
            let p = b.u16()?;
            let t = if st == NXAST_RESUBMIT { 255 } else { b.u8()? };
            Action::Resubmit {
                port: (p != OFPP_IN_PORT).then_some(u32::from(p)),
                table: (t != 255).then_some(t),
            }
        }
        NXAST_SET_TUNNEL | NXAST_SET_TUNNEL64 => {
            let value = if st == NXAST_SET_TUNNEL {
                b.skip(2)?;
                u128::from(b.u32()?)
            } else {
                b.skip(6)?;
                u128::from(b.u64()?)
            };
            legacy_set(FieldId::TunId, value)
        }
        NXAST_SET_QUEUE => {
            b.skip(2)?;
            Action::SetQueue(b.u32()?)
        }
        NXAST_POP_QUEUE => Action::PopQueue,
        NXAST_REG_MOVE => {
            let n = b.u16()?;
            let so = b.u16()?;
            let d_o = b.u16()?;
            let sh = b.u32()?;
            let dh = b.u32()?;
            Action::Move {
                src: sub_from(sh, so, n)?,
                dst: sub_from(dh, d_o, n)?,
            }
        }
        NXAST_REG_LOAD => {
            let on = b.u16()?;
            let h = b.u32()?;
            let value = u128::from(b.u64()?);
            let dst = sub_ofs_nbits(h, on)?;
            if dst.n_bits < 64 && value >> dst.n_bits != 0 {
                return Err(BAC_BAD_ARGUMENT);
            }
            Action::Load { dst, value }
        }
        NXAST_REG_LOAD2 => {
            // The OXM entry follows the subtype; zeros pad it to 8 bytes.
            let (field, value, mask) = pull_oxm_value(b)?;
            if b.rest().iter().any(|x| *x != 0) {
                return Err(BAC_BAD_SET_ARGUMENT);
            }
            set_field_action(field, value, mask)?
        }
        NXAST_NOTE => Action::Note(flowpath_ofproto::action::userdata::intern(b.rest())),
        NXAST_MULTIPATH => {
            let fields = b.u16()?;
            let basis = b.u16()?;
            b.skip(2)?;
            let alg = b.u16()?;
            let max_link = b.u16()?;
            let arg = b.u32()?;
            b.skip(2)?;
            let on = b.u16()?;
            let dst = sub_ofs_nbits(b.u32()?, on)?;
            if fields > 6 || alg > 3 {
                return Err(BAC_BAD_ARGUMENT);
            }
            Action::Multipath {
                fields: fields as u8,
                basis,
                alg: alg as u8,
                n_links: u32::from(max_link) + 1,
                arg,
                dst,
            }
        }
        NXAST_BUNDLE | NXAST_BUNDLE_LOAD => {
            let alg = b.u16()?;
            let fields = b.u16()?;
            let basis = b.u16()?;
            let _slave_type = b.u32()?;
            let n = b.u16()?;
            let on = b.u16()?;
            let dh = b.u32()?;
            b.skip(4)?;
            if alg > 1 || fields > 6 || usize::from(n) > MAX_BUNDLE_MEMBERS {
                return Err(BAC_BAD_ARGUMENT);
            }
            let mut members = [0u16; MAX_BUNDLE_MEMBERS];
            for m in members.iter_mut().take(usize::from(n)) {
                *m = b.u16()?;
            }
            Action::Bundle {
                fields: fields as u8,
                basis,
                hrw: alg == 1,
                members,
                n: n as u8,
                load: if st == NXAST_BUNDLE_LOAD {
                    Some(sub_ofs_nbits(dh, on)?)
                } else {
                    None
                },
            }
        }
        NXAST_OUTPUT_REG | NXAST_OUTPUT_REG2 => {
            let on = b.u16()?;
            let src = if st == NXAST_OUTPUT_REG {
                sub_ofs_nbits(b.u32()?, on)?
            } else {
                b.skip(2)?;
                sub_ofs_nbits(b.u32()?, on)?
            };
            Action::OutputReg { src }
        }
        NXAST_LEARN | NXAST_LEARN2 => super::learn::pull_learn(b, st == NXAST_LEARN2)?,
        NXAST_DEC_TTL => Action::DecTtl,
        NXAST_FIN_TIMEOUT => Action::FinTimeout {
            idle: b.u16()?,
            hard: b.u16()?,
        },
        NXAST_CONTROLLER => {
            let max_len = b.u16()?;
            let id = b.u16()?;
            let reason = b.u8()?;
            Action::Controller {
                max_len,
                reason,
                id,
                userdata: 0,
                pause: false,
                meter_id: None,
            }
        }
        NXAST_CONTROLLER2 => {
            b.skip(6)?;
            let mut a = Action::controller(flowpath_ofproto::action::CONTROLLER_MAX_LEN);
            while b.remaining() >= 4 {
                let t = b.u16()?;
                let l = usize::from(b.u16()?);
                if l < 4 {
                    break;
                }
                let body = b.bytes(l - 4)?;
                b.skip(((l + 7) & !7) - l).ok();
                let mut pr = Reader::new(body);
                if let Action::Controller {
                    max_len,
                    reason,
                    id,
                    userdata,
                    pause,
                    meter_id,
                } = &mut a
                {
                    match t {
                        0 => *max_len = pr.u16()?,
                        1 => *id = pr.u16()?,
                        2 => *reason = pr.u8()?,
                        3 => *userdata = flowpath_ofproto::action::userdata::intern(body),
                        4 => *pause = true,
                        5 => *meter_id = Some(pr.u32()?),
                        _ => return Err(BAC_BAD_ARGUMENT),
                    }
                }
            }
            a
        }
        NXAST_DEC_TTL_CNT_IDS => {
            let n = usize::from(b.u16()?);
            b.skip(4)?;
            if n > MAX_DEC_TTL_IDS {
                return Err(BAC_BAD_ARGUMENT);
            }
            let mut ids = [0u16; MAX_DEC_TTL_IDS];
            for x in ids.iter_mut().take(n) {
                *x = b.u16()?;
            }
            Action::DecTtlIds { ids, n: n as u8 }
        }
        NXAST_WRITE_METADATA => {
            b.skip(6)?;
            Action::WriteMetadata {
                value: b.u64()?,
                mask: b.u64()?,
            }
        }
        NXAST_PUSH_MPLS => Action::PushMpls(b.u16()?),
        NXAST_POP_MPLS => Action::PopMpls(b.u16()?),
        NXAST_SET_MPLS_TTL => Action::SetMplsTtl(b.u8()?),
        NXAST_DEC_MPLS_TTL => Action::DecMplsTtl,
        NXAST_STACK_PUSH | NXAST_STACK_POP => {
            let ofs = b.u16()?;
            let h = b.u32()?;
            let n = b.u16()?;
            let f = sub_from(h, ofs, n)?;
            if st == NXAST_STACK_PUSH {
                Action::Push(f)
            } else {
                Action::Pop(f)
            }
        }
        NXAST_SAMPLE | NXAST_SAMPLE2 | NXAST_SAMPLE3 => {
            let probability = b.u16()?;
            let collector_set_id = b.u32()?;
            let obs_domain_id = b.u32()?;
            let obs_point_id = b.u32()?;
            let (mut sampling_port, mut direction) = (None, SampleDirection::Default);
            if st != NXAST_SAMPLE {
                let p = b.u16()?;
                sampling_port = (p != 0xffff).then_some(u32::from(p));
                let d = b.u8()?;
                let zeros = b.bytes(5)?;
                if st == NXAST_SAMPLE3 {
                    if zeros.iter().any(|z| *z != 0) {
                        return Err(BRC_MUST_BE_ZERO);
                    }
                    direction = SampleDirection::from_code(d).ok_or(BAC_BAD_ARGUMENT)?;
                }
            }
            if probability == 0 {
                return Err(BAC_BAD_ARGUMENT);
            }
            Action::Sample {
                probability,
                collector_set_id,
                obs_domain_id,
                obs_point_id,
                sampling_port,
                direction,
            }
        }
        NXAST_SET_MPLS_LABEL => {
            b.skip(2)?;
            Action::SetMplsLabel(b.u32()?)
        }
        NXAST_SET_MPLS_TC => Action::SetMplsTc(b.u8()?),
        NXAST_CONJUNCTION => {
            let k = b.u8()?;
            let n = b.u8()?;
            let id = b.u32()?;
            if !(2..=64).contains(&n) || k >= n {
                return Err(BAC_BAD_ARGUMENT);
            }
            Action::Conjunction { id, k: k + 1, n }
        }
        NXAST_OUTPUT_TRUNC => {
            let port = u32::from(b.u16()?);
            let max_len = b.u32()?;
            Action::OutputTrunc { port, max_len }
        }
        NXAST_GROUP => {
            b.skip(2)?;
            Action::Group(b.u32()?)
        }
        NXAST_CLONE => {
            b.skip(6)?;
            let mut inner = Vec::new();
            let mut ir = Reader::new(b.rest());
            pull_actions(&mut ir, v, &mut inner)?;
            out.push(Action::Clone {
                len: inner.len() as u16,
            });
            out.extend(inner);
            return Ok(());
        }
        ct::NXAST_CT => ct::pull_ct(b, v)?,
        ct::NXAST_CT_CLEAR => Action::CtClear,
        // Open vSwitch: "Cannot have NAT action outside of \"ct\" action".
        ct::NXAST_NAT => return Err(BAC_BAD_SET_ARGUMENT),
        NXAST_CHECK_PKT_LARGER => {
            let len = b.u16()?;
            let ofs = b.u16()?;
            let dst = sub_from(b.u32()?, ofs, 1)?;
            Action::CheckPktLarger { len, dst }
        }
        _ => return Err(BAC_BAD_VENDOR_TYPE),
    };
    out.push(a);
    Ok(())
}

/// Reads OpenFlow 1.1+ instructions (all of `r`) into an action list
/// with flowpath's instruction markers, and the write-actions set.
pub fn pull_instructions(
    r: &mut Reader<'_>,
    version: u8,
) -> Result<(Vec<Action>, Vec<Action>), OfError> {
    let mut apply = Vec::new();
    let mut tail = Vec::new();
    let mut write = Vec::new();
    let mut last_type = 0u16;
    let mut seen = [false; 6];
    while r.remaining() > 0 {
        if r.remaining() < 4 {
            return Err(BIC_BAD_LEN);
        }
        let mut peek = *r;
        let itype = peek.u16()?;
        let len = usize::from(peek.u16()?);
        if len < 8 || len % 8 != 0 || len > r.remaining() {
            return Err(BIC_BAD_LEN);
        }
        let body = r.bytes(len)?;
        let mut b = Reader::new(&body[4..]);
        if (1..=5).contains(&itype) {
            if seen[usize::from(itype)] {
                return Err(BIC_UNSUP_INST);
            }
            seen[usize::from(itype)] = true;
        }
        let order = |t: u16| match t {
            OFPIT_APPLY_ACTIONS => 1,
            OFPIT_CLEAR_ACTIONS => 2,
            OFPIT_WRITE_ACTIONS => 3,
            OFPIT_WRITE_METADATA => 4,
            _ => 5,
        };
        if last_type != 0 && order(itype) < order(last_type) {
            return Err(BIC_UNSUP_INST);
        }
        last_type = itype;
        match itype {
            OFPIT_APPLY_ACTIONS => {
                b.skip(4)?;
                pull_actions(&mut b, version, &mut apply)?;
            }
            OFPIT_CLEAR_ACTIONS => tail.push(Action::ClearActions),
            OFPIT_WRITE_ACTIONS => {
                b.skip(4)?;
                pull_actions(&mut b, version, &mut write)?;
                tail.push(Action::WriteActions);
            }
            OFPIT_WRITE_METADATA => {
                b.skip(4)?;
                tail.push(Action::WriteMetadata {
                    value: b.u64()?,
                    mask: b.u64()?,
                });
            }
            OFPIT_GOTO_TABLE => tail.push(Action::GotoTable(b.u8()?)),
            6 => return Err(BIC_UNSUP_INST),
            _ => return Err(BIC_UNKNOWN_INST),
        }
    }
    apply.extend(tail);
    Ok((apply, write))
}
