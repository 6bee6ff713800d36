//! Signals ste receives while the command runs: SIGINT, SIGTERM, SIGHUP and SIGQUIT are
//! blocked in every ste thread and collected by one thread from a signalfd, which tells a
//! signal the terminal sent to the whole foreground group (the command got it too) from one
//! sent to ste alone (which ste forwards). The session stops the thread once it takes no more
//! signals: a thread still asleep when ste exits must be woken to die, and ste's exit waited
//! for that (up to ~0.2 ms on an idle CPU of a VM) after everything else. Between runs of `ste bench`, SIGINT and SIGTERM
//! are noted instead ([`catch_interrupts`]), so the bench ends with what it measured. Owns
//! nothing else.

use crate::bus::sink::{Msg, Sink};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

pub const FORWARDED: [i32; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

fn set() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and fill a local sigset_t.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in FORWARDED {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// A close-on-exec signalfd for the forwarded signals (the caller blocks them first).
pub fn signal_fd() -> std::io::Result<std::os::fd::OwnedFd> {
    let set = set();
    // Non-blocking: its readers poll it first, and a signal taken meanwhile must not block them.
    // SAFETY: creating a signalfd from a valid, initialised set.
    let fd = unsafe { libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    Ok(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) })
}

/// Blocks the forwarded signals in the calling thread (and every thread it starts later).
/// Returns the mask before, which the command must get back.
pub fn block() -> libc::sigset_t {
    let set = set();
    // SAFETY: valid sigset pointers.
    unsafe {
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
        old
    }
}

/// The thread that reports each blocked signal to the session, until [`SignalThread::stop`].
pub struct SignalThread {
    stop: OwnedFd,
    /// The first signal it took (0: none yet), for the session's set-up (see [`arrived`]).
    first: std::sync::Arc<std::sync::atomic::AtomicI32>,
}

/// The first forwarded signal that came for ste, if any: taken by its signal thread, or still
/// pending (the thread has not read it yet, or does not run yet). The session asks before it
/// releases the command: a Ctrl-C during the set-up stops ste there, the command not run.
pub fn arrived(thread: &SignalThread) -> Option<i32> {
    let taken = thread.first.load(std::sync::atomic::Ordering::SeqCst);
    if taken != 0 {
        return Some(taken);
    }
    // SAFETY: sigpending fills a local, initialised set; sigismember reads it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        if libc::sigpending(&mut set) != 0 {
            return None;
        }
        FORWARDED
            .into_iter()
            .find(|&s| libc::sigismember(&set, s) == 1)
    }
    .or_else(|| {
        // Taken between the two looks.
        let taken = thread.first.load(std::sync::atomic::Ordering::SeqCst);
        (taken != 0).then_some(taken)
    })
}

impl SignalThread {
    /// Ends the thread, without waiting for it: signals from now on stay blocked and pending
    /// (ste is writing its report; the command is gone).
    pub fn stop(&self) {
        crate::kernel::calls::eventfd_notify(self.stop.as_fd());
    }
}

/// Runs `f` with the forwarded signals blocked in the calling thread, then unblocks them: a
/// thread `f` starts keeps them blocked for its life.
pub fn while_blocked<T>(f: impl FnOnce() -> T) -> T {
    let before = block();
    let out = f();
    // SAFETY: restoring the mask `block` returned, from a valid sigset.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &before, std::ptr::null_mut()) };
    out
}

/// Starts the thread that reports each blocked signal to the session (block them first).
pub fn spawn(sink: Sink) -> std::io::Result<SignalThread> {
    let signals = signal_fd()?;
    let stop = crate::kernel::calls::eventfd()?;
    let stopped = stop.try_clone()?;
    let first = std::sync::Arc::new(std::sync::atomic::AtomicI32::new(0));
    let noted = std::sync::Arc::clone(&first);
    std::thread::Builder::new()
        .name("ste-signals".into())
        .spawn(move || {
            crate::launch::privilege::limit_or_say(crate::launch::privilege::Role::Helper, &sink);
            loop {
                let mut fds = [signals.as_raw_fd(), stopped.as_raw_fd()].map(|fd| libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                });
                // SAFETY: polling a local array of two valid pollfds, without a timeout.
                if unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) } < 0 {
                    continue;
                }
                if fds[1].revents != 0 {
                    return;
                }
                // SAFETY: a zeroed signalfd_siginfo is a valid output buffer.
                let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
                let size = std::mem::size_of_val(&info);
                // SAFETY: reading at most `size` bytes into `info` from the signalfd.
                let n = unsafe { libc::read(signals.as_raw_fd(), (&raw mut info).cast(), size) };
                if n != size as isize {
                    continue;
                }
                let _ = noted.compare_exchange(
                    0,
                    info.ssi_signo as i32,
                    std::sync::atomic::Ordering::SeqCst,
                    std::sync::atomic::Ordering::SeqCst,
                );
                // The tty driver sends keyboard signals and hangups as the kernel (SI_KERNEL), to
                // the whole foreground process group.
                sink.send(Msg::Signal {
                    signo: info.ssi_signo as i32,
                    from_terminal: info.ssi_code == libc::SI_KERNEL,
                });
            }
        })?;
    Ok(SignalThread { stop, first })
}

/// The signal that asked a repeated command (`ste bench`) to stop, or 0.
static INTERRUPTED: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn note_interrupt(signo: libc::c_int) {
    INTERRUPTED.store(signo, std::sync::atomic::Ordering::Relaxed);
}

/// Notes SIGINT and SIGTERM instead of dying of them (see [`interrupted`]); system calls they
/// interrupt are restarted.
pub fn catch_interrupts() -> nix::Result<()> {
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
    let action = SigAction::new(
        SigHandler::Handler(note_interrupt),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for signal in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only stores into an atomic, which is async-signal-safe.
        unsafe { sigaction(signal, &action) }?;
    }
    Ok(())
}

/// The signal [`catch_interrupts`] noted, or 0.
pub fn interrupted() -> i32 {
    INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed)
}
