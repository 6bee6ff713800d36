//! Each process's ledger from its tasks' last switches (`handle_last_switch` in
//! `bpf/ste.bpf.c`): a task's runtime is final only once it has left a CPU for the last time,
//! after its exit record and taskstats's were written (those miss the rest of its exit: the
//! teardown of the memory, the rest of its last time slice). A process's figure is complete
//! once every task it had has switched away for the last time: its first, and one for each
//! thread it forked, counted from the fork records. With it goes the sum of its tasks' lives up
//! to those same switches (from each fork record, or the release for the command's first
//! process), so that its CPU and its task time cover the same span. When the kernel's BTF has
//! the fields (`Loaded::figures`), each record also carries the rest of what taskstats's exit
//! record gives (run-queue and delay-accounting waits, faults, context switches, I/O), read as
//! final, and the process's last exit record its peaks: the figure is then the whole ledger,
//! and ste listens to no taskstats records (`account::Session::declare`).
//!
//! A lost record (a fork, an exit, a last switch) would make a figure short without a sign, so
//! a complete figure is held until the kernel's count of lost records has been read after it,
//! and sent only if nothing was lost meanwhile; after a loss, the processes under way get none
//! (the run's note says how many).
//!
//! Owns only that bookkeeping; the reader decodes the records, reads the loss count and sends
//! what this hands it. Must not read the ring or the maps.

use crate::model::{AccountEvent, Figures, LedgerSource};
use crate::source::account::split_runtime;
use foldhash::HashMap;

/// A task's figures as it left a CPU for the last time: its runtime and its user and system
/// ticks, which split it (nanoseconds); with the whole ledger, its run-queue wait, context
/// switches, faults, I/O counters and delay-accounting waits (zero without).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Switched {
    pub(super) runtime_ns: u64,
    pub(super) utime_ns: u64,
    pub(super) stime_ns: u64,
    pub(super) run_delay_ns: u64,
    pub(super) nvcsw: u64,
    pub(super) nivcsw: u64,
    pub(super) min_flt: u64,
    pub(super) maj_flt: u64,
    pub(super) rchar: u64,
    pub(super) wchar: u64,
    pub(super) read_bytes: u64,
    pub(super) write_bytes: u64,
    pub(super) blkio_delay_ns: u64,
    pub(super) reclaim_delay_ns: u64,
}

impl Switched {
    fn add(&mut self, o: &Switched) {
        let pairs = [
            (&mut self.runtime_ns, o.runtime_ns),
            (&mut self.utime_ns, o.utime_ns),
            (&mut self.stime_ns, o.stime_ns),
            (&mut self.run_delay_ns, o.run_delay_ns),
            (&mut self.nvcsw, o.nvcsw),
            (&mut self.nivcsw, o.nivcsw),
            (&mut self.min_flt, o.min_flt),
            (&mut self.maj_flt, o.maj_flt),
            (&mut self.rchar, o.rchar),
            (&mut self.wchar, o.wchar),
            (&mut self.read_bytes, o.read_bytes),
            (&mut self.write_bytes, o.write_bytes),
            (&mut self.blkio_delay_ns, o.blkio_delay_ns),
            (&mut self.reclaim_delay_ns, o.reclaim_delay_ns),
        ];
        for (sum, v) in pairs {
            *sum = sum.saturating_add(v);
        }
    }
}

/// The peaks of a process's memory, read in the kernel by its last thread's exit record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Peaks {
    pub(super) rss_bytes: u64,
    pub(super) vm_bytes: u64,
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
    /// Its tasks' figures, summed.
    sums: Switched,
    /// Its memory's peaks, from its last thread's exit record (none when the memory was gone).
    peaks: Option<Peaks>,
    /// The run times at which its tasks started, and at which they switched away for the last
    /// time, summed: their lives are the difference once all have.
    starts_ns: u64,
    ends_ns: u64,
}

/// The processes of the tree whose tasks' last switches are being summed.
#[derive(Default, Debug)]
pub(super) struct LastSwitches {
    /// Whether the records carry each task's whole ledger, not only its CPU.
    figures: bool,
    pending: HashMap<i32, Pending>,
    /// Complete, not yet sent: waiting for the next read of the loss count.
    held: Vec<AccountEvent>,
    /// Processes of the tree with no figure from here (lost records, or a last switch not seen
    /// by the end of the run).
    pub(super) without: u64,
}

impl LastSwitches {
    /// Sums of CPU alone, or (`figures`) of each task's whole ledger.
    pub(super) fn new(figures: bool) -> LastSwitches {
        LastSwitches {
            figures,
            ..Default::default()
        }
    }

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

    /// The last thread of `tgid` exited, its memory's peaks read then when it still had it.
    pub(super) fn ended(&mut self, tgid: i32, peaks: Option<Peaks>) {
        if let Some(p) = self.pending.get_mut(&tgid) {
            p.ended = true;
            p.peaks = peaks;
            self.complete(tgid);
        }
    }

    /// A task of `tgid` left a CPU for the last time at run time `at_ns` with these figures
    /// (nanoseconds).
    pub(super) fn switched(&mut self, tgid: i32, at_ns: u64, cpu: Switched) {
        if let Some(p) = self.pending.get_mut(&tgid) {
            p.switched += 1;
            p.sums.add(&cpu);
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
        let t = &p.sums;
        let (user_ns, sys_ns) = split_runtime(t.runtime_ns, t.utime_ns, t.stime_ns);
        let mut figures = Figures {
            user_ns: Some(user_ns),
            sys_ns: Some(sys_ns),
            cpu_ns: Some(t.runtime_ns),
            task_time_ns: Some(p.ends_ns.saturating_sub(p.starts_ns)),
            ..Default::default()
        };
        if self.figures {
            figures = Figures {
                run_queue_ns: Some(t.run_delay_ns),
                blkio_delay_ns: Some(t.blkio_delay_ns),
                swap_reclaim_delay_ns: Some(t.reclaim_delay_ns),
                peak_rss_bytes: p.peaks.map(|m| m.rss_bytes),
                peak_vm_bytes: p.peaks.map(|m| m.vm_bytes),
                minor_faults: Some(t.min_flt),
                major_faults: Some(t.maj_flt),
                voluntary_switches: Some(t.nvcsw),
                involuntary_switches: Some(t.nivcsw),
                read_bytes: Some(t.read_bytes),
                write_bytes: Some(t.write_bytes),
                read_char_bytes: Some(t.rchar),
                write_char_bytes: Some(t.wchar),
                ..figures
            };
        }
        self.held.push(AccountEvent::Ledger {
            tgid,
            // Just ended: the newest process of that pid.
            start_ns: None,
            source: LedgerSource::LastSwitch,
            figures: Box::new(figures),
        });
    }

    /// Whether the figures are each task's whole ledger, not only its CPU.
    pub(super) fn whole(&self) -> bool {
        self.figures
    }

    /// Whether a figure waits for the loss count to be read.
    pub(super) fn holds(&self) -> bool {
        !self.held.is_empty()
    }

    /// The loss count was read after the held figures were complete: with no loss they are
    /// sent (returned); after one, they and every process under way are dropped. The held
    /// list keeps its room: it fills again by the next check (a fresh one was regrown, and
    /// reallocated, at every drain of a fork storm).
    pub(super) fn checked(&mut self, lost: bool) -> std::vec::Drain<'_, AccountEvent> {
        if lost {
            // The live ones may have lost a thread's records too: no figure for them either.
            self.without += (self.held.len() + self.pending.len()) as u64;
            self.held.clear();
            self.pending.clear();
        }
        self.held.drain(..)
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
            ..Default::default()
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
        l.ended(10, None);
        assert!(!l.holds() && l.waiting());
        l.switched(10, 0, sw(700, 3, 1));
        assert!(l.holds() && !l.waiting());
        let sent: Vec<_> = l.checked(false).collect();
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
        l.ended(10, None);
        l.switched(10, 9_000, sw(500, 1, 0));
        let task_time = |l: &mut LastSwitches| match l.checked(false).as_slice() {
            [AccountEvent::Ledger { figures, .. }] => figures.task_time_ns,
            other => panic!("{other:?}"),
        };
        // (4,000 − 1,000) + (9,000 − 0)
        assert_eq!(task_time(&mut l), Some(12_000));
        // A process forked later starts at its fork record.
        l.process_started(11, 20_000);
        l.ended(11, None);
        l.switched(11, 25_000, sw(100, 1, 0));
        assert_eq!(task_time(&mut l), Some(5_000));
    }

    #[test]
    fn a_process_with_a_missing_switch_gets_no_figure() {
        let mut l = LastSwitches::default();
        l.process_started(10, 0);
        l.thread_started(10, 0);
        l.ended(10, None);
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
        l.ended(10, None);
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
        l.ended(10, None);
        l.switched(10, 0, sw(100, 1, 0));
        l.ended(11, None);
        assert!(l.holds());
        assert_eq!(l.checked(true).count(), 0);
        // 10 was complete, 11 had ended, 12 is alive: none gets a figure.
        assert_eq!(l.without, 3);
        l.switched(12, 0, sw(100, 1, 0));
        l.ended(12, None);
        assert!(!l.holds());
        // A process started after the loss is summed again.
        l.process_started(13, 0);
        l.ended(13, None);
        l.switched(13, 0, sw(5, 1, 0));
        assert_eq!(l.checked(false).len(), 1);
    }

    #[test]
    fn records_of_processes_outside_the_tree_are_ignored() {
        let mut l = LastSwitches::default();
        l.thread_started(99, 0);
        l.switched(99, 0, sw(100, 1, 0));
        l.ended(99, None);
        assert!(!l.holds() && !l.waiting());
        assert_eq!(l.without, 0);
    }

    /// With the whole ledger, a process's figure sums its tasks' counters and takes the peaks
    /// of its last exit record; without, it has the CPU alone, and nothing it did not read
    /// stands as 0.
    #[test]
    fn the_whole_ledger_sums_every_task_and_takes_the_exit_peaks() {
        let task = |runtime_ns, k: u64| Switched {
            runtime_ns,
            utime_ns: 1,
            stime_ns: 1,
            run_delay_ns: 10 * k,
            nvcsw: k,
            nivcsw: 2 * k,
            min_flt: 100 * k,
            maj_flt: k,
            rchar: 1000 * k,
            wchar: 2000 * k,
            read_bytes: 4096 * k,
            write_bytes: 8192 * k,
            blkio_delay_ns: 7 * k,
            reclaim_delay_ns: 3 * k,
        };
        let peaks = Peaks {
            rss_bytes: 5 << 20,
            vm_bytes: 9 << 20,
        };
        for figures in [true, false] {
            let mut l = LastSwitches::new(figures);
            l.process_started(10, 0);
            l.thread_started(10, 0);
            l.switched(10, 0, task(100, 1));
            l.ended(10, Some(peaks));
            l.switched(10, 0, task(300, 2));
            let f = match l.checked(false).as_slice() {
                [AccountEvent::Ledger { figures, .. }] => **figures,
                other => panic!("{other:?}"),
            };
            assert_eq!(f.cpu_ns, Some(400));
            if figures {
                assert_eq!(f.run_queue_ns, Some(30));
                assert_eq!(
                    (f.voluntary_switches, f.involuntary_switches),
                    (Some(3), Some(6))
                );
                assert_eq!((f.minor_faults, f.major_faults), (Some(300), Some(3)));
                assert_eq!(
                    (f.read_char_bytes, f.write_char_bytes),
                    (Some(3000), Some(6000))
                );
                assert_eq!(
                    (f.read_bytes, f.write_bytes),
                    (Some(3 * 4096), Some(3 * 8192))
                );
                assert_eq!(
                    (f.blkio_delay_ns, f.swap_reclaim_delay_ns),
                    (Some(21), Some(9))
                );
                assert_eq!(
                    (f.peak_rss_bytes, f.peak_vm_bytes),
                    (Some(5 << 20), Some(9 << 20))
                );
            } else {
                let cpu_only = Figures {
                    user_ns: f.user_ns,
                    sys_ns: f.sys_ns,
                    cpu_ns: f.cpu_ns,
                    task_time_ns: f.task_time_ns,
                    ..Default::default()
                };
                assert_eq!(f, cpu_only);
            }
        }
        // A process whose memory was gone at its exit record has no peaks from here.
        let mut l = LastSwitches::new(true);
        l.process_started(11, 0);
        l.ended(11, None);
        l.switched(11, 0, task(5, 1));
        match l.checked(false).as_slice() {
            [AccountEvent::Ledger { figures, .. }] => {
                assert_eq!(
                    (figures.peak_rss_bytes, figures.peak_vm_bytes),
                    (None, None)
                );
                assert_eq!(figures.minor_faults, Some(100));
            }
            other => panic!("{other:?}"),
        }
    }
}
