//! Several bridges in one process: the bridges besides the first (those
//! the OVSDB names), and the control socket's routing of a command to the
//! bridge it names.
//!
//! What: the first bridge (`--bridge`) is the switch the process was
//! started as. Every other `Bridge` row with `datapath_type=netdev` is a
//! switch of its own, started by the OVSDB thread from the first one's
//! settings (PMD CPUs, datapath configuration, MAC table size, OpenFlow
//! limits), with its own ports, rules, caches and PMD threads, and its
//! OpenFlow socket `NAME.mgmt` beside the first one's; they share the
//! connection tracker. Patch ports (`patch:NAME,peer=PEER`, OVS's
//! `type=patch` interfaces) carry frames between them.
//!
//! Why one switch per bridge: a bridge's datapath, tables and PMDs are
//! what `Switchd` already is; sharing PMDs and one datapath between
//! bridges (as `ovs-vswitchd` does) would need a datapath port numbering
//! apart from each bridge's OpenFlow numbering. The cost is a second
//! cascade pass for a frame that crosses a patch port (OVS translates
//! through both bridges in one pass); docs/ovsdb.md says so.
//!
//! Threads: the registry is read by control-socket threads and written
//! by the OVSDB thread (which owns the other bridges' switches).

use crate::control::Control;
use flowpath_unixctl::Handler;
use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};

/// The other bridges' command handlers, by bridge name.
#[derive(Default)]
pub struct Bridges {
    map: RwLock<BTreeMap<String, Arc<Control>>>,
}

impl Bridges {
    /// Adds (or replaces) bridge `name`.
    pub fn insert(&self, name: &str, c: Control) {
        self.map
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.to_string(), Arc::new(c));
    }

    /// Removes bridge `name`.
    pub fn remove(&self, name: &str) {
        self.map
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(name);
    }

    /// Bridge `name`'s handler.
    pub fn get(&self, name: &str) -> Option<Arc<Control>> {
        self.map
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned()
    }

    /// The names, in order.
    pub fn names(&self) -> Vec<String> {
        self.map
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect()
    }
}

/// The control socket's handler: a command whose first argument names
/// another bridge runs on that bridge (for commands that take no bridge
/// argument, such as `dpctl/dump-flows`, the name is the datapath and is
/// removed); every other command runs on the first bridge.
pub struct Router {
    /// The first bridge.
    pub first: Control,
    /// The others.
    pub others: Arc<Bridges>,
}

/// Commands whose first argument is a bridge name where they take one
/// (the others, the datapath commands, take the bridge's name as their
/// datapath: it is removed before they run).
fn takes_bridge(method: &str) -> bool {
    !method.starts_with("dpctl/") && !method.starts_with("dpif-netdev/")
}

/// The control socket's command list: the datapath commands that take no
/// datapath argument take one more, the bridge (`dpctl/dump-flows br-ex`).
pub fn command_specs(
    specs: Vec<flowpath_unixctl::CommandSpec>,
) -> Vec<flowpath_unixctl::CommandSpec> {
    specs
        .into_iter()
        .map(|mut c| {
            if !takes_bridge(&c.name) && !c.usage.contains("[DP]") {
                c.max_args += 1;
                c.usage = format!("[BRIDGE] {}", c.usage).trim_end().to_string();
            }
            c
        })
        .collect()
}

impl Handler for Router {
    fn call(&self, method: &str, params: &[String]) -> Result<String, String> {
        if method == "ofproto/list" {
            let mut out = self.first.call(method, params)?;
            for n in self.others.names() {
                out.push_str(&n);
                out.push('\n');
            }
            return Ok(out);
        }
        if let Some(c) = params.first().and_then(|b| self.others.get(b)) {
            let rest = if takes_bridge(method) {
                params
            } else {
                &params[1..]
            };
            return c.call(method, rest);
        }
        if !takes_bridge(method) && params.first().map(String::as_str) == Some(self.first.br()) {
            return self.first.call(method, &params[1..]);
        }
        self.first.call(method, params)
    }
}
