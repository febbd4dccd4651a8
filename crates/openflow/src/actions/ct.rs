//! Connection tracking on the wire: `NXAST_CT` (`ct(...)`), `NXAST_NAT`
//! (the `nat(...)` inside it) and `NXAST_CT_CLEAR` (`ct_clear`), the same
//! in every OpenFlow version (Nicira vendor actions), as Open vSwitch
//! writes and reads them.
//!
//! `NXAST_CT` is 24 bytes — flags (`commit` 1, `force` 2), the zone as a
//! source field header and `ofs_nbits` (or header 0 and the zone number),
//! the table to go on in (0xff: none), two bytes of ALG port — followed
//! by nested actions inside the action's length. Open vSwitch writes a
//! `nat(...)` as the first nested action (`NXAST_NAT`: flags, a bitmap of
//! the range parts present, then those parts in order: IPv4 or IPv6
//! minimum and maximum, port minimum and maximum, padded to 8 bytes)
//! among the nested actions where the text put it (first for
//! `ct(nat(...),exec(...))`, after the writes for
//! `ct(exec(...),nat(...))`), and the `exec(...)` writes. flowpath keeps
//! the NAT apart from the writes ([`Ct::nat`], [`Ct::exec`],
//! [`Ct::nat_pos`]); a second NAT, which Open vSwitch would take, is
//! refused (`OFPBAC_BAD_ARGUMENT`).
//!
//! Decoding refuses what Open vSwitch's `decode_NXAST_RAW_CT`,
//! `decode_NXAST_RAW_NAT` and nesting checks refuse, with the same
//! errors: `force` without `commit`, a zone field that is not 16 bits,
//! nested actions other than writes to `ct_mark`/`ct_label` and `nat`,
//! nested writes or a NAT with a kind or range without `commit`, unknown
//! or conflicting NAT flags and short or inconsistent ranges; a `nat`
//! outside a `ct` is `OFPBAC_BAD_SET_ARGUMENT`. The match-dependent
//! checks (`check_CT`: IP, the ALG's protocol) are the rule parser's,
//! run on every flow read from the wire.

use super::decode::sub_from;
use super::*;
use crate::buf::{Reader, Writer};
use crate::error::*;
use crate::header::NX_VENDOR_ID;
use crate::nxm;
use flowpath_odp::{CtNat, NatKind};
use flowpath_ofproto::ct::{self, Ct, CtZone};

/// `NXAST_CT`.
pub(super) const NXAST_CT: u16 = 35;
/// `NXAST_NAT`.
pub(super) const NXAST_NAT: u16 = 36;
/// `NXAST_CT_CLEAR`.
pub(super) const NXAST_CT_CLEAR: u16 = 43;

const CT_F_COMMIT: u16 = 1 << 0;
const CT_F_FORCE: u16 = 1 << 1;
/// `recirc_table` when the packet does not go on in another table.
const CT_RECIRC_NONE: u8 = 0xff;

const NAT_F_SRC: u16 = 1 << 0;
const NAT_F_DST: u16 = 1 << 1;
const NAT_F_PERSISTENT: u16 = 1 << 2;
const NAT_F_PROTO_HASH: u16 = 1 << 3;
const NAT_F_PROTO_RANDOM: u16 = 1 << 4;
const NAT_F_MASK: u16 = 0x1f;

const NAT_RANGE_IPV4_MIN: u16 = 1 << 0;
const NAT_RANGE_IPV4_MAX: u16 = 1 << 1;
const NAT_RANGE_IPV6_MIN: u16 = 1 << 2;
const NAT_RANGE_IPV6_MAX: u16 = 1 << 3;
const NAT_RANGE_PROTO_MIN: u16 = 1 << 4;
const NAT_RANGE_PROTO_MAX: u16 = 1 << 5;

fn nx_start(w: &mut Writer, subtype: u16) -> usize {
    let start = w.len();
    w.u16(0xffff);
    w.u16(0);
    w.u32(NX_VENDOR_ID);
    w.u16(subtype);
    start
}

fn end(w: &mut Writer, start: usize) {
    w.pad8_from(start);
    let n = (w.len() - start) as u16;
    w.patch_u16(start + 2, n);
}

/// Writes `ct_clear`.
pub(super) fn put_ct_clear(w: &mut Writer) {
    let s = nx_start(w, NXAST_CT_CLEAR);
    end(w, s);
}

/// Writes the `ct` action interned as `id`, its NAT and writes nested.
pub(super) fn put_ct(w: &mut Writer, id: u32, cx: Ctx<'_>) -> Result<(), String> {
    let ct = ct::get(id).ok_or_else(|| format!("ct #{id} is not registered"))?;
    let s = nx_start(w, NXAST_CT);
    let mut flags = 0;
    if ct.commit {
        flags |= CT_F_COMMIT;
    }
    if ct.force {
        flags |= CT_F_FORCE;
    }
    w.u16(flags);
    match ct.zone {
        CtZone::Imm(z) => {
            w.u32(0);
            w.u16(z);
        }
        CtZone::Field(sf) => {
            let h = nxm::subfield_header(sf.field)
                .ok_or_else(|| format!("{:?} has no NXM name", sf.field))?;
            w.u32(h);
            w.u16((u16::from(sf.ofs) << 6) | (u16::from(sf.n_bits) - 1));
        }
    }
    w.u8(ct.table.unwrap_or(CT_RECIRC_NONE));
    w.zeros(3);
    w.u16(ct.alg);
    let pos = ct.nat_pos.min(ct.exec.len());
    put_actions(w, &ct.exec[..pos], cx)?;
    if let Some(n) = &ct.nat {
        put_nat(w, n);
    }
    put_actions(w, &ct.exec[pos..], cx)?;
    end(w, s);
    Ok(())
}

fn put_nat(w: &mut Writer, n: &CtNat) {
    let s = nx_start(w, NXAST_NAT);
    w.zeros(2);
    let mut flags = match n.kind {
        NatKind::Existing => 0,
        NatKind::Src => NAT_F_SRC,
        NatKind::Dst => NAT_F_DST,
    };
    if n.persistent {
        flags |= NAT_F_PERSISTENT;
    }
    if n.hash {
        flags |= NAT_F_PROTO_HASH;
    }
    if n.random {
        flags |= NAT_F_PROTO_RANDOM;
    }
    w.u16(flags);
    let present_at = w.len();
    w.u16(0);
    let mut present = 0;
    if n.has_addr {
        let (width, min_bit, max_bit) = if n.v6 {
            (16, NAT_RANGE_IPV6_MIN, NAT_RANGE_IPV6_MAX)
        } else {
            (4, NAT_RANGE_IPV4_MIN, NAT_RANGE_IPV4_MAX)
        };
        if n.addr_min != 0 {
            w.uint(n.addr_min, width);
            present |= min_bit;
        }
        if n.addr_max != 0 {
            w.uint(n.addr_max, width);
            present |= max_bit;
        }
        if n.port_min != 0 {
            w.u16(n.port_min);
            present |= NAT_RANGE_PROTO_MIN;
        }
        if n.port_max != 0 {
            w.u16(n.port_max);
            present |= NAT_RANGE_PROTO_MAX;
        }
    }
    w.patch_u16(present_at, present);
    end(w, s);
}

/// Reads an `NXAST_CT`'s body (after its subtype) into `Action::Ct`.
pub(super) fn pull_ct(b: &mut Reader<'_>, v: u8) -> Result<Action, OfError> {
    let flags = b.u16()?;
    let zone_src = b.u32()?;
    let zone_arg = b.u16()?;
    let table = b.u8()?;
    b.skip(3)?;
    let alg = b.u16()?;
    let commit = flags & CT_F_COMMIT != 0;
    if flags & CT_F_FORCE != 0 && !commit {
        return Err(BAC_BAD_ARGUMENT);
    }
    let zone = if zone_src != 0 {
        let sf = sub_from(zone_src, zone_arg >> 6, (zone_arg & 0x3f) + 1)?;
        if sf.n_bits != 16 {
            return Err(BAC_BAD_SET_LEN);
        }
        CtZone::Field(sf)
    } else {
        CtZone::Imm(zone_arg)
    };
    let (nat, nat_pos, exec) = pull_nested(&mut Reader::new(b.rest()), v)?;
    let nat_needs_commit = nat.is_some_and(|n| {
        n.kind != NatKind::Existing || n.has_addr || n.persistent || n.hash || n.random
    });
    if !commit && (!exec.is_empty() || nat_needs_commit) {
        return Err(BAC_BAD_ARGUMENT);
    }
    let id = ct::intern(Ct {
        commit,
        force: flags & CT_F_FORCE != 0,
        table: (table != CT_RECIRC_NONE).then_some(table),
        zone,
        nat,
        exec,
        nat_pos,
        alg,
    });
    Ok(Action::Ct(id))
}

/// The nested actions of an `NXAST_CT`: writes to `ct_mark`/`ct_label`
/// and at most one `NXAST_NAT`, with the number of writes before it.
type Nested = (Option<CtNat>, usize, Vec<Action>);

fn pull_nested(r: &mut Reader<'_>, v: u8) -> Result<Nested, OfError> {
    let mut nat = None;
    let mut nat_pos = 0;
    let mut exec = Vec::new();
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
        let is_nat = atype == 0xffff && len >= 10 && {
            let mut h = Reader::new(&body[4..]);
            h.u32()? == NX_VENDOR_ID && h.u16()? == NXAST_NAT
        };
        if is_nat {
            let n = pull_nat(&mut Reader::new(&body[10..]))?;
            // flowpath's `ct` holds one NAT.
            if nat.is_some() {
                return Err(BAC_BAD_ARGUMENT);
            }
            nat = Some(n);
            nat_pos = exec.len();
        } else {
            let mut one = Vec::new();
            pull_actions(&mut Reader::new(body), v, &mut one)?;
            for a in one {
                check_nested(&a)?;
                exec.push(a);
            }
        }
    }
    Ok((nat, nat_pos, exec))
}

/// Open vSwitch's nesting rule for `ct`: only writes to `ct_mark` and
/// `ct_label`.
fn check_nested(a: &Action) -> Result<(), OfError> {
    let dst = match a {
        Action::SetField { field, .. } => Some(*field),
        Action::Load { dst, .. } | Action::Move { dst, .. } => Some(dst.field),
        _ => None,
    };
    match dst {
        Some(FieldId::CtMark | FieldId::CtLabel) => Ok(()),
        _ => Err(BAC_BAD_ARGUMENT),
    }
}

/// Reads an `NXAST_NAT`'s body (after its subtype).
pub(super) fn pull_nat(b: &mut Reader<'_>) -> Result<CtNat, OfError> {
    b.skip(2)?;
    let flags = b.u16()?;
    let present = b.u16()?;
    let bad = BAC_BAD_ARGUMENT;
    if flags & !NAT_F_MASK != 0
        || (flags & NAT_F_SRC != 0 && flags & NAT_F_DST != 0)
        || (flags & NAT_F_PROTO_HASH != 0 && flags & NAT_F_PROTO_RANDOM != 0)
    {
        return Err(bad);
    }
    let mut n = CtNat {
        kind: if flags & NAT_F_SRC != 0 {
            NatKind::Src
        } else if flags & NAT_F_DST != 0 {
            NatKind::Dst
        } else {
            NatKind::Existing
        },
        persistent: flags & NAT_F_PERSISTENT != 0,
        hash: flags & NAT_F_PROTO_HASH != 0,
        random: flags & NAT_F_PROTO_RANDOM != 0,
        ..CtNat::default()
    };
    let has = |bit: u16| present & bit != 0;
    // The order of Open vSwitch's checks: IPv4 first, then IPv6.
    let width = if has(NAT_RANGE_IPV4_MIN) {
        if has(NAT_RANGE_IPV6_MIN) || has(NAT_RANGE_IPV6_MAX) {
            return Err(bad);
        }
        Some((4, NAT_RANGE_IPV4_MAX))
    } else if has(NAT_RANGE_IPV4_MAX) {
        return Err(bad);
    } else if has(NAT_RANGE_IPV6_MIN) {
        Some((16, NAT_RANGE_IPV6_MAX))
    } else if has(NAT_RANGE_IPV6_MAX) {
        return Err(bad);
    } else {
        None
    };
    if let Some((width, max_bit)) = width {
        n.v6 = width == 16;
        n.has_addr = true;
        n.addr_min = b.uint(width).map_err(|_| bad)?;
        if n.addr_min == 0 {
            return Err(bad);
        }
        if has(max_bit) {
            n.addr_max = b.uint(width).map_err(|_| bad)?;
            if n.addr_max < n.addr_min {
                return Err(bad);
            }
        }
    }
    if has(NAT_RANGE_PROTO_MIN) {
        if !n.has_addr {
            return Err(bad);
        }
        n.port_min = b.u16().map_err(|_| bad)?;
        if n.port_min == 0 {
            return Err(bad);
        }
        if has(NAT_RANGE_PROTO_MAX) {
            n.port_max = b.u16().map_err(|_| bad)?;
            if n.port_max < n.port_min {
                return Err(bad);
            }
        }
    } else if has(NAT_RANGE_PROTO_MAX) {
        return Err(bad);
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::{OFP10, OFP13, OFP15};
    use flowpath_ofproto::action::format_actions;
    use flowpath_ofproto::parse::parse_rule;

    fn encode(text: &str, version: u8) -> (Vec<u8>, String) {
        let rule = parse_rule(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let mut w = Writer::new();
        let cx = Ctx {
            version,
            matching: &rule.matching,
        };
        put_actions(&mut w, &rule.actions, cx).unwrap_or_else(|e| panic!("{text}: {e}"));
        (w.buf, format_actions(&rule.actions))
    }

    fn decode(b: &[u8], version: u8) -> Result<String, OfError> {
        let mut out = Vec::new();
        pull_actions(&mut Reader::new(b), version, &mut out)?;
        Ok(format_actions(&out))
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    const FLOWS: &[&str] = &[
        "ip,actions=ct(table=1)",
        "ip,ct_state=+trk+new,actions=ct(commit),output:2",
        "ip,actions=ct(commit,zone=NXM_NX_REG13[0..15],exec(load:0x1->NXM_NX_CT_MARK[]),nat(src=10.0.0.1-10.0.0.9:1000-2000,random))",
        "ip,actions=ct(commit,zone=NXM_NX_REG13[0..15],nat(src=10.0.0.1-10.0.0.9:1000-2000,random),exec(load:0x1->NXM_NX_CT_MARK[]))",
        "ip,actions=ct(nat)",
        "ip,actions=ct(table=2,zone=7,nat)",
        "ip,actions=ct_clear,output:1",
        "tcp,actions=ct(commit,alg=ftp)",
        "udp,actions=ct(commit,alg=tftp)",
        "ip,actions=ct(commit,force,exec(set_field:0x5/0xff->ct_mark,set_field:0x1->ct_label))",
        "ip,actions=ct(commit,exec(load:0xffffffffffffffff0000000000000001->NXM_NX_CT_LABEL[]))",
        "ip,actions=ct(commit,nat(dst=10.0.0.5:80))",
        "ip,actions=ct(commit,nat(src=10.0.0.5,persistent,hash))",
        "ip,actions=ct(commit,nat(src))",
        "ipv6,actions=ct(commit,nat(dst=[fe80::1]-[fe80::9]:80-90))",
        "ipv6,actions=ct(commit,nat(src=fe80::1))",
    ];

    #[test]
    fn text_to_wire_to_text_in_every_version() {
        for text in FLOWS {
            for v in [OFP10, OFP13, OFP15] {
                let (b, mut want) = encode(text, v);
                if v == OFP15 {
                    // OpenFlow 1.5 has no NXAST_REG_LOAD: a load is a
                    // Set-Field, printed so (as Open vSwitch).
                    want = want.replace("load:0x1->NXM_NX_CT_MARK[]", "set_field:0x1->ct_mark");
                    want = want.replace(
                        "load:0xffffffffffffffff0000000000000001->NXM_NX_CT_LABEL[]",
                        "set_field:0xffffffffffffffff0000000000000001->ct_label",
                    );
                }
                if v != OFP15 && text.contains("set_field:0x5/0xff") {
                    // A masked write or one wider than 64 bits is sent as
                    // NXAST_REG_LOADs (as Open vSwitch) and read back as
                    // loads.
                    want = if v == OFP10 {
                        "ct(commit,force,exec(load:0x5->NXM_NX_CT_MARK[0..7],\
                         load:0x1->NXM_NX_CT_LABEL[0..63],load:0x0->NXM_NX_CT_LABEL[64..127]))"
                    } else {
                        "ct(commit,force,exec(load:0x5->NXM_NX_CT_MARK[0..7],set_field:0x1->ct_label))"
                    }
                    .into();
                }
                if v != OFP15 && text.contains("load:0xffffffffffffffff0000000000000001") {
                    want = "ct(commit,exec(load:0x1->NXM_NX_CT_LABEL[0..63],\
                            load:0xffffffffffffffff->NXM_NX_CT_LABEL[64..127]))"
                        .into();
                }
                assert_eq!(b.len() % 8, 0, "{text}");
                let got = decode(&b, v).unwrap_or_else(|e| panic!("{text} v{v}: {e} {}", hex(&b)));
                assert_eq!(got, want, "{text} v{v}");
            }
        }
    }

    #[test]
    fn bytes_as_open_vswitch_writes_them() {
        // `ovs-ofctl parse-actions OpenFlow10` reads these and writes
        // them back byte for byte.
        let (b, _) = encode("ip,actions=ct_clear", OFP10);
        assert_eq!(hex(&b), "ffff001000002320002b000000000000");
        for v in [OFP10, OFP13, OFP15] {
            let (b, _) = encode("tcp,actions=ct(commit,table=1,zone=5,alg=ftp)", v);
            assert_eq!(hex(&b), "ffff00180000232000230001000000000005010000000015");
        }
        // The NAT nested first, then the write (NXAST_REG_LOAD: OpenFlow
        // 1.5 has a Set-Field instead).
        for v in [OFP10, OFP13] {
            let (b, _) = encode(FLOWS[3], v);
            assert_eq!(
                hex(&b),
                "ffff0050000023200023000100011a04000fff0000000000\
                 ffff00200000232000240000001100330a0000010a00000903e807d000000000\
                 ffff0018000023200007001f0001d6040000000000000001"
            );
        }
    }

    #[test]
    fn refuses_what_open_vswitch_refuses() {
        let ct = |flags: u16, zsrc: u32, zarg: u16, nested: &[u8]| {
            let mut w = Writer::new();
            let s = nx_start(&mut w, NXAST_CT);
            w.u16(flags);
            w.u32(zsrc);
            w.u16(zarg);
            w.u8(0xff);
            w.zeros(3);
            w.u16(0);
            w.bytes(nested);
            end(&mut w, s);
            decode(&w.buf, OFP13)
        };
        let nat = |flags: u16, present: u16, opts: &[u8]| {
            let mut w = Writer::new();
            let s = nx_start(&mut w, NXAST_NAT);
            w.zeros(2);
            w.u16(flags);
            w.u16(present);
            w.bytes(opts);
            end(&mut w, s);
            w.buf
        };
        assert!(ct(CT_F_COMMIT, 0, 0, &[]).is_ok());
        // force without commit.
        assert_eq!(ct(CT_F_FORCE, 0, 0, &[]), Err(BAC_BAD_ARGUMENT));
        // A zone of 8 bits of reg0; an unknown zone field.
        let reg0 = nxm::header(1, 0, 4);
        assert_eq!(ct(0, reg0, 7, &[]), Err(BAC_BAD_SET_LEN));
        assert!(ct(0, reg0, 15, &[]).is_ok());
        assert_eq!(
            ct(0, nxm::header(1, 127, 4), 15, &[]),
            Err(BAC_BAD_SET_TYPE)
        );
        // A nested output; a nested write to reg0.
        let (out, _) = encode("actions=output:1", OFP13);
        assert_eq!(ct(CT_F_COMMIT, 0, 0, &out), Err(BAC_BAD_ARGUMENT));
        let (load, _) = encode("actions=load:1->NXM_NX_REG0[]", OFP13);
        assert_eq!(ct(CT_F_COMMIT, 0, 0, &load), Err(BAC_BAD_ARGUMENT));
        // Writes, or a NAT with a kind, need commit; a plain nat does not.
        let (mark, _) = encode("ip,actions=ct(commit,exec(set_field:1->ct_mark))", OFP13);
        let mark = &mark[24..];
        assert_eq!(ct(0, 0, 0, mark), Err(BAC_BAD_ARGUMENT));
        assert!(ct(CT_F_COMMIT, 0, 0, mark).is_ok());
        assert!(ct(0, 0, 0, &nat(0, 0, &[])).is_ok());
        assert_eq!(ct(0, 0, 0, &nat(NAT_F_SRC, 0, &[])), Err(BAC_BAD_ARGUMENT));
        // Two NATs.
        let two = [nat(0, 0, &[]), nat(0, 0, &[])].concat();
        assert_eq!(ct(0, 0, 0, &two), Err(BAC_BAD_ARGUMENT));
        // NAT flags and ranges.
        let c = |flags, present, opts: &[u8]| ct(CT_F_COMMIT, 0, 0, &nat(flags, present, opts));
        assert_eq!(c(NAT_F_SRC | NAT_F_DST, 0, &[]), Err(BAC_BAD_ARGUMENT));
        assert_eq!(
            c(NAT_F_SRC | NAT_F_PROTO_HASH | NAT_F_PROTO_RANDOM, 0, &[]),
            Err(BAC_BAD_ARGUMENT)
        );
        assert_eq!(c(0x20, 0, &[]), Err(BAC_BAD_ARGUMENT));
        let a1 = [10, 0, 0, 1];
        let a2 = [10, 0, 0, 2];
        assert!(c(NAT_F_SRC, NAT_RANGE_IPV4_MIN, &a1).is_ok());
        assert_eq!(
            c(NAT_F_SRC, NAT_RANGE_IPV4_MIN, &[0; 4]),
            Err(BAC_BAD_ARGUMENT)
        );
        assert_eq!(c(NAT_F_SRC, NAT_RANGE_IPV4_MAX, &a1), Err(BAC_BAD_ARGUMENT));
        let both = NAT_RANGE_IPV4_MIN | NAT_RANGE_IPV4_MAX;
        assert_eq!(
            c(NAT_F_SRC, both, &[a2, a1].concat()),
            Err(BAC_BAD_ARGUMENT)
        );
        assert_eq!(
            c(NAT_F_SRC, NAT_RANGE_IPV4_MIN | NAT_RANGE_IPV6_MIN, &[0; 20]),
            Err(BAC_BAD_ARGUMENT)
        );
        assert_eq!(
            c(NAT_F_SRC, NAT_RANGE_PROTO_MIN, &[0, 80]),
            Err(BAC_BAD_ARGUMENT)
        );
        let ports = NAT_RANGE_IPV4_MIN | NAT_RANGE_PROTO_MIN | NAT_RANGE_PROTO_MAX;
        assert_eq!(
            c(NAT_F_SRC, ports, &[&a1[..], &[0, 90, 0, 80]].concat()),
            Err(BAC_BAD_ARGUMENT)
        );
        // A range longer than the action: 16 bytes of IPv6 in 6.
        assert_eq!(
            c(
                NAT_F_SRC,
                NAT_RANGE_IPV6_MIN | NAT_RANGE_IPV6_MAX,
                &[0xfe; 16]
            ),
            Err(BAC_BAD_ARGUMENT)
        );
        // NAT outside ct.
        assert_eq!(decode(&nat(0, 0, &[]), OFP13), Err(BAC_BAD_SET_ARGUMENT));
        // A truncated ct: shorter than its 24 bytes.
        let (full, _) = encode("ip,actions=ct(commit)", OFP13);
        let mut short = full[..16].to_vec();
        short[3] = 16;
        assert_eq!(decode(&short, OFP13), Err(BAC_BAD_LEN));
    }

    /// Cut and corrupted `ct` actions decode to an error or to some
    /// action, never to a panic.
    #[test]
    fn corrupted_ct_actions_never_panic() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for text in FLOWS {
            for v in [OFP10, OFP13, OFP15] {
                let (b, _) = encode(text, v);
                for cut in 0..b.len() {
                    let _ = decode(&b[..cut], v);
                    // The same cut with the length fields saying so.
                    let mut c = b[..cut.next_multiple_of(8).min(b.len())].to_vec();
                    if c.len() >= 4 {
                        let n = c.len() as u16;
                        c[2..4].copy_from_slice(&n.to_be_bytes());
                        let _ = decode(&c, v);
                    }
                }
                for _ in 0..300 {
                    let mut c = b.clone();
                    for _ in 0..1 + next() % 4 {
                        let i = (next() as usize) % c.len();
                        c[i] = next() as u8;
                    }
                    let _ = decode(&c, v);
                }
            }
        }
    }
}
