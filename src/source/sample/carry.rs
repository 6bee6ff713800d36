//! The carry: a process's PSS between two exact reads, estimated from its cheap counters.
//!
//! Owns the arithmetic only (pure functions on numbers, no /proc, no clock). The sampler
//! (`sample/mod.rs`) reads the counters and decides when to anchor.
//!
//! An exact read (`smaps_rollup`) walks every resident page, so its cost grows with memory; the
//! counters in `/proc/PID/statm` (resident and file-or-shmem pages) are the kernel's per-mm
//! RSS counters, O(1) to read. Between two exact reads a process's PSS is carried as its last
//! exact PSS (the anchor) plus what its counters moved since, priced as follows:
//! - anonymous pages gained are whole pages of PSS: a page faulted in by the process is
//!   private to it (sharing of anonymous memory only comes from fork, which moves no counter);
//! - anonymous pages lost, and file or shmem pages gained or lost, are priced at the anchor's
//!   mean PSS per page of that kind (a process that maps more of a library shares it as it
//!   shared the rest); a kind the anchor had none of is priced at half a page.
//!
//! Every estimate carries a bound: the most the true PSS can differ from it given what the
//! counters cannot tell. Per page priced at a mean `m` (of a page of `P` bytes) the truth lies
//! anywhere in `[0, P]`, so the bound grows by `max(m, P - m)` per such page; and anonymous
//! pages the anchor shared (PSS below their size) may have been made private since by
//! copy-on-write without any counter moving, up to their whole unshared part.

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

/// An exact read and the counters read right after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Anchor {
    pub pss_bytes: u64,
    /// The anonymous part of `pss_bytes` (`Pss_Anon`).
    pub pss_anon_bytes: u64,
    pub counters: Counters,
    /// How far the anchor itself may be off: the counters moved while the exact read walked
    /// the pages, so pages gained during the walk may or may not be in `pss_bytes`.
    pub bound_bytes: u64,
}

impl Anchor {
    /// A process first seen by its counters, with no exact read yet: a forked child, with its
    /// parent's counters read at the same moment when it has a known parent. A fork moves no
    /// PSS out of the tree (the pages the child shares were the parent's, and the parent's
    /// anchor still counts them whole), so the anonymous pages the child may share count 0,
    /// with the bound that copy-on-write may have made them its own. It can share no more
    /// than the parent still holds: the rest are the child's own, whole pages (a child that
    /// filled memory before its first read).
    pub fn of_fork(child: Counters, parent: Option<Counters>, page: u64) -> Anchor {
        let shareable = parent.map_or(child.anon(), |p| p.anon().min(child.anon()));
        let own = (child.anon() - shareable) * page;
        Anchor {
            pss_bytes: own,
            pss_anon_bytes: own,
            counters: child,
            bound_bytes: 0,
        }
    }
}

/// A carried PSS and the most the truth can differ from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Estimate {
    pub pss_bytes: u64,
    pub bound_bytes: u64,
}

/// The PSS of a process whose counters are now `now`, carried from `a`.
pub fn carry(a: &Anchor, now: Counters, page: u64) -> Estimate {
    let page_f = page as f64;
    let pss_anon = a.pss_anon_bytes.min(a.pss_bytes) as f64;
    let pss_file = (a.pss_bytes as f64 - pss_anon).max(0.0);
    let mean = |pss: f64, pages: u64| {
        if pages == 0 {
            page_f / 2.0
        } else {
            (pss / pages as f64).min(page_f)
        }
    };
    let anon_mean = mean(pss_anon, a.counters.anon());
    let file_mean = mean(pss_file, a.counters.shared);
    let spread = |m: f64| m.max(page_f - m);

    // `lost` of the anchor's `pages` pages, which held `pss` bytes of PSS, are gone: priced
    // at their mean, and bounded by where so many pages of that set can lie (all private
    // pages lose exactly a page each).
    let lose = |lost: u64, pages: u64, pss: f64| {
        let (k, n) = (lost.min(pages) as f64, pages as f64);
        let m = if pages == 0 { 0.0 } else { pss / n };
        let lo = (pss - (n - k) * page_f).max(0.0);
        let hi = (k * page_f).min(pss);
        (k * m, (k * m - lo).max(hi - k * m))
    };

    let mut pss = a.pss_bytes as f64;
    let mut bound = a.bound_bytes as f64;
    let (anon0, anon1) = (a.counters.anon(), now.anon());
    if anon1 >= anon0 {
        pss += (anon1 - anon0) as f64 * page_f;
    } else {
        let (minus, b) = lose(anon0 - anon1, anon0, pss_anon);
        pss -= minus;
        bound += b;
    }
    let (file0, file1) = (a.counters.shared, now.shared);
    if file1 >= file0 {
        // New file pages: shared as the anchor's were, but each may be anywhere in [0, P].
        let gained = (file1 - file0) as f64;
        pss += gained * file_mean;
        bound += gained * spread(file_mean);
    } else {
        let (minus, b) = lose(file0 - file1, file0, pss_file);
        pss -= minus;
        bound += b;
    }
    // Shared anonymous pages of the anchor that copy-on-write may have made private since.
    let kept_anon = a.counters.anon().min(now.anon()) as f64;
    bound += kept_anon * (page_f - anon_mean).max(0.0);
    Estimate {
        pss_bytes: pss.max(0.0).round() as u64,
        bound_bytes: bound.round() as u64,
    }
}

/// The PSS a process may have reached after its last read, given the high-water mark of its
/// resident size the kernel kept (`hiwater_rss`, read at its exit): an upper bound, `None`
/// when the mark is no higher than what the reads saw. What it grew beyond the largest
/// resident size ste saw is counted as private memory (file pages are often shared), and the
/// read it grew from at its upper end: the truth lies between that read's lower end (the peak
/// was at least what was read) and this figure, so the bound is that whole span.
pub fn beyond_last_read(
    last: Estimate,
    seen_resident_bytes: u64,
    hwm_bytes: u64,
) -> Option<Estimate> {
    let unseen = hwm_bytes
        .checked_sub(seen_resident_bytes)
        .filter(|&u| u > 0)?;
    Some(Estimate {
        pss_bytes: last
            .pss_bytes
            .saturating_add(last.bound_bytes)
            .saturating_add(unseen),
        bound_bytes: last.bound_bytes.saturating_mul(2).saturating_add(unseen),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = 4096;

    fn anchor(pss: u64, pss_anon: u64, resident: u64, shared: u64) -> Anchor {
        Anchor {
            pss_bytes: pss,
            pss_anon_bytes: pss_anon,
            counters: Counters { resident, shared },
            bound_bytes: 0,
        }
    }

    #[test]
    fn unchanged_counters_carry_the_anchor_exactly() {
        let a = anchor(100 * P, 60 * P, 150, 90);
        // 60 private anon pages, 90 file pages with 40 pages of PSS among them.
        let e = carry(
            &a,
            Counters {
                resident: 150,
                shared: 90,
            },
            P,
        );
        assert_eq!(
            e,
            Estimate {
                pss_bytes: 100 * P,
                bound_bytes: 0
            }
        );
    }

    #[test]
    fn anonymous_growth_is_private_and_exact() {
        // fill: 1 GiB of new anonymous pages after an anchor of 1 MiB.
        let a = anchor(256 * P, 100 * P, 300, 200);
        let gib_pages = (1u64 << 30) / P;
        let e = carry(
            &a,
            Counters {
                resident: 300 + gib_pages,
                shared: 200,
            },
            P,
        );
        assert_eq!(e.pss_bytes, 256 * P + (1 << 30));
        assert_eq!(e.bound_bytes, 0);
    }

    #[test]
    fn anonymous_loss_is_priced_at_the_anchors_mean_with_its_bound() {
        // 100 anon pages holding 50 pages of PSS (shared with a fork), 0 file pages.
        let a = anchor(50 * P, 50 * P, 100, 0);
        let e = carry(
            &a,
            Counters {
                resident: 60,
                shared: 0,
            },
            P,
        );
        // 40 pages lost at half a page each.
        assert_eq!(e.pss_bytes, 30 * P);
        // Each lost page could have been anywhere in [0, P]: P/2 each; and the 60 that are
        // left may have been unshared by copy-on-write: at most their 30 unshared pages.
        assert_eq!(e.bound_bytes, 40 * P / 2 + 30 * P);
    }

    #[test]
    fn private_pages_lost_are_exact() {
        // fill then free: 1,000 private anonymous pages, 900 of them given back.
        let a = anchor(1000 * P, 1000 * P, 1000, 0);
        let e = carry(
            &a,
            Counters {
                resident: 100,
                shared: 0,
            },
            P,
        );
        assert_eq!(
            e,
            Estimate {
                pss_bytes: 100 * P,
                bound_bytes: 0
            }
        );
    }

    #[test]
    fn file_pages_lost_are_bounded_by_the_set_they_came_from() {
        // 100 file pages holding 10 pages of PSS; 95 unmapped: at most the 10 pages went.
        let a = anchor(10 * P, 0, 100, 100);
        let e = carry(
            &a,
            Counters {
                resident: 5,
                shared: 5,
            },
            P,
        );
        assert_eq!(
            e.pss_bytes,
            (10.0 * P as f64 - 95.0 * 0.1 * P as f64).round() as u64
        );
        // Between 5 pages (5 full pages could remain) and 10 pages gone; estimate 9.5.
        assert_eq!(e.bound_bytes, (4.5 * P as f64).round() as u64);
    }

    #[test]
    fn file_pages_are_priced_at_the_anchors_sharing() {
        // 100 file pages with 10 pages of PSS: a widely shared library.
        let a = anchor(10 * P, 0, 100, 100);
        let e = carry(
            &a,
            Counters {
                resident: 150,
                shared: 150,
            },
            P,
        );
        assert_eq!(e.pss_bytes, 15 * P);
        // 50 pages each within 0.9 of a page of the truth.
        assert_eq!(e.bound_bytes, (50.0 * 0.9 * P as f64).round() as u64);
    }

    #[test]
    fn a_kind_the_anchor_lacked_is_half_a_page_either_way() {
        let a = anchor(10 * P, 10 * P, 10, 0);
        let e = carry(
            &a,
            Counters {
                resident: 14,
                shared: 4,
            },
            P,
        );
        assert_eq!(e.pss_bytes, 10 * P + 2 * P);
        assert_eq!(e.bound_bytes, 2 * P);
    }

    #[test]
    fn a_forked_child_starts_at_zero_and_counts_what_it_gains() {
        let a = Anchor::of_fork(
            Counters {
                resident: 500,
                shared: 300,
            },
            None,
            P,
        );
        let e = carry(
            &a,
            Counters {
                resident: 1500,
                shared: 300,
            },
            P,
        );
        assert_eq!(e.pss_bytes, 1000 * P);
        // Its 200 inherited anonymous pages may be unshared by copy-on-write at any time.
        assert_eq!(e.bound_bytes, 200 * P);
    }

    #[test]
    fn a_forked_child_cannot_share_more_than_its_parent_holds() {
        // fillfill: the parent freed its memory before the fork; the child's first read finds
        // 1,000 anonymous pages, the parent holds 50: at least 950 are the child's own.
        let child = Counters {
            resident: 1300,
            shared: 300,
        };
        let parent = Counters {
            resident: 350,
            shared: 300,
        };
        let a = Anchor::of_fork(child, Some(parent), P);
        let e = carry(&a, child, P);
        assert_eq!(e.pss_bytes, 950 * P);
        // The 50 it may share may be unshared by copy-on-write.
        assert_eq!(e.bound_bytes, 50 * P);
        // A parent holding more than the child: all of the child's may be shared.
        let big = Counters {
            resident: 5300,
            shared: 300,
        };
        assert_eq!(
            carry(&Anchor::of_fork(child, Some(big), P), child, P).pss_bytes,
            0
        );
    }

    #[test]
    fn the_estimate_never_goes_negative() {
        let a = anchor(P, P, 1, 0);
        let e = carry(
            &a,
            Counters {
                resident: 0,
                shared: 0,
            },
            P,
        );
        assert_eq!(e.pss_bytes, 0);
    }

    #[test]
    fn growth_after_the_last_read_counts_as_private() {
        let last = Estimate {
            pss_bytes: 100 * P,
            bound_bytes: 3,
        };
        let e = beyond_last_read(last, 120 * P, 200 * P);
        // At the read's upper end plus the unseen growth; down to the read's lower end.
        assert_eq!(
            e,
            Some(Estimate {
                pss_bytes: 180 * P + 3,
                bound_bytes: 80 * P + 6
            })
        );
        // A high-water mark the reads already saw adds nothing.
        assert_eq!(beyond_last_read(last, 120 * P, 110 * P), None);
        assert_eq!(beyond_last_read(last, 120 * P, 120 * P), None);
    }
}
