//! Budgets: `--budget NAME=LIMIT`, a limit on one figure, checked after a run (`ste`, `ste run`,
//! `ste record`: the run's figure), a bench (each command's median) or a diff (the change from
//! A to B in percent, `max-pss=+5%`).
//!
//! Owns parsing a budget, checking it, the one line per budget printed after the report, and
//! the exit status that follows: the command's when it failed; else [`EXCEEDED_STATUS`] when a
//! budget is exceeded. A budget on a figure the run did not measure is an error that says why,
//! never a pass (ste's own failure, 125, after the report). Sizes and durations are parsed by
//! `units`, the figures read by [`Figure::of`]; nothing here measures or prints a report.

use super::{Figure, Unit};
use crate::units::{parse_duration, parse_size};

/// ste's exit status when the command succeeded and a budget was exceeded: distinct from the
/// 125–127 of ste's own failures and from the 128+N of a signal.
pub const EXCEEDED_STATUS: i32 = 120;

/// A limit: the most a figure may be, or the most it may change in a diff.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Limit {
    /// In the figure's unit (ns, bytes, a count).
    Value(u64),
    /// A change in percent (`+5%` is 5.0, `-10%` is −10.0).
    Change(f64),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    pub figure: Figure,
    pub limit: Limit,
}

/// `NAME=LIMIT`: `wall=10m`, `max-pss=2GiB`, `processes=5000`, `max-pss=+5%`.
pub fn parse(s: &str) -> Result<Budget, String> {
    let (name, limit) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not NAME=LIMIT (examples: wall=10m, max-pss=2GiB, processes=5000, max-pss=+5%)"))?;
    let figure = Figure::parse(name.trim())?;
    let limit = limit.trim();
    if let Some(p) = limit.strip_suffix('%') {
        let v: f64 = p
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite())
            .ok_or_else(|| {
                format!("{limit:?} is not a change in percent (examples: +5%, 10%, -2%)")
            })?;
        return Ok(Budget {
            figure,
            limit: Limit::Change(v),
        });
    }
    let value = match figure.unit() {
        Unit::Ns => parse_duration(limit).map(|d| d.as_nanos().min(u128::from(u64::MAX)) as u64),
        Unit::Bytes => parse_size(limit),
        Unit::Count => limit
            .parse::<u64>()
            .map_err(|_| format!("{limit:?} is not a count (a whole number, e.g. 5000)")),
    }
    .map_err(|e| format!("{}: {e}", figure.name()))?;
    Ok(Budget {
        figure,
        limit: Limit::Value(value),
    })
}

impl Budget {
    /// The budget as typed back: `max-pss=2 GiB`, `wall=+5%`.
    pub fn describe(&self) -> String {
        format!("{}={}", self.figure.name(), self.limit_text())
    }

    fn limit_text(&self) -> String {
        match self.limit {
            Limit::Value(v) => self.figure.format(v as f64),
            Limit::Change(p) => format!("{p:+}%"),
        }
    }
}

/// Refuses, before anything runs, budgets of the wrong kind for `what`: a change in percent
/// needs two runs (`ste diff`); a diff takes only changes.
pub fn require(budgets: &[Budget], changes: bool, what: &str) -> anyhow::Result<()> {
    for b in budgets {
        match (b.limit, changes) {
            (Limit::Change(_), false) => anyhow::bail!(
                "--budget {}: a change in percent compares two runs (ste diff); {what} takes a limit in the figure's unit (e.g. max-pss=2GiB, wall=10m)",
                b.describe()
            ),
            (Limit::Value(_), true) => anyhow::bail!(
                "--budget {}: {what} checks the change from A to B, in percent (e.g. {}=+5%)",
                b.describe(),
                b.figure.name()
            ),
            _ => {}
        }
    }
    Ok(())
}

/// What a run will measure, as its options say before it starts: the figures only an option
/// brings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Measured {
    /// `--syscalls`: the `calls` figure.
    pub syscalls: bool,
    /// ste's cgroup (not `--no-cgroup`, not `--no-accounting`): the `group-peak` figure.
    pub cgroup: bool,
}

/// Refuses, before anything runs, a budget on a figure the options leave unmeasured: the
/// run would only end in an error after the command had run (125, with nothing checked).
pub fn require_measured(budgets: &[Budget], m: Measured, what: &str) -> anyhow::Result<()> {
    for b in budgets {
        match b.figure {
            Figure::Calls if !m.syscalls => anyhow::bail!(
                "--budget {}: system calls are counted only with --syscalls; {what} without it has no calls to check",
                b.describe()
            ),
            Figure::GroupPeak if !m.cgroup => anyhow::bail!(
                "--budget {}: the group peak is the memory of ste's cgroup, which --no-cgroup and --no-accounting leave out",
                b.describe()
            ),
            _ => {}
        }
    }
    Ok(())
}

/// What a check found.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Ok,
    Exceeded,
    /// The figure was not measured: why.
    Unmeasured(String),
}

/// One budget checked: its line for the report, and the verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    pub line: String,
    pub verdict: Verdict,
}

/// Checks `budget` against `value` (a figure in its unit, or a change in percent for a
/// [`Limit::Change`]), or the reason the figure is unknown. `label` says what was checked
/// (`median of #2`, `change`), empty for a run.
pub fn check(budget: &Budget, value: Result<f64, String>, label: &str) -> Checked {
    let label = if label.is_empty() {
        String::new()
    } else {
        format!(" ({label})")
    };
    let name = budget.figure.name();
    let limit = budget.limit_text();
    match value {
        Err(why) => Checked {
            line: format!("budget {name}{label}: n/a, limit {limit}: not measured: {why}"),
            verdict: Verdict::Unmeasured(format!(
                "the budget {} cannot be checked: {why}",
                budget.describe()
            )),
        },
        Ok(v) => {
            let (shown, over) = match budget.limit {
                Limit::Value(l) => (budget.figure.format(v), v > l as f64),
                Limit::Change(l) => (format!("{v:+.1}%"), v > l),
            };
            let verdict = if over { Verdict::Exceeded } else { Verdict::Ok };
            let word = if over { "EXCEEDED" } else { "ok" };
            Checked {
                line: format!("budget {name}{label}: {shown}, limit {limit}: {word}"),
                verdict,
            }
        }
    }
}

/// The status ste exits with after checking budgets, given the status it would have had:
/// a failure's own status wins; then an unmeasured figure is an error; then an exceeded budget
/// is [`EXCEEDED_STATUS`].
pub fn status(status: i32, checked: &[Checked]) -> anyhow::Result<i32> {
    if status != 0 {
        return Ok(status);
    }
    if let Some(why) = checked.iter().find_map(|c| match &c.verdict {
        Verdict::Unmeasured(why) => Some(why),
        _ => None,
    }) {
        anyhow::bail!("{why}");
    }
    Ok(if checked.iter().any(|c| c.verdict == Verdict::Exceeded) {
        EXCEEDED_STATUS
    } else {
        0
    })
}

/// Checks `budgets` against a finished run, as `ste COMMAND` does.
pub fn check_run(budgets: &[Budget], run: &crate::model::Run) -> Vec<Checked> {
    budgets
        .iter()
        .map(|b| check(b, b.figure.of(run).map(|v| v as f64), ""))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_limits_in_each_unit() {
        let b = |s| parse(s).unwrap();
        assert_eq!(b("wall=10m").limit, Limit::Value(600_000_000_000));
        assert_eq!(b("max-pss=2GiB").limit, Limit::Value(2 << 30));
        assert_eq!(b("processes=5000").limit, Limit::Value(5000));
        assert_eq!(b("max-pss=+5%").limit, Limit::Change(5.0));
        assert_eq!(b("cpu=-2.5%").limit, Limit::Change(-2.5));
        assert_eq!(b("sys=1s").figure, Figure::System);
    }

    #[test]
    fn bad_budgets_say_what_is_wrong() {
        let e = |s| parse(s).unwrap_err();
        assert!(e("wall").contains("NAME=LIMIT"));
        assert!(e("rss=1G").contains("unknown figure"));
        assert!(e("max-pss=lots").contains("max-pss"));
        assert!(e("wall=soon").contains("wall"));
        assert!(e("processes=1.5").contains("count"));
        assert!(e("wall=x%").contains("percent"));
    }

    #[test]
    fn checks_give_lines_and_statuses() {
        let pss = parse("max-pss=100MiB").unwrap();
        let ok = check(&pss, Ok((64u64 << 20) as f64), "");
        assert_eq!(ok.line, "budget max-pss: 64 MiB, limit 100 MiB: ok");
        let over = check(&pss, Ok((128u64 << 20) as f64), "");
        assert_eq!(over.verdict, Verdict::Exceeded);
        let unknown = check(&pss, Err("no PSS".into()), "");
        assert!(matches!(unknown.verdict, Verdict::Unmeasured(_)));
        assert_eq!(status(0, std::slice::from_ref(&ok)).unwrap(), 0);
        assert_eq!(
            status(0, &[ok.clone(), over.clone()]).unwrap(),
            EXCEEDED_STATUS
        );
        // The command's failure wins; an unmeasured figure is an error, never a pass.
        assert_eq!(status(3, std::slice::from_ref(&over)).unwrap(), 3);
        assert!(
            status(0, &[over, unknown])
                .unwrap_err()
                .to_string()
                .contains("no PSS")
        );
        let change = parse("max-pss=+5%").unwrap();
        assert_eq!(check(&change, Ok(7.0), "change").verdict, Verdict::Exceeded);
        assert_eq!(check(&change, Ok(-30.0), "change").verdict, Verdict::Ok);
    }

    #[test]
    fn budgets_on_figures_the_options_leave_out_are_refused() {
        let calls = [parse("calls=10").unwrap()];
        let group = [parse("group-peak=1GiB").unwrap()];
        let all = Measured {
            syscalls: true,
            cgroup: true,
        };
        assert!(require_measured(&calls, all, "a run").is_ok());
        assert!(require_measured(&group, all, "a run").is_ok());
        let e = require_measured(
            &calls,
            Measured {
                syscalls: false,
                ..all
            },
            "a run",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("--budget calls=10: system calls are counted only with --syscalls"));
        let e = require_measured(
            &group,
            Measured {
                cgroup: false,
                ..all
            },
            "a run",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("--no-cgroup"), "{e}");
    }

    #[test]
    fn changes_only_in_diffs_and_values_only_in_runs() {
        let change = [parse("wall=+5%").unwrap()];
        let value = [parse("wall=5s").unwrap()];
        assert!(require(&change, false, "a run").is_err());
        assert!(require(&value, true, "ste diff").is_err());
        assert!(require(&change, true, "ste diff").is_ok());
        assert!(require(&value, false, "a run").is_ok());
    }
}
