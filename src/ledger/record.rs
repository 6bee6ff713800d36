//! The record file (`ste record -o run.ste`): a run's event stream, written while the run goes,
//! which `ste report` replays through the recorder into the same Run.
//!
//! Owns the file format, the writer (a tap on the recorder plus a flusher thread) and the
//! reader with its version policy. It never interprets events: the recorder does.
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
//! inflated stream, the number of events, their times and the recorded width. Each refusal
//! names the limit it hit; nothing is allocated in proportion to a number the file states.

use crate::bus::event::{Event, Stamped};
use crate::report::style::{MAX_WIDTH, Style};
use flate2::Compression;
use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
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

/// A record being written. Events reach it through [`Recording::tap`]; [`Recording::finish`]
/// closes it.
pub struct Recording {
    shared: Arc<Shared>,
    flusher: Option<std::thread::JoinHandle<()>>,
    path: PathBuf,
}

struct Shared {
    state: Mutex<WriteState>,
    wake: Condvar,
}

struct WriteState {
    /// The compressed stream, behind a buffer (flate2 clears a 32 KiB buffer at every write it
    /// gets, so small writes straight into it cost 100× more); `None` once finished.
    out: Option<BufWriter<GzEncoder<File>>>,
    /// Events written since the last flush.
    pending: bool,
    stop: bool,
    /// The first write error; nothing is written after it.
    error: Option<io::Error>,
}

impl WriteState {
    fn write_line(&mut self, value: &impl Serialize) {
        let (None, Some(enc)) = (&self.error, &mut self.out) else {
            return;
        };
        let res = serde_json::to_writer(&mut *enc, value)
            .map_err(io::Error::other)
            .and_then(|()| enc.write_all(b"\n"));
        match res {
            Ok(()) => self.pending = true,
            Err(e) => self.error = Some(e),
        }
    }

    /// Makes everything written so far decodable: a deflate sync flush ends the current block
    /// on a byte boundary and hands it to the file, keeping the compression dictionary.
    fn flush(&mut self) {
        self.pending = false;
        if let (None, Some(enc)) = (&self.error, &mut self.out)
            && let Err(e) = enc.flush()
        {
            self.error = Some(e);
        }
    }

    /// Ends the stream with its gzip trailer.
    fn finish(&mut self) {
        if let Some(buffered) = self.out.take() {
            let res = buffered
                .into_inner()
                .map_err(|e| e.into_error())
                .and_then(|enc| enc.finish())
                .and_then(|mut f| f.flush());
            if let Err(e) = res {
                self.error.get_or_insert(e);
            }
        }
    }
}

impl Recording {
    /// Creates the record file (as an output: see `output.rs`) and writes its header.
    pub fn create(path: &Path, text_style: Style) -> io::Result<Recording> {
        let file = crate::output::create(path)?;
        let mut state = WriteState {
            out: Some(BufWriter::with_capacity(
                1 << 16,
                GzEncoder::new(file, Compression::new(LEVEL)),
            )),
            pending: false,
            stop: false,
            error: None,
        };
        state.write_line(&Header::new(text_style));
        state.flush();
        if let Some(e) = state.error.take() {
            return Err(e);
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            wake: Condvar::new(),
        });
        let me = Arc::clone(&shared);
        let flusher = std::thread::Builder::new()
            .name("ste-record".into())
            .spawn(move || {
                // Writes to a file opened before it started; a failure to drop has no report
                // to go to, and reducing one's own capabilities does not fail (capset(2)).
                let _ = crate::launch::privilege::limit(crate::launch::privilege::Role::Helper);
                me.flush_loop()
            })?;
        Ok(Recording {
            shared,
            flusher: Some(flusher),
            path: path.to_path_buf(),
        })
    }

    /// The function the recorder calls with every event it applies.
    pub fn tap(&self) -> crate::ledger::recorder::Tap {
        let shared = Arc::clone(&self.shared);
        Box::new(move |e: &Stamped| {
            shared.state.lock().expect("record lock").write_line(e);
        })
    }

    /// Closes the record; returns the first error met while writing it, if any.
    pub fn finish(mut self) -> io::Result<()> {
        self.shared.state.lock().expect("record lock").stop = true;
        self.shared.wake.notify_one();
        if let Some(t) = self.flusher.take() {
            let _ = t.join();
        }
        let mut st = self.shared.state.lock().expect("record lock");
        st.finish();
        match st.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Shared {
    fn flush_loop(&self) {
        let mut st = self.state.lock().expect("record lock");
        loop {
            if st.stop {
                return;
            }
            let (guard, _) = self
                .wake
                .wait_timeout(st, FLUSH_EVERY)
                .expect("record lock");
            st = guard;
            if st.pending {
                st.flush();
            }
        }
    }
}

/// Why a file could not be read as a record.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path} is not a ste record ({why}); records are written by `ste record -o FILE`")]
    NotARecord { path: PathBuf, why: String },
    #[error(
        "{path} is a record of version {found}, written by {generator}; this ste ({this}) reads record versions {oldest} to {newest}: {advice}"
    )]
    Version {
        path: PathBuf,
        found: u32,
        generator: String,
        this: String,
        oldest: u32,
        newest: u32,
        advice: &'static str,
    },
    #[error(
        "{path} is refused: {what} (the reader's limit is {limit}); it was not written by ste or is damaged"
    )]
    Limit {
        path: PathBuf,
        what: String,
        limit: String,
    },
    #[error("{path}, line {line}: {why}")]
    Corrupt {
        path: PathBuf,
        line: u64,
        why: String,
    },
}

/// A record read back.
#[derive(Debug)]
pub struct Loaded {
    pub header: Header,
    pub events: Vec<Stamped>,
    /// The run's `end` event is missing: the ste that wrote the record was killed or crashed.
    /// Holds the time of the last event read.
    pub unfinished_at_ns: Option<u64>,
    /// The gzip stream has no trailer or ends inside a line (ste died while writing it).
    pub cut_off: bool,
    /// Events of kinds this ste does not know (written by a newer ste), skipped: kind → count.
    pub unknown_kinds: std::collections::BTreeMap<String, u64>,
}

impl Loaded {
    /// What the reader must be told about this record, one sentence each.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if let Some(t) = self.unfinished_at_ns {
            w.push(format!(
                "the record stops at {} without the end of the run: the ste that wrote it was killed or crashed, so the report covers the run up to there (events of the last {} before may be missing)",
                crate::units::duration_human(t),
                crate::units::duration_human(FLUSH_EVERY.as_nanos() as u64),
            ));
        }
        if !self.unknown_kinds.is_empty() {
            let kinds: Vec<String> = self
                .unknown_kinds
                .iter()
                .map(|(k, n)| format!("{n} {k}"))
                .collect();
            w.push(format!(
                "skipped events of kinds this ste ({}) does not know ({}): the record was written by {}; a newer ste shows them",
                env!("CARGO_PKG_VERSION"),
                kinds.join(", "),
                self.header.generator
            ));
        }
        w
    }

    /// The events to replay: the record's, followed by a note for each warning, so the report
    /// itself says what the record lacks.
    pub fn events_with_notes(mut self) -> (Header, Vec<Stamped>) {
        let t = self.events.last().map_or(0, |e| e.t_ns);
        for text in self.warnings() {
            self.events.push(Stamped {
                t_ns: t,
                event: Event::Note { text },
            });
        }
        (self.header, self.events)
    }
}

/// gzip's first two bytes (RFC 1952).
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Whether the file starts like a record (gzip), without judging its contents.
pub fn looks_like_a_record(start: &[u8]) -> bool {
    start.starts_with(&GZIP_MAGIC)
}

/// Reads a whole record.
pub fn load(path: &Path) -> Result<Loaded, LoadError> {
    let io_err = |source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = File::open(path).map_err(io_err)?;
    let mut magic = [0u8; 2];
    let n = file.read(&mut magic).map_err(io_err)?;
    if !looks_like_a_record(&magic[..n]) {
        return Err(LoadError::NotARecord {
            path: path.to_path_buf(),
            why: "it is not gzip-compressed".into(),
        });
    }
    drop(file);
    let file = File::open(path).map_err(io_err)?;
    read(path, BufReader::with_capacity(1 << 16, file))
}

/// Reads a record from a byte stream (`path` only names it in messages), within
/// [`Limits::DEFAULT`].
pub fn read(path: &Path, compressed: impl BufRead) -> Result<Loaded, LoadError> {
    read_with(path, compressed, &Limits::DEFAULT)
}

/// The inflated stream, read up to the first limit it passes.
struct Inflated {
    data: Vec<u8>,
    /// The stream ended in an error (no gzip trailer, a damaged end); `data` holds what was
    /// inflated before it.
    cut_off: bool,
}

/// Inflates the stream while checking, at every read, the limits on the whole, on each line
/// and on the number of lines, so that a file is refused as soon as it passes one.
fn inflate(path: &Path, compressed: impl BufRead, limits: &Limits) -> Result<Inflated, LoadError> {
    let over = |what: String, limit: String| LoadError::Limit {
        path: path.to_path_buf(),
        what,
        limit,
    };
    let mut decoder = MultiGzDecoder::new(compressed);
    let mut data = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    // Where the line being read starts, and how many lines ended before it.
    let mut line_start = 0usize;
    let mut lines = 0u64;
    let line_limit = |lines: u64| {
        if lines == 0 {
            limits.header_bytes
        } else {
            limits.line_bytes
        }
    };
    let too_long = |lines: u64| {
        over(
            format!(
                "line {} is longer than {} bytes",
                lines + 1,
                line_limit(lines)
            ),
            format!(
                "{} bytes for {}",
                line_limit(lines),
                if lines == 0 { "the header" } else { "an event" }
            ),
        )
    };
    let cut_off = loop {
        let n = match decoder.read(&mut buf) {
            Ok(0) => break false,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break true,
        };
        let chunk = &buf[..n];
        if (data.len() + n) as u64 > limits.total_bytes {
            return Err(over(
                format!("it inflates to more than {} bytes", limits.total_bytes),
                format!("{} bytes of JSON lines", limits.total_bytes),
            ));
        }
        let mut from = 0;
        while let Some(p) = chunk[from..].iter().position(|&b| b == b'\n') {
            let end = data.len() + from + p;
            if end - line_start > line_limit(lines) {
                return Err(too_long(lines));
            }
            line_start = end + 1;
            lines += 1;
            from += p + 1;
        }
        // The header is not an event.
        if lines.saturating_sub(1) > limits.events {
            return Err(over(
                format!("it holds more than {} events", limits.events),
                format!("{} events", limits.events),
            ));
        }
        data.extend_from_slice(chunk);
        if data.len() - line_start > line_limit(lines) {
            return Err(too_long(lines));
        }
    };
    Ok(Inflated { data, cut_off })
}

/// Reads a record from a byte stream within `limits`.
///
/// The stream is inflated whole, then its lines are parsed on every CPU: parsing is most of
/// the cost (a record of 100,000 processes holds 400,000 lines, 55 MB of JSON).
pub fn read_with(
    path: &Path,
    compressed: impl BufRead,
    limits: &Limits,
) -> Result<Loaded, LoadError> {
    let Inflated {
        mut data,
        mut cut_off,
    } = inflate(path, compressed, limits)?;
    let not_a_record = |why: String| LoadError::NotARecord {
        path: path.to_path_buf(),
        why,
    };
    let Some(first_end) = data.iter().position(|&b| b == b'\n') else {
        return Err(not_a_record(if data.is_empty() {
            "it is empty".into()
        } else {
            "its first line never ends".into()
        }));
    };
    let header = header(path, &data[..first_end])?;
    if header.text_style.width > limits.width {
        return Err(LoadError::Limit {
            path: path.to_path_buf(),
            what: format!(
                "its header states a text width of {} columns",
                header.text_style.width
            ),
            limit: format!("{} columns", limits.width),
        });
    }
    let mut end = data.len();
    match data[first_end + 1..].iter().rposition(|&b| b == b'\n') {
        Some(last) => {
            let last = first_end + 1 + last;
            // The stream ended inside a line: ste died while writing it.
            cut_off |= last + 1 < data.len();
            end = last + 1;
        }
        None if data.len() > first_end + 1 => {
            cut_off = true;
            end = first_end + 1;
        }
        None => {}
    }
    let body = &mut data[first_end + 1..end];

    // Split into about one chunk per CPU, at line ends.
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    let target = (body.len() / workers).max(1 << 20);
    let mut chunks: Vec<(u64, &mut [u8])> = Vec::with_capacity(workers);
    let mut rest = body;
    let mut line_no = 2u64;
    while !rest.is_empty() {
        let want = target.min(rest.len());
        let cut = rest[want - 1..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(rest.len(), |p| want + p);
        let (chunk, tail) = rest.split_at_mut(cut);
        let lines = chunk.iter().filter(|&&b| b == b'\n').count() as u64;
        chunks.push((line_no, chunk));
        line_no += lines;
        rest = tail;
    }
    let parsed: Vec<Result<Parsed, LoadError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|(first, chunk)| scope.spawn(move || parse_lines(path, first, chunk, limits)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });

    let mut loaded = Loaded {
        header,
        events: Vec::new(),
        unfinished_at_ns: None,
        cut_off,
        unknown_kinds: Default::default(),
    };
    for part in parsed {
        let part = part?;
        loaded.events.extend(part.events);
        for (k, n) in part.unknown_kinds {
            *loaded.unknown_kinds.entry(k).or_default() += n;
        }
    }
    if !loaded
        .events
        .iter()
        .rev()
        .any(|e| matches!(e.event, Event::End { .. }))
    {
        loaded.unfinished_at_ns = Some(loaded.events.last().map_or(0, |e| e.t_ns));
    }
    Ok(loaded)
}

/// The header line, checked: read leniently first, so that a newer version is named rather
/// than misparsed.
fn header(path: &Path, line: &[u8]) -> Result<Header, LoadError> {
    let not_a_record = |why: String| LoadError::NotARecord {
        path: path.to_path_buf(),
        why,
    };
    let head: serde_json::Value = serde_json::from_slice(line)
        .map_err(|e| not_a_record(format!("its first line is not JSON: {e}")))?;
    if head.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
        return Err(not_a_record(format!(
            "its first line has no \"format\": \"{FORMAT}\""
        )));
    }
    let found = head
        .get("record_version")
        .and_then(|v| v.as_u64())
        .ok_or_else(|| not_a_record("its header has no record_version".into()))?;
    if !(u64::from(OLDEST_READABLE)..=u64::from(RECORD_VERSION)).contains(&found) {
        return Err(LoadError::Version {
            path: path.to_path_buf(),
            found: found.min(u64::from(u32::MAX)) as u32,
            generator: head
                .get("generator")
                .and_then(|g| g.as_str())
                .unwrap_or("an unknown ste")
                .to_string(),
            this: format!("ste {}", env!("CARGO_PKG_VERSION")),
            oldest: OLDEST_READABLE,
            newest: RECORD_VERSION,
            advice: if found > u64::from(RECORD_VERSION) {
                "render it with a newer ste"
            } else {
                "render it with the ste that wrote it"
            },
        });
    }
    serde_json::from_value(head).map_err(|e| LoadError::Corrupt {
        path: path.to_path_buf(),
        line: 1,
        why: format!("bad header: {e}"),
    })
}

struct Parsed {
    events: Vec<Stamped>,
    unknown_kinds: std::collections::BTreeMap<String, u64>,
}

/// Parses whole event lines; `first` is the number of the first in the file.
fn parse_lines(
    path: &Path,
    first: u64,
    chunk: &mut [u8],
    limits: &Limits,
) -> Result<Parsed, LoadError> {
    let mut out = Parsed {
        events: Vec::with_capacity(chunk.len() / 120),
        unknown_kinds: Default::default(),
    };
    for (k, line) in chunk.split_mut(|&b| b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        match parse_event(line) {
            Ok(e) if e.t_ns > limits.t_ns => {
                return Err(LoadError::Limit {
                    path: path.to_path_buf(),
                    what: format!(
                        "line {}: its time {} ns is after a century of run",
                        first + k as u64,
                        e.t_ns
                    ),
                    limit: format!("{} ns", limits.t_ns),
                });
            }
            Ok(e) => out.events.push(e),
            Err(err) => match unknown_kind(line) {
                Some(kind) => *out.unknown_kinds.entry(kind).or_default() += 1,
                None => {
                    return Err(LoadError::Corrupt {
                        path: path.to_path_buf(),
                        line: first + k as u64,
                        why: err.to_string(),
                    });
                }
            },
        }
    }
    Ok(out)
}

/// One event line. ste writes `t_ns` first: reading it by hand and the rest as the `Event`
/// spares serde's `flatten` from buffering every event twice (a third of the load time).
/// The field is blanked out in place for that (`{            "kind":…}` is the event alone,
/// in valid JSON), and put back after; any other line is parsed the general way.
fn parse_event(line: &mut [u8]) -> serde_json::Result<Stamped> {
    const START: &[u8] = b"{\"t_ns\":";
    let digits = line
        .get(START.len()..)
        .filter(|_| line.starts_with(START))
        .map_or(0, |rest| {
            rest.iter().take_while(|b| b.is_ascii_digit()).count()
        });
    let comma = START.len() + digits;
    if (1..=20).contains(&digits)
        && line.get(comma) == Some(&b',')
        && let Some(t_ns) = std::str::from_utf8(&line[START.len()..comma])
            .ok()
            .and_then(|d| d.parse().ok())
    {
        let mut saved = [0u8; 32];
        let field = 1..=comma;
        saved[..comma].copy_from_slice(&line[field.clone()]);
        line[field.clone()].fill(b' ');
        let event = serde_json::from_slice::<Event>(line);
        line[field].copy_from_slice(&saved[..comma]);
        if let Ok(event) = event {
            return Ok(Stamped { t_ns, event });
        }
    }
    serde_json::from_slice::<Stamped>(line)
}

/// The `kind` of an event line when this ste does not know that kind (a newer ste wrote it).
fn unknown_kind(line: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Kind {
        kind: String,
    }
    let Kind { kind } = serde_json::from_slice(line).ok()?;
    // serde names an unknown variant as such; a known kind with bad fields fails otherwise.
    let probe = serde_json::json!({ "kind": kind });
    match serde_json::from_value::<Event>(probe) {
        Err(e) if e.to_string().starts_with("unknown variant") => Some(kind),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Arg;

    fn style() -> Style {
        Style {
            width: 100,
            color: true,
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
            assert_eq!(parse_event(&mut line).unwrap(), e);
            assert_eq!(line, copy, "the line is given back as it was");
        }
        // Other field orders and spacing take the general path.
        let e = parse_event(&mut br#"{"kind":"note","text":"x","t_ns":7}"#.to_vec()).unwrap();
        assert_eq!(e.t_ns, 7);
        let e = parse_event(&mut br#"{"t_ns": 7, "kind":"note","text":"x"}"#.to_vec()).unwrap();
        assert_eq!(e.t_ns, 7);
        let mut bad = br#"{"t_ns":7,"kind":"note"}"#.to_vec();
        let err = parse_event(&mut bad).unwrap_err();
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
