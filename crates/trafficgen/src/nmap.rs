//! `nmap`: a TCP SYN port scan against port-drop rule sets.
//!
//! Reproduces the nmap evaluation of the megaflow classifier's port tries
//! (OVS mailing list): a scan sends one SYN to every port of every host, so
//! without prefix tracking every probe would need its own exact-port
//! megaflow; with the ports trie a rule on one port un-wildcards `tp_dst`
//! only down to the first differing bit, about one megaflow per bit (OVS 3.1
//! installs 17 per input port for `port90`).
//!
//! - Traffic: TCP SYNs from `7.7.7.1:40000` to hosts `7.7.7.101 ..
//!   7.7.7.(100+H)` (H <= 154, so every target stays in `7.7.7.0/24` below
//!   the broadcast address), every destination port `1..=P`, each
//!   (host, port) exactly once. Flow index `h*P + (port-1)`.
//! - Orders: `random` (default, nmap randomises the port order) is
//!   `random.Random(seed).shuffle` of all H×P probes, as `gen-pcap.py`;
//!   `port-major` probes each port on every host in turn.
//! - Packets: H×P; `--packets` repeats the scan (same order) or cuts it.
//! - Rules: the chosen [`NmapRuleSet`], then `priority=0,actions=output:2`
//!   (the evaluation's `NORMAL` replaced by `output:2`, as the harness
//!   does).

use crate::frame::{stored_len, Frames, TcpSyn};
use crate::pyrandom::PyRandom;
use crate::workload::Workload;
use crate::{check_count, ip, Error, Options, DEFAULT_PPS};

/// Largest host count: 7.7.7.101 ..= 7.7.7.254.
pub const MAX_HOSTS: u64 = 154;
/// Largest port count: every TCP port 1..=65535.
pub const MAX_PORTS: u64 = 65535;
/// Default host count, as `gen-pcap.py nmap --dsts` (15 × 65535 = 983,025
/// SYNs; the full 100-host scan does not fit DPDK's mempools).
pub const DEFAULT_HOSTS: u64 = 15;
/// Source address of the scan.
pub const SCANNER: [u8; 4] = [7, 7, 7, 1];
/// Source port of every SYN.
pub const SCANNER_PORT: u16 = 40000;
/// Address of the first scanned host.
pub const FIRST_HOST: [u8; 4] = [7, 7, 7, 101];
/// The catch-all rule appended to every rule set.
pub const DEFAULT_RULE: &str = "priority=0,actions=output:2";
/// The seed evaluation's catch-all (OVS's default bridge rule), with
/// [`NmapSpec::normal`].
pub const NORMAL_RULE: &str = "priority=0,actions=NORMAL";

/// Parameters of the `nmap` profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NmapSpec {
    /// Number of scanned hosts (H), 1..=154.
    pub hosts: u64,
    /// Ports 1..=P are scanned on every host; 1..=65535.
    pub ports: u64,
    /// Probe order.
    pub order: ScanOrder,
    /// Rules the scan is classified against.
    pub rules: NmapRuleSet,
    /// End the rules with `priority=0,actions=NORMAL` (the seed
    /// evaluation's bridge) instead of `priority=0,actions=output:2`.
    pub normal: bool,
}

/// Probe order of the scan.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ScanOrder {
    /// All H×P probes shuffled (`random`).
    #[default]
    Random,
    /// Port 1 on every host, then port 2 on every host, … (`port-major`).
    PortMajor,
}

impl std::fmt::Display for ScanOrder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ScanOrder::Random => "random",
            ScanOrder::PortMajor => "port-major",
        })
    }
}

impl std::str::FromStr for ScanOrder {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "random" => Ok(ScanOrder::Random),
            "port-major" => Ok(ScanOrder::PortMajor),
            _ => Err(Error::invalid(
                "--order",
                s,
                "expected random or port-major",
            )),
        }
    }
}

/// The rule sets a scan can be run against. Each is listed with its rules;
/// every set is followed by `priority=0,actions=output:2`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NmapRuleSet {
    /// `port90`: `priority=65535,tcp,tp_dst=90,actions=drop` — the
    /// evaluation's rule, one dropped port.
    #[default]
    Port90,
    /// `ports90-91`: drop `tp_dst=90` and `tp_dst=91` (two rules at 65535):
    /// two adjacent ports that share all but the last bit.
    Ports90To91,
    /// `ports22-5900`: drop `tp_dst=22` and `tp_dst=5900` (two rules at
    /// 65535): two ports far apart, so the trie un-wildcards along two paths.
    Ports22And5900,
    /// `mask0x58`: `priority=65535,tcp,tp_dst=0x58/0xfff8,actions=drop` —
    /// one masked rule dropping ports 88..=95.
    Mask0x58,
    /// `ports90-95`: drop `tp_dst=90` … `tp_dst=95`, six exact-port rules at
    /// 65535 (the same port block as `mask0x58` minus 88-89, written as
    /// individual rules).
    Ports90To95,
    /// `nested`: `priority=65535,tcp,tp_dst=90,actions=drop` above
    /// `priority=65534,tcp,nw_dst=7.7.7.0/24,actions=output:2`: the drop
    /// rule is nested in a broader allow rule that every probe matches.
    Nested,
    /// `nested-same-prio`: as `nested` but both at priority 65535. OpenFlow
    /// leaves the verdict for port 90 undefined (overlapping rules of equal
    /// priority); a classifier must still install megaflows consistent with
    /// whichever rule it picks.
    NestedSamePrio,
    /// `allow-over-drop`: `priority=65535,tcp,nw_dst=7.7.7.104,tp_dst=90,
    /// actions=output:2` above `priority=65533,tcp,tp_dst=90,actions=drop`:
    /// port 90 is dropped except on host 7.7.7.104.
    AllowOverDrop,
    /// `allow-over-drop-91`: `allow-over-drop` plus
    /// `priority=65533,tcp,tp_dst=91,actions=drop`.
    AllowOverDrop91,
    /// `masked-nested`: `priority=65535,tcp,nw_dst=7.7.7.104,
    /// tp_dst=0x58/0xfff8,actions=drop` over `priority=65534,tcp,
    /// tp_dst=0x50/0xfff0,actions=drop`: ports 80-95 dropped everywhere.
    MaskedNested,
    /// `masked-nested-same-prio`: the same two rules, both at 65535 (they
    /// agree where they overlap, so the verdict is defined).
    MaskedNestedSamePrio,
}

impl NmapRuleSet {
    /// Every rule set, in the order of the help text.
    pub const ALL: [NmapRuleSet; 11] = [
        NmapRuleSet::Port90,
        NmapRuleSet::Ports90To91,
        NmapRuleSet::Ports22And5900,
        NmapRuleSet::Mask0x58,
        NmapRuleSet::Ports90To95,
        NmapRuleSet::Nested,
        NmapRuleSet::NestedSamePrio,
        NmapRuleSet::AllowOverDrop,
        NmapRuleSet::AllowOverDrop91,
        NmapRuleSet::MaskedNested,
        NmapRuleSet::MaskedNestedSamePrio,
    ];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            NmapRuleSet::Port90 => "port90",
            NmapRuleSet::Ports90To91 => "ports90-91",
            NmapRuleSet::Ports22And5900 => "ports22-5900",
            NmapRuleSet::Mask0x58 => "mask0x58",
            NmapRuleSet::Ports90To95 => "ports90-95",
            NmapRuleSet::Nested => "nested",
            NmapRuleSet::NestedSamePrio => "nested-same-prio",
            NmapRuleSet::AllowOverDrop => "allow-over-drop",
            NmapRuleSet::AllowOverDrop91 => "allow-over-drop-91",
            NmapRuleSet::MaskedNested => "masked-nested",
            NmapRuleSet::MaskedNestedSamePrio => "masked-nested-same-prio",
        }
    }

    /// The rules, `ovs-ofctl add-flows` syntax, catch-all rule included.
    pub fn rules(self) -> Vec<String> {
        self.rules_with(DEFAULT_RULE)
    }

    /// The rules followed by `catch_all`.
    pub fn rules_with(self, catch_all: &str) -> Vec<String> {
        let drop = |p: u16| format!("priority=65535,tcp,tp_dst={p},actions=drop");
        let mut r: Vec<String> = match self {
            NmapRuleSet::Port90 => vec![drop(90)],
            NmapRuleSet::Ports90To91 => vec![drop(90), drop(91)],
            NmapRuleSet::Ports22And5900 => vec![drop(22), drop(5900)],
            NmapRuleSet::Mask0x58 => {
                vec!["priority=65535,tcp,tp_dst=0x58/0xfff8,actions=drop".into()]
            }
            NmapRuleSet::Ports90To95 => (90..=95).map(drop).collect(),
            NmapRuleSet::Nested => vec![
                drop(90),
                "priority=65534,tcp,nw_dst=7.7.7.0/24,actions=output:2".into(),
            ],
            NmapRuleSet::NestedSamePrio => vec![
                drop(90),
                "priority=65535,tcp,nw_dst=7.7.7.0/24,actions=output:2".into(),
            ],
            NmapRuleSet::AllowOverDrop => vec![
                "priority=65535,tcp,nw_dst=7.7.7.104,tp_dst=90,actions=output:2".into(),
                "priority=65533,tcp,tp_dst=90,actions=drop".into(),
            ],
            NmapRuleSet::AllowOverDrop91 => vec![
                "priority=65535,tcp,nw_dst=7.7.7.104,tp_dst=90,actions=output:2".into(),
                "priority=65533,tcp,tp_dst=90,actions=drop".into(),
                "priority=65533,tcp,tp_dst=91,actions=drop".into(),
            ],
            NmapRuleSet::MaskedNested | NmapRuleSet::MaskedNestedSamePrio => {
                let p = if self == NmapRuleSet::MaskedNested {
                    65534
                } else {
                    65535
                };
                vec![
                    "priority=65535,tcp,nw_dst=7.7.7.104,tp_dst=0x58/0xfff8,actions=drop".into(),
                    format!("priority={p},tcp,tp_dst=0x50/0xfff0,actions=drop"),
                ]
            }
        };
        r.push(catch_all.into());
        r
    }

    /// Whether a probe of the scan to `dst` (host order) and TCP port `port`
    /// is dropped by this rule set: `Some(true)` dropped, `Some(false)`
    /// output to port 2, `None` undefined (overlapping rules of equal
    /// priority: port 90 under `nested-same-prio`).
    pub fn drops(self, dst: u32, port: u16) -> Option<bool> {
        Some(match self {
            NmapRuleSet::Port90 | NmapRuleSet::Nested => port == 90,
            NmapRuleSet::Ports90To91 => port == 90 || port == 91,
            NmapRuleSet::Ports22And5900 => port == 22 || port == 5900,
            NmapRuleSet::Mask0x58 => port & 0xfff8 == 0x58,
            NmapRuleSet::Ports90To95 => (90..=95).contains(&port),
            NmapRuleSet::NestedSamePrio => {
                if port == 90 && dst >> 8 == ip([7, 7, 7, 0]) >> 8 {
                    return None;
                }
                port == 90
            }
            NmapRuleSet::AllowOverDrop => port == 90 && dst != ip([7, 7, 7, 104]),
            NmapRuleSet::AllowOverDrop91 => (port == 90 && dst != ip([7, 7, 7, 104])) || port == 91,
            NmapRuleSet::MaskedNested | NmapRuleSet::MaskedNestedSamePrio => port & 0xfff0 == 0x50,
        })
    }
}

impl std::fmt::Display for NmapRuleSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for NmapRuleSet {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        NmapRuleSet::ALL
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = NmapRuleSet::ALL.iter().map(|r| r.name()).collect();
                Error::invalid(
                    "--rules-set",
                    s,
                    format!("expected one of {}", names.join(", ")),
                )
            })
    }
}

/// The SYN to host `h` (0-based) and TCP port `port`.
pub fn probe(h: u64, port: u16) -> TcpSyn {
    TcpSyn {
        src: ip(SCANNER),
        dst: ip(FIRST_HOST) + h as u32,
        sport: SCANNER_PORT,
        dport: port,
    }
}

/// Generates the `nmap` workload.
pub(crate) fn generate(spec: &NmapSpec, opts: &Options) -> Result<Workload, Error> {
    check_count("--hosts", spec.hosts, MAX_HOSTS)?;
    check_count("--ports", spec.ports, MAX_PORTS)?;
    let (h, p) = (spec.hosts, spec.ports);
    let n = h * p; // <= 154 * 65535 < 2^24
    let mut frames = Frames::with_capacity(stored_len(opts.frame_size), n as usize);
    for host in 0..h {
        for port in 1..=p {
            // p <= 65535: the port fits u16.
            frames.push_tcp_syn(&probe(host, port as u16));
        }
    }
    let scan: Vec<u32> = match spec.order {
        ScanOrder::Random => {
            let mut perm: Vec<u32> = (0..n as u32).collect();
            PyRandom::new(opts.seed).shuffle(&mut perm);
            perm
        }
        ScanOrder::PortMajor => (0..p)
            .flat_map(|pi| (0..h).map(move |hi| (hi * p + pi) as u32))
            .collect(),
    };
    let sequence = match opts.packets {
        None => scan,
        Some(total) => scan.iter().copied().cycle().take(total as usize).collect(),
    };
    let description = format!(
        "workload=nmap hosts={h} ports=1-{p} order={} rules={}{} packets={} seed={} frame_size={}",
        spec.order,
        spec.rules,
        if spec.normal { "+NORMAL" } else { "" },
        sequence.len(),
        opts.seed,
        opts.frame_size
    );
    Ok(Workload::new(
        frames,
        sequence,
        DEFAULT_PPS,
        spec.rules.rules_with(if spec.normal {
            NORMAL_RULE
        } else {
            DEFAULT_RULE
        }),
        description,
    ))
}
