//! The JSON schema (`--json`, `ste report --format json`) as a contract, as ripgrep's
//! tests/json.rs does: the output must parse into these strict mirror types, which reject any
//! field they do not name, and serialise back to exactly the same JSON, so no field is missing
//! either. docs/json-schema.md documents the same fields; change the three together.

use crate::harness::*;
use crate::matrix;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Run {
    schema_version: u32,
    generator: String,
    command: Vec<Arg>,
    tracker: String,
    notes: Vec<String>,
    exit: Exit,
    totals: Totals,
    processes: Vec<Process>,
    samples: Vec<Sample>,
    sampler: SamplerInfo,
    overhead: Overhead,
    sources: BTreeMap<String, Source>,
}

#[derive(Deserialize, Serialize)]
#[serde(untagged)]
enum Arg {
    Text(String),
    Bytes(Bytes),
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Bytes {
    bytes: Vec<u8>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Exit {
    code: Option<i32>,
    signal: Option<i32>,
    core_dumped: bool,
    launch_error: Option<LaunchError>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct LaunchError {
    kind: LaunchErrorKind,
    message: String,
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
enum LaunchErrorKind {
    NotFound,
    NotExecutable,
    Other,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Totals {
    wall_ns: u64,
    user_ns: Option<u64>,
    sys_ns: Option<u64>,
    processes: u64,
    threads: u64,
    execs: u64,
    max_pss_bytes: Option<u64>,
    max_pss_t_ns: Option<u64>,
    peak_rss_bytes: Option<u64>,
    peak_rss_pid: Option<i32>,
    still_running: u64,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Process {
    pid: i32,
    ppid: Option<i32>,
    start_ns: u64,
    end_ns: Option<u64>,
    exit_code: Option<i32>,
    signal: Option<i32>,
    threads: u32,
    peak_rss_bytes: Option<u64>,
    io: Option<Io>,
    execs: Vec<Exec>,
    thread_lifetimes: Vec<ThreadLifetime>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Io {
    rchar_bytes: u64,
    wchar_bytes: u64,
    syscr: u64,
    syscw: u64,
    read_bytes: u64,
    write_bytes: u64,
    cancelled_write_bytes: u64,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Exec {
    t_ns: u64,
    argv: Option<Vec<Arg>>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct ThreadLifetime {
    tid: i32,
    start_ns: u64,
    end_ns: Option<u64>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Sample {
    t_ns: u64,
    pss_bytes: u64,
    rss_bytes: u64,
    processes: u32,
    unreadable: u32,
    per_process: Option<Vec<ProcessSample>>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct ProcessSample {
    pid: i32,
    pss_bytes: u64,
    cpu_ns: Option<u64>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct SamplerInfo {
    mode: String,
    budget: Option<f64>,
    burst_ns: Option<u64>,
    interval_ns: Option<u64>,
    rounds: u64,
    effective_interval_ns: Option<u64>,
    max_gap_ns: Option<u64>,
    cpu_ns: u64,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Overhead {
    cpu_ns: Option<u64>,
    max_rss_bytes: Option<u64>,
    lost_events: Option<u64>,
    lost: Lost,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Lost {
    overruns: u64,
    events_at_most: u64,
    argv_unread: u64,
    found_by_resync: u64,
    exits_missed: u64,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Source {
    from: String,
    exact: bool,
    note: Option<String>,
}

/// Parses `json` into the mirror and checks it serialises back unchanged.
fn conforms(json: &[u8]) -> Run {
    let original: serde_json::Value = serde_json::from_slice(json).expect("valid JSON");
    let run: Run = serde_json::from_slice(json)
        .unwrap_or_else(|e| panic!("the JSON does not follow the schema: {e}"));
    assert_eq!(
        serde_json::to_value(&run).unwrap(),
        original,
        "a field of the schema is missing from the JSON (or holds another type)"
    );
    run
}

matrix!(the_json_follows_the_schema, |mode: Mode| {
    let json = scratch("schema.json");
    let script = format!(
        "{f} threads 2 4 100; /bin/true; {f} fill 8 100",
        f = fixture()
    );
    let o = command_as(mode.who, &bins().ste)
        .current_dir(&bins().dir)
        .args([
            "--tracker",
            mode.tracker.name(),
            "--interval",
            "5ms",
            "--json",
        ])
        .arg(&json)
        .args(["--", "/bin/sh", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let run = conforms(&std::fs::read(&json).unwrap());
    assert_eq!(run.totals.processes, 4);
    assert!(
        run.processes.iter().any(|p| p.thread_lifetimes.len() == 2),
        "the threads' lifetimes are listed"
    );
    assert!(
        run.samples
            .iter()
            .any(|s| s.per_process.as_ref().is_some_and(|p| !p.is_empty())),
        "samples list their processes"
    );
});

#[test]
fn a_launch_failure_follows_the_schema() {
    let json = scratch("failed.json");
    let o = std::process::Command::new(&bins().ste)
        .arg("--json")
        .arg(&json)
        .arg("ste-no-such-command-xyz")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(127));
    let run = conforms(&std::fs::read(&json).unwrap());
    assert!(matches!(
        run.exit.launch_error,
        Some(LaunchError {
            kind: LaunchErrorKind::NotFound,
            ..
        })
    ));
}
