//! Workloads with a known answer, for ste's integration tests and benchmarks.
//!
//! Each subcommand does one thing whose ground truth is fixed: how many processes and threads
//! it creates, how much memory it touches, how much CPU it burns, how it exits. Built by
//! `cargo test` (examples are) at `target/<profile>/examples/fixture`.
//!
//!   fill MIB [HOLD_MS] [byte]  malloc MIB MiB and write every page (every byte with `byte`),
//!                              like the seed's fill.c; then keep it for HOLD_MS
//!   fill-until MIB MS          fill MIB MiB as `fill` does, hold it until 3/4 of MS after
//!                              the start, free it, and end at MS: the wall time is MS
//!                              whatever MIB is, the unmapping included (for benches that
//!                              compare memory alone)
//!   fillfill MIB               the seed's fillfill.c: fill MIB MiB byte by byte and free it,
//!                              fork, the child fills 2×MIB MiB the same way; peak 2×MIB MiB
//!   threads N MIB [HOLD_MS]    N threads each touch MIB MiB; all alive at once for HOLD_MS
//!                              (default 100), then exit
//!   orphan CPU_MS              fork a child that forks a grandchild and exits at once; the
//!                              orphaned grandchild burns CPU_MS of CPU; 3 processes in all
//!   forks N                    fork N children that exit at once, waiting for each
//!   thread-loop N              after 100 ms, start N threads one after the other, each
//!                              ending at once and joined before the next; 1 process, N+1
//!                              threads
//!   exit CODE                  exit with CODE
//!   signal SIG                 kill itself with signal SIG
//!   daemon MS                  leave a detached grandchild (setsid) sleeping MS; exit at once
//!   sleep MS                   sleep MS
//!   spin MS                    burn MS of CPU
//!   spin-then-exec MS PROG ARG.. a child burns MS of CPU and is waited for, then this process
//!                              burns MS of CPU itself, then execs PROG (CPU before the exec)
//!   echo-stdin                 copy stdin to stdout (for pass-through tests)
//!   signals                    print each SIGINT/SIGTERM/SIGHUP it receives, exit on SIGTERM
//!   leader-first CODE          the main thread ends first (pthread_exit); another thread
//!                              exits the process with CODE 50 ms later
//!   stop-self                  stop itself with SIGSTOP, print "continued" when resumed

use std::io::{Read, Write};
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| -> u64 {
        args.get(i)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| usage())
    };
    match args.first().map(String::as_str) {
        Some("fill") => {
            let bytes_mode = args.iter().any(|a| a == "byte");
            let hold = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(0);
            fill(arg(1) << 20, bytes_mode);
            std::thread::sleep(Duration::from_millis(hold));
        }
        Some("fill-until") => {
            let start = Instant::now();
            let p = fill(arg(1) << 20, false);
            let until = Duration::from_millis(arg(2));
            std::thread::sleep((until * 3 / 4).saturating_sub(start.elapsed()));
            // SAFETY: free of what fill returned, once.
            unsafe { libc::free(p.cast()) };
            std::thread::sleep(until.saturating_sub(start.elapsed()));
        }
        Some("fillfill") => fillfill(arg(1) << 20),
        Some("threads") => threads(
            arg(1) as usize,
            arg(2) << 20,
            args.get(3).and_then(|s| s.parse().ok()).unwrap_or(100),
        ),
        Some("orphan") => orphan(arg(1)),
        Some("forks") => {
            for _ in 0..arg(1) {
                // SAFETY: fork in a single-threaded program; the child only calls _exit.
                match unsafe { libc::fork() } {
                    0 => unsafe { libc::_exit(0) },
                    pid if pid > 0 => wait(pid),
                    _ => panic!("fork failed"),
                }
            }
        }
        Some("thread-loop") => {
            // Later than the process's start, so that the threads' lifetimes are not the
            // process's (a taskstats record is matched to the one it fits).
            std::thread::sleep(Duration::from_millis(100));
            for _ in 0..arg(1) {
                std::thread::spawn(|| ()).join().unwrap();
            }
        }
        Some("exit") => std::process::exit(arg(1) as i32),
        Some("signal") => {
            // SAFETY: restoring the default action then raising the signal.
            unsafe {
                libc::signal(arg(1) as i32, libc::SIG_DFL);
                libc::raise(arg(1) as i32);
            }
            std::process::exit(99);
        }
        Some("daemon") => daemon(arg(1)),
        Some("sleep") => std::thread::sleep(Duration::from_millis(arg(1))),
        Some("spin") => spin(Duration::from_millis(arg(1))),
        Some("spin-then-exec") => spin_then_exec(Duration::from_millis(arg(1)), &args[2..]),
        Some("echo-stdin") => {
            let mut buf = Vec::new();
            std::io::stdin().read_to_end(&mut buf).unwrap();
            std::io::stdout().write_all(&buf).unwrap();
        }
        Some("signals") => signals(),
        Some("leader-first") => {
            let code = arg(1) as i32;
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                std::process::exit(code);
            });
            // SAFETY: the raw exit system call ends the calling thread only (exit_group would
            // end the process); pthread_exit would unwind through Rust frames and abort.
            unsafe { libc::syscall(libc::SYS_exit, 0) };
            unreachable!("exit(2) returned");
        }
        Some("stop-self") => {
            // SAFETY: stopping ourselves; a SIGCONT resumes us.
            unsafe { libc::raise(libc::SIGSTOP) };
            println!("continued");
        }
        _ => usage(),
    }
}

fn usage() -> ! {
    eprintln!(
        "usage: fixture fill|fill-until|fillfill|threads|orphan|forks|thread-loop|exit|signal|daemon|sleep|spin|echo-stdin|signals|stop-self ARGS"
    );
    std::process::exit(2)
}

/// The seed's fillfill.c.
fn fillfill(bytes: u64) {
    // SAFETY: free of what fill returned, once.
    unsafe { libc::free(fill(bytes, true).cast()) };
    // SAFETY: fork in a single-threaded program; the child fills and exits.
    match unsafe { libc::fork() } {
        0 => {
            // SAFETY: as above.
            unsafe { libc::free(fill(2 * bytes, true).cast()) };
            std::process::exit(0)
        }
        pid if pid > 0 => wait(pid),
        _ => panic!("fork failed"),
    }
}

/// Writes every page (or byte) of a fresh allocation so it all becomes resident.
fn fill(bytes: u64, every_byte: bool) -> *mut u8 {
    let len = bytes as usize;
    // SAFETY: malloc of a non-zero size; checked for null below.
    let p = unsafe { libc::malloc(len) as *mut u8 };
    assert!(!p.is_null(), "malloc({len}) failed");
    let step = if every_byte { 1 } else { 4096 };
    let mut i = 0;
    while i < len {
        // SAFETY: i < len, inside the allocation; volatile so the writes are not elided.
        unsafe { p.add(i).write_volatile(b'F') };
        i += step;
    }
    std::hint::black_box(p)
}

fn threads(n: usize, bytes: u64, hold_ms: u64) {
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(n + 1));
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let b = barrier.clone();
            std::thread::spawn(move || {
                let mut v = vec![0u8; bytes as usize];
                for i in (0..v.len()).step_by(4096) {
                    v[i] = 1;
                }
                std::hint::black_box(&v);
                b.wait(); // everyone resident at once
                b.wait(); // released together
            })
        })
        .collect();
    barrier.wait();
    std::thread::sleep(Duration::from_millis(hold_ms));
    barrier.wait();
    for h in handles {
        h.join().unwrap();
    }
}

fn orphan(cpu_ms: u64) {
    // SAFETY: fork in a single-threaded program.
    match unsafe { libc::fork() } {
        0 => {
            // SAFETY: getpid cannot fail.
            let parent = unsafe { libc::getpid() };
            // SAFETY: as above, in the child.
            match unsafe { libc::fork() } {
                0 => {
                    // The grandchild: wait until its parent has exited (it is reparented to
                    // the subreaper), then burn CPU.
                    // SAFETY: getppid cannot fail.
                    while unsafe { libc::getppid() } == parent {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    spin(Duration::from_millis(cpu_ms));
                    std::process::exit(0);
                }
                _ => std::process::exit(0),
            }
        }
        pid => wait(pid),
    }
}

fn daemon(ms: u64) {
    // SAFETY: fork/setsid in a single-threaded program.
    match unsafe { libc::fork() } {
        0 => {
            unsafe { libc::setsid() };
            match unsafe { libc::fork() } {
                0 => {
                    // Detach from the caller's stdio, as daemons do.
                    let null = std::fs::OpenOptions::new()
                        .read(true)
                        .write(true)
                        .open("/dev/null")
                        .unwrap();
                    for fd in 0..3 {
                        unsafe { libc::dup2(std::os::fd::AsRawFd::as_raw_fd(&null), fd) };
                    }
                    std::thread::sleep(Duration::from_millis(ms));
                    std::process::exit(0);
                }
                _ => std::process::exit(0),
            }
        }
        pid => wait(pid),
    }
}

/// A child burns `d` of CPU (reaped: it lands in this process's `RUSAGE_CHILDREN`), then this
/// process burns `d` (its `RUSAGE_SELF`), then execs `command`: both counters survive the exec.
fn spin_then_exec(d: Duration, command: &[String]) {
    use std::os::unix::process::CommandExt;
    let Some((program, rest)) = command.split_first() else {
        usage()
    };
    // SAFETY: fork in a single-threaded program; the child spins and exits.
    match unsafe { libc::fork() } {
        0 => {
            spin(d);
            // SAFETY: ending the child without running the parent's exit handlers.
            unsafe { libc::_exit(0) }
        }
        pid if pid > 0 => wait(pid),
        _ => panic!("fork failed"),
    }
    spin(d);
    let e = std::process::Command::new(program).args(rest).exec();
    panic!("cannot exec {program}: {e}");
}

/// Burns `d` of this thread's CPU time (not wall time).
fn spin(d: Duration) {
    let start = cpu_now();
    let mut x = 0u64;
    while cpu_now() - start < d {
        for _ in 0..10_000 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

fn cpu_now() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn wait(pid: i32) {
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
}

static LAST: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    LAST.store(sig, std::sync::atomic::Ordering::SeqCst);
}

fn signals() {
    for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: installing an async-signal-safe handler that only stores an atomic.
        unsafe { libc::signal(s, on_signal as *const () as libc::sighandler_t) };
    }
    println!("ready");
    std::io::stdout().flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let s = LAST.swap(0, std::sync::atomic::Ordering::SeqCst);
        if s != 0 {
            println!("got {s}");
            std::io::stdout().flush().unwrap();
            if s == libc::SIGTERM {
                std::process::exit(0);
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    std::process::exit(3);
}
