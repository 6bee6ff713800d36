//! The release build: what the README's first command runs and what users get, while every
//! other test drives the debug build. Linked statically with fat LTO, it has crashed where the
//! debug build did not (a glibc function that std declares weak came out unresolved: `gettid`
//! under ptrace, `statx` on every run; `tests/house.rs` now forbids such calls). Here it runs
//! each tracker once, as root, under sudo and as nobody: the BPF loader, ptrace, the proc
//! connector, taskstats, the cgroup, the invoking user's groups. `.ci/run` builds it before the
//! tests; without a release build as new as the sources, the test says so and checks nothing.

use crate::harness::*;
use std::path::PathBuf;
use std::process::Stdio;

#[path = "../common/release.rs"]
mod common;

/// The release binary, copied beside the debug one (for nobody), if it is as new as every
/// input of the build; else why not.
fn release_binary() -> Result<PathBuf, String> {
    let built = common::fresh_release_binary()?;
    let to = bins().dir.join("ste-release");
    install(&built, &to, 0o755);
    Ok(to)
}

#[test]
#[cfg_attr(
    not(ste_test_root),
    ignore = "needs root: runs the release build under each tracker, as root and under sudo"
)]
fn the_release_build_runs_every_tracker() {
    let ste = match release_binary() {
        Ok(p) => p,
        Err(why) => {
            eprintln!("skipped: {why} (`cargo build --release` first; .ci/run does)");
            return;
        }
    };
    let sudo = [
        ("SUDO_UID", "65534"),
        ("SUDO_GID", "65534"),
        ("SUDO_USER", "nobody"),
    ];
    // (who, sudo's variables, ste's options, the tracker that must have run)
    type Case<'a> = (Who, &'a [(&'a str, &'a str)], &'a [&'a str], &'a str);
    let cases: [Case; 6] = [
        (Who::Root, &[], &[], "ebpf"),
        (Who::Root, &[], &["--syscalls"], "ebpf"),
        (Who::Root, &[], &["--tracker", "ptrace"], "ptrace"),
        (Who::Root, &[], &["--tracker", "netlink"], "netlink"),
        (Who::Root, &sudo, &[], "ebpf"),
        (Who::Nobody, &[], &[], "ptrace"),
    ];
    for (who, env, args, tracker) in cases {
        let json = scratch("release.json");
        let mut c = command_as(who, &ste);
        c.current_dir(&bins().dir)
            .args(args)
            .arg("--json")
            .arg(&json)
            .args([
                "--",
                "/bin/sh",
                "-c",
                "/bin/true; /usr/bin/env true; exit 3",
            ])
            .envs(env.iter().copied())
            .env("NO_COLOR", "1")
            .stdin(Stdio::null());
        let o = c.output().expect("cannot run the release build");
        let err = String::from_utf8_lossy(&o.stderr);
        let case = format!("{who:?} {env:?} {args:?}");
        assert_eq!(o.status.code(), Some(3), "{case}: {err}");
        let run: ste::model::Run = serde_json::from_slice(&std::fs::read(&json).unwrap())
            .unwrap_or_else(|e| panic!("{case}: bad JSON: {e}\n{err}"));
        assert_eq!(run.tracker, tracker, "{case}: {err}");
        // sh, true, env and the true it execs: three processes, four execs.
        assert_eq!(
            (run.totals.processes, run.totals.execs),
            (3, 4),
            "{case}: {err}"
        );
        if args.contains(&"--syscalls") {
            assert!(
                run.syscalls.as_ref().is_some_and(|s| !s.calls.is_empty()),
                "{case}: {err}"
            );
        }
        if !env.is_empty() {
            assert!(
                run.notes
                    .iter()
                    .any(|n| n.contains("the command ran as nobody")),
                "{case}: {:?}",
                run.notes
            );
        }
    }
}
