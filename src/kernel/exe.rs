//! What an executable file asks of an exec: set-user-ID or set-group-ID bits, and file
//! capabilities (`security.capability`), on a mount that honours them (not `nosuid`).
//!
//! Owns the reads of one file's mode, owner, mount flags and capability attribute (through
//! `/proc/PID/exe`, which names the image a process runs); the ptrace tracker judges what the
//! kernel did with them. Knows nothing of trackers.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// What the file asks for. All `None`/`false` for a plain program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Asks {
    /// Set-user-ID: the owner the process would run as.
    pub setuid_owner: Option<u32>,
    /// Set-group-ID (with group execute: without it the bit means mandatory locking): the
    /// group the process would run as.
    pub setgid_group: Option<u32>,
    /// A `security.capability` attribute: capabilities the process would get.
    pub file_caps: bool,
}

impl Asks {
    pub fn anything(&self) -> bool {
        self.setuid_owner.is_some() || self.setgid_group.is_some() || self.file_caps
    }
}

/// What files asked, by identity: a file's device, inode and change time (a `chmod`, `chown`
/// or `setcap` changes it), so that a program exec'd again costs one `stat`, not the
/// attribute's and the mount's reads too (a fork loop execs the same file thousands of times).
#[derive(Default)]
pub struct Asked(std::collections::HashMap<(u64, u64, i64, i64), Asks>);

impl Asked {
    /// What `file` (followed if a link, as `/proc/PID/exe` is) asks of an exec. A mount
    /// mounted `nosuid` honours neither set-id bits nor file capabilities: then nothing.
    pub fn asks(&mut self, file: &Path) -> io::Result<Asks> {
        let m = std::fs::metadata(file)?;
        let key = (m.dev(), m.ino(), m.ctime(), m.ctime_nsec());
        if let Some(a) = self.0.get(&key) {
            return Ok(*a);
        }
        let a = read(file, &m)?;
        self.0.insert(key, a);
        Ok(a)
    }
}

fn read(file: &Path, m: &std::fs::Metadata) -> io::Result<Asks> {
    let mode = m.mode();
    let mut a = Asks {
        setuid_owner: (mode & libc::S_ISUID != 0).then_some(m.uid()),
        setgid_group: (mode & libc::S_ISGID != 0 && mode & libc::S_IXGRP != 0).then_some(m.gid()),
        file_caps: false,
    };
    let c = CString::new(file.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: a NUL-terminated path and name; a null buffer of size 0 asks for the size only.
    let n = unsafe {
        libc::getxattr(
            c.as_ptr(),
            c"security.capability".as_ptr(),
            std::ptr::null_mut(),
            0,
        )
    };
    a.file_caps = n > 0;
    if a.anything() {
        // SAFETY: a zeroed statvfs is a valid output buffer for a NUL-terminated path.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        if unsafe { libc::statvfs(c.as_ptr(), &mut st) } == 0 && st.f_flag & libc::ST_NOSUID != 0 {
            return Ok(Asks::default());
        }
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn set_id_bits_and_their_owner() {
        let asks = |f: &Path| Asked::default().asks(f);
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("prog");
        std::fs::write(&f, "").unwrap();
        let m = std::fs::metadata(&f).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(asks(&f).unwrap(), Asks::default());
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o4755)).unwrap();
        let a = asks(&f).unwrap();
        // A tmpfs mounted nosuid honours nothing: only where it does is the bit seen.
        let nosuid = {
            let c = CString::new(f.as_os_str().as_bytes()).unwrap();
            // SAFETY: as in `asks`.
            let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
            // SAFETY: as above.
            assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut st) }, 0);
            st.f_flag & libc::ST_NOSUID != 0
        };
        if nosuid {
            assert_eq!(a, Asks::default());
        } else {
            assert_eq!(a.setuid_owner, Some(m.uid()));
            // Set-group-ID without group execute is mandatory locking, not set-id.
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o2744)).unwrap();
            assert_eq!(asks(&f).unwrap(), Asks::default());
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o2755)).unwrap();
            assert_eq!(asks(&f).unwrap().setgid_group, Some(m.gid()));
        }
    }

    /// Debian's `ping` has file capabilities (`cap_net_raw=ep`) rather than set-user-ID;
    /// `setcap` gives a file the same (root only: else nothing to test).
    #[test]
    fn file_capabilities() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("prog");
        std::fs::write(&f, "").unwrap();
        // One cache through the change: the capability changes the file's change time.
        let mut asked = Asked::default();
        let mut asks = |f: &Path| asked.asks(f);
        assert!(!asks(&f).unwrap().file_caps);
        let set = std::process::Command::new("setcap")
            .arg("cap_net_raw+ep")
            .arg(&f)
            .status();
        if !set.is_ok_and(|s| s.success()) {
            return;
        }
        assert!(asks(&f).unwrap().file_caps);
    }
}
