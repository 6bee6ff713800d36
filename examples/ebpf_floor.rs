//! The floor of the ebpf tracker's cost (see `ste::source::track::ebpf::floor`): runs a command under
//! ste's BPF programs with a reader that only drains the ring buffer.
//!
//!     ebpf_floor [--timer MS] [--cgroup] [--no-ledger] -- COMMAND [ARGS]...
//!
//! `--timer MS` drains every MS ms instead of waking for each record; `--cgroup` runs the
//! command in a cgroup made as ste's accounting makes its own; `--no-ledger` leaves out the
//! per-process ledger's last-switch program (as `ste --no-accounting` does). Prints the
//! records, the reader's wake-ups and its own CPU on stderr; exits with the command's status.
//! Needs root.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut timer = None;
    let mut cgroup = false;
    let mut ledger = true;
    let mut rest = &args[..];
    loop {
        match rest.first().map(String::as_str) {
            Some("--timer") => {
                let ms: u64 = rest
                    .get(1)
                    .and_then(|m| m.parse().ok())
                    .unwrap_or_else(|| usage());
                timer = Some(std::time::Duration::from_millis(ms));
                rest = &rest[2..];
            }
            Some("--cgroup") => {
                cgroup = true;
                rest = &rest[1..];
            }
            Some("--no-ledger") => {
                ledger = false;
                rest = &rest[1..];
            }
            _ => break,
        }
    }
    let argv = match rest.first().map(String::as_str) {
        Some("--") if rest.len() > 1 => &rest[1..],
        _ => usage(),
    };
    match ste::source::track::ebpf::floor::run(argv, timer, cgroup, ledger) {
        Ok(f) => {
            // SAFETY: getrusage fills a zeroed struct.
            let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
            // SAFETY: as above.
            unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
            let cpu_ms = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) as f64 * 1e3
                + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) as f64 / 1e3;
            eprintln!(
                "ebpf_floor: {} records, {} wake-ups, own CPU {cpu_ms:.1} ms",
                f.records, f.wakes
            );
            let code = if libc::WIFEXITED(f.status) {
                libc::WEXITSTATUS(f.status)
            } else {
                128 + libc::WTERMSIG(f.status)
            };
            std::process::exit(code)
        }
        Err(e) => {
            eprintln!("ebpf_floor: {e}");
            std::process::exit(125)
        }
    }
}

fn usage() -> ! {
    eprintln!("usage: ebpf_floor [--timer MS] [--cgroup] [--no-ledger] -- COMMAND [ARGS]...");
    std::process::exit(2)
}
