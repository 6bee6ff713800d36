//! CPU rates (cores) for the graphical reports: each process's CPU between the moments it was
//! known, over intervals long enough to mean something, and never more than the machine could
//! run.
//!
//! Owns the rule for those intervals and the caps; the readings themselves are `names`'s, and
//! drawing them is the Perfetto trace's and the HTML page's. Pure functions of a Run.
//!
//! A process's CPU is known at its start (none yet), at each sampling round that read its
//! `/proc/PID/stat` (utime and stime, each rounded down to a 10 ms clock tick, so a difference
//! of two readings is within 20 ms of the truth), and at its end (its ledger's CPU, in
//! nanoseconds, when a source measured it). A rate is the CPU between two of these moments
//! divided by the time between them: taken over a few milliseconds (a round that reads a new
//! image 1 ms after the last tick), 20 ms of rounding made one compiler 20,000 "cores". So the
//! interval between two readings is at least [`MIN_SPAN_NS`]: shorter ones are joined to the
//! next, and a process's last short one to the one before it. Between two exact moments (its
//! start and end, with no reading between) any length will do.

use crate::model::Run;
use crate::report::names::{Tree, readings};

/// The shortest interval a rate is taken over between two readings of `/proc/PID/stat`: its
/// 10 ms ticks (utime and stime each rounded down) put a difference within 20 ms of the
/// truth, within 0.2 of a core over 100 ms.
pub const MIN_SPAN_NS: u64 = 100_000_000;

/// One process's CPU over an interval, as a rate it held on average.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuSpan {
    /// Index in `run.processes`.
    pub process: usize,
    pub from_ns: u64,
    pub to_ns: u64,
    /// CPU used between `from_ns` and `to_ns`, at most what [`cap`] allows over it.
    pub cpu_ns: u64,
}

impl CpuSpan {
    /// Cores on average over the span.
    pub fn cores(&self) -> f64 {
        self.cpu_ns as f64 / self.to_ns.saturating_sub(self.from_ns).max(1) as f64
    }
}

/// The most cores a process can have run on at once: its threads (every thread it ever had,
/// so never fewer than ran together), and the machine's CPUs when the Run knows them.
pub fn cap(run: &Run, process: usize) -> u64 {
    let threads = u64::from(run.processes[process].threads.max(1));
    run.machine_cpus
        .map_or(threads, |c| threads.min(u64::from(c.max(1))))
}

/// A moment a process's cumulative CPU is known: `exact` at its start and from its ledger at
/// its end, in ticks at a sampling round.
#[derive(Debug, Clone, Copy)]
struct Known {
    t_ns: u64,
    cpu_ns: u64,
    exact: bool,
}

/// Every process's CPU as spans, in process order, each process's in time order and
/// contiguous from its start to the last moment its CPU was known.
pub fn cpu_spans(run: &Run, tree: &Tree) -> Vec<CpuSpan> {
    let mut known: Vec<Vec<Known>> = run
        .processes
        .iter()
        .map(|p| {
            vec![Known {
                t_ns: p.start_ns,
                cpu_ns: 0,
                exact: true,
            }]
        })
        .collect();
    for r in readings(run, tree) {
        if let Some(cpu) = r.cpu_ns {
            let t = run.samples[r.sample].t_ns;
            known[r.process].push(Known {
                t_ns: t,
                cpu_ns: cpu,
                exact: false,
            });
        }
    }
    for (i, p) in run.processes.iter().enumerate() {
        let end = p
            .end_ns
            .zip(p.ledger.as_ref().and_then(|l| l.cpu()).map(|(c, _)| c));
        if let Some((t, cpu)) = end {
            known[i].push(Known {
                t_ns: t,
                cpu_ns: cpu,
                exact: true,
            });
        }
    }
    let mut out = Vec::new();
    for (i, points) in known.iter().enumerate() {
        spans_of(i, points, cap(run, i), &mut out);
    }
    out
}

/// The spans of process `i` from the moments its CPU was known, in time order.
fn spans_of(i: usize, points: &[Known], cap: u64, out: &mut Vec<CpuSpan>) {
    let first = out.len();
    let mut from = points[0];
    let mut last = from;
    for &p in &points[1..] {
        if p.t_ns < from.t_ns {
            continue;
        }
        last = p;
        if p.t_ns - from.t_ns >= MIN_SPAN_NS || (from.exact && p.exact) {
            out.push(span(i, from, p));
            from = p;
        }
    }
    // A last interval too short for a rate of its own joins the one before it.
    if last.t_ns > from.t_ns
        && let Some(prev) = out[first..].last_mut()
    {
        let joined = span(
            i,
            Known {
                t_ns: prev.from_ns,
                cpu_ns: 0,
                exact: false,
            },
            Known {
                cpu_ns: prev.cpu_ns + last.cpu_ns.saturating_sub(from.cpu_ns),
                ..last
            },
        );
        *prev = joined;
    }
    for s in &mut out[first..] {
        let most = u128::from(s.to_ns - s.from_ns) * u128::from(cap);
        s.cpu_ns = s.cpu_ns.min(u64::try_from(most).unwrap_or(u64::MAX));
    }
}

fn span(process: usize, from: Known, to: Known) -> CpuSpan {
    CpuSpan {
        process,
        from_ns: from.t_ns,
        to_ns: to.t_ns,
        cpu_ns: to.cpu_ns.saturating_sub(from.cpu_ns),
    }
}

/// The tree's rate over time as steps, `(t_ns, cores)`, each holding until the next: the sum
/// of the spans running at each moment, at most the machine's CPUs (when the Run knows them:
/// each span is within its ticks' rounding, and those of processes that ran together may add
/// up past what the machine had). The last step is 0, at the end of the last span.
pub fn tree_steps(run: &Run, spans: &[CpuSpan]) -> Vec<(u64, f64)> {
    // Summed in millionths of a core: floats added and taken away again leave crumbs.
    const UNIT: f64 = 1e6;
    let mut edges: Vec<(u64, i64)> = Vec::with_capacity(spans.len() * 2);
    for s in spans.iter().filter(|s| s.to_ns > s.from_ns) {
        let v = (s.cores() * UNIT).round() as i64;
        edges.push((s.from_ns, v));
        edges.push((s.to_ns, -v));
    }
    edges.sort_by_key(|e| e.0);
    let most = run.machine_cpus.map_or(f64::INFINITY, f64::from);
    let mut steps: Vec<(u64, f64)> = Vec::new();
    let mut now = 0i64;
    for (k, &(t, d)) in edges.iter().enumerate() {
        now += d;
        if edges.get(k + 1).is_some_and(|n| n.0 == t) {
            continue;
        }
        let v = (now as f64 / UNIT).min(most);
        if steps.last().is_none_or(|l| l.1 != v) {
            steps.push((t, v));
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ProcessSample, Sample, SampleKind};
    use crate::report::testing::{process, run_of};

    const MS: u64 = 1_000_000;

    /// A run of one process read at `reads` (time, cumulative CPU), ended at `end` with
    /// `ledger` CPU when given.
    fn one(reads: &[(u64, u64)], end: u64, ledger: Option<u64>, cpus: Option<u32>) -> Run {
        let mut p = process(7, None, 0, Some(end));
        if let Some(cpu) = ledger {
            p.ledger = Some(crate::model::Ledger {
                wait4: Some(Box::new(crate::model::Figures {
                    cpu_ns: Some(cpu),
                    ..Default::default()
                })),
                ..Default::default()
            });
        }
        let mut run = run_of(vec![p]);
        run.machine_cpus = cpus;
        run.samples = reads
            .iter()
            .map(|&(t, cpu)| Sample {
                t_ns: t,
                processes: 1,
                kind: SampleKind::Exact,
                per_process: Some(vec![ProcessSample {
                    pid: 7,
                    pss_bytes: 1,
                    cpu_ns: Some(cpu),
                }]),
                ..Default::default()
            })
            .collect();
        run
    }

    fn spans(run: &Run) -> Vec<(u64, u64, u64)> {
        cpu_spans(run, &Tree::new(run))
            .iter()
            .map(|s| (s.from_ns / MS, s.to_ns / MS, s.cpu_ns / MS))
            .collect()
    }

    /// Issue 45: a round 32 µs after a carried tick read 20 ms more of a compiler, a rate of
    /// 20,000 cores. Readings closer than 100 ms are joined, and no rate passes the machine.
    #[test]
    fn readings_close_together_are_joined_and_capped() {
        let run = one(
            &[
                (150 * MS, 140 * MS),
                (150 * MS + 32_000, 160 * MS),
                (400 * MS, 390 * MS),
            ],
            400 * MS + 40 * MS,
            None,
            Some(2),
        );
        assert_eq!(spans(&run), [(0, 150, 140), (150, 400, 250)]);
        for s in cpu_spans(&run, &Tree::new(&run)) {
            assert!(s.cores() <= 1.0, "{s:?}");
        }
    }

    /// The ledger's exact CPU at the end closes the last interval; one too short joins the
    /// interval before it; a process with no reading has its whole life's rate.
    #[test]
    fn the_end_closes_the_last_interval() {
        let run = one(&[(200 * MS, 190 * MS)], 230 * MS, Some(215 * MS), None);
        assert_eq!(spans(&run), [(0, 230, 215)]);
        let run = one(&[(200 * MS, 190 * MS)], 500 * MS, Some(480 * MS), None);
        assert_eq!(spans(&run), [(0, 200, 190), (200, 500, 290)]);
        let short = one(&[], 30 * MS, Some(25 * MS), None);
        assert_eq!(spans(&short), [(0, 30, 25)]);
        // Without the end's CPU, a last reading too soon after the one before joins it.
        let run = one(
            &[(200 * MS, 190 * MS), (250 * MS, 240 * MS)],
            260 * MS,
            None,
            None,
        );
        assert_eq!(spans(&run), [(0, 250, 240)]);
        // Read once, 50 ms after its start, and no end: nothing long enough to say.
        let run = one(&[(50 * MS, 40 * MS)], 60 * MS, None, None);
        assert_eq!(spans(&run), []);
    }

    /// A single-threaded process never runs on more than one core, whatever its ticks say.
    #[test]
    fn a_span_is_capped_by_the_process_s_threads() {
        let run = one(&[(100 * MS, 119 * MS)], 100 * MS, None, Some(8));
        assert_eq!(spans(&run), [(0, 100, 100)]);
    }

    #[test]
    fn the_tree_s_steps_sum_the_spans_and_stop_at_the_machine() {
        let mut run = one(&[], 1, None, Some(2));
        let s = |process, from_ns, to_ns, cpu_ns| CpuSpan {
            process,
            from_ns,
            to_ns,
            cpu_ns,
        };
        let spans = [
            s(0, 0, 100, 100),
            s(0, 100, 200, 100),
            s(0, 50, 150, 100),
            s(0, 50, 150, 100),
        ];
        assert_eq!(
            tree_steps(&run, &spans),
            [(0, 1.0), (50, 2.0), (150, 1.0), (200, 0.0)]
        );
        run.machine_cpus = None;
        assert_eq!(tree_steps(&run, &spans)[1], (50, 3.0));
    }
}
