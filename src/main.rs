//! The `ste` binary: parse, run, exit with the command's status.

use std::alloc::{GlobalAlloc, Layout, System};
use std::process::ExitCode;
use ste::cli::options::{MapsOptions, ReportOptions, RunOptions};
use ste::cli::{Cli, Subcommand};

/// Runs before Rust's runtime opens `/dev/null` on closed standard descriptors: see `launch`.
#[used]
#[unsafe(link_section = ".init_array")]
static NOTE_CLOSED_STANDARD_FDS: extern "C" fn() = ste::launch::note_closed_standard_fds;

/// The system's allocator, with an allocation that fails (a limit on ste's address space,
/// `ulimit -v`, or a machine out of memory) made a one-line error and an exit instead of
/// Rust's abort with a backtrace: 125 when the command did not run, else
/// `command::run::OUTPUT_LOST` (the report was lost). The files ste reads are bounded before
/// they are held (`ledger::record::Limits`); this is for what no limit foresaw.
struct Allocator;

// SAFETY: every call is the system allocator's, with its arguments unchanged; a null result
// never returns (the process ends).
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as the caller's contract for `alloc`.
        checked(unsafe { System.alloc(layout) }, layout.size())
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as the caller's contract for `alloc_zeroed`.
        checked(unsafe { System.alloc_zeroed(layout) }, layout.size())
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as the caller's contract for `realloc`.
        checked(unsafe { System.realloc(ptr, layout, new_size) }, new_size)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as the caller's contract for `dealloc`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Allocator = Allocator;

/// `ptr`, unless it is null: then says so on stderr, with no allocation, and ends ste.
fn checked(ptr: *mut u8, size: usize) -> *mut u8 {
    if !ptr.is_null() {
        return ptr;
    }
    const BEFORE: &[u8] = b"ste: out of memory: an allocation of ";
    const AFTER: &[u8] =
        b" bytes failed (a limit on ste's address space, ulimit -v, or the machine's memory)\n";
    let mut line = [0u8; 160];
    line[..BEFORE.len()].copy_from_slice(BEFORE);
    let mut len = BEFORE.len();
    // The size's digits, most significant first.
    let mut digits = [0u8; 20];
    let (mut n, mut count) = (size, 0);
    loop {
        digits[count] = b'0' + (n % 10) as u8;
        count += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &d in digits[..count].iter().rev() {
        line[len] = d;
        len += 1;
    }
    line[len..len + AFTER.len()].copy_from_slice(AFTER);
    len += AFTER.len();
    let status = if ste::command::run::command_ran() {
        ste::command::run::OUTPUT_LOST
    } else {
        ste::model::status::STE_FAILED
    };
    // SAFETY: write(2) from a local buffer, then _exit: no allocation, no unwinding.
    unsafe {
        libc::write(2, line.as_ptr().cast(), len);
        libc::_exit(status)
    }
}

fn main() -> ExitCode {
    // Before anything else: the CPU counters ste reports are differences from here.
    ste::command::run::note_start();
    let cli = match Cli::parse_args(std::env::args_os()) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            // Usage errors are ste's own failure (125, as env(1) and timeout(1) do).
            return ExitCode::from(if e.use_stderr() {
                ste::model::status::STE_FAILED as u8
            } else {
                0
            });
        }
    };
    // Not for `ste bench`: the ste it runs for each round raises its own, and its `--prepare`
    // runs with the user's limit.
    if !matches!(cli.subcommand, Some(Subcommand::Bench(_))) {
        ste::launch::raise_descriptor_limit();
        ste::launch::raise_memlock_limit();
    }
    let result = match cli.subcommand {
        None => RunOptions::from_args(cli.run).and_then(|o| ste::command::run::run(&o)),
        Some(Subcommand::Run(args)) => {
            RunOptions::from_args(args).and_then(|o| ste::command::run::run(&o))
        }
        Some(Subcommand::Monitor(args)) => ste::command::monitor::run(&args),
        Some(Subcommand::Record(args)) => {
            RunOptions::from_record_args(args).and_then(|o| ste::command::run::run(&o))
        }
        Some(Subcommand::Report(args)) => {
            ReportOptions::from_args(args).and_then(|o| ste::command::report::run(&o))
        }
        Some(Subcommand::Maps(args)) => {
            MapsOptions::from_args(args).and_then(ste::command::maps::run)
        }
        Some(Subcommand::Bench(args)) => ste::compare::bench::run(&ste::cli::compare::bench(args)),
        Some(Subcommand::Diff(args)) => ste::compare::diff::run(&ste::cli::compare::diff(args)),
        Some(Subcommand::Completions(args)) => ste::command::manual::completions(args.shell),
        Some(Subcommand::Manpage(args)) => {
            ste::command::manual::manpage(args.subcommand.as_deref())
        }
    };
    match result {
        Ok(status) => ExitCode::from(status.clamp(0, 255) as u8),
        Err(e) => {
            ste::output::say(&format!("ste: {e:#}"));
            ExitCode::from(ste::model::status::STE_FAILED as u8)
        }
    }
}
