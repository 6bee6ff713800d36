//! The sampling thread's loop: when the next exact round or tick is due, and waiting for it.
//!
//! Owns the decision each time the thread wakes (a round the budget can pay for, one an
//! observer pays for, one an exec asked for, or a tick), and the wait until the next. It reads
//! nothing itself: the reads are `round.rs`'s and `tick.rs`'s; the bucket's arithmetic is
//! `budget.rs`'s.

use super::budget::Pace;
use super::round::Payer;
use super::{
    ANCHOR_MAX_AGE_NS, ANCHOR_WHEN_BOUND, EXEC_SETTLE_NS, Sampler, State, TICK_IDLE_MAX_NS,
};

/// The maximum's rounds are taken while the interval of the ticks' sum is wider than this
/// share of it and its upper end is this far above the largest proven lower bound: Max PSS
/// is then known to within it.
const MAX_TARGET: f64 = 0.02;
/// Nor closer than this to the last round, and while the tree moves, than the second.
const MAX_ROUND_GAP_NS: u64 = 20_000_000;
const MAX_ROUND_MOVING_GAP_NS: u64 = 1_000_000_000;
/// How long the ticks must have found nothing moving before such a round: a tree that pauses
/// between two of its forks or two bursts of writes is no moment to read, and a round that
/// spans one is lost.
const MAX_ROUND_STILL_NS: u64 = 20_000_000;
/// The longest a tick waits, whatever the budget: the budget is a target, and a tree unread
/// for long is a blind chart and carried figures that may have missed a peak (a build's
/// rounds put the bucket so deep in debt that its ticks waited 37 s). A tick costs ~2 µs a
/// process: one a second is a few thousandths of the budget.
const MAX_BLIND_NS: u64 = 1_000_000_000;
use crate::bus::sink::thread_cpu_ns;
use std::time::Duration;

impl Sampler {
    pub(super) fn run(&self) {
        let mut st = self.state.lock().expect("sampler lock");
        // The thread's CPU at the end of its last round or tick: what it spends between
        // (waking up, waiting, the loop) is charged to the next one, so the budget holds
        // for the thread's whole CPU, not only for its reads.
        let mut mark = thread_cpu_ns();
        loop {
            if st.stop {
                return;
            }
            if st.ended_due {
                st.busy = true;
                drop(st);
                self.apply_ended();
                st = self.state.lock().expect("sampler lock");
                self.not_busy(&mut st);
                continue;
            }
            let now = self.sink.now_ns();
            self.refill(&mut st, now);
            let readable = st.live.values().any(|c| c.readable(now));
            if !readable {
                // Nothing to read is not blindness: the gap starts again from here.
                st.last_look_ns = Some(st.last_look_ns.map_or(now, |l| l.max(now)));
            }
            // A process that has just exec'd becomes readable when it has settled.
            let settle_wait = st
                .live
                .values()
                .filter(|c| c.counted())
                .filter_map(|c| c.exec_ns)
                .map(|t| (t + EXEC_SETTLE_NS).saturating_sub(now))
                .filter(|&w| w > 0)
                .min();
            let mut round_wait = self.wait_before_round(&st, now);
            // Within a budget, an exact round of memory whose counters have not moved since the
            // last one would read the same figures again: it waits for a tick that sees a move
            // (or for an event that asks for a round).
            // Nor is one needed while the ticks' figure is tight (its bound within
            // ANCHOR_WHEN_BOUND of it) and the last anchor is young: exact rounds walk every
            // page and hold up the ticks while they do.
            let since_round = st
                .last_full_round_ns
                .map_or(u64::MAX, |t| now.saturating_sub(t));
            // The age rule waits while memory grows: a round then walks the most pages and
            // holds up the ticks that follow the growth, and growth is what the carry counts
            // exactly (new anonymous pages). Nor does it anchor memory that has stopped moving
            // with a tight figure: that round (~40 ms for 4 GiB) was most of what ste spent
            // watching a process asleep on its memory, for a bound already within 0.5 %.
            let width = st.tick_term.hi - st.tick_term.lo;
            let tight = width <= ANCHOR_WHEN_BOUND * st.tick_term.central
                && (since_round < ANCHOR_MAX_AGE_NS || st.tick_growing || !st.tick_moved);
            // Observers (`--maps-at-peak`, `--malloc`) look at memory in rounds only: with them
            // rounds keep their budget's pace.
            // Within a budget, what asks for a round is a new image that has settled and was
            // never read: its carry from nothing is loose (its libraries' pages). Such a round
            // reads only the new images, the rest of the tree carried from its last tick: on
            // a fork loop, reading the shell at each exec locked its memory map against its
            // next fork, and a build's make and shells were read again at every compiler's
            // exec for nothing.
            let asked = st.live.values().any(|c| c.round_asked && c.readable(now));
            let adaptive = matches!(self.pace, Pace::Budget(_));
            let budgeted = adaptive && self.observers.read().expect("observers lock").is_empty();
            let not_due = !st.changed_since_round || tight;
            if budgeted && !asked && not_due {
                round_wait = round_wait.max(st.next_tick_ns.saturating_sub(now) + 1);
            }
            // The maximum's rounds: the ticks' interval could hold a new maximum the counters
            // cannot pin to within MAX_TARGET (shared memory moved), and something moved since
            // the last round; paid from the maximum's bucket when the budget's cannot.
            // A round is one moment only if nothing moves while it reads, and a process read
            // while it grows is a smear: while the tree keeps moving (its last tick saw a
            // counter move), they wait for it to stand still, but for new images to read (a
            // round of them alone) and, where the file pages make most of the width (each
            // process's read narrows it, one moment or not), at most every
            // MAX_ROUND_MOVING_GAP_NS (a tree that never stands still: many short processes).
            // Only a round at one moment narrows the anonymous families.
            let since_any = st.last_round_ns.map_or(u64::MAX, |t| now.saturating_sub(t));
            let file_width = width - st.tick_anon_width;
            let moving_ok =
                asked || (file_width > st.tick_anon_width && since_any >= MAX_ROUND_MOVING_GAP_NS);
            let still = st
                .still_since_ns
                .is_some_and(|t| now.saturating_sub(t) >= MAX_ROUND_STILL_NS);
            let for_max = adaptive
                && round_wait > 0
                && st.changed_since_round
                && (still || moving_ok)
                && width > MAX_TARGET * st.tick_term.central
                && st.tick_term.hi > st.max_lo as f64 * (1.0 + MAX_TARGET)
                && st.budget.max_round_affordable()
                && st
                    .last_round_ns
                    .is_none_or(|t| now.saturating_sub(t) >= MAX_ROUND_GAP_NS);
            if for_max {
                round_wait = 0;
            }
            // A round an observer pays for is due at once: it asked for it at a new high.
            let payers = std::mem::take(&mut st.payers);
            if !payers.is_empty() {
                round_wait = 0;
            }
            let only_asked = budgeted && asked && (not_due || for_max) && payers.is_empty();
            let tick_wait = st.next_tick_ns.saturating_sub(now);
            if readable && (round_wait == 0 || tick_wait == 0) {
                let exact = round_wait == 0;
                if exact {
                    st.nudged = false;
                }
                st.busy = true;
                drop(st);
                let between = thread_cpu_ns().saturating_sub(mark);
                let (moved, new_high) = if exact {
                    let paid_by = match (payers.is_empty(), for_max) {
                        (false, _) => Payer::Observers(payers),
                        (true, true) => Payer::Maximum,
                        (true, false) => Payer::Budget,
                    };
                    self.round(only_asked, paid_by);
                    (true, None)
                } else {
                    self.tick()
                };
                // Observers (`--maps-at-peak`, `--malloc`) look at memory in exact rounds: a
                // tick that found a new high asks for one. An observer that wants that high
                // read exactly pays for the round from its own budget (a high held for two
                // seconds was missed when the round waited for the sampler's 1 %); else it
                // runs when the sampler's budget allows.
                let (observed, payers) = match new_high {
                    Some(pss) => {
                        let observers = self.observers();
                        let t = self.sink.now_ns();
                        let payers: Vec<_> = observers
                            .iter()
                            .filter(|o| o.round_wanted(t, pss))
                            .cloned()
                            .collect();
                        (!observers.is_empty(), payers)
                    }
                    None => (false, Vec::new()),
                };
                st = self.state.lock().expect("sampler lock");
                self.not_busy(&mut st);
                st.budget.between_spent(between, !exact);
                if !exact {
                    // What the tick spent with what was charged to it: ticks stop once the
                    // bucket is in debt past its bound, so the last one may overdraw by this.
                    let tick = st.budget.last_tick_cost_ns();
                    st.max_tick_cpu_ns = st.max_tick_cpu_ns.max(tick);
                }
                st.cpu_ns += between;
                if observed {
                    st.nudged = true;
                }
                if !payers.is_empty() && readable {
                    st.payers = payers;
                }
                if !exact {
                    st.tick_moved = moved;
                    st.tick_cpu_ns += between;
                }
                mark = thread_cpu_ns();
                let now = self.sink.now_ns();
                // While nothing moves, ticks back off (doubling, up to TICK_IDLE_MAX_NS): a
                // process asleep on 4 GiB costs a wake-up every 10 ms, not every tick.
                let paced = st.budget.tick_interval();
                st.tick_backoff_ns = if moved {
                    paced
                } else {
                    (st.tick_backoff_ns.max(paced) * 2).min(TICK_IDLE_MAX_NS.max(paced))
                };
                st.next_tick_ns = now
                    + st.tick_backoff_ns
                        .max(st.budget.debt_wait())
                        .min(MAX_BLIND_NS);
                continue;
            }
            let timeout = match (readable, settle_wait) {
                (false, None) => Duration::from_millis(100),
                (false, Some(w)) => Duration::from_nanos(w.max(100_000)),
                (true, w) => Duration::from_nanos(
                    round_wait
                        .min(tick_wait)
                        .min(w.unwrap_or(u64::MAX))
                        .max(100_000),
                ),
            };
            st.asleep_until_ns = Some(now.saturating_add(timeout.as_nanos() as u64));
            let (guard, _) = self.wake.wait_timeout(st, timeout).expect("sampler lock");
            st = guard;
            st.asleep_until_ns = None;
        }
    }

    /// The sampling thread is done reading. Only `stop` waits for that (after setting `stop`):
    /// a wake-up of nobody is still a system call, at every tick.
    pub(super) fn not_busy(&self, st: &mut State) {
        st.busy = false;
        if st.stop {
            self.idle.notify_all();
        }
    }

    /// Nanoseconds to wait before the next round is due (0: now).
    pub(super) fn wait_before_round(&self, st: &State, now: u64) -> u64 {
        st.budget
            .wait_before_round(now, st.last_round_ns, st.nudged, st.tick_rss_bytes)
    }

    pub(super) fn refill(&self, st: &mut State, now: u64) {
        st.budget.refill(now, st.tick_rss_bytes);
    }
}
