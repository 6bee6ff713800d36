//! The face's subcommands, one module each: `run` (a run, and `record`, which is a run with a
//! record file; its live `EXEC:` lines are ordered in `live`, its report goes out through
//! `report_to`, and what it cost ste is `own_usage`), `report` (renders a record or a
//! Run), `maps` and `monitor`; `manual` prints the shell completions and man pages.
//!
//! Each owns the dispatch and order of its subcommand; none reads /proc or formats a figure
//! itself (sources and reports do). Only this folder, `cli/` and `main.rs` may see clap types.

mod live;
pub mod manual;
pub mod maps;
pub mod monitor;
mod own_usage;
pub mod report;
mod report_to;
pub mod run;
