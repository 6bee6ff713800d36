//! The system calls of the tree (`--syscalls`): per call, per errno, and per process image.
//!
//! Plain data, std and serde only. Names, files and subsystems are resolved by the source when
//! it reports (from the table generated from the kernel sources), so a record replays to the
//! same report whatever table the replaying ste has.

use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Syscalls {
    /// How the calls were counted: `ebpf` (in the kernel, at raw_syscalls:sys_exit) or
    /// `ptrace` (syscall stops, like strace: slow).
    pub method: String,
    /// Whether the time in each call was measured (`--syscalls`, `--syscalls=per-process`) or
    /// only counts were kept (`--syscalls=count`).
    pub timed: bool,
    /// Whether counts were also kept per process image (`--syscalls=per-process`).
    pub per_process: bool,
    /// Architecture whose numbering `nr` follows (`x86_64`).
    pub arch: String,
    /// Its 32-bit compat ABI (`i386`), whose numbers the calls with `compat` follow.
    pub compat_arch: Option<String>,
    /// Where names, files and subsystems come from (`Linux 6.1.192 sources`).
    pub table: String,
    /// Every system call the tree made, most calls first.
    pub calls: Vec<SyscallRow>,
    /// Failed calls by system call and errno, most first.
    pub errors: Vec<ErrnoCount>,
    /// Per process image (`--syscalls=per-process`): the calls of each process between its
    /// start or an exec and its next exec or its end. Empty otherwise.
    pub images: Vec<ImageCalls>,
    /// Calls that reached the kernel but are not in the figures above, and why.
    pub uncounted: Uncounted,
}

/// One system call, for the whole tree.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct SyscallRow {
    /// Its number (in `compat_arch`'s numbering when `compat`).
    pub nr: u32,
    /// Made through the 32-bit compat ABI.
    pub compat: bool,
    /// Its name; `None` when the table does not know the number (a kernel newer than it).
    pub name: Option<String>,
    /// Coarse kernel subsystem (`Filesystem`, `Memory Mgmt.`, …), from the defining file's
    /// path; `Unknown` with the name.
    pub group: String,
    /// The MAINTAINERS entry of the defining file (`MEMORY MANAGEMENT`).
    pub subsystem: Option<String>,
    /// The kernel source file that defines it (`mm/mmap.c`).
    pub file: Option<String>,
    /// Calls that returned (like strace, `exit` and `exit_group`, which never return, are not
    /// counted).
    pub calls: u64,
    /// Calls that returned an error (-4095..-1), kernel-internal restarts included.
    pub errors: u64,
    /// Time in the calls, from entry to return; `None` when not timed.
    pub total_ns: Option<u64>,
    /// The longest call; `None` when not timed.
    pub max_ns: Option<u64>,
}

/// Failed calls of one system call with one errno.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ErrnoCount {
    pub nr: u32,
    pub compat: bool,
    /// The error number (positive).
    pub errno: i32,
    /// Its name (`ENOENT`), when known.
    pub name: Option<String>,
    pub calls: u64,
}

/// The calls of one process image.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ImageCalls {
    /// Index of the process in `Run::processes`.
    pub process: usize,
    /// Its pid, for readers of the JSON.
    pub pid: i32,
    /// Index in that process's `execs` of the image that made the calls; `None` for the image
    /// it was forked with, before any exec.
    pub exec: Option<usize>,
    /// Most calls first.
    pub calls: Vec<CallCount>,
}

/// Calls counted per system call, keyed by (compat, nr): what a source gathers and the
/// ledger folds per process image.
pub type Counts = std::collections::BTreeMap<(bool, u32), CallCount>;

/// One system call of one image.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallCount {
    pub nr: u32,
    pub compat: bool,
    pub calls: u64,
    pub errors: u64,
    /// Time in the calls; `None` when not timed.
    pub total_ns: Option<u64>,
    /// The longest call; `None` when not timed.
    pub max_ns: Option<u64>,
}

impl CallCount {
    /// Adds `other` (the same call) into this one.
    pub fn merge(&mut self, other: &CallCount) {
        self.calls = self.calls.saturating_add(other.calls);
        self.errors = self.errors.saturating_add(other.errors);
        self.total_ns = sum_opt(self.total_ns, other.total_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
    }
}

fn sum_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.saturating_add(b)),
        (a, b) => a.or(b),
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct Uncounted {
    /// Calls with a number outside the architecture's tables (the x32 ABI, or -1 for a call
    /// skipped by seccomp or a tracer).
    pub bad_numbers: u64,
    /// Failed calls counted but not broken down by errno (the kernel map was full).
    pub errno_unclassified: u64,
    /// Calls counted for the tree but in no process image (per-thread storage could not be
    /// allocated, or the record was lost with the ring buffer full).
    pub per_process_missing: u64,
}
