//! The memory sampler: PSS from `/proc/PID/smaps_rollup`, summed over the live tree, on a
//! clock that keeps the sampler within a CPU budget.
//!
//! Owns the set of live processes to read (trackers tell it about forks, execs and ends), the
//! budget arithmetic and the sampling thread. It emits `Sample` events and never formats.
//!
//! Cost model (KERNEL-NOTES): a rollup read costs ~60 µs plus ~80 ns per resident page, so one
//! round over a 1 GiB process costs ~19 ms. The budget is a token bucket: CPU time accrues at
//! `budget` × wall time, a round spends what it measurably cost (thread CPU clock), and a round
//! runs when the bucket holds its expected cost. Rounds are also asked for at fork/exec/exit;
//! they run when the bucket allows. A tracker that can stop an exiting process while its memory
//! is still attached (ptrace) calls [`Sampler::at_exit`], which takes a round there only if the
//! exiting process could raise the peak, so short runs such as `fill` still get their peak; the
//! round reads the exiting process while it waits and the others once it is let go.

use crate::event::Event;
use crate::kernel::proc::{ProcFs, Rollup};
use crate::model::{ProcessSample, Sample, SamplerInfo, Source};
use crate::sink::{Sink, thread_cpu_ns};
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::Duration;

/// How the sampler is paced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pace {
    /// Keep within this fraction of one core.
    Budget(f64),
    /// A fixed period, whatever it costs.
    Fixed(Duration),
}

/// A source that rides on the sampler's rounds (`--maps-at-peak`, `--malloc`): it sees each
/// process read and each round's outcome, and execs. Registered before the sampler starts.
pub trait RoundObserver: Send + Sync {
    /// Process `pid` was read in the round now running. Runs inside the round's measured CPU
    /// (so its cost counts against the sampler's budget): keep it to a few microseconds.
    fn process(&self, _t_ns: u64, _pid: i32, _rollup: &Rollup) {}
    /// The round is over. Runs outside the round's measured CPU: an observer that does more
    /// than a few microseconds of work here keeps its own budget and reports its cost.
    fn round_done(&self, _round: &RoundInfo<'_>) {}
    /// Process `pid` exec'd (called by the tracker; under ptrace, at the exec stop).
    fn exec(&self, _pid: i32) {}
    /// Process `pid` ended (called by the tracker once it is gone).
    fn ended(&self, _pid: i32) {}
}

/// The outcome of one round, for observers.
pub struct RoundInfo<'a> {
    pub t_ns: u64,
    /// PSS summed over the processes read.
    pub pss_bytes: u64,
    /// The sum is higher than every earlier round's.
    pub new_high: bool,
    /// The round was taken at this process's ptrace exit stop (its memory still attached).
    pub exit_stop: Option<i32>,
    /// Each process read, with its PSS.
    pub pss_by_pid: &'a [(i32, u64)],
}

/// Rounds are never closer than this, nor closer than `elapsed / MAX_ROUNDS_SCALE`, so a run of
/// an hour keeps a bounded number of samples.
const MIN_INTERVAL_NS: u64 = 1_000_000;
const MAX_ROUNDS_SCALE: u64 = 2_000;

#[derive(Default, Clone, Copy)]
struct Cached {
    pss: u64,
    /// Last `VmHWM` reported for it (when reading peaks).
    hwm: u64,
    /// Its smaps_rollup was refused (a setuid or non-dumpable program). Only an exec can
    /// change that, so it is not retried until then: failing is cheap, and retrying every
    /// round would spin the sampler at its fastest pace for nothing.
    unreadable: bool,
    /// The root before its first exec: still a copy of ste waiting to exec the command, so
    /// its memory is ste's, not the command's. Not read until it execs.
    before_exec: bool,
}

struct State {
    live: BTreeMap<i32, Cached>,
    stop: bool,
    nudged: bool,
    tokens_ns: f64,
    last_refill_ns: u64,
    /// Expected cost of the next round (ns of CPU), from the last one.
    round_cost_ns: f64,
    last_round_ns: Option<u64>,
    first_round_ns: Option<u64>,
    max_gap_ns: u64,
    rounds: u64,
    cpu_ns: u64,
    max_pss: u64,
}

pub struct Sampler {
    pace: Pace,
    sink: Sink,
    state: Mutex<State>,
    wake: Condvar,
    /// Serialises rounds taken by the sampling thread and by trackers at an exit stop.
    round: Mutex<ProcFs>,
    /// Also read each process's `VmHWM` every round, for trackers that cannot read it when the
    /// process exits.
    read_peaks: std::sync::atomic::AtomicBool,
    /// The sampling thread, joined by [`Sampler::stop`].
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    observers: RwLock<Vec<Arc<dyn RoundObserver>>>,
}

impl Sampler {
    pub fn new(pace: Pace, sink: Sink) -> Arc<Sampler> {
        let burst = burst_ns(pace, 0.0);
        Arc::new(Sampler {
            pace,
            sink,
            state: Mutex::new(State {
                live: BTreeMap::new(),
                stop: false,
                nudged: false,
                tokens_ns: burst,
                last_refill_ns: 0,
                round_cost_ns: 0.0,
                last_round_ns: None,
                first_round_ns: None,
                max_gap_ns: 0,
                rounds: 0,
                cpu_ns: 0,
                max_pss: 0,
            }),
            wake: Condvar::new(),
            round: Mutex::new(ProcFs::default()),
            read_peaks: std::sync::atomic::AtomicBool::new(false),
            thread: Mutex::new(None),
            observers: RwLock::new(Vec::new()),
        })
    }

    /// Makes every round also read `VmHWM` (~15 µs per process) and report it when it grew:
    /// the high-water mark as of the last round before each process exits.
    pub fn read_peaks(&self) {
        self.read_peaks
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.sink.emit(Event::Source {
            figure: "peak_rss_bytes".into(),
            source: Source::sampled(
                "VmHWM of /proc/PID/status, read at every sampling round",
                "the kernel's high-water mark as of the last round before the process exited; growth after that round is missed",
            ),
        });
    }

    /// Adds an observer of every round (before [`Sampler::spawn`]).
    pub fn observe(&self, o: Arc<dyn RoundObserver>) {
        self.observers.write().expect("observers lock").push(o);
    }

    fn observers(&self) -> Vec<Arc<dyn RoundObserver>> {
        self.observers.read().expect("observers lock").clone()
    }

    /// Declares where the memory curve comes from.
    pub fn declare_source(&self) {
        let note = match self.pace {
            Pace::Budget(b) => format!(
                "sampled adaptively within {} of a core, and at fork/exec/exit",
                crate::units::percent(b)
            ),
            Pace::Fixed(d) => format!(
                "sampled every {}",
                crate::units::duration_human(d.as_nanos() as u64)
            ),
        };
        self.sink.emit(Event::Source {
            figure: "max_pss_bytes".into(),
            source: Source::sampled(
                "/proc/PID/smaps_rollup Pss, summed over the live tree",
                note.clone(),
            ),
        });
        self.sink.emit(Event::Source {
            figure: "samples.per_process.pss_bytes".into(),
            source: Source::sampled("/proc/PID/smaps_rollup Pss of each live process", note),
        });
        self.sink.emit(Event::Source {
            figure: "samples.per_process.cpu_ns".into(),
            source: Source::sampled(
                "/proc/PID/stat utime + stime of each live process, at each sampling round",
                "in clock ticks (10 ms); CPU of a process that starts and ends between two rounds is not seen, nor its last interval",
            ),
        });
    }

    /// Starts the sampling thread.
    /// Starts the sampling thread, which keeps only the capabilities `role` keeps.
    pub fn spawn(self: &Arc<Self>, role: crate::privilege::Role) -> std::io::Result<()> {
        let me = Arc::clone(self);
        let handle = std::thread::Builder::new()
            .name("ste-sampler".into())
            .spawn(move || {
                crate::privilege::limit_or_say(role, &me.sink);
                me.run()
            })?;
        *self.thread.lock().expect("sampler thread lock") = Some(handle);
        Ok(())
    }

    /// A process joined the tree.
    pub fn process_started(&self, tgid: i32) {
        let mut st = self.state.lock().expect("sampler lock");
        st.live.insert(tgid, Cached::default());
        self.nudge(&mut st);
    }

    /// The command's root process, forked by ste and not yet exec'd: counted from its exec.
    pub fn root_started(&self, tgid: i32) {
        let mut st = self.state.lock().expect("sampler lock");
        st.live.insert(
            tgid,
            Cached {
                before_exec: true,
                ..Cached::default()
            },
        );
    }

    /// A process exec'd: its memory changed completely.
    pub fn process_exec(&self, tgid: i32) {
        self.exec_stopped(tgid);
        self.exec_done(tgid);
    }

    /// The observers' part of an exec, for a tracker that holds the process at its exec stop:
    /// called there, before the new image runs.
    pub fn exec_stopped(&self, tgid: i32) {
        for o in self.observers.read().expect("observers lock").iter() {
            o.exec(tgid);
        }
    }

    /// The sampler's own part of an exec: the process is readable again, and a round is asked
    /// for. A tracker that stops at the exec calls it once the process runs again.
    pub fn exec_done(&self, tgid: i32) {
        let mut st = self.state.lock().expect("sampler lock");
        if let Some(c) = st.live.get_mut(&tgid) {
            c.unreadable = false;
            c.before_exec = false;
        }
        self.nudge(&mut st);
    }

    /// A process is gone.
    pub fn process_ended(&self, tgid: i32) {
        for o in self.observers.read().expect("observers lock").iter() {
            o.ended(tgid);
        }
        let mut st = self.state.lock().expect("sampler lock");
        st.live.remove(&tgid);
        self.nudge(&mut st);
    }

    /// Asks for a round soon. The sampling thread is woken only when the budget allows one
    /// now: in a fork storm, waking it for nothing would steal CPU from the workload and from
    /// the tracker.
    fn nudge(&self, st: &mut State) {
        st.nudged = true;
        let now = self.sink.now_ns();
        self.refill(st, now);
        if self.wait_before_round(st, now) == 0 {
            self.wake.notify_one();
        }
    }

    /// Called by a tracker while process `tgid` is stopped in its exit with its memory still
    /// attached, with the resident size it read there (`VmRSS`). Takes a round when that
    /// memory could raise the peak and the budget is not overdrawn by more than a round;
    /// otherwise costs nothing. The round reads `tgid` at once; the tracker lets the process
    /// go and then calls [`ExitRound::finish`], which reads the other processes. With
    /// observers (`--maps-at-peak`, `--malloc`), which look at the exiting memory when the
    /// round is done, the whole round is taken before it returns.
    pub fn at_exit(&self, tgid: i32, rss_bytes: u64) -> Option<ExitRound<'_>> {
        {
            let mut st = self.state.lock().expect("sampler lock");
            let others: u64 = st
                .live
                .iter()
                .filter(|(p, _)| **p != tgid)
                .map(|(_, c)| c.pss)
                .sum();
            let now = self.sink.now_ns();
            self.refill(&mut st, now);
            let fixed = matches!(self.pace, Pace::Fixed(_));
            // The exit stop is the last chance to see this memory, so the round may go up to
            // one round into debt; the debt delays the next periodic round, so the budget still
            // holds over time.
            if others + rss_bytes <= st.max_pss || (!fixed && st.tokens_ns < -st.round_cost_ns) {
                return None;
            }
        }
        let round = self.begin_round(Some(tgid));
        if round.observers.is_empty() {
            return Some(ExitRound(round));
        }
        self.end_round(round);
        None
    }

    /// Stops the thread and reports how sampling went.
    pub fn stop(&self) -> SamplerInfo {
        {
            let mut st = self.state.lock().expect("sampler lock");
            st.stop = true;
            self.wake.notify_one();
        }
        // Wait for a round in progress, so nothing is sampled after the figures below.
        if let Some(handle) = self.thread.lock().expect("sampler thread lock").take() {
            let _ = handle.join();
        }
        let st = self.state.lock().expect("sampler lock");
        let covered = match (st.first_round_ns, st.last_round_ns) {
            (Some(a), Some(b)) if st.rounds > 1 => Some((b - a) / (st.rounds - 1)),
            _ => None,
        };
        SamplerInfo {
            mode: match self.pace {
                Pace::Budget(_) => "adaptive".into(),
                Pace::Fixed(_) => "fixed".into(),
            },
            budget: match self.pace {
                Pace::Budget(b) => Some(b),
                Pace::Fixed(_) => None,
            },
            burst_ns: match self.pace {
                Pace::Budget(b) => Some((BURST_WALL_NS * b) as u64),
                Pace::Fixed(_) => None,
            },
            interval_ns: match self.pace {
                Pace::Fixed(d) => Some(d.as_nanos() as u64),
                Pace::Budget(_) => None,
            },
            rounds: st.rounds,
            effective_interval_ns: covered,
            max_gap_ns: (st.rounds > 1).then_some(st.max_gap_ns),
            cpu_ns: st.cpu_ns,
        }
    }

    fn run(&self) {
        let mut st = self.state.lock().expect("sampler lock");
        loop {
            if st.stop {
                return;
            }
            let now = self.sink.now_ns();
            self.refill(&mut st, now);
            let wait = self.wait_before_round(&st, now);
            let readable = st.live.values().any(|c| !c.unreadable && !c.before_exec);
            if wait == 0 && readable {
                st.nudged = false;
                drop(st);
                self.round(None);
                st = self.state.lock().expect("sampler lock");
                continue;
            }
            let timeout = if !readable {
                Duration::from_millis(100)
            } else {
                Duration::from_nanos(wait.max(100_000))
            };
            let (guard, _) = self.wake.wait_timeout(st, timeout).expect("sampler lock");
            st = guard;
        }
    }

    /// Nanoseconds to wait before the next round is due (0: now).
    fn wait_before_round(&self, st: &State, now: u64) -> u64 {
        let min_gap = MIN_INTERVAL_NS.max(now / MAX_ROUNDS_SCALE);
        let since = st.last_round_ns.map(|t| now.saturating_sub(t));
        if let Some(since) = since
            && since < min_gap
        {
            return min_gap - since;
        }
        match self.pace {
            Pace::Fixed(d) => {
                let period = d.as_nanos() as u64;
                match since {
                    Some(since) if since < period && !st.nudged => period - since,
                    _ => 0,
                }
            }
            Pace::Budget(b) => {
                let missing = st.round_cost_ns - st.tokens_ns;
                if missing <= 0.0 {
                    // Affordable now: due if asked for, or if the budget allows no sooner.
                    0
                } else {
                    (missing / b) as u64
                }
            }
        }
    }

    fn refill(&self, st: &mut State, now: u64) {
        if let Pace::Budget(b) = self.pace {
            let elapsed = now.saturating_sub(st.last_refill_ns) as f64;
            let cap = burst_ns(self.pace, st.round_cost_ns);
            st.tokens_ns = (st.tokens_ns + elapsed * b).min(cap);
        }
        st.last_refill_ns = now;
    }

    /// One round: read every live process, emit the sum.
    fn round(&self, exit_stop: Option<i32>) {
        let r = self.begin_round(exit_stop);
        self.end_round(r);
    }

    /// Starts a round: takes the list of processes to read, and reads `exit_stop` (the process
    /// stopped in its exit that asked for the round) first.
    fn begin_round(&self, exit_stop: Option<i32>) -> Round<'_> {
        let observers = self.observers();
        let procfs = self.round.lock().expect("round lock");
        let (pids, known_unreadable) = {
            let st = self.state.lock().expect("sampler lock");
            let pids: Vec<i32> = st
                .live
                .iter()
                .filter(|(_, c)| !c.unreadable && !c.before_exec)
                .map(|(p, _)| *p)
                .collect();
            (
                pids,
                st.live.values().filter(|c| c.unreadable).count() as u32,
            )
        };
        let t = self.sink.now_ns();
        let cpu0 = thread_cpu_ns();
        let mut r = Round {
            procfs,
            observers,
            t,
            cost_ns: 0,
            exit_stop,
            sample: Sample {
                t_ns: t,
                unreadable: known_unreadable,
                ..Default::default()
            },
            refused: Vec::new(),
            read_peaks: self.read_peaks.load(std::sync::atomic::Ordering::Relaxed),
            read: Vec::with_capacity(pids.len()),
            per_process: Vec::with_capacity(pids.len()),
            pids,
        };
        if let Some(p) = exit_stop
            && let Some(i) = r.pids.iter().position(|&q| q == p)
        {
            r.pids.remove(i);
            r.read_one(p);
        }
        r.cost_ns = thread_cpu_ns().saturating_sub(cpu0);
        r
    }

    /// Reads the rest of the round's processes and emits the sum.
    fn end_round(&self, mut r: Round<'_>) {
        let cpu0 = thread_cpu_ns();
        for pid in std::mem::take(&mut r.pids) {
            r.read_one(pid);
        }
        let Round {
            procfs,
            observers,
            t,
            exit_stop,
            mut sample,
            refused,
            mut read,
            mut per_process,
            ..
        } = r;
        drop(procfs);
        // In pid order, as the live set lists them (the exit stop's process was read first).
        read.sort_unstable_by_key(|&(pid, _, _)| pid);
        per_process.sort_unstable_by_key(|p| p.pid);
        sample.per_process = Some(per_process);
        let cost = r.cost_ns + thread_cpu_ns().saturating_sub(cpu0);
        let mut peaks = Vec::new();
        let new_high;
        {
            let mut st = self.state.lock().expect("sampler lock");
            for pid in refused {
                if let Some(c) = st.live.get_mut(&pid) {
                    c.unreadable = true;
                }
            }
            for &(pid, pss, hwm) in &read {
                if let Some(c) = st.live.get_mut(&pid) {
                    c.pss = pss;
                    if hwm > c.hwm {
                        c.hwm = hwm;
                        peaks.push((pid, hwm));
                    }
                }
            }
            st.tokens_ns -= cost as f64;
            st.round_cost_ns = cost as f64;
            st.cpu_ns += cost;
            st.rounds += 1;
            if let Some(last) = st.last_round_ns {
                st.max_gap_ns = st.max_gap_ns.max(t.saturating_sub(last));
            }
            // Rounds run on two threads (the sampler's, and a tracker's at an exit stop), so
            // they may finish out of order: keep the earliest and the latest.
            st.last_round_ns = Some(st.last_round_ns.map_or(t, |l| l.max(t)));
            st.first_round_ns = Some(st.first_round_ns.map_or(t, |f| f.min(t)));
            new_high = sample.processes > 0 && sample.pss_bytes > st.max_pss;
            st.max_pss = st.max_pss.max(sample.pss_bytes);
        }
        let round_pss_bytes = sample.pss_bytes;
        if sample.processes > 0 || sample.unreadable > 0 {
            self.sink.emit_at(t, Event::Sample { sample });
        }
        if !observers.is_empty() {
            let pss_by_pid: Vec<(i32, u64)> = read.iter().map(|&(p, pss, _)| (p, pss)).collect();
            let info = RoundInfo {
                t_ns: t,
                pss_bytes: round_pss_bytes,
                new_high,
                exit_stop,
                pss_by_pid: &pss_by_pid,
            };
            for o in &observers {
                o.round_done(&info);
            }
        }
        for (tgid, hwm) in peaks {
            self.sink.emit_at(
                t,
                Event::Accounts {
                    tgid,
                    peak_rss_bytes: Some(hwm),
                    io: None,
                },
            );
        }
    }
}

/// A round at an exit stop whose exiting process has been read: the tracker lets it go, then
/// finishes the round with the other processes (see [`Sampler::at_exit`]).
pub struct ExitRound<'a>(Round<'a>);

impl ExitRound<'_> {
    pub fn finish(self, sampler: &Sampler) {
        sampler.end_round(self.0);
    }
}

/// A round in progress. Holds the round lock, so rounds never overlap.
struct Round<'a> {
    procfs: std::sync::MutexGuard<'a, ProcFs>,
    observers: Vec<Arc<dyn RoundObserver>>,
    t: u64,
    /// CPU spent in the round before [`Sampler::end_round`].
    cost_ns: u64,
    exit_stop: Option<i32>,
    /// Processes still to read.
    pids: Vec<i32>,
    sample: Sample,
    refused: Vec<i32>,
    read_peaks: bool,
    /// (pid, PSS, VmHWM or 0) of each process read.
    read: Vec<(i32, u64, u64)>,
    per_process: Vec<ProcessSample>,
}

impl Round<'_> {
    fn read_one(&mut self, pid: i32) {
        match self.procfs.smaps_rollup(pid) {
            Ok(Some(r)) => {
                self.sample.pss_bytes += r.pss_bytes;
                self.sample.rss_bytes += r.rss_bytes;
                self.sample.processes += 1;
                // For reports that stack memory and CPU by process; `stat` costs ~10 µs
                // against the rollup's 60 µs and more, and the round's measured cost
                // includes it, so the budget still holds.
                self.per_process.push(ProcessSample {
                    pid,
                    pss_bytes: r.pss_bytes,
                    cpu_ns: self.procfs.cpu_ns(pid).ok().flatten(),
                });
                let hwm = if self.read_peaks {
                    self.procfs
                        .status(pid)
                        .ok()
                        .and_then(|s| s.vm_hwm_bytes)
                        .unwrap_or(0)
                } else {
                    0
                };
                self.read.push((pid, r.pss_bytes, hwm));
                for o in &self.observers {
                    o.process(self.t, pid, &r);
                }
            }
            // No mm (a zombie) or gone since the list was taken: nothing to count.
            Ok(None) => {}
            Err(e)
                if e.raw_os_error() == Some(libc::ENOENT)
                    || e.raw_os_error() == Some(libc::ESRCH) => {}
            Err(_) => {
                self.sample.unreadable += 1;
                self.refused.push(pid);
            }
        }
    }
}

/// Budget share of this much wall time is the bucket's start-up allowance: at 1 % a run gets
/// 1 ms of sampling at once, so even a short command is sampled from its first exec.
const BURST_WALL_NS: f64 = 100_000_000.0;

/// The most CPU the bucket may hold: two rounds, and at least the start-up allowance.
fn burst_ns(pace: Pace, round_cost_ns: f64) -> f64 {
    match pace {
        Pace::Budget(b) => (2.0 * round_cost_ns).max(BURST_WALL_NS * b),
        Pace::Fixed(_) => f64::INFINITY,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::{Clock, Msg};

    fn samples(rx: &std::sync::mpsc::Receiver<Msg>) -> Vec<Sample> {
        rx.try_iter()
            .filter_map(|m| match m {
                Msg::Event(crate::event::Stamped {
                    event: Event::Sample { sample },
                    ..
                }) => Some(sample),
                _ => None,
            })
            .collect()
    }

    /// The exit-stop round reads the exiting process before `at_exit` returns (the tracker
    /// then lets it go: here it is killed and reaped), and the others at `finish`.
    #[test]
    fn an_exit_round_reads_the_exiting_process_before_it_is_let_go() {
        let (sink, rx) = crate::sink::Sink::new(Clock::start());
        let sampler = Sampler::new(Pace::Fixed(Duration::from_secs(3600)), sink);
        let mut exiting = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let mut other = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let (e, o) = (exiting.id() as i32, other.id() as i32);
        sampler.process_started(e);
        sampler.process_started(o);
        // Its resident size is far above any peak so far: a round is due.
        let round = sampler
            .at_exit(e, 1 << 40)
            .expect("a round at the exit stop");
        assert!(
            samples(&rx).is_empty(),
            "nothing emitted before the round is finished"
        );
        exiting.kill().unwrap();
        exiting.wait().unwrap();
        round.finish(&sampler);
        let s = samples(&rx);
        assert_eq!(s.len(), 1);
        let pids: Vec<i32> = s[0]
            .per_process
            .as_ref()
            .unwrap()
            .iter()
            .map(|p| p.pid)
            .collect();
        let mut want = vec![e, o];
        want.sort();
        assert_eq!(pids, want, "both read, in pid order");
        assert!(s[0].pss_bytes > 0);
        // Below the peak now recorded: no round, nothing to finish.
        assert!(sampler.at_exit(o, 0).is_none());
        other.kill().unwrap();
        other.wait().unwrap();
    }
}
