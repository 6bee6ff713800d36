//! The live `EXEC:` lines of a run: one for each exec, in the order of the execs, each printed
//! as soon as its argv is known.
//!
//! Owns the order of the lines, not their text (`report::text::exec_line`) nor where they go
//! (the run's output). An exec whose argv is pending (the netlink tracker judges some later:
//! `Event::ExecPending`) holds the lines after it, so the live view keeps the order that
//! `ste report` prints from the Run; for at most [`HOLD`], after which the lines behind it go
//! out and its own follows when its argv comes (a CPU-bound process may be judged only at its
//! end, and a busy loop never: it must not silence the live view for the rest of the run).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How long lines wait behind a pending exec.
pub const HOLD: Duration = Duration::from_secs(1);

enum Slot {
    /// The exec of process `pid`, its argv pending since `since`.
    Waiting {
        pid: i32,
        since: Instant,
    },
    Line(String),
}

#[derive(Default)]
pub struct LiveExecs {
    queue: VecDeque<Slot>,
    /// Pending execs whose place was given up: their line goes out when it comes.
    late: Vec<i32>,
    /// Lines due, in order.
    out: Vec<String>,
}

impl LiveExecs {
    /// Process `pid` exec'd; its argv comes later.
    pub fn pending(&mut self, pid: i32, now: Instant) {
        self.queue.push_back(Slot::Waiting { pid, since: now });
    }

    /// The line of an exec of `pid`: a pending one's (its argv known), or a new one's.
    pub fn line(&mut self, pid: i32, line: String) {
        if let Some(i) = self.late.iter().position(|&p| p == pid) {
            self.late.swap_remove(i);
            self.out.push(line);
            return;
        }
        let waiting = self
            .queue
            .iter_mut()
            .find(|s| matches!(s, Slot::Waiting { pid: p, .. } if *p == pid));
        match waiting {
            Some(slot) => *slot = Slot::Line(line),
            None => self.queue.push_back(Slot::Line(line)),
        }
    }

    /// The lines to print now, in order.
    pub fn due(&mut self, now: impl Fn() -> Instant) -> Vec<String> {
        while let Some(front) = self.queue.front() {
            match front {
                Slot::Line(_) => {}
                Slot::Waiting { pid, since } if now().duration_since(*since) >= HOLD => {
                    self.late.push(*pid);
                }
                Slot::Waiting { .. } => break,
            }
            if let Some(Slot::Line(l)) = self.queue.pop_front() {
                self.out.push(l);
            }
        }
        std::mem::take(&mut self.out)
    }

    /// Every line held, at the end of the run (a pending exec the tracker never judged has no
    /// line: it shows in the report as an unknown argv).
    pub fn rest(&mut self) -> Vec<String> {
        let mut lines = std::mem::take(&mut self.out);
        lines.extend(self.queue.drain(..).filter_map(|s| match s {
            Slot::Line(l) => Some(l),
            Slot::Waiting { .. } => None,
        }));
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(s: &str) -> String {
        s.to_string()
    }

    #[test]
    fn lines_keep_the_order_of_the_execs_behind_a_pending_one() {
        let t0 = Instant::now();
        let mut live = LiveExecs::default();
        live.line(1, line("sh"));
        live.pending(2, t0);
        live.line(3, line("true"));
        assert_eq!(live.due(|| t0), ["sh"]);
        live.line(4, line("true again"));
        assert!(live.due(|| t0).is_empty(), "held behind the pending exec");
        live.line(2, line("cc1"));
        assert_eq!(live.due(|| t0), ["cc1", "true", "true again"]);
        assert!(live.due(|| t0).is_empty());
    }

    #[test]
    fn a_pending_exec_holds_the_lines_behind_it_for_a_second_at_most() {
        let t0 = Instant::now();
        let mut live = LiveExecs::default();
        live.pending(2, t0);
        live.line(3, line("true"));
        assert!(live.due(|| t0 + HOLD / 2).is_empty());
        assert_eq!(live.due(|| t0 + HOLD), ["true"]);
        // Its own line goes out as soon as it comes.
        live.line(5, line("later"));
        live.line(2, line("busy"));
        assert_eq!(live.due(|| t0 + HOLD), ["busy", "later"]);
    }

    #[test]
    fn the_end_prints_what_is_held_and_skips_what_never_came() {
        let t0 = Instant::now();
        let mut live = LiveExecs::default();
        live.pending(2, t0);
        live.line(3, line("true"));
        assert_eq!(live.rest(), ["true"]);
    }
}
