//! One run of a command: launch it under a tracker and the sampler, fold their events into a
//! Run while printing `EXEC:` lines live, wait for lingering descendants, then render.
//!
//! Owns the order of start-up (subreaper, signal mask, fork, tracker, release), the event
//! loop, signal forwarding and the linger policy. It reads no /proc file and formats no figure:
//! sources and reports do.

use crate::bus::event::{Event, Stamped};
use crate::bus::sink::{Clock, Msg, Sink};
use crate::cli::options::RunOptions;
use crate::command::own_usage::OwnUsage;
pub use crate::command::own_usage::note_start;
use crate::command::report_to::Output;
use crate::export::Exports;
use crate::launch::privilege::{self, Role};
use crate::launch::signals;
use crate::launch::{self, Credentials, Prepared};
use crate::ledger::record::Recording;
use crate::ledger::recorder::Recorder;
use crate::model::{Source, signal_name};
use crate::source::account;
use crate::source::sample::Sampler;
use crate::source::track;
use anyhow::{Context, Result};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

/// After the command exits, how long ste waits before naming the descendants it waits for.
const ANNOUNCE_AFTER: Duration = Duration::from_secs(1);
/// How long `--kill-lingering` gives its SIGTERM, then its SIGKILL, to take effect.
const KILL_GRACE: Duration = Duration::from_secs(2);

/// The state of waiting for the tree after the command exited.
#[derive(Clone, Copy)]
struct Waiting {
    root_gone_at: Option<Instant>,
    announced: bool,
    linger: Option<Duration>,
}

/// Runs the command and returns the status ste should exit with.
pub fn run(opts: &RunOptions) -> Result<i32> {
    note_start();
    crate::bus::phases::start();
    let status = run_inner(opts);
    crate::bus::phases::print();
    status
}

fn run_inner(opts: &RunOptions) -> Result<i32> {
    crate::compare::budget::require(&opts.budgets, false, "a run")?;
    crate::compare::budget::require_measured(
        &opts.budgets,
        crate::compare::budget::Measured {
            syscalls: opts.syscalls.is_some(),
            cgroup: opts.accounting.cgroup,
        },
        "a run",
    )?;
    // Start-up side by side: BPF loads on a thread of its own, begun before anything else
    // (it is the longest part of the start-up), while this thread opens the outputs, forks
    // the command and prepares the accounting (the command joins the cgroup itself, once
    // told where); only the release waits for all of them. The fork comes before the
    // accounting: see `launch` for what starting the command later cost under the ebpf
    // tracker.
    let sdt = opts
        .malloc
        .then(|| crate::source::malloc::sdt::plan(&opts.command));
    // The thread that loads BPF goes on as the ebpf tracker's reader: it starts with the
    // forwarded signals blocked, as every later thread does. This thread blocks them once the
    // outputs are open (opening one may wait, on a FIFO, and a Ctrl-C must end that), before it
    // makes anything a signal's default action would leave behind (the run directory, the
    // command's process, the cgroup): from then on a Ctrl-C stops ste at the release, the
    // command not run, its threads ended as after any run.
    let loading = signals::while_blocked(|| {
        track::preload_in_background(
            opts.tracker,
            opts.syscalls,
            !opts.accounting.off,
            sdt.clone(),
        )
    });
    // Open every output before the command starts: a bad path must not cost a run. Existing
    // files are emptied once the tracker has started (the record, opened last, at once).
    let out = opts
        .output
        .as_deref()
        .map(|p| crate::export::open("--output", p))
        .transpose()?;
    let mut exports = Exports::open(crate::export::Requested {
        json: opts.json.as_deref(),
        html: opts.html.as_deref(),
        perfetto: opts.perfetto.as_deref(),
    })?;
    let recording = match &opts.record {
        // Its writer thread lives for the run: it blocks the forwarded signals as every ste
        // thread must (a SIGINT it took would end ste instead of reaching the command).
        Some(p) => Some(
            signals::while_blocked(|| Recording::create(p, opts.style))
                .with_context(|| format!("cannot create the record {}", p.display()))?,
        ),
        None => None,
    };
    launch::become_subreaper()?;
    let creds = if opts.keep_root {
        None
    } else {
        Credentials::invoking_user()?
    };
    let original_mask = signals::block();
    let malloc = opts
        .malloc
        .then(|| crate::source::malloc::Setup::new(creds.as_ref().map(|c| (c.uid, c.gid))))
        .transpose()?;
    let env = malloc.as_ref().map(|m| m.env()).unwrap_or_default();
    let prepared = Prepared::new(&opts.command, creds, &env)?;
    let mut child = crate::bus::phases::span("fork", || prepared.fork(&original_mask))?;
    let mut accounting = crate::bus::phases::span("accounting prepare", || {
        account::Session::prepare(&opts.accounting)
    });
    if let Err(e) = child.join(accounting.join_files()) {
        child.abandon();
        return Err(e);
    }
    // From the command's start: until its release, its time is ste's set-up (see below).
    let clock = Clock::start_at(child.started_ns);
    let (sink, mut rx) = Sink::new(clock.clone());
    let sampler = Sampler::new(opts.pace, sink.clone());
    let peak_maps = crate::source::maps::peak::attach(opts.maps_at_peak, &sampler, &sink);
    // Before BPF is there, while this thread would only wait: signals blocked since the
    // fork wait for it, and reach the session in order through the sink.
    let signal_thread = signals::spawn(sink.clone()).context("cannot start the signal thread")?;
    let mut launched = child.launched();
    let tree =
        || std::sync::Arc::clone(&sampler) as std::sync::Arc<dyn crate::bus::tree::TreeWatcher>;
    let registered = crate::bus::phases::span("bpf: register root", || loading.register(child.pid));
    loading.hand_over(track::Handoff {
        child: launched.clone(),
        sink: sink.clone(),
        sampler: tree(),
        registered,
    });
    // Also while BPF loads: the accounts thread starts, and taskstats says when the command's
    // process started.
    crate::bus::phases::span("accounting start", || {
        accounting.start(&sink, child.pid, child.joined(), tree())
    });
    let preloaded = crate::bus::phases::span("wait for bpf", || loading.wait());
    let probes = sdt.map_or_else(String::new, |p| p.text_before(preloaded.bpf_status()));
    let malloc = crate::source::malloc::attach(malloc, probes, &sampler, &sink);
    let started = match crate::bus::phases::span("tracker start", || {
        track::start(
            opts.tracker,
            opts.syscalls,
            track::Ctx {
                preloaded,
                child: &mut launched,
                sink: &sink,
                sampler: &tree(),
                ledger: track::LedgerReads {
                    exit_stop: accounting.tracker_reads_ledger(),
                    wait4: accounting.ledger_kept(),
                },
            },
        )
    }) {
        Ok(started) => started,
        Err(e) => {
            child.abandon();
            anyhow::bail!(e);
        }
    };
    // Existing outputs are emptied only now that the run starts: a run that failed to start
    // leaves them as they were, and the files it made are removed (`output::Opened`).
    let begun =
        Output::begin(out, opts.output.as_deref()).and_then(|out| exports.begin().map(|()| out));
    let mut out = match begun {
        Ok(out) => out,
        Err(e) => {
            child.abandon();
            return Err(e);
        }
    };
    let command: Vec<_> = opts
        .command
        .iter()
        .map(|a| crate::model::Arg(a.as_encoded_bytes().to_vec()))
        .collect();
    sink.emit_at(
        0,
        Event::Start {
            command,
            tracker: started.kind.name().into(),
            pid: child.pid,
            ppid: std::process::id() as i32,
        },
    );
    if let Some(cpus) = crate::kernel::proc::online_cpus() {
        sink.emit_at(0, Event::Machine { cpus });
    }
    if let Some(c) = prepared.credentials() {
        sink.emit(Event::Note {
            text: format!("the command ran as {} (uid {}, gid {}), the user who invoked sudo; --keep-root runs it as root", c.user, c.uid, c.gid),
        });
    }
    declare_sources(&sink);
    sampler.declare_source();
    // netlink's exits come after the memory is gone, and without taskstats (root) no record
    // gives a process's high-water mark at its exit.
    if started.kind == track::TrackerKind::Netlink && accounting.tracker_reads_ledger() {
        sampler.without_exit_marks();
    }
    accounting.declare(&sink, started.kind.name(), started.whole_ledger);
    let root = child.pid;
    // Time zero is the release: what ste did since the fork is its own set-up, not the
    // command's time. The sampler starts after it, so its samples run forward from zero.
    let waited_ns = clock.restart();
    accounting.before_release(
        &sink,
        root,
        child.started_ns + waited_ns,
        waited_ns,
        child.setup_io(),
    );
    // A signal that came during the set-up (Ctrl-C, a SIGTERM to ste) stops ste here, and so
    // does a release that fails (the waiting process was killed): the command is not run, and
    // the run's threads end as after any run, taking its cgroup, run directory and marks with
    // them.
    let interrupted = signals::arrived(&signal_thread);
    let not_run = match interrupted {
        Some(_) => None,
        None => crate::bus::phases::span("release", || child.release()).err(),
    };
    let released = interrupted.is_none() && not_run.is_none();
    COMMAND_RAN.store(released, std::sync::atomic::Ordering::Relaxed);
    if !released {
        child.cancel();
    }
    let sampler_role = Role::Sampler {
        page_flags: opts.maps_at_peak.is_some(),
    };
    // The command runs from here: a thread that cannot start costs what it measures, said,
    // not the run (125 is for a command that did not run).
    if released && let Err(e) = sampler.spawn(sampler_role) {
        sink.emit(Event::Note {
            text: format!(
                "ste could not start its sampling thread ({e}): the tree's memory was not sampled, and every figure read from samples is unknown"
            ),
        });
    }
    // The BPF maps used after the drop, where the kernel asks for CAP_BPF on every bpf()
    // call: the system-call counts (the session) and the ebpf reader's (its batching switch,
    // the SDT probes' counts).
    let ebpf = started.kind == track::TrackerKind::Ebpf;
    let bpf_maps = ebpf && privilege::bpf_maps_need_capability();
    let tracker_role = Role::Tracker { bpf_maps };
    limit_session(
        &sink,
        &accounting,
        bpf_maps && started.syscalls.is_some(),
        tracker_role,
        sampler_role,
    );

    let mut rec = Recorder::new();
    if let Some(r) = &recording {
        rec.set_tap(r.tap());
    }
    let mut wait = Waiting {
        root_gone_at: None,
        announced: false,
        linger: opts.linger,
    };
    let mut kills = [libc::SIGTERM, libc::SIGKILL].into_iter();
    let (end_ns, stopped_waiting) = loop {
        match event_loop(
            &mut rec,
            &mut rx,
            &mut out,
            opts,
            root,
            &mut accounting,
            &mut wait,
        ) {
            Ended::TreeDone(t_ns) => break (t_ns, None),
            Ended::StoppedWaiting(why) => {
                // --kill-lingering: SIGTERM, then SIGKILL, each followed by a grace period.
                if accounting.kills_lingering()
                    && let Some(signal) = kills.next()
                {
                    if let Some(e) = accounting.kill_lingering(&rec, signal) {
                        sink.emit(e);
                    }
                    wait.root_gone_at = Some(Instant::now());
                    wait.announced = true;
                    wait.linger = Some(KILL_GRACE);
                    continue;
                }
                break (clock.now_ns(), Some(why));
            }
        }
    };

    crate::bus::phases::span("command (release to tree done)", || ());
    signal_thread.stop();
    accounting.ask_to_stop();
    // The accounts thread's last drain first: its exit records' high-water marks (netlink as
    // root) reach the sampler before it stops, or the last process's peak would be missed
    // while the label said exact.
    crate::bus::phases::span("accounting stop", || accounting.stop());
    let info = crate::bus::phases::span("sampler stop", || sampler.stop());
    if let Some(p) = &peak_maps {
        p.finish();
    }
    if let Some(m) = &malloc {
        m.finish();
    }
    while let Ok(msg) = rx.try_recv() {
        match msg {
            Msg::Event(e) => {
                apply(&mut rec, &e, &mut out, opts, &mut accounting);
            }
            Msg::Events(v) => {
                for e in &v {
                    apply(&mut rec, e, &mut out, opts, &mut accounting);
                }
            }
            Msg::Tasks { t_ns, stats } => tasks(&mut rec, &mut accounting, t_ns, stats),
            _ => {}
        }
    }
    if !opts.text.quiet {
        out.execs_rest();
    }
    if !released {
        for left in accounting.close() {
            say(&format!("ste: cannot remove its cgroup directory {left}"));
        }
        if let Some(e) = not_run {
            return Err(e);
        }
        let signo = interrupted.unwrap_or(libc::SIGINT);
        say(&format!(
            "ste: interrupted by {} during its set-up: the command did not run",
            signal_name(signo)
        ));
        return Ok(128 + signo);
    }
    for event in crate::bus::phases::span("accounting finish", || accounting.finish()) {
        rec.apply(&Stamped {
            t_ns: end_ns,
            event,
        });
    }
    rec.apply(&Stamped {
        t_ns: end_ns,
        event: Event::SamplerDone {
            info: Box::new(info),
        },
    });
    if let Some(source) = &started.syscalls {
        rec.apply(&Stamped {
            t_ns: end_ns,
            event: Event::Syscalls {
                syscalls: Box::new(source.summary()),
            },
        });
    }
    let own = OwnUsage::since_start();
    rec.apply(&Stamped {
        t_ns: end_ns,
        event: Event::End {
            user_ns: own.children.0,
            sys_ns: own.children.1,
            ste_cpu_ns: own.me.0 + own.me.1,
            ste_max_rss_bytes: own.max_rss_bytes,
            stopped_waiting,
        },
    });
    let run = crate::bus::phases::span("recorder finish", || rec.finish());
    let recorded = recording.map(|r| (r.path().to_path_buf(), r.finish()));
    // One line per budget after the report, where the report goes.
    let budgets = crate::compare::budget::check_run(&opts.budgets, &run);
    let lines: Vec<&str> = budgets.iter().map(|b| b.line.as_str()).collect();
    // Every output is written whatever another's fate, and each one lost is said; the exit
    // status says so too (`OUTPUT_LOST`), for the report that could not be said.
    let mut lost: Vec<anyhow::Error> = Vec::new();
    if let Err(e) = crate::bus::phases::span("report", || out.summary(&run, opts, &lines)) {
        lost.push(e);
    }
    lost.extend(exports.write(&run, opts.style));
    // The group goes once the report is out; a directory left behind is said, not lost.
    for left in accounting.close() {
        say(&format!("ste: cannot remove its cgroup directory {left}"));
    }
    if let Some((path, Err(e))) = recorded {
        lost.push(anyhow::Error::new(e).context(format!(
            "writing the record {} (the command exited with status {})",
            path.display(),
            run.exit.ste_status()
        )));
    }
    for e in &lost {
        say(&format!("ste: {e:#}"));
    }
    let status = crate::compare::budget::status(run.exit.ste_status(), &budgets);
    // Not dropped: ste exits as soon as this returns, and the exit gives back its memory
    // whole; freeing the Run first (a few allocations per process, every argv) only made the
    // command's parent wait longer for ste's exit (bench/README.md).
    std::mem::forget(run);
    status.map(|s| lost_said(s, !lost.is_empty()))
}

/// Whether a command was released to run: an end of ste from here on loses a report, not a
/// run that never started (the allocator's last words, `main.rs`).
static COMMAND_RAN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether this ste released a command to run.
pub fn command_ran() -> bool {
    COMMAND_RAN.load(std::sync::atomic::Ordering::Relaxed)
}

/// The exit status when the command ran but an output of ste's was lost (a file that could
/// not be written, or stderr with the report on it) while the command succeeded: ste said so
/// on stderr where it could, and says so here where it could not. The command's own failure
/// wins, as over an exceeded budget; 125 stays for a command that did not run.
pub const OUTPUT_LOST: i32 = 121;

/// `status`, or [`OUTPUT_LOST`] in its place when it is 0 and an output was `lost`.
fn lost_said(status: i32, lost: bool) -> i32 {
    if lost && status == 0 {
        OUTPUT_LOST
    } else {
        status
    }
}

/// A line of ste's own on stderr, never a panic (`output::say`).
fn say(line: &str) {
    crate::output::say(line);
}

/// Drops what the session thread no longer needs, now that every thread that needs more has
/// started, and says what ste kept (only when it had capabilities to drop).
fn limit_session(
    sink: &Sink,
    accounting: &account::Session,
    bpf_maps: bool,
    tracker: Role,
    sampler: Role,
) {
    let (cgroup, restores_delays) = accounting.privileged_end();
    let role = Role::Session {
        cgroup,
        restores_delays,
        bpf_maps,
    };
    match privilege::limit(role) {
        Ok(Some(_)) => sink.emit(Event::Note {
            text: privilege::summary(role, tracker, sampler),
        }),
        Ok(None) => {}
        Err(e) => sink.emit(Event::Note {
            text: format!(
                "ste could not drop the capabilities its session thread does not need: {e}"
            ),
        }),
    }
}

fn declare_sources(sink: &Sink) {
    let rusage = "getrusage(RUSAGE_CHILDREN) of ste, a subreaper, less its value when ste started: every reaped process of the tree, orphans included";
    // Exact for every process and its last thread; the kernel adds the runtime of a thread
    // that ends before its process as it releases the thread, before its last switch.
    let short = "short by the rest of the last time slice of each thread that ends before its process (the kernel adds such a thread's runtime to its process before the thread's last switch); single-threaded processes lose nothing";
    for figure in ["user_ns", "sys_ns"] {
        sink.emit(Event::Source {
            figure: figure.into(),
            source: Source::sampled(rusage, short),
        });
    }
    sink.emit(Event::Source {
        figure: "wall_ns".into(),
        source: Source::exact(
            "CLOCK_MONOTONIC from the launch to the end of the last process of the tree",
        ),
    });
}

enum Ended {
    /// Every process of the tree ended; the last at this run time.
    TreeDone(u64),
    /// ste stopped waiting for lingering descendants, for this reason.
    StoppedWaiting(String),
}

/// Receives events until the tree is over, or until ste stops waiting for lingering
/// descendants.
fn event_loop(
    rec: &mut Recorder,
    rx: &mut crate::bus::mailbox::Receiver<Msg>,
    out: &mut Output,
    opts: &RunOptions,
    root: i32,
    acc: &mut account::Session,
    wait: &mut Waiting,
) -> Ended {
    loop {
        let Waiting {
            root_gone_at,
            announced,
            linger,
        } = *wait;
        let timeout = match root_gone_at {
            None => Duration::from_secs(1),
            Some(t0) => {
                let mut next = t0
                    + if announced {
                        Duration::from_secs(3600)
                    } else {
                        ANNOUNCE_AFTER
                    };
                if let Some(l) = linger {
                    next = next.min(t0 + l);
                }
                next.saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(1))
            }
        };
        match rx.recv_timeout(timeout) {
            Ok(Msg::Event(e)) => {
                if apply(rec, &e, out, opts, acc) && wait.root_gone_at.is_none() {
                    wait.root_gone_at = Some(Instant::now());
                }
            }
            Ok(Msg::Events(v)) => {
                for e in &v {
                    if apply(rec, e, out, opts, acc) && wait.root_gone_at.is_none() {
                        wait.root_gone_at = Some(Instant::now());
                    }
                }
            }
            Ok(Msg::Tasks { t_ns, stats }) => tasks(rec, acc, t_ns, stats),
            Ok(Msg::Signal {
                signo,
                from_terminal,
            }) => {
                if root_gone_at.is_some() {
                    return Ended::StoppedWaiting(format!("interrupted by {}", signal_name(signo)));
                }
                // A signal from the terminal reached the command with ste's process group;
                // one sent to ste alone is passed on.
                if !from_terminal {
                    // The root is not reaped yet, so its pid is still its own.
                    let _ = crate::kernel::calls::kill(root, signo);
                }
            }
            Ok(Msg::TrackerDone { t_ns, error }) => {
                if let Some(e) = error {
                    rec.apply(&Stamped {
                        t_ns,
                        event: Event::Note {
                            text: format!("the tracker stopped early: {e}"),
                        },
                    });
                }
                return Ended::TreeDone(t_ns);
            }
            Err(RecvTimeoutError::Timeout) => {
                // Lines held behind a pending exec past their bound go out without an event.
                out.execs_due();
                let Some(t0) = root_gone_at else { continue };
                let live = rec.live_processes();
                if live.is_empty() {
                    continue;
                }
                if let Some(l) = linger
                    && t0.elapsed() >= l
                {
                    return Ended::StoppedWaiting(format!(
                        "--linger {}",
                        humantime::format_duration(l)
                    ));
                }
                if !announced && t0.elapsed() >= ANNOUNCE_AFTER {
                    wait.announced = true;
                    let names: Vec<String> = live
                        .iter()
                        .take(8)
                        .map(|(pid, p)| format!("{pid} ({})", crate::report::names::program(p)))
                        .collect();
                    let more = if live.len() > 8 {
                        format!(" and {} more", live.len() - 8)
                    } else {
                        String::new()
                    };
                    say(&format!(
                        "ste: the command exited; waiting for {} descendant{} still running: {}{more} (Ctrl-C stops waiting, --linger bounds it)",
                        live.len(),
                        if live.len() == 1 { "" } else { "s" },
                        names.join(", ")
                    ));
                }
            }
            Err(RecvTimeoutError::Disconnected) => return Ended::TreeDone(rec_clock_fallback(rec)),
        }
    }
}

/// The channel closed without a tracker saying it was done (cannot happen while ste holds a
/// sink; kept total): end at the last process end the ledger knows.
fn rec_clock_fallback(rec: &Recorder) -> u64 {
    rec.last_event_ns()
}

/// Folds one event into the ledger, printing an exec line at once, and applies the accounting
/// records it lets the matcher place. Returns whether the event ends the root process (its
/// reaping, or its failure to start).
fn apply(
    rec: &mut Recorder,
    e: &Stamped,
    out: &mut Output,
    opts: &RunOptions,
    acc: &mut account::Session,
) -> bool {
    let applied = rec.apply(e);
    if !opts.text.quiet {
        out.exec(applied, opts.style);
    }
    for event in acc.newly_matched(rec) {
        rec.apply(&Stamped {
            t_ns: e.t_ns,
            event,
        });
    }
    matches!(e.event, Event::RootExit { .. } | Event::LaunchFailed { .. })
}

/// A taskstats record: applied when it is one of the tree's.
#[allow(
    clippy::vec_box,
    reason = "each record moves on alone into the matcher, which parks the box"
)]
fn tasks(
    rec: &mut Recorder,
    acc: &mut account::Session,
    t_ns: u64,
    stats: Vec<Box<crate::kernel::taskstats::TaskStats>>,
) {
    for stats in stats {
        if let Some(event) = acc.on_task(rec, t_ns, stats) {
            rec.apply(&Stamped { t_ns, event });
        }
    }
}
