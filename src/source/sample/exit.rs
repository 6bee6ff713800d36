//! A process's exit, as the sampler sees it: the kernel's high-water mark at exit, read by the
//! tracker (`exit_peak`) or come later in a taskstats exit record (`exit_record`, with the
//! processes gone kept a while for it), and the round or tick at a ptrace exit stop, the last
//! chance to read the memory (`at_exit`). Each makes a sample of the tree when it is a new
//! maximum.
//!
//! Part of the sampler (`sample/mod.rs`), on its state: must not pace rounds or ticks, which
//! are the sampling thread's.

use super::carried::Carried;
use super::carry::{self, Counters, Estimate};
use super::{Cached, Pace, Reader, Round, SMALL_EXIT_ROUND_BYTES, Sampler, State};
use crate::bus::event::Event;
use crate::model::{Sample, SampleKind};

/// How long a process gone is remembered for a high-water mark at its exit that comes after
/// it (taskstats records, which the accounts thread takes at least every 320 ms).
const ENDED_KEEP_NS: u64 = 1_000_000_000;

/// A process gone whose high-water mark at exit may still come (see
/// [`Sampler::exit_record`]): what an exit peak needs of it, as of its end.
#[derive(Clone, Copy)]
pub(super) struct Ended {
    t_ns: u64,
    image: u32,
    /// The PSS and resident size of the rest of the tree at its end (as of the last tick).
    others_pss: u64,
    tick_rss_bytes: u64,
    /// The highest mark received (0: none yet), and the highest already turned into a sample.
    hwm: u64,
    applied: u64,
}

/// The tree's sample at a process's exit: the rest of the tree's PSS with the exiting
/// process at its high-water mark (`beyond`, its bound the growth no read saw), and the
/// resident size so (the others' as of the last tick).
fn exit_sample(t_ns: u64, others_pss: u64, beyond: Estimate, rss_bytes: u64) -> Sample {
    Sample {
        t_ns,
        pss_bytes: others_pss + beyond.pss_bytes,
        rss_bytes,
        kind: SampleKind::ExitPeak,
        bound_bytes: Some(beyond.bound_bytes),
        ..Default::default()
    }
}

impl Sampler {
    /// A process gone (the tracker's thread, in [`Sampler::process_ended`]): without a
    /// high-water mark from the tracker, one may come from an exit record, before or after
    /// this, so what an exit peak needs of it is kept a while. This thread is the tracker's,
    /// which must not wait for a round: the sampling thread makes the sample.
    pub(super) fn remember_ended(&self, st: &mut State, tgid: i32, c: &Cached) {
        if !self.read_peaks.load(std::sync::atomic::Ordering::Relaxed) || !c.counted() {
            return;
        }
        let now = self.sink.now_ns();
        while let Some(&(t, p)) = st.ended_order.front()
            && now.saturating_sub(t) >= ENDED_KEEP_NS
        {
            st.ended_order.pop_front();
            if st.ended.get(&p).is_some_and(|e| e.t_ns == t) {
                st.ended.remove(&p);
            }
        }
        st.ended_order.push_back((now, tgid));
        let others_pss = st.others_pss(tgid);
        let tick_rss_bytes = st.tick_rss_bytes;
        st.ended.insert(
            tgid,
            Ended {
                t_ns: now,
                image: c.image,
                others_pss,
                tick_rss_bytes,
                hwm: c.exit_hwm,
                applied: 0,
            },
        );
        // Made into a sample at the sampling thread's next turn (a tick at most 10 ms on),
        // stamped with the end: waking it at each end cost a fork loop's netlink run a
        // context switch per process.
        if c.exit_hwm > 0 {
            st.ended_due = true;
        }
    }

    /// A taskstats exit record of a thread of `tgid` (every exiting thread of the machine,
    /// from the accounts thread): the high-water resident size of its memory then. Used only
    /// when the tracker reads no high-water mark at exit itself ([`Sampler::read_peaks`]:
    /// netlink): the record comes before or after the tracker sees the process end, and the
    /// largest one turns into an exit peak at its end, as [`Sampler::exit_peak`] makes it.
    pub fn exit_record(&self, tgid: i32, hwm_bytes: u64) {
        if !self.read_peaks.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let mut st = self.state.lock().expect("sampler lock");
        if let Some(c) = st.live.get_mut(&tgid) {
            c.exit_hwm = c.exit_hwm.max(hwm_bytes);
            return;
        }
        let Some(e) = st.ended.get_mut(&tgid) else {
            return;
        };
        if hwm_bytes <= e.hwm {
            return;
        }
        e.hwm = hwm_bytes;
        // The accounts thread may wait for the reader: no round waits on it.
        drop(st);
        self.apply_ended();
    }

    /// Turns the exit records of processes gone into exit peaks (see
    /// [`Sampler::exit_record`]): each one's growth beyond the largest size ste read, on top
    /// of the rest of the tree at its end.
    pub(super) fn apply_ended(&self) {
        let reader = self.reader.lock().expect("reader lock");
        let mut st = self.state.lock().expect("sampler lock");
        st.ended_due = false;
        let due: Vec<(i32, Ended)> = st
            .ended
            .iter_mut()
            .filter(|(_, e)| e.hwm > e.applied)
            .map(|(p, e)| {
                e.applied = e.hwm;
                (*p, *e)
            })
            .collect();
        for (tgid, e) in due {
            let (est, seen, last_resident) = reader.seen(tgid, e.image);
            let Some(beyond) = carry::beyond_last_read(est, seen, e.hwm) else {
                continue;
            };
            let sample = exit_sample(
                e.t_ns,
                e.others_pss,
                beyond,
                (e.tick_rss_bytes + e.hwm).saturating_sub(last_resident),
            );
            self.emit_exit_high(st, sample);
            st = self.state.lock().expect("sampler lock");
        }
    }

    /// Called by a tracker that read process `tgid`'s high-water resident size in its exit
    /// (the ebpf tracker, in the kernel), before [`Sampler::process_ended`]: what it grew
    /// beyond the largest size ste read, since the last tick, may have made the tree's peak.
    /// Emits a sample at `t_ns` (the exit) when the sum with it is a new maximum; its bound
    /// says how much of it is that unseen growth.
    pub fn exit_peak(&self, tgid: i32, t_ns: u64, hwm_bytes: u64) {
        let (est, seen, last_resident) = {
            let reader = self.reader.lock().expect("reader lock");
            let st = self.state.lock().expect("sampler lock");
            let Some(live) = st.live.get(&tgid) else {
                return;
            };
            if !live.counted() {
                return;
            }
            reader.seen(tgid, live.image)
        };
        let Some(beyond) = carry::beyond_last_read(est, seen, hwm_bytes) else {
            return;
        };
        let st = self.state.lock().expect("sampler lock");
        let others = st.others_pss(tgid);
        let sample = exit_sample(
            t_ns,
            others,
            beyond,
            (st.tick_rss_bytes + hwm_bytes).saturating_sub(last_resident),
        );
        self.emit_exit_high(st, sample);
    }

    /// Emits `sample`, taken at a process's exit, when it is a new maximum: after the tick
    /// held back for its window, with the live tree's counts of processes. `st` is the
    /// sampler's state, locked by the caller since the maximum was compared.
    fn emit_exit_high(&self, mut st: std::sync::MutexGuard<'_, State>, mut sample: Sample) {
        if sample.pss_bytes <= st.max_pss {
            return;
        }
        st.max_pss = sample.pss_bytes;
        sample.processes = st.live.values().filter(|c| c.counted()).count() as u32;
        sample.unreadable = st.live.values().filter(|c| c.unreadable).count() as u32;
        let held: Vec<Sample> = st.take_held().collect();
        drop(st);
        for p in held {
            self.sink.emit_at(p.t_ns, Event::Sample { sample: p });
        }
        self.sink.emit_at(sample.t_ns, Event::Sample { sample });
    }

    /// Called by a tracker while process `tgid` is stopped in its exit with its memory still
    /// attached, with the resident size it read there (`VmRSS`) and its file-backed and shared
    /// part (`RssFile` + `RssShmem`, statm's `shared`), when read. Takes a round when that
    /// memory could raise the peak and the budget is not overdrawn by more than a round;
    /// otherwise costs nothing. The round reads `tgid` at once; the tracker lets the process
    /// go and then calls [`ExitRound::finish`], which reads the other processes. With
    /// observers (`--maps-at-peak`, `--malloc`), which look at the exiting memory when the
    /// round is done, the whole round is taken before it returns.
    pub fn at_exit(
        &self,
        tgid: i32,
        rss_bytes: u64,
        shared_bytes: Option<u64>,
    ) -> Option<ExitRound<'_>> {
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
            // The exit stop is the last chance to see this memory. With observers (the map at
            // the peak, malloc's snapshots), the round may go up to one round into debt; the
            // debt delays the next periodic round.
            // Against the highest exact round, not the ticks' maximum: the exit round is what
            // makes a peak exact (and what observers look at).
            // Without observers an exit takes a round only when the budget holds and the memory
            // is small (a short program: its one exact read); else a tick of the exiting
            // process, whose counters carry its growth to the exit at a few µs, where a round
            // would walk every page (tens of ms for a GiB, which a short run's budget cannot
            // pay).
            let observed = !self.observers.read().expect("observers lock").is_empty();
            let affordable = if observed {
                st.budget.tokens_ns >= -st.budget.expected_round_ns(st.tick_rss_bytes)
            } else {
                st.budget.tokens_ns >= 0.0 && others + rss_bytes <= SMALL_EXIT_ROUND_BYTES
            };
            if others + rss_bytes <= st.max_round_pss || (!fixed && !affordable) {
                let could_raise = others + rss_bytes > st.max_pss;
                drop(st);
                if could_raise {
                    self.exit_tick(tgid, rss_bytes, shared_bytes);
                }
                return None;
            }
        }
        let round = self.begin_round(Some(tgid), false);
        if round.observers.is_empty() {
            return Some(ExitRound(round));
        }
        self.end_round(round);
        None
    }

    /// A tick of one process stopped in its exit, its memory still attached: its counters,
    /// carried from its anchor (a few µs, where an exact round would walk every page). Emits
    /// a carried sample when the sum with it is a new maximum. The counters are those the
    /// tracker read in the same stop when it gives the shared part; else `statm`'s, opened
    /// for it: an open at every exit stop of a fork loop.
    fn exit_tick(&self, tgid: i32, rss_bytes: u64, shared_bytes: Option<u64>) {
        let mut reader = self.reader.lock().expect("reader lock");
        let page = reader.page;
        let read = shared_bytes.map(|shared| Counters {
            resident: rss_bytes / page,
            shared: shared / page,
        });
        let cached = {
            let st = self.state.lock().expect("sampler lock");
            match st.live.get(&tgid) {
                Some(c) if c.counted() => *c,
                _ => return,
            }
        };
        let Reader {
            procfs, carried, ..
        } = &mut *reader;
        let parent = Carried::parent_of_fork(carried, tgid, &cached);
        let c = match read {
            Some(_) => Carried::entry(carried, tgid, cached.image),
            None => Carried::of(carried, procfs, tgid, cached.image),
        };
        let Some(now) = read.or_else(|| c.counters()) else {
            return;
        };
        let last_resident = c.last_resident_bytes(page);
        let (e, _) = c.tick(now, cached.exec_seen, parent, page);
        drop(reader);
        let t = self.sink.now_ns();
        let mut st = self.state.lock().expect("sampler lock");
        if let Some(l) = st.live.get_mut(&tgid) {
            l.pss = e.pss_bytes;
        }
        let sample = Sample {
            t_ns: t,
            pss_bytes: st
                .live
                .values()
                .filter(|c| c.counted())
                .map(|c| c.pss)
                .sum(),
            // The others' as of the last tick, with this process's size now.
            rss_bytes: (st.tick_rss_bytes + now.resident * page).saturating_sub(last_resident),
            kind: SampleKind::Carried,
            // The others' as of the last tick (this process's counted twice: a bound).
            bound_bytes: Some(
                e.bound_bytes
                    .saturating_add(st.tick_bound_bytes.unwrap_or(0)),
            ),
            ..Default::default()
        };
        self.emit_exit_high(st, sample);
    }
}

impl Reader {
    /// What ste last saw of `tgid` at its image `image`: the estimate at the largest size
    /// read, that size, and its resident bytes at the last tick. A process never read since
    /// its exec: all of its memory is unseen (nothing, 0, 0).
    fn seen(&self, tgid: i32, image: u32) -> (Estimate, u64, u64) {
        match self.carried.get(&tgid) {
            Some(c) if c.image == image => (
                c.at_seen,
                c.seen_resident_bytes,
                c.last_resident_bytes(self.page),
            ),
            _ => (Estimate::default(), 0, 0),
        }
    }
}

pub struct ExitRound<'a>(Round<'a>);

impl ExitRound<'_> {
    pub fn finish(self, sampler: &Sampler) {
        sampler.end_round(self.0);
    }
}
