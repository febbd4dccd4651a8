//! Open vSwitch's own megaflow tests, replayed.
//!
//! `crates/ofproto/tests/data/ovs-at-megaflow.jsonl` transcribes (facts
//! only) the "ofproto-dpif megaflow - …" tests of OVS 3.1's
//! `tests/ofproto-dpif.at`, their neighbours that check `Megaflow:` lines,
//! and the `ofproto/trace` tests of `tests/classifier.at`: rules, bridge
//! settings, packets received, and the datapath flows installed or the
//! `Megaflow:` / `Datapath actions:` lines expected (see its README).
//!
//! Every test whose needs flowpath has (plain flow tables, `NORMAL`, table
//! prefix configuration, megaflows disabled) is replayed: received
//! packets go through a real `Datapath` whose slow path is flowpath's
//! (learning into a MAC table, installing megaflows), and the installed
//! megaflows must be exactly the expected datapath flows (compared as
//! key-under-mask and mask, not as text: flowpath prints megaflows in
//! `ofproto/trace` style); traces must print the expected lines exactly.
//! The tests that need a bridge feature flowpath lacks (bonds, mirrors,
//! recirculation, tunnels, netflow, ...) are listed with
//! what they need, and counted.

use flowpath_datapath::{Batch, Config, Datapath, Upcall};
use flowpath_flow::{FlowKey, FlowMask};
use flowpath_odp::format_actions;
use flowpath_ofproto::action::OFPP_LOCAL;
use flowpath_ofproto::classifier::{parse_prefixes, DEFAULT_PREFIXES};
use flowpath_ofproto::dpflow::parse_dp_flow;
use flowpath_ofproto::normal::{Bridge, MacTable, PortVlans};
use flowpath_ofproto::parse::{parse_packet, parse_rules};
use flowpath_ofproto::tables::RuleTables;
use flowpath_ofproto::xlate::{xlate_on, XlateMode};
use flowpath_slowpath::SlowPath;
use serde_json::Value;
use std::sync::Arc;

/// What flowpath has of the transcribed tests' needs.
/// Instructions are replayed when flowpath accepts the rules (it has
/// `goto_table`, not `write_actions`/`clear_actions`: those tests are then
/// listed as not replayed, with the parser's reason). Packet-ins are
/// compared without OVS's own bookkeeping in them (pid, dont_send,
/// continuation, the continuation's recirculation id).
const SUPPORTED: &[&str] = &[
    "normal",
    "flow-tables-config",
    "megaflows-disabled",
    "openflow13-instructions",
    "other:pmd ports (dummy-pmd, --dummy-numa)",
    "groups",
    "registers",
    "other:push/pop action stack",
    "conjunction",
    "learn",
    "check_pkt_larger",
    "mpls",
    "recirc",
    "controller",
    "other:clone action",
    "other:slow path for ND set actions",
];

/// Tests whose expectation the installed OVS 3.1 itself does not give
/// (checked with `tools/ovs-sandbox.sh`): the autotest suite runs them on
/// its dummy datapath, whose features differ from the userspace datapath
/// flowpath reproduces.
/// Each is accepted only as a megaflow-only difference (the datapath
/// actions must match).
const KNOWN: &[(&str, &str)] = &[
    ("ofproto-dpif - write actions", NW_PROTO_AFTER_SET),
    (
        "ofproto-dpif - all group in action list",
        NW_PROTO_AFTER_SET,
    ),
    ("ofproto-dpif - all group in action set", NW_PROTO_AFTER_SET),
    ("ofproto-dpif - dec_ttl", NW_PROTO_AFTER_DEC_TTL),
    ("ofproto-dpif - load and move order", NW_PROTO_AFTER_MOVE),
];

const NW_PROTO_AFTER_MOVE: &str = "flowpath makes nw_proto exact when an L3 rewrite made by \
    `move` alone is pending (there is no rewrite when it is 0); OVS 3.1 leaves it out, so its \
    megaflow `eth,ip,...` would also give a packet with nw_proto 0 the `set(ipv4(...))` OVS's \
    own translation of it has not (documented in docs/openflow.md)";

const NW_PROTO_AFTER_DEC_TTL: &str = "OVS 3.1's netdev datapath (tools/ovs-sandbox.sh, \
    ofproto/trace ovs-netdev) gives `recirc_id=0,eth,ip,in_port=1,nw_proto=111,nw_ttl=2,nw_frag=no` \
    (dec_ttl makes nw_proto exact), as flowpath does; the test's megaflow is the autotest dummy \
    datapath's";

const NW_PROTO_AFTER_SET: &str = "OVS 3.1's netdev datapath (tools/ovs-sandbox.sh) gives \
    `recirc_id=0,eth,icmp,in_port=1,nw_src=192.168.0.1,nw_frag=no` (nw_proto exact after the \
    IPv4 set_field), as flowpath does; the test's `eth,ip,...` is the autotest dummy datapath's";

/// How `Run::trace` marks a difference in the `Megaflow:` line alone.
const MEGAFLOW_ONLY: &str = "megaflow only: ";

/// How `replay` says that the rules use something flowpath rejects by
/// name (the test is then listed as not replayed, not as failed).
const UNSUPPORTED: &str = "rules use what flowpath does not support: ";

/// OVS's dummy datapath numbers LOCAL 100.
const DP_LOCAL: &str = "100";

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// The prefix fields a test's `Flow_Table` setting names, if that is all
/// its bridge configuration does.
fn table_prefixes(other: &[String]) -> Result<Option<String>, String> {
    let mut prefixes = None;
    for o in other {
        // PMD/NUMA layout of the dummy datapath: nothing to do with flows.
        if o.starts_with("ovs-vswitchd extra options: --dummy-numa") {
            continue;
        }
        if !o.contains("flow_tables:0=") || !o.contains("create Flow_Table") {
            return Err(format!("bridge setting '{o}'"));
        }
        // A Flow_Table row without `prefixes` keeps the defaults.
        if let Some(p) = o.split("prefixes=").nth(1) {
            prefixes = Some(p.split_whitespace().next().unwrap_or("").to_string());
        }
    }
    Ok(prefixes)
}

/// Table 0's prefix fields after `ovs-vsctl set Flow_Table t0
/// prefixes=FIELDS` (`none`, or fields OVS accepts; a field it cannot
/// track, such as `ipv6_label`, is ignored, leaving none).
fn prefixes_of(p: &str) -> Vec<flowpath_flow::field::FieldId> {
    parse_prefixes(p).unwrap_or_default()
}

/// A megaflow as compared: key under mask, and mask, with "no VLAN tag"
/// dropped from both (OVS's datapath flows say it by leaving `vlan()` out),
/// and "no datapath hash" of a packet not recirculated (OVS's exact-match
/// flows say `dp_hash(0)`; no such packet has one, flowpath leaves it out).
fn norm(key: &FlowKey, mask: &FlowMask) -> (FlowKey, FlowMask) {
    let mut m = *mask;
    let mut k = key.masked(mask);
    if k.recirc_id() == 0 && k.dp_hash() == 0 {
        let mut mk = m.to_key();
        mk.set_dp_hash(0);
        m = FlowMask::from_key(&mk);
    }
    if k.vlan_tci() == 0 {
        let mut mk = m.to_key();
        mk.set_vlan_tci(0);
        m = FlowMask::from_key(&mk);
        k.set_vlan_tci(0);
    }
    (k.masked(&m), m)
}

/// The flow part of an expected dump line (`ct_state(-new-…)` flags, all
/// off, read as 0).
fn dump_flow(line: &str) -> Result<(FlowKey, FlowMask), String> {
    let flow = line.split(", actions").next().unwrap_or(line);
    let flow = flow.split(", packets:").next().unwrap_or(flow);
    let flow = flow.replace(
        "ct_state(-new-est-rel-rpl-inv-trk-snat-dnat)",
        "ct_state(0)",
    );
    parse_dp_flow(&flow).map_err(|e| format!("expected flow '{flow}': {e}"))
}

struct Run {
    rules: Vec<flowpath_ofproto::rule::Rule>,
    ports: Vec<u32>,
    tables: Arc<RuleTables>,
    bridge: Arc<Bridge>,
    dp: Datapath,
    sp: SlowPath,
    megaflows: bool,
    now: u64,
}

impl Run {
    /// Rebuilds the tables with other prefix fields (a `Flow_Table`
    /// change), as OVS re-creates its classifier tries.
    fn set_prefixes(&mut self, prefixes: &[flowpath_flow::field::FieldId]) {
        let mut t = RuleTables::new(self.rules.clone(), prefixes);
        t.set_ports(self.ports.clone());
        let _ = t.set_groups(self.tables.groups().cloned().collect());
        let t = Arc::new(t);
        self.tables = t.clone();
        self.sp.set_tables(t);
    }

    fn receive(&mut self, packet: &str) -> Result<(), String> {
        let (key, _) = parse_dp_flow(packet).map_err(|e| format!("packet '{packet}': {e}"))?;
        let mut b = Batch::new();
        b.push(key, 64).map_err(|_| "batch full".to_string())?;
        self.now += 1;
        self.dp.process_batch(&mut b, self.now, &mut self.sp);
        self.sp.after_batch(&mut self.dp, self.now);
        Ok(())
    }

    fn installed(&self) -> Vec<(FlowKey, FlowMask)> {
        let f = self.dp.megaflows();
        let mut v: Vec<_> = f
            .live_refs()
            .filter_map(|r| f.get(r))
            .map(|m| norm(&m.key, &m.mask))
            .collect();
        v.sort_by_key(|(k, m)| (k.w, m.w));
        v
    }

    /// Compares the installed megaflows with the expected dump lines.
    fn dump(&self, expect: &[String]) -> Result<(), String> {
        let mut want = Vec::new();
        for l in expect {
            let (k, m) = dump_flow(l)?;
            want.push(norm(&k, &m));
        }
        want.sort_by_key(|(k, m)| (k.w, m.w));
        want.dedup();
        let got = self.installed();
        let ok = got.len() == want.len()
            && got.iter().zip(&want).all(|((gk, gm), (wk, wm))| {
                if self.megaflows {
                    gk == wk && gm == wm
                } else {
                    // Megaflows off: exact match on the words the packet's
                    // protocol can fill; OVS's exact match also leaves out
                    // zero fields of other protocols. Same key under OVS's
                    // mask, ours at least as narrow, extra bits all zero.
                    let extra = FlowMask {
                        w: std::array::from_fn(|i| gm.w[i] & !wm.w[i]),
                    };
                    gk.masked(wm) == *wk
                        && wm.is_subset_of(gm)
                        && gk.masked(&extra) == FlowKey::zero()
                }
            });
        if ok {
            Ok(())
        } else {
            let show = |v: &[(FlowKey, FlowMask)]| {
                v.iter()
                    .map(|(k, m)| {
                        flowpath_flow::Match::new(k, m).format(flowpath_flow::Style::Megaflow)
                    })
                    .collect::<Vec<_>>()
                    .join("\n    ")
            };
            Err(format!(
                "installed megaflows differ\n  expected:\n    {}\n  flowpath:\n    {}",
                show(&want),
                show(&got)
            ))
        }
    }

    fn trace(&self, flow: &str, expect: &[String]) -> Result<(), String> {
        let key = parse_packet(flow).map_err(|e| format!("trace flow '{flow}': {e}"))?;
        let x = xlate_on(
            &*self.tables,
            Some(&self.bridge),
            &key,
            self.now,
            XlateMode::default(),
        );
        let actions = format_actions(&x.actions)
            .split(',')
            .map(|t| {
                if t == OFPP_LOCAL.to_string() {
                    DP_LOCAL
                } else {
                    t
                }
            })
            .collect::<Vec<_>>()
            .join(",");
        let got = [
            format!("Megaflow: {}", x.megaflow_text(&key)),
            format!("Datapath actions: {actions}"),
        ];
        // OVS's packet-ins carry its own bookkeeping (pid, dont_send,
        // continuation, the continuation's recirculation id), not printed
        // by flowpath.
        // Compared: the `Megaflow:` and `Datapath actions:` lines. Not
        // compared: blank lines, `Final flow:` (a tail taking it along),
        // and OVS's note that a flow with ND or ARP rewrites runs in its
        // slow path (flowpath's datapath executes them).
        let expect: Vec<String> = expect
            .iter()
            .filter(|e| e.starts_with("Megaflow:") || e.starts_with("Datapath actions:"))
            .map(|e| without_ovs_controller_ids(e))
            .collect();
        let missing: Vec<&String> = expect.iter().filter(|e| !got.contains(e)).collect();
        if missing.is_empty() {
            return Ok(());
        }
        // A megaflow-only difference is reported as such (KNOWN matches it).
        let only = if missing.iter().all(|e| e.starts_with("Megaflow:")) {
            MEGAFLOW_ONLY
        } else {
            ""
        };
        Err(format!(
            "{only}trace {flow}\n  expected: {}\n  flowpath: {}",
            missing
                .iter()
                .map(|e| e.as_str())
                .collect::<Vec<_>>()
                .join(" / "),
            got.join(" / ")
        ))
    }
}

/// `userspace(pid=0,controller(reason=R,dont_send=D,continuation=C,
/// recirc_id=N,...` written `userspace(controller(reason=R,...`.
fn without_ovs_controller_ids(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(i) = rest.find("userspace(pid=0,controller(") {
        out.push_str(&rest[..i]);
        out.push_str("userspace(controller(");
        rest = &rest[i + "userspace(pid=0,controller(".len()..];
        let mut kept = Vec::new();
        let end = rest.find(')').unwrap_or(rest.len());
        for kv in rest[..end].split(',') {
            let k = kv.split('=').next().unwrap_or("");
            if !matches!(k, "dont_send" | "continuation" | "recirc_id") {
                kept.push(kv);
            }
        }
        out.push_str(&kept.join(","));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Replays one transcribed test; `Err` says what differed.
fn replay(t: &Value) -> Result<(), String> {
    let rules = strs(&t["rules"]).join("\n");
    let parsed = parse_rules(&rules, None).map_err(|e| {
        if e.msg.contains("not supported by flowpath") {
            format!("{UNSUPPORTED}{e}")
        } else {
            format!("rules: {e}")
        }
    })?;
    let prefixes = match table_prefixes(&strs(&t["bridge"]["other"]))? {
        Some(p) => parse_prefixes(&p).map_err(|e| format!("prefixes {p}: {e}"))?,
        None => DEFAULT_PREFIXES.to_vec(),
    };
    let mut tables = RuleTables::new(parsed.clone(), &prefixes);
    let ports: Vec<u32> = t["bridge"]["ports"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| p.as_u64())
                .map(|p| p as u32)
                .collect()
        })
        .unwrap_or_default();
    tables.set_ports(ports.clone());
    let groups = strs(&t["groups"]).join("\n");
    let groups = flowpath_ofproto::group::parse_groups(&groups, None).map_err(|e| {
        if e.msg.contains("not supported by flowpath") {
            format!("{UNSUPPORTED}{e}")
        } else {
            format!("groups: {e}")
        }
    })?;
    tables
        .set_groups(groups.clone())
        .map_err(|e| format!("groups: {e}"))?;
    let tables = Arc::new(tables);
    let bridge = Arc::new(Bridge::new(MacTable::default(), PortVlans::default(), true));
    let mut run = Run {
        rules: parsed,
        ports,
        tables: tables.clone(),
        bridge: bridge.clone(),
        dp: Datapath::new(Config::default()).map_err(|e| e.to_string())?,
        sp: SlowPath::with_bridge(tables, bridge),
        megaflows: true,
        now: 0,
    };
    for s in t["steps"].as_array().into_iter().flatten() {
        let expect = strs(&s["expect"]);
        match s["kind"].as_str().unwrap_or("") {
            "receive" => run.receive(s["packet"].as_str().unwrap_or(""))?,
            "dump" => {
                let cmd = s["command"].as_str().unwrap_or("");
                // Installs only; a dump of live flows with counters is
                // checked by its flows too.
                if cmd.contains("filter_flow_install") || cmd.contains("filter_flow_dump") {
                    run.dump(&expect)?;
                } else {
                    return Err(format!("dump command '{cmd}'"));
                }
            }
            "trace" => run.trace(s["flow"].as_str().unwrap_or(""), &expect)?,
            "sleep" => run.now += (s["seconds"].as_f64().unwrap_or(0.0) * 1000.0) as u64,
            "appctl" => {
                let cmd = s["command"].as_str().unwrap_or("");
                if cmd.ends_with("upcall/disable-megaflows") {
                    let cfg = Config {
                        megaflows: false,
                        ..Config::default()
                    };
                    run.dp.set_config(cfg).map_err(|e| e.to_string())?;
                    run.megaflows = false;
                } else if cmd.ends_with("time/stop") {
                    // The clock only moves when the test says (as here).
                } else if let Some(ms) = cmd.split("time/warp ").nth(1) {
                    run.now += ms
                        .trim()
                        .parse::<u64>()
                        .map_err(|e| format!("{cmd}: {e}"))?;
                } else if !cmd.ends_with("upcall/disable-ufid") {
                    return Err(format!("appctl '{cmd}'"));
                }
            }
            "vsctl" => {
                let cmd = s["command"].as_str().unwrap_or("");
                let p = cmd
                    .split("prefixes=")
                    .nth(1)
                    .filter(|_| cmd.contains("set Flow_Table"));
                match (p, s["expect_rc"].as_str()) {
                    // Refused by the database (too many, duplicate): no change.
                    (Some(_), Some(rc)) if rc != "0" => {}
                    (Some(p), _) => run.set_prefixes(&prefixes_of(p.trim())),
                    _ => return Err(format!("vsctl '{cmd}'")),
                }
            }
            // `ovs-ofctl add-flow` expected to be refused: flowpath must
            // refuse the rule with ovs-ofctl's message.
            "add_flow" if s["expect_rc"].as_str().is_some_and(|rc| rc != "0") => {
                let rule = s["rule"].as_str().unwrap_or("");
                let want: Vec<String> = strs(&s["expect_stderr"])
                    .iter()
                    .map(|l| l.trim_start_matches("ovs-ofctl: ").to_string())
                    .collect();
                match parse_rules(rule, None) {
                    Ok(_) => return Err(format!("add-flow {rule} accepted, OVS refuses it")),
                    Err(e) if want.iter().all(|w| e.to_string().contains(w.as_str())) => {}
                    Err(e) => return Err(format!("add-flow {rule}: '{e}', OVS: {want:?}")),
                }
            }
            k => return Err(format!("step kind '{k}'")),
        }
    }
    Ok(())
}

#[test]
fn ovs_megaflow_tests() {
    let data = include_str!("../../ofproto/tests/data/ovs-at-megaflow.jsonl");
    let (mut passed, mut failed, mut skipped) = (Vec::new(), Vec::new(), Vec::new());
    let mut known = Vec::new();
    for line in data.lines() {
        let t: Value = serde_json::from_str(line).unwrap();
        let title = t["title"].as_str().unwrap_or("").to_string();
        let needs: Vec<String> = strs(&t["needs"]);
        let missing: Vec<&String> = needs
            .iter()
            .filter(|n| !SUPPORTED.contains(&n.as_str()))
            .collect();
        if !missing.is_empty() {
            skipped.push(format!("{title} (needs {missing:?})"));
            continue;
        }
        match replay(&t) {
            Ok(()) => passed.push(title),
            Err(e) if e.starts_with(UNSUPPORTED) => skipped.push(format!("{title} ({e})")),
            Err(e) => match KNOWN
                .iter()
                .find(|(k, _)| *k == title && e.starts_with(MEGAFLOW_ONLY))
            {
                Some((_, why)) => known.push(format!("{title}: {why}\n    ({e})")),
                None => failed.push(format!("{title}: {e}")),
            },
        }
    }
    println!("OVS megaflow tests reproduced ({}):", passed.len());
    for p in &passed {
        println!("  {p}");
    }
    println!("known differences, explained ({}):", known.len());
    for k in &known {
        println!("  {k}");
    }
    println!(
        "not replayed, bridge features flowpath lacks ({}):",
        skipped.len()
    );
    for s in &skipped {
        println!("  {s}");
    }
    assert!(
        failed.is_empty(),
        "{} differ:\n{}",
        failed.len(),
        failed.join("\n\n")
    );
    assert!(passed.len() >= 28, "only {} replayed", passed.len());
}
