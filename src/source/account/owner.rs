//! Names that tie what ste leaves in the system while it runs (its cgroup, its mark on delay
//! accounting) to the ste run that made it: `ste-<PID>-<START>`, ste's pid and its start time
//! in clock ticks since boot. A later run tells the leftovers of a ste that is gone (killed,
//! crashed) from those of one still running, even when the pid was reused.
//!
//! Owns the name and the liveness test only; what to do with a leftover is its owner's
//! business (`group`, `delays`).

use crate::kernel::proc::ProcFs;
use std::path::Path;

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
