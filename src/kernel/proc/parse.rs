//! The text of `/proc/PID/*` files, parsed: pure functions from captured text to ste's own
//! types, unit-tested on captures.
//!
//! Owns the knowledge of proc(5) formats. Reads no file (the readers are `super`'s `ProcFs`)
//! and knows nothing about trackers or the Run model.

/// The figures ste uses from `/proc/PID/smaps_rollup` (all in bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Rollup {
    pub rss_bytes: u64,
    pub pss_bytes: u64,
    pub pss_anon_bytes: u64,
    pub pss_file_bytes: u64,
    pub pss_shmem_bytes: u64,
    pub swap_bytes: u64,
    /// Resident anonymous memory (`Anonymous`).
    pub anon_bytes: u64,
}

/// The figures ste uses from `/proc/PID/status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Status {
    pub tgid: Option<i32>,
    pub ppid: Option<i32>,
    pub threads: Option<u32>,
    pub vm_hwm_bytes: Option<u64>,
    pub vm_rss_bytes: Option<u64>,
    /// The file-backed and shared-memory part of `VmRSS` (`RssFile` + `RssShmem`): the same
    /// counters as `statm`'s `shared`.
    pub rss_shared_bytes: Option<u64>,
}

/// The figures ste uses from `/proc/PID/stat`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    pub comm: Vec<u8>,
    pub state: u8,
    pub ppid: i32,
    pub num_threads: i64,
    /// Clock ticks since boot.
    pub starttime: u64,
    /// User CPU of all its threads (live and reaped), in clock ticks.
    pub utime_ticks: u64,
    /// System CPU of all its threads, in clock ticks.
    pub stime_ticks: u64,
    /// Minor faults of all its threads (live and reaped).
    pub minflt: u64,
}

/// Parses `smaps_rollup` text. Returns `None` when the `Pss:` line is missing (a kernel thread
/// or a process whose mm is gone prints only the header).
pub fn parse_smaps_rollup(text: &str) -> Option<Rollup> {
    let mut r = Rollup::default();
    let mut seen_pss = false;
    for line in text.lines() {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let Some(kb) = kb_value(rest) else { continue };
        match key {
            "Rss" => r.rss_bytes = kb,
            "Pss" => {
                r.pss_bytes = kb;
                seen_pss = true;
            }
            "Pss_Anon" => r.pss_anon_bytes = kb,
            "Pss_File" => r.pss_file_bytes = kb,
            "Pss_Shmem" => r.pss_shmem_bytes = kb,
            "Swap" => r.swap_bytes = kb,
            "Anonymous" => r.anon_bytes = kb,
            _ => {}
        }
    }
    seen_pss.then_some(r)
}

/// Parses `status` text (only the fields ste uses).
pub fn parse_status(text: &str) -> Status {
    let mut s = Status::default();
    let (mut file, mut shmem) = (None, None);
    for line in text.lines() {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        match key {
            "Tgid" => s.tgid = rest.trim().parse().ok(),
            "PPid" => s.ppid = rest.trim().parse().ok(),
            "Threads" => s.threads = rest.trim().parse().ok(),
            "VmHWM" => s.vm_hwm_bytes = kb_value(rest),
            "VmRSS" => s.vm_rss_bytes = kb_value(rest),
            "RssFile" => file = kb_value(rest),
            "RssShmem" => shmem = kb_value(rest),
            _ => {}
        }
    }
    s.rss_shared_bytes = file.zip(shmem).and_then(|(f, m)| f.checked_add(m));
    s
}

/// `/proc/PID/io` of a thread group. See proc(5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IoCounters {
    pub rchar_bytes: u64,
    pub wchar_bytes: u64,
    pub syscr: u64,
    pub syscw: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub cancelled_write_bytes: u64,
}

/// Parses `io` text. Returns `None` if a field is missing (kernel without task I/O accounting).
pub fn parse_io(text: &str) -> Option<IoCounters> {
    let mut io = IoCounters::default();
    let mut seen = 0;
    for line in text.lines() {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let Ok(v) = rest.trim().parse::<u64>() else {
            continue;
        };
        let slot = match key {
            "rchar" => &mut io.rchar_bytes,
            "wchar" => &mut io.wchar_bytes,
            "syscr" => &mut io.syscr,
            "syscw" => &mut io.syscw,
            "read_bytes" => &mut io.read_bytes,
            "write_bytes" => &mut io.write_bytes,
            "cancelled_write_bytes" => &mut io.cancelled_write_bytes,
            _ => continue,
        };
        *slot = v;
        seen += 1;
    }
    (seen == 7).then_some(io)
}

/// Parses `stat`. The comm field is in parentheses and may itself contain spaces and `)`, so
/// the fields are taken after the *last* `)`.
pub fn parse_stat(text: &[u8]) -> Option<Stat> {
    let open = text.iter().position(|&b| b == b'(')?;
    let close = text.iter().rposition(|&b| b == b')')?;
    let comm = text.get(open + 1..close)?.to_vec();
    let rest = std::str::from_utf8(text.get(close + 1..)?).ok()?;
    let f: Vec<&str> = rest.split_ascii_whitespace().collect();
    // After comm: state(3) ppid(4) ... utime(14) stime(15) ... num_threads(20) ...
    // starttime(22); f[0] is field 3.
    Some(Stat {
        comm,
        state: *f.first()?.as_bytes().first()?,
        ppid: f.get(1)?.parse().ok()?,
        num_threads: f.get(17)?.parse().ok()?,
        starttime: f.get(19)?.parse().ok()?,
        utime_ticks: f.get(11)?.parse().ok()?,
        stime_ticks: f.get(12)?.parse().ok()?,
        minflt: f.get(7)?.parse().ok()?,
    })
}

/// Splits `cmdline` (NUL-separated, usually NUL-terminated) into argv.
pub fn parse_cmdline(bytes: &[u8]) -> Vec<Vec<u8>> {
    let body = bytes.strip_suffix(&[0]).unwrap_or(bytes);
    if body.is_empty() {
        return Vec::new();
    }
    // Sized first: the outer vector was regrown (reallocated) for each argv of a fork storm.
    let mut argv = Vec::with_capacity(memchr::memchr_iter(0, body).count() + 1);
    let mut start = 0;
    for nul in memchr::memchr_iter(0, body) {
        argv.push(body[start..nul].to_vec());
        start = nul + 1;
    }
    argv.push(body[start..].to_vec());
    argv
}

/// `syscall` (proc(5)): `None` when the task is running, else the number of the system call it
/// is blocked in (`-1`: blocked outside any).
pub fn parse_syscall(text: &str) -> Option<Option<i64>> {
    match text.split_ascii_whitespace().next()? {
        "running" => Some(None),
        nr => nr.parse().ok().map(Some),
    }
}

/// `schedstat` (sched-stats.rst): time on a CPU and time waiting on a run queue, in ns.
pub fn parse_schedstat(text: &str) -> Option<(u64, u64)> {
    let mut it = text.split_ascii_whitespace();
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// Resident pages from `statm` (second field).
pub fn parse_statm_resident(text: &str) -> Option<u64> {
    text.split_ascii_whitespace().nth(1)?.parse().ok()
}

/// Minor faults (field 10) from `/proc/PID/stat` text: the fields after the command name,
/// which ends at the last `)` (a name may hold spaces and parentheses).
pub fn parse_stat_minflt(text: &[u8]) -> Option<u64> {
    let close = memchr::memrchr(b')', text)?;
    let rest = std::str::from_utf8(&text[close + 1..]).ok()?;
    // After the name: state (3), ppid, pgrp, session, tty_nr, tpgid, flags, minflt (10).
    rest.split_ascii_whitespace().nth(7)?.parse().ok()
}

/// Resident and shared (file + shmem) pages from `/proc/PID/statm` (fields 2 and 3).
pub fn parse_statm(text: &[u8]) -> Option<(u64, u64)> {
    let text = std::str::from_utf8(text).ok()?;
    let mut it = text.split_ascii_whitespace().skip(1);
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// A `N kB` value of a /proc status-like line, in bytes (a bare number counts as kB too);
/// `None` for a value whose bytes do not fit in u64 (no kernel writes one).
pub(crate) fn kb_value(rest: &str) -> Option<u64> {
    let mut it = rest.split_ascii_whitespace();
    let n: u64 = it.next()?.parse().ok()?;
    match it.next() {
        Some("kB") | None => n.checked_mul(1024),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::proc::tests::ROLLUP;

    #[test]
    fn statm_gives_resident_and_shared_pages() {
        // Captured from /proc/self/statm of a shell on Linux 6.x.
        assert_eq!(
            parse_statm(b"2249 1280 1024 214 0 256 0\n"),
            Some((1280, 1024))
        );
        assert_eq!(parse_statm(b"0 0 0 0 0 0 0\n"), Some((0, 0)));
        assert_eq!(parse_statm(b"12 x 3"), None);
        assert_eq!(parse_statm(b""), None);
    }

    #[test]
    fn rollup_from_captured_text() {
        let r = parse_smaps_rollup(ROLLUP).unwrap();
        assert_eq!(r.rss_bytes, 1616 * 1024);
        assert_eq!(r.pss_bytes, 760 * 1024);
        assert_eq!(r.pss_anon_bytes, 112 * 1024);
        assert_eq!(r.pss_file_bytes, 648 * 1024);
        assert_eq!(r.swap_bytes, 4096);
        // A process without an mm prints nothing but the header line (or nothing at all).
        assert_eq!(parse_smaps_rollup(""), None);
    }

    #[test]
    fn status_fields() {
        let text = "Name:\tcat\nTgid:\t2987\nPid:\t2987\nPPid:\t2982\nVmHWM:\t    1936 kB\nVmRSS:\t    1900 kB\nThreads:\t1\n";
        let s = parse_status(text);
        assert_eq!(s.tgid, Some(2987));
        assert_eq!(s.ppid, Some(2982));
        assert_eq!(s.vm_hwm_bytes, Some(1936 * 1024));
        assert_eq!(s.vm_rss_bytes, Some(1900 * 1024));
        assert_eq!(s.threads, Some(1));
        assert_eq!(s.rss_shared_bytes, None, "no RssFile or RssShmem line");
        // A zombie has no Vm* lines: unknown, not zero.
        assert_eq!(parse_status("Tgid:\t5\n").vm_hwm_bytes, None);
    }

    #[test]
    fn io_fields() {
        let text = "rchar: 6976\nwchar: 10\nsyscr: 10\nsyscw: 1\nread_bytes: 4096\nwrite_bytes: 0\ncancelled_write_bytes: 0\n";
        let io = parse_io(text).unwrap();
        assert_eq!(io.rchar_bytes, 6976);
        assert_eq!(io.read_bytes, 4096);
        assert_eq!(parse_io("rchar: 1\n"), None);
    }

    #[test]
    fn stat_with_hostile_comm() {
        let text = b"1234 (a) b (c) S 1 1234 1234 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 3 0 987654 1000 10 0";
        let s = parse_stat(text).unwrap();
        assert_eq!(s.comm, b"a) b (c");
        assert_eq!(s.state, b'S');
        assert_eq!(s.ppid, 1);
        assert_eq!(s.num_threads, 3);
        assert_eq!(s.starttime, 987654);
        assert_eq!((s.utime_ticks, s.stime_ticks), (5, 6));
    }

    #[test]
    fn stat_cpu_from_a_capture() {
        // /proc/PID/stat of a `sh` on this machine (Linux 6.18) after a 300,000-turn loop.
        let text = b"19283 (sh) S 19281 19281 21891 0 -1 4194304 93 0 0 0 75 0 0 0 20 0 1 0 411217 2654208 399 18446744073709551615 93923289534464 93923289611193 140726007920160 0 0 0 0 0 65538 1 0 0 17 0 0 0 0 0 0 93923289640496 93923289645632 93924068208640 140726007921323 140726007921398 140726007921398 140726007922668 0";
        let s = parse_stat(text).unwrap();
        assert_eq!(s.ppid, 19281);
        assert_eq!((s.utime_ticks, s.stime_ticks), (75, 0));
        assert_eq!(s.num_threads, 1);
        assert_eq!(s.minflt, 93);
        assert_eq!(parse_stat_minflt(text), Some(93));
        assert_eq!(
            parse_stat_minflt(b"1234 (a) b (c) S 1 1234 1234 0 -1 4194560 100 0 0 0 5 6"),
            Some(100)
        );
        assert_eq!(parse_stat_minflt(b"1234 (sh"), None);
    }

    #[test]
    fn schedstat_fields() {
        // /proc/self/schedstat of a shell on this machine.
        assert_eq!(parse_schedstat("1538771 95468 9\n"), Some((1538771, 95468)));
        assert_eq!(parse_schedstat(""), None);
    }

    #[test]
    fn syscall_fields() {
        assert_eq!(parse_syscall("running\n"), Some(None));
        assert_eq!(
            parse_syscall("61 0xffffffff 0x7ffd 0x0 0x0 0x0 0x0 0x7ffd70 0x7f3c76\n"),
            Some(Some(61))
        );
        assert_eq!(parse_syscall("-1 0x7ffd70 0x7f3c76\n"), Some(Some(-1)));
        assert_eq!(parse_syscall(""), None);
        assert_eq!(parse_syscall("x 1 2"), None);
    }

    #[test]
    fn cmdline_splitting() {
        assert_eq!(
            parse_cmdline(b"ls\0-l\0\0"),
            vec![b"ls".to_vec(), b"-l".to_vec(), b"".to_vec()]
        );
        assert_eq!(parse_cmdline(b""), Vec::<Vec<u8>>::new());
        assert_eq!(parse_cmdline(b"x"), vec![b"x".to_vec()]);
    }
}
