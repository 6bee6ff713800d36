//! The ebpf tracker: sched_process_fork/exec/exit tracepoints, the tree filtered in the kernel,
//! argv read in the kernel at exec, exit statuses and peak RSS read in the kernel at exit, and
//! (with the per-process ledger) each task's CPU at its last switch (sched_switch);
//! with `--syscalls`, the tree's system calls counted in the kernel; with `--malloc`, uprobes on
//! glibc's `memory_*` SDT probe sites (`malloc::sdt` plans them), counted for the tree's tasks.
//!
//! Owns the BPF object (`bpf/ste.bpf.o`, built from `bpf/ste.bpf.c` by `bpf/build.sh` and
//! embedded here, so building ste needs no clang), what it is loaded with (the kernel-structure
//! offsets it reads at, taken from the kernel's BTF; its configuration; which programs are
//! attached), the reader that turns ring-buffer records into Events, and the system-call
//! maps. The loading itself is `kernel::bpf`'s (ste's own loader: its header says why not
//! aya). Reaping is the shared reaper's (`track::reaper`); the live tree is `track::tree`'s.
//!
//! The programs attach as raw tracepoints, in two kinds the kernel calls the same way: exec,
//! exit and the last switch, which run in the task they trace (at sched_switch, the task
//! leaving the CPU is still the current one), are plain raw tracepoints, and find that task's
//! typed pointer, which the task-storage filter (`bpf_task_storage_get`) requires, with
//! `bpf_get_current_task_btf`; fork, which must mark the child, and the system-call programs,
//! which read `pt_regs` directly on every call, are `tp_btf` (BTF-typed: their arguments are
//! typed pointers), loaded with the id of the `btf_trace_<tracepoint>` typedef of the kernel's
//! BTF, found by the same walk of the BTF as the offsets. A `tp_btf` load costs the kernel a
//! linear search of its BTF (~0.15 ms each here), which is why only those that need it are.
//! Uprobes attach through perf events linked with
//! `BPF_LINK_CREATE` and a cookie (one per SDT site, which the program reads to know its site).
//!
//! The root is registered before it is released: the kernel map of tracked tasks (task-local
//! storage) gets the root's entry through a pidfd, marked "launching" so that ste's own launch
//! code in the child (the pipe read, PATH search) is not counted as the command's system calls.
//! The kernel writes a task's exit record before the task becomes a zombie, so once the reaper
//! has reaped every child, every record is in the ring buffer. Records that do not fit are
//! counted in the kernel; the reader reports them as lost and rebuilds the tree from /proc.
//!
//! Its rooms: `abi` (the mirrors of `bpf/ste.bpf.c`), `btf_cache` (what the kernel's BTF told
//! the last run of this binary since boot), `last_switch` (each process's CPU summed from its
//! tasks' last switches), `loading` (the object loaded before the
//! release), `reader` (the ring-buffer reader, run by the thread that loaded the object),
//! `syscall_maps` (the system-call maps read at the end); this file registers the root (for
//! the session, `track::Loading::register`) and starts them.

use crate::bus::event::Event;
use crate::bus::sink::{Msg, Sink};
use crate::kernel::affinity::spawn_elsewhere;
use crate::kernel::bpf::btf::{self, Btf};
use crate::kernel::bpf::loader::{Loaded as Bpf, Loader, Tracepoints};
use crate::kernel::bpf::maps::Map;
use crate::kernel::bpf::maps::{Array, Counters, Hash, PerCpuArray, Pod};
use crate::kernel::bpf::object::{Object, Tracepoint};
use crate::kernel::bpf::ringbuf::RingBuf;
use crate::kernel::bpf::sys;
use crate::kernel::bytes::{i32_at, u32_at, u64_at};
use crate::kernel::calls::Epoll;
use crate::kernel::caps;
use crate::kernel::proc::parse_cmdline;
use crate::model::{Arg, CallCount, Source, Syscalls, Termination, Uncounted};
use crate::source::from_kernel;
use crate::source::malloc::sdt::{self, Plan};
use crate::source::syscalls::{self, Counts, Errnos, Mode};
use crate::source::track::Handoff;
use crate::source::track::argv_check::{self, Later, Probe, Verdict};
use crate::source::track::reaper::{self, Done};
use crate::source::track::tree::Tree;
use std::collections::HashSet;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

mod abi;
mod btf_cache;
pub mod floor;
mod last_switch;
mod loading;
mod reader;
mod syscall_maps;

use abi::*;
use last_switch::{LastSwitches, Peaks, Switched};
pub use loading::{Config, Loaded, load};
use reader::*;
use syscall_maps::*;

/// Builds the reader and starts the reaper once the session registered the root (see
/// `track::Loading::register`), on the thread that loaded the object (see `track::Handoff`),
/// which then runs the reader ([`Running::run`]). Returns the system-call source when
/// `--syscalls` was asked for.
pub fn start(
    loaded: Loaded,
    h: Handoff,
) -> Result<(Running, Option<Arc<dyn syscalls::Source>>), String> {
    let Handoff {
        mut child,
        sink,
        sampler,
        registered,
    } = h;
    registered?;
    let Loaded {
        ebpf,
        ring,
        config,
        sdt,
        figures,
    } = loaded;
    let map = |name: &str| ebpf.map(name).map_err(|e| e.to_string());
    let counters = Counters::new(map("counters")?).map_err(|e| e.to_string())?;
    let source = match config.syscalls {
        Some(mode) => Some(Arc::new(BpfSyscalls {
            mode,
            maps: Mutex::new(SyscallMaps {
                totals: PerCpuArray::new(map("totals")?).map_err(|e| e.to_string())?,
                errnos: Hash::new(map("errnos")?).map_err(|e| e.to_string())?,
                // A second handle on the counters, for the system-call summary.
                counters: Counters::new(map("counters")?).map_err(|e| e.to_string())?,
            }),
        })),
        None => None,
    };
    // With sites to attach, the end of the run says what became of them, even of none.
    let sdt = match sdt.filter(|p| !p.sites.is_empty()) {
        Some(plan) if plan.sites.iter().any(|s| s.attached) => Some(SdtMaps {
            plan,
            maps: Some((
                PerCpuArray::new(map("sdt_totals")?).map_err(|e| e.to_string())?,
                Hash::new(map("sdt_sizes")?).map_err(|e| e.to_string())?,
            )),
        }),
        Some(plan) => Some(SdtMaps { plan, maps: None }),
        None => None,
    };
    let done = Done::new().map_err(|e| format!("eventfd: {e}"))?;
    let waiter = Epoll::new()
        .and_then(|w| {
            w.add(done.wake.as_fd(), false)?;
            w.add(ring.as_fd(), true)?;
            Ok(w)
        })
        .map_err(|e| format!("cannot wait on the ring buffer (epoll): {e}"))?;
    let report = child.take_exec_outcome();
    let root = child.pid;
    // Before Linux 6.16 the exit tracepoint comes after exit_mm(): the sampler reads each
    // process's high-water mark as it goes, and takes the exit's from taskstats's records
    // (the session keeps them: `whole_ledger`).
    let peaks_from_exit = crate::kernel::release::Version::running().mm_at_exit_tracepoint();
    if !peaks_from_exit {
        sampler.read_peaks();
    }
    let mut reader = Reader {
        ebpf,
        ring,
        waiter,
        counters,
        dropped: 0,
        sdt,
        state: State {
            tree: Tree::new(root, sink.clone(), sampler),
            deferred_leaders: HashSet::new(),
            page_size: crate::kernel::proc::page_size(),
            timed: config.syscalls.is_some_and(Mode::timed),
            peaks_from_exit,
            judged: None,
            last: config.ledger.then(|| {
                let mut last = LastSwitches::new(figures);
                // Its life in the Run starts at the release, time zero.
                last.process_started(root, 0);
                last
            }),
        },
    };
    // The session takes a drain's records at its next look, not once per record or drain.
    reader.state.tree.batch_unhurried();
    reaper::spawn(root, report, sink, Arc::clone(&done))?;
    let source = source.map(|s| s as Arc<dyn syscalls::Source>);
    Ok((
        Running {
            reader,
            done,
            config,
        },
        source,
    ))
}

/// The reader, started and ready to run on the thread that loaded it.
pub struct Running {
    reader: Reader,
    done: Arc<Done>,
    config: Config,
}

impl Running {
    /// Whether the last switches carry each task's whole ledger and the exit records its
    /// peaks: the tracker then gives every per-process figure taskstats would
    /// (`track::Started::whole_ledger`).
    pub fn whole_ledger(&self) -> bool {
        self.reader.state.peaks_from_exit
            && self
                .reader
                .state
                .last
                .as_ref()
                .is_some_and(LastSwitches::whole)
    }

    /// Reads the ring buffer until the run is done, as the tracker's thread: named so (`top
    /// -H`, `perf`, the capability test see the reader) and limited to the reader's
    /// capabilities first.
    pub fn run(self) {
        crate::kernel::calls::name_this_thread(c"ste-ebpf");
        // After the session has its answer, not on the way to the command's release.
        let state = &self.reader.state;
        let sink = &state.tree.sink;
        let figures = state.last.as_ref().is_some_and(LastSwitches::whole);
        declare_sources(sink, self.config, figures, state.peaks_from_exit);
        if !state.peaks_from_exit {
            sink.emit(Event::Note {
                text: reader::NO_PEAK_AT_EXIT.into(),
            });
        }
        if self.reader.sdt.as_ref().is_some_and(|s| s.maps.is_some()) {
            sink.emit(Event::Source {
                figure: "malloc_sdt_probes".into(),
                source: Source::exact(
                    "uprobes on libc:memory_* SDT probe sites (BPF), counted in the kernel for the tree's tasks",
                ),
            });
        }
        // The reader switches its batching flag in a map as it goes, and reads the SDT maps at
        // the end (`run.rs` says what this thread kept by the same rule).
        let bpf_maps = crate::launch::privilege::bpf_maps_need_capability();
        crate::launch::privilege::limit_or_say(
            crate::launch::privilege::Role::Tracker { bpf_maps },
            &self.reader.state.tree.sink,
        );
        self.reader.run(&self.done)
    }
}

/// The map the root is registered in ([`register_root`]): `tasks` (task-local storage), or
/// `root_h` where the kernel keeps the tree in a hash (before Linux 5.12).
pub(in crate::source::track) fn root_map(b: &Bpf) -> Option<Map> {
    b.map("tasks").or_else(|_| b.map("root_h")).ok()
}

/// Gives the root its `struct task_state` (launching until its exec) through a pidfd, or,
/// where the tree is kept in a hash, names it by its pid for the programs to adopt (they key
/// the hash by task address, which user space cannot know).
pub(in crate::source::track) fn register_root(map: &Map, pid: i32) -> std::io::Result<()> {
    if map.def.map_type != sys::MAP_TASK_STORAGE {
        return sys::map_update(map.as_fd(), &0u32.to_ne_bytes(), &pid.to_ne_bytes(), 0);
    }
    // SAFETY: pidfd_open with integer arguments; returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    // enter_ns: u64, flags: u32, enter_nr: u32
    let mut value = [0u8; 16];
    value[8..12].copy_from_slice(&TASK_LAUNCHING.to_ne_bytes());
    // A task-storage map takes a pidfd as its key.
    sys::map_update(
        map.as_fd(),
        &pidfd.as_raw_fd().to_ne_bytes(),
        &value,
        0, // BPF_ANY
    )
}

/// `figures`: the last switches carry the whole ledger; `peaks`: the exit records carry the
/// peaks (Linux 6.16+).
fn declare_sources(sink: &Sink, config: Config, figures: bool, peaks: bool) {
    let mut sources = vec![
        (
            "processes",
            "sched_process_fork tracepoint (BPF), filtered to the tree in the kernel",
        ),
        (
            "threads",
            "sched_process_fork tracepoint (BPF), filtered to the tree in the kernel",
        ),
        (
            "execs",
            "sched_process_exec tracepoint (BPF), argv read from the new image's argument area in the kernel",
        ),
    ];
    if peaks {
        sources.push((
            "peak_rss_bytes",
            "hiwater_rss and the RSS counters of the process's memory, read by BPF at sched_process_exit (how /proc/PID/status computes VmHWM)",
        ));
    }
    if let Some(mode) = config.syscalls {
        sources.push((
            "syscalls",
            if mode.timed() {
                "raw_syscalls:sys_enter and sys_exit tracepoints (BPF), counted in the kernel"
            } else {
                "raw_syscalls:sys_exit tracepoint (BPF), counted in the kernel"
            },
        ));
    }
    if config.ledger && figures {
        sources.push((
            "ledger.last_switch",
            if peaks {
                "each task's counters, read by BPF as it leaves a CPU for the last time (sched_switch), where they are final, summed per process: runtime (se.sum_exec_runtime, split into user and system time in the proportion of its tick samples, as getrusage splits it), run-queue wait (sched_info.run_delay), context switches, page faults, I/O (ioac, to the byte), delay accounting's block-I/O and swap/reclaim waits; the peaks (VmHWM, VmPeak) read at the process's last exit, memory still attached"
            } else {
                "each task's counters, read by BPF as it leaves a CPU for the last time (sched_switch), where they are final, summed per process: runtime (se.sum_exec_runtime, split into user and system time in the proportion of its tick samples, as getrusage splits it), run-queue wait (sched_info.run_delay), context switches, page faults, I/O (ioac, to the byte), delay accounting's block-I/O and swap/reclaim waits"
            },
        ));
    } else if config.ledger {
        sources.push((
            "ledger.last_switch",
            "each task's runtime (se.sum_exec_runtime), read by BPF as it leaves a CPU for the last time (sched_switch), summed per process; split into user and system time in the proportion of its tick samples, as getrusage splits it",
        ));
    }
    for (figure, from) in sources {
        sink.emit(Event::Source {
            figure: figure.into(),
            source: Source::exact(from),
        });
    }
}
