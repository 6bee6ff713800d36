//! The sampler's pace ([`Pace`]: a CPU budget or a fixed interval) and its budget: the token
//! bucket that exact rounds and ticks both spend from, when the next round is due, the ticks'
//! pace at their median cost, and the bound on their debt.
//!
//! Owns only that arithmetic, on nanoseconds the sampler gives it (the clock, what a round or a
//! tick cost, the resident memory it saw). It imports nothing of the sampler, runs no thread,
//! reads no file and emits nothing: `mod.rs` decides what to read and when, and calls in here
//! under its state's lock.

use std::collections::VecDeque;
use std::time::Duration;

/// How the sampler is paced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pace {
    /// Keep within this fraction of one core.
    Budget(f64),
    /// A fixed period, whatever it costs.
    Fixed(Duration),
}

/// Rounds are never closer than this, nor closer than `elapsed / MAX_ROUNDS_SCALE`, so a run of
/// an hour keeps a bounded number of samples. The same window bounds the ticks' samples.
const MIN_INTERVAL_NS: u64 = 1_000_000;
pub(super) const MAX_ROUNDS_SCALE: u64 = 2_000;

/// Ticks are never closer than this. A page-by-page fill grows by ~0.4 MB a millisecond, so a
/// peak followed by an exit is missed by at most that much; the ebpf tracker's high-water mark
/// at exit bounds the rest.
pub(super) const TICK_MIN_NS: u64 = 1_000_000;
/// The share of the budget ticks may take; the rest pays for exact rounds. With a fixed
/// `--interval`, ticks keep to this share of the default budget.
pub(super) const TICK_SHARE: f64 = 0.5;
const FIXED_TICK_BUDGET: f64 = 0.01;

/// How many of the last ticks' costs pace the next: their median, so one tick that seemed
/// to cost 100 times its usual (the thread CPU clock of a VM counts time the host took the
/// vCPU away) does not hold the ticks off for half a second while a process grows.
const TICK_COSTS: usize = 9;

/// Ticks spend from the rounds' bucket, and run on while it is in debt by less than the
/// budget's share of this much wall time (5 ms at 1 %); beyond, they wait for it to refill.
/// Pacing on the median lets a host that inflates many ticks (a VM's stolen time under load)
/// spend past the budget: this bounds by how much. One inflated tick (a few ms) stays within
/// it and stops nothing.
pub(super) const TICK_DEBT_WALL_NS: f64 = 500_000_000.0;

/// Budget share of this much wall time is the bucket's start-up allowance: at 1 % a run gets
/// 1 ms of sampling at once, so even a short command is sampled from its first exec.
const BURST_WALL_NS: f64 = 100_000_000.0;

/// The maximum's rounds: when the counters cannot tell Max PSS to within its target (memory
/// shared among processes: copy-on-write, shared mappings, page cache), an exact round is the
/// only way to know it, and no carry can stand in for it. Such rounds are paid from a second
/// bucket, apart from the budget's (whose ticks must never wait for them): it accrues at this
/// many times the budget, with an allowance of the budget's share of `MAX_ALLOWANCE_WALL_NS`
/// (50 ms at 1 %: a round of 2.5 GiB of memory), and holds at most four times that. Reading
/// 2 GiB shared by four processes once costs ~40 ms; a tree that keeps sharing anew (20,000
/// short processes, 500 at once) keeps its maximum known to 2 % for ~3 % of a core
/// (bench/README.md). The CPU it takes is reported apart (`max_rounds_cpu_ns`).
pub(super) const MAX_SHARE_OF_BUDGET: f64 = 4.0;
const MAX_ALLOWANCE_WALL_NS: f64 = 5_000_000_000.0;

pub(super) struct Budget {
    pace: Pace,
    /// CPU the bucket holds (ns; below zero, the debt).
    pub(super) tokens_ns: f64,
    last_refill_ns: u64,
    /// Cost of the last round (ns of CPU), and the resident bytes it read (its cost grows with
    /// them): the next round is expected to cost in proportion to what the ticks see.
    round_cost_ns: f64,
    round_rss_bytes: u64,
    /// Cost of the last [`TICK_COSTS`] ticks (ns of CPU, newest last): what the tick read,
    /// and what the thread spent since the one before.
    tick_costs: VecDeque<f64>,
    /// The maximum's bucket (see [`MAX_SHARE_OF_BUDGET`]).
    pub(super) max_tokens_ns: f64,
}

impl Budget {
    /// A full bucket: the start-up allowance.
    pub(super) fn new(pace: Pace) -> Budget {
        Budget {
            pace,
            tokens_ns: burst_ns(pace, 0.0),
            last_refill_ns: 0,
            round_cost_ns: 0.0,
            round_rss_bytes: 0,
            tick_costs: VecDeque::with_capacity(TICK_COSTS),
            max_tokens_ns: match pace {
                Pace::Budget(b) => MAX_ALLOWANCE_WALL_NS * b,
                Pace::Fixed(_) => 0.0,
            },
        }
    }

    /// Whether the maximum's bucket can pay for a round: it holds something, and the round may
    /// overdraw it by its own cost (the expected cost, scaled from the last round by resident
    /// bytes, overstates a round of shared memory many times over).
    pub(super) fn max_round_affordable(&self) -> bool {
        matches!(self.pace, Pace::Budget(_)) && self.max_tokens_ns > 0.0
    }

    /// A round the maximum's bucket paid for.
    pub(super) fn max_round_spent(&mut self, cost_ns: u64, rss_bytes: u64) {
        self.max_tokens_ns -= cost_ns as f64;
        self.round_cost_ns = cost_ns as f64;
        self.round_rss_bytes = rss_bytes;
    }

    /// Adds what the budget accrued since the last refill, up to the bucket's size.
    pub(super) fn refill(&mut self, now: u64, tick_rss_bytes: u64) {
        if let Pace::Budget(b) = self.pace {
            let elapsed = now.saturating_sub(self.last_refill_ns) as f64;
            let cap = burst_ns(self.pace, self.expected_round_ns(tick_rss_bytes));
            self.tokens_ns = (self.tokens_ns + elapsed * b).min(cap);
            self.max_tokens_ns = (self.max_tokens_ns + elapsed * b * MAX_SHARE_OF_BUDGET)
                .min(4.0 * MAX_ALLOWANCE_WALL_NS * b);
        }
        self.last_refill_ns = now;
    }

    /// What the next round should cost: the last one's, scaled by how much more memory the
    /// ticks have seen since (`tick_rss_bytes`; a round's reads walk every resident page), so a
    /// growing process does not overdraw the budget by a round each time.
    pub(super) fn expected_round_ns(&self, tick_rss_bytes: u64) -> f64 {
        if self.round_rss_bytes > 0 && tick_rss_bytes > self.round_rss_bytes {
            self.round_cost_ns * (tick_rss_bytes as f64 / self.round_rss_bytes as f64)
        } else {
            self.round_cost_ns
        }
    }

    /// Nanoseconds to wait before the next round is due (0: now), the last round taken at
    /// `last_round_ns`; `nudged`: one was asked for (a fixed interval then takes it at once).
    pub(super) fn wait_before_round(
        &self,
        now: u64,
        last_round_ns: Option<u64>,
        nudged: bool,
        tick_rss_bytes: u64,
    ) -> u64 {
        let min_gap = MIN_INTERVAL_NS.max(now / MAX_ROUNDS_SCALE);
        let since = last_round_ns.map(|t| now.saturating_sub(t));
        if let Some(since) = since
            && since < min_gap
        {
            return min_gap - since;
        }
        match self.pace {
            Pace::Fixed(d) => {
                let period = d.as_nanos() as u64;
                match since {
                    Some(since) if since < period && !nudged => period - since,
                    _ => 0,
                }
            }
            Pace::Budget(b) => {
                let missing = self.expected_round_ns(tick_rss_bytes) - self.tokens_ns;
                if missing <= 0.0 {
                    // Affordable now: due if asked for, or if the budget allows no sooner.
                    0
                } else {
                    (missing / b) as u64
                }
            }
        }
    }

    /// A round that cost `cost_ns` and read `rss_bytes`.
    pub(super) fn round_spent(&mut self, cost_ns: u64, rss_bytes: u64) {
        self.tokens_ns -= cost_ns as f64;
        self.round_cost_ns = cost_ns as f64;
        self.round_rss_bytes = rss_bytes;
    }

    /// A tick's reads that cost `cost_ns`.
    pub(super) fn tick_spent(&mut self, cost_ns: u64) {
        self.tokens_ns -= cost_ns as f64;
        if self.tick_costs.len() == TICK_COSTS {
            self.tick_costs.pop_front();
        }
        self.tick_costs.push_back(cost_ns as f64);
    }

    /// What the thread spent around its last round or tick (waking up, waiting, the loop),
    /// charged to it; for a tick, its cost in the pace grows by as much.
    pub(super) fn between_spent(&mut self, ns: u64, after_tick: bool) {
        self.tokens_ns -= ns as f64;
        if after_tick && let Some(cost) = self.tick_costs.back_mut() {
            *cost += ns as f64;
        }
    }

    /// The last tick's cost, with what was charged to it since ([`Budget::between_spent`]).
    pub(super) fn last_tick_cost_ns(&self) -> u64 {
        self.tick_costs.back().map_or(0, |&c| c as u64)
    }

    /// Time between ticks: at least [`TICK_MIN_NS`], and long enough for ticks to keep to
    /// their share of the budget at their measured cost (the median of the last
    /// [`TICK_COSTS`]).
    pub(super) fn tick_interval(&self) -> u64 {
        let share = match self.pace {
            Pace::Budget(b) => b * TICK_SHARE,
            Pace::Fixed(_) => FIXED_TICK_BUDGET * TICK_SHARE,
        };
        let paced = if share > 0.0 {
            (median(&self.tick_costs).unwrap_or(0.0) / share) as u64
        } else {
            u64::MAX
        };
        paced.max(TICK_MIN_NS)
    }

    /// How long ticks must wait for the bucket to come back within [`TICK_DEBT_WALL_NS`]'s
    /// debt (0: they need not).
    pub(super) fn debt_wait(&self) -> u64 {
        match self.pace {
            Pace::Budget(b) if b > 0.0 => {
                let floor = -(TICK_DEBT_WALL_NS * b);
                if self.tokens_ns < floor {
                    ((floor - self.tokens_ns) / b) as u64
                } else {
                    0
                }
            }
            _ => 0,
        }
    }

    /// The start-up allowance and the ticks' debt bound (ns of CPU), for the run's record;
    /// `None` at a fixed interval, which has no bucket.
    pub(super) fn allowances_ns(&self) -> (Option<u64>, Option<u64>) {
        match self.pace {
            Pace::Budget(b) => (
                Some((BURST_WALL_NS * b) as u64),
                Some((TICK_DEBT_WALL_NS * b) as u64),
            ),
            Pace::Fixed(_) => (None, None),
        }
    }
}

/// The median of `costs` (the upper one of an even count), `None` when there are none.
fn median(costs: &VecDeque<f64>) -> Option<f64> {
    // On the stack: it runs at every tick.
    let mut sorted = [0.0; TICK_COSTS];
    let n = costs.len().min(TICK_COSTS);
    for (to, from) in sorted.iter_mut().zip(costs) {
        *to = *from;
    }
    let sorted = &mut sorted[..n];
    sorted.sort_by(f64::total_cmp);
    sorted.get(n / 2).copied()
}

/// The most CPU the bucket may hold: two rounds, and at least the start-up allowance.
fn burst_ns(pace: Pace, round_cost_ns: f64) -> f64 {
    match pace {
        Pace::Budget(b) => (2.0 * round_cost_ns).max(BURST_WALL_NS * b),
        Pace::Fixed(_) => f64::INFINITY,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One tick that seemed to cost 100 times the others (a VM's stolen time counts as the
    /// thread's CPU) does not hold off the next: ticks are paced on the median of the last
    /// ones.
    #[test]
    fn an_outlier_tick_does_not_stretch_the_pace() {
        let mut b = Budget::new(Pace::Budget(0.01));
        for _ in 0..TICK_COSTS - 1 {
            b.tick_spent(50_000);
        }
        b.tick_spent(5_000_000);
        // 50 µs at half of 1 %: 10 ms.
        assert_eq!(b.tick_interval(), 10_000_000);
        assert_eq!(median(&VecDeque::new()), None);
        // The oldest cost goes first: nine more of 1 ms leave only those.
        for _ in 0..TICK_COSTS {
            b.tick_spent(1_000_000);
        }
        assert_eq!(b.tick_interval(), 200_000_000);
    }

    /// Ticks spend from the bucket: one inflated tick's debt stops nothing, but ticks that
    /// keep costing more than their median says wait once the debt passes its bound.
    #[test]
    fn ticks_wait_once_their_debt_passes_its_bound() {
        let mut b = Budget::new(Pace::Budget(0.01));
        // A full bucket (1 ms at 1 %), less one 5 ms tick: 4 ms of debt, within the 5 ms bound.
        assert_eq!(b.tokens_ns, 1_000_000.0);
        b.tick_spent(5_000_000);
        assert_eq!(b.debt_wait(), 0);
        // 2 ms past the bound: at 1 %, 200 ms to refill.
        b.between_spent(3_000_000, true);
        assert_eq!(b.tokens_ns, -7_000_000.0);
        assert_eq!(b.debt_wait(), 200_000_000);
        // Refilled for 200 ms: at the bound, nothing to wait.
        b.refill(200_000_000, 0);
        assert_eq!(b.debt_wait(), 0);
        let fixed = Budget::new(Pace::Fixed(Duration::from_millis(10)));
        assert_eq!(fixed.debt_wait(), 0, "a fixed interval has no bucket");
        assert_eq!(fixed.allowances_ns(), (None, None));
        assert_eq!(b.allowances_ns(), (Some(1_000_000), Some(5_000_000)));
    }

    /// A round is due when the bucket holds its expected cost, which grows with the memory the
    /// ticks saw since; never sooner than the minimum gap.
    #[test]
    fn a_round_waits_for_its_cost_scaled_by_the_memory() {
        let mut b = Budget::new(Pace::Budget(0.01));
        b.refill(0, 0);
        b.round_spent(1_000_000, 100 << 20);
        // The bucket is empty: 1 ms of round at 1 % is 100 ms away; twice the memory, 200 ms.
        assert_eq!(
            b.wait_before_round(10_000_000, Some(0), false, 100 << 20),
            100_000_000
        );
        assert_eq!(
            b.wait_before_round(10_000_000, Some(0), false, 200 << 20),
            200_000_000
        );
        // Within the minimum gap of the last round, whatever the bucket.
        assert_eq!(b.wait_before_round(400_000, Some(0), false, 0), 600_000);
        let fixed = Budget::new(Pace::Fixed(Duration::from_millis(10)));
        assert_eq!(
            fixed.wait_before_round(4_000_000, Some(0), false, 0),
            6_000_000
        );
        assert_eq!(
            fixed.wait_before_round(4_000_000, Some(0), true, 0),
            0,
            "asked for"
        );
    }
}
