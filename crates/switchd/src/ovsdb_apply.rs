//! Applying one bridge's OVSDB rows to its switch: the ports (added,
//! removed, tried again), their rx queues' PMD affinity, and the
//! `Open_vSwitch.other_config` datapath keys; what the OVSDB thread
//! ([`crate::ovsdb_sync`]) keeps per bridge between rounds.

use crate::control::Control;
use crate::ovsdb_rows::{ovs_error, Want};
use crate::sampler::CollectorSet;
use flowpath_ovsdb::Uuid;
use std::collections::{BTreeMap, BTreeSet};

/// What the thread keeps per bridge.
#[derive(Default)]
pub(crate) struct BridgeState {
    /// Interfaces this thread made ports of: name → (port, spec).
    pub(crate) managed: BTreeMap<String, (u32, String)>,
    /// Interfaces whose port could not be opened: name → (spec, error).
    pub(crate) failed: BTreeMap<String, (String, String)>,
    /// `other_config` keys applied last.
    pub(crate) applied_config: BTreeMap<String, String>,
    /// `pmd-rxq-affinity` applied last, by interface: (port, value).
    pub(crate) affinity: BTreeMap<String, (u32, String)>,
    /// The collector sets given on the command line (kept), and those
    /// in force now.
    pub(crate) fixed_sets: Option<Vec<CollectorSet>>,
    pub(crate) sets: Vec<CollectorSet>,
}

/// Logs `line` once until the next reconnection.
pub(crate) fn say(said: &mut BTreeSet<String>, line: String) {
    if said.insert(line.clone()) {
        eprintln!("{line}");
    }
}

/// Places the rx queues of the interfaces whose `pmd-rxq-affinity`
/// changed (or whose port is new) as it says; an interface that lost it
/// gets the default placement back.
pub(crate) fn apply_affinity(
    ctl: &Control,
    st: &mut BridgeState,
    want: &BTreeMap<String, String>,
    said: &mut BTreeSet<String>,
) {
    let mut next = BTreeMap::new();
    for (name, (no, _)) in &st.managed {
        let v = want.get(name).cloned().unwrap_or_default();
        let before = st.affinity.get(name);
        next.insert(name.clone(), (*no, v.clone()));
        if before.map_or(v.is_empty(), |b| *b == (*no, v.clone())) {
            continue;
        }
        let r = crate::pmd_admin::parse_affinity(&v).and_then(|m| ctl.set_rxq_affinity(*no, &m));
        match r {
            Ok(notes) => {
                for l in notes.lines() {
                    say(
                        said,
                        format!("flowpath: ovsdb: interface {name}: pmd-rxq-affinity: {l}"),
                    );
                }
            }
            Err(e) => say(
                said,
                format!("flowpath: ovsdb: interface {name}: pmd-rxq-affinity={v}: {e}"),
            ),
        }
    }
    st.affinity = next;
}

/// Removes the ports this thread made that are no longer wanted as they
/// are, and adds the wanted ones that are missing (with `retry`, also
/// those that failed before).
pub(crate) fn sync_ports(
    ctl: &Control,
    st: &mut BridgeState,
    ifaces: &[(Uuid, String, Want)],
    before: &BTreeMap<String, u32>,
    retry: bool,
) {
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
    for (_, n, w) in ifaces {
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
}

/// Applies `Open_vSwitch.other_config`'s datapath keys that changed
/// (through `config/set`, so with the same checks); unknown keys are
/// logged once. True when the PMD threads moved or were replaced.
pub(crate) fn apply_other_config(
    ctl: &Control,
    other: &BTreeMap<String, String>,
    applied: &mut BTreeMap<String, String>,
    said: &mut BTreeSet<String>,
) -> bool {
    let mut pmds_changed = false;
    for (k, v) in other {
        if applied.get(k) == Some(v) {
            continue;
        }
        if k == "vhost-sock-dir" {
            // Read where vhost-user server sockets are made.
            applied.insert(k.clone(), v.clone());
            continue;
        }
        let key = k.strip_prefix("flowpath-").unwrap_or(k);
        // OVS's SMC switch is flowpath's second-level cache choice.
        let (key, v) = match (key, v.as_str()) {
            ("smc-enable", "true") => ("second-level", "smc"),
            ("smc-enable", _) => ("second-level", "none"),
            _ => (key, v.as_str()),
        };
        if key == "pmd-cpu-mask" {
            match crate::pmd_admin::parse_cpu_mask(v).and_then(|c| ctl.set_pmd_cpus(&c)) {
                Ok(_) => {
                    applied.insert(k.clone(), other[k].clone());
                    pmds_changed = true;
                }
                Err(e) => say(said, format!("flowpath: ovsdb: other_config:{k}={v}: {e}")),
            }
            continue;
        }
        let why = match key {
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
                said,
                format!("flowpath: ovsdb: other_config:{k} not applied: {why}"),
            );
            continue;
        }
        if flowpath_datapath::keys::key(key).is_none() {
            say(said, format!("flowpath: ovsdb: other_config:{k} is not a key flowpath takes (config/show lists them)"));
            continue;
        }
        match ctl.config_set(&[format!("{key}={v}")]) {
            Ok(_) => {
                applied.insert(k.clone(), other[k].clone());
            }
            Err(e) => say(said, format!("flowpath: ovsdb: other_config:{k}={v}: {e}")),
        }
    }
    pmds_changed
}
