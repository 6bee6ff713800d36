//! The ring-buffer reader: decodes the records the BPF programs write (forks, execs with their
//! argv, exits with status and peak RSS, per-process system-call counts), keeps the live tree
//! through `track::tree`, judges long argvs against /proc, and reports drops with their size.
//!
//! Owns the reader's state (it runs on the thread that loaded the object). Must not load or
//! attach anything: `loading` did.

use super::*;

/// Counter `i` (`CNT_*`) of the kernel's `counters` array. The map is ste's own, so a read
/// fails only on a kernel or ste bug; then ste says so rather than take a loss counter for 0
/// silently.
pub(super) fn read_counter(counters: &Counters, i: u32) -> u64 {
    counters.get(i).unwrap_or_else(|e| {
        unreadable(&format!("counter {i}"), "taken as 0", &e);
        0
    })
}

/// Says on stderr that a BPF map could not be read, and what that did to the figures.
pub(super) fn unreadable(what: &str, so: &str, e: &dyn std::error::Error) {
    crate::output::say(&format!(
        "ste: cannot read {what} from the BPF maps ({e}): {so}"
    ));
}

/// The ring-buffer reader: owns the loaded object (dropping it detaches the programs).
pub(super) struct Reader {
    pub(super) ebpf: Bpf,
    pub(super) ring: RingBuf,
    /// The end of the tree (level-triggered) and the ring (edge-triggered: see [`Reader::run`]).
    pub(super) waiter: Epoll,
    pub(super) counters: Counters,
    /// Dropped records and untracked tasks already reported.
    pub(super) dropped: u64,
    /// The SDT probes' counts, when a uprobe was attached.
    pub(super) sdt: Option<SdtMaps>,
    pub(super) state: State,
}

/// The SDT probe sites and the kernel's counts of their hits (per kind, and sizes), when a
/// site was attached.
pub(super) struct SdtMaps {
    pub(super) plan: Plan,
    pub(super) maps: Option<(SdtTotals, SdtSizes)>,
}

pub(super) type SdtTotals = PerCpuArray<SdtTotal>;
pub(super) type SdtSizes = Hash<SdtSizeKey, u64>;

impl SdtMaps {
    /// What the tree's tasks hit, as an event; every task of the tree has ended, so the counts
    /// are final.
    pub(super) fn event(&self, sizes_dropped: u64) -> Event {
        let Some((totals, sizes)) = &self.maps else {
            return Event::MallocProbes {
                text: self.plan.text_after(),
                counts: None,
            };
        };
        let totals: Vec<(u64, u64, u64)> = (0..self.plan.kinds.len() as u32)
            .map(|k| match totals.get(k) {
                Ok(per_cpu) => per_cpu.iter().fold((0, 0, 0), |(h, s, b), t| {
                    (h + t.hits, s + t.sized, b + t.bytes)
                }),
                Err(e) => {
                    unreadable(&format!("SDT probe kind {k}'s hits"), "taken as 0", &e);
                    (0, 0, 0)
                }
            })
            .collect();
        let sizes: Vec<(u32, u64, u64)> = sizes
            .iter()
            .flatten()
            .map(|(k, n)| (k.kind, k.size, n))
            .collect();
        Event::MallocProbes {
            text: self.plan.text_after(),
            counts: Some(Box::new(self.plan.counts(&totals, &sizes, sizes_dropped))),
        }
    }
}

/// Said where the exit records carry no peak.
pub(super) const NO_PEAK_AT_EXIT: &str = "this kernel traces a process's exit after its memory is released (before Linux 6.16): BPF reads no peak RSS there; each process's peak is sampled (VmHWM) and, as root, taken from taskstats's exit record, written before the memory goes";

pub(super) struct State {
    pub(super) tree: Tree,
    /// Processes whose leader exited before the rest: its end is reported with the process's,
    /// as `wait(2)` reports a leader only once its group is gone.
    pub(super) deferred_leaders: HashSet<i32>,
    pub(super) page_size: u64,
    pub(super) timed: bool,
    /// Whether exit records carry the memory (Linux ≥ 6.16 traces the exit before exit_mm);
    /// else the sampler reads each process's peak and the session keeps taskstats's records.
    pub(super) peaks_from_exit: bool,
    /// The argv of the exec record at the head of the ring, judged by [`Reader::judge_argv`],
    /// for `handle` to take.
    pub(super) judged: Option<Judged>,
    /// Each process's CPU summed from its tasks' last switches, when that program is attached
    /// (the per-process ledger is kept).
    pub(super) last: Option<LastSwitches>,
}

pub(super) enum Judged {
    Argv(Vec<Arg>),
    /// The process was gone (or had no memory left) when read.
    Unread,
    /// The read may be of a later image.
    Doubt,
}

/// An exec record whose argument area was larger than the kernel's copy, read whole from
/// /proc but not yet judged (see `track::argv_check`).
pub(super) struct ToJudge {
    pub(super) tgid: i32,
    /// The /proc read, when it matched the record (its length, and the kernel's copy as its
    /// start).
    pub(super) argv: Judged,
    pub(super) read_start_ns: u64,
}

/// How long a drain after a loss waits at most for the records reserved before it to be
/// filled: a program fills its record in microseconds, with preemption off, so this bounds
/// only a vCPU the host does not run.
const SETTLE_MAX: Duration = Duration::from_millis(10);

/// How long the end of the run waits at most for the last switches of processes that have
/// ended: a task switches away for the last time microseconds after its exit record unless it
/// is preempted on the way (then within a few scheduler ticks); past this, the process has
/// no figure from here (taskstats's where it reads only the CPU; none where it reads the whole
/// ledger), and the run's note counts it.
const LAST_SWITCH_MAX: Duration = Duration::from_millis(20);

impl Reader {
    /// Drains the ring until the run is done. While records are sparse it wakes on the ring's
    /// notification, so a lone exec is seen at once (the sampler reads a new program soon
    /// after its exec); while they keep coming it sleeps [`BATCH`] between drains instead, and
    /// tells the programs so (`CTL_READER_BATCHING`): they then ask the kernel for no
    /// notification, except for a record that takes the data waiting past a quarter of the
    /// ring, which wakes it early. The ring is waited on edge-triggered, so data already
    /// waiting does not keep the reader awake.
    pub(super) fn run(mut self, done: &Done) {
        let mut last_check = Instant::now();
        let mut last_drain = Instant::now();
        let mut batching = false;
        let mut after_batch = false;
        let mut said_batching_failed = false;
        let end_ns = loop {
            // The first wait after a batch is a batch's too: a record written as a program
            // still saw the reader batching asked for no notification, and the records behind
            // it get none either until it is read.
            self.waiter.wait(if batching || after_batch {
                BATCH
            } else {
                DROP_CHECK
            });
            let records = self.drain();
            // Records again within two batches of the last drain: a storm, so batch.
            let was = batching;
            batching = records > 0 && last_drain.elapsed() <= 2 * BATCH;
            after_batch = was && !batching;
            if batching != was
                && let Err(e) = self.counters.set(CTL_READER_BATCHING, u64::from(batching))
                && !std::mem::replace(&mut said_batching_failed, true)
            {
                // Nothing is lost either way, but the programs then ask for a notification of
                // every record, or of none until the ring is a quarter full: said (once, not
                // at every change), not hidden.
                crate::output::say(&format!(
                    "ste: cannot tell the BPF programs whether the reader batches ({e}): EXEC lines may come up to {} ms late",
                    DROP_CHECK.as_millis()
                ));
            }
            last_drain = Instant::now();
            // Also at once when last-switch figures wait for a read of the loss count.
            if last_check.elapsed() >= DROP_CHECK
                || self.state.last.as_ref().is_some_and(LastSwitches::holds)
            {
                self.check_drops();
                last_check = Instant::now();
            }
            if let Some(t) = done.get() {
                // Every exit record was written before its task was reaped.
                self.drain();
                crate::bus::phases::span("ebpf: last switches", || self.last_switches());
                self.check_drops();
                break t;
            }
            self.state.tree.flush();
        };
        if let Some(sdt) = &self.sdt {
            let dropped = read_counter(&self.counters, CNT_SDT_SIZES_FULL);
            self.state.tree.emit(sdt.event(dropped));
        }
        if let Some(last) = self.state.last.as_mut() {
            last.finish();
            if last.without > 0 {
                let text = if last.whole() {
                    format!(
                        "{} of the processes have no figures of CPU, waits, faults, switches or I/O: records of their tasks' last switches were lost or not in by the end",
                        last.without
                    )
                } else {
                    format!(
                        "the CPU of {} of the processes is taskstats's (written before each thread's exit was over): records of their tasks' last switches were lost or not in by the end",
                        last.without
                    )
                };
                self.state.tree.emit(Event::Note { text });
            }
        }
        self.state.tree.finish();
        self.state.tree.flush();
        self.state.tree.sink.send(Msg::TrackerDone {
            t_ns: end_ns,
            error: None,
        });
        // The run is over for the programs too: this thread detaches them now, while it runs
        // anyway (the kernel rewrites the tracepoints' call sites, with a round of interrupts
        // on every CPU), beside the session's end reads and report, rather than leaving it to
        // ste's exit, which the command's parent waits for. The rest of the reader (the maps,
        // the ring's mapping, the tree's state) is left for the exit to free with the rest of
        // ste's memory: freeing it here too measured no faster. (Detaching as an idle-priority
        // thread after the session's word, as ste once did, took the session's CPU; see
        // bench/README.md.)
        self.ebpf.detach();
        std::mem::forget(self);
    }

    /// Handles every record in the ring; returns how many.
    pub(super) fn drain(&mut self) -> usize {
        let mut records = 0;
        loop {
            let state = &mut self.state;
            let mut to_judge = None;
            records += self.ring.drain_while(|record| {
                to_judge = state.read_long_argv(record);
                if to_judge.is_none() {
                    state.handle(record);
                }
                to_judge.is_none()
            });
            let Some(j) = to_judge else { break };
            // The record stays at the head of the ring: the records behind it are what the
            // judgement looks at; the next round hands it to `handle` with the verdict.
            let judged = self.judge_argv(j);
            self.state.judged = Some(judged);
        }
        // Asked after the drain, not at each exec record: a short program's exit is often in
        // the same drain, and it wants no round.
        self.state.tree.handled();
        records
    }

    /// Whether a larger-than-copied argv read from /proc is the record's image's (see
    /// `track::argv_check`): where the process is, then the records written behind its
    /// exec's, then whether the kernel dropped any.
    pub(super) fn judge_argv(&mut self, j: ToJudge) -> Judged {
        let Judged::Argv(argv) = j.argv else {
            return j.argv;
        };
        let dropped_before = self.drops();
        let ring = &self.ring;
        let state = &mut self.state;
        let counters = &self.counters;
        let timed = state.timed;
        let first_later = || {
            let mut first = None;
            let mut head = true;
            ring.peek(|record| {
                if std::mem::take(&mut head) {
                    return true; // the exec being judged
                }
                first = later_of(j.tgid, record, timed);
                first.is_none()
            });
            if drops(counters) > dropped_before {
                first = Some(Later::Lost);
            }
            first
        };
        let verdict = argv_check::judge(j.read_start_ns, &argv_check::WAITS, |wait| {
            // A later exec, or the end, already in the ring decides without a wait or a look
            // (a batch often holds a short process's exit with its exec).
            if let Some(later) = first_later() {
                return (Probe::Unsure, Some(later));
            }
            std::thread::sleep(wait);
            let probe = Probe::of(state.tree.procfs.syscall(j.tgid).ok().flatten());
            (probe, first_later())
        });
        match verdict {
            Verdict::Keep => Judged::Argv(argv),
            _ => Judged::Doubt,
        }
    }

    pub(super) fn drops(&self) -> u64 {
        drops(&self.counters)
    }

    /// Reports records the kernel could not queue and new tasks it could not mark (so did not
    /// follow), and rebuilds the tree from /proc.
    ///
    /// The rebuild must not take a record still on its way for a lost one: a record is
    /// reserved, then filled (200 KB of argv take a while), and the drain stops at the first
    /// one not yet filled, with those behind it. So the records written before the loss was
    /// seen are read first; the processes /proc shows and ste does not know are added; the
    /// records written while /proc was read are read; and only then are the tasks /proc no
    /// longer showed ended, those whose end is still missing. (Ending them at once ended a
    /// process whose exec and exit records were behind a record being filled, and its records
    /// were then ignored: three records' worth lost where one was dropped.)
    pub(super) fn check_drops(&mut self) {
        let now = self.drops();
        if let Some(last) = self.state.last.as_mut() {
            for event in last.checked(now > self.dropped) {
                self.state.tree.emit(Event::Accounting { event });
            }
        }
        if now <= self.dropped {
            return;
        }
        let lost = now - self.dropped;
        self.dropped = now;
        self.drain_settled();
        let scan = self.state.tree.scan();
        let found = self.state.tree.add_found(&scan);
        self.drain_settled();
        let (missed, zombies) = self.state.tree.end_gone(&scan);
        self.state.tree.report_loss(1, Some(lost), found, missed);
        self.state.deferred_leaders.extend(zombies);
    }

    /// Waits for the last switches of the processes that have ended, draining, for at most
    /// [`LAST_SWITCH_MAX`]: the command's last process is reaped (and the run ends) as soon
    /// as it has exited, which may be before it has left its CPU.
    fn last_switches(&mut self) {
        let start = Instant::now();
        while self.state.last.as_ref().is_some_and(LastSwitches::waiting)
            && start.elapsed() < LAST_SWITCH_MAX
        {
            std::thread::sleep(Duration::from_micros(20));
            self.drain();
        }
    }

    /// Drains every record reserved until now, waiting for those still being filled, for at
    /// most [`SETTLE_MAX`].
    fn drain_settled(&mut self) {
        let until = self.ring.written();
        let start = Instant::now();
        loop {
            self.drain();
            if self.ring.drained_to(until) || start.elapsed() >= SETTLE_MAX {
                return;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

/// Records the kernel could not queue, and new tasks it could not mark, so far.
pub(super) fn drops(counters: &Counters) -> u64 {
    read_counter(counters, CNT_DROPPED) + read_counter(counters, CNT_UNTRACKED)
}

/// What a record written after an exec of `tgid` says of that exec's argv read (see
/// `track::argv_check`): another exec of the process, or its end.
pub(super) fn later_of(tgid: i32, record: &[u8], timed: bool) -> Option<Later> {
    match decode(record, timed)? {
        Record::Exec { tgid: t, .. } if t == tgid => Some(Later::Exec),
        Record::Exit {
            tgid: t,
            ts,
            group_dead: true,
            ..
        } if t == tgid => Some(Later::Exit {
            ts_ns: ts,
            last: true,
        }),
        _ => None,
    }
}

/// One ring-buffer record, decoded (layouts: `bpf/ste.bpf.c`).
#[derive(Debug, PartialEq)]
pub(super) enum Record<'a> {
    Fork {
        parent_tgid: i32,
        child_tid: i32,
        child_tgid: i32,
        ts: u64,
    },
    Exec {
        tgid: i32,
        former_tid: i32,
        ts: u64,
        argv: &'a [u8],
        /// The argument area was larger than the kernel copied.
        truncated: bool,
        /// The argument area's size.
        total: u64,
    },
    Exit {
        tid: i32,
        tgid: i32,
        ts: u64,
        /// The wait status of the process, when this was its last thread.
        status: Option<i32>,
        /// VmHWM and VmPeak in pages, when this was the last thread and its memory was still
        /// attached.
        hiwater_pages: Option<(u64, u64)>,
        group_dead: bool,
    },
    Calls {
        tgid: i32,
        calls: Vec<CallCount>,
    },
    /// A task left a CPU for the last time: its runtime is final.
    LastSwitch {
        tgid: i32,
        ts: u64,
        cpu: Switched,
    },
}

/// A call counter of the kernel's arrays as a model count (`idx`: nr, or 512 + nr for compat).
pub(super) fn call_count(
    idx: u32,
    calls: u64,
    errors: u64,
    ns: u64,
    max_ns: u64,
    timed: bool,
) -> CallCount {
    CallCount {
        nr: idx % (NIDX / 2),
        compat: idx >= NIDX / 2,
        calls,
        errors,
        total_ns: timed.then_some(ns),
        max_ns: timed.then_some(max_ns),
    }
}

pub(super) fn decode(b: &[u8], timed: bool) -> Option<Record<'_>> {
    match u32_at(b, 0)? {
        EV_FORK => Some(Record::Fork {
            parent_tgid: i32_at(b, 4)?,
            child_tid: i32_at(b, 8)?,
            child_tgid: i32_at(b, 12)?,
            ts: u64_at(b, 16)?,
        }),
        EV_EXEC => {
            let len = u32_at(b, 12)? as usize;
            let total = u64_at(b, 24)?;
            Some(Record::Exec {
                tgid: i32_at(b, 4)?,
                former_tid: i32_at(b, 8)?,
                ts: u64_at(b, 16)?,
                argv: b.get(32..32 + len)?,
                truncated: total > len as u64,
                total,
            })
        }
        EV_EXIT => {
            let flags = u32_at(b, 12)?;
            let group_dead = flags & EXIT_GROUP_DEAD != 0;
            Some(Record::Exit {
                tid: i32_at(b, 4)?,
                tgid: i32_at(b, 8)?,
                ts: u64_at(b, 16)?,
                status: group_dead.then_some(i32_at(b, 24)?),
                hiwater_pages: if group_dead && flags & EXIT_HAS_MM != 0 {
                    Some((u64_at(b, 32)?, u64_at(b, 40)?))
                } else {
                    None
                },
                group_dead,
            })
        }
        EV_LAST_SWITCH => Some(Record::LastSwitch {
            tgid: i32_at(b, 8)?,
            ts: u64_at(b, 16)?,
            cpu: Switched {
                runtime_ns: u64_at(b, 24)?,
                utime_ns: u64_at(b, 32)?,
                stime_ns: u64_at(b, 40)?,
                run_delay_ns: u64_at(b, 48)?,
                nvcsw: u64_at(b, 56)?,
                nivcsw: u64_at(b, 64)?,
                min_flt: u64_at(b, 72)?,
                maj_flt: u64_at(b, 80)?,
                rchar: u64_at(b, 88)?,
                wchar: u64_at(b, 96)?,
                read_bytes: u64_at(b, 104)?,
                write_bytes: u64_at(b, 112)?,
                blkio_delay_ns: u64_at(b, 120)?,
                reclaim_delay_ns: u64_at(b, 128)?,
            },
        }),
        EV_CALLS => {
            let n = u32_at(b, 12)? as usize;
            let calls = (0..n)
                .map(|i| {
                    let e = 24 + i * 40;
                    Some(call_count(
                        u32_at(b, e)?,
                        u64_at(b, e + 8)?,
                        u64_at(b, e + 16)?,
                        u64_at(b, e + 24)?,
                        u64_at(b, e + 32)?,
                        timed,
                    ))
                })
                .collect::<Option<Vec<_>>>()?;
            Some(Record::Calls {
                tgid: i32_at(b, 8)?,
                calls,
            })
        }
        _ => None,
    }
}

impl State {
    /// An exec record of the tree whose argument area was larger than the kernel's copy and
    /// that is not judged yet: read it whole from /proc now, to be judged.
    pub(super) fn read_long_argv(&mut self, bytes: &[u8]) -> Option<ToJudge> {
        let Some(Record::Exec {
            tgid,
            argv,
            truncated: true,
            total,
            ..
        }) = decode(bytes, self.timed)
        else {
            return None;
        };
        if self.judged.is_some() || !self.tree.has_process(tgid) {
            return None;
        }
        // One read of the whole area (one image), which must be as long as the record says
        // and begin with what the kernel copied.
        let read_start_ns = crate::bus::sink::monotonic_ns();
        let read = self.tree.procfs.cmdline_whole(tgid, total as usize);
        let argv = match read {
            Ok(b) if b.len() as u64 == total && b.starts_with(argv) => {
                Judged::Argv(from_kernel::argv(parse_cmdline(b)))
            }
            Ok(b) if !b.is_empty() => Judged::Doubt,
            _ => Judged::Unread,
        };
        Some(ToJudge {
            tgid,
            argv,
            read_start_ns,
        })
    }

    pub(super) fn handle(&mut self, bytes: &[u8]) {
        let Some(rec) = decode(bytes, self.timed) else {
            return;
        };
        let clock = self.tree.sink.clock();
        match rec {
            Record::Fork {
                parent_tgid,
                child_tid,
                child_tgid,
                ts,
            } => {
                let t = clock.from_monotonic(ts);
                if child_tid == child_tgid {
                    self.tree.add_process(t, parent_tgid, child_tid);
                } else {
                    self.tree.add_thread(t, child_tgid, child_tid);
                }
                if let Some(last) = self.last.as_mut() {
                    if child_tid == child_tgid {
                        last.process_started(child_tid, t);
                    } else {
                        last.thread_started(child_tgid, t);
                    }
                }
            }
            Record::Exec {
                tgid,
                former_tid,
                ts,
                argv,
                truncated,
                ..
            } => {
                if self.tree.exec(tgid).is_none() {
                    // The programs write records only of the tasks they follow (each fork of
                    // the tree is marked), so a process the tree does not know had its fork
                    // record lost (counted): adopted here, its exec and end are not lost too.
                    self.tree.adopt(tgid);
                    self.tree.exec(tgid);
                }
                self.deferred_leaders.remove(&tgid);
                let t = clock.from_monotonic(ts);
                let (argv, doubtful) = match (truncated, self.judged.take()) {
                    // Larger than the kernel copies: read whole from /proc and judged.
                    (true, Some(Judged::Argv(argv))) => (Some(argv), false),
                    (true, Some(Judged::Unread)) => (None, false),
                    (true, _) => (None, true),
                    (false, _) => (
                        Some(from_kernel::argv(parse_cmdline(argv))).filter(|a| !a.is_empty()),
                        false,
                    ),
                };
                self.tree.emit_at(
                    t,
                    Event::Exec {
                        tgid,
                        former_tid,
                        argv,
                    },
                );
                if doubtful {
                    self.tree.emit_at(t, argv_check::doubt());
                }
            }
            Record::Exit {
                tid,
                tgid,
                ts,
                status,
                hiwater_pages,
                group_dead,
            } => {
                let t = clock.from_monotonic(ts);
                if !group_dead {
                    if tid == tgid && self.tree.threads(tgid) > 1 {
                        self.deferred_leaders.insert(tgid);
                    } else {
                        self.tree.exit(t, tid, None);
                    }
                    return;
                }
                self.accounts(t, tgid, hiwater_pages.map(|(rss, _)| rss));
                if let Some(last) = self.last.as_mut() {
                    let page = self.page_size;
                    last.ended(
                        tgid,
                        hiwater_pages.map(|(rss, vm)| Peaks {
                            rss_bytes: rss * page,
                            vm_bytes: vm * page,
                        }),
                    );
                }
                let status = status.and_then(Termination::from_wait_status);
                self.tree
                    .exit(t, tid, if tid == tgid { status } else { None });
                if tid != tgid && self.deferred_leaders.remove(&tgid) {
                    self.tree.exit(t, tgid, status);
                }
            }
            Record::Calls { tgid, calls } => {
                if self.tree.has_process(tgid) {
                    self.tree.emit(Event::SyscallsOf { tgid, calls });
                }
            }
            Record::LastSwitch { tgid, ts, cpu } => {
                if let Some(last) = self.last.as_mut() {
                    last.switched(tgid, clock.from_monotonic(ts), cpu);
                }
            }
        }
    }

    /// The peak RSS of a process that just ended, read in the kernel; on a kernel that traces
    /// the exit after the memory is gone, the sampler reads peaks from then on.
    pub(super) fn accounts(&mut self, t: u64, tgid: i32, hiwater_pages: Option<u64>) {
        match hiwater_pages {
            Some(pages) => {
                let bytes = pages * self.page_size;
                self.tree.emit(Event::Accounts {
                    tgid,
                    peak_rss_bytes: Some(bytes),
                    io: None,
                });
                // Growth after the sampler's last read of it may have made the tree's peak.
                self.tree.sampler.exit_peak(tgid, t, bytes);
            }
            // A kernel that said it traces the exit with the memory still attached, and did
            // not (a version ste misread).
            None if self.peaks_from_exit => {
                self.peaks_from_exit = false;
                self.tree.sampler.read_peaks();
                self.tree.emit(Event::Note {
                    text: NO_PEAK_AT_EXIT.into(),
                });
            }
            None => {}
        }
    }
}

#[cfg(test)]
mod tests;
