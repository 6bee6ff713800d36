//! Starting the command, the parent side: subreaper, the command resolved for `execve`, the
//! credentials it runs with under sudo, starting the child process that waits for the
//! tracker, and the launch errors ste exits with (127/126/125). The child side is `child.rs`
//! (only async-signal-safe raw calls), the invoking user's groups `groups.rs`, the capability
//! policy `privilege.rs`, the signals ste forwards `signals.rs`.
//!
//! Owns the child between its start and `execve`. The child waits on a pipe until a tracker
//! has registered it (ptrace seize, netlink listening, BPF's tree filter), so no event of the
//! tree can be missed, and reports an exec failure through a close-on-exec pipe. Everything
//! the child needs is built before it starts; after that it makes only raw system calls, on
//! memory nothing else writes (see `child::spawn` for why it shares ste's memory, and
//! `child::sys` for why its calls bypass glibc), so ste may start it while another of its
//! threads runs (the BPF loader does, see `command/run.rs`). Must not import a source, the
//! ledger or a report.
//!
//! The child also joins ste's cgroup itself, before it drops privileges: it writes `0` (itself)
//! to the membership files ste names ([`Child::join`], `account::group`), and says how that
//! went on a pipe. A task that moves itself alone skips the kernel's global lock on thread
//! groups, whose write side waits for an RCU grace period (milliseconds: docs/kernel-notes.md)
//! when ste writes the child's pid instead; and the child does it while ste loads BPF.
//!
//! The child is started before the cgroup exists, and waits for the files' names: ste starts
//! it first, as the BPF loader starts, and makes the cgroup after. Making the cgroup first (a
//! mkdir) delayed the start by that much, and then the fork loop ran measurably slower under the
//! ebpf tracker, as did a spin of the same length in its place, but not after the start
//! (bench/README.md): where the command's first process starts relative to the loader's
//! threads decides how the scheduler spreads the tree afterwards.
//!
//! The command gets ste's standard descriptors as they were when ste started, closed ones
//! included: Rust's runtime opens `/dev/null` on a closed fd 0, 1 or 2 before `main` (so that
//! no file ste opens lands there), and [`note_closed_standard_fds`], run before it, tells the
//! child which of them to close again just before its exec. `ste cmd >&-` is then what
//! `cmd >&-` is.
//!
//! `std::process::Command` is not used because `spawn` returns only after the exec, while ste
//! must learn the pid and register it before the exec happens (docs/kernel-notes.md, ptrace).

mod child;
mod groups;
pub mod privilege;
pub mod signals;

use child::{ChildPlan, JOIN_MAX, STAGE_CREDENTIALS, STAGE_LIMITS, Strings, spawn};

use crate::model::{LaunchError, LaunchErrorKind};
use anyhow::{Context, Result, bail};
use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::sync::atomic::{AtomicU8, Ordering};

/// Which of fds 0, 1 and 2 were closed when ste started (bit N for fd N), as
/// [`note_closed_standard_fds`] saw them.
static CLOSED_AT_START: AtomicU8 = AtomicU8::new(0);

/// Notes which standard descriptors are closed. Must run before Rust's runtime fills them
/// with `/dev/null`: the binary registers it in `.init_array`, whose functions the C runtime
/// runs before `main` (and so before the runtime's start-up). Without it, the command gets
/// those `/dev/null`s.
pub extern "C" fn note_closed_standard_fds() {
    let mut closed = 0;
    for fd in 0..3 {
        // SAFETY: F_GETFD only reads the descriptor's flags.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
            closed |= 1 << fd;
        }
    }
    CLOSED_AT_START.store(closed, Ordering::Relaxed);
}

/// The limit on open descriptors ste started with (soft, hard), set when
/// [`raise_descriptor_limit`] raised ste's own.
static NOFILE_AT_START: std::sync::OnceLock<[u64; 2]> = std::sync::OnceLock::new();

/// Raises ste's soft limit on open descriptors to its hard limit; the command gets the limit
/// ste started with back before its exec ([`ChildPlan`]'s `nofile`), so it runs as it would
/// without ste. ste keeps descriptors per live process (the ptrace tracker's held /proc
/// files, the sampler's `statm`), and under a low soft limit its own reads failed (the ptrace
/// tracker's argv at the exec stops, counted as unread). Call it first, before any thread
/// opens a file.
pub fn raise_descriptor_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return;
    };
    if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        let _ = NOFILE_AT_START.set([soft, hard]);
    }
}

/// The limit on locked memory ste started with (soft, hard), set when
/// [`raise_memlock_limit`] lifted ste's own.
static MEMLOCK_AT_START: std::sync::OnceLock<[u64; 2]> = std::sync::OnceLock::new();

/// Lifts ste's limit on locked memory where the kernel charges BPF maps to it (before Linux
/// 5.11; memory cgroups since), when ste may (root): the ebpf tracker's maps take a few MiB,
/// and under the default 64 KiB the kernel refused to make them (EPERM). The command gets the
/// limit ste started with back before its exec ([`ChildPlan`]'s `memlock`). Call it first,
/// before any thread starts.
pub fn raise_memlock_limit() {
    use nix::sys::resource::{RLIM_INFINITY, Resource, getrlimit, setrlimit};
    if crate::kernel::release::Version::running().bpf_memory_in_cgroups() {
        return;
    }
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_MEMLOCK) else {
        return;
    };
    if soft != RLIM_INFINITY
        && setrlimit(Resource::RLIMIT_MEMLOCK, RLIM_INFINITY, RLIM_INFINITY).is_ok()
    {
        let _ = MEMLOCK_AT_START.set([soft, hard]);
    }
}

/// Whether standard descriptor `fd` was closed when ste started (Rust's runtime has held
/// `/dev/null` there since).
pub fn closed_at_start(fd: libc::c_int) -> bool {
    (0..3).contains(&fd) && CLOSED_AT_START.load(Ordering::Relaxed) & (1 << fd) != 0
}

/// Makes ste the reaper of every orphan in its tree (`PR_SET_CHILD_SUBREAPER`).
pub fn become_subreaper() -> Result<()> {
    // SAFETY: prctl with integer arguments only.
    let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error()).context("prctl(PR_SET_CHILD_SUBREAPER)");
    }
    Ok(())
}

/// Who the command runs as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    pub uid: libc::uid_t,
    pub gid: libc::gid_t,
    pub groups: Vec<libc::gid_t>,
    pub user: String,
}

impl Credentials {
    /// Under `sudo`, the invoking user (from `SUDO_UID`, `SUDO_GID`, `SUDO_USER` and the
    /// group database); `None` when ste is not root or was not started by sudo. Looked up once
    /// per process (the groups cost a run of `getent`), for the command and every output.
    pub fn invoking_user() -> Result<Option<Credentials>> {
        static ONCE: std::sync::OnceLock<Result<Option<Credentials>, String>> =
            std::sync::OnceLock::new();
        ONCE.get_or_init(|| Self::look_up().map_err(|e| format!("{e:#}")))
            .clone()
            .map_err(anyhow::Error::msg)
    }

    fn look_up() -> Result<Option<Credentials>> {
        // SAFETY: getuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Ok(None);
        }
        let (Some(uid), Some(gid)) = (std::env::var_os("SUDO_UID"), std::env::var_os("SUDO_GID"))
        else {
            return Ok(None);
        };
        let uid: libc::uid_t = uid
            .to_str()
            .and_then(|s| s.parse().ok())
            .context("SUDO_UID is not a number")?;
        let gid: libc::gid_t = gid
            .to_str()
            .and_then(|s| s.parse().ok())
            .context("SUDO_GID is not a number")?;
        if uid == 0 {
            return Ok(None);
        }
        let user = std::env::var("SUDO_USER").unwrap_or_default();
        let groups = if user.is_empty() {
            vec![gid]
        } else {
            groups::of(&user, gid)
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("cannot list the groups of SUDO_USER {user}"))?
        };
        Ok(Some(Credentials {
            uid,
            gid,
            groups,
            user,
        }))
    }
}

/// The command, resolved and converted for `execve`, ready to fork.
pub struct Prepared {
    argv: Vec<CString>,
    /// Paths to try in order, as `execvp` would (each `PATH` entry, or the name itself).
    candidates: Vec<CString>,
    env: Vec<CString>,
    creds: Option<Credentials>,
}

/// Environment variables the caller wants changed for the command.
pub type EnvOverrides = Vec<(OsString, OsString)>;

impl Prepared {
    pub fn new(
        command: &[OsString],
        creds: Option<Credentials>,
        env_overrides: &EnvOverrides,
    ) -> Result<Prepared> {
        let Some(name) = command.first() else {
            bail!("no command given")
        };
        let argv = command
            .iter()
            .map(|a| CString::new(a.as_bytes()).context("an argument contains a NUL byte"))
            .collect::<Result<Vec<_>>>()?;
        let mut env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
        for (k, v) in env_overrides {
            env.retain(|(ek, _)| ek != k);
            env.push((k.clone(), v.clone()));
        }
        let path = env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone());
        let candidates = search_path(name, path.as_deref())?;
        let env = env
            .into_iter()
            .filter_map(|(k, v)| {
                let mut kv = k.into_vec();
                kv.push(b'=');
                kv.extend(v.into_vec());
                CString::new(kv).ok()
            })
            .collect();
        Ok(Prepared {
            argv,
            candidates,
            env,
            creds,
        })
    }

    pub fn credentials(&self) -> Option<&Credentials> {
        self.creds.as_ref()
    }

    /// Starts the command's process. It sets `mask` as its signal mask (the one ste started
    /// with), waits for [`Child::join`] and writes `0` to each file named there (cgroup
    /// membership: it moves itself), reports how that went ([`Child::joined`]), drops
    /// privileges and waits for [`Child::release`]. Other threads of ste may run meanwhile:
    /// the child touches no lock they could hold.
    pub fn fork(&self, mask: &libc::sigset_t) -> Result<Child> {
        let (go_r, go_w) = pipe()?;
        let (err_r, err_w) = pipe()?;
        let (joined_r, joined_w) = pipe()?;
        // The child reads the plan until it has exec'd or exited, which only a wait tells, so
        // the plan owns copies of everything it points to and is leaked: ste launches one
        // command per process, so this is held once, until ste exits.
        let strings = Strings {
            argv: self.argv.clone(),
            env: self.env.clone(),
            candidates: self.candidates.clone(),
        };
        // `sh path args...` for ENOEXEC, as execvp does for scripts without a shebang.
        let mut sh_argv: Vec<*const libc::c_char> = Vec::with_capacity(strings.argv.len() + 2);
        sh_argv.push(c"/bin/sh".as_ptr());
        sh_argv.push(std::ptr::null());
        sh_argv.extend(strings.argv.iter().skip(1).map(|a| a.as_ptr()));
        sh_argv.push(std::ptr::null());
        let plan: &'static mut ChildPlan = Box::leak(Box::new(ChildPlan {
            go: go_r.as_raw_fd(),
            err: err_w.as_raw_fd(),
            join: vec![0; JOIN_MAX],
            joined: joined_w.as_raw_fd(),
            parent_ends: [go_w.as_raw_fd(), err_r.as_raw_fd(), joined_r.as_raw_fd()],
            argv: null_terminated(&strings.argv),
            env: null_terminated(&strings.env),
            candidates: strings.candidates.iter().map(|c| c.as_ptr()).collect(),
            sh_argv,
            creds: self.creds.as_ref().map(|c| (c.uid, c.gid)),
            groups: self
                .creds
                .as_ref()
                .map(|c| c.groups.clone())
                .unwrap_or_default(),
            mask: *mask,
            closed: CLOSED_AT_START.load(Ordering::Relaxed),
            nofile: NOFILE_AT_START.get().copied(),
            memlock: MEMLOCK_AT_START.get().copied(),
            _strings: strings,
        }));
        let started_ns = crate::bus::sink::monotonic_ns();
        let pid = spawn::start(plan).context("starting the command's process")?;
        drop(go_r);
        drop(err_w);
        drop(joined_w);
        Ok(Child {
            pid,
            started_ns,
            go: Some(go_w),
            err: Some(err_r),
            joined: Some(joined_r),
            join: None,
            join_bytes: 0,
            name: self.argv[0].to_bytes().to_vec(),
        })
    }
}

/// Resolves the command name the way `execvp` does: a name with a `/` is used as is, otherwise
/// each `PATH` entry is tried in order (an empty entry means the current directory).
fn search_path(name: &OsStr, path: Option<&OsStr>) -> Result<Vec<CString>> {
    let bytes = name.as_bytes();
    if bytes.is_empty() {
        bail!("the command name is empty");
    }
    if bytes.contains(&b'/') {
        return Ok(vec![CString::new(bytes)?]);
    }
    let path = path.map(|p| p.as_bytes()).unwrap_or(b"/bin:/usr/bin");
    path.split(|&b| b == b':')
        .map(|dir| {
            let mut full = if dir.is_empty() {
                b".".to_vec()
            } else {
                dir.to_vec()
            };
            full.push(b'/');
            full.extend_from_slice(bytes);
            CString::new(full).context("PATH contains a NUL byte")
        })
        .collect()
}

fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error()).context("pipe2");
    }
    // SAFETY: pipe2 returned two fresh descriptors that nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn null_terminated(v: &[CString]) -> Vec<*const libc::c_char> {
    v.iter()
        .map(|c| c.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// The command's process, waiting for [`Child::release`] until a tracker has registered it.
pub struct Child {
    pub pid: libc::pid_t,
    /// `CLOCK_MONOTONIC` just before the clone that made the process: the kernel's start time
    /// of it (`task->start_time`, which taskstats' elapsed time counts from) comes later,
    /// inside that system call. Taken after the clone instead, a preemption of ste between
    /// the clone and that stamp (milliseconds on a loaded machine) went uncounted.
    pub started_ns: u64,
    go: Option<OwnedFd>,
    err: Option<OwnedFd>,
    /// The read end of the pipe the child reports its joining on, until read.
    joined: Option<OwnedFd>,
    /// The files named to the child by [`Child::join`], once sent.
    join: Option<Vec<CString>>,
    /// The bytes of the message [`Child::join`] sent (its length word included).
    join_bytes: u64,
    name: Vec<u8>,
}

impl Child {
    /// Names the files the child writes `0` to before it drops privileges (cgroup membership;
    /// none: it joins nothing), once, before [`Child::joined`] and [`Child::release`].
    pub fn join(&mut self, files: Vec<CString>) -> Result<()> {
        if self.join.is_some() {
            bail!("the command's process was already told what to join");
        }
        let mut msg = vec![0u8; 4];
        for f in &files {
            msg.extend_from_slice(f.as_bytes_with_nul());
        }
        let len = msg.len() - 4;
        if len > JOIN_MAX {
            bail!("the cgroup paths are too long to hand to the command's process ({len} bytes)");
        }
        msg[..4].copy_from_slice(&(len as u32).to_ne_bytes());
        self.join = Some(files);
        self.join_bytes = msg.len() as u64;
        let go = self.go.as_ref().context("child already released")?;
        // Within PIPE_BUF into an empty pipe: written whole, or not at all.
        // SAFETY: writing a valid buffer to an owned pipe.
        let n = unsafe { libc::write(go.as_raw_fd(), msg.as_ptr().cast(), msg.len()) };
        if n != msg.len() as isize {
            return Err(std::io::Error::last_os_error())
                .context("telling the command's process what to join");
        }
        Ok(())
    }

    /// Lets the child go on to exec (telling it to join nothing if [`Child::join`] was not
    /// called).
    pub fn release(&mut self) -> Result<()> {
        if self.join.is_none() {
            self.join(Vec::new())?;
        }
        let go = self.go.take().context("child already released")?;
        // SAFETY: writing one byte from a valid buffer to an owned pipe.
        let n = unsafe { libc::write(go.as_raw_fd(), [1u8].as_ptr().cast(), 1) };
        if n != 1 {
            return Err(std::io::Error::last_os_error()).context("releasing the command");
        }
        Ok(())
    }

    /// What the child's own code reads and writes before its exec, in bytes (`rchar`,
    /// `wchar`): the join message and the release byte from its pipe; a `0` to each file it
    /// joins and its 8-byte answer (`child::run`). The kernel counts them as the process's
    /// I/O; they are ste's set-up (`model::BeforeRelease`). Call it once [`Child::join`] was.
    pub fn setup_io(&self) -> (u64, u64) {
        let files = self.join.as_ref().map_or(0, Vec::len) as u64;
        (self.join_bytes + 1, files + 8)
    }

    /// Waits for the child to have written `0` to the files named by [`Child::join`] (which
    /// must come first): `Ok` when it did (or was given none), else the file that failed and
    /// why.
    pub fn joined(&mut self) -> std::io::Result<()> {
        let Some(files) = &self.join else {
            return Err(std::io::Error::other(
                "the command's process was not told what to join",
            ));
        };
        let Some(fd) = self.joined.take() else {
            return Ok(());
        };
        let mut buf = [0u8; 8];
        if read_full(&fd, &mut buf)? < buf.len() {
            return Err(std::io::Error::other(
                "the command's process ended before it could join",
            ));
        }
        let index = u32::from_ne_bytes(buf[..4].try_into().expect("4 bytes")) as usize;
        match i32::from_ne_bytes(buf[4..].try_into().expect("4 bytes")) {
            0 => Ok(()),
            errno => {
                let e = std::io::Error::from_raw_os_error(errno);
                let file = files.get(index).map_or_else(String::new, |f| {
                    format!("cannot write to {}: ", f.to_string_lossy())
                });
                Err(std::io::Error::new(e.kind(), format!("{file}{e}")))
            }
        }
    }

    /// Kills a child that was never released (ste could not set up tracking).
    /// Tells the waiting child not to run the command (it exits 125 before its exec), for a
    /// tracker that already watches it: its end is the tracker's to see and reap.
    pub fn cancel(&mut self) {
        self.go.take();
    }

    pub fn abandon(mut self) {
        // Closing the pipe makes the waiting child exit 125 without running the command.
        self.go.take();
        let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(self.pid), None);
    }

    /// The plain value trackers get: the pid and, to be called once the child has exec'd or
    /// exited, how its exec went (this takes the exec-error pipe).
    pub fn launched(&mut self) -> crate::bus::launched::Launched {
        let report = self.take_exec_report();
        crate::bus::launched::Launched::new(self.pid, Box::new(move || report.outcome()))
    }

    /// Takes the exec-error pipe, to be read once the child has exec'd or exited.
    pub fn take_exec_report(&mut self) -> ExecReport {
        ExecReport {
            fd: self.err.take(),
            name: std::mem::take(&mut self.name),
        }
    }
}

/// Reads `fd` until `buf` is full or the other end is closed; returns how much it read.
fn read_full(fd: &OwnedFd, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: reading into the unfilled part of a valid buffer.
        let n = unsafe {
            libc::read(
                fd.as_raw_fd(),
                buf[got..].as_mut_ptr().cast(),
                buf.len() - got,
            )
        };
        match n {
            0 => break,
            n if n < 0 => {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            n => got += n as usize,
        }
    }
    Ok(got)
}

/// The read end of the child's exec-error pipe.
pub struct ExecReport {
    fd: Option<OwnedFd>,
    name: Vec<u8>,
}

impl ExecReport {
    /// Blocks until the child exec'd (`Ok(())`) or failed to (`Err` with the launch error).
    /// Call it when the child has exec'd or exited, or from a thread that may block.
    pub fn outcome(mut self) -> std::result::Result<(), LaunchError> {
        let Some(fd) = self.fd.take() else {
            return Ok(());
        };
        let mut buf = [0u8; 8];
        if read_full(&fd, &mut buf).unwrap_or(0) < buf.len() {
            return Ok(());
        }
        let stage = u32::from_ne_bytes(buf[..4].try_into().expect("4 bytes"));
        let errno = u32::from_ne_bytes(buf[4..].try_into().expect("4 bytes")) as i32;
        Err(launch_error(&self.name, stage, errno))
    }
}

fn launch_error(name: &[u8], stage: u32, errno: i32) -> LaunchError {
    let name = String::from_utf8_lossy(name);
    let err = std::io::Error::from_raw_os_error(errno);
    if stage == STAGE_LIMITS {
        return LaunchError {
            kind: LaunchErrorKind::Other,
            message: format!(
                "could not give {name} back the limits (open files, locked memory) ste started with: {err}"
            ),
        };
    }
    if stage == STAGE_CREDENTIALS {
        return LaunchError {
            kind: LaunchErrorKind::Other,
            message: format!("could not switch to the invoking user to run {name}: {err}"),
        };
    }
    match errno {
        libc::ENOENT | libc::ENOTDIR => LaunchError {
            kind: LaunchErrorKind::NotFound,
            message: format!("{name}: command not found"),
        },
        _ => LaunchError {
            kind: LaunchErrorKind::NotExecutable,
            message: format!("{name}: cannot execute: {err}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::child::STAGE_EXEC;
    use super::*;

    #[test]
    fn path_search_follows_execvp() {
        let c = search_path(OsStr::new("ls"), Some(OsStr::new("/a::/b"))).unwrap();
        let c: Vec<_> = c.iter().map(|c| c.to_str().unwrap().to_string()).collect();
        assert_eq!(c, ["/a/ls", "./ls", "/b/ls"]);
        let c = search_path(OsStr::new("./x"), Some(OsStr::new("/a"))).unwrap();
        assert_eq!(c[0].to_str().unwrap(), "./x");
        assert!(search_path(OsStr::new(""), None).is_err());
    }

    /// Starts `/bin/true` (as whoever runs the tests), hands it `files` to join, releases it
    /// and reaps it; returns what it said about joining.
    fn join_and_run(files: &[&std::path::Path]) -> std::io::Result<()> {
        let prepared = Prepared::new(&["/bin/true".into()], None, &Vec::new()).unwrap();
        // SAFETY: an empty set is a valid signal mask.
        let mask = unsafe { std::mem::zeroed::<libc::sigset_t>() };
        let mut child = prepared.fork(&mask).unwrap();
        let files = files
            .iter()
            .map(|f| CString::new(f.as_os_str().as_bytes()).unwrap())
            .collect();
        child.join(files).unwrap();
        assert!(child.join(Vec::new()).is_err(), "told twice");
        let joined = child.joined();
        child.release().unwrap();
        let status = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(child.pid), None);
        assert_eq!(
            status.unwrap(),
            nix::sys::wait::WaitStatus::Exited(nix::unistd::Pid::from_raw(child.pid), 0)
        );
        joined
    }

    #[test]
    fn the_child_writes_0_to_each_file_it_is_told_and_names_the_one_that_failed() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(&a, "").unwrap();
        std::fs::write(&b, "").unwrap();
        join_and_run(&[&a, &b]).unwrap();
        assert_eq!(std::fs::read(&a).unwrap(), b"0");
        assert_eq!(std::fs::read(&b).unwrap(), b"0");
        // Told nothing: joins nothing, and says so.
        join_and_run(&[]).unwrap();
        let missing = dir.path().join("no-such-dir/tasks");
        std::fs::write(&a, "").unwrap();
        let e = join_and_run(&[&a, &missing]).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
        assert!(e.to_string().contains("no-such-dir/tasks"), "{e}");
        assert_eq!(
            std::fs::read(&a).unwrap(),
            b"0",
            "the files before it were joined"
        );
    }

    #[test]
    fn launch_errors_map_to_exit_statuses() {
        assert_eq!(
            launch_error(b"nope", STAGE_EXEC, libc::ENOENT).kind,
            LaunchErrorKind::NotFound
        );
        assert_eq!(
            launch_error(b"x", STAGE_EXEC, libc::EACCES).kind,
            LaunchErrorKind::NotExecutable
        );
        assert_eq!(
            launch_error(b"x", STAGE_CREDENTIALS, libc::EPERM).kind,
            LaunchErrorKind::Other
        );
        // ste's own failure (125), said as such: not "command not found".
        let e = launch_error(b"x", STAGE_LIMITS, libc::EINVAL);
        assert_eq!(e.kind, LaunchErrorKind::Other);
        assert!(
            e.message.contains("limits (open files, locked memory)"),
            "{}",
            e.message
        );
    }
}
