//! The side of the matrix that runs ste: as the guest's first process (this very binary is the
//! initramfs's `/init`), it mounts what a distribution mounts, runs every case of every row,
//! sends each observation to the console as one line, and powers the machine off; on this
//! machine's own kernel the host calls [`run_rows`] directly.
//!
//! Owns the running of ste and what is read from its run; the cases and their checks are
//! `cases`', the machine and its kernel `host`'s.

use crate::cases::{self, Case, Observed, Summary, Tracker, Who};
use std::ffi::CString;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// What a line of the console carries: an observation, the kernel's release, the end.
pub const OBSERVED: &str = "STE-KERNELS-OBSERVED ";
pub const KERNEL: &str = "STE-KERNELS-KERNEL ";
pub const END: &str = "STE-KERNELS-END";

/// The unprivileged user the `nobody` rows run as.
const NOBODY: u32 = 65534;

/// How long one run may take under emulation before it is stopped (and fails).
const RUN_TIMEOUT: Duration = Duration::from_secs(300);

/// Where the programs are and where the runs write.
pub struct Paths {
    pub ste: PathBuf,
    /// The fixture, static and dynamic (`tests/kernels/c/fix.c`).
    pub fix: PathBuf,
    pub fixd: PathBuf,
    /// A directory `nobody` can write to, for the runs' output.
    pub scratch: PathBuf,
}

/// Which rows and cases to run: all, or those named (`STE_KERNEL_CASES=fill,true`).
#[derive(Debug, Clone, Default)]
pub struct Only {
    pub cases: Vec<String>,
}

impl Only {
    pub fn from_env() -> Only {
        let cases = std::env::var("STE_KERNEL_CASES")
            .map(|v| {
                v.split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        Only { cases }
    }

    pub fn wants(&self, case: &str) -> bool {
        self.cases.is_empty() || self.cases.iter().any(|c| c == case)
    }
}

/// The kernel's release (`uname -r`).
pub fn release() -> String {
    // SAFETY: uname fills the struct it is given.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::uname(&mut u) } != 0 {
        return "unknown".into();
    }
    // SAFETY: the kernel NUL-terminates the release.
    unsafe { std::ffi::CStr::from_ptr(u.release.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// As the guest's `/init`: mounts, runs, reports on the console, powers off.
pub fn pid1() -> ExitCode {
    for why in set_up() {
        println!("ste-kernels: {why}");
    }
    println!("{KERNEL}{}", release());
    let paths = Paths {
        ste: "/bin/ste".into(),
        fix: "/bin/fix".into(),
        fixd: "/bin/fixd".into(),
        scratch: "/tmp/runs".into(),
    };
    run_rows(
        &paths,
        &Only::from_env(),
        &mut |o| match serde_json::to_string(&o) {
            Ok(line) => println!("{OBSERVED}{line}"),
            Err(e) => println!("ste-kernels: {e}"),
        },
    );
    println!("{END}");
    // SAFETY: sync and reboot take no pointers; this process is the machine's last.
    unsafe {
        libc::sync();
        libc::reboot(libc::RB_POWER_OFF);
    }
    ExitCode::SUCCESS
}

fn mount(source: &str, target: &str, fstype: &str, data: &str) -> Result<(), String> {
    let _ = std::fs::create_dir_all(target);
    let c = |s: &str| CString::new(s).unwrap_or_default();
    let (s, t, f, d) = (c(source), c(target), c(fstype), c(data));
    // SAFETY: NUL-terminated strings that outlive the call.
    let r = unsafe { libc::mount(s.as_ptr(), t.as_ptr(), f.as_ptr(), 0, d.as_ptr().cast()) };
    if r != 0 {
        return Err(format!(
            "mount {fstype} on {target}: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// What a Debian system has mounted by the time a user runs ste: /proc, /sys, /dev, /tmp,
/// /run, /dev/shm and the cgroup v2 hierarchy with its controllers enabled for groups below
/// the root (systemd's default since Debian 11). Returns what failed.
fn set_up() -> Vec<String> {
    let mounts = [
        ("proc", "/proc", "proc", ""),
        ("sysfs", "/sys", "sysfs", ""),
        ("devtmpfs", "/dev", "devtmpfs", ""),
        ("tmpfs", "/tmp", "tmpfs", "mode=1777"),
        ("tmpfs", "/run", "tmpfs", "mode=755"),
        ("tmpfs", "/dev/shm", "tmpfs", "mode=1777"),
        ("cgroup2", "/sys/fs/cgroup", "cgroup2", ""),
    ];
    let mut failed: Vec<String> = mounts
        .iter()
        .filter_map(|(s, t, f, d)| mount(s, t, f, d).err())
        .collect();
    let available =
        std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers").unwrap_or_default();
    for c in available.split_whitespace() {
        if let Err(e) = std::fs::write("/sys/fs/cgroup/cgroup.subtree_control", format!("+{c}")) {
            failed.push(format!("enabling the cgroup controller {c}: {e}"));
        }
    }
    // SAFETY: setting the environment before any thread exists.
    unsafe { std::env::set_var("PATH", "/bin") };
    failed
}

/// Runs every case of every row, in order, handing each observation to `emit`.
pub fn run_rows(paths: &Paths, only: &Only, emit: &mut dyn FnMut(Observed)) {
    let _ = std::fs::create_dir_all(&paths.scratch);
    set_mode(&paths.scratch, 0o1777);
    let mut n = 0;
    for (tracker, who) in cases::ROWS {
        for case in cases::cases(tracker, who) {
            if !only.wants(case.name) {
                continue;
            }
            n += 1;
            emit(run_case(paths, tracker, who, &case, n));
        }
    }
}

fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode));
}

/// Runs one case and reads what it left.
fn run_case(paths: &Paths, tracker: Tracker, who: Who, case: &Case, n: u32) -> Observed {
    let json = paths.scratch.join(format!("{n}.json"));
    let err = paths.scratch.join(format!("{n}.err"));
    let out = paths.scratch.join(format!("{n}.out"));
    for f in [&json, &err, &out] {
        let _ = std::fs::remove_file(f);
    }
    let args: Vec<String> = case
        .args
        .iter()
        .map(|a| match a.as_str() {
            "FIX" => paths.fix.display().to_string(),
            "FIXD" => paths.fixd.display().to_string(),
            a => a.to_string(),
        })
        .collect();
    let file = |p: &Path| std::fs::File::create(p).map(Stdio::from);
    let mut cmd = Command::new(&paths.ste);
    cmd.arg("--json")
        .arg(&json)
        .args(&args)
        .current_dir(&paths.scratch)
        .env("HOME", &paths.scratch)
        .stdin(Stdio::null())
        .process_group(0);
    let observed = |status, ms, error: Option<String>| Observed {
        case: case.name.to_string(),
        tracker,
        who,
        status,
        ms,
        error,
        json_left: false,
        stdout: None,
        run: None,
    };
    match (file(&out), file(&err)) {
        (Ok(o), Ok(e)) => {
            cmd.stdout(o).stderr(e);
        }
        _ => return observed(-1, 0, Some("cannot create the output files".into())),
    }
    if who == Who::Nobody {
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(NOBODY) != 0
                    || libc::setuid(NOBODY) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let started = Instant::now();
    let status = match cmd.spawn() {
        Ok(mut child) => loop {
            match child.try_wait() {
                Ok(Some(s)) => break s.code().unwrap_or(-1),
                Ok(None) if started.elapsed() > RUN_TIMEOUT => {
                    // SAFETY: killing the process group this run made.
                    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
                    let _ = child.wait();
                    reap();
                    return observed(
                        -1,
                        started.elapsed().as_millis() as u64,
                        Some(format!("stopped after {} s", RUN_TIMEOUT.as_secs())),
                    );
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => return observed(-1, 0, Some(format!("waiting for ste: {e}"))),
            }
        },
        Err(e) => return observed(-1, 0, Some(format!("cannot run ste: {e}"))),
    };
    let ms = started.elapsed().as_millis() as u64;
    reap();
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    let mut stdout = Vec::new();
    let _ = std::fs::File::open(&out).and_then(|mut f| f.read_to_end(&mut stdout));
    let mut error = stderr
        .lines()
        .find(|l| l.starts_with("ste: "))
        .map(str::to_string);
    let json_left = json.exists();
    let run = std::fs::read_to_string(&json)
        .ok()
        .filter(|s| !s.is_empty())
        .map(|s| serde_json::from_str::<ste::model::Run>(&s));
    let run = match run {
        Some(Ok(r)) => Some(Summary::of(&r)),
        Some(Err(e)) => {
            error.get_or_insert(format!("the --json file does not parse: {e}"));
            None
        }
        None => None,
    };
    Observed {
        json_left,
        run,
        stdout: (!stdout.is_empty())
            .then(|| String::from_utf8_lossy(&stdout[..stdout.len().min(200)]).into_owned()),
        ..observed(status, ms, error)
    }
}

/// Reaps the orphans the guest's first process inherits.
fn reap() {
    loop {
        let mut status = 0;
        // SAFETY: a non-blocking wait for any child.
        if unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) } <= 0 {
            return;
        }
    }
}
