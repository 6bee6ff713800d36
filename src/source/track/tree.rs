//! The live tree as seen by a tracker that does not stop tasks (netlink, ebpf): which processes
//! and threads are alive, the `Fork`/`Exit` events that change it, and the rebuild from /proc
//! after the kernel dropped events.
//!
//! Owns the tracker-side bookkeeping those trackers share; each tracker decodes its own kernel
//! source and decides what to tell the tree. It tells the sampler about processes starting,
//! exec'ing and ending. It never decides argv or exit statuses: the tracker passes them in.

use crate::bus::event::Event;
use crate::bus::sink::{Batch, Sink};
use crate::bus::tree::TreeWatcher;
use crate::kernel::proc::ProcFs;
use crate::model::Termination;
use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use std::sync::Arc;

pub struct Tree {
    ste_pid: i32,
    /// The run's channel. A tracker that batches (see [`Tree::batch`]) emits through
    /// [`Tree::emit_at`] only, so its events keep their order.
    pub sink: Sink,
    /// Fork and exit events held back until an event the session shows live comes (an exec),
    /// or the tracker flushes them (see [`Tree::unsent_since`]).
    batch: Option<Batch>,
    /// Run time of the oldest event held in `batch`.
    unsent_since: Option<u64>,
    pub sampler: Arc<dyn TreeWatcher>,
    pub procfs: ProcFs,
    /// Live tasks of each process in the tree.
    tasks: HashMap<i32, HashSet<i32>>,
    /// Live task → its process.
    owner: HashMap<i32, i32>,
    /// Processes that exec'd since the tracker last called [`Tree::handled`].
    execs: Vec<i32>,
}

impl Tree {
    /// A tree holding the root (announced by `Event::Start`, so no `Fork` is emitted for it).
    pub fn new(root: i32, sink: Sink, sampler: Arc<dyn TreeWatcher>) -> Tree {
        let mut tree = Tree {
            ste_pid: std::process::id() as i32,
            sink,
            batch: None,
            unsent_since: None,
            sampler,
            procfs: ProcFs::default(),
            tasks: HashMap::new(),
            owner: HashMap::new(),
            execs: Vec::new(),
        };
        tree.tasks.insert(root, HashSet::from_iter([root]));
        tree.owner.insert(root, root);
        tree.sampler.root_started(root);
        tree
    }

    /// Holds events back from here on, until the tracker calls [`Tree::flush`] (it does within
    /// its bound on the live view's delay) or 256 are held: the session then wakes a few times
    /// in that bound instead of once per event, and the tracker's thread does not pay a wake-up
    /// of the session per process.
    pub fn batch(&mut self) {
        self.batch = Some(Batch::new(self.sink.clone()));
    }

    /// As [`Tree::batch`], but the batches wait for the session's next look
    /// ([`Batch::unhurried`]).
    pub fn batch_unhurried(&mut self) {
        self.batch = Some(Batch::unhurried(self.sink.clone()));
    }

    /// Emits an event stamped `t`: at once, or held (a batching tree).
    pub fn emit_at(&mut self, t: u64, event: Event) {
        let Some(batch) = &mut self.batch else {
            self.sink.emit_at(t, event);
            return;
        };
        batch.emit_at(t, event);
        self.unsent_since.get_or_insert(t);
    }

    /// Emits an event stamped now: at once, or held (a batching tree).
    pub fn emit(&mut self, event: Event) {
        let t = self.sink.now_ns();
        self.emit_at(t, event);
    }

    /// Sends what is held.
    pub fn flush(&mut self) {
        if let Some(batch) = &mut self.batch {
            batch.flush();
        }
        self.unsent_since = None;
    }

    /// Run time of the oldest event held back, if any: the tracker flushes it within a bound.
    pub fn unsent_since(&self) -> Option<u64> {
        self.unsent_since
    }

    pub fn ste_pid(&self) -> i32 {
        self.ste_pid
    }

    /// No process of the tree is known to be alive.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    pub fn has_process(&self, tgid: i32) -> bool {
        self.tasks.contains_key(&tgid)
    }

    /// Live threads of `tgid`.
    pub fn threads(&self, tgid: i32) -> usize {
        self.tasks.get(&tgid).map_or(0, HashSet::len)
    }

    /// A new process `pid`, forked by `parent_tgid`.
    pub fn add_process(&mut self, t: u64, parent_tgid: i32, pid: i32) {
        self.tasks.insert(pid, HashSet::from_iter([pid]));
        self.owner.insert(pid, pid);
        self.emit_at(
            t,
            Event::Fork {
                parent_tgid,
                child_tid: pid,
                child_tgid: pid,
            },
        );
        self.sampler.process_started(pid, parent_tgid);
    }

    /// A process of the tree whose fork its tracker never saw (the record was lost), known
    /// from its exec on: no `Fork` is emitted, so the Run lists it from its exec, its parent
    /// unknown.
    pub fn adopt(&mut self, tgid: i32) {
        self.tasks.insert(tgid, HashSet::from_iter([tgid]));
        self.owner.insert(tgid, tgid);
        // No process of the tree is pid 0: the sampler knows no parent.
        self.sampler.process_started(tgid, 0);
    }

    /// A new thread `tid` of the known process `tgid`; ignored for processes outside the tree.
    pub fn add_thread(&mut self, t: u64, tgid: i32, tid: i32) {
        if let Some(tids) = self.tasks.get_mut(&tgid) {
            tids.insert(tid);
            self.owner.insert(tid, tgid);
            self.emit_at(
                t,
                Event::Fork {
                    parent_tgid: tgid,
                    child_tid: tid,
                    child_tgid: tgid,
                },
            );
        }
    }

    /// `tgid` exec'd: afterwards it has exactly one thread, its leader (a thread that exec'd
    /// took the leader's id and ends no thread of its own). Returns `None` for a process
    /// outside the tree, else the other thread that was alive, when exactly one was (the one
    /// that exec'd, for a tracker that is not told).
    pub fn exec(&mut self, tgid: i32) -> Option<Option<i32>> {
        let tids = self.tasks.get_mut(&tgid)?;
        tids.remove(&tgid);
        let former = if tids.len() == 1 {
            tids.iter().next().copied()
        } else {
            None
        };
        for tid in tids.drain() {
            self.owner.remove(&tid);
        }
        tids.insert(tgid);
        self.owner.insert(tgid, tgid);
        self.sampler.process_exec(tgid);
        self.execs.push(tgid);
        Some(former)
    }

    /// The tracker has handled what it read (a drain of its ring, an event): the sampler asks
    /// for a round of the new images among it that are still alive. Every tracker that calls
    /// [`Tree::exec`] calls this after, or new images are read only when the tree is due.
    pub fn handled(&mut self) {
        if !self.execs.is_empty() {
            self.sampler.execs_handled(&self.execs);
            self.execs.clear();
        }
    }

    /// The process of the live task `tid`, if it is in the tree.
    pub fn owner(&self, tid: i32) -> Option<i32> {
        self.owner.get(&tid).copied()
    }

    /// The task `tid` ended; emits its `Exit`. Returns false for a task outside the tree.
    pub fn exit(&mut self, t: u64, tid: i32, status: Option<Termination>) -> bool {
        let Some(tgid) = self.owner.remove(&tid) else {
            return false;
        };
        self.emit_at(t, Event::Exit { tid, tgid, status });
        self.task_gone(tgid, tid);
        true
    }

    fn task_gone(&mut self, tgid: i32, tid: i32) {
        if let Some(tids) = self.tasks.get_mut(&tgid) {
            tids.remove(&tid);
            if tids.is_empty() {
                self.tasks.remove(&tgid);
                self.sampler.process_ended(tgid);
            }
        }
    }

    /// The run is over: the sampler forgets what is left.
    pub fn finish(&self) {
        for tgid in self.tasks.keys() {
            self.sampler.process_ended(*tgid);
        }
    }

    /// Rebuilds the tree from /proc at once: [`Tree::scan`], [`Tree::add_found`] and
    /// [`Tree::end_gone`] with nothing between them (see those for a tracker whose events may
    /// still be on their way while /proc is read).
    pub fn resync(&mut self) -> Resynced {
        let scan = self.scan();
        let found = self.add_found(&scan);
        let (missed, zombie_leaders) = self.end_gone(&scan);
        Resynced {
            found,
            missed,
            zombie_leaders,
        }
    }

    /// Reads what /proc shows of the tree against what ste knows: the processes and threads
    /// it does not know (under the known processes and under ste itself, the subreaper of
    /// orphans), and the known tasks /proc no longer shows. Changes nothing.
    ///
    /// A zombie ste does not know is not new: its end was seen (the tree forgot it) and its
    /// parent has not reaped it yet; a process whose fork and end were both lost is beyond a
    /// rebuild (counted in the loss the tracker reports).
    pub fn scan(&mut self) -> Scan {
        let t = self.sink.now_ns();
        let mut scan = Scan {
            t,
            ..Scan::default()
        };
        let Ok(pids) = self.procfs.pids() else {
            return scan;
        };
        // One read of each process's stat: its parent, and whether it is a zombie.
        let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
        let mut zombies: HashSet<i32> = HashSet::new();
        for &pid in &pids {
            match self.procfs.stat(pid) {
                Ok(Some(stat)) if stat.state == b'Z' => {
                    zombies.insert(pid);
                }
                Ok(Some(stat)) => children.entry(stat.ppid).or_default().push(pid),
                _ => {}
            }
        }
        let mut frontier: Vec<i32> = self.tasks.keys().copied().chain([self.ste_pid]).collect();
        while let Some(parent) = frontier.pop() {
            for &child in children.get(&parent).map(Vec::as_slice).unwrap_or(&[]) {
                if !self.tasks.contains_key(&child) {
                    scan.new_processes.push((parent, child));
                }
                frontier.push(child);
            }
        }
        let present: HashSet<i32> = pids.into_iter().collect();
        let mut known: Vec<i32> = self.tasks.keys().copied().collect();
        known.sort_unstable();
        for tgid in known {
            // A process listed but gone before its tasks were read is gone.
            let live: HashSet<i32> = if present.contains(&tgid) {
                self.procfs
                    .tasks(tgid)
                    .map(|v| v.into_iter().collect())
                    .unwrap_or_default()
            } else {
                HashSet::new()
            };
            // A leader that ended while its threads run stays listed, as a zombie, until the
            // last of them ends; if its exit event was among the lost ones, the tracker must
            // know it ended, or the process's end (and status) would never come.
            if live.len() > 1 && live.contains(&tgid) && zombies.contains(&tgid) {
                scan.zombie_leaders.push(tgid);
            }
            let tracked = &self.tasks[&tgid];
            for &tid in live.iter().filter(|tid| !tracked.contains(tid)) {
                scan.new_threads.push((tgid, tid));
            }
            // The leader last, so the process ends with it.
            let mut gone: Vec<i32> = tracked
                .iter()
                .copied()
                .filter(|tid| !live.contains(tid))
                .collect();
            gone.sort_by_key(|&tid| (tid == tgid, tid));
            scan.gone.extend(gone.into_iter().map(|tid| (tgid, tid)));
        }
        scan
    }

    /// Adds what `scan` found that ste still does not know; returns how many processes.
    pub fn add_found(&mut self, scan: &Scan) -> u64 {
        let mut found = 0;
        for &(parent, pid) in &scan.new_processes {
            if !self.tasks.contains_key(&pid) {
                self.add_process(scan.t, parent, pid);
                found += 1;
            }
        }
        for &(tgid, tid) in &scan.new_threads {
            if self.tasks.contains_key(&tgid) && !self.owner.contains_key(&tid) {
                self.add_thread(scan.t, tgid, tid);
            }
        }
        found
    }

    /// Ends the tasks `scan` found gone that ste still holds alive: a tracker that read the
    /// events written meanwhile ends only those whose end was lost. Returns the processes so
    /// ended (their exit was missed) and the zombie leaders the tracker must treat as exited.
    pub fn end_gone(&mut self, scan: &Scan) -> (u64, Vec<i32>) {
        let mut missed = 0;
        for &(tgid, tid) in &scan.gone {
            if self.owner.get(&tid) != Some(&tgid) {
                continue; // its end came meanwhile
            }
            let last = self.threads(tgid) == 1;
            self.exit(scan.t, tid, None);
            if last {
                missed += 1;
            }
        }
        let zombie_leaders = scan
            .zombie_leaders
            .iter()
            .copied()
            .filter(|tgid| self.tasks.contains_key(tgid))
            .collect();
        (missed, zombie_leaders)
    }

    /// Events were lost (`overruns` times, `events_at_most` of them when the source can tell,
    /// `None` when it cannot; no overrun for a loss only the end of the run shows): rebuilds
    /// the tree from /proc and reports the loss with what the rebuild found, unless there is
    /// nothing to report. Returns the zombie leaders the tracker must treat as exited.
    pub fn recover(&mut self, overruns: u64, events_at_most: Option<u64>) -> Vec<i32> {
        let r = self.resync();
        self.report_loss(overruns, events_at_most, r.found, r.missed);
        r.zombie_leaders
    }

    /// Reports a loss and what the rebuild after it found, unless there is nothing to report.
    pub fn report_loss(
        &mut self,
        overruns: u64,
        events_at_most: Option<u64>,
        found: u64,
        missed: u64,
    ) {
        if overruns > 0 || events_at_most.is_some_and(|n| n > 0) || found > 0 || missed > 0 {
            let t = self.sink.now_ns();
            self.emit_at(
                t,
                Event::Lost {
                    overruns,
                    events_at_most,
                    found_by_resync: found,
                    exits_missed: missed,
                    argv_doubtful: 0,
                },
            );
        }
    }
}

/// What /proc showed of the tree against what ste knew (see [`Tree::scan`]).
#[derive(Debug, Default, PartialEq)]
pub struct Scan {
    /// When /proc was read (run time).
    t: u64,
    /// Processes ste did not know: (parent, pid).
    new_processes: Vec<(i32, i32)>,
    /// Threads of known processes ste did not know: (tgid, tid).
    new_threads: Vec<(i32, i32)>,
    /// Known tasks /proc no longer showed: (tgid, tid), each process's leader last.
    gone: Vec<(i32, i32)>,
    /// Processes whose leader has exited (a zombie) while other threads still run.
    zombie_leaders: Vec<i32>,
}

/// What a resync found.
#[derive(Debug, Default, PartialEq)]
pub struct Resynced {
    /// Processes /proc shows that ste did not know.
    pub found: u64,
    /// Known processes that had ended unseen.
    pub missed: u64,
    /// Processes whose leader has exited (a zombie) while other threads still run: the tracker
    /// defers their end to the last thread's, as when it sees the leader's exit itself.
    pub zombie_leaders: Vec<i32>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus::sink::{Clock, Msg};
    use crate::source::sample::{Pace, Sampler};
    use std::time::Duration;

    /// A batching tree holds every event, execs included, until the tracker flushes, then
    /// sends them in one message, in order; `unsent_since` tells the tracker how long they
    /// have waited.
    #[test]
    fn a_batching_tree_holds_events_until_the_tracker_flushes() {
        let (sink, mut rx) = Sink::new(Clock::start());
        let sampler = Sampler::new(Pace::Fixed(Duration::from_secs(3600)), sink.clone());
        let mut tree = Tree::new(1, sink, sampler);
        tree.batch();
        tree.add_process(10, 1, 2);
        tree.add_thread(11, 2, 3);
        assert!(tree.exit(12, 3, None));
        assert_eq!(tree.unsent_since(), Some(10));
        tree.exec(2);
        tree.emit_at(
            13,
            Event::Exec {
                tgid: 2,
                former_tid: 2,
                argv: None,
            },
        );
        assert!(rx.try_recv().is_err(), "held back, the exec too");
        assert_eq!(tree.unsent_since(), Some(10));
        tree.flush();
        assert_eq!(tree.unsent_since(), None);
        let Ok(Msg::Events(v)) = rx.try_recv() else {
            panic!("one batch")
        };
        let times: Vec<u64> = v.iter().map(|s| s.t_ns).collect();
        assert_eq!(times, [10, 11, 12, 13]);
        assert!(matches!(v[3].event, Event::Exec { tgid: 2, .. }));
        assert!(rx.try_recv().is_err(), "nothing more");
    }

    /// Writes a /proc process directory: its stat line (captured on this machine, with the
    /// pid, state, parent and thread count set) and its task entries.
    fn fake_process(proc: &std::path::Path, pid: i32, state: char, ppid: i32, tids: &[i32]) {
        let dir = proc.join(pid.to_string());
        for tid in tids {
            std::fs::create_dir_all(dir.join("task").join(tid.to_string())).expect("task dir");
        }
        let stat = format!(
            "{pid} (fixture) {state} {ppid} 13649 8177 0 -1 4194304 100 0 0 0 0 0 0 0 20 0 {} 0 \
             2712878 3133440 395 18446744073709551615 94359952314368 94359952334249 \
             140730997063488 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 94359952350256 94359952351872 \
             94360330784768 140730997066455 140730997066475 140730997066475 140730997067755 0\n",
            tids.len()
        );
        std::fs::write(dir.join("stat"), stat).expect("stat");
    }

    /// A leader that exited while its thread runs is a zombie in /proc: a resync after lost
    /// events names it, so the tracker ends the process with its last thread; a live leader
    /// is not named; a process /proc no longer shows is ended and counted as missed.
    #[test]
    fn a_resync_names_zombie_leaders_whose_threads_still_run() {
        let proc = tempfile::tempdir().expect("tempdir");
        fake_process(proc.path(), 1, 'S', 0, &[1]);
        fake_process(proc.path(), 2, 'Z', 1, &[2, 3]);
        fake_process(proc.path(), 4, 'S', 1, &[4, 5]);
        let (sink, _rx) = Sink::new(Clock::start());
        let sampler = Sampler::new(Pace::Fixed(Duration::from_secs(3600)), sink.clone());
        let mut tree = Tree::new(2, sink, sampler);
        tree.procfs = ProcFs::new(proc.path());
        tree.add_process(10, 1, 2);
        tree.add_thread(11, 2, 3);
        tree.add_process(12, 1, 4);
        tree.add_thread(13, 4, 5);
        tree.add_process(14, 1, 6);
        let r = tree.resync();
        assert_eq!(
            r,
            Resynced {
                found: 0,
                missed: 1,
                zombie_leaders: vec![2]
            }
        );
        assert_eq!(
            tree.threads(2),
            2,
            "the zombie leader is still a task of its process"
        );
        assert!(
            !tree.has_process(6),
            "a process /proc no longer shows has ended"
        );
        assert!(!tree.is_empty());
    }

    /// A zombie ste does not know is not a new process: its end was seen and its parent has
    /// not reaped it yet (a rebuild added it again, and the run counted it twice, with no end).
    #[test]
    fn a_resync_does_not_add_a_zombie_whose_end_was_seen() {
        let proc = tempfile::tempdir().expect("tempdir");
        fake_process(proc.path(), 1, 'S', 0, &[1]);
        fake_process(proc.path(), 2, 'Z', 1, &[2]);
        fake_process(proc.path(), 3, 'R', 1, &[3]);
        let (sink, _rx) = Sink::new(Clock::start());
        let sampler = Sampler::new(Pace::Fixed(Duration::from_secs(3600)), sink.clone());
        let mut tree = Tree::new(1, sink, sampler);
        tree.procfs = ProcFs::new(proc.path());
        tree.add_process(10, 1, 2);
        assert!(tree.exit(11, 2, None));
        let r = tree.resync();
        assert_eq!(
            r,
            Resynced {
                found: 1,
                missed: 0,
                zombie_leaders: vec![]
            }
        );
        assert!(!tree.has_process(2), "the zombie stays ended");
        assert!(
            tree.has_process(3),
            "the running process ste did not know is added"
        );
    }

    /// A task /proc no longer shows whose end the tracker read after the scan (its record was
    /// on its way) is not ended twice, nor counted as missed; one whose end never came is.
    #[test]
    fn an_end_read_after_the_scan_is_not_a_missed_one() {
        let proc = tempfile::tempdir().expect("tempdir");
        fake_process(proc.path(), 1, 'S', 0, &[1]);
        let (sink, mut rx) = Sink::new(Clock::start());
        let sampler = Sampler::new(Pace::Fixed(Duration::from_secs(3600)), sink.clone());
        let mut tree = Tree::new(1, sink, sampler);
        tree.procfs = ProcFs::new(proc.path());
        tree.add_process(10, 1, 2);
        tree.add_process(11, 1, 3);
        let scan = tree.scan();
        assert_eq!(tree.add_found(&scan), 0);
        assert!(tree.exit(12, 2, None), "2's exit, read after the scan");
        assert_eq!(tree.end_gone(&scan), (1, vec![]), "only 3 was missed");
        assert!(!tree.is_empty() && !tree.has_process(3));
        let mut exits = Vec::new();
        while let Ok(m) = rx.try_recv() {
            if let Msg::Event(e) = m
                && let Event::Exit { tid, .. } = e.event
            {
                exits.push(tid);
            }
        }
        assert_eq!(exits, [2, 3], "one exit each");
    }

    /// Without `batch` (the ebpf tracker), every event goes out at once.
    #[test]
    fn a_plain_tree_sends_each_event() {
        let (sink, mut rx) = Sink::new(Clock::start());
        let sampler = Sampler::new(Pace::Fixed(Duration::from_secs(3600)), sink.clone());
        let mut tree = Tree::new(1, sink, sampler);
        tree.add_process(10, 1, 2);
        assert!(matches!(rx.try_recv(), Ok(Msg::Event(_))));
        assert_eq!(tree.unsent_since(), None);
    }
}
