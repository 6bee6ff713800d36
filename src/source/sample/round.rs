//! A round: live processes read exactly (`smaps_rollup`), each read made what the carry starts
//! from, and the sum emitted as a sample: exact when every process was read at one moment,
//! carried otherwise.
//!
//! A round reads one process after another, so it is one moment only if nothing moved while
//! it read: no process's counters (nor, for one that may share anonymous pages, its minor
//! faults) changed between its read and the round's end, no process appeared, ended or
//! exec'd meanwhile (the tracker's word, and every read found its process), and no process
//! shares anonymous pages with one the round did not read (a fork the tracker has not told
//! of yet). Such a round's sum is exact, and anchors every family. Any other round is a carried
//! sample: each read is exact for its process at its time, and the sum takes the carry's
//! interval ("rounds that are not one moment" read siblings before and after one ended, and
//! their sum could be more than the tree ever held).
//!
//! Part of the sampler (`sample/mod.rs`), on its state: must not decide when a round is due
//! (the sampling thread and `budget` do) nor tick.

use super::carried::{ExactRead, Reader};
use super::carry::Counters;
use super::tick::{parents_first, sample_of};
use super::{Cached, RoundInfo, RoundObserver, Sampler};
use crate::bus::event::Event;
use crate::bus::sink::thread_cpu_ns;
use crate::model::{ProcessSample, Sample, SampleKind};
use std::sync::Arc;

/// Who pays for a round.
pub(super) enum Payer {
    /// The sampler's budget.
    Budget,
    /// The maximum's bucket: the maximum's interval was too loose (`budget::MAX_SHARE_OF_BUDGET`).
    Maximum,
    /// The observers that asked for it at a new high.
    Observers(Vec<Arc<dyn RoundObserver>>),
}

impl Sampler {
    /// One round of the sampling thread: read every live process (or with `only_asked`, the
    /// new images), emit the sum, charged to `paid_by`.
    pub(super) fn round(&self, only_asked: bool, paid_by: Payer) {
        let mut r = self.begin_round(None, only_asked);
        r.paid_by = paid_by;
        self.end_round(r);
    }

    /// Starts a round: takes the list of processes to read, and reads `exit_stop` (the process
    /// stopped in its exit that asked for the round) first. With `only_asked`, it reads only
    /// the new images that asked for it and carries the others from their last tick (see
    /// [`Sampler::run`]).
    pub(super) fn begin_round(&self, exit_stop: Option<i32>, only_asked: bool) -> Round<'_> {
        let observers = self.observers();
        let mut reader = self.reader.lock().expect("reader lock");
        let (pids, known_unreadable, others, generation) = {
            let mut st = self.state.lock().expect("sampler lock");
            let now = self.sink.now_ns();
            reader.sync(&st.live, now);
            // The process stopped in its exit is read whatever its age: its loader is done.
            let all: Vec<(i32, Cached)> = st
                .live
                .iter()
                .filter(|(p, c)| c.readable(now) || (Some(**p) == exit_stop && c.counted()))
                .map(|(p, c)| (*p, *c))
                .collect();
            let mut pids = parents_first(all);
            // The others, carried: those a tick has carried at their current image.
            let mut others = Vec::new();
            if only_asked {
                pids.retain(|&(p, cached)| {
                    let asked = cached.round_asked;
                    let ticked = reader
                        .carried
                        .get(&p)
                        .is_some_and(|c| c.image == cached.image && c.file.is_some());
                    if !asked && ticked {
                        others.push(p);
                        false
                    } else {
                        true
                    }
                });
            }
            // What an exec asked for is done: this round reads its image.
            for (p, _) in &pids {
                if let Some(c) = st.live.get_mut(p) {
                    c.round_asked = false;
                }
            }
            (
                pids,
                st.live.values().filter(|c| c.unreadable).count() as u32,
                others,
                st.generation,
            )
        };
        let t = self.sink.now_ns();
        let cpu0 = thread_cpu_ns();
        let mut r = Round {
            others,
            read_rss_bytes: 0,
            reader,
            observers,
            paid_by: Payer::Budget,
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
            exact: Vec::with_capacity(pids.len()),
            per_process: Vec::with_capacity(pids.len()),
            listed: pids.iter().map(|(p, _)| *p).collect(),
            pids,
            one_moment: !only_asked,
            moved_since_tick: false,
            generation,
        };
        if let Some(p) = exit_stop
            && let Some(i) = r.pids.iter().position(|&(q, _)| q == p)
        {
            let (p, cached) = r.pids.remove(i);
            r.read_one(p, &cached);
        }
        r.cost_ns = thread_cpu_ns().saturating_sub(cpu0);
        r
    }

    /// Reads the rest of the round's processes and emits the sum.
    pub(super) fn end_round(&self, mut r: Round<'_>) {
        let cpu0 = thread_cpu_ns();
        let for_moment = matches!(r.paid_by, Payer::Maximum);
        for (pid, cached) in std::mem::take(&mut r.pids) {
            // A round taken for the maximum is worth only one moment: once something moved,
            // the rest is not read (a round of 2 GiB costs ~40 ms).
            if for_moment
                && (!r.one_moment
                    || self.state.lock().expect("sampler lock").generation != r.generation)
            {
                r.one_moment = false;
                break;
            }
            r.read_one(pid, &cached);
        }
        // One moment only if nothing moved since each read, and the tracker saw no change.
        if r.one_moment {
            r.one_moment = r.still(&self.state.lock().expect("sampler lock"));
        }
        let Round {
            mut reader,
            observers,
            t,
            exit_stop,
            mut sample,
            refused,
            paid_by,
            read,
            exact,
            mut per_process,
            one_moment,
            moved_since_tick,
            others,
            listed,
            read_rss_bytes,
            ..
        } = r;
        let full = others.is_empty();
        let fallen = reader.fallen;
        let rss_by_pid: Vec<(i32, u64)> = exact
            .iter()
            .map(|e| (e.pid, e.counters.resident * reader.page))
            .collect();
        if one_moment {
            reader.anchor_families(&exact);
            sample.kind = SampleKind::Exact;
            sample.low_bytes = Some(sample.pss_bytes);
            sample.high_bytes = Some(sample.pss_bytes);
        } else {
            // Each read is exact for its process at its time; the sum is the carry's, of every
            // process listed (read, carried, or left unread by a round given up).
            let pids: Vec<i32> = listed.into_iter().chain(others).collect();
            let sum = reader.carry_tree(&pids);
            let cpu: foldhash::HashMap<i32, Option<u64>> =
                per_process.iter().map(|p| (p.pid, p.cpu_ns)).collect();
            per_process = sum
                .per_process
                .iter()
                .map(|&(pid, pss_bytes, _)| ProcessSample {
                    pid,
                    pss_bytes,
                    cpu_ns: cpu.get(&pid).copied().flatten(),
                })
                .collect();
            sample = Sample {
                t_ns: sample.t_ns,
                unreadable: sample.unreadable,
                kind: SampleKind::Carried,
                processes: per_process.len() as u32,
                rss_bytes: sum.rss_bytes,
                ..sample_of(&sum.term)
            };
        }
        let term = if one_moment {
            super::carry::Term::exact(sample.pss_bytes as f64)
        } else {
            super::carry::Term {
                central: sample.pss_bytes as f64,
                lo: sample.low() as f64,
                hi: sample.high() as f64,
            }
        };
        drop(reader);
        per_process.sort_unstable_by_key(|p| p.pid);
        sample.per_process = Some(per_process);
        let cost = r.cost_ns + thread_cpu_ns().saturating_sub(cpu0);
        let mut peaks = Vec::new();
        let new_high;
        let pending;
        {
            let mut st = self.state.lock().expect("sampler lock");
            for pid in refused {
                if let Some(c) = st.live.get_mut(&pid) {
                    c.unreadable = true;
                }
            }
            for p in sample.per_process.iter().flatten() {
                if let Some(c) = st.live.get_mut(&p.pid) {
                    c.pss = p.pss_bytes;
                }
            }
            for &(pid, rss) in &rss_by_pid {
                if let Some(c) = st.live.get_mut(&pid) {
                    c.rss = rss;
                    c.saw_rss(rss, &term);
                }
            }
            for &(pid, _, hwm) in &read {
                if let Some(c) = st.live.get_mut(&pid)
                    && hwm > c.hwm
                {
                    c.hwm = hwm;
                    peaks.push((pid, hwm));
                }
            }
            // A round an observer paid for is its cost, not the sampler's.
            match &paid_by {
                Payer::Budget => {
                    st.budget.round_spent(cost, read_rss_bytes);
                    st.cpu_ns += cost;
                }
                Payer::Maximum => {
                    st.budget.max_round_spent(cost, read_rss_bytes);
                    st.cpu_ns += cost;
                    st.max_rounds += 1;
                    st.max_rounds_cpu_ns += cost;
                }
                Payer::Observers(_) => st.paid_rounds += 1,
            }
            st.max_round_cpu_ns = st.max_round_cpu_ns.max(cost);
            // Only a round of every process at one moment anchors the tree afresh.
            if one_moment {
                st.changed_since_round = false;
                st.last_full_round_ns = Some(t);
            }
            if full {
                st.last_round_all_ns = Some(t);
            }
            st.tick_term = term;
            st.tick_rss_bytes = sample.rss_bytes;
            st.rounds += 1;
            if one_moment {
                st.moments += 1;
            }
            if let Some(last) = st.last_round_ns {
                st.max_gap_ns = st.max_gap_ns.max(t.saturating_sub(last));
            }
            st.looked(t);
            st.last_cpu_ns = Some(st.last_cpu_ns.map_or(t, |l| l.max(t)));
            // Rounds run on two threads (the sampler's, and a tracker's at an exit stop), so
            // they may finish out of order: keep the earliest and the latest.
            st.last_round_ns = Some(st.last_round_ns.map_or(t, |l| l.max(t)));
            st.first_round_ns = Some(st.first_round_ns.map_or(t, |f| f.min(t)));
            // For observers, which look at memory in rounds: higher than every earlier round
            // (ticks may have seen higher already).
            new_high = sample.processes > 0 && sample.pss_bytes > st.max_round_pss;
            if full {
                st.max_round_pss = st.max_round_pss.max(sample.pss_bytes);
            }
            st.max_pss = st.max_pss.max(sample.pss_bytes);
            st.max_lo = st.max_lo.max(sample.low());
            st.max_hi = st.max_hi.max(sample.high());
            if moved_since_tick || !one_moment {
                st.still_since_ns = None;
            }
            // The state the held tick sample was of, read exactly at one moment (nothing moved
            // since that tick, and the tracker told of no change): the exact figures stand for
            // it from its first tick on, in place of its interval.
            if one_moment
                && !moved_since_tick
                && st.generation == st.tick_generation
                && let Some((first, _)) = st.provisional.take()
            {
                // Its memory, not its CPU: the round read that now, not at the first tick.
                let mut then = Sample {
                    t_ns: first.t_ns,
                    ..sample.clone()
                };
                for p in then.per_process.iter_mut().flatten() {
                    p.cpu_ns = None;
                }
                st.pending.hold(then);
            }
            // The window's held ticks go out before this round, so samples leave in order;
            // read at one moment, the round bounds each from above, by its figure plus what
            // could have fallen since.
            let ceiling = one_moment.then_some((sample.pss_bytes, fallen));
            pending = st.take_held(ceiling).collect::<Vec<_>>();
            if sample.processes > 0 || sample.unreadable > 0 {
                st.last_emit_ns = t;
            }
        }
        for p in pending {
            self.sink.emit_at(p.t_ns, Event::Sample { sample: p });
        }
        let round_pss_bytes = sample.pss_bytes;
        if sample.processes > 0 || sample.unreadable > 0 {
            self.sink.emit_at(t, Event::Sample { sample });
        }
        if let Payer::Observers(payers) = &paid_by {
            for o in payers {
                o.round_paid(cost);
            }
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
        self.emit_peaks(t, peaks);
    }
}

/// A round in progress. Holds the reader, so rounds and ticks never overlap.
pub(super) struct Round<'a> {
    reader: std::sync::MutexGuard<'a, Reader>,
    pub(super) observers: Vec<Arc<dyn RoundObserver>>,
    /// Who pays for it.
    paid_by: Payer,
    t: u64,
    /// CPU spent in the round before [`Sampler::end_round`].
    cost_ns: u64,
    exit_stop: Option<i32>,
    /// Processes still to read.
    pids: Vec<(i32, Cached)>,
    sample: Sample,
    refused: Vec<i32>,
    read_peaks: bool,
    /// (pid, PSS, VmHWM or 0) of each process read.
    read: Vec<(i32, u64, u64)>,
    /// Each exact read, as the carry takes it.
    exact: Vec<ExactRead>,
    per_process: Vec<ProcessSample>,
    /// Nothing moved so far: the round may be one moment.
    one_moment: bool,
    /// A process read had moved since the last tick.
    moved_since_tick: bool,
    /// The tracker's count of changes to the tree when the round began.
    generation: u64,
    /// The processes a round asked for by new images did not read (carried from their tick).
    others: Vec<i32>,
    /// Every process the round listed to read.
    listed: Vec<i32>,
    /// Resident bytes of the processes read (what the round's cost grew with).
    read_rss_bytes: u64,
}

impl Round<'_> {
    fn read_one(&mut self, pid: i32, cached: &Cached) {
        let t = self.t;
        let reader: &mut Reader = &mut self.reader;
        let page = reader.page;
        let before = reader.entry(pid, cached.image, t).counters();
        // A child that shares its parent's memory map is read through its parent.
        if reader.borrows_parent(pid, cached) {
            return;
        }
        let rollup = reader.procfs.smaps_rollup(pid);
        let after = reader.carried.get(&pid).and_then(|c| c.counters());
        match rollup {
            Ok(Some(r)) => {
                let stat = reader.procfs.stat(pid).ok().flatten();
                let Some(now) = after.or(before) else {
                    // Its counters are gone: it ended while read.
                    self.one_moment = false;
                    return;
                };
                // The counters moved during the walk (a process faulting in memory as it is
                // read): the read is a smear, not an anchor; the process is carried.
                let smear = before != after;
                self.moved_since_tick |= reader.seen(pid, cached, now);
                // Memory the counters still hold that the walk did not see: a mapping already
                // taken out of the process's map and not yet freed (munmap and exit detach the
                // mapping first, then free its pages; a process preempted between the two holds
                // them so for as long), or counters that lag. The walk's PSS is right without
                // it, but that memory is falling where the counters do not show it yet, and
                // this round's ceiling on earlier samples (`State::take_held`) must count it as
                // fallen (a fill freed so was clamped to half its size, "exact").
                let unseen = (now.resident * page).saturating_sub(r.rss_bytes);
                reader.fallen += unseen as f64;
                // Anonymous pages shared (PSS below their whole pages) by a process that
                // shares with nobody the tree knows: a fork the tracker has not told of yet.
                let shares_unknown = !reader.families.may_share(pid)
                    && r.anon_bytes.saturating_sub(r.pss_anon_bytes) >= page;
                if smear || shares_unknown {
                    self.one_moment = false;
                }
                let read = ExactRead {
                    pid,
                    t_ns: t,
                    pss_bytes: r.pss_bytes,
                    pss_anon_bytes: r.pss_anon_bytes,
                    counters: now,
                    faults: stat.as_ref().map(|s| s.minflt),
                };
                if smear {
                    // What the walk counted lies between the counters before and after it:
                    // its share, over the fewer file pages (those beyond count as gained).
                    let fewer = Counters {
                        resident: now.resident,
                        shared: before.map_or(now.shared, |b| b.shared.min(now.shared)),
                    };
                    reader.read_one(
                        &ExactRead {
                            counters: fewer,
                            ..read
                        },
                        shares_unknown,
                    );
                } else {
                    reader.read_one(&read, shares_unknown);
                    self.exact.push(read);
                }
                self.sample.pss_bytes += r.pss_bytes;
                self.sample.rss_bytes += r.rss_bytes;
                self.read_rss_bytes += r.rss_bytes;
                self.sample.processes += 1;
                // For reports that stack memory and CPU by process; `stat` costs ~10 µs
                // against the rollup's 60 µs and more, and the round's measured cost
                // includes it, so the budget still holds.
                let per_tick = 1_000_000_000 / crate::kernel::proc::clock_ticks_per_second();
                self.per_process.push(ProcessSample {
                    pid,
                    pss_bytes: r.pss_bytes,
                    cpu_ns: stat.map(|s| (s.utime_ticks + s.stime_ticks) * per_tick),
                });
                let hwm = if self.read_peaks {
                    reader
                        .procfs
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
            // No mm (a zombie) or gone since the list was taken: nothing to count, and the
            // tree changed during the round.
            Ok(None) => self.one_moment = false,
            Err(e)
                if matches!(
                    crate::kernel::proc::os_error(&e),
                    Some(libc::ENOENT | libc::ESRCH)
                ) =>
            {
                self.one_moment = false
            }
            Err(_) => {
                self.sample.unreadable += 1;
                self.refused.push(pid);
            }
        }
    }

    /// Whether nothing moved since each process was read: its counters (and minor faults, for
    /// one that may share anonymous pages) as read, and the tracker told of no change.
    fn still(&mut self, st: &super::State) -> bool {
        if st.generation != self.generation {
            return false;
        }
        let reader: &mut Reader = &mut self.reader;
        self.exact.iter().all(|e| {
            let Some(c) = reader.carried.get(&e.pid) else {
                return false;
            };
            let counters: Option<Counters> = c.counters();
            if counters != Some(e.counters) {
                return false;
            }
            if reader.families.may_share(e.pid) {
                let faults = reader.procfs.stat(e.pid).ok().flatten().map(|s| s.minflt);
                return faults == e.faults;
            }
            true
        })
    }
}
