//! `flowpath`: a userspace software-switch datapath with the Open vSwitch
//! flow-caching hierarchy (EMC, SMC/DFC/Cuckoo Distributor, megaflow
//! classifier, slow path).
//!
//! This binary is thin: each subcommand lives in its own `cmd_*` module
//! that parses its arguments (clap) and calls into the library crates.

#![forbid(unsafe_code)]

mod cmd_bench;
mod cmd_ctl;
mod cmd_gen;
mod cmd_run;
mod cmd_switch;
mod cmd_trace;
mod dp_args;
mod rule_args;
mod trace_tunnels;

use clap::{Parser, Subcommand};

/// flowpath — a userspace software-switch datapath.
#[derive(Parser)]
#[command(name = "flowpath", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Trace packets through the rule tables, like `ovs-appctl ofproto/trace`:
    /// the rule matched in each table, the megaflow and the datapath actions.
    Trace(cmd_trace::Args),
    /// Run a capture through the datapath (EMC, second-level cache, dpcls,
    /// slow path) and write what each output port sends.
    Run(cmd_run::Args),
    /// Generate a workload (capture + matching rules).
    Gen(cmd_gen::Args),
    /// Benchmark the datapath: replay workloads from memory on one pinned
    /// core and report Mpps, cycles per packet and hits per tier, per
    /// configuration.
    Bench(Box<cmd_bench::Args>),
    /// Run the switch on live ports (AF_XDP, AF_PACKET, tap, pcap) with
    /// PMD threads and a control socket that `flowpath ctl` and
    /// `ovs-appctl` talk to.
    Switch(Box<cmd_switch::Args>),
    /// Send a command to a running switch's control socket, like
    /// `ovs-appctl -t SOCKET COMMAND [ARGS...]`.
    Ctl(cmd_ctl::Args),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Trace(a) => cmd_trace::run(a),
        Command::Run(a) => cmd_run::run(a),
        Command::Gen(a) => cmd_gen::run(a),
        Command::Bench(a) => cmd_bench::run(*a),
        Command::Switch(a) => cmd_switch::run(*a),
        Command::Ctl(a) => match cmd_ctl::run(a) {
            Ok(code) => std::process::exit(code),
            Err(e) => Err(e),
        },
    };
    if let Err(e) = result {
        eprintln!("flowpath: {}", error_text(&e));
        std::process::exit(1);
    }
}

/// The error and its causes, `: `-separated, each cause left out when the
/// text so far already says it (many errors print their source too).
fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let c = cause.to_string();
        if text.contains(&c) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&c);
    }
    text
}
