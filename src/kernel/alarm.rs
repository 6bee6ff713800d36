//! A periodic alarm aimed at one thread: a POSIX timer (`timer_create` with
//! `SIGEV_THREAD_ID`) whose signal has a handler that does nothing and is installed without
//! `SA_RESTART`, so each expiry makes a blocking system call of that thread (`wait4`) return
//! `EINTR`. This is how a thread that can only block in a call without a timeout wakes on a
//! clock, at no cost per event: the ptrace tracer holds its events and sends them when the
//! alarm rings (see `source::track::ptrace`).
//!
//! Owns the timer and the signal's handler; nothing else. The signal is a real-time one past
//! the range glibc reserves, aimed at the arming thread only, and a handler survives no exec,
//! so the command never sees it. The alarm is periodic on purpose: an expiry that lands while
//! the thread is not blocked interrupts nothing, and the next one, a period later, does.

use std::io;
use std::sync::Once;
use std::time::Duration;

/// The alarm's signal, counted from `SIGRTMIN` (glibc keeps the first two for itself and
/// `SIGRTMIN()` already skips them).
const SIGNAL_FROM_RTMIN: i32 = 5;

fn signal() -> i32 {
    libc::SIGRTMIN() + SIGNAL_FROM_RTMIN
}

extern "C" fn ring(_: libc::c_int) {}

/// Installs the do-nothing handler once per process, without `SA_RESTART`.
fn install_handler() -> io::Result<()> {
    static INSTALL: Once = Once::new();
    let mut result = Ok(());
    INSTALL.call_once(|| {
        // SAFETY: a zeroed sigaction is valid; the handler only returns, which is
        // async-signal-safe, and no flag asks for a restart.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = ring as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(signal(), &action, std::ptr::null_mut()) != 0 {
                result = Err(io::Error::last_os_error());
            }
        }
    });
    result
}

/// A timer that interrupts the thread that made it, every `period` while armed.
pub struct Alarm {
    timer: libc::timer_t,
    period: Duration,
    armed: bool,
}

// SAFETY: `timer_t` is an opaque kernel timer id; the timer is aimed at the thread that made it
// whichever thread later arms or deletes it.
unsafe impl Send for Alarm {}

impl Alarm {
    /// A disarmed alarm aimed at the calling thread.
    pub fn new(period: Duration) -> io::Result<Alarm> {
        install_handler()?;
        // SAFETY: a zeroed sigevent is valid; the fields set make it a thread-directed signal.
        let mut event: libc::sigevent = unsafe { std::mem::zeroed() };
        event.sigev_notify = libc::SIGEV_THREAD_ID;
        event.sigev_signo = signal();
        event.sigev_notify_thread_id = super::calls::gettid();
        let mut timer: libc::timer_t = std::ptr::null_mut();
        // SAFETY: valid pointers to the event and the output id.
        if unsafe { libc::timer_create(libc::CLOCK_MONOTONIC, &mut event, &mut timer) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Alarm {
            timer,
            period,
            armed: false,
        })
    }

    /// Rings a period from now, then every period, until [`Alarm::disarm`]. Does nothing when
    /// already armed (one system call per arming, not per event).
    pub fn arm(&mut self) {
        if !self.armed {
            self.set(self.period);
            self.armed = true;
        }
    }

    pub fn disarm(&mut self) {
        if self.armed {
            self.set(Duration::ZERO);
            self.armed = false;
        }
    }

    fn set(&self, every: Duration) {
        let spec = libc::timespec {
            tv_sec: every.as_secs() as libc::time_t,
            tv_nsec: every.subsec_nanos() as libc::c_long,
        };
        let value = libc::itimerspec {
            it_interval: spec,
            it_value: spec,
        };
        // SAFETY: a timer this alarm created and has not deleted; a valid itimerspec. It
        // cannot fail with those.
        unsafe { libc::timer_settime(self.timer, 0, &value, std::ptr::null_mut()) };
    }
}

impl Drop for Alarm {
    fn drop(&mut self) {
        // SAFETY: deleting the timer this alarm created, once.
        unsafe { libc::timer_delete(self.timer) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// The alarm interrupts a blocking call of its thread (here `pause`-like: a read of a pipe
    /// nobody writes), and a disarmed alarm does not.
    #[test]
    fn interrupts_a_blocking_call_of_its_thread() {
        let mut fds = [0; 2];
        // SAFETY: a valid array for the two descriptors.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let mut alarm = Alarm::new(Duration::from_millis(20)).unwrap();
        alarm.arm();
        let start = Instant::now();
        let mut byte = 0u8;
        // SAFETY: reading one byte into a local.
        let n = unsafe { libc::read(fds[0], (&mut byte as *mut u8).cast(), 1) };
        let err = io::Error::last_os_error();
        assert_eq!(n, -1);
        assert_eq!(err.raw_os_error(), Some(libc::EINTR));
        let waited = start.elapsed();
        assert!(waited >= Duration::from_millis(15), "{waited:?}");
        alarm.disarm();
        // Disarmed: a wait of 60 ms on the same pipe times out instead of being interrupted.
        let mut poll = libc::pollfd {
            fd: fds[0],
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        assert_eq!(unsafe { libc::poll(&mut poll, 1, 60) }, 0);
        // SAFETY: closing our own descriptors.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
    }
}
