//! The calling process's effective capabilities, from the `CapEff:` line of
//! `/proc/self/status` (proc(5)), to tell before trying whether ste may load BPF.

/// `CAP_SYS_ADMIN`, `CAP_PERFMON` and `CAP_BPF` (include/uapi/linux/capability.h).
pub const CAP_SYS_ADMIN: u32 = 21;
pub const CAP_PERFMON: u32 = 38;
pub const CAP_BPF: u32 = 39;

/// The effective capability mask of a `/proc/PID/status` text.
pub fn parse_cap_eff(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
}

/// The calling process's effective capabilities; `None` if /proc cannot say.
pub fn effective() -> Option<u64> {
    parse_cap_eff(&std::fs::read_to_string("/proc/self/status").ok()?)
}

/// Whether `mask` holds capability `cap`.
pub fn has(mask: u64, cap: u32) -> bool {
    mask & (1 << cap) != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_root_and_nobody() {
        // Captured on this machine: root, then `setpriv --reuid=65534`.
        let root = "Name:\tgrep\nCapInh:\t0000000000000000\nCapPrm:\t000001fffeffffff\nCapEff:\t000001fffeffffff\n";
        let mask = parse_cap_eff(root).unwrap();
        assert!(has(mask, CAP_BPF) && has(mask, CAP_PERFMON) && has(mask, CAP_SYS_ADMIN));
        let nobody = "CapEff:\t0000000000000000\n";
        assert_eq!(parse_cap_eff(nobody), Some(0));
        assert_eq!(parse_cap_eff("Name:\tx\n"), None);
    }
}
