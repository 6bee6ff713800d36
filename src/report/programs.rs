//! The run by program: which tools took the CPU and the memory (a build's `cc1 ×850`,
//! `as ×850`, `ld ×3`). Owns the grouping key ([`key`]: `ste diff` compares runs by the same
//! key) and the per-program figures; the text view prints them, the JSON carries them.
//!
//! A pure function of a Run. It reads the per-process ledger (taskstats, the exit stop) and
//! the peaks `model::process_peak` chooses, and invents nothing: a program none of whose
//! processes has a figure shows `n/a`, and the processes without one are counted.

use crate::model::{Escaped, Run, process_peak};
use crate::report::names::{self, Tree};
use crate::units::{bytes_human, duration_human, group_thousands, percent};
use serde::Serialize;
use std::collections::HashMap;
use std::io::{self, Write};

/// Runs of more processes than this show the top programs in the default report.
pub const SHOWN_ABOVE_PROCESSES: usize = 20;
/// How many programs the default report shows.
pub const SHOWN_BY_DEFAULT: usize = 5;

/// One program's share of the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Program {
    /// argv[0]'s base name of the last exec, or for a process that never exec'd the program it
    /// was forked running (its command name).
    pub program: String,
    /// Processes that ran it.
    pub runs: u64,
    /// CPU of those processes (the ledger's exact runtime where it has it); `None` when none
    /// has a figure.
    pub cpu_ns: Option<u64>,
    pub user_ns: Option<u64>,
    pub sys_ns: Option<u64>,
    /// Processes whose CPU no source measured (left out of `cpu_ns`).
    pub cpu_unknown: u64,
    /// From the first of its processes' start to the last one's end.
    pub span_ns: u64,
    /// The largest high-water RSS of one of its processes.
    pub largest_peak_bytes: Option<u64>,
    /// `cpu_ns` over the CPU of every process of the tree that has a figure.
    pub cpu_share: Option<f64>,
    /// The share of the tree's CPU the processes' figures hold, when every one is a taskstats
    /// record and together they hold visibly less (under 90 %: each written before its
    /// thread's exit was over). Then `cpu_ns`, `user_ns` and `sys_ns` are lower bounds, and
    /// `cpu_share` is of the records, not of the tree's CPU; `None` otherwise.
    pub cpu_partial: Option<f64>,
}

/// What a process whose last exec's argv was not read (the netlink tracker, a process gone
/// before its read) is grouped under: its program is unknown.
pub const UNREAD: &str = "(argv unread)";

/// The grouping key of process `i`: argv[0]'s base name of its last exec, or the program it
/// inherited at its fork, or `pid N` when neither is known. A process that exec'd twice
/// (`sh -c 'exec cc'`) counts whole under its last program.
pub fn key(run: &Run, tree: &Tree, i: usize) -> String {
    let p = &run.processes[i];
    match p.execs.last() {
        Some(e) => e
            .argv
            .as_ref()
            .and_then(|a| a.first())
            .map_or_else(|| UNREAD.to_string(), names::basename),
        None => tree
            .program_at(run, i, p.start_ns)
            .unwrap_or_else(|| format!("pid {}", p.pid)),
    }
}

/// Every program of the run, the costliest CPU first (then the largest peak, then the name).
pub fn by_program(run: &Run) -> Vec<Program> {
    let tree = Tree::new(run);
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut out: Vec<(Program, u64, u64)> = Vec::new();
    let add = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) => Some(a.saturating_add(b)),
        (a, b) => a.or(b),
    };
    for (i, p) in run.processes.iter().enumerate() {
        let name = key(run, &tree, i);
        let k = *index.entry(name.clone()).or_insert_with(|| {
            out.push((
                Program {
                    program: name,
                    runs: 0,
                    cpu_ns: None,
                    user_ns: None,
                    sys_ns: None,
                    cpu_unknown: 0,
                    span_ns: 0,
                    largest_peak_bytes: None,
                    cpu_share: None,
                    cpu_partial: None,
                },
                u64::MAX,
                0,
            ));
            out.len() - 1
        });
        let (g, first, last) = &mut out[k];
        g.runs += 1;
        let ledger = p.ledger.as_ref();
        match ledger.and_then(|l| l.cpu()) {
            Some((cpu, _)) => {
                g.cpu_ns = add(g.cpu_ns, Some(cpu));
                g.user_ns = add(
                    g.user_ns,
                    ledger.and_then(|l| l.best(|f| f.user_ns)).map(|x| x.0),
                );
                g.sys_ns = add(
                    g.sys_ns,
                    ledger.and_then(|l| l.best(|f| f.sys_ns)).map(|x| x.0),
                );
            }
            None => g.cpu_unknown += 1,
        }
        let peak = process_peak(run, p).map(|x| x.0);
        g.largest_peak_bytes = g.largest_peak_bytes.max(peak);
        *first = (*first).min(p.start_ns);
        *last = (*last).max(p.end_ns.unwrap_or(run.totals.wall_ns));
    }
    let tree_cpu: u64 = crate::units::sum(out.iter().filter_map(|(g, ..)| g.cpu_ns));
    let mut programs: Vec<Program> = out
        .into_iter()
        .map(|(mut g, first, last)| {
            g.span_ns = last.saturating_sub(first);
            g.cpu_share = g
                .cpu_ns
                .filter(|_| tree_cpu > 0)
                .map(|c| c as f64 / tree_cpu as f64);
            g
        })
        .collect();
    programs.sort_by(|a, b| {
        b.cpu_ns
            .cmp(&a.cpu_ns)
            .then(b.largest_peak_bytes.cmp(&a.largest_peak_bytes))
            .then_with(|| a.program.cmp(&b.program))
    });
    if let Some((seen, tree)) = short_records(run, &programs) {
        for g in &mut programs {
            g.cpu_partial = Some(seen as f64 / tree as f64);
        }
    }
    programs
}

/// (the records' CPU, the tree's) when every process's CPU is a taskstats record and together
/// they hold visibly less than the tree's CPU (the headline's: `report::cpu`). taskstats writes
/// a thread's record early in its exit, without the rest of its last time slice (up to a
/// scheduler tick) and, for a process's last thread, without the teardown of its memory:
/// short processes and large ones show less than they used (a loop of `/bin/true`: a third
/// of the tree's CPU), each by its own amount, so no program's figure can be scaled up: each
/// is a lower bound.
fn short_records(run: &Run, programs: &[Program]) -> Option<(u64, u64)> {
    // Only where that is the reason: every process's figure from taskstats.
    if !run.sources.contains_key("ledger.taskstats") || programs.iter().any(|g| g.cpu_unknown > 0) {
        return None;
    }
    let seen = crate::units::sum(programs.iter().filter_map(|g| g.cpu_ns));
    let tree = crate::report::cpu::headline(run)
        .cpu_ns
        .filter(|&tree| tree > 0 && (seen as f64) < 0.9 * tree as f64)?;
    Some((seen, tree))
}

/// A program's CPU figure, `≥` before it when it is a lower bound.
fn cpu_text(g: &Program, v: u64) -> String {
    match g.cpu_partial {
        Some(_) => format!("≥{}", duration_human(v)),
        None => duration_human(v),
    }
}

/// A program's share: of the records' CPU, or, when they hold visibly less than the tree's,
/// a lower bound of its share of the tree's.
fn share_text(g: &Program) -> Option<String> {
    let share = g.cpu_share?;
    Some(match g.cpu_partial {
        Some(held) => format!("≥{}", percent(share * held)),
        None => percent(share),
    })
}

/// The default report's line on a large run: `By program: cc1 ×40 1.2s (71%), as ×40 …`,
/// the top [`SHOWN_BY_DEFAULT`] by CPU (`--by-program` prints the table).
pub fn summary_line(run: &Run) -> Option<String> {
    if !shown_by_default(run) {
        return None;
    }
    let programs = by_program(run);
    let shown: Vec<String> = programs
        .iter()
        .take(SHOWN_BY_DEFAULT)
        .map(|g| {
            let cpu = g
                .cpu_ns
                .map_or_else(|| "CPU n/a".to_string(), |v| cpu_text(g, v));
            let share = share_text(g).map(|s| format!(" ({s})")).unwrap_or_default();
            format!(
                "{} ×{} {cpu}{share}",
                shown_name(g),
                group_thousands(g.runs)
            )
        })
        .collect();
    let more = programs.len().saturating_sub(SHOWN_BY_DEFAULT);
    let rest = if more > 0 {
        format!("; {more} more (--by-program)")
    } else {
        String::new()
    };
    Some(format!(
        "By program (CPU{}): {}{rest}",
        coverage(run, &programs),
        shown.join(", ")
    ))
}

/// The program's name for the terminal, escaped: it is the program's own choice.
fn shown_name(g: &Program) -> String {
    Escaped::str(&g.program).to_string()
}

/// What the processes' own CPU figures hold of the tree's exact CPU, when they hold visibly
/// less (below 90 %): `"; the processes' records hold 30ms of the tree's 134ms"`. taskstats
/// writes a thread's record early in its exit, without the rest of its last time slice (up
/// to a scheduler tick) and, for a process's last thread, without the teardown of its memory:
/// short processes and large ones show less than they used, and their programs a smaller
/// share. Empty otherwise.
fn coverage(run: &Run, programs: &[Program]) -> String {
    let Some((seen, tree)) = short_records(run, programs) else {
        return String::new();
    };
    format!(
        "; the processes' records hold {} ({}) of the tree's {}, written before each one's exit was over: each figure is a lower bound",
        duration_human(seen),
        percent(seen as f64 / tree as f64),
        duration_human(tree)
    )
}

/// Whether the default report shows the top programs: on runs of more than
/// [`SHOWN_ABOVE_PROCESSES`] processes.
pub fn shown_by_default(run: &Run) -> bool {
    run.processes.len() > SHOWN_ABOVE_PROCESSES
}

/// 77 columns: the table fits a terminal of 80.
const HEADER: &str =
    "  PROGRAM          RUNS      CPU     USER   SYSTEM  SHARE     SPAN   PEAK RSS";
/// The same, when CPU, USER, SYSTEM and SHARE (of the tree's CPU) are lower bounds.
const HEADER_AT_LEAST: &str =
    "  PROGRAM          RUNS     ≥CPU    ≥USER  ≥SYSTEM ≥SHARE     SPAN   PEAK RSS";

/// The by-program table: `limit` programs (all with `None`), then how many were left out.
pub fn render(run: &Run, w: &mut dyn Write, limit: Option<usize>) -> io::Result<()> {
    let programs = by_program(run);
    let shown = limit.unwrap_or(programs.len()).min(programs.len());
    let of = if shown < programs.len() {
        format!(", the top {shown} of {}", programs.len())
    } else {
        String::new()
    };
    writeln!(
        w,
        "By program (sorted by CPU{of}{}):",
        coverage(run, &programs)
    )?;
    // Lower bounds (records short of the tree's CPU) are marked in the header, which keeps
    // the columns' widths.
    if programs.iter().any(|g| g.cpu_partial.is_some()) {
        writeln!(w, "{HEADER_AT_LEAST}")?;
    } else {
        writeln!(w, "{HEADER}")?;
    }
    let na = |v: Option<u64>, f: fn(u64) -> String| v.map_or_else(|| "n/a".to_string(), f);
    for g in &programs[..shown] {
        let full = shown_name(g);
        let mut name: String = full.chars().take(14).collect();
        if full.chars().count() > 14 {
            name.pop();
            name.push('…');
        }
        writeln!(
            w,
            "  {name:<14} {:>6}  {:>7}  {:>7}  {:>7}  {:>5}  {:>7}  {:>9}",
            group_thousands(g.runs),
            na(g.cpu_ns, duration_human),
            na(g.user_ns, duration_human),
            na(g.sys_ns, duration_human),
            g.cpu_share
                .map(|s| percent(s * g.cpu_partial.unwrap_or(1.0)))
                .unwrap_or_else(|| "n/a".into()),
            duration_human(g.span_ns),
            na(g.largest_peak_bytes, bytes_human),
        )?;
    }
    let unknown: u64 = programs.iter().map(|g| g.cpu_unknown).sum();
    if unknown > 0 {
        writeln!(
            w,
            "  ({} process{} without a CPU figure left out of CPU and SHARE)",
            group_thousands(unknown),
            if unknown == 1 { "" } else { "es" }
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testing;

    #[test]
    fn groups_by_program_and_sorts_by_cpu() {
        let run = testing::build_accounting();
        let programs = by_program(&run);
        let names: Vec<&str> = programs.iter().map(|g| g.program.as_str()).collect();
        // Every process lands in exactly one program.
        let runs: u64 = programs.iter().map(|g| g.runs).sum();
        assert_eq!(runs, run.processes.len() as u64);
        // Sorted by CPU, the shares add up to the whole.
        for pair in programs.windows(2) {
            assert!(pair[0].cpu_ns >= pair[1].cpu_ns, "{names:?}");
        }
        let share: f64 = programs.iter().filter_map(|g| g.cpu_share).sum();
        assert!((share - 1.0).abs() < 1e-9, "{share}");
        // Each program's CPU is the sum of its processes' ledger CPU.
        let tree = Tree::new(&run);
        for g in &programs {
            let cpu: u64 = (0..run.processes.len())
                .filter(|&i| key(&run, &tree, i) == g.program)
                .filter_map(|i| run.processes[i].ledger.as_ref()?.cpu().map(|x| x.0))
                .sum();
            assert_eq!(g.cpu_ns.unwrap_or(0), cpu, "{}", g.program);
        }
    }

    #[test]
    fn a_forked_child_counts_under_the_program_it_was_forked_running() {
        let mut root = testing::process(10, None, 0, Some(100));
        root.execs.push(testing::exec(1, &["/bin/sh", "-c", "x"]));
        let sub = testing::process(11, Some(10), 5, Some(50));
        let mut cc = testing::process(12, Some(11), 10, Some(40));
        cc.execs
            .push(testing::exec(11, &["/usr/lib/gcc/cc1", "a.c"]));
        let orphan = testing::process(13, None, 20, Some(30));
        let run = testing::run_of(vec![root, sub, cc, orphan]);
        let mut programs = by_program(&run);
        programs.sort_by(|a, b| a.program.cmp(&b.program));
        let got: Vec<(&str, u64, u64, Option<u64>)> = programs
            .iter()
            .map(|g| (g.program.as_str(), g.runs, g.span_ns, g.cpu_ns))
            .collect();
        assert_eq!(
            got,
            [
                ("cc1", 1, 30, None),
                ("pid 13", 1, 10, None),
                ("sh", 2, 100, None)
            ]
        );
        assert_eq!(programs[2].cpu_unknown, 2);
    }

    /// The processes' taskstats figures well below the tree's CPU (the headline's): the line
    /// says how much they hold and marks every program's figure a lower bound; close to it, or
    /// with figures from elsewhere, it says nothing more.
    #[test]
    fn taskstats_short_of_the_tree_s_cpu_is_said() {
        let mut run = testing::build_accounting();
        // Every process with a figure (the line speaks only for those).
        run.processes
            .retain(|p| p.ledger.as_ref().is_some_and(|l| l.cpu().is_some()));
        // The tree's CPU is getrusage's here (no group figure to take instead).
        run.accounting.as_mut().unwrap().tree_cpu = None;
        let seen = crate::units::sum(by_program(&run).iter().filter_map(|g| g.cpu_ns));
        assert!(run.sources.contains_key("ledger.taskstats"));
        let coverage_of = |run: &Run| coverage(run, &by_program(run));
        run.totals.user_ns = Some(seen);
        run.totals.sys_ns = Some(seen / 20);
        assert_eq!(coverage_of(&run), "", "within 10 %");
        assert!(by_program(&run).iter().all(|g| g.cpu_partial.is_none()));
        run.totals.user_ns = Some(2 * seen);
        let tree = 2 * seen + seen / 20;
        assert_eq!(
            coverage_of(&run),
            format!(
                "; the processes' records hold {} ({}) of the tree's {}, written before each one's exit was over: each figure is a lower bound",
                duration_human(seen),
                percent(seen as f64 / tree as f64),
                duration_human(tree)
            )
        );
        let programs = by_program(&run);
        let top = &programs[0];
        assert_eq!(top.cpu_partial, Some(seen as f64 / tree as f64));
        // The default line's words for it (shown on runs of more than 20 processes).
        let cpu = top.cpu_ns.unwrap();
        assert_eq!(cpu_text(top, cpu), format!("≥{}", duration_human(cpu)));
        assert_eq!(
            share_text(top).unwrap(),
            format!("≥{}", percent(cpu as f64 / tree as f64))
        );
        let mut table = Vec::new();
        render(&run, &mut table, None).unwrap();
        assert!(String::from_utf8(table).unwrap().contains(HEADER_AT_LEAST));
        run.sources.remove("ledger.taskstats");
        assert_eq!(coverage_of(&run), "", "not taskstats");
    }

    #[test]
    fn the_table() {
        let mut out = Vec::new();
        render(&testing::build_accounting(), &mut out, Some(3)).unwrap();
        insta::assert_snapshot!(String::from_utf8(out).unwrap());
    }
}
