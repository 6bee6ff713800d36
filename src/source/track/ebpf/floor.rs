//! The floor of the ebpf tracker's cost, for `bench/` (issue: each tracker against a minimal
//! program doing only what the kernel makes it do): the same BPF object, loaded and attached
//! by the same loader with the same layout, the root registered the same way, and a reader
//! that only drains the ring buffer — no decoding, no events, no sampler, no accounting. What
//! it adds to a command is the kernel's side (the programs at fork, exec, exit and every
//! context switch, the task storage, the ring) and the reader's wake-ups; ste's cost over it is its own user space.
//! With `cgroup`, the command also runs in a cgroup made as ste's accounting makes its own
//! (`account::group`), so the kernel's price of the group (its controllers charged at every
//! fork, page and exit) is measured apart from ste's user space.
//!
//! Owns nothing ste runs: only `examples/ebpf_floor.rs` calls it. It must not touch the
//! tracker's reader or the session.

use super::loading::{Config, load_object};
use super::register_root;
use crate::source::account::group::Group;
use std::os::fd::AsRawFd;
use std::time::Duration;

/// What a floor run saw.
#[derive(Debug, Default, Clone, Copy)]
pub struct Floor {
    /// Records drained from the ring.
    pub records: u64,
    /// Times the reader woke (returns from `poll` or the timer).
    pub wakes: u64,
    /// The command's wait status.
    pub status: i32,
}

/// Runs `argv` followed by the BPF programs, draining the ring: woken by the kernel for each
/// record the reader has caught up to (`timer: None`, as a prompt reader is), or every
/// `timer` (records pile up and the kernel does not wake it); with `cgroup`, in a group of
/// its own, removed at the end; with `ledger`, with the per-process ledger's last-switch
/// program (attached to every context switch), as ste's accounting loads it. Needs root
/// (CAP_BPF and CAP_PERFMON), as the tracker does.
pub fn run(
    argv: &[String],
    timer: Option<Duration>,
    cgroup: bool,
    ledger: bool,
) -> Result<Floor, String> {
    let mut group = cgroup
        .then(|| Group::create(std::path::Path::new("/proc/self")))
        .transpose()?;
    let (ebpf, mut ring, _) = load_object(
        Config {
            syscalls: None,
            ledger,
        },
        false,
        |_| {},
    )?;
    let tasks = super::root_map(&ebpf).ok_or("the map of tracked tasks was not created")?;
    let cargs: Vec<std::ffi::CString> = argv
        .iter()
        .map(|a| std::ffi::CString::new(a.as_bytes()).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let mut ptrs: Vec<*const libc::c_char> = cargs.iter().map(|c| c.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // Opened here, written by the child: a task that moves itself (`0`) is moved without the
    // lock on every thread group that moving another task takes, which waits for an RCU grace
    // period (~15 ms here); ste's child joins so too (`launch::Child::join`).
    let joins = group
        .iter()
        .flat_map(Group::join_paths)
        .map(|path| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(|e| format!("opening {}: {e}", path.display()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let join_fds: Vec<i32> = joins.iter().map(AsRawFd::as_raw_fd).collect();
    let mut go = [0i32; 2];
    // SAFETY: pipe2 fills a local array of two descriptors.
    if unsafe { libc::pipe2(go.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    // SAFETY: the child only writes to the cgroup files, reads the pipe and execs
    // (async-signal-safe calls), with the descriptors and argv made above.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let mut b = [0u8; 1];
        // SAFETY: as above, in the child.
        unsafe {
            for &fd in &join_fds {
                if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    libc::_exit(crate::model::status::STE_FAILED);
                }
            }
            libc::read(go[0], b.as_mut_ptr().cast(), 1);
            libc::execvp(ptrs[0], ptrs.as_ptr());
            libc::_exit(127);
        }
    }
    if pid < 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    drop(joins);
    register_root(&tasks, pid).map_err(|e| e.to_string())?;
    // SAFETY: releasing the child: one byte on our end of the pipe, then closing both ends.
    unsafe {
        libc::write(go[1], b"g".as_ptr().cast(), 1);
        libc::close(go[0]);
        libc::close(go[1]);
    }
    // The command's end wakes the reader at once, as ste's reaper does.
    // SAFETY: pidfd_open with integer arguments; returns a new descriptor or -1.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
    if pidfd < 0 {
        // Without it the reader would never learn of the end: say so rather than hang.
        return Err(format!("pidfd_open: {}", std::io::Error::last_os_error()));
    }
    let mut floor = Floor::default();
    loop {
        let mut fds = [
            libc::pollfd {
                fd: pidfd,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: ring.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let (n, ms) = match timer {
            Some(t) => (1, t.as_millis() as i32),
            None => (2, -1),
        };
        // SAFETY: polling one or two valid descriptors of a local array.
        unsafe { libc::poll(fds.as_mut_ptr(), n, ms) };
        floor.wakes += 1;
        floor.records += ring.drain_while(|_| true) as u64;
        let mut status = 0;
        // SAFETY: a non-blocking wait for our own child.
        if unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } == pid {
            floor.records += ring.drain_while(|_| true) as u64;
            floor.status = status;
            break;
        }
    }
    // SAFETY: closing the pidfd opened above.
    unsafe { libc::close(pidfd) };
    if let Some(left) = group.as_mut().map(Group::remove)
        && !left.is_empty()
    {
        return Err(format!("cannot remove the cgroup: {}", left.join("; ")));
    }
    Ok(floor)
}
