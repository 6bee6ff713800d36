//! The host's side of the matrix: the fixtures built, the initramfs written, each kernel booted
//! under QEMU (software emulation: this kind of machine's /dev/kvm cannot run a stock kernel),
//! one boot a kernel running every case; this machine's own kernel run directly; every run
//! judged against its case and each kernel's known limits, and the whole printed as tables.
//!
//! Owns the machines and the verdict; the cases are `cases`', the runs `guest`'s, the limits
//! `expect`'s, the kernels `fetch`'s.

use crate::cases::{self, Check, Observed, Tracker, Who};
use crate::expect;
use crate::fetch::{self, KERNELS};
use crate::guest::{self, Only, Paths};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

#[path = "../common/release.rs"]
mod common;

/// How long one kernel's boot and all its runs may take: ~100 s on a quiet machine; a guest
/// that stopped making progress (a soft lockup seen under a load average of ~45) must not
/// take CI's whole budget.
const BOOT_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// QEMU's accelerator: `STE_KERNEL_ACCEL`, else TCG on one host thread for both virtual CPUs.
/// With a host thread per virtual CPU (`tcg,thread=multi`), the 5.10 guest hung in about one
/// boot in five (4 of 18), both CPUs spinning at static-key sites the kernel had just patched
/// (BPF programs attached to tracepoints switch their keys): TCG running code one CPU had
/// rewritten under the other, not the kernel, as no boot on one thread hung (0 of 14) and the
/// same guest runs no slower so (bench/README.md, 2026-11-29).
fn accel() -> String {
    std::env::var("STE_KERNEL_ACCEL").unwrap_or_else(|_| "tcg,thread=single".into())
}

/// How long a guest may take: `BOOT_TIMEOUT`, or `STE_KERNEL_TIMEOUT` seconds (a debugging
/// session's loop of short runs).
fn boot_timeout() -> Duration {
    std::env::var("STE_KERNEL_TIMEOUT")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(BOOT_TIMEOUT, Duration::from_secs)
}

struct Options {
    /// Kernel names (`5.10`, `6.1`, `6.12`, `host`); all when empty.
    kernels: Vec<String>,
    readme: bool,
    /// Where to write every run's observation (a JSON line each, with its kernel).
    observations: Option<PathBuf>,
}

impl Options {
    fn parse(args: &[String]) -> Result<Options, String> {
        let mut o = Options {
            kernels: std::env::var("STE_KERNELS")
                .map(|v| v.split(',').map(str::to_string).collect())
                .unwrap_or_default(),
            readme: false,
            observations: None,
        };
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--kernels" => {
                    o.kernels = it
                        .next()
                        .ok_or("--kernels needs a list: 5.10,6.1,6.12,host")?
                        .split(',')
                        .map(str::to_string)
                        .collect()
                }
                "--readme" => o.readme = true,
                "--observations" => {
                    o.observations = Some(it.next().ok_or("--observations needs a file")?.into())
                }
                // What cargo's test runner passes to every test binary.
                "--nocapture" | "--quiet" | "-q" => {}
                other => {
                    return Err(format!(
                        "unknown option {other}: --kernels LIST, --readme, --observations FILE"
                    ));
                }
            }
        }
        Ok(o)
    }

    fn wants(&self, kernel: &str) -> bool {
        self.kernels.is_empty() || self.kernels.iter().any(|k| k == kernel)
    }
}

/// One kernel's results.
struct KernelRun {
    /// The matrix's name for it (`5.10`, or `host`).
    name: String,
    release: String,
    /// Where it came from, and how it went (a cached kernel, a boot that ended early).
    about: Vec<String>,
    observed: Vec<Observed>,
    secs: f64,
}

pub fn main(args: Vec<String>) -> ExitCode {
    let opts = match Options::parse(&args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("kernel matrix: {e}");
            return ExitCode::FAILURE;
        }
    };
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        println!(
            "kernel matrix: skipped: it runs ste as root and as nobody, and boots kernels: run it as root (CI does)"
        );
        return ExitCode::SUCCESS;
    }
    match run(&opts) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("kernel matrix: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(opts: &Options) -> Result<bool, String> {
    let started = Instant::now();
    // Another build of ste (a debug build, while working on a kernel's failure): said in the
    // table's heading.
    let ste = match std::env::var_os("STE_KERNEL_STE") {
        Some(p) => PathBuf::from(p),
        None => common::fresh_release_binary()
            .map_err(|e| format!("{e}: `cargo build --release --bin ste` first (.ci/run does)"))?,
    };
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kernels");
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    let (fix, fixd) = fixtures(&work)?;
    let only = Only::from_env();
    let mut runs = Vec::new();
    let mut skipped = Vec::new();
    let qemu = which("qemu-system-x86_64");
    let mut initramfs = None;
    for k in KERNELS.iter().filter(|k| opts.wants(k.name)) {
        if qemu.is_none() {
            skipped.push(format!(
                "{}: skipped: qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)",
                k.name
            ));
            continue;
        }
        let fetched = match fetch::fetch(k, &fetch::cache_dir()) {
            Ok(f) => f,
            Err(why) => {
                skipped.push(format!(
                    "{}: skipped: the kernel could not be fetched, and none is cached: {why}",
                    k.name
                ));
                continue;
            }
        };
        let cpio = match &initramfs {
            Some(p) => p,
            None => initramfs.insert(write_initramfs(&work, &ste, &fix, &fixd)?),
        };
        eprintln!(
            "{}: booting {} ({})",
            k.name, fetched.package, k.distribution
        );
        let mut r = boot(k.name, &fetched.image, cpio, &only, &work)?;
        r.about
            .insert(0, format!("{}, {}", fetched.package, k.distribution));
        r.about.extend(fetched.note);
        runs.push(r);
    }
    if opts.wants("host") {
        runs.push(on_this_machine(&work, &ste, &fix, &fixd, &only)?);
    }
    if std::env::var_os("STE_KERNEL_STE").is_some() {
        skipped.push(format!("ste: {} (STE_KERNEL_STE)", ste.display()));
    }
    if let Some(path) = &opts.observations {
        let lines: String = runs
            .iter()
            .flat_map(|k| {
                k.observed.iter().map(|o| {
                    let o = serde_json::to_value(o).unwrap_or_default();
                    format!(
                        "{}\n",
                        serde_json::json!({"kernel": k.name, "release": k.release, "observed": o})
                    )
                })
            })
            .collect();
        std::fs::write(path, lines).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let ok = report(&runs, &skipped, opts.readme, started.elapsed());
    Ok(ok)
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

fn run_tool(cmd: &mut Command) -> Result<(), String> {
    let shown = format!("{cmd:?}");
    let out = cmd.output().map_err(|e| format!("{shown}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{shown}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

/// The fixture, built static and dynamic from `c/fix.c`.
fn fixtures(work: &Path) -> Result<(PathBuf, PathBuf), String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kernels/c/fix.c");
    let (fix, fixd) = (work.join("fix"), work.join("fixd"));
    for (out, flags) in [(&fix, &["-static"][..]), (&fixd, &[][..])] {
        run_tool(
            Command::new("gcc")
                .args(["-O2", "-Wall", "-Werror", "-pthread"])
                .args(flags)
                .arg("-o")
                .arg(out)
                .arg(&src),
        )?;
    }
    Ok((fix, fixd))
}

/// The shared objects `program` loads, as `ldd` names them (its loader among them).
fn libraries(program: &Path) -> Result<Vec<PathBuf>, String> {
    let out = Command::new("ldd")
        .arg(program)
        .output()
        .map_err(|e| format!("ldd: {e}"))?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let path = match l.split_once("=>") {
                Some((_, right)) => right.split_whitespace().next(),
                None => l.split_whitespace().next(),
            }?;
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect())
}

/// The initramfs every kernel boots: this binary as `/init`, ste's release binary, the
/// fixtures, the dynamic fixture's libraries, busybox (a shell for whoever debugs a boot), and
/// the users.
fn write_initramfs(work: &Path, ste: &Path, fix: &Path, fixd: &Path) -> Result<PathBuf, String> {
    let me = std::env::current_exe().map_err(|e| format!("this binary: {e}"))?;
    // Without its debug information: a quarter of the size to load into every guest.
    let init = work.join("init");
    if run_tool(
        Command::new("objcopy")
            .arg("--strip-debug")
            .arg(&me)
            .arg(&init),
    )
    .is_err()
    {
        std::fs::copy(&me, &init).map_err(|e| format!("{}: {e}", me.display()))?;
    }
    let mut a = crate::cpio::Archive::default();
    for d in [
        "bin", "dev", "etc", "lib", "lib64", "proc", "sys", "tmp", "run", "root", "usr",
    ] {
        a.dir(d, 0o755);
    }
    a.char_device("dev/console", 0o600, 5, 1);
    a.copy("init", 0o755, &init)?;
    a.copy("bin/ste", 0o755, ste)?;
    a.copy("bin/fix", 0o755, fix)?;
    a.copy("bin/fixd", 0o755, fixd)?;
    let mut dirs = vec![];
    for lib in libraries(fixd)? {
        let name = lib.display().to_string();
        let parent = lib
            .parent()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        if !["/lib", "/lib64", "/"].contains(&parent.as_str()) && !dirs.contains(&parent) {
            a.dir(&parent, 0o755);
            dirs.push(parent);
        }
        a.copy(&name, 0o755, &std::fs::canonicalize(&lib).unwrap_or(lib))?;
    }
    if let Some(busybox) = ["/bin/busybox", "/usr/bin/busybox"]
        .iter()
        .map(Path::new)
        .find(|p| p.exists())
    {
        a.copy("bin/busybox", 0o755, busybox)?;
        for applet in ["sh", "ls", "cat", "ps", "mount", "dmesg", "true"] {
            a.symlink(&format!("bin/{applet}"), "busybox");
        }
    }
    a.file(
        "etc/passwd",
        0o644,
        b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n",
    );
    a.file("etc/group", 0o644, b"root:x:0:\nnogroup:x:65534:\n");
    let path = work.join("initramfs.cpio");
    std::fs::write(&path, a.finish()).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

/// Boots `image` with the initramfs and collects what its `/init` reports.
/// The guest's whole console is kept in `WORK/NAME.console` (the report shows its last lines).
fn boot(
    name: &str,
    image: &Path,
    initramfs: &Path,
    only: &Only,
    work: &Path,
) -> Result<KernelRun, String> {
    let started = Instant::now();
    let mut append = "console=ttyS0 panic=-1 loglevel=3 mitigations=off".to_string();
    // More of the kernel's own words for a debugging session (`STE_KERNEL_APPEND=loglevel=7`:
    // a lockup's stack trace on the console).
    if let Ok(extra) = std::env::var("STE_KERNEL_APPEND") {
        append.push(' ');
        append.push_str(&extra);
    }
    if !only.cases.is_empty() {
        // The kernel hands `name=value` words it does not know to /init's environment.
        append.push_str(&format!(" STE_KERNEL_CASES={}", only.cases.join(",")));
    }
    let mut child = Command::new("qemu-system-x86_64")
        .args(["-nodefaults", "-no-user-config", "-display", "none"])
        .args(["-accel", &accel(), "-cpu", "max", "-smp", "2", "-m", "2G"])
        .args(["-serial", "stdio", "-no-reboot", "-kernel"])
        .arg(image)
        .arg("-initrd")
        .arg(initramfs)
        .args(["-append", &append])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("qemu-system-x86_64: {e}"))?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).split(b'\n') {
            let Ok(line) = line else { break };
            let line = String::from_utf8_lossy(&line)
                .trim_end_matches('\r')
                .to_string();
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut r = KernelRun {
        name: name.to_string(),
        release: String::new(),
        about: Vec::new(),
        observed: Vec::new(),
        secs: 0.0,
    };
    let mut console: Vec<String> = Vec::new();
    let mut ended = false;
    loop {
        let left = boot_timeout().saturating_sub(started.elapsed());
        let line = match rx.recv_timeout(left) {
            Ok(l) => l,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                r.about
                    .push(format!("stopped after {} s", boot_timeout().as_secs()));
                break;
            }
            Err(_) => break,
        };
        if let Some(release) = line.strip_prefix(guest::KERNEL) {
            r.release = release.to_string();
            eprintln!(
                "{name}: {release} up after {:.1} s",
                started.elapsed().as_secs_f64()
            );
        } else if let Some(json) = line.find(guest::OBSERVED).map(|i| &line[i..]) {
            match serde_json::from_str::<Observed>(&json[guest::OBSERVED.len()..]) {
                Ok(o) => {
                    progress(name, &o);
                    r.observed.push(o);
                }
                Err(e) => r.about.push(format!("a garbled line of the console ({e})")),
            }
        } else if line.contains(guest::END) {
            ended = true;
        } else {
            console.push(line);
        }
    }
    let status = child.wait().map_err(|e| format!("qemu: {e}"))?;
    let kept = work.join(format!("{name}.console"));
    let mut whole = console.join("\n");
    whole.push('\n');
    let kept = match std::fs::write(&kept, whole) {
        Ok(()) => format!("all of it in {}", kept.display()),
        Err(e) => format!("not kept: {}: {e}", kept.display()),
    };
    if !ended {
        let tail = console.len().saturating_sub(30);
        r.about.push(format!(
            "the guest stopped before its end ({status}); its console's last lines ({kept}):\n    {}",
            console[tail..].join("\n    ")
        ));
    }
    r.secs = started.elapsed().as_secs_f64();
    Ok(r)
}

fn progress(kernel: &str, o: &Observed) {
    eprintln!(
        "{kernel}: {}/{} {}: exit {} in {:.1} s{}",
        o.tracker.name(),
        o.who.name(),
        o.case,
        o.status,
        o.ms as f64 / 1000.0,
        o.error
            .as_deref()
            .map(|e| format!(" ({e})"))
            .unwrap_or_default()
    );
}

/// The cases on this machine's own kernel, directly, from a directory `nobody` can read.
fn on_this_machine(
    work: &Path,
    ste: &Path,
    fix: &Path,
    fixd: &Path,
    only: &Only,
) -> Result<KernelRun, String> {
    let started = Instant::now();
    let dir = std::env::temp_dir().join(format!("ste-kernels-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let bins = dir.join("bin");
    std::fs::create_dir_all(&bins).map_err(|e| format!("{}: {e}", bins.display()))?;
    let install = |from: &Path, name: &str| -> Result<PathBuf, String> {
        let to = bins.join(name);
        run_tool(Command::new("install").arg("-m755").arg(from).arg(&to))?;
        Ok(to)
    };
    let paths = Paths {
        ste: install(ste, "ste")?,
        fix: install(fix, "fix")?,
        fixd: install(fixd, "fixd")?,
        scratch: dir.join("runs"),
    };
    use std::os::unix::fs::PermissionsExt;
    for d in [&dir, &bins] {
        let _ = std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755));
    }
    let release = guest::release();
    eprintln!("host: {release}, directly");
    let mut observed = Vec::new();
    guest::run_rows(&paths, only, &mut |o| {
        progress("host", &o);
        observed.push(o);
    });
    let _ = std::fs::remove_dir_all(&dir);
    let _ = work;
    Ok(KernelRun {
        name: "host".into(),
        release,
        about: vec!["this machine's kernel, run directly".into()],
        observed,
        secs: started.elapsed().as_secs_f64(),
    })
}

/// A check's verdict against the kernel's known limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Pass,
    /// Failed, as the kernel is known to.
    Known(&'static str),
    Fail,
    /// Passed where the kernel is listed as failing it for sure: the list is out of date.
    Stale(&'static str),
}

struct Judged<'a> {
    kernel: &'a KernelRun,
    o: &'a Observed,
    checks: Vec<(Check, Verdict)>,
}

fn judge(k: &KernelRun) -> Vec<Judged<'_>> {
    let mut out = Vec::new();
    for o in &k.observed {
        let Some(case) = cases::cases(o.tracker, o.who)
            .into_iter()
            .find(|c| c.name == o.case)
        else {
            continue;
        };
        let checks = cases::checks(&case, o)
            .into_iter()
            .map(|c| {
                let limit = expect::limit(&k.release, o.tracker, o.who, &o.case, &c.name);
                let v = match (c.ok, limit) {
                    (true, Some(l)) if !l.may_pass => Verdict::Stale(l.why),
                    (true, _) => Verdict::Pass,
                    (false, Some(l)) => Verdict::Known(l.why),
                    (false, None) => Verdict::Fail,
                };
                (c, v)
            })
            .collect();
        out.push(Judged {
            kernel: k,
            o,
            checks,
        });
    }
    out
}

/// The cases' columns, in order.
const COLUMNS: [&str; 8] = [
    "refused", "true", "loop", "threads", "fill", "signal", "malloc", "getppid",
];

/// A case's cell: its headline figure, and each check that failed (`✗` unexpected, `~` a
/// known limit, `!` a limit that did not show).
fn cell(j: &Judged) -> String {
    let r = j.o.run.as_ref();
    let mut s = match (j.o.case.as_str(), r) {
        ("loop", Some(r)) => format!("{}/{}", r.execs, r.processes),
        ("threads", Some(r)) => format!("{} thr", r.threads),
        ("fill", Some(r)) => match &r.max_pss {
            Some(f) => format!("{:.1} MiB {}", f.bytes as f64 / 1048576.0, f.kind),
            None => "n/a".into(),
        },
        ("getppid", Some(r)) => r.getppid.map_or("-".into(), |n| n.to_string()),
        ("malloc", Some(r)) => r.mallocs.map_or("-".into(), |(m, _)| m.to_string()),
        _ => format!("exit {}", j.o.status),
    };
    for (c, v) in &j.checks {
        let mark = match v {
            Verdict::Pass => continue,
            Verdict::Known(_) => '~',
            Verdict::Fail => '✗',
            Verdict::Stale(_) => '!',
        };
        s.push_str(&format!(" {mark}{}", c.name));
    }
    s
}

fn report(runs: &[KernelRun], skipped: &[String], readme: bool, took: Duration) -> bool {
    let judged: Vec<Vec<Judged>> = runs.iter().map(judge).collect();
    println!("\n## The kernel matrix\n");
    for k in runs {
        println!(
            "- {} ({}): {} runs in {:.0} s; {}",
            k.name,
            k.release,
            k.observed.len(),
            k.secs,
            k.about.join("; ")
        );
    }
    for s in skipped {
        println!("- {s}");
    }
    println!(
        "\n| kernel | tracker | who | {} |\n|---|---|---|{}",
        COLUMNS.join(" | "),
        "---|".repeat(COLUMNS.len())
    );
    for (k, js) in runs.iter().zip(&judged) {
        for (tracker, who) in cases::ROWS {
            let row: Vec<&Judged> = js
                .iter()
                .filter(|j| j.o.tracker == tracker && j.o.who == who)
                .collect();
            if row.is_empty() {
                continue;
            }
            let cells: Vec<String> = COLUMNS
                .iter()
                .map(|c| {
                    row.iter()
                        .find(|j| j.o.case == *c)
                        .map_or(String::new(), |j| cell(j))
                })
                .collect();
            println!(
                "| {} | {} | {} | {} |",
                k.name,
                tracker.name(),
                who.name(),
                cells.join(" | ")
            );
        }
    }
    let all: Vec<&Judged> = judged.iter().flatten().collect();
    let count = |f: &dyn Fn(&Verdict) -> bool| {
        all.iter()
            .flat_map(|j| &j.checks)
            .filter(|(_, v)| f(v))
            .count()
    };
    let failed = count(&|v| matches!(v, Verdict::Fail | Verdict::Stale(_)));
    // Every case a kernel ran must have run: a guest that stopped early fails.
    let missing: Vec<String> = runs
        .iter()
        .filter(|k| k.observed.is_empty() || k.about.iter().any(|a| a.contains("stopped")))
        .map(|k| format!("{}: {}", k.name, k.about.join("; ")))
        .collect();
    if failed > 0 || !missing.is_empty() {
        println!("\n### Failures\n");
        for m in &missing {
            println!("- {m}");
        }
        for j in &all {
            for (c, v) in &j.checks {
                let why = match v {
                    Verdict::Fail => String::new(),
                    Verdict::Stale(why) => format!(
                        " passed, though listed as a limit of this kernel (expect.rs: {why})"
                    ),
                    _ => continue,
                };
                println!(
                    "- {} {}/{} {}: {}{why}: {}",
                    j.kernel.name,
                    j.o.tracker.name(),
                    j.o.who.name(),
                    j.o.case,
                    c.name,
                    c.detail
                );
            }
        }
    }
    let mut known: Vec<(String, &str, &str, Vec<String>)> = Vec::new();
    for j in &all {
        for (c, v) in &j.checks {
            if let Verdict::Known(why) = v {
                let row = format!("{}/{} {}", j.o.tracker.name(), j.o.who.name(), j.o.case);
                match known
                    .iter_mut()
                    .find(|(k, check, w, _)| *k == j.kernel.name && *check == c.name && *w == *why)
                {
                    Some((_, _, _, rows)) => rows.push(row),
                    None => known.push((j.kernel.name.clone(), &c.name, why, vec![row])),
                }
            }
        }
    }
    if !known.is_empty() {
        println!("\n### Known limits (expect.rs)\n");
        for (k, check, why, rows) in &known {
            println!("- {k}: {check} ({}): {why}", rows.join(", "));
        }
    }
    if readme {
        print_readme(runs, &judged);
    }
    println!(
        "\nkernel matrix: {} runs on {} kernels in {:.0} s: {} checks passed, {} known limits, {} failed",
        all.len(),
        runs.len(),
        took.as_secs_f64(),
        count(&|v| *v == Verdict::Pass),
        count(&|v| matches!(v, Verdict::Known(_))),
        failed
    );
    failed == 0 && missing.is_empty()
}

/// The README's table: for each kernel, what each tracker does there: `✓` where every check
/// passed with the labels a current kernel gives, else the known limits' few words and what
/// the labels said instead.
fn print_readme(runs: &[KernelRun], judged: &[Vec<Judged>]) {
    println!("\n### For the README\n");
    println!(
        "| kernel | ebpf, `--syscalls` (root) | ptrace | netlink (root) | netlink (unprivileged) |"
    );
    println!("|---|---|---|---|---|");
    for (k, js) in runs.iter().zip(judged) {
        let cell = |tracker: Tracker, who: Option<Who>| -> String {
            let mut notes: Vec<String> = Vec::new();
            let mut note = |n: &str| {
                if !notes.iter().any(|x| x == n) {
                    notes.push(n.to_string());
                }
            };
            let row = js
                .iter()
                .filter(|j| j.o.tracker == tracker && who.is_none_or(|w| j.o.who == w));
            for j in row {
                for (c, v) in &j.checks {
                    match v {
                        Verdict::Known(why) => {
                            let short = expect::LIMITS
                                .iter()
                                .find(|l| l.why == *why)
                                .map_or(*why, |l| l.short);
                            note(short);
                        }
                        Verdict::Fail | Verdict::Stale(_) => note(&format!("fails: {}", c.name)),
                        Verdict::Pass => {}
                    }
                }
                if j.o
                    .run
                    .iter()
                    .any(|r| r.max_pss.as_ref().is_some_and(|m| m.kind == "at least"))
                {
                    note("Max PSS: a lower bound");
                }
                for (name, f) in j.o.run.iter().flat_map(|r| &r.memory) {
                    match (name.as_str(), f.kind.as_str()) {
                        ("largest_process_peak", "sampled") => {
                            note("a process's peak RSS: a lower bound")
                        }
                        ("largest_process_peak", _) if f.label.contains("taskstats") => {
                            note("peaks at exit from taskstats")
                        }
                        ("group_peak", "sampled") => note("group peak sampled"),
                        _ => {}
                    }
                }
            }
            if notes.is_empty() {
                "✓".into()
            } else {
                notes.join("; ")
            }
        };
        println!(
            "| {} ({}) | {} | {} | {} | {} |",
            k.name,
            k.release,
            cell(Tracker::Ebpf, Some(Who::Root)),
            cell(Tracker::Ptrace, None),
            cell(Tracker::Netlink, Some(Who::Root)),
            cell(Tracker::Netlink, Some(Who::Nobody)),
        );
    }
}
