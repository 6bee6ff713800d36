//! The ptrace tracker's stops, made cheap: a process's /proc files are opened while it runs and
//! only read at its exec and exit stops, up to a budget of descriptors; beyond it, the stops
//! open the files themselves. Both ways must give the same exact figures: argv at every exec
//! (re-execs included), `/proc/PID/io` and `VmHWM` at the exit.

use crate::harness::*;
use crate::matrix;
use std::os::unix::process::CommandExt;

/// `dd` runs that each write exactly `1000 × i` bytes in `i` writes, one after another, from
/// a root that execs once more before starting them.
fn script(n: u32) -> String {
    let ds: Vec<String> = (1..=n)
        .map(|i| format!("/bin/dd if=/dev/zero of=/dev/null bs=1000 count={i} status=none"))
        .collect();
    format!("exec /bin/sh -c '{}'", ds.join("; "))
}

/// Runs the script under ptrace as `who`, with at most `nofile` descriptors for ste (and the
/// command) when given.
fn run(who: Who, nofile: Option<u64>) -> Outcome {
    let mode = Mode {
        tracker: Tracker::Ptrace,
        who,
    };
    ste_with(mode, &[], &["/bin/sh", "-c", &script(6)], |c| {
        if let Some(n) = nofile {
            // SAFETY: setrlimit is async-signal-safe; it only lowers the child's own limit.
            unsafe {
                c.pre_exec(move || {
                    let lim = libc::rlimit {
                        rlim_cur: n,
                        rlim_max: n,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
    })
}

fn check(o: &Outcome) {
    assert_eq!(o.status(), 0, "{}", o.stderr());
    let run = o.run();
    assert_eq!(run.tracker, "ptrace");
    assert_eq!(run.totals.processes, 7, "{}", o.stderr());
    // The root's two execs, each argv read afresh at its own stop.
    let root = &run.processes[0];
    let argv = |x: &ste::model::Exec| {
        x.argv
            .as_ref()
            .expect("argv read")
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
    };
    assert_eq!(root.execs.len(), 2, "{:?}", root.execs);
    assert_eq!(argv(&root.execs[0]), ["/bin/sh", "-c", &script(6)]);
    assert_eq!(argv(&root.execs[1])[..2], ["/bin/sh", "-c"]);
    let mut seen = 0;
    for p in &run.processes[1..] {
        let a = argv(&p.execs[0]);
        let i: u64 = a[4].strip_prefix("count=").unwrap().parse().unwrap();
        assert_eq!(
            a,
            [
                "/bin/dd",
                "if=/dev/zero",
                "of=/dev/null",
                "bs=1000",
                &format!("count={i}"),
                "status=none"
            ]
        );
        let io = p.io.as_ref().expect("/proc/PID/io read at the exit stop");
        assert_eq!((io.wchar_bytes, io.syscw), (1000 * i, i), "dd count={i}");
        assert!(io.rchar_bytes >= 1000 * i, "dd count={i}: {io:?}");
        let peak = p.peak_rss_bytes.expect("VmHWM read at the exit stop");
        assert!(peak >= 100 << 10, "dd count={i}: VmHWM {peak}");
        assert_eq!(p.exit_code, Some(0));
        seen |= 1 << i;
    }
    assert_eq!(seen, 0b111_1110, "every dd once");
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn exit_and_exec_figures_with_files_held_root() {
    check(&run(Who::Root, None));
}

#[test]
fn exit_and_exec_figures_with_files_held_nobody() {
    check(&run(Who::Nobody, None));
}

/// 24 descriptors leave a budget of one process: the root holds its files, every `dd` is read
/// through paths opened at its stops.
#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn exit_and_exec_figures_beyond_the_descriptor_budget_root() {
    check(&run(Who::Root, Some(24)));
}

#[test]
fn exit_and_exec_figures_beyond_the_descriptor_budget_nobody() {
    check(&run(Who::Nobody, Some(24)));
}

/// One argument of 130 KB (under the kernel's 128 KiB limit per argument): 8 of them make a
/// command line of 1 MiB, four times what the ebpf tracker copies in the kernel.
fn big_arg(i: u8) -> String {
    String::from_utf8(vec![b'a' + i; 130_000]).unwrap()
}

/// A 1 MiB argv, of a shell that lives on (asleep in `wait4`): every tracker shows it whole.
/// ptrace reads it at the exec stop; ebpf reads what its kernel copy lacks from /proc and
/// netlink reads it from /proc, both judged by `track::argv_check`.
fn whole_long_argv(mode: Mode) {
    let args: Vec<String> = (0..8).map(big_arg).collect();
    let mut command = vec!["/bin/sh", "-c", "/bin/sleep 0.2; :", "sh"];
    command.extend(args.iter().map(String::as_str));
    let o = ste(mode, &["-o", "/dev/null"], &command);
    assert_eq!(o.status(), 0, "{}", o.stderr());
    let run = o.run();
    let lost = &run.overhead.lost;
    assert_eq!(
        (lost.argv_unread, lost.argv_doubtful),
        (0, 0),
        "{:?}",
        run.overhead.lost
    );
    let argv: Vec<String> = run.processes[0].execs[0]
        .argv
        .as_ref()
        .expect("argv shown")
        .iter()
        .map(|a| a.to_string_lossy())
        .collect();
    assert_eq!(argv, command, "the argv, whole and in order");
    let bytes: usize = argv.iter().map(|a| a.len() + 1).sum();
    assert!(bytes > 1_000_000, "{bytes} bytes of argv");
}

matrix!(a_one_mib_argv_is_shown_whole, whole_long_argv);

/// A process that computes for its whole life (a compiler) is running at every look at it. The
/// netlink tracker gave up on its argv after 13 ms of looks, a third of a build's; it now
/// decides at the process's end (`track::argv_check`), with the reader going on meanwhile.
/// Every tracker shows every argv, and the live lines keep the order of the execs (`ste
/// report`'s): under netlink, the lines of the execs after the busy one wait for it (the
/// shell counts a while before its `sleep`, so the busy process has mostly exec'd by then).
fn a_busy_process_shows_its_argv(mode: Mode) {
    let f = fixture();
    let count = "i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done";
    let script = format!("{f} spin 150 & {count}; sleep 0.05; wait");
    let o = ste(mode, &[], &["/bin/sh", "-c", &script]);
    assert_eq!(o.status(), 0, "{}", o.stderr());
    let run = o.run();
    let lost = &run.overhead.lost;
    assert_eq!((lost.argv_unread, lost.argv_doubtful), (0, 0), "{lost:?}");
    let mut execs: Vec<(u64, Vec<String>)> = run
        .processes
        .iter()
        .flat_map(|p| &p.execs)
        .map(|x| {
            let argv = x.argv.as_ref().expect("every argv shown");
            (x.t_ns, argv.iter().map(|a| a.to_string_lossy()).collect())
        })
        .collect();
    execs.sort();
    let quoted = |a: &String| {
        if a.contains(' ') {
            format!("'{a}'")
        } else {
            a.clone()
        }
    };
    let in_order: Vec<String> = execs
        .iter()
        .map(|(_, argv)| {
            let words: Vec<String> = argv.iter().map(quoted).collect();
            format!("EXEC: [{}]", words.join(" "))
        })
        .collect();
    let mut want = vec![
        format!("EXEC: [/bin/sh -c '{script}']"),
        format!("EXEC: [{f} spin 150]"),
        "EXEC: [sleep 0.05]".to_string(),
    ];
    let mut lines = o.exec_lines();
    assert_eq!(lines, in_order, "the live lines in the order of the execs");
    lines.sort();
    want.sort();
    assert_eq!(lines, want);
}

matrix!(a_busy_processs_argv_is_shown, a_busy_process_shows_its_argv);

/// The exec chain of issue 19 under a fork flood: with the netlink tracker, the argv of an
/// image was read after the process had exec'd again and shown as the earlier image's (in 17
/// of 40 runs before the fix). Now no run attributes an argv to the wrong image; an argv that
/// may be a later image's is `[?]` and counted under its own heading.
#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn netlink_never_shows_a_later_images_argv_under_a_fork_flood() {
    let mode = Mode {
        tracker: Tracker::Netlink,
        who: Who::Root,
    };
    let inner = "exec /bin/true first";
    let script = format!("exec env A=1 env B=2 env C=3 /bin/sh -c \"{inner}\"");
    let rest = ["/bin/sh", "-c", inner];
    let chain: Vec<Vec<&str>> = vec![
        vec!["sh", "-c", &script],
        [&["env", "A=1", "env", "B=2", "env", "C=3"][..], &rest].concat(),
        [&["env", "B=2", "env", "C=3"][..], &rest].concat(),
        [&["env", "C=3"][..], &rest].concat(),
        rest.to_vec(),
        vec!["/bin/true", "first"],
    ];
    // Two loops of short processes beside the runs, killed on the way out.
    let _alone = machine_to_itself();
    let _flood = Beside::start(2, "while :; do /bin/true; done");
    let (mut shown, mut doubted) = (0, 0);
    for _ in 0..30 {
        let o = ste(mode, &["-o", "/dev/null"], &["sh", "-c", &script]);
        assert_eq!(o.status(), 0, "{}", o.stderr());
        let run = o.run();
        let execs = &run.processes[0].execs;
        assert_eq!(execs.len(), chain.len(), "{}", o.stderr());
        let mut unknown = 0;
        for (x, want) in execs.iter().zip(&chain) {
            match &x.argv {
                Some(a) => {
                    let a: Vec<String> = a.iter().map(|a| a.to_string_lossy()).collect();
                    assert_eq!(&a, want, "an argv attributed to the wrong image");
                    shown += 1;
                }
                None => unknown += 1,
            }
        }
        let lost = &run.overhead.lost;
        assert_eq!(lost.argv_unread + lost.argv_doubtful, unknown, "{lost:?}");
        doubted += lost.argv_doubtful;
    }
    eprintln!("{shown} argv shown, {doubted} not shown as maybe a later image's");
}

/// A shell with a 1 MiB argv that execs at once: under ebpf, what the kernel did not copy is
/// read from /proc, maybe after the exec; the shell's exec shows its own argv whole or `[?]`
/// (counted), never the next image's.
#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn ebpf_never_shows_a_later_images_long_argv() {
    let mode = Mode {
        tracker: Tracker::Ebpf,
        who: Who::Root,
    };
    let args: Vec<String> = (0..8).map(big_arg).collect();
    let mut command = vec!["/bin/sh", "-c", "exec /bin/true next", "sh"];
    command.extend(args.iter().map(String::as_str));
    let (mut whole, mut unknown) = (0, 0);
    for _ in 0..10 {
        let o = ste(mode, &["-o", "/dev/null"], &command);
        assert_eq!(o.status(), 0, "{}", o.stderr());
        let run = o.run();
        let execs = &run.processes[0].execs;
        assert_eq!(execs.len(), 2, "{}", o.stderr());
        let lost = &run.overhead.lost;
        match &execs[0].argv {
            Some(a) => {
                let a: Vec<String> = a.iter().map(|a| a.to_string_lossy()).collect();
                assert_eq!(a, command, "the shell's argv, whole");
                whole += 1;
            }
            None => {
                assert_eq!(lost.argv_unread + lost.argv_doubtful, 1, "{lost:?}");
                unknown += 1;
            }
        }
    }
    eprintln!("{whole} whole, {unknown} [?]");
}

/// A fork storm of 3,000 into netlink sockets of the smallest buffer the kernel allows
/// (`STE_NETLINK_RCVBUF=1`: about five events) overruns them hundreds of times. Each overrun is counted and said to have lost an unknown
/// number of events: the kernel reports the drop ahead of the events queued before it and
/// drops on, unreported, until the queue is empty, so no sequence gap of the filtered sockets
/// measures it (the first gap after the report put "at most 73 events" on a run that lacked
/// 252 processes). What the rebuilds from /proc made of it holds: no process counted twice,
/// and every process whose end was lost ended, counted, without a status (the root's aside).
#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn netlink_overruns_are_counted_not_sized() {
    let mode = Mode {
        tracker: Tracker::Netlink,
        who: Who::Root,
    };
    let _alone = machine_to_itself();
    let o = ste_with(mode, &[], &[&fixture(), "forks", "3000"], |c| {
        c.env("STE_NETLINK_RCVBUF", "1");
    });
    assert_eq!(o.status(), 0, "{}", o.stderr());
    let run = o.run();
    let lost = &run.overhead.lost;
    assert!(lost.overruns > 0, "no overrun: {lost:?}");
    assert_eq!(lost.events_at_most, None, "{lost:?}");
    assert_eq!(run.overhead.lost_events, None);
    assert!(
        o.stderr().contains(&format!(
            "an unknown number of events in {} receive-buffer overrun",
            lost.overruns
        )),
        "{}",
        o.stderr()
    );
    assert!(run.totals.processes <= 3001, "{}", run.totals.processes);
    let mut seen = std::collections::HashSet::new();
    for p in &run.processes {
        assert!(seen.insert((p.pid, p.start_ns)), "pid {} twice", p.pid);
    }
    let unended = run
        .processes
        .iter()
        .filter(|p| p.exit_code.is_none() && p.signal.is_none())
        .count() as u64;
    // The root's status comes from ste's own wait when its exit event was lost.
    assert!(
        unended <= lost.exits_missed && lost.exits_missed <= unended + 1,
        "{unended} without a status: {lost:?}"
    );
    assert_eq!(run.processes[0].exit_code, Some(0));
    eprintln!("{} of 3001 processes; {lost:?}", run.totals.processes);
}

/// The fork loop of 2,000 `/bin/true` under the netlink tracker as root, on each of its paths:
/// two sockets (exec events waited on, fork and exit events drained; the default on a kernel
/// with the event filter, 6.6+) and one socket getting every event (older kernels, forced
/// here with `STE_NETLINK_NO_FILTER`). Both count every process and exec exactly, lose no
/// event, and show every argv as `/bin/true` or count it as not shown.
fn netlink_fork_loop(no_filter: bool) {
    let mode = Mode {
        tracker: Tracker::Netlink,
        who: Who::Root,
    };
    let script = "i=0; while [ $i -lt 2000 ]; do /bin/true; i=$((i+1)); done";
    // A fork loop whose reader runs at nice -10: it takes the CPUs from a test beside it.
    let _alone = machine_to_itself();
    let o = ste_with(
        mode,
        &["-o", "/dev/null"],
        &["/bin/sh", "-c", script],
        |c| {
            if no_filter {
                c.env("STE_NETLINK_NO_FILTER", "1");
            }
        },
    );
    assert_eq!(o.status(), 0, "{}", o.stderr());
    let run = o.run();
    assert_eq!(run.tracker, "netlink");
    assert_eq!(
        (run.totals.processes, run.totals.threads, run.totals.execs),
        (2001, 2001, 2001),
        "{}",
        o.stderr()
    );
    let lost = &run.overhead.lost;
    assert_eq!(run.overhead.lost_events, Some(0), "{lost:?}");
    // The root's argv too may be unproven (a loaded machine may never find it asleep).
    let mut shown = 0;
    for (i, p) in run.processes.iter().enumerate() {
        assert_eq!(p.execs.len(), 1, "pid {}", p.pid);
        if let Some(a) = &p.execs[0].argv {
            let a: Vec<String> = a.iter().map(|a| a.to_string_lossy()).collect();
            let want = if i == 0 {
                vec!["/bin/sh", "-c", script]
            } else {
                vec!["/bin/true"]
            };
            assert_eq!(a, want, "pid {}", p.pid);
            shown += 1;
        }
        assert_eq!(p.exit_code, Some(0), "pid {}", p.pid);
    }
    assert_eq!(
        shown + lost.argv_unread + lost.argv_doubtful,
        2001,
        "{lost:?}"
    );
    eprintln!("{shown} of 2001 argv shown; {lost:?}");
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn netlink_fork_loop_with_exec_events_on_their_own_socket() {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    if !ste::kernel::cn_proc::kernel_has_filter(release.trim()) {
        eprintln!(
            "skipped: kernel {} has no proc connector event filter (6.6+), so ste uses one socket",
            release.trim()
        );
        return;
    }
    netlink_fork_loop(false);
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn netlink_fork_loop_with_every_event_on_one_socket() {
    netlink_fork_loop(true);
}

/// The netlink reader asks for the scheduler's shortest slice (0.1 ms, Linux 6.12+), so an
/// exec event wakes it ahead of a running thread; nothing else of ste does. As root and as
/// `nobody` (no privilege is needed). The command reads `se.slice` of each of ste's threads
/// from /proc (shown where the kernel has its scheduler debug fields).
fn reader_slice(who: Who) {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut v = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|s| s.parse::<u32>().ok());
    if (v.next().unwrap_or(0), v.next().unwrap_or(0)) < (6, 12) {
        eprintln!(
            "skipped: kernel {} has no slice per thread (6.12+)",
            release.trim()
        );
        return;
    }
    let script = "i=0; until grep -qx ste-sampler /proc/$PPID/task/*/comm; do \
                  i=$((i+1)); [ $i -lt 500 ] || exit 9; sleep 0.01; done; \
                  for t in /proc/$PPID/task/*; do \
                  echo $(cat $t/comm) $(grep -s '^se.slice ' $t/sched | tr -dc 0-9); done";
    let mode = Mode {
        tracker: Tracker::Netlink,
        who,
    };
    let o = ste(mode, &["-o", "/dev/null"], &["sh", "-c", script]);
    assert_eq!(o.status(), 0, "{}", o.stderr());
    let out = o.stdout();
    let slices: Vec<(&str, Option<u64>)> = out
        .lines()
        .filter_map(|l| {
            let (name, slice) = l.split_once(' ')?;
            Some((name, slice.trim().parse::<u64>().ok()))
        })
        .collect();
    if slices.iter().all(|(_, s)| s.is_none()) {
        eprintln!("skipped: /proc/PID/task/TID/sched shows no se.slice: {out}");
        return;
    }
    for (name, slice) in &slices {
        let short = *slice == Some(100_000);
        assert_eq!(short, *name == "ste-netlink", "{name}: {out}");
    }
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn netlink_reader_runs_with_the_shortest_slice_root() {
    reader_slice(Who::Root);
}

#[test]
fn netlink_reader_runs_with_the_shortest_slice_nobody() {
    reader_slice(Who::Nobody);
}

/// A process whose exec was seen without its argv (2 MiB of it, past the ebpf tracker's copy,
/// read from /proc after `true` was gone; netlink's read alike) ran a program: the report
/// calls it "exec'd, argv unknown", never "forked, no exec", wherever it names it (here the
/// largest process: the argv on its stack makes it so). Where the argv was read, its program.
fn an_exec_without_its_argv_is_named_so(mode: Mode) {
    // 16 arguments of 130 KB: past 2 MiB, so the stack's limit must allow it (a quarter of
    // it holds argv and the environment).
    let args: Vec<String> = (0..16).map(big_arg).collect();
    let mut command = vec!["/bin/true"];
    command.extend(args.iter().map(String::as_str));
    let o = ste_with(mode, &[], &command, |c| {
        // SAFETY: setrlimit is async-signal-safe; the limit is the child's own.
        unsafe {
            c.pre_exec(|| {
                let lim = libc::rlimit {
                    rlim_cur: 64 << 20,
                    rlim_max: libc::RLIM_INFINITY,
                };
                if libc::setrlimit(libc::RLIMIT_STACK, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
        };
    });
    assert_eq!(o.status(), 0);
    // The report without its 2 MiB EXEC line.
    let err: String = o
        .stderr()
        .lines()
        .filter(|l| !l.starts_with("EXEC: "))
        .map(|l| format!("{l}\n"))
        .collect();
    let run = o.run();
    let p = &run.processes[0];
    assert_eq!(p.execs.len(), 1, "{err}");
    let name = match &p.execs[0].argv {
        Some(_) => "true",
        None => "exec'd, argv unknown",
    };
    // Netlink as nobody has no peak to name it by.
    if !err.contains("largest process n/a") {
        // The program, then what tells it apart (its words, cut), then the label.
        assert!(
            err.contains(&format!(", pid {} {name} (", p.pid))
                || err.contains(&format!(", pid {} {name} ", p.pid)),
            "{err}"
        );
    }
    assert!(!err.contains("forked, no exec"), "{err}");
}

matrix!(
    an_exec_without_its_argv_is_named_as_such,
    an_exec_without_its_argv_is_named_so
);
/// Copies of `tests/it/c/privileges.c` that ask an exec for privileges: one set-user-ID to
/// uid 1 (not root: the program prints its ids and nothing else, but a set-user-ID root file
/// in a shared directory is not made even so), one with the file capability `cap_net_raw`.
fn privileged_copies() -> (String, String) {
    let plain = crate::malloc::c_program("privileges", &[]);
    let setuid = scratch("privileges-setuid");
    install(std::path::Path::new(&plain), &setuid, 0o755);
    std::os::unix::fs::chown(&setuid, Some(1), Some(1)).unwrap();
    set_mode(&setuid, 0o4755);
    let caps = scratch("privileges-caps");
    install(std::path::Path::new(&plain), &caps, 0o755);
    let set = std::process::Command::new("setcap")
        .arg("cap_net_raw+ep")
        .arg(&caps)
        .status()
        .expect("setcap (libcap2-bin) is needed");
    assert!(set.success());
    (setuid.display().to_string(), caps.display().to_string())
}

/// `euid N …` lines the copies printed: (euid, CapEff).
fn privileges_printed(stdout: &str) -> Vec<(u32, u64)> {
    stdout
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split(' ').collect();
            match w[..] {
                ["euid", uid, "egid", _, "capeff", cap] => {
                    Some((uid.parse().ok()?, u64::from_str_radix(cap, 16).ok()?))
                }
                _ => None,
            }
        })
        .collect()
}

// Under an unprivileged ptrace tracer the kernel runs a set-user-ID or file-capability
// program without its privileges, and a tracer inside the tree (strace) cannot trace what it
// starts: the report says, in one line, which process and what to use instead. As root the
// tracer has CAP_SYS_PTRACE and the programs get their privileges (strace still cannot trace);
// the other trackers change nothing and say nothing.
matrix!(ptrace_says_what_it_changed, |mode: Mode| {
    if !is_root() {
        eprintln!(
            "skipped: makes a set-user-ID copy owned by uid 1 and sets a file capability (root)"
        );
        return;
    }
    let (setuid, caps) = privileged_copies();
    let script = "\"$0\"; \"$1\"; strace -f -o /dev/null true; echo strace $?";
    let o = ste(mode, &[], &["sh", "-c", script, &setuid, &caps]);
    assert_eq!(o.status(), 0, "{}", o.stderr());
    let err = o.stderr();
    let ptrace = mode.used() == Tracker::Ptrace;
    let unprivileged = ptrace && mode.who == Who::Nobody;
    let printed = privileges_printed(&o.stdout());
    const CAP_NET_RAW: u64 = 1 << 13;
    let uid = if mode.who == Who::Root { 0 } else { 65534 };
    if unprivileged {
        // The exec changed nothing: the ids and capabilities the user had.
        assert_eq!(printed, [(65534, 0), (65534, 0)], "{}", o.stdout());
    } else {
        assert_eq!(printed[0].0, 1, "{}", o.stdout());
        assert_ne!(printed[1].1 & CAP_NET_RAW, 0, "{}", o.stdout());
        assert_eq!(printed[1].0, uid);
    }
    let strace_failed = o.stdout().contains("strace 1");
    assert_eq!(strace_failed, ptrace, "{}\n{err}", o.stdout());
    let note = err
        .lines()
        .find_map(|l| l.strip_prefix("Note: ptrace changed what the command did: "));
    if !ptrace {
        assert_eq!(note, None, "{err}");
        return;
    }
    let note = note.unwrap_or_else(|| panic!("no line says what ptrace changed\n{err}"));
    let pid_of = |program: &str| {
        o.run()
            .processes
            .iter()
            .find(|p| {
                p.execs
                    .last()
                    .and_then(|e| e.argv.as_ref())
                    .is_some_and(|a| a[0].to_string_lossy().ends_with(program))
            })
            .unwrap_or_else(|| panic!("no {program} in the run"))
            .pid
    };
    assert!(
        note.contains(&format!(
            "pid {} (strace) could not trace the processes it started",
            pid_of("strace")
        )),
        "{note}"
    );
    if unprivileged {
        assert!(
            note.contains(&format!(
                "pid {} exec'd {setuid} (set-user-ID) without its privileges",
                pid_of("privileges-setuid")
            )),
            "{note}"
        );
        // The file-capability program is the third process said.
        assert!(note.contains("(3 processes in all)"), "{note}");
        assert!(note.ends_with("use --tracker netlink, or run ste as root (ebpf)"));
    } else {
        assert!(!note.contains("without its privileges"), "{note}");
        assert!(note.ends_with("use --tracker netlink, or ebpf (the default as root)"));
    }
});
