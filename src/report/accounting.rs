//! Text for exact accounting: the three memory figures side by side, where the wall time went,
//! the critical path, the cgroup's figures, lingering descendants, what could not be measured
//! and why; and the optional views, the ledger as a tree (`--tree`) and the costliest processes
//! (`--top N`).
//!
//! Pure functions of a Run (model and units only).

use crate::model::{
    Accounting, MemoryFigure, Process, Run, TimeBreakdown, Totals, join_escaped, process_peak,
    signal_name,
};
use crate::report::names::{cut_middle, described, distinct, program};
use crate::report::style::Style;
use crate::units::{bytes_human, duration_human, group_thousands, percent};
use std::collections::HashMap;
use std::io::{self, Write};

/// Which ledger views to print after the summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Views {
    pub tree: bool,
    pub top: Option<usize>,
}

/// The default report's accounting lines: the critical path, descendants that outlived the
/// command, losses, and one line naming what was not measured (`-v` says why and how).
pub fn render_short(run: &Run, w: &mut dyn Write, style: Style) -> io::Result<()> {
    let Some(a) = &run.accounting else {
        return Ok(());
    };
    critical_path_line(run, a, w, style)?;
    lingering_line(run, a, w)?;
    oom_line(run, w)?;
    accounting_lost_line(a, w)?;
    // Delay accounting off and not asked for is the machine's setting, on every run: `-v`
    // says it; the rest could have been measured here.
    let missing: Vec<&crate::model::Unavailable> = a
        .unavailable
        .iter()
        .filter(|u| u.figure != crate::model::DELAYS_OFF)
        .collect();
    if !missing.is_empty() {
        // The figure's name without its gloss: `taskstats (per-process delays, …)` → `taskstats`.
        let names: Vec<&str> = missing
            .iter()
            .map(|u| u.figure.split(" (").next().unwrap_or(&u.figure))
            .collect();
        writeln!(
            w,
            "Not measured: {} (-v says why, and what would measure them)",
            names.join("; ")
        )?;
    }
    Ok(())
}

/// Accounting lines of the summary (nothing for a run without accounting).
pub fn render(run: &Run, w: &mut dyn Write, style: Style) -> io::Result<()> {
    let Some(a) = &run.accounting else {
        return Ok(());
    };
    memory_lines(run, a, w)?;
    if let Some(g) = &a.group
        && let Some(e) = &g.end
    {
        let mut parts = Vec::new();
        if let Some(c) = e.cpu_ns {
            let walltime = match crate::report::cpu::headline(run).instead {
                Some(_) => "the Walltime line's too",
                None => "the Walltime line's split is getrusage's, of the reaped processes",
            };
            let split = match (e.cpu_user_ns, e.cpu_sys_ns) {
                (Some(u), Some(s)) => format!(
                    " (user {}, system {}: split by the kernel's tick samples, as getrusage does; {walltime})",
                    ms(u),
                    ms(s)
                ),
                _ => String::new(),
            };
            parts.push(format!("CPU {}{split}", ms(c)));
        }
        if let Some(p) = e.pids_peak {
            parts.push(format!(
                "at most {p} task{} at once",
                if p == 1 { "" } else { "s" }
            ));
        }
        if !parts.is_empty() {
            writeln!(
                w,
                "Group: {} [cgroup v{} {}, exact]",
                parts.join(", "),
                g.version,
                g.dirs.first().map(String::as_str).unwrap_or("")
            )?;
        }
    }
    time_line(a, &run.totals, w)?;
    critical_path_line(run, a, w, style)?;
    lingering_line(run, a, w)?;
    oom_line(run, w)?;
    accounting_lost_line(a, w)?;
    for u in &a.unavailable {
        writeln!(w, "Unavailable: {}: {}", u.figure, u.why)?;
    }
    Ok(())
}

fn oom_line(run: &Run, w: &mut dyn Write) -> io::Result<()> {
    match crate::report::oom::line(run) {
        Some(line) => writeln!(w, "{line}"),
        None => Ok(()),
    }
}

fn accounting_lost_line(a: &Accounting, w: &mut dyn Write) -> io::Result<()> {
    if a.taskstats_overruns > 0 {
        writeln!(
            w,
            "Accounting lost: the taskstats receive buffer overflowed {} time{}; some processes miss their exit records",
            a.taskstats_overruns,
            if a.taskstats_overruns == 1 { "" } else { "s" }
        )?;
    }
    if a.taskstats_cut > 0 {
        writeln!(
            w,
            "Accounting lost: {} taskstats exit record{} longer than ste reads, cut short; some processes miss their exit records",
            a.taskstats_cut,
            if a.taskstats_cut == 1 {
                " was"
            } else {
                "s were"
            }
        )?;
    }
    Ok(())
}

/// Whether every process of the tree was alive at one moment: only then is a sum of their
/// peaks a bound the tree could have reached (a build's 1,700 compilers never lived together).
pub(crate) fn all_lived_together(run: &Run) -> bool {
    let latest_start = run.processes.iter().map(|p| p.start_ns).max();
    let earliest_end = run
        .processes
        .iter()
        .map(|p| p.end_ns.unwrap_or(u64::MAX))
        .min();
    matches!((latest_start, earliest_end), (Some(s), Some(e)) if s < e)
}

fn ms(ns: u64) -> String {
    duration_human(ns)
}

fn label(f: &MemoryFigure) -> String {
    format!(
        "[{}, {}]",
        f.from,
        if f.exact { "exact" } else { "sampled" }
    )
}

/// Why the cgroup's peak is below a process's peak or Max PSS, when it is (`ls`: 512 KiB
/// against 2.4 MiB): a cgroup is charged for the pages its own tasks brought into memory; the
/// libraries and files they map that were already in the page cache are charged to the
/// cgroup that read them first, and count in their RSS and PSS all the same.
pub(crate) fn group_peak_below(run: &Run) -> Option<String> {
    let m = &run.accounting.as_ref()?.memory;
    let group = m.group_peak.as_ref()?.bytes;
    let process = m
        .largest_process_peak
        .as_ref()
        .map(|l| l.bytes)
        .or(run.totals.peak_rss_bytes)
        .filter(|&p| p > group);
    let what = match (process, run.totals.max_pss_bytes.filter(|&p| p > group)) {
        (Some(_), _) => "the largest process's peak",
        (None, Some(_)) => "Max PSS",
        (None, None) => return None,
    };
    Some(format!(
        "the group peak is below {what}: a cgroup is charged for the pages its processes brought in, not for libraries and files already in the page cache"
    ))
}

fn memory_lines(run: &Run, a: &Accounting, w: &mut dyn Write) -> io::Result<()> {
    let m = &a.memory;
    if let Some(g) = &m.group_peak {
        let mut split = Vec::new();
        if let Some(grp) = &a.group {
            if let (Some(an), Some(fi)) = (grp.sampled_peak_anon_bytes, grp.sampled_peak_file_bytes)
            {
                split.push(format!(
                    "at the highest sample anon {}, page cache {}",
                    bytes_human(an),
                    bytes_human(fi)
                ));
            }
            if let Some(f) = grp.end.and_then(|e| e.file_bytes) {
                split.push(format!("page cache charged at the end {}", bytes_human(f)));
            }
        }
        let split = if split.is_empty() {
            String::new()
        } else {
            format!(" ({})", split.join("; "))
        };
        writeln!(
            w,
            "Memory, group peak: {} bytes{split} {}",
            group_thousands(g.bytes),
            label(g)
        )?;
        if let Some(why) = group_peak_below(run) {
            writeln!(w, "  {why}")?;
        }
    }
    if let Some(l) = &m.largest_process_peak {
        let who = l
            .pid
            .and_then(|pid| run.processes.iter().find(|p| p.pid == pid))
            .map(|p| format!(", pid {} ({})", p.pid, described(p, NAME_CHARS)))
            .unwrap_or_default();
        writeln!(
            w,
            "Memory, largest process peak: {} bytes{who} {}",
            group_thousands(l.bytes),
            label(l)
        )?;
    }
    if let Some(s) = m
        .summed_process_peaks
        .as_ref()
        .filter(|_| all_lived_together(run))
    {
        writeln!(
            w,
            "Memory, process peaks summed: {} bytes over {} process{} [{}, an upper bound: they need not have peaked together]",
            group_thousands(s.bytes),
            s.processes.unwrap_or(0),
            if s.processes == Some(1) { "" } else { "es" },
            s.from
        )?;
    }
    // The PSS curve's maximum is Max PSS, printed above with how exact it is.
    Ok(())
}

/// What the time line says when the processes' taskstats CPU holds visibly less than the
/// tree's exact CPU (`Totals::cpu_short_of`): the end of each thread's exit (its last time
/// slice, the last thread's teardown of the memory) is not in its record, and the
/// "otherwise" part has it instead.
fn short_cpu(t: &TimeBreakdown, totals: &Totals) -> String {
    let short = t
        .cpu_ns
        .filter(|_| t.from == "taskstats")
        .and_then(|cpu| Some((cpu, totals.cpu_short_of(cpu)?)));
    short.map_or_else(String::new, |(cpu, tree)| {
        format!(
            "; the records hold {} of the tree's {} of CPU (written before each thread's exit was over), which \"otherwise\" holds instead",
            ms(cpu),
            ms(tree)
        )
    })
}

fn time_line(a: &Accounting, totals: &Totals, w: &mut dyn Write) -> io::Result<()> {
    let Some(t) = &a.time else {
        return Ok(());
    };
    let Some(total) = t.task_time_ns else {
        return Ok(());
    };
    let share = |v: u64| {
        if total > 0 {
            format!(" ({})", percent(v as f64 / total as f64))
        } else {
            String::new()
        }
    };
    let mut parts = Vec::new();
    match (t.user_ns, t.sys_ns) {
        (Some(u), Some(s)) => {
            parts.push(format!("user {}{}", ms(u), share(u)));
            parts.push(format!("system {}{}", ms(s), share(s)));
        }
        _ => {
            if let Some(c) = t.cpu_ns {
                parts.push(format!("on a CPU {}{}", ms(c), share(c)));
            }
        }
    }
    if let Some(r) = t.run_queue_ns {
        parts.push(format!("waiting for a CPU {}{}", ms(r), share(r)));
    }
    match t.blkio_ns {
        Some(b) => parts.push(format!("block I/O {}{}", ms(b), share(b))),
        None => parts.push("block I/O n/a".into()),
    }
    match t.swap_reclaim_ns {
        Some(s) => parts.push(format!("swap/reclaim {}{}", ms(s), share(s))),
        None => parts.push("swap/reclaim n/a".into()),
    }
    if let Some(o) = t.other_ns {
        parts.push(format!(
            "sleeping or waiting otherwise {}{}",
            ms(o),
            share(o)
        ));
    }
    let missing = if t.processes_without_figures > 0 {
        format!(
            "; {} process{} without figures left out",
            t.processes_without_figures,
            if t.processes_without_figures == 1 {
                ""
            } else {
                "es"
            }
        )
    } else {
        String::new()
    };
    let before = a
        .before_release
        .filter(|b| b.alive_ns > 0)
        .map(|b| {
            format!(
                "; the first process's {} before ste released it (waiting while ste set up) left out",
                ms(b.alive_ns)
            )
        })
        .unwrap_or_default();
    writeln!(
        w,
        "Time: {} of task time over {} of wall: {} [{}; the user/system split follows the kernel's tick samples, as getrusage does{}{missing}{before}]",
        ms(total),
        ms(t.wall_ns),
        parts.join(", "),
        t.from,
        short_cpu(t, totals)
    )
}

/// The most a process's words take in a line of the summary when nothing shorter tells it
/// apart (`names::described`).
pub(crate) const NAME_CHARS: usize = 40;

/// The critical path as its few longest links (a build's path of 851 processes is a list no
/// one reads): each link's own time on the path and its share of the wall time.
fn critical_path_line(
    run: &Run,
    a: &Accounting,
    w: &mut dyn Write,
    _style: Style,
) -> io::Result<()> {
    const SHOWN: usize = 3;
    if a.critical_path.len() < 2 {
        return Ok(());
    }
    let by_pid: HashMap<(i32, u64), &Process> = run
        .processes
        .iter()
        .map(|p| ((p.pid, p.start_ns), p))
        .collect();
    let mut links: Vec<_> = a.critical_path.iter().collect();
    links.sort_by_key(|l| std::cmp::Reverse(l.self_ns));
    let wall = run.totals.wall_ns;
    let shown: Vec<String> = links
        .iter()
        .take(SHOWN)
        .enumerate()
        .map(|(k, l)| {
            let name = by_pid
                .get(&(l.pid, l.start_ns))
                .map(|p| described(p, NAME_CHARS))
                .unwrap_or_default();
            let share = if wall == 0 {
                String::new()
            } else if k == 0 {
                format!(
                    " ({} of the wall time)",
                    percent(l.self_ns as f64 / wall as f64)
                )
            } else {
                format!(" ({})", percent(l.self_ns as f64 / wall as f64))
            };
            format!(
                "{name} (pid {}) {}{share}",
                l.pid,
                duration_human(l.self_ns)
            )
        })
        .collect();
    let longest = if links.len() > SHOWN {
        format!("the {SHOWN} longest links")
    } else {
        "its links".to_string()
    };
    writeln!(
        w,
        "Critical path: {} processes; {longest}: {}",
        a.critical_path.len(),
        shown.join(", ")
    )
}

fn lingering_line(run: &Run, a: &Accounting, w: &mut dyn Write) -> io::Result<()> {
    if a.lingering.is_empty() {
        return Ok(());
    }
    let name = |pid: i32| {
        run.processes
            .iter()
            .rev()
            .find(|p| p.pid == pid)
            .map(program)
            .unwrap_or_default()
    };
    let root_end = run.processes.first().and_then(|p| p.end_ns).unwrap_or(0);
    let items: Vec<String> = a
        .lingering
        .iter()
        .take(8)
        .map(|l| {
            let how = if l.killed {
                "ended by ste".to_string()
            } else {
                match l.end_ns {
                    Some(e) => format!(
                        "ended {} after the command",
                        duration_human(e - root_end.min(e))
                    ),
                    None => "still running".to_string(),
                }
            };
            format!("{} ({}) {how}", l.pid, name(l.pid))
        })
        .collect();
    let more = a.lingering.len().saturating_sub(items.len());
    let killed = a
        .killed_lingering
        .as_ref()
        .map(|k| format!("; --kill-lingering sent {k}"))
        .unwrap_or_default();
    writeln!(
        w,
        "Lingering: {} descendant{} outlived the command: {}{}{killed}",
        a.lingering.len(),
        if a.lingering.len() == 1 { "" } else { "s" },
        items.join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    )
}

/// The exit column: code, signal name, or why it is unknown.
fn exit_text(p: &Process) -> String {
    match (p.exit_code, p.signal, p.end_ns) {
        (Some(c), _, _) => c.to_string(),
        (None, Some(s), _) => signal_name(s),
        (None, None, None) => "running".into(),
        _ => "?".into(),
    }
}

fn argv_text(p: &Process) -> String {
    match p.execs.last().and_then(|e| e.argv.as_ref()) {
        Some(a) => join_escaped(a),
        None if p.execs.is_empty() => "(forked, no exec)".into(),
        None => "[?]".into(),
    }
}

/// The argv with its first word's directory left out: `cc1 -quiet a.c`.
fn short_argv(p: &Process) -> Option<String> {
    let argv = p.execs.last()?.argv.as_ref()?;
    let (first, rest) = argv.split_first()?;
    let mut words = vec![crate::model::Arg::from(
        crate::report::names::basename(first).as_str(),
    )];
    words.extend(rest.iter().cloned());
    Some(join_escaped(&words))
}

fn cut(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    let mut out: String = s.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

struct Row {
    lifetime: String,
    cpu: String,
    rss: String,
    io: String,
    exit: String,
}

fn row(run: &Run, p: &Process) -> Row {
    let lifetime = match p.end_ns {
        Some(e) => duration_human(e.saturating_sub(p.start_ns)),
        None => "running".into(),
    };
    let ledger = p.ledger.as_ref();
    let cpu = ledger
        .and_then(|l| l.cpu())
        .map_or("n/a".into(), |(v, _)| duration_human(v));
    let rss = process_peak(run, p).map_or("n/a".into(), |(v, _, _)| bytes_human(v));
    let io = ledger
        .and_then(|l| l.io_bytes())
        .map(|(v, _)| v)
        .or_else(|| p.io.map(|io| io.read_bytes + io.write_bytes))
        .map_or("n/a".into(), bytes_human);
    Row {
        lifetime,
        cpu,
        rss,
        io,
        exit: exit_text(p),
    }
}

/// Tree levels drawn with lines; deeper ones show their depth as a number.
const DRAWN_LEVELS: usize = 3;

const HEADER: &str = "    PID  LIFETIME       CPU  PEAK RSS       I/O  EXIT  COMMAND";

/// A row of `--tree` or `--top`: the figures, then the tree's lines (`prefix`) and the
/// process's command. When `width` is `None` (into a file) the argv is whole; else, when it
/// does not fit, the program and what tells it apart come first (`cc1 lib/zstd.c: -quiet …`),
/// or without such a word, the argv cut in its middle (its program and last words kept).
fn row_line(p: &Process, r: &Row, prefix: &str, width: Option<usize>) -> String {
    let head = format!(
        "{:>7}  {:>8}  {:>8}  {:>8}  {:>8}  {:>4}  ",
        p.pid,
        cut(&r.lifetime, 8),
        cut(&r.cpu, 8),
        cut(&r.rss, 8),
        cut(&r.io, 8),
        cut(&r.exit, 7)
    );
    let argv = argv_text(p);
    let Some(width) = width else {
        return format!("{head}{prefix}{argv}");
    };
    let room = width
        .saturating_sub(head.chars().count() + prefix.chars().count())
        .max(12);
    if argv.chars().count() <= room {
        return format!("{head}{prefix}{argv}");
    }
    let named = p
        .execs
        .last()
        .and_then(|e| e.argv.as_deref())
        .and_then(|a| {
            let d = distinct(a)?;
            let name = format!("{} {d}", program(p));
            Some(if name.chars().count() + 3 > room {
                cut_middle(&name, room)
            } else {
                cut(&format!("{name}: {}", join_escaped(&a[1..])), room)
            })
        });
    let command = named.unwrap_or_else(|| {
        // No room for the whole: the program's base name, then its words.
        cut_middle(&short_argv(p).unwrap_or(argv), room)
    });
    format!("{head}{prefix}{command}")
}

/// `--tree` and `--top N`, after the summary.
pub fn render_views(run: &Run, w: &mut dyn Write, style: Style, views: Views) -> io::Result<()> {
    crate::report::terminal::through(w, style.color, |w| views_of(run, w, style, views))
}

fn views_of(run: &Run, w: &mut dyn Write, style: Style, views: Views) -> io::Result<()> {
    if run.exit.launch_error.is_some() {
        // Nothing ran: the one line of `text::launch_failure_line` is the report.
        return Ok(());
    }
    if views.tree {
        tree(run, w, style)?;
    }
    if let Some(n) = views.top {
        top(run, w, style, n)?;
    }
    Ok(())
}

fn tree(run: &Run, w: &mut dyn Write, style: Style) -> io::Result<()> {
    let procs = &run.processes;
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); procs.len()];
    let mut roots = Vec::new();
    let mut latest: HashMap<i32, usize> = HashMap::new();
    for (i, p) in procs.iter().enumerate() {
        match p.ppid.and_then(|pp| latest.get(&pp).copied()) {
            Some(parent) if parent != i => children[parent].push(i),
            _ => roots.push(i),
        }
        latest.insert(p.pid, i);
    }
    let deep = tree_depths(&children, &roots).any(|d| d > DRAWN_LEVELS);
    writeln!(
        w,
        "Process tree (ledger){}:",
        if deep {
            format!("; levels past {DRAWN_LEVELS} are numbered on their branch (└4─)")
        } else {
            String::new()
        }
    )?;
    writeln!(w, "{HEADER}")?;
    let width = style.fit.then_some(style.width);
    // Depth-first, iteratively: a deep tree must not exhaust the stack.
    let mut stack: Vec<(usize, String, bool, usize)> = roots
        .iter()
        .rev()
        .enumerate()
        .map(|(k, &i)| (i, String::new(), k == 0, 0))
        .collect();
    while let Some((i, indent, last, depth)) = stack.pop() {
        let p = &procs[i];
        let branch = if last { "└─ " } else { "├─ " };
        let prefix = match depth {
            0 => String::new(),
            // Past a few levels the lines would leave the argv no room at 80 columns: they
            // stop growing and the level is written on the branch, inside the tree's lines
            // (a bare number before them read as a second EXIT column).
            d if d > DRAWN_LEVELS => {
                format!("{indent}{}{d}─ ", if last { '└' } else { '├' })
            }
            _ => format!("{indent}{branch}"),
        };
        writeln!(w, "{}", row_line(p, &row(run, p), &prefix, width))?;
        let child_indent = match depth {
            0 => String::new(),
            // Not drawn deeper: the indent stops growing (a tree 10,000 deep stays small).
            d if d >= DRAWN_LEVELS => indent,
            _ => format!("{indent}{}", if last { "   " } else { "│  " }),
        };
        for (k, &c) in children[i].iter().enumerate().rev() {
            stack.push((
                c,
                child_indent.clone(),
                k + 1 == children[i].len(),
                depth + 1,
            ));
        }
    }
    Ok(())
}

/// The depth of every process below `roots` (0 for a root), walked without recursion.
fn tree_depths<'a>(
    children: &'a [Vec<usize>],
    roots: &[usize],
) -> impl Iterator<Item = usize> + 'a {
    let mut stack: Vec<(usize, usize)> = roots.iter().map(|&i| (i, 0)).collect();
    std::iter::from_fn(move || {
        let (i, d) = stack.pop()?;
        stack.extend(children[i].iter().map(|&c| (c, d + 1)));
        Some(d)
    })
}

fn top(run: &Run, w: &mut dyn Write, style: Style, n: usize) -> io::Result<()> {
    let by = |key: &dyn Fn(&Process) -> Option<u64>| -> Vec<&Process> {
        let mut v: Vec<(&Process, u64)> = run
            .processes
            .iter()
            .filter_map(|p| key(p).map(|k| (p, k)))
            .collect();
        v.sort_by_key(|x| std::cmp::Reverse(x.1));
        v.into_iter().take(n).map(|(p, _)| p).collect()
    };
    let cpu = by(&|p| p.ledger.as_ref().and_then(|l| l.cpu()).map(|x| x.0));
    let rss = by(&|p| process_peak(run, p).map(|x| x.0));
    for (title, list) in [("CPU", cpu), ("peak RSS", rss)] {
        writeln!(w, "Top {n} by {title}:")?;
        if list.is_empty() {
            writeln!(w, "  (no process has this figure)")?;
            continue;
        }
        writeln!(w, "{HEADER}")?;
        for p in list {
            writeln!(
                w,
                "{}",
                row_line(p, &row(run, p), "", style.fit.then_some(style.width))
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
