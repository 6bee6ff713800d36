//! Reaping for the trackers that do not stop tasks (netlink, ebpf): ste's children (the root,
//! and orphans reparented to ste, the subreaper) are reaped, the root's status reported, and
//! the end of the tree said when none are left.
//!
//! Owns `waitpid(-1)` for those trackers and nothing else. netlink starts a reaper thread
//! ([`spawn`]), on whose [`Done::wake`] its reader waits and, once [`Done::get`] says the tree
//! is over, drains what its socket still holds. The ebpf reader reaps itself, without a
//! thread: its epoll set holds a SIGCHLD signalfd, and it calls [`reap_ended`] when that is
//! readable (a thread more to start before the release, and one more wake-up between the
//! command's exit and the session's). Both kernel sources queue a task's exit before the task
//! becomes a zombie, so when `waitpid` reports no children, every exit is already queued.

use crate::bus::event::Event;
use crate::bus::launched::ExecOutcome;
use crate::bus::sink::Sink;
use crate::model::Termination;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The reaper's signal to the reader that the tree is over: when (run time + 1, 0 until then)
/// and an eventfd that wakes the reader's poll at once.
pub struct Done {
    t_ns: AtomicU64,
    /// Readable once the tree is over.
    pub wake: OwnedFd,
}

impl Done {
    pub fn new() -> std::io::Result<Arc<Done>> {
        Ok(Arc::new(Done {
            t_ns: AtomicU64::new(0),
            wake: crate::kernel::calls::eventfd()?,
        }))
    }

    fn set(&self, t_ns: u64) {
        self.t_ns.store(t_ns + 1, Ordering::Release);
        crate::kernel::calls::eventfd_notify(self.wake.as_fd());
    }

    /// When the last child was reaped, once it has been.
    pub fn get(&self) -> Option<u64> {
        self.t_ns.load(Ordering::Acquire).checked_sub(1)
    }
}

/// Starts the reaper thread for the tree rooted at `root`.
pub fn spawn(root: i32, report: ExecOutcome, sink: Sink, done: Arc<Done>) -> Result<(), String> {
    std::thread::Builder::new()
        .name("ste-reaper".into())
        .spawn(move || {
            crate::launch::privilege::limit_or_say(crate::launch::privilege::Role::Helper, &sink);
            reap(root, report, &sink, &done)
        })
        .map(|_| ())
        .map_err(|e| format!("cannot start the reaper thread: {e}"))
}

/// Reaps ste's children; reports the root's status and the end of the tree.
fn reap(root: i32, report: ExecOutcome, sink: &Sink, done: &Done) {
    let mut report = Some(report);
    launch_failed(&mut report, sink);
    while let Reaped::Child(pid, status) = wait(0) {
        if pid == root {
            root_reaped(status, &mut report, sink);
        }
    }
    done.set(sink.now_ns());
}

/// Reaps every child that has ended, without waiting, reporting the root as [`spawn`]'s thread
/// does (its launch failure, taken from `report` once it has ended, then its status). Returns
/// when the tree ended, once no child is left.
pub fn reap_ended(root: i32, report: &mut Option<ExecOutcome>, sink: &Sink) -> Option<u64> {
    loop {
        match wait(libc::WNOHANG) {
            Reaped::Child(pid, status) => {
                if pid == root {
                    root_reaped(status, report, sink);
                }
            }
            Reaped::NoneEnded => return None,
            Reaped::NoneLeft => return Some(sink.now_ns()),
        }
    }
}

enum Reaped {
    Child(i32, i32),
    /// Children are left, none has ended (`WNOHANG`).
    NoneEnded,
    NoneLeft,
}

/// One `waitpid(-1)` with `flags`, retried when interrupted.
fn wait(flags: i32) -> Reaped {
    loop {
        let mut status = 0;
        // SAFETY: waiting for any child; `status` is a valid int.
        let pid = unsafe { libc::waitpid(-1, &mut status, flags) };
        match pid {
            0 => return Reaped::NoneEnded,
            p if p > 0 => return Reaped::Child(p, status),
            _ if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) => continue,
            _ => return Reaped::NoneLeft,
        }
    }
}

/// Says the launch failed, if it did: `report` blocks until the root exec'd or ended.
fn launch_failed(report: &mut Option<ExecOutcome>, sink: &Sink) {
    if let Some(r) = report.take()
        && let Err(error) = r()
    {
        sink.emit(Event::LaunchFailed { error });
    }
}

fn root_reaped(status: i32, report: &mut Option<ExecOutcome>, sink: &Sink) {
    launch_failed(report, sink);
    if let Some(t) = Termination::from_wait_status(status) {
        sink.emit(Event::RootExit { status: t });
    }
}
