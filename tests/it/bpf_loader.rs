//! ste's own BPF loader (issue 2's start-up): as root under the ebpf tracker it loads from the
//! kernel's BTF, and a kernel BTF it cannot use (`STE_KERNEL_BTF` pointing at a corrupt or
//! foreign blob) is refused with a message that says which file and what is wrong with it. What
//! the BTF told a run is kept for the next run of the same binary (`/run/ste/btf-*`), which
//! then reads the same figures without walking it.

use crate::harness::{Mode, Tracker, Who, bins, command_as, scratch, ste, ste_with};

const EBPF_ROOT: Mode = Mode {
    tracker: Tracker::Ebpf,
    who: Who::Root,
};

/// `ste --tracker ebpf -- /bin/true` as root with `STE_KERNEL_BTF=btf`: (status, stderr).
fn with_btf(btf: &std::path::Path) -> (i32, String) {
    let o = command_as(Who::Root, &bins().ste)
        .current_dir(&bins().dir)
        .args(["--tracker", "ebpf", "-o", "/dev/null", "--", "/bin/true"])
        .env("STE_KERNEL_BTF", btf)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (
        o.status.code().expect("ste was killed"),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A valid BTF blob holding one `int`: parsable, but with none of the kernel's structures.
fn int_only_btf() -> Vec<u8> {
    let strings = b"\0int\0";
    let types: Vec<u32> = vec![1, 1 << 24, 4, (1 << 24) | 32];
    let mut b = Vec::new();
    b.extend_from_slice(&0xeb9f_u16.to_le_bytes());
    b.extend_from_slice(&[1, 0]);
    let tl = (types.len() * 4) as u32;
    for w in [24, 0, tl, tl, strings.len() as u32] {
        b.extend_from_slice(&w.to_le_bytes());
    }
    for w in types {
        b.extend_from_slice(&w.to_le_bytes());
    }
    b.extend_from_slice(strings);
    b
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn loads_from_the_kernels_btf() {
    let o = ste(EBPF_ROOT, &[], &["/bin/sh", "-c", "/bin/true"]);
    assert_eq!(o.status(), 0, "{}", o.stderr());
    let run = o.run();
    assert_eq!(run.tracker, "ebpf", "{:?}", run.notes);
    assert_eq!(run.totals.processes, 2);
    // Read in the kernel at offsets from the BTF: pids, the exit status and the peak RSS.
    let child = &run.processes[1];
    assert_eq!(child.exit_code, Some(0));
    assert!(child.peak_rss_bytes.is_some_and(|b| b > 0), "{child:?}");
    // The explicit default path gives the same.
    let (status, err) = with_btf(std::path::Path::new("/sys/kernel/btf/vmlinux"));
    assert_eq!(status, 0, "{err}");
}

/// The figures the offsets from the BTF are read at, for a run of a shell that runs `sleep`
/// and exits with 3 (ste with it).
fn read_at_offsets(o: &crate::harness::Outcome) -> Vec<String> {
    assert_eq!(o.status(), 3, "{}", o.stderr());
    let run = o.run();
    assert_eq!(run.tracker, "ebpf", "{:?}", run.notes);
    run.processes
        .iter()
        .map(|p| {
            assert!(p.peak_rss_bytes.is_some_and(|b| b > 0), "{p:?}");
            let argv: Vec<String> = p.execs.iter().map(|e| format!("{:?}", e.argv)).collect();
            format!("{:?} {}", p.exit_code, argv.join(" "))
        })
        .collect()
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn a_run_takes_what_the_btf_told_the_last_run_and_reads_the_same() {
    let command = ["/bin/sh", "-c", "/bin/sleep 0.01; exit 3"];
    let phased = |walk: bool| {
        ste_with(EBPF_ROOT, &[], &command, |c| {
            c.env("STE_PHASES", "1");
            if walk {
                // Another BTF than the kernel's own is never kept: this one is walked.
                c.env("STE_KERNEL_BTF", "/sys/kernel/btf/vmlinux");
            }
        })
    };
    let walked = phased(true);
    assert!(
        walked.stderr().contains("bpf: kernel BTF [") && !walked.stderr().contains("as kept"),
        "{}",
        walked.stderr()
    );
    // The first run of this binary since boot walks it and keeps the answer; the next takes it.
    let _ = phased(false);
    let kept = phased(false);
    let err = kept.stderr();
    let phases: Vec<&str> = err.lines().filter(|l| l.contains("BTF")).collect();
    assert!(
        phases.len() == 1 && phases[0].contains("bpf: kernel BTF, as kept"),
        "{err}"
    );
    let (a, b) = (read_at_offsets(&walked), read_at_offsets(&kept));
    assert_eq!(a, b);
    assert_eq!(a.len(), 2, "{a:?}");
    assert!(a[0].starts_with("Some(3) "), "{a:?}");
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn an_unusable_kernel_btf_is_refused_clearly() {
    // What the test relies on: the real BTF loads (so the failures below are the blobs').
    let (status, err) = with_btf(std::path::Path::new("/sys/kernel/btf/vmlinux"));
    assert_eq!(status, 0, "{err}");

    let corrupt = scratch("corrupt.btf");
    std::fs::write(&corrupt, b"this is not BTF at all").unwrap();
    let (status, err) = with_btf(&corrupt);
    assert_ne!(status, 0, "{err}");
    assert!(
        err.contains(&format!(
            "cannot read the kernel's BTF ({}): not a BTF blob (bad magic)",
            corrupt.display()
        )),
        "{err}"
    );

    // The real header with its sections cut off.
    let truncated = scratch("truncated.btf");
    let real = std::fs::read("/sys/kernel/btf/vmlinux").unwrap();
    std::fs::write(&truncated, &real[..4096]).unwrap();
    let (status, err) = with_btf(&truncated);
    assert_ne!(status, 0, "{err}");
    assert!(err.contains("section is out of bounds"), "{err}");

    // Well-formed, but not a kernel's.
    let foreign = scratch("foreign.btf");
    std::fs::write(&foreign, int_only_btf()).unwrap();
    let (status, err) = with_btf(&foreign);
    assert_ne!(status, 0, "{err}");
    assert!(err.contains("it has no `struct task_struct`"), "{err}");

    let missing = scratch("missing.btf");
    let (status, err) = with_btf(&missing);
    assert_ne!(status, 0, "{err}");
    assert!(
        err.contains("cannot read the kernel's BTF") && err.contains("CONFIG_DEBUG_INFO_BTF"),
        "{err}"
    );
    for p in [corrupt, truncated, foreign] {
        let _ = std::fs::remove_file(p);
    }
}

/// The ebpf floor of `bench/` (`examples/ebpf_floor.rs`): it runs the command under ste's BPF
/// programs and drains their records, and with `--cgroup` in a group of its own, made as ste's
/// accounting makes it and gone at the end. A floor that ran nothing, or left the command
/// outside its group, would put a false floor under every figure that is compared with it.
#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: loads BPF programs")]
fn the_ebpf_floor_runs_the_command_in_its_cgroup_and_removes_it() {
    let floor = crate::harness::example("ebpf_floor");
    let o = command_as(Who::Root, &floor)
        .args([
            "--timer",
            "10",
            "--cgroup",
            "--",
            "cat",
            "/proc/self/cgroup",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let out = String::from_utf8_lossy(&o.stdout);
    // The group's name, ste's own way: `ste-PID-START`, in the memory hierarchy at least.
    let group = out
        .lines()
        .find_map(|l| l.split("/ste-").nth(1))
        .unwrap_or_else(|| panic!("the command ran outside a ste group:\n{out}"));
    let leftover = std::process::Command::new("find")
        .args([
            "/sys/fs/cgroup",
            "-maxdepth",
            "5",
            "-name",
            &format!("ste-{group}"),
        ])
        .output()
        .unwrap();
    assert!(
        leftover.stdout.is_empty(),
        "the floor left its group behind: {}",
        String::from_utf8_lossy(&leftover.stdout)
    );
    // Records were drained: a fork, an exec and an exit of `cat` at least.
    let records = floor_records(&err);
    assert!(records >= 3, "{err}");
    // Without `--cgroup` the command stays in the floor's own group.
    let o = command_as(Who::Root, &floor)
        .args(["--", "cat", "/proc/self/cgroup"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("/ste-"));
}

/// `ebpf_floor --no-ledger` leaves out the last-switch program. A shell that runs `/bin/true`
/// twice makes, without it, 8 records: its exec and exit, and each child's fork, exec and
/// exit. With it, each child's last switch too, which comes before the shell goes on; the
/// shell's own may come after the floor's last drain (the floor stops once its wait returns),
/// so 10 or 11.
#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: loads BPF programs")]
fn the_ebpf_floor_without_the_ledger_has_no_last_switch() {
    let floor = crate::harness::example("ebpf_floor");
    let records = |extra: &[&str]| -> u64 {
        let o = command_as(Who::Root, &floor)
            .args(extra)
            .args([
                "--timer",
                "10",
                "--",
                "/bin/sh",
                "-c",
                "/bin/true; /bin/true; :",
            ])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{err}");
        floor_records(&err)
    };
    assert_eq!(records(&["--no-ledger"]), 8, "no last switch");
    let with = records(&[]);
    assert!((10..=11).contains(&with), "{with} records with the ledger");
}

/// The records the floor drained, from its last line on stderr (`ebpf_floor: N records, ...`).
fn floor_records(stderr: &str) -> u64 {
    stderr
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no record count: {stderr}"))
}
