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
use foldhash::{HashMap, HashMapExt};
use std::borrow::Borrow;
use std::collections::BTreeMap;

/// What applying one event changed that a live view may want to show at once.
pub enum Applied<'a> {
    Nothing,
    /// A new exec, or a pending one's argv now known: the process and its exec record.
    Exec(&'a Process, &'a Exec),
    /// A new exec whose argv comes later (`Event::ExecPending`): the process.
    ExecPending(&'a Process),
}

struct LiveProcess {
    index: usize,
    /// Its live threads.
    tids: Vec<i32>,
    /// Its last exec's argv is still to come ([`Event::ExecPending`]).
    argv_pending: bool,
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
                machine_cpus: None,
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
            Event::Machine { cpus } => self.run.machine_cpus = Some(*cpus),
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
                let index = self.exec(*tgid, t, argv.clone(), false);
                let p = &self.run.processes[index];
                return Applied::Exec(p, p.execs.last().expect("just pushed"));
            }
            Event::ExecPending {
                tgid,
                former_tid: _,
            } => {
                let index = self.exec(*tgid, t, None, true);
                return Applied::ExecPending(&self.run.processes[index]);
            }
            Event::ExecArgv { tgid, argv } => {
                let Some(lp) = self.live.get_mut(tgid).filter(|lp| lp.argv_pending) else {
                    return Applied::Nothing;
                };
                lp.argv_pending = false;
                let p = &mut self.run.processes[lp.index];
                let Some(x) = p.execs.last_mut() else {
                    return Applied::Nothing;
                };
                x.argv = argv.clone();
                let p = &self.run.processes[lp.index];
                return Applied::Exec(p, p.execs.last().expect("checked above"));
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
                // The headline's interval takes every sample's bounds: the largest lower bound
                // and the largest upper bound, wherever they are.
                let tot = &mut self.run.totals;
                tot.max_pss_low_bytes = Some(tot.max_pss_low_bytes.unwrap_or(0).max(s.low()));
                tot.max_pss_high_bytes = Some(tot.max_pss_high_bytes.unwrap_or(0).max(s.high()));
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
            Event::SamplerDone { info } => {
                self.run.sampler = (**info).clone();
                // Without a mark at exit, no sample bounds what a process grew after its last
                // read: the highest sample's upper end is not the run's.
                if info.exit_marks == Some(false) {
                    self.run.totals.max_pss_high_bytes = None;
                }
            }
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
                argv_pending: false,
            },
        );
        self.threads.insert(pid, pid);
    }

    /// Applies an exec of `tgid` at `t` (see [`Event::Exec`]); `pending` when its argv comes
    /// later ([`Event::ExecArgv`]). Returns the process's index.
    fn exec(
        &mut self,
        tgid: i32,
        t: u64,
        argv: Option<Vec<crate::model::Arg>>,
        pending: bool,
    ) -> usize {
        // After an exec the process has exactly one thread, its leader: the others
        // were killed, and a non-leader that exec'd took over the leader's id.
        //
        // Exec times are made strictly increasing in the order the execs are applied
        // (sources may stamp them out of order by a few µs; 1 ns apart at worst), so
        // that sorting the Run's execs by time gives back the order of the live
        // `EXEC:` lines, and `ste report` prints them identically (a pending exec's line
        // waits for its argv: it may come out after later ones).
        let t = match self.last_exec_ns {
            Some(last) if t <= last => last + 1,
            _ => t,
        };
        self.last_exec_ns = Some(t);
        let lp = self.live_or_orphan(tgid, t);
        let stale = std::mem::replace(&mut lp.tids, vec![tgid]);
        lp.argv_pending = pending;
        let index = lp.index;
        for tid in stale {
            self.threads.remove(&tid);
        }
        self.threads.insert(tgid, tgid);
        let p = &mut self.run.processes[index];
        for l in &mut p.thread_lifetimes {
            l.end_ns.get_or_insert(t);
        }
        p.execs.push(Exec { t_ns: t, argv });
        index
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
mod tests;
