//! `flows`: N parallel UDP flows in round-robin, uniform or Zipf order.
//!
//! Reproduces the "N parallel flows" measurements of the EMC/SMC/DFC
//! discussions: one megaflow covers every flow, so the only thing that
//! changes with N is how well the exact-match caches hold the flows.
//!
//! - Flow `i` (0-based): `10.0.0.0 + i -> 20.0.0.0 + i`, UDP `1024 -> 5001`
//!   (as `gen-pcap.py flows`).
//! - Orders: `rr` sends each flow once per round, flows in index order (the
//!   worst case for an LRU-ish cache smaller than N); `uniform` picks a
//!   uniformly random flow per packet (`random.randrange(N)` of
//!   `random.Random(seed)`, as `gen-pcap.py --order random`); `zipf:S`
//!   picks flow of rank `k` with probability proportional to `k^-S`
//!   (elephants and mice; see [`crate::zipf`]).
//! - Packets: `rr` sends whole rounds, enough for `min_packets`; the random
//!   orders send `max(N, min_packets)`; `--packets` sets the count exactly.
//! - Rules: `priority=10,udp,actions=output:2` and `priority=0,actions=drop`.

use crate::frame::{stored_len, Frames, UdpFlow};
use crate::pyrandom::PyRandom;
use crate::workload::Workload;
use crate::zipf::Zipf;
use crate::{check_count, ip, udp_rules, Error, Options, DEFAULT_PPS, MAX_FLOWS};

/// Parameters of the `flows` profile.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowsSpec {
    /// Number of distinct flows, 1..=2^24.
    pub flows: u64,
    /// Order in which flows send.
    pub order: Order,
}

/// Packet order of the `flows` profile.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Order {
    /// Each flow once per round, in flow order (`rr`).
    RoundRobin,
    /// A uniformly random flow per packet (`uniform`, alias `random`).
    Uniform,
    /// A Zipf-distributed flow per packet with this exponent (`zipf:S`,
    /// `zipf` = `zipf:1`).
    Zipf(f64),
}

impl std::fmt::Display for Order {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Order::RoundRobin => f.write_str("rr"),
            Order::Uniform => f.write_str("uniform"),
            Order::Zipf(s) => write!(f, "zipf:{s}"),
        }
    }
}

impl std::str::FromStr for Order {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = |why: &str| Error::invalid("--order", s, why);
        match s {
            "rr" | "round-robin" => Ok(Order::RoundRobin),
            "uniform" | "random" => Ok(Order::Uniform),
            "zipf" => Ok(Order::Zipf(1.0)),
            _ => {
                let Some(exp) = s.strip_prefix("zipf:") else {
                    return Err(bad("expected rr, uniform or zipf:S"));
                };
                match exp.parse::<f64>() {
                    Ok(e) if e.is_finite() && e >= 0.0 => Ok(Order::Zipf(e)),
                    _ => Err(bad("the Zipf exponent S must be a finite number >= 0")),
                }
            }
        }
    }
}

/// The flow with index `i` of the `flows` (and `churn`) profiles.
pub fn flow(i: u32) -> UdpFlow {
    UdpFlow {
        src: ip([10, 0, 0, 0]).wrapping_add(i),
        dst: ip([20, 0, 0, 0]).wrapping_add(i),
        sport: 1024,
        dport: 5001,
    }
}

/// Generates the `flows` workload.
pub(crate) fn generate(spec: &FlowsSpec, opts: &Options) -> Result<Workload, Error> {
    check_count("--flows", spec.flows, MAX_FLOWS)?;
    let n = spec.flows;
    let mut frames = Frames::with_capacity(stored_len(opts.frame_size), n as usize);
    for i in 0..n as u32 {
        frames.push_udp(&flow(i), opts.udp_checksum);
    }
    let sequence: Vec<u32> = match spec.order {
        Order::RoundRobin => {
            let rounds = opts.min_packets.div_ceil(n).max(1);
            let total = opts.packets.unwrap_or(n * rounds);
            // n <= 2^24, so i % n fits u32.
            (0..total).map(|i| (i % n) as u32).collect()
        }
        Order::Uniform => {
            let mut rng = PyRandom::new(opts.seed);
            let total = opts.packets.unwrap_or(n.max(opts.min_packets));
            (0..total).map(|_| rng.randbelow(n) as u32).collect()
        }
        Order::Zipf(s) => {
            let zipf = Zipf::new(n as usize, s);
            let mut rng = PyRandom::new(opts.seed);
            let total = opts.packets.unwrap_or(n.max(opts.min_packets));
            (0..total).map(|_| zipf.sample(&mut rng) as u32).collect()
        }
    };
    let description = format!(
        "workload=flows flows={n} order={} packets={} seed={} frame_size={}",
        spec.order,
        sequence.len(),
        opts.seed,
        opts.frame_size
    );
    Ok(Workload::new(
        frames,
        sequence,
        DEFAULT_PPS,
        udp_rules(),
        description,
    ))
}
