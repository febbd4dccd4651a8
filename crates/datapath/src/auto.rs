//! `auto`: the cascade that tunes itself — which tiers run is measured,
//! not configured.
//!
//! What: with `second-level = auto` the datapath has an EMC and a
//! [`crate::hybrid`] second level, and [`Auto`] decides, per interval
//! (`auto-interval`, 1000 ms by default), which of them the packets go
//! through: both, the hybrid table only, the EMC only, or neither (straight
//! to the ranked dpcls). At the start of each interval it *explores*: the
//! allowed arms take turns, one batch each, for a quarter of
//! [`AUTO_SAMPLES`] rounds unmeasured and then until each arm has
//! [`AUTO_SAMPLES`] measured batches (`auto-samples`, 128 by default) —
//! interleaved, so that every arm is measured on the same traffic, the
//! same cache state and the same moment of a drifting machine (measured one
//! after the other, in the parity run at 30 subtables, `emc+hybrid` came
//! out 4 % cheaper than `hybrid`, which ran 15 % faster as a fixed
//! configuration, and auto reached 72 % of the best); an arm's
//! cost is the median of its batches' cycles per packet (the cycles the
//! caller measures around each batch, as OVS's PMD cycle counters; the
//! median ignores batches that hit an upcall or an interrupt). Then it
//! *exploits*: the cheapest arm runs until the next interval; the arm in
//! use is kept unless another is at least [`AUTO_HYSTERESIS`] cheaper. A
//! tier that is off is not looked up, so its cost goes — the benefit each
//! tier brings is measured as exactly what it saves. The hybrid table, when
//! off, is still filled from the ranked hits that needed more than one
//! subtable, where it would pay: a table of 1M entries left empty while
//! off would be measured cold (a 160-batch exploration cannot fill it) and
//! never chosen again. (Filling it from 1 in 8 of the other hits too was
//! measured: an insert reads two cold buckets, and it cost ~20 % at 100K
//! flows with one subtable, where the hybrid table gains nothing over the
//! ranked search anyway.) The EMC, when off, is not filled (it is small
//! and, where it pays, warms within a few batches).
//!
//! Why measure instead of predicting: the seeds' tables show the best
//! cascade changes with the flow count, the subtable count, the traffic's
//! locality and the CPU's caches (EMC on helps one flow and costs at 1M;
//! the CD pays only with many evenly hit subtables); the cost of each
//! choice is directly observable, and ~4 × 160 batches of exploration per
//! second cost well under 1 % of a PMD's batches.
//!
//! Without cycle reports (a caller that never calls
//! [`crate::Datapath::add_processing_cycles`] per batch), exploration never
//! completes and the first arm (EMC + hybrid) stays.
//!
//! Invariants: the arm in use is always an allowed one (the EMC arms only
//! when the configuration enables the EMC).
//!
//! Threads: one per datapath worker.

/// Measured batches per arm and exploration (the default and the most;
/// each arm first runs a quarter as many unmeasured batches).
pub const AUTO_SAMPLES: usize = 128;
/// A new arm replaces the one in use only if this much cheaper.
pub const AUTO_HYSTERESIS: f64 = 0.03;

/// One choice of tiers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arm {
    /// EMC looked up and filled.
    pub emc: bool,
    /// Second level (hybrid) looked up and filled.
    pub second: bool,
}

impl Arm {
    /// `emc+hybrid`, `hybrid`, `emc` or `none`.
    pub fn name(self) -> &'static str {
        match (self.emc, self.second) {
            (true, true) => "emc+hybrid",
            (false, true) => "hybrid",
            (true, false) => "emc",
            (false, false) => "none",
        }
    }
}

/// The arms, in exploration order.
pub const ARMS: [Arm; 4] = [
    Arm {
        emc: true,
        second: true,
    },
    Arm {
        emc: false,
        second: true,
    },
    Arm {
        emc: true,
        second: false,
    },
    Arm {
        emc: false,
        second: false,
    },
];

/// What `auto` has decided.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AutoReport {
    /// The arm in use.
    pub arm: Arm,
    /// Median cycles per packet of each arm at the last exploration (0 =
    /// not measured), in [`ARMS`] order.
    pub costs: [f64; 4],
    /// Completed explorations.
    pub explorations: u64,
    /// Times the arm in use changed.
    pub switches: u64,
}

/// The tuner. See the module documentation.
#[derive(Clone, Debug)]
pub struct Auto {
    allowed: [bool; 4],
    interval_ms: u64,
    next_explore_ms: Option<u64>,
    current: usize,
    exploring: bool,
    /// The arm of the next batch while exploring.
    turn: usize,
    batches: u32,
    warm: u32,
    want: usize,
    samples: [[f64; AUTO_SAMPLES]; 4],
    n_samples: [usize; 4],
    costs: [f64; 4],
    explorations: u64,
    switches: u64,
}

impl Auto {
    /// A tuner re-exploring every `interval_ms` with `samples` measured
    /// batches per arm (1..=[`AUTO_SAMPLES`]); the EMC arms only if
    /// `emc_allowed`.
    pub fn new(interval_ms: u64, samples: usize, emc_allowed: bool) -> Self {
        let want = samples.clamp(1, AUTO_SAMPLES);
        let allowed = ARMS.map(|a| emc_allowed || !a.emc);
        let current = allowed.iter().position(|&a| a).unwrap_or(0);
        let n_allowed = allowed.iter().filter(|&&a| a).count() as u32;
        Auto {
            allowed,
            interval_ms: interval_ms.max(1),
            next_explore_ms: None,
            current,
            exploring: false,
            turn: current,
            batches: 0,
            warm: (want / 4) as u32 * n_allowed,
            want,
            samples: [[0.0; AUTO_SAMPLES]; 4],
            n_samples: [0; 4],
            costs: [0.0; 4],
            explorations: 0,
            switches: 0,
        }
    }

    /// The tiers the next batch goes through.
    #[inline(always)]
    pub fn arm(&self) -> Arm {
        ARMS[if self.exploring {
            self.turn
        } else {
            self.current
        }]
    }

    /// Starts an exploration when an interval has passed (the first one at
    /// the first call).
    pub fn tick(&mut self, now_ms: u64) {
        if self.exploring {
            return;
        }
        if self.next_explore_ms.is_some_and(|t| now_ms < t) {
            return;
        }
        self.next_explore_ms = Some(now_ms + self.interval_ms);
        self.costs = [0.0; 4];
        self.exploring = true;
        self.batches = 0;
        self.n_samples = [0; 4];
        self.turn = self.current;
    }

    /// The next allowed arm after `i`, cyclically.
    fn next_allowed(&self, i: usize) -> usize {
        (1..=ARMS.len())
            .map(|d| (i + d) % ARMS.len())
            .find(|&j| self.allowed[j])
            .unwrap_or(i)
    }

    /// Accounts one batch of `packets` that took `cycles` (the caller's
    /// measurement around the batch), run with the arm [`Auto::arm`] gave.
    pub fn record_batch(&mut self, packets: u32, cycles: u64) {
        if !self.exploring || packets == 0 {
            return;
        }
        let arm = self.turn;
        self.turn = self.next_allowed(arm);
        self.batches += 1;
        if self.batches <= self.warm || self.n_samples[arm] >= self.want {
            return;
        }
        self.samples[arm][self.n_samples[arm]] = cycles as f64 / f64::from(packets);
        self.n_samples[arm] += 1;
        if self.n_samples[arm] == self.want {
            let mut s = self.samples[arm];
            let (_, median, _) =
                s[..self.want].select_nth_unstable_by(self.want / 2, |a, b| a.total_cmp(b));
            self.costs[arm] = *median;
        }
        if (0..ARMS.len()).all(|i| !self.allowed[i] || self.n_samples[i] >= self.want) {
            self.decide();
        }
    }

    fn decide(&mut self) {
        self.exploring = false;
        self.explorations += 1;
        let best = (0..ARMS.len())
            .filter(|&i| self.allowed[i] && self.costs[i] > 0.0)
            .min_by(|&a, &b| self.costs[a].total_cmp(&self.costs[b]));
        if let Some(best) = best {
            let cur = self.costs[self.current];
            if best != self.current
                && (cur <= 0.0 || self.costs[best] < cur * (1.0 - AUTO_HYSTERESIS))
            {
                self.current = best;
                self.switches += 1;
            }
        }
    }

    /// Whether an exploration is under way.
    pub fn is_exploring(&self) -> bool {
        self.exploring
    }

    /// Its state.
    pub fn report(&self) -> AutoReport {
        AutoReport {
            arm: ARMS[self.current],
            costs: self.costs,
            explorations: self.explorations,
            switches: self.switches,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs one exploration where arm `i` costs `cost[i]` cycles/packet
    /// (every 10th batch 50× dearer: an upcall).
    fn explore(a: &mut Auto, now: u64, cost: [u64; 4]) {
        a.tick(now);
        let mut guard = 0;
        while a.is_exploring() {
            let arm = ARMS.iter().position(|&x| x == a.arm()).unwrap();
            let c = if guard % 10 == 0 { 50 } else { 1 } * cost[arm] * 32;
            a.record_batch(32, c);
            guard += 1;
            assert!(guard < 10_000, "exploration ends");
        }
    }

    #[test]
    fn picks_the_cheapest_arm_and_keeps_it_within_hysteresis() {
        let mut a = Auto::new(1000, AUTO_SAMPLES, true);
        assert_eq!(a.arm(), ARMS[0], "starts with EMC + hybrid");
        explore(&mut a, 0, [100, 80, 120, 90]);
        assert_eq!(a.arm().name(), "hybrid");
        assert_eq!(a.report().costs, [100.0, 80.0, 120.0, 90.0]);
        // Mid-interval: no exploration; the arm stays.
        a.tick(500);
        assert!(!a.is_exploring());
        // Next interval: "none" is 2 % cheaper: within hysteresis, kept.
        explore(&mut a, 1000, [100, 80, 120, 79]);
        assert_eq!(a.arm().name(), "hybrid");
        // Traffic changed: "emc" is now far cheaper.
        explore(&mut a, 2000, [100, 80, 40, 90]);
        assert_eq!(a.arm().name(), "emc");
        let r = a.report();
        assert_eq!((r.explorations, r.switches), (3, 2));
    }

    #[test]
    fn emc_arms_only_when_allowed_and_nothing_without_cycles() {
        let mut a = Auto::new(1000, AUTO_SAMPLES, false);
        assert_eq!(a.arm().name(), "hybrid");
        explore(&mut a, 0, [10, 80, 10, 60]);
        assert_eq!(a.arm().name(), "none", "the EMC arms were not tried");
        assert_eq!(a.report().costs[0], 0.0);
        // No cycle reports: stays on its first arm, exploring.
        let mut b = Auto::new(1000, AUTO_SAMPLES, true);
        b.tick(0);
        for _ in 0..1000 {
            b.record_batch(0, 0);
        }
        assert!(b.is_exploring());
        assert_eq!(b.arm(), ARMS[0]);
    }
}
