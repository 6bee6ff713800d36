//! Trees that share memory, with their own truth: the workloads of issue 42, for the tests of
//! Max PSS (`tests/it/sharing.rs`) and for `bench/sharing.py`.
//!
//! Each workload builds its memory, waits until every process of its tree holds it, then reads
//! the `smaps_rollup` of every one of them while nothing moves (the processes that hold it wait
//! on a pipe, or are stopped) and prints `truth BYTES` on stdout: the tree's PSS at that
//! moment, the figure Max PSS must find. It then holds the memory for HOLD_MS and ends.
//!
//!   cow MIB N write|read HOLD_MS   the parent writes MIB MiB of private anonymous memory and
//!                                  forks N children that write every page of it (each gets its
//!                                  own copy) or only read it (all keep sharing it)
//!   memfd MIB N HOLD_MS            the parent writes a memfd of MIB MiB through a shared mapping
//!                                  and forks N children that read every page of it
//!   shared-anon MIB N HOLD_MS      the same with a `MAP_SHARED | MAP_ANONYMOUS` mapping
//!   file-child PATH MIB HOLD_MS    the parent writes PATH (MIB MiB, with write(2), unmapped) and
//!                                  forks a child that maps it and reads every page; PATH is
//!                                  removed at the end (so is file-shared's)
//!   file-shared PATH MIB N HOLD_MS the parent writes PATH the same way and forks N children that
//!                                  each map it and read every page (page cache shared by N)
//!   short COUNT ALIVE LIFE_MS      runs COUNT `/bin/sleep` processes of LIFE_MS each, ALIVE at
//!                                  once; the truth is read three times (the children stopped
//!                                  with SIGSTOP meanwhile) and the largest printed
//!
//! The reads of the truth are the parent's own work, inside the tree that ste measures; they
//! change nothing that PSS counts.

use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

const MIB: usize = 1 << 20;
const PAGE: usize = 4096;
const RW: libc::c_int = libc::PROT_READ | libc::PROT_WRITE;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| -> usize {
        args.get(i)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| usage())
    };
    match args.first().map(String::as_str) {
        Some("cow") => {
            let write = match args.get(3).map(String::as_str) {
                Some("write") => true,
                Some("read") => false,
                _ => usage(),
            };
            cow(arg(1) * MIB, arg(2), write, arg(4))
        }
        Some("memfd") => shared(Kind::Memfd, arg(1) * MIB, arg(2), arg(3)),
        Some("shared-anon") => shared(Kind::SharedAnon, arg(1) * MIB, arg(2), arg(3)),
        Some("file-child") => {
            let path = args.get(1).unwrap_or_else(|| usage());
            write_file(path, arg(2) * MIB);
            file_mappers(path, arg(2) * MIB, 1, arg(3));
            let _ = std::fs::remove_file(path);
        }
        Some("file-shared") => {
            let path = args.get(1).unwrap_or_else(|| usage());
            write_file(path, arg(2) * MIB);
            file_mappers(path, arg(2) * MIB, arg(3), arg(4));
            let _ = std::fs::remove_file(path);
        }
        Some("short") => short(arg(1), arg(2), arg(3)),
        _ => usage(),
    }
}

fn usage() -> ! {
    eprintln!(
        "usage: sharing_fixture cow MIB N write|read HOLD_MS | memfd MIB N HOLD_MS | shared-anon MIB N HOLD_MS | file-child PATH MIB HOLD_MS | file-shared PATH MIB N HOLD_MS | short COUNT ALIVE LIFE_MS"
    );
    std::process::exit(2)
}

/// A pipe: (read end, write end).
fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: `fds` is an array of two ints, as pipe2 writes.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors were just opened and are owned by nothing else.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

fn write_byte(fd: &OwnedFd) {
    // SAFETY: one byte from a valid buffer to an open descriptor.
    assert_eq!(
        unsafe { libc::write(fd.as_raw_fd(), b"r".as_ptr().cast(), 1) },
        1
    );
}

/// Reads until end of file (every writer closed), or `n` bytes.
fn read_bytes(fd: &OwnedFd, n: usize) {
    let mut got = 0;
    let mut buf = [0u8; 64];
    while got < n {
        // SAFETY: reads into a valid buffer of its length.
        let r = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if r <= 0 {
            return;
        }
        got += r as usize;
    }
}

/// The tree's processes hold their memory; coordinates the truth and the hold. Each child
/// says it is ready on `ready`, then waits for the end of file on `go`.
struct Hold {
    ready: (OwnedFd, OwnedFd),
    go: (OwnedFd, OwnedFd),
    children: Vec<i32>,
}

impl Hold {
    fn new() -> Hold {
        Hold {
            ready: pipe(),
            go: pipe(),
            children: Vec::new(),
        }
    }

    /// Forks a child that runs `work`, says it is ready, and holds until released.
    fn fork(&mut self, work: impl FnOnce()) {
        // SAFETY: the fixture is single-threaded; the child only touches its own memory and
        // pipes, then exits with `_exit`.
        match unsafe { libc::fork() } {
            0 => {
                work();
                write_byte(&self.ready.1);
                // Drop the write end of `go` so that the parent's close is the end of file.
                // SAFETY: closing a descriptor this process owns, never used again.
                unsafe { libc::close(self.go.1.as_raw_fd()) };
                read_bytes(&self.go.0, usize::MAX);
                // SAFETY: ends the child without running the parent's exit handlers.
                unsafe { libc::_exit(0) }
            }
            pid if pid > 0 => self.children.push(pid),
            _ => panic!("fork failed"),
        }
    }

    /// Waits for every child to be ready, prints the truth, holds `hold_ms`, releases them
    /// and reaps them.
    fn truth_then_release(self, hold_ms: usize) {
        read_bytes(&self.ready.0, self.children.len());
        let mut pids = vec![std::process::id() as i32];
        pids.extend(&self.children);
        print_truth(tree_pss(&pids));
        std::thread::sleep(Duration::from_millis(hold_ms as u64));
        drop(self.go);
        for pid in self.children {
            wait(pid);
        }
    }
}

fn print_truth(bytes: u64) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "truth {bytes}").unwrap();
    out.flush().unwrap();
}

/// PSS summed over `pids`, from their `smaps_rollup` (kB).
fn tree_pss(pids: &[i32]) -> u64 {
    pids.iter()
        .map(|pid| {
            let text =
                std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
            text.lines()
                .find_map(|l| l.strip_prefix("Pss:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .unwrap_or(0)
                * 1024
        })
        .sum()
}

fn wait(pid: i32) {
    let mut status = 0;
    // SAFETY: waits for a child of this process.
    unsafe { libc::waitpid(pid, &mut status, 0) };
}

fn map(len: usize, flags: libc::c_int, fd: libc::c_int, prot: libc::c_int) -> &'static mut [u8] {
    // SAFETY: a new mapping of `len` bytes; the slice covers exactly it, and it is never
    // unmapped (the process ends holding it).
    unsafe {
        let p = libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, 0);
        assert_ne!(
            p,
            libc::MAP_FAILED,
            "mmap: {}",
            std::io::Error::last_os_error()
        );
        std::slice::from_raw_parts_mut(p.cast(), len)
    }
}

fn touch_write(m: &mut [u8], value: u8) {
    for i in (0..m.len()).step_by(PAGE) {
        m[i] = value;
    }
}

fn touch_read(m: &[u8]) -> u64 {
    let mut sum = 0u64;
    for i in (0..m.len()).step_by(PAGE) {
        // A volatile read, so the loop is not optimised away: each page is mapped.
        // SAFETY: `i` is within the slice.
        sum += unsafe { std::ptr::read_volatile(m.as_ptr().add(i)) } as u64;
    }
    sum
}

fn cow(bytes: usize, n: usize, write: bool, hold_ms: usize) {
    let m = map(bytes, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, RW);
    // No transparent huge pages: copy-on-write of a huge page copies 4 KiB pieces on some
    // kernels and the whole page on others, and the truth is what it is either way, but the
    // workload should be the same on every kernel.
    // SAFETY: advice on a mapping this process owns.
    unsafe { libc::madvise(m.as_mut_ptr().cast(), bytes, libc::MADV_NOHUGEPAGE) };
    touch_write(m, 1);
    let mut hold = Hold::new();
    for i in 0..n {
        let m = &mut *m;
        hold.fork(move || {
            if write {
                touch_write(m, 2 + i as u8);
            } else {
                std::hint::black_box(touch_read(m));
            }
        });
    }
    hold.truth_then_release(hold_ms);
}

enum Kind {
    Memfd,
    SharedAnon,
}

fn shared(kind: Kind, bytes: usize, n: usize, hold_ms: usize) {
    let m = match kind {
        Kind::Memfd => {
            // SAFETY: a NUL-terminated name; the descriptor is kept open by the mapping.
            let fd = unsafe { libc::memfd_create(c"ste-sharing".as_ptr(), libc::MFD_CLOEXEC) };
            assert!(fd >= 0, "memfd_create");
            // SAFETY: sizing the memfd just created.
            assert_eq!(unsafe { libc::ftruncate(fd, bytes as libc::off_t) }, 0);
            map(bytes, libc::MAP_SHARED, fd, RW)
        }
        Kind::SharedAnon => map(bytes, libc::MAP_SHARED | libc::MAP_ANONYMOUS, -1, RW),
    };
    touch_write(m, 1);
    let mut hold = Hold::new();
    for _ in 0..n {
        let m = &*m;
        hold.fork(move || {
            std::hint::black_box(touch_read(m));
        });
    }
    hold.truth_then_release(hold_ms);
}

/// Writes `bytes` to `path` with write(2): in page cache, mapped by nobody.
fn write_file(path: &str, bytes: usize) {
    let chunk = vec![7u8; MIB];
    let mut f = std::fs::File::create(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    for _ in 0..bytes / MIB {
        f.write_all(&chunk).unwrap();
    }
}

fn file_mappers(path: &str, bytes: usize, n: usize, hold_ms: usize) {
    let mut hold = Hold::new();
    for _ in 0..n {
        hold.fork(|| {
            let f = std::fs::File::open(path).unwrap();
            // The mapping holds the file; the descriptor may go.
            let m = map(bytes, libc::MAP_SHARED, f.as_raw_fd(), libc::PROT_READ);
            std::hint::black_box(touch_read(m));
        });
    }
    hold.truth_then_release(hold_ms);
}

fn short(count: usize, alive: usize, life_ms: usize) {
    let life = format!("{}", life_ms as f64 / 1000.0);
    let spawn = || {
        std::process::Command::new("/bin/sleep")
            .arg(&life)
            .spawn()
            .expect("/bin/sleep")
    };
    let mut live: Vec<std::process::Child> = Vec::new();
    let mut started = 0;
    let mut truth = 0u64;
    // The truth is read when the tree is full, once a quarter, half and three quarters of the
    // run's processes have started.
    let marks = [count / 4, count / 2, 3 * count / 4];
    let mut due = false;
    while started < count || !live.is_empty() {
        live.retain_mut(|c| c.try_wait().ok().flatten().is_none());
        while started < count && live.len() < alive {
            live.push(spawn());
            started += 1;
            due |= marks.contains(&started);
        }
        if due {
            due = false;
            // Every child exec'd and stopped: nothing starts, ends or moves while the tree is
            // read.
            std::thread::sleep(Duration::from_millis(50));
            let pids: Vec<i32> = live.iter().map(|c| c.id() as i32).collect();
            for &p in &pids {
                // SAFETY: a signal to a child of this process.
                unsafe { libc::kill(p, libc::SIGSTOP) };
            }
            let mut all = vec![std::process::id() as i32];
            all.extend(&pids);
            truth = truth.max(tree_pss(&all));
            for &p in &pids {
                // SAFETY: as above.
                unsafe { libc::kill(p, libc::SIGCONT) };
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    print_truth(truth);
}
