//! Reports: pure functions of a finished Run, one file per format.
//!
//! They see only `model` (and `units` for formatting): nothing here knows about /proc, netlink or
//! ptrace, which is what makes every format testable from hand-built Runs.

pub mod accounting;
pub mod chart;
pub mod cpu;
pub mod csv;
pub mod html;
pub mod json;
pub mod malloc;
pub mod malloc_sdt;
pub mod maps;
pub mod max_pss;
pub mod names;
pub mod oom;
pub mod perfetto;
pub mod programs;
pub mod rates;
pub mod style;
pub mod syscalls;
pub mod terminal;
pub mod text;

use crate::model::Run;
use std::borrow::Cow;
use std::io::{self, Write};

/// The processes the HTML page and the trace draw at most: the runs ste is made for. Each
/// costs them some KB of memory to build (a record of 300,000 short processes, 5 MB on disk,
/// took 1.4 GB for the page and 1.9 GB for the trace); beyond it they draw the first ones by
/// start, and say so ([`drawn`]). The totals, the samples' sums and every other format cover
/// the whole run.
pub const DRAWN_MAX: usize = 100_000;

/// `run` as the page and the trace draw it: itself, or past [`DRAWN_MAX`] processes a copy
/// with the first of them (and their readings in the samples), and a note that says so.
pub fn drawn(run: &Run) -> Cow<'_, Run> {
    drawn_at_most(run, DRAWN_MAX)
}

fn drawn_at_most(run: &Run, max: usize) -> Cow<'_, Run> {
    if run.processes.len() <= max {
        return Cow::Borrowed(run);
    }
    let kept = &run.processes[..max];
    let pids: std::collections::HashSet<i32> = kept.iter().map(|p| p.pid).collect();
    let mut copy = html::without_lists(run);
    copy.processes = kept.to_vec();
    copy.samples = run
        .samples
        .iter()
        .map(|s| {
            let mut drawn = html::scalars_of_sample(s);
            drawn.per_process = s.per_process.as_ref().map(|readings| {
                readings
                    .iter()
                    .filter(|r| pids.contains(&r.pid))
                    .cloned()
                    .collect()
            });
            drawn
        })
        .collect();
    copy.notes.push(format!(
        "{DRAWN_NOTE} {max} of the run's {} processes (each costs it memory to draw); the totals and the samples' sums are the whole run's, and the text and JSON reports show every process",
        run.processes.len()
    ));
    Cow::Owned(copy)
}

/// How the note of a view drawn in part ([`drawn`]) begins.
pub const DRAWN_NOTE: &str = "this view draws the first";

/// Every format a Run can be rendered in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The `EXEC:` lines and the summary.
    Text,
    /// The Run (`--json`).
    Json,
    /// A self-contained HTML page.
    Html,
    /// A trace-event JSON trace for Perfetto and chrome://tracing.
    Perfetto,
    /// The tree's samples, one row per round.
    Csv,
    /// Each process's samples, one row per process per round.
    CsvProcesses,
}

impl Format {
    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Json => "json",
            Format::Html => "html",
            Format::Perfetto => "perfetto",
            Format::Csv => "csv",
            Format::CsvProcesses => "csv-processes",
        }
    }

    /// Whether the format is meant for a file or a program rather than a terminal.
    pub fn is_for_files(self) -> bool {
        matches!(self, Format::Html | Format::Perfetto)
    }
}

/// Renders `run` in `format`; `style` lays out the text report.
pub fn render(run: &Run, format: Format, style: style::Style, w: &mut dyn Write) -> io::Result<()> {
    render_with(run, format, style, text::Options::default(), w)
}

/// As [`render`], the text report showing what `options` ask for (`ste report -q --tree`).
pub fn render_with(
    run: &Run,
    format: Format,
    style: style::Style,
    options: text::Options,
    w: &mut dyn Write,
) -> io::Result<()> {
    match format {
        Format::Text => text::render_with(run, w, style, options),
        Format::Json => json::render(run, w),
        Format::Html => html::render(&drawn(run), w),
        Format::Perfetto => perfetto::render(&drawn(run), w),
        Format::Csv => csv::render_samples(run, w),
        Format::CsvProcesses => csv::render_process_samples(run, w),
    }
}

#[cfg(test)]
pub(crate) mod testing;

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(format: Format, style: style::Style) -> String {
        let mut out = Vec::new();
        render(&testing::build(), format, style, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn rendered_accounting(format: Format) -> String {
        let mut out = Vec::new();
        render(&testing::build_accounting(), format, PLAIN, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    const PLAIN: style::Style = style::Style {
        width: 80,
        color: false,
        fit: true,
    };

    #[test]
    fn a_run_of_too_many_processes_is_drawn_in_part_and_says_so() {
        // Issue 44, item 4: 300,000 forks (5 MB of record) took 1.4 GB to draw as a page.
        let run = testing::build();
        let n = run.processes.len();
        assert!(n > 2);
        let drawn = drawn_at_most(&run, 2);
        assert_eq!(
            drawn.processes[..],
            run.processes[..2],
            "the first ones, by start"
        );
        let note = drawn.notes.last().unwrap();
        assert!(
            note.starts_with(&format!("{DRAWN_NOTE} 2 of the run's {n} processes")),
            "{note}"
        );
        let kept: Vec<i32> = drawn.processes.iter().map(|p| p.pid).collect();
        assert!(
            drawn
                .samples
                .iter()
                .flat_map(|s| s.per_process.iter().flatten())
                .all(|r| kept.contains(&r.pid))
        );
        assert_eq!(drawn.totals, run.totals);
        assert_eq!(
            html::view(&drawn).run["notes"]
                .as_array()
                .unwrap()
                .last()
                .unwrap(),
            note.as_str()
        );
        let mut trace = Vec::new();
        perfetto::render(&drawn, &mut trace).unwrap();
        let trace: serde_json::Value = serde_json::from_slice(&trace).unwrap();
        assert_eq!(trace["otherData"]["note"], note.as_str());
        // A run within it is drawn whole.
        assert!(matches!(super::drawn(&testing::build()), Cow::Borrowed(_)));
    }

    #[test]
    fn text_snapshot() {
        insta::assert_snapshot!(rendered(Format::Text, PLAIN));
    }

    #[test]
    fn json_snapshot() {
        insta::assert_snapshot!(rendered(Format::Json, PLAIN));
    }

    #[test]
    fn text_snapshot_accounting() {
        insta::assert_snapshot!(rendered_accounting(Format::Text));
    }

    fn with(run: &Run, options: text::Options) -> String {
        let mut out = Vec::new();
        render_with(run, Format::Text, PLAIN, options, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    const QUIET: text::Options = text::Options {
        quiet: true,
        verbose: false,
        by_program: false,
        views: accounting::Views {
            tree: false,
            top: None,
        },
    };
    const VERBOSE: text::Options = text::Options {
        verbose: true,
        quiet: false,
        ..QUIET
    };

    #[test]
    fn text_snapshot_quiet() {
        insta::assert_snapshot!(with(&testing::build_accounting(), QUIET));
    }

    #[test]
    fn text_snapshot_verbose() {
        insta::assert_snapshot!(with(&testing::build(), VERBOSE));
    }

    #[test]
    fn text_snapshot_verbose_accounting() {
        insta::assert_snapshot!(with(&testing::build_accounting(), VERBOSE));
    }

    /// The default report after the chart: a handful of short lines.
    #[test]
    fn the_default_report_is_short_after_the_chart() {
        for run in [testing::build(), testing::build_accounting()] {
            let text = rendered_with(&run);
            let after = text.split_once("Exit status: ").unwrap().1;
            // Nine with the line saying why the group peak is below a process's.
            assert!(after.lines().count() <= 9, "{after}");
            assert!(after.lines().all(|l| l.chars().count() <= 200), "{after}");
            // Each figure once: the largest process's peak is on one line only.
            assert_eq!(text.matches("pid 102 cc1").count(), 1, "{text}");
        }
    }

    fn rendered_with(run: &Run) -> String {
        with(run, text::Options::default())
    }

    #[test]
    fn json_snapshot_accounting() {
        insta::assert_snapshot!(rendered_accounting(Format::Json));
    }

    #[test]
    fn the_text_layout_follows_the_style() {
        let wide = rendered(
            Format::Text,
            style::Style {
                width: 120,
                color: true,
                fit: true,
            },
        );
        assert!(wide.contains("\x1b[1;32mEXEC:\x1b[0m [sh -c make]"));
        let axis = |t: &str| t.lines().find(|l| l.contains('└')).unwrap().chars().count();
        assert_eq!(axis(&wide), 120);
        assert_eq!(axis(&rendered(Format::Text, PLAIN)), 80);
    }
}
