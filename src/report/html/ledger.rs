//! The ledger's per-process figures for the HTML page: one column per figure, each value taken
//! from the best source that measured it (`Ledger::best`, as `--tree` does), with that source,
//! so the page can show where each cell comes from.
//!
//! Owns only this recasting; what "best" means stays in `model::accounting`.

use crate::model::{Figures, Ledger, LedgerSource, Run, process_peak};
use serde::Serialize;

/// Each process's exact figures as columns.
#[derive(Serialize, Debug, Default)]
pub struct LedgerColumns {
    /// Where the values come from, referenced by index from each column's `source`.
    pub sources: Vec<FigureSource>,
    /// Only figures at least one process has, in a fixed order (CPU first).
    pub columns: Vec<LedgerColumn>,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct FigureSource {
    /// The ledger source (`taskstats`, `exit_stop`, `wait4`), or for peak RSS the
    /// interface it was read from.
    pub name: String,
    /// What it reads, for people (`Run::sources`).
    pub from: String,
    pub exact: bool,
}

#[derive(Serialize, Debug)]
pub struct LedgerColumn {
    /// The figure's name in the JSON's `Figures` (`cpu_ns` is user + system, or the exact
    /// runtime, as `Ledger::cpu`).
    pub key: &'static str,
    /// Each process's value; null when no source measured it.
    pub values: Vec<Option<u64>>,
    /// The index in `sources` of each value's source (-1 for null), or one index for all.
    pub source: SourceIndex,
}

#[derive(Serialize, Debug, PartialEq)]
#[serde(untagged)]
pub enum SourceIndex {
    /// Every value comes from the same source (the usual case: one tracker, one privilege).
    All(i32),
    Each(Vec<i32>),
}

type Pick = fn(&Figures) -> Option<u64>;

enum Shown {
    /// User + system, or the exact runtime (`Ledger::cpu`).
    Cpu,
    /// From `process_peak`: VmHWM at the exit stop comes before taskstats there (see its
    /// comment), and a sampled VmHWM counts too.
    PeakRss,
    /// A figure of `Figures`, from the best source that has it.
    Best(&'static str, Pick),
}

/// The figures shown, in column order.
const SHOWN: [Shown; 17] = [
    Shown::Cpu,
    Shown::Best("user_ns", |f| f.user_ns),
    Shown::Best("sys_ns", |f| f.sys_ns),
    Shown::Best("run_queue_ns", |f| f.run_queue_ns),
    Shown::Best("blkio_delay_ns", |f| f.blkio_delay_ns),
    Shown::Best("swap_reclaim_delay_ns", |f| f.swap_reclaim_delay_ns),
    Shown::Best("task_time_ns", |f| f.task_time_ns),
    Shown::PeakRss,
    Shown::Best("peak_vm_bytes", |f| f.peak_vm_bytes),
    Shown::Best("minor_faults", |f| f.minor_faults),
    Shown::Best("major_faults", |f| f.major_faults),
    Shown::Best("voluntary_switches", |f| f.voluntary_switches),
    Shown::Best("involuntary_switches", |f| f.involuntary_switches),
    Shown::Best("read_bytes", |f| f.read_bytes),
    Shown::Best("write_bytes", |f| f.write_bytes),
    Shown::Best("read_char_bytes", |f| f.read_char_bytes),
    Shown::Best("write_char_bytes", |f| f.write_char_bytes),
];

/// The delay-accounting figures: taskstats reports them as 0 when delay accounting is off,
/// which would read as "never waited", so they are shown only when it was on.
const DELAYS: [&str; 2] = ["blkio_delay_ns", "swap_reclaim_delay_ns"];

struct Builder<'a> {
    run: &'a Run,
    sources: Vec<FigureSource>,
    /// The index in `sources` of each ledger source, once used (taskstats, exit_stop, wait4).
    ledger_sources: [Option<i32>; 4],
    columns: Vec<LedgerColumn>,
}

impl Builder<'_> {
    fn source_index(&mut self, s: FigureSource) -> i32 {
        match self.sources.iter().position(|x| *x == s) {
            Some(k) => k as i32,
            None => {
                self.sources.push(s);
                self.sources.len() as i32 - 1
            }
        }
    }

    /// Called for every cell: the lookup is done once per source.
    fn ledger_source(&mut self, s: LedgerSource) -> i32 {
        let slot = match s {
            LedgerSource::Taskstats => 0,
            LedgerSource::ExitStop => 1,
            LedgerSource::Wait4 => 2,
            LedgerSource::LastSwitch => 3,
        };
        if let Some(k) = self.ledger_sources[slot] {
            return k;
        }
        let declared = self.run.sources.get(&format!("ledger.{}", s.name()));
        let k = self.source_index(FigureSource {
            name: s.name().to_string(),
            from: declared.map_or_else(|| s.name().to_string(), |d| d.from.clone()),
            exact: declared.is_none_or(|d| d.exact),
        });
        self.ledger_sources[slot] = Some(k);
        k
    }

    /// Adds the column of `key` when some process has it.
    fn column(&mut self, key: &'static str, cells: Vec<Option<(u64, i32)>>) {
        if cells.iter().all(Option::is_none) {
            return;
        }
        let values = cells.iter().map(|c| c.map(|x| x.0)).collect();
        let each: Vec<i32> = cells.iter().map(|c| c.map_or(-1, |x| x.1)).collect();
        let first = each.iter().copied().find(|&k| k >= 0).unwrap_or(-1);
        // A null value has no source, whatever the index says.
        let source = if each.iter().all(|&k| k == first || k < 0) {
            SourceIndex::All(first)
        } else {
            SourceIndex::Each(each)
        };
        self.columns.push(LedgerColumn {
            key,
            values,
            source,
        });
    }

    fn best_column(
        &mut self,
        key: &'static str,
        pick: impl Fn(&Ledger) -> Option<(u64, LedgerSource)>,
    ) {
        let run = self.run;
        let cells = run
            .processes
            .iter()
            .map(|p| {
                let (v, s) = p.ledger.as_ref().and_then(&pick)?;
                Some((v, self.ledger_source(s)))
            })
            .collect();
        self.column(key, cells);
    }

    fn peak_column(&mut self) {
        let run = self.run;
        let cells = run
            .processes
            .iter()
            .map(|p| {
                let (v, from, exact) = process_peak(run, p)?;
                let k = self.source_index(FigureSource {
                    name: from.clone(),
                    from,
                    exact,
                });
                Some((v, k))
            })
            .collect();
        self.column("peak_rss_bytes", cells);
    }
}

/// The ledger columns of a Run.
pub fn columns(run: &Run) -> LedgerColumns {
    let mut b = Builder {
        run,
        sources: Vec::new(),
        ledger_sources: [None; 4],
        columns: Vec::new(),
    };
    let delays_on = run.accounting.as_ref().and_then(|a| a.delays_on) == Some(true);
    for shown in SHOWN {
        match shown {
            Shown::Cpu => b.best_column("cpu_ns", Ledger::cpu),
            Shown::PeakRss => b.peak_column(),
            Shown::Best(key, _) if DELAYS.contains(&key) && !delays_on => {}
            Shown::Best(key, pick) => b.best_column(key, |l| l.best(pick)),
        }
    }
    LedgerColumns {
        sources: b.sources,
        columns: b.columns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testing;

    #[test]
    fn best_sources_and_delays() {
        let run = testing::build_accounting();
        let c = columns(&run);
        let keys: Vec<&str> = c.columns.iter().map(|c| c.key).collect();
        // The hand-built run had delay accounting on, so its waits are columns.
        assert_eq!(
            keys,
            [
                "cpu_ns",
                "user_ns",
                "sys_ns",
                "run_queue_ns",
                "blkio_delay_ns",
                "swap_reclaim_delay_ns",
                "task_time_ns",
                "peak_rss_bytes",
                "peak_vm_bytes",
                "minor_faults",
                "major_faults",
                "voluntary_switches",
                "involuntary_switches",
                "read_bytes",
                "write_bytes",
                "read_char_bytes",
                "write_char_bytes",
            ]
        );
        let names: Vec<&str> = c.sources.iter().map(|s| s.name.as_str()).collect();
        assert!(names.contains(&"taskstats"), "{names:?}");

        let mut off = run.clone();
        off.accounting.as_mut().unwrap().delays_on = Some(false);
        let c = columns(&off);
        assert!(!c.columns.iter().any(|c| DELAYS.contains(&c.key)));
    }

    #[test]
    fn a_run_without_ledgers_has_only_its_peaks() {
        let c = columns(&testing::build());
        let keys: Vec<&str> = c.columns.iter().map(|c| c.key).collect();
        assert_eq!(keys, ["peak_rss_bytes"]);
        assert_eq!(c.columns[0].source, SourceIndex::All(0));
        assert!(c.sources[0].exact);
    }
}
