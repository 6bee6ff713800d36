//! Checked settings for a run, resolved from what was typed (`cli`) and the environment
//! (terminal width, `NO_COLOR`). Everything downstream takes these, never clap types.

use crate::cli::{ColorChoice, RunArgs};
use crate::report::text::Style;
use crate::sample::Pace;
use crate::track::{SyscallRequest, TrackerKind};
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
    /// `--syscalls`: what to count, and whether ptrace syscall stops may stand in for BPF.
    pub syscalls: Option<SyscallRequest>,
}

impl RunOptions {
    pub fn from_args(a: RunArgs) -> RunOptions {
        let to_terminal = a.output.output.is_none() && std::io::stderr().is_terminal();
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let color = match a.output.color {
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
        RunOptions {
            command: a.command,
            output: a.output.output,
            json: a.output.json,
            style: Style {
                width: width.max(40),
                color,
            },
            tracker: a.tracking.tracker,
            linger: a.tracking.linger,
            pace: match a.memory.interval {
                Some(d) => Pace::Fixed(d),
                None => Pace::Budget(a.memory.sample_budget),
            },
            keep_root: a.privileges.keep_root,
            syscalls: a.syscalls.syscalls.map(|mode| SyscallRequest {
                mode,
                allow_ptrace: a.syscalls.allow_ptrace,
            }),
        }
    }
}
