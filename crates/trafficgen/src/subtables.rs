//! `subtables`: the Cuckoo Distributor evaluation — S rules with S distinct
//! masks, S×D flows, uniform random order.
//!
//! Reproduces the workload of the Cuckoo Distributor (CD) cover letter on
//! the OVS mailing list: the megaflow classifier ends up with one subtable
//! per rule, so an EMC miss costs up to S subtable probes unless a
//! second-level cache says which subtable to probe.
//!
//! - Rules, for K = 1..=S: `priority=10,udp,nw_src=K.0.0.0/(7+K),
//!   actions=output:2`. The prefix reaches /32 at K = 25, so for K > 25 the
//!   rule is `priority=10,udp,nw_src=K.0.0.0/(K-18),tp_src=1024,
//!   actions=output:2`: the prefix restarts at /8 but `tp_src` makes every
//!   mask distinct again (as `gen-pcap.py`). Hence S <= 50. Last rule:
//!   `priority=0,actions=drop`.
//! - Flows: for K = 1..=S and d = 0..D: `K.0.0.0 -> 30.0.0.0 + d`, UDP
//!   `1024 -> 5001`; flow index `(K-1)*D + d`. Every flow matches exactly its
//!   own rule K.
//! - Order: `random.randrange(S*D)` per packet from `random.Random(seed)`;
//!   `max(S*D, min_packets)` packets unless `--packets` is given.

use crate::frame::{stored_len, Frames, UdpFlow};
use crate::pyrandom::PyRandom;
use crate::workload::Workload;
use crate::{check_count, ip, Error, Options, DEFAULT_PPS, MAX_FLOWS};

/// Largest S: past K = 50 even the restarted prefix `/(K-18)` exceeds /32.
pub const MAX_SUBTABLES: u64 = 50;

/// Parameters of the `subtables` profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubtablesSpec {
    /// Number of rules, each with its own mask (S), 1..=50.
    pub subtables: u64,
    /// Destinations per rule (D); S×D <= 2^24.
    pub dsts: u64,
}

/// The rule of subtable `k` (1-based).
pub fn rule(k: u64) -> String {
    if 7 + k <= 32 {
        format!(
            "priority=10,udp,nw_src={k}.0.0.0/{},actions=output:2",
            7 + k
        )
    } else {
        format!(
            "priority=10,udp,nw_src={k}.0.0.0/{},tp_src=1024,actions=output:2",
            k - 18
        )
    }
}

/// The flow for subtable `k` (1-based) and destination `d` (0-based).
pub fn flow(k: u64, d: u64) -> UdpFlow {
    UdpFlow {
        src: (k as u32) << 24,
        dst: ip([30, 0, 0, 0]).wrapping_add(d as u32),
        sport: 1024,
        dport: 5001,
    }
}

/// Generates the `subtables` workload.
pub(crate) fn generate(spec: &SubtablesSpec, opts: &Options) -> Result<Workload, Error> {
    check_count("--subtables", spec.subtables, MAX_SUBTABLES)?;
    check_count("--dsts", spec.dsts, MAX_FLOWS)?;
    let (s, d) = (spec.subtables, spec.dsts);
    let n = s * d;
    if n > MAX_FLOWS {
        return Err(Error::invalid(
            "--dsts",
            d,
            format!("--subtables × --dsts = {n} flows, more than {MAX_FLOWS}"),
        ));
    }
    let mut frames = Frames::with_capacity(stored_len(opts.frame_size), n as usize);
    for k in 1..=s {
        for j in 0..d {
            frames.push_udp(&flow(k, j), opts.udp_checksum);
        }
    }
    let total = opts.packets.unwrap_or(n.max(opts.min_packets));
    let mut rng = PyRandom::new(opts.seed);
    // n <= 2^24: every index fits u32.
    let sequence: Vec<u32> = (0..total).map(|_| rng.randbelow(n) as u32).collect();
    let mut rules: Vec<String> = (1..=s).map(rule).collect();
    rules.push("priority=0,actions=drop".into());
    let description = format!(
        "workload=subtables subtables={s} dsts={d} flows={n} packets={total} seed={} frame_size={}",
        opts.seed, opts.frame_size
    );
    Ok(Workload::new(
        frames,
        sequence,
        DEFAULT_PPS,
        rules,
        description,
    ))
}
