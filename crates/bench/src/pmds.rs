//! `flowpath bench --pmds N`: N workers at once, as N PMD threads of the
//! switch — each on its own CPU with its own `Switch` (caches, megaflows,
//! classifier), all replaying the workload from the same memory (as N
//! rx ports looping the same capture, one per PMD, in OVS-DPDK's
//! `pmd-rxq-affinity` set-up) — and their Mpps added up.
//!
//! What it measures: how the datapath scales when nothing but memory and
//! the machine is shared: no lock, no shared counter, no revalidator.
//! What stops linear scaling then is the hardware (shared caches, memory
//! bandwidth, SMT siblings) or a neighbour on a shared host.
//!
//! Threads: the caller's thread is worker 0 (pinned by the caller); the
//! others are scoped threads pinned here and joined before returning.

use crate::grid::BenchConfig;
use crate::result::BenchResult;
use crate::runner::{run, RunError, RunOptions};
use crate::workload::Workload;
use std::sync::Barrier;

/// The CPU worker `i` runs on when worker 0 is on `cpu0` of `ncpus`: the
/// next lower one, wrapping around (the default `cpu0` is the last CPU,
/// so the workers take the CPUs from the top down, away from CPU 0).
pub fn worker_cpu(cpu0: usize, ncpus: usize, i: usize) -> usize {
    let n = ncpus.max(1);
    (cpu0 % n + n - i % n) % n
}

/// Runs `cfg` on `w` with `opts.pmds` workers at once (see the module
/// documentation); `opts.pin` = (worker 0's CPU, CPUs) pins the others
/// with [`worker_cpu`]. The result is worker 0's, with `mpps`,
/// `mpps_wall` and `tx_packets` the workers' sums and `mpps_per_pmd`
/// each worker's Mpps (the tier counters stay worker 0's: every worker
/// replays the same workload).
pub fn run_pmds(
    w: &Workload,
    cfg: &BenchConfig,
    opts: &RunOptions,
) -> Result<BenchResult, RunError> {
    let n = opts.pmds.max(1) as usize;
    if n == 1 {
        return run(w, cfg, opts);
    }
    let start = Barrier::new(n);
    let results: Vec<Result<BenchResult, RunError>> = std::thread::scope(|s| {
        let others: Vec<_> = (1..n)
            .map(|i| {
                let start = &start;
                s.spawn(move || {
                    if let Some((cpu0, ncpus)) = opts.pin {
                        let cpu = worker_cpu(cpu0, ncpus, i);
                        if let Err(e) = flowpath_io::affinity::pin_current_thread(cpu) {
                            start.wait();
                            return Err(RunError::Pin {
                                worker: i,
                                cpu,
                                reason: e.to_string(),
                            });
                        }
                        flowpath_io::affinity::raise_priority();
                    }
                    start.wait();
                    run(w, cfg, opts)
                })
            })
            .collect();
        start.wait();
        let mut all = vec![run(w, cfg, opts)];
        for h in others {
            // A worker's panic is the benchmark's: passed on as it is.
            all.push(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        }
        all
    });
    let mut done = Vec::with_capacity(n);
    for r in results {
        done.push(r?);
    }
    let per: Vec<f64> = done.iter().map(|r| r.mpps).collect();
    let mut first = done.swap_remove(0);
    for r in &done {
        first.mpps_wall += r.mpps_wall;
        first.tx_packets += r.tx_packets;
    }
    first.mpps = per.iter().sum();
    first.mpps_per_pmd = per;
    Ok(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::parse_config;
    use crate::workload::{load, WorkloadSpec};
    use flowpath_trafficgen::Order;
    use std::time::Duration;

    #[test]
    fn workers_take_the_cpus_from_the_top_down() {
        assert_eq!(
            (0..4).map(|i| worker_cpu(15, 16, i)).collect::<Vec<_>>(),
            [15, 14, 13, 12]
        );
        assert_eq!(
            (0..3).map(|i| worker_cpu(1, 2, i)).collect::<Vec<_>>(),
            [1, 0, 1]
        );
        assert_eq!(worker_cpu(0, 0, 3), 0);
    }

    #[test]
    fn two_workers_each_count_their_own_packets() {
        let w = load(&WorkloadSpec::Flows {
            flows: 64,
            order: Order::RoundRobin,
        })
        .unwrap();
        let opts = RunOptions {
            warmup: Duration::from_millis(5),
            duration: Duration::from_millis(30),
            pmds: 2,
            pin: None,
            ..RunOptions::default()
        };
        let r = run_pmds(&w, &parse_config("emc:1").unwrap(), &opts).unwrap();
        assert_eq!(r.mpps_per_pmd.len(), 2);
        assert!(r.mpps_per_pmd.iter().all(|&m| m > 0.0), "{r:?}");
        let sum: f64 = r.mpps_per_pmd.iter().sum();
        assert!((r.mpps - sum).abs() < 1e-9);
        // Each worker's own counters: worker 0's are part of the sum.
        assert!(r.tx_packets > r.stats.packets_received, "{r:?}");
    }
}
