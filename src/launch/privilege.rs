//! What ste keeps of root's capabilities once the command runs.
//!
//! Owns the policy: which capabilities each of ste's threads still needs after start-up, and
//! dropping the rest. Everything privileged that only start-up needs (loading BPF, creating the
//! cgroup, registering for taskstats, forking the command) is done before the command is
//! released; after that a thread keeps only what its own work needs. Capabilities belong to
//! threads in Linux (capset(2) changes the calling thread only), so each thread drops its own:
//! a thread as it starts, the session thread as it releases the command. Threads started after
//! a drop inherit the smaller set. The permitted set is reduced too, so a dropped capability
//! cannot be taken back. Must not set anything up itself.
//!
//! Unprivileged, or without capabilities at all, there is nothing to drop and nothing is done.

use caps::{CapSet, Capability, CapsHashSet};

/// The work a thread does once the command runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The session thread: forwards signals to the command and kills lingering processes
    /// (`CAP_KILL`: the command may run as the user who invoked sudo); at the end it removes
    /// the cgroup (`CAP_DAC_OVERRIDE`: its parent directory may belong to another user, or be
    /// the root of a v1 hierarchy, `r-x` even for root) and
    /// switches `kernel.task_delayacct` back off (`CAP_SYS_ADMIN`, which the sysctl demands);
    /// it reads the BPF system-call counts at the end (`CAP_BPF` where the kernel asks for it
    /// on every bpf() call: `bpf_maps`).
    Session {
        cgroup: bool,
        restores_delays: bool,
        bpf_maps: bool,
    },
    /// A tracker's thread (ptrace, netlink, ebpf): ptrace itself, and the tree's
    /// `/proc/PID/{io,status,…}`, which another user's processes only show with
    /// `CAP_SYS_PTRACE`; the ebpf reader reads the SDT probes' maps at the end (`CAP_BPF`
    /// where the kernel asks for it on every bpf() call: `bpf_maps`).
    Tracker { bpf_maps: bool },
    /// The sampler: the tree's `smaps_rollup`, `status` and `maps` (`CAP_SYS_PTRACE`); with
    /// page flags (`--maps-at-peak`), `/proc/kpageflags` and pagemap's frame numbers
    /// (`CAP_SYS_ADMIN`).
    Sampler { page_flags: bool },
    /// Threads that wait, or read only what was opened for them: signals, the reaper, the
    /// accounts listener, the record writer.
    Helper,
}

impl Role {
    /// The capabilities this role keeps, each for the reason given on the variant.
    pub fn keeps(self) -> Vec<Capability> {
        let mut keep = Vec::new();
        match self {
            Role::Session {
                cgroup,
                restores_delays,
                bpf_maps,
            } => {
                keep.push(Capability::CAP_KILL);
                if cgroup {
                    keep.push(Capability::CAP_DAC_OVERRIDE);
                }
                if restores_delays {
                    keep.push(Capability::CAP_SYS_ADMIN);
                }
                if bpf_maps {
                    keep.push(Capability::CAP_BPF);
                }
            }
            Role::Tracker { bpf_maps } => {
                keep.push(Capability::CAP_SYS_PTRACE);
                if bpf_maps {
                    keep.push(Capability::CAP_BPF);
                }
            }
            Role::Sampler { page_flags } => {
                keep.push(Capability::CAP_SYS_PTRACE);
                if page_flags {
                    keep.push(Capability::CAP_SYS_ADMIN);
                }
            }
            Role::Helper => {}
        }
        keep
    }
}

/// Reduces the calling thread's capabilities to what `role` keeps (and had). Returns what it
/// kept, or `None` when the thread had no capabilities to drop.
pub fn limit(role: Role) -> Result<Option<Vec<Capability>>, String> {
    let permitted =
        caps::read(None, CapSet::Permitted).map_err(|e| format!("reading capabilities: {e}"))?;
    if permitted.is_empty() {
        return Ok(None);
    }
    let keep: CapsHashSet = role
        .keeps()
        .into_iter()
        .filter(|c| permitted.contains(c))
        .collect();
    let fail = |what: &str, e: caps::errors::CapsError| format!("dropping {what}: {e}");
    // Ambient and inheritable first: they may not exceed the permitted set, and nothing ste
    // runs after this should inherit anything.
    caps::clear(None, CapSet::Ambient).map_err(|e| fail("ambient capabilities", e))?;
    caps::clear(None, CapSet::Inheritable).map_err(|e| fail("inheritable capabilities", e))?;
    // Effective before permitted: the effective set must stay a subset of the permitted one.
    caps::set(None, CapSet::Effective, &keep).map_err(|e| fail("effective capabilities", e))?;
    caps::set(None, CapSet::Permitted, &keep).map_err(|e| fail("permitted capabilities", e))?;
    let mut kept: Vec<_> = keep.into_iter().collect();
    kept.sort_by_key(|c| c.index());
    Ok(Some(kept))
}

/// [`limit`] for a thread that has a sink: a failure is said in the report, not lost.
pub fn limit_or_say(role: Role, sink: &crate::bus::sink::Sink) {
    if let Err(e) = limit(role) {
        sink.emit(crate::bus::event::Event::Note {
            text: format!(
                "ste could not drop the capabilities its {} thread does not need: {e}",
                std::thread::current().name().unwrap_or("unnamed")
            ),
        });
    }
}

/// Whether a thread that reads BPF maps after it dropped its capabilities must keep
/// `CAP_BPF`: before Linux 5.19, `kernel.unprivileged_bpf_disabled` refuses every bpf() call
/// without it, even on a map's descriptor opened while privileged (EPERM).
pub fn bpf_maps_need_capability() -> bool {
    !crate::kernel::release::Version::running().bpf_fd_commands_unprivileged()
}

/// The report's line on what ste kept, for the session, tracker and sampler roles of this run.
pub fn summary(session: Role, tracker: Role, sampler: Role) -> String {
    let names = |r: Role| {
        let k = r.keeps();
        if k.is_empty() {
            "nothing".to_string()
        } else {
            k.iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    format!(
        "once the command was released, ste kept only these capabilities: session {}; trackers {}; sampler {}; other threads {} (the rest were dropped)",
        names(session),
        names(tracker),
        names(sampler),
        names(Role::Helper)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_role_keeps_only_its_reasons() {
        assert_eq!(Role::Helper.keeps(), vec![]);
        assert_eq!(
            Role::Tracker { bpf_maps: false }.keeps(),
            vec![Capability::CAP_SYS_PTRACE]
        );
        assert_eq!(
            Role::Session {
                cgroup: false,
                restores_delays: false,
                bpf_maps: false,
            }
            .keeps(),
            vec![Capability::CAP_KILL]
        );
        assert!(
            Role::Session {
                cgroup: false,
                restores_delays: false,
                bpf_maps: true,
            }
            .keeps()
            .contains(&Capability::CAP_BPF)
        );
        assert!(
            Role::Sampler { page_flags: true }
                .keeps()
                .contains(&Capability::CAP_SYS_ADMIN)
        );
        assert!(
            !Role::Sampler { page_flags: false }
                .keeps()
                .contains(&Capability::CAP_SYS_ADMIN)
        );
    }

    #[test]
    fn the_summary_names_what_is_kept() {
        let s = summary(
            Role::Session {
                cgroup: true,
                restores_delays: false,
                bpf_maps: false,
            },
            Role::Tracker { bpf_maps: false },
            Role::Sampler { page_flags: false },
        );
        assert!(s.contains("session CAP_KILL, CAP_DAC_OVERRIDE"), "{s}");
        assert!(s.contains("trackers CAP_SYS_PTRACE"), "{s}");
        assert!(s.contains("other threads nothing"), "{s}");
    }
}
