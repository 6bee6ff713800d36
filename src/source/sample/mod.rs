//! The memory sampler: PSS summed over the live tree, from exact reads anchored within a CPU
//! budget and carried between them by cheap counters.
//!
//! Owns the set of live processes to read (trackers tell it about forks, execs and ends), when
//! to read them, and the sampling thread. It emits `Sample` events and never formats.
//!
//! Two tiers, because an exact read's cost grows with memory (docs/kernel-notes.md: a rollup read
//! costs a fixed part plus a part per resident page, ~20 ms for a 1 GiB process), so a budget spent
//! on exact reads alone sees a growing process rarely and misses its peak:
//! - **Exact rounds** read `smaps_rollup` of every live process (and `statm` before and after, the
//!   anchor of the carry). They are paced by a token bucket: CPU accrues at `budget` × wall, a
//!   round spends what it measurably cost (thread CPU clock), and runs when the bucket holds
//!   its expected cost. A new image asks for a round once it has settled, which reads the new
//!   images alone (the rest of the tree carried from its last tick) when nothing else makes
//!   the whole tree due; forks and ends ask for none (at a fixed `--interval`, every change of
//!   the tree does). A tracker that can stop an exiting process while its memory is still attached
//!   (ptrace) calls [`Sampler::at_exit`], which takes a round there only if the exiting
//!   process could raise the peak.
//! - **Ticks** read `statm` of every live process (held open, `pread`, ~1 µs each) every
//!   millisecond or so, and carry each process's PSS from its anchor (`carry`). A tick's cost
//!   grows with the number of processes, not their pages; the tick interval stretches so ticks
//!   take at most [`budget::TICK_SHARE`] of the budget at their median cost, both tiers spend from
//!   the same bucket, and ticks wait once it is in debt by more than [`budget::TICK_DEBT_WALL_NS`]'s
//!   share.
//!   The kernel's high-water mark at exit (ebpf in the kernel, ptrace's `VmHWM` at its exit
//!   stop, netlink's from taskstats records: [`Sampler::exit_record`]) covers growth after the
//!   last tick, even when it was freed before the exit ([`Sampler::exit_peak`]): an upper
//!   bound from the last read's upper end.
//!
//! Ticks are many; samples are kept bounded: within each emission window (never shorter than
//! `elapsed / budget::MAX_ROUNDS_SCALE`) the highest tick is emitted, so the maximum is never dropped.
//!
//! A process's exit (its high-water mark, the round or tick at a ptrace exit stop) is in
//! `exit.rs`; the carry arithmetic in `carry.rs`, and what is carried of each process in
//! `carried.rs`; the budget's bucket and the ticks' pace in `budget.rs`; a round's reads and
//! its sample in `round.rs`; a tick's in `tick.rs`; the sampling thread's loop, which decides
//! which of the two is due, in `thread.rs`; what trackers tell it of the tree, and when that
//! wakes the thread, in `tree.rs`; the samples a window holds back, in `held.rs`.

mod budget;
mod carried;
mod carry;
mod exit;
mod family;
mod held;
mod round;
mod thread;
mod tick;
mod tree;

pub use budget::Pace;
use budget::{Budget, TICK_MIN_NS};
use carried::Reader;
use carry::Term;
use exit::Ended;
pub use exit::exit_counters_lag;
use held::Held;

use crate::bus::event::Event;
use crate::bus::sink::Sink;
use crate::kernel::proc::{Rollup, page_size};
use crate::model::{Sample, SamplerInfo, Source};
use foldhash::{HashMap, HashMapExt};
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::Duration;

/// A source that rides on the sampler's rounds (`--maps-at-peak`, `--malloc`): it sees each
/// process read and each round's outcome, and execs. Registered before the sampler starts.
pub trait RoundObserver: Send + Sync {
    /// Process `pid` was read in the round now running. Runs inside the round's measured CPU
    /// (so its cost counts against the sampler's budget): keep it to a few microseconds.
    fn process(&self, _t_ns: u64, _pid: i32, _rollup: &Rollup) {}
    /// The round is over. Runs outside the round's measured CPU: an observer that does more
    /// than a few microseconds of work here keeps its own budget and reports its cost.
    fn round_done(&self, _round: &RoundInfo<'_>) {}
    /// A tick saw the tree's PSS at `pss_bytes` (an estimate), above every earlier figure:
    /// does the observer want an exact round now, paid from its own budget? The round then
    /// runs at once, whatever the sampler's budget holds, and costs the sampler nothing: its
    /// cost goes to [`RoundObserver::round_paid`] before `round_done`. Called without the
    /// sampler's lock, at most once per tick.
    fn round_wanted(&self, _t_ns: u64, _pss_bytes: u64) -> bool {
        false
    }
    /// The round this observer asked for cost `cost_ns` of CPU.
    fn round_paid(&self, _cost_ns: u64) {}
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

/// A process is not read until this long after its exec: before, the dynamic loader may not
/// have mapped its libraries yet, and a read then is a figure of the loader, not of the
/// program (a program that lives a millisecond would get a Max PSS of 12 KiB). A process that
/// ends sooner is read only at an exit stop (ptrace) or not at all, and says so.
pub const EXEC_SETTLE_NS: u64 = 1_000_000;
/// Exact rounds are taken within the budget when the ticks' figure is loose (its bound above
/// this share of it), or the last one is older than ANCHOR_MAX_AGE_NS (sharing can change
/// without any counter of the tree moving: a process outside it unmaps a library), or a
/// process started, exec'd or ended.
const ANCHOR_WHEN_BOUND: f64 = 0.005;
const ANCHOR_MAX_AGE_NS: u64 = 2_000_000_000;
const GROWING_BYTES: u64 = 1 << 20;
/// Without observers, an exit stop takes an exact round only up to this much resident memory
/// (~1 ms of reading at most), so the one read of a short program is exact.
const SMALL_EXIT_ROUND_BYTES: u64 = 64 << 20;
/// The longest ticks back off to while no counter moves: growth that starts after a quiet
/// spell is seen within this long.
const TICK_IDLE_MAX_NS: u64 = 10_000_000;

#[derive(Default, Clone, Copy)]
struct Cached {
    /// Its PSS as of the latest read: exact after a round, carried after a tick.
    pss: u64,
    /// Its resident bytes at the latest tick or read (what an exit's high-water mark is
    /// growth beyond).
    rss: u64,
    /// The most resident bytes any tick or read saw of its image: a high-water mark at exit
    /// no higher was reached at a moment the samples may already hold.
    max_rss: u64,
    /// The tree's estimate (bytes) at the read that saw `max_rss`: the others as they were
    /// when the process was last seen at its highest.
    max_rss_tree: f64,
    /// The most the tree's upper bound stood above its resident size at any tick or read of
    /// its image (bytes; `None`: not seen yet): its high-water mark at exit was reached
    /// between two of them, and the tree then was at most this plus the mark.
    rest_hi: Option<f64>,
    /// Last `VmHWM` reported for it (when reading peaks).
    hwm: u64,
    /// Its smaps_rollup was refused (a setuid or non-dumpable program). Only an exec can
    /// change that, so it is not retried until then: failing is cheap, and retrying every
    /// round would spin the sampler at its fastest pace for nothing.
    unreadable: bool,
    /// The root before its first exec: still a copy of ste waiting to exec the command, so
    /// its memory is ste's, not the command's. Not read until it execs.
    before_exec: bool,
    /// Its image count: bumped at each exec, so the carry starts again on the new memory.
    image: u32,
    /// It exec'd since it joined (its memory is its own from zero), rather than forked (its
    /// memory is shared with its parent's until it writes).
    exec_seen: bool,
    /// When it last exec'd (see [`EXEC_SETTLE_NS`]).
    exec_ns: Option<u64>,
    /// The process that forked it, when that is in the tree.
    parent: Option<i32>,
    /// Its new image asks for an exact round once it has settled (within a budget, the rounds
    /// an exec asks for; see [`Sampler::exec_done`]).
    round_asked: bool,
    /// The high-water mark of its image from an exit record that came before the tracker saw
    /// its end (a thread's exit, or the process's own: see [`Sampler::exit_record`]).
    exit_hwm: u64,
}

impl State {
    /// The current state's provisional sample, made final: its first point and, when ticks
    /// found it unchanged later, its last (so a chart draws the plateau flat).
    fn finalize_provisional(&mut self) {
        if let Some((first, last_t)) = self.provisional.take() {
            if last_t > first.t_ns {
                // The same memory later; not the same CPU, which the first point read then.
                let mut end = Sample {
                    t_ns: last_t,
                    ..first.clone()
                };
                for p in end.per_process.iter_mut().flatten() {
                    p.cpu_ns = None;
                }
                self.pending.hold(first);
                self.pending.hold_end(end);
            } else {
                self.pending.hold(first);
            }
        }
    }

    /// The ticks' samples held back (the current state's, the window's extremes, and the
    /// windows' since), in time order, to go out before another sample. `ceiling`: an exact
    /// read of the tree at one moment, and how much its PSS can have fallen by then (the
    /// carry's `fallen`): no sample can have been above that read plus what fell after it.
    fn take_held(&mut self, ceiling: Option<(u64, f64)>) -> impl Iterator<Item = Sample> + use<> {
        self.finalize_provisional();
        let mut v = std::mem::take(&mut self.since_decrease);
        v.extend(self.pending.take());
        if let Some((x, fallen_now)) = ceiling {
            for s in &mut v {
                // What had fallen by the sample's time: the last mark at or before it.
                let i = self.fallen_marks.partition_point(|m| m.0 <= s.t_ns);
                let then = if i == 0 {
                    0.0
                } else {
                    self.fallen_marks[i - 1].1
                };
                let bound = x as f64 + (fallen_now - then).max(0.0);
                let high = s.high().min(bound.ceil() as u64);
                s.high_bytes = Some(high);
                s.low_bytes = Some(s.low().min(high));
                s.pss_bytes = s.pss_bytes.min(high);
            }
        }
        // Marks older than anything still to come are no longer needed.
        if let Some(&last) = self.fallen_marks.last() {
            self.fallen_marks.clear();
            self.fallen_marks.push(last);
        }
        v.sort_by_key(|s| s.t_ns);
        v.into_iter()
    }

    /// A tick or round read the tree at `t`.
    fn looked(&mut self, t: u64) {
        if let Some(l) = self.last_look_ns {
            self.max_look_gap_ns = self.max_look_gap_ns.max(t.saturating_sub(l));
        }
        self.last_look_ns = Some(self.last_look_ns.map_or(t, |l| l.max(t)));
    }

    /// The carry's cumulative `fallen` at `t`, marked when it moved.
    fn mark_fallen(&mut self, t: u64, fallen: f64) {
        if self.fallen_marks.last().is_none_or(|m| m.1 != fallen) {
            self.fallen_marks.push((t, fallen));
        }
    }

    /// The PSS of the tree but `tgid`, as of each process's latest read.
    fn others_pss(&self, tgid: i32) -> u64 {
        self.live
            .iter()
            .filter(|(p, c)| **p != tgid && c.counted())
            .map(|(_, c)| c.pss)
            .sum()
    }
}

impl Cached {
    /// A read saw it at `rss` bytes, the tree then `tree`.
    fn saw_rss(&mut self, rss: u64, tree: &Term) {
        if rss >= self.max_rss {
            self.max_rss = rss;
            self.max_rss_tree = tree.central;
        }
        let rest = tree.hi - rss as f64;
        self.rest_hi = Some(self.rest_hi.map_or(rest, |r| r.max(rest)));
    }

    /// Whether it counts in the tree's figures: exec'd (the command's root) and readable.
    fn counted(&self) -> bool {
        !self.unreadable && !self.before_exec
    }

    /// Whether rounds and ticks read it at `now`: counted, and settled since its exec.
    fn readable(&self, now: u64) -> bool {
        self.counted()
            && self
                .exec_ns
                .is_none_or(|t| now.saturating_sub(t) >= EXEC_SETTLE_NS)
    }
}

struct State {
    live: BTreeMap<i32, Cached>,
    stop: bool,
    /// The sampling thread is in a round or a tick (it holds no state lock meanwhile).
    busy: bool,
    /// When the sampling thread, asleep, wakes on its own (`None` while it is awake): an exec
    /// wakes it only when that is later than the new image settles.
    asleep_until_ns: Option<u64>,
    /// Wake-ups asked of the sampling thread (what the tests look at).
    #[cfg(test)]
    woken: u32,
    nudged: bool,
    /// Observers that asked for a round at a tick's new high and pay for it.
    payers: Vec<Arc<dyn RoundObserver>>,
    /// The CPU budget's bucket, the rounds' expected cost and the ticks' pace.
    budget: Budget,
    /// Resident bytes as of the last tick (a round's cost grows with them).
    tick_rss_bytes: u64,
    /// The last tick saw the resident total grow by more than GROWING_BYTES; saw a counter
    /// move, or the set of processes change.
    tick_growing: bool,
    tick_moved: bool,
    max_round_cpu_ns: u64,
    /// CPU of the costliest tick (with what was charged to it).
    max_tick_cpu_ns: u64,
    last_round_ns: Option<u64>,
    /// The last round that read every process at one moment (the age rule's anchor), and the
    /// last that read every process at all.
    last_full_round_ns: Option<u64>,
    last_round_all_ns: Option<u64>,
    /// Rounds that were one moment (exact samples).
    moments: u64,
    /// Changes of the tree the trackers told of (a round that spans one is not one moment), and
    /// their count at the last tick.
    generation: u64,
    tick_generation: u64,
    /// Rounds taken beyond the budget because the maximum's interval was loose, and their CPU.
    max_rounds: u64,
    max_rounds_cpu_ns: u64,
    first_round_ns: Option<u64>,
    max_gap_ns: u64,
    /// The last tick or round, or wake-up with nothing to read, and the longest time between
    /// two while the tree could be read: how long the sampler went blind.
    last_look_ns: Option<u64>,
    max_look_gap_ns: u64,
    /// The last read of the processes' CPU (`stat`): every round, and a tick when it is
    /// `CPU_PACE_NS` old.
    last_cpu_ns: Option<u64>,
    rounds: u64,
    /// Rounds an observer paid for (counted in `rounds`, not in `cpu_ns`).
    paid_rounds: u64,
    cpu_ns: u64,
    max_pss: u64,
    /// The highest sum an exact round read.
    max_round_pss: u64,
    /// When the next tick is due.
    next_tick_ns: u64,
    /// Processes gone whose high-water mark at exit may still come, and whether one came that
    /// no sample shows yet (the sampling thread, or `stop`, turns it into one).
    ended: HashMap<i32, Ended>,
    /// The same processes in the order they ended, to forget them in that order (a fork
    /// loop ends ~2,000 a second: a sweep of the whole map at each end cost its tracker).
    ended_order: std::collections::VecDeque<(u64, i32)>,
    ended_due: bool,
    ticks: u64,
    first_tick_ns: Option<u64>,
    last_tick_ns: Option<u64>,
    tick_cpu_ns: u64,
    /// The last tick's sum: the estimate and its proven interval, and how much of its width
    /// the anonymous families make.
    tick_term: Term,
    tick_anon_width: f64,
    /// The largest lower bound and upper bound of any sample so far: what Max PSS is proven to
    /// be at least, and what the samples allow at most.
    max_lo: u64,
    max_hi: u64,
    /// A tick saw a counter move since the last exact round (see [`Sampler::run`]).
    changed_since_round: bool,
    /// How far ticks have backed off while nothing moves, and since when they find nothing
    /// moving.
    tick_backoff_ns: u64,
    still_since_ns: Option<u64>,
    /// The current emission window's extremes, not emitted yet.
    pending: Held,
    /// The sample of the tree's current state, held until something moves: the first tick of
    /// that state, and when the last tick still found it so. A plateau (a process asleep on
    /// its memory) goes out as its first and last points only; an exact round of the same
    /// state replaces it (see [`Sampler::tick`]).
    provisional: Option<(Sample, u64)>,
    /// The windows' samples not sent yet, held for an exact round that may bound them from
    /// above, and when the carry's `fallen` moved (time, value).
    since_decrease: Vec<Sample>,
    fallen_marks: Vec<(u64, f64)>,
    /// When a sample was last emitted.
    last_emit_ns: u64,
}

pub struct Sampler {
    pace: Pace,
    sink: Sink,
    state: Mutex<State>,
    wake: Condvar,
    /// Notified when the sampling thread ends a round or tick (`State::busy`).
    idle: Condvar,
    /// Serialises rounds and ticks, taken by the sampling thread and by trackers at an exit.
    reader: Mutex<Reader>,
    /// Also read each process's `VmHWM` every round, for trackers that cannot read it when the
    /// process exits.
    read_peaks: std::sync::atomic::AtomicBool,
    /// No high-water mark at exit reaches the sampler (see [`Sampler::without_exit_marks`]).
    no_exit_marks: std::sync::atomic::AtomicBool,
    /// The sampling thread, let go by [`Sampler::stop`] once it is out of any round.
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    observers: RwLock<Vec<Arc<dyn RoundObserver>>>,
}

impl Sampler {
    pub fn new(pace: Pace, sink: Sink) -> Arc<Sampler> {
        Arc::new(Sampler {
            pace,
            sink,
            state: Mutex::new(State {
                live: BTreeMap::new(),
                stop: false,
                busy: false,
                asleep_until_ns: None,
                #[cfg(test)]
                woken: 0,
                nudged: false,
                payers: Vec::new(),
                budget: Budget::new(pace),
                tick_rss_bytes: 0,
                tick_growing: false,
                tick_moved: true,
                max_round_cpu_ns: 0,
                max_tick_cpu_ns: 0,
                last_round_ns: None,
                last_full_round_ns: None,
                last_round_all_ns: None,
                moments: 0,
                generation: 0,
                tick_generation: 0,
                max_rounds: 0,
                max_rounds_cpu_ns: 0,
                first_round_ns: None,
                max_gap_ns: 0,
                last_look_ns: None,
                max_look_gap_ns: 0,
                last_cpu_ns: None,
                rounds: 0,
                paid_rounds: 0,
                cpu_ns: 0,
                max_pss: 0,
                max_round_pss: 0,
                next_tick_ns: 0,
                ended: HashMap::new(),
                ended_order: std::collections::VecDeque::new(),
                ended_due: false,
                ticks: 0,
                first_tick_ns: None,
                last_tick_ns: None,
                tick_cpu_ns: 0,
                changed_since_round: true,
                tick_term: Term::default(),
                tick_anon_width: 0.0,
                max_lo: 0,
                max_hi: 0,
                tick_backoff_ns: 0,
                still_since_ns: None,
                pending: Held::default(),
                provisional: None,
                since_decrease: Vec::new(),
                fallen_marks: Vec::new(),
                last_emit_ns: 0,
            }),
            wake: Condvar::new(),
            idle: Condvar::new(),
            reader: Mutex::new(Reader::new(page_size())),
            read_peaks: std::sync::atomic::AtomicBool::new(false),
            no_exit_marks: std::sync::atomic::AtomicBool::new(false),
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
                "VmHWM of /proc/PID/status, read at every exact round and whenever a tick sees the process above it",
                "the kernel's high-water mark as of the last read before the process exited; growth after that read is missed",
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
        let pace = match self.pace {
            Pace::Budget(b) => format!(
                "exact rounds paced within {} of a core, and of each new image once it has settled",
                crate::units::percent(b)
            ),
            Pace::Fixed(d) => format!(
                "exact rounds every {}",
                crate::units::duration_human(d.as_nanos() as u64)
            ),
        };
        let note = format!(
            "{pace}; between them carried by /proc/PID/statm counters read every {} or more (new anonymous pages count whole; each sample states its bound)",
            crate::units::duration_human(TICK_MIN_NS)
        );
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
                "/proc/PID/stat utime + stime of each live process, at each exact round and at a tick when no read of it is a second old",
                "in clock ticks (10 ms); CPU of a process that starts and ends between two reads is not seen, nor its last interval; none in the other carried samples",
            ),
        });
    }

    /// Starts the sampling thread, which keeps only the capabilities `role` keeps.
    pub fn spawn(self: &Arc<Self>, role: crate::launch::privilege::Role) -> std::io::Result<()> {
        let me = Arc::clone(self);
        let handle = std::thread::Builder::new()
            .name("ste-sampler".into())
            .spawn(move || {
                crate::launch::privilege::limit_or_say(role, &me.sink);
                me.run()
            })?;
        *self.thread.lock().expect("sampler thread lock") = Some(handle);
        Ok(())
    }

    /// Stops the thread and reports how sampling went.
    pub fn stop(&self) -> SamplerInfo {
        let mut st = self.state.lock().expect("sampler lock");
        st.stop = true;
        self.wake.notify_one();
        // Wait for a round in progress, so nothing is sampled after the figures below. The
        // thread starts none once it has seen `stop`, and is let go rather than joined: waking
        // it only to end it was most of the end of a short run.
        let thread = self.thread.lock().expect("sampler thread lock").take();
        // (A thread that died in a round never clears `busy`.)
        while st.busy && thread.as_ref().is_some_and(|t| !t.is_finished()) {
            st = self
                .idle
                .wait_timeout(st, Duration::from_millis(10))
                .expect("sampler lock")
                .0;
        }
        for p in st.take_held(None) {
            self.sink.emit_at(p.t_ns, Event::Sample { sample: p });
        }
        // Exit records that came since the thread's last turn (later ones are turned into
        // samples as they come, by `exit_record`).
        if st.ended_due {
            drop(st);
            self.apply_ended();
            st = self.state.lock().expect("sampler lock");
        }
        let mean_gap = |first: Option<u64>, last: Option<u64>, n: u64| match (first, last) {
            (Some(a), Some(b)) if n > 1 => Some((b - a) / (n - 1)),
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
            burst_ns: st.budget.allowances_ns().0,
            interval_ns: match self.pace {
                Pace::Fixed(d) => Some(d.as_nanos() as u64),
                Pace::Budget(_) => None,
            },
            rounds: st.rounds,
            paid_rounds: st.paid_rounds,
            effective_interval_ns: mean_gap(st.first_round_ns, st.last_round_ns, st.rounds),
            max_gap_ns: (st.rounds > 1).then_some(st.max_gap_ns),
            max_look_gap_ns: (st.rounds + st.ticks > 1).then_some(st.max_look_gap_ns),
            cpu_ns: st.cpu_ns,
            ticks: st.ticks,
            effective_tick_ns: mean_gap(st.first_tick_ns, st.last_tick_ns, st.ticks),
            tick_cpu_ns: st.tick_cpu_ns,
            exec_settle_ns: Some(EXEC_SETTLE_NS),
            max_round_cpu_ns: (st.rounds > 0).then_some(st.max_round_cpu_ns),
            max_tick_cpu_ns: (st.ticks > 0).then_some(st.max_tick_cpu_ns),
            tick_debt_ns: st.budget.allowances_ns().1,
            moments: Some(st.moments),
            max_rounds: matches!(self.pace, Pace::Budget(_)).then_some(st.max_rounds),
            max_rounds_cpu_ns: matches!(self.pace, Pace::Budget(_)).then_some(st.max_rounds_cpu_ns),
            exit_marks: Some(
                !self
                    .no_exit_marks
                    .load(std::sync::atomic::Ordering::Relaxed),
            ),
        }
    }

    /// Neither the tracker nor taskstats gives a process's high-water mark at its exit (netlink
    /// without root): what a process grew after its last read is unseen, and the run says that
    /// Max PSS has no upper end ([`SamplerInfo::exit_marks`]).
    pub fn without_exit_marks(&self) {
        self.no_exit_marks
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Reports high-water marks read at `t` that grew.
    fn emit_peaks(&self, t: u64, peaks: Vec<(i32, u64)>) {
        for (tgid, hwm) in peaks {
            let peak_rss_bytes = Some(hwm);
            let event = Event::Accounts {
                tgid,
                peak_rss_bytes,
                io: None,
            };
            self.sink.emit_at(t, event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus::sink::{Clock, Msg};
    use crate::model::SampleKind;

    fn samples(rx: &mut crate::bus::mailbox::Receiver<Msg>) -> Vec<Sample> {
        rx.try_iter()
            .filter_map(|m| match m {
                Msg::Event(crate::bus::event::Stamped {
                    event: Event::Sample { sample },
                    ..
                }) => Some(sample),
                _ => None,
            })
            .collect()
    }

    /// At an exit stop, a small exiting process is read exactly before `at_exit` returns (the
    /// tracker then lets it go), and the tree's sample carries the others from their ticks: its
    /// interval holds the exiting process's exact share.
    #[test]
    fn an_exit_stop_reads_the_exiting_process_before_it_is_let_go() {
        let (sink, mut rx) = crate::bus::sink::Sink::new(Clock::start());
        let sampler = Sampler::new(Pace::Budget(0.01), sink);
        let mut exiting = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let mut other = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let (e, o) = (exiting.id() as i32, other.id() as i32);
        for p in [e, o] {
            sampler.process_started(p, 0);
            sampler.process_exec(p);
        }
        std::thread::sleep(Duration::from_nanos(2 * EXEC_SETTLE_NS));
        sampler.tick();
        samples(&mut rx);
        // Never read: its file pages may be anywhere from none to all of them.
        assert!(
            sampler
                .reader
                .lock()
                .unwrap()
                .carried
                .get(&e)
                .is_some_and(|c| c.file == Some(carry::FileKnown::NewImage))
        );
        sampler.state.lock().unwrap().max_lo = 0;
        sampler.at_exit(e, 1 << 20, None);
        let read = &sampler.reader.lock().unwrap().carried;
        assert!(
            matches!(read[&e].file, Some(carry::FileKnown::Read { .. })),
            "read exactly in its exit stop"
        );
        assert!(matches!(read[&o].file, Some(carry::FileKnown::NewImage)));
        for c in [&mut exiting, &mut other] {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }

    fn exit_peaks(rx: &mut crate::bus::mailbox::Receiver<Msg>) -> Vec<Sample> {
        samples(rx)
            .into_iter()
            .filter(|s| s.kind == SampleKind::ExitPeak)
            .collect()
    }

    /// Where the tracker reads no high-water mark at exit (netlink), an exit record's mark
    /// makes the exit peak whether it comes after the tracker saw the end (at once) or before
    /// (at the end, by the sampling thread or, as here with none, by `stop`); records of
    /// processes outside the tree, or with a tracker that reads its own marks, are ignored.
    #[test]
    fn exit_records_make_the_exit_peak_where_the_tracker_reads_none() {
        const MIB: u64 = 1 << 20;
        let (sink, mut rx) = crate::bus::sink::Sink::new(Clock::start());
        let sampler = Sampler::new(Pace::Fixed(Duration::from_secs(3600)), sink);
        sampler.process_started(100, 0);
        sampler.exit_record(100, 8 * MIB);
        sampler.process_ended(100);
        assert!(
            exit_peaks(&mut rx).is_empty(),
            "the tracker reads its own marks: records are not taken"
        );

        sampler.read_peaks();
        // After the end: at once. Never read, so all of it is unseen growth (its bound).
        sampler.process_started(101, 0);
        sampler.process_ended(101);
        sampler.exit_record(999, 64 * MIB);
        assert!(exit_peaks(&mut rx).is_empty(), "not a process of the tree");
        sampler.exit_record(101, 8 * MIB);
        let s = exit_peaks(&mut rx);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].pss_bytes, 8 * MIB);
        // Nothing read: at most the mark (and how far the kernel's counters may lag), and no
        // lower bound beyond the (empty) tree's.
        assert_eq!(
            (s[0].low(), s[0].high()),
            (0, 8 * MIB + super::exit::counter_lag_bytes())
        );
        // A smaller mark (an earlier thread's) changes nothing.
        sampler.exit_record(101, 4 * MIB);
        assert!(exit_peaks(&mut rx).is_empty());

        // Before the end (its last thread's record came first): kept, made at the end.
        sampler.process_started(102, 0);
        sampler.exit_record(102, 16 * MIB);
        assert!(exit_peaks(&mut rx).is_empty(), "not before the end");
        sampler.process_ended(102);
        sampler.stop();
        let s = exit_peaks(&mut rx);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].pss_bytes, 16 * MIB);
    }

    /// A round asked for by a settled new image reads that image alone and carries the rest
    /// of the tree from its last tick: it says so (a carried sample with both processes), and
    /// anchors the tree afresh no more than a tick does.
    #[test]
    fn a_round_an_exec_asked_for_reads_only_the_new_image() {
        let (sink, mut rx) = crate::bus::sink::Sink::new(Clock::start());
        let sampler = Sampler::new(Pace::Budget(0.01), sink);
        let spawn = || {
            std::process::Command::new("sleep")
                .arg("60")
                .spawn()
                .unwrap()
        };
        let (mut shell, mut program) = (spawn(), spawn());
        let (a, b) = (shell.id() as i32, program.id() as i32);
        sampler.process_started(a, 0);
        sampler.tick();
        sampler.process_started(b, a);
        sampler.exec_done(b);
        std::thread::sleep(Duration::from_nanos(2 * EXEC_SETTLE_NS));
        samples(&mut rx);
        sampler.state.lock().unwrap().changed_since_round = true;
        sampler.round(true, round::Payer::Budget);
        let s = samples(&mut rx);
        let round = s.last().expect("the round's sample");
        assert_eq!(round.kind, SampleKind::Carried);
        assert!(round.low() < round.high(), "an interval, not one figure");
        let pids: Vec<i32> = round.per_process.iter().flatten().map(|p| p.pid).collect();
        assert_eq!(pids, if a < b { [a, b] } else { [b, a] });
        let read = &sampler.reader.lock().unwrap().carried;
        assert!(
            matches!(read[&b].file, Some(carry::FileKnown::Read { .. })),
            "the new image was read"
        );
        let st = sampler.state.lock().unwrap();
        assert!(!st.live[&b].round_asked, "its ask is answered");
        assert!(st.changed_since_round && st.last_full_round_ns.is_none());
        drop(st);
        for c in [&mut shell, &mut program] {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }
}
