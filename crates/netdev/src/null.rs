//! `null`: a transmit sink that counts and discards; receives nothing.

use crate::{OpenPort, PortSpec, QueueStats, TxFrame, TxQueue};

/// Counts what it is sent.
#[derive(Debug, Default)]
pub struct NullTx {
    stats: QueueStats,
}

impl TxQueue for NullTx {
    fn send(&mut self, frames: &mut dyn Iterator<Item = TxFrame<'_>>) -> usize {
        let mut n = 0;
        for f in frames {
            n += 1;
            self.stats.bytes += f.data.len() as u64;
        }
        self.stats.packets += n as u64;
        n
    }

    fn takes_vnet_hdr(&self) -> bool {
        // Discarded anyway: nothing to finish.
        true
    }

    fn stats(&self) -> QueueStats {
        self.stats
    }
}

/// Opens a `null` port with `extra` more transmit queues.
pub fn open(spec: &PortSpec, extra: usize) -> OpenPort {
    OpenPort {
        spec: spec.clone(),
        kind: "null",
        detail: String::new(),
        rxqs: Vec::new(),
        tx: Box::new(NullTx::default()),
        more_tx: (0..extra)
            .map(|_| Box::new(NullTx::default()) as Box<dyn TxQueue>)
            .collect(),
        guard: None,
    }
}
