//! What the switch's threads share: the control side's view of the PMDs,
//! the rules and configuration under one lock, the published rules, and
//! the revalidator's request queue and figures.
//!
//! Why a module of its own: the control handlers ([`crate::control`]) and
//! the revalidator thread ([`crate::revalidator`]) both work on this
//! state; keeping it here (with the revalidator's request and statistics
//! types) means neither imports the other, nor the crate root.
//!
//! Threads: [`Shared`] is behind an `Arc`; each field says how it is
//! guarded.

use crate::pmd::PmdCmd;
use crate::ports::{PortInfo, TxTable};
use crate::rules::{Published, RuleSet};
use flowpath_datapath::Config;
use flowpath_ofproto::normal::Bridge;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// A PMD as the control side sees it.
pub struct PmdHandle {
    /// Index.
    pub id: usize,
    /// Pinned CPU (`usize::MAX`: none); changed by `pmd-cpu-mask`.
    pub core: AtomicUsize,
    /// Its command queue.
    pub cmds: SyncSender<PmdCmd>,
    /// Wakes the PMD from its idle sleep when a command is queued (one
    /// byte on a socket pair it polls with its ports).
    pub wake: std::os::unix::net::UnixStream,
}

impl PmdHandle {
    /// The CPU it is pinned to, if any.
    pub fn core(&self) -> Option<usize> {
        Some(self.core.load(std::sync::atomic::Ordering::Relaxed)).filter(|c| *c != usize::MAX)
    }

    /// Queues `c` without waiting and wakes the PMD.
    pub fn try_send(&self, c: PmdCmd) -> Result<(), std::sync::mpsc::TrySendError<PmdCmd>> {
        let r = self.cmds.try_send(c);
        if r.is_ok() {
            self.wake();
        }
        r
    }

    /// Queues `c` (waiting for room) and wakes the PMD.
    pub fn send(&self, c: PmdCmd) -> Result<(), std::sync::mpsc::SendError<PmdCmd>> {
        self.wake();
        let r = self.cmds.send(c);
        self.wake();
        r
    }

    /// Wakes the PMD (a full socket buffer means it is awake already).
    pub fn wake(&self) {
        use std::io::Write;
        let _ = (&self.wake).write(&[1]);
    }
}

/// What control commands change, under one lock.
pub struct CtlState {
    /// The rules.
    pub rules: RuleSet,
    /// The datapath configuration every PMD runs with.
    pub datapath: Config,
    /// Fail-open: `--fail-mode standalone` and no controller connected;
    /// the published tables are one `NORMAL` flow.
    pub fail_open: bool,
}

/// What the control handlers share.
pub struct Shared {
    /// The PMDs (see [`Shared::pmds`]); replaced when `pmd-cpu-mask`
    /// changes their number.
    pub pmds: RwLock<Arc<Vec<PmdHandle>>>,
    /// The PMD threads (joined at shutdown).
    pub pmd_threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// Where PMDs send controller actions' packets (the OpenFlow
    /// channel's dispatcher; new PMDs get a clone).
    pub pin_sink: flowpath_datapath::execute::PacketInSender,
    /// Transmit sides (for their counters); replaced when a port is added
    /// or removed (see [`Shared::tx`]).
    pub tx: RwLock<Arc<TxTable>>,
    /// The ports, in number order (see [`Shared::ports`]).
    pub ports: RwLock<Vec<PortInfo>>,
    /// The opened ports (their guards: programs, interfaces): closed when
    /// removed, after no PMD polls or sends to them, or at shutdown.
    pub open: Mutex<Vec<(u32, flowpath_netdev::OpenPort)>>,
    /// Told of ports added (`true`) and removed at run time: the OpenFlow
    /// channel's PORT_STATUS messages. Set when the channel starts.
    pub on_port_change: std::sync::OnceLock<PortHook>,
    /// The OpenFlow channel's controllers and fail mode, for OVSDB's
    /// `Controller` rows and `fail_mode`. Set when the channel starts.
    pub channel_control: std::sync::OnceLock<Arc<dyn ChannelControl>>,
    /// Rules and configuration.
    pub state: Mutex<CtlState>,
    /// Set to stop the switch.
    pub stop: Arc<AtomicBool>,
    /// When the switch started (time zero of the datapath clock).
    pub started: Instant,
    /// The rules the PMDs and the revalidator use now.
    pub published: Mutex<Published>,
    /// The configured `flow-limit` (the dynamic limit's ceiling).
    pub flow_limit_cfg: AtomicUsize,
    /// `max-idle` in ms.
    pub max_idle_ms: AtomicU64,
    /// `upcall/show`'s figures, as of the last revalidator round.
    pub upcall_stats: Mutex<UpcallStats>,
    /// The revalidator's request queue.
    pub reval: Mutex<Option<SyncSender<RevalCmd>>>,
    /// `NORMAL`'s state (MAC learning table, VLANs), shared by the PMDs'
    /// slow paths, the revalidator and `fdb/*`.
    pub bridge: Arc<Bridge>,
    /// The OpenFlow channel's bridge name and counters (set when the
    /// channel starts).
    pub channel: std::sync::OnceLock<(String, Arc<ChannelStats>)>,
    /// Told of the rules that expired (idle or hard timeout, with the
    /// OpenFlow reason 0 or 1): the OpenFlow channel's flow-removed
    /// messages and flow monitors. Set when the channel starts.
    pub on_expired: std::sync::OnceLock<ExpiredHook>,
    /// The connection tracker the PMDs' `ct` actions share; the
    /// revalidator expires its connections, `dpctl/*conntrack*` read and
    /// change it.
    pub conntrack: Arc<flowpath_conntrack::Conntrack>,
    /// The fragment reassembler the PMDs' `ct` actions share (expired
    /// lists dropped by the revalidator; `dpctl/ipf-*`).
    pub ipf: Arc<flowpath_conntrack::ipf::Ipf>,
    /// The flow-sample collector sets and their counters.
    pub sampler: Arc<crate::sampler::Sampler>,
    /// Where sampled packets go (the sampler thread).
    pub sample_sink: flowpath_datapath::execute::SampleSender,
    /// Runs OpenFlow packet-outs on the control threads (made at the
    /// first one; see [`crate::pmd::ControlExec`]).
    pub control_exec: Mutex<Option<crate::pmd::ControlExec>>,
    /// Tunnel ports, the underlay, its routes and neighbours (none
    /// without `--underlay`).
    pub tunnels: Option<Arc<flowpath_ofproto::tunnel::Tunnels>>,
    /// The Geneve option map (`add-tlv-map`; the tunnels' when there are
    /// tunnels; a bridge without them keeps one too, as Open vSwitch).
    pub tlv: Arc<flowpath_ofproto::tunnel::TlvTable>,
    /// The underlay is found, not given: another bridge's LOCAL interface
    /// in this process that carries the endpoint's address (bridges from
    /// the OVSDB without `--underlay`, see [`crate::underlay_kernel`]).
    pub auto_underlay: bool,
}

/// A controller the OVSDB names: its target and its `Controller` row's
/// timers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ControllerRow {
    /// `tcp:IP:PORT`, `ssl:IP:PORT` or `unix:PATH`.
    pub target: String,
    /// `inactivity_probe` (ms; 0: never probe); `None`: the switch's.
    pub probe_ms: Option<u64>,
    /// `max_backoff` (ms, at least 1000); `None`: the switch's.
    pub max_backoff_ms: Option<u64>,
}

/// The OpenFlow channel's controller targets and fail mode, changed while
/// it runs (see [`Shared::channel_control`]).
pub trait ChannelControl: Send + Sync {
    /// The targets to connect to besides the `--controller` ones (as
    /// `ovs-vsctl set-controller` gives them): new ones are connected,
    /// others cut; those kept take the rows' timers.
    fn set_controllers(&self, targets: &[ControllerRow]) -> Result<(), String>;
    /// `standalone` (true) or `secure`.
    fn set_fail_standalone(&self, on: bool);
    /// Every target (in `tcp:IP:PORT` form) and whether it is connected.
    fn controllers(&self) -> Vec<(String, bool)>;
    /// Cuts every controller connection (they reconnect at once):
    /// `bridge/reconnect`.
    fn reconnect(&self);
    /// The datapath id the FEATURES reply gives (OVSDB's
    /// `other_config:datapath-id`; default 1).
    fn set_datapath_id(&self, dpid: u64);
    /// The OpenFlow versions new connections may use (bit V: version V;
    /// 0: all). Connections already up keep theirs.
    fn set_versions(&self, bitmap: u32);
}

/// See [`Shared::on_port_change`]: the port's number, its name, added.
pub type PortHook = Box<dyn Fn(u32, &str, bool) + Send + Sync>;

/// See [`Shared::on_expired`].
pub type ExpiredHook = Box<dyn Fn(Vec<(crate::rules::InstalledRule, u8)>) + Send + Sync>;

impl Shared {
    /// The PMDs now.
    pub fn pmds(&self) -> Arc<Vec<PmdHandle>> {
        self.pmds
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Replaces the PMDs.
    pub fn set_pmds(&self, pmds: Vec<PmdHandle>) {
        *self
            .pmds
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(pmds);
    }

    /// The ports' transmit sides as they are now.
    pub fn tx(&self) -> Arc<TxTable> {
        self.tx.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The ports as they are now, in number order.
    pub fn ports(&self) -> Vec<PortInfo> {
        self.ports.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The published rules.
    pub fn published(&self) -> Published {
        self.published
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Replaces the published rules (the caller swaps them on the PMDs).
    pub fn set_published(&self, p: Published) {
        *self.published.lock().unwrap_or_else(|e| e.into_inner()) = p;
    }

    fn reval_send(&self, c: RevalCmd) -> Result<(), String> {
        let g = self.reval.lock().unwrap_or_else(|p| p.into_inner());
        match g.as_ref() {
            Some(tx) => tx
                .try_send(c)
                .map_err(|_| "the revalidator is busy; try again".to_string()),
            None => Err("the revalidator is not running".into()),
        }
    }

    /// Asks for a revalidator round soon (does not wait).
    pub fn reval_kick(&self) -> Result<(), String> {
        self.reval_send(RevalCmd::RunNow(None))
    }

    /// Runs a revalidator round and waits for it (at most 60 s).
    pub fn reval_wait(&self) -> Result<(), String> {
        let (tx, rx) = sync_channel(1);
        self.reval_send(RevalCmd::RunNow(Some(tx)))?;
        rx.recv_timeout(Duration::from_secs(60))
            .map_err(|_| "the revalidator did not finish a round within 60 s".to_string())
    }

    /// Deletes every megaflow on every PMD and waits.
    pub fn reval_purge(&self) -> Result<(), String> {
        let (tx, rx) = sync_channel(1);
        self.reval_send(RevalCmd::Purge(tx))?;
        rx.recv_timeout(Duration::from_secs(60))
            .map_err(|_| "the purge did not finish within 60 s".to_string())
    }
}

/// `upcall/show`'s figures.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct UpcallStats {
    /// Megaflows at the last dump.
    pub current: usize,
    /// Running average of `current` over rounds.
    pub avg: usize,
    /// Largest `current` seen.
    pub max: usize,
    /// The flow limit in force.
    pub limit: usize,
    /// Duration of the last round (dump, revalidation, deletions), ms.
    pub dump_duration_ms: u64,
    /// Rounds done.
    pub rounds: u64,
    /// Megaflows deleted as idle, in all.
    pub expired: u64,
    /// Megaflows deleted after rule changes, in all.
    pub revalidated: u64,
    /// Frozen translations (recirculation ids) freed, in all.
    pub recirc_freed: u64,
    /// Frozen translations kept at the last round.
    pub recirc_ids: usize,
    /// Connections the tracker's sweep expired, in all.
    pub ct_expired: u64,
}

/// Requests to the revalidator thread.
pub enum RevalCmd {
    /// Run a round now; answer when it is done.
    RunNow(Option<SyncSender<()>>),
    /// Delete every megaflow now (`revalidator/purge`); answer when done.
    Purge(SyncSender<()>),
}

/// The OpenFlow channel's counters (`coverage/show`).
#[derive(Debug, Default)]
pub struct ChannelStats {
    /// Connections accepted or made.
    pub connections: AtomicU64,
    /// Messages received.
    pub rx_msgs: AtomicU64,
    /// Messages sent.
    pub tx_msgs: AtomicU64,
    /// Errors sent.
    pub errors: AtomicU64,
    /// Flow mods applied.
    pub flow_mods: AtomicU64,
    /// Packet-ins sent (one per connection).
    pub packet_ins: AtomicU64,
    /// Packet-ins over the rate limit (dropped).
    pub packet_in_rate_dropped: AtomicU64,
    /// Packet-ins a connection's full queue dropped.
    pub packet_in_queue_dropped: AtomicU64,
    /// Packet-outs run.
    pub packet_outs: AtomicU64,
    /// Flow-removed messages and flow monitor updates a connection's full
    /// queue dropped.
    pub async_dropped: AtomicU64,
    /// Bundles committed.
    pub bundle_commits: AtomicU64,
}

impl ChannelStats {
    /// `coverage/show`'s lines: each counter with its total.
    pub fn coverage(&self) -> String {
        let rows = [
            ("ofconn_connections", &self.connections),
            ("ofconn_rx_msgs", &self.rx_msgs),
            ("ofconn_tx_msgs", &self.tx_msgs),
            ("ofconn_errors", &self.errors),
            ("ofproto_flow_mods", &self.flow_mods),
            ("ofproto_packet_in", &self.packet_ins),
            (
                "ofproto_packet_in_rate_dropped",
                &self.packet_in_rate_dropped,
            ),
            (
                "ofproto_packet_in_queue_dropped",
                &self.packet_in_queue_dropped,
            ),
            ("ofproto_packet_out", &self.packet_outs),
            ("ofconn_async_dropped", &self.async_dropped),
            ("ofproto_bundle_commit", &self.bundle_commits),
        ];
        let mut out = String::from("Event coverage (totals since the switch started):\n");
        for (name, v) in rows {
            out.push_str(&format!(
                "{name:<36} total: {}\n",
                v.load(std::sync::atomic::Ordering::Relaxed)
            ));
        }
        out
    }
}
