//! The carry of file-backed and shared memory: a process's share of its file pages (files,
//! tmpfs, memfd, shared anonymous memory: statm's `shared`) between two exact reads, and the
//! tree-level terms that keep the sum of those shares proven when processes come, go and map
//! pages that others map too.
//!
//! Owns the arithmetic only (pure functions on numbers, no /proc, no clock); the anonymous part
//! is `family.rs`'s, and the sampler (`tick.rs`, `round.rs`) reads the counters and puts the
//! two together.
//!
//! A page mapped by `m` processes adds `1/m` of a page to each one's PSS. The counters say how
//! many file pages a process maps, never how many others map them, so between exact reads:
//! - a process read exactly holds its share then; pages it gained since are priced at the
//!   mean share of that read (a process that maps more of a library shares it as it shared the
//!   rest), each anywhere in `[0, 1]` page; pages it lost at that mean, within what the read
//!   allows;
//! - a new image never read holds each of its pages anywhere in `[0, 1]` (priced as its
//!   program's last exact read shared its pages, or at the tree's mean share per page);
//! - a forked child never read maps its parent's pages: taken by the child, a page mapped by
//!   `m ≥ 1` processes, `k ≥ 1` of them in the tree, adds `(m − k) / (m (m + 1)) ≤ 1/6` of a
//!   page to the tree's sum (the child's share, minus what the others' shares lose), so the
//!   child's inherited pages count `[0, 1/6]` each; pages it gained since, `[0, 1]`.
//!
//! And the shares of the others move with them, which no counter of theirs shows:
//! - a process that maps a page another maps lowers the others' shares, by at most half a page
//!   a page (the others keep `k/(m+1)` of what was `k/m`), and never below nothing: the lower
//!   bound takes every page mapped since the last exact read of the whole tree at one moment
//!   so ([`drop_bound`]);
//! - a process that leaves (or unmaps) raises the others' shares by at most its own share: the
//!   upper bound keeps it for as long as a process read while it was there is not read again
//!   ([`Rises`]).

use std::collections::BTreeMap;

/// A process's counters, in pages, as `/proc/PID/statm` gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counters {
    /// Resident pages (anonymous + file + shmem).
    pub resident: u64,
    /// Resident file-backed and shmem pages (statm's `shared`).
    pub shared: u64,
}

impl Counters {
    /// Resident anonymous pages.
    pub fn anon(&self) -> u64 {
        self.resident.saturating_sub(self.shared)
    }
}

/// A figure and the interval it is proven to lie in, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Term {
    pub central: f64,
    pub lo: f64,
    pub hi: f64,
}

impl Term {
    pub fn exact(v: f64) -> Term {
        Term {
            central: v,
            lo: v,
            hi: v,
        }
    }
}

impl std::ops::AddAssign for Term {
    fn add_assign(&mut self, o: Term) {
        self.central += o.central;
        self.lo += o.lo;
        self.hi += o.hi;
    }
}

/// What is known of a process's file-backed and shared pages.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FileKnown {
    /// Read exactly: its share then (`Pss_File` + `Pss_Shmem`), over `pages` resident pages.
    Read { pss_bytes: u64, pages: u64 },
    /// A new image never read.
    NewImage,
    /// A forked child never read, which mapped `inherited` of its parent's pages when first
    /// seen.
    Forked { inherited: u64 },
}

/// A process's file-backed and shared memory now, with `pages` of it resident: its share
/// (central) and the interval of what it adds to the tree's sum. `prior`: the tree's mean
/// share per page (bytes), for pages no read has priced.
pub fn file_term(known: FileKnown, pages: u64, page: u64, prior: f64) -> Term {
    let p = page as f64;
    match known {
        FileKnown::Read {
            pss_bytes,
            pages: read_pages,
        } => {
            let pss = pss_bytes as f64;
            let mean = if read_pages > 0 {
                (pss / read_pages as f64).min(p)
            } else {
                prior
            };
            let gained = pages.saturating_sub(read_pages) as f64;
            let lost = read_pages.saturating_sub(pages);
            // `lost` of the read's pages are gone: between all of the least shared and all of
            // the most shared of them (a page is at most a whole page).
            let k = lost as f64;
            let n = read_pages as f64;
            let lose_lo = (pss - (n - k) * p).max(0.0);
            let lose_hi = (k * p).min(pss);
            Term {
                central: (pss + gained * mean - k * mean).max(0.0),
                lo: pss - lose_hi,
                hi: pss - lose_lo + gained * p,
            }
        }
        FileKnown::NewImage => Term {
            central: pages as f64 * prior,
            lo: 0.0,
            hi: pages as f64 * p,
        },
        // Its estimate is its family's to make (see [`family_gains`]).
        FileKnown::Forked { inherited } => {
            let kept = pages.min(inherited) as f64;
            let gained = pages.saturating_sub(inherited) as f64;
            Term {
                central: 0.0,
                lo: 0.0,
                hi: kept * p / 6.0 + gained * p,
            }
        }
    }
}

/// The estimate of the file pages the unread forked children of one family gained since
/// their forks, given the most any of them gained (`most_gained`) and the most any other member
/// of the family maps (`known`): children of one family mostly map what their family maps (a
/// shared memory segment, a file the parent opened: each page shared, adding nothing), so the
/// estimate takes them as the same pages, overlapping the family's, and counts whole only what
/// goes beyond (a child that maps a file of its own). The interval stays each page's `[0, 1]`.
pub fn family_gains(most_gained: u64, known: u64, page: u64) -> f64 {
    most_gained.saturating_sub(known) as f64 * page as f64
}

/// The most a process's own share of its file pages can be (what its leaving can hand to the
/// others): for a forked child, its inherited pages are shared with its parent (at most half a
/// page each).
pub fn share_bound(known: FileKnown, pages: u64, page: u64, prior: f64) -> f64 {
    match known {
        FileKnown::Forked { inherited } => {
            let p = page as f64;
            pages.min(inherited) as f64 * p / 2.0 + pages.saturating_sub(inherited) as f64 * p
        }
        _ => file_term(known, pages, page, prior).hi,
    }
}

/// How much the shares of the processes read exactly can have fallen since the last exact
/// read of the whole tree at one moment: half a page for every page mapped since
/// (`mapped_pages`, summed over the tree), never more than what those processes' shares hold
/// (`read_lo`, the lower ends of their terms).
pub fn drop_bound(mapped_pages: u64, page: u64, read_lo: f64) -> f64 {
    (mapped_pages as f64 * page as f64 / 2.0).min(read_lo.max(0.0))
}

/// The shares that processes now gone (or pages now unmapped) may have handed to processes
/// read while they were there: each is kept in the upper bound until every process read in
/// its lifetime has been read again, or is gone.
#[derive(Debug, Default)]
pub struct Rises {
    /// (when the process or the pages appeared, when they went, the share they may hand on).
    entries: Vec<(u64, u64, f64)>,
}

impl Rises {
    /// A share of `bytes` that existed from `start_ns` to `end_ns` is gone.
    pub fn gone(&mut self, start_ns: u64, end_ns: u64, bytes: f64) {
        if bytes > 0.0 {
            self.entries.push((start_ns, end_ns, bytes));
        }
    }

    /// What the upper bound must add, given when each live process was last read exactly
    /// (`reads`: read time → how many live processes were read then). Entries no live read
    /// falls within are forgotten: reads only move later.
    pub fn total(&mut self, reads: &BTreeMap<u64, u32>) -> f64 {
        self.entries
            .retain(|&(start, end, _)| start < end && reads.range(start + 1..end).next().is_some());
        self.entries.iter().map(|e| e.2).sum()
    }

    /// Every live process has just been read exactly at one moment: nothing is stale.
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

/// The PSS a process may have reached after its last tick, given the high-water mark of its
/// resident size the kernel kept (`hiwater_rss`, read at its exit): what it grew beyond the
/// resident size of its last tick (`last_resident_bytes`) counts as private memory. `None`
/// when the mark is no higher.
pub fn beyond_last_tick(last_resident_bytes: u64, hwm_bytes: u64) -> Option<u64> {
    hwm_bytes
        .checked_sub(last_resident_bytes)
        .filter(|&u| u > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = 4096;
    const PF: f64 = P as f64;

    #[test]
    fn unchanged_pages_carry_the_read_exactly() {
        let t = file_term(
            FileKnown::Read {
                pss_bytes: 40 * P,
                pages: 90,
            },
            90,
            P,
            PF / 2.0,
        );
        assert_eq!(t, Term::exact(40.0 * PF));
    }

    #[test]
    fn pages_gained_are_priced_at_the_reads_mean_each_within_a_page() {
        // 100 file pages with 10 pages of PSS: a widely shared library.
        let t = file_term(
            FileKnown::Read {
                pss_bytes: 10 * P,
                pages: 100,
            },
            150,
            P,
            0.0,
        );
        assert_eq!(t.central, 15.0 * PF);
        assert_eq!(t.lo, 10.0 * PF);
        assert_eq!(t.hi, 60.0 * PF);
    }

    #[test]
    fn pages_lost_are_bounded_by_the_set_they_came_from() {
        // 100 file pages holding 10 pages of PSS; 95 unmapped: between 5 and 10 pages went.
        let t = file_term(
            FileKnown::Read {
                pss_bytes: 10 * P,
                pages: 100,
            },
            5,
            P,
            0.0,
        );
        assert_eq!(t.central, 10.0 * PF - 95.0 * 0.1 * PF);
        assert_eq!(t.lo, 0.0);
        assert_eq!(t.hi, 5.0 * PF);
    }

    #[test]
    fn a_new_image_holds_each_page_whole_at_most() {
        let t = file_term(FileKnown::NewImage, 100, P, 0.25 * PF);
        assert_eq!(t.central, 25.0 * PF);
        assert_eq!((t.lo, t.hi), (0.0, 100.0 * PF));
        assert_eq!(share_bound(FileKnown::NewImage, 100, P, 0.0), 100.0 * PF);
    }

    #[test]
    fn a_forked_childs_inherited_pages_add_at_most_a_sixth() {
        let k = FileKnown::Forked { inherited: 600 };
        let t = file_term(k, 600, P, 0.0);
        assert_eq!(
            t,
            Term {
                central: 0.0,
                lo: 0.0,
                hi: 100.0 * PF
            }
        );
        // It maps 300 more: each anywhere in a page (its family makes the estimate).
        let t = file_term(k, 900, P, 0.0);
        assert_eq!(t.hi, 400.0 * PF);
        // Its own share of what it inherited is at most half of each page.
        assert_eq!(share_bound(k, 600, P, 0.0), 300.0 * PF);
    }

    /// The 1/6: over every number of mappers, the tree's sum gains at most a sixth of a page
    /// when a process of the tree that maps it forks.
    #[test]
    fn the_sixth_is_the_most_a_fork_adds() {
        let mut most: f64 = 0.0;
        for m in 1..200u32 {
            for k in 1..=m {
                let (m, k) = (m as f64, k as f64);
                let before = k / m;
                let after = (k + 1.0) / (m + 1.0);
                most = most.max(after - before);
            }
        }
        assert!((most - 1.0 / 6.0).abs() < 1e-12, "{most}");
    }

    #[test]
    fn a_familys_children_map_what_it_maps() {
        // A memfd of 1,000 pages the parent maps, mapped by its children: nothing new.
        assert_eq!(family_gains(1000, 1100, P), 0.0);
        // A file of their own, beyond the 100 pages the family maps: counted whole, once.
        assert_eq!(family_gains(1000, 100, P), 900.0 * PF);
    }

    #[test]
    fn the_drop_is_half_a_page_a_page_and_no_more_than_the_reads_hold() {
        assert_eq!(drop_bound(10, P, 1e9), 5.0 * PF);
        assert_eq!(drop_bound(10_000, P, 3.0 * PF), 3.0 * PF);
    }

    #[test]
    fn a_rise_lasts_while_a_process_read_in_its_life_is_not_read_again() {
        let mut r = Rises::default();
        let mut reads = BTreeMap::new();
        reads.insert(50, 1);
        // Gone between 10 and 100: the process read at 50 saw it.
        r.gone(10, 100, 7.0);
        // Gone between 60 and 70: nobody was read meanwhile.
        r.gone(60, 70, 3.0);
        assert_eq!(r.total(&reads), 7.0);
        // The process read at 50 is read again at 120.
        reads.clear();
        reads.insert(120, 1);
        assert_eq!(r.total(&reads), 0.0);
        assert!(r.entries.is_empty(), "forgotten");
    }

    #[test]
    fn growth_after_the_last_tick_counts_as_private() {
        assert_eq!(beyond_last_tick(120 * P, 200 * P), Some(80 * P));
        assert_eq!(beyond_last_tick(120 * P, 110 * P), None);
        assert_eq!(beyond_last_tick(120 * P, 120 * P), None);
    }
}
