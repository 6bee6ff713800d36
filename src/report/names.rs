//! What the graphical reports call each process, and how they find one: the program it ran,
//! the program a forked child inherited from its parent, its parent's index, and which process
//! a pid was at a given time (pids are reused in long runs).
//!
//! Pure functions of a Run, shared by the text, HTML, Perfetto and CSV reports.

use crate::model::{Arg, Escaped, Process, Run, join_escaped};
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

/// What tells a process apart from the others of its program: for a compiler, an assembler or
/// a linker, the file it works on. In order: rustc's `--crate-name` (every crate's source is a
/// `src/lib.rs`; a build script's crate is always `build_script_build`, so its source file
/// instead); the first argument naming a source file (by its extension, outside /tmp: gcc's
/// cc1 and clang's -cc1 take the driver's input, `as` takes a temporary `.s`); else the file
/// after `-o`, outside /tmp too (`as` and `ld` write the object or binary that names their
/// job). `None` when no argument says: the caller shows the pid and argv. Escaped: the words
/// are the program's.
pub fn distinct(argv: &[Arg]) -> Option<String> {
    let words: Vec<String> = argv.iter().skip(1).map(Arg::to_string_lossy).collect();
    let after = |flag: &str| {
        words.iter().enumerate().find_map(|(k, w)| {
            if w == flag {
                words.get(k + 1).cloned()
            } else {
                w.strip_prefix(flag)
                    .and_then(|v| v.strip_prefix('='))
                    .map(str::to_string)
            }
        })
    };
    let crate_name = after("--crate-name");
    let source = || {
        words.iter().enumerate().find_map(|(k, w)| {
            // The value of an option that names another file (a dependency file, a target).
            let value_of_other = k > 0
                && matches!(
                    words[k - 1].as_str(),
                    "-MF" | "-MT" | "-MQ" | "-o" | "-dumpbase" | "-include" | "-imacros" | "-x"
                );
            (!value_of_other && !w.starts_with('-') && is_source(w) && !w.starts_with("/tmp/"))
                .then(|| {
                    w.trim_start_matches("./")
                        .trim_start_matches('/')
                        .to_string()
                })
                .map(|short| if w.starts_with('/') { w.clone() } else { short })
        })
    };
    // A temporary file's name tells nothing (a configure probe's `as -o /tmp/ccX.o`).
    let output = || {
        after("-o")
            .or_else(|| {
                words
                    .iter()
                    .find_map(|w| w.strip_prefix("-o").filter(|v| !v.is_empty()))
                    .map(str::to_string)
            })
            .filter(|o| !o.starts_with("/tmp/"))
    };
    let found = match crate_name {
        Some(name) if name != "build_script_build" => Some(name),
        _ => source().or_else(output),
    }?;
    Some(Escaped::str(&found).to_string())
}

/// Whether `word` names a source file by its extension (C, C++, assembly, Fortran, Rust, Go,
/// Objective-C, preprocessed C).
fn is_source(word: &str) -> bool {
    const EXTENSIONS: &[&str] = &[
        "c", "cc", "cp", "cxx", "cpp", "c++", "C", "CPP", "i", "ii", "m", "mm", "M", "s", "S",
        "sx", "asm", "f", "for", "f90", "f95", "F", "F90", "rs", "go", "swift", "zig",
    ];
    let name = word.rsplit('/').next().unwrap_or(word);
    name.rsplit_once('.')
        .is_some_and(|(stem, ext)| !stem.is_empty() && EXTENSIONS.contains(&ext))
}

/// A process named for people: its program and what tells it apart (`cc1 lib/zstd.c`), or,
/// when nothing does, its program and its argv's words cut to about `max` characters. The pid
/// is the caller's to add.
pub fn described(p: &Process, max: usize) -> String {
    let Some(argv) = p.execs.last().and_then(|e| e.argv.as_deref()) else {
        return program(p);
    };
    let name = program(p);
    match distinct(argv) {
        Some(d) => format!("{name} {d}"),
        None if argv.len() > 1 => {
            let rest = join_escaped(&argv[1..]);
            cut_middle(&format!("{name} {rest}"), max.max(name.chars().count() + 4))
        }
        None => name,
    }
}

/// `s` in `width` columns, cut in the middle: an argv's program and its last words (the
/// output file) say more than its middle.
pub fn cut_middle(s: &str, width: usize) -> String {
    let n = s.chars().count();
    if n <= width {
        return s.to_string();
    }
    let head = width.saturating_sub(1).div_ceil(2);
    let tail = width.saturating_sub(1) - head;
    let mut out: String = s.chars().take(head).collect();
    out.push('…');
    out.extend(s.chars().skip(n - tail));
    out
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
    /// The CPU it had used since its start, as read (`None` in carried samples, and when it
    /// could not be read): `rates` makes rates of it.
    pub cpu_ns: Option<u64>,
}

/// Every per-process reading of every round, in the order of the rounds.
pub fn readings(run: &Run, tree: &Tree) -> Vec<Reading> {
    let mut out = Vec::new();
    for (k, s) in run.samples.iter().enumerate() {
        for r in s.per_process.iter().flatten() {
            let Some(i) = tree.at(r.pid, s.t_ns) else {
                continue;
            };
            out.push(Reading {
                sample: k,
                process: i,
                pss_bytes: r.pss_bytes,
                cpu_ns: r.cpu_ns,
            });
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

    /// Each process of a build is named by the file it works on, whatever the tool (issue 45).
    #[test]
    fn a_compiler_is_named_by_its_input_file() {
        let d = |line: &str| {
            let argv: Vec<Arg> = line.split(' ').map(Arg::from).collect();
            distinct(&argv)
        };
        let cc1 = "/usr/lib/gcc/x86_64-linux-gnu/12/cc1 -quiet -imultiarch x86_64-linux-gnu -MMD obj/dynamic/zdict.d -MF obj/dynamic/zdict.d -MP -MT obj/dynamic/zdict.o -D XXH_NAMESPACE=ZSTD_ .//dictBuilder/zdict.c -quiet -dumpbase zdict.c -dumpbase-ext .c -O3 -fPIC -o /tmp/ccheoWIF.s";
        assert_eq!(d(cc1).as_deref(), Some("dictBuilder/zdict.c"));
        let driver = "cc -O3 -fPIC -c -MT obj/dynamic/zdict.o -MMD -MP -MF obj/dynamic/zdict.d -o obj/dynamic/zdict.o .//dictBuilder/zdict.c";
        assert_eq!(d(driver).as_deref(), Some("dictBuilder/zdict.c"));
        let r#as = "as --64 --noexecstack -o obj/dynamic/zdict.o /tmp/ccheoWIF.s";
        assert_eq!(d(r#as).as_deref(), Some("obj/dynamic/zdict.o"));
        let ld = "/usr/bin/ld -plugin /usr/lib/gcc/x86_64-linux-gnu/12/liblto_plugin.so --build-id -m elf_x86_64 -shared -o obj/dynamic/libzstd.so.1.5.4 /usr/lib/crti.o obj/dynamic/debug.o";
        assert_eq!(d(ld).as_deref(), Some("obj/dynamic/libzstd.so.1.5.4"));
        let clang = "/usr/lib/llvm-14/bin/clang -cc1 -triple x86_64-pc-linux-gnu -emit-obj -main-file-name fill.c -o /tmp/fill-1a2b.o -x c fill.c";
        assert_eq!(d(clang).as_deref(), Some("fill.c"));
        let rustc = "/root/.rustup/toolchains/stable/bin/rustc --crate-name serde --edition=2021 /root/.cargo/registry/src/serde-1.0.228/src/lib.rs --crate-type lib -C opt-level=3";
        assert_eq!(d(rustc).as_deref(), Some("serde"));
        let build_script = "rustc --crate-name build_script_build --edition=2021 /root/.cargo/registry/src/serde-1.0.228/build.rs --crate-type bin";
        assert_eq!(
            d(build_script).as_deref(),
            Some("/root/.cargo/registry/src/serde-1.0.228/build.rs")
        );
        assert_eq!(d("gcc -ofill fill.o").as_deref(), Some("fill"));
        // A configure probe's temporary files tell nothing.
        assert_eq!(d("as --64 -o /tmp/ccmXV1JK.o /tmp/ccRwbEVw.s"), None);
        assert_eq!(d("cc1 -quiet - -o /tmp/ccRwbEVw.s"), None);
        // Nothing tells it apart: the caller falls back to the pid and argv.
        assert_eq!(d("make -j2"), None);
        assert_eq!(d("sh -c echo"), None);
        assert_eq!(d("cc1"), None);
    }

    #[test]
    fn a_process_is_described_by_its_program_and_input_or_its_words() {
        let mut cc1 = process(7, None, 0, Some(1));
        cc1.execs.push(exec(
            0,
            &[
                "/usr/lib/gcc/cc1",
                "-quiet",
                "lib/zstd.c",
                "-o",
                "/tmp/cc1.s",
            ],
        ));
        assert_eq!(described(&cc1, 30), "cc1 lib/zstd.c");
        let mut sh = process(8, None, 0, Some(1));
        sh.execs.push(exec(
            0,
            &[
                "/bin/sh",
                "-c",
                "echo a long line of shell that goes on and on",
            ],
        ));
        assert_eq!(described(&sh, 30), "sh -c 'echo a l…oes on and on'");
        let forked = process(9, None, 0, Some(1));
        assert_eq!(described(&forked, 30), "forked, no exec");
    }

    #[test]
    fn readings_are_resolved_to_their_process() {
        let run = crate::report::testing::build();
        let tree = Tree::new(&run);
        let r = readings(&run, &tree);
        let cc1: Vec<&Reading> = r
            .iter()
            .filter(|r| run.processes[r.process].pid == 102)
            .collect();
        // Forked at 10 ms, read at 50, 100, ... 350 ms.
        assert_eq!(cc1.len(), 7);
        assert_eq!(cc1.last().unwrap().cpu_ns, Some(306_000_000));
    }
}
