//! `kernel.task_delayacct`: block-I/O, swap-in and reclaim delays are counted only while it is
//! 1 (the run-queue wait is counted regardless). `--delays` switches it on for the run and
//! back after.
//!
//! The switch is shared, and outlives a ste that is killed: every run that wants it on keeps a
//! mark in `/run/ste/delays/` (named by `owner`, holding the value to put back), changed only
//! under an exclusive `flock` of that directory. The last run out puts the value back. A ste
//! killed by SIGKILL runs no destructor and leaves its mark; the next ste run as root finds
//! that its owner is gone and, when no live run still wants delays on, puts the value back and
//! says so. Without the marks, two overlapping `--delays` runs ended with the first switching
//! delays off under the second, and a killed run left them on until reboot (`/run` is a tmpfs,
//! cleared at boot, as the setting itself is).
//!
//! Owns the setting and the marks; the session decides when (its guard drops on every way
//! out: normal end, Ctrl-C, which ste handles as a message, and errors, which unwind).

use super::owner::{Liveness, own_name};
use std::fs::File;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

const SYSCTL: &str = "/proc/sys/kernel/task_delayacct";
const MARKS: &str = "/run/ste/delays";

/// Where the setting and the marks live (the system's, or a test's).
#[derive(Clone)]
pub struct Places {
    pub sysctl: PathBuf,
    pub marks: PathBuf,
}

impl Default for Places {
    fn default() -> Self {
        Places {
            sysctl: SYSCTL.into(),
            marks: MARKS.into(),
        }
    }
}

/// The current setting; `None` when the kernel has no such knob.
pub fn enabled() -> Option<bool> {
    read(Path::new(SYSCTL)).map(|s| s.trim() != "0")
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// A run's mark: its owner's name and the value to put back.
type Mark = (String, String);

/// The marks' directory, locked for as long as this lives.
struct Marks {
    dir: PathBuf,
    _lock: File,
}

impl Marks {
    /// Locks the directory, made first when `create` (else a missing one is an error).
    fn lock(dir: &Path, create: bool) -> std::io::Result<Marks> {
        use std::os::unix::fs::DirBuilderExt;
        if create {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        let lock = File::open(dir)?;
        crate::kernel::calls::flock_exclusive(lock.as_fd())?;
        Ok(Marks {
            dir: dir.to_path_buf(),
            _lock: lock,
        })
    }

    /// Removes the marks of runs that are gone; returns the live ones and the gone ones.
    fn sweep(&self) -> (Vec<Mark>, Vec<Mark>) {
        let (mut live, mut gone) = (Vec::new(), Vec::new());
        let mut liveness = Liveness::default();
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return (live, gone);
        };
        for e in entries.flatten() {
            let Some(name) = e.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let Some(is_gone) = liveness.is_gone(&name) else {
                continue;
            };
            let value = read(&e.path()).unwrap_or_default().trim().to_string();
            // Gone by its name in this PID namespace, and its run's lock free (`owner`).
            let is_gone = is_gone
                && !std::fs::File::open(e.path()).is_ok_and(|f| super::owner::held(f.as_fd()));
            if is_gone {
                let _ = std::fs::remove_file(e.path());
                gone.push((name, value));
            } else {
                live.push((name, value));
            }
        }
        (live, gone)
    }
}

/// Puts back the setting that runs killed while they had delays on left behind, when no
/// live run wants it on: a note saying what was done, or `None` (nothing left behind, or
/// not root: the marks are root's).
pub fn sweep(places: &Places) -> Option<String> {
    // Off: no killed run left it on. Its marks, if any, wait for the next `--delays` run's
    // sweep; every run that is not one reads this one small file instead of locking and
    // listing the marks' directory beside the BPF load.
    if read(&places.sysctl).is_some_and(|v| v.trim() == "0") {
        return None;
    }
    let marks = Marks::lock(&places.marks, false).ok()?;
    let (live, gone) = marks.sweep();
    let (name, value) = gone.first()?;
    if !live.is_empty() {
        return None;
    }
    std::fs::write(&places.sysctl, value).ok()?;
    Some(format!(
        "kernel.task_delayacct was left on by a ste --delays run that was killed ({name}); ste put it back to {value}"
    ))
}

/// Puts the setting back when dropped, if this run is the last one that wanted it on.
pub struct Guard {
    places: Places,
    /// This run's mark (none: delays were on already, not by a ste run, and stay on).
    mark: Option<PathBuf>,
    /// The mark, open with this run's lock on it (`owner::hold`).
    _held: Option<File>,
}

/// Switches delay accounting on for this run; the guard switches it back.
pub fn switch_on(places: &Places) -> Result<Guard, String> {
    let sysctl = places.sysctl.display();
    let unmarked = Guard {
        places: places.clone(),
        mark: None,
        _held: None,
    };
    // Only root can make the marks' directory (and switch the setting).
    let root = crate::kernel::calls::is_root();
    let marks = Marks::lock(&places.marks, root);
    let before = read(&places.sysctl).ok_or_else(|| format!("cannot read {sysctl}"))?;
    let Ok(marks) = marks else {
        // No marks to keep: on already (by whoever), or not ours to switch.
        return if before.trim() != "0" {
            Ok(unmarked)
        } else {
            Err(format!("cannot write {sysctl} (needs root)"))
        };
    };
    let (live, gone) = marks.sweep();
    let restore = if before.trim() == "0" {
        std::fs::write(&places.sysctl, "1")
            .map_err(|e| format!("cannot write {sysctl} (needs root): {e}"))?;
        "0".to_string()
    } else if let Some((_, value)) = live.first().or(gone.first()) {
        // On because another ste run switched it: share its switch and what it puts back
        // (and take over the switch of a run killed since the session's sweep).
        value.clone()
    } else {
        // On, and not by a ste run: it stays as it is.
        return Ok(unmarked);
    };
    let mark = places.marks.join(own_name(Path::new("/proc/self"))?);
    std::fs::write(&mark, &restore).map_err(|e| format!("cannot write {}: {e}", mark.display()))?;
    // Under the marks' lock, which every sweep takes: no sweep sees the mark unheld.
    let held = File::open(&mark)
        .and_then(|f| super::owner::hold(f.as_fd()).map(|()| f))
        .map_err(|e| format!("cannot hold {}: {e}", mark.display()))?;
    Ok(Guard {
        places: places.clone(),
        mark: Some(mark),
        _held: Some(held),
    })
}

impl Guard {
    /// Whether delays are on for this run because a ste run switched them (and will switch
    /// them back).
    pub fn switched(&self) -> bool {
        self.mark.is_some()
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let Some(mark) = self.mark.take() else {
            return;
        };
        let Ok(marks) = Marks::lock(&self.places.marks, false) else {
            return;
        };
        let value = read(&mark).unwrap_or_else(|| "0".into());
        let _ = std::fs::remove_file(&mark);
        let (live, _) = marks.sweep();
        if live.is_empty() {
            let _ = std::fs::write(&self.places.sysctl, value.trim());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn places(dir: &Path, value: &str) -> Places {
        let p = Places {
            sysctl: dir.join("task_delayacct"),
            marks: dir.join("marks"),
        };
        std::fs::write(&p.sysctl, value).unwrap();
        p
    }

    fn setting(p: &Places) -> String {
        std::fs::read_to_string(&p.sysctl)
            .unwrap()
            .trim()
            .to_string()
    }

    /// The owner name of a live process other than this one (the test runner's parent).
    fn another_live_run() -> String {
        let pid = std::os::unix::process::parent_id();
        let stat = std::fs::read(format!("/proc/{pid}/stat")).unwrap();
        let start = crate::kernel::proc::parse_stat(&stat).unwrap().starttime;
        format!("ste-{pid}-{start}")
    }

    #[test]
    #[cfg_attr(
        not(ste_test_root),
        ignore = "needs root: only root switches delay accounting (the test fakes the file, not the privilege)"
    )]
    fn the_last_run_out_switches_back() {
        let dir = tempfile::tempdir().unwrap();
        let p = places(dir.path(), "0\n");
        let g = switch_on(&p).unwrap();
        assert!(g.switched());
        assert_eq!(setting(&p), "1");
        drop(g);
        assert_eq!(setting(&p), "0");
        assert_eq!(std::fs::read_dir(&p.marks).unwrap().count(), 0);

        // Another run switched delays on and is still running: this one shares its switch.
        std::fs::write(&p.sysctl, "1").unwrap();
        let other = p.marks.join(another_live_run());
        std::fs::write(&other, "0").unwrap();
        let g = switch_on(&p).unwrap();
        assert!(g.switched(), "shares the switch of a live run");
        // The other run ends first: it takes its mark away and leaves delays on for this one.
        std::fs::remove_file(&other).unwrap();
        assert_eq!(setting(&p), "1");
        drop(g);
        assert_eq!(
            setting(&p),
            "0",
            "the last one out puts back what the first found"
        );

        // This run ends first: delays stay on for the other.
        std::fs::write(&p.sysctl, "1").unwrap();
        std::fs::write(&other, "0").unwrap();
        drop(switch_on(&p).unwrap());
        assert_eq!(setting(&p), "1");
    }

    #[test]
    fn on_already_and_not_by_ste_stays_on() {
        let dir = tempfile::tempdir().unwrap();
        let p = places(dir.path(), "1\n");
        let g = switch_on(&p).unwrap();
        assert!(!g.switched());
        drop(g);
        assert_eq!(setting(&p), "1");
        assert_eq!(sweep(&p), None);
    }

    /// The setting at `value`, and the mark of a killed run that found it at `found`.
    fn left_by_a_killed_run(value: &str, found: &str) -> (tempfile::TempDir, Places) {
        let dir = tempfile::tempdir().unwrap();
        let p = places(dir.path(), value);
        std::fs::create_dir(&p.marks).unwrap();
        std::fs::write(p.marks.join("ste-2147483000-5"), found).unwrap();
        (dir, p)
    }

    #[test]
    fn a_killed_runs_switch_is_put_back_by_the_next_run() {
        let (_dir, p) = left_by_a_killed_run("1\n", "0");
        let note = sweep(&p).unwrap();
        assert!(
            note.contains("ste-2147483000-5") && note.contains("back to 0"),
            "{note}"
        );
        assert_eq!(setting(&p), "0");
        assert_eq!(sweep(&p), None, "once");
        // Left alone while a live run still wants delays on.
        std::fs::write(&p.sysctl, "1").unwrap();
        std::fs::write(p.marks.join("ste-2147483000-5"), "0").unwrap();
        let me = own_name(Path::new("/proc/self")).unwrap();
        std::fs::write(p.marks.join(&me), "0").unwrap();
        assert_eq!(sweep(&p), None);
        assert_eq!(setting(&p), "1");
        assert!(
            !p.marks.join("ste-2147483000-5").exists(),
            "the dead mark goes"
        );
    }

    #[test]
    fn with_delays_off_the_marks_are_left_for_a_delays_run() {
        let (_dir, p) = left_by_a_killed_run("0\n", "1");
        assert_eq!(sweep(&p), None);
        assert_eq!(setting(&p), "0");
        assert!(p.marks.join("ste-2147483000-5").exists());
    }
}
