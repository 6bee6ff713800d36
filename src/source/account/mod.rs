//! Exact accounting for a run: taskstats exit records (root), a cgroup of its own (root, or a
//! delegated cgroup v2 subtree), delay accounting, the per-process ledger, lingering
//! descendants ended on request (`ste monitor` is the face's, `command/monitor.rs`).
//!
//! Owns the session's accounting sources (prepared while the command's first process waits to
//! be told what to join, started before it is released, stopped and read when the tree is over) and the matching of taskstats
//! records to the Run's processes. Everything it learns reaches the Run as
//! `Event::Accounting`, folded by `ledger::fold::account`; it formats nothing (reports do), and it never touches
//! the tracker's or the sampler's state.

pub mod delays;
pub mod group;
pub mod listener;
pub mod matcher;
pub mod owner;

use crate::bus::event::Event;
use crate::bus::sink::Sink;
use crate::bus::tree::TreeWatcher;
use crate::kernel::taskstats::{self, TaskStats, Taskstats};
use crate::ledger::recorder::Recorder;
use crate::model::{AccountEvent, BeforeRelease, GroupEnd, Source};
use group::Group;
use listener::Listener;
use matcher::Matcher;
use std::ffi::CString;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;
use std::sync::Arc;

/// Splits an exact runtime into user and system time in proportion to the kernel's tick
/// samples, as getrusage does (kernel/sched/cputime.c `cputime_adjust`): the samples alone
/// (taskstats `ac_utime`/`ac_stime`, v1 `cpuacct.usage_user`/`_sys`) are whole ticks, so a
/// short process would show 0 user and 0 system time for real CPU. With no system tick, all
/// of it is user time, as the kernel reports it. Returns (user, system).
pub fn split_runtime(runtime_ns: u64, user_ticks: u64, system_ticks: u64) -> (u64, u64) {
    if system_ticks == 0 {
        return (runtime_ns, 0);
    }
    if user_ticks == 0 {
        return (0, runtime_ns);
    }
    let system = (u128::from(runtime_ns) * u128::from(system_ticks)
        / (u128::from(user_ticks) + u128::from(system_ticks))) as u64;
    (runtime_ns - system, system)
}

/// The taskstats receive buffer: 120k exits with no drops at this size (docs/kernel-notes.md).
pub const TASKSTATS_RCVBUF: usize = 16 << 20;

/// Accounting settings of a run.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `--no-accounting`: none of it, the core tracker alone.
    pub off: bool,
    pub taskstats: bool,
    pub cgroup: bool,
    pub delays: bool,
    pub kill_lingering: bool,
}

/// The accounting sources of one run.
pub struct Session {
    opts: Options,
    group: Option<Arc<Group>>,
    /// The files the child joins the group by.
    join: Vec<CString>,
    taskstats: Option<Taskstats>,
    /// The taskstats socket's registration for exit records, ended before the release when
    /// the tracker reads each process's whole ledger itself ([`Session::declare`]).
    registration: Option<taskstats::Registration>,
    /// Why taskstats is not there, said unless the tracker gives what it would have.
    taskstats_missing: Option<String>,
    listener: Option<Listener>,
    /// The group once its end figures are read, until [`Session::close`] removes it.
    ended: Option<Arc<Group>>,
    /// The group's end figures, read while the accounts thread stops.
    group_end: Option<GroupEnd>,
    matcher: Matcher,
    delays: Option<delays::Guard>,
    /// Events found before the run's start was said, emitted by `declare`.
    early: Vec<Event>,
    /// `CLOCK_MONOTONIC` at the kernel's start of the command's first process, from taskstats'
    /// elapsed time (root); see [`Session::before_release`].
    root_started_ns: Option<u64>,
    /// Whether the tracker must read the ledger's figures itself at exit stops: when taskstats,
    /// which gives them (the peaks and I/O exactly; the CPU short of the end of each exit), is
    /// not available.
    tracker_reads_ledger: bool,
}

fn unavailable(figure: &str, why: impl Into<String>) -> Event {
    Event::Accounting {
        event: AccountEvent::Unavailable {
            figure: figure.into(),
            why: why.into(),
        },
    }
}

use crate::kernel::calls::is_root;

impl Session {
    /// Opens what must exist before the command is released: the cgroup (and names the files
    /// the child joins it by), the taskstats exit listener, delay accounting. Starts no thread. Anything
    /// that does not work is recorded as unavailable, with the reason.
    pub fn prepare(opts: &Options) -> Session {
        let mut s = Session {
            opts: opts.clone(),
            group: None,
            join: Vec::new(),
            taskstats: None,
            registration: None,
            taskstats_missing: None,
            listener: None,
            ended: None,
            group_end: None,
            matcher: Matcher::default(),
            delays: None,
            early: Vec::new(),
            root_started_ns: None,
            tracker_reads_ledger: false,
        };
        if opts.off {
            s.early
                .push(unavailable("exact accounting", "--no-accounting"));
            return s;
        }
        if opts.cgroup {
            let made = crate::bus::phases::span("accounting: cgroup", || {
                Group::create(Path::new("/proc/self")).and_then(|g| {
                    let join = g
                        .join_paths()
                        .into_iter()
                        .map(|p| CString::new(p.into_os_string().into_vec()))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(|_| "a cgroup path holds a NUL byte".to_string())?;
                    Ok((g, join))
                })
            });
            match made {
                Ok((g, join)) => {
                    s.join = join;
                    s.group = Some(Arc::new(g));
                }
                Err(why) => s.early.push(unavailable(
                    "group memory peak, group CPU, pids.peak",
                    format!("ste could not make a cgroup of its own: {why}"),
                )),
            }
        } else {
            s.early.push(unavailable(
                "group memory peak, group CPU, pids.peak",
                "--no-cgroup",
            ));
        }
        // Registered now, beside the BPF load, though the ebpf tracker may make it needless:
        // which tracker runs is known only once BPF has loaded, and registering then would
        // put it on the way to the release of every other tracker's command.
        if opts.taskstats {
            match crate::bus::phases::span("accounting: taskstats", open_registered) {
                Ok((t, r)) => {
                    s.taskstats = Some(t);
                    s.registration = Some(r);
                }
                Err(why) => s.taskstats_missing = Some(why),
            }
        } else {
            s.taskstats_missing = Some("--no-taskstats".into());
        }
        s.tracker_reads_ledger = s.taskstats.is_none();
        let places = delays::Places::default();
        if is_root()
            && let Some(text) = delays::sweep(&places)
        {
            s.early.push(Event::Note { text });
        }
        let (on, switched) = if opts.delays {
            match delays::switch_on(&places) {
                Ok(g) => {
                    let switched = g.switched();
                    s.delays = Some(g);
                    (true, switched)
                }
                Err(why) => {
                    s.early.push(unavailable("--delays", why));
                    (delays::enabled().unwrap_or(false), false)
                }
            }
        } else {
            (delays::enabled().unwrap_or(false), false)
        };
        s.early.push(Event::Accounting {
            event: AccountEvent::Delays {
                on,
                switched_by_ste: switched,
            },
        });
        if !on {
            s.early.push(unavailable(
                crate::model::DELAYS_OFF,
                "delay accounting is off (kernel.task_delayacct = 0); --delays switches it on for the run (root)",
            ));
        }
        s
    }

    /// Whether the tracker should read the ledger's figures at exit stops (the setting the
    /// session hands to `track::start`): when taskstats, which gives them, is not there.
    pub fn tracker_reads_ledger(&self) -> bool {
        self.tracker_reads_ledger
    }

    /// Whether a per-process ledger is kept at all (not `--no-accounting`): then a tracker that
    /// waits for each process (ptrace) keeps the rusage of that wait, which costs it no read and
    /// holds the process's exit, where taskstats's record and the exit stop come before it.
    pub fn ledger_kept(&self) -> bool {
        !self.opts.off
    }

    /// The files the child writes `0` to, to join the cgroup before its exec (none without a
    /// cgroup): give them to `launch::Child::join`.
    pub fn join_files(&self) -> Vec<CString> {
        self.join.clone()
    }

    /// Called before the command is released, while the tracker may still be starting, with
    /// the parked command's first process and whether it joined the cgroup
    /// (`launch::Child::joined`): starts the accounts thread and asks taskstats when the
    /// process started. The exit records' high-water marks go to `tree` too (the sampler,
    /// which takes them where the tracker reads none). What it finds is said by
    /// [`Session::declare`], once the tracker in use is known: the events keep their order
    /// after the run's start whatever the threads did meanwhile.
    pub fn start(
        &mut self,
        sink: &Sink,
        root: i32,
        joined: std::io::Result<()>,
        tree: Arc<dyn TreeWatcher>,
    ) {
        if let Some(g) = &self.group {
            let joined =
                joined.map_err(|e| format!("the command could not join ste's cgroup: {e}"));
            match joined {
                Ok(()) => {
                    self.early.push(Event::Accounting {
                        event: AccountEvent::Group {
                            version: g.version,
                            dirs: g.dirs(),
                        },
                    });
                    if g.has_memory() {
                        let peak = match (g.version, g.has_exact_peak()) {
                            (2, true) => Source::exact(
                                "cgroup v2 memory.peak of ste's own cgroup, joined before exec",
                            ),
                            (2, false) => Source::sampled(
                                "cgroup v2 memory.current of ste's own cgroup, joined before exec, read every 20 ms while it moves",
                                "the highest reading, a lower bound: memory.peak, the kernel's own, needs Linux 5.19",
                            ),
                            _ => Source::exact(
                                "cgroup v1 memory.max_usage_in_bytes of ste's own cgroup, joined before exec",
                            ),
                        };
                        self.early.push(source("group.memory_peak_bytes", peak));
                        self.early.push(source(
                            "group.anon_file",
                            Source::sampled(
                                "memory.stat of ste's cgroup (anon, file = page cache)",
                                "sampled every 20ms; the page cache still charged at the end is exact",
                            ),
                        ));
                    }
                    for (figure, why) in &g.missing {
                        self.early.push(unavailable(figure, why.as_str()));
                    }
                }
                Err(why) => {
                    self.early
                        .push(unavailable("group memory peak, group CPU, pids.peak", why));
                    self.group = None;
                }
            }
        }
        if self.opts.off {
            return;
        }
        if let Some(t) = self.taskstats.as_mut() {
            // Nothing of the tree can have exited yet, so the exit records this query may read
            // past are other processes'. The kernel's elapsed time is taken between the stamp
            // and the reply: the start is at most a round trip (~20 µs) early.
            let asked_ns = crate::bus::sink::monotonic_ns();
            if let Ok(s) = t.query_pid(root as u32) {
                self.root_started_ns = Some(asked_ns.saturating_sub(s.elapsed_us * 1000));
            }
        }
        let group = self.group.clone();
        if (self.taskstats.is_some() || group.is_some())
            && let Ok(l) = Listener::spawn(self.taskstats.take(), group, sink.clone(), tree)
        {
            self.listener = Some(l);
        }
    }

    /// Says what [`Session::prepare`] and [`Session::start`] found, and where the per-process
    /// ledger comes from with `tracker` (the one in use). Call it before the release: when
    /// the tracker reads each process's whole ledger itself (`whole_ledger`, ebpf), taskstats's
    /// registration ends here, so that no exit of the tree costs a record nobody needs (the
    /// kernel's making and sending it, the accounts thread's receiving it, the session's
    /// matching it to its process).
    pub fn declare(&mut self, sink: &Sink, tracker: &str, whole_ledger: bool) {
        for e in self.early.drain(..) {
            sink.emit(e);
        }
        if self.opts.off {
            return;
        }
        // Whether the tracker reads each process's whole ledger and taskstats's records are
        // no longer listened to.
        let mut ledger_from_tracker = false;
        if whole_ledger {
            ledger_from_tracker = match self.registration.take() {
                Some(r) => crate::bus::phases::span("accounting: taskstats off", || r.end())
                    .map_err(|e| {
                        sink.emit(Event::Note {
                            text: format!("taskstats's exit records could not be turned off ({e}): they were read as well"),
                        })
                    })
                    .is_ok(),
                None => true,
            };
            if ledger_from_tracker && let Some(l) = &self.listener {
                l.taskstats_ended();
            }
        }
        // Held only for that.
        self.registration = None;
        if !ledger_from_tracker && let Some(why) = self.taskstats_missing.take() {
            // The monitor says its own fallback; a run's is the tracker.
            let instead = if why.starts_with("--") {
                ""
            } else {
                "; per-process figures come from the tracker instead"
            };
            sink.emit(unavailable(
                "taskstats (per-process delays, faults, I/O)",
                format!("{why}{instead}"),
            ));
        }
        if tracker == "ptrace" {
            // Whether or not taskstats gives the rest: the wait costs the tracker nothing.
            sink.emit(source(
                "ledger.wait4",
                Source::sampled(
                    "wait4() rusage at each process's end, less the rusage of the children it reaped: user and system time, faults, context switches",
                    "CPU read after the exit, the teardown of the memory included: exact for each process's last thread; short by the rest of the last time slice of each thread that ended before it (the kernel adds such a thread's runtime as it releases it, before its last switch); the user/system split follows the kernel's tick samples",
                ),
            ));
        }
        if ledger_from_tracker {
            // `ledger.last_switch`, the tracker's to declare, says what it reads.
        } else if !self.tracker_reads_ledger {
            sink.emit(source(
                "ledger.taskstats",
                Source::sampled(
                    "taskstats exit records (one per exiting thread, summed per process): CPU is the scheduler's runtime, the user/system split tick-sampled; peaks are the mm's high-water marks",
                    "CPU is short of what each thread did after the kernel wrote its record, early in its exit: for a process's last thread, the teardown of its memory (tens of milliseconds for a GiB); for every thread, its runtime since its last scheduler tick or switch (up to a tick), so a process shorter than a tick may show none; the group's CPU (cgroup) is exact",
                ),
            ));
        } else if tracker == "ptrace" {
            sink.emit(source(
                "ledger.exit_stop",
                Source::sampled(
                    "/proc/TID/schedstat at each thread's ptrace exit stop (CPU, run-queue wait); VmHWM and /proc/PID/io at the last one",
                    "CPU and run-queue wait are read at the start of the exit: what the thread did after it (for a process's last thread, the teardown of its memory) is missing, which is why a process's CPU is wait4's; the peaks and I/O are exact",
                ),
            ));
        } else if tracker == "ebpf" {
            // Each task's CPU comes from its last switch (`ledger.last_switch`, the tracker's
            // to declare); what only taskstats gives was said unavailable with it.
        } else {
            sink.emit(unavailable(
                "per-process ledger",
                "the netlink tracker cannot stop a process at its exit, and taskstats needs root",
            ));
        }
    }

    /// Measures the command's first process just before its release at `release_ns`
    /// (`CLOCK_MONOTONIC`): blocked on its pipe, its figures stand still. What it did until
    /// then was ste's set-up, which the fold leaves out of its ledger (`model::BeforeRelease`).
    /// Its life until then is exact from the kernel's start of it where taskstats told it (the
    /// ledger's task time, taskstats' too, is then right to the microsecond), else
    /// `alive_ns`, ste's own measure from just before the clone (longer by the part of the
    /// clone that precedes the kernel's start time: up to milliseconds on a loaded machine).
    /// `setup_io` is what ste's launch code reads and writes in it, in bytes, its release
    /// included (`launch::Child::setup_io`), which its I/O counters hold as its own.
    /// Nothing with accounting off, where no ledger is kept.
    pub fn before_release(
        &self,
        sink: &Sink,
        pid: i32,
        release_ns: u64,
        alive_ns: u64,
        setup_io: (u64, u64),
    ) {
        if self.opts.off {
            return;
        }
        let alive_ns = self
            .root_started_ns
            .map_or(alive_ns, |s| release_ns.saturating_sub(s));
        let (cpu_ns, run_queue_ns) = std::fs::read_to_string(format!("/proc/{pid}/schedstat"))
            .ok()
            .and_then(|t| crate::kernel::proc::parse_schedstat(&t))
            .unzip();
        sink.emit(Event::Accounting {
            event: AccountEvent::BeforeRelease {
                before: BeforeRelease {
                    pid,
                    alive_ns,
                    cpu_ns,
                    run_queue_ns,
                    read_char_bytes: Some(setup_io.0),
                    write_char_bytes: Some(setup_io.1),
                },
            },
        });
    }

    /// A taskstats record from the listener: the event to apply when it is the tree's.
    pub fn on_task(&mut self, rec: &Recorder, t_ns: u64, stats: Box<TaskStats>) -> Option<Event> {
        self.matcher.offer(rec, t_ns, stats)
    }

    /// Events for records that waited for their process to appear in the Run.
    pub fn newly_matched(&mut self, rec: &Recorder) -> Vec<Event> {
        self.matcher.newly_matched(rec)
    }

    /// Whether `--kill-lingering` asks ste to end the lingering descendants.
    /// What the end of the run needs of root: removing the cgroup, switching delay accounting
    /// back off.
    pub fn privileged_end(&self) -> (bool, bool) {
        (
            self.group.is_some(),
            self.delays.as_ref().is_some_and(|d| d.switched()),
        )
    }

    pub fn kills_lingering(&self) -> bool {
        self.opts.kill_lingering
    }

    /// Sends `signal` to the lingering descendants: everything left in the cgroup, else the
    /// processes the ledger knows alive. Returns the event saying so.
    pub fn kill_lingering(&self, rec: &Recorder, signal: i32) -> Option<Event> {
        let (pids, via) = match &self.group {
            Some(g) => (g.kill(signal), "cgroup"),
            None => {
                let pids: Vec<i32> = rec.live_processes().iter().map(|(p, _)| *p).collect();
                for &pid in &pids {
                    // The pids are live processes of the tree: ste is their subreaper, so
                    // none can be reused before ste reaps it.
                    let _ = crate::kernel::calls::kill(pid, signal);
                }
                (pids, "process list")
            }
        };
        (!pids.is_empty()).then(|| Event::Accounting {
            event: AccountEvent::KilledLingering {
                pids,
                signal,
                via: via.into(),
            },
        })
    }

    /// Asks the accounts thread to drain what the kernel queued and read the group's end
    /// figures, without waiting: the session stops the sampler meanwhile.
    pub fn ask_to_stop(&self) {
        if let Some(l) = &self.listener {
            l.ask_to_stop();
        }
    }

    /// Reads the group's end figures while the accounts thread drains what the kernel
    /// queued (asked by [`Session::ask_to_stop`]), then waits for it.
    pub fn stop(&mut self) {
        if let Some(mut l) = self.listener.take() {
            self.group_end = crate::bus::phases::span("accounting: group end", || {
                self.group.as_ref().map(|g| g.end())
            });
            crate::bus::phases::span("accounting: last drain", || l.stop());
        }
    }

    /// The group's final figures; then removes the group and restores delay accounting.
    pub fn finish(&mut self) -> Vec<Event> {
        self.stop();
        let mut out = Vec::new();
        if let Some(g) = self.group.take() {
            // Read at the stop, unless no accounts thread ran.
            let end = self.group_end.take().unwrap_or_else(|| g.end());
            out.push(Event::Accounting {
                event: AccountEvent::GroupEnd { end: Box::new(end) },
            });
            self.ended = Some(g);
        }
        self.delays.take();
        out
    }

    /// Removes the group's directories (after [`Session::finish`], once the report is out: a
    /// v1 group's three `rmdir`s take ~0.1 ms); returns those that could not be removed, and
    /// why, for ste to say. The accounts thread's hold on the group ended with its stop, so
    /// the session's is the last; dropping a `Session` without this removes them unsaid.
    pub fn close(&mut self) -> Vec<String> {
        self.ended
            .take()
            .and_then(Arc::into_inner)
            .map_or_else(Vec::new, |mut g| g.remove())
    }
}

fn source(figure: &str, source: Source) -> Event {
    Event::Source {
        figure: figure.into(),
        source,
    }
}

/// A taskstats socket registered for exit records, or why not.
pub fn open_listener() -> Result<Taskstats, String> {
    open_registered().map(|(t, _)| t)
}

/// [`open_listener`], with a handle on the registration that ends it from another thread.
fn open_registered() -> Result<(Taskstats, taskstats::Registration), String> {
    if !is_root() {
        return Err("taskstats needs CAP_NET_ADMIN (root) since Linux 3.0".into());
    }
    let mut t = Taskstats::open(TASKSTATS_RCVBUF)
        .map_err(|e| format!("cannot open the taskstats netlink family: {e}"))?;
    let cpus = taskstats::possible_cpus().map_err(|e| format!("cannot read the CPU list: {e}"))?;
    t.register_exits(&cpus)
        .map_err(|e| format!("cannot register for taskstats exit records: {e}"))?;
    let r = t
        .registration(&cpus)
        .map_err(|e| format!("cannot hold the taskstats registration: {e}"))?;
    Ok((t, r))
}

#[cfg(test)]
mod split_tests {
    use super::split_runtime;

    #[test]
    fn runtime_split_like_getrusage() {
        assert_eq!(split_runtime(900, 0, 0), (900, 0));
        assert_eq!(split_runtime(900, 0, 4), (0, 900));
        assert_eq!(split_runtime(900, 2, 1), (600, 300));
        assert_eq!(
            split_runtime(1_000_000_007, 3, 1),
            (750_000_006, 250_000_001)
        );
    }
}
