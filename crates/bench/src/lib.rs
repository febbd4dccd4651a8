//! `flowpath bench`: workloads × configurations → Mpps, TSC cycles per
//! packet and where every packet was decided, measured by replaying the
//! workload from memory through the whole datapath on one core.
//!
//! The pieces, in the order a run uses them:
//!
//! | module | what |
//! |---|---|
//! | [`workload`] | generated profiles or captures (+ `.parts` lists, 4 input ports as the OVS-DPDK harness) and their rules, in memory |
//! | [`grid`] | configurations: `emc`, `emc:N`, `smc`, `dfc`, `cd`, `nomf`, `none`, joined by `+` |
//! | [`scenario`] | the default grid and the seeds' tables (`dfc`, `cd`, `emc-prob`, `nmap`, `parity`) |
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
pub mod output;
pub mod plot;
pub mod result;
pub mod runner;
pub mod scenario;
pub mod workload;

pub use grid::{parse_config, parse_configs, BenchConfig, GridError};
pub use result::BenchResult;
pub use runner::{run, EmcFill, RunError, RunOptions};
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
    #[error("workload {name}: {source}")]
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

/// Runs every (workload, configuration) of `plan`, loading each workload
/// once, and calls `progress` along the way.
pub fn run_plan(
    plan: &Plan,
    opts: &RunOptions,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Report, BenchError> {
    let total = plan.len();
    let mut report = Report::default();
    let mut index = 0;
    for (spec, configs) in &plan.runs {
        let name = spec.name();
        progress(Progress::Loading { workload: &name });
        let mut w = load(spec).map_err(|source| BenchError::Workload {
            name: name.clone(),
            source,
        })?;
        w.set_frame_stride(opts.frame_stride);
        for cfg in configs {
            progress(Progress::Running {
                workload: &name,
                config: &cfg.label,
                index,
                total,
            });
            let r = run(&w, cfg, opts)?;
            progress(Progress::Done(&r));
            report.results.push(r);
            index += 1;
        }
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
