//! The segment source: maps each image's shared segment, reads it with the sampler's rounds
//! (asking for snapshots as `pacing` allows), and harvests every segment when its process ends,
//! emitting `Malloc*` events.
//!
//! Owns the segment bookkeeping of a run. Must not deploy the shim (`deploy`) or format output.

use super::*;

pub struct MallocSource {
    pub(super) dir: RunDir,
    pub(super) shim: PathBuf,
    pub(super) sink: Sink,
    pub(super) state: Mutex<State>,
}

#[derive(Default)]
pub(super) struct State {
    /// Each live process's newest segment, by pid: (its number, the mapping).
    pub(super) attached: HashMap<i32, (u32, Segment)>,
    /// Processes that ended: their segments are read and removed at the next round.
    pub(super) ended: Vec<i32>,
    pub(super) last_full_ns: u64,
    /// Snapshot pacing of each attached image, by (pid, image number).
    pub(super) pacing: HashMap<(i32, u32), Pacing>,
    /// CPU spent outside the sampler's rounds (exec checks, harvests).
    pub(super) cpu_ns: u64,
    /// Segments found cut short by their process, by (pid, image number): said once.
    pub(super) cut: std::collections::HashSet<(i32, u32)>,
}

impl MallocSource {
    /// Maps the segment `name`, if it is one.
    pub(super) fn segment(&self, name: &str) -> Option<Segment> {
        let file = self.dir.open_segment(name).ok()??;
        Segment::open(file).ok()?
    }

    /// Attaches the newest published segment of `pid` (an exec makes a new one).
    pub(super) fn refresh(&self, st: &mut State, pid: i32) {
        let mut next = st.attached.get(&pid).map_or(0, |(n, _)| n + 1);
        while let Some(seg) = self.segment(&format!("{pid}.{next}")) {
            st.attached.insert(pid, (next, seg));
            next += 1;
        }
    }

    /// Reads every segment of the given pids (all, when `None`), emits their images, removes
    /// the files.
    pub(super) fn harvest(&self, st: &mut State, pids: Option<&[i32]>) {
        let mut found: Vec<(i32, u32, String)> = self
            .dir
            .names()
            .into_iter()
            .filter_map(|name| {
                let (pid, n) = name.split_once('.')?;
                Some((pid.parse().ok()?, n.parse().ok()?, name))
            })
            .filter(|(pid, _, _)| pids.is_none_or(|p| p.contains(pid)))
            .collect();
        found.sort();
        for (pid, n, name) in found {
            let image = self
                .segment(&name)
                .map(|seg| image_of(&seg, pid, n, &self.sink));
            let mapped_cut = st
                .attached
                .get(&pid)
                .is_some_and(|(m, seg)| *m == n && seg.is_cut());
            match image {
                Some(Some(image)) => self.sink.emit(Event::MallocImage {
                    image: Box::new(image),
                }),
                // Cut short since ste mapped it (reopened, it is no segment any more), or
                // while this harvest read it.
                Some(None) => self.said_cut(st, pid, n),
                None if mapped_cut => self.said_cut(st, pid, n),
                None => {}
            }
            self.dir.remove_file(&name);
            if st.attached.get(&pid).is_some_and(|(m, _)| *m == n) {
                st.attached.remove(&pid);
            }
            st.pacing.remove(&(pid, n));
        }
    }

    /// Says once that the segment `n` of `pid` was cut short.
    fn said_cut(&self, st: &mut State, pid: i32, n: u32) {
        if st.cut.insert((pid, n)) {
            self.sink.emit(cut_note(pid, n));
        }
    }

    /// Harvests what is left, reports the cost, and removes the run directory. Call once the
    /// sampler has stopped.
    pub fn finish(&self) {
        let mut st = self.state.lock().expect("malloc lock");
        let cpu0 = thread_cpu_ns();
        self.harvest(&mut st, None);
        st.attached.clear();
        st.cpu_ns += thread_cpu_ns().saturating_sub(cpu0);
        self.sink.emit(Event::MallocDone { cpu_ns: st.cpu_ns });
        self.dir.remove();
    }
}

impl RoundObserver for MallocSource {
    fn process(&self, t_ns: u64, pid: i32, rollup: &Rollup) {
        let mut st = self.state.lock().expect("malloc lock");
        self.refresh(&mut st, pid);
        let full = t_ns.saturating_sub(st.last_full_ns) >= FULL_EVERY_NS;
        let State {
            attached, pacing, ..
        } = &mut *st;
        let Some((n, seg)) = attached.get(&pid) else {
            return;
        };
        let (Some(counts), Some(header)) = (seg.counts(), seg.header()) else {
            let n = *n;
            self.said_cut(&mut st, pid, n);
            return;
        };
        let snap = seg.snapshot(false).filter(|s| s.taken());
        let glibc = header.allocator == 1;
        let sample = MallocSample {
            t_ns,
            pid,
            image: *n,
            held_bytes: glibc.then(|| counts.held_bytes(header.inherited_bytes)),
            free_bytes: snap.as_ref().filter(|_| glibc).map(|s| s.fordblks),
            resident_anon_bytes: rollup.anon_bytes,
            calls: counts.calls(),
        };
        let clock = self.sink.clock();
        let frees = counts.free_calls + counts.realloc_calls;
        let now = PaceInput {
            t_ns,
            answer: snap.as_ref().map(|s| {
                let taken = clock.from_monotonic(s.t_ns);
                (s.answered, taken, s.cost_ns, s.ordblks + s.smblks)
            }),
            frees,
            held_bytes: counts.held_bytes(header.inherited_bytes),
            spent_ns: header.snapshots_cost_ns,
            start_ns: clock.from_monotonic(header.created_ns),
        };
        let pace = pacing.entry((pid, *n)).or_default();
        let mut requested = false;
        if pace.may_request(&now)
            && let Some(r) = seg.request(full)
        {
            pace.made(r, frees);
            requested = true;
        }
        if requested && full {
            st.last_full_ns = t_ns;
        }
        drop(st);
        self.sink.emit_at(t_ns, Event::MallocSample { sample });
    }

    fn round_done(&self, _round: &RoundInfo<'_>) {
        let mut st = self.state.lock().expect("malloc lock");
        if st.ended.is_empty() {
            return;
        }
        let cpu0 = thread_cpu_ns();
        let pids = std::mem::take(&mut st.ended);
        self.harvest(&mut st, Some(&pids));
        st.cpu_ns += thread_cpu_ns().saturating_sub(cpu0);
    }

    fn exec(&self, pid: i32) {
        let cpu0 = thread_cpu_ns();
        let check = check_exec(
            Path::new("/proc"),
            pid,
            &self.shim,
            self.dir.reach(),
            self.sink.now_ns(),
        );
        self.sink.emit(Event::MallocExec { check });
        let mut st = self.state.lock().expect("malloc lock");
        st.cpu_ns += thread_cpu_ns().saturating_sub(cpu0);
    }

    fn ended(&self, pid: i32) {
        self.state.lock().expect("malloc lock").ended.push(pid);
    }
}

/// What the report says of a segment the command cut short (`ftruncate`) while ste read it.
fn cut_note(pid: i32, n: u32) -> Event {
    Event::Note {
        text: format!(
            "--malloc: the segment of process {pid} (image {n}) was cut short while ste read it (the process truncated its file): that image's malloc figures are lost"
        ),
    }
}

/// The image a segment describes; `None` when the file was cut short under ste.
pub(super) fn image_of(seg: &Segment, pid: i32, n: u32, sink: &Sink) -> Option<MallocImage> {
    let clock = sink.clock();
    let (Some(h), Some(c)) = (seg.header(), seg.counts()) else {
        return None;
    };
    let kind = match h.allocator {
        1 => AllocatorKind::Glibc,
        2 => AllocatorKind::Library,
        3 => AllocatorKind::Program,
        _ => AllocatorKind::Unknown,
    };
    let last = seg
        .snapshot(true)
        .filter(|s| s.taken() && kind == AllocatorKind::Glibc)
        .map(|s| {
            let parsed = s.info.as_deref().map(info::parse);
            // A program that ran one thread has one arena, which mallinfo2 describes
            // entirely (the shim skips malloc_info at exit then).
            let arenas = parsed.map(|p| p.arenas).or_else(|| {
                (s.at_exit && h.threads <= 1 && h.origin == 1).then(|| {
                    vec![Arena {
                        index: 0,
                        system_bytes: s.arena,
                        max_system_bytes: s.arena,
                        free_bytes: s.fordblks,
                        free_chunks: s.ordblks,
                        heaps: None,
                        address_space_bytes: s.arena,
                    }]
                })
            });
            MallocState {
                t_ns: clock.from_monotonic(s.t_ns),
                at_exit: s.at_exit,
                in_use_bytes: s.uordblks + s.hblkhd,
                free_bytes: s.fordblks,
                arena_bytes: s.arena,
                mmapped_blocks: s.hblks,
                mmapped_bytes: s.hblkhd,
                top_free_bytes: s.keepcost,
                arenas,
                info_truncated: s.info_truncated,
                cost_ns: s.cost_ns,
            }
        });
    if seg.is_cut() {
        return None;
    }
    let held_peak =
        (kind == AllocatorKind::Glibc).then(|| held_peak(&h, &c, |t| clock.from_monotonic(t)));
    Some(MallocImage {
        pid,
        image: n,
        t_ns: clock.from_monotonic(h.created_ns),
        origin: if h.origin == 2 {
            ImageOrigin::Fork
        } else {
            ImageOrigin::Exec
        },
        program: h.exe,
        allocator: Allocator {
            kind,
            path: h.allocator_path,
        },
        calls: MallocCalls {
            malloc: c.malloc_calls,
            calloc: c.calloc_calls,
            realloc: c.realloc_calls,
            memalign: c.memalign_calls,
            free: c.free_calls,
            free_null: c.free_null_calls,
            failed: c.failed_calls,
        },
        bytes: MallocBytes {
            malloc: c.malloc_bytes,
            calloc: c.calloc_bytes,
            realloc: c.realloc_bytes,
            memalign: c.memalign_bytes,
            freed: c.free_bytes,
        },
        held_at_end_bytes: (kind == AllocatorKind::Glibc).then(|| c.held_bytes(h.inherited_bytes)),
        held_peak,
        mmapped_calls: c.mmapped_calls,
        mmapped_bytes: c.mmapped_bytes,
        threads: h.threads,
        overflow_threads: h.overflow_threads,
        thresholds: Thresholds {
            mmap_bytes: h.mmap_threshold,
            trim_bytes: h.trim_threshold,
            dynamic: h.thresholds_dynamic,
            changes: h.threshold_changes,
        },
        exited: h.exited,
        last,
        snapshots: h.snapshots,
        snapshots_cost_ns: h.snapshots_cost_ns,
        exit_snapshot_skipped: h.exit_snapshot_skipped,
        peak_held_bytes: None,
        peak_held_t_ns: None,
        largest_gap: None,
    })
}

/// The image's held peak from the shim's marks (shim/ste_malloc.c, "the held peak").
///
/// One thread made every call: the inherited bytes plus its running maximum, exact. Several:
/// with n threads holding counters at most at once, each keeping up to T (`flush_bytes`) of
/// change out of the shared account, the shared account is within n·T of the truth between
/// calls. So the peak is at most its high-water mark M plus n·T, and at least M − (n−1)·T (when
/// the mark was raised, the flushing thread had nothing unflushed). Two more bounds hold
/// whatever the pattern: the peak is at most the sum of the threads' own peaks, and at least
/// what is held at the end. `to_run` turns the shim's CLOCK_MONOTONIC into run time.
pub(super) fn held_peak(
    h: &segment::Header,
    c: &segment::Counts,
    to_run: impl Fn(u64) -> u64,
) -> HeldPeak {
    let inherited = h.inherited_bytes as i128;
    let at_end = c.held_bytes(h.inherited_bytes);
    let dated = |t: u64| (t != 0).then(|| to_run(t));
    if h.threads <= 1 && h.overflow_threads == 0 {
        let peak = (inherited + c.peak_net_sum as i128).max(at_end as i128) as u64;
        // Never above what it started with (a forked child's inheritance): the peak was then.
        let (after, by) = if c.peak_net_sum == 0 {
            (h.created_ns, h.created_ns)
        } else {
            (h.peak_after_ns, h.peak_by_ns)
        };
        return HeldPeak {
            low_bytes: peak,
            high_bytes: peak,
            exact: true,
            after_ns: dated(after),
            by_ns: dated(by),
            threads_at_once: h.threads,
            flush_bytes: h.flush_bytes,
        };
    }
    let n = (h.slots_high + u64::from(h.overflow_threads > 0)).max(1) as i128;
    let t = h.flush_bytes as i128;
    let mark = inherited + h.held_peak_flushed as i128;
    let clamp = |v: i128| v.clamp(0, u64::MAX as i128) as u64;
    let low = clamp((mark - (n - 1) * t).max(inherited)).max(at_end);
    let high = clamp((mark + n * t).min(inherited + c.peak_net_sum as i128)).max(low);
    HeldPeak {
        low_bytes: low,
        high_bytes: high,
        exact: false,
        after_ns: dated(h.held_peak_t_ns),
        by_ns: dated(h.held_peak_t_ns),
        threads_at_once: n as u64,
        flush_bytes: h.flush_bytes,
    }
}
