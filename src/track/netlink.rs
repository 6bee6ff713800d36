//! The netlink tracker: the proc connector's fork/exec/exit events, filtered to the tree.
//!
//! Owns two threads: a reader that follows the connector socket and keeps the set of tasks in
//! the tree, and a waiter that reaps ste's children (the root and orphans reparented to the
//! subreaper) and ends the run when none are left. The kernel queues a task's exit event before
//! the task becomes a zombie, so when `waitpid` reports no children every exit is already in
//! the socket. Losses are never silent: an overrun (`ENOBUFS`) is counted, bounded with the
//! connector's per-CPU sequence numbers, and followed by a rescan of /proc that adds the
//! processes and threads the lost events would have announced and ends those that are gone.
//! argv is read from /proc as soon as the exec event arrives; a process already gone by then
//! is recorded with an unknown argv, which the report counts.

use crate::event::Event;
use crate::kernel::cn_proc::{
    Connector, ProcEvent, ProcEventKind, Received, kernel_has_filter, seq_gap,
};
use crate::kernel::proc::ProcFs;
use crate::launch::{Child, ExecReport};
use crate::model::{Source, Termination};
use crate::sample::Sampler;
use crate::sink::{Msg, Sink};
use std::collections::{HashMap, HashSet};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Receive buffer asked for: 4 MiB holds ~5,000 queued events (832 bytes each).
const RCVBUF_BYTES: usize = 4 << 20;

/// Subscribes, checks that events really arrive, and starts the reader and waiter threads.
pub fn start(child: &mut Child, sink: Sink, sampler: Arc<Sampler>) -> Result<(), String> {
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
    let wake = eventfd().map_err(|e| format!("eventfd: {e}"))?;
    let report = child.take_exec_report();
    let done = Arc::new(Done {
        t_ns: AtomicU64::new(0),
        wake,
    });
    let ste_pid = std::process::id() as i32;
    let reader = Reader::new(root, ste_pid, conn, sink.clone(), sampler);
    let reader_done = Arc::clone(&done);
    std::thread::Builder::new()
        .name("ste-netlink".into())
        .spawn(move || reader.run(&reader_done))
        .map_err(|e| format!("cannot start the netlink reader: {e}"))?;
    std::thread::Builder::new()
        .name("ste-reaper".into())
        .spawn(move || reap(root, report, &sink, &done))
        .map_err(|e| format!("cannot start the reaper thread: {e}"))?;
    Ok(())
}

/// The reaper's signal to the reader that the tree is over: when (run time + 1, 0 until then)
/// and an eventfd that wakes the reader's poll at once.
struct Done {
    t_ns: AtomicU64,
    wake: OwnedFd,
}

impl Done {
    fn set(&self, t_ns: u64) {
        self.t_ns.store(t_ns + 1, Ordering::Release);
        let one = 1u64.to_ne_bytes();
        // SAFETY: writing 8 bytes to an eventfd.
        unsafe { libc::write(self.wake.as_raw_fd(), one.as_ptr().cast(), 8) };
    }

    fn get(&self) -> Option<u64> {
        self.t_ns.load(Ordering::Acquire).checked_sub(1)
    }
}

fn eventfd() -> std::io::Result<OwnedFd> {
    // SAFETY: creating an eventfd with flags only.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
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

/// Reaps ste's children; reports the root's status and the end of the tree.
fn reap(root: i32, report: ExecReport, sink: &Sink, done: &Done) {
    if let Err(error) = report.outcome() {
        sink.emit(Event::LaunchFailed { error });
    }
    loop {
        let mut status = 0;
        // SAFETY: waiting for any child; `status` is a valid int.
        let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
        if pid < 0 {
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => continue,
                _ => break,
            }
        }
        if pid == root
            && let Some(t) = Termination::from_wait_status(status)
        {
            sink.emit(Event::RootExit { status: t });
        }
    }
    done.set(sink.clock().now_ns());
}

struct Reader {
    root: i32,
    ste_pid: i32,
    conn: Connector,
    sink: Sink,
    sampler: Arc<Sampler>,
    procfs: ProcFs,
    /// Live tasks of each process in the tree.
    tasks: HashMap<i32, HashSet<i32>>,
    /// Live task → its process.
    owner: HashMap<i32, i32>,
    /// Last sequence number seen per CPU.
    last_seq: HashMap<u32, u32>,
    /// CPUs whose next sequence gap measures an overrun.
    overrun_pending: HashSet<u32>,
}

impl Reader {
    fn new(root: i32, ste_pid: i32, conn: Connector, sink: Sink, sampler: Arc<Sampler>) -> Self {
        let mut r = Reader {
            root,
            ste_pid,
            conn,
            sink,
            sampler,
            procfs: ProcFs::default(),
            tasks: HashMap::new(),
            owner: HashMap::new(),
            last_seq: HashMap::new(),
            overrun_pending: HashSet::new(),
        };
        r.tasks.insert(root, HashSet::from([root]));
        r.owner.insert(root, root);
        r.sampler.process_started(root);
        r
    }

    fn run(mut self, done: &Done) {
        // argv is read from /proc when the exec event arrives, so every microsecond this thread
        // waits for a CPU is a chance for a short process to be gone. Where allowed (root),
        // run it ahead of the workload; otherwise this fails and nothing changes.
        // SAFETY: setpriority on the calling thread's id.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, -10) };
        let mut error = None;
        let end_ns = loop {
            match self.conn.recv(Duration::from_secs(1), Some(&done.wake)) {
                Ok(Received::Event(ev)) => self.handle(ev),
                Ok(Received::Overrun) => self.overrun(),
                Ok(Received::Ignored) => {}
                Ok(Received::Timeout) => {
                    if let Some(t) = done.get() {
                        // Every exit was queued before its reaping: drain what is left.
                        loop {
                            match self.conn.recv_now() {
                                Ok(Received::Event(ev)) => self.handle(ev),
                                Ok(Received::Overrun) => self.overrun(),
                                Ok(Received::Ignored) => {}
                                Ok(Received::Timeout) | Err(_) => break,
                            }
                        }
                        break t;
                    }
                }
                Err(e) => {
                    error = Some(format!("proc connector: {e}"));
                    break self.sink.clock().now_ns();
                }
            }
        };
        for tgid in self.tasks.keys() {
            self.sampler.process_ended(*tgid);
        }
        self.sink.send(Msg::TrackerDone {
            t_ns: end_ns,
            error,
        });
    }

    fn handle(&mut self, ev: ProcEvent) {
        let t = self.sink.clock().from_monotonic(ev.timestamp_ns);
        if let Some(last) = self.last_seq.insert(ev.cpu, ev.seq) {
            let gap = seq_gap(last, ev.seq);
            // With the kernel filter on, gaps are the filtered-out events; they only measure a
            // loss right after an overrun. Without it, every gap is a loss.
            if gap > 0 && (self.overrun_pending.remove(&ev.cpu) || !self.conn.filtered) {
                self.sink.emit(Event::Lost {
                    overruns: 0,
                    events_at_most: u64::from(gap),
                    found_by_resync: 0,
                    exits_missed: 0,
                });
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
                    if let Some(tids) = self.tasks.get_mut(&child_tgid) {
                        tids.insert(child_pid);
                        self.owner.insert(child_pid, child_tgid);
                        self.sink.emit_at(
                            t,
                            Event::Fork {
                                parent_tgid: child_tgid,
                                child_tid: child_pid,
                                child_tgid,
                            },
                        );
                    }
                } else if self.tasks.contains_key(&parent_tgid)
                    || (parent_tgid == self.ste_pid && child_pid != self.root)
                {
                    self.add_process(t, parent_tgid, child_pid);
                }
            }
            ProcEventKind::Exec { tgid, .. } => {
                if let Some(tids) = self.tasks.get_mut(&tgid) {
                    // After an exec the process has exactly one thread, its leader. A thread
                    // that exec'd took the leader's id and sent no exit of its own.
                    tids.remove(&tgid);
                    let former = if tids.len() == 1 {
                        tids.iter().next().copied()
                    } else {
                        None
                    };
                    for tid in tids.drain() {
                        self.owner.remove(&tid);
                    }
                    tids.insert(tgid);
                    self.owner.insert(tgid, tgid);
                    let argv = self.procfs.cmdline(tgid).ok().filter(|a| !a.is_empty());
                    self.sink.emit_at(
                        t,
                        Event::Exec {
                            tgid,
                            former_tid: former.unwrap_or(tgid),
                            argv,
                        },
                    );
                    self.sampler.process_exec(tgid);
                }
            }
            ProcEventKind::Exit {
                pid,
                tgid,
                exit_code,
            } => {
                let Some(owner) = self.owner.remove(&pid) else {
                    return;
                };
                let status = (pid == owner)
                    .then(|| Termination::from_wait_status(exit_code as i32))
                    .flatten();
                self.sink.emit_at(
                    t,
                    Event::Exit {
                        tid: pid,
                        tgid: owner,
                        status,
                    },
                );
                let _ = tgid;
                self.task_gone(owner, pid);
            }
            ProcEventKind::Ack { .. } | ProcEventKind::Other(_) => {}
        }
    }

    fn add_process(&mut self, t: u64, parent_tgid: i32, pid: i32) {
        self.tasks.insert(pid, HashSet::from([pid]));
        self.owner.insert(pid, pid);
        self.sink.emit_at(
            t,
            Event::Fork {
                parent_tgid,
                child_tid: pid,
                child_tgid: pid,
            },
        );
        self.sampler.process_started(pid);
    }

    fn task_gone(&mut self, tgid: i32, tid: i32) {
        if let Some(tids) = self.tasks.get_mut(&tgid) {
            tids.remove(&tid);
            if tids.is_empty() {
                self.tasks.remove(&tgid);
                self.sampler.process_ended(tgid);
            }
        }
    }

    /// The kernel dropped events: drain the queue, then rebuild the tree from /proc.
    fn overrun(&mut self) {
        let cpus: Vec<u32> = self.last_seq.keys().copied().collect();
        self.overrun_pending.extend(cpus);
        loop {
            match self.conn.recv_now() {
                Ok(Received::Event(ev)) => self.handle(ev),
                Ok(Received::Ignored) | Ok(Received::Overrun) => {}
                Ok(Received::Timeout) | Err(_) => break,
            }
        }
        let (found, missed) = self.resync();
        self.sink.emit(Event::Lost {
            overruns: 1,
            events_at_most: 0,
            found_by_resync: found,
            exits_missed: missed,
        });
    }

    /// Adds the processes and threads of the tree that /proc shows and ste does not know, and
    /// ends the known ones /proc no longer shows. Returns (found, ended).
    fn resync(&mut self) -> (u64, u64) {
        let t = self.sink.clock().now_ns();
        let Ok(pids) = self.procfs.pids() else {
            return (0, 0);
        };
        let present: HashSet<i32> = pids.iter().copied().collect();
        let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
        for &pid in &pids {
            if let Ok(Some(stat)) = self.procfs.stat(pid) {
                children.entry(stat.ppid).or_default().push(pid);
            }
        }
        let mut found = 0;
        let mut frontier: Vec<i32> = self.tasks.keys().copied().chain([self.ste_pid]).collect();
        while let Some(parent) = frontier.pop() {
            for &child in children.get(&parent).map(Vec::as_slice).unwrap_or(&[]) {
                if !self.tasks.contains_key(&child) {
                    self.add_process(t, parent, child);
                    found += 1;
                }
                frontier.push(child);
            }
        }
        let mut missed = 0;
        let known: Vec<i32> = self.tasks.keys().copied().collect();
        for tgid in known {
            let live: HashSet<i32> = if present.contains(&tgid) {
                self.procfs
                    .tasks(tgid)
                    .map(|v| v.into_iter().collect())
                    .unwrap_or_default()
            } else {
                missed += 1;
                HashSet::new()
            };
            let tracked: Vec<i32> = self
                .tasks
                .get(&tgid)
                .map(|s| s.iter().copied().collect())
                .unwrap_or_default();
            for tid in live.iter().filter(|tid| !tracked.contains(tid)) {
                self.tasks.entry(tgid).or_default().insert(*tid);
                self.owner.insert(*tid, tgid);
                self.sink.emit_at(
                    t,
                    Event::Fork {
                        parent_tgid: tgid,
                        child_tid: *tid,
                        child_tgid: tgid,
                    },
                );
            }
            // End the leader last so the process ends with it.
            let mut gone: Vec<i32> = tracked
                .into_iter()
                .filter(|tid| !live.contains(tid))
                .collect();
            gone.sort_by_key(|&tid| tid == tgid);
            for tid in gone {
                self.owner.remove(&tid);
                self.sink.emit_at(
                    t,
                    Event::Exit {
                        tid,
                        tgid,
                        status: None,
                    },
                );
                self.task_gone(tgid, tid);
            }
        }
        (found, missed)
    }
}
