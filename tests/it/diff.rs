//! `ste diff` (issue 17): two records of a fixture tree show the program that appeared and the
//! one whose CPU doubled, budgets on the change in percent, and a run of another schema
//! version is refused in one line.

use crate::bench::ste_in_dir;
use crate::harness::*;
use serde_json::Value;
use std::path::Path;

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
    let d: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
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
