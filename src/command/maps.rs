//! `ste maps`: the map of a running process (printed on stdout, as `pmap` does), or a run of a
//! command whose report ends with its largest processes' maps at the tree's memory peak.
//!
//! Owns only the dispatch: the map is built by [`MapReader`], the run by `session`, the text
//! by `report::maps`.

use crate::cli::options::MapsOptions;
use crate::report::maps::render_process;
use crate::source::maps::MapReader;
use anyhow::{Context, Result};
use std::io::{BufWriter, Write};

/// Runs `ste maps`; returns the status ste exits with.
pub fn run(opts: MapsOptions) -> Result<i32> {
    match opts {
        MapsOptions::Command(run) => crate::command::run::run(&run),
        MapsOptions::Pid { pid, summary, json } => {
            // Open the JSON file first: a bad path must not cost the read.
            let json_file = match &json {
                Some(p) => Some(
                    crate::output::create(p)
                        .with_context(|| format!("cannot create --json file {}", p.display()))?,
                ),
                None => None,
            };
            let mut reader = MapReader::new("/proc");
            let map = reader
                .map(pid, !summary)
                .with_context(|| format!("cannot read /proc/{pid}/smaps"))?;
            let name = std::fs::read(format!("/proc/{pid}/comm"))
                .map(|b| String::from_utf8_lossy(&b).trim_end().to_string())
                .unwrap_or_else(|_| "?".into());
            let stdout = std::io::stdout();
            let mut out = BufWriter::new(stdout.lock());
            let written = render_process(&map, &name, summary, &mut out).and_then(|()| out.flush());
            match written {
                Ok(()) => {}
                // `ste maps PID | head` is fine.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                Err(e) => return Err(e).context("writing the map"),
            }
            if let (Some(file), Some(path)) = (json_file, json) {
                let mut w = BufWriter::new(file);
                serde_json::to_writer_pretty(&mut w, &map)
                    .map_err(std::io::Error::other)
                    .and_then(|()| writeln!(w))
                    .and_then(|()| w.flush())
                    .with_context(|| format!("writing --json {}", path.display()))?;
            }
            Ok(0)
        }
    }
}
