//! The netlink tracker: the proc connector's fork/exec/exit events, filtered to the tree.
//!
//! Owns a reader thread that follows the connector and keeps the set of tasks in the tree; the
//! shared reaper (`track::reaper`) reaps ste's children and ends the run when none are left.
//! The kernel queues a task's exit event before the task becomes a zombie, so when `waitpid`
//! reports no children every exit is already queued.
//!
//! Two sockets, where the kernel filters events (6.6+): only an exec needs the reader at once
//! (its argv must be read from /proc before the process execs again or ends), so exec events
//! come on a socket of their own, which the reader waits on, and fork and exit events on
//! another, which never wakes it: it is drained every `HOLD_NS` (more often while it fills
//! fast, see `next_drain_period`), before an exec is handled
//! (the exec'ing process's fork is there: the kernel sends a child's fork event before the
//! child runs), and at the end. `cn_proc::Merged` hands the events of
//! both back in the kernel's order. A fork or an exit thus reaches the session up to
//! `HOLD_NS` later than an exec, as every event of the batching tree may anyway. Without the
//! filter (older kernels, or `STE_NETLINK_NO_FILTER` set, for tests) one socket gets every
//! event and wakes the reader for each.
//!
//! Losses are never silent: an overrun (`ENOBUFS`) of either socket is counted and followed
//! by a rescan of /proc that adds the processes and threads the lost events would have
//! announced and ends those that are gone. Its size is known only without the filter, from the
//! connector's per-CPU sequence numbers: the kernel numbers each CPU's events before it filters
//! them, so a filtered socket's gaps are mostly events it was never sent, and no gap measures
//! an overrun: the kernel reports `ENOBUFS` ahead of the datagrams queued before the drop, and
//! goes on dropping, without a second report, until the queue is empty. argv is read from
//! /proc as soon as the exec event is handled; a process already gone by then is recorded with
//! an unknown argv, which the report counts. The process may also have exec'd again before
//! the read: `track::argv_check` decides from the process's next events and where it is; an
//! argv that may be a later image's is not shown, and counted. The reader never waits for that
//! verdict: every exec read is sent as pending and its argv judged on the way (`Pending`), at
//! the process's next exec or end, or at a look that finds it asleep outside an exec, while
//! the reader reads the next execs' on arrival.

use crate::bus::event::Event;
use crate::bus::launched::Launched;
use crate::bus::sink::{Msg, Sink};
use crate::bus::tree::TreeWatcher;
use crate::kernel::cn_proc::{
    Connector, Events, Merged, Next, ProcEvent, ProcEventKind, Received, Side, kernel_has_filter,
    seq_gap,
};
use crate::model::{Source, Termination};
use crate::source::track::argv_check::{self, Later, Probe, Verdict};
use crate::source::track::reaper::{self, Done};
use crate::source::track::tree::Tree;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Receive buffer asked for: 4 MiB holds ~5,000 queued events (`EVENT_BYTES` each).
const RCVBUF_BYTES: usize = 4 << 20;

/// Set to a size in bytes, the sockets ask for that buffer instead of [`RCVBUF_BYTES`]: tests
/// use a small one to make overruns happen.
const RCVBUF_ENV: &str = "STE_NETLINK_RCVBUF";

/// The receive buffer each socket asks for.
fn rcvbuf_bytes() -> usize {
    std::env::var(RCVBUF_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(RCVBUF_BYTES)
}

/// What one queued event takes of a socket's receive buffer.
const EVENT_BYTES: usize = 832;

/// The shortest period between drains of the fork-and-exit socket (see `next_drain_period`).
const MIN_DRAIN_PERIOD: Duration = Duration::from_millis(1);

/// How long events may be held before they go to the session (20 ms; see `Tree::batch`): the live
/// `EXEC:` lines lag by at most this, and it is far below anything the session does with
/// events on a clock (naming the descendants it waits for after 1 s, matching taskstats
/// records within 2 s).
const HOLD_NS: u64 = 20_000_000;

/// How often the pending execs are looked at, all together: a look is a read of
/// `/proc/PID/syscall` each and, when nothing else woke the reader meanwhile, a wake-up of it
/// beside the workload. A short process is decided at its end, a compiler mostly too; the
/// looks catch one that goes to sleep first (a shell waiting for its children). Each pending
/// exec's own looks, from 1.6 ms on and doubling, woke the reader ~35 % more often on a small
/// build (bench/README.md).
const PENDING_LOOK_EVERY: Duration = Duration::from_millis(20);

/// The reader thread's scheduler slice: the shortest the kernel allows, so that it preempts
/// ordinary work as soon as an exec wakes it (see `kernel::calls::set_thread_slice`).
const READER_SLICE: Duration = Duration::from_micros(100);

/// Subscribes, checks that events really arrive, and starts the reader and waiter threads.
pub fn start(
    child: &mut Launched,
    sink: Sink,
    sampler: Arc<dyn TreeWatcher>,
) -> Result<(), String> {
    let root = child.pid;
    let asked = rcvbuf_bytes();
    if let Some(why) = refused_here() {
        return Err(why);
    }
    let (mut waited, mut drained) =
        open(asked).map_err(|e| format!("cannot subscribe to the proc connector: {e}"))?;
    // Fork events come on the fork-and-exit socket when there is one.
    match &mut drained {
        Some(d) => probe(d)?,
        None => probe(&mut waited)?,
    }
    let granted = drained
        .iter()
        .map(|d| d.rcvbuf_bytes)
        .fold(waited.rcvbuf_bytes, usize::min);
    if granted < asked {
        sink.emit(Event::Note {
            text: format!(
                "netlink receive buffer is {} (asked for {}; raising it needs CAP_NET_ADMIN or net.core.rmem_max): fork storms may overrun it",
                crate::units::bytes_human(granted as u64),
                crate::units::bytes_human(asked as u64)
            ),
        });
    }
    declare_sources(&sink);
    // The proc connector reports an exit after the memory is gone: peaks come from the rounds.
    sampler.read_peaks();
    let done = Done::new().map_err(|e| format!("eventfd: {e}"))?;
    let report = child.take_exec_outcome();
    let reader = Reader::new(root, (waited, drained), sink.clone(), sampler);
    let reader_done = Arc::clone(&done);
    std::thread::Builder::new()
        .name("ste-netlink".into())
        .spawn(move || {
            // argv is read from /proc when the exec event arrives, so every microsecond this
            // thread waits for a CPU is a chance for a short process to be gone.
            super::set_priority(-10);
            // A nice value alone does not let it preempt a running thread when an exec wakes
            // it: it waits for that thread's slice to end, long enough for a short process to
            // be gone. With fork and exit events on their
            // own socket nothing wakes it earlier to pay that wait before the exec. Ignored
            // before Linux 6.12.
            let _ = crate::kernel::calls::set_thread_slice(READER_SLICE);
            crate::launch::privilege::limit_or_say(
                crate::launch::privilege::Role::Tracker { bpf_maps: false },
                &reader.tree.sink,
            );
            reader.run(&reader_done)
        })
        .map_err(|e| format!("cannot start the netlink reader: {e}"))?;
    reaper::spawn(root, report, sink, done)?;
    Ok(())
}

/// The period until the next timed drain of the fork-and-exit socket, after a drain that took
/// `taken` datagrams from a socket that holds `capacity`: halved (down to `MIN_DRAIN_PERIOD`)
/// when that filled a quarter of it, so a fork storm without execs (nothing else drains the
/// socket then) does not overrun a small buffer (`net.core.rmem_max` for an unprivileged
/// ste); doubled back up to `HOLD_NS` when it filled less than a sixteenth.
fn next_drain_period(period: Duration, taken: usize, capacity: usize) -> Duration {
    if taken >= capacity / 4 {
        (period / 2).max(MIN_DRAIN_PERIOD)
    } else if taken < capacity / 16 {
        (period * 2).min(Duration::from_nanos(HOLD_NS))
    } else {
        period
    }
}

/// Why the proc connector would refuse this thread, when it would: before Linux 6.6 it takes
/// subscribers with CAP_NET_ADMIN only (EPERM), so the tracker says so rather than try.
pub fn refused_here() -> Option<String> {
    use crate::kernel::caps;
    let version = crate::kernel::release::Version::running();
    let privileged = caps::effective().is_none_or(|m| caps::has(m, caps::CAP_NET_ADMIN));
    (!privileged && !version.cn_proc_filter_and_unprivileged()).then(|| {
        format!(
            "the proc connector takes subscribers without CAP_NET_ADMIN only from Linux 6.6 (this is {version}): run ste as root, or use the ptrace tracker"
        )
    })
}

/// Set (to anything), the tracker subscribes as on a kernel without the event filter (before
/// 6.6): one socket, every event. Tests use it to keep that path tested.
const NO_FILTER_ENV: &str = "STE_NETLINK_NO_FILTER";

/// The sockets: with the kernel's filter, one for exec events (waited on) and one for fork and
/// exit events (drained); without it, one that gets every event.
fn open(rcvbuf: usize) -> std::io::Result<(Connector, Option<Connector>)> {
    let release = nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_default();
    if !kernel_has_filter(&release) || std::env::var_os(NO_FILTER_ENV).is_some() {
        return Ok((Connector::open_for(rcvbuf, None)?, None));
    }
    let waited = Connector::open_for(rcvbuf, Some(Events::EXEC))?;
    let drained = Connector::open_for(rcvbuf, Some(Events::FORK_EXIT))?;
    Ok((waited, Some(drained)))
}

fn declare_sources(sink: &Sink) {
    for (figure, from) in [
        (
            "processes",
            "proc connector fork events, filtered to the tree",
        ),
        (
            "threads",
            "proc connector fork events, filtered to the tree",
        ),
        (
            "execs",
            "proc connector exec events, argv read from /proc/PID/cmdline on arrival",
        ),
    ] {
        sink.emit(Event::Source {
            figure: figure.into(),
            source: Source::exact(from),
        });
    }
}

/// Creating a thread makes the kernel send a fork event; if nothing arrives, this socket gets
/// nothing (an unprivileged listener only hears events while a privileged one subscribed).
/// Any event but an acknowledgement, or an overrun, proves that events flow: on a busy machine
/// with a small receive buffer, other processes' events can overrun the socket and push the
/// probe's own out, so waiting for that one alone would call a working connector silent.
fn probe(conn: &mut Connector) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline {
        let _ = std::thread::Builder::new()
            .name("ste-probe".into())
            .spawn(|| {})
            .map(|h| h.join());
        match conn.recv(Duration::from_millis(100), None) {
            // The subscription's answer is no event: it comes to listeners the kernel then
            // sends nothing (an unprivileged one, refused).
            Ok(Received::Event(ProcEvent {
                kind: ProcEventKind::Ack { .. },
                ..
            })) => {}
            Ok(Received::Event(_)) | Ok(Received::Overrun) => return Ok(()),
            Ok(Received::Timeout) | Ok(Received::Ignored) => {}
            Err(e) => return Err(format!("proc connector: {e}")),
        }
    }
    Err("the proc connector delivered no events to ste (unprivileged listeners receive them only while a privileged one is subscribed)".into())
}

struct Reader {
    root: i32,
    /// The socket the reader waits on: exec events, or every event without the kernel filter.
    waited: Connector,
    /// With the filter, fork and exit events: drained every `drain_period` and before an exec
    /// is handled, never waited on alone.
    drained: Option<Connector>,
    /// When `drained` is next due, and how long after a drain.
    drain_due: Instant,
    drain_period: Duration,
    /// Whether the kernel filters events (then a sequence gap is not a loss).
    filtered: bool,
    tree: Tree,
    /// Without the filter, the last sequence number seen per CPU (the kernel numbers each
    /// CPU's events, so a gap is a loss).
    last_seq: HashMap<(Side, u32), u32>,
    /// Processes whose main thread ended while other threads went on (`pthread_exit`): the
    /// leader's exit is held until the last thread ends, which carries the process's status.
    deferred_leaders: HashSet<i32>,
    /// Datagrams taken and not yet handled, in the kernel's order: only events and overruns.
    merged: Merged,
    /// Execs whose argv is read and not yet judged, at most one a process.
    pending: Vec<Pending>,
    /// Names each pending exec, so a look's probe is applied to the exec it was taken for.
    pending_ids: u64,
    /// When the pending execs are next looked at.
    look_due: Instant,
}

/// An exec whose argv was read and is not yet known to be its image's. Its `ExecPending` is
/// sent at once, its `ExecArgv` when the rule decides (`argv_check`): at the process's next
/// exec or end, at an overrun, or at a look that finds it asleep outside an exec. Every event
/// is handled in the kernel's order, so the verdict comes before any later event of the
/// process, as the recorder needs. The reader once held its queues for a short while after
/// each exec for a verdict there and then: a timed wait per exec, which slowed a fork loop
/// and decided nothing the process's end did not (bench/README.md).
struct Pending {
    id: u64,
    tgid: i32,
    read_start: u64,
    argv: Vec<crate::model::Arg>,
}

impl Reader {
    fn new(
        root: i32,
        (waited, drained): (Connector, Option<Connector>),
        sink: Sink,
        sampler: Arc<dyn TreeWatcher>,
    ) -> Self {
        let mut tree = Tree::new(root, sink, sampler);
        tree.batch();
        Reader {
            root,
            filtered: waited.filtered,
            merged: Merged::new(drained.is_some()),
            waited,
            drained,
            drain_due: Instant::now(),
            drain_period: Duration::from_nanos(HOLD_NS),
            tree,
            last_seq: HashMap::new(),
            deferred_leaders: HashSet::new(),
            pending: Vec::new(),
            pending_ids: 0,
            look_due: Instant::now(),
        }
    }

    fn run(mut self, done: &Done) {
        let mut error = None;
        let end_ns = loop {
            if let Some(t) = done.get() {
                // Every exit was queued before its reaping: drain what is left.
                self.take_all();
                let _ = self.handle_queued(None);
                // A pending exec left is of a process that outlived the wait (ste stopped
                // waiting) or whose end was lost unreported: a last look decides, or doubts.
                let _ = self.look_at_pending(true);
                self.doubt_pending();
                self.final_resync();
                break t;
            }
            if self.drained.is_some()
                && Instant::now() >= self.drain_due
                && let Err(e) = self.drain(Side::Drained)
            {
                error = Some(format!("proc connector: {e}"));
                break self.tree.sink.now_ns();
            }
            if let Err(e) = self.handle_queued(None) {
                error = Some(format!("proc connector: {e}"));
                break self.tree.sink.now_ns();
            }
            if let Err(e) = self.look_at_pending(false) {
                error = Some(format!("proc connector: {e}"));
                break self.tree.sink.now_ns();
            }
            // Flushed here, not only on a timeout: under a steady stream the receive never
            // times out.
            let held_ns = self
                .tree
                .unsent_since()
                .map(|t0| self.tree.sink.now_ns().saturating_sub(t0));
            if held_ns.is_some_and(|h| h >= HOLD_NS) {
                self.tree.flush();
            }
            let mut timeout = match held_ns {
                Some(h) if h < HOLD_NS => Duration::from_nanos(HOLD_NS - h),
                _ => Duration::from_secs(1),
            };
            if self.drained.is_some() {
                timeout = timeout.min(self.drain_due.saturating_duration_since(Instant::now()));
            }
            if !self.pending.is_empty() {
                timeout = timeout.min(self.look_due.saturating_duration_since(Instant::now()));
            }
            match self.waited.recv(timeout, Some(&done.wake)) {
                Ok(r) => self.merged.push(Side::Waited, r),
                Err(e) => {
                    error = Some(format!("proc connector: {e}"));
                    break self.tree.sink.now_ns();
                }
            }
        };
        self.tree.finish();
        self.tree.flush();
        self.tree.sink.send(Msg::TrackerDone {
            t_ns: end_ns,
            error,
        });
    }

    /// Handles every datagram taken, in the kernel's order, draining a socket where that
    /// order needs it (see `Merged`). An overrun met is recovered from, or, while one is
    /// (`overruns`), counted. A socket's error is returned once the rest is handled.
    fn handle_queued(&mut self, mut overruns: Option<&mut u64>) -> std::io::Result<()> {
        let mut failed = Ok(());
        loop {
            match self.merged.pop() {
                Next::Ready(Received::Event(ev), side) => self.handle(ev, side),
                Next::Ready(Received::Overrun, _) => match overruns.as_deref_mut() {
                    Some(n) => *n += 1,
                    None => self.overrun(),
                },
                Next::Ready(_, _) => {}
                Next::Drain(side) => {
                    if let Err(e) = self.drain(side) {
                        failed = failed.and(Err(e));
                    }
                }
                Next::Empty => return failed,
            }
        }
    }

    /// Takes every datagram `side` holds now into `merged`.
    fn drain(&mut self, side: Side) -> std::io::Result<()> {
        let conn = match side {
            Side::Waited => &mut self.waited,
            Side::Drained => match &mut self.drained {
                Some(c) => c,
                None => return Ok(()),
            },
        };
        let mut taken = 0;
        let result = loop {
            match conn.recv_now() {
                Ok(Received::Timeout) => break Ok(()),
                Ok(r) => {
                    taken += 1;
                    self.merged.push(side, r);
                }
                Err(e) => break Err(e),
            }
        };
        let capacity = conn.rcvbuf_bytes / EVENT_BYTES;
        // Counted even after an error, so `merged` never asks for this drain again.
        self.merged.drained(side);
        if side == Side::Drained {
            self.drain_period = next_drain_period(self.drain_period, taken, capacity);
            self.drain_due = Instant::now() + self.drain_period;
        }
        result
    }

    /// Takes every datagram both sockets hold now: the fork-and-exit socket first, so that
    /// the exec before any exit taken is taken too (it was queued before that exit was sent).
    fn take_all(&mut self) {
        let _ = self.drain(Side::Drained);
        let _ = self.drain(Side::Waited);
    }

    fn handle(&mut self, ev: ProcEvent, side: Side) {
        let t = self.tree.sink.clock().from_monotonic(ev.timestamp_ns);
        // Without the kernel filter, every gap is a loss; with it, gaps are mostly the events
        // filtered out (or sent to the other socket), and say nothing of an overrun's size.
        if !self.filtered
            && let Some(last) = self.last_seq.insert((side, ev.cpu), ev.seq)
        {
            let gap = seq_gap(last, ev.seq);
            if gap > 0 {
                self.tree.emit_at(
                    t,
                    Event::Lost {
                        overruns: 0,
                        events_at_most: Some(u64::from(gap)),
                        found_by_resync: 0,
                        exits_missed: 0,
                        argv_doubtful: 0,
                    },
                );
            }
        }
        match ev.kind {
            ProcEventKind::Fork {
                parent_tgid,
                child_pid,
                child_tgid,
                ..
            } => {
                if child_pid != child_tgid {
                    self.tree.add_thread(t, child_tgid, child_pid);
                } else if self.tree.has_process(parent_tgid)
                    || (parent_tgid == self.tree.ste_pid() && child_pid != self.root)
                {
                    self.tree.add_process(t, parent_tgid, child_pid);
                }
            }
            ProcEventKind::Exec { tgid, .. } => {
                // The exec'ing thread is the leader now; a deferred leader exit was its old one.
                self.deferred_leaders.remove(&tgid);
                // The image before, if its argv is still pending, may be the one read.
                self.settle(t, tgid, Later::Exec);
                if self.tree.has_process(tgid) {
                    // Read first: the process may end any moment.
                    let read = self.read_argv(tgid);
                    let former = self.tree.exec(tgid).flatten();
                    // The exec wakes this thread alone: the round is asked for at once.
                    self.tree.handled();
                    let former_tid = former.unwrap_or(tgid);
                    match read {
                        // Gone before the read: unread, counted.
                        (_, None) => self.tree.emit_at(
                            t,
                            Event::Exec {
                                tgid,
                                former_tid,
                                argv: None,
                            },
                        ),
                        // Judged on the way, never by holding the queues (see `Pending`).
                        (read_start, Some(argv)) => {
                            self.tree
                                .emit_at(t, Event::ExecPending { tgid, former_tid });
                            self.defer(tgid, read_start, argv);
                        }
                    }
                }
            }
            ProcEventKind::Exit { pid, exit_code, .. } => {
                let Some(tgid) = self.tree.owner(pid) else {
                    return;
                };
                let status = Termination::from_wait_status(exit_code as i32);
                // As wait() reports it, a process ends with its last thread: after an
                // exit_group every thread carries the group's code, and after a main thread's
                // pthread_exit the last thread's code is the process's.
                let deferred = self.deferred_leaders.contains(&tgid);
                let others = self.tree.threads(tgid) - 1 - usize::from(deferred && pid != tgid);
                if pid == tgid {
                    let ts_ns = ev.timestamp_ns;
                    self.settle(
                        t,
                        tgid,
                        Later::Exit {
                            ts_ns,
                            last: others == 0,
                        },
                    );
                }
                if pid == tgid && others > 0 {
                    self.deferred_leaders.insert(tgid);
                } else if pid != tgid && others == 0 && self.deferred_leaders.remove(&tgid) {
                    self.tree.exit(t, pid, None);
                    self.tree.exit(t, tgid, status);
                } else {
                    self.tree
                        .exit(t, pid, if pid == tgid { status } else { None });
                }
            }
            ProcEventKind::Ack { .. } | ProcEventKind::Other(_) => {}
        }
    }

    /// Reads the argv of `tgid`'s image just reported: when the read began, and what it read
    /// (`None`: the process was gone, or had no argv).
    fn read_argv(&mut self, tgid: i32) -> (u64, Option<Vec<crate::model::Arg>>) {
        let read_start = crate::bus::sink::monotonic_ns();
        let argv = match self.tree.procfs.cmdline_whole(tgid, 0) {
            Ok(bytes) if !bytes.is_empty() => Some(crate::source::from_kernel::argv(
                crate::kernel::proc::parse_cmdline(bytes),
            )),
            _ => None,
        };
        (read_start, argv)
    }

    /// An event of process `tgid` that bears on a pending argv (`argv_check::Later`), handled
    /// at `t`: decides it.
    fn settle(&mut self, t: u64, tgid: i32, later: Later) {
        if let Some(i) = self.pending.iter().position(|p| p.tgid == tgid) {
            let p = self.pending.swap_remove(i);
            let keep =
                argv_check::verdict(p.read_start, Probe::Unsure, Some(later)) == Verdict::Keep;
            self.conclude(t, p, keep);
        }
    }

    /// Keeps the argv read of `tgid`'s exec, sent as pending, for a later verdict.
    fn defer(&mut self, tgid: i32, read_start: u64, argv: Vec<crate::model::Arg>) {
        if self.pending.is_empty() {
            self.look_due = Instant::now() + PENDING_LOOK_EVERY;
        }
        self.pending_ids += 1;
        self.pending.push(Pending {
            id: self.pending_ids,
            tgid,
            read_start,
            argv,
        });
    }

    /// Sends a pending exec's verdict, stamped `t`.
    fn conclude(&mut self, t: u64, p: Pending, keep: bool) {
        let tgid = p.tgid;
        let argv = keep.then_some(p.argv);
        self.tree.emit_at(t, Event::ExecArgv { tgid, argv });
        if !keep {
            self.tree.emit_at(t, argv_check::doubt());
        }
    }

    /// Every pending argv is a doubt (events were lost, or the run is over).
    fn doubt_pending(&mut self) {
        let t = self.tree.sink.now_ns();
        for p in std::mem::take(&mut self.pending) {
            self.conclude(t, p, false);
        }
    }

    /// Looks at the processes whose exec is pending, when their look is due (`now`: at once),
    /// then handles every event queued: an exec or end of one of them decides it on the way;
    /// the others found asleep outside an exec are kept (see `argv_check`).
    fn look_at_pending(&mut self, now: bool) -> std::io::Result<()> {
        if self.pending.is_empty() || !(now || Instant::now() >= self.look_due) {
            return Ok(());
        }
        let procfs = &mut self.tree.procfs;
        let probes: Vec<(u64, Probe)> = self
            .pending
            .iter()
            .map(|p| (p.id, Probe::of(procfs.syscall(p.tgid).ok().flatten())))
            .collect();
        // Where the processes are first, then the queues.
        self.take_all();
        let handled = self.handle_queued(None);
        let t = self.tree.sink.now_ns();
        for (id, probe) in probes {
            let Some(i) = self.pending.iter().position(|p| p.id == id) else {
                continue; // decided by an event on the way
            };
            if argv_check::verdict(self.pending[i].read_start, probe, None) == Verdict::Keep {
                let p = self.pending.swap_remove(i);
                self.conclude(t, p, true);
            }
        }
        self.look_due = Instant::now() + PENDING_LOOK_EVERY;
        handled
    }

    /// The tree has ended: a process it still holds that /proc no longer shows ended unseen,
    /// its exit lost without the socket saying so (the proc connector can drop events for a
    /// listener without an `ENOBUFS`, e.g. with the machine flooded by other forks): end it,
    /// and count it as lost rather than leave it running forever.
    fn final_resync(&mut self) {
        if !self.tree.is_empty() {
            // Of unknown size: the kernel said nothing of it.
            let zombies = self.tree.recover(0, None);
            self.deferred_leaders.extend(zombies);
        }
    }

    /// The kernel dropped events: handle what both sockets hold (counting any further
    /// overrun), then rebuild the tree from /proc. As the ebpf reader does, the
    /// processes /proc shows and ste does not know are added, the events that came while /proc
    /// was read are handled, and only then are the tasks /proc no longer showed ended, those
    /// whose exit is still missing (an exit event on its way is not a missed one).
    fn overrun(&mut self) {
        // A lost event may be a later exec of a process whose argv is pending.
        self.doubt_pending();
        let mut overruns = 1;
        self.take_all();
        let _ = self.handle_queued(Some(&mut overruns));
        let scan = self.tree.scan();
        let found = self.tree.add_found(&scan);
        self.take_all();
        let _ = self.handle_queued(Some(&mut overruns));
        let (missed, zombies) = self.tree.end_gone(&scan);
        // A socket that gets every event sizes the loss by its sequence gaps, reported as they
        // show; a filtered socket's gaps are mostly events never sent to it, so its overruns
        // are of unknown size.
        let size = if self.filtered { None } else { Some(0) };
        self.tree.report_loss(overruns, size, found, missed);
        self.deferred_leaders.extend(zombies);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drain_period_follows_how_fast_the_socket_fills() {
        let hold = Duration::from_nanos(HOLD_NS);
        let ms = Duration::from_millis;
        // 4 MiB (5,041 events): a fork loop's few events a drain keep the full period.
        assert_eq!(next_drain_period(hold, 40, 5_041), hold);
        // The default rmem_max (208 KiB, 256 events): a storm halves it down to 1 ms...
        let mut p = hold;
        for want in [
            ms(10),
            ms(5),
            Duration::from_micros(2_500),
            Duration::from_micros(1_250),
            ms(1),
            ms(1),
        ] {
            p = next_drain_period(p, 100, 256);
            assert_eq!(p, want);
        }
        // ...a steady fill between a sixteenth and a quarter keeps it, and calm doubles it back.
        assert_eq!(next_drain_period(p, 20, 256), p);
        assert_eq!(next_drain_period(ms(5), 3, 256), ms(10));
        assert_eq!(next_drain_period(ms(15), 0, 256), hold);
    }
}
