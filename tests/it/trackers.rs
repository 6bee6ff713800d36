//! The ptrace tracker's stops, made cheap: a process's /proc files are opened while it runs and
//! only read at its exec and exit stops, up to a budget of descriptors; beyond it, the stops
//! open the files themselves. Both ways must give the same exact figures: argv at every exec
//! (re-execs included), `/proc/PID/io` and `VmHWM` at the exit.

use crate::harness::*;
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
fn exit_and_exec_figures_beyond_the_descriptor_budget_root() {
    check(&run(Who::Root, Some(24)));
}

#[test]
fn exit_and_exec_figures_beyond_the_descriptor_budget_nobody() {
    check(&run(Who::Nobody, Some(24)));
}
