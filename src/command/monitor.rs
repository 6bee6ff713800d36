//! `ste monitor`: the seed's tsmon. One line (or JSON line) per process that exits anywhere on
//! the machine, until Ctrl-C or `--duration`.
//!
//! Two sources. As root, the taskstats exit listener: CPU (short of what the kernel counts
//! after it writes the record early in the exit: the teardown of the process's memory and the
//! rest of its last time slice), high-water RSS/VM, I/O bytes
//! and exit status of every process (its threads' records summed; a multi-threaded process
//! is printed when its group's aggregate record arrives). Otherwise the proc connector (its
//! reader is `kernel::cn_proc`, shared with the netlink tracker) plus /proc: argv read at the
//! exec event, and at the exit event the zombie's `/proc/PID/stat` (CPU in clock ticks) and
//! `/proc/PID/io` when it is still there and readable; the memory is already gone by then, so
//! peaks are not available from this source, which the header says.
//!
//! It runs no command, so its output is its purpose and goes to stdout. Part of the face, so
//! it may read the `cli` types of its subcommand; the sources it reads are the kernel's.
//!
//! Every process on the machine names itself (`prctl(PR_SET_NAME)`, its argv), and root's
//! terminal shows the names: a text line escapes them as every text report does
//! ([`Escaped`], then the terminal writer, `report::terminal`), and a JSON line as `--json`
//! does (`report::json::to_line`), so that no name can send the terminal a sequence.

use crate::cli::{MonitorArgs, MonitorSource};
use crate::kernel::cn_proc::{self, Connector, ProcEventKind};
use crate::kernel::proc::ProcFs;
use crate::kernel::taskstats::{Message, Received, TaskStats, Taskstats};
use crate::model::{Arg, Escaped, Termination, join_escaped, signal_name};
use crate::units::{bytes_human, duration_human};
use anyhow::{Context, Result, bail};
use serde::Serialize;
use std::collections::HashMap;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

/// One exited process, as printed.
#[derive(Serialize, Debug, Clone, PartialEq, Default)]
pub struct Exited {
    pub pid: i32,
    pub ppid: Option<i32>,
    /// The kernel's command name (16 bytes at most).
    pub comm: String,
    /// Full argv, when the source could read it (proc connector).
    pub argv: Option<Vec<Arg>>,
    /// From fork to exit.
    pub runtime_ns: Option<u64>,
    pub cpu_ns: Option<u64>,
    pub user_ns: Option<u64>,
    pub sys_ns: Option<u64>,
    pub peak_rss_bytes: Option<u64>,
    pub peak_vm_bytes: Option<u64>,
    pub read_bytes: Option<u64>,
    pub write_bytes: Option<u64>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub threads: u32,
    /// `taskstats` or `connector`.
    pub source: &'static str,
}

/// The filters of the command line.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub min_rss: Option<u64>,
    pub min_cpu_ns: Option<u64>,
    pub comm: Option<String>,
    pub nonzero_exit: bool,
}

impl Filter {
    pub fn admits(&self, e: &Exited) -> bool {
        if let Some(m) = self.min_rss
            && e.peak_rss_bytes.is_none_or(|r| r < m)
        {
            return false;
        }
        if let Some(m) = self.min_cpu_ns
            && e.cpu_ns.is_none_or(|c| c < m)
        {
            return false;
        }
        if let Some(c) = &self.comm {
            let argv0 = e
                .argv
                .as_ref()
                .and_then(|a| a.first())
                .map(|a| a.to_string_lossy())
                .unwrap_or_default();
            if !e.comm.contains(c.as_str()) && !argv0.contains(c.as_str()) {
                return false;
            }
        }
        if self.nonzero_exit && e.exit_code == Some(0) {
            return false;
        }
        true
    }
}

/// A process's figures from its threads' taskstats records.
fn from_taskstats(records: &[TaskStats], leader: &TaskStats) -> Exited {
    let sum = |f: fn(&TaskStats) -> u64| records.iter().map(f).sum::<u64>();
    let status = Termination::from_wait_status(leader.exit_code as i32);
    let split = crate::source::account::split_runtime(
        sum(|r| r.cpu_run_virtual_ns),
        sum(|r| r.utime_us),
        sum(|r| r.stime_us),
    );
    Exited {
        pid: leader.tgid.unwrap_or(leader.pid) as i32,
        ppid: Some(leader.ppid as i32),
        comm: String::from_utf8_lossy(&leader.comm).into_owned(),
        argv: None,
        runtime_ns: Some(leader.elapsed_us * 1000),
        cpu_ns: Some(sum(|r| r.cpu_run_virtual_ns)),
        user_ns: Some(split.0),
        sys_ns: Some(split.1),
        peak_rss_bytes: records.iter().map(|r| r.hiwater_rss_kb * 1024).max(),
        peak_vm_bytes: records.iter().map(|r| r.hiwater_vm_kb * 1024).max(),
        read_bytes: Some(sum(|r| r.read_bytes)),
        write_bytes: Some(sum(|r| r.write_bytes)),
        exit_code: status.and_then(Termination::code),
        signal: status.and_then(Termination::signal),
        threads: records.len() as u32,
        source: "taskstats",
    }
}

/// Gathers the per-thread records of each process until the process is over.
#[derive(Default)]
pub struct Gatherer {
    pending: HashMap<u32, (Instant, Vec<TaskStats>)>,
    /// Groups recently printed from their leader's record alone.
    printed: std::collections::VecDeque<u32>,
}

impl Gatherer {
    /// Takes one message; returns the process it completes, if any. `others_alive(tgid)` says
    /// whether the group still has threads: a leader's record without the group's aggregate
    /// is either a single-threaded process's or a leader that exited before its threads.
    pub fn take(&mut self, m: Message, others_alive: impl Fn(u32) -> bool) -> Option<Exited> {
        let Message::Stats {
            pid,
            stats,
            tgid_aggregate,
        } = m
        else {
            return None;
        };
        let tgid = stats.tgid.unwrap_or(pid);
        let group_over = tgid_aggregate.is_some();
        let entry = self.pending.remove(&tgid);
        let mut records = entry.map(|(_, r)| r).unwrap_or_default();
        records.push(*stats);
        // The group ended (its aggregate came), or a single-threaded process's leader exited.
        let single = records.len() == 1 && pid == tgid && !others_alive(tgid);
        if group_over && self.printed.contains(&tgid) {
            // Its leader was taken for a single-threaded process: the threads were leaving.
            self.printed.retain(|t| *t != tgid);
            return None;
        }
        if group_over || single {
            if single {
                self.printed.push_back(tgid);
                if self.printed.len() > 256 {
                    self.printed.pop_front();
                }
            }
            let leader = records
                .iter()
                .find(|r| r.pid == tgid)
                .unwrap_or(&records[records.len() - 1])
                .clone();
            return Some(from_taskstats(&records, &leader));
        }
        self.pending.insert(tgid, (Instant::now(), records));
        if self.pending.len() > 10_000 {
            // Groups whose end was lost (an overrun): do not keep them forever.
            self.pending
                .retain(|_, (t, _)| t.elapsed() < Duration::from_secs(60));
        }
        None
    }
}

const HEADER: &str =
    "    PID    PPID   RUNTIME       CPU   MAX RSS    MAX VM       I/O  EXIT      COMMAND";

/// One text line for a process.
pub fn line(e: &Exited) -> String {
    let opt = |v: Option<u64>, f: fn(u64) -> String| v.map_or("n/a".to_string(), f);
    let io = match (e.read_bytes, e.write_bytes) {
        (Some(r), Some(w)) => bytes_human(r + w),
        _ => "n/a".into(),
    };
    let exit = match (e.exit_code, e.signal) {
        (Some(c), _) => c.to_string(),
        (None, Some(s)) => signal_name(s),
        _ => "?".into(),
    };
    let what = match &e.argv {
        Some(a) if !a.is_empty() => join_escaped(a),
        _ => Escaped::str(&e.comm).to_string(),
    };
    format!(
        "{:>7} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9}  {:<8}  {what}",
        e.pid,
        e.ppid.map_or("?".into(), |p| p.to_string()),
        opt(e.runtime_ns, duration_human),
        opt(e.cpu_ns, duration_human),
        opt(e.peak_rss_bytes, bytes_human),
        opt(e.peak_vm_bytes, bytes_human),
        io,
        exit
    )
}

/// A signalfd for SIGINT/SIGTERM/SIGHUP (blocked first), to wake the receive loop.
fn signal_fd() -> Result<OwnedFd> {
    crate::launch::signals::block();
    crate::launch::signals::signal_fd().context("signalfd")
}

fn signalled(fd: &OwnedFd) -> bool {
    crate::kernel::calls::poll_readable(fd.as_fd(), Some(std::time::Duration::ZERO))
}

/// Runs the monitor; returns ste's exit status.
pub fn run(args: &MonitorArgs) -> Result<i32> {
    let filter = Filter {
        min_rss: args.min_rss,
        min_cpu_ns: args.min_cpu.map(|d| d.as_nanos() as u64),
        comm: args.comm.clone(),
        nonzero_exit: args.nonzero_exit,
    };
    let stop_at = args.duration.map(|d| Instant::now() + d);
    let sig = signal_fd()?;
    let mut out = std::io::stdout().lock();
    let source = match args.source {
        Some(MonitorSource::Taskstats) => {
            Some(crate::source::account::open_listener().map_err(anyhow::Error::msg)?)
        }
        Some(MonitorSource::Connector) => None,
        None => match crate::source::account::open_listener() {
            Ok(t) => Some(t),
            Err(why) => {
                eprintln!(
                    "ste monitor: {why}: using the proc connector and /proc instead; high-water RSS/VM are not available from it (the memory is gone at the exit event), CPU is in clock ticks"
                );
                None
            }
        },
    };
    if source.is_none() && filter.min_rss.is_some() {
        bail!("--min-rss needs taskstats (root): the proc connector cannot see peaks");
    }
    if !args.json {
        writeln!(out, "{HEADER}")?;
        out.flush()?;
    }
    let emit = |e: &Exited, out: &mut std::io::StdoutLock| -> Result<bool> {
        if !filter.admits(e) {
            return Ok(true);
        }
        let mut text = if args.json {
            crate::report::json::to_line(e)?
        } else {
            line(e)
        };
        text.push('\n');
        // Through the terminal writer too, whatever a line holds. A closed pipe (`| head`)
        // ends the monitor quietly.
        // (A line ends with its line end: the writer holds nothing back.)
        let mut t = crate::report::terminal::Terminal::new(out, false);
        Ok(t.write_all(text.as_bytes()).is_ok())
    };
    let left = || stop_at.map(|t| t.saturating_duration_since(Instant::now()));
    let out = std::cell::RefCell::new(out);
    let mut emit_one = |e: &Exited| emit(e, &mut out.borrow_mut());
    let mut flush = || out.borrow_mut().flush().is_ok();
    match source {
        Some(ts) => taskstats_loop(ts, &sig, &left, &mut emit_one, &mut flush),
        None => connector_loop(&sig, &left, &mut emit_one, &mut flush),
    }
}

/// Writes one process's line (unflushed); `false` once the output is closed.
type Emit<'a> = dyn FnMut(&Exited) -> Result<bool> + 'a;
/// Flushes what was written; `false` once the output is closed.
type Flush<'a> = dyn FnMut() -> bool + 'a;

/// How long the taskstats loop lets records pile up between drains while they keep coming:
/// waking for every exit on the machine was a context switch per process beside the workload,
/// which a fork loop beside the monitor paid (bench/README.md). A line is at most this late;
/// the socket's 16 MiB hold tens of thousands of records meanwhile.
const BATCH: Duration = Duration::from_millis(10);

fn timeout(left: &dyn Fn() -> Option<Duration>) -> Option<Duration> {
    match left() {
        Some(d) if d.is_zero() => None,
        Some(d) => Some(d.min(Duration::from_secs(1))),
        None => Some(Duration::from_secs(1)),
    }
}

fn taskstats_loop(
    mut ts: Taskstats,
    sig: &OwnedFd,
    left: &dyn Fn() -> Option<Duration>,
    emit: &mut Emit<'_>,
    flush: &mut Flush<'_>,
) -> Result<i32> {
    let mut g = Gatherer::default();
    let mut lost = 0u64;
    let mut cut = 0u64;
    // When the last drain that found records ended: records again within two batches of it
    // are a storm, and the loop sleeps a batch before the next drain.
    let mut last_drain: Option<Instant> = None;
    while let Some(t) = timeout(left) {
        if signalled(sig) {
            break;
        }
        if last_drain.is_some_and(|d| d.elapsed() <= 2 * BATCH) {
            // Asleep on the signals alone: Ctrl-C still ends the monitor at once.
            crate::kernel::calls::poll_readable(sig.as_fd(), Some(BATCH));
            if signalled(sig) {
                break;
            }
        }
        let mut received = ts.recv(t, Some(sig)).context("taskstats")?;
        let mut any = false;
        // Everything queued, in one go.
        loop {
            match received {
                Received::Messages(ms) => {
                    any = true;
                    for m in ms {
                        if matches!(m, Message::Cut) {
                            cut += 1;
                            continue;
                        }
                        if let Some(e) = g.take(m, other_threads_alive)
                            && !emit(&e)?
                        {
                            return Ok(0);
                        }
                    }
                }
                Received::Overrun => lost += 1,
                Received::Timeout => break,
            }
            received = ts.recv_now().context("taskstats")?;
        }
        if !flush() {
            return Ok(0);
        }
        last_drain = any.then(Instant::now);
    }
    if lost > 0 {
        eprintln!(
            "ste monitor: the taskstats receive buffer overflowed {lost} times: some exits were not shown"
        );
    }
    if cut > 0 {
        eprintln!(
            "ste monitor: {cut} taskstats exit records were longer than ste reads and cut short: those exits were not shown"
        );
    }
    Ok(0)
}

/// Whether /proc still lists threads of `tgid` besides its (exited) leader.
fn other_threads_alive(tgid: u32) -> bool {
    std::fs::read_dir(format!("/proc/{tgid}/task"))
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name() != *tgid.to_string())
                .count()
                > 0
        })
        .unwrap_or(false)
}

/// What the connector source knows of a live process.
struct Seen {
    start: u64,
    ppid: i32,
    argv: Option<Vec<Arg>>,
}

/// The proc connector, one event at a time: an exec's argv must be read while the process
/// still has it, so this loop cannot let events pile up as the taskstats loop does.
fn connector_loop(
    sig: &OwnedFd,
    left: &dyn Fn() -> Option<Duration>,
    emit: &mut Emit<'_>,
    flush: &mut Flush<'_>,
) -> Result<i32> {
    let release = nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut conn = Connector::open(4 << 20, cn_proc::kernel_has_filter(&release))
        .context("cannot subscribe to the proc connector")?;
    let mut procfs = ProcFs::default();
    let mut seen: HashMap<i32, Seen> = HashMap::new();
    let tick_ns = 1_000_000_000 / clock_ticks();
    let mut lost = 0u64;
    while let Some(t) = timeout(left) {
        if signalled(sig) {
            break;
        }
        let ev = match conn.recv(t, Some(sig)).context("proc connector")? {
            cn_proc::Received::Event(ev) => ev,
            cn_proc::Received::Overrun => {
                lost += 1;
                continue;
            }
            _ => continue,
        };
        match ev.kind {
            ProcEventKind::Fork {
                parent_tgid,
                child_pid,
                child_tgid,
                ..
            } if child_pid == child_tgid => {
                seen.insert(
                    child_pid,
                    Seen {
                        start: ev.timestamp_ns,
                        ppid: parent_tgid,
                        argv: None,
                    },
                );
            }
            ProcEventKind::Exec { tgid, .. } => {
                let argv = procfs
                    .cmdline(tgid)
                    .ok()
                    .filter(|a| !a.is_empty())
                    .map(crate::source::from_kernel::argv);
                match seen.get_mut(&tgid) {
                    Some(s) => s.argv = argv,
                    None => {
                        let ppid = procfs.stat(tgid).ok().flatten().map_or(0, |s| s.ppid);
                        seen.insert(
                            tgid,
                            Seen {
                                start: 0,
                                ppid,
                                argv,
                            },
                        );
                    }
                }
            }
            ProcEventKind::Exit {
                pid,
                tgid,
                exit_code,
            } if pid == tgid => {
                let s = seen.remove(&pid);
                // The zombie's figures, if its parent has not reaped it yet.
                let stat = procfs.stat(pid).ok().flatten();
                let io = procfs
                    .io(pid)
                    .ok()
                    .flatten()
                    .map(crate::source::from_kernel::io);
                let status = Termination::from_wait_status(exit_code as i32);
                let e = Exited {
                    pid,
                    ppid: s.as_ref().map(|s| s.ppid).or(stat.as_ref().map(|x| x.ppid)),
                    comm: stat
                        .as_ref()
                        .map(|x| String::from_utf8_lossy(&x.comm).into_owned())
                        .unwrap_or_default(),
                    argv: s.as_ref().and_then(|s| s.argv.clone()),
                    runtime_ns: s
                        .as_ref()
                        .filter(|s| s.start > 0)
                        .map(|s| ev.timestamp_ns.saturating_sub(s.start)),
                    cpu_ns: stat_cpu_ticks(pid).map(|t| t * tick_ns),
                    read_bytes: io.map(|i| i.read_bytes),
                    write_bytes: io.map(|i| i.write_bytes),
                    exit_code: status.and_then(Termination::code),
                    signal: status.and_then(Termination::signal),
                    threads: stat.map_or(0, |x| x.num_threads.max(1) as u32),
                    source: "connector",
                    ..Default::default()
                };
                if !emit(&e)? || !flush() {
                    return Ok(0);
                }
            }
            _ => {}
        }
    }
    if lost > 0 {
        eprintln!(
            "ste monitor: the proc connector's receive buffer overflowed {lost} times: some exits were not shown"
        );
    }
    Ok(0)
}

/// utime + stime of a (zombie) process, in clock ticks, from `/proc/PID/stat`.
fn stat_cpu_ticks(pid: i32) -> Option<u64> {
    let text = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    let close = text.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&text[close + 1..]).ok()?;
    let f: Vec<&str> = rest.split_ascii_whitespace().collect();
    // f[0] is field 3 (state); utime is field 14, stime 15.
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

use crate::kernel::proc::clock_ticks_per_second as clock_ticks;

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(pid: u32, tgid: u32, rss_kb: u64, cpu_ns: u64) -> TaskStats {
        TaskStats {
            pid,
            tgid: Some(tgid),
            ppid: 1,
            comm: b"cc1".to_vec(),
            hiwater_rss_kb: rss_kb,
            cpu_run_virtual_ns: cpu_ns,
            elapsed_us: 1500,
            exit_code: 2 << 8,
            ..Default::default()
        }
    }

    fn stats(r: TaskStats, aggregate: bool) -> Message {
        Message::Stats {
            pid: r.pid,
            tgid_aggregate: aggregate.then(|| Box::new((r.tgid.unwrap(), TaskStats::default()))),
            stats: Box::new(r),
        }
    }

    #[test]
    fn single_and_multi_threaded_processes() {
        let mut g = Gatherer::default();
        let none = |_| false;
        let e = g.take(stats(rec(5, 5, 1000, 7), false), none).unwrap();
        assert_eq!(e.pid, 5);
        assert_eq!(e.peak_rss_bytes, Some(1000 * 1024));
        assert_eq!(e.exit_code, Some(2));
        assert_eq!(e.runtime_ns, Some(1_500_000));
        // Two threads of 9, then the leader with the group's aggregate.
        assert!(g.take(stats(rec(10, 9, 2000, 1), false), none).is_none());
        assert!(g.take(stats(rec(11, 9, 2100, 2), false), none).is_none());
        let e = g.take(stats(rec(9, 9, 2200, 3), true), none).unwrap();
        assert_eq!((e.pid, e.threads), (9, 3));
        assert_eq!(e.cpu_ns, Some(6));
        assert_eq!(e.peak_rss_bytes, Some(2200 * 1024));
        // The leader of 20 exits first, then its last thread ends the group.
        assert!(g.take(stats(rec(21, 20, 10, 1), false), none).is_none());
        assert!(g.take(stats(rec(20, 20, 10, 1), false), none).is_none());
        let e = g.take(stats(rec(22, 20, 10, 1), true), none).unwrap();
        assert_eq!((e.pid, e.threads, e.exit_code), (20, 3, Some(2)));
        // The leader of 30 exits first, its threads still running: held until the group ends.
        assert!(g.take(stats(rec(30, 30, 10, 1), false), |_| true).is_none());
        let e = g.take(stats(rec(31, 30, 10, 1), true), none).unwrap();
        assert_eq!((e.pid, e.threads), (30, 2));
    }

    #[test]
    fn filters() {
        let e = from_taskstats(&[rec(5, 5, 1000, 50_000_000)], &rec(5, 5, 1000, 50_000_000));
        let f = |f: Filter| f.admits(&e);
        assert!(f(Filter::default()));
        assert!(f(Filter {
            min_rss: Some(1000 * 1024),
            ..Default::default()
        }));
        assert!(!f(Filter {
            min_rss: Some(1001 * 1024),
            ..Default::default()
        }));
        assert!(!f(Filter {
            min_cpu_ns: Some(60_000_000),
            ..Default::default()
        }));
        assert!(f(Filter {
            comm: Some("cc".into()),
            nonzero_exit: true,
            ..Default::default()
        }));
        assert!(!f(Filter {
            comm: Some("ld".into()),
            ..Default::default()
        }));
    }

    #[test]
    fn a_hostile_comm_reaches_no_terminal() {
        // Issue 44, item 3: any process names itself; root's monitor printed it raw.
        let mut r = rec(5, 5, 1024, 50_000_000);
        r.comm = b"hostile\x1b]0;T\x07\xe2\x80\xae".to_vec();
        let e = from_taskstats(std::slice::from_ref(&r), &r);
        let text = line(&e);
        assert!(text.ends_with(r"hostile\x1b]0;T\x07\xe2\x80\xae"), "{text}");
        assert!(crate::report::terminal::is_safe(text.as_bytes(), false));
        let json = crate::report::json::to_line(&e).unwrap();
        assert!(
            json.contains(r#""comm":"hostile\u001b]0;T\u0007\u202e""#),
            "{json}"
        );
    }

    #[test]
    fn a_line() {
        let e = from_taskstats(&[rec(5, 5, 1024, 50_000_000)], &rec(5, 5, 1024, 50_000_000));
        assert_eq!(
            line(&e),
            "      5       1     1.5ms      50ms     1 MiB       0 B       0 B  2         cc1"
        );
    }
}
