//! The command line as typed: clap derive only, options grouped under help headings.
//! `options.rs` turns this into checked settings; nothing else looks at clap types.

use crate::track::TrackerKind;
use clap::{Args, Parser, ValueEnum};
use std::ffi::OsString;
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "ste",
    version,
    about = "Run a command and show where its time and memory went: every process, thread and exec of its tree, CPU time, and PSS over time.",
    long_about = None,
    after_help = "ste's report goes to stderr (or --output); the command's stdin, stdout, stderr, terminal, signals and exit status pass through.\nExit status: the command's; 128+N if signal N killed it; 127 command not found; 126 not executable; 125 ste's own failure.",
    trailing_var_arg = true,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    subcommand_value_name = "SUBCOMMAND",
    override_usage = "ste [OPTIONS] [--] COMMAND [ARGS]...\n       ste <SUBCOMMAND> [ARGS]..."
)]
pub struct Cli {
    #[command(subcommand)]
    pub subcommand: Option<Subcommand>,

    #[command(flatten)]
    pub run: RunArgs,
}

/// Jobs other than running a command. A command whose name is a subcommand's runs with
/// `ste -- NAME` or `ste run NAME`.
#[derive(clap::Subcommand, Debug)]
pub enum Subcommand {
    /// Run a command (the same as `ste [OPTIONS] COMMAND`).
    Run(RunArgs),
}

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// The command to run, with its arguments.
    #[arg(required = true, value_name = "COMMAND", allow_hyphen_values = true, num_args = 1..)]
    pub command: Vec<OsString>,

    #[command(flatten)]
    pub output: OutputArgs,

    #[command(flatten)]
    pub tracking: TrackingArgs,

    #[command(flatten)]
    pub memory: MemoryArgs,

    #[command(flatten)]
    pub privileges: PrivilegeArgs,

    #[command(flatten)]
    pub syscalls: SyscallArgs,
}

#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Output")]
pub struct OutputArgs {
    /// Write ste's report to FILE instead of stderr.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Write the run as JSON to PATH (schema_version 1; unknown values are null).
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,

    /// Colour the report: auto (a terminal, unless NO_COLOR is set), always, never.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, value_name = "WHEN")]
    pub color: ColorChoice,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Tracking")]
pub struct TrackingArgs {
    /// How to follow the process tree. Default: ebpf when BPF loads (root), else ptrace, or
    /// netlink when ptrace cannot attach.
    #[arg(long, value_enum, value_name = "TRACKER")]
    pub tracker: Option<TrackerKind>,

    /// After the command exits, wait at most DURATION for its remaining descendants (e.g. 500ms,
    /// 2s). Default: wait for all of them; Ctrl-C stops waiting.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub linger: Option<std::time::Duration>,
}

#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Memory sampling")]
pub struct MemoryArgs {
    /// CPU the PSS sampler may use, in percent of one core (e.g. 1, 0.5, 2%).
    #[arg(long, value_name = "PERCENT", default_value = "1", value_parser = parse_percent)]
    pub sample_budget: f64,

    /// Sample PSS at this fixed period instead, whatever it costs (e.g. 10ms).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, conflicts_with = "sample_budget")]
    pub interval: Option<std::time::Duration>,
}

#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Privileges")]
pub struct PrivilegeArgs {
    /// Under sudo, run the command as root instead of as the invoking user.
    #[arg(long)]
    pub keep_root: bool,
}

#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "System calls")]
pub struct SyscallArgs {
    /// Count the tree's system calls in the kernel (BPF, root): calls, errors and time per
    /// call, by kernel subsystem. MODE: time (the default), count (calls and errors only: the
    /// lowest overhead), per-process (also per process and exec'd program).
    #[arg(
        long,
        value_enum,
        value_name = "MODE",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "time"
    )]
    pub syscalls: Option<crate::syscalls::Mode>,

    /// Where BPF cannot load, count system calls with ptrace syscall stops instead, like strace:
    /// slow (every call stops the process twice).
    #[arg(long, requires = "syscalls")]
    pub allow_ptrace: bool,
}

fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| format!("{e} (examples: 500ms, 2s, 1m)"))?;
    if d.is_zero() {
        return Err("must be greater than zero".into());
    }
    Ok(d)
}

fn parse_percent(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("{s:?} is not a percentage (examples: 1, 0.5, 2%)"))?;
    if !(v > 0.0 && v <= 100.0) {
        return Err("must be greater than 0 and at most 100".into());
    }
    Ok(v / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_command_with_its_own_flags() {
        let cli =
            Cli::try_parse_from(["ste", "--tracker", "netlink", "ls", "-l", "--color"]).unwrap();
        assert_eq!(cli.run.command, ["ls", "-l", "--color"]);
        assert_eq!(cli.run.tracking.tracker, Some(TrackerKind::Netlink));
        let cli = Cli::try_parse_from(["ste", "--", "--weird"]).unwrap();
        assert_eq!(cli.run.command, ["--weird"]);
    }

    #[test]
    fn subcommands_and_commands_named_like_them() {
        let cli = Cli::try_parse_from(["ste", "run", "--linger", "1s", "ls"]).unwrap();
        assert!(matches!(cli.subcommand, Some(Subcommand::Run(ref r)) if r.command == ["ls"]));
        let cli = Cli::try_parse_from(["ste", "--", "run"]).unwrap();
        assert!(cli.subcommand.is_none());
        assert_eq!(cli.run.command, ["run"]);
    }

    #[test]
    fn syscalls_take_an_optional_attached_mode() {
        use crate::syscalls::Mode;
        let cli = Cli::try_parse_from(["ste", "--syscalls", "ls", "-l"]).unwrap();
        assert_eq!(cli.run.syscalls.syscalls, Some(Mode::Time));
        assert_eq!(cli.run.command, ["ls", "-l"]);
        let cli = Cli::try_parse_from(["ste", "--syscalls=count", "ls"]).unwrap();
        assert_eq!(cli.run.syscalls.syscalls, Some(Mode::Count));
        let cli =
            Cli::try_parse_from(["ste", "--syscalls=per-process", "--allow-ptrace", "ls"]).unwrap();
        assert_eq!(cli.run.syscalls.syscalls, Some(Mode::PerProcess));
        assert!(cli.run.syscalls.allow_ptrace);
        assert!(Cli::try_parse_from(["ste", "--allow-ptrace", "ls"]).is_err());
        assert!(Cli::try_parse_from(["ste", "--syscalls=everything", "ls"]).is_err());
    }

    #[test]
    fn rejects_bad_values() {
        assert!(Cli::try_parse_from(["ste"]).is_err());
        assert!(Cli::try_parse_from(["ste", "--linger", "soon", "true"]).is_err());
        assert!(Cli::try_parse_from(["ste", "--sample-budget", "0", "true"]).is_err());
        assert!(Cli::try_parse_from(["ste", "--tracker", "magic", "true"]).is_err());
        assert!((parse_percent("2%").unwrap() - 0.02).abs() < 1e-12);
    }
}
