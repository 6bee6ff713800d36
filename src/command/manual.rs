//! `ste completions SHELL` and `ste manpage [SUBCOMMAND]`: the shell completion scripts and the
//! man pages, made from the clap definition the parser itself uses, so neither can describe
//! an option ste does not take. Hidden from `--help`; the README's Install says how to put
//! them in place.
//!
//! Owns writing them to stdout; what they say is `cli`'s.

use crate::cli::Cli;
use anyhow::{Context, Result, bail};
use clap::CommandFactory;
use std::io::Write;

/// The completion script for `shell`, on stdout.
pub fn completions(shell: clap_complete::Shell) -> Result<i32> {
    let mut cmd = Cli::command();
    // Into memory first: clap_complete panics when its writer fails, as it does when the reader
    // of a pipe has seen enough (`ste completions bash | head`).
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "ste", &mut out);
    to_stdout(&out)
}

/// The man page of ste (`ste.1`), or of one of its subcommands (`ste-record.1`), on stdout.
pub fn manpage(subcommand: Option<&str>) -> Result<i32> {
    let ste = Cli::command();
    let cmd = match subcommand {
        None => ste,
        Some(name) => {
            let Some(sub) = ste
                .get_subcommands()
                .find(|s| s.get_name() == name && !s.is_hide_set())
            else {
                let names: Vec<&str> = ste
                    .get_subcommands()
                    .filter(|s| !s.is_hide_set())
                    .map(|s| s.get_name())
                    .collect();
                bail!("no subcommand {name:?} (ste's are: {})", names.join(", "));
            };
            // `ste-record`, as git names its pages; used as `ste record`.
            sub.clone()
                .display_name(format!("ste-{}", sub.get_name()))
                .bin_name(format!("ste {}", sub.get_name()))
                .version(env!("CARGO_PKG_VERSION"))
        }
    };
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd)
        .render(&mut out)
        .context("rendering the man page")?;
    to_stdout(&out)
}

/// `text` on stdout; a reader that closed the pipe early has seen enough, as for `ste report`.
fn to_stdout(text: &[u8]) -> Result<i32> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(0),
        other => other.context("writing to stdout").map(|()| 0),
    }
}
