//! What the graphical reports call each process, and how they find one: the program it ran,
//! the program a forked child inherited from its parent, its parent's index, and which process
//! a pid was at a given time (pids are reused in long runs).
//!
//! Pure functions of a Run, shared by the text, HTML, Perfetto and CSV reports.

use crate::model::{Arg, Escaped, Process, Run};
use std::collections::HashMap;

/// The last path component of an argv[0]: `/usr/bin/cc1` → `cc1`.
pub fn basename(arg0: &Arg) -> String {
    let full = arg0.to_string_lossy();
    full.rsplit('/').next().unwrap_or(&full).to_string()
}

/// What a process is called whose last exec was seen without its argv (the tracker read it
/// from /proc too late, or doubted what it read): it ran a program, which one is unknown.
pub const ARGV_UNKNOWN: &str = "exec'd, argv unknown";

/// The program a process ran last (argv[0]'s basename), when it exec'd and the argv of its
/// last exec is known. An earlier exec's program is not it: the process replaced it.
pub fn last_program(p: &Process) -> Option<String> {
    p.execs
        .last()
        .and_then(|e| e.argv.as_ref()?.first())
        .map(basename)
}

/// The program a process ran last, for short mentions (`sleep`), or how it came to be:
/// `forked, no exec`, or [`ARGV_UNKNOWN`] when it exec'd without its argv seen. Escaped: the
/// name is the program's choice.
pub fn program(p: &Process) -> String {
    match last_program(p) {
        Some(name) => Escaped::str(&name).to_string(),
        None if p.execs.is_empty() => "forked, no exec".to_string(),
        None => ARGV_UNKNOWN.to_string(),
    }
}

/// Every process's parent and label, and the pid lookup.
pub struct Tree {
    /// Index in `run.processes` of each process's parent, when it is in the tree.
    pub parent: Vec<Option<usize>>,
    /// Depth below the root (0 for processes with no parent in the tree).
    pub depth: Vec<u32>,
    /// The program each process ran last, or `sh (fork)` for a child that never exec'd and
    /// ran its parent's program, or `pid N` when nothing is known.
    pub label: Vec<String>,
    /// The program each process ran at its creation (its parent's at the fork).
    inherited: Vec<Option<String>>,
    starts: Vec<u64>,
    by_pid: HashMap<i32, Vec<usize>>,
}

impl Tree {
    pub fn new(run: &Run) -> Tree {
        let n = run.processes.len();
        let mut t = Tree {
            parent: Vec::with_capacity(n),
            depth: Vec::with_capacity(n),
            label: Vec::with_capacity(n),
            inherited: Vec::with_capacity(n),
            starts: run.processes.iter().map(|p| p.start_ns).collect(),
            by_pid: HashMap::with_capacity(n),
        };
        for (i, p) in run.processes.iter().enumerate() {
            // A parent is always created before its child, so it is already indexed.
            let parent = p
                .ppid
                .and_then(|pp| t.at(pp, p.start_ns))
                .filter(|&j| j < i);
            let inherited = parent.and_then(|j| t.program_at(run, j, p.start_ns));
            t.depth.push(parent.map_or(0, |j| t.depth[j] + 1));
            t.label.push(match (last_program(p), &inherited) {
                (Some(prog), _) => prog,
                (None, _) if !p.execs.is_empty() => ARGV_UNKNOWN.to_string(),
                (None, Some(from)) => format!("{from} (fork)"),
                (None, None) => format!("pid {}", p.pid),
            });
            t.parent.push(parent);
            t.inherited.push(inherited);
            t.by_pid.entry(p.pid).or_default().push(i);
        }
        t
    }

    /// The process that had `pid` at time `t_ns`: the last one created at or before it (or
    /// the first, for a time before any of them).
    pub fn at(&self, pid: i32, t_ns: u64) -> Option<usize> {
        let all = self.by_pid.get(&pid)?;
        // Few pids are reused: a linear scan from the end is enough.
        all.iter()
            .rev()
            .find(|&&i| self.starts[i] <= t_ns)
            .or(all.first())
            .copied()
    }

    /// The program process `i` was running at `t_ns`: its exec's before then, the one it
    /// inherited at its fork before any; `None` when unknown (an exec without its argv).
    pub fn program_at(&self, run: &Run, i: usize, t_ns: u64) -> Option<String> {
        match run.processes[i].execs.iter().rev().find(|e| e.t_ns <= t_ns) {
            Some(e) => e.argv.as_ref().and_then(|a| a.first()).map(basename),
            None => self.inherited.get(i).cloned().flatten(),
        }
    }
}

/// One process as read in one sampling round, resolved to its index in the Run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    /// Index in `run.samples`.
    pub sample: usize,
    /// Index in `run.processes`.
    pub process: usize,
    pub pss_bytes: u64,
    /// CPU the process used since `since_ns`; `None` when its CPU could not be read.
    pub cpu_delta_ns: Option<u64>,
    /// Its previous reading, or its creation for the first.
    pub since_ns: u64,
}

/// Every per-process reading of every round, in the order of the rounds.
pub fn readings(run: &Run, tree: &Tree) -> Vec<Reading> {
    let mut last: HashMap<usize, (u64, Option<u64>)> = HashMap::new();
    let mut out = Vec::new();
    for (k, s) in run.samples.iter().enumerate() {
        for r in s.per_process.iter().flatten() {
            let Some(i) = tree.at(r.pid, s.t_ns) else {
                continue;
            };
            let (since, before) = last
                .get(&i)
                .copied()
                .unwrap_or((run.processes[i].start_ns, Some(0)));
            out.push(Reading {
                sample: k,
                process: i,
                pss_bytes: r.pss_bytes,
                cpu_delta_ns: r
                    .cpu_ns
                    .map(|now| now.saturating_sub(before.unwrap_or(now))),
                since_ns: since.min(s.t_ns),
            });
            last.insert(i, (s.t_ns, r.cpu_ns.or(before)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testing::{exec, process, run_of};

    #[test]
    fn labels_parents_and_reused_pids() {
        let mut root = process(10, None, 0, Some(100));
        root.execs.push(exec(1, &["/bin/sh", "-c", "x"]));
        // A subshell: forked, never exec'd.
        let sub = process(11, Some(10), 5, Some(50));
        let mut cc = process(12, Some(11), 10, Some(40));
        cc.execs.push(exec(11, &["/usr/lib/gcc/cc1"]));
        // pid 12 again, later, forked by the root.
        let again = process(12, Some(10), 60, Some(70));
        let run = run_of(vec![root, sub, cc, again]);
        let t = Tree::new(&run);
        assert_eq!(t.label, ["sh", "sh (fork)", "cc1", "sh (fork)"]);
        assert_eq!(t.parent, [None, Some(0), Some(1), Some(0)]);
        assert_eq!(t.depth, [0, 1, 2, 1]);
        assert_eq!(t.at(12, 20), Some(2));
        assert_eq!(t.at(12, 65), Some(3));
        assert_eq!(t.at(12, 0), Some(2));
        assert_eq!(t.at(99, 0), None);
        assert_eq!(t.program_at(&run, 0, 0), None);
        assert_eq!(t.program_at(&run, 2, 10).as_deref(), Some("sh"));
        assert_eq!(t.program_at(&run, 2, 11).as_deref(), Some("cc1"));
    }

    /// A process whose exec was seen without its argv ran some program: it is not called
    /// "forked, no exec", nor by a program it replaced (its earlier exec, its parent's).
    #[test]
    fn an_exec_without_its_argv_is_named_as_such() {
        let mut root = process(10, None, 0, Some(100));
        root.execs.push(exec(1, &["/bin/sh", "-c", "exec big"]));
        root.execs.push(crate::model::Exec {
            t_ns: 2,
            argv: None,
        });
        let mut child = process(11, Some(10), 5, Some(50));
        child.execs.push(crate::model::Exec {
            t_ns: 6,
            argv: None,
        });
        let grandchild = process(12, Some(11), 10, Some(40));
        let forked = process(13, Some(10), 1, Some(3));
        let run = run_of(vec![root, child, grandchild, forked]);
        let names: Vec<String> = run.processes.iter().map(program).collect();
        assert_eq!(
            names,
            [
                ARGV_UNKNOWN,
                ARGV_UNKNOWN,
                "forked, no exec",
                "forked, no exec"
            ]
            .map(String::from)
        );
        let t = Tree::new(&run);
        assert_eq!(
            t.label,
            [ARGV_UNKNOWN, ARGV_UNKNOWN, "pid 12", "sh (fork)"].map(String::from)
        );
        assert_eq!(t.program_at(&run, 0, 1).as_deref(), Some("sh"));
        assert_eq!(t.program_at(&run, 0, 2), None);
        assert_eq!(
            t.program_at(&run, 1, 5),
            None,
            "the root's program was unknown then"
        );
        assert_eq!(t.program_at(&run, 3, 2).as_deref(), Some("sh"));
    }

    #[test]
    fn cpu_readings_are_deltas_since_the_previous_reading() {
        let run = crate::report::testing::build();
        let tree = Tree::new(&run);
        let r = readings(&run, &tree);
        let cc1: Vec<&Reading> = r
            .iter()
            .filter(|r| run.processes[r.process].pid == 102)
            .collect();
        // Forked at 10 ms, read at 50, 100, ... 350 ms.
        assert_eq!(cc1.len(), 7);
        assert_eq!(cc1[0].since_ns, 10_000_000);
        assert_eq!(cc1[1].since_ns, 50_000_000);
        let total: u64 = cc1.iter().map(|r| r.cpu_delta_ns.unwrap()).sum();
        assert_eq!(total, 306_000_000);
    }
}
