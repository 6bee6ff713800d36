//! Checked settings for a run, resolved from what was typed (`cli`) and the environment
//! (terminal width, `NO_COLOR`). Everything downstream takes these, never clap types.

use crate::cli::{ColorChoice, MapsArgs, RunArgs};
use crate::maps::peak::PeakOptions;
use crate::report::text::Style;
use crate::sample::Pace;
use crate::track::TrackerKind;
use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub command: Vec<OsString>,
    /// Where the report goes; `None` is stderr.
    pub output: Option<PathBuf>,
    pub json: Option<PathBuf>,
    pub style: Style,
    pub tracker: Option<TrackerKind>,
    pub linger: Option<Duration>,
    pub pace: Pace,
    pub keep_root: bool,
    /// `--maps-at-peak`: map the largest processes at the tree's memory peak.
    pub maps_at_peak: Option<PeakOptions>,
    /// `--malloc`: count malloc calls with the LD_PRELOAD shim.
    pub malloc: bool,
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
    pub fn from_args(a: MapsArgs) -> MapsOptions {
        match a.pid {
            Some(pid) => MapsOptions::Pid {
                pid,
                summary: a.summary,
                json: a.json,
            },
            None => MapsOptions::Command(Box::new(RunOptions {
                command: a.command,
                json: a.json,
                style: style(a.output.is_none(), ColorChoice::Auto),
                output: a.output,
                tracker: a.tracker,
                linger: None,
                pace: Pace::Budget(0.01),
                keep_root: false,
                maps_at_peak: Some(PeakOptions {
                    budget: a.budget,
                    ranges: !a.summary,
                }),
                malloc: false,
            })),
        }
    }
}

/// How the report is drawn: on a terminal (stderr, no `--output`), its width, and colour as
/// asked (`auto`: only there, and never with `NO_COLOR`).
fn style(to_stderr: bool, color: ColorChoice) -> Style {
    let to_terminal = to_stderr && std::io::stderr().is_terminal();
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let color = match color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => to_terminal && !no_color,
    };
    let width = if to_terminal {
        terminal_size::terminal_size_of(std::io::stderr())
            .map(|(w, _)| w.0 as usize)
            .unwrap_or(80)
    } else {
        80
    };
    Style {
        width: width.max(40),
        color,
    }
}

impl RunOptions {
    pub fn from_args(a: RunArgs) -> RunOptions {
        RunOptions {
            command: a.command,
            style: style(a.output.output.is_none(), a.output.color),
            output: a.output.output,
            json: a.output.json,
            tracker: a.tracking.tracker,
            linger: a.tracking.linger,
            pace: match a.memory.interval {
                Some(d) => Pace::Fixed(d),
                None => Pace::Budget(a.memory.sample_budget),
            },
            keep_root: a.privileges.keep_root,
            maps_at_peak: a.anatomy.maps_at_peak.then_some(PeakOptions {
                budget: a.anatomy.maps_budget,
                ranges: false,
            }),
            malloc: a.anatomy.malloc,
        }
    }
}
