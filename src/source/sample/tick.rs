//! Ticks: `statm` of every live process (held open, `pread`), each process's PSS carried from
//! its last exact read, and the samples they emit, bounded by the emission window.
//!
//! Owns one tick's reads and what it hands on (the high-water marks a tick reads for a tracker
//! that cannot, the tick's sample, whether memory moved or rose to a new high). When a tick is
//! due is `thread.rs`'s; the carry's arithmetic is `carry.rs`'s.

use super::carried::Carried;
use super::{Cached, GROWING_BYTES, Reader, Sampler};
use crate::bus::event::Event;
use crate::bus::sink::thread_cpu_ns;
use crate::model::{ProcessSample, Sample, SampleKind};

/// Ticks' samples are emitted at most once per window of `max(EMIT_MIN_NS, elapsed /
/// EMIT_SCALE)`, the window's highest: each emitted sample wakes the session thread (~20 µs),
/// which would cost more than the ticks themselves. A chart is ~80 columns wide and the
/// HTML's ~1,000: a run of an hour keeps ~1,000 × (1 + ln(hour / 5 s)) ≈ 7,600 of them.
const EMIT_MIN_NS: u64 = 5_000_000;
const EMIT_SCALE: u64 = 1_000;

impl Sampler {
    /// One tick: read the counters of every live process and carry their PSS. Returns whether
    /// any counter moved, or the set of processes changed, since the last tick, and the sum
    /// when it is a new maximum.
    pub(super) fn tick(&self) -> (bool, Option<u64>) {
        let mut reader = self.reader.lock().expect("reader lock");
        let cpu0 = thread_cpu_ns();
        let (procs, unreadable): (Vec<(i32, Cached)>, u32) = {
            let st = self.state.lock().expect("sampler lock");
            let now = self.sink.now_ns();
            (
                st.live
                    .iter()
                    .filter(|(_, c)| c.readable(now))
                    .map(|(p, c)| (*p, *c))
                    .collect(),
                st.live.values().filter(|c| c.unreadable).count() as u32,
            )
        };
        let t = self.sink.now_ns();
        let Reader {
            procfs,
            carried,
            page,
        } = &mut *reader;
        let page = *page;
        {
            let st = self.state.lock().expect("sampler lock");
            // A process gone keeps its carry while an exit record may still come for it (its
            // `statm` is closed: a fork loop would keep a descriptor per process otherwise).
            carried.retain(|p, c| {
                if st.live.contains_key(p) {
                    true
                } else if st.ended.contains_key(p) {
                    c.statm = None;
                    true
                } else {
                    false
                }
            });
        }
        let mut sample = Sample {
            t_ns: t,
            unreadable,
            kind: SampleKind::Carried,
            bound_bytes: Some(0),
            ..Default::default()
        };
        let mut per_process = Vec::with_capacity(procs.len());
        let mut estimates = Vec::with_capacity(procs.len());
        let mut changed = procs.len() != carried.len();
        let read_peaks = self.read_peaks.load(std::sync::atomic::Ordering::Relaxed);
        let mut peaks = Vec::new();
        for &(pid, cached) in &procs {
            let parent = Carried::parent_of_fork(carried, pid, &cached);
            let c = Carried::of(carried, procfs, pid, cached.image);
            let Some(now) = c.counters() else {
                continue;
            };
            let resident = now.resident;
            let (e, moved) = c.tick(now, cached.exec_seen, parent, page);
            changed |= moved;
            // A tracker that cannot read the high-water mark at exit (netlink) has it read
            // whenever a tick sees the process above the last one reported.
            if read_peaks
                && resident * page > cached.hwm
                && let Ok(Some(hwm)) = procfs.status(pid).map(|s| s.vm_hwm_bytes)
                && hwm > cached.hwm
            {
                peaks.push((pid, hwm));
            }
            sample.pss_bytes += e.pss_bytes;
            sample.rss_bytes += resident * page;
            sample.processes += 1;
            sample.bound_bytes = sample.bound_bytes.map(|b| b + e.bound_bytes);
            estimates.push((pid, e.pss_bytes));
            per_process.push(ProcessSample {
                pid,
                pss_bytes: e.pss_bytes,
                cpu_ns: None,
            });
        }
        drop(reader);
        let cost = thread_cpu_ns().saturating_sub(cpu0);
        sample.per_process = Some(per_process);
        let mut st = self.state.lock().expect("sampler lock");
        for (pid, pss) in estimates {
            if let Some(c) = st.live.get_mut(&pid) {
                c.pss = pss;
            }
        }
        for &(pid, hwm) in &peaks {
            if let Some(c) = st.live.get_mut(&pid) {
                c.hwm = c.hwm.max(hwm);
            }
        }
        self.emit_peaks(t, peaks);
        st.budget.tick_spent(cost);
        st.tick_growing = sample.rss_bytes > st.tick_rss_bytes.saturating_add(GROWING_BYTES);
        st.tick_rss_bytes = sample.rss_bytes;
        st.cpu_ns += cost;
        st.tick_cpu_ns += cost;
        st.ticks += 1;
        st.first_tick_ns.get_or_insert(t);
        st.last_tick_ns = Some(t);
        st.changed_since_round |= changed;
        st.tick_pss_bytes = sample.pss_bytes;
        st.tick_bound_bytes = sample.bound_bytes;
        if sample.processes == 0 {
            return (changed, None);
        }
        let new_high = (sample.pss_bytes > st.max_pss).then_some(sample.pss_bytes);
        st.max_pss = st.max_pss.max(sample.pss_bytes);
        if st
            .pending
            .as_ref()
            .is_none_or(|p| sample.pss_bytes > p.pss_bytes)
        {
            st.pending = Some(sample);
        }
        let window = EMIT_MIN_NS.max(t / EMIT_SCALE);
        if t.saturating_sub(st.last_emit_ns) >= window
            && let Some(p) = st.pending.take()
        {
            st.last_emit_ns = t;
            // A window that repeats the last emitted figures is held back: while memory
            // stands still, each emission woke the session thread for nothing (a process
            // asleep on its memory cost ste ~0.3 % of a core so). The plateau's last point
            // goes out before the next change, so both a sample-and-hold chart and one
            // that joins its points draw it flat.
            if st
                .tick_emitted
                .as_ref()
                .is_some_and(|e| same_figures(e, &p))
            {
                st.plateau_end = Some(p);
            } else {
                let end = st.plateau_end.take();
                st.tick_emitted = Some(p.clone());
                drop(st);
                for p in end.into_iter().chain([p]) {
                    self.sink.emit_at(p.t_ns, Event::Sample { sample: p });
                }
            }
        }
        (changed, new_high)
    }
}

/// Whether two samples read the same figures (all but their time).
fn same_figures(a: &Sample, b: &Sample) -> bool {
    a.pss_bytes == b.pss_bytes
        && a.rss_bytes == b.rss_bytes
        && a.processes == b.processes
        && a.unreadable == b.unreadable
        && a.kind == b.kind
        && a.bound_bytes == b.bound_bytes
        && a.per_process == b.per_process
}
