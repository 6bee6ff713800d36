//! Names that tie what ste leaves in the system while it runs (its cgroup, its mark on delay
//! accounting) to the ste run that made it: `ste-<PID>-<START>`, ste's pid and its start time
//! in clock ticks since boot. A later run tells the leftovers of a ste that is gone (killed,
//! crashed) from those of one still running, even when the pid was reused.
//!
//! The name is judged in the PID namespace of the run that reads it, and a run made inside
//! another (`unshare --pid --fork`) names itself by its pid there: a plain run on the host
//! took it for gone and removed its run directory and cgroups under it. So a live run also
//! holds an exclusive `flock` on what it leaves ([`hold`]: each cgroup directory, its run
//! directory, its delays mark), which the kernel drops when the run ends however it ends, and
//! a leftover is gone only when its name says so and its lock is free ([`held`]). Locks are on
//! the files themselves, shared by every namespace that sees them.
//!
//! Owns the name and the liveness test only; what to do with a leftover is its owner's
//! business (`group`, `delays`, `malloc::rundir`).

use crate::kernel::proc::ProcFs;
use std::os::fd::BorrowedFd;
use std::path::Path;

/// Marks `fd`'s file or directory as this live run's for as long as the descriptor is open
/// (an exclusive `flock`). Refused when another holds it: a sweeper that found it free a
/// moment ago, and is removing it.
pub fn hold(fd: BorrowedFd<'_>) -> std::io::Result<()> {
    if crate::kernel::calls::try_flock_exclusive(fd)? {
        Ok(())
    } else {
        Err(std::io::Error::other(
            "another ste run is removing it as a leftover",
        ))
    }
}

/// Whether a live run holds `fd`'s file or directory ([`hold`]). When none does, the caller
/// now does, until it closes `fd`: a run that takes it meanwhile is refused, and goes
/// elsewhere. An error counts as held: nothing is removed on a doubt.
pub fn held(fd: BorrowedFd<'_>) -> bool {
    !crate::kernel::calls::try_flock_exclusive(fd).unwrap_or(false)
}

/// `ste-<pid>-<start ticks>` of this ste (`procfs_self`: its /proc directory).
pub fn own_name(procfs_self: &Path) -> Result<String, String> {
    let pid = std::process::id();
    let start = std::fs::read(procfs_self.join("stat"))
        .ok()
        .and_then(|b| crate::kernel::proc::parse_stat(&b))
        .map(|s| s.starttime)
        .ok_or("cannot read /proc/self/stat")?;
    Ok(format!("ste-{pid}-{start}"))
}

/// `(pid, start)` from a name made by [`own_name`].
pub fn parse_name(name: &str) -> Option<(i32, u64)> {
    let rest = name.strip_prefix("ste-")?;
    let (pid, start) = rest.split_once('-')?;
    Some((pid.parse().ok()?, start.parse().ok()?))
}

/// Tells whether the ste runs behind names are gone.
#[derive(Default)]
pub struct Liveness {
    procfs: ProcFs,
}

impl Liveness {
    /// `Some(true)` when `name` is a ste run that is gone (no such pid, or a pid reused by a
    /// process that started at another time), `Some(false)` when it still runs, `None` when
    /// `name` is not one of ste's.
    pub fn is_gone(&mut self, name: &str) -> Option<bool> {
        let (pid, start) = parse_name(name)?;
        let alive = self
            .procfs
            .stat(pid)
            .ok()
            .flatten()
            .is_some_and(|s| s.starttime == start);
        Some(!alive)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_directory_is_live_and_a_free_one_is_taken() {
        use std::os::fd::AsFd;
        let t = tempfile::tempdir().unwrap();
        let live = std::fs::File::open(t.path()).unwrap();
        hold(live.as_fd()).unwrap();
        let sweeper = std::fs::File::open(t.path()).unwrap();
        assert!(held(sweeper.as_fd()), "held by a live run");
        drop(live);
        assert!(!held(sweeper.as_fd()), "free once its run is gone");
        // The sweeper has it now: a run that comes late is refused.
        let late = std::fs::File::open(t.path()).unwrap();
        assert!(hold(late.as_fd()).is_err());
    }

    #[test]
    fn names_round_trip_and_foreign_names_are_ignored() {
        assert_eq!(parse_name("ste-4242-987654"), Some((4242, 987654)));
        assert_eq!(parse_name("ste-probe"), None);
        assert_eq!(parse_name("user.slice"), None);
        let me = own_name(Path::new("/proc/self")).unwrap();
        let mut l = Liveness::default();
        assert_eq!(l.is_gone(&me), Some(false));
        assert_eq!(l.is_gone("ste-2147483000-5"), Some(true), "no such pid");
        let reused = format!("ste-{}-1", std::process::id());
        assert_eq!(l.is_gone(&reused), Some(true), "this pid, another start");
        assert_eq!(l.is_gone("other"), None);
    }
}
