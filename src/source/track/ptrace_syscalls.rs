//! System calls counted at ptrace syscall stops (`--syscalls --allow-ptrace`): the slow path,
//! as strace does it, for when BPF cannot load.
//!
//! Owns the per-thread bookkeeping between a call's entry stop and its exit stop, the tree's
//! tally (shared with the session, which reads the summary when the run is over) and, in
//! per-process mode, each thread's counts until it exits or execs. The ptrace tracker calls in
//! at each stop; this module only asks the kernel what the stop is (`PTRACE_GET_SYSCALL_INFO`).
//!
//! As at raw_syscalls:sys_exit, a call is counted at its exit stop: `exit` and `exit_group`,
//! which never return, are not. A new task's return from fork makes no exit stop (the kernel
//! clears syscall tracing in the child), so it is not counted twice either.

use crate::bus::sink::monotonic_ns;
use crate::model::{CallCount, Syscalls, Uncounted};
use crate::source::syscalls::{self, Counts, Errnos, Mode};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// `AUDIT_ARCH_I386` (include/uapi/linux/audit.h): a call through the 32-bit compat ABI.
const AUDIT_ARCH_I386: u32 = 0x4000_0003;
/// Numbers from here on are in no table (x32 sets bit 30); the BPF side uses the same bound.
const MAX_NR: u64 = 512;

/// A call whose entry stop was seen.
#[derive(Clone, Copy)]
struct Entry {
    nr: u32,
    compat: bool,
    t_ns: u64,
}

/// The tree's counts, shared with the session.
#[derive(Default)]
struct Tally {
    counts: Counts,
    errnos: Errnos,
    bad_numbers: u64,
}

/// The summary source handed to the session.
struct TallySource {
    mode: Mode,
    tally: Arc<Mutex<Tally>>,
}

impl syscalls::Source for TallySource {
    fn summary(&self) -> Syscalls {
        let t = self.tally.lock().expect("syscall tally lock");
        let uncounted = Uncounted {
            bad_numbers: t.bad_numbers,
            ..Uncounted::default()
        };
        syscalls::summarize("ptrace", self.mode, &t.counts, &t.errnos, uncounted)
    }
}

pub struct SyscallStops {
    mode: Mode,
    tally: Arc<Mutex<Tally>>,
    /// Calls in progress, by thread.
    entered: HashMap<i32, Entry>,
    /// Per-process mode: each thread's counts in its process's current image.
    threads: HashMap<i32, Counts>,
}

/// What a syscall stop was.
enum Stop {
    Entry(Entry),
    /// The return value, whether it is an error, and whether the task returns through the
    /// compat ABI (after an execve of a 32-bit program, the call it returns from is the new
    /// image's: the kernel reports it with the compat number).
    Exit(i64, bool, bool),
    Other,
}

impl SyscallStops {
    pub fn new(mode: Mode) -> (SyscallStops, Arc<dyn syscalls::Source>) {
        let tally = Arc::new(Mutex::new(Tally::default()));
        let source = Arc::new(TallySource {
            mode,
            tally: Arc::clone(&tally),
        });
        let stops = SyscallStops {
            mode,
            tally,
            entered: HashMap::new(),
            threads: HashMap::new(),
        };
        (stops, source)
    }

    /// A syscall stop of `tid` (a `SIGTRAP | 0x80` stop under `PTRACE_O_TRACESYSGOOD`).
    pub fn stop(&mut self, tid: i32) {
        match query(tid) {
            Some(Stop::Entry(e)) => {
                self.entered.insert(tid, e);
            }
            Some(Stop::Exit(rval, is_error, compat)) => {
                if let Some(e) = self.entered.remove(&tid) {
                    self.count(tid, e, rval, is_error);
                } else if let Some(e) = entry_from_registers(tid, compat) {
                    // The root's execve: it entered before its first stop (the exec event).
                    self.count(tid, e, rval, is_error);
                }
            }
            Some(Stop::Other) | None => {}
        }
    }

    fn count(&mut self, tid: i32, e: Entry, rval: i64, is_error: bool) {
        let ns = self
            .mode
            .timed()
            .then(|| (e.t_ns != 0).then(|| monotonic_ns().saturating_sub(e.t_ns)))
            .flatten();
        let one = CallCount {
            nr: e.nr,
            compat: e.compat,
            calls: 1,
            errors: u64::from(is_error),
            total_ns: ns,
            max_ns: ns,
        };
        {
            let mut t = self.tally.lock().expect("syscall tally lock");
            if u64::from(e.nr) >= MAX_NR {
                t.bad_numbers += 1;
                return;
            }
            add(&mut t.counts, &one);
            if is_error {
                *t.errnos
                    .entry((e.compat, e.nr, (-rval) as i32))
                    .or_default() += 1;
            }
        }
        if self.mode.per_process() {
            add(self.threads.entry(tid).or_default(), &one);
        }
    }

    /// `tgid` exec'd through `former` (its new leader id is `tgid`): the call in progress moves
    /// with the thread. Returns the counts of the image being replaced, per-process mode.
    pub fn exec(&mut self, tgid: i32, former: i32) -> Vec<CallCount> {
        if former != tgid
            && let Some(e) = self.entered.remove(&former)
        {
            self.entered.insert(tgid, e);
        }
        let mut out = self.take(former);
        if former != tgid {
            out.extend(self.take(tgid));
        }
        out
    }

    /// The thread `tid` is exiting: its call in progress never returns. Returns its counts,
    /// per-process mode.
    pub fn thread_exit(&mut self, tid: i32) -> Vec<CallCount> {
        self.entered.remove(&tid);
        self.take(tid)
    }

    fn take(&mut self, tid: i32) -> Vec<CallCount> {
        self.threads
            .remove(&tid)
            .map(|c| c.into_values().collect())
            .unwrap_or_default()
    }
}

fn add(counts: &mut Counts, c: &CallCount) {
    counts
        .entry((c.compat, c.nr))
        .and_modify(|m| m.merge(c))
        .or_insert(*c);
}

/// What the stop of `tid` is, from `PTRACE_GET_SYSCALL_INFO` (Linux 5.3).
fn query(tid: i32) -> Option<Stop> {
    // SAFETY: a zeroed ptrace_syscall_info is a valid output buffer.
    let mut info: libc::ptrace_syscall_info = unsafe { std::mem::zeroed() };
    // SAFETY: the kernel writes at most `size` bytes into `info`.
    let rc = unsafe {
        libc::ptrace(
            libc::PTRACE_GET_SYSCALL_INFO,
            tid,
            std::mem::size_of::<libc::ptrace_syscall_info>(),
            &mut info as *mut libc::ptrace_syscall_info,
        )
    };
    if rc <= 0 {
        return None;
    }
    let compat = info.arch == AUDIT_ARCH_I386;
    Some(match info.op {
        libc::PTRACE_SYSCALL_INFO_ENTRY => {
            // SAFETY: op ENTRY says the `entry` member is the one written.
            let nr = unsafe { info.u.entry.nr };
            Stop::Entry(Entry {
                nr: nr.min(MAX_NR) as u32,
                compat,
                t_ns: monotonic_ns(),
            })
        }
        libc::PTRACE_SYSCALL_INFO_EXIT => {
            // SAFETY: op EXIT says the `exit` member is the one written.
            let exit = unsafe { info.u.exit };
            Stop::Exit(exit.sval, exit.is_error != 0, compat)
        }
        _ => Stop::Other,
    })
}

/// The call `tid` is returning from, read from its registers, for an exit stop whose entry
/// came before ste's first stop of it. Its time is unknown.
#[cfg(target_arch = "x86_64")]
fn entry_from_registers(tid: i32, compat: bool) -> Option<Entry> {
    // offsetof(struct user_regs_struct, orig_rax)
    const ORIG_RAX: usize = 15 * 8;
    // SAFETY: PTRACE_PEEKUSER reads one word of the stopped tracee's user area.
    let nr = unsafe {
        *libc::__errno_location() = 0;
        libc::ptrace(libc::PTRACE_PEEKUSER, tid, ORIG_RAX, 0)
    };
    // SAFETY: reading errno after the call.
    if nr < 0 || unsafe { *libc::__errno_location() } != 0 {
        return None;
    }
    Some(Entry {
        nr: (nr as u64).min(MAX_NR) as u32,
        compat,
        t_ns: 0,
    })
}

#[cfg(not(target_arch = "x86_64"))]
fn entry_from_registers(_tid: i32, _compat: bool) -> Option<Entry> {
    None
}
