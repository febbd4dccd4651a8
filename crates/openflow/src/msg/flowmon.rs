//! Flow change notifications: FLOW_REMOVED (OpenFlow 1.0, Nicira's
//! `NXT_FLOW_REMOVED`, 1.3/1.4 and 1.5 forms) and flow monitors
//! (`NXST_FLOW_MONITOR` in OpenFlow 1.0, `OFPMP_FLOW_MONITOR` in 1.4 and
//! 1.5: the requests, the initial reply and the updates that follow).

use super::{put_oxm_match, put_oxs, FlowCounters, StatsReply, ST_VENDOR};
use crate::actions::{self, Ctx};
use crate::buf::{Reader, Writer};
use crate::error::*;
use crate::header::{self, MsgType, OFP10, OFP13, OFP14, OFP15};
use crate::{nxm, ofp10, port};
use flowpath_flow::Match;
use flowpath_ofproto::rule::Rule;

/// `NXT_FLOW_REMOVED`.
const NXT_FLOW_REMOVED: u32 = 14;
/// `NXT_FLOW_MONITOR_CANCEL`.
pub(super) const NXT_FLOW_MONITOR_CANCEL: u32 = 21;
/// `NXST_FLOW_MONITOR`.
pub(super) const NXST_FLOW_MONITOR: u32 = 2;
/// ONF's OpenFlow 1.3 `ONFST_FLOW_MONITOR` (experimenter multipart).
pub(super) const ONFST_FLOW_MONITOR: u32 = 1870;
/// ONF's OpenFlow 1.3 `ONFT_FLOW_MONITOR_CANCEL`.
pub(super) const ONFT_FLOW_MONITOR_CANCEL: u32 = 1870;
/// OpenFlow 1.4's `OFPMP_FLOW_MONITOR`.
pub(super) const MP_FLOW_MONITOR: u16 = 16;

/// Monitor flags (Nicira's numbering; OpenFlow 1.4's are the same bits
/// but for `ONLY_OWN`): report initial flows.
pub const FMF_INITIAL: u16 = 1;
/// Report added flows.
pub const FMF_ADD: u16 = 2;
/// Report deleted flows.
pub const FMF_DELETE: u16 = 4;
/// Report modified flows.
pub const FMF_MODIFY: u16 = 8;
/// Include actions.
pub const FMF_ACTIONS: u16 = 16;
/// Report the connection's own changes in full (else abbreviated).
pub const FMF_OWN: u16 = 32;

/// A flow monitor request.
#[derive(Clone, Debug)]
pub struct FlowMonitor {
    /// The monitor's id (chosen by the controller).
    pub id: u32,
    /// `FMF_*`.
    pub flags: u16,
    /// Only flows that output to this port (None: any).
    pub out_port: Option<u32>,
    /// Only this table (None: all).
    pub table: Option<u8>,
    /// Only flows this match covers (non-strict selection).
    pub matching: Match,
    /// OpenFlow 1.4's command: 0 add, 1 modify, 2 delete.
    pub command: u8,
}

/// A flow change to report to monitors.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum FlowEvent {
    /// Present when the monitor started.
    Initial,
    /// Added.
    Added,
    /// Deleted, with the `OFPRR_*` reason.
    Deleted(u8),
    /// Actions changed.
    Modified,
}

/// Reads the `NXST_FLOW_MONITOR` request body (after the stats header):
/// one or more monitors.
pub(super) fn decode_nx_requests(r: &mut Reader<'_>) -> Result<Vec<FlowMonitor>, OfError> {
    let mut out = Vec::new();
    while r.remaining() > 0 {
        let id = r.u32()?;
        let flags = r.u16()?;
        let out_port = r.u16()?;
        let match_len = usize::from(r.u16()?);
        let table = r.u8()?;
        r.skip(5)?;
        check_flags(flags)?;
        let (m, _, _) = super::pull_nxm_match(r, match_len)?;
        out.push(FlowMonitor {
            id,
            flags,
            out_port: (out_port != port::OFPP_NONE).then_some(u32::from(out_port)),
            table: (table != 0xff).then_some(table),
            matching: m,
            command: 0,
        });
    }
    Ok(out)
}

/// Reads ONF's OpenFlow 1.3 `ONFST_FLOW_MONITOR` request body.
pub(super) fn decode_onf_requests(r: &mut Reader<'_>) -> Result<Vec<FlowMonitor>, OfError> {
    let mut out = Vec::new();
    while r.remaining() > 0 {
        let id = r.u32()?;
        let flags = r.u16()?;
        let _match_len = r.u16()?;
        let out_port = r.u32()?;
        let table = r.u8()?;
        r.skip(3)?;
        check_flags(flags)?;
        let m = super::pull_oxm_match(r)?;
        out.push(of11_monitor(id, flags, out_port, table, m, 0)?);
    }
    Ok(out)
}

/// Reads OpenFlow 1.4's `OFPMP_FLOW_MONITOR` request body.
pub(super) fn decode_of14_requests(r: &mut Reader<'_>) -> Result<Vec<FlowMonitor>, OfError> {
    let mut out = Vec::new();
    while r.remaining() > 0 {
        let id = r.u32()?;
        let out_port = r.u32()?;
        let _out_group = r.u32()?;
        let flags = r.u16()?;
        let table = r.u8()?;
        let command = r.u8()?;
        let m = super::pull_oxm_match(r)?;
        if command > 2 {
            return Err(MOFC_BAD_COMMAND);
        }
        // OFPFMF_ONLY_OWN (64) is accepted and ignored.
        let flags = flags & !64;
        if command != 2 {
            check_flags(flags)?;
        }
        out.push(of11_monitor(id, flags, out_port, table, m, command)?);
    }
    Ok(out)
}

/// A monitor with an OpenFlow 1.1+ port number.
fn of11_monitor(
    id: u32,
    flags: u16,
    out_port: u32,
    table: u8,
    matching: Match,
    command: u8,
) -> Result<FlowMonitor, OfError> {
    let out_port = if out_port == 0xffff_ffff {
        None
    } else {
        Some(port::from_of11(out_port).ok_or(BRC_BAD_PORT)?)
    };
    Ok(FlowMonitor {
        id,
        flags,
        out_port,
        table: (table != 0xff).then_some(table),
        matching,
        command,
    })
}

fn check_flags(flags: u16) -> Result<(), OfError> {
    if flags & (FMF_ADD | FMF_DELETE | FMF_MODIFY) == 0 || flags & !63 != 0 {
        return Err(MOFC_BAD_FLAGS);
    }
    Ok(())
}

/// A flow monitor reply (the initial one, with the request's xid, or an
/// update, xid 0): `NXST_FLOW_MONITOR` before OpenFlow 1.4, else
/// `OFPMP_FLOW_MONITOR`.
pub fn flow_monitor_reply(version: u8, xid: u32) -> StatsReply {
    if version == OFP13 {
        StatsReply::new_onf(version, xid, ONFST_FLOW_MONITOR)
    } else if version < OFP14 {
        StatsReply::new(version, xid, ST_VENDOR, Some(NXST_FLOW_MONITOR))
    } else {
        StatsReply::new(version, xid, MP_FLOW_MONITOR, None)
    }
}

/// One update entry of a flow monitor reply: the flow's match, priority,
/// timeouts, cookie and (with `actions`) its actions.
pub fn flow_update_entry(
    version: u8,
    ev: FlowEvent,
    r: &Rule,
    actions: bool,
) -> Result<Vec<u8>, String> {
    let mut w = Writer::new();
    let cx = Ctx {
        version,
        matching: &r.matching,
    };
    let reason = match ev {
        FlowEvent::Deleted(x) => x,
        _ => 0,
    };
    if version < OFP14 {
        // NXFME_ADDED 0 (initial flows too), DELETED 1, MODIFIED 2.
        let event = match ev {
            FlowEvent::Initial | FlowEvent::Added => 0,
            FlowEvent::Deleted(_) => 1,
            FlowEvent::Modified => 2,
        };
        w.u16(0);
        w.u16(event);
        w.u16(u16::from(reason));
        w.u16(r.priority);
        w.u16(r.idle_timeout);
        w.u16(r.hard_timeout);
        let ml_at = w.len();
        w.u16(0);
        w.u8(r.table);
        w.u8(0);
        w.u64(r.cookie);
        let ms = w.len();
        if version == OFP13 {
            // ONF's form: an OpenFlow 1.1+ match (its length without
            // padding in match_len) and instructions.
            put_oxm_match(&mut w, &r.matching)?;
            let ml = u16::from_be_bytes([w.buf[ms + 2], w.buf[ms + 3]]);
            w.patch_u16(ml_at, ml);
            if actions {
                actions::put_instructions(&mut w, &r.actions, &r.write_actions, cx)?;
            }
        } else {
            nxm::put_match(&mut w, &r.matching, false)?;
            let ml = (w.len() - ms) as u16;
            w.patch_u16(ml_at, ml);
            w.pad8_from(ms);
            if actions {
                actions::put_of10_actions(&mut w, &r.actions, &r.write_actions, cx)?;
            }
        }
    } else {
        let event = match ev {
            FlowEvent::Initial => 0,
            FlowEvent::Added => 1,
            FlowEvent::Deleted(_) => 2,
            FlowEvent::Modified => 3,
        };
        w.u16(0);
        w.u16(event);
        w.u8(r.table);
        w.u8(reason);
        w.u16(r.idle_timeout);
        w.u16(r.hard_timeout);
        w.u16(r.priority);
        w.zeros(4);
        w.u64(r.cookie);
        put_oxm_match(&mut w, &r.matching)?;
        if actions {
            actions::put_instructions(&mut w, &r.actions, &r.write_actions, cx)?;
        }
    }
    let n = w.len() as u16;
    w.patch_u16(0, n);
    Ok(w.buf)
}

/// A FLOW_REMOVED for `version` (`nxm`: the OpenFlow 1.0 connection
/// chose Nicira's flow format, so `NXT_FLOW_REMOVED`), as Open vSwitch
/// encodes each.
pub fn encode_flow_removed(
    version: u8,
    nxm_format: bool,
    r: &Rule,
    reason: u8,
    c: &FlowCounters,
) -> Result<Vec<u8>, String> {
    if version == OFP10 && nxm_format {
        let mut w = Writer::new();
        w.u64(r.cookie);
        w.u16(r.priority);
        w.u8(reason);
        w.u8(r.table.wrapping_add(1));
        w.u32(c.duration_s);
        w.u32(c.duration_ns);
        w.u16(r.idle_timeout);
        let ml_at = w.len();
        w.u16(0);
        w.u64(c.packets);
        w.u64(c.bytes);
        let ms = w.len();
        nxm::put_match(&mut w, &r.matching, false)?;
        let ml = (w.len() - ms) as u16;
        w.patch_u16(ml_at, ml);
        w.pad8_from(ms);
        return Ok(super::encode_nx(version, 0, NXT_FLOW_REMOVED, &w.buf));
    }
    let mut w = header::start(version, MsgType::FlowRemoved, 0);
    if version == OFP10 {
        ofp10::put(&mut w, &r.matching)?;
        w.u64(r.cookie);
        w.u16(r.priority);
        w.u8(reason);
        w.u8(0);
        w.u32(c.duration_s);
        w.u32(c.duration_ns);
        w.u16(r.idle_timeout);
        w.zeros(2);
        w.u64(c.packets);
        w.u64(c.bytes);
    } else if version < OFP15 {
        w.u64(r.cookie);
        w.u16(r.priority);
        w.u8(reason);
        w.u8(r.table);
        w.u32(c.duration_s);
        w.u32(c.duration_ns);
        w.u16(r.idle_timeout);
        w.u16(r.hard_timeout);
        w.u64(c.packets);
        w.u64(c.bytes);
        put_oxm_match(&mut w, &r.matching)?;
    } else {
        w.u8(r.table);
        w.u8(reason);
        w.u16(r.priority);
        w.u16(r.idle_timeout);
        w.u16(r.hard_timeout);
        w.u64(r.cookie);
        put_oxm_match(&mut w, &r.matching)?;
        put_oxs(
            &mut w,
            &[
                (
                    0,
                    8,
                    (u64::from(c.duration_s) << 32) | u64::from(c.duration_ns),
                ),
                (4, 8, c.packets),
                (5, 8, c.bytes),
            ],
        );
    }
    Ok(header::finish(w))
}
