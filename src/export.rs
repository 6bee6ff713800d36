//! The report files a run writes when it is over (`--json`, `--html`, `--perfetto`).
//!
//! Owns opening them before the command starts (a bad path must not cost a run; how a file is
//! opened is `output`'s) and writing them from the finished Run, with errors that name the flag
//! and the command's status. The formats themselves are `report`'s.

use crate::model::Run;
use crate::output::{self, Opened};
use crate::report::{self, Format};
use anyhow::{Context, Result};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

pub struct Exports {
    files: Vec<(Format, &'static str, Opened, PathBuf)>,
}

/// Opens the output `path` of option `flag`, with an error that names both.
pub fn open(flag: &str, path: &Path) -> Result<Opened> {
    output::open(path).with_context(|| format!("cannot create {flag} file {}", path.display()))
}

/// Refuses a second output on standard output (`-`): their texts would mix. `outputs` are
/// the outputs of one command, by their flag.
pub fn one_on_stdout(outputs: &[(&str, &Option<PathBuf>)]) -> Result<()> {
    let on: Vec<&str> = outputs
        .iter()
        .filter(|(_, p)| p.as_deref().is_some_and(output::is_stdout))
        .map(|(flag, _)| *flag)
        .collect();
    if on.len() > 1 {
        anyhow::bail!(
            "{} all name standard output (-): give all but one of them a file",
            on.join(" and ")
        );
    }
    Ok(())
}

/// The report files asked for, by their flag.
pub struct Requested<'a> {
    pub json: Option<&'a Path>,
    pub html: Option<&'a Path>,
    pub perfetto: Option<&'a Path>,
}

impl Exports {
    /// Opens every requested file now; they are emptied by [`Exports::begin`].
    pub fn open(asked: Requested<'_>) -> Result<Exports> {
        let mut files = Vec::new();
        for (format, flag, path) in [
            (Format::Json, "--json", asked.json),
            (Format::Html, "--html", asked.html),
            (Format::Perfetto, "--perfetto", asked.perfetto),
        ] {
            if let Some(p) = path {
                files.push((format, flag, open(flag, p)?, p.to_path_buf()));
            }
        }
        Ok(Exports { files })
    }

    /// Empties the files that existed: once every output of the run is open, so that a refused
    /// one costs no other its old content.
    pub fn begin(&mut self) -> Result<()> {
        for (_, flag, file, path) in &mut self.files {
            file.begin()
                .with_context(|| format!("cannot empty {flag} file {}", path.display()))?;
        }
        Ok(())
    }

    /// Renders the run into each file, every one whatever another's fate; returns the ones
    /// that failed (one error each, naming its flag and the command's status).
    pub fn write(self, run: &Run, style: report::style::Style) -> Vec<anyhow::Error> {
        let mut failed = Vec::new();
        for (format, flag, file, path) in self.files {
            let written = file
                .into_file()
                .with_context(|| format!("cannot empty {flag} file {}", path.display()))
                .and_then(|file| {
                    let mut w = BufWriter::new(file);
                    report::render(run, format, style, &mut w)
                        .and_then(|()| w.flush())
                        .with_context(|| {
                            format!(
                                "writing {flag} {} (the command exited with status {})",
                                path.display(),
                                run.exit.ste_status()
                            )
                        })
                });
            if let Err(e) = written {
                failed.push(e);
            }
        }
        failed
    }
}
