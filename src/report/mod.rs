//! Reports: pure functions of a finished Run, one file per format.
//!
//! They see only `model` (and `units` for formatting): nothing here knows about /proc, netlink or
//! ptrace, which is what makes every format testable from hand-built Runs.

pub mod chart;
pub mod json;
pub mod syscalls;
pub mod text;
