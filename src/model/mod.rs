//! The Run: everything ste learned about one command, as plain data.
//!
//! Owns the types every report renders and the JSON schema users read (`--json`). Depends on
//! std and serde only: no /proc, no terminal, no clock. Units are in the field names (`_ns`,
//! `_bytes`); a value ste could not learn is `None` (JSON `null`), never 0. Every figure's origin
//! and exactness is listed in `Run::sources`.

mod accounting;
mod arg;
pub mod malloc;
pub mod maps;
mod syscalls;
mod timeline;

pub use accounting::{
    AccountEvent, Accounting, BeforeRelease, DELAYS_OFF, Figures, Group, GroupEnd, GroupRound,
    Ledger, LedgerSource, Lingering, MemoryFigure, MemoryReconciled, PathLink, TimeBreakdown,
    TreeCpu, Unavailable, process_peak,
};
pub use arg::{Arg, Escaped, TOO_MANY_ARGS, bounded_args, invisible, join_escaped};
pub use syscalls::{CallCount, Counts, ErrnoCount, ImageCalls, SyscallRow, Syscalls, Uncounted};
pub use timeline::{ProcessSample, ThreadLifetime};

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Bumped whenever a field changes meaning or disappears (adding a field does not bump it).
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Run {
    /// Version of this schema ([`SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// `ste <version>` that produced the run.
    pub generator: String,
    /// The command as typed (argv of the root process before exec).
    pub command: Vec<Arg>,
    /// The process tracker that followed the tree: `ebpf`, `ptrace` or `netlink`.
    pub tracker: String,
    /// CPUs online on the machine when the run began: no CPU rate drawn of the run passes it.
    /// `None` in runs of older versions, which did not record it.
    #[serde(default)]
    pub machine_cpus: Option<u32>,
    /// Things the reader must know to trust the figures (fallbacks, missing privileges).
    pub notes: Vec<String>,
    /// How the command ended.
    pub exit: Exit,
    /// Figures for the whole tree.
    pub totals: Totals,
    /// Every process (thread group) that existed in the tree, in order of creation.
    pub processes: Vec<Process>,
    /// The memory curve: PSS summed over the live tree at each sampling round.
    pub samples: Vec<Sample>,
    /// How the memory curve was sampled.
    pub sampler: SamplerInfo,
    /// What observing cost and what was missed.
    pub overhead: Overhead,
    /// For each figure name: where it came from and whether it is exact.
    pub sources: BTreeMap<String, Source>,
    /// Exact accounting (taskstats, ste's cgroup, the ledger summaries); `None` when the run
    /// had none.
    #[serde(default)]
    pub accounting: Option<Accounting>,
    /// What filled memory at the tree's peak (`--maps-at-peak`, `ste maps -- COMMAND`);
    /// `None` when not asked for.
    #[serde(default)]
    pub memory_at_peak: Option<maps::MemoryAtPeak>,
    /// malloc behaviour per process image (`--malloc`); `None` when not asked for.
    #[serde(default)]
    pub malloc: Option<malloc::MallocRun>,
    /// System calls of the tree (`--syscalls`); `None` when they were not counted.
    pub syscalls: Option<Syscalls>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Exit {
    /// Exit code when the command exited normally.
    pub code: Option<i32>,
    /// Signal number when a signal killed the command.
    pub signal: Option<i32>,
    /// Whether the killed command dumped core.
    pub core_dumped: bool,
    /// Set when the command could not be started at all.
    pub launch_error: Option<LaunchError>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct LaunchError {
    /// `not_found` (exit 127), `not_executable` (126) or `other` (125).
    pub kind: LaunchErrorKind,
    /// One line for humans.
    pub message: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum LaunchErrorKind {
    NotFound,
    NotExecutable,
    Other,
}

/// ste's exit statuses of its own, beside the command's (as `env(1)` and `timeout(1)` give).
pub mod status {
    /// ste failed (the command may or may not have run: the message says).
    pub const STE_FAILED: i32 = 125;
    /// The command was found and could not be executed.
    pub const NOT_EXECUTABLE: i32 = 126;
    /// The command was not found.
    pub const NOT_FOUND: i32 = 127;
}

impl Exit {
    /// The status ste exits with: the command's code, 128+N for signal N, 127/126/125 when it
    /// could not start, as `time(1)`, `env(1)` and `timeout(1)` do.
    pub fn ste_status(&self) -> i32 {
        if let Some(err) = &self.launch_error {
            return match err.kind {
                LaunchErrorKind::NotFound => self::status::NOT_FOUND,
                LaunchErrorKind::NotExecutable => self::status::NOT_EXECUTABLE,
                LaunchErrorKind::Other => self::status::STE_FAILED,
            };
        }
        match (self.code, self.signal) {
            (Some(code), _) => code,
            (None, Some(sig)) => 128 + sig,
            (None, None) => self::status::STE_FAILED,
        }
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Totals {
    /// From the launch of the command until the last process of the tree ended (or ste stopped
    /// waiting for lingering ones).
    pub wall_ns: u64,
    /// User CPU of every reaped process in the tree.
    pub user_ns: Option<u64>,
    /// System CPU of every reaped process in the tree.
    pub sys_ns: Option<u64>,
    /// Processes (thread groups) that existed in the tree, the root included.
    pub processes: u64,
    /// Threads that existed in the tree, main threads included.
    pub threads: u64,
    /// Successful execs anywhere in the tree.
    pub execs: u64,
    /// Highest PSS summed over the live tree in one sample: an exact round, a carried tick
    /// (within `max_pss_bound_bytes`) or an exit's high-water mark (an upper bound; when its
    /// bound is the whole figure, no read saw the process and the text report says `n/a`).
    pub max_pss_bytes: Option<u64>,
    /// When that sample was taken.
    pub max_pss_t_ns: Option<u64>,
    /// How that sample was read.
    #[serde(default)]
    pub max_pss_kind: Option<SampleKind>,
    /// How far the truth may be from it (`null` for an exact round). Written by versions
    /// before `max_pss_low_bytes` and `max_pss_high_bytes`.
    #[serde(default)]
    pub max_pss_bound_bytes: Option<u64>,
    /// The largest lower bound of any sample: Max PSS was at least this (proven).
    #[serde(default)]
    pub max_pss_low_bytes: Option<u64>,
    /// The largest upper bound of any sample: at the moments sampled, the tree's PSS was never
    /// above this. Equal to `max_pss_low_bytes` (and to `max_pss_bytes`) when Max PSS is exact.
    #[serde(default)]
    pub max_pss_high_bytes: Option<u64>,
    /// Largest high-water RSS of a single process.
    pub peak_rss_bytes: Option<u64>,
    /// The process that had it.
    pub peak_rss_pid: Option<i32>,
    /// Processes still alive when ste stopped waiting (`--linger`, Ctrl-C).
    pub still_running: u64,
}

impl Totals {
    /// The tree's CPU: user + system of every reaped process (getrusage), exact but for
    /// threads that end before their process, each short of its last time slice (the kernel
    /// adds a thread's runtime to its process as it releases it, before its last switch).
    pub fn cpu_ns(&self) -> Option<u64> {
        Some(self.user_ns?.saturating_add(self.sys_ns?))
    }

    /// The tree's CPU, when per-process figures that sum to `records_ns` hold visibly less of
    /// it (under 90 %): taskstats's, each written before its thread's exit was over.
    pub fn cpu_short_of(&self, records_ns: u64) -> Option<u64> {
        self.cpu_ns()
            .filter(|&tree| tree > 0 && (records_ns as f64) < 0.9 * tree as f64)
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Process {
    /// Thread-group id.
    pub pid: i32,
    /// Parent at creation (the process that forked it); `None` when unknown.
    pub ppid: Option<i32>,
    /// Creation time, from the start of the run.
    pub start_ns: u64,
    /// When its last thread ended; `None` if it was still running or its end was missed.
    pub end_ns: Option<u64>,
    /// Exit code when it exited normally.
    pub exit_code: Option<i32>,
    /// Signal number when a signal killed it.
    pub signal: Option<i32>,
    /// Threads it had over its life, the main thread included.
    pub threads: u32,
    /// High-water RSS (`VmHWM`), read when it exited.
    pub peak_rss_bytes: Option<u64>,
    /// I/O counters (`/proc/PID/io`) read when it exited.
    pub io: Option<Io>,
    /// Each successful exec, in order. Empty for a process that forked and never exec'd.
    pub execs: Vec<Exec>,
    /// Exact figures by source (taskstats, the exit stop, wait4); `None` when no source
    /// measured this process.
    #[serde(default)]
    pub ledger: Option<Ledger>,
    /// Its threads other than the main thread, in order of creation (`threads - 1` of them
    /// when the tracker saw every one).
    #[serde(default)]
    pub thread_lifetimes: Vec<ThreadLifetime>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Exec {
    /// Time of the exec, from the start of the run.
    pub t_ns: u64,
    /// Full argv; `None` when the process was gone before it could be read (netlink only).
    pub argv: Option<Vec<Arg>>,
}

/// `/proc/PID/io` of a thread group. See proc(5).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Io {
    pub rchar_bytes: u64,
    pub wchar_bytes: u64,
    pub syscr: u64,
    pub syscw: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub cancelled_write_bytes: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct Sample {
    /// Time of the round, from the start of the run.
    pub t_ns: u64,
    /// PSS summed over the processes read in this round.
    pub pss_bytes: u64,
    /// RSS summed over the same processes (counts shared pages once per process).
    pub rss_bytes: u64,
    /// Processes read in this round.
    pub processes: u32,
    /// Live processes whose smaps_rollup could not be read (permission, gone).
    pub unreadable: u32,
    /// Each process read in this round; `None` when the sampler did not keep them (records
    /// and runs of older versions).
    #[serde(default)]
    pub per_process: Option<Vec<ProcessSample>>,
    /// How the figures were read: an exact read of every process, or carried by counters.
    #[serde(default)]
    pub kind: SampleKind,
    /// The most the true PSS sum can differ from `pss_bytes` (carried samples); `None` for an
    /// exact read. Written by versions before the interval below; read for their records.
    #[serde(default)]
    pub bound_bytes: Option<u64>,
    /// The interval the true PSS sum is proven to lie in at this moment (`pss_bytes` is the
    /// best estimate within it); both equal `pss_bytes` for an exact read. `None` in records of
    /// versions before it, whose `bound_bytes` gives it ([`Sample::low`], [`Sample::high`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub low_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high_bytes: Option<u64>,
}

impl Sample {
    /// The least the true PSS sum can be at this sample.
    pub fn low(&self) -> u64 {
        match (self.low_bytes, self.kind, self.bound_bytes) {
            (Some(l), _, _) => l,
            (None, SampleKind::Exact, _) | (None, _, None) => self.pss_bytes,
            (None, _, Some(b)) => self.pss_bytes.saturating_sub(b),
        }
    }

    /// The most the true PSS sum can be at this sample.
    pub fn high(&self) -> u64 {
        match (self.high_bytes, self.kind, self.bound_bytes) {
            (Some(h), _, _) => h,
            // An exit peak of an older version was an upper bound: its figure.
            (None, SampleKind::Exact | SampleKind::ExitPeak, _) | (None, _, None) => self.pss_bytes,
            (None, SampleKind::Carried, Some(b)) => self.pss_bytes.saturating_add(b),
        }
    }
}

/// How a memory sample was taken (see `sample::carry`).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum SampleKind {
    /// `smaps_rollup` of every live process, read in one round.
    #[default]
    Exact,
    /// Each process's last exact PSS plus what its `statm` counters moved since.
    Carried,
    /// At a process's exit: its carried PSS plus what its resident size grew beyond the
    /// largest ste read (the kernel's high-water mark), counted as private: an upper bound.
    ExitPeak,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct SamplerInfo {
    /// `adaptive` (kept within `budget`) or `fixed` (`--interval`).
    pub mode: String,
    /// CPU budget as a fraction of one core (adaptive mode).
    pub budget: Option<f64>,
    /// CPU the adaptive sampler may spend at once before the budget applies (its start-up
    /// allowance), so that short commands are sampled too.
    pub burst_ns: Option<u64>,
    /// The fixed period (fixed mode).
    pub interval_ns: Option<u64>,
    /// Sampling rounds taken (`paid_rounds` among them).
    pub rounds: u64,
    /// Rounds an observer asked for at a tick's new high and paid for from its own budget
    /// (`--maps-at-peak`): not in `cpu_ns`, which is the sampler's.
    #[serde(default)]
    pub paid_rounds: u64,
    /// Wall time covered divided by rounds; `None` with fewer than two rounds.
    pub effective_interval_ns: Option<u64>,
    /// Longest time between two consecutive rounds.
    pub max_gap_ns: Option<u64>,
    /// Longest time the live tree went unread (no tick nor round): how long the chart and the
    /// carried figures were blind.
    #[serde(default)]
    pub max_look_gap_ns: Option<u64>,
    /// CPU the sampler spent reading /proc (exact rounds and counter ticks), paid rounds aside.
    pub cpu_ns: u64,
    /// Counter ticks taken (`/proc/PID/statm` of every live process) between exact rounds.
    #[serde(default)]
    pub ticks: u64,
    /// Wall time covered divided by ticks; `None` with fewer than two ticks.
    #[serde(default)]
    pub effective_tick_ns: Option<u64>,
    /// The part of `cpu_ns` the ticks took.
    #[serde(default)]
    pub tick_cpu_ns: u64,
    /// How long after an exec a process is first read (its libraries mapped by then).
    #[serde(default)]
    pub exec_settle_ns: Option<u64>,
    /// CPU of the costliest exact round (the budget may be overdrawn by one, at an exit).
    #[serde(default)]
    pub max_round_cpu_ns: Option<u64>,
    /// CPU of the costliest tick, with the thread's CPU charged to it (ticks stop once the
    /// bucket is in debt past `tick_debt_ns`, so the last may overdraw it by one tick).
    #[serde(default)]
    pub max_tick_cpu_ns: Option<u64>,
    /// How far ticks may run the budget into debt before they wait for it (adaptive mode).
    #[serde(default)]
    pub tick_debt_ns: Option<u64>,
    /// Rounds that read every process at one moment: the exact samples (`None` in runs of
    /// versions before it).
    #[serde(default)]
    pub moments: Option<u64>,
    /// Rounds taken beyond the budget because the maximum's interval was wider than its
    /// target (what the counters could not tell, shared memory mostly), and their CPU,
    /// counted in `cpu_ns` (adaptive mode).
    #[serde(default)]
    pub max_rounds: Option<u64>,
    #[serde(default)]
    pub max_rounds_cpu_ns: Option<u64>,
    /// Whether each process's high-water mark at its exit reached the sampler (ebpf; ptrace's
    /// exit stop; netlink with taskstats, as root): `false` when none could (netlink without
    /// taskstats), so growth after a process's last read is unseen and Max PSS has no proven
    /// upper end. `None` in runs of versions before it.
    #[serde(default)]
    pub exit_marks: Option<bool>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Overhead {
    /// ste's own CPU (user + system, all its threads) during the run.
    pub cpu_ns: Option<u64>,
    /// ste's own peak RSS.
    pub max_rss_bytes: Option<u64>,
    /// Tracker events known to be lost. `Some(0)`: none lost. `None`: some were lost and the
    /// kernel did not say how many (see `lost`).
    pub lost_events: Option<u64>,
    /// Details of what was lost and how ste recovered.
    pub lost: Lost,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Lost {
    /// Times the kernel reported a receive-buffer overrun (netlink `ENOBUFS`), or the ebpf
    /// tracker found its ring buffer had dropped records.
    pub overruns: u64,
    /// Upper bound of events dropped: the ebpf ring's count of dropped records; netlink's
    /// sequence-number gaps on a socket that gets every event (they may include events of
    /// other processes on the machine). `None` once a loss of unknown size happened: an
    /// overrun of a filtered netlink socket, events the proc connector dropped unsaid.
    pub events_at_most: Option<u64>,
    /// Execs whose argv could not be read because the process was already gone.
    pub argv_unread: u64,
    /// Execs whose argv was not shown because the read may have returned a later image's
    /// (the process may have exec'd again first); not counted in `argv_unread`.
    #[serde(default)]
    pub argv_doubtful: u64,
    /// Processes found only by rescanning /proc after an overrun.
    pub found_by_resync: u64,
    /// Processes whose end was never reported (their exit event was lost).
    pub exits_missed: u64,
}

impl Default for Lost {
    fn default() -> Lost {
        Lost {
            overruns: 0,
            events_at_most: Some(0),
            argv_unread: 0,
            argv_doubtful: 0,
            found_by_resync: 0,
            exits_missed: 0,
        }
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// Where the figure comes from (a kernel interface, a system call).
    pub from: String,
    /// `true` when the kernel counted it; `false` when ste sampled or estimated it.
    pub exact: bool,
    /// Anything that qualifies it (the sampling interval, what is left out).
    pub note: Option<String>,
}

impl Source {
    pub fn exact(from: impl Into<String>) -> Self {
        Source {
            from: from.into(),
            exact: true,
            note: None,
        }
    }

    pub fn sampled(from: impl Into<String>, note: impl Into<String>) -> Self {
        Source {
            from: from.into(),
            exact: false,
            note: Some(note.into()),
        }
    }
}

/// How a process or thread ended, as `wait(2)` reports it.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Termination {
    Exited(i32),
    Signaled { signal: i32, core_dumped: bool },
}

impl Termination {
    /// Decodes a raw wait status (`WIFEXITED`/`WIFSIGNALED` layout, also used by the proc
    /// connector's `exit_code`). Returns `None` for stop/continue statuses.
    pub fn from_wait_status(status: i32) -> Option<Self> {
        let sig = status & 0x7f;
        if sig == 0 {
            Some(Termination::Exited((status >> 8) & 0xff))
        } else if sig != 0x7f {
            Some(Termination::Signaled {
                signal: sig,
                core_dumped: status & 0x80 != 0,
            })
        } else {
            None
        }
    }

    pub fn code(self) -> Option<i32> {
        match self {
            Termination::Exited(c) => Some(c),
            Termination::Signaled { .. } => None,
        }
    }

    pub fn signal(self) -> Option<i32> {
        match self {
            Termination::Exited(_) => None,
            Termination::Signaled { signal, .. } => Some(signal),
        }
    }
}

/// The Linux name of a standard signal (`SIGKILL`), or `signal N` for real-time and unknown
/// numbers. The numbers are the x86/arm generic ABI, fixed since Linux 1.0.
pub fn signal_name(signal: i32) -> String {
    const NAMES: [&str; 32] = [
        "",
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    match usize::try_from(signal).ok().and_then(|i| NAMES.get(i)) {
        Some(name) if !name.is_empty() => (*name).to_string(),
        _ => format!("signal {signal}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_names() {
        assert_eq!(signal_name(9), "SIGKILL");
        assert_eq!(signal_name(15), "SIGTERM");
        assert_eq!(signal_name(40), "signal 40");
    }

    #[test]
    fn wait_status_decoding() {
        assert_eq!(
            Termination::from_wait_status(0),
            Some(Termination::Exited(0))
        );
        assert_eq!(
            Termination::from_wait_status(3 << 8),
            Some(Termination::Exited(3))
        );
        assert_eq!(
            Termination::from_wait_status(9),
            Some(Termination::Signaled {
                signal: 9,
                core_dumped: false
            })
        );
        assert_eq!(
            Termination::from_wait_status(0x80 | 11),
            Some(Termination::Signaled {
                signal: 11,
                core_dumped: true
            })
        );
        assert_eq!(Termination::from_wait_status(0x137f), None);
    }

    #[test]
    fn ste_status_follows_time_and_env() {
        let exited = Exit {
            code: Some(3),
            ..Default::default()
        };
        assert_eq!(exited.ste_status(), 3);
        let killed = Exit {
            signal: Some(9),
            ..Default::default()
        };
        assert_eq!(killed.ste_status(), 137);
        let missing = Exit {
            launch_error: Some(LaunchError {
                kind: LaunchErrorKind::NotFound,
                message: String::new(),
            }),
            ..Default::default()
        };
        assert_eq!(missing.ste_status(), 127);
    }
}
