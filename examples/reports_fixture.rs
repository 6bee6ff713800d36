//! Workloads for the report tests and benchmarks (`tests/it/reports.rs`, `bench/reports.sh`).
//!
//!   synth-record PROCESSES OUT   write a record (as `ste record` does) of a synthetic parallel
//!                                build with exactly PROCESSES processes: make → sh → cc → cc1
//!                                and as, eight jobs at a time, sampled every 100 ms, run as root
//!                                (a cgroup of its own, a taskstats record for every process).
//!                                Deterministic: the same arguments always give the same file.
//!     --no-accounting            without the cgroup and taskstats events (as an unprivileged
//!                                netlink run, or a record of a ste before exact accounting)
//!
//! A record this size cannot be made by running a real build in a test, and the reports only
//! see the record, so a synthetic one measures them as well as a real one would.

use ste::bus::event::{Event, Stamped};
use ste::ledger::record::Recording;
use ste::model::{
    AccountEvent, Arg, Figures, GroupEnd, LedgerSource, ProcessSample, Sample, SamplerInfo, Source,
    Termination,
};
use ste::report::style::Style;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match (args.first().map(String::as_str), args.get(1), args.get(2)) {
        (Some("synth-record"), Some(n), Some(out)) => {
            let n: usize = n.parse().unwrap_or_else(|_| usage());
            let accounting = match args.get(3).map(String::as_str) {
                None => true,
                Some("--no-accounting") => false,
                Some(_) => usage(),
            };
            synth_record(n.max(2), std::path::Path::new(out), accounting);
        }
        _ => usage(),
    }
}

fn usage() -> ! {
    eprintln!("usage: reports_fixture synth-record PROCESSES OUT [--no-accounting]");
    std::process::exit(2)
}

/// A small deterministic generator (xorshift64*), so records are reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo)
    }
}

const MS: u64 = 1_000_000;
const MIB: u64 = 1 << 20;

struct Proc {
    pid: i32,
    start: u64,
    end: u64,
    pss: u64,
    /// Share of a core it keeps busy (cc1 compiles; the others wait).
    busy: f64,
}

/// CPU a process has used by `t`.
fn cpu_of(p: &Proc, t: u64) -> u64 {
    (t.saturating_sub(p.start) as f64 * p.busy) as u64
}

type Step = (Option<Vec<Arg>>, u64, u64, u64);

fn argv(words: &[&str]) -> Option<Vec<Arg>> {
    Some(words.iter().map(|w| Arg::from(*w)).collect())
}

/// What ste emits before the command runs as root: sources, delay accounting (off), the
/// cgroup.
fn accounting_start(ev: &mut Vec<(u64, Event)>) {
    ev.push((
        0,
        Event::Source {
            figure: "ledger.taskstats".into(),
            source: Source::exact("taskstats exit records (synthetic)"),
        },
    ));
    for event in [
        AccountEvent::Delays {
            on: false,
            switched_by_ste: false,
        },
        AccountEvent::Group {
            version: 1,
            dirs: vec!["/sys/fs/cgroup/memory/ste-synthetic".into()],
        },
    ] {
        ev.push((0, Event::Accounting { event }));
    }
}

/// A taskstats record for process `pid` (started at `start`) that lived `life` ns, kept a core
/// `busy` percent busy and peaked at `rss` bytes.
fn taskstats(pid: i32, start: u64, life: u64, busy: u64, rss: u64) -> Event {
    let cpu = life * busy / 100;
    Event::Accounting {
        event: AccountEvent::Ledger {
            tgid: pid,
            start_ns: Some(start),
            source: LedgerSource::Taskstats,
            figures: Box::new(Figures {
                user_ns: Some(cpu / 10 * 9 / MS * MS),
                sys_ns: Some(cpu / 10 / MS * MS),
                cpu_ns: Some(cpu),
                run_queue_ns: Some(life / 40),
                blkio_delay_ns: Some(0),
                swap_reclaim_delay_ns: Some(0),
                task_time_ns: Some(life),
                peak_rss_bytes: Some(rss),
                peak_vm_bytes: Some(rss + 40 * MIB),
                minor_faults: Some(rss / 4096),
                major_faults: Some(life / (50 * MS)),
                voluntary_switches: Some(life / (2 * MS)),
                involuntary_switches: Some(cpu / (4 * MS)),
                read_bytes: Some(life / MS * 4096),
                write_bytes: Some(life / MS * 512),
                read_char_bytes: Some(life / MS * 8192),
                write_char_bytes: Some(life / MS * 1024),
                exit_status: Some(0),
            }),
        },
    }
}

fn synth_record(n: usize, out: &std::path::Path, accounting: bool) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut ev: Vec<(u64, Event)> = Vec::new();
    let root = 1000;
    let command = argv(&["make", "-j8"]).unwrap_or_default();
    ev.push((
        0,
        Event::Start {
            command: command.clone(),
            tracker: "ptrace".into(),
            pid: root,
            ppid: 1,
        },
    ));
    ev.push((
        0,
        Event::Source {
            figure: "max_pss_bytes".into(),
            source: Source::sampled(
                "/proc/PID/smaps_rollup Pss, summed over the live tree",
                "synthetic: every 100 ms",
            ),
        },
    ));
    ev.push((
        MS,
        Event::Exec {
            tgid: root,
            former_tid: root,
            argv: Some(command),
        },
    ));
    accounting_start(&mut ev);

    let mut procs = vec![Proc {
        pid: root,
        start: 0,
        end: 0,
        pss: 3 * MIB,
        busy: 0.01,
    }];
    let mut next_pid = root + 1;
    let mut slots = [2 * MS; 8];
    let mut made = 1;
    let mut job = 0;
    while made < n {
        // The job goes to the slot that frees first.
        let (s, &t0) = slots
            .iter()
            .enumerate()
            .min_by_key(|(_, t)| **t)
            .expect("eight slots");
        let file = format!("src/unit{job}.c");
        let obj = format!("obj/unit{job}.o");
        let cmd = format!("cc -O2 -g -Wall -c {file} -o {obj}");
        let compile = rng.range(40, 400) * MS;
        // argv; start and end after the job's start; PSS.
        let plan: [Step; 4] = [
            (argv(&["/bin/sh", "-c", &cmd]), 0, compile + 6 * MS, MIB),
            (
                argv(&["cc", "-O2", "-g", "-Wall", "-c", &file, "-o", &obj]),
                MS,
                compile + 5 * MS,
                2 * MIB,
            ),
            (
                argv(&[
                    "/usr/lib/gcc/x86_64-linux-gnu/12/cc1",
                    "-quiet",
                    "-imultiarch",
                    "x86_64-linux-gnu",
                    &file,
                    "-quiet",
                    "-dumpdir",
                    "obj/",
                    "-dumpbase",
                    "unit.c",
                    "-dumpbase-ext",
                    ".c",
                    "-mtune=generic",
                    "-march=x86-64",
                    "-g",
                    "-O2",
                    "-Wall",
                    "-fasynchronous-unwind-tables",
                    "-o",
                    "/tmp/ccXyZ.s",
                ]),
                2 * MS,
                compile,
                rng.range(20, 180) * MIB,
            ),
            (
                argv(&["as", "--64", "-o", &obj, "/tmp/ccXyZ.s"]),
                compile + 2 * MS,
                compile + 4 * MS,
                4 * MIB,
            ),
        ];
        let sh_pid = next_pid;
        for (k, (words, from, to, pss)) in plan.into_iter().enumerate() {
            if made >= n {
                break;
            }
            let pid = next_pid;
            next_pid += 1;
            made += 1;
            let parent = match k {
                0 => root,
                1 => sh_pid,
                _ => sh_pid + 1,
            };
            let (start, end) = (t0 + from, t0 + to);
            ev.push((
                start,
                Event::Fork {
                    parent_tgid: parent,
                    child_tid: pid,
                    child_tgid: pid,
                },
            ));
            ev.push((
                start + 200_000,
                Event::Exec {
                    tgid: pid,
                    former_tid: pid,
                    argv: words,
                },
            ));
            let failed = job % 997 == 3 && k == 2;
            ev.push((
                end,
                Event::Accounts {
                    tgid: pid,
                    peak_rss_bytes: Some(pss + 2 * MIB),
                    io: None,
                },
            ));
            let busy = if k == 2 { 90 } else { 1 };
            ev.push((end, taskstats(pid, start, end - start, busy, pss + 2 * MIB)));
            ev.push((
                end,
                Event::Exit {
                    tid: pid,
                    tgid: pid,
                    status: Some(Termination::Exited(i32::from(failed))),
                },
            ));
            procs.push(Proc {
                pid,
                start,
                end,
                pss,
                busy: if k == 2 { 0.9 } else { 0.01 },
            });
        }
        slots[s] = t0 + compile + 7 * MS;
        job += 1;
    }
    let end = slots.iter().copied().max().unwrap_or(0) + 5 * MS;
    procs[0].end = end;

    // A sampling round every 100 ms over the live processes, with their CPU so far.
    let mut rounds = 0;
    let mut t = 0;
    let mut by_start: Vec<&Proc> = procs.iter().collect();
    by_start.sort_by_key(|p| p.start);
    let (mut next, mut live) = (0, Vec::<&Proc>::new());
    let mut group_max = 0;
    while t < end {
        while next < by_start.len() && by_start[next].start <= t {
            live.push(by_start[next]);
            next += 1;
        }
        live.retain(|p| t < p.end);
        let per: Vec<ProcessSample> = live
            .iter()
            .map(|p| ProcessSample {
                pid: p.pid,
                pss_bytes: p.pss * (t - p.start + 50 * MS).min(200 * MS) / (200 * MS),
                cpu_ns: Some(cpu_of(p, t) / (10 * MS) * (10 * MS)),
            })
            .collect();
        // The cgroup's memory: the tree's PSS plus a page cache that grows with the objects.
        let pss: u64 = per.iter().map(|p| p.pss_bytes).sum();
        let file = 8 * MIB + t / MS * 4096;
        if pss + file > group_max {
            group_max = pss + file;
            ev.push((
                t,
                Event::Accounting {
                    event: AccountEvent::GroupSample {
                        usage_bytes: pss + file + MIB,
                        anon_bytes: pss,
                        file_bytes: file,
                    },
                },
            ));
        }
        ev.push((
            t,
            Event::Sample {
                sample: Sample {
                    t_ns: t,
                    pss_bytes: per.iter().map(|p| p.pss_bytes).sum(),
                    rss_bytes: per.iter().map(|p| p.pss_bytes * 3 / 2).sum(),
                    processes: per.len() as u32,
                    unreadable: 0,
                    per_process: Some(per),
                    ..Default::default()
                },
            },
        ));
        rounds += 1;
        t += 100 * MS;
    }
    ev.push((end, taskstats(root, 0, end, 1, 5 * MIB)));
    ev.push((
        end,
        Event::Exit {
            tid: root,
            tgid: root,
            status: Some(Termination::Exited(0)),
        },
    ));
    ev.push((
        end,
        Event::Accounting {
            event: AccountEvent::GroupEnd {
                end: Box::new(GroupEnd {
                    memory_peak_bytes: Some(group_max + 3 * MIB),
                    kernel_peak_bytes: Some(2 * MIB),
                    anon_bytes: Some(0),
                    file_bytes: Some(8 * MIB + end / MS * 4096),
                    cpu_user_ns: None,
                    cpu_sys_ns: None,
                    cpu_ns: None,
                    pids_peak: Some(40),
                    oom_kills: Some(0),
                }),
            },
        },
    ));
    ev.push((
        end,
        Event::RootExit {
            status: Termination::Exited(0),
        },
    ));
    ev.push((
        end,
        Event::SamplerDone {
            info: Box::new(SamplerInfo {
                mode: "fixed".into(),
                budget: None,
                burst_ns: None,
                interval_ns: Some(100 * MS),
                rounds,
                effective_interval_ns: Some(100 * MS),
                max_gap_ns: Some(100 * MS),
                cpu_ns: rounds * MS,
                ..Default::default()
            }),
        },
    ));
    let cpu: u64 = procs.iter().map(|p| cpu_of(p, p.end)).sum();
    ev.push((
        end,
        Event::End {
            user_ns: cpu * 9 / 10,
            sys_ns: cpu / 10,
            ste_cpu_ns: end / 50,
            ste_max_rss_bytes: 8 * MIB,
            stopped_waiting: None,
        },
    ));
    if !accounting {
        ev.retain(|(_, e)| match e {
            Event::Accounting { .. } => false,
            Event::Source { figure, .. } => !figure.starts_with("ledger."),
            _ => true,
        });
    }
    ev.sort_by_key(|(t, _)| *t);

    let recording = Recording::create(
        out,
        Style {
            width: 80,
            color: false,
            fit: true,
        },
    )
    .unwrap_or_else(|e| panic!("cannot create {}: {e}", out.display()));
    let mut tap = recording.tap();
    for (t_ns, event) in ev {
        tap(&Stamped { t_ns, event });
    }
    drop(tap);
    recording
        .finish()
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", out.display()));
}
