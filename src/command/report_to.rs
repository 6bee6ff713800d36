//! Where a live run's report goes: stderr, or the `--output` file emptied at the start; its
//! live `EXEC:` lines in the order of the execs (held behind a pending one, `live`), then the
//! report's end. A write that fails is kept and said at the end: the run goes on.
//!
//! Owns the destination only: renders nothing itself (`report::text` does) and decides
//! nothing about the run.

use crate::cli::options::RunOptions;
use crate::command::live::LiveExecs;
use crate::ledger::recorder::Applied;
use crate::model::Run;
use crate::report::text;
use anyhow::{Context, Result};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The report and its live `EXEC:` lines, in the order of the execs.
pub(super) struct Output {
    to: To,
    execs: LiveExecs,
}

/// Where the report goes: stderr or a file, with the first error writing there (the run goes
/// on; the end says it).
enum To {
    Stderr(Option<std::io::Error>),
    File(BufWriter<File>, PathBuf, Option<std::io::Error>),
}

impl Output {
    /// The report's destination: stderr, or `file` (opened at `path`), emptied now.
    pub(super) fn begin(
        file: Option<crate::output::Opened>,
        path: Option<&Path>,
    ) -> Result<Output> {
        let to = match (file, path) {
            (Some(f), Some(p)) => To::File(
                BufWriter::new(
                    f.into_file()
                        .with_context(|| format!("cannot empty --output file {}", p.display()))?,
                ),
                p.to_path_buf(),
                None,
            ),
            _ => To::Stderr(None),
        };
        Ok(Output {
            to,
            execs: LiveExecs::default(),
        })
    }

    /// What the ledger applied, for the live view: an exec's line goes out once it and every
    /// exec before it are known (see `command::live`).
    pub(super) fn exec(&mut self, applied: Applied, style: crate::report::style::Style) {
        match applied {
            Applied::Exec(p, x) => self.execs.line(p.pid, text::exec_line(p, x, style)),
            Applied::ExecPending(p) => self.execs.pending(p.pid, Instant::now()),
            Applied::Nothing => return,
        }
        self.execs_due();
    }

    /// The live lines due: those no longer held behind a pending exec.
    pub(super) fn execs_due(&mut self) {
        for line in self.execs.due(Instant::now) {
            self.live_line(&line);
        }
    }

    /// The live lines still held, at the end of the run.
    pub(super) fn execs_rest(&mut self) {
        for line in self.execs.rest() {
            self.live_line(&line);
        }
    }

    fn live_line(&mut self, line: &str) {
        match &mut self.to {
            To::Stderr(err) => {
                let mut buf = String::with_capacity(line.len() + 1);
                buf.push_str(line);
                buf.push('\n');
                if let Err(e) = std::io::stderr().write_all(buf.as_bytes()) {
                    err.get_or_insert(e);
                }
            }
            To::File(w, _, err) => {
                if err.is_none()
                    && let Err(e) = writeln!(w, "{line}")
                {
                    *err = Some(e);
                }
            }
        }
    }

    /// The report's end, then `after` (a line each).
    pub(super) fn summary(&mut self, run: &Run, opts: &RunOptions, after: &[&str]) -> Result<()> {
        if let (To::File(..), Some(line)) = (&self.to, text::launch_failure_line(run)) {
            // The error is for the user at the terminal, wherever the report goes.
            crate::output::say(&line);
        }
        let mut buf = Vec::new();
        text::render_end(run, &mut buf, opts.style, opts.text).expect("writing to memory");
        for line in after {
            buf.extend_from_slice(line.as_bytes());
            buf.push(b'\n');
        }
        match &mut self.to {
            To::Stderr(err) => {
                let res = match err.take() {
                    Some(e) => Err(e),
                    None => std::io::stderr().write_all(&buf),
                };
                res.with_context(|| {
                    format!(
                        "writing the report to stderr (the command exited with status {})",
                        run.exit.ste_status()
                    )
                })
            }
            To::File(w, path, err) => {
                let res = match err.take() {
                    Some(e) => Err(e),
                    None => w.write_all(&buf).and_then(|()| w.flush()),
                };
                res.with_context(|| {
                    format!(
                        "writing --output {} (the command exited with status {})",
                        path.display(),
                        run.exit.ste_status()
                    )
                })
            }
        }
    }
}
