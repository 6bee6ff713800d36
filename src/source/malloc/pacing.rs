//! When an image may be asked for its next malloc snapshot: the budget rules, on measured
//! costs, that keep snapshots from running away on a heap that fragments.
//!
//! Owns only the arithmetic (pure, unit-tested in `mod.rs`'s tests); reads and writes nothing.

/// How often the shim is asked for a malloc_info() (far dearer in the program's time than
/// mallinfo2: docs/kernel-notes.md).
pub(super) const FULL_EVERY_NS: u64 = 1_000_000_000;

/// The share of a program's time its snapshots may take. A snapshot runs in the program's own
/// thread, and mallinfo2() walks every free chunk of every arena: a few µs on a small heap, but
/// tens of milliseconds on a fragmented one (perl emptying a hash of a million strings:
/// bench/README.md). See [`Pacing`].
pub(super) const SNAPSHOT_BUDGET: f64 = 0.01;
/// What mallinfo2 is assumed to spend per free chunk until a snapshot of a heap with at least
/// [`CHUNKS_TO_MEASURE`] free chunks measures it: a heap that fits the cache (up to
/// [`CACHED_HEAP_BYTES`] held) is walked at tens of ns a chunk; a larger one misses it at every
/// chunk (perl's fragmented heap: bench/README.md). The shim assumes the same
/// (shim/ste_malloc.c).
pub(super) const PER_CHUNK_CACHED_NS: f64 = 20.0;
pub(super) const PER_CHUNK_NS: f64 = 400.0;
pub(super) const CACHED_HEAP_BYTES: u64 = 32 << 20;
pub(super) const CHUNKS_TO_MEASURE: u64 = 10_000;
/// What an image's snapshots may take whatever its age, so a young program gets its first
/// ones (a few µs each on a small heap); the shim allows its exit snapshot the same.
pub(super) const SNAPSHOT_ALLOWANCE_NS: f64 = 1e6;

/// When an image may be asked for its next snapshot.
///
/// Two rules, both on measured costs. After a snapshot, the next waits until that one's cost
/// is within [`SNAPSHOT_BUDGET`] of the time since. And a request is made only when what the
/// image's snapshots cost so far plus what the next one is predicted to cost stays within
/// the budget of the image's age (plus [`SNAPSHOT_ALLOWANCE_NS`]). The prediction: mallinfo2's
/// walk costs about the same per free chunk on a given heap, and each free or realloc since
/// the last request can have added at most one, so the next costs at most the last one plus
/// the walk of that many chunks more. It errs on the dear side for a program that frees and
/// allocates alike (its free lists stay short): such a program gets fewer snapshots, never a
/// dearer one. The first rule alone let costs run away on a heap that
/// fragments as it goes: perl emptying a hash spent many times the budget on snapshots, each
/// far dearer than the one before it (bench/README.md).
#[derive(Default)]
pub(super) struct Pacing {
    /// The last request whose answer was accounted.
    pub(super) answered: u64,
    /// The last request made. No other is made until it is answered: a request made while
    /// the program is in a long snapshot would make it take another one right after.
    pub(super) requested: u64,
    /// Run time before which no new request is made.
    pub(super) not_before_ns: u64,
    /// The last answer's cost, and the dearest cost per free chunk measured (0: none yet).
    pub(super) last_cost_ns: u64,
    pub(super) per_chunk_ns: f64,
    /// Frees and reallocs counted when the last request was made.
    pub(super) frees_at_request: u64,
}

/// What [`Pacing`] reads of an image at a sampling round.
pub(super) struct PaceInput {
    pub(super) t_ns: u64,
    /// The newest snapshot: (request answered, when taken, cost, free chunks walked).
    pub(super) answer: Option<(u64, u64, u64, u64)>,
    /// Frees and reallocs so far, and the chunk bytes held.
    pub(super) frees: u64,
    pub(super) held_bytes: u64,
    /// What its snapshots cost so far, and when the image started (run time).
    pub(super) spent_ns: u64,
    pub(super) start_ns: u64,
}

impl Pacing {
    /// Accounts the answer, if new, and says whether a request may be made now.
    pub(super) fn may_request(&mut self, now: &PaceInput) -> bool {
        if let Some((answered, taken_ns, cost_ns, chunks)) = now.answer
            && answered != self.answered
        {
            self.answered = answered;
            self.not_before_ns = taken_ns + (cost_ns as f64 / SNAPSHOT_BUDGET) as u64;
            self.last_cost_ns = cost_ns;
            if chunks >= CHUNKS_TO_MEASURE {
                self.per_chunk_ns = self.per_chunk_ns.max(cost_ns as f64 / chunks as f64);
            }
        }
        let per_chunk = if self.per_chunk_ns > 0.0 {
            self.per_chunk_ns
        } else if now.held_bytes <= CACHED_HEAP_BYTES {
            PER_CHUNK_CACHED_NS
        } else {
            PER_CHUNK_NS
        };
        let added = now.frees.saturating_sub(self.frees_at_request);
        let predicted = self.last_cost_ns as f64 + per_chunk * added as f64;
        let allowed =
            SNAPSHOT_BUDGET * now.t_ns.saturating_sub(now.start_ns) as f64 + SNAPSHOT_ALLOWANCE_NS;
        self.answered >= self.requested
            && now.t_ns >= self.not_before_ns
            && now.spent_ns as f64 + predicted <= allowed
    }

    /// Records a request made with `frees` frees and reallocs counted.
    pub(super) fn made(&mut self, request: u64, frees: u64) {
        self.requested = request;
        self.frees_at_request = frees;
    }
}
