//! Whether an argv read from `/proc/PID/cmdline` after an exec was reported is the argv of that
//! exec's image, for the trackers that do not stop the process (netlink; ebpf for an argument
//! area larger than its in-kernel copy).
//!
//! Owns the rule and its waits; the trackers own their queues of events and the reads. It
//! touches neither the tree nor the sink.
//!
//! Why a rule is needed: the process runs on while ste reads, and may exec again first; the
//! read then returns the later image's argv. The exec's timestamp cannot settle it: the kernel
//! installs the new image (`exec_mmap`) before it reports the exec (the proc connector's event
//! and the `sched_process_exec` tracepoint come at the end of `execve`, after the ELF loader,
//! which may sleep on I/O or be preempted in between), so a read can return a later image
//! whose exec is reported only after the read ended.
//!
//! The rule, and why it is exact. The read is one `read(2)` of the whole file (one image: the
//! kernel takes the process's memory once per call). Then ste looks at where the process is
//! (`/proc/PID/syscall`), and only then takes every event queued so far:
//! - a later exec of the process among them: doubt (it may have replaced the image before the
//!   read);
//! - events lost (an overrun): doubt;
//! - the process's end, reported after the read began, with no exec in between: kept (the
//!   read, which returned something, took the memory of the process as it was then, and it
//!   had no later image);
//! - nothing of the process, and it was asleep in a system call other than `execve` (or
//!   outside any system call) when looked at: kept. A task is in one system call at a time, so
//!   any exec that had installed its image by then had also returned, and reported itself,
//!   before the look; reports are queued as they are made, and the queue was taken after the
//!   look, so that report would be among the events. The look is at the main thread: a
//!   thread that execs makes itself the main thread (`de_thread`) before it installs the
//!   image, so it is the one looked at from then on.
//! - otherwise (running, inside `execve`, or not readable) ste looks again a little later.
//!   The ebpf reader holds its ring while it looks: after its last wait (about 13 ms on) it
//!   is a doubt. The netlink reader never waits: it keeps every argv aside, and the rule
//!   decides at the first of the process's next exec or end, a loss, or a look (every 20 ms)
//!   that finds it asleep outside an exec (a CPU-bound compiler is running at every look, and
//!   is decided at its end).
//!
//! A doubtful argv is shown as `[?]` and counted (`argv_doubtful`), never attributed.
//!
//! One assumption: the pid is not reused between the exec and the last look. The kernel may
//! send a process's end after its parent could reap it, but a reused pid needs the pid
//! allocator to go round all `pid_max` numbers in that time.

use std::time::Duration;

/// What `/proc/PID/syscall` showed of the process's main thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// Asleep in a system call that is not an exec, or outside any.
    Outside,
    /// Running, inside an exec, or not readable.
    Unsure,
}

/// The exec system calls' numbers as `/proc/PID/syscall` shows them: x86-64 `execve` and
/// `execveat`, i386 `execve` and `execveat` (a 32-bit process), x32 `execve` and `execveat`.
/// A 64-bit process asleep in i386's numbers (`munmap`, nothing) only costs a wait.
const EXEC_NRS: [i64; 6] = [59, 322, 11, 358, 0x4000_0000 | 520, 0x4000_0000 | 545];

impl Probe {
    /// From the parsed file (`None`: running; `Some(-1)`: blocked outside a system call).
    pub fn of(nr: Option<Option<i64>>) -> Probe {
        match nr {
            Some(Some(nr)) if !EXEC_NRS.contains(&nr) => Probe::Outside,
            _ => Probe::Unsure,
        }
    }
}

/// The first thing the queue held about the process after its exec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Later {
    /// Another exec of the process.
    Exec,
    /// The process's main thread ended at `ts_ns` (`CLOCK_MONOTONIC`); `last` when no other
    /// thread of it was known alive.
    Exit { ts_ns: u64, last: bool },
    /// The kernel dropped events.
    Lost,
}

/// The loss a doubt is counted as.
pub fn doubt() -> crate::bus::event::Event {
    crate::bus::event::Event::Lost {
        overruns: 0,
        events_at_most: Some(0),
        found_by_resync: 0,
        exits_missed: 0,
        argv_doubtful: 1,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Keep,
    Doubt,
    /// Not yet known: look again.
    Undecided,
}

/// The rule (see the module header). `read_start_ns`: when the read began
/// (`CLOCK_MONOTONIC`; the look follows its end); `first`: the first event of the process queued after its exec.
pub fn verdict(read_start_ns: u64, probe: Probe, first: Option<Later>) -> Verdict {
    match first {
        Some(Later::Exec) | Some(Later::Lost) => Verdict::Doubt,
        Some(Later::Exit { ts_ns, last }) if last && ts_ns > read_start_ns => Verdict::Keep,
        Some(Later::Exit { .. }) => Verdict::Doubt,
        None if probe == Probe::Outside => Verdict::Keep,
        None => Verdict::Undecided,
    }
}

/// The waits before each look (about 13 ms in all): a process just exec'd is running its
/// dynamic loader, so the first look waits too (a look at once finds it running, a read of
/// `/proc/PID/syscall` for nothing: bench/README.md), and it soon sleeps in a system call or
/// ends; a process waiting for a CPU also shows as running. A process that never sleeps keeps
/// the reader this long. Few looks: a tracker pays a wake-up for each, and nothing for a long
/// wait that an event of the process cuts short (the trackers take their queue before each
/// wait).
pub const WAITS: [Duration; 5] = [
    Duration::from_micros(700),
    Duration::from_micros(800),
    Duration::from_micros(1600),
    Duration::from_micros(3200),
    Duration::from_micros(6400),
];

/// Looks until the rule decides, once after each of `waits`: `look(wait)` waits up to `wait`
/// (a tracker may stop waiting as soon as an event of the process arrives), probes the
/// process, then takes the queue, and says what it found. Still undecided after the last
/// wait, the ebpf reader, which holds its ring meanwhile, takes it for a doubt. (The netlink
/// reader does not call it: it never waits, and applies [`verdict`] as events and looks come.)
pub fn judge(
    read_start_ns: u64,
    waits: &[Duration],
    mut look: impl FnMut(Duration) -> (Probe, Option<Later>),
) -> Verdict {
    for &wait in waits {
        let (probe, first) = look(wait);
        match verdict(read_start_ns, probe, first) {
            Verdict::Undecided => {}
            v => return v,
        }
    }
    Verdict::Undecided
}

#[cfg(test)]
mod tests {
    use super::*;

    const READ: u64 = 1_000;

    #[test]
    fn a_later_exec_or_a_loss_is_a_doubt_whatever_the_probe_says() {
        for probe in [Probe::Outside, Probe::Unsure] {
            assert_eq!(verdict(READ, probe, Some(Later::Exec)), Verdict::Doubt);
            assert_eq!(verdict(READ, probe, Some(Later::Lost)), Verdict::Doubt);
        }
    }

    #[test]
    fn an_end_after_the_read_began_keeps_it_an_end_before_does_not() {
        let end = |ts_ns, last| Some(Later::Exit { ts_ns, last });
        assert_eq!(
            verdict(READ, Probe::Unsure, end(READ + 1, true)),
            Verdict::Keep
        );
        // Ended before the read began: the read was of another process, or of none.
        assert_eq!(
            verdict(READ, Probe::Outside, end(READ, true)),
            Verdict::Doubt
        );
        assert_eq!(
            verdict(READ, Probe::Outside, end(READ - 1, true)),
            Verdict::Doubt
        );
        // The main thread ended while others run on: one of them may exec.
        assert_eq!(
            verdict(READ, Probe::Outside, end(READ + 1, false)),
            Verdict::Doubt
        );
    }

    #[test]
    fn nothing_queued_needs_the_process_asleep_outside_an_exec() {
        assert_eq!(verdict(READ, Probe::Outside, None), Verdict::Keep);
        assert_eq!(verdict(READ, Probe::Unsure, None), Verdict::Undecided);
        assert_eq!(Probe::of(Some(Some(61))), Probe::Outside, "wait4");
        assert_eq!(Probe::of(Some(Some(-1))), Probe::Outside, "a page fault");
        assert_eq!(Probe::of(Some(Some(59))), Probe::Unsure, "execve");
        assert_eq!(Probe::of(Some(Some(322))), Probe::Unsure, "execveat");
        assert_eq!(Probe::of(None), Probe::Unsure, "running");
    }

    /// The sequences of the netlink race: the read returned the next image because the
    /// process had exec'd again; the rule never keeps it, however the looks go, and leaves
    /// undecided what its waits did not settle.
    #[test]
    fn judging_looks_until_decided_and_doubts_at_the_end() {
        let mut looks = 0;
        let v = judge(READ, &WAITS, |_| {
            looks += 1;
            if looks < 3 {
                (Probe::Unsure, None)
            } else {
                (Probe::Unsure, Some(Later::Exec))
            }
        });
        assert_eq!((v, looks), (Verdict::Doubt, 3));
        let mut waited = Vec::new();
        let v = judge(READ, &WAITS[..2], |wait| {
            waited.push(wait);
            (Probe::Unsure, None)
        });
        assert_eq!((v, &waited[..]), (Verdict::Undecided, &WAITS[..2]));
        let v = judge(READ, &WAITS, |_| (Probe::Outside, None));
        assert_eq!(v, Verdict::Keep);
    }
}
