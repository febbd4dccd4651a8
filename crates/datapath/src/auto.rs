//! `auto`: the cascade that tunes itself — which tiers run is measured,
//! not configured.
//!
//! What: with `second-level = auto` the datapath has an EMC and a
//! [`crate::hybrid`] second level, and [`Auto`] decides, per interval
//! (`auto-interval`, 1000 ms by default), which of them the packets go
//! through: both, the hybrid table only, the EMC only, or neither (straight
//! to the ranked dpcls). At the start of each interval it *explores*:
//! after [`AUTO_WARM`] unmeasured batches that warm the EMC, the
//! allowed arms take turns, [`AUTO_RUN`] consecutive batches each, the
//! first [`AUTO_RUN_SKIP`] of every turn unmeasured, until each arm has
//! [`AUTO_SAMPLES`] measured batches (`auto-samples`, 128 by default).
//! Turns are interleaved, so that every arm is measured on the same
//! traffic, the same cache state and the same moment of a drifting machine
//! (measured one after the other, in the parity run at 30 subtables,
//! `emc+hybrid` came out 4 % cheaper than `hybrid`, which ran 15 % faster
//! as a fixed configuration, and auto reached 72 % of the best). Turns of
//! several batches, not one, because a batch right after a change of arm
//! pays for it: the branch predictors and the caches still hold the other
//! arm's code and tables, and that penalty is not the same for every arm
//! (taking turns batch by batch, parity run 7 measured every arm at about
//! twice its steady cost at 1,000 flows, `emc` dearer than `hybrid`, and
//! auto chose `hybrid`: 123 cycles per packet as a fixed configuration
//! in the same run, against 97 for `emc`). An arm's
//! cost is the median of its batches' cycles per packet (the cycles the
//! caller measures around each batch, as OVS's PMD cycle counters; the
//! median ignores batches that hit an upcall or an interrupt). Then it
//! *exploits*: the cheapest arm runs until the next exploration; the arm in
//! use is kept unless another is at least [`AUTO_HYSTERESIS`] cheaper
//! ([`AUTO_LEAVE_TABLE_HYSTERESIS`] to turn the hybrid table off), and a
//! hybrid arm measured with its table off within [`AUTO_TRIAL_MARGIN`] of
//! the arm in use is put on trial (see `Auto::decide`). The
//! next exploration comes an interval later while the arm holds, but only
//! an eighth of one ([`AUTO_SETTLE_DIV`]) after the first exploration or a
//! change of arm, the gap doubling back: a choice made while megaflows
//! were still being installed is otherwise kept for a whole second (at
//! 100K flows, with the 1.1 s warm-up of `flowpath bench`, auto ran at 80 %
//! of `hybrid`, paired, 9 rounds; with the short gap at 110 %). A
//! tier that is off is not looked up, so its cost goes — the benefit each
//! tier brings is measured as exactly what it saves. The hybrid table, when
//! off, is still filled, so that an exploration measures it warm (a table
//! of 1M entries left empty while off would be measured cold: an
//! exploration's ~180 batches per arm cannot fill it, and it would never
//! be chosen again): from every ranked hit that needed more than one
//! subtable, where it pays most, and from 1 in 32 of the others, or from
//! every hit in the short window before an exploration
//! ([`Auto::prewarming`]). (Filling from 1 in 8 of the others cost ~20 %
//! at 100K flows with one subtable: an insert reads two cold buckets.
//! Filling from none of them left the table cold at 100K flows, where `hybrid` is the best arm: explorations
//! measured it at 356-651 cycles per packet against `none`'s 122-224,
//! and it ran at 129 as a fixed configuration against `none`'s 162.) The
//! EMC, when off, is not filled; [`Auto::warming`] warms it for the
//! exploration.
//!
//! Why measure instead of predicting: the seeds' tables show the best
//! cascade changes with the flow count, the subtable count, the traffic's
//! locality and the CPU's caches (EMC on helps one flow and costs at 1M;
//! the CD pays only with many evenly hit subtables); the cost of each
//! choice is directly observable, and ~4 × 176 batches of exploration per
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

/// Measured batches per arm and exploration (the default and the most).
pub const AUTO_SAMPLES: usize = 128;
/// Consecutive batches an arm runs per turn while exploring.
pub const AUTO_RUN: u32 = 16;
/// Batches at the start of each turn that are run but not measured (the
/// change of arm's own cost).
pub const AUTO_RUN_SKIP: u32 = 4;
/// Batches that open an exploration, unmeasured, on `emc+hybrid` with the
/// EMC inserting every miss (when the EMC arms are allowed): 2,048 packets,
/// enough to bring a cold EMC to its steady state before it is measured.
pub const AUTO_WARM: u32 = 64;
/// A new arm replaces the one in use only if this much cheaper.
pub const AUTO_HYSTERESIS: f64 = 0.03;
/// An arm without the hybrid table replaces one with it only if this much
/// cheaper: the table goes cold while off, and coming back costs a refill
/// (at 1M flows, ~70 ms of misses).
pub const AUTO_LEAVE_TABLE_HYSTERESIS: f64 = 0.10;
/// An arm with the hybrid table is put on trial (in use until the next
/// exploration) when an exploration made while the table was off measured
/// it within this share of the arm in use (see the module documentation).
pub const AUTO_TRIAL_MARGIN: f64 = 0.15;
/// After a failed trial the next waits `auto-interval`, doubling with
/// each failure up to this many intervals.
pub const AUTO_TRIAL_BACKOFF_MAX: u64 = 8;
/// After an exploration that changed the arm (and after the first), the
/// next comes after `auto-interval` / this; each exploration that keeps the
/// arm doubles the gap, up to `auto-interval`.
pub const AUTO_SETTLE_DIV: u64 = 8;
/// The last gap / this of the time before an exploration is its pre-warm
/// window ([`Auto::prewarming`]).
pub const AUTO_PREWARM_DIV: u64 = 8;

/// After an exploration that measured the hybrid table warm (pre-warmed,
/// or in use) and turned it off or kept it off, the table *rests*: it is
/// not filled and not pre-warmed for the next 1, then 2, 4 … up to this
/// many explorations, after which one pre-warmed exploration measures it
/// again ([`Auto::resting`]). Any arm with the table in use ends the rest.
pub const AUTO_REST_MAX: u32 = 8;

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
    /// Time from the start of one exploration to the next (between
    /// `interval_ms / AUTO_SETTLE_DIV` and `interval_ms`).
    gap_ms: u64,
    explore_start_ms: u64,
    next_explore_ms: Option<u64>,
    current: usize,
    /// The arm in use is on trial ([`AUTO_TRIAL_MARGIN`]).
    trial: bool,
    /// Wait after a failed trial before the next.
    trial_backoff_ms: u64,
    /// No trial starts before this time.
    next_trial_ms: u64,
    exploring: bool,
    /// The arm of the next batch while exploring.
    turn: usize,
    /// Batches of the turn run so far.
    run_pos: u32,
    /// Warm-up batches left before the first turn.
    warm_left: u32,
    /// In the pre-warm window before the next exploration.
    prewarm: bool,
    /// Explorations the hybrid table still rests for (0: not resting).
    rest_left: u32,
    /// Length of the last rest (doubles, up to [`AUTO_REST_MAX`]).
    rest_len: u32,
    /// The exploration under way measures the hybrid table warm.
    explore_warm: bool,
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
        Auto {
            allowed,
            interval_ms: interval_ms.max(1),
            gap_ms: Self::settle_gap(interval_ms),
            explore_start_ms: 0,
            next_explore_ms: None,
            current,
            trial: false,
            trial_backoff_ms: interval_ms.max(1),
            next_trial_ms: 0,
            exploring: false,
            turn: current,
            run_pos: 0,
            warm_left: 0,
            prewarm: false,
            rest_left: 0,
            rest_len: 0,
            explore_warm: true,
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
            if self.warm_left > 0 {
                0
            } else {
                self.turn
            }
        } else {
            self.current
        }]
    }

    /// The gap after a change of arm.
    fn settle_gap(interval_ms: u64) -> u64 {
        (interval_ms / AUTO_SETTLE_DIV).max(1)
    }

    /// Whether the next batch warms the EMC (the [`AUTO_WARM`] batches
    /// that open an exploration, and the unmeasured batches that open a
    /// turn of an arm with the EMC): the EMC then inserts every miss, so
    /// that the EMC arms are measured with the EMC they would have in use.
    /// An EMC that is off is not filled, and at its insertion probability
    /// (1/100 by default) an exploration could not warm it: at 1,000
    /// flows each flow must pass ~100 times before it is in. With `hybrid`
    /// in use, explorations measured `emc` at 139 cycles per packet against
    /// `hybrid`'s 96, with `emc+hybrid` in use at 89 against 99.
    #[inline(always)]
    pub fn warming(&self) -> bool {
        self.exploring
            && (self.warm_left > 0 || (self.run_pos < AUTO_RUN_SKIP && ARMS[self.turn].emc))
    }

    /// Whether the next exploration is near (the last gap /
    /// [`AUTO_PREWARM_DIV`] before it: 125 ms at the default interval
    /// while the arm holds): the hybrid table, if off, is then filled from
    /// every ranked hit, not 1 in 32, so that the exploration measures it
    /// as warm as it would be in use. At 1M flows a flow recurs every ~70
    /// ms, and 1-in-32 filling left the table mostly cold at each
    /// exploration: parity run 9 explored `hybrid` at 398 cycles per
    /// packet, `none` at 243, and kept `none`, while `hybrid` ran at 162
    /// and `none` at 206 as fixed configurations.
    #[inline(always)]
    pub fn prewarming(&self) -> bool {
        self.prewarm
    }

    /// Whether the hybrid table, if off, rests: it is then not filled at
    /// all (no 1-in-32 fill, no pre-warm window). The fills cost where the
    /// table does not pay: at 1M flows, with `none` the better arm, auto
    /// ran at 86-91 % of it side by side (the pre-warm window reads two
    /// cold buckets per packet), and at 96-100 % with no fill at all (a
    /// throw-away build). Where the table pays, an exploration after the
    /// rest, pre-warmed, finds it again (or a trial does, see
    /// [`AUTO_TRIAL_MARGIN`]).
    #[inline(always)]
    pub fn resting(&self) -> bool {
        self.rest_left > 0
    }

    /// Starts an exploration when its time has come (the first one at the
    /// first call; see [`AUTO_SETTLE_DIV`] for the gaps).
    pub fn tick(&mut self, now_ms: u64) {
        if self.exploring {
            return;
        }
        if let Some(t) = self.next_explore_ms.filter(|&t| now_ms < t) {
            self.prewarm = self.rest_left == 0 && now_ms + self.gap_ms / AUTO_PREWARM_DIV >= t;
            return;
        }
        self.prewarm = false;
        // Not resting: the table was pre-warmed, or is in use.
        self.explore_warm = self.rest_left == 0;
        self.explore_start_ms = now_ms;
        self.next_explore_ms = Some(now_ms + self.gap_ms);
        self.costs = [0.0; 4];
        self.exploring = true;
        self.run_pos = 0;
        self.warm_left = if self.allowed[0] { AUTO_WARM } else { 0 };
        self.n_samples = [0; 4];
        self.turn = self.current;
    }

    /// The next allowed arm after `i`, cyclically, that still wants
    /// samples (`None`: none does).
    fn next_wanting(&self, i: usize) -> Option<usize> {
        (1..=ARMS.len())
            .map(|d| (i + d) % ARMS.len())
            .find(|&j| self.allowed[j] && self.n_samples[j] < self.want)
    }

    /// Accounts one batch of `packets` that took `cycles` (the caller's
    /// measurement around the batch), run with the arm [`Auto::arm`] gave.
    pub fn record_batch(&mut self, packets: u32, cycles: u64) {
        if !self.exploring || packets == 0 {
            return;
        }
        if self.warm_left > 0 {
            self.warm_left -= 1;
            return;
        }
        let arm = self.turn;
        let pos = self.run_pos;
        self.run_pos += 1;
        if pos >= AUTO_RUN_SKIP && self.n_samples[arm] < self.want {
            self.samples[arm][self.n_samples[arm]] = cycles as f64 / f64::from(packets);
            self.n_samples[arm] += 1;
            if self.n_samples[arm] == self.want {
                let mut s = self.samples[arm];
                let (_, median, _) =
                    s[..self.want].select_nth_unstable_by(self.want / 2, |a, b| a.total_cmp(b));
                self.costs[arm] = *median;
            }
        }
        if self.run_pos >= AUTO_RUN || self.n_samples[arm] >= self.want {
            self.run_pos = 0;
            match self.next_wanting(arm) {
                Some(next) => self.turn = next,
                None => self.decide(),
            }
        }
    }

    /// The cheapest allowed, measured arm of those `want` accepts.
    fn cheapest(&self, want: impl Fn(Arm) -> bool) -> Option<usize> {
        (0..ARMS.len())
            .filter(|&i| self.allowed[i] && self.costs[i] > 0.0 && want(ARMS[i]))
            .min_by(|&a, &b| self.costs[a].total_cmp(&self.costs[b]))
    }

    /// How much cheaper arm `to` must be to replace the arm in use: more
    /// when it turns the hybrid table off ([`AUTO_LEAVE_TABLE_HYSTERESIS`]).
    fn hysteresis(&self, to: usize) -> f64 {
        if ARMS[self.current].second && !ARMS[to].second {
            AUTO_LEAVE_TABLE_HYSTERESIS
        } else {
            AUTO_HYSTERESIS
        }
    }

    /// Ends an exploration: keeps the arm in use, or changes to a cheaper
    /// one, or puts an arm with the hybrid table on trial.
    ///
    /// Trials: an exploration made while the hybrid table is off measures
    /// the hybrid arms colder than they run in use, even after the
    /// pre-warm window (the entries are there; the measured cost is
    /// still higher). At 1M flows, with `none` in use, explorations
    /// measured `hybrid` at 137-153 cycles per packet against `none`'s
    /// 131-139, and with `hybrid` in use at 108-117 against 130-137; side
    /// by side as fixed configurations `hybrid` ran 0-14 % faster, and
    /// auto, which kept `none`, at 84-96 % of it. So when the cheaper
    /// hybrid arm comes within [`AUTO_TRIAL_MARGIN`] of an arm without the
    /// table, it is put in use until the next exploration (125 ms later),
    /// which measures it warm and keeps it or not by the usual rule. A
    /// failed trial doubles the wait before the next (from
    /// `auto-interval` up to [`AUTO_TRIAL_BACKOFF_MAX`] intervals), so
    /// where the hybrid table does not pay a trial costs at most ~1 % of
    /// the time, and less and less.
    ///
    /// Leaving an arm with the table for one without takes
    /// [`AUTO_LEAVE_TABLE_HYSTERESIS`]: with trials alone, auto at 1M flows
    /// still flipped 8-18 times in 4 s (explorations in this host's slow
    /// spells measured `none` 2-10 % cheaper) and ran at 86-97 % of
    /// `hybrid` side by side; with 10 % to leave at 96-103 % (2-8 flips),
    /// with 6 % at 83-92 %.
    fn decide(&mut self) {
        self.exploring = false;
        self.explorations += 1;
        let before = self.current;
        let on_trial = std::mem::take(&mut self.trial);
        if let Some(best) = self.cheapest(|_| true) {
            let cur = self.costs[self.current];
            if best != self.current
                && (cur <= 0.0 || self.costs[best] < cur * (1.0 - self.hysteresis(best)))
            {
                self.current = best;
                self.switches += 1;
            }
        }
        if on_trial {
            if self.current == before {
                self.trial_backoff_ms = self.interval_ms;
            } else {
                self.next_trial_ms = self.explore_start_ms + self.trial_backoff_ms;
                self.trial_backoff_ms = (self.trial_backoff_ms * 2)
                    .min(self.interval_ms.saturating_mul(AUTO_TRIAL_BACKOFF_MAX));
            }
        } else if self.current == before
            && !ARMS[before].second
            && self.explore_start_ms >= self.next_trial_ms
        {
            // The arm in use, kept, had the hybrid table off while this
            // exploration measured it.
            let cur = self.costs[self.current];
            if let Some(h) = self.cheapest(|a| a.second) {
                if cur > 0.0 && self.costs[h] < cur * (1.0 + AUTO_TRIAL_MARGIN) {
                    self.current = h;
                    self.switches += 1;
                    self.trial = true;
                }
            }
        }
        // A changed arm is confirmed soon (the change may have come from a
        // transient: megaflows still being installed, a burst of other
        // work); a kept one is re-examined less and less often.
        // The table rests after a warm measure that left it off, one
        // exploration less after a cold one, not at all while in use.
        if ARMS[self.current].second {
            (self.rest_len, self.rest_left) = (0, 0);
        } else if self.explore_warm {
            self.rest_len = (self.rest_len * 2).clamp(1, AUTO_REST_MAX);
            self.rest_left = self.rest_len;
        } else {
            self.rest_left = self.rest_left.saturating_sub(1);
        }
        self.gap_ms = if self.current != before {
            Self::settle_gap(self.interval_ms)
        } else {
            (self.gap_ms * 2).min(self.interval_ms)
        };
        self.next_explore_ms = Some(self.explore_start_ms + self.gap_ms);
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
        // Before the next exploration (the arm changed: 125 ms later), the
        // arm stays.
        a.tick(100);
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
    fn explores_again_soon_after_a_change_and_rarely_while_it_holds() {
        let mut a = Auto::new(1000, AUTO_SAMPLES, true);
        // Explorations at `t` while the tick comes every 5 ms: returns when
        // the next one started.
        let next_start = |a: &mut Auto, from: u64| {
            let mut t = from;
            loop {
                a.tick(t);
                if a.is_exploring() {
                    return t;
                }
                t += 5;
                assert!(t < from + 10_000, "an exploration comes");
            }
        };
        let cheap_none = [100, 90, 95, 50];
        explore(&mut a, 0, cheap_none);
        assert_eq!(a.arm().name(), "none", "switched");
        // Changed at 0: confirmed after 1000 / AUTO_SETTLE_DIV.
        let t1 = next_start(&mut a, 5);
        assert_eq!(t1, 125);
        let mut gaps = vec![];
        let mut t = t1;
        for _ in 0..6 {
            explore(&mut a, t, cheap_none);
            let n = next_start(&mut a, t + 5);
            gaps.push(n - t);
            t = n;
        }
        assert_eq!(
            gaps,
            [250, 500, 1000, 1000, 1000, 1000],
            "doubling to the interval"
        );
        // Traffic changes: a switch, and the gap is short again.
        explore(&mut a, t, [100, 30, 95, 50]);
        assert_eq!(a.arm().name(), "hybrid");
        assert_eq!(next_start(&mut a, t + 5) - t, 125);
    }

    /// Runs `a` from `from` to `to` ms (a tick every 5 ms); at each
    /// exploration arm i costs `warm[i]`, and the hybrid arms `cold` times
    /// that when the arm in use at its start had the table off (or at the
    /// first exploration, when the table is empty). Returns the arm in use
    /// at every tick.
    fn simulate(a: &mut Auto, from: u64, to: u64, warm: [u64; 4], cold: f64) -> Vec<&'static str> {
        let mut arms = Vec::new();
        let mut t = from;
        while t < to {
            a.tick(t);
            if a.is_exploring() {
                let r = a.report();
                let table_warm = r.arm.second && r.explorations > 0;
                let cost = std::array::from_fn(|i| {
                    if ARMS[i].second && !table_warm {
                        (warm[i] as f64 * cold) as u64
                    } else {
                        warm[i]
                    }
                });
                explore(a, t, cost);
            }
            arms.push(a.arm().name());
            t += 5;
        }
        arms
    }

    /// Fails unless under 5 % of the ticks of `arms` were on arm `name`.
    fn assert_rarely_on(arms: &[&str], name: &str) {
        let on = arms.iter().filter(|&&n| n == name).count();
        assert!(
            on * 20 < arms.len(),
            "{on} of {} ticks on {name}",
            arms.len()
        );
    }

    #[test]
    fn a_hybrid_arm_measured_cold_but_close_is_tried_warm_and_kept() {
        let mut a = Auto::new(1000, AUTO_SAMPLES, false);
        // Warm, hybrid is the cheaper by 10 %; cold it measures 137
        // against none's 122, and without a trial none would be kept for
        // good.
        let arms = simulate(&mut a, 0, 5000, [0, 110, 0, 122], 1.25);
        assert_eq!(arms.last(), Some(&"hybrid"));
        assert_rarely_on(&arms, "none");
        // hybrid -> none (the first, cold exploration) -> hybrid (trial),
        // kept.
        assert_eq!(a.report().switches, 2, "{:?}", a.report());
    }

    #[test]
    fn failed_trials_come_less_and_less_often() {
        let mut a = Auto::new(1000, AUTO_SAMPLES, false);
        // Hybrid is 15 % dearer than none, warm or cold: within the trial
        // margin, beyond the hysteresis for leaving it: every trial fails.
        let arms = simulate(&mut a, 0, 30_000, [0, 140, 0, 122], 1.0);
        assert_eq!(arms.last(), Some(&"none"));
        // Trials of 125 ms after waits of 1, 2, 4, 8, 8, 8 s: 6 in 30 s,
        // two switches each, plus the first.
        let switches = a.report().switches;
        assert!((9..=15).contains(&switches), "{:?}", a.report());
        assert_rarely_on(&arms, "hybrid");
    }

    #[test]
    fn leaving_the_hybrid_table_takes_a_larger_gain() {
        let mut a = Auto::new(1000, AUTO_SAMPLES, true);
        explore(&mut a, 0, [100, 80, 120, 90]);
        assert_eq!(a.arm().name(), "hybrid");
        // none 8 % cheaper: not enough to turn the table off.
        explore(&mut a, 1000, [100, 100, 120, 92]);
        assert_eq!(a.arm().name(), "hybrid");
        // emc+hybrid 8 % cheaper keeps the table: the usual 3 %.
        explore(&mut a, 2000, [92, 100, 120, 110]);
        assert_eq!(a.arm().name(), "emc+hybrid");
        // none 12 % cheaper: off.
        explore(&mut a, 3000, [100, 110, 120, 88]);
        assert_eq!(a.arm().name(), "none");
        // And from none, emc 5 % cheaper (no table on either side): 3 %.
        explore(&mut a, 4000, [200, 200, 95, 100]);
        assert_eq!(a.arm().name(), "emc");
    }

    #[test]
    fn no_trial_when_the_hybrid_arm_is_far_dearer() {
        let mut a = Auto::new(1000, AUTO_SAMPLES, false);
        let arms = simulate(&mut a, 0, 10_000, [0, 200, 0, 122], 1.1);
        assert!(arms.iter().all(|&n| n == "none"), "{arms:?}");
        assert_eq!(a.report().switches, 1, "the first exploration only");
    }

    /// The ticks of `from..to` in `a`'s pre-warm window (no exploration
    /// may start in between).
    fn prewarm_window(a: &mut Auto, from: u64, to: u64) -> Vec<u64> {
        (from..to)
            .filter(|&t| {
                a.tick(t);
                assert!(!a.is_exploring(), "{t}");
                a.prewarming()
            })
            .collect()
    }

    #[test]
    fn the_hybrid_table_prewarms_just_before_an_exploration() {
        let mut a = Auto::new(1000, AUTO_SAMPLES, true);
        // The table in use (emc+hybrid) is cheaper than the rest: kept.
        explore(&mut a, 0, [50, 90, 95, 100]);
        assert_eq!(a.arm().name(), "emc+hybrid");
        // Kept: gap 250, next exploration at 250 (the window before it
        // changes nothing: the table is in use).
        assert!(!a.resting());
        prewarm_window(&mut a, 1, 250);
        // Now none is far cheaper: the table goes off, and rests (see
        // the_table_rests_longer_and_longer_while_it_does_not_pay); the
        // exploration after the rest (at 250 + 125 + 250) is pre-warmed
        // from gap / AUTO_PREWARM_DIV before it.
        explore(&mut a, 250, [100, 90, 95, 50]);
        assert_eq!(a.arm().name(), "none");
        assert!(a.resting());
        assert!(prewarm_window(&mut a, 251, 375).is_empty());
        explore(&mut a, 375, [100, 90, 95, 50]);
        assert!(!a.resting(), "a one-exploration rest");
        let w = prewarm_window(&mut a, 376, 625);
        assert_eq!((w[0], w.len()), (625 - 250 / AUTO_PREWARM_DIV, 31), "{w:?}");
        a.tick(625);
        assert!(a.is_exploring() && !a.prewarming());
    }

    #[test]
    fn the_table_rests_longer_and_longer_while_it_does_not_pay() {
        let mut a = Auto::new(1000, AUTO_SAMPLES, false);
        // hybrid (in use at the start) 40 % dearer than none.
        let costs = [0, 140, 0, 100];
        let mut t = 0;
        let mut warm = Vec::new();
        for _ in 0..40 {
            a.tick(t);
            assert!(a.is_exploring());
            warm.push(!a.resting());
            explore(&mut a, t, costs);
            // Until the next exploration.
            while {
                t += 5;
                a.tick(t);
                !a.is_exploring()
            } {
                assert!(!a.prewarming() || !a.resting());
            }
        }
        assert_eq!(a.arm().name(), "none");
        // Warm measures (the first with the table in use, then pre-warmed
        // ones) after rests of 1, 2, 4, 8, 8 … explorations.
        let at: Vec<usize> = (0..warm.len()).filter(|&i| warm[i]).collect();
        assert_eq!(&at[..6], &[0, 2, 5, 10, 19, 28], "{warm:?}");
        assert_eq!(a.report().switches, 1);
    }

    #[test]
    fn a_rest_ends_when_the_table_is_chosen_again() {
        let mut a = Auto::new(1000, AUTO_SAMPLES, false);
        explore(&mut a, 0, [0, 140, 0, 100]);
        assert!(a.resting());
        // The traffic changes: even cold, the table measures cheaper.
        explore(&mut a, 125, [0, 60, 0, 100]);
        assert_eq!(a.arm().name(), "hybrid");
        assert!(!a.resting());
        // In use, then off again after a warm measure: a rest of 1, not 2.
        explore(&mut a, 250, [0, 140, 0, 100]);
        assert_eq!(a.arm().name(), "none");
        assert!(a.resting());
        explore(&mut a, 375, [0, 140, 0, 100]);
        assert!(!a.resting());
    }

    #[test]
    fn a_change_of_arm_is_not_charged_to_the_arm() {
        // Arm i costs base[i], plus penalty[i] in the first three batches
        // after the arm changed (predictors and caches still on the other
        // arm's work). Taking turns batch by batch would measure `emc` at
        // 260 and choose `hybrid`; turns of AUTO_RUN batches measure the
        // steady costs.
        let base = [100.0, 80.0, 60.0, 90.0];
        let penalty = [10.0, 0.0, 200.0, 20.0];
        let mut a = Auto::new(1000, AUTO_SAMPLES, true);
        a.tick(0);
        let (mut last, mut same, mut batches) = (usize::MAX, 0, 0);
        while a.is_exploring() {
            let arm = ARMS.iter().position(|&x| x == a.arm()).unwrap();
            same = if arm == last { same + 1 } else { 0 };
            last = arm;
            let c = base[arm] + if same < 3 { penalty[arm] } else { 0.0 };
            a.record_batch(32, (c * 32.0) as u64);
            batches += 1;
            assert!(batches < 10_000, "exploration ends");
        }
        assert_eq!(a.arm().name(), "emc");
        assert_eq!(a.report().costs, base);
        // Every arm had its samples, in turns: ceil(128 / 12) turns each.
        let turns = AUTO_SAMPLES.div_ceil((AUTO_RUN - AUTO_RUN_SKIP) as usize);
        let warm = AUTO_WARM as usize;
        assert!(
            batches <= warm + 4 * turns * AUTO_RUN as usize,
            "{batches} batches"
        );
        assert!(batches >= warm + 4 * (AUTO_SAMPLES + turns * AUTO_RUN_SKIP as usize));
    }

    #[test]
    fn the_first_batches_of_an_emc_turn_warm_the_emc() {
        let mut a = Auto::new(1000, AUTO_SAMPLES, true);
        assert!(!a.warming(), "not before an exploration");
        a.tick(0);
        let (mut last, mut same, mut batches) = (usize::MAX, 0u32, 0u32);
        let mut warmed = [0u32; 4];
        while a.is_exploring() {
            let arm = ARMS.iter().position(|&x| x == a.arm()).unwrap();
            // The warm-up, on emc+hybrid, then turns (the first on the arm
            // in use, emc+hybrid).
            same = if arm == last && batches != AUTO_WARM {
                same + 1
            } else {
                0
            };
            last = arm;
            let warm_up = batches < AUTO_WARM;
            assert!(!warm_up || arm == 0);
            assert_eq!(
                a.warming(),
                warm_up || (ARMS[arm].emc && same < AUTO_RUN_SKIP),
                "batch {batches}"
            );
            batches += 1;
            warmed[arm] += u32::from(a.warming());
            a.record_batch(32, 3200);
        }
        assert!(!a.warming(), "not while exploiting");
        assert!(warmed[0] > 0 && warmed[2] > 0, "{warmed:?}");
        assert_eq!((warmed[1], warmed[3]), (0, 0), "{warmed:?}");
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
