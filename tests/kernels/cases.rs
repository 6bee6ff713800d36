//! The kernel matrix's cases and their answers: what each row (a tracker, as root or as
//! `nobody`) runs, what a run showed (`Observed`, which the guest sends the host), and the
//! checks of it against the known answer: counts exactly, every memory figure against its own
//! label (the truth must lie inside what the label claims).
//!
//! Pure: no process is run here (`guest` runs them), and which check a kernel is known to
//! fail is `expect`'s. `tests/it/kernel_matrix.rs` includes this file and tests it.

use serde::{Deserialize, Serialize};
use ste::model::{Run, SampleKind};

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;

/// The fill's size: the workload, which had Max PSS "exact" at 4 MB.
pub const FILL_MIB: u64 = 512;
/// getppid calls counted in the kernel (ebpf), and at ptrace syscall stops (two stops a call,
/// slow under emulation).
pub const GETPPID_EBPF: u64 = 100_000;
pub const GETPPID_PTRACE: u64 = 1_000;
/// Execs of the loop besides its own: 201 in all.
pub const LOOP: u64 = 200;
pub const THREADS: u64 = 8;
pub const MALLOCS: u64 = 1_000;
/// The signal the `signal` case kills itself with (SIGTERM): ste exits 128 + 15.
pub const SIGNAL: i32 = 15;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, PartialOrd, Ord)]
pub enum Who {
    Root,
    Nobody,
}

impl Who {
    pub fn name(self) -> &'static str {
        match self {
            Who::Root => "root",
            Who::Nobody => "nobody",
        }
    }
}

/// The tracker a row asks for; `Auto` asks for none (ste's own choice).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, PartialOrd, Ord)]
pub enum Tracker {
    Ebpf,
    Ptrace,
    Netlink,
    Auto,
}

impl Tracker {
    pub fn name(self) -> &'static str {
        match self {
            Tracker::Ebpf => "ebpf",
            Tracker::Ptrace => "ptrace",
            Tracker::Netlink => "netlink",
            Tracker::Auto => "auto",
        }
    }
}

/// The rows of the matrix, in order. `nobody` cannot load BPF: its ebpf row is the refusal
/// alone, and its auto row is what an unprivileged user gets (ptrace).
pub const ROWS: [(Tracker, Who); 7] = [
    (Tracker::Ebpf, Who::Root),
    (Tracker::Ptrace, Who::Root),
    (Tracker::Netlink, Who::Root),
    (Tracker::Ebpf, Who::Nobody),
    (Tracker::Auto, Who::Nobody),
    (Tracker::Ptrace, Who::Nobody),
    (Tracker::Netlink, Who::Nobody),
];

/// The true figures of a workload: bytes, lowest and highest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Truth {
    /// The tree's peak PSS, and any one process's peak RSS.
    pub memory: (u64, u64),
    /// The cgroup's peak: the processes' memory and the kernel's for them (page tables, task
    /// structures), the page cache of files the binaries are read from when it is charged.
    pub group: (u64, u64),
}

/// What a small static program holds at its peak: measured 716 KiB on 6.18 (`/usr/bin/time`'s
/// maximum RSS of `fix true`), more with another libc or fault-around; never below the few
/// pages a process must touch to run at all.
const SMALL: (u64, u64) = (64 * KIB, 4 * MIB);
const SMALL_GROUP: (u64, u64) = (64 * KIB, 16 * MIB);

/// One run of the matrix: ste's arguments, and the answers.
#[derive(Debug, Clone)]
pub struct Case {
    pub name: &'static str,
    /// ste's options and the command; `FIX` is the static fixture, `FIXD` the dynamic one.
    pub args: Vec<String>,
    pub status: i32,
    pub truth: Truth,
    /// Processes, threads, execs.
    pub counts: (u64, u64, u64),
    pub getppid: Option<u64>,
    pub mallocs: Option<u64>,
    /// The run must fail to start, leaving no output file (exit 125).
    pub refused: bool,
}

fn words(w: &[&str]) -> Vec<String> {
    w.iter().map(|s| s.to_string()).collect()
}

/// The cases of a row.
pub fn cases(tracker: Tracker, who: Who) -> Vec<Case> {
    let t: Vec<String> = match tracker {
        Tracker::Auto => Vec::new(),
        t => words(&["--tracker", t.name()]),
    };
    let case = |name, extra: &[&str], command: &[&str]| {
        let mut args = t.clone();
        args.extend(words(extra));
        args.push("--".into());
        args.extend(words(command));
        Case {
            name,
            args,
            status: 0,
            truth: Truth {
                memory: SMALL,
                group: SMALL_GROUP,
            },
            counts: (1, 1, 1),
            getppid: None,
            mallocs: None,
            refused: false,
        }
    };
    if (tracker, who) == (Tracker::Ebpf, Who::Nobody) {
        return vec![Case {
            refused: true,
            status: 125,
            ..case("refused", &[], &["FIX", "true"])
        }];
    }
    // What an unprivileged user gets by default: the choice alone (its runs are the
    // ptrace row's), which `true` shows; the rest would only double the matrix's time.
    if (tracker, who) == (Tracker::Auto, Who::Nobody) {
        return vec![case("true", &[], &["FIX", "true"])];
    }
    let (n, l) = (LOOP.to_string(), LOOP + 1);
    let mut out = vec![
        case("true", &[], &["FIX", "true"]),
        Case {
            counts: (l, l, l),
            truth: Truth {
                memory: SMALL,
                // Each child's memory is charged to the group, and uncharged as it goes.
                group: SMALL_GROUP,
            },
            ..case("loop", &[], &["FIX", "loop", &n, "FIX", "true"])
        },
        Case {
            counts: (1, THREADS + 1, 1),
            ..case("threads", &[], &["FIX", "threads", &THREADS.to_string()])
        },
        Case {
            truth: Truth {
                memory: (FILL_MIB * MIB, FILL_MIB * MIB + 2 * MIB),
                // Page tables (1 MiB for 512 MiB) and the rest of the kernel's.
                group: (FILL_MIB * MIB, FILL_MIB * MIB + 16 * MIB),
            },
            ..case("fill", &[], &["FIX", "fill", &FILL_MIB.to_string()])
        },
        Case {
            status: 128 + SIGNAL,
            ..case("signal", &[], &["FIX", "signal", &SIGNAL.to_string()])
        },
        Case {
            mallocs: Some(MALLOCS),
            // Dynamic: the libraries' pages it shares with other processes count for a share
            // of their size in its PSS (about 200 KiB in all on 6.18), whole in its RSS.
            truth: Truth {
                memory: (64 * KIB, 8 * MIB),
                group: (64 * KIB, 16 * MIB),
            },
            ..case(
                "malloc",
                &["--malloc"],
                &["FIXD", "malloc", &MALLOCS.to_string()],
            )
        },
    ];
    // Counted in the kernel, or at ptrace stops when allowed; the netlink tracker cannot
    // count them (ste says so and refuses).
    let syscalls = match (tracker, who) {
        (Tracker::Ebpf, _) => Some((GETPPID_EBPF, &["--syscalls"][..])),
        (Tracker::Ptrace, _) => Some((GETPPID_PTRACE, &["--syscalls", "--allow-ptrace"][..])),
        _ => None,
    };
    if let Some((calls, flags)) = syscalls {
        out.push(Case {
            getppid: Some(calls),
            ..case("getppid", flags, &["FIX", "getppid", &calls.to_string()])
        });
    }
    out
}

/// A figure with what it claims: exactly `bytes`, or the truth within its bounds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Labelled {
    pub bytes: u64,
    /// The lowest and highest value the label admits.
    pub admits: (u64, u64),
    /// The label, in a word (`exact`, `carried`, `upper bound`, `sampled`) and in full.
    pub kind: String,
    pub label: String,
}

/// What one run showed: ste's status, its first error line, and what its JSON said.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Observed {
    pub case: String,
    pub tracker: Tracker,
    pub who: Who,
    pub status: i32,
    pub ms: u64,
    /// ste's first `ste:` line on stderr.
    pub error: Option<String>,
    /// Whether the `--json` file exists after the run.
    pub json_left: bool,
    /// What reached stdout (the fixtures write nothing there, and ste must not).
    pub stdout: Option<String>,
    pub run: Option<Summary>,
}

/// The figures of a run the checks read, taken from its JSON.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Summary {
    pub tracker: String,
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub processes: u64,
    pub threads: u64,
    pub execs: u64,
    /// Max PSS, `None` for `n/a`.
    pub max_pss: Option<Labelled>,
    /// The accounting's memory figures by name (`group_peak`, `largest_process_peak`, …).
    pub memory: Vec<(String, Labelled)>,
    pub getppid: Option<u64>,
    /// malloc and free calls of the fixture's image.
    pub mallocs: Option<(u64, u64)>,
    pub notes: Vec<String>,
    /// `figure: why` of each figure said unavailable.
    pub unavailable: Vec<String>,
}

impl Summary {
    pub fn of(run: &Run) -> Summary {
        let t = &run.totals;
        let max_pss = t.max_pss_bytes.map(|bytes| {
            // The interval the run proves: [largest lower end, largest upper end], no upper
            // end where no high-water mark at exit reached the sampler; a run of an older
            // ste, from the peak's kind and bound.
            let (admits, kind, label) = match (t.max_pss_low_bytes, t.max_pss_high_bytes) {
                (Some(l), Some(h)) if l == h => ((l, h), "exact", "exact".to_string()),
                (Some(l), Some(h)) => ((l, h), "between", format!("between {l} and {h}")),
                (Some(l), None) => ((l, u64::MAX), "at least", format!("at least {l}")),
                _ => {
                    let bound = t.max_pss_bound_bytes.unwrap_or(0);
                    match t.max_pss_kind {
                        Some(SampleKind::Exact) | None => {
                            ((bytes, bytes), "exact", "exact".to_string())
                        }
                        Some(SampleKind::Carried) => (
                            (bytes.saturating_sub(bound), bytes + bound),
                            "carried",
                            format!("carried, within {bound} bytes"),
                        ),
                        Some(SampleKind::ExitPeak) => (
                            (bytes.saturating_sub(bound), bytes),
                            "upper bound",
                            format!("an upper bound, at most {bound} bytes over"),
                        ),
                    }
                }
            };
            Labelled {
                bytes,
                admits,
                kind: kind.into(),
                label,
            }
        });
        let mut memory = Vec::new();
        if let Some(a) = &run.accounting {
            let m = &a.memory;
            for (name, f) in [
                ("group_peak", &m.group_peak),
                ("largest_process_peak", &m.largest_process_peak),
                ("summed_process_peaks", &m.summed_process_peaks),
                ("pss_max", &m.pss_max),
            ] {
                if let Some(f) = f {
                    // A sampled peak saw the memory at some moment: the truth is no lower. But
                    // `pss_max` is Max PSS's estimate, within the interval the run proves.
                    let (admits, kind, label) = match (&max_pss, name) {
                        _ if f.exact => ((f.bytes, f.bytes), "exact", "exact"),
                        (Some(m), "pss_max") => (
                            m.admits,
                            "estimate",
                            "an estimate within Max PSS's interval",
                        ),
                        _ => ((f.bytes, u64::MAX), "sampled", "sampled, a lower bound"),
                    };
                    memory.push((
                        name.to_string(),
                        Labelled {
                            bytes: f.bytes,
                            admits,
                            kind: kind.into(),
                            label: format!("{label} ({})", f.from),
                        },
                    ));
                }
            }
        }
        let getppid = run.syscalls.as_ref().map(|s| {
            s.calls
                .iter()
                .filter(|c| !c.compat && c.name.as_deref() == Some("getppid"))
                .map(|c| c.calls)
                .sum()
        });
        let mallocs = run.malloc.as_ref().and_then(|m| {
            m.images
                .iter()
                .find(|i| i.program.ends_with("/fixd"))
                .map(|i| (i.calls.malloc, i.calls.free))
        });
        Summary {
            tracker: run.tracker.clone(),
            code: run.exit.code,
            signal: run.exit.signal,
            processes: t.processes,
            threads: t.threads,
            execs: t.execs,
            max_pss,
            memory,
            getppid,
            mallocs,
            notes: run.notes.clone(),
            unavailable: run
                .accounting
                .iter()
                .flat_map(|a| &a.unavailable)
                .map(|u| format!("{}: {}", u.figure, u.why))
                .collect(),
        }
    }
}

/// One check of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub name: String,
    pub ok: bool,
    pub detail: String,
}

fn check(name: &str, ok: bool, detail: String) -> Check {
    Check {
        name: name.to_string(),
        ok,
        detail,
    }
}

/// Whether what `f` admits meets the truth `(lo, hi)`.
pub fn admits_truth(f: &Labelled, (lo, hi): (u64, u64)) -> bool {
    f.admits.0 <= hi && f.admits.1 >= lo
}

fn mib(b: u64) -> String {
    format!("{:.2} MiB", b as f64 / MIB as f64)
}

fn memory_check(name: &str, f: &Labelled, truth: (u64, u64)) -> Check {
    check(
        name,
        admits_truth(f, truth),
        format!(
            "{} bytes ({}), {}; truth {}..{}",
            f.bytes,
            mib(f.bytes),
            f.label,
            mib(truth.0),
            mib(truth.1)
        ),
    )
}

/// The checks of a run of `case`, as `tracker` ran it (`Auto` as `nobody`: ptrace).
pub fn checks(case: &Case, o: &Observed) -> Vec<Check> {
    let error = o.error.clone().unwrap_or_default();
    if case.refused {
        return vec![
            check(
                "refused",
                o.status == case.status,
                format!("exit {}: {error}", o.status),
            ),
            check(
                "no file left",
                !o.json_left,
                if o.json_left {
                    "the --json file exists after a failed start".into()
                } else {
                    String::new()
                },
            ),
        ];
    }
    let mut out = vec![check(
        "start",
        o.status == case.status,
        format!("exit {}, expected {}{}", o.status, case.status, {
            if error.is_empty() {
                String::new()
            } else {
                format!(": {error}")
            }
        }),
    )];
    if o.status == 125 {
        out.push(check(
            "no file left",
            !o.json_left,
            "a failed start must leave no --json file".into(),
        ));
        return out;
    }
    // A run that started says nothing on its own stderr line (`ste: …`) but what went
    // wrong: a figure or a way of working it had to give up.
    out.push(check("warning", o.error.is_none(), error.clone()));
    out.push(check(
        "stdout",
        o.stdout.is_none(),
        o.stdout.clone().unwrap_or_default(),
    ));
    let Some(r) = &o.run else {
        out.push(check("json", false, "no JSON file".into()));
        return out;
    };
    let tracker = match o.tracker {
        Tracker::Auto => "ptrace",
        t => t.name(),
    };
    out.push(check(
        "tracker",
        r.tracker == tracker,
        format!("{} (asked: {})", r.tracker, o.tracker.name()),
    ));
    let (p, t, e) = case.counts;
    out.push(check(
        "counts",
        (r.processes, r.threads, r.execs) == (p, t, e),
        format!(
            "processes {} threads {} execs {}, expected {p} {t} {e}",
            r.processes, r.threads, r.execs
        ),
    ));
    let status = match (r.code, r.signal) {
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        _ => -1,
    };
    out.push(check(
        "exit",
        status == case.status,
        format!("code {:?} signal {:?}", r.code, r.signal),
    ));
    match &r.max_pss {
        Some(f) => out.push(memory_check("max_pss", f, case.truth.memory)),
        None => out.push(check("max_pss", true, "n/a".into())),
    }
    for (name, f) in &r.memory {
        let truth = match name.as_str() {
            "group_peak" => case.truth.group,
            // Every process's peak, added: each of the loop's 201.
            "summed_process_peaks" => (case.truth.memory.0, case.truth.memory.1 * p),
            _ => case.truth.memory,
        };
        out.push(memory_check(name, f, truth));
    }
    if let Some(n) = case.getppid {
        out.push(check(
            "getppid",
            r.getppid == Some(n),
            format!("{:?} counted, {n} made", r.getppid),
        ));
    }
    if let Some(n) = case.mallocs {
        out.push(check(
            "malloc",
            r.mallocs == Some((n, n)),
            format!("{:?} malloc/free counted, {n} made", r.mallocs),
        ));
    }
    out
}
