//! Runs the real `ste` binary on fixture workloads, as root or unprivileged, under a chosen
//! tracker, and hands back its exit status, output and parsed JSON.
//!
//! Unprivileged runs ([`Who::Nobody`]) use `setpriv --reuid=65534` when the tests run as root
//! (CI does), and run as the user running the tests otherwise: a contributor without root
//! tests the unprivileged path too. Built by another user, the tests that need root are
//! ignored with the reason (`#[cfg_attr(not(ste_test_root), ignore = "needs root: …")]`, the
//! cfg set by build.rs) and the rest run. The binaries are copied into a world-readable
//! directory first, because the build tree may not be reachable for `nobody`.
//!
//! A test that needs a tool beyond Rust and gcc (Chromium, clang) asks [`tool`]: missing, the
//! test passes saying it was skipped, except in CI (`CI=true`), where it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use ste::model::Run;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    Root,
    /// Unprivileged: `nobody` when the tests run as root, else the user running them.
    Nobody,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tracker {
    Ebpf,
    Ptrace,
    Netlink,
}

impl Tracker {
    pub fn name(self) -> &'static str {
        match self {
            Tracker::Ebpf => "ebpf",
            Tracker::Ptrace => "ptrace",
            Tracker::Netlink => "netlink",
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Mode {
    pub tracker: Tracker,
    pub who: Who,
}

/// What ste says when BPF cannot load for `nobody`.
pub const NO_BPF: &str = "loading BPF programs needs CAP_BPF and CAP_PERFMON";

impl Mode {
    /// The tracker the run really uses: `nobody` cannot load BPF, so its "ebpf" runs test the
    /// default's fallback to ptrace (see [`ste_with`]).
    pub fn used(self) -> Tracker {
        match (self.tracker, self.who) {
            (Tracker::Ebpf, Who::Nobody) => Tracker::Ptrace,
            (t, _) => t,
        }
    }
}

pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A directory every user can read and write, holding a copy of `ste` (and of the examples,
/// see [`example`]).
pub struct Bins {
    pub dir: PathBuf,
    pub ste: PathBuf,
}

pub fn bins() -> &'static Bins {
    static BINS: OnceLock<Bins> = OnceLock::new();
    BINS.get_or_init(|| {
        remove_stale_dirs();
        let dir = std::env::temp_dir().join(format!("ste-it-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        set_mode(&dir, 0o1777);
        let ste = dir.join("ste");
        install(Path::new(env!("CARGO_BIN_EXE_ste")), &ste, 0o755);
        Bins { ste, dir }
    })
}

/// Removes the directories of earlier test processes that are gone (`ste-it-PID`).
fn remove_stale_dirs() {
    for e in std::fs::read_dir(std::env::temp_dir())
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("ste-it-"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// The example program `examples/NAME.rs`, copied into the shared directory (for `nobody`).
/// Each test area keeps its workloads in an example of its own.
pub fn example(name: &str) -> PathBuf {
    static COPIED: std::sync::Mutex<Vec<(String, PathBuf)>> = std::sync::Mutex::new(Vec::new());
    let mut copied = COPIED.lock().unwrap();
    if let Some((_, p)) = copied.iter().find(|(n, _)| n == name) {
        return p.clone();
    }
    let p = copy_example(&bins().dir, name);
    copied.push((name.to_string(), p.clone()));
    p
}

fn copy_example(dir: &Path, name: &str) -> PathBuf {
    let built = Path::new(env!("CARGO_BIN_EXE_ste"))
        .parent()
        .unwrap()
        .join("examples")
        .join(name);
    assert!(
        built.exists(),
        "{} is missing: run `cargo test` (it builds the examples)",
        built.display()
    );
    // `cargo test --test it` does not rebuild examples: refuse a stale one.
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(format!("{name}.rs"));
    let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).unwrap();
    assert!(
        mtime(&built) >= mtime(&source),
        "{} is older than its source: run `cargo build --examples` (plain `cargo test` does it)",
        built.display()
    );
    let to = dir.join(name);
    install(&built, &to, 0o755);
    to
}

/// Copies the program `from` to `to` with `mode`, in a child process (`install`): a copy
/// written by the test process holds the file open for writing in every child another test
/// forks meanwhile, until that child execs, and an exec of the copy then fails with "Text
/// file busy" (the likely cause of a start of a fresh copy that failed once in a full run).
pub fn install(from: &Path, to: &Path, mode: u32) {
    let status = Command::new("install")
        .arg(format!("-m{mode:o}"))
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "install {} {}",
        from.display(),
        to.display()
    );
}

pub fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A fresh path in the shared directory.
pub fn scratch(name: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    bins().dir.join(format!("{n}-{name}"))
}

/// A `Command` that runs `program` as `who`.
pub fn command_as(who: Who, program: &Path) -> Command {
    match who {
        Who::Root => {
            assert!(
                is_root(),
                "this test runs ste as root: run the tests as root (CI does)"
            );
            Command::new(program)
        }
        Who::Nobody if !is_root() => Command::new(program),
        Who::Nobody => {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
                .arg(program);
            c
        }
    }
}

/// Whether the tests run in CI (`CI=true`, as `.ci/run` and most CI services set it): there a
/// missing tool is a failure, not a skip.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// The tool a test needs beyond Rust and gcc, where `found` says it is: `None` when it is not
/// installed, after saying the test is skipped and how to install it; in CI, a failure.
pub fn tool(name: &str, found: Option<PathBuf>, install: &str) -> Option<PathBuf> {
    if found.is_some() {
        return found;
    }
    assert!(
        !in_ci(),
        "{name} is not installed, and CI must run every test: {install}"
    );
    eprintln!("skipped: {name} not installed ({install})");
    None
}

/// What one ste run produced.
pub struct Outcome {
    pub output: Output,
    pub run: Option<Run>,
}

impl Outcome {
    pub fn status(&self) -> i32 {
        self.output
            .status
            .code()
            .expect("ste was killed by a signal")
    }

    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    pub fn run(&self) -> &Run {
        self.run
            .as_ref()
            .unwrap_or_else(|| panic!("no JSON was written; stderr:\n{}", self.stderr()))
    }

    /// The `EXEC: [...]` lines of the report.
    pub fn exec_lines(&self) -> Vec<String> {
        self.stderr()
            .lines()
            .filter(|l| l.starts_with("EXEC: "))
            .map(str::to_string)
            .collect()
    }
}

/// `n` shells running `script` beside a test, killed (and reaped) when dropped.
pub struct Beside(Vec<std::process::Child>);

impl Beside {
    pub fn start(n: usize, script: &str) -> Beside {
        Beside(
            (0..n)
                .map(|_| {
                    Command::new("/bin/sh")
                        .args(["-c", script])
                        .spawn()
                        .expect("cannot start a shell beside the test")
                })
                .collect(),
        )
    }

    /// Their pids (tests/burst.rs has its command end them).
    #[allow(dead_code)] // not in every test binary that includes the harness
    pub fn pids(&self) -> Vec<u32> {
        self.0.iter().map(std::process::Child::id).collect()
    }
}

impl Drop for Beside {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Runs `ste --tracker T --json J [extra] -- command...` as `mode.who`.
/// Held by a test that floods the machine on purpose, and by each test whose claim needs the
/// machine's CPUs for ste alone: they never overlap. (A fork flood beside the burst of long
/// argv starved its reader into losing a record, counted as it should be, where the burst
/// claims that none is lost.)
pub fn machine_to_itself() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn ste(mode: Mode, extra: &[&str], command: &[&str]) -> Outcome {
    ste_with(mode, extra, command, |_| {})
}

/// The `--tracker` arguments for `mode`: none for ebpf as `nobody`, whose run checks that the
/// default falls back to ptrace and says why.
pub fn tracker_args(mode: Mode) -> Vec<&'static str> {
    match (mode.tracker, mode.who) {
        (Tracker::Ebpf, Who::Nobody) => vec![],
        (t, _) => vec!["--tracker", t.name()],
    }
}

/// `ste [sub...] [--tracker T] --json JSON [extra] -- command...` as `mode.who`, in the shared
/// directory, without colour and with stdin closed.
pub fn ste_command(
    mode: Mode,
    sub: &[&str],
    json: &Path,
    extra: &[&str],
    command: &[&str],
) -> Command {
    let mut c = command_as(mode.who, &bins().ste);
    c.current_dir(&bins().dir)
        .args(sub)
        .args(tracker_args(mode))
        .arg("--json")
        .arg(json)
        .args(extra)
        .arg("--")
        .args(command)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    c
}

/// As [`ste`], letting the caller adjust the `Command` (stdin, environment).
pub fn ste_with(
    mode: Mode,
    extra: &[&str],
    command: &[&str],
    adjust: impl FnOnce(&mut Command),
) -> Outcome {
    let json = scratch("run.json");
    let mut c = ste_command(mode, &[], &json, extra, command);
    adjust(&mut c);
    let output = c.output().expect("cannot run ste");
    let run = std::fs::read(&json)
        .ok()
        .filter(|b| !b.is_empty())
        .map(|b| {
            serde_json::from_slice::<Run>(&b).unwrap_or_else(|e| panic!("bad JSON from ste: {e}"))
        });
    let _ = std::fs::remove_file(&json);
    let o = Outcome { output, run };
    if let (Tracker::Ebpf, Some(run)) = (mode.tracker, &o.run) {
        // The ebpf runs first check what they test: BPF loaded as root; as nobody, the
        // fallback happened and the report says why.
        assert_eq!(run.tracker, mode.used().name(), "{}", o.stderr());
        if mode.who == Who::Nobody {
            assert!(
                run.notes
                    .iter()
                    .any(|n| n.contains(NO_BPF) && n.contains("ptrace")),
                "{:?}",
                run.notes
            );
        }
    }
    o
}

/// The core fixture's path (`examples/fixture.rs`) as a string, for command lines.
pub fn fixture() -> String {
    example("fixture").display().to_string()
}

/// Defines one test per tracker × privilege level, each calling `$body(Mode)`. The ebpf tracker
/// needs root: its `nobody` variant runs the default tracker choice and checks the fallback.
/// The root cases need root, so a build by another user marks them ignored, saying so
/// (`cfg(ste_test_root)`, set by build.rs); the unprivileged ones run as that user.
#[macro_export]
macro_rules! matrix {
    ($name:ident, $body:expr) => {
        mod $name {
            use super::*;
            #[test]
            #[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
            fn ebpf_root() {
                ($body)(Mode {
                    tracker: Tracker::Ebpf,
                    who: Who::Root,
                })
            }
            #[test]
            fn ebpf_nobody() {
                ($body)(Mode {
                    tracker: Tracker::Ebpf,
                    who: Who::Nobody,
                })
            }
            #[test]
            #[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
            fn ptrace_root() {
                ($body)(Mode {
                    tracker: Tracker::Ptrace,
                    who: Who::Root,
                })
            }
            #[test]
            fn ptrace_nobody() {
                ($body)(Mode {
                    tracker: Tracker::Ptrace,
                    who: Who::Nobody,
                })
            }
            #[test]
            #[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
            fn netlink_root() {
                ($body)(Mode {
                    tracker: Tracker::Netlink,
                    who: Who::Root,
                })
            }
            #[test]
            fn netlink_nobody() {
                ($body)(Mode {
                    tracker: Tracker::Netlink,
                    who: Who::Nobody,
                })
            }
        }
    };
}

/// The line under `Max PSS:` in a text report (how exact it is), or "" when there is none.
pub fn max_pss_exactness_line(text: &str) -> &str {
    text.lines()
        .skip_while(|l| !l.starts_with("Max PSS: "))
        .nth(1)
        .unwrap_or_default()
}
