//! Matching taskstats exit records to the processes of the Run.
//!
//! The exit listener hears every thread that exits on the machine; a record belongs to the
//! tree when its thread group is a process of the Run alive at the time: pids are reused
//! (`pid_max` may be 32,768: docs/kernel-notes.md), so a pid alone is not enough. A record
//! carries its thread's age at the exit (`ac_etime`, µs), not the time of the exit, so the
//! exit is placed by what else is known of it: the end the tracker stamped, when it saw the
//! thread end (the record's age is then the thread's lifetime, the process's for its leader),
//! or else the record's arrival. The arrival is the accounts thread's time stamp for its
//! drain and lags the exit by as long as that thread waits for a CPU, seconds when ste is
//! starved; the tracker's stamps are the kernel's (ebpf, netlink). A record may also arrive before the tracker's fork event
//! for its process (the two come through different sockets): it is parked until that process
//! appears, and dropped after [`PARK_NS`] (then it was another process's).

use crate::bus::event::Event;
use crate::kernel::taskstats::TaskStats;
use crate::ledger::recorder::Recorder;
use crate::model::{AccountEvent, Figures, LedgerSource, Process};
use foldhash::HashMap;

/// Tolerance between the tracker's time stamps and the kernel's: the tracker may see a fork
/// late under load, and a record's arrival lags its exit. A pid is not reused this fast.
const SLACK_NS: u64 = 500_000_000;
/// How much later than the kernel's own a tracker's stamp of a start may be: a process the
/// rebuild after a loss found is stamped when /proc showed it, a ptrace stop when the tracer
/// took it.
const STAMP_NS: u64 = 20_000_000;
/// How long after its record a process's end may be stamped: the kernel writes the record,
/// then unmaps the process's memory, which takes a while for a large one.
const EXIT_NS: u64 = 50_000_000;
/// How long an unmatched record waits for its process to appear.
const PARK_NS: u64 = 2_000_000_000;

#[derive(Default)]
pub struct Matcher {
    parked: HashMap<i32, Vec<(u64, Box<TaskStats>)>>,
    parked_count: usize,
    /// Processes of the Run already looked at for parked records.
    seen: usize,
    last_expiry_ns: u64,
}

/// The process the record's thread group belongs to (its start in the Run), for a record `s`
/// that arrived at `t_ns`.
///
/// The kernel queues the records of one pid in the order they were written, so none belongs to
/// a process older than one that already has a record, and only a process started before the
/// record arrived is its own. Of those, first one the tracker saw end whose lifetime is the
/// record's age (the thread's age at its exit): the records of its leader and of the threads
/// that lived as long, whenever they were read; the earliest such, as its records come first,
/// but not one whose leader's record is already in when this is a leader's. Then, by the
/// arrival: the thread's start is the arrival less the age, late by the arrival's lag, within
/// [`SLACK_NS`] of the process's lifetime (a process still alive when the record was read).
/// Last, for a thread other than the leader, one with a thread of the record's pid the tracker
/// saw start and end as long as the record's age: a thread that ended before its process,
/// whose record was read too late for the arrival.
pub fn find(rec: &Recorder, s: &TaskStats, t_ns: u64) -> Option<u64> {
    let run = rec.run();
    let entries = rec.entries_of(tgid_of(s));
    let newest_with_records = entries
        .iter()
        .rposition(|&i| {
            run.processes[i]
                .ledger
                .as_ref()
                .is_some_and(|l| l.taskstats_records > 0)
        })
        .unwrap_or(0);
    let candidates = &entries[newest_with_records..];
    let age_ns = s.elapsed_us * 1000;
    let leader = is_leader(s);
    let existed = |p: &&Process| p.start_ns <= t_ns + STAMP_NS;
    // A thread's record carries the thread's own age: it fits a thread the tracker saw start
    // and end as it fits a process.
    let lived = |start_ns: u64, end_ns: u64| {
        let start = end_ns.saturating_sub(age_ns);
        end_ns <= t_ns + EXIT_NS && start + STAMP_NS >= start_ns && start <= start_ns + EXIT_NS
    };
    let by_end = |p: &&Process| {
        !(leader && leader_read(p)) && p.end_ns.is_some_and(|e| lived(p.start_ns, e))
    };
    // Newest first: a record read on time is of a thread that just ended.
    let by_thread = |p: &&Process| {
        !leader
            && p.thread_lifetimes
                .iter()
                .rev()
                .any(|l| l.tid == s.pid as i32 && l.end_ns.is_some_and(|e| lived(l.start_ns, e)))
    };
    let start = t_ns.saturating_sub(age_ns);
    let by_arrival = |p: &&Process| {
        p.start_ns <= start + SLACK_NS && p.end_ns.is_none_or(|e| e + SLACK_NS >= start)
    };
    let process = |&i: &usize| &run.processes[i];
    let first = |rule: &dyn Fn(&&Process) -> bool| {
        candidates
            .iter()
            .map(process)
            .filter(existed)
            .find(|p| rule(p))
    };
    // The threads' lifetimes last: walking them costs a pass over the process's threads, and
    // only a record the other two leave out needs it.
    first(&by_end)
        .or_else(|| {
            candidates
                .iter()
                .rev()
                .map(process)
                .filter(existed)
                .find(by_arrival)
        })
        .or_else(|| first(&by_thread))
        .map(|p| p.start_ns)
}

/// Whether the record is the thread group leader's, the one that carries the status.
fn is_leader(s: &TaskStats) -> bool {
    s.tgid.is_none_or(|t| t == s.pid)
}

/// Whether the record of the process's leader thread is in.
fn leader_read(p: &Process) -> bool {
    p.ledger
        .as_ref()
        .and_then(|l| l.taskstats.as_deref())
        .is_some_and(|f| f.exit_status.is_some())
}

/// The ledger figures of one record.
pub fn figures(s: &TaskStats) -> Figures {
    let leader = is_leader(s);
    let reclaim = s.swapin_delay_ns
        + s.freepages_delay_ns.unwrap_or(0)
        + s.thrashing_delay_ns.unwrap_or(0)
        + s.compact_delay_ns.unwrap_or(0);
    let (user_ns, sys_ns) = super::split_runtime(s.cpu_run_virtual_ns, s.utime_us, s.stime_us);
    Figures {
        user_ns: Some(user_ns),
        sys_ns: Some(sys_ns),
        cpu_ns: Some(s.cpu_run_virtual_ns),
        run_queue_ns: Some(s.cpu_delay_ns),
        blkio_delay_ns: Some(s.blkio_delay_ns),
        swap_reclaim_delay_ns: Some(reclaim),
        task_time_ns: Some(s.elapsed_us * 1000),
        peak_rss_bytes: Some(s.hiwater_rss_kb * 1024),
        peak_vm_bytes: Some(s.hiwater_vm_kb * 1024),
        minor_faults: Some(s.minflt),
        major_faults: Some(s.majflt),
        voluntary_switches: Some(s.nvcsw),
        involuntary_switches: Some(s.nivcsw),
        read_bytes: Some(s.read_bytes),
        write_bytes: Some(s.write_bytes),
        read_char_bytes: Some(s.read_char),
        write_char_bytes: Some(s.write_char),
        exit_status: leader.then_some(s.exit_code as i32),
    }
}

fn event(tgid: i32, start_ns: u64, s: &TaskStats) -> Event {
    Event::Accounting {
        event: AccountEvent::Ledger {
            tgid,
            start_ns: Some(start_ns),
            source: LedgerSource::Taskstats,
            figures: Box::new(figures(s)),
        },
    }
}

fn tgid_of(s: &TaskStats) -> i32 {
    s.tgid.unwrap_or(s.pid) as i32
}

impl Matcher {
    /// A record that arrived at run time `t_ns`: its event if it belongs to the tree, else
    /// parked.
    pub fn offer(&mut self, rec: &Recorder, t_ns: u64, s: Box<TaskStats>) -> Option<Event> {
        let tgid = tgid_of(&s);
        if let Some(p) = find(rec, &s, t_ns) {
            return Some(event(tgid, p, &s));
        }
        self.expire(t_ns);
        self.parked.entry(tgid).or_default().push((t_ns, s));
        self.parked_count += 1;
        None
    }

    /// Events for parked records whose process has appeared since the last call.
    pub fn newly_matched(&mut self, rec: &Recorder) -> Vec<Event> {
        let procs = &rec.run().processes;
        if self.parked_count == 0 {
            self.seen = procs.len();
            return Vec::new();
        }
        let mut out = Vec::new();
        for p in &procs[self.seen.min(procs.len())..] {
            let Some(records) = self.parked.remove(&p.pid) else {
                continue;
            };
            let mut keep = Vec::new();
            for (t, s) in records {
                match find(rec, &s, t) {
                    Some(ps) => {
                        out.push(event(p.pid, ps, &s));
                        self.parked_count -= 1;
                    }
                    None => keep.push((t, s)),
                }
            }
            if !keep.is_empty() {
                self.parked.insert(p.pid, keep);
            }
        }
        self.seen = procs.len();
        out
    }

    /// Drops records parked for longer than [`PARK_NS`] (at most once per second).
    fn expire(&mut self, now_ns: u64) {
        if now_ns < self.last_expiry_ns + 1_000_000_000 {
            return;
        }
        self.last_expiry_ns = now_ns;
        self.parked.retain(|_, v| {
            v.retain(|(t, _)| t + PARK_NS >= now_ns);
            !v.is_empty()
        });
        self.parked_count = self.parked.values().map(Vec::len).sum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus::event::Stamped;
    use crate::model::{Arg, Termination};

    fn rec_with(events: &[Event]) -> Recorder {
        let mut r = Recorder::new();
        r.apply(&Stamped {
            t_ns: 0,
            event: Event::Start {
                command: vec![Arg::from("x")],
                tracker: "ptrace".into(),
                pid: 10,
                ppid: 1,
            },
        });
        for (i, e) in events.iter().enumerate() {
            r.apply(&Stamped {
                t_ns: (i as u64 + 1) * 1_000_000_000,
                event: e.clone(),
            });
        }
        r
    }

    fn stats(pid: u32, tgid: u32, elapsed_ms: u64) -> Box<TaskStats> {
        Box::new(TaskStats {
            pid,
            tgid: Some(tgid),
            elapsed_us: elapsed_ms * 1000,
            hiwater_rss_kb: 1024,
            ..Default::default()
        })
    }

    #[test]
    fn matches_by_pid_and_lifetime() {
        // 11 lives 1 s → 2 s; 11 is then reused at 3 s.
        let r = rec_with(&[fork(11), exit(11), fork(11)]);
        let mut m = Matcher::default();
        // A record of the first 11 (it lived 1 s), read after the second 11 appeared.
        let e = m.offer(&r, 2_100_000_000, stats(11, 11, 1000)).unwrap();
        let Event::Accounting {
            event: AccountEvent::Ledger { start_ns, .. },
        } = e
        else {
            panic!()
        };
        assert_eq!(start_ns, Some(1_000_000_000));
        // A thread of the second 11.
        let e = m.offer(&r, 3_600_000_000, stats(12, 11, 100)).unwrap();
        let Event::Accounting {
            event: AccountEvent::Ledger {
                start_ns, figures, ..
            },
        } = e
        else {
            panic!()
        };
        assert_eq!(start_ns, Some(3_000_000_000));
        assert_eq!(
            figures.exit_status, None,
            "a thread's status is not the process's"
        );
        // A stranger that once had pid 11, long before the run's 11 existed: parked.
        assert!(m.offer(&r, 300_000_000, stats(11, 11, 10)).is_none());
    }

    #[test]
    fn parked_records_match_when_the_process_appears() {
        let mut r = rec_with(&[]);
        let mut m = Matcher::default();
        assert!(m.offer(&r, 1_000_000_000, stats(20, 20, 1)).is_none());
        assert!(m.newly_matched(&r).is_empty());
        r.apply(&Stamped {
            t_ns: 999_000_000,
            event: Event::Fork {
                parent_tgid: 10,
                child_tid: 20,
                child_tgid: 20,
            },
        });
        assert_eq!(m.newly_matched(&r).len(), 1);
        assert_eq!(m.parked_count, 0);
    }

    /// Offers a record as the session does, applying its event to the Run; the start of the
    /// process it was given to.
    fn offer(m: &mut Matcher, r: &mut Recorder, t_ns: u64, s: Box<TaskStats>) -> Option<u64> {
        let event = m.offer(r, t_ns, s)?;
        r.apply(&Stamped {
            t_ns,
            event: event.clone(),
        });
        match event {
            Event::Accounting {
                event: AccountEvent::Ledger { start_ns, .. },
            } => start_ns,
            _ => panic!("not a ledger event"),
        }
    }

    fn fork(pid: i32) -> Event {
        Event::Fork {
            parent_tgid: 10,
            child_tid: pid,
            child_tgid: pid,
        }
    }

    fn exit(pid: i32) -> Event {
        Event::Exit {
            tid: pid,
            tgid: pid,
            status: Some(Termination::Exited(0)),
        }
    }

    #[test]
    fn a_record_read_late_finds_the_process_by_its_lifetime() {
        // 11 lives 1 s → 2 s, and again 3 s → 4 s (a second process with its pid), 12 from
        // 5 s and 13 from 6 s; 12 ended at 7.04 s. The accounts thread read their records at
        // 30 s, starved of CPU: the arrival less the age would place each start ~26 s late.
        let mut r = rec_with(&[fork(11), exit(11), fork(11), exit(11), fork(12), fork(13)]);
        r.apply(&Stamped {
            t_ns: 7_040_000_000,
            event: exit(12),
        });
        let mut m = Matcher::default();
        let late = 30_000_000_000;
        // The two 11s lived as long; the kernel queued the first one's record first.
        assert_eq!(
            offer(&mut m, &mut r, late, stats(11, 11, 1000)),
            Some(1_000_000_000)
        );
        // Its age 10 ms short of the lifetime: the exit was stamped after the record, as the
        // kernel unmaps the memory in between.
        assert_eq!(
            offer(&mut m, &mut r, late, stats(11, 11, 990)),
            Some(3_000_000_000)
        );
        assert_eq!(
            offer(&mut m, &mut r, late, stats(12, 12, 2040)),
            Some(5_000_000_000)
        );
        // A thread of 12 that ended with it, its record queued after the leader's.
        assert_eq!(
            offer(&mut m, &mut r, late, stats(15, 12, 2040)),
            Some(5_000_000_000)
        );
        // A thread of 12 that ended half-way through its life fits no lifetime and is too
        // late for the arrival: parked, not given to another process.
        assert_eq!(offer(&mut m, &mut r, late, stats(14, 12, 1000)), None);
        // A third leader's record of pid 11 that lived 1 s: the second 11 has its leader's
        // record, and the first cannot come after it.
        assert_eq!(offer(&mut m, &mut r, late, stats(11, 11, 1000)), None);
        // 13 is alive: by the arrival, as before.
        assert_eq!(
            offer(&mut m, &mut r, late, stats(13, 13, 23_990)),
            Some(6_000_000_000)
        );
    }

    fn thread(tgid: i32, tid: i32) -> Event {
        Event::Fork {
            parent_tgid: tgid,
            child_tid: tid,
            child_tgid: tgid,
        }
    }

    fn thread_exit(tgid: i32, tid: i32) -> Event {
        Event::Exit {
            tid,
            tgid,
            status: None,
        }
    }

    #[test]
    fn a_thread_s_record_read_late_finds_its_thread_by_its_lifetime() {
        // 12 lives 1 s → 4 s; its thread 14 lives 2 s → 3 s, and 14 again 3.5 s → 3.8 s (the
        // pid reused by another thread of 12). The accounts thread reads the first 14's record
        // at 30 s: by the arrival its start would be 29 s, long after 12 ended.
        let mut r = rec_with(&[fork(12), thread(12, 14), thread_exit(12, 14)]);
        for (t_ns, event) in [
            (3_500_000_000, thread(12, 14)),
            (3_800_000_000, thread_exit(12, 14)),
            (4_000_000_000, exit(12)),
        ] {
            r.apply(&Stamped { t_ns, event });
        }
        let mut m = Matcher::default();
        let late = 30_000_000_000;
        assert_eq!(
            offer(&mut m, &mut r, late, stats(14, 12, 1000)),
            Some(1_000_000_000)
        );
        assert_eq!(
            offer(&mut m, &mut r, late, stats(14, 12, 300)),
            Some(1_000_000_000)
        );
        // A thread of 12 that no thread of the Run lived as long as: parked, as before.
        assert_eq!(offer(&mut m, &mut r, late, stats(14, 12, 700)), None);
        // A leader's record is not a thread's: 12's own lifetime is 3 s.
        assert_eq!(offer(&mut m, &mut r, late, stats(12, 12, 1000)), None);
        assert_eq!(
            offer(&mut m, &mut r, late, stats(12, 12, 3000)),
            Some(1_000_000_000)
        );
    }

    #[test]
    fn a_process_that_started_after_the_record_arrived_is_not_its_own() {
        // 11 lives 1 s → 2 s; the Run already holds a second 11 from 3 s when a stranger's
        // record that arrived at 2.9 s is offered. Its start by the arrival, 2.6 s, is within
        // the slack of the second 11's, but that process did not exist when it was read.
        let mut r = rec_with(&[fork(11), exit(11), fork(11)]);
        let mut m = Matcher::default();
        assert_eq!(
            offer(&mut m, &mut r, 2_900_000_000, stats(11, 11, 300)),
            None
        );
    }
}
