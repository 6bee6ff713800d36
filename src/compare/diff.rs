//! `ste diff A B`: two runs (records of `ste record` or Runs of `--json`) side by side: the
//! totals with the change from A to B, then by program (the key of `report::programs`, so a
//! program here is the one the report's by-program view shows) with what appeared and what
//! vanished, sorted by the size of the change (CPU first, then the largest peak).
//!
//! Owns the pairing and the change arithmetic; reading the runs is `replay`'s, grouping by
//! program `report::programs`'s. A figure either run lacks is `n/a` and has no change; it is
//! never taken as 0. Runs of another schema version are refused (by `ledger::load`): their
//! figures may mean other things.

use super::Figure;
use super::budget::{self, Budget};
use super::export::{Table, write_file};
use crate::model::Run;
use crate::report::programs::{Program, by_program};
use anyhow::Result;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Checked settings of `ste diff`.
#[derive(Debug, Clone)]
pub struct DiffOptions {
    pub a: PathBuf,
    pub b: PathBuf,
    pub json: Option<PathBuf>,
    pub markdown: Option<PathBuf>,
    pub budgets: Vec<Budget>,
}

/// What `--json` writes. docs/bench-diff-json.md documents every field and tests/it/diff.rs
/// holds the output to it: change the three together.
#[derive(Debug, Serialize)]
pub struct Diff {
    pub a: String,
    pub b: String,
    /// The status `ste COMMAND` exited with on each run (`Exit::ste_status`): the command's,
    /// 128+N for a signal, 127/126/125 when it could not start.
    pub a_exit_status: i32,
    pub b_exit_status: i32,
    pub totals: Vec<TotalChange>,
    pub programs: Vec<ProgramChange>,
}

#[derive(Debug, Serialize)]
pub struct TotalChange {
    pub figure: &'static str,
    pub a: Option<u64>,
    pub b: Option<u64>,
    /// B − A, in the figure's unit.
    pub change: Option<i128>,
    /// (B − A) / A in percent; `None` when either is unknown or A is 0.
    pub change_percent: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct ProgramChange {
    pub program: String,
    /// `appeared` (only in B), `vanished` (only in A) or `both`.
    pub status: &'static str,
    pub a: Option<Program>,
    pub b: Option<Program>,
    /// B's CPU − A's, a missing program counting as none; `None` when a CPU is unknown.
    pub cpu_change_ns: Option<i128>,
    /// B's largest peak − A's, the same way.
    pub largest_peak_change_bytes: Option<i128>,
}

pub fn run(opts: &DiffOptions) -> Result<i32> {
    budget::require(&opts.budgets, true, "ste diff")?;
    crate::export::one_on_stdout(&[("--json", &opts.json), ("--markdown", &opts.markdown)])?;
    let json = opts
        .json
        .as_ref()
        .map(|p| crate::export::open("--json", p))
        .transpose()?;
    let markdown = opts
        .markdown
        .as_ref()
        .map(|p| crate::export::open("--markdown", p))
        .transpose()?;
    let a = load(&opts.a)?;
    let b = load(&opts.b)?;
    let diff = Diff::new(&opts.a, &a, &opts.b, &b);
    // The table on stdout; on stderr when an export takes stdout (`--json -`).
    let to_stdout = [&opts.json, &opts.markdown]
        .iter()
        .all(|p| !p.as_deref().is_some_and(crate::output::is_stdout));
    let mut out: Box<dyn Write> = if to_stdout {
        Box::new(std::io::stdout().lock())
    } else {
        Box::new(std::io::stderr().lock())
    };
    let text = diff.text();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            return Err(anyhow::Error::new(e).context("writing the table"));
        }
        _ => {}
    }
    drop(out);
    if let (Some(o), Some(p)) = (json, &opts.json) {
        write_file(
            "--json",
            p,
            o,
            &(serde_json::to_string_pretty(&diff)? + "\n"),
        )?;
    }
    if let (Some(o), Some(p)) = (markdown, &opts.markdown) {
        write_file("--markdown", p, o, &diff.markdown())?;
    }
    let checked: Vec<budget::Checked> = opts
        .budgets
        .iter()
        .map(|budget| {
            let f = budget.figure;
            let t = diff.totals.iter().find(|t| t.figure == f.name());
            let value = match t {
                Some(t) => t.change_percent.ok_or_else(|| why_no_change(t, &a, &b, f)),
                None => Err(format!("neither run measured {}", f.name())),
            };
            budget::check(budget, value, "change from A to B")
        })
        .collect();
    for c in &checked {
        crate::output::say(&c.line);
    }
    budget::status(0, &checked)
}

fn why_no_change(t: &TotalChange, a: &Run, b: &Run, f: Figure) -> String {
    match (f.of(a), f.of(b)) {
        (Err(w), _) => format!("A: {w}"),
        (_, Err(w)) => format!("B: {w}"),
        _ if t.a == Some(0) => "A's figure is 0: a change in percent has no meaning".into(),
        _ => "no change could be computed".into(),
    }
}

/// A run from a record or a `--json` file (`ledger::load` refuses one of another schema
/// version).
fn load(path: &Path) -> Result<Run> {
    // Under sudo, with the invoking user's rights.
    let file = crate::output::open_input(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    // A Run of another schema version is refused there (a record replays into this one).
    let (run, _) = crate::ledger::load::load(path, file)?;
    Ok(run)
}

fn change(a: Option<u64>, b: Option<u64>) -> Option<i128> {
    Some(i128::from(b?) - i128::from(a?))
}

impl Diff {
    pub fn new(a_path: &Path, a: &Run, b_path: &Path, b: &Run) -> Diff {
        let totals = Figure::ALL
            .into_iter()
            .filter(|f| *f != Figure::Calls || a.syscalls.is_some() || b.syscalls.is_some())
            .map(|f| {
                let (va, vb) = (f.of(a).ok(), f.of(b).ok());
                TotalChange {
                    figure: f.name(),
                    a: va,
                    b: vb,
                    change: change(va, vb),
                    change_percent: va
                        .zip(vb)
                        .filter(|(a, _)| *a > 0)
                        .map(|(a, b)| (b as f64 - a as f64) / a as f64 * 100.0),
                }
            })
            .collect();
        let mut by_name: BTreeMap<String, (Option<Program>, Option<Program>)> = BTreeMap::new();
        for p in by_program(a) {
            let name = p.program.clone();
            by_name.entry(name).or_default().0 = Some(p);
        }
        for p in by_program(b) {
            let name = p.program.clone();
            by_name.entry(name).or_default().1 = Some(p);
        }
        let mut programs: Vec<ProgramChange> = by_name
            .into_iter()
            .map(|(program, (pa, pb))| {
                // A program absent from a run had no CPU and no peak there: 0 is the truth.
                let side = |p: &Option<Program>, get: fn(&Program) -> Option<u64>| match p {
                    Some(p) => get(p),
                    None => Some(0),
                };
                ProgramChange {
                    status: match (&pa, &pb) {
                        (None, Some(_)) => "appeared",
                        (Some(_), None) => "vanished",
                        _ => "both",
                    },
                    cpu_change_ns: change(side(&pa, |p| p.cpu_ns), side(&pb, |p| p.cpu_ns)),
                    largest_peak_change_bytes: change(
                        side(&pa, |p| p.largest_peak_bytes),
                        side(&pb, |p| p.largest_peak_bytes),
                    ),
                    program,
                    a: pa,
                    b: pb,
                }
            })
            .collect();
        let size = |x: Option<i128>| x.map_or(0, i128::unsigned_abs);
        programs.sort_by(|x, y| {
            size(y.cpu_change_ns)
                .cmp(&size(x.cpu_change_ns))
                .then(size(y.largest_peak_change_bytes).cmp(&size(x.largest_peak_change_bytes)))
                .then_with(|| x.program.cmp(&y.program))
        });
        Diff {
            a: a_path.display().to_string(),
            b: b_path.display().to_string(),
            a_exit_status: a.exit.ste_status(),
            b_exit_status: b.exit.ste_status(),
            totals,
            programs,
        }
    }

    fn totals_table(&self) -> Table {
        let mut t = Table::new(&["figure", "A", "B", "change", "change %"]);
        for c in &self.totals {
            let f = Figure::parse(c.figure).expect("a figure's own name");
            let v = |x: Option<u64>| x.map_or_else(|| "n/a".to_string(), |x| f.format(x as f64));
            t.rows.push(vec![
                c.figure.into(),
                v(c.a),
                v(c.b),
                signed(f, c.change),
                c.change_percent
                    .map_or_else(|| "n/a".into(), |p| format!("{p:+.1}%")),
            ]);
        }
        t
    }

    fn programs_table(&self) -> Table {
        let mut t = Table::new(&[
            "program",
            "runs A→B",
            "CPU A",
            "CPU B",
            "CPU change",
            "peak A",
            "peak B",
            "peak change",
            "span A→B",
            "",
        ]);
        let cpu = Figure::Cpu;
        let mem = Figure::PeakRss;
        let opt = |f: Figure, p: &Option<Program>, get: fn(&Program) -> Option<u64>| match p {
            None => "-".to_string(),
            Some(p) => get(p).map_or_else(|| "n/a".into(), |v| f.format(v as f64)),
        };
        for c in &self.programs {
            let runs = |p: &Option<Program>| p.as_ref().map_or(0, |p| p.runs);
            let span = |p: &Option<Program>| {
                p.as_ref()
                    .map_or_else(|| "-".into(), |p| crate::units::duration_human(p.span_ns))
            };
            t.rows.push(vec![
                c.program.clone(),
                format!("{}→{}", runs(&c.a), runs(&c.b)),
                opt(cpu, &c.a, |p| p.cpu_ns),
                opt(cpu, &c.b, |p| p.cpu_ns),
                signed(cpu, c.cpu_change_ns),
                opt(mem, &c.a, |p| p.largest_peak_bytes),
                opt(mem, &c.b, |p| p.largest_peak_bytes),
                signed(mem, c.largest_peak_change_bytes),
                format!("{}→{}", span(&c.a), span(&c.b)),
                match c.status {
                    "both" => String::new(),
                    s => s.into(),
                },
            ]);
        }
        t
    }

    /// What `ste diff` prints.
    pub fn text(&self) -> String {
        format!(
            "A: {}{}\nB: {}{}\n{}\n{}\nBy program (the largest change first):\n{}",
            crate::model::Escaped::str(&self.a),
            failed(self.a_exit_status),
            crate::model::Escaped::str(&self.b),
            failed(self.b_exit_status),
            self.failures(),
            self.totals_table().text(),
            self.programs_table().text()
        )
    }

    /// `--markdown`.
    pub fn markdown(&self) -> String {
        format!(
            "A: `{}`{}, B: `{}`{}\n{}\n{}\nBy program (the largest change first):\n\n{}",
            self.a.replace('`', "'"),
            failed(self.a_exit_status),
            self.b.replace('`', "'"),
            failed(self.b_exit_status),
            self.failures(),
            self.totals_table().markdown(),
            self.programs_table().markdown()
        )
    }

    /// What a failed run means for the comparison, in a line, when A or B failed.
    fn failures(&self) -> String {
        let which = match (self.a_exit_status != 0, self.b_exit_status != 0) {
            (false, false) => return String::new(),
            (true, true) => "Both runs failed",
            (true, false) => "Run A failed",
            (false, true) => "Run B failed",
        };
        format!(
            "{which}: a failed command may have stopped early, so the figures compare how far each run got, not two whole runs.\n"
        )
    }
}

/// ` (failed: exit status 2)` after a run that failed; nothing after one that succeeded.
fn failed(status: i32) -> String {
    if status == 0 {
        String::new()
    } else {
        format!(" (failed: exit status {status})")
    }
}

/// A change in the figure's unit with its sign: `+12ms`, `-64 MiB`, `0`, `n/a`.
fn signed(f: Figure, change: Option<i128>) -> String {
    match change {
        None => "n/a".into(),
        Some(0) => "0".into(),
        Some(c) => {
            let sign = if c > 0 { '+' } else { '-' };
            format!("{sign}{}", f.format(c.unsigned_abs() as f64))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_keep_their_sign_and_unknowns() {
        assert_eq!(signed(Figure::Wall, Some(-12_000_000)), "-12ms");
        assert_eq!(signed(Figure::MaxPss, Some(64 << 20)), "+64 MiB");
        assert_eq!(signed(Figure::Execs, Some(0)), "0");
        assert_eq!(signed(Figure::Execs, None), "n/a");
        assert_eq!(change(Some(3), Some(1)), Some(-2));
        assert_eq!(change(None, Some(1)), None);
    }
}
