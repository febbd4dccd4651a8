//! NXM and OXM: matches as type-length-value entries, and the field
//! headers that actions name.
//!
//! A header is `class << 16 | field << 9 | has_mask << 8 | length`.
//! Classes: 0x0000 `NXM_OF`, 0x0001 `NXM_NX`, 0x8000 `OXM_OF` (OpenFlow
//! basic), 0x8001 packet registers, 0x1000 Ericsson's. Open vSwitch takes
//! either form in either kind of match, and so does flowpath; it writes
//! OXM names in OpenFlow 1.2+ matches where one exists, NXM names
//! otherwise (as Open vSwitch).
//!
//! The match of a flow is written field by field from [`Match`]'s
//! storage and read back through [`Match::set_field_masked`]; the
//! encoder checks that what it wrote reads back to the same match, so a
//! match it cannot express is an error, never a silently different flow.

use crate::buf::{Reader, Writer};
use crate::error::*;
use flowpath_flow::field::FieldInfo;
use flowpath_flow::{FieldId, Match};

/// `class:field:len` of an NXM/OXM header without the mask bit.
pub const fn header(class: u16, field: u8, len: u8) -> u32 {
    ((class as u32) << 16) | ((field as u32) << 9) | len as u32
}

const fn nx0(field: u8, len: u8) -> u32 {
    header(0, field, len)
}
const fn nx1(field: u8, len: u8) -> u32 {
    header(1, field, len)
}
const fn oxm(field: u8, len: u8) -> u32 {
    header(0x8000, field, len)
}

/// A header's class.
pub fn class_of(h: u32) -> u16 {
    (h >> 16) as u16
}
/// A header's field number.
pub fn field_of(h: u32) -> u8 {
    ((h >> 9) & 0x7f) as u8
}
/// A header's mask bit.
pub fn has_mask(h: u32) -> bool {
    h & 0x100 != 0
}
/// A header's payload length (value and mask).
pub fn len_of(h: u32) -> usize {
    (h & 0xff) as usize
}
/// The header without its mask bit and with the unmasked length.
pub fn unmasked(h: u32) -> u32 {
    if has_mask(h) {
        (h & !0x1ff) | (field_of(h) as u32) << 9 | (len_of(h) / 2) as u32
    } else {
        h
    }
}

/// (field, NXM header, OXM header): 0 where there is none.
const WIRE: &[(FieldId, u32, u32)] = &[
    (FieldId::InPort, nx0(0, 2), oxm(0, 4)),
    (FieldId::EthDst, nx0(1, 6), oxm(3, 6)),
    (FieldId::EthSrc, nx0(2, 6), oxm(4, 6)),
    (FieldId::EthType, nx0(3, 2), oxm(5, 2)),
    (FieldId::VlanTci, nx0(4, 2), 0),
    (FieldId::VlanVid, 0, oxm(6, 2)),
    (FieldId::DlVlanPcp, 0, oxm(7, 1)),
    (FieldId::NwTos, nx0(5, 1), 0),
    (FieldId::IpDscp, 0, oxm(8, 1)),
    (FieldId::NwEcn, nx1(28, 1), oxm(9, 1)),
    (FieldId::NwProto, nx0(6, 1), oxm(10, 1)),
    (FieldId::NwTtl, nx1(29, 1), 0),
    (FieldId::NwFrag, nx1(26, 1), 0),
    (FieldId::NwSrc, nx0(7, 4), oxm(11, 4)),
    (FieldId::NwDst, nx0(8, 4), oxm(12, 4)),
    (FieldId::TcpSrc, nx0(9, 2), oxm(13, 2)),
    (FieldId::TcpDst, nx0(10, 2), oxm(14, 2)),
    (FieldId::UdpSrc, nx0(11, 2), oxm(15, 2)),
    (FieldId::UdpDst, nx0(12, 2), oxm(16, 2)),
    (FieldId::SctpSrc, 0, oxm(17, 2)),
    (FieldId::SctpDst, 0, oxm(18, 2)),
    (FieldId::IcmpType, nx0(13, 1), oxm(19, 1)),
    (FieldId::IcmpCode, nx0(14, 1), oxm(20, 1)),
    (FieldId::ArpOp, nx0(15, 2), oxm(21, 2)),
    (FieldId::ArpSpa, nx0(16, 4), oxm(22, 4)),
    (FieldId::ArpTpa, nx0(17, 4), oxm(23, 4)),
    (FieldId::ArpSha, nx1(17, 6), oxm(24, 6)),
    (FieldId::ArpTha, nx1(18, 6), oxm(25, 6)),
    (FieldId::Ipv6Src, nx1(19, 16), oxm(26, 16)),
    (FieldId::Ipv6Dst, nx1(20, 16), oxm(27, 16)),
    (FieldId::Ipv6Label, nx1(27, 4), oxm(28, 4)),
    (FieldId::Icmpv6Type, nx1(21, 1), oxm(29, 1)),
    (FieldId::Icmpv6Code, nx1(22, 1), oxm(30, 1)),
    (FieldId::NdTarget, nx1(23, 16), oxm(31, 16)),
    (FieldId::NdSll, nx1(24, 6), oxm(32, 6)),
    (FieldId::NdTll, nx1(25, 6), oxm(33, 6)),
    (FieldId::NdReserved, 0, header(0x1000, 1, 4)),
    (FieldId::NdOptionsType, 0, header(0x1000, 2, 1)),
    (FieldId::MplsLabel, 0, oxm(34, 4)),
    (FieldId::MplsTc, 0, oxm(35, 1)),
    (FieldId::MplsBos, 0, oxm(36, 1)),
    (FieldId::MplsTtl, nx1(30, 1), 0),
    (FieldId::TcpFlags, nx1(34, 2), 0),
    (FieldId::TunId, nx1(16, 8), oxm(38, 8)),
    (FieldId::TunSrc, nx1(31, 4), 0),
    (FieldId::TunDst, nx1(32, 4), 0),
    (FieldId::TunIpv6Src, nx1(109, 16), 0),
    (FieldId::TunIpv6Dst, nx1(110, 16), 0),
    (FieldId::TunFlags, nx1(104, 2), 0),
    (FieldId::TunGbpId, nx1(38, 2), 0),
    (FieldId::TunGbpFlags, nx1(39, 1), 0),
    // (OVS gives each its mapped length; flowpath's are 8 bytes.)
    (FieldId::TunMetadata0, nx1(40, 8), 0),
    (FieldId::TunMetadata1, nx1(41, 8), 0),
    (FieldId::TunMetadata2, nx1(42, 8), 0),
    (FieldId::TunMetadata3, nx1(43, 8), 0),
    (FieldId::TunMetadata4, nx1(44, 8), 0),
    (FieldId::TunMetadata5, nx1(45, 8), 0),
    (FieldId::TunMetadata6, nx1(46, 8), 0),
    (FieldId::TunMetadata7, nx1(47, 8), 0),
    (FieldId::PktMark, nx1(33, 4), 0),
    (FieldId::ConjId, nx1(37, 4), 0),
    (FieldId::Metadata, 0, oxm(2, 8)),
    (FieldId::Reg0, nx1(0, 4), 0),
    (FieldId::Reg1, nx1(1, 4), 0),
    (FieldId::Reg2, nx1(2, 4), 0),
    (FieldId::Reg3, nx1(3, 4), 0),
    (FieldId::Reg4, nx1(4, 4), 0),
    (FieldId::Reg5, nx1(5, 4), 0),
    (FieldId::Reg6, nx1(6, 4), 0),
    (FieldId::Reg7, nx1(7, 4), 0),
    (FieldId::Reg8, nx1(8, 4), 0),
    (FieldId::Reg9, nx1(9, 4), 0),
    (FieldId::Reg10, nx1(10, 4), 0),
    (FieldId::Reg11, nx1(11, 4), 0),
    (FieldId::Reg12, nx1(12, 4), 0),
    (FieldId::Reg13, nx1(13, 4), 0),
    (FieldId::Reg14, nx1(14, 4), 0),
    (FieldId::Reg15, nx1(15, 4), 0),
    (FieldId::Xreg0, 0, header(0x8001, 0, 8)),
    (FieldId::Xreg1, 0, header(0x8001, 1, 8)),
    (FieldId::Xreg2, 0, header(0x8001, 2, 8)),
    (FieldId::Xreg3, 0, header(0x8001, 3, 8)),
    (FieldId::Xreg4, 0, header(0x8001, 4, 8)),
    (FieldId::Xreg5, 0, header(0x8001, 5, 8)),
    (FieldId::Xreg6, 0, header(0x8001, 6, 8)),
    (FieldId::Xreg7, 0, header(0x8001, 7, 8)),
    (FieldId::Xxreg0, nx1(111, 16), 0),
    (FieldId::Xxreg1, nx1(112, 16), 0),
    (FieldId::Xxreg2, nx1(113, 16), 0),
    (FieldId::Xxreg3, nx1(114, 16), 0),
    // Connection tracking: NXM names only, in OXM matches too (as Open
    // vSwitch, which has no OXM for them).
    (FieldId::CtState, nx1(105, 4), 0),
    (FieldId::CtZone, nx1(106, 2), 0),
    (FieldId::CtMark, nx1(107, 4), 0),
    (FieldId::CtLabel, nx1(108, 16), 0),
    (FieldId::CtNwProto, nx1(119, 1), 0),
    (FieldId::CtNwSrc, nx1(120, 4), 0),
    (FieldId::CtNwDst, nx1(121, 4), 0),
    (FieldId::CtIpv6Src, nx1(122, 16), 0),
    (FieldId::CtIpv6Dst, nx1(123, 16), 0),
    (FieldId::CtTpSrc, nx1(124, 2), 0),
    (FieldId::CtTpDst, nx1(125, 2), 0),
];

/// The OpenFlow basic (class 0x8000) headers of the fields flowpath
/// matches, for TABLE_FEATURES.
pub fn oxm_basic_headers() -> Vec<u32> {
    WIRE.iter()
        .map(|(_, _, o)| *o)
        .filter(|o| class_of(*o) == 0x8000)
        .collect()
}

/// ONF's experimenter OXM for `tcp_flags` in OpenFlow 1.3 (and OF1.5's
/// standard one): both read as `tcp_flags`.
const ONF_TCP_FLAGS: u32 = header(0xffff, 42, 6);
const OF15_TCP_FLAGS: u32 = oxm(42, 2);

/// The field a header names (its length is not checked) and the
/// header's proper unmasked form.
pub fn lookup_header(h: u32) -> Option<(FieldId, u32)> {
    let key = h & !0x1ff;
    if key == OF15_TCP_FLAGS & !0x1ff {
        return Some((FieldId::TcpFlags, OF15_TCP_FLAGS));
    }
    WIRE.iter().find_map(|(f, n, o)| {
        [*n, *o]
            .into_iter()
            .find(|x| *x != 0 && x & !0x1ff == key)
            .map(|x| (*f, x))
    })
}

/// The field a header names, if its length is right for it (any length
/// of 0 to 124 bytes for a `tun_metadataN`, see [`tun_md_len`]).
pub fn field_of_header(h: u32) -> Option<FieldId> {
    let (f, proper) = lookup_header(h)?;
    (unmasked(h) == proper || tun_md_len(h).is_some()).then_some(f)
}

/// Open vSwitch's `tun_metadataN` fields are variable-length (up to 124
/// bytes, the longest Geneve option): a match entry or a Set-Field carries
/// as many bytes as the value needs (`ovs-ofctl` sends `tun_metadata0=1`
/// in one byte, `tun_metadata0=0` in none), a switch's own encoding as
/// many as the option is long, and a field reference in `move` or `load`
/// names the field with 124. For a `tun_metadataN` header, the value's
/// length in bytes (0 to 124; half the payload when masked); None for any
/// other header or a length out of range.
pub fn tun_md_len(h: u32) -> Option<usize> {
    let f = field_of(h);
    if class_of(h) != 1 || !(40..40 + flowpath_flow::key::TUN_METADATA as u8).contains(&f) {
        return None;
    }
    let n = len_of(unmasked(h));
    (0..=TUN_MD_MAX_LEN)
        .contains(&n)
        .then_some(n)
        .filter(|_| !has_mask(h) || len_of(h).is_multiple_of(2))
}

/// The longest `tun_metadataN` value (a Geneve option's data).
pub const TUN_MD_MAX_LEN: usize = 124;

/// Reads an `n`-byte `tun_metadataN` value (big-endian, right-aligned):
/// flowpath keeps 8 bytes, so longer ones must start with zeros.
pub fn pull_tun_md(r: &mut Reader<'_>, n: usize) -> Result<u128, OfError> {
    let b = r.bytes(n).map_err(|_| BMC_BAD_LEN)?;
    let (high, low) = b.split_at(n.saturating_sub(8));
    if high.iter().any(|&x| x != 0) {
        return Err(BMC_BAD_VALUE);
    }
    Ok(low.iter().fold(0u128, |a, &x| a << 8 | u128::from(x)))
}

/// The header naming `f` (OXM preferred when `oxm_first`).
pub fn header_of(f: FieldId, oxm_first: bool) -> Option<u32> {
    let (_, n, o) = WIRE.iter().find(|(x, _, _)| *x == f)?;
    let pick = if oxm_first { [*o, *n] } else { [*n, *o] };
    pick.into_iter().find(|h| *h != 0)
}

/// The header of a field used as a bit range in an action (`load`,
/// `move`, ...): NXM names first, as Open vSwitch writes them.
pub fn subfield_header(f: FieldId) -> Option<u32> {
    header_of(f, false)
}

/// Wire value of `f` from flowpath's field units: `in_port` in OXM is a
/// 32-bit OpenFlow 1.1 port.
fn to_wire(f: FieldId, h: u32, v: u128, is_mask: bool) -> u128 {
    if f == FieldId::InPort && len_of(h) == 4 && !is_mask {
        return u128::from(crate::port::to_of11(v as u32));
    }
    if f == FieldId::InPort && len_of(h) == 4 {
        return if v == 0 { 0 } else { 0xffff_ffff };
    }
    v
}

fn from_wire(f: FieldId, h: u32, v: u128) -> Result<u128, OfError> {
    if f == FieldId::InPort && len_of(h) == 4 {
        return crate::port::from_of11(v as u32)
            .map(u128::from)
            .ok_or(BMC_BAD_VALUE);
    }
    Ok(v)
}

/// The value and mask of `f` in `m` (field units).
pub fn field_get(m: &Match, f: &FieldInfo) -> (u128, u128) {
    if f.is_reg() {
        (f.get_regs(&m.regs), f.get_regs(&m.regs_mask))
    } else {
        (f.get(&m.key), f.get_mask(&m.mask))
    }
}

/// Fields in the order the encoder writes them (one name per storage;
/// prerequisites first).
const ORDER: &[FieldId] = &[
    FieldId::InPort,
    FieldId::Metadata,
    FieldId::Reg0,
    FieldId::Reg1,
    FieldId::Reg2,
    FieldId::Reg3,
    FieldId::Reg4,
    FieldId::Reg5,
    FieldId::Reg6,
    FieldId::Reg7,
    FieldId::Reg8,
    FieldId::Reg9,
    FieldId::Reg10,
    FieldId::Reg11,
    FieldId::Reg12,
    FieldId::Reg13,
    FieldId::Reg14,
    FieldId::Reg15,
    FieldId::PktMark,
    FieldId::CtState,
    FieldId::CtZone,
    FieldId::CtMark,
    FieldId::CtLabel,
    FieldId::CtNwSrc,
    FieldId::CtIpv6Src,
    FieldId::CtNwDst,
    FieldId::CtIpv6Dst,
    FieldId::CtNwProto,
    FieldId::CtTpSrc,
    FieldId::CtTpDst,
    FieldId::ConjId,
    FieldId::TunId,
    FieldId::TunSrc,
    FieldId::TunDst,
    FieldId::TunIpv6Src,
    FieldId::TunIpv6Dst,
    FieldId::TunGbpId,
    FieldId::TunGbpFlags,
    FieldId::TunFlags,
    FieldId::TunMetadata0,
    FieldId::TunMetadata1,
    FieldId::TunMetadata2,
    FieldId::TunMetadata3,
    FieldId::TunMetadata4,
    FieldId::TunMetadata5,
    FieldId::TunMetadata6,
    FieldId::TunMetadata7,
    FieldId::EthSrc,
    FieldId::EthDst,
    FieldId::EthType,
    FieldId::VlanTci,
    FieldId::MplsLabel,
    FieldId::MplsTc,
    FieldId::MplsBos,
    FieldId::MplsTtl,
    FieldId::NwProto,
    FieldId::NwSrc,
    FieldId::NwDst,
    FieldId::Ipv6Src,
    FieldId::Ipv6Dst,
    FieldId::Ipv6Label,
    FieldId::NwTos,
    FieldId::NwEcn,
    FieldId::NwTtl,
    FieldId::NwFrag,
    FieldId::ArpOp,
    FieldId::ArpSpa,
    FieldId::ArpTpa,
    FieldId::ArpSha,
    FieldId::ArpTha,
    FieldId::TcpSrc,
    FieldId::TcpDst,
    FieldId::TcpFlags,
    FieldId::UdpSrc,
    FieldId::UdpDst,
    FieldId::SctpSrc,
    FieldId::SctpDst,
    FieldId::IcmpType,
    FieldId::IcmpCode,
    FieldId::Icmpv6Type,
    FieldId::Icmpv6Code,
    FieldId::NdTarget,
    FieldId::NdSll,
    FieldId::NdTll,
    FieldId::NdReserved,
    FieldId::NdOptionsType,
];

/// Whether the match has a field that is not a pipeline field (Open
/// vSwitch's `mf_is_pipeline_field`: in_port, metadata, registers,
/// tunnel metadata): an OpenFlow 1.5 packet-out's match may have only
/// those.
pub fn has_non_pipeline_field(m: &Match) -> bool {
    ORDER.iter().any(|&f| {
        let pipeline =
            matches!(f, FieldId::InPort | FieldId::Metadata) || f.is_tunnel() || f.info().is_reg();
        !pipeline && field_get(m, f.info()).1 != 0
    })
}

fn put_entry(w: &mut Writer, h: u32, f: FieldId, v: u128, m: u128) {
    let n = len_of(h);
    let full = wire_full(f, h);
    if m & full == full {
        w.u32(h);
        w.uint(to_wire(f, h, v, false), n);
    } else {
        w.u32((h & !0xff) | 0x100 | (2 * n) as u32);
        w.uint(to_wire(f, h, v & m, false), n);
        w.uint(to_wire(f, h, m, true), n);
    }
}

fn wire_full(f: FieldId, h: u32) -> u128 {
    if f == FieldId::InPort {
        return 0xffff;
    }
    let _ = h;
    f.info().full_mask()
}

/// Writes `m` as NXM/OXM entries (no padding); `oxm` picks OpenFlow
/// 1.2+'s names. Fails with the field it cannot express.
pub fn put_match(w: &mut Writer, m: &Match, oxm: bool) -> Result<(), String> {
    let start = w.len();
    let mut covered = flowpath_flow::FlowMask::catchall();
    // Fields stored where the match has no significant bit are skipped
    // with one test (a flow dump encodes 100,000 matches).
    let present = m.word_bits();
    for &id in ORDER {
        if id.info().word_bits() & present == 0 {
            continue;
        }
        let f = id.info();
        let (v, mask) = field_get(m, f);
        if mask == 0 || !m.prereqs_met(f) {
            continue;
        }
        if !f.is_reg() {
            if f.storage_meets(&covered) {
                continue;
            }
            f.add_storage_to(&mut covered);
        }
        if id == FieldId::VlanTci && oxm {
            put_vlan_oxm(w, v as u16, mask as u16);
            continue;
        }
        if id == FieldId::NwTos && oxm {
            // OXM's IP_DSCP is the 6-bit code point.
            let d = FieldId::IpDscp;
            let (dv, dm) = field_get(m, d.info());
            let h = header_of(d, true).unwrap_or(0);
            put_entry(w, h, d, dv, dm);
            continue;
        }
        let Some(h) = header_of(id, oxm) else {
            return Err(format!("{} has no NXM/OXM encoding", f.name));
        };
        put_entry(w, h, id, v, mask);
    }
    let mut back = Match::catchall();
    let mut r = Reader::new(&w.buf[start..]);
    pull_entries(&mut r, &mut back).map_err(|e| format!("match does not read back: {e}"))?;
    if back != *m {
        return Err(format!(
            "the match {} cannot be expressed in NXM/OXM",
            m.format(flowpath_flow::Style::Rule)
        ));
    }
    Ok(())
}

/// OXM's VLAN fields: VLAN_VID (VID and present bit) and VLAN_PCP
/// (only with an exact present bit), else NXM's VLAN_TCI.
fn put_vlan_oxm(w: &mut Writer, tci: u16, mask: u16) {
    let pcp_mask = mask >> 13;
    let vid_mask = mask & 0x1fff;
    let pcp_ok = pcp_mask == 0 || (pcp_mask == 7 && vid_mask & 0x1000 != 0 && tci & 0x1000 != 0);
    if !pcp_ok {
        put_entry(
            w,
            nx0(4, 2),
            FieldId::VlanTci,
            u128::from(tci),
            u128::from(mask),
        );
        return;
    }
    if vid_mask != 0 {
        put_entry(
            w,
            oxm(6, 2),
            FieldId::VlanVid,
            u128::from(tci & 0x1fff),
            u128::from(vid_mask),
        );
    }
    if pcp_mask == 7 {
        put_entry(w, oxm(7, 1), FieldId::DlVlanPcp, u128::from(tci >> 13), 7);
    }
}

/// `NXM_NX_COOKIE`: an NXM flow_mod or flow statistics request may
/// select flows by cookie inside its match (same field number as
/// `NXM_NX_MPLS_TTL`, told apart by its length).
pub const NXM_NX_COOKIE: u32 = nx1(30, 8);

/// Reads NXM/OXM entries until `r` is empty, setting them in `m`;
/// checks values, masks, duplicates and prerequisites as Open vSwitch.
pub fn pull_entries(r: &mut Reader<'_>, m: &mut Match) -> Result<(), OfError> {
    pull(r, m, None)
}

/// As [`pull_entries`], also taking an `NXM_NX_COOKIE` entry: returns
/// (cookie, cookie mask), (0, 0) without one.
pub fn pull_nxm_entries(r: &mut Reader<'_>, m: &mut Match) -> Result<(u64, u64), OfError> {
    let mut c = (0, 0);
    pull(r, m, Some(&mut c))?;
    Ok(c)
}

fn pull(
    r: &mut Reader<'_>,
    m: &mut Match,
    mut cookie: Option<&mut (u64, u64)>,
) -> Result<(), OfError> {
    let mut seen: Vec<u32> = Vec::new();
    let mut set: Vec<FieldId> = Vec::new();
    while r.remaining() > 0 {
        let h = r.u32().map_err(|_| BMC_BAD_LEN)?;
        if h == 0 {
            return Err(BMC_BAD_LEN);
        }
        if unmasked(h) == NXM_NX_COOKIE && len_of(h) == if has_mask(h) { 16 } else { 8 } {
            let Some(c) = cookie.as_deref_mut() else {
                return Err(BMC_BAD_FIELD);
            };
            if seen.contains(&NXM_NX_COOKIE) {
                return Err(BMC_DUP_FIELD);
            }
            seen.push(NXM_NX_COOKIE);
            let v = r.u64().map_err(|_| BMC_BAD_LEN)?;
            let mk = if has_mask(h) {
                r.u64().map_err(|_| BMC_BAD_LEN)?
            } else {
                u64::MAX
            };
            *c = (v & mk, mk);
            continue;
        }
        let mut h2 = h;
        if class_of(h) == 0xffff {
            let vendor = r.u32().map_err(|_| BMC_BAD_LEN)?;
            if vendor != crate::header::ONF_VENDOR_ID
                || unmasked(h) & !0xff != ONF_TCP_FLAGS & !0xff
            {
                return Err(BMC_BAD_FIELD);
            }
            h2 = if has_mask(h) {
                (nx1(34, 2) & !0xff) | 0x100 | 4
            } else {
                nx1(34, 2)
            };
        }
        let Some((id, base)) = lookup_header(h2) else {
            return Err(BMC_BAD_FIELD);
        };
        if let Some(n) = tun_md_len(h2) {
            if seen.contains(&base) {
                return Err(BMC_DUP_FIELD);
            }
            seen.push(base);
            let v = pull_tun_md(r, n)?;
            let full = (1u128 << (8 * n.min(8))) - 1;
            let mask = if has_mask(h2) {
                // As Open vSwitch: a mask of all ones over the value's
                // bytes is an exact match (`0x5/0xff` in one byte is
                // `tun_metadataN=0x5`).
                match pull_tun_md(r, n)? {
                    m if n > 0 && m == full => u128::from(u64::MAX),
                    m => m,
                }
            } else {
                u128::from(u64::MAX)
            };
            if v & !mask != 0 {
                return Err(BMC_BAD_WILDCARDS);
            }
            if mask != 0 {
                set.push(id);
                m.set_field_masked(id.info(), v, mask);
            }
            continue;
        }
        let n = len_of(base);
        let want = if has_mask(h2) { 2 * n } else { n };
        if len_of(h2) != want || (class_of(h) == 0xffff && len_of(h) != want + 4) {
            return Err(BMC_BAD_LEN);
        }
        if seen.contains(&base) {
            return Err(BMC_DUP_FIELD);
        }
        seen.push(base);
        let info = id.info();
        let v = from_wire(id, base, r.uint(n).map_err(|_| BMC_BAD_LEN)?)?;
        let full = wire_full(id, base);
        if id == FieldId::CtState && !has_mask(h2) && v & !full != 0 {
            return Err(BMC_BAD_VALUE);
        }
        let mask = if has_mask(h2) {
            // (ct_zone takes no partial mask but, as in Open vSwitch, an
            // all-0s or all-1s one: below.)
            if !info.maskable && id != FieldId::CtZone {
                return Err(BMC_BAD_MASK);
            }
            let raw = r.uint(n).map_err(|_| BMC_BAD_LEN)?;
            match id {
                FieldId::InPort if raw == 0 => continue,
                FieldId::InPort => full,
                // Not maskable for Open vSwitch: only an all-0s or all-1s
                // mask.
                FieldId::CtZone if raw != 0 && raw != full => return Err(BMC_BAD_MASK),
                // 32 bits on the wire, 8 defined: the mask's other bits
                // select nothing.
                FieldId::CtState if v & !raw == 0 && v & !full != 0 => return Err(BMC_BAD_VALUE),
                FieldId::CtState => raw & full,
                _ => raw,
            }
        } else {
            full
        };
        if v & !mask != 0 {
            return Err(BMC_BAD_WILDCARDS);
        }
        if mask & !full != 0 || v & !full != 0 {
            return Err(BMC_BAD_VALUE);
        }
        if mask == 0 {
            continue;
        }
        set.push(id);
        m.set_field_masked(info, v, mask);
    }
    for id in set {
        if let Err(e) = m.check_prereqs(id.info()) {
            let _ = e;
            return Err(BMC_BAD_PREREQ);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowpath_ofproto::parse::parse_match;

    fn round(text: &str, oxm: bool) -> Vec<u8> {
        let m = parse_match(text).unwrap();
        let mut w = Writer::new();
        put_match(&mut w, &m, oxm).unwrap_or_else(|e| panic!("{text}: {e}"));
        w.buf
    }

    #[test]
    fn encodes_as_open_vswitch() {
        // NXM_OF_ETH_TYPE(0800), NXM_OF_IP_PROTO(06), NXM_OF_TCP_DST(0050)
        assert_eq!(
            round("tcp,tp_dst=80", false),
            [0, 0, 6, 2, 8, 0, 0, 0, 0x0c, 1, 6, 0, 0, 0x14, 2, 0, 0x50]
        );
        // OXM_OF_IN_PORT is 32 bits; LOCAL is 0xfffffffe.
        assert_eq!(
            round("in_port=LOCAL", true),
            [0x80, 0, 0, 4, 0xff, 0xff, 0xff, 0xfe]
        );
        let b = round("ip,nw_src=10.0.0.0/8", false);
        assert_eq!(
            &b[b.len() - 12..],
            [0, 0, 0x0f, 8, 10, 0, 0, 0, 255, 0, 0, 0]
        );
    }

    #[test]
    fn every_field_reads_back() {
        for text in [
            "in_port=3,dl_src=00:11:22:33:44:55,dl_dst=01:00:00:00:00:00/01:00:00:00:00:00",
            "dl_vlan=10,dl_vlan_pcp=3",
            "vlan_tci=0x1000/0x1000",
            "vlan_tci=0",
            "vlan_tci=0x3000/0x3000",
            "tcp,nw_src=1.2.3.4,nw_dst=5.6.7.0/24,tp_src=1,tp_dst=0x100/0xff00,tcp_flags=+syn-ack",
            "udp6,ipv6_src=2001:db8::1,ipv6_label=5,udp_src=53",
            "sctp,sctp_dst=9",
            "icmp,icmp_type=8,icmp_code=0,nw_tos=16,nw_ecn=1,nw_ttl=3,nw_frag=later",
            "icmp6,icmp_type=135,nd_target=fe80::1,nd_sll=00:00:00:00:00:01,nd_reserved=0",
            "arp,arp_op=1,arp_spa=1.1.1.1,arp_tpa=2.2.2.2,arp_sha=00:00:00:00:00:02",
            "mpls,mpls_label=5,mpls_tc=1,mpls_bos=1,mpls_ttl=9",
            "reg0=1,reg7=0x10/0xf0,xreg4=5,xxreg3=7,metadata=0x1/0x1,pkt_mark=3,conj_id=4,tun_id=9",
            "ip,ip_dscp=46",
            "ct_state=+trk+est-inv,ct_zone=5,ct_mark=0x10/0xf0,ct_label=0x1/0xff",
            "ip,ct_state=+trk+new,ct_nw_src=10.0.0.1,ct_nw_dst=10.0.0.0/8,ct_nw_proto=6,ct_tp_src=1,ct_tp_dst=0x50/0xfff0",
            "ipv6,ct_state=+trk+est,ct_ipv6_src=fe80::1,ct_ipv6_dst=2001:db8::/32",
        ] {
            for oxm in [false, true] {
                let m = parse_match(text).unwrap();
                let mut w = Writer::new();
                put_match(&mut w, &m, oxm).unwrap_or_else(|e| panic!("{text} oxm={oxm}: {e}"));
            }
        }
    }

    #[test]
    fn conntrack_fields_are_nxm_in_every_version() {
        // NXM_NX_CT_STATE_W(00000022/00000022), NXM_NX_CT_ZONE(0005),
        // NXM_NX_CT_MARK_W(00000010/000000f0): the same bytes in an OXM
        // match (Open vSwitch has no OXM for them).
        let want = [
            0, 1, 0xd3, 8, 0, 0, 0, 0x22, 0, 0, 0, 0x22, 0, 1, 0xd4, 2, 0, 5, 0, 1, 0xd7, 8, 0, 0,
            0, 0x10, 0, 0, 0, 0xf0,
        ];
        for oxm in [false, true] {
            assert_eq!(
                round("ct_state=+trk+est,ct_zone=5,ct_mark=0x10/0xf0", oxm),
                want
            );
        }
        // NXM_NX_CT_NW_DST(0a000001).
        let b = round("ip,ct_state=+trk+est,ct_nw_dst=10.0.0.1", true);
        assert!(b.windows(8).any(|w| w == [0, 1, 0xf2, 4, 10, 0, 0, 1]));
    }

    #[test]
    fn conntrack_fields_refused_as_open_vswitch_refuses_them() {
        let pull = |b: &[u8]| {
            let mut m = Match::catchall();
            pull_entries(&mut Reader::new(b), &mut m)
        };
        // ct_state: bits beyond the 8 defined.
        assert_eq!(pull(&[0, 1, 0xd2, 4, 0, 0, 1, 0]), Err(BMC_BAD_VALUE));
        // A mask with the undefined bits set selects the defined ones.
        let mut m = Match::catchall();
        pull_entries(
            &mut Reader::new(&[0, 1, 0xd3, 8, 0, 0, 0, 0x20, 0xff, 0xff, 0xff, 0xff]),
            &mut m,
        )
        .unwrap();
        assert_eq!((m.key.ct_state(), m.mask.to_key().ct_state()), (0x20, 0xff));
        // ct_zone takes no partial mask.
        assert_eq!(pull(&[0, 1, 0xd5, 4, 0, 5, 0, 0xff]), Err(BMC_BAD_MASK));
        assert!(pull(&[0, 1, 0xd5, 4, 0, 5, 0xff, 0xff]).is_ok());
        // ct_nw_src without a tracked connection.
        assert_eq!(
            pull(&[0, 0, 6, 2, 8, 0, 0, 1, 0xf0, 4, 10, 0, 0, 1]),
            Err(BMC_BAD_PREREQ)
        );
    }

    #[test]
    fn refuses_what_open_vswitch_refuses() {
        let pull = |b: &[u8]| {
            let mut m = Match::catchall();
            pull_entries(&mut Reader::new(b), &mut m)
        };
        // TCP_DST without ip,tcp.
        assert_eq!(pull(&[0, 0, 0x14, 2, 0, 0x50]), Err(BMC_BAD_PREREQ));
        // Unknown field.
        assert_eq!(pull(&[0, 1, 0xfe, 4, 0, 0, 0, 0]), Err(BMC_BAD_FIELD));
        // Value bits outside the mask.
        assert_eq!(
            pull(&[0, 0, 0x0f, 8, 10, 0, 0, 1, 255, 0, 0, 0]).unwrap_err(),
            BMC_BAD_WILDCARDS
        );
        // Duplicate eth_type.
        assert_eq!(
            pull(&[0, 0, 6, 2, 8, 0, 0, 0, 6, 2, 8, 0]),
            Err(BMC_DUP_FIELD)
        );
        // Truncated.
        assert_eq!(pull(&[0, 0, 6, 2, 8]), Err(BMC_BAD_LEN));
        // Wrong length for the field.
        assert_eq!(pull(&[0, 0, 6, 3, 8, 0, 0]), Err(BMC_BAD_LEN));
    }

    /// `tun_metadataN` entries as `ovs-ofctl` sends them (bytes captured
    /// from `ovs-ofctl add-flow` against Open vSwitch 3.1): as long as the
    /// value needs, none for 0, and up to 124 bytes.
    #[test]
    fn tun_metadata_entries_are_as_long_as_their_values() {
        let read = |b: &[u8]| {
            let mut m = Match::catchall();
            pull_entries(&mut Reader::new(b), &mut m).map(|()| m)
        };
        let text = |t: &str| Ok(parse_match(t).unwrap());
        // tun_metadata0=1: one byte.
        assert_eq!(read(&[0, 1, 0x50, 1, 1]), text("tun_metadata0=0x1"));
        // tun_metadata1=0: no bytes (the option present, value 0).
        assert_eq!(read(&[0, 1, 0x52, 0]), text("tun_metadata1=0"));
        // tun_metadata0=0x12340000/0xffff0000 (OXM-style masked, 4 + 4).
        assert_eq!(
            read(&[0, 1, 0x51, 8, 0x12, 0x34, 0, 0, 0xff, 0xff, 0, 0]),
            text("tun_metadata0=0x12340000/0xffff0000")
        );
        // 0x5/0xff in one byte: a mask of all ones over the value's
        // bytes is exact, as Open vSwitch reads it; over two it is not.
        assert_eq!(read(&[0, 1, 0x53, 2, 5, 0xff]), text("tun_metadata1=0x5"));
        assert_eq!(
            read(&[0, 1, 0x53, 4, 0, 5, 0, 0xff]),
            text("tun_metadata1=0x5/0xff")
        );
        // Nine bytes: the first must be 0 (flowpath keeps eight).
        let mut nine = vec![0, 1, 0x52, 9, 0];
        nine.extend_from_slice(&0x1122_3344_5566_7788u64.to_be_bytes());
        assert_eq!(read(&nine), text("tun_metadata1=0x1122334455667788"));
        nine[4] = 1;
        assert_eq!(read(&nine), Err(BMC_BAD_VALUE));
        // Over 124 bytes: no such field.
        assert_eq!(read(&[0, 1, 0x50, 125]), Err(BMC_BAD_LEN));
        // Action field references name it with 124 bytes.
        assert_eq!(
            field_of_header(header(1, 40, 124)),
            Some(FieldId::TunMetadata0)
        );
        assert_eq!(field_of_header(header(1, 48, 8)), None);
    }
}
