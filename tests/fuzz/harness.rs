//! A fuzzing harness that runs on the stable toolchain, inside `cargo test`: each target starts
//! from its committed corpus (`tests/fuzz/corpus/TARGET/`), runs every entry as it is, then
//! mutated inputs until its time budget is spent, and fails on a panic, a hang or an input that
//! makes the target hold too much memory.
//!
//! Hand-written because `cargo fuzz` needs a nightly toolchain (sanitizer flags), which a fresh
//! machine cannot fetch, and the property-test crates shrink values of types the model does not
//! generate; mutating real records and Runs (bytes, JSON values, lines) reaches the renderers
//! with inputs shaped like the ones ste reads. Random numbers come from `fastrand`, from a
//! fixed seed unless `STE_FUZZ_SEED=random` (see [`seed`]): a failure names its seed, and
//! `STE_FUZZ_SEED=N` replays the same inputs.
//!
//! Owns the budget, the watchdog, the memory accounting and the mutators; the targets are in
//! `main.rs`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Time each fuzz test runs for in `cargo test`: the six make about 50 s of CPU in all, under
/// half a minute on two cores. `STE_FUZZ_SECS` sets another budget for long runs by
/// hand (e.g. `STE_FUZZ_SECS=600 cargo test --release --test fuzz`).
pub const BUDGET: Duration = Duration::from_secs(8);
/// The longest one input may run before it counts as a hang (debug builds, a large Run
/// rendered in every format).
pub const PER_INPUT: Duration = Duration::from_secs(10);
/// The most one input may make the target's thread hold at once (its live allocations at
/// their peak, less what it held before).
pub const MEMORY_PER_INPUT: usize = 512 << 20;
/// The largest single allocation the test binary grants: above it, the process says which
/// input asked and aborts (an allocator cannot unwind).
pub const MAX_ALLOC: usize = 1 << 30;

thread_local! {
    /// Bytes allocated less bytes freed by this thread, and the highest value since the last
    /// reset. Threads a target starts itself are not counted.
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
    /// What this thread is running, for the message of a refused allocation.
    static RUNNING: Cell<(&'static str, u64, u64)> = const { Cell::new(("", 0, 0)) };
}

fn note(delta: isize) {
    let _ = LIVE.try_with(|live| {
        let now = live.get() + delta;
        live.set(now);
        let _ = PEAK.try_with(|p| p.set(p.get().max(now)));
    });
}

/// Says which input asked for `size` bytes, without allocating.
fn refuse(size: usize) {
    use std::fmt::Write as _;
    struct Buf([u8; 256], usize);
    impl std::fmt::Write for Buf {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            let n = s.len().min(self.0.len() - self.1);
            self.0[self.1..self.1 + n].copy_from_slice(&s.as_bytes()[..n]);
            self.1 += n;
            Ok(())
        }
    }
    let (target, seed, input) = RUNNING.try_with(Cell::get).unwrap_or(("", 0, 0));
    let mut b = Buf([0; 256], 0);
    let _ = writeln!(
        b,
        "fuzz: an allocation of {size} bytes (more than {MAX_ALLOC}) by target {target:?}, input {input}: rerun with STE_FUZZ_SEED={seed}"
    );
    // SAFETY: writes an initialised buffer of that length to stderr.
    unsafe { libc::write(2, b.0.as_ptr().cast(), b.1) };
}

/// `allocate`'s block of `size` bytes, counted; null without calling it above [`MAX_ALLOC`].
fn counted(size: usize, allocate: impl FnOnce() -> *mut u8) -> *mut u8 {
    if size > MAX_ALLOC {
        refuse(size);
        return std::ptr::null_mut();
    }
    let p = allocate();
    if !p.is_null() {
        note(size as isize);
    }
    p
}

/// The system allocator, counting and capping.
pub struct Counting;

// SAFETY: every call is passed to `System` with the caller's layout; the counters are
// thread-local cells that never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's layout, as `GlobalAlloc::alloc` requires.
        counted(layout.size(), || unsafe { System.alloc(layout) })
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        counted(layout.size(), || unsafe { System.alloc_zeroed(layout) })
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with this layout.
        unsafe { System.dealloc(ptr, layout) };
        note(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` was allocated by `System` with `layout`.
        let p = counted(new_size, || unsafe {
            System.realloc(ptr, layout, new_size)
        });
        if !p.is_null() {
            note(-(layout.size() as isize));
        }
        p
    }
}

/// The peak of this thread's live allocations while `f` ran, above what it held before.
pub fn peak_while<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(before));
    let out = f();
    (out, (PEAK.with(Cell::get) - before).max(0) as usize)
}

fn budget() -> Duration {
    std::env::var("STE_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(BUDGET, Duration::from_secs)
}

/// The seed of `cargo test` (and so of CI) is fixed, so a run explores the same inputs each
/// time and a green suite stays green; `STE_FUZZ_SEED=random` explores afresh (with
/// `STE_FUZZ_SECS`, by hand), and `STE_FUZZ_SEED=N` replays a failure.
const DEFAULT_SEED: u64 = 0x5e_f022;

fn seed() -> u64 {
    match std::env::var("STE_FUZZ_SEED").ok().as_deref() {
        Some("random") => fastrand::u64(..),
        Some(s) => s.parse().unwrap_or(DEFAULT_SEED),
        None => DEFAULT_SEED,
    }
}

pub fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz/corpus")
        .join(target)
}

/// The entries of a target's corpus, by name.
pub fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = corpus_dir(target);
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "{} is empty", dir.display());
    out
}

/// Makes one new input from a corpus entry (and the others, for splicing).
pub type Mutator = fn(&mut fastrand::Rng, &[u8], &[Vec<u8>]) -> Vec<u8>;

/// Runs `target` on the corpus of `name`, then on mutated inputs until the budget is spent.
/// Fails on a panic, on an input that runs longer than [`PER_INPUT`] or holds more than
/// [`MEMORY_PER_INPUT`]; the failing input is written to the temporary directory.
pub fn fuzz(name: &'static str, mutate: Mutator, target: fn(&[u8])) {
    let seed = seed();
    let entries: Vec<Vec<u8>> = corpus(name).into_iter().map(|(_, b)| b).collect();
    let budget = budget();
    let (done_tx, done_rx) = mpsc::channel::<Result<(), String>>();
    let current = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let shared = std::sync::Arc::clone(&current);
    let worker = std::thread::Builder::new()
        .name(format!("fuzz-{name}"))
        .spawn(move || {
            let mut rng = fastrand::Rng::with_seed(seed);
            let start = Instant::now();
            let mut n = 0u64;
            loop {
                let input = match entries.get(n as usize) {
                    Some(e) => e.clone(),
                    None if start.elapsed() >= budget => break,
                    None => {
                        let base = &entries[rng.usize(..entries.len())];
                        mutate(&mut rng, base, &entries)
                    }
                };
                shared.lock().unwrap().clone_from(&input);
                RUNNING.with(|r| r.set((name, seed, n)));
                let (res, peak) = peak_while(|| {
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| target(&input)))
                });
                let verdict = match res {
                    Err(p) => Err(format!(
                        "panicked: {}",
                        p.downcast_ref::<String>()
                            .map(String::as_str)
                            .or_else(|| p.downcast_ref::<&str>().copied())
                            .unwrap_or("?")
                    )),
                    Ok(()) if peak > MEMORY_PER_INPUT => Err(format!(
                        "held {peak} bytes at once (the limit is {MEMORY_PER_INPUT})"
                    )),
                    Ok(()) => Ok(()),
                };
                let failed = verdict.is_err();
                if done_tx.send(verdict).is_err() || failed {
                    return n;
                }
                n += 1;
            }
            n
        })
        .unwrap();
    loop {
        match done_rx.recv_timeout(PER_INPUT) {
            Ok(Ok(())) => {}
            Ok(Err(why)) => fail(name, seed, &current.lock().unwrap(), &why),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => fail(
                name,
                seed,
                &current.lock().unwrap(),
                &format!("ran longer than {PER_INPUT:?} (a hang)"),
            ),
        }
    }
    let n = worker.join().unwrap();
    eprintln!("fuzz {name}: {n} inputs in {budget:?} (seed {seed})");
}

fn fail(name: &str, seed: u64, input: &[u8], why: &str) -> ! {
    let path = std::env::temp_dir().join(format!("ste-fuzz-{name}-{seed}.bin"));
    let _ = std::fs::write(&path, input);
    panic!(
        "fuzz target {name}: an input {why}; it is in {} (rerun with STE_FUZZ_SEED={seed}; add it to tests/fuzz/corpus/{name}/ once fixed)",
        path.display()
    );
}

/// Numbers at the edges of the types and limits ste reads.
const NUMBERS: [&str; 14] = [
    "0",
    "1",
    "-1",
    "255",
    "2147483647",
    "2147483648",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "18446744073709551615",
    "18446744073709551614",
    "3153600000000000000",
    "1e308",
    "-9223372036854775808",
];

/// Strings a traced program or a crafted record could hold.
const STRINGS: [&str; 8] = [
    "",
    "\u{1b}[31mred\u{1b}]0;title\u{7}",
    "\u{9b}2J",
    "/",
    "a\nb\tc\\d",
    "\u{0}",
    "é\u{202e}",
    "note",
];

/// A few byte-level changes: bit flips, random bytes, inserted numbers and escapes, deleted,
/// duplicated or spliced ranges, truncation.
pub fn bytes(rng: &mut fastrand::Rng, input: &[u8], corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..rng.usize(1..=4) {
        let at = rng.usize(..=out.len());
        match rng.u8(..7) {
            0 if !out.is_empty() => {
                let i = rng.usize(..out.len());
                out[i] ^= 1 << rng.u8(..8);
            }
            1 if !out.is_empty() => {
                let i = rng.usize(..out.len());
                out[i] = rng.u8(..);
            }
            2 => {
                let n = NUMBERS[rng.usize(..NUMBERS.len())];
                out.splice(at..at, n.bytes());
            }
            3 => {
                let s = STRINGS[rng.usize(..STRINGS.len())];
                out.splice(at..at, s.bytes());
            }
            4 => {
                let end = (at + rng.usize(..64)).min(out.len());
                out.drain(at..end);
            }
            5 => {
                let end = (at + rng.usize(..256)).min(out.len());
                let copy = out[at..end].to_vec();
                let to = rng.usize(..=out.len());
                out.splice(to..to, copy);
            }
            _ => {
                let other = &corpus[rng.usize(..corpus.len())];
                let from = rng.usize(..=other.len());
                let end = (from + rng.usize(..256)).min(other.len());
                out.splice(at..at, other[from..end].iter().copied());
            }
        }
    }
    if rng.u8(..20) == 0 {
        out.truncate(rng.usize(..=out.len()));
    }
    out
}

/// A few changes to a JSON value's nodes: numbers and strings from the edges above, arrays
/// emptied, shortened or grown, keys removed, values nulled. Falls back to [`bytes`] on text
/// that is not JSON.
pub fn json(rng: &mut fastrand::Rng, input: &[u8], corpus: &[Vec<u8>]) -> Vec<u8> {
    let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(input) else {
        return bytes(rng, input, corpus);
    };
    let nodes = count(&value);
    for _ in 0..rng.usize(1..=6) {
        let mut pick = rng.usize(..nodes);
        mutate_node(rng, &mut value, &mut pick);
    }
    serde_json::to_vec(&value).unwrap()
}

/// [`json`] on some lines of JSON lines, and lines dropped, repeated or swapped.
pub fn json_lines(rng: &mut fastrand::Rng, input: &[u8], corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut lines: Vec<Vec<u8>> = input
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect();
    if lines.is_empty() || rng.u8(..10) == 0 {
        return bytes(rng, input, corpus);
    }
    for _ in 0..rng.usize(1..=3) {
        let i = rng.usize(..lines.len());
        match rng.u8(..6) {
            0 if lines.len() > 1 => {
                lines.remove(i);
            }
            1 => {
                let copy = lines[i].clone();
                for _ in 0..rng.usize(1..50) {
                    lines.insert(i, copy.clone());
                }
            }
            2 => {
                let j = rng.usize(..lines.len());
                lines.swap(i, j);
            }
            _ => lines[i] = json(rng, &lines[i], corpus),
        }
    }
    let mut out = lines.join(&b'\n');
    out.push(b'\n');
    out
}

fn count(v: &serde_json::Value) -> usize {
    1 + match v {
        serde_json::Value::Array(a) => a.iter().map(count).sum(),
        serde_json::Value::Object(o) => o.values().map(count).sum(),
        _ => 0,
    }
}

/// Changes the `pick`th node in depth-first order.
fn mutate_node(rng: &mut fastrand::Rng, v: &mut serde_json::Value, pick: &mut usize) -> bool {
    use serde_json::Value;
    if *pick == 0 {
        *v = match v {
            Value::Number(_) | Value::Null | Value::Bool(_) if rng.bool() => {
                serde_json::from_str(NUMBERS[rng.usize(..NUMBERS.len())]).unwrap()
            }
            Value::String(_) => Value::String(
                STRINGS[rng.usize(..STRINGS.len())].repeat(if rng.u8(..10) == 0 {
                    1000
                } else {
                    1
                }),
            ),
            Value::Array(a) if !a.is_empty() => {
                let mut a = std::mem::take(a);
                match rng.u8(..3) {
                    0 => a.clear(),
                    1 => a.truncate(rng.usize(..a.len())),
                    _ => {
                        let e = a[rng.usize(..a.len())].clone();
                        let n = rng.usize(1..200);
                        a.extend(std::iter::repeat_n(e, n));
                    }
                }
                Value::Array(a)
            }
            Value::Object(o) if !o.is_empty() => {
                let mut o = std::mem::take(o);
                let key = o.keys().nth(rng.usize(..o.len())).unwrap().clone();
                if rng.bool() {
                    o.remove(&key);
                } else {
                    o.insert(key, Value::Null);
                }
                Value::Object(o)
            }
            _ => Value::Null,
        };
        return true;
    }
    *pick -= 1;
    match v {
        Value::Array(a) => a.iter_mut().any(|e| mutate_node(rng, e, pick)),
        Value::Object(o) => o.values_mut().any(|e| mutate_node(rng, e, pick)),
        _ => false,
    }
}
