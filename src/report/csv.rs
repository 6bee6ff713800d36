//! CSV of the memory samples, for spreadsheets and plotting scripts (RFC 4180: a header row,
//! comma-separated, CRLF-free, text quoted when it needs to be).
//!
//! Two tables: the tree's samples (one row per sampling round) and each process's samples (one
//! row per process per round, the long form plotting libraries pivot). Unknown values are empty
//! cells, never 0. Written by hand: every cell is a number except the program name, and one
//! quoting rule does not justify a dependency.

use crate::model::Run;
use crate::report::names::Tree;
use std::io::{self, Write};

/// `t_ns,pss_bytes,rss_bytes,processes,unreadable`, one row per round.
pub fn render_samples(run: &Run, w: &mut dyn Write) -> io::Result<()> {
    writeln!(w, "t_ns,pss_bytes,rss_bytes,processes,unreadable")?;
    for s in &run.samples {
        writeln!(
            w,
            "{},{},{},{},{}",
            s.t_ns, s.pss_bytes, s.rss_bytes, s.processes, s.unreadable
        )?;
    }
    Ok(())
}

/// `t_ns,pid,program,pss_bytes,cpu_ns`, one row per process read in each round. `program` is
/// what the process ran at that moment.
pub fn render_process_samples(run: &Run, w: &mut dyn Write) -> io::Result<()> {
    crate::report::terminal::through(w, false, |w| process_samples(run, w))
}

fn process_samples(run: &Run, w: &mut dyn Write) -> io::Result<()> {
    let tree = Tree::new(run);
    writeln!(w, "t_ns,pid,program,pss_bytes,cpu_ns")?;
    for s in &run.samples {
        for p in s.per_process.iter().flatten() {
            let program = tree
                .at(p.pid, s.t_ns)
                .and_then(|i| tree.program_at(run, i, s.t_ns))
                .unwrap_or_default();
            let cpu = p.cpu_ns.map(|c| c.to_string()).unwrap_or_default();
            writeln!(
                w,
                "{},{},{},{},{cpu}",
                s.t_ns,
                p.pid,
                quote(&program),
                p.pss_bytes
            )?;
        }
    }
    Ok(())
}

/// A cell as RFC 4180 wants it: quoted, with quotes doubled, when it holds a comma, a quote or
/// a line break.
fn quote(cell: &str) -> String {
    if cell.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", cell.replace('"', "\"\""))
    } else {
        cell.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testing;

    fn render(f: fn(&Run, &mut dyn Write) -> io::Result<()>, run: &Run) -> String {
        let mut out = Vec::new();
        f(run, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn samples() {
        insta::assert_snapshot!(render(render_samples, &testing::build()));
    }

    #[test]
    fn process_samples() {
        insta::assert_snapshot!(render(render_process_samples, &testing::build()));
    }

    #[test]
    fn quoting() {
        assert_eq!(quote("cc1"), "cc1");
        assert_eq!(quote("a,b"), "\"a,b\"");
        assert_eq!(quote("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
