//! The page-map source: builds a [`ProcessMap`] of one process from /proc/PID/smaps,
//! /proc/PID/pagemap and, as root, /proc/kpageflags + /proc/kpagecount; classifies mappings
//! (heap, stacks, arenas, shared memory, files); groups resident pages into ranges.
//!
//! Owns the privilege ladder of page maps: with root every resident page's frame is looked up
//! (in sorted, coalesced runs: ~0.1 s per GiB); without it, the pagemap bits that stay valid
//! (present, swapped, exclusive, soft-dirty) and smaps; if pagemap itself is refused, smaps
//! only. Each level is stated in the map. Knows nothing about output; the `ste maps`
//! subcommand is `command/maps.rs`, the snapshot at a run's peak in `peak.rs`.

pub mod peak;

use crate::bus::sink::thread_cpu_ns;
use crate::kernel::kpageflags::{FrameInfo, KPages};
use crate::kernel::pagemap::{Entry, Pagemap, PteBits};
use crate::kernel::proc::page_size;
use crate::kernel::smaps::{MapHeader, SmapsFields, read_smaps};
use crate::model::maps::{
    FlagCount, MapCountPages, Mapping, MappingFigures, MappingKind, PageRange, PageState,
    PagesFrom, ProcessMap, PteCounts,
};
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

/// glibc's arena heaps are reserved `HEAP_MAX_SIZE` bytes at a time, aligned to it:
/// 2 × `DEFAULT_MMAP_THRESHOLD_MAX` = 64 MiB on 64-bit (malloc/arena.c).
pub const ARENA_HEAP_MAX: u64 = 64 << 20;

/// Builds process maps from one /proc root. Keeps kpageflags/kpagecount open between maps.
pub struct MapReader {
    root: PathBuf,
    page_size: u64,
    kpages: Option<Result<KPages, String>>,
}

impl MapReader {
    pub fn new(root: impl AsRef<Path>) -> MapReader {
        MapReader {
            root: root.as_ref().to_path_buf(),
            page_size: page_size(),
            kpages: None,
        }
    }

    /// Whether this reader can read page flags (opens the files on first use).
    pub fn page_flags_readable(&mut self) -> bool {
        self.kpages().is_ok()
    }

    fn kpages(&mut self) -> Result<&mut KPages, String> {
        let root = self.root.clone();
        self.kpages
            .get_or_insert_with(|| {
                KPages::open(&root).map_err(|e| {
                    format!("/proc/kpageflags: {e} (page flags and map counts need root)")
                })
            })
            .as_mut()
            .map_err(|e| e.clone())
    }

    /// Maps process `pid`. `ranges`: also keep the page ranges of each mapping (else only
    /// counts). Fails when smaps cannot be read (the process is gone, or not ours).
    pub fn map(&mut self, pid: i32, ranges: bool) -> io::Result<ProcessMap> {
        let cpu0 = thread_cpu_ns();
        let smaps = read_smaps(&self.root, pid)?;
        let kinds = classify(&smaps.iter().map(|e| e.header.clone()).collect::<Vec<_>>());
        let mut pagemap = Pagemap::open(&self.root, pid, self.page_size);
        let mut pages: Vec<Vec<(u64, Entry)>> = Vec::with_capacity(smaps.len());
        let mut pagemap_error = None;
        if let Ok(pm) = &mut pagemap {
            let mut buf = Vec::new();
            for e in &smaps {
                let f = &e.fields;
                // Nothing resident or swapped: skip the walk (huge reserves cost 8 bytes per
                // virtual page to read). `[vsyscall]` lies outside the user address space.
                let mut kept = Vec::new();
                if (f.rss > 0 || f.swap > 0) && e.header.path != "[vsyscall]" {
                    buf.clear();
                    if let Err(err) = pm.read_range(e.header.start, e.header.end, &mut buf) {
                        pagemap_error = Some(err);
                        break;
                    }
                    kept.extend(
                        buf.iter()
                            .enumerate()
                            .filter(|(_, en)| en.present() || en.swapped())
                            .map(|(i, en)| (i as u64, *en)),
                    );
                }
                pages.push(kept);
            }
        }
        let pagemap_ok = pagemap.is_ok() && pagemap_error.is_none();
        let any_present = pages.iter().flatten().any(|(_, e)| e.present());
        let pfns_visible = pages.iter().flatten().any(|(_, e)| e.pfn().is_some());
        // Frame lookups for every present page, in one sorted batch across mappings.
        let mut frames: Option<Vec<FrameInfo>> = None;
        let pages_from = if !pagemap_ok {
            let why = match (pagemap, pagemap_error) {
                (Err(e), _) | (Ok(_), Some(e)) => format!("/proc/{pid}/pagemap: {e}"),
                (Ok(_), None) => unreachable!("pagemap_ok"),
            };
            PagesFrom::SmapsOnly { why }
        } else if any_present && !pfns_visible {
            PagesFrom::Pagemap {
                why: "the kernel hides page frame numbers without CAP_SYS_ADMIN, so page flags and map counts cannot be looked up".into(),
            }
        } else if !any_present {
            PagesFrom::Kernel
        } else {
            match self.kpages() {
                Err(why) => PagesFrom::Pagemap { why },
                Ok(k) => {
                    let present = pages.iter().flatten().filter(|(_, e)| e.pfn().is_some());
                    let pfns: Vec<u64> = present.clone().filter_map(|(_, e)| e.pfn()).collect();
                    let once: Vec<bool> = present.map(|(_, e)| e.exclusive()).collect();
                    match k.lookup(&pfns, &once) {
                        Ok(f) => {
                            frames = Some(f);
                            PagesFrom::Kernel
                        }
                        Err(e) => PagesFrom::Pagemap {
                            why: format!("/proc/kpageflags: {e}"),
                        },
                    }
                }
            }
        };
        if !pagemap_ok {
            pages.clear();
        }

        let mut flag_pages: BTreeMap<u32, u64> = BTreeMap::new();
        let mut map_counts: BTreeMap<u64, u64> = BTreeMap::new();
        let mut frame_iter = frames.as_deref().map(|f| f.iter());
        let mut mappings = Vec::with_capacity(smaps.len());
        let mut totals = MappingFigures::default();
        let mut pte_total = PteCounts::default();
        for (i, e) in smaps.iter().enumerate() {
            let figures = figures(&e.fields);
            totals.add(&figures);
            let mut pte = None;
            let mut mapping_ranges = None;
            if pagemap_ok {
                let mut counts = PteCounts::default();
                let mut grouper = Grouper::new(e.header.offset / self.page_size, ranges);
                for &(idx, entry) in &pages[i] {
                    count_pte(&mut counts, entry);
                    let info = if entry.pfn().is_some() {
                        frame_iter
                            .as_mut()
                            .and_then(|it| it.next())
                            .map(|f| FrameInfo {
                                flags: f.flags & crate::source::from_kernel::KEPT_PAGE_FLAGS,
                                map_count: f.map_count,
                            })
                    } else {
                        None
                    };
                    if let Some(f) = info {
                        *map_counts.entry(f.map_count).or_default() += 1;
                        let mut bits = f.flags;
                        while bits != 0 {
                            let b = bits.trailing_zeros();
                            *flag_pages.entry(b).or_default() += 1;
                            bits &= bits - 1;
                        }
                    }
                    grouper.push(idx, entry, info);
                }
                pte_total.add(&counts);
                pte = Some(counts);
                mapping_ranges = grouper.finish();
            }
            mappings.push(Mapping {
                start: e.header.start,
                end: e.header.end,
                perms: e.header.perms.clone(),
                offset_bytes: e.header.offset,
                dev: e.header.dev.clone(),
                inode: e.header.inode,
                path: e.header.path.clone(),
                kind: kinds[i],
                figures,
                pte,
                ranges: mapping_ranges,
            });
        }
        let flags = frames.as_ref().map(|_| {
            let mut v: Vec<FlagCount> = crate::model::maps::PAGE_FLAGS
                .iter()
                .filter_map(|(bit, letter, name)| {
                    flag_pages.get(bit).map(|&pages| FlagCount {
                        name: (*name).to_string(),
                        letter: *letter,
                        pages,
                    })
                })
                .collect();
            v.sort_by(|a, b| b.pages.cmp(&a.pages).then(a.letter.cmp(&b.letter)));
            v
        });
        let map_counts = frames.as_ref().map(|_| {
            map_counts
                .iter()
                .map(|(&map_count, &pages)| MapCountPages { map_count, pages })
                .collect()
        });
        Ok(ProcessMap {
            pid,
            page_size_bytes: self.page_size,
            pages_from,
            mappings,
            totals,
            pte: pagemap_ok.then_some(pte_total),
            flags,
            map_counts,
            cost_ns: thread_cpu_ns().saturating_sub(cpu0),
        })
    }
}

fn count_pte(c: &mut PteCounts, e: Entry) {
    if e.present() {
        c.present += 1;
    }
    if e.swapped() {
        c.swapped += 1;
    }
    if e.exclusive() {
        c.exclusive += 1;
    }
    if e.soft_dirty() {
        c.soft_dirty += 1;
    }
    if e.file_or_shared_anon() {
        c.file_or_shared += 1;
    }
}

/// The smaps figures ste reports for one mapping.
pub fn figures(f: &SmapsFields) -> MappingFigures {
    MappingFigures {
        size_bytes: f.size,
        rss_bytes: f.rss,
        pss_bytes: f.pss,
        anon_bytes: f.anonymous,
        file_bytes: f.rss.saturating_sub(f.anonymous),
        dirty_bytes: f.shared_dirty + f.private_dirty,
        shared_bytes: f.shared_clean + f.shared_dirty,
        swap_bytes: f.swap,
        swap_pss_bytes: f.swap_pss,
        thp_bytes: f.anon_huge_pages
            + f.shmem_pmd_mapped.unwrap_or(0)
            + f.file_pmd_mapped.unwrap_or(0),
        locked_bytes: f.locked,
    }
}

/// What a page's range key is made of: state, page-table bits, flags, map count.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Key {
    swapped: bool,
    pte: PteBits,
    info: Option<FrameInfo>,
}

/// Groups consecutive pages with the same key into ranges.
struct Grouper {
    base: u64,
    keep: bool,
    out: Vec<PageRange>,
    cur: Option<(u64, u64, Key)>,
}

impl Grouper {
    fn new(base: u64, keep: bool) -> Grouper {
        Grouper {
            base,
            keep,
            out: Vec::new(),
            cur: None,
        }
    }

    fn push(&mut self, idx: u64, e: Entry, info: Option<FrameInfo>) {
        if !self.keep {
            return;
        }
        // The swap type and offset live where the frame number is: not part of the key.
        let key = Key {
            swapped: !e.present(),
            pte: e.bits(),
            info,
        };
        if let Some((first, n, k)) = &mut self.cur
            && *first + *n == idx
            && *k == key
        {
            *n += 1;
            return;
        }
        self.flush();
        self.cur = Some((idx, 1, key));
    }

    fn flush(&mut self) {
        if let Some((first, pages, k)) = self.cur.take() {
            self.out.push(PageRange {
                first_page: self.base + first,
                pages,
                state: if k.swapped {
                    PageState::Swapped
                } else {
                    PageState::Present
                },
                pte: k.pte.letters(),
                flags: k
                    .info
                    .map(|f| crate::source::from_kernel::page_flag_letters(f.flags)),
                map_count: k.info.map(|f| f.map_count),
            });
        }
    }

    fn finish(mut self) -> Option<Vec<PageRange>> {
        self.flush();
        self.keep.then_some(self.out)
    }
}

/// Classifies each mapping from its path, permissions and neighbours (`maps` order).
pub fn classify(maps: &[MapHeader]) -> Vec<MappingKind> {
    maps.iter()
        .enumerate()
        .map(|(i, m)| {
            let path = m.path.as_str();
            let anon = path.is_empty() || path.starts_with("[anon:");
            if path == "[heap]" {
                MappingKind::Heap
            } else if path == "[stack]" {
                MappingKind::Stack
            } else if path.starts_with("[anon_shmem:")
                || path.starts_with("/dev/shm/")
                || path.starts_with("/memfd:")
                || path.starts_with("/SYSV")
                || path.starts_with("/dev/zero")
                || (anon && m.shared())
            {
                MappingKind::Shmem
            } else if m.no_access() {
                MappingKind::Reserved
            } else if anon {
                let next = maps.get(i + 1);
                let prev = i.checked_sub(1).and_then(|p| maps.get(p));
                let reserved_anon =
                    |n: &MapHeader| n.no_access() && (n.path.is_empty() || n.inode == 0);
                if m.start % ARENA_HEAP_MAX == 0
                    && next.is_some_and(|n| {
                        reserved_anon(n) && n.start == m.end && n.end == m.start + ARENA_HEAP_MAX
                    })
                {
                    MappingKind::ArenaHeap
                } else if prev.is_some_and(|p| reserved_anon(p) && p.end == m.start) {
                    MappingKind::ThreadStack
                } else {
                    MappingKind::Anon
                }
            } else if path.starts_with('[') {
                MappingKind::Special
            } else {
                MappingKind::File
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::smaps::parse_maps;

    /// /proc/PID/maps of a C program on this machine with two threads that each malloc'd
    /// (two arena heaps: a read-write part, then the reserved rest of 64 MiB; two stacks, each
    /// above its guard page), 4 MiB of shared anonymous memory, a 1 MiB shm_open segment and a
    /// 1 MiB anonymous mmap. Trimmed of the lines of files (the program, libc, ld.so).
    const THREADS_MAPS: &str = "\
5629d219b000-5629d21bc000 rw-p 00000000 00:00 0                          [heap]
7f63ac000000-7f63ac021000 rw-p 00000000 00:00 0 
7f63ac021000-7f63b0000000 ---p 00000000 00:00 0 
7f63b4000000-7f63b4021000 rw-p 00000000 00:00 0 
7f63b4021000-7f63b8000000 ---p 00000000 00:00 0 
7f63b85bf000-7f63b86bf000 rw-p 00000000 00:00 0 
7f63b86bf000-7f63b87bf000 rw-s 00000000 00:1b 4                          /dev/shm/ste-cap
7f63b87bf000-7f63b8bbf000 rw-s 00000000 00:01 1025                       /dev/zero (deleted)
7f63b8bbf000-7f63b8bc0000 ---p 00000000 00:00 0 
7f63b8bc0000-7f63b93c0000 rw-p 00000000 00:00 0 
7f63b93c0000-7f63b93c1000 ---p 00000000 00:00 0 
7f63b93c1000-7f63b9bc1000 rw-p 00000000 00:00 0 
7f63b9bc1000-7f63b9bc4000 rw-p 00000000 00:00 0 
7f63b9db2000-7f63b9db6000 r--p 00000000 00:00 0                          [vvar]
7fff5223a000-7fff5225b000 rw-p 00000000 00:00 0                          [stack]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
";

    #[test]
    fn classifies_a_threaded_process() {
        let maps = parse_maps(THREADS_MAPS);
        let kinds = classify(&maps);
        use MappingKind::*;
        assert_eq!(
            kinds,
            vec![
                Heap,
                ArenaHeap,
                Reserved,
                ArenaHeap,
                Reserved,
                Anon,
                Shmem,
                Shmem,
                Reserved,
                ThreadStack,
                Reserved,
                ThreadStack,
                Anon,
                Special,
                Stack,
                Special
            ]
        );
        // A line of the same program's libc text.
        let libc = parse_maps(
            "7f9938e1f000-7f9938f75000 r-xp 00026000 fe:00 326279                     /usr/lib/x86_64-linux-gnu/libc.so.6\n",
        );
        assert_eq!(classify(&libc), vec![File]);
    }

    #[test]
    fn groups_pages_into_ranges() {
        let p = |flags: u64, count: u64| {
            Some(FrameInfo {
                flags,
                map_count: count,
            })
        };
        let present = Entry((1 << 63) | (1 << 56) | 5);
        let mut g = Grouper::new(100, true);
        g.push(0, present, p(0x1828, 1));
        g.push(1, present, p(0x1828, 1));
        // A hole at 2: a new range even with the same key.
        g.push(3, present, p(0x1828, 1));
        g.push(4, present, p(0x1828, 2));
        g.push(5, Entry(1 << 62), None);
        let r = g.finish().unwrap();
        let short: Vec<_> = r
            .iter()
            .map(|r| {
                (
                    r.first_page,
                    r.pages,
                    r.state,
                    r.pte.as_str(),
                    r.flags.clone(),
                    r.map_count,
                )
            })
            .collect();
        assert_eq!(
            short,
            vec![
                (
                    100,
                    2,
                    PageState::Present,
                    "e",
                    Some("UlMa".into()),
                    Some(1)
                ),
                (
                    103,
                    1,
                    PageState::Present,
                    "e",
                    Some("UlMa".into()),
                    Some(1)
                ),
                (
                    104,
                    1,
                    PageState::Present,
                    "e",
                    Some("UlMa".into()),
                    Some(2)
                ),
                (105, 1, PageState::Swapped, "w", None, None),
            ]
        );
        assert_eq!(Grouper::new(0, false).finish(), None);
    }

    /// A fake /proc holding process 5 with one mapping of pages 4..8 (`path`, smaps figures
    /// in kB) and the given pagemap entries by page.
    fn fake_proc(path: &str, figures_kb: &str, entries: &[(usize, u64)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("5")).unwrap();
        let page = page_size();
        let smaps = format!(
            "{:x}-{:x} rw-p 00000000 00:00 0 {path}\n{figures_kb}",
            4 * page,
            8 * page
        );
        std::fs::write(dir.path().join("5/smaps"), smaps).unwrap();
        let mut pm = vec![0u8; 8 * 8];
        for &(i, e) in entries {
            pm[i * 8..i * 8 + 8].copy_from_slice(&e.to_ne_bytes());
        }
        std::fs::write(dir.path().join("5/pagemap"), pm).unwrap();
        dir
    }

    /// Frames hidden (as unprivileged) and no kpageflags: the map says it has pagemap bits
    /// only, and counts pages.
    #[test]
    fn unprivileged_fake_root() {
        let exclusive = (1u64 << 63) | (1 << 56);
        let dir = fake_proc(
            "[heap]",
            "Size: 16 kB\nRss: 8 kB\nPss: 8 kB\nAnonymous: 8 kB\n",
            &[(4, exclusive), (5, exclusive)],
        );
        let m = MapReader::new(dir.path()).map(5, true).unwrap();
        assert!(matches!(m.pages_from, PagesFrom::Pagemap { .. }), "{m:?}");
        assert_eq!(m.mappings.len(), 1);
        assert_eq!(m.mappings[0].kind, MappingKind::Heap);
        let pte = m.mappings[0].pte.unwrap();
        assert_eq!((pte.present, pte.exclusive), (2, 2));
        let r = m.mappings[0].ranges.as_ref().unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(
            (r[0].first_page, r[0].pages, r[0].flags.clone()),
            (0, 2, None)
        );
        assert_eq!(m.flags, None);
        assert_eq!(m.totals.rss_bytes, 8 * 1024);
    }

    /// Frames visible and fake kpageflags/kpagecount: flags and map counts.
    #[test]
    fn root_fake_root() {
        let present = 1u64 << 63;
        let dir = fake_proc(
            "",
            "Size: 16 kB\nRss: 12 kB\nPss: 10 kB\nAnonymous: 12 kB\n",
            &[(4, present | 30), (5, present | 31), (6, present | 10)],
        );
        let flags: Vec<u8> = (0..64u64)
            .flat_map(|_| (crate::kernel::kpageflags::ANON | 1 << 5).to_ne_bytes())
            .collect();
        let counts: Vec<u8> = (0..64u64)
            .flat_map(|i| (if i == 10 { 2u64 } else { 1 }).to_ne_bytes())
            .collect();
        std::fs::write(dir.path().join("kpageflags"), flags).unwrap();
        std::fs::write(dir.path().join("kpagecount"), counts).unwrap();
        let m = MapReader::new(dir.path()).map(5, true).unwrap();
        assert_eq!(m.pages_from, PagesFrom::Kernel);
        let r = m.mappings[0].ranges.as_ref().unwrap();
        assert_eq!(r.len(), 2, "{r:?}");
        assert_eq!(
            (r[0].pages, r[0].flags.as_deref(), r[0].map_count),
            (2, Some("la"), Some(1))
        );
        assert_eq!((r[1].pages, r[1].map_count), (1, Some(2)));
        assert_eq!(
            m.map_counts.unwrap(),
            vec![
                MapCountPages {
                    map_count: 1,
                    pages: 2
                },
                MapCountPages {
                    map_count: 2,
                    pages: 1
                }
            ]
        );
        let flags = m.flags.unwrap();
        assert_eq!(flags.len(), 2);
        assert!(flags.iter().all(|f| f.pages == 3));
    }
}
