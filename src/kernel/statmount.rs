//! statmount(2): one mount's filesystem type, root, mount point and options, found from a path
//! (statx(2)'s unique mount id), without reading every mount's line of `/proc/self/mountinfo`.
//!
//! Owns the two system calls and the layout of `struct statmount` (include/uapi/linux/mount.h,
//! Linux 6.11 for the options). Knows nothing of cgroups: `kernel::cgroup` asks it about the
//! places where cgroup hierarchies are usually mounted, and reads mountinfo when it has no
//! answer. Written by hand: no crate wraps these calls, and the libc crate has no statmount
//! number for x86_64 yet.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// What statmount says about one mount (the strings as mountinfo would show them unescaped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountFacts {
    pub fs_type: String,
    /// The path inside the filesystem that is mounted (`/` unless a bind or a container's).
    pub root: String,
    /// Where it is mounted, relative to the process's root.
    pub point: String,
    /// The filesystem's own options, comma-separated (a v1 cgroup's controllers); empty when
    /// it has none, or the kernel cannot say (before Linux 6.11).
    pub options: String,
}

#[cfg(target_arch = "x86_64")]
const SYS_STATMOUNT: libc::c_long = 457;

const STATMOUNT_MNT_ROOT: u64 = 0x08;
const STATMOUNT_MNT_POINT: u64 = 0x10;
const STATMOUNT_FS_TYPE: u64 = 0x20;
const STATMOUNT_MNT_OPTS: u64 = 0x80;
const WANTED: u64 =
    STATMOUNT_MNT_ROOT | STATMOUNT_MNT_POINT | STATMOUNT_FS_TYPE | STATMOUNT_MNT_OPTS;
/// The strings every answer must have (a filesystem without options of its own, as cgroup2,
/// gets no `mnt_opts`).
const NEEDED: u64 = STATMOUNT_MNT_ROOT | STATMOUNT_MNT_POINT | STATMOUNT_FS_TYPE;

/// `struct statmount`: where its fields are, and where its strings start (`str[]`, after
/// the fixed part and its spare words).
const AT_SIZE: usize = 0;
const AT_MNT_OPTS: usize = 4;
const AT_MASK: usize = 8;
const AT_FS_TYPE: usize = 36;
const AT_MNT_ROOT: usize = 104;
const AT_MNT_POINT: usize = 108;
const STRINGS_AT: usize = 512;

/// `struct mnt_id_req`, version 0 (24 bytes).
#[repr(C)]
struct MntIdReq {
    size: u32,
    spare: u32,
    mnt_id: u64,
    param: u64,
}

/// The facts of the mount `path` is on; `None` when the kernel cannot say (before Linux 6.11,
/// another architecture) or `path` cannot be reached.
pub fn of_path(path: &Path) -> Option<MountFacts> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statx fills a zeroed struct it is given a valid pointer to; the path is a
    // NUL-terminated string that outlives the call. The system call, not glibc's wrapper: in
    // the static release build (fat LTO) the wrapper was left an unresolved weak symbol, a
    // call to address 0, as `gettid`'s was (`kernel::calls::gettid`).
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    let r = unsafe {
        libc::syscall(
            libc::SYS_statx,
            libc::AT_FDCWD,
            c.as_ptr(),
            0,
            libc::STATX_MNT_ID_UNIQUE,
            &mut stx as *mut libc::statx,
        )
    };
    if r != 0 || stx.stx_mask & libc::STATX_MNT_ID_UNIQUE == 0 {
        return None;
    }
    statmount(stx.stx_mnt_id)
}

#[cfg(target_arch = "x86_64")]
fn statmount(mnt_id: u64) -> Option<MountFacts> {
    let req = MntIdReq {
        size: std::mem::size_of::<MntIdReq>() as u32,
        spare: 0,
        mnt_id,
        param: WANTED,
    };
    // 8-byte aligned, as the struct is; a cgroup mount's strings take a few hundred bytes.
    let mut buf = vec![0u64; 1024];
    let bytes = buf.len() * 8;
    // SAFETY: statmount reads the request and writes at most `bytes` bytes into `buf`.
    let r = unsafe {
        libc::syscall(
            SYS_STATMOUNT,
            &req as *const MntIdReq,
            buf.as_mut_ptr(),
            bytes,
            0u32,
        )
    };
    if r != 0 {
        return None;
    }
    // SAFETY: viewing the u64 buffer as its bytes.
    let raw = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), bytes) };
    parse(raw)
}

#[cfg(not(target_arch = "x86_64"))]
fn statmount(_mnt_id: u64) -> Option<MountFacts> {
    None
}

/// Reads a `struct statmount` the kernel wrote: `None` unless every wanted string is there.
fn parse(raw: &[u8]) -> Option<MountFacts> {
    let u32_at = |at: usize| -> Option<u32> {
        Some(u32::from_ne_bytes(raw.get(at..at + 4)?.try_into().ok()?))
    };
    let size = (u32_at(AT_SIZE)? as usize).min(raw.len());
    let mask = u64::from_ne_bytes(raw.get(AT_MASK..AT_MASK + 8)?.try_into().ok()?);
    if mask & NEEDED != NEEDED {
        return None;
    }
    let text = |field: usize| -> Option<String> {
        let start = STRINGS_AT.checked_add(u32_at(field)? as usize)?;
        let rest = raw.get(start..size)?;
        let end = rest.iter().position(|&b| b == 0)?;
        String::from_utf8(rest[..end].to_vec()).ok()
    };
    Some(MountFacts {
        fs_type: text(AT_FS_TYPE)?,
        root: text(AT_MNT_ROOT)?,
        point: text(AT_MNT_POINT)?,
        options: if mask & STATMOUNT_MNT_OPTS != 0 {
            text(AT_MNT_OPTS)?
        } else {
            String::new()
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `struct statmount` as the kernel lays it out, with `strings` in `str[]`.
    fn written(mask: u64, strings: &[(usize, &str)]) -> Vec<u8> {
        let mut raw = vec![0u8; STRINGS_AT];
        raw[AT_MASK..AT_MASK + 8].copy_from_slice(&mask.to_ne_bytes());
        for &(field, s) in strings {
            let off = (raw.len() - STRINGS_AT) as u32;
            raw[field..field + 4].copy_from_slice(&off.to_ne_bytes());
            raw.extend_from_slice(s.as_bytes());
            raw.push(0);
        }
        let size = raw.len() as u32;
        raw[AT_SIZE..AT_SIZE + 4].copy_from_slice(&size.to_ne_bytes());
        raw.resize(raw.len() + 64, 0xff);
        raw
    }

    #[test]
    fn reads_the_strings_of_a_v1_cgroup_mount() {
        // As Linux 6.18 answers for this machine's /sys/fs/cgroup/memory.
        let raw = written(
            WANTED | 0x1,
            &[
                (AT_FS_TYPE, "cgroup"),
                (AT_MNT_ROOT, "/"),
                (AT_MNT_POINT, "/sys/fs/cgroup/memory"),
                (AT_MNT_OPTS, "memory"),
            ],
        );
        assert_eq!(
            parse(&raw),
            Some(MountFacts {
                fs_type: "cgroup".into(),
                root: "/".into(),
                point: "/sys/fs/cgroup/memory".into(),
                options: "memory".into(),
            })
        );
    }

    #[test]
    fn no_options_is_empty_options() {
        // cgroup2 has no options of its own; a kernel before 6.11 answers none either.
        let raw = written(
            NEEDED,
            &[
                (AT_FS_TYPE, "cgroup2"),
                (AT_MNT_ROOT, "/"),
                (AT_MNT_POINT, "/sys/fs/cgroup/unified"),
            ],
        );
        assert_eq!(parse(&raw).unwrap().options, "");
    }

    #[test]
    fn a_string_the_kernel_did_not_write_is_no_answer() {
        // No mount point.
        let raw = written(
            STATMOUNT_FS_TYPE | STATMOUNT_MNT_ROOT,
            &[(AT_FS_TYPE, "cgroup"), (AT_MNT_ROOT, "/")],
        );
        assert_eq!(parse(&raw), None);
        // A string past the size the kernel gave, or without its NUL.
        let mut raw = written(
            NEEDED,
            &[
                (AT_FS_TYPE, "cgroup2"),
                (AT_MNT_ROOT, "/"),
                (AT_MNT_POINT, "/"),
            ],
        );
        raw[AT_SIZE..AT_SIZE + 4].copy_from_slice(&(STRINGS_AT as u32 + 3).to_ne_bytes());
        assert_eq!(parse(&raw), None);
        assert_eq!(parse(&raw[..100]), None);
    }

    #[test]
    fn the_root_mount_as_mountinfo_shows_it() {
        let Some(f) = of_path(Path::new("/")) else {
            eprintln!("skipped: statmount(2) does not answer here (it needs Linux 6.8)");
            return;
        };
        let mi = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let line = mi
            .lines()
            .find(|l| l.split(' ').nth(4) == Some("/"))
            .expect("mountinfo has the root mount");
        let fs_type = line.split(" - ").nth(1).unwrap().split(' ').next().unwrap();
        assert_eq!(f.point, "/");
        assert_eq!(f.fs_type, fs_type);
    }
}
