//! What a run cost ste itself and the tree it reaped: `getrusage` of ste and of its children,
//! noted as early as the binary can and differenced at the end (both survive the `execve`
//! that started ste), and ste's own high-water RSS.
//!
//! Owns those counters only: reads no other process and formats no figure (the report does).

/// `getrusage` of ste and of its reaped children when ste started (see [`note_start`]).
static AT_START: std::sync::OnceLock<[(u64, u64); 2]> = std::sync::OnceLock::new();

/// Notes ste's CPU counters as they are before the run, as early as the binary can (its
/// `main` calls this first). Both counters survive `execve`: `RUSAGE_SELF` holds what the
/// process did before it exec'd ste, `RUSAGE_CHILDREN` what its reaped children did (`cargo
/// run` builds, then execs ste), and neither is the run's. Later calls change nothing.
pub fn note_start() {
    AT_START.get_or_init(|| [rusage(libc::RUSAGE_CHILDREN), rusage(libc::RUSAGE_SELF)]);
}

/// What the run itself cost: counters differenced from [`note_start`]'s values.
pub(super) struct OwnUsage {
    /// (user ns, system ns) of the reaped tree.
    pub(super) children: (u64, u64),
    /// (user ns, system ns) of ste itself.
    pub(super) me: (u64, u64),
    /// ste's high-water RSS: `VmHWM` of its own memory map, which exec made new (`ru_maxrss`
    /// carries the pre-exec image's peak over, so it is the fallback only).
    pub(super) max_rss_bytes: u64,
}

impl OwnUsage {
    pub(super) fn since_start() -> Self {
        let [children0, me0] = *AT_START.get_or_init(|| [(0, 0), (0, 0)]);
        let since = |now: (u64, u64), then: (u64, u64)| {
            (now.0.saturating_sub(then.0), now.1.saturating_sub(then.1))
        };
        let max_rss_bytes = crate::kernel::proc::ProcFs::default()
            .status(std::process::id() as i32)
            .ok()
            .and_then(|s| s.vm_hwm_bytes)
            .unwrap_or_else(max_rss_self);
        OwnUsage {
            children: since(rusage(libc::RUSAGE_CHILDREN), children0),
            me: since(rusage(libc::RUSAGE_SELF), me0),
            max_rss_bytes,
        }
    }
}

use crate::kernel::calls::rusage as getrusage;

/// (user ns, system ns) of `who`.
fn rusage(who: libc::c_int) -> (u64, u64) {
    let ru = getrusage(who);
    let ns = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000_000 + tv.tv_usec as u64 * 1_000;
    (ns(ru.ru_utime), ns(ru.ru_stime))
}

fn max_rss_self() -> u64 {
    getrusage(libc::RUSAGE_SELF).ru_maxrss as u64 * 1024
}
