//! Max PSS you can trust (issue 20): the seed's examples under the default budget, with no
//! hold after the peak, under every tracker and privilege level. The truth is what the
//! fixture touches: the figure must be within 3 % of it, and say how exact it is.

use crate::harness::*;
use crate::matrix;
use ste::model::SampleKind;

const MIB: u64 = 1 << 20;

/// Max PSS of a run, checked against `truth` to within 3 %, and its exactness line.
fn max_pss_within_3_percent(o: &Outcome, truth: u64) -> u64 {
    assert_eq!(o.status(), 0, "{}", o.stderr());
    let pss = o.run().totals.max_pss_bytes.expect("Max PSS measured");
    let err = (pss as f64 - truth as f64).abs() / truth as f64;
    assert!(
        err < 0.03,
        "Max PSS {pss} is not within 3% of {truth}\n{}",
        o.stderr()
    );
    // The headline keeps the seed's words, and the next line says how exact it is.
    let text = o.stderr();
    let line = max_pss_exactness_line(&text);
    // "exact" only where one figure is proven; otherwise the interval, whatever the kind.
    let t = &o.run().totals;
    let kind = match (t.max_pss_low_bytes, t.max_pss_high_bytes) {
        (Some(l), Some(h)) if l == h => "  exact: ",
        (Some(_), Some(_)) => "  between ",
        // No high-water mark at exit reached the sampler (netlink without root).
        (Some(_), None) if o.run().sampler.exit_marks == Some(false) => "  at least ",
        _ => "(no interval)",
    };
    assert!(
        line.starts_with(kind),
        "exactness line: {line:?}, JSON [{:?}, {:?}] {:?}\n{text}",
        t.max_pss_low_bytes,
        t.max_pss_high_bytes,
        t.max_pss_kind
    );
    pss
}

/// The options of a run: the default budget, but for netlink as nobody, which has no view of
/// a process's exit (no stop, no high-water mark: as root taskstats gives it) and so depends
/// on a tick landing in the last growth: the tests' unoptimised binary pays ~6× a release
/// build's CPU per tick, so its ticks at the default budget are ~6× further apart; it gets
/// the budget that gives a release build's pace (`bench/max_pss.py` measures the release
/// build at the default budget).
fn budget(mode: Mode) -> &'static [&'static str] {
    match (mode.used(), mode.who) {
        (Tracker::Netlink, Who::Nobody) => &["--sample-budget", "6"],
        _ => &[],
    }
}

matrix!(fill_byte_by_byte, |mode: Mode| {
    // The seed's fill.c at -O0: every byte written, and the program exits at its peak.
    let o = ste(
        mode,
        budget(mode),
        &[&fixture(), "fill", "256", "0", "byte"],
    );
    max_pss_within_3_percent(&o, 256 * MIB);
    // The sampler kept to its budget (1 % of a core by default) over the run, plus its start-up
    // allowance, the debt its ticks may run into and the one tick that may overdraw it (ticks
    // stop only once the bucket is past the bound: under a clean clone's build and tests, 24
    // ticks took 41 ms and the sampler ended 13 ms past it), and the one round an exit may
    // overdraw (the costliest: the whole peak).
    let run = o.run();
    let s = &run.sampler;
    let round = s.max_round_cpu_ns.unwrap_or(0);
    let tick = s.max_tick_cpu_ns.unwrap_or(0);
    let b = s.budget.expect("adaptive");
    let debt = s.tick_debt_ns.expect("adaptive");
    let allowed =
        (b * run.totals.wall_ns as f64) as u64 + s.burst_ns.unwrap_or(0) + debt + tick + round;
    assert!(
        s.cpu_ns <= allowed,
        "sampler used {} ns > {allowed}: {s:?}",
        s.cpu_ns
    );
});

matrix!(fillfill, |mode: Mode| {
    // The seed's fillfill.c: fill and free N, fork, the child fills 2N: the peak is the
    // child's, 2N, and the parent's first fill must not be added to it.
    // Its child frees the 2N before it exits: a round that lands between the free and the
    // exit sees the mapping gone while the counters still hold it (the walk cannot see a
    // mapping taken out and not yet freed), and must not bound the growth before it by its
    // figure (it did, in about one debug-build run of six: "exact" at half the truth).
    let o = ste(mode, budget(mode), &[&fixture(), "fillfill", "128"]);
    max_pss_within_3_percent(&o, 256 * MIB);
    assert_eq!(o.run().totals.processes, 2);
});

matrix!(a_starved_budget_still_looks_every_second, |mode: Mode| {
    // A budget far too small for its ticks (a twentieth of a thousandth of a core) is a target,
    // not a licence to go blind: the tree is read at least every second, its CPU too. Before,
    // such a run was read once in 4 s (one round, no tick), and a build's rounds had put the
    // bucket so deep in debt that its ticks stopped for 37 s.
    let o = ste(
        mode,
        &["--sample-budget", "0.0005"],
        &[&fixture(), "spin", "3000"],
    );
    let run = o.run();
    let gap = run.sampler.max_look_gap_ns.expect("more than one look");
    // A second, and what a loaded machine may add to the sampler's wake-up.
    let allowed = 2_000_000_000;
    assert!(gap <= allowed, "unread for {gap} ns: {:?}", run.sampler);
    let with_cpu: Vec<u64> = run
        .samples
        .iter()
        .filter(|s| s.per_process.iter().flatten().any(|p| p.cpu_ns.is_some()))
        .map(|s| s.t_ns)
        .collect();
    assert!(with_cpu.len() >= 2, "CPU read at {with_cpu:?}");
    let worst = with_cpu.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
    assert!(worst <= allowed, "CPU unread for {worst} ns: {with_cpu:?}");
});

/// 64 threads hold 8 MiB each for 5 ms, then free it and exit: the trackers that see the exit
/// (ptrace's stop, ebpf's high-water mark) or ticks every few ms must find the 512 MiB. netlink
/// has neither an exit stop nor a high-water mark at exit, so a peak shorter than its ticks
/// can be missed: it is left out, as the issue asks of it only `fill` and `fillfill`.
fn sixty_four_threads(mode: Mode) {
    // The threads free their memory before the process exits, so only a tick in the hold (or
    // in the last of the faulting) sees it: the unoptimised test binary gets the budget that
    // gives a release build's tick pace (see `budget`).
    let o = ste(
        mode,
        &["--sample-budget", "6"],
        &[&fixture(), "threads", "64", "8", "5"],
    );
    max_pss_within_3_percent(&o, 512 * MIB);
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn sixty_four_threads_for_5_ms_ebpf_root() {
    sixty_four_threads(Mode {
        tracker: Tracker::Ebpf,
        who: Who::Root,
    });
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn sixty_four_threads_for_5_ms_ptrace_root() {
    sixty_four_threads(Mode {
        tracker: Tracker::Ptrace,
        who: Who::Root,
    });
}

#[test]
fn sixty_four_threads_for_5_ms_ptrace_nobody() {
    sixty_four_threads(Mode {
        tracker: Tracker::Ptrace,
        who: Who::Nobody,
    });
}

matrix!(a_program_of_a_millisecond, |mode: Mode| {
    // /bin/true lives about a millisecond. Its figure is a read after its libraries were
    // mapped (an exact read at ptrace's exit stop), or n/a with the reason: never a read
    // of the loader alone (12-48 KiB here before this was fixed). Not beside a flood: the
    // sampler then spends its budget on dearer reads, and the exit stop's read may be one
    // round too many (the figure is then carried, and says so).
    let _alone = machine_to_itself();
    let o = ste(mode, &[], &["/bin/true"]);
    assert_eq!(o.status(), 0, "{}", o.stderr());
    let text = o.stderr();
    let run = o.run();
    if text.contains("Max PSS: n/a\n") {
        let reason = text
            .lines()
            .skip_while(|l| *l != "Max PSS: n/a")
            .nth(1)
            .unwrap_or_default();
        assert!(
            reason.starts_with("  no read: ") || reason.starts_with("  a process ended before"),
            "n/a without its reason: {text}"
        );
        // The JSON keeps the bound, and says it is only a bound.
        if let Some(pss) = run.totals.max_pss_bytes {
            assert_eq!(
                run.totals.max_pss_kind,
                Some(SampleKind::ExitPeak),
                "{text}"
            );
            assert!(run.totals.max_pss_high_bytes.unwrap_or(0) >= pss, "{text}");
        }
    } else {
        let pss = run.totals.max_pss_bytes.expect("a figure or n/a");
        assert!(
            pss >= 100 << 10,
            "Max PSS {pss} of /bin/true: a read of its loader\n{text}"
        );
        if mode.used() == Tracker::Ptrace {
            // The exit stop's exact read, or, when the program had released memory a tick saw
            // (the loader's), the kernel's high-water mark read there: an upper bound. On a
            // loaded machine the program may live long enough for a tick to see it before
            // any exact read, and that tick's figure (from its counters) can be the highest:
            // then it is carried, bounded, and says so.
            let kind = run.totals.max_pss_kind;
            match kind {
                Some(SampleKind::Exact | SampleKind::ExitPeak) => {}
                Some(SampleKind::Carried) => {
                    assert!(
                        run.totals.max_pss_low_bytes.is_some()
                            && run.totals.max_pss_high_bytes.is_some()
                            && (text.contains("\n  exact: ") || text.contains("\n  between ")),
                        "a carried figure without its interval\n{text}"
                    );
                }
                _ => panic!("{kind:?}\n{text}"),
            }
        }
    }
});

/// A long quiet run keeps few samples: ticks back off while nothing moves, and only the
/// highest tick of each emission window is kept, every sample saying how it was read.
#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn samples_stay_bounded_and_say_how_they_were_read() {
    let mode = Mode {
        tracker: Tracker::Ptrace,
        who: Who::Root,
    };
    let o = ste(mode, &[], &[&fixture(), "fill", "64", "3000"]);
    assert_eq!(o.status(), 0, "{}", o.stderr());
    let run = o.run();
    let n = run.samples.len();
    // 3 s at one emission per 5 ms at most: 600; in practice far fewer.
    assert!(n <= 600, "{n} samples: {:?}", run.sampler);
    // An exact round was taken (the first reads of a process still mapping its libraries or
    // filling its memory are smears, carried instead: so not every run has an exact sample).
    assert!(run.sampler.rounds >= 1, "{:?}", run.sampler);
    for s in &run.samples {
        let (low, high) = (
            s.low_bytes.expect("a lower end"),
            s.high_bytes.expect("an upper end"),
        );
        assert!(low <= s.pss_bytes && s.pss_bytes <= high, "{s:?}");
        if s.kind == SampleKind::Exact {
            assert_eq!(low, high, "{s:?}");
        }
    }
    assert!(run.samples.windows(2).all(|w| w[0].t_ns <= w[1].t_ns));
    // Ticks backed off in the hold: well under one per millisecond.
    assert!(run.sampler.ticks < 1500, "{:?}", run.sampler);
    // The hold is a plateau, which goes out as its first and last points only: never three
    // ticks' samples in a row with the same figures (each emission wakes ste's session), but
    // for the tick a second that reads the processes' CPU.
    let read_cpu =
        |s: &ste::model::Sample| s.per_process.iter().flatten().any(|p| p.cpu_ns.is_some());
    let same = |a: &ste::model::Sample, b: &ste::model::Sample| {
        a.kind == SampleKind::Carried
            && b.kind == SampleKind::Carried
            && (a.pss_bytes, a.rss_bytes, a.processes) == (b.pss_bytes, b.rss_bytes, b.processes)
    };
    assert!(
        run.samples
            .windows(3)
            .all(|w| !(same(&w[0], &w[1]) && same(&w[1], &w[2]) && !read_cpu(&w[1]))),
        "{:?}",
        run.samples
    );
    // The hold: from 100 ms after the fill reached its size (a loaded host stretches the fill
    // past half a second) to 2.5 s. Its plateau goes out as two points; when the carried figure
    // is loose (its bound above 0.5 %), the exact round that anchors it may fall in the hold
    // too (it waits for the budget the fill's reads spent: up to ~0.8 s on this host), and
    // adds itself between the two plateaus' points: three, one of them exact.
    let top = run.samples.iter().map(|s| s.pss_bytes).max().unwrap_or(0);
    let filled_ns = run
        .samples
        .iter()
        .find(|s| s.pss_bytes as f64 >= 0.99 * top as f64)
        .map_or(0, |s| s.t_ns);
    let hold: Vec<_> = run
        .samples
        .iter()
        .filter(|s| s.t_ns > filled_ns.max(400_000_000) + 100_000_000 && s.t_ns < 2_500_000_000)
        .collect();
    // The samples that read the processes' CPU (a round's; a tick's, at most one a second: the
    // hold is under 2 s) are points of their own; the rest is the plateau.
    let cpu_reads = hold.iter().filter(|s| read_cpu(s)).count();
    assert!(
        cpu_reads <= 3,
        "{cpu_reads} CPU reads in the hold: {hold:?}"
    );
    let plateau: Vec<_> = hold.iter().filter(|s| !read_cpu(s)).collect();
    let exact = plateau
        .iter()
        .filter(|s| s.kind == SampleKind::Exact)
        .count();
    assert!(
        plateau.len() <= 2 || (plateau.len() == 3 && exact == 1),
        "{} samples in the hold: {hold:?}",
        hold.len()
    );
}

/// A peak freed before the exit (the seed's fillfill: the child frees its 2N and exits) with
/// ticks far apart (a twentieth of the default budget): the trackers that see the exit
/// (ebpf's high-water mark in the kernel, ptrace's `VmHWM` at the exit stop) bound the
/// growth after the last tick from above, and the truth lies within the stated bound.
fn freed_before_exit(mode: Mode) {
    let o = ste(
        mode,
        &["--sample-budget", "0.05"],
        &[&fixture(), "fillfill", "128"],
    );
    assert_eq!(o.status(), 0, "{}", o.stderr());
    let run = o.run();
    let truth = 256 * MIB;
    let pss = run.totals.max_pss_bytes.expect("Max PSS measured");
    let peak = run
        .samples
        .iter()
        .find(|s| Some(s.t_ns) == run.totals.max_pss_t_ns && s.pss_bytes == pss)
        .expect("the peak's sample");
    let (low, high) = (peak.low(), peak.high());
    // The child's own 256 MiB alone is the truth's floor; its libraries add a little.
    assert!(
        high >= truth && low <= truth + 4 * MIB,
        "Max PSS {pss} in [{low}, {high}] does not hold {truth}\n{}",
        o.stderr()
    );
    if peak.kind == SampleKind::ExitPeak {
        assert!(
            o.stderr()
                .contains("at most what a process's high-water mark"),
            "{}",
            o.stderr()
        );
    }
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn freed_before_exit_ebpf_root() {
    freed_before_exit(Mode {
        tracker: Tracker::Ebpf,
        who: Who::Root,
    });
}

#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn freed_before_exit_ptrace_root() {
    freed_before_exit(Mode {
        tracker: Tracker::Ptrace,
        who: Who::Root,
    });
}

#[test]
fn freed_before_exit_ptrace_nobody() {
    freed_before_exit(Mode {
        tracker: Tracker::Ptrace,
        who: Who::Nobody,
    });
}
