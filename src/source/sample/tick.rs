//! Ticks: `statm` of every live process (held open, `pread`), each process's PSS carried from
//! its last exact read, and the samples they emit, bounded by the emission window.
//!
//! Owns one tick's reads and what it hands on (the high-water marks a tick reads for a tracker
//! that cannot, the tick's sample, whether memory moved or rose to a new high). When a tick is
//! due is `thread.rs`'s; the carry's arithmetic is `carry.rs`'s.

use super::carry::Term;
use super::{Cached, GROWING_BYTES, Sampler};
use crate::bus::event::Event;
use crate::bus::sink::thread_cpu_ns;
use crate::model::{ProcessSample, Sample, SampleKind};

/// Ticks' samples are emitted at most once per window of `max(EMIT_MIN_NS, elapsed /
/// EMIT_SCALE)`, the window's highest: each emitted sample wakes the session thread (~20 µs),
/// which would cost more than the ticks themselves. A chart is ~80 columns wide and the
/// HTML's ~1,000: a run of an hour keeps ~1,000 × (1 + ln(hour / 5 s)) ≈ 7,600 of them.
const EMIT_MIN_NS: u64 = 5_000_000;
const EMIT_SCALE: u64 = 1_000;
/// Samples held for an exact round that may bound them (see `State::take_held`): beyond this
/// many, they go out. ~4 a window: seconds at the least, and a run's whole chart at most.
const HELD_SAMPLES: usize = 4_000;
/// A tick reads the processes' CPU too (`stat`, ~10 µs each, against statm's ~2 µs) when no
/// tick or round has for this long: the CPU over time keeps a pace of its own when the budget
/// keeps rounds far apart (a chart of a build was empty for 40 s so).
const CPU_PACE_NS: u64 = 1_000_000_000;

impl Sampler {
    /// One tick: read the counters of every live process and carry the tree's PSS. Returns
    /// whether any counter moved, or the set of processes changed, since the last tick, and the
    /// sum when it is a new maximum.
    pub(super) fn tick(&self) -> (bool, Option<u64>) {
        let mut reader = self.reader.lock().expect("reader lock");
        let cpu0 = thread_cpu_ns();
        let (procs, unreadable, live_now, generation, with_cpu) = {
            let st = self.state.lock().expect("sampler lock");
            let now = self.sink.now_ns();
            let gone = reader.sync(&st.live, now);
            let with_cpu = st
                .last_cpu_ns
                .is_none_or(|t| now.saturating_sub(t) >= CPU_PACE_NS);
            (
                parents_first(
                    st.live
                        .iter()
                        .filter(|(_, c)| c.readable(now))
                        .map(|(p, c)| (*p, *c))
                        .collect(),
                ),
                st.live.values().filter(|c| c.unreadable).count() as u32,
                gone,
                st.generation,
                with_cpu,
            )
        };
        let t = self.sink.now_ns();
        let page = reader.page;
        let mut changed = live_now || procs.len() != reader.carried.len();
        let read_peaks = self.read_peaks.load(std::sync::atomic::Ordering::Relaxed);
        let mut peaks = Vec::new();
        let mut pids = Vec::with_capacity(procs.len());
        for &(pid, cached) in &procs {
            let c = reader.entry(pid, cached.image, t);
            let Some(now) = c.counters() else {
                continue;
            };
            if reader.borrows_parent(pid, &cached) {
                continue;
            }
            changed |= reader.seen(pid, &cached, now);
            pids.push(pid);
            // A tracker that cannot read the high-water mark at exit (netlink) has it read
            // whenever a tick sees the process above the last one reported.
            if read_peaks
                && now.resident * page > cached.hwm
                && let Ok(Some(hwm)) = reader.procfs.status(pid).map(|s| s.vm_hwm_bytes)
                && hwm > cached.hwm
            {
                peaks.push((pid, hwm));
            }
        }
        let sum = reader.carry_tree(&pids);
        let cpu: foldhash::HashMap<i32, u64> = if with_cpu {
            pids.iter()
                .filter_map(|&pid| Some((pid, reader.procfs.cpu_ns(pid).ok().flatten()?)))
                .collect()
        } else {
            Default::default()
        };
        let fallen = reader.fallen;
        drop(reader);
        let cost = thread_cpu_ns().saturating_sub(cpu0);
        let sample = Sample {
            t_ns: t,
            unreadable,
            kind: SampleKind::Carried,
            processes: sum.per_process.len() as u32,
            rss_bytes: sum.rss_bytes,
            ..sample_of(&sum.term)
        };
        let sample = Sample {
            per_process: Some(
                sum.per_process
                    .iter()
                    .map(|&(pid, pss_bytes, _)| ProcessSample {
                        pid,
                        pss_bytes,
                        cpu_ns: cpu.get(&pid).copied(),
                    })
                    .collect(),
            ),
            ..sample
        };
        let mut st = self.state.lock().expect("sampler lock");
        for &(pid, pss, rss) in &sum.per_process {
            if let Some(c) = st.live.get_mut(&pid) {
                c.pss = pss;
                c.rss = rss;
                c.saw_rss(rss, &sum.term);
            }
        }
        for &(pid, hwm) in &peaks {
            if let Some(c) = st.live.get_mut(&pid) {
                c.hwm = c.hwm.max(hwm);
            }
        }
        self.emit_peaks(t, peaks);
        st.budget.tick_spent(cost);
        st.looked(t);
        if with_cpu {
            st.last_cpu_ns = Some(st.last_cpu_ns.map_or(t, |l| l.max(t)));
        }
        st.tick_growing = sample.rss_bytes > st.tick_rss_bytes.saturating_add(GROWING_BYTES);
        st.tick_rss_bytes = sample.rss_bytes;
        st.cpu_ns += cost;
        st.tick_cpu_ns += cost;
        st.ticks += 1;
        st.first_tick_ns.get_or_insert(t);
        st.last_tick_ns = Some(t);
        st.changed_since_round |= changed;
        st.still_since_ns = if changed {
            None
        } else {
            st.still_since_ns.or(st.last_tick_ns)
        };
        st.tick_term = sum.term;
        st.tick_anon_width = sum.anon_width;
        st.tick_generation = generation;
        if sample.processes == 0 {
            return (changed, None);
        }
        st.max_lo = st.max_lo.max(sample.low());
        st.max_hi = st.max_hi.max(sample.high());
        let new_high = (sample.pss_bytes > st.max_pss).then_some(sample.pss_bytes);
        st.max_pss = st.max_pss.max(sample.pss_bytes);
        // The sample of a state waits until something moves: an exact round of the same
        // state may still replace it (see `round.rs`), and while memory stands still each
        // emission would wake the session thread for nothing (a process asleep on its memory
        // cost ste ~0.3 % of a core so).
        st.mark_fallen(t, fallen);
        // Held long after much could have fallen, a sample gains nothing from a later read:
        // out they go once the windows kept pass HELD_WINDOWS.
        let out: Vec<Sample> = if st.since_decrease.len() > HELD_SAMPLES {
            st.take_held(None).collect()
        } else {
            Vec::new()
        };
        match st.provisional.take() {
            Some((first, _)) if !changed && !with_cpu => st.provisional = Some((first, t)),
            // The memory stands still and the CPU moved: the plateau goes on from this tick,
            // which carries the CPU (a point just before it would draw nothing new).
            Some((first, _)) if !changed => {
                st.pending.hold(first);
                st.provisional = Some((sample, t));
            }
            other => {
                st.provisional = other;
                st.finalize_provisional();
                st.provisional = Some((sample, t));
            }
        }
        let window = EMIT_MIN_NS.max(t / EMIT_SCALE);
        if t.saturating_sub(st.last_emit_ns) >= window && !st.pending.is_empty() {
            st.last_emit_ns = t;
            let held = st.pending.take();
            st.since_decrease.extend(held);
        }
        drop(st);
        for p in out {
            self.sink.emit_at(p.t_ns, Event::Sample { sample: p });
        }
        (changed, new_high)
    }
}

/// A carried sample's figures from the tree's sum: the estimate within its proven interval.
pub(super) fn sample_of(term: &Term) -> Sample {
    let lo = term.lo.max(0.0).floor() as u64;
    let hi = term.hi.max(term.lo).ceil() as u64;
    let central = (term.central.round() as u64).clamp(lo, hi);
    Sample {
        pss_bytes: central,
        low_bytes: Some(lo),
        high_bytes: Some(hi),
        ..Default::default()
    }
}

/// The processes in an order where a forked child comes after its parent, so that the child
/// joins the family its parent founded at the same tick.
pub(super) fn parents_first(mut procs: Vec<(i32, Cached)>) -> Vec<(i32, Cached)> {
    let listed: foldhash::HashSet<i32> = procs.iter().map(|(p, _)| *p).collect();
    if procs
        .iter()
        .all(|(p, c)| c.exec_seen || c.parent.is_none_or(|q| !listed.contains(&q) || q < *p))
    {
        return procs;
    }
    let mut out = Vec::with_capacity(procs.len());
    let mut done: foldhash::HashSet<i32> = foldhash::HashSet::default();
    while !procs.is_empty() {
        let before = procs.len();
        procs.retain(|&(p, c)| {
            let ready = c.exec_seen
                || c.parent
                    .is_none_or(|q| !listed.contains(&q) || done.contains(&q));
            if ready {
                out.push((p, c));
                done.insert(p);
            }
            !ready
        });
        if procs.len() == before {
            // A cycle cannot be (pids are unique), but never loop on one.
            out.append(&mut procs);
        }
    }
    out
}
