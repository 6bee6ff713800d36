//! The JSON schema (`--json`, `ste report --format json`) as a contract, as ripgrep's
//! tests/json.rs does: the output must parse into these strict mirror types, which reject any
//! field they do not name, and serialise back to exactly the same JSON, so no field is missing
//! either. docs/json-schema.md documents the same fields; change the three together.

use crate::harness::*;
use crate::matrix;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Run {
    schema_version: u32,
    generator: String,
    command: Vec<Arg>,
    tracker: String,
    machine_cpus: Option<u32>,
    notes: Vec<String>,
    exit: Exit,
    totals: Totals,
    processes: Vec<Process>,
    samples: Vec<Sample>,
    sampler: SamplerInfo,
    overhead: Overhead,
    sources: BTreeMap<String, Source>,
    accounting: Option<Accounting>,
    memory_at_peak: Option<MemoryAtPeak>,
    malloc: Option<MallocRun>,
    syscalls: Option<Syscalls>,
    programs: Vec<Program>,
}

/// A program of the run; `ste diff` lists the same objects (tests/it/diff.rs).
#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Program {
    pub(crate) program: String,
    pub(crate) runs: u64,
    pub(crate) cpu_ns: Option<u64>,
    pub(crate) user_ns: Option<u64>,
    pub(crate) sys_ns: Option<u64>,
    pub(crate) cpu_unknown: u64,
    pub(crate) span_ns: u64,
    pub(crate) largest_peak_bytes: Option<u64>,
    pub(crate) cpu_share: Option<f64>,
    pub(crate) cpu_partial: Option<f64>,
}

#[derive(Deserialize, Serialize)]
#[serde(untagged)]
enum Arg {
    Text(String),
    Bytes(Bytes),
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Bytes {
    bytes: Vec<u8>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Exit {
    code: Option<i32>,
    signal: Option<i32>,
    core_dumped: bool,
    launch_error: Option<LaunchError>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct LaunchError {
    kind: LaunchErrorKind,
    message: String,
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
enum LaunchErrorKind {
    NotFound,
    NotExecutable,
    Other,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Totals {
    wall_ns: u64,
    user_ns: Option<u64>,
    sys_ns: Option<u64>,
    processes: u64,
    threads: u64,
    execs: u64,
    max_pss_bytes: Option<u64>,
    max_pss_t_ns: Option<u64>,
    max_pss_kind: Option<String>,
    max_pss_bound_bytes: Option<u64>,
    max_pss_low_bytes: Option<u64>,
    max_pss_high_bytes: Option<u64>,
    peak_rss_bytes: Option<u64>,
    peak_rss_pid: Option<i32>,
    still_running: u64,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Process {
    pid: i32,
    ppid: Option<i32>,
    start_ns: u64,
    end_ns: Option<u64>,
    exit_code: Option<i32>,
    signal: Option<i32>,
    threads: u32,
    peak_rss_bytes: Option<u64>,
    io: Option<Io>,
    execs: Vec<Exec>,
    ledger: Option<Ledger>,
    thread_lifetimes: Vec<ThreadLifetime>,
}

/// A process's exact figures by source. A source that measured nothing is left out, as is
/// a figure a source does not give (the only fields that may be absent: see
/// docs/json-schema.md); [`FIGURES_BY_SOURCE`] says which each source gives.
#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Ledger {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_switch: Option<Figures>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    taskstats: Option<Figures>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    exit_stop: Option<Figures>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    wait4: Option<Figures>,
    taskstats_records: u32,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Figures {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    user_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sys_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cpu_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    run_queue_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    blkio_delay_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    swap_reclaim_delay_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    task_time_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    peak_rss_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    peak_vm_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    minor_faults: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    major_faults: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    voluntary_switches: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    involuntary_switches: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    read_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    write_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    read_char_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    write_char_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    exit_status: Option<i32>,
}

/// The taskstats figures of delay accounting, left out when it was off.
const DELAY_FIGURES: [&str; 2] = ["blkio_delay_ns", "swap_reclaim_delay_ns"];

/// What taskstats's record carries of a process, and what BPF reads of it at its last switch
/// where the kernel's BTF has every field (as on every kernel these tests run on).
const WHOLE_LEDGER: &[&str] = &[
    "user_ns",
    "sys_ns",
    "cpu_ns",
    "run_queue_ns",
    "blkio_delay_ns",
    "swap_reclaim_delay_ns",
    "task_time_ns",
    "peak_rss_bytes",
    "peak_vm_bytes",
    "minor_faults",
    "major_faults",
    "voluntary_switches",
    "involuntary_switches",
    "read_bytes",
    "write_bytes",
    "read_char_bytes",
    "write_char_bytes",
];

/// The figures each ledger source gives every process it measured (docs/json-schema.md):
/// `last_switch` the whole ledger (the exit status is the tracker's, not one of its figures);
/// taskstats the whole ledger and `exit_status` (added where the figures are checked), given
/// with the thread-group leader's record only, which a process of these workloads always has.
const FIGURES_BY_SOURCE: [(&str, &[&str]); 4] = [
    ("last_switch", WHOLE_LEDGER),
    ("taskstats", WHOLE_LEDGER),
    (
        "exit_stop",
        &[
            "cpu_ns",
            "run_queue_ns",
            "peak_rss_bytes",
            "read_bytes",
            "write_bytes",
            "read_char_bytes",
            "write_char_bytes",
        ],
    ),
    (
        "wait4",
        &[
            "user_ns",
            "sys_ns",
            "task_time_ns",
            "minor_faults",
            "major_faults",
            "voluntary_switches",
            "involuntary_switches",
            "exit_status",
        ],
    ),
];

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Accounting {
    group: Option<Group>,
    unavailable: Vec<Unavailable>,
    delays_on: Option<bool>,
    delays_switched_by_ste: bool,
    taskstats_overruns: u64,
    taskstats_cut: u64,
    taskstats_incomplete: u64,
    memory: MemoryReconciled,
    time: Option<TimeBreakdown>,
    critical_path: Vec<PathLink>,
    lingering: Vec<Lingering>,
    killed_lingering: Option<String>,
    before_release: Option<BeforeRelease>,
    tree_cpu: Option<TreeCpu>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct TreeCpu {
    cpu_ns: u64,
    user_ns: Option<u64>,
    sys_ns: Option<u64>,
    from: String,
    exact: bool,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct BeforeRelease {
    pid: i32,
    alive_ns: u64,
    cpu_ns: Option<u64>,
    run_queue_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    read_char_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    write_char_bytes: Option<u64>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Group {
    version: u8,
    dirs: Vec<String>,
    end: Option<GroupEnd>,
    sampled_peak_bytes: Option<u64>,
    sampled_peak_anon_bytes: Option<u64>,
    sampled_peak_file_bytes: Option<u64>,
    sampled_peak_t_ns: Option<u64>,
    max_anon_bytes: Option<u64>,
    max_file_bytes: Option<u64>,
    rounds: Vec<GroupRound>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct GroupEnd {
    memory_peak_bytes: Option<u64>,
    kernel_peak_bytes: Option<u64>,
    anon_bytes: Option<u64>,
    file_bytes: Option<u64>,
    cpu_user_ns: Option<u64>,
    cpu_sys_ns: Option<u64>,
    cpu_ns: Option<u64>,
    pids_peak: Option<u64>,
    oom_kills: Option<u64>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct GroupRound {
    t_ns: u64,
    usage_bytes: u64,
    anon_bytes: u64,
    file_bytes: u64,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Unavailable {
    figure: String,
    why: String,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct MemoryReconciled {
    group_peak: Option<MemoryFigure>,
    largest_process_peak: Option<MemoryFigure>,
    summed_process_peaks: Option<MemoryFigure>,
    pss_max: Option<MemoryFigure>,
    pss_interval_ns: Option<u64>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct MemoryFigure {
    bytes: u64,
    exact: bool,
    from: String,
    pid: Option<i32>,
    processes: Option<u64>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct TimeBreakdown {
    wall_ns: u64,
    task_time_ns: Option<u64>,
    user_ns: Option<u64>,
    sys_ns: Option<u64>,
    cpu_ns: Option<u64>,
    run_queue_ns: Option<u64>,
    blkio_ns: Option<u64>,
    swap_reclaim_ns: Option<u64>,
    other_ns: Option<u64>,
    from: String,
    processes_without_figures: u64,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct PathLink {
    pid: i32,
    start_ns: u64,
    end_ns: Option<u64>,
    self_ns: u64,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Lingering {
    pid: i32,
    end_ns: Option<u64>,
    killed: bool,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Io {
    rchar_bytes: u64,
    wchar_bytes: u64,
    syscr: u64,
    syscw: u64,
    read_bytes: u64,
    write_bytes: u64,
    cancelled_write_bytes: u64,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Exec {
    t_ns: u64,
    argv: Option<Vec<Arg>>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct ThreadLifetime {
    tid: i32,
    start_ns: u64,
    end_ns: Option<u64>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Sample {
    t_ns: u64,
    pss_bytes: u64,
    rss_bytes: u64,
    processes: u32,
    unreadable: u32,
    per_process: Option<Vec<ProcessSample>>,
    kind: String,
    bound_bytes: Option<u64>,
    low_bytes: Option<u64>,
    high_bytes: Option<u64>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct ProcessSample {
    pid: i32,
    pss_bytes: u64,
    cpu_ns: Option<u64>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct SamplerInfo {
    mode: String,
    budget: Option<f64>,
    burst_ns: Option<u64>,
    interval_ns: Option<u64>,
    rounds: u64,
    paid_rounds: u64,
    effective_interval_ns: Option<u64>,
    max_gap_ns: Option<u64>,
    max_look_gap_ns: Option<u64>,
    cpu_ns: u64,
    ticks: u64,
    effective_tick_ns: Option<u64>,
    tick_cpu_ns: u64,
    exec_settle_ns: Option<u64>,
    max_round_cpu_ns: Option<u64>,
    max_tick_cpu_ns: Option<u64>,
    tick_debt_ns: Option<u64>,
    moments: Option<u64>,
    max_rounds: Option<u64>,
    max_rounds_cpu_ns: Option<u64>,
    exit_marks: Option<bool>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Overhead {
    cpu_ns: Option<u64>,
    max_rss_bytes: Option<u64>,
    lost_events: Option<u64>,
    lost: Lost,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Lost {
    overruns: u64,
    events_at_most: Option<u64>,
    argv_unread: u64,
    argv_doubtful: u64,
    found_by_resync: u64,
    exits_missed: u64,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Source {
    from: String,
    exact: bool,
    note: Option<String>,
}

// --maps-at-peak (docs/json-schema.md, "memory_at_peak").

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct MemoryAtPeak {
    snapshot: Option<PeakSnapshot>,
    info: PeakMapsInfo,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct PeakSnapshot {
    t_ns: u64,
    tree_pss_bytes: u64,
    processes: Vec<ProcessMap>,
    others: u32,
    others_pss_bytes: u64,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct PeakMapsInfo {
    budget: f64,
    allowance_ns: u64,
    snapshots: u64,
    cpu_ns: u64,
    rounds: u64,
    over_budget: u64,
    overdrafts: u64,
    page_flags: bool,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct ProcessMap {
    pid: i32,
    page_size_bytes: u64,
    pages_from: PagesFrom,
    mappings: Vec<Mapping>,
    totals: MappingFigures,
    pte: Option<PteCounts>,
    flags: Option<Vec<FlagCount>>,
    map_counts: Option<Vec<MapCountPages>>,
    cost_ns: u64,
}

#[derive(Deserialize, Serialize)]
#[serde(tag = "level", rename_all = "snake_case", deny_unknown_fields)]
enum PagesFrom {
    Kernel,
    Pagemap { why: String },
    SmapsOnly { why: String },
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
enum MappingKind {
    Heap,
    ArenaHeap,
    Stack,
    ThreadStack,
    Anon,
    Shmem,
    File,
    Special,
    Reserved,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Mapping {
    /// Hex, without `0x`.
    start: HexAddress,
    end: HexAddress,
    perms: String,
    offset_bytes: u64,
    dev: String,
    inode: u64,
    path: String,
    kind: MappingKind,
    figures: MappingFigures,
    pte: Option<PteCounts>,
    ranges: Option<Vec<PageRange>>,
}

/// An address as lowercase hex digits: checked on the way in, kept as written.
#[derive(Serialize)]
#[serde(transparent)]
struct HexAddress(String);

impl<'de> Deserialize<'de> for HexAddress {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        u64::from_str_radix(&s, 16).map_err(serde::de::Error::custom)?;
        if s.chars().any(|c| c.is_ascii_uppercase()) {
            return Err(serde::de::Error::custom("uppercase hex"));
        }
        Ok(HexAddress(s))
    }
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct MappingFigures {
    size_bytes: u64,
    rss_bytes: u64,
    pss_bytes: u64,
    anon_bytes: u64,
    file_bytes: u64,
    dirty_bytes: u64,
    shared_bytes: u64,
    swap_bytes: u64,
    swap_pss_bytes: u64,
    thp_bytes: u64,
    locked_bytes: u64,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct PteCounts {
    present: u64,
    swapped: u64,
    exclusive: u64,
    soft_dirty: u64,
    file_or_shared: u64,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct PageRange {
    first_page: u64,
    pages: u64,
    state: PageState,
    pte: String,
    flags: Option<String>,
    map_count: Option<u64>,
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
enum PageState {
    Present,
    Swapped,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct FlagCount {
    name: String,
    letter: char,
    pages: u64,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct MapCountPages {
    map_count: u64,
    pages: u64,
}

// --malloc (docs/json-schema.md, "malloc").

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct MallocRun {
    shim: String,
    probes: String,
    images: Vec<MallocImage>,
    samples: Vec<MallocSample>,
    execs: Vec<ExecCheck>,
    uncovered: Vec<Uncovered>,
    cpu_ns: u64,
    sdt: Option<SdtCounts>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct SdtCounts {
    objects: Vec<SdtObject>,
    probes: Vec<SdtProbeCount>,
    sizes_dropped: u64,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct SdtObject {
    path: String,
    found: u32,
    attached: u32,
    not_attached: Vec<String>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct SdtProbeCount {
    name: String,
    hits: u64,
    size_arg: Option<u32>,
    sized_hits: u64,
    size_sum_bytes: Option<u64>,
    sizes: Vec<SdtSize>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct SdtSize {
    bytes: u64,
    hits: u64,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct MallocImage {
    pid: i32,
    image: u32,
    t_ns: u64,
    origin: ImageOrigin,
    program: String,
    allocator: Allocator,
    calls: MallocCalls,
    bytes: MallocBytes,
    held_at_end_bytes: Option<u64>,
    mmapped_calls: u64,
    mmapped_bytes: u64,
    threads: u64,
    overflow_threads: u64,
    thresholds: Thresholds,
    exited: bool,
    last: Option<MallocState>,
    snapshots: u64,
    snapshots_cost_ns: u64,
    exit_snapshot_skipped: bool,
    held_peak: Option<HeldPeak>,
    peak_held_bytes: Option<u64>,
    peak_held_t_ns: Option<u64>,
    largest_gap: Option<MallocSample>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct HeldPeak {
    low_bytes: u64,
    high_bytes: u64,
    exact: bool,
    after_ns: Option<u64>,
    by_ns: Option<u64>,
    threads_at_once: u64,
    flush_bytes: u64,
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
enum ImageOrigin {
    Exec,
    Fork,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Allocator {
    kind: AllocatorKind,
    path: String,
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
enum AllocatorKind {
    Glibc,
    Library,
    Program,
    Unknown,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct MallocCalls {
    malloc: u64,
    calloc: u64,
    realloc: u64,
    memalign: u64,
    free: u64,
    free_null: u64,
    failed: u64,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct MallocBytes {
    malloc: u64,
    calloc: u64,
    realloc: u64,
    memalign: u64,
    freed: u64,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Thresholds {
    mmap_bytes: u64,
    trim_bytes: u64,
    dynamic: bool,
    changes: u64,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct MallocState {
    t_ns: u64,
    at_exit: bool,
    in_use_bytes: u64,
    free_bytes: u64,
    arena_bytes: u64,
    mmapped_blocks: u64,
    mmapped_bytes: u64,
    top_free_bytes: u64,
    arenas: Option<Vec<Arena>>,
    info_truncated: bool,
    cost_ns: u64,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Arena {
    index: u32,
    system_bytes: u64,
    max_system_bytes: u64,
    free_bytes: u64,
    free_chunks: u64,
    heaps: Option<u64>,
    address_space_bytes: u64,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct MallocSample {
    t_ns: u64,
    pid: i32,
    image: u32,
    held_bytes: Option<u64>,
    free_bytes: Option<u64>,
    resident_anon_bytes: u64,
    calls: u64,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct ExecCheck {
    pid: i32,
    t_ns: u64,
    program: Option<String>,
    static_binary: Option<bool>,
    foreign: Option<bool>,
    secure: Option<bool>,
    preload_in_env: Option<bool>,
    shim_reachable: Option<bool>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Uncovered {
    pid: i32,
    t_ns: u64,
    program: String,
    reason: UncoveredReason,
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
enum UncoveredReason {
    StaticBinary,
    Secure,
    EnvironmentCleared,
    Foreign,
    ParentUncovered,
    OtherUser,
    NotLoaded,
    Unknown,
}

// --syscalls (docs/json-schema.md, "syscalls").

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Syscalls {
    method: String,
    timed: bool,
    per_process: bool,
    arch: String,
    compat_arch: Option<String>,
    table: String,
    calls: Vec<SyscallRow>,
    errors: Vec<ErrnoCount>,
    images: Vec<ImageCalls>,
    uncounted: SyscallsUncounted,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct SyscallRow {
    nr: u32,
    compat: bool,
    name: Option<String>,
    group: String,
    subsystem: Option<String>,
    file: Option<String>,
    calls: u64,
    errors: u64,
    total_ns: Option<u64>,
    max_ns: Option<u64>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct ErrnoCount {
    nr: u32,
    compat: bool,
    errno: i32,
    name: Option<String>,
    calls: u64,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct ImageCalls {
    process: usize,
    pid: i32,
    exec: Option<usize>,
    calls: Vec<CallCount>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct CallCount {
    nr: u32,
    compat: bool,
    calls: u64,
    errors: u64,
    total_ns: Option<u64>,
    max_ns: Option<u64>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct SyscallsUncounted {
    bad_numbers: u64,
    errno_unclassified: u64,
    per_process_missing: u64,
}

/// Parses `json` into the mirror `T` and checks it serialises back unchanged. The JSON of
/// `ste bench` and `ste diff` is held to its mirrors (tests/it/bench.rs, diff.rs) the same way.
pub(crate) fn check<T: DeserializeOwned + Serialize>(json: &[u8]) -> Result<T, String> {
    let original: serde_json::Value = serde_json::from_slice(json).expect("valid JSON");
    let parsed: T = serde_json::from_slice(json)
        .map_err(|e| format!("the JSON does not follow the schema: {e}"))?;
    if serde_json::to_value(&parsed).unwrap() != original {
        return Err(
            "a field of the schema is missing from the JSON (or holds another type)".into(),
        );
    }
    Ok(parsed)
}

pub(crate) fn conforms<T: DeserializeOwned + Serialize>(json: &[u8]) -> T {
    check(json).unwrap_or_else(|e| panic!("{e}"))
}

/// Whether the mirror `T` refuses `original` once `change` has been made to it: a mirror's
/// test shows so that the mirror can fail.
pub(crate) fn refuses<T: DeserializeOwned + Serialize>(
    original: &serde_json::Value,
    change: &dyn Fn(&mut serde_json::Value),
) -> bool {
    let mut v = original.clone();
    change(&mut v);
    check::<T>(&serde_json::to_vec(&v).unwrap()).is_err()
}

matrix!(the_json_follows_the_schema, |mode: Mode| {
    let json = scratch("schema.json");
    let script = format!(
        "{f} threads 2 4 100; /bin/true; {f} fill 8 100",
        f = fixture()
    );
    let o = command_as(mode.who, &bins().ste)
        .current_dir(&bins().dir)
        .args(tracker_args(mode))
        .args(["--interval", "5ms", "--json"])
        .arg(&json)
        .args(["--", "/bin/sh", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let run = conforms::<Run>(&std::fs::read(&json).unwrap());
    assert_eq!(run.totals.processes, 4);
    assert!(
        run.processes.iter().any(|p| p.thread_lifetimes.len() == 2),
        "the threads' lifetimes are listed"
    );
    assert!(
        run.samples
            .iter()
            .any(|s| s.per_process.as_ref().is_some_and(|p| !p.is_empty())),
        "samples list their processes"
    );
    accounting_is_there(&run, mode);
});

/// The accounting parts this mode fills are filled (so the mirror checked them), and each
/// ledger source gives exactly the figures the schema says it gives.
fn accounting_is_there(run: &Run, mode: Mode) {
    let a = run.accounting.as_ref().expect("accounting");
    assert!(!a.critical_path.is_empty());
    assert_eq!(a.critical_path[0].pid, run.processes[0].pid);
    assert!(a.memory.largest_process_peak.is_some() && a.memory.pss_max.is_some());
    let unavailable = |what: &str| a.unavailable.iter().any(|u| u.figure.contains(what));
    let sources: Vec<&str> = match (mode.who, mode.tracker) {
        (Who::Root, _) => {
            let g = a.group.as_ref().expect("root runs have a cgroup");
            let end = g.end.as_ref().expect("the group's end figures");
            assert!(end.memory_peak_bytes.is_some() && end.pids_peak.is_some());
            assert!(!g.rounds.is_empty() && g.sampled_peak_bytes.is_some());
            assert!(a.memory.group_peak.is_some());
            if mode.tracker == Tracker::Ebpf {
                // Every figure from each task's last switch: no taskstats record is listened
                // to, and nothing says taskstats is missing.
                assert_eq!(a.time.as_ref().expect("time").from, "last_switch");
                assert!(!unavailable("taskstats"));
                vec!["last_switch"]
            } else if mode.tracker == Tracker::Ptrace {
                // The CPU from the wait that ends each process (its exit included), the waits
                // and task time from taskstats.
                assert_eq!(a.time.as_ref().expect("time").from, "wait4 + taskstats");
                vec!["taskstats", "wait4"]
            } else {
                assert_eq!(a.time.as_ref().expect("time").from, "taskstats");
                vec!["taskstats"]
            }
        }
        // ptrace, also for the "ebpf" runs as nobody, which fall back to it.
        (Who::Nobody, Tracker::Ptrace | Tracker::Ebpf) => {
            assert!(a.group.is_none() && unavailable("group memory peak"));
            assert!(unavailable("taskstats"));
            // CPU, user and system time from wait4 (the exit included), waits from the exit
            // stop.
            assert_eq!(a.time.as_ref().expect("time").from, "wait4 + exit_stop");
            vec!["exit_stop", "wait4"]
        }
        (Who::Nobody, Tracker::Netlink) => {
            assert!(unavailable("per-process ledger") && a.time.is_none());
            vec![]
        }
    };
    for p in &run.processes {
        let Some(l) = &p.ledger else {
            assert!(sources.is_empty(), "pid {} has no ledger", p.pid);
            continue;
        };
        let groups = [
            ("last_switch", &l.last_switch),
            ("taskstats", &l.taskstats),
            ("exit_stop", &l.exit_stop),
            ("wait4", &l.wait4),
        ];
        for (name, figures) in groups {
            let Some(f) = figures else {
                assert!(!sources.contains(&name), "pid {}: no {name}", p.pid);
                continue;
            };
            assert!(sources.contains(&name), "pid {}: {name} too", p.pid);
            let given: Vec<String> = match serde_json::to_value(f).unwrap() {
                serde_json::Value::Object(m) => m.keys().cloned().collect(),
                other => panic!("{other}"),
            };
            let expected = FIGURES_BY_SOURCE.iter().find(|s| s.0 == name).unwrap().1;
            let mut expected: Vec<&str> = expected.to_vec();
            if name == "taskstats" {
                expected.push("exit_status");
            }
            // taskstats measures the waits only with delay accounting on.
            if a.delays_on != Some(true) {
                expected.retain(|f| !DELAY_FIGURES.contains(f));
            }
            expected.sort_unstable();
            let mut given: Vec<&str> = given.iter().map(String::as_str).collect();
            given.sort_unstable();
            assert_eq!(given, expected, "pid {}: the {name} figures", p.pid);
        }
        assert_eq!(
            l.taskstats_records > 0,
            l.taskstats.is_some(),
            "pid {}",
            p.pid
        );
    }
}

/// The parts options add (`--maps-at-peak`, `--malloc`, `--syscalls=per-process`) follow the
/// schema too: filled, as root (BPF counts the calls, page flags are read) and as nobody
/// (ptrace syscall stops, no page flags).
#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn the_optional_parts_follow_the_schema() {
    for who in [Who::Root, Who::Nobody] {
        let (tracker, slow): (&[&str], &[&str]) = match who {
            Who::Root => (&["--tracker", "ebpf"], &[]),
            Who::Nobody => (&["--tracker", "ptrace"], &["--allow-ptrace"]),
        };
        let json = scratch("optional.json");
        // The Rust fixture is static, as ste is (.cargo/config.toml): the shim reaches only the
        // C fixture, a dynamic program that ends with exit() (its last snapshot).
        let script = format!(
            "{f} threads 2 4 100; {f} fill 64 300; {c} count 5 10",
            f = fixture(),
            c = crate::malloc::c_program("malloc_fixture", &[]),
        );
        let o = command_as(who, &bins().ste)
            .current_dir(&bins().dir)
            .args(tracker)
            .args(slow)
            .args(["--syscalls=per-process", "--malloc", "--maps-at-peak"])
            .args(["--interval", "20ms", "--json"])
            .arg(&json)
            .args(["--", "/bin/sh", "-c", &script])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{who:?}: {err}");
        let run = conforms::<Run>(&std::fs::read(&json).unwrap());
        // Filled, so the mirror checked their fields and not only a null.
        let peak = run.memory_at_peak.as_ref().expect("memory_at_peak");
        let snap = peak.snapshot.as_ref().expect("a map at the peak");
        assert!(!snap.processes.is_empty() && !snap.processes[0].mappings.is_empty());
        assert_eq!(peak.info.page_flags, who == Who::Root, "{err}");
        let malloc = run.malloc.as_ref().expect("malloc");
        assert!(
            malloc
                .images
                .iter()
                .any(|i| i.calls.malloc > 0 && i.last.is_some()),
            "{err}"
        );
        let sys = run.syscalls.as_ref().expect("syscalls");
        assert!(sys.per_process && !sys.images.is_empty() && !sys.calls.is_empty());
        assert_eq!(
            sys.method.contains("ptrace"),
            who == Who::Nobody,
            "{}",
            sys.method
        );
    }
}

/// The SDT probe counts of `--malloc` (as root, uprobes through BPF) follow the schema, filled.
#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: loads BPF")]
fn the_sdt_counts_follow_the_schema() {
    let fx = crate::malloc::sdt_fixture("-O1");
    let json = scratch("sdt.json");
    let o = std::process::Command::new(&bins().ste)
        .args(["--tracker", "ebpf", "--malloc", "--json"])
        .arg(&json)
        .args(["--", &fx, "2", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let run = conforms::<Run>(&std::fs::read(&json).unwrap());
    let sdt = run.malloc.as_ref().and_then(|m| m.sdt.as_ref());
    let sdt = sdt.expect("SDT counts as root");
    assert!(sdt.objects.iter().any(|o| o.attached > 0));
    assert!(sdt.probes.iter().any(|p| !p.sizes.is_empty()), "{err}");
}

#[test]
fn a_launch_failure_follows_the_schema() {
    let json = scratch("failed.json");
    let o = std::process::Command::new(&bins().ste)
        .arg("--json")
        .arg(&json)
        .arg("ste-no-such-command-xyz")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(127));
    let run = conforms::<Run>(&std::fs::read(&json).unwrap());
    assert!(matches!(
        run.exit.launch_error,
        Some(LaunchError {
            kind: LaunchErrorKind::NotFound,
            ..
        })
    ));
}

#[test]
#[cfg_attr(
    not(ste_test_root),
    ignore = "needs root: its run has a cgroup and taskstats"
)]
fn the_mirror_catches_a_missing_an_unknown_or_a_retyped_field() {
    assert!(
        is_root(),
        "this test runs as root (CI does): its run has a cgroup and taskstats"
    );
    let json = scratch("mutated.json");
    let o = std::process::Command::new(&bins().ste)
        .arg("--json")
        .arg(&json)
        // Long enough for a sampling round: the root is sampled from its exec on.
        .args(["--", "/bin/sh", "-c", "/bin/true; sleep 0.2"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let bytes = std::fs::read(&json).unwrap();
    let run = conforms::<Run>(&bytes);
    // The default tracker as root.
    accounting_is_there(
        &run,
        Mode {
            tracker: Tracker::Ebpf,
            who: Who::Root,
        },
    );
    let original: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    type Change<'a> = &'a dyn Fn(&mut serde_json::Value);
    let cases: [(&str, Change); 6] = [
        ("missing", &|v| {
            v["accounting"]["memory"]
                .as_object_mut()
                .unwrap()
                .remove("pss_interval_ns");
        }),
        ("missing", &|v| {
            v["accounting"]["group"]["end"]
                .as_object_mut()
                .unwrap()
                .remove("pids_peak");
        }),
        ("missing", &|v| {
            v["processes"][0].as_object_mut().unwrap().remove("ledger");
        }),
        ("unknown", &|v| {
            v["processes"][0]["ledger"]["taskstats"]["new_figure_ns"] = 1.into();
        }),
        ("retyped", &|v| {
            v["accounting"]["critical_path"][0]["self_ns"] = "12".into();
        }),
        ("retyped", &|v| {
            v["processes"][0]["ledger"]["taskstats"]["cpu_ns"] = (-1).into();
        }),
    ];
    for (what, change) in cases {
        assert!(
            refuses::<Run>(&original, change),
            "a {what} field passed the mirror"
        );
    }
}
