//! Megaflow dump: the one listing of a worker's megaflows.
//!
//! What: [`Datapath::dump`] lists every live megaflow as a [`DumpEntry`]
//! (handle, key, mask, shared action list, counters, times, TCP flags);
//! [`DumpEntry::to_line`] prints one as `ovs-appctl dpctl/dump-flows` does
//! (its match in megaflow style, `packets:N, bytes:N, used:X.XXXs` or
//! `used:never`, then `actions:` in datapath-action syntax) and
//! [`Datapath::dump_flows`] prints them all. The switch's revalidator,
//! its `dpctl/dump-flows` (text and JSON) and `flowpath run --dump-flows`
//! all read this one dump, and [`idle_expired`] is the one idle-expiry
//! test.
//!
//! Why here: only the worker knows its megaflows; the control path asks
//! for a dump between batches. Allocates (it is not on the packet path);
//! the action lists are shared with the table (`Arc`), not copied.
//!
//! Threads: called on the worker's thread (or on a worker that is paused).

use crate::megaflow::MegaflowRef;
use crate::pipeline::Datapath;
use flowpath_flow::{FlowKey, FlowMask, Match, Style};
use flowpath_odp::{format_actions, DpAction};
use std::sync::Arc;

/// One megaflow as a worker dumps it.
#[derive(Clone, Debug)]
pub struct DumpEntry {
    /// Its handle in the worker (for a later deletion).
    pub mf: MegaflowRef,
    /// Key (zero outside the mask).
    pub key: FlowKey,
    /// Mask.
    pub mask: FlowMask,
    /// Datapath actions (the worker's interned list, shared).
    pub actions: Arc<[DpAction]>,
    /// Packets that hit it.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Last hit (datapath ms), if any.
    pub used_ms: Option<u64>,
    /// Installation time (datapath ms).
    pub created_ms: u64,
    /// OR of the TCP flags of the packets that hit it.
    pub tcp_flags: u16,
    /// The length of the packet whose upcall installed it (0: none); not
    /// in `packets` (see [`crate::MegaflowStats::upcall_bytes`]).
    pub upcall_bytes: u32,
}

/// The one idle-expiry test (OVS's `max-idle`): true when a megaflow last
/// used (or, never hit, installed) at `last_used_ms` has been idle for
/// longer than `max_idle_ms` at `now_ms`. The worker's own sweep
/// ([`Datapath::expire_idle`]) and the switch's revalidator both decide
/// with it.
pub fn idle_expired(last_used_ms: u64, now_ms: u64, max_idle_ms: u64) -> bool {
    now_ms.saturating_sub(last_used_ms) > max_idle_ms
}

impl DumpEntry {
    /// The last hit, or the installation if it was never hit.
    pub fn last_used_ms(&self) -> u64 {
        self.used_ms.unwrap_or(self.created_ms)
    }

    /// The match in megaflow style (`recirc_id=0,eth,tcp,in_port=1,...`).
    pub fn megaflow(&self) -> String {
        Match::new(&self.key, &self.mask).format(Style::Megaflow)
    }

    /// Milliseconds since the last hit at `now_ms`, if it was hit.
    pub fn used_ms_ago(&self, now_ms: u64) -> Option<u64> {
        self.used_ms.map(|t| now_ms.saturating_sub(t))
    }

    /// The `dpctl/dump-flows` line (without its newline), with `used`
    /// relative to `now_ms`.
    pub fn to_line(&self, now_ms: u64) -> String {
        let used = match self.used_ms_ago(now_ms) {
            Some(ago) => format!("{:.3}s", ago as f64 / 1000.0),
            None => "never".to_string(),
        };
        format!(
            "{}, packets:{}, bytes:{}, used:{}, actions:{}",
            self.megaflow(),
            self.packets,
            self.bytes,
            used,
            format_actions(&self.actions)
        )
    }
}

impl Datapath {
    /// Every live megaflow, in slot order.
    pub fn dump(&self) -> Vec<DumpEntry> {
        let flows = self.megaflows();
        flows
            .live_refs()
            .filter_map(|r| {
                let (m, st) = (flows.get(r)?, flows.stats(r)?);
                Some(DumpEntry {
                    mf: r,
                    key: m.key,
                    mask: m.mask,
                    actions: flows.actions_shared(r)?,
                    packets: st.packets,
                    bytes: st.bytes,
                    used_ms: st.used_ms,
                    created_ms: st.created_ms,
                    tcp_flags: st.tcp_flags,
                    upcall_bytes: st.upcall_bytes,
                })
            })
            .collect()
    }

    /// The dump-flows text: one line per live megaflow, in slot order,
    /// with `used` relative to `now_ms`.
    pub fn dump_flows(&self, now_ms: u64) -> String {
        let mut out = String::new();
        for e in self.dump() {
            out.push_str(&e.to_line(now_ms));
            out.push('\n');
        }
        out
    }

    /// Removes `refs` (stale handles are ignored); returns how many went.
    pub fn delete_megaflows(&mut self, refs: &[MegaflowRef]) -> usize {
        refs.iter().filter(|r| self.remove_megaflow(**r)).count()
    }
}
