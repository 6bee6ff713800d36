//! The ptrace tracker: fork/vfork/clone/exec/exit stops only, no syscall stops.
//!
//! Owns the tracer thread (ptrace is per thread: the thread that seizes is the only one that
//! may wait for and restart the tracees). The root is seized with `PTRACE_SEIZE` while it waits
//! on the launch pipe, so every descendant is auto-attached from its first instruction and
//! group-stops are reported as `PTRACE_EVENT_STOP`, which `PTRACE_LISTEN` passes through
//! without resuming the tracee (job control keeps working). argv is read at the exec stop
//! (the process cannot have gone); `VmHWM` and `/proc/PID/io` at the exit stop, while the
//! memory is still attached.
//!
//! Wait statuses are decoded here rather than with nix's `WaitStatus`, which rejects
//! real-time signal numbers: a tracee stopped by one would never be restarted.

use crate::bus::event::Event;
use crate::bus::launched::{ExecOutcome, Launched};
use crate::bus::sink::{Batch, Msg, Sink};
use crate::bus::tree::TreeWatcher;
use crate::kernel::alarm::Alarm;
use crate::kernel::proc::{Held, ProcFs};
use crate::model::{AccountEvent, CallCount, Figures, LedgerSource, Source, Termination};
use crate::source::syscalls::Mode;
use crate::source::track::LedgerReads;
use crate::source::track::ptrace_changed::Changes;
use crate::source::track::ptrace_syscalls::SyscallStops;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::mpsc::sync_channel;
use std::time::Duration;

/// How long events may be held before they go to the session (as the ebpf reader's batch):
/// with the session's own nap (`bus::mailbox::NAP`), the live `EXEC:` lines lag by at most
/// twice this plus the nap (when the alarm rings just before the wait), far below anything
/// the session does on a clock.
const HOLD: Duration = Duration::from_millis(10);

/// A syscall stop's signal under `PTRACE_O_TRACESYSGOOD`.
const SYSCALL_STOP: i32 = libc::SIGTRAP | 0x80;

const OPTIONS: libc::c_int = libc::PTRACE_O_TRACEFORK
    | libc::PTRACE_O_TRACEVFORK
    | libc::PTRACE_O_TRACECLONE
    | libc::PTRACE_O_TRACEEXEC
    | libc::PTRACE_O_TRACEEXIT;

/// Starts the tracer thread and seizes `pid`. Returns once the seize succeeded (the child may
/// then be released) or with the reason it failed. With `syscalls`, also stops at every system
/// call to count it (slow), and returns the source of the summary.
pub fn start(
    child: &mut Launched,
    sink: Sink,
    sampler: Arc<dyn TreeWatcher>,
    syscalls: Option<Mode>,
    ledger: LedgerReads,
) -> Result<Option<Arc<dyn crate::source::syscalls::Source>>, String> {
    let pid = child.pid;
    let (stops, source) = match syscalls {
        Some(mode) => {
            let (stops, source) = SyscallStops::new(mode);
            (Some(stops), Some(source))
        }
        None => (None, None),
    };
    let options = if stops.is_some() {
        OPTIONS | libc::PTRACE_O_TRACESYSGOOD
    } else {
        OPTIONS
    };
    let (seized_tx, seized_rx) = sync_channel::<Result<(), String>>(1);
    let (report_tx, report_rx) = sync_channel::<ExecOutcome>(1);
    let spawned = std::thread::Builder::new()
        .name("ste-ptrace".into())
        .spawn(move || {
            // Every tracee stopped at an event waits for this thread, yet favouring it (nice
            // −10) cost the fork loop more than running it at the command's own priority, and a
            // build the same (bench/README.md, issue 18). STE_TRACKER_NICE still sets it.
            super::set_priority(0);
            crate::launch::privilege::limit_or_say(
                crate::launch::privilege::Role::Tracker { bpf_maps: false },
                &sink,
            );
            // SAFETY: seizing a process ste forked; the request takes integer arguments.
            let rc = unsafe { libc::ptrace(libc::PTRACE_SEIZE, pid, 0, options as libc::c_long) };
            if rc != 0 {
                let err = std::io::Error::last_os_error();
                let _ = seized_tx.send(Err(format!("PTRACE_SEIZE failed: {err}")));
                return;
            }
            // The kernel grants a traced exec its set-id and file-capability privileges only
            // when the tracer had CAP_SYS_PTRACE as it attached (the children inherit that).
            let privileged = crate::kernel::caps::effective()
                .is_some_and(|m| crate::kernel::caps::has(m, crate::kernel::caps::CAP_SYS_PTRACE));
            let _ = seized_tx.send(Ok(()));
            let Ok(report) = report_rx.recv() else { return };
            declare_sources(&sink, syscalls);
            let mut tracer = Tracer::new(
                pid,
                Some(report),
                Batch::new(sink.clone()),
                sampler,
                stops,
                ledger,
            );
            tracer.changes = Changes::new(privileged);
            let error = tracer.run().err();
            if let Some(text) = tracer.changes.note() {
                tracer.emit(Event::Note { text });
            }
            tracer.flush();
            sink.send(Msg::TrackerDone {
                t_ns: sink.now_ns(),
                error,
            });
        });
    if let Err(e) = spawned {
        return Err(format!("cannot start the tracer thread: {e}"));
    }
    seized_rx
        .recv()
        .unwrap_or_else(|_| Err("the tracer thread died".into()))?;
    report_tx
        .send(child.take_exec_outcome())
        .map_err(|_| "the tracer thread died".to_string())?;
    Ok(source)
}

fn declare_sources(sink: &Sink, syscalls: Option<Mode>) {
    if syscalls.is_some() {
        sink.emit(Event::Source {
            figure: "syscalls".into(),
            source: Source::exact(
                "ptrace syscall-entry and -exit stops (PTRACE_GET_SYSCALL_INFO), like strace; times include the stops",
            ),
        });
    }
    for (figure, from) in [
        (
            "processes",
            "ptrace fork/vfork/clone events of every task in the tree",
        ),
        ("threads", "ptrace clone events of every task in the tree"),
        ("execs", "ptrace exec events, argv read at the exec stop"),
        ("io", "/proc/PID/io at the ptrace exit stop"),
    ] {
        sink.emit(Event::Source {
            figure: figure.into(),
            source: Source::exact(from),
        });
    }
    let hwm = "VmHWM of /proc/PID/status at the ptrace exit stop";
    sink.emit(Event::Source {
        figure: "peak_rss_bytes".into(),
        source: if crate::kernel::release::Version::running().exact_rss_counters() {
            Source::exact(hwm)
        } else {
            Source::sampled(hwm, RSS_LAG)
        },
    });
}

/// Why VmHWM at the exit stop is a lower bound before Linux 6.2.
const RSS_LAG: &str = "a lower bound: before Linux 6.2 each thread keeps up to 64 page faults' changes of its process's RSS counters to itself (SPLIT_RSS_COUNTING; a fault maps up to 16 pages), and adds them only after the exit stop: VmHWM there can be below the true peak by that much a thread (a short program's, 4 KiB against ~700 KiB); taskstats's exit record, written after they are added, is exact (root)";

/// A decoded `waitpid` status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    Ended(Termination),
    /// A ptrace event stop (`status >> 16`), with the stop signal.
    Event(i32, i32),
    /// A signal-delivery-stop.
    Signal(i32),
    Other,
}

fn decode(status: i32) -> Wait {
    if let Some(t) = Termination::from_wait_status(status) {
        return Wait::Ended(t);
    }
    if status & 0xff == 0x7f {
        let sig = (status >> 8) & 0xff;
        let event = (status >> 16) & 0xff;
        if event != 0 {
            return Wait::Event(event, sig);
        }
        return Wait::Signal(sig);
    }
    Wait::Other
}

struct Tracer {
    root: i32,
    report: Option<ExecOutcome>,
    sink: Batch,
    sampler: Arc<dyn TreeWatcher>,
    procfs: ProcFs,
    /// Every live traced task → its thread group.
    tgid_of: HashMap<i32, i32>,
    /// Live threads per thread group, and how many of them have passed their exit stop.
    groups: HashMap<i32, Group>,
    /// Each live traced task's start, in run time (its parent's fork event; the first process
    /// at the release, time zero), when the ledger keeps wait4's figures.
    started: HashMap<i32, u64>,
    /// New tasks whose first stop arrived before their parent's fork event, with its signal.
    early_stops: HashMap<i32, i32>,
    /// New tasks announced by their parent whose first stop has not arrived yet.
    expected: HashSet<i32>,
    /// Ledger figures: read at exit stops (when taskstats is not there) and taken from wait4
    /// (whenever a ledger is kept): the session's settings.
    ledger: LedgerReads,
    /// Each live process's parent, and the rusage of the children it reaped so far.
    parent: HashMap<i32, i32>,
    reaped: HashMap<i32, Figures>,
    /// `--syscalls` at syscall stops: resume with `PTRACE_SYSCALL` and count each stop.
    syscalls: Option<SyscallStops>,
    /// Run time of the first event buffered since the last flush, if any.
    unsent_since: Option<u64>,
    /// Rings every `HOLD` while events are buffered, interrupting the blocking wait so they
    /// are sent on time; `None` if no timer could be made (then every burst of stops is sent
    /// before the wait blocks).
    alarm: Option<Alarm>,
    /// Run time at which waitpid reported the stop (or end) being handled.
    stop_ns: u64,
    /// Live processes' /proc files, opened while they run so that their exec and exit stops
    /// only read them (see [`Held`]); at most `hold_max` at once, beyond which the stops
    /// open the files themselves.
    held: HashMap<i32, Held>,
    hold_max: usize,
    /// What tracing changed of what the command did (`ptrace_changed`).
    changes: Changes,
}

#[derive(Default)]
struct Group {
    threads: u32,
    exiting: u32,
    /// Its ended threads' lives, each from its start to the wait that reported its end (the
    /// span wait4's CPU covers), when the ledger keeps wait4's figures.
    lives_ns: u64,
    /// A thread whose start was not seen: the sum of lives is unknown, not short.
    lives_unknown: bool,
}

impl Group {
    /// Adds a thread's life, or marks the sum unknown when its start was not seen.
    fn add_life(&mut self, life: Option<u64>) {
        match life {
            Some(l) => self.lives_ns = self.lives_ns.saturating_add(l),
            None => self.lives_unknown = true,
        }
    }

    /// Its threads' lives so far, when every one is known.
    fn lives(&self) -> Option<u64> {
        (!self.lives_unknown).then_some(self.lives_ns)
    }
}

impl Tracer {
    fn new(
        root: i32,
        report: Option<ExecOutcome>,
        sink: Batch,
        sampler: Arc<dyn TreeWatcher>,
        syscalls: Option<SyscallStops>,
        ledger: LedgerReads,
    ) -> Self {
        let mut t = Tracer {
            root,
            report,
            sink,
            sampler,
            procfs: ProcFs::default(),
            tgid_of: HashMap::new(),
            groups: HashMap::new(),
            started: HashMap::new(),
            early_stops: HashMap::new(),
            expected: HashSet::new(),
            ledger,
            parent: HashMap::new(),
            reaped: HashMap::new(),
            syscalls,
            unsent_since: None,
            alarm: Alarm::new(HOLD).ok(),
            stop_ns: 0,
            held: HashMap::new(),
            hold_max: hold_max(),
            changes: Changes::new(true),
        };
        t.tgid_of.insert(root, root);
        t.groups.insert(
            root,
            Group {
                threads: 1,
                ..Default::default()
            },
        );
        if t.ledger.wait4 {
            t.started.insert(root, 0);
        }
        t.sampler.root_started(root);
        t.hold(root);
        t
    }

    /// Opens process `tgid`'s /proc files for its later stops, if the budget of descriptors
    /// allows. A failure costs nothing but the saving: the stops open the files then.
    fn hold(&mut self, tgid: i32) {
        if self.held.len() < self.hold_max
            && !self.held.contains_key(&tgid)
            && let Ok(h) = self.procfs.hold(tgid, self.ledger.exit_stop)
        {
            self.held.insert(tgid, h);
        }
    }

    fn run(&mut self) -> Result<(), String> {
        loop {
            let mut status = 0;
            // SAFETY: a zeroed rusage is a valid output buffer.
            let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
            // Events are held until they are HOLD old, then sent at the next stop or when the
            // alarm interrupts the wait (EINTR, below).
            let mut pid = 0;
            if let Some(since) = self.unsent_since {
                match &mut self.alarm {
                    // A fork loop's stops come one at a time: sending each burst woke the
                    // session a few times per process.
                    Some(alarm) => {
                        if self.sink.sink().now_ns().saturating_sub(since) >= HOLD.as_nanos() as u64
                        {
                            self.flush();
                        } else {
                            alarm.arm();
                        }
                    }
                    // No alarm: send before blocking, unless a stop is already waiting.
                    None => {
                        // SAFETY: waiting for any traced task or child; `status` and `ru` are
                        // valid.
                        pid = unsafe {
                            libc::wait4(-1, &mut status, libc::__WALL | libc::WNOHANG, &mut ru)
                        };
                        if pid == 0 {
                            self.flush();
                        }
                    }
                }
            }
            if pid == 0 {
                // SAFETY: as above.
                pid = unsafe { libc::wait4(-1, &mut status, libc::__WALL, &mut ru) };
            }
            if pid < 0 {
                let err = std::io::Error::last_os_error();
                match err.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::ECHILD) => return Ok(()),
                    _ => return Err(format!("waitpid: {err}")),
                }
            }
            self.stop_ns = self.sink.sink().now_ns();
            self.handle(pid, decode(status), &ru);
        }
    }

    fn handle(&mut self, pid: i32, wait: Wait, ru: &libc::rusage) {
        match wait {
            Wait::Ended(t) => self.ended(pid, t, ru),
            Wait::Event(libc::PTRACE_EVENT_FORK | libc::PTRACE_EVENT_VFORK, _) => {
                self.forked(pid, true)
            }
            Wait::Event(libc::PTRACE_EVENT_CLONE, _) => self.forked(pid, false),
            Wait::Event(libc::PTRACE_EVENT_EXEC, _) => self.exec(pid),
            Wait::Event(libc::PTRACE_EVENT_EXIT, _) => self.exit_stop(pid),
            Wait::Event(libc::PTRACE_EVENT_STOP, sig) => self.stop(pid, sig),
            Wait::Event(_, _) => self.resume(pid, 0),
            Wait::Signal(SYSCALL_STOP) if self.syscalls.is_some() => {
                if let Some(s) = &mut self.syscalls {
                    s.stop(pid);
                }
                self.resume(pid, 0);
            }
            // Signal-delivery-stop: deliver the signal unchanged.
            Wait::Signal(sig) => self.resume(pid, sig),
            Wait::Other => {}
        }
    }

    /// A fork/vfork/clone event stop of `pid`. Only the new task's id needs the parent stopped
    /// (and, for a clone, whether it is a thread: the parent could exec and take its threads
    /// with it); the parent is restarted before the bookkeeping.
    fn forked(&mut self, pid: i32, is_process: bool) {
        let child = event_msg(pid).map(|m| m as i32);
        let parent_tgid = self.tgid_of.get(&pid).copied().unwrap_or(pid);
        let is_process = child.map(|c| is_process || !self.procfs.is_thread_of(parent_tgid, c));
        self.resume(pid, 0);
        let (Some(child), Some(is_process)) = (child, is_process) else {
            return;
        };
        let child_tgid = if is_process { child } else { parent_tgid };
        self.tgid_of.insert(child, child_tgid);
        self.groups.entry(child_tgid).or_default().threads += 1;
        if self.ledger.wait4 {
            self.started.insert(child, self.stop_ns);
        }
        self.emit(Event::Fork {
            parent_tgid,
            child_tid: child,
            child_tgid,
        });
        if is_process {
            self.changes.forked(parent_tgid);
            self.sampler.process_started(child, parent_tgid);
            if self.ledger.wait4 {
                self.parent.insert(child, parent_tgid);
            }
        }
        match self.early_stops.remove(&child) {
            Some(sig) => self.first_stop(child, sig),
            None => {
                self.expected.insert(child);
            }
        }
    }

    /// An exec event stop: argv is read (and observers of execs told) while the new image has
    /// not run an instruction, then the process is restarted before the bookkeeping.
    fn exec(&mut self, pid: i32) {
        let former = event_msg(pid).map(|m| m as i32).unwrap_or(pid);
        let argv = match self.held.get(&pid) {
            Some(h) => self.procfs.held(h).cmdline(),
            None => self.procfs.cmdline(pid),
        }
        .map(crate::source::from_kernel::argv)
        .ok();
        // Before the new image runs: its file is the one exec'd.
        self.changes.exec(pid, argv.as_deref());
        self.sampler.exec_stopped(pid);
        self.resume(pid, 0);
        if former != pid && self.tgid_of.remove(&former).is_some() {
            // The exec'ing thread took over the leader's id; the old leader is gone. The leader's
            // start now runs to the survivor's end: with the exec'ing thread's life up to the
            // exec, the two lives are whole.
            let before = self
                .started
                .remove(&former)
                .map(|s| self.stop_ns.saturating_sub(s));
            if let Some(g) = self.groups.get_mut(&pid) {
                g.threads = g.threads.saturating_sub(1).max(1);
                g.add_life(before);
            }
        }
        // The calls so far belong to the image being replaced.
        self.syscalls_of(pid, |s| s.exec(pid, former));
        self.emit(Event::Exec {
            tgid: pid,
            former_tid: former,
            argv,
        });
        self.sampler.exec_done(pid);
        if pid == self.root {
            // The exec succeeded, so the report pipe is closed: this read does not block.
            self.report.take();
        }
    }

    /// An exit event stop: what needs the memory still attached is read (the group's `VmHWM`
    /// and `/proc/PID/io` through its last thread, this thread's schedstat, and its PSS for a
    /// sampling round when the exiting memory could raise the peak), then the task is let go
    /// before the round reads the other processes and the events are made.
    fn exit_stop(&mut self, tid: i32) {
        let tgid = self.tgid_of.get(&tid).copied().unwrap_or(tid);
        let g = self.groups.entry(tgid).or_default();
        g.exiting += 1;
        let last = g.exiting >= g.threads;
        // Through the files held since the process started when this is its main thread;
        // else through this thread's /proc entry (the leader may already be a zombie without
        // an mm).
        let held = if tid == tgid {
            self.held.get(&tgid)
        } else {
            None
        };
        // This thread's CPU and run-queue wait, exact, while it still exists.
        let sched = match (self.ledger.exit_stop, held) {
            (false, _) => None,
            (true, Some(h)) => self.procfs.held(h).schedstat().ok().flatten(),
            (true, None) => self.procfs.schedstat(tid).ok().flatten(),
        };
        // Last thread of the group to reach its exit: read the group's figures.
        let group = last.then(|| {
            let (status, io) = match held {
                Some(h) => (
                    self.procfs.held(h).status().ok(),
                    self.procfs.held(h).io().ok().flatten(),
                ),
                None => (
                    self.procfs.status(tid).ok(),
                    self.procfs.io(tid).ok().flatten(),
                ),
            };
            let io = io.map(crate::source::from_kernel::io);
            (
                status.and_then(|s| s.vm_hwm_bytes),
                io,
                status.and_then(|s| s.vm_rss_bytes),
                status.and_then(|s| s.rss_shared_bytes),
            )
        });
        let sampler = Arc::clone(&self.sampler);
        // Memory released before the exit (a large block freed, then `exit`) is gone from the
        // counters the exit stop reads, but not from the kernel's high-water mark: growth
        // beyond the last tick up to it may have made the tree's peak (an upper bound).
        if let Some((Some(hwm), _, Some(rss), _)) = group
            && (hwm > rss || crate::source::sample::exit_counters_lag())
        {
            sampler.exit_peak(tgid, self.sink.sink().now_ns(), hwm);
        }
        if let Some((_, _, Some(rss), shared)) = group {
            sampler.at_exit(tgid, rss, shared);
        }
        self.resume(tid, 0);
        self.syscalls_of(tgid, |s| s.thread_exit(tid));
        let mut figures = Figures {
            cpu_ns: sched.map(|s| s.0),
            run_queue_ns: sched.map(|s| s.1),
            ..Default::default()
        };
        if let Some((peak_rss_bytes, io, _, _)) = group {
            self.emit(Event::Accounts {
                tgid,
                peak_rss_bytes,
                io,
            });
            figures.peak_rss_bytes = peak_rss_bytes;
            if let Some(io) = io {
                figures.read_bytes = Some(io.read_bytes);
                figures.write_bytes = Some(io.write_bytes);
                figures.read_char_bytes = Some(io.rchar_bytes);
                figures.write_char_bytes = Some(io.wchar_bytes);
            }
        }
        if self.ledger.exit_stop && figures != Figures::default() {
            self.emit(Event::Accounting {
                event: AccountEvent::Ledger {
                    tgid,
                    start_ns: None,
                    source: LedgerSource::ExitStop,
                    figures: Box::new(figures),
                },
            });
        }
    }

    /// The process's own rusage: wait4 reports it with that of every child it reaped
    /// (`RUSAGE_BOTH` semantics), so the children's, recorded at their ends, are taken off.
    /// With it, its threads' lives up to the waits that reported their ends (`lives_ns`): the
    /// task time over the span the CPU covers, the exit's teardown included.
    fn own_rusage(&mut self, tgid: i32, ru: &libc::rusage, t: Termination, lives_ns: Option<u64>) {
        let tv = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000_000 + tv.tv_usec as u64 * 1000;
        let both = Figures {
            user_ns: Some(tv(ru.ru_utime)),
            sys_ns: Some(tv(ru.ru_stime)),
            minor_faults: Some(ru.ru_minflt as u64),
            major_faults: Some(ru.ru_majflt as u64),
            voluntary_switches: Some(ru.ru_nvcsw as u64),
            involuntary_switches: Some(ru.ru_nivcsw as u64),
            ..Default::default()
        };
        let children = self.reaped.remove(&tgid).unwrap_or_default();
        let less = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_sub(b.unwrap_or(0)));
        let own = Figures {
            user_ns: less(both.user_ns, children.user_ns),
            sys_ns: less(both.sys_ns, children.sys_ns),
            minor_faults: less(both.minor_faults, children.minor_faults),
            major_faults: less(both.major_faults, children.major_faults),
            voluntary_switches: less(both.voluntary_switches, children.voluntary_switches),
            involuntary_switches: less(both.involuntary_switches, children.involuntary_switches),
            task_time_ns: lives_ns,
            exit_status: Some(match t {
                Termination::Exited(c) => c << 8,
                Termination::Signaled {
                    signal,
                    core_dumped,
                } => signal | if core_dumped { 0x80 } else { 0 },
            }),
            ..Default::default()
        };
        // Its parent reaps it (and adds `both` to its own children's usage) unless the parent
        // is gone; then ste, the subreaper, does.
        if let Some(p) = self.parent.remove(&tgid)
            && self.groups.contains_key(&p)
        {
            self.reaped.entry(p).or_default().fold(&both);
        }
        self.emit(Event::Accounting {
            event: AccountEvent::Ledger {
                tgid,
                start_ns: None,
                source: LedgerSource::Wait4,
                figures: Box::new(own),
            },
        });
    }

    fn stop(&mut self, pid: i32, sig: i32) {
        if !self.tgid_of.contains_key(&pid) {
            // A new task stopped before its parent's fork event was seen: hold it until then,
            // so its events cannot come before its birth.
            self.early_stops.insert(pid, sig);
            return;
        }
        if self.expected.remove(&pid) {
            self.first_stop(pid, sig);
            return;
        }
        if is_stop_signal(sig) {
            // Group-stop: stay stopped, but let the tracer hear of SIGCONT.
            listen(pid);
        } else {
            self.resume(pid, 0);
        }
    }

    /// A new task's first stop. A new process's files are opened once it runs again (off its
    /// path: it is busy starting, often towards an exec).
    fn first_stop(&mut self, pid: i32, sig: i32) {
        if is_stop_signal(sig) {
            listen(pid)
        } else {
            self.resume(pid, 0)
        }
        if self.tgid_of.get(&pid) == Some(&pid) {
            self.hold(pid);
        }
    }

    fn ended(&mut self, tid: i32, t: Termination, ru: &libc::rusage) {
        let Some(tgid) = self.tgid_of.remove(&tid) else {
            return;
        };
        self.expected.remove(&tid);
        let life = self
            .started
            .remove(&tid)
            .map(|s| self.stop_ns.saturating_sub(s));
        let (remaining, lives) = match self.groups.get_mut(&tgid) {
            Some(g) => {
                g.threads = g.threads.saturating_sub(1);
                g.exiting = g.exiting.saturating_sub(1);
                g.add_life(life);
                (g.threads, g.lives())
            }
            None => (0, None),
        };
        let status = (tid == tgid).then_some(t);
        if self.ledger.wait4 && tid == tgid && remaining == 0 {
            self.own_rusage(tgid, ru, t, lives);
        }
        self.emit(Event::Exit { tid, tgid, status });
        if remaining == 0 {
            self.changes.ended(tgid);
            self.groups.remove(&tgid);
            self.held.remove(&tgid);
            self.sampler.process_ended(tgid);
        }
        if tid == self.root {
            if let Some(report) = self.report.take()
                && let Err(error) = report()
            {
                self.emit(Event::LaunchFailed { error });
            }
            self.emit(Event::RootExit { status: t });
        }
    }

    /// Emits an event stamped with the time its stop (or end) was reported: the bookkeeping
    /// after the tracee is restarted does not delay it, and it comes before anything an
    /// observer stamped at the stop (the malloc source's exec check).
    fn emit(&mut self, event: Event) {
        self.sink.emit_at(self.stop_ns, event);
        self.unsent_since.get_or_insert(self.stop_ns);
    }

    /// Sends the events held, and stops the alarm until the next one is held.
    fn flush(&mut self) {
        self.sink.flush();
        self.unsent_since = None;
        if let Some(alarm) = &mut self.alarm {
            alarm.disarm();
        }
    }

    /// Restarts a stopped tracee, delivering `sig` (0: none), to its next syscall stop when
    /// counting system calls. ESRCH (killed meanwhile) is fine: waitpid reports its end.
    fn resume(&self, pid: i32, sig: i32) {
        let request = if self.syscalls.is_some() {
            libc::PTRACE_SYSCALL
        } else {
            libc::PTRACE_CONT
        };
        // SAFETY: PTRACE_CONT / PTRACE_SYSCALL with integer arguments.
        unsafe { libc::ptrace(request, pid, 0, sig as libc::c_long) };
    }

    /// Per-process mode: emits the calls `take` returns as `tgid`'s.
    fn syscalls_of(&mut self, tgid: i32, take: impl FnOnce(&mut SyscallStops) -> Vec<CallCount>) {
        let Some(s) = &mut self.syscalls else { return };
        let calls = take(s);
        if !calls.is_empty() {
            self.emit(Event::SyscallsOf { tgid, calls });
        }
    }
}

fn is_stop_signal(sig: i32) -> bool {
    matches!(
        sig,
        libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
    )
}

fn event_msg(pid: i32) -> Option<libc::c_ulong> {
    let mut msg: libc::c_ulong = 0;
    // SAFETY: PTRACE_GETEVENTMSG writes one unsigned long to `msg`.
    let rc = unsafe {
        libc::ptrace(
            libc::PTRACE_GETEVENTMSG,
            pid,
            0,
            &mut msg as *mut libc::c_ulong,
        )
    };
    (rc == 0).then_some(msg)
}

/// How many processes may hold their /proc files open at once (4 descriptors each): a quarter
/// of the descriptors ste may open, so the rest of ste (the sampler's reads, outputs) never
/// runs short.
fn hold_max() -> usize {
    use nix::sys::resource::{Resource, getrlimit};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, _)) => (soft.min(1 << 20) as usize / 4) / 4,
        Err(_) => 0,
    }
}

fn listen(pid: i32) {
    // SAFETY: PTRACE_LISTEN with integer arguments.
    unsafe { libc::ptrace(libc::PTRACE_LISTEN, pid, 0, 0) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_statuses() {
        assert_eq!(decode(0), Wait::Ended(Termination::Exited(0)));
        assert_eq!(decode(0x0100), Wait::Ended(Termination::Exited(1)));
        // SIGTRAP | PTRACE_EVENT_FORK << 8, as `status >> 8` reads it.
        assert_eq!(
            decode(0x7f | (libc::SIGTRAP << 8) | (libc::PTRACE_EVENT_FORK << 16)),
            Wait::Event(libc::PTRACE_EVENT_FORK, libc::SIGTRAP)
        );
        // Group-stop under PTRACE_SEIZE.
        assert_eq!(
            decode(0x7f | (libc::SIGSTOP << 8) | (libc::PTRACE_EVENT_STOP << 16)),
            Wait::Event(libc::PTRACE_EVENT_STOP, libc::SIGSTOP)
        );
        // A real-time signal delivery stop must decode (nix's WaitStatus would error).
        assert_eq!(decode(0x7f | (40 << 8)), Wait::Signal(40));
    }
}
