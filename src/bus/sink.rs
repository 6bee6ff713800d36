//! The run's clock and the channel every source writes to.
//!
//! Owns time-stamping (nanoseconds of `CLOCK_MONOTONIC` since launch, the clock the proc
//! connector and BPF also use) and the message type the session loop receives. Sources hold a
//! `Sink`; only the session holds the receiving end (`bus::mailbox`, which says which messages
//! are urgent).

use crate::bus::event::{Event, Stamped};
use crate::bus::mailbox::{Receiver, Sender, channel};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// `CLOCK_MONOTONIC` in nanoseconds.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CPU time of the calling thread in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

use crate::kernel::calls::clock_ns;

/// Time zero of a run: the moment the command is released to exec (see [`Clock::restart`]).
/// Shared by every copy, so a source that took its copy before the release still stamps
/// against the same zero.
#[derive(Clone, Debug)]
pub struct Clock {
    t0_monotonic_ns: Arc<AtomicU64>,
}

impl Clock {
    pub fn start() -> Self {
        Self::start_at(monotonic_ns())
    }

    /// A clock whose time zero is the `CLOCK_MONOTONIC` instant `t0_monotonic_ns`.
    pub fn start_at(t0_monotonic_ns: u64) -> Self {
        Clock {
            t0_monotonic_ns: Arc::new(AtomicU64::new(t0_monotonic_ns)),
        }
    }

    /// Moves time zero to now, and returns how far it moved. The session calls it as it
    /// releases the command, so ste's own set-up between the fork and the release (loading
    /// BPF, a cgroup, taskstats) is not counted as the command's wall time. Stamps taken
    /// before it saturate to 0.
    pub fn restart(&self) -> u64 {
        let now = monotonic_ns();
        now.saturating_sub(self.t0_monotonic_ns.swap(now, Ordering::AcqRel))
    }

    pub fn now_ns(&self) -> u64 {
        self.from_monotonic(monotonic_ns())
    }

    /// Converts a kernel `CLOCK_MONOTONIC` timestamp to run time (0 if it predates launch).
    pub fn from_monotonic(&self, ns: u64) -> u64 {
        ns.saturating_sub(self.t0_monotonic_ns.load(Ordering::Acquire))
    }
}

/// What the session loop receives.
#[derive(Debug)]
pub enum Msg {
    Event(Stamped),
    /// Several events, in order (see [`Batch`]).
    Events(Vec<Stamped>),
    /// A signal ste received; `from_terminal` when the tty driver sent it to the whole
    /// foreground process group (so the command received it too).
    Signal {
        signo: i32,
        from_terminal: bool,
    },
    /// A tracker has nothing more to report: every process it followed has been reaped, the
    /// last of them at `t_ns`.
    TrackerDone {
        t_ns: u64,
        error: Option<String>,
    },
    /// Taskstats exit records of threads on the machine, received at `t_ns` (one drain of the
    /// listener's socket: a message per record woke the session once per exit); the session
    /// matches them to the tree (see `account::matcher`).
    Tasks {
        t_ns: u64,
        stats: Vec<Box<crate::kernel::taskstats::TaskStats>>,
    },
}

/// A source's handle on the run's channel.
#[derive(Clone)]
pub struct Sink {
    tx: Sender<Msg>,
    clock: Clock,
}

impl Sink {
    pub fn new(clock: Clock) -> (Sink, Receiver<Msg>) {
        let (tx, rx) = channel();
        (Sink { tx, clock }, rx)
    }

    pub fn clock(&self) -> Clock {
        self.clock.clone()
    }

    /// Run time now (without cloning the clock: trackers and the sampler ask at every event).
    pub fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    /// Emits an event stamped now.
    pub fn emit(&self, event: Event) {
        self.emit_at(self.clock.now_ns(), event);
    }

    /// Emits an event stamped with a run time the source measured itself.
    pub fn emit_at(&self, t_ns: u64, event: Event) {
        self.tx.send(Msg::Event(Stamped { t_ns, event }), false);
    }

    /// Sends a message; the end of a tracker and a signal wake the session at once, anything
    /// else waits for its next look (see `bus::mailbox`). A tracker's batch is sent by its
    /// [`Batch`], which says whether it wakes the session.
    pub fn send(&self, msg: Msg) {
        let urgent = matches!(msg, Msg::TrackerDone { .. } | Msg::Signal { .. });
        self.tx.send(msg, urgent);
    }
}

/// A source's buffer of events: each is stamped when it happens, and they are sent together
/// when the source is about to block (or the buffer is full), so the session thread wakes once
/// per burst instead of once per event — in a fork storm that wake-up is most of the cost.
pub struct Batch {
    sink: Sink,
    buf: Vec<Stamped>,
    /// Its sends wake the session at once (see [`Batch::unhurried`]).
    urgent: bool,
}

/// Events held at most before a batch is sent anyway, to bound the live view's delay.
const BATCH_MAX: usize = 256;

impl Batch {
    /// A batch whose sends wake the session at once. The batches come at most every 10–20 ms;
    /// letting them wait for the session's nap too made the netlink tracker read many more
    /// argv too late (bench/README.md, issue 18).
    pub fn new(sink: Sink) -> Self {
        Batch {
            sink,
            buf: Vec::with_capacity(BATCH_MAX),
            urgent: true,
        }
    }

    /// A batch whose sends wait for the session's next look (the mailbox's nap, 20 ms at
    /// most in a storm), for a tracker that needs nothing of the session in time: the ebpf
    /// reader has each argv in its record. Woken at each of its drains, the session woke twice
    /// as often as its nap on a fork loop.
    pub fn unhurried(sink: Sink) -> Self {
        Batch {
            urgent: false,
            ..Batch::new(sink)
        }
    }

    pub fn sink(&self) -> &Sink {
        &self.sink
    }

    pub fn emit(&mut self, event: Event) {
        let t_ns = self.sink.clock.now_ns();
        self.emit_at(t_ns, event);
    }

    pub fn emit_at(&mut self, t_ns: u64, event: Event) {
        self.buf.push(Stamped { t_ns, event });
        if self.buf.len() >= BATCH_MAX {
            self.flush();
        }
    }

    /// Sends what is buffered.
    pub fn flush(&mut self) {
        if !self.buf.is_empty() {
            // A vector of the events' own size goes out, the buffer stays: a drain's batch is
            // a few dozen events, and a fresh buffer of `BATCH_MAX` for each was a large
            // allocation, made in the tracker's thread and freed in the session's.
            let events: Vec<Stamped> = self.buf.drain(..).collect();
            self.sink.tx.send(Msg::Events(events), self.urgent);
        }
    }
}
