//! A one-shot signal between threads: one side opens it, once; the others wait until it is
//! open, for at most a bound they choose. The session opens `may_detach` once its event loop
//! is over, and the ebpf reader waits for it before it detaches its programs: a detach
//! rewrites the tracepoints' call sites with a round of interrupts on every CPU (~0.3 ms
//! here), which, run while the session drained the tracker's last events, delayed it
//! (bench/README.md).
//!
//! Owns the signal only; must not know who opens or waits.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

#[derive(Default)]
pub struct Latch {
    open: Mutex<bool>,
    opened: Condvar,
}

impl Latch {
    pub fn new() -> Arc<Latch> {
        Arc::new(Latch::default())
    }

    /// Opens it; every waiter goes on.
    pub fn open(&self) {
        if let Ok(mut open) = self.open.lock() {
            *open = true;
        }
        self.opened.notify_all();
    }

    /// Waits until it is open, or `at_most`; whether it is open.
    pub fn wait(&self, at_most: Duration) -> bool {
        let until = Instant::now() + at_most;
        let Ok(mut open) = self.open.lock() else {
            return false;
        };
        while !*open {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            open = match self.opened.wait_timeout(open, left) {
                Ok((guard, _)) => guard,
                Err(_) => return false,
            };
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiter_goes_on_when_opened_or_at_its_bound() {
        let latch = Latch::new();
        let t = Instant::now();
        assert!(!latch.wait(Duration::from_millis(20)));
        assert!(t.elapsed() >= Duration::from_millis(20));
        let other = Arc::clone(&latch);
        let waiter = std::thread::spawn(move || other.wait(Duration::from_secs(30)));
        std::thread::sleep(Duration::from_millis(10));
        latch.open();
        assert!(waiter.join().unwrap());
        // Open stays open.
        assert!(latch.wait(Duration::ZERO));
    }
}
