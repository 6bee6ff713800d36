//! Starting a helper thread on another CPU than its spawner's (`sched_getaffinity`,
//! `pthread_setaffinity_np`), for start-up work meant to run side by side.
//!
//! Why by hand: the scheduler queues a new thread where it sees room at that instant, often
//! behind the thread that spawned it. On a 2-CPU machine ste's BPF loading spawned helpers
//! that then waited, runnable, behind the spawner while the other CPU sat idle (a
//! `sched_switch` trace: bench/README.md). Moving
//! the new thread off the spawner's CPU before it first runs makes the work overlap. The
//! thread restores the spawner's whole CPU set as soon as it runs, so the load balancer may
//! still move it later. Owns nothing else; callers choose what runs where.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::thread::JoinHandle;

/// Spawns `f` on a thread named `name`, started on one of the spawner's allowed CPUs other
/// than the one the spawner is on (when there is one: otherwise where the scheduler puts it).
pub fn spawn_elsewhere<F, T>(name: &str, f: F) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let allowed = allowed_cpus();
    let elsewhere = allowed.and_then(|all| {
        // SAFETY: no arguments; returns the calling thread's CPU or -1.
        let here = unsafe { libc::sched_getcpu() };
        without(&all, here)
    });
    // Who goes first: the thread may run before the spawner moves it (then it stays where it
    // started), or after, and then it must not give its set back before it was taken.
    let pin = Arc::new(AtomicU8::new(FRESH));
    let thread_pin = Arc::clone(&pin);
    let handle = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            if thread_pin
                .compare_exchange(FRESH, STARTED, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                while thread_pin.load(Ordering::Acquire) != PINNED {
                    std::thread::yield_now();
                }
                if let Some(all) = allowed {
                    // Best effort: a thread left on the other CPUs only loses the balancer's
                    // help. SAFETY: sets the calling thread's CPU set from a valid set.
                    unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&all), &all) };
                }
            }
            f()
        })?;
    if let Some(set) = elsewhere
        && pin
            .compare_exchange(FRESH, PINNING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    {
        use std::os::unix::thread::JoinHandleExt;
        // The thread's id is set before `spawn` returns (CLONE_PARENT_SETTID), so this reaches
        // it before it first runs. Best effort, as above.
        // SAFETY: a live thread's handle (it waits for PINNED before it can end) and a valid set.
        unsafe {
            libc::pthread_setaffinity_np(handle.as_pthread_t(), std::mem::size_of_val(&set), &set)
        };
        pin.store(PINNED, Ordering::Release);
    }
    Ok(handle)
}

/// The states of the hand-over in [`spawn_elsewhere`].
const FRESH: u8 = 0;
const PINNING: u8 = 1;
const PINNED: u8 = 2;
const STARTED: u8 = 3;

/// The calling thread's allowed CPUs.
fn allowed_cpus() -> Option<libc::cpu_set_t> {
    // SAFETY: an all-zero cpu_set_t is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: fills `set`, of the size given.
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    (rc == 0).then_some(set)
}

/// `all` without CPU `cpu`, or `None` when nothing would be left (or `cpu` is unknown).
fn without(all: &libc::cpu_set_t, cpu: i32) -> Option<libc::cpu_set_t> {
    let cpu = usize::try_from(cpu).ok()?;
    let mut rest = *all;
    // SAFETY: CPU_CLR and CPU_COUNT bound-check `cpu` against the set's size.
    unsafe {
        libc::CPU_CLR(cpu, &mut rest);
        (libc::CPU_COUNT(&rest) > 0 && libc::CPU_COUNT(&rest) < libc::CPU_COUNT(all))
            .then_some(rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(cpus: &[usize]) -> libc::cpu_set_t {
        // SAFETY: an all-zero cpu_set_t is the empty set; CPU_SET bound-checks.
        let mut s: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &c in cpus {
            unsafe { libc::CPU_SET(c, &mut s) };
        }
        s
    }

    fn members(s: &libc::cpu_set_t) -> Vec<usize> {
        (0..64)
            .filter(|&c| unsafe { libc::CPU_ISSET(c, s) })
            .collect()
    }

    #[test]
    fn elsewhere_is_every_other_allowed_cpu() {
        let rest = without(&set(&[0, 1, 3]), 1).unwrap();
        assert_eq!(members(&rest), vec![0, 3]);
        // Nowhere else to go, a CPU outside the set, an unknown CPU: no move.
        assert!(without(&set(&[2]), 2).is_none());
        assert!(without(&set(&[0, 1]), 5).is_none());
        assert!(without(&set(&[0, 1]), -1).is_none());
    }

    #[test]
    fn the_thread_runs_with_its_whole_set_back() {
        let all = members(&allowed_cpus().unwrap());
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let h = spawn_elsewhere("test-elsewhere", move || {
            // By the time this reads, the spawner's move is over (it returned, then sent).
            wait.recv().unwrap();
            members(&allowed_cpus().unwrap())
        })
        .unwrap();
        go.send(()).unwrap();
        assert_eq!(h.join().unwrap(), all);
    }
}
