//! `flowpath bench`: replays workloads from memory through the whole
//! datapath on one pinned core and reports, per configuration, Mpps, TSC
//! cycles per packet and the hit breakdown per tier.
//!
//! A thin shell over `flowpath-bench`: clap parses the workloads, the
//! configuration grid and the outputs; the crate runs the plan; this
//! module pins the thread, shows a progress bar on stderr (hidden when
//! stderr is not a terminal) and writes the table, CSV, JSON and SVG.

use anyhow::{bail, Context, Result};
use flowpath_bench::grid::{cross_product, parse_configs, BenchConfig};
use flowpath_bench::output::{detail_table, summary_table, to_csv, to_json};
use flowpath_bench::scenario::{plan, Plan, Scenario, DEFAULT_CONFIGS};
use flowpath_bench::{emc_fill_table, run_plan, Progress, RunOptions, WorkloadSpec};
use flowpath_datapath::SecondLevel;
use flowpath_io::affinity;
use flowpath_trafficgen::Order;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

const AFTER_LONG_HELP: &str = "\
With no arguments, runs the default grid (about a minute and a half): flows 1 / 1k / 100k / 1M \
round robin and the 20-subtable Cuckoo Distributor workload (20 x 50000 flows), under \
EMC only (OVS's default), EMC+SMC, EMC+DFC, EMC+CD and no caches; prints the table and \
writes bench-results.csv, bench-results.json and bench-results.svg (in --out-dir).

Configurations (--config, comma-separated) name the tiers they have, joined by '+', \
optionally labelled LABEL=...: emc (insert probability 1/100), emc:N (1/N; emc:0 = off), \
smc, dfc, cd, hybrid (one table of megaflow and subtable entries), auto (EMC and hybrid switched on and off by measurement; implies emc), dfc-proposal (DFC + 1-way 16K EMC), nomf (megaflows off), ub:N (upcall budget, N per port per ms), mb:N (mask budget, N subtables per port), none. \
Tiers not named are off: 'emc' is OVS's default, 'smc' is SMC with the EMC off. \
Or build a cross product with --emc-inv-prob, --second and --megaflows.

Workloads: --flows N,N,... (--order rr|uniform|zipf:S), --subtables SxD,..., --nmap HxP,..., \
or --pcap FILE --rules FILE for any capture; a .parts file (the OVS-DPDK harness's \
make-pcaps.sh output) lists one capture per input port (in_port 1, 11, 12, 13), polled \
round robin. Generated workloads of more than 250000 packets are split over ports the \
same way, so both switches see the same ports.

Scenarios (--scenario) reproduce the seeds' tables: dfc, cd, emc-prob, nmap; parity is \
the OVS-DPDK comparison set (tools/parity.sh); tse and storm sweep an attack's share of \
the packets (0/1/10/50 %) against the defences (tools/attack-bench.sh adds OVS-DPDK); \
ct runs established flows through conntrack; trex replays TRex's SFR profile (`flowpath gen \
sfr`, -m 1 for 2 s, c2s on port 1, s2c on 11, NORMAL) with megaflows on and off, the seed's \
TRex rows (the replay loops, so flows come back where TRex's are new: fewer misses).

Every frame is copied into an rx buffer, extracted, classified and its actions executed \
(outputs counted), on one core pinned like a PMD (the last CPU unless --cpu/--no-pin). \
Cycles are TSC cycles of the whole loop (as OVS's pmd-stats-show); Mpps = TSC / cycles. \
The machine should be otherwise idle: the on-CPU column shows disturbances.";

/// Arguments of `flowpath bench`.
#[derive(clap::Args)]
#[command(after_long_help = AFTER_LONG_HELP)]
pub struct Args {
    /// A predefined plan: default, dfc, cd, emc-prob, nmap, parity, tse,
    /// storm, ct or trex.
    #[arg(long, value_name = "NAME")]
    scenario: Option<Scenario>,
    /// `flows` workloads: numbers of flows.
    #[arg(long, value_name = "N,N,...", value_delimiter = ',')]
    flows: Vec<u64>,
    /// Packet order of the `flows` workloads: rr, uniform or zipf:S (as `flowpath gen flows`).
    #[arg(long, default_value = "rr")]
    order: Order,
    /// `subtables` workloads: S rules (masks) x D destinations each.
    #[arg(long, value_name = "SxD,...", value_delimiter = ',')]
    subtables: Vec<String>,
    /// `nmap` workloads: H hosts x P ports (P defaults to 65535).
    #[arg(long, value_name = "HxP,...", value_delimiter = ',')]
    nmap: Vec<String>,
    /// A capture (pcap/pcapng) or a .parts list of captures (one input
    /// port each).
    #[arg(long, value_name = "FILE", requires = "rules")]
    pcap: Option<PathBuf>,
    /// The rules for --pcap (ovs-ofctl add-flows syntax).
    #[arg(long, value_name = "FILE", requires = "pcap")]
    rules: Option<PathBuf>,
    /// The group table the --rules use (`ovs-ofctl add-groups` syntax).
    #[arg(long, value_name = "FILE.groups", requires = "rules")]
    groups: Option<PathBuf>,
    /// Configurations to compare (see --help).
    #[arg(long = "config", value_name = "CFG,...")]
    configs: Vec<String>,
    /// Cross product: EMC insertion inverse probabilities (0 = EMC off).
    #[arg(long, value_name = "N,...", value_delimiter = ',')]
    emc_inv_prob: Vec<u32>,
    /// Cross product: second-level caches (smc, dfc, cd, hybrid, auto, none).
    #[arg(long, value_name = "L,...", value_delimiter = ',')]
    second: Vec<SecondLevel>,
    /// Cross product: megaflows on and/or off.
    #[arg(long, value_name = "on|off,...", value_delimiter = ',')]
    megaflows: Vec<String>,
    /// Warm-up before the measured intervals (ms; the default covers the
    /// first subtable re-ranking and Cuckoo Distributor decision, which
    /// happen after 1 s).
    #[arg(long, default_value_t = 1100, value_name = "MS")]
    warmup_ms: u64,
    /// Measured interval per configuration (ms).
    #[arg(long, default_value_t = 1500, value_name = "MS")]
    duration_ms: u64,
    /// Measured intervals per configuration, back to back after one
    /// warm-up (Mpps = their mean, as the OVS harness's -r).
    #[arg(long, default_value_t = 1, value_name = "N")]
    intervals: u32,
    /// Run the whole plan this many times, rotating the order of the
    /// configurations; each result is the median round (robust against
    /// slow spells of a shared machine).
    #[arg(long, default_value_t = 1, value_name = "N")]
    rounds: u32,
    /// Store the frames this many bytes apart instead of back to back
    /// (e.g. 4096: one packet per DPDK mbuf, as the OVS harness's net_pcap
    /// holds them), so the copy into the rx buffers misses the caches as
    /// net_pcap's does.
    #[arg(long, default_value_t = 0, value_name = "BYTES")]
    frame_stride: usize,
    /// Run the configurations of each workload side by side, taking
    /// turns of this many ms (one worker each, alive at once; the first
    /// tenth of each turn reloads the caches and is not measured), until
    /// each has --intervals x --duration-ms of measured time. On a machine
    /// whose speed drifts, this compares configurations far more precisely
    /// than running them one after the other. 0 = one after the other.
    #[arg(long, default_value_t = 0, value_name = "MS")]
    interleave_ms: u64,
    /// Run N workers at once, as N PMD threads: each on its own CPU (the
    /// measuring CPU, then the next lower ones), with its own caches and
    /// classifier, all replaying the workload from the same memory (as N
    /// rx ports looping one capture); Mpps is their sum. Shows how the
    /// datapath scales across cores.
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=256))]
    pmds: u32,
    /// CPU to pin the measuring thread to (default: the last one).
    #[arg(long, value_name = "N")]
    cpu: Option<usize>,
    /// Do not pin or renice the measuring thread.
    #[arg(long)]
    no_pin: bool,
    /// Allocate the large tables (EMC, SMC, DFC, CD, hybrid, the megaflow
    /// slab and the dpcls indexes) on ordinary 4 KB pages instead of
    /// advising 2 MB transparent huge pages.
    #[arg(long)]
    no_huge_pages: bool,
    /// TSC rate in MHz (default: detected from the kernel log).
    #[arg(long, value_name = "MHZ")]
    tsc_mhz: Option<f64>,
    /// Print the results as one JSON array on stdout (tables go to stderr).
    #[arg(long)]
    json: bool,
    /// Write the results as CSV.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Write the results as a JSON array to a file.
    #[arg(long, value_name = "FILE")]
    json_out: Option<PathBuf>,
    /// Write an SVG plot: Mpps against flows, one line per configuration.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    /// Directory for bench-*.csv/json/svg (written by default for
    /// scenarios and the default grid, into the current directory, where
    /// a flowpath checkout's .gitignore ignores them; with explicit
    /// workloads only when this is given).
    #[arg(long, short = 'o', value_name = "DIR")]
    out_dir: Option<PathBuf>,
    /// No progress bar, no tables (files and --json only).
    #[arg(long, short)]
    quiet: bool,
    /// Instead of a benchmark, measure this machine's memory latency
    /// (random pointer chase over 1 MB..1 GB, 1..16 chains at once, on
    /// 4 KB and 2 MB pages): the physical limit the cycles per packet are
    /// compared with.
    #[arg(long)]
    memory_latency: bool,
}

fn parse_pair(s: &str, what: &str, default_second: Option<u64>) -> Result<(u64, u64)> {
    let (a, b) = match s.split_once('x') {
        Some((a, b)) => (a, Some(b)),
        None => (s, None),
    };
    let a: u64 = a
        .trim()
        .parse()
        .with_context(|| format!("{what} {s:?}: expected NxM"))?;
    let b: u64 = match (b, default_second) {
        (Some(b), _) => b
            .trim()
            .parse()
            .with_context(|| format!("{what} {s:?}: expected NxM"))?,
        (None, Some(d)) => d,
        (None, None) => bail!("{what} {s:?}: expected NxM"),
    };
    Ok((a, b))
}

fn workloads(args: &Args) -> Result<Vec<WorkloadSpec>> {
    let mut w: Vec<WorkloadSpec> = args
        .flows
        .iter()
        .map(|&flows| WorkloadSpec::Flows {
            flows,
            order: args.order,
        })
        .collect();
    for s in &args.subtables {
        let (subtables, dsts) = parse_pair(s, "--subtables", None)?;
        w.push(WorkloadSpec::Subtables { subtables, dsts });
    }
    for s in &args.nmap {
        let (hosts, ports) = parse_pair(s, "--nmap", Some(65535))?;
        w.push(WorkloadSpec::Nmap { hosts, ports });
    }
    if let (Some(pcap), Some(rules)) = (&args.pcap, &args.rules) {
        w.push(WorkloadSpec::Pcap {
            pcap: pcap.clone(),
            rules: rules.clone(),
            groups: args.groups.clone(),
        });
    }
    Ok(w)
}

fn configs(args: &Args) -> Result<Option<Vec<BenchConfig>>> {
    let mut out = Vec::new();
    for c in &args.configs {
        out.extend(parse_configs(c)?);
    }
    let cross =
        !args.emc_inv_prob.is_empty() || !args.second.is_empty() || !args.megaflows.is_empty();
    if cross {
        let probs = if args.emc_inv_prob.is_empty() {
            vec![100]
        } else {
            args.emc_inv_prob.clone()
        };
        let seconds = if args.second.is_empty() {
            vec![SecondLevel::None]
        } else {
            args.second.clone()
        };
        let mut mf = Vec::new();
        for m in &args.megaflows {
            match m.as_str() {
                "on" => mf.push(true),
                "off" => mf.push(false),
                other => bail!("--megaflows {other:?}: expected on or off"),
            }
        }
        if mf.is_empty() {
            mf.push(true);
        }
        out.extend(cross_product(&probs, &seconds, &mf));
    }
    Ok((!out.is_empty()).then_some(out))
}

fn write_file(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// `--memory-latency`: the table of cycles (and ns) per random access.
fn memory_latency(tsc_mhz: f64) -> Result<()> {
    let sizes = [1 << 20, 8 << 20, 64 << 20, 1 << 30];
    let chains = [1, 2, 4, 8, 16];
    let r = flowpath_bench::memlat::measure(&sizes, &chains, 4_000_000);
    println!(
        "random dependent loads, TSC {tsc_mhz:.0} MHz: cycles per access (ns), by buffer size, page size and chains chased at once"
    );
    println!(
        "| buffer | pages | {} |",
        chains
            .map(|k| format!("{k} chain{}", if k == 1 { "" } else { "s" }))
            .join(" | ")
    );
    println!("|---|---|{}", "---|".repeat(chains.len()));
    for &bytes in &sizes {
        for huge in [false, true] {
            let cells: Vec<String> = r
                .iter()
                .filter(|m| m.bytes == bytes && m.huge == huge)
                .map(|m| {
                    format!(
                        "{:.1} ({:.1})",
                        m.cycles_per_access,
                        m.cycles_per_access * 1000.0 / tsc_mhz
                    )
                })
                .collect();
            println!(
                "| {} MB | {} | {} |",
                bytes >> 20,
                if huge { "2 MB" } else { "4 KB" },
                cells.join(" | ")
            );
        }
    }
    Ok(())
}

/// Runs `flowpath bench`.
pub fn run(args: Args) -> Result<()> {
    flowpath_datapath::hugepage::set_enabled(!args.no_huge_pages);
    let (p, stem) = bench_plan(&args)?;
    if args.pmds > 1 && args.interleave_ms > 0 {
        bail!("--pmds and --interleave-ms cannot be combined: give one of them");
    }
    let n_cpus = affinity::available_cpus();
    let cpu = args.cpu.unwrap_or(n_cpus.saturating_sub(1));
    let pinned = if args.no_pin {
        "not pinned".to_string()
    } else {
        affinity::pin_current_thread(cpu).with_context(|| format!("cannot pin to CPU {cpu}"))?;
        let nice = affinity::raise_priority();
        format!(
            "pinned to CPU {cpu}{}",
            if nice { ", nice -20" } else { "" }
        )
    };
    if args.memory_latency {
        return memory_latency(args.tsc_mhz.unwrap_or(RunOptions::default().tsc_mhz));
    }
    let opts = RunOptions {
        warmup: Duration::from_millis(args.warmup_ms),
        duration: Duration::from_millis(args.duration_ms),
        intervals: args.intervals.max(1),
        frame_stride: args.frame_stride,
        rounds: args.rounds.max(1),
        interleave: (args.interleave_ms > 0).then(|| Duration::from_millis(args.interleave_ms)),
        pmds: args.pmds,
        pin: (!args.no_pin).then_some((cpu, n_cpus)),
        tsc_mhz: args.tsc_mhz.unwrap_or(RunOptions::default().tsc_mhz),
    };
    let header = run_header(&args, &p, &opts, &pinned);
    let bar = if args.quiet {
        ProgressBar::hidden()
    } else {
        let b = ProgressBar::new((p.len() * opts.rounds as usize) as u64);
        b.set_style(
            ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        b
    };
    let mut on_progress = |ev: Progress<'_>| match ev {
        Progress::Loading { workload } => bar.set_message(format!("loading {workload}")),
        Progress::Running {
            workload, config, ..
        } => bar.set_message(format!("{workload} / {config}")),
        Progress::Done(r) => {
            bar.inc(1);
            if !r.is_consistent() {
                bar.println(format!(
                    "warning: {} / {}: tiers add up to {} of {} packets",
                    r.workload,
                    r.config,
                    r.decided(),
                    r.stats.packets_received
                ));
            }
        }
    };
    let report = run_plan(&p, &opts, &mut on_progress)?;
    bar.finish_and_clear();

    if !args.quiet {
        let mut text = format!(
            "{header}\n\n{}\n{}",
            summary_table(&report.results),
            detail_table(&report.results)
        );
        if !report.emc_fill.is_empty() {
            text.push('\n');
            text.push_str(&emc_fill_table(&report));
        }
        if args.json {
            eprintln!("{text}");
        } else {
            println!("{text}");
        }
    }
    write_outputs(&args, &report, &p.title, stem.as_deref())?;
    Ok(())
}

/// The plan `args` asks for, and the stem of its default output files
/// (none for explicit workloads without `--out-dir`).
fn bench_plan(args: &Args) -> Result<(Plan, Option<String>)> {
    let explicit = workloads(args)?;
    let cfgs = configs(args)?;
    let (mut p, stem): (Plan, Option<String>) = match (args.scenario, explicit.is_empty()) {
        (Some(_), false) => bail!("--scenario cannot be combined with explicit workloads"),
        (Some(s), true) => (
            plan(s),
            Some(if s == Scenario::Default {
                "bench-results".to_string()
            } else {
                format!("bench-{s}")
            }),
        ),
        (None, true) => (plan(Scenario::Default), Some("bench-results".to_string())),
        (None, false) => {
            let default_cfgs = parse_configs(DEFAULT_CONFIGS)?;
            (Plan::grid("flowpath bench", explicit, &default_cfgs), None)
        }
    };
    if let Some(c) = cfgs {
        for (_, rc) in &mut p.runs {
            rc.clone_from(&c);
        }
    }
    let stem = if args.out_dir.is_some() {
        Some(stem.unwrap_or_else(|| "bench-results".into()))
    } else {
        stem
    };

    Ok((p, stem))
}

/// The line that says what ran where, above the tables.
fn run_header(args: &Args, p: &Plan, opts: &RunOptions, pinned: &str) -> String {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ");
    format!(
        "{}: {} runs x {} round(s), warm-up {} ms + {} x {} ms each{}; {pinned}; TSC {:.0} MHz; {}; load average {load}",
        p.title,
        p.len(),
        opts.rounds,
        args.warmup_ms,
        args.intervals.max(1),
        args.duration_ms,
        if args.interleave_ms > 0 {
            format!(
                ", a workload's configurations side by side in turns of {} ms",
                args.interleave_ms
            )
        } else if opts.pmds > 1 {
            format!(", {} workers at once (Mpps summed)", opts.pmds)
        } else {
            String::new()
        },
        opts.tsc_mhz,
        if args.no_huge_pages {
            "cache tables on 4 KB pages"
        } else {
            "cache tables on 2 MB pages where the kernel allows"
        }
    )
}

/// Prints the JSON (with `--json`) and writes the CSV, JSON and SVG files.
fn write_outputs(
    args: &Args,
    report: &flowpath_bench::Report,
    title: &str,
    stem: Option<&str>,
) -> Result<()> {
    let json = to_json(&report.results);
    if args.json {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{json}")?;
    }
    let dir = args.out_dir.clone().unwrap_or_else(|| PathBuf::from("."));
    if args.out_dir.is_some() {
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut written = Vec::new();
    let csv_path = args
        .csv
        .clone()
        .or_else(|| stem.map(|s| dir.join(format!("{s}.csv"))));
    let json_path = args
        .json_out
        .clone()
        .or_else(|| stem.map(|s| dir.join(format!("{s}.json"))));
    let svg_path = args
        .plot
        .clone()
        .or_else(|| stem.map(|s| dir.join(format!("{s}.svg"))));
    if let Some(path) = csv_path {
        write_file(&path, &to_csv(&report.results))?;
        written.push(path);
    }
    if let Some(path) = json_path {
        write_file(&path, &format!("{json}\n"))?;
        written.push(path);
    }
    if let Some(path) = svg_path {
        write_file(&path, &flowpath_bench::plot::svg(&report.results, title))?;
        written.push(path);
    }
    if !args.quiet && !written.is_empty() {
        let names: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
        eprintln!("wrote {}", names.join(", "));
    }
    Ok(())
}
