//! Netlink sockets shared by the proc connector (`cn_proc`) and taskstats (`taskstats`):
//! opening and binding with a receive buffer, waiting for a datagram (or a wake-up descriptor),
//! receiving without blocking, and reading native-endian fields out of messages.
//!
//! Owns nothing but these system calls; the message formats belong to the two callers.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// Opens a netlink socket of `protocol`, asks for a receive buffer of `rcvbuf_bytes` (forced
/// past `rmem_max` with CAP_NET_ADMIN, else capped by it), and binds it to the multicast
/// `groups`. Returns the socket and the buffer the kernel granted.
pub fn open(
    ty: libc::c_int,
    protocol: libc::c_int,
    groups: u32,
    rcvbuf_bytes: usize,
) -> io::Result<(OwnedFd, usize)> {
    // SAFETY: plain socket creation.
    let raw = unsafe { libc::socket(libc::AF_NETLINK, ty | libc::SOCK_CLOEXEC, protocol) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh descriptor owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let size = rcvbuf_bytes.min(i32::MAX as usize) as libc::c_int;
    if setsockopt_int(&fd, libc::SO_RCVBUFFORCE, size) != 0 {
        setsockopt_int(&fd, libc::SO_RCVBUF, size);
    }
    // SAFETY: a zeroed sockaddr_nl is valid; nl_pid 0 lets the kernel pick a port id.
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as u16;
    addr.nl_groups = groups;
    // SAFETY: binding a valid sockaddr_nl of the right size.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as u32,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let granted = rcvbuf(&fd)?;
    Ok((fd, granted))
}

fn setsockopt_int(fd: &OwnedFd, opt: libc::c_int, v: libc::c_int) -> libc::c_int {
    // SAFETY: a valid socket; the value is a plain int of the size given.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as u32,
        )
    }
}

fn rcvbuf(fd: &OwnedFd) -> io::Result<usize> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt into a valid int with its length.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v as usize)
}

/// Waits up to `timeout` until `fd` is readable (`true`), or until `wake` (any readable
/// descriptor, such as an eventfd or a signalfd) is, or time is up (`false`).
pub fn wait_readable(fd: &OwnedFd, timeout: Duration, wake: Option<&OwnedFd>) -> io::Result<bool> {
    let mut pfds = [
        libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: wake.map_or(-1, |w| w.as_raw_fd()),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    // ppoll, not poll: poll counts in whole milliseconds, so a wait under 1 ms returned at
    // once (a busy loop for a caller waiting out a short remainder).
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: polling two valid pollfds (a negative fd is ignored) with a valid timespec and
    // no signal mask.
    let rc = unsafe { libc::ppoll(pfds.as_mut_ptr(), 2, &ts, std::ptr::null()) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(e)
        };
    }
    Ok(pfds[0].revents != 0)
}

/// Receives one datagram into `buf` without blocking: `Ok(None)` when none is queued.
/// `ENOBUFS` (the kernel dropped messages) comes back as an error for the caller to count.
pub fn recv_now(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<Option<usize>> {
    loop {
        // SAFETY: receiving into a valid buffer of its full length.
        let n = unsafe {
            libc::recv(
                fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n >= 0 {
            return Ok(Some(n as usize));
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) => return Ok(None),
            _ => return Err(e),
        }
    }
}

/// Receives, without blocking and in one system call (`recvmmsg`), up to as many datagrams as
/// `buf` has slots of `slot_bytes`, each into its own slot; returns each one's length and
/// whether it was longer than its slot (its end cut off), and nothing when none is queued.
/// `ENOBUFS` comes back as [`recv_now`]'s does; after some datagrams were taken, the kernel
/// keeps it for the next call.
pub fn recv_many(
    fd: &OwnedFd,
    buf: &mut [u8],
    slot_bytes: usize,
) -> io::Result<Vec<(usize, bool)>> {
    let slots = buf.len() / slot_bytes;
    let mut iovs: Vec<libc::iovec> = buf
        .chunks_exact_mut(slot_bytes)
        .map(|slot| libc::iovec {
            iov_base: slot.as_mut_ptr().cast(),
            iov_len: slot.len(),
        })
        .collect();
    let mut hdrs: Vec<libc::mmsghdr> = iovs
        .iter_mut()
        .map(|iov| {
            // SAFETY: an all-zero msghdr is a valid one (no name, no control data).
            let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
            h.msg_hdr.msg_iov = iov;
            h.msg_hdr.msg_iovlen = 1;
            h
        })
        .collect();
    loop {
        // SAFETY: each header points at one iovec, which points at its own slot of `buf`;
        // all live across the call.
        let n = unsafe {
            libc::recvmmsg(
                fd.as_raw_fd(),
                hdrs.as_mut_ptr(),
                slots as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if n >= 0 {
            return Ok(hdrs[..n as usize]
                .iter()
                .map(|h| {
                    (
                        h.msg_len as usize,
                        h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
                    )
                })
                .collect());
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) => return Ok(Vec::new()),
            _ => return Err(e),
        }
    }
}

/// Sends one message.
pub fn send(fd: &OwnedFd, msg: &[u8]) -> io::Result<()> {
    // SAFETY: sending an initialised buffer of its own length.
    let n = unsafe { libc::send(fd.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

pub fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(off..off + 2)?.try_into().ok()?))
}

pub fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

pub fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Datagrams of a local socket pair stand in for netlink's: the slots, the cut flag and the
    /// empty queue are the system call's, whatever the family.
    #[test]
    fn many_datagrams_come_in_one_call_each_in_its_slot_and_a_long_one_says_it_was_cut() {
        let mut fds = [0; 2];
        // SAFETY: creating a socket pair into a valid array.
        let rc = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_DGRAM, 0, fds.as_mut_ptr()) };
        assert_eq!(rc, 0);
        // SAFETY: both descriptors were just created and are owned here alone.
        let (rx, tx) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let mut buf = vec![0u8; 3 * 8];
        assert!(
            recv_many(&rx, &mut buf, 8).unwrap().is_empty(),
            "nothing queued"
        );
        for m in [&b"abc"[..], b"0123456789", b"xy", b"left"] {
            send(&tx, m).unwrap();
        }
        let got = recv_many(&rx, &mut buf, 8).unwrap();
        assert_eq!(got, vec![(3, false), (8, true), (2, false)]);
        assert_eq!(&buf[..3], b"abc");
        assert_eq!(&buf[8..16], b"01234567");
        assert_eq!(&buf[16..18], b"xy");
        assert_eq!(recv_many(&rx, &mut buf, 8).unwrap(), vec![(4, false)]);
        assert_eq!(&buf[..4], b"left");
    }
}
