//! The reaper shared by the trackers that do not stop tasks (netlink, ebpf): a thread that
//! reaps ste's children (the root, and orphans reparented to ste, the subreaper), reports the
//! root's status, and says when none are left.
//!
//! Owns `waitpid(-1)` for those trackers and nothing else: the tracker's reader thread waits on
//! [`Done::wake`] and, once [`Done::get`] says the tree is over, drains what its kernel source
//! still holds. Both sources queue a task's exit before the task becomes a zombie, so when
//! `waitpid` reports no children, every exit is already queued.

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
    if let Err(error) = report() {
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
    done.set(sink.now_ns());
}
