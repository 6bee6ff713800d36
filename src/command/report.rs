//! `ste report`: reads a record written by `ste record` (or a Run written by `--json`),
//! replays the record's events through the recorder, and renders the Run in one format.
//!
//! Owns the choice of input and output, the text layout (the recorded one unless overridden)
//! and telling the user what an incomplete record lacks. It formats nothing itself: `report`
//! does, from the same Run the live run had, so the text is the live run's, byte for byte.
//!
//! Both inputs may be hostile files: `ledger::load` reads them within their limits (`--width`
//! is bounded by its type, a recorded width by the record's limits). What the file says is
//! escaped before it reaches the terminal. Under sudo the input is opened with the invoking
//! user's rights (`output::open_input`), as their shell would open it.

use crate::cli::options::ReportOptions;
use crate::ledger::load::load;
use crate::report::{self, style::Style};
use anyhow::{Context, Result, bail};
use std::io::{BufWriter, IsTerminal, Write};

pub fn run(opts: &ReportOptions) -> Result<i32> {
    let file = crate::output::open_input(&opts.input)
        .with_context(|| format!("cannot read {}", opts.input.display()))?;
    let (run, recorded) = load(&opts.input, file)?;
    let style = Style {
        width: opts.width.unwrap_or(recorded.width),
        color: opts.color.unwrap_or(recorded.color),
        // `--width` cuts rows to it, as a live run's does.
        fit: opts.width.is_some() || recorded.fit,
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
