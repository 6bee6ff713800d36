//! The calling thread's effective capabilities, to tell before trying whether ste may load
//! BPF: from capget(2) (through the `caps` crate), one system call, rather than the `CapEff:`
//! line of `/proc/self/status`, whose whole text the kernel builds for each read (and which
//! shows the main thread's capabilities, not the caller's).

/// `CAP_NET_ADMIN`, `CAP_SYS_PTRACE`, `CAP_SYS_ADMIN`, `CAP_PERFMON` and `CAP_BPF`
/// (include/uapi/linux/capability.h).
pub const CAP_NET_ADMIN: u32 = 12;
pub const CAP_SYS_PTRACE: u32 = 19;
pub const CAP_SYS_ADMIN: u32 = 21;
pub const CAP_PERFMON: u32 = 38;
pub const CAP_BPF: u32 = 39;

/// The calling thread's effective capability mask; `None` if the kernel will not say.
pub fn effective() -> Option<u64> {
    ::caps::read(None, ::caps::CapSet::Effective)
        .ok()
        .map(|set| set.iter().fold(0, |mask, c| mask | c.bitmask()))
}

/// Whether `mask` holds capability `cap`.
pub fn has(mask: u64, cap: u32) -> bool {
    mask & (1 << cap) != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The effective mask of a `/proc/.../status` text (`CapEff:`), as proc(5) gives it.
    fn cap_eff(status: &str) -> Option<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix("CapEff:"))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
    }

    #[test]
    fn the_mask_is_the_one_proc_shows_for_this_thread() {
        let proc = std::fs::read_to_string("/proc/thread-self/status").unwrap();
        let mask = effective().unwrap();
        assert_eq!(Some(mask), cap_eff(&proc));
        // As root, the bits the loader asks for are where the kernel puts them.
        if crate::kernel::calls::is_root() {
            assert!(has(mask, CAP_BPF) && has(mask, CAP_PERFMON) && has(mask, CAP_SYS_ADMIN));
        }
    }
}
