//! The report files a run writes when it is over (`--json`, `--html`, `--perfetto`).
//!
//! Owns opening them before the command starts (a bad path must not cost a run) and writing
//! them from the finished Run, with errors that name the flag and the command's status. The
//! formats themselves are `report`'s.

use crate::model::Run;
use crate::options::RunOptions;
use crate::report::{self, Format};
use anyhow::{Context, Result};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

pub struct Exports {
    files: Vec<(Format, &'static str, File, PathBuf)>,
}

impl Exports {
    /// Creates every requested file now.
    pub fn open(opts: &RunOptions) -> Result<Exports> {
        let mut files = Vec::new();
        for (format, flag, path) in [
            (Format::Json, "--json", &opts.json),
            (Format::Html, "--html", &opts.html),
            (Format::Perfetto, "--perfetto", &opts.perfetto),
        ] {
            if let Some(p) = path {
                let f = File::create(p)
                    .with_context(|| format!("cannot create {flag} file {}", p.display()))?;
                files.push((format, flag, f, p.clone()));
            }
        }
        Ok(Exports { files })
    }

    /// Renders the run into each file.
    pub fn write(self, run: &Run, style: report::text::Style) -> Result<()> {
        for (format, flag, file, path) in self.files {
            let mut w = BufWriter::new(file);
            report::render(run, format, style, &mut w)
                .and_then(|()| w.flush())
                .with_context(|| {
                    format!(
                        "writing {flag} {} (the command exited with status {})",
                        path.display(),
                        run.exit.ste_status()
                    )
                })?;
        }
        Ok(())
    }
}
