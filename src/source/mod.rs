//! The sources: each owns one kernel interface and tells the ledger what it saw as `Event`s on
//! the bus. `track` (the process tree: ebpf, ptrace, netlink), `sample` (memory over time),
//! `account` (taskstats, the cgroup, delays), `syscalls` (system call counts), `malloc` (the
//! allocator's segments and probes), `maps` (the page maps at the peak).
//!
//! Sources must not import the ledger's recorder state for writing, the face (`cli` types,
//! `command`) or a report; they format no output.

pub mod account;
pub mod from_kernel;
pub mod malloc;
pub mod maps;
pub mod sample;
pub mod syscalls;
pub mod track;
