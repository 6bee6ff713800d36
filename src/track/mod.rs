//! Process trackers: each follows the command's whole tree through one kernel interface and
//! emits the same `Event` vocabulary (fork, exec, exit), so every tracker gives the same counts.
//!
//! Owns the choice of tracker and the fallback between them, and which tracker counts system
//! calls (`--syscalls`: the ebpf tracker in the kernel, or ptrace syscall stops when allowed).
//! A tracker is started while the command waits on the launch pipe, so it is registered before
//! the command's first instruction.

pub mod ebpf;
pub mod netlink;
pub mod ptrace;
pub mod ptrace_syscalls;
pub mod reaper;
pub mod tree;

use crate::event::Event;
use crate::launch::Child;
use crate::sample::Sampler;
use crate::sink::Sink;
use crate::syscalls;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
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
}

/// What a tracker's start returns: the system-call source, if it counts them.
type StartResult = Result<Option<Arc<dyn syscalls::Source>>, String>;

/// The BPF object, loaded before the command is forked when the ebpf tracker may be used (or
/// why it could not be).
pub struct Preloaded(Option<Result<ebpf::Loaded, String>>);

/// Loads the BPF object if the choice of tracker may fall on ebpf. Call it before forking:
/// loading takes long enough to distort the command's wall time.
pub fn preload(requested: Option<TrackerKind>, syscalls: Option<SyscallRequest>) -> Preloaded {
    Preloaded(match requested {
        None | Some(TrackerKind::Ebpf) => Some(ebpf::load(ebpf::Config {
            syscalls: syscalls.map(|r| r.mode),
        })),
        Some(_) => None,
    })
}

/// Each tracker takes the child's exec report only once it is committed, so a failed start
/// leaves it for the fallback.
fn start_one(
    kind: TrackerKind,
    syscalls: Option<syscalls::Mode>,
    preloaded: &mut Preloaded,
    child: &mut Child,
    sink: &Sink,
    sampler: &Arc<Sampler>,
) -> StartResult {
    match kind {
        TrackerKind::Ebpf => match preloaded.0.take() {
            Some(loaded) => ebpf::start(loaded?, child, sink.clone(), Arc::clone(sampler)),
            None => Err("the BPF object was not loaded".into()),
        },
        TrackerKind::Ptrace => ptrace::start(child, sink.clone(), Arc::clone(sampler), syscalls),
        TrackerKind::Netlink => {
            netlink::start(child, sink.clone(), Arc::clone(sampler)).map(|()| None)
        }
    }
}

/// Starts the requested tracker, or the most exact one that works (ebpf, then ptrace, then
/// netlink, saying why). With `--syscalls`, only a tracker that can count them: ebpf, or
/// ptrace with syscall stops when `--allow-ptrace` accepts their cost. Returns the tracker in
/// use; the notes for the report are emitted.
pub fn start(
    requested: Option<TrackerKind>,
    syscalls: Option<SyscallRequest>,
    mut preloaded: Preloaded,
    child: &mut Child,
    sink: &Sink,
    sampler: &Arc<Sampler>,
) -> Result<Started, String> {
    let started = |kind, syscalls| Started { kind, syscalls };
    match (requested, syscalls) {
        (Some(kind), None) => start_one(kind, None, &mut preloaded, child, sink, sampler)
            .map(|s| started(kind, s))
            .map_err(|e| format!("--tracker {}: {e}", kind.name())),
        (None, None) => {
            let why_not_ebpf = match start_one(TrackerKind::Ebpf, None, &mut preloaded, child, sink, sampler) {
                Ok(s) => return Ok(started(TrackerKind::Ebpf, s)),
                Err(why) => why,
            };
            let ebpf_note = format!("the ebpf tracker is not available ({why_not_ebpf})");
            match start_one(TrackerKind::Ptrace, None, &mut preloaded, child, sink, sampler) {
                Ok(s) => {
                    sink.emit(Event::Note {
                        text: format!("{ebpf_note}: using the ptrace tracker"),
                    });
                    Ok(started(TrackerKind::Ptrace, s))
                }
                Err(why) => {
                    let s = start_one(TrackerKind::Netlink, None, &mut preloaded, child, sink, sampler)
                        .map_err(|e| {
                            format!("no tracker works here: ebpf: {why_not_ebpf}; ptrace: {why}; netlink: {e}")
                        })?;
                    sink.emit(Event::Note { text: format!("{ebpf_note}, and ptrace could not attach ({why}; is ste itself traced, or ptrace blocked by seccomp?): fell back to the netlink tracker") });
                    Ok(started(TrackerKind::Netlink, s))
                }
            }
        }
        (Some(TrackerKind::Netlink), Some(_)) => Err(
            "--syscalls counts with the ebpf tracker, or with ptrace syscall stops (--tracker ptrace --allow-ptrace); the netlink tracker cannot count them".into(),
        ),
        (Some(TrackerKind::Ptrace), Some(req)) => {
            if !req.allow_ptrace {
                return Err("--tracker ptrace --syscalls counts at ptrace syscall stops, which stop the process twice per system call (like strace: tens of µs each): add --allow-ptrace to accept that, or count in the kernel with the ebpf tracker (root)".into());
            }
            start_one(TrackerKind::Ptrace, Some(req.mode), &mut preloaded, child, sink, sampler)
                .map(|s| started(TrackerKind::Ptrace, s))
                .map_err(|e| format!("--tracker ptrace: {e}"))
        }
        (Some(TrackerKind::Ebpf) | None, Some(req)) => {
            let why = match start_one(TrackerKind::Ebpf, Some(req.mode), &mut preloaded, child, sink, sampler) {
                Ok(s) => return Ok(started(TrackerKind::Ebpf, s)),
                Err(why) => why,
            };
            if requested.is_some() || !req.allow_ptrace {
                return Err(format!(
                    "--syscalls counts system calls in the kernel with BPF, which cannot load here: {why}. `--syscalls --allow-ptrace` counts them with ptrace syscall stops instead, like strace: slow (every call stops the process twice)"
                ));
            }
            let s = start_one(TrackerKind::Ptrace, Some(req.mode), &mut preloaded, child, sink, sampler)
                .map_err(|e| format!("--syscalls: BPF cannot load ({why}), and ptrace cannot attach either: {e}"))?;
            sink.emit(Event::Note {
                text: format!("BPF cannot load ({why}): system calls were counted at ptrace syscall stops (--allow-ptrace), which slow every call"),
            });
            Ok(started(TrackerKind::Ptrace, s))
        }
    }
}
