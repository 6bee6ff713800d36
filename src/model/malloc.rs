//! malloc behaviour (`--malloc`): per process image of the tree, the calls and bytes of the
//! malloc families, what the program held over time, its arenas and heaps, sbrk versus mmap,
//! the thresholds, the gap between what it held and what it had resident, and the images the
//! shim could not reach, with why.
//!
//! Plain data (std + serde). Sizes are bytes, times nanoseconds since the launch. A figure ste
//! could not learn is `None`.

use crate::model::Process;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct MallocRun {
    /// The shim's path, as the command's processes loaded it (`LD_PRELOAD`).
    pub shim: String,
    /// What ste knows of glibc's SDT probes (`memory_*`) and whether they were used.
    pub probes: String,
    /// One entry per process image the shim ran in (an exec'd program, or a forked child).
    pub images: Vec<MallocImage>,
    /// What each image held, sampled with the memory curve.
    pub samples: Vec<MallocSample>,
    /// What ste saw of each exec, to explain an image without the shim.
    pub execs: Vec<ExecCheck>,
    /// Images of the tree the shim did not run in, with the reason (computed at the end).
    pub uncovered: Vec<Uncovered>,
    /// CPU ste spent on it outside the sampler's rounds (exec checks, reading segments of
    /// ended processes); reading segments in the rounds is in the sampler's CPU.
    pub cpu_ns: u64,
    /// glibc's `memory_*` SDT probes counted through uprobes (BPF, root) for the tree's tasks;
    /// `None` when none was attached (see `probes` for why).
    #[serde(default)]
    pub sdt: Option<SdtCounts>,
}

/// One process image with the shim.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct MallocImage {
    pub pid: i32,
    /// The shim's sequence number for this pid (0 for the first image, 1 after an exec, …).
    pub image: u32,
    /// When the shim started in it.
    pub t_ns: u64,
    /// `exec` (a program started) or `fork` (a child of an image with the shim).
    pub origin: ImageOrigin,
    /// `/proc/self/exe` of the image.
    pub program: String,
    pub allocator: Allocator,
    pub calls: MallocCalls,
    pub bytes: MallocBytes,
    /// What it still held when it ended (chunk bytes never given back), exact; `None` with an
    /// allocator other than glibc's.
    pub held_at_end_bytes: Option<u64>,
    /// Blocks glibc served with an mmap of their own, and their chunk bytes.
    pub mmapped_calls: u64,
    pub mmapped_bytes: u64,
    /// Threads that made a call.
    pub threads: u64,
    /// Threads beyond the shim's 1,024 slots: their counts are approximate when non-zero.
    pub overflow_threads: u64,
    pub thresholds: Thresholds,
    /// The shim's destructor ran (the image ended with `exit()`, not `_exit`, exec or a signal).
    pub exited: bool,
    /// The last state the shim reported (mallinfo2, and malloc_info's arenas).
    pub last: Option<MallocState>,
    /// Snapshots (mallinfo2, malloc_info) taken in the image's own threads, and the thread CPU
    /// they cost it in all, exact. Paced to 1 % of the image's time by their measured cost and
    /// the cost predicted for the next (`source::malloc::pacing`).
    #[serde(default)]
    pub snapshots: u64,
    #[serde(default)]
    pub snapshots_cost_ns: u64,
    /// The snapshot at exit was skipped: the last one's cost would have taken the image's
    /// snapshots over that budget (plus 1 ms). `last` is then the latest one taken before.
    #[serde(default)]
    pub exit_snapshot_skipped: bool,
    /// The most the image held at any moment, from the shim's running high-water marks: exact
    /// when every call came from one thread, else bounded. `None` with an allocator other
    /// than glibc's (and in records made before the shim kept it).
    #[serde(default)]
    pub held_peak: Option<HeldPeak>,
    /// The most the image held in any sample, and when (filled at the end from the samples):
    /// what periodic reading sees, kept for comparison; `held_peak` is the figure.
    pub peak_held_bytes: Option<u64>,
    pub peak_held_t_ns: Option<u64>,
    /// The sample with the largest gap between resident anonymous memory and what the program
    /// held (filled at the end).
    pub largest_gap: Option<MallocSample>,
}

/// The most an image held: chunk bytes handed out minus given back (each block's usable size
/// plus glibc's 8-byte size word, 16 for an mmapped block), after any call. Counts a block from
/// the moment malloc returns it until free is called on it: blocks freed into glibc's
/// per-thread caches are not held (mallinfo2's `uordblks + hblkhd` counts them in use).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldPeak {
    /// The peak lies between these, equal when `exact`.
    pub low_bytes: u64,
    pub high_bytes: u64,
    /// Every call came from one thread: its running maximum is the image's.
    pub exact: bool,
    /// When it was reached. Exact peak: after `after_ns` and by `by_ns` (the thread's flushes
    /// around the last rise of its maximum). Several threads: both are when the shim's shared
    /// account last rose (its high-water mark is within the bound of the peak). `None`: not
    /// dated (no flush recorded one).
    pub after_ns: Option<u64>,
    pub by_ns: Option<u64>,
    /// What the bound of several threads is made of: the most threads holding counters at once,
    /// and the change of its holdings each may keep from the shared account.
    pub threads_at_once: u64,
    pub flush_bytes: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ImageOrigin {
    Exec,
    Fork,
}

/// Whose malloc served the calls.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Allocator {
    pub kind: AllocatorKind,
    /// The object that defines the `malloc` in use.
    pub path: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum AllocatorKind {
    /// glibc's malloc: everything is measured.
    Glibc,
    /// A library loaded after the shim (jemalloc, tcmalloc…): calls and bytes are counted,
    /// glibc's figures (arenas, thresholds, held bytes) do not apply.
    Library,
    /// The program defines malloc itself: the shim sees none of its calls.
    Program,
    Unknown,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MallocCalls {
    pub malloc: u64,
    pub calloc: u64,
    pub realloc: u64,
    /// memalign, posix_memalign, aligned_alloc, valloc, pvalloc.
    pub memalign: u64,
    /// free of a non-null pointer.
    pub free: u64,
    pub free_null: u64,
    /// Allocations that returned NULL.
    pub failed: u64,
}

impl MallocCalls {
    pub fn total(&self) -> u64 {
        // Saturating: a crafted Run's counts must not wrap the total.
        [
            self.malloc,
            self.calloc,
            self.realloc,
            self.memalign,
            self.free,
            self.free_null,
        ]
        .into_iter()
        .fold(0, u64::saturating_add)
    }
}

/// Bytes asked for by each family, and chunk bytes given back.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MallocBytes {
    pub malloc: u64,
    pub calloc: u64,
    pub realloc: u64,
    pub memalign: u64,
    /// Chunk bytes (usable size plus malloc's header) given back by free and realloc.
    pub freed: u64,
}

/// glibc's mmap and trim thresholds, as the shim models them.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Thresholds {
    pub mmap_bytes: u64,
    pub trim_bytes: u64,
    /// Still following glibc's dynamic rule (no mallopt, no environment setting).
    pub dynamic: bool,
    /// Times they changed.
    pub changes: u64,
}

/// glibc's own account at one moment (mallinfo2 and malloc_info).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct MallocState {
    /// When it was taken.
    pub t_ns: u64,
    /// Taken by the shim's destructor at exit.
    pub at_exit: bool,
    /// In use according to glibc: chunk bytes in use in the arenas plus mmapped blocks
    /// (`uordblks + hblkhd`); blocks the program freed into glibc's per-thread cache count as
    /// in use here.
    pub in_use_bytes: u64,
    /// Free chunk bytes kept in the arenas (`fordblks`).
    pub free_bytes: u64,
    /// Bytes the arenas got from the system (`arena`: sbrk for the main arena, mmap'd heaps
    /// for the others).
    pub arena_bytes: u64,
    /// mmapped blocks in use (`hblks`) and their bytes (`hblkhd`).
    pub mmapped_blocks: u64,
    pub mmapped_bytes: u64,
    /// Releasable free space at the top of the main arena (`keepcost`).
    pub top_free_bytes: u64,
    /// From malloc_info: each arena (`None` when no malloc_info was taken).
    pub arenas: Option<Vec<Arena>>,
    /// malloc_info's output did not fit the shim's buffer: arenas are missing.
    pub info_truncated: bool,
    /// Thread CPU the last snapshot cost the program.
    pub cost_ns: u64,
}

impl MallocState {
    /// Bytes the main arena got with sbrk (its system bytes).
    pub fn sbrk_bytes(&self) -> Option<u64> {
        self.arenas
            .as_ref()?
            .iter()
            .find(|a| a.index == 0)
            .map(|a| a.system_bytes)
    }

    /// Bytes of the other arenas' heaps (each an mmap).
    pub fn arena_heap_bytes(&self) -> Option<u64> {
        Some(
            self.arenas
                .as_ref()?
                .iter()
                .filter(|a| a.index != 0)
                .map(|a| a.system_bytes)
                .sum(),
        )
    }
}

/// One arena, from malloc_info.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct Arena {
    /// 0 is the main arena (grown with sbrk); the others grow by mmap'd heaps.
    pub index: u32,
    /// Bytes it got from the system now, and at most.
    pub system_bytes: u64,
    pub max_system_bytes: u64,
    /// Free bytes and chunks in it (fast bins and the rest).
    pub free_bytes: u64,
    pub free_chunks: u64,
    /// Its heaps (`subheaps`; `None` for the main arena, which has none).
    pub heaps: Option<u64>,
    /// Address space it reserved.
    pub address_space_bytes: u64,
}

/// What one image held at one sampling round.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct MallocSample {
    /// The round's time.
    pub t_ns: u64,
    pub pid: i32,
    pub image: u32,
    /// What the program held then: chunk bytes handed out minus given back (exact); `None`
    /// with an allocator other than glibc's.
    pub held_bytes: Option<u64>,
    /// Free chunk bytes kept in the arenas (`fordblks`) at the shim's last snapshot, which it
    /// takes on the program's first malloc after ste asks; `None` before the first.
    pub free_bytes: Option<u64>,
    /// The process's resident anonymous memory in this round (smaps_rollup `Anonymous`).
    pub resident_anon_bytes: u64,
    /// Calls so far, all families.
    pub calls: u64,
}

impl MallocSample {
    /// Resident anonymous memory beyond what the program held.
    pub fn gap_bytes(&self) -> Option<u64> {
        self.held_bytes
            .map(|h| self.resident_anon_bytes.saturating_sub(h))
    }
}

/// What ste saw of a program at its exec.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ExecCheck {
    pub pid: i32,
    pub t_ns: u64,
    /// `/proc/PID/exe`.
    pub program: Option<String>,
    /// No program interpreter: a static binary, which ld.so (and so LD_PRELOAD) never sees.
    pub static_binary: Option<bool>,
    /// Not a 64-bit ELF of ste's machine: the shim cannot be loaded into it.
    pub foreign: Option<bool>,
    /// `AT_SECURE` (setuid, setgid, file capabilities): ld.so ignores LD_PRELOAD paths.
    pub secure: Option<bool>,
    /// Its environment still names the shim in `LD_PRELOAD`.
    pub preload_in_env: Option<bool>,
    /// Its user, groups and capabilities let it open the shim in ste's private run directory
    /// (`false`: the program changed user). Absent from records made before it was read.
    #[serde(default)]
    pub shim_reachable: Option<bool>,
}

/// An image of the tree without the shim.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Uncovered {
    pub pid: i32,
    pub t_ns: u64,
    pub program: String,
    pub reason: UncoveredReason,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum UncoveredReason {
    StaticBinary,
    Secure,
    EnvironmentCleared,
    Foreign,
    /// A forked child of an image without the shim.
    ParentUncovered,
    /// It ran as a user who cannot open the shim in ste's private run directory.
    OtherUser,
    /// Dynamic, environment intact, not secure, yet no segment: ld.so did not load the shim.
    NotLoaded,
    /// Gone before ste could look at it.
    Unknown,
}

impl UncoveredReason {
    pub fn text(self) -> &'static str {
        match self {
            UncoveredReason::StaticBinary => {
                "a static binary (no dynamic loader, so LD_PRELOAD is never read)"
            }
            UncoveredReason::Secure => {
                "setuid/setgid or file capabilities (AT_SECURE: the loader ignores LD_PRELOAD)"
            }
            UncoveredReason::EnvironmentCleared => {
                "its environment no longer had LD_PRELOAD (cleared by the program that started it)"
            }
            UncoveredReason::Foreign => "not a 64-bit program of this machine's architecture",
            UncoveredReason::ParentUncovered => "forked from a process without the shim",
            UncoveredReason::OtherUser => {
                "it ran as a user who cannot open the shim in ste's private run directory (the command changed user)"
            }
            UncoveredReason::NotLoaded => {
                "the dynamic loader did not load the shim (ld.so prints why on the program's stderr), or the shim could not create its segment"
            }
            UncoveredReason::Unknown => "it ended before ste could look at it",
        }
    }
}

impl MallocRun {
    /// Fills what is derived at the end: each image's peak and largest gap from the samples,
    /// and the images of the tree without the shim.
    pub fn finish(&mut self, processes: &[Process]) {
        // Harvested as processes ended: put them in the order they started.
        self.images.sort_by_key(|i| (i.t_ns, i.pid, i.image));
        for img in &mut self.images {
            let mine = self
                .samples
                .iter()
                .filter(|s| s.pid == img.pid && s.image == img.image);
            for s in mine {
                if let Some(h) = s.held_bytes
                    && img.peak_held_bytes.is_none_or(|p| h > p)
                {
                    img.peak_held_bytes = Some(h);
                    img.peak_held_t_ns = Some(s.t_ns);
                }
                if s.gap_bytes().is_some_and(|g| {
                    img.largest_gap
                        .and_then(|l| l.gap_bytes())
                        .is_none_or(|l| g > l)
                }) {
                    img.largest_gap = Some(*s);
                }
            }
        }
        self.uncovered = self.find_uncovered(processes);
    }

    fn find_uncovered(&self, processes: &[Process]) -> Vec<Uncovered> {
        let mut out = Vec::new();
        let mut uncovered_pids: Vec<i32> = Vec::new();
        for p in processes {
            let end = p.end_ns.unwrap_or(u64::MAX);
            let images = |from: u64, to: u64| {
                self.images
                    .iter()
                    .any(|i| i.pid == p.pid && i.t_ns >= from && i.t_ns < to)
            };
            if p.execs.is_empty() {
                if images(p.start_ns, end) {
                    continue;
                }
                // A fork of ste itself (the command before its exec) is not the tree's.
                if p.ppid.is_some_and(|pp| uncovered_pids.contains(&pp))
                    || self.images.iter().any(|i| Some(i.pid) == p.ppid)
                {
                    let reason = if p.ppid.is_some_and(|pp| uncovered_pids.contains(&pp)) {
                        UncoveredReason::ParentUncovered
                    } else {
                        UncoveredReason::NotLoaded
                    };
                    uncovered_pids.push(p.pid);
                    out.push(Uncovered {
                        pid: p.pid,
                        t_ns: p.start_ns,
                        program: "(forked, no exec)".into(),
                        reason,
                    });
                }
                continue;
            }
            for (k, e) in p.execs.iter().enumerate() {
                let to = p.execs.get(k + 1).map_or(end, |n| n.t_ns);
                if images(e.t_ns, to.max(e.t_ns + 1)) {
                    continue;
                }
                let check = self
                    .execs
                    .iter()
                    .filter(|c| c.pid == p.pid && c.t_ns >= e.t_ns && c.t_ns < to.max(e.t_ns + 1))
                    .min_by_key(|c| c.t_ns);
                let program = check
                    .and_then(|c| c.program.clone())
                    .or_else(|| {
                        e.argv
                            .as_ref()
                            .and_then(|a| a.first())
                            .map(|a| a.to_string_lossy())
                    })
                    .unwrap_or_else(|| "?".into());
                let reason = match check {
                    None => UncoveredReason::Unknown,
                    Some(c) if c.static_binary == Some(true) => UncoveredReason::StaticBinary,
                    Some(c) if c.foreign == Some(true) => UncoveredReason::Foreign,
                    Some(c) if c.secure == Some(true) => UncoveredReason::Secure,
                    Some(c) if c.preload_in_env == Some(false) => {
                        UncoveredReason::EnvironmentCleared
                    }
                    Some(c) if c.shim_reachable == Some(false) => UncoveredReason::OtherUser,
                    Some(c) if c.preload_in_env.is_none() && c.secure.is_none() => {
                        UncoveredReason::Unknown
                    }
                    Some(_) => UncoveredReason::NotLoaded,
                };
                if k + 1 == p.execs.len() {
                    uncovered_pids.push(p.pid);
                }
                out.push(Uncovered {
                    pid: p.pid,
                    t_ns: e.t_ns,
                    program,
                    reason,
                });
            }
        }
        out
    }
}

/// Hits of `memory_*` SDT probes (provider `libc`) by the tree's tasks, counted in the kernel
/// by uprobes at every probe site found: exact.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct SdtCounts {
    /// Each object searched, and what was attached in it.
    pub objects: Vec<SdtObject>,
    /// One entry per probe name with a site attached, in name order.
    pub probes: Vec<SdtProbeCount>,
    /// Hits whose size the kernel's table of sizes had no room for (their sizes are in
    /// `size_sum_bytes`, not in `sizes`).
    pub sizes_dropped: u64,
}

/// An object (the libc, the command's program) and its `memory_*` probe sites.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct SdtObject {
    pub path: String,
    /// Probe sites found in it, and those with a uprobe attached.
    pub found: u32,
    pub attached: u32,
    /// Why sites were not attached, one line per site.
    pub not_attached: Vec<String>,
}

/// One probe name's hits, over all its sites.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct SdtProbeCount {
    /// The probe's name (`memory_arena_new`).
    pub name: String,
    pub hits: u64,
    /// Which argument (from 1) is a size in bytes, for the probes that have one.
    pub size_arg: Option<u32>,
    /// Hits whose size argument was read (its form in the note decoded), and their sum.
    pub sized_hits: u64,
    pub size_sum_bytes: Option<u64>,
    /// The sizes seen, with their hits, smallest first.
    pub sizes: Vec<SdtSize>,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct SdtSize {
    pub bytes: u64,
    pub hits: u64,
}
