//! Open vSwitch's `NXT_PACKET_IN2` (packet-ins as properties, with the
//! continuation of a paused translation) and `NXT_RESUME` (the controller
//! sends the packet back to resume it).
//!
//! The metadata property carries the packet's connection-tracking state
//! ([`CtMeta`]) as Open vSwitch's does.
//!
//! The continuation is the frozen rest of the translation in Open
//! vSwitch's private property format (`NXCPT_*`: the bridge's UUID, the
//! stack, groups of actions each with its table and cookie, the action
//! set), so `ovs-ofctl` prints it as it prints Open vSwitch's; the
//! controller treats it as opaque and sends it back unchanged.

use crate::actions::{self, Ctx};
use crate::buf::{Reader, Writer};
use crate::error::*;
use crate::header::OFP12;
use crate::nxm;
use flowpath_flow::{FieldId, Match};
use flowpath_ofproto::action::Action;
use flowpath_ofproto::recirc::{FrozenState, Segment};

/// `NXT_PACKET_IN2`.
pub(super) const NXT_PACKET_IN2: u32 = 30;
/// `NXT_RESUME`.
pub(super) const NXT_RESUME: u32 = 28;

const NXPINT_PACKET: u16 = 0;
const NXPINT_FULL_LEN: u16 = 1;
const NXPINT_TABLE_ID: u16 = 3;
const NXPINT_COOKIE: u16 = 4;
const NXPINT_REASON: u16 = 5;
const NXPINT_METADATA: u16 = 6;
const NXPINT_USERDATA: u16 = 7;
const NXPINT_CONTINUATION: u16 = 8;

const NXCPT_BRIDGE: u16 = 0x8000;
const NXCPT_STACK: u16 = 0x8001;
const NXCPT_TABLE_ID: u16 = 0x8004;
const NXCPT_COOKIE: u16 = 0x8005;
const NXCPT_ACTIONS: u16 = 0x8006;
const NXCPT_ACTION_SET: u16 = 0x8007;
const NXCPT_ODP_PORT: u16 = 0x8008;

/// The registers a packet-in's metadata carries (when not zero).
const META_FIELDS: [FieldId; 17] = [
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
];

/// A packet-in in `NXT_PACKET_IN2` form.
#[derive(Clone, Debug)]
pub struct PacketIn2<'a> {
    /// The frame (cut to what is sent).
    pub frame: &'a [u8],
    /// Its length before cutting.
    pub total_len: usize,
    /// The table of the flow that sent it.
    pub table: u8,
    /// That flow's cookie.
    pub cookie: u64,
    /// `OFPR_*` as this version numbers it.
    pub reason: u8,
    /// The ingress port.
    pub in_port: u32,
    /// Registers and metadata (those of a paused translation; zero
    /// otherwise).
    pub regs: flowpath_flow::key::Regs,
    /// The packet's connection-tracking state (all zero: untracked).
    pub ct: CtMeta,
    /// `controller(userdata=...)`.
    pub userdata: &'a [u8],
    /// A paused translation's rest, and the bridge it belongs to.
    pub continuation: Option<(&'a FrozenState, [u8; 16])>,
    /// The datapath port the packet came in on.
    pub odp_port: u32,
}

/// A packet's connection-tracking fields, as a packet-in's metadata
/// carries them (Open vSwitch's `flow_get_metadata`): `ct_state` when
/// tracked, the original-direction tuple when the state shows a valid
/// connection and the protocol is known, zone, mark and label when not
/// zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtMeta {
    /// `ct_state` bits (0: not tracked).
    pub state: u8,
    /// `ct_zone`.
    pub zone: u16,
    /// `ct_mark`.
    pub mark: u32,
    /// `ct_label`.
    pub label: u128,
    /// `ct_nw_proto` (0: no tuple).
    pub nw_proto: u8,
    /// The tuple's addresses are IPv6 (`ct_ipv6_*`, else `ct_nw_*`).
    pub v6: bool,
    /// `ct_nw_src` / `ct_ipv6_src`.
    pub src: u128,
    /// `ct_nw_dst` / `ct_ipv6_dst`.
    pub dst: u128,
    /// `ct_tp_src`.
    pub tp_src: u16,
    /// `ct_tp_dst`.
    pub tp_dst: u16,
}

impl CtMeta {
    /// Sets the fields a packet-in carries in `m`.
    fn set(&self, m: &mut Match) {
        use flowpath_flow::key::ct_state as cs;
        let mut put = |f: FieldId, v: u128| {
            let info = f.info();
            m.set_field_masked(info, v, info.full_mask());
        };
        if self.state != 0 {
            put(FieldId::CtState, u128::from(self.state));
            // A packet's valid connection: new, established or reply.
            let valid = self.state & (cs::NEW | cs::EST | cs::RPL) != 0;
            if valid && self.nw_proto != 0 {
                let (s, d) = if self.v6 {
                    (FieldId::CtIpv6Src, FieldId::CtIpv6Dst)
                } else {
                    (FieldId::CtNwSrc, FieldId::CtNwDst)
                };
                put(s, self.src);
                put(d, self.dst);
                put(FieldId::CtNwProto, u128::from(self.nw_proto));
                put(FieldId::CtTpSrc, u128::from(self.tp_src));
                put(FieldId::CtTpDst, u128::from(self.tp_dst));
            }
        }
        for (f, v) in [
            (FieldId::CtZone, u128::from(self.zone)),
            (FieldId::CtMark, u128::from(self.mark)),
            (FieldId::CtLabel, self.label),
        ] {
            if v != 0 {
                put(f, v);
            }
        }
    }
}

/// A decoded `NXT_RESUME`.
#[derive(Clone, Debug)]
pub struct Resume {
    /// The frame to go on with.
    pub packet: Vec<u8>,
    /// Its ingress port (from the metadata).
    pub in_port: u32,
    /// Registers and metadata to resume with.
    pub regs: flowpath_flow::key::Regs,
    /// The bridge the continuation came from.
    pub bridge: [u8; 16],
    /// The frozen rest of the translation.
    pub state: FrozenState,
}

fn prop_start(w: &mut Writer, t: u16) -> usize {
    let s = w.len();
    w.u16(t);
    w.u16(4);
    s
}

fn prop_end(w: &mut Writer, s: usize) {
    let len = (w.len() - s) as u16;
    w.patch_u16(s + 2, len);
    w.pad8_from(s);
}

fn prop(w: &mut Writer, t: u16, value: &[u8]) {
    let s = prop_start(w, t);
    w.bytes(value);
    prop_end(w, s);
}

fn prop_u64(w: &mut Writer, t: u16, v: u64) {
    let s = prop_start(w, t);
    w.zeros(4);
    w.u64(v);
    prop_end(w, s);
}

/// Starts a property whose value is 8-byte aligned (nested properties,
/// actions).
fn prop_start_nested(w: &mut Writer, t: u16) -> usize {
    let s = prop_start(w, t);
    w.zeros(4);
    s
}

fn metadata(in_port: u32, regs: &flowpath_flow::key::Regs) -> Match {
    let mut m = Match::catchall();
    m.set_field_masked(FieldId::InPort.info(), u128::from(in_port), 0xffff_ffff);
    for f in META_FIELDS {
        let info = f.info();
        let v = info.get_regs(regs);
        if v != 0 {
            m.set_field_masked(info, v, info.full_mask());
        }
    }
    m
}

/// A match that lets the actions encoder write any field (the frozen
/// actions were checked when their flows were added).
fn any_packet() -> Match {
    Match::catchall()
}

fn put_continuation(
    w: &mut Writer,
    version: u8,
    st: &FrozenState,
    bridge: &[u8; 16],
    odp_port: u32,
) -> Result<(), String> {
    if st.segments.iter().any(|s| !s.write_set.is_empty()) {
        return Err("a rule's write-actions in a paused translation".into());
    }
    let m = any_packet();
    let cx = Ctx {
        version,
        matching: &m,
    };
    let c = prop_start_nested(w, NXPINT_CONTINUATION);
    prop(w, NXCPT_BRIDGE, bridge);
    // The stack, top first.
    for v in st.stack.iter().rev() {
        prop(w, NXCPT_STACK, &v.to_be_bytes());
    }
    // Groups of actions, each after its rule's table and cookie (each
    // assumed 0 at first, as Open vSwitch writes them).
    let (mut table, mut cookie) = (0u8, 0u64);
    for seg in &st.segments {
        let mut groups: Vec<(u8, u64, Vec<Action>)> = vec![(seg.table, cookie, Vec::new())];
        for a in &seg.actions {
            match *a {
                Action::UnrollXlate {
                    table: t,
                    cookie: k,
                } => {
                    groups.push((t, k, Vec::new()));
                }
                a => {
                    if let Some(g) = groups.last_mut() {
                        g.2.push(a);
                    }
                }
            }
        }
        for (t, k, acts) in groups {
            if acts.is_empty() {
                continue;
            }
            if t != table {
                prop(w, NXCPT_TABLE_ID, &[t]);
                table = t;
            }
            if k != cookie {
                prop_u64(w, NXCPT_COOKIE, k);
                cookie = k;
            }
            let s = prop_start_nested(w, NXCPT_ACTIONS);
            actions::put_actions(w, &acts, cx)?;
            prop_end(w, s);
        }
    }
    if !st.action_set.is_empty() {
        let s = prop_start_nested(w, NXCPT_ACTION_SET);
        actions::put_actions(w, &st.action_set, cx)?;
        prop_end(w, s);
    }
    prop(w, NXCPT_ODP_PORT, &odp_port.to_be_bytes());
    prop_end(w, c);
    Ok(())
}

/// An `NXT_PACKET_IN2` (xid 0).
pub fn encode_packet_in2(version: u8, p: &PacketIn2<'_>) -> Result<Vec<u8>, String> {
    let mut w = Writer::new();
    prop(&mut w, NXPINT_PACKET, p.frame);
    if p.frame.len() != p.total_len {
        prop(&mut w, NXPINT_FULL_LEN, &(p.total_len as u32).to_be_bytes());
    }
    prop(&mut w, NXPINT_TABLE_ID, &[p.table]);
    if p.cookie != u64::MAX {
        prop_u64(&mut w, NXPINT_COOKIE, p.cookie);
    }
    prop(&mut w, NXPINT_REASON, &[p.reason]);
    let s = prop_start(&mut w, NXPINT_METADATA);
    let mut meta = metadata(p.in_port, &p.regs);
    p.ct.set(&mut meta);
    nxm::put_match(&mut w, &meta, version >= OFP12)?;
    prop_end(&mut w, s);
    if !p.userdata.is_empty() {
        prop(&mut w, NXPINT_USERDATA, p.userdata);
    }
    if let Some((st, bridge)) = p.continuation {
        // A continuation that cannot be written leaves the packet-in
        // without one (the controller cannot resume it).
        let mut c = Writer::new();
        if put_continuation(&mut c, version, st, &bridge, p.odp_port).is_ok() {
            w.bytes(&c.buf);
        }
    }
    Ok(super::encode_nx(version, 0, NXT_PACKET_IN2, &w.buf))
}

/// Reads one property: (type, value without padding; the last may end
/// the message without its padding).
pub(super) fn pull_prop<'a>(r: &mut Reader<'a>) -> Result<(u16, &'a [u8]), OfError> {
    let t = r.u16()?;
    let len = usize::from(r.u16()?);
    if len < 4 {
        return Err(BPC_BAD_LEN);
    }
    let body = r.bytes(len - 4).map_err(|_| BPC_BAD_LEN)?;
    let pad = len.next_multiple_of(8) - len;
    r.skip(pad.min(r.remaining()))?;
    Ok((t, body))
}

/// A property's value that starts 8-byte aligned (after 4 pad bytes).
fn aligned(body: &[u8]) -> Result<&[u8], OfError> {
    body.get(4..).ok_or(BPC_BAD_LEN)
}

fn pull_continuation(body: &[u8], version: u8) -> Result<([u8; 16], FrozenState), OfError> {
    let mut r = Reader::new(aligned(body)?);
    let mut bridge = [0u8; 16];
    let mut st = FrozenState {
        segments: Vec::new(),
        action_set: Vec::new(),
        stack: Vec::new(),
        regs: flowpath_flow::key::Regs::zero(),
        in_port: 0,
        table: 0,
        conntracked: false,
    };
    let (mut table, mut cookie) = (0u8, 0u64);
    while r.remaining() > 0 {
        let (t, v) = pull_prop(&mut r)?;
        match t {
            NXCPT_BRIDGE => {
                bridge = v.try_into().map_err(|_| BPC_BAD_LEN)?;
            }
            NXCPT_STACK => {
                if v.len() > 16 {
                    return Err(BPC_BAD_LEN);
                }
                let mut b = [0u8; 16];
                b[16 - v.len()..].copy_from_slice(v);
                // Top first: each goes under the ones before.
                st.stack.insert(0, u128::from_be_bytes(b));
            }
            NXCPT_TABLE_ID => table = *v.first().ok_or(BPC_BAD_LEN)?,
            NXCPT_COOKIE => {
                let b: [u8; 8] = aligned(v)?.try_into().map_err(|_| BPC_BAD_LEN)?;
                cookie = u64::from_be_bytes(b);
            }
            NXCPT_ACTIONS => {
                let mut acts = vec![Action::UnrollXlate { table, cookie }];
                actions::pull_actions(&mut Reader::new(aligned(v)?), version, &mut acts)?;
                st.segments.push(Segment {
                    actions: acts,
                    write_set: Vec::new(),
                    table,
                });
            }
            NXCPT_ACTION_SET => {
                actions::pull_actions(&mut Reader::new(aligned(v)?), version, &mut st.action_set)?;
            }
            // Mirrors, conntrack, the datapath port: nothing flowpath
            // keeps.
            _ => {}
        }
    }
    st.table = table;
    Ok((bridge, st))
}

/// Reads an `NXT_RESUME` body (after the Nicira header).
pub(super) fn decode_resume(r: &mut Reader<'_>, version: u8) -> Result<Resume, OfError> {
    let mut packet = None;
    let mut meta = Match::catchall();
    let mut cont = None;
    while r.remaining() > 0 {
        let (t, v) = pull_prop(r)?;
        match t {
            NXPINT_PACKET => packet = Some(v.to_vec()),
            NXPINT_METADATA => nxm::pull_entries(&mut Reader::new(v), &mut meta)?,
            NXPINT_CONTINUATION => cont = Some(pull_continuation(v, version)?),
            NXPINT_FULL_LEN | NXPINT_TABLE_ID | NXPINT_COOKIE | NXPINT_REASON | NXPINT_USERDATA => {
            }
            _ => return Err(BPC_BAD_TYPE),
        }
    }
    let packet = packet.ok_or(BRC_BAD_LEN_E)?;
    let (bridge, mut state) = cont.ok_or(NXR_STALE)?;
    let (in_port, _) = nxm::field_get(&meta, FieldId::InPort.info());
    let mut regs = flowpath_flow::key::Regs::zero();
    for f in META_FIELDS {
        let info = f.info();
        let (v, _) = nxm::field_get(&meta, info);
        info.set_regs_masked(&mut regs, v, info.full_mask());
    }
    state.regs = regs;
    state.in_port = in_port as u32;
    Ok(Resume {
        packet,
        in_port: in_port as u32,
        regs,
        bridge,
        state,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::{OFP10, OFP13};
    use flowpath_flow::key::ct_state as cs;

    fn pin(ct: CtMeta) -> PacketIn2<'static> {
        PacketIn2 {
            frame: &[0; 14],
            total_len: 14,
            table: 0,
            cookie: 0,
            reason: 1,
            in_port: 1,
            regs: flowpath_flow::key::Regs::zero(),
            ct,
            userdata: &[],
            continuation: None,
            odp_port: 1,
        }
    }

    /// The metadata property's NXM entries (`ovs-ofctl ofp-print` prints
    /// this packet-in's metadata as `ct_state=new|trk,ct_zone=5,
    /// ct_mark=0x7,ct_nw_src=10.0.0.1,ct_nw_dst=10.0.0.2,ct_nw_proto=6,
    /// ct_tp_src=1000,ct_tp_dst=80,in_port=1`).
    #[test]
    fn packet_in2_metadata_carries_the_tracker_state() {
        let ct = CtMeta {
            state: cs::TRK | cs::NEW,
            zone: 5,
            mark: 7,
            nw_proto: 6,
            src: 0x0a00_0001,
            dst: 0x0a00_0002,
            tp_src: 1000,
            tp_dst: 80,
            ..CtMeta::default()
        };
        for v in [OFP10, OFP13] {
            let b = encode_packet_in2(v, &pin(ct)).unwrap();
            let has = |e: &[u8]| b.windows(e.len()).any(|w| w == e);
            assert!(has(&[0, 1, 0xd2, 4, 0, 0, 0, 0x21]), "ct_state");
            assert!(has(&[0, 1, 0xd4, 2, 0, 5]), "ct_zone");
            assert!(has(&[0, 1, 0xd6, 4, 0, 0, 0, 7]), "ct_mark");
            assert!(has(&[0, 1, 0xf0, 4, 10, 0, 0, 1]), "ct_nw_src");
            assert!(has(&[0, 1, 0xfa, 2, 0, 80]), "ct_tp_dst");
        }
        // Untracked: nothing of conntrack; invalid: the state only.
        let b = encode_packet_in2(OFP13, &pin(CtMeta::default())).unwrap();
        assert!(!b.windows(3).any(|w| w == [0, 1, 0xd2]));
        let inv = CtMeta {
            state: cs::TRK | cs::INV,
            nw_proto: 6,
            ..ct
        };
        let b = encode_packet_in2(OFP13, &pin(inv)).unwrap();
        assert!(!b.windows(3).any(|w| w == [0, 1, 0xf0]));
    }
}
