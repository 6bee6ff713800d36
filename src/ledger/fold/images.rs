//! Per-image system call counts, as the recorder folds `SyscallsOf` events: a pure tally, so a
//! replayed record gives the same images.

use crate::model::Counts;
use crate::model::{CallCount, ImageCalls, Syscalls};
use std::collections::BTreeMap;

/// Calls per (process index, exec index): the pid and the counts.
#[derive(Default)]
pub struct ImageTally {
    images: BTreeMap<(usize, Option<usize>), (i32, Counts)>,
}

impl ImageTally {
    /// Adds the calls of one thread to the image `exec` of process `process` (pid `pid`).
    pub fn add(&mut self, process: usize, pid: i32, exec: Option<usize>, calls: &[CallCount]) {
        let (_, image) = self
            .images
            .entry((process, exec))
            .or_insert_with(|| (pid, Counts::new()));
        for c in calls {
            image
                .entry((c.compat, c.nr))
                .and_modify(|m| m.merge(c))
                .or_insert(*c);
        }
    }

    /// Puts the images into the summary, and counts the tree's calls that are in none.
    pub fn finish(&mut self, sc: &mut Syscalls) {
        if !sc.per_process {
            return;
        }
        let images = std::mem::take(&mut self.images);
        sc.images = images
            .into_iter()
            .map(|((process, exec), (pid, calls))| {
                let mut calls: Vec<CallCount> = calls.into_values().collect();
                calls.sort_by(|a, b| {
                    b.calls
                        .cmp(&a.calls)
                        .then((a.compat, a.nr).cmp(&(b.compat, b.nr)))
                });
                ImageCalls {
                    process,
                    pid,
                    exec,
                    calls,
                }
            })
            .collect();
        // Saturating: a crafted record's counts must not wrap.
        let total = crate::units::sum(sc.calls.iter().map(|r| r.calls));
        let in_images = crate::units::sum(sc.images.iter().flat_map(|i| &i.calls).map(|c| c.calls));
        sc.uncounted.per_process_missing = total.saturating_sub(in_images);
    }
}

#[cfg(test)]
mod tests {
    use crate::bus::event::{Event, Stamped};
    use crate::ledger::recorder::Recorder;
    use crate::model::{Arg, CallCount, Termination};
    use crate::source::syscalls::{Counts, Errnos, Mode, summarize};

    fn at(t_ns: u64, event: Event) -> Stamped {
        Stamped { t_ns, event }
    }

    fn calls(nr: u32, n: u64) -> Vec<CallCount> {
        vec![CallCount {
            nr,
            compat: false,
            calls: n,
            errors: 0,
            total_ns: Some(n * 10),
            max_ns: Some(10),
        }]
    }

    #[test]
    fn replay_attributes_calls_to_the_image_that_made_them() {
        let mut totals = Counts::new();
        for c in calls(110, 10) {
            totals.insert((c.compat, c.nr), c);
        }
        let summary = summarize(
            "ebpf",
            Mode::PerProcess,
            &totals,
            &Errnos::new(),
            Default::default(),
        );
        let events = vec![
            at(
                0,
                Event::Start {
                    command: vec![Arg::from("sh")],
                    tracker: "ebpf".into(),
                    pid: 10,
                    ppid: 1,
                },
            ),
            at(
                1,
                Event::Exec {
                    tgid: 10,
                    former_tid: 10,
                    argv: Some(vec![Arg::from("sh")]),
                },
            ),
            // A thread's calls, then the process execs and the new image calls too.
            at(
                2,
                Event::SyscallsOf {
                    tgid: 10,
                    calls: calls(110, 3),
                },
            ),
            at(
                2,
                Event::SyscallsOf {
                    tgid: 10,
                    calls: calls(110, 2),
                },
            ),
            at(
                3,
                Event::Exec {
                    tgid: 10,
                    former_tid: 10,
                    argv: Some(vec![Arg::from("true")]),
                },
            ),
            at(
                4,
                Event::SyscallsOf {
                    tgid: 10,
                    calls: calls(110, 4),
                },
            ),
            // Calls of a process ste does not know are not attributed to anyone.
            at(
                4,
                Event::SyscallsOf {
                    tgid: 99,
                    calls: calls(110, 1),
                },
            ),
            at(
                5,
                Event::Exit {
                    tid: 10,
                    tgid: 10,
                    status: Some(Termination::Exited(0)),
                },
            ),
            at(
                6,
                Event::Syscalls {
                    syscalls: Box::new(summary),
                },
            ),
        ];
        let run = Recorder::replay(&events);
        let sc = run.syscalls.expect("summary applied");
        let per_image: Vec<(Option<usize>, u64)> = sc
            .images
            .iter()
            .map(|i| (i.exec, i.calls[0].calls))
            .collect();
        assert_eq!(per_image, [(Some(0), 5), (Some(1), 4)]);
        assert_eq!(sc.images[0].calls[0].total_ns, Some(50));
        // 10 for the tree, 9 in images: one call is in none.
        assert_eq!(sc.uncounted.per_process_missing, 1);
        assert_eq!(
            Recorder::replay(&events).syscalls,
            Some(sc),
            "replay is deterministic"
        );
    }
}
