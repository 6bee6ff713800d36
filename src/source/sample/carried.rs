//! What the sampler keeps of each process to carry its PSS between exact reads, and of the tree
//! to keep their sum proven: each process's `statm` (and, while it may share anonymous pages,
//! its `stat`) held open, what is known of its file pages, its last counters; the tree's
//! anonymous families, the shares gone that others may have taken, and when each process was
//! last read.
//!
//! Owns that state, its updates as processes come and go, and the sum at a tick
//! ([`Reader::carry_tree`]). The arithmetic is `carry.rs`'s (file pages) and `family.rs`'s
//! (anonymous pages); when to read is `thread.rs`'s. Opens `statm` and `stat` through the
//! sampler's `ProcFs`, and reads nothing else.

use super::Cached;
use super::carry::{self, Counters, FileKnown, Rises, Term};
use super::family::Families;
use crate::kernel::proc::{ProcFs, StatFile, StatmFile};
use foldhash::HashMap;
use std::collections::BTreeMap;

/// A process holding this much anonymous memory has its minor faults read at every tick (a
/// `pread` of its `stat`, held open): at a fork, its copies since are then counted, where an
/// unknown count would take all of them as possible copies.
const FAULTS_READ_ANON_BYTES: u64 = 16 << 20;

/// What the sampling side keeps of each process.
pub(super) struct Carried {
    pub(super) image: u32,
    pub(super) statm: Option<StatmFile>,
    /// Its `stat`, for its minor faults, while it may share anonymous pages (copy-on-write
    /// shows nowhere else).
    pub(super) stat: Option<StatFile>,
    /// What is known of its file pages (`None` before its first tick or read).
    pub(super) file: Option<FileKnown>,
    /// When its image was first seen, and when it was last read exactly.
    pub(super) start_ns: u64,
    pub(super) read_ns: Option<u64>,
    /// File pages it mapped since the last exact read of the whole tree at one moment (what
    /// may have lowered the others' shares).
    pub(super) mapped: u64,
    /// Its counters at the last tick or read, and its minor faults then.
    pub(super) last: Option<Counters>,
    pub(super) faults: Option<u64>,
    /// Its PSS at the last tick: the estimate, and its file term.
    pub(super) central: f64,
    pub(super) file_term: Term,
    /// Its memory is its parent's (a child of `vfork` or `clone(CLONE_VM)` that has not
    /// exec'd): read through its parent, never on its own, or it would count twice.
    borrowed: Option<bool>,
    /// It forked a child of the tree: its minor faults are read at every tick from then on,
    /// so that at its next fork its copies are counted from a fresh count.
    forker: bool,
    /// The program its new image runs (see [`Reader::programs`]); `None` for a forked child
    /// or where `exe` cannot be read.
    program: Option<(u64, u64)>,
}

impl Carried {
    fn new(image: u32, now_ns: u64) -> Carried {
        Carried {
            image,
            statm: None,
            stat: None,
            file: None,
            start_ns: now_ns,
            read_ns: None,
            mapped: 0,
            last: None,
            faults: None,
            central: 0.0,
            file_term: Term::default(),
            borrowed: None,
            forker: false,
            program: None,
        }
    }

    /// Its counters now; `None` when they cannot be read (gone, no memory, refused).
    pub(super) fn counters(&self) -> Option<Counters> {
        match self.statm.as_ref().map(StatmFile::read) {
            Some(Ok(Some((resident, shared)))) => Some(Counters { resident, shared }),
            _ => None,
        }
    }

    /// Its minor faults now, when its `stat` is open.
    pub(super) fn read_faults(&self) -> Option<u64> {
        self.stat.as_ref().and_then(|s| s.minflt().ok().flatten())
    }
}

/// An exact read of one process, as the carry takes it.
#[derive(Debug, Clone, Copy)]
pub(super) struct ExactRead {
    pub(super) pid: i32,
    pub(super) t_ns: u64,
    pub(super) pss_bytes: u64,
    pub(super) pss_anon_bytes: u64,
    pub(super) counters: Counters,
    pub(super) faults: Option<u64>,
}

/// The tree's PSS at a tick: the sum, and each process's part of the estimate.
pub(super) struct TreeSum {
    pub(super) term: Term,
    pub(super) rss_bytes: u64,
    /// Each process: its part of the estimate, and its resident bytes.
    pub(super) per_process: Vec<(i32, u64, u64)>,
    /// How much of the interval's width is the anonymous families' (what only a round at one
    /// moment can narrow; the file part narrows with each process read).
    pub(super) anon_width: f64,
}

/// What rounds and ticks read with (one at a time: behind [`super::Sampler::reader`]).
pub(super) struct Reader {
    pub(super) procfs: ProcFs,
    pub(super) carried: HashMap<i32, Carried>,
    pub(super) page: u64,
    pub(super) families: Families,
    pub(super) rises: Rises,
    /// When each live process was last read exactly (time → how many).
    read_times: BTreeMap<u64, u32>,
    /// The tree's mean file share per page at the last exact reads (bytes), for pages no read
    /// has priced.
    pub(super) prior: f64,
    /// Each program's file share per page at its latest exact read (bytes), kept after its
    /// processes end: a new image of a program run before is priced as that program's last
    /// read shared (the 500th `sleep` shares libc as the 499th did), where the tree's mean would
    /// price it as the long-lived processes share theirs. It moves the estimate only, never the
    /// interval (a new image's pages stay `[0, 1]` each).
    programs: HashMap<(u64, u64), f64>,
    /// The most the tree's PSS can have fallen since the sampler started (bytes, cumulative):
    /// processes that left or exec'd (their resident pages), and pages processes lost. Nothing
    /// else lowers it (pages gained, copies made, forks only raise it; a process outside the
    /// tree mapping a page the tree maps is the carry's one blind spot, as everywhere), so an
    /// exact read at one moment bounds every earlier sample from above by its figure plus what
    /// fell since (`round.rs`).
    pub(super) fallen: f64,
}

impl Reader {
    pub(super) fn new(page: u64) -> Reader {
        Reader {
            procfs: ProcFs::default(),
            carried: HashMap::default(),
            page,
            families: Families::default(),
            rises: Rises::default(),
            read_times: BTreeMap::new(),
            prior: page as f64 / 2.0,
            programs: HashMap::default(),
            fallen: 0.0,
        }
    }

    fn forget_read(&mut self, t: Option<u64>) {
        if let Some(t) = t
            && let std::collections::btree_map::Entry::Occupied(mut e) = self.read_times.entry(t)
        {
            *e.get_mut() -= 1;
            if *e.get() == 0 {
                e.remove();
            }
        }
    }

    /// `pid`'s image `c` is gone (ended, or exec'd) at `now_ns`: its anonymous pages leave its
    /// family, and the share of its file pages it held may pass to processes read meanwhile.
    fn depart(&mut self, pid: i32, c: &Carried, now_ns: u64) {
        self.fallen += c.last.map_or(0, |l| l.resident * self.page) as f64;
        self.families.leave(pid);
        if let (Some(k), Some(last)) = (c.file, c.last) {
            let share = carry::share_bound(k, last.shared, self.page, self.prior);
            self.rises.gone(c.start_ns, now_ns, share);
        }
        self.forget_read(c.read_ns);
    }

    /// Brings the carried set in line with the live set: processes gone (or whose image
    /// changed) depart; returns whether any did.
    pub(super) fn sync(&mut self, live: &BTreeMap<i32, Cached>, now_ns: u64) -> bool {
        let gone: Vec<i32> = self
            .carried
            .iter()
            .filter(|(p, c)| live.get(p).is_none_or(|l| l.image != c.image))
            .map(|(p, _)| *p)
            .collect();
        for pid in &gone {
            let c = self.carried.remove(pid).expect("listed");
            self.depart(*pid, &c, now_ns);
        }
        !gone.is_empty()
    }

    /// The carry of `pid` at its image `image`, started afresh for a new image, its `statm`
    /// opened on first use.
    pub(super) fn entry(&mut self, pid: i32, image: u32, now_ns: u64) -> &mut Carried {
        if self.carried.get(&pid).is_some_and(|c| c.image != image) {
            let c = self.carried.remove(&pid).expect("present");
            self.depart(pid, &c, now_ns);
        }
        let c = self
            .carried
            .entry(pid)
            .or_insert_with(|| Carried::new(image, now_ns));
        if c.statm.is_none() {
            c.statm = self.procfs.open_statm(pid).ok();
        }
        c
    }

    /// Whether `pid` (its entry made) shares its parent's memory map: asked of the kernel once,
    /// when it is first seen, for a child that has not exec'd.
    pub(super) fn borrows_parent(&mut self, pid: i32, cached: &Cached) -> bool {
        let Some(c) = self.carried.get_mut(&pid) else {
            return false;
        };
        *c.borrowed.get_or_insert_with(|| match cached.parent {
            Some(parent) if !cached.exec_seen => {
                crate::kernel::calls::same_memory(parent, pid) == Some(true)
            }
            _ => false,
        })
    }

    /// A process seen for the first time (at a tick or a read) with counters `now`: its
    /// family (its own, for a new image; its parent's, for a forked child) and what is known
    /// of its file pages.
    fn first_seen(&mut self, pid: i32, cached: &Cached, now: Counters) {
        let parent_known = cached
            .parent
            .is_some_and(|p| self.families.contains(p) && self.carried.contains_key(&p));
        let forked = !cached.exec_seen && parent_known;
        if forked {
            // Its faults since the fork (its count started at 0 then) show what it copied.
            let c = self.carried.get_mut(&pid).expect("entry made");
            if c.stat.is_none() {
                c.stat = self.procfs.open_stat(pid).ok();
            }
            let faults = c.read_faults();
            c.faults = faults;
            c.file = Some(FileKnown::Forked {
                inherited: now.shared,
            });
            let parent = cached.parent.expect("known");
            self.families.forked(pid, parent, now.anon(), faults);
            if let Some(p) = self.carried.get_mut(&parent) {
                p.forker = true;
            }
        } else {
            let program = self.procfs.exe_identity(pid).ok();
            let c = self.carried.get_mut(&pid).expect("entry made");
            c.file = Some(FileKnown::NewImage);
            c.program = program;
            self.families.founded(pid, now.anon(), None);
        }
        let c = self.carried.get_mut(&pid).expect("entry made");
        c.mapped = now.shared;
        c.last = Some(now);
    }

    /// One process at a tick (seen before): its counters `now` carried (its family's
    /// anonymous pages and what it mapped), its minor faults read while it may share
    /// anonymous pages. Returns whether its counters moved.
    fn tick_one(&mut self, pid: i32, now: Counters) -> bool {
        let may_share = self.families.may_share(pid);
        let page = self.page;
        let procfs = &mut self.procfs;
        let c = self.carried.get_mut(&pid).expect("entry made");
        // Whose copies after a fork the tracker has not told of yet must be counted from a
        // fresh count: a process that forked before, or whose anonymous memory is large enough
        // that not knowing would widen the interval by much.
        let wanted = may_share || c.forker || now.anon() * page >= FAULTS_READ_ANON_BYTES;
        if wanted && c.stat.is_none() {
            c.stat = procfs.open_stat(pid).ok();
        } else if !wanted {
            c.stat = None;
        }
        let faults = c.read_faults();
        let prev = c.last.unwrap_or(now);
        let file_gained = now.shared.saturating_sub(prev.shared);
        c.mapped = (c.mapped + file_gained).min(now.shared);
        let moved = prev != now || (faults.is_some() && faults != c.faults);
        let lost = prev.anon().saturating_sub(now.anon()) + prev.shared.saturating_sub(now.shared);
        self.fallen += (lost * self.page) as f64;
        c.last = Some(now);
        c.faults = faults;
        self.families.tick(pid, now.anon(), faults, file_gained);
        moved
    }

    /// `pid` seen with counters `now` at a tick or a read: its first sight (its family and
    /// what is known of its file pages), or a tick of it. Returns whether its counters moved.
    pub(super) fn seen(&mut self, pid: i32, cached: &Cached, now: Counters) -> bool {
        if self.carried.get(&pid).is_some_and(|c| c.file.is_none()) {
            self.first_seen(pid, cached, now);
            true
        } else {
            self.tick_one(pid, now)
        }
    }

    /// An exact read of one process (already [`Reader::seen`] with the read's counters): what
    /// is known of its file pages becomes that read; its anonymous pages are anchored by
    /// [`Reader::anchor_families`] when the whole tree was read at one moment.
    /// `shares_unknown`: its anonymous pages are shared with a process the tree does not know
    /// yet (a fork the tracker has not told of): its file share then is not the one the rest
    /// of the carry assumes, and is not taken.
    pub(super) fn read_one(&mut self, r: &ExactRead, shares_unknown: bool) {
        if shares_unknown {
            return;
        }
        let old = {
            let c = self.carried.get_mut(&r.pid).expect("entry made");
            let pss_bytes = r.pss_bytes.saturating_sub(r.pss_anon_bytes);
            c.file = Some(FileKnown::Read {
                pss_bytes,
                pages: r.counters.shared,
            });
            if let Some(program) = c.program
                && r.counters.shared > 0
            {
                let mean = pss_bytes as f64 / r.counters.shared as f64;
                self.programs.insert(program, mean.min(self.page as f64));
            }
            c.faults = r.faults.or(c.faults);
            c.read_ns.replace(r.t_ns)
        };
        self.forget_read(old);
        *self.read_times.entry(r.t_ns).or_insert(0) += 1;
    }

    /// Every live process was read exactly at one moment: each family's distinct anonymous
    /// pages are known, no share is stale, and nothing mapped since is unseen.
    pub(super) fn anchor_families(&mut self, reads: &[ExactRead]) {
        let page = self.page as f64;
        let anon: Vec<(i32, f64, u64, Option<u64>)> = reads
            .iter()
            .map(|r| {
                (
                    r.pid,
                    r.pss_anon_bytes as f64 / page,
                    r.counters.anon(),
                    r.faults,
                )
            })
            .collect();
        self.families.anchor(&anon);
        self.rises.clear();
        for c in self.carried.values_mut() {
            c.mapped = 0;
        }
    }

    /// The tree's PSS now, from what the last tick or read left of each process in `pids`.
    pub(super) fn carry_tree(&mut self, pids: &[i32]) -> TreeSum {
        let page = self.page;
        let mut file = Term::default();
        let mut read_lo = 0.0;
        let mut mapped = 0u64;
        let mut rss_bytes = 0;
        let (mut read_pss, mut read_pages) = (0.0, 0u64);
        let mut per_process = Vec::with_capacity(pids.len());
        let mut gains: HashMap<u64, (u64, u64, i32)> = HashMap::default();
        for &pid in pids {
            let Some(c) = self.carried.get_mut(&pid) else {
                continue;
            };
            let (Some(k), Some(now)) = (c.file, c.last) else {
                continue;
            };
            let prior = c
                .program
                .and_then(|p| self.programs.get(&p).copied())
                .unwrap_or(self.prior);
            let t = carry::file_term(k, now.shared, page, prior);
            if let FileKnown::Read { pss_bytes, pages } = k {
                read_lo += t.lo;
                read_pss += pss_bytes as f64;
                read_pages += pages;
            }
            if !matches!(k, FileKnown::Forked { .. }) || c.read_ns.is_some() {
                mapped += c.mapped;
            } else {
                // A forked child's inherited pages are in its own term (a sixth at most).
                mapped += now.shared.saturating_sub(match k {
                    FileKnown::Forked { inherited } => inherited,
                    _ => 0,
                });
            }
            c.file_term = t;
            file += t;
            rss_bytes += now.resident * page;
            c.central = self.families.own(pid) * page as f64 + t.central;
            // Per family, what its unread forked children gained, and what its others map.
            if let Some(f) = self.families.family_of(pid) {
                let g = gains.entry(f).or_insert((0, 0, pid));
                match k {
                    FileKnown::Forked { inherited } => {
                        let gained = now.shared.saturating_sub(inherited);
                        if gained > g.0 {
                            (g.0, g.2) = (gained, pid);
                        }
                    }
                    _ => g.1 = g.1.max(now.shared),
                }
            }
            per_process.push((pid, c.central.round() as u64, now.resident * page));
        }
        for (_, (most, known, pid)) in gains {
            let new = carry::family_gains(most, known, page);
            if new > 0.0 {
                file.central += new;
                if let Some(p) = per_process.iter_mut().find(|p| p.0 == pid) {
                    p.1 += new.round() as u64;
                }
            }
        }
        if read_pages > 0 {
            self.prior = read_pss / read_pages as f64;
        }
        let anon = self.families.total();
        let p = page as f64;
        let drop = carry::drop_bound(mapped, page, read_lo);
        let rise = self.rises.total(&self.read_times);
        let term = Term {
            central: anon.central * p + file.central,
            lo: (anon.lo * p + file.lo - drop).max(0.0),
            hi: anon.hi * p + file.hi + rise,
        };
        TreeSum {
            term,
            rss_bytes,
            per_process,
            anon_width: (anon.hi - anon.lo) * p,
        }
    }
}
