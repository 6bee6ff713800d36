//! Workloads with a known count of system calls, for the `--syscalls` tests and benchmarks.
//!
//!   getppid N           make N getppid calls
//!   threads T N         T threads, each making N getppid calls
//!   fail N              make N openat calls that fail with ENOENT
//!   chain N M           make N getppid calls, then exec itself as `getppid M`
//!
//! Each calls the kernel directly (`libc::syscall`), so nothing in libc can cache or add calls;
//! the tests take what the program makes besides (start-up, exit) from a run with N = 0.

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n = |i: usize| -> u64 {
        args.get(i)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| usage())
    };
    match args.get(1).map(String::as_str) {
        Some("getppid") => getppid(n(2)),
        Some("threads") => {
            let per_thread = n(3);
            let handles: Vec<_> = (0..n(2))
                .map(|_| std::thread::spawn(move || getppid(per_thread)))
                .collect();
            for h in handles {
                h.join().expect("thread");
            }
        }
        Some("fail") => {
            for _ in 0..n(2) {
                // SAFETY: openat with a valid NUL-terminated path; it fails with ENOENT.
                let fd = unsafe {
                    libc::syscall(
                        libc::SYS_openat,
                        libc::AT_FDCWD,
                        c"/nonexistent/ste-fixture".as_ptr(),
                        libc::O_RDONLY,
                    )
                };
                assert!(fd < 0, "/nonexistent/ste-fixture exists");
            }
        }
        Some("chain") => {
            getppid(n(2));
            let err = std::os::unix::process::CommandExt::exec(
                std::process::Command::new(&args[0]).args(["getppid", &args[3]]),
            );
            panic!("exec failed: {err}");
        }
        _ => usage(),
    }
}

fn getppid(n: u64) {
    for _ in 0..n {
        // SAFETY: getppid takes no arguments and cannot fail.
        unsafe { libc::syscall(libc::SYS_getppid) };
    }
}

fn usage() -> ! {
    eprintln!("usage: syscalls_fixture getppid N | threads T N | fail N | chain N M");
    std::process::exit(2)
}
