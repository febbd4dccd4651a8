//! `learn(...)` on the wire: Open vSwitch's `NXAST_LEARN` and, when the
//! learn has a `limit` or a `result_dst`, `NXAST_LEARN2`, to and from
//! flowpath's [`Learn`].
//!
//! Layout: the fixed part (timeouts, priority, cookie, flags, table,
//! FIN timeouts; `NXAST_LEARN2` adds the limit, the result bit's offset
//! and its field's header), then one spec after another: a 16-bit header
//! (bit 13: the source is a constant; bits 11-12: match, load or output;
//! the low 10 bits: the width), the source (a field header and offset, or
//! the constant in 16-bit units), the destination (a field header and
//! offset; none for output), zero padding to 8 bytes.

use super::*;
use crate::buf::{Reader, Writer};
use crate::error::*;
use crate::nxm;
use flowpath_ofproto::learn::{self, Learn, Spec, Src};

pub(super) const NXAST_LEARN: u16 = 16;
pub(super) const NXAST_LEARN2: u16 = 45;

const F_SEND_FLOW_REM: u16 = 1;
const F_DELETE_LEARNED: u16 = 2;
const F_WRITE_RESULT: u16 = 4;
const SRC_IMMEDIATE: u16 = 1 << 13;
const DST_LOAD: u16 = 1 << 11;
const DST_OUTPUT: u16 = 2 << 11;
const DST_MASK: u16 = 3 << 11;
const N_BITS_MASK: u16 = 0x3ff;

fn header_of(s: &Subfield) -> Result<u32, String> {
    nxm::subfield_header(s.field).ok_or_else(|| format!("{:?} has no NXM/OXM name", s.field))
}

fn put_sub(w: &mut Writer, s: &Subfield) -> Result<(), String> {
    w.u32(header_of(s)?);
    w.u16(u16::from(s.ofs));
    Ok(())
}

/// Writes `l` as `NXAST_LEARN` (or `NXAST_LEARN2`) into `w`, padded.
pub(super) fn put_learn(w: &mut Writer, l: &Learn) -> Result<(), String> {
    let start = w.len();
    let v2 = l.limit != 0 || l.result_dst.is_some();
    w.u16(0xffff);
    w.u16(0);
    w.u32(crate::header::NX_VENDOR_ID);
    w.u16(if v2 { NXAST_LEARN2 } else { NXAST_LEARN });
    w.u16(l.idle_timeout);
    w.u16(l.hard_timeout);
    w.u16(l.priority);
    w.u64(l.cookie);
    let mut flags = 0;
    if l.flags.0 {
        flags |= F_SEND_FLOW_REM;
    }
    if l.flags.1 {
        flags |= F_DELETE_LEARNED;
    }
    if l.result_dst.is_some() {
        flags |= F_WRITE_RESULT;
    }
    w.u16(flags);
    w.u8(l.table);
    w.u8(0);
    w.u16(l.fin_timeouts.0);
    w.u16(l.fin_timeouts.1);
    if v2 {
        w.u32(l.limit);
        w.u16(l.result_dst.map_or(0, |d| u16::from(d.ofs)));
        w.u16(0);
        if let Some(d) = &l.result_dst {
            w.u32(header_of(d)?);
        }
    }
    for sp in &l.specs {
        let (dst_type, src, dst, n_bits) = match sp {
            Spec::Match { dst, src } => (0, *src, Some(dst), dst.n_bits),
            Spec::Load { dst, src } => (DST_LOAD, *src, Some(dst), dst.n_bits),
            Spec::Output(s) => (DST_OUTPUT, Src::Field(*s), None, s.n_bits),
        };
        let n_bits = u16::from(n_bits);
        match src {
            Src::Field(s) => {
                w.u16(n_bits | dst_type);
                put_sub(w, &s)?;
            }
            Src::Value(v) => {
                w.u16(n_bits | dst_type | SRC_IMMEDIATE);
                w.uint(v, 2 * usize::from(n_bits.div_ceil(16)));
            }
        }
        if let Some(d) = dst {
            put_sub(w, d)?;
        }
    }
    w.pad8_from(start);
    let n = (w.len() - start) as u16;
    w.patch_u16(start + 2, n);
    Ok(())
}

fn pull_sub(b: &mut Reader<'_>, n_bits: u16) -> Result<Subfield, OfError> {
    let h = b.u32()?;
    let ofs = b.u16()?;
    super::decode::sub_from(h, ofs, n_bits)
}

/// Reads the body of `NXAST_LEARN` / `NXAST_LEARN2` (after the subtype)
/// into a learn action, refused as Open vSwitch refuses it.
pub(super) fn pull_learn(b: &mut Reader<'_>, v2: bool) -> Result<Action, OfError> {
    let idle_timeout = b.u16()?;
    let hard_timeout = b.u16()?;
    let priority = b.u16()?;
    let cookie = b.u64()?;
    let flags = b.u16()?;
    let table = b.u8()?;
    if b.u8()? != 0 || table == 0xff {
        return Err(BAC_BAD_ARGUMENT);
    }
    let fin = (b.u16()?, b.u16()?);
    let allowed = F_SEND_FLOW_REM | F_DELETE_LEARNED | if v2 { F_WRITE_RESULT } else { 0 };
    if flags & !allowed != 0 {
        return Err(BAC_BAD_ARGUMENT);
    }
    let (mut limit, mut result_dst) = (0, None);
    if v2 {
        limit = b.u32()?;
        let ofs = b.u16()?;
        if b.u16()? != 0 {
            return Err(BAC_BAD_ARGUMENT);
        }
        if flags & F_WRITE_RESULT != 0 {
            let h = b.u32()?;
            let d = super::decode::sub_from(h, ofs, 1)?;
            if !d.field.info().writable {
                return Err(BAC_BAD_SET_ARGUMENT);
            }
            result_dst = Some(d);
        } else if ofs != 0 {
            return Err(BAC_BAD_ARGUMENT);
        }
    }
    let mut specs = Vec::new();
    while b.remaining() >= 2 {
        let h = b.u16()?;
        if h == 0 {
            break;
        }
        let n_bits = h & N_BITS_MASK;
        let dst_type = h & DST_MASK;
        let imm = h & SRC_IMMEDIATE != 0;
        if dst_type == DST_MASK || (dst_type == DST_OUTPUT && imm) || n_bits == 0 {
            return Err(BAC_BAD_ARGUMENT);
        }
        let src = if imm {
            let n = 2 * usize::from(n_bits.div_ceil(16));
            let bytes = b.bytes(n).map_err(|_| BAC_BAD_LEN)?;
            // Only the low `n_bits` count (16 bytes at most).
            let tail = &bytes[bytes.len().saturating_sub(16)..];
            let v = tail.iter().fold(0u128, |a, x| (a << 8) | u128::from(*x));
            let v = if n_bits >= 128 {
                v
            } else {
                v & ((1u128 << n_bits) - 1)
            };
            Src::Value(v)
        } else {
            Src::Field(pull_sub(b, n_bits).map_err(len_to_bad_len)?)
        };
        let spec = match dst_type {
            DST_OUTPUT => match src {
                Src::Field(s) => Spec::Output(s),
                Src::Value(_) => return Err(BAC_BAD_ARGUMENT),
            },
            _ => {
                let dst = pull_sub(b, n_bits).map_err(len_to_bad_len)?;
                if dst_type == DST_LOAD {
                    Spec::Load { dst, src }
                } else {
                    Spec::Match { dst, src }
                }
            }
        };
        specs.push(spec);
    }
    if b.rest().iter().any(|x| *x != 0) {
        return Err(BAC_BAD_ARGUMENT);
    }
    let l = Learn {
        table,
        priority,
        idle_timeout,
        hard_timeout,
        fin_timeouts: fin,
        cookie,
        flags: (flags & F_SEND_FLOW_REM != 0, flags & F_DELETE_LEARNED != 0),
        limit,
        result_dst,
        specs,
    };
    Ok(Action::Learn(learn::intern(l)))
}

fn len_to_bad_len(e: OfError) -> OfError {
    if e == BRC_BAD_LEN_E {
        BAC_BAD_LEN
    } else {
        e
    }
}
