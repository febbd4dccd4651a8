//! `flowpath gen`: writes a seeded workload as a pcap plus its rule set
//! (and, in [`sfr`], a TRex profile expanded into captures).
//!
//! A thin shell over `flowpath-trafficgen`: clap parses the profile and its
//! options into a [`Profile`] and [`Options`], the crate generates the
//! workload, and this module writes it — the frames as a classic pcap
//! (little endian, microsecond timestamps, Ethernet link type, the exact
//! file `gen-pcap.py` writes for the same workload) and the rules as an
//! `ovs-ofctl add-flows` file — and prints one summary line.

mod sfr;

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use flowpath_trafficgen::{
    generate, AttackMix, ChurnSpec, FlowsSpec, NmapRuleSet, NmapSpec, Options, Order, Profile,
    ScanOrder, StormSpec, SubtablesSpec, TseSpec, UdpChecksum, Workload,
};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness, TsResolution};

/// Shown after the help of `flowpath gen --help` (the `gen` variant's doc
/// comment in main.rs sets the about text, so the overview goes here).
const GEN_AFTER_LONG_HELP: &str = "\
Each PROFILE writes a pcap of Ethernet frames (-o) plus the OpenFlow rules \
(ovs-ofctl add-flows syntax, --rules-out) to classify them against, except `sfr`, \
which expands a TRex profile into one capture per direction; \
`flowpath gen PROFILE --help` explains the profile and its options.

The profiles reproduce the published evaluations of the Open vSwitch userspace \
datapath, as the team's reference harness gen-pcap.py writes them: for the same \
profile, parameters and --seed, `flows`, `subtables` and `nmap` produce the same \
bytes as gen-pcap.py (as one pcap file; the script splits files above 250,000 \
packets). Every workload is a pure function of its options: same seed, same file.

Frames are 64 bytes on the wire by default (60 in the pcap: no FCS), IPv4 with \
valid header checksums, TCP with valid checksums, UDP with checksum 0 (\"none\", \
as gen-pcap.py) unless --udp-checksum. Packet i is stamped i µs (1 Mpps), except \
for `churn`, whose timestamps follow --pps.";

/// Arguments of `flowpath gen`.
#[derive(clap::Args)]
#[command(
    after_help = "`flowpath gen --help` says what the workloads reproduce.",
    after_long_help = GEN_AFTER_LONG_HELP
)]
pub struct Args {
    #[command(subcommand)]
    profile: ProfileCmd,
}

#[derive(clap::Subcommand)]
enum ProfileCmd {
    /// N parallel UDP flows in round-robin, uniform or Zipf order (flow-cache
    /// sizing: EMC/SMC hit rates against the number of flows).
    #[command(long_about = "\
N parallel UDP flows, one megaflow for all of them: what changes with N is how \
well the exact-match caches (EMC, SMC/DFC) hold the flows.

Flow i is 10.0.0.0+i -> 20.0.0.0+i, UDP 1024 -> 5001. Rules: \
`priority=10,udp,actions=output:2` and `priority=0,actions=drop` (as gen-pcap.py).

Orders: rr = each flow once per round in flow order (the worst case for caches \
smaller than N; gen-pcap.py --order rr); uniform (alias random) = a uniformly \
random flow per packet (gen-pcap.py --order random); zipf:S = flow of rank k \
with probability proportional to k^-S, flow 0 the biggest elephant (zipf = zipf:1; \
S=1 with 1000 flows: the top flow carries ~13 %, the top 10 % of flows ~70 %).

Packets: rr sends whole rounds, at least --min-packets; the random orders send \
max(N, --min-packets); --packets sets the count exactly.")]
    Flows(FlowsArgs),
    /// The Cuckoo Distributor evaluation: S rules with S distinct masks
    /// (dpcls subtables), S×D UDP flows in uniform random order.
    #[command(long_about = "\
The Cuckoo Distributor evaluation (OVS mailing list): S rules with S distinct \
masks, so the megaflow classifier holds S subtables and an EMC miss costs up to \
S subtable probes unless a second-level cache (SMC, DFC, CD) knows where to look.

Rules, K = 1..S: `priority=10,udp,nw_src=K.0.0.0/(7+K),actions=output:2`; the \
prefix reaches /32 at K=25, so for K > 25 the rule is \
`priority=10,udp,nw_src=K.0.0.0/(K-18),tp_src=1024,actions=output:2` (still one \
distinct mask per rule; hence S <= 50). Last: `priority=0,actions=drop`.

Flows: K.0.0.0 -> 30.0.0.0+d for d = 0..D, UDP 1024 -> 5001; each matches exactly \
its rule K. Order: uniform random, max(S×D, --min-packets) packets.")]
    Subtables(SubtablesArgs),
    /// A TCP SYN port scan (nmap) against port-drop rule sets (megaflow
    /// un-wildcarding of tp_dst: the ports trie).
    #[command(long_about = "\
The nmap evaluation of the megaflow classifier's port prefix tracking: a SYN scan \
sends one packet to every port of every host, so without a ports trie every probe \
needs its own exact-port megaflow.

Traffic: TCP SYNs 7.7.7.1:40000 -> 7.7.7.101 .. 7.7.7.(100+H), every port 1..P, \
each (host, port) once, in random order (nmap randomises ports; the shuffle of \
gen-pcap.py) or --order port-major. --packets repeats or cuts the scan.

Every rule set is followed by `priority=0,actions=output:2` (the evaluation's \
NORMAL replaced by output:2, as the harness does).")]
    Nmap(NmapArgs),
    /// Short-lived UDP flows arriving at a steady rate (flow churn: caches
    /// keep seeing the first packets of new flows).
    #[command(long_about = "\
Flow churn: a working set of --flows N concurrent UDP flows where every 1/R s \
(R = --new-per-sec) the oldest flow ends and a brand-new one takes its place. \
Packets go out at --pps P (default 4×R), round robin over the N slots, so each \
flow lives N/R seconds and sends about P/R packets (4 by default). The pcap \
timestamps follow P: packet j at j/P seconds (microsecond resolution).

Flow f is 10.0.0.0+f -> 20.0.0.0+f, UDP 1024 -> 5001; rules as `flows`. Length: \
--duration seconds, or --packets, or by default 2N/R seconds (the working set \
replaced twice), at least --min-packets. The schedule uses no randomness.")]
    Churn(ChurnArgs),
    /// Tuple Space Explosion attack traffic mixed with established flows.
    #[command(long_about = "\
The Tuple Space Explosion attack (Csikor et al., CoNEXT 2019; CVE-2019-25076) \
against an ACL: allow tcp,nw_src=10.0.0.0/8,nw_dst=10.1.2.3,tp_dst=80, drop the rest. \
With prefix tracking, a packet that first differs from the allowed values at bit b \
of a field gets a megaflow un-wildcarding b+1 bits: the attack walks every \
(first differing bit of nw_src's /8 or none) x (of nw_dst or none) x (of tp_dst or \
none), 5048 shapes, each a new flow, so the datapath collects megaflow masks.

Legitimate traffic: --flows established TCP flows 10.0.0.x -> 10.1.2.3:80, round \
robin. --share PCT (or --attack-pps N at the capture's 1 Mpps) sets the attack's \
share of the packets, interleaved evenly. Defences: flowpath bench/run/switch \
--mask-budget N (bench token mb:N).")]
    Tse(AttackArgs),
    /// A flood of new flows mixed with established flows.
    #[command(long_about = "\
An upcall storm: --flows established UDP flows (the `flows` profile's addressing, \
10.0.0.0+f -> 20.0.0.0+f) and, at --share PCT of the packets, packets each of a \
brand-new flow (seeded random source 11.x.y.z and port). With megaflows off (or \
rules that make megaflows exact) every such packet is an upcall on the forwarding \
core. Rules as `flows`. Defence: --upcall-budget N (bench token ub:N).")]
    Storm(AttackArgs),
    /// TRex's SFR stateful profile (or any cap_info profile) expanded into
    /// a client-to-server and a server-to-client capture.
    #[command(long_about = sfr::LONG_ABOUT)]
    Sfr(sfr::SfrArgs),
}

/// Options every profile takes.
#[derive(clap::Args)]
struct Common {
    /// Pcap file to write (classic pcap, Ethernet, microsecond timestamps).
    #[arg(short = 'o', long = "output", value_name = "OUT.pcap")]
    output: PathBuf,
    /// Rules file to write (ovs-ofctl add-flows syntax, one rule per line)
    /// [default: OUT.pcap with the extension .flows].
    #[arg(long, value_name = "OUT.flows")]
    rules_out: Option<PathBuf>,
    /// Seed of the random orders; the default is gen-pcap.py's.
    #[arg(long, value_name = "S", default_value_t = flowpath_trafficgen::DEFAULT_SEED)]
    seed: u64,
    /// Frame size on the wire in bytes, FCS included (64..=9216); the pcap
    /// holds 4 bytes less. UDP frames grow their payload, TCP SYNs their
    /// Ethernet padding.
    #[arg(long, value_name = "B", default_value_t = flowpath_trafficgen::DEFAULT_FRAME_SIZE)]
    frame_size: usize,
    /// Exact number of packets [default: per profile, see its help].
    #[arg(long, value_name = "N")]
    packets: Option<u64>,
    /// Small workloads are repeated to at least this many packets, so every
    /// 32-packet rx burst is full (gen-pcap.py --min-pkts).
    #[arg(long, value_name = "N", default_value_t = flowpath_trafficgen::DEFAULT_MIN_PACKETS)]
    min_packets: u64,
    /// Fill in UDP checksums (default 0 = "no checksum", as gen-pcap.py).
    #[arg(long)]
    udp_checksum: bool,
}

#[derive(clap::Args)]
struct FlowsArgs {
    /// Number of distinct flows (1..=16777216).
    #[arg(long, value_name = "N")]
    flows: u64,
    /// Packet order: rr | uniform | zipf:S (Zipf exponent S >= 0).
    #[arg(long, value_name = "ORDER", default_value = "rr", value_parser = parse_order)]
    order: Order,
    #[command(flatten)]
    common: Common,
}

#[derive(clap::Args)]
struct SubtablesArgs {
    /// Number of rules, each with its own mask (S, 1..=50).
    #[arg(long, value_name = "S")]
    subtables: u64,
    /// Destinations per rule (D); S×D flows in all (at most 16777216).
    #[arg(long, value_name = "D")]
    dsts: u64,
    #[command(flatten)]
    common: Common,
}

#[derive(clap::Args)]
struct NmapArgs {
    /// Number of scanned hosts, 7.7.7.101 onwards (1..=154).
    #[arg(long, value_name = "H", default_value_t = flowpath_trafficgen::nmap::DEFAULT_HOSTS)]
    hosts: u64,
    /// Ports 1..=P are scanned on every host (1..=65535).
    #[arg(long, value_name = "P", default_value_t = 65535)]
    ports: u64,
    /// Probe order.
    #[arg(long, value_enum, default_value_t = ScanOrderArg::Random)]
    order: ScanOrderArg,
    /// Rules to classify the scan against (each followed by
    /// priority=0,actions=output:2, or with --normal by
    /// priority=0,actions=NORMAL).
    #[arg(long, value_enum, value_name = "SET", default_value_t = RuleSetArg::Port90)]
    rules_set: RuleSetArg,
    /// End the rules with priority=0,actions=NORMAL, as the seed
    /// evaluation's bridge (run them with --ports 1,2: the scanner's
    /// targets never answer, so NORMAL floods to every other port).
    #[arg(long)]
    normal: bool,
    #[command(flatten)]
    common: Common,
}

#[derive(clap::Args)]
struct AttackArgs {
    /// Legitimate (established) flows.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    flows: u64,
    /// Share of packets that are attack packets, in percent (0..=100).
    #[arg(
        long,
        value_name = "PCT",
        default_value_t = 10.0,
        conflicts_with = "attack_pps"
    )]
    share: f64,
    /// Attack packets per second at the capture's 1,000,000 pps (sets the
    /// share instead of --share).
    #[arg(long, value_name = "N")]
    attack_pps: Option<u64>,
    #[command(flatten)]
    common: Common,
}

#[derive(clap::Args)]
struct ChurnArgs {
    /// Concurrent flows: the working set N (1..=16777216).
    #[arg(long, value_name = "N")]
    flows: u64,
    /// New flows per second R (each replaces the oldest live flow).
    #[arg(long, value_name = "R")]
    new_per_sec: u64,
    /// Length in seconds (fractions allowed) [default: 2N/R]; excludes
    /// --packets.
    #[arg(long, value_name = "SECS", value_parser = parse_seconds)]
    duration: Option<Duration>,
    /// Packets per second, all flows together (>= R) [default: 4×R].
    #[arg(long, value_name = "P")]
    pps: Option<u64>,
    #[command(flatten)]
    common: Common,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ScanOrderArg {
    /// All probes shuffled (random.shuffle with --seed, as gen-pcap.py).
    Random,
    /// Port 1 on every host, then port 2 on every host, and so on.
    PortMajor,
}

/// The nmap rule sets; the doc comments are the `--help` text.
#[derive(Clone, Copy, clap::ValueEnum)]
enum RuleSetArg {
    /// priority=65535,tcp,tp_dst=90,actions=drop (the evaluation's rule).
    #[value(name = "port90")]
    Port90,
    /// Drop tp_dst=90 and tp_dst=91 (two rules at 65535): adjacent ports.
    #[value(name = "ports90-91")]
    Ports90To91,
    /// Drop tp_dst=22 and tp_dst=5900 (two rules at 65535): distant ports.
    #[value(name = "ports22-5900")]
    Ports22And5900,
    /// priority=65535,tcp,tp_dst=0x58/0xfff8,actions=drop: ports 88-95, one
    /// masked rule.
    #[value(name = "mask0x58")]
    Mask0x58,
    /// Drop tp_dst=90 .. tp_dst=95 as six exact-port rules at 65535.
    #[value(name = "ports90-95")]
    Ports90To95,
    /// Drop tp_dst=90 at 65535 nested in
    /// priority=65534,tcp,nw_dst=7.7.7.0/24,actions=output:2.
    #[value(name = "nested")]
    Nested,
    /// As nested, both rules at priority 65535 (port 90's verdict is then
    /// undefined by OpenFlow).
    #[value(name = "nested-same-prio")]
    NestedSamePrio,
    /// priority=65535,tcp,nw_dst=7.7.7.104,tp_dst=90,actions=output:2 over
    /// priority=65533,tcp,tp_dst=90,actions=drop.
    #[value(name = "allow-over-drop")]
    AllowOverDrop,
    /// allow-over-drop plus priority=65533,tcp,tp_dst=91,actions=drop.
    #[value(name = "allow-over-drop-91")]
    AllowOverDrop91,
    /// priority=65535,tcp,nw_dst=7.7.7.104,tp_dst=0x58/0xfff8,actions=drop over
    /// priority=65534,tcp,tp_dst=0x50/0xfff0,actions=drop.
    #[value(name = "masked-nested")]
    MaskedNested,
    /// As masked-nested, both at priority 65535.
    #[value(name = "masked-nested-same-prio")]
    MaskedNestedSamePrio,
}

impl From<RuleSetArg> for NmapRuleSet {
    fn from(r: RuleSetArg) -> Self {
        match r {
            RuleSetArg::Port90 => NmapRuleSet::Port90,
            RuleSetArg::Ports90To91 => NmapRuleSet::Ports90To91,
            RuleSetArg::Ports22And5900 => NmapRuleSet::Ports22And5900,
            RuleSetArg::Mask0x58 => NmapRuleSet::Mask0x58,
            RuleSetArg::Ports90To95 => NmapRuleSet::Ports90To95,
            RuleSetArg::Nested => NmapRuleSet::Nested,
            RuleSetArg::NestedSamePrio => NmapRuleSet::NestedSamePrio,
            RuleSetArg::AllowOverDrop => NmapRuleSet::AllowOverDrop,
            RuleSetArg::AllowOverDrop91 => NmapRuleSet::AllowOverDrop91,
            RuleSetArg::MaskedNested => NmapRuleSet::MaskedNested,
            RuleSetArg::MaskedNestedSamePrio => NmapRuleSet::MaskedNestedSamePrio,
        }
    }
}

/// The reason part of a trafficgen error (clap names the option itself).
fn reason(e: flowpath_trafficgen::Error) -> String {
    match e {
        flowpath_trafficgen::Error::InvalidValue { reason, .. } => reason,
        other => other.to_string(),
    }
}

fn parse_order(s: &str) -> Result<Order, String> {
    s.parse().map_err(reason)
}

fn parse_seconds(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| "expected a number of seconds".to_string())?;
    Duration::try_from_secs_f64(secs)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| "expected a positive number of seconds".to_string())
}

/// Runs `flowpath gen`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let (profile, common) = match args.profile {
        ProfileCmd::Sfr(a) => return sfr::run(a),
        ProfileCmd::Flows(a) => (
            Profile::Flows(FlowsSpec {
                flows: a.flows,
                order: a.order,
            }),
            a.common,
        ),
        ProfileCmd::Subtables(a) => (
            Profile::Subtables(SubtablesSpec {
                subtables: a.subtables,
                dsts: a.dsts,
            }),
            a.common,
        ),
        ProfileCmd::Nmap(a) => {
            let order = match a.order {
                ScanOrderArg::Random => ScanOrder::Random,
                ScanOrderArg::PortMajor => ScanOrder::PortMajor,
            };
            let spec = NmapSpec {
                hosts: a.hosts,
                ports: a.ports,
                order,
                rules: a.rules_set.into(),
                normal: a.normal,
            };
            (Profile::Nmap(spec), a.common)
        }
        ProfileCmd::Churn(a) => {
            let duration_ns = match a.duration {
                Some(d) => Some(u64::try_from(d.as_nanos()).map_err(|_| {
                    anyhow::anyhow!("invalid value for --duration: {d:?} is too long")
                })?),
                None => None,
            };
            let spec = ChurnSpec {
                flows: a.flows,
                new_per_sec: a.new_per_sec,
                duration_ns,
                pps: a.pps,
            };
            (Profile::Churn(spec), a.common)
        }
        ProfileCmd::Tse(a) => {
            let mix = attack_mix(&a)?;
            (Profile::Tse(TseSpec { mix }), a.common)
        }
        ProfileCmd::Storm(a) => {
            let mix = attack_mix(&a)?;
            (Profile::Storm(StormSpec { mix }), a.common)
        }
    };
    let opts = Options {
        seed: common.seed,
        frame_size: common.frame_size,
        packets: common.packets,
        min_packets: common.min_packets,
        udp_checksum: if common.udp_checksum {
            UdpChecksum::Computed
        } else {
            UdpChecksum::Zero
        },
    };
    let workload = generate(&profile, &opts)?;
    let rules_out = common
        .rules_out
        .unwrap_or_else(|| common.output.with_extension("flows"));
    if rules_out == common.output {
        anyhow::bail!(
            "invalid value '{}' for --rules-out: it is also the pcap output (-o)",
            rules_out.display()
        );
    }
    write_pcap(&common.output, &workload)
        .with_context(|| format!("writing {}", common.output.display()))?;
    std::fs::write(&rules_out, workload.rules_text())
        .with_context(|| format!("writing {}", rules_out.display()))?;
    println!(
        "{} flows, {} packets, {} rules -> {}, {} ({})",
        workload.flow_count(),
        workload.packet_count(),
        workload.rules().len(),
        common.output.display(),
        rules_out.display(),
        workload.description()
    );
    Ok(())
}

/// Writes the workload as a classic little-endian microsecond pcap: the
/// same global header and records as `gen-pcap.py`.
fn write_pcap(path: &Path, w: &Workload) -> anyhow::Result<()> {
    let file = File::create(path)?;
    let header = PcapHeader {
        version_major: 2,
        version_minor: 4,
        ts_correction: 0,
        ts_accuracy: 0,
        snaplen: 65535,
        datalink: DataLink::ETHERNET,
        ts_resolution: TsResolution::MicroSecond,
        endianness: Endianness::Little,
    };
    let mut writer = PcapWriter::with_header(BufWriter::with_capacity(1 << 20, file), header)?;
    for p in w.packets() {
        // Frames are at most 9212 bytes: the length fits u32.
        let len = p.data.len() as u32;
        writer.write_packet(&PcapPacket::new(
            Duration::from_nanos(p.timestamp_ns),
            len,
            p.data,
        ))?;
    }
    writer.into_writer().flush()?;
    Ok(())
}

/// The attack mix from `--flows`, `--share` / `--attack-pps`.
fn attack_mix(a: &AttackArgs) -> anyhow::Result<AttackMix> {
    let share = match a.attack_pps {
        Some(n) => {
            let pps = flowpath_trafficgen::DEFAULT_PPS;
            if n > pps {
                anyhow::bail!(
                    "invalid value '{n}' for --attack-pps: at most {pps} (the capture's rate)"
                );
            }
            n as f64 / pps as f64
        }
        None => {
            if !(0.0..=100.0).contains(&a.share) {
                anyhow::bail!(
                    "invalid value '{}' for --share: a percentage from 0 to 100",
                    a.share
                );
            }
            a.share / 100.0
        }
    };
    Ok(AttackMix {
        flows: a.flows,
        share,
        packets: None,
    })
}
