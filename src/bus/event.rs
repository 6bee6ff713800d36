//! The `Event` vocabulary: what every source (tracker, sampler, launcher) tells the recorder.
//!
//! Sources emit `Stamped` events into one channel; the recorder folds them into a Run. Events
//! are serde types so that a run can be streamed to a record file and replayed into the same
//! Run. A source never formats output, and this module knows nothing of how events are produced.

use crate::model::{
    AccountEvent, Arg, CallCount, Io, LaunchError, Sample, SamplerInfo, Source, Syscalls,
    Termination,
};
use serde::{Deserialize, Serialize};

/// An event and when it happened, in nanoseconds since the command was launched.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Stamped {
    pub t_ns: u64,
    #[serde(flatten)]
    pub event: Event,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// The run begins: the command, the tracker following it, and the root's pid (not yet
    /// exec'd). `ppid` is ste's own pid.
    Start {
        command: Vec<Arg>,
        tracker: String,
        pid: i32,
        ppid: i32,
    },
    /// The machine the run ran on: its CPUs online, which no CPU rate of the run can pass.
    Machine { cpus: u32 },
    /// Something the report must say for the figures to be trusted (a fallback, a limit).
    Note { text: String },
    /// Where a figure of the Run comes from; declared by the source that produces it.
    Source { figure: String, source: Source },
    /// A new task. It is a new process when `child_tid == child_tgid`, else a new thread of
    /// `child_tgid`. `parent_tgid` is the process that created it.
    Fork {
        parent_tgid: i32,
        child_tid: i32,
        child_tgid: i32,
    },
    /// A successful exec in process `tgid`; `former_tid` is the thread that called it when
    /// it was not the leader. `argv` is `None` when it could not be read.
    Exec {
        tgid: i32,
        former_tid: i32,
        argv: Option<Vec<Arg>>,
    },
    /// An exec as [`Event::Exec`], whose argv was read from /proc but is not yet known to be
    /// this image's (the netlink tracker: the process ran on at every look of a short wait;
    /// see `track::argv_check`). Its [`Event::ExecArgv`] comes before any later event of the
    /// process; the live `EXEC:` line waits for it.
    ExecPending { tgid: i32, former_tid: i32 },
    /// The verdict on the argv of process `tgid`'s pending exec: the argv, or `None` when it
    /// may be a later image's (a doubt, counted by its own [`Event::Lost`]).
    ExecArgv { tgid: i32, argv: Option<Vec<Arg>> },
    /// Figures read from a live process: at its exit stop (ptrace), or at a sampling round
    /// when the tracker cannot stop exiting processes. Peaks only grow; I/O counters only grow.
    Accounts {
        tgid: i32,
        peak_rss_bytes: Option<u64>,
        io: Option<Io>,
    },
    /// A thread ended. For the leader (`tid == tgid`) the status is the process's, when known.
    Exit {
        tid: i32,
        tgid: i32,
        status: Option<Termination>,
    },
    /// The command's first process was reaped with this status.
    RootExit { status: Termination },
    /// The command could not be started.
    LaunchFailed { error: LaunchError },
    /// One sampling round of the memory curve.
    Sample { sample: Sample },
    /// Tracker events were lost; the counts are increments. `events_at_most` is `None` when
    /// the source cannot tell how many events this loss took.
    Lost {
        overruns: u64,
        events_at_most: Option<u64>,
        found_by_resync: u64,
        exits_missed: u64,
        /// Execs whose argv, read from /proc, may be a later image's (sent as `None`).
        #[serde(default)]
        argv_doubtful: u64,
    },
    /// How the sampler ran, once it has stopped.
    SamplerDone { info: Box<SamplerInfo> },
    /// The run is over. CPU of the reaped tree (`getrusage(RUSAGE_CHILDREN)`), ste's own cost,
    /// and, when ste stopped before every process had ended, why.
    End {
        user_ns: u64,
        sys_ns: u64,
        ste_cpu_ns: u64,
        ste_max_rss_bytes: u64,
        stopped_waiting: Option<String>,
    },
    /// Exact accounting: taskstats records, the exit stop's and wait4's figures, ste's cgroup
    /// (see `model::AccountEvent`).
    Accounting { event: AccountEvent },
    /// The map taken at the tree's highest snapshotted round (`--maps-at-peak`) and what the
    /// maps cost. Emitted once, when sampling has stopped.
    MemoryAtPeak {
        peak: Box<crate::model::maps::MemoryAtPeak>,
    },
    /// `--malloc` is on: the shim's path, and what ste knows of glibc's SDT probes.
    MallocStart { shim: String, probes: String },
    /// What one process image held at a sampling round.
    MallocSample {
        sample: crate::model::malloc::MallocSample,
    },
    /// What ste saw of a program at its exec (to explain an image without the shim).
    MallocExec {
        check: crate::model::malloc::ExecCheck,
    },
    /// One image's final figures, read from its segment when its process ended.
    MallocImage {
        image: Box<crate::model::malloc::MallocImage>,
    },
    /// The malloc source is done; the CPU it spent outside the sampler's rounds.
    MallocDone { cpu_ns: u64 },
    /// System calls made by one thread of `tgid` in the process's current image, sent when
    /// the thread exits or the process execs (`--syscalls=per-process`).
    SyscallsOf { tgid: i32, calls: Vec<CallCount> },
    /// The system calls of the whole tree, once it is over (`--syscalls`); `images` is empty:
    /// the recorder builds it from `SyscallsOf`.
    Syscalls { syscalls: Box<Syscalls> },
    /// glibc's `memory_*` SDT probes: what was attached (`text`, replacing the one of
    /// `MallocStart`) and the tree's hits, read when the tree is done (`--malloc`, ebpf);
    /// `counts` is `None` when no site could be attached.
    MallocProbes {
        text: String,
        counts: Option<Box<crate::model::malloc::SdtCounts>>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_serialize_flat_with_a_kind_tag() {
        let e = Stamped {
            t_ns: 5,
            event: Event::Fork {
                parent_tgid: 1,
                child_tid: 2,
                child_tgid: 2,
            },
        };
        let json = serde_json::to_string(&e).unwrap();
        assert_eq!(
            json,
            r#"{"t_ns":5,"kind":"fork","parent_tgid":1,"child_tid":2,"child_tgid":2}"#
        );
        let back: Stamped = serde_json::from_str(&json).unwrap();
        assert_eq!(back, e);
    }
}
