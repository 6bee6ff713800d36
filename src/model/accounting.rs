//! Exact accounting in the Run: each process's ledger (figures grouped by the source that
//! measured them), the cgroup's group figures, and what is derived from them at the end (the
//! three memory figures reconciled, where the wall time went, the critical path, the lingering
//! descendants).
//!
//! Plain data (std + serde). A figure a source did not measure is absent from that source's
//! group (`null`), never 0; which interface each source is, and how exact, is in
//! `Run::sources` under `ledger.<source>`.

use serde::{Deserialize, Serialize};

/// A source of per-process figures, best first where two give the same figure: a process's
/// CPU is final only once its exit is over, and `do_exit` tears the process's memory down
/// (tens of milliseconds for a GiB) after taskstats writes its record and after the ptrace
/// exit stop, so those two come last for it. (The order is this list's, not the records':
/// they name each source.)
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum LedgerSource {
    /// Each thread's CPU read by BPF at its last switch (root, ebpf tracker): user, system
    /// and CPU only, the runtime final.
    LastSwitch,
    /// `wait4` rusage at the ptrace end of the process, less that of the children it reaped:
    /// read once the process is gone, its exit included (short only by the rest of the last
    /// time slice of each thread that ended before it).
    Wait4,
    /// taskstats exit records (root): one per exiting thread, summed.
    Taskstats,
    /// /proc files read at the ptrace exit stop, while the memory is still attached.
    ExitStop,
}

impl LedgerSource {
    pub fn name(self) -> &'static str {
        match self {
            LedgerSource::LastSwitch => "last_switch",
            LedgerSource::Taskstats => "taskstats",
            LedgerSource::ExitStop => "exit_stop",
            LedgerSource::Wait4 => "wait4",
        }
    }
}

/// Figures of one process from one source. Counters are sums over its threads; peaks are the
/// high-water marks of its memory.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Figures {
    /// User CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_ns: Option<u64>,
    /// System CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sys_ns: Option<u64>,
    /// Time on a CPU (the scheduler's exact runtime, user + system).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_ns: Option<u64>,
    /// Time runnable but waiting for a CPU (run-queue wait).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_queue_ns: Option<u64>,
    /// Time waiting for synchronous block I/O (delay accounting).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blkio_delay_ns: Option<u64>,
    /// Time waiting for swap-in, direct reclaim, thrashing and compaction (delay accounting).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap_reclaim_delay_ns: Option<u64>,
    /// Sum of its threads' lifetimes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_time_ns: Option<u64>,
    /// High-water resident set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_bytes: Option<u64>,
    /// High-water virtual size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_vm_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minor_faults: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub major_faults: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voluntary_switches: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub involuntary_switches: Option<u64>,
    /// Bytes read from storage (`read_bytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_bytes: Option<u64>,
    /// Bytes written to storage (`write_bytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_bytes: Option<u64>,
    /// Bytes passed to read-like system calls (`rchar`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_char_bytes: Option<u64>,
    /// Bytes passed to write-like system calls (`wchar`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_char_bytes: Option<u64>,
    /// Exit status in wait-status layout, from the thread-group leader's record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<i32>,
}

fn add(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.saturating_add(b)),
        (a, b) => a.or(b),
    }
}

fn max(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

impl Figures {
    /// Folds in the figures of another thread (or another read) of the same process.
    pub fn fold(&mut self, o: &Figures) {
        self.user_ns = add(self.user_ns, o.user_ns);
        self.sys_ns = add(self.sys_ns, o.sys_ns);
        self.cpu_ns = add(self.cpu_ns, o.cpu_ns);
        self.run_queue_ns = add(self.run_queue_ns, o.run_queue_ns);
        self.blkio_delay_ns = add(self.blkio_delay_ns, o.blkio_delay_ns);
        self.swap_reclaim_delay_ns = add(self.swap_reclaim_delay_ns, o.swap_reclaim_delay_ns);
        self.task_time_ns = add(self.task_time_ns, o.task_time_ns);
        self.peak_rss_bytes = max(self.peak_rss_bytes, o.peak_rss_bytes);
        self.peak_vm_bytes = max(self.peak_vm_bytes, o.peak_vm_bytes);
        self.minor_faults = add(self.minor_faults, o.minor_faults);
        self.major_faults = add(self.major_faults, o.major_faults);
        self.voluntary_switches = add(self.voluntary_switches, o.voluntary_switches);
        self.involuntary_switches = add(self.involuntary_switches, o.involuntary_switches);
        self.read_bytes = add(self.read_bytes, o.read_bytes);
        self.write_bytes = add(self.write_bytes, o.write_bytes);
        self.read_char_bytes = add(self.read_char_bytes, o.read_char_bytes);
        self.write_char_bytes = add(self.write_char_bytes, o.write_char_bytes);
        self.exit_status = o.exit_status.or(self.exit_status);
    }
}

impl Figures {
    /// Leaves out what the command's first process did before ste released it (see
    /// [`BeforeRelease`]): its life then, its CPU (taken from user and system time in
    /// proportion, so they still add up to it) and its wait for a CPU.
    pub fn without(&mut self, before: &BeforeRelease) {
        let sub = |v: &mut Option<u64>, by: Option<u64>| {
            if let (Some(v), Some(by)) = (v.as_mut(), by) {
                *v = v.saturating_sub(by);
            }
        };
        sub(&mut self.task_time_ns, Some(before.alive_ns));
        sub(&mut self.run_queue_ns, before.run_queue_ns);
        if let (Some(cpu), Some(u), Some(s)) = (before.cpu_ns, self.user_ns, self.sys_ns)
            && u + s > 0
        {
            let from_sys = (u128::from(cpu.min(u + s)) * u128::from(s) / u128::from(u + s)) as u64;
            self.sys_ns = Some(s - from_sys);
            self.user_ns = Some(u - (cpu.min(u + s) - from_sys));
        }
        sub(&mut self.cpu_ns, before.cpu_ns);
        sub(&mut self.read_char_bytes, before.read_char_bytes);
        sub(&mut self.write_char_bytes, before.write_char_bytes);
    }
}

/// The command's first process before ste released it: ste starts it before its own set-up
/// (BPF, the cgroup, taskstats), and it waits, blocked, until ste lets it exec. Every source
/// of per-process figures counts that time as the process's (taskstats' task time, the CPU
/// and run-queue wait of schedstat and taskstats, wait4's CPU), where the Run's time zero is
/// the release: the fold leaves these out of its ledger.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BeforeRelease {
    pub pid: i32,
    /// From its start to its release: from the kernel's start time when taskstats gave it
    /// (root), else from just before ste's clone (see `account::Session::before_release`).
    pub alive_ns: u64,
    /// On a CPU meanwhile (its `schedstat`, read as it was released); `null` when unread.
    pub cpu_ns: Option<u64>,
    /// Runnable but waiting for a CPU meanwhile (its `schedstat`); `null` when unread.
    pub run_queue_ns: Option<u64>,
    /// Bytes ste's launch code read and wrote in it meanwhile (its pipes, the cgroup files it
    /// joined: `launch::Child::setup_io`), which the kernel counts as the process's `rchar`
    /// and `wchar`; absent in records written before ste counted them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_char_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_char_bytes: Option<u64>,
}

/// A process's exact figures, grouped by the source that measured them.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct Ledger {
    /// Each task's figures as it left a CPU for the last time (ebpf), summed: the CPU and task
    /// time always, the rest of the ledger where the kernel's BTF let BPF read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_switch: Option<Box<Figures>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taskstats: Option<Box<Figures>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_stop: Option<Box<Figures>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait4: Option<Box<Figures>>,
    /// taskstats records folded in: one per thread that exited.
    pub taskstats_records: u32,
}

impl Ledger {
    /// Adds the figures of one record (or one process) from `s`.
    pub fn fold(&mut self, s: LedgerSource, f: &Figures) {
        let group = match s {
            LedgerSource::LastSwitch => {
                // The source gives all three; a record that lacks one adds nothing.
                if f.user_ns.is_none() || f.sys_ns.is_none() || f.cpu_ns.is_none() {
                    return;
                }
                match self.last_switch.as_deref_mut() {
                    None => self.last_switch = Some(Box::new(*f)),
                    Some(sum) => {
                        // A sum of lives is known only when every part is.
                        let task_time_ns = sum
                            .task_time_ns
                            .zip(f.task_time_ns)
                            .map(|(a, b)| a.saturating_add(b));
                        sum.fold(f);
                        sum.task_time_ns = task_time_ns;
                    }
                }
                return;
            }
            LedgerSource::Taskstats => &mut self.taskstats,
            LedgerSource::ExitStop => &mut self.exit_stop,
            LedgerSource::Wait4 => &mut self.wait4,
        };
        group.get_or_insert_with(Default::default).fold(f);
    }

    /// Leaves out, in every source, what the command's first process did before its release.
    /// The trackers' task times (`last_switch`, `wait4`) already start at the release.
    pub fn without(&mut self, before: &BeforeRelease) {
        for f in [&mut self.last_switch, &mut self.wait4]
            .into_iter()
            .flatten()
        {
            let from_release = f.task_time_ns;
            f.without(before);
            f.task_time_ns = from_release;
        }
        if let Some(f) = self.exit_stop.as_deref_mut() {
            f.without(before);
        }
        if let Some(f) = self.taskstats.as_deref_mut() {
            // Its I/O counters are rounded down to KiB: a few bytes less would make them
            // neither the kernel's figure nor the truth.
            f.without(&BeforeRelease {
                read_char_bytes: None,
                write_char_bytes: None,
                ..*before
            });
        }
    }

    /// A figure from the best source that measured it ([`LedgerSource`]'s order): the CPU read
    /// at each thread's last switch first (final), then wait4's (read after the exit), where
    /// taskstats's record and the ptrace exit stop come before the exit's own work (the
    /// memory's teardown) and the last time slice.
    pub fn best(&self, pick: impl Fn(&Figures) -> Option<u64>) -> Option<(u64, LedgerSource)> {
        [
            (LedgerSource::LastSwitch, self.last_switch.as_deref()),
            (LedgerSource::Wait4, self.wait4.as_deref()),
            (LedgerSource::Taskstats, self.taskstats.as_deref()),
            (LedgerSource::ExitStop, self.exit_stop.as_deref()),
        ]
        .into_iter()
        .find_map(|(s, f)| f.and_then(&pick).map(|v| (v, s)))
    }

    /// User + system CPU, or the exact runtime when no split is known.
    pub fn cpu(&self) -> Option<(u64, LedgerSource)> {
        self.best(|f| f.cpu_ns.or_else(|| Some(f.user_ns? + f.sys_ns?)))
    }

    /// Storage I/O: bytes read + written.
    pub fn io_bytes(&self) -> Option<(u64, LedgerSource)> {
        self.best(|f| Some(f.read_bytes? + f.write_bytes?))
    }
}

/// What an accounting source changed in the Run (the payload of `Event::Accounting`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(tag = "what", rename_all = "snake_case")]
pub enum AccountEvent {
    /// Figures of process `tgid` (one thread's, or the whole process's), folded into its ledger.
    /// `start_ns` is the process's start in the Run, which tells reused pids apart (taskstats
    /// records may arrive after the tracker saw the process end); `None`: the live process, or,
    /// when none is, the newest that ended (figures read at a task's last switch, just after
    /// its end).
    Ledger {
        tgid: i32,
        start_ns: Option<u64>,
        source: LedgerSource,
        figures: Box<Figures>,
    },
    /// ste ran the command in its own cgroup: the version (1 or 2) and directories.
    Group { version: u8, dirs: Vec<String> },
    /// The group's memory at a sampling round that raised its usage, anon or file maximum.
    GroupSample {
        usage_bytes: u64,
        anon_bytes: u64,
        file_bytes: u64,
    },
    /// The group's exact figures once the tree has ended.
    GroupEnd { end: Box<GroupEnd> },
    /// An exact figure ste could not measure on this run, and why.
    Unavailable { figure: String, why: String },
    /// Whether delay accounting (`kernel.task_delayacct`) was on for the run, and whether ste
    /// switched it on (`--delays`).
    Delays { on: bool, switched_by_ste: bool },
    /// The taskstats receive buffer overflowed: exit records were dropped.
    TaskstatsOverrun,
    /// An exit record longer than ste's receive slot came cut short: its figures are lost.
    TaskstatsCut,
    /// The command's first process as ste released it: what it did before is ste's set-up.
    BeforeRelease { before: BeforeRelease },
    /// ste ended the descendants still running after the command (`--kill-lingering`).
    KilledLingering {
        pids: Vec<i32>,
        signal: i32,
        via: String,
    },
}

impl AccountEvent {
    /// The process the event is about, if any.
    pub fn process(&self) -> Option<(i32, Option<u64>)> {
        match self {
            AccountEvent::Ledger { tgid, start_ns, .. } => Some((*tgid, *start_ns)),
            _ => None,
        }
    }
}

/// The cgroup's exact figures at the end of the run.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GroupEnd {
    /// Highest memory charged to the group: anon, page cache and (v1) kernel memory.
    pub memory_peak_bytes: Option<u64>,
    /// Highest kernel memory charged (v1 `memory.kmem.max_usage_in_bytes`).
    pub kernel_peak_bytes: Option<u64>,
    /// Anonymous memory still charged at the end.
    pub anon_bytes: Option<u64>,
    /// Page cache still charged at the end (files the tree read or wrote).
    pub file_bytes: Option<u64>,
    pub cpu_user_ns: Option<u64>,
    pub cpu_sys_ns: Option<u64>,
    /// User + system CPU of everything that ran in the group.
    pub cpu_ns: Option<u64>,
    /// Most processes and threads alive at once in the group.
    pub pids_peak: Option<u64>,
    /// Processes of the group the kernel's OOM killer killed, a limit's or the machine's (v2
    /// `memory.events` `oom_kill`, v1 `memory.oom_control` `oom_kill`); absent in runs of
    /// older versions and where the group has no memory controller.
    #[serde(default)]
    pub oom_kills: Option<u64>,
}

/// ste's cgroup and what it measured.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct Group {
    /// 1 (v1 controllers) or 2 (unified hierarchy).
    pub version: u8,
    /// The directories created, one per hierarchy.
    pub dirs: Vec<String>,
    /// Exact figures read at the end.
    pub end: Option<GroupEnd>,
    /// Highest usage seen at a sampling round, and the anon/file split at that round.
    pub sampled_peak_bytes: Option<u64>,
    pub sampled_peak_anon_bytes: Option<u64>,
    pub sampled_peak_file_bytes: Option<u64>,
    /// When that round was taken.
    pub sampled_peak_t_ns: Option<u64>,
    /// Highest anonymous and file memory seen at any round.
    pub max_anon_bytes: Option<u64>,
    pub max_file_bytes: Option<u64>,
    /// The sampling rounds (every 20 ms) that raised the group's usage, anon or file maximum,
    /// in time order; rounds that raised none are not recorded, so these trace the group's
    /// high-water marks over time, not its every fall. Empty in runs of older versions.
    #[serde(default)]
    pub rounds: Vec<GroupRound>,
}

/// The cgroup's memory at one sampling round.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupRound {
    pub t_ns: u64,
    /// Memory charged to the group (v2 `memory.current`, v1 `memory.usage_in_bytes`).
    pub usage_bytes: u64,
    /// Anonymous memory (`memory.stat` `anon`, v1 `total_rss`).
    pub anon_bytes: u64,
    /// Page cache (`memory.stat` `file`, v1 `total_cache`).
    pub file_bytes: u64,
}

/// One of the three memory figures, with where it came from.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct MemoryFigure {
    pub bytes: u64,
    /// `true` when the kernel counted it; `false` when it was sampled.
    pub exact: bool,
    pub from: String,
    /// The process it belongs to (largest single peak).
    pub pid: Option<i32>,
    /// Processes that contributed (summed peaks).
    pub processes: Option<u64>,
}

/// The three memory figures, side by side.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct MemoryReconciled {
    /// The whole group's peak (cgroup): includes page cache and kernel memory.
    pub group_peak: Option<MemoryFigure>,
    /// The largest high-water RSS of a single process.
    pub largest_process_peak: Option<MemoryFigure>,
    /// High-water RSS summed over every process: an upper bound on the tree's resident set
    /// (processes that never lived at the same time are added, shared pages count once each).
    pub summed_process_peaks: Option<MemoryFigure>,
    /// The PSS curve's maximum (sampled).
    pub pss_max: Option<MemoryFigure>,
    /// The sampling interval behind `pss_max`.
    pub pss_interval_ns: Option<u64>,
}

/// Where the wall time went, summed over every task (thread) of the tree.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct TimeBreakdown {
    pub wall_ns: u64,
    /// Sum of the lifetimes of every task: the time to account for.
    pub task_time_ns: Option<u64>,
    pub user_ns: Option<u64>,
    pub sys_ns: Option<u64>,
    /// On a CPU (user + system, exact), when no split is known.
    pub cpu_ns: Option<u64>,
    pub run_queue_ns: Option<u64>,
    /// `None` unless delay accounting was on.
    pub blkio_ns: Option<u64>,
    pub swap_reclaim_ns: Option<u64>,
    /// The rest: sleeping, waiting for children, pipes, the network, locks.
    pub other_ns: Option<u64>,
    /// The sources used, e.g. `taskstats`.
    pub from: String,
    /// Processes without figures (their time is left out).
    pub processes_without_figures: u64,
}

/// One process on the critical path.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct PathLink {
    pub pid: i32,
    pub start_ns: u64,
    pub end_ns: Option<u64>,
    /// Time on the path not covered by the next link (before it started, after it ended).
    pub self_ns: u64,
}

/// A descendant still running when the command's first process ended.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Lingering {
    pub pid: i32,
    /// When it ended; `None` if ste stopped waiting first.
    pub end_ns: Option<u64>,
    /// Ended by ste (`--kill-lingering`).
    pub killed: bool,
}

/// Everything exact accounting added to the Run.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct Accounting {
    /// ste's own cgroup; `None` when it could not make one (see `unavailable`).
    pub group: Option<Group>,
    /// Exact figures that could not be measured on this run, and why.
    pub unavailable: Vec<Unavailable>,
    /// Delay accounting was on during the run (block I/O and swap waits are measured).
    pub delays_on: Option<bool>,
    /// ste switched it on for the run (`--delays`) and back off afterwards.
    pub delays_switched_by_ste: bool,
    /// Times the taskstats receive buffer overflowed (records lost).
    pub taskstats_overruns: u64,
    /// Exit records longer than ste's receive slot, cut short (records lost).
    #[serde(default)]
    pub taskstats_cut: u64,
    /// Processes whose figures came from taskstats but miss some of their threads' records.
    pub taskstats_incomplete: u64,
    pub memory: MemoryReconciled,
    pub time: Option<TimeBreakdown>,
    /// The chain of processes whose lifetimes bound the wall time, root first.
    pub critical_path: Vec<PathLink>,
    /// Descendants that outlived the command's first process.
    pub lingering: Vec<Lingering>,
    /// The signal ste ended lingering descendants with, and how (`cgroup` or `pids`).
    pub killed_lingering: Option<String>,
    /// The command's first process before its release, left out of its ledger.
    #[serde(default)]
    pub before_release: Option<BeforeRelease>,
    /// The tree's CPU from a source that counts every process, which getrusage (`Totals`'s
    /// `user_ns` and `sys_ns`) does not: `None` when no such source measured any.
    #[serde(default)]
    pub tree_cpu: Option<TreeCpu>,
}

/// The tree's CPU by a source that sees every process, auto-reaped ones included: the kernel
/// reaps a child at once when its parent ignores SIGCHLD (or set `SA_NOCLDWAIT`), so no wait
/// adds its CPU to its parent's children's usage, and getrusage(RUSAGE_CHILDREN) of ste never
/// counts it (nor anything it reaped itself).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct TreeCpu {
    /// User + system.
    pub cpu_ns: u64,
    pub user_ns: Option<u64>,
    pub sys_ns: Option<u64>,
    /// The source: the group's (`cgroup v1 cpuacct.usage`, `cgroup v2 cpu.stat`), or the
    /// per-process ledger summed (its sources, e.g. `last_switch`).
    pub from: String,
    /// `true` for the group's figure and for a ledger whose every process has its CPU from its
    /// last switch; otherwise a lower bound (a process without a figure, one read early in its
    /// exit, or wait4's, which takes a child the kernel reaped off its parent as if the parent had
    /// reaped it).
    pub exact: bool,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    pub figure: String,
    pub why: String,
}

/// The figure of the [`Unavailable`] that says delay accounting was off and not asked for
/// (`--delays`): the machine's setting, the same on every run, which the default report
/// leaves to `-v`.
pub const DELAYS_OFF: &str = "block-I/O and swap/reclaim waits";

/// A process's high-water RSS and where it came from, as (bytes, source, exact). `VmHWM`
/// read at the ptrace exit stop comes first: the kernel sums its per-CPU RSS counters for
/// /proc, while taskstats reads them unsummed and can be a few dozen pages off.
pub fn process_peak(run: &super::Run, p: &super::Process) -> Option<(u64, String, bool)> {
    let core = run.sources.get("peak_rss_bytes");
    if let (Some(v), Some(src)) = (p.peak_rss_bytes, core)
        && src.exact
    {
        return Some((v, src.from.clone(), true));
    }
    if let Some((v, s)) = p.ledger.as_ref().and_then(|l| l.best(|f| f.peak_rss_bytes)) {
        let from = match s {
            LedgerSource::Taskstats => "taskstats hiwater_rss",
            LedgerSource::LastSwitch => "VmHWM read by BPF at the process's exit",
            // As exact as the tracker declared its reads of VmHWM there (before Linux 6.2, a
            // lower bound: its source says why).
            LedgerSource::ExitStop | LedgerSource::Wait4 => {
                if let Some(src) = core.filter(|c| !c.exact) {
                    return Some((v, src.from.clone(), false));
                }
                "VmHWM at the ptrace exit stop"
            }
        };
        return Some((v, from.to_string(), true));
    }
    let v = p.peak_rss_bytes?;
    Some((
        v,
        core.map_or_else(|| "VmHWM".to_string(), |s| s.from.clone()),
        false,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_fold_sums_counters_and_keeps_peaks() {
        let mut a = Figures {
            cpu_ns: Some(10),
            peak_rss_bytes: Some(100),
            ..Default::default()
        };
        a.fold(&Figures {
            cpu_ns: Some(5),
            peak_rss_bytes: Some(80),
            minor_faults: Some(3),
            ..Default::default()
        });
        assert_eq!(a.cpu_ns, Some(15));
        assert_eq!(a.peak_rss_bytes, Some(100));
        assert_eq!(a.minor_faults, Some(3));
        assert_eq!(a.read_bytes, None);
    }

    #[test]
    fn before_release_comes_off_user_and_system_in_proportion() {
        let mut f = Figures {
            user_ns: Some(30),
            sys_ns: Some(10),
            cpu_ns: Some(40),
            run_queue_ns: None,
            task_time_ns: Some(100),
            peak_rss_bytes: Some(5),
            ..Default::default()
        };
        f.without(&BeforeRelease {
            pid: 1,
            alive_ns: 60,
            cpu_ns: Some(8),
            run_queue_ns: Some(4),
            ..Default::default()
        });
        assert_eq!(
            (f.user_ns, f.sys_ns, f.cpu_ns),
            (Some(24), Some(8), Some(32))
        );
        assert_eq!(f.task_time_ns, Some(40));
        assert_eq!(f.run_queue_ns, None, "unknown stays unknown");
        assert_eq!(f.peak_rss_bytes, Some(5));
        // More CPU before the release than the source saw (a coarser clock): all of it goes.
        f.without(&BeforeRelease {
            pid: 1,
            alive_ns: 500,
            cpu_ns: Some(1000),
            run_queue_ns: None,
            ..Default::default()
        });
        assert_eq!((f.user_ns, f.sys_ns, f.cpu_ns), (Some(0), Some(0), Some(0)));
        assert_eq!(f.task_time_ns, Some(0));
        // Unread schedstat: the CPU stands.
        let mut g = Figures {
            cpu_ns: Some(9),
            ..Default::default()
        };
        g.without(&BeforeRelease {
            pid: 1,
            alive_ns: 1,
            cpu_ns: None,
            run_queue_ns: None,
            ..Default::default()
        });
        assert_eq!(g.cpu_ns, Some(9));
    }

    /// The bytes ste's launch code read and wrote in the first process come off the sources
    /// that count to the byte, not off taskstats's, rounded down to KiB.
    #[test]
    fn the_launch_codes_bytes_come_off_the_exact_sources() {
        let io = Figures {
            read_char_bytes: Some(5_000_210),
            write_char_bytes: Some(3_000_012),
            ..Default::default()
        };
        let mut l = Ledger {
            last_switch: Some(Box::new(io)),
            exit_stop: Some(Box::new(io)),
            taskstats: Some(Box::new(Figures {
                read_char_bytes: Some(4_882 * 1024),
                write_char_bytes: Some(2_929 * 1024),
                ..Default::default()
            })),
            ..Default::default()
        };
        l.without(&BeforeRelease {
            pid: 1,
            read_char_bytes: Some(210),
            write_char_bytes: Some(11),
            ..Default::default()
        });
        for f in [&l.last_switch, &l.exit_stop] {
            let f = f.as_deref().unwrap();
            assert_eq!(f.read_char_bytes, Some(5_000_000));
            assert_eq!(f.write_char_bytes, Some(3_000_001));
        }
        let t = l.taskstats.as_deref().unwrap();
        assert_eq!(t.write_char_bytes, Some(2_929 * 1024));
        // Unknown before (an older record): nothing comes off.
        l.without(&BeforeRelease::default());
        assert_eq!(l.exit_stop.unwrap().write_char_bytes, Some(3_000_001));
    }

    /// A Run keeps every process, so its record's fixed size is ste's memory per process
    /// beyond the argv: the ledger's figures live on the heap, only for the sources that
    /// measured the process (they were inline, three times over, in every record).
    #[test]
    fn a_process_record_stays_small() {
        assert!(std::mem::size_of::<Ledger>() <= 40);
        assert!(std::mem::size_of::<super::super::Process>() <= 256);
    }

    #[test]
    fn best_source_wins() {
        let l = Ledger {
            taskstats: Some(Box::new(Figures {
                peak_rss_bytes: Some(7),
                ..Default::default()
            })),
            exit_stop: Some(Box::new(Figures {
                peak_rss_bytes: Some(6),
                cpu_ns: Some(3),
                ..Default::default()
            })),
            ..Default::default()
        };
        assert_eq!(
            l.best(|f| f.peak_rss_bytes),
            Some((7, LedgerSource::Taskstats))
        );
        assert_eq!(l.cpu(), Some((3, LedgerSource::ExitStop)));
        assert_eq!(l.io_bytes(), None);
    }

    /// The ptrace exit stop and taskstats's record come before the exit tears the memory down
    /// (figures of the shape a 2 GiB process gave: bench/README.md); wait4, read after it,
    /// holds it, and the last switch's runtime is final: CPU from those first, the peaks
    /// still from the others.
    #[test]
    fn the_cpu_comes_from_a_source_that_holds_the_exit() {
        let stopped = Figures {
            cpu_ns: Some(7_267),
            run_queue_ns: Some(1),
            peak_rss_bytes: Some(2048),
            ..Default::default()
        };
        let waited = Figures {
            user_ns: Some(87),
            sys_ns: Some(7_370),
            minor_faults: Some(524_329),
            ..Default::default()
        };
        let mut l = Ledger {
            exit_stop: Some(Box::new(stopped)),
            wait4: Some(Box::new(waited)),
            ..Default::default()
        };
        assert_eq!(l.cpu(), Some((7_457, LedgerSource::Wait4)));
        assert_eq!(
            l.best(|f| f.run_queue_ns),
            Some((1, LedgerSource::ExitStop))
        );
        assert_eq!(
            l.best(|f| f.peak_rss_bytes),
            Some((2048, LedgerSource::ExitStop))
        );
        // As root under ptrace: taskstats's record instead of the exit stop's reads.
        l.exit_stop = None;
        l.taskstats = Some(Box::new(Figures {
            cpu_ns: Some(7_100),
            user_ns: Some(80),
            sys_ns: Some(7_020),
            peak_rss_bytes: Some(2048),
            ..Default::default()
        }));
        assert_eq!(l.cpu(), Some((7_457, LedgerSource::Wait4)));
        assert_eq!(l.best(|f| f.user_ns), Some((87, LedgerSource::Wait4)));
        assert_eq!(
            l.best(|f| f.peak_rss_bytes),
            Some((2048, LedgerSource::Taskstats))
        );
        // Under ebpf: the last switch's runtime, final.
        l.last_switch = Some(Box::new(Figures {
            user_ns: Some(90),
            sys_ns: Some(7_380),
            cpu_ns: Some(7_470),
            task_time_ns: Some(7_600),
            peak_rss_bytes: Some(2049),
            ..Default::default()
        }));
        assert_eq!(l.cpu(), Some((7_470, LedgerSource::LastSwitch)));
        // And the rest of the ledger it read, where it read it.
        assert_eq!(
            l.best(|f| f.peak_rss_bytes),
            Some((2049, LedgerSource::LastSwitch))
        );
    }
}
