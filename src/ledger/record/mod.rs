//! The record file (`ste record -o run.ste`): a run's event stream, written while the run goes,
//! which `ste report` replays through the recorder into the same Run.
//!
//! Owns the file format, the writer (`write.rs`: a tap on the recorder plus a flusher thread)
//! and the reader with its version policy and limits (`read.rs`). It never interprets events:
//! the recorder does.
//!
//! Format (record version 1): a gzip stream (RFC 1952; `zcat run.ste` prints it) of JSON
//! lines. The first line is a [`Header`]; every other line is one
//! [`event::Stamped`](crate::bus::event::Stamped) in its serde form (`{"t_ns":…,"kind":"fork",…}`).
//! While events arrive, the stream is sync-flushed every [`FLUSH_EVERY`] (a deflate block ends
//! on a byte boundary and reaches the file), so a ste that is killed (even by SIGKILL) or crashes
//! leaves a record readable up to its last flush, though the stream has no trailer; the reader
//! notices that the run's `end` event is missing and says so. Sync flushes keep the compression
//! dictionary: the record of `make -j2` on 40 C files is 17 KB for 105 KB of JSON lines, where
//! closing a gzip member at each flush made 34 KB; a loop of 2,000 execs, 112 KB for 937 KB.
//!
//! Versions: `record_version` changes only when an event changes meaning or disappears. Adding
//! an event kind or a field does not change it: an older ste skips kinds it does not know and
//! says how many it skipped; fields it does not know are ignored. A record of a newer
//! `record_version` is refused with a message naming both versions.
//!
//! Limits: a record is read from a file anyone may hand to `ste report`, so the reader bounds
//! what it holds before judging it ([`Limits`]): the header line, every event line, the
//! inflated stream, the number of events, their times and the recorded width; and what a few
//! bytes can multiply, counted as it is parsed: the arguments of an exec and of the whole
//! record (four bytes of JSON, `"a",`, became some fifty of memory, more to render: a record of
//! 69 KB took 1.75 GB), and the processes and threads (each costs the Run and its renderings
//! a few KB). Each refusal names the limit it hit; nothing is allocated in proportion to a
//! number the file states.

mod read;
mod write;

pub use read::{
    LoadError, Loaded, describe, load, load_from, looks_like_a_record, read, read_with,
};
pub use write::Recording;

use crate::report::style::{MAX_WIDTH, Style};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The `format` field of every record header.
pub const FORMAT: &str = "ste-record";
/// The record version this ste writes.
pub const RECORD_VERSION: u32 = 1;
/// The oldest record version this ste reads.
pub const OLDEST_READABLE: u32 = 1;
/// How often the stream is sync-flushed while events arrive: at most this much of a run is
/// lost when ste is killed.
pub const FLUSH_EVERY: Duration = Duration::from_millis(100);

/// deflate level: 3 compresses nearly as well as the default 6 for well under half its CPU
/// (bench/README.md), and the writer runs in ste's event loop.
const LEVEL: u32 = 3;

/// What the reader accepts, each limit far above what ste writes, so that a file made to
/// exhaust memory or time is refused early and by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The header line; ste writes about 400 bytes.
    pub header_bytes: usize,
    /// One event line. The largest ste writes is an exec whose argv is at the kernel's cap
    /// (6 MiB of argv and environment), up to four JSON bytes per byte when not UTF-8.
    pub line_bytes: usize,
    /// The inflated stream: the record of 100,000 processes holds 55 MB.
    pub total_bytes: u64,
    /// Event lines: the record of 100,000 processes holds 400,000.
    pub events: u64,
    /// An event's time since launch: a century, so that time arithmetic on a Run cannot wrap.
    pub t_ns: u64,
    /// The recorded text width: the widest `--width` takes.
    pub width: usize,
    /// The JSON values (strings, numbers, objects, …) of one event line. An event is read
    /// whole into serde's buffer before its kind's fields are (its `kind` tag decides them),
    /// some 50 bytes a value however short its JSON (`"a",`, `1,`), so a line is bounded by
    /// its values as well as its bytes: an exec's argv at the kernel's cap (some 700,000
    /// strings, below) and a sample of 300,000 live processes fit.
    pub line_values: u64,
    /// The arguments of one exec: the kernel's `execve` takes at most 6 MiB of argv and
    /// environment, 8 bytes of pointer counted with each string, so some 700,000.
    pub exec_args: u64,
    /// The arguments of all execs: 40 for each process of a run of 100,000, the runs ste is
    /// made for; some 250 MB once read.
    pub args: u64,
    /// Processes and threads started (fork events): ten times the runs ste is made for; some
    /// 900 MB once replayed.
    pub forks: u64,
}

impl Limits {
    /// The limits `ste report` reads with.
    pub const DEFAULT: Limits = Limits {
        header_bytes: 64 << 10,
        line_bytes: 64 << 20,
        total_bytes: 4 << 30,
        events: 20_000_000,
        t_ns: MAX_T_NS,
        width: MAX_WIDTH,
        line_values: 1 << 20,
        exec_args: 1 << 20,
        args: 4 << 20,
        forks: 1_000_000,
    };
}

/// A century in nanoseconds: the longest run time a record or a Run may state.
pub const MAX_T_NS: u64 = 100 * 365 * 24 * 3600 * 1_000_000_000;

/// The first line of a record.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Header {
    /// Always [`FORMAT`].
    pub format: String,
    /// Version of the event stream's schema ([`RECORD_VERSION`]).
    pub record_version: u32,
    /// `ste <version>` that wrote the record.
    pub generator: String,
    /// `schema_version` of the Run (`--json`) that ste wrote.
    pub run_schema_version: u32,
    /// What the following lines are.
    pub events: String,
    /// The text report's layout in the live run, so `ste report` prints the same bytes.
    pub text_style: Style,
}

impl Header {
    pub fn new(text_style: Style) -> Header {
        Header {
            format: FORMAT.into(),
            record_version: RECORD_VERSION,
            generator: format!("ste {}", env!("CARGO_PKG_VERSION")),
            run_schema_version: crate::model::SCHEMA_VERSION,
            events: "one ste event per line: {\"t_ns\": nanoseconds since launch, \"kind\": …, fields of the kind}".into(),
            text_style,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus::event::{Event, Stamped};
    use crate::model::Arg;
    use flate2::Compression;
    use flate2::read::MultiGzDecoder;
    use flate2::write::GzEncoder;
    use read::parse_event;
    use std::fs::File;
    use std::io::{Read, Write};
    use std::path::Path;

    fn style() -> Style {
        Style {
            width: 100,
            color: true,
            fit: true,
        }
    }

    /// The reports' hand-built compile, with an argv that is not UTF-8.
    fn events() -> Vec<Stamped> {
        let mut ev = crate::report::testing::events();
        let exec = ev
            .iter_mut()
            .find_map(|e| match &mut e.event {
                Event::Exec { argv: Some(a), .. } => Some(a),
                _ => None,
            })
            .expect("an exec");
        exec.push(Arg(vec![0x66, 0xff]));
        ev
    }

    /// The first events, up to (not including) the first sample.
    fn first_events() -> Vec<Stamped> {
        events()
            .into_iter()
            .take_while(|e| !matches!(e.event, Event::Sample { .. }))
            .collect()
    }

    fn write(path: &Path, events: &[Stamped]) {
        let r = Recording::create(path, style()).unwrap();
        let mut tap = r.tap();
        for e in events {
            tap(e);
        }
        drop(tap);
        r.finish().unwrap();
    }

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.ste");
        write(&path, &events());
        let loaded = load(&path).unwrap();
        assert_eq!(loaded.header, Header::new(style()));
        assert_eq!(loaded.events, events());
        assert!(loaded.warnings().is_empty());
    }

    #[test]
    fn a_record_is_readable_while_it_is_written() {
        // What a SIGKILL of ste leaves: the stream flushed but never finished.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.ste");
        let r = Recording::create(&path, style()).unwrap();
        let mut tap = r.tap();
        let first = first_events();
        for e in &first {
            tap(e);
        }
        std::thread::sleep(FLUSH_EVERY * 3);
        let loaded = load(&path).unwrap();
        assert_eq!(loaded.events, first);
        assert_eq!(loaded.unfinished_at_ns, Some(first.last().unwrap().t_ns));
        assert!(loaded.cut_off, "no gzip trailer yet");
        drop(tap);
        r.finish().unwrap();
        assert!(!load(&path).unwrap().cut_off);
    }

    #[test]
    fn the_fast_path_reads_what_the_general_one_does() {
        for e in events() {
            let mut line = serde_json::to_vec(&e).unwrap();
            let copy = line.clone();
            assert_eq!(parse_event(&mut line, 10).0.unwrap(), e);
            assert_eq!(line, copy, "the line is given back as it was");
        }
        // Other field orders and spacing take the general path.
        let e = parse_event(&mut br#"{"kind":"note","text":"x","t_ns":7}"#.to_vec(), 10)
            .0
            .unwrap();
        assert_eq!(e.t_ns, 7);
        let e = parse_event(
            &mut br#"{"t_ns": 7, "kind":"note","text":"x"}"#.to_vec(),
            10,
        )
        .0
        .unwrap();
        assert_eq!(e.t_ns, 7);
        let mut bad = br#"{"t_ns":7,"kind":"note"}"#.to_vec();
        let err = parse_event(&mut bad, 10).0.unwrap_err();
        assert!(err.to_string().contains("text"), "{err}");
        assert_eq!(bad, br#"{"t_ns":7,"kind":"note"}"#);
    }

    #[test]
    fn zcat_reads_json_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.ste");
        write(&path, &events());
        let mut text = String::new();
        MultiGzDecoder::new(File::open(&path).unwrap())
            .read_to_string(&mut text)
            .unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), events().len() + 1);
        assert!(
            lines.contains(
                &r#"{"t_ns":400000000,"kind":"exit","tid":102,"tgid":102,"status":{"exited":0}}"#
            ),
            "{lines:?}"
        );
    }

    /// Gzip members holding the header and then `body` (text lines).
    fn gz(body: &str) -> Vec<u8> {
        let mut out = Vec::new();
        for text in [
            format!(
                "{}\n",
                serde_json::to_string(&Header::new(style())).unwrap()
            ),
            body.to_string(),
        ] {
            let mut e = GzEncoder::new(Vec::new(), Compression::default());
            e.write_all(text.as_bytes()).unwrap();
            out.extend(e.finish().unwrap());
        }
        out
    }

    #[test]
    fn a_cut_off_record_reads_up_to_the_cut() {
        let first = first_events();
        let body: String = first
            .iter()
            .map(|e| serde_json::to_string(e).unwrap() + "\n")
            .collect();
        let bytes = gz(&body);
        // The whole member, then the member cut in its middle (ste killed while writing).
        let whole = read(Path::new("r.ste"), &bytes[..]).unwrap();
        assert_eq!(whole.events, first);
        assert_eq!(whole.unfinished_at_ns, Some(first.last().unwrap().t_ns));
        assert!(!whole.cut_off);
        let cut = read(Path::new("r.ste"), &bytes[..bytes.len() - 12]).unwrap();
        assert!(cut.cut_off);
        assert!(cut.events.len() < first.len());
        let w = cut.warnings();
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("killed or crashed"), "{w:?}");
        let (_, replayed) = cut.events_with_notes();
        assert!(matches!(replayed.last().unwrap().event, Event::Note { .. }));
    }

    #[test]
    fn unknown_kinds_are_skipped_and_counted() {
        let e = events();
        let mut body = String::new();
        body += &(serde_json::to_string(&e[0]).unwrap() + "\n");
        body += "{\"t_ns\":3,\"kind\":\"syscall_counts\",\"counts\":[1,2]}\n";
        body += "{\"t_ns\":4,\"kind\":\"syscall_counts\",\"counts\":[]}\n";
        body += &(serde_json::to_string(e.last().unwrap()).unwrap() + "\n");
        let loaded = read(Path::new("r.ste"), &gz(&body)[..]).unwrap();
        assert_eq!(loaded.events.len(), 2);
        assert_eq!(loaded.unknown_kinds.get("syscall_counts"), Some(&2));
        let w = loaded.warnings();
        assert!(w[0].contains("2 syscall_counts"), "{w:?}");
    }

    #[test]
    fn a_known_kind_with_bad_fields_is_corrupt() {
        let body = "{\"t_ns\":3,\"kind\":\"fork\",\"parent_tgid\":\"x\"}\n";
        let err = read(Path::new("r.ste"), &gz(body)[..]).unwrap_err();
        assert!(matches!(err, LoadError::Corrupt { line: 2, .. }), "{err}");
    }

    #[test]
    fn versions_outside_the_range_are_refused_by_name() {
        let header =
            r#"{"format":"ste-record","record_version":7,"generator":"ste 9.0.0","whatever":1}"#;
        let mut e = GzEncoder::new(Vec::new(), Compression::default());
        writeln!(e, "{header}").unwrap();
        let err = read(Path::new("new.ste"), &e.finish().unwrap()[..]).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("version 7, written by ste 9.0.0"), "{msg}");
        assert!(msg.contains("render it with a newer ste"), "{msg}");
    }

    const SMALL: Limits = Limits {
        header_bytes: 1000,
        line_bytes: 300,
        total_bytes: 4000,
        events: 5,
        t_ns: 1_000,
        width: 100,
        line_values: 40,
        exec_args: 10,
        args: 15,
        forks: 3,
    };

    /// The refusal of `body` after the header under [`SMALL`].
    fn refused(body: &str) -> String {
        let err = read_with(Path::new("r.ste"), &gz(body)[..], &SMALL).unwrap_err();
        assert!(matches!(err, LoadError::Limit { .. }), "{err}");
        err.to_string()
    }

    #[test]
    fn each_limit_is_refused_by_name() {
        let note = |t: u64| format!("{{\"t_ns\":{t},\"kind\":\"note\",\"text\":\"x\"}}\n");
        let five = note(1).repeat(5);
        assert!(read_with(Path::new("r.ste"), &gz(&five)[..], &SMALL).is_ok());
        let msg = refused(&note(1).repeat(6));
        assert!(msg.contains("more than 5 events"), "{msg}");
        let long = format!("{}\n", "x".repeat(301));
        let msg = refused(&long);
        assert!(msg.contains("line 2 is longer than 300 bytes"), "{msg}");
        assert!(msg.contains("300 bytes for an event"), "{msg}");
        // A line that never ends is refused as soon as it passes the limit.
        assert!(refused(&"x".repeat(301)).contains("line 2"));
        let msg = refused(&note(1_001));
        assert!(msg.contains("line 2: its time 1001 ns"), "{msg}");
        // The header's width: `style()` is 100 columns, the limit.
        let narrow = Limits { width: 99, ..SMALL };
        let err = read_with(Path::new("r.ste"), &gz(&five)[..], &narrow).unwrap_err();
        assert!(err.to_string().contains("width of 100 columns"), "{err}");
    }

    #[test]
    fn what_a_few_bytes_multiply_is_refused_by_name() {
        // Issue 44, item 4: arguments and forks are counted as they are parsed.
        let exec = |t: u64, n: usize| {
            format!(
                "{{\"t_ns\":{t},\"kind\":\"exec\",\"tgid\":1,\"former_tid\":1,\"argv\":[{}]}}\n",
                vec!["\"a\""; n].join(",")
            )
        };
        assert!(read_with(Path::new("r.ste"), &gz(&exec(1, 10))[..], &SMALL).is_ok());
        let msg = refused(&exec(1, 11));
        assert!(
            msg.contains("line 2 holds an exec of more than 10 arguments"),
            "{msg}"
        );
        let msg = refused(&exec(1, 45));
        assert!(
            msg.contains("line 2 holds more than 40 JSON values"),
            "{msg}"
        );
        let msg = refused(&(exec(1, 8) + &exec(2, 8)));
        assert!(msg.contains("more than 15 arguments in all"), "{msg}");
        let fork = |c: u32| {
            format!(
                "{{\"t_ns\":1,\"kind\":\"fork\",\"parent_tgid\":1,\"child_tid\":{c},\"child_tgid\":{c}}}\n"
            )
        };
        let three: String = (2..5).map(fork).collect();
        assert!(read_with(Path::new("r.ste"), &gz(&three)[..], &SMALL).is_ok());
        let msg = refused(&(three + &fork(5)));
        assert!(msg.contains("more than 3 processes and threads"), "{msg}");
    }

    #[test]
    fn the_inflated_size_is_refused_by_name() {
        let lines = format!("{}\n", "x".repeat(250)).repeat(4);
        let limits = Limits {
            total_bytes: 900,
            ..SMALL
        };
        let err = read_with(Path::new("r.ste"), &gz(&lines)[..], &limits).unwrap_err();
        assert!(
            err.to_string().contains("inflates to more than 900 bytes"),
            "{err}"
        );
    }

    #[test]
    fn other_files_are_not_records() {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("run.json");
        std::fs::write(&json, "{}").unwrap();
        assert!(matches!(load(&json), Err(LoadError::NotARecord { .. })));
        let mut e = GzEncoder::new(Vec::new(), Compression::default());
        writeln!(e, "{{\"hello\":1}}").unwrap();
        let err = read(Path::new("x.gz"), &e.finish().unwrap()[..]).unwrap_err();
        assert!(err.to_string().contains("not a ste record"), "{err}");
    }
}
