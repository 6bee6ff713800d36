//! The ebpf tracker: sched_process_fork/exec/exit tracepoints, the tree filtered in the kernel,
//! argv read in the kernel at exec, exit statuses and peak RSS read in the kernel at exit;
//! with `--syscalls`, the tree's system calls counted in the kernel; with `--malloc`, uprobes on
//! glibc's `memory_*` SDT probe sites (`malloc::sdt` plans them), counted for the tree's tasks.
//!
//! Owns the BPF object (`bpf/ste.bpf.o`, built from `bpf/ste.bpf.c` by `bpf/build.sh` and
//! embedded here, so building ste needs no clang), what it is loaded with (the kernel-structure
//! offsets it reads at, taken from the kernel's BTF; its configuration; which programs are
//! attached), the reader thread that turns ring-buffer records into Events, and the system-call
//! maps. The loading itself is `kernel::bpf`'s (ste's own loader: its header says why not
//! aya). Reaping is the shared reaper's (`track::reaper`); the live tree is `track::tree`'s.
//!
//! The programs attach as raw tracepoints, in two kinds the kernel calls the same way: exec
//! and exit, which run in the task they trace, are plain raw tracepoints, and find that task's
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

pub mod floor;

use crate::bus::event::Event;
use crate::bus::launched::Launched;
use crate::bus::sink::{Msg, Sink};
use crate::bus::tree::TreeWatcher;
use crate::kernel::affinity::spawn_elsewhere;
use crate::kernel::bpf::btf::{self, Btf};
use crate::kernel::bpf::loader::{Loaded as Bpf, Loader, Tracepoints};
use crate::kernel::bpf::maps::Map;
use crate::kernel::bpf::maps::{Array, Hash, PerCpuArray, Pod};
use crate::kernel::bpf::object::{Object, Tracepoint};
use crate::kernel::bpf::ringbuf::RingBuf;
use crate::kernel::bpf::sys;
use crate::kernel::bytes::{i32_at, u32_at, u64_at};
use crate::kernel::caps;
use crate::kernel::proc::parse_cmdline;
use crate::model::{Arg, CallCount, Source, Syscalls, Termination, Uncounted};
use crate::source::from_kernel;
use crate::source::malloc::sdt::{self, Plan};
use crate::source::syscalls::{self, Counts, Errnos, Mode};
use crate::source::track::argv_check::{self, Later, Probe, Verdict};
use crate::source::track::reaper::{self, Done};
use crate::source::track::tree::Tree;
use std::collections::HashSet;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// The object, aligned for the ELF parser.
#[repr(C, align(8))]
struct Aligned<T: ?Sized>(T);
static OBJECT: &Aligned<[u8]> = &Aligned(*include_bytes!("../../../bpf/ste.bpf.o"));

/// The kernel's BTF, unless `STE_KERNEL_BTF` names another file: a diagnostic knob (the tests
/// check that a corrupt or foreign blob is refused clearly); any other file than the running
/// kernel's BTF is wrong, as the tracepoints' ids are the kernel's own.
const VMLINUX: &str = "/sys/kernel/btf/vmlinux";

/// Record kinds and layouts: `bpf/ste.bpf.c`.
const EV_FORK: u32 = 1;
const EV_EXEC: u32 = 2;
const EV_EXIT: u32 = 3;
const EV_CALLS: u32 = 4;
const EXIT_GROUP_DEAD: u32 = 1;
const EXIT_HAS_MM: u32 = 2;
const TASK_LAUNCHING: u32 = 1;
/// Syscall numbers per ABI in the kernel's arrays: native at `nr`, compat at 512 + nr.
const NIDX: u32 = 1024;
const CNT_DROPPED: u32 = 0;
const CNT_UNTRACKED: u32 = 1;
const CNT_BAD_NR: u32 = 3;
const CNT_ERRNO_FULL: u32 = 4;
const CNT_SDT_SIZES_FULL: u32 = 5;

/// How often the reader checks the kernel's count of dropped records.
const DROP_CHECK: Duration = Duration::from_millis(100);

/// How long the reader sleeps between drains while records keep coming (a fork storm, a
/// parallel build). Waking on the ring's notification costs a wake-up of this thread and of
/// the session thread per record when records are sparser than the reader is fast (about
/// three per process of a loop of short programs); sleeping instead lets them pile up and be
/// read together. It bounds how late an EXEC line appears, and the ring (`RING_BYTES`) holds
/// far more than a batch of this length even at the kernel's fork rate.
const BATCH: Duration = Duration::from_millis(10);

/// `struct total` of the BPF object.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct Total {
    calls: u64,
    errors: u64,
    ns: u64,
    max_ns: u64,
}

/// `struct errno_key` of the BPF object.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct ErrnoKey {
    idx: u32,
    err: i32,
}

/// `struct sdt_arg` and `struct sdt_site` of the BPF object (forms: `ARG_*` there).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct SdtArg {
    form: u32,
    reg: u32,
    size: i32,
    pad: u32,
    disp: i64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct SdtSite {
    kind: u32,
    pad: u32,
    size: SdtArg,
}

/// `struct sdt_total` and `struct sdt_size_key` of the BPF object.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct SdtTotal {
    hits: u64,
    sized: u64,
    bytes: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct SdtSizeKey {
    kind: u32,
    pad: u32,
    size: u64,
}

impl SdtArg {
    fn of(arg: Option<sdt::Arg>) -> SdtArg {
        let (form, reg, size, disp) = match arg {
            None => (0, 0, 0, 0),
            Some(sdt::Arg::Reg { reg, size }) => (1, reg, size, 0),
            Some(sdt::Arg::Mem { reg, disp, size }) => (2, reg, size, disp),
            Some(sdt::Arg::Const { value, size }) => (3, 0, size, value),
        };
        SdtArg {
            form,
            reg,
            size,
            pad: 0,
            disp,
        }
    }
}

// SAFETY: plain repr(C) integers with no padding; any bit pattern is valid.
unsafe impl Pod for Total {}
// SAFETY: plain repr(C) integers with no padding; any bit pattern is valid.
unsafe impl Pod for SdtSite {}
// SAFETY: plain repr(C) integers with no padding; any bit pattern is valid.
unsafe impl Pod for SdtTotal {}
// SAFETY: plain repr(C) integers with no padding; any bit pattern is valid.
unsafe impl Pod for SdtSizeKey {}
// SAFETY: plain repr(C) integers with no padding; any bit pattern is valid.
unsafe impl Pod for ErrnoKey {}

/// What the tracker is asked to do besides following the tree.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    pub syscalls: Option<Mode>,
}

/// The object loaded, its programs attached and its ring buffer mapped, before the command is
/// released: loading (the verifier checks each program) takes a few milliseconds, which must
/// not count as the command's time. Nothing is followed until [`start`] registers the root.
pub struct Loaded {
    ebpf: Bpf,
    /// The `events` ring buffer, mapped.
    ring: RingBuf,
    config: Config,
    /// The SDT probe sites, each marked attached or not.
    sdt: Option<Plan>,
}

/// Loads the object and attaches what `config` needs (and uprobes on the sites of `sdt`), or
/// says why it cannot. An SDT site that cannot be attached is marked so, not an error.
pub fn load(config: Config, mut sdt: Option<Plan>) -> Result<Loaded, String> {
    if !cfg!(target_arch = "x86_64") {
        return Err(format!(
            "the BPF object is built for x86_64, not {}",
            std::env::consts::ARCH
        ));
    }
    if let Some(mask) = caps::effective() {
        let bpf = caps::has(mask, caps::CAP_BPF) && caps::has(mask, caps::CAP_PERFMON);
        if !bpf && !caps::has(mask, caps::CAP_SYS_ADMIN) {
            return Err(format!(
                "loading BPF programs needs CAP_BPF and CAP_PERFMON (run ste as root){}",
                unprivileged_knob()
            ));
        }
    }
    let with_sdt = sdt.as_ref().is_some_and(|p| !p.sites.is_empty());
    let (mut ebpf, ring) = load_object(config, with_sdt).map_err(|e| explain(&e))?;
    if let Some(plan) = sdt.as_mut().filter(|p| !p.sites.is_empty())
        && let Err(e) = attach_sdt(&mut ebpf, plan)
    {
        for o in plan.objects.iter_mut().filter(|o| o.found > 0) {
            o.not_attached.push(format!("the uprobe program: {e}"));
        }
    }
    Ok(Loaded {
        ebpf,
        ring,
        config,
        sdt,
    })
}

/// Registers the root, and starts the reader and the reaper. Returns the system-call source
/// when `--syscalls` was asked for.
pub fn start(
    loaded: Loaded,
    child: &mut Launched,
    sink: Sink,
    sampler: Arc<dyn TreeWatcher>,
) -> Result<Option<Arc<dyn syscalls::Source>>, String> {
    let Loaded {
        ebpf,
        ring,
        config,
        sdt,
    } = loaded;
    let tasks = ebpf.map("tasks").map_err(|e| e.to_string())?;
    register_root(&tasks, child.pid)
        .map_err(|e| format!("cannot register the command with BPF: {e}"))?;
    let map = |name: &str| ebpf.map(name).map_err(|e| e.to_string());
    let counters: Array<u64> = Array::new(map("counters")?).map_err(|e| e.to_string())?;
    let source = match config.syscalls {
        Some(mode) => Some(Arc::new(BpfSyscalls {
            mode,
            maps: Mutex::new(SyscallMaps {
                totals: PerCpuArray::new(map("totals")?).map_err(|e| e.to_string())?,
                errnos: Hash::new(map("errnos")?).map_err(|e| e.to_string())?,
                // A second handle on the counters, for the system-call summary.
                counters: Array::new(map("counters")?).map_err(|e| e.to_string())?,
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
    declare_sources(&sink, config);
    if sdt.as_ref().is_some_and(|s| s.maps.is_some()) {
        sink.emit(Event::Source {
            figure: "malloc_sdt_probes".into(),
            source: Source::exact(
                "uprobes on libc:memory_* SDT probe sites (BPF), counted in the kernel for the tree's tasks",
            ),
        });
    }
    let report = child.take_exec_outcome();
    let root = child.pid;
    let mut reader = Reader {
        _ebpf: ebpf,
        ring,
        counters,
        dropped: 0,
        sdt,
        state: State {
            tree: Tree::new(root, sink.clone(), sampler),
            deferred_leaders: HashSet::new(),
            page_size: crate::kernel::proc::page_size(),
            timed: config.syscalls.is_some_and(Mode::timed),
            peaks_from_exit: true,
            judged: None,
        },
    };
    // The session wakes once per drain, not once per record.
    reader.state.tree.batch();
    let reader_done = Arc::clone(&done);
    std::thread::Builder::new()
        .name("ste-ebpf".into())
        .spawn(move || {
            crate::launch::privilege::limit_or_say(
                crate::launch::privilege::Role::Tracker,
                &reader.state.tree.sink,
            );
            reader.run(&reader_done)
        })
        .map_err(|e| format!("cannot start the ebpf reader: {e}"))?;
    reaper::spawn(root, report, sink, done)?;
    Ok(source.map(|s| s as Arc<dyn syscalls::Source>))
}

/// The kernel-structure offsets the BPF object reads at (`off_*` and `size_*` in
/// `bpf/ste.bpf.c`), from the kernel's BTF; with `syscalls`, also the check that
/// `thread_info.status`, which the system-call programs read directly, is where they read it.
fn layout(btf: &Btf, syscalls: bool) -> Result<Vec<(&'static str, u32)>, String> {
    let names = ["task_struct", "signal_struct", "mm_struct", "thread_info"];
    let wanted: Vec<(u32, &str)> = names.iter().map(|n| (btf::STRUCT, *n)).collect();
    let ids = btf.find_many(&wanted).map_err(|e| e.to_string())?;
    let id = |i: usize| ids[i].ok_or_else(|| format!("it has no `struct {}`", names[i]));
    let (task, signal, mm) = (id(0)?, id(1)?, id(2)?);
    // The offset of `path` in `ty`, whose field must have `size` bytes.
    let field = |ty: u32, path: &str, size: u64| -> Result<u32, String> {
        let (off, t) = btf.offset_of(ty, path).map_err(|e| e.to_string())?;
        let have = btf.size_of(t).map_err(|e| e.to_string())?;
        if have != size {
            return Err(format!(
                "`{}.{path}` has {have} bytes, not {size}",
                btf.type_name(ty)
            ));
        }
        u32::try_from(off).map_err(|_| format!("`{path}` is too far in"))
    };
    // mm_struct.rss_stat: an array of percpu_counter, indexed by MM_FILEPAGES etc. (< 4).
    let (rss_stat, stat_ty) = btf.offset_of(mm, "rss_stat").map_err(|e| e.to_string())?;
    let stat = btf
        .resolve(stat_ty)
        .and_then(|t| btf.get(t))
        .map_err(|e| e.to_string())?;
    let (counter, _) = btf
        .array(&stat)
        .filter(|&(_, n)| n >= 4)
        .ok_or("`mm_struct.rss_stat` is not an array of at least 4 counters")?;
    let counter_size = btf.size_of(counter).map_err(|e| e.to_string())?;
    let out = vec![
        ("off_task_pid", field(task, "pid", 4)?),
        ("off_task_tgid", field(task, "tgid", 4)?),
        ("off_task_exit_code", field(task, "exit_code", 4)?),
        ("off_task_mm", field(task, "mm", 8)?),
        ("off_task_signal", field(task, "signal", 8)?),
        ("off_task_group_leader", field(task, "group_leader", 8)?),
        ("off_signal_live", field(signal, "live.counter", 4)?),
        (
            "off_signal_group_exit_code",
            field(signal, "group_exit_code", 4)?,
        ),
        ("off_signal_flags", field(signal, "flags", 4)?),
        ("off_mm_hiwater_rss", field(mm, "hiwater_rss", 8)?),
        ("off_mm_arg_start", field(mm, "arg_start", 8)?),
        ("off_mm_arg_end", field(mm, "arg_end", 8)?),
        ("off_mm_rss_stat", rss_stat as u32),
        ("size_percpu_counter", counter_size as u32),
        ("off_percpu_counter_count", field(counter, "count", 8)?),
    ];
    if syscalls {
        // thread_info first in task_struct (CONFIG_THREAD_INFO_IN_TASK), status at 16: the
        // layout bpf/ste.bpf.c declares, read directly on every system call.
        let thread_info = id(3)?;
        let at = field(task, "thread_info", btf.size_of(thread_info).unwrap_or(0))?;
        let status = field(thread_info, "status", 4)?;
        if (at, status) != (0, 16) {
            return Err(format!(
                "`task_struct.thread_info.status` is at byte {} of task_struct, not 16 as ste's system-call programs read it",
                u64::from(at) + u64::from(status)
            ));
        }
    }
    Ok(out)
}

/// The ring buffer's size. Its pages are allocated, zeroed and charged when it is created, and
/// mapped (twice) when ste maps it: each MiB costs `ste true` about 0.6 ms here (4 MiB → 1 MiB
/// took 1.8 ms off). A record that does not fit is counted, reported as lost, and the tree
/// rebuilt from /proc, but the execs it carried are gone, so the size is set by the bursts it
/// must hold, not by start-up: 2 MiB held 8 parallel execs with 200 KB of argv each (300 of
/// them, 4 runs, nothing lost) where 1 MiB lost 5–30 of the 300 execs; the fork storm of the
/// tests (20,000 forks) never had more than 1.6 KB waiting.
const RING_BYTES: u32 = 2 << 20;

/// What the kernel's BTF tells the loader: the offsets to set and the tracepoints' ids.
struct FromBtf {
    layout: Vec<(&'static str, u32)>,
    tracepoint_ids: Vec<u32>,
}

/// Reads the kernel's BTF (mapped where the kernel allows it) for `layout` and the ids of
/// `tracepoints`.
fn from_btf<S: AsRef<str>>(syscalls: bool, tracepoints: &[S]) -> Result<FromBtf, String> {
    let path = std::env::var_os("STE_KERNEL_BTF").unwrap_or_else(|| VMLINUX.into());
    let shown = std::path::Path::new(&path).display().to_string();
    let blob = btf::read(std::path::Path::new(&path)).map_err(|e| {
        format!("cannot read the kernel's BTF ({shown}, CONFIG_DEBUG_INFO_BTF): {e}")
    })?;
    let kernel =
        Btf::parse(&blob).map_err(|e| format!("cannot read the kernel's BTF ({shown}): {e}"))?;
    let layout =
        layout(&kernel, syscalls).map_err(|e| format!("the kernel's BTF ({shown}): {e}"))?;
    let tracepoint_ids = crate::kernel::bpf::loader::tracepoint_ids(&kernel, tracepoints)
        .map_err(|e| format!("loading the tracepoint programs: {e}"))?;
    Ok(FromBtf {
        layout,
        tracepoint_ids,
    })
}

/// Loads the object and attaches what `config` needs (and creates what the uprobe program
/// needs, `with_sdt`), and maps the ring buffer. Detaches on drop.
fn load_object(config: Config, with_sdt: bool) -> Result<(Bpf, RingBuf), String> {
    let obj = Object::parse(&OBJECT.0).map_err(|e| e.to_string())?;
    let timed: u32 = config.syscalls.is_some_and(Mode::timed).into();
    let per_thread: u32 = config.syscalls.is_some_and(Mode::per_process).into();
    let sigreturn = syscalls::native_nr("rt_sigreturn").unwrap_or(u32::MAX);
    let mut programs = vec!["handle_fork", "handle_exec", "handle_exit"];
    if config.syscalls.is_some() {
        programs.push("sys_exit");
    }
    if timed == 1 {
        programs.push("sys_enter");
    }
    let tracepoints = programs
        .iter()
        .map(|p| {
            obj.tracepoint(p)
                .ok_or(format!("the BPF object has no tracepoint program `{p}`"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    // Only tp_btf programs are loaded with their tracepoint's BTF id.
    let typed: Vec<&str> = tracepoints
        .iter()
        .filter_map(|t| match t {
            Tracepoint::Btf(name) => Some(*name),
            Tracepoint::Raw(_) => None,
        })
        .collect();
    let cpus = sys::possible_cpus().map_err(|e| format!("possible CPUs: {e}"))?;
    let mut loader = Loader::new(obj.clone());
    loader
        .max_entries("scratch", cpus)
        .max_entries("events", RING_BYTES);
    let mut maps_for = programs.clone();
    if with_sdt {
        maps_for.push("sdt_memory");
    }
    // Side by side, on this thread and one helper started on another CPU: the helper walks
    // the kernel's BTF while this thread has the kernel allocate the maps; both then load and
    // attach the programs in turn, and the helper maps the ring buffer when it has no program
    // left. One helper for all three, rather than a thread each: starting a thread costs
    // ~0.05 ms here, and up to ~1 ms when several threads map memory at once (each waits for
    // the others' hold on ste's memory map).
    let want: Vec<String> = typed.iter().map(|t| t.to_string()).collect();
    let with_syscalls = config.syscalls.is_some();
    let (btf_tx, btf_rx) = mpsc::channel();
    let (work_tx, work_rx) = mpsc::channel::<(Arc<Tracepoints>, Map)>();
    let helper = spawn_elsewhere("ste-bpf-helper", move || {
        let btf = crate::bus::phases::span("bpf: kernel BTF", || from_btf(with_syscalls, &want));
        let _ = btf_tx.send(btf);
        // No work when the loading stopped short: its error says why.
        let (tracepoints, events) = work_rx.recv().ok()?;
        let turns = tracepoints.take_turns();
        let ring = crate::bus::phases::span("bpf: map ring", || RingBuf::new(events));
        Some((turns, ring))
    })
    .ok();
    let created = crate::bus::phases::span("bpf: create maps", || loader.create_maps(&maps_for));
    // The BTF's error first, as when the two ran in turn: it says what this kernel lacks.
    let btf = match (&helper, btf_rx.recv()) {
        (Some(_), Ok(btf)) => btf?,
        _ => from_btf(with_syscalls, &typed)?,
    };
    let mut ebpf = created.map_err(|e| e.to_string())?;
    for (name, value) in &btf.layout {
        ebpf.set_global(name, value).map_err(|e| e.to_string())?;
    }
    ebpf.set_global("cfg_timed", &timed)
        .and_then(|l| l.set_global("cfg_per_thread", &per_thread))
        .and_then(|l| l.set_global("cfg_sigreturn_nr", &sigreturn))
        .map_err(|e| e.to_string())?;
    let mut ids = btf.tracepoint_ids.into_iter();
    let attach: Vec<(&str, u32)> = programs
        .iter()
        .zip(&tracepoints)
        .map(|(&p, t)| match t {
            Tracepoint::Btf(_) => (p, ids.next().unwrap_or_default()),
            Tracepoint::Raw(_) => (p, 0),
        })
        .collect();
    let events = ebpf.map("events").map_err(|e| e.to_string())?;
    let work = Arc::new(ebpf.tracepoints(&attach).map_err(|e| e.to_string())?);
    let helped = helper.is_some() && work_tx.send((Arc::clone(&work), events)).is_ok();
    let mine = crate::bus::phases::span("bpf: load+attach programs", || work.take_turns());
    let (theirs, ring) = match helper.filter(|_| helped).and_then(joined) {
        Some((theirs, ring)) => (Some(theirs), ring),
        // No helper: this thread took every program; it maps the ring buffer too.
        None => (
            None,
            ebpf.map("events")
                .map_err(|e| std::io::Error::other(e.to_string()))
                .and_then(RingBuf::new),
        ),
    };
    ebpf.attached(&work, std::iter::once(mine).chain(theirs))
        .map_err(|e| e.to_string())?;
    let ring = ring.map_err(|e| format!("mapping the ring buffer: {e}"))?;
    Ok((ebpf, ring))
}

/// The result of a helper thread (a panic goes on in the caller).
fn joined<T>(h: std::thread::JoinHandle<T>) -> T {
    h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
}

/// Writes each site's spec to `sdt_sites` (the cookie indexes it), loads the uprobe program and
/// attaches it at every site; a site that cannot be attached is marked with why.
fn attach_sdt(ebpf: &mut Bpf, plan: &mut Plan) -> Result<(), String> {
    let map = ebpf.map("sdt_sites").map_err(|e| e.to_string())?;
    let sites: Array<SdtSite> = Array::new(map).map_err(|e| e.to_string())?;
    for (i, s) in plan.sites.iter().enumerate() {
        let spec = SdtSite {
            kind: s.kind,
            pad: 0,
            size: SdtArg::of(s.size),
        };
        sites
            .set(i as u32, &spec)
            .map_err(|e| format!("sdt_sites: {e}"))?;
    }
    let prog = ebpf.load_uprobe("sdt_memory").map_err(|e| e.to_string())?;
    let Plan { objects, sites, .. } = plan;
    for (i, site) in sites.iter_mut().enumerate() {
        let object = &mut objects[site.object];
        match ebpf.attach_uprobe(prog, &object.path, site.file_offset, i as u64) {
            Ok(()) => site.attached = true,
            Err(e) => object.not_attached.push(format!(
                "the site at file offset {:#x}: {e}",
                site.file_offset
            )),
        }
    }
    Ok(())
}

/// Why BPF did not load, in words a user can act on.
fn explain(text: &str) -> String {
    let denied = text.contains("Operation not permitted") || text.contains("Permission denied");
    if denied {
        format!(
            "loading BPF programs needs CAP_BPF and CAP_PERFMON (run ste as root){}: {text}",
            unprivileged_knob()
        )
    } else {
        text.to_string()
    }
}

/// `; kernel.unprivileged_bpf_disabled=N`, for messages.
fn unprivileged_knob() -> String {
    std::fs::read_to_string("/proc/sys/kernel/unprivileged_bpf_disabled")
        .map(|s| format!("; kernel.unprivileged_bpf_disabled={}", s.trim()))
        .unwrap_or_default()
}

/// Gives the root its `struct task_state` (launching until its exec) through a pidfd.
fn register_root(tasks: &crate::kernel::bpf::maps::Map, pid: i32) -> std::io::Result<()> {
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
        tasks.as_fd(),
        &pidfd.as_raw_fd().to_ne_bytes(),
        &value,
        0, // BPF_ANY
    )
}

fn declare_sources(sink: &Sink, config: Config) {
    let mut figures = vec![
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
        (
            "peak_rss_bytes",
            "hiwater_rss and the RSS counters of the process's memory, read by BPF at sched_process_exit (how /proc/PID/status computes VmHWM)",
        ),
    ];
    if let Some(mode) = config.syscalls {
        figures.push((
            "syscalls",
            if mode.timed() {
                "raw_syscalls:sys_enter and sys_exit tracepoints (BPF), counted in the kernel"
            } else {
                "raw_syscalls:sys_exit tracepoint (BPF), counted in the kernel"
            },
        ));
    }
    for (figure, from) in figures {
        sink.emit(Event::Source {
            figure: figure.into(),
            source: Source::exact(from),
        });
    }
}

/// Counter `i` (`CNT_*`) of the kernel's `counters` array. The map is ste's own, so a read
/// fails only on a kernel or ste bug; then ste says so rather than take a loss counter for 0
/// silently.
fn read_counter(counters: &Array<u64>, i: u32) -> u64 {
    counters.get(i).unwrap_or_else(|e| {
        unreadable(&format!("counter {i}"), "taken as 0", &e);
        0
    })
}

/// Says on stderr that a BPF map could not be read, and what that did to the figures.
fn unreadable(what: &str, so: &str, e: &dyn std::error::Error) {
    eprintln!("ste: cannot read {what} from the BPF maps ({e}): {so}");
}

/// The ring-buffer reader: owns the loaded object (dropping it detaches the programs).
struct Reader {
    _ebpf: Bpf,
    ring: RingBuf,
    counters: Array<u64>,
    /// Dropped records and untracked tasks already reported.
    dropped: u64,
    /// The SDT probes' counts, when a uprobe was attached.
    sdt: Option<SdtMaps>,
    state: State,
}

/// The SDT probe sites and the kernel's counts of their hits (per kind, and sizes), when a
/// site was attached.
struct SdtMaps {
    plan: Plan,
    maps: Option<(SdtTotals, SdtSizes)>,
}

type SdtTotals = PerCpuArray<SdtTotal>;
type SdtSizes = Hash<SdtSizeKey, u64>;

impl SdtMaps {
    /// What the tree's tasks hit, as an event; every task of the tree has ended, so the counts
    /// are final.
    fn event(&self, sizes_dropped: u64) -> Event {
        let Some((totals, sizes)) = &self.maps else {
            return Event::MallocProbes {
                text: self.plan.text_after(),
                counts: None,
            };
        };
        let totals: Vec<(u64, u64, u64)> = (0..self.plan.kinds.len() as u32)
            .map(|k| match totals.get(k) {
                Ok(per_cpu) => per_cpu.iter().fold((0, 0, 0), |(h, s, b), t| {
                    (h + t.hits, s + t.sized, b + t.bytes)
                }),
                Err(e) => {
                    unreadable(&format!("SDT probe kind {k}'s hits"), "taken as 0", &e);
                    (0, 0, 0)
                }
            })
            .collect();
        let sizes: Vec<(u32, u64, u64)> = sizes
            .iter()
            .flatten()
            .map(|(k, n)| (k.kind, k.size, n))
            .collect();
        Event::MallocProbes {
            text: self.plan.text_after(),
            counts: Some(Box::new(self.plan.counts(&totals, &sizes, sizes_dropped))),
        }
    }
}

struct State {
    tree: Tree,
    /// Processes whose leader exited before the rest: its end is reported with the process's,
    /// as `wait(2)` reports a leader only once its group is gone.
    deferred_leaders: HashSet<i32>,
    page_size: u64,
    timed: bool,
    /// Whether exit records carry the memory (Linux ≥ 6.16 traces the exit before exit_mm).
    peaks_from_exit: bool,
    /// The argv of the exec record at the head of the ring, judged by [`Reader::judge_argv`],
    /// for `handle` to take.
    judged: Option<Judged>,
}

enum Judged {
    Argv(Vec<Arg>),
    /// The process was gone (or had no memory left) when read.
    Unread,
    /// The read may be of a later image.
    Doubt,
}

/// An exec record whose argument area was larger than the kernel's copy, read whole from
/// /proc but not yet judged (see `track::argv_check`).
struct ToJudge {
    tgid: i32,
    /// The /proc read, when it matched the record (its length, and the kernel's copy as its
    /// start).
    argv: Judged,
    read_start_ns: u64,
}

impl Reader {
    /// Drains the ring until the run is done. While records are sparse it wakes on the ring's
    /// notification, so a lone exec is seen at once (the sampler reads a new program soon
    /// after its exec); while they keep coming it sleeps [`BATCH`] between drains instead,
    /// and the kernel, which notifies only when the reader has caught up, stops waking it.
    fn run(mut self, done: &Done) {
        let mut last_check = Instant::now();
        let mut last_drain = Instant::now();
        let mut batching = false;
        let end_ns = loop {
            let mut fds = [
                libc::pollfd {
                    fd: done.wake.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: self.ring.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            let (n, timeout) = if batching {
                (1, BATCH)
            } else {
                (2, DROP_CHECK)
            };
            // SAFETY: polling one or two valid descriptors of a local array.
            unsafe { libc::poll(fds.as_mut_ptr(), n, timeout.as_millis() as i32) };
            let records = self.drain();
            // Records again within two batches of the last drain: a storm, so batch.
            batching = records > 0 && last_drain.elapsed() <= 2 * BATCH;
            last_drain = Instant::now();
            if last_check.elapsed() >= DROP_CHECK {
                self.check_drops();
                last_check = Instant::now();
            }
            if let Some(t) = done.get() {
                // Every exit record was written before its task was reaped.
                self.drain();
                self.check_drops();
                break t;
            }
            self.state.tree.flush();
        };
        if let Some(sdt) = &self.sdt {
            let dropped = read_counter(&self.counters, CNT_SDT_SIZES_FULL);
            self.state.tree.emit(sdt.event(dropped));
        }
        self.state.tree.finish();
        self.state.tree.flush();
        self.state.tree.sink.send(Msg::TrackerDone {
            t_ns: end_ns,
            error: None,
        });
        // What is left of this thread is detaching the programs, as `self` drops: the kernel
        // rewrites the tracepoints' call sites (~0.3 ms here, with a round of interrupts on
        // every CPU). The session thread, just woken by the message above, finishes the
        // report meanwhile; the kernel places a woken thread on its waker's CPU, where it
        // waited for the whole detach (0.3 ms in the run queue, the other CPU idle). So this
        // thread leaves that CPU to it first.
        crate::kernel::affinity::leave_this_cpu();
    }

    /// Handles every record in the ring; returns how many.
    fn drain(&mut self) -> usize {
        let mut records = 0;
        loop {
            let state = &mut self.state;
            let mut to_judge = None;
            records += self.ring.drain_while(|record| {
                to_judge = state.read_long_argv(record);
                if to_judge.is_none() {
                    state.handle(record);
                }
                to_judge.is_none()
            });
            let Some(j) = to_judge else { break };
            // The record stays at the head of the ring: the records behind it are what the
            // judgement looks at; the next round hands it to `handle` with the verdict.
            let judged = self.judge_argv(j);
            self.state.judged = Some(judged);
        }
        records
    }

    /// Whether a larger-than-copied argv read from /proc is the record's image's (see
    /// `track::argv_check`): where the process is, then the records written behind its
    /// exec's, then whether the kernel dropped any.
    fn judge_argv(&mut self, j: ToJudge) -> Judged {
        let Judged::Argv(argv) = j.argv else {
            return j.argv;
        };
        let dropped_before = self.drops();
        let ring = &self.ring;
        let state = &mut self.state;
        let counters = &self.counters;
        let verdict = argv_check::judge(j.read_start_ns, |wait| {
            std::thread::sleep(wait);
            let probe = Probe::of(state.tree.procfs.syscall(j.tgid).ok().flatten());
            let mut first = None;
            let mut head = true;
            ring.peek(|record| {
                if std::mem::take(&mut head) {
                    return true; // the exec being judged
                }
                first = later_of(j.tgid, record, state.timed);
                first.is_none()
            });
            if drops(counters) > dropped_before {
                first = Some(Later::Lost);
            }
            (probe, first)
        });
        match verdict {
            Verdict::Keep => Judged::Argv(argv),
            _ => Judged::Doubt,
        }
    }

    fn drops(&self) -> u64 {
        drops(&self.counters)
    }

    /// Reports records the kernel could not queue and new tasks it could not mark (so did not
    /// follow), and rebuilds the tree from /proc.
    fn check_drops(&mut self) {
        let now = self.drops();
        if now <= self.dropped {
            return;
        }
        let lost = now - self.dropped;
        self.dropped = now;
        self.drain();
        let zombies = self.state.tree.recover(1, lost);
        self.state.deferred_leaders.extend(zombies);
    }
}

/// Records the kernel could not queue, and new tasks it could not mark, so far.
fn drops(counters: &Array<u64>) -> u64 {
    read_counter(counters, CNT_DROPPED) + read_counter(counters, CNT_UNTRACKED)
}

/// What a record written after an exec of `tgid` says of that exec's argv read (see
/// `track::argv_check`): another exec of the process, or its end.
fn later_of(tgid: i32, record: &[u8], timed: bool) -> Option<Later> {
    match decode(record, timed)? {
        Record::Exec { tgid: t, .. } if t == tgid => Some(Later::Exec),
        Record::Exit {
            tgid: t,
            ts,
            group_dead: true,
            ..
        } if t == tgid => Some(Later::Exit {
            ts_ns: ts,
            last: true,
        }),
        _ => None,
    }
}

/// One ring-buffer record, decoded (layouts: `bpf/ste.bpf.c`).
#[derive(Debug, PartialEq)]
enum Record<'a> {
    Fork {
        parent_tgid: i32,
        child_tid: i32,
        child_tgid: i32,
        ts: u64,
    },
    Exec {
        tgid: i32,
        former_tid: i32,
        ts: u64,
        argv: &'a [u8],
        /// The argument area was larger than the kernel copied.
        truncated: bool,
        /// The argument area's size.
        total: u64,
    },
    Exit {
        tid: i32,
        tgid: i32,
        ts: u64,
        /// The wait status of the process, when this was its last thread.
        status: Option<i32>,
        /// VmHWM in pages, when this was the last thread and its memory was still attached.
        hiwater_pages: Option<u64>,
        group_dead: bool,
    },
    Calls {
        tgid: i32,
        calls: Vec<CallCount>,
    },
}

/// A call counter of the kernel's arrays as a model count (`idx`: nr, or 512 + nr for compat).
fn call_count(idx: u32, calls: u64, errors: u64, ns: u64, max_ns: u64, timed: bool) -> CallCount {
    CallCount {
        nr: idx % (NIDX / 2),
        compat: idx >= NIDX / 2,
        calls,
        errors,
        total_ns: timed.then_some(ns),
        max_ns: timed.then_some(max_ns),
    }
}

fn decode(b: &[u8], timed: bool) -> Option<Record<'_>> {
    match u32_at(b, 0)? {
        EV_FORK => Some(Record::Fork {
            parent_tgid: i32_at(b, 4)?,
            child_tid: i32_at(b, 8)?,
            child_tgid: i32_at(b, 12)?,
            ts: u64_at(b, 16)?,
        }),
        EV_EXEC => {
            let len = u32_at(b, 12)? as usize;
            let total = u64_at(b, 24)?;
            Some(Record::Exec {
                tgid: i32_at(b, 4)?,
                former_tid: i32_at(b, 8)?,
                ts: u64_at(b, 16)?,
                argv: b.get(32..32 + len)?,
                truncated: total > len as u64,
                total,
            })
        }
        EV_EXIT => {
            let flags = u32_at(b, 12)?;
            let group_dead = flags & EXIT_GROUP_DEAD != 0;
            Some(Record::Exit {
                tid: i32_at(b, 4)?,
                tgid: i32_at(b, 8)?,
                ts: u64_at(b, 16)?,
                status: group_dead.then_some(i32_at(b, 24)?),
                hiwater_pages: (group_dead && flags & EXIT_HAS_MM != 0).then_some(u64_at(b, 32)?),
                group_dead,
            })
        }
        EV_CALLS => {
            let n = u32_at(b, 12)? as usize;
            let calls = (0..n)
                .map(|i| {
                    let e = 24 + i * 40;
                    Some(call_count(
                        u32_at(b, e)?,
                        u64_at(b, e + 8)?,
                        u64_at(b, e + 16)?,
                        u64_at(b, e + 24)?,
                        u64_at(b, e + 32)?,
                        timed,
                    ))
                })
                .collect::<Option<Vec<_>>>()?;
            Some(Record::Calls {
                tgid: i32_at(b, 8)?,
                calls,
            })
        }
        _ => None,
    }
}

impl State {
    /// An exec record of the tree whose argument area was larger than the kernel's copy and
    /// that is not judged yet: read it whole from /proc now, to be judged.
    fn read_long_argv(&mut self, bytes: &[u8]) -> Option<ToJudge> {
        let Some(Record::Exec {
            tgid,
            argv,
            truncated: true,
            total,
            ..
        }) = decode(bytes, self.timed)
        else {
            return None;
        };
        if self.judged.is_some() || !self.tree.has_process(tgid) {
            return None;
        }
        // One read of the whole area (one image), which must be as long as the record says
        // and begin with what the kernel copied.
        let read_start_ns = crate::bus::sink::monotonic_ns();
        let read = self.tree.procfs.cmdline_whole(tgid);
        let argv = match read {
            Ok(b) if b.len() as u64 == total && b.starts_with(argv) => {
                Judged::Argv(from_kernel::argv(parse_cmdline(b)))
            }
            Ok(b) if !b.is_empty() => Judged::Doubt,
            _ => Judged::Unread,
        };
        Some(ToJudge {
            tgid,
            argv,
            read_start_ns,
        })
    }

    fn handle(&mut self, bytes: &[u8]) {
        let Some(rec) = decode(bytes, self.timed) else {
            return;
        };
        let clock = self.tree.sink.clock();
        match rec {
            Record::Fork {
                parent_tgid,
                child_tid,
                child_tgid,
                ts,
            } => {
                let t = clock.from_monotonic(ts);
                if child_tid == child_tgid {
                    self.tree.add_process(t, parent_tgid, child_tid);
                } else {
                    self.tree.add_thread(t, child_tgid, child_tid);
                }
            }
            Record::Exec {
                tgid,
                former_tid,
                ts,
                argv,
                truncated,
                ..
            } => {
                if self.tree.exec(tgid).is_none() {
                    return;
                }
                self.deferred_leaders.remove(&tgid);
                let t = clock.from_monotonic(ts);
                let (argv, doubtful) = match (truncated, self.judged.take()) {
                    // Larger than the kernel copies: read whole from /proc and judged.
                    (true, Some(Judged::Argv(argv))) => (Some(argv), false),
                    (true, Some(Judged::Unread)) => (None, false),
                    (true, _) => (None, true),
                    (false, _) => (
                        Some(from_kernel::argv(parse_cmdline(argv))).filter(|a| !a.is_empty()),
                        false,
                    ),
                };
                self.tree.emit_at(
                    t,
                    Event::Exec {
                        tgid,
                        former_tid,
                        argv,
                    },
                );
                if doubtful {
                    self.tree.emit_at(t, argv_check::doubt());
                }
            }
            Record::Exit {
                tid,
                tgid,
                ts,
                status,
                hiwater_pages,
                group_dead,
            } => {
                let t = clock.from_monotonic(ts);
                if !group_dead {
                    if tid == tgid && self.tree.threads(tgid) > 1 {
                        self.deferred_leaders.insert(tgid);
                    } else {
                        self.tree.exit(t, tid, None);
                    }
                    return;
                }
                self.accounts(t, tgid, hiwater_pages);
                let status = status.and_then(Termination::from_wait_status);
                self.tree
                    .exit(t, tid, if tid == tgid { status } else { None });
                if tid != tgid && self.deferred_leaders.remove(&tgid) {
                    self.tree.exit(t, tgid, status);
                }
            }
            Record::Calls { tgid, calls } => {
                if self.tree.has_process(tgid) {
                    self.tree.emit(Event::SyscallsOf { tgid, calls });
                }
            }
        }
    }

    /// The peak RSS of a process that just ended, read in the kernel; on a kernel that traces
    /// the exit after the memory is gone, the sampler reads peaks from then on.
    fn accounts(&mut self, t: u64, tgid: i32, hiwater_pages: Option<u64>) {
        match hiwater_pages {
            Some(pages) => {
                let bytes = pages * self.page_size;
                self.tree.emit(Event::Accounts {
                    tgid,
                    peak_rss_bytes: Some(bytes),
                    io: None,
                });
                // Growth after the sampler's last read of it may have made the tree's peak.
                self.tree.sampler.exit_peak(tgid, t, bytes);
            }
            None if self.peaks_from_exit => {
                self.peaks_from_exit = false;
                self.tree.sampler.read_peaks();
                self.tree.emit(Event::Note {
                    text: "this kernel traces a process's exit after its memory is released (before Linux 6.16): peak RSS is sampled instead".into(),
                });
            }
            None => {}
        }
    }
}

/// The kernel's system-call maps, read when the run is over.
struct BpfSyscalls {
    mode: Mode,
    maps: Mutex<SyscallMaps>,
}

struct SyscallMaps {
    totals: PerCpuArray<Total>,
    errnos: Hash<ErrnoKey, u64>,
    counters: Array<u64>,
}

impl syscalls::Source for BpfSyscalls {
    fn summary(&self) -> Syscalls {
        let maps = self.maps.lock().expect("syscall maps lock");
        let mut counts = Counts::new();
        for idx in 0..NIDX {
            let per_cpu = match maps.totals.get(idx) {
                Ok(v) => v,
                Err(e) => {
                    unreadable(&format!("system-call totals #{idx}"), "left out", &e);
                    continue;
                }
            };
            let mut t = Total::default();
            for v in per_cpu.iter() {
                t.calls += v.calls;
                t.errors += v.errors;
                t.ns += v.ns;
                t.max_ns = t.max_ns.max(v.max_ns);
            }
            if t.calls > 0 {
                let c = call_count(idx, t.calls, t.errors, t.ns, t.max_ns, self.mode.timed());
                counts.insert((c.compat, c.nr), c);
            }
        }
        let mut errnos = Errnos::new();
        for item in maps.errnos.iter() {
            let (k, n) = match item {
                Ok(kv) => kv,
                Err(e) => {
                    unreadable("an entry of the errno counts", "left out", &e);
                    continue;
                }
            };
            let c = call_count(k.idx, 0, 0, 0, 0, false);
            errnos.insert((c.compat, c.nr, k.err), n);
        }
        let uncounted = Uncounted {
            bad_numbers: read_counter(&maps.counters, CNT_BAD_NR),
            errno_unclassified: read_counter(&maps.counters, CNT_ERRNO_FULL),
            per_process_missing: 0,
        };
        syscalls::summarize("ebpf", self.mode, &counts, &errnos, uncounted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(words: &[(usize, u64)], len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        for &(off, v) in words {
            b[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        }
        b
    }

    #[test]
    fn decodes_each_record_kind() {
        let mut fork = bytes(&[(16, 99)], 24);
        fork[0..4].copy_from_slice(&EV_FORK.to_ne_bytes());
        fork[4..8].copy_from_slice(&10i32.to_ne_bytes());
        fork[8..12].copy_from_slice(&11i32.to_ne_bytes());
        fork[12..16].copy_from_slice(&11i32.to_ne_bytes());
        assert_eq!(
            decode(&fork, false),
            Some(Record::Fork {
                parent_tgid: 10,
                child_tid: 11,
                child_tgid: 11,
                ts: 99
            })
        );

        let mut exec = bytes(&[(16, 5), (24, 10)], 32);
        exec[0..4].copy_from_slice(&EV_EXEC.to_ne_bytes());
        exec[4..8].copy_from_slice(&11i32.to_ne_bytes());
        exec[8..12].copy_from_slice(&12i32.to_ne_bytes());
        exec[12..16].copy_from_slice(&8u32.to_ne_bytes());
        exec.extend_from_slice(b"ls\0-l\0/\0");
        assert_eq!(
            decode(&exec, false),
            Some(Record::Exec {
                tgid: 11,
                former_tid: 12,
                ts: 5,
                argv: b"ls\0-l\0/\0",
                truncated: true,
                total: 10
            })
        );

        let mut exit = bytes(&[(16, 7), (32, 300)], 40);
        exit[0..4].copy_from_slice(&EV_EXIT.to_ne_bytes());
        exit[4..8].copy_from_slice(&11i32.to_ne_bytes());
        exit[8..12].copy_from_slice(&11i32.to_ne_bytes());
        exit[12..16].copy_from_slice(&(EXIT_GROUP_DEAD | EXIT_HAS_MM).to_ne_bytes());
        exit[24..28].copy_from_slice(&(3i32 << 8).to_ne_bytes());
        assert_eq!(
            decode(&exit, false),
            Some(Record::Exit {
                tid: 11,
                tgid: 11,
                ts: 7,
                status: Some(3 << 8),
                hiwater_pages: Some(300),
                group_dead: true
            })
        );
        exit[12..16].copy_from_slice(&0u32.to_ne_bytes());
        assert!(matches!(
            decode(&exit, false),
            Some(Record::Exit {
                status: None,
                hiwater_pages: None,
                group_dead: false,
                ..
            })
        ));

        let mut calls = bytes(&[(16, 1)], 24);
        calls[0..4].copy_from_slice(&EV_CALLS.to_ne_bytes());
        calls[8..12].copy_from_slice(&11i32.to_ne_bytes());
        calls[12..16].copy_from_slice(&2u32.to_ne_bytes());
        for (idx, n) in [(110u32, 5u64), (512 + 20, 1)] {
            let mut e = bytes(&[(8, n), (16, 0), (24, 50), (32, 20)], 40);
            e[0..4].copy_from_slice(&idx.to_ne_bytes());
            calls.extend_from_slice(&e);
        }
        let Some(Record::Calls { tgid, calls: got }) = decode(&calls, true) else {
            panic!("calls record not decoded");
        };
        assert_eq!(tgid, 11);
        assert_eq!((got[0].nr, got[0].compat, got[0].calls), (110, false, 5));
        assert_eq!((got[1].nr, got[1].compat), (20, true));
        assert_eq!(got[1].total_ns, Some(50));
        // A truncated record is refused rather than misread.
        assert_eq!(decode(&calls[..70], true), None);
    }
}
