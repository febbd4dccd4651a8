//! `flowpath bench`: workloads × configurations → Mpps, TSC cycles per
//! packet and where every packet was decided, measured by replaying the
//! workload from memory through the whole datapath on one core.
//!
//! The pieces, in the order a run uses them:
//!
//! | module | what |
//! |---|---|
//! | [`workload`] | generated profiles or captures (+ `.parts` lists, 4 input ports as the OVS-DPDK harness) and their rules, in memory |
//! | [`sfr`] | TRex's SFR profile read from its YAML and captures and expanded as two ports (also `flowpath gen sfr`'s loader) |
//! | [`grid`] | configurations: `emc`, `emc:N`, `smc`, `dfc`, `cd`, `nomf`, `none`, joined by `+` |
//! | [`scenario`] | the default grid and the seeds' tables (`dfc`, `cd`, `emc-prob`, `nmap`, `parity`, `tse`, `storm`, `ct`, `trex`) |
//! | [`runner`] | the replay loop (copy → extract → classify → execute), warm-up and measured interval |
//! | [`result`] | one measurement; its JSON keys are those of `flowpath run --json` plus `workload`, `config`, `mpps` |
//! | [`output`], [`plot`] | tables laid out like the seeds', CSV, JSON, SVG |
//!
//! Why a crate and not part of the binary: the loop is what the project's
//! performance claims rest on, so it is a library with tests (tiers add up,
//! shapes of the outputs) that the CLI and any later harness share. Timing
//! is measured here and never asserted in tests.
//!
//! Threads: [`run_plan`] runs everything on the calling thread; the caller
//! pins it (`flowpath_io::affinity`) before.

#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod grid;
pub mod memlat;
pub mod output;
pub mod plot;
pub mod pmds;
pub mod result;
pub mod runner;
pub mod scenario;
pub mod sfr;
pub mod workload;

pub use grid::{parse_config, parse_configs, BenchConfig, GridError};
pub use result::BenchResult;
pub use runner::{run, run_interleaved, EmcFill, RunError, RunOptions};
pub use scenario::{plan, Plan, Scenario};
pub use workload::{load, Workload, WorkloadError, WorkloadSpec};

/// What [`run_plan`] reports while it works.
#[derive(Clone, Copy, Debug)]
pub enum Progress<'a> {
    /// A workload is being generated or read.
    Loading {
        /// Its name.
        workload: &'a str,
    },
    /// A run is starting (`index` of `total`, 0-based).
    Running {
        /// Workload name.
        workload: &'a str,
        /// Configuration label.
        config: &'a str,
        /// Runs done so far.
        index: usize,
        /// Runs in the plan.
        total: usize,
    },
    /// A run finished.
    Done(&'a BenchResult),
}

/// Why a plan could not be run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A workload could not be loaded.
    #[error("workload {name}")]
    Workload {
        /// Workload name.
        name: String,
        /// The cause.
        source: WorkloadError,
    },
    /// A run failed.
    #[error("{0}")]
    Run(#[from] RunError),
}

/// Everything a plan measured.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// One result per (workload, configuration), in plan order.
    pub results: Vec<BenchResult>,
    /// EMC fill measurements (emc-prob scenario), one per configuration.
    pub emc_fill: Vec<EmcFill>,
}

/// Runs every (workload, configuration) of `plan`, `opts.rounds` times
/// (each round loads each workload once), and calls `progress` along the
/// way. Each result is the round with the median Mpps; `mpps_rounds` lists
/// every round's (sorted), `mpps_by_round` the same in round order.
pub fn run_plan(
    plan: &Plan,
    opts: &RunOptions,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Report, BenchError> {
    let rounds = opts.rounds.max(1) as usize;
    let total = plan.len() * rounds;
    let mut report = Report::default();
    let mut index = 0;
    // samples[k] = the results of the k-th (workload, configuration) of the
    // plan, one per round.
    let mut samples: Vec<Vec<BenchResult>> = vec![Vec::new(); plan.len()];
    for round in 0..rounds {
        let mut k0 = 0;
        for (spec, configs) in &plan.runs {
            let name = spec.name();
            progress(Progress::Loading { workload: &name });
            let mut w = load(spec).map_err(|source| BenchError::Workload {
                name: name.clone(),
                source,
            })?;
            w.set_frame_stride(opts.frame_stride);
            if let Some(slice) = opts.interleave {
                for (j, cfg) in configs.iter().enumerate() {
                    progress(Progress::Running {
                        workload: &name,
                        config: &cfg.label,
                        index: index + j,
                        total,
                    });
                }
                let rs = runner::run_interleaved(&w, configs, opts, slice)?;
                for (c, r) in rs.into_iter().enumerate() {
                    progress(Progress::Done(&r));
                    samples[k0 + c].push(r);
                    index += 1;
                }
                k0 += configs.len();
                continue;
            }
            // Each round starts at another configuration, so a slow spell
            // of the machine does not always hit the same one.
            for j in 0..configs.len() {
                let c = (j + round) % configs.len();
                let cfg = &configs[c];
                progress(Progress::Running {
                    workload: &name,
                    config: &cfg.label,
                    index,
                    total,
                });
                let r = pmds::run_pmds(&w, cfg, opts)?;
                progress(Progress::Done(&r));
                samples[k0 + c].push(r);
                index += 1;
            }
            k0 += configs.len();
        }
    }
    for mut s in samples {
        let by_round: Vec<f64> = s.iter().map(|r| r.mpps).collect();
        s.sort_by(|a, b| a.mpps.total_cmp(&b.mpps));
        let per_round: Vec<f64> = s.iter().map(|r| r.mpps).collect();
        if s.is_empty() {
            continue;
        }
        // The median round (the lower middle one for an even count).
        let mut r = s.swap_remove((s.len() - 1) / 2);
        r.mpps_rounds = per_round;
        r.mpps_by_round = by_round;
        report.results.push(r);
    }
    if let Some((spec, target, cap)) = &plan.emc_fill {
        let name = spec.name();
        progress(Progress::Loading { workload: &name });
        let w = load(spec).map_err(|source| BenchError::Workload {
            name: name.clone(),
            source,
        })?;
        let configs = plan
            .runs
            .first()
            .map(|(_, c)| c.as_slice())
            .unwrap_or_default();
        for cfg in configs.iter().filter(|c| c.dp.emc_enable) {
            report
                .emc_fill
                .push(runner::emc_fill(&w, cfg, *target, *cap)?);
        }
    }
    Ok(report)
}

/// The EMC fill table: per configuration, packets to reach the target
/// occupancy and the time that takes at the measured rate of the same
/// workload and configuration (if it was measured).
pub fn emc_fill_table(report: &Report) -> String {
    let head: Vec<String> = [
        "config",
        "workload",
        "target",
        "packets to reach it",
        "time at measured rate",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let rows: Vec<Vec<String>> = report
        .emc_fill
        .iter()
        .map(|f| {
            let rate = report
                .results
                .iter()
                .find(|r| r.workload == f.workload && r.config == f.config)
                .map(|r| r.mpps);
            vec![
                f.config.clone(),
                f.workload.clone(),
                format!("{:.0} %", f.target * 100.0),
                f.packets.map_or(
                    format!("not reached ({:.0} % full)", f.occupancy * 100.0),
                    |p| p.to_string(),
                ),
                match (f.packets, rate) {
                    (Some(p), Some(m)) if m > 0.0 => format!("{:.3} s", p as f64 / (m * 1e6)),
                    _ => "-".into(),
                },
            ]
        })
        .collect();
    output::render(&head, &rows, 2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowpath_trafficgen::Order;
    use std::time::Duration;

    #[test]
    fn rounds_keep_plan_order_and_report_the_median() {
        let p = Plan::grid(
            "t",
            vec![WorkloadSpec::Flows {
                flows: 16,
                order: Order::RoundRobin,
            }],
            &parse_configs("emc,none,emc+dfc").unwrap(),
        );
        let opts = RunOptions {
            warmup: Duration::from_millis(2),
            duration: Duration::from_millis(10),
            intervals: 1,
            tsc_mhz: 2600.0,
            frame_stride: 0,
            rounds: 3,
            interleave: None,
            pmds: 1,
            pin: None,
        };
        let mut done = 0;
        let rep = run_plan(&p, &opts, &mut |e| {
            if let Progress::Done(r) = e {
                assert!(r.is_consistent());
                done += 1;
            }
        })
        .unwrap();
        assert_eq!(done, 9);
        let labels: Vec<&str> = rep.results.iter().map(|r| r.config.as_str()).collect();
        assert_eq!(labels, ["emc", "none", "emc+dfc"]);
        for r in &rep.results {
            assert_eq!(r.mpps_rounds.len(), 3);
            assert!(r.mpps_rounds.windows(2).all(|w| w[0] <= w[1]));
            assert_eq!(r.mpps, r.mpps_rounds[1], "median round");
            let mut by_round = r.mpps_by_round.clone();
            by_round.sort_by(f64::total_cmp);
            assert_eq!(by_round, r.mpps_rounds, "the same rounds, in round order");
        }
    }
}
