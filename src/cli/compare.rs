//! Checked settings for `ste bench` and `ste diff`, from what was typed (`cli`).
//!
//! A room of its own, not `options.rs`: the settings of a run and of `ste report`, which
//! `options.rs` resolves, are taken by the rooms `compare` builds on (`export`,
//! `command::report`), so `options.rs` must not build `compare`'s own.

use crate::cli::{BenchArgs, DiffArgs};
use crate::compare::bench::BenchOptions;
use crate::compare::diff::DiffOptions;
use crate::source::track::SyscallRequest;

/// Checked settings for `ste bench`.
pub fn bench(a: BenchArgs) -> BenchOptions {
    BenchOptions {
        commands: a.commands,
        runs: a.runs as usize,
        warmup: a.warmup as usize,
        prepare: a.prepare,
        shell: a.shell,
        show_output: a.show_output,
        tracker: a.tracker.map(Into::into),
        syscalls: a.syscalls.syscalls.map(|mode| SyscallRequest {
            mode: mode.into(),
            allow_ptrace: a.syscalls.allow_ptrace,
        }),
        seed: a.seed,
        json: a.json,
        csv: a.csv,
        markdown: a.markdown,
        budgets: a.budgets.budgets,
    }
}

/// Checked settings for `ste diff`.
pub fn diff(a: DiffArgs) -> DiffOptions {
    DiffOptions {
        a: a.a,
        b: a.b,
        json: a.json,
        markdown: a.markdown,
        budgets: a.budgets.budgets,
    }
}
