//! The command line as typed: clap derive only, options grouped under help headings, and the
//! one rule clap cannot say ([`Cli::parse_args`]). `options.rs` (here) turns this into checked
//! settings; nothing else looks at clap types.

pub mod compare;
pub mod options;

use clap::{Args, Parser, ValueEnum};
use std::ffi::OsString;
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "ste",
    version,
    about = "Run a command and show where its time and memory went: every process, thread and exec of its tree, CPU time, and PSS over time.",
    long_about = None,
    after_help = "ste's report goes to stderr (or --output); the command's stdin, stdout, stderr, terminal, signals and exit status pass through.\nExit status: the command's; 128+N if signal N killed it; 127 command not found; 126 not executable; 125 ste's own failure; 120 when the command succeeded and a --budget was exceeded.",
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

impl Cli {
    /// Parses ste's command line (`args` starts with the program's name). Options before the
    /// command are ste's, so an unknown one is an error, not the command; the command starts
    /// at the first word that is not an option or an option's value, or after `--`. With
    /// options before it, a subcommand's name cannot be told from a program of that name
    /// (`ste --tracker ptrace record -o f true`): clap takes it as the command, and this
    /// refuses it, saying how to write either.
    pub fn parse_args<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString>,
    {
        let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
        let cli = match Cli::run_alone(&args) {
            Some(run) => Cli {
                subcommand: None,
                run,
            },
            None => Cli::try_parse_from(&args)?,
        };
        if cli.subcommand.is_some() {
            return Ok(cli);
        }
        // The command is the tail of the arguments (the trailing values keep any later `--`);
        // an explicit `--` right before it says it is a program.
        let command = &cli.run.command;
        let before = args.len().checked_sub(command.len() + 1);
        let explicit = before.is_some_and(|i| i == 0 || args[i] == "--");
        let name = command[0].to_string_lossy();
        if !explicit && names_a_subcommand(&name) {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            return Err(cmd.error(
                clap::error::ErrorKind::ArgumentConflict,
                format!(
                    "'{name}' after options is ambiguous: for the subcommand, put ste's options after it ('ste {name} [OPTIONS] ...'); for a program named {name}, put '--' before it ('ste [OPTIONS] -- {name} ...')"
                ),
            ));
        }
        Ok(cli)
    }

    /// The common case, `ste [OPTIONS] COMMAND`, parsed with the run's arguments alone: clap
    /// builds every argument of every subcommand before it parses (the run's three times, for
    /// `ste`, `run` and `record`), which was most of ste's start-up before the command
    /// (bench/README.md). `None` when the first word may be a subcommand or `help`, and on any
    /// error (help and `--version` are errors to clap): the whole parser then gives the result,
    /// or the error as it always words it. A command line it accepts, the whole parser reads
    /// the same: the same arguments, with no subcommand in the first place.
    fn run_alone(args: &[OsString]) -> Option<RunArgs> {
        if names_a_subcommand(args.get(1)?.to_str()?) {
            return None;
        }
        let mut matches = RunArgs::augment_args(clap::Command::new("ste"))
            .try_get_matches_from(args)
            .ok()?;
        <RunArgs as clap::FromArgMatches>::from_arg_matches_mut(&mut matches).ok()
    }
}

/// Whether `word` is the name of a subcommand, clap's own `help` included (asked of the
/// derive, which compares names, rather than of a build of clap's whole command).
fn names_a_subcommand(word: &str) -> bool {
    word == "help" || <Subcommand as clap::Subcommand>::has_subcommand(word)
}

/// Jobs other than running a command. A command whose name is a subcommand's runs with
/// `ste -- NAME` or `ste run NAME`.
#[derive(clap::Subcommand, Debug)]
pub enum Subcommand {
    /// Run a command (the same as `ste [OPTIONS] COMMAND`).
    Run(RunArgs),
    /// Show every process that exits on the machine, one line each, until Ctrl-C (tsmon).
    Monitor(MonitorArgs),
    /// Run a command as `ste` does and write a record of the run, to render later with
    /// `ste report`.
    Record(RecordArgs),
    /// Render a record (or a `--json` run) as text, JSON, HTML, a Perfetto trace or CSV.
    Report(ReportArgs),
    /// Show a process's memory page by page (`ste maps PID`), or run a command and show its
    /// largest processes' maps at the tree's memory peak (`ste maps -- COMMAND`).
    Maps(MapsArgs),
    /// Run commands again and again, each tracked as `ste` tracks it: time AND memory
    /// statistics per command, and ratios to the first command.
    Bench(BenchArgs),
    /// Compare two runs (records or `--json` runs): totals, then by program.
    Diff(DiffArgs),
    /// Print a completion script for SHELL on stdout (e.g. `ste completions bash >
    /// /usr/share/bash-completion/completions/ste`).
    #[command(hide = true)]
    Completions(CompletionsArgs),
    /// Print ste's man page (roff) on stdout, or a subcommand's (e.g. `ste manpage >
    /// /usr/local/share/man/man1/ste.1`). Not `man`: `ste man ls` runs man.
    #[command(hide = true)]
    Manpage(ManArgs),
}

/// `ste completions SHELL`.
#[derive(Args, Debug, Clone)]
pub struct CompletionsArgs {
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

/// `ste manpage [SUBCOMMAND]`.
#[derive(Args, Debug, Clone)]
pub struct ManArgs {
    /// The subcommand whose page to print (`ste-record.1`); without one, ste's (`ste.1`).
    #[arg(value_name = "SUBCOMMAND")]
    pub subcommand: Option<String>,
}

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// The command to run, with its arguments.
    #[arg(
        required = true,
        value_name = "COMMAND",
        num_args = 1..,
        trailing_var_arg = true
    )]
    pub command: Vec<OsString>,

    #[command(flatten)]
    pub output: OutputArgs,

    #[command(flatten)]
    pub reports: ReportFileArgs,

    #[command(flatten)]
    pub tracking: TrackingArgs,

    #[command(flatten)]
    pub memory: MemoryArgs,

    #[command(flatten)]
    pub anatomy: AnatomyArgs,

    #[command(flatten)]
    pub privileges: PrivilegeArgs,

    #[command(flatten)]
    pub accounting: AccountingArgs,

    #[command(flatten)]
    pub view: ViewArgs,

    #[command(flatten)]
    pub syscalls: SyscallArgs,

    #[command(flatten)]
    pub budgets: BudgetArgs,
}

/// `--budget NAME=LIMIT`, on a run, a bench and a diff.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Budgets")]
pub struct BudgetArgs {
    /// Check a figure after the report: wall, user, system, cpu, max-pss, peak-rss (largest
    /// process peak), group-peak, processes, execs, calls (with --syscalls); e.g. wall=10m,
    /// max-pss=2GiB, processes=5000 (a bench checks each command's median; a diff checks the
    /// change, max-pss=+5%). Exceeded, when the command succeeded: exit status 120; a figure
    /// not measured: an error (125). Repeatable.
    #[arg(long = "budget", value_name = "NAME=LIMIT", value_parser = crate::compare::budget::parse)]
    pub budgets: Vec<crate::compare::budget::Budget>,
}

/// `ste bench`.
#[derive(Args, Debug, Clone)]
#[command(
    after_help = "Exit status: 0; a failing run's status (the bench stops, the complete rounds are reported); 120 when a budget is exceeded; 125 ste's own failure."
)]
pub struct BenchArgs {
    /// The commands, each one string split into words as a shell would (`'make -j4'`); the
    /// first is the baseline of the ratios.
    #[arg(required = true, value_name = "COMMAND")]
    pub commands: Vec<String>,

    /// Measured rounds; each round runs every command once, in a fresh random order.
    #[arg(short = 'n', long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,

    /// Rounds run first and not measured.
    #[arg(short = 'w', long, default_value_t = 1)]
    pub warmup: u32,

    /// Run CMD with `sh -c` before every run (warmups too), not measured (e.g. 'make clean').
    #[arg(long, value_name = "CMD")]
    pub prepare: Option<String>,

    /// Run each COMMAND with `sh -c` instead of splitting it into words.
    #[arg(long)]
    pub shell: bool,

    /// Let the commands' stdout and stderr through (default: /dev/null).
    #[arg(long)]
    pub show_output: bool,

    /// The seed of the random order and of the bootstrap intervals (default: random; the seed
    /// used is printed).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,

    /// Write every run's figures and the statistics as JSON to PATH.
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,

    /// Write the statistics as CSV to PATH (one row per command and figure).
    #[arg(long, value_name = "PATH")]
    pub csv: Option<PathBuf>,

    /// Write the table as Markdown to PATH (for a pull request).
    #[arg(long, value_name = "PATH")]
    pub markdown: Option<PathBuf>,

    /// How to follow each run's process tree (as for a run).
    #[arg(long, value_enum, value_name = "TRACKER")]
    pub tracker: Option<TrackerArg>,

    /// System calls counted on every run, as for a run (adds the `calls` figure).
    #[command(flatten)]
    pub syscalls: SyscallArgs,

    #[command(flatten)]
    pub budgets: BudgetArgs,
}

/// `ste diff`.
#[derive(Args, Debug, Clone)]
#[command(after_help = "Exit status: 0; 120 when a budget is exceeded; 125 ste's own failure.")]
pub struct DiffArgs {
    /// The first run: a record (`ste record`) or a `--json` run.
    #[arg(value_name = "A")]
    pub a: PathBuf,

    /// The second run, compared with A.
    #[arg(value_name = "B")]
    pub b: PathBuf,

    /// Write the comparison as JSON to PATH.
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,

    /// Write the comparison as Markdown to PATH.
    #[arg(long, value_name = "PATH")]
    pub markdown: Option<PathBuf>,

    #[command(flatten)]
    pub budgets: BudgetArgs,
}

/// What the text report shows: `ste` and `ste report` take the same, so a record renders the
/// text the live run printed.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Text report")]
pub struct ViewArgs {
    /// Leave out the EXEC lines (the summary stays).
    #[arg(short, long)]
    pub quiet: bool,

    /// Every figure with where it comes from and how exact it is.
    #[arg(short, long)]
    pub verbose: bool,

    /// Per program (argv[0]'s base name): processes, CPU (user, system), share of the tree's
    /// CPU, wall span, largest peak RSS; sorted by CPU.
    #[arg(long)]
    pub by_program: bool,

    /// Print the process ledger as a tree: pid, argv, lifetime, CPU, peak RSS, I/O, exit status.
    #[arg(long)]
    pub tree: bool,

    /// Print the N costliest processes, by CPU and by peak RSS.
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,
}

#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Accounting")]
pub struct AccountingArgs {
    /// Switch kernel.task_delayacct on for the run (root), so block-I/O and swap/reclaim waits
    /// are measured; the previous setting is restored afterwards.
    #[arg(long)]
    pub delays: bool,

    /// End the descendants still running when ste stops waiting for them (SIGTERM, then
    /// SIGKILL), through ste's cgroup when there is one. Without --linger, ste waits 500ms.
    #[arg(long)]
    pub kill_lingering: bool,

    /// No exact accounting at all (no cgroup, no taskstats, no per-process ledger): the core
    /// tracker alone, e.g. to measure what accounting costs.
    #[arg(long, conflicts_with_all = ["delays", "kill_lingering", "no_cgroup", "no_taskstats"])]
    pub no_accounting: bool,

    /// Do not run the command in a cgroup of its own.
    #[arg(long)]
    pub no_cgroup: bool,

    /// Do not listen to taskstats exit records (the ebpf tracker reads those figures itself
    /// and listens to none anyway).
    #[arg(long)]
    pub no_taskstats: bool,
}

/// `ste monitor`: the seed's tsmon.
#[derive(Args, Debug, Clone)]
pub struct MonitorArgs {
    /// Stop after DURATION (e.g. 10 seconds, 10s, 1m). Default: until Ctrl-C.
    #[arg(long, value_name = "DURATION", value_parser = crate::units::parse_duration)]
    pub duration: Option<std::time::Duration>,

    /// Only processes whose high-water RSS reached SIZE (e.g. 100M, 1G, 4096).
    #[arg(long, value_name = "SIZE", value_parser = crate::units::parse_size)]
    pub min_rss: Option<u64>,

    /// Only processes that used at least DURATION of CPU (e.g. 10ms).
    #[arg(long, value_name = "DURATION", value_parser = crate::units::parse_duration)]
    pub min_cpu: Option<std::time::Duration>,

    /// Only processes whose command name contains TEXT.
    #[arg(long, value_name = "TEXT")]
    pub comm: Option<String>,

    /// Only processes that exited with a non-zero status or were killed by a signal.
    #[arg(long)]
    pub nonzero_exit: bool,

    /// Print JSON lines instead of text.
    #[arg(long)]
    pub json: bool,

    /// Where the records come from: taskstats (root) or the proc connector plus /proc.
    /// Default: taskstats when it works.
    #[arg(long, value_enum, value_name = "SOURCE")]
    pub source: Option<MonitorSource>,
}

/// `--tracker`'s values, mapped to `track::TrackerKind` by `options.rs`: clap types stay in
/// the face.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TrackerArg {
    /// sched tracepoints through BPF, argv read in the kernel; needs CAP_BPF and CAP_PERFMON.
    Ebpf,
    /// fork/exec/exit stops, no syscall stops; exact, needs no privilege.
    Ptrace,
    /// The proc connector: no stops; can lose events under fork storms (counted and reported).
    Netlink,
}

/// `--syscalls`'s values, mapped to `syscalls::Mode` by `options.rs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SyscallsArg {
    /// Calls and errors only: the lowest overhead.
    Count,
    /// Calls, errors and the time in each call (the default).
    Time,
    /// As `time`, and per process image (each process between its execs).
    PerProcess,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MonitorSource {
    Taskstats,
    Connector,
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

    /// Lay the report out for this many columns, cutting --tree's and --top's rows to fit
    /// (default: COLUMNS, else the terminal's width; into a file, rows are whole).
    #[arg(long, value_name = "COLUMNS", value_parser = clap::value_parser!(u16).range(40..))]
    pub width: Option<u16>,
}

/// Report files written when the run is over (with `--json`).
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Reports")]
pub struct ReportFileArgs {
    /// Write a self-contained HTML report to FILE (charts, timeline, ledger; works offline).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,

    /// Write a trace for ui.perfetto.dev and chrome://tracing to FILE (trace-event JSON).
    #[arg(long, value_name = "FILE")]
    pub perfetto: Option<PathBuf>,

    /// Write a record of the run to FILE (e.g. run.ste), to render later with `ste report`:
    /// the run's events, compressed, written as they happen, so a killed run still leaves a
    /// readable record.
    #[arg(long = "record", id = "record_file", value_name = "FILE")]
    pub record: Option<PathBuf>,
}

/// `ste record`: everything `ste` takes, with `-o` naming the record: the older spelling of
/// `ste --record FILE` (where `-o`, as everywhere else, is the text report). The text report
/// still goes to stderr, or to `--report-file`.
#[derive(Args, Debug, Clone)]
#[command(mut_arg("output", |a| a
    .short(None)
    .long("report-file")
    .help("Write ste's text report to FILE instead of stderr")))]
pub struct RecordArgs {
    /// Write the record to FILE (e.g. run.ste), as `--record FILE` does.
    #[arg(
        short = 'o',
        long = "output",
        id = "record",
        value_name = "FILE",
        required_unless_present = "record_file",
        conflicts_with = "record_file"
    )]
    pub record: Option<PathBuf>,

    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Args, Debug, Clone)]
pub struct ReportArgs {
    /// A record written by `ste record` (or a run written by `--json`).
    #[arg(value_name = "RECORD")]
    pub input: PathBuf,

    /// What to render.
    #[arg(short, long, value_enum, default_value_t = ReportFormat::Text, value_name = "FORMAT")]
    pub format: ReportFormat,

    /// Write to FILE instead of stdout.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Colour the text report: as the recorded run did (default), or auto, always, never.
    #[arg(long, value_enum, value_name = "WHEN")]
    pub color: Option<ColorChoice>,

    /// Lay the text report out for this many columns (default: as the recorded run did).
    #[arg(long, value_name = "COLUMNS", value_parser = clap::value_parser!(u16).range(40..))]
    pub width: Option<u16>,

    #[command(flatten)]
    pub view: ViewArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// The `EXEC:` lines and the summary, as the live run printed them.
    Text,
    /// The Run (the `--json` schema).
    Json,
    /// A self-contained HTML report.
    Html,
    /// A trace for ui.perfetto.dev and chrome://tracing (trace-event JSON).
    Perfetto,
    /// The memory samples of the whole tree, one row per sampling round.
    Csv,
    /// The memory and CPU samples of each process, one row per process per round.
    CsvProcesses,
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
    pub tracker: Option<TrackerArg>,

    /// After the command exits, wait at most DURATION for its remaining descendants (e.g. 2 for
    /// seconds, 500ms). Default: wait for all of them; Ctrl-C stops waiting.
    #[arg(long, value_name = "DURATION", value_parser = crate::units::parse_duration)]
    pub linger: Option<std::time::Duration>,
}

#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Memory sampling")]
pub struct MemoryArgs {
    /// CPU the PSS sampler aims to use, in percent of one core (e.g. 1, 0.5, 2%); whatever it
    /// is, the tree is read at least every second.
    #[arg(long, value_name = "PERCENT", default_value = "1", value_parser = parse_percent)]
    pub sample_budget: f64,

    /// Sample PSS at this fixed period instead, whatever it costs (e.g. 0.01 for seconds, 10ms).
    #[arg(long, value_name = "DURATION", value_parser = crate::units::parse_duration, conflicts_with = "sample_budget")]
    pub interval: Option<std::time::Duration>,
}

#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Memory anatomy")]
pub struct AnatomyArgs {
    /// When the tree's memory reaches a new high, map its largest processes (smaps; page flags
    /// as root) and show what filled memory at the peak: heap, stacks, mmaps, files, shared
    /// memory.
    #[arg(long)]
    pub maps_at_peak: bool,

    /// CPU the maps at the peak may use, in percent of one core (their cost is reported).
    #[arg(
        long,
        value_name = "PERCENT",
        default_value = "5",
        value_parser = parse_percent,
        requires = "maps_at_peak"
    )]
    pub maps_budget: f64,

    /// Count every malloc/calloc/realloc/free/memalign call of every process (an LD_PRELOAD
    /// shim kept across execs), and show what each program held, its arenas and heaps, sbrk
    /// versus mmap, the thresholds, and held versus resident memory.
    #[arg(long)]
    pub malloc: bool,
}

/// `ste maps`.
#[derive(Args, Debug, Clone)]
pub struct MapsArgs {
    /// The process to map.
    #[arg(value_name = "PID", required_unless_present = "command")]
    pub pid: Option<i32>,

    /// Run COMMAND (after `--`) and map its largest processes at the tree's memory peak.
    #[arg(last = true, value_name = "COMMAND", conflicts_with = "pid")]
    pub command: Vec<OsString>,

    /// Totals only: no mapping-by-mapping listing.
    #[arg(long)]
    pub summary: bool,

    /// Write the map as JSON to PATH (with a COMMAND: the whole run).
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,

    /// With a COMMAND: write ste's report to FILE instead of stderr.
    #[arg(short = 'o', long, value_name = "FILE", conflicts_with = "pid")]
    pub output: Option<PathBuf>,

    /// With a COMMAND: CPU the maps may use, in percent of one core (as a run's
    /// --maps-budget; `--budget` is the old spelling).
    #[arg(
        long = "maps-budget",
        alias = "budget",
        value_name = "PERCENT",
        default_value = "5",
        value_parser = parse_percent,
        conflicts_with = "pid"
    )]
    pub budget: f64,

    /// With a COMMAND: how to follow its tree.
    #[arg(long, value_enum, value_name = "TRACKER", conflicts_with = "pid")]
    pub tracker: Option<TrackerArg>,
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
    pub syscalls: Option<SyscallsArg>,

    /// Where BPF cannot load, count system calls with ptrace syscall stops instead, like strace:
    /// slow (every call stops the process twice).
    #[arg(long, requires = "syscalls")]
    pub allow_ptrace: bool,
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
mod tests;
