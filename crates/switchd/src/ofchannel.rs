//! The OpenFlow channel: `ovs-ofctl` and controllers program the switch
//! over OpenFlow 1.0, 1.3, 1.4 or 1.5 with Open vSwitch's Nicira
//! extensions.
//!
//! What: listeners (`punix:PATH`, `ptcp:PORT[:IP]`; the bridge's
//! `NAME.mgmt` socket in the run directory always) accept connections;
//! each connection has its own thread, which negotiates the version
//! (HELLO with a version bitmap), answers requests and applies flow
//! changes. A message it cannot honour is answered with the OpenFlow
//! error Open vSwitch sends; the connection stays up.
//!
//! Rule changes go through the same path as `add-flow` on the control
//! socket: the rule list is changed under the control lock, published to
//! every PMD, and one revalidator round removes the megaflows it affects.
//! Changes arriving back to back (`ovs-ofctl add-flows` of a big file) are
//! applied to the list one by one and published once, when the
//! connection has no more input waiting, or before a BARRIER reply or a
//! statistics reply: so a BARRIER reply means every earlier change is in
//! effect in the datapath.
//!
//! Threads: one accept thread per listener and one thread per
//! connection; none touches a PMD but through the control path.

use crate::control::Control;
use crate::rules::InstalledRule;
use crate::shared::Shared;
use flowpath_ofproto::action::Action;
use flowpath_ofproto::rule::{flags, Rule};
use flowpath_ofproto::tables::FragMode;
use flowpath_openflow::error::{self as ofe, OfError};
use flowpath_openflow::header::{self as ofh, Header, MsgType, OFP10};
use flowpath_openflow::msg::{
    self, Command, ConnState, Dialect, FlowMod, FlowStatsRequest, Request,
};
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often blocked threads look at the stop flag.
const POLL: Duration = Duration::from_millis(100);
/// Largest OpenFlow message (the length field is 16 bits).
const MAX_MSG: usize = 65_535;

/// A listener spec: `punix:PATH` or `ptcp:PORT[:IP]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListenSpec {
    /// A Unix socket path.
    Unix(PathBuf),
    /// A TCP port and address.
    Tcp(String),
}

impl ListenSpec {
    /// Parses `punix:PATH` / `ptcp:PORT[:IP]` (as `ovs-vswitchd`).
    pub fn parse(s: &str) -> Result<ListenSpec, String> {
        if let Some(p) = s.strip_prefix("punix:") {
            if p.is_empty() {
                return Err(format!("'{s}': punix: needs a path"));
            }
            return Ok(ListenSpec::Unix(PathBuf::from(p)));
        }
        if let Some(rest) = s.strip_prefix("ptcp:") {
            let (port, ip) = match rest.split_once(':') {
                Some((p, ip)) => (p, ip),
                None => (rest, "0.0.0.0"),
            };
            let port: u16 = port
                .parse()
                .map_err(|_| format!("'{s}': '{port}' is not a TCP port"))?;
            let addr = if ip.contains(':') {
                format!("[{ip}]:{port}")
            } else {
                format!("{ip}:{port}")
            };
            return Ok(ListenSpec::Tcp(addr));
        }
        Err(format!(
            "'{s}': expected punix:PATH or ptcp:PORT[:IP] (ssl is not supported yet)"
        ))
    }
}

/// Channel counters (`coverage/show`-like).
#[derive(Debug, Default)]
pub struct ChannelStats {
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Messages received.
    pub rx_msgs: AtomicU64,
    /// Messages sent.
    pub tx_msgs: AtomicU64,
    /// Errors sent.
    pub errors: AtomicU64,
    /// Flow mods applied.
    pub flow_mods: AtomicU64,
}

/// The running listeners.
pub struct OfServer {
    threads: Vec<JoinHandle<()>>,
    /// Unix sockets made, with their inode (removed at shutdown only if
    /// still ours: a new switch may have taken the path over).
    unix_paths: Vec<(PathBuf, u64)>,
    /// Counters.
    pub stats: Arc<ChannelStats>,
}

impl OfServer {
    /// Binds every listener and starts accepting.
    pub fn start(sh: Arc<Shared>, specs: &[ListenSpec]) -> Result<OfServer, String> {
        let stats = Arc::new(ChannelStats::default());
        let mut me = OfServer {
            threads: Vec::new(),
            unix_paths: Vec::new(),
            stats: stats.clone(),
        };
        for spec in specs {
            let sh = sh.clone();
            let stats = stats.clone();
            match spec {
                ListenSpec::Unix(p) => {
                    if p.exists() {
                        // A stale socket of an earlier run (a live one
                        // would answer): replace it.
                        if UnixStream::connect(p).is_ok() {
                            return Err(format!(
                                "{}: another switch is listening there",
                                p.display()
                            ));
                        }
                        let _ = std::fs::remove_file(p);
                    }
                    let l = UnixListener::bind(p).map_err(|e| format!("{}: {e}", p.display()))?;
                    l.set_nonblocking(true).map_err(|e| e.to_string())?;
                    let ino =
                        std::fs::metadata(p).map_or(0, |m| std::os::unix::fs::MetadataExt::ino(&m));
                    me.unix_paths.push((p.clone(), ino));
                    me.threads.push(spawn("of-accept", move || {
                        accept_loop(&sh, &stats, || l.accept().map(|(s, _)| Conn::Unix(s)))
                    })?);
                }
                ListenSpec::Tcp(a) => {
                    let l = TcpListener::bind(a).map_err(|e| format!("ptcp {a}: {e}"))?;
                    l.set_nonblocking(true).map_err(|e| e.to_string())?;
                    me.threads.push(spawn("of-accept", move || {
                        accept_loop(&sh, &stats, || l.accept().map(|(s, _)| Conn::Tcp(s)))
                    })?);
                }
            }
        }
        Ok(me)
    }

    /// Waits for the threads (the switch's stop flag must be set) and
    /// removes the Unix sockets.
    pub fn shutdown(mut self) {
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        for (p, ino) in &self.unix_paths {
            let same =
                std::fs::metadata(p).is_ok_and(|m| std::os::unix::fs::MetadataExt::ino(&m) == *ino);
            if same {
                let _ = std::fs::remove_file(p);
            }
        }
    }
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>, String> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map_err(|e| format!("cannot start a thread: {e}"))
}

enum Conn {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Conn {
    fn prepare(&self) -> std::io::Result<()> {
        match self {
            Conn::Unix(s) => {
                s.set_nonblocking(false)?;
                s.set_read_timeout(Some(POLL))?;
                s.set_write_timeout(Some(Duration::from_secs(10)))
            }
            Conn::Tcp(s) => {
                s.set_nonblocking(false)?;
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(POLL))?;
                s.set_write_timeout(Some(Duration::from_secs(10)))
            }
        }
    }
}

impl Read for Conn {
    fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Unix(s) => s.read(b),
            Conn::Tcp(s) => s.read(b),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        match self {
            Conn::Unix(s) => s.write(b),
            Conn::Tcp(s) => s.write(b),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn accept_loop(
    sh: &Arc<Shared>,
    stats: &Arc<ChannelStats>,
    accept: impl Fn() -> std::io::Result<Conn>,
) {
    let mut workers: Vec<JoinHandle<()>> = Vec::new();
    while !sh.stop.load(Ordering::Relaxed) {
        match accept() {
            Ok(c) => {
                stats.connections.fetch_add(1, Ordering::Relaxed);
                let sh = sh.clone();
                let st = stats.clone();
                if let Ok(h) = spawn("of-conn", move || {
                    if c.prepare().is_ok() {
                        Session::new(sh, st).run(c);
                    }
                }) {
                    workers.push(h);
                }
                workers.retain(|h| !h.is_finished());
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(POLL / 2),
            Err(_) => std::thread::sleep(POLL),
        }
    }
    for h in workers {
        let _ = h.join();
    }
}

/// One connection's state.
struct Session {
    sh: Arc<Shared>,
    ctl: Control,
    stats: Arc<ChannelStats>,
    version: u8,
    st: ConnState,
    miss_send_len: u16,
    pending: bool,
    role: u32,
}

impl Session {
    fn new(sh: Arc<Shared>, stats: Arc<ChannelStats>) -> Session {
        Session {
            ctl: Control::new(sh.clone()),
            sh,
            stats,
            version: 0,
            st: ConnState::default(),
            miss_send_len: 128,
            pending: false,
            role: 0,
        }
    }

    fn run(mut self, mut c: Conn) {
        if c.write_all(&msg::encode_hello(ofh::OFP15)).is_err() {
            return;
        }
        let mut buf: Vec<u8> = Vec::with_capacity(1 << 16);
        let mut chunk = vec![0u8; 1 << 16];
        loop {
            if self.sh.stop.load(Ordering::Relaxed) {
                return;
            }
            match c.read(&mut chunk) {
                Ok(0) => {
                    self.flush();
                    return;
                }
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    self.flush();
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
                    let _ = c.write_all(&ofe::BRC_BAD_LEN_E.encode(
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
                self.stats.rx_msgs.fetch_add(1, Ordering::Relaxed);
                let more = buf.len() - used >= ofh::HEADER_LEN;
                let out = self.handle(&m, more);
                for o in out {
                    self.stats.tx_msgs.fetch_add(1, Ordering::Relaxed);
                    if c.write_all(&o).is_err() {
                        return;
                    }
                }
                if self.version == 0xff {
                    return;
                }
            }
            buf.drain(..used);
            if buf.len() > 2 * MAX_MSG {
                return;
            }
        }
    }

    fn err(&self, e: OfError, h: &Header, m: &[u8]) -> Vec<u8> {
        self.stats.errors.fetch_add(1, Ordering::Relaxed);
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

    /// Publishes pending rule changes (one revalidator round).
    fn flush(&mut self) {
        if !self.pending {
            return;
        }
        self.pending = false;
        let n = {
            let st = self.ctl.state();
            if self.ctl.publish(&st).is_err() {
                return;
            }
            st.rules.rules().len()
        };
        let _ = self.ctl.finish_rule_change(String::new(), n);
    }

    fn handle(&mut self, m: &[u8], more: bool) -> Vec<Vec<u8>> {
        let h = match Header::read(m) {
            Ok(h) => h,
            Err(e) => return vec![e.encode(self.version.max(1), 0, m)],
        };
        let d = match msg::decode(m, self.st) {
            Ok(d) => d,
            Err(e) => return vec![self.err(e, &h, m)],
        };
        if let Request::Hello { versions } = d.request {
            return match msg::negotiate(h.version, versions) {
                Some(v) => {
                    self.version = v;
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
                    self.miss_send_len,
                )])
            }
            Request::SetConfig {
                flags,
                miss_send_len,
            } => {
                self.miss_send_len = miss_send_len;
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
                if (self.role == 3 && v != OFP10) || (self.role == 2 && v == OFP10) {
                    Err(ofe::BRC_IS_SECONDARY)
                } else {
                    let r = self.flow_mod(fm);
                    if !more {
                        self.flush();
                    }
                    r.map(|_| Vec::new())
                }
            }
            Request::PacketOut(_) => Err(ofe::BRC_EPERM),
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
            Request::GroupStats => {
                Ok(msg::StatsReply::new(v, xid, msg::stats::GROUP, None).finish())
            }
            Request::GroupDesc => {
                Ok(msg::StatsReply::new(v, xid, msg::stats::GROUP_DESC, None).finish())
            }
            Request::GroupFeatures | Request::MeterStats => Err(ofe::BRC_BAD_STAT),
            Request::SetFlowFormat(f) => {
                if f == 0 || f == 2 {
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
                if f == 0 {
                    Ok(Vec::new())
                } else {
                    Err(ofe::BRC_EPERM)
                }
            }
            Request::SetControllerId(_) | Request::SetAsync => Ok(Vec::new()),
            Request::TlvTableRequest => Ok(vec![msg::encode_tlv_table_reply(v, xid)]),
            Request::RoleRequest {
                role,
                generation_id,
                nx,
            } => {
                let max = if nx { 2 } else { 3 };
                if role > max {
                    Err(ofe::RRFC_BAD_ROLE)
                } else {
                    // flowpath has one controller class: every connection
                    // is equal (OVS's "other") unless it asks otherwise.
                    if role != 0 || nx {
                        self.role = role;
                    }
                    let reply_role = if nx {
                        self.role
                    } else if self.role == 0 {
                        1
                    } else {
                        self.role
                    };
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

    fn dpid(&self) -> u64 {
        0x0000_0000_0000_0001
    }

    fn ports(&self) -> Vec<msg::PortInfo> {
        let mut v: Vec<msg::PortInfo> = self
            .sh
            .ports
            .iter()
            .map(|p| msg::PortInfo {
                no: p.port_no,
                name: p.name.clone(),
                mac: [0x02, 0, 0, 0, (p.port_no >> 8) as u8, p.port_no as u8],
                up: true,
            })
            .collect();
        v.sort_by_key(|p| p.no);
        v
    }

    fn flow_mod(&mut self, fm: FlowMod) -> Result<(), OfError> {
        self.stats.flow_mods.fetch_add(1, Ordering::Relaxed);
        if fm.buffer_id != u32::MAX {
            return Err(ofe::BRC_BUFFER_UNKNOWN);
        }
        let needs_rule = matches!(
            fm.command,
            Command::Add | Command::Modify | Command::ModifyStrict
        );
        let rule = if needs_rule {
            validate(&fm.rule)?
        } else {
            fm.rule.clone()
        };
        let mut st = self.ctl.state();
        if needs_rule {
            st.rules
                .check_groups(std::slice::from_ref(&rule))
                .map_err(|_| ofe::BAC_BAD_OUT_GROUP)?;
        }
        let sel = Sel::from_flow_mod(&fm);
        match fm.command {
            Command::Add => {
                if rule.flags & flags::CHECK_OVERLAP != 0
                    && st.rules.rules().iter().any(|r| overlaps(&r.rule, &rule))
                {
                    return Err(ofe::FMFC_OVERLAP);
                }
                st.rules.add(vec![rule]);
            }
            Command::Modify | Command::ModifyStrict => {
                let strict = fm.command == Command::ModifyStrict;
                let reset = rule.flags & flags::RESET_COUNTS != 0;
                let n =
                    st.rules
                        .modify_where(|r| sel.selects(r, strict), &rule, reset, fm.new_cookie);
                if n == 0 && fm.cookie_mask == 0 && fm.new_cookie.is_some() {
                    st.rules.add(vec![rule]);
                }
            }
            Command::Delete | Command::DeleteStrict => {
                let strict = fm.command == Command::DeleteStrict;
                st.rules.delete_where(|r| sel.selects(r, strict));
                drop(st);
                self.sh
                    .bridge
                    .learned
                    .remove_where(|r| sel.selects(r, strict));
            }
        }
        self.pending = true;
        Ok(())
    }

    fn selected(&self, req: &FlowStatsRequest) -> Vec<(Rule, Option<InstalledRule>)> {
        let sel = Sel::from_stats(req);
        let st = self.ctl.state();
        let mut rows: Vec<(Rule, Option<InstalledRule>)> = st
            .rules
            .rules()
            .iter()
            .filter(|r| sel.selects(&r.rule, false))
            .map(|r| (r.rule.clone(), Some(r.clone())))
            .collect();
        drop(st);
        rows.extend(
            self.sh
                .bridge
                .learned
                .flows()
                .into_iter()
                .filter(|r| sel.selects(r, false))
                .map(|r| (r, None)),
        );
        rows.sort_by_key(|(r, _)| (r.table, std::cmp::Reverse(r.priority)));
        rows
    }

    fn flow_stats(&self, xid: u32, req: &FlowStatsRequest) -> Result<Vec<Vec<u8>>, OfError> {
        let v = self.version;
        let (stype, sub) = match req.dialect {
            Dialect::Nx => (msg::stats::VENDOR, Some(msg::stats::NXST_FLOW)),
            _ => (msg::stats::FLOW, None),
        };
        let mut out = msg::StatsReply::new(v, xid, stype, sub);
        let now = Instant::now();
        for (rule, inst) in self.selected(req) {
            let c = match &inst {
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
            // match with registers, learn(...)) is left out of this reply
            // (Open vSwitch sends a lossy form).
            if let Ok(e) = msg::flow_stats_entry(v, req.dialect, &rule, &c) {
                out.push(&e);
            }
        }
        Ok(out.finish())
    }

    fn aggregate(&self, xid: u32, req: &FlowStatsRequest) -> Vec<Vec<u8>> {
        let rows = self.selected(req);
        let (mut p, mut b) = (0u64, 0u64);
        for (_, ir) in &rows {
            if let Some(ir) = ir {
                p += ir.packets;
                b += ir.bytes;
            }
        }
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
            rows.len() as u32,
        ));
        out.finish()
    }

    fn port_stats(&self, xid: u32, port: u32) -> Vec<Vec<u8>> {
        let v = self.version;
        let mut out = msg::StatsReply::new(v, xid, msg::stats::PORT, None);
        let secs = self.sh.started.elapsed().as_secs() as u32;
        for p in self.ports() {
            if port != 0xffff_ffff && port != p.no {
                continue;
            }
            let q = self.sh.tx.stats(p.no);
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

/// Reads a decoded flow back through the rule parser: the same checks as
/// a flow from a file (prerequisites of `set_field`, tables of
/// `goto_table`, ...), and the canonical form.
fn validate(rule: &Rule) -> Result<Rule, OfError> {
    let text = rule.to_string();
    flowpath_ofproto::parse::parse_rule(&text).map_err(|e| {
        let m = e.to_string();
        if m.contains("requires") {
            ofe::BAC_MATCH_INCONSISTENT
        } else if m.contains("goto_table") || m.contains("table") {
            ofe::BIC_BAD_TABLE_ID
        } else {
            ofe::BAC_BAD_ARGUMENT
        }
    })
}

/// Which flows a modify, delete or statistics request selects.
struct Sel {
    table: Option<u8>,
    rule: Rule,
    cookie: u64,
    cookie_mask: u64,
    out_port: Option<u32>,
    out_group: Option<u32>,
}

impl Sel {
    fn from_flow_mod(fm: &FlowMod) -> Sel {
        Sel {
            table: fm.table,
            rule: fm.rule.clone(),
            cookie: fm.cookie,
            cookie_mask: fm.cookie_mask,
            out_port: fm.out_port,
            out_group: fm.out_group,
        }
    }

    fn from_stats(req: &FlowStatsRequest) -> Sel {
        Sel {
            table: req.table,
            rule: Rule::new(req.matching, Vec::new()),
            cookie: req.cookie,
            cookie_mask: req.cookie_mask,
            out_port: req.out_port,
            out_group: req.out_group,
        }
    }

    fn selects(&self, r: &Rule, strict: bool) -> bool {
        if self.table.is_some_and(|t| t != r.table) {
            return false;
        }
        if (r.cookie ^ self.cookie) & self.cookie_mask != 0 {
            return false;
        }
        let m = &self.rule.matching;
        let rm = &r.matching;
        let covers = if strict {
            rm == m && r.priority == self.rule.priority
        } else {
            m.mask.is_subset_of(&rm.mask)
                && rm.key.eq_masked(&m.key, &m.mask)
                && regs_subset(&m.regs_mask, &rm.regs_mask)
                && regs_eq(&rm.regs, &m.regs, &m.regs_mask)
        };
        if !covers {
            return false;
        }
        if let Some(p) = self.out_port {
            if !outputs_to(r, p) {
                return false;
            }
        }
        if let Some(g) = self.out_group {
            let all = r.actions.iter().chain(&r.write_actions);
            if !all.clone().any(|a| *a == Action::Group(g)) {
                return false;
            }
        }
        true
    }
}

fn regs_subset(a: &flowpath_flow::key::Regs, b: &flowpath_flow::key::Regs) -> bool {
    a.w.iter().zip(&b.w).all(|(x, y)| x & !y == 0)
}

fn regs_eq(
    a: &flowpath_flow::key::Regs,
    b: &flowpath_flow::key::Regs,
    m: &flowpath_flow::key::Regs,
) -> bool {
    a.w.iter()
        .zip(&b.w)
        .zip(&m.w)
        .all(|((x, y), k)| (x ^ y) & k == 0)
}

/// Whether `r` outputs to OpenFlow 1.0 port `p` (OVS's out_port filter).
fn outputs_to(r: &Rule, p: u32) -> bool {
    r.actions.iter().chain(&r.write_actions).any(|a| match *a {
        Action::Output(x) => x == p,
        Action::OutputTrunc { port, .. } => port == p,
        Action::Enqueue { port, .. } => port == p,
        Action::InPort => p == 0xfff8,
        Action::Normal => p == 0xfffa,
        Action::Flood => p == 0xfffb,
        Action::All => p == 0xfffc,
        Action::Controller { .. } => p == 0xfffd,
        _ => false,
    })
}

/// Two flows of one table and priority that some packet matches both.
fn overlaps(a: &Rule, b: &Rule) -> bool {
    if a.table != b.table || a.priority != b.priority {
        return false;
    }
    let (x, y) = (&a.matching, &b.matching);
    let common = x.mask.intersect(&y.mask);
    let regs_ok = x
        .regs
        .w
        .iter()
        .zip(&y.regs.w)
        .zip(x.regs_mask.w.iter().zip(&y.regs_mask.w))
        .all(|((p, q), (m, n))| (p ^ q) & m & n == 0);
    x.key.eq_masked(&y.key, &common) && regs_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_specs_parse() {
        assert_eq!(
            ListenSpec::parse("ptcp:6653").unwrap(),
            ListenSpec::Tcp("0.0.0.0:6653".into())
        );
        assert_eq!(
            ListenSpec::parse("ptcp:6653:127.0.0.1").unwrap(),
            ListenSpec::Tcp("127.0.0.1:6653".into())
        );
        assert_eq!(
            ListenSpec::parse("punix:/tmp/x.sock").unwrap(),
            ListenSpec::Unix("/tmp/x.sock".into())
        );
        assert!(ListenSpec::parse("tcp:1").is_err());
        assert!(ListenSpec::parse("ptcp:x").is_err());
    }

    #[test]
    fn selection_is_strict_or_covering() {
        let r =
            flowpath_ofproto::parse::parse_rule("priority=5,tcp,tp_dst=80,reg0=1,actions=output:2")
                .unwrap();
        let sel = |t: &str| Sel {
            table: None,
            rule: flowpath_ofproto::parse::parse_rule(t).unwrap(),
            cookie: 0,
            cookie_mask: 0,
            out_port: None,
            out_group: None,
        };
        assert!(sel("tcp,actions=drop").selects(&r, false));
        assert!(sel("reg0=1,actions=drop").selects(&r, false));
        assert!(!sel("reg0=2,actions=drop").selects(&r, false));
        assert!(!sel("tcp,actions=drop").selects(&r, true));
        assert!(sel("priority=5,tcp,tp_dst=80,reg0=1,actions=drop").selects(&r, true));
        let mut s = sel("actions=drop");
        s.out_port = Some(3);
        assert!(!s.selects(&r, false));
        s.out_port = Some(2);
        assert!(s.selects(&r, false));
        assert!(overlaps(
            &r,
            &flowpath_ofproto::parse::parse_rule("priority=5,ip,actions=drop").unwrap()
        ));
        assert!(!overlaps(
            &r,
            &flowpath_ofproto::parse::parse_rule("priority=5,udp,actions=drop").unwrap()
        ));
    }
}
