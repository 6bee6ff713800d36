//! `ste diff` (issue 17): two records of a fixture tree show the program that appeared and the
//! one whose CPU doubled, budgets on the change in percent, and a run of another schema
//! version is refused in one line. Every `--json` export is held to the schema of
//! docs/bench-diff-json.md by the strict mirror below (as tests/it/json.rs holds the Run's).

use crate::bench::{FIGURES, close, ste_in_dir};
use crate::harness::*;
use crate::json::{Program, conforms, refuses};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;

// The mirror of `ste diff --json` (docs/bench-diff-json.md): strict types that reject a field
// they do not name and, re-serialised, must give the same JSON, so none is missing either.
// A program's sides are the Run's own `Program` (tests/it/json.rs).

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Diff {
    a: String,
    b: String,
    a_exit_status: i32,
    b_exit_status: i32,
    totals: Vec<TotalChange>,
    programs: Vec<ProgramChange>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct TotalChange {
    figure: String,
    a: Option<u64>,
    b: Option<u64>,
    change: Option<i64>,
    change_percent: Option<f64>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct ProgramChange {
    program: String,
    status: Status,
    a: Option<Program>,
    b: Option<Program>,
    cpu_change_ns: Option<i64>,
    largest_peak_change_bytes: Option<i64>,
}

#[derive(Deserialize, Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum Status {
    Both,
    Appeared,
    Vanished,
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn a_program_appeared_and_one_doubled_its_cpu() {
    let f = fixture();
    let a = scratch("a.ste");
    let b = scratch("b.json");
    let o = ste_in_dir(&[
        "record",
        "-o",
        s(&a),
        "-q",
        "--",
        "sh",
        "-c",
        &format!("{f} spin 150"),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let script = format!("{f} spin 300; sleep 0.05");
    let o = ste_in_dir(&["--json", s(&b), "-q", "--", "sh", "-c", &script]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    let json = scratch("diff.json");
    let md = scratch("diff.md");
    let o = ste_in_dir(&[
        "diff",
        s(&a),
        s(&b),
        "--json",
        s(&json),
        "--markdown",
        s(&md),
    ]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let bytes = std::fs::read(&json).unwrap();
    conforms::<Diff>(&bytes);
    let d: Value = serde_json::from_slice(&bytes).unwrap();
    let programs = d["programs"].as_array().unwrap();
    let program = |name: &str| {
        programs
            .iter()
            .find(|p| p["program"] == name)
            .unwrap_or_else(|| panic!("no {name} in\n{text}"))
    };
    assert_eq!(program("sleep")["status"], "appeared", "{text}");
    let fixture = program("fixture");
    assert_eq!(fixture["status"], "both");
    let cpu = |side: &str| fixture[side]["cpu_ns"].as_f64().unwrap();
    let ratio = cpu("b") / cpu("a");
    assert!((1.7..2.3).contains(&ratio), "CPU ×{ratio}\n{text}");
    // Sorted by the size of the change: the doubled CPU first.
    assert_eq!(programs[0]["program"], "fixture", "{text}");
    let execs = d["totals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["figure"] == "execs")
        .unwrap();
    assert_eq!(execs["change"], 1, "{text}");
    assert!(text.contains("appeared"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("sleep") && l.ends_with("appeared")),
        "{text}"
    );

    // Budgets on the change in percent.
    let o = ste_in_dir(&["diff", s(&a), s(&b), "--budget", "cpu=+300%"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = ste_in_dir(&["diff", s(&a), s(&b), "--budget", "cpu=+20%"]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(120), "{err}");
    assert!(
        err.contains("budget cpu (change from A to B): +") && err.contains("EXCEEDED"),
        "{err}"
    );
    let o = ste_in_dir(&["diff", s(&a), s(&b), "--budget", "cpu=2s"]);
    assert_eq!(o.status.code(), Some(125));
}

#[test]
fn a_run_of_another_schema_version_is_refused() {
    let good = scratch("good.json");
    let o = ste_in_dir(&["--json", s(&good), "-q", "--", "true"]);
    assert_eq!(o.status.code(), Some(0));
    let mut run: Value = serde_json::from_slice(&std::fs::read(&good).unwrap()).unwrap();
    run["schema_version"] = 99.into();
    let other = scratch("other.json");
    std::fs::write(&other, serde_json::to_vec(&run).unwrap()).unwrap();
    let o = ste_in_dir(&["diff", s(&good), s(&other)]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(125), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("schema version 99"), "{err}");
    assert!(o.stdout.is_empty());
}

/// Two failed builds compare how far each got: the diff says so, in its text and its JSON
/// (issue 45).
#[test]
fn a_diff_of_failed_runs_says_they_failed() {
    let (a, b) = (scratch("failed-a.json"), scratch("failed-b.json"));
    for (json, script) in [(&a, "/bin/true; exit 2"), (&b, "sleep 0.01; exit 3")] {
        let o = ste_in_dir(&["--json", s(json), "-q", "--", "sh", "-c", script]);
        assert!(matches!(o.status.code(), Some(2 | 3)), "{o:?}");
    }
    let json = scratch("failed-diff.json");
    let o = ste_in_dir(&["diff", s(&a), s(&b), "--json", s(&json)]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(
        text.starts_with(&format!(
            "A: {} (failed: exit status 2)\nB: {} (failed: exit status 3)\nBoth runs failed: ",
            s(&a),
            s(&b)
        )),
        "{text}"
    );
    let d = conforms::<Diff>(&std::fs::read(&json).unwrap());
    assert_eq!((d.a_exit_status, d.b_exit_status), (2, 3));
    let ok = scratch("ok.json");
    run_json(&ok, &[], ":");
    let o = ste_in_dir(&["diff", s(&ok), s(&b)]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(text.contains("\nRun B failed: "), "{text}");
    // `--json -`: the JSON alone on stdout, the table on stderr.
    let o = ste_in_dir(&["diff", s(&ok), s(&b), "--json", "-"]);
    assert_eq!(o.status.code(), Some(0));
    let d = conforms::<Diff>(&o.stdout);
    assert_eq!(d.b_exit_status, 3);
    assert!(String::from_utf8_lossy(&o.stderr).contains("\nRun B failed: "));
}

/// `ste --json` of `script` with `extra` options, and the Run it wrote.
fn run_json(json: &Path, extra: &[&str], script: &str) -> ste::model::Run {
    let args = [
        &["--json", s(json), "-q"],
        extra,
        &["--", "sh", "-c", script],
    ]
    .concat();
    let o = ste_in_dir(&args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap()
}

/// Two tiny runs, A counting system calls and running `/bin/true`, B running `sleep`: the
/// export follows the schema; the totals are the runs' own figures with their change, and a
/// figure B did not measure (`calls`) is `null` with no change, never 0; a program is in both,
/// one vanished, one appeared, each change is B's figure less A's (an absent program's being
/// 0), the largest first; and the mirror refuses a field missing, unknown or retyped.
#[test]
fn the_json_follows_its_schema() {
    let (a, b) = (scratch("schema-a.json"), scratch("schema-b.json"));
    let ra = run_json(&a, &["--syscalls=count", "--allow-ptrace"], "/bin/true; :");
    let rb = run_json(&b, &[], "sleep 0.01; :");
    let json = scratch("schema-diff.json");
    let o = ste_in_dir(&["diff", s(&a), s(&b), "--json", s(&json)]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "{err}");
    let bytes = std::fs::read(&json).unwrap();
    let d = conforms::<Diff>(&bytes);
    assert_eq!((d.a.as_str(), d.b.as_str()), (s(&a), s(&b)));
    assert_eq!((d.a_exit_status, d.b_exit_status), (0, 0));
    assert!(!text.contains("failed"), "{text}");

    // Every figure, `calls` too since A counted them.
    let names: Vec<&str> = d.totals.iter().map(|t| t.figure.as_str()).collect();
    let documented: Vec<&str> = FIGURES.iter().map(|f| f.0).collect();
    assert_eq!(names, documented);
    let total = |name: &str| d.totals.iter().find(|t| t.figure == name).unwrap();
    for t in &d.totals {
        let change = t.a.zip(t.b).map(|(a, b)| b as i64 - a as i64);
        assert_eq!(t.change, change, "{}", t.figure);
        let percent =
            t.a.zip(t.b)
                .filter(|&(a, _)| a > 0)
                .map(|(a, b)| (b as f64 - a as f64) / a as f64 * 100.0);
        assert!(close(t.change_percent, percent), "{}", t.figure);
    }
    let sides = |name: &str| (total(name).a, total(name).b);
    assert_eq!(
        sides("wall"),
        (Some(ra.totals.wall_ns), Some(rb.totals.wall_ns))
    );
    assert_eq!(sides("processes"), (Some(2), Some(2)), "{text}");
    assert_eq!(
        sides("execs"),
        (Some(ra.totals.execs), Some(rb.totals.execs))
    );
    let (calls_a, calls_b) = sides("calls");
    assert!(
        calls_a.is_some_and(|c| c > 0) && calls_b.is_none(),
        "{text}"
    );

    let status = |name: &str| {
        let p = d.programs.iter().find(|p| p.program == name);
        p.unwrap_or_else(|| panic!("no {name} in\n{text}")).status
    };
    assert_eq!(d.programs.len(), 3, "{text}");
    assert_eq!(status("sh"), Status::Both);
    assert_eq!(status("true"), Status::Vanished);
    assert_eq!(status("sleep"), Status::Appeared);
    type Get = fn(&Program) -> Option<u64>;
    let change = |p: &ProgramChange, get: Get| {
        let side = |s: &Option<Program>| s.as_ref().map_or(Some(0), get);
        Some(side(&p.b)? as i64 - side(&p.a)? as i64)
    };
    for p in &d.programs {
        let expected = match (&p.a, &p.b) {
            (Some(_), Some(_)) => Status::Both,
            (None, Some(_)) => Status::Appeared,
            (Some(_), None) => Status::Vanished,
            (None, None) => panic!("{}: on neither run", p.program),
        };
        assert_eq!(p.status, expected, "{}", p.program);
        assert_eq!(p.cpu_change_ns, change(p, |p| p.cpu_ns), "{}", p.program);
        let peak = change(p, |p| p.largest_peak_bytes);
        assert_eq!(p.largest_peak_change_bytes, peak, "{}", p.program);
    }
    // The largest change first: CPU, then the peak, then the name.
    let size = |x: Option<i64>| x.map_or(0, i64::unsigned_abs);
    let key = |p: &ProgramChange| {
        let big = |x| std::cmp::Reverse(size(x));
        (
            big(p.cpu_change_ns),
            big(p.largest_peak_change_bytes),
            p.program.clone(),
        )
    };
    assert!(d.programs.is_sorted_by_key(key), "{text}");

    let original: Value = serde_json::from_slice(&bytes).unwrap();
    type Change<'a> = &'a dyn Fn(&mut Value);
    let cases: [(&str, Change); 4] = [
        ("missing", &|v| {
            v["totals"][0]
                .as_object_mut()
                .unwrap()
                .remove("change_percent");
        }),
        ("missing", &|v| {
            v["programs"][0].as_object_mut().unwrap().remove("status");
        }),
        ("unknown", &|v| v["programs"][0]["verdict"] = "worse".into()),
        ("retyped", &|v| v["totals"][0]["change"] = "+1".into()),
    ];
    for (what, change) in cases {
        assert!(refuses::<Diff>(&original, change), "a {what} field passed");
    }
}
