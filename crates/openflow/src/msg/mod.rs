//! OpenFlow messages a switch receives ([`Request`], decoded by
//! [`decode`]) and the replies and asynchronous messages it sends
//! (`encode_*`).
//!
//! Three dialects of the same requests are decoded into one form:
//! OpenFlow 1.0 (fixed match), Open vSwitch's Nicira extensions
//! (`NXT_FLOW_MOD`, `NXST_FLOW`/`NXST_AGGREGATE` with NXM matches), and
//! OpenFlow 1.3-1.5 (OXM matches, instructions, multipart).

use crate::actions::{self, Ctx};
use crate::buf::{Reader, Writer};
use crate::error::*;
use crate::header::{self, Header, MsgType, NX_VENDOR_ID, OFP10, OFP13, OFP14, OFP15};
use crate::{nxm, ofp10, port};
use flowpath_flow::Match;
use flowpath_ofproto::action::Action;
use flowpath_ofproto::rule::Rule;

// Nicira message subtypes (NXT_*) and stats subtypes (NXST_*).
const NXT_ROLE_REQUEST: u32 = 10;
const NXT_ROLE_REPLY: u32 = 11;
const NXT_SET_FLOW_FORMAT: u32 = 12;
pub(crate) const NXT_FLOW_MOD: u32 = 13;
const NXT_FLOW_MOD_TABLE_ID: u32 = 15;
const NXT_SET_PACKET_IN_FORMAT: u32 = 16;
const NXT_SET_ASYNC_CONFIG: u32 = 19;
const NXT_SET_CONTROLLER_ID: u32 = 20;
const NXT_TLV_TABLE_MOD: u32 = 24;
const NXT_TLV_TABLE_REQUEST: u32 = 25;
const NXT_TLV_TABLE_REPLY: u32 = 26;
const NXT_CT_FLUSH_ZONE: u32 = 29;
const NXT_CT_FLUSH: u32 = 32;
const NXST_FLOW: u32 = 0;
const NXST_AGGREGATE: u32 = 1;
const NXST_IPFIX_BRIDGE: u32 = 3;
const NXST_IPFIX_FLOW: u32 = 4;
const NXT_GROUP_MOD: u32 = 31;
const NXST_GROUP: u32 = 7;
const NXST_GROUP_DESC: u32 = 8;
const NXST_GROUP_FEATURES: u32 = 9;

// Stats / multipart types.
const ST_DESC: u16 = 0;
const ST_FLOW: u16 = 1;
const ST_AGGREGATE: u16 = 2;
const ST_TABLE: u16 = 3;
const ST_PORT: u16 = 4;
const ST_QUEUE: u16 = 5;
const MP_GROUP: u16 = 6;
const MP_GROUP_DESC: u16 = 7;
const MP_GROUP_FEATURES: u16 = 8;
const MP_METER: u16 = 9;
const MP_METER_CONFIG: u16 = 10;
const MP_METER_FEATURES: u16 = 11;
const MP_TABLE_FEATURES: u16 = 12;
const MP_PORT_DESC: u16 = 13;
const MP_TABLE_DESC: u16 = 14;
const ST_VENDOR: u16 = 0xffff;

/// `OFPFF_*` flags of a flow_mod, as flowpath's rule flags.
const FLAG_MASK_OF10: u16 = 0x3;
const FLAG_MASK_OF13: u16 = 0x1f;

/// Which dialect a flow request came in (replies use the same).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Dialect {
    /// OpenFlow 1.0 with its fixed match.
    Of10,
    /// Nicira extensions (NXM).
    Nx,
    /// OpenFlow 1.1+ (OXM).
    Oxm,
}

/// A flow_mod command.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Command {
    /// Add (replacing an identical flow).
    Add,
    /// Modify every flow the match selects (adding when none).
    Modify,
    /// Modify the flow with exactly this match and priority.
    ModifyStrict,
    /// Delete every flow the match selects.
    Delete,
    /// Delete the flow with exactly this match and priority.
    DeleteStrict,
}

/// A decoded flow_mod.
#[derive(Clone, Debug)]
pub struct FlowMod {
    /// What to do.
    pub command: Command,
    /// The flow (table 0 when `table` is None).
    pub rule: Rule,
    /// The table, None for "every table" (0xff, deletes only).
    pub table: Option<u8>,
    /// Cookie to select flows by (modify/delete) under `cookie_mask`.
    pub cookie: u64,
    /// Cookie mask for modify/delete selection.
    pub cookie_mask: u64,
    /// The cookie a modify gives the flows it changes (None: unchanged);
    /// a modify that selects nothing adds the flow only with a new
    /// cookie and no cookie mask (Open vSwitch's rules per version).
    pub new_cookie: Option<u64>,
    /// `out_port` filter (OpenFlow 1.0 port numbers; None = any).
    pub out_port: Option<u32>,
    /// `out_group` filter (None = any).
    pub out_group: Option<u32>,
    /// The buffered packet to apply it to (flowpath keeps none).
    pub buffer_id: u32,
}

/// A decoded flow (or aggregate) statistics request.
#[derive(Clone, Debug)]
pub struct FlowStatsRequest {
    /// The dialect to answer in.
    pub dialect: Dialect,
    /// Table, None for all.
    pub table: Option<u8>,
    /// Match (non-strict).
    pub matching: Match,
    /// `out_port` filter.
    pub out_port: Option<u32>,
    /// `out_group` filter.
    pub out_group: Option<u32>,
    /// Cookie and mask.
    pub cookie: u64,
    /// Cookie mask.
    pub cookie_mask: u64,
}

/// A decoded packet-out.
#[derive(Clone, Debug)]
pub struct PacketOut {
    /// The ingress port (OpenFlow 1.0 numbers; `OFPP_NONE`/`CONTROLLER` as
    /// given).
    pub in_port: u32,
    /// The actions.
    pub actions: Vec<Action>,
    /// The frame.
    pub data: Vec<u8>,
    /// A buffer id (flowpath keeps no buffers: must be 0xffffffff).
    pub buffer_id: u32,
}

/// One Geneve option mapping of `NXT_TLV_TABLE_MOD` and `_REPLY`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TlvMapping {
    /// Option class.
    pub class: u16,
    /// Option type.
    pub typ: u8,
    /// Option length in bytes.
    pub len: u8,
    /// The `tun_metadataN` it maps to.
    pub index: u16,
}

/// A request from a controller.
#[derive(Clone, Debug)]
#[allow(missing_docs)]
pub enum Request {
    Hello {
        versions: u32,
    },
    EchoRequest(Vec<u8>),
    EchoReply,
    FeaturesRequest,
    GetConfigRequest,
    SetConfig {
        flags: u16,
        miss_send_len: u16,
    },
    BarrierRequest,
    FlowMod(FlowMod),
    PacketOut(PacketOut),
    FlowStats(FlowStatsRequest),
    AggregateStats(FlowStatsRequest),
    DescStats,
    TableStats,
    TableFeatures,
    PortStats {
        port: u32,
    },
    PortDesc,
    QueueStats,
    GroupStats {
        group_id: u32,
    },
    GroupDesc {
        group_id: u32,
    },
    GroupFeatures,
    GroupMod(GroupMod),
    MeterStats,
    SetFlowFormat(u32),
    FlowModTableId(bool),
    SetPacketInFormat(u32),
    SetControllerId(u16),
    /// `NXT_CT_FLUSH_ZONE` (`ovs-ofctl ct-flush-zone`, OVN's controller
    /// when it gives a port a zone): every connection of the zone goes.
    CtFlushZone(u16),
    /// `NXT_CT_FLUSH` (`ovs-ofctl ct-flush`): the connections of a zone,
    /// or those a tuple selects.
    CtFlush(CtFlush),
    SetAsync,
    TlvTableRequest,
    /// `NXT_TLV_TABLE_MOD` (`ovs-ofctl add-tlv-map`): command 0 add, 1
    /// delete, 2 clear, and the mappings.
    TlvTableMod {
        /// `NXTTMC_ADD` (0), `NXTTMC_DELETE` (1) or `NXTTMC_CLEAR` (2).
        command: u16,
        /// The mappings.
        maps: Vec<TlvMapping>,
    },
    RoleRequest {
        role: u32,
        generation_id: u64,
        nx: bool,
    },
    /// Flow monitors to start (or, in OpenFlow 1.4+, modify or delete).
    FlowMonitor(Vec<FlowMonitor>),
    /// `NXT_FLOW_MONITOR_CANCEL`: stop monitor `id`.
    FlowMonitorCancel(u32),
    /// `NXT_RESUME`: a paused packet sent back to go on.
    Resume(Box<Resume>),
    /// A bundle control request (open, close, commit, discard).
    BundleControl(BundleControl),
    /// A message added to a bundle.
    BundleAdd(BundleAdd),
    /// A port's configuration to change.
    PortMod(PortMod),
    /// A table's configuration to change (OpenFlow 1.1+).
    TableMod(TableMod),
    /// The OpenFlow 1.4+ table description request.
    TableDesc,
    /// `NXST_IPFIX_BRIDGE`: the bridge-wide IPFIX exporter's counters.
    IpfixBridgeStats,
    /// `NXST_IPFIX_FLOW`: each flow-sample collector set's counters.
    IpfixFlowStats,
    /// A reply or async message from the peer (ignored).
    Ignored,
}

/// One decoded message.
#[derive(Clone, Debug)]
pub struct Decoded {
    /// Its header.
    pub header: Header,
    /// What it asks.
    pub request: Request,
}

/// Per-connection state that changes how requests read.
#[derive(Clone, Copy, Debug, Default)]
pub struct ConnState {
    /// `NXT_FLOW_MOD_TABLE_ID` on: an OpenFlow 1.0 / NXM flow_mod's
    /// command high byte is the table.
    pub flow_mod_table_id: bool,
}

fn command_of(c: u8) -> Result<Command, OfError> {
    Ok(match c {
        0 => Command::Add,
        1 => Command::Modify,
        2 => Command::ModifyStrict,
        3 => Command::Delete,
        4 => Command::DeleteStrict,
        _ => return Err(FMFC_BAD_COMMAND),
    })
}

fn port_filter16(p: u16) -> Option<u32> {
    (p != port::OFPP_NONE).then_some(u32::from(p))
}

fn port_filter32(p: u32) -> Result<Option<u32>, OfError> {
    if p == 0xffff_ffff {
        return Ok(None);
    }
    port::from_of11(p).map(Some).ok_or(BRC_BAD_PORT)
}

/// Reads an OpenFlow 1.1+ `ofp_match` (type OXM) including its padding.
fn pull_oxm_match(r: &mut Reader<'_>) -> Result<Match, OfError> {
    let mtype = r.u16()?;
    let len = usize::from(r.u16()?);
    if mtype != 1 {
        return Err(BMC_BAD_TYPE);
    }
    if len < 4 {
        return Err(BMC_BAD_LEN);
    }
    let body = r.bytes(len - 4).map_err(|_| BMC_BAD_LEN)?;
    r.skip(len.next_multiple_of(8) - len)
        .map_err(|_| BMC_BAD_LEN)?;
    let mut m = Match::catchall();
    nxm::pull_entries(&mut Reader::new(body), &mut m)?;
    Ok(m)
}

/// Reads an NXM match of `len` bytes and its padding; with the cookie
/// and cookie mask an `NXM_NX_COOKIE` entry gives.
fn pull_nxm_match(r: &mut Reader<'_>, len: usize) -> Result<(Match, u64, u64), OfError> {
    let body = r.bytes(len).map_err(|_| BMC_BAD_LEN)?;
    r.skip(len.next_multiple_of(8) - len)
        .map_err(|_| BMC_BAD_LEN)?;
    let mut m = Match::catchall();
    let (c, cm) = nxm::pull_nxm_entries(&mut Reader::new(body), &mut m)?;
    Ok((m, c, cm))
}

fn flags_of(raw: u16, version: u8) -> Result<u8, OfError> {
    let allowed = if version == OFP10 {
        FLAG_MASK_OF10
    } else {
        FLAG_MASK_OF13
    };
    if raw & !allowed != 0 {
        return Err(FMFC_BAD_FLAGS);
    }
    Ok(raw as u8)
}

fn finish_rule(m: Match, actions: Vec<Action>, write_set: Vec<Action>, f: &FlowFields) -> Rule {
    let mut rule = Rule::new(m, actions);
    rule.write_actions = write_set;
    rule.cookie = f.cookie;
    rule.priority = f.priority;
    rule.idle_timeout = f.idle;
    rule.hard_timeout = f.hard;
    rule.flags = f.flags;
    rule.importance = f.importance;
    rule.table = f.table.unwrap_or(0);
    rule
}

struct FlowFields {
    cookie: u64,
    priority: u16,
    idle: u16,
    hard: u16,
    flags: u8,
    importance: u16,
    table: Option<u8>,
}

/// The table of an OpenFlow 1.0 / NXM flow_mod: the command's high byte
/// with `NXT_FLOW_MOD_TABLE_ID` on, else 0xff ("every table" for
/// modifications and deletions; an add goes to table 0), as Open vSwitch.
fn of10_table(st: ConnState, cmd: u16) -> u8 {
    if st.flow_mod_table_id {
        (cmd >> 8) as u8
    } else {
        0xff
    }
}

/// OpenFlow 1.0 carries `write_metadata` as an action; as an
/// instruction it must come after every other action (Open vSwitch's
/// "invalid instruction ordering").
fn check_of10_order(acts: &[Action]) -> Result<(), OfError> {
    if let Some(i) = acts
        .iter()
        .position(|a| matches!(a, Action::WriteMetadata { .. }))
    {
        if i + 1 != acts.len() {
            return Err(BAC_UNSUPPORTED_ORDER);
        }
    }
    Ok(())
}

fn decode_flow_mod_of10(r: &mut Reader<'_>, st: ConnState) -> Result<FlowMod, OfError> {
    let exact = r
        .rest()
        .get(..4)
        .is_some_and(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]) & 0x003f_ffff == 0);
    let m = ofp10::pull(r)?;
    let cookie = r.u64()?;
    let cmd = r.u16()?;
    let idle = r.u16()?;
    let hard = r.u16()?;
    let priority = r.u16()?;
    let buffer_id = r.u32()?;
    let out_port = r.u16()?;
    let flags = flags_of(r.u16()?, OFP10)?;
    let table = of10_table(st, cmd);
    let mut acts = Vec::new();
    actions::pull_actions(r, OFP10, &mut acts)?;
    check_of10_order(&acts)?;
    // An exact-match OpenFlow 1.0 flow has the highest priority.
    let priority = if exact { u16::MAX } else { priority };
    let mut fm = flow_mod(
        cmd as u8,
        table,
        m,
        acts,
        Vec::new(),
        (0, 0),
        idle,
        hard,
        priority,
        flags,
        0,
        buffer_id,
        port_filter16(out_port),
        None,
    )?;
    fm.rule.cookie = cookie;
    fm.new_cookie = Some(cookie);
    Ok(fm)
}

#[allow(clippy::too_many_arguments)]
fn flow_mod(
    cmd: u8,
    table: u8,
    m: Match,
    acts: Vec<Action>,
    write_set: Vec<Action>,
    (cookie, cookie_mask): (u64, u64),
    idle: u16,
    hard: u16,
    priority: u16,
    flags: u8,
    importance: u16,
    buffer_id: u32,
    out_port: Option<u32>,
    out_group: Option<u32>,
) -> Result<FlowMod, OfError> {
    let command = command_of(cmd)?;
    let table = (table != 0xff).then_some(table);
    // An add to "every table" goes to table 0 (Open vSwitch's reading of
    // OpenFlow 1.0; OpenFlow 1.1+ forbids it, and so does Open vSwitch
    // there: ovs-ofctl never sends one).
    let table = if table.is_none() && matches!(command, Command::Add) {
        Some(0)
    } else {
        table
    };
    if table.is_some_and(|t| t > 254) {
        return Err(FMFC_BAD_TABLE_ID);
    }
    let f = FlowFields {
        cookie: 0,
        priority,
        idle,
        hard,
        flags,
        importance,
        table,
    };
    Ok(FlowMod {
        command,
        rule: finish_rule(m, acts, write_set, &f),
        table,
        cookie,
        cookie_mask,
        new_cookie: None,
        out_port,
        out_group,
        buffer_id,
    })
}

fn decode_nx_flow_mod(r: &mut Reader<'_>, st: ConnState) -> Result<FlowMod, OfError> {
    let cookie = r.u64()?;
    let cmd = r.u16()?;
    let idle = r.u16()?;
    let hard = r.u16()?;
    let priority = r.u16()?;
    let buffer_id = r.u32()?;
    let out_port = r.u16()?;
    let flags = flags_of(r.u16()?, OFP10)?;
    let match_len = usize::from(r.u16()?);
    r.skip(6)?;
    let (m, sel_cookie, sel_mask) = pull_nxm_match(r, match_len)?;
    if cmd as u8 == 0 && sel_mask != 0 {
        // Adds may only set a cookie, not select by one.
        return Err(BMC_BAD_FIELD);
    }
    let table = of10_table(st, cmd);
    let mut acts = Vec::new();
    actions::pull_actions(r, OFP10, &mut acts)?;
    check_of10_order(&acts)?;
    let mut fm = flow_mod(
        cmd as u8,
        table,
        m,
        acts,
        Vec::new(),
        (sel_cookie, sel_mask),
        idle,
        hard,
        priority,
        flags,
        0,
        buffer_id,
        port_filter16(out_port),
        None,
    )?;
    fm.rule.cookie = cookie;
    fm.new_cookie = (cookie != u64::MAX).then_some(cookie);
    Ok(fm)
}

fn decode_flow_mod_of11(r: &mut Reader<'_>, version: u8) -> Result<FlowMod, OfError> {
    let cookie = r.u64()?;
    let cookie_mask = r.u64()?;
    let table = r.u8()?;
    let cmd = r.u8()?;
    let idle = r.u16()?;
    let hard = r.u16()?;
    let priority = r.u16()?;
    let buffer_id = r.u32()?;
    let out_port = port_filter32(r.u32()?)?;
    let out_group = r.u32()?;
    let flags = flags_of(r.u16()?, version)?;
    let importance = r.u16()?;
    let importance = if version >= OFP14 { importance } else { 0 };
    let m = pull_oxm_match(r)?;
    let (acts, write_set) = actions::pull_instructions(r, version)?;
    let out_group = (out_group != 0xffff_ffff).then_some(out_group);
    let add = cmd == 0;
    let sel = if add { (0, 0) } else { (cookie, cookie_mask) };
    let mut fm = flow_mod(
        cmd, table, m, acts, write_set, sel, idle, hard, priority, flags, importance, buffer_id,
        out_port, out_group,
    )?;
    if add {
        fm.rule.cookie = cookie;
        fm.new_cookie = Some(cookie);
    }
    Ok(fm)
}

fn decode_stats(r: &mut Reader<'_>, version: u8) -> Result<Request, OfError> {
    let stype = r.u16()?;
    let _flags = r.u16()?;
    if version != OFP10 {
        r.skip(4)?;
    }
    Ok(match stype {
        ST_DESC => Request::DescStats,
        ST_FLOW | ST_AGGREGATE => {
            let req = if version == OFP10 {
                let m = ofp10::pull(r)?;
                let table = r.u8()?;
                r.skip(1)?;
                let out_port = r.u16()?;
                FlowStatsRequest {
                    dialect: Dialect::Of10,
                    table: (table != 0xff).then_some(table),
                    matching: m,
                    out_port: port_filter16(out_port),
                    out_group: None,
                    cookie: 0,
                    cookie_mask: 0,
                }
            } else {
                let table = r.u8()?;
                r.skip(3)?;
                let out_port = port_filter32(r.u32()?)?;
                let out_group = r.u32()?;
                r.skip(4)?;
                let cookie = r.u64()?;
                let cookie_mask = r.u64()?;
                let m = pull_oxm_match(r)?;
                FlowStatsRequest {
                    dialect: Dialect::Oxm,
                    table: (table != 0xff).then_some(table),
                    matching: m,
                    out_port,
                    out_group: (out_group != 0xffff_ffff).then_some(out_group),
                    cookie,
                    cookie_mask,
                }
            };
            if stype == ST_FLOW {
                Request::FlowStats(req)
            } else {
                Request::AggregateStats(req)
            }
        }
        ST_TABLE => Request::TableStats,
        ST_PORT => {
            let p = if version == OFP10 {
                let p = u32::from(r.u16()?);
                if p == 0xffff {
                    0xffff_ffff
                } else {
                    p
                }
            } else {
                let p = r.u32()?;
                if p == 0xffff_ffff {
                    p
                } else {
                    port::from_of11(p).ok_or(BRC_BAD_PORT)?
                }
            };
            Request::PortStats { port: p }
        }
        ST_QUEUE => Request::QueueStats,
        MP_GROUP if version != OFP10 => Request::GroupStats {
            group_id: group::pull_group_id(r),
        },
        MP_GROUP_DESC if version != OFP10 => Request::GroupDesc {
            group_id: if version >= OFP15 {
                group::pull_group_id(r)
            } else {
                group::OFPG_ALL
            },
        },
        MP_GROUP_FEATURES if version != OFP10 => Request::GroupFeatures,
        MP_METER | MP_METER_CONFIG | MP_METER_FEATURES if version != OFP10 => Request::MeterStats,
        MP_TABLE_FEATURES if version != OFP10 => Request::TableFeatures,
        MP_PORT_DESC => Request::PortDesc,
        MP_TABLE_DESC if version >= OFP14 => Request::TableDesc,
        flowmon::MP_FLOW_MONITOR if version >= OFP14 => {
            Request::FlowMonitor(flowmon::decode_of14_requests(r)?)
        }
        ST_VENDOR => {
            let vendor = r.u32()?;
            if vendor == header::ONF_VENDOR_ID && version == OFP13 {
                return match r.u32()? {
                    flowmon::ONFST_FLOW_MONITOR => {
                        Ok(Request::FlowMonitor(flowmon::decode_onf_requests(r)?))
                    }
                    _ => Err(BRC_BAD_SUBTYPE),
                };
            }
            if vendor != NX_VENDOR_ID {
                return Err(BRC_BAD_VENDOR);
            }
            let sub = r.u32()?;
            r.skip(4)?;
            match sub {
                NXST_FLOW | NXST_AGGREGATE => {
                    let out_port = r.u16()?;
                    let match_len = usize::from(r.u16()?);
                    let table = r.u8()?;
                    r.skip(3)?;
                    let (m, cookie, cookie_mask) = pull_nxm_match(r, match_len)?;
                    let req = FlowStatsRequest {
                        dialect: Dialect::Nx,
                        table: (table != 0xff).then_some(table),
                        matching: m,
                        out_port: port_filter16(out_port),
                        out_group: None,
                        cookie,
                        cookie_mask,
                    };
                    if sub == NXST_FLOW {
                        Request::FlowStats(req)
                    } else {
                        Request::AggregateStats(req)
                    }
                }
                flowmon::NXST_FLOW_MONITOR if version == OFP10 => {
                    Request::FlowMonitor(flowmon::decode_nx_requests(r)?)
                }
                // Open vSwitch's group statistics for OpenFlow 1.0.
                NXST_GROUP => Request::GroupStats {
                    group_id: group::pull_group_id(r),
                },
                NXST_GROUP_DESC => Request::GroupDesc {
                    group_id: group::pull_group_id(r),
                },
                NXST_GROUP_FEATURES => Request::GroupFeatures,
                NXST_IPFIX_BRIDGE => Request::IpfixBridgeStats,
                NXST_IPFIX_FLOW => Request::IpfixFlowStats,
                _ => return Err(BRC_BAD_SUBTYPE),
            }
        }
        _ => return Err(BRC_BAD_STAT),
    })
}

fn decode_vendor(r: &mut Reader<'_>, h: &Header, st: ConnState) -> Result<Request, OfError> {
    let vendor = r.u32()?;
    if vendor == header::ONF_VENDOR_ID && h.version == OFP13 {
        // ONF's OpenFlow 1.3 bundle extension.
        return match r.u32()? {
            flowmon::ONFT_FLOW_MONITOR_CANCEL => Ok(Request::FlowMonitorCancel(r.u32()?)),
            bundle::ONFT_BUNDLE_CONTROL => bundle::decode_control(r, true),
            bundle::ONFT_BUNDLE_ADD_MESSAGE => bundle::decode_add(r, h, st),
            _ => Err(BRC_BAD_SUBTYPE),
        };
    }
    if vendor != NX_VENDOR_ID {
        return Err(BRC_BAD_VENDOR);
    }
    let sub = r.u32()?;
    Ok(match sub {
        NXT_SET_FLOW_FORMAT => Request::SetFlowFormat(r.u32()?),
        NXT_FLOW_MOD => Request::FlowMod(decode_nx_flow_mod(r, st)?),
        NXT_FLOW_MOD_TABLE_ID => Request::FlowModTableId(r.u8()? != 0),
        NXT_SET_PACKET_IN_FORMAT => Request::SetPacketInFormat(r.u32()?),
        NXT_SET_CONTROLLER_ID => {
            r.skip(6)?;
            Request::SetControllerId(r.u16()?)
        }
        NXT_SET_ASYNC_CONFIG => Request::SetAsync,
        NXT_CT_FLUSH_ZONE => {
            // (struct nx_zone_id: six zero bytes, then the zone.)
            if r.bytes(6)?.iter().any(|&b| b != 0) {
                return Err(crate::error::BRC_MUST_BE_ZERO);
            }
            Request::CtFlushZone(r.u16()?)
        }
        NXT_CT_FLUSH => Request::CtFlush(ct_flush::decode(r)?),
        pin2::NXT_RESUME => Request::Resume(Box::new(pin2::decode_resume(r, h.version)?)),
        flowmon::NXT_FLOW_MONITOR_CANCEL => Request::FlowMonitorCancel(r.u32()?),
        NXT_GROUP_MOD => Request::GroupMod(group::decode_group_mod(r, OFP10)?),
        NXT_TLV_TABLE_REQUEST => Request::TlvTableRequest,
        NXT_TLV_TABLE_MOD => {
            let command = r.u16()?;
            r.skip(6)?;
            let mut maps = Vec::new();
            while r.remaining() >= 8 {
                let class = r.u16()?;
                let typ = r.u8()?;
                let len = r.u8()?;
                let index = r.u16()?;
                r.skip(2)?;
                maps.push(TlvMapping {
                    class,
                    typ,
                    len,
                    index,
                });
            }
            Request::TlvTableMod { command, maps }
        }
        NXT_ROLE_REQUEST => Request::RoleRequest {
            role: r.u32()?,
            generation_id: 0,
            nx: true,
        },
        _ => return Err(BRC_BAD_SUBTYPE),
    })
}

fn decode_packet_out(r: &mut Reader<'_>, version: u8) -> Result<PacketOut, OfError> {
    let buffer_id = r.u32()?;
    let (in_port, alen) = if version == OFP10 {
        (u32::from(r.u16()?), usize::from(r.u16()?))
    } else if version < OFP15 {
        let p = r.u32()?;
        let alen = usize::from(r.u16()?);
        r.skip(6)?;
        (port::from_of11(p).ok_or(BRC_BAD_PORT)?, alen)
    } else {
        let alen = usize::from(r.u16()?);
        r.skip(2)?;
        // As Open vSwitch: pipeline fields only, and an in_port.
        let m = pull_oxm_match(r)?;
        if nxm::has_non_pipeline_field(&m) {
            return Err(BRC_PIPELINE_FIELDS_ONLY);
        }
        let (p, mask) = nxm::field_get(&m, flowpath_flow::FieldId::InPort.info());
        if mask == 0 {
            return Err(BRC_BAD_PORT);
        }
        (p as u32, alen)
    };
    let abytes = r.bytes(alen).map_err(|_| BRC_BAD_LEN_E)?;
    let mut acts = Vec::new();
    actions::pull_actions(&mut Reader::new(abytes), version, &mut acts)?;
    Ok(PacketOut {
        in_port,
        actions: acts,
        data: r.rest().to_vec(),
        buffer_id,
    })
}

/// Decodes one whole message (`buf` holds exactly its bytes).
pub fn decode(buf: &[u8], st: ConnState) -> Result<Decoded, OfError> {
    let header = Header::read(buf)?;
    if usize::from(header.length) != buf.len() {
        return Err(BRC_BAD_LEN_E);
    }
    let v = header.version;
    let mut r = Reader::new(&buf[header::HEADER_LEN..]);
    if header.mtype == 0 {
        // HELLO: any version; the bitmap element (type 1) if present.
        let mut versions = 1u32 << v.min(31);
        while r.remaining() >= 4 {
            let t = r.u16()?;
            let l = usize::from(r.u16()?);
            if l < 4 {
                break;
            }
            let body = r.bytes((l - 4).min(r.remaining()))?;
            if t == 1 && body.len() >= 4 {
                versions = u32::from_be_bytes([body[0], body[1], body[2], body[3]]);
            }
            let pad = l.next_multiple_of(8) - l;
            if r.skip(pad.min(r.remaining())).is_err() {
                break;
            }
        }
        return Ok(Decoded {
            header,
            request: Request::Hello { versions },
        });
    }
    if !header::VERSIONS.contains(&v) {
        return Err(BRC_BAD_VERSION);
    }
    let t = MsgType::from_wire(v, header.mtype)?;
    let request = match t {
        MsgType::EchoRequest => Request::EchoRequest(r.rest().to_vec()),
        MsgType::EchoReply => Request::EchoReply,
        MsgType::FeaturesRequest => Request::FeaturesRequest,
        MsgType::GetConfigRequest => Request::GetConfigRequest,
        MsgType::SetConfig => Request::SetConfig {
            flags: r.u16()?,
            miss_send_len: r.u16()?,
        },
        MsgType::BarrierRequest => Request::BarrierRequest,
        MsgType::FlowMod if v == OFP10 => Request::FlowMod(decode_flow_mod_of10(&mut r, st)?),
        MsgType::FlowMod => Request::FlowMod(decode_flow_mod_of11(&mut r, v)?),
        MsgType::PacketOut => Request::PacketOut(decode_packet_out(&mut r, v)?),
        MsgType::GroupMod if v != OFP10 => Request::GroupMod(group::decode_group_mod(&mut r, v)?),
        MsgType::StatsRequest => decode_stats(&mut r, v)?,
        MsgType::PortMod => Request::PortMod(decode_port_mod(&mut r, v)?),
        MsgType::TableMod if v != OFP10 => Request::TableMod(decode_table_mod(&mut r, v)?),
        MsgType::Vendor => decode_vendor(&mut r, &header, st)?,
        MsgType::BundleControl => bundle::decode_control(&mut r, false)?,
        MsgType::BundleAddMessage => bundle::decode_add(&mut r, &header, st)?,
        MsgType::RoleRequest => {
            let role = r.u32()?;
            r.skip(4)?;
            Request::RoleRequest {
                role,
                generation_id: r.u64()?,
                nx: false,
            }
        }
        MsgType::Error
        | MsgType::FeaturesReply
        | MsgType::GetConfigReply
        | MsgType::BarrierReply
        | MsgType::StatsReply
        | MsgType::RoleReply => Request::Ignored,
        MsgType::SetAsync => Request::SetAsync,
        _ => return Err(BRC_BAD_TYPE),
    };
    Ok(Decoded { header, request })
}

mod bundle;
mod encode;
mod flowmon;
mod pin2;
pub use bundle::{
    encode_bundle_reply, BundleAdd, BundleControl, BundleCtrl, BF_ATOMIC, BF_ORDERED,
    ONFT_BUNDLE_ADD_MESSAGE, ONFT_BUNDLE_CONTROL,
};
pub use encode::*;
pub use flowmon::{
    encode_flow_removed, flow_monitor_reply, flow_update_entry, FlowEvent, FlowMonitor,
    FMF_ACTIONS, FMF_ADD, FMF_DELETE, FMF_INITIAL, FMF_MODIFY, FMF_OWN,
};
pub use pin2::{encode_packet_in2, CtMeta, PacketIn2, Resume};
mod group;
pub use group::*;
mod portmod;
pub use portmod::*;
mod ct_flush;
pub use ct_flush::CtFlush;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_groups;
