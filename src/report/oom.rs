//! Which processes of the tree the OOM killer killed, as far as the Run can tell: the line
//! that names them and the words the exit status takes.
//!
//! The OOM killer ends its victim with SIGKILL, and the kernel counts each victim in its own
//! cgroup (`model::GroupEnd::oom_kills`), whichever limit ran out. ste's group holds the tree
//! alone, so when as many processes died of a SIGKILL ste did not send as the group counted
//! kills, those are the victims; more than that, and the count says how many of them were;
//! with no count (no cgroup, or one without the memory controller), a SIGKILL could have been
//! the OOM killer's and the line says so. A pure function of a Run.

use crate::model::{Process, Run};
use crate::report::names::program;

/// What the Run says of OOM kills.
#[derive(Debug, PartialEq)]
pub enum Oom<'a> {
    /// The group counted `kills`; `killed` are the processes that died of a SIGKILL ste did
    /// not send (all of them victims when there are no more than `kills`).
    Counted {
        kills: u64,
        killed: Vec<&'a Process>,
        from: &'static str,
    },
    /// No count: these died of a SIGKILL ste did not send, which the OOM killer sends.
    Uncounted { killed: Vec<&'a Process> },
}

impl Oom<'_> {
    /// Whether the OOM killer killed `p`, as far as the count proves: `Some(true)` when it
    /// did, `None` when it may have.
    pub fn killed(&self, p: &Process) -> Option<bool> {
        match self {
            Oom::Counted { kills, killed, .. } => {
                let among = killed.iter().any(|k| std::ptr::eq(*k, p));
                match (among, killed.len() as u64 <= *kills) {
                    (false, _) => Some(false),
                    (true, true) => Some(true),
                    (true, false) => None,
                }
            }
            Oom::Uncounted { killed } => {
                if killed.iter().any(|k| std::ptr::eq(*k, p)) {
                    None
                } else {
                    Some(false)
                }
            }
        }
    }
}

/// `None` when nothing was, or could have been, an OOM kill (or the Run has no accounting to
/// say what it could count: a hand-built Run, an older record).
pub fn of(run: &Run) -> Option<Oom<'_>> {
    let a = run.accounting.as_ref()?;
    let by_ste = |p: &Process| a.lingering.iter().any(|l| l.pid == p.pid && l.killed);
    let killed: Vec<&Process> = run
        .processes
        .iter()
        .filter(|p| p.signal == Some(SIGKILL) && !by_ste(p))
        .collect();
    let group = a.group.as_ref();
    match group.and_then(|g| g.end).and_then(|e| e.oom_kills) {
        Some(0) => None,
        Some(kills) => Some(Oom::Counted {
            kills,
            killed,
            from: if group.is_some_and(|g| g.version == 2) {
                "cgroup v2 memory.events oom_kill"
            } else {
                "cgroup v1 memory.oom_control oom_kill"
            },
        }),
        None if killed.is_empty() => None,
        None => Some(Oom::Uncounted { killed }),
    }
}

/// The OOM killer's signal (reports see the model and units only, not libc).
const SIGKILL: i32 = 9;

fn named(ps: &[&Process]) -> String {
    ps.iter()
        .map(|p| format!("pid {} ({})", p.pid, program(p)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The report's line: `OOM killer: killed pid 7 (fill) [cgroup v1 memory.oom_control
/// oom_kill: 1]`, or how many of the processes that died of SIGKILL it killed, or that it may
/// have killed them.
pub fn line(run: &Run) -> Option<String> {
    Some(match of(run)? {
        Oom::Counted {
            kills,
            killed,
            from,
        } => {
            let count = format!("[{from}: {kills}]");
            let plural = |n: usize| if n == 1 { "" } else { "es" };
            if killed.is_empty() {
                format!(
                    "OOM killer: {kills} kill{} in ste's group, of no process whose end ste saw {count}",
                    if kills == 1 { "" } else { "s" }
                )
            } else if killed.len() as u64 <= kills {
                let more = kills - killed.len() as u64;
                let more = if more > 0 {
                    format!(
                        " and {more} process{} whose end ste did not see",
                        plural(more as usize)
                    )
                } else {
                    String::new()
                };
                format!("OOM killer: killed {}{more} {count}", named(&killed))
            } else {
                format!(
                    "OOM killer: killed {kills} of the {} process{} that died of SIGKILL: {} {count}",
                    killed.len(),
                    plural(killed.len()),
                    named(&killed)
                )
            }
        }
        Oom::Uncounted { killed } => format!(
            "Killed by SIGKILL: {}; it may have been the OOM killer (no cgroup memory controller counted its kills here)",
            named(&killed)
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Accounting, Group, GroupEnd, Lingering};
    use crate::report::testing::{exec, process, run_of};

    fn killed(pid: i32) -> Process {
        let mut p = process(pid, Some(1), 10, Some(20));
        p.exit_code = None;
        p.signal = Some(9);
        p.execs.push(exec(11, &["./fill", "200"]));
        p
    }

    fn run(kills: Option<u64>, processes: Vec<Process>) -> Run {
        let mut run = run_of(processes);
        run.accounting = Some(Accounting {
            group: Some(Group {
                version: 1,
                end: Some(GroupEnd {
                    oom_kills: kills,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
        run
    }

    #[test]
    fn as_many_sigkills_as_counted_kills_are_the_victims() {
        let r = run(Some(1), vec![process(1, None, 0, Some(30)), killed(7)]);
        assert_eq!(
            line(&r).unwrap(),
            "OOM killer: killed pid 7 (fill) [cgroup v1 memory.oom_control oom_kill: 1]"
        );
        let oom = of(&r).unwrap();
        assert_eq!(oom.killed(&r.processes[1]), Some(true));
        assert_eq!(oom.killed(&r.processes[0]), Some(false));
    }

    #[test]
    fn more_sigkills_than_kills_are_said_as_a_count() {
        let r = run(Some(1), vec![killed(7), killed(8)]);
        assert_eq!(
            line(&r).unwrap(),
            "OOM killer: killed 1 of the 2 processes that died of SIGKILL: pid 7 (fill), pid 8 (fill) [cgroup v1 memory.oom_control oom_kill: 1]"
        );
        assert_eq!(of(&r).unwrap().killed(&r.processes[0]), None);
    }

    #[test]
    fn no_kill_counted_is_no_line_and_a_kill_by_ste_is_not_a_victim() {
        assert_eq!(line(&run(Some(0), vec![killed(7)])), None);
        let mut r = run(Some(1), vec![killed(7), killed(8)]);
        r.accounting.as_mut().unwrap().lingering.push(Lingering {
            pid: 8,
            end_ns: Some(20),
            killed: true,
        });
        assert!(
            line(&r)
                .unwrap()
                .starts_with("OOM killer: killed pid 7 (fill) [")
        );
    }

    #[test]
    fn without_a_count_a_sigkill_may_have_been_the_oom_killer() {
        let mut r = run(None, vec![killed(7)]);
        r.accounting.as_mut().unwrap().group = None;
        assert_eq!(
            line(&r).unwrap(),
            "Killed by SIGKILL: pid 7 (fill); it may have been the OOM killer (no cgroup memory controller counted its kills here)"
        );
        assert_eq!(of(&r).unwrap().killed(&r.processes[0]), None);
        // Nothing killed, nothing said.
        assert_eq!(line(&run(None, vec![process(1, None, 0, Some(3))])), None);
    }
}
