//! Signals ste receives while the command runs: SIGINT, SIGTERM, SIGHUP and SIGQUIT are
//! blocked in every ste thread and collected by one thread with `sigwaitinfo`, which tells a
//! signal the terminal sent to the whole foreground group (the command got it too) from one
//! sent to ste alone (which ste forwards). Between runs of `ste bench`, SIGINT and SIGTERM
//! are noted instead ([`catch_interrupts`]), so the bench ends with what it measured. Owns
//! nothing else.

use crate::bus::sink::{Msg, Sink};

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
    // SAFETY: creating a signalfd from a valid, initialised set.
    let fd = unsafe { libc::signalfd(-1, &set, libc::SFD_CLOEXEC) };
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

/// Starts the thread that reports each blocked signal to the session.
pub fn spawn(sink: Sink) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("ste-signals".into())
        .spawn(move || {
            crate::launch::privilege::limit_or_say(crate::launch::privilege::Role::Helper, &sink);
            let set = set();
            loop {
                // SAFETY: a zeroed siginfo_t is a valid output buffer.
                let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
                // SAFETY: waiting on a valid set, writing into `info`.
                let signo = unsafe { libc::sigwaitinfo(&set, &mut info) };
                if signo < 0 {
                    continue;
                }
                // The tty driver sends keyboard signals and hangups as the kernel (SI_KERNEL), to
                // the whole foreground process group.
                sink.send(Msg::Signal {
                    signo,
                    from_terminal: info.si_code == libc::SI_KERNEL,
                });
            }
        })?;
    Ok(())
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
