//! The switch configured from an `ovsdb-server` with Open vSwitch's schema
//! (`flowpath switch --ovsdb REMOTE`), as `ovs-vswitchd` is: a thread
//! monitors `Open_vSwitch`, `Bridge`, `Port` and `Interface`, and applies
//! what they say while the switch runs — the ports of the bridge named by
//! `--bridge` (it must have `datapath_type=netdev`) and of every other
//! netdev bridge (each started as a switch of its own, see
//! [`crate::bridges`]; stopped when its row goes), `ofport_request`,
//! interface types and options, the datapath keys in
//! `Open_vSwitch.other_config` — then writes back what `ovs-vswitchd`
//! writes: `Interface.ofport` (or `-1` and `error`), `admin_state`,
//! `link_state`, `statistics` (every 5 s), `Open_vSwitch.cur_cfg` (so
//! that `ovs-vsctl --wait` returns once a change is in effect),
//! `datapath_types`, `iface_types`, `dpdk_initialized`.
//!
//! A lost server is reconnected with a back-off (1 s doubling to 8 s);
//! forwarding goes on meanwhile, and the configuration is read again from
//! scratch when it is back. Ports given with `--port` stay as they are:
//! only the ports this thread added are removed when their rows go.

use crate::bridges::Bridges;
use crate::control::Control;
use crate::ovsdb_apply::{apply_affinity, apply_other_config, say, sync_ports, BridgeState};
use crate::ovsdb_rows::{vlan_mode, want, Want, IFACE_TYPES};
use crate::sampler::CollectorSet;
use flowpath_ofproto::normal::VlanMode;
use flowpath_ovsdb::{
    Atom, Client, Condition, Error, Operation, RowRef, TableMonitor, Uuid, Value,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const DB: &str = "Open_vSwitch";

/// How often `Interface.statistics` is written (OVS's
/// `stats-update-interval` default).
const STATS_INTERVAL: Duration = Duration::from_secs(5);

/// How often ports that could not be opened are tried again (a device
/// that appears later, or one the kernel has not released yet).
const RETRY_INTERVAL: Duration = Duration::from_secs(2);

/// What the thread keeps between rounds.
#[derive(Default)]
struct State {
    /// The first bridge's.
    br: BridgeState,
    /// What was written last per interface (to write only changes).
    written: BTreeMap<Uuid, (i64, Option<String>)>,
    /// Things said once in the log.
    said: BTreeSet<String>,
    /// `Controller.is_connected` as written last, by row.
    connected: BTreeMap<Uuid, bool>,
}

/// A bridge this thread started (another netdev bridge of the database).
pub trait OtherBridge: Send {
    /// Its command handler.
    fn control(&self) -> Control;
    /// Stops it: PMDs, ports (closed), OpenFlow socket.
    fn stop(self: Box<Self>);
}

/// Starts bridge `NAME` (the first bridge's settings, no ports).
pub type Spawn = Box<dyn Fn(&str) -> Result<Box<dyn OtherBridge>, String> + Send>;

/// The other bridges: how to start one, those running, and the control
/// socket's registry of them.
pub struct Others {
    /// The run directory (control and OpenFlow sockets).
    rundir: std::path::PathBuf,
    registry: Arc<Bridges>,
    spawn: Spawn,
    running: BTreeMap<String, Running>,
}

struct Running {
    sw: Box<dyn OtherBridge>,
    ctl: Control,
    st: BridgeState,
}

impl Others {
    /// Bridges started with `spawn`, listed in `registry` while they run;
    /// `rundir` holds the sockets.
    pub fn new(rundir: std::path::PathBuf, registry: Arc<Bridges>, spawn: Spawn) -> Others {
        Others {
            rundir,
            registry,
            spawn,
            running: BTreeMap::new(),
        }
    }

    /// Stops bridge `name`.
    fn stop(&mut self, name: &str) {
        self.registry.remove(name);
        if let Some(r) = self.running.remove(name) {
            r.sw.stop();
            eprintln!("flowpath: ovsdb: bridge {name} stopped");
        }
    }

    fn any_failed(&self) -> bool {
        self.running.values().any(|r| !r.st.failed.is_empty())
    }
}

/// Runs until `stop`: connects to `remote`, applies the configuration,
/// follows its changes.
pub fn run(
    ctl: Control,
    remote: String,
    tls: Option<flowpath_ovsdb::TlsConfig>,
    bridge: String,
    stop: Arc<AtomicBool>,
    mut others: Others,
) {
    let mut st = State::default();
    let mut backoff = Duration::from_secs(1);
    let mut client: Option<Client> = None;
    let mut last_stats = Instant::now();
    let mut last_retry = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let Some(c) = client.as_mut() else {
            match connect(&remote, tls.clone()) {
                Ok(c) => {
                    eprintln!("flowpath: ovsdb: connected to {remote}");
                    backoff = Duration::from_secs(1);
                    client = Some(c);
                    st.written.clear();
                    st.connected.clear();
                    if let Some(c) = client.as_mut() {
                        if let Err(e) = reconcile(&ctl, c, &bridge, &mut st, false, &mut others) {
                            eprintln!("flowpath: ovsdb: {e}");
                        }
                    }
                }
                Err(e) => {
                    say(
                        &mut st.said,
                        format!("flowpath: ovsdb: cannot connect to {remote}: {e}; retrying"),
                    );
                    sleep_unless(&stop, backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(8));
                }
            }
            continue;
        };
        match c.next_update(Duration::from_millis(200)) {
            Ok(Some(_)) => {
                // Take every queued update before applying.
                while let Ok(Some(_)) = c.next_update(Duration::ZERO) {}
                if let Err(e) = reconcile(&ctl, c, &bridge, &mut st, false, &mut others) {
                    eprintln!("flowpath: ovsdb: {e}");
                }
            }
            Ok(None) => {}
            Err(e) => {
                eprintln!("flowpath: ovsdb: connection to {remote} lost ({e}); reconnecting");
                client = None;
                st.said.clear();
                continue;
            }
        }
        if let Err(e) = write_connected(&ctl, &bridge, &others, c, &mut st) {
            if is_disconnect(&e) {
                client = None;
                continue;
            }
        }
        if (!st.br.failed.is_empty() || others.any_failed())
            && last_retry.elapsed() >= RETRY_INTERVAL
        {
            last_retry = Instant::now();
            if let Err(e) = reconcile(&ctl, c, &bridge, &mut st, true, &mut others) {
                if is_disconnect(&e) {
                    client = None;
                    continue;
                }
            }
        }
        if last_stats.elapsed() >= STATS_INTERVAL {
            last_stats = Instant::now();
            let mut all = vec![(&ctl, &st.br)];
            all.extend(others.running.values().map(|r| (&r.ctl, &r.st)));
            if let Err(e) = write_stats(c, &all) {
                if is_disconnect(&e) {
                    client = None;
                }
            }
        }
    }
    let names: Vec<String> = others.running.keys().cloned().collect();
    for n in names {
        others.stop(&n);
    }
}

/// `Open_vSwitch.other_config:pmd-cpu-mask` as the switch starts (its
/// PMD threads are made then: one per CPU of the mask); `None` when the
/// server does not answer within a second, or has no mask (logged when it
/// has a bad one).
pub(crate) fn pmd_cpus_at_start(
    remote: &str,
    tls: Option<flowpath_ovsdb::TlsConfig>,
) -> Option<Vec<usize>> {
    let mut c = Client::connect_with(remote, tls).ok()?;
    c.set_timeout(Duration::from_secs(1));
    c.monitor(
        DB,
        &[TableMonitor::columns("Open_vSwitch", &["other_config"])],
    )
    .ok()?;
    let row = c.replica().rows("Open_vSwitch").next()?;
    let mask = row
        .string_map("other_config")
        .ok()?
        .get("pmd-cpu-mask")?
        .to_string();
    let ncpu = flowpath_io::affinity::online_cpus();
    match crate::pmd_admin::parse_cpu_mask(&mask) {
        Ok(cpus) if cpus.iter().all(|c| *c < ncpu) => Some(cpus),
        Ok(_) => {
            eprintln!("flowpath: ovsdb: other_config:pmd-cpu-mask={mask} names CPUs this machine does not have (0-{}): one PMD thread, not pinned", ncpu - 1);
            None
        }
        Err(e) => {
            eprintln!("flowpath: ovsdb: other_config:pmd-cpu-mask: {e}");
            None
        }
    }
}

fn is_disconnect(e: &Error) -> bool {
    matches!(
        e,
        Error::Disconnected { .. } | Error::NotConnected { .. } | Error::Io { .. }
    )
}

fn sleep_unless(stop: &AtomicBool, d: Duration) {
    let t0 = Instant::now();
    while t0.elapsed() < d && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn connect(remote: &str, tls: Option<flowpath_ovsdb::TlsConfig>) -> Result<Client, Error> {
    let mut c = Client::connect_with(remote, tls)?;
    c.set_timeout(Duration::from_secs(10));
    c.monitor(
        DB,
        &[
            TableMonitor::columns(
                "Open_vSwitch",
                &["bridges", "next_cfg", "cur_cfg", "other_config"],
            ),
            TableMonitor::columns(
                "Bridge",
                &[
                    "name",
                    "datapath_type",
                    "ports",
                    "controller",
                    "fail_mode",
                    "other_config",
                    "protocols",
                    "mcast_snooping_enable",
                    "flow_tables",
                ],
            ),
            TableMonitor::columns("Controller", &["target", "inactivity_probe", "max_backoff"]),
            TableMonitor::columns("Flow_Sample_Collector_Set", &["id", "bridge", "ipfix"]),
            TableMonitor::columns("IPFIX", &["targets"]),
            TableMonitor::columns("Flow_Table", &["prefixes"]),
            TableMonitor::columns(
                "Port",
                &["name", "interfaces", "tag", "trunks", "vlan_mode"],
            ),
            TableMonitor::columns(
                "Interface",
                &[
                    "name",
                    "type",
                    "options",
                    "ofport_request",
                    "ofport",
                    "other_config",
                ],
            ),
        ],
    )?;
    Ok(c)
}

/// Applies the database's configuration and writes back what it did;
/// with `retry`, ports that failed to open are tried again.
fn reconcile(
    ctl: &Control,
    c: &mut Client,
    bridge: &str,
    st: &mut State,
    retry: bool,
    others: &mut Others,
) -> Result<(), Error> {
    let r = c.replica();
    let Some(ovs) = r.rows("Open_vSwitch").next() else {
        // `ovs-vsctl init` has not run yet.
        return Ok(());
    };
    let ovs_uuid = ovs.uuid().clone();
    let next_cfg = ovs.integer("next_cfg").unwrap_or(0);
    let other: BTreeMap<String, String> = ovs
        .string_map("other_config")?
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let bridges: Vec<&Uuid> = ovs.uuids("bridges")?;
    // What to write back per interface: uuid, name, ofport, error.
    let mut writes: Vec<(Uuid, String, i64, Option<String>)> = Vec::new();
    // Each bridge's row and datapath id.
    let mut dpids: Vec<(Uuid, u64)> = Vec::new();
    let mut present: BTreeSet<String> = BTreeSet::new();
    for b in bridges.iter().filter_map(|u| r.row("Bridge", u)) {
        let name = b.string("name")?;
        let dt = b.string("datapath_type")?;
        if dt != "netdev" {
            say(&mut st.said, format!("flowpath: ovsdb: bridge {name} has datapath_type {dt:?}: flowpath is a netdev (userspace) datapath; set datapath_type=netdev"));
            continue;
        }
        let env = Env {
            r,
            other: &other,
            retry,
            sock_dir: others
                .rundir
                .join(other.get("vhost-sock-dir").map_or("", String::as_str)),
        };
        if name == bridge {
            let dpid = apply_bridge(ctl, &env, &b, 1, &mut st.br, &mut st.said, &mut writes)?;
            dpids.push((b.uuid().clone(), dpid));
            continue;
        }
        present.insert(name.to_string());
        if !others.running.contains_key(name) {
            match (others.spawn)(name) {
                Ok(sw) => {
                    eprintln!("flowpath: ovsdb: bridge {name} started");
                    others.registry.insert(name, sw.control());
                    let ctl = sw.control();
                    others.running.insert(
                        name.to_string(),
                        Running {
                            sw,
                            ctl,
                            st: BridgeState::default(),
                        },
                    );
                }
                Err(e) => {
                    say(
                        &mut st.said,
                        format!("flowpath: ovsdb: bridge {name}: cannot start: {e}"),
                    );
                    continue;
                }
            }
        }
        let Some(run) = others.running.get_mut(name) else {
            continue;
        };
        let dpid = apply_bridge(
            &run.ctl,
            &env,
            &b,
            default_dpid(name),
            &mut run.st,
            &mut st.said,
            &mut writes,
        )?;
        dpids.push((b.uuid().clone(), dpid));
    }
    let gone: Vec<String> = others
        .running
        .keys()
        .filter(|n| !present.contains(*n))
        .cloned()
        .collect();
    for n in gone {
        others.stop(&n);
    }
    // Write back: each interface's ofport and error, each bridge's
    // datapath id, then cur_cfg.
    let mut ops = Vec::new();
    for (uuid, n, ofport, error) in writes {
        if st.written.get(&uuid) == Some(&(ofport, error.clone())) {
            continue;
        }
        let up = if ofport > 0 { "up" } else { "down" };
        let mut row = BTreeMap::new();
        // The device's address and MTU, where it has one.
        let sys = std::path::Path::new("/sys/class/net").join(&n);
        if ofport > 0 {
            if let Ok(mac) = std::fs::read_to_string(sys.join("address")) {
                row.insert("mac_in_use".to_string(), Value::from(mac.trim()));
            }
            if let Some(mtu) = std::fs::read_to_string(sys.join("mtu"))
                .ok()
                .and_then(|m| m.trim().parse::<i64>().ok())
            {
                row.insert("mtu".to_string(), Value::from(mtu));
            }
        }
        row.insert("ofport".to_string(), Value::from(ofport));
        row.insert(
            "error".to_string(),
            error.clone().map_or_else(Value::empty, Value::from),
        );
        row.insert("admin_state".to_string(), Value::from(up));
        row.insert("link_state".to_string(), Value::from(up));
        ops.push(Operation::Update {
            table: "Interface".into(),
            conditions: vec![Condition::uuid(&uuid)],
            row,
        });
        st.written.insert(uuid, (ofport, error));
    }
    for (uuid, dpid) in &dpids {
        let mut row = BTreeMap::new();
        row.insert(
            "datapath_id".to_string(),
            Value::from(format!("{dpid:016x}")),
        );
        ops.push(Operation::Update {
            table: "Bridge".into(),
            conditions: vec![Condition::uuid(uuid)],
            row,
        });
    }
    let mut row = BTreeMap::new();
    row.insert("cur_cfg".to_string(), Value::from(next_cfg));
    row.insert("datapath_types".to_string(), Value::set(["netdev"]));
    row.insert(
        "iface_types".to_string(),
        Value::set(IFACE_TYPES.iter().copied()),
    );
    row.insert("dpdk_initialized".to_string(), Value::from(false));
    ops.push(Operation::Update {
        table: "Open_vSwitch".into(),
        conditions: vec![Condition::uuid(&ovs_uuid)],
        row,
    });
    c.transact(DB, &ops)?;
    Ok(())
}

/// What every bridge's round reads.
struct Env<'a> {
    r: &'a flowpath_ovsdb::Replica,
    other: &'a BTreeMap<String, String>,
    retry: bool,
    /// Where server-mode vhost-user sockets are made: the run directory,
    /// or `other_config:vhost-sock-dir` under it.
    sock_dir: std::path::PathBuf,
}

/// The datapath id of a bridge other than the first without
/// `other_config:datapath-id`: 48 bits from its name (the same after a
/// restart, different between bridges), as a locally administered MAC
/// address, the form OVS's ids take.
fn default_dpid(name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    (h & 0x0000_fcff_ffff_ffff) | 0x0000_0200_0000_0000
}

/// Applies bridge row `b` to the switch `ctl` drives: its controllers,
/// fail mode, protocols, prefixes, ports, collector sets, VLAN modes and
/// the datapath keys; adds what to write back per interface to
/// `writes`. Returns the bridge's datapath id (`other_config:datapath-id`
/// or `dpid`).
fn apply_bridge(
    ctl: &Control,
    env: &Env<'_>,
    b: &RowRef<'_>,
    dpid: u64,
    st: &mut BridgeState,
    said: &mut BTreeSet<String>,
    writes: &mut Vec<(Uuid, String, i64, Option<String>)>,
) -> Result<u64, Error> {
    let r = env.r;
    let name = b.string("name")?;
    // The interfaces of the bridge: uuid, name, want; each interface's
    // 802.1Q mode (its port's).
    let mut ifaces: Vec<(Uuid, String, Want)> = Vec::new();
    // The number each interface had before (its `ofport` column): a
    // restarted switch gives it back when free, as Open vSwitch does, so
    // that the numbers in controllers' flows stay right.
    let mut before: BTreeMap<String, u32> = BTreeMap::new();
    let mut vlan_of: BTreeMap<String, VlanMode> = BTreeMap::new();
    let mut affinity: BTreeMap<String, String> = BTreeMap::new();
    let mut targets: Vec<crate::shared::ControllerRow> = Vec::new();
    let mut versions = 0u32;
    let mut table_prefixes: Vec<(u8, Vec<flowpath_flow::FieldId>)> = Vec::new();
    // Controllers and the fail mode (OVS's default: standalone).
    for ctl_row in b
        .uuids("controller")?
        .into_iter()
        .filter_map(|u| r.row("Controller", u))
    {
        let ms = |col: &str| -> Result<Option<u64>, Error> {
            Ok(ctl_row
                .optional_integer(col)?
                .and_then(|v| u64::try_from(v).ok()))
        };
        targets.push(crate::shared::ControllerRow {
            target: ctl_row.string("target")?.to_string(),
            probe_ms: ms("inactivity_probe")?,
            max_backoff_ms: ms("max_backoff")?,
        });
    }
    let standalone = b.optional_string("fail_mode")? != Some("secure");
    let bo = b.string_map("other_config")?;
    let dpid = match bo.get("datapath-id") {
        Some(s) => match u64::from_str_radix(s.trim_start_matches("0x"), 16) {
            Ok(d) if s.trim_start_matches("0x").len() == 16 => d,
            _ => {
                say(said, format!("flowpath: ovsdb: bridge {name}: other_config:datapath-id={s} is not 16 hex digits"));
                dpid
            }
        },
        None => dpid,
    };
    for p in b.strings("protocols")? {
        match p
            .strip_prefix("OpenFlow1")
            .and_then(|m| m.parse::<u32>().ok())
        {
            Some(minor @ 0..=5) => versions |= 1 << (minor + 1),
            _ => say(
                said,
                format!("flowpath: ovsdb: bridge {name}: protocol {p} unknown"),
            ),
        }
    }
    // Flow_Table prefixes (a row without prefixes: the default).
    if let Ok(Value::Map(pairs)) = b.get("flow_tables") {
        for (k, v) in pairs {
            let (Atom::Integer(t), Atom::Uuid(u)) = (k, v) else {
                continue;
            };
            let Some(ft) = r.row("Flow_Table", u) else {
                continue;
            };
            let list = ft.strings("prefixes")?;
            if list.is_empty() {
                continue;
            }
            match (
                u8::try_from(*t),
                flowpath_ofproto::classifier::parse_prefixes(&list.join(",")),
            ) {
                (Ok(t), Ok(f)) => table_prefixes.push((t, f)),
                (_, Err(e)) => say(
                    said,
                    format!("flowpath: ovsdb: bridge {name}: flow_tables:{t} prefixes: {e}"),
                ),
                (Err(_), _) => say(
                    said,
                    format!("flowpath: ovsdb: bridge {name}: flow_tables:{t}: no such table"),
                ),
            }
        }
    }
    if b.optional_boolean("mcast_snooping_enable")? == Some(true) {
        say(said, format!("flowpath: ovsdb: bridge {name}: mcast_snooping_enable is not supported by flowpath (multicast is flooded)"));
    }
    for p in b
        .uuids("ports")?
        .into_iter()
        .filter_map(|u| r.row("Port", u))
    {
        let mode = match vlan_mode(&p) {
            Ok(m) => m,
            Err(e) => {
                say(
                    said,
                    format!("flowpath: ovsdb: port {}: {e}", p.string("name")?),
                );
                VlanMode::TrunkAll
            }
        };
        for i in p
            .uuids("interfaces")?
            .into_iter()
            .filter_map(|u| r.row("Interface", u))
        {
            let (n, w) = want(&i, name, &env.sock_dir)?;
            vlan_of.insert(n.clone(), mode.clone());
            if let Some(no) = i
                .optional_integer("ofport")
                .ok()
                .flatten()
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| (1..0xff00).contains(n))
            {
                before.insert(n.clone(), no);
            }
            if let Some(a) = i.string_map("other_config")?.get("pmd-rxq-affinity") {
                affinity.insert(n.clone(), a.to_string());
            }
            ifaces.push((i.uuid().clone(), n, w));
        }
    }
    sync_ports(ctl, st, &ifaces, &before, env.retry);
    if apply_other_config(ctl, env.other, &mut st.applied_config, said) {
        // New PMD threads: every queue's place is decided again.
        st.affinity.clear();
    }
    apply_affinity(ctl, st, &affinity, said);
    if let Some(ch) = ctl.shared().channel_control.get() {
        ch.set_datapath_id(dpid);
        ch.set_versions(versions);
        ch.set_fail_standalone(standalone);
        if let Err(e) = ch.set_controllers(&targets) {
            say(said, format!("flowpath: ovsdb: {e}"));
        }
    }
    // Flow-sample collector sets of the bridge, with their IPFIX
    // collector (the first target).
    let fixed = st
        .fixed_sets
        .get_or_insert_with(|| ctl.shared().sampler.sets())
        .clone();
    let mut sets = fixed;
    for f in r.rows("Flow_Sample_Collector_Set") {
        if f.uuid_ref("bridge").ok() != Some(b.uuid()) {
            continue;
        }
        let Ok(id) = u32::try_from(f.integer("id")?) else {
            continue;
        };
        let target = f
            .uuids("ipfix")?
            .first()
            .and_then(|u| r.row("IPFIX", u))
            .and_then(|i| i.strings("targets").ok())
            .and_then(|t| t.first().and_then(|t| t.parse().ok()));
        sets.retain(|c| c.id != id);
        sets.push(CollectorSet { id, target });
    }
    sets.sort_by_key(|c| c.id);
    if sets != st.sets {
        match ctl.set_collector_sets(&sets) {
            Ok(()) => st.sets = sets,
            Err(e) => eprintln!("flowpath: ovsdb: bridge {name}: flow-sample collector sets: {e}"),
        }
    }
    if let Err(e) = ctl.set_table_prefixes(table_prefixes) {
        eprintln!("flowpath: ovsdb: bridge {name}: flow table prefixes: {e}");
    }
    let modes: Vec<(u32, VlanMode)> = st
        .managed
        .iter()
        .map(|(n, (no, _))| (*no, vlan_of.get(n).cloned().unwrap_or_default()))
        .collect();
    if let Err(e) = ctl.set_vlan_modes(&modes) {
        eprintln!("flowpath: ovsdb: bridge {name}: VLAN modes: {e}");
    }
    for (uuid, n, w) in ifaces {
        let (ofport, error) = match &w {
            Want::Refused(e) => (-1, Some(e.clone())),
            Want::Port(..) => match (st.managed.get(&n), st.failed.get(&n)) {
                (Some((no, _)), _) => (i64::from(*no), None),
                (None, Some((_, e))) => (-1, Some(e.clone())),
                (None, None) => (-1, None),
            },
        };
        writes.push((uuid, n, ofport, error));
    }
    Ok(dpid)
}

/// Writes `Controller.is_connected` where it changed (each bridge's
/// controllers, as its OpenFlow channel reports them).
fn write_connected(
    ctl: &Control,
    bridge: &str,
    others: &Others,
    c: &mut Client,
    st: &mut State,
) -> Result<(), Error> {
    let mut ops = Vec::new();
    let r = c.replica();
    for b in r.rows("Bridge") {
        let name = b.string("name")?;
        let ctl = if name == bridge {
            ctl
        } else {
            match others.running.get(name) {
                Some(run) => &run.ctl,
                None => continue,
            }
        };
        let Some(ch) = ctl.shared().channel_control.get() else {
            continue;
        };
        let status = ch.controllers();
        for row in b
            .uuids("controller")?
            .into_iter()
            .filter_map(|u| r.row("Controller", u))
        {
            let target = row.string("target")?;
            let canonical = crate::ofchannel::ControllerSpec::parse(target)
                .map(|s| s.to_string())
                .unwrap_or_default();
            let up = status.iter().any(|(t, on)| *on && *t == canonical);
            if st.connected.get(row.uuid()) == Some(&up) {
                continue;
            }
            st.connected.insert(row.uuid().clone(), up);
            let mut r = BTreeMap::new();
            r.insert("is_connected".to_string(), Value::from(up));
            ops.push(Operation::Update {
                table: "Controller".into(),
                conditions: vec![Condition::uuid(row.uuid())],
                row: r,
            });
        }
    }
    if !ops.is_empty() {
        c.transact(DB, &ops)?;
    }
    Ok(())
}

/// Writes each managed interface's counters (`Interface.statistics`),
/// bridge by bridge.
fn write_stats(c: &mut Client, bridges: &[(&Control, &BridgeState)]) -> Result<(), Error> {
    let mut ops = Vec::new();
    for (ctl, st) in bridges {
        if st.managed.is_empty() {
            continue;
        }
        let Ok(text) = ctl.dpctl_show_json() else {
            continue;
        };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        let ports = v["ports"].as_array().cloned().unwrap_or_default();
        for (name, (no, _)) in &st.managed {
            let Some(p) = ports.iter().find(|p| p["port_no"] == *no) else {
                continue;
            };
            let mut m = Vec::new();
            for dir in ["rx", "tx"] {
                for k in ["packets", "bytes", "dropped", "errors"] {
                    let n = p[dir][k].as_i64().unwrap_or(0);
                    m.push((format!("{dir}_{k}"), n));
                }
            }
            let map = Value::map(m);
            let mut row = BTreeMap::new();
            row.insert("statistics".to_string(), map);
            ops.push(Operation::Update {
                table: "Interface".into(),
                conditions: vec![Condition::eq("name", name.as_str())],
                row,
            });
        }
    }
    if !ops.is_empty() {
        c.transact(DB, &ops)?;
    }
    Ok(())
}
