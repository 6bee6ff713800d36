//! Each process's CPU from its tasks' last switches (`handle_last_switch` in
//! `bpf/ste.bpf.c`): a task's runtime is final only once it has left a CPU for the last time,
//! after its exit record and taskstats's were written (those miss the rest of its exit: the
//! teardown of the memory, the rest of its last time slice). A process's figure is complete
//! once every task it had has switched away for the last time: its first, and one for each
//! thread it forked, counted from the fork records. With it goes the sum of its tasks' lives up
//! to those same switches (from each fork record, or the release for the command's first
//! process), so that its CPU and its task time cover the same span.
//!
//! A lost record (a fork, an exit, a last switch) would make a figure short without a sign, so
//! a complete figure is held until the kernel's count of lost records has been read after it,
//! and sent only if nothing was lost meanwhile; after a loss, the processes under way get none.
//! A process that gets none keeps taskstats's figure, which says it is short; the run's note
//! says how many.
//!
//! Owns only that bookkeeping; the reader decodes the records, reads the loss count and sends
//! what this hands it. Must not read the ring or the maps.

use crate::model::{AccountEvent, Figures, LedgerSource};
use crate::source::account::split_runtime;
use foldhash::HashMap;

/// A task's figures as it left a CPU for the last time (nanoseconds): its runtime, and its
/// user and system ticks, which split it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Switched {
    pub(super) runtime_ns: u64,
    pub(super) utime_ns: u64,
    pub(super) stime_ns: u64,
}

/// A process whose figure is not complete yet.
#[derive(Default, Debug)]
struct Pending {
    /// Tasks the process had: its first, and each thread it forked.
    tasks: u32,
    /// Of those, the ones seen leave a CPU for the last time.
    switched: u32,
    /// Its last thread's exit record is in: no task of it is left to start.
    ended: bool,
    runtime_ns: u64,
    utime_ns: u64,
    stime_ns: u64,
    /// The run times at which its tasks started, and at which they switched away for the last
    /// time, summed: their lives are the difference once all have.
    starts_ns: u64,
    ends_ns: u64,
}

/// The processes of the tree whose tasks' last switches are being summed.
#[derive(Default, Debug)]
pub(super) struct LastSwitches {
    pending: HashMap<i32, Pending>,
    /// Complete, not yet sent: waiting for the next read of the loss count.
    held: Vec<AccountEvent>,
    /// Processes of the tree with no figure from here (lost records, or a last switch not seen
    /// by the end of the run).
    pub(super) without: u64,
}

impl LastSwitches {
    /// A process of the tree started at run time `at_ns` (its fork record, or the root at the
    /// release, time zero).
    pub(super) fn process_started(&mut self, tgid: i32, at_ns: u64) {
        let old = self.pending.insert(
            tgid,
            Pending {
                tasks: 1,
                starts_ns: at_ns,
                ..Default::default()
            },
        );
        // A reused pid whose former process never completed.
        if old.is_some_and(|p| p.ended) {
            self.without += 1;
        }
    }

    /// Process `tgid` forked a thread at run time `at_ns`.
    pub(super) fn thread_started(&mut self, tgid: i32, at_ns: u64) {
        if let Some(p) = self.pending.get_mut(&tgid) {
            p.tasks += 1;
            p.starts_ns = p.starts_ns.saturating_add(at_ns);
        }
    }

    /// The last thread of `tgid` exited.
    pub(super) fn ended(&mut self, tgid: i32) {
        if let Some(p) = self.pending.get_mut(&tgid) {
            p.ended = true;
            self.complete(tgid);
        }
    }

    /// A task of `tgid` left a CPU for the last time at run time `at_ns` with these figures
    /// (nanoseconds).
    pub(super) fn switched(&mut self, tgid: i32, at_ns: u64, cpu: Switched) {
        if let Some(p) = self.pending.get_mut(&tgid) {
            p.switched += 1;
            p.runtime_ns += cpu.runtime_ns;
            p.utime_ns += cpu.utime_ns;
            p.stime_ns += cpu.stime_ns;
            p.ends_ns = p.ends_ns.saturating_add(at_ns);
            self.complete(tgid);
        }
    }

    fn complete(&mut self, tgid: i32) {
        let Some(p) = self.pending.get(&tgid) else {
            return;
        };
        if !p.ended || p.switched < p.tasks {
            return;
        }
        let Some(p) = self.pending.remove(&tgid) else {
            return;
        };
        if p.switched > p.tasks {
            // More tasks than forks seen: a fork record was lost.
            self.without += 1;
            return;
        }
        // Split as getrusage() splits a process's runtime: in the proportion of its ticks.
        let (user_ns, sys_ns) = split_runtime(p.runtime_ns, p.utime_ns, p.stime_ns);
        self.held.push(AccountEvent::Ledger {
            tgid,
            // Just ended: the newest process of that pid.
            start_ns: None,
            source: LedgerSource::LastSwitch,
            figures: Box::new(Figures {
                user_ns: Some(user_ns),
                sys_ns: Some(sys_ns),
                cpu_ns: Some(p.runtime_ns),
                task_time_ns: Some(p.ends_ns.saturating_sub(p.starts_ns)),
                ..Default::default()
            }),
        });
    }

    /// Whether a figure waits for the loss count to be read.
    pub(super) fn holds(&self) -> bool {
        !self.held.is_empty()
    }

    /// The loss count was read after the held figures were complete: with no loss they are
    /// sent (returned); after one, they and every process under way are dropped.
    pub(super) fn checked(&mut self, lost: bool) -> Vec<AccountEvent> {
        if !lost {
            return std::mem::take(&mut self.held);
        }
        // The live ones may have lost a thread's records too: no figure for them either.
        self.without += (self.held.len() + self.pending.len()) as u64;
        self.held.clear();
        self.pending.clear();
        Vec::new()
    }

    /// Whether a process has ended whose tasks have not all left a CPU yet.
    pub(super) fn waiting(&self) -> bool {
        self.pending.values().any(|p| p.ended)
    }

    /// The run is over: the ended processes still waiting get no figure.
    pub(super) fn finish(&mut self) {
        self.without += self.pending.values().filter(|p| p.ended).count() as u64;
        self.pending.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sw(runtime_ns: u64, utime_ns: u64, stime_ns: u64) -> Switched {
        Switched {
            runtime_ns,
            utime_ns,
            stime_ns,
        }
    }

    fn cpu(e: &AccountEvent) -> (i32, Option<u64>, Option<u64>, Option<u64>) {
        match e {
            AccountEvent::Ledger {
                tgid,
                source: LedgerSource::LastSwitch,
                figures,
                start_ns: None,
            } => (*tgid, figures.cpu_ns, figures.user_ns, figures.sys_ns),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_process_is_complete_once_each_of_its_tasks_switched_away() {
        let mut l = LastSwitches::default();
        l.process_started(10, 0);
        l.thread_started(10, 0);
        l.thread_started(10, 0);
        // Two threads end first; the last thread's exit, then its last switch.
        l.switched(10, 0, sw(100, 1, 0));
        l.switched(10, 0, sw(200, 0, 1));
        l.ended(10);
        assert!(!l.holds() && l.waiting());
        l.switched(10, 0, sw(700, 3, 1));
        assert!(l.holds() && !l.waiting());
        let sent = l.checked(false);
        assert_eq!(sent.len(), 1);
        // 1,000 ns in all, split 4:2 as the ticks were.
        let (tgid, cpu_ns, user, sys) = cpu(&sent[0]);
        assert_eq!((tgid, cpu_ns), (10, Some(1000)));
        assert_eq!(user.unwrap() + sys.unwrap(), 1000);
        assert_eq!(user, Some(667));
        assert_eq!(l.without, 0);
    }

    /// The task time runs to the same switches as the CPU: each task from its start (the
    /// release for the first process) to its last switch.
    #[test]
    fn the_task_time_ends_at_the_last_switches() {
        let mut l = LastSwitches::default();
        l.process_started(10, 0);
        l.thread_started(10, 1_000);
        l.switched(10, 4_000, sw(100, 1, 0));
        l.ended(10);
        l.switched(10, 9_000, sw(500, 1, 0));
        let task_time = |l: &mut LastSwitches| match l.checked(false).as_slice() {
            [AccountEvent::Ledger { figures, .. }] => figures.task_time_ns,
            other => panic!("{other:?}"),
        };
        // (4,000 − 1,000) + (9,000 − 0)
        assert_eq!(task_time(&mut l), Some(12_000));
        // A process forked later starts at its fork record.
        l.process_started(11, 20_000);
        l.ended(11);
        l.switched(11, 25_000, sw(100, 1, 0));
        assert_eq!(task_time(&mut l), Some(5_000));
    }

    #[test]
    fn a_process_with_a_missing_switch_gets_no_figure() {
        let mut l = LastSwitches::default();
        l.process_started(10, 0);
        l.thread_started(10, 0);
        l.ended(10);
        l.switched(10, 0, sw(100, 1, 0));
        l.finish();
        assert!(!l.holds());
        assert_eq!(l.without, 1);
    }

    #[test]
    fn more_tasks_than_forks_means_a_lost_fork() {
        let mut l = LastSwitches::default();
        l.process_started(10, 0);
        l.switched(10, 0, sw(100, 1, 0));
        l.switched(10, 0, sw(100, 1, 0));
        l.ended(10);
        // Complete at the first switch would have been wrong only without the exit: the
        // process had not ended then.
        assert_eq!((l.holds(), l.without), (false, 1));
    }

    #[test]
    fn a_loss_drops_what_is_held_and_under_way() {
        let mut l = LastSwitches::default();
        for p in [10, 11, 12] {
            l.process_started(p, 0);
        }
        l.ended(10);
        l.switched(10, 0, sw(100, 1, 0));
        l.ended(11);
        assert!(l.holds());
        assert!(l.checked(true).is_empty());
        // 10 was complete, 11 had ended, 12 is alive: none gets a figure.
        assert_eq!(l.without, 3);
        l.switched(12, 0, sw(100, 1, 0));
        l.ended(12);
        assert!(!l.holds());
        // A process started after the loss is summed again.
        l.process_started(13, 0);
        l.ended(13);
        l.switched(13, 0, sw(5, 1, 0));
        assert_eq!(l.checked(false).len(), 1);
    }

    #[test]
    fn records_of_processes_outside_the_tree_are_ignored() {
        let mut l = LastSwitches::default();
        l.thread_started(99, 0);
        l.switched(99, 0, sw(100, 1, 0));
        l.ended(99);
        assert!(!l.holds() && !l.waiting());
        assert_eq!(l.without, 0);
    }
}
