//! The accounts thread: receives taskstats exit records (every exiting thread on the machine)
//! and samples ste's cgroup's memory, until the session stops it.
//!
//! Owns the taskstats socket once registered and the sampling clock. Records go to the
//! session raw (`Msg::Tasks`, one message per drain), because only the session's ledger can
//! tell which belong to the tree; cgroup samples go out as events. On stop it drains what the
//! kernel already queued: every exit of the tree was queued before the tracker saw the
//! process end, so nothing of the tree is left behind. The session reads the group's end
//! figures meanwhile, beside the drain rather than after it, and waits for a word from the
//! thread, not for its exit (the end of a short run is mostly such waits: bench/README.md).

use super::group::Group;
use crate::bus::event::Event;
use crate::bus::sink::{Msg, Sink};
use crate::bus::tree::TreeWatcher;
use crate::kernel::taskstats::{Message, Received, TaskStats, Taskstats};
use crate::model::AccountEvent;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, sync_channel};
use std::time::Duration;

/// How often the group's usage is read and queued taskstats records are taken while the usage
/// moves; while it stands still the period doubles up to [`TICK_IDLE`] (a wake-up's CPU is
/// mostly the waking up itself: bench/README.md).
const TICK: Duration = Duration::from_millis(20);
const TICK_IDLE: Duration = Duration::from_millis(320);

/// The anon/file split (`memory.stat`) is read again when the usage has moved this much since
/// the last reading, or when [`STAT_EVERY`] has passed: reading it every tick cost a large
/// share of ste's CPU budget while a big command slept (bench/README.md), for a split that
/// cannot change much while the usage stands still.
const STAT_MOVE_BYTES: u64 = 256 << 10;
const STAT_EVERY: Duration = Duration::from_secs(1);

pub struct Listener {
    wake: OwnedFd,
    /// Set once the session has ended the socket's registration: the thread then closes it.
    taskstats_ended: Arc<AtomicBool>,
    /// Says the thread has drained and taken its last sample; it is let go, not joined, and
    /// sleeps until ste exits (waiting for its exit, or letting it end, was a thread's
    /// teardown more at the end of a run).
    done: Option<Receiver<()>>,
}

impl Listener {
    pub fn spawn(
        taskstats: Option<Taskstats>,
        group: Option<Arc<Group>>,
        sink: Sink,
        tree: Arc<dyn TreeWatcher>,
    ) -> std::io::Result<Listener> {
        let wake = crate::kernel::calls::eventfd()?;
        let thread_wake = wake.try_clone()?;
        let taskstats_ended = Arc::new(AtomicBool::new(false));
        let ended = Arc::clone(&taskstats_ended);
        let (done_tx, done) = sync_channel(1);
        std::thread::Builder::new()
            .name("ste-accounts".into())
            .spawn(move || {
                crate::launch::privilege::limit_or_say(
                    crate::launch::privilege::Role::Helper,
                    &sink,
                );
                run(taskstats, &ended, group, &sink, tree.as_ref(), &thread_wake);
                let _ = done_tx.send(());
                // Ended with the process, not here: the thread's own end (its stack given back,
                // the kernel's exit of a thread) came just as the session went on from this
                // word to the report, and took the CPU the session needed (bench/README.md).
                // ste runs one command and exits.
                loop {
                    std::thread::park();
                }
            })?;
        Ok(Listener {
            wake,
            taskstats_ended,
            done: Some(done),
        })
    }

    /// The session ended the taskstats socket's registration (the tracker reads what its
    /// records carried): no record of the tree will come, and the thread closes the socket at
    /// its next tick rather than drain it every tick. What is queued by then is other
    /// processes' (none of the tree had started), left unread.
    pub fn taskstats_ended(&self) {
        self.taskstats_ended.store(true, Ordering::Relaxed);
    }

    /// Asks the thread to drain the records already queued and take its last sample, then
    /// end; [`Listener::stop`] waits for that. The caller reads the group's end figures
    /// meanwhile.
    pub fn ask_to_stop(&self) {
        crate::kernel::calls::eventfd_notify(self.wake.as_fd());
    }

    /// Stops the thread (see [`Listener::ask_to_stop`]); every message it sent is in the
    /// channel when this returns (or it died, and sent what it did).
    pub fn stop(&mut self) {
        self.ask_to_stop();
        if let Some(done) = self.done.take() {
            let _ = done.recv();
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop();
    }
}

#[derive(Default)]
struct Maxima {
    usage: u64,
    anon: u64,
    file: u64,
    /// The usage and the time when `memory.stat` was last read.
    stat_read_at: Option<(u64, std::time::Instant)>,
    /// The usage at the previous reading.
    previous: Option<u64>,
}

/// Reads the group's memory; `last` reads the split whatever the usage did. Returns whether
/// the usage moved since the previous reading.
fn sample(group: &Group, sink: &Sink, max: &mut Maxima, last: bool) -> bool {
    let Some(usage) = group.usage_now() else {
        return false;
    };
    let moved = max
        .previous
        .replace(usage)
        .is_none_or(|p| p.abs_diff(usage) >= STAT_MOVE_BYTES);
    let stale = match max.stat_read_at {
        None => true,
        Some((at_usage, at)) => {
            usage.abs_diff(at_usage) >= STAT_MOVE_BYTES || at.elapsed() >= STAT_EVERY
        }
    };
    if !(stale || last || usage > max.usage) {
        return moved;
    }
    let Some(stat) = group.stat_now() else {
        return moved;
    };
    // The split is read after the usage: a group freeing its memory meanwhile (a process
    // exiting) would pair its highest usage with a split of much less. Such a pair is not
    // kept; the next tick reads both again.
    if group
        .usage_now()
        .is_some_and(|after| after.saturating_add(STAT_MOVE_BYTES) < usage)
    {
        return moved;
    }
    max.stat_read_at = Some((usage, std::time::Instant::now()));
    if usage > max.usage || stat.anon_bytes > max.anon || stat.file_bytes > max.file {
        max.usage = max.usage.max(usage);
        max.anon = max.anon.max(stat.anon_bytes);
        max.file = max.file.max(stat.file_bytes);
        sink.emit(Event::Accounting {
            event: AccountEvent::GroupSample {
                usage_bytes: usage,
                anon_bytes: stat.anon_bytes,
                file_bytes: stat.file_bytes,
            },
        });
    }
    moved
}

/// The thread group of a record's thread `pid`. From version 12 the record names it
/// (`ac_tgid`); before (Linux 5.10's records), only the message of a multi-threaded
/// process's last thread does, with the group's aggregate, and a single-threaded process's
/// thread is its own group. Another thread of a multi-threaded process is then taken for a
/// group of its own id, which is no process's: its record's mark reaches no process (the
/// group's last thread's record carries the mark of their common memory).
fn record_tgid(pid: u32, stats: &TaskStats, aggregate: Option<&(u32, TaskStats)>) -> i32 {
    stats
        .tgid
        .or(aggregate.map(|(tgid, _)| *tgid))
        .unwrap_or(pid) as i32
}

/// Collects the records of one drain, for one message.
#[allow(
    clippy::vec_box,
    reason = "the kernel reader boxes each record; the session moves each box on alone"
)]
fn forward(
    received: Received,
    sink: &Sink,
    tree: &dyn TreeWatcher,
    records: &mut Vec<Box<TaskStats>>,
) {
    match received {
        Received::Messages(ms) => records.extend(ms.into_iter().filter_map(|m| match m {
            Message::Stats {
                pid,
                stats,
                tgid_aggregate,
            } => {
                // The memory's high-water mark as the thread left: a process's own peak
                // when it was its last thread, which the sampler may lack (netlink, ebpf
                // before Linux 6.16).
                if stats.hiwater_rss_kb > 0 {
                    tree.exit_record(
                        record_tgid(pid, &stats, tgid_aggregate.as_deref()),
                        stats.hiwater_rss_kb * 1024,
                    );
                }
                Some(stats)
            }
            Message::Cut => {
                sink.emit(Event::Accounting {
                    event: AccountEvent::TaskstatsCut,
                });
                None
            }
            _ => None,
        })),
        Received::Overrun => sink.emit(Event::Accounting {
            event: AccountEvent::TaskstatsOverrun,
        }),
        Received::Timeout => {}
    }
}

fn run(
    mut ts: Option<Taskstats>,
    taskstats_ended: &AtomicBool,
    group: Option<Arc<Group>>,
    sink: &Sink,
    tree: &dyn TreeWatcher,
    wake: &OwnedFd,
) {
    let mut max = Maxima::default();
    // Only the group's memory and taskstats records need a clock; a group without its memory
    // controller is read once, at the end.
    let sampled = group.as_ref().filter(|g| g.has_memory());
    let mut tick = (sampled.is_some() || ts.is_some()).then_some(TICK);
    loop {
        // Records wait in the socket's 16 MiB buffer and are taken in batches: waking for
        // each one would cost the workload a context switch per exit on a busy machine.
        let stopped = wait_for(wake, tick);
        if ts.is_some() && taskstats_ended.load(Ordering::Relaxed) {
            ts = None;
            if sampled.is_none() {
                tick = None;
            }
        }
        if let Some(t) = ts.as_mut() {
            drain(t, sink, tree);
        }
        if stopped {
            break;
        }
        // The first sample one tick in: the thread starts while ste loads its tracker, and
        // a group sampled then holds nothing of the command yet.
        if let (Some(g), Some(t)) = (sampled, tick) {
            tick = Some(if sample(g, sink, &mut max, false) {
                TICK
            } else {
                (t * 2).min(TICK_IDLE)
            });
        }
    }
    if let Some(g) = sampled {
        sample(g, sink, &mut max, true);
    }
}

/// Forwards every record already queued.
fn drain(t: &mut Taskstats, sink: &Sink, tree: &dyn TreeWatcher) {
    let mut records = Vec::new();
    loop {
        match t.recv_now() {
            Ok(Received::Timeout) | Err(_) => break,
            Ok(r) => forward(r, sink, tree, &mut records),
        }
    }
    if !records.is_empty() {
        sink.send(Msg::Tasks {
            t_ns: sink.now_ns(),
            stats: records,
        });
    }
}

/// Waits up to `timeout` (`None`: for as long as it takes) for the eventfd; true once it was
/// written.
fn wait_for(wake: &OwnedFd, timeout: Option<Duration>) -> bool {
    crate::kernel::calls::poll_readable(wake.as_fd(), timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_without_ac_tgid_is_given_its_group_by_the_message() {
        // Version 12 on: the record names its group.
        let v16 = TaskStats {
            version: 16,
            pid: 12,
            tgid: Some(10),
            ..TaskStats::default()
        };
        assert_eq!(record_tgid(12, &v16, None), 10);
        // Linux 5.10's version 10: a multi-threaded process's last thread comes with the
        // group's aggregate; a single-threaded process's thread is its group.
        let v10 = TaskStats {
            version: 10,
            pid: 12,
            tgid: None,
            ..TaskStats::default()
        };
        let aggregate = (10, TaskStats::default());
        assert_eq!(record_tgid(12, &v10, Some(&aggregate)), 10);
        assert_eq!(record_tgid(12, &v10, None), 12);
    }
}
