//! Hostile input through the real binary (issue 19): a program named with terminal escapes
//! under every tracker, a record whose notes and kinds carry escapes, and the crafted records
//! and Runs that made `ste report` crash, hang or exhaust memory, each refused with exit 125 and
//! one line naming its limit, in bounded time and memory.

use crate::harness::*;
use crate::matrix;
use flate2::Compression;
use flate2::write::GzEncoder;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use ste::report::terminal::is_safe;

/// What an escape-laden name must look like in a report: escaped, as EXEC lines do.
const HOSTILE: &str = "\x1b[31mred\x1b]0;title\x07";
const SHOWN: &str = r"\x1b[31mred\x1b]0;title\x07";

/// A copy of /bin/sleep named [`HOSTILE`], in a directory every user can reach (sleep, not
/// true: netlink reads argv from /proc, so the program must outlive its exec event).
fn hostile_sleep() -> PathBuf {
    let dir = scratch("hostile");
    std::fs::create_dir(&dir).unwrap();
    set_mode(&dir, 0o755);
    let bin = dir.join(HOSTILE);
    install(Path::new("/bin/sleep"), &bin, 0o755);
    bin
}

fn assert_safe(what: &str, bytes: &[u8]) {
    assert!(
        is_safe(bytes, false),
        "{what} carries a raw control character:\n{}",
        String::from_utf8_lossy(bytes)
    );
}

matrix!(escape_laden_program_name, |mode: Mode| {
    let bin = hostile_sleep();
    let o = ste(
        mode,
        &["--tree", "--top", "3", "--by-program"],
        &[bin.to_str().unwrap(), "0.1"],
    );
    assert_eq!(o.status(), 0, "{}", o.stderr());
    assert!(o.output.stdout.is_empty(), "{}", o.stdout());
    assert_safe("stderr", &o.output.stderr);
    let err = o.stderr();
    let exec = o.exec_lines();
    assert!(exec.iter().any(|l| l.contains(SHOWN)), "{exec:?}");
    let peak = err.lines().find(|l| l.starts_with("Memory: ")).unwrap();
    if o.run().totals.peak_rss_bytes.is_some() {
        assert!(peak.contains(SHOWN), "{peak}");
    }
    // The EXEC line and the memory line (the largest process peak).
    assert!(err.matches(SHOWN).count() >= 2, "{err}");
    // The by-program table names it escaped too (cut to its column).
    assert!(err.contains(&format!("\n  {}…", &SHOWN[..13])), "{err}");
});

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn corpus(kind: &str, name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz/corpus")
        .join(kind)
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A record file made of a corpus entry's JSON lines.
fn record_file(entry: &str) -> PathBuf {
    let path = scratch("crafted.ste");
    std::fs::write(&path, gzip(&corpus("record", entry))).unwrap();
    path
}

/// `ste report ARGS…`: its exit status, stdout, stderr, and its peak RSS in bytes (wait4),
/// killed and failed after `limit`.
// The child is reaped by wait4, which gives its peak RSS, or killed and waited for.
#[allow(clippy::zombie_processes)]
/// The address space `ste report` runs in: a reader that tried to hold what a crafted file
/// announces (a 1 GiB line, a 34 GB allocation) fails under it. The child's own figure, not
/// its `ru_maxrss`: a child spawned by this (large, many-threaded) test process inherits the
/// test process's high-water mark at its exec.
const AS_LIMIT: u64 = 512 << 20;

fn unique() -> usize {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

fn report(args: &[&std::ffi::OsStr], limit: Duration) -> (i32, Vec<u8>, Vec<u8>) {
    use std::os::unix::process::CommandExt;
    let out = scratch(&format!("report-{}.out", unique()));
    let err = scratch(&format!("report-{}.err", unique()));
    let mut cmd = Command::new(&bins().ste);
    // SAFETY: setrlimit is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: AS_LIMIT,
                rlim_max: AS_LIMIT,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    // Reaped below by waitpid (WNOHANG, to time it out), or by kill + wait.
    #[allow(clippy::zombie_processes)]
    let mut child = cmd
        .arg("report")
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let pid = child.id() as libc::pid_t;
    let status = loop {
        let mut status = 0;
        // SAFETY: waits for our own child; the pointer is to a live local.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("ste report {args:?} ran longer than {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(
        libc::WIFEXITED(status),
        "ste report {args:?}: status {status:#x}"
    );
    (
        libc::WEXITSTATUS(status),
        std::fs::read(out).unwrap(),
        std::fs::read(err).unwrap(),
    )
}

#[test]
fn a_record_with_escape_laden_notes_and_kinds() {
    let rec = record_file("escapes.jsonl");
    let (status, out, err) = report(&[rec.as_os_str()], Duration::from_secs(60));
    let text = String::from_utf8_lossy(&out);
    assert_eq!(status, 0, "{}", String::from_utf8_lossy(&err));
    assert_safe("stdout", &out);
    assert_safe("stderr", &err);
    assert!(text.contains(&format!("Note: note {SHOWN}")), "{text}");
    // The unknown kind is named in a warning, escaped.
    assert!(String::from_utf8_lossy(&err).contains(r"\x1b[31mred"));
    for format in ["csv-processes", "json"] {
        let (status, out, _) = report(
            &[rec.as_os_str(), "--format".as_ref(), format.as_ref()],
            Duration::from_secs(60),
        );
        assert_eq!(status, 0);
        assert_safe(format, &out);
    }
}

/// The issue's crafted inputs: each refused with 125 and one line naming its limit, nothing on
/// stdout, in bounded time.
#[test]
fn crafted_records_and_runs_are_refused_by_name() {
    let json_run = scratch("crafted.json");
    std::fs::write(&json_run, corpus("run", "crash-wall-ns-near-u64-max.json")).unwrap();
    for (file, says) in [
        (
            record_file("crash-width-u64-max.jsonl"),
            "text width of 18446744073709551615 columns",
        ),
        (
            record_file("crash-width-i32-max.jsonl"),
            "text width of 2147483647 columns",
        ),
        (
            record_file("crash-t-ns-near-u64-max.jsonl"),
            "after a century of run",
        ),
        (json_run, "after a century of run"),
    ] {
        let (status, out, err) = report(&[file.as_os_str()], Duration::from_secs(30));
        let err = String::from_utf8_lossy(&err);
        assert_eq!(status, 125, "{err}");
        assert!(out.is_empty());
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(says) && err.contains("limit is"), "{err}");
    }
}

/// A gzip whose first line is 1 GiB (1,024 members of 1 MiB of `a`, 1 MB in all) is refused
/// at the header's limit, without holding the line: within [`AS_LIMIT`] of address space.
#[test]
fn a_gibibyte_first_line_is_refused_without_reading_it_whole() {
    let member = gzip(&vec![b'a'; 1 << 20]);
    let path = scratch("bomb.ste");
    std::fs::write(&path, member.repeat(1024)).unwrap();
    let (status, _, err) = report(&[path.as_os_str()], Duration::from_secs(30));
    let err = String::from_utf8_lossy(&err);
    assert_eq!(status, 125, "{err}");
    assert!(err.contains("line 1 is longer than"), "{err}");
}

/// Issue 44, item 4: the issue's records that expand, full size, through the real binary
/// within [`AS_LIMIT`] of address space (it aborted: "memory allocation of 1 bytes failed"):
/// one exec of 16 M one-letter arguments (64 MB of JSON in 65 KB), three of them, and 300,000
/// forks (5 MB), which took 1.75 GB, 5.25 GB and 1.4 GB. The first two are refused by the
/// limit on what a line holds, in one line; of 120,000 forks (with the first process, beyond the
/// 100,000 processes a page draws) the page draws a part and says so, or ste says in one line
/// that memory ran out. Never an abort.
#[test]
fn records_that_expand_are_refused_or_drawn_in_part() {
    let plain = String::from_utf8(corpus("record", "plain.jsonl")).unwrap();
    let header = format!(
        "{}\n{{\"t_ns\":0,\"kind\":\"start\",\"command\":[\"x\"],\"tracker\":\"ebpf\",\"pid\":100,\"ppid\":1}}\n",
        plain.lines().next().unwrap()
    );
    let exec = gzip(
        format!(
            "{{\"t_ns\":10,\"kind\":\"exec\",\"tgid\":100,\"former_tid\":100,\"argv\":[{}]}}\n",
            vec!["\"a\""; (16 << 20) - 100].join(",")
        )
        .as_bytes(),
    );
    for copies in [1, 3] {
        let path = scratch("argv-16m.ste");
        // gzip members one after the other: one stream to the reader.
        std::fs::write(
            &path,
            [gzip(header.as_bytes()), exec.repeat(copies)].concat(),
        )
        .unwrap();
        assert!(
            std::fs::metadata(&path).unwrap().len() < 4 << 20,
            "a small file"
        );
        let (status, out, err) = report(&[path.as_os_str()], Duration::from_secs(120));
        let err = String::from_utf8_lossy(&err);
        assert_eq!(status, 125, "{err}");
        assert!(out.is_empty());
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("line 3 holds more than 1048576 JSON values") && err.contains("limit is"),
            "{err}"
        );
    }
    let mut forks = header.clone();
    for i in 0..120_000 {
        let c = 1000 + i;
        forks += &format!(
            "{{\"t_ns\":{},\"kind\":\"fork\",\"parent_tgid\":100,\"child_tid\":{c},\"child_tgid\":{c}}}\n{{\"t_ns\":{},\"kind\":\"exit\",\"tid\":{c},\"tgid\":{c},\"status\":{{\"exited\":0}}}}\n",
            100 + i,
            200 + i
        );
    }
    let path = scratch("forks-120k.ste");
    std::fs::write(&path, gzip(forks.as_bytes())).unwrap();
    let html = scratch("forks-120k.html");
    let (status, _, err) = report(
        &[
            path.as_os_str(),
            "-f".as_ref(),
            "html".as_ref(),
            "-o".as_ref(),
            html.as_os_str(),
        ],
        Duration::from_secs(300),
    );
    let err = String::from_utf8_lossy(&err);
    let said = err
        .lines()
        .filter(|l| !l.contains("the record stops at"))
        .collect::<Vec<_>>();
    match status {
        0 => {
            let view = page_view(&std::fs::read_to_string(&html).unwrap());
            assert!(
                view.contains(&format!(
                    "{} 100000 of the run's 120001 processes",
                    ste::report::DRAWN_NOTE
                )),
                "the page does not say it draws a part"
            );
        }
        125 => assert!(
            said.len() == 1 && said[0].starts_with("ste: out of memory: an allocation of"),
            "{err}"
        ),
        other => panic!("status {other}: {err}"),
    }
}

/// The view an HTML page embeds (compressed: gzip in base64), as JSON text.
fn page_view(page: &str) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let data = page
        .split_once("data-encoding=\"gzip-base64\">")
        .and_then(|(_, rest)| rest.split_once("</script>"))
        .expect("a page of compressed data")
        .0;
    let mut gz = Vec::with_capacity(data.len() / 4 * 3);
    let (mut n, mut bits) = (0u32, 0);
    for c in data.bytes().filter(|&c| c != b'=') {
        n = n << 6 | ABC.iter().position(|&a| a == c).expect("base64") as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            gz.push((n >> bits) as u8);
        }
    }
    let mut json = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&gz[..]), &mut json).unwrap();
    json
}

/// `ste report FILE` / `ste diff A B` as root, with the environment sudo leaves when `user`
/// invoked it (none: plain root).
fn as_sudo(args: &[&std::ffi::OsStr], user: Option<&str>) -> std::process::Output {
    let mut c = Command::new(&bins().ste);
    c.args(args).env("NO_COLOR", "1").stdin(Stdio::null());
    if let Some(user) = user {
        c.env("SUDO_UID", "65534")
            .env("SUDO_GID", "65534")
            .env("SUDO_USER", user);
    }
    c.output().unwrap()
}

/// Issue 44, item 10: under sudo, `ste report` and `ste diff` open their inputs with the
/// invoking user's rights (root's 0600 file is refused as the user's shell would refuse it),
/// and no parse error quotes what the file holds (a 0600 root file's secret was printed).
#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: reads a file of root's")]
fn inputs_are_read_with_the_invoking_users_rights_and_never_quoted() {
    assert!(is_root(), "this test runs as root (CI does)");
    const SECRET: &str = "TOPSECRET-7d1e";
    let secret_json = scratch("secret.json");
    std::fs::write(
        &secret_json,
        format!("{{\"schema_version\":\"{SECRET}\"}}\n"),
    )
    .unwrap();
    set_mode(&secret_json, 0o600);
    let header = format!(
        "{{\"format\":\"ste-record\",\"record_version\":1,\"generator\":\"{SECRET}\",\"run_schema_version\":1,\"events\":\"\",\"text_style\":\"{SECRET}\"}}\n"
    );
    let bad_header = scratch("secret-header.ste");
    std::fs::write(&bad_header, gzip(header.as_bytes())).unwrap();
    let line = format!(
        "{}\n{{\"t_ns\":1,\"kind\":\"exit\",\"tid\":\"{SECRET}\",\"tgid\":1,\"status\":{{\"exited\":0}}}}\n",
        String::from_utf8(corpus("record", "plain.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap()
    );
    let bad_line = scratch("secret-line.ste");
    std::fs::write(&bad_line, gzip(line.as_bytes())).unwrap();
    let version = header.replace("\"record_version\":1", "\"record_version\":99");
    let bad_version = scratch("secret-version.ste");
    std::fs::write(&bad_version, gzip(version.as_bytes())).unwrap();
    for (file, says) in [
        (&secret_json, "its JSON is not what ste writes, at line 1"),
        (&bad_header, "bad header: its JSON is not what ste writes"),
        (
            &bad_line,
            "line 2: its JSON is not what ste writes, at column",
        ),
        (
            &bad_version,
            "record of version 99, written by an unknown ste",
        ),
    ] {
        let o = as_sudo(&["report".as_ref(), file.as_os_str()], None);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(125), "{err}");
        assert!(err.contains(says), "{}: {err}", file.display());
        assert!(!err.contains(SECRET), "{}: {err}", file.display());
    }
    // Under sudo, root's 0600 file is not the user's to read.
    let o = as_sudo(
        &["report".as_ref(), secret_json.as_os_str()],
        Some("nobody"),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(125), "{err}");
    assert!(err.contains("Permission denied"), "{err}");
    let o = as_sudo(
        &[
            "diff".as_ref(),
            secret_json.as_os_str(),
            secret_json.as_os_str(),
        ],
        Some("nobody"),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(125), "{err}");
    assert!(
        err.contains("Permission denied") && !err.contains(SECRET),
        "{err}"
    );
    // A file the user may read is read.
    let record = record_file("plain.jsonl");
    set_mode(&record, 0o644);
    let o = as_sudo(&["report".as_ref(), record.as_os_str()], Some("nobody"));
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
