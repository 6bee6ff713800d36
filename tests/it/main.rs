//! ste's integration tests: the real binary on workloads with known answers.

mod core;
mod harness;
mod syscalls;
