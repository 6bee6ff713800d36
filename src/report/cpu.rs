//! The tree's CPU as the headline gives it (the Walltime line's user and kernel time, the `CPU:`
//! line): getrusage of ste, unless a source that counts every process shows visibly more.
//!
//! Owns that choice and the line that says why; the lines themselves are `text.rs`'s.
//! getrusage(RUSAGE_CHILDREN) counts a process only once a wait reaped it: the kernel reaps a
//! child at once when its parent ignores SIGCHLD, and then no wait adds its CPU to anyone's
//! children's usage (nor the CPU of the children it reaped). The group's CPU and the
//! per-process ledger (`model::TreeCpu`) count it. A pure function of a Run.

use crate::model::{Run, TreeCpu};
use crate::units::duration_human;

/// A difference below both of these is within getrusage's known shortfall (the last time
/// slice of each thread that ended before its process) and the sources' own: getrusage stays.
const MATERIAL_NS: u64 = 1_000_000;
const MATERIAL_SHARE: f64 = 0.01;

/// The tree's CPU as the report gives it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Headline<'a> {
    pub user_ns: Option<u64>,
    pub sys_ns: Option<u64>,
    pub cpu_ns: Option<u64>,
    /// The source taken instead of getrusage, which counted visibly less (`getrusage_ns`).
    pub instead: Option<(&'a TreeCpu, Option<u64>)>,
    /// No source but getrusage measured the tree's CPU: an auto-reaped process would go
    /// unseen.
    pub unchecked: bool,
}

impl Headline<'_> {
    /// `1.00s`, or `at least 1.00s` when the figure is a lower bound.
    pub fn cpu_text(&self) -> Option<String> {
        let cpu = duration_human(self.cpu_ns?);
        Some(if self.lower_bound() {
            format!("at least {cpu}")
        } else {
            cpu
        })
    }

    /// The figure is a lower bound (the per-process ledger where not every CPU is exact).
    pub fn lower_bound(&self) -> bool {
        matches!(self.instead, Some((t, _)) if !t.exact)
    }
}

pub fn headline(run: &Run) -> Headline<'_> {
    let t = &run.totals;
    let tree = run.accounting.as_ref().and_then(|a| a.tree_cpu.as_ref());
    let getrusage = t.cpu_ns();
    let own = Headline {
        user_ns: t.user_ns,
        sys_ns: t.sys_ns,
        cpu_ns: getrusage,
        instead: None,
        unchecked: tree.is_none() && getrusage.is_some() && nothing_else(run),
    };
    let Some(tree) = tree else {
        return own;
    };
    let more = tree.cpu_ns.saturating_sub(getrusage.unwrap_or(0));
    let material = getrusage.is_none()
        || (more >= MATERIAL_NS && more as f64 >= MATERIAL_SHARE * tree.cpu_ns as f64);
    if !material {
        return own;
    }
    // The split with the figure it splits; where the source has none, none.
    Headline {
        user_ns: tree.user_ns.filter(|_| tree.sys_ns.is_some()),
        sys_ns: tree.sys_ns.filter(|_| tree.user_ns.is_some()),
        cpu_ns: Some(tree.cpu_ns),
        instead: Some((tree, getrusage)),
        unchecked: false,
    }
}

/// Whether the Run had no source but getrusage for the tree's CPU: no group CPU, no process
/// with a CPU in its ledger. (A Run without accounting at all, hand-built or of an older ste,
/// does not know what else it had; nor does one read back from the JSON of a ste that did not
/// write `tree_cpu`, which is why this looks at the sources themselves.)
fn nothing_else(run: &Run) -> bool {
    let Some(a) = &run.accounting else {
        return false;
    };
    let group = a.group.as_ref().and_then(|g| g.end).and_then(|e| e.cpu_ns);
    group.is_none()
        && !run
            .processes
            .iter()
            .any(|p| p.ledger.as_ref().is_some_and(|l| l.cpu().is_some()))
}

/// The line under the Walltime line when the headline is not getrusage's, or when nothing
/// could check it: which source, how exact, and what getrusage leaves out.
pub fn note(run: &Run) -> Option<String> {
    let h = headline(run);
    let still = if run.totals.still_running > 0 {
        ", processes still running"
    } else {
        ""
    };
    if let Some((tree, getrusage)) = h.instead {
        let counted = getrusage.map_or_else(
            || "getrusage is n/a".to_string(),
            |g| format!("getrusage counts {}", duration_human(g)),
        );
        return Some(format!(
            "CPU {} [{}, {}]; {counted}: it leaves out processes no wait reaped (the kernel reaps at once the children of a parent that ignores SIGCHLD){still} and the last time slice of threads that ended before their process",
            h.cpu_text().unwrap_or_default(),
            tree.from,
            if tree.exact { "exact" } else { "a lower bound" },
        ));
    }
    h.unchecked.then(|| {
        "user and kernel time of the processes a wait reaped only (getrusage): one the kernel reaped (its parent ignoring SIGCHLD) is left out, and nothing else here measures it (no group CPU, no per-process ledger)".to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Accounting;

    const MS: u64 = 1_000_000;

    fn run_with(getrusage_ns: Option<u64>, tree: Option<TreeCpu>) -> Run {
        let mut run = crate::report::testing::run_of(Vec::new());
        run.totals.user_ns = getrusage_ns;
        run.totals.sys_ns = Some(0);
        run.accounting = Some(Accounting {
            tree_cpu: tree,
            ..Default::default()
        });
        run
    }

    fn group(ns: u64) -> TreeCpu {
        TreeCpu {
            cpu_ns: ns,
            user_ns: Some(ns / 4),
            sys_ns: Some(ns - ns / 4),
            from: "cgroup v1 cpuacct.usage".into(),
            exact: true,
        }
    }

    #[test]
    fn a_source_that_sees_the_auto_reaped_children_takes_the_headline() {
        // The repro: 4 children of a parent ignoring SIGCHLD burn 1 s; getrusage 2 ms.
        let run = run_with(Some(2 * MS), Some(group(1000 * MS)));
        let h = headline(&run);
        assert_eq!(h.cpu_ns, Some(1_000_000_000));
        assert_eq!(
            (h.user_ns, h.sys_ns),
            (Some(250_000_000), Some(750_000_000))
        );
        let note = note(&run).unwrap();
        assert!(
            note.starts_with("CPU 1s [cgroup v1 cpuacct.usage, exact]; getrusage counts 2ms: "),
            "{note}"
        );
        assert!(note.contains("ignores SIGCHLD"), "{note}");
    }

    #[test]
    fn a_lower_bound_says_at_least() {
        let mut tree = group(1000 * MS);
        tree.exact = false;
        tree.from = "the per-process ledger (wait4)".into();
        tree.user_ns = None;
        let run = run_with(Some(2 * MS), Some(tree));
        let h = headline(&run);
        assert_eq!(h.cpu_text().as_deref(), Some("at least 1s"));
        // No split is known with the figure: none is given, rather than getrusage's.
        assert_eq!((h.user_ns, h.sys_ns), (None, None));
        assert!(note(&run).unwrap().contains("a lower bound"));
    }

    #[test]
    fn getrusage_stays_within_its_known_shortfall() {
        // 0.9 % more (threads' last slices): getrusage's figure, no line.
        let run = run_with(Some(1000 * MS), Some(group(1009 * MS)));
        let h = headline(&run);
        assert_eq!(h.cpu_ns, Some(1_000_000_000));
        assert!(h.instead.is_none() && !h.unchecked);
        assert_eq!(note(&run), None);
        // 50 % but under a millisecond: the same.
        let run = run_with(Some(MS), Some(group(MS * 3 / 2)));
        assert_eq!(note(&run), None);
    }

    #[test]
    fn without_another_source_the_headline_says_what_it_cannot_see() {
        let run = run_with(Some(2 * MS), None);
        let h = headline(&run);
        assert_eq!(h.cpu_ns, Some(2_000_000));
        assert!(h.unchecked);
        assert!(note(&run).unwrap().contains("is left out"));
        // A Run read back from an older ste's JSON, which had a group but no `tree_cpu`:
        // something else did measure, so nothing is said.
        let mut old = run_with(Some(2 * MS), None);
        old.accounting.as_mut().unwrap().group = Some(crate::model::Group {
            end: Some(crate::model::GroupEnd {
                cpu_ns: Some(2 * MS),
                ..Default::default()
            }),
            ..Default::default()
        });
        assert!(!headline(&old).unchecked);
        assert_eq!(note(&old), None);
    }
}
