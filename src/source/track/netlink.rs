//! The netlink tracker: the proc connector's fork/exec/exit events, filtered to the tree.
//!
//! Owns a reader thread that follows the connector socket and keeps the set of tasks in the
//! tree; the shared reaper (`track::reaper`) reaps ste's children and ends the run when none are
//! left. The kernel queues a task's exit event before the task becomes a zombie, so when
//! `waitpid` reports no children every exit is already in the socket. Losses are never silent: an overrun (`ENOBUFS`) is counted, bounded with the
//! connector's per-CPU sequence numbers, and followed by a rescan of /proc that adds the
//! processes and threads the lost events would have announced and ends those that are gone.
//! argv is read from /proc as soon as the exec event arrives; a process already gone by then
//! is recorded with an unknown argv, which the report counts. The process may also have
//! exec'd again before the read: `track::argv_check` decides from where the process is and
//! the events queued after the read, which the reader takes into its own queue (`pending`,
//! handled in order afterwards); an argv that may be a later image's is not shown, and
//! counted.

use crate::bus::event::Event;
use crate::bus::launched::Launched;
use crate::bus::sink::{Msg, Sink};
use crate::bus::tree::TreeWatcher;
use crate::kernel::cn_proc::{
    Connector, ProcEvent, ProcEventKind, Received, kernel_has_filter, seq_gap,
};
use crate::model::{Source, Termination};
use crate::source::track::argv_check::{self, Later, Probe, Verdict};
use crate::source::track::reaper::{self, Done};
use crate::source::track::tree::Tree;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Receive buffer asked for: 4 MiB holds ~5,000 queued events (832 bytes each).
const RCVBUF_BYTES: usize = 4 << 20;

/// How long events may be held before they go to the session (20 ms; see `Tree::batch`): the live
/// `EXEC:` lines lag by at most this, and it is far below anything the session does with
/// events on a clock (naming the descendants it waits for after 1 s, matching taskstats
/// records within 2 s).
const HOLD_NS: u64 = 20_000_000;

/// Subscribes, checks that events really arrive, and starts the reader and waiter threads.
pub fn start(
    child: &mut Launched,
    sink: Sink,
    sampler: Arc<dyn TreeWatcher>,
) -> Result<(), String> {
    let root = child.pid;
    let release = nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut conn = Connector::open(RCVBUF_BYTES, kernel_has_filter(&release))
        .map_err(|e| format!("cannot subscribe to the proc connector: {e}"))?;
    probe(&mut conn)?;
    if conn.rcvbuf_bytes < RCVBUF_BYTES {
        sink.emit(Event::Note {
            text: format!(
                "netlink receive buffer is {} (asked for {}; raising it needs CAP_NET_ADMIN or net.core.rmem_max): fork storms may overrun it",
                crate::units::bytes_human(conn.rcvbuf_bytes as u64),
                crate::units::bytes_human(RCVBUF_BYTES as u64)
            ),
        });
    }
    declare_sources(&sink);
    // The proc connector reports an exit after the memory is gone: peaks come from the rounds.
    sampler.read_peaks();
    let done = Done::new().map_err(|e| format!("eventfd: {e}"))?;
    let report = child.take_exec_outcome();
    let reader = Reader::new(root, conn, sink.clone(), sampler);
    let reader_done = Arc::clone(&done);
    std::thread::Builder::new()
        .name("ste-netlink".into())
        .spawn(move || {
            // argv is read from /proc when the exec event arrives, so every microsecond this
            // thread waits for a CPU is a chance for a short process to be gone.
            super::raise_priority();
            crate::launch::privilege::limit_or_say(
                crate::launch::privilege::Role::Tracker,
                &reader.tree.sink,
            );
            reader.run(&reader_done)
        })
        .map_err(|e| format!("cannot start the netlink reader: {e}"))?;
    reaper::spawn(root, report, sink, done)?;
    Ok(())
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

/// Creating a thread makes the kernel send a fork event; if none arrives, this socket gets
/// nothing (an unprivileged listener only hears events while a privileged one subscribed).
fn probe(conn: &mut Connector) -> Result<(), String> {
    let me = std::process::id() as i32;
    let _ = std::thread::Builder::new()
        .name("ste-probe".into())
        .spawn(|| {})
        .map(|h| h.join());
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline {
        match conn.recv(Duration::from_millis(50), None) {
            Ok(Received::Event(ProcEvent {
                kind: ProcEventKind::Fork { child_tgid, .. },
                ..
            })) if child_tgid == me => {
                return Ok(());
            }
            Ok(_) => {}
            Err(e) => return Err(format!("proc connector: {e}")),
        }
    }
    Err("the proc connector delivered no events to ste (unprivileged listeners receive them only while a privileged one is subscribed)".into())
}

/// How far `Reader::first_later` has looked through `pending`, and the threads of the process
/// it counted so far.
struct Scan {
    at: usize,
    threads: usize,
}

struct Reader {
    root: i32,
    conn: Connector,
    tree: Tree,
    /// Last sequence number seen per CPU.
    last_seq: HashMap<u32, u32>,
    /// CPUs whose next sequence gap measures an overrun.
    overrun_pending: HashSet<u32>,
    /// Processes whose main thread ended while other threads went on (`pthread_exit`): the
    /// leader's exit is held until the last thread ends, which carries the process's status.
    deferred_leaders: HashSet<i32>,
    /// Datagrams taken from the socket while judging an argv (see `argv_check`), handled
    /// before any newer one: only events and overruns.
    pending: VecDeque<Received>,
}

impl Reader {
    fn new(root: i32, conn: Connector, sink: Sink, sampler: Arc<dyn TreeWatcher>) -> Self {
        let mut tree = Tree::new(root, sink, sampler);
        tree.batch();
        Reader {
            root,
            conn,
            tree,
            last_seq: HashMap::new(),
            overrun_pending: HashSet::new(),
            deferred_leaders: HashSet::new(),
            pending: VecDeque::new(),
        }
    }

    fn run(mut self, done: &Done) {
        let mut error = None;
        let end_ns = loop {
            // Flushed here, not only on a timeout: under a steady stream the receive never
            // times out.
            let held_ns = self
                .tree
                .unsent_since()
                .map(|t0| self.tree.sink.now_ns().saturating_sub(t0));
            if held_ns.is_some_and(|h| h >= HOLD_NS) {
                self.tree.flush();
            }
            let timeout = match held_ns {
                Some(h) if h < HOLD_NS => Duration::from_nanos(HOLD_NS - h),
                _ => Duration::from_secs(1),
            };
            let received = match self.pending.pop_front() {
                Some(r) => Ok(r),
                None => self.conn.recv(timeout, Some(&done.wake)),
            };
            match received {
                Ok(Received::Event(ev)) => self.handle(ev),
                Ok(Received::Overrun) => self.overrun(),
                Ok(Received::Ignored) => {}
                Ok(Received::Timeout) => {
                    self.tree.flush();
                    if let Some(t) = done.get() {
                        // Every exit was queued before its reaping: drain what is left.
                        loop {
                            match self.next_now() {
                                Ok(Received::Event(ev)) => self.handle(ev),
                                Ok(Received::Overrun) => self.overrun(),
                                Ok(Received::Ignored) => {}
                                Ok(Received::Timeout) | Err(_) => break,
                            }
                        }
                        self.final_resync();
                        break t;
                    }
                }
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

    fn handle(&mut self, ev: ProcEvent) {
        let t = self.tree.sink.clock().from_monotonic(ev.timestamp_ns);
        if let Some(last) = self.last_seq.insert(ev.cpu, ev.seq) {
            let gap = seq_gap(last, ev.seq);
            // With the kernel filter on, gaps are the filtered-out events; they only measure a
            // loss right after an overrun. Without it, every gap is a loss.
            if gap > 0 && (self.overrun_pending.remove(&ev.cpu) || !self.conn.filtered) {
                self.tree.emit_at(
                    t,
                    Event::Lost {
                        overruns: 0,
                        events_at_most: u64::from(gap),
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
                if let Some(former) = self.tree.exec(tgid) {
                    let (argv, doubtful) = self.argv(tgid);
                    self.tree.emit_at(
                        t,
                        Event::Exec {
                            tgid,
                            former_tid: former.unwrap_or(tgid),
                            argv,
                        },
                    );
                    if doubtful {
                        self.tree.emit_at(t, argv_check::doubt());
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

    /// The argv of `tgid`'s image just reported, and whether a read was thrown away because
    /// it may be a later image's (see `argv_check`).
    fn argv(&mut self, tgid: i32) -> (Option<Vec<crate::model::Arg>>, bool) {
        let read_start = crate::bus::sink::monotonic_ns();
        let argv = match self.tree.procfs.cmdline_whole(tgid) {
            Ok(bytes) if !bytes.is_empty() => {
                crate::source::from_kernel::argv(crate::kernel::proc::parse_cmdline(bytes))
            }
            _ => return (None, false),
        };
        // Every event in `pending` came after this exec.
        let mut scan = Scan {
            at: 0,
            threads: self.tree.threads(tgid),
        };
        let verdict = argv_check::judge(read_start, |wait| {
            // A later exec or the end of the process decides without a look at it: the wait
            // ends as soon as one is queued (the usual case for a short process).
            let until = Instant::now() + wait;
            loop {
                self.take_queue();
                if let Some(later) = self.first_later(tgid, &mut scan) {
                    return (Probe::Unsure, Some(later));
                }
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() || !self.conn.wait(left).unwrap_or(false) {
                    break;
                }
            }
            // Where the process is first, then the queue: see `argv_check`.
            let probe = Probe::of(self.tree.procfs.syscall(tgid).ok().flatten());
            self.take_queue();
            (probe, self.first_later(tgid, &mut scan))
        });
        match verdict {
            Verdict::Keep => (Some(argv), false),
            _ => (None, true),
        }
    }

    /// Moves every datagram the socket holds now to `pending`.
    fn take_queue(&mut self) {
        loop {
            match self.conn.recv_now() {
                Ok(r @ (Received::Event(_) | Received::Overrun)) => self.pending.push_back(r),
                Ok(Received::Ignored) => {}
                Ok(Received::Timeout) | Err(_) => break,
            }
        }
    }

    /// The first event of process `tgid` in `pending` that bears on its argv, scanning on from
    /// where `scan` stopped.
    fn first_later(&self, tgid: i32, scan: &mut Scan) -> Option<Later> {
        let threads = &mut scan.threads;
        while let Some(r) = self.pending.get(scan.at) {
            scan.at += 1;
            let Received::Event(ev) = r else {
                return Some(Later::Lost);
            };
            match ev.kind {
                ProcEventKind::Exec { tgid: t, .. } if t == tgid => return Some(Later::Exec),
                ProcEventKind::Fork {
                    child_pid,
                    child_tgid,
                    ..
                } if child_tgid == tgid && child_pid != tgid => *threads += 1,
                ProcEventKind::Exit { pid, tgid: t, .. } if t == tgid => {
                    if pid == tgid {
                        return Some(Later::Exit {
                            ts_ns: ev.timestamp_ns,
                            last: *threads <= 1,
                        });
                    }
                    *threads = threads.saturating_sub(1);
                }
                _ => {}
            }
        }
        None
    }

    /// The next datagram without waiting: one taken earlier first.
    fn next_now(&mut self) -> std::io::Result<Received> {
        match self.pending.pop_front() {
            Some(r) => Ok(r),
            None => self.conn.recv_now(),
        }
    }

    /// The tree has ended: a process it still holds that /proc no longer shows ended unseen,
    /// its exit lost without the socket saying so (the proc connector can drop events for a
    /// listener without an `ENOBUFS`, e.g. with the machine flooded by other forks): end it,
    /// and count it as lost rather than leave it running forever.
    fn final_resync(&mut self) {
        if !self.tree.is_empty() {
            let zombies = self.tree.recover(0, 0);
            self.deferred_leaders.extend(zombies);
        }
    }

    /// The kernel dropped events: drain the queue, then rebuild the tree from /proc.
    fn overrun(&mut self) {
        let cpus: Vec<u32> = self.last_seq.keys().copied().collect();
        self.overrun_pending.extend(cpus);
        loop {
            match self.next_now() {
                Ok(Received::Event(ev)) => self.handle(ev),
                Ok(Received::Ignored) | Ok(Received::Overrun) => {}
                Ok(Received::Timeout) | Err(_) => break,
            }
        }
        let zombies = self.tree.recover(1, 0);
        self.deferred_leaders.extend(zombies);
    }
}
