//! Ports added and removed while the switch runs (`dpctl/add-if`,
//! `dpctl/del-if`, as Open vSwitch's commands of those names).
//!
//! Adding opens the port, gives every PMD the new transmit table, hands
//! its rx queues to the PMDs, adds it to the bridge's ports (`ALL`,
//! `FLOOD`, `ovs-ofctl show`) and tells the OpenFlow channel (a
//! PORT_STATUS "add"). Removing goes the other way: the PMDs stop polling
//! it, then stop sending to it, and only then is it closed (its XDP
//! program detached, its tap deleted, its sockets closed), so no PMD ever
//! touches a closed port; megaflows that sent to it are revalidated away.
//! Both hold the control lock, so they are ordered with rule and
//! configuration changes.

use crate::control::Control;
use crate::pmd::{PmdCmd, RxqSlot};
use crate::ports::open_one;
use flowpath_netdev::PortSpec;
use flowpath_ofproto::tunnel::is_tunnel_spec;
use std::sync::Arc;

impl Control {
    /// `dpctl/add-if [DP] [N=]SPEC`: opens port `SPEC` (as `--port` takes
    /// it) as number N (default: the lowest free one).
    pub(crate) fn add_if(&self, params: &[String]) -> Result<String, String> {
        let c = self;
        let arg = params.last().ok_or("dpctl/add-if: a port spec is needed")?;
        let (no, spec_str) = match arg.split_once('=') {
            Some((n, s)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
                let n: u32 = n
                    .parse()
                    .map_err(|_| format!("{arg}: port numbers are 1 to 65279"))?;
                (Some(n), s)
            }
            _ => (None, arg.as_str()),
        };
        let spec = if is_tunnel_spec(spec_str) {
            None
        } else {
            Some(PortSpec::parse(spec_str).map_err(|e| format!("{arg}: {e}"))?)
        };
        let sh = c.shared().clone();
        let st = c.state();
        let infos = sh.ports();
        let tnl_ports = sh.tunnels.as_ref().map(|t| t.ports()).unwrap_or_default();
        let taken = |n: u32| {
            infos.iter().any(|p| p.port_no == n) || tnl_ports.iter().any(|p| p.ofport == n)
        };
        // With tunnels, the underlay's and the tunnels' datapath ports are
        // above the OpenFlow ports.
        let max = if sh.tunnels.is_some() {
            flowpath_ofproto::tunnel::UNDERLAY_PORT - 1
        } else {
            0xfeff
        };
        let local = flowpath_ofproto::action::OFPP_LOCAL;
        let no = match no {
            // The bridge's LOCAL port: a tap named after the bridge, as
            // Open vSwitch's userspace datapath makes it.
            Some(n) if n == local && !matches!(spec, Some(PortSpec::Tap { .. })) => {
                return Err(format!("{arg}: port {local} (LOCAL) is a tap: port"))
            }
            Some(n) if n == 0 || (n > max && n != local) => {
                return Err(format!(
                    "{arg}: port numbers are 1 to {max}, or {local} (LOCAL)"
                ))
            }
            Some(n) if taken(n) => return Err(format!("{arg}: port {n} exists")),
            Some(n) => n,
            None => (1..=max)
                .find(|n| !taken(*n))
                .ok_or("dpctl/add-if: every port number is taken")?,
        };
        let Some(spec) = spec else {
            return self.add_tunnel(st, no, spec_str);
        };
        let name = spec.to_string();
        // One port per interface.
        if let Some(i) = spec.ifname() {
            let same = |p: &&crate::ports::PortInfo| {
                PortSpec::parse(&p.name)
                    .ok()
                    .is_some_and(|s| s.ifname() == Some(i))
            };
            if let Some(p) = infos.iter().find(same) {
                return Err(format!(
                    "{name}: interface {i} is already port {}",
                    p.port_no
                ));
            }
        }
        self.open_port(no, &spec)?;
        c.bridge_port_changed(st, no, &name, true)
    }

    /// Opens port `spec` as number `no` and hands its queues to the PMDs
    /// (nothing is announced: the caller does).
    fn open_port(&self, no: u32, spec: &PortSpec) -> Result<(), String> {
        let sh = self.shared().clone();
        let c = self;
        let n_pmds = sh.pmds().len().max(1);
        let opened = open_one(no, spec, n_pmds).map_err(|e| e.to_string())?;
        // Transmit first (a PMD may forward to the port as soon as it
        // receives from it), then the rx queues, spread over the PMDs.
        let tx = Arc::new(sh.tx().with(opened.tx.clone()));
        c.ask_all(|r| PmdCmd::SetTx(tx.clone(), r))?;
        *sh.tx.write().unwrap_or_else(|e| e.into_inner()) = tx;
        let mut per_pmd: Vec<Vec<RxqSlot>> = (0..n_pmds).map(|_| Vec::new()).collect();
        for q in opened.rxqs {
            let i = crate::pmd_admin::default_pmd(q.queue_id, no, n_pmds);
            per_pmd[i].push(RxqSlot::from(q));
        }
        c.hand_rxqs(per_pmd)?;
        {
            let mut ports = sh.ports.write().unwrap_or_else(|e| e.into_inner());
            ports.push(opened.info);
            ports.sort_by_key(|p| p.port_no);
        }
        sh.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((no, opened.open));
        Ok(())
    }

    /// Opens the tunnels' underlay `local:NAME` (tap NAME, another
    /// bridge's LOCAL interface in this process) as the underlay's
    /// datapath port, while the switch runs.
    pub(crate) fn attach_underlay(&self, name: &str) -> Result<(), String> {
        let spec = PortSpec::Local {
            name: name.to_string(),
        };
        let no = flowpath_ofproto::tunnel::UNDERLAY_PORT;
        let _st = self.state();
        if self.shared().ports().iter().any(|p| p.port_no == no) {
            return Err(format!("{spec}: the underlay is open already"));
        }
        self.open_port(no, &spec)
    }

    /// A tunnel port `spec` (`vxlan:...`, `geneve:...`, `gre:...`) as
    /// number `no`: over the switch's underlay, no device of its own.
    fn add_tunnel(
        &self,
        st: std::sync::MutexGuard<'_, crate::shared::CtlState>,
        no: u32,
        spec: &str,
    ) -> Result<String, String> {
        let sh = self.shared().clone();
        let t = sh
            .tunnels
            .as_ref()
            .ok_or_else(|| format!("{spec}: tunnel ports need the switch's --underlay"))?;
        let p = flowpath_ofproto::tunnel::TunnelPort::parse(no, spec)?;
        let name = p.describe();
        t.add_port(p)?;
        self.bridge_port_changed(st, no, &name, true)
    }

    /// `dpctl/del-if [DP] PORT`: removes the port given by number, by its
    /// spec, or by its interface's name.
    pub(crate) fn del_if(&self, params: &[String]) -> Result<String, String> {
        let c = self;
        let arg = params.last().ok_or("dpctl/del-if: a port is needed")?;
        let sh = c.shared().clone();
        let st = c.state();
        if let Some(t) = &sh.tunnels {
            let found = t
                .ports()
                .into_iter()
                .find(|p| arg.parse::<u32>().ok() == Some(p.ofport) || p.describe() == *arg);
            if let Some(p) = found {
                t.del_port(p.ofport);
                return c.bridge_port_changed(st, p.ofport, &p.describe(), false);
            }
        }
        let infos = sh.ports();
        let info = infos
            .iter()
            .find(|p| {
                arg.parse::<u32>().ok() == Some(p.port_no)
                    || p.name == *arg
                    || PortSpec::parse(&p.name)
                        .ok()
                        .and_then(|s| s.ifname().map(|i| i == arg))
                        .unwrap_or(false)
            })
            .ok_or_else(|| format!("{arg}: no such port"))?;
        let (no, name) = (info.port_no, info.name.clone());
        // No PMD polls it, then none sends to it; then it is closed.
        c.ask_all(|r| PmdCmd::RemovePort(no, r))?;
        let tx = Arc::new(sh.tx().without(no));
        c.ask_all(|r| PmdCmd::SetTx(tx.clone(), r))?;
        *sh.tx.write().unwrap_or_else(|e| e.into_inner()) = tx;
        sh.ports
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|p| p.port_no != no);
        let closed: Vec<_> = {
            let mut open = sh.open.lock().unwrap_or_else(|e| e.into_inner());
            let (gone, kept) = std::mem::take(&mut *open)
                .into_iter()
                .partition(|(n, _)| *n == no);
            *open = kept;
            gone
        };
        drop(closed);
        sh.bridge
            .set_vlan_mode(no, flowpath_ofproto::normal::VlanMode::TrunkAll);
        c.bridge_port_changed(st, no, &name, false)
    }

    /// The bridge's port `no` (`name`) was added or removed: the bridge's
    /// ports (`ALL`, `FLOOD`) updated and published, OpenFlow connections
    /// told (PORT_STATUS), megaflows revalidated; the command's answer.
    fn bridge_port_changed(
        &self,
        mut st: std::sync::MutexGuard<'_, crate::shared::CtlState>,
        no: u32,
        name: &str,
        added: bool,
    ) -> Result<String, String> {
        let sh = self.shared().clone();
        let mut bridge_ports: Vec<u32> = st
            .rules
            .ports()
            .iter()
            .copied()
            .filter(|p| *p != no)
            .collect();
        if added {
            bridge_ports.push(no);
        }
        st.rules.set_ports(bridge_ports);
        self.publish(&st)?;
        drop(st);
        if let Some(hook) = sh.on_port_change.get() {
            hook(no, name, added);
        }
        sh.reval_wait()?;
        let what = if added { "added" } else { "removed" };
        Ok(format!("port {no}: {name} {what}\n"))
    }

    /// Sets the 802.1Q modes of these ports (`NORMAL`'s access and trunk
    /// ports); when one changed, every megaflow is revalidated.
    pub(crate) fn set_vlan_modes(
        &self,
        modes: &[(u32, flowpath_ofproto::normal::VlanMode)],
    ) -> Result<(), String> {
        let sh = self.shared().clone();
        let mut changed = false;
        for (no, mode) in modes {
            changed |= sh.bridge.set_vlan_mode(*no, mode.clone());
        }
        if changed {
            let mut st = self.state();
            st.rules.touch();
            self.publish(&st)?;
            drop(st);
            sh.reval_wait()?;
        }
        Ok(())
    }

    /// Replaces the flow-sample collector sets; `sample` actions sample
    /// while there is one (a change revalidates every megaflow).
    pub(crate) fn set_collector_sets(
        &self,
        sets: &[crate::sampler::CollectorSet],
    ) -> Result<(), String> {
        let sh = self.shared().clone();
        sh.sampler.set_sets(sets);
        let mut st = self.state();
        let before = st.rules.version();
        st.rules.set_sampling(!sets.is_empty());
        if st.rules.version() != before {
            self.publish(&st)?;
            drop(st);
            sh.reval_wait()?;
        }
        Ok(())
    }

    /// Sets the per-table prefix-tracking fields; a change rebuilds the
    /// tables and revalidates every megaflow.
    pub(crate) fn set_table_prefixes(
        &self,
        per_table: Vec<(u8, Vec<flowpath_flow::FieldId>)>,
    ) -> Result<(), String> {
        let mut st = self.state();
        let before = st.rules.version();
        st.rules.set_table_prefixes(per_table);
        if st.rules.version() != before {
            self.publish(&st)?;
            drop(st);
            self.shared().reval_wait()?;
        }
        Ok(())
    }
}
