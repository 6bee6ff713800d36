//! The tree's anonymous memory, family by family: how many distinct anonymous pages the
//! processes that may share them hold, as a best estimate and the interval the counters prove.
//!
//! Owns that arithmetic only (pure functions on page counts, no /proc, no clock); the sampler
//! feeds it each process's anonymous resident pages and minor faults at every tick.
//!
//! Why families: anonymous pages are shared only through fork (a process's pages stay mapped
//! in its child until one of them writes, copy-on-write), so they are shared only within the
//! tree, and the tree's PSS of them is exactly the number of distinct pages, however many
//! processes map each. A *family* is a process and the children it forked that have not
//! exec'd since (and theirs): the only processes whose anonymous pages may be shared with each
//! other. A process that exec'd founds a family of its own, whose pages are all its own.
//!
//! What the counters tell and what they cannot:
//! - a fork moves no page: the family's distinct pages are unchanged (the child's share is
//!   the parent's loss);
//! - anonymous pages gained are new pages, each a distinct page;
//! - a page made private by copy-on-write moves no resident counter at all, but costs the
//!   writer a minor fault (`/proc/PID/stat` field 10; a child's count starts at 0 at its
//!   fork): faults the growth does not explain may each have copied one page the process
//!   still shared, up to the pages it may share. The best estimate takes them as copies;
//!   the lower bound, none;
//! - a page lost may have been the last mapping of it (one distinct page fewer) or a shared
//!   one (none fewer): the lower bound takes every lost page as freed, the upper bound only
//!   those the process cannot have shared;
//! - whatever happened, a family holds at least the pages of its largest member and at most
//!   the pages of all its members, and a family of one holds exactly its member's pages.
//!
//! An exact read of every member at one moment (`smaps_rollup`'s `Pss_Anon`, summed) gives the
//! family's distinct pages exactly.

use foldhash::{HashMap, HashMapExt};

/// One member's counters as the family last saw them.
#[derive(Debug, Clone, Copy, Default)]
struct Member {
    /// Anonymous resident pages (statm's resident − shared).
    anon: u64,
    /// Minor faults at the last read (`None`: not read).
    faults: Option<u64>,
    /// The most of its anonymous pages that may still be shared with another member.
    shared: u64,
    /// The pages of the family's best estimate counted as its own (what the report shows of it).
    own: f64,
}

#[derive(Debug, Clone, Default)]
struct Family {
    members: HashMap<i32, Member>,
    /// Distinct anonymous pages: best estimate and proven interval.
    central: f64,
    lo: f64,
    hi: f64,
}

impl Family {
    /// What every family must hold whatever happened: at least its largest member's pages,
    /// at most all of its members'; a family of one, exactly its member's.
    fn clamp(&mut self) {
        let max = self.members.values().map(|m| m.anon).max().unwrap_or(0) as f64;
        let sum = self.members.values().map(|m| m.anon).sum::<u64>() as f64;
        if self.members.len() <= 1 {
            self.lo = sum;
            self.hi = sum;
            if let Some(m) = self.members.values_mut().next() {
                m.own = sum;
                m.shared = 0;
            }
        }
        self.lo = self.lo.clamp(max, sum);
        self.hi = self.hi.clamp(self.lo, sum);
        let c = self.central.clamp(self.lo, self.hi);
        // Keep the members' own pages adding up to the family's estimate.
        let owned: f64 = self.members.values().map(|m| m.own).sum();
        if owned > 0.0 && (owned - c).abs() > 0.5 {
            let k = c / owned;
            for m in self.members.values_mut() {
                m.own *= k;
            }
        } else if owned <= 0.0 && c > 0.0 {
            // Nobody owns them (the owner left): the largest member takes them.
            if let Some(m) = self.members.values_mut().max_by_key(|m| m.anon) {
                m.own = c;
            }
        }
        self.central = c;
    }
}

/// The tree's anonymous pages, by family.
#[derive(Debug, Default)]
pub(super) struct Families {
    families: HashMap<u64, Family>,
    /// Each process's family.
    of: HashMap<i32, u64>,
    next_key: u64,
}

/// The tree's distinct anonymous pages: best estimate and proven interval.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Pages {
    pub central: f64,
    pub lo: f64,
    pub hi: f64,
}

impl Families {
    pub(super) fn contains(&self, pid: i32) -> bool {
        self.of.contains_key(&pid)
    }

    /// Whether `pid` may share anonymous pages with another process (its minor faults then
    /// matter: copy-on-write shows nowhere else).
    pub(super) fn may_share(&self, pid: i32) -> bool {
        self.of
            .get(&pid)
            .and_then(|f| self.families.get(f))
            .is_some_and(|f| f.members.len() > 1 || f.members.values().any(|m| m.shared > 0))
    }

    /// `pid` (a new image, or the first process seen) with `anon` pages of its own: a family
    /// of one, exact.
    pub(super) fn founded(&mut self, pid: i32, anon: u64, faults: Option<u64>) {
        self.leave(pid);
        let a = anon as f64;
        let mut members = HashMap::new();
        members.insert(
            pid,
            Member {
                anon,
                faults,
                shared: 0,
                own: a,
            },
        );
        let key = self.next_key;
        self.next_key += 1;
        self.families.insert(
            key,
            Family {
                members,
                central: a,
                lo: a,
                hi: a,
            },
        );
        self.of.insert(pid, key);
    }

    /// `child`, forked by `parent` (a member of a family), first seen with `anon` pages and
    /// `faults` minor faults since its fork: it joins its parent's family. At the fork it held
    /// nothing of its own (every page was the parent's too); what it did since is counted as a
    /// tick from there: pages beyond its parent's are new, faults may be copies.
    pub(super) fn forked(&mut self, child: i32, parent: i32, anon: u64, faults: Option<u64>) {
        self.leave(child);
        let Some(&key) = self.of.get(&parent) else {
            self.founded(child, anon, faults);
            return;
        };
        let fam = self
            .families
            .get_mut(&key)
            .expect("a member's family exists");
        let p = fam
            .members
            .get_mut(&parent)
            .expect("the parent is a member");
        // Every page the parent holds may now be shared with the child.
        p.shared = p.anon;
        let inherited = p.anon;
        fam.members.insert(
            child,
            Member {
                anon: inherited.min(anon),
                faults: Some(0),
                shared: inherited.min(anon),
                own: 0.0,
            },
        );
        self.of.insert(child, key);
        self.tick(child, anon, faults, 0);
    }

    /// A tick of `pid`: `anon` pages now, `faults` minor faults so far (when read), and
    /// `file_gained` file pages gained since its last tick (faults that mapped them).
    pub(super) fn tick(&mut self, pid: i32, anon: u64, faults: Option<u64>, file_gained: u64) {
        let Some(fam) = self.of.get(&pid).and_then(|k| self.families.get_mut(k)) else {
            return;
        };
        let m = fam.members.get_mut(&pid).expect("a member of its family");
        let gained = anon.saturating_sub(m.anon);
        let lost = m.anon.saturating_sub(anon);
        // Faults the counters' growth does not explain may each have copied a shared page
        // (or replaced a lost shared page with a new one): the upper bound and the estimate
        // take them so, up to what it may share. Unread faults: any shared page may be.
        let copies = match (faults, m.faults) {
            (Some(now), Some(before)) => now
                .saturating_sub(before)
                .saturating_sub(gained + file_gained)
                .min(m.shared),
            _ => m.shared,
        };
        let copies_central = if faults.is_some() && m.faults.is_some() {
            copies
        } else {
            0
        };
        // A lost page was freed if nobody else mapped it: at most all of them (lower bound),
        // at least those it cannot have shared (upper bound); the estimate in proportion.
        let could_share = lost.min(m.shared);
        let excl_frac = if m.anon > 0 {
            1.0 - m.shared as f64 / m.anon as f64
        } else {
            1.0
        };
        fam.lo += gained as f64 - lost as f64;
        fam.hi += gained as f64 + copies as f64 - (lost - could_share) as f64;
        let delta = gained as f64 + copies_central as f64 - lost as f64 * excl_frac;
        fam.central += delta;
        m.own = (m.own + delta).max(0.0);
        m.shared = m.shared.saturating_sub(copies).min(anon);
        m.anon = anon;
        // Faults not read at this tick leave no count to take the next ones from.
        m.faults = faults;
        fam.clamp();
    }

    /// `pid`'s image is gone (it ended, or exec'd): its pages leave the family, all of them
    /// freed (the lower bound) or only those it cannot have shared (the upper bound).
    pub(super) fn leave(&mut self, pid: i32) {
        let Some(key) = self.of.remove(&pid) else {
            return;
        };
        let Some(fam) = self.families.get_mut(&key) else {
            return;
        };
        if let Some(m) = fam.members.remove(&pid) {
            fam.lo -= m.anon as f64;
            fam.hi -= (m.anon - m.shared) as f64;
            fam.central -= m.own;
        }
        if fam.members.is_empty() {
            self.families.remove(&key);
        } else {
            fam.clamp();
        }
    }

    /// An exact read of every member of every family at one moment: `reads` gives each
    /// process's `Pss_Anon` and anonymous resident pages, and its minor faults then. Every
    /// family's distinct pages are then known exactly; a member whose `Pss_Anon` is all of its
    /// pages shares none, and one that shares none leaves its family for one of its own.
    pub(super) fn anchor(&mut self, reads: &[(i32, f64, u64, Option<u64>)]) {
        for &(pid, pss_anon, anon, faults) in reads {
            let Some(fam) = self.of.get(&pid).and_then(|k| self.families.get_mut(k)) else {
                continue;
            };
            if let Some(m) = fam.members.get_mut(&pid) {
                m.anon = anon;
                m.faults = faults.or(m.faults);
                m.own = pss_anon;
                // A page shared by k processes counts 1/k of a page: it shares at least what
                // it lacks of whole pages, and at most twice that (k = 2).
                let missing = (anon as f64 - pss_anon).max(0.0);
                m.shared = ((2.0 * missing).ceil() as u64).min(anon);
            }
        }
        let split: Vec<i32> = self
            .of
            .iter()
            .filter(|(pid, key)| {
                self.families[key].members.len() > 1 && self.families[key].members[pid].shared == 0
            })
            .map(|(pid, _)| *pid)
            .collect();
        for pid in split {
            let key = self.of[&pid];
            let m = self.families.get_mut(&key).unwrap().members[&pid];
            self.leave(pid);
            self.founded(pid, m.anon, m.faults);
            // `leave` took its pages out of the old family as if they might be freed: they
            // are not (it was read exactly); the old family is anchored again below.
        }
        for fam in self.families.values_mut() {
            let sum: f64 = fam.members.values().map(|m| m.own).sum();
            fam.central = sum;
            fam.lo = sum;
            fam.hi = sum;
            fam.clamp();
        }
    }

    /// The family `pid` belongs to.
    pub(super) fn family_of(&self, pid: i32) -> Option<u64> {
        self.of.get(&pid).copied()
    }

    /// The pages of `pid`'s family counted as its own in the best estimate.
    pub(super) fn own(&self, pid: i32) -> f64 {
        self.of
            .get(&pid)
            .and_then(|k| self.families.get(k))
            .and_then(|f| f.members.get(&pid))
            .map_or(0.0, |m| m.own)
    }

    /// The tree's distinct anonymous pages.
    pub(super) fn total(&self) -> Pages {
        let mut t = Pages::default();
        for f in self.families.values() {
            t.central += f.central;
            t.lo += f.lo;
            t.hi += f.hi;
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn total(f: &Families) -> (f64, f64, f64) {
        let t = f.total();
        (t.central, t.lo, t.hi)
    }

    #[test]
    fn a_family_of_one_is_exact() {
        let mut f = Families::default();
        f.founded(1, 100, None);
        assert_eq!(total(&f), (100.0, 100.0, 100.0));
        f.tick(1, 250, None, 0);
        assert_eq!(total(&f), (250.0, 250.0, 250.0));
        f.tick(1, 40, None, 0);
        assert_eq!(total(&f), (40.0, 40.0, 40.0));
        assert!(!f.may_share(1));
    }

    #[test]
    fn a_fork_moves_no_page_and_copies_show_as_faults() {
        // The copy-on-write: 512 MiB (131,072 pages) in the parent, 3 children that
        // write every page: 4 × 131,072 distinct pages.
        const N: u64 = 131_072;
        let mut f = Families::default();
        f.founded(1, N, Some(N));
        for c in 2..=4 {
            f.forked(c, 1, N, Some(0));
        }
        // Nobody wrote yet (no fault): still N pages, exactly.
        assert_eq!(total(&f), (N as f64, N as f64, N as f64));
        assert!(f.may_share(2));
        for c in 2..=4 {
            f.tick(c, N, Some(N), 0);
        }
        let (central, lo, hi) = total(&f);
        assert_eq!(central, 4.0 * N as f64, "the copies counted");
        assert_eq!(hi, 4.0 * N as f64);
        // Without a read nothing proves that a fault copied a page.
        assert_eq!(lo, N as f64);
        // The parent writes every page too: it copies nothing (it holds the last mapping of
        // each), and the family cannot exceed its members' pages.
        f.tick(1, N, Some(2 * N), 0);
        assert_eq!(total(&f).0, 4.0 * N as f64);
    }

    #[test]
    fn children_that_only_read_share_everything() {
        const N: u64 = 131_072;
        let mut f = Families::default();
        f.founded(1, N, Some(10));
        for c in 2..=4 {
            // Reading inherited pages takes no fault: they are mapped at the fork.
            f.forked(c, 1, N, Some(3));
            f.tick(c, N, Some(5), 0);
        }
        let (central, lo, _) = total(&f);
        assert!(
            (central - N as f64).abs() < 20.0,
            "about one copy of each page: {central}"
        );
        assert_eq!(lo, N as f64);
    }

    #[test]
    fn an_exact_read_anchors_the_family() {
        const N: u64 = 1000;
        let mut f = Families::default();
        f.founded(1, N, Some(0));
        f.forked(2, 1, N, Some(0));
        // Both read at one moment: each holds half of every page.
        f.anchor(&[(1, 500.0, N, Some(0)), (2, 500.0, N, Some(0))]);
        assert_eq!(total(&f), (N as f64, N as f64, N as f64));
        // The child writes half the pages: 500 copies.
        f.tick(2, N, Some(500), 0);
        assert_eq!(total(&f).0, 1500.0);
        // Read again: the child's copies are its own (500 private, 500 shared: PSS 750).
        f.anchor(&[(1, 750.0, N, Some(0)), (2, 750.0, N, Some(500))]);
        assert_eq!(total(&f), (1500.0, 1500.0, 1500.0));
    }

    #[test]
    fn a_member_that_shares_nothing_leaves_its_family() {
        let mut f = Families::default();
        f.founded(1, 100, Some(0));
        f.forked(2, 1, 100, Some(0));
        // The child wrote everything: read exactly, neither shares a page.
        f.anchor(&[(1, 100.0, 100, Some(0)), (2, 100.0, 100, Some(100))]);
        assert!(!f.may_share(1) && !f.may_share(2));
        assert_eq!(total(&f), (200.0, 200.0, 200.0));
    }

    #[test]
    fn the_parent_leaving_hands_its_pages_to_the_children() {
        const N: u64 = 1000;
        let mut f = Families::default();
        f.founded(1, N, Some(0));
        f.forked(2, 1, N, Some(0));
        f.forked(3, 1, N, Some(0));
        f.leave(1);
        // The children still map every page (they took no fault): N distinct pages.
        assert_eq!(total(&f), (N as f64, N as f64, N as f64));
        // Had they not been read, either might have copied any page.
        let mut g = Families::default();
        g.founded(1, N, Some(0));
        g.forked(2, 1, N, None);
        g.forked(3, 1, N, None);
        g.leave(1);
        assert_eq!(total(&g), (N as f64, N as f64, 2.0 * N as f64));
        f.leave(2);
        assert_eq!(total(&f), (N as f64, N as f64, N as f64), "a family of one");
    }

    #[test]
    fn a_child_that_exits_takes_only_its_copies() {
        const N: u64 = 1000;
        let mut f = Families::default();
        f.founded(1, N, Some(0));
        f.forked(2, 1, N, Some(0));
        f.tick(2, N, Some(N), 0);
        assert_eq!(total(&f).0, 2.0 * N as f64);
        f.leave(2);
        assert_eq!(total(&f), (N as f64, N as f64, N as f64));
    }

    #[test]
    fn growth_is_counted_and_explains_faults() {
        let mut f = Families::default();
        f.founded(1, 100, Some(0));
        f.forked(2, 1, 100, Some(0));
        // The child allocates 300 new pages (300 faults): no copy.
        f.tick(2, 400, Some(300), 0);
        let (central, lo, hi) = total(&f);
        assert_eq!((central, lo, hi), (400.0, 400.0, 400.0));
        // The same growth with 100 faults more: 100 inherited pages may have been copied.
        f.tick(2, 400, Some(400), 0);
        assert_eq!(total(&f), (500.0, 400.0, 500.0));
    }
}
