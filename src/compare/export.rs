//! The tables of `ste bench` and `ste diff`, drawn three ways from one set of cells: aligned
//! text for the terminal, a Markdown table fit for a pull request, and CSV (one header row).
//!
//! Owns layout and escaping only; the cells are made by `bench` and `diff`, the JSON of both
//! is their serde types. Cells come from command lines and program names, which may hold
//! anything: text escapes control characters; Markdown escapes them too, writes `<`, `>` and
//! `&` as entities (a pull request's page renders HTML in a table) and backslashes what would
//! end a cell, open code or make a link or an image (`](`); CSV quotes and keeps a formula
//! from being one (`report::csv::cell`).

use crate::model::Escaped;

/// Rows of cells under a header.
#[derive(Debug, Clone, Default)]
pub struct Table {
    /// How many leading columns are text, aligned left in [`Table::text`] (the rest are
    /// figures, aligned right).
    pub left: usize,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        Table {
            left: 1,
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Aligned columns, two spaces apart.
    pub fn text(&self) -> String {
        let cell = |s: &str| Escaped::str(s).to_string();
        let all: Vec<Vec<String>> = std::iter::once(&self.header)
            .chain(&self.rows)
            .map(|r| r.iter().map(|c| cell(c)).collect())
            .collect();
        let cols = all.iter().map(Vec::len).max().unwrap_or(0);
        let width = |i: usize| {
            all.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..cols).map(width).collect();
        let mut out = String::new();
        for row in &all {
            let mut line = String::new();
            for (i, c) in row.iter().enumerate() {
                let pad = widths[i].saturating_sub(c.chars().count());
                if i > 0 {
                    line.push_str("  ");
                }
                if i < self.left {
                    line.push_str(c);
                    line.push_str(&" ".repeat(pad));
                } else {
                    line.push_str(&" ".repeat(pad));
                    line.push_str(c);
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }

    /// A GitHub-flavoured Markdown table.
    pub fn markdown(&self) -> String {
        let cell = |s: &str| {
            let mut out = String::new();
            for c in Escaped::str(s).to_string().chars() {
                match c {
                    '<' => out.push_str("&lt;"),
                    '>' => out.push_str("&gt;"),
                    '&' => out.push_str("&amp;"),
                    // A link's or an image's `](` is cut by escaping its parenthesis.
                    '(' if out.ends_with(']') => out.push_str("\\("),
                    '|' | '`' => {
                        out.push('\\');
                        out.push(c);
                    }
                    c => out.push(c),
                }
            }
            out
        };
        let row = |r: &[String]| {
            format!(
                "| {} |\n",
                r.iter().map(|c| cell(c)).collect::<Vec<_>>().join(" | ")
            )
        };
        let mut out = row(&self.header);
        out.push_str(&format!("|{}\n", "---|".repeat(self.header.len())));
        for r in &self.rows {
            out.push_str(&row(r));
        }
        out
    }

    /// CSV (RFC 4180: fields with a comma, quote or line break are quoted; a text that a
    /// spreadsheet would take for a formula gets a `'` in front).
    pub fn csv(&self) -> String {
        std::iter::once(&self.header)
            .chain(&self.rows)
            .map(|r| {
                r.iter()
                    .map(|c| crate::report::csv::cell(c))
                    .collect::<Vec<_>>()
                    .join(",")
                    + "\n"
            })
            .collect()
    }
}

/// Writes `text` into `opened`, the output file `path` of option `flag` (opened with
/// `export::open` before the work began, as every output of ste is).
pub fn write_file(
    flag: &str,
    path: &std::path::Path,
    mut opened: crate::output::Opened,
    text: &str,
) -> anyhow::Result<()> {
    use anyhow::Context;
    use std::io::Write;
    opened
        .begin()
        .with_context(|| format!("cannot empty {flag} file {}", path.display()))?;
    let mut f = opened
        .into_file()
        .with_context(|| format!("cannot open {flag} file {}", path.display()))?;
    f.write_all(text.as_bytes())
        .with_context(|| format!("writing {flag} {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        let mut t = Table::new(&["figure", "#1", "#2"]);
        t.rows
            .push(vec!["wall".into(), "1.5s".into(), "12ms".into()]);
        t.rows
            .push(vec!["a|b,\"c\"".into(), "1".into(), "2".into()]);
        t
    }

    #[test]
    fn text_aligns_markdown_and_csv_escape() {
        let t = table();
        assert_eq!(
            t.text(),
            "figure     #1    #2\nwall     1.5s  12ms\na|b,\"c\"     1     2\n"
        );
        assert!(
            t.markdown()
                .starts_with("| figure | #1 | #2 |\n|---|---|---|\n| wall |")
        );
        assert!(t.markdown().contains("a\\|b"));
        assert!(t.csv().contains("\"a|b,\"\"c\"\"\",1,2\n"));
    }

    #[test]
    fn markdown_carries_no_html_and_csv_no_formula() {
        // Issue 44, item 9: a program's name was written raw into both.
        let mut t = Table::new(&["program", "cpu"]);
        t.rows
            .push(vec!["<img src=x onerror=alert(1)>".into(), "-12".into()]);
        t.rows
            .push(vec!["![x](https://x.example/t.png)".into(), "1".into()]);
        t.rows.push(vec!["=cmd|' /C calc'!A0".into(), "2".into()]);
        let md = t.markdown();
        assert!(
            md.contains("| &lt;img src=x onerror=alert(1)&gt; | -12 |"),
            "{md}"
        );
        assert!(md.contains("![x]\\(https://x.example/t.png)"), "{md}");
        assert!(!md.contains('<'), "{md}");
        let csv = t.csv();
        assert!(csv.contains("'=cmd|' /C calc'!A0,2\n"), "{csv}");
        assert!(csv.contains(",-12\n"), "{csv}");
    }
}
