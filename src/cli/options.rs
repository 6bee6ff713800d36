//! Checked settings for a run, resolved from what was typed (`cli`) and the environment
//! (terminal width, `NO_COLOR`). Everything downstream takes these, never clap types.

use crate::cli::{ColorChoice, MapsArgs, RecordArgs, ReportArgs, ReportFormat, RunArgs, ViewArgs};
use crate::report::Format;
use crate::report::style::Style;
use crate::source::maps::peak::PeakOptions;
use crate::source::sample::Pace;
use crate::source::track::{SyscallRequest, TrackerKind};
use clap::ValueEnum;
use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

/// How long `--kill-lingering` waits after the command exits when `--linger` is not given.
const KILL_LINGERING_AFTER: Duration = Duration::from_millis(500);

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub command: Vec<OsString>,
    /// Where the report goes; `None` is stderr.
    pub output: Option<PathBuf>,
    pub json: Option<PathBuf>,
    /// `--html`, `--perfetto`.
    pub html: Option<PathBuf>,
    pub perfetto: Option<PathBuf>,
    /// `ste record -o FILE`.
    pub record: Option<PathBuf>,
    pub style: Style,
    pub tracker: Option<TrackerKind>,
    pub linger: Option<Duration>,
    pub pace: Pace,
    pub keep_root: bool,
    /// `--syscalls`: what to count, and whether ptrace syscall stops may stand in for BPF.
    pub syscalls: Option<SyscallRequest>,
    pub accounting: crate::source::account::Options,
    /// What the text report shows (`-q`, `-v`, `--tree`, `--top`).
    pub text: crate::report::text::Options,
    /// `--maps-at-peak`: map the largest processes at the tree's memory peak.
    pub maps_at_peak: Option<PeakOptions>,
    /// `--malloc`: count malloc calls with the LD_PRELOAD shim.
    pub malloc: bool,
    /// `--budget`: checked after the report.
    pub budgets: Vec<crate::compare::budget::Budget>,
}

/// `ste maps`: a process now, or a command's tree at its peak.
#[derive(Debug, Clone)]
pub enum MapsOptions {
    Pid {
        pid: i32,
        summary: bool,
        json: Option<PathBuf>,
    },
    Command(Box<RunOptions>),
}

impl MapsOptions {
    pub fn from_args(a: MapsArgs) -> anyhow::Result<MapsOptions> {
        crate::export::one_on_stdout(&[("-o", &a.output), ("--json", &a.json)])?;
        Ok(match a.pid {
            Some(pid) => MapsOptions::Pid {
                pid,
                summary: a.summary,
                json: a.json,
            },
            None => MapsOptions::Command(Box::new(RunOptions {
                command: a.command,
                json: a.json,
                html: None,
                perfetto: None,
                record: None,
                style: style(a.output.is_none(), ColorChoice::Auto, None),
                output: a.output,
                tracker: a.tracker.map(TrackerKind::from),
                linger: None,
                pace: Pace::Budget(0.01),
                keep_root: false,
                accounting: crate::source::account::Options {
                    taskstats: true,
                    cgroup: true,
                    ..Default::default()
                },
                text: Default::default(),
                maps_at_peak: Some(PeakOptions {
                    budget: a.budget,
                    ranges: !a.summary,
                }),
                malloc: false,
                syscalls: None,
                budgets: Vec::new(),
            })),
        })
    }
}

/// How the report is drawn: its width, whether rows are cut to it, and colour as asked
/// (`auto`: only on a terminal, and never with `NO_COLOR`). The width is `--width`, else
/// `COLUMNS`, else the terminal's (the report on stderr, no `--output`), and rows are cut to it;
/// into a file or a pipe, none of them given, rows are whole and the chart takes 80 columns.
fn style(to_stderr: bool, choice: ColorChoice, width: Option<u16>) -> Style {
    let to_terminal = to_stderr && std::io::stderr().is_terminal();
    let columns = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<u16>().ok())
        .filter(|&c| c > 0);
    let terminal = to_terminal
        .then(|| terminal_size::terminal_size_of(std::io::stderr()).map(|(w, _)| w.0))
        .map(|w| w.unwrap_or(80));
    let (width, fit) = match width.or(columns).or(terminal) {
        Some(w) => (usize::from(w), true),
        None => (80, false),
    };
    Style {
        width: width.max(MIN_WIDTH),
        color: color(choice, to_terminal),
        fit,
    }
}

/// The narrowest layout: the chart's axis and the views' columns need this much.
const MIN_WIDTH: usize = 40;

impl RunOptions {
    pub fn from_args(a: RunArgs) -> anyhow::Result<RunOptions> {
        RunOptions::unchecked(a).checked()
    }

    /// Refuses outputs that would mix on standard output (`-`): two of them, or the record,
    /// which is written while the command runs and writes to the same standard output.
    fn checked(self) -> anyhow::Result<RunOptions> {
        let outputs = [
            ("-o", &self.output),
            ("--json", &self.json),
            ("--html", &self.html),
            ("--perfetto", &self.perfetto),
        ];
        crate::export::one_on_stdout(&outputs)?;
        if self.record.as_deref().is_some_and(crate::output::is_stdout) {
            anyhow::bail!(
                "the record cannot go to standard output (-): it is written while the command runs, and the command writes to the same standard output; give a file"
            );
        }
        Ok(self)
    }

    fn unchecked(a: RunArgs) -> RunOptions {
        let acc = &a.accounting;
        let linger = match (a.tracking.linger, acc.kill_lingering) {
            (None, true) => Some(KILL_LINGERING_AFTER),
            (l, _) => l,
        };
        RunOptions {
            accounting: crate::source::account::Options {
                off: acc.no_accounting,
                taskstats: !acc.no_taskstats && !acc.no_accounting,
                cgroup: !acc.no_cgroup && !acc.no_accounting,
                delays: acc.delays,
                kill_lingering: acc.kill_lingering,
            },
            text: text_options(&a.view),
            command: a.command,
            style: style(a.output.output.is_none(), a.output.color, a.output.width),
            output: a.output.output,
            json: a.output.json,
            html: a.reports.html,
            perfetto: a.reports.perfetto,
            record: a.reports.record,
            tracker: a.tracking.tracker.map(TrackerKind::from),
            linger,
            pace: match a.memory.interval {
                Some(d) => Pace::Fixed(d),
                None => Pace::Budget(a.memory.sample_budget),
            },
            keep_root: a.privileges.keep_root,
            syscalls: a.syscalls.syscalls.map(|mode| SyscallRequest {
                mode: mode.into(),
                allow_ptrace: a.syscalls.allow_ptrace,
            }),
            maps_at_peak: a.anatomy.maps_at_peak.then_some(PeakOptions {
                budget: a.anatomy.maps_budget,
                ranges: false,
            }),
            malloc: a.anatomy.malloc,
            budgets: a.budgets.budgets,
        }
    }

    /// `ste record`: a run that also writes a record (`-o FILE`, or `--record FILE`).
    pub fn from_record_args(a: RecordArgs) -> anyhow::Result<RunOptions> {
        let o = RunOptions::from_args(a.run)?;
        Ok(RunOptions {
            record: a.record.or(o.record.clone()),
            ..o
        })
        .and_then(RunOptions::checked)
    }
}

/// `-q`, `-v`, `--tree`, `--top`: the same for a run and for `ste report`.
fn text_options(v: &ViewArgs) -> crate::report::text::Options {
    crate::report::text::Options {
        quiet: v.quiet,
        verbose: v.verbose,
        by_program: v.by_program,
        views: crate::report::accounting::Views {
            tree: v.tree,
            top: v.top,
        },
    }
}

fn color(choice: ColorChoice, to_terminal: bool) -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => to_terminal && !no_color,
    }
}

/// Checked settings for `ste report`.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    pub input: PathBuf,
    pub format: Format,
    /// `None` is stdout.
    pub output: Option<PathBuf>,
    /// Colour of the text report; `None`: as recorded.
    pub color: Option<bool>,
    /// Width of the text report; `None`: as recorded.
    pub width: Option<usize>,
    /// What the text report shows, as a run takes it.
    pub text: crate::report::text::Options,
}

impl ReportOptions {
    /// The settings, or why they are refused: the text report's options with another format
    /// would do nothing.
    pub fn from_args(a: ReportArgs) -> anyhow::Result<ReportOptions> {
        if a.format != ReportFormat::Text {
            let v = &a.view;
            let text_only = [
                (v.quiet, "-q"),
                (v.verbose, "-v"),
                (v.by_program, "--by-program"),
                (v.tree, "--tree"),
                (v.top.is_some(), "--top"),
                (a.color.is_some(), "--color"),
                (a.width.is_some(), "--width"),
            ];
            if let Some((_, flag)) = text_only.iter().find(|(given, _)| *given) {
                anyhow::bail!(
                    "{flag} lays out the text report: -f {} takes none of -q, -v, --by-program, --tree, --top, --color, --width",
                    a.format
                        .to_possible_value()
                        .map_or_else(String::new, |v| v.get_name().to_string())
                );
            }
        }
        let to_terminal = a.output.is_none() && std::io::stdout().is_terminal();
        Ok(ReportOptions {
            input: a.input,
            format: match a.format {
                ReportFormat::Text => Format::Text,
                ReportFormat::Json => Format::Json,
                ReportFormat::Html => Format::Html,
                ReportFormat::Perfetto => Format::Perfetto,
                ReportFormat::Csv => Format::Csv,
                ReportFormat::CsvProcesses => Format::CsvProcesses,
            },
            output: a.output,
            color: a.color.map(|c| color(c, to_terminal)),
            width: a.width.map(usize::from),
            text: text_options(&a.view),
        })
    }
}

/// The CLI's values of `--tracker` as the tracker's own kind.
impl From<super::TrackerArg> for TrackerKind {
    fn from(a: super::TrackerArg) -> TrackerKind {
        match a {
            super::TrackerArg::Ebpf => TrackerKind::Ebpf,
            super::TrackerArg::Ptrace => TrackerKind::Ptrace,
            super::TrackerArg::Netlink => TrackerKind::Netlink,
        }
    }
}

/// The CLI's values of `--syscalls` as the syscall source's own mode.
impl From<super::SyscallsArg> for crate::source::syscalls::Mode {
    fn from(a: super::SyscallsArg) -> crate::source::syscalls::Mode {
        use crate::source::syscalls::Mode;
        match a {
            super::SyscallsArg::Count => Mode::Count,
            super::SyscallsArg::Time => Mode::Time,
            super::SyscallsArg::PerProcess => Mode::PerProcess,
        }
    }
}
