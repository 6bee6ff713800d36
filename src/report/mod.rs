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
pub mod names;
pub mod oom;
pub mod perfetto;
pub mod programs;
pub mod style;
pub mod syscalls;
pub mod terminal;
pub mod text;

use crate::model::Run;
use std::io::{self, Write};

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
        Format::Html => html::render(run, w),
        Format::Perfetto => perfetto::render(run, w),
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
    };

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
            assert!(after.lines().count() <= 8, "{after}");
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
            },
        );
        assert!(wide.contains("\x1b[1;32mEXEC:\x1b[0m [sh -c make]"));
        let axis = |t: &str| t.lines().find(|l| l.contains('└')).unwrap().chars().count();
        assert_eq!(axis(&wide), 120);
        assert_eq!(axis(&rendered(Format::Text, PLAIN)), 80);
    }
}
