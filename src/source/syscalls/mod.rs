//! System calls: the table of names and kernel subsystems, and the summary every syscall source
//! (BPF maps, ptrace syscall stops) turns its counts into.
//!
//! Owns the generated table (`table.rs`, from the kernel's own sources by
//! `tools/gen-syscall-table.py`) and the arithmetic from raw per-call counts to a
//! `model::Syscalls`. It reads no kernel interface: sources hand it numbers.

// Every architecture's table is generated; a build uses its own.
#[allow(dead_code)]
mod table;

use crate::model::{ErrnoCount, SyscallRow, Syscalls, Uncounted};
use std::collections::BTreeMap;

/// What `--syscalls` measures (its values, `cli`'s, map to these).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Calls and errors only: the lowest overhead.
    Count,
    /// Calls, errors and the time in each call (the default).
    Time,
    /// As `time`, and per process image (each process between its execs).
    PerProcess,
}

impl Mode {
    pub fn timed(self) -> bool {
        self != Mode::Count
    }

    pub fn per_process(self) -> bool {
        self == Mode::PerProcess
    }

    /// Its value of `--syscalls=` (the CLI's spelling, for a run ste starts itself).
    pub fn flag_value(self) -> &'static str {
        match self {
            Mode::Count => "count",
            Mode::Time => "time",
            Mode::PerProcess => "per-process",
        }
    }
}

/// One system call of the generated table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableEntry {
    pub nr: u32,
    pub name: &'static str,
    /// Coarse group (`Filesystem`, `Memory Mgmt.`, …).
    pub group: &'static str,
    /// The MAINTAINERS entry of the defining file.
    pub subsystem: Option<&'static str>,
    /// The kernel source file that defines it.
    pub file: Option<&'static str>,
}

impl TableEntry {
    const fn new(
        nr: u32,
        name: &'static str,
        group: &'static str,
        subsystem: Option<&'static str>,
        file: Option<&'static str>,
    ) -> Self {
        TableEntry {
            nr,
            name,
            group,
            subsystem,
            file,
        }
    }
}

/// The native table of the architecture ste was built for, and its name.
#[cfg(target_arch = "x86_64")]
fn native() -> (&'static str, &'static [TableEntry]) {
    ("x86_64", table::X86_64)
}

#[cfg(target_arch = "aarch64")]
fn native() -> (&'static str, &'static [TableEntry]) {
    ("aarch64", table::AARCH64)
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn native() -> (&'static str, &'static [TableEntry]) {
    (std::env::consts::ARCH, &[])
}

/// The 32-bit compat ABI's table, where ste knows it.
fn compat() -> Option<(&'static str, &'static [TableEntry])> {
    if cfg!(target_arch = "x86_64") {
        Some(("i386", table::I386))
    } else {
        None
    }
}

/// The table entry of call `nr` (of the compat ABI when `compat`).
pub fn lookup(compat_abi: bool, nr: u32) -> Option<&'static TableEntry> {
    let t = if compat_abi { compat()?.1 } else { native().1 };
    t.binary_search_by_key(&nr, |e| e.nr).ok().map(|i| &t[i])
}

/// The native number of the call named `name`.
pub fn native_nr(name: &str) -> Option<u32> {
    native().1.iter().find(|e| e.name == name).map(|e| e.nr)
}

/// The name of an errno value (`ENOENT`), kernel-internal ones included.
pub fn errno_name(errno: i32) -> Option<&'static str> {
    table::ERRNO
        .binary_search_by_key(&errno, |e| e.0)
        .ok()
        .map(|i| table::ERRNO[i].1)
}

/// Where the names come from, for the report.
pub fn table_origin() -> String {
    format!("Linux {} sources", table::KERNEL_VERSION)
}

/// A source of system-call counts for the whole tree, read once the tree is over (or ste
/// stopped waiting for it).
pub trait Source: Send + Sync {
    fn summary(&self) -> Syscalls;
}

/// Counts of one source, keyed by (compat, nr): the model's, which the ledger folds too.
pub use crate::model::Counts;
/// Failed calls keyed by (compat, nr, errno).
pub type Errnos = BTreeMap<(bool, u32, i32), u64>;

/// The tree's summary: rows with their names and subsystems, most calls first.
pub fn summarize(
    method: &str,
    mode: Mode,
    counts: &Counts,
    errnos: &Errnos,
    uncounted: Uncounted,
) -> Syscalls {
    let mut calls: Vec<SyscallRow> = counts
        .values()
        .filter(|c| c.calls > 0)
        .map(|c| {
            let e = lookup(c.compat, c.nr);
            SyscallRow {
                nr: c.nr,
                compat: c.compat,
                name: e.map(|e| e.name.to_string()),
                group: e.map_or("Unknown", |e| e.group).to_string(),
                subsystem: e.and_then(|e| e.subsystem).map(str::to_string),
                file: e.and_then(|e| e.file).map(str::to_string),
                calls: c.calls,
                errors: c.errors,
                total_ns: if mode.timed() { c.total_ns } else { None },
                max_ns: if mode.timed() { c.max_ns } else { None },
            }
        })
        .collect();
    calls.sort_by(|a, b| {
        b.calls
            .cmp(&a.calls)
            .then((a.compat, a.nr).cmp(&(b.compat, b.nr)))
    });
    let mut errors: Vec<ErrnoCount> = errnos
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(&(compat, nr, errno), &n)| ErrnoCount {
            nr,
            compat,
            errno,
            name: errno_name(errno).map(str::to_string),
            calls: n,
        })
        .collect();
    errors.sort_by(|a, b| {
        b.calls
            .cmp(&a.calls)
            .then((a.compat, a.nr, a.errno).cmp(&(b.compat, b.nr, b.errno)))
    });
    Syscalls {
        method: method.to_string(),
        timed: mode.timed(),
        per_process: mode.per_process(),
        arch: native().0.to_string(),
        compat_arch: compat().map(|c| c.0.to_string()),
        table: table_origin(),
        calls,
        errors,
        images: Vec::new(),
        uncounted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::CallCount;

    #[test]
    fn table_is_sorted_and_knows_the_common_calls() {
        for t in [table::X86_64, table::I386, table::AARCH64] {
            assert!(t.windows(2).all(|w| w[0].nr < w[1].nr));
        }
        assert!(table::ERRNO.windows(2).all(|w| w[0].0 < w[1].0));
        let e = table::X86_64.iter().find(|e| e.name == "getppid").unwrap();
        assert_eq!(
            (e.nr, e.group, e.file),
            (110, "Process Mgmt.", Some("kernel/sys.c"))
        );
        let e = table::X86_64.iter().find(|e| e.name == "mmap").unwrap();
        assert_eq!(e.group, "Memory Mgmt.");
        let e = table::X86_64.iter().find(|e| e.name == "futex").unwrap();
        assert_eq!(e.subsystem, Some("FUTEX SUBSYSTEM"));
        let e = table::I386.iter().find(|e| e.name == "getppid").unwrap();
        assert_eq!(e.nr, 64);
        let e = table::AARCH64.iter().find(|e| e.name == "getppid").unwrap();
        assert_eq!(e.nr, 173);
        assert_eq!(errno_name(2), Some("ENOENT"));
        assert_eq!(errno_name(512), Some("ERESTARTSYS"));
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn summary_names_rows_and_leaves_unknown_numbers_unknown() {
        let mut counts = Counts::new();
        let c = |nr, calls, errors| CallCount {
            nr,
            compat: false,
            calls,
            errors,
            total_ns: Some(calls * 100),
            max_ns: Some(500),
        };
        counts.insert((false, 0), c(0, 5, 1));
        counts.insert((false, 9999), c(9999, 7, 0));
        let mut errnos = Errnos::new();
        errnos.insert((false, 0, 9), 1);
        let s = summarize("ebpf", Mode::Count, &counts, &errnos, Uncounted::default());
        assert_eq!(s.calls[0].nr, 9999);
        assert_eq!(s.calls[0].name, None);
        assert_eq!(s.calls[0].group, "Unknown");
        assert_eq!(s.calls[1].name.as_deref(), Some("read"));
        assert_eq!(s.calls[1].total_ns, None, "count mode keeps no time");
        assert_eq!(s.errors[0].name.as_deref(), Some("EBADF"));
    }
}
