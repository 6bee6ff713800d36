//! The system call section of the text report (`--syscalls`): calls, errors and time per call
//! for the tree, grouped by kernel subsystem with subtotals; failures by errno; and, in
//! per-process mode, the calls of each exec'd program.
//!
//! A pure function of a Run; prints nothing when system calls were not counted.

use crate::model::{ImageCalls, Run, SyscallRow, Syscalls};
use crate::units::{duration_human, group_thousands, sum};
use std::collections::BTreeMap;
use std::io::{self, Write};

/// Errno lines shown (the most frequent first).
const TOP_ERRNOS: usize = 12;
/// Programs shown in per-process mode (the most calls first).
const TOP_PROGRAMS: usize = 20;
/// Calls named per program.
const CALLS_PER_PROGRAM: usize = 4;

pub fn render(run: &Run, w: &mut dyn Write) -> io::Result<()> {
    let Some(sc) = &run.syscalls else {
        return Ok(());
    };
    let total = sum(sc.calls.iter().map(|r| r.calls));
    let failed = sum(sc.calls.iter().map(|r| r.errors));
    let time = if sc.timed {
        let ns = sum(sc.calls.iter().filter_map(|r| r.total_ns));
        format!(", {} in calls", duration_human(ns))
    } else {
        String::new()
    };
    writeln!(
        w,
        "System calls: {} calls, {} failed{time} [{}; names: {}]",
        group_thousands(total),
        group_thousands(failed),
        method_text(sc),
        sc.table
    )?;
    if sc.calls.is_empty() {
        return Ok(());
    }
    table(sc, w)?;
    errnos(sc, w)?;
    uncounted(sc, w)?;
    if sc.per_process {
        programs(run, sc, w)?;
    }
    Ok(())
}

pub(crate) fn method_text(sc: &Syscalls) -> String {
    let what = match sc.method.as_str() {
        "ebpf" => "counted in the kernel at raw_syscalls:sys_exit".to_string(),
        "ptrace" => {
            "counted at ptrace syscall stops, like strace: SLOW, every call stopped the process twice"
                .to_string()
        }
        other => other.to_string(),
    };
    let timing = match (sc.timed, sc.method.as_str()) {
        (false, _) => "counts only",
        (true, "ptrace") => "times include the stops",
        (true, _) => "timed from sys_enter to sys_exit",
    };
    format!("{what}, {timing}")
}

/// A row's name as `strace -c` prints it; compat calls carry their ABI.
fn name(sc: &Syscalls, r: &SyscallRow) -> String {
    let base = match &r.name {
        Some(n) => n.clone(),
        None => format!("unknown #{}", r.nr),
    };
    if r.compat {
        format!("{base} ({})", sc.compat_arch.as_deref().unwrap_or("compat"))
    } else {
        base
    }
}

/// Nanoseconds as the table shows them: `125ns`, `4.5µs`, `12ms`.
fn call_time(ns: u64) -> String {
    if ns > 0 && ns < 1_000 {
        format!("{ns}ns")
    } else {
        duration_human(ns)
    }
}

struct Sums {
    calls: u64,
    errors: u64,
    total_ns: u64,
    max_ns: u64,
}

fn cells(sc: &Syscalls, s: &Sums) -> String {
    let mut out = format!(
        "{:>13} {:>8}",
        group_thousands(s.calls),
        group_thousands(s.errors)
    );
    if sc.timed {
        let avg = s.total_ns.checked_div(s.calls).unwrap_or(0);
        out += &format!(
            " {:>9} {:>8} {:>8}",
            call_time(s.total_ns),
            call_time(avg),
            call_time(s.max_ns)
        );
    }
    out
}

fn table(sc: &Syscalls, w: &mut dyn Write) -> io::Result<()> {
    let mut groups: BTreeMap<&str, Vec<&SyscallRow>> = BTreeMap::new();
    for r in &sc.calls {
        groups.entry(r.group.as_str()).or_default().push(r);
    }
    let sums = |rows: &[&SyscallRow]| Sums {
        calls: sum(rows.iter().map(|r| r.calls)),
        errors: sum(rows.iter().map(|r| r.errors)),
        total_ns: sum(rows.iter().filter_map(|r| r.total_ns)),
        max_ns: rows.iter().filter_map(|r| r.max_ns).max().unwrap_or(0),
    };
    let mut order: Vec<(&str, Vec<&SyscallRow>, Sums)> = groups
        .into_iter()
        .map(|(g, rows)| {
            let s = sums(&rows);
            (g, rows, s)
        })
        .collect();
    order.sort_by(|a, b| b.2.calls.cmp(&a.2.calls).then(a.0.cmp(b.0)));
    let timed_head = if sc.timed {
        format!(" {:>9} {:>8} {:>8}", "time", "avg", "max")
    } else {
        String::new()
    };
    writeln!(
        w,
        "  {:<24}{:>13} {:>8}{timed_head}  defined in (MAINTAINERS entry)",
        "subsystem / call", "calls", "errors"
    )?;
    for (group, rows, s) in &order {
        writeln!(w, "  {:<24}{}", group, cells(sc, s))?;
        for r in rows {
            let one = Sums {
                calls: r.calls,
                errors: r.errors,
                total_ns: r.total_ns.unwrap_or(0),
                max_ns: r.max_ns.unwrap_or(0),
            };
            let origin = match (&r.file, &r.subsystem) {
                (Some(f), Some(m)) => format!("  {f} ({m})"),
                (Some(f), None) => format!("  {f}"),
                (None, _) if r.name.is_none() => {
                    "  newer than the table: name and subsystem unknown".to_string()
                }
                (None, _) => String::new(),
            };
            writeln!(w, "    {:<22}{}{origin}", name(sc, r), cells(sc, &one))?;
        }
    }
    Ok(())
}

fn errnos(sc: &Syscalls, w: &mut dyn Write) -> io::Result<()> {
    if sc.errors.is_empty() {
        return Ok(());
    }
    let names: BTreeMap<(bool, u32), String> = sc
        .calls
        .iter()
        .map(|r| ((r.compat, r.nr), name(sc, r)))
        .collect();
    let parts: Vec<String> = sc
        .errors
        .iter()
        .take(TOP_ERRNOS)
        .map(|e| {
            let call = names
                .get(&(e.compat, e.nr))
                .cloned()
                .unwrap_or_else(|| format!("#{}", e.nr));
            let err = e
                .name
                .clone()
                .unwrap_or_else(|| format!("errno {}", e.errno));
            format!("{call} {err} {}", group_thousands(e.calls))
        })
        .collect();
    let more = sc.errors.len().saturating_sub(TOP_ERRNOS);
    let tail = if more > 0 {
        format!(" (and {more} more in the JSON)")
    } else {
        String::new()
    };
    writeln!(w, "  failed calls by errno: {}{tail}", parts.join(", "))
}

/// `1 call`, `2,000 calls`.
fn calls_n(n: u64) -> String {
    format!(
        "{} call{}",
        group_thousands(n),
        if n == 1 { "" } else { "s" }
    )
}

fn uncounted(sc: &Syscalls, w: &mut dyn Write) -> io::Result<()> {
    let u = &sc.uncounted;
    let mut parts = Vec::new();
    if u.bad_numbers > 0 {
        parts.push(format!(
            "{} with a number outside the tables (x32, or skipped by seccomp or a tracer)",
            calls_n(u.bad_numbers)
        ));
    }
    if u.errno_unclassified > 0 {
        parts.push(format!(
            "{} failures not broken down by errno",
            group_thousands(u.errno_unclassified)
        ));
    }
    if u.per_process_missing > 0 {
        parts.push(format!(
            "{} counted for the tree but in no process (records lost, or processes still running)",
            calls_n(u.per_process_missing)
        ));
    }
    if parts.is_empty() {
        return Ok(());
    }
    writeln!(w, "  not in the figures above: {}", parts.join("; "))
}

/// The program an image ran: the basename of its exec's argv[0], or for the image a process was
/// forked with, its parent's program.
pub(crate) fn image_program(run: &Run, image: &ImageCalls) -> String {
    let Some(p) = run.processes.get(image.process) else {
        return "?".to_string();
    };
    let basename = |argv: &Option<Vec<crate::model::Arg>>| {
        argv.as_ref()
            .and_then(|a| a.first())
            .map(|a| {
                let full = a.to_string_lossy();
                full.rsplit('/').next().unwrap_or(&full).to_string()
            })
            .unwrap_or_else(|| "?".to_string())
    };
    match image.exec.and_then(|i| p.execs.get(i)) {
        Some(e) => basename(&e.argv),
        None => {
            // The parent's image at the fork: its last exec before this process started.
            let parent = run.processes[..image.process]
                .iter()
                .rev()
                .find(|q| Some(q.pid) == p.ppid);
            match parent.and_then(|q| q.execs.iter().rev().find(|e| e.t_ns <= p.start_ns)) {
                Some(e) => format!("{} (fork)", basename(&e.argv)),
                None => "(fork)".to_string(),
            }
        }
    }
}

/// Calls, errors and time of one program's use of one system call, or of all of them.
#[derive(Default, Clone, Copy)]
struct Use {
    calls: u64,
    errors: u64,
    ns: u64,
}

/// A program's images and its use of each call, keyed by (compat, nr).
type Uses = (u64, BTreeMap<(bool, u32), Use>);

struct Program {
    name: String,
    images: u64,
    total: Use,
    /// The most made calls, named.
    top: Vec<String>,
}

fn programs(run: &Run, sc: &Syscalls, w: &mut dyn Write) -> io::Result<()> {
    let mut by_name: BTreeMap<String, Uses> = BTreeMap::new();
    for image in &sc.images {
        let (images, calls) = by_name.entry(image_program(run, image)).or_default();
        *images += 1;
        for c in &image.calls {
            let u = calls.entry((c.compat, c.nr)).or_default();
            u.calls = u.calls.saturating_add(c.calls);
            u.errors = u.errors.saturating_add(c.errors);
            u.ns = u.ns.saturating_add(c.total_ns.unwrap_or(0));
        }
    }
    let names: BTreeMap<(bool, u32), String> = sc
        .calls
        .iter()
        .map(|r| ((r.compat, r.nr), name(sc, r)))
        .collect();
    let mut rows: Vec<Program> = by_name
        .into_iter()
        .map(|(prog, (images, calls))| {
            let total = calls.values().fold(Use::default(), |a, u| Use {
                calls: a.calls.saturating_add(u.calls),
                errors: a.errors.saturating_add(u.errors),
                ns: a.ns.saturating_add(u.ns),
            });
            let mut top: Vec<((bool, u32), Use)> = calls.into_iter().collect();
            top.sort_by(|a, b| b.1.calls.cmp(&a.1.calls).then(a.0.cmp(&b.0)));
            let top = top
                .into_iter()
                .take(CALLS_PER_PROGRAM)
                .map(|(k, u)| {
                    let n = names
                        .get(&k)
                        .cloned()
                        .unwrap_or_else(|| format!("#{}", k.1));
                    format!("{n} {}", group_thousands(u.calls))
                })
                .collect();
            Program {
                name: prog,
                images,
                total,
                top,
            }
        })
        .collect();
    rows.sort_by(|a, b| b.total.calls.cmp(&a.total.calls).then(a.name.cmp(&b.name)));
    writeln!(
        w,
        "System calls by program ({} process image{}; each process between its start or exec and its next exec or end):",
        group_thousands(sc.images.len() as u64),
        if sc.images.len() == 1 { "" } else { "s" }
    )?;
    let time_head = if sc.timed {
        format!(" {:>9}", "time")
    } else {
        String::new()
    };
    writeln!(
        w,
        "  {:<22}{:>8} {:>13} {:>8}{time_head}  most made",
        "program", "images", "calls", "errors"
    )?;
    for p in rows.iter().take(TOP_PROGRAMS) {
        let time = if sc.timed {
            format!(" {:>9}", call_time(p.total.ns))
        } else {
            String::new()
        };
        writeln!(
            w,
            "  {:<22}{:>8} {:>13} {:>8}{time}  {}",
            p.name,
            group_thousands(p.images),
            group_thousands(p.total.calls),
            group_thousands(p.total.errors),
            p.top.join(", ")
        )?;
    }
    if rows.len() > TOP_PROGRAMS {
        writeln!(
            w,
            "  … and {} more programs (every image is in the JSON)",
            rows.len() - TOP_PROGRAMS
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus::event::{Event, Stamped};
    use crate::ledger::recorder::Recorder;
    use crate::model::{Arg, CallCount, ErrnoCount, Uncounted};

    fn row(nr: u32, name: Option<&str>, group: &str, calls: u64, errors: u64) -> SyscallRow {
        SyscallRow {
            nr,
            compat: false,
            name: name.map(str::to_string),
            group: group.to_string(),
            subsystem: name.map(|_| "THE REST".to_string()),
            file: name.map(|_| "kernel/sys.c".to_string()),
            calls,
            errors,
            total_ns: Some(calls * 150),
            max_ns: Some(2_500),
        }
    }

    fn run_with(sc: Syscalls) -> Run {
        let events = [
            Stamped {
                t_ns: 0,
                event: Event::Start {
                    command: vec![Arg::from("make")],
                    tracker: "ebpf".into(),
                    pid: 10,
                    ppid: 1,
                },
            },
            Stamped {
                t_ns: 1,
                event: Event::Exec {
                    tgid: 10,
                    former_tid: 10,
                    argv: Some(vec![Arg::from("/usr/bin/make"), Arg::from("-j2")]),
                },
            },
            Stamped {
                t_ns: 2,
                event: Event::Fork {
                    parent_tgid: 10,
                    child_tid: 11,
                    child_tgid: 11,
                },
            },
        ];
        let mut run = Recorder::replay(&events);
        run.syscalls = Some(sc);
        run
    }

    fn summary(timed: bool, per_process: bool) -> Syscalls {
        let mut calls = vec![
            row(110, Some("getppid"), "Process Mgmt.", 2_000_000, 0),
            row(257, Some("openat"), "Filesystem", 40, 12),
            row(0, Some("read"), "Filesystem", 25, 0),
            row(470, None, "Unknown", 3, 0),
        ];
        if !timed {
            for r in &mut calls {
                r.total_ns = None;
                r.max_ns = None;
            }
        }
        let count = |nr, calls| CallCount {
            nr,
            compat: false,
            calls,
            errors: 0,
            total_ns: timed.then_some(calls * 100),
            max_ns: timed.then_some(100),
        };
        Syscalls {
            method: "ebpf".into(),
            timed,
            per_process,
            arch: "x86_64".into(),
            compat_arch: Some("i386".into()),
            table: "Linux 6.1.192 sources".into(),
            calls,
            errors: vec![ErrnoCount {
                nr: 257,
                compat: false,
                errno: 2,
                name: Some("ENOENT".into()),
                calls: 12,
            }],
            images: if per_process {
                vec![
                    ImageCalls {
                        process: 0,
                        pid: 10,
                        exec: Some(0),
                        calls: vec![count(257, 40), count(0, 25)],
                    },
                    ImageCalls {
                        process: 1,
                        pid: 11,
                        exec: None,
                        calls: vec![count(110, 2_000_000)],
                    },
                ]
            } else {
                Vec::new()
            },
            uncounted: Uncounted {
                bad_numbers: 1,
                ..Uncounted::default()
            },
        }
    }

    fn text(run: &Run) -> String {
        let mut out = Vec::new();
        render(run, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn timed_table_grouped_by_subsystem() {
        insta::assert_snapshot!(text(&run_with(summary(true, false))));
    }

    #[test]
    fn counts_only_has_no_time_columns() {
        insta::assert_snapshot!(text(&run_with(summary(false, false))));
    }

    #[test]
    fn per_process_names_each_exec_d_program() {
        insta::assert_snapshot!(text(&run_with(summary(true, true))));
    }

    #[test]
    fn nothing_without_syscalls() {
        let mut run = run_with(summary(true, false));
        run.syscalls = None;
        assert_eq!(text(&run), "");
    }
}
