//! Runs a command in a cgroup made as ste's accounting makes its own, removed at the end: the
//! cgroup's part of a floor (bench/side_by_side.sh, bench/trackers_cost.sh put the ptrace and
//! netlink floors in one, as `ebpf_floor --cgroup` puts its command). What a group costs the
//! command is the kernel's charging of its memory there, which ste's accounting pays too.
//!
//!     in_cgroup -- COMMAND [ARGS]...
//!
//! The command (a floor, and so everything it starts) joins the group before its exec, as
//! ste's child does. Exits with the command's status (128 + N when killed by signal N). Needs
//! root, as making a cgroup does.

use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let argv = match args.first().map(String::as_str) {
        Some("--") if args.len() > 1 => &args[1..],
        _ => {
            eprintln!("usage: in_cgroup -- COMMAND [ARGS]...");
            std::process::exit(2)
        }
    };
    let mut group =
        match ste::source::account::group::Group::create(std::path::Path::new("/proc/self")) {
            Ok(g) => g,
            Err(e) => fail(&format!("cannot make a cgroup: {e}")),
        };
    let joins: Vec<std::fs::File> = group
        .join_paths()
        .iter()
        .map(|p| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(p)
                .unwrap_or_else(|e| fail(&format!("opening {}: {e}", p.display())))
        })
        .collect();
    let fds: Vec<i32> = joins.iter().map(AsRawFd::as_raw_fd).collect();
    let mut command = std::process::Command::new(&argv[0]);
    command.args(&argv[1..]);
    // SAFETY: the hook only writes to descriptors opened above (async-signal-safe).
    unsafe {
        command.pre_exec(move || {
            for &fd in &fds {
                // A task that moves itself (`0`) skips the RCU wait that moving another takes.
                if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        })
    };
    let status = command.status();
    drop(joins);
    let left = group.remove();
    let status = status.unwrap_or_else(|e| fail(&format!("cannot run {}: {e}", argv[0])));
    if !left.is_empty() {
        fail(&format!("cannot remove the cgroup: {}", left.join("; ")));
    }
    use std::os::unix::process::ExitStatusExt;
    std::process::exit(
        status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
    )
}

fn fail(message: &str) -> ! {
    eprintln!("in_cgroup: {message}");
    std::process::exit(125)
}
