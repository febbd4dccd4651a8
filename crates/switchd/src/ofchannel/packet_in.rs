//! Packet-ins: from the PMDs through the dispatcher thread, and from a
//! connection's own packet-outs, to the connections that take them, at
//! the rate limit.

use super::notify::ct_meta;
use super::{ConnInfo, Registry, POLL};
use flowpath_datapath::execute::PacketIn;
use flowpath_openflow::header::OFP13;
use flowpath_openflow::msg;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TrySendError};
use std::sync::Arc;
use std::time::Instant;

/// A packet-in as `NXT_PACKET_IN2`: with the userdata of its controller
/// action and, for a paused translation, the registers and the
/// continuation.
fn packet_in2(reg: &Registry, v: u8, p: &PacketIn, max_len: usize, reason: u8) -> Vec<u8> {
    let state = (p.cont != 0)
        .then(|| flowpath_ofproto::recirc::find(p.cont))
        .flatten();
    let userdata = flowpath_ofproto::action::userdata::get(p.userdata);
    let pin = msg::PacketIn2 {
        frame: &p.frame[..p.frame.len().min(max_len)],
        total_len: p.frame.len(),
        table: p.table,
        cookie: p.cookie,
        reason,
        in_port: state.as_ref().map_or(p.in_port, |s| s.in_port),
        regs: state
            .as_ref()
            .map_or(flowpath_flow::key::Regs::zero(), |s| s.regs),
        ct: ct_meta(p),
        userdata: &userdata,
        continuation: state.as_deref().map(|s| (s, reg.bridge_uuid)),
        odp_port: p.in_port,
    };
    msg::encode_packet_in2(v, &pin).unwrap_or_else(|_| {
        msg::encode_packet_in(v, &p.frame, max_len, p.in_port, reason, p.table, p.cookie)
    })
}

/// Takes packet-ins from the PMDs and hands them to the connections
/// that take them, at the rate limit.
pub(super) fn dispatch(reg: &Arc<Registry>, rx: &Receiver<PacketIn>) {
    while !reg.sh.stop.load(Ordering::Relaxed) {
        match rx.recv_timeout(POLL) {
            Ok(p) => {
                reg.packet_in(&p, None);
            }
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

impl Registry {
    /// Hands packet-in `p` to every connection that takes it, at the rate
    /// limit; the message for `own` (the connection whose packet-out
    /// caused it) is returned instead, to go out in order with that
    /// connection's answers.
    pub(super) fn packet_in(&self, p: &PacketIn, own: Option<&Arc<ConnInfo>>) -> Option<Vec<u8>> {
        {
            let rate = f64::from(self.cfg.rate_limit.max(1));
            let burst = f64::from(self.cfg.burst_limit.max(1));
            let mut b = self.pin_bucket.lock().unwrap_or_else(|p| p.into_inner());
            let now = Instant::now();
            let (tokens, last) = b.get_or_insert((burst, now));
            *tokens = (*tokens + now.duration_since(*last).as_secs_f64() * rate).min(burst);
            *last = now;
            if *tokens < 1.0 {
                self.stats
                    .packet_in_rate_dropped
                    .fetch_add(1, Ordering::Relaxed);
                return None;
            }
            *tokens -= 1.0;
        }
        let mut mine = None;
        let conns: Vec<Arc<ConnInfo>> = self.lock().clone();
        for c in conns {
            let v = c.version.load(Ordering::Relaxed);
            if v == 0 || !c.async_on.load(Ordering::Relaxed) {
                continue;
            }
            // A secondary ("slave") connection gets no packet-ins.
            if c.role.load(Ordering::Relaxed) == 3 {
                continue;
            }
            if p.controller_id != 0
                && u32::from(p.controller_id) != c.controller_id.load(Ordering::Relaxed)
            {
                continue;
            }
            // Reason 6 is an explicit table-miss flow: "no match" from
            // OpenFlow 1.3 on, "action" before.
            let reason = match p.reason {
                6 if v >= OFP13 => 0,
                6 => 1,
                r => r,
            };
            let max_len = if p.reason == 0 {
                c.miss_send_len.load(Ordering::Relaxed) as usize
            } else {
                usize::from(p.max_len)
            };
            let m = if c.pin2.load(Ordering::Relaxed) {
                packet_in2(self, v, p, max_len, reason)
            } else {
                msg::encode_packet_in(v, &p.frame, max_len, p.in_port, reason, p.table, p.cookie)
            };
            if own.is_some_and(|o| Arc::ptr_eq(o, &c)) {
                self.stats.packet_ins.fetch_add(1, Ordering::Relaxed);
                mine = Some(m);
                continue;
            }
            match c.try_queue(m) {
                Ok(()) => {
                    self.stats.packet_ins.fetch_add(1, Ordering::Relaxed);
                }
                Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                    self.stats
                        .packet_in_queue_dropped
                        .fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        mine
    }
}
