//! What each kernel is known not to do, in one place: every check of the matrix a kernel
//! fails, with the reason. A failure not listed here fails the matrix; so does a listed one
//! that passes when it must fail (`may_pass: false`): the list is then out of date.
//!
//! Owns the list only; the checks are `cases`'.

use super::cases::{Tracker, Who};

/// A check some kernels fail.
pub struct Limit {
    /// The kernels it holds for: releases from `from` up to (not including) `until`.
    pub from: (u32, u32),
    pub until: (u32, u32),
    /// The rows and cases it holds for (`None`: all).
    pub tracker: Option<Tracker>,
    pub who: Option<Who>,
    pub case: Option<&'static str>,
    /// The check that fails.
    pub check: &'static str,
    /// Whether it may pass all the same: a race that the kernel makes likely, not certain.
    pub may_pass: bool,
    pub why: &'static str,
    /// In a few words, for the README's table.
    pub short: &'static str,
}

const ANY: (u32, u32) = (0, 0);

pub const LIMITS: &[Limit] = &[Limit {
    from: ANY,
    until: (6, 6),
    tracker: Some(Tracker::Netlink),
    who: Some(Who::Nobody),
    case: None,
    check: "start",
    may_pass: false,
    why: "the proc connector takes subscribers with CAP_NET_ADMIN only before Linux 6.6: ste refuses (exit 125) and says so",
    short: "refused (root only before 6.6)",
}];

/// Past every kernel.
#[allow(dead_code)] // the `until` of a limit that holds on every newer kernel
const NEWEST: (u32, u32) = (u32::MAX, 0);

/// The major and minor version of a release (`5.10.0-46-amd64`: (5, 10)).
pub fn version(release: &str) -> (u32, u32) {
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

/// The limit that covers a failed or passed check, if any.
pub fn limit(
    release: &str,
    tracker: Tracker,
    who: Who,
    case: &str,
    check: &str,
) -> Option<&'static Limit> {
    let v = version(release);
    LIMITS.iter().find(|l| {
        l.from <= v
            && v < l.until
            && l.tracker.is_none_or(|t| t == tracker)
            && l.who.is_none_or(|w| w == who)
            && l.case.is_none_or(|c| c == case)
            && l.check == check
    })
}
