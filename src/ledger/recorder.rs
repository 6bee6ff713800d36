//! The recorder: folds the event stream into a Run.
//!
//! Single-threaded and deterministic: the same events always give the same Run, which is what
//! lets a record file be re-rendered later. It owns the ledger of live processes and threads
//! (pid reuse, threads that exec, leaders that exit before their threads) and nothing else: it
//! never reads the kernel and never formats output.

use crate::bus::event::{Event, Stamped};
use crate::ledger::fold::images::ImageTally;
use crate::model::malloc::MallocRun;
use crate::model::{
    Exec, Exit, Io, Overhead, Process, Run, SCHEMA_VERSION, Sample, SamplerInfo, ThreadLifetime,
    Totals,
};
use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap};

/// What applying one event changed that a live view may want to show at once.
pub enum Applied<'a> {
    Nothing,
    /// A new exec: the process and its exec record.
    Exec(&'a Process, &'a Exec),
}

struct LiveProcess {
    index: usize,
    /// Its live threads.
    tids: Vec<i32>,
}

pub struct Recorder {
    run: Run,
    /// Live thread id → its thread-group id.
    threads: HashMap<i32, i32>,
    /// Live thread-group id → its process entry.
    live: HashMap<i32, LiveProcess>,
    /// Every entry of each pid, oldest first (pids are reused).
    by_pid: HashMap<i32, Vec<usize>>,
    last_exec_ns: Option<u64>,
    last_event_ns: u64,
    end_ns: Option<u64>,
    stopped_waiting: Option<String>,
    /// Sees every event before it is applied (the record file of `ste record`).
    tap: Option<Tap>,
    /// Per-image system calls, until `finish` puts them into the Run.
    images: ImageTally,
    /// The command's own process (the `Start` event's), by index.
    root: Option<usize>,
}

/// A function that sees every event the recorder applies.
pub type Tap = Box<dyn FnMut(&Stamped) + Send>;

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

impl Recorder {
    pub fn new() -> Self {
        Recorder {
            run: Run {
                schema_version: SCHEMA_VERSION,
                generator: format!("ste {}", env!("CARGO_PKG_VERSION")),
                command: Vec::new(),
                tracker: String::new(),
                notes: Vec::new(),
                exit: Exit::default(),
                totals: Totals::default(),
                processes: Vec::new(),
                samples: Vec::new(),
                sampler: SamplerInfo::default(),
                overhead: Overhead {
                    lost_events: Some(0),
                    ..Default::default()
                },
                sources: BTreeMap::new(),
                accounting: None,
                memory_at_peak: None,
                malloc: None,
                syscalls: None,
            },
            threads: HashMap::new(),
            live: HashMap::new(),
            by_pid: HashMap::new(),
            last_exec_ns: None,
            last_event_ns: 0,
            end_ns: None,
            stopped_waiting: None,
            tap: None,
            images: ImageTally::default(),
            root: None,
        }
    }

    /// Hands every event applied from now on to `tap` first, so that whatever reaches the
    /// Run, through whichever call, also reaches the record.
    pub fn set_tap(&mut self, tap: Tap) {
        self.tap = Some(tap);
    }

    /// Folds all events into a Run (replay of a record).
    pub fn replay<E: Borrow<Stamped>>(events: impl IntoIterator<Item = E>) -> Run {
        let mut rec = Recorder::new();
        for e in events {
            rec.apply(e.borrow());
        }
        rec.finish()
    }

    /// Thread-group ids of the processes alive right now, oldest first.
    pub fn live_processes(&self) -> Vec<(i32, &Process)> {
        let mut v: Vec<_> = self
            .live
            .iter()
            .map(|(&pid, lp)| (pid, &self.run.processes[lp.index]))
            .collect();
        v.sort_by_key(|(_, p)| p.start_ns);
        v
    }

    /// Whether the root process has been reaped.
    pub fn root_exited(&self) -> bool {
        self.run.exit.code.is_some()
            || self.run.exit.signal.is_some()
            || self.run.exit.launch_error.is_some()
    }

    /// The latest time stamp applied so far.
    pub fn last_event_ns(&self) -> u64 {
        self.last_event_ns
    }

    pub fn apply(&mut self, stamped: &Stamped) -> Applied<'_> {
        if let Some(tap) = &mut self.tap {
            tap(stamped);
        }
        let t = stamped.t_ns;
        self.last_event_ns = self.last_event_ns.max(t);
        match &stamped.event {
            Event::Start {
                command,
                tracker,
                pid,
                ppid,
            } => {
                self.run.command = command.clone();
                self.run.tracker = tracker.clone();
                self.new_process(*pid, Some(*ppid), t);
                self.root = self.by_pid.get(pid).and_then(|v| v.last().copied());
            }
            Event::Note { text } => self.run.notes.push(text.clone()),
            Event::Source { figure, source } => {
                self.run.sources.insert(figure.clone(), source.clone());
            }
            Event::Fork {
                parent_tgid,
                child_tid,
                child_tgid,
            } => {
                if child_tid == child_tgid {
                    self.new_process(*child_tgid, Some(*parent_tgid), t);
                } else if !self.threads.contains_key(child_tid) {
                    let lp = self.live_or_orphan(*child_tgid, t);
                    lp.tids.push(*child_tid);
                    let index = lp.index;
                    let p = &mut self.run.processes[index];
                    p.threads += 1;
                    p.thread_lifetimes.push(ThreadLifetime {
                        tid: *child_tid,
                        start_ns: t,
                        end_ns: None,
                    });
                    self.threads.insert(*child_tid, *child_tgid);
                }
            }
            Event::Exec {
                tgid,
                former_tid: _,
                argv,
            } => {
                // After an exec the process has exactly one thread, its leader: the others
                // were killed, and a non-leader that exec'd took over the leader's id.
                //
                // Exec times are made strictly increasing in the order the execs are applied
                // (sources may stamp them out of order by a few µs; 1 ns apart at worst), so
                // that sorting the Run's execs by time gives back the order of the live
                // `EXEC:` lines, and `ste report` prints them identically.
                let t = match self.last_exec_ns {
                    Some(last) if t <= last => last + 1,
                    _ => t,
                };
                self.last_exec_ns = Some(t);
                let lp = self.live_or_orphan(*tgid, t);
                let stale = std::mem::replace(&mut lp.tids, vec![*tgid]);
                let index = lp.index;
                for tid in stale {
                    self.threads.remove(&tid);
                }
                self.threads.insert(*tgid, *tgid);
                let p = &mut self.run.processes[index];
                for l in &mut p.thread_lifetimes {
                    l.end_ns.get_or_insert(t);
                }
                p.execs.push(Exec {
                    t_ns: t,
                    argv: argv.clone(),
                });
                let p = &self.run.processes[index];
                return Applied::Exec(p, p.execs.last().expect("just pushed"));
            }
            Event::Accounts {
                tgid,
                peak_rss_bytes,
                io,
            } => {
                if let Some(lp) = self.live.get(tgid) {
                    let p = &mut self.run.processes[lp.index];
                    p.peak_rss_bytes = max_opt(p.peak_rss_bytes, *peak_rss_bytes);
                    p.io = max_io(p.io, *io);
                }
            }
            Event::Exit {
                tid,
                tgid: _,
                status,
            } => {
                let Some(tgid) = self.threads.remove(tid) else {
                    return Applied::Nothing;
                };
                if let Some(lp) = self.live.get_mut(&tgid) {
                    lp.tids.retain(|t| t != tid);
                    let (index, remaining) = (lp.index, lp.tids.len());
                    let p = &mut self.run.processes[index];
                    if *tid != tgid
                        && let Some(l) = p
                            .thread_lifetimes
                            .iter_mut()
                            .rev()
                            .find(|l| l.tid == *tid && l.end_ns.is_none())
                    {
                        l.end_ns = Some(t);
                    }
                    if *tid == tgid
                        && let Some(status) = status
                    {
                        p.exit_code = status.code();
                        p.signal = status.signal();
                    }
                    if remaining == 0 {
                        p.end_ns = Some(t);
                        self.live.remove(&tgid);
                    }
                }
            }
            Event::RootExit { status } => {
                self.run.exit.code = status.code();
                self.run.exit.signal = status.signal();
                // ste waited for the root itself, so its status is known even when the tracker
                // could not tell it (e.g. its leader's exit was among events the kernel lost).
                if let Some(p) = self.root.map(|i| &mut self.run.processes[i])
                    && p.exit_code.is_none()
                    && p.signal.is_none()
                {
                    p.exit_code = status.code();
                    p.signal = status.signal();
                }
                if let crate::model::Termination::Signaled { core_dumped, .. } = status {
                    self.run.exit.core_dumped = *core_dumped;
                }
            }
            Event::LaunchFailed { error } => self.run.exit.launch_error = Some(error.clone()),
            Event::Sample { sample } => {
                let s = Sample {
                    t_ns: t,
                    ..sample.clone()
                };
                if self
                    .run
                    .totals
                    .max_pss_bytes
                    .is_none_or(|m| s.pss_bytes > m)
                {
                    self.run.totals.max_pss_bytes = Some(s.pss_bytes);
                    self.run.totals.max_pss_t_ns = Some(t);
                    self.run.totals.max_pss_kind = Some(s.kind);
                    self.run.totals.max_pss_bound_bytes = s.bound_bytes;
                }
                // Samples come from two threads (the sampler's, and a tracker's at an exit),
                // and an exit's peak is stamped with the exit's time, which may precede the
                // newest tick: keep them in time order, as the chart reads them.
                let at = self.run.samples.partition_point(|x| x.t_ns <= t);
                self.run.samples.insert(at, s);
            }
            Event::Lost {
                overruns,
                events_at_most,
                found_by_resync,
                exits_missed,
                argv_doubtful,
            } => {
                let lost = &mut self.run.overhead.lost;
                // Saturating: a crafted record's increments must not wrap the counts.
                lost.overruns = lost.overruns.saturating_add(*overruns);
                // Once one loss is of unknown size, so is the sum.
                lost.events_at_most = lost
                    .events_at_most
                    .zip(*events_at_most)
                    .map(|(a, b)| a.saturating_add(b));
                lost.found_by_resync = lost.found_by_resync.saturating_add(*found_by_resync);
                lost.exits_missed = lost.exits_missed.saturating_add(*exits_missed);
                lost.argv_doubtful = lost.argv_doubtful.saturating_add(*argv_doubtful);
            }
            Event::SamplerDone { info } => self.run.sampler = info.clone(),
            Event::End {
                user_ns,
                sys_ns,
                ste_cpu_ns,
                ste_max_rss_bytes,
                stopped_waiting,
            } => {
                self.end_ns = Some(t);
                self.run.totals.user_ns = Some(*user_ns);
                self.run.totals.sys_ns = Some(*sys_ns);
                self.run.overhead.cpu_ns = Some(*ste_cpu_ns);
                self.run.overhead.max_rss_bytes = Some(*ste_max_rss_bytes);
                self.stopped_waiting = stopped_waiting.clone();
            }
            Event::Accounting { event } => {
                let index = event
                    .process()
                    .and_then(|(tgid, start)| self.process_index(tgid, start));
                crate::ledger::fold::account::apply(&mut self.run, index, t, event);
            }
            Event::MemoryAtPeak { peak } => self.run.memory_at_peak = Some((**peak).clone()),
            Event::MallocStart { shim, probes } => {
                self.run.malloc = Some(MallocRun {
                    shim: shim.clone(),
                    probes: probes.clone(),
                    ..Default::default()
                })
            }
            Event::MallocSample { sample } => {
                if let Some(m) = &mut self.run.malloc {
                    m.samples.push(*sample);
                }
            }
            Event::MallocExec { check } => {
                if let Some(m) = &mut self.run.malloc {
                    m.execs.push(check.clone());
                }
            }
            Event::MallocImage { image } => {
                if let Some(m) = &mut self.run.malloc {
                    m.images.push((**image).clone());
                }
            }
            Event::MallocDone { cpu_ns } => {
                if let Some(m) = &mut self.run.malloc {
                    m.cpu_ns = *cpu_ns;
                }
            }
            Event::SyscallsOf { tgid, calls } => {
                if let Some(lp) = self.live.get(tgid) {
                    let p = &self.run.processes[lp.index];
                    let exec = p.execs.len().checked_sub(1);
                    self.images.add(lp.index, p.pid, exec, calls);
                }
            }
            Event::Syscalls { syscalls } => self.run.syscalls = Some((**syscalls).clone()),
            Event::MallocProbes { text, counts } => {
                if let Some(m) = &mut self.run.malloc {
                    m.probes = text.clone();
                    m.sdt = counts.as_deref().cloned();
                }
            }
        }
        Applied::Nothing
    }

    /// Closes the ledger and computes the totals.
    pub fn finish(mut self) -> Run {
        let run = &mut self.run;
        let mut still_running = 0;
        if self.stopped_waiting.is_some() {
            still_running = self.live.len() as u64;
        } else {
            // The tree was fully reaped, so these processes are gone: their ends were lost.
            run.overhead.lost.exits_missed =
                (run.overhead.lost.exits_missed).saturating_add(self.live.len() as u64);
        }
        if let Some(reason) = &self.stopped_waiting {
            run.notes.push(format!(
                "ste stopped waiting ({reason}) with {still_running} process{} still running; their figures are partial",
                if still_running == 1 { "" } else { "es" }
            ));
        }
        run.overhead.lost.argv_unread = (run
            .processes
            .iter()
            .flat_map(|p| &p.execs)
            .filter(|e| e.argv.is_none())
            .count() as u64)
            .saturating_sub(run.overhead.lost.argv_doubtful);
        // An overrun drops one event at least: a bound of 0 after one is no bound (a record
        // written before the bound was `None`, or a socket whose gaps never showed the loss).
        if run.overhead.lost.overruns > 0 && run.overhead.lost.events_at_most == Some(0) {
            run.overhead.lost.events_at_most = None;
        }
        let lost = &run.overhead.lost;
        // Exact when nothing overflowed and no sequence gap was seen: only the process ends
        // that were never reported are lost, and they are counted. Otherwise the kernel gave
        // only a bound, so the exact number is unknown.
        run.overhead.lost_events = if lost.overruns == 0 && lost.events_at_most == Some(0) {
            Some(lost.exits_missed)
        } else {
            None
        };
        if let Some(m) = &mut run.malloc {
            m.finish(&run.processes);
        }
        if let Some(sc) = &mut run.syscalls {
            self.images.finish(sc);
        }
        // A command that never started leaves only the copy of ste forked to exec it, which
        // shares ste's memory until the exec: its peaks are ste's, not the command's.
        if run.exit.launch_error.is_some()
            && let Some(p) = self.root.map(|i| &mut run.processes[i])
            && p.execs.is_empty()
        {
            p.peak_rss_bytes = None;
            if let Some(t) = p.ledger.as_mut().and_then(|l| l.taskstats.as_mut()) {
                t.peak_rss_bytes = None;
                t.peak_vm_bytes = None;
            }
            run.notes.push(
                "the command never started: the process ste forked to exec it had only ste's memory, so no memory figure is given for it".into(),
            );
        }
        let totals = &mut run.totals;
        totals.wall_ns = self.end_ns.unwrap_or_else(|| {
            run.processes
                .iter()
                .filter_map(|p| p.end_ns)
                .max()
                .unwrap_or(0)
        });
        totals.processes = run.processes.len() as u64;
        totals.threads = run.processes.iter().map(|p| u64::from(p.threads)).sum();
        totals.execs = run.processes.iter().map(|p| p.execs.len() as u64).sum();
        totals.still_running = still_running;
        if let Some(p) = run
            .processes
            .iter()
            .filter(|p| p.peak_rss_bytes.is_some())
            .max_by_key(|p| p.peak_rss_bytes)
        {
            totals.peak_rss_bytes = p.peak_rss_bytes;
            totals.peak_rss_pid = Some(p.pid);
        }
        crate::ledger::fold::account::finish(&mut self.run);
        self.run
    }

    /// The Run as folded so far.
    pub fn run(&self) -> &Run {
        &self.run
    }

    /// The entries of `pid` in the Run's process list, oldest first (pids are reused).
    pub fn entries_of(&self, pid: i32) -> &[usize] {
        self.by_pid.get(&pid).map_or(&[], Vec::as_slice)
    }

    /// The entry of process `tgid`: the one that started at `start_ns`, or the live one, or
    /// the newest when none is live.
    fn process_index(&self, tgid: i32, start_ns: Option<u64>) -> Option<usize> {
        match start_ns {
            None => self
                .live
                .get(&tgid)
                .map(|lp| lp.index)
                .or_else(|| self.by_pid.get(&tgid)?.last().copied()),
            Some(s) => self
                .by_pid
                .get(&tgid)?
                .iter()
                .rev()
                .copied()
                .find(|&i| self.run.processes[i].start_ns == s),
        }
    }

    fn new_process(&mut self, pid: i32, ppid: Option<i32>, t: u64) {
        if self.live.contains_key(&pid) {
            // Already known (a resync may report a process the tracker also saw).
            return;
        }
        let index = self.run.processes.len();
        self.by_pid.entry(pid).or_default().push(index);
        self.run.processes.push(Process {
            pid,
            ppid,
            start_ns: t,
            end_ns: None,
            exit_code: None,
            signal: None,
            threads: 1,
            peak_rss_bytes: None,
            io: None,
            execs: Vec::new(),
            ledger: None,
            thread_lifetimes: Vec::new(),
        });
        self.live.insert(
            pid,
            LiveProcess {
                index,
                tids: vec![pid],
            },
        );
        self.threads.insert(pid, pid);
    }

    /// The live process `tgid`, created with an unknown parent if no fork announced it.
    fn live_or_orphan(&mut self, tgid: i32, t: u64) -> &mut LiveProcess {
        if !self.live.contains_key(&tgid) {
            self.new_process(tgid, None, t);
        }
        self.live.get_mut(&tgid).expect("inserted above")
    }
}

fn max_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// I/O counters only grow; the latest read of a process is the largest.
fn max_io(a: Option<Io>, b: Option<Io>) -> Option<Io> {
    match (a, b) {
        (Some(a), Some(b)) if b.rchar_bytes >= a.rchar_bytes => Some(b),
        (Some(a), Some(_)) => Some(a),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Arg, Termination};

    fn at(t_ns: u64, event: Event) -> Stamped {
        Stamped { t_ns, event }
    }

    fn start(pid: i32) -> Stamped {
        at(
            0,
            Event::Start {
                command: vec![Arg::from("sh")],
                tracker: "ptrace".into(),
                pid,
                ppid: 1,
            },
        )
    }

    /// The tracker may not know the root's status (its leader's exit lost with an overrun);
    /// ste's own wait for the root tells it, and a status the tracker saw is never replaced.
    #[test]
    fn the_roots_status_comes_from_ste_s_wait_when_the_tracker_had_none() {
        let exit = |t, status| {
            at(
                t,
                Event::Exit {
                    tid: 10,
                    tgid: 10,
                    status,
                },
            )
        };
        let root_exit = |t, code| {
            at(
                t,
                Event::RootExit {
                    status: Termination::Exited(code),
                },
            )
        };
        let run = Recorder::replay(&[start(10), exit(1, None), root_exit(2, 3)]);
        assert_eq!(run.processes[0].exit_code, Some(3));
        assert_eq!(run.exit.code, Some(3));
        let run = Recorder::replay(&[
            start(10),
            exit(1, Some(Termination::Exited(4))),
            root_exit(2, 3),
        ]);
        assert_eq!(
            run.processes[0].exit_code,
            Some(4),
            "the tracker's own figure stays"
        );
    }

    /// Losses add up while each is sized; one of unknown size makes the sum unknown, and an
    /// overrun said to have lost nothing (an older record's) is no bound either.
    #[test]
    fn a_loss_of_unknown_size_leaves_the_bound_unknown() {
        let lost = |t, overruns, events_at_most, exits_missed| {
            at(
                t,
                Event::Lost {
                    overruns,
                    events_at_most,
                    found_by_resync: 0,
                    exits_missed,
                    argv_doubtful: 0,
                },
            )
        };
        // The root's end, so that no process is left unended (a missed exit of its own).
        let end = at(
            9,
            Event::Exit {
                tid: 10,
                tgid: 10,
                status: Some(Termination::Exited(0)),
            },
        );
        let replay = |losses: &[Stamped]| {
            let mut events = vec![start(10)];
            events.extend_from_slice(losses);
            events.push(end.clone());
            Recorder::replay(&events)
        };
        let run = replay(&[]);
        assert_eq!(run.overhead.lost.events_at_most, Some(0));
        assert_eq!(run.overhead.lost_events, Some(0));

        let run = replay(&[lost(1, 1, Some(7), 0), lost(2, 1, Some(5), 2)]);
        assert_eq!(run.overhead.lost.events_at_most, Some(12));
        assert_eq!(run.overhead.lost.overruns, 2);
        assert_eq!(run.overhead.lost_events, None, "a bound, not a count");

        let run = replay(&[lost(1, 1, Some(7), 0), lost(2, 3, None, 4)]);
        assert_eq!(run.overhead.lost.events_at_most, None);
        assert_eq!(run.overhead.lost.exits_missed, 4);

        // Sequence gaps size a netlink overrun in events of their own.
        let run = replay(&[lost(1, 2, Some(0), 0), lost(2, 0, Some(9), 0)]);
        assert_eq!(run.overhead.lost.events_at_most, Some(9));

        let run = replay(&[lost(1, 2, Some(0), 0)]);
        assert_eq!(run.overhead.lost.events_at_most, None);

        // Process ends the kernel dropped unsaid, found at the end: how many other events
        // went with them is unknown.
        let run = replay(&[lost(1, 0, None, 3)]);
        assert_eq!(run.overhead.lost.events_at_most, None);
        assert_eq!(run.overhead.lost_events, None);
    }

    #[test]
    fn counts_processes_threads_and_execs() {
        let events = vec![
            start(10),
            at(
                1,
                Event::Exec {
                    tgid: 10,
                    former_tid: 10,
                    argv: Some(vec![Arg::from("sh")]),
                },
            ),
            at(
                2,
                Event::Fork {
                    parent_tgid: 10,
                    child_tid: 11,
                    child_tgid: 11,
                },
            ),
            at(
                3,
                Event::Fork {
                    parent_tgid: 11,
                    child_tid: 12,
                    child_tgid: 11,
                },
            ),
            at(
                4,
                Event::Exec {
                    tgid: 11,
                    former_tid: 11,
                    argv: None,
                },
            ),
            at(
                5,
                Event::Exit {
                    tid: 12,
                    tgid: 11,
                    status: None,
                },
            ),
            at(
                6,
                Event::Exit {
                    tid: 11,
                    tgid: 11,
                    status: Some(Termination::Exited(3)),
                },
            ),
            at(
                7,
                Event::Exit {
                    tid: 10,
                    tgid: 10,
                    status: Some(Termination::Exited(0)),
                },
            ),
            at(
                7,
                Event::RootExit {
                    status: Termination::Exited(0),
                },
            ),
            at(
                8,
                Event::End {
                    user_ns: 1,
                    sys_ns: 2,
                    ste_cpu_ns: 3,
                    ste_max_rss_bytes: 4,
                    stopped_waiting: None,
                },
            ),
        ];
        let run = Recorder::replay(&events);
        assert_eq!(run.totals.processes, 2);
        assert_eq!(run.totals.threads, 3);
        assert_eq!(run.totals.execs, 2);
        assert_eq!(run.overhead.lost.argv_unread, 1);
        assert_eq!(run.processes[1].exit_code, Some(3));
        assert_eq!(run.processes[1].end_ns, Some(6));
        assert_eq!(run.exit.code, Some(0));
        assert_eq!(run.totals.wall_ns, 8);
        assert_eq!(run.overhead.lost_events, Some(0));
    }

    #[test]
    fn leader_exiting_first_ends_the_process_with_its_last_thread() {
        let events = vec![
            start(10),
            at(
                1,
                Event::Fork {
                    parent_tgid: 10,
                    child_tid: 11,
                    child_tgid: 10,
                },
            ),
            at(
                2,
                Event::Exit {
                    tid: 10,
                    tgid: 10,
                    status: Some(Termination::Exited(0)),
                },
            ),
            at(
                5,
                Event::Exit {
                    tid: 11,
                    tgid: 10,
                    status: None,
                },
            ),
        ];
        let run = Recorder::replay(&events);
        assert_eq!(run.processes[0].end_ns, Some(5));
        assert_eq!(run.processes[0].threads, 2);
    }

    #[test]
    fn exec_from_a_thread_replaces_the_leader() {
        let events = vec![
            start(10),
            at(
                1,
                Event::Fork {
                    parent_tgid: 10,
                    child_tid: 11,
                    child_tgid: 10,
                },
            ),
            at(
                1,
                Event::Fork {
                    parent_tgid: 10,
                    child_tid: 12,
                    child_tgid: 10,
                },
            ),
            // netlink order: the killed old leader reports an exit, then thread 11 execs.
            at(
                2,
                Event::Exit {
                    tid: 12,
                    tgid: 10,
                    status: None,
                },
            ),
            at(
                2,
                Event::Exit {
                    tid: 10,
                    tgid: 10,
                    status: Some(Termination::Exited(0)),
                },
            ),
            at(
                2,
                Event::Exec {
                    tgid: 10,
                    former_tid: 11,
                    argv: Some(vec![Arg::from("x")]),
                },
            ),
            at(
                3,
                Event::Exit {
                    tid: 11,
                    tgid: 10,
                    status: None,
                },
            ),
            at(
                4,
                Event::Exit {
                    tid: 10,
                    tgid: 10,
                    status: Some(Termination::Exited(5)),
                },
            ),
        ];
        let run = Recorder::replay(&events);
        assert_eq!(run.processes[0].end_ns, Some(4));
        assert_eq!(run.processes[0].exit_code, Some(5));
        assert_eq!(run.processes[0].threads, 3);
    }

    #[test]
    fn threads_have_lifetimes_ended_by_exit_or_exec() {
        let fork = |t, tid| {
            at(
                t,
                Event::Fork {
                    parent_tgid: 10,
                    child_tid: tid,
                    child_tgid: 10,
                },
            )
        };
        let events = vec![
            start(10),
            fork(1, 11),
            fork(2, 12),
            at(
                3,
                Event::Exit {
                    tid: 11,
                    tgid: 10,
                    status: None,
                },
            ),
            at(
                4,
                Event::Exec {
                    tgid: 10,
                    former_tid: 10,
                    argv: None,
                },
            ),
        ];
        let run = Recorder::replay(&events);
        let l = &run.processes[0].thread_lifetimes;
        assert_eq!(l.len(), 2);
        assert_eq!((l[0].tid, l[0].start_ns, l[0].end_ns), (11, 1, Some(3)));
        assert_eq!((l[1].tid, l[1].start_ns, l[1].end_ns), (12, 2, Some(4)));
    }

    #[test]
    fn exec_times_strictly_follow_the_order_execs_arrive_in() {
        let exec = |t, tgid| {
            at(
                t,
                Event::Exec {
                    tgid,
                    former_tid: tgid,
                    argv: Some(vec![Arg::from(format!("p{tgid}").as_str())]),
                },
            )
        };
        let fork = |t, child| {
            at(
                t,
                Event::Fork {
                    parent_tgid: 10,
                    child_tid: child,
                    child_tgid: child,
                },
            )
        };
        // 12 execs first but was stamped earlier by a source on another CPU.
        let events = vec![
            start(10),
            fork(1, 11),
            fork(2, 12),
            exec(5, 12),
            exec(5, 11),
            exec(3, 10),
        ];
        let run = Recorder::replay(&events);
        let mut all: Vec<(u64, i32)> = run
            .processes
            .iter()
            .flat_map(|p| p.execs.iter().map(move |e| (e.t_ns, p.pid)))
            .collect();
        all.sort();
        assert_eq!(all, vec![(5, 12), (6, 11), (7, 10)]);
    }

    #[test]
    fn pid_reuse_makes_a_new_process() {
        let events = vec![
            start(10),
            at(
                1,
                Event::Fork {
                    parent_tgid: 10,
                    child_tid: 11,
                    child_tgid: 11,
                },
            ),
            at(
                2,
                Event::Exit {
                    tid: 11,
                    tgid: 11,
                    status: Some(Termination::Exited(0)),
                },
            ),
            at(
                3,
                Event::Fork {
                    parent_tgid: 10,
                    child_tid: 11,
                    child_tgid: 11,
                },
            ),
            at(
                4,
                Event::Exit {
                    tid: 11,
                    tgid: 11,
                    status: Some(Termination::Exited(1)),
                },
            ),
        ];
        let run = Recorder::replay(&events);
        assert_eq!(run.totals.processes, 3);
        assert_eq!(run.processes[2].exit_code, Some(1));
    }

    #[test]
    fn unended_processes_are_still_running_or_missed() {
        let mut events = vec![
            start(10),
            at(
                1,
                Event::Fork {
                    parent_tgid: 10,
                    child_tid: 11,
                    child_tgid: 11,
                },
            ),
            at(
                2,
                Event::Exit {
                    tid: 10,
                    tgid: 10,
                    status: Some(Termination::Exited(0)),
                },
            ),
        ];
        let mut cut = events.clone();
        cut.push(at(
            3,
            Event::End {
                user_ns: 0,
                sys_ns: 0,
                ste_cpu_ns: 0,
                ste_max_rss_bytes: 0,
                stopped_waiting: Some("--linger 1s".into()),
            },
        ));
        let run = Recorder::replay(&cut);
        assert_eq!(run.totals.still_running, 1);
        assert_eq!(run.overhead.lost_events, Some(0));
        events.push(at(
            3,
            Event::End {
                user_ns: 0,
                sys_ns: 0,
                ste_cpu_ns: 0,
                ste_max_rss_bytes: 0,
                stopped_waiting: None,
            },
        ));
        let run = Recorder::replay(&events);
        assert_eq!(run.overhead.lost.exits_missed, 1);
        assert_eq!(run.overhead.lost_events, Some(1));
    }
}
