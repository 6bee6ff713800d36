//! The run directory of `--malloc`: a private directory in a shared place (`/dev/shm`, else
//! `$TMPDIR`) that holds the shim and the segments the command's processes create.
//!
//! Owns making the directory, every file operation inside it, its removal, and the sweep of the
//! directories of ste runs that were killed. Must not read or write a segment's contents
//! (`segment`) nor decide which segments to read (`mod`).
//!
//! The shared place is writable by every user, who may watch it and race ste, so nothing there is
//! trusted by name (and nothing relies on `fs.protected_regular` or `fs.protected_symlinks`):
//! - the name is fresh (`ste-PID-START.malloc-RANDOM`) and made with `mkdirat`, which fails on an
//!   existing name: ste picks another and retries, a bounded number of times;
//! - it is opened with `O_DIRECTORY|O_NOFOLLOW` and checked after the open (`fstat`: a directory,
//!   ste's own, no access for group or others), and from then on only used through that
//!   descriptor (`openat`, `unlinkat`): renaming or replacing the path cannot redirect ste;
//! - the shim is created with `O_CREAT|O_EXCL|O_NOFOLLOW` and its mode set through its
//!   descriptor, before anyone but ste can enter the directory;
//! - segments are opened with `O_NOFOLLOW|O_NONBLOCK` and accepted only when they are regular
//!   files of the command's user with one link (no symlink, FIFO or hard link of another file).
//!
//! Then, under sudo, the directory is handed to the user the command runs as (the user who
//! invoked sudo, with that user's own group), so its processes can create their segments, with
//! a POSIX ACL that grants uid 0 too, on the directory and by default on everything made in it:
//! `user::rwx user:0:rwx group::--- mask::rwx other::---` (mode 0770, of which the group gets
//! nothing). The shim creates a segment 0660 (a default ACL sets the umask aside): its owner
//! and root may read and write it, no one else. That is how ste's sampler, which keeps only
//! `CAP_SYS_PTRACE` (`privilege`), reads the segments of a command run as another user: as uid
//! 0 it matches the ACL's named entry. It was group root and a setgid directory before, which
//! let the user make a directory of group root there and keep it (moved out of the run
//! directory, which is theirs); an ACL naming root gives the user nothing they may keep.
//! Chosen over the alternatives: `pidfd_getfd` of the shim's descriptor would make the shim
//! keep a descriptor open in every process (programs that close every descriptor, daemons and
//! shells among them, would lose their segment, and the number must be found); the launcher
//! cannot open what the processes create later; `CAP_DAC_READ_SEARCH` in the sampler would let
//! it read every file of the system; and switching a thread's `fsuid` to the user needs
//! `CAP_SETUID` in that thread, or a saved uid of the user's, which lets the user signal ste. A
//! file system without POSIX ACLs is not used under sudo (tmpfs has them). Run as root or as a
//! user, nothing is handed over: the directory stays its user's own, mode 0700.
//!
//! A run killed before its end leaves its directory; the next run in the same place removes the
//! directories whose owning ste is gone (`account::owner`'s names and liveness test: the name,
//! and the lock the live run holds on its directory, which holds across PID namespaces), only
//! directories owned by root, by ste's user or by the command's user, without following symlinks.
//!
//! Hand-written on nix's `*at` calls: cap-std gives descriptor-relative opens but neither the
//! hand-over nor the sweep, and the whole is a few calls.

use crate::source::account::owner::{Liveness, own_name};
use anyhow::{Context, Result, bail};
use nix::dir::Dir;
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::{FileStat, Mode, SFlag, fchmod, fstat, fstatat, mkdirat};
use nix::unistd::{Gid, Uid, UnlinkatFlags, fchown, unlinkat};
use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// What ends a run directory's name after its owner's `ste-PID-START`.
const TAG: &str = ".malloc-";
/// Fresh names tried before giving up (each a 64-bit random nonce: another user who keeps
/// taking them is the only way to exhaust them).
const TRIES: usize = 16;
/// How deep the removal of a leftover goes (a command may have made subdirectories).
const DEPTH: u32 = 16;
/// Who can reach the shim in the directory: its owner, and with `root` (the directory's ACL
/// names uid 0) root too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reach {
    pub owner: u32,
    pub root: bool,
}

impl Reach {
    /// Whether a process with these ids (`/proc/PID/status`) can open the shim: the owner, root
    /// when the directory's ACL names it, or a process that may ignore file permissions.
    pub fn admits(self, ids: &Ids) -> bool {
        use caps::Capability::{CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH};
        let dac = CAP_DAC_OVERRIDE.bitmask() | CAP_DAC_READ_SEARCH.bitmask();
        ids.fsuid == self.owner || (self.root && ids.fsuid == 0) || ids.cap_eff & dac != 0
    }
}

/// The ids the kernel checks file access with, as `/proc/PID/status` gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ids {
    /// Real and effective user and group ids.
    pub uid: (u32, u32),
    pub gid: (u32, u32),
    /// Filesystem user and group ids (the ones opens are checked with).
    pub fsuid: u32,
    pub fsgid: u32,
    pub groups: Vec<u32>,
    pub cap_eff: u64,
}

impl Ids {
    /// Parses `/proc/PID/status` (`Uid:`/`Gid:` list real, effective, saved, filesystem ids).
    pub fn parse(status: &str) -> Option<Ids> {
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        };
        let ids = |name: &str| -> Option<Vec<u32>> {
            field(name)?
                .split_whitespace()
                .map(|v| v.parse().ok())
                .collect()
        };
        let (uid, gid) = (ids("Uid")?, ids("Gid")?);
        if uid.len() != 4 || gid.len() != 4 {
            return None;
        }
        Some(Ids {
            uid: (uid[0], uid[1]),
            gid: (gid[0], gid[1]),
            fsuid: uid[3],
            fsgid: gid[3],
            groups: ids("Groups").unwrap_or_default(),
            cap_eff: u64::from_str_radix(field("CapEff")?.trim(), 16).ok()?,
        })
    }

    /// A real id differs from the effective one: what makes ld.so secure (setuid, setgid).
    pub fn changed(&self) -> bool {
        self.uid.0 != self.uid.1 || self.gid.0 != self.gid.1
    }
}

/// A private run directory, made by [`RunDir::create`]; removed by [`RunDir::remove`] or when
/// dropped.
pub struct RunDir {
    /// The shared place and the directory's name in it: only for the final removal.
    base: OwnedFd,
    name: String,
    /// The directory itself: every operation inside goes through it.
    dir: OwnedFd,
    /// Its path, for the command's environment (the loader and the shim open by path; only
    /// the owner and root can change what is there).
    path: PathBuf,
    reach: Reach,
    removed: AtomicBool,
}

impl RunDir {
    /// Sweeps the leftovers of killed runs in the first usable place of `bases`, makes a fresh
    /// private directory there, writes `files` into it (name, contents, mode) and hands it to
    /// `command` (the user and group the command runs as under sudo; `None`: ste's own).
    pub fn create(
        bases: &[PathBuf],
        command: Option<(u32, u32)>,
        files: &[(&str, &[u8], u32)],
    ) -> Result<RunDir> {
        let euid = nix::unistd::geteuid().as_raw();
        let owner = command.map_or(euid, |(uid, _)| uid);
        let (base, base_path) = bases
            .iter()
            .find_map(|p| open_base(p, &[euid, owner]).map(|fd| (fd, p)))
            .context(
                "--malloc: no usable directory for the shim (/dev/shm, $TMPDIR): each must be writable, allow executable mappings, and be root's or yours, sticky if others may write to it",
            )?;
        sweep(&base, &[0, euid, owner]);
        let owner_name = own_name(Path::new("/proc/self")).map_err(anyhow::Error::msg)?;
        let names = std::iter::repeat_with(|| format!("{owner_name}{TAG}{:016x}", nonce()));
        let mut rd = Self::make(base, base_path, names, files)?;
        if let Some((uid, gid)) = command.filter(|&(uid, _)| uid != euid) {
            share_with_root(&rd.dir).with_context(|| {
                format!(
                    "--malloc: cannot let ste's sampler read what {} will hold (its file system needs POSIX ACLs under sudo)",
                    rd.path.display()
                )
            })?;
            fchown(&rd.dir, Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid)))
                .with_context(|| format!("--malloc: cannot hand {} over", rd.path.display()))?;
            rd.reach.root = true;
        }
        rd.reach.owner = owner;
        Ok(rd)
    }

    /// Makes the directory under the first of `names` that is free (at most [`TRIES`]), checks
    /// it and writes `files` into it; the directory is still ste's alone.
    fn make(
        base: OwnedFd,
        base_path: &Path,
        names: impl Iterator<Item = String>,
        files: &[(&str, &[u8], u32)],
    ) -> Result<RunDir> {
        let mut made = None;
        for name in names.take(TRIES) {
            match mkdirat(&base, name.as_str(), Mode::S_IRWXU) {
                Ok(()) => {
                    made = Some(name);
                    break;
                }
                Err(Errno::EEXIST) => continue,
                Err(e) => bail!(
                    "--malloc: cannot create a directory in {}: {e}",
                    base_path.display()
                ),
            }
        }
        let name = made.with_context(|| {
            format!(
                "--malloc: {TRIES} fresh names in {} were all taken: another user may be taking them",
                base_path.display()
            )
        })?;
        let path = base_path.join(&name);
        let dir = open_dir(&base, &name)
            .with_context(|| format!("--malloc: cannot open {}", path.display()))?;
        // This run's lock, for as long as the directory is open (`account::owner`).
        crate::source::account::owner::hold(std::os::fd::AsFd::as_fd(&dir))
            .with_context(|| format!("--malloc: cannot hold {}", path.display()))?;
        let st = fstat(&dir)?;
        let euid = nix::unistd::geteuid().as_raw();
        if !is_dir(&st) || st.st_uid != euid || st.st_mode & 0o077 != 0 {
            // Not the directory ste made: someone replaced it. Leave it alone.
            bail!(
                "--malloc: {} changed under ste (owner {}, mode {:o}): refusing to use it",
                path.display(),
                st.st_uid,
                st.st_mode & 0o7777
            );
        }
        let rd = RunDir {
            base,
            name,
            dir,
            path,
            reach: Reach {
                owner: euid,
                root: false,
            },
            removed: AtomicBool::new(false),
        };
        for (file, bytes, mode) in files {
            rd.write_new(file, bytes, *mode)?;
        }
        Ok(rd)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn reach(&self) -> Reach {
        self.reach
    }

    /// Creates `name` (it must not exist, and is never a symlink followed) with `bytes` and
    /// `mode`, set through its descriptor.
    fn write_new(&self, name: &str, bytes: &[u8], mode: u32) -> Result<()> {
        let fd = openat(
            &self.dir,
            name,
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::S_IRUSR | Mode::S_IWUSR,
        )
        .with_context(|| format!("--malloc: cannot create {}/{name}", self.path.display()))?;
        let mut f = File::from(fd);
        f.write_all(bytes)
            .with_context(|| format!("--malloc: cannot write {}/{name}", self.path.display()))?;
        fchmod(&f, Mode::from_bits_truncate(mode))?;
        Ok(())
    }

    /// Opens the segment `name` for reading and writing: `Ok(None)` when it is not one the
    /// command's processes made (a symlink, not a regular file, another user's, or linked
    /// elsewhere too).
    pub fn open_segment(&self, name: &str) -> std::io::Result<Option<File>> {
        let fd = match openat(
            &self.dir,
            name,
            OFlag::O_RDWR | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(Errno::ELOOP) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let st = fstat(&fd)?;
        let regular =
            SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFREG;
        if !regular || st.st_uid != self.reach.owner || st.st_nlink != 1 {
            return Ok(None);
        }
        Ok(Some(File::from(fd)))
    }

    /// The names in the directory (not `.` and `..`).
    pub fn names(&self) -> Vec<String> {
        entries(&self.dir)
            .into_iter()
            .filter_map(|n| n.into_string().ok())
            .collect()
    }

    /// Removes the entry `name` (never a directory).
    pub fn remove_file(&self, name: &str) {
        let _ = unlinkat(&self.dir, name, UnlinkatFlags::NoRemoveDir);
    }

    /// Removes everything inside, then the directory, if its name still holds it. Once.
    pub fn remove(&self) {
        if self.removed.swap(true, Ordering::SeqCst) {
            return;
        }
        clear(&self.dir, DEPTH);
        let ours = fstat(&self.dir).ok();
        let there = fstatat(&self.base, self.name.as_str(), AtFlags::AT_SYMLINK_NOFOLLOW).ok();
        if let (Some(a), Some(b)) = (ours, there)
            && (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
        {
            let _ = unlinkat(&self.base, self.name.as_str(), UnlinkatFlags::RemoveDir);
        }
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Gives `dir` the ACL `user::rwx user:0:rwx group::--- mask::rwx other::---`, as its access
/// ACL and as the default ACL of what is made in it (so a segment the shim makes 0660 is its
/// owner's and root's alone). The extended attributes' layout is the kernel's
/// (include/uapi/linux/posix_acl_xattr.h): a version, then (tag, permissions, id) entries in
/// the order of their tags, little-endian.
fn share_with_root(dir: &OwnedFd) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    const VERSION: u32 = 2;
    const ANY: u32 = u32::MAX;
    // ACL_USER_OBJ, ACL_USER (uid 0), ACL_GROUP_OBJ, ACL_MASK, ACL_OTHER.
    let entries: [(u16, u16, u32); 5] = [
        (0x01, 7, ANY),
        (0x02, 7, 0),
        (0x04, 0, ANY),
        (0x10, 7, ANY),
        (0x20, 0, ANY),
    ];
    let mut acl = VERSION.to_le_bytes().to_vec();
    for (tag, perm, id) in entries {
        acl.extend(tag.to_le_bytes());
        acl.extend(perm.to_le_bytes());
        acl.extend(id.to_le_bytes());
    }
    for name in [c"system.posix_acl_access", c"system.posix_acl_default"] {
        // SAFETY: sets an extended attribute of an open directory from a valid buffer.
        let rc = unsafe {
            libc::fsetxattr(
                dir.as_raw_fd(),
                name.as_ptr(),
                acl.as_ptr().cast(),
                acl.len(),
                0,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Opens a candidate shared place: a directory whose mount allows executable mappings (every
/// process maps the shim executable), writable by ste, owned by root or one of `users`, and
/// sticky when group or others may write to it (else another user could rename ste's
/// directory away and put another in its path).
fn open_base(path: &Path, users: &[u32]) -> Option<OwnedFd> {
    use nix::sys::statvfs::FsFlags;
    let fd = nix::fcntl::open(
        path,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let vfs = nix::sys::statvfs::fstatvfs(&fd).ok()?;
    if vfs
        .flags()
        .intersects(FsFlags::ST_NOEXEC | FsFlags::ST_RDONLY)
    {
        return None;
    }
    nix::unistd::access(path, nix::unistd::AccessFlags::W_OK).ok()?;
    let st = fstat(&fd).ok()?;
    let owner_ok = st.st_uid == 0 || users.contains(&st.st_uid);
    let shared = st.st_mode & 0o022 != 0;
    let sticky = st.st_mode & libc::S_ISVTX != 0;
    (is_dir(&st) && owner_ok && (!shared || sticky)).then_some(fd)
}

/// Removes the run directories in `base` whose ste is gone, owned by one of `owners`.
fn sweep(base: &OwnedFd, owners: &[u32]) {
    let mut liveness = Liveness::default();
    for name in entries(base) {
        let Some(name) = name.to_str() else { continue };
        let Some((owner_name, _)) = name.split_once(TAG) else {
            continue;
        };
        if liveness.is_gone(owner_name) != Some(true) {
            continue;
        }
        let Ok(st) = fstatat(base, name, AtFlags::AT_SYMLINK_NOFOLLOW) else {
            continue;
        };
        if !is_dir(&st) || !owners.contains(&st.st_uid) {
            continue;
        }
        let Ok(dir) = open_dir(base, name) else {
            continue;
        };
        // The same directory the name showed (not one swapped in since), which no live run
        // holds (one in another PID namespace names itself by its pid there).
        if fstat(&dir).is_ok_and(|d| (d.st_dev, d.st_ino) == (st.st_dev, st.st_ino))
            && !crate::source::account::owner::held(std::os::fd::AsFd::as_fd(&dir))
        {
            clear(&dir, DEPTH);
            let _ = unlinkat(base, name, UnlinkatFlags::RemoveDir);
        }
    }
}

fn open_dir(base: &OwnedFd, name: &str) -> nix::Result<OwnedFd> {
    openat(
        base,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

fn is_dir(st: &FileStat) -> bool {
    SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFDIR
}

/// The names in the directory `dir` (a listing of its own: `dir`'s offset is not moved).
fn entries(dir: &OwnedFd) -> Vec<std::ffi::OsString> {
    use std::os::unix::ffi::OsStrExt;
    let Ok(mut d) = Dir::openat(
        dir,
        ".",
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) else {
        return Vec::new();
    };
    d.iter()
        .flatten()
        .map(|e| std::ffi::OsStr::from_bytes(e.file_name().to_bytes()).to_owned())
        .filter(|n| n != "." && n != "..")
        .collect()
}

/// Removes everything inside `dir`, `depth` levels of subdirectories deep, without following
/// a symlink (a symlink is removed as itself).
fn clear(dir: &OwnedFd, depth: u32) {
    for name in entries(dir) {
        let Ok(name) = CString::new(std::os::unix::ffi::OsStrExt::as_bytes(name.as_os_str()))
        else {
            continue;
        };
        // Linux refuses unlink on a directory with EISDIR.
        if unlinkat(dir, name.as_c_str(), UnlinkatFlags::NoRemoveDir) == Err(Errno::EISDIR)
            && depth > 0
        {
            if let Ok(sub) = openat(
                dir,
                name.as_c_str(),
                OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::empty(),
            ) {
                clear(&sub, depth - 1);
            }
            let _ = unlinkat(dir, name.as_c_str(), UnlinkatFlags::RemoveDir);
        }
    }
}

/// 64 random bits for a fresh name (the kernel's generator; the clock if it cannot be read:
/// the exclusive create keeps even a guessed name safe, a random one keeps it from being
/// taken ahead).
fn nonce() -> u64 {
    let mut b = [0u8; 8];
    match File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b)) {
        Ok(()) => u64::from_ne_bytes(b),
        Err(_) => crate::bus::sink::monotonic_ns(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn base() -> (tempfile::TempDir, OwnedFd) {
        let t = tempfile::tempdir().unwrap();
        // The directory is the test runner's own: root's (accepted as it is) or another user's,
        // named as the run's user so the tests run without root too.
        let me = nix::unistd::geteuid().as_raw();
        let fd = open_base(t.path(), &[me]).expect("a fresh temporary directory is usable");
        (t, fd)
    }

    #[test]
    fn a_taken_name_is_skipped_and_what_is_there_is_left_alone() {
        let (t, fd) = base();
        let victim = t.path().join("victim");
        std::fs::write(&victim, "root's").unwrap();
        // Another user got there first: a symlink at the first name, a directory at the second.
        std::os::unix::fs::symlink(&victim, t.path().join("a")).unwrap();
        std::fs::create_dir(t.path().join("b")).unwrap();
        let names = ["a", "b", "c"].map(String::from).into_iter();
        let rd = RunDir::make(fd, t.path(), names, &[("ste_malloc.so", b"shim", 0o644)]).unwrap();
        assert_eq!(rd.path(), t.path().join("c"));
        assert_eq!(std::fs::read(&victim).unwrap(), b"root's");
        let shim = std::fs::metadata(t.path().join("c/ste_malloc.so")).unwrap();
        assert_eq!(shim.permissions().mode() & 0o7777, 0o644);
        let dir = std::fs::metadata(t.path().join("c")).unwrap();
        assert_eq!(dir.permissions().mode() & 0o777, 0o700);
        assert!(t.path().join("b").is_dir(), "not ste's: not removed");
        drop(rd);
        assert!(!t.path().join("c").exists(), "removed when dropped");
        assert!(t.path().join("a").is_symlink());
    }

    #[test]
    fn names_all_taken_is_a_clear_error() {
        let (t, fd) = base();
        std::fs::create_dir(t.path().join("x")).unwrap();
        let names = std::iter::repeat_with(|| "x".to_string());
        let e = RunDir::make(fd, t.path(), names, &[]).err().unwrap();
        assert!(e.to_string().contains("fresh names"), "{e}");
    }

    #[test]
    fn segments_must_be_the_owners_own_regular_files() {
        let (t, fd) = base();
        let names = std::iter::once("d".to_string());
        let rd = RunDir::make(fd, t.path(), names, &[]).unwrap();
        let d = t.path().join("d");
        let victim = t.path().join("victim");
        std::fs::write(&victim, "x").unwrap();
        std::os::unix::fs::symlink(&victim, d.join("1.0")).unwrap();
        std::fs::hard_link(&victim, d.join("2.0")).unwrap();
        nix::unistd::mkfifo(&d.join("3.0"), Mode::S_IRWXU).unwrap();
        std::fs::write(d.join("4.0"), "segment").unwrap();
        for n in ["1.0", "2.0", "3.0"] {
            assert!(rd.open_segment(n).unwrap().is_none(), "{n}");
        }
        assert!(rd.open_segment("4.0").unwrap().is_some());
        let mut names = rd.names();
        names.sort();
        assert_eq!(names, ["1.0", "2.0", "3.0", "4.0"]);
        // A subdirectory with a symlink out: removed, the symlink's target kept.
        std::fs::create_dir_all(d.join("sub/deeper")).unwrap();
        std::os::unix::fs::symlink(&victim, d.join("sub/deeper/link")).unwrap();
        rd.remove();
        assert!(!d.exists());
        assert_eq!(std::fs::read(&victim).unwrap(), b"x");
    }

    #[test]
    fn the_sweep_removes_only_the_directories_of_gone_runs() {
        let (t, fd) = base();
        let me = own_name(Path::new("/proc/self")).unwrap();
        let p = t.path();
        let gone = p.join(format!("ste-2147483000-5{TAG}1"));
        let live = p.join(format!("{me}{TAG}2"));
        let other = p.join("ste-2147483000-5"); // a cgroup-style name: not a run directory
        let link = p.join(format!("ste-2147483001-5{TAG}3"));
        let target = p.join("target");
        for d in [&gone, &live, &other, &target] {
            std::fs::create_dir(d).unwrap();
        }
        std::fs::write(gone.join("1.0"), "").unwrap();
        std::fs::create_dir(gone.join("sub")).unwrap();
        std::fs::write(target.join("keep"), "").unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        // Gone by its name, but held by a live run (one in another PID namespace): kept.
        let elsewhere = p.join(format!("ste-2147483002-5{TAG}4"));
        std::fs::create_dir(&elsewhere).unwrap();
        let holder = std::fs::File::open(&elsewhere).unwrap();
        crate::source::account::owner::hold(std::os::fd::AsFd::as_fd(&holder)).unwrap();
        let mine = std::fs::metadata(p).unwrap().uid();
        // Owned by someone the sweeper does not sweep for: kept.
        sweep(&fd, &[mine.wrapping_add(1)]);
        assert!(gone.exists());
        sweep(&fd, &[mine]);
        assert!(!gone.exists());
        assert!(live.exists() && other.exists());
        assert!(link.is_symlink() && target.join("keep").exists());
        assert!(elsewhere.exists(), "a held directory is a live run's");
        drop(holder);
        sweep(&fd, &[mine]);
        assert!(!elsewhere.exists(), "swept once its run is gone");
    }

    #[test]
    fn ids_come_from_proc_status() {
        let status = "Name:\tsh\nUid:\t1000\t1000\t1000\t1001\nGid:\t100\t100\t100\t0\n\
                      Groups:\t4 24 100 \nCapEff:\t0000000000000004\n";
        let ids = Ids::parse(status).unwrap();
        assert_eq!((ids.uid, ids.fsuid, ids.fsgid), ((1000, 1000), 1001, 0));
        assert_eq!(ids.groups, [4, 24, 100]);
        assert_eq!(ids.cap_eff, 4);
        let shared = Reach {
            owner: 1001,
            root: true,
        };
        assert!(shared.admits(&ids), "fsuid 1001, the owner");
        let mut other = ids.clone();
        other.fsuid = 1000;
        other.cap_eff = 0;
        assert!(!shared.admits(&other), "another user, group root or not");
        other.fsuid = 0;
        assert!(shared.admits(&other), "root, named by the ACL");
        other.fsuid = 1000;
        other.cap_eff = caps::Capability::CAP_DAC_READ_SEARCH.bitmask();
        assert!(shared.admits(&other), "may ignore permissions");
        assert!(!ids.changed());
        assert_eq!(Ids::parse("Uid:\t1\t1\n"), None);
        // A setuid-root program started by nobody (uid 65534).
        let suid = "Name:\tpasswd\nUid:\t65534\t0\t0\t0\nGid:\t65534\t65534\t65534\t65534\n\
                    Groups:\t\nCapEff:\t000001ffffffffff\n";
        assert!(Ids::parse(suid).unwrap().changed());
    }
}
