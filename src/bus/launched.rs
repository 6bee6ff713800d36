//! The launched command as a tracker sees it: a plain value, its pid and, once, how its exec
//! went, so trackers never name `launch`'s types.
//!
//! Owns only the hand-off. Must not import `launch` or a source: the session builds it from the
//! child it started.

use crate::model::LaunchError;
use std::sync::{Arc, Mutex};

/// Blocks until the command exec'd (`Ok`) or failed to (the launch error). Call it when the
/// command has exec'd or exited, or from a thread that may block.
pub type ExecOutcome = Box<dyn FnOnce() -> Result<(), LaunchError> + Send>;

/// The command's first process, handed to the tracker that registers it. A clone shares the
/// exec outcome: the ebpf tracker gets one ahead of time, on the thread that loads it, while the
/// session keeps another for the fallback.
#[derive(Clone)]
pub struct Launched {
    pub pid: i32,
    exec: Arc<Mutex<Option<ExecOutcome>>>,
}

impl Launched {
    pub fn new(pid: i32, exec: ExecOutcome) -> Launched {
        Launched {
            pid,
            exec: Arc::new(Mutex::new(Some(exec))),
        }
    }

    /// How the exec went, for the tracker that committed to the command: taken once (a
    /// tracker that failed to start leaves it for the next). Taken again, it says nothing
    /// failed, as the exec-error pipe does once read.
    pub fn take_exec_outcome(&mut self) -> ExecOutcome {
        self.exec
            .lock()
            .ok()
            .and_then(|mut e| e.take())
            .unwrap_or_else(|| Box::new(|| Ok(())))
    }
}
