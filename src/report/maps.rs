//! Text for page-level memory maps: `ste maps PID` (a process's mappings with their page
//! ranges, pmaps-style), and the "Memory at the peak" section of a run (`--maps-at-peak`,
//! `ste maps -- COMMAND`): what filled memory at the peak, by process and by kind.
//!
//! Pure functions of `model` values; formatting through `units`.

use crate::model::maps::{
    MappingFigures, MappingKind, MemoryAtPeak, PAGE_FLAGS, PAGE_TABLE_LETTERS, PageState,
    PagesFrom, ProcessMap,
};
use crate::model::{Escaped, Process, Run, SampleKind};
use crate::report::names::program;
use crate::units::{bytes_human, duration_human, group_thousands, millis, percent};
use std::collections::BTreeMap;
use std::io::{self, Write};

/// `ste maps PID`: the whole map (or, with `summary`, its totals only).
pub fn render_process(
    map: &ProcessMap,
    name: &str,
    summary: bool,
    w: &mut dyn Write,
) -> io::Result<()> {
    crate::report::terminal::through(w, false, |w| process_map(map, name, summary, w))
}

fn process_map(map: &ProcessMap, name: &str, summary: bool, w: &mut dyn Write) -> io::Result<()> {
    writeln!(
        w,
        "pid {} ({name}): {} mappings, RSS {}, PSS {}",
        map.pid,
        map.mappings.len(),
        bytes_human(map.totals.rss_bytes),
        bytes_human(map.totals.pss_bytes)
    )?;
    writeln!(w, "Pages from: {}", pages_from_text(&map.pages_from))?;
    if !summary {
        render_legend(map, w)?;
        for m in &map.mappings {
            let path = Escaped::str(&m.path);
            writeln!(
                w,
                "{:x}-{:x} {} {:08x} {} {} {path}  [{}]",
                m.start,
                m.end,
                m.perms,
                m.offset_bytes,
                m.dev,
                m.inode,
                m.kind.label()
            )?;
            let f = &m.figures;
            if f.rss_bytes == 0 && f.swap_bytes == 0 {
                writeln!(
                    w,
                    "    size {}, nothing resident",
                    bytes_human(f.size_bytes)
                )?;
                continue;
            }
            writeln!(w, "    {}", figures_text(f))?;
            if let Some(ranges) = &m.ranges {
                for r in ranges {
                    let state = match r.state {
                        PageState::Present => "",
                        PageState::Swapped => " swapped",
                    };
                    writeln!(
                        w,
                        "    {} {} {} {} {}{state}",
                        r.first_page,
                        r.pages,
                        r.flags.as_deref().map_or("-", none_as_dash),
                        none_as_dash(&r.pte),
                        r.map_count.map_or("-".to_string(), |c| c.to_string()),
                    )?;
                }
            }
        }
    }
    render_process_summary(map, w)
}

fn none_as_dash(s: &str) -> &str {
    if s.is_empty() { "_" } else { s }
}

/// The columns of page ranges and the meaning of the letters that occur in this map.
fn render_legend(map: &ProcessMap, w: &mut dyn Write) -> io::Result<()> {
    let mut flag_letters: Vec<char> = Vec::new();
    let mut pte_letters: Vec<char> = Vec::new();
    for r in map
        .mappings
        .iter()
        .filter_map(|m| m.ranges.as_ref())
        .flatten()
    {
        for c in r.flags.as_deref().unwrap_or("").chars() {
            if !flag_letters.contains(&c) {
                flag_letters.push(c);
            }
        }
        for c in r.pte.chars() {
            if !pte_letters.contains(&c) {
                pte_letters.push(c);
            }
        }
    }
    if map.mappings.iter().all(|m| m.ranges.is_none()) {
        return Ok(());
    }
    writeln!(
        w,
        "Page ranges: FIRST_PAGE PAGES FLAGS PAGE_TABLE MAP_COUNT (pages sharing flags and map count; _ none, - unknown)"
    )?;
    let flags: Vec<String> = PAGE_FLAGS
        .iter()
        .filter(|(_, c, _)| flag_letters.contains(c))
        .map(|(_, c, n)| format!("{c} {n}"))
        .collect();
    if !flags.is_empty() {
        writeln!(w, "  FLAGS (kpageflags): {}", flags.join(", "))?;
    }
    let pte: Vec<String> = PAGE_TABLE_LETTERS
        .iter()
        .filter(|(c, _)| pte_letters.contains(c))
        .map(|(c, n)| format!("{c} {n}"))
        .collect();
    if !pte.is_empty() {
        writeln!(w, "  PAGE_TABLE (pagemap): {}", pte.join(", "))?;
    }
    Ok(())
}

fn render_process_summary(map: &ProcessMap, w: &mut dyn Write) -> io::Result<()> {
    writeln!(w, "Totals: {}", figures_text(&map.totals))?;
    writeln!(w, "By kind:")?;
    let mut kinds: BTreeMap<MappingKind, MappingFigures> = BTreeMap::new();
    for m in &map.mappings {
        kinds.entry(m.kind).or_default().add(&m.figures);
    }
    for (kind, f) in kinds {
        if f.rss_bytes == 0 && f.swap_bytes == 0 {
            continue;
        }
        writeln!(w, "  {:<26} {}", kind.label(), figures_text(&f))?;
    }
    if let Some(p) = &map.pte {
        writeln!(
            w,
            "Pages (pagemap): {} present, {} swapped, {} exclusive, {} soft-dirty, {} file-backed or shared",
            group_thousands(p.present),
            group_thousands(p.swapped),
            group_thousands(p.exclusive),
            group_thousands(p.soft_dirty),
            group_thousands(p.file_or_shared)
        )?;
    }
    if let Some(flags) = &map.flags {
        let v: Vec<String> = flags
            .iter()
            .map(|f| format!("{} {} {}", f.letter, f.name, group_thousands(f.pages)))
            .collect();
        writeln!(w, "Resident pages by flag (kpageflags): {}", v.join(", "))?;
    }
    if let Some(counts) = &map.map_counts {
        let v: Vec<String> = counts
            .iter()
            .map(|c| format!("{}× {}", c.map_count, group_thousands(c.pages)))
            .collect();
        writeln!(
            w,
            "Resident pages by map count (kpagecount): {}",
            v.join(", ")
        )?;
    }
    writeln!(w, "Read in {} of CPU", duration_human(map.cost_ns))
}

pub(crate) fn pages_from_text(p: &PagesFrom) -> String {
    match p {
        PagesFrom::Kernel => {
            "/proc/PID/pagemap + /proc/kpageflags + /proc/kpagecount (root): every resident page's flags and map count, exact at the moment it was read".into()
        }
        PagesFrom::Pagemap { why } => format!(
            "/proc/PID/pagemap without frame numbers: present, swapped, exclusive and soft-dirty bits only, no page flags or map counts ({why})"
        ),
        PagesFrom::SmapsOnly { why } => {
            format!("/proc/PID/smaps only, no page-level data ({why})")
        }
    }
}

fn figures_text(f: &MappingFigures) -> String {
    format!(
        "size {}, RSS {}, PSS {}, anon {}, file/shared {}, dirty {}, mapped by others too {}, swap {}, THP {}",
        bytes_human(f.size_bytes),
        bytes_human(f.rss_bytes),
        bytes_human(f.pss_bytes),
        bytes_human(f.anon_bytes),
        bytes_human(f.file_bytes),
        bytes_human(f.dirty_bytes),
        bytes_human(f.shared_bytes),
        bytes_human(f.swap_bytes),
        bytes_human(f.thp_bytes),
    )
}

/// Files (and named shared memory) listed by name under a process at the peak.
const TOP_PATHS: usize = 5;

/// The run's "Memory at the peak" section (nothing when `--maps-at-peak` was not used).
pub fn render_at_peak(run: &Run, w: &mut dyn Write) -> io::Result<()> {
    let Some(peak) = &run.memory_at_peak else {
        return Ok(());
    };
    match &peak.snapshot {
        None => writeln!(
            w,
            "Memory at the peak: no snapshot (nothing was sampled, or every new high was over the maps budget)"
        )?,
        Some(s) => {
            let highest = where_text(run, peak).unwrap_or_default();
            writeln!(
                w,
                "Memory at the peak: at {}, tree PSS {}{highest}",
                millis(s.t_ns),
                bytes_human(s.tree_pss_bytes)
            )?;
            for m in &s.processes {
                render_anatomy(run, m, s.t_ns, w)?;
            }
            if s.others > 0 {
                writeln!(
                    w,
                    "  {} other process{}: PSS {}",
                    s.others,
                    if s.others == 1 { "" } else { "es" },
                    bytes_human(s.others_pss_bytes)
                )?;
            }
        }
    }
    writeln!(w, "Maps at peak: {}", info_text(run, peak))?;
    // `ste maps -- COMMAND`: the full maps of the processes at the peak.
    if let Some(s) = &peak.snapshot {
        for m in s
            .processes
            .iter()
            .filter(|m| m.mappings.iter().any(|x| x.ranges.is_some()))
        {
            render_process(m, &name_at(run, m.pid, s.t_ns), false, w)?;
        }
    }
    Ok(())
}

/// Where the snapshot stands against the run's Max PSS, and, below it, why no higher round
/// was mapped; `None` without a snapshot or a Max PSS.
pub(crate) fn where_text(run: &Run, peak: &MemoryAtPeak) -> Option<String> {
    let s = peak.snapshot.as_ref()?;
    let max = run.totals.max_pss_bytes?;
    if s.tree_pss_bytes >= max {
        return Some(" (the run's Max PSS)".into());
    }
    let why = if peak.info.over_budget > 0 {
        "later highs were over the maps budget"
    } else if run.totals.max_pss_kind != Some(SampleKind::Exact) {
        "the Max PSS is an estimate between exact rounds, and no round read as much"
    } else {
        "a later high was gone before it could be mapped"
    };
    Some(format!(
        " ({} of the run's Max PSS, {}: {why})",
        percent(s.tree_pss_bytes as f64 / max.max(1) as f64),
        bytes_human(max)
    ))
}

pub(crate) fn info_text(run: &Run, peak: &MemoryAtPeak) -> String {
    let i = &peak.info;
    let share = if run.totals.wall_ns > 0 {
        format!(
            " ({} of wall)",
            percent(i.cpu_ns as f64 / run.totals.wall_ns as f64)
        )
    } else {
        String::new()
    };
    let rounds = match i.rounds {
        0 => String::new(),
        1 => " and 1 round asked for at a new high".into(),
        n => format!(" and {n} rounds asked for at new highs"),
    };
    let mut out = format!(
        "{} snapshot{}{rounds}, {} of CPU{share}; budget {} of a core (plus a {} start-up allowance); {}",
        i.snapshots,
        if i.snapshots == 1 { "" } else { "s" },
        duration_human(i.cpu_ns),
        percent(i.budget),
        duration_human(i.allowance_ns),
        if i.page_flags {
            "smaps and page flags (root)"
        } else {
            "smaps and pagemap bits (page flags need root)"
        }
    );
    if i.over_budget > 0 {
        out += &format!(
            "; {} new high{} not mapped: over budget (--maps-budget raises it)",
            i.over_budget,
            if i.over_budget == 1 { "" } else { "s" }
        );
    }
    if i.overdrafts > 0 {
        out += &format!(
            "; {} map{} taken at an exit stop beyond the budget (the last moment that memory could be seen)",
            i.overdrafts,
            if i.overdrafts == 1 { "" } else { "s" }
        );
    }
    out
}

/// The program `pid` ran at time `t_ns`.
pub(crate) fn name_at(run: &Run, pid: i32, t_ns: u64) -> String {
    let p: Option<&Process> = run
        .processes
        .iter()
        .filter(|p| p.pid == pid && p.start_ns <= t_ns)
        .max_by_key(|p| p.start_ns);
    match p {
        Some(p) => {
            let mut upto = p.clone();
            upto.execs.retain(|e| e.t_ns <= t_ns);
            program(&upto)
        }
        None => "?".into(),
    }
}

/// One process at the peak: its memory by kind, files and shared memory by path.
fn render_anatomy(run: &Run, m: &ProcessMap, t_ns: u64, w: &mut dyn Write) -> io::Result<()> {
    writeln!(
        w,
        "  pid {} ({}): PSS {}, RSS {}, swap {}",
        m.pid,
        name_at(run, m.pid, t_ns),
        bytes_human(m.totals.pss_bytes),
        bytes_human(m.totals.rss_bytes),
        bytes_human(m.totals.swap_bytes)
    )?;
    let mut kinds: BTreeMap<MappingKind, MappingFigures> = BTreeMap::new();
    let mut paths: BTreeMap<(MappingKind, &str), MappingFigures> = BTreeMap::new();
    for x in &m.mappings {
        kinds.entry(x.kind).or_default().add(&x.figures);
        if matches!(x.kind, MappingKind::File | MappingKind::Shmem) {
            let path = if x.path.is_empty() {
                "(anonymous shared)"
            } else {
                x.path.as_str()
            };
            paths.entry((x.kind, path)).or_default().add(&x.figures);
        }
    }
    let mut rows: Vec<(MappingKind, MappingFigures)> = kinds
        .into_iter()
        .filter(|(_, f)| f.rss_bytes > 0 || f.swap_bytes > 0)
        .collect();
    rows.sort_by(|a, b| b.1.pss_bytes.cmp(&a.1.pss_bytes).then(a.0.cmp(&b.0)));
    for (kind, f) in rows {
        writeln!(
            w,
            "    {:<26} PSS {:>9}  RSS {:>9}  anon {:>9}  swap {:>9}  THP {:>9}",
            kind.label(),
            bytes_human(f.pss_bytes),
            bytes_human(f.rss_bytes),
            bytes_human(f.anon_bytes),
            bytes_human(f.swap_bytes),
            bytes_human(f.thp_bytes)
        )?;
        if matches!(kind, MappingKind::File | MappingKind::Shmem) {
            let mut named: Vec<(&str, MappingFigures)> = paths
                .iter()
                .filter(|((k, _), f)| *k == kind && (f.rss_bytes > 0 || f.swap_bytes > 0))
                .map(|((_, p), f)| (*p, *f))
                .collect();
            named.sort_by(|a, b| b.1.pss_bytes.cmp(&a.1.pss_bytes).then(a.0.cmp(b.0)));
            for (path, f) in named.iter().take(TOP_PATHS) {
                writeln!(
                    w,
                    "      {path}: PSS {}, RSS {}",
                    bytes_human(f.pss_bytes),
                    bytes_human(f.rss_bytes)
                )?;
            }
            if named.len() > TOP_PATHS {
                let rest = crate::units::sum(named[TOP_PATHS..].iter().map(|(_, f)| f.pss_bytes));
                writeln!(
                    w,
                    "      {} more: PSS {}",
                    named.len() - TOP_PATHS,
                    bytes_human(rest)
                )?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::maps::{PeakMapsInfo, PeakSnapshot};
    use crate::report::testing::run_of;

    fn peak(tree_pss_bytes: u64, over_budget: u64) -> MemoryAtPeak {
        MemoryAtPeak {
            snapshot: Some(PeakSnapshot {
                t_ns: 1_000_000_000,
                tree_pss_bytes,
                processes: Vec::new(),
                others: 0,
                others_pss_bytes: 0,
            }),
            info: PeakMapsInfo {
                over_budget,
                ..Default::default()
            },
        }
    }

    /// The snapshot against the run's Max PSS says which of three reasons left it below: the
    /// maps' budget, a Max PSS that only an estimate between rounds saw, or a high gone too soon.
    #[test]
    fn a_snapshot_below_the_max_says_why() {
        let mut run = run_of(Vec::new());
        assert_eq!(where_text(&run, &peak(100 << 20, 0)), None);
        run.totals.max_pss_bytes = Some(200 << 20);
        run.totals.max_pss_kind = Some(SampleKind::Exact);
        assert_eq!(
            where_text(&run, &peak(200 << 20, 0)).as_deref(),
            Some(" (the run's Max PSS)")
        );
        let why = |run: &Run, over| where_text(run, &peak(100 << 20, over)).unwrap();
        assert_eq!(
            why(&run, 2),
            " (50% of the run's Max PSS, 200 MiB: later highs were over the maps budget)"
        );
        assert!(why(&run, 0).ends_with(": a later high was gone before it could be mapped)"));
        run.totals.max_pss_kind = Some(SampleKind::Carried);
        assert!(why(&run, 0).contains("an estimate between exact rounds"));
        let none = MemoryAtPeak {
            snapshot: None,
            info: PeakMapsInfo::default(),
        };
        assert_eq!(where_text(&run, &none), None);
    }
}
