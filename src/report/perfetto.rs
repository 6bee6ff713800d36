//! A trace of the run for ui.perfetto.dev and chrome://tracing, in Chrome's trace-event JSON
//! format ("Trace Event Format", the JSON object form with `traceEvents`).
//!
//! JSON rather than Perfetto's protobuf: both viewers open it, it needs no protobuf code, and
//! people can read, grep and diff it. The object's keys come in the order Perfetto's importer
//! wants (`displayTimeUnit` first; it stops at a key it does not know).
//!
//! Layout:
//! - one process per process of the tree, named by its argv and sorted in creation order; a
//!   pid the run used twice gets `pid + k·2²²` (above any Linux pid) so each keeps its track;
//! - on its main thread, a slice for its lifetime, inside it one slice per exec (named by the
//!   program, argv in the args), an instant at its exit, and a `fork` instant with a flow arrow
//!   to each child; one thread track per other thread, with a slice for its lifetime;
//! - the lifetime slice's args carry the process's exact figures (its `ledger`, grouped by
//!   the source that measured them, as in the JSON) and, for a process on the critical path,
//!   its own time on it;
//! - counters: each process's PSS from the per-process samples and its CPU (cores) from
//!   `rates` (intervals long enough for 10 ms ticks, capped by its threads and the machine's
//!   CPUs); on a "whole tree" process, the tree's PSS, RSS, live processes and CPU (the sum,
//!   never above the machine's CPUs), and the Max PSS instant;
//!   with a cgroup, its memory, anonymous memory and page cache as high-water marks (the
//!   highest seen so far: the Run keeps only the rounds that raised one), the memory ending
//!   at the exact peak the kernel kept.
//!
//! Events are sorted by time with a stable sort, and every track's own events are emitted in
//! nesting order, so begin/end pairs nest on every track. Times are microseconds with
//! nanosecond decimals.

use crate::model::{Run, join_escaped, signal_name};
use crate::report::names::{Tree, readings};
use crate::report::rates::{cpu_spans, tree_steps};
use serde::Serialize;
use serde_json::{Value, json};
use std::borrow::Cow;
use std::io::{self, Write};

/// The pseudo-process holding the tree's counters: above any Linux pid (`PID_MAX_LIMIT` is
/// 2²²) and any remapped one.
pub const TREE_PID: u32 = 0x7fff_fff0;
/// Longest process name; the full argv is in the exec slices' args.
const NAME_CHARS: usize = 120;

#[derive(Serialize)]
struct TraceEvent<'a> {
    name: Cow<'a, str>,
    #[serde(skip_serializing_if = "str::is_empty")]
    cat: &'static str,
    ph: &'static str,
    ts: f64,
    pid: u32,
    tid: u32,
    /// Scope of an instant event: `t` thread, `p` process.
    #[serde(skip_serializing_if = "Option::is_none")]
    s: Option<&'static str>,
    /// Flow id.
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<u64>,
    /// A flow end binds to its enclosing slice.
    #[serde(skip_serializing_if = "Option::is_none")]
    bp: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    args: Option<Value>,
}

struct Trace<'a> {
    /// (time in ns, event); sorted stably at the end.
    events: Vec<(u64, TraceEvent<'a>)>,
}

impl<'a> Trace<'a> {
    fn push(
        &mut self,
        t_ns: u64,
        ph: &'static str,
        name: impl Into<Cow<'a, str>>,
        (pid, tid): (u32, u32),
        args: Option<Value>,
    ) -> &mut TraceEvent<'a> {
        self.events.push((
            t_ns,
            TraceEvent {
                name: name.into(),
                cat: "",
                ph,
                ts: t_ns as f64 / 1000.0,
                pid,
                tid,
                s: None,
                id: None,
                bp: None,
                args,
            },
        ));
        &mut self.events.last_mut().expect("just pushed").1
    }

    fn meta(&mut self, name: &'static str, track: (u32, u32), args: Value) {
        self.push(0, "M", name, track, Some(args));
    }

    fn counter(&mut self, t_ns: u64, name: &'static str, track: u32, key: &str, v: f64) {
        self.push(t_ns, "C", name, (track, track), Some(json!({ key: v })));
    }
}

pub fn render(run: &Run, w: &mut dyn Write) -> io::Result<()> {
    let tree = Tree::new(run);
    let end_of_run = run.totals.wall_ns;
    let mut t = Trace {
        events: Vec::with_capacity(run.processes.len() * 12 + run.samples.len() * 8),
    };

    // Track pids: the real pid, unless an earlier process of the run had it.
    let mut seen = std::collections::HashMap::new();
    let pids: Vec<u32> = run
        .processes
        .iter()
        .map(|p| {
            let k = seen.entry(p.pid).or_insert(0u32);
            let pid = (p.pid.max(0) as u32).wrapping_add(*k << 22);
            *k += 1;
            pid
        })
        .collect();

    t.meta(
        "process_name",
        (TREE_PID, TREE_PID),
        json!({"name": shorten(format!("whole tree: {}", join_escaped(&run.command)))}),
    );
    t.meta(
        "process_sort_index",
        (TREE_PID, TREE_PID),
        json!({"sort_index": -1}),
    );

    let delays_on = run.accounting.as_ref().and_then(|a| a.delays_on) == Some(true);
    // Each critical path link's own time, by (pid, start).
    let path_self: std::collections::HashMap<(i32, u64), u64> = run
        .accounting
        .iter()
        .flat_map(|a| &a.critical_path)
        .map(|l| ((l.pid, l.start_ns), l.self_ns))
        .collect();

    for (i, p) in run.processes.iter().enumerate() {
        let pid = pids[i];
        let main = (pid, pid);
        let start = p.start_ns;
        let end = p.end_ns.unwrap_or(end_of_run).max(start);
        let argv = p
            .execs
            .last()
            .and_then(|e| e.argv.as_deref())
            .map(join_escaped);
        let shown = argv.unwrap_or_else(|| tree.label[i].clone());
        let name = shorten(format!("{} {}", p.pid, shown));
        t.meta("process_name", main, json!({ "name": name }));
        t.meta("process_sort_index", main, json!({ "sort_index": i }));
        t.meta("thread_name", main, json!({ "name": tree.label[i] }));

        let mut args = json!({
            "pid": p.pid,
            "ppid": p.ppid,
            "threads": p.threads,
            "peak_rss_bytes": p.peak_rss_bytes,
            "exit": exit_text(p.exit_code, p.signal),
            "ended": if p.end_ns.is_some() { "yes" } else { "no (still running or its end was missed)" },
        });
        if let Some(l) = &p.ledger {
            args["ledger"] = ledger_args(l, delays_on);
        }
        if let Some(own) = path_self.get(&(p.pid, p.start_ns)) {
            args["critical_path_self_ns"] = (*own).into();
        }
        t.push(start, "B", format!("pid {}", p.pid), main, Some(args));
        if let Some(j) = tree.parent[i] {
            let parent = (pids[j], pids[j]);
            let flow = i as u64 + 1;
            t.push(
                start,
                "i",
                "fork",
                parent,
                Some(json!({"child_pid": p.pid, "child": tree.label[i]})),
            )
            .s = Some("t");
            let e = t.push(start, "s", "fork", parent, None);
            e.cat = "fork";
            e.id = Some(flow);
            let e = t.push(start, "f", "fork", main, None);
            e.cat = "fork";
            e.id = Some(flow);
            e.bp = Some("e");
        }
        for (k, e) in p.execs.iter().enumerate() {
            let at = e.t_ns.clamp(start, end);
            if k > 0 {
                t.push(at, "E", "", main, None);
            }
            let program = e
                .argv
                .as_ref()
                .and_then(|a| a.first())
                .map(crate::report::names::basename)
                .unwrap_or_else(|| "exec (argv unknown)".into());
            t.push(
                at,
                "B",
                program,
                main,
                Some(json!({ "argv": e.argv.as_deref().map(join_escaped) })),
            );
        }
        if p.end_ns.is_some() {
            t.push(
                end,
                "i",
                "exit",
                main,
                Some(json!({ "status": exit_text(p.exit_code, p.signal) })),
            )
            .s = Some("t");
        }
        if !p.execs.is_empty() {
            t.push(end, "E", "", main, None);
        }
        t.push(end, "E", "", main, None);

        for l in &p.thread_lifetimes {
            let tid = (pid, l.tid.max(0) as u32);
            let from = l.start_ns.clamp(start, end);
            t.meta(
                "thread_name",
                tid,
                json!({ "name": format!("{} thread {}", tree.label[i], l.tid) }),
            );
            t.push(from, "B", format!("thread {}", l.tid), tid, None);
            t.push(l.end_ns.unwrap_or(end).clamp(from, end), "E", "", tid, None);
        }
    }

    // Counters from the samples: PSS holds from its reading; a process's CPU (cores) holds
    // over each span it was measured on (`rates`: at least 100 ms between readings of its
    // 10 ms ticks), the tree's is their sum, never above the machine's CPUs.
    let reads = readings(run, &tree);
    let mut next = 0;
    let mut read: std::collections::BTreeSet<usize> = Default::default();
    for (k, s) in run.samples.iter().enumerate() {
        t.counter(s.t_ns, "PSS", TREE_PID, "bytes", s.pss_bytes as f64);
        t.counter(s.t_ns, "RSS", TREE_PID, "bytes", s.rss_bytes as f64);
        t.counter(
            s.t_ns,
            "processes",
            TREE_PID,
            "live",
            f64::from(s.processes),
        );
        while let Some(r) = reads.get(next).filter(|r| r.sample == k) {
            next += 1;
            t.counter(s.t_ns, "PSS", pids[r.process], "bytes", r.pss_bytes as f64);
            read.insert(r.process);
        }
    }
    // PSS drops to 0 when a process ends.
    for &i in &read {
        if let Some(end) = run.processes[i].end_ns {
            t.counter(end, "PSS", pids[i], "bytes", 0.0);
        }
    }
    let spans = cpu_spans(run, &tree);
    for (k, s) in spans.iter().enumerate() {
        let pid = pids[s.process];
        t.counter(s.from_ns, "CPU", pid, "cores", s.cores());
        // After a process's last span its CPU is not known: the counter drops to 0.
        if spans.get(k + 1).is_none_or(|n| n.process != s.process) {
            t.counter(s.to_ns, "CPU", pid, "cores", 0.0);
        }
    }
    for (at, cores) in tree_steps(run, &spans) {
        t.counter(at, "CPU", TREE_PID, "cores", cores);
    }
    group_counters(&mut t, run);
    if let (Some(b), Some(at)) = (run.totals.max_pss_bytes, run.totals.max_pss_t_ns) {
        t.push(
            at,
            "i",
            "Max PSS",
            (TREE_PID, TREE_PID),
            Some(json!({ "bytes": b })),
        )
        .s = Some("p");
    }

    // Stable: each track's events keep their nesting order among equal times.
    t.events.sort_by_key(|(ns, _)| *ns);
    write!(w, "{{\"displayTimeUnit\":\"ns\",\"otherData\":")?;
    let mut other = json!({
        "generator": run.generator,
        "command": join_escaped(&run.command),
        "tracker": run.tracker,
        "schema_version": run.schema_version,
        "machine_cpus": run.machine_cpus,
        "cpu_counters": cpu_note(run),
    });
    // What the trace leaves out (`report::drawn`) is said where its metadata is.
    if let Some(note) = run.notes.iter().find(|n| n.starts_with(super::DRAWN_NOTE)) {
        other["note"] = note.as_str().into();
    }
    serde_json::to_writer(&mut *w, &other)?;
    write!(w, ",\"traceEvents\":[")?;
    for (n, (_, e)) in t.events.iter().enumerate() {
        w.write_all(if n == 0 { b"\n" } else { b",\n" })?;
        serde_json::to_writer(&mut *w, e)?;
    }
    writeln!(w, "\n]}}")
}

/// A ledger as in the JSON, without the delay-accounting waits when delay accounting was
/// off: taskstats (and BPF at the last switch) then report them as 0, which would read as
/// "never waited".
fn ledger_args(l: &crate::model::Ledger, delays_on: bool) -> Value {
    let mut v = serde_json::to_value(l).unwrap_or(Value::Null);
    for source in ["taskstats", "last_switch"] {
        if !delays_on && let Some(f) = v.get_mut(source).and_then(Value::as_object_mut) {
            f.remove("blkio_delay_ns");
            f.remove("swap_reclaim_delay_ns");
        }
    }
    v
}

/// The cgroup's memory on the whole tree's track, as high-water marks: a counter holds its
/// value until the next, and the Run has only the rounds that raised a maximum, so the
/// highest-so-far is what it can draw truthfully.
fn group_counters(t: &mut Trace, run: &Run) {
    let Some(a) = &run.accounting else { return };
    let Some(g) = &a.group else { return };
    let (mut usage, mut anon, mut file) = (None, None, None);
    let raise = |t: &mut Trace, at: u64, name: &'static str, max: &mut Option<u64>, v: u64| {
        if max.is_none_or(|m| v > m) {
            *max = Some(v);
            t.counter(at, name, TREE_PID, "bytes", v as f64);
        }
    };
    for r in &g.rounds {
        raise(
            t,
            r.t_ns,
            "cgroup memory (high-water)",
            &mut usage,
            r.usage_bytes,
        );
        raise(
            t,
            r.t_ns,
            "cgroup anon (high-water)",
            &mut anon,
            r.anon_bytes,
        );
        raise(
            t,
            r.t_ns,
            "cgroup page cache (high-water)",
            &mut file,
            r.file_bytes,
        );
    }
    // The kernel's own high-water mark, read at the end, counts what rose between rounds.
    if let Some(peak) = g.end.and_then(|e| e.memory_peak_bytes) {
        let end = run.totals.wall_ns;
        raise(t, end, "cgroup memory (high-water)", &mut usage, peak);
    }
}

/// What the `CPU` counters are, for the trace's metadata: how they were taken and what caps
/// them, saying so when the Run does not know the machine's CPUs (a run of an older ste).
fn cpu_note(run: &Run) -> String {
    let cap = match run.machine_cpus {
        Some(n) => format!("never above the machine's {n} CPUs"),
        None => "not capped by the machine's CPUs, which this run did not record (an older ste)"
            .to_string(),
    };
    format!(
        "cores, each process's over the intervals between its readings of /proc/PID/stat (10 ms ticks; at least {} ms apart) and its end; a process at most its threads, the whole tree {cap}",
        crate::report::rates::MIN_SPAN_NS / 1_000_000
    )
}

fn shorten(name: String) -> String {
    if name.chars().count() > NAME_CHARS {
        name.chars().take(NAME_CHARS - 1).collect::<String>() + "…"
    } else {
        name
    }
}

fn exit_text(code: Option<i32>, signal: Option<i32>) -> String {
    match (code, signal) {
        (Some(c), _) => format!("exited {c}"),
        (None, Some(s)) => format!("killed by {}", signal_name(s)),
        (None, None) => "unknown".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testing;

    #[test]
    fn snapshot() {
        let mut out = Vec::new();
        render(&testing::build(), &mut out).unwrap();
        insta::assert_snapshot!(String::from_utf8(out).unwrap());
    }

    #[test]
    fn snapshot_accounting() {
        let mut out = Vec::new();
        render(&testing::build_accounting(), &mut out).unwrap();
        insta::assert_snapshot!(String::from_utf8(out).unwrap());
    }

    #[test]
    fn group_memory_counters_are_high_water_marks() {
        let mut out = Vec::new();
        render(&testing::build_accounting(), &mut out).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        let series = |name: &str| -> Vec<(f64, f64)> {
            v["traceEvents"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["ph"] == "C" && e["name"] == name)
                .map(|e| {
                    (
                        e["ts"].as_f64().unwrap(),
                        e["args"]["bytes"].as_f64().unwrap(),
                    )
                })
                .collect()
        };
        const MIB: f64 = (1 << 20) as f64;
        // Rounds at 20, 100, 300, 600 and 640 ms (usage = anon + file + 1 MiB; the last round
        // raised only the page cache), then the exact peak at the end of the run.
        assert_eq!(
            series("cgroup memory (high-water)"),
            [
                (20_000.0, 5.0 * MIB),
                (100_000.0, 17.0 * MIB),
                (300_000.0, 77.0 * MIB),
                (600_000.0, 100.0 * MIB),
                (1_201_000.0, 104.0 * MIB + 12_345.0),
            ]
        );
        assert_eq!(
            series("cgroup page cache (high-water)").last(),
            Some(&(640_000.0, 12.0 * MIB))
        );
        assert_eq!(series("cgroup anon (high-water)").len(), 4);
        // The ledger rides on the lifetime slice, by source.
        let cc1 = v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["ph"] == "B" && e["name"] == "pid 102")
            .unwrap();
        assert_eq!(
            cc1["args"]["ledger"]["taskstats"]["peak_rss_bytes"],
            111 * (1 << 20)
        );
        assert_eq!(cc1["args"]["critical_path_self_ns"], 390_000_000);
        assert_eq!(
            cc1["args"]["ledger"]["taskstats"]["blkio_delay_ns"],
            19_500_000
        );
    }

    /// Issue 45: a round 32 µs after a carried tick drew one compiler at 20,333 cores. The
    /// CPU counters are rates over intervals long enough for their ticks, and none passes
    /// what the process or the machine could run.
    #[test]
    fn no_cpu_counter_passes_the_machine() {
        let mut run = testing::build();
        let k = run
            .samples
            .iter()
            .position(|s| s.t_ns == 250_000_000)
            .unwrap();
        let mut tick = run.samples[k].clone();
        tick.t_ns -= 32_000;
        tick.kind = crate::model::SampleKind::Carried;
        for p in tick.per_process.iter_mut().flatten() {
            p.cpu_ns = None;
        }
        run.samples.insert(k, tick);
        let cores = |run: &Run| -> Vec<(u64, f64)> {
            let mut out = Vec::new();
            render(run, &mut out).unwrap();
            let v: Value = serde_json::from_slice(&out).unwrap();
            v["traceEvents"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["ph"] == "C" && e["name"] == "CPU")
                .map(|e| {
                    (
                        e["pid"].as_u64().unwrap(),
                        e["args"]["cores"].as_f64().unwrap(),
                    )
                })
                .collect()
        };
        let all = cores(&run);
        assert!(all.iter().any(|c| c.0 == u64::from(TREE_PID)));
        for (pid, c) in &all {
            let most = if *pid == u64::from(TREE_PID) {
                2.0
            } else {
                1.0
            };
            assert!(*c <= most, "pid {pid}: {c} cores");
        }
        // A run of an older ste does not know the machine: the trace says so.
        run.machine_cpus = None;
        let mut out = Vec::new();
        render(&run, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("\"machine_cpus\":null"), "{text}");
        assert!(text.contains("which this run did not record (an older ste)"));
    }

    #[test]
    fn waits_are_left_out_when_delay_accounting_was_off() {
        let mut run = testing::build_accounting();
        run.accounting.as_mut().unwrap().delays_on = Some(false);
        let mut out = Vec::new();
        render(&run, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("\"run_queue_ns\""));
        assert!(!text.contains("blkio_delay_ns") && !text.contains("swap_reclaim_delay_ns"));
    }
}
