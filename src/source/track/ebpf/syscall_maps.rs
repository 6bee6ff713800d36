//! The kernel's system-call maps, read once the run is over into the summary
//! (`syscalls::Source`).
//!
//! Owns only the reading of those maps. Must not touch the ring buffer.

use super::*;

/// The kernel's system-call maps, read when the run is over.
pub(super) struct BpfSyscalls {
    pub(super) mode: Mode,
    pub(super) maps: Mutex<SyscallMaps>,
}

pub(super) struct SyscallMaps {
    pub(super) totals: PerCpuArray<Total>,
    pub(super) errnos: Hash<ErrnoKey, u64>,
    pub(super) counters: Counters,
}

impl syscalls::Source for BpfSyscalls {
    fn summary(&self) -> Syscalls {
        let maps = self.maps.lock().expect("syscall maps lock");
        let mut counts = Counts::new();
        for idx in 0..NIDX {
            let per_cpu = match maps.totals.get(idx) {
                Ok(v) => v,
                Err(e) => {
                    unreadable(&format!("system-call totals #{idx}"), "left out", &e);
                    continue;
                }
            };
            let mut t = Total::default();
            for v in per_cpu.iter() {
                t.calls += v.calls;
                t.errors += v.errors;
                t.ns += v.ns;
                t.max_ns = t.max_ns.max(v.max_ns);
            }
            if t.calls > 0 {
                let c = call_count(idx, t.calls, t.errors, t.ns, t.max_ns, self.mode.timed());
                counts.insert((c.compat, c.nr), c);
            }
        }
        let mut errnos = Errnos::new();
        for item in maps.errnos.iter() {
            let (k, n) = match item {
                Ok(kv) => kv,
                Err(e) => {
                    unreadable("an entry of the errno counts", "left out", &e);
                    continue;
                }
            };
            let c = call_count(k.idx, 0, 0, 0, 0, false);
            errnos.insert((c.compat, c.nr, k.err), n);
        }
        let uncounted = Uncounted {
            bad_numbers: read_counter(&maps.counters, CNT_BAD_NR),
            errno_unclassified: read_counter(&maps.counters, CNT_ERRNO_FULL),
            per_process_missing: 0,
        };
        syscalls::summarize("ebpf", self.mode, &counts, &errnos, uncounted)
    }
}
