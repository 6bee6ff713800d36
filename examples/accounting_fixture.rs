//! Workloads with known answers for the exact-accounting tests (`tests/it/accounting.rs`).
//!
//! Every process that touches memory prints `peak PID BYTES` (its own `VmHWM`, read just
//! before it exits) on stdout, so a test can hold ste's per-process peaks to the kernel's own
//! figure.
//!
//!   fill MIB [CODE]          touch MIB MiB, print its peak, exit with CODE (default 0)
//!   group A B C D            three children touch A, B and C MiB at the same time (all resident
//!                            at once), then, once they are gone, a fourth touches D MiB
//!   readfile PATH            drop PATH from the page cache, then read it all (page cache,
//!                            not anonymous memory)
//!   floor PARENT CHILD       touch PARENT MiB, then fork a child that execs `fill CHILD`;
//!                            prints `maxrss PID BYTES`, the child's ru_maxrss from wait4
//!   daemon SECONDS           leave a detached grandchild running `sleep SECONDS`; exit at once
//!   ignored N MS             ignore SIGCHLD, then fork N children that each spin MS ms of CPU
//!                            (their own CPU clock): the kernel reaps them, so no wait counts
//!                            their CPU in anyone's children's usage; returns once all are gone

use std::io::{Read, Write};
use std::os::fd::FromRawFd;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize| -> u64 {
        args.get(i)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| usage())
    };
    match args.first().map(String::as_str) {
        Some("fill") => {
            let keep = touch(num(1) << 20);
            report_peak();
            std::hint::black_box(keep);
            let code = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(0);
            std::process::exit(code);
        }
        Some("group") => group([num(1), num(2), num(3)], num(4)),
        Some("readfile") => readfile(args.get(1).unwrap_or_else(|| usage())),
        Some("floor") => floor(num(1), num(2)),
        Some("daemon") => daemon(num(1)),
        Some("ignored") => ignored(num(1), num(2)),
        _ => usage(),
    }
}

fn usage() -> ! {
    eprintln!("usage: accounting_fixture fill|group|readfile|floor|daemon|ignored ARGS");
    std::process::exit(2)
}

/// Allocates `bytes` and writes every page, so all of it is resident.
fn touch(bytes: u64) -> Vec<u8> {
    let mut v = vec![0u8; bytes as usize];
    for i in (0..v.len()).step_by(4096) {
        v[i] = 1;
    }
    std::hint::black_box(&mut v);
    v
}

/// Prints `peak PID BYTES` from this process's VmHWM.
fn report_peak() {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    let mut out = std::io::stdout().lock();
    writeln!(out, "peak {} {}", std::process::id(), kb * 1024).unwrap();
    out.flush().unwrap();
}

fn pipe() -> (std::fs::File, std::fs::File) {
    let mut fds = [0; 2];
    // SAFETY: pipe writes two descriptors into a valid array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: fresh descriptors owned by nothing else.
    unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    }
}

fn wait(pid: i32) -> libc::rusage {
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid output buffer; waiting for our own child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    ru
}

fn group(concurrent: [u64; 3], last: u64) {
    let (ready_r, ready_w) = pipe();
    let (go_r, go_w) = pipe();
    let mut pids = Vec::new();
    for mib in concurrent {
        std::io::stdout().flush().unwrap();
        // SAFETY: fork in a single-threaded program; the child only touches memory, uses the
        // pipes and exits.
        match unsafe { libc::fork() } {
            0 => {
                let keep = touch(mib << 20);
                (&ready_w).write_all(b"r").unwrap();
                // Hold until every sibling is resident too (the parent closes `go`).
                let mut b = [0u8; 1];
                // SAFETY: closing our copy of the write end, so EOF can arrive.
                unsafe { libc::close(std::os::fd::AsRawFd::as_raw_fd(&go_w)) };
                let _ = (&go_r).read(&mut b);
                report_peak();
                std::hint::black_box(keep);
                // SAFETY: leaving the child without running the parent's destructors.
                unsafe { libc::_exit(0) };
            }
            pid if pid > 0 => pids.push(pid),
            _ => panic!("fork failed"),
        }
    }
    drop(ready_w);
    let mut got = [0u8; 3];
    (&ready_r).read_exact(&mut got).unwrap();
    drop(go_w);
    for pid in pids {
        wait(pid);
    }
    std::io::stdout().flush().unwrap();
    // SAFETY: as above.
    match unsafe { libc::fork() } {
        0 => {
            let keep = touch(last << 20);
            report_peak();
            std::hint::black_box(keep);
            // SAFETY: as above.
            unsafe { libc::_exit(0) };
        }
        pid if pid > 0 => {
            wait(pid);
        }
        _ => panic!("fork failed"),
    }
}

fn readfile(path: &str) {
    let f = std::fs::File::open(path).unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
    // Written pages must be clean before they can be dropped; then drop them, so the read
    // below really comes from the disk into the page cache.
    f.sync_all().unwrap();
    // SAFETY: fadvise on an open descriptor.
    assert_eq!(
        unsafe { libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED) },
        0
    );
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = (&f).read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    println!("read {total}");
}

fn floor(parent: u64, child: u64) {
    let keep = touch(parent << 20);
    let exe = std::fs::read_link("/proc/self/exe").unwrap();
    std::io::stdout().flush().unwrap();
    let child_mib = child.to_string();
    let exe_c = std::ffi::CString::new(exe.as_os_str().as_encoded_bytes()).unwrap();
    let a1 = std::ffi::CString::new("fill").unwrap();
    let a2 = std::ffi::CString::new(child_mib).unwrap();
    let argv = [exe_c.as_ptr(), a1.as_ptr(), a2.as_ptr(), std::ptr::null()];
    // SAFETY: fork in a single-threaded program; the child only execs (arguments built
    // before the fork) or exits.
    match unsafe { libc::fork() } {
        0 => unsafe {
            libc::execv(exe_c.as_ptr(), argv.as_ptr());
            libc::_exit(127);
        },
        pid if pid > 0 => {
            let ru = wait(pid);
            println!("maxrss {pid} {}", ru.ru_maxrss as u64 * 1024);
        }
        _ => panic!("fork failed"),
    }
    std::hint::black_box(keep);
}

fn ignored(children: u64, ms: u64) {
    // SAFETY: setting a standard disposition in a single-threaded program.
    unsafe { libc::signal(libc::SIGCHLD, libc::SIG_IGN) };
    for _ in 0..children {
        // SAFETY: fork in a single-threaded program; the child spins and exits.
        match unsafe { libc::fork() } {
            0 => {
                spin_cpu(std::time::Duration::from_millis(ms));
                // SAFETY: leaving the child without running the parent's destructors.
                unsafe { libc::_exit(0) };
            }
            pid if pid > 0 => {}
            _ => panic!("fork failed"),
        }
    }
    // With SIGCHLD ignored, wait blocks until every child is gone, then fails with ECHILD.
    // SAFETY: waiting for any child, status not wanted.
    while unsafe { libc::wait(std::ptr::null_mut()) } > 0 {}
}

/// Spins until this process's own CPU clock has advanced by `d`.
fn spin_cpu(d: std::time::Duration) {
    let now = || {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a valid timespec to fill.
        unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
        std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    };
    let start = now();
    let mut x = 0u64;
    while now() - start < d {
        for _ in 0..10_000 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

fn daemon(seconds: u64) {
    let secs = std::ffi::CString::new(seconds.to_string()).unwrap();
    let sleep = c"/bin/sleep";
    let argv = [sleep.as_ptr(), secs.as_ptr(), std::ptr::null()];
    // SAFETY: fork/setsid/exec in a single-threaded program, arguments built before.
    match unsafe { libc::fork() } {
        0 => unsafe {
            libc::setsid();
            if libc::fork() == 0 {
                let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
                for fd in 0..3 {
                    libc::dup2(null, fd);
                }
                libc::execv(sleep.as_ptr(), argv.as_ptr());
            }
            libc::_exit(0);
        },
        pid if pid > 0 => {
            wait(pid);
        }
        _ => panic!("fork failed"),
    }
}
