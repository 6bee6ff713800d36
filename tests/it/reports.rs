//! Reports (issue 5): `ste record` and `ste report` give back what the live run printed, a
//! killed ste leaves a readable record, records ste cannot read are refused clearly, the
//! Perfetto trace follows the trace-event format on 2,000 processes, CSV, and the HTML report
//! rendered by headless Chromium (with screenshots for review).

use crate::harness::*;
use crate::matrix;
use serde_json::Value;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// What `ste record` produced: the run's output, the record, and the live `--json` bytes.
struct Recorded {
    outcome: Outcome,
    record: PathBuf,
    json: Vec<u8>,
}

/// Runs `ste record -o RECORD --tracker T --json JSON [extra] -- command` as `mode.who`.
fn record(mode: Mode, extra: &[&str], command: &[&str]) -> Recorded {
    let rec = scratch("run.ste");
    let json = scratch("live.json");
    let rec_arg = rec.to_str().expect("a UTF-8 scratch path");
    let output = ste_command(mode, &["record", "-o", rec_arg], &json, extra, command)
        .output()
        .expect("cannot run ste record");
    let bytes = std::fs::read(&json).unwrap_or_default();
    let run = serde_json::from_slice(&bytes).ok();
    Recorded {
        outcome: Outcome { output, run },
        record: rec,
        json: bytes,
    }
}

/// `ste report FILE ARGS...`.
fn report(file: &Path, args: &[&str]) -> Output {
    Command::new(&bins().ste)
        .arg("report")
        .arg(file)
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("cannot run ste report")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

matrix!(
    the_report_of_a_record_is_what_the_live_run_printed,
    |mode: Mode| {
        let script = format!(
            "{f} threads 3 4 50; for i in 1 2 3 4 5 6 7 8; do /bin/true; done; {f} fill 16 100; exit 3",
            f = fixture()
        );
        let r = record(mode, &[], &["/bin/sh", "-c", &script]);
        let live = r.outcome.stderr();
        assert_eq!(r.outcome.status(), 3, "{live}");
        assert!(live.contains("Num process = 11\n"), "{live}");

        let out = report(&r.record, &[]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert_eq!(
            text(&out.stdout),
            live,
            "ste report must print what the live run printed"
        );
        assert!(out.stderr.is_empty(), "{}", text(&out.stderr));

        let out = report(&r.record, &["--format", "json"]);
        assert_eq!(out.status.code(), Some(0));
        assert!(!r.json.is_empty(), "no --json from the live run");
        assert!(
            out.stdout == r.json,
            "the replayed Run differs from the live one:\n{}",
            text(&out.stdout)
        );
    }
);

/// `ste report` takes the live run's text options and prints what the live run printed with
/// them, from a record and from a `--json` run; `-q` leaves out the EXEC lines only.
#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn the_report_takes_the_text_options_of_a_run() {
    let mode = Mode {
        tracker: Tracker::Ebpf,
        who: Who::Root,
    };
    let script = format!(
        "{f} forks 3; for i in 1 2 3 4; do /bin/true; done; {f} spin 20",
        f = fixture()
    );
    let command = ["/bin/sh", "-c", &script];
    for options in [&["--tree", "--top", "3"][..], &["-q", "--tree"], &["-v"]] {
        let r = record(mode, options, &command);
        let live = r.outcome.stderr();
        assert_eq!(r.outcome.status(), 0, "{live}");
        let replayed = text(&report(&r.record, options).stdout);
        assert_eq!(replayed, live, "ste report {options:?} of a record");
        let json = scratch("options.json");
        std::fs::write(&json, &r.json).unwrap();
        let replayed = text(&report(&json, options).stdout);
        assert_eq!(replayed, live, "ste report {options:?} of a --json run");
        if options.contains(&"--tree") {
            assert!(live.contains("Process tree (ledger):"), "{live}");
        }
        if options.contains(&"--top") {
            assert!(live.contains("Top 3 by CPU:"), "{live}");
        }
        if options.contains(&"-q") {
            assert!(!live.contains("EXEC: "), "{live}");
            assert!(
                live.starts_with("Num threads = 10\nNum process = 10\n"),
                "{live}"
            );
        } else {
            assert_eq!(r.outcome.exec_lines().len(), 7, "{live}");
        }
    }
}

/// The default report of a 40-file `make -j2` reads at a glance: at most 8 lines between the
/// chart and the end, the top programs on one of them.
#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn the_default_report_of_a_small_build_is_short() {
    let missing: Vec<&str> = ["make", "cc"]
        .into_iter()
        .filter(|t| {
            !Command::new("sh")
                .args(["-c", &format!("command -v {t}")])
                .status()
                .is_ok_and(|s| s.success())
        })
        .collect();
    if !missing.is_empty() {
        eprintln!("skipped: {missing:?} not installed (the test builds 40 C files)");
        return;
    }
    let dir = scratch("build");
    std::fs::create_dir_all(&dir).unwrap();
    let mut objs = Vec::new();
    for i in 0..40 {
        std::fs::write(
            dir.join(format!("f{i}.c")),
            format!("int f{i}(void) {{ return {i}; }}\n"),
        )
        .unwrap();
        objs.push(format!("f{i}.o"));
    }
    std::fs::write(dir.join("main.c"), "int main(void) { return 0; }\n").unwrap();
    std::fs::write(
        dir.join("Makefile"),
        format!(
            "prog: main.o {}\n\tcc -o $@ $^\n%.o: %.c\n\tcc -c -o $@ $<\n",
            objs.join(" ")
        ),
    )
    .unwrap();
    let mode = Mode {
        tracker: Tracker::Ebpf,
        who: Who::Root,
    };
    let o = ste(mode, &[], &["make", "-j2", "-C", dir.to_str().unwrap()]);
    assert_eq!(o.status(), 0, "{}", o.stderr());
    assert!(o.run().totals.processes > 80, "{}", o.stderr());
    let err = o.stderr();
    let lines: Vec<&str> = err.lines().collect();
    // The chart ends with its axis and the axis's labels.
    let axis = lines
        .iter()
        .rposition(|l| l.contains('└'))
        .expect("a chart");
    let after = &lines[axis + 2..];
    assert!(
        after.len() <= 8,
        "{} lines after the chart:\n{}",
        after.len(),
        after.join("\n")
    );
    assert!(after[0].starts_with("Exit status: 0"), "{err}");
    assert!(
        after.iter().any(|l| l.starts_with("By program (CPU")),
        "{err}"
    );
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn the_record_keeps_the_text_layout_and_report_can_change_it() {
    let mode = Mode {
        tracker: Tracker::Ptrace,
        who: Who::Root,
    };
    let r = record(mode, &["--color", "always"], &[&fixture(), "fill", "8"]);
    let live = r.outcome.stderr();
    assert!(live.contains("\x1b[1;32mEXEC:"), "{live}");
    let out = report(&r.record, &[]);
    assert_eq!(text(&out.stdout), live);

    let plain = text(&report(&r.record, &["--color", "never", "--width", "120"]).stdout);
    assert!(!plain.contains('\x1b'), "{plain}");
    let axis = plain.lines().find(|l| l.contains('└')).expect("a chart");
    let width = axis.chars().count();
    assert!(width > 80 && width <= 120, "the chart is {width} columns");
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn record_writes_the_text_report_to_report_file() {
    let mode = Mode {
        tracker: Tracker::Ptrace,
        who: Who::Root,
    };
    let file = scratch("report.txt");
    let r = record(
        mode,
        &["--report-file", file.to_str().unwrap()],
        &["/bin/sh", "-c", "/bin/true"],
    );
    assert_eq!(r.outcome.status(), 0);
    assert!(r.outcome.output.stderr.is_empty(), "{}", r.outcome.stderr());
    let written = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text(&report(&r.record, &[]).stdout), written);
}

fn kill(pid: i32, sig: i32) {
    // SAFETY: sending a signal to a process this test started (or its descendant).
    unsafe { libc::kill(pid, sig) };
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn a_killed_ste_leaves_a_readable_record() {
    assert!(is_root(), "this test runs as root (CI does)");
    let rec = scratch("killed.ste");
    let script = format!("/bin/true; exec {} sleep 20000", fixture());
    let mut child = Command::new(&bins().ste)
        .args(["record", "-o"])
        .arg(&rec)
        .args(["--", "/bin/sh", "-c", &script])
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the record holds the exec of the sleeping fixture: written and flushed.
    let deadline = Instant::now() + Duration::from_secs(20);
    let sleeper = loop {
        assert!(
            Instant::now() < deadline,
            "the record never showed the exec"
        );
        std::thread::sleep(Duration::from_millis(50));
        let Ok(loaded) = ste::ledger::record::load(&rec) else {
            continue;
        };
        let found = loaded.events.iter().find_map(|e| match &e.event {
            ste::bus::event::Event::Exec {
                tgid,
                argv: Some(argv),
                ..
            } if argv.iter().any(|a| a.as_bytes() == b"sleep") => Some(*tgid),
            _ => None,
        });
        if let Some(pid) = found {
            break pid;
        }
    };
    kill(child.id() as i32, libc::SIGKILL);
    child.wait().unwrap();
    kill(sleeper, libc::SIGKILL);

    let out = report(&rec, &[]);
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let execs: Vec<&str> = stdout.lines().filter(|l| l.starts_with("EXEC: ")).collect();
    assert_eq!(
        execs,
        [
            format!("EXEC: [/bin/sh -c '{script}']").as_str(),
            "EXEC: [/bin/true]",
            format!("EXEC: [{} sleep 20000]", fixture()).as_str(),
        ]
    );
    assert!(stdout.contains("Num process = 2\n"), "{stdout}");
    assert!(
        stdout.contains("Note: the record stops at ") && stdout.contains("killed or crashed"),
        "{stdout}"
    );
    assert!(stderr.contains("killed or crashed"), "{stderr}");
}

/// A gzip file holding `text`.
fn gzip(text: &str) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(text.as_bytes()).unwrap();
    e.finish().unwrap()
}

#[test]
fn records_ste_cannot_read_are_refused_clearly() {
    let newer = scratch("newer.ste");
    std::fs::write(
        &newer,
        gzip("{\"format\":\"ste-record\",\"record_version\":99,\"generator\":\"ste 9.9.9\",\"changed\":true}\n{\"t_ns\":0,\"kind\":\"start\"}\n"),
    )
    .unwrap();
    let out = report(&newer, &[]);
    assert_eq!(out.status.code(), Some(125));
    let err = text(&out.stderr);
    assert!(
        err.contains("record of version 99, written by ste 9.9.9")
            && err.contains("render it with a newer ste"),
        "{err}"
    );

    let other = scratch("notes.txt");
    std::fs::write(&other, "hello\n").unwrap();
    let out = report(&other, &[]);
    assert_eq!(out.status.code(), Some(125));
    assert!(
        text(&out.stderr).contains("is not a ste record"),
        "{}",
        text(&out.stderr)
    );

    // Same version, with an event kind from a later ste: read, and said.
    let later = scratch("later.ste");
    let header = "{\"format\":\"ste-record\",\"record_version\":1,\"generator\":\"ste 0.9.0\",\"run_schema_version\":1,\"events\":\"\",\"text_style\":{\"width\":80,\"color\":false}}";
    std::fs::write(
        &later,
        gzip(&format!(
            "{header}\n{{\"t_ns\":0,\"kind\":\"start\",\"command\":[\"x\"],\"tracker\":\"ptrace\",\"pid\":5,\"ppid\":1}}\n{{\"t_ns\":1,\"kind\":\"syscall_counts\",\"counts\":[]}}\n{{\"t_ns\":2,\"kind\":\"end\",\"user_ns\":0,\"sys_ns\":0,\"ste_cpu_ns\":0,\"ste_max_rss_bytes\":0,\"stopped_waiting\":null}}\n"
        )),
    )
    .unwrap();
    let out = report(&later, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("1 syscall_counts") && text(&out.stderr).contains("ste 0.9.0"),
        "{}",
        text(&out.stderr)
    );
    assert!(text(&out.stdout).contains("Num process = 1\n"));
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn report_renders_every_format_from_a_record_and_a_json_run() {
    let mode = Mode {
        tracker: Tracker::Ptrace,
        who: Who::Root,
    };
    let r = record(
        mode,
        &["--interval", "5ms"],
        &[&fixture(), "threads", "2", "8", "200"],
    );
    assert_eq!(r.outcome.status(), 0, "{}", r.outcome.stderr());
    let run = r.outcome.run();
    assert!(run.samples.len() >= 5, "{} samples", run.samples.len());

    let csv = text(&report(&r.record, &["--format", "csv"]).stdout);
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("t_ns,pss_bytes,rss_bytes,processes,unreadable")
    );
    assert_eq!(lines.count(), run.samples.len());
    let per = text(&report(&r.record, &["--format", "csv-processes"]).stdout);
    assert!(per.starts_with("t_ns,pid,program,pss_bytes,cpu_ns\n"));
    assert!(per.contains(",fixture,"), "{per}");

    let trace = scratch("trace.json");
    let out = report(
        &r.record,
        &["-f", "perfetto", "-o", trace.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    validate_trace(&v, run);

    let html = text(&report(&r.record, &["-f", "html"]).stdout);
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("id=\"ste-data\""));

    // A Run written by --json renders too.
    let json = scratch("run.json");
    std::fs::write(&json, &r.json).unwrap();
    let out = report(&json, &["--format", "json"]);
    assert_eq!(out.stdout, r.json);
    let out = report(&json, &[]);
    assert!(
        text(&out.stdout).starts_with("EXEC: ["),
        "{}",
        text(&out.stdout)
    );
}

/// Checks a trace against the trace-event format and the Run it shows: every event has its
/// fields, begin and end nest on every track, counters are numbers, flows pair up; one track
/// per process with its lifetime slice and one slice per exec.
fn validate_trace(v: &Value, run: &ste::model::Run) {
    let events = v["traceEvents"].as_array().expect("traceEvents");
    let mut stacks: HashMap<(u64, u64), Vec<(f64, String)>> = HashMap::new();
    let mut last_ts: HashMap<(u64, u64), f64> = HashMap::new();
    let mut flows_out = HashSet::new();
    let mut flows_in = Vec::new();
    let mut named = BTreeSet::new();
    let (mut lifetimes, mut exec_slices, mut counters) = (0, 0, 0);
    for e in events {
        let ph = e["ph"].as_str().unwrap_or_else(|| panic!("no ph: {e}"));
        assert!(e["name"].is_string(), "no name: {e}");
        let pid = e["pid"].as_u64().unwrap_or_else(|| panic!("no pid: {e}"));
        let tid = e["tid"].as_u64().unwrap_or_else(|| panic!("no tid: {e}"));
        let ts = e["ts"].as_f64().unwrap_or_else(|| panic!("no ts: {e}"));
        assert!(ts >= 0.0, "{e}");
        let track = (pid, tid);
        match ph {
            "B" | "E" => {
                let last = last_ts.entry(track).or_insert(0.0);
                assert!(ts >= *last, "time goes back on {track:?}: {e}");
                *last = ts;
                if ph == "B" {
                    let name = e["name"].as_str().unwrap().to_string();
                    if name.starts_with("pid ") {
                        lifetimes += 1;
                    } else if !name.starts_with("thread ") {
                        exec_slices += 1;
                    }
                    stacks.entry(track).or_default().push((ts, name));
                } else {
                    let (begin, name) = stacks
                        .get_mut(&track)
                        .and_then(Vec::pop)
                        .unwrap_or_else(|| panic!("an end without a begin: {e}"));
                    assert!(ts >= begin, "{name} ends before it begins: {e}");
                }
            }
            "C" => {
                let args = e["args"].as_object().expect("counter args");
                assert!(!args.is_empty(), "{e}");
                for (k, x) in args {
                    assert!(
                        x.as_f64().is_some_and(f64::is_finite),
                        "counter {k} is not a number: {e}"
                    );
                }
                // No rate of CPU passes what the machine had (issue 45).
                if let (Some(cores), Some(cpus)) = (e["args"]["cores"].as_f64(), run.machine_cpus) {
                    assert!(
                        cores <= f64::from(cpus),
                        "{cores} cores on {cpus} CPUs: {e}"
                    );
                }
                counters += 1;
            }
            "i" => assert!(
                matches!(e["s"].as_str(), Some("t" | "p" | "g")),
                "instant scope: {e}"
            ),
            "s" => assert!(
                flows_out.insert(e["id"].as_u64().expect("flow id")),
                "flow id used twice: {e}"
            ),
            "f" => {
                assert_eq!(e["bp"], "e", "{e}");
                flows_in.push(e["id"].as_u64().expect("flow id"));
            }
            "M" => {
                let name = e["name"].as_str().unwrap();
                assert!(
                    matches!(name, "process_name" | "process_sort_index" | "thread_name"),
                    "{e}"
                );
                if name == "process_name" {
                    assert!(e["args"]["name"].is_string(), "{e}");
                    named.insert(pid);
                }
            }
            other => panic!("unexpected phase {other}: {e}"),
        }
    }
    for (track, open) in &stacks {
        assert!(open.is_empty(), "slices never ended on {track:?}: {open:?}");
    }
    for id in &flows_in {
        assert!(flows_out.contains(id), "flow {id} ends but never starts");
    }
    // One named process per process of the run, plus the whole tree's.
    assert_eq!(named.len() as u64, run.totals.processes + 1);
    assert_eq!(lifetimes as u64, run.totals.processes);
    assert_eq!(
        exec_slices as u64, run.totals.execs,
        "one slice per exec (threads have their own)"
    );
    assert!(counters > 0 || run.samples.is_empty());
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn the_perfetto_trace_of_2000_processes_follows_the_format() {
    let mode = Mode {
        tracker: Tracker::Ptrace,
        who: Who::Root,
    };
    let trace = scratch("loop.trace.json");
    let script = "i=0; while [ $i -lt 2000 ]; do /bin/true; i=$((i+1)); done";
    let o = ste(
        mode,
        &["--perfetto", trace.to_str().unwrap()],
        &["/bin/sh", "-c", script],
    );
    assert_eq!(o.status(), 0, "{}", o.stderr());
    assert_eq!(o.run().totals.processes, 2001);
    let v: Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    assert_eq!(v["displayTimeUnit"], "ns");
    validate_trace(&v, o.run());
}

/// CPUs online here, as ste records them.
fn online_cpus() -> u32 {
    // SAFETY: sysconf has no memory-safety preconditions.
    u32::try_from(unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }).unwrap()
}

/// Issue 45: rates over rounds 10 ms apart, in 10 ms ticks, drew a compiler at thousands of
/// cores on a 2-CPU machine. Three spinners on this machine: the Run records its CPUs, no
/// process's counter passes one core (each spins one thread), and the tree's never passes the
/// machine; their CPU adds up to what they spun.
#[test]
fn the_perfetto_cpu_counters_stay_within_the_machine() {
    let mode = Mode {
        tracker: Tracker::Ptrace,
        who: Who::Nobody,
    };
    let trace = scratch("spinners.trace.json");
    let f = fixture();
    let script = format!("{f} spin 400 & {f} spin 400 & {f} spin 400; wait");
    let o = ste(
        mode,
        &["--interval", "10ms", "--perfetto", trace.to_str().unwrap()],
        &["/bin/sh", "-c", &script],
    );
    assert_eq!(o.status(), 0, "{}", o.stderr());
    let run = o.run();
    assert_eq!(run.machine_cpus, Some(online_cpus()));
    let v: Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    validate_trace(&v, run);
    let tree = u64::from(ste::report::perfetto::TREE_PID);
    let mut spun = 0.0;
    let mut last: HashMap<u64, (f64, f64)> = HashMap::new();
    for e in v["traceEvents"].as_array().unwrap() {
        if e["ph"] != "C" || e["name"] != "CPU" {
            continue;
        }
        let (pid, ts, cores) = (
            e["pid"].as_u64().unwrap(),
            e["ts"].as_f64().unwrap(),
            e["args"]["cores"].as_f64().unwrap(),
        );
        if pid != tree {
            assert!(cores <= 1.0, "pid {pid}: {cores} cores: {e}");
        }
        if let Some((t, c)) = last.insert(pid, (ts, cores))
            && pid == tree
        {
            spun += c * (ts - t) * 1e3;
        }
    }
    // The tree's counter adds up to the tree's CPU: the spinners' 1.2 s and the shell's.
    let cpu = run.totals.cpu_ns().unwrap() as f64;
    assert!(
        (spun - cpu).abs() < 0.1 * cpu,
        "the tree's counter adds up to {spun} ns of {cpu}"
    );
}

// ------------------------------------------------------------------ HTML in Chromium

/// Headless Chromium, from `STE_CHROMIUM` or Debian's package; `None` when it is not
/// installed (outside CI the test then passes, saying it was skipped).
fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("STE_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    let found = path.exists().then_some(path);
    tool(
        "Chromium",
        found,
        "the HTML tests open the report in headless Chromium: apt-get install chromium, as .ci/run does, or set STE_CHROMIUM to a Chromium binary",
    )
}

/// Runs headless Chromium on `page` with `args`; returns its stdout and stderr. A fresh
/// profile each time, and no background networking (connections are refused here).
fn browse(page: &Path, args: &[&str]) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    let mut child = Command::new(chromium().expect("the test checked for Chromium first"))
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=15000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .expect("cannot start chromium");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (
        std::fs::read_to_string(out).unwrap(),
        std::fs::read_to_string(err).unwrap(),
    )
}

/// What the page's script reports having drawn (`#ste-status`), from the dumped DOM.
fn page_status(page: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["--dump-dom"];
    args.extend_from_slice(extra);
    let (dom, log) = browse(page, &args);
    let console: Vec<&str> = log.lines().filter(|l| l.contains(":CONSOLE")).collect();
    assert!(
        console.is_empty(),
        "the page wrote to the console:\n{}",
        console.join("\n")
    );
    let start = dom.find("<pre id=\"ste-status\"").unwrap_or_else(|| {
        panic!(
            "no #ste-status in the DOM:\n{}",
            &dom[..dom.len().min(2000)]
        )
    });
    let body = &dom[start..];
    let json = &body[body.find('>').unwrap() + 1..body.find("</pre>").unwrap()];
    let json = json
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("bad status {json}: {e}"))
}

/// Whether the page's status list `list` (sections, parts, columns) holds `name`.
fn drew(list: &Value, name: &str) -> bool {
    list.as_array().is_some_and(|l| l.iter().any(|x| x == name))
}

/// Width and height of a PNG file (its IHDR chunk).
fn png_size(path: &Path) -> (u32, u32) {
    let b = std::fs::read(path).unwrap();
    assert!(
        b.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{} is not a PNG",
        path.display()
    );
    let be = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    (be(16), be(20))
}

/// The programs (argv[0] basenames) of the processes sampled in the run.
fn sampled_programs(run: &ste::model::Run) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for s in &run.samples {
        for r in s.per_process.iter().flatten() {
            let p = run
                .processes
                .iter()
                .rfind(|p| p.pid == r.pid && p.start_ns <= s.t_ns)
                .expect("a sampled pid is a process of the run");
            let arg0 = p
                .execs
                .last()
                .and_then(|e| e.argv.as_ref())
                .and_then(|a| a.first())
                .expect("every process of this workload exec'd")
                .to_string_lossy();
            out.insert(arg0.rsplit('/').next().unwrap().to_string());
        }
    }
    out
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn the_html_report_renders_in_chromium() {
    let Some(_) = chromium() else { return };
    let mode = Mode {
        tracker: Tracker::Ptrace,
        who: Who::Root,
    };
    let html = scratch("report.html");
    let f = fixture();
    let script = format!(
        "{f} fill 96 700 & {f} threads 3 16 500 & for i in 1 2 3 4 5 6 7 8; do /bin/true; done; {f} spin 200; wait"
    );
    let o = ste(
        mode,
        &["--interval", "10ms", "--html", html.to_str().unwrap()],
        &["/bin/sh", "-c", &script],
    );
    assert_eq!(o.status(), 0, "{}", o.stderr());
    let run = o.run();
    let programs = sampled_programs(run);
    assert!(
        programs.contains("fixture") && programs.contains("sh"),
        "{programs:?}"
    );

    let acc = run.accounting.as_ref().expect("a root run has accounting");
    for theme in [&[][..], &["--force-dark-mode"][..]] {
        let st = page_status(&html, theme);
        assert_eq!(st["rendered"], true, "{st}");
        assert_eq!(st["errors"], serde_json::json!([]), "{st}");
        assert_eq!(
            st["sections"],
            serde_json::json!([
                "summary",
                "accounting",
                "memory",
                "cpu",
                "timeline",
                "programs",
                "ledger",
                "sampling",
                "sources"
            ]),
            "{st}"
        );
        // The by-program table has the rows --by-program prints (sh, fixture, true, …).
        let by_program = ste::report::programs::by_program(run);
        assert!(by_program.len() >= 3, "{by_program:?}");
        assert_eq!(st["programs"], by_program.len(), "{st}");
        let (dom, _) = browse(&html, &["--dump-dom"]);
        for p in &by_program {
            assert!(
                dom.contains(&format!("data-program=\"{}\"", p.program)),
                "no row for {}",
                p.program
            );
        }
        // Every field of this Run has a view of its own: nothing is drawn generically.
        assert_eq!(st["generic"], serde_json::json!([]), "{st}");
        for part in ["memory", "time", "critical_path", "group"] {
            assert!(drew(&st["accounting"]["parts"], part), "no {part}: {st}");
        }
        assert_eq!(
            st["accounting"]["critical_path"],
            acc.critical_path.len(),
            "{st}"
        );
        let group_peak = acc.memory.group_peak.as_ref().expect("a group peak").bytes;
        assert_eq!(st["memory_cgroup"]["peak"], group_peak, "{st}");
        for column in ["cpu_ns", "run_queue_ns", "peak_rss_bytes", "minor_faults"] {
            assert!(
                drew(&st["ledger_columns"], column),
                "no ledger column {column}: {st}"
            );
        }
        // Stacked by program: one series per program sampled (up to 10, then "other").
        let series = programs.len().min(10) + usize::from(programs.len() > 10);
        assert_eq!(st["memory_series"], series, "{st} {programs:?}");
        // Dashed lines are peaks: Max PSS's bound is not one.
        let lines = st["memory_lines"].as_array().unwrap();
        assert!(
            lines.iter().all(|l| !l.as_str().unwrap().contains("bound")),
            "{st}"
        );
        // The CPU chart has every process with CPU, read by a round or not: `true` too.
        assert!(st["cpu_series"].as_u64() > Some(0), "{st}");
        // Never above the machine (issue 45).
        assert_eq!(st["cpu_cap"], online_cpus(), "{st}");
        let peak = st["cpu_peak"].as_f64().unwrap();
        assert!(peak > 0.0 && peak <= f64::from(online_cpus()), "{st}");
        assert_eq!(st["timeline_rows"], run.totals.processes, "{st}");
        assert_eq!(st["timeline_mode"], "process", "{st}");
        assert_eq!(st["ledger_rows"], run.totals.processes, "{st}");
    }

    screenshots(&html, "report");
}

/// Screenshots for review, light and dark, laptop and phone: the first screenful
/// (`NAME-1280x800-light.png`) and the whole page (`NAME-1280-full-light.png`).
fn screenshots(html: &Path, name: &str) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    for (theme, flags) in [("light", &[][..]), ("dark", &["--force-dark-mode"][..])] {
        for (w, h) in [(1280, 800), (390, 844)] {
            let size = format!("--window-size={w},{h}");
            let st = page_status(html, &[size.as_str()]);
            let full = st["page_height"].as_u64().expect("the page's height") as u32;
            for (shot_name, height) in [(format!("{w}x{h}"), h), (format!("{w}-full"), full)] {
                let shot = dir.join(format!("{name}-{shot_name}-{theme}.png"));
                let _ = std::fs::remove_file(&shot);
                let mut args = vec![
                    format!("--window-size={w},{height}"),
                    format!("--screenshot={}", shot.display()),
                ];
                args.extend(flags.iter().map(|s| s.to_string()));
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                browse(html, &args);
                assert_eq!(png_size(&shot), (w, height), "{}", shot.display());
                eprintln!("screenshot: {}", shot.display());
            }
        }
    }
}

/// The text of the element of the dumped DOM that starts at `marker`, up to the end of the
/// enclosing section.
fn dom_part<'a>(dom: &'a str, marker: &str) -> &'a str {
    let at = dom
        .find(marker)
        .unwrap_or_else(|| panic!("no {marker} in the page"));
    let part = &dom[at..];
    &part[..part.find("</section>").unwrap_or(part.len())]
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn the_accounting_section_shows_the_runs_figures() {
    let Some(_) = chromium() else { return };
    let mode = Mode {
        tracker: Tracker::Ptrace,
        who: Who::Root,
    };
    // Known answers (tests/it/accounting.rs): three children of 100, 200 and 300 MiB at
    // once, then one of 400 MiB: the group peaks at 600 MiB, the largest process at 400 MiB;
    // then a daemon that outlives the command by a second.
    let f = example("accounting_fixture").display().to_string();
    let html = scratch("accounting.html");
    let script = format!("{f} group 100 200 300 400; {f} daemon 1");
    let o = ste(
        mode,
        &["--html", html.to_str().unwrap()],
        &["/bin/sh", "-c", &script],
    );
    assert_eq!(o.status(), 0, "{}", o.stderr());
    let run = o.run();
    let acc = run.accounting.as_ref().expect("accounting");
    const MIB: f64 = (1u64 << 20) as f64;
    let m = &acc.memory;
    let group = m.group_peak.as_ref().expect("a group peak as root");
    assert!(
        (group.bytes as f64 / MIB - 600.0).abs() < 18.0,
        "group peak {} is not 600 MiB ± 3%",
        group.bytes
    );
    let largest = m.largest_process_peak.as_ref().expect("a largest peak");
    assert!(
        (largest.bytes as f64 / MIB - 400.0).abs() < 12.0,
        "largest peak {}",
        largest.bytes
    );
    assert_eq!(
        acc.lingering.len(),
        1,
        "the daemon lingers: {:?}",
        acc.lingering
    );

    let st = page_status(&html, &[]);
    assert_eq!(st["errors"], serde_json::json!([]), "{st}");
    assert_eq!(st["generic"], serde_json::json!([]), "{st}");
    let (dom, _) = browse(&html, &["--dump-dom"]);
    let section = dom_part(&dom, "<section class=\"card\" id=\"accounting\"");
    assert!(!section.contains("data-generic"), "{section}");

    // The processes' peaks summed: these processes did not all live at the same time, so the
    // sum adds peaks that never coexisted: the page leaves it out, as the text does.
    assert!(m.summed_process_peaks.is_some());
    assert!(
        !section.contains("data-figure=\"summed_process_peaks\""),
        "{section}"
    );
    // The memory figures: the exact bytes the JSON has, each with its exactness and source.
    for (id, fig) in [
        ("group_peak", m.group_peak.as_ref()),
        ("largest_process_peak", m.largest_process_peak.as_ref()),
        ("pss_max", m.pss_max.as_ref()),
    ] {
        let fig = fig.unwrap_or_else(|| panic!("no {id} in the JSON"));
        let row = dom_part(section, &format!("data-figure=\"{id}\""));
        let row = &row[..row.find("class=\"mrow\"").unwrap_or(row.len())];
        assert!(
            row.starts_with(&format!(
                "data-figure=\"{id}\" data-bytes=\"{}\"",
                fig.bytes
            )),
            "{row}"
        );
        assert!(
            row.contains(&format!("{} bytes", ste::units::group_thousands(fig.bytes))),
            "{id}: {} bytes not shown: {row}",
            fig.bytes
        );
        let badge = if fig.exact { ">exact<" } else { ">sampled<" };
        assert!(row.contains(badge), "{id} is not marked {badge}: {row}");
        assert!(
            row.contains(&fig.from),
            "{id}: its source is not shown: {row}"
        );
    }
    let row = dom_part(section, "data-figure=\"largest_process_peak\"");
    assert!(
        row.contains(&format!("pid {}", largest.pid.unwrap())),
        "{row}"
    );
    // The anon/page cache split of the group's highest round.
    let g = acc.group.as_ref().unwrap();
    let row = dom_part(section, "data-figure=\"group_peak\"");
    assert!(
        row.contains("anonymous ") && row.contains("page cache "),
        "{row}"
    );
    assert!(g.sampled_peak_anon_bytes.unwrap() > 500 << 20, "{g:?}");

    // Where the time went: each segment's nanoseconds are the JSON's.
    let t = acc.time.as_ref().expect("time");
    for (segment, ns) in [
        ("user", t.user_ns),
        ("system", t.sys_ns),
        ("run_queue", t.run_queue_ns),
        ("other", t.other_ns),
    ] {
        let ns = ns.unwrap_or_else(|| panic!("no {segment} in the JSON"));
        assert!(
            section.contains(&format!("data-segment=\"{segment}\" data-ns=\"{ns}\"")),
            "{segment} {ns}"
        );
    }

    // The first process's wait for ste's set-up, left out of its figures, is said.
    let before = acc.before_release.as_ref().expect("before_release as root");
    assert!(before.alive_ns > 0, "{before:?}");
    assert!(
        section.contains(" while ste set up (blocked until ste released it"),
        "the wait before the release is not said"
    );

    // The critical path, link by link, ending at the daemon; the lingering daemon.
    let path: Vec<String> = acc
        .critical_path
        .iter()
        .map(|l| format!("data-pid=\"{}\"", l.pid))
        .collect();
    let table = dom_part(section, "<table class=\"path\"");
    let table = &table[..table.find("</table>").unwrap()];
    let shown: Vec<&str> = table
        .match_indices("data-pid=\"")
        .map(|(at, _)| {
            let rest = &table[at..];
            &rest[..rest[11..].find('"').unwrap() + 12]
        })
        .collect();
    assert_eq!(shown, path);
    let daemon = acc.lingering[0].pid;
    assert_eq!(acc.critical_path.last().unwrap().pid, daemon);
    let lingering = dom_part(section, "id=\"accounting-lingering\"");
    assert!(
        lingering.contains(&format!("data-pid=\"{daemon}\"")),
        "{lingering}"
    );
    assert_eq!(st["timeline_path"], acc.critical_path.len(), "{st}");

    // The ledger's figures are columns, each with its source on hover: under ptrace, the CPU
    // and the counters from the wait that ends each process (read after its exit), the I/O
    // from taskstats.
    let ledger = dom_part(&dom, "<section class=\"card\" id=\"ledger\"");
    for (key, from) in [
        ("cpu_ns", "wait4"),
        ("minor_faults", "wait4"),
        ("voluntary_switches", "wait4"),
        ("read_bytes", "taskstats"),
    ] {
        let th = dom_part(ledger, &format!("data-key=\"{key}\""));
        let th = &th[..th.find("</th>").unwrap()];
        assert!(th.contains(&format!("from {from}")), "{key}: {th}");
    }
    screenshots(&html, "accounting");
}

#[test]
fn a_report_of_20000_processes_stays_usable() {
    let Some(_) = chromium() else { return };
    let rec = scratch("synth.ste");
    let made = Command::new(example("reports_fixture"))
        .args(["synth-record", "20000"])
        .arg(&rec)
        .status()
        .unwrap();
    assert!(made.success());
    let html = scratch("big.html");
    let t0 = Instant::now();
    let out = report(&rec, &["-f", "html", "-o", html.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    eprintln!("HTML of 20,000 processes rendered in {:?}", t0.elapsed());
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("data-encoding=\"gzip-base64\""));
    assert!(
        page.len() < 4 << 20,
        "the page is {} bytes for 20,000 processes",
        page.len()
    );
    let st = page_status(&html, &[]);
    assert_eq!(st["rendered"], true, "{st}");
    assert_eq!(st["errors"], serde_json::json!([]), "{st}");
    // Too many rows to draw one per process at first: one per program (make sh cc cc1 as).
    assert_eq!(st["timeline_mode"], "program", "{st}");
    assert_eq!(st["timeline_rows"], 5, "{st}");
    assert_eq!(st["ledger_rows"], 20000, "{st}");
    // By program: make, sh, cc, cc1 and as are all sampled.
    assert_eq!(st["memory_series"], 5, "{st}");
    // A root run's: its accounting has a section, its ledger columns.
    assert!(drew(&st["sections"], "accounting"), "{st}");
    assert_eq!(st["ledger_columns"].as_array().unwrap().len(), 15, "{st}");
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn sections_the_page_does_not_know_are_drawn_generically() {
    let Some(_) = chromium() else { return };
    // A root run (its accounting has a section of its own), with data of a later ste added: a
    // section of the Run the page has no view for, and a field of the accounting.
    let o = ste(
        Mode {
            tracker: Tracker::Ptrace,
            who: Who::Root,
        },
        &[],
        &["/bin/true"],
    );
    assert_eq!(o.status(), 0, "{}", o.stderr());
    let mut view = ste::report::html::view(o.run());
    // The parts this run did not ask for are null: no section, and nothing generic either.
    for part in ["syscalls", "malloc", "memory_at_peak"] {
        assert_eq!(view.run.get(part), Some(&Value::Null), "{part}");
    }
    view.run.insert(
        "future_part".into(),
        serde_json::json!({
            "by_thing": [
                {"name": "read", "calls": 10, "errors": 0, "time_ns": 12_000},
                {"name": "openat", "calls": 4, "errors": 1, "time_ns": 9_000},
                {"name": "write", "calls": 2, "errors": 0, "time_ns": 3_000},
            ],
            "by_kind": [{"kind": "Filesystem", "calls": 16}],
        }),
    );
    let Some(Value::Object(acc)) = view.run.get_mut("accounting") else {
        panic!("a root run has accounting");
    };
    acc.insert(
        "pressure".into(),
        serde_json::json!({"memory_some_ns": 7_000_000, "io_full_ns": null}),
    );
    let page = scratch("generic.html");
    let mut out = Vec::new();
    ste::report::html::write_page(&view, "ste: true", "ste test", &mut out).unwrap();
    std::fs::write(&page, out).unwrap();
    let st = page_status(&page, &[]);
    assert_eq!(st["rendered"], true, "{st}");
    assert_eq!(st["errors"], serde_json::json!([]), "{st}");
    // Only what the page does not know is generic: the accounting has its own section.
    assert_eq!(
        st["generic"],
        serde_json::json!(["accounting.pressure", "future_part"]),
        "{st}"
    );
    assert!(drew(&st["sections"], "accounting"), "{st}");
    for part in ["syscalls", "malloc", "memory_at_peak"] {
        assert!(
            !drew(&st["sections"], part),
            "{part} drawn though null: {st}"
        );
    }
    let (dom, _) = browse(&page, &["--dump-dom"]);
    assert!(
        !dom.contains("id=\"run-accounting\""),
        "accounting drawn generically"
    );
    let section = dom_part(&dom, "id=\"run-future_part\"");
    assert!(
        section.contains("data-rows=\"3\"") && section.contains("data-rows=\"1\""),
        "{section}"
    );
    assert!(
        section.contains("openat") && section.contains("12µs"),
        "{section}"
    );
    // The accounting's unknown field, inside its section, after the parts it knows.
    let accounting = dom_part(&dom, "<section class=\"card\" id=\"accounting\"");
    let pressure = dom_part(accounting, "data-generic=\"accounting.pressure\"");
    assert!(
        pressure.contains("Memory some") && pressure.contains("7ms"),
        "{pressure}"
    );
}

/// Renders `html` and checks what every page must: drawn, no error, nothing generic, and
/// `section` among the sections. Returns the status and the dumped DOM.
fn rendered_with(html: &Path, section: &str) -> (Value, String) {
    let st = page_status(html, &[]);
    assert_eq!(st["rendered"], true, "{st}");
    assert_eq!(st["errors"], serde_json::json!([]), "{st}");
    assert_eq!(st["generic"], serde_json::json!([]), "{st}");
    assert!(drew(&st["sections"], section), "no {section} section: {st}");
    let (dom, _) = browse(html, &["--dump-dom"]);
    (st, dom)
}

/// `--syscalls=per-process` at ptrace syscall stops, as root and as nobody: the page's
/// totals, subsystems, errnos and programs are the JSON's.
fn the_syscalls_section_shows_the_runs_figures(who: Who) {
    let Some(_) = chromium() else { return };
    let mode = Mode {
        tracker: Tracker::Ptrace,
        who,
    };
    let f = example("syscalls_fixture").display().to_string();
    let html = scratch("syscalls.html");
    let script = format!("{f} getppid 3000; {f} fail 5");
    let o = ste(
        mode,
        &[
            "--syscalls=per-process",
            "--allow-ptrace",
            "--html",
            html.to_str().unwrap(),
        ],
        &["/bin/sh", "-c", &script],
    );
    assert_eq!(o.status(), 0, "{}", o.stderr());
    let run = o.run();
    let sc = run.syscalls.as_ref().expect("system calls in the run");
    assert_eq!(sc.method, "ptrace");
    assert!(sc.timed && sc.per_process, "{sc:?}");
    let getppid = sc
        .calls
        .iter()
        .find(|r| r.name.as_deref() == Some("getppid"))
        .expect("getppid counted");
    assert!(getppid.calls >= 3000, "{getppid:?}");

    let (st, dom) = rendered_with(&html, "syscalls");
    let s = &st["syscalls"];
    let total: u64 = sc.calls.iter().map(|r| r.calls).sum();
    let failed: u64 = sc.calls.iter().map(|r| r.errors).sum();
    let time: u64 = sc.calls.iter().filter_map(|r| r.total_ns).sum();
    assert_eq!(s["method"], "ptrace", "{s}");
    assert_eq!(s["calls"], total, "{s}");
    assert_eq!(s["failed"], failed, "{s}");
    assert_eq!(s["time_ns"], time, "{s}");
    assert_eq!(s["rows"], sc.calls.len(), "{s}");
    assert_eq!(s["errnos"], sc.errors.len(), "{s}");
    assert!(!sc.errors.is_empty(), "fail 5 makes failed calls");
    assert_eq!(s["images"], sc.images.len(), "{s}");
    // Subsystems: the JSON's calls summed by group, most first (as the text report orders them).
    let mut groups: HashMap<&str, u64> = HashMap::new();
    for r in &sc.calls {
        *groups.entry(r.group.as_str()).or_default() += r.calls;
    }
    let mut groups: Vec<(&str, u64)> = groups.into_iter().collect();
    groups.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    assert_eq!(s["groups"], serde_json::json!(groups), "{s}");
    // Programs: every image in one of them, the calls all there.
    let programs = s["programs"].as_array().expect("programs");
    let images: u64 = programs.iter().map(|p| p[1].as_u64().unwrap()).sum();
    let calls: u64 = programs.iter().map(|p| p[2].as_u64().unwrap()).sum();
    let in_images: u64 = sc
        .images
        .iter()
        .flat_map(|i| &i.calls)
        .map(|c| c.calls)
        .sum();
    assert_eq!(images as usize, sc.images.len(), "{s}");
    assert_eq!(calls, in_images, "{s}");
    assert!(programs.iter().any(|p| p[0] == "syscalls_fixture"), "{s}");

    // The page shows the figures: the getppid row with its exact count, the source label.
    let section = dom_part(&dom, "<section class=\"card\" id=\"syscalls\"");
    let row = dom_part(
        section,
        &format!(
            "data-call=\"getppid\" data-calls=\"{}\" data-errors=\"0\"",
            getppid.calls
        ),
    );
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(
        row.contains(&format!(">{}<", ste::units::group_thousands(getppid.calls))),
        "{row}"
    );
    assert!(row.contains("kernel/sys.c"), "{row}");
    assert!(
        section.contains(">exact<")
            && section.contains("counted at ptrace syscall stops, like strace: SLOW")
            && section.contains(&sc.table),
        "{section}"
    );
    assert!(
        section.contains(&format!(">{}<", ste::units::group_thousands(total))),
        "{section}"
    );
    for e in &sc.errors {
        if let Some(name) = &e.name {
            assert!(section.contains(name.as_str()), "{name}: {section}");
        }
    }
    if who == Who::Root {
        screenshots(&html, "syscalls");
    }
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn the_syscalls_section_shows_the_runs_figures_as_root() {
    the_syscalls_section_shows_the_runs_figures(Who::Root);
}

#[test]
fn the_syscalls_section_shows_the_runs_figures_as_nobody() {
    the_syscalls_section_shows_the_runs_figures(Who::Nobody);
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn the_malloc_section_shows_the_runs_figures() {
    let Some(_) = chromium() else { return };
    let mode = Mode {
        tracker: Tracker::Ptrace,
        who: Who::Root,
    };
    // A heap freed but still resident (tests/it/malloc.rs), then a static binary the shim
    // cannot reach.
    let fx = crate::malloc::c_program("malloc_fixture", &[]);
    let fx_static = crate::malloc::c_program("malloc_fixture", &["-static"]);
    let html = scratch("malloc.html");
    let script = format!("{fx} fragment 64 800; {fx_static} count 5 10");
    let o = ste(
        mode,
        &["--malloc", "--html", html.to_str().unwrap()],
        &["/bin/sh", "-c", &script],
    );
    assert_eq!(o.status(), 0, "{}", o.stderr());
    let run = o.run();
    let m = run.malloc.as_ref().expect("malloc in the run");
    let fragment = m
        .images
        .iter()
        .find(|i| i.program == fx)
        .expect("the fixture's image");
    assert_eq!(fragment.calls.malloc, 64 * 1024, "{fragment:?}");

    let (st, dom) = rendered_with(&html, "malloc");
    let s = &st["malloc"];
    // Each image the page lists is the JSON's, figure for figure; the fixture's among them.
    let listed = s["per_image"].as_array().expect("per_image");
    assert!(!listed.is_empty(), "{s}");
    for l in listed {
        let i = m
            .images
            .iter()
            .find(|i| l["pid"] == i.pid && l["image"] == i.image)
            .unwrap_or_else(|| panic!("{l} is not an image of the run"));
        assert_eq!(l["calls"], i.calls.total(), "{l}");
        assert_eq!(l["malloc"], i.calls.malloc, "{l}");
        assert_eq!(l["free"], i.calls.free, "{l}");
        assert_eq!(
            l["asked"],
            i.bytes.malloc + i.bytes.calloc + i.bytes.realloc + i.bytes.memalign,
            "{l}"
        );
        assert_eq!(
            l["held_at_end"],
            serde_json::json!(i.held_at_end_bytes),
            "{l}"
        );
        assert_eq!(l["peak_held"], serde_json::json!(i.peak_held_bytes), "{l}");
    }
    assert!(
        listed
            .iter()
            .any(|l| l["pid"] == fragment.pid && l["malloc"] == 65536),
        "{s}"
    );
    let calls: u64 = listed.iter().map(|l| l["calls"].as_u64().unwrap()).sum();
    assert_eq!(s["calls"], calls, "{s}");
    // The static binary, with its reason.
    let uncovered: Vec<Value> = m
        .uncovered
        .iter()
        .map(|u| serde_json::json!([u.pid, u.reason]))
        .collect();
    assert_eq!(s["uncovered"], serde_json::json!(uncovered), "{s}");
    assert!(
        m.uncovered
            .iter()
            .any(|u| u.reason == ste::model::malloc::UncoveredReason::StaticBinary),
        "{:?}",
        m.uncovered
    );
    // Held over time: the 64 MiB heap at its peak.
    let held = &st["malloc_held"];
    assert!(held["rounds"].as_u64().unwrap() >= 2, "{held}");
    assert!(
        held["peak"].as_u64().unwrap() >= fragment.peak_held_bytes.unwrap(),
        "{held}"
    );

    let section = dom_part(&dom, "<section class=\"card\" id=\"malloc\"");
    let details = dom_part(
        section,
        &format!("<details class=\"image\" data-pid=\"{}\"", fragment.pid),
    );
    let details = &details[..details.find("</details>").unwrap()];
    assert!(
        details.contains(&format!(
            "malloc {} ({} bytes asked)",
            ste::units::group_thousands(fragment.calls.malloc),
            ste::units::group_thousands(fragment.bytes.malloc)
        )),
        "{details}"
    );
    assert!(details.contains("resident but not held"), "{details}");
    assert!(details.contains(">modelled<"), "{details}");
    assert!(
        section.contains("a static binary (no dynamic loader, so LD_PRELOAD is never read)"),
        "{section}"
    );
    assert!(section.contains(&m.probes), "{section}");
    screenshots(&html, "malloc");
}

/// `--maps-at-peak` on a fixture of known layout (tests/it/maps.rs), as root (page flags) and
/// as nobody: the page's processes and kinds are the JSON's.
fn the_memory_at_peak_section_shows_the_runs_figures(who: Who) {
    let Some(_) = chromium() else { return };
    let mode = Mode {
        tracker: Tracker::Ptrace,
        who,
    };
    let html = scratch("peak.html");
    let fx = example("memory_fixture").display().to_string();
    let o = ste(
        mode,
        &[
            "--maps-at-peak",
            "--maps-budget",
            "100",
            "--html",
            html.to_str().unwrap(),
        ],
        &[&fx, "anatomy", "2500"],
    );
    assert_eq!(o.status(), 0, "{}", o.stderr());
    let run = o.run();
    let peak = run.memory_at_peak.as_ref().expect("memory at the peak");
    let snap = peak.snapshot.as_ref().expect("a snapshot");
    assert_eq!(peak.info.page_flags, who == Who::Root);

    let (st, dom) = rendered_with(&html, "memory_at_peak");
    let s = &st["memory_at_peak"];
    assert_eq!(s["t_ns"], snap.t_ns, "{s}");
    assert_eq!(s["tree_pss_bytes"], snap.tree_pss_bytes, "{s}");
    assert_eq!(s["others"], snap.others, "{s}");
    assert_eq!(s["page_flags"], peak.info.page_flags, "{s}");
    let shown = s["processes"].as_array().expect("processes");
    assert_eq!(shown.len(), snap.processes.len(), "{s}");
    for (p, pm) in shown.iter().zip(&snap.processes) {
        assert_eq!(p["pid"], pm.pid, "{p}");
        assert_eq!(p["pss"], pm.totals.pss_bytes, "{p}");
        assert_eq!(p["rss"], pm.totals.rss_bytes, "{p}");
        // PSS by kind: the mappings' figures summed, for every kind with resident pages.
        let mut kinds: HashMap<String, u64> = HashMap::new();
        for m in pm
            .mappings
            .iter()
            .filter(|m| m.figures.rss_bytes > 0 || m.figures.swap_bytes > 0)
        {
            let k = serde_json::to_value(m.kind).unwrap();
            *kinds.entry(k.as_str().unwrap().to_string()).or_default() += m.figures.pss_bytes;
        }
        let page: HashMap<String, u64> = serde_json::from_value(p["kinds"].clone()).expect("kinds");
        for (k, v) in &kinds {
            assert_eq!(page.get(k), Some(v), "{k}: {p}");
        }
    }
    // The fixture's 64 MiB heap and thread stacks, shown by their labels.
    let heap = shown[0]["kinds"]["heap"].as_u64().expect("a heap");
    assert!(heap >= 60 << 20, "{s}");
    let section = dom_part(&dom, "<section class=\"card\" id=\"memory_at_peak\"");
    assert!(
        section.contains(&format!(
            "{} bytes PSS",
            ste::units::group_thousands(snap.processes[0].totals.pss_bytes)
        )),
        "{section}"
    );
    for label in [
        "heap (brk)",
        "thread stacks",
        "shared memory",
        "/tmp/ste-anatomy-",
    ] {
        assert!(section.contains(label), "{label}: {section}");
    }
    assert!(section.contains("Maps at peak: "), "{section}");
    // Page flags as root only.
    let flags = snap.processes.iter().filter(|p| p.flags.is_some()).count();
    assert_eq!(s["flags"], flags, "{s}");
    assert_eq!(
        section.contains("Resident pages by flag (kpageflags)"),
        who == Who::Root,
        "{section}"
    );
    if who == Who::Root {
        assert!(flags >= 1);
        screenshots(&html, "peak");
    }
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn the_memory_at_peak_section_shows_the_runs_figures_as_root() {
    the_memory_at_peak_section_shows_the_runs_figures(Who::Root);
}

#[test]
fn the_memory_at_peak_section_shows_the_runs_figures_as_nobody() {
    the_memory_at_peak_section_shows_the_runs_figures(Who::Nobody);
}
