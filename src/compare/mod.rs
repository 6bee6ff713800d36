//! Comparing runs and guarding budgets: `ste bench` (repeated runs of commands, statistics and
//! ratios), `ste diff` (two runs side by side, totals and by program) and `--budget` (a limit
//! on a figure, checked after a run, a bench or a diff).
//!
//! Owns the figures these compare ([`Figure`]: their names on the command line, their units and
//! how each is read from a finished `model::Run`, with why when the run has none). It measures
//! nothing itself: a bench runs `ste` once per run and reads back the Run it wrote, a diff reads
//! two Runs, so every figure is the one `ste COMMAND` reports. It must not touch the recorder,
//! the sources or the reports: it only reads Runs.

pub mod bench;
pub mod budget;
pub mod diff;
pub mod export;
pub mod stats;

use crate::model::Run;
use crate::units::{bytes_human, duration_human, group_thousands};

/// A figure of a run that can be compared and budgeted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    Wall,
    User,
    System,
    Cpu,
    MaxPss,
    PeakRss,
    GroupPeak,
    Processes,
    Execs,
    Calls,
}

/// What a figure counts, for parsing limits and printing values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Ns,
    Bytes,
    Count,
}

impl Figure {
    pub const ALL: [Figure; 10] = [
        Figure::Wall,
        Figure::User,
        Figure::System,
        Figure::Cpu,
        Figure::MaxPss,
        Figure::PeakRss,
        Figure::GroupPeak,
        Figure::Processes,
        Figure::Execs,
        Figure::Calls,
    ];

    /// The name on the command line and in exports.
    pub fn name(self) -> &'static str {
        match self {
            Figure::Wall => "wall",
            Figure::User => "user",
            Figure::System => "system",
            Figure::Cpu => "cpu",
            Figure::MaxPss => "max-pss",
            Figure::PeakRss => "peak-rss",
            Figure::GroupPeak => "group-peak",
            Figure::Processes => "processes",
            Figure::Execs => "execs",
            Figure::Calls => "calls",
        }
    }

    /// The figure named `name` (`sys` is taken for `system`).
    pub fn parse(name: &str) -> Result<Figure, String> {
        let name = if name == "sys" { "system" } else { name };
        Figure::ALL
            .into_iter()
            .find(|f| f.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Figure::ALL.iter().map(|f| f.name()).collect();
                format!("unknown figure {name:?} (known: {})", names.join(", "))
            })
    }

    pub fn unit(self) -> Unit {
        match self {
            Figure::Wall | Figure::User | Figure::System | Figure::Cpu => Unit::Ns,
            Figure::MaxPss | Figure::PeakRss | Figure::GroupPeak => Unit::Bytes,
            Figure::Processes | Figure::Execs | Figure::Calls => Unit::Count,
        }
    }

    /// The figure on `run`, or why the run has none.
    pub fn of(self, run: &Run) -> Result<u64, String> {
        let t = &run.totals;
        let cpu_why = "no source measured the tree's CPU on this run";
        match self {
            Figure::Wall => Ok(t.wall_ns),
            Figure::User => t.user_ns.ok_or_else(|| cpu_why.to_string()),
            Figure::System => t.sys_ns.ok_or_else(|| cpu_why.to_string()),
            Figure::Cpu => t
                .user_ns
                .zip(t.sys_ns)
                .map(|(u, s)| u.saturating_add(s))
                .ok_or_else(|| cpu_why.to_string()),
            // As the report: a peak that is all growth ste never read is bounded from above
            // only, and is no figure.
            Figure::MaxPss => match crate::report::max_pss::max_pss_sample(run) {
                Some(s) if crate::report::max_pss::beyond_reads(run, s) => Err(format!(
                    "the tree's peak was never read, only bounded from above ({} bytes, the kernel's high-water mark)",
                    s.pss_bytes
                )),
                _ => t
                    .max_pss_bytes
                    .ok_or_else(|| "no PSS sample of the tree was read on this run".to_string()),
            },
            Figure::PeakRss => t
                .peak_rss_bytes
                .ok_or_else(|| "no process's high-water RSS was read on this run".to_string()),
            Figure::GroupPeak => group_peak(run),
            Figure::Processes => Ok(t.processes),
            Figure::Execs => Ok(t.execs),
            Figure::Calls => match &run.syscalls {
                // Calls with a number outside the tables reached the kernel and were counted,
                // under no name: they are calls all the same.
                Some(s) => Ok(crate::units::sum(s.calls.iter().map(|c| c.calls))
                    .saturating_add(s.uncounted.bad_numbers)),
                None => Err("system calls were not counted on this run (--syscalls)".into()),
            },
        }
    }

    /// `value` in this figure's unit, for people: `1.5s`, `64 MiB`, `1,024`.
    pub fn format(self, value: f64) -> String {
        let v = value.max(0.0).round() as u64;
        match self.unit() {
            Unit::Ns => duration_human(v),
            Unit::Bytes => bytes_human(v),
            Unit::Count => group_thousands(v),
        }
    }
}

/// The cgroup's peak, or why there is none (the accounting's own reason when it gave one).
fn group_peak(run: &Run) -> Result<u64, String> {
    let acc = run.accounting.as_ref();
    if let Some(g) = acc.and_then(|a| a.memory.group_peak.as_ref()) {
        return Ok(g.bytes);
    }
    let why = acc
        .and_then(|a| {
            a.unavailable
                .iter()
                .find(|u| u.figure.contains("group") || u.figure == "exact accounting")
        })
        .map(|u| u.why.clone());
    Err(match why {
        Some(w) => format!("the run had no cgroup peak: {w}"),
        None => "the run had no cgroup peak (no cgroup of its own, or --no-cgroup)".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_list_the_known() {
        for f in Figure::ALL {
            assert_eq!(Figure::parse(f.name()), Ok(f));
        }
        assert_eq!(Figure::parse("sys"), Ok(Figure::System));
        let e = Figure::parse("rss").unwrap_err();
        assert!(e.contains("\"rss\"") && e.contains("max-pss"), "{e}");
    }

    #[test]
    fn values_print_in_their_unit() {
        assert_eq!(Figure::Wall.format(1.5e9), "1.5s");
        assert_eq!(Figure::MaxPss.format((64u64 << 20) as f64), "64 MiB");
        assert_eq!(Figure::Processes.format(1024.0), "1,024");
    }
}
