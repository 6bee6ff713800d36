//! What the kernel's BTF told an earlier run of this same ste binary since boot: the offsets
//! the BPF object reads at and the tracepoints' ids (`loading::FromBtf`), kept in
//! `/run/ste/btf-HASH` (one file per binary and configuration, so that runs of two binaries, or
//! with and without `--syscalls`, do not replace each other's answer in turn; the oldest go
//! beyond [`KEPT`] files), so that a run does not walk the BTF again. The walk is ~0.3 ms of CPU at
//! every start, on the way to loading the programs (bench/README.md).
//!
//! Why a remembered answer is exact: the kernel's BTF cannot change without a reboot, and the
//! questions asked of it (which offsets, which tracepoints) are fixed by ste's binary and the
//! run's configuration. The file starts with all of these: the boot's id
//! (`/proc/sys/kernel/random/boot_id`), the binary's identity (device, inode, size and
//! modification time of `/proc/self/exe`), whether the system-call programs load and the
//! tracepoints asked for. Any difference, a file cut short or anything unexpected in it, and
//! the BTF is walked again and the file replaced. `/run` is a tmpfs, emptied at boot.
//!
//! Only root's: the loader runs as root, and the directory and the file must belong to root
//! and be writable by no one else, or they are ignored (another user must not choose where
//! root's BPF programs read). The file is written whole to a new name and renamed, so a run
//! beside reads the old answer or the new one, never half of one. A failure to write costs the
//! next run a walk, nothing else, so it is not reported.
//!
//! Owns the file and its format; must not read the BTF (`loading::from_btf` does).

use super::loading::FromBtf;
use nix::fcntl::{OFlag, open, openat, renameat};
use nix::sys::stat::{Mode, fstat};
use nix::unistd::{UnlinkatFlags, mkdir, unlinkat};
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// Where the answer is kept (`/run/ste` is also `account::delays`'s).
pub(super) const DIR: &str = "/run/ste";
/// The format's first line: a new format gets a new one.
const MAGIC: &str = "ste kernel btf answers 1";
/// Far more than an answer takes (~600 bytes): a larger file is not one.
const MAX_LEN: usize = 16 * 1024;
/// How many answers are kept (binaries rebuilt since boot leave theirs behind).
const KEPT: usize = 16;

/// The questions and the circumstances an answer must have been given under, as the text the
/// file starts with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Key {
    text: String,
    /// The file's name in the directory.
    file: String,
}

impl Key {
    /// The key of this boot and binary; `None` when either cannot be told (nothing is then
    /// remembered).
    pub(super) fn current<S: AsRef<str>>(syscalls: bool, tracepoints: &[S]) -> Option<Key> {
        use std::os::unix::fs::MetadataExt;
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        let exe = std::fs::metadata("/proc/self/exe").ok()?;
        let binary = format!(
            "{} {} {} {}.{:09}",
            exe.dev(),
            exe.ino(),
            exe.size(),
            exe.mtime(),
            exe.mtime_nsec()
        );
        Some(Key::of(boot.trim(), &binary, syscalls, tracepoints))
    }

    fn of<S: AsRef<str>>(boot: &str, binary: &str, syscalls: bool, tracepoints: &[S]) -> Key {
        let tracepoints: Vec<&str> = tracepoints.iter().map(AsRef::as_ref).collect();
        Key {
            text: format!(
                "{MAGIC}\nboot {boot}\nbinary {binary}\nsyscalls {}\ntracepoints {}\n",
                u8::from(syscalls),
                tracepoints.join(",")
            ),
            file: String::new(),
        }
        .named()
    }

    /// The file's name: a hash of the key (two keys of one name replace each other's answer,
    /// which is then walked again, never misread: the file holds the whole key).
    fn named(mut self) -> Key {
        // FNV-1a, 64 bits.
        let hash = self.text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        self.file = format!("btf-{hash:016x}");
        self
    }
}

/// The answer kept in `dir` under `key`, if there is one that root alone could have written.
pub(super) fn read(dir: &Path, key: &Key) -> Option<FromBtf> {
    let dir = open_dir_checked(dir)?;
    let file = openat_checked(&dir, &key.file)?;
    let mut text = String::new();
    std::fs::File::from(file)
        .take(MAX_LEN as u64 + 1)
        .read_to_string(&mut text)
        .ok()?;
    if text.len() > MAX_LEN {
        return None;
    }
    decode(text.strip_prefix(key.text.as_str())?)
}

/// Keeps `answer` in `dir` (made, root's alone, when missing) under `key`.
pub(super) fn write(dir: &Path, key: &Key, answer: &FromBtf) -> std::io::Result<()> {
    match mkdir(dir, Mode::S_IRWXU) {
        Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
        Err(e) => return Err(e.into()),
    }
    let dir_fd = open_dir_checked(dir).ok_or_else(|| std::io::Error::other("not root's alone"))?;
    let temp = format!("{}.{}", key.file, std::process::id());
    let fd = openat(
        &dir_fd,
        temp.as_str(),
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::S_IRUSR | Mode::S_IWUSR,
    )?;
    let text = format!("{}{}", key.text, encode(answer));
    let renamed = std::fs::File::from(fd)
        .write_all(text.as_bytes())
        .and_then(|()| {
            Ok(renameat(
                &dir_fd,
                temp.as_str(),
                &dir_fd,
                key.file.as_str(),
            )?)
        });
    if renamed.is_err() {
        let _ = unlinkat(&dir_fd, temp.as_str(), UnlinkatFlags::NoRemoveDir);
    }
    prune(dir, &key.file);
    renamed
}

/// Removes the oldest answers beyond [`KEPT`], never `keep`.
fn prune(dir: &Path, keep: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut answers: Vec<(std::time::SystemTime, PathBuf)> = entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with("btf-") && n != keep)
        })
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    if answers.len() < KEPT {
        return;
    }
    answers.sort();
    for (_, path) in &answers[..=answers.len() - KEPT] {
        let _ = std::fs::remove_file(path);
    }
}

/// The answer's lines, after the key; `end` last, so a file cut short is refused.
fn encode(answer: &FromBtf) -> String {
    let mut text = String::new();
    for (name, value) in &answer.layout {
        text.push_str(&format!("layout {name} {value}\n"));
    }
    for id in &answer.tracepoint_ids {
        text.push_str(&format!("tracepoint {id}\n"));
    }
    text.push_str("end\n");
    text
}

fn decode(text: &str) -> Option<FromBtf> {
    let mut answer = FromBtf {
        layout: Vec::new(),
        tracepoint_ids: Vec::new(),
    };
    let mut lines = text.split_terminator('\n');
    for line in lines.by_ref() {
        let mut words = line.split(' ');
        match (words.next()?, words.next(), words.next(), words.next()) {
            ("layout", Some(name), Some(value), None) => {
                answer.layout.push((name.to_string(), value.parse().ok()?));
            }
            ("tracepoint", Some(id), None, None) => answer.tracepoint_ids.push(id.parse().ok()?),
            ("end", None, None, None) => {
                return lines.next().is_none().then_some(answer);
            }
            _ => return None,
        }
    }
    None
}

/// The directory `path`, opened without following a last symlink, if it belongs to root and no
/// one else may write it.
fn open_dir_checked(path: &Path) -> Option<OwnedFd> {
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_DIRECTORY;
    let fd = open(path, flags, Mode::empty()).ok()?;
    roots_alone(&fd, libc::S_IFDIR).then_some(fd)
}

/// `name` in the directory `dir`, opened as [`open_dir_checked`] does, if it is a regular file.
fn openat_checked(dir: &OwnedFd, name: &str) -> Option<OwnedFd> {
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let fd = openat(dir, name, flags, Mode::empty()).ok()?;
    roots_alone(&fd, libc::S_IFREG).then_some(fd)
}

/// Whether `fd` is of type `kind`, owned by root, and writable by neither group nor others.
fn roots_alone(fd: &OwnedFd, kind: libc::mode_t) -> bool {
    fstat(fd).is_ok_and(|st| {
        st.st_mode & libc::S_IFMT == kind && st.st_uid == 0 && st.st_mode & 0o022 == 0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer() -> FromBtf {
        FromBtf {
            layout: vec![
                ("off_task_pid".into(), 1264),
                ("off_mm_arg_end".into(), 488),
            ],
            tracepoint_ids: vec![10320],
        }
    }

    fn key() -> Key {
        Key::of(
            "b0",
            "2049 77 5833280 1764124140.5",
            false,
            &["sched_process_fork"],
        )
    }

    fn same(a: &FromBtf, b: &FromBtf) -> bool {
        a.layout == b.layout && a.tracepoint_ids == b.tracepoint_ids
    }

    #[test]
    fn an_answer_reads_back_only_whole_and_under_its_own_key() {
        let text = encode(&answer());
        assert!(same(&decode(&text).unwrap(), &answer()));
        // Cut short: no `end`.
        assert!(decode(&text[..text.len() - 4]).is_none());
        // Something after `end`, a value that is not a number, an unknown line.
        assert!(decode(&format!("{text}layout x 1\n")).is_none());
        assert!(decode(&text.replace("1264", "12x4")).is_none());
        assert!(decode(&format!("other 1\n{text}")).is_none());
        // Each part of the key tells the answers apart.
        let other = [
            Key::of(
                "b1",
                "2049 77 5833280 1764124140.5",
                false,
                &["sched_process_fork"],
            ),
            Key::of(
                "b0",
                "2049 78 5833280 1764124140.5",
                false,
                &["sched_process_fork"],
            ),
            Key::of(
                "b0",
                "2049 77 5833280 1764124140.5",
                true,
                &["sched_process_fork"],
            ),
            Key::of("b0", "2049 77 5833280 1764124140.5", false, &["sys_enter"]),
        ];
        for k in other {
            assert_ne!(k, key());
        }
    }

    #[test]
    #[cfg_attr(not(ste_test_root), ignore = "needs root: the file must be root's")]
    fn root_reads_back_what_it_wrote_and_nothing_another_user_could_change() {
        use std::os::unix::fs::PermissionsExt;
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join("ste");
        assert!(read(&dir, &key()).is_none(), "nothing written yet");
        write(&dir, &key(), &answer()).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "the directory is made root's alone");
        assert!(same(&read(&dir, &key()).unwrap(), &answer()));
        let other = Key::of("b1", "x", false, &["sched_process_fork"]);
        assert!(
            read(&dir, &other).is_none(),
            "another key's answer is not used"
        );
        // Another key's answer in the same file (as if their names were the same): not used.
        let mut same_name = other.clone();
        same_name.file = key().file;
        assert!(read(&dir, &same_name).is_none());
        // Another key's answer beside: both kept, no temporary file left behind.
        write(&dir, &other, &answer()).unwrap();
        assert!(read(&dir, &key()).is_some() && read(&dir, &other).is_some());
        let names: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
        assert_eq!(names.len(), 2, "{names:?}");

        let file = dir.join(&other.file);
        let set = |p: &Path, m: u32| std::fs::set_permissions(p, PermissionsExt::from_mode(m));
        set(&file, 0o620).unwrap();
        assert!(
            read(&dir, &other).is_none(),
            "a file its group may write is ignored"
        );
        set(&file, 0o600).unwrap();
        set(&dir, 0o707).unwrap();
        assert!(
            read(&dir, &other).is_none(),
            "a directory others may write is ignored"
        );
        set(&dir, 0o700).unwrap();
        std::os::unix::fs::chown(&file, Some(65534), None).unwrap();
        assert!(
            read(&dir, &other).is_none(),
            "another user's file is ignored"
        );
        std::os::unix::fs::chown(&file, Some(0), None).unwrap();
        assert!(read(&dir, &other).is_some());
        // A symlink in the file's place is not followed.
        std::fs::remove_file(&file).unwrap();
        let elsewhere = top.path().join("elsewhere");
        std::fs::write(&elsewhere, format!("{}{}", other.text, encode(&answer()))).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &file).unwrap();
        assert!(read(&dir, &other).is_none(), "a symlink is not followed");

        // Beyond KEPT answers, the oldest go, never the one just written.
        for i in 0..KEPT + 3 {
            write(
                &dir,
                &Key::of(&format!("b{}", i + 10), "x", false, &["t"]),
                &answer(),
            )
            .unwrap();
        }
        let names: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
        assert_eq!(names.len(), KEPT, "{names:?}");
        assert!(
            read(
                &dir,
                &Key::of(&format!("b{}", KEPT + 12), "x", false, &["t"])
            )
            .is_some()
        );
    }
}
