//! Loading the BPF object before the command is released: the embedded object, the
//! kernel-structure offsets taken from the kernel's BTF, the programs attached for the run's
//! configuration (and uprobes on the SDT sites), the ring buffer mapped, and the reasons it
//! cannot load, said plainly.
//!
//! Owns what the object is loaded with; the loading itself is `kernel::bpf`'s. Must not read
//! records: the reader does, once `start` registers the root.

use super::*;
use crate::kernel::release::Version;

/// The object, aligned for the ELF parser.
#[repr(C, align(8))]
pub(super) struct Aligned<T: ?Sized>(T);
pub(super) static OBJECT: &Aligned<[u8]> = &Aligned(*include_bytes!("../../../../bpf/ste.bpf.o"));

/// The kernel's BTF, unless `STE_KERNEL_BTF` names another file: a diagnostic knob (the tests
/// check that a corrupt or foreign blob is refused clearly); any other file than the running
/// kernel's BTF is wrong, as the tracepoints' ids are the kernel's own.
pub(super) const VMLINUX: &str = "/sys/kernel/btf/vmlinux";

/// What the tracker is asked to do besides following the tree.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    pub syscalls: Option<Mode>,
    /// Whether the per-process ledger is kept: each task's CPU is then read at its last
    /// switch (`handle_last_switch`).
    pub ledger: bool,
}

/// The object loaded, its programs attached and its ring buffer mapped, before the command is
/// released: loading (the verifier checks each program) takes a few milliseconds, which must
/// not count as the command's time. Nothing is followed until [`start`] registers the root.
pub struct Loaded {
    pub(super) ebpf: Bpf,
    /// The `events` ring buffer, mapped.
    pub(super) ring: RingBuf,
    pub(super) config: Config,
    /// The SDT probe sites, each marked attached or not.
    pub(super) sdt: Option<Plan>,
    /// Whether the last-switch program reads each task's whole ledger (with `config.ledger`,
    /// when the kernel's BTF has every field of it: [`FIGURES`]).
    pub(super) figures: bool,
}

/// Loads the object and attaches what `config` needs (and uprobes on the sites of `sdt`), or
/// says why it cannot. An SDT site that cannot be attached is marked so, not an error.
/// `maps_made` is called once the maps exist, before any program is loaded: the session
/// registers the root in `tasks` then, while the programs load (see `track::Loading`).
pub fn load(
    config: Config,
    mut sdt: Option<Plan>,
    maps_made: impl FnOnce(&Bpf),
) -> Result<Loaded, String> {
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
    let mut with_sdt = sdt.as_ref().is_some_and(|p| !p.sites.is_empty());
    let version = Version::running();
    if with_sdt && !version.bpf_uprobe_cookie() {
        // One program for every site, told which by its attach cookie: Linux 5.15.
        with_sdt = false;
        for o in sdt
            .iter_mut()
            .flat_map(|p| &mut p.objects)
            .filter(|o| o.found > 0)
        {
            o.not_attached.push(format!(
                "the uprobe program: it tells the sites apart by BPF attach cookies, which need Linux 5.15 (this is {version})"
            ));
        }
    }
    let (mut ebpf, ring, figures) =
        load_object(config, with_sdt, maps_made).map_err(|e| explain(&e))?;
    if let Some(plan) = sdt.as_mut().filter(|p| with_sdt && !p.sites.is_empty())
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
        figures,
    })
}

/// The kernel-structure offsets the BPF object reads at (`off_*` and `size_*` in
/// `bpf/ste.bpf.c`), from the kernel's BTF; with `direct_status` (the task-storage system-call
/// programs, which read `thread_info.status` directly), also the check that it is where they
/// read it.
pub(super) fn layout(btf: &Btf, direct_status: bool) -> Result<Vec<(&'static str, u32)>, String> {
    let names = [
        "task_struct",
        "signal_struct",
        "mm_struct",
        "thread_info",
        "task_delay_info",
    ];
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
    // mm_struct.rss_stat, indexed by MM_FILEPAGES etc. (< 4): from Linux 6.2 an array of
    // percpu_counter (its `count`), before a struct mm_rss_stat holding an array of
    // atomic_long_t (its `counter`). Either way, the program reads element i at
    // rss_stat + i * size + the count's offset in the element.
    let (mut rss_stat, stat_ty) = btf.offset_of(mm, "rss_stat").map_err(|e| e.to_string())?;
    let stat = btf
        .resolve(stat_ty)
        .and_then(|t| btf.get(t))
        .map_err(|e| e.to_string())?;
    let (counter, count_field) = match btf.array(&stat) {
        Some((elem, n)) if n >= 4 => (elem, "count"),
        Some(_) => return Err("`mm_struct.rss_stat` has fewer than 4 counters".into()),
        None => {
            let (at, arr) = btf
                .offset_of(btf.resolve(stat_ty).map_err(|e| e.to_string())?, "count")
                .map_err(|_| {
                    "`mm_struct.rss_stat` is neither an array of counters nor a struct mm_rss_stat"
                        .to_string()
                })?;
            let arr = btf
                .resolve(arr)
                .and_then(|t| btf.get(t))
                .map_err(|e| e.to_string())?;
            let (elem, n) = btf
                .array(&arr)
                .filter(|&(_, n)| n >= 4)
                .ok_or("`mm_rss_stat.count` is not an array of at least 4 counters")?;
            let _ = n;
            rss_stat += at;
            (elem, "counter")
        }
    };
    let counter_size = btf.size_of(counter).map_err(|e| e.to_string())?;
    // The task's state: `__state` (an unsigned int) from Linux 5.14, `state` (a long, whose
    // low half holds the flags) before.
    let state = field(task, "__state", 4).or_else(|_| field(task, "state", 8))?;
    let thread_info = id(3)?;
    let ti_at = field(task, "thread_info", btf.size_of(thread_info).unwrap_or(0))?;
    let ti_status = ti_at + field(thread_info, "status", 4)?;
    let mut out = vec![
        ("off_task_pid", field(task, "pid", 4)?),
        ("off_task_tgid", field(task, "tgid", 4)?),
        ("off_task_exit_code", field(task, "exit_code", 4)?),
        ("off_task_mm", field(task, "mm", 8)?),
        ("off_task_signal", field(task, "signal", 8)?),
        ("off_task_group_leader", field(task, "group_leader", 8)?),
        ("off_task_runtime", field(task, "se.sum_exec_runtime", 8)?),
        ("off_task_utime", field(task, "utime", 8)?),
        ("off_task_stime", field(task, "stime", 8)?),
        ("off_signal_live", field(signal, "live.counter", 4)?),
        (
            "off_signal_group_exit_code",
            field(signal, "group_exit_code", 4)?,
        ),
        ("off_signal_flags", field(signal, "flags", 4)?),
        ("off_mm_hiwater_rss", field(mm, "hiwater_rss", 8)?),
        ("off_mm_hiwater_vm", field(mm, "hiwater_vm", 8)?),
        ("off_mm_total_vm", field(mm, "total_vm", 8)?),
        ("off_mm_arg_start", field(mm, "arg_start", 8)?),
        ("off_mm_arg_end", field(mm, "arg_end", 8)?),
        ("off_mm_rss_stat", rss_stat as u32),
        ("size_percpu_counter", counter_size as u32),
        ("off_percpu_counter_count", field(counter, count_field, 8)?),
        ("off_task_state", state),
        ("off_task_ti_status", ti_status),
    ];
    // The rest of a task's ledger, read at its last switch: all of it or none (then taskstats
    // gives it), as a kernel built without delay or I/O accounting lacks some.
    let figures = ids[4]
        .ok_or_else(|| "it has no `struct task_delay_info`".to_string())
        .and_then(|delays| {
            Ok(vec![
                (
                    "off_task_run_delay",
                    field(task, "sched_info.run_delay", 8)?,
                ),
                ("off_task_nvcsw", field(task, "nvcsw", 8)?),
                ("off_task_nivcsw", field(task, "nivcsw", 8)?),
                ("off_task_min_flt", field(task, "min_flt", 8)?),
                ("off_task_maj_flt", field(task, "maj_flt", 8)?),
                ("off_task_rchar", field(task, "ioac.rchar", 8)?),
                ("off_task_wchar", field(task, "ioac.wchar", 8)?),
                ("off_task_read_bytes", field(task, "ioac.read_bytes", 8)?),
                ("off_task_write_bytes", field(task, "ioac.write_bytes", 8)?),
                ("off_task_delays", field(task, "delays", 8)?),
                ("off_delays_blkio", field(delays, "blkio_delay", 8)?),
                ("off_delays_swapin", field(delays, "swapin_delay", 8)?),
                ("off_delays_freepages", field(delays, "freepages_delay", 8)?),
                ("off_delays_thrashing", field(delays, "thrashing_delay", 8)?),
                ("off_delays_compact", field(delays, "compact_delay", 8)?),
            ])
        });
    match figures {
        Ok(f) => {
            out.extend(f);
            out.push((FIGURES, 1));
        }
        Err(_) => out.push((FIGURES, 0)),
    }
    if direct_status && ti_status != 16 {
        // thread_info first in task_struct (CONFIG_THREAD_INFO_IN_TASK), status at 16 (from
        // Linux 5.11): the layout bpf/ste.bpf.c declares, read directly on every system call.
        return Err(format!(
            "`task_struct.thread_info.status` is at byte {ti_status} of task_struct, not 16 as ste's system-call programs read it"
        ));
    }
    Ok(out)
}

/// The switch in the layout that has the last-switch program read a task's whole ledger
/// (`cfg_figures` in `bpf/ste.bpf.c`): 1 when the kernel's BTF has every field of it.
pub(super) const FIGURES: &str = "cfg_figures";

/// The ring buffer's size. Its pages are allocated, zeroed and charged when it is created, and
/// mapped (once: `kernel::bpf::ringbuf`) when ste maps it, all before the command starts, so
/// start-up grows with it. A record that does not fit is counted, reported as lost, and the
/// tree rebuilt from /proc, but the execs it carried are gone: the size must hold the records
/// that arrive while the reader is away. A fork storm never had more than a few KB waiting; a
/// burst of execs with long argv (up to 256 KiB each, copied whole) fills a ring within one
/// batch of the reader's sleep, so a record that takes the data waiting past a quarter of the
/// ring wakes the reader (`wake_flags` in the BPF source): it then needs to be back before the
/// other three quarters fill, not before the end of its sleep. The test
/// `ebpf_loses_no_exec_in_a_burst_of_long_argv` holds this size to that (bench/README.md has
/// the figures).
pub(super) const RING_BYTES: u32 = 1 << 20;

/// Which of the programs' variants the running kernel takes (`bpf/ste.bpf.c`), told by its
/// version (`kernel::release`): the maps must be made before the kernel's BTF is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Flavour {
    /// The tree in task-local storage (Linux 5.12+). `prev_state`: the sched_switch
    /// tracepoint passes the task's state (5.18+); else the last-switch program reads it.
    Storage { prev_state: bool },
    /// The tree in a hash keyed by the task's address (the `_h` programs, before 5.12).
    Hash,
}

impl Flavour {
    pub(super) fn of(v: Version) -> Flavour {
        if v.bpf_task_storage() {
            Flavour::Storage {
                prev_state: v.sched_switch_prev_state(),
            }
        } else {
            Flavour::Hash
        }
    }

    /// The name of program `base`'s variant.
    pub(super) fn program(self, base: &str) -> String {
        match self {
            Flavour::Hash => format!("{base}_h"),
            Flavour::Storage { prev_state: false } if base == "handle_last_switch" => {
                format!("{base}_s")
            }
            Flavour::Storage { .. } => base.to_string(),
        }
    }
}

/// What the kernel's BTF tells the loader: the offsets to set and the tracepoints' ids.
pub(super) struct FromBtf {
    pub(super) layout: Vec<(String, u32)>,
    pub(super) tracepoint_ids: Vec<u32>,
}

/// [`from_btf`]'s answer, as an earlier run of this binary since boot was given it when it is
/// kept (`btf_cache`), else walked and kept for the next run. Not with `STE_KERNEL_BTF`
/// (another BTF than the kernel's) or as another user than root (the file is root's).
pub(super) fn btf_answers<S: AsRef<str>>(
    syscalls: bool,
    tracepoints: &[S],
) -> Result<FromBtf, String> {
    let key = (std::env::var_os("STE_KERNEL_BTF").is_none() && crate::kernel::calls::is_root())
        .then(|| btf_cache::Key::current(syscalls, tracepoints))
        .flatten();
    if let Some(key) = &key
        && let Some(kept) = crate::bus::phases::span("bpf: kernel BTF, as kept", || {
            btf_cache::read(std::path::Path::new(btf_cache::DIR), key)
        })
    {
        return Ok(kept);
    }
    let walked = crate::bus::phases::span("bpf: kernel BTF", || from_btf(syscalls, tracepoints))?;
    if let Some(key) = &key {
        let _ = btf_cache::write(std::path::Path::new(btf_cache::DIR), key, &walked);
    }
    Ok(walked)
}

/// Reads the kernel's BTF (mapped where the kernel allows it) for `layout` and the ids of
/// `tracepoints`.
pub(super) fn from_btf<S: AsRef<str>>(
    syscalls: bool,
    tracepoints: &[S],
) -> Result<FromBtf, String> {
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
        layout: layout
            .into_iter()
            .map(|(n, v)| (n.to_string(), v))
            .collect(),
        tracepoint_ids,
    })
}

/// Loads the object and attaches what `config` needs (and creates what the uprobe program
/// needs, `with_sdt`), and maps the ring buffer; calls `maps_made` once the maps exist.
/// Detaches on drop. The flag says whether the last switches carry each task's whole ledger
/// (`Loaded::figures`).
pub(super) fn load_object(
    config: Config,
    with_sdt: bool,
    maps_made: impl FnOnce(&Bpf),
) -> Result<(Bpf, RingBuf, bool), String> {
    let timed: u32 = config.syscalls.is_some_and(Mode::timed).into();
    let per_thread: u32 = config.syscalls.is_some_and(Mode::per_process).into();
    let sigreturn = syscalls::native_nr("rt_sigreturn").unwrap_or(u32::MAX);
    let flavour = Flavour::of(Version::running());
    let mut programs = vec![
        flavour.program("handle_fork"),
        flavour.program("handle_exec"),
        flavour.program("handle_exit"),
    ];
    if config.ledger {
        programs.push(flavour.program("handle_last_switch"));
    }
    if config.syscalls.is_some() {
        programs.push(flavour.program("sys_exit"));
    }
    if timed == 1 {
        programs.push(flavour.program("sys_enter"));
    }
    let programs: Vec<&str> = programs.iter().map(String::as_str).collect();
    let obj = Object::parse_only(&OBJECT.0, |p| {
        programs.contains(&p) || (with_sdt && p == "sdt_memory")
    })
    .map_err(|e| e.to_string())?;
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
    // The ring buffer's map is most of the maps' cost (the kernel zeroes its pages as it
    // makes it): made after the others, once the session can register the command in
    // `tasks` (`maps_made`).
    let ring_plan = loader.leave("events");
    let mut maps_for = programs.clone();
    if with_sdt {
        maps_for.push("sdt_memory");
    }
    // Side by side, on this thread and one helper started on another CPU: the helper walks
    // the kernel's BTF (or reads what an earlier run kept), while this thread has the kernel
    // make the maps, the ring buffer's last; both then load and attach the programs in turn.
    // The helper starts on the session's CPU, busy meanwhile with the fork and the
    // accounting's set-up, so it runs only once the session waits: when it made the ring
    // buffer's map, this thread waited for it with its own CPU idle, and the programs began
    // ~0.3 ms later (bench/README.md). Mapping the ring buffer goes to whichever thread is
    // free first: this one, when the helper is still walking the BTF once the maps exist (it
    // would only wait), or else the first to run out of programs. One helper for all of it,
    // rather than a thread a job: starting a thread costs ~0.05 ms here, and up to ~1 ms
    // when several threads map memory at once (each waits for the others' hold on ste's
    // memory map).
    let want: Vec<String> = typed.iter().map(|t| t.to_string()).collect();
    // Whether the system-call programs read thread_info.status directly (at byte 16).
    let with_syscalls = config.syscalls.is_some() && flavour != Flavour::Hash;
    let (btf_tx, btf_rx) = mpsc::channel();
    let (work_tx, work_rx) = mpsc::channel::<(Arc<Tracepoints>, Arc<RingJob>)>();
    let (done_tx, done_rx) = mpsc::sync_channel(1);
    let helper = spawn_elsewhere("ste-bpf-helper", move || {
        let btf = btf_answers(with_syscalls, &want);
        let _ = btf_tx.send(btf);
        // No work when the loading stopped short: its error says why.
        let Ok((tracepoints, ring)) = work_rx.recv() else {
            return;
        };
        let turns = tracepoints.take_turns();
        // Said before the thread ends: this thread's exit is not waited for.
        let _ = done_tx.send((turns, ring.take()));
    })
    .ok();
    let created = crate::bus::phases::span("bpf: create maps", || loader.create_maps(&maps_for));
    if let Ok(c) = &created {
        maps_made(c);
    }
    let created = created.and_then(|mut c| {
        if let Some(plan) = &ring_plan {
            let made = crate::bus::phases::span("bpf: create ring", || plan.create());
            c.put_map(made?)?;
        }
        Ok(c)
    });
    let ring_job = Arc::new(RingJob(Mutex::new(
        created.as_ref().ok().and_then(|c| c.map("events").ok()),
    )));
    let mut ring = None;
    let walked = match helper.as_ref().map(|_| btf_rx.try_recv()) {
        Some(Ok(btf)) => Some(btf),
        Some(Err(mpsc::TryRecvError::Empty)) => {
            ring = ring_job.take();
            None
        }
        _ => None,
    };
    // The BTF's error first, as when the two ran in turn: it says what this kernel lacks.
    let btf = match (&helper, walked.map_or_else(|| btf_rx.recv(), Ok)) {
        (Some(_), Ok(btf)) => btf?,
        _ => btf_answers(with_syscalls, &typed)?,
    };
    let mut ebpf = created.map_err(|e| e.to_string())?;
    let figures = config.ledger
        && btf
            .layout
            .iter()
            .any(|(name, value)| name == FIGURES && *value == 1);
    for (name, value) in &btf.layout {
        ebpf.set_global(name, value).map_err(|e| e.to_string())?;
    }
    let ledger: u32 = config.ledger.into();
    ebpf.set_global("cfg_timed", &timed)
        .and_then(|l| l.set_global("cfg_per_thread", &per_thread))
        .and_then(|l| l.set_global("cfg_sigreturn_nr", &sigreturn))
        .and_then(|l| l.set_global("cfg_ledger", &ledger))
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
    let work = Arc::new(ebpf.tracepoints(&attach).map_err(|e| e.to_string())?);
    let helped = helper.is_some()
        && work_tx
            .send((Arc::clone(&work), Arc::clone(&ring_job)))
            .is_ok();
    let mine = crate::bus::phases::span("bpf: load+attach programs", || work.take_turns());
    ring = ring.or_else(|| ring_job.take());
    // The helper's word, not its end: joining it waited for its exit too.
    let theirs = match helper.filter(|_| helped).map(|h| (done_rx.recv(), h)) {
        Some((Ok((theirs, their_ring)), _)) => {
            ring = ring.or(their_ring);
            Some(theirs)
        }
        // It ended without a word: its panic goes on here.
        Some((Err(_), h)) => {
            joined(h);
            None
        }
        None => None,
    };
    let ring = match ring {
        Some(ring) => ring,
        // Not created: the map's own error says why.
        None => ebpf
            .map("events")
            .map_err(|e| std::io::Error::other(e.to_string()))
            .and_then(RingBuf::new),
    };
    ebpf.attached(&work, std::iter::once(mine).chain(theirs))
        .map_err(|e| e.to_string())?;
    let ring = ring.map_err(|e| format!("mapping the ring buffer: {e}"))?;
    Ok((ebpf, ring, figures))
}

/// The ring buffer's map until a thread takes it to map it.
struct RingJob(Mutex<Option<Map>>);

impl RingJob {
    /// Maps the ring buffer, unless another thread took the job.
    fn take(&self) -> Option<std::io::Result<RingBuf>> {
        let map = self.0.lock().ok()?.take()?;
        Some(crate::bus::phases::span("bpf: map ring", || {
            RingBuf::new(map)
        }))
    }
}

/// The result of a helper thread (a panic goes on in the caller).
pub(super) fn joined<T>(h: std::thread::JoinHandle<T>) -> T {
    h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
}

/// Writes each site's spec to `sdt_sites` (the cookie indexes it), loads the uprobe program and
/// attaches it at every site; a site that cannot be attached is marked with why.
pub(super) fn attach_sdt(ebpf: &mut Bpf, plan: &mut Plan) -> Result<(), String> {
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
    sdt::test_hook_before_attach();
    // Through the descriptor each object's notes were read from: the file parsed, whatever
    // its path names by now.
    let paths: Vec<Result<std::path::PathBuf, String>> = objects
        .iter_mut()
        .enumerate()
        .map(|(k, o)| {
            if !sites.iter().any(|s| s.object == k) {
                return Err(String::new());
            }
            let path = o
                .image
                .as_ref()
                .ok_or_else(|| "it was not opened".to_string())
                .and_then(sdt::Image::attach_path);
            if let Err(e) = &path {
                o.not_attached.push(format!("its uprobes: {e}"));
            }
            path
        })
        .collect();
    for (i, site) in sites.iter_mut().enumerate() {
        let object = &mut objects[site.object];
        let Ok(path) = &paths[site.object] else {
            continue;
        };
        match ebpf.attach_uprobe(prog, path, site.file_offset, i as u64) {
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
pub(super) fn explain(text: &str) -> String {
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
pub(super) fn unprivileged_knob() -> String {
    std::fs::read_to_string("/proc/sys/kernel/unprivileged_bpf_disabled")
        .map(|s| format!("; kernel.unprivileged_bpf_disabled={}", s.trim()))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::bpf::btf::Writer;

    /// The types the layout reads, as a kernel of `version` lays them out: before 6.2
    /// `rss_stat` is a `struct mm_rss_stat` of atomic_long_t, from it an array of
    /// percpu_counter; before 5.14 the task's state is a long `state`; before 5.11
    /// `thread_info` is flags and status only (status at 8).
    fn kernel_btf(version: (u32, u32)) -> Vec<u8> {
        let mut w = Writer::new();
        let int = w.int("int", 4, true);
        let uint = w.int("unsigned int", 4, false);
        let long = w.int("long", 8, true);
        let u64_ = w.int("long long unsigned int", 8, false);
        let atomic = w.structure("atomic_t", 4, &[("counter", int, 0)]);
        let signal = w.structure(
            "signal_struct",
            64,
            &[
                ("live", atomic, 4),
                ("group_exit_code", int, 8),
                ("flags", uint, 12),
            ],
        );
        let stat_ty = if version >= (6, 2) {
            let pcc = w.structure("percpu_counter", 40, &[("count", long, 8)]);
            w.array(pcc, int, 4)
        } else {
            let atomic_long = w.structure("atomic_long_t", 8, &[("counter", long, 0)]);
            let arr = w.array(atomic_long, int, 4);
            w.structure("mm_rss_stat", 32, &[("count", arr, 0)])
        };
        let mm = w.structure(
            "mm_struct",
            512,
            &[
                ("hiwater_rss", u64_, 8),
                ("hiwater_vm", u64_, 16),
                ("total_vm", u64_, 24),
                ("arg_start", u64_, 32),
                ("arg_end", u64_, 40),
                ("rss_stat", stat_ty, 200),
            ],
        );
        let ti = if version >= (5, 11) {
            w.structure(
                "thread_info",
                24,
                &[
                    ("flags", u64_, 0),
                    ("syscall_work", u64_, 8),
                    ("status", uint, 16),
                ],
            )
        } else {
            w.structure(
                "thread_info",
                16,
                &[("flags", u64_, 0), ("status", uint, 8)],
            )
        };
        let se = w.structure("sched_entity", 64, &[("sum_exec_runtime", u64_, 16)]);
        let (mm_ptr, signal_ptr) = (w.pointer(mm), w.pointer(signal));
        let task_ptr = w.pointer(0);
        let state = if version >= (5, 14) {
            ("__state", uint, 24)
        } else {
            ("state", long, 24)
        };
        w.structure(
            "task_struct",
            4096,
            &[
                ("thread_info", ti, 0),
                state,
                ("se", se, 64),
                ("mm", mm_ptr, 200),
                ("exit_code", int, 208),
                ("pid", int, 212),
                ("tgid", int, 216),
                ("group_leader", task_ptr, 224),
                ("utime", u64_, 232),
                ("stime", u64_, 240),
                ("signal", signal_ptr, 248),
            ],
        );
        w.finish()
    }

    fn value(layout: &[(&str, u32)], name: &str) -> u32 {
        layout.iter().find(|(n, _)| *n == name).unwrap().1
    }

    #[test]
    fn every_kernel_layout_from_5_10_gives_its_offsets() {
        for (version, rss, size, count, state, status) in [
            // (kernel, rss_stat at, counter size, count in counter, state at, status at)
            ((5, 10), 200, 8, 0, 24, 8),
            ((6, 1), 200, 8, 0, 24, 16),
            ((6, 12), 200, 40, 8, 24, 16),
        ] {
            let blob = kernel_btf(version);
            let btf = Btf::parse(&blob).unwrap();
            let l = layout(&btf, false).unwrap_or_else(|e| panic!("{version:?}: {e}"));
            assert_eq!(value(&l, "off_mm_rss_stat"), rss, "{version:?}");
            assert_eq!(value(&l, "size_percpu_counter"), size, "{version:?}");
            assert_eq!(value(&l, "off_percpu_counter_count"), count, "{version:?}");
            assert_eq!(value(&l, "off_task_state"), state, "{version:?}");
            assert_eq!(value(&l, "off_task_ti_status"), status, "{version:?}");
            assert_eq!(value(&l, "off_task_runtime"), 64 + 16, "{version:?}");
            // No task_delay_info: the last switch reads the runtime alone.
            assert_eq!(value(&l, FIGURES), 0, "{version:?}");
            // The storage programs read the status directly at 16: refused where it is not.
            let direct = layout(&btf, true);
            assert_eq!(direct.is_ok(), status == 16, "{version:?}: {direct:?}");
        }
    }

    #[test]
    fn each_kernel_gets_the_programs_it_takes() {
        use crate::kernel::release::Version;
        let names = |v: Version| -> Vec<String> {
            ["handle_fork", "handle_last_switch", "sys_exit"]
                .iter()
                .map(|p| Flavour::of(v).program(p))
                .collect()
        };
        assert_eq!(
            names(Version(5, 10)),
            ["handle_fork_h", "handle_last_switch_h", "sys_exit_h"]
        );
        assert_eq!(
            names(Version(5, 15)),
            ["handle_fork", "handle_last_switch_s", "sys_exit"]
        );
        assert_eq!(
            names(Version(6, 18)),
            ["handle_fork", "handle_last_switch", "sys_exit"]
        );
        // Every variant is in the object, in its tracepoint's section.
        let obj = Object::parse(&OBJECT.0).unwrap();
        for v in [Version(5, 10), Version(5, 15), Version(6, 18)] {
            for (base, tracepoint) in [
                ("handle_fork", "sched_process_fork"),
                ("handle_exec", "sched_process_exec"),
                ("handle_exit", "sched_process_exit"),
                ("handle_last_switch", "sched_switch"),
                ("sys_enter", "sys_enter"),
                ("sys_exit", "sys_exit"),
            ] {
                let p = Flavour::of(v).program(base);
                let tp = obj.tracepoint(&p).unwrap_or_else(|| panic!("{p}"));
                assert_eq!(tp.name(), tracepoint, "{p}");
            }
        }
    }
}
