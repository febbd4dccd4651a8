//! Megaflow dump, as `ovs-appctl dpctl/dump-flows`.
//!
//! What: one line per live megaflow: its match in megaflow style
//! (`recirc_id=0,eth,tcp,in_port=1,...`), then `packets:N, bytes:N,
//! used:X.XXXs` (or `used:never`), then `actions:` in datapath-action
//! syntax.
//!
//! Why here: only the worker knows its megaflows; the control path asks
//! for a dump between batches. Allocates (it is not on the packet path).
//!
//! Threads: called on the worker's thread (or on a worker that is paused).

use crate::pipeline::Datapath;
use flowpath_flow::{Match, Style};
use flowpath_odp::format_actions;
use std::fmt::Write;

impl Datapath {
    /// The dump-flows text: one line per live megaflow, in slot order,
    /// with `used` relative to `now_ms`.
    pub fn dump_flows(&self, now_ms: u64) -> String {
        let mut out = String::new();
        let flows = self.megaflows();
        for r in flows.live_refs() {
            let (Some(mf), Some(st)) = (flows.get(r), flows.stats(r)) else {
                continue; // unreachable: live_refs yields live refs
            };
            let used = match st.used_ms {
                Some(t) => format!("{:.3}s", now_ms.saturating_sub(t) as f64 / 1000.0),
                None => "never".to_string(),
            };
            // Writing to a String cannot fail.
            let _ = writeln!(
                out,
                "{}, packets:{}, bytes:{}, used:{}, actions:{}",
                Match::new(&mf.key, &mf.mask).format(Style::Megaflow),
                st.packets,
                st.bytes,
                used,
                format_actions(mf.actions)
            );
        }
        out
    }
}
