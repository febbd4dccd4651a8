//! The control commands: what `flowpath ctl` and `ovs-appctl -t SOCKET`
//! can ask a running switch. Names, arguments and output follow Open
//! vSwitch where it has the command; a command whose output is a table
//! also takes `--json`.
//!
//! Each handler runs on a control-server thread. It reads or changes the
//! switch's state under the control lock and asks PMDs through their
//! command queues, waiting at most [`PMD_ANSWER_TIMEOUT`] for each — a PMD
//! that does not answer gives an error reply, never a stuck client.

use crate::pmd::{PmdCmd, PmdSnapshot};
use crate::rules::{self, Selector};
use crate::shared::{CtlState, Shared, UpcallStats};
use crate::underlay;
use flowpath_datapath::{keys, Config};
use flowpath_flow::FlowKey;
use flowpath_ofproto::parse::parse_packet;
use flowpath_ofproto::tables::FragMode;
use flowpath_ofproto::xlate::trace_with_ct;
use flowpath_unixctl::{CommandSpec, Handler};
use std::fmt::Write;
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::{Arc, MutexGuard};
use std::time::Duration;

/// How long a handler waits for a PMD's answer.
pub const PMD_ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// A command's handler: the control, its parameters, whether `--json`
/// was among them.
type Run = fn(&Control, &[String], bool) -> Result<String, String>;

/// One control command: its registration is its dispatch.
struct Command {
    name: &'static str,
    usage: &'static str,
    min_args: usize,
    max_args: usize,
    run: Run,
}

const fn cmd(
    name: &'static str,
    usage: &'static str,
    min_args: usize,
    max_args: usize,
    run: Run,
) -> Command {
    Command {
        name,
        usage,
        min_args,
        max_args,
        run,
    }
}

const MANY: usize = usize::MAX;

/// Every command, in `list-commands` order.
static COMMANDS: &[Command] = &[
    cmd("version", "", 0, 0, |_, _, _| {
        Ok(format!("flowpath {}\n", env!("CARGO_PKG_VERSION")))
    }),
    cmd("exit", "", 0, 0, |c, _, _| {
        c.sh.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        Ok(String::new())
    }),
    cmd("dpif-netdev/pmd-stats-show", "[--json]", 0, 1, |c, _, j| {
        c.pmd_stats_show(j)
    }),
    cmd("dpif-netdev/pmd-stats-clear", "", 0, 0, |c, _, _| {
        c.ask_all(PmdCmd::ClearStats)?;
        Ok(String::new())
    }),
    cmd("dpif-netdev/pmd-rxq-show", "[--json]", 0, 1, |c, _, j| {
        c.pmd_rxq_show(j)
    }),
    cmd("dpctl/show", "[--json]", 0, 1, |c, _, j| c.dpctl_show(j)),
    cmd("dpctl/add-if", "[DP] [N=]SPEC", 1, 2, |c, p, _| c.add_if(p)),
    cmd("dpctl/del-if", "[DP] PORT", 1, 2, |c, p, _| c.del_if(p)),
    cmd("dpctl/dump-flows", "[--json]", 0, 1, |c, _, j| {
        c.dump_megaflows(j)
    }),
    cmd("dpctl/del-flows", "", 0, 0, |c, _, _| {
        let n: usize = c.ask_all(PmdCmd::DelFlows)?.iter().sum();
        Ok(format!("{n} megaflows deleted\n"))
    }),
    cmd(
        "dpctl/dump-conntrack",
        "[DP] [-m] [-s] [zone=N]",
        0,
        4,
        |c, p, _| crate::conntrack::dump(&c.sh.conntrack, p),
    ),
    cmd(
        "dpctl/flush-conntrack",
        "[DP] [zone=N] [TUPLE]",
        0,
        4,
        |c, p, _| crate::conntrack::flush(&c.sh.conntrack, p),
    ),
    cmd(
        "dpctl/ct-stats-show",
        "[DP] [-m] [zone=N]",
        0,
        3,
        |c, p, _| crate::conntrack::stats_show(&c.sh.conntrack, p),
    ),
    cmd("dpctl/ct-set-maxconns", "[DP] MAXCONNS", 1, 2, |c, p, _| {
        crate::conntrack::set_maxconns(&c.sh.conntrack, p)
    }),
    cmd("dpctl/ct-get-maxconns", "[DP]", 0, 1, |c, _, _| {
        Ok(format!("{}\n", c.sh.conntrack.max_conns()))
    }),
    cmd("dpctl/ct-get-nconns", "[DP]", 0, 1, |c, _, _| {
        Ok(format!("{}\n", c.sh.conntrack.n_conns()))
    }),
    cmd(
        "dpctl/ct-set-limits",
        "[DP] [default=L] [zone=N,limit=L]...",
        1,
        MANY,
        |c, p, _| crate::conntrack::set_limits(&c.sh.conntrack, p),
    ),
    cmd(
        "dpctl/ct-get-limits",
        "[DP] [zone=N[,zone=N]...]",
        0,
        2,
        |c, p, _| crate::conntrack::get_limits(&c.sh.conntrack, p),
    ),
    cmd(
        "dpctl/ct-del-limits",
        "[DP] zone=N[,zone=N]...",
        1,
        2,
        |c, p, _| crate::conntrack::del_limits(&c.sh.conntrack, p),
    ),
    cmd("dpctl/ipf-set-enabled", "[DP] v4|v6", 1, 2, |c, p, _| {
        crate::conntrack::ipf_enable(&c.sh.ipf, p, true)
    }),
    cmd("dpctl/ipf-set-disabled", "[DP] v4|v6", 1, 2, |c, p, _| {
        crate::conntrack::ipf_enable(&c.sh.ipf, p, false)
    }),
    cmd(
        "dpctl/ipf-set-min-frag",
        "[DP] v4|v6 MINFRAG",
        2,
        3,
        |c, p, _| crate::conntrack::ipf_min_frag(&c.sh.ipf, p),
    ),
    cmd(
        "dpctl/ipf-set-max-nfrags",
        "[DP] MAXFRAGS",
        1,
        2,
        |c, p, _| crate::conntrack::ipf_max_frags(&c.sh.ipf, p),
    ),
    cmd("dpctl/ipf-get-status", "[DP] [-m]", 0, 2, |c, _, _| {
        Ok(crate::conntrack::ipf_status(&c.sh.ipf))
    }),
    cmd(
        "ofproto/trace",
        "[BRIDGE] FLOW [--ct-next STATE]...",
        1,
        MANY,
        |c, p, _| c.trace(p),
    ),
    cmd("add-flow", "RULE", 1, MANY, |c, p, _| c.add_flow(p)),
    cmd("add-flows", "FILE", 1, 1, |c, p, _| {
        c.add_flows(first(p), false)
    }),
    cmd("del-flows", "[MATCH]", 0, MANY, |c, p, _| c.del_flows(p)),
    cmd("replace-flows", "FILE", 1, 1, |c, p, _| {
        c.add_flows(first(p), true)
    }),
    cmd("dump-flows", "[--json] [MATCH]", 0, MANY, |c, p, _| {
        c.dump_rules(p)
    }),
    cmd("config/set", "KEY=VALUE...", 1, MANY, |c, p, _| {
        c.config_set(p)
    }),
    cmd("config/show", "[--json]", 0, 1, |c, _, j| {
        let st = c.state();
        Ok(if j {
            config_json(&st.datapath, st.rules.frag_mode())
        } else {
            let mut s = config_text(&st.datapath, st.rules.frag_mode());
            s.push_str(&crate::conntrack::ct_timeouts_text(
                &c.sh.conntrack.timeouts(),
            ));
            s
        })
    }),
    cmd("upcall/show", "[--json]", 0, 1, |c, _, j| c.upcall_show(j)),
    cmd("upcall/disable-megaflows", "", 0, 0, |c, _, _| {
        c.set_megaflows(false)
    }),
    cmd("upcall/enable-megaflows", "", 0, 0, |c, _, _| {
        c.set_megaflows(true)
    }),
    cmd("upcall/set-flow-limit", "NUMBER", 1, 1, |c, p, _| {
        let n: usize = first(p)
            .parse()
            .map_err(|_| format!("'{}' is not a number", first(p)))?;
        c.config_set(&[format!("flow-limit={n}")])?;
        Ok(format!("set flow_limit to {n}\n"))
    }),
    cmd("revalidator/purge", "", 0, 0, |c, _, _| {
        c.sh.reval_purge()?;
        Ok(String::new())
    }),
    cmd("revalidator/wait", "", 0, 0, |c, _, _| {
        c.sh.reval_wait()?;
        Ok(String::new())
    }),
    cmd("memory/show", "[--json]", 0, 1, |c, _, j| c.memory_show(j)),
    cmd("ofproto/list", "", 0, 0, |c, _, _| {
        Ok(c.sh
            .channel
            .get()
            .map_or(String::new(), |(name, _)| format!("{name}\n")))
    }),
    cmd("bridge/reconnect", "[BRIDGE]", 0, 1, |c, _, _| {
        if let Some(ch) = c.sh.channel_control.get() {
            ch.reconnect();
        }
        Ok(String::new())
    }),
    cmd("bridge/dump-flows", "BRIDGE", 1, 1, |c, p, _| {
        let name = c.sh.channel.get().map_or("br0", |(n, _)| n.as_str());
        if first(p) != name {
            return Err(format!("no such bridge ({})", first(p)));
        }
        let learned = c.sh.bridge.learned.flows();
        let st = c.state();
        Ok(rules::bridge_dump_flows(&st.rules, &learned, st.fail_open))
    }),
    cmd("coverage/show", "", 0, 0, |c, _, _| {
        c.sh.channel
            .get()
            .map(|(_, s)| s.coverage() + &crate::fault::coverage())
            .ok_or_else(|| "no OpenFlow channel".to_string())
    }),
    cmd("dump-groups", "[BRIDGE]", 0, 1, |c, _, _| {
        let st = c.state();
        let mut out = String::new();
        for g in st.rules.groups() {
            let _ = writeln!(out, " {g}");
        }
        Ok(out)
    }),
    cmd("add-group", "GROUP", 1, MANY, |c, p, _| {
        c.change_groups(GroupChange::Add(p.join(" ")))
    }),
    cmd("mod-group", "GROUP", 1, MANY, |c, p, _| {
        c.change_groups(GroupChange::Modify(p.join(" ")))
    }),
    cmd("add-groups", "FILE", 1, 1, |c, p, _| {
        c.change_groups(GroupChange::File(first(p).to_string()))
    }),
    cmd("del-groups", "[group_id=N]", 0, MANY, |c, p, _| {
        c.change_groups(GroupChange::Delete(p.join(" ")))
    }),
    cmd("fdb/show", "[BRIDGE] [--json]", 0, 2, |c, _, j| {
        c.fdb_show(j)
    }),
    cmd("fdb/flush", "[BRIDGE]", 0, 1, |c, _, _| {
        c.sh.bridge.macs().flush();
        Ok("table successfully flushed\n".into())
    }),
    cmd("fdb/stats-show", "[BRIDGE]", 0, 1, |c, _, _| {
        Ok(c.fdb_stats())
    }),
    cmd("tnl/neigh/show", "", 0, 0, |c, _, _| {
        Ok(underlay::neigh_show(c.tnl(), c.br()))
    }),
    cmd("tnl/arp/show", "", 0, 0, |c, _, _| {
        Ok(underlay::neigh_show(c.tnl(), c.br()))
    }),
    cmd("tnl/neigh/set", "BRIDGE IP MAC", 3, 3, |c, p, _| {
        underlay::neigh_set(c.tnl(), p, c.now_ms())
    }),
    cmd("tnl/arp/set", "BRIDGE IP MAC", 3, 3, |c, p, _| {
        underlay::neigh_set(c.tnl(), p, c.now_ms())
    }),
    cmd("tnl/neigh/flush", "", 0, 0, |c, _, _| {
        Ok(underlay::neigh_flush(c.tnl()))
    }),
    cmd("tnl/arp/flush", "", 0, 0, |c, _, _| {
        Ok(underlay::neigh_flush(c.tnl()))
    }),
    cmd("tnl/neigh/aging", "[SECS]", 0, 1, |c, p, _| {
        underlay::neigh_aging(c.tnl(), p)
    }),
    cmd("tnl/ports/show", "", 0, 1, |c, _, _| {
        Ok(underlay::ports_show(c.tnl()))
    }),
    cmd("ovs/route/show", "", 0, 0, |c, _, _| {
        Ok(underlay::route_show(c.tnl()))
    }),
    cmd("ovs/route/add", "IP/PLEN BRIDGE [GW]", 2, 3, |c, p, _| {
        underlay::route_add(c.tnl(), p)
    }),
    cmd("tnl/egress_port_range", "[MIN MAX]", 0, 2, |c, p, _| {
        underlay::egress_port_range(c.tnl(), p)
    }),
    cmd("ovs/route/lookup", "IP", 1, 1, |c, p, _| {
        underlay::route_lookup(c.tnl(), p)
    }),
    cmd("add-tlv-map", "BRIDGE MAP", 2, MANY, |c, p, _| {
        underlay::tlv_add(&c.sh, p)
    }),
    cmd("del-tlv-map", "BRIDGE [MAP]", 1, MANY, |c, p, _| {
        underlay::tlv_del(&c.sh, p)
    }),
    cmd("dump-tlv-map", "[BRIDGE]", 0, 1, |c, _, _| {
        Ok(underlay::tlv_dump(&c.sh))
    }),
    cmd("ovs/route/del", "IP/PLEN", 1, 1, |c, p, _| {
        underlay::route_del(c.tnl(), p)
    }),
];

/// Every command, for `list-commands` and argument checking.
pub fn commands() -> Vec<CommandSpec> {
    COMMANDS
        .iter()
        .map(|c| CommandSpec {
            name: c.name.to_string(),
            usage: c.usage.to_string(),
            min_args: c.min_args,
            max_args: c.max_args,
        })
        .collect()
}

/// A change to the group table.
enum GroupChange {
    /// `add-group`: a new group.
    Add(String),
    /// `mod-group`: replaces an existing group.
    Modify(String),
    /// `add-groups FILE`: adds or replaces each group of a file.
    File(String),
    /// `del-groups [group_id=N]`.
    Delete(String),
}

/// The handler the control server calls.
pub struct Control {
    pub(crate) sh: Arc<Shared>,
}

impl Control {
    /// A handler over the switch's shared state.
    pub fn new(sh: Arc<Shared>) -> Control {
        Control { sh }
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.sh
    }

    /// The tunnels, if the switch has an underlay.
    fn tnl(&self) -> Option<&flowpath_ofproto::tunnel::Tunnels> {
        self.sh.tunnels.as_deref()
    }

    /// The bridge's name.
    pub(crate) fn br(&self) -> &str {
        self.sh.channel.get().map_or("br0", |(n, _)| n.as_str())
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, CtlState> {
        self.sh.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sends `make(reply)` to every PMD and collects the answers in PMD
    /// order.
    pub(crate) fn ask_all<T: Send + 'static>(
        &self,
        make: impl Fn(SyncSender<T>) -> PmdCmd,
    ) -> Result<Vec<T>, String> {
        let mut waiting = Vec::new();
        for p in self.sh.pmds().iter() {
            let (tx, rx) = sync_channel(1);
            match p.try_send(make(tx)) {
                Ok(()) => waiting.push((p.id, rx)),
                Err(TrySendError::Full(_)) => {
                    return Err(format!(
                        "pmd {} is busy (command queue full); try again",
                        p.id
                    ))
                }
                Err(TrySendError::Disconnected(_)) => {
                    return Err(format!("pmd {} has stopped", p.id))
                }
            }
        }
        let mut out = Vec::new();
        for (id, rx) in waiting {
            out.push(
                rx.recv_timeout(PMD_ANSWER_TIMEOUT)
                    .map_err(|_| format!("pmd {id} did not answer within 5 s"))?,
            );
        }
        Ok(out)
    }

    /// Publishes `st.rules`: the PMDs' upcalls use them from the answer
    /// on. The caller then releases the control lock and runs a
    /// revalidator round ([`Control::finish_rule_change`]).
    pub(crate) fn publish(&self, st: &CtlState) -> Result<(), String> {
        let p = if st.fail_open {
            st.rules.publish_fail_open()
        } else {
            st.rules.publish()
        };
        self.install(p)
    }

    /// Makes `p` the PMDs' rules, unless newer rules are in already (the
    /// control socket and the OpenFlow channel's publisher both publish).
    pub(crate) fn install(&self, p: crate::rules::Published) -> Result<(), String> {
        static INSTALL: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _g = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
        if p.version < self.sh.published().version {
            return Ok(());
        }
        self.sh.set_published(p.clone());
        self.ask_all(|r| PmdCmd::SwapRules(p.tables.clone(), r))?;
        Ok(())
    }

    /// After a rule change (lock released): one revalidator round, so that
    /// every megaflow the change affects is gone before the reply.
    pub(crate) fn finish_rule_change(
        &self,
        what: String,
        n_rules: usize,
    ) -> Result<String, String> {
        let before = self.upcall_stats().revalidated;
        self.sh.reval_wait()?;
        let removed = self.upcall_stats().revalidated - before;
        Ok(format!(
            "{what}; {n_rules} rules now, {removed} megaflows revalidated away\n"
        ))
    }

    fn upcall_stats(&self) -> UpcallStats {
        *self
            .sh
            .upcall_stats
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    fn pmd_stats_show(&self, json: bool) -> Result<String, String> {
        let snaps = self.ask_all(PmdCmd::Stats)?;
        if json {
            let v: Vec<serde_json::Value> = snaps.iter().map(snapshot_json).collect();
            return Ok(format!("{}\n", serde_json::Value::Array(v)));
        }
        let mut out = String::new();
        for s in &snaps {
            let _ = writeln!(out, "pmd thread numa_id 0 core_id {}:", core_name(s));
            out.push_str(&s.report.to_string());
            out.push_str(&s.report.cycle_lines(s.idle_cycles));
            let _ = writeln!(out, "  upcall budget drops: {}", s.upcall_budget_drops);
            let _ = writeln!(
                out,
                "  never valid (dropped before classification): {}",
                s.rx_invalid
            );
        }
        // (Packets from the control threads, OpenFlow packet-outs, are
        // counted by no worker.)
        out.push_str("main thread:\n");
        out.push_str(&flowpath_datapath::PmdStats::default().report(0).to_string());
        Ok(out)
    }

    fn pmd_rxq_show(&self, json: bool) -> Result<String, String> {
        let snaps = self.ask_all(PmdCmd::Stats)?;
        if json {
            let v: Vec<serde_json::Value> = snaps
                .iter()
                .map(|s| {
                    serde_json::json!({
                        "pmd": s.id,
                        "core_id": s.core,
                        "rxqs": s.rxqs.iter().map(|q| serde_json::json!({
                            "port_no": q.port_no,
                            "port": q.port,
                            "queue_id": q.queue_id,
                            "usage_pct": usage(s, q.cycles),
                            "packets": q.stats.packets,
                            "enabled": q.failed.is_none(),
                        })).collect::<Vec<_>>(),
                    })
                })
                .collect();
            return Ok(format!("{}\n", serde_json::Value::Array(v)));
        }
        let mut out = String::new();
        for s in &snaps {
            let _ = writeln!(out, "pmd thread numa_id 0 core_id {}:", core_name(s));
            let _ = writeln!(out, "  isolated : false");
            for q in &s.rxqs {
                let _ = writeln!(
                    out,
                    "  port: {:<16} queue-id: {:>2} ({})  pmd usage: {:>3.0} %",
                    q.port,
                    q.queue_id,
                    if q.failed.is_none() {
                        "enabled"
                    } else {
                        "failed"
                    },
                    usage(s, q.cycles)
                );
            }
        }
        Ok(out)
    }

    /// `dpctl/show --json`.
    pub(crate) fn dpctl_show_json(&self) -> Result<String, String> {
        self.dpctl_show(true)
    }

    fn dpctl_show(&self, json: bool) -> Result<String, String> {
        let snaps = self.ask_all(PmdCmd::Stats)?;
        let mut rx: std::collections::BTreeMap<u32, flowpath_netdev::QueueStats> =
            Default::default();
        let (mut hit, mut missed, mut lost, mut flows) = (0u64, 0u64, 0u64, 0u64);
        for s in &snaps {
            for q in &s.rxqs {
                rx.entry(q.port_no).or_default().add(&q.stats);
            }
            let r = &s.report;
            hit += r.emc_hits
                + r.smc_hits
                + r.dfc_hits
                + r.cd_hits
                + r.hybrid_hits
                + r.other_hits
                + r.megaflow_hits;
            missed += r.miss_with_success_upcall + r.miss_with_failed_upcall;
            lost += r.lost;
            flows += r.megaflows;
        }
        let (infos, tx) = (self.sh.ports(), self.sh.tx());
        let ports: Vec<serde_json::Value> = infos
            .iter()
            .map(|p| {
                let r = rx.get(&p.port_no).copied().unwrap_or_default();
                let t = tx.stats(p.port_no);
                serde_json::json!({
                    "port_no": p.port_no, "name": p.name, "type": p.kind,
                    "detail": p.detail, "n_rxq": p.n_rxq, "n_txq": p.n_txq,
                    "rx": {"packets": r.packets, "bytes": r.bytes, "dropped": r.dropped, "errors": r.errors},
                    "tx": {"packets": t.packets, "bytes": t.bytes, "dropped": t.dropped, "errors": t.errors},
                    "rx_csum_partial": r.csum_partial,
                    "rx_too_big": r.too_big,
                })
            })
            .collect();
        if json {
            let v = serde_json::json!({
                "lookups": {"hit": hit, "missed": missed, "lost": lost},
                "flows": flows,
                "ports": ports,
            });
            return Ok(format!("{v}\n"));
        }
        let mut out = String::new();
        let _ = writeln!(out, "flowpath@switch:");
        let _ = writeln!(out, "  lookups: hit:{hit} missed:{missed} lost:{lost}");
        let _ = writeln!(out, "  flows: {flows}");
        for (p, j) in infos.iter().zip(&ports) {
            let detail = if p.detail.is_empty() {
                String::new()
            } else {
                format!(": {}", p.detail)
            };
            let _ = writeln!(out, "  port {}: {} ({}{detail})", p.port_no, p.name, p.kind);
            for dir in ["rx", "tx"] {
                let c = &j[dir];
                let _ = writeln!(
                    out,
                    "    {} packets:{} bytes:{} dropped:{} errors:{}",
                    dir.to_uppercase(),
                    c["packets"],
                    c["bytes"],
                    c["dropped"],
                    c["errors"]
                );
            }
            // Offload state met on receive (AF_XDP ports): partial
            // checksums finished in software, GSO frames the kernel dropped.
            if p.kind == "afxdp" || j["rx_csum_partial"] != 0 || j["rx_too_big"] != 0 {
                let _ = writeln!(
                    out,
                    "    rx_csum_partial:{} rx_too_big:{}",
                    j["rx_csum_partial"], j["rx_too_big"]
                );
            }
        }
        Ok(out)
    }

    fn dump_megaflows(&self, json: bool) -> Result<String, String> {
        if json {
            let all: Vec<serde_json::Value> = self
                .ask_all(PmdCmd::DumpFlowsJson)?
                .into_iter()
                .flatten()
                .collect();
            return Ok(format!("{}\n", serde_json::Value::Array(all)));
        }
        let dumps = self.ask_all(PmdCmd::DumpFlows)?;
        if self.sh.pmds().len() == 1 {
            return Ok(dumps.into_iter().next().unwrap_or_default());
        }
        let mut out = String::new();
        for (p, d) in self.sh.pmds().iter().zip(dumps) {
            let _ = writeln!(out, "flow-dump from pmd on cpu core: {}", core_of(p.core()));
            out.push_str(&d);
        }
        Ok(out)
    }

    fn trace(&self, params: &[String]) -> Result<String, String> {
        // `[BRIDGE] FLOW [--ct-next STATE]...`, as OVS's ofproto/trace.
        let mut ct_next = Vec::new();
        let mut words = Vec::new();
        let mut it = params.iter();
        while let Some(p) = it.next() {
            if p == "--ct-next" {
                let v = it.next().ok_or("--ct-next needs a state (trk|est)")?;
                let info = flowpath_flow::FieldId::CtState.info();
                let (s, _) = flowpath_flow::value::parse_value(info, v)
                    .map_err(|e| format!("--ct-next {v}: {e}"))?;
                ct_next.push(s as u8);
            } else {
                words.push(p.as_str());
            }
        }
        let flow = words.last().copied().unwrap_or("");
        let key: FlowKey = parse_packet(flow).map_err(|e| e.to_string())?;
        let mut tables = self.state().rules.tables();
        let learned = self.sh.bridge.learned.flows();
        if !learned.is_empty() {
            tables = std::sync::Arc::new(tables.with_added(&learned));
        }
        let out = trace_with_ct(
            &*tables,
            Some(&self.sh.bridge),
            &key,
            flow,
            &ct_next,
            self.now_ms(),
        );
        // The translation names no bridge; this one's name, underlined.
        let head = format!("bridge(\"{}\")", self.br());
        Ok(out.replace(
            "bridge(\"br0\")\n-------------\n",
            &format!("{head}\n{}\n", "-".repeat(head.len())),
        ))
    }

    /// The datapath clock (ms since the switch started).
    pub(crate) fn now_ms(&self) -> u64 {
        self.sh.started.elapsed().as_millis() as u64
    }

    /// Changes the rules with `f` under the control lock, publishes them,
    /// and revalidates (lock released).
    fn change_rules(
        &self,
        f: impl FnOnce(&mut rules::RuleSet) -> String,
    ) -> Result<String, String> {
        let (what, n) = {
            let mut st = self.state();
            let what = f(&mut st.rules);
            self.publish(&st)?;
            (what, st.rules.rules().len())
        };
        self.finish_rule_change(what, n)
    }

    fn add_flow(&self, params: &[String]) -> Result<String, String> {
        let text = params.join(" ");
        let rule = rules::parse_one(&text).map_err(|e| e.to_string())?;
        self.state()
            .rules
            .check_new(std::slice::from_ref(&rule))
            .map_err(|e| e.replace("line 0: ", ""))?;
        self.change_rules(|rs| {
            rs.add(vec![rule]);
            "1 rule added".into()
        })
    }

    /// Changes the group table (all or nothing), publishes it and
    /// revalidates. A group that rules or buckets still send to cannot be
    /// deleted (OVS would delete those flows; flowpath asks for it).
    fn change_groups(&self, change: GroupChange) -> Result<String, String> {
        use flowpath_ofproto::group::{parse_group, parse_groups};
        let (msg, n) = {
            let mut st = self.state();
            let mut groups: Vec<flowpath_ofproto::group::Group> = st.rules.groups().to_vec();
            let modify = matches!(change, GroupChange::Modify(_));
            // Existing groups replaced (their counters start again).
            let mut modified: Vec<u32> = Vec::new();
            let msg = match change {
                GroupChange::Add(text) | GroupChange::Modify(text) => {
                    let g = parse_group(&text).map_err(|e| e.to_string())?;
                    let id = g.id;
                    match (groups.iter().position(|o| o.id == id), modify) {
                        (Some(_), false) => {
                            return Err(format!("group {id} exists (mod-group replaces it)"))
                        }
                        (None, true) => {
                            return Err(format!("group {id} does not exist (add-group adds it)"))
                        }
                        (Some(i), true) => {
                            groups[i] = g;
                            modified.push(id);
                        }
                        (None, false) => groups.push(g),
                    }
                    format!("group {id} installed")
                }
                GroupChange::File(file) => {
                    let text = std::fs::read_to_string(&file)
                        .map_err(|e| format!("cannot read {file}: {e}"))?;
                    let new = parse_groups(&text, Some(&file)).map_err(|e| e.to_string())?;
                    let n = new.len();
                    for g in new {
                        match groups.iter().position(|o| o.id == g.id) {
                            Some(i) => {
                                modified.push(g.id);
                                groups[i] = g;
                            }
                            None => groups.push(g),
                        }
                    }
                    format!("{n} groups installed from {file}")
                }
                GroupChange::Delete(sel) => {
                    let sel = sel.trim();
                    let before = groups.len();
                    match sel.strip_prefix("group_id=") {
                        Some(v) => {
                            let id: u32 = v
                                .trim()
                                .parse()
                                .map_err(|_| format!("'{v}' is not a group id"))?;
                            groups.retain(|g| g.id != id);
                        }
                        None if sel.is_empty() || sel == "br0" => groups.clear(),
                        None => return Err(format!("'{sel}': expected group_id=N")),
                    }
                    format!("{} groups deleted", before - groups.len())
                }
            };
            st.rules.set_groups(groups).map_err(|e| {
                format!("groups unchanged: a rule or bucket would lose its group: {e}")
            })?;
            if !modified.is_empty() {
                st.rules.groups_modified(&modified);
            }
            self.publish(&st)?;
            (msg, st.rules.rules().len())
        };
        self.finish_rule_change(msg, n)
    }

    fn add_flows(&self, file: &str, replace: bool) -> Result<String, String> {
        let new = rules::load_file(file)?;
        self.state()
            .rules
            .check_new(&new)
            .map_err(|e| format!("{file}: {e}"))?;
        let n = new.len();
        if replace {
            // As `ovs-ofctl replace-flows`: the table becomes the file,
            // flows `learn` made included.
            self.sh.bridge.learned.remove_where(|_| true);
        }
        self.change_rules(|rs| {
            if replace {
                rs.replace(new);
                format!("rules replaced by {n} from {file}")
            } else {
                rs.add(new);
                format!("{n} rules added from {file}")
            }
        })
    }

    fn del_flows(&self, params: &[String]) -> Result<String, String> {
        let sel = Selector::parse(&params.join(",")).map_err(|e| e.to_string())?;
        // Learned flows go too (the workers rebuild their tables).
        let learned = self.sh.bridge.learned.remove_where(|r| sel.selects(r));
        self.change_rules(|rs| format!("{} rules deleted", rs.delete(&sel) + learned))
    }

    fn upcall_show(&self, json: bool) -> Result<String, String> {
        let u = self.upcall_stats();
        if json {
            return Ok(format!("{}\n", serde_json::to_value(u).unwrap_or_default()));
        }
        let mut out = String::new();
        let _ = writeln!(out, "netdev@flowpath:");
        let _ = writeln!(
            out,
            "  flows         : (current {}) (avg {}) (max {}) (limit {})",
            u.current, u.avg, u.max, u.limit
        );
        let _ = writeln!(out, "  dump duration : {}ms", u.dump_duration_ms);
        let _ = writeln!(
            out,
            "  recirc ids    : (current {}) (freed {})",
            u.recirc_ids, u.recirc_freed
        );
        let _ = writeln!(out, "  ufid enabled : true");
        let _ = writeln!(out);
        let _ = writeln!(out, "  0: (keys {})", u.current);
        Ok(out)
    }

    /// Heap bytes of each PMD's megaflows, and the process's resident
    /// set (OVS's `memory/show` reports counts of its objects; this adds
    /// what they cost).
    fn memory_show(&self, json: bool) -> Result<String, String> {
        let snaps = self.ask_all(PmdCmd::Stats)?;
        let rss_kb = resident_kb();
        if json {
            let pmds: Vec<serde_json::Value> = snaps
                .iter()
                .map(|s| serde_json::json!({"pmd": s.id, "memory": s.memory}))
                .collect();
            return Ok(format!(
                "{}\n",
                serde_json::json!({"pmds": pmds, "rss_kb": rss_kb})
            ));
        }
        let mut out = String::new();
        let (mut flows, mut bytes) = (0usize, 0usize);
        for s in &snaps {
            let m = &s.memory;
            flows += m.megaflows;
            bytes += m.total();
            let _ = writeln!(
                out,
                "pmd {}: megaflows:{} bytes:{} (hot lines {}, counters {}, dpcls {}, actions {} in {} lists)",
                s.id,
                m.megaflows,
                m.total(),
                m.records,
                m.counters,
                m.dpcls,
                m.actions,
                m.action_lists
            );
        }
        let per = bytes.checked_div(flows).unwrap_or(0);
        let _ = writeln!(out, "megaflows:{flows} bytes:{bytes} ({per} per megaflow)");
        if let Some(kb) = rss_kb {
            let _ = writeln!(out, "process resident:{kb} kB");
        }
        Ok(out)
    }

    fn set_megaflows(&self, on: bool) -> Result<String, String> {
        self.config_set(&[format!("megaflows={on}")])?;
        self.sh.reval_purge()?;
        Ok(format!(
            "megaflows {}\n",
            if on { "enabled" } else { "disabled" }
        ))
    }
}

fn first(params: &[String]) -> &str {
    params.first().map_or("", String::as_str)
}

fn usage(s: &PmdSnapshot, cycles: u64) -> f64 {
    let total = s.idle_cycles + s.report.processing_cycles;
    if total == 0 {
        0.0
    } else {
        100.0 * cycles as f64 / total as f64
    }
}

fn core_of(c: Option<usize>) -> String {
    c.map_or("any".to_string(), |c| c.to_string())
}

fn core_name(s: &PmdSnapshot) -> String {
    core_of(s.core)
}

fn snapshot_json(s: &PmdSnapshot) -> serde_json::Value {
    let mut v = serde_json::to_value(s.report).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.insert("pmd".into(), s.id.into());
        o.insert(
            "core_id".into(),
            serde_json::to_value(s.core).unwrap_or_default(),
        );
        o.insert("idle_cycles".into(), s.idle_cycles.into());
        o.insert("emc_occupancy".into(), s.emc_occupancy.into());
        o.insert("rx_oversize".into(), s.rx_oversize.into());
        o.insert("upcall_budget_drops".into(), s.upcall_budget_drops.into());
        o.insert("rx_invalid".into(), s.rx_invalid.into());
        o.insert(
            "output".into(),
            serde_json::to_value(s.sink).unwrap_or_default(),
        );
    }
    v
}

/// `config/show`: every key, `NAME=VALUE` a line.
/// The bridge's own key among `config/set`'s (the others are the
/// datapath's, `keys::KEYS`).
pub(crate) const FRAG_MODE_KEY: &str = "frag-mode";

/// `config/show`: every key, `NAME=VALUE` a line; the bridge's frag mode
/// last.
pub(crate) fn config_text(c: &Config, frag: FragMode) -> String {
    let mut out: String = keys::show(c)
        .into_iter()
        .map(|(k, v)| format!("{k}={v}\n"))
        .collect();
    let _ = writeln!(out, "{FRAG_MODE_KEY}={frag}");
    out
}

/// `config/show --json`: every key, numbers and booleans as JSON's.
fn config_json(c: &Config, frag: FragMode) -> String {
    let mut o: serde_json::Map<String, serde_json::Value> = keys::KEYS
        .iter()
        .map(|k| {
            let j = match k.value(c) {
                keys::Value::Bool(b) => serde_json::Value::Bool(b),
                keys::Value::Number(n) => serde_json::Value::from(n),
                keys::Value::Cache(l) => serde_json::Value::from(l.name()),
            };
            (k.name.to_string(), j)
        })
        .collect();
    o.insert(FRAG_MODE_KEY.into(), frag.name().into());
    format!("{}\n", serde_json::Value::Object(o))
}

impl Handler for Control {
    fn call(&self, method: &str, params: &[String]) -> Result<String, String> {
        let json = params.iter().any(|p| p == "--json");
        let run = || match COMMANDS.iter().find(|c| c.name == method) {
            Some(c) => (c.run)(self, params, json),
            None => crate::hooks::call(&self.sh, method, params)
                .unwrap_or_else(|| Err(format!("\"{method}\" is not a valid command"))),
        };
        crate::fault::guard(crate::fault::Part::Control, "answered with an error", run)
            .unwrap_or_else(|| {
                Err(format!(
                    "\"{method}\" failed: internal error (handler panicked)"
                ))
            })
    }
}

/// The process's resident set size (kB), from /proc/self/status.
fn resident_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
