//! Safe functions over the plain system calls that rooms outside `kernel/` need: the clocks,
//! ids, signals to pids, an eventfd to wake a thread, polling one descriptor, an epoll set
//! (edge-triggered where a thread must sleep while data waits), `flock`,
//! `getrusage`, the calling thread's own filesystem credentials, scheduler slice and name.
//!
//! Owns only the calls: each takes and returns plain values, so the `unsafe` they need stays in
//! `kernel/` (docs/DESIGN.md lists the rooms that may hold `unsafe`). Knows nothing of the Run,
//! the bus or output. Hand-written because these are one line each over `libc`, and nix's
//! versions of some (the per-thread `setfsuid`) do not exist or go through glibc's
//! process-wide wrappers.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// `clock` in nanoseconds (`CLOCK_MONOTONIC`, a CPU clock, …).
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clocks ste asks for exist on every Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Names the calling thread (`/proc/self/task/TID/comm`, at most 15 bytes): for a thread that
/// takes on another role than the one it was started for.
pub fn name_this_thread(name: &std::ffi::CStr) {
    // SAFETY: PR_SET_NAME reads a NUL-terminated string (the kernel cuts it at 16 bytes).
    unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) };
}

/// The calling thread's id, from the system call: in ste's static, LTO-linked binary, glibc's
/// `gettid` wrapper came out as an unresolved weak symbol, and a call to it jumped to address 0.
pub fn gettid() -> libc::pid_t {
    // SAFETY: gettid takes no argument and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as libc::pid_t }
}

/// ste's effective uid.
pub fn euid() -> libc::uid_t {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
}

/// ste's effective gid.
pub fn egid() -> libc::gid_t {
    // SAFETY: getegid cannot fail.
    unsafe { libc::getegid() }
}

/// Whether ste runs as root (effective uid 0).
pub fn is_root() -> bool {
    euid() == 0
}

/// Sends `signal` to `pid`. Callers decide what a failure (a pid already gone) means.
pub fn kill(pid: libc::pid_t, signal: libc::c_int) -> io::Result<()> {
    // SAFETY: kill with integer arguments.
    if unsafe { libc::kill(pid, signal) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether processes `a` and `b` share one memory map (a child made by `vfork` or
/// `clone(CLONE_VM)` before it execs: its `smaps_rollup` is its parent's), by `kcmp(2)`;
/// `None` when the kernel cannot tell (no kcmp, or no right to compare them).
pub fn same_memory(a: libc::pid_t, b: libc::pid_t) -> Option<bool> {
    const KCMP_VM: libc::c_long = 1;
    // SAFETY: kcmp takes two pids, a type and two unused integers; it reads no memory of ours.
    let r = unsafe {
        libc::syscall(
            libc::SYS_kcmp,
            a,
            b,
            KCMP_VM,
            0 as libc::c_long,
            0 as libc::c_long,
        )
    };
    (r >= 0).then_some(r == 0)
}

/// A new close-on-exec eventfd, for waking a thread that polls it.
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: creating an eventfd with flags only.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Adds one to an eventfd: whoever polls it wakes.
pub fn eventfd_notify(fd: BorrowedFd<'_>) {
    let one = 1u64.to_ne_bytes();
    // SAFETY: writing 8 bytes from a valid buffer to an eventfd.
    unsafe { libc::write(fd.as_raw_fd(), one.as_ptr().cast(), 8) };
}

/// Waits up to `timeout` (`None`: for as long as it takes) for `fd` to be readable; true when
/// it is.
pub fn poll_readable(fd: BorrowedFd<'_>, timeout: Option<Duration>) -> bool {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: polling one valid pollfd.
    let rc = unsafe {
        libc::poll(
            &mut pfd,
            1,
            timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as i32),
        )
    };
    rc > 0 && pfd.revents & libc::POLLIN != 0
}

/// An epoll set a thread waits on. A descriptor added edge-triggered wakes the waiter only when
/// its file notifies anew, not while data it announced before still waits: a BPF ring buffer
/// that its reader leaves to fill between drains, and that notifies on purpose when it should
/// be drained.
pub struct Epoll(OwnedFd);

impl Epoll {
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: creating an epoll instance with flags only.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor that nothing else owns.
        Ok(Epoll(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Adds `fd`, readable, level- or edge-triggered. The set must not outlive it.
    pub fn add(&self, fd: BorrowedFd<'_>, edge: bool) -> io::Result<()> {
        let mut event = libc::epoll_event {
            events: (libc::EPOLLIN | if edge { libc::EPOLLET } else { 0 }) as u32,
            u64: fd.as_raw_fd() as u64,
        };
        // SAFETY: adding an open descriptor with a valid event.
        let rc = unsafe {
            libc::epoll_ctl(
                self.0.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                fd.as_raw_fd(),
                &mut event,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits up to `timeout` for a descriptor of the set to be ready (an interrupted wait ends
    /// early, as a timeout does).
    pub fn wait(&self, timeout: Duration) {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 2];
        // SAFETY: waiting into a local array of the length given.
        unsafe {
            libc::epoll_wait(
                self.0.as_raw_fd(),
                events.as_mut_ptr(),
                events.len() as i32,
                timeout.as_millis().min(i32::MAX as u128) as i32,
            )
        };
    }
}

/// Takes an exclusive `flock` on `fd`, waiting for it; the lock goes with the descriptor.
pub fn flock_exclusive(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: an open descriptor.
    if unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Takes an exclusive `flock` on `fd` if no one holds one: `Ok(false)` when someone does.
pub fn try_flock_exclusive(fd: BorrowedFd<'_>) -> io::Result<bool> {
    // SAFETY: an open descriptor.
    if unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        return Ok(false);
    }
    Err(e)
}

/// `getrusage(who)`: `RUSAGE_SELF`, `RUSAGE_CHILDREN` or `RUSAGE_THREAD`.
pub fn rusage(who: libc::c_int) -> libc::rusage {
    // SAFETY: a zeroed rusage is a valid output buffer.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into `ru`.
    unsafe { libc::getrusage(who, &mut ru) };
    ru
}

/// Sets the supplementary groups of the calling thread only (the raw call: glibc's `setgroups`
/// changes every thread of the process).
pub fn set_thread_groups(groups: &[libc::gid_t]) -> io::Result<()> {
    // SAFETY: setgroups reads `len` gids from a valid slice.
    let rc = unsafe { libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sets the calling thread's filesystem uid and gid; returns the (uid, gid) the thread has
/// afterwards. setfsuid/setfsgid report no error (they return the previous id); asking with an
/// invalid id (-1) changes nothing and tells the current one, which callers compare.
pub fn set_thread_fs_ids(uid: libc::uid_t, gid: libc::gid_t) -> (libc::uid_t, libc::gid_t) {
    // SAFETY: integer arguments only.
    let (gid, uid) = unsafe {
        libc::syscall(libc::SYS_setfsgid, gid);
        libc::syscall(libc::SYS_setfsuid, uid);
        (
            libc::syscall(libc::SYS_setfsgid, -1i32) as libc::gid_t,
            libc::syscall(libc::SYS_setfsuid, -1i32) as libc::uid_t,
        )
    };
    (uid, gid)
}

/// `struct sched_attr` (include/uapi/linux/sched/types.h), its first version with the
/// utilization clamps.
#[repr(C)]
#[derive(Default)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
    sched_util_min: u32,
    sched_util_max: u32,
}

/// Asks for scheduler slices of `slice` for the calling thread, keeping its policy, nice and
/// the rest (read first with `sched_getattr`). With Linux 6.12+ a normal thread's
/// `sched_runtime` is its slice (0.1 to 100 ms), and a waking thread whose slice is shorter
/// than the running one's preempts it at once instead of waiting for that slice to end.
/// Earlier kernels ignore it for normal threads.
pub fn set_thread_slice(slice: Duration) -> io::Result<()> {
    let size = std::mem::size_of::<SchedAttr>() as u32;
    let mut attr = SchedAttr::default();
    // SAFETY: sched_getattr writes at most `size` bytes into `attr`, a repr(C) sched_attr.
    if unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            0,
            &mut attr as *mut SchedAttr,
            size,
            0,
        )
    } != 0
    {
        return Err(io::Error::last_os_error());
    }
    attr.size = size;
    attr.sched_runtime = slice.as_nanos().min(u64::MAX as u128) as u64;
    // SAFETY: sched_setattr reads `attr.size` bytes of a valid sched_attr.
    if unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
