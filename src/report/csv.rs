//! CSV of the memory samples, for spreadsheets and plotting scripts (RFC 4180: a header row,
//! comma-separated, CRLF-free, text quoted when it needs to be).
//!
//! Two tables: the tree's samples (one row per sampling round) and each process's samples (one
//! row per process per round, the long form plotting libraries pivot). Unknown values are empty
//! cells, never 0. Written by hand: every cell is a number except the program name, and one
//! quoting rule does not justify a dependency.
//!
//! A program names itself, and a spreadsheet takes a cell that starts with `=`, `+`, `-` or
//! `@` for a formula (which may run a command or send data away): such a text cell is written
//! with a `'` in front, as OWASP's advice on CSV injection has it ([`cell`], which `ste bench
//! --csv` uses too). Numbers are written as they are.

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
                cell(&program),
                p.pss_bytes
            )?;
        }
    }
    Ok(())
}

/// A text cell as RFC 4180 wants it (quoted, with quotes doubled, when it holds a comma, a
/// quote or a line break), with a `'` in front when a spreadsheet would take it for a formula:
/// it starts with `=`, `+`, `-`, `@`, a tab or a carriage return and is not a plain number.
pub fn cell(text: &str) -> String {
    let formula =
        text.starts_with(['=', '+', '-', '@', '\t', '\r']) && text.parse::<f64>().is_err();
    let text = if formula {
        format!("'{text}")
    } else {
        text.to_string()
    };
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text
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
        assert_eq!(cell("cc1"), "cc1");
        assert_eq!(cell("a,b"), "\"a,b\"");
        assert_eq!(cell("say \"hi\""), "\"say \"\"hi\"\"\"");
    }

    #[test]
    fn a_formula_is_written_as_text() {
        // Issue 44, item 9: program names were written as they are.
        assert_eq!(cell("=cmd|' /C calc'!A0"), "'=cmd|' /C calc'!A0");
        assert_eq!(cell("+1+1"), "'+1+1");
        assert_eq!(cell("-2+3+cmd"), "'-2+3+cmd");
        assert_eq!(cell("@SUM(1)"), "'@SUM(1)");
        assert_eq!(
            cell("=HYPERLINK(\"x\",\"y\")"),
            "\"'=HYPERLINK(\"\"x\"\",\"\"y\"\")\""
        );
        assert_eq!(cell("\tx"), "'\tx");
        // Numbers and names that merely hold such a character stay as they are.
        assert_eq!(cell("-12.5"), "-12.5");
        assert_eq!(cell("a=b"), "a=b");
        assert_eq!(cell("c++"), "c++");
    }
}
