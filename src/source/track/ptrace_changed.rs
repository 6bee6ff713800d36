//! What the ptrace tracker changed of what the command did, found at its own stops (no
//! system-call stop, no read at all as root), said in one note at the end.
//!
//! Two ways a traced process behaves otherwise than untraced:
//! - An exec of a set-user-ID, set-group-ID or file-capability program under a tracer that
//!   lacked `CAP_SYS_PTRACE` when it attached (ste unprivileged): the kernel runs the program
//!   without the privileges (`cap_bprm_creds_from_file`: `ptracer_capable` fails, so the ids
//!   stay and the capabilities gained are dropped; `ping` without `cap_net_raw` exits 2). Exact:
//!   at the exec stop, before the new image runs, the file `/proc/PID/exe` names is the one
//!   exec'd, and its mode, owner, mount and `security.capability` are what the kernel looked
//!   at (`kernel::exe`: a `stat` per exec, and the attribute's and the mount's reads for a
//!   file not seen since its last change); a set-id bit to the user ste runs as asks for nothing, so it is not
//!   counted. As root the tracer keeps `CAP_SYS_PTRACE` and nothing is read.
//! - A tracer (strace, ltrace, gdb, lldb, rr) inside the tree: a process can have one tracer,
//!   and ste is already every process's, so `PTRACE_TRACEME`, `PTRACE_ATTACH` and
//!   `PTRACE_SEIZE` of a process of the tree fail with `EPERM`. Those requests leave no trace
//!   ste sees without system-call stops, so this is found from the tracer's side: a process
//!   whose program is a known tracer (argv[0]'s name) forked a process, which ste then traces,
//!   and which is what the tracer forked it for (strace and ltrace start their tracee so, gdb
//!   too and tests the kernel's ptrace options on a forked child). It misses a tracer by
//!   another name, and one that attaches to a process of the tree it did not fork; a tracer
//!   that attaches only outside the tree (`strace -p` of another process) works, and forks
//!   nothing, so it is not said.

use crate::model::{Arg, Escaped};
use std::collections::HashMap;

/// Programs that trace the processes they start (argv[0]'s base name).
const TRACERS: [&str; 7] = [
    "strace",
    "ltrace",
    "gdb",
    "gdbserver",
    "lldb",
    "lldb-server",
    "rr",
];

/// One process whose behaviour ptrace changed.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Change {
    /// It exec'd `file`, which asks for privileges the kernel did not give.
    Unprivileged {
        pid: i32,
        file: String,
        asks: String,
    },
    /// It runs `program`, a tracer, and forked a process ste traces.
    Tracer { pid: i32, program: String },
}

pub struct Changes {
    /// Whether the kernel gives set-id and file-capability programs their privileges under
    /// this tracer: it had `CAP_SYS_PTRACE` as it seized the command.
    privileged: bool,
    /// Live processes running a tracer program, with its name.
    tracers: HashMap<i32, String>,
    /// What each file exec'd so far asked for.
    asked: crate::kernel::exe::Asked,
    /// The first change of each kind, and how many processes changed in all.
    first: Vec<Change>,
    count: u64,
}

impl Changes {
    pub fn new(privileged: bool) -> Changes {
        Changes {
            privileged,
            tracers: HashMap::new(),
            asked: Default::default(),
            first: Vec::new(),
            count: 0,
        }
    }

    fn add(&mut self, c: Change) {
        self.count += 1;
        let same_kind = |a: &Change| std::mem::discriminant(a) == std::mem::discriminant(&c);
        if !self.first.iter().any(same_kind) {
            self.first.push(c);
        }
    }

    /// At process `pid`'s exec stop, the new image not yet run: what its file asks for, and
    /// whether its program is a tracer. `argv` is what the stop read.
    pub fn exec(&mut self, pid: i32, argv: Option<&[Arg]>) {
        let program = argv.and_then(<[Arg]>::first).map(|a| {
            let full = a.to_string_lossy();
            full.rsplit('/').next().unwrap_or(&full).to_string()
        });
        match program.as_ref().filter(|p| TRACERS.contains(&p.as_str())) {
            Some(p) => self.tracers.insert(pid, p.clone()),
            None => self.tracers.remove(&pid),
        };
        if self.privileged {
            return;
        }
        let exe = std::path::PathBuf::from(format!("/proc/{pid}/exe"));
        let Ok(asks) = self.asked.asks(&exe) else {
            return;
        };
        // A set-id bit to the user (group) ste runs as, as the tree does, changes nothing.
        let (uid, gid) = (crate::kernel::calls::euid(), crate::kernel::calls::egid());
        let mut what = Vec::new();
        if asks.setuid_owner.is_some_and(|o| o != uid) {
            what.push("set-user-ID");
        }
        if asks.setgid_group.is_some_and(|g| g != gid) {
            what.push("set-group-ID");
        }
        if asks.file_caps {
            what.push("file capabilities");
        }
        if what.is_empty() {
            return;
        }
        let file = std::fs::read_link(&exe)
            .map(|p| Escaped::str(&p.to_string_lossy()).to_string())
            .unwrap_or_else(|_| program.unwrap_or_default());
        self.add(Change::Unprivileged {
            pid,
            file,
            asks: what.join(", "),
        });
    }

    /// Process `parent` forked process `child` (ste traces it from its first instruction).
    pub fn forked(&mut self, parent: i32) {
        if let Some(program) = self.tracers.get(&parent).cloned() {
            // Said once per tracer process: its later forks fail alike.
            self.tracers.remove(&parent);
            self.add(Change::Tracer {
                pid: parent,
                program,
            });
        }
    }

    /// Process `tgid` ended.
    pub fn ended(&mut self, tgid: i32) {
        self.tracers.remove(&tgid);
    }

    /// The one line the report gives, when anything changed.
    pub fn note(&self) -> Option<String> {
        if self.first.is_empty() {
            return None;
        }
        let parts: Vec<String> = self
            .first
            .iter()
            .map(|c| match c {
                Change::Tracer { pid, program } => format!(
                    "pid {pid} ({}) could not trace the processes it started: ste traces every process of the tree already, so their PTRACE_TRACEME, PTRACE_ATTACH and PTRACE_SEIZE fail with EPERM",
                    Escaped::str(program)
                ),
                Change::Unprivileged { pid, file, asks } => format!(
                    "pid {pid} exec'd {file} ({asks}) without its privileges: the kernel gives none at an exec traced by a tracer without CAP_SYS_PTRACE"
                ),
            })
            .collect();
        let all = if self.count > self.first.len() as u64 {
            format!(" ({} processes in all)", self.count)
        } else {
            String::new()
        };
        let instead = if self.privileged {
            "use --tracker netlink, or ebpf (the default as root)"
        } else {
            "use --tracker netlink, or run ste as root (ebpf)"
        };
        Some(format!(
            "ptrace changed what the command did: {}{all}; {instead}",
            parts.join("; ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(a: &[&str]) -> Vec<Arg> {
        a.iter().map(|s| Arg::from(*s)).collect()
    }

    #[test]
    fn a_tracer_that_forks_is_said_once() {
        let mut c = Changes::new(true);
        c.exec(10, Some(&argv(&["/usr/bin/strace", "-f", "true"])));
        assert_eq!(
            c.note(),
            None,
            "a tracer that starts nothing changed nothing"
        );
        c.forked(10);
        c.forked(10);
        assert_eq!(
            c.note().unwrap(),
            "ptrace changed what the command did: pid 10 (strace) could not trace the processes it started: ste traces every process of the tree already, so their PTRACE_TRACEME, PTRACE_ATTACH and PTRACE_SEIZE fail with EPERM; use --tracker netlink, or ebpf (the default as root)"
        );
        // A process that exec'd something else, or ended, is no tracer any more.
        c.exec(11, Some(&argv(&["gdb"])));
        c.exec(11, Some(&argv(&["sh"])));
        c.exec(12, Some(&argv(&["ltrace"])));
        c.ended(12);
        c.forked(11);
        c.forked(12);
        assert!(!c.note().unwrap().contains("processes in all"));
        c.exec(13, Some(&argv(&["gdb"])));
        c.forked(13);
        assert!(c.note().unwrap().contains("(2 processes in all)"));
    }
}
