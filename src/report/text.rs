//! The text report: the seed's `EXEC:` lines and summary in its words and layout, the chart,
//! then ste's own lines (exit status, exact peak RSS, tracker, sampler, losses, notes).
//!
//! A pure function of a Run. The live view prints `exec_line` as execs happen; `ste report`
//! prints the same lines from a finished Run, so both outputs are identical.
//!
//! Every line goes through `terminal` (no control character from a traced program, /proc or a
//! record reaches the terminal), and the strings it quotes are escaped where it takes them.

use crate::model::{Escaped, Exec, Process, Run, join_escaped, signal_name};
use crate::report::max_pss::{
    beyond_reads, max_pss_line, max_pss_sample, sampler_text, unreadable_text,
};
use crate::report::names::{described, program};
use crate::report::style::Style;
use crate::report::{chart, programs, syscalls, terminal};
use crate::units::{bytes_human, duration_human, group_thousands, millis};
use std::io::{self, Write};

/// Rows of the chart's plot area.
pub const CHART_HEIGHT: usize = 12;

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
            "{label} [?] (pid {}: argv unknown: the process was gone before it was read, or may have exec'd again first)",
            p.pid
        ),
    }
}

/// Every exec of the run, in the order they happened.
pub fn render_execs(run: &Run, w: &mut dyn Write, style: Style) -> io::Result<()> {
    terminal::through(w, style.color, |w| execs(run, w, style))
}

fn execs(run: &Run, w: &mut dyn Write, style: Style) -> io::Result<()> {
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

/// What the text report shows beyond the default, as asked on the command line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// `-q`: no `EXEC:` lines.
    pub quiet: bool,
    /// `-v`: every figure with its full provenance, and every program.
    pub verbose: bool,
    /// `--by-program`: every program (the default shows the top ones on large runs).
    pub by_program: bool,
    /// The views after the summary (`--tree`, `--top`).
    pub views: crate::report::accounting::Views,
}

/// The whole report as `ste report` prints it: the exec lines, then the summary.
pub fn render(run: &Run, w: &mut dyn Write, style: Style) -> io::Result<()> {
    render_with(run, w, style, Options::default())
}

/// The whole report with `options`: what the live run printed with the same options.
pub fn render_with(run: &Run, w: &mut dyn Write, style: Style, options: Options) -> io::Result<()> {
    if !options.quiet && run.exit.launch_error.is_none() {
        render_execs(run, w, style)?;
    }
    render_end(run, w, style, options)
}

/// What the live run prints once it is over: the summary, then the views asked for.
pub fn render_end(run: &Run, w: &mut dyn Write, style: Style, options: Options) -> io::Result<()> {
    render_summary_with(run, w, style, options.verbose)?;
    if run.exit.launch_error.is_none() && (options.by_program || options.verbose) {
        terminal::through(w, style.color, |w| programs::render(run, w, None))?;
    }
    crate::report::accounting::render_views(run, w, style, options.views)
}

/// The summary printed when the run is over. A command that could not start gets one line,
/// as `env` and `time` print (its Run, in `--json` or a record, says so in `exit`).
pub fn render_summary(run: &Run, w: &mut dyn Write, style: Style) -> io::Result<()> {
    render_summary_with(run, w, style, false)
}

/// The summary, with every figure's provenance when `verbose` (`-v`).
pub fn render_summary_with(
    run: &Run,
    w: &mut dyn Write,
    style: Style,
    verbose: bool,
) -> io::Result<()> {
    terminal::through(w, style.color, |w| match launch_failure_line(run) {
        Some(line) => writeln!(w, "{line}"),
        None => summary(run, w, style, verbose),
    })
}

/// `ste: NAME: command not found` when the command could not start: the whole text report.
pub fn launch_failure_line(run: &Run) -> Option<String> {
    let err = run.exit.launch_error.as_ref()?;
    Some(format!("ste: {}", Escaped::str(&err.message)))
}

fn summary(run: &Run, w: &mut dyn Write, style: Style, verbose: bool) -> io::Result<()> {
    let t = &run.totals;
    writeln!(w, "Num threads = {}", group_thousands(t.threads))?;
    writeln!(w, "Num process = {}", group_thousands(t.processes))?;
    let peak = max_pss_sample(run);
    match (t.max_pss_bytes, peak) {
        (Some(_), Some(p)) if beyond_reads(run, p) => writeln!(w, "Max PSS: n/a")?,
        (Some(b), _) => writeln!(w, "Max PSS: {} bytes", group_thousands(b))?,
        (None, _) => writeln!(w, "Max PSS: n/a")?,
    }
    if let Some(line) = max_pss_line(run) {
        writeln!(w, "  {line}")?;
    } else if t.max_pss_bytes.is_none()
        && run.samples.is_empty()
        && let Some(settle) = run.sampler.exec_settle_ns
    {
        writeln!(
            w,
            "  no read: the command ended within {} of its exec, before ste reads a program (until then its libraries may not be mapped yet)",
            duration_human(settle)
        )?;
    }
    let opt_ms = |v: Option<u64>| v.map_or_else(|| "n/a".to_string(), millis);
    let cpu = crate::report::cpu::headline(run);
    writeln!(
        w,
        "Walltime: {} - user-space: {} - kernel-space: {}",
        millis(t.wall_ns),
        opt_ms(cpu.user_ns),
        opt_ms(cpu.sys_ns)
    )?;
    if let Some(line) = crate::report::cpu::note(run) {
        writeln!(w, "  {line}")?;
    }
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
    if verbose {
        verbose_lines(run, w, style)?;
    } else {
        default_lines(run, w, style)?;
    }
    let o = &run.overhead;
    if let Some(cpu) = o.cpu_ns {
        // No share of the wall time: ste's set-up comes before the command's release, where
        // the wall time starts, so a short run would show ste at "844 % of wall".
        let rss = o
            .max_rss_bytes
            .map(|b| format!(", peak RSS {}", bytes_human(b)))
            .unwrap_or_default();
        let setup = if verbose {
            " (its set-up before the command's release included)"
        } else {
            ""
        };
        writeln!(w, "ste itself: {} of CPU{setup}{rss}", millis(cpu))?;
    }
    crate::report::maps::render_at_peak(run, w)?;
    crate::report::malloc::render(run, w)?;
    syscalls::render(run, w)?;
    for note in &run.notes {
        if verbose || !is_routine(note) {
            writeln!(w, "Note: {}", Escaped::str(note))?;
        }
    }
    Ok(())
}

/// A note that says what went as planned, the same on every run of its kind: the
/// capabilities ste kept as root, and an unprivileged run's fall back from ebpf (which needs
/// root) to ptrace. `-v` only.
fn is_routine(note: &str) -> bool {
    note.starts_with("once the command was released, ste kept only these capabilities")
        || (note.starts_with(
            "the ebpf tracker is not available (loading BPF programs needs CAP_BPF and CAP_PERFMON (run ste as root)",
        ) && note.ends_with("): using the ptrace tracker"))
}

/// The default lines after the exit status: each figure once, with a short tag; losses only
/// when there were some; what is missing and how to get it, on one line (`-v` says why).
fn default_lines(run: &Run, w: &mut dyn Write, style: Style) -> io::Result<()> {
    let t = &run.totals;
    writeln!(w, "Memory: {}", memory_text(run))?;
    if let Some(cpu) = cpu_line(run) {
        writeln!(w, "CPU: {cpu}")?;
    }
    let lost = lost_text(run);
    if lost != "none" {
        writeln!(w, "Lost events: {lost}")?;
    }
    if let Some(unread) = unreadable_text(run) {
        writeln!(w, "Unread: {unread}")?;
    }
    if t.still_running > 0 {
        writeln!(w, "Still running: {}", still_running_text(run))?;
    }
    crate::report::accounting::render_short(run, w, style)?;
    if let Some(line) = programs::summary_line(run) {
        writeln!(w, "{line}")?;
    }
    Ok(())
}

/// Today's full lines: every figure with where it comes from and how exact it is.
fn verbose_lines(run: &Run, w: &mut dyn Write, style: Style) -> io::Result<()> {
    let t = &run.totals;
    // `Memory, largest process peak` says the same with the ledger's source: once.
    let largest = run
        .accounting
        .as_ref()
        .is_some_and(|a| a.memory.largest_process_peak.is_some());
    if !largest {
        writeln!(w, "Peak RSS: {}", peak_rss_text(run))?;
    }
    writeln!(w, "Tracker: {}", tracker_text(run))?;
    writeln!(w, "Sampler: {}", sampler_text(run))?;
    writeln!(w, "Lost events: {}", lost_text(run))?;
    if t.still_running > 0 {
        writeln!(w, "Still running: {}", still_running_text(run))?;
    }
    crate::report::accounting::render(run, w, style)
}

/// `group peak 1,257,472 bytes (exact), largest process 16,777,216 bytes, pid 7 cc1 a.c
/// (exact)`: the tree's memory as the kernel charged it, and its largest process, in bytes as
/// Max PSS above is; then, on a line of its own, why the group peak is the smaller, when it is.
fn memory_text(run: &Run) -> String {
    let tag = |exact: bool| if exact { "exact" } else { "sampled" };
    let bytes = |b: u64| format!("{} bytes", group_thousands(b));
    let mut parts = Vec::new();
    let reconciled = run.accounting.as_ref().map(|a| &a.memory);
    if let Some(g) = reconciled.and_then(|m| m.group_peak.as_ref()) {
        parts.push(format!("group peak {} ({})", bytes(g.bytes), tag(g.exact)));
    }
    let name = |pid: i32| {
        run.processes
            .iter()
            .find(|p| p.pid == pid)
            .map(|p| {
                format!(
                    ", pid {pid} {}",
                    described(p, crate::report::accounting::NAME_CHARS)
                )
            })
            .unwrap_or_default()
    };
    match reconciled.and_then(|m| m.largest_process_peak.as_ref()) {
        Some(l) => parts.push(format!(
            "largest process {}{} ({})",
            bytes(l.bytes),
            l.pid.map(name).unwrap_or_default(),
            tag(l.exact)
        )),
        None => {
            let exact = run.sources.get("peak_rss_bytes").is_some_and(|s| s.exact);
            parts.push(match run.totals.peak_rss_bytes {
                Some(b) => format!(
                    "largest process {}{} ({})",
                    bytes(b),
                    run.totals.peak_rss_pid.map(name).unwrap_or_default(),
                    tag(exact)
                ),
                None => "largest process n/a (-v says why)".to_string(),
            });
        }
    }
    let below = crate::report::accounting::group_peak_below(run)
        .map(|why| format!("\n  {why}"))
        .unwrap_or_default();
    format!("{}{below}", parts.join(", "))
}

/// `102ms, 2.55 CPUs busy on average; runnable but waiting for a CPU 17ms (both summed over
/// tasks)`: the tree's CPU (the headline's, `report::cpu`, in the Walltime line's unit), and
/// the run-queue wait when a source measured it. Both add up every task's time, so either may
/// pass the wall time.
fn cpu_line(run: &Run) -> Option<String> {
    let t = &run.totals;
    let headline = crate::report::cpu::headline(run);
    let cpu = headline.cpu_ns?;
    let busy = if t.wall_ns > 0 {
        format!(
            ", {:.2} CPUs busy on average",
            cpu as f64 / t.wall_ns as f64
        )
    } else {
        String::new()
    };
    let waited = run
        .accounting
        .as_ref()
        .and_then(|a| a.time.as_ref())
        .and_then(|tb| tb.run_queue_ns)
        .filter(|&r| r > 0);
    let at_least = if headline.lower_bound() {
        "at least "
    } else {
        ""
    };
    Some(match waited {
        Some(r) => format!(
            "{at_least}{}{busy}; runnable but waiting for a CPU {} (both summed over tasks)",
            millis(cpu),
            millis(r)
        ),
        None => format!("{at_least}{} summed over tasks{busy}", millis(cpu)),
    })
}

fn exit_text(run: &Run) -> String {
    let e = &run.exit;
    // The command's first process, as the OOM line judges it.
    let oom = crate::report::oom::of(run).and_then(|o| {
        let root = run.processes.first()?;
        match o.killed(root) {
            Some(true) => Some(" by the OOM killer"),
            None => Some(", maybe by the OOM killer (below)"),
            Some(false) => None,
        }
    });
    match (e.code, e.signal) {
        (Some(code), _) => code.to_string(),
        (None, Some(sig)) => format!(
            "killed by signal {sig} ({}){}{} (ste exits {})",
            signal_name(sig),
            oom.filter(|_| sig == 9).unwrap_or_default(),
            if e.core_dumped { ", core dumped" } else { "" },
            e.ste_status()
        ),
        (None, None) => "unknown (the command was not reaped)".to_string(),
    }
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

fn lost_text(run: &Run) -> String {
    let l = &run.overhead.lost;
    let mut parts = Vec::new();
    if l.overruns > 0 {
        let bound = match l.events_at_most {
            Some(n) if n > 0 => format!("at most {} events", group_thousands(n)),
            _ => "an unknown number of events".to_string(),
        };
        // The ebpf tracker's records go through a ring buffer, netlink's through a socket's.
        let buffer = if run.tracker == "ebpf" {
            "ring-buffer"
        } else {
            "receive-buffer"
        };
        parts.push(format!(
            "{bound} in {} {buffer} overrun{} (tree resynced from /proc: {} process{} found)",
            l.overruns,
            if l.overruns == 1 { "" } else { "s" },
            l.found_by_resync,
            if l.found_by_resync == 1 { "" } else { "es" }
        ));
    } else if let Some(n) = l.events_at_most
        && n > 0
    {
        parts.push(format!("{} events (sequence gaps)", group_thousands(n)));
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
    if l.argv_doubtful > 0 {
        parts.push(format!(
            "argv of {} exec{} not shown (read from /proc after the process may have exec'd again)",
            l.argv_doubtful,
            if l.argv_doubtful == 1 { "" } else { "s" }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Arg, Exit, Overhead, Sample, SampleKind, SamplerInfo, Source, Totals};

    /// A run like the seed's `fill`: one process, a staircase to 1 GiB. Built from an empty
    /// replay so that fields added to the model later need no change here.
    pub(crate) fn fill_run() -> Run {
        let mut run =
            crate::ledger::recorder::Recorder::replay(Vec::<crate::bus::event::Stamped>::new());
        run.generator = "ste test".into();
        run.command = vec![Arg::from("./fill")];
        run.tracker = "ptrace".into();
        run.notes = vec!["an example note".into()];
        run.exit = Exit {
            code: Some(0),
            ..Default::default()
        };
        run.samples = (0..=12)
            .map(|i| Sample {
                t_ns: i * 100_000_000,
                pss_bytes: i * (1 << 30) / 12,
                rss_bytes: i * (1 << 30) / 12,
                processes: 1,
                ..Default::default()
            })
            .collect();
        run.sources.insert(
            "peak_rss_bytes".to_string(),
            Source::exact("VmHWM of /proc/PID/status at the ptrace exit stop"),
        );
        run.totals = Totals {
            wall_ns: 1_229_000_000,
            user_ns: Some(1_109_000_000),
            sys_ns: Some(87_000_000),
            processes: 1,
            threads: 1,
            execs: 1,
            max_pss_bytes: Some(1_073_762_304),
            max_pss_t_ns: Some(1_200_000_000),
            max_pss_kind: Some(SampleKind::Exact),
            max_pss_bound_bytes: None,
            max_pss_low_bytes: Some(1_073_762_304),
            max_pss_high_bytes: Some(1_073_762_304),
            peak_rss_bytes: Some(1_074_790_400),
            peak_rss_pid: Some(42),
            still_running: 0,
        };
        let mut fill = crate::report::testing::process(42, Some(1), 0, Some(1_229_000_000));
        fill.peak_rss_bytes = Some(1_074_790_400);
        fill.execs = vec![Exec {
            t_ns: 100_000,
            argv: Some(vec![Arg::from("/home/leaf/fill")]),
        }];
        run.processes = vec![fill];
        run.sampler = SamplerInfo {
            mode: "adaptive".into(),
            budget: Some(0.01),
            burst_ns: Some(1_000_000),
            interval_ns: None,
            rounds: 13,
            paid_rounds: 0,
            max_tick_cpu_ns: None,
            effective_interval_ns: Some(100_000_000),
            max_gap_ns: Some(100_000_000),
            max_look_gap_ns: Some(100_000_000),
            cpu_ns: 12_000_000,
            ticks: 1_200,
            effective_tick_ns: Some(1_000_000),
            tick_cpu_ns: 3_000_000,
            exec_settle_ns: Some(1_000_000),
            max_round_cpu_ns: None,
            tick_debt_ns: None,
            moments: Some(13),
            max_rounds: Some(0),
            max_rounds_cpu_ns: Some(0),
            exit_marks: Some(true),
        };
        run.overhead = Overhead {
            cpu_ns: Some(15_000_000),
            max_rss_bytes: Some(4 << 20),
            lost_events: Some(0),
            ..Default::default()
        };
        run
    }

    const PLAIN: Style = Style {
        width: 80,
        color: false,
        fit: true,
    };

    fn render_to_string(run: &Run) -> String {
        let mut out = Vec::new();
        render(
            run,
            &mut out,
            Style {
                width: 80,
                color: false,
                fit: true,
            },
        )
        .unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_seed_layout_then_stes_lines() {
        insta::assert_snapshot!(render_to_string(&fill_run()));
    }

    #[test]
    fn unknowns_read_n_a() {
        let mut run = fill_run();
        run.totals.user_ns = None;
        run.totals.max_pss_bytes = None;
        run.samples.clear();
        run.totals.peak_rss_bytes = None;
        let text = render_to_string(&run);
        assert!(text.contains("Max PSS: n/a\n"), "{text}");
        assert!(
            text.contains("user-space: n/a - kernel-space: 87ms"),
            "{text}"
        );
        assert!(text.contains("Memory: largest process n/a"), "{text}");
        assert!(!text.contains("Max PSS: 0"), "{text}");
        let mut verbose = Vec::new();
        render_summary_with(&run, &mut verbose, PLAIN, true).unwrap();
        let verbose = String::from_utf8(verbose).unwrap();
        assert!(verbose.contains("Peak RSS: n/a"), "{verbose}");
    }

    #[test]
    fn lost_argv_and_killed_commands() {
        let mut run = fill_run();
        run.processes[0].execs[0].argv = None;
        run.overhead.lost.argv_unread = 1;
        run.exit = Exit {
            signal: Some(9),
            ..Default::default()
        };
        let text = render_to_string(&run);
        assert!(
            text.starts_with("EXEC: [?] (pid 42: argv unknown: the process was gone"),
            "{text}"
        );
        assert!(
            text.contains("Exit status: killed by signal 9 (SIGKILL) (ste exits 137)"),
            "{text}"
        );
        assert!(
            text.contains("Lost events: argv of 1 exec unreadable"),
            "{text}"
        );
    }

    /// A loss names the buffer it overran: the ebpf tracker's ring, netlink's socket.
    #[test]
    fn a_loss_names_the_tracker_s_buffer() {
        let mut run = fill_run();
        run.overhead.lost.overruns = 2;
        run.overhead.lost.events_at_most = Some(90);
        run.overhead.lost_events = None;
        for (tracker, words) in [
            ("ebpf", "at most 90 events in 2 ring-buffer overruns"),
            ("netlink", "at most 90 events in 2 receive-buffer overruns"),
        ] {
            run.tracker = tracker.into();
            let text = render_to_string(&run);
            assert!(text.contains(words), "{tracker}: {text}");
        }
    }

    /// The summary's memory lines in one unit, Max PSS's; a group peak below a process's
    /// peak says why; the CPU line says its figures are summed over tasks (issue 45).
    #[test]
    fn memory_in_bytes_and_sums_said_to_be_sums() {
        let run = crate::report::testing::build_accounting();
        let mut out = Vec::new();
        render_summary(&run, &mut out, PLAIN).unwrap();
        let text = String::from_utf8(out).unwrap();
        let memory = text.lines().find(|l| l.starts_with("Memory: ")).unwrap();
        assert!(
            memory.contains("group peak 109,064,249 bytes (exact)"),
            "{text}"
        );
        assert!(
            memory.contains("largest process 116,654,080 bytes"),
            "{text}"
        );
        assert!(!memory.contains("MiB"), "{text}");
        assert!(
            text.contains("\n  the group peak is below the largest process's peak: a cgroup is charged for the pages its processes brought in"),
            "{text}"
        );
        assert!(
            text.contains("; runnable but waiting for a CPU 70ms (both summed over tasks)\n"),
            "{text}"
        );
        // A group peak above every process's peak and Max PSS needs no word.
        let mut above = run.clone();
        above
            .accounting
            .as_mut()
            .unwrap()
            .memory
            .group_peak
            .as_mut()
            .unwrap()
            .bytes = 1 << 40;
        let mut out = Vec::new();
        render_summary(&above, &mut out, PLAIN).unwrap();
        assert!(!String::from_utf8(out).unwrap().contains("below"));
    }

    /// An unprivileged run's fall back from ebpf to ptrace is `-v`'s; a fall back as root
    /// (BPF refused for another reason) or to netlink is said by default (issue 45).
    #[test]
    fn the_unprivileged_fall_back_is_routine() {
        let unprivileged = "the ebpf tracker is not available (loading BPF programs needs CAP_BPF and CAP_PERFMON (run ste as root); kernel.unprivileged_bpf_disabled=2): using the ptrace tracker";
        assert!(is_routine(unprivileged));
        assert!(!is_routine(
            "the ebpf tracker is not available (the kernel has no BTF): using the ptrace tracker"
        ));
        assert!(!is_routine(&unprivileged.replace(
            ": using the ptrace tracker",
            ", and ptrace could not attach (EPERM): fell back to the netlink tracker"
        )));
    }

    #[test]
    fn a_command_that_could_not_start_gets_one_line() {
        let mut run = fill_run();
        run.processes[0].execs.clear();
        run.exit = Exit {
            launch_error: Some(crate::model::LaunchError {
                kind: crate::model::LaunchErrorKind::NotFound,
                message: "nonexistent-cmd: command not found".into(),
            }),
            ..Default::default()
        };
        assert_eq!(
            render_to_string(&run),
            "ste: nonexistent-cmd: command not found\n"
        );
    }
}
