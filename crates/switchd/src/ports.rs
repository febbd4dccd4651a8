//! The switch's ports: opened from their specs, split into rx queues
//! (handed to PMD threads) and a shared transmit side per port.
//!
//! Opening is all or nothing: if one port fails, the ones already opened
//! are closed again (their programs detached, taps deleted) before the
//! error, which names the port, is returned.

use flowpath_netdev::{NetdevError, OpenPort, PortSpec, QueueStats, RxQueue, TxQueue};
use std::sync::{Arc, Mutex};

/// A port's transmit side, shared by the PMDs.
pub struct TxPort {
    /// Port number.
    pub port_no: u32,
    /// Port name (its spec).
    pub name: String,
    /// Whether frames may keep their offload state.
    pub takes_vnet_hdr: bool,
    /// The queues, each locked once per output burst: PMD `i` uses queue
    /// `i % len`, so with a queue per PMD no lock is ever contended.
    pub queues: Vec<Mutex<Box<dyn TxQueue>>>,
}

impl TxPort {
    /// The queue PMD `pmd` uses.
    #[inline]
    pub fn queue_for(&self, pmd: usize) -> &Mutex<Box<dyn TxQueue>> {
        &self.queues[pmd % self.queues.len()]
    }

    /// Locks `q` (poisoning ignored: a panicking holder leaves nothing
    /// half-done that matters more than forwarding on).
    pub fn lock(q: &Mutex<Box<dyn TxQueue>>) -> std::sync::MutexGuard<'_, Box<dyn TxQueue>> {
        q.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counters of all queues together.
    pub fn stats(&self) -> QueueStats {
        let mut s = QueueStats::default();
        for q in &self.queues {
            s.add(&Self::lock(q).stats());
        }
        s
    }
}

/// Port number → transmit side.
#[derive(Default)]
pub struct TxTable {
    by_port: Vec<Option<Arc<TxPort>>>,
}

impl TxTable {
    /// The port numbered `port`.
    #[inline]
    pub fn get(&self, port: u32) -> Option<&TxPort> {
        self.by_port.get(port as usize).and_then(|p| p.as_deref())
    }

    /// Every port, ascending.
    pub fn iter(&self) -> impl Iterator<Item = &TxPort> {
        self.by_port.iter().filter_map(|p| p.as_deref())
    }

    /// Flushes every port's pending transmit work (best effort).
    pub fn flush_all(&self) {
        for p in self.iter() {
            for q in &p.queues {
                let _ = TxPort::lock(q).flush();
            }
        }
    }

    /// Flushes the queues PMD `pmd` uses.
    pub fn flush_for(&self, pmd: usize) {
        for p in self.iter() {
            let _ = TxPort::lock(p.queue_for(pmd)).flush();
        }
    }

    /// Transmit counters of `port`.
    pub fn stats(&self, port: u32) -> QueueStats {
        self.get(port).map(TxPort::stats).unwrap_or_default()
    }

    /// This table with `port` added (replacing one of the same number).
    pub fn with(&self, port: Arc<TxPort>) -> TxTable {
        let mut by_port = self.by_port.clone();
        let i = port.port_no as usize;
        if by_port.len() <= i {
            by_port.resize(i + 1, None);
        }
        by_port[i] = Some(port);
        TxTable { by_port }
    }

    /// This table without port `no`.
    pub fn without(&self, no: u32) -> TxTable {
        let mut by_port = self.by_port.clone();
        if let Some(p) = by_port.get_mut(no as usize) {
            *p = None;
        }
        TxTable { by_port }
    }
}

/// An rx queue waiting to be assigned to a PMD.
pub struct PendingRxq {
    /// Port number.
    pub port_no: u32,
    /// Port name.
    pub name: String,
    /// Queue id.
    pub queue_id: usize,
    /// The queue.
    pub rxq: Box<dyn RxQueue>,
}

/// A port's OpenFlow name (port descriptions, `in_port=NAME` in
/// `ovs-ofctl`): its interface's name where it has one (a patch port's
/// own name), else its spec (`null`, captures, tunnels).
pub fn openflow_name(spec: &str) -> String {
    match flowpath_netdev::PortSpec::parse(spec) {
        Ok(flowpath_netdev::PortSpec::Patch { name, .. }) => name,
        Ok(s) => s.ifname().unwrap_or(spec).to_string(),
        Err(_) => spec.to_string(),
    }
}

/// What `dpctl/show` says of a port.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PortInfo {
    /// Port number.
    pub port_no: u32,
    /// Its spec.
    pub name: String,
    /// Kind.
    pub kind: &'static str,
    /// Kind-specific facts.
    pub detail: String,
    /// Rx queues.
    pub n_rxq: usize,
    /// Tx queues.
    pub n_txq: usize,
}

/// All ports, opened.
pub struct Ports {
    /// Transmit sides.
    pub tx: Arc<TxTable>,
    /// Rx queues, to be given to PMDs.
    pub rxqs: Vec<PendingRxq>,
    /// Facts for `dpctl/show`.
    pub info: Vec<PortInfo>,
    /// The opened ports by number (their guards: programs, interfaces),
    /// closed when dropped — after the PMDs have stopped.
    pub open: Vec<(u32, OpenPort)>,
}

/// One port, opened: its guard, transmit side, rx queues and facts.
pub struct OpenedPort {
    /// The guard (program, interface).
    pub open: OpenPort,
    /// Its transmit side.
    pub tx: Arc<TxPort>,
    /// Its rx queues.
    pub rxqs: Vec<PendingRxq>,
    /// What `dpctl/show` says of it.
    pub info: PortInfo,
}

/// Opens port `no` from `spec` with up to `txqs` transmit queues (one
/// per PMD).
pub fn open_one(no: u32, spec: &PortSpec, txqs: usize) -> Result<OpenedPort, NetdevError> {
    let mut p = flowpath_netdev::open_with(spec, txqs)?;
    let name = spec.to_string();
    let info = PortInfo {
        port_no: no,
        name: name.clone(),
        kind: p.kind,
        detail: p.detail.clone(),
        n_rxq: p.rxqs.len(),
        n_txq: 1 + p.more_tx.len(),
    };
    let rxqs = std::mem::take(&mut p.rxqs)
        .into_iter()
        .enumerate()
        .map(|(q, rxq)| PendingRxq {
            port_no: no,
            name: name.clone(),
            queue_id: q,
            rxq,
        })
        .collect();
    let tx = std::mem::replace(
        &mut p.tx,
        Box::new(flowpath_netdev::null::NullTx::default()),
    );
    let takes_vnet_hdr = tx.takes_vnet_hdr();
    let queues = std::iter::once(tx)
        .chain(std::mem::take(&mut p.more_tx))
        .map(Mutex::new)
        .collect();
    Ok(OpenedPort {
        open: p,
        tx: Arc::new(TxPort {
            port_no: no,
            name,
            takes_vnet_hdr,
            queues,
        }),
        rxqs,
        info,
    })
}

/// Opens every `(number, spec)` with up to `txqs` transmit queues each
/// (one per PMD). Numbers must be distinct and in 1..=65279 (checked by
/// the caller).
pub fn open_all(specs: &[(u32, PortSpec)], txqs: usize) -> Result<Ports, NetdevError> {
    let mut out = Ports {
        tx: Arc::new(TxTable::default()),
        rxqs: Vec::new(),
        info: Vec::new(),
        open: Vec::new(),
    };
    let mut table = TxTable::default();
    for (no, spec) in specs {
        // On error, `out.open` (already opened ports) is dropped here:
        // each closes itself.
        let p = open_one(*no, spec, txqs)?;
        table = table.with(p.tx);
        out.rxqs.extend(p.rxqs);
        out.info.push(p.info);
        out.open.push((*no, p.open));
    }
    out.tx = Arc::new(table);
    Ok(out)
}
