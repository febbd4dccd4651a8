//! Fuzz target `openflow`: the OpenFlow decoder on arbitrary bytes must
//! not panic (every malformed message is an OpenFlow error); a group_mod
//! it accepts must describe its group back; a flow_mod it accepts must
//! encode back (in every dialect that can carry it) without
//! panicking, and its match, written as NXM/OXM, must read back the same.
//!
//! Run with `cargo +nightly fuzz run openflow` (from the workspace root).

#![no_main]

use flowpath_openflow::buf::{Reader, Writer};
use flowpath_openflow::header::{OFP10, OFP13, OFP15};
use flowpath_openflow::msg::{self, ConnState, Dialect, Request};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The length field must match for the decoder to look further: fix it
    // up so that the fuzzer explores bodies.
    let mut m = data.to_vec();
    if m.len() >= 8 && m.len() <= 65_535 {
        let n = m.len() as u16;
        m[2..4].copy_from_slice(&n.to_be_bytes());
    }
    for st in [ConnState::default(), ConnState { flow_mod_table_id: true }] {
        let Ok(d) = msg::decode(&m, st) else {
            continue;
        };
        if let Request::GroupMod(gm) = &d.request {
            // A group it accepts describes itself in every version.
            for v in [OFP13, OFP15] {
                let _ = msg::group_desc_entry(v, &gm.group);
            }
        }
        if let Request::FlowMod(fm) = d.request {
            let r = &fm.rule;
            for (v, dialect) in [(OFP10, Dialect::Of10), (OFP10, Dialect::Nx), (OFP13, Dialect::Oxm), (OFP15, Dialect::Oxm)] {
                let _ = msg::flow_stats_entry(v, dialect, r, &msg::FlowCounters::default());
            }
            for oxm in [false, true] {
                let mut w = Writer::new();
                if flowpath_openflow::nxm::put_match(&mut w, &r.matching, oxm).is_ok() {
                    let mut back = flowpath_flow::Match::catchall();
                    flowpath_openflow::nxm::pull_entries(&mut Reader::new(&w.buf), &mut back)
                        .expect("an encoded match reads back");
                    assert_eq!(back, r.matching);
                }
            }
        }
    }
});
