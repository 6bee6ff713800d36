//! The reader's unit tests.

use super::*;

fn bytes(words: &[(usize, u64)], len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    for &(off, v) in words {
        b[off..off + 8].copy_from_slice(&v.to_ne_bytes());
    }
    b
}

/// An exec record of `tgid` (exec'd from `former`) at `ts`, whose argument area was
/// `total` bytes, of which `argv` was copied.
fn exec_record(tgid: i32, former: i32, ts: u64, total: u64, argv: &[u8]) -> Vec<u8> {
    let mut exec = bytes(&[(16, ts), (24, total)], 32);
    exec[0..4].copy_from_slice(&EV_EXEC.to_ne_bytes());
    exec[4..8].copy_from_slice(&tgid.to_ne_bytes());
    exec[8..12].copy_from_slice(&former.to_ne_bytes());
    exec[12..16].copy_from_slice(&(argv.len() as u32).to_ne_bytes());
    exec.extend_from_slice(argv);
    exec
}

/// An exit record of task `tid` of `tgid` at `ts` with `flags`, the wait status at byte 24
/// and the high-water mark (pages) at byte 32 left 0.
fn exit_record(tid: i32, tgid: i32, ts: u64, flags: u32) -> Vec<u8> {
    let mut exit = bytes(&[(16, ts)], 48);
    exit[0..4].copy_from_slice(&EV_EXIT.to_ne_bytes());
    exit[4..8].copy_from_slice(&tid.to_ne_bytes());
    exit[8..12].copy_from_slice(&tgid.to_ne_bytes());
    exit[12..16].copy_from_slice(&flags.to_ne_bytes());
    exit
}

/// An exec record of a process the tree does not know (its fork record was lost) adopts
/// it: the exec is shown and its end is read, where both were dropped before.
#[test]
fn a_process_whose_fork_was_lost_is_adopted_at_its_exec() {
    use crate::bus::sink::{Clock, Msg, Sink};
    use crate::source::sample::{Pace, Sampler};
    let (sink, mut rx) = Sink::new(Clock::start());
    let sampler = Sampler::new(Pace::Fixed(Duration::from_secs(3600)), sink.clone());
    let mut state = State {
        tree: Tree::new(10, sink, sampler),
        deferred_leaders: HashSet::new(),
        page_size: 4096,
        timed: false,
        peaks_from_exit: false,
        judged: None,
        last: None,
    };
    state.handle(&exec_record(11, 11, 5, 8, b"ls\0-l\0/\0"));
    assert!(state.tree.has_process(11));
    state.handle(&exit_record(11, 11, 7, EXIT_GROUP_DEAD));
    assert!(!state.tree.has_process(11));
    let events: Vec<Event> = rx
        .try_iter()
        .filter_map(|m| match m {
            Msg::Event(s) => Some(s.event),
            _ => None,
        })
        .collect();
    assert!(
        matches!(&events[..], [Event::Exec { tgid: 11, argv: Some(a), .. }, Event::Exit { tid: 11, .. }] if a.len() == 3),
        "{events:?}"
    );
}

#[test]
fn decodes_each_record_kind() {
    let mut fork = bytes(&[(16, 99)], 24);
    fork[0..4].copy_from_slice(&EV_FORK.to_ne_bytes());
    fork[4..8].copy_from_slice(&10i32.to_ne_bytes());
    fork[8..12].copy_from_slice(&11i32.to_ne_bytes());
    fork[12..16].copy_from_slice(&11i32.to_ne_bytes());
    assert_eq!(
        decode(&fork, false),
        Some(Record::Fork {
            parent_tgid: 10,
            child_tid: 11,
            child_tgid: 11,
            ts: 99
        })
    );

    let exec = exec_record(11, 12, 5, 10, b"ls\0-l\0/\0");
    assert_eq!(
        decode(&exec, false),
        Some(Record::Exec {
            tgid: 11,
            former_tid: 12,
            ts: 5,
            argv: b"ls\0-l\0/\0",
            truncated: true,
            total: 10
        })
    );

    let mut exit = exit_record(11, 11, 7, EXIT_GROUP_DEAD | EXIT_HAS_MM);
    exit[32..40].copy_from_slice(&300u64.to_ne_bytes());
    exit[40..48].copy_from_slice(&700u64.to_ne_bytes());
    exit[24..28].copy_from_slice(&(3i32 << 8).to_ne_bytes());
    assert_eq!(
        decode(&exit, false),
        Some(Record::Exit {
            tid: 11,
            tgid: 11,
            ts: 7,
            status: Some(3 << 8),
            hiwater_pages: Some((300, 700)),
            group_dead: true
        })
    );
    exit[12..16].copy_from_slice(&0u32.to_ne_bytes());
    assert!(matches!(
        decode(&exit, false),
        Some(Record::Exit {
            status: None,
            hiwater_pages: None,
            group_dead: false,
            ..
        })
    ));

    let mut calls = bytes(&[(16, 1)], 24);
    calls[0..4].copy_from_slice(&EV_CALLS.to_ne_bytes());
    calls[8..12].copy_from_slice(&11i32.to_ne_bytes());
    calls[12..16].copy_from_slice(&2u32.to_ne_bytes());
    for (idx, n) in [(110u32, 5u64), (512 + 20, 1)] {
        let mut e = bytes(&[(8, n), (16, 0), (24, 50), (32, 20)], 40);
        e[0..4].copy_from_slice(&idx.to_ne_bytes());
        calls.extend_from_slice(&e);
    }
    let Some(Record::Calls { tgid, calls: got }) = decode(&calls, true) else {
        panic!("calls record not decoded");
    };
    assert_eq!(tgid, 11);
    assert_eq!((got[0].nr, got[0].compat, got[0].calls), (110, false, 5));
    assert_eq!((got[1].nr, got[1].compat), (20, true));
    assert_eq!(got[1].total_ns, Some(50));
    // A truncated record is refused rather than misread.
    assert_eq!(decode(&calls[..70], true), None);

    // struct ev_last_switch: kind, tid, tgid, pad, ts, runtime, utime, stime, then the rest
    // of the ledger (run delay, switches, faults, I/O, delays).
    let rest: Vec<(usize, u64)> = (0..11).map(|i| (48 + 8 * i, 100 + i as u64)).collect();
    let mut fields = vec![(16, 9), (24, 1_500), (32, 4_000_000), (40, 0)];
    fields.extend(rest);
    let mut last = bytes(&fields, 136);
    last[0..4].copy_from_slice(&EV_LAST_SWITCH.to_ne_bytes());
    last[4..8].copy_from_slice(&12i32.to_ne_bytes());
    last[8..12].copy_from_slice(&11i32.to_ne_bytes());
    assert_eq!(
        decode(&last, false),
        Some(Record::LastSwitch {
            tgid: 11,
            ts: 9,
            cpu: Switched {
                runtime_ns: 1_500,
                utime_ns: 4_000_000,
                stime_ns: 0,
                run_delay_ns: 100,
                nvcsw: 101,
                nivcsw: 102,
                min_flt: 103,
                maj_flt: 104,
                rchar: 105,
                wchar: 106,
                read_bytes: 107,
                write_bytes: 108,
                blkio_delay_ns: 109,
                reclaim_delay_ns: 110,
            }
        })
    );
    // A record of the older, shorter layout is refused rather than misread.
    assert_eq!(decode(&last[..48], false), None);
}
