//! One OpenFlow connection: framing, version negotiation, requests,
//! flow changes, statistics, packet-outs, liveness probes.

use super::flowmod::{self, Bundles};
use super::select::Sel;
use super::{Conn, ConnInfo, Registry, MAX_MESSAGE};
use crate::control::Control;
use crate::rules::InstalledRule;
use crate::shared::Shared;
use flowpath_ofproto::rule::Rule;
use flowpath_ofproto::tables::FragMode;
use flowpath_openflow::error::{self as ofe, OfError};
use flowpath_openflow::header::{self as ofh, Header, MsgType};
use flowpath_openflow::msg::{self, ConnState, Dialect, FlowMod, FlowStatsRequest, Request};
use std::io::{ErrorKind, Read};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

#[path = "groups.rs"]
mod groups;
pub(super) use groups::apply_group_mod;
#[path = "portmod.rs"]
mod portmod;

/// How long a connection's thread waits for the next message without
/// sleeping after it handled some (see `Conn::readable_within`).
const SPIN: std::time::Duration = std::time::Duration::from_micros(300);

/// One connection's state.
pub(super) struct Session {
    sh: Arc<Shared>,
    reg: Arc<Registry>,
    info: Arc<ConnInfo>,
    ctl: Control,
    version: u8,
    st: ConnState,
    pending: bool,
    bundles: Bundles,
    /// Answers not yet handed to the writer: those to the messages of
    /// one read go out together (`ovs-ofctl add-flows` sends a barrier
    /// after every flow; one hand-off per answer cost a thread wake-up
    /// each).
    batch: Vec<u8>,
}

impl Session {
    pub(super) fn new(reg: Arc<Registry>, info: Arc<ConnInfo>) -> Session {
        Session {
            ctl: Control::new(reg.sh.clone()),
            sh: reg.sh.clone(),
            reg,
            info,
            version: 0,
            st: ConnState::default(),
            pending: false,
            bundles: Bundles::default(),
            batch: Vec::new(),
        }
    }

    /// Hands `m` to the writer after the answers batched before it.
    fn send(&mut self, m: Vec<u8>) -> bool {
        self.send_batch() && self.info.deliver(&self.reg, m)
    }

    /// Adds `m` to the batch.
    fn queue(&mut self, m: Vec<u8>) {
        if self.batch.is_empty() {
            self.batch = m;
        } else {
            self.batch.extend_from_slice(&m);
        }
    }

    /// Hands the batched answers to the writer.
    fn send_batch(&mut self) -> bool {
        self.batch.is_empty()
            || self
                .info
                .deliver(&self.reg, std::mem::take(&mut self.batch))
    }

    pub(super) fn run(mut self, mut c: Conn) {
        let allowed = self.reg.versions.load(Ordering::Relaxed);
        if !self.send(msg::encode_hello_versions(allowed)) {
            return;
        }
        let mut buf: Vec<u8> = Vec::with_capacity(1 << 16);
        let mut chunk = vec![0u8; 1 << 16];
        let mut last_rx = Instant::now();
        let mut probed = false;
        let mut answered = false;

        loop {
            if self.sh.stop.load(Ordering::Relaxed) {
                return;
            }
            if answered {
                answered = false;
                c.readable_within(SPIN);
            }
            match c.read(&mut chunk) {
                Ok(0) => {
                    self.flush();
                    return;
                }
                Ok(n) => {
                    crate::fault::hook(crate::fault::Part::OpenFlow);
                    buf.extend_from_slice(&chunk[..n]);
                    last_rx = Instant::now();
                    probed = false;
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    self.flush();
                    // Liveness of a controller connection: an echo request
                    // after `probe` of silence, the end after twice that
                    // (no probe: `inactivity_probe=0`).
                    let probe_ms = self.info.probe_ms.load(Ordering::Relaxed);
                    if self.info.primary && self.version != 0 && probe_ms > 0 {
                        let probe = std::time::Duration::from_millis(probe_ms);
                        let quiet = last_rx.elapsed();
                        if quiet > 2 * probe {
                            c.shutdown();
                            return;
                        }
                        if quiet > probe && !probed {
                            probed = true;
                            let _ = self.send(msg::encode_simple(
                                self.version,
                                MsgType::EchoRequest,
                                0,
                                &[],
                            ));
                        }
                    }
                    continue;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return,
            }
            let mut used = 0;
            while buf.len() - used >= ofh::HEADER_LEN {
                let len = usize::from(u16::from_be_bytes([buf[used + 2], buf[used + 3]]));
                if len < ofh::HEADER_LEN {
                    // A length that cannot be: nothing after it can be
                    // framed, so the connection ends (as OVS).
                    let _ = self.send(ofe::BRC_BAD_LEN_E.encode(
                        self.version.max(1),
                        0,
                        &buf[used..used + 8],
                    ));
                    return;
                }
                if buf.len() - used < len {
                    break;
                }
                let m = buf[used..used + len].to_vec();
                used += len;
                if self.info.primary {
                    self.reg.snoop(&m);
                }
                self.reg.stats.rx_msgs.fetch_add(1, Ordering::Relaxed);
                for o in self.handle(&m) {
                    self.queue(o);
                }
                // Flow monitors' updates and other messages from other
                // threads go straight to the writer: with monitors on,
                // each answer goes out before the next message is handled
                // (an update never overtakes an earlier request's answer).
                let monitored = !self
                    .info
                    .monitors
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .is_empty();
                if (monitored || self.batch.len() >= MAX_MESSAGE || self.version == 0xff)
                    && !self.send_batch()
                {
                    return;
                }
                if self.version == 0xff {
                    return;
                }
            }
            if !self.send_batch() {
                return;
            }
            answered = used > 0;
            buf.drain(..used);
            if buf.len() > 2 * MAX_MESSAGE {
                return;
            }
        }
    }

    fn err(&self, e: OfError, h: &Header, m: &[u8]) -> Vec<u8> {
        self.reg.stats.errors.fetch_add(1, Ordering::Relaxed);
        e.encode(
            if self.version == 0 {
                h.version
            } else {
                self.version
            },
            h.xid,
            m,
        )
    }

    /// Hands pending flow changes to the publisher (the flow table has
    /// them already; the PMDs get them within milliseconds).
    fn flush(&mut self) {
        if std::mem::take(&mut self.pending) {
            self.reg.mark_dirty();
        }
    }

    fn handle(&mut self, m: &[u8]) -> Vec<Vec<u8>> {
        let h = match Header::read(m) {
            Ok(h) => h,
            Err(e) => return vec![e.encode(self.version.max(1), 0, m)],
        };
        let d = match msg::decode(m, self.st) {
            Ok(d) => d,
            Err(e) => return vec![self.err(e, &h, m)],
        };
        if let Request::Hello { versions } = d.request {
            let allowed = self.reg.versions.load(Ordering::Relaxed);
            return match msg::negotiate(h.version, versions & allowed) {
                Some(v) => {
                    self.version = v;
                    self.info.version.store(v, Ordering::Relaxed);
                    self.reg.refresh();
                    Vec::new()
                }
                None => {
                    let e = ofe::HELLO_INCOMPATIBLE.encode(h.version.min(ofh::OFP15), h.xid, b"");
                    self.version = 0xff;
                    vec![e]
                }
            };
        }
        if self.version == 0 || h.version != self.version {
            return vec![self.err(ofe::BRC_BAD_VERSION, &h, m)];
        }
        let v = self.version;
        let xid = h.xid;
        let res: Result<Vec<Vec<u8>>, OfError> = match d.request {
            Request::Hello { .. } | Request::Ignored | Request::EchoReply => Ok(Vec::new()),
            Request::EchoRequest(body) => {
                Ok(vec![msg::encode_simple(v, MsgType::EchoReply, xid, &body)])
            }
            Request::FeaturesRequest => Ok(vec![msg::encode_features_reply(
                v,
                xid,
                self.dpid(),
                &self.ports(),
            )]),
            Request::GetConfigRequest => {
                let frag = self.ctl.state().rules.frag_mode();
                let flags = match frag {
                    FragMode::Normal => 0,
                    FragMode::Drop => 1,
                    FragMode::NxMatch => 3,
                };
                Ok(vec![msg::encode_get_config_reply(
                    v,
                    xid,
                    flags,
                    self.info.miss_send_len.load(Ordering::Relaxed) as u16,
                )])
            }
            Request::SetConfig {
                flags,
                miss_send_len,
            } => {
                self.info
                    .miss_send_len
                    .store(u32::from(miss_send_len), Ordering::Relaxed);
                // A service connection that sets a config takes
                // packet-ins (as `ovs-ofctl monitor`).
                self.info.async_on.store(true, Ordering::Relaxed);
                let mode = match flags & 3 {
                    0 => Some("normal"),
                    1 => Some("drop"),
                    3 => Some("nx-match"),
                    _ => None,
                };
                match mode {
                    Some(mode) => {
                        let cur = self.ctl.state().rules.frag_mode().name();
                        if cur != mode {
                            let _ = self.ctl.config_set(&[format!("frag-mode={mode}")]);
                        }
                        Ok(Vec::new())
                    }
                    // reassemble: OVS answers with an error too when the
                    // datapath cannot reassemble.
                    None => Err(ofe::BRC_EPERM),
                }
            }
            Request::BarrierRequest => {
                self.flush();
                Ok(vec![msg::encode_barrier_reply(v, xid)])
            }
            Request::FlowMod(fm) => {
                // A secondary ("slave") connection may not change flows.
                if self.info.role.load(Ordering::Relaxed) == 3 {
                    Err(ofe::BRC_IS_SECONDARY)
                } else {
                    // The publisher thread publishes a stream of changes
                    // once.
                    let r = self.flow_mod(fm, xid).map(|_| Vec::new());
                    self.flush();
                    r
                }
            }
            Request::PacketOut(po) => self.packet_out(po),
            Request::BundleControl(_) | Request::BundleAdd(_)
                if self.info.role.load(Ordering::Relaxed) == 3 =>
            {
                Err(ofe::BRC_IS_SECONDARY)
            }
            Request::BundleControl(c) => self.bundle_control(xid, &c),
            Request::FlowMonitor(reqs) => {
                self.flush();
                let all = FlowStatsRequest {
                    dialect: Dialect::Oxm,
                    table: None,
                    matching: flowpath_flow::Match::catchall(),
                    out_port: None,
                    out_group: None,
                    cookie: 0,
                    cookie_mask: 0,
                };
                let flows: Vec<Rule> =
                    self.with_selected(&all, |rows| rows.iter().map(|&(r, _)| r.clone()).collect());
                self.reg.start_monitors(&self.info, xid, reqs, &flows)
            }
            Request::FlowMonitorCancel(id) => {
                self.reg.cancel_monitor(&self.info, id).map(|_| Vec::new())
            }
            Request::BundleAdd(a) => self.bundles.add(a).map(|_| Vec::new()),
            Request::FlowStats(req) => {
                self.flush();
                self.flow_stats(xid, &req)
            }
            Request::AggregateStats(req) => {
                self.flush();
                Ok(self.aggregate(xid, &req))
            }
            Request::DescStats => {
                let mut r = msg::StatsReply::new(v, xid, msg::stats::DESC, None);
                r.push(&msg::desc_body("br0"));
                Ok(r.finish())
            }
            Request::PortDesc => {
                let mut r = msg::StatsReply::new(v, xid, msg::stats::PORT_DESC, None);
                for p in self.ports() {
                    r.push(&msg::port_desc_entry(v, &p));
                }
                Ok(r.finish())
            }
            Request::PortStats { port } => Ok(self.port_stats(xid, port)),
            Request::TableStats => Ok(self.table_stats(xid)),
            Request::TableFeatures => {
                let mut r = msg::StatsReply::new(v, xid, msg::stats::TABLE_FEATURES, None);
                for t in 0..=253u8 {
                    r.push(&msg::table_features_entry(t, 1_000_000));
                }
                Ok(r.finish())
            }
            Request::QueueStats => {
                Ok(msg::StatsReply::new(v, xid, msg::stats::QUEUE, None).finish())
            }
            Request::GroupStats { group_id } => {
                self.flush();
                Ok(self.group_stats(xid, group_id))
            }
            Request::GroupDesc { group_id } => {
                self.flush();
                self.group_desc(xid, group_id)
            }
            Request::GroupFeatures => Ok(self.group_features(xid)),
            Request::GroupMod(gm) => {
                let r = self.group_mod(gm, xid).map(|_| Vec::new());
                self.flush();
                r
            }
            Request::MeterStats => Err(ofe::BRC_BAD_STAT),
            Request::PortMod(pm) => self.port_mod(pm),
            Request::TableMod(tm) => self.table_mod(tm),
            Request::TableDesc => Ok(self.table_desc(xid)),
            // No bridge-wide IPFIX exporter (OVS's `Bridge.ipfix`).
            Request::IpfixBridgeStats => Err(ofe::NXST_NOT_CONFIGURED),
            Request::IpfixFlowStats => {
                let sets = self.sh.sampler.stats();
                let mut r = msg::StatsReply::new(
                    self.version,
                    xid,
                    msg::stats::VENDOR,
                    Some(msg::stats::NXST_IPFIX_FLOW),
                );
                for st in &sets {
                    r.push(&msg::ipfix_stats_entry(st));
                }
                if sets.is_empty() {
                    Err(ofe::NXST_NOT_CONFIGURED)
                } else {
                    Ok(r.finish())
                }
            }
            Request::SetFlowFormat(f) => {
                if f == 0 || f == 2 {
                    self.info.nxm_format.store(f == 2, Ordering::Relaxed);
                    Ok(Vec::new())
                } else {
                    Err(ofe::BRC_EPERM)
                }
            }
            Request::FlowModTableId(on) => {
                self.st.flow_mod_table_id = on;
                Ok(Vec::new())
            }
            Request::SetPacketInFormat(f) => {
                // Standard packet-ins (0) or NXT_PACKET_IN2 (2);
                // Nicira's older NXT_PACKET_IN (1) is not sent.
                if f == 0 || f == 2 {
                    self.info.pin2.store(f == 2, Ordering::Relaxed);
                    Ok(Vec::new())
                } else {
                    Err(ofe::BRC_EPERM)
                }
            }
            Request::Resume(res) => self.resume(*res),
            Request::CtFlushZone(zone) => {
                self.sh.conntrack.flush(Some(zone), None);
                Ok(Vec::new())
            }
            Request::CtFlush(f) => {
                let (zone, tuple) = crate::conntrack::of_flush(&f);
                self.sh.conntrack.flush(zone, tuple.as_ref());
                Ok(Vec::new())
            }
            Request::SetControllerId(id) => {
                self.info
                    .controller_id
                    .store(u32::from(id), Ordering::Relaxed);
                self.reg.refresh();
                Ok(Vec::new())
            }
            Request::SetAsync => Ok(Vec::new()),
            Request::TlvTableRequest => {
                let maps: Vec<msg::TlvMapping> = self
                    .sh
                    .tlv
                    .mappings()
                    .into_iter()
                    .map(|(class, typ, len, index)| msg::TlvMapping {
                        class,
                        typ,
                        len,
                        index,
                    })
                    .collect();
                let fields = flowpath_wire::tunnel::TLV_FIELDS as u16;
                Ok(vec![msg::encode_tlv_table_reply(
                    v,
                    xid,
                    u32::from(fields) * 8,
                    fields,
                    &maps,
                )])
            }
            Request::TlvTableMod { command, maps } => {
                use flowpath_ofproto::tunnel::TlvModError as E;
                let m: Vec<(u16, u8, u8, u16)> = maps
                    .iter()
                    .map(|m| (m.class, m.typ, m.len, m.index))
                    .collect();
                // (The revalidator translates the megaflows again: the map
                // is in their actions.)
                let r = self
                    .sh
                    .tlv
                    .modify(command, &m, crate::underlay::tlv_in_use(&self.sh));
                if r.is_ok() {
                    crate::underlay::tlv_changed(&self.sh);
                }
                r.map(|()| Vec::new()).map_err(|e| match e {
                    E::BadCommand => flowpath_openflow::error::TTMFC_BAD_COMMAND,
                    E::BadOptLen => flowpath_openflow::error::TTMFC_BAD_OPT_LEN,
                    E::BadFieldIdx => flowpath_openflow::error::TTMFC_BAD_FIELD_IDX,
                    E::AlreadyMapped => flowpath_openflow::error::TTMFC_ALREADY_MAPPED,
                    E::DupEntry => flowpath_openflow::error::TTMFC_DUP_ENTRY,
                    E::InvalidTlvDel => flowpath_openflow::error::TTMFC_INVALID_TLV_DEL,
                })
            }
            Request::RoleRequest {
                role,
                generation_id,
                nx,
            } => {
                let max = if nx { 2 } else { 3 };
                if role > max {
                    Err(ofe::RRFC_BAD_ROLE)
                } else {
                    // Roles in OpenFlow 1.2+ numbers (1 equal, 2 master,
                    // 3 slave); Nicira's are 0 other, 1 master, 2 slave.
                    let asked = if nx { role + 1 } else { role };
                    if asked == 2 {
                        // One master: the others become slaves.
                        for c in self
                            .reg
                            .conns
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .iter()
                        {
                            if !Arc::ptr_eq(c, &self.info) && c.role.load(Ordering::Relaxed) == 2 {
                                c.role.store(3, Ordering::Relaxed);
                            }
                        }
                    }
                    if asked != 0 {
                        self.info.role.store(asked, Ordering::Relaxed);
                    }
                    let now = self.info.role.load(Ordering::Relaxed).max(1);
                    let reply_role = if nx { now - 1 } else { now };
                    Ok(vec![msg::encode_role_reply(
                        v,
                        xid,
                        reply_role,
                        generation_id,
                        nx,
                    )])
                }
            }
        };
        match res {
            Ok(v) => v,
            Err(e) => vec![self.err(e, &h, m)],
        }
    }

    /// A packet-out: translated and run by a PMD (see
    /// [`crate::packet_out`]).
    fn packet_out(&mut self, po: msg::PacketOut) -> Result<Vec<Vec<u8>>, OfError> {
        if po.buffer_id != u32::MAX {
            return Err(ofe::BRC_BUFFER_UNKNOWN);
        }
        self.flush();
        // A packet-out must see the flow changes made before it: publish
        // them first, unless its actions read no flow table, group or
        // port setting (a large change's rebuild then does not delay it).
        if !reads_no_table(&po.actions) || self.reg.ports_dirty.load(Ordering::SeqCst) {
            self.reg.publish_now(false);
        }
        let now_ms = self.sh.started.elapsed().as_millis() as u64;
        match crate::packet_out::run(&self.ctl, po.in_port, &po.data, po.actions, now_ms) {
            Ok(pins) => {
                self.reg.stats.packet_outs.fetch_add(1, Ordering::Relaxed);
                Ok(self.packet_ins(&pins))
            }
            Err(crate::packet_out::PacketOutError::BadPacket) => Err(ofe::BRC_BAD_PACKET),
            Err(crate::packet_out::PacketOutError::BadActions(_)) => Err(ofe::BAC_BAD_ARGUMENT),
            Err(crate::packet_out::PacketOutError::Busy) => Err(ofe::BRC_EPERM),
        }
    }

    /// Packet-ins a packet-out caused, handed to the connections that
    /// take them; this connection's come back, to go out after the
    /// answers before them.
    fn packet_ins(&self, pins: &[flowpath_datapath::execute::PacketIn]) -> Vec<Vec<u8>> {
        pins.iter()
            .filter_map(|p| self.reg.packet_in(p, Some(&self.info)))
            .collect()
    }

    /// `NXT_RESUME`: the paused translation goes on from its
    /// continuation (one of this switch's: else `NXR_STALE`).
    fn resume(&mut self, res: msg::Resume) -> Result<Vec<Vec<u8>>, OfError> {
        if res.bridge != self.reg.bridge_uuid {
            return Err(ofe::NXR_STALE);
        }
        self.flush();
        self.reg.publish_now(false);
        let now_ms = self.sh.started.elapsed().as_millis() as u64;
        match crate::packet_out::resume(&self.ctl, &res.packet, res.state, now_ms) {
            Ok(pins) => {
                self.reg.stats.packet_outs.fetch_add(1, Ordering::Relaxed);
                Ok(self.packet_ins(&pins))
            }
            Err(crate::packet_out::PacketOutError::BadPacket) => Err(ofe::BRC_BAD_PACKET),
            Err(crate::packet_out::PacketOutError::BadActions(_)) => Err(ofe::BAC_BAD_ARGUMENT),
            Err(crate::packet_out::PacketOutError::Busy) => Err(ofe::BRC_EPERM),
        }
    }

    fn dpid(&self) -> u64 {
        self.reg.dpid.load(Ordering::Relaxed)
    }

    fn ports(&self) -> Vec<msg::PortInfo> {
        let st = self.ctl.state();
        let mut v: Vec<msg::PortInfo> = self
            .sh
            .ports()
            .iter()
            .map(|p| msg::PortInfo {
                no: p.port_no,
                name: crate::ports::openflow_name(&p.name),
                mac: [0x02, 0, 0, 0, (p.port_no >> 8) as u8, p.port_no as u8],
                // An administratively down port's link goes down.
                up: st.rules.port_config(p.port_no) & msg::PC_PORT_DOWN == 0,
                config: st.rules.port_config(p.port_no),
            })
            .collect();
        v.sort_by_key(|p| p.no);
        v
    }

    fn flow_mod(&mut self, fm: FlowMod, xid: u32) -> Result<(), OfError> {
        self.reg.stats.flow_mods.fetch_add(1, Ordering::Relaxed);
        let monitored = self.reg.monitored();
        let applied = flowmod::apply(&mut self.ctl.state().rules, &fm, monitored)?;
        self.after_changes(vec![applied], xid);
        Ok(())
    }

    /// What follows flow changes outside the rule list: learned flows
    /// deleted with the rules that match them, flow-removed messages and
    /// flow monitors, the publisher told.
    fn after_changes(&mut self, applied: Vec<flowmod::Applied>, xid: u32) {
        for a in &applied {
            if let Some(l) = &a.learned {
                let (sel, strict) = &**l;
                self.sh
                    .bridge
                    .learned
                    .remove_where(|r| sel.selects(r, *strict));
            }
        }
        self.reg.flow_events(Some((&self.info, xid)), &applied);
        self.pending = true;
    }

    /// A bundle control request: open, close, discard, or commit (all
    /// messages or none, published to the PMDs at once).
    fn bundle_control(
        &mut self,
        xid: u32,
        c: &msg::BundleControl,
    ) -> Result<Vec<Vec<u8>>, OfError> {
        let reply = msg::encode_bundle_reply(self.version, xid, c);
        let msgs = match self.bundles.control(c)? {
            flowmod::CtrlOutcome::Reply => return Ok(vec![reply]),
            flowmod::CtrlOutcome::Commit(msgs) => msgs,
        };
        let n = msgs
            .iter()
            .filter(|m| matches!(m.inner.request, Request::FlowMod(_)))
            .count();
        self.reg
            .stats
            .flow_mods
            .fetch_add(n as u64, Ordering::Relaxed);
        let ports = self.ports();
        let monitored = self.reg.monitored();
        let res = flowmod::commit(&mut self.ctl.state().rules, msgs, &ports, monitored);
        match res {
            Ok(done) => {
                self.reg
                    .stats
                    .bundle_commits
                    .fetch_add(1, Ordering::Relaxed);
                self.groups_deleted(&done.groups_deleted);
                self.after_changes(done.applied, xid);
                self.flush();
                for pm in done.port_mods {
                    self.port_mod(pm)?;
                }
                // The flows are in place: publish before running. The
                // packet-ins they cause for this connection go out before
                // the commit's answer.
                let mut out = Vec::new();
                for po in done.packet_outs {
                    out.extend(self.packet_out(po)?);
                }
                out.push(reply);
                Ok(out)
            }
            Err((e, raw)) => {
                let h = Header::read(&raw).unwrap_or(Header::new(self.version, 0, xid));
                let inner = self.err(e, &h, &raw);
                let _ = self.send(inner);
                Err(ofe::BFC_MSG_FAILED)
            }
        }
    }

    /// Calls `f` with the flows `req` selects — the installed ones with
    /// their counters, then the learned ones — in table order, highest
    /// priority first. The installed flows are lent, not copied (a dump of
    /// 100,000 flows copied each twice before): the rule state stays
    /// locked while `f` runs, so `f` only encodes.
    fn with_selected<R>(
        &self,
        req: &FlowStatsRequest,
        f: impl FnOnce(&[(&Rule, Option<&InstalledRule>)]) -> R,
    ) -> R {
        let sel = Sel::from_stats(req);
        // Learned flows first, so that no two locks are held at once.
        let learned: Vec<Rule> = self
            .sh
            .bridge
            .learned
            .flows()
            .into_iter()
            .filter(|r| sel.selects(r, false))
            .collect();
        let st = self.ctl.state();
        let mut rows: Vec<(&Rule, Option<&InstalledRule>)> = st
            .rules
            .rules()
            .iter()
            .filter(|r| sel.selects(&r.rule, false))
            .map(|r| (&r.rule, Some(r)))
            .collect();
        rows.extend(learned.iter().map(|r| (r, None)));
        rows.sort_by_key(|(r, _)| (r.table, std::cmp::Reverse(r.priority)));
        f(&rows)
    }

    fn flow_stats(&mut self, xid: u32, req: &FlowStatsRequest) -> Result<Vec<Vec<u8>>, OfError> {
        let v = self.version;
        let (stype, sub) = match req.dialect {
            Dialect::Nx => (msg::stats::VENDOR, Some(msg::stats::NXST_FLOW)),
            _ => (msg::stats::FLOW, None),
        };
        let mut out = msg::StatsReply::new(v, xid, stype, sub);
        let now = Instant::now();
        // Earlier answers go first; then each full message of a long dump
        // is handed to the connection's writer while the rest is encoded
        // (the client decodes as the switch encodes), never waiting for
        // it: with the writer's queue full, the rest waits for the end.
        if !self.send_batch() {
            return Ok(Vec::new());
        }
        let mut held = Vec::new();
        self.with_selected(req, |rows| {
            for (i, &(rule, inst)) in rows.iter().enumerate() {
                Self::flow_stats_row(&mut out, v, req.dialect, now, rule, inst);
                if i % 256 == 255 {
                    for m in out.take_full() {
                        if !held.is_empty() {
                            held.push(m);
                        } else if let Err(
                            std::sync::mpsc::TrySendError::Full(m)
                            | std::sync::mpsc::TrySendError::Disconnected(m),
                        ) = self.info.try_queue(m)
                        {
                            held.push(m);
                        }
                    }
                }
            }
        });
        held.extend(out.finish());
        Ok(held)
    }

    /// One flow's entry of a flow statistics reply.
    fn flow_stats_row(
        out: &mut msg::StatsReply,
        v: u8,
        dialect: Dialect,
        now: Instant,
        rule: &Rule,
        inst: Option<&InstalledRule>,
    ) {
        let c = match inst {
            Some(ir) => {
                let d = now.duration_since(ir.added);
                msg::FlowCounters {
                    duration_s: d.as_secs() as u32,
                    // Milliseconds, as Open vSwitch keeps them.
                    duration_ns: d.subsec_millis() * 1_000_000,
                    idle_age: now
                        .duration_since(ir.last_used.unwrap_or(ir.added))
                        .as_secs()
                        .min(65_534) as u16,
                    packets: ir.packets,
                    bytes: ir.bytes,
                }
            }
            None => msg::FlowCounters::default(),
        };
        // A flow the dialect cannot express (an OpenFlow 1.0 fixed
        // match with registers) is left out of this reply
        // (Open vSwitch sends a lossy form).
        if let Ok(e) = msg::flow_stats_entry(v, dialect, rule, &c) {
            out.push(&e);
        }
    }

    fn aggregate(&self, xid: u32, req: &FlowStatsRequest) -> Vec<Vec<u8>> {
        let (p, b, n) = self.with_selected(req, |rows| {
            let (mut p, mut b) = (0u64, 0u64);
            for ir in rows.iter().filter_map(|(_, ir)| *ir) {
                p += ir.packets;
                b += ir.bytes;
            }
            (p, b, rows.len())
        });
        let (stype, sub) = match req.dialect {
            Dialect::Nx => (msg::stats::VENDOR, Some(msg::stats::NXST_AGGREGATE)),
            _ => (msg::stats::AGGREGATE, None),
        };
        let mut out = msg::StatsReply::new(self.version, xid, stype, sub);
        out.push(&msg::aggregate_body(
            self.version,
            req.dialect,
            p,
            b,
            n as u32,
        ));
        out.finish()
    }

    fn port_stats(&self, xid: u32, port: u32) -> Vec<Vec<u8>> {
        let v = self.version;
        let mut out = msg::StatsReply::new(v, xid, msg::stats::PORT, None);
        let secs = self.sh.started.elapsed().as_secs() as u32;
        let tx = self.sh.tx();
        for p in self.ports() {
            if port != 0xffff_ffff && port != p.no {
                continue;
            }
            let q = tx.stats(p.no);
            let (txp, txb, txd) = (q.packets, q.bytes, q.dropped);
            out.push(&msg::port_stats_entry(
                v,
                &msg::PortCounters {
                    no: p.no,
                    tx_packets: txp,
                    tx_bytes: txb,
                    tx_dropped: txd,
                    duration_s: secs,
                    ..Default::default()
                },
            ));
        }
        out.finish()
    }

    fn table_stats(&self, xid: u32) -> Vec<Vec<u8>> {
        let v = self.version;
        let mut counts = [0u32; 255];
        for r in self.ctl.state().rules.rules() {
            counts[usize::from(r.rule.table)] += 1;
        }
        let mut out = msg::StatsReply::new(v, xid, msg::stats::TABLE, None);
        // Tables 0-253 (254 is Open vSwitch's hidden internal table).
        let n = 254;
        for (t, c) in counts.iter().enumerate().take(n) {
            out.push(&msg::table_stats_entry(v, t as u8, *c, 0, 0));
        }
        out.finish()
    }
}

/// Whether a packet-out's actions translate without a flow table, a group
/// or a port's NORMAL/VLAN setting: outputs to ports (not `TABLE`), to the
/// controller, field writes and VLAN/MPLS pushes and pops, notes. Port
/// configuration (PORT_MOD's no-forward, no-flood) is read by outputs;
/// the caller checks that none is pending.
pub(super) fn reads_no_table(actions: &[flowpath_ofproto::action::Action]) -> bool {
    use flowpath_ofproto::action::Action as A;
    actions.iter().all(|a| match *a {
        A::Output(p) => p != u32::from(flowpath_openflow::port::OFPP_TABLE),
        A::Note(_)
        | A::InPort
        | A::All
        | A::Flood
        | A::Controller { .. }
        | A::SetField { .. }
        | A::PushVlan(_)
        | A::PopVlan
        | A::ModVlanVid(_)
        | A::ModVlanPcp(_)
        | A::Load { .. }
        | A::Move { .. }
        | A::DecTtl
        | A::PushMpls(_)
        | A::PopMpls(_)
        | A::SetMplsLabel(_)
        | A::SetMplsTc(_)
        | A::SetMplsTtl(_)
        | A::DecMplsTtl => true,
        _ => false,
    })
}
