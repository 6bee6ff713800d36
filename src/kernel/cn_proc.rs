//! The proc connector (`NETLINK_CONNECTOR`, `CN_IDX_PROC`): a socket that receives the kernel's
//! fork/exec/exit events for every process on the machine, and the parser of its messages.
//!
//! Written by hand because no maintained crate covers it: the `cnproc` crate has neither the
//! 6.6+ event filter nor overrun handling, and the layout is three small C structs
//! (`nlmsghdr`, `cn_msg`, `proc_event`; include/uapi/linux/{netlink,connector,cn_proc}.h).
//! Knows nothing of process trees: it yields every event with the kernel's sequence numbers
//! so the caller can count what was lost.
//!
//! With the 6.6+ filter a listener may split the events over two sockets (exec events on one,
//! fork and exit on the other, which need not wake it); [`Merged`] hands the datagrams of both
//! back in the kernel's order (see there for why its timestamps and drains make it so).

use crate::kernel::bytes::{i32_at, u32_at, u64_at};
use std::collections::VecDeque;
use std::io;
use std::os::fd::OwnedFd;
use std::time::Duration;

const CN_IDX_PROC: u32 = 1;
const CN_VAL_PROC: u32 = 1;
const PROC_CN_MCAST_LISTEN: u32 = 1;

const PROC_EVENT_NONE: u32 = 0;
const PROC_EVENT_FORK: u32 = 1;
const PROC_EVENT_EXEC: u32 = 2;
const PROC_EVENT_EXIT: u32 = 0x8000_0000;

const NLMSG_HDRLEN: usize = 16;
const CN_MSG_LEN: usize = 20;
const EVENT_OFFSET: usize = NLMSG_HDRLEN + CN_MSG_LEN;

/// One proc connector event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcEvent {
    /// The connector's per-CPU sequence number (`cn_msg.seq`) and the CPU that sent it.
    pub seq: u32,
    pub cpu: u32,
    /// `CLOCK_MONOTONIC` nanoseconds.
    pub timestamp_ns: u64,
    pub kind: ProcEventKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcEventKind {
    /// `parent_*` is the new task's *real parent* (for a new thread, the parent of its
    /// process; with `CLONE_PARENT`, the creator's parent), not the creating thread.
    Fork {
        parent_pid: i32,
        parent_tgid: i32,
        child_pid: i32,
        child_tgid: i32,
    },
    Exec {
        pid: i32,
        tgid: i32,
    },
    /// `exit_code` is in wait-status layout.
    Exit {
        pid: i32,
        tgid: i32,
        exit_code: u32,
    },
    /// The reply to a subscription, with its error (0 or an errno).
    Ack {
        err: u32,
    },
    /// Any other event type (uid, gid, sid, ptrace, comm, coredump).
    Other(u32),
}

/// Parses one netlink datagram from the connector. Returns `None` for anything that is not a
/// well-formed proc connector message.
pub fn parse(msg: &[u8]) -> Option<ProcEvent> {
    let nl_len = u32_at(msg, 0)? as usize;
    if nl_len < EVENT_OFFSET || nl_len > msg.len() {
        return None;
    }
    let (idx, val) = (u32_at(msg, NLMSG_HDRLEN)?, u32_at(msg, NLMSG_HDRLEN + 4)?);
    if idx != CN_IDX_PROC || val != CN_VAL_PROC {
        return None;
    }
    let seq = u32_at(msg, NLMSG_HDRLEN + 8)?;
    let ev = &msg[EVENT_OFFSET..nl_len];
    let what = u32_at(ev, 0)?;
    let cpu = u32_at(ev, 4)?;
    let timestamp_ns = u64_at(ev, 8)?;
    const D: usize = 16;
    let kind = match what {
        PROC_EVENT_FORK => ProcEventKind::Fork {
            parent_pid: i32_at(ev, D)?,
            parent_tgid: i32_at(ev, D + 4)?,
            child_pid: i32_at(ev, D + 8)?,
            child_tgid: i32_at(ev, D + 12)?,
        },
        PROC_EVENT_EXEC => ProcEventKind::Exec {
            pid: i32_at(ev, D)?,
            tgid: i32_at(ev, D + 4)?,
        },
        PROC_EVENT_EXIT => ProcEventKind::Exit {
            pid: i32_at(ev, D)?,
            tgid: i32_at(ev, D + 4)?,
            exit_code: u32_at(ev, D + 8)?,
        },
        PROC_EVENT_NONE => ProcEventKind::Ack {
            err: u32_at(ev, D)?,
        },
        other => ProcEventKind::Other(other),
    };
    Some(ProcEvent {
        seq,
        cpu,
        timestamp_ns,
        kind,
    })
}

/// The event types a filtered socket asks for (6.6+ `struct proc_input`'s `event_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Events(u32);

impl Events {
    pub const FORK_EXEC_EXIT: Events = Events(PROC_EVENT_FORK | PROC_EVENT_EXEC | PROC_EVENT_EXIT);
    pub const EXEC: Events = Events(PROC_EVENT_EXEC);
    pub const FORK_EXIT: Events = Events(PROC_EVENT_FORK | PROC_EVENT_EXIT);

    /// Whether an event of this kind was asked for (acknowledgements and other kinds pass:
    /// they are the caller's to ignore).
    fn wants(self, kind: &ProcEventKind) -> bool {
        let what = match kind {
            ProcEventKind::Fork { .. } => PROC_EVENT_FORK,
            ProcEventKind::Exec { .. } => PROC_EVENT_EXEC,
            ProcEventKind::Exit { .. } => PROC_EVENT_EXIT,
            ProcEventKind::Ack { .. } | ProcEventKind::Other(_) => return true,
        };
        self.0 & what != 0
    }
}

/// What a receive produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    Event(ProcEvent),
    /// The socket's receive buffer overflowed and the kernel dropped messages (`ENOBUFS`).
    Overrun,
    /// Nothing arrived within the timeout.
    Timeout,
    /// A datagram that was not a proc event.
    Ignored,
}

/// A subscribed proc connector socket.
pub struct Connector {
    fd: OwnedFd,
    buf: Vec<u8>,
    /// The events asked for, when the kernel filters them for this socket (6.6+).
    events: Option<Events>,
    /// Whether the kernel filters events for this socket (6.6+).
    pub filtered: bool,
    /// The receive buffer the kernel granted, in bytes.
    pub rcvbuf_bytes: usize,
}

impl Connector {
    /// Opens and subscribes. `rcvbuf_bytes` is forced past `rmem_max` when ste has
    /// CAP_NET_ADMIN, else capped by it. `filter` asks for fork/exec/exit events only.
    pub fn open(rcvbuf_bytes: usize, filter: bool) -> io::Result<Connector> {
        Connector::open_for(rcvbuf_bytes, filter.then_some(Events::FORK_EXEC_EXIT))
    }

    /// As [`Connector::open`], asking the kernel's filter for `events` only (`None`: every
    /// event, unfiltered). A filtered socket also drops fork, exec and exit events it did not
    /// ask for, should the kernel deliver them (a listener it did not let set its filter).
    pub fn open_for(rcvbuf_bytes: usize, events: Option<Events>) -> io::Result<Connector> {
        let (fd, rcvbuf_bytes) = super::netlink::open(
            libc::SOCK_DGRAM,
            libc::NETLINK_CONNECTOR,
            CN_IDX_PROC,
            rcvbuf_bytes,
        )?;
        let mut c = Connector {
            fd,
            buf: vec![0; 8192],
            events: None,
            filtered: false,
            rcvbuf_bytes,
        };
        c.subscribe(events)?;
        Ok(c)
    }

    /// Sends `PROC_CN_MCAST_LISTEN`, with the 6.6+ `struct proc_input` event filter when asked
    /// (older kernels ignore a message of that size, so the caller decides by kernel version).
    fn subscribe(&mut self, events: Option<Events>) -> io::Result<()> {
        let mut payload = PROC_CN_MCAST_LISTEN.to_ne_bytes().to_vec();
        if let Some(Events(mask)) = events {
            payload.extend(mask.to_ne_bytes());
        }
        let total = NLMSG_HDRLEN + CN_MSG_LEN + payload.len();
        let mut msg = Vec::with_capacity(total);
        msg.extend((total as u32).to_ne_bytes());
        msg.extend((libc::NLMSG_DONE as u16).to_ne_bytes());
        msg.extend(0u16.to_ne_bytes()); // flags
        msg.extend(0u32.to_ne_bytes()); // seq
        // SAFETY: getpid cannot fail.
        msg.extend((unsafe { libc::getpid() } as u32).to_ne_bytes());
        msg.extend(CN_IDX_PROC.to_ne_bytes());
        msg.extend(CN_VAL_PROC.to_ne_bytes());
        msg.extend(0u32.to_ne_bytes()); // seq
        msg.extend(0u32.to_ne_bytes()); // ack
        msg.extend((payload.len() as u16).to_ne_bytes());
        msg.extend(0u16.to_ne_bytes()); // flags
        msg.extend(payload);
        super::netlink::send(&self.fd, &msg)?;
        self.events = events;
        self.filtered = events.is_some();
        Ok(())
    }

    /// Waits up to `timeout` for one datagram, or until `wake` (any readable descriptor, such
    /// as an eventfd) becomes readable, which returns `Timeout` at once.
    pub fn recv(&mut self, timeout: Duration, wake: Option<&OwnedFd>) -> io::Result<Received> {
        if !super::netlink::wait_readable(&self.fd, timeout, wake)? {
            return Ok(Received::Timeout);
        }
        self.recv_now()
    }

    /// Waits up to `timeout` for a datagram to arrive, without receiving it; true if one is
    /// waiting.
    pub fn wait(&self, timeout: Duration) -> io::Result<bool> {
        super::netlink::wait_readable(&self.fd, timeout, None)
    }

    /// Receives one datagram without blocking (`Timeout` when the queue is empty).
    pub fn recv_now(&mut self) -> io::Result<Received> {
        let n = match super::netlink::recv_now(&self.fd, &mut self.buf) {
            Ok(Some(n)) => n,
            Ok(None) => return Ok(Received::Timeout),
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => return Ok(Received::Overrun),
            Err(e) => return Err(e),
        };
        Ok(match parse(&self.buf[..n]) {
            Some(ev) if self.events.is_none_or(|e| e.wants(&ev.kind)) => Received::Event(ev),
            _ => Received::Ignored,
        })
    }
}

/// Whether the running kernel has the proc connector event filter (Linux 6.6).
pub fn kernel_has_filter(release: &str) -> bool {
    super::release::Version::parse(release).cn_proc_filter_and_unprivileged()
}

/// Unsigned distance from `last` to `seq` minus one: how many sequence numbers were skipped.
pub fn seq_gap(last: u32, seq: u32) -> u32 {
    seq.wrapping_sub(last).wrapping_sub(1)
}

/// Which of a listener's two sockets a datagram came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The socket the listener waits on: exec events (or every event, when it has one socket).
    Waited,
    /// Fork and exit events, drained without waiting.
    Drained,
}

impl Side {
    fn index(self) -> usize {
        self as usize
    }

    fn other(self) -> Side {
        match self {
            Side::Waited => Side::Drained,
            Side::Drained => Side::Waited,
        }
    }
}

/// What [`Merged::pop`] says to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// The next datagram in the kernel's order.
    Ready(Received, Side),
    /// The next one is not known yet: drain this socket (until empty), then ask again.
    Drain(Side),
    /// Nothing is queued.
    Empty,
}

/// One datagram taken, with how many times the other socket had been drained by then.
#[derive(Debug)]
struct Taken {
    other_drains: u64,
    received: Received,
}

/// The datagrams taken from a listener's sockets and not yet handled, handed out in the
/// kernel's order.
///
/// The order: the proc connector stamps each event with `ktime_get_ns` as it sends it, the
/// same clock on every CPU, so the events of one task, which it sends one after another, carry
/// increasing stamps; and a new task's fork event is sent in `copy_process`, before the task
/// can run, so it precedes the task's own. Two queues are merged by stamp, each kept in its
/// own order; equal stamps put a fork before an exec before an exit.
///
/// A stamp orders only what has been taken, so an event is handed out only once the other
/// socket has been drained since it was taken: everything the other socket got before it
/// (an exec socket: the fork of the process that exec'd; a fork-and-exit socket: the exec
/// that came before an exit) is then queued here too, and sorts before it. `pop` asks for
/// that drain; it finds a queue empty at no cost but a system call. With one socket, no
/// drain is needed: its queue is the kernel's order.
#[derive(Debug)]
pub struct Merged {
    queues: [VecDeque<Taken>; 2],
    /// How many times each socket has been drained.
    drains: [u64; 2],
    two: bool,
}

impl Merged {
    /// For a listener with two sockets, or one (`Side::Waited` only).
    pub fn new(two: bool) -> Merged {
        Merged {
            queues: [VecDeque::new(), VecDeque::new()],
            drains: [0, 0],
            two,
        }
    }

    /// Queues a datagram just taken from `side` (nothing for `Timeout` and `Ignored`).
    pub fn push(&mut self, side: Side, received: Received) {
        if matches!(received, Received::Event(_) | Received::Overrun) {
            self.queues[side.index()].push_back(Taken {
                other_drains: self.drains[side.other().index()],
                received,
            });
        }
    }

    /// `side` has just been drained until empty.
    pub fn drained(&mut self, side: Side) {
        self.drains[side.index()] += 1;
    }

    /// Hands out the next datagram in the kernel's order, or says which socket to drain
    /// first. An overrun is handed out as soon as it heads its queue: what follows it is
    /// the caller's to rebuild.
    pub fn pop(&mut self) -> Next {
        let side = match (self.queues[0].front(), self.queues[1].front()) {
            (None, None) => return Next::Empty,
            (Some(_), None) => Side::Waited,
            (None, Some(_)) => Side::Drained,
            (Some(w), Some(d)) if before(&d.received, &w.received) => Side::Drained,
            (Some(_), Some(_)) => Side::Waited,
        };
        let queue = &mut self.queues[side.index()];
        let head = &queue[0];
        let known = !self.two
            || head.received == Received::Overrun
            || head.other_drains < self.drains[side.other().index()];
        if !known {
            return Next::Drain(side.other());
        }
        match queue.pop_front() {
            Some(t) => Next::Ready(t.received, side),
            None => Next::Empty,
        }
    }
}

/// Whether `a` comes before `b` in the kernel's order (see [`Merged`]); an overrun first.
fn before(a: &Received, b: &Received) -> bool {
    fn key(r: &Received) -> (u64, u8) {
        match r {
            Received::Event(ev) => (
                ev.timestamp_ns,
                match ev.kind {
                    ProcEventKind::Fork { .. } => 0,
                    ProcEventKind::Exec { .. } => 1,
                    ProcEventKind::Exit { .. } => 2,
                    ProcEventKind::Ack { .. } | ProcEventKind::Other(_) => 1,
                },
            ),
            _ => (0, 0),
        }
    }
    key(a) < key(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(seq: u32, what: u32, data: &[u32]) -> Vec<u8> {
        let mut ev = Vec::new();
        ev.extend(what.to_ne_bytes());
        ev.extend(1u32.to_ne_bytes()); // cpu
        ev.extend(123_456_789u64.to_ne_bytes());
        for d in data {
            ev.extend(d.to_ne_bytes());
        }
        let total = (EVENT_OFFSET + ev.len()) as u32;
        let mut m = Vec::new();
        m.extend(total.to_ne_bytes());
        m.extend([0u8; 12]);
        m.extend(CN_IDX_PROC.to_ne_bytes());
        m.extend(CN_VAL_PROC.to_ne_bytes());
        m.extend(seq.to_ne_bytes());
        m.extend(0u32.to_ne_bytes());
        m.extend((ev.len() as u16).to_ne_bytes());
        m.extend(0u16.to_ne_bytes());
        m.extend(ev);
        m
    }

    #[test]
    fn parses_fork_exec_exit() {
        let f = parse(&message(7, PROC_EVENT_FORK, &[10, 10, 11, 11])).unwrap();
        assert_eq!(f.seq, 7);
        assert_eq!(f.cpu, 1);
        assert_eq!(f.timestamp_ns, 123_456_789);
        assert_eq!(
            f.kind,
            ProcEventKind::Fork {
                parent_pid: 10,
                parent_tgid: 10,
                child_pid: 11,
                child_tgid: 11
            }
        );
        let e = parse(&message(8, PROC_EVENT_EXEC, &[11, 11])).unwrap();
        assert_eq!(e.kind, ProcEventKind::Exec { pid: 11, tgid: 11 });
        let x = parse(&message(9, PROC_EVENT_EXIT, &[11, 11, 3 << 8, 17, 10, 10])).unwrap();
        assert_eq!(
            x.kind,
            ProcEventKind::Exit {
                pid: 11,
                tgid: 11,
                exit_code: 3 << 8
            }
        );
        let a = parse(&message(0, PROC_EVENT_NONE, &[1])).unwrap();
        assert_eq!(a.kind, ProcEventKind::Ack { err: 1 });
    }

    #[test]
    fn rejects_truncated_and_foreign_messages() {
        let m = message(7, PROC_EVENT_FORK, &[10, 10, 11, 11]);
        assert_eq!(parse(&m[..20]), None);
        let mut other = m.clone();
        other[NLMSG_HDRLEN] = 9;
        assert_eq!(parse(&other), None);
    }

    #[test]
    fn filter_by_kernel_version_and_gaps() {
        assert!(kernel_has_filter("6.18.44-fc-v595"));
        assert!(kernel_has_filter("6.6.0"));
        assert!(!kernel_has_filter("6.1.0-27-amd64"));
        assert!(!kernel_has_filter("5.15.0"));
        assert_eq!(seq_gap(4, 5), 0);
        assert_eq!(seq_gap(4, 8), 3);
        assert_eq!(seq_gap(u32::MAX, 0), 0);
    }

    fn event(ts: u64, kind: ProcEventKind) -> Received {
        Received::Event(ProcEvent {
            seq: 0,
            cpu: 0,
            timestamp_ns: ts,
            kind,
        })
    }

    fn fork(ts: u64, child: i32) -> Received {
        event(
            ts,
            ProcEventKind::Fork {
                parent_pid: 1,
                parent_tgid: 1,
                child_pid: child,
                child_tgid: child,
            },
        )
    }

    fn exec(ts: u64, pid: i32) -> Received {
        event(ts, ProcEventKind::Exec { pid, tgid: pid })
    }

    fn exit(ts: u64, pid: i32) -> Received {
        event(
            ts,
            ProcEventKind::Exit {
                pid,
                tgid: pid,
                exit_code: 0,
            },
        )
    }

    /// Hands out everything, draining as asked; the drains asked for are appended to `drains`.
    fn all(m: &mut Merged, drains: &mut Vec<Side>) -> Vec<(Received, Side)> {
        let mut out = Vec::new();
        loop {
            match m.pop() {
                Next::Ready(r, side) => out.push((r, side)),
                Next::Drain(side) => {
                    drains.push(side);
                    m.drained(side);
                }
                Next::Empty => return out,
            }
        }
    }

    /// Two processes forked, exec'd and ended, their events taken from the two sockets in
    /// the order a listener takes them; stamps interleave, and 30 is shared by a fork and an
    /// exec, 50 by an exec and an exit: handed out by stamp, fork before exec before exit.
    #[test]
    fn two_queues_merge_in_the_kernels_order() {
        let mut m = Merged::new(true);
        for r in [fork(10, 2), fork(30, 3), exit(45, 2), exit(50, 3)] {
            m.push(Side::Drained, r);
        }
        m.drained(Side::Drained);
        for r in [exec(20, 2), exec(30, 3), exec(50, 3)] {
            m.push(Side::Waited, r);
        }
        m.drained(Side::Waited);
        let mut drains = Vec::new();
        let got = all(&mut m, &mut drains);
        let want = [
            (fork(10, 2), Side::Drained),
            (exec(20, 2), Side::Waited),
            (fork(30, 3), Side::Drained),
            (exec(30, 3), Side::Waited),
            (exit(45, 2), Side::Drained),
            (exec(50, 3), Side::Waited),
            (exit(50, 3), Side::Drained),
        ];
        assert_eq!(got, want);
        // The exec socket was drained after the fork-and-exit one was; its execs still
        // need a drain of the fork-and-exit socket after they were taken.
        assert_eq!(drains, [Side::Drained]);
    }

    /// An exec is not handed out before the fork-and-exit socket was drained after it was
    /// taken (its fork may be there), and a fork or exit not before the exec socket was
    /// (the exec that came before an exit may be there); a drain that brings an earlier
    /// event changes what comes first.
    #[test]
    fn an_event_waits_for_a_drain_of_the_other_socket() {
        let mut m = Merged::new(true);
        m.push(Side::Waited, exec(20, 2));
        assert_eq!(m.pop(), Next::Drain(Side::Drained));
        m.push(Side::Drained, fork(10, 2));
        m.push(Side::Drained, exit(40, 2));
        m.drained(Side::Drained);
        // The fork was taken before any drain of the exec socket.
        assert_eq!(m.pop(), Next::Drain(Side::Waited));
        m.drained(Side::Waited);
        assert_eq!(m.pop(), Next::Ready(fork(10, 2), Side::Drained));
        assert_eq!(m.pop(), Next::Ready(exec(20, 2), Side::Waited));
        assert_eq!(m.pop(), Next::Ready(exit(40, 2), Side::Drained));
        assert_eq!(m.pop(), Next::Empty);
        // An exit taken after the last drain of the exec socket waits for the next one.
        m.push(Side::Drained, exit(60, 3));
        assert_eq!(m.pop(), Next::Drain(Side::Waited));
        m.push(Side::Waited, exec(55, 3));
        m.drained(Side::Waited);
        assert_eq!(m.pop(), Next::Drain(Side::Drained));
        m.drained(Side::Drained);
        assert_eq!(m.pop(), Next::Ready(exec(55, 3), Side::Waited));
        assert_eq!(m.pop(), Next::Ready(exit(60, 3), Side::Drained));
    }

    /// Each queue keeps its own order even where its stamps do not (an event stamped, then
    /// sent after a later one); an overrun is handed out as soon as it heads its queue; one
    /// socket needs no drain.
    #[test]
    fn queues_keep_their_order_and_an_overrun_comes_at_once() {
        let mut m = Merged::new(true);
        m.push(Side::Drained, exit(40, 2));
        m.push(Side::Drained, exit(35, 3));
        m.push(Side::Drained, Received::Overrun);
        m.push(Side::Drained, exit(90, 4));
        m.drained(Side::Drained);
        m.push(Side::Waited, exec(38, 5));
        m.push(Side::Waited, exec(80, 6));
        m.drained(Side::Waited);
        let got: Vec<Received> = all(&mut m, &mut Vec::new())
            .into_iter()
            .map(|(r, _)| r)
            .collect();
        assert_eq!(
            got,
            [
                exec(38, 5),
                exit(40, 2),
                exit(35, 3),
                Received::Overrun,
                exec(80, 6),
                exit(90, 4)
            ]
        );
        let mut one = Merged::new(false);
        one.push(Side::Waited, exit(40, 2));
        one.push(Side::Waited, Received::Ignored);
        one.push(Side::Waited, fork(10, 3));
        let mut drains = Vec::new();
        let got = all(&mut one, &mut drains);
        assert_eq!(
            got,
            [(exit(40, 2), Side::Waited), (fork(10, 3), Side::Waited)]
        );
        assert!(drains.is_empty());
    }

    #[test]
    fn a_filtered_socket_keeps_only_the_kinds_it_asked_for() {
        let kinds = [
            ProcEventKind::Fork {
                parent_pid: 1,
                parent_tgid: 1,
                child_pid: 2,
                child_tgid: 2,
            },
            ProcEventKind::Exec { pid: 2, tgid: 2 },
            ProcEventKind::Exit {
                pid: 2,
                tgid: 2,
                exit_code: 0,
            },
        ];
        let wanted = |e: Events| kinds.iter().map(|k| e.wants(k)).collect::<Vec<_>>();
        assert_eq!(wanted(Events::EXEC), [false, true, false]);
        assert_eq!(wanted(Events::FORK_EXIT), [true, false, true]);
        assert_eq!(wanted(Events::FORK_EXEC_EXIT), [true, true, true]);
        assert!(Events::EXEC.wants(&ProcEventKind::Ack { err: 0 }));
    }
}
