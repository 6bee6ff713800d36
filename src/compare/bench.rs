//! `ste bench`: runs commands again and again, each run tracked as `ste COMMAND` tracks it,
//! and gives each figure's median, minimum, maximum and spread per command, and with two or
//! more commands each figure's ratio to the first as the median of per-round ratios with its
//! 95 % bootstrap interval (bench/paired.py's method, see `stats`).
//!
//! Owns the rounds and their order, the child runs, the progress line and the report of a
//! bench. Choices:
//! - Each measured run is a child `ste` (this very binary) with `--json /dev/fd/N -q -o
//!   /dev/null`; the Run is read back from a memfd it inherits (no file to clean up, nothing
//!   another user could plant), so every figure is the one `ste COMMAND` reports. The memfd is
//!   inherited by the measured command too (one descriptor it does not use).
//! - A COMMAND string is split into words as a shell would (`shlex`, already in the build
//!   tree), and run without a shell unless `--shell` (`sh -c STRING`). `--prepare` always runs
//!   with `sh -c`, before every run, warmups included, and is not measured.
//! - The command's stdout and stderr (and the child ste's) go to /dev/null unless
//!   `--show-output`; the child's stderr is kept in a memfd to quote when a run fails.
//! - Every round runs each command once, in a fresh random order (`--seed` makes the order and
//!   the intervals reproducible; the seed used is printed). A figure a run could not measure is
//!   left out of the statistics and counted (`n/a`), never taken as 0; a round whose baseline
//!   or command lacks it has no ratio.
//! - A run that fails (the command's status is not 0, or it cannot start) stops the bench: the
//!   rounds completed before it are reported, said to be partial, and ste exits with the
//!   failing run's status. Ctrl-C (SIGINT) and SIGTERM do the same once the current run is
//!   over (exit 128+N): the bench catches them with a handler, which exec resets, so the child
//!   runs get them as they would without a bench.
//!
//! It must not measure anything itself: wall, CPU and memory are the child runs'.

use super::Figure;
use super::budget::{self, Budget};
use super::export::{Table, write_file};
use super::stats::{self, Ratio, Summary};
use crate::model::Run;
use anyhow::{Context, Result, bail};
use serde::Serialize;
use std::ffi::CString;
use std::fs::File;
use std::io::{IsTerminal, Read, Seek, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

/// Checked settings of `ste bench`.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// The command strings as typed.
    pub commands: Vec<String>,
    pub runs: usize,
    pub warmup: usize,
    pub prepare: Option<String>,
    pub shell: bool,
    pub show_output: bool,
    pub tracker: Option<crate::source::track::TrackerKind>,
    pub syscalls: Option<crate::source::track::SyscallRequest>,
    pub seed: Option<u64>,
    pub json: Option<PathBuf>,
    pub csv: Option<PathBuf>,
    pub markdown: Option<PathBuf>,
    pub budgets: Vec<Budget>,
}

/// One command's figures on one run: each a value or why it is unknown.
type Values = Vec<Result<u64, String>>;

/// Why a bench stopped early.
struct Stop {
    status: i32,
    message: String,
}

pub fn run(opts: &BenchOptions) -> Result<i32> {
    budget::require(&opts.budgets, false, "ste bench")?;
    budget::require_measured(
        &opts.budgets,
        budget::Measured {
            syscalls: opts.syscalls.is_some(),
            cgroup: true,
        },
        "ste bench",
    )?;
    crate::launch::signals::catch_interrupts().context("cannot catch SIGINT and SIGTERM")?;
    let argvs = opts
        .commands
        .iter()
        .map(|c| split(c, opts.shell))
        .collect::<Result<Vec<_>>>()?;
    crate::export::one_on_stdout(&[
        ("--json", &opts.json),
        ("--csv", &opts.csv),
        ("--markdown", &opts.markdown),
    ])?;
    // Open every export before the first run: a bad path must not cost a bench.
    let exports: Vec<(&str, PathBuf, crate::output::Opened)> = [
        ("--json", &opts.json),
        ("--csv", &opts.csv),
        ("--markdown", &opts.markdown),
    ]
    .into_iter()
    .filter_map(|(flag, p)| p.as_ref().map(|p| (flag, p.clone())))
    .map(|(flag, p)| crate::export::open(flag, &p).map(|o| (flag, p, o)))
    .collect::<Result<_>>()?;
    let ste = std::env::current_exe().context("cannot find ste's own executable")?;
    let seed = opts.seed.unwrap_or_else(|| fastrand::u64(..));
    let mut rng = fastrand::Rng::with_seed(seed);
    let figures: Vec<Figure> = Figure::ALL
        .into_iter()
        .filter(|f| *f != Figure::Calls || opts.syscalls.is_some())
        .collect();
    let mut progress = Progress::new(argvs.len() * (opts.warmup + opts.runs));

    let mut rounds: Vec<Vec<Values>> = Vec::new();
    let mut stop = None;
    'rounds: for round in 0..opts.warmup + opts.runs {
        let warm = round < opts.warmup;
        let mut order: Vec<usize> = (0..argvs.len()).collect();
        rng.shuffle(&mut order);
        let mut results: Vec<Option<Values>> = vec![None; argvs.len()];
        for i in order {
            let what = if warm {
                format!("warmup {} of #{}", round + 1, i + 1)
            } else {
                format!("round {} of #{}", round - opts.warmup + 1, i + 1)
            };
            let outcome = prepare(opts)
                .and_then(|()| run_once(&ste, opts, &argvs[i]))
                .map_err(|s| Stop {
                    status: s.status,
                    message: format!("{what} ({}): {}", opts.commands[i], s.message),
                });
            progress.step();
            let outcome = match crate::launch::signals::interrupted() {
                0 => outcome,
                signo => Err(Stop {
                    status: 128 + signo,
                    message: format!(
                        "{what}: interrupted by {}",
                        crate::model::signal_name(signo)
                    ),
                }),
            };
            match outcome {
                Ok(run) => results[i] = Some(figures.iter().map(|f| f.of(&run)).collect()),
                Err(s) => {
                    stop = Some(s);
                    break 'rounds;
                }
            }
        }
        if !warm {
            rounds.push(
                results
                    .into_iter()
                    .map(|r| r.expect("every command ran"))
                    .collect(),
            );
        }
    }
    progress.clear();

    let report = Report::new(opts, &figures, &rounds, seed, stop.as_ref(), &mut rng);
    // The results on stdout, as hyperfine prints them; on stderr when an export takes stdout.
    let text = report.text();
    let mut err = std::io::stderr().lock();
    if exports.iter().any(|(_, p, _)| crate::output::is_stdout(p)) {
        let _ = err.write_all(text.as_bytes());
    } else {
        let mut out = std::io::stdout().lock();
        match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                return Err(anyhow::Error::new(e).context("writing to stdout"));
            }
            _ => {}
        }
    }
    for (flag, path, opened) in exports {
        let text = match flag {
            "--json" => serde_json::to_string_pretty(&report)? + "\n",
            "--csv" => report.csv_table().csv(),
            _ => report.markdown(),
        };
        write_file(flag, &path, opened, &text)?;
    }
    let checked: Vec<budget::Checked> = report
        .commands
        .iter()
        .enumerate()
        .flat_map(|(i, c)| {
            opts.budgets.iter().map(move |b| {
                let f = c.figures.iter().find(|f| f.figure == b.figure.name());
                let value = match f {
                    Some(f) => f.median.ok_or_else(|| f.why.clone().unwrap_or_default()),
                    None => Err(format!(
                        "{} is not measured by this bench (--syscalls counts calls)",
                        b.figure.name()
                    )),
                };
                budget::check(b, value, &format!("median of #{}", i + 1))
            })
        })
        .collect();
    for c in &checked {
        let _ = writeln!(err, "{}", c.line);
    }
    if let Some(s) = &stop {
        let _ = writeln!(
            err,
            "ste: the bench stopped at {}; the figures above are of the {} complete round{} before it",
            s.message,
            rounds.len(),
            if rounds.len() == 1 { "" } else { "s" }
        );
    }
    budget::status(stop.map_or(0, |s| s.status), &checked)
}

/// The words of `command`: split as a shell would, or `sh -c COMMAND` with `--shell`.
fn split(command: &str, shell: bool) -> Result<Vec<String>> {
    if shell {
        return Ok(vec!["sh".into(), "-c".into(), command.into()]);
    }
    match shlex::split(command) {
        Some(words) if !words.is_empty() => Ok(words),
        Some(_) => bail!("an empty command cannot be benchmarked"),
        None => {
            bail!("cannot split {command:?} into words: a quote is not closed (or use --shell)")
        }
    }
}

/// Runs `--prepare`, if any.
fn prepare(opts: &BenchOptions) -> std::result::Result<(), Stop> {
    let Some(p) = &opts.prepare else {
        return Ok(());
    };
    let mut c = Command::new("sh");
    c.args(["-c", p]).stdin(Stdio::null());
    if !opts.show_output {
        c.stdout(Stdio::null()).stderr(Stdio::null());
    }
    let status = c.status().map_err(|e| Stop {
        status: crate::model::status::STE_FAILED,
        message: format!("--prepare could not start: {e}"),
    })?;
    match exit_status(status) {
        0 => Ok(()),
        s => Err(Stop {
            status: s,
            message: format!("--prepare `{p}` exited with status {s}"),
        }),
    }
}

/// The status a shell would give: the code, or 128+N for signal N.
fn exit_status(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// A memory file the child writes into, `inherit`ed across exec or not.
fn memfd(name: &str, inherit: bool) -> Result<File> {
    use nix::sys::memfd::{MFdFlags, memfd_create};
    let name = CString::new(name).expect("no NUL in a literal name");
    let flags = if inherit {
        MFdFlags::empty()
    } else {
        MFdFlags::MFD_CLOEXEC
    };
    let fd: OwnedFd = memfd_create(name.as_c_str(), flags).context("memfd_create")?;
    Ok(File::from(fd))
}

/// One measured run of `argv` under a child ste, and the Run it wrote.
fn run_once(
    ste: &std::path::Path,
    opts: &BenchOptions,
    argv: &[String],
) -> std::result::Result<Run, Stop> {
    let failed = |message: String| Stop {
        status: crate::model::status::STE_FAILED,
        message,
    };
    let mut json = memfd("ste-bench-run", true).map_err(|e| failed(format!("{e:#}")))?;
    let mut stderr = memfd("ste-bench-stderr", false).map_err(|e| failed(format!("{e:#}")))?;
    let mut c = Command::new(ste);
    if let Some(t) = opts.tracker {
        c.args(["--tracker", t.name()]);
    }
    if let Some(r) = opts.syscalls {
        c.arg(format!("--syscalls={}", r.mode.flag_value()));
        if r.allow_ptrace {
            c.arg("--allow-ptrace");
        }
    }
    c.arg("--json")
        .arg(format!("/dev/fd/{}", json.as_raw_fd()))
        .args(["-q", "--color", "never", "-o", "/dev/null", "--"])
        .args(argv)
        .stdin(Stdio::null());
    if !opts.show_output {
        let err = stderr.try_clone().map_err(|e| failed(e.to_string()))?;
        c.stdout(Stdio::null()).stderr(err);
    }
    let status = c
        .status()
        .map_err(|e| failed(format!("cannot run {}: {e}", ste.display())))?;
    let status = exit_status(status);
    let mut last_words = || {
        let mut s = String::new();
        let _ = stderr.rewind().and_then(|()| stderr.read_to_string(&mut s));
        s.lines()
            .rev()
            .find(|l| l.starts_with("ste: "))
            .map(|l| format!(": {}", l.trim_start_matches("ste: ")))
            .unwrap_or_default()
    };
    let _ = json.rewind();
    let run = match crate::ledger::load::read_json(&mut json) {
        Ok(run) => run,
        Err(_) if status != 0 => {
            return Err(Stop {
                status,
                message: format!(
                    "ste exited with status {status} and wrote no run{}",
                    last_words()
                ),
            });
        }
        Err(e) => return Err(failed(format!("the run ste wrote cannot be read: {e:#}"))),
    };
    if status != 0 {
        let why = match &run.exit.launch_error {
            Some(l) => format!(
                "it could not start: {}",
                crate::model::Escaped::str(&l.message)
            ),
            None => format!("it exited with status {status}: a failing run measures nothing"),
        };
        return Err(Stop {
            status,
            message: why,
        });
    }
    Ok(run)
}

/// The progress line on a terminal: runs done, and an estimate of the time left.
struct Progress {
    total: usize,
    done: usize,
    started: Instant,
    shown: bool,
}

impl Progress {
    fn new(total: usize) -> Progress {
        Progress {
            total,
            done: 0,
            started: Instant::now(),
            shown: std::io::stderr().is_terminal(),
        }
    }

    fn step(&mut self) {
        self.done += 1;
        if !self.shown {
            return;
        }
        let per_run = self.started.elapsed() / self.done as u32;
        let left = per_run * (self.total - self.done) as u32;
        let width = 30;
        let filled = width * self.done / self.total.max(1);
        eprint!(
            "\r\x1b[Kste bench [{}{}] {}/{} runs, about {} left",
            "#".repeat(filled),
            " ".repeat(width - filled),
            self.done,
            self.total,
            crate::units::duration_human(left.as_nanos() as u64)
        );
    }

    fn clear(&self) {
        if self.shown {
            eprint!("\r\x1b[K");
        }
    }
}

/// A bench's results: what `--json` writes. docs/bench-diff-json.md documents every field and
/// tests/it/bench.rs holds the output to it: change the three together.
#[derive(Debug, Serialize)]
pub struct Report {
    /// Complete rounds measured (fewer than asked when the bench stopped).
    pub rounds: usize,
    pub rounds_asked: usize,
    pub warmup: usize,
    /// The seed of the random order and of the bootstrap.
    pub seed: u64,
    /// Why the bench stopped early; `None` when every round ran.
    pub stopped: Option<String>,
    pub commands: Vec<CommandStats>,
}

#[derive(Debug, Serialize)]
pub struct CommandStats {
    pub command: String,
    pub figures: Vec<FigureStats>,
}

#[derive(Debug, Serialize)]
pub struct FigureStats {
    pub figure: &'static str,
    /// `ns`, `bytes` or `count`.
    pub unit: &'static str,
    /// Round by round; `null` where the run did not measure it.
    pub values: Vec<Option<u64>>,
    /// Runs that did not measure it.
    pub unmeasured: usize,
    /// Why, as the first of them said.
    pub why: Option<String>,
    pub median: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// `(max − min) / median`.
    pub spread: Option<f64>,
    /// To the first command's: the median of per-round ratios and its 95 % bootstrap
    /// interval; `None` for the first command and where no round has a ratio (both figures
    /// measured and the first command's not 0).
    pub ratio: Option<RatioStats>,
}

#[derive(Debug, Serialize)]
pub struct RatioStats {
    pub median: f64,
    pub ci95: Option<[f64; 2]>,
    pub rounds: usize,
}

impl Report {
    fn new(
        opts: &BenchOptions,
        figures: &[Figure],
        rounds: &[Vec<Values>],
        seed: u64,
        stop: Option<&Stop>,
        rng: &mut fastrand::Rng,
    ) -> Report {
        let value = |r: &Values, k: usize| r[k].as_ref().ok().map(|&v| v as f64);
        let commands = opts
            .commands
            .iter()
            .enumerate()
            .map(|(i, command)| CommandStats {
                command: command.clone(),
                figures: figures
                    .iter()
                    .enumerate()
                    .map(|(k, f)| {
                        let values: Vec<Option<u64>> = rounds
                            .iter()
                            .map(|r| r[i][k].as_ref().ok().copied())
                            .collect();
                        let known: Vec<f64> = values.iter().flatten().map(|&v| v as f64).collect();
                        let summary: Option<Summary> = stats::summarize(&known);
                        let pairs: Vec<(f64, f64)> = rounds
                            .iter()
                            .filter_map(|r| value(&r[i], k).zip(value(&r[0], k)))
                            .collect();
                        let ratio =
                            (i > 0)
                                .then(|| Ratio::of(&pairs, rng))
                                .flatten()
                                .map(|r| RatioStats {
                                    median: r.median,
                                    ci95: r.interval.map(|(lo, hi)| [lo, hi]),
                                    rounds: r.rounds,
                                });
                        FigureStats {
                            figure: f.name(),
                            unit: match f.unit() {
                                super::Unit::Ns => "ns",
                                super::Unit::Bytes => "bytes",
                                super::Unit::Count => "count",
                            },
                            unmeasured: values.iter().filter(|v| v.is_none()).count(),
                            why: rounds.iter().find_map(|r| r[i][k].as_ref().err().cloned()),
                            values,
                            median: summary.map(|s| s.median),
                            min: summary.map(|s| s.min),
                            max: summary.map(|s| s.max),
                            spread: summary.and_then(|s| s.spread),
                            ratio,
                        }
                    })
                    .collect(),
            })
            .collect();
        Report {
            rounds: rounds.len(),
            rounds_asked: opts.runs,
            warmup: opts.warmup,
            seed,
            stopped: stop.map(|s| s.message.clone()),
            commands,
        }
    }

    /// The table: one row per command and figure, the ratio column from the second command on.
    fn table(&self) -> Table {
        let mut t = Table::new(&[
            "",
            "figure",
            "median",
            "min",
            "max",
            "spread",
            "× #1 [95% CI]",
        ]);
        t.left = 2;
        for (i, c) in self.commands.iter().enumerate() {
            for f in &c.figures {
                let fig = Figure::parse(f.figure).expect("a figure's own name");
                let v = |x: Option<f64>| x.map_or_else(|| "n/a".to_string(), |x| fig.format(x));
                let mut median = v(f.median);
                if f.unmeasured > 0 && f.median.is_some() {
                    median = format!("{median} ({} n/a)", f.unmeasured);
                }
                t.rows.push(vec![
                    format!("#{}", i + 1),
                    f.figure.to_string(),
                    median,
                    v(f.min),
                    v(f.max),
                    f.spread
                        .map_or_else(|| "n/a".into(), |s| format!("{:.1}%", s * 100.0)),
                    match (&f.ratio, i) {
                        (_, 0) => String::new(),
                        (None, _) => "n/a".into(),
                        (Some(r), _) => ratio_text(r),
                    },
                ]);
            }
        }
        t
    }

    fn heading(&self) -> String {
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        let mut s = format!(
            "ste bench: {} round{} after {} warmup round{}, each command once per round in a random order (seed {})\n",
            self.rounds,
            plural(self.rounds),
            self.warmup,
            plural(self.warmup),
            self.seed
        );
        for (i, c) in self.commands.iter().enumerate() {
            s.push_str(&format!(
                "  #{}  {}\n",
                i + 1,
                crate::model::Escaped::str(&c.command)
            ));
        }
        s
    }

    /// The verdicts: one line per figure whose ratio's interval excludes 1.
    fn verdicts(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (i, c) in self.commands.iter().enumerate().skip(1) {
            for f in &c.figures {
                let Some(r) = &f.ratio else { continue };
                let Some([lo, hi]) = r.ci95 else { continue };
                if lo <= 1.0 && hi >= 1.0 {
                    continue;
                }
                let less = if r.median < 1.0 {
                    format!(": {:.2}× less", 1.0 / r.median)
                } else {
                    String::new()
                };
                out.push(format!(
                    "#{} {}: {:.2}× #1 [{lo:.2}, {hi:.2}]{less}",
                    i + 1,
                    f.figure,
                    r.median
                ));
            }
        }
        out
    }

    /// Why figures are `n/a`: one line per command and figure some run did not measure.
    fn unmeasured(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (i, c) in self.commands.iter().enumerate() {
            for f in c.figures.iter().filter(|f| f.unmeasured > 0) {
                out.push(format!(
                    "#{} {}: n/a on {} of {} runs: {}",
                    i + 1,
                    f.figure,
                    f.unmeasured,
                    f.values.len(),
                    crate::model::Escaped::str(f.why.as_deref().unwrap_or("not measured"))
                ));
            }
        }
        out
    }

    /// What ste prints: the heading, the table, what its columns mean, the figures some run
    /// did not measure and the verdicts.
    pub fn text(&self) -> String {
        let mut s = self.heading();
        s.push('\n');
        s.push_str(&self.table().text());
        s.push_str(SPREAD);
        s.push('\n');
        for line in self.unmeasured() {
            s.push_str(&line);
            s.push('\n');
        }
        let verdicts = self.verdicts();
        if !verdicts.is_empty() {
            s.push('\n');
        }
        for v in verdicts {
            s.push_str(&v);
            s.push('\n');
        }
        s
    }

    /// `--markdown`: the heading as a list, the table, the verdicts.
    pub fn markdown(&self) -> String {
        let mut s = format!(
            "{} rounds, each command once per round in a random order (seed {}). {SPREAD}\n\n",
            self.rounds, self.seed
        );
        for (i, c) in self.commands.iter().enumerate() {
            s.push_str(&format!(
                "- #{}: `{}`\n",
                i + 1,
                c.command.replace('`', "'")
            ));
        }
        s.push('\n');
        s.push_str(&self.table().markdown());
        for v in self.verdicts() {
            s.push_str(&format!("\n- {v}"));
        }
        s.push('\n');
        s
    }

    /// `--csv`: one row per command and figure, raw numbers in the figure's unit.
    pub fn csv_table(&self) -> Table {
        let mut t = Table::new(&[
            "command",
            "figure",
            "unit",
            "runs",
            "unmeasured",
            "median",
            "min",
            "max",
            "spread",
            "ratio",
            "ratio_ci95_low",
            "ratio_ci95_high",
        ]);
        let n = |x: Option<f64>| x.map_or_else(String::new, |x| format!("{x}"));
        for c in &self.commands {
            for f in &c.figures {
                let r = f.ratio.as_ref();
                t.rows.push(vec![
                    c.command.clone(),
                    f.figure.into(),
                    f.unit.into(),
                    f.values.len().to_string(),
                    f.unmeasured.to_string(),
                    n(f.median),
                    n(f.min),
                    n(f.max),
                    n(f.spread),
                    n(r.map(|r| r.median)),
                    n(r.and_then(|r| r.ci95).map(|c| c[0])),
                    n(r.and_then(|r| r.ci95).map(|c| c[1])),
                ]);
            }
        }
        t
    }
}

/// What the table's columns mean, printed under it.
const SPREAD: &str = "spread: (max − min) / median of the rounds' values; × #1: the median of the per-round ratios to #1, with its 95 % bootstrap interval.";

fn ratio_text(r: &RatioStats) -> String {
    match r.ci95 {
        Some([lo, hi]) => format!("{:.3} [{lo:.3}, {hi:.3}]", r.median),
        None => format!("{:.3}", r.median),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(commands: &[&str]) -> BenchOptions {
        BenchOptions {
            commands: commands.iter().map(|c| c.to_string()).collect(),
            runs: 3,
            warmup: 0,
            prepare: None,
            shell: false,
            show_output: false,
            tracker: None,
            syscalls: None,
            seed: Some(1),
            json: None,
            csv: None,
            markdown: None,
            budgets: Vec::new(),
        }
    }

    #[test]
    fn unmeasured_values_are_left_out_and_said_never_zero() {
        let figures = [Figure::MaxPss, Figure::Processes];
        let pss = |v: Option<u64>| v.ok_or_else(|| "no PSS read".to_string());
        // Three rounds of two commands; the second lacks Max PSS once.
        let rounds: Vec<Vec<Values>> = [(10, Some(20)), (10, None), (10, Some(22))]
            .into_iter()
            .map(|(a, b)| vec![vec![pss(Some(a)), Ok(1)], vec![pss(b), Ok(2)]])
            .collect();
        let opts = options(&["a", "b"]);
        let mut rng = fastrand::Rng::with_seed(1);
        let r = Report::new(&opts, &figures, &rounds, 1, None, &mut rng);
        let b = &r.commands[1].figures[0];
        assert_eq!(b.values, [Some(20), None, Some(22)]);
        assert_eq!((b.unmeasured, b.median), (1, Some(21.0)));
        let ratio = b.ratio.as_ref().unwrap();
        assert_eq!((ratio.median, ratio.rounds), (2.1, 2));
        let text = r.text();
        assert!(
            text.contains("#2 max-pss: n/a on 1 of 3 runs: no PSS read"),
            "{text}"
        );
        assert!(text.contains("21 B (1 n/a)"), "{text}");
        assert!(
            text.contains("#2 processes: 2.00× #1 [2.00, 2.00]"),
            "{text}"
        );
        assert!(
            r.markdown()
                .contains("| #2 | processes | 2 | 2 | 2 | 0.0% | 2.000 [2.000, 2.000] |")
        );
    }

    #[test]
    fn commands_split_as_a_shell_would() {
        assert_eq!(
            split("fill 'a b' \"c\"", false).unwrap(),
            ["fill", "a b", "c"]
        );
        assert_eq!(split("a | b", true).unwrap(), ["sh", "-c", "a | b"]);
        assert!(
            split("echo 'open", false)
                .unwrap_err()
                .to_string()
                .contains("quote")
        );
        assert!(split("  ", false).is_err());
    }
}
