//! What the sampler keeps of each process to carry its PSS between exact reads: its image,
//! its `statm` held open, its anchor, its last counters and estimate, and the largest read of
//! it (the base of its exit peak).
//!
//! Owns that state and its updates at a tick; the arithmetic of the carry is `carry.rs`'s, and
//! when to read is `mod.rs`'s. Opens `statm` through the sampler's `ProcFs`, and reads nothing
//! else.

use super::Cached;
use super::carry::{self, Anchor, Counters, Estimate};
use crate::kernel::proc::{ProcFs, StatmFile};
use foldhash::HashMap;

/// What the sampling side keeps of each process to carry its PSS between exact reads.
pub(super) struct Carried {
    pub(super) image: u32,
    pub(super) statm: Option<StatmFile>,
    pub(super) anchor: Option<Anchor>,
    pub(super) estimate: Estimate,
    /// Largest resident size ste read since its image started, and its PSS then.
    pub(super) seen_resident_bytes: u64,
    pub(super) at_seen: Estimate,
    /// Its counters at the last tick, to see whether anything moved.
    pub(super) last: Option<Counters>,
}

impl Carried {
    fn new(image: u32) -> Carried {
        Carried {
            image,
            statm: None,
            anchor: None,
            estimate: Estimate::default(),
            seen_resident_bytes: 0,
            at_seen: Estimate::default(),
            last: None,
        }
    }

    /// The carry of `pid` at its image `image`: started afresh for a new image, its `statm`
    /// opened on first use.
    pub(super) fn of<'a>(
        carried: &'a mut HashMap<i32, Carried>,
        procfs: &mut ProcFs,
        pid: i32,
        image: u32,
    ) -> &'a mut Carried {
        let c = Carried::entry(carried, pid, image);
        if c.statm.is_none() {
            c.statm = procfs.open_statm(pid).ok();
        }
        c
    }

    /// The carry of `pid` at its image `image`, started afresh for a new image, for counters
    /// read elsewhere: its `statm` is not opened.
    pub(super) fn entry(carried: &mut HashMap<i32, Carried>, pid: i32, image: u32) -> &mut Carried {
        let c = carried.entry(pid).or_insert_with(|| Carried::new(image));
        if c.image != image {
            *c = Carried::new(image);
        }
        c
    }

    /// The counters of `cached`'s parent now, when `pid` is a forked child about to be
    /// anchored from its counters (see [`Anchor::of_fork`]); `None` otherwise, or when the
    /// parent is not being read.
    pub(super) fn parent_of_fork(
        carried: &HashMap<i32, Carried>,
        pid: i32,
        cached: &Cached,
    ) -> Option<Counters> {
        let anchored = carried
            .get(&pid)
            .is_some_and(|c| c.image == cached.image && c.anchor.is_some());
        if cached.exec_seen || anchored {
            return None;
        }
        carried.get(&cached.parent?)?.counters()
    }

    /// Its counters now; `None` when they cannot be read (gone, no memory, refused).
    pub(super) fn counters(&self) -> Option<Counters> {
        match self.statm.as_ref().map(StatmFile::read) {
            Some(Ok(Some((resident, shared)))) => Some(Counters { resident, shared }),
            _ => None,
        }
    }

    /// A tick of this process with counters `now`: its PSS carried from its anchor (started
    /// from nothing for a new image, from these counters for a forked child that has none),
    /// and whether the counters moved since the last tick.
    pub(super) fn tick(
        &mut self,
        now: Counters,
        exec_seen: bool,
        parent: Option<Counters>,
        page: u64,
    ) -> (Estimate, bool) {
        let anchor = *self.anchor.get_or_insert_with(|| {
            if exec_seen {
                // A new image's memory is all its own: carried from nothing.
                Anchor::default()
            } else {
                Anchor::of_fork(now, parent, page)
            }
        });
        let e = carry::carry(&anchor, now, page);
        self.saw(now.resident * page, e);
        let moved = self.last != Some(now);
        self.last = Some(now);
        (e, moved)
    }

    /// Its resident bytes at the last tick (0 before any).
    pub(super) fn last_resident_bytes(&self, page: u64) -> u64 {
        self.last.map_or(0, |c| c.resident * page)
    }

    /// A read of `resident_bytes` with PSS `e`: kept when it is the largest seen, as the
    /// base of [`Sampler::exit_peak`].
    pub(super) fn saw(&mut self, resident_bytes: u64, e: Estimate) {
        self.estimate = e;
        if resident_bytes >= self.seen_resident_bytes {
            self.seen_resident_bytes = resident_bytes;
            self.at_seen = e;
        }
    }
}
