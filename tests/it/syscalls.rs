//! `--syscalls` and the ebpf tracker (issue 4): exact counts against known workloads and
//! against `strace -f -c`, errors by errno, per-process images, the ptrace slow path, what an
//! unprivileged user is told, the ebpf tracker against ptrace, and the committed BPF object
//! against its source.

use crate::harness::*;
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use ste::model::{Run, Syscalls};

const EBPF: Mode = Mode {
    tracker: Tracker::Ebpf,
    who: Who::Root,
};
const PTRACE: Mode = Mode {
    tracker: Tracker::Ptrace,
    who: Who::Root,
};

fn fixture() -> String {
    example("syscalls_fixture").display().to_string()
}

fn syscalls(run: &Run) -> &Syscalls {
    run.syscalls.as_ref().expect("the run has system calls")
}

/// Calls and errors of the system call `name`, for the tree.
fn count(run: &Run, name: &str) -> (u64, u64) {
    syscalls(run)
        .calls
        .iter()
        .find(|r| r.name.as_deref() == Some(name) && !r.compat)
        .map_or((0, 0), |r| (r.calls, r.errors))
}

/// Runs the fixture under ste and returns the run, asserting it succeeded and counted with
/// `method`.
fn run_fixture(mode: Mode, flags: &[&str], args: &[&str], method: &str) -> Run {
    let mut command = vec![fixture()];
    command.extend(args.iter().map(|s| s.to_string()));
    let command: Vec<&str> = command.iter().map(String::as_str).collect();
    let o = ste(mode, flags, &command);
    assert_eq!(o.status(), 0, "{}", o.stderr());
    let run = o.run().clone();
    assert_eq!(syscalls(&run).method, method, "{}", o.stderr());
    run
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn two_million_getppid_are_counted_exactly() {
    for flags in [["--syscalls=count"], ["--syscalls"]] {
        // What the program makes besides the loop (none, for getppid: but measured, not assumed).
        let base = run_fixture(EBPF, &flags, &["getppid", "0"], "ebpf");
        let (startup, _) = count(&base, "getppid");
        let run = run_fixture(EBPF, &flags, &["getppid", "2000000"], "ebpf");
        assert_eq!(
            count(&run, "getppid"),
            (2_000_000 + startup, 0),
            "{flags:?}"
        );
        let row = syscalls(&run)
            .calls
            .iter()
            .find(|r| r.name.as_deref() == Some("getppid"))
            .unwrap();
        assert_eq!(row.group, "Process Mgmt.");
        assert_eq!(row.file.as_deref(), Some("kernel/sys.c"));
        // The calls other than the loop's are the same in both runs.
        let others = |r: &Run| -> u64 {
            syscalls(r)
                .calls
                .iter()
                .filter(|c| c.name.as_deref() != Some("getppid"))
                .map(|c| c.calls)
                .sum()
        };
        assert_eq!(others(&run), others(&base), "{flags:?}");
        if flags[0] == "--syscalls" {
            let total = row.total_ns.expect("timed");
            assert!(total > 0 && row.max_ns.unwrap() <= total);
        } else {
            assert_eq!(row.total_ns, None, "count mode keeps no time");
        }
    }
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn failures_are_counted_by_errno() {
    let base = run_fixture(EBPF, &["--syscalls"], &["fail", "0"], "ebpf");
    let run = run_fixture(EBPF, &["--syscalls"], &["fail", "7"], "ebpf");
    let (calls0, errors0) = count(&base, "openat");
    assert_eq!(count(&run, "openat"), (calls0 + 7, errors0 + 7));
    let enoent = |r: &Run| {
        syscalls(r)
            .errors
            .iter()
            .find(|e| e.name.as_deref() == Some("ENOENT") && e.nr == openat_nr(r))
            .map_or(0, |e| e.calls)
    };
    assert_eq!(enoent(&run), enoent(&base) + 7);
}

fn openat_nr(run: &Run) -> u32 {
    syscalls(run)
        .calls
        .iter()
        .find(|r| r.name.as_deref() == Some("openat"))
        .unwrap()
        .nr
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn per_process_mode_splits_calls_by_exec_image_and_sums_threads() {
    // Image 1: the fixture making 1,000 calls; image 2: itself exec'd, making 3,000.
    let base = run_fixture(EBPF, &["--syscalls"], &["getppid", "0"], "ebpf");
    let (startup, _) = count(&base, "getppid");
    let run = run_fixture(
        EBPF,
        &["--syscalls=per-process"],
        &["chain", "1000", "3000"],
        "ebpf",
    );
    let sc = syscalls(&run);
    assert!(sc.per_process);
    assert_eq!(sc.uncounted.per_process_missing, 0, "{:?}", sc.uncounted);
    let nr = |name: &str| {
        sc.calls
            .iter()
            .find(|r| r.name.as_deref() == Some(name))
            .unwrap()
            .nr
    };
    let getppid_of = |exec: usize| {
        sc.images
            .iter()
            .find(|i| i.process == 0 && i.exec == Some(exec))
            .and_then(|i| i.calls.iter().find(|c| c.nr == nr("getppid")))
            .map_or(0, |c| c.calls)
    };
    assert_eq!(getppid_of(0), 1000 + startup);
    assert_eq!(getppid_of(1), 3000 + startup);
    // The second image's execve (it returns in the new image) is counted there.
    let execve_of = |exec: usize| {
        sc.images
            .iter()
            .find(|i| i.process == 0 && i.exec == Some(exec))
            .and_then(|i| i.calls.iter().find(|c| c.nr == nr("execve")))
            .map_or(0, |c| c.calls)
    };
    assert_eq!((execve_of(0), execve_of(1)), (1, 1));
    let text = run_text(&run);
    assert!(text.contains("System calls by program"), "{text}");

    // Threads: 4 × 2,500 calls in one process.
    let run = run_fixture(
        EBPF,
        &["--syscalls=per-process"],
        &["threads", "4", "2500"],
        "ebpf",
    );
    let sc = syscalls(&run);
    assert_eq!(run.totals.threads, 5);
    let image: u64 = sc
        .images
        .iter()
        .filter(|i| i.process == 0)
        .flat_map(|i| &i.calls)
        .filter(|c| c.nr == nr("getppid"))
        .map(|c| c.calls)
        .sum();
    assert_eq!(image, 10_000 + startup);
    assert_eq!(sc.uncounted.per_process_missing, 0);
}

/// The text report of a run, rendered again from its JSON.
fn run_text(run: &Run) -> String {
    let mut out = Vec::new();
    ste::report::text::render_summary(
        run,
        &mut out,
        ste::report::style::Style {
            width: 80,
            color: false,
            fit: true,
        },
    )
    .unwrap();
    String::from_utf8(out).unwrap()
}

/// A small shell pipeline with a known shape: two pipelines and a failing command.
const PIPELINE: &str = "cat /etc/hostname | tr a-z A-Z; ls -d /nonexistent /; exit 0";

/// `strace -f -c` of the pipeline: name → (calls, errors).
fn strace_counts() -> BTreeMap<String, (u64, u64)> {
    let out = scratch("strace.txt");
    let status = Command::new("strace")
        .args(["-f", "-c", "-U", "calls,errors,name", "-o"])
        .arg(&out)
        .args(["/bin/sh", "-c", PIPELINE])
        // Where ste runs the command: the shell calls getcwd when $PWD is not its directory.
        .current_dir(&bins().dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("strace is needed for this test (.ci/run installs it)");
    assert!(status.success());
    let text = std::fs::read_to_string(&out).unwrap();
    let mut m = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        // "calls errors name", errors blank when zero.
        let parsed = match f.as_slice() {
            [calls, errors, name] => calls
                .parse()
                .ok()
                .zip(errors.parse().ok())
                .map(|c| (c, *name)),
            [calls, name] => calls.parse().ok().map(|c| ((c, 0), *name)),
            _ => None,
        };
        if let Some(((calls, errors), name)) = parsed
            && name != "total"
        {
            m.insert(name.to_string(), (calls, errors));
        }
    }
    assert!(m.contains_key("execve"), "{text}");
    m
}

/// ste's counts of the pipeline: name → (calls, errors).
fn ste_counts(mode: Mode, flag: &str) -> BTreeMap<String, (u64, u64)> {
    let o = ste_with(
        mode,
        &[flag, "--allow-ptrace"],
        &["/bin/sh", "-c", PIPELINE],
        |c| {
            c.stdout(Stdio::null());
        },
    );
    assert_eq!(o.status(), 0, "{}", o.stderr());
    let sc = syscalls(o.run());
    assert_eq!(sc.uncounted.bad_numbers, 0);
    sc.calls
        .iter()
        .map(|r| (r.name.clone().unwrap(), (r.calls, r.errors)))
        .collect()
}

/// Calls whose count depends on timing, not on the program: the shell's SIGCHLD handler runs
/// once per delivery, and two children ending close together make one delivery (rt_sigreturn);
/// its wait4 loop then finds one child more or less per call.
const TIMING: [&str; 2] = ["rt_sigreturn", "wait4"];

fn assert_same_as_strace(mode: Mode, flag: &str, method: &str) {
    let theirs = strace_counts();
    let ours = ste_counts(mode, flag);
    let exact = |m: &BTreeMap<String, (u64, u64)>| -> BTreeMap<String, (u64, u64)> {
        m.iter()
            .filter(|(k, _)| !TIMING.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    };
    assert_eq!(
        exact(&ours),
        exact(&theirs),
        "{method} {flag}: per-call counts and errors differ from strace -f -c"
    );
    // The timing-dependent ones: one handler run per child at most, one wait per child at least.
    let children = 3; // cat, tr, ls
    for m in [&ours, &theirs] {
        let (sigreturns, _) = m.get("rt_sigreturn").copied().unwrap_or_default();
        let (waits, _) = m.get("wait4").copied().unwrap_or_default();
        assert!(sigreturns <= children && waits >= children, "{m:?}");
    }
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn ebpf_counts_match_strace_call_for_call() {
    assert_same_as_strace(EBPF, "--syscalls", "ebpf");
    assert_same_as_strace(EBPF, "--syscalls=count", "ebpf");
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn ptrace_syscall_stops_match_strace_call_for_call() {
    assert_same_as_strace(PTRACE, "--syscalls", "ptrace");
}

#[test]
fn nobody_is_told_bpf_cannot_load_and_offered_the_slow_path() {
    let marker = scratch("ran");
    let o = command_as(Who::Nobody, &bins().ste)
        .args(["--syscalls", "--", "touch"])
        .arg(&marker)
        .current_dir(&bins().dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(125), "{err}");
    assert!(
        err.contains(
            "--syscalls counts system calls in the kernel with BPF, which cannot load here"
        ),
        "{err}"
    );
    assert!(err.contains(NO_BPF), "{err}");
    assert!(err.contains("--syscalls --allow-ptrace"), "{err}");
    assert!(
        !marker.exists(),
        "the command must not run when nothing would be counted"
    );

    // With --allow-ptrace: counted at syscall stops, exactly, and labelled slow.
    let nobody = Mode {
        tracker: Tracker::Ebpf,
        who: Who::Nobody,
    };
    let base = run_fixture(
        nobody,
        &["--syscalls", "--allow-ptrace"],
        &["getppid", "0"],
        "ptrace",
    );
    let (startup, _) = count(&base, "getppid");
    let mut command = vec![fixture()];
    command.extend(["getppid".to_string(), "5000".to_string()]);
    let command: Vec<&str> = command.iter().map(String::as_str).collect();
    let o = ste(nobody, &["--syscalls", "--allow-ptrace"], &command);
    assert_eq!(o.status(), 0, "{}", o.stderr());
    assert_eq!(count(o.run(), "getppid"), (5000 + startup, 0));
    let err = o.stderr();
    assert!(
        err.contains("counted at ptrace syscall stops, like strace: SLOW"),
        "{err}"
    );
    assert!(err.contains("BPF cannot load"), "{err}");
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn trackers_that_cannot_count_syscalls_refuse() {
    let o = ste(
        Mode {
            tracker: Tracker::Netlink,
            who: Who::Root,
        },
        &["--syscalls"],
        &["/bin/true"],
    );
    assert_eq!(o.status(), 125);
    assert!(
        o.stderr().contains("the netlink tracker cannot count them"),
        "{}",
        o.stderr()
    );
    let o = ste(PTRACE, &["--syscalls"], &["/bin/true"]);
    assert_eq!(o.status(), 125);
    assert!(o.stderr().contains("add --allow-ptrace"), "{}", o.stderr());
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn ebpf_and_ptrace_see_the_same_processes_threads_and_execs() {
    let script = "i=0; while [ $i -lt 2000 ]; do /bin/true; i=$((i+1)); done; /bin/echo done";
    let runs: Vec<Outcome> = [EBPF, PTRACE]
        .into_iter()
        .map(|mode| {
            let o = ste(mode, &[], &["/bin/sh", "-c", script]);
            assert_eq!(o.status(), 0, "{}", o.stderr());
            assert_eq!(o.run().tracker, mode.tracker.name());
            o
        })
        .collect();
    let (e, p) = (&runs[0], &runs[1]);
    assert_eq!(e.exec_lines(), p.exec_lines());
    assert_eq!(e.exec_lines().len(), 2002);
    assert_eq!(e.run().totals.processes, p.run().totals.processes);
    assert_eq!(e.run().totals.threads, p.run().totals.threads);
    assert_eq!(e.run().totals.execs, p.run().totals.execs);
    assert_eq!(e.run().overhead.lost_events, Some(0));
    let codes = |o: &Outcome| -> Vec<Option<i32>> {
        o.run().processes.iter().map(|p| p.exit_code).collect()
    };
    assert_eq!(codes(e), codes(p));
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn a_fork_storm_loses_nothing() {
    let _alone = crate::harness::machine_to_itself();
    let o = ste(EBPF, &[], &[&crate::harness::fixture(), "forks", "20000"]);
    assert_eq!(o.status(), 0, "{}", o.stderr());
    let run = o.run();
    assert_eq!(run.totals.processes, 20_001);
    assert_eq!(run.overhead.lost_events, Some(0), "{:?}", run.overhead.lost);
    assert!(run.processes.iter().all(|p| p.end_ns.is_some()));
}

#[test]
fn committed_bpf_object_matches_its_source() {
    let have = Command::new("clang").arg("--version").output();
    let found = have
        .is_ok_and(|o| o.status.success())
        .then(|| std::path::PathBuf::from("clang"));
    if tool(
        "clang",
        found,
        "it rebuilds the BPF object: apt-get install clang llvm libbpf-dev, as .ci/run does",
    )
    .is_none()
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let o = Command::new(root.join("bpf/build.sh"))
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut checked = 0;
    for entry in std::fs::read_dir(root.join("bpf")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "o") {
            let rebuilt = dir.path().join(path.file_name().unwrap());
            assert!(
                std::fs::read(&path).unwrap() == std::fs::read(&rebuilt).unwrap(),
                "{} does not match its source: run bpf/build.sh and commit the object",
                path.display()
            );
            checked += 1;
        }
    }
    assert!(checked > 0, "no BPF object found in bpf/");
}

/// Builds the i386 fixture (tests/it/asm/getppid_i386.s) and checks that this kernel runs it
/// (IA32 emulation), so the test below cannot pass by testing nothing.
fn i386_fixture() -> std::path::PathBuf {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/asm/getppid_i386.s");
    let obj = scratch("getppid_i386.o");
    let bin = scratch("getppid_i386");
    let ok = |c: &mut Command| c.status().is_ok_and(|s| s.success());
    assert!(
        ok(Command::new("as").args(["--32", "-o"]).arg(&obj).arg(&src)),
        "`as --32` (binutils) is needed"
    );
    assert!(ok(Command::new("ld")
        .args(["-m", "elf_i386", "-static", "-o"])
        .arg(&bin)
        .arg(&obj)));
    set_mode(&bin, 0o755);
    let st = Command::new(&bin).status().unwrap();
    assert_eq!(
        st.code(),
        Some(7),
        "the kernel must run i386 programs (IA32 emulation)"
    );
    bin
}

#[test]
fn compat_i386_calls_are_counted_under_their_own_abi() {
    if !is_root() {
        return;
    }
    let bin = i386_fixture();
    let bin = bin.to_str().unwrap();
    for (mode, flags, method) in [
        (EBPF, &["--syscalls=count"][..], "ebpf"),
        (EBPF, &["--syscalls"][..], "ebpf"),
        (PTRACE, &["--syscalls", "--allow-ptrace"][..], "ptrace"),
    ] {
        let o = ste(mode, flags, &[bin]);
        assert_eq!(o.status(), 7, "{}", o.stderr());
        let run = o.run();
        let s = syscalls(run);
        assert_eq!(s.method, method);
        assert_eq!(s.compat_arch.as_deref(), Some("i386"));
        let rows: Vec<_> = s
            .calls
            .iter()
            .map(|r| (r.name.clone().unwrap_or_default(), r.compat, r.calls))
            .collect();
        // The loop's calls, and the execve that loaded the program: it returns into the
        // 32-bit image, where the kernel reports it under the compat number (11). exit never
        // returns, so it is not counted (as strace).
        assert_eq!(
            rows,
            vec![("getppid".into(), true, 1000), ("execve".into(), true, 1)],
            "{flags:?} {method}"
        );
        assert!(o.stderr().contains("getppid (i386)"), "{}", o.stderr());
    }
}
