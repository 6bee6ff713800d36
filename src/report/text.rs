//! The text report: the seed's `EXEC:` lines and summary in its words and layout, the chart,
//! then ste's own lines (exit status, exact peak RSS, tracker, sampler, losses, notes).
//!
//! A pure function of a Run. The live view prints `exec_line` as execs happen; `ste report`
//! prints the same lines from a finished Run, so both outputs are identical.

use crate::model::{Exec, Process, Run, join_escaped, signal_name};
use crate::report::{chart, syscalls};
use crate::units::{bytes_human, duration_human, group_thousands, millis, percent};
use std::io::{self, Write};

/// Rows of the chart's plot area.
pub const CHART_HEIGHT: usize = 12;

#[derive(Debug, Clone, Copy)]
pub struct Style {
    /// Columns available (the terminal's width, or 80).
    pub width: usize,
    /// ANSI colours (only on a terminal, never with `NO_COLOR`).
    pub color: bool,
}

/// `EXEC: [argv]`, the seed's line for one exec.
pub fn exec_line(p: &Process, e: &Exec, style: Style) -> String {
    let label = if style.color {
        "\x1b[1;32mEXEC:\x1b[0m"
    } else {
        "EXEC:"
    };
    match &e.argv {
        Some(argv) => format!("{label} [{}]", join_escaped(argv)),
        None => format!(
            "{label} [?] (pid {}: argv unreadable, the process was already gone)",
            p.pid
        ),
    }
}

/// Every exec of the run, in the order they happened.
pub fn render_execs(run: &Run, w: &mut dyn Write, style: Style) -> io::Result<()> {
    let mut all: Vec<(&Process, &Exec)> = run
        .processes
        .iter()
        .flat_map(|p| p.execs.iter().map(move |e| (p, e)))
        .collect();
    all.sort_by_key(|(_, e)| e.t_ns);
    for (p, e) in all {
        writeln!(w, "{}", exec_line(p, e, style))?;
    }
    Ok(())
}

/// The whole report as `ste report` prints it: the exec lines, then the summary.
pub fn render(run: &Run, w: &mut dyn Write, style: Style) -> io::Result<()> {
    render_execs(run, w, style)?;
    render_summary(run, w, style)
}

/// The summary printed when the run is over.
pub fn render_summary(run: &Run, w: &mut dyn Write, style: Style) -> io::Result<()> {
    let t = &run.totals;
    writeln!(w, "Num threads = {}", group_thousands(t.threads))?;
    writeln!(w, "Num process = {}", group_thousands(t.processes))?;
    match t.max_pss_bytes {
        Some(b) => writeln!(w, "Max PSS: {} bytes", group_thousands(b))?,
        None => writeln!(w, "Max PSS: n/a")?,
    }
    let opt_ms = |v: Option<u64>| v.map_or_else(|| "n/a".to_string(), millis);
    writeln!(
        w,
        "Walltime: {} - user-space: {} - kernel-space: {}",
        millis(t.wall_ns),
        opt_ms(t.user_ns),
        opt_ms(t.sys_ns)
    )?;
    for line in chart::render(
        &run.samples,
        t.wall_ns,
        style.width,
        CHART_HEIGHT,
        style.color,
    ) {
        writeln!(w, "{line}")?;
    }
    writeln!(w, "Exit status: {}", exit_text(run))?;
    writeln!(w, "Peak RSS: {}", peak_rss_text(run))?;
    writeln!(w, "Tracker: {}", tracker_text(run))?;
    writeln!(w, "Sampler: {}", sampler_text(run))?;
    writeln!(w, "Lost events: {}", lost_text(run))?;
    if t.still_running > 0 {
        writeln!(w, "Still running: {}", still_running_text(run))?;
    }
    let o = &run.overhead;
    if let Some(cpu) = o.cpu_ns {
        let share = if t.wall_ns > 0 {
            format!(" ({} of wall)", percent(cpu as f64 / t.wall_ns as f64))
        } else {
            String::new()
        };
        let rss = o
            .max_rss_bytes
            .map(|b| format!(", peak RSS {}", bytes_human(b)))
            .unwrap_or_default();
        writeln!(w, "ste itself: {} of CPU{share}{rss}", millis(cpu))?;
    }
    syscalls::render(run, w)?;
    for note in &run.notes {
        writeln!(w, "Note: {note}")?;
    }
    Ok(())
}

fn exit_text(run: &Run) -> String {
    let e = &run.exit;
    if let Some(err) = &e.launch_error {
        return format!(
            "could not start: {} (ste exits {})",
            err.message,
            e.ste_status()
        );
    }
    match (e.code, e.signal) {
        (Some(code), _) => code.to_string(),
        (None, Some(sig)) => format!(
            "killed by signal {sig} ({}){} (ste exits {})",
            signal_name(sig),
            if e.core_dumped { ", core dumped" } else { "" },
            e.ste_status()
        ),
        (None, None) => "unknown (the command was not reaped)".to_string(),
    }
}

/// The program a process ran last, for short mentions (`sleep`), or how it came to be.
pub fn program(p: &Process) -> String {
    p.execs
        .iter()
        .rev()
        .find_map(|e| e.argv.as_ref().and_then(|a| a.first()))
        .map(|a| {
            let full = a.to_string_lossy();
            full.rsplit('/').next().unwrap_or(&full).to_string()
        })
        .unwrap_or_else(|| "forked, no exec".to_string())
}

fn peak_rss_text(run: &Run) -> String {
    let src = run.sources.get("peak_rss_bytes");
    match (run.totals.peak_rss_bytes, run.totals.peak_rss_pid) {
        (Some(b), Some(pid)) => {
            let name = run
                .processes
                .iter()
                .find(|p| p.pid == pid)
                .map(program)
                .unwrap_or_default();
            let from = src
                .map(|s| format!(" [{}{}]", s.from, if s.exact { ", exact" } else { "" }))
                .unwrap_or_default();
            format!("{} bytes, pid {pid} ({name}){from}", group_thousands(b))
        }
        _ => match src {
            Some(s) => format!("n/a [{}]", s.from),
            None => "n/a".to_string(),
        },
    }
}

fn tracker_text(run: &Run) -> String {
    let what = match run.tracker.as_str() {
        "ptrace" if run.syscalls.as_ref().is_some_and(|s| s.method == "ptrace") => {
            "fork/exec/exit stops and a stop at every system call's entry and exit (--allow-ptrace); counts and argv exact"
        }
        "ptrace" => "fork/exec/exit stops, no syscall stops; counts and argv exact",
        "netlink" => "proc connector events; counts exact unless events were lost (below)",
        "ebpf" => {
            "sched tracepoints, argv read in the kernel at exec; counts and argv exact unless events were lost (below)"
        }
        _ => "",
    };
    if what.is_empty() {
        run.tracker.clone()
    } else {
        format!("{} ({what})", run.tracker)
    }
}

fn sampler_text(run: &Run) -> String {
    let s = &run.sampler;
    let mut out = format!(
        "PSS from /proc/PID/smaps_rollup, {} round{}",
        s.rounds,
        if s.rounds == 1 { "" } else { "s" }
    );
    if let Some(i) = s.effective_interval_ns {
        out += &format!(", effective interval {}", duration_human(i));
    }
    if let Some(g) = s.max_gap_ns {
        out += &format!(" (longest gap {})", duration_human(g));
    }
    match (s.mode.as_str(), s.budget, s.interval_ns) {
        ("fixed", _, Some(i)) => out += &format!("; fixed interval {}", duration_human(i)),
        (_, Some(b), _) => {
            let used = if run.totals.wall_ns > 0 {
                s.cpu_ns as f64 / run.totals.wall_ns as f64
            } else {
                0.0
            };
            out += &format!(
                "; budget {} of a core (plus a {} start-up allowance), used {} ({} of wall)",
                percent(b),
                duration_human(s.burst_ns.unwrap_or(0)),
                duration_human(s.cpu_ns),
                percent(used)
            );
        }
        _ => {}
    }
    out
}

fn lost_text(run: &Run) -> String {
    let l = &run.overhead.lost;
    let mut parts = Vec::new();
    if l.overruns > 0 {
        let bound = if l.events_at_most > 0 {
            format!("at most {} events", group_thousands(l.events_at_most))
        } else {
            "an unknown number of events".to_string()
        };
        parts.push(format!(
            "{bound} in {} receive-buffer overrun{} (tree resynced from /proc: {} process{} found)",
            l.overruns,
            if l.overruns == 1 { "" } else { "s" },
            l.found_by_resync,
            if l.found_by_resync == 1 { "" } else { "es" }
        ));
    } else if l.events_at_most > 0 {
        parts.push(format!(
            "{} events (sequence gaps)",
            group_thousands(l.events_at_most)
        ));
    }
    if l.exits_missed > 0 {
        parts.push(format!(
            "{} process end{} not reported (end time and status unknown)",
            l.exits_missed,
            if l.exits_missed == 1 { "" } else { "s" }
        ));
    }
    if l.argv_unread > 0 {
        parts.push(format!(
            "argv of {} exec{} unreadable (process gone before it was read)",
            l.argv_unread,
            if l.argv_unread == 1 { "" } else { "s" }
        ));
    }
    if parts.is_empty() {
        "none".to_string()
    } else {
        parts.join("; ")
    }
}

fn still_running_text(run: &Run) -> String {
    let alive: Vec<String> = run
        .processes
        .iter()
        .filter(|p| p.end_ns.is_none())
        .take(8)
        .map(|p| format!("{} ({})", p.pid, program(p)))
        .collect();
    let more = run.totals.still_running.saturating_sub(alive.len() as u64);
    let tail = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    format!(
        "{} process{}: {}{tail}",
        run.totals.still_running,
        if run.totals.still_running == 1 {
            ""
        } else {
            "es"
        },
        alive.join(", ")
    )
}
