//! Readers of `/proc/PID/*` files: a `ProcFs` that reads them (the parsers of their text are
//! `parse.rs`) from a root that tests can point at a fake tree.
//!
//! Owns the opening and reading of those files (held files, `statm` read with `pread`); the
//! formats are `parse.rs`'s. Knows nothing about trackers or the Run model: it returns its own
//! types (argv as byte strings, [`IoCounters`]); sources convert them. Hot readers
//! (`smaps_rollup`, `statm`, `status`) reuse one buffer per `ProcFs` and never allocate a path
//! per call.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

mod parse;
pub use parse::*;

/// Page size used to convert `statm` pages to bytes.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if v > 0 { v as u64 } else { 4096 }
}

/// Clock ticks per second of `/proc/PID/stat` times (`USER_HZ`, 100 on Linux).
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if v > 0 { v as u64 } else { 100 }
}

/// CPUs online now (`_SC_NPROCESSORS_ONLN`, from `/sys/devices/system/cpu/online`); `None`
/// when it cannot be told.
pub fn online_cpus() -> Option<u32> {
    // SAFETY: sysconf has no memory-safety preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    u32::try_from(v).ok().filter(|&n| n > 0)
}

/// A process's `statm`, opened once and read with `pread`: the kernel makes the text afresh
/// from the process's current memory at every read (across execs too), for a fraction of the
/// cost of an open, a read and a close each time (bench/README.md).
pub struct StatmFile(File);

impl StatmFile {
    /// (resident, shared) pages now; `None` once the process has no memory (a zombie).
    pub fn read(&self) -> io::Result<Option<(u64, u64)>> {
        let mut buf = [0u8; 128];
        let n = loop {
            match self.0.read_at(&mut buf, 0) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => break r?,
            }
        };
        let fields = parse_statm(&buf[..n]);
        // A process without memory shows all zeros.
        Ok(fields.filter(|&(resident, _)| resident > 0))
    }
}

/// A process's `stat`, opened once and read with `pread` for its minor faults: copy-on-write
/// moves no resident counter, only this one.
pub struct StatFile(File);

impl StatFile {
    /// Minor faults of all its threads so far (field 10); `None` when the text has none.
    pub fn minflt(&self) -> io::Result<Option<u64>> {
        let mut buf = [0u8; 512];
        let n = loop {
            match self.0.read_at(&mut buf, 0) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => break r?,
            }
        };
        Ok(parse_stat_minflt(&buf[..n]))
    }
}

/// A /proc tree (the real one, or a fake one in tests) with a reusable read buffer.
pub struct ProcFs {
    root: PathBuf,
    path: PathBuf,
    /// Zero-filled to its length; a read fills `buf[..n]`, grown when a file fills it.
    buf: Vec<u8>,
}

/// Starting size of the read buffer: `status` is ~1.5 KiB, `smaps_rollup` ~1 KiB.
const READ_BUF_BYTES: usize = 4096;

impl Default for ProcFs {
    fn default() -> Self {
        Self::new("/proc")
    }
}

/// An error of a /proc file, naming the file: the kind and the OS error stay readable
/// ([`os_error`]).
#[derive(Debug)]
pub struct PathError {
    pub path: PathBuf,
    pub source: io::Error,
}

impl std::fmt::Display for PathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.source)
    }
}

impl std::error::Error for PathError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// `e`, saying it was `path`'s; its kind is kept.
fn named(e: io::Error, path: &Path) -> io::Error {
    io::Error::new(
        e.kind(),
        PathError {
            path: path.to_path_buf(),
            source: e,
        },
    )
}

/// The OS error number of an error from this module (which names its path), or of any other.
pub fn os_error(e: &io::Error) -> Option<i32> {
    e.raw_os_error().or_else(|| {
        e.get_ref()?
            .downcast_ref::<PathError>()?
            .source
            .raw_os_error()
    })
}

impl ProcFs {
    pub fn new(root: impl AsRef<Path>) -> Self {
        ProcFs {
            root: root.as_ref().to_path_buf(),
            path: PathBuf::new(),
            buf: vec![0; READ_BUF_BYTES],
        }
    }

    /// Reads `<root>/<pid>/<file>` into the buffer and returns it.
    ///
    /// Plain `read(2)` calls until end of file: `read_to_end` on a `File` first asks for its
    /// size and position (`statx`, `lseek`), two system calls per read that /proc answers
    /// with 0 anyway. The ptrace tracker reads at its stops while the tracee waits, so every
    /// call counts.
    fn read(&mut self, pid: i32, file: &str) -> io::Result<&[u8]> {
        self.path.clear();
        self.path.push(&self.root);
        self.path.push(itoa(pid));
        self.path.push(file);
        let path = &self.path;
        let mut f = File::open(path).map_err(|e| named(e, path))?;
        let n = read_all(|b, _| f.read(b), &mut self.buf).map_err(|e| named(e, path))?;
        Ok(&self.buf[..n])
    }

    fn read_str(&mut self, pid: i32, file: &str) -> io::Result<&str> {
        let bytes = self.read(pid, file)?;
        std::str::from_utf8(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// Opens process `pid`'s `cmdline`, `status` and `io` (and `schedstat`, for its main
    /// thread) now, to read them later with [`ProcFs::held`] (see [`Held`]).
    pub fn hold(&mut self, pid: i32, schedstat: bool) -> io::Result<Held> {
        let mut open = |file: &str| {
            self.path.clear();
            self.path.push(&self.root);
            self.path.push(itoa(pid));
            self.path.push(file);
            File::open(&self.path).map_err(|e| named(e, &self.path))
        };
        Ok(Held {
            cmdline: open("cmdline")?,
            status: open("status")?,
            io: open("io")?,
            schedstat: if schedstat {
                Some(open("schedstat")?)
            } else {
                None
            },
        })
    }

    /// Reads one of the files `held` holds, from its start (`pread`: the kernel makes the
    /// text afresh at offset 0, exactly as for a new open).
    fn read_held(&mut self, f: &File) -> io::Result<&[u8]> {
        let n = read_all(|b, at| f.read_at(b, at), &mut self.buf)?;
        Ok(&self.buf[..n])
    }

    fn read_held_str(&mut self, f: &File) -> io::Result<&str> {
        let bytes = self.read_held(f)?;
        std::str::from_utf8(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// The figures of a process whose files are held, read now.
    pub fn held<'a, 'h>(&'a mut self, h: &'h Held) -> HeldRead<'a, 'h> {
        HeldRead { fs: self, h }
    }

    pub fn cmdline(&mut self, pid: i32) -> io::Result<Vec<Vec<u8>>> {
        Ok(parse_cmdline(self.read(pid, "cmdline")?))
    }

    /// `cmdline` read with one `read(2)` that returns all of it (retried from the start with
    /// a larger buffer when it fills the buffer): the kernel takes the process's memory once
    /// per call, so the argv is that of one image, never the start of one and the end of
    /// the next (or of none, when the process ends between two calls). `expected` is the
    /// length the caller knows the area has (the ebpf exec record's), or 0: the first read is
    /// one byte longer than it, so that an area of that length takes one read, not a doubling
    /// series of reads from the start (a 2 MiB argv took ~20 reads of 4 MiB in all, tens of
    /// milliseconds in which a short process ended).
    pub fn cmdline_whole(&mut self, pid: i32, expected: usize) -> io::Result<&[u8]> {
        self.path.clear();
        self.path.push(&self.root);
        self.path.push(itoa(pid));
        self.path.push("cmdline");
        let f = File::open(&self.path)?;
        if self.buf.len() <= expected {
            self.buf.resize(expected + 1, 0);
        }
        loop {
            let n = match f.read_at(&mut self.buf, 0) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => r?,
            };
            if n < self.buf.len() {
                return Ok(&self.buf[..n]);
            }
            let len = 2 * self.buf.len();
            self.buf.resize(len, 0);
        }
    }

    /// Where process `pid`'s main thread is (`syscall`; see [`parse_syscall`]). Needs the
    /// right to trace it.
    pub fn syscall(&mut self, pid: i32) -> io::Result<Option<Option<i64>>> {
        Ok(parse_syscall(self.read_str(pid, "syscall")?))
    }

    pub fn status(&mut self, pid: i32) -> io::Result<Status> {
        Ok(parse_status(self.read_str(pid, "status")?))
    }

    pub fn io(&mut self, pid: i32) -> io::Result<Option<IoCounters>> {
        Ok(parse_io(self.read_str(pid, "io")?))
    }

    pub fn smaps_rollup(&mut self, pid: i32) -> io::Result<Option<Rollup>> {
        Ok(parse_smaps_rollup(self.read_str(pid, "smaps_rollup")?))
    }

    /// Opens process `pid`'s `statm` for [`StatmFile::read`].
    pub fn open_statm(&mut self, pid: i32) -> io::Result<StatmFile> {
        self.path.clear();
        self.path.push(&self.root);
        self.path.push(itoa(pid));
        self.path.push("statm");
        File::open(&self.path)
            .map(StatmFile)
            .map_err(|e| named(e, &self.path))
    }

    /// Opens process `pid`'s `stat` for [`StatFile::minflt`].
    pub fn open_stat(&mut self, pid: i32) -> io::Result<StatFile> {
        self.path.clear();
        self.path.push(&self.root);
        self.path.push(itoa(pid));
        self.path.push("stat");
        File::open(&self.path)
            .map(StatFile)
            .map_err(|e| named(e, &self.path))
    }

    /// The file process `pid` runs (`exe`'s device and inode): which program an image is, in
    /// one `stat`, whatever path it was started by.
    pub fn exe_identity(&mut self, pid: i32) -> io::Result<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        self.path.clear();
        self.path.push(&self.root);
        self.path.push(itoa(pid));
        self.path.push("exe");
        std::fs::metadata(&self.path)
            .map(|m| (m.dev(), m.ino()))
            .map_err(|e| named(e, &self.path))
    }

    pub fn statm_resident_bytes(&mut self, pid: i32) -> io::Result<Option<u64>> {
        let page = page_size();
        Ok(parse_statm_resident(self.read_str(pid, "statm")?).and_then(|p| p.checked_mul(page)))
    }

    /// (on-CPU ns, run-queue wait ns) of one task.
    pub fn schedstat(&mut self, tid: i32) -> io::Result<Option<(u64, u64)>> {
        Ok(parse_schedstat(self.read_str(tid, "schedstat")?))
    }

    pub fn stat(&mut self, pid: i32) -> io::Result<Option<Stat>> {
        Ok(parse_stat(self.read(pid, "stat")?))
    }

    /// User + system CPU of process `pid` so far, all its threads, in nanoseconds (from
    /// `stat`, so a multiple of the 10 ms clock tick).
    pub fn cpu_ns(&mut self, pid: i32) -> io::Result<Option<u64>> {
        let per_tick = 1_000_000_000 / clock_ticks_per_second();
        Ok(self
            .stat(pid)?
            .map(|s| (s.utime_ticks + s.stime_ticks) * per_tick))
    }

    /// Whether `tid` is a thread of process `tgid` (`/proc/TGID/task/TID` exists).
    pub fn is_thread_of(&mut self, tgid: i32, tid: i32) -> bool {
        self.path.clear();
        self.path.push(&self.root);
        self.path.push(itoa(tgid));
        self.path.push("task");
        self.path.push(itoa(tid));
        self.path.exists()
    }

    /// Every numeric entry of the root: the processes visible right now.
    pub fn pids(&self) -> io::Result<Vec<i32>> {
        let mut v = Vec::new();
        for e in std::fs::read_dir(&self.root)? {
            if let Some(pid) = e?.file_name().to_str().and_then(|n| n.parse().ok()) {
                v.push(pid);
            }
        }
        Ok(v)
    }

    /// Thread ids of process `pid`.
    pub fn tasks(&self, pid: i32) -> io::Result<Vec<i32>> {
        let mut v = Vec::new();
        for e in std::fs::read_dir(self.root.join(itoa(pid)).join("task"))? {
            if let Some(tid) = e?.file_name().to_str().and_then(|n| n.parse().ok()) {
                v.push(tid);
            }
        }
        Ok(v)
    }
}

/// One process's /proc files opened ahead of the moment they must be read. The ptrace tracker
/// reads argv at the exec stop and `VmHWM` and `/proc/PID/io` at the exit stop while the
/// process waits; opening the files there costs a path walk and, for a new process, the
/// instantiation of its /proc entries, several times what a `pread` of an open file costs
/// (bench/README.md). The files name the process itself (its `struct pid`), not its
/// number: they read the same text a later open would, follow the process across execs, and
/// read nothing once it has been reaped.
pub struct Held {
    cmdline: File,
    status: File,
    io: File,
    schedstat: Option<File>,
}

/// The readers of a [`Held`] process, with the [`ProcFs`]'s buffer.
pub struct HeldRead<'a, 'h> {
    fs: &'a mut ProcFs,
    h: &'h Held,
}

impl HeldRead<'_, '_> {
    pub fn cmdline(self) -> io::Result<Vec<Vec<u8>>> {
        Ok(parse_cmdline(self.fs.read_held(&self.h.cmdline)?))
    }

    pub fn status(self) -> io::Result<Status> {
        Ok(parse_status(self.fs.read_held_str(&self.h.status)?))
    }

    pub fn io(self) -> io::Result<Option<IoCounters>> {
        Ok(parse_io(self.fs.read_held_str(&self.h.io)?))
    }

    /// The main thread's (on-CPU ns, run-queue wait ns); `None` when not held.
    pub fn schedstat(self) -> io::Result<Option<(u64, u64)>> {
        match &self.h.schedstat {
            Some(f) => Ok(parse_schedstat(self.fs.read_held_str(f)?)),
            None => Ok(None),
        }
    }
}

fn itoa(n: i32) -> String {
    n.to_string()
}

/// Reads a file to its end into `buf` (zero-filled to its length, doubled when full) with
/// `read(buffer, offset)` calls; returns the number of bytes read. Stops only at a read of 0:
/// /proc files may come in several reads.
pub(super) fn read_all(
    mut read: impl FnMut(&mut [u8], u64) -> io::Result<usize>,
    buf: &mut Vec<u8>,
) -> io::Result<usize> {
    let mut n = 0;
    loop {
        if n == buf.len() {
            buf.resize((2 * buf.len()).max(READ_BUF_BYTES), 0);
        }
        match read(&mut buf[n..], n as u64) {
            Ok(0) => return Ok(n),
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn a_held_statm_is_read_again_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("42")).unwrap();
        std::fs::write(dir.path().join("42/statm"), "10 3 1 1 0 1 0\n").unwrap();
        let mut fs = ProcFs::new(dir.path());
        let f = fs.open_statm(42).unwrap();
        assert_eq!(f.read().unwrap(), Some((3, 1)));
        assert_eq!(f.read().unwrap(), Some((3, 1)));
        // A process without memory (a zombie) shows zeros: no reading.
        std::fs::write(dir.path().join("42/statm"), "0 0 0 0 0 0 0\n").unwrap();
        assert_eq!(fs.open_statm(42).unwrap().read().unwrap(), None);
    }

    pub(super) const ROLLUP: &str =
        "561fa8b06000-7ffee08a0000 ---p 00000000 00:00 0                          [rollup]
Rss:                1616 kB
Pss:                 760 kB
Pss_Dirty:           112 kB
Pss_Anon:            112 kB
Pss_File:            648 kB
Pss_Shmem:             0 kB
Shared_Clean:       1368 kB
Swap:                  4 kB
SwapPss:               0 kB
";

    /// `RssFile` + `RssShmem` are statm's `shared`, so the exit stop's `status` gives the
    /// sampler's counters without opening `statm` (captured from a `cat` on Linux 6.x; then a
    /// sleeping process, whose memory holds still, read both ways).
    #[test]
    fn status_shared_part_is_statms() {
        let s = parse_status(include_str!("../../../tests/fuzz/corpus/proc/status"));
        assert_eq!(s.vm_rss_bytes, Some(1784 * 1024));
        assert_eq!(s.rss_shared_bytes, Some(1672 * 1024));
        let mut sleeper = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let pid = sleeper.id() as i32;
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut fs = ProcFs::default();
        let status = fs.status(pid).unwrap();
        let statm = fs.open_statm(pid).unwrap().read().unwrap().unwrap();
        sleeper.kill().unwrap();
        sleeper.wait().unwrap();
        let page = page_size();
        assert_eq!(status.vm_rss_bytes, Some(statm.0 * page));
        assert_eq!(status.rss_shared_bytes, Some(statm.1 * page));
    }

    #[test]
    fn whole_cmdline_in_one_read_past_the_buffer() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("7")).unwrap();
        let long = vec![b'a'; 3 * READ_BUF_BYTES + 5];
        let mut cmdline = b"x\0".to_vec();
        cmdline.extend(&long);
        cmdline.push(0);
        std::fs::write(dir.path().join("7/cmdline"), &cmdline).unwrap();
        let mut fs = ProcFs::new(dir.path());
        assert_eq!(fs.cmdline_whole(7, 0).unwrap(), &cmdline[..]);
    }

    #[test]
    fn reads_in_pieces_and_grows() {
        // A reader that hands out 3 bytes per call, as a /proc file may come in several reads.
        struct Dribble(Vec<u8>, usize);
        impl Read for Dribble {
            fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
                let k = out.len().min(3).min(self.0.len() - self.1);
                out[..k].copy_from_slice(&self.0[self.1..self.1 + k]);
                self.1 += k;
                Ok(k)
            }
        }
        let text: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let mut buf = vec![0; 16];
        let mut d = Dribble(text.clone(), 0);
        let n = read_all(|b, _| d.read(b), &mut buf).unwrap();
        assert_eq!(&buf[..n], &text[..]);
        // The buffer is reused: a shorter file afterwards returns only its own bytes.
        let mut d = Dribble(b"ab".to_vec(), 0);
        let n = read_all(|b, _| d.read(b), &mut buf).unwrap();
        assert_eq!(&buf[..n], b"ab");
    }

    #[test]
    fn held_files_are_read_afresh_from_their_start() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("42");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("cmdline"), b"sh\0-c\0x\0").unwrap();
        std::fs::write(d.join("status"), "Tgid:\t42\nVmHWM:\t  100 kB\n").unwrap();
        std::fs::write(d.join("io"), "rchar: 1\nwchar: 2\nsyscr: 3\nsyscw: 4\nread_bytes: 5\nwrite_bytes: 6\ncancelled_write_bytes: 7\n").unwrap();
        let mut fs = ProcFs::new(dir.path());
        assert!(fs.hold(42, true).is_err(), "no schedstat: nothing held");
        let h = fs.hold(42, false).unwrap();
        assert_eq!(
            fs.held(&h).cmdline().unwrap(),
            vec![b"sh".to_vec(), b"-c".to_vec(), b"x".to_vec()]
        );
        // The process execs and its memory grows: the same open files give the new text, as a
        // /proc file does (the test rewrites the files in place, keeping their inodes).
        std::fs::write(d.join("cmdline"), b"/bin/true\0").unwrap();
        std::fs::write(d.join("status"), "Tgid:\t42\nVmHWM:\t  2048 kB\n").unwrap();
        assert_eq!(fs.held(&h).cmdline().unwrap(), vec![b"/bin/true".to_vec()]);
        assert_eq!(
            fs.held(&h).status().unwrap().vm_hwm_bytes,
            Some(2048 * 1024)
        );
        assert_eq!(fs.held(&h).io().unwrap().unwrap().wchar_bytes, 2);
        assert_eq!(fs.held(&h).schedstat().unwrap(), None);
        // Reads through paths still work in between and do not disturb the held files.
        assert_eq!(fs.status(42).unwrap().vm_hwm_bytes, Some(2048 * 1024));
        assert_eq!(fs.held(&h).cmdline().unwrap(), vec![b"/bin/true".to_vec()]);
    }

    #[test]
    fn reads_from_a_fake_root() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("42/task/43")).unwrap();
        std::fs::write(dir.path().join("42/smaps_rollup"), ROLLUP).unwrap();
        std::fs::write(dir.path().join("42/cmdline"), b"a\0b\0").unwrap();
        std::fs::write(dir.path().join("42/statm"), "10 3 1 1 0 1 0\n").unwrap();
        std::fs::write(
            dir.path().join("42/stat"),
            "42 (a) S 1 42 42 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 5 0 0",
        )
        .unwrap();
        let mut fs = ProcFs::new(dir.path());
        assert_eq!(fs.smaps_rollup(42).unwrap().unwrap().pss_bytes, 760 * 1024);
        assert_eq!(fs.cmdline(42).unwrap(), vec![b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(fs.statm_resident_bytes(42).unwrap(), Some(3 * page_size()));
        let tick = 1_000_000_000 / clock_ticks_per_second();
        assert_eq!(fs.cpu_ns(42).unwrap(), Some(10 * tick));
        assert!(fs.is_thread_of(42, 43));
        assert!(!fs.is_thread_of(42, 44));
        assert_eq!(fs.pids().unwrap(), vec![42]);
        assert!(fs.smaps_rollup(7).is_err());
    }

    #[test]
    fn errors_name_the_file_and_keep_the_os_error() {
        let dir = tempfile::tempdir().unwrap();
        let mut fs = ProcFs::new(dir.path());
        let path = dir.path().join("7").join("status");
        for e in [
            fs.status(7).unwrap_err(),
            fs.hold(7, false).err().unwrap(),
            fs.open_statm(7).err().unwrap(),
        ] {
            assert_eq!(e.kind(), io::ErrorKind::NotFound);
            assert_eq!(os_error(&e), Some(libc::ENOENT));
            assert!(
                e.to_string().starts_with(dir.path().to_str().unwrap()),
                "{e}"
            );
        }
        let e = fs.status(7).unwrap_err();
        assert!(
            e.to_string().starts_with(&format!("{}: ", path.display())),
            "{e}"
        );
    }
}
