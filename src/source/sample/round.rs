//! A round: every live process read exactly (`smaps_rollup`), the sum emitted as a sample, and
//! each read made the anchor its ticks carry from. `begin_round` takes the list and reads a
//! process stopped in its exit first (so the tracker can let it go), `end_round` reads the
//! rest, emits, and tells the round's observers.
//!
//! Part of the sampler (`sample/mod.rs`), on its state: must not decide when a round is due
//! (the sampling thread and `budget` do) nor tick.

use super::carried::Carried;
use super::carry::{self, Anchor, Counters, Estimate};
use super::{Reader, RoundInfo, RoundObserver, Sampler};
use crate::bus::event::Event;
use crate::bus::sink::thread_cpu_ns;
use crate::model::{ProcessSample, Sample, SampleKind};
use std::sync::Arc;

impl Sampler {
    /// One round of the sampling thread: read every live process (or with `only_asked`, the
    /// new images), emit the sum. `payers`: the observers that asked for it and pay for it.
    pub(super) fn round(&self, only_asked: bool, payers: Vec<Arc<dyn RoundObserver>>) {
        let mut r = self.begin_round(None, only_asked);
        r.payers = payers;
        self.end_round(r);
    }

    /// Starts a round: takes the list of processes to read, and reads `exit_stop` (the process
    /// stopped in its exit that asked for the round) first. With `only_asked`, it reads only
    /// the new images that asked for it and carries the others from their last tick (see
    /// [`Sampler::run`]).
    pub(super) fn begin_round(&self, exit_stop: Option<i32>, only_asked: bool) -> Round<'_> {
        let observers = self.observers();
        let reader = self.reader.lock().expect("reader lock");
        let (pids, known_unreadable, carried_others) = {
            let mut st = self.state.lock().expect("sampler lock");
            let now = self.sink.now_ns();
            // The process stopped in its exit is read whatever its age: its loader is done.
            let mut pids: Vec<(i32, u32)> = st
                .live
                .iter()
                .filter(|(p, c)| c.readable(now) || (Some(**p) == exit_stop && c.counted()))
                .map(|(p, c)| (*p, c.image))
                .collect();
            // The others, carried: those a tick has carried at their current image.
            let mut carried_others = Vec::new();
            if only_asked {
                pids.retain(|&(p, image)| {
                    let asked = st.live.get(&p).is_some_and(|c| c.round_asked);
                    match reader.carried.get(&p) {
                        Some(c) if !asked && c.image == image && c.last.is_some() => {
                            carried_others.push((
                                p,
                                c.estimate,
                                c.last_resident_bytes(reader.page),
                            ));
                            false
                        }
                        _ => true,
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
                carried_others,
            )
        };
        let t = self.sink.now_ns();
        let cpu0 = thread_cpu_ns();
        let mut r = Round {
            carried_others,
            read_rss_bytes: 0,
            reader,
            observers,
            payers: Vec::new(),
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
            moved: false,
            bound_bytes: 0,
        };
        if let Some(p) = exit_stop
            && let Some(i) = r.pids.iter().position(|&(q, _)| q == p)
        {
            let (p, image) = r.pids.remove(i);
            r.read_one(p, image);
        }
        r.cost_ns = thread_cpu_ns().saturating_sub(cpu0);
        r
    }

    /// Reads the rest of the round's processes and emits the sum.
    pub(super) fn end_round(&self, mut r: Round<'_>) {
        let cpu0 = thread_cpu_ns();
        for (pid, image) in std::mem::take(&mut r.pids) {
            r.read_one(pid, image);
        }
        let Round {
            reader,
            observers,
            t,
            exit_stop,
            mut sample,
            refused,
            payers,
            mut read,
            mut per_process,
            moved,
            mut bound_bytes,
            carried_others,
            read_rss_bytes,
            ..
        } = r;
        // A round an exec asked for read its new image; the rest of the tree is carried.
        let full = carried_others.is_empty();
        for &(pid, e, resident) in &carried_others {
            sample.pss_bytes += e.pss_bytes;
            sample.rss_bytes += resident;
            sample.processes += 1;
            bound_bytes += e.bound_bytes;
            per_process.push(ProcessSample {
                pid,
                pss_bytes: e.pss_bytes,
                cpu_ns: None,
            });
        }
        if moved || !full {
            sample.kind = SampleKind::Carried;
            sample.bound_bytes = Some(bound_bytes);
        }
        drop(reader);
        // In pid order, as the live set lists them (the exit stop's process was read first).
        read.sort_unstable_by_key(|&(pid, _, _)| pid);
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
            for &(pid, pss, hwm) in &read {
                if let Some(c) = st.live.get_mut(&pid) {
                    c.pss = pss;
                    if hwm > c.hwm {
                        c.hwm = hwm;
                        peaks.push((pid, hwm));
                    }
                }
            }
            // A round an observer paid for is its cost, not the sampler's.
            if payers.is_empty() {
                st.budget.round_spent(cost, read_rss_bytes);
                st.cpu_ns += cost;
            } else {
                st.paid_rounds += 1;
            }
            st.max_round_cpu_ns = st.max_round_cpu_ns.max(cost);
            // Only a round of every process anchors the tree afresh.
            if full {
                st.changed_since_round = false;
                st.last_full_round_ns = Some(t);
            }
            st.tick_rss_bytes = sample.rss_bytes;
            st.rounds += 1;
            if let Some(last) = st.last_round_ns {
                st.max_gap_ns = st.max_gap_ns.max(t.saturating_sub(last));
            }
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
            // The window's highest tick goes out before this round, so samples leave in order.
            pending = st.take_held().collect::<Vec<_>>();
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
        for o in &payers {
            o.round_paid(cost);
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
    /// The observers that asked for this round and pay for it (none: the sampler pays).
    payers: Vec<Arc<dyn RoundObserver>>,
    t: u64,
    /// CPU spent in the round before [`Sampler::end_round`].
    cost_ns: u64,
    exit_stop: Option<i32>,
    /// Processes still to read, with their image count.
    pids: Vec<(i32, u32)>,
    sample: Sample,
    refused: Vec<i32>,
    read_peaks: bool,
    /// (pid, PSS, VmHWM or 0) of each process read.
    read: Vec<(i32, u64, u64)>,
    per_process: Vec<ProcessSample>,
    /// A process's memory moved while it was read: the round's sum is carried, not exact.
    moved: bool,
    bound_bytes: u64,
    /// The processes a round asked for by new images did not read: (pid, its last tick's
    /// estimate, its resident bytes then).
    carried_others: Vec<(i32, Estimate, u64)>,
    /// Resident bytes of the processes read (what the round's cost grew with).
    read_rss_bytes: u64,
}

impl Round<'_> {
    fn read_one(&mut self, pid: i32, image: u32) {
        let Reader {
            procfs,
            carried,
            page,
        } = &mut *self.reader;
        let c = Carried::of(carried, procfs, pid, image);
        let before = c.counters();
        match procfs.smaps_rollup(pid) {
            Ok(Some(r)) => {
                // The anchor of the carry: the exact read with the counters around it. When
                // they moved during the walk (a process faulting in memory as it is read),
                // the read is a smear: the process is carried from its last anchor instead,
                // or, with none, anchored on the counters before the walk with the pages
                // gained meanwhile as its bound.
                let after = c.counters();
                let (figure, exact) = match (before, after) {
                    (Some(b), Some(a)) if a == b => {
                        c.anchor = Some(Anchor {
                            pss_bytes: r.pss_bytes,
                            pss_anon_bytes: r.pss_anon_bytes,
                            counters: a,
                            bound_bytes: 0,
                        });
                        let e = Estimate {
                            pss_bytes: r.pss_bytes,
                            bound_bytes: 0,
                        };
                        (e, true)
                    }
                    (Some(b), Some(a)) => {
                        let anchor = *c.anchor.get_or_insert_with(|| {
                            if image > 0 {
                                // A new image's memory is all its own: carried from nothing,
                                // as a tick would, rather than from a smeared read.
                                Anchor::default()
                            } else {
                                // A forked child (its memory is shared with its parent): the
                                // read, with the counters midway, off by at most half of
                                // what they moved.
                                let mid = |x: u64, y: u64| x.min(y) + x.abs_diff(y) / 2;
                                Anchor {
                                    pss_bytes: r.pss_bytes,
                                    pss_anon_bytes: r.pss_anon_bytes,
                                    counters: Counters {
                                        resident: mid(a.resident, b.resident),
                                        shared: mid(a.shared, b.shared),
                                    },
                                    bound_bytes: a.resident.abs_diff(b.resident) * *page / 2,
                                }
                            }
                        });
                        c.last = Some(a);
                        (carry::carry(&anchor, a, *page), false)
                    }
                    // No counters (statm refused or gone): the read alone.
                    _ => {
                        let e = Estimate {
                            pss_bytes: r.pss_bytes,
                            bound_bytes: 0,
                        };
                        (e, true)
                    }
                };
                self.sample.pss_bytes += figure.pss_bytes;
                self.sample.rss_bytes += r.rss_bytes;
                self.read_rss_bytes += r.rss_bytes;
                self.sample.processes += 1;
                self.moved |= !exact;
                self.bound_bytes += figure.bound_bytes;
                c.saw(
                    r.rss_bytes.max(after.map_or(0, |a| a.resident * *page)),
                    figure,
                );
                // For reports that stack memory and CPU by process; `stat` costs ~10 µs
                // against the rollup's 60 µs and more, and the round's measured cost
                // includes it, so the budget still holds.
                self.per_process.push(ProcessSample {
                    pid,
                    pss_bytes: figure.pss_bytes,
                    cpu_ns: procfs.cpu_ns(pid).ok().flatten(),
                });
                let hwm = if self.read_peaks {
                    procfs
                        .status(pid)
                        .ok()
                        .and_then(|s| s.vm_hwm_bytes)
                        .unwrap_or(0)
                } else {
                    0
                };
                self.read.push((pid, figure.pss_bytes, hwm));
                for o in &self.observers {
                    o.process(self.t, pid, &r);
                }
            }
            // No mm (a zombie) or gone since the list was taken: nothing to count.
            Ok(None) => {}
            Err(e)
                if matches!(
                    crate::kernel::proc::os_error(&e),
                    Some(libc::ENOENT | libc::ESRCH)
                ) => {}
            Err(_) => {
                self.sample.unreadable += 1;
                self.refused.push(pid);
            }
        }
    }
}
