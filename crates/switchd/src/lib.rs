//! The running switch: `flowpath switch`.
//!
//! What: [`Switchd::start`] opens the ports ([`ports`]), starts one PMD
//! thread per configured CPU ([`pmd`]: rx queues → `Switch` → tx), binds
//! the control socket (unixctl JSON-RPC, [`control`]: statistics,
//! megaflow dumps, rules and configuration at run time), and runs until
//! `exit`, SIGINT or SIGTERM; then it stops the PMDs, closes the ports
//! (detaching XDP programs, deleting taps, unmapping rings), removes the
//! control socket and the pidfile.
//!
//! Why shaped so: the datapath (`Switch`, the same code `flowpath run`
//! and `flowpath bench` measure) is driven, never reimplemented, here;
//! this crate touches no packet bytes and no cache internals. Ports come
//! from `netdev`, the protocol from `unixctl`; this crate gives commands
//! their meaning.
//!
//! Threads (see DESIGN.md): PMD threads own their `Switch` and rx queues
//! and are reached only through their bounded command queues, drained
//! between bursts; the control server's threads run command handlers,
//! which hold the switch's control lock (one command changes rules or
//! configuration at a time) and wait for PMD answers with a time limit;
//! the main thread waits for a stop request. Rule changes build a new
//! immutable `RuleTables` and publish it to every PMD; the reply to the
//! command is sent only after every PMD has revalidated its megaflows
//! against it.

pub mod bridges;
pub mod conntrack;
pub mod control;
mod control_dump;
pub mod fault;
pub mod group_stats;
mod hooks;
pub mod monitor;
pub mod ofchannel;
mod ovsdb_apply;
mod ovsdb_rows;
mod ovsdb_sync;
pub mod packet_out;
pub mod pmd;
mod pmd_admin;
mod port_admin;
pub mod ports;
pub mod revalidator;
pub mod rules;
pub mod sampler;
pub mod shared;
pub mod underlay;
pub mod underlay_kernel;

use flowpath_datapath::Config;
use flowpath_netdev::{NetdevError, PortSpec};
use flowpath_ofproto::normal::Bridge;
use pmd::RxqSlot;
use rules::RuleSet;
use shared::UpcallStats;
pub use shared::{CtlState, PmdHandle, Shared};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use pmd_admin::PMD_QUEUE_DEPTH;

/// Everything `flowpath switch` is started with.
pub struct SwitchdConfig {
    /// `(port number, spec)`, numbers distinct, 1..=65279 (and 65534,
    /// the LOCAL port, a tap).
    pub ports: Vec<(u32, PortSpec)>,
    /// One PMD per CPU listed; empty = one PMD, not pinned.
    pub pmd_cpus: Vec<usize>,
    /// Datapath configuration (each PMD's `Switch`).
    pub datapath: Config,
    /// The rules.
    pub rules: RuleSet,
    /// Control socket path.
    pub ctl_path: PathBuf,
    /// Pidfile to write (and remove on exit).
    pub pidfile: Option<PathBuf>,
    /// `NORMAL`'s state: the MAC learning table every PMD shares, the
    /// ports' VLANs, LOCAL or not.
    pub bridge: Arc<Bridge>,
    /// The OpenFlow channel: listeners (the bridge's `NAME.mgmt` socket
    /// and any `--openflow` ones), controllers, fail mode, limits.
    pub openflow: ofchannel::ChannelConfig,
    /// Flow-sample collector sets (`--sample-collector-set`): with any,
    /// `sample` actions sample.
    pub sample_sets: Vec<sampler::CollectorSet>,
    /// An `ovsdb-server` to take the bridge's ports and settings from
    /// (`--ovsdb unix:PATH|tcp:IP:PORT`).
    pub ovsdb: Option<String>,
    /// Tunnel ports (`--port N=vxlan:...`).
    pub tunnels: Vec<flowpath_ofproto::tunnel::TunnelPort>,
    /// The tunnels' underlay (`--underlay`).
    pub underlay: Option<underlay::UnderlayConfig>,
}

/// Why the switch could not start.
#[derive(Debug, thiserror::Error)]
pub enum SwitchdError {
    /// A port could not be opened (names the port).
    #[error("{0}")]
    Port(NetdevError),
    /// The control socket could not be bound.
    #[error("control socket: {0}")]
    Control(flowpath_unixctl::UnixctlError),
    /// A bad setting.
    #[error("{0}")]
    Config(String),
    /// A file (pidfile) could not be written.
    #[error("{what}: {err}")]
    Io {
        /// What was being written.
        what: String,
        /// The OS error (in the message, so not a `source()`).
        err: std::io::Error,
    },
}

// The wrapped errors are part of the message (one line, as the binary
// prints it), so they are not `source()`s that would print twice.
impl From<NetdevError> for SwitchdError {
    fn from(e: NetdevError) -> Self {
        SwitchdError::Port(e)
    }
}

impl From<flowpath_unixctl::UnixctlError> for SwitchdError {
    fn from(e: flowpath_unixctl::UnixctlError) -> Self {
        SwitchdError::Control(e)
    }
}

/// A running switch.
pub struct Switchd {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    server: Option<flowpath_unixctl::Server>,
    of_server: Option<ofchannel::OfServer>,
    pidfile: Option<PathBuf>,
}

/// How a bridge is started besides its configuration.
struct StartAs {
    /// The first bridge binds the control socket; the others are reached
    /// through it ([`bridges::Router`]).
    first: bool,
    /// The connection tracker and fragment reassembler to share (the
    /// first bridge's), or `None` to make them.
    conntrack: Option<(
        Arc<flowpath_conntrack::Conntrack>,
        Arc<flowpath_conntrack::ipf::Ipf>,
    )>,
}

/// What the other bridges the OVSDB names are started with: the first
/// bridge's settings.
struct BridgeTemplate {
    datapath: Config,
    pmd_cpus: Vec<usize>,
    dir: PathBuf,
    mac_size: usize,
    mac_aging_s: u64,
    prefixes: Vec<flowpath_flow::FieldId>,
    openflow: ofchannel::ChannelConfig,
    conntrack: Arc<flowpath_conntrack::Conntrack>,
    ipf: Arc<flowpath_conntrack::ipf::Ipf>,
}

impl BridgeTemplate {
    /// Starts bridge `name`: no ports, no rules (fail-open forwards with
    /// `NORMAL` until flows or a controller come), its OpenFlow socket
    /// `NAME.mgmt` beside the first bridge's.
    fn start(&self, name: &str) -> Result<Switchd, SwitchdError> {
        if name.is_empty() || name.contains('/') {
            return Err(SwitchdError::Config(format!(
                "bridge {name:?}: a bridge name is a plain word"
            )));
        }
        let mgmt = self.dir.join(format!("{name}.mgmt"));
        let openflow = ofchannel::ChannelConfig {
            bridge: name.to_string(),
            listen: vec![ofchannel::ListenSpec::Unix(mgmt.clone())],
            controllers: Vec::new(),
            snoop: Some(mgmt.with_extension("snoop")),
            ..self.openflow.clone()
        };
        let cfg = SwitchdConfig {
            ports: Vec::new(),
            pmd_cpus: self.pmd_cpus.clone(),
            datapath: self.datapath.clone(),
            rules: RuleSet::new(Vec::new(), self.prefixes.clone(), Vec::new(), Vec::new()),
            ctl_path: self.dir.join(format!("{name}.ctl")),
            pidfile: None,
            bridge: Arc::new(Bridge::new(
                flowpath_ofproto::normal::MacTable::new(self.mac_size, self.mac_aging_s),
                Default::default(),
                false,
            )),
            openflow,
            sample_sets: Vec::new(),
            ovsdb: None,
            tunnels: Vec::new(),
            underlay: None,
        };
        Switchd::start_as(
            cfg,
            StartAs {
                first: false,
                conntrack: Some((self.conntrack.clone(), self.ipf.clone())),
            },
        )
    }
}

impl ovsdb_sync::OtherBridge for Switchd {
    fn control(&self) -> control::Control {
        control::Control::new(self.shared.clone())
    }

    fn stop(self: Box<Self>) {
        self.shutdown();
    }
}

impl Switchd {
    /// Opens the ports, starts the PMDs and the control socket. On error
    /// everything already opened or started is closed again.
    pub fn start(cfg: SwitchdConfig) -> Result<Switchd, SwitchdError> {
        Switchd::start_as(
            cfg,
            StartAs {
                first: true,
                conntrack: None,
            },
        )
    }

    fn start_as(mut cfg: SwitchdConfig, how: StartAs) -> Result<Switchd, SwitchdError> {
        // An ssl: OVSDB remote takes the OpenFlow channel's TLS files.
        let ovsdb_tls = match &cfg.ovsdb {
            Some(r) if r.starts_with("ssl:") => Some(
                cfg.openflow
                    .tls
                    .client_config()
                    .map_err(|e| SwitchdError::Config(format!("--ovsdb {r}: {e}")))?,
            ),
            _ => None,
        };
        // With the OVSDB and no --pmd-cpus, the PMDs follow its
        // pmd-cpu-mask from the start (as ovs-vswitchd's).
        if let (Some(remote), true) = (&cfg.ovsdb, cfg.pmd_cpus.is_empty()) {
            if let Some(cpus) = ovsdb_sync::pmd_cpus_at_start(remote, ovsdb_tls.clone()) {
                eprintln!("flowpath: ovsdb: pmd-cpu-mask: PMD threads on CPUs {cpus:?}");
                cfg.pmd_cpus = cpus;
            }
        }
        cfg.datapath
            .validate()
            .map_err(|e| SwitchdError::Config(e.to_string()))?;
        let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
        for c in &cfg.pmd_cpus {
            if *c >= ncpu {
                return Err(SwitchdError::Config(format!(
                    "--pmd-cpus: CPU {c} does not exist (this machine has CPUs 0-{})",
                    ncpu - 1
                )));
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for (n, s) in &cfg.ports {
            let local = flowpath_ofproto::action::OFPP_LOCAL;
            if *n == 0 || (*n > 0xfeff && *n != local) {
                return Err(SwitchdError::Config(format!(
                    "port {n}={s}: port numbers are 1 to 65279, or {local} (LOCAL, a tap: port)"
                )));
            }
            if *n == local && !matches!(s, PortSpec::Tap { .. }) {
                return Err(SwitchdError::Config(format!(
                    "port {n}={s}: port {local} (LOCAL) is a tap: port"
                )));
            }
            if !seen.insert(*n) {
                return Err(SwitchdError::Config(format!("port {n} given twice")));
            }
        }
        // Bridges from the OVSDB without --underlay take their tunnels'
        // underlay from another bridge's LOCAL interface once one carries
        // an address (Open vSwitch's br-phy): they have tunnels from the
        // start.
        let auto_underlay = cfg.underlay.is_none() && (cfg.ovsdb.is_some() || !how.first);
        // Tunnels: their datapath ports and the underlay's are reserved.
        let tunnels = if cfg.tunnels.is_empty() && cfg.underlay.is_none() && !auto_underlay {
            None
        } else {
            use flowpath_ofproto::tunnel::{FIRST_VPORT, UNDERLAY_PORT};
            for n in cfg
                .ports
                .iter()
                .map(|p| p.0)
                .chain(cfg.tunnels.iter().map(|t| t.ofport))
            {
                if n == UNDERLAY_PORT || n >= FIRST_VPORT {
                    return Err(SwitchdError::Config(format!(
                        "port {n}: with tunnels, port {UNDERLAY_PORT} (the underlay) and {FIRST_VPORT} and above (tunnel datapath ports) are reserved"
                    )));
                }
                if cfg.tunnels.iter().any(|t| t.ofport == n) && cfg.ports.iter().any(|p| p.0 == n) {
                    return Err(SwitchdError::Config(format!("port {n} given twice")));
                }
            }
            let t = underlay::tunnels(std::mem::take(&mut cfg.tunnels), cfg.underlay.as_ref())
                .map_err(SwitchdError::Config)?;
            if let Some(u) = &cfg.underlay {
                cfg.ports.push((UNDERLAY_PORT, u.spec.clone()));
                // The IPv6 endpoint addresses flowpath owns are tentative
                // until duplicate address detection clears them.
                t.dad.begin(u.addrs.iter().filter_map(|(a, _)| match a {
                    std::net::IpAddr::V6(a) => Some(*a),
                    std::net::IpAddr::V4(_) => None,
                }));
            }
            cfg.rules.set_tunnels(Some(t.clone()));
            Some(t)
        };
        // The control threads (started from here on, they inherit the
        // mask) stay off the PMDs' cores while another core is allowed.
        if let Err(e) = flowpath_io::affinity::avoid_cpus(&cfg.pmd_cpus) {
            eprintln!("flowpath: cannot keep the control threads off the PMD cores: {e}");
        }
        let n_pmds = cfg.pmd_cpus.len().max(1);
        let opened = ports::open_all(&cfg.ports, n_pmds)?;
        let stop = Arc::new(AtomicBool::new(false));
        let epoch = Instant::now();
        // One connection tracker for every PMD (and for the OpenFlow
        // packet-outs the control threads run).
        let (conntrack, ipf) = how.conntrack.unwrap_or_else(|| {
            (
                Arc::new(flowpath_conntrack::Conntrack::new(
                    flowpath_conntrack::Config::default(),
                )),
                Arc::new(flowpath_conntrack::ipf::Ipf::new()),
            )
        });
        let sampler = Arc::new(sampler::Sampler::new(&cfg.sample_sets));
        cfg.rules.set_sampling(sampler.any());
        let published = cfg.rules.publish();
        let tables = published.tables.clone();
        let cores: Vec<Option<usize>> = if cfg.pmd_cpus.is_empty() {
            vec![None]
        } else {
            cfg.pmd_cpus.iter().map(|c| Some(*c)).collect()
        };
        // Round-robin rx queue assignment (OVS's pmd-rxq-assign=roundrobin).
        let mut slots: Vec<Vec<RxqSlot>> = cores.iter().map(|_| Vec::new()).collect();
        for (i, q) in opened.rxqs.into_iter().enumerate() {
            slots[i % cores.len()].push(RxqSlot::from(q));
        }
        let mut pmds = Vec::new();
        let mut pmd_threads = Vec::new();
        // Controller actions' packets, from every PMD to the channel.
        let (pin_tx, pin_rx) = sync_channel(ofchannel::PACKET_IN_QUEUE);
        // Sampled packets, from every PMD to the sampler thread.
        let (sample_tx, sample_rx) = sync_channel(sampler::SAMPLE_QUEUE);
        let parts = pmd_admin::PmdParts {
            datapath: cfg.datapath.clone(),
            tables: tables.clone(),
            bridge: cfg.bridge.clone(),
            pin: pin_tx.clone(),
            sample: sample_tx.clone(),
            conntrack: conntrack.clone(),
            ipf: ipf.clone(),
            tx: opened.tx.clone(),
            stop: stop.clone(),
            epoch,
        };
        for (id, (core, rxqs)) in cores.iter().zip(slots).enumerate() {
            match pmd_admin::spawn_pmd(id, *core, rxqs, &parts) {
                Ok((h, t)) => {
                    pmds.push(h);
                    pmd_threads.push(t);
                }
                Err(e) => {
                    stop.store(true, Ordering::Relaxed);
                    for t in pmd_threads {
                        let _ = t.join();
                    }
                    return Err(SwitchdError::Config(e));
                }
            }
        }
        drop(parts);
        let mut threads = Vec::new();
        let tlv = cfg.rules.tlv_table();
        let shared = Arc::new(Shared {
            pmds: std::sync::RwLock::new(Arc::new(pmds)),
            pmd_threads: Mutex::new(pmd_threads),
            pin_sink: pin_tx.clone(),
            tx: std::sync::RwLock::new(opened.tx),
            ports: std::sync::RwLock::new(opened.info),
            open: Mutex::new(opened.open),
            on_port_change: std::sync::OnceLock::new(),
            channel_control: std::sync::OnceLock::new(),
            flow_limit_cfg: AtomicUsize::new(cfg.datapath.flow_limit),
            max_idle_ms: AtomicU64::new(cfg.datapath.max_idle_ms),
            upcall_stats: Mutex::new(UpcallStats {
                limit: cfg.datapath.flow_limit,
                ..UpcallStats::default()
            }),
            published: Mutex::new(published),
            state: Mutex::new(CtlState {
                rules: cfg.rules,
                datapath: cfg.datapath,
                fail_open: false,
            }),
            stop: stop.clone(),
            started: epoch,
            reval: Mutex::new(None),
            bridge: cfg.bridge.clone(),
            channel: std::sync::OnceLock::new(),
            on_expired: std::sync::OnceLock::new(),
            conntrack,
            ipf,
            sampler: sampler.clone(),
            sample_sink: sample_tx,
            control_exec: Mutex::new(None),
            tunnels: tunnels.clone(),
            tlv,
            auto_underlay,
        });
        let stop2 = stop.clone();
        let (rtx, rrx) = sync_channel(16);
        *shared.reval.lock().unwrap_or_else(|p| p.into_inner()) = Some(rtx);
        let sh2 = shared.clone();
        type Job = Box<dyn FnOnce() + Send>;
        let mut helpers: Vec<(&str, Job)> = vec![
            (
                "sampler",
                Box::new(move || sampler::run(sampler, sample_rx, stop2)),
            ),
            ("revalidator", Box::new(move || revalidator::run(sh2, rrx))),
        ];
        if let Some(t) = tunnels {
            let sh3 = shared.clone();
            let sh4 = shared.clone();
            // (Bridges from the OVSDB find their underlay while they run.)
            let attach = move |name: &str| control::Control::new(sh4.clone()).attach_underlay(name);
            helpers.push((
                "fp-neigh",
                Box::new(move || {
                    underlay::run(sh3, t, |sh, t| underlay_kernel::refresh(sh, t, &attach))
                }),
            ));
        }
        for (name, f) in helpers {
            match std::thread::Builder::new().name(name.into()).spawn(f) {
                Ok(h) => threads.push(h),
                Err(e) => {
                    stop.store(true, Ordering::Relaxed);
                    for t in threads {
                        let _ = t.join();
                    }
                    return Err(SwitchdError::Io {
                        what: format!("cannot start the {name} thread"),
                        err: e,
                    });
                }
            }
        }
        let mut me = Switchd {
            shared: shared.clone(),
            threads,
            server: None,
            of_server: None,
            pidfile: None,
        };
        let others = Arc::new(bridges::Bridges::default());
        if how.first {
            let server = flowpath_unixctl::Server::bind(
                &cfg.ctl_path,
                bridges::command_specs(
                    control::commands()
                        .into_iter()
                        .chain(fault::commands())
                        .collect(),
                ),
                Arc::new(bridges::Router {
                    first: control::Control::new(shared),
                    others: others.clone(),
                }),
            );
            match server {
                Ok(s) => me.server = Some(s),
                Err(e) => {
                    me.shutdown();
                    return Err(e.into());
                }
            }
        }
        drop(pin_tx);
        match ofchannel::OfServer::start(me.shared.clone(), &cfg.openflow, pin_rx) {
            Ok(s) => {
                let _ = me
                    .shared
                    .channel
                    .set((cfg.openflow.bridge.clone(), s.stats.clone()));
                me.of_server = Some(s);
            }
            Err(e) => {
                me.shutdown();
                return Err(SwitchdError::Config(format!("OpenFlow listener: {e}")));
            }
        }
        if let Some(remote) = cfg.ovsdb.clone() {
            let ctl = control::Control::new(me.shared.clone());
            let (bridge, stop) = (cfg.openflow.bridge.clone(), me.shared.stop.clone());
            let (mac_size, mac_aging_s) = {
                let m = cfg.bridge.macs();
                (m.max_entries(), m.aging_s())
            };
            let (datapath, prefixes) = {
                let st = me.shared.state.lock().unwrap_or_else(|p| p.into_inner());
                (st.datapath.clone(), st.rules.prefixes().to_vec())
            };
            let template = BridgeTemplate {
                datapath,
                pmd_cpus: cfg.pmd_cpus.clone(),
                dir: cfg
                    .ctl_path
                    .parent()
                    .unwrap_or(std::path::Path::new("."))
                    .to_path_buf(),
                mac_size,
                mac_aging_s,
                prefixes,
                openflow: cfg.openflow.clone(),
                conntrack: me.shared.conntrack.clone(),
                ipf: me.shared.ipf.clone(),
            };
            let others = ovsdb_sync::Others::new(
                template.dir.clone(),
                others,
                Box::new(move |name: &str| {
                    template
                        .start(name)
                        .map(|s| Box::new(s) as Box<dyn ovsdb_sync::OtherBridge>)
                        .map_err(|e| e.to_string())
                }),
            );
            match std::thread::Builder::new()
                .name("ovsdb".into())
                .spawn(move || ovsdb_sync::run(ctl, remote, ovsdb_tls, bridge, stop, others))
            {
                Ok(h) => me.threads.push(h),
                Err(e) => {
                    me.shutdown();
                    return Err(SwitchdError::Io {
                        what: "cannot start the ovsdb thread".into(),
                        err: e,
                    });
                }
            }
        }
        if let Some(p) = cfg.pidfile {
            if let Err(e) = std::fs::write(&p, format!("{}\n", std::process::id())) {
                me.shutdown();
                return Err(SwitchdError::Io {
                    what: format!("cannot write pidfile {}", p.display()),
                    err: e,
                });
            }
            me.pidfile = Some(p);
        }
        Ok(me)
    }

    /// The flag that stops the switch when set (by `exit`, a signal, or a
    /// test).
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.shared.stop.clone()
    }

    /// The control-side state (for tests and the embedding program).
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Waits until SIGINT, SIGTERM or the `exit` command, then shuts down.
    pub fn run_until_stopped(self) -> Result<(), SwitchdError> {
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(sig, self.shared.stop.clone()).map_err(|e| {
                SwitchdError::Io {
                    what: "cannot install a signal handler".into(),
                    err: e,
                }
            })?;
        }
        while !self.shared.stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.shutdown();
        if fault::fatal() {
            return Err(SwitchdError::Config(
                "stopped after a PMD thread panicked".into(),
            ));
        }
        Ok(())
    }

    /// Stops the PMDs, closes the ports and the control socket, removes
    /// the pidfile.
    pub fn shutdown(mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        let pmd_threads = std::mem::take(
            &mut *self
                .shared
                .pmd_threads
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        );
        for t in pmd_threads {
            let _ = t.join();
        }
        if let Some(s) = self.server.take() {
            s.shutdown();
        }
        if let Some(s) = self.of_server.take() {
            s.shutdown();
        }
        self.shared.tx().flush_all();
        self.shared
            .open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        if let Some(p) = self.pidfile.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}
