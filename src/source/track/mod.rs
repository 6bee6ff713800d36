//! Process trackers: each follows the command's whole tree through one kernel interface and
//! emits the same `Event` vocabulary (fork, exec, exit), so every tracker gives the same counts.
//!
//! Owns the choice of tracker and the fallback between them, and which tracker counts system
//! calls (`--syscalls`: the ebpf tracker in the kernel, or ptrace syscall stops when allowed).
//! A tracker is started while the command waits on the launch pipe, so it is registered before
//! the command's first instruction.

pub mod argv_check;
pub mod ebpf;
pub mod netlink;
pub mod ptrace;
mod ptrace_changed;
pub mod ptrace_syscalls;
pub mod reaper;
pub mod tree;

use crate::bus::event::Event;
use crate::bus::launched::Launched;
use crate::bus::sink::Sink;
use crate::bus::tree::TreeWatcher;
use crate::source::syscalls;
use std::sync::{Arc, mpsc};

/// How the tree is followed (`--tracker`, whose values `cli` maps to these).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrackerKind {
    /// sched tracepoints through BPF, argv read in the kernel; needs CAP_BPF and CAP_PERFMON.
    Ebpf,
    /// fork/exec/exit stops, no syscall stops; exact, needs no privilege.
    Ptrace,
    /// The proc connector: no stops; can lose events under fork storms (counted and reported).
    Netlink,
}

impl TrackerKind {
    pub fn name(self) -> &'static str {
        match self {
            TrackerKind::Ebpf => "ebpf",
            TrackerKind::Ptrace => "ptrace",
            TrackerKind::Netlink => "netlink",
        }
    }
}

/// `--syscalls` as asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyscallRequest {
    pub mode: syscalls::Mode,
    /// `--allow-ptrace`: without BPF, count with ptrace syscall stops (slow).
    pub allow_ptrace: bool,
}

/// The tracker that follows the tree, and the source of the system-call summary.
pub struct Started {
    pub kind: TrackerKind,
    pub syscalls: Option<Arc<dyn syscalls::Source>>,
    /// Whether the tracker reads each process's whole ledger (CPU, waits, faults, switches,
    /// I/O, peaks) as its tasks end, so that no taskstats records are needed: ebpf, when the
    /// kernel's BTF has every field it reads (`account::Session::declare` then ends taskstats's registration).
    pub whole_ledger: bool,
}

/// What a tracker's start returns: the system-call source, if it counts them.
type StartResult = Result<Option<Arc<dyn syscalls::Source>>, String>;

/// The ebpf tracker as the thread that loads it left it: loaded (or why not) and, once loaded,
/// started (or why not), when the choice of tracker may fall on ebpf.
pub struct Preloaded(Option<Ebpf>);

struct Ebpf {
    /// Whether the object loaded, the uprobes with it (`--malloc` says so before the run).
    loaded: Result<(), String>,
    /// The start on the loading thread, once loaded: taken by the tracker's choice.
    started: Option<StartResult>,
    /// Whether the started reader reads each process's whole ledger ([`Started::whole_ledger`]).
    whole_ledger: bool,
}

/// Loads the BPF object if the choice of tracker may fall on ebpf, with uprobes on the SDT
/// probe sites of `sdt` (`--malloc`). Call it before the command is released (while it is held
/// or before the fork): loading takes long enough to distort the command's wall time, and the
/// probes must be there before the command runs.
fn preload(
    requested: Option<TrackerKind>,
    syscalls: Option<SyscallRequest>,
    ledger: bool,
    sdt: Option<crate::source::malloc::sdt::Plan>,
    maps_made: impl FnOnce(&crate::kernel::bpf::loader::Loaded),
) -> Option<Result<ebpf::Loaded, String>> {
    match requested {
        None | Some(TrackerKind::Ebpf) => Some(ebpf::load(
            ebpf::Config {
                syscalls: syscalls.map(|r| r.mode),
                ledger,
            },
            sdt,
            maps_made,
        )),
        Some(_) => None,
    }
}

/// What starting the ebpf tracker needs of the session, handed to the thread that loads BPF
/// before the BPF is there ([`Loading::hand_over`]): that thread goes on as the ring buffer's
/// reader the moment the programs are attached, instead of handing the object to the session
/// to start a reader (a wake-up and a thread's start more between the last program's attach
/// and the command's release).
pub struct Handoff {
    pub child: Launched,
    pub sink: Sink,
    pub sampler: Arc<dyn TreeWatcher>,
    /// Whether the session registered the command with BPF ([`Loading::register`]).
    pub registered: Result<(), String>,
}

/// [`preload`] under way on a thread of its own, or why there is none.
pub enum Loading {
    /// Another tracker was asked for: nothing to load.
    NotNeeded,
    /// The thread could not start.
    Failed(String),
    Thread {
        handoff: mpsc::SyncSender<Handoff>,
        outcome: mpsc::Receiver<Preloaded>,
        /// The map of tracked tasks, once created (closed if it never will be).
        tasks: mpsc::Receiver<crate::kernel::bpf::maps::Map>,
    },
}

/// [`preload`] on a thread of its own when it has BPF to load (a few milliseconds of work that
/// the rest of the start-up overlaps); once loaded, the thread waits for the session's
/// [`Handoff`], starts the ebpf tracker with it, says how that went and reads the ring buffer
/// until the run ends. Without the handoff (the session stopped short), it drops the object,
/// which detaches it.
pub fn preload_in_background(
    requested: Option<TrackerKind>,
    syscalls: Option<SyscallRequest>,
    ledger: bool,
    sdt: Option<crate::source::malloc::sdt::Plan>,
) -> Loading {
    if !matches!(requested, None | Some(TrackerKind::Ebpf)) {
        return Loading::NotNeeded;
    }
    let (handoff, handed) = mpsc::sync_channel::<Handoff>(1);
    let (said, outcome) = mpsc::sync_channel::<Preloaded>(1);
    let (tasks_made, tasks) = mpsc::sync_channel(1);
    // Off this thread's CPU: this thread goes on to the accounting's set-up and the fork.
    let spawned = crate::kernel::affinity::spawn_elsewhere("ste-bpf-load", move || {
        let maps_made = move |b: &crate::kernel::bpf::loader::Loaded| {
            if let Some(m) = ebpf::root_map(b) {
                let _ = tasks_made.send(m);
            }
        };
        let loaded = crate::bus::phases::span("bpf preload", || {
            preload(requested, syscalls, ledger, sdt, maps_made)
        });
        let loaded = match loaded {
            Some(Ok(l)) => l,
            Some(Err(why)) => {
                let _ = said.send(Preloaded(Some(Ebpf {
                    loaded: Err(why.clone()),
                    started: Some(Err(why)),
                    whole_ledger: false,
                })));
                return;
            }
            None => {
                let _ = said.send(Preloaded(None));
                return;
            }
        };
        let Ok(h) = handed.recv() else { return };
        match ebpf::start(loaded, h) {
            Ok((reader, source)) => {
                let _ = said.send(Preloaded(Some(Ebpf {
                    loaded: Ok(()),
                    started: Some(Ok(source)),
                    whole_ledger: reader.whole_ledger(),
                })));
                reader.run();
            }
            Err(why) => {
                let _ = said.send(Preloaded(Some(Ebpf {
                    loaded: Ok(()),
                    started: Some(Err(why)),
                    whole_ledger: false,
                })));
            }
        }
    });
    match spawned {
        Ok(_) => Loading::Thread {
            handoff,
            outcome,
            tasks,
        },
        Err(e) => Loading::Failed(format!("cannot start the thread that loads BPF: {e}")),
    }
}

impl Loading {
    /// Registers the command (held before its exec) with BPF as the tree's root, as soon as
    /// the loading thread has created the maps: on this thread, which would otherwise only
    /// wait, while the programs load, rather than on the loading thread between the last
    /// attach and the release. Call it before [`Loading::hand_over`], which carries the
    /// answer.
    pub fn register(&self, pid: i32) -> Result<(), String> {
        match self {
            Loading::Thread { tasks, .. } => match tasks.recv() {
                Ok(map) => ebpf::register_root(&map, pid)
                    .map_err(|e| format!("cannot register the command with BPF: {e}")),
                // The loading's own error says why.
                Err(_) => Err("the BPF maps were not created".into()),
            },
            Loading::NotNeeded | Loading::Failed(_) => Err("no BPF is being loaded".into()),
        }
    }

    /// Gives the loading thread what starting the ebpf tracker needs (nothing happens when
    /// there is no such thread). Call it once, before [`Loading::wait`].
    pub fn hand_over(&self, h: Handoff) {
        if let Loading::Thread { handoff, .. } = self {
            // A thread that failed to load has stopped listening: its outcome says why.
            let _ = handoff.try_send(h);
        }
    }

    /// The outcome of [`preload`] and of the ebpf tracker's start, once they are there.
    pub fn wait(self) -> Preloaded {
        let failed = |why: String| {
            Preloaded(Some(Ebpf {
                loaded: Err(why.clone()),
                started: Some(Err(why)),
                whole_ledger: false,
            }))
        };
        match self {
            Loading::NotNeeded => Preloaded(None),
            Loading::Failed(why) => failed(why),
            Loading::Thread { outcome, .. } => outcome.recv().unwrap_or_else(|_| {
                failed("the thread that loads BPF ended without a word (see above)".into())
            }),
        }
    }
}

impl Preloaded {
    /// Whether the BPF object is loaded, or why not.
    pub fn bpf_status(&self) -> Result<(), String> {
        match &self.0 {
            Some(e) => e.loaded.clone(),
            None => Err("another tracker was asked for (--tracker)".into()),
        }
    }
}

/// What starting a tracker needs from the session.
pub struct Ctx<'a> {
    /// The ebpf tracker, loaded and started (or not) on the loading thread.
    pub preloaded: Preloaded,
    pub child: &'a mut Launched,
    pub sink: &'a Sink,
    pub sampler: &'a Arc<dyn TreeWatcher>,
    /// What ptrace reads of each process for the per-process ledger.
    pub ledger: LedgerReads,
}

/// What the ptrace tracker reads of each process for the per-process ledger (plain settings
/// from the session's accounting).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LedgerReads {
    /// `/proc/TID/schedstat` at each exit stop, and the peaks and I/O as ledger figures: when
    /// taskstats, which gives them, is not there (`account::Session::tracker_reads_ledger`).
    pub exit_stop: bool,
    /// The rusage of the wait that ends each process: whenever a ledger is kept
    /// (`account::Session::ledger_kept`); the wait is the tracker's own, so it reads nothing
    /// more.
    pub wait4: bool,
}

impl Ctx<'_> {
    /// Starts one tracker. Each takes the child's exec report only once it is committed, so a
    /// failed start leaves it for the fallback.
    fn one(&mut self, kind: TrackerKind, syscalls: Option<syscalls::Mode>) -> StartResult {
        let (sink, sampler) = (self.sink.clone(), Arc::clone(self.sampler));
        match kind {
            TrackerKind::Ebpf => match self.preloaded.0.as_mut().and_then(|e| e.started.take()) {
                Some(started) => started,
                None => Err("the BPF object was not loaded".into()),
            },
            TrackerKind::Ptrace => ptrace::start(self.child, sink, sampler, syscalls, self.ledger),
            TrackerKind::Netlink => netlink::start(self.child, sink, sampler).map(|()| None),
        }
    }

    fn note(&self, text: String) {
        self.sink.emit(Event::Note { text });
    }

    /// Whether the ebpf tracker, once started, reads each process's whole ledger.
    fn ebpf_whole_ledger(&self) -> bool {
        self.preloaded.0.as_ref().is_some_and(|e| e.whole_ledger)
    }
}

/// Starts the requested tracker, or the most exact one that works (ebpf, then ptrace, then
/// netlink, saying why). With `--syscalls`, only a tracker that can count them: ebpf, or
/// ptrace with syscall stops when `--allow-ptrace` accepts their cost. Returns the tracker in
/// use; the notes for the report are emitted.
pub fn start(
    requested: Option<TrackerKind>,
    syscalls: Option<SyscallRequest>,
    mut ctx: Ctx,
) -> Result<Started, String> {
    match (requested, syscalls) {
        (Some(kind), None) => ctx
            .one(kind, None)
            .map(|s| Started {
                kind,
                syscalls: s,
                whole_ledger: kind == TrackerKind::Ebpf && ctx.ebpf_whole_ledger(),
            })
            .map_err(|e| format!("--tracker {}: {e}", kind.name())),
        (None, None) => start_default(&mut ctx),
        (Some(TrackerKind::Netlink), Some(_)) => Err(NETLINK_NO_SYSCALLS.into()),
        (Some(TrackerKind::Ptrace), Some(req)) => {
            if !req.allow_ptrace {
                return Err(PTRACE_NEEDS_ALLOW.into());
            }
            ctx.one(TrackerKind::Ptrace, Some(req.mode))
                .map(|s| Started {
                    kind: TrackerKind::Ptrace,
                    syscalls: s,
                    whole_ledger: false,
                })
                .map_err(|e| format!("--tracker ptrace: {e}"))
        }
        (Some(TrackerKind::Ebpf) | None, Some(req)) => {
            start_counting(&mut ctx, req, requested.is_none())
        }
    }
}

const NETLINK_NO_SYSCALLS: &str = "--syscalls counts with the ebpf tracker, or with ptrace syscall stops (--tracker ptrace --allow-ptrace); the netlink tracker cannot count them";

const PTRACE_NEEDS_ALLOW: &str = "--tracker ptrace --syscalls counts at ptrace syscall stops, which stop the process twice per system call (like strace: tens of µs each): add --allow-ptrace to accept that, or count in the kernel with the ebpf tracker (root)";

/// No tracker asked for: ebpf, else ptrace, else netlink.
fn start_default(ctx: &mut Ctx) -> Result<Started, String> {
    let why_not_ebpf = match ctx.one(TrackerKind::Ebpf, None) {
        Ok(s) => {
            return Ok(Started {
                kind: TrackerKind::Ebpf,
                syscalls: s,
                whole_ledger: ctx.ebpf_whole_ledger(),
            });
        }
        Err(why) => why,
    };
    let ebpf_note = format!("the ebpf tracker is not available ({why_not_ebpf})");
    match ctx.one(TrackerKind::Ptrace, None) {
        Ok(s) => {
            ctx.note(format!("{ebpf_note}: using the ptrace tracker"));
            Ok(Started {
                kind: TrackerKind::Ptrace,
                syscalls: s,
                whole_ledger: false,
            })
        }
        Err(why) => {
            // Not tried where the proc connector refuses this user (before Linux 6.6):
            // `netlink::start` says why without subscribing.
            let s = ctx.one(TrackerKind::Netlink, None).map_err(|e| {
                format!("no tracker works here: ebpf: {why_not_ebpf}; ptrace: {why}; netlink: {e}")
            })?;
            ctx.note(format!(
                "{ebpf_note}, and ptrace could not attach ({why}; is ste itself traced, or ptrace blocked by seccomp?): fell back to the netlink tracker"
            ));
            Ok(Started {
                kind: TrackerKind::Netlink,
                syscalls: s,
                whole_ledger: false,
            })
        }
    }
}

/// `--syscalls` with the ebpf tracker (asked for, or the default): in the kernel, or, when BPF
/// cannot load and `--allow-ptrace` allows it (and no tracker was asked for), at ptrace stops.
fn start_counting(
    ctx: &mut Ctx,
    req: SyscallRequest,
    may_fall_back: bool,
) -> Result<Started, String> {
    let why = match ctx.one(TrackerKind::Ebpf, Some(req.mode)) {
        Ok(s) => {
            return Ok(Started {
                kind: TrackerKind::Ebpf,
                syscalls: s,
                whole_ledger: ctx.ebpf_whole_ledger(),
            });
        }
        Err(why) => why,
    };
    if !may_fall_back || !req.allow_ptrace {
        return Err(format!(
            "--syscalls counts system calls in the kernel with BPF, which cannot load here: {why}. `--syscalls --allow-ptrace` counts them with ptrace syscall stops instead, like strace: slow (every call stops the process twice)"
        ));
    }
    let s = ctx.one(TrackerKind::Ptrace, Some(req.mode)).map_err(|e| {
        format!("--syscalls: BPF cannot load ({why}), and ptrace cannot attach either: {e}")
    })?;
    ctx.note(format!(
        "BPF cannot load ({why}): system calls were counted at ptrace syscall stops (--allow-ptrace), which slow every call"
    ));
    Ok(Started {
        kind: TrackerKind::Ptrace,
        syscalls: s,
        whole_ledger: false,
    })
}

/// Sets the calling tracker thread's nice value to `default` (−10: ahead of ordinary work)
/// where allowed: root, and only before the thread drops its capabilities (`CAP_SYS_NICE`
/// goes with them), so call it first. Unprivileged it fails and nothing changes;
/// `STE_TRACKER_NICE` sets another value (bench/trackers_cost.sh compares them).
fn set_priority(default: i32) {
    let nice = std::env::var("STE_TRACKER_NICE")
        .ok()
        .and_then(|v| v.parse::<i32>().ok())
        .unwrap_or(default);
    if nice == 0 {
        return;
    }
    // SAFETY: setpriority on the calling thread's id.
    unsafe {
        libc::setpriority(
            libc::PRIO_PROCESS,
            crate::kernel::calls::gettid() as libc::id_t,
            nice,
        )
    };
}
