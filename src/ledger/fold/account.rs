//! Folding accounting events into the Run, and what is derived from them when the Run is
//! finished: lingering descendants, the three memory figures side by side, where the wall
//! time went (summed in `time`), the tree's CPU by a source that counts every process, and the
//! critical path.
//!
//! Called by the recorder (one arm, one line in `finish`); deterministic like it. Reads only
//! the Run, so a replayed record gives the same figures.

use crate::model::{
    AccountEvent, Accounting, Group, GroupRound, LedgerSource, Lingering, MemoryFigure, PathLink,
    Process, Run, TreeCpu, Unavailable, signal_name,
};
use foldhash::{HashMap, HashMapExt};

fn acc(run: &mut Run) -> &mut Accounting {
    run.accounting.get_or_insert_with(Accounting::default)
}

/// Applies one accounting event. `index` is the entry of the process it is about, when the
/// recorder found one.
pub fn apply(run: &mut Run, index: Option<usize>, t_ns: u64, event: &AccountEvent) {
    acc(run);
    match event {
        AccountEvent::Ledger {
            source, figures, ..
        } => {
            let Some(p) = index.and_then(|i| run.processes.get_mut(i)) else {
                return;
            };
            let ledger = p.ledger.get_or_insert_with(Default::default);
            ledger.fold(*source, figures);
            if *source == LedgerSource::Taskstats {
                ledger.taskstats_records += 1;
            }
            // A single-threaded process lives until its last switch, where its CPU is read: the
            // ebpf tracker's end is its exit record, written before the exit tears the memory
            // down, so its lifetime would be shorter than its CPU.
            if *source == LedgerSource::LastSwitch
                && p.threads == 1
                && let (Some(end), Some(life)) = (p.end_ns, figures.task_time_ns)
            {
                p.end_ns = Some(end.max(p.start_ns.saturating_add(life)));
            }
        }
        AccountEvent::Group { version, dirs } => {
            acc(run).group = Some(Group {
                version: *version,
                dirs: dirs.clone(),
                ..Default::default()
            });
        }
        AccountEvent::GroupSample {
            usage_bytes,
            anon_bytes,
            file_bytes,
        } => {
            if let Some(g) = acc(run).group.as_mut() {
                if g.sampled_peak_bytes.is_none_or(|p| *usage_bytes > p) {
                    g.sampled_peak_bytes = Some(*usage_bytes);
                    g.sampled_peak_anon_bytes = Some(*anon_bytes);
                    g.sampled_peak_file_bytes = Some(*file_bytes);
                    g.sampled_peak_t_ns = Some(t_ns);
                }
                g.max_anon_bytes = Some(g.max_anon_bytes.unwrap_or(0).max(*anon_bytes));
                g.max_file_bytes = Some(g.max_file_bytes.unwrap_or(0).max(*file_bytes));
                g.rounds.push(GroupRound {
                    t_ns,
                    usage_bytes: *usage_bytes,
                    anon_bytes: *anon_bytes,
                    file_bytes: *file_bytes,
                });
            }
        }
        AccountEvent::GroupEnd { end } => {
            if let Some(g) = acc(run).group.as_mut() {
                g.end = Some(**end);
            }
        }
        AccountEvent::Unavailable { figure, why } => {
            let a = acc(run);
            if !a.unavailable.iter().any(|u| &u.figure == figure) {
                a.unavailable.push(Unavailable {
                    figure: figure.clone(),
                    why: why.clone(),
                });
            }
        }
        AccountEvent::Delays {
            on,
            switched_by_ste,
        } => {
            let a = acc(run);
            a.delays_on = Some(*on);
            a.delays_switched_by_ste = *switched_by_ste;
        }
        AccountEvent::TaskstatsOverrun => acc(run).taskstats_overruns += 1,
        AccountEvent::TaskstatsCut => acc(run).taskstats_cut += 1,
        AccountEvent::BeforeRelease { before } => acc(run).before_release = Some(*before),
        AccountEvent::KilledLingering { pids, signal, via } => {
            let a = acc(run);
            a.killed_lingering = Some(format!("{} through the {via}", signal_name(*signal)));
            for &pid in pids {
                if !a.lingering.iter().any(|l| l.pid == pid) {
                    a.lingering.push(Lingering {
                        pid,
                        end_ns: None,
                        killed: true,
                    });
                }
            }
        }
    }
}

/// Derives the summaries once every event has been applied. Runs without accounting events
/// are left as they are.
pub fn finish(run: &mut Run) {
    let Some(mut a) = run.accounting.take() else {
        return;
    };
    if let Some(b) = &a.before_release
        && let Some(root) = run.processes.first_mut().filter(|p| p.pid == b.pid)
        && let Some(l) = root.ledger.as_mut()
    {
        l.without(b);
    }
    // Delay accounting off (or not known on): taskstats, and BPF reading the same counters,
    // report its waits as 0, which would read as "never waited". Not measured, they are not
    // figures of the source (left out of the JSON, as a figure a source does not give is).
    if a.delays_on != Some(true) {
        for f in run
            .processes
            .iter_mut()
            .filter_map(|p| p.ledger.as_mut())
            .flat_map(|l| [l.taskstats.as_deref_mut(), l.last_switch.as_deref_mut()])
            .flatten()
        {
            f.blkio_delay_ns = None;
            f.swap_reclaim_delay_ns = None;
        }
    }
    let impossible = super::time::drop_impossible_waits(run);
    if impossible > 0 {
        a.unavailable.push(Unavailable {
            figure: "block-I/O and swap/reclaim waits of the tree".into(),
            why: format!(
                "the kernel's wait counters of {impossible} process{} exceed what {} threads could wait in {} life (delay accounting switched on while a thread waited times that wait from the machine's start)",
                if impossible == 1 { "" } else { "es" },
                if impossible == 1 { "its" } else { "their" },
                if impossible == 1 { "its" } else { "their" },
            ),
        });
    }
    a.lingering = lingering(run, &a.lingering);
    a.taskstats_incomplete = run
        .processes
        .iter()
        .filter(|p| {
            p.ledger.as_ref().is_some_and(|l| {
                l.taskstats_records > 0 && l.taskstats_records < p.threads && p.end_ns.is_some()
            })
        })
        .count() as u64;
    a.memory = memory(run, &a);
    // A sum without the processes whose waits were dropped would read as the tree's: none.
    a.time = super::time::time(run, a.delays_on == Some(true) && impossible == 0);
    a.tree_cpu = tree_cpu(run, &a);
    a.critical_path = critical_path(run);
    run.accounting = Some(a);
}

/// Descendants alive when the root ended, with the kill marks already recorded.
fn lingering(run: &Run, killed: &[Lingering]) -> Vec<Lingering> {
    let Some(root_end) = run.processes.first().and_then(|r| r.end_ns) else {
        return killed.to_vec();
    };
    run.processes
        .iter()
        .skip(1)
        .filter(|p| p.start_ns <= root_end && p.end_ns.is_none_or(|e| e > root_end))
        .map(|p| Lingering {
            pid: p.pid,
            end_ns: p.end_ns,
            killed: killed.iter().any(|k| k.pid == p.pid && k.killed),
        })
        .collect()
}

fn memory(run: &Run, a: &Accounting) -> crate::model::MemoryReconciled {
    let mut m = crate::model::MemoryReconciled::default();
    if let Some(g) = &a.group
        && let Some(peak) = g.end.and_then(|e| e.memory_peak_bytes)
    {
        m.group_peak = Some(MemoryFigure {
            bytes: peak,
            exact: true,
            from: if g.version == 2 {
                "cgroup v2 memory.peak (anon + page cache + kernel)".into()
            } else {
                "cgroup v1 memory.max_usage_in_bytes (anon + page cache + kernel)".into()
            },
            pid: None,
            processes: None,
        });
    } else if let Some(g) = &a.group
        && let Some(peak) = g.sampled_peak_bytes
    {
        // No peak kept by the kernel (cgroup v2 before Linux 5.19): the highest reading.
        m.group_peak = Some(MemoryFigure {
            bytes: peak,
            exact: false,
            from: "the highest of ste's readings of its cgroup's usage (anon + page cache + kernel), a lower bound".into(),
            pid: None,
            processes: None,
        });
    }
    let peaks: Vec<(i32, u64, String, bool)> = run
        .processes
        .iter()
        .filter_map(|p| crate::model::process_peak(run, p).map(|(v, f, e)| (p.pid, v, f, e)))
        .collect();
    if let Some((pid, v, from, exact)) = peaks.iter().max_by_key(|x| x.1) {
        m.largest_process_peak = Some(MemoryFigure {
            bytes: *v,
            exact: *exact,
            from: from.clone(),
            pid: Some(*pid),
            processes: None,
        });
        let mut froms: Vec<&str> = peaks.iter().map(|x| x.2.as_str()).collect();
        froms.sort_unstable();
        froms.dedup();
        m.summed_process_peaks = Some(MemoryFigure {
            bytes: crate::units::sum(peaks.iter().map(|x| x.1)),
            exact: peaks.iter().all(|x| x.3),
            from: froms.join(" + "),
            pid: None,
            processes: Some(peaks.len() as u64),
        });
    }
    if let Some(b) = run.totals.max_pss_bytes {
        m.pss_max = Some(MemoryFigure {
            bytes: b,
            // Exact when the largest lower bound and the largest upper bound of all samples
            // meet (a run of an older version: when the peak is an exact round's).
            exact: match (run.totals.max_pss_low_bytes, run.totals.max_pss_high_bytes) {
                (Some(l), Some(h)) => l == h,
                (Some(_), None) if run.sampler.exit_marks == Some(false) => false,
                _ => run.totals.max_pss_kind == Some(crate::model::SampleKind::Exact),
            },
            from: "PSS of /proc/PID/smaps_rollup summed over the live tree".into(),
            pid: None,
            processes: None,
        });
        m.pss_interval_ns = run.sampler.effective_interval_ns;
    }
    m
}

/// The tree's CPU counting every process, auto-reaped ones too (which getrusage misses): the
/// group's, exact, else the per-process ledger summed, exact when every process has its CPU
/// from its last switch. The ledger's sum leaves out the root's wait before its release,
/// which the group and getrusage count: a few hundred microseconds.
fn tree_cpu(run: &Run, a: &Accounting) -> Option<TreeCpu> {
    if let Some(g) = &a.group
        && let Some(e) = &g.end
        && let Some(cpu_ns) = e.cpu_ns
    {
        return Some(TreeCpu {
            cpu_ns,
            user_ns: e.cpu_user_ns,
            sys_ns: e.cpu_sys_ns,
            from: if g.version == 2 {
                "cgroup v2 cpu.stat".into()
            } else {
                "cgroup v1 cpuacct.usage".into()
            },
            exact: true,
        });
    }
    let mut sum = TreeCpu {
        cpu_ns: 0,
        user_ns: Some(0),
        sys_ns: Some(0),
        from: String::new(),
        exact: true,
    };
    let mut sources: Vec<&str> = Vec::new();
    // A split is known only when every process's is.
    let add =
        |acc: &mut Option<u64>, v: Option<u64>| *acc = acc.zip(v).map(|(a, b)| a.saturating_add(b));
    for p in &run.processes {
        let Some(l) = &p.ledger else {
            sum.exact = false;
            continue;
        };
        let Some((cpu, src)) = l.cpu() else {
            sum.exact = false;
            continue;
        };
        sum.cpu_ns = sum.cpu_ns.saturating_add(cpu);
        add(&mut sum.user_ns, l.best(|f| f.user_ns).map(|x| x.0));
        add(&mut sum.sys_ns, l.best(|f| f.sys_ns).map(|x| x.0));
        sum.exact &= src == LedgerSource::LastSwitch;
        if !sources.contains(&src.name()) {
            sources.push(src.name());
        }
    }
    if sources.is_empty() {
        return None;
    }
    sum.from = format!("the per-process ledger ({})", sources.join(" + "));
    Some(sum)
}

/// The chain of processes whose lifetimes bound the wall time, found backwards from the end:
/// within a process, the child that ended last before the point reached (its subtree, where
/// an orphan outlived it) is what the process waited for; before that child started, the
/// previous one, and so on; time no child covers is the process's own.
fn critical_path(run: &Run) -> Vec<PathLink> {
    let procs = &run.processes;
    if procs.is_empty() {
        return Vec::new();
    }
    let end_of = |p: &Process| p.end_ns.unwrap_or(run.totals.wall_ns);
    // Children by parent entry: the parent is the latest entry of its pid started before it.
    let mut index_of: HashMap<i32, usize> = HashMap::new();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); procs.len()];
    for (i, p) in procs.iter().enumerate() {
        if let Some(parent) = p.ppid.and_then(|pp| index_of.get(&pp).copied())
            && parent != i
        {
            children[parent].push(i);
        }
        index_of.insert(p.pid, i);
    }
    // Creation order puts children after parents: fold subtree ends backwards.
    let mut subtree_end: Vec<u64> = procs.iter().map(end_of).collect();
    for i in (0..procs.len()).rev() {
        for &c in &children[i] {
            subtree_end[i] = subtree_end[i].max(subtree_end[c]);
        }
    }
    for c in &mut children {
        c.sort_by_key(|&i| subtree_end[i]);
    }
    // Segments (process, own time), found back to front with an explicit stack: a work
    // item is "account for process i from its start up to t".
    let mut own: HashMap<usize, u64> = HashMap::new();
    let mut order: Vec<usize> = Vec::new();
    let mut work = vec![(0usize, subtree_end[0])];
    while let Some((i, mut t)) = work.pop() {
        if !own.contains_key(&i) {
            order.push(i);
        }
        let start = procs[i].start_ns;
        let kids = &children[i];
        // The child ending last at or before t (1 ms of tolerance for time-stamp order).
        let pos = kids.partition_point(|&c| subtree_end[c] <= t.saturating_add(1_000_000));
        let pick = kids[..pos]
            .iter()
            .rev()
            // Strictly before t, so that t goes down at every step.
            .find(|&&c| procs[c].start_ns >= start && procs[c].start_ns < t)
            .copied();
        match pick {
            Some(c) => {
                let ce = subtree_end[c];
                // The process's own time after the child, within its own life.
                let own_end = t.min(end_of(&procs[i]));
                let o = own.entry(i).or_default();
                *o = o.saturating_add(own_end.saturating_sub(ce));
                t = procs[c].start_ns;
                // First this process before the child, then the child (popped first).
                work.push((i, t));
                work.push((c, ce));
            }
            None => {
                let o = own.entry(i).or_default();
                *o = o.saturating_add(t.min(end_of(&procs[i])).saturating_sub(start));
            }
        }
    }
    // In time order: a child starts after its parent, a successor after its predecessor.
    order.sort_by_key(|&i| (procs[i].start_ns, i));
    order
        .iter()
        .map(|&i| {
            let p = &procs[i];
            PathLink {
                pid: p.pid,
                start_ns: p.start_ns,
                end_ns: p.end_ns,
                self_ns: own.get(&i).copied().unwrap_or(0),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus::event::{Event, Stamped};
    use crate::ledger::recorder::Recorder;
    use crate::model::{Arg, BeforeRelease, Figures, GroupEnd, Termination};

    fn at(t_ns: u64, event: Event) -> Stamped {
        Stamped { t_ns, event }
    }

    fn fork(t: u64, parent: i32, child: i32) -> Stamped {
        at(
            t,
            Event::Fork {
                parent_tgid: parent,
                child_tid: child,
                child_tgid: child,
            },
        )
    }

    fn exit(t: u64, pid: i32) -> Stamped {
        at(
            t,
            Event::Exit {
                tid: pid,
                tgid: pid,
                status: Some(Termination::Exited(0)),
            },
        )
    }

    fn ledger(t: u64, tgid: i32, start_ns: Option<u64>, f: Figures) -> Stamped {
        at(
            t,
            Event::Accounting {
                event: AccountEvent::Ledger {
                    tgid,
                    start_ns,
                    source: LedgerSource::Taskstats,
                    figures: Box::new(f),
                },
            },
        )
    }

    fn figures(cpu_ms: u64, rq_ms: u64, life_ms: u64, rss_mib: u64) -> Figures {
        Figures {
            cpu_ns: Some(cpu_ms * 1_000_000),
            run_queue_ns: Some(rq_ms * 1_000_000),
            task_time_ns: Some(life_ms * 1_000_000),
            peak_rss_bytes: Some(rss_mib << 20),
            ..Default::default()
        }
    }

    const MS: u64 = 1_000_000;

    /// sh (10) runs cc (11, 0–600 ms) then ld (12, 600–900 ms), waiting for each; a daemon
    /// (13) forked by cc outlives everything.
    fn build() -> Vec<Stamped> {
        vec![
            at(
                0,
                Event::Start {
                    command: vec![Arg::from("sh")],
                    tracker: "ptrace".into(),
                    pid: 10,
                    ppid: 1,
                },
            ),
            fork(MS, 10, 11),
            fork(100 * MS, 11, 13),
            ledger(600 * MS, 11, None, figures(500, 50, 599, 300)),
            exit(600 * MS, 11),
            fork(601 * MS, 10, 12),
            ledger(900 * MS, 12, None, figures(250, 0, 299, 100)),
            exit(900 * MS, 12),
            ledger(905 * MS, 10, None, figures(5, 0, 905, 2)),
            exit(905 * MS, 10),
            at(
                905 * MS,
                Event::RootExit {
                    status: Termination::Exited(0),
                },
            ),
            at(
                906 * MS,
                Event::Accounting {
                    event: AccountEvent::Group {
                        version: 1,
                        dirs: vec!["/sys/fs/cgroup/memory/ste-1-2".into()],
                    },
                },
            ),
            at(
                907 * MS,
                Event::Accounting {
                    event: AccountEvent::GroupEnd {
                        end: Box::new(GroupEnd {
                            memory_peak_bytes: Some(310 << 20),
                            ..Default::default()
                        }),
                    },
                },
            ),
            ledger(2000 * MS, 13, Some(100 * MS), figures(1, 0, 1900, 1)),
            exit(2000 * MS, 13),
        ]
    }

    #[test]
    fn reconciles_memory_and_time() {
        let run = Recorder::replay(build());
        let a = run.accounting.as_ref().unwrap();
        let m = &a.memory;
        assert_eq!(m.group_peak.as_ref().unwrap().bytes, 310 << 20);
        assert!(m.group_peak.as_ref().unwrap().exact);
        let largest = m.largest_process_peak.as_ref().unwrap();
        assert_eq!((largest.bytes, largest.pid), (300 << 20, Some(11)));
        assert_eq!(m.summed_process_peaks.as_ref().unwrap().bytes, 403 << 20);
        let t = a.time.as_ref().unwrap();
        assert_eq!(t.cpu_ns, Some(756 * MS));
        assert_eq!(t.run_queue_ns, Some(50 * MS));
        assert_eq!(t.task_time_ns, Some(3703 * MS));
        assert_eq!(t.other_ns, Some((3703 - 756 - 50) * MS));
        assert_eq!(t.blkio_ns, None, "delay accounting was off");
        assert_eq!(t.from, "taskstats");
    }

    /// taskstats gives 0 for the block-I/O and swap/reclaim waits when delay accounting is
    /// off: the processes' figures have none, not "never waited"; with it on, they stay.
    #[test]
    fn waits_not_measured_are_null() {
        let with_waits = |on: Option<bool>| {
            let mut ev = build();
            for e in &mut ev {
                if let Event::Accounting {
                    event: AccountEvent::Ledger { figures, .. },
                } = &mut e.event
                {
                    figures.blkio_delay_ns = Some(0);
                    figures.swap_reclaim_delay_ns = Some(0);
                }
            }
            if let Some(on) = on {
                ev.insert(
                    1,
                    at(
                        0,
                        Event::Accounting {
                            event: AccountEvent::Delays {
                                on,
                                switched_by_ste: false,
                            },
                        },
                    ),
                );
            }
            let run = Recorder::replay(ev);
            let f = run.processes[1].ledger.as_ref().unwrap().taskstats.clone();
            let f = f.unwrap();
            (f.blkio_delay_ns, f.swap_reclaim_delay_ns, f.run_queue_ns)
        };
        assert_eq!(with_waits(Some(false)), (None, None, Some(50 * MS)));
        assert_eq!(with_waits(None), (None, None, Some(50 * MS)));
        assert_eq!(with_waits(Some(true)), (Some(0), Some(0), Some(50 * MS)));
    }

    /// A wait timed from the machine's start (delay accounting switched on mid-wait) is more
    /// than a process could wait in its life: dropped, and the tree's sum with it, said why.
    #[test]
    fn waits_longer_than_a_life_are_dropped_and_said() {
        let mut ev = build();
        let mut k = 0;
        for e in &mut ev {
            if let Event::Accounting {
                event: AccountEvent::Ledger { figures, .. },
            } = &mut e.event
            {
                // ld's (12, the second record): 10 hours, in a life of 300 ms.
                figures.blkio_delay_ns = Some(if k == 1 { 36_000 * 1_000 * MS } else { MS });
                figures.swap_reclaim_delay_ns = Some(0);
                k += 1;
            }
        }
        ev.insert(
            1,
            at(
                0,
                Event::Accounting {
                    event: AccountEvent::Delays {
                        on: true,
                        switched_by_ste: false,
                    },
                },
            ),
        );
        let run = Recorder::replay(ev);
        let blkio = |pid: i32| {
            run.processes
                .iter()
                .find(|p| p.pid == pid)?
                .ledger
                .as_ref()
                .and_then(|l| l.taskstats.as_ref())
                .and_then(|f| f.blkio_delay_ns)
        };
        assert_eq!(blkio(11), Some(MS));
        assert_eq!(blkio(12), None);
        let a = run.accounting.as_ref().unwrap();
        assert_eq!(a.time.as_ref().unwrap().blkio_ns, None);
        let u = a
            .unavailable
            .iter()
            .find(|u| u.figure.starts_with("block-I/O"))
            .expect("said");
        assert!(u.why.contains("of 1 process exceed"), "{}", u.why);
    }

    #[test]
    fn the_first_process_is_counted_from_its_release() {
        // sh (10) waited 40 ms for ste's set-up, 3 ms of it on a CPU and 1 ms in the run queue.
        let mut ev = build();
        ev.insert(
            1,
            at(
                0,
                Event::Accounting {
                    event: AccountEvent::BeforeRelease {
                        before: BeforeRelease {
                            pid: 10,
                            alive_ns: 40 * MS,
                            cpu_ns: Some(3 * MS),
                            run_queue_ns: Some(MS),
                            ..Default::default()
                        },
                    },
                },
            ),
        );
        let run = Recorder::replay(&ev);
        let taskstats = |i: usize| {
            let p: &crate::model::Process = &run.processes[i];
            p.ledger.as_ref().unwrap().taskstats.as_deref().unwrap()
        };
        let sh = taskstats(0);
        assert_eq!(sh.task_time_ns, Some(865 * MS));
        assert_eq!(sh.cpu_ns, Some(2 * MS));
        assert_eq!(sh.run_queue_ns, Some(0), "saturates, never wraps");
        let t = run.accounting.as_ref().unwrap().time.clone().unwrap();
        assert_eq!(t.cpu_ns, Some(753 * MS));
        assert_eq!(t.task_time_ns, Some(3663 * MS));
        // Another process's figures are left alone.
        let cc = taskstats(1);
        assert_eq!(cc.task_time_ns, Some(599 * MS));
    }

    /// ebpf: a single-threaded process's exit record comes before its memory is torn down;
    /// its last switch, after, carries the life its CPU covers, and the process ends there.
    #[test]
    fn a_process_lives_until_its_last_switch() {
        let last_switch = |t: u64, tgid: i32, life_ms: u64| {
            at(
                t,
                Event::Accounting {
                    event: AccountEvent::Ledger {
                        tgid,
                        start_ns: None,
                        source: LedgerSource::LastSwitch,
                        figures: Box::new(Figures {
                            user_ns: Some(0),
                            sys_ns: Some(life_ms * MS),
                            cpu_ns: Some(life_ms * MS),
                            task_time_ns: Some(life_ms * MS),
                            ..Default::default()
                        }),
                    },
                },
            )
        };
        // ld (12) started at 601 ms and exited at 900 ms; its last switch comes just after.
        let end_of_ld = |life_ms: u64| {
            let mut ev = build();
            let exit = ev
                .iter()
                .position(|e| matches!(e.event, Event::Exit { tid: 12, .. }));
            ev.insert(exit.unwrap() + 1, last_switch(901 * MS, 12, life_ms));
            let run = Recorder::replay(ev);
            run.processes.iter().find(|p| p.pid == 12).unwrap().end_ns
        };
        // Its teardown ran to 950 ms.
        assert_eq!(end_of_ld(349), Some(950 * MS));
        // A figure that ends before the exit record changes nothing.
        assert_eq!(end_of_ld(100), Some(900 * MS));
    }

    #[test]
    fn critical_path_and_lingering() {
        let run = Recorder::replay(build());
        let a = run.accounting.as_ref().unwrap();
        // The daemon (13) ended last, under cc (11): the path goes sh → cc → daemon.
        let pids: Vec<i32> = a.critical_path.iter().map(|l| l.pid).collect();
        assert_eq!(pids, [10, 11, 13]);
        assert_eq!(a.lingering.len(), 1);
        assert_eq!(a.lingering[0].pid, 13);
        assert_eq!(a.lingering[0].end_ns, Some(2000 * MS));
    }

    #[test]
    fn group_rounds_are_kept_with_their_time() {
        let sample = |t: u64, usage: u64, anon: u64, file: u64| {
            at(
                t,
                Event::Accounting {
                    event: AccountEvent::GroupSample {
                        usage_bytes: usage,
                        anon_bytes: anon,
                        file_bytes: file,
                    },
                },
            )
        };
        let mut ev = build();
        // After the Group event (906 ms): the highest usage is the second round.
        ev.push(sample(950 * MS, 100, 80, 20));
        ev.push(sample(970 * MS, 300, 250, 50));
        ev.push(sample(990 * MS, 200, 100, 90));
        let run = Recorder::replay(&ev);
        let g = run.accounting.unwrap().group.unwrap();
        let rounds: Vec<(u64, u64, u64, u64)> = g
            .rounds
            .iter()
            .map(|r| (r.t_ns / MS, r.usage_bytes, r.anon_bytes, r.file_bytes))
            .collect();
        assert_eq!(
            rounds,
            [(950, 100, 80, 20), (970, 300, 250, 50), (990, 200, 100, 90)]
        );
        assert_eq!(
            (g.sampled_peak_bytes, g.sampled_peak_t_ns),
            (Some(300), Some(970 * MS))
        );
        assert_eq!((g.max_anon_bytes, g.max_file_bytes), (Some(250), Some(90)));
    }

    #[test]
    fn reused_pid_records_go_to_the_right_process() {
        let mut ev = build();
        // pid 12 is reused by a second process; a late record names the first by its start.
        ev.push(fork(2001 * MS, 10, 12));
        ev.push(ledger(2002 * MS, 12, Some(601 * MS), figures(1, 0, 1, 7)));
        let run = Recorder::replay(&ev);
        let first = run.processes.iter().find(|p| p.pid == 12).unwrap();
        assert_eq!(
            first
                .ledger
                .as_ref()
                .unwrap()
                .taskstats
                .as_deref()
                .unwrap()
                .peak_rss_bytes,
            Some(100 << 20)
        );
        assert_eq!(first.ledger.as_ref().unwrap().taskstats_records, 2);
        assert!(run.processes.last().unwrap().ledger.is_none());
    }
}
