//! A process's exit, as the sampler sees it: the kernel's high-water mark at exit, read by the
//! tracker (`exit_peak`) or come later in a taskstats exit record (`exit_record`, with the
//! processes gone kept a while for it), and the read or tick at a ptrace exit stop, the last
//! chance to read the memory (`at_exit`). Each makes a sample of the tree when it raises the
//! maximum (its estimate or its upper bound).
//!
//! Part of the sampler (`sample/mod.rs`), on its state: must not pace rounds or ticks, which
//! are the sampling thread's.

use super::carried::ExactRead;
use super::carry::{self, Counters, Term};
use super::tick::sample_of;
use super::{Cached, Pace, SMALL_EXIT_ROUND_BYTES, Sampler, State};
use crate::bus::event::Event;
use crate::bus::sink::thread_cpu_ns;
use crate::model::{Sample, SampleKind};

/// How long a process gone is remembered for a high-water mark at its exit that comes after
/// it (taskstats records, which the accounts thread takes at least every 320 ms).
const ENDED_KEEP_NS: u64 = 1_000_000_000;

/// A process gone whose high-water mark at exit may still come (see
/// [`Sampler::exit_record`]): what an exit peak needs of it, as of its end.
#[derive(Clone, Copy)]
pub(super) struct Ended {
    t_ns: u64,
    /// The tree's sum at the last tick before its end, with it, and its resident size then.
    term: Term,
    rss_bytes: u64,
    max_rss_bytes: u64,
    max_rss_tree: f64,
    rest_hi: Option<f64>,
    tick_rss_bytes: u64,
    /// The highest mark received (0: none yet), and the highest already turned into a sample.
    hwm: u64,
    applied: u64,
}

/// How far below the truth the kernel's resident counters may read (bytes) at a process's
/// exit, where one thread is left: since 6.2 they are per-CPU counters read without summing
/// (`percpu_counter_read_positive`), each CPU's part off by up to the counter's batch,
/// `max(32, 2 × CPUs)` pages; before, the exiting thread still holds up to 64 changes of its
/// own (`kernel::release`: 4 MiB with fault-around). statm, `VmHWM` and taskstats'
/// `hiwater_rss` all read them so. An upper bound taken from them adds it.
pub(super) fn counter_lag_bytes() -> u64 {
    static LAG: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *LAG.get_or_init(|| {
        let kernel = crate::kernel::release::Version::running();
        if !kernel.exact_rss_counters() {
            return kernel.rss_counter_lag_per_thread();
        }
        let cpus = u64::from(crate::kernel::proc::online_cpus().unwrap_or(1));
        cpus * 32.max(2 * cpus) * crate::kernel::proc::page_size()
    })
}

/// Whether the counters an exit stop reads may lag by whole pages of the process's own
/// faults (before 6.2): a process whose counters say it did not grow may have.
pub fn exit_counters_lag() -> bool {
    !crate::kernel::release::Version::running().exact_rss_counters()
}

/// What an exit's high-water mark says of the tree, from the process's last read (`rss`,
/// with the tree's `term` then), the most any read saw of it (`max_rss`, with the tree's
/// estimate then, `max_tree`), the most the tree's upper bound stood above it at any read
/// (`rest_hi`), and the mark (`hwm`).
struct Mark {
    term: Term,
    rss: u64,
    max_rss: u64,
    max_tree: f64,
    rest_hi: Option<f64>,
    hwm: u64,
}

/// The tree's sample at a process's exit. The upper bound is the tree at the last read plus all
/// the process may have grown beyond its size then (counted as private memory), or, when the
/// mark is above every read of it, at the read where the tree stood highest above the
/// process's size. The lower bound is the last read's (a moment the tree did reach). The estimate puts the mark's growth beyond the most any read saw of the process
/// on the tree as it was at that read (the others as they were when the process was last seen
/// at its highest): a mark reached long ago (a parent that filled and freed before it forked)
/// is that moment's, not one beside the others as they are at its exit; and a process read
/// while it grew, then gone (netlink sees the end after the memory is freed), peaked beside
/// the others as they were while it grew.
fn exit_sample(t_ns: u64, m: Mark, rss_bytes: u64) -> Option<Sample> {
    // A mark no higher than the last read says nothing new, unless the counters of both lag
    // by the exiting thread's own faults (before 6.2): the truth may be up to that above.
    let beyond = match carry::beyond_last_tick(m.rss, m.hwm) {
        Some(b) => b,
        None if exit_counters_lag() => 0,
        None => return None,
    };
    let central = if m.max_rss > 0 {
        m.max_tree + m.hwm.saturating_sub(m.max_rss) as f64
    } else {
        m.term.central + beyond as f64
    };
    // A mark above every read was reached at a moment no read saw, between any two of them:
    // a process that grew to its mark and freed it before the last read (the seed's fillfill)
    // peaked beside the tree of an earlier one. A mark a read saw (within the counters' lag)
    // leaves only the growth after the last read unseen: the tree then, counting that growth
    // as private (a process that mapped a file the others hold was read at its mark, and its
    // pages are shares).
    let lag = counter_lag_bytes() as f64;
    let last = m.term.hi - m.rss as f64;
    let rest = match m.rest_hi {
        Some(r) if m.hwm > m.max_rss.saturating_add(counter_lag_bytes()) => r.max(last),
        _ => last,
    };
    let hi = rest + m.hwm as f64 + lag;
    Some(Sample {
        t_ns,
        rss_bytes,
        kind: SampleKind::ExitPeak,
        ..sample_of(&Term {
            central: central.clamp(m.term.lo, hi),
            lo: m.term.lo,
            hi,
        })
    })
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
        let (term, tick_rss_bytes) = (st.tick_term, st.tick_rss_bytes);
        st.ended.insert(
            tgid,
            Ended {
                t_ns: now,
                term,
                rss_bytes: c.rss,
                max_rss_bytes: c.max_rss,
                max_rss_tree: c.max_rss_tree,
                rest_hi: c.rest_hi,
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
        drop(st);
        self.apply_ended();
    }

    /// Turns the exit records of processes gone into exit peaks (see
    /// [`Sampler::exit_record`]): each one's growth beyond its size at its last tick, on top
    /// of the tree then.
    pub(super) fn apply_ended(&self) {
        let mut st = self.state.lock().expect("sampler lock");
        st.ended_due = false;
        let due: Vec<Ended> = st
            .ended
            .values_mut()
            .filter(|e| e.hwm > e.applied)
            .map(|e| {
                e.applied = e.hwm;
                *e
            })
            .collect();
        for e in due {
            let rss = (e.tick_rss_bytes + e.hwm).saturating_sub(e.rss_bytes);
            let mark = Mark {
                term: e.term,
                rss: e.rss_bytes,
                max_rss: e.max_rss_bytes,
                max_tree: e.max_rss_tree,
                rest_hi: e.rest_hi,
                hwm: e.hwm,
            };
            let Some(sample) = exit_sample(e.t_ns, mark, rss) else {
                continue;
            };
            self.emit_exit_high(st, sample);
            st = self.state.lock().expect("sampler lock");
        }
    }

    /// Called by a tracker that read process `tgid`'s high-water resident size in its exit
    /// (the ebpf tracker, in the kernel), before [`Sampler::process_ended`]: what it grew
    /// beyond its size at the last tick may have made the tree's peak. Emits a sample at
    /// `t_ns` (the exit) when it raises the maximum.
    pub fn exit_peak(&self, tgid: i32, t_ns: u64, hwm_bytes: u64) {
        let st = self.state.lock().expect("sampler lock");
        let Some(live) = st.live.get(&tgid) else {
            return;
        };
        if !live.counted() {
            return;
        }
        let rss = (st.tick_rss_bytes + hwm_bytes).saturating_sub(live.rss);
        let mark = Mark {
            term: st.tick_term,
            rss: live.rss,
            max_rss: live.max_rss,
            max_tree: live.max_rss_tree,
            rest_hi: live.rest_hi,
            hwm: hwm_bytes,
        };
        let Some(sample) = exit_sample(t_ns, mark, rss) else {
            return;
        };
        self.emit_exit_high(st, sample);
    }

    /// Emits `sample`, taken at a process's exit, when it raises the maximum (its estimate or
    /// its upper bound): after the ticks held back for their window, with the live tree's
    /// counts of processes. `st` is the sampler's state, locked by the caller since the
    /// maximum was compared.
    fn emit_exit_high(&self, mut st: std::sync::MutexGuard<'_, State>, mut sample: Sample) {
        if sample.pss_bytes <= st.max_pss && sample.high() <= st.max_hi {
            return;
        }
        st.max_pss = st.max_pss.max(sample.pss_bytes);
        st.max_hi = st.max_hi.max(sample.high());
        sample.processes = st.live.values().filter(|c| c.counted()).count() as u32;
        sample.unreadable = st.live.values().filter(|c| c.unreadable).count() as u32;
        let held: Vec<Sample> = st.take_held(None).collect();
        drop(st);
        for p in held {
            self.sink.emit_at(p.t_ns, Event::Sample { sample: p });
        }
        self.sink.emit_at(sample.t_ns, Event::Sample { sample });
    }

    /// Called by a tracker while process `tgid` is stopped in its exit with its memory still
    /// attached, with the resident size it read there (`VmRSS`) and its file-backed and shared
    /// part (`RssFile` + `RssShmem`, statm's `shared`), when read: the last chance to read that
    /// memory. With observers (`--maps-at-peak`, `--malloc`), which look at the exiting memory
    /// in rounds, a whole round is taken before it returns. Otherwise, when that memory could
    /// raise the peak, the process is read exactly if it is small and the budget holds (a
    /// short program's one exact read), else ticked from the counters the tracker read (a few
    /// µs, where a read walks every page), and the tree carried with it.
    pub fn at_exit(&self, tgid: i32, rss_bytes: u64, shared_bytes: Option<u64>) {
        let read = {
            let mut st = self.state.lock().expect("sampler lock");
            let now = self.sink.now_ns();
            self.refill(&mut st, now);
            let observed = !self.observers.read().expect("observers lock").is_empty();
            if observed {
                let affordable =
                    st.budget.tokens_ns >= -st.budget.expected_round_ns(st.tick_rss_bytes);
                let fixed = matches!(self.pace, Pace::Fixed(_));
                let others = st.others_pss(tgid);
                if others + rss_bytes > st.max_round_pss && (fixed || affordable) {
                    drop(st);
                    let round = self.begin_round(Some(tgid), false);
                    self.end_round(round);
                }
                return;
            }
            let last = st.live.get(&tgid).map_or(0, |c| c.rss);
            // Before 6.2 the counters read here may lag the process's last faults by up to
            // `counter_lag_bytes`: what it may have grown by unseen could raise the peak too.
            let unseen = if exit_counters_lag() {
                counter_lag_bytes()
            } else {
                0
            };
            let could_raise = st.tick_term.hi + (rss_bytes + unseen).saturating_sub(last) as f64
                > st.max_lo as f64;
            if !could_raise {
                return;
            }
            st.budget.tokens_ns >= 0.0 && rss_bytes <= SMALL_EXIT_ROUND_BYTES
        };
        self.exit_carry(tgid, rss_bytes, shared_bytes, read);
    }

    /// The tree at `tgid`'s exit stop: the process read exactly (`read`) or ticked from the
    /// counters the tracker read (statm's when it gave none), the others as of their last tick.
    /// Emits a carried sample when it raises the maximum.
    fn exit_carry(&self, tgid: i32, rss_bytes: u64, shared_bytes: Option<u64>, read: bool) {
        let cpu0 = thread_cpu_ns();
        let mut reader = self.reader.lock().expect("reader lock");
        let page = reader.page;
        let (cached, pids) = {
            let st = self.state.lock().expect("sampler lock");
            let now = self.sink.now_ns();
            let Some(c) = st.live.get(&tgid).filter(|c| c.counted()).copied() else {
                return;
            };
            reader.sync(&st.live, now);
            let pids: Vec<i32> = st
                .live
                .iter()
                .filter(|(p, c)| c.readable(now) || **p == tgid)
                .map(|(p, _)| *p)
                .collect();
            (c, pids)
        };
        let t = self.sink.now_ns();
        let c = reader.entry(tgid, cached.image, t);
        let told = shared_bytes.map(|shared| Counters {
            resident: rss_bytes / page,
            shared: shared / page,
        });
        let Some(now) = told.or_else(|| c.counters()) else {
            return;
        };
        reader.seen(tgid, &cached, now);
        if read
            && let Ok(Some(r)) = reader.procfs.smaps_rollup(tgid)
            && reader.carried.get(&tgid).and_then(|c| c.counters()) == Some(now)
        {
            let shares_unknown = !reader.families.may_share(tgid)
                && r.anon_bytes.saturating_sub(r.pss_anon_bytes) >= page;
            let read = ExactRead {
                pid: tgid,
                t_ns: t,
                pss_bytes: r.pss_bytes,
                pss_anon_bytes: r.pss_anon_bytes,
                counters: now,
                faults: None,
            };
            reader.read_one(&read, shares_unknown);
        }
        let sum = reader.carry_tree(&pids);
        drop(reader);
        let cost = thread_cpu_ns().saturating_sub(cpu0);
        let mut st = self.state.lock().expect("sampler lock");
        if read {
            st.budget.round_spent(cost, rss_bytes);
        } else {
            st.budget.tick_spent(cost);
        }
        st.cpu_ns += cost;
        if let Some(l) = st.live.get_mut(&tgid) {
            l.rss = now.resident * page;
            l.saw_rss(l.rss, &sum.term);
        }
        let sample = Sample {
            t_ns: t,
            rss_bytes: sum.rss_bytes,
            kind: SampleKind::Carried,
            ..sample_of(&sum.term)
        };
        st.max_lo = st.max_lo.max(sample.low());
        self.emit_exit_high(st, sample);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn term(central: u64, lo: u64, hi: u64) -> Term {
        Term {
            central: central as f64,
            lo: lo as f64,
            hi: hi as f64,
        }
    }

    #[test]
    fn a_mark_reached_and_freed_before_the_last_read_is_bounded_by_the_tree_beside_it() {
        // fillfill's child: read at 255 MiB beside a 1 MiB parent, it reached its 256 MiB mark
        // after that read and had freed half of it at the last read (tree 129 MiB then).
        let m = Mark {
            term: term(129 * MIB, 129 * MIB, 129 * MIB),
            rss: 128 * MIB,
            max_rss: 255 * MIB,
            max_tree: (256 * MIB) as f64,
            rest_hi: Some(MIB as f64),
            hwm: 256 * MIB,
        };
        let s = exit_sample(7, m, 0).expect("a mark above the last read");
        assert_eq!(s.kind, SampleKind::ExitPeak);
        assert_eq!(s.pss_bytes, 257 * MIB);
        assert!(s.high() >= 257 * MIB, "{s:?}");
        assert!(s.high() <= 257 * MIB + counter_lag_bytes(), "{s:?}");
        assert_eq!(s.low(), 129 * MIB);
    }

    #[test]
    fn the_last_read_bounds_a_mark_when_it_stood_highest_above_the_process() {
        let m = Mark {
            term: term(300 * MIB, 290 * MIB, 310 * MIB),
            rss: 10 * MIB,
            max_rss: 10 * MIB,
            max_tree: (300 * MIB) as f64,
            rest_hi: Some((200 * MIB) as f64),
            hwm: 50 * MIB,
        };
        let s = exit_sample(7, m, 0).expect("a mark above the last read");
        assert_eq!(s.high(), 350 * MIB + counter_lag_bytes());
        assert_eq!(s.pss_bytes, 340 * MIB);
    }

    /// Unless the counters lag by the exiting thread's own faults (before 6.2).
    #[test]
    fn no_mark_above_the_last_read_makes_no_sample() {
        let m = Mark {
            term: term(300 * MIB, 290 * MIB, 310 * MIB),
            rss: 50 * MIB,
            max_rss: 50 * MIB,
            max_tree: (300 * MIB) as f64,
            rest_hi: None,
            hwm: 50 * MIB,
        };
        assert_eq!(exit_sample(7, m, 0).is_some(), exit_counters_lag());
    }
}
