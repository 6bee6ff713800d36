//! The running kernel's version (`uname -r`), for what ste decides by it: the interfaces and
//! behaviours a kernel has from a given version on, each named here with the version that
//! brought it, where nothing the kernel exposes tells them apart (kernel-notes.md has how
//! each was found). Distributions backport features, never take them away: each test is
//! "at least", so a backport only leaves ste on the older, slower way.
//!
//! Owns the parse and the list; must not read any other kernel interface.

use std::sync::OnceLock;

/// A kernel's major and minor version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u32, pub u32);

impl Version {
    /// The version of a release string (`6.1.0-27-amd64`: 6.1); 0.0 when it has none.
    pub fn parse(release: &str) -> Version {
        let mut it = release
            .split(|c: char| !c.is_ascii_digit())
            .map(|s| s.parse::<u32>().unwrap_or(0));
        Version(it.next().unwrap_or(0), it.next().unwrap_or(0))
    }

    /// The running kernel's (read once).
    pub fn running() -> Version {
        static RUNNING: OnceLock<Version> = OnceLock::new();
        *RUNNING.get_or_init(|| {
            nix::sys::utsname::uname()
                .map(|u| Version::parse(&u.release().to_string_lossy()))
                .unwrap_or(Version(0, 0))
        })
    }

    fn at_least(self, major: u32, minor: u32) -> bool {
        self >= Version(major, minor)
    }

    /// BPF maps and programs charged to the memory cgroup; before, to the user's limit on
    /// locked memory (RLIMIT_MEMLOCK, 64 KiB by default then).
    pub fn bpf_memory_in_cgroups(self) -> bool {
        self.at_least(5, 11)
    }

    /// bpf() commands on a descriptor a privileged process opened (a map's lookups), without
    /// capabilities, under `kernel.unprivileged_bpf_disabled`.
    pub fn bpf_fd_commands_unprivileged(self) -> bool {
        self.at_least(5, 19)
    }

    /// BPF task-local storage from tracing programs (`bpf_task_storage_get`; the map type came
    /// in 5.11 for BPF LSM programs only).
    pub fn bpf_task_storage(self) -> bool {
        self.at_least(5, 12)
    }

    /// The `prev_state` argument of the sched_switch tracepoint.
    pub fn sched_switch_prev_state(self) -> bool {
        self.at_least(5, 18)
    }

    /// `bpf_get_attach_cookie` for uprobes, and `BPF_LINK_CREATE` of a perf event.
    pub fn bpf_uprobe_cookie(self) -> bool {
        self.at_least(5, 15)
    }

    /// The mm still attached at the sched_process_exit tracepoint (before, `exit_mm()` ran
    /// first): the exit's high-water mark can be read there.
    pub fn mm_at_exit_tracepoint(self) -> bool {
        self.at_least(6, 16)
    }

    /// The proc connector's event filter, and its subscribers without CAP_NET_ADMIN.
    pub fn cn_proc_filter_and_unprivileged(self) -> bool {
        self.at_least(6, 6)
    }

    /// The RSS counters summed exactly (per-CPU counters); before, each thread caches up to
    /// 64 changes of them (SPLIT_RSS_COUNTING), which VmRSS, VmHWM and statm lag by.
    pub fn exact_rss_counters(self) -> bool {
        self.at_least(6, 2)
    }

    /// How far below the truth VmRSS, VmHWM and statm may be, a thread of the process, when
    /// the counters are not exact (before 6.2): 64 page faults kept to the thread
    /// (TASK_RSS_EVENTS_THRESH), each mapping up to 16 pages with fault-around
    /// (`fault_around_bytes`, 64 KiB); 0 from 6.2. For the sampler's bounds.
    pub fn rss_counter_lag_per_thread(self) -> u64 {
        if self.exact_rss_counters() {
            0
        } else {
            64 * 16 * 4096
        }
    }

    /// cgroup v2 `memory.peak`.
    pub fn cgroup2_memory_peak(self) -> bool {
        self.at_least(5, 19)
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.0, self.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_parse_to_their_version() {
        assert_eq!(Version::parse("6.18.44-fc-v595"), Version(6, 18));
        assert_eq!(Version::parse("5.10.0-46-amd64"), Version(5, 10));
        assert_eq!(Version::parse("6.12.95+deb12-amd64"), Version(6, 12));
        assert_eq!(Version::parse("garbage"), Version(0, 0));
        assert!(Version(6, 6).cn_proc_filter_and_unprivileged());
        assert!(!Version(6, 1).cn_proc_filter_and_unprivileged());
        assert!(!Version(5, 10).bpf_task_storage());
        assert!(Version(5, 12).bpf_task_storage());
        assert!(!Version(6, 12).mm_at_exit_tracepoint());
        assert!(Version(6, 16).mm_at_exit_tracepoint());
        assert!(Version(10, 0) > Version(6, 18));
        assert_eq!(Version(6, 1).rss_counter_lag_per_thread(), 4 << 20);
        assert_eq!(Version(6, 2).rss_counter_lag_per_thread(), 0);
    }
}
