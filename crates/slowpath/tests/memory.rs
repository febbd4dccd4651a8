//! Memory per megaflow, measured by the allocator.
//!
//! A counting global allocator tracks the live heap bytes (requested
//! sizes, what the program holds; the allocator's own overhead is not
//! counted), plus the tables mapped for huge pages outside it
//! (`hugepage::mapped_bytes`, whole 2 MB pages). The test installs N
//! exact-match megaflows (megaflows off, one subtable, four distinct
//! action lists) through a `Switch` and divides the
//! growth of the live bytes by N: that share covers the megaflow slab, the
//! dpcls, the action lists and whatever the caches allocate beyond their
//! fixed size. The bound asserted (600 B) leaves headroom above the
//! design's figure (BENCHMARKS.md, "Memory per megaflow"); the figures
//! themselves are printed (`--nocapture`).
//!
//! This file is its own test binary with a single test, so no other test
//! allocates concurrently.

// The counting allocator is the one unsafe item: it forwards to `System`.
#![allow(unsafe_code)]

mod common;

use flowpath_datapath::execute::NullSink;
use flowpath_datapath::hugepage;
use flowpath_datapath::{Config, Switch};
use flowpath_ofproto::parse::parse_rules;
use flowpath_ofproto::tables::RuleTables;
use flowpath_slowpath::RuleSwitch;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only
// counts the sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = System.alloc(l);
        if !p.is_null() {
            let now = LIVE.fetch_add(l.size(), Relaxed) + l.size();
            PEAK.fetch_max(now, Relaxed);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(l);
        if !p.is_null() {
            let now = LIVE.fetch_add(l.size(), Relaxed) + l.size();
            PEAK.fetch_max(now, Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l);
        LIVE.fetch_sub(l.size(), Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = System.realloc(p, l, new);
        if !q.is_null() {
            LIVE.fetch_sub(l.size(), Relaxed);
            let now = LIVE.fetch_add(new, Relaxed) + new;
            PEAK.fetch_max(now, Relaxed);
        }
        q
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// An Ethernet + IPv4 + UDP frame, 60 bytes, distinct per `i` (source
/// address and port), destination port `i % 4`.
fn frame(i: u32) -> Vec<u8> {
    common::udp_frame(
        [2, 0, 0, 0, 0, 2],
        [2, 0, 0, 0, 0, 1],
        ((0x0a00_0000 | (i >> 8)).to_be_bytes(), [10, 1, 0, 1]),
        (1024 + (i & 0xff) as u16, (i % 4) as u16),
    )
}

/// Live heap bytes per megaflow after installing `n` exact-match
/// megaflows, and the megaflow count reached.
fn bytes_per_megaflow(n: u32) -> (f64, usize) {
    let rules = "priority=10,udp,tp_dst=0,actions=output:2\n\
                 priority=10,udp,tp_dst=1,actions=output:3\n\
                 priority=10,udp,tp_dst=2,actions=output:2,output:3\n\
                 priority=0,actions=drop\n";
    let tables = Arc::new(RuleTables::new(parse_rules(rules, None).unwrap(), &[]));
    let cfg = Config {
        megaflows: false,
        flow_limit: 1 << 20,
        ..Config::default()
    };
    let mut sw = Switch::with_rules(cfg, tables).unwrap();
    let mut sink = NullSink::default();
    // Warm-up: buffers, the executor's port table, first allocations of
    // every structure; then remove the warm-up megaflows.
    let warm: Vec<Vec<u8>> = (0..64).map(|i| frame(u32::MAX - i)).collect();
    sw.process(1, warm.iter().map(|f| (&f[..], 0)), 0, &mut sink);
    sw.delete_all_megaflows();
    // Frames are generated per batch so the test's own buffers stay small
    // and are freed before measuring.
    let before = LIVE.load(Relaxed) + hugepage::mapped_bytes();
    let mut batch: Vec<Vec<u8>> = Vec::with_capacity(32);
    let mut i = 0;
    while i < n {
        batch.clear();
        batch.extend((i..(i + 32).min(n)).map(frame));
        sw.process(1, batch.iter().map(|f| (&f[..], 0)), 1, &mut sink);
        i += 32;
    }
    drop(batch);
    let after = LIVE.load(Relaxed) + hugepage::mapped_bytes();
    let installed = sw.datapath().megaflow_count();
    let grown = (after - before) as f64;
    // The table's own account of its memory must agree with the
    // allocator's (it is what `memory/show` prints).
    let report = sw.datapath().megaflows().memory();
    println!("  {report:?}");
    let reported = report.total() as f64;
    assert!(
        (0.8 * grown..=1.2 * grown).contains(&reported),
        "the table reports {reported} bytes, the allocator saw {grown}"
    );
    (grown / installed as f64, installed)
}

#[test]
fn exact_match_megaflows_cost_under_600_bytes_each() {
    for n in [10_000u32, 100_000] {
        let (per, installed) = bytes_per_megaflow(n);
        println!("{n} exact-match megaflows: {per:.0} live heap bytes per megaflow");
        assert_eq!(installed, n as usize, "every frame installs one megaflow");
        assert!(
            per <= 600.0,
            "{per:.0} B per megaflow with {n} megaflows (bound 600 B)"
        );
    }
}
