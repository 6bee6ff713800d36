//! `kernel.task_delayacct`: block-I/O, swap-in and reclaim delays are counted only while it is
//! 1 (the run-queue wait is counted regardless). `--delays` switches it on for the run; the
//! guard puts the previous value back when dropped, which the session does on every way out
//! (normal end, Ctrl-C, which ste handles as a message, and errors, which unwind through it).
//! Only a ste killed by SIGKILL leaves it on.

use std::path::PathBuf;

const SYSCTL: &str = "/proc/sys/kernel/task_delayacct";

fn path() -> PathBuf {
    PathBuf::from(SYSCTL)
}

/// The current setting; `None` when the kernel has no such knob.
pub fn enabled() -> Option<bool> {
    std::fs::read_to_string(path())
        .ok()
        .map(|s| s.trim() != "0")
}

/// Restores the setting found before `switch_on` when dropped.
pub struct Guard {
    restore: Option<String>,
}

/// Switches delay accounting on; the guard switches it back.
pub fn switch_on() -> Result<Guard, String> {
    let before =
        std::fs::read_to_string(path()).map_err(|e| format!("cannot read {SYSCTL}: {e}"))?;
    if before.trim() != "0" {
        return Ok(Guard { restore: None });
    }
    std::fs::write(path(), "1").map_err(|e| format!("cannot write {SYSCTL} (needs root): {e}"))?;
    Ok(Guard {
        restore: Some(before),
    })
}

impl Guard {
    /// Whether this guard switched the setting (and will switch it back).
    pub fn switched(&self) -> bool {
        self.restore.is_some()
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(v) = self.restore.take() {
            let _ = std::fs::write(path(), v.trim());
        }
    }
}
