//! `--delays`: delay accounting is switched on for the run and put back after it, even after a
//! ste killed by SIGKILL.
//!
//! A test binary of its own because `kernel.task_delayacct` is one setting for the whole
//! machine: while this test has it on (or a killed ste has left it on), every other run of ste
//! sees delays measured, and any root run sweeps the killed run's mark. Cargo runs test binaries
//! one after another, so nothing else runs beside it (in `tests/it` it raced the unprivileged
//! runs that check what is not measured, and the root runs that sweep).

#[allow(dead_code)]
#[path = "it/harness.rs"]
mod harness;

use harness::*;

const MIB: u64 = 1 << 20;

fn fixture() -> String {
    example("accounting_fixture").display().to_string()
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn delays_are_switched_on_for_the_run_and_restored() {
    let before = std::fs::read_to_string("/proc/sys/kernel/task_delayacct").unwrap();
    assert_eq!(before.trim(), "0", "this test expects delay accounting off");
    let path = scratch("8mib");
    std::fs::write(&path, vec![1u8; 8 * MIB as usize]).unwrap();
    // ptrace takes the waits from taskstats's records; ebpf reads them itself, at each task's
    // last switch (the same counters).
    for tracker in [Tracker::Ptrace, Tracker::Ebpf] {
        let mode = Mode {
            tracker,
            who: Who::Root,
        };
        let o = ste(
            mode,
            &["--delays", "-v"],
            &[&fixture(), "readfile", path.to_str().unwrap()],
        );
        assert_eq!(o.status(), 0, "{}", o.stderr());
        let after = std::fs::read_to_string("/proc/sys/kernel/task_delayacct").unwrap();
        assert_eq!(
            after.trim(),
            "0",
            "ste did not restore kernel.task_delayacct"
        );
        let run = o.run();
        let acc = run.accounting.as_ref().unwrap();
        assert_eq!(acc.delays_on, Some(true));
        assert!(acc.delays_switched_by_ste);
        let t = acc.time.as_ref().unwrap();
        assert!(t.blkio_ns.is_some() && t.swap_reclaim_ns.is_some());
        assert!(o.stderr().contains("block I/O "), "{}", o.stderr());
        let l = run.processes[0].ledger.as_ref().unwrap();
        let f = match tracker {
            Tracker::Ebpf => l.last_switch.as_deref(),
            _ => l.taskstats.as_deref(),
        }
        .unwrap_or_else(|| panic!("{tracker:?}: {l:?}"));
        // Measured, so kept (with delay accounting off they are left out: not figures).
        assert!(f.blkio_delay_ns.is_some() && f.swap_reclaim_delay_ns.is_some());
        // The file was read whole, after it left the page cache.
        assert!(f.read_char_bytes.unwrap() >= 8 * MIB, "{tracker:?}: {f:?}");
    }
    let _ = std::fs::remove_file(&path);
    let mode = Mode {
        tracker: Tracker::Ptrace,
        who: Who::Root,
    };

    // A ste killed by SIGKILL runs no destructor: the next ste run as root puts the setting
    // back, from the mark the killed one left.
    let json = scratch("delays-killed.json");
    let mut killed = ste_command(mode, &[], &json, &["--delays"], &["sleep", "30"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let on = loop {
        let on = std::fs::read_to_string("/proc/sys/kernel/task_delayacct").unwrap();
        if on.trim() == "1" || std::time::Instant::now() > deadline {
            break on.trim() == "1";
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    // SAFETY: signals ste's own pid; its tracee dies with it (PTRACE_O_EXITKILL).
    unsafe { libc::kill(killed.id() as i32, libc::SIGKILL) };
    killed.wait().unwrap();
    let _ = std::fs::remove_file(&json);
    assert!(on, "ste --delays did not switch delay accounting on");
    let marks = || std::fs::read_dir("/run/ste/delays").map_or(0, |d| d.count());
    assert_eq!(
        std::fs::read_to_string("/proc/sys/kernel/task_delayacct")
            .unwrap()
            .trim(),
        "1",
        "SIGKILL left delays on, as the premise of this test needs"
    );
    let o = ste(mode, &[], &["true"]);
    assert_eq!(o.status(), 0, "{}", o.stderr());
    assert_eq!(
        std::fs::read_to_string("/proc/sys/kernel/task_delayacct")
            .unwrap()
            .trim(),
        "0",
        "the next run did not put kernel.task_delayacct back: {}",
        o.stderr()
    );
    assert_eq!(marks(), 0, "the killed run's mark is still there");
    // No other ste runs beside this binary's one test, so this run is the one that swept.
    assert!(
        o.stderr()
            .contains("was left on by a ste --delays run that was killed"),
        "{}",
        o.stderr()
    );
}
