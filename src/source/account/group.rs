//! ste's own cgroup: created next to ste's cgroups before the command starts, the command
//! placed in it before its exec, its figures sampled and read at the end, then removed.
//!
//! Where: cgroup v2 when the unified hierarchy can hold it (a `memory` controller enabled in
//! the subtree of ste's own cgroup's parent and that directory writable by ste: root, or a
//! delegated subtree such as systemd's `user@UID.service`), else v1 `memory`, `cpuacct` and
//! `pids` under ste's own path in each (root only), else v2 without the memory controller
//! (see [`Group::create`]). On the hybrid machine this was written on, the unified hierarchy
//! has no memory controller, so root gets v1 and a user with a delegated v2 subtree gets the
//! group's CPU and members but no group memory figures, and is told so ([`Group::missing`]).
//!
//! Joining before exec: the child, between fork and exec (see `launch/child.rs`), writes `0` to the
//! files [`Group::join_paths`] names: v1 `tasks`, v2 `cgroup.procs`. So every
//! page the command allocates after its exec is charged to the group (charges already made
//! stay where they are: moving a running process moves none of them). The child moves itself
//! rather than ste writing its pid, because a v1 task moving only itself skips the kernel's
//! global thread-group lock, whose write side waits for an RCU grace period (milliseconds, for
//! ste's write of a pid to `cgroup.procs`; next to nothing for the child's `0` to `tasks`:
//! docs/kernel-notes.md, bench/README.md; the child is single-threaded, so moving its one
//! thread moves the process). In v2, where a
//! domain group has no `tasks`, the child's `0` to `cgroup.procs` still waits for the grace
//! period, but in the child, while ste loads BPF.
//!
//! Names are `ste-<PID>-<START>` (`owner`), so a later run recognises the groups of a ste that
//! is gone (killed, crashed) and removes them: leftovers never accumulate. A leftover still
//! holding processes (a daemon the dead ste left) has them moved to the parent first.

use super::owner::{Liveness, own_name};
use crate::kernel::cgroup::{self, HeldFile, Hierarchy, MemoryStat};
use crate::model::GroupEnd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// One directory of the group, in one hierarchy.
struct Dir {
    path: PathBuf,
    /// The controllers it serves: v1 `memory`, `cpuacct`, `pids` (its hierarchy's), v2 those
    /// its parent enables for it (`cgroup.subtree_control`; `cpu.stat` needs none).
    controllers: Vec<String>,
    /// The directory, open with this run's lock on it (`owner::hold`): a run in another PID
    /// namespace cannot take it for a dead run's leftover.
    _held: Option<std::fs::File>,
}

/// Makes the directory `dir` and takes this run's lock on it.
fn make_dir(dir: &Path) -> Result<std::fs::File, String> {
    use std::os::fd::AsFd;
    std::fs::create_dir(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    std::fs::File::open(dir)
        .and_then(|f| super::owner::hold(f.as_fd()).map(|()| f))
        .map_err(|e| format!("cannot hold {}: {e}", dir.display()))
}

pub struct Group {
    pub version: u8,
    dirs: Vec<Dir>,
    /// Figures this group cannot give, each with why (a controller that is not enabled for
    /// it or not mounted): the report says so instead of leaving them out.
    pub missing: Vec<(String, String)>,
    /// The files read every tick, held open from the first read until the group is removed.
    held: OnceLock<Held>,
}

/// The group's usage and its `memory.stat`, each `None` when it could not be opened (the
/// read then says `None` too, as an unreadable file always did).
struct Held {
    usage: Option<HeldFile>,
    stat: Option<HeldFile>,
}

const V1_CONTROLLERS: [&str; 3] = ["memory", "cpuacct", "pids"];

/// Set to a size in bytes, the group's memory is limited to it (v2 `memory.max`, v1
/// `memory.limit_in_bytes`): the tests of OOM kills use it.
const MEMORY_LIMIT_ENV: &str = "STE_TEST_MEMORY_LIMIT";

/// The figures each controller gives, named as the report's unavailable lines name them.
const MEMORY_FIGURES: &str = "group memory peak and its anon/file split";
const PIDS_FIGURES: &str = "pids.peak";
/// cgroup v2 before Linux 5.19: a memory controller, no `memory.peak`.
const EXACT_PEAK: &str = "group memory peak (exact)";
const NO_MEMORY_PEAK: &str = "cgroup v2 has memory.peak from Linux 5.19 only: the group's peak is the highest of ste's readings of memory.current (every 20 ms while it moves), a lower bound";
const CPU_FIGURES: &str = "group CPU";

/// Where a v2 group would go: next to ste's own cgroup, or inside it when it is the top of
/// the hierarchy (the root cgroup may hold processes and children at once).
struct V2Place {
    parent: PathBuf,
    /// The parent's `cgroup.subtree_control`: the controllers a child of it gets.
    controllers: Vec<String>,
}

impl V2Place {
    fn of(h: &Hierarchy) -> Result<V2Place, String> {
        // A sibling, not a child: a cgroup that holds processes cannot also have children
        // with controllers (the "no internal processes" rule), except the root.
        let parent = if h.top {
            h.dir.clone()
        } else {
            h.dir
                .parent()
                .ok_or_else(|| format!("{} has no parent", h.dir.display()))?
                .to_path_buf()
        };
        let controllers = cgroup::read(&parent, "cgroup.subtree_control")
            .map_err(|e| {
                format!(
                    "cannot read {}/cgroup.subtree_control: {e}",
                    parent.display()
                )
            })?
            .split_whitespace()
            .map(str::to_string)
            .collect();
        Ok(V2Place {
            parent,
            controllers,
        })
    }

    fn has(&self, c: &str) -> bool {
        self.controllers.iter().any(|x| x == c)
    }

    fn create(&self, name: &str) -> Result<Group, String> {
        sweep(&self.parent);
        let dir = self.parent.join(name);
        let held = match make_dir(&dir) {
            Ok(f) => f,
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                return Err(e);
            }
        };
        let not_enabled = |c: &str| {
            format!(
                "the cgroup v2 hierarchy does not enable the {c} controller for ste's cgroup ({}/cgroup.subtree_control: {:?})",
                self.parent.display(),
                self.controllers.join(" ")
            )
        };
        let mut missing = Vec::new();
        if !self.has("memory") {
            missing.push((MEMORY_FIGURES.to_string(), not_enabled("memory")));
        } else if !dir.join("memory.peak").exists() {
            missing.push((EXACT_PEAK.to_string(), NO_MEMORY_PEAK.to_string()));
        }
        if !self.has("pids") {
            missing.push((PIDS_FIGURES.to_string(), not_enabled("pids")));
        }
        Ok(Group {
            version: 2,
            dirs: vec![Dir {
                path: dir,
                controllers: self.controllers.clone(),
                _held: Some(held),
            }],
            missing,
            held: OnceLock::new(),
        })
    }
}

impl Group {
    /// Creates the group, after removing leftovers of dead ste runs. `Err` says why none
    /// could be made.
    ///
    /// The choice, best first: v2 with its memory controller (every figure), v1 (every
    /// figure, root only), then v2 without it (a delegated subtree on a machine whose v2
    /// hierarchy has no memory controller, as on this hybrid one: the group's exact CPU, its
    /// members for `--kill-lingering`, and the memory figures said unavailable).
    pub fn create(procfs_self: &Path) -> Result<Group, String> {
        let g = Self::create_any(procfs_self)?;
        match g.limit_for_tests() {
            Ok(()) => Ok(g),
            Err(e) => Err(abandon(g, e)),
        }
    }

    fn create_any(procfs_self: &Path) -> Result<Group, String> {
        let hier = cgroup::hierarchies_of(procfs_self, &V1_CONTROLLERS)
            .map_err(|e| format!("cannot read /proc/self/cgroup and mountinfo: {e}"))?;
        let name = own_name(procfs_self)?;
        let v2 = match hier.iter().find(|h| h.v2) {
            Some(h) => V2Place::of(h),
            None => Err("no cgroup2 hierarchy is mounted".to_string()),
        };
        let mut why = Vec::new();
        if let Ok(place) = &v2
            && place.has("memory")
        {
            match place.create(&name) {
                Ok(g) => return Ok(g),
                Err(e) => why.push(format!("cgroup v2: {e}")),
            }
        }
        match Self::create_v1(&hier, &name) {
            Ok(g) => return Ok(g),
            Err(e) => why.push(format!("cgroup v1: {e}")),
        }
        match &v2 {
            Ok(place) if !place.has("memory") => match place.create(&name) {
                Ok(g) => return Ok(g),
                Err(e) => why.push(format!("cgroup v2: {e}")),
            },
            Ok(_) => {}
            Err(e) => why.push(format!("cgroup v2: {e}")),
        }
        Err(why.join("; "))
    }

    fn create_v1(hier: &[Hierarchy], name: &str) -> Result<Group, String> {
        let mut g = Group {
            version: 1,
            dirs: Vec::new(),
            missing: Vec::new(),
            held: OnceLock::new(),
        };
        for c in V1_CONTROLLERS {
            let Some(h) = hier
                .iter()
                .find(|h| !h.v2 && h.controllers.iter().any(|x| x == c))
            else {
                continue;
            };
            if g.dirs.iter().any(|d| d.has(c)) {
                continue;
            }
            sweep(&h.dir);
            let dir = h.dir.join(name);
            let held = match make_dir(&dir) {
                Ok(f) => Some(f),
                Err(e) if dir.is_dir() => {
                    // Made, but not held: removed with the rest.
                    g.dirs.push(Dir {
                        path: dir,
                        controllers: Vec::new(),
                        _held: None,
                    });
                    return Err(abandon(g, e));
                }
                Err(e) => return Err(abandon(g, e)),
            };
            g.dirs.push(Dir {
                path: dir,
                controllers: h.controllers.clone(),
                _held: held,
            });
        }
        if g.dir_with("memory").is_none() {
            return Err(abandon(g, "no v1 memory hierarchy is mounted".into()));
        }
        for (c, figures) in [("cpuacct", CPU_FIGURES), ("pids", PIDS_FIGURES)] {
            if g.dir_with(c).is_none() {
                g.missing.push((
                    figures.to_string(),
                    format!("no v1 {c} hierarchy is mounted"),
                ));
            }
        }
        Ok(g)
    }

    /// Whether the group's memory is measured (its memory controller is there).
    pub fn has_memory(&self) -> bool {
        self.dir_with("memory").is_some()
    }

    /// Whether the kernel keeps the group's memory peak itself (v1 `max_usage_in_bytes`, v2
    /// `memory.peak`), else ste's readings of its usage give a lower bound.
    pub fn has_exact_peak(&self) -> bool {
        !self.missing.iter().any(|(f, _)| f == EXACT_PEAK)
    }

    pub fn dirs(&self) -> Vec<String> {
        self.dirs
            .iter()
            .map(|d| d.path.display().to_string())
            .collect()
    }

    fn dir_with(&self, controller: &str) -> Option<&Path> {
        self.dirs
            .iter()
            .find(|d| d.has(controller))
            .map(|d| d.path.as_path())
    }

    /// In each directory, the file the child joins by (v1 `tasks`, v2 `cgroup.procs`): it
    /// writes `0` to each (see `launch::Child::join`).
    pub fn join_paths(&self) -> Vec<PathBuf> {
        let file = if self.version == 2 {
            "cgroup.procs"
        } else {
            "tasks"
        };
        self.dirs.iter().map(|d| d.path.join(file)).collect()
    }

    /// The files read every tick, opened at the first call.
    fn held(&self) -> Option<&Held> {
        let dir = self.dir_with("memory")?;
        Some(self.held.get_or_init(|| {
            Held {
                usage: HeldFile::open(
                    dir,
                    if self.version == 2 {
                        "memory.current"
                    } else {
                        "memory.usage_in_bytes"
                    },
                )
                .ok(),
                stat: HeldFile::open(dir, "memory.stat").ok(),
            }
        }))
    }

    /// Current usage (one read of one number: cheap enough for every tick).
    pub fn usage_now(&self) -> Option<u64> {
        self.held()?.usage.as_ref()?.read_number()
    }

    /// The current anon/file split (`memory.stat`: ~40 lines to format and parse, several
    /// times the cost of the usage).
    pub fn stat_now(&self) -> Option<MemoryStat> {
        let text = self.held()?.stat.as_ref()?.read().ok()?;
        cgroup::memory_stat(&cgroup::parse_keyed(&text), self.version == 2)
    }

    /// The exact figures, read once the tree has ended.
    pub fn end(&self) -> GroupEnd {
        let mut e = GroupEnd::default();
        if let Some(dir) = self.dir_with("memory") {
            if self.version == 2 {
                e.memory_peak_bytes = cgroup::read_number(dir, "memory.peak");
            } else {
                e.memory_peak_bytes = cgroup::read_number(dir, "memory.max_usage_in_bytes");
                e.kernel_peak_bytes = cgroup::read_number(dir, "memory.kmem.max_usage_in_bytes");
            }
            if let Some(stat) = self.stat_now() {
                e.anon_bytes = Some(stat.anon_bytes);
                e.file_bytes = Some(stat.file_bytes);
            }
        }
        if self.version == 2 {
            if let Some(dir) = self.dirs.first().map(|d| d.path.as_path())
                && let Ok(text) = cgroup::read(dir, "cpu.stat")
            {
                let k = cgroup::parse_keyed(&text);
                e.cpu_user_ns = k.get("user_usec").map(|v| v * 1000);
                e.cpu_sys_ns = k.get("system_usec").map(|v| v * 1000);
                e.cpu_ns = k.get("usage_usec").map(|v| v * 1000);
            }
        } else if let Some(dir) = self.dir_with("cpuacct") {
            // usage is exact; usage_user/_sys are tick samples: split it as getrusage does.
            // (v2's cpu.stat already applies the same adjustment.)
            e.cpu_ns = cgroup::read_number(dir, "cpuacct.usage");
            // Both tick samples in one file (each CPU's); the two files of their sums if not.
            let ticks = cgroup::read(dir, "cpuacct.usage_all")
                .ok()
                .and_then(|t| cgroup::parse_usage_all(&t))
                .or_else(|| {
                    Some((
                        cgroup::read_number(dir, "cpuacct.usage_user")?,
                        cgroup::read_number(dir, "cpuacct.usage_sys")?,
                    ))
                });
            if let (Some(all), Some((u, s))) = (e.cpu_ns, ticks) {
                let (user, system) = super::split_runtime(all, u, s);
                e.cpu_user_ns = Some(user);
                e.cpu_sys_ns = Some(system);
            }
        }
        if let Some(dir) = self.dir_with("pids") {
            e.pids_peak = cgroup::read_number(dir, "pids.peak");
        }
        e.oom_kills = self.oom_kills();
        e
    }

    /// Processes of the group the OOM killer killed: v2 `memory.events` (hierarchical, and
    /// the group has no children), v1 `memory.oom_control` (since Linux 4.13). The kernel
    /// counts a victim in its own group whichever limit ran out, the group's, a parent's or
    /// the machine's (`__oom_kill_process`).
    fn oom_kills(&self) -> Option<u64> {
        let dir = self.dir_with("memory")?;
        let file = if self.version == 2 {
            "memory.events"
        } else {
            "memory.oom_control"
        };
        let text = cgroup::read(dir, file).ok()?;
        cgroup::parse_keyed(&text).get("oom_kill").copied()
    }

    /// Limits the group's memory to what [`MEMORY_LIMIT_ENV`] says, for the tests of OOM kills
    /// (a test cannot place ste in a cgroup of its own making without changing what it
    /// measures); nothing when it is not set.
    fn limit_for_tests(&self) -> Result<(), String> {
        let Some(bytes) = std::env::var(MEMORY_LIMIT_ENV)
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
        else {
            return Ok(());
        };
        let dir = self
            .dir_with("memory")
            .ok_or_else(|| format!("{MEMORY_LIMIT_ENV}: the group has no memory controller"))?;
        let file = if self.version == 2 {
            "memory.max"
        } else {
            "memory.limit_in_bytes"
        };
        std::fs::write(dir.join(file), bytes.to_string()).map_err(|e| {
            format!(
                "{MEMORY_LIMIT_ENV}: cannot write {}/{file}: {e}",
                dir.display()
            )
        })
    }

    /// The processes in the group now.
    pub fn members(&self) -> Vec<i32> {
        self.dirs
            .first()
            .and_then(|d| cgroup::procs(&d.path).ok())
            .unwrap_or_default()
    }

    /// Sends `signal` to everything in the group (v2 `cgroup.kill` for SIGKILL where the
    /// kernel has it). Returns the pids signalled.
    pub fn kill(&self, signal: i32) -> Vec<i32> {
        let members = self.members();
        if self.version == 2
            && signal == libc::SIGKILL
            && let Some(d) = self.dirs.first()
            && std::fs::write(d.path.join("cgroup.kill"), "1").is_ok()
        {
            return members;
        }
        for &pid in &members {
            // The pids are members of ste's own group.
            let _ = crate::kernel::calls::kill(pid, signal);
        }
        members
    }

    /// Removes every directory (members, if any are left, are moved to the parent first).
    /// Returns what could not be removed, one line each (path and why).
    pub fn remove(&mut self) -> Vec<String> {
        // An open file keeps a removed group's structures alive in the kernel until closed.
        self.held.take();
        self.dirs
            .drain(..)
            .filter_map(|d| {
                remove_dir(&d.path)
                    .err()
                    .map(|e| format!("{}: {e}", d.path.display()))
            })
            .collect()
    }
}

impl Dir {
    fn has(&self, c: &str) -> bool {
        self.controllers.iter().any(|x| x == c)
    }
}

impl Drop for Group {
    /// The last resort (a panic, an early return): a removal that can say what it could not
    /// remove is [`Group::remove`], which leaves nothing for this.
    fn drop(&mut self) {
        self.remove();
    }
}

/// Removes a group that could not be completed; `why` names the failure, and what could not
/// be removed is added to it.
fn abandon(mut g: Group, why: String) -> String {
    let left = g.remove();
    if left.is_empty() {
        why
    } else {
        format!("{why}; and ste could not remove {}", left.join(", "))
    }
}

/// Removes a group directory, moving any process still in it to the parent.
fn remove_dir(dir: &Path) -> std::io::Result<()> {
    if std::fs::remove_dir(dir).is_ok() {
        return Ok(());
    }
    if let (Ok(pids), Some(parent)) = (cgroup::procs(dir), dir.parent()) {
        for pid in pids {
            let _ = std::fs::write(parent.join("cgroup.procs"), pid.to_string());
        }
    }
    std::fs::remove_dir(dir)
}

/// Removes the groups in `parent` whose ste is gone (no such pid, or a pid reused by a
/// process that started at another time).
pub fn sweep(parent: &Path) {
    // A directory's link count is 2 plus its subdirectories (in cgroupfs, as in ext4 and
    // tmpfs): at 2 there is no group to sweep, and one stat spares listing the directory,
    // which in a v1 hierarchy's root holds every controller file, at each run's start-up.
    if std::fs::metadata(parent).is_ok_and(|m| m.nlink() == 2) {
        return;
    }
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    let mut liveness = Liveness::default();
    for e in entries.flatten() {
        if e.file_name().to_str().and_then(|n| liveness.is_gone(n)) != Some(true) {
            continue;
        }
        // Gone by its name, in this PID namespace; gone indeed only if no run holds it (one
        // in another namespace names itself by its pid there). Held by this sweep until the
        // removal, so that no run takes it meanwhile.
        let Ok(dir) = std::fs::File::open(e.path()) else {
            continue;
        };
        if super::owner::held(std::os::fd::AsFd::as_fd(&dir)) {
            continue;
        }
        // Another run's leftover: what cannot be removed now is tried again next time.
        let _ = remove_dir(&e.path());
    }
}

#[cfg(test)]
impl Group {
    /// A group of plain directories (rmdir works the same on empty ones), for tests.
    pub(super) fn of_plain_dirs(paths: &[PathBuf]) -> Group {
        Group {
            version: 1,
            dirs: paths
                .iter()
                .map(|p| Dir {
                    path: p.clone(),
                    controllers: Vec::new(),
                    _held: None,
                })
                .collect(),
            missing: Vec::new(),
            held: OnceLock::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A v2 group with the memory controller, as on machines whose unified hierarchy has it
    /// (this one's has not): its end figures from files in the kernel's formats (as
    /// Documentation/admin-guide/cgroup-v2.rst gives them; the values are made up).
    #[test]
    fn a_v2_groups_end_figures_come_from_memory_peak_memory_stat_cpu_stat_and_pids_peak() {
        let dir = tempfile::tempdir().unwrap();
        let files = [
            ("memory.peak", "629407744\n"),
            ("memory.current", "1261568\n"),
            (
                "memory.stat",
                "anon 524288\nfile 67305472\nkernel 737280\nkernel_stack 16384\nshmem 0\n",
            ),
            (
                "cpu.stat",
                "usage_usec 1514339\nuser_usec 1203111\nsystem_usec 311228\nnr_periods 0\n",
            ),
            ("pids.peak", "4\n"),
            (
                "memory.events",
                "low 0\nhigh 0\nmax 31\noom 2\noom_kill 2\noom_group_kill 0\n",
            ),
        ];
        for (f, text) in files {
            std::fs::write(dir.path().join(f), text).unwrap();
        }
        let g = Group {
            version: 2,
            dirs: vec![Dir {
                path: dir.path().to_path_buf(),
                controllers: vec!["memory".into(), "pids".into()],
                _held: None,
            }],
            missing: Vec::new(),
            held: OnceLock::new(),
        };
        assert_eq!(g.usage_now(), Some(1261568));
        // The file is held open from the first read, and each read is of what it says now.
        std::fs::write(dir.path().join("memory.current"), "1265664\n").unwrap();
        assert_eq!(g.usage_now(), Some(1265664));
        let e = g.end();
        assert_eq!(e.memory_peak_bytes, Some(629407744));
        assert_eq!(e.kernel_peak_bytes, None, "v1 only");
        assert_eq!((e.anon_bytes, e.file_bytes), (Some(524288), Some(67305472)));
        assert_eq!(e.cpu_ns, Some(1514339000));
        assert_eq!(
            (e.cpu_user_ns, e.cpu_sys_ns),
            (Some(1203111000), Some(311228000))
        );
        assert_eq!(e.pids_peak, Some(4));
        assert_eq!(e.oom_kills, Some(2));
        assert_eq!(
            g.join_paths(),
            vec![dir.path().join("cgroup.procs")],
            "a v2 domain group is joined by cgroup.procs"
        );
        std::mem::forget(g); // its directory is the tempdir's
    }

    /// v1 counts OOM kills in `memory.oom_control` (since Linux 4.13), beside its flags.
    #[test]
    fn a_v1_groups_oom_kills_come_from_memory_oom_control() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
        )
        .unwrap();
        let g = Group {
            version: 1,
            dirs: vec![Dir {
                path: dir.path().to_path_buf(),
                controllers: vec!["memory".into()],
                _held: None,
            }],
            missing: Vec::new(),
            held: OnceLock::new(),
        };
        assert_eq!(g.end().oom_kills, Some(1));
        std::mem::forget(g); // its directory is the tempdir's
    }

    #[test]
    fn removing_says_what_could_not_be_removed() {
        let dir = tempfile::tempdir().unwrap();
        let paths: Vec<_> = ["memory", "pids"].map(|n| dir.path().join(n)).into();
        for p in &paths {
            std::fs::create_dir(p).unwrap();
        }
        // rmdir fails on a directory that is not empty.
        std::fs::write(paths[1].join("busy"), "").unwrap();
        let mut g = Group::of_plain_dirs(&paths);
        let left = g.remove();
        assert_eq!(left.len(), 1, "{left:?}");
        assert!(
            left[0].starts_with(&format!("{}: ", paths[1].display()))
                && left[0].contains("not empty"),
            "{left:?}"
        );
        assert!(!paths[0].exists());
        // Nothing is left for the drop to try again.
        assert!(g.dirs.is_empty());
    }

    #[test]
    fn sweep_removes_only_dead_runs() {
        // Plain directories stand in for cgroups: rmdir works the same on empty ones.
        let dir = tempfile::tempdir().unwrap();
        let me = own_name(Path::new("/proc/self")).unwrap();
        let dead = "ste-2147483000-5"; // no such pid
        let reused = format!("ste-{}-1", std::process::id()); // this pid, another start
        for n in [me.as_str(), dead, reused.as_str(), "other"] {
            std::fs::create_dir(dir.path().join(n)).unwrap();
        }
        // The link count the sweep reads first counts these subdirectories.
        assert!(std::fs::metadata(dir.path()).unwrap().nlink() > 2);
        sweep(dir.path());
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        let mut want = vec![me, "other".to_string()];
        want.sort();
        assert_eq!(left, want);
    }
}
