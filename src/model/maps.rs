//! Page-level memory maps (`ste maps`, `--maps-at-peak`): a process's mappings with their smaps
//! totals and, where the kernel lets ste see them, their resident pages grouped into ranges
//! that share flags and map count, in the spirit of the /proc/PID/pmaps proposal.
//!
//! Plain data (std + serde). Sizes are bytes, times nanoseconds; addresses are hex strings in
//! JSON (they do not fit a double). A figure ste could not read is `None`, never 0.

use serde::{Deserialize, Serialize};

/// One process's memory map at one moment.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ProcessMap {
    pub pid: i32,
    /// The kernel's base page size.
    pub page_size_bytes: u64,
    /// Where the page-level figures come from, and what is missing.
    pub pages_from: PagesFrom,
    /// Every mapping, in address order.
    pub mappings: Vec<Mapping>,
    /// Sums of the mappings' smaps figures.
    pub totals: MappingFigures,
    /// Pages by page-table state (pagemap); `None` when pagemap was unreadable.
    pub pte: Option<PteCounts>,
    /// Resident pages by kernel page flag (kpageflags, root only), most common first.
    pub flags: Option<Vec<FlagCount>>,
    /// Resident pages by map count (kpagecount, root only), by increasing count.
    pub map_counts: Option<Vec<MapCountPages>>,
    /// CPU ste spent building this map.
    pub cost_ns: u64,
}

/// What the page-level part of a map could be built from.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(tag = "level", rename_all = "snake_case")]
pub enum PagesFrom {
    /// pagemap with frame numbers, kpageflags and kpagecount (root).
    Kernel,
    /// pagemap without frame numbers (present, swapped, exclusive, soft-dirty bits only):
    /// `why` says what was refused.
    Pagemap { why: String },
    /// smaps only.
    SmapsOnly { why: String },
}

/// What a mapping holds, from its path and its neighbours.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum MappingKind {
    /// The brk heap (`[heap]`): glibc's main malloc arena.
    Heap,
    /// A glibc malloc arena heap of another thread: anonymous, 64 MiB-aligned, followed by
    /// its reserved, inaccessible remainder.
    ArenaHeap,
    /// The main thread's stack (`[stack]`).
    Stack,
    /// A thread stack: anonymous read-write memory right above a guard page.
    ThreadStack,
    /// Other private anonymous memory (`mmap(MAP_ANONYMOUS)`, large malloc blocks).
    Anon,
    /// Shared memory: shared anonymous mappings, `/dev/shm`, memfd, System V segments.
    Shmem,
    /// A mapped file.
    File,
    /// Kernel-provided pages (`[vdso]`, `[vvar]`, `[vsyscall]`, …).
    Special,
    /// Reserved address space without access (`---p`): guard pages, arena reserves.
    Reserved,
}

impl MappingKind {
    pub const ALL: [MappingKind; 9] = [
        MappingKind::Heap,
        MappingKind::ArenaHeap,
        MappingKind::Stack,
        MappingKind::ThreadStack,
        MappingKind::Anon,
        MappingKind::Shmem,
        MappingKind::File,
        MappingKind::Special,
        MappingKind::Reserved,
    ];

    /// A label for reports.
    pub fn label(self) -> &'static str {
        match self {
            MappingKind::Heap => "heap (brk)",
            MappingKind::ArenaHeap => "malloc arena heaps",
            MappingKind::Stack => "main stack",
            MappingKind::ThreadStack => "thread stacks",
            MappingKind::Anon => "anonymous mmaps",
            MappingKind::Shmem => "shared memory",
            MappingKind::File => "files",
            MappingKind::Special => "kernel pages (vdso, vvar)",
            MappingKind::Reserved => "reserved (no access)",
        }
    }
}

/// One mapping.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Mapping {
    #[serde(with = "hex")]
    pub start: u64,
    #[serde(with = "hex")]
    pub end: u64,
    /// `rwxp` / `rw-s` as in /proc/PID/maps.
    pub perms: String,
    /// Offset in the file.
    pub offset_bytes: u64,
    pub dev: String,
    pub inode: u64,
    /// The path, a pseudo-path (`[heap]`), or empty for anonymous memory.
    pub path: String,
    pub kind: MappingKind,
    /// Its smaps figures.
    pub figures: MappingFigures,
    /// Its pages by page-table state (pagemap); `None` when not read.
    pub pte: Option<PteCounts>,
    /// Present and swapped pages grouped into ranges of consecutive pages that share their
    /// state, flags and map count; `None` when not asked for (`--summary`, the map at the
    /// peak) or unreadable.
    pub ranges: Option<Vec<PageRange>>,
}

/// Figures of one mapping (or a sum of them) from /proc/PID/smaps, in bytes.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MappingFigures {
    /// Virtual size.
    pub size_bytes: u64,
    pub rss_bytes: u64,
    pub pss_bytes: u64,
    /// Resident anonymous memory (`Anonymous`).
    pub anon_bytes: u64,
    /// Resident file-backed and shared memory (RSS − anonymous).
    pub file_bytes: u64,
    /// Dirty resident memory, shared and private.
    pub dirty_bytes: u64,
    /// Resident memory mapped by other processes too.
    pub shared_bytes: u64,
    pub swap_bytes: u64,
    pub swap_pss_bytes: u64,
    /// Transparent huge pages (`AnonHugePages` + `ShmemPmdMapped` + `FilePmdMapped`).
    pub thp_bytes: u64,
    pub locked_bytes: u64,
}

impl MappingFigures {
    /// Saturating: a crafted Run's figures must not wrap a report's totals.
    pub fn add(&mut self, o: &MappingFigures) {
        self.size_bytes = self.size_bytes.saturating_add(o.size_bytes);
        self.rss_bytes = self.rss_bytes.saturating_add(o.rss_bytes);
        self.pss_bytes = self.pss_bytes.saturating_add(o.pss_bytes);
        self.anon_bytes = self.anon_bytes.saturating_add(o.anon_bytes);
        self.file_bytes = self.file_bytes.saturating_add(o.file_bytes);
        self.dirty_bytes = self.dirty_bytes.saturating_add(o.dirty_bytes);
        self.shared_bytes = self.shared_bytes.saturating_add(o.shared_bytes);
        self.swap_bytes = self.swap_bytes.saturating_add(o.swap_bytes);
        self.swap_pss_bytes = self.swap_pss_bytes.saturating_add(o.swap_pss_bytes);
        self.thp_bytes = self.thp_bytes.saturating_add(o.thp_bytes);
        self.locked_bytes = self.locked_bytes.saturating_add(o.locked_bytes);
    }
}

/// Pages by page-table state, from pagemap.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PteCounts {
    /// In RAM.
    pub present: u64,
    /// In swap.
    pub swapped: u64,
    /// Mapped by this process only.
    pub exclusive: u64,
    /// Written since soft-dirty bits were last cleared.
    pub soft_dirty: u64,
    /// File-backed or shared anonymous.
    pub file_or_shared: u64,
}

impl PteCounts {
    pub fn add(&mut self, o: &PteCounts) {
        self.present = self.present.saturating_add(o.present);
        self.swapped = self.swapped.saturating_add(o.swapped);
        self.exclusive = self.exclusive.saturating_add(o.exclusive);
        self.soft_dirty = self.soft_dirty.saturating_add(o.soft_dirty);
        self.file_or_shared = self.file_or_shared.saturating_add(o.file_or_shared);
    }
}

/// Consecutive pages of one mapping that share their state, flags and map count.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct PageRange {
    /// Index of the first page, counted as the pmaps proposal does: the mapping's file offset
    /// in pages plus the page's position in the mapping (for anonymous memory, the position).
    pub first_page: u64,
    pub pages: u64,
    /// `present` or `swapped`.
    pub state: PageState,
    /// Page-table bits (`PAGE_TABLE_LETTERS`): e.g. `fe`.
    pub pte: String,
    /// Kernel page flags (`FLAG_LETTERS`), e.g. `UlAMab`; `None` without root.
    pub flags: Option<String>,
    /// How many page tables map each page; `None` without root.
    pub map_count: Option<u64>,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum PageState {
    Present,
    Swapped,
}

/// Resident pages with one kernel page flag.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct FlagCount {
    pub name: String,
    pub letter: char,
    pub pages: u64,
}

/// Resident pages mapped `map_count` times.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapCountPages {
    pub map_count: u64,
    pub pages: u64,
}

/// The letters of [`PageRange::pte`].
pub const PAGE_TABLE_LETTERS: [(char, &str); 5] = [
    ('w', "swapped"),
    ('f', "file-backed or shared anonymous"),
    ('e', "exclusively mapped"),
    ('d', "soft-dirty"),
    ('p', "userfaultfd write-protected"),
];

/// Bits of /proc/kpageflags (include/uapi/linux/kernel-page-flags.h), with the letters and
/// names `page-types` (tools/mm) prints; the letters are what [`PageRange::flags`] holds.
pub const PAGE_FLAGS: [(u32, char, &str); 28] = [
    (0, 'L', "locked"),
    (1, 'E', "error"),
    (2, 'R', "referenced"),
    (3, 'U', "uptodate"),
    (4, 'D', "dirty"),
    (5, 'l', "lru"),
    (6, 'A', "active"),
    (7, 'S', "slab"),
    (8, 'W', "writeback"),
    (9, 'I', "reclaim"),
    (10, 'B', "buddy"),
    (11, 'M', "mmap"),
    (12, 'a', "anonymous"),
    (13, 's', "swapcache"),
    (14, 'b', "swapbacked"),
    (15, 'H', "compound_head"),
    (16, 'T', "compound_tail"),
    (17, 'G', "huge"),
    (18, 'u', "unevictable"),
    (19, 'X', "hwpoison"),
    (20, 'n', "nopage"),
    (21, 'x', "ksm"),
    (22, 't', "thp"),
    (23, 'o', "offline"),
    (24, 'z', "zero_page"),
    (25, 'i', "idle_page"),
    (26, 'g', "pgtable"),
    // A "kernel hacking" flag (bits 32+), but one users care about.
    (33, 'm', "mlocked"),
];

/// What filled the tree's memory at its peak (`--maps-at-peak`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct MemoryAtPeak {
    /// The snapshot taken at the highest round that could be snapshotted; `None` if none was.
    pub snapshot: Option<PeakSnapshot>,
    /// What taking snapshots cost and how the budget limited them.
    pub info: PeakMapsInfo,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct PeakSnapshot {
    /// Time of the sampling round the snapshot belongs to.
    pub t_ns: u64,
    /// PSS summed over the tree in that round.
    pub tree_pss_bytes: u64,
    /// The largest processes of that round, largest first.
    pub processes: Vec<ProcessMap>,
    /// Processes of that round not snapshotted.
    pub others: u32,
    /// Their PSS in that round.
    pub others_pss_bytes: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct PeakMapsInfo {
    /// CPU the snapshots may use, as a fraction of one core.
    pub budget: f64,
    /// CPU they may use at once before the budget applies (their start-up allowance).
    pub allowance_ns: u64,
    /// Snapshots taken (each replaced the previous one).
    pub snapshots: u64,
    /// CPU they cost in all (the rounds they asked for included).
    pub cpu_ns: u64,
    /// Exact rounds of the tree asked for at a tick's new high (the sampler's own budget
    /// would have read it later, or never), paid from this budget.
    #[serde(default)]
    pub rounds: u64,
    /// New highs that were not snapshotted because the budget was spent.
    pub over_budget: u64,
    /// Snapshots taken at a ptrace exit stop with the budget already spent (the only moment
    /// the exiting process's memory could be seen): the budget was exceeded by their cost.
    pub overdrafts: u64,
    /// Whether page flags and map counts were read (root).
    pub page_flags: bool,
}

/// Hex strings for addresses.
mod hex {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{v:x}"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let s = String::deserialize(d)?;
        u64::from_str_radix(&s, 16).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_hex_in_json() {
        let m = Mapping {
            start: 0xffffffffff600000,
            end: 0xffffffffff601000,
            perms: "--xp".into(),
            offset_bytes: 0,
            dev: "00:00".into(),
            inode: 0,
            path: "[vsyscall]".into(),
            kind: MappingKind::Special,
            figures: MappingFigures::default(),
            pte: None,
            ranges: None,
        };
        let j = serde_json::to_string(&m).unwrap();
        assert!(j.contains(r#""start":"ffffffffff600000""#), "{j}");
        assert_eq!(serde_json::from_str::<Mapping>(&j).unwrap(), m);
    }
}
