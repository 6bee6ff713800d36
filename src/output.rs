//! Opening the files ste writes for the user: `-o`, `--json`, `--html`, `--perfetto`, `ste
//! record -o`, and the outputs of `ste report` and `ste maps`; and the files it reads for the
//! user, the inputs of `ste report` and `ste diff` ([`open_input`]).
//!
//! Owns how such a file is opened: as whom, through which path, onto which existing file. It
//! writes nothing into the file and knows no format.
//!
//! - **Inputs** are opened as the user who invoked sudo when there is one, as the shell's
//!   `<FILE` would open them: `sudo ste report /root/secret` must not read what that user
//!   cannot. The path is the user's to name, so it is opened as it is, links followed.
//!
//! - **As whom.** Under sudo ([`Credentials::invoking_user`]) the file is opened by a
//!   short-lived thread that takes the invoking user's filesystem identity (`setfsuid`,
//!   `setfsgid` and the user's groups, raw system calls so they change that thread alone:
//!   glibc's `setgroups` changes every thread of the process). The kernel then checks the
//!   user's own permissions on every directory and on an existing file, as the user's shell
//!   would for `>FILE`, and a new file belongs to the user. Creating as root and `fchown`ing
//!   after was the other way; it would need every permission check redone by hand. That thread
//!   needs `CAP_SETUID`/`CAP_SETGID`, so outputs are opened before ste drops its capabilities
//!   (`launch/privilege.rs`), which is also before the command starts: a refusal costs no run.
//! - **Through which path.** The path is walked one component at a time from a directory
//!   descriptor, each component opened with `O_PATH|O_NOFOLLOW` and checked by `fstat` of what
//!   was opened (no check-then-use race). A symbolic link in a sticky world-writable directory
//!   is followed only when the follower or the directory's owner owns it, and a file that
//!   already exists in such a directory is written only when the writer or the directory's
//!   owner owns it and it has no other hard link: the rules of the kernel's
//!   `fs.protected_symlinks` and `fs.protected_regular` (plus the hard-link case
//!   `fs.protected_hardlinks` closes), applied here because ste must be safe on machines that
//!   switch them off. A directory in such a directory is entered under the same rule: one
//!   another user made there is that user's to fill (`mkdir /tmp/x/d; ln -s VICTIM
//!   /tmp/x/d/out` needs no sticky directory of its own), so it is refused, as the kernel's
//!   rules, which judge only the last directory, would not. Links in procfs (`/dev/stdout` →
//!   `/proc/self/fd/1`) are left to the kernel: they name open files, not paths, and procfs has
//!   no world-writable directory.
//! - **Onto which file.** A new file is made with `O_CREAT|O_EXCL|O_NOFOLLOW`; an existing one
//!   is reopened for writing through its `O_PATH` descriptor (`/proc/self/fd/N`, the same
//!   inode), so nothing is opened for writing (a FIFO, a device) before it passed the checks.
//!   An existing regular file is emptied only by [`Opened::begin`], once every output of the
//!   run has been opened: a refused `--json` does not cost the `-o` file its old content. A
//!   new file is removed again if the run ends before it is written to ([`Opened`]'s drop).
//!
//! Hand-written because no crate applies these rules: openat2's `RESOLVE_NO_SYMLINKS` refuses
//! every link (`/var/run`, `/dev/stdout`), and capability-style crates confine paths to a root
//! rather than judge links by owner.

use crate::launch::Credentials;
use nix::errno::Errno;
use nix::fcntl::{OFlag, openat, readlinkat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat};
use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Symbolic links followed in one path at most, as the kernel's `MAXSYMLINKS`.
const MAX_LINKS: usize = 40;
/// Times a component that appeared or vanished between two opens is tried again.
const MAX_RACES: usize = 8;

/// An output file, open for writing and checked, not yet emptied. A file this open made is
/// removed again when it is dropped before [`Opened::into_file`] (a run that failed to
/// start leaves no empty file behind).
#[derive(Debug)]
pub struct Opened {
    file: Option<File>,
    /// An existing regular file, emptied by [`Opened::begin`].
    empty: bool,
    /// The directory and name of a file this open made.
    made: Option<(OwnedFd, Vec<u8>)>,
}

impl Opened {
    /// Empties an existing file (once): call it when every output of the run is open.
    pub fn begin(&mut self) -> io::Result<()> {
        if std::mem::take(&mut self.empty)
            && let Some(f) = &self.file
        {
            f.set_len(0)?;
        }
        Ok(())
    }

    /// The file, emptied, kept whatever happens next.
    pub fn into_file(mut self) -> io::Result<File> {
        self.begin()?;
        self.made = None;
        self.file
            .take()
            .ok_or_else(|| io::Error::other("the file was taken already"))
    }
}

impl Drop for Opened {
    /// Removes the file this open made, if the name still leads to it (not to a file made
    /// there since).
    fn drop(&mut self) {
        let (Some((dir, name)), Some(file)) = (self.made.take(), self.file.as_ref()) else {
            return;
        };
        let same = match (
            fstat(file),
            nix::sys::stat::fstatat(
                &dir,
                name.as_slice(),
                nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
            ),
        ) {
            (Ok(a), Ok(b)) => (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino),
            _ => false,
        };
        if same {
            let _ = nix::unistd::unlinkat(
                &dir,
                name.as_slice(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            );
        }
    }
}

/// The path that names standard output wherever ste takes an output file.
pub const STDOUT: &str = "-";

/// Whether `path` is `-`, standard output.
pub fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == STDOUT
}

/// Opens `path` to write an output, as the user who invoked sudo when there is one (see the
/// module header for every check); `-` is standard output (a copy of its descriptor, which
/// ste's invoker opened). Errors are one line without the path: callers name it.
pub fn open(path: &Path) -> io::Result<Opened> {
    if is_stdout(path) {
        return Ok(Opened {
            file: Some(File::from(io::stdout().as_fd().try_clone_to_owned()?)),
            empty: false,
            made: None,
        });
    }
    as_invoking_user(|me| walk(path, me))
}

/// Opens `path` to read an input, as the user who invoked sudo when there is one (the kernel
/// checks that user's permissions). Errors are one line without the path: callers name it.
pub fn open_input(path: &Path) -> io::Result<File> {
    as_invoking_user(|_| File::open(path))
}

/// Runs `open` with the filesystem identity of the user who invoked sudo (in a short-lived
/// thread that takes it), or as ste itself when there is none; `open` gets that user's uid.
fn as_invoking_user<T: Send>(
    open: impl FnOnce(libc::uid_t) -> io::Result<T> + Send,
) -> io::Result<T> {
    let creds = Credentials::invoking_user()
        .map_err(|e| io::Error::other(format!("cannot tell who invoked sudo: {e:#}")))?;
    match creds {
        None => open(crate::kernel::calls::euid()),
        Some(c) => std::thread::scope(|s| {
            std::thread::Builder::new()
                .name("ste-output".into())
                .spawn_scoped(s, || {
                    become_user(&c)?;
                    open(c.uid)
                })?
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("the thread opening it panicked")))
        }),
    }
}

/// Writes `line` and a line end on stderr; `false` when stderr would not take it (closed,
/// full). Never panics, as `eprintln!` does: ste's messages must not end a run that went well,
/// and a report that could not be said is told by the exit status instead (`command::run`).
pub fn say(line: &str) -> bool {
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    err.write_all(line.as_bytes())
        .and_then(|()| err.write_all(b"\n"))
        .and_then(|()| err.flush())
        .is_ok()
}

/// [`open`] and [`Opened::into_file`]: for a command that writes one output.
pub fn create(path: &Path) -> io::Result<File> {
    open(path)?.into_file()
}

/// Gives the calling thread the filesystem identity of `c` (and only this thread: each Linux
/// thread has its own credentials, and these are raw calls, not glibc's process-wide ones).
fn become_user(c: &Credentials) -> io::Result<()> {
    if let Err(e) = crate::kernel::calls::set_thread_groups(&c.groups) {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "cannot take the groups of uid {}, who invoked sudo: {e}",
                c.uid
            ),
        ));
    }
    // setfsuid/setfsgid report no error, so the ids the thread has afterwards are compared.
    let (uid, gid) = crate::kernel::calls::set_thread_fs_ids(c.uid, c.gid);
    if (uid, gid) != (c.uid, c.gid) {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "cannot take the identity of uid {} gid {}, who invoked sudo",
                c.uid, c.gid
            ),
        ));
    }
    Ok(())
}

/// A directory reached by the walk, with its status at the time it was opened.
struct Dir {
    fd: OwnedFd,
    stat: FileStat,
}

impl Dir {
    fn open(path: &str) -> io::Result<Dir> {
        let fd = nix::fcntl::open(
            path,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        let stat = fstat(&fd)?;
        Ok(Dir { fd, stat })
    }

    /// Sticky and writable by everyone: where another user can plant a name for ste to use.
    fn is_shared(&self) -> bool {
        let mode = self.stat.st_mode;
        mode & libc::S_ISVTX != 0 && mode & libc::S_IWOTH != 0
    }
}

fn kind(stat: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(stat.st_mode & SFlag::S_IFMT.bits())
}

fn refused(text: String) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, text)
}

/// How a component is called in a refusal: "it" for the file itself.
fn called(name: &[u8], last: bool) -> String {
    if last {
        "it".into()
    } else {
        format!("its component {:?}", String::from_utf8_lossy(name))
    }
}

/// `fs.protected_symlinks`: a link in a shared directory is followed only when the follower
/// (`me`) or the directory's owner owns it.
fn check_link(dir: &Dir, link: &FileStat, me: libc::uid_t, who: &str) -> io::Result<()> {
    if dir.is_shared() && link.st_uid != me && link.st_uid != dir.stat.st_uid {
        return Err(refused(format!(
            "refused: {who} is a symbolic link owned by uid {} in a sticky world-writable directory owned by uid {} (another user may have planted it)",
            link.st_uid, dir.stat.st_uid
        )));
    }
    Ok(())
}

/// `fs.protected_regular`, and hard links: an existing file in a shared directory is written
/// only when the writer (`me`) or the directory's owner owns it, and no other name leads to
/// it (another user may have linked someone's file there where `fs.protected_hardlinks` is
/// off).
fn check_existing(dir: &Dir, file: &FileStat, me: libc::uid_t) -> io::Result<()> {
    if !dir.is_shared() {
        return Ok(());
    }
    if file.st_uid != me && file.st_uid != dir.stat.st_uid {
        return Err(refused(format!(
            "refused: it already exists, owned by uid {}, in a sticky world-writable directory owned by uid {} (another user may have planted it)",
            file.st_uid, dir.stat.st_uid
        )));
    }
    if kind(file) == SFlag::S_IFREG && file.st_nlink > 1 {
        return Err(refused(format!(
            "refused: it already exists in a sticky world-writable directory with {} other hard links (another user may have linked it there)",
            file.st_nlink - 1
        )));
    }
    Ok(())
}

/// A directory in a shared directory is entered only when the walker (`me`) or the shared
/// directory's owner owns it: what another user made there, that user fills as they like.
fn check_entered(dir: &Dir, sub: &FileStat, me: libc::uid_t, name: &[u8]) -> io::Result<()> {
    if dir.is_shared() && sub.st_uid != me && sub.st_uid != dir.stat.st_uid {
        return Err(refused(format!(
            "refused: {} is a directory owned by uid {} in a sticky world-writable directory owned by uid {} (another user may have planted it)",
            called(name, false),
            sub.st_uid,
            dir.stat.st_uid
        )));
    }
    Ok(())
}

/// Walks `path` as described in the module header and opens its last component for writing.
fn walk(path: &Path, me: libc::uid_t) -> io::Result<Opened> {
    let bytes = path.as_os_str().as_bytes();
    if bytes.is_empty() {
        return Err(io::Error::new(io::ErrorKind::NotFound, "the path is empty"));
    }
    if bytes.ends_with(b"/") {
        return Err(Errno::EISDIR.into());
    }
    let mut dir = Dir::open(if bytes[0] == b'/' { "/" } else { "." })?;
    let mut names = components(bytes);
    let (mut links, mut races) = (0, 0);
    while let Some(name) = names.pop_front() {
        let last = names.is_empty();
        let fd = match openat(
            &dir.fd,
            name.as_slice(),
            OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(Errno::ENOENT) if last => match create_new(&dir, &name) {
                Err(Errno::EEXIST) if races < MAX_RACES => {
                    // Made by someone else since the look-up: look again.
                    races += 1;
                    names.push_front(name);
                    continue;
                }
                other => return Ok(other?),
            },
            Err(e) => return Err(e.into()),
        };
        let stat = fstat(&fd)?;
        match kind(&stat) {
            SFlag::S_IFLNK => {
                check_link(&dir, &stat, me, &called(&name, last))?;
                links += 1;
                if links > MAX_LINKS {
                    return Err(Errno::ELOOP.into());
                }
                if on_procfs(&fd)? {
                    // A link to an open file (/proc/self/fd/1): only the kernel can follow it.
                    if let Some(n) = closed_standard_fd(&dir, &name) {
                        return Err(io::Error::new(
                            io::ErrorKind::NotFound,
                            format!("it names ste's fd {n}, which was closed when ste started"),
                        ));
                    }
                    let target = openat(
                        &dir.fd,
                        name.as_slice(),
                        OFlag::O_PATH | OFlag::O_CLOEXEC,
                        Mode::empty(),
                    )?;
                    let stat = fstat(&target)?;
                    if last {
                        return reopen(&target, &stat);
                    }
                    if kind(&stat) != SFlag::S_IFDIR {
                        return Err(Errno::ENOTDIR.into());
                    }
                    dir = Dir { fd: target, stat };
                } else {
                    let target = readlinkat(&fd, "")?;
                    let target = target.as_bytes();
                    if target.first() == Some(&b'/') {
                        dir = Dir::open("/")?;
                    }
                    let mut spliced = components(target);
                    if target.ends_with(b"/") && last {
                        return Err(Errno::EISDIR.into());
                    }
                    spliced.extend(names);
                    names = spliced;
                }
            }
            SFlag::S_IFDIR if !last => {
                check_entered(&dir, &stat, me, &name)?;
                dir = Dir { fd, stat };
            }
            SFlag::S_IFDIR => return Err(Errno::EISDIR.into()),
            _ if !last => return Err(Errno::ENOTDIR.into()),
            _ => {
                check_existing(&dir, &stat, me)?;
                return reopen(&fd, &stat);
            }
        }
    }
    // Only "/" or "." and the like: a directory.
    Err(Errno::EISDIR.into())
}

/// The components of a path, without empty ones and `.` (which name the same directory).
fn components(path: &[u8]) -> VecDeque<Vec<u8>> {
    path.split(|&b| b == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
        .map(<[u8]>::to_vec)
        .collect()
}

/// `n` when `name` in `dir` is `/proc/self/fd/n` (`/dev/stdout`'s target) for a standard
/// descriptor that was closed when ste started: writing there would write to the `/dev/null`
/// Rust's runtime put in its place, and lose the output unsaid.
fn closed_standard_fd(dir: &Dir, name: &[u8]) -> Option<libc::c_int> {
    use std::os::unix::fs::MetadataExt;
    let n = match name {
        b"0" => 0,
        b"1" => 1,
        b"2" => 2,
        _ => return None,
    };
    let fds = std::fs::metadata("/proc/self/fd").ok()?;
    let same = (fds.dev(), fds.ino()) == (dir.stat.st_dev, dir.stat.st_ino);
    (same && crate::launch::closed_at_start(n)).then_some(n)
}

fn on_procfs(fd: &OwnedFd) -> io::Result<bool> {
    let fs = nix::sys::statfs::fstatfs(fd)?;
    Ok(fs.filesystem_type() == nix::sys::statfs::PROC_SUPER_MAGIC)
}

/// A new file, made by this call (so no one else's): mode 0666 less the umask, as a shell's
/// `>FILE` makes it.
fn create_new(dir: &Dir, name: &[u8]) -> Result<Opened, Errno> {
    let fd = openat(
        &dir.fd,
        name,
        OFlag::O_WRONLY
            | OFlag::O_CREAT
            | OFlag::O_EXCL
            | OFlag::O_NOFOLLOW
            | OFlag::O_NOCTTY
            | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o666),
    )?;
    Ok(Opened {
        file: Some(File::from(fd)),
        empty: false,
        made: dir.fd.try_clone().ok().map(|d| (d, name.to_vec())),
    })
}

/// Opens for writing the very inode `fd` (an `O_PATH` descriptor) refers to. The kernel checks
/// the caller's write permission on it as for any open.
fn reopen(fd: &OwnedFd, stat: &FileStat) -> io::Result<Opened> {
    if kind(stat) == SFlag::S_IFDIR {
        return Err(Errno::EISDIR.into());
    }
    let file = File::options()
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd()))?;
    Ok(Opened {
        file: Some(file),
        empty: kind(stat) == SFlag::S_IFREG,
        made: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};

    fn write(path: &Path, text: &str) -> io::Result<()> {
        create(path)?.write_all(text.as_bytes())
    }

    #[test]
    fn creates_replaces_and_follows_links_outside_shared_directories() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("out");
        write(&f, "a long first text").unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "a long first text");
        // An existing file is emptied, not overwritten in place.
        write(&f, "short").unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "short");
        // Links, relative, absolute and chained, with `..` and `.` on the way.
        std::fs::create_dir(t.path().join("sub")).unwrap();
        symlink("../out", t.path().join("sub/rel")).unwrap();
        symlink(t.path().join("sub/rel"), t.path().join("abs")).unwrap();
        write(&t.path().join("./sub/../abs"), "via links").unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "via links");
        // A dangling link creates its target, as a shell's `>` does.
        symlink("made", t.path().join("dangling")).unwrap();
        write(&t.path().join("dangling"), "new").unwrap();
        assert_eq!(
            std::fs::read_to_string(t.path().join("made")).unwrap(),
            "new"
        );
    }

    #[test]
    fn directories_and_missing_parents_are_errors() {
        let t = tempfile::tempdir().unwrap();
        let err = |p: &Path| create(p).unwrap_err().raw_os_error();
        assert_eq!(err(t.path()), Some(libc::EISDIR));
        assert_eq!(err(&t.path().join("x/")), Some(libc::EISDIR));
        assert_eq!(err(&t.path().join("no/such")), Some(libc::ENOENT));
        std::fs::write(t.path().join("file"), "").unwrap();
        assert_eq!(err(&t.path().join("file/x")), Some(libc::ENOTDIR));
        symlink("loop", t.path().join("loop")).unwrap();
        assert_eq!(err(&t.path().join("loop")), Some(libc::ELOOP));
        assert!(create(Path::new("")).is_err());
    }

    #[test]
    fn an_open_file_named_through_procfs_is_written() {
        // /dev/stdout-style: a procfs link to an open file, which has no path to walk.
        let t = tempfile::tempdir().unwrap();
        let target = File::create(t.path().join("target")).unwrap();
        let name = format!("/proc/self/fd/{}", target.as_raw_fd());
        write(Path::new(&name), "through procfs").unwrap();
        let got = std::fs::read_to_string(t.path().join("target")).unwrap();
        assert_eq!(got, "through procfs");
    }

    #[test]
    fn opening_does_not_empty_until_begin() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("kept");
        std::fs::write(&f, "old").unwrap();
        drop(open(&f).unwrap());
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "old");
        let mut o = open(&f).unwrap();
        o.begin().unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "");
    }

    #[test]
    #[cfg_attr(
        not(ste_test_root),
        ignore = "needs root: gives a file to another user"
    )]
    fn shared_directories_refuse_what_another_user_planted() {
        assert!(
            crate::kernel::calls::is_root(),
            "giving a file to another user needs root"
        );
        let t = tempfile::tempdir().unwrap();
        let shared = t.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let victim = t.path().join("victim");
        std::fs::write(&victim, "secret").unwrap();
        let other = Some(65534);
        let link = shared.join("link");
        symlink(&victim, &link).unwrap();
        std::os::unix::fs::lchown(&link, other, other).unwrap();
        let planted = shared.join("planted");
        std::fs::write(&planted, "theirs").unwrap();
        std::os::unix::fs::chown(&planted, other, other).unwrap();
        let linked = shared.join("linked");
        std::fs::hard_link(&victim, &linked).unwrap();
        let dir_link = shared.join("dir");
        symlink(t.path(), &dir_link).unwrap();
        std::os::unix::fs::lchown(&dir_link, other, other).unwrap();
        // Issue 44, item 7: a directory of another user's in the shared one, holding a link
        // of theirs (no sticky directory of its own, so the kernel's rules would follow it).
        let planted_dir = shared.join("d");
        std::fs::create_dir(&planted_dir).unwrap();
        std::os::unix::fs::chown(&planted_dir, other, other).unwrap();
        symlink(&victim, planted_dir.join("out")).unwrap();
        std::os::unix::fs::lchown(planted_dir.join("out"), other, other).unwrap();
        for (path, says) in [
            (link.clone(), "it is a symbolic link owned by uid 65534"),
            (planted.clone(), "owned by uid 65534"),
            (linked.clone(), "1 other hard links"),
            (
                dir_link.join("victim"),
                "its component \"dir\" is a symbolic link",
            ),
            (
                planted_dir.join("out"),
                "its component \"d\" is a directory owned by uid 65534",
            ),
            (
                planted_dir.join("fresh"),
                "its component \"d\" is a directory owned by uid 65534",
            ),
        ] {
            let e = create(&path).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
            assert!(e.to_string().contains(says), "{}: {e}", path.display());
        }
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "secret");
        assert_eq!(std::fs::read_to_string(&planted).unwrap(), "theirs");
        // Owned by the directory's owner (root here): followed, as the kernel would.
        std::os::unix::fs::lchown(&link, Some(0), Some(0)).unwrap();
        write(&link, "mine").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "mine");
        // A fresh name in the shared directory is fine.
        write(&shared.join("fresh"), "new").unwrap();
        assert_eq!(std::fs::metadata(shared.join("fresh")).unwrap().uid(), 0);
    }
}
