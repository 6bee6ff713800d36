//! Max PSS in words: which sample it was taken from, the interval the run proves
//! (`[largest lower end, largest upper end]`), the line under `Max PSS:` saying how exact it is
//! and where each end comes from, and the sampler's line (its pace, cost and rounds).
//!
//! A pure function of a Run, shared by the text report, the HTML page and `ste bench`/`ste
//! diff` (`compare`), which must say the same of the same figure. Must not compute a figure:
//! the interval is the recorder's (`ledger::recorder`), from the samples' own bounds.

use crate::model::{Run, SampleKind};
use crate::units::{duration_human, group_thousands, percent};

/// The sample Max PSS was taken from.
pub(crate) fn max_pss_sample(run: &Run) -> Option<&crate::model::Sample> {
    let t = run.totals.max_pss_t_ns?;
    let b = run.totals.max_pss_bytes?;
    run.samples.iter().find(|s| s.t_ns == t && s.pss_bytes == b)
}

/// Max PSS's proven interval: the largest lower bound and the largest upper bound of any
/// sample (a Run of a version before them: from its samples).
pub(crate) fn max_pss_interval(run: &Run) -> Option<(u64, u64)> {
    let t = &run.totals;
    match (t.max_pss_low_bytes, t.max_pss_high_bytes) {
        (Some(l), Some(h)) => Some((l, h)),
        // No upper end (no high-water mark at exit): only the lower one is proven.
        (Some(_), None) if run.sampler.exit_marks == Some(false) => None,
        _ => {
            let low = run.samples.iter().map(|s| s.low()).max()?;
            let high = run.samples.iter().map(|s| s.high()).max()?;
            Some((low, high))
        }
    }
}

/// A peak that is all growth ste never read (a process ended before ste's first read of it,
/// and no read of the tree proves anything): only the kernel's high-water mark bounds it, from
/// above, so there is no figure to print.
pub(crate) fn beyond_reads(run: &Run, s: &crate::model::Sample) -> bool {
    s.kind == SampleKind::ExitPeak && max_pss_interval(run).is_some_and(|(l, _)| l == 0)
}

/// The line under `Max PSS:` saying how exact it is, when it has a sample behind it.
pub(crate) fn max_pss_line(run: &Run) -> Option<String> {
    max_pss_sample(run).map(|p| max_pss_exactness(run, p))
}

/// How exact Max PSS is, in a few words: exact (the proven interval is one figure) and from
/// which read, or the interval and where its two ends come from, with the reads behind it.
fn max_pss_exactness(run: &Run, peak: &crate::model::Sample) -> String {
    let s = &run.sampler;
    let exact_reads = run
        .samples
        .iter()
        .filter(|x| x.kind == SampleKind::Exact)
        .count();
    let ticks = match s.effective_tick_ns {
        Some(i) => format!("statm counters every {}", duration_human(i)),
        None => "statm counters".to_string(),
    };
    let reads = format!(
        "{exact_reads} exact read{} in all{}",
        if exact_reads == 1 { "" } else { "s" },
        if s.ticks > 0 {
            format!(", {ticks} between them")
        } else {
            String::new()
        }
    );
    if run.sampler.exit_marks == Some(false)
        && let Some(low) = run.totals.max_pss_low_bytes
    {
        return format!(
            "at least {} bytes, the most its reads prove; no upper end: nothing here gives a process's high-water mark at its exit (netlink without root: taskstats needs it), so what a process grew after its last read is unseen ({reads})",
            group_thousands(low)
        );
    }
    let (low, high) = max_pss_interval(run).unwrap_or((peak.pss_bytes, peak.pss_bytes));
    if beyond_reads(run, peak) {
        return format!(
            "a process ended before ste's first read of it (it reads a program {} after its exec): at most {} bytes, the kernel's high-water mark of its resident size",
            duration_human(s.exec_settle_ns.unwrap_or(0)),
            group_thousands(high)
        );
    }
    // Where a figure came from: the first sample that reaches it.
    let whence = |v: u64, low_end: bool| -> String {
        let Some(x) = run
            .samples
            .iter()
            .find(|x| if low_end { x.low() == v } else { x.high() == v })
        else {
            return "a sample".into();
        };
        let at = duration_human(x.t_ns);
        match x.kind {
            SampleKind::Exact => format!("the exact read of every process at {at}"),
            SampleKind::Carried => format!("the counters at {at}"),
            SampleKind::ExitPeak => format!("a process's high-water mark at its exit at {at}"),
        }
    };
    if low == high {
        return match peak.kind {
            SampleKind::Exact => format!(
                "exact: smaps_rollup of every process at {}, one moment ({reads})",
                duration_human(peak.t_ns)
            ),
            _ => format!(
                "exact: {}, which prove it (only memory of known size moved since the last exact read; {reads})",
                whence(low, true)
            ),
        };
    }
    let pct = |v: u64| {
        if peak.pss_bytes == 0 {
            String::new()
        } else {
            percent(v as f64 / peak.pss_bytes as f64)
        }
    };
    format!(
        "between {} and {} bytes (-{}, +{}): at least {}, at most what {} allow ({reads})",
        group_thousands(low),
        group_thousands(high),
        pct(peak.pss_bytes.saturating_sub(low)),
        pct(high.saturating_sub(peak.pss_bytes)),
        whence(low, true),
        whence(high, false),
    )
}

pub(crate) fn sampler_text(run: &Run) -> String {
    let s = &run.sampler;
    let mut out = format!(
        "PSS from /proc/PID/smaps_rollup, {} round{}",
        s.rounds,
        if s.rounds == 1 { "" } else { "s" }
    );
    if let Some(i) = s.effective_interval_ns {
        out += &format!(", effective interval {}", duration_human(i));
    }
    if let Some(g) = s.max_gap_ns {
        out += &format!(" (longest gap between rounds {})", duration_human(g));
    }
    if let Some(m) = s.moments {
        out += &format!(
            ", {} of them one moment (exact)",
            group_thousands(m.min(s.rounds))
        );
    }
    if let (Some(n), Some(cpu)) = (s.max_rounds, s.max_rounds_cpu_ns)
        && n > 0
    {
        out += &format!(
            ", {} beyond the budget because the counters could not tell the maximum to 2% (shared memory), {} of CPU",
            group_thousands(n),
            duration_human(cpu)
        );
    }
    if s.ticks > 0 {
        out += &format!(
            "; statm counters in {} tick{}",
            group_thousands(s.ticks),
            if s.ticks == 1 { "" } else { "s" }
        );
        if let Some(i) = s.effective_tick_ns {
            out += &format!(" every {}", duration_human(i));
        }
        out += &format!(" ({} of CPU)", duration_human(s.tick_cpu_ns));
    }
    if let Some(g) = s.max_look_gap_ns {
        out += &format!("; the tree went unread for {} at most", duration_human(g));
    }
    match (s.mode.as_str(), s.budget, s.interval_ns) {
        ("fixed", _, Some(i)) => out += &format!("; fixed interval {}", duration_human(i)),
        (_, Some(b), _) => {
            let used = if run.totals.wall_ns > 0 {
                s.cpu_ns as f64 / run.totals.wall_ns as f64
            } else {
                0.0
            };
            out += &format!(
                "; budget {} of a core (plus a {} start-up allowance), used {} ({} of wall)",
                percent(b),
                duration_human(s.burst_ns.unwrap_or(0)),
                duration_human(s.cpu_ns),
                percent(used)
            );
        }
        _ => {}
    }
    if let Some(text) = unreadable_text(run) {
        out += "; ";
        out += &text;
    }
    out
}

/// Processes the sampler could not read, when there were some: a loss of PSS, with its size.
pub(crate) fn unreadable_text(run: &Run) -> Option<String> {
    let unreadable: Vec<&crate::model::Sample> =
        run.samples.iter().filter(|x| x.unreadable > 0).collect();
    unreadable.iter().map(|x| x.unreadable).max().map(|most| {
        let at_max = run
            .samples
            .iter()
            .find(|x| Some(x.t_ns) == run.totals.max_pss_t_ns)
            .is_some_and(|x| x.unreadable > 0);
        format!(
            "up to {most} process{} per round could not be read (permission denied: setuid or non-dumpable programs) and are left out of PSS in {} round{}{}",
            if most == 1 { "" } else { "es" },
            unreadable.len(),
            if unreadable.len() == 1 { "" } else { "s" },
            if at_max {
                ", including the one of Max PSS, which is therefore a lower bound"
            } else {
                ""
            }
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Sample, SamplerInfo};

    /// A run whose samples are `samples` (time, kind, estimate, low, high), through the
    /// recorder, which makes the headline's interval.
    fn run_of_samples(samples: &[(u64, SampleKind, u64, u64, u64)]) -> Run {
        let events = samples
            .iter()
            .map(|&(t, kind, pss, low, high)| crate::bus::event::Stamped {
                t_ns: t,
                event: crate::bus::event::Event::Sample {
                    sample: Sample {
                        t_ns: t,
                        pss_bytes: pss,
                        processes: 1,
                        kind,
                        low_bytes: Some(low),
                        high_bytes: Some(high),
                        ..Default::default()
                    },
                },
            })
            .collect::<Vec<_>>();
        crate::ledger::recorder::Recorder::replay(events)
    }

    /// Where no high-water mark at exit reached the sampler (netlink without root), no sample
    /// bounds what a process grew after its last read: the run has no upper end, and says so.
    #[test]
    fn without_marks_at_exit_max_pss_is_a_lower_bound() {
        const MS: u64 = 1_000_000;
        let mut events: Vec<crate::bus::event::Stamped> = [(10 * MS, 100), (20 * MS, 120)]
            .iter()
            .map(|&(t, pss)| crate::bus::event::Stamped {
                t_ns: t,
                event: crate::bus::event::Event::Sample {
                    sample: Sample {
                        t_ns: t,
                        pss_bytes: pss,
                        processes: 1,
                        kind: SampleKind::Exact,
                        low_bytes: Some(pss),
                        high_bytes: Some(pss),
                        ..Default::default()
                    },
                },
            })
            .collect();
        events.push(crate::bus::event::Stamped {
            t_ns: 30 * MS,
            event: crate::bus::event::Event::SamplerDone {
                info: Box::new(SamplerInfo {
                    exit_marks: Some(false),
                    ..Default::default()
                }),
            },
        });
        let run = crate::ledger::recorder::Recorder::replay(events);
        let t = &run.totals;
        assert_eq!(
            (t.max_pss_low_bytes, t.max_pss_high_bytes),
            (Some(120), None)
        );
        let line = max_pss_line(&run).unwrap();
        assert!(line.starts_with("at least 120 bytes"), "{line}");
        assert!(line.contains("no upper end"), "{line}");
    }

    /// Max PSS takes every sample's bounds: the largest lower bound and the largest upper
    /// bound, wherever they are, and says "exact" only when they meet.
    #[test]
    fn the_headline_interval_takes_every_samples_bounds() {
        const MS: u64 = 1_000_000;
        let run = run_of_samples(&[
            (10 * MS, SampleKind::Exact, 100, 100, 100),
            (20 * MS, SampleKind::Carried, 120, 90, 150),
            (30 * MS, SampleKind::ExitPeak, 130, 80, 160),
            (40 * MS, SampleKind::Carried, 95, 95, 95),
        ]);
        let t = &run.totals;
        assert_eq!(t.max_pss_bytes, Some(130), "the largest estimate");
        assert_eq!(
            (t.max_pss_low_bytes, t.max_pss_high_bytes),
            (Some(100), Some(160))
        );
        let line = max_pss_line(&run).unwrap();
        assert!(
            line.starts_with("between 100 and 160 bytes (-23%, +23%): at least the exact read of every process at 10ms, at most what a process's high-water mark at its exit at 30ms allow"),
            "{line}"
        );
        // An exact sample is the maximum, but a carried one may have been higher: not exact.
        let run = run_of_samples(&[
            (10 * MS, SampleKind::Exact, 100, 100, 100),
            (20 * MS, SampleKind::Carried, 90, 60, 110),
        ]);
        assert_eq!(run.totals.max_pss_bytes, Some(100));
        let line = max_pss_line(&run).unwrap();
        assert!(line.starts_with("between 100 and 110 bytes"), "{line}");
        // Every bound below the exact maximum: exact.
        let run = run_of_samples(&[
            (10 * MS, SampleKind::Exact, 100, 100, 100),
            (20 * MS, SampleKind::Carried, 90, 60, 100),
        ]);
        assert!(
            max_pss_line(&run)
                .unwrap()
                .starts_with("exact: smaps_rollup of every process at 10ms, one moment")
        );
        // Counters that prove a figure (private memory grown since an exact read).
        let run = run_of_samples(&[
            (10 * MS, SampleKind::Exact, 100, 100, 100),
            (20 * MS, SampleKind::Carried, 300, 300, 300),
        ]);
        assert!(
            max_pss_line(&run)
                .unwrap()
                .starts_with("exact: the counters at 20ms, which prove it")
        );
    }

    /// A record of a version before the interval: its samples' symmetric bound gives it (an
    /// exit peak's was an upper bound).
    #[test]
    fn an_older_records_bound_gives_the_interval() {
        let old = |kind, pss, bound| Sample {
            pss_bytes: pss,
            kind,
            bound_bytes: bound,
            ..Default::default()
        };
        let s = old(SampleKind::Carried, 100, Some(10));
        assert_eq!((s.low(), s.high()), (90, 110));
        let s = old(SampleKind::ExitPeak, 100, Some(30));
        assert_eq!((s.low(), s.high()), (70, 100));
        let s = old(SampleKind::Exact, 100, None);
        assert_eq!((s.low(), s.high()), (100, 100));
    }
}
