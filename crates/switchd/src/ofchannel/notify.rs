//! Telling connections about flow changes: FLOW_REMOVED for flows with
//! `send_flow_rem` that are deleted or expire, and flow monitor updates
//! (`ovs-ofctl monitor br0 watch:`).

use super::flowmod::Applied;
use super::select::Sel;
use super::{ConnInfo, Registry};
use crate::rules::InstalledRule;
use flowpath_ofproto::rule::{flags, Rule};
use flowpath_openflow::header::{OFP14, OFP15};
use flowpath_openflow::msg::{self, FlowEvent, FlowMonitor};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// Whether monitor `m` watches flow `r`.
fn watches(m: &FlowMonitor, r: &Rule) -> bool {
    Sel {
        table: m.table,
        rule: Rule::new(m.matching, Vec::new()),
        cookie: 0,
        cookie_mask: 0,
        out_port: m.out_port,
        out_group: None,
    }
    .selects(r, false)
}

fn counters(ir: &InstalledRule, now: Instant) -> msg::FlowCounters {
    let d = now.saturating_duration_since(ir.added);
    msg::FlowCounters {
        duration_s: d.as_secs() as u32,
        duration_ns: d.subsec_millis() * 1_000_000,
        idle_age: 0,
        packets: ir.packets,
        bytes: ir.bytes,
    }
}

/// The update entries monitor `m` reports for `events`.
fn entries(version: u8, m: &FlowMonitor, events: &[(FlowEvent, &Rule)]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (ev, r) in events {
        let wanted = match ev {
            FlowEvent::Initial => m.flags & msg::FMF_INITIAL != 0,
            FlowEvent::Added => m.flags & msg::FMF_ADD != 0,
            FlowEvent::Deleted(_) => m.flags & msg::FMF_DELETE != 0,
            FlowEvent::Modified => m.flags & msg::FMF_MODIFY != 0,
        };
        if wanted && watches(m, r) {
            let acts = m.flags & msg::FMF_ACTIONS != 0;
            if let Ok(e) = msg::flow_update_entry(version, *ev, r, acts) {
                out.push(e);
            }
        }
    }
    out
}

/// An abbreviated update: "your flow_mod `xid` changed flows".
fn abbrev(version: u8, xid: u32) -> Vec<u8> {
    let event: u16 = if version < OFP14 { 3 } else { 4 };
    let mut e = Vec::with_capacity(8);
    e.extend_from_slice(&8u16.to_be_bytes());
    e.extend_from_slice(&event.to_be_bytes());
    e.extend_from_slice(&xid.to_be_bytes());
    e
}

impl Registry {
    /// Whether some connection has a flow monitor (flow changes are then
    /// copied for the updates).
    pub(super) fn monitored(&self) -> bool {
        self.lock().iter().any(|c| {
            !c.monitors
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_empty()
        })
    }

    /// Reports flow changes made by connection `origin` (its flow_mod
    /// `xid`) or, with None, by the switch itself.
    pub(super) fn flow_events(&self, origin: Option<(&Arc<ConnInfo>, u32)>, applied: &[Applied]) {
        let removed: Vec<(&InstalledRule, u8)> = applied
            .iter()
            .flat_map(|a| a.removed.iter().map(|r| (r, a.reason)))
            .collect();
        let mut events: Vec<(FlowEvent, &Rule)> = Vec::new();
        for a in applied {
            let ev = if a.modified {
                FlowEvent::Modified
            } else {
                FlowEvent::Added
            };
            events.extend(a.changed.iter().map(|r| (ev, r)));
            events.extend(
                a.removed
                    .iter()
                    .map(|r| (FlowEvent::Deleted(a.reason), &r.rule)),
            );
        }
        self.notify(origin, &removed, &events);
    }

    /// Reports rules that expired.
    pub(super) fn expired(&self, gone: &[(InstalledRule, u8)]) {
        let removed: Vec<(&InstalledRule, u8)> = gone.iter().map(|(r, why)| (r, *why)).collect();
        let events: Vec<(FlowEvent, &Rule)> = gone
            .iter()
            .map(|(r, why)| (FlowEvent::Deleted(*why), &r.rule))
            .collect();
        self.notify(None, &removed, &events);
    }

    fn notify(
        &self,
        origin: Option<(&Arc<ConnInfo>, u32)>,
        removed: &[(&InstalledRule, u8)],
        events: &[(FlowEvent, &Rule)],
    ) {
        if removed.is_empty() && events.is_empty() {
            return;
        }
        let now = Instant::now();
        let conns: Vec<Arc<ConnInfo>> = self.lock().clone();
        for c in conns {
            let v = c.version.load(Ordering::Relaxed);
            if v == 0 {
                continue;
            }
            let mut out: Vec<Vec<u8>> = Vec::new();
            // Flow monitors.
            let monitors = c.monitors.lock().unwrap_or_else(|p| p.into_inner()).clone();
            let own = origin.is_some_and(|(o, _)| Arc::ptr_eq(o, &c));
            for m in &monitors {
                let mut reply = msg::flow_monitor_reply(v, 0);
                let mut any = false;
                if own && m.flags & msg::FMF_OWN == 0 {
                    if let Some((_, xid)) = origin {
                        if !entries(v, m, events).is_empty() {
                            reply.push(&abbrev(v, xid));
                            any = true;
                        }
                    }
                } else {
                    for e in entries(v, m, events) {
                        reply.push(&e);
                        any = true;
                    }
                }
                if any {
                    out.extend(reply.finish());
                }
            }
            // Flow-removed messages: connections that take asynchronous
            // messages, but not a secondary ("slave") one.
            if c.async_on.load(Ordering::Relaxed) && c.role.load(Ordering::Relaxed) != 3 {
                let nxm = c.nxm_format.load(Ordering::Relaxed);
                for (ir, why) in removed {
                    if ir.rule.flags & flags::SEND_FLOW_REM == 0 {
                        continue;
                    }
                    let cn = counters(ir, now);
                    if let Ok(m) = msg::encode_flow_removed(v, nxm, &ir.rule, *why, &cn) {
                        out.push(m);
                    }
                }
            }
            for m in out {
                if c.try_queue(m).is_err() {
                    self.stats.async_dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// PORT_STATUS (reason MODIFY) for port `p`, changed by connection
    /// `source`'s PORT_MOD: to the connections that take asynchronous
    /// messages, but not a secondary one, and, as Open vSwitch, not to
    /// `source` itself unless it speaks OpenFlow 1.5.
    pub(super) fn port_status(&self, source: &Arc<ConnInfo>, p: &msg::PortInfo) {
        let conns: Vec<Arc<ConnInfo>> = self.lock().clone();
        for c in conns {
            let v = c.version.load(Ordering::Relaxed);
            if v == 0
                || !c.async_on.load(Ordering::Relaxed)
                || c.role.load(Ordering::Relaxed) == 3
                || (Arc::ptr_eq(&c, source) && v < OFP15)
            {
                continue;
            }
            if c.try_queue(msg::encode_port_status(v, 2, p)).is_err() {
                self.stats.async_dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// A port added (reason 0) or removed (reason 1) at run time: a
    /// PORT_STATUS to every connection that takes asynchronous messages
    /// (not a secondary one).
    pub(super) fn port_added_or_removed(&self, no: u32, name: &str, added: bool) {
        let p = msg::PortInfo {
            no,
            name: crate::ports::openflow_name(name),
            mac: [0x02, 0, 0, 0, (no >> 8) as u8, no as u8],
            up: added,
            config: 0,
        };
        let reason = if added { 0 } else { 1 };
        let conns: Vec<Arc<ConnInfo>> = self.lock().clone();
        for c in conns {
            let v = c.version.load(Ordering::Relaxed);
            if v == 0 || !c.async_on.load(Ordering::Relaxed) || c.role.load(Ordering::Relaxed) == 3
            {
                continue;
            }
            if c.out
                .try_send(msg::encode_port_status(v, reason, &p))
                .is_err()
            {
                self.stats.async_dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The reply to flow monitor requests: the initial flows (for
    /// monitors with `FMF_INITIAL`), and the monitors installed on `c`.
    pub(super) fn start_monitors(
        &self,
        c: &Arc<ConnInfo>,
        xid: u32,
        reqs: Vec<FlowMonitor>,
        flows: &[Rule],
    ) -> Result<Vec<Vec<u8>>, flowpath_openflow::error::OfError> {
        use flowpath_openflow::error as ofe;
        let v = c.version.load(Ordering::Relaxed);
        let mut mons = c.monitors.lock().unwrap_or_else(|p| p.into_inner());
        let mut next = mons.clone();
        for m in &reqs {
            let at = next.iter().position(|x| x.id == m.id);
            match (m.command, at) {
                (0, Some(_)) => return Err(ofe::MOFC_MONITOR_EXISTS),
                (0, None) => next.push(m.clone()),
                (1, Some(i)) => next[i] = m.clone(),
                (2, Some(i)) => {
                    next.remove(i);
                }
                _ => return Err(ofe::MOFC_UNKNOWN_MONITOR),
            }
        }
        *mons = next;
        drop(mons);
        let mut reply = msg::flow_monitor_reply(v, xid);
        for m in reqs.iter().filter(|m| m.command != 2) {
            let initial: Vec<(FlowEvent, &Rule)> =
                flows.iter().map(|r| (FlowEvent::Initial, r)).collect();
            for e in entries(v, m, &initial) {
                reply.push(&e);
            }
        }
        Ok(reply.finish())
    }

    /// `NXT_FLOW_MONITOR_CANCEL`.
    pub(super) fn cancel_monitor(
        &self,
        c: &Arc<ConnInfo>,
        id: u32,
    ) -> Result<(), flowpath_openflow::error::OfError> {
        let mut mons = c.monitors.lock().unwrap_or_else(|p| p.into_inner());
        let before = mons.len();
        mons.retain(|m| m.id != id);
        if mons.len() == before {
            return Err(flowpath_openflow::error::MOFC_UNKNOWN_MONITOR);
        }
        Ok(())
    }
}

/// The packet's tracker state as the packet-in's metadata carries it.
pub(super) fn ct_meta(p: &flowpath_datapath::execute::PacketIn) -> msg::CtMeta {
    let ct = &p.ct;
    let mut m = msg::CtMeta {
        state: ct.state,
        zone: ct.zone,
        mark: ct.mark,
        label: ct.label,
        ..msg::CtMeta::default()
    };
    if let Some(o) = &ct.orig {
        let addr = |b: &[u8; 16]| {
            if o.v6 {
                u128::from_be_bytes(*b)
            } else {
                u128::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
            }
        };
        m.nw_proto = o.proto;
        m.v6 = o.v6;
        m.src = addr(&o.src);
        m.dst = addr(&o.dst);
        m.tp_src = o.src_port;
        m.tp_dst = o.dst_port;
    }
    m
}
