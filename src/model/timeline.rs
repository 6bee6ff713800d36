//! Per-process figures over time: what each live process held at a sampling round, and when
//! each thread of a process lived. They let reports stack memory and CPU by process and draw a
//! track per thread (HTML, Perfetto), where the rest of the Run has only totals.
//!
//! Plain data (std + serde), like the rest of `model`. Only processes alive at a round appear
//! in it, so a run of 100,000 short processes stays small.

use serde::{Deserialize, Serialize};

/// One process as read in one sampling round.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessSample {
    /// Thread-group id. With pid reuse, the process is the one of this pid alive at the
    /// round's time.
    pub pid: i32,
    /// Its PSS (`/proc/PID/smaps_rollup`).
    pub pss_bytes: u64,
    /// Its user + system CPU so far, all threads (`/proc/PID/stat` utime + stime, in clock
    /// ticks of 10 ms on Linux); `None` when stat could not be read.
    pub cpu_ns: Option<u64>,
}

/// A thread of a process other than its main thread.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadLifetime {
    /// Thread id.
    pub tid: i32,
    /// Creation time, from the start of the run.
    pub start_ns: u64,
    /// When it ended (or was replaced by an exec); `None` if it was still running or its end
    /// was missed.
    pub end_ns: Option<u64>,
}
