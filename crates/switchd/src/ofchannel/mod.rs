//! The OpenFlow channel: `ovs-ofctl` and controllers program the switch
//! over OpenFlow 1.0, 1.3, 1.4 or 1.5 with Open vSwitch's Nicira
//! extensions.
//!
//! What: listeners (`punix:PATH`, `ptcp:PORT[:IP]`; the bridge's
//! `NAME.mgmt` socket beside the control socket always) accept "service"
//! connections; `--controller tcp:IP:PORT` / `unix:PATH` targets are
//! connected to (and reconnected with back-off) as "primary" connections.
//! Each connection has a reader thread (the `session` module), which negotiates
//! the version (HELLO with a version bitmap), answers requests and
//! applies flow changes, and a writer thread fed by a bounded queue. A
//! message it cannot honour is answered with the OpenFlow error Open
//! vSwitch sends; the connection stays up.
//!
//! Rule changes: the rule list is changed under the control lock (so
//! replies and dumps see it at once: a BARRIER reply means the flow table
//! has every earlier change, as in Open vSwitch); a publisher thread
//! builds the PMDs' tables from a snapshot, outside the lock, 2 ms after
//! the last change or, in a stream, 20 ms after its first (longer for a
//! large table: at least 4 times the last rebuild), installs them and
//! starts a revalidator round. `ovs-ofctl add-flows` sends a barrier after
//! every flow: publishing (a rebuild of the tables) per barrier would make
//! 100,000 flows quadratic.
//!
//! Packet-ins: a PMD's controller action puts the packet on a bounded
//! queue (full: dropped and counted, the PMD never waits); the
//! dispatcher thread takes them at the controller rate limit (a token
//! bucket, OVS's `controller-rate-limit` and `controller-burst-limit`)
//! and hands each to the connections that take packet-ins (primary
//! connections, and service ones that asked with SET_CONFIG), each
//! through its own bounded queue: a controller that stops reading loses
//! its packet-ins (counted), nobody else's.
//!
//! Fail mode: with `--controller` targets and `--fail-mode standalone`,
//! while no primary connection is up the bridge forwards as `NORMAL`
//! (Open vSwitch's fail-open); with `secure` (the default) its flows
//! stay as they are.
//!
//! Threads: accept, connect, reader, writer and dispatcher threads; none
//! touches a PMD but through the control path.

mod conn;
mod flowmod;
mod notify;
mod packet_in;
mod select;
mod session;
mod targets;
mod tls;

use crate::control::Control;
pub use crate::shared::ChannelStats;
use crate::shared::Shared;
pub(crate) use conn::Conn;
use flowpath_datapath::execute::PacketIn;
use flowpath_openflow::header::OFP12;
use flowpath_openflow::msg;
use session::Session;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpListener;
use std::os::unix::io::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
pub use tls::TlsFiles;
use tls::{TlsConn, TlsContext};

/// How often blocked threads look at the stop flag.
const POLL: Duration = Duration::from_millis(100);
/// Largest OpenFlow message (the length field is 16 bits).
const MAX_MSG: usize = 65_535;
/// Messages waiting for one connection's writer.
const OUT_QUEUE: usize = 512;
/// Packets waiting for the dispatcher (all PMDs together).
pub const PACKET_IN_QUEUE: usize = 1024;

/// A listener spec: `punix:PATH` or `ptcp:PORT[:IP]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListenSpec {
    /// A Unix socket path.
    Unix(PathBuf),
    /// A TCP port and address.
    Tcp(String),
    /// A TCP port and address, TLS (`pssl:`).
    Ssl(String),
}

impl ListenSpec {
    /// Parses `punix:PATH` / `ptcp:PORT[:IP]` / `pssl:PORT[:IP]` (as
    /// `ovs-vswitchd`).
    pub fn parse(s: &str) -> Result<ListenSpec, String> {
        if let Some(rest) = s.strip_prefix("pssl:") {
            return match ListenSpec::parse(&format!("ptcp:{rest}")) {
                Ok(ListenSpec::Tcp(a)) => Ok(ListenSpec::Ssl(a)),
                _ => Err(format!("'{s}': expected pssl:PORT[:IP]")),
            };
        }
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
            "'{s}': expected punix:PATH, ptcp:PORT[:IP] or pssl:PORT[:IP]"
        ))
    }
}

/// An active controller target: `tcp:IP:PORT` or `unix:PATH`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ControllerSpec {
    /// TCP address (`IP:PORT`).
    Tcp(String),
    /// Unix socket path.
    Unix(PathBuf),
    /// TLS over TCP (`IP:PORT`).
    Ssl(String),
}

impl std::fmt::Display for ControllerSpec {
    /// As `ovs-vsctl` writes a target: `tcp:IP:PORT`, `ssl:IP:PORT`,
    /// `unix:PATH`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ControllerSpec::Tcp(a) => write!(f, "tcp:{a}"),
            ControllerSpec::Ssl(a) => write!(f, "ssl:{a}"),
            ControllerSpec::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

impl ControllerSpec {
    /// Parses `tcp:IP:PORT` / `ssl:IP:PORT` / `unix:PATH` (as `ovs-vsctl
    /// set-controller`; the port defaults to 6653).
    pub fn parse(s: &str) -> Result<ControllerSpec, String> {
        if let Some(rest) = s.strip_prefix("ssl:") {
            return match ControllerSpec::parse(&format!("tcp:{rest}")) {
                Ok(ControllerSpec::Tcp(a)) => Ok(ControllerSpec::Ssl(a)),
                Err(e) => Err(e.replacen("tcp:", "ssl:", 1)),
                Ok(_) => Err(format!("'{s}': expected ssl:IP[:PORT]")),
            };
        }
        if let Some(p) = s.strip_prefix("unix:") {
            if p.is_empty() {
                return Err(format!("'{s}': unix: needs a path"));
            }
            return Ok(ControllerSpec::Unix(PathBuf::from(p)));
        }
        if let Some(rest) = s.strip_prefix("tcp:") {
            let (ip, port) = match rest.rsplit_once(':') {
                Some((ip, p)) if !ip.is_empty() => (ip, p),
                _ => (rest, "6653"),
            };
            let port: u16 = port
                .parse()
                .map_err(|_| format!("'{s}': '{port}' is not a TCP port"))?;
            let ip: std::net::IpAddr = ip
                .trim_matches(|c| c == '[' || c == ']')
                .parse()
                .map_err(|_| format!("'{s}': '{ip}' is not an IP address"))?;
            return Ok(ControllerSpec::Tcp(
                std::net::SocketAddr::new(ip, port).to_string(),
            ));
        }
        Err(format!(
            "'{s}': expected tcp:IP[:PORT], ssl:IP[:PORT] or unix:PATH"
        ))
    }
}

/// How the channel runs: listeners, controllers, fail mode, limits.
#[derive(Clone, Debug)]
pub struct ChannelConfig {
    /// The bridge's name (`ofproto/list`).
    pub bridge: String,
    /// Listeners (service connections).
    pub listen: Vec<ListenSpec>,
    /// Controllers to connect to (primary connections).
    pub controllers: Vec<ControllerSpec>,
    /// `standalone`: forward as NORMAL while no controller is connected.
    pub fail_standalone: bool,
    /// Packet-ins per second (OVS's `controller-rate-limit`).
    pub rate_limit: u32,
    /// Packet-ins sent at once after a quiet spell
    /// (`controller-burst-limit`).
    pub burst_limit: u32,
    /// Most seconds between reconnection attempts (OVS's
    /// `max_backoff`, 8 s by default).
    pub max_backoff_s: u64,
    /// Seconds of silence before an echo request, twice that before a
    /// primary connection is dropped (OVS's `inactivity_probe`, 5 s).
    pub probe_s: u64,
    /// The bridge's snoop socket (`NAME.snoop`): a connection there
    /// gets a copy of every message to and from the controllers
    /// (`ovs-ofctl snoop`).
    pub snoop: Option<PathBuf>,
    /// Key, certificate and CA certificate for `ssl:` and `pssl:`.
    pub tls: TlsFiles,
}

impl Default for ChannelConfig {
    fn default() -> Self {
        ChannelConfig {
            bridge: "br0".into(),
            listen: Vec::new(),
            controllers: Vec::new(),
            fail_standalone: false,
            rate_limit: 1000,
            burst_limit: 250,
            max_backoff_s: 8,
            probe_s: 5,
            snoop: None,
            tls: TlsFiles::default(),
        }
    }
}

/// One connection as the dispatcher and the fail mode see it.
pub(crate) struct ConnInfo {
    /// Negotiated version (0 before HELLO).
    pub version: AtomicU8,
    /// A primary (`--controller`) connection.
    pub primary: bool,
    /// Takes packet-ins (primary, or a service connection after
    /// SET_CONFIG).
    pub async_on: AtomicBool,
    /// SET_CONFIG's miss_send_len.
    pub miss_send_len: AtomicU32,
    /// NXT_SET_CONTROLLER_ID's id.
    pub controller_id: AtomicU32,
    /// Role: 0 equal/other, 2 master, 3 slave (OpenFlow 1.2+ numbers).
    pub role: AtomicU32,
    /// OpenFlow 1.0 with Nicira's flow format (`NXT_SET_FLOW_FORMAT`
    /// nxm): flow-removed messages as `NXT_FLOW_REMOVED`.
    pub nxm_format: AtomicBool,
    /// Its flow monitors.
    pub monitors: Mutex<Vec<msg::FlowMonitor>>,
    /// Packet-ins as `NXT_PACKET_IN2` (`NXT_SET_PACKET_IN_FORMAT`).
    pub pin2: AtomicBool,
    /// Seconds of silence (in ms) before an echo request, twice that
    /// before the connection is dropped; 0: never (a controller's
    /// `inactivity_probe`, changeable while connected).
    pub probe_ms: Arc<std::sync::atomic::AtomicU64>,
    /// Its writer's queue: use [`ConnInfo::try_queue`].
    out: SyncSender<Vec<u8>>,
    /// The socket's sending side (see [`ConnInfo::deliver`]).
    wire: Arc<Wire>,
}

/// A connection's sending side, shared by its writer thread and its own
/// thread.
struct Wire {
    conn: Mutex<Conn>,
    /// Messages queued for the writer and not yet written.
    queued: std::sync::atomic::AtomicUsize,
}

impl ConnInfo {
    /// Queues `m` for the writer without waiting (messages from other
    /// threads: packet-ins, monitors' updates, port status).
    pub(crate) fn try_queue(&self, m: Vec<u8>) -> Result<(), TrySendError<Vec<u8>>> {
        self.wire.queued.fetch_add(1, Ordering::SeqCst);
        let r = self.out.try_send(m);
        if r.is_err() {
            self.wire.queued.fetch_sub(1, Ordering::SeqCst);
        }
        r
    }

    /// Sends the connection's own answers: written at once by the
    /// calling thread when nothing is queued before them (a request and
    /// its answer cost no hand-off to another thread: `ovs-ofctl
    /// add-flows` waits for a barrier's answer after every flow), else
    /// queued behind what is. False when the connection is gone.
    pub(crate) fn deliver(&self, reg: &Registry, m: Vec<u8>) -> bool {
        {
            let mut w = self.wire.conn.lock().unwrap_or_else(|p| p.into_inner());
            if self.wire.queued.load(Ordering::SeqCst) == 0 {
                if self.primary {
                    reg.snoop(&m);
                }
                if w.write_all(&m).is_err() {
                    w.shutdown();
                    return false;
                }
                reg.stats.tx_msgs.fetch_add(1, Ordering::Relaxed);
                return true;
            }
        }
        self.wire.queued.fetch_add(1, Ordering::SeqCst);
        self.out.send(m).is_ok()
    }
}

/// The connections, the counters and the switch.
pub(crate) struct Registry {
    pub sh: Arc<Shared>,
    pub stats: Arc<ChannelStats>,
    pub conns: Mutex<Vec<Arc<ConnInfo>>>,
    pub cfg: ChannelConfig,
    /// This switch's bridge UUID (in continuations: a resume of another
    /// switch's, or of an earlier run's, is stale).
    pub bridge_uuid: [u8; 16],
    /// Flow changes not yet published to the PMDs, and when the first of
    /// them came.
    pub dirty: Mutex<Option<Instant>>,
    /// A port's configuration changed (PORT_MOD) and is not published
    /// yet: every packet-out publishes first.
    pub ports_dirty: AtomicBool,
    pub dirty_cv: Condvar,
    /// Snoop connections' queues.
    pub snoops: Mutex<Vec<(u64, SyncSender<Vec<u8>>)>>,
    /// The controllers connected to (see `targets`).
    pub targets: Mutex<Vec<targets::Target>>,
    /// `standalone` (changeable: OVSDB's `fail_mode`).
    pub fail_standalone: AtomicBool,
    /// The datapath id (FEATURES; OVSDB's `other_config:datapath-id`).
    pub dpid: std::sync::atomic::AtomicU64,
    /// The OpenFlow versions connections may use (bit V: version V;
    /// OVSDB's `Bridge.protocols`).
    pub versions: AtomicU32,
    /// Tables' TABLE_MOD settings (those changed from the default).
    pub table_cfg: Mutex<std::collections::BTreeMap<u8, msg::TableConfig>>,
    /// The packet-in rate limiter's bucket: tokens, and when it was last
    /// filled (set at the first packet-in).
    pin_bucket: Mutex<Option<(f64, Instant)>>,
}

impl Registry {
    /// Copies a message to or from a controller to the snoop connections
    /// (a full queue loses the copy).
    pub fn snoop(&self, m: &[u8]) {
        let snoops = self.snoops.lock().unwrap_or_else(|p| p.into_inner());
        for (_, s) in snoops.iter() {
            let _ = s.try_send(m.to_vec());
        }
    }

    /// Flow changes were made: the publisher publishes them shortly.
    pub fn mark_dirty(&self) {
        let mut d = self.dirty.lock().unwrap_or_else(|p| p.into_inner());
        if d.is_none() {
            *d = Some(Instant::now());
            self.dirty_cv.notify_one();
        }
    }

    /// Publishes pending flow changes now (a packet-out's translation
    /// must see them); with `wait`, also waits for a revalidator round.
    pub fn publish_now(&self, wait: bool) {
        let was = self.dirty.lock().unwrap_or_else(|p| p.into_inner()).take();
        if was.is_none() && !wait {
            return;
        }
        // Cleared before the rules are read: a change after it sets it
        // again.
        self.ports_dirty.store(false, Ordering::SeqCst);
        publish(&self.sh);
        if wait {
            let _ = self.sh.reval_wait();
        } else {
            let _ = self.sh.reval_kick();
        }
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<ConnInfo>>> {
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn add(&self, c: Arc<ConnInfo>) {
        self.lock().push(c);
    }

    pub fn remove(&self, c: &Arc<ConnInfo>) {
        self.lock().retain(|x| !Arc::ptr_eq(x, c));
        self.refresh();
    }

    /// Recomputes what depends on the connections: table misses go to the
    /// controllers while an OpenFlow 1.0-1.2 connection with controller
    /// id 0 is up (OVS's default), and fail-open is on while no primary
    /// connection is up (standalone with targets). Republishes on change.
    pub fn refresh(&self) {
        let (miss, primaries) = {
            let conns = self.lock();
            let miss = conns.iter().any(|c| {
                let v = c.version.load(Ordering::Relaxed);
                v != 0 && v <= OFP12 && c.controller_id.load(Ordering::Relaxed) == 0
            });
            let primaries = conns
                .iter()
                .filter(|c| c.primary && c.version.load(Ordering::Relaxed) != 0)
                .count();
            (miss, primaries)
        };
        let fail_open = self.fail_standalone.load(Ordering::Relaxed)
            && !self.targets().is_empty()
            && primaries == 0;
        let ctl = Control::new(self.sh.clone());
        let (changed, later) = {
            let mut st = ctl.state();
            let before = st.rules.version();
            let a = st.rules.set_miss_to_controller(miss);
            let b = std::mem::replace(&mut st.fail_open, fail_open) != fail_open;
            let prev = self.sh.published();
            let mut later = false;
            if a && !b && prev.version == before {
                // Only the (shared) miss flag changed: the published
                // tables stay, under a new version so that the revalidator
                // translates every megaflow again. No rebuild (a service
                // connection such as `ovs-ofctl` comes and goes).
                let _ = ctl.install(crate::rules::Published {
                    version: st.rules.version(),
                    ..prev
                });
            } else if a && !b {
                // Flow changes wait for the publisher (`ovs-ofctl
                // add-flows` just closed): the tables it builds carry the
                // flag (shared) and a new version; no rebuild here too.
                later = true;
            } else if a || b {
                let _ = ctl.publish(&st);
            }
            (a || b, later)
        };
        if later {
            self.mark_dirty();
        } else if changed {
            let _ = self.sh.reval_kick();
        }
    }
}

/// The running listeners, controller connections and dispatcher.
pub struct OfServer {
    threads: Vec<JoinHandle<()>>,
    /// Unix sockets made, with their inode (removed at shutdown only if
    /// still ours: a new switch may have taken the path over).
    unix_paths: Vec<(PathBuf, u64)>,
    /// Counters.
    pub stats: Arc<ChannelStats>,
    reg: Arc<Registry>,
}

impl OfServer {
    /// Binds every listener, starts the controller connections and the
    /// packet-in dispatcher (reading `packet_ins`).
    pub fn start(
        sh: Arc<Shared>,
        cfg: &ChannelConfig,
        packet_ins: Receiver<PacketIn>,
    ) -> Result<OfServer, String> {
        let stats = Arc::new(ChannelStats::default());
        let reg = Arc::new(Registry {
            sh: sh.clone(),
            stats: stats.clone(),
            conns: Mutex::new(Vec::new()),
            cfg: cfg.clone(),
            dirty: Mutex::new(None),
            ports_dirty: AtomicBool::new(false),
            table_cfg: Mutex::new(Default::default()),
            dirty_cv: Condvar::new(),
            snoops: Mutex::new(Vec::new()),
            bridge_uuid: new_uuid(),
            targets: Mutex::new(Vec::new()),
            fail_standalone: AtomicBool::new(cfg.fail_standalone),
            dpid: std::sync::atomic::AtomicU64::new(1),
            versions: AtomicU32::new(msg::all_versions()),
            pin_bucket: Mutex::new(None),
        });
        let tls = cfg.tls_context()?;
        let mut me = OfServer {
            threads: Vec::new(),
            unix_paths: Vec::new(),
            stats,
            reg: reg.clone(),
        };
        for spec in &cfg.listen {
            let reg = reg.clone();
            match spec {
                ListenSpec::Unix(p) => {
                    let l = bind_unix(p, &mut me.unix_paths)?;
                    me.threads.push(spawn("of-accept", move || {
                        accept_loop(&reg, l.as_raw_fd(), || {
                            l.accept().map(|(s, _)| Conn::Unix(s))
                        })
                    })?);
                }
                ListenSpec::Tcp(a) => {
                    let l = TcpListener::bind(a).map_err(|e| format!("ptcp {a}: {e}"))?;
                    l.set_nonblocking(true).map_err(|e| e.to_string())?;
                    me.threads.push(spawn("of-accept", move || {
                        accept_loop(&reg, l.as_raw_fd(), || {
                            l.accept().map(|(s, _)| Conn::Tcp(s))
                        })
                    })?);
                }
                ListenSpec::Ssl(a) => {
                    let l = TcpListener::bind(a).map_err(|e| format!("pssl {a}: {e}"))?;
                    l.set_nonblocking(true).map_err(|e| e.to_string())?;
                    let ctx = tls.clone().ok_or("pssl: no TLS settings")?;
                    me.threads.push(spawn("of-accept", move || {
                        accept_loop(&reg, l.as_raw_fd(), || {
                            let (s, _) = l.accept()?;
                            TlsConn::server(s, &ctx).map(Conn::Tls)
                        })
                    })?);
                }
            }
        }
        if let Some(p) = &cfg.snoop {
            let l = bind_unix(p, &mut me.unix_paths)?;
            let reg = reg.clone();
            me.threads
                .push(spawn("of-snoop", move || snoop_accept(&reg, &l))?);
        }
        for target in &cfg.controllers {
            reg.add_target(target.clone(), true, tls.clone())?;
        }
        let _ = sh.channel_control.set(Arc::new(targets::Handle {
            reg: Arc::downgrade(&reg),
            tls: tls.clone(),
        }));
        let r2 = reg.clone();
        me.threads.push(spawn("of-packet-in", move || {
            packet_in::dispatch(&r2, &packet_ins)
        })?);
        let r3 = reg.clone();
        me.threads
            .push(spawn("of-publish", move || publisher(&r3))?);
        // Flow-removed messages and monitor updates for expired rules.
        let weak = Arc::downgrade(&reg);
        let _ = sh.on_expired.set(Box::new(move |gone| {
            if let Some(r) = weak.upgrade() {
                r.expired(&gone);
            }
        }));
        // PORT_STATUS for ports added and removed at run time.
        let weak = Arc::downgrade(&reg);
        let _ = sh.on_port_change.set(Box::new(move |no, name, added| {
            if let Some(r) = weak.upgrade() {
                r.port_added_or_removed(no, name, added);
            }
        }));
        // Fail-open from the start in standalone mode with targets.
        reg.refresh();
        Ok(me)
    }

    /// Waits for the threads (the switch's stop flag must be set) and
    /// removes the Unix sockets.
    pub fn shutdown(mut self) {
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.reg.join_targets();
        for (p, ino) in &self.unix_paths {
            let same =
                std::fs::metadata(p).is_ok_and(|m| std::os::unix::fs::MetadataExt::ino(&m) == *ino);
            if same {
                let _ = std::fs::remove_file(p);
            }
        }
    }
}

/// Binds a Unix socket (replacing a stale one of an earlier run) and
/// notes it for removal at shutdown.
fn bind_unix(p: &PathBuf, made: &mut Vec<(PathBuf, u64)>) -> Result<UnixListener, String> {
    if p.exists() {
        // A stale socket of an earlier run (a live one would answer):
        // replace it.
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
    let ino = std::fs::metadata(p).map_or(0, |m| std::os::unix::fs::MetadataExt::ino(&m));
    made.push((p.clone(), ino));
    Ok(l)
}

/// Accepts snoop connections: each gets a HELLO, then copies of the
/// controllers' messages until it goes away.
fn snoop_accept(reg: &Arc<Registry>, l: &UnixListener) {
    let mut workers: Vec<JoinHandle<()>> = Vec::new();
    while !reg.sh.stop.load(Ordering::Relaxed) {
        match l.accept() {
            Ok((s, _)) => {
                let r = reg.clone();
                if let Ok(h) = spawn("of-snoop-conn", move || snoop_serve(&r, s)) {
                    workers.push(h);
                }
                workers.retain(|h| !h.is_finished());
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => wait_for_peer(l.as_raw_fd()),
            Err(_) => std::thread::sleep(POLL),
        }
    }
    for h in workers {
        let _ = h.join();
    }
}

fn snoop_serve(reg: &Arc<Registry>, mut s: UnixStream) {
    if s.set_nonblocking(false).is_err()
        || s.set_write_timeout(Some(Duration::from_secs(10))).is_err()
        || s.write_all(&msg::encode_hello(flowpath_openflow::header::OFP15))
            .is_err()
    {
        return;
    }
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(OUT_QUEUE);
    reg.snoops
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push((id, tx));
    while !reg.sh.stop.load(Ordering::Relaxed) {
        match rx.recv_timeout(POLL) {
            Ok(m) => {
                if s.write_all(&m).is_err() {
                    break;
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    reg.snoops
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|(x, _)| *x != id);
}

/// Starts a channel thread; a panic in it ends that thread only (a
/// connection's thread: that connection), logged and counted.
fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>, String> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            crate::fault::guard(crate::fault::Part::OpenFlow, "the thread ends", f);
        })
        .map_err(|e| format!("cannot start a thread: {e}"))
}

/// Runs one connection to its end: a writer thread, the reader here.
fn serve(
    reg: &Arc<Registry>,
    mut c: Conn,
    primary: bool,
    probe_ms: Arc<std::sync::atomic::AtomicU64>,
) {
    // A TLS peer's certificate is checked in the handshake, on the
    // connection's own thread.
    let ready = c.prepare().and_then(|()| match &mut c {
        Conn::Tls(t) => t.handshake(Duration::from_secs(10), || {
            reg.sh.stop.load(Ordering::Relaxed)
        }),
        _ => Ok(()),
    });
    if let Err(e) = ready {
        if let (Conn::Tls(t), false) = (&c, reg.sh.stop.load(Ordering::Relaxed)) {
            reg.stats.errors.fetch_add(1, Ordering::Relaxed);
            eprintln!("flowpath: openflow: TLS with {} failed: {e}", t.peer());
        }
        return;
    }
    let Ok(w) = c.try_clone() else {
        return;
    };
    reg.stats.connections.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(OUT_QUEUE);
    let wire = Arc::new(Wire {
        conn: Mutex::new(w),
        queued: std::sync::atomic::AtomicUsize::new(0),
    });
    let info = Arc::new(ConnInfo {
        version: AtomicU8::new(0),
        primary,
        async_on: AtomicBool::new(primary),
        miss_send_len: AtomicU32::new(128),
        controller_id: AtomicU32::new(0),
        role: AtomicU32::new(0),
        nxm_format: AtomicBool::new(false),
        monitors: Mutex::new(Vec::new()),
        pin2: AtomicBool::new(false),
        probe_ms,
        out: tx,
        wire: wire.clone(),
    });
    let stats = reg.stats.clone();
    let wreg = reg.clone();
    let writer = spawn("of-write", move || {
        while let Ok(mut m) = rx.recv() {
            // What queued up meanwhile goes out in the same write.
            let mut n = 1;
            if primary {
                wreg.snoop(&m);
            }
            while m.len() < MAX_MSG {
                let Ok(more) = rx.try_recv() else { break };
                if primary {
                    wreg.snoop(&more);
                }
                m.extend_from_slice(&more);
                n += 1;
            }
            let mut w = wire.conn.lock().unwrap_or_else(|p| p.into_inner());
            if w.write_all(&m).is_err() {
                // The reader sees the connection end too.
                w.shutdown();
                return;
            }
            // Counted out only once written: the connection's own thread
            // writes directly only when nothing is waiting here.
            wire.queued.fetch_sub(n, Ordering::SeqCst);
            stats.tx_msgs.fetch_add(n as u64, Ordering::Relaxed);
        }
    });
    reg.add(info.clone());
    // A panic in the session closes this connection only (its socket
    // closes once the writer ends, below).
    let session = Session::new(reg.clone(), info.clone());
    crate::fault::guard(
        crate::fault::Part::OpenFlow,
        "the connection is closed",
        || session.run(c),
    );
    reg.remove(&info);
    drop(info);
    if let Ok(h) = writer {
        let _ = h.join();
    }
}

/// Sleeps until a peer knocks on listener `fd`, or at most [`POLL`] (so
/// that a stopping switch is noticed): a connection is accepted the
/// moment it arrives (`ovs-ofctl` opens several per command).
fn wait_for_peer(fd: RawFd) {
    flowpath_netdev::wait_readable_us(&[fd], POLL.as_micros() as u64);
}

fn accept_loop(reg: &Arc<Registry>, fd: RawFd, accept: impl Fn() -> std::io::Result<Conn>) {
    let mut workers: Vec<JoinHandle<()>> = Vec::new();
    while !reg.sh.stop.load(Ordering::Relaxed) {
        match accept() {
            Ok(c) => {
                let r = reg.clone();
                let probe = Arc::new(std::sync::atomic::AtomicU64::new(
                    r.cfg.probe_s.saturating_mul(1000),
                ));
                if let Ok(h) = spawn("of-conn", move || serve(&r, c, false, probe)) {
                    workers.push(h);
                }
                workers.retain(|h| !h.is_finished());
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => wait_for_peer(fd),
            Err(_) => std::thread::sleep(POLL),
        }
    }
    for h in workers {
        let _ = h.join();
    }
}

/// Builds the PMDs' tables from a snapshot of the rules (outside the
/// control lock: flow changes go on meanwhile) and installs them.
fn publish(sh: &Arc<Shared>) {
    let ctl = Control::new(sh.clone());
    let input = {
        let st = ctl.state();
        st.rules.publish_input_for(st.fail_open)
    };
    let _ = ctl.install(input.build());
}

/// Publishes flow changes from the OpenFlow channel: 2 ms after the last
/// change, or 20 ms (at least 4 times the last rebuild, at most 2 s)
/// after the first of a stream, then starts a
/// revalidator round (as Open vSwitch, a BARRIER reply means the flow
/// table has the change; the datapath follows within milliseconds).
fn publisher(reg: &Arc<Registry>) {
    const QUIET: Duration = Duration::from_millis(2);
    const MIN_DELAY: Duration = Duration::from_millis(20);
    const MAX_DELAY: Duration = Duration::from_secs(2);
    // What the last publish cost: a stream of changes is published at
    // most every 4 times that (a large table's rebuild takes a while;
    // rebuilding it every 20 ms would spend the core on rebuilds).
    let mut cost = Duration::ZERO;
    while !reg.sh.stop.load(Ordering::Relaxed) {
        let first = {
            let d = reg.dirty.lock().unwrap_or_else(|p| p.into_inner());
            let (d, _) = reg
                .dirty_cv
                .wait_timeout_while(d, POLL, |d| d.is_none())
                .unwrap_or_else(|p| p.into_inner());
            match *d {
                Some(t) => t,
                None => continue,
            }
        };
        let max_delay = (cost * 4).clamp(MIN_DELAY, MAX_DELAY);
        let version = || Control::new(reg.sh.clone()).state().rules.version();
        let mut seen = version();
        loop {
            std::thread::sleep(QUIET);
            let now = version();
            if now == seen || first.elapsed() > max_delay {
                break;
            }
            seen = now;
        }
        let t0 = Instant::now();
        reg.publish_now(false);
        cost = t0.elapsed();
    }
}

/// A random (version 4) UUID.
fn new_uuid() -> [u8; 16] {
    let mut b = [0u8; 16];
    let ok = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_ok();
    if !ok {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        b = (t ^ (u128::from(std::process::id()) << 64)).to_be_bytes();
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    b
}

/// The largest message.
pub(crate) const MAX_MESSAGE: usize = MAX_MSG;

#[cfg(test)]
mod tests {
    use super::select::{overlaps, Sel};
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
        assert_eq!(
            ListenSpec::parse("pssl:6653:127.0.0.1").unwrap(),
            ListenSpec::Ssl("127.0.0.1:6653".into())
        );
        assert_eq!(
            ControllerSpec::parse("ssl:10.0.0.1").unwrap(),
            ControllerSpec::Ssl("10.0.0.1:6653".into())
        );
        assert!(ListenSpec::parse("pssl:x").is_err());
        assert!(ControllerSpec::parse("ssl:nohost:1").is_err());
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
