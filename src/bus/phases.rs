//! `STE_PHASES=1`: how long each phase of ste's own start-up and end took, printed on stderr
//! when the run is over (a diagnostic, like `STE_KERNEL_BTF`: issue 2 budgets ste's start-up at
//! 5 ms over the bare command, and this shows where those milliseconds go, thread by thread,
//! since phases run side by side).
//!
//! A leaf: imports nothing of the crate, so any room may log a phase (the BPF loader does).
//! Owns only its log; it measures what callers wrap in [`span`] and changes nothing else. With
//! the variable unset a span costs one load of an initialised `OnceLock`.

use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

struct Log {
    t0: Instant,
    /// CLOCK_MONOTONIC at `t0`, so an outside timer can place the log (`bench/paired.py`
    /// and friends time with the same clock).
    t0_monotonic_ns: u64,
    /// (phase, thread, start since t0, length)
    spans: Mutex<Vec<(&'static str, String, Duration, Duration)>>,
}

static LOG: OnceLock<Option<Log>> = OnceLock::new();

fn log() -> Option<&'static Log> {
    LOG.get_or_init(|| {
        std::env::var_os("STE_PHASES").map(|_| Log {
            t0: Instant::now(),
            // nix's clock, not `sink`'s: the BPF loader in `kernel/` logs its phases here, and
            // this file importing nothing of the crate keeps kernel → phases from closing a
            // circle back into `kernel` through `sink`.
            t0_monotonic_ns: nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
                .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
                .expect("CLOCK_MONOTONIC exists on every Linux"),
            spans: Mutex::new(Vec::new()),
        })
    })
    .as_ref()
}

/// Sets time zero of the log (the first call of any function here does).
pub fn start() {
    log();
}

/// Runs `f`, logging how long it took as `phase` when `STE_PHASES` is set.
pub fn span<T>(phase: &'static str, f: impl FnOnce() -> T) -> T {
    let Some(log) = log() else { return f() };
    let a = Instant::now();
    let out = f();
    let b = Instant::now();
    let thread = std::thread::current().name().unwrap_or("?").to_string();
    if let Ok(mut spans) = log.spans.lock() {
        spans.push((phase, thread, a - log.t0, b - a));
    }
    out
}

/// Prints the log on stderr, in order of start, when `STE_PHASES` is set.
pub fn print() {
    let Some(log) = log() else { return };
    let Ok(mut spans) = log.spans.lock() else {
        return;
    };
    spans.sort_by_key(|s| s.2);
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    eprintln!(
        "ste: phases from CLOCK_MONOTONIC {} ns, printed at {:.3} ms",
        log.t0_monotonic_ns,
        ms(log.t0.elapsed())
    );
    for (phase, thread, at, len) in spans.iter() {
        eprintln!(
            "ste: phase {:>8.3} ms +{:>7.3} ms  {phase} [{thread}]",
            ms(*at),
            ms(*len)
        );
    }
}
