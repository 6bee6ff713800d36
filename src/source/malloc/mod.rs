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
//!
//! Its rooms: `deploy` (the shim in the run directory and the environment), `pacing` (when a
//! snapshot may be asked for), `observer` (the segment source); this file attaches the source
//! to the sampler and checks each exec's reach.

mod deploy;
pub mod info;
mod observer;
mod pacing;
pub mod rundir;
pub mod sdt;
pub mod segment;

pub use deploy::Setup;
#[cfg(test)]
use deploy::*;
pub use observer::MallocSource;
use observer::*;
use pacing::*;

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
    let static_binary = summary.map(|s| s.is_some_and(|s| !s.interp()));
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
            root: false,
        };
        let c = check_exec(
            Path::new("/proc"),
            me,
            Path::new("/nonexistent.so"),
            mine,
            5,
        );
        // This test's binary is static, as ste is (.cargo/config.toml): no ld.so to preload into.
        assert_eq!(c.static_binary, Some(true));
        assert_eq!(c.foreign, Some(false));
        assert_eq!(c.secure, Some(false));
        assert_eq!(c.preload_in_env, Some(false));
        assert_eq!(c.shim_reachable, Some(true), "its own user");
        assert!(c.program.unwrap().contains("ste"));
    }

    #[test]
    fn a_dynamic_program_is_not_static() {
        // `sleep`, once its exec shows in /proc (the spawn may return before it does).
        let mut sleep = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let exe = format!("/proc/{}/exe", sleep.id());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !std::fs::read_link(&exe).is_ok_and(|p| p.ends_with("sleep"))
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let reach = Reach {
            owner: nix::unistd::geteuid().as_raw(),
            root: false,
        };
        let c = check_exec(
            Path::new("/proc"),
            sleep.id() as i32,
            Path::new("/x.so"),
            reach,
            5,
        );
        let _ = sleep.kill();
        let _ = sleep.wait();
        assert_eq!(c.static_binary, Some(false));
        assert!(c.program.unwrap().ends_with("sleep"));
    }
}
