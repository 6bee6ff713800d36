//! The accounting view's unit tests.

use super::*;

/// 100 columns, no colour, rows cut to fit.
const WIDE: Style = Style {
    width: 100,
    color: false,
    fit: true,
};

/// taskstats's CPU well below the tree's exact CPU: the time line says so; close to it,
/// from another source, or without the tree's figure, it says nothing.
#[test]
fn short_taskstats_cpu_is_said_on_the_time_line() {
    let tree = |ns: Option<u64>| Totals {
        user_ns: ns,
        sys_ns: Some(0),
        ..Default::default()
    };
    let t = |cpu: u64, from: &str| TimeBreakdown {
        cpu_ns: Some(cpu),
        from: from.into(),
        ..Default::default()
    };
    assert_eq!(
        short_cpu(&t(18 * MS_NS, "taskstats"), &tree(Some(66 * MS_NS))),
        "; the records hold 18ms of the tree's 66ms of CPU (written before each thread's exit was over), which \"otherwise\" holds instead"
    );
    assert_eq!(
        short_cpu(&t(60 * MS_NS, "taskstats"), &tree(Some(66 * MS_NS))),
        ""
    );
    assert_eq!(
        short_cpu(&t(18 * MS_NS, "exit_stop"), &tree(Some(66 * MS_NS))),
        ""
    );
    assert_eq!(short_cpu(&t(18 * MS_NS, "taskstats"), &tree(None)), "");
}

const MS_NS: u64 = 1_000_000;
use crate::bus::event::{Event, Stamped};
use crate::ledger::recorder::Recorder;
use crate::model::{AccountEvent, Arg, Figures, LedgerSource, Termination};

fn run() -> Run {
    let e = |t: u64, event: Event| Stamped { t_ns: t, event };
    let ms = 1_000_000;
    let ledger = |t, pid, cpu: u64, rss: u64| {
        e(
            t,
            Event::Accounting {
                event: AccountEvent::Ledger {
                    tgid: pid,
                    start_ns: None,
                    source: LedgerSource::Taskstats,
                    figures: Box::new(Figures {
                        cpu_ns: Some(cpu * ms),
                        task_time_ns: Some(t),
                        peak_rss_bytes: Some(rss << 20),
                        read_bytes: Some(0),
                        write_bytes: Some(4096),
                        ..Default::default()
                    }),
                },
            },
        )
    };
    Recorder::replay(&[
        e(
            0,
            Event::Start {
                command: vec![Arg::from("make")],
                tracker: "ptrace".into(),
                pid: 10,
                ppid: 1,
            },
        ),
        e(
            1,
            Event::Exec {
                tgid: 10,
                former_tid: 10,
                argv: Some(vec![Arg::from("make"), Arg::from("-j2")]),
            },
        ),
        e(
            ms,
            Event::Fork {
                parent_tgid: 10,
                child_tid: 11,
                child_tgid: 11,
            },
        ),
        e(
            2 * ms,
            Event::Exec {
                tgid: 11,
                former_tid: 11,
                argv: Some(vec![Arg::from("cc"), Arg::from("a.c")]),
            },
        ),
        ledger(500 * ms, 11, 400, 30),
        e(
            500 * ms,
            Event::Exit {
                tid: 11,
                tgid: 11,
                status: Some(Termination::Exited(1)),
            },
        ),
        ledger(510 * ms, 10, 5, 2),
        e(
            510 * ms,
            Event::Exit {
                tid: 10,
                tgid: 10,
                status: Some(Termination::Exited(2)),
            },
        ),
    ])
}

#[test]
fn tree_and_top() {
    let style = WIDE;
    let mut out = Vec::new();
    render_views(
        &run(),
        &mut out,
        style,
        Views {
            tree: true,
            top: Some(1),
        },
    )
    .unwrap();
    let text = String::from_utf8(out).unwrap();
    insta::assert_snapshot!(text, @r"
    Process tree (ledger):
        PID  LIFETIME       CPU  PEAK RSS       I/O  EXIT  COMMAND
         10     510ms       5ms     2 MiB     4 KiB     2  make -j2
         11     499ms     400ms    30 MiB     4 KiB     1  └─ cc a.c
    Top 1 by CPU:
        PID  LIFETIME       CPU  PEAK RSS       I/O  EXIT  COMMAND
         11     499ms     400ms    30 MiB     4 KiB     1  cc a.c
    Top 1 by peak RSS:
        PID  LIFETIME       CPU  PEAK RSS       I/O  EXIT  COMMAND
         11     499ms     400ms    30 MiB     4 KiB     1  cc a.c
    ");
}

/// A build 12 deep stays readable at 80 columns: lines drawn for a few levels, then the
/// depth as a number, and the argv cut in its middle (its program and output file kept).
#[test]
fn a_deep_tree_fits_80_columns() {
    let mut procs = Vec::new();
    for d in 0..12 {
        let mut p = crate::report::testing::process(
            100 + d,
            (d > 0).then_some(99 + d),
            d as u64,
            Some(100),
        );
        let argv = format!(
            "/usr/lib/gcc/x86_64-linux-gnu/12/cc1 -quiet -imultiarch x86_64-linux-gnu src/file{d}.c -o /tmp/cc{d}.s"
        );
        let words: Vec<&str> = argv.split(' ').collect();
        p.execs.push(crate::report::testing::exec(d as u64, &words));
        procs.push(p);
    }
    let run = crate::report::testing::run_of(procs);
    let mut out = Vec::new();
    tree(
        &run,
        &mut out,
        Style {
            width: 80,
            color: false,
            fit: true,
        },
    )
    .unwrap();
    let text = String::from_utf8(out).unwrap();
    for line in text.lines() {
        assert!(line.chars().count() <= 80, "{line}");
    }
    // The level is on the branch, not a column of its own beside EXIT (issue 45), and the
    // process is named by its input file.
    let deepest = text.lines().last().unwrap();
    assert!(deepest.contains("     0        └11─ cc1 src"), "{text}");
    assert!(deepest.ends_with("e11.c"), "{text}");
    assert!(
        text.contains("levels past 3 are numbered on their branch"),
        "{text}"
    );
    insta::assert_snapshot!(text);
}

#[test]
fn summary_lines_label_each_memory_figure() {
    let mut out = Vec::new();
    render(&run(), &mut out, WIDE).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains("Memory, largest process peak: 31,457,280 bytes, pid 11 (cc a.c) [taskstats hiwater_rss, exact]"),
        "{text}"
    );
    assert!(
        text.contains("Memory, process peaks summed: 33,554,432 bytes over 2 processes"),
        "{text}"
    );
    assert!(
        text.contains("Time: 1.01s of task time over 510ms of wall: on a CPU 405ms"),
        "{text}"
    );
    assert!(
        text.contains(
            "Critical path: 2 processes; its links: cc a.c (pid 11) 499ms (98% of the wall time), make -j2 (pid 10) 11ms (2.16%)"
        ),
        "{text}"
    );
}

/// Each way taskstats records were lost has its own line, with its count; none, no line.
#[test]
fn lost_records_are_said_by_how_they_were_lost() {
    let lines = |overruns: u64, cut: u64| {
        let a = Accounting {
            taskstats_overruns: overruns,
            taskstats_cut: cut,
            ..Default::default()
        };
        let mut out = Vec::new();
        accounting_lost_line(&a, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    };
    assert_eq!(lines(0, 0), "");
    assert_eq!(
        lines(2, 1),
        "Accounting lost: the taskstats receive buffer overflowed 2 times; some processes miss their exit records\n\
         Accounting lost: 1 taskstats exit record was longer than ste reads, cut short; some processes miss their exit records\n"
    );
    assert_eq!(
        lines(0, 3),
        "Accounting lost: 3 taskstats exit records were longer than ste reads, cut short; some processes miss their exit records\n"
    );
}

/// Delay accounting off and not asked for is the machine's setting on every run: the default
/// report leaves it to `-v`; a figure this run could have measured is still named (issue 45).
#[test]
fn delays_off_is_not_named_by_the_default_report() {
    let short = |figures: &[&str]| {
        let mut run = run();
        run.accounting.as_mut().unwrap().unavailable = figures
            .iter()
            .map(|f| crate::model::Unavailable {
                figure: f.to_string(),
                why: "why".into(),
            })
            .collect();
        let mut out = Vec::new();
        render_short(&run, &mut out, WIDE).unwrap();
        String::from_utf8(out).unwrap()
    };
    assert!(!short(&[crate::model::DELAYS_OFF]).contains("Not measured"));
    let both = short(&[crate::model::DELAYS_OFF, "taskstats (per-process delays)"]);
    assert!(
        both.contains("Not measured: taskstats (-v says why"),
        "{both}"
    );
    assert!(!both.contains("block-I/O"), "{both}");
}
