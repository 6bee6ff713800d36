//! `ste report`: reads a record written by `ste record` (or a Run written by `--json`),
//! replays the record's events through the recorder, and renders the Run in one format.
//!
//! Owns the choice of input and output, the text layout (the recorded one unless overridden)
//! and telling the user what an incomplete record lacks. It formats nothing itself: `report`
//! does, from the same Run the live run had, so the text is the live run's, byte for byte.
//!
//! Both inputs may be hostile files: a record is read within `record::Limits`, a `--json` Run
//! within [`MAX_RUN_JSON_BYTES`] and the same limit on times (`--width` is bounded by its
//! type, a recorded width by the record's limits). What the file says is escaped before it
//! reaches the terminal.

use crate::cli::options::ReportOptions;
use crate::ledger::record;
use crate::ledger::recorder::Recorder;
use crate::model::{Escaped, Run};
use crate::report::{self, style::Style};
use anyhow::{Context, Result, bail};
use std::fs::File;
use std::io::{BufReader, BufWriter, IsTerminal, Read, Write};
use std::path::Path;

/// The layout of a Run read from `--json`, which keeps none: the live run's default.
const JSON_STYLE: Style = Style {
    width: 80,
    color: false,
};

/// The largest `--json` Run read: the Run of 100,000 processes is about 100 MB.
pub const MAX_RUN_JSON_BYTES: u64 = 4 << 30;

pub fn run(opts: &ReportOptions) -> Result<i32> {
    let (run, recorded) = load(&opts.input)?;
    let style = Style {
        width: opts.width.unwrap_or(recorded.width),
        color: opts.color.unwrap_or(recorded.color),
    };
    let result = match &opts.output {
        Some(path) => {
            let file = crate::output::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?;
            let mut w = BufWriter::new(file);
            report::render_with(&run, opts.format, style, opts.text, &mut w)
                .and_then(|()| w.flush())
                .with_context(|| format!("writing {}", path.display()))
        }
        None => {
            let stdout = std::io::stdout();
            if opts.format.is_for_files() && stdout.is_terminal() {
                bail!(
                    "not writing {} to a terminal: give a file with -o FILE, or redirect stdout",
                    opts.format.name()
                );
            }
            let mut w = BufWriter::new(stdout.lock());
            match report::render_with(&run, opts.format, style, opts.text, &mut w)
                .and_then(|()| w.flush())
            {
                // `ste report run.ste | head`: the reader has seen enough.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                other => other.context("writing to stdout"),
            }
        }
    };
    // ste exits now: freeing a Run of 100,000 processes piece by piece would take 0.1 s.
    std::mem::forget(run);
    result.map(|()| 0)
}

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
