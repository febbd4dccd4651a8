//! `dump-flows` on the control socket (the rules, as `ovs-ofctl
//! dump-flows` prints them, or `--json`, selected as `ovs-ofctl` selects
//! them) and `config/set` (the datapath's configuration keys and the
//! fragment mode, checked, then handed to every PMD).

use crate::conntrack::{ct_timeouts_text, CT_TIMEOUT_PREFIX};
use crate::control::{config_text, Control, FRAG_MODE_KEY};
use crate::pmd::PmdCmd;
use crate::rules::{self, Selector};
use flowpath_datapath::keys;
use flowpath_ofproto::tables::FragMode;

impl Control {
    pub(crate) fn dump_rules(&self, params: &[String]) -> Result<String, String> {
        let json = params.iter().any(|p| p == "--json");
        let rest: Vec<&str> = params
            .iter()
            .map(String::as_str)
            .filter(|p| *p != "--json")
            .collect();
        let sel = Selector::parse(&rest.join(",")).map_err(|e| e.to_string())?;
        let st = self.state();
        if json {
            let now = std::time::Instant::now();
            let v: Vec<serde_json::Value> = st
                .rules
                .rules()
                .iter()
                .filter(|r| sel.selects(&r.rule))
                .map(|r| {
                    serde_json::json!({
                        "table": r.rule.table,
                        "priority": r.rule.priority,
                        "cookie": r.rule.cookie,
                        "match": r.rule.matching.format(flowpath_flow::Style::Rule),
                        "actions": rules::format_actions_of(&r.rule),
                        "duration_s": now.duration_since(r.added).as_secs_f64(),
                    })
                })
                .chain(
                    self.sh
                        .bridge
                        .learned
                        .flows()
                        .iter()
                        .filter(|r| sel.selects(r))
                        .map(|r| {
                            serde_json::json!({
                                "table": r.table,
                                "priority": r.priority,
                                "cookie": r.cookie,
                                "match": r.matching.format(flowpath_flow::Style::Rule),
                                "actions": rules::format_actions_of(r),
                                "hard_timeout": r.hard_timeout,
                                "learned": true,
                            })
                        }),
                )
                .collect();
            return Ok(format!("{}\n", serde_json::Value::Array(v)));
        }
        let mut out = rules::dump_flows(&st.rules, &sel);
        out.push_str(&rules::dump_learned(&self.sh.bridge.learned.flows(), &sel));
        Ok(out)
    }

    pub(crate) fn config_set(&self, params: &[String]) -> Result<String, String> {
        let mut st = self.state();
        let mut cfg = st.datapath.clone();
        let mut frag_mode = None;
        let mut timeouts: Vec<(String, u32)> = Vec::new();
        for p in params {
            let (k, v) = p
                .split_once('=')
                .ok_or_else(|| format!("'{p}': expected KEY=VALUE"))?;
            if k.trim() == FRAG_MODE_KEY {
                // The bridge's setting, not the datapath's.
                let m: FragMode = v
                    .trim()
                    .parse()
                    .map_err(|e| format!("{FRAG_MODE_KEY}: {e}"))?;
                frag_mode = Some(m);
                continue;
            }
            if let Some(name) = k.trim().strip_prefix(CT_TIMEOUT_PREFIX) {
                // The connection tracker's (checked now, set with the rest).
                let secs: u32 = v
                    .trim()
                    .parse()
                    .map_err(|_| format!("{k}: '{v}' is not a number of seconds"))?;
                flowpath_conntrack::timeouts::check(name, secs).map_err(|e| format!("{k}: {e}"))?;
                timeouts.push((name.to_string(), secs));
                continue;
            }
            keys::set(&mut cfg, k.trim(), v.trim()).map_err(|e| e.to_string())?;
        }
        cfg.validate().map_err(|e| e.to_string())?;
        if let Some(m) = frag_mode.filter(|m| *m != st.rules.frag_mode()) {
            // Every megaflow of a fragment may change: republish, then a
            // revalidator round (after the lock is released) takes them.
            st.rules.set_frag_mode(m);
            self.publish(&st)?;
        }
        self.sh
            .flow_limit_cfg
            .store(cfg.flow_limit, std::sync::atomic::Ordering::Relaxed);
        self.sh
            .max_idle_ms
            .store(cfg.max_idle_ms, std::sync::atomic::Ordering::Relaxed);
        let c2 = cfg.clone();
        for r in self.ask_all(|r| PmdCmd::SetConfig(Box::new(c2.clone()), r))? {
            r?;
        }
        st.datapath = cfg;
        for (name, secs) in &timeouts {
            self.sh.conntrack.set_timeout(name, *secs)?;
        }
        let mut out = config_text(&st.datapath, st.rules.frag_mode());
        out.push_str(&ct_timeouts_text(&self.sh.conntrack.timeouts()));
        drop(st);
        if frag_mode.is_some() {
            self.sh.reval_wait()?;
        }
        Ok(out)
    }
}

/// `fdb/show` and `fdb/stats-show`.
impl Control {
    /// A port number as OVS names it in `fdb/show` (its name when it has
    /// one).
    fn port_name(&self, p: u32) -> String {
        if p == flowpath_ofproto::action::OFPP_LOCAL {
            return "LOCAL".into();
        }
        p.to_string()
    }

    pub(crate) fn fdb_show(&self, json: bool) -> Result<String, String> {
        let now = self.now_ms();
        let macs = self.shared().bridge.macs();
        if json {
            let v: Vec<serde_json::Value> = macs
                .entries(now)
                .iter()
                .map(|e| {
                    serde_json::json!({
                        "port": self.port_name(e.port),
                        "vlan": e.vlan,
                        "mac": flowpath_ofproto::normal::format_mac(e.mac),
                        "age": e.age_s(now),
                    })
                })
                .collect();
            return Ok(format!("{}\n", serde_json::Value::Array(v)));
        }
        Ok(macs.show(now, |p| self.port_name(p)))
    }

    pub(crate) fn fdb_stats(&self) -> String {
        let macs = self.shared().bridge.macs();
        let s = macs.stats;
        format!(
            "Statistics for bridge \"br0\":\n  Current/maximum MAC entries in the table: {}/{}\n  Current static MAC entries in the table : 0\n  Total number of learned MAC entries     : {}\n  Total number of expired MAC entries     : {}\n  Total number of evicted MAC entries     : {}\n  Total number of port moved MAC entries  : {}\n",
            macs.entries(self.now_ms()).len(),
            macs.max_entries(),
            s.learned,
            s.expired,
            s.evicted,
            s.moved
        )
    }
}
