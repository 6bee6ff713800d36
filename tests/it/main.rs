//! ste's integration tests: the real binary on workloads with known answers.

mod accounting;
mod bench;
mod bpf_loader;
mod budget;
mod core;
mod crafted;
mod diff;
mod harness;
mod json;
mod kernel_matrix;
mod malloc;
mod maps;
mod outputs;
mod pss;
mod release;
mod reports;
mod sharing;
mod syscalls;
mod trackers;
