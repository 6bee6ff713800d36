//! `ste report`: reads a record written by `ste record` (or a Run written by `--json`),
//! replays the record's events through the recorder, and renders the Run in one format.
//!
//! Owns the choice of input and output, the text layout (the recorded one unless overridden)
//! and telling the user what an incomplete record lacks. It formats nothing itself: `report`
//! does, from the same Run the live run had, so the text is the live run's, byte for byte.

use crate::model::Run;
use crate::options::ReportOptions;
use crate::record;
use crate::recorder::Recorder;
use crate::report::{self, text::Style};
use anyhow::{Context, Result, bail};
use std::fs::File;
use std::io::{BufReader, BufWriter, IsTerminal, Read, Write};
use std::path::Path;

/// The layout of a Run read from `--json`, which keeps none: the live run's default.
const JSON_STYLE: Style = Style {
    width: 80,
    color: false,
};

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
            report::render(&run, opts.format, style, &mut w)
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
            match report::render(&run, opts.format, style, &mut w).and_then(|()| w.flush()) {
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
        let file = File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
        let run: Run = serde_json::from_reader(BufReader::new(file)).with_context(|| {
            format!(
                "{} is JSON but not a run written by `ste --json`",
                path.display()
            )
        })?;
        return Ok((run, JSON_STYLE));
    }
    let loaded = record::load(path)?;
    for w in loaded.warnings() {
        eprintln!("ste: {}: {w}", path.display());
    }
    let (header, events) = loaded.events_with_notes();
    let run = Recorder::replay(&events);
    // Freeing 400,000 events takes 0.1 s: let another thread do it while the report renders.
    std::thread::spawn(move || drop(events));
    Ok((run, header.text_style))
}
