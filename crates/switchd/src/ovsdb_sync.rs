//! The switch configured from an `ovsdb-server` with Open vSwitch's schema
//! (`flowpath switch --ovsdb REMOTE`), as `ovs-vswitchd` is: a thread
//! monitors `Open_vSwitch`, `Bridge`, `Port` and `Interface`, and applies
//! what they say while the switch runs — the ports of the bridge named by
//! `--bridge` (it must have `datapath_type=netdev`), `ofport_request`,
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

use crate::control::Control;
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

/// The interface types flowpath takes (`Open_vSwitch.iface_types`).
const IFACE_TYPES: &[&str] = &[
    "afxdp",
    "dpdkvhostuserclient",
    "geneve",
    "gre",
    "internal",
    "system",
    "tap",
    "vxlan",
];

/// What one interface row asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Want {
    /// A port: the spec and the number asked for.
    Port(String, Option<u32>),
    /// The bridge's own interface (OVS's LOCAL port): flowpath has none;
    /// reported as OpenFlow port 65534.
    Local,
    /// Something flowpath cannot make: the error written.
    Refused(String),
}

/// What the thread keeps between rounds.
#[derive(Default)]
struct State {
    /// Interfaces this thread made ports of: name → (port, spec).
    managed: BTreeMap<String, (u32, String)>,
    /// Interfaces whose port could not be opened: name → (spec, error).
    failed: BTreeMap<String, (String, String)>,
    /// `other_config` keys applied last.
    applied_config: BTreeMap<String, String>,
    /// What was written last per interface (to write only changes).
    written: BTreeMap<Uuid, (i64, Option<String>)>,
    /// Things said once in the log.
    said: BTreeSet<String>,
    /// `Controller.is_connected` as written last, by row.
    connected: BTreeMap<Uuid, bool>,
    /// The collector sets given on the command line (kept), and those
    /// in force now.
    fixed_sets: Option<Vec<CollectorSet>>,
    sets: Vec<CollectorSet>,
}

/// Runs until `stop`: connects to `remote`, applies the configuration,
/// follows its changes.
pub fn run(ctl: Control, remote: String, bridge: String, stop: Arc<AtomicBool>) {
    let mut st = State::default();
    let mut backoff = Duration::from_secs(1);
    let mut client: Option<Client> = None;
    let mut last_stats = Instant::now();
    let mut last_retry = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let Some(c) = client.as_mut() else {
            match connect(&remote) {
                Ok(c) => {
                    eprintln!("flowpath: ovsdb: connected to {remote}");
                    backoff = Duration::from_secs(1);
                    client = Some(c);
                    st.written.clear();
                    st.connected.clear();
                    if let Some(c) = client.as_mut() {
                        if let Err(e) = reconcile(&ctl, c, &bridge, &mut st, false) {
                            eprintln!("flowpath: ovsdb: {e}");
                        }
                    }
                }
                Err(e) => {
                    say(
                        &mut st,
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
                if let Err(e) = reconcile(&ctl, c, &bridge, &mut st, false) {
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
        if let Err(e) = write_connected(&ctl, c, &mut st) {
            if is_disconnect(&e) {
                client = None;
                continue;
            }
        }
        if !st.failed.is_empty() && last_retry.elapsed() >= RETRY_INTERVAL {
            last_retry = Instant::now();
            if let Err(e) = reconcile(&ctl, c, &bridge, &mut st, true) {
                if is_disconnect(&e) {
                    client = None;
                    continue;
                }
            }
        }
        if last_stats.elapsed() >= STATS_INTERVAL {
            last_stats = Instant::now();
            if let Err(e) = write_stats(&ctl, c, &st) {
                if is_disconnect(&e) {
                    client = None;
                }
            }
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

/// Logs `line` once until the next reconnection.
fn say(st: &mut State, line: String) {
    if st.said.insert(line.clone()) {
        eprintln!("{line}");
    }
}

fn connect(remote: &str) -> Result<Client, Error> {
    let mut c = Client::connect(remote)?;
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
            TableMonitor::columns("Controller", &["target"]),
            TableMonitor::columns("Flow_Sample_Collector_Set", &["id", "bridge", "ipfix"]),
            TableMonitor::columns("IPFIX", &["targets"]),
            TableMonitor::columns("Flow_Table", &["prefixes"]),
            TableMonitor::columns(
                "Port",
                &["name", "interfaces", "tag", "trunks", "vlan_mode"],
            ),
            TableMonitor::columns(
                "Interface",
                &["name", "type", "options", "ofport_request", "ofport"],
            ),
        ],
    )?;
    Ok(c)
}

/// What interface `i` asks for on bridge `bridge`.
fn want(i: &RowRef<'_>, bridge: &str) -> Result<(String, Want), Error> {
    let name = i.string("name")?.to_string();
    let ty = i.string("type")?;
    let options = i.string_map("options")?;
    let req = i
        .optional_integer("ofport_request")?
        .and_then(|n| u32::try_from(n).ok());
    let w = match ty {
        "" | "system" => Want::Port(format!("afpacket:{name}"), req),
        "afxdp" => {
            let mut spec = format!("afxdp:{name}");
            match options.get("xdp-mode").copied() {
                Some("native-with-zerocopy") | Some("native") => spec.push_str(",mode=native"),
                Some("generic") => spec.push_str(",mode=generic"),
                _ => {}
            }
            if let Some(n) = options.get("n_rxq") {
                spec.push_str(&format!(",queues={n}"));
            }
            Want::Port(spec, req)
        }
        // OVS-DPDK's client-mode vhost-user port: flowpath connects to the
        // socket the VM (QEMU in server mode) or DPDK application opened.
        "dpdkvhostuserclient" => match options.get("vhost-server-path") {
            Some(path) => Want::Port(format!("vhost-user:{path},client"), req),
            None => Want::Refused(
                "type dpdkvhostuserclient needs options:vhost-server-path".to_string(),
            ),
        },
        // Tunnels over the switch's underlay (`--underlay`), their options
        // as `--port N=vxlan:...` takes them (equal in_key and out_key are
        // the key).
        "vxlan" | "geneve" | "gre" => {
            let (ik, ok) = (options.get("in_key"), options.get("out_key"));
            let mut o: Vec<String> = options
                .iter()
                .filter(|(k, _)| ik != ok || !matches!(**k, "in_key" | "out_key"))
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            if let (Some(k), true, None) = (ik, ik == ok, options.get("key")) {
                o.push(format!("key={k}"));
            }
            Want::Port(format!("{ty}:{}", o.join(",")), req)
        }
        "internal" if name == bridge => Want::Local,
        "internal" | "tap" => Want::Port(format!("tap:{name}"), req),
        other => Want::Refused(format!(
            "flowpath does not support interface type {other:?} (it takes {})",
            IFACE_TYPES.join(", ")
        )),
    };
    Ok((name, w))
}

/// Applies the database's configuration and writes back what it did;
/// with `retry`, ports that failed to open are tried again.
fn reconcile(
    ctl: &Control,
    c: &mut Client,
    bridge: &str,
    st: &mut State,
    retry: bool,
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
    // The interfaces of our bridge: uuid, name, want; each interface's
    // 802.1Q mode (its port's).
    let mut ifaces: Vec<(Uuid, String, Want)> = Vec::new();
    // The number each interface had before (its `ofport` column): a
    // restarted switch gives it back when free, as Open vSwitch does, so
    // that the numbers in controllers' flows stay right.
    let mut before: BTreeMap<String, u32> = BTreeMap::new();
    let mut vlan_of: BTreeMap<String, VlanMode> = BTreeMap::new();
    let mut targets: Vec<String> = Vec::new();
    let mut standalone = true;
    let mut our_bridge: Option<(Uuid, u64)> = None;
    let mut versions = 0u32;
    let mut table_prefixes: Vec<(u8, Vec<flowpath_flow::FieldId>)> = Vec::new();
    for b in bridges.iter().filter_map(|u| r.row("Bridge", u)) {
        let name = b.string("name")?;
        if name != bridge {
            say(st, format!("flowpath: ovsdb: bridge {name} left alone: this switch is bridge {bridge} (--bridge)"));
            continue;
        }
        // Controllers and the fail mode (OVS's default: standalone).
        for ctl_row in b
            .uuids("controller")?
            .into_iter()
            .filter_map(|u| r.row("Controller", u))
        {
            targets.push(ctl_row.string("target")?.to_string());
        }
        standalone = b.optional_string("fail_mode")? != Some("secure");
        let bo = b.string_map("other_config")?;
        let dpid = match bo.get("datapath-id") {
            Some(s) => match u64::from_str_radix(s.trim_start_matches("0x"), 16) {
                Ok(d) if s.trim_start_matches("0x").len() == 16 => d,
                _ => {
                    say(st, format!("flowpath: ovsdb: bridge {name}: other_config:datapath-id={s} is not 16 hex digits"));
                    1
                }
            },
            None => 1,
        };
        our_bridge = Some((b.uuid().clone(), dpid));
        for p in b.strings("protocols")? {
            match p
                .strip_prefix("OpenFlow1")
                .and_then(|m| m.parse::<u32>().ok())
            {
                Some(minor @ 0..=5) => versions |= 1 << (minor + 1),
                _ => say(
                    st,
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
                        st,
                        format!("flowpath: ovsdb: bridge {name}: flow_tables:{t} prefixes: {e}"),
                    ),
                    (Err(_), _) => say(
                        st,
                        format!("flowpath: ovsdb: bridge {name}: flow_tables:{t}: no such table"),
                    ),
                }
            }
        }
        if b.optional_boolean("mcast_snooping_enable")? == Some(true) {
            say(st, format!("flowpath: ovsdb: bridge {name}: mcast_snooping_enable is not supported by flowpath (multicast is flooded)"));
        }
        let dt = b.string("datapath_type")?;
        if dt != "netdev" {
            say(st, format!("flowpath: ovsdb: bridge {name} has datapath_type {dt:?}: flowpath is a netdev (userspace) datapath; set datapath_type=netdev"));
            continue;
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
                        st,
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
                let (n, w) = want(&i, bridge)?;
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
                ifaces.push((i.uuid().clone(), n, w));
            }
        }
    }
    // Ports to remove: managed ones no longer wanted as they are.
    let wanted: BTreeMap<&str, &Want> = ifaces.iter().map(|(_, n, w)| (n.as_str(), w)).collect();
    let gone: Vec<(String, u32)> = st
        .managed
        .iter()
        .filter(|(n, (no, spec))| match wanted.get(n.as_str()) {
            Some(Want::Port(s, req)) => s != spec || req.is_some_and(|r| r != *no),
            _ => true,
        })
        .map(|(n, (no, _))| (n.clone(), *no))
        .collect();
    for (n, no) in gone {
        match ctl.del_if(&[no.to_string()]) {
            Ok(_) => {
                st.managed.remove(&n);
            }
            Err(e) => eprintln!("flowpath: ovsdb: interface {n}: cannot remove port {no}: {e}"),
        }
    }
    st.failed.retain(|n, _| wanted.contains_key(n.as_str()));
    // Ports to add: those with a requested number first, then those
    // getting their number back, then the rest (the next free numbers).
    let mut taken: std::collections::BTreeSet<u32> =
        st.managed.values().map(|(no, _)| *no).collect();
    // (name, spec, number, whether the number is only the one it had)
    let mut adds: Vec<(&String, &String, Option<u32>, bool)> = Vec::new();
    for (_, n, w) in &ifaces {
        let Want::Port(spec, req) = w else {
            continue;
        };
        if st.managed.contains_key(n) {
            continue;
        }
        if !retry && st.failed.get(n).is_some_and(|(s, _)| s == spec) {
            continue;
        }
        if let Some(no) = req {
            taken.insert(*no);
        }
        adds.push((n, spec, *req, false));
    }
    for (n, _, req, again) in adds.iter_mut() {
        if req.is_none() {
            if let Some(no) = before.get(*n).filter(|no| !taken.contains(no)) {
                taken.insert(*no);
                *req = Some(*no);
                *again = true;
            }
        }
    }
    adds.sort_by_key(|(_, _, req, _)| req.is_none());
    for (n, spec, req, again) in adds {
        let arg = match req {
            Some(no) => format!("{no}={spec}"),
            None => spec.clone(),
        };
        // A number it had that something else took since: a new one.
        let added = match ctl.add_if(&[arg]) {
            Err(_) if again => ctl.add_if(std::slice::from_ref(spec)),
            r => r,
        };
        match added {
            Ok(out) => {
                if st.failed.remove(n).is_some() {
                    eprintln!("flowpath: ovsdb: interface {n}: opened");
                }
                // "port N: SPEC added"
                let no = out
                    .strip_prefix("port ")
                    .and_then(|s| s.split(':').next())
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                st.managed.insert(n.clone(), (no, spec.clone()));
            }
            Err(e) => {
                let e = ovs_error(n, spec, &e);
                if st.failed.get(n) != Some(&(spec.clone(), e.clone())) {
                    eprintln!("flowpath: ovsdb: interface {n}: {e}");
                }
                st.failed.insert(n.clone(), (spec.clone(), e));
            }
        }
    }
    if let Some(ch) = ctl.shared().channel_control.get() {
        if let Some((_, dpid)) = &our_bridge {
            ch.set_datapath_id(*dpid);
        }
        ch.set_versions(versions);
        ch.set_fail_standalone(standalone);
        if let Err(e) = ch.set_controllers(&targets) {
            say(st, format!("flowpath: ovsdb: {e}"));
        }
    }
    // Flow-sample collector sets of our bridge, with their IPFIX
    // collector (the first target).
    let fixed = st
        .fixed_sets
        .get_or_insert_with(|| ctl.shared().sampler.sets())
        .clone();
    let mut sets = fixed;
    if let Some((bu, _)) = &our_bridge {
        for f in r.rows("Flow_Sample_Collector_Set") {
            if f.uuid_ref("bridge").ok() != Some(bu) {
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
    }
    sets.sort_by_key(|c| c.id);
    if sets != st.sets {
        match ctl.set_collector_sets(&sets) {
            Ok(()) => st.sets = sets,
            Err(e) => eprintln!("flowpath: ovsdb: flow-sample collector sets: {e}"),
        }
    }
    if our_bridge.is_some() {
        if let Err(e) = ctl.set_table_prefixes(table_prefixes) {
            eprintln!("flowpath: ovsdb: flow table prefixes: {e}");
        }
    }
    apply_other_config(ctl, &other, st);
    let modes: Vec<(u32, VlanMode)> = st
        .managed
        .iter()
        .map(|(n, (no, _))| (*no, vlan_of.get(n).cloned().unwrap_or_default()))
        .collect();
    if let Err(e) = ctl.set_vlan_modes(&modes) {
        eprintln!("flowpath: ovsdb: VLAN modes: {e}");
    }
    // Write back: each interface's ofport and error, then cur_cfg.
    let mut ops = Vec::new();
    for (uuid, n, w) in &ifaces {
        let (ofport, error) = match w {
            Want::Local => (65534, None),
            Want::Refused(e) => (-1, Some(e.clone())),
            Want::Port(..) => match (st.managed.get(n), st.failed.get(n)) {
                (Some((no, _)), _) => (i64::from(*no), None),
                (None, Some((_, e))) => (-1, Some(e.clone())),
                (None, None) => (-1, None),
            },
        };
        if st.written.get(uuid) == Some(&(ofport, error.clone())) {
            continue;
        }
        let up = if ofport > 0 { "up" } else { "down" };
        let mut row = BTreeMap::new();
        // The device's address and MTU, where it has one.
        let sys = std::path::Path::new("/sys/class/net").join(n);
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
            conditions: vec![Condition::uuid(uuid)],
            row,
        });
        st.written.insert(uuid.clone(), (ofport, error));
    }
    if let Some((uuid, dpid)) = &our_bridge {
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

/// A `Port` row's 802.1Q mode for `NORMAL` (`tag`, `trunks`,
/// `vlan_mode`, with Open vSwitch's defaults).
fn vlan_mode(p: &RowRef<'_>) -> Result<VlanMode, String> {
    let tag = p.optional_integer("tag").map_err(|e| e.to_string())?;
    let trunks: Vec<u16> = p
        .integers("trunks")
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter_map(|v| u16::try_from(v).ok())
        .collect();
    let mode = p.optional_string("vlan_mode").map_err(|e| e.to_string())?;
    let tag = tag.and_then(|t| u16::try_from(t).ok());
    let trunk = |mut t: Vec<u16>| {
        if t.is_empty() {
            VlanMode::TrunkAll
        } else {
            t.sort_unstable();
            t.dedup();
            VlanMode::Trunk(t)
        }
    };
    match (mode, tag) {
        (None, Some(t)) if trunks.is_empty() => Ok(VlanMode::Access(t)),
        (None, Some(_)) | (Some("native-tagged" | "native-untagged"), _) => Err(
            "native VLAN modes (tag with trunks) are not supported by flowpath: the port trunks every VLAN".into(),
        ),
        (None, None) | (Some("trunk"), _) => Ok(trunk(trunks)),
        (Some("access"), t) => Ok(VlanMode::Access(t.unwrap_or(0))),
        (Some(m), _) => Err(format!("vlan_mode {m:?} is not one flowpath knows")),
    }
}

/// OVS's text for a port whose device cannot be opened, where it is that
/// case; flowpath's own message otherwise.
fn ovs_error(name: &str, spec: &str, e: &str) -> String {
    // (A tunnel has no device: its own error.)
    if !flowpath_ofproto::tunnel::is_tunnel_spec(spec)
        && !std::path::Path::new("/sys/class/net").join(name).exists()
    {
        format!("could not open network device {name} (No such device)")
    } else {
        e.trim().to_string()
    }
}

/// Applies `Open_vSwitch.other_config`'s datapath keys that changed
/// (through `config/set`, so with the same checks); unknown keys are
/// logged once.
fn apply_other_config(ctl: &Control, other: &BTreeMap<String, String>, st: &mut State) {
    for (k, v) in other {
        if st.applied_config.get(k) == Some(v) {
            continue;
        }
        let key = k.strip_prefix("flowpath-").unwrap_or(k);
        // OVS's SMC switch is flowpath's second-level cache choice.
        let (key, v) = match (key, v.as_str()) {
            ("smc-enable", "true") => ("second-level", "smc"),
            ("smc-enable", _) => ("second-level", "none"),
            _ => (key, v.as_str()),
        };
        let why = match key {
            "pmd-cpu-mask" => Some("PMD threads are placed when the switch starts (--pmd-cpus)"),
            "n-revalidator-threads" | "n-handler-threads" => {
                Some("flowpath has one revalidator thread and handles upcalls on the PMDs")
            }
            "dpdk-init" | "dpdk-extra" | "dpdk-socket-mem" | "dpdk-lcore-mask" => {
                Some("flowpath uses no DPDK")
            }
            "hw-offload" => Some("flowpath offloads no flows to hardware"),
            _ => None,
        };
        if let Some(why) = why {
            say(
                st,
                format!("flowpath: ovsdb: other_config:{k} not applied: {why}"),
            );
            continue;
        }
        if flowpath_datapath::keys::key(key).is_none() {
            say(st, format!("flowpath: ovsdb: other_config:{k} is not a key flowpath takes (config/show lists them)"));
            continue;
        }
        match ctl.config_set(&[format!("{key}={v}")]) {
            Ok(_) => {
                st.applied_config.insert(k.clone(), other[k].clone());
            }
            Err(e) => say(st, format!("flowpath: ovsdb: other_config:{k}={v}: {e}")),
        }
    }
}

/// Writes `Controller.is_connected` where it changed.
fn write_connected(ctl: &Control, c: &mut Client, st: &mut State) -> Result<(), Error> {
    let Some(ch) = ctl.shared().channel_control.get() else {
        return Ok(());
    };
    let status = ch.controllers();
    let mut ops = Vec::new();
    for row in c.replica().rows("Controller") {
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
    if !ops.is_empty() {
        c.transact(DB, &ops)?;
    }
    Ok(())
}

/// Writes each managed interface's counters (`Interface.statistics`).
fn write_stats(ctl: &Control, c: &mut Client, st: &State) -> Result<(), Error> {
    if st.managed.is_empty() {
        return Ok(());
    }
    let Ok(text) = ctl.dpctl_show_json() else {
        return Ok(());
    };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Ok(());
    };
    let ports = v["ports"].as_array().cloned().unwrap_or_default();
    let mut ops = Vec::new();
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
    if !ops.is_empty() {
        c.transact(DB, &ops)?;
    }
    Ok(())
}
