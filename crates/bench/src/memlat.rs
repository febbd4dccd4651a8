//! The physical limit: memory latency with and without memory-level
//! parallelism, on this machine (`flowpath bench --memory-latency`).
//!
//! What: a random cyclic permutation of cache lines (Sattolo's algorithm)
//! in a buffer of a given size is chased by 1..=16 independent pointers at
//! once; the TSC cycles per access with one chain is the load-to-use
//! latency of that level of the hierarchy (every load depends on the one
//! before), with k chains the CPU overlaps up to k misses (memory-level
//! parallelism: what a batched lookup that prefetches can reach). Each size
//! is measured on 4 KB pages and on 2 MB pages ([`HugeVec`]), which shows
//! what the page walk adds to a random access.
//!
//! Why: the budget of a cache-missing lookup path (1M flows, 20 subtables)
//! is counted in such accesses; BENCHMARKS.md sets the datapath's cycles
//! per packet against these numbers.
//!
//! Threads: runs on the calling thread (pin it first).

use flowpath_datapath::hugepage::{self, HugeVec};
use flowpath_io::tsc::rdtsc;

/// One cache line of the chase: the index of the next line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line {
    next: u32,
    _pad: [u32; 15],
}

/// One measurement.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemLat {
    /// Buffer size (bytes).
    pub bytes: usize,
    /// Whether the buffer was allocated for 2 MB pages.
    pub huge: bool,
    /// Independent chains chased at once.
    pub chains: usize,
    /// TSC cycles per access (total time / total accesses).
    pub cycles_per_access: f64,
}

/// A buffer of `bytes` whose lines form one random cycle.
fn build(bytes: usize, huge: bool, seed: u64) -> HugeVec<Line> {
    let n = (bytes / 64).max(2);
    let was = hugepage::enabled();
    hugepage::set_enabled(huge);
    let mut v = HugeVec::new(
        n,
        Line {
            next: 0,
            _pad: [0; 15],
        },
    );
    hugepage::set_enabled(was);
    // Sattolo: a uniformly random permutation with a single cycle.
    let mut perm: Vec<u32> = (0..n as u32).collect();
    let mut s = seed | 1;
    for i in (1..n).rev() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let j = (s % i as u64) as usize;
        perm.swap(i, j);
    }
    for i in 0..n {
        v[perm[i] as usize].next = perm[(i + 1) % n];
    }
    v
}

/// Chases `chains` pointers `steps` times each through `v`; returns the
/// cycles per access and the final positions (so nothing is optimised
/// away).
fn chase(v: &HugeVec<Line>, chains: usize, steps: usize) -> (f64, u64) {
    let n = v.len();
    let mut p = [0u32; 16];
    let k = chains.clamp(1, 16);
    for (c, x) in p.iter_mut().enumerate().take(k) {
        *x = (c * n / k) as u32;
    }
    let t0 = rdtsc();
    for _ in 0..steps {
        for x in p.iter_mut().take(k) {
            *x = v[*x as usize].next;
        }
    }
    let t1 = rdtsc();
    let acc = (steps * k) as f64;
    (
        t1.wrapping_sub(t0) as f64 / acc,
        p.iter().map(|&x| u64::from(x)).sum(),
    )
}

/// Measures every size × {4 KB, 2 MB pages} × chains, `steps` accesses
/// per chain each (after a warm pass over the buffer).
pub fn measure(sizes: &[usize], chains: &[usize], steps: usize) -> Vec<MemLat> {
    let mut out = Vec::new();
    for &bytes in sizes {
        for huge in [false, true] {
            let v = build(bytes, huge, 0x9e37_79b9_7f4a_7c15 ^ bytes as u64);
            let _ = chase(&v, 16, v.len() / 16 + 1);
            for &k in chains {
                let (c, sink) = chase(&v, k, steps / k.max(1));
                std::hint::black_box(sink);
                out.push(MemLat {
                    bytes,
                    huge,
                    chains: k,
                    cycles_per_access: c,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chase_is_one_cycle_over_every_line() {
        let v = build(64 * 1000, false, 7);
        let mut seen = vec![false; v.len()];
        let mut x = 0usize;
        for _ in 0..v.len() {
            assert!(!seen[x], "line {x} visited twice before the end");
            seen[x] = true;
            x = v[x].next as usize;
        }
        assert_eq!(x, 0, "back to the start after n steps");
        let r = measure(&[64 * 1024], &[1, 4], 1000);
        assert_eq!(r.len(), 4);
        assert!(r.iter().all(|m| m.cycles_per_access > 0.0));
    }
}
