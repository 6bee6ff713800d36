//! The recorder's unit tests.

use super::*;
use crate::model::{Arg, Termination};

fn at(t_ns: u64, event: Event) -> Stamped {
    Stamped { t_ns, event }
}

/// A new process `child` of the root (pid 10).
fn fork(t: u64, child: i32) -> Stamped {
    at(
        t,
        Event::Fork {
            parent_tgid: 10,
            child_tid: child,
            child_tgid: child,
        },
    )
}

fn start(pid: i32) -> Stamped {
    at(
        0,
        Event::Start {
            command: vec![Arg::from("sh")],
            tracker: "ptrace".into(),
            pid,
            ppid: 1,
        },
    )
}

/// The tracker may not know the root's status (its leader's exit lost with an overrun);
/// ste's own wait for the root tells it, and a status the tracker saw is never replaced.
#[test]
fn the_roots_status_comes_from_ste_s_wait_when_the_tracker_had_none() {
    let exit = |t, status| {
        at(
            t,
            Event::Exit {
                tid: 10,
                tgid: 10,
                status,
            },
        )
    };
    let root_exit = |t, code| {
        at(
            t,
            Event::RootExit {
                status: Termination::Exited(code),
            },
        )
    };
    let run = Recorder::replay(&[start(10), exit(1, None), root_exit(2, 3)]);
    assert_eq!(run.processes[0].exit_code, Some(3));
    assert_eq!(run.exit.code, Some(3));
    let run = Recorder::replay(&[
        start(10),
        exit(1, Some(Termination::Exited(4))),
        root_exit(2, 3),
    ]);
    assert_eq!(
        run.processes[0].exit_code,
        Some(4),
        "the tracker's own figure stays"
    );
}

/// Losses add up while each is sized; one of unknown size makes the sum unknown, and an
/// overrun said to have lost nothing (an older record's) is no bound either.
#[test]
fn a_loss_of_unknown_size_leaves_the_bound_unknown() {
    let lost = |t, overruns, events_at_most, exits_missed| {
        at(
            t,
            Event::Lost {
                overruns,
                events_at_most,
                found_by_resync: 0,
                exits_missed,
                argv_doubtful: 0,
            },
        )
    };
    // The root's end, so that no process is left unended (a missed exit of its own).
    let end = at(
        9,
        Event::Exit {
            tid: 10,
            tgid: 10,
            status: Some(Termination::Exited(0)),
        },
    );
    let replay = |losses: &[Stamped]| {
        let mut events = vec![start(10)];
        events.extend_from_slice(losses);
        events.push(end.clone());
        Recorder::replay(&events)
    };
    let run = replay(&[]);
    assert_eq!(run.overhead.lost.events_at_most, Some(0));
    assert_eq!(run.overhead.lost_events, Some(0));

    let run = replay(&[lost(1, 1, Some(7), 0), lost(2, 1, Some(5), 2)]);
    assert_eq!(run.overhead.lost.events_at_most, Some(12));
    assert_eq!(run.overhead.lost.overruns, 2);
    assert_eq!(run.overhead.lost_events, None, "a bound, not a count");

    let run = replay(&[lost(1, 1, Some(7), 0), lost(2, 3, None, 4)]);
    assert_eq!(run.overhead.lost.events_at_most, None);
    assert_eq!(run.overhead.lost.exits_missed, 4);

    // Sequence gaps size a netlink overrun in events of their own.
    let run = replay(&[lost(1, 2, Some(0), 0), lost(2, 0, Some(9), 0)]);
    assert_eq!(run.overhead.lost.events_at_most, Some(9));

    let run = replay(&[lost(1, 2, Some(0), 0)]);
    assert_eq!(run.overhead.lost.events_at_most, None);

    // Process ends the kernel dropped unsaid, found at the end: how many other events
    // went with them is unknown.
    let run = replay(&[lost(1, 0, None, 3)]);
    assert_eq!(run.overhead.lost.events_at_most, None);
    assert_eq!(run.overhead.lost_events, None);
}

#[test]
fn counts_processes_threads_and_execs() {
    let events = vec![
        start(10),
        at(
            1,
            Event::Exec {
                tgid: 10,
                former_tid: 10,
                argv: Some(vec![Arg::from("sh")]),
            },
        ),
        at(
            2,
            Event::Fork {
                parent_tgid: 10,
                child_tid: 11,
                child_tgid: 11,
            },
        ),
        at(
            3,
            Event::Fork {
                parent_tgid: 11,
                child_tid: 12,
                child_tgid: 11,
            },
        ),
        at(
            4,
            Event::Exec {
                tgid: 11,
                former_tid: 11,
                argv: None,
            },
        ),
        at(
            5,
            Event::Exit {
                tid: 12,
                tgid: 11,
                status: None,
            },
        ),
        at(
            6,
            Event::Exit {
                tid: 11,
                tgid: 11,
                status: Some(Termination::Exited(3)),
            },
        ),
        at(
            7,
            Event::Exit {
                tid: 10,
                tgid: 10,
                status: Some(Termination::Exited(0)),
            },
        ),
        at(
            7,
            Event::RootExit {
                status: Termination::Exited(0),
            },
        ),
        at(
            8,
            Event::End {
                user_ns: 1,
                sys_ns: 2,
                ste_cpu_ns: 3,
                ste_max_rss_bytes: 4,
                stopped_waiting: None,
            },
        ),
    ];
    let run = Recorder::replay(&events);
    assert_eq!(run.totals.processes, 2);
    assert_eq!(run.totals.threads, 3);
    assert_eq!(run.totals.execs, 2);
    assert_eq!(run.overhead.lost.argv_unread, 1);
    assert_eq!(run.processes[1].exit_code, Some(3));
    assert_eq!(run.processes[1].end_ns, Some(6));
    assert_eq!(run.exit.code, Some(0));
    assert_eq!(run.totals.wall_ns, 8);
    assert_eq!(run.overhead.lost_events, Some(0));
}

#[test]
fn leader_exiting_first_ends_the_process_with_its_last_thread() {
    let events = vec![
        start(10),
        at(
            1,
            Event::Fork {
                parent_tgid: 10,
                child_tid: 11,
                child_tgid: 10,
            },
        ),
        at(
            2,
            Event::Exit {
                tid: 10,
                tgid: 10,
                status: Some(Termination::Exited(0)),
            },
        ),
        at(
            5,
            Event::Exit {
                tid: 11,
                tgid: 10,
                status: None,
            },
        ),
    ];
    let run = Recorder::replay(&events);
    assert_eq!(run.processes[0].end_ns, Some(5));
    assert_eq!(run.processes[0].threads, 2);
}

#[test]
fn exec_from_a_thread_replaces_the_leader() {
    let events = vec![
        start(10),
        at(
            1,
            Event::Fork {
                parent_tgid: 10,
                child_tid: 11,
                child_tgid: 10,
            },
        ),
        at(
            1,
            Event::Fork {
                parent_tgid: 10,
                child_tid: 12,
                child_tgid: 10,
            },
        ),
        // netlink order: the killed old leader reports an exit, then thread 11 execs.
        at(
            2,
            Event::Exit {
                tid: 12,
                tgid: 10,
                status: None,
            },
        ),
        at(
            2,
            Event::Exit {
                tid: 10,
                tgid: 10,
                status: Some(Termination::Exited(0)),
            },
        ),
        at(
            2,
            Event::Exec {
                tgid: 10,
                former_tid: 11,
                argv: Some(vec![Arg::from("x")]),
            },
        ),
        at(
            3,
            Event::Exit {
                tid: 11,
                tgid: 10,
                status: None,
            },
        ),
        at(
            4,
            Event::Exit {
                tid: 10,
                tgid: 10,
                status: Some(Termination::Exited(5)),
            },
        ),
    ];
    let run = Recorder::replay(&events);
    assert_eq!(run.processes[0].end_ns, Some(4));
    assert_eq!(run.processes[0].exit_code, Some(5));
    assert_eq!(run.processes[0].threads, 3);
}

#[test]
fn threads_have_lifetimes_ended_by_exit_or_exec() {
    let fork = |t, tid| {
        at(
            t,
            Event::Fork {
                parent_tgid: 10,
                child_tid: tid,
                child_tgid: 10,
            },
        )
    };
    let events = vec![
        start(10),
        fork(1, 11),
        fork(2, 12),
        at(
            3,
            Event::Exit {
                tid: 11,
                tgid: 10,
                status: None,
            },
        ),
        at(
            4,
            Event::Exec {
                tgid: 10,
                former_tid: 10,
                argv: None,
            },
        ),
    ];
    let run = Recorder::replay(&events);
    let l = &run.processes[0].thread_lifetimes;
    assert_eq!(l.len(), 2);
    assert_eq!((l[0].tid, l[0].start_ns, l[0].end_ns), (11, 1, Some(3)));
    assert_eq!((l[1].tid, l[1].start_ns, l[1].end_ns), (12, 2, Some(4)));
}

#[test]
fn exec_times_strictly_follow_the_order_execs_arrive_in() {
    let exec = |t, tgid| {
        at(
            t,
            Event::Exec {
                tgid,
                former_tid: tgid,
                argv: Some(vec![Arg::from(format!("p{tgid}").as_str())]),
            },
        )
    };
    // 12 execs first but was stamped earlier by a source on another CPU.
    let events = vec![
        start(10),
        fork(1, 11),
        fork(2, 12),
        exec(5, 12),
        exec(5, 11),
        exec(3, 10),
    ];
    let run = Recorder::replay(&events);
    let mut all: Vec<(u64, i32)> = run
        .processes
        .iter()
        .flat_map(|p| p.execs.iter().map(move |e| (e.t_ns, p.pid)))
        .collect();
    all.sort();
    assert_eq!(all, vec![(5, 12), (6, 11), (7, 10)]);
}

#[test]
fn pid_reuse_makes_a_new_process() {
    let events = vec![
        start(10),
        at(
            1,
            Event::Fork {
                parent_tgid: 10,
                child_tid: 11,
                child_tgid: 11,
            },
        ),
        at(
            2,
            Event::Exit {
                tid: 11,
                tgid: 11,
                status: Some(Termination::Exited(0)),
            },
        ),
        at(
            3,
            Event::Fork {
                parent_tgid: 10,
                child_tid: 11,
                child_tgid: 11,
            },
        ),
        at(
            4,
            Event::Exit {
                tid: 11,
                tgid: 11,
                status: Some(Termination::Exited(1)),
            },
        ),
    ];
    let run = Recorder::replay(&events);
    assert_eq!(run.totals.processes, 3);
    assert_eq!(run.processes[2].exit_code, Some(1));
}

#[test]
fn unended_processes_are_still_running_or_missed() {
    let mut events = vec![
        start(10),
        at(
            1,
            Event::Fork {
                parent_tgid: 10,
                child_tid: 11,
                child_tgid: 11,
            },
        ),
        at(
            2,
            Event::Exit {
                tid: 10,
                tgid: 10,
                status: Some(Termination::Exited(0)),
            },
        ),
    ];
    let mut cut = events.clone();
    cut.push(at(
        3,
        Event::End {
            user_ns: 0,
            sys_ns: 0,
            ste_cpu_ns: 0,
            ste_max_rss_bytes: 0,
            stopped_waiting: Some("--linger 1s".into()),
        },
    ));
    let run = Recorder::replay(&cut);
    assert_eq!(run.totals.still_running, 1);
    assert_eq!(run.overhead.lost_events, Some(0));
    events.push(at(
        3,
        Event::End {
            user_ns: 0,
            sys_ns: 0,
            ste_cpu_ns: 0,
            ste_max_rss_bytes: 0,
            stopped_waiting: None,
        },
    ));
    let run = Recorder::replay(&events);
    assert_eq!(run.overhead.lost.exits_missed, 1);
    assert_eq!(run.overhead.lost_events, Some(1));
}

/// A pending exec (netlink: its argv judged later) is an exec at its own time, with its argv
/// filled in by its verdict; the live view hears of it when the verdict comes, and a verdict
/// for no pending exec (a process already ended, one that exec'd without one) changes nothing.
#[test]
fn a_pending_execs_argv_comes_with_its_verdict() {
    let pending = |t, tgid| {
        at(
            t,
            Event::ExecPending {
                tgid,
                former_tid: tgid,
            },
        )
    };
    let verdict = |t, tgid, argv: Option<&str>| {
        at(
            t,
            Event::ExecArgv {
                tgid,
                argv: argv.map(|a| vec![Arg::from(a)]),
            },
        )
    };
    let mut rec = Recorder::new();
    rec.apply(&start(10));
    rec.apply(&fork(1, 11));
    assert!(matches!(rec.apply(&pending(2, 11)), Applied::ExecPending(p) if p.pid == 11));
    rec.apply(&fork(3, 12));
    rec.apply(&pending(4, 12));
    match rec.apply(&verdict(5, 11, Some("cc1"))) {
        Applied::Exec(p, x) => {
            assert_eq!(p.pid, 11);
            assert_eq!(x.t_ns, 2, "the exec's own time");
            assert_eq!(x.argv, Some(vec![Arg::from("cc1")]));
        }
        _ => panic!("the verdict shows the exec"),
    }
    assert!(
        matches!(rec.apply(&verdict(6, 11, Some("again"))), Applied::Nothing),
        "one verdict an exec"
    );
    // A doubt is shown too, as an unknown argv.
    assert!(matches!(
        rec.apply(&verdict(7, 12, None)),
        Applied::Exec(_, Exec { argv: None, .. })
    ));
    // An exec with its argv ends nothing pending: a late verdict is not taken for it.
    rec.apply(&pending(8, 12));
    rec.apply(&at(
        9,
        Event::Exec {
            tgid: 12,
            former_tid: 12,
            argv: Some(vec![Arg::from("as")]),
        },
    ));
    assert!(matches!(
        rec.apply(&verdict(10, 12, Some("stale"))),
        Applied::Nothing
    ));
    let run = rec.finish();
    let argvs: Vec<_> = run.processes[2]
        .execs
        .iter()
        .map(|x| x.argv.clone())
        .collect();
    assert_eq!(argvs, [None, None, Some(vec![Arg::from("as")])]);
    assert_eq!(run.totals.execs, 4);
}
