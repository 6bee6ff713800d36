//! The ebpf tracker under a burst of execs with long argv loses nothing.
//!
//! A test binary of its own because its claim needs the CPUs: in `tests/it` it ran beside the
//! other tests, and a CI host busy with them starved the reader (four records lost, counted, on
//! the first burst). Cargo runs test binaries one after another, so nothing of ste's runs
//! beside it here.

#[allow(dead_code)]
#[path = "it/harness.rs"]
mod harness;

use harness::*;

/// A burst of long argv: 300 `/bin/true`, eight at a time (`xargs -P 8`), each with 200 KB of
/// argv, which the kernel copies whole into the ring buffer. The ring holds about five of them;
/// the reader, which sleeps between drains while records keep coming, is woken early once the
/// data waiting passes a quarter of the ring, and loses none (without that wake-up a 1 MiB ring
/// lost 38–110 of the 300 execs).
///
/// The claim needs the CPUs: beside other tests (a debug build of ste) the reader lost 1–4
/// records, counted, and none alone in 44 runs. So a burst that lost records is run again, up
/// to three times in all: a reader that cannot keep up loses every time (without the early
/// wake-up, every run lost dozens); and every loss must have been counted, with nothing else
/// lost. An overrun is one time the reader found the kernel's drop counter grown, by one record
/// or more: `events_at_most` is how many.
#[test]
#[cfg_attr(not(ste_test_root), ignore = "needs root: runs ste as root")]
fn ebpf_loses_no_exec_in_a_burst_of_long_argv() {
    let mode = Mode {
        tracker: Tracker::Ebpf,
        who: Who::Root,
    };
    let word = "a".repeat(100_000);
    let script = r#"seq 300 | xargs -s 2000000 -P 8 -I{} /bin/true {} "$0" "$0""#;
    let mut losses = Vec::new();
    let o = loop {
        let o = ste(
            mode,
            &["-o", "/dev/null"],
            &["/bin/sh", "-c", script, &word],
        );
        assert_eq!(o.status(), 0, "{}", o.stderr());
        let (tracker, lost_events, lost) = {
            let run = o.run();
            (
                run.tracker.clone(),
                run.overhead.lost_events,
                run.overhead.lost.clone(),
            )
        };
        assert_eq!(tracker, "ebpf");
        if lost_events == Some(0) {
            break o;
        }
        // Only overruns of the ring, each counted: the argv read and the exits are all there.
        assert!(
            lost.overruns >= 1 && lost.events_at_most >= lost.overruns,
            "{lost:?}"
        );
        assert_eq!(lost.argv_unread + lost.exits_missed, 0, "{lost:?}");
        losses.push(format!("{lost:?}"));
        assert!(
            losses.len() < 3,
            "lost records in three bursts: {losses:#?}"
        );
    };
    if !losses.is_empty() {
        eprintln!("bursts that lost records before one that lost none: {losses:?}");
    }
    let run = o.run();
    let mut numbers: Vec<u32> = run
        .processes
        .iter()
        .flat_map(|p| &p.execs)
        .filter_map(|e| {
            let a: Vec<String> = e
                .argv
                .as_ref()?
                .iter()
                .map(|a| a.to_string_lossy())
                .collect();
            (a[0] == "/bin/true").then(|| {
                assert_eq!(a.len(), 4, "the argv of {}, whole", a[1]);
                assert!(a[2] == word && a[3] == word, "the argv of {}, whole", a[1]);
                a[1].parse().expect("a number")
            })
        })
        .collect();
    numbers.sort_unstable();
    assert_eq!(
        numbers,
        (1..=300).collect::<Vec<u32>>(),
        "every exec, with its argv"
    );
}
