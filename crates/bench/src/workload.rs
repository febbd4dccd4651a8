//! Workloads held in memory for replay: the frames of each input port and
//! the rule tables they are classified against.
//!
//! What: a [`WorkloadSpec`] names a workload — one of the generated
//! profiles of `flowpath-trafficgen` (`flows`, `subtables`, `nmap`) or a
//! capture plus an `ovs-ofctl add-flows` rule file — and [`load`] turns it
//! into a [`Workload`]: per input port, all frames back to back in one
//! buffer, plus the parsed [`RuleTables`].
//!
//! Why ports: the OVS-DPDK reference harness feeds DPDK's `net_pcap` from
//! memory, and one such port holds at most 250,000 packets, so its
//! workloads above that are split into parts (`gen-pcap.py
//! --max-per-file`, listed in a `.parts` file), one input port each, with
//! OpenFlow port numbers 1, 11, 12, 13, polled round robin by the one PMD.
//! In_port is part of every datapath flow, so the split changes the number
//! of megaflows (×4 for a 1M-packet workload). Generated workloads are
//! split exactly as `gen-pcap.py` splits them, so that both switches
//! classify the same packets on the same ports.
//!
//! Invariants: every port has at least one frame; `starts` and `lens` have
//! one entry per frame and every frame lies inside `data`.

use flowpath_io::load_ethernet_frames;
use flowpath_ofproto::classifier::DEFAULT_PREFIXES;
use flowpath_ofproto::parse::parse_rules;
use flowpath_ofproto::tables::{Lookup, RuleTables};
use flowpath_trafficgen::{
    generate, FlowsSpec, NmapRuleSet, NmapSpec, Options, Order, Profile, ScanOrder, SubtablesSpec,
};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Most packets per input port (the harness's `--max-per-file`).
pub const MAX_PER_PORT: usize = 250_000;

/// The OpenFlow/datapath port number of input part `i` (as the harness:
/// 1, 11, 12, 13, ...).
pub fn part_port(i: usize) -> u32 {
    if i == 0 {
        1
    } else {
        10 + i as u32
    }
}

/// A workload to load.
#[derive(Clone, Debug, PartialEq)]
pub enum WorkloadSpec {
    /// `flows`: N UDP flows in the given order (rule `udp → output:2`).
    Flows {
        /// Number of flows.
        flows: u64,
        /// Packet order.
        order: Order,
    },
    /// `subtables`: S rules with S masks, S×D flows, uniform order.
    Subtables {
        /// Number of rules / subtables (S).
        subtables: u64,
        /// Destinations per rule (D).
        dsts: u64,
    },
    /// `nmap`: SYN scan of H hosts × ports 1..P, random order, rule set
    /// `port90` (drop tp_dst=90, else output:2).
    Nmap {
        /// Hosts (H).
        hosts: u64,
        /// Ports per host (P).
        ports: u64,
    },
    /// An attack mixed with 1000 established flows (200,000 packets):
    /// `tse` or `storm` at `share_pct` % of the packets (`flowpath gen
    /// tse|storm`).
    Attack {
        /// `tse` or `storm`.
        kind: AttackKind,
        /// The attack's share of the packets, in percent.
        share_pct: u32,
    },
    /// `ct`: the `flows` round-robin traffic (N UDP flows) and its
    /// replies (each part mirrored on the next port) through the stateful
    /// firewall of OVS's conntrack tutorial ([`CT_RULES`]: every packet
    /// tracked and recirculated; a new connection committed, later
    /// packets of both directions established), or with `nat` through
    /// source NAT ([`CT_NAT_RULES`]).
    Ct {
        /// Number of flows (connections).
        flows: u64,
        /// Source NAT on commit.
        nat: bool,
    },
    /// A TRex stateful profile (`flowpath gen sfr`) expanded in memory:
    /// client-to-server frames on port 1, server-to-client on 11, under
    /// the seed's `priority=0,actions=NORMAL`.
    Sfr {
        /// The profile (YAML).
        profile: PathBuf,
        /// TRex's `-m`.
        multiplier: f64,
        /// Seconds of flow starts (TRex's `-d`).
        duration: f64,
    },
    /// A capture (`.pcap`/`.pcapng`, or a `.parts` list of captures, one
    /// input port each) and its rules.
    Pcap {
        /// The capture or `.parts` file.
        pcap: PathBuf,
        /// The `ovs-ofctl add-flows` file.
        rules: PathBuf,
        /// The `ovs-ofctl add-groups` file the rules' `group:N` use.
        groups: Option<PathBuf>,
    },
}

/// The rules of [`WorkloadSpec::Ct`]: OVS's conntrack tutorial firewall
/// for traffic from any port (the workloads' ports 1, 11, 12, 13) to port
/// 2. Every packet takes two datapath passes (`ct`, `recirc`); a new
/// connection is committed.
pub const CT_RULES: &str = "\
table=0,priority=1,actions=drop
table=0,priority=100,ip,ct_state=-trk,actions=ct(table=1)
table=1,priority=100,ip,ct_state=+trk+new,actions=ct(commit),output:2
table=1,priority=100,ip,ct_state=+trk+est,actions=output:2
table=1,priority=1,actions=drop
";

/// [`CT_RULES`] with source NAT: new connections are committed with their
/// source translated into 10.200.0.1-10.200.0.254 (ports kept where
/// free), later packets translated by `ct(nat)`.
pub const CT_NAT_RULES: &str = "\
table=0,priority=1,actions=drop
table=0,priority=100,ip,ct_state=-trk,actions=ct(nat,table=1)
table=1,priority=100,ip,ct_state=+trk+new,actions=ct(commit,nat(src=10.200.0.1-10.200.0.254)),output:2
table=1,priority=100,ip,ct_state=+trk+est,actions=output:2
table=1,priority=1,actions=drop
";

/// Turns an Ethernet/IPv4 TCP or UDP frame into its reply: MACs,
/// addresses and ports swapped (the checksums stay valid: a swap does not
/// change a ones'-complement sum). Other frames: the MACs only.
pub fn mirror_frame(f: &mut [u8]) {
    if f.len() < 14 {
        return;
    }
    for i in 0..6 {
        f.swap(i, i + 6);
    }
    if f.len() < 34 || f[12..14] != [0x08, 0x00] || f[14] >> 4 != 4 {
        return;
    }
    for i in 26..30 {
        f.swap(i, i + 4);
    }
    let l4 = 14 + usize::from(f[14] & 15) * 4;
    if matches!(f[23], 6 | 17) && f.len() >= l4 + 4 {
        f.swap(l4, l4 + 2);
        f.swap(l4 + 1, l4 + 3);
    }
}

/// Which attack an [`WorkloadSpec::Attack`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttackKind {
    /// Tuple Space Explosion.
    Tse,
    /// New-flow storm.
    Storm,
}

impl AttackKind {
    fn name(self) -> &'static str {
        match self {
            AttackKind::Tse => "tse",
            AttackKind::Storm => "storm",
        }
    }
}

impl WorkloadSpec {
    /// The row name: `flows-rr-1000`, `subtables-20x50000`,
    /// `nmap-15x65535`, or the capture's file stem.
    pub fn name(&self) -> String {
        match self {
            WorkloadSpec::Flows { flows, order } => format!("flows-{order}-{flows}"),
            WorkloadSpec::Subtables { subtables, dsts } => {
                format!("subtables-{subtables}x{dsts}")
            }
            WorkloadSpec::Nmap { hosts, ports } => format!("nmap-{hosts}x{ports}"),
            WorkloadSpec::Attack { kind, share_pct } => format!("{}-{share_pct}pct", kind.name()),
            WorkloadSpec::Ct { flows, nat: false } => format!("ct-{flows}"),
            WorkloadSpec::Ct { flows, nat: true } => format!("ct-nat-{flows}"),
            WorkloadSpec::Sfr {
                multiplier,
                duration,
                ..
            } => format!("sfr-x{multiplier}-{duration}s"),
            WorkloadSpec::Pcap { pcap, .. } => pcap
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .map(|n| {
                    n.trim_end_matches(".parts")
                        .trim_end_matches(".pcapng")
                        .trim_end_matches(".pcap")
                        .to_string()
                })
                .unwrap_or_else(|| pcap.display().to_string()),
        }
    }

    /// Number of distinct flows, when known (the x axis of plots).
    pub fn flow_count(&self) -> Option<u64> {
        match self {
            WorkloadSpec::Flows { flows, .. } | WorkloadSpec::Ct { flows, .. } => Some(*flows),
            WorkloadSpec::Subtables { subtables, dsts } => Some(subtables * dsts),
            WorkloadSpec::Nmap { hosts, ports } => Some(hosts * ports),
            WorkloadSpec::Attack { .. } | WorkloadSpec::Sfr { .. } | WorkloadSpec::Pcap { .. } => {
                None
            }
        }
    }

    /// The family of the workload: what a plot draws as one line
    /// (`flows-rr`, `subtables-20`, `nmap`, `pcap`).
    pub fn family(&self) -> String {
        match self {
            WorkloadSpec::Flows { order, .. } => format!("flows-{order}"),
            WorkloadSpec::Subtables { subtables, .. } => format!("subtables-{subtables}"),
            WorkloadSpec::Nmap { .. } => "nmap".into(),
            WorkloadSpec::Attack { kind, .. } => kind.name().into(),
            WorkloadSpec::Ct { nat: false, .. } => "ct".into(),
            WorkloadSpec::Ct { nat: true, .. } => "ct-nat".into(),
            WorkloadSpec::Sfr { .. } => "sfr".into(),
            WorkloadSpec::Pcap { .. } => "pcap".into(),
        }
    }
}

impl fmt::Display for WorkloadSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// Why a workload could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The generator refused the parameters.
    #[error("{0}")]
    Generate(#[from] flowpath_trafficgen::Error),
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A capture could not be loaded.
    #[error("{0}")]
    Capture(#[from] flowpath_io::IoError),
    /// The rules did not parse.
    #[error("{0}")]
    Rules(String),
    /// A TRex profile or one of its captures is unusable.
    #[error("{0}")]
    Profile(String),
    /// A capture or `.parts` list holds no packet.
    #[error("{0}: no packets")]
    Empty(PathBuf),
}

/// The frames one input port replays.
#[derive(Clone, Debug)]
pub struct PortTraffic {
    /// Datapath port number the frames arrive on.
    pub in_port: u32,
    /// The frames' bytes (back to back, or spread out:
    /// [`Workload::set_frame_stride`]).
    pub data: Vec<u8>,
    /// Frame `i` is `data[starts[i]..starts[i] + lens[i]]`.
    pub starts: Vec<usize>,
    /// Length of each frame.
    pub lens: Vec<u32>,
}

impl PortTraffic {
    /// Frames stored back to back: frame `i` is
    /// `data[offsets[i]..offsets[i + 1]]` (`offsets` non-decreasing, one
    /// more entry than frames, the last at most `data.len()`).
    pub fn packed(in_port: u32, data: Vec<u8>, offsets: &[usize]) -> Self {
        PortTraffic {
            in_port,
            data,
            starts: offsets
                .iter()
                .take(offsets.len().saturating_sub(1))
                .copied()
                .collect(),
            lens: offsets.windows(2).map(|o| (o[1] - o[0]) as u32).collect(),
        }
    }

    /// Number of frames.
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// True when there is no frame (never, for a loaded workload).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The longest frame.
    pub fn max_len(&self) -> usize {
        self.lens.iter().max().map_or(0, |&l| l as usize)
    }

    /// Frame `i` (`i < len()`).
    #[inline(always)]
    pub fn frame(&self, i: usize) -> &[u8] {
        let s = self.starts[i];
        &self.data[s..s + self.lens[i] as usize]
    }
}

/// A loaded workload. See the module documentation.
#[derive(Debug)]
pub struct Workload {
    /// What was loaded.
    pub spec: WorkloadSpec,
    /// The input ports, in polling order.
    pub ports: Vec<PortTraffic>,
    /// The rules, parsed (shared with the slow path of every run).
    pub tables: Arc<RuleTables>,
    /// The rules as text (one per line).
    pub rules_text: String,
}

impl Workload {
    /// Total number of frames over all ports.
    pub fn packet_count(&self) -> usize {
        self.ports.iter().map(PortTraffic::len).sum()
    }

    /// Spreads every port's frames `stride` bytes apart (at least the
    /// longest frame), instead of back to back: the memory layout of a
    /// capture held one packet per DPDK mbuf, as `net_pcap` with
    /// `infinite_rx` holds it (an mbuf every few KB), so the source's
    /// cache misses match the OVS harness's. `0` keeps them packed.
    pub fn set_frame_stride(&mut self, stride: usize) {
        if stride == 0 {
            return;
        }
        for p in &mut self.ports {
            let stride = stride.max(p.max_len());
            let mut data = vec![0u8; p.len() * stride];
            for i in 0..p.len() {
                let f = p.frame(i);
                let at = i * stride;
                data[at..at + f.len()].copy_from_slice(f);
            }
            p.starts = (0..p.len()).map(|i| i * stride).collect();
            p.data = data;
        }
    }
}

/// Sizes of the parts `total` packets are split into, as `gen-pcap.py`
/// (`ceil(total / max)` parts, the first `total % parts` one larger).
pub fn part_sizes(total: usize, max: usize) -> Vec<usize> {
    let n = total.div_ceil(max.max(1)).max(1);
    let (base, rem) = (total / n, total % n);
    (0..n).map(|i| base + usize::from(i < rem)).collect()
}

/// The rule tables of a workload whose traffic arrives on `ports`. When
/// the rules use `NORMAL`, the bridge's ports (where it floods) are the
/// input ports, port 2 (the harness's output port) and the ports the
/// rules name; the bench's bridge also has LOCAL.
fn parse_tables(
    text: &str,
    name: &str,
    ports: &[PortTraffic],
) -> Result<Arc<RuleTables>, WorkloadError> {
    let rules = parse_rules(text, Some(name)).map_err(|e| WorkloadError::Rules(e.to_string()))?;
    let mut tables = RuleTables::new(rules, DEFAULT_PREFIXES);
    if flowpath_slowpath::uses_normal(&tables) {
        let mut p: Vec<u32> = tables.ports().to_vec();
        p.extend(ports.iter().map(|t| t.in_port));
        p.push(2);
        tables.set_ports(p);
    }
    Ok(Arc::new(tables))
}

/// Loads `spec` into memory.
pub fn load(spec: &WorkloadSpec) -> Result<Workload, WorkloadError> {
    let profile = match spec {
        WorkloadSpec::Flows { flows, order } => Profile::Flows(FlowsSpec {
            flows: *flows,
            order: *order,
        }),
        WorkloadSpec::Ct { flows, .. } => Profile::Flows(FlowsSpec {
            flows: *flows,
            order: Order::RoundRobin,
        }),
        WorkloadSpec::Subtables { subtables, dsts } => Profile::Subtables(SubtablesSpec {
            subtables: *subtables,
            dsts: *dsts,
        }),
        WorkloadSpec::Nmap { hosts, ports } => Profile::Nmap(NmapSpec {
            hosts: *hosts,
            ports: *ports,
            order: ScanOrder::Random,
            rules: NmapRuleSet::Port90,
            normal: false,
        }),
        WorkloadSpec::Attack { kind, share_pct } => {
            let mix = flowpath_trafficgen::AttackMix {
                flows: 1000,
                share: f64::from(*share_pct) / 100.0,
                packets: Some(200_000),
            };
            match kind {
                AttackKind::Tse => Profile::Tse(flowpath_trafficgen::TseSpec { mix }),
                AttackKind::Storm => Profile::Storm(flowpath_trafficgen::StormSpec { mix }),
            }
        }
        WorkloadSpec::Pcap {
            pcap,
            rules,
            groups,
        } => return load_capture(spec, pcap, rules, groups.as_deref()),
        WorkloadSpec::Sfr {
            profile,
            multiplier,
            duration,
        } => {
            let ports = crate::sfr::ports(profile, *multiplier, *duration)?;
            let rules_text = crate::sfr::SFR_RULES.to_string();
            let tables = parse_tables(&rules_text, &spec.name(), &ports)?;
            return Ok(Workload {
                spec: spec.clone(),
                ports,
                tables,
                rules_text,
            });
        }
    };
    let w = generate(&profile, &Options::default())?;
    let frames = w.flow_frames();
    let seq = w.sequence();
    let mut ports = Vec::new();
    let mut start = 0;
    // `ct`: every part twice, as sent and mirrored (the replies), on
    // consecutive ports, as tools/ct-pcap.py writes them for OVS.
    let bidir = matches!(spec, WorkloadSpec::Ct { .. });
    for (i, n) in part_sizes(seq.len(), MAX_PER_PORT).into_iter().enumerate() {
        let mut data = Vec::with_capacity(n * w.frame_len());
        let mut offsets = Vec::with_capacity(n + 1);
        offsets.push(0);
        for &f in &seq[start..start + n] {
            // Workload invariant: every sequence entry indexes a frame.
            data.extend_from_slice(frames.get(f as usize).unwrap_or_default());
            offsets.push(data.len());
        }
        start += n;
        if bidir {
            let mut rev = data.clone();
            for w in offsets.windows(2) {
                if let Some(f) = rev.get_mut(w[0]..w[1]) {
                    mirror_frame(f);
                }
            }
            ports.push(PortTraffic::packed(part_port(2 * i), data, &offsets));
            ports.push(PortTraffic::packed(part_port(2 * i + 1), rev, &offsets));
        } else {
            ports.push(PortTraffic::packed(part_port(i), data, &offsets));
        }
    }
    let rules_text = match spec {
        WorkloadSpec::Ct { nat: false, .. } => CT_RULES.to_string(),
        WorkloadSpec::Ct { nat: true, .. } => CT_NAT_RULES.to_string(),
        _ => w.rules_text(),
    };
    let tables = parse_tables(&rules_text, &spec.name(), &ports)?;
    Ok(Workload {
        spec: spec.clone(),
        ports,
        tables,
        rules_text,
    })
}

/// The captures a path names: the files of a `.parts` list (relative to
/// the list), or the path itself.
pub fn capture_parts(pcap: &Path) -> Result<Vec<PathBuf>, WorkloadError> {
    if pcap.extension().is_some_and(|e| e == "parts") {
        let text = std::fs::read_to_string(pcap).map_err(|source| WorkloadError::Read {
            path: pcap.to_path_buf(),
            source,
        })?;
        let dir = pcap.parent().unwrap_or(Path::new("."));
        let parts: Vec<PathBuf> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|l| dir.join(l))
            .collect();
        if parts.is_empty() {
            return Err(WorkloadError::Empty(pcap.to_path_buf()));
        }
        Ok(parts)
    } else {
        Ok(vec![pcap.to_path_buf()])
    }
}

fn load_capture(
    spec: &WorkloadSpec,
    pcap: &Path,
    rules: &Path,
    groups: Option<&Path>,
) -> Result<Workload, WorkloadError> {
    let rules_text = std::fs::read_to_string(rules).map_err(|source| WorkloadError::Read {
        path: rules.to_path_buf(),
        source,
    })?;
    let mut ports = Vec::new();
    for (i, part) in capture_parts(pcap)?.iter().enumerate() {
        let f = load_ethernet_frames(part)?;
        if f.is_empty() {
            return Err(WorkloadError::Empty(part.clone()));
        }
        ports.push(PortTraffic::packed(part_port(i), f.data, &f.offsets));
    }
    let tables = parse_tables(&rules_text, &rules.display().to_string(), &ports)?;
    // The group table (none without --groups): a rule naming a group it
    // lacks is refused, as by `run` and `switch`.
    let groups = match groups {
        Some(g) => {
            let text = std::fs::read_to_string(g).map_err(|source| WorkloadError::Read {
                path: g.to_path_buf(),
                source,
            })?;
            let name = g.display().to_string();
            flowpath_ofproto::group::parse_groups(&text, Some(&name))
                .map_err(|e| WorkloadError::Rules(e.to_string()))?
        }
        None => Vec::new(),
    };
    let mut t = (*tables).clone();
    t.set_groups(groups).map_err(WorkloadError::Rules)?;
    let tables = Arc::new(t);
    Ok(Workload {
        spec: spec.clone(),
        ports,
        tables,
        rules_text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_like_gen_pcap() {
        assert_eq!(part_sizes(4096, MAX_PER_PORT), vec![4096]);
        assert_eq!(part_sizes(1_000_000, MAX_PER_PORT), vec![250_000; 4]);
        assert_eq!(
            part_sizes(983_025, MAX_PER_PORT),
            vec![245_757, 245_756, 245_756, 245_756]
        );
        assert_eq!(part_sizes(250_001, MAX_PER_PORT), vec![125_001, 125_000]);
        assert_eq!((0..4).map(part_port).collect::<Vec<_>>(), [1, 11, 12, 13]);
    }

    #[test]
    fn names() {
        let f = WorkloadSpec::Flows {
            flows: 1000,
            order: Order::RoundRobin,
        };
        assert_eq!(f.name(), "flows-rr-1000");
        assert_eq!(f.family(), "flows-rr");
        let s = WorkloadSpec::Subtables {
            subtables: 20,
            dsts: 50000,
        };
        assert_eq!(s.name(), "subtables-20x50000");
        assert_eq!(s.flow_count(), Some(1_000_000));
        let p = WorkloadSpec::Pcap {
            pcap: "/x/flows-1000-rr.parts".into(),
            rules: "/x/r".into(),
            groups: None,
        };
        assert_eq!(p.name(), "flows-1000-rr");
    }

    #[test]
    fn generated_flows_load_on_one_port() {
        let w = load(&WorkloadSpec::Flows {
            flows: 1000,
            order: Order::RoundRobin,
        })
        .unwrap();
        assert_eq!(w.ports.len(), 1);
        assert_eq!(w.ports[0].in_port, 1);
        assert_eq!(w.packet_count(), 5000, "rounds up to >= 4096 packets");
        assert_eq!(w.ports[0].frame(0).len(), 60);
        assert!(w.rules_text.contains("udp,actions=output:2"));
        let f7 = w.ports[0].frame(7).to_vec();
        let mut w = w;
        w.set_frame_stride(4096);
        assert_eq!(w.ports[0].frame(7), &f7[..]);
        assert_eq!(w.ports[0].starts[7], 7 * 4096);
        assert_eq!(w.packet_count(), 5000);
    }
}

#[cfg(test)]
mod ct_rules_tests {
    use super::*;

    /// tools/ct-bench.sh gives OVS-DPDK the rules `flowpath bench
    /// --scenario ct` uses: the same lines.
    #[test]
    fn ct_bench_script_has_the_scenario_rules() {
        let script = include_str!("../../../tools/ct-bench.sh");
        for rules in [CT_RULES, CT_NAT_RULES] {
            for line in rules.lines() {
                assert!(
                    script.lines().any(|l| l == line),
                    "{line} not in tools/ct-bench.sh"
                );
            }
        }
    }
}

#[cfg(test)]
mod mirror_tests {
    use super::*;

    fn sum(b: &[u8]) -> u16 {
        let mut s: u32 = b
            .chunks(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
            .sum();
        while s >> 16 != 0 {
            s = (s & 0xffff) + (s >> 16);
        }
        !(s as u16)
    }

    /// A mirrored frame is the reply: swapped MACs, addresses and ports,
    /// its IPv4 header checksum still valid.
    #[test]
    fn mirror_is_the_reply() {
        let mut f = vec![
            2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0, 0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10,
            0, 0, 1, 10, 0, 0, 2, 0x13, 0x88, 0, 53, 0, 8, 0, 0,
        ];
        let c = sum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        let orig = f.clone();
        mirror_frame(&mut f);
        assert_eq!(&f[0..6], &orig[6..12]);
        assert_eq!(&f[26..30], &orig[30..34]);
        assert_eq!(&f[34..36], &orig[36..38]);
        assert_eq!(sum(&f[14..34]), 0);
        mirror_frame(&mut f);
        assert_eq!(f, orig);
    }
}
