//! The HTML report: one self-contained file (no network, no CDN, no fonts to fetch) that a
//! browser opens offline, on a laptop or a phone, in a light or dark theme.
//!
//! The page is a template with the stylesheet and a hand-written script inlined
//! (`html/report.{html,css,js}`); the script draws the charts (inline SVG and canvas) from the
//! data embedded in the page. This file builds that data, the "view": the Run with its two big
//! arrays recast as columns (one array per field) so that 100,000 processes stay a few MB, argv
//! strings de-duplicated, each sample's per-process readings resolved to process indices, and
//! each process's ledger recast as one column per figure with its source (`html/ledger.rs`).
//! Fields of the Run the script has no special view for (whatever later versions add) are kept
//! as they are, and the script renders them generically, so new sections show up unasked.
//! The system calls, malloc and memory-at-the-peak sections have views of their own; what their
//! text report derives from the processes (an image's program) or words in Rust (reasons,
//! where page figures came from) the view carries in `labels`, made by the text report's own
//! functions, so that the page and the text say the same.
//!
//! When the view is large it is embedded gzip-compressed in base64, and the script inflates it
//! with the browser's own `DecompressionStream`.

mod ledger;

use crate::model::maps::MappingKind;
use crate::model::{Process, Run, Sample, join_escaped};
use crate::report;
use crate::report::names::{Tree, readings};
use flate2::Compression;
use flate2::write::GzEncoder;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::io::{self, Write};

const TEMPLATE: &str = include_str!("html/report.html");
const STYLE: &str = include_str!("html/report.css");
const SCRIPT: &str = include_str!("html/report.js");

/// Views larger than this are embedded compressed.
const COMPRESS_ABOVE: usize = 256 * 1024;
/// deflate level of the embedded view: on 100,000 processes, level 3 makes 3.2 MB of 28 MB
/// in 0.3 s where the default 6 makes 3.3 MB in 0.8 s (miniz_oxide).
const LEVEL: u32 = 3;

/// The data the page's script draws.
#[derive(Serialize, Debug)]
pub struct View {
    /// Version of this view's layout, for the script.
    pub view_version: u32,
    /// The Run without `processes` and `samples`, as in `--json`.
    pub run: Map<String, Value>,
    /// Distinct strings (argv lines), referenced by index.
    pub strings: Vec<String>,
    /// Distinct programs (argv[0] basenames), referenced by index; colours follow this order,
    /// most memory first.
    pub programs: Vec<String>,
    pub processes: Processes,
    /// Every exec, in order.
    pub execs: Execs,
    /// Every scalar field of `samples`, one array each.
    pub samples: Map<String, Value>,
    /// Each sample's per-process readings (PSS).
    pub readings: Readings,
    /// Each process's CPU over time.
    pub cpu: CpuSpans,
    /// Words the text report derives for the system calls, malloc and memory-at-peak
    /// sections, so that the page says the same.
    pub labels: Labels,
    /// The run by program, as `--by-program` prints it and the JSON's `programs` holds it.
    pub by_program: Vec<crate::report::programs::Program>,
}

/// What the text report says of the Run's system calls, malloc and memory at the peak that is
/// not in their data as such: names derived from the processes' execs (which the view holds
/// only as argv lines) and fixed wording. Built by the text report's own functions, so the
/// page and the text never differ. Empty lists are left out of the JSON.
#[derive(Serialize, Debug, Default)]
pub struct Labels {
    /// How the system calls were counted and timed (`counted at ptrace syscall stops, …`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub syscalls_method: Option<String>,
    /// Per entry of `syscalls.images`: the program of that image (`make`, `sh (fork)`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub syscall_images: Vec<String>,
    /// Per entry of `malloc.images`: whether the text report shows it (a forked child with no
    /// call, replaced by an exec at once, says nothing).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub malloc_shown: Vec<bool>,
    /// Per entry of `malloc.images`: its held peak in words (exact or bounded, and when).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub malloc_held_peak: Vec<String>,
    /// Per entry of `malloc.uncovered`: its reason in words.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub malloc_uncovered: Vec<String>,
    /// What taking the maps at the peak cost and what the budget left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_info: Option<String>,
    /// Where the snapshot stands against the run's Max PSS (and why it is below it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_where: Option<String>,
    /// Per process of `memory_at_peak.snapshot`: the program it ran at the snapshot.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub peak_programs: Vec<String>,
    /// Per process of `memory_at_peak.snapshot`: where its page-level figures came from.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub peak_pages_from: Vec<String>,
    /// The tree's user and system CPU as the text's Walltime line gives them (`report::cpu`:
    /// getrusage's, or a source that also counts auto-reaped processes), and the line the
    /// text prints under it, when it prints one.
    pub cpu_user_ns: Option<u64>,
    pub cpu_sys_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_note: Option<String>,
    /// The text's line naming the processes the OOM killer killed (`report::oom`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oom: Option<String>,
    /// The text's line under `Max PSS:`: how exact it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_pss_exactness: Option<String>,
    /// Whether the text shows the process peaks summed: only when every process lived at the
    /// same time, else the sum adds peaks that never coexisted and means nothing.
    pub summed_peaks_shown: bool,
    /// Each kind of mapping (`heap`, `thread_stack`, …) with its label, in the text's order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mapping_kinds: Vec<(MappingKind, &'static str)>,
}

/// The labels of a Run's system calls, malloc and memory at the peak.
fn labels(run: &Run) -> Labels {
    let cpu = report::cpu::headline(run);
    let mut l = Labels {
        cpu_user_ns: cpu.user_ns,
        cpu_sys_ns: cpu.sys_ns,
        cpu_note: report::cpu::note(run),
        oom: report::oom::line(run),
        max_pss_exactness: report::max_pss::max_pss_line(run),
        summed_peaks_shown: report::accounting::all_lived_together(run),
        ..Labels::default()
    };
    if let Some(sc) = &run.syscalls {
        l.syscalls_method = Some(report::syscalls::method_text(sc));
        l.syscall_images = sc
            .images
            .iter()
            .map(|i| report::syscalls::image_program(run, i))
            .collect();
    }
    if let Some(m) = &run.malloc {
        l.malloc_shown = m
            .images
            .iter()
            .map(|i| report::malloc::worth_showing(m, i))
            .collect();
        l.malloc_held_peak = m.images.iter().map(report::malloc::peak_text).collect();
        l.malloc_uncovered = m.uncovered.iter().map(|u| u.reason.text().into()).collect();
    }
    if let Some(peak) = &run.memory_at_peak {
        l.peak_info = Some(report::maps::info_text(run, peak));
        l.peak_where = report::maps::where_text(run, peak);
        l.mapping_kinds = MappingKind::ALL.iter().map(|k| (*k, k.label())).collect();
    }
    if let Some(s) = run
        .memory_at_peak
        .as_ref()
        .and_then(|p| p.snapshot.as_ref())
    {
        for p in &s.processes {
            l.peak_programs
                .push(report::maps::name_at(run, p.pid, s.t_ns));
            l.peak_pages_from
                .push(report::maps::pages_from_text(&p.pages_from));
        }
    }
    l
}

#[derive(Serialize, Debug, Default)]
pub struct Processes {
    /// Index in `programs` of the program each process ran last (or inherited).
    pub program: Vec<usize>,
    /// Whether it never exec'd and ran its parent's program.
    pub forked: Vec<bool>,
    /// Index of its parent, -1 when it has none in the tree.
    pub parent: Vec<i64>,
    pub depth: Vec<u32>,
    /// Index in `strings` of its last argv, -1 when unknown.
    pub argv: Vec<i64>,
    /// Every scalar field of `processes` (objects flattened as `io.rchar_bytes`), one array
    /// each, in the Run's field order. The ledger is not among them: see `ledger`.
    pub columns: Map<String, Value>,
    /// The ledger's figures, one column each, with the source of every value.
    pub ledger: ledger::LedgerColumns,
}

#[derive(Serialize, Debug, Default)]
pub struct Execs {
    pub process: Vec<usize>,
    pub t_ns: Vec<u64>,
    /// Index in `strings`, -1 when the argv was unreadable.
    pub argv: Vec<i64>,
}

#[derive(Serialize, Debug, Default)]
pub struct Readings {
    pub sample: Vec<usize>,
    pub process: Vec<usize>,
    pub pss_bytes: Vec<u64>,
}

/// Each process's CPU over the spans `rates` takes its rates from, in process order.
#[derive(Serialize, Debug, Default)]
pub struct CpuSpans {
    pub process: Vec<usize>,
    pub from_ns: Vec<u64>,
    pub to_ns: Vec<u64>,
    pub cpu_ns: Vec<u64>,
    /// The shortest span between two readings (`rates::MIN_SPAN_NS`): the chart's bins are
    /// never shorter.
    pub min_span_ns: u64,
}

/// Builds the view of a Run.
pub fn view(run: &Run) -> View {
    let tree = Tree::new(run);
    let reads = readings(run, &tree);

    // Programs, most PSS first (a stable order for colours), then the rest by first use.
    let base = |i: usize| -> String {
        let l = &tree.label[i];
        l.strip_suffix(" (fork)").unwrap_or(l).to_string()
    };
    let mut weight: HashMap<String, u64> = HashMap::new();
    for r in &reads {
        let w = weight.entry(base(r.process)).or_default();
        *w = w.saturating_add(r.pss_bytes);
    }
    let mut programs: Vec<String> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for i in 0..run.processes.len() {
        let b = base(i);
        if !index.contains_key(&b) {
            index.insert(b.clone(), programs.len());
            programs.push(b);
        }
    }
    let first_use: HashMap<String, usize> = index.clone();
    programs.sort_by(|a, b| {
        let (wa, wb) = (weight.get(a).unwrap_or(&0), weight.get(b).unwrap_or(&0));
        wb.cmp(wa).then(first_use[a].cmp(&first_use[b]))
    });
    let index: HashMap<&str, usize> = programs
        .iter()
        .enumerate()
        .map(|(k, p)| (p.as_str(), k))
        .collect();

    let mut strings = Strings::default();
    let mut procs = Processes::default();
    let mut execs = Execs::default();
    let mut rows = Vec::with_capacity(run.processes.len());
    for (i, p) in run.processes.iter().enumerate() {
        procs.program.push(index[base(i).as_str()]);
        procs.forked.push(tree.label[i].ends_with(" (fork)"));
        procs.parent.push(tree.parent[i].map_or(-1, |j| j as i64));
        procs.depth.push(tree.depth[i]);
        let mut last = -1;
        for e in &p.execs {
            last = e
                .argv
                .as_deref()
                .map_or(-1, |a| strings.index(join_escaped(a)));
            execs.process.push(i);
            execs.t_ns.push(e.t_ns);
            execs.argv.push(last);
        }
        procs.argv.push(last);
        rows.push(serde_json::to_value(scalars_of_process(p)).unwrap_or(Value::Null));
    }
    procs.columns = columns(&rows, &["ledger"]);
    procs.ledger = ledger::columns(run);
    let sample_rows: Vec<Value> = run
        .samples
        .iter()
        .map(|s| serde_json::to_value(scalars_of_sample(s)).unwrap_or(Value::Null))
        .collect();

    let mut readings_view = Readings::default();
    for r in &reads {
        readings_view.sample.push(r.sample);
        readings_view.process.push(r.process);
        readings_view.pss_bytes.push(r.pss_bytes);
    }
    let mut cpu = CpuSpans {
        min_span_ns: crate::report::rates::MIN_SPAN_NS,
        ..CpuSpans::default()
    };
    for s in crate::report::rates::cpu_spans(run, &tree) {
        cpu.process.push(s.process);
        cpu.from_ns.push(s.from_ns);
        cpu.to_ns.push(s.to_ns);
        cpu.cpu_ns.push(s.cpu_ns);
    }

    let mut rest = match serde_json::to_value(without_lists(run)) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    };
    rest.shift_remove("processes");
    rest.shift_remove("samples");
    View {
        view_version: 3,
        run: rest,
        strings: strings.list,
        programs,
        processes: procs,
        execs,
        samples: columns(&sample_rows, &["per_process"]),
        readings: readings_view,
        cpu,
        labels: labels(run),
        by_program: crate::report::programs::by_program(run),
    }
}

// The three copies below leave out the big lists, which the view holds in its own form:
// serialising them only to drop them took most of the time on 100,000 processes. They
// destructure without `..`, so a field added to the model fails to compile here until it is
// copied, and the page shows it.

/// The Run without its processes and samples.
pub(crate) fn without_lists(run: &Run) -> Run {
    let Run {
        schema_version,
        generator,
        command,
        tracker,
        machine_cpus,
        notes,
        exit,
        totals,
        processes: _,
        samples: _,
        sampler,
        overhead,
        sources,
        accounting,
        memory_at_peak,
        malloc,
        syscalls,
    } = run;
    Run {
        schema_version: *schema_version,
        generator: generator.clone(),
        command: command.clone(),
        tracker: tracker.clone(),
        machine_cpus: *machine_cpus,
        notes: notes.clone(),
        exit: exit.clone(),
        totals: totals.clone(),
        processes: Vec::new(),
        samples: Vec::new(),
        sampler: sampler.clone(),
        overhead: overhead.clone(),
        sources: sources.clone(),
        accounting: accounting.clone(),
        memory_at_peak: memory_at_peak.clone(),
        malloc: malloc.clone(),
        syscalls: syscalls.clone(),
    }
}

/// A process without its execs, threads and ledger (which the view holds as columns).
fn scalars_of_process(p: &Process) -> Process {
    let Process {
        pid,
        ppid,
        start_ns,
        end_ns,
        exit_code,
        signal,
        threads,
        peak_rss_bytes,
        io,
        ledger: _,
        execs: _,
        thread_lifetimes: _,
    } = p;
    Process {
        pid: *pid,
        ppid: *ppid,
        start_ns: *start_ns,
        end_ns: *end_ns,
        exit_code: *exit_code,
        signal: *signal,
        threads: *threads,
        peak_rss_bytes: *peak_rss_bytes,
        io: *io,
        ledger: None,
        execs: Vec::new(),
        thread_lifetimes: Vec::new(),
    }
}

/// A sample without its per-process readings.
pub(crate) fn scalars_of_sample(s: &Sample) -> Sample {
    let Sample {
        t_ns,
        pss_bytes,
        rss_bytes,
        processes,
        unreadable,
        per_process: _,
        kind,
        bound_bytes,
        low_bytes,
        high_bytes,
    } = s;
    Sample {
        t_ns: *t_ns,
        pss_bytes: *pss_bytes,
        rss_bytes: *rss_bytes,
        processes: *processes,
        unreadable: *unreadable,
        per_process: None,
        kind: *kind,
        bound_bytes: *bound_bytes,
        low_bytes: *low_bytes,
        high_bytes: *high_bytes,
    }
}

#[derive(Default)]
struct Strings {
    list: Vec<String>,
    index: HashMap<String, usize>,
}

impl Strings {
    fn index(&mut self, s: String) -> i64 {
        if let Some(&i) = self.index.get(&s) {
            return i as i64;
        }
        let i = self.list.len();
        self.index.insert(s.clone(), i);
        self.list.push(s);
        i as i64
    }
}

/// The scalar fields of `rows` (JSON objects) as one array per field, in first-seen order.
/// Object fields are flattened one level (`io.rchar_bytes`); arrays and the `skip`ped fields
/// are left out. A row without a field has `null` there.
fn columns(rows: &[Value], skip: &[&str]) -> Map<String, Value> {
    let mut names: Vec<String> = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut cells: Vec<Vec<(usize, Value)>> = Vec::new();
    let mut add = |name: String, row: usize, v: Value| {
        let k = *seen.entry(name.clone()).or_insert_with(|| {
            names.push(name);
            cells.push(Vec::new());
            cells.len() - 1
        });
        cells[k].push((row, v));
    };
    // A field that is an object in some row (`io`) is null in rows that lack it: its subfields
    // are then null too, which the default below gives.
    let objects: std::collections::HashSet<&str> = rows
        .iter()
        .filter_map(Value::as_object)
        .flat_map(|f| {
            f.iter()
                .filter(|(_, v)| v.is_object())
                .map(|(k, _)| k.as_str())
        })
        .collect();
    for (r, row) in rows.iter().enumerate() {
        let Value::Object(fields) = row else { continue };
        for (key, v) in fields {
            if skip.contains(&key.as_str()) {
                continue;
            }
            match v {
                Value::Array(_) => {}
                Value::Object(inner) => {
                    for (sub, sv) in inner {
                        if !sv.is_array() && !sv.is_object() {
                            add(format!("{key}.{sub}"), r, sv.clone());
                        }
                    }
                }
                Value::Null if objects.contains(key.as_str()) => {}
                scalar => add(key.clone(), r, scalar.clone()),
            }
        }
    }
    let mut out = Map::new();
    for (name, list) in names.into_iter().zip(cells) {
        let mut col = vec![Value::Null; rows.len()];
        for (r, v) in list {
            col[r] = v;
        }
        out.insert(name, Value::Array(col));
    }
    out
}

/// JSON safe to place inside a `<script>` element: `<` never appears raw, so neither
/// `</script>` nor `<!--` can end or confuse the element.
fn script_safe(json: &str) -> String {
    json.replace('<', "\\u003c")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// Text safe inside HTML element content and attribute values.
fn escape_html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

pub fn render(run: &Run, w: &mut dyn Write) -> io::Result<()> {
    let title = format!("ste: {}", join_escaped(&run.command));
    write_page(&view(run), &title, &run.generator, w)
}

/// Writes the page for a view. Separate from [`render`] so that tests can draw views holding
/// sections no Run has yet.
pub fn write_page(view: &View, title: &str, generator: &str, w: &mut dyn Write) -> io::Result<()> {
    let json = serde_json::to_string(view).map_err(io::Error::other)?;
    let (encoding, data) = if json.len() > COMPRESS_ABOVE {
        let mut gz = GzEncoder::new(Vec::new(), Compression::new(LEVEL));
        gz.write_all(json.as_bytes())?;
        ("gzip-base64", base64(&gz.finish()?))
    } else {
        ("json", script_safe(&json))
    };
    let page = TEMPLATE
        .replace("{{TITLE}}", &escape_html(title))
        .replace("{{GENERATOR}}", &escape_html(generator))
        .replace("{{STYLE}}", STYLE)
        .replace("{{SCRIPT}}", SCRIPT);
    // The data goes in last, so nothing in it is ever taken for a placeholder.
    let (head, tail) = page
        .split_once("{{DATA}}")
        .ok_or_else(|| io::Error::other("the HTML template has no {{DATA}} placeholder"))?;
    let head = head.replace("{{ENCODING}}", encoding);
    w.write_all(head.as_bytes())?;
    w.write_all(data.as_bytes())?;
    w.write_all(tail.as_bytes())
}

/// Standard base64 with padding (RFC 4648 §4). By hand: 20 lines against a dependency.
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for k in 0..4 {
            if k <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * k) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testing;

    #[test]
    fn view_snapshot() {
        let v = view(&testing::build());
        insta::assert_snapshot!(serde_json::to_string_pretty(&v).unwrap());
    }

    #[test]
    fn view_snapshot_accounting() {
        let v = view(&testing::build_accounting());
        insta::assert_snapshot!(serde_json::to_string_pretty(&v).unwrap());
    }

    #[test]
    fn labels_say_what_the_text_report_says() {
        use crate::model::malloc::{MallocRun, Uncovered, UncoveredReason};
        use crate::model::maps::{
            MappingFigures, MemoryAtPeak, PagesFrom, PeakMapsInfo, PeakSnapshot, ProcessMap,
        };
        use crate::model::{ImageCalls, Syscalls, Uncounted};
        let mut run = testing::build();
        // Without the three parts, only the Walltime line's CPU, Max PSS's exactness (the
        // text's line under it) and whether the text shows the summed peaks.
        assert_eq!(
            serde_json::to_value(view(&run).labels).unwrap(),
            serde_json::json!({
                "cpu_user_ns": run.totals.user_ns,
                "cpu_sys_ns": run.totals.sys_ns,
                "max_pss_exactness": crate::report::max_pss::max_pss_line(&run),
                "summed_peaks_shown": crate::report::accounting::all_lived_together(&run),
            })
        );
        let mut text = Vec::new();
        crate::report::text::render(
            &run,
            &mut text,
            crate::report::style::Style {
                width: 80,
                color: false,
                fit: true,
            },
        )
        .unwrap();
        let line = crate::report::max_pss::max_pss_line(&run).unwrap();
        assert!(
            String::from_utf8(text).unwrap().contains(&line),
            "the page's words are the text's"
        );
        let pid = run.processes[0].pid;
        run.syscalls = Some(Syscalls {
            method: "ptrace".into(),
            timed: true,
            per_process: true,
            arch: "x86_64".into(),
            compat_arch: None,
            table: "Linux 6.1.192 sources".into(),
            calls: Vec::new(),
            errors: Vec::new(),
            images: vec![ImageCalls {
                process: 0,
                pid,
                exec: Some(0),
                calls: Vec::new(),
            }],
            uncounted: Uncounted::default(),
        });
        run.malloc = Some(MallocRun {
            uncovered: vec![Uncovered {
                pid,
                t_ns: 0,
                program: "/bin/busybox".into(),
                reason: UncoveredReason::StaticBinary,
            }],
            ..MallocRun::default()
        });
        run.memory_at_peak = Some(MemoryAtPeak {
            snapshot: Some(PeakSnapshot {
                t_ns: run.processes[0].execs[0].t_ns,
                tree_pss_bytes: 1 << 20,
                processes: vec![ProcessMap {
                    pid,
                    page_size_bytes: 4096,
                    pages_from: PagesFrom::SmapsOnly {
                        why: "pagemap unreadable".into(),
                    },
                    mappings: Vec::new(),
                    totals: MappingFigures::default(),
                    pte: None,
                    flags: None,
                    map_counts: None,
                    cost_ns: 0,
                }],
                others: 0,
                others_pss_bytes: 0,
            }),
            info: PeakMapsInfo::default(),
        });
        let l = view(&run).labels;
        assert_eq!(
            l.syscalls_method.as_deref(),
            Some(
                "counted at ptrace syscall stops, like strace: SLOW, every call stopped the process twice, times include the stops"
            )
        );
        assert_eq!(l.syscall_images, ["sh"]);
        assert_eq!(
            l.malloc_uncovered,
            ["a static binary (no dynamic loader, so LD_PRELOAD is never read)"]
        );
        assert_eq!(l.peak_programs, ["sh"]);
        assert_eq!(
            l.peak_pages_from,
            ["/proc/PID/smaps only, no page-level data (pagemap unreadable)"]
        );
        assert!(l.peak_info.unwrap().starts_with("0 snapshots, "));
        assert_eq!(l.mapping_kinds.len(), MappingKind::ALL.len());
        assert_eq!(
            serde_json::to_value(l.mapping_kinds[0]).unwrap(),
            serde_json::json!(["heap", "heap (brk)"])
        );
    }

    #[test]
    fn the_ledger_is_columns_not_a_process_field() {
        let v = view(&testing::build_accounting());
        assert!(
            !v.processes.columns.keys().any(|k| k.starts_with("ledger")),
            "{:?}",
            v.processes.columns.keys()
        );
        let cpu = &v.processes.ledger.columns[0];
        assert_eq!(cpu.key, "cpu_ns");
        // The killed child (108, the last process but the daemon) has no taskstats record.
        let pids = &v.processes.columns["pid"];
        let k = pids
            .as_array()
            .unwrap()
            .iter()
            .position(|p| p == 108)
            .unwrap();
        assert_eq!(cpu.values[k], None);
        // The first process ran 0.4 ms of it before ste released it (the fixture).
        assert_eq!(cpu.values[0], Some(9_123_456 - 400_000));
    }

    #[test]
    fn the_page_is_self_contained() {
        let mut out = Vec::new();
        render(&testing::build(), &mut out).unwrap();
        let page = String::from_utf8(out).unwrap();
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(!page.contains("{{"), "a placeholder was left");
        for outside in ["http://", "https://", "<link", "src=", "@import", "//cdn"] {
            assert!(
                !page.contains(outside),
                "the page refers to something outside it: {outside}"
            );
        }
        // `url(` only for references inside the page (`url(#clip)`).
        for (at, _) in page.match_indices("url(") {
            assert_eq!(&page[at + 4..at + 5], "#", "{}", &page[at..at + 30]);
        }
        assert!(page.contains("Content-Security-Policy"));
        assert!(page.contains(r#"data-encoding="json""#));
    }

    #[test]
    fn data_cannot_close_the_script() {
        assert_eq!(
            script_safe(r#"{"a":"</script><!--"}"#),
            r#"{"a":"\u003c/script>\u003c!--"}"#
        );
    }

    #[test]
    fn base64_matches_rfc_4648() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn columns_flatten_objects_and_fill_gaps() {
        let rows = vec![
            serde_json::json!({"pid": 1, "io": {"rchar_bytes": 5}, "execs": []}),
            serde_json::json!({"pid": 2, "io": null, "extra": "x"}),
        ];
        let c = columns(&rows, &["execs"]);
        assert_eq!(
            Value::Object(c),
            serde_json::json!({"pid": [1, 2], "io.rchar_bytes": [5, null], "extra": [null, "x"]})
        );
    }
}
