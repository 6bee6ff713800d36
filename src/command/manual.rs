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
    let mut out = std::io::stdout().lock();
    clap_complete::generate(shell, &mut cmd, "ste", &mut out);
    out.flush().context("writing to stdout")?;
    Ok(0)
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
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(&out)
        .and_then(|()| stdout.flush())
        .context("writing to stdout")?;
    Ok(0)
}
