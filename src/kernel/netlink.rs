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
