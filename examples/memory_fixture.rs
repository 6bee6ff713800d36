//! Workloads with a known memory layout, for the tests of `ste maps`, `--maps-at-peak` and
//! `--malloc` (issue 6), and for `bench/memory.sh`.
//!
//! Each holding workload prints one line `ready ...` on stdout once its memory is in place,
//! then holds it until its stdin reaches end-of-file (the test closes the pipe) or, when a
//! hold time is given, for that long. Addresses are printed in hex.
//!
//!   anon MIB thp|nothp [HOLD_MS]   mmap MIB MiB anonymous, 2 MiB-aligned, madvise(MADV_HUGEPAGE
//!                                  or MADV_NOHUGEPAGE), write every page;
//!                                  prints `ready ADDR LEN`
//!   file PATH MIB TOUCH_MIB        create PATH of MIB MiB, map it MAP_SHARED, write every page of
//!                                  its first TOUCH_MIB MiB; prints `ready ADDR LEN TOUCHED_PAGES`.
//!                                  Exactly those pages become present: write faults do no
//!                                  fault-around, and the large page-cache folios a fault may map
//!                                  whole (6.x) are naturally aligned, so none crosses the
//!                                  boundary of a whole number of MiB
//!   fork-share MIB                 write MIB MiB of private anonymous memory, then fork: parent
//!                                  and child map the same pages (copy-on-write, map count 2);
//!                                  prints `ready ADDR LEN CHILD_PID`
//!   anatomy HOLD_MS                builds one of each kind, holds them HOLD_MS, frees them all,
//!                                  then exits: a 64 MiB brk heap (1,024 mallocs of 64 KiB),
//!                                  4 threads each touching 1 MiB of their stack, a 96 MiB
//!                                  anonymous mmap, 32 MiB of shared anonymous memory, and a
//!                                  16 MiB file read through a private mapping
//!   malloc-loop N [fill] [chunks]  N rounds of free + malloc(16..1040), the benchmark workload:
//!                                  writes the first byte of each block, or all of it (`fill`,
//!                                  as a program using what it allocates would). With `chunks`,
//!                                  times the loop in 200 chunks of N/200 rounds and prints
//!                                  `ns-per-round MIN MEDIAN` over the chunks: the minimum is
//!                                  the cost of a round at the machine's fastest moment, which
//!                                  on a VM whose speed drifts compares runs better than a
//!                                  whole run's time

use std::io::{Read, Write};
use std::time::Duration;

const MIB: usize = 1 << 20;
const PAGE: usize = 4096;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize| -> usize {
        args.get(i)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| usage())
    };
    let hold = |i: usize| args.get(i).and_then(|s| s.parse::<u64>().ok());
    match args.first().map(String::as_str) {
        Some("anon") => {
            let len = num(1) * MIB;
            let thp = match args.get(2).map(String::as_str) {
                Some("thp") => true,
                Some("nothp") => false,
                _ => usage(),
            };
            let p = anon(len, thp);
            ready(&format!("{:x} {len}", p as usize));
            wait(hold(3));
        }
        Some("file") => {
            let path = args.get(1).unwrap_or_else(|| usage());
            let (p, len, touched) = file(path, num(2) * MIB, num(3) * MIB);
            ready(&format!("{:x} {len} {touched}", p as usize));
            wait(None);
            let _ = std::fs::remove_file(path);
        }
        Some("fork-share") => fork_share(num(1) * MIB),
        Some("anatomy") => anatomy(hold(1).unwrap_or_else(|| usage())),
        Some("malloc-loop") => {
            let flag = |f: &str| args.iter().skip(2).any(|a| a == f);
            malloc_loop(num(1), flag("fill"), flag("chunks"))
        }
        _ => usage(),
    }
}

fn usage() -> ! {
    eprintln!("usage: memory_fixture anon|file|fork-share|anatomy|malloc-loop ARGS");
    std::process::exit(2)
}

fn ready(what: &str) {
    let mut out = std::io::stdout();
    writeln!(out, "ready {what}").expect("stdout");
    out.flush().expect("stdout");
}

/// Holds until stdin closes, or for `ms` milliseconds.
fn wait(ms: Option<u64>) {
    match ms {
        Some(ms) => std::thread::sleep(Duration::from_millis(ms)),
        None => {
            let mut buf = [0u8; 64];
            while std::io::stdin().read(&mut buf).is_ok_and(|n| n > 0) {}
        }
    }
}

/// An anonymous private mapping of `len` bytes, 2 MiB-aligned, every page written.
fn anon(len: usize, thp: bool) -> *mut u8 {
    const TWO_MIB: usize = 2 * MIB;
    // SAFETY: a fresh anonymous mapping; checked below.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len + TWO_MIB,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(raw, libc::MAP_FAILED, "mmap {len}");
    let start = (raw as usize).next_multiple_of(TWO_MIB);
    // SAFETY: unmapping the unaligned head and tail of our own mapping.
    unsafe {
        if start > raw as usize {
            libc::munmap(raw, start - raw as usize);
        }
        let end = raw as usize + len + TWO_MIB;
        if end > start + len {
            libc::munmap((start + len) as *mut libc::c_void, end - start - len);
        }
        let advice = if thp {
            libc::MADV_HUGEPAGE
        } else {
            libc::MADV_NOHUGEPAGE
        };
        assert_eq!(libc::madvise(start as *mut libc::c_void, len, advice), 0);
    }
    let p = start as *mut u8;
    touch(p, len, PAGE);
    p
}

/// Writes one byte every `step` bytes of `[p, p+len)`.
fn touch(p: *mut u8, len: usize, step: usize) {
    let mut i = 0;
    while i < len {
        // SAFETY: inside the caller's writable mapping; volatile so the write happens.
        unsafe { p.add(i).write_volatile(1) };
        i += step;
    }
}

fn file(path: &str, len: usize, touch_len: usize) -> (*mut u8, usize, usize) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .expect("create the file");
    f.set_len(len as u64).expect("size the file");
    // SAFETY: mapping a file we just sized; checked below.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            std::os::fd::AsRawFd::as_raw_fd(&f),
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED, "mmap {path}");
    let p = p as *mut u8;
    let touch_len = touch_len.min(len);
    touch(p, touch_len, PAGE);
    (p, len, touch_len / PAGE)
}

fn fork_share(len: usize) {
    let p = anon(len, false);
    let (r, w) = pipe();
    // SAFETY: fork in a single-threaded program; the child only reads a pipe and stdin.
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork");
    if child == 0 {
        // SAFETY: closing our copy of the read end, then signalling the parent.
        unsafe {
            libc::close(r);
            libc::write(w, b"x".as_ptr().cast(), 1);
            libc::close(w);
        }
        wait(None);
        std::process::exit(0);
    }
    let mut b = 0u8;
    // SAFETY: waiting for the child's byte on our pipe.
    unsafe {
        libc::close(w);
        libc::read(r, (&mut b as *mut u8).cast(), 1);
    }
    ready(&format!("{:x} {len} {child}", p as usize));
    wait(None);
    let mut status = 0;
    // SAFETY: reaping our child.
    unsafe { libc::waitpid(child, &mut status, 0) };
}

fn pipe() -> (i32, i32) {
    let mut fds = [0; 2];
    // SAFETY: a valid array of two ints.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    (fds[0], fds[1])
}

fn anatomy(hold_ms: u64) {
    // Heap: 1,024 chunks of 64 KiB, below the mmap threshold, so the main arena grows by brk.
    let chunks: Vec<*mut u8> = (0..1024)
        .map(|_| {
            // SAFETY: malloc of a non-zero size, checked.
            let c = unsafe { libc::malloc(64 * 1024) } as *mut u8;
            assert!(!c.is_null());
            touch(c, 64 * 1024, PAGE);
            c
        })
        .collect();
    // Anonymous mmap.
    let anon_len = 96 * MIB;
    let a = anon(anon_len, false);
    // Shared anonymous memory.
    let shm_len = 32 * MIB;
    // SAFETY: a fresh shared anonymous mapping, checked.
    let shm = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            shm_len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(shm, libc::MAP_FAILED);
    touch(shm as *mut u8, shm_len, PAGE);
    // A file read through a private mapping.
    let path = std::env::temp_dir().join(format!("ste-anatomy-{}", std::process::id()));
    let file_len = 16 * MIB;
    // Written from a small buffer: a 16 MiB one, freed at once, made a peak above the held
    // layout, which a map at the peak could then catch half built (the thread stacks below
    // not yet touched) and keep, the layout never rising above it.
    let mut w = std::fs::File::create(&path).expect("create the file");
    let chunk = [7u8; 64 << 10];
    for _ in 0..file_len / chunk.len() {
        w.write_all(&chunk).expect("write the file");
    }
    drop(w);
    let f = std::fs::File::open(&path).expect("open the file");
    // SAFETY: mapping a file of this length read-only; checked.
    let fm = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            file_len,
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            std::os::fd::AsRawFd::as_raw_fd(&f),
            0,
        )
    };
    assert_ne!(fm, libc::MAP_FAILED);
    let mut sum = 0u64;
    for i in (0..file_len).step_by(PAGE) {
        // SAFETY: inside the mapping.
        sum += u64::from(unsafe { (fm as *const u8).add(i).read_volatile() });
    }
    std::hint::black_box(sum);
    // Thread stacks: each thread touches 1 MiB of its own stack, then all hold together.
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(5));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let b = barrier.clone();
            std::thread::Builder::new()
                .stack_size(4 * MIB)
                .spawn(move || {
                    let mut buf = [0u8; MIB];
                    touch(buf.as_mut_ptr(), MIB, PAGE);
                    std::hint::black_box(&mut buf);
                    b.wait();
                    b.wait();
                })
                .expect("spawn")
        })
        .collect();
    barrier.wait();
    ready("anatomy");
    std::thread::sleep(Duration::from_millis(hold_ms));
    barrier.wait();
    for t in threads {
        t.join().expect("join");
    }
    // Give everything back before exiting, so the peak is only while holding.
    // SAFETY: freeing and unmapping what this function allocated and mapped.
    unsafe {
        for c in chunks {
            libc::free(c.cast());
        }
        libc::munmap(a.cast(), anon_len);
        libc::munmap(shm, shm_len);
        libc::munmap(fm, file_len);
    }
    let _ = std::fs::remove_file(&path);
}

/// A malloc-heavy loop: sizes cycle through 16..1040 bytes; 64 blocks live at a time. With
/// `chunks`, prints the fastest and the median chunk's nanoseconds per round.
fn malloc_loop(n: usize, fill: bool, chunks: bool) {
    const CHUNKS: usize = 200;
    let mut keep = [std::ptr::null_mut::<libc::c_void>(); 64];
    if chunks {
        let per = (n / CHUNKS).max(1);
        let mut ns: Vec<f64> = (0..CHUNKS)
            .map(|c| {
                let t = std::time::Instant::now();
                malloc_rounds(&mut keep, c * per..(c + 1) * per, fill);
                t.elapsed().as_nanos() as f64 / per as f64
            })
            .collect();
        ns.sort_by(f64::total_cmp);
        println!("ns-per-round {:.2} {:.2}", ns[0], ns[CHUNKS / 2]);
    } else {
        malloc_rounds(&mut keep, 0..n, fill);
    }
    for p in keep {
        // SAFETY: freeing the blocks still held.
        unsafe { libc::free(p) };
    }
}

fn malloc_rounds(keep: &mut [*mut libc::c_void; 64], rounds: std::ops::Range<usize>, fill: bool) {
    for i in rounds {
        let size = 16 + (i * 16) % 1024;
        // SAFETY: malloc/free of blocks this loop owns; a slot's previous block is freed first.
        unsafe {
            let slot = i % keep.len();
            libc::free(keep[slot]);
            keep[slot] = libc::malloc(size);
            assert!(!keep[slot].is_null());
            if fill {
                std::ptr::write_bytes(keep[slot] as *mut u8, i as u8, size);
            } else {
                *(keep[slot] as *mut u8) = i as u8;
            }
        }
    }
}
