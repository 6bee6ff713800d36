//! Process trackers: each follows the command's whole tree through one kernel interface and
//! emits the same `Event` vocabulary (fork, exec, exit), so every tracker gives the same counts.
//!
//! Owns the choice of tracker and the fallback between them. A tracker is started while the
//! command waits on the launch pipe, so it is registered before the command's first instruction.

pub mod netlink;
pub mod ptrace;
pub mod reaper;
pub mod tree;

use crate::event::Event;
use crate::launch::Child;
use crate::sample::Sampler;
use crate::sink::Sink;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TrackerKind {
    /// fork/exec/exit stops, no syscall stops; exact, needs no privilege.
    Ptrace,
    /// The proc connector: no stops; can lose events under fork storms (counted and reported).
    Netlink,
}

impl TrackerKind {
    pub fn name(self) -> &'static str {
        match self {
            TrackerKind::Ptrace => "ptrace",
            TrackerKind::Netlink => "netlink",
        }
    }

    /// Each tracker takes the child's exec report only once it is committed, so a failed
    /// start leaves it for the fallback.
    fn start(self, child: &mut Child, sink: &Sink, sampler: &Arc<Sampler>) -> Result<(), String> {
        match self {
            TrackerKind::Ptrace => ptrace::start(child, sink.clone(), Arc::clone(sampler)),
            TrackerKind::Netlink => netlink::start(child, sink.clone(), Arc::clone(sampler)),
        }
    }
}

/// Starts the requested tracker, or the most exact one that works (ptrace, then netlink, saying
/// why). Returns the tracker in use and the notes for the report.
pub fn start(
    requested: Option<TrackerKind>,
    child: &mut Child,
    sink: &Sink,
    sampler: &Arc<Sampler>,
) -> Result<TrackerKind, String> {
    if let Some(kind) = requested {
        return kind
            .start(child, sink, sampler)
            .map(|()| kind)
            .map_err(|e| format!("--tracker {}: {e}", kind.name()));
    }
    match TrackerKind::Ptrace.start(child, sink, sampler) {
        Ok(()) => Ok(TrackerKind::Ptrace),
        Err(why) => {
            TrackerKind::Netlink
                .start(child, sink, sampler)
                .map_err(|e| format!("no tracker works here: ptrace: {why}; netlink: {e}"))?;
            sink.emit(Event::Note {
                text: format!("ptrace could not attach ({why}; is ste itself traced, or ptrace blocked by seccomp?): fell back to the netlink tracker"),
            });
            Ok(TrackerKind::Netlink)
        }
    }
}
