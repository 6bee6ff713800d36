//! The proc connector (`NETLINK_CONNECTOR`, `CN_IDX_PROC`): a socket that receives the kernel's
//! fork/exec/exit events for every process on the machine, and the parser of its messages.
//!
//! Written by hand because no maintained crate covers it: the `cnproc` crate has neither the
//! 6.6+ event filter nor overrun handling, and the layout is three small C structs
//! (`nlmsghdr`, `cn_msg`, `proc_event`; include/uapi/linux/{netlink,connector,cn_proc}.h).
//! Knows nothing of process trees: it yields every event with the kernel's sequence numbers
//! so the caller can count what was lost.

use crate::kernel::bytes::{i32_at, u32_at, u64_at};
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

/// What a receive produced.
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
    /// Whether the kernel filters events to fork/exec/exit for this socket (6.6+).
    pub filtered: bool,
    /// The receive buffer the kernel granted, in bytes.
    pub rcvbuf_bytes: usize,
}

impl Connector {
    /// Opens and subscribes. `rcvbuf_bytes` is forced past `rmem_max` when ste has
    /// CAP_NET_ADMIN, else capped by it. `filter` asks for fork/exec/exit events only.
    pub fn open(rcvbuf_bytes: usize, filter: bool) -> io::Result<Connector> {
        let (fd, rcvbuf_bytes) = super::netlink::open(
            libc::SOCK_DGRAM,
            libc::NETLINK_CONNECTOR,
            CN_IDX_PROC,
            rcvbuf_bytes,
        )?;
        let mut c = Connector {
            fd,
            buf: vec![0; 8192],
            filtered: false,
            rcvbuf_bytes,
        };
        c.subscribe(filter)?;
        Ok(c)
    }

    /// Sends `PROC_CN_MCAST_LISTEN`, with the 6.6+ `struct proc_input` event filter when asked
    /// (older kernels ignore a message of that size, so the caller decides by kernel version).
    fn subscribe(&mut self, filter: bool) -> io::Result<()> {
        let mut payload = PROC_CN_MCAST_LISTEN.to_ne_bytes().to_vec();
        if filter {
            payload.extend((PROC_EVENT_FORK | PROC_EVENT_EXEC | PROC_EVENT_EXIT).to_ne_bytes());
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
        self.filtered = filter;
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
            Some(ev) => Received::Event(ev),
            None => Received::Ignored,
        })
    }
}

/// Whether the running kernel has the proc connector event filter (Linux 6.6).
pub fn kernel_has_filter(release: &str) -> bool {
    let mut it = release
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|s| s.parse::<u32>().ok());
    let (major, minor) = (it.next().unwrap_or(0), it.next().unwrap_or(0));
    (major, minor) >= (6, 6)
}

/// Unsigned distance from `last` to `seq` minus one: how many sequence numbers were skipped.
pub fn seq_gap(last: u32, seq: u32) -> u32 {
    seq.wrapping_sub(last).wrapping_sub(1)
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
}
