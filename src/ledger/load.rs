//! A finished Run read back from a file: a record (`ste record`) replayed through the
//! recorder, or a Run written by `--json`, for `ste report`, `ste diff` and `ste bench`.
//!
//! Both may be hostile files: a record is read within `record::Limits`, a `--json` Run within
//! [`MAX_RUN_JSON_BYTES`] and the record's limit on times. The file comes opened by the caller
//! (`output::open_input`: under sudo, with the invoking user's rights), and an error never
//! quotes what the file holds (`record::describe`): under sudo the file may be one its user
//! cannot read. Owns nothing of rendering.

use crate::ledger::record;
use crate::ledger::recorder::Recorder;
use crate::model::{Escaped, Run, SCHEMA_VERSION, TOO_MANY_ARGS, bounded_args};
use crate::report::style::Style;
use anyhow::{Context, Result, bail};
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// The layout of a Run read from `--json`, which keeps none: the live run's default into a
/// file or a pipe (80 columns, rows whole); `ste report --width N` cuts them.
const JSON_STYLE: Style = Style {
    width: 80,
    color: false,
    fit: false,
};

/// The largest `--json` Run read: the Run of 100,000 processes is about 100 MB.
pub const MAX_RUN_JSON_BYTES: u64 = 4 << 30;

/// The Run in `file` (opened at `path`) and the text layout it was printed with.
pub fn load(path: &Path, file: File) -> Result<(Run, Style)> {
    let size = file.metadata().map(|m| m.len()).ok();
    let mut input = BufReader::with_capacity(1 << 16, file);
    let start = input
        .fill_buf()
        .with_context(|| format!("cannot read {}", path.display()))?;
    if !record::looks_like_a_record(start) && start.first() == Some(&b'{') {
        return Ok((load_json(path, size, input)?, JSON_STYLE));
    }
    // The messages name the path (a version's generator, checked as one), escaped.
    let loaded = record::load_from(path, input)
        .map_err(|e| anyhow::anyhow!("{}", Escaped::str(&e.to_string())))?;
    for w in loaded.warnings() {
        crate::output::say(&format!("ste: {}: {}", path.display(), Escaped::str(&w)));
    }
    let (header, events) = loaded.events_with_notes();
    let run = Recorder::replay(&events);
    // Freeing 400,000 events takes 0.1 s: let another thread do it while the report renders.
    std::thread::spawn(move || drop(events));
    Ok((run, header.text_style))
}

/// A Run written by `--json` (`size` bytes, when known), within [`MAX_RUN_JSON_BYTES`] and
/// with its times within `record::MAX_T_NS`.
fn load_json(path: &Path, size: Option<u64>, input: impl Read) -> Result<Run> {
    if let Some(size) = size.filter(|&s| s > MAX_RUN_JSON_BYTES) {
        bail!(
            "{} is refused: it holds {size} bytes (the limit for a Run written by `ste --json` is {MAX_RUN_JSON_BYTES})",
            path.display()
        );
    }
    read_json(input).with_context(|| {
        format!(
            "cannot read {} as a Run written by `ste --json`",
            path.display()
        )
    })
}

/// A Run written by `--json`, read from `input` within [`MAX_RUN_JSON_BYTES`] and
/// `record::MAX_T_NS`; the error says where and what is wrong, not what the input holds. A Run
/// of another `schema_version` is refused, by name: its fields may mean other things, and a
/// report of it would say what this ste means by them (records are versioned the same way).
pub fn read_json(input: impl Read) -> Result<Run> {
    #[derive(serde::Deserialize)]
    struct Versioned {
        schema_version: u64,
    }
    let mut bytes = Vec::new();
    input
        .take(MAX_RUN_JSON_BYTES)
        .read_to_end(&mut bytes)
        .context("cannot read it")?;
    let describe = |e: serde_json::Error| {
        anyhow::anyhow!(
            "{}, at line {}, column {}",
            record::describe(&e),
            e.line(),
            e.column()
        )
    };
    let other_version = |found: u64| {
        anyhow::anyhow!(
            "it holds a Run of schema version {found}; this ste ({}) reads version {SCHEMA_VERSION}: render it with the ste that wrote it",
            env!("CARGO_PKG_VERSION")
        )
    };
    // What a few bytes can multiply, bounded as a record's are (`record::Limits`).
    let limits = record::Limits::DEFAULT;
    let (run, _) = bounded_args(limits.args, || serde_json::from_slice::<Run>(&bytes));
    let run = match run {
        Ok(run) if run.schema_version != SCHEMA_VERSION => {
            return Err(other_version(u64::from(run.schema_version)));
        }
        Ok(run) => run,
        Err(e) if e.to_string().starts_with(TOO_MANY_ARGS) => bail!(
            "it is refused: it holds more than {} arguments (the limit is {} arguments)",
            limits.args,
            limits.args
        ),
        Err(e) => {
            // A Run of another version may not parse as this one's: named as such.
            return Err(match serde_json::from_slice::<Versioned>(&bytes) {
                Ok(Versioned { schema_version }) if schema_version != u64::from(SCHEMA_VERSION) => {
                    other_version(schema_version)
                }
                _ => describe(e),
            });
        }
    };
    if run.processes.len() as u64 > limits.forks {
        bail!(
            "it is refused: it holds {} processes (the limit is {} processes)",
            run.processes.len(),
            limits.forks
        );
    }
    let most = run
        .processes
        .iter()
        .flat_map(|p| &p.execs)
        .filter_map(|x| x.argv.as_ref().map(Vec::len))
        .chain([run.command.len()])
        .max()
        .unwrap_or(0) as u64;
    if most > limits.exec_args {
        bail!(
            "it is refused: an exec of {most} arguments (the limit is {} arguments in an exec)",
            limits.exec_args
        );
    }
    if let Some(t) = latest_time(&run).filter(|&t| t > record::MAX_T_NS) {
        bail!(
            "it states a time of {t} ns, after a century of run (the limit is {} ns)",
            record::MAX_T_NS
        );
    }
    Ok(run)
}

/// The latest of the times a Run states (its wall time, processes, execs and samples).
fn latest_time(run: &Run) -> Option<u64> {
    let processes = run.processes.iter().flat_map(|p| {
        [p.start_ns, p.end_ns.unwrap_or(0)]
            .into_iter()
            .chain(p.execs.iter().map(|e| e.t_ns))
    });
    [run.totals.wall_ns, run.totals.max_pss_t_ns.unwrap_or(0)]
        .into_iter()
        .chain(processes)
        .chain(run.samples.iter().map(|s| s.t_ns))
        .max()
}
