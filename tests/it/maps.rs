//! Page-level maps (issue 6): `ste maps PID` on processes holding known memory (1 GiB
//! anonymous, the same with transparent huge pages, a partly touched 64 MiB file, memory
//! shared with a child after fork), compared to smaps and, as root, to the kernel's page
//! flags; the unprivileged view; `--maps-at-peak` and `ste maps -- COMMAND`.

use crate::harness::*;
use crate::matrix;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use ste::model::maps::{Mapping, MappingKind, PagesFrom, ProcessMap};

const MIB: u64 = 1 << 20;
const PAGE: u64 = 4096;

fn memory_fixture() -> String {
    example("memory_fixture").display().to_string()
}

/// A fixture holding its memory until dropped (its stdin is closed then).
struct Held {
    child: Child,
    /// The words of its `ready ...` line.
    ready: Vec<String>,
}

impl Held {
    fn start(who: Who, args: &[&str]) -> Held {
        let mut c = command_as(who, std::path::Path::new(&memory_fixture()));
        c.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .current_dir(&bins().dir);
        let mut child = c.spawn().expect("start memory_fixture");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("ready"), "fixture said {line:?}");
        Held {
            child,
            ready: line.split_whitespace().map(str::to_string).collect(),
        }
    }

    /// The fixture's pid (through setpriv, which execs it: the same pid).
    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn addr(&self) -> u64 {
        u64::from_str_radix(&self.ready[1], 16).unwrap()
    }

    fn word(&self, i: usize) -> u64 {
        self.ready[i].parse().unwrap()
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// Runs `ste maps --json J [extra] PID` as `who`; returns the text, the parsed map, the status.
fn ste_maps(who: Who, extra: &[&str], pid: i32) -> (String, Option<ProcessMap>, i32) {
    let json = scratch("map.json");
    let out = command_as(who, &bins().ste)
        .arg("maps")
        .arg("--json")
        .arg(&json)
        .args(extra)
        .arg(pid.to_string())
        .output()
        .expect("run ste maps");
    let map = std::fs::read(&json)
        .ok()
        .filter(|b| !b.is_empty())
        .map(|b| serde_json::from_slice(&b).expect("ste maps JSON"));
    let _ = std::fs::remove_file(&json);
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (text, map, out.status.code().unwrap_or(-1))
}

fn mapping_at(map: &ProcessMap, addr: u64) -> &Mapping {
    map.mappings
        .iter()
        .find(|m| m.start <= addr && addr < m.end)
        .unwrap_or_else(|| panic!("no mapping holds {addr:x}"))
}

/// Pages of `m`'s ranges for which `pred(flags, map_count)` holds.
fn pages_where(m: &Mapping, pred: impl Fn(&str, Option<u64>) -> bool) -> u64 {
    m.ranges
        .as_ref()
        .expect("ranges listed")
        .iter()
        .filter(|r| pred(r.flags.as_deref().unwrap_or(""), r.map_count))
        .map(|r| r.pages)
        .sum()
}

/// smaps' own figure for the mapping at `addr`, read directly (the ground truth ste's map is
/// compared to).
fn smaps_field(pid: i32, addr: u64, key: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap();
    let mut inside = false;
    for line in text.lines() {
        if let Some((range, _)) = line.split_once(' ')
            && let Some((a, b)) = range.split_once('-')
            && let (Ok(a), Ok(b)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16))
        {
            inside = a <= addr && addr < b;
            continue;
        }
        if inside && let Some(v) = line.strip_prefix(&format!("{key}:")) {
            return v
                .trim()
                .trim_end_matches(" kB")
                .trim()
                .parse::<u64>()
                .unwrap()
                * 1024;
        }
    }
    panic!("{key} not found for {addr:x}")
}

/// The gibibyte tests take one at a time: together with the core tests' gibibyte fills they
/// would load this 2-CPU machine enough to starve the samplers those tests rely on.
static ONE_GIB_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_gib_anonymous(who: Who) {
    let _one = ONE_GIB_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let held = Held::start(who, &["anon", "1024", "nothp"]);
    let (text, map, status) = ste_maps(who, &[], held.pid());
    assert_eq!(status, 0, "{text}");
    let map = map.unwrap();
    let m = mapping_at(&map, held.addr());
    assert_eq!(m.kind, MappingKind::Anon);
    assert_eq!(m.end - m.start, 1024 * MIB);
    // Every page was written: exactly 262,144 present pages, all exclusive, none swapped.
    let pte = m.pte.expect("pagemap read");
    assert_eq!(pte.present, 262_144, "{pte:?}");
    assert_eq!(pte.exclusive, 262_144);
    assert_eq!(pte.swapped, 0);
    // smaps agrees.
    assert_eq!(m.figures.rss_bytes, 1024 * MIB);
    assert_eq!(m.figures.anon_bytes, 1024 * MIB);
    assert_eq!(
        m.figures.rss_bytes,
        smaps_field(held.pid(), held.addr(), "Rss")
    );
    assert_eq!(m.figures.thp_bytes, 0, "MADV_NOHUGEPAGE");
    let listed: u64 = m.ranges.as_ref().unwrap().iter().map(|r| r.pages).sum();
    assert_eq!(listed, 262_144);
    match who {
        Who::Root => {
            assert_eq!(map.pages_from, PagesFrom::Kernel, "{text}");
            // The kernel's page flags: every page anonymous, mapped once.
            assert_eq!(
                pages_where(m, |f, c| f.contains('a') && c == Some(1)),
                262_144
            );
            assert!(
                map.flags
                    .as_ref()
                    .unwrap()
                    .iter()
                    .any(|f| f.name == "anonymous" && f.pages >= 262_144)
            );
            assert!(
                text.contains("Resident pages by flag (kpageflags): "),
                "{text}"
            );
        }
        Who::Nobody => {
            assert!(
                matches!(map.pages_from, PagesFrom::Pagemap { .. }),
                "{text}"
            );
            assert!(text.contains("without frame numbers"), "{text}");
            assert!(
                m.ranges
                    .as_ref()
                    .unwrap()
                    .iter()
                    .all(|r| r.flags.is_none() && r.map_count.is_none())
            );
            assert_eq!(map.flags, None);
        }
    }
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn one_gib_anonymous_as_root() {
    one_gib_anonymous(Who::Root);
}

#[test]
fn one_gib_anonymous_as_nobody() {
    one_gib_anonymous(Who::Nobody);
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn one_gib_with_transparent_huge_pages() {
    let mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap();
    assert!(
        mode.contains("[always]") || mode.contains("[madvise]"),
        "THP must be enabled for madvise here: {mode}"
    );
    let _one = ONE_GIB_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let held = Held::start(Who::Root, &["anon", "1024", "thp"]);
    let (text, map, status) = ste_maps(Who::Root, &[], held.pid());
    assert_eq!(status, 0, "{text}");
    let map = map.unwrap();
    let m = mapping_at(&map, held.addr());
    let huge = smaps_field(held.pid(), held.addr(), "AnonHugePages");
    // The feature works here: the kernel gave the mapping huge pages.
    assert!(huge >= 512 * MIB, "AnonHugePages only {huge}");
    assert_eq!(m.figures.thp_bytes, huge);
    assert_eq!(m.pte.unwrap().present, 262_144);
    // Page flags agree with smaps: the pages flagged THP are the AnonHugePages.
    assert_eq!(
        pages_where(m, |f, _| f.contains('t')) * PAGE,
        huge,
        "{text}"
    );
    // Each huge page is one head and 511 tails.
    assert_eq!(pages_where(m, |f, _| f.contains('H')) * 512 * PAGE, huge);
}

fn partly_touched_file(who: Who) {
    let path = scratch("file64.bin");
    let held = Held::start(who, &["file", path.to_str().unwrap(), "64", "16"]);
    let touched = held.word(3);
    assert_eq!(touched, 4096);
    let (text, map, status) = ste_maps(who, &[], held.pid());
    assert_eq!(status, 0, "{text}");
    let map = map.unwrap();
    let m = mapping_at(&map, held.addr());
    assert_eq!(m.kind, MappingKind::File);
    assert_eq!(m.path, path.to_str().unwrap());
    // Write faults map exactly the written pages (the first 16 MiB).
    let pte = m.pte.unwrap();
    assert_eq!(pte.present, touched, "{pte:?}");
    assert_eq!(pte.file_or_shared, touched);
    assert_eq!(m.figures.rss_bytes, touched * PAGE);
    assert_eq!(
        m.figures.rss_bytes,
        smaps_field(held.pid(), held.addr(), "Rss")
    );
    assert_eq!(m.figures.anon_bytes, 0);
    // Ranges cover pages 0..4096 without a hole (pmaps-style page indexes).
    let ranges = m.ranges.as_ref().unwrap();
    let mut next = 0;
    for r in ranges {
        assert_eq!(r.first_page, next, "{ranges:?}");
        next += r.pages;
    }
    assert_eq!(next, touched);
    if who == Who::Root {
        // File pages: not anonymous, in the page cache (uptodate), dirty, mapped once.
        assert_eq!(
            pages_where(m, |f, c| !f.contains('a')
                && f.contains('U')
                && c == Some(1)),
            touched
        );
    }
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn partly_touched_file_as_root() {
    partly_touched_file(Who::Root);
}

#[test]
fn partly_touched_file_as_nobody() {
    partly_touched_file(Who::Nobody);
}

fn shared_with_a_child(who: Who) {
    let held = Held::start(who, &["fork-share", "16"]);
    let child = held.word(3) as i32;
    for pid in [held.pid(), child] {
        let (text, map, status) = ste_maps(who, &[], pid);
        assert_eq!(status, 0, "{text}");
        let map = map.unwrap();
        let m = mapping_at(&map, held.addr());
        let pte = m.pte.unwrap();
        // Shared copy-on-write: present in both, exclusive in neither.
        assert_eq!(pte.present, 4096, "{pte:?}");
        assert_eq!(pte.exclusive, 0);
        assert_eq!(m.figures.rss_bytes, 16 * MIB);
        assert_eq!(m.figures.shared_bytes, 16 * MIB);
        assert_eq!(m.figures.pss_bytes, 8 * MIB);
        assert_eq!(m.figures.pss_bytes, smaps_field(pid, held.addr(), "Pss"));
        if who == Who::Root {
            assert_eq!(pages_where(m, |_, c| c == Some(2)), 4096, "{text}");
            assert!(text.contains("Resident pages by map count (kpagecount): "));
        }
    }
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn shared_with_a_child_as_root() {
    shared_with_a_child(Who::Root);
}

#[test]
fn shared_with_a_child_as_nobody() {
    shared_with_a_child(Who::Nobody);
}

#[test]
#[cfg_attr(
    not(ste_test_root),
    ignore = "needs root: maps a process of nobody as root"
)]
fn summary_and_refusals() {
    let held = Held::start(Who::Nobody, &["anon", "8", "nothp"]);
    let (text, map, status) = ste_maps(Who::Root, &["--summary"], held.pid());
    assert_eq!(status, 0, "{text}");
    assert!(text.contains("Totals: "), "{text}");
    assert!(!text.contains("Page ranges:"), "{text}");
    assert!(map.unwrap().mappings.iter().all(|m| m.ranges.is_none()));
    // nobody may not read another user's process: said, exit 125.
    let (text, _, status) = ste_maps(Who::Nobody, &[], 1);
    assert_eq!(status, 125);
    assert!(text.contains("cannot read /proc/1/smaps"), "{text}");
}

/// The tests run ste's debug build, whose page walk is ~20× slower than the release build's,
/// on a loaded machine: they give the maps a whole core, so that what they test is what the
/// map at the peak holds (the budget itself is tested below).
const DEBUG_BUDGET: &str = "100";

matrix!(anatomy_at_the_peak, |mode: Mode| {
    // The map is taken at the PSS sampler's new high. At the sampler's 1 % budget, one costly
    // round on a loaded host leaves seconds without another (a 2.5 s hold was missed, and CI
    // missed other phases), so this test of the map, not of the budget, samples every 100 ms.
    // The fixture still holds its full layout 6 s: a map runs on the sampler's thread, and a
    // debug build's map of the layout half built, under the whole suite's load, once held up
    // every round of a 2 s hold.
    let o = ste(
        mode,
        &[
            "--maps-at-peak",
            "--maps-budget",
            DEBUG_BUDGET,
            "--interval",
            "100ms",
        ],
        &[&memory_fixture(), "anatomy", "6000"],
    );
    assert_eq!(o.status(), 0, "{}", o.stderr());
    let run = o.run();
    let peak = run.memory_at_peak.as_ref().expect("memory at peak");
    assert!(peak.info.snapshots >= 1);
    assert!(peak.info.cpu_ns > 0);
    assert_eq!(peak.info.page_flags, mode.who == Who::Root);
    let s = peak.snapshot.as_ref().expect("a snapshot");
    at_the_peak(run, s, &o.stderr());
    let p = &s.processes[0];
    let kind = |k: MappingKind| -> u64 {
        p.mappings
            .iter()
            .filter(|m| m.kind == k)
            .map(|m| m.figures.rss_bytes)
            .sum()
    };
    // The fixture's known layout.
    let within = |got: u64, want: u64, slack: u64| got >= want && got <= want + slack;
    assert!(
        within(kind(MappingKind::Heap), 64 * MIB, 2 * MIB),
        "heap {}",
        kind(MappingKind::Heap)
    );
    assert!(
        within(kind(MappingKind::Anon), 96 * MIB, 2 * MIB),
        "anon {}",
        kind(MappingKind::Anon)
    );
    assert!(
        within(kind(MappingKind::Shmem), 32 * MIB, MIB),
        "shm {}",
        kind(MappingKind::Shmem)
    );
    assert!(
        within(kind(MappingKind::ThreadStack), 4 * MIB, MIB),
        "thread stacks {}",
        kind(MappingKind::ThreadStack)
    );
    let file: u64 = p
        .mappings
        .iter()
        .filter(|m| m.path.contains("ste-anatomy-"))
        .map(|m| m.figures.rss_bytes)
        .sum();
    assert_eq!(file, 16 * MIB);
    let err = o.stderr();
    assert!(err.contains("Memory at the peak: at "), "{err}");
    assert!(err.contains("thread stacks"), "{err}");
    assert!(err.contains("Maps at peak: "), "{err}");
});

/// At a sampler's budget so small that its own rounds are seconds apart (0.05 % of a core:
/// one round of the layout pays for itself in several seconds), the peak held 2.5 s is still
/// mapped: the tick that sees the new high has the maps' budget pay for an exact round at once.
/// Before, the map was of the layout half built, or of the heap at the exit stop, and the
/// report blamed the maps' budget.
#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn a_held_peak_is_mapped_however_far_apart_the_samplers_rounds() {
    let mode = Mode {
        tracker: Tracker::Ptrace,
        who: Who::Root,
    };
    let o = ste(
        mode,
        &[
            "--maps-at-peak",
            "--maps-budget",
            DEBUG_BUDGET,
            "--sample-budget",
            "0.05",
        ],
        &[&memory_fixture(), "anatomy", "2500"],
    );
    assert_eq!(o.status(), 0, "{}", o.stderr());
    let run = o.run();
    let peak = run.memory_at_peak.as_ref().expect("memory at peak");
    let s = peak.snapshot.as_ref().expect("a snapshot");
    at_the_peak(run, s, &o.stderr());
    assert!(s.tree_pss_bytes >= 200 * MIB, "{}", s.tree_pss_bytes);
    // The rounds asked for, on both sides of the ledger: the maps paid, the sampler did not.
    assert!(peak.info.rounds >= 1, "{:?}", peak.info);
    assert_eq!(run.sampler.paid_rounds, peak.info.rounds);
    assert!(run.sampler.rounds >= run.sampler.paid_rounds);
    let err = o.stderr();
    assert!(err.contains(" asked for at "), "{err}");
    assert!(!err.contains("over the maps budget"), "{err}");
}

/// The kept snapshot is at the peak: within 3 % of Max PSS's lower end (an upper bound from the
/// kernel's high-water mark at an exit may stand above every read, the snapshot's included).
fn at_the_peak(run: &ste::model::Run, s: &ste::model::maps::PeakSnapshot, stderr: &str) {
    let low = run.totals.max_pss_bytes.unwrap() - run.totals.max_pss_bound_bytes.unwrap_or(0);
    assert!(
        s.tree_pss_bytes as f64 >= low as f64 * 0.97,
        "the kept snapshot ({}) is at the peak ({:?}, bound {:?})\n{stderr}",
        s.tree_pss_bytes,
        run.totals.max_pss_bytes,
        run.totals.max_pss_bound_bytes,
    );
}

#[test]
fn maps_of_a_command_at_its_peak() {
    let json = scratch("maps-run.json");
    let out = Command::new(&bins().ste)
        // ptrace maps the command at its exit stop, where its memory is still all there, so
        // the map shows the whole 256 MiB even when the sampler's rounds (paced by their cost)
        // all fell while it was still touching it, as they did once on a loaded CI host.
        .args([
            "maps",
            "--tracker",
            "ptrace",
            "--budget",
            DEBUG_BUDGET,
            "--json",
        ])
        .arg(&json)
        .args(["--", &memory_fixture(), "anon", "256", "nothp", "1500"])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap()
            .split(' ')
            .next(),
        Some("ready")
    );
    let run: ste::model::Run = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let s = run.memory_at_peak.unwrap().snapshot.expect("a snapshot");
    let p = &s.processes[0];
    let big = p
        .mappings
        .iter()
        .find(|m| m.end - m.start == 256 * MIB)
        .expect("the 256 MiB mapping");
    assert_eq!(big.pte.unwrap().present, 65_536);
    assert!(
        big.ranges.is_some(),
        "ste maps -- COMMAND lists page ranges"
    );
    assert!(err.contains("Page ranges: FIRST_PAGE PAGES"), "{err}");
    assert!(err.contains("Memory at the peak: "), "{err}");
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn maps_over_budget_are_reported() {
    let mode = Mode {
        tracker: Tracker::Netlink,
        who: Who::Root,
    };
    // 0.01 % of a core: 0.1 ms at start, 0.1 ms per second: one small map at most.
    let o = ste(
        mode,
        &["--maps-at-peak", "--maps-budget", "0.01"],
        &[&memory_fixture(), "anon", "256", "nothp", "500"],
    );
    assert_eq!(o.status(), 0, "{}", o.stderr());
    let info = &o.run().memory_at_peak.as_ref().unwrap().info;
    assert!(info.over_budget >= 1, "{info:?}");
    assert!(
        o.stderr()
            .contains("not mapped: over budget (--maps-budget raises it)"),
        "{}",
        o.stderr()
    );
}
