//! The `ste` binary: parse, run, exit with the command's status.

use std::process::ExitCode;
use ste::cli::options::{MapsOptions, ReportOptions, RunOptions};
use ste::cli::{Cli, Subcommand};

/// Runs before Rust's runtime opens `/dev/null` on closed standard descriptors: see `launch`.
#[used]
#[unsafe(link_section = ".init_array")]
static NOTE_CLOSED_STANDARD_FDS: extern "C" fn() = ste::launch::note_closed_standard_fds;

fn main() -> ExitCode {
    // Before anything else: the CPU counters ste reports are differences from here.
    ste::command::run::note_start();
    let cli = match Cli::parse_args(std::env::args_os()) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            // Usage errors are ste's own failure (125, as env(1) and timeout(1) do).
            return ExitCode::from(if e.use_stderr() { 125 } else { 0 });
        }
    };
    // Not for `ste bench`: the ste it runs for each round raises its own, and its `--prepare`
    // runs with the user's limit.
    if !matches!(cli.subcommand, Some(Subcommand::Bench(_))) {
        ste::launch::raise_descriptor_limit();
        ste::launch::raise_memlock_limit();
    }
    let result = match cli.subcommand {
        None => ste::command::run::run(&RunOptions::from_args(cli.run)),
        Some(Subcommand::Run(args)) => ste::command::run::run(&RunOptions::from_args(args)),
        Some(Subcommand::Monitor(args)) => ste::command::monitor::run(&args),
        Some(Subcommand::Record(args)) => {
            ste::command::run::run(&RunOptions::from_record_args(args))
        }
        Some(Subcommand::Report(args)) => {
            ste::command::report::run(&ReportOptions::from_args(args))
        }
        Some(Subcommand::Maps(args)) => ste::command::maps::run(MapsOptions::from_args(args)),
        Some(Subcommand::Bench(args)) => ste::compare::bench::run(&ste::cli::compare::bench(args)),
        Some(Subcommand::Diff(args)) => ste::compare::diff::run(&ste::cli::compare::diff(args)),
    };
    match result {
        Ok(status) => ExitCode::from(status.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("ste: {e:#}");
            ExitCode::from(125)
        }
    }
}
