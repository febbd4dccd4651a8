//! `flowpath run`: a capture through the whole datapath, outputs to pcaps.
//!
//! Loads an `ovs-ofctl add-flows` rule file and an Ethernet capture, and
//! feeds the capture's frames, in order, to one datapath worker
//! ([`flowpath_datapath::Switch`]: EMC, second-level cache, dpcls, slow
//! path, action execution) as arriving on one input port. The datapath's
//! clock is the capture's: a batch holds up to 32 consecutive frames of
//! the same millisecond, processed at that time (idle expiry and `used`
//! times follow the capture). Processing cycles are the CPU's time-stamp
//! counter around each batch: receive copy, extraction, classification,
//! actions and the hand-off to the output ports (with `--out-dir`, the
//! pcap writes), as OVS counts its transmits in a PMD's processing cycles.
//!
//! Prints the statistics as `ovs-appctl dpif-netdev/pmd-stats-show` does,
//! the packets sent per output port and, with `--dump-flows`, the
//! megaflows as `ovs-appctl dpctl/dump-flows` does; with `--json`, one
//! JSON object instead. With `--out-dir`, what each port sent is written
//! to `DIR/port-P.pcap`, rewritten as the actions left it, with the input
//! frame's timestamp.

use anyhow::{bail, Context, Result};
use flowpath_datapath::{Outputs, PortSink, Switch};
use flowpath_flow::{Match, Style};
use flowpath_io::{load_ethernet_frames, tsc, IoError, PcapWriter};
use flowpath_odp::format_actions;
use flowpath_ofproto::tables::Lookup;
use flowpath_slowpath::{uses_normal, SlowPath};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Arguments of `flowpath run`.
#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
flowpath run --rules examples/nmap.flows --pcap nmap.pcap --out-dir out\n  \
flowpath run --rules r.flows --pcap in.pcap --second-level smc --dump-flows --json\n\n\
Defaults follow OVS: EMC on with emc-insert-inv-prob 100, no second-level cache\n\
(smc-enable=false), megaflows on, flow-limit 200000, max-idle 10000 ms.\n\
The datapath's time is the capture's timestamps (ms).")]
pub struct Args {
    #[command(flatten)]
    rules: crate::rule_args::RuleArgs,
    /// Ethernet capture (pcap or pcapng) whose frames arrive on --in-port.
    #[arg(long, value_name = "IN.pcap")]
    pcap: PathBuf,
    /// Datapath port the capture's frames arrive on.
    #[arg(long, value_name = "N", default_value_t = 1)]
    in_port: u32,
    /// Most frames in one datapath batch (1 to 32). Frames of one batch
    /// are processed pass by pass: every packet's first pass before any
    /// recirculated pass, so a `ct(commit)` after `ct(table=N)` commits
    /// only after the whole batch was looked up. `--batch 1` processes the
    /// capture packet by packet, as OVS does packets received one at a
    /// time (`netdev-dummy/receive` one frame per call).
    #[arg(long, value_name = "N", default_value_t = 32,
          value_parser = clap::value_parser!(u16).range(1..=32))]
    batch: u16,
    /// Write what each output port sends to DIR/port-P.pcap (created if
    /// missing; a port that sends nothing gets no file).
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
    #[command(flatten)]
    dp: crate::dp_args::DatapathArgs,
    /// Also print the megaflows, as `ovs-appctl dpctl/dump-flows`.
    #[arg(long)]
    dump_flows: bool,
    /// Print one JSON object: the pmd statistics' keys, `output_packets`
    /// (port → packets) and, with --dump-flows, `flows`.
    #[arg(long)]
    json: bool,
}

/// Writes each port's packets to `DIR/port-P.pcap`, opening files on
/// first use; remembers the first error (a sink cannot fail a batch).
struct PcapSink {
    dir: Option<PathBuf>,
    writers: BTreeMap<u32, PcapWriter>,
    error: Option<IoError>,
}

impl PortSink for PcapSink {
    fn send(&mut self, port: u32, packets: Outputs<'_>) {
        let Some(dir) = &self.dir else {
            return;
        };
        if self.error.is_some() {
            return;
        }
        let w = match self.writers.entry(port) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => {
                match PcapWriter::create(port_file(dir, port), 0) {
                    Ok(w) => e.insert(w),
                    Err(err) => {
                        self.error = Some(err);
                        return;
                    }
                }
            }
        };
        for p in packets.iter() {
            if let Err(e) = w.write(p.tag, p.data) {
                self.error = Some(e);
                return;
            }
        }
    }
}

/// One megaflow in `--json --dump-flows` output.
#[derive(serde::Serialize)]
struct FlowJson {
    megaflow: String,
    packets: u64,
    bytes: u64,
    actions: String,
}

/// Runs `flowpath run`.
pub fn run(args: Args) -> Result<()> {
    let tables = args.rules.load()?;

    // IoError messages name the file (and record, link type): flatten them
    // so the OS error is not printed twice.
    let frames = load_ethernet_frames(&args.pcap).map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(e) = &frames.stopped_early {
        eprintln!(
            "flowpath: warning: {e}; running the {} packets before it",
            frames.len()
        );
    }
    if let Some(dir) = &args.out_dir {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("--out-dir: cannot create {}", dir.display()))?;
    }

    args.dp.apply_process_settings();
    let cfg = args.dp.config()?;
    let normal = uses_normal(&tables);
    if normal && args.rules.ports.is_none() && tables.ports().is_empty() {
        eprintln!(
            "flowpath: warning: the rules use NORMAL but name no port, so it floods only to LOCAL; give the bridge's ports with --ports 1,2,..."
        );
    }
    // The capture's port is one of the bridge's (for `in_port` and
    // `output:REG`, which output only to the bridge's ports).
    let mut tables = tables;
    if args.rules.ports.is_none() && !tables.ports().is_empty() {
        let mut p = tables.ports().to_vec();
        p.push(args.in_port);
        tables.set_ports(p);
    }
    let bridge = Arc::new(args.rules.bridge()?);
    let mut sw = Switch::new(cfg, SlowPath::with_bridge(Arc::new(tables), bridge))
        .context("datapath configuration")?;
    let mut sink = PcapSink {
        dir: args.out_dir.clone(),
        writers: BTreeMap::new(),
        error: None,
    };
    let now_ms = replay(
        &mut sw,
        &frames,
        args.in_port,
        usize::from(args.batch),
        &mut sink,
    )?;
    for (_, w) in std::mem::take(&mut sink.writers) {
        w.finish().map_err(|e| anyhow::anyhow!("{e}"))?;
    }

    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if args.json {
        print_json(&mut out, &sw, args.dump_flows, normal, now_ms)?;
    } else {
        print_text(&mut out, &sw, args.dump_flows, now_ms)?;
        if normal {
            if let Some(b) = sw.upcall().bridge() {
                let macs = b.macs();
                writeln!(
                    out,
                    "MAC learning table (fdb/show; learned {}, moved {}, expired {}, evicted {}):",
                    macs.stats.learned, macs.stats.moved, macs.stats.expired, macs.stats.evicted
                )?;
                write!(out, "{}", macs.show(now_ms, port_name))?;
            }
        }
        let learned = sw.upcall().learned().flows();
        if !learned.is_empty() {
            writeln!(out, "learned flows (learn actions, {}):", learned.len())?;
            for r in &learned {
                writeln!(out, " {r}")?;
            }
        }
    }
    out.flush()?;
    Ok(())
}

/// Feeds every frame to `sw` on `in_port` in batches of up to `batch`
/// (at most 32) frames of the same millisecond; returns the time of the
/// last batch.
fn replay(
    sw: &mut Switch<SlowPath>,
    frames: &flowpath_io::EthernetFrames,
    in_port: u32,
    batch: usize,
    sink: &mut PcapSink,
) -> Result<u64> {
    let n = frames.len();
    let ms = |i: usize| frames.timestamps_ns.get(i).map_or(0, |t| t / 1_000_000);
    let mut i = 0;
    let mut now = 0;
    while i < n {
        now = ms(i);
        sw.housekeeping(now);
        let start = tsc::rdtsc();
        let end = i.saturating_add(batch);
        while i < n && i < end && !sw.is_full() && ms(i) == now {
            let frame = frames.get(i).unwrap_or(&[]);
            let tag = frames.timestamps_ns.get(i).copied().unwrap_or(0);
            // Cannot fail: the batch is not full.
            let _ = sw.push(in_port, frame, tag);
            i += 1;
        }
        sw.flush(now, sink);
        let cycles = tsc::rdtsc().wrapping_sub(start);
        sw.add_processing_cycles(cycles);
        if let Some(e) = sink.error.take() {
            bail!("{e}");
        }
    }
    Ok(now)
}

fn print_text(
    out: &mut impl Write,
    sw: &Switch<SlowPath>,
    dump_flows: bool,
    now_ms: u64,
) -> Result<()> {
    writeln!(out, "pmd thread numa_id 0 core_id 0:")?;
    let report = sw.report();
    write!(out, "{report}{}", report.cycle_lines(0))?;
    let mut ports = sw.port_stats().to_vec();
    ports.sort_by_key(|p| p.port);
    writeln!(out, "output ports:")?;
    for p in &ports {
        writeln!(
            out,
            "  port {}: packets:{}, bytes:{}",
            p.port, p.packets, p.bytes
        )?;
    }
    let x = sw.exec_stats();
    writeln!(out, "  dropped: {}", x.dropped)?;
    writeln!(
        out,
        "  never valid (dropped before classification): {}",
        sw.rx_stats().invalid
    )?;
    writeln!(out, "  controller: {}", x.controller)?;
    if dump_flows {
        writeln!(out, "megaflows (dpctl/dump-flows):")?;
        write!(out, "{}", sw.datapath().dump_flows(now_ms))?;
    }
    Ok(())
}

/// A port number as `fdb/show` prints it.
fn port_name(p: u32) -> String {
    if p == flowpath_ofproto::action::OFPP_LOCAL {
        "LOCAL".into()
    } else {
        p.to_string()
    }
}

fn print_json(
    out: &mut impl Write,
    sw: &Switch<SlowPath>,
    dump_flows: bool,
    normal: bool,
    now_ms: u64,
) -> Result<()> {
    let mut obj = match serde_json::to_value(sw.report())? {
        serde_json::Value::Object(m) => m,
        _ => bail!("statistics did not serialize to an object"),
    };
    let ports: serde_json::Map<String, serde_json::Value> = sw
        .port_stats()
        .iter()
        .map(|p| (p.port.to_string(), p.packets.into()))
        .collect();
    obj.insert("output_packets".into(), ports.into());
    obj.insert("rx_invalid".into(), sw.rx_stats().invalid.into());
    if let Some(b) = sw.upcall().bridge().filter(|_| normal) {
        let macs = b.macs();
        let fdb: Vec<serde_json::Value> = macs
            .entries(now_ms)
            .iter()
            .map(|e| {
                serde_json::json!({
                    "port": port_name(e.port),
                    "vlan": e.vlan,
                    "mac": flowpath_ofproto::normal::format_mac(e.mac),
                    "age": e.age_s(now_ms),
                })
            })
            .collect();
        obj.insert("fdb".into(), fdb.into());
    }
    let learned: Vec<String> = sw
        .upcall()
        .learned()
        .flows()
        .iter()
        .map(|r| r.to_string())
        .collect();
    if !learned.is_empty() {
        obj.insert("learned_flows".into(), learned.into());
    }
    if dump_flows {
        let flows = sw.datapath().megaflows();
        let list: Vec<FlowJson> = flows
            .live_refs()
            .filter_map(|r| Some((flows.get(r)?, flows.stats(r)?)))
            .map(|(mf, st)| FlowJson {
                megaflow: Match::new(&mf.key, &mf.mask).format(Style::Megaflow),
                packets: st.packets,
                bytes: st.bytes,
                actions: format_actions(mf.actions),
            })
            .collect();
        obj.insert("flows".into(), serde_json::to_value(list)?);
    }
    writeln!(out, "{}", serde_json::Value::Object(obj))?;
    Ok(())
}

/// The capture of `port`'s output in `dir`.
fn port_file(dir: &Path, port: u32) -> PathBuf {
    dir.join(format!("port-{port}.pcap"))
}
