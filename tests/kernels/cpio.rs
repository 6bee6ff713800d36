//! The initramfs a kernel of the matrix boots: a `newc` cpio archive (the format the kernel
//! unpacks, Documentation/driver-api/early-userspace/buffer-format.rst), uncompressed, which
//! every kernel accepts, written here so that the runner needs no `cpio` tool.
//!
//! Owns the archive's format only; what goes in it is `host`'s.

use std::path::Path;

/// An archive being written, in memory (a few dozen MB).
#[derive(Default)]
pub struct Archive {
    out: Vec<u8>,
    ino: u32,
}

const DIR: u32 = 0o040000;
const FILE: u32 = 0o100000;
const LINK: u32 = 0o120000;
const CHAR: u32 = 0o020000;

impl Archive {
    fn entry(&mut self, name: &str, mode: u32, data: &[u8], rdev: (u32, u32)) {
        self.ino += 1;
        let name = name.trim_start_matches('/');
        let fields = [
            self.ino,
            mode,
            0, // uid
            0, // gid
            1, // nlink
            0, // mtime
            data.len() as u32,
            0, // devmajor
            0, // devminor
            rdev.0,
            rdev.1,
            name.len() as u32 + 1,
            0, // check
        ];
        self.out.extend_from_slice(b"070701");
        for f in fields {
            self.out.extend_from_slice(format!("{f:08x}").as_bytes());
        }
        self.out.extend_from_slice(name.as_bytes());
        self.out.push(0);
        self.pad();
        self.out.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        while !self.out.len().is_multiple_of(4) {
            self.out.push(0);
        }
    }

    pub fn dir(&mut self, name: &str, mode: u32) {
        self.entry(name, DIR | mode, &[], (0, 0));
    }

    pub fn file(&mut self, name: &str, mode: u32, data: &[u8]) {
        self.entry(name, FILE | mode, data, (0, 0));
    }

    /// The file at `from`, as `name`.
    pub fn copy(&mut self, name: &str, mode: u32, from: &Path) -> Result<(), String> {
        let data = std::fs::read(from).map_err(|e| format!("{}: {e}", from.display()))?;
        self.file(name, mode, &data);
        Ok(())
    }

    pub fn symlink(&mut self, name: &str, target: &str) {
        self.entry(name, LINK | 0o777, target.as_bytes(), (0, 0));
    }

    pub fn char_device(&mut self, name: &str, mode: u32, major: u32, minor: u32) {
        self.entry(name, CHAR | mode, &[], (major, minor));
    }

    /// The archive with its trailer.
    pub fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, &[], (0, 0));
        self.out
    }
}
