//! A finished Run read back from a file: a record (`ste record`) replayed through the
//! recorder, or a Run written by `--json`, for `ste report`, `ste diff` and `ste bench`.
//!
//! Both may be hostile files: a record is read within `record::Limits`, a `--json` Run within
//! [`MAX_RUN_JSON_BYTES`] and the record's limit on times. Errors quote the file escaped.
//! Owns nothing of rendering.

use crate::ledger::record;
use crate::ledger::recorder::Recorder;
use crate::model::{Escaped, Run};
use crate::report::style::Style;
use anyhow::{Context, Result, bail};
use std::fs::File;
use std::io::{BufReader, Read};
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

/// The Run in `path` and the text layout it was printed with.
pub fn load(path: &Path) -> Result<(Run, Style)> {
    let mut start = [0u8; 2];
    let n = File::open(path)
        .and_then(|mut f| f.read(&mut start))
        .with_context(|| format!("cannot read {}", path.display()))?;
    if !record::looks_like_a_record(&start[..n]) && start[..n].first() == Some(&b'{') {
        return Ok((load_json(path)?, JSON_STYLE));
    }
    // The messages quote the file (a version's generator, a serde error's value).
    let loaded =
        record::load(path).map_err(|e| anyhow::anyhow!("{}", Escaped::str(&e.to_string())))?;
    for w in loaded.warnings() {
        eprintln!("ste: {}: {}", path.display(), Escaped::str(&w));
    }
    let (header, events) = loaded.events_with_notes();
    let run = Recorder::replay(&events);
    // Freeing 400,000 events takes 0.1 s: let another thread do it while the report renders.
    std::thread::spawn(move || drop(events));
    Ok((run, header.text_style))
}

/// A Run written by `--json`, within [`MAX_RUN_JSON_BYTES`] and with its times within
/// `record::MAX_T_NS`.
fn load_json(path: &Path) -> Result<Run> {
    let file = File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let size = file
        .metadata()
        .with_context(|| format!("cannot read {}", path.display()))?
        .len();
    if size > MAX_RUN_JSON_BYTES {
        bail!(
            "{} is refused: it holds {size} bytes (the limit for a Run written by `ste --json` is {MAX_RUN_JSON_BYTES})",
            path.display()
        );
    }
    read_json(BufReader::new(file)).with_context(|| {
        format!(
            "{} is JSON but not a run written by `ste --json`",
            path.display()
        )
    })
}

/// A Run written by `--json`, read from `input` within [`MAX_RUN_JSON_BYTES`] and
/// `record::MAX_T_NS`; the error quotes the input escaped.
pub fn read_json(input: impl Read) -> Result<Run> {
    let run: Run = serde_json::from_reader(input.take(MAX_RUN_JSON_BYTES))
        .map_err(|e| anyhow::anyhow!("{}", Escaped::str(&e.to_string())))?;
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
