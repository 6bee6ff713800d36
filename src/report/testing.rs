//! Hand-built Runs for the reports' snapshot tests.
//!
//! `build()` replays hand-written events through the recorder, so its totals are the ones the
//! recorder would compute: a small compile (sh → cc → cc1, as; cc → ld with two threads, and a
//! forked child killed by SIGKILL), sampled every 50 ms with per-process PSS and CPU.
//! `build_accounting()` is the same compile run as root: a cgroup of its own, taskstats
//! figures for every process but the killed child, delay accounting on, and a daemon left
//! running by the link step.

use crate::bus::event::{Event, Stamped};
use crate::ledger::recorder::Recorder;
use crate::model::{
    AccountEvent, Arg, Exec, Figures, GroupEnd, LedgerSource, Process, ProcessSample, Run, Sample,
    SampleKind, SamplerInfo, Source, Termination,
};

pub fn exec(t_ns: u64, argv: &[&str]) -> Exec {
    Exec {
        t_ns,
        argv: Some(argv.iter().map(|a| Arg::from(*a)).collect()),
    }
}

pub fn process(pid: i32, ppid: Option<i32>, start_ns: u64, end_ns: Option<u64>) -> Process {
    Process {
        pid,
        ppid,
        start_ns,
        end_ns,
        exit_code: end_ns.map(|_| 0),
        signal: None,
        threads: 1,
        peak_rss_bytes: None,
        io: None,
        ledger: None,
        execs: Vec::new(),
        thread_lifetimes: Vec::new(),
    }
}

/// A Run of these processes and nothing else.
pub fn run_of(processes: Vec<Process>) -> Run {
    let mut run = Recorder::replay(Vec::<Stamped>::new());
    run.processes = processes;
    run
}

const MS: u64 = 1_000_000;
const MIB: u64 = 1 << 20;

/// (pid, parent, fork ms, exec ms and argv, end ms, how it ended)
type Spec = (
    i32,
    i32,
    u64,
    Option<(u64, &'static [&'static str])>,
    u64,
    Termination,
);

const PROCESSES: [Spec; 6] = [
    (
        101,
        100,
        2,
        Some((3, &["cc", "-O2", "-c", "a.c"])),
        500,
        Termination::Exited(0),
    ),
    (
        102,
        101,
        10,
        Some((
            11,
            &[
                "/usr/lib/gcc/x86_64-linux-gnu/12/cc1",
                "-quiet",
                "a.c",
                "-O2",
                "-o",
                "/tmp/cc.s",
            ],
        )),
        400,
        Termination::Exited(0),
    ),
    (
        103,
        101,
        410,
        Some((411, &["as", "--64", "-o", "a.o", "/tmp/cc.s"])),
        480,
        Termination::Exited(0),
    ),
    (
        104,
        100,
        510,
        Some((511, &["cc", "-o", "a", "a.o"])),
        890,
        Termination::Exited(0),
    ),
    (
        105,
        104,
        520,
        Some((521, &["/usr/bin/ld", "-o", "a", "a.o"])),
        880,
        Termination::Exited(0),
    ),
    (
        108,
        104,
        530,
        None,
        540,
        Termination::Signaled {
            signal: 9,
            core_dumped: false,
        },
    ),
];

/// PSS of a process at `t` ms (0 when not alive), and its CPU so far.
fn figures(pid: i32, t: u64) -> Option<(u64, u64)> {
    let (start, end) = match pid {
        100 => (0, 900),
        _ => PROCESSES.iter().find(|s| s.0 == pid).map(|s| (s.2, s.4))?,
    };
    if t < start || t >= end {
        return None;
    }
    let age = t - start;
    let pss = match pid {
        100 => MIB,
        101 | 104 => 2 * MIB,
        102 => 10 * MIB + age * MIB / 4,
        103 => 5 * MIB,
        105 => 30 * MIB + age * MIB / 8,
        _ => MIB / 2,
    };
    let cpu = match pid {
        102 | 105 => age * MS * 9 / 10 / 10 * 10,
        _ => age * MS / 20 / 10 * 10,
    };
    Some((pss, cpu))
}

/// The end of the run at `t` ms: the tree's CPU, ste's own.
fn end(t: u64) -> (u64, Event) {
    (
        t * MS,
        Event::End {
            user_ns: 700 * MS,
            sys_ns: 90 * MS,
            ste_cpu_ns: 12 * MS,
            ste_max_rss_bytes: 4 * MIB,
            stopped_waiting: None,
        },
    )
}

/// The events of the hand-built compile.
pub fn events() -> Vec<Stamped> {
    let mut ev = vec![(
        0,
        Event::Start {
            command: vec![Arg::from("sh"), Arg::from("-c"), Arg::from("make")],
            tracker: "ptrace".into(),
            pid: 100,
            ppid: 1,
        },
    )];
    ev.push((0, Event::Machine { cpus: 2 }));
    for (figure, source) in [
        ("wall_ns", Source::exact("CLOCK_MONOTONIC")),
        ("user_ns", Source::exact("getrusage(RUSAGE_CHILDREN)")),
        (
            "max_pss_bytes",
            Source::sampled("/proc/PID/smaps_rollup Pss", "every 50ms"),
        ),
        (
            "peak_rss_bytes",
            Source::exact("VmHWM of /proc/PID/status at the ptrace exit stop"),
        ),
    ] {
        ev.push((
            0,
            Event::Source {
                figure: figure.into(),
                source,
            },
        ));
    }
    ev.push((
        MS,
        Event::Exec {
            tgid: 100,
            former_tid: 100,
            argv: Some(vec![Arg::from("sh"), Arg::from("-c"), Arg::from("make")]),
        },
    ));
    for &(pid, parent, fork, exec, end, how) in &PROCESSES {
        ev.push((
            fork * MS,
            Event::Fork {
                parent_tgid: parent,
                child_tid: pid,
                child_tgid: pid,
            },
        ));
        if let Some((t, argv)) = exec {
            ev.push((
                t * MS,
                Event::Exec {
                    tgid: pid,
                    former_tid: pid,
                    argv: Some(argv.iter().map(|a| Arg::from(*a)).collect()),
                },
            ));
        }
        if pid == 105 {
            for tid in [106, 107] {
                ev.push((
                    600 * MS,
                    Event::Fork {
                        parent_tgid: 105,
                        child_tid: tid,
                        child_tgid: 105,
                    },
                ));
                ev.push((
                    800 * MS,
                    Event::Exit {
                        tid,
                        tgid: 105,
                        status: None,
                    },
                ));
            }
        }
        ev.push((
            end * MS,
            Event::Accounts {
                tgid: pid,
                peak_rss_bytes: figures(pid, end - 1).map(|(pss, _)| pss + 4 * MIB),
                io: None,
            },
        ));
        ev.push((
            end * MS,
            Event::Exit {
                tid: pid,
                tgid: pid,
                status: Some(how),
            },
        ));
    }
    for k in 0..18 {
        let t = k * 50;
        let per: Vec<ProcessSample> = [100, 101, 102, 103, 104, 105, 108]
            .into_iter()
            .filter_map(|pid| {
                figures(pid, t).map(|(pss, cpu)| ProcessSample {
                    pid,
                    pss_bytes: pss,
                    cpu_ns: Some(cpu),
                })
            })
            .collect();
        let pss: u64 = per.iter().map(|p| p.pss_bytes).sum();
        ev.push((
            t * MS,
            Event::Sample {
                sample: Sample {
                    t_ns: t * MS,
                    pss_bytes: pss,
                    rss_bytes: per.iter().map(|p| p.pss_bytes * 3 / 2).sum(),
                    processes: per.len() as u32,
                    unreadable: 0,
                    per_process: Some(per),
                    // Every third an exact round, the others carried by counters.
                    kind: if k % 3 == 0 {
                        SampleKind::Exact
                    } else {
                        SampleKind::Carried
                    },
                    bound_bytes: None,
                    low_bytes: (k % 3 != 0).then(|| pss - k * 4096),
                    high_bytes: (k % 3 != 0).then(|| pss + k * 4096),
                },
            },
        ));
    }
    ev.push((
        900 * MS,
        Event::Exit {
            tid: 100,
            tgid: 100,
            status: Some(Termination::Exited(0)),
        },
    ));
    ev.push((
        900 * MS,
        Event::RootExit {
            status: Termination::Exited(0),
        },
    ));
    ev.push((
        900 * MS,
        Event::Note {
            text: "a note for the reader".into(),
        },
    ));
    ev.push((
        900 * MS,
        Event::SamplerDone {
            info: Box::new(SamplerInfo {
                mode: "adaptive".into(),
                budget: Some(0.01),
                burst_ns: Some(MS),
                interval_ns: None,
                rounds: 18,
                paid_rounds: 0,
                max_tick_cpu_ns: None,
                effective_interval_ns: Some(50 * MS),
                max_gap_ns: Some(50 * MS),
                max_look_gap_ns: Some(3 * MS),
                cpu_ns: 2 * MS,
                ticks: 850,
                effective_tick_ns: Some(MS),
                tick_cpu_ns: MS,
                exec_settle_ns: Some(MS),
                max_round_cpu_ns: Some(MS),
                tick_debt_ns: Some(5 * MS),
                moments: Some(6),
                max_rounds: Some(0),
                max_rounds_cpu_ns: Some(0),
                exit_marks: Some(true),
            }),
        },
    ));
    ev.push(end(901));
    // Sources emit out of order; the recorder takes them as they come. Keep time order here.
    ev.sort_by_key(|(t, _)| *t);
    ev.into_iter()
        .map(|(t_ns, event)| Stamped { t_ns, event })
        .collect()
}

/// The hand-built compile as a Run.
pub fn build() -> Run {
    Recorder::replay(events())
}

/// A taskstats figure set for a process that lived `life` ms and kept a core busy `busy`
/// percent of it, with peak RSS `rss` MiB.
fn taskstats(life: u64, busy: u64, rss: u64, status: i32) -> Figures {
    let cpu = life * MS * busy / 100;
    Figures {
        user_ns: Some(cpu * 4 / 5),
        sys_ns: Some(cpu / 5),
        cpu_ns: Some(cpu + 123_456),
        run_queue_ns: Some(life * MS / 50),
        blkio_delay_ns: Some(life * MS / 20),
        swap_reclaim_delay_ns: Some(life * MS / 100),
        task_time_ns: Some(life * MS),
        peak_rss_bytes: Some(rss * MIB),
        peak_vm_bytes: Some((rss + 20) * MIB),
        minor_faults: Some(rss * 256),
        major_faults: Some(life / 100),
        voluntary_switches: Some(life / 5),
        involuntary_switches: Some(life / 50),
        read_bytes: Some(life * 4096),
        write_bytes: Some(life * 1024),
        read_char_bytes: Some(life * 8192),
        write_char_bytes: Some(life * 2048),
        exit_status: Some(status),
    }
}

/// The events of the hand-built compile run as root (see the module header).
pub fn accounting_events() -> Vec<Stamped> {
    let account = |event| Event::Accounting { event };
    let mut ev: Vec<(u64, Event)> = events()
        .into_iter()
        .filter(|e| !matches!(e.event, Event::End { .. }))
        .map(|e| (e.t_ns, e.event))
        .collect();
    for (figure, source) in [
        (
            "ledger.taskstats",
            Source::exact("taskstats exit records (one per exiting thread, summed per process)"),
        ),
        (
            "group.memory_peak_bytes",
            Source::exact("cgroup v2 memory.peak of ste's own cgroup"),
        ),
        (
            "group.anon_file",
            Source::sampled("memory.stat of ste's cgroup", "sampled every 20ms"),
        ),
    ] {
        ev.push((
            0,
            Event::Source {
                figure: figure.into(),
                source,
            },
        ));
    }
    ev.push((
        0,
        account(AccountEvent::BeforeRelease {
            before: crate::model::BeforeRelease {
                pid: 100,
                alive_ns: 7_500_000,
                cpu_ns: Some(400_000),
                run_queue_ns: Some(100_000),
                ..Default::default()
            },
        }),
    ));
    ev.push((
        0,
        account(AccountEvent::Delays {
            on: true,
            switched_by_ste: true,
        }),
    ));
    ev.push((
        0,
        account(AccountEvent::Unavailable {
            figure: "pids.peak".into(),
            why: "the pids controller is not enabled for ste's cgroup".into(),
        }),
    ));
    ev.push((
        0,
        account(AccountEvent::Group {
            version: 2,
            dirs: vec!["/sys/fs/cgroup/user.slice/ste-99-1".into()],
        }),
    ));
    // The group's memory at the rounds that raised its usage, anon or page cache maximum.
    for (t, anon, file) in [
        (20, 3, 1),
        (100, 14, 2),
        (300, 70, 6),
        (600, 90, 9),
        (640, 60, 12),
    ] {
        ev.push((
            t * MS,
            account(AccountEvent::GroupSample {
                usage_bytes: (anon + file + 1) * MIB,
                anon_bytes: anon * MIB,
                file_bytes: file * MIB,
            }),
        ));
    }
    // taskstats records at each end; ld (105) has three threads, so three records; the
    // killed child (108) has none (lost, say).
    // Records name their process by its start, as the matcher does for exited ones.
    let record = |t: u64, (pid, start): (i32, u64), f: Figures| {
        (
            t * MS,
            account(AccountEvent::Ledger {
                tgid: pid,
                start_ns: Some(start * MS),
                source: LedgerSource::Taskstats,
                figures: Box::new(f),
            }),
        )
    };
    for &(pid, _, fork, _, end, _) in &PROCESSES {
        let busy = if matches!(pid, 102 | 105) { 90 } else { 5 };
        let rss = figures(pid, end - 1).map_or(1, |(pss, _)| pss / MIB + 4);
        match pid {
            108 => {}
            105 => {
                let thread = Figures {
                    exit_status: None,
                    ..taskstats(200, busy, rss, 0)
                };
                ev.push(record(800, (pid, fork), thread));
                ev.push(record(800, (pid, fork), thread));
                let whole = taskstats(end - fork, busy, rss, 0);
                ev.push(record(end, (pid, fork), whole));
            }
            _ => {
                let whole = taskstats(end - fork, busy, rss, 0);
                ev.push(record(end, (pid, fork), whole));
            }
        }
    }
    ev.push(record(900, (100, 0), taskstats(900, 1, 3, 0)));
    // A daemon the link step left behind: it outlives the command by 300 ms.
    ev.push((
        700 * MS,
        Event::Fork {
            parent_tgid: 105,
            child_tid: 110,
            child_tgid: 110,
        },
    ));
    ev.push((
        701 * MS,
        Event::Exec {
            tgid: 110,
            former_tid: 110,
            argv: Some(vec![Arg::from("ld-cache-daemon"), Arg::from("--detach")]),
        },
    ));
    ev.push(record(1200, (110, 700), taskstats(500, 1, 2, 0)));
    ev.push((
        1200 * MS,
        Event::Exit {
            tid: 110,
            tgid: 110,
            status: Some(Termination::Exited(0)),
        },
    ));
    ev.push((
        1201 * MS,
        account(AccountEvent::GroupEnd {
            end: Box::new(GroupEnd {
                memory_peak_bytes: Some(104 * MIB + 12_345),
                kernel_peak_bytes: None,
                anon_bytes: Some(0),
                file_bytes: Some(12 * MIB),
                cpu_user_ns: Some(640 * MS),
                cpu_sys_ns: Some(160 * MS),
                cpu_ns: Some(800 * MS),
                pids_peak: None,
                oom_kills: Some(0),
            }),
        }),
    ));
    ev.push(end(1201));
    ev.sort_by_key(|(t, _)| *t);
    ev.into_iter()
        .map(|(t_ns, event)| Stamped { t_ns, event })
        .collect()
}

/// The hand-built compile run as root, as a Run.
pub fn build_accounting() -> Run {
    Recorder::replay(accounting_events())
}
