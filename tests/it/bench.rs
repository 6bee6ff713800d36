//! `ste bench` (issue 17): two commands that differ only in the memory they touch give a Max
//! PSS ratio of 2 with an interval that excludes 1 and a wall ratio whose interval holds 1;
//! `--prepare` runs before every run; a failing run stops the bench and keeps the complete
//! rounds; budgets are checked against the median. Run as the invoking user (as root in CI,
//! where the default tracker is ebpf). Every `--json` export is held to the schema of
//! docs/bench-diff-json.md by the strict mirror below (as tests/it/json.rs holds the Run's).

use crate::harness::*;
use crate::json::{conforms, refuses};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::process::{Command, Output, Stdio};
use ste::compare::stats::median;

/// `ste ARGS...` as the invoking user, in the shared directory, stdin closed.
pub fn ste_in_dir(args: &[&str]) -> Output {
    Command::new(&bins().ste)
        .current_dir(&bins().dir)
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("cannot run ste")
}

/// `ste bench ARGS...`.
fn bench(args: &[&str]) -> Output {
    ste_in_dir(&[&["bench"], args].concat())
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The statistics of `figure` of command `i` in a `--json` export.
fn figure<'a>(report: &'a Value, i: usize, figure: &str) -> &'a Value {
    report["commands"][i]["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["figure"] == figure)
        .unwrap_or_else(|| panic!("no {figure} in {report}"))
}

/// The `--json` export at `path`, held to the schema.
fn read_json(path: &std::path::Path) -> Value {
    let bytes = std::fs::read(path).unwrap();
    conforms::<Report>(&bytes);
    serde_json::from_slice(&bytes).unwrap()
}

/// The figures a bench and a diff compare, with their units, in the order
/// docs/bench-diff-json.md lists them (`calls` only with `--syscalls`).
pub const FIGURES: [(&str, &str); 10] = [
    ("wall", "ns"),
    ("user", "ns"),
    ("system", "ns"),
    ("cpu", "ns"),
    ("max-pss", "bytes"),
    ("peak-rss", "bytes"),
    ("group-peak", "bytes"),
    ("processes", "count"),
    ("execs", "count"),
    ("calls", "count"),
];

// The mirror of `ste bench --json` (docs/bench-diff-json.md): strict types that reject a field
// they do not name and, re-serialised, must give the same JSON, so none is missing either.

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Report {
    rounds: usize,
    rounds_asked: usize,
    warmup: usize,
    seed: u64,
    stopped: Option<String>,
    commands: Vec<CommandStats>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct CommandStats {
    command: String,
    figures: Vec<FigureStats>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct FigureStats {
    figure: String,
    unit: String,
    values: Vec<Option<u64>>,
    unmeasured: usize,
    why: Option<String>,
    median: Option<f64>,
    min: Option<f64>,
    max: Option<f64>,
    spread: Option<f64>,
    ratio: Option<RatioStats>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RatioStats {
    median: f64,
    ci95: Option<[f64; 2]>,
    rounds: usize,
}

/// Whether `a` and `b` are both unknown or equal to the last digit or so: serde_json reads a
/// fraction back to within one unit in the last place, not always to the same `f64`.
pub fn close(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => (a - b).abs() <= 1e-12 * a.abs().max(b.abs()),
        (a, b) => a.is_none() && b.is_none(),
    }
}

/// A bench of two tiny commands as `nobody`, who has no cgroup: the export follows the schema,
/// each statistic is what the page says of the values beside it, a figure no run measured is
/// `null` with its reason (never 0), a verdict is printed exactly where the interval excludes
/// 1, and the mirror refuses a field missing, unknown or retyped.
#[test]
fn the_json_follows_its_schema() {
    let json = scratch("schema-bench.json");
    let commands = ["true", "sleep 0.01"];
    let o = command_as(Who::Nobody, &bins().ste)
        .current_dir(&bins().dir)
        .args(["bench", "-n", "3", "-w", "0", "--seed", "11", "--json"])
        .arg(&json)
        .args(commands)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = String::from_utf8_lossy(&o.stdout).into_owned();
    let bytes = std::fs::read(&json).unwrap();
    let r = conforms::<Report>(&bytes);
    assert_eq!((r.rounds, r.rounds_asked, r.warmup, r.seed), (3, 3, 0, 11));
    assert_eq!(r.stopped, None);
    let listed: Vec<&str> = r.commands.iter().map(|c| c.command.as_str()).collect();
    assert_eq!(listed, commands);
    for (i, c) in r.commands.iter().enumerate() {
        let names: Vec<(&str, &str)> = c
            .figures
            .iter()
            .map(|f| (f.figure.as_str(), f.unit.as_str()))
            .collect();
        assert_eq!(names, FIGURES[..9], "calls only with --syscalls");
        for (k, f) in c.figures.iter().enumerate() {
            let what = format!("#{} {}", i + 1, f.figure);
            assert_eq!(f.values.len(), r.rounds, "{what}");
            let unknown = f.values.iter().filter(|v| v.is_none()).count();
            assert_eq!(f.unmeasured, unknown, "{what}");
            assert_eq!(f.why.is_some(), unknown > 0, "{what}");
            let mut known: Vec<f64> = f.values.iter().flatten().map(|&v| v as f64).collect();
            known.sort_by(f64::total_cmp);
            assert_eq!(f.median, median(&known), "{what}");
            assert_eq!(f.min, known.first().copied(), "{what}");
            assert_eq!(f.max, known.last().copied(), "{what}");
            let spread = f
                .median
                .filter(|&m| m != 0.0)
                .map(|m| (f.max.unwrap() - f.min.unwrap()) / m);
            assert!(close(f.spread, spread), "{what}: {:?} {spread:?}", f.spread);
            // The per-round ratios: both measured, the baseline's not 0.
            let base = &r.commands[0].figures[k].values;
            let ratios: Vec<f64> = f
                .values
                .iter()
                .zip(base)
                .filter_map(|(v, b)| Some(((*v)? as f64, (*b)? as f64)))
                .filter(|&(_, b)| b > 0.0)
                .map(|(v, b)| v / b)
                .collect();
            let expected = (i > 0).then(|| median(&ratios)).flatten();
            let ratio = f.ratio.as_ref();
            let got = ratio.map(|r| r.median);
            assert!(close(got, expected), "{what}: {got:?} {expected:?}");
            assert_eq!(ratio.map(|r| r.rounds), expected.map(|_| ratios.len()));
            assert!(
                ratio.is_none_or(|r| r.ci95.is_some() == (r.rounds >= 2)),
                "{what}"
            );
        }
    }
    let figure = |i: usize, name: &str| {
        let c = &r.commands[i];
        c.figures.iter().find(|f| f.figure == name).unwrap()
    };
    // Known answers: one process and one exec each; `sleep 0.01` takes at least its 10 ms.
    for i in 0..2 {
        assert_eq!(figure(i, "processes").values, [Some(1); 3]);
        assert_eq!(figure(i, "execs").values, [Some(1); 3]);
        // nobody has no cgroup: every value unknown, with the reason, and no statistic.
        let g = figure(i, "group-peak");
        assert_eq!(
            (g.values.as_slice(), g.median),
            ([None; 3].as_slice(), None)
        );
        assert!(g.why.as_deref().unwrap().contains("cgroup"), "{:?}", g.why);
    }
    assert!(
        figure(1, "wall")
            .values
            .iter()
            .all(|v| v.unwrap() >= 10_000_000)
    );
    // Both sides of the verdict rule are exercised: the wall time of `sleep 0.01` is above
    // that of `true` in every round; their counts are equal, an interval of [1, 1].
    let wall = figure(1, "wall").ratio.as_ref().unwrap();
    assert!(wall.ci95.unwrap()[0] > 1.0, "{err}");
    let processes = figure(1, "processes").ratio.as_ref().unwrap();
    assert_eq!((processes.median, processes.ci95), (1.0, Some([1.0, 1.0])));
    // The verdict: a line exactly for the ratios whose interval excludes 1.
    for f in &r.commands[1].figures {
        let line = format!("#2 {}: ", f.figure);
        let printed = err
            .lines()
            .any(|l| l.starts_with(&line) && l.contains("× #1 ["));
        let Some([lo, hi]) = f.ratio.as_ref().and_then(|r| r.ci95) else {
            assert!(
                !printed,
                "{}: a verdict without an interval\n{err}",
                f.figure
            );
            continue;
        };
        assert!(lo <= hi, "{}", f.figure);
        assert_eq!(printed, lo > 1.0 || hi < 1.0, "{}\n{err}", f.figure);
    }
    let original: Value = serde_json::from_slice(&bytes).unwrap();
    type Change<'a> = &'a dyn Fn(&mut Value);
    let cases: [(&str, Change); 4] = [
        ("missing", &|v| {
            v["commands"][0]["figures"][0]
                .as_object_mut()
                .unwrap()
                .remove("spread");
        }),
        ("missing", &|v| {
            v.as_object_mut().unwrap().remove("stopped");
        }),
        ("unknown", &|v| {
            v["commands"][1]["figures"][0]["ratio"]["verdict"] = true.into();
        }),
        ("retyped", &|v| v["seed"] = "11".into()),
    ];
    for (what, change) in cases {
        assert!(
            refuses::<Report>(&original, change),
            "a {what} field passed"
        );
    }
}

/// `ste bench -n 5 --seed SEED --json` of two commands that differ only in the memory they
/// touch; the export and the text.
fn memory_bench(seed: &str) -> (Value, String) {
    let f = fixture();
    let json = scratch("bench.json");
    let o = bench(&[
        "-n",
        "5",
        "--seed",
        seed,
        "--json",
        json.to_str().unwrap(),
        &format!("{f} fill-until 64 400"),
        &format!("{f} fill-until 128 400"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // The results on stdout, as hyperfine prints them, with what "spread" means (issue 45).
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(out.starts_with("ste bench: 5 rounds"), "{out}");
    assert!(out.contains("\nspread: (max − min) / median"), "{out}");
    assert!(!stderr(&o).contains("ste bench:"), "{}", stderr(&o));
    (read_json(&json), out)
}

/// The interval of the ratio of `figure` of the second command to the first.
fn interval(r: &Value, figure_name: &str) -> (f64, f64) {
    let ci = &figure(r, 1, figure_name)["ratio"]["ci95"];
    (ci[0].as_f64().unwrap(), ci[1].as_f64().unwrap())
}

#[test]
fn memory_alone_doubles_max_pss_and_leaves_wall_alone() {
    let (r, err) = memory_bench("7");
    assert_eq!(r["rounds"], 5);
    assert_eq!(r["seed"], 7);
    let median = figure(&r, 1, "max-pss")["ratio"]["median"]
        .as_f64()
        .unwrap();
    assert!(
        (median - 2.0).abs() <= 0.06,
        "Max PSS ratio {median}\n{err}"
    );
    let (lo, hi) = interval(&r, "max-pss");
    assert!(lo > 1.0, "the interval [{lo}, {hi}] excludes 1\n{err}");
    assert!(
        err.contains("#2 max-pss: 1.9") || err.contains("#2 max-pss: 2.0"),
        "{err}"
    );
    // The baseline's own figures: 64 MiB touched, one process, five values.
    let base = figure(&r, 0, "max-pss");
    let m = base["median"].as_f64().unwrap() / f64::from(1 << 20);
    assert!((64.0..66.0).contains(&m), "{m} MiB");
    assert_eq!(base["values"].as_array().unwrap().len(), 5);
    assert_eq!(figure(&r, 0, "processes")["median"], 1.0);
    // Wall: the same by construction. A 95 % interval excludes a true ratio of 1 in about one
    // bench in twenty (with 5 rounds, whenever all five ratios fall on one side), so a bench
    // whose interval excludes 1 is repeated once with another seed: a real difference in wall
    // time fails both, chance fails both in about one test run in 400.
    let wall_holds_1 = |r: &Value, err: &str| {
        let (lo, hi) = interval(r, "wall");
        let holds = lo <= 1.0 && 1.0 <= hi;
        assert_eq!(holds, !err.contains("#2 wall:"), "{err}");
        holds
    };
    if !wall_holds_1(&r, &err) {
        let (r2, err2) = memory_bench("8");
        assert!(
            wall_holds_1(&r2, &err2),
            "the wall interval excludes 1 twice:\n{err}\n{err2}"
        );
    }
}

#[test]
fn prepare_runs_before_every_run_warmups_included() {
    let f = fixture();
    let log = scratch("prepare.log");
    let md = scratch("bench.md");
    let csv = scratch("bench.csv");
    let prepare = format!("echo x >> {}", log.display());
    let o = bench(&[
        "-n",
        "3",
        "-w",
        "1",
        "--prepare",
        &prepare,
        "--markdown",
        md.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
        &format!("{f} exit 0"),
        &format!("{f} forks 3"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // (1 warmup + 3 rounds) × 2 commands.
    let lines = std::fs::read_to_string(&log).unwrap().lines().count();
    assert_eq!(lines, 8);
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(md.contains("| #2 | processes | 4 |"), "{md}");
    let csv = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(csv.lines().count(), 1 + 2 * 9, "{csv}");
    assert!(csv.contains(",processes,count,3,0,4,4,4,0,4,"), "{csv}");
}

#[test]
fn a_failing_run_stops_the_bench_and_keeps_the_complete_rounds() {
    let flag = scratch("ran-once");
    let json = scratch("partial.json");
    let once = format!("test -e {0} && exit 3; touch {0}", flag.display());
    let o = bench(&[
        "-n",
        "4",
        "-w",
        "0",
        "--shell",
        "--json",
        json.to_str().unwrap(),
        "true",
        &once,
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("stopped at round 2 of #2") && err.contains("1 complete round before it"),
        "{err}"
    );
    assert_eq!(read_json(&json)["rounds"], 1);
    // A command that cannot start: its status, one clear line.
    let o = bench(&["-n", "1", "ste-no-such-command-17"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(127), "{err}");
    assert!(err.contains("could not start"), "{err}");
    // Bad input before anything runs.
    let o = bench(&["'unclosed"]);
    assert_eq!(o.status.code(), Some(125));
    assert!(stderr(&o).contains("quote is not closed"), "{}", stderr(&o));
}

/// `--json -` puts the export on stdout, alone: the table goes to stderr then (issue 45).
#[test]
fn an_export_on_standard_output_has_it_alone() {
    let o = bench(&["-n", "1", "-w", "0", "--json", "-", "true"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)));
    assert_eq!(v["rounds"], 1);
    assert!(stderr(&o).contains("ste bench: 1 round"), "{}", stderr(&o));
    assert!(!bins().dir.join("-").exists(), "a file named -");
    let o = bench(&["-n", "1", "--json", "-", "--csv", "-", "true"]);
    assert_eq!(o.status.code(), Some(125));
    assert!(stderr(&o).contains("--json and --csv all name standard output"));
}

#[test]
fn budgets_are_checked_against_the_median() {
    let f = fixture();
    let cmd = format!("{f} fill 64");
    let o = bench(&["-n", "2", "-w", "0", "--budget", "max-pss=100MiB", &cmd]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("budget max-pss (median of #1): 6"), "{err}");
    assert!(err.contains("limit 100 MiB: ok"), "{err}");
    let o = bench(&["-n", "2", "-w", "0", "--budget", "max-pss=32MiB", &cmd]);
    assert_eq!(o.status.code(), Some(120), "{}", stderr(&o));
    assert!(stderr(&o).contains("limit 32 MiB: EXCEEDED"));
    // A figure the bench cannot measure is refused before the first run (issue 45).
    let o = bench(&["-n", "1", "-w", "0", "--budget", "calls=10", &cmd]);
    assert_eq!(o.status.code(), Some(125), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("system calls are counted only with --syscalls"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn an_interrupt_stops_the_bench_after_the_current_run_and_keeps_the_rounds() {
    let f = fixture();
    let json = scratch("interrupted.json");
    let child = Command::new(&bins().ste)
        .current_dir(&bins().dir)
        .args([
            "bench",
            "-n",
            "50",
            "-w",
            "0",
            "--json",
            json.to_str().unwrap(),
        ])
        .arg(format!("{f} sleep 200"))
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Past the first run: at least one complete round to keep.
    std::thread::sleep(std::time::Duration::from_millis(800));
    // SAFETY: kill with integer arguments, to our own child that is not reaped yet.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let o = child.wait_with_output().unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted by SIGINT"), "{err}");
    let rounds = read_json(&json)["rounds"].as_u64().unwrap();
    assert!((1..50).contains(&rounds), "{rounds}");
    assert!(
        err.contains(&format!("of the {rounds} complete round")),
        "{err}"
    );
}
