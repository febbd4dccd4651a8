//! Where the PMD threads run and which rx queues each polls, changed
//! while the switch runs: Open vSwitch's `other_config:pmd-cpu-mask` and
//! `Interface.other_config:pmd-rxq-affinity`.
//!
//! A queue moves between PMDs without being closed: the PMD polling it
//! hands it over between bursts, the other one polls it from its next
//! burst on (frames waiting in the queue wait for that). A PMD moves to
//! another CPU by pinning itself there between bursts. A mask with
//! another number of CPUs replaces the PMD threads: the old ones hand
//! their queues over and stop, new ones (with empty caches) start.

use crate::control::Control;
use crate::pmd::{Pmd, PmdCmd, RxqSlot};
use crate::ports::TxTable;
use crate::shared::PmdHandle;
use flowpath_datapath::execute::{PacketInSender, SampleSender};
use flowpath_datapath::{Config, Switch};
use flowpath_ofproto::normal::Bridge;
use flowpath_ofproto::tables::RuleTables;
use flowpath_slowpath::SlowPath;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

/// Commands waiting for one PMD at most (beyond this a request is
/// refused as "busy" instead of queued).
pub const PMD_QUEUE_DEPTH: usize = 64;

/// What every PMD thread of a switch is made with.
pub(crate) struct PmdParts {
    pub datapath: Config,
    pub tables: Arc<RuleTables>,
    pub bridge: Arc<Bridge>,
    pub pin: PacketInSender,
    pub sample: SampleSender,
    pub conntrack: Arc<flowpath_conntrack::Conntrack>,
    pub ipf: Arc<flowpath_conntrack::ipf::Ipf>,
    pub tx: Arc<TxTable>,
    pub stop: Arc<AtomicBool>,
    pub epoch: Instant,
}

/// Starts PMD thread `id` on CPU `core` (none: not pinned) polling
/// `rxqs`, with a datapath of its own (empty caches).
pub(crate) fn spawn_pmd(
    id: usize,
    core: Option<usize>,
    rxqs: Vec<RxqSlot>,
    p: &PmdParts,
) -> Result<(PmdHandle, JoinHandle<()>), String> {
    let sp = SlowPath::with_bridge(p.tables.clone(), p.bridge.clone());
    let mut sw = Switch::new(p.datapath.clone(), sp).map_err(|e| e.to_string())?;
    sw.set_packet_in_sink(Some(p.pin.clone()));
    sw.set_sample_sink(Some(p.sample.clone()));
    sw.set_conntrack(Some(p.conntrack.clone()));
    sw.set_ipf(Some(p.ipf.clone()));
    let (tx, rx) = sync_channel(PMD_QUEUE_DEPTH);
    let wake_err = |e: std::io::Error| format!("cannot make a PMD wake-up socket: {e}");
    let (wake_tx, wake_rx) = std::os::unix::net::UnixStream::pair().map_err(wake_err)?;
    for s in [&wake_tx, &wake_rx] {
        s.set_nonblocking(true).map_err(wake_err)?;
    }
    let pmd = Pmd {
        id,
        core,
        sw,
        rxqs,
        tx: p.tx.clone(),
        cmds: rx,
        wake: wake_rx,
        stop: p.stop.clone(),
        epoch: p.epoch,
        dyn_limit: None,
        rxqs_changed: false,
        retired: false,
    };
    let h = std::thread::Builder::new()
        .name(format!("pmd{id}"))
        .spawn(move || {
            // A PMD's panic stops the switch (see `fault`).
            let stop = pmd.stop.clone();
            if crate::fault::guard(crate::fault::Part::Pmd, "the switch stops", || pmd.run())
                .is_none()
            {
                stop.store(true, Ordering::Relaxed);
            }
        })
        .map_err(|e| format!("cannot start a PMD thread: {e}"))?;
    Ok((
        PmdHandle {
            id,
            core: AtomicUsize::new(core.unwrap_or(usize::MAX)),
            cmds: tx,
            wake: wake_tx,
        },
        h,
    ))
}

/// The PMD (of `n`) that polls queue `queue_id` of port `port` unless
/// told otherwise: ports' queues spread round robin, each port starting
/// at its own offset.
pub(crate) fn default_pmd(queue_id: usize, port: u32, n: usize) -> usize {
    (queue_id + port as usize) % n.max(1)
}

/// Parses `pmd-rxq-affinity` (`QUEUE:CORE[,QUEUE:CORE]...`).
pub(crate) fn parse_affinity(s: &str) -> Result<BTreeMap<usize, usize>, String> {
    let mut m = BTreeMap::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (q, c) = part
            .split_once(':')
            .ok_or_else(|| format!("{part:?}: expected QUEUE:CORE"))?;
        let q = q
            .trim()
            .parse::<usize>()
            .map_err(|_| format!("{part:?}: queue {q:?} is not a number"))?;
        let c = c
            .trim()
            .parse::<usize>()
            .map_err(|_| format!("{part:?}: core {c:?} is not a number"))?;
        m.insert(q, c);
    }
    Ok(m)
}

/// Parses `pmd-cpu-mask` (hexadecimal, with or without `0x`) into CPU
/// numbers.
pub(crate) fn parse_cpu_mask(s: &str) -> Result<Vec<usize>, String> {
    let h = s.trim();
    let h = h
        .strip_prefix("0x")
        .or_else(|| h.strip_prefix("0X"))
        .unwrap_or(h);
    if h.is_empty() || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("{s:?} is not a hexadecimal CPU mask"));
    }
    let mut cpus = Vec::new();
    for (i, d) in h.bytes().rev().enumerate() {
        let v = (d as char).to_digit(16).unwrap_or(0);
        for b in 0..4 {
            if v & (1 << b) != 0 {
                cpus.push(i * 4 + b);
            }
        }
    }
    if cpus.is_empty() {
        return Err(format!("{s:?} selects no CPU"));
    }
    Ok(cpus)
}

impl Control {
    /// Places port `no`'s rx queues again: queue q on the PMD running on
    /// CPU `affinity[q]` where there is one, every other queue where
    /// [`default_pmd`] puts it. Answers what it did, one line per queue
    /// that could not go where it was asked.
    pub(crate) fn set_rxq_affinity(
        &self,
        no: u32,
        affinity: &BTreeMap<usize, usize>,
    ) -> Result<String, String> {
        // Ordered with ports added and removed.
        let _st = self.state();
        let pmds = self.sh.pmds();
        let n = pmds.len().max(1);
        let cores: Vec<Option<usize>> = pmds.iter().map(|p| p.core()).collect();
        let slots: Vec<RxqSlot> = self
            .ask_all(|r| PmdCmd::TakeRxqs(no, r))?
            .into_iter()
            .flatten()
            .collect();
        let mut per: Vec<Vec<RxqSlot>> = (0..n).map(|_| Vec::new()).collect();
        let mut notes = String::new();
        for s in slots {
            let mut i = default_pmd(s.queue_id, no, n);
            if let Some(c) = affinity.get(&s.queue_id) {
                match cores.iter().position(|x| *x == Some(*c)) {
                    Some(p) => i = p,
                    None => notes.push_str(&format!(
                        "port {no} queue {}: no PMD thread on core {c}; polled by pmd {i}\n",
                        s.queue_id
                    )),
                }
            }
            per[i].push(s);
        }
        self.hand_rxqs(per)?;
        Ok(notes)
    }

    /// Gives PMD i the rx queues `per[i]` to poll (answered once each
    /// polls them).
    pub(crate) fn hand_rxqs(&self, per: Vec<Vec<RxqSlot>>) -> Result<(), String> {
        let per = Mutex::new(per.into_iter());
        self.ask_all(|r| {
            let slots = per
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .next()
                .unwrap_or_default();
            PmdCmd::AddRxqs(slots, r)
        })?;
        Ok(())
    }

    /// Moves the PMD threads to `cpus` (PMD i to the i-th), as many CPUs
    /// as there are PMD threads.
    pub(crate) fn set_pmd_cpus(&self, cpus: &[usize]) -> Result<String, String> {
        let ncpu = flowpath_io::affinity::online_cpus();
        if let Some(c) = cpus.iter().find(|c| **c >= ncpu) {
            return Err(format!(
                "CPU {c} does not exist (this machine has CPUs 0-{})",
                ncpu - 1
            ));
        }
        if cpus.is_empty() {
            return Err("no CPU given".into());
        }
        if cpus.len() != self.sh.pmds().len() {
            return self.replace_pmds(cpus);
        }
        let _st = self.state();
        let next = Mutex::new(cpus.iter().copied());
        let results = self.ask_all(|r| {
            let c = next
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .next()
                .unwrap_or(0);
            PmdCmd::Pin(c, r)
        })?;
        for ((p, c), res) in self.sh.pmds().iter().zip(cpus).zip(results) {
            res.map_err(|e| format!("pmd {}: {e}", p.id))?;
            p.core.store(*c, Ordering::Relaxed);
        }
        Ok(String::new())
    }

    /// A PMD thread per CPU of `cpus` instead of those running: the old
    /// ones hand their rx queues over and stop, the new ones (empty
    /// caches: their megaflows are made again by upcalls) poll them,
    /// spread as [`default_pmd`] spreads them.
    fn replace_pmds(&self, cpus: &[usize]) -> Result<String, String> {
        let st = self.state();
        let slots: Vec<RxqSlot> = self
            .ask_all(PmdCmd::Retire)?
            .into_iter()
            .flatten()
            .collect();
        let parts = PmdParts {
            datapath: st.datapath.clone(),
            tables: self.sh.published().tables,
            bridge: self.sh.bridge.clone(),
            pin: self.sh.pin_sink.clone(),
            sample: self.sh.sample_sink.clone(),
            conntrack: self.sh.conntrack.clone(),
            ipf: self.sh.ipf.clone(),
            tx: self.sh.tx(),
            stop: self.sh.stop.clone(),
            epoch: self.sh.started,
        };
        let n = cpus.len();
        let mut per: Vec<Vec<RxqSlot>> = (0..n).map(|_| Vec::new()).collect();
        for s in slots {
            per[default_pmd(s.queue_id, s.port_no, n)].push(s);
        }
        let mut handles = Vec::new();
        let mut threads = Vec::new();
        for (id, (c, rxqs)) in cpus.iter().zip(per).enumerate() {
            // (A failure here leaves the queues it held unpolled: the
            // error says so; the PMDs made so far run.)
            let (h, t) = spawn_pmd(id, Some(*c), rxqs, &parts)
                .map_err(|e| format!("{e}; the switch has {id} PMD thread(s) now"))?;
            handles.push(h);
            threads.push(t);
        }
        self.sh.set_pmds(handles);
        self.sh
            .pmd_threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(threads);
        drop(st);
        Ok(format!("{n} PMD thread(s) on CPUs {cpus:?}\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_and_affinities_parse() {
        assert_eq!(parse_cpu_mask("0x6").unwrap(), vec![1, 2]);
        assert_eq!(parse_cpu_mask("1").unwrap(), vec![0]);
        assert_eq!(parse_cpu_mask("0X110").unwrap(), vec![4, 8]);
        for bad in ["", "0x", "0xg", "0"] {
            assert!(parse_cpu_mask(bad).is_err(), "{bad:?}");
        }
        let a = parse_affinity("0:3, 1:7").unwrap();
        assert_eq!(a.into_iter().collect::<Vec<_>>(), vec![(0, 3), (1, 7)]);
        assert!(parse_affinity("").unwrap().is_empty());
        for bad in ["0", "a:1", "0:b"] {
            assert!(parse_affinity(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn default_placement_spreads_queues_from_each_port_offset() {
        let v: Vec<usize> = (0..4).map(|q| default_pmd(q, 1, 2)).collect();
        assert_eq!(v, vec![1, 0, 1, 0]);
        assert_eq!(default_pmd(3, 7, 1), 0);
        assert_eq!(default_pmd(0, 0, 0), 0, "no PMD count: the first");
    }
}
