//! `--malloc`: the malloc source. Puts ste's shim (`shim/ste_malloc.c`, built by build.rs and
//! embedded) in the command's environment (`LD_PRELOAD`, kept by every exec that keeps the
//! environment), reads each image's shared segment with the memory samples (asking the shim
//! for a mallinfo2 snapshot each round and a malloc_info one every second), looks at each exec
//! to explain a program the shim cannot reach, and harvests every segment when its process
//! ends.
//!
//! Owns the segment bookkeeping; the run directory that holds the shim and the segments, and
//! every file operation in it, are `rundir`'s. Emits `Malloc*` events; never formats. glibc's SDT probes (`memory_*`) are `sdt`'s: found
//! there, attached and counted by the ebpf tracker.

pub mod info;
pub mod rundir;
pub mod sdt;
pub mod segment;

use crate::bus::event::Event;
use crate::bus::sink::{Sink, thread_cpu_ns};
use crate::kernel::proc::Rollup;
use crate::kernel::{auxv, elf};
use crate::launch::EnvOverrides;
use crate::model::Source;
use crate::model::malloc::{
    Allocator, AllocatorKind, Arena, ExecCheck, HeldPeak, ImageOrigin, MallocBytes, MallocCalls,
    MallocImage, MallocSample, MallocState, Thresholds,
};
use crate::source::sample::{RoundInfo, RoundObserver, Sampler};
use anyhow::{Result, bail};
use rundir::{Ids, Reach, RunDir};
use segment::Segment;
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The shim, as build.rs built it (empty when no C compiler was found).
static SHIM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/ste_malloc.so"));
/// Why it is empty, or `ok`.
const SHIM_STATUS: &str = env!("STE_MALLOC_SHIM_STATUS");

/// How often the shim is asked for a malloc_info() (far dearer in the program's time than
/// mallinfo2: docs/kernel-notes.md).
const FULL_EVERY_NS: u64 = 1_000_000_000;

/// The share of a program's time its snapshots may take. A snapshot runs in the program's own
/// thread, and mallinfo2() walks every free chunk of every arena: a few µs on a small heap, but
/// tens of milliseconds on a fragmented one (perl emptying a hash of a million strings:
/// bench/README.md). See [`Pacing`].
const SNAPSHOT_BUDGET: f64 = 0.01;
/// What mallinfo2 is assumed to spend per free chunk until a snapshot of a heap with at least
/// [`CHUNKS_TO_MEASURE`] free chunks measures it: a heap that fits the cache (up to
/// [`CACHED_HEAP_BYTES`] held) is walked at tens of ns a chunk; a larger one misses it at every
/// chunk (perl's fragmented heap: bench/README.md). The shim assumes the same
/// (shim/ste_malloc.c).
const PER_CHUNK_CACHED_NS: f64 = 20.0;
const PER_CHUNK_NS: f64 = 400.0;
const CACHED_HEAP_BYTES: u64 = 32 << 20;
const CHUNKS_TO_MEASURE: u64 = 10_000;
/// What an image's snapshots may take whatever its age, so a young program gets its first
/// ones (a few µs each on a small heap); the shim allows its exit snapshot the same.
const SNAPSHOT_ALLOWANCE_NS: f64 = 1e6;

/// The name of the shim in the run directory.
const SHIM_NAME: &str = "ste_malloc.so";

/// The run directory, with the shim written out. Create it before the command is prepared.
pub struct Setup {
    dir: RunDir,
    shim: PathBuf,
}

impl Setup {
    /// `command_uid`: the user the command runs as, when not ste's (under sudo), who must be
    /// able to create segments in the directory.
    pub fn new(command_uid: Option<u32>) -> Result<Setup> {
        if SHIM.is_empty() {
            bail!(
                "--malloc is unavailable: this ste was built without its malloc shim ({SHIM_STATUS}); install a C compiler (gcc) and rebuild ste"
            );
        }
        let bases = ["/dev/shm".into(), std::env::temp_dir()];
        let dir = RunDir::create(&bases, command_uid, &[(SHIM_NAME, SHIM, 0o644)])?;
        let shim = dir.path().join(SHIM_NAME);
        Ok(Setup { dir, shim })
    }

    /// The environment the command starts with: the shim first in `LD_PRELOAD` (before any
    /// preload of the user's, so it sees their allocator as the one it forwards to).
    pub fn env(&self) -> EnvOverrides {
        let mut preload = OsString::from(self.shim.as_os_str());
        if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
            preload.push(":");
            preload.push(old);
        }
        vec![
            ("LD_PRELOAD".into(), preload),
            ("STE_MALLOC_DIR".into(), self.dir.path().into()),
        ]
    }
}

/// Starts the malloc source for a run: declares it and registers it with the sampler.
/// `probes`: what [`sdt::Plan::text_before`] says of the SDT probes.
pub fn attach(
    setup: Option<Setup>,
    probes: String,
    sampler: &Sampler,
    sink: &Sink,
) -> Option<Arc<MallocSource>> {
    let setup = setup?;
    sink.emit(Event::MallocStart {
        shim: setup.shim.display().to_string(),
        probes,
    });
    for (figure, source) in [
        (
            "malloc_calls",
            Source::exact(
                "ste's LD_PRELOAD shim: every call of the malloc families, counted per thread in a segment shared with ste",
            ),
        ),
        (
            "malloc_held_bytes",
            Source::sampled(
                "mallinfo2() (uordblks + hblkhd), taken by the shim on the program's first malloc after each sampling round, and at exit",
                "as of the program's last malloc before the round; exact at exit",
            ),
        ),
        (
            "malloc_held_peak",
            Source::exact(
                "ste's LD_PRELOAD shim: each thread's running maximum of chunk bytes handed out minus given back, kept at every call, and a count shared by the threads every 64 KiB of change; exact when one thread made every call, else bounded by the threads' unshared change",
            ),
        ),
        (
            "malloc_arenas",
            Source::sampled(
                "malloc_info(), taken by the shim at most once a second and at exit",
                "the last one taken",
            ),
        ),
        (
            "malloc_thresholds",
            Source::sampled(
                "the shim's model of glibc's rules: mallopt, MALLOC_*_ and GLIBC_TUNABLES, and the dynamic threshold raised by free() of a larger mmapped block",
                "modelled, not read from glibc (which has no API for it)",
            ),
        ),
    ] {
        sink.emit(Event::Source {
            figure: figure.into(),
            source,
        });
    }
    let src = Arc::new(MallocSource {
        dir: setup.dir,
        shim: setup.shim,
        sink: sink.clone(),
        state: Mutex::new(State::default()),
    });
    sampler.observe(src.clone());
    Some(src)
}

pub struct MallocSource {
    dir: RunDir,
    shim: PathBuf,
    sink: Sink,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Each live process's newest segment, by pid: (its number, the mapping).
    attached: HashMap<i32, (u32, Segment)>,
    /// Processes that ended: their segments are read and removed at the next round.
    ended: Vec<i32>,
    last_full_ns: u64,
    /// Snapshot pacing of each attached image, by (pid, image number).
    pacing: HashMap<(i32, u32), Pacing>,
    /// CPU spent outside the sampler's rounds (exec checks, harvests).
    cpu_ns: u64,
}

/// When an image may be asked for its next snapshot.
///
/// Two rules, both on measured costs. After a snapshot, the next waits until that one's cost
/// is within [`SNAPSHOT_BUDGET`] of the time since. And a request is made only when what the
/// image's snapshots cost so far plus what the next one is predicted to cost stays within
/// the budget of the image's age (plus [`SNAPSHOT_ALLOWANCE_NS`]). The prediction: mallinfo2's
/// walk costs about the same per free chunk on a given heap, and each free or realloc since
/// the last request can have added at most one, so the next costs at most the last one plus
/// the walk of that many chunks more. It errs on the dear side for a program that frees and
/// allocates alike (its free lists stay short): such a program gets fewer snapshots, never a
/// dearer one. The first rule alone let costs run away on a heap that
/// fragments as it goes: perl emptying a hash spent many times the budget on snapshots, each
/// far dearer than the one before it (bench/README.md).
#[derive(Default)]
struct Pacing {
    /// The last request whose answer was accounted.
    answered: u64,
    /// The last request made. No other is made until it is answered: a request made while
    /// the program is in a long snapshot would make it take another one right after.
    requested: u64,
    /// Run time before which no new request is made.
    not_before_ns: u64,
    /// The last answer's cost, and the dearest cost per free chunk measured (0: none yet).
    last_cost_ns: u64,
    per_chunk_ns: f64,
    /// Frees and reallocs counted when the last request was made.
    frees_at_request: u64,
}

/// What [`Pacing`] reads of an image at a sampling round.
struct PaceInput {
    t_ns: u64,
    /// The newest snapshot: (request answered, when taken, cost, free chunks walked).
    answer: Option<(u64, u64, u64, u64)>,
    /// Frees and reallocs so far, and the chunk bytes held.
    frees: u64,
    held_bytes: u64,
    /// What its snapshots cost so far, and when the image started (run time).
    spent_ns: u64,
    start_ns: u64,
}

impl Pacing {
    /// Accounts the answer, if new, and says whether a request may be made now.
    fn may_request(&mut self, now: &PaceInput) -> bool {
        if let Some((answered, taken_ns, cost_ns, chunks)) = now.answer
            && answered != self.answered
        {
            self.answered = answered;
            self.not_before_ns = taken_ns + (cost_ns as f64 / SNAPSHOT_BUDGET) as u64;
            self.last_cost_ns = cost_ns;
            if chunks >= CHUNKS_TO_MEASURE {
                self.per_chunk_ns = self.per_chunk_ns.max(cost_ns as f64 / chunks as f64);
            }
        }
        let per_chunk = if self.per_chunk_ns > 0.0 {
            self.per_chunk_ns
        } else if now.held_bytes <= CACHED_HEAP_BYTES {
            PER_CHUNK_CACHED_NS
        } else {
            PER_CHUNK_NS
        };
        let added = now.frees.saturating_sub(self.frees_at_request);
        let predicted = self.last_cost_ns as f64 + per_chunk * added as f64;
        let allowed =
            SNAPSHOT_BUDGET * now.t_ns.saturating_sub(now.start_ns) as f64 + SNAPSHOT_ALLOWANCE_NS;
        self.answered >= self.requested
            && now.t_ns >= self.not_before_ns
            && now.spent_ns as f64 + predicted <= allowed
    }

    /// Records a request made with `frees` frees and reallocs counted.
    fn made(&mut self, request: u64, frees: u64) {
        self.requested = request;
        self.frees_at_request = frees;
    }
}

impl MallocSource {
    /// Maps the segment `name`, if it is one.
    fn segment(&self, name: &str) -> Option<Segment> {
        let file = self.dir.open_segment(name).ok()??;
        Segment::open(file).ok()?
    }

    /// Attaches the newest published segment of `pid` (an exec makes a new one).
    fn refresh(&self, st: &mut State, pid: i32) {
        let mut next = st.attached.get(&pid).map_or(0, |(n, _)| n + 1);
        while let Some(seg) = self.segment(&format!("{pid}.{next}")) {
            st.attached.insert(pid, (next, seg));
            next += 1;
        }
    }

    /// Reads every segment of the given pids (all, when `None`), emits their images, removes
    /// the files.
    fn harvest(&self, st: &mut State, pids: Option<&[i32]>) {
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
            if let Some(seg) = self.segment(&name) {
                let image = image_of(&seg, pid, n, &self.sink);
                self.sink.emit(Event::MallocImage {
                    image: Box::new(image),
                });
            }
            self.dir.remove_file(&name);
            if st.attached.get(&pid).is_some_and(|(m, _)| *m == n) {
                st.attached.remove(&pid);
            }
            st.pacing.remove(&(pid, n));
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
        let counts = seg.counts();
        let snap = seg.snapshot(false).filter(|s| s.taken());
        let header = seg.header();
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
        let requested = pace.may_request(&now);
        if requested {
            pace.made(seg.request(full), frees);
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

/// What a program's exec tells about the shim's chances in it (`reach`: who can open the shim).
pub fn check_exec(root: &Path, pid: i32, shim: &Path, reach: Reach, t_ns: u64) -> ExecCheck {
    let proc_dir = root.join(pid.to_string());
    let ids = std::fs::read_to_string(proc_dir.join("status"))
        .ok()
        .and_then(|s| Ids::parse(&s));
    let program = std::fs::read_link(proc_dir.join("exe"))
        .ok()
        .map(|p| p.display().to_string());
    let summary = elf::summarize_file(&proc_dir.join("exe")).ok();
    let static_binary = summary.map(|s| s.is_some_and(|s| !s.interp));
    let foreign = summary
        .flatten()
        .map(|s| !s.class64 || s.machine != elf::own_machine());
    let secure = auxv::read(root, pid, "auxv")
        .ok()
        .and_then(|a| auxv::parse_secure(&a))
        .or_else(|| {
            // A setuid program's auxv is not readable by its invoker; its status is, and
            // differing real and effective ids are what makes ld.so secure.
            ids.as_ref().is_some_and(Ids::changed).then_some(true)
        });
    let preload_in_env = auxv::read(root, pid, "environ").ok().map(|env| {
        auxv::env_value(&env, "LD_PRELOAD").is_some_and(|v| {
            v.split(|&b| b == b':' || b == b' ')
                .any(|p| p == shim.as_os_str().as_encoded_bytes())
        })
    });
    let program = program.or_else(|| {
        let cmdline = std::fs::read(proc_dir.join("cmdline")).ok()?;
        let argv0 = cmdline.split(|&b| b == 0).next()?;
        (!argv0.is_empty()).then(|| String::from_utf8_lossy(argv0).into_owned())
    });
    ExecCheck {
        pid,
        t_ns,
        program,
        static_binary,
        foreign,
        secure,
        preload_in_env,
        shim_reachable: ids.map(|i| reach.admits(&i)),
    }
}

/// The image a segment describes.
fn image_of(seg: &Segment, pid: i32, n: u32, sink: &Sink) -> MallocImage {
    let clock = sink.clock();
    let h = seg.header();
    let c = seg.counts();
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
    let held_peak =
        (kind == AllocatorKind::Glibc).then(|| held_peak(&h, &c, |t| clock.from_monotonic(t)));
    MallocImage {
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
    }
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
fn held_peak(h: &segment::Header, c: &segment::Counts, to_run: impl Fn(u64) -> u64) -> HeldPeak {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn input(
        t_ms: u64,
        answer: Option<(u64, u64, u64, u64)>,
        frees: u64,
        spent_ms: u64,
    ) -> PaceInput {
        PaceInput {
            t_ns: t_ms * 1_000_000,
            answer: answer.map(|(n, taken_ms, cost_us, chunks)| {
                (n, taken_ms * 1_000_000, cost_us * 1_000, chunks)
            }),
            frees,
            held_bytes: 1 << 30,
            spent_ns: spent_ms * 1_000_000,
            start_ns: 0,
        }
    }

    #[test]
    fn snapshots_are_paced_by_their_cost_and_never_overlap() {
        let mut p = Pacing::default();
        assert!(p.may_request(&input(0, None, 0, 0)));
        p.made(1, 0);
        // Not answered yet (the program is still taking it, or idle): no second request.
        assert!(!p.may_request(&input(1000, None, 0, 0)));
        // Answered at 10 ms for 5 ms of the program's CPU (walking 1,000 chunks): the next
        // waits 500 ms after it, and until the image is old enough for 5 ms + the next one.
        let a = Some((1, 10, 5_000, 1_000));
        assert!(!p.may_request(&input(20, a, 0, 5)));
        assert!(!p.may_request(&input(509, a, 0, 5)));
        assert!(
            !p.may_request(&input(510, a, 0, 5)),
            "5 + 5 ms over 1 % of 510 ms + 1 ms"
        );
        assert!(
            p.may_request(&input(900, a, 0, 5)),
            "5 + 5 ms within 1 % of 900 ms + 1 ms"
        );
        // A cheap one (5 µs, 10 chunks: the heap was emptied) is asked for again half a
        // millisecond later.
        p.made(2, 0);
        let b = Some((2, 1000, 5, 10));
        assert!(p.may_request(&input(1001, b, 0, 5)));
    }

    #[test]
    fn a_heap_that_fragments_is_not_walked_beyond_the_budget() {
        let mut p = Pacing::default();
        assert!(p.may_request(&input(0, None, 0, 0)));
        p.made(1, 0);
        // 20,000 chunks walked in 10 ms: 500 ns a chunk, measured.
        let a = Some((1, 1_000, 10_000, 20_000));
        assert!(
            p.may_request(&input(2_000, a, 0, 10)),
            "no frees since: 10 + 10 ms ≤ 21 ms"
        );
        p.made(2, 1_000);
        // Then 200,000 frees: the next may walk 200,000 chunks more, 10 + 100 ms.
        let b = Some((2, 2_000, 10_000, 20_000));
        assert!(
            !p.may_request(&input(10_000, b, 201_000, 20)),
            "20 + 110 ms > 101 ms"
        );
        assert!(
            p.may_request(&input(12_900, b, 201_000, 20)),
            "20 + 110 ms ≤ 130 ms"
        );
        // Small heaps measure nothing (fixed costs dominate): the assumed 400 ns a chunk on a
        // heap of 1 GiB held, 20 ns on one of 32 MiB or less.
        let mut q = Pacing::default();
        q.made(1, 0);
        let c = Some((1, 10, 50, 100));
        assert!(
            !q.may_request(&input(3_000, c, 100_000, 0)),
            "0.05 + 40 ms > 31 ms"
        );
        assert!(
            q.may_request(&input(4_000, c, 100_000, 0)),
            "0.05 + 40 ms ≤ 41 ms"
        );
        let mut small = input(200, c, 100_000, 0);
        small.held_bytes = 32 << 20;
        assert!(q.may_request(&small), "0.05 + 2 ms ≤ 2 ms + 1 ms");
    }

    fn marks(threads: u64, slots_high: u64, mark: i64, sum: u64, at_end: u64) -> HeldPeak {
        let h = segment::Header {
            threads,
            slots_high,
            held_peak_flushed: mark,
            held_peak_t_ns: 7,
            flush_bytes: 100,
            peak_after_ns: 3,
            peak_by_ns: 5,
            ..Default::default()
        };
        let c = segment::Counts {
            allocated_chunk_bytes: at_end + 1_000,
            free_bytes: 1_000,
            peak_net_sum: sum,
            ..Default::default()
        };
        held_peak(&h, &c, |t| t * 10)
    }

    #[test]
    fn the_held_peak_is_exact_for_one_thread_and_bounded_for_several() {
        // One thread: its own running maximum, dated by its flushes around the last rise.
        let one = marks(1, 1, 950, 1_000, 40);
        assert!(one.exact);
        assert_eq!((one.low_bytes, one.high_bytes), (1_000, 1_000));
        assert_eq!((one.after_ns, one.by_ns), (Some(30), Some(50)));
        // Three threads at once, each up to 100 bytes out of the shared mark of 1,000: the
        // peak is within [1,000 − 200, 1,000 + 300].
        let three = marks(3, 3, 1_000, 5_000, 40);
        assert!(!three.exact);
        assert_eq!((three.low_bytes, three.high_bytes), (800, 1_300));
        assert_eq!((three.after_ns, three.by_ns), (Some(70), Some(70)));
        // Narrowed by the sum of the threads' own peaks, and by what was held at the end.
        let narrow = marks(3, 3, 1_000, 1_100, 900);
        assert_eq!((narrow.low_bytes, narrow.high_bytes), (900, 1_100));
        // A mark never raised (0): the low bound is what was held at the end, never below 0.
        let none = marks(2, 2, 0, 50, 10);
        assert_eq!((none.low_bytes, none.high_bytes), (10, 50));
    }

    #[test]
    fn the_shim_was_built() {
        // gcc is on every machine ste is built on here: the shim must be in this build.
        assert_eq!(SHIM_STATUS, "ok");
        assert_eq!(elf::summarize(SHIM).map(|s| s.class64), Some(true));
    }

    #[test]
    fn checks_this_process_as_an_exec() {
        let me = std::process::id() as i32;
        let mine = Reach {
            owner: nix::unistd::geteuid().as_raw(),
            group_root: false,
        };
        let c = check_exec(
            Path::new("/proc"),
            me,
            Path::new("/nonexistent.so"),
            mine,
            5,
        );
        assert_eq!(c.static_binary, Some(false));
        assert_eq!(c.foreign, Some(false));
        assert_eq!(c.secure, Some(false));
        assert_eq!(c.preload_in_env, Some(false));
        assert_eq!(c.shim_reachable, Some(true), "its own user");
        assert!(c.program.unwrap().contains("ste"));
    }
}
