//! `churn`: short-lived UDP flows arriving at a steady rate.
//!
//! Models flow churn (the "short-lived flows" workloads): a working set of
//! N concurrent flows where, every `1/R` seconds, the oldest flow ends and a
//! brand-new flow takes its place. Caches keep seeing first packets of
//! unknown flows at rate R, and each flow is over after a few packets.
//!
//! The schedule is exact and needs no randomness:
//!
//! - Packets go out at P per second: packet `j` at `j/P` s (the pcap
//!   timestamps; classic pcap keeps microseconds).
//! - Flow ids: the initial working set is flows `0..N`; replacement `m`
//!   (m = 1, 2, …, at time `m/R`) ends flow `m-1` and starts flow `N+m-1`.
//!   So at time `t` the live flows are `k..k+N` with `k = floor(t*R)`, and
//!   flow `f >= N` lives from `(f-N+1)/R` to `(f+1)/R`: N/R seconds. The
//!   initial flows end early (flow `f < N` at `(f+1)/R`), so the ages are
//!   staggered from the start as in a steady state.
//! - Flow `f` occupies slot `f mod N`; packet `j` goes to the live flow of
//!   slot `j mod N` (round robin over the slots). Each flow therefore gets
//!   about P/R packets over its life: `--pps` defaults to 4×R, four
//!   packets per flow.
//! - Duration: `--duration` seconds, or by default the time to replace the
//!   working set twice (2N/R s), at least `min_packets` packets; or exactly
//!   `--packets` packets.
//! - Flow `f` is `10.0.0.0 + f -> 20.0.0.0 + f`, UDP `1024 -> 5001` (the
//!   addressing of the `flows` profile); ids that never send a packet (a few
//!   at the very end) get no frame, so the frames are the flows seen.
//! - Rules: those of `flows` (`priority=10,udp,actions=output:2`,
//!   `priority=0,actions=drop`). The seed is not used.

use crate::frame::{stored_len, Frames};
use crate::workload::Workload;
use crate::{check_count, udp_rules, Error, Options, MAX_FLOWS, MAX_PACKETS};

/// Default packets per flow: `--pps` defaults to this many times `--new-per-sec`.
pub const DEFAULT_PACKETS_PER_FLOW: u64 = 4;
/// Largest `--pps` and `--new-per-sec` (10^9: one packet per nanosecond).
pub const MAX_RATE: u64 = 1_000_000_000;

/// Parameters of the `churn` profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChurnSpec {
    /// Concurrent flows (the working set, N), 1..=2^24.
    pub flows: u64,
    /// New flows per second (R), 1..=10^9.
    pub new_per_sec: u64,
    /// Length in nanoseconds; `None` = 2N/R seconds (at least
    /// `min_packets` packets). Excludes `--packets`.
    pub duration_ns: Option<u64>,
    /// Packets per second, all flows together (P, >= R); `None` = 4×R.
    pub pps: Option<u64>,
}

impl ChurnSpec {
    /// Replacements done by packet `j`'s time `j/P`: `floor(j * R / P)`. The
    /// live flows at that time are `k..k+N`.
    pub fn replacements_before(&self, pps: u64, j: u64) -> u64 {
        (u128::from(j) * u128::from(self.new_per_sec) / u128::from(pps)) as u64
    }

    /// The flow id of packet `j`: the live flow in slot `j mod N` at the
    /// packet's time `j/P`.
    pub fn flow_of_packet(&self, pps: u64, j: u64) -> u64 {
        let n = self.flows;
        let k = self.replacements_before(pps, j);
        let slot = j % n;
        k + (slot + n - k % n) % n
    }
}

/// Generates the `churn` workload.
pub(crate) fn generate(spec: &ChurnSpec, opts: &Options) -> Result<Workload, Error> {
    check_count("--flows", spec.flows, MAX_FLOWS)?;
    check_count("--new-per-sec", spec.new_per_sec, MAX_RATE)?;
    let r = spec.new_per_sec;
    let n = spec.flows;
    let pps = match spec.pps {
        Some(p) => {
            check_count("--pps", p, MAX_RATE)?;
            if p < r {
                return Err(Error::invalid(
                    "--pps",
                    p,
                    format!("must be at least --new-per-sec ({r}), or flows would end unseen"),
                ));
            }
            p
        }
        None => r.saturating_mul(DEFAULT_PACKETS_PER_FLOW).min(MAX_RATE),
    };
    let total = match (spec.duration_ns, opts.packets) {
        (Some(_), Some(_)) => return Err(Error::Conflict("--duration", "--packets")),
        (None, Some(p)) => p,
        (Some(ns), None) => {
            let t = u128::from(ns) * u128::from(pps) / 1_000_000_000;
            if t == 0 || t > u128::from(MAX_PACKETS) {
                return Err(Error::invalid(
                    "--duration",
                    format!("{}s", ns as f64 / 1e9),
                    format!("gives {t} packets at {pps} pps; must give 1..={MAX_PACKETS}"),
                ));
            }
            t as u64
        }
        (None, None) => {
            // Packets in 2N/R seconds, rounded up.
            let t = (2 * u128::from(n) * u128::from(pps)).div_ceil(u128::from(r));
            (t.min(u128::from(MAX_PACKETS)) as u64)
                .max(opts.min_packets)
                .max(1)
        }
    };
    // Exclusive bound on the ids: the last packet's live set ends below it.
    let id_bound = spec.replacements_before(pps, total - 1) + n;
    if id_bound > MAX_FLOWS {
        return Err(Error::invalid(
            if spec.duration_ns.is_some() {
                "--duration"
            } else {
                "--new-per-sec"
            },
            spec.duration_ns
                .map_or(r.to_string(), |ns| format!("{}s", ns as f64 / 1e9)),
            format!("the workload would start {id_bound} flows, more than {MAX_FLOWS}"),
        ));
    }
    // Which ids send at least one packet; frames only for those, by id.
    const UNSEEN: u32 = u32::MAX;
    const SEEN: u32 = 0;
    let mut index = vec![UNSEEN; id_bound as usize];
    for j in 0..total {
        index[spec.flow_of_packet(pps, j) as usize] = SEEN;
    }
    let mut frames = Frames::new(stored_len(opts.frame_size));
    let mut next = 0u32;
    for (f, slot) in index.iter_mut().enumerate() {
        if *slot == SEEN {
            *slot = next;
            next += 1;
            // f < MAX_FLOWS = 2^24: fits u32.
            frames.push_udp(&crate::flows::flow(f as u32), opts.udp_checksum);
        }
    }
    let sequence: Vec<u32> = (0..total)
        .map(|j| index[spec.flow_of_packet(pps, j) as usize])
        .collect();
    let description = format!(
        "workload=churn concurrent={n} new_per_sec={r} pps={pps} duration={}s flows={} packets={total} frame_size={}",
        total as f64 / pps as f64,
        frames.len(),
        opts.frame_size
    );
    Ok(Workload::new(
        frames,
        sequence,
        pps,
        udp_rules(),
        description,
    ))
}
