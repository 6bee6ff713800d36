//! Reader of `/proc/PID/pagemap`: one 64-bit entry per virtual page, saying whether the page
//! is present in RAM (and its page frame number), swapped, file-backed or shared-anonymous,
//! exclusively mapped, or soft-dirty. See the kernel's Documentation/admin-guide/mm/pagemap.rst.
//!
//! Owns the entry format and the positioned reads of one range. Without CAP_SYS_ADMIN the
//! kernel zeroes the frame numbers (the other bits stay valid: docs/kernel-notes.md); `pfn()` is then
//! `None` and callers say so. Knows nothing of page flags (`kpageflags`) or of output.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// One pagemap entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Entry(pub u64);

const PRESENT: u64 = 1 << 63;
const SWAPPED: u64 = 1 << 62;
const FILE_OR_SHARED_ANON: u64 = 1 << 61;
const GUARD_REGION: u64 = 1 << 58;
const UFFD_WP: u64 = 1 << 57;
const EXCLUSIVE: u64 = 1 << 56;
const SOFT_DIRTY: u64 = 1 << 55;
const PFN_MASK: u64 = (1 << 55) - 1;

impl Entry {
    /// The page is in RAM.
    pub fn present(self) -> bool {
        self.0 & PRESENT != 0
    }

    /// The page is in swap.
    pub fn swapped(self) -> bool {
        self.0 & SWAPPED != 0
    }

    /// The page is file-backed or shared anonymous (bit 61).
    pub fn file_or_shared_anon(self) -> bool {
        self.0 & FILE_OR_SHARED_ANON != 0
    }

    /// The page is mapped by this process only (bit 56; since Linux 4.2).
    pub fn exclusive(self) -> bool {
        self.0 & EXCLUSIVE != 0
    }

    /// The page was written since the soft-dirty bits were last cleared (bit 55).
    pub fn soft_dirty(self) -> bool {
        self.0 & SOFT_DIRTY != 0
    }

    /// Write-protected by userfaultfd (bit 57).
    pub fn uffd_wp(self) -> bool {
        self.0 & UFFD_WP != 0
    }

    /// A guard region installed by `MADV_GUARD_INSTALL` (bit 58, Linux 6.15+).
    pub fn guard(self) -> bool {
        self.0 & GUARD_REGION != 0
    }

    /// The page frame number of a present page; `None` when not present, or when the kernel
    /// hid it (it reads 0 without CAP_SYS_ADMIN).
    pub fn pfn(self) -> Option<u64> {
        let pfn = self.0 & PFN_MASK;
        (self.present() && pfn != 0).then_some(pfn)
    }

    /// The bits other than present and the frame number, packed into one byte for grouping:
    /// see [`PteBits`].
    pub fn bits(self) -> PteBits {
        let mut b = 0u8;
        if self.swapped() {
            b |= PteBits::SWAPPED;
        }
        if self.file_or_shared_anon() {
            b |= PteBits::FILE_OR_SHARED;
        }
        if self.exclusive() {
            b |= PteBits::EXCLUSIVE;
        }
        if self.soft_dirty() {
            b |= PteBits::SOFT_DIRTY;
        }
        if self.uffd_wp() {
            b |= PteBits::UFFD_WP;
        }
        PteBits(b)
    }
}

/// The page-table bits of an entry that stay valid without privilege, as a small set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct PteBits(pub u8);

impl PteBits {
    pub const SWAPPED: u8 = 1;
    pub const FILE_OR_SHARED: u8 = 2;
    pub const EXCLUSIVE: u8 = 4;
    pub const SOFT_DIRTY: u8 = 8;
    pub const UFFD_WP: u8 = 16;

    /// (bit, letter, name), in display order. The letters are ste's own; `page-types` has no
    /// letters for page-table bits.
    pub const NAMES: [(u8, char, &'static str); 5] = [
        (Self::SWAPPED, 'w', "swapped"),
        (Self::FILE_OR_SHARED, 'f', "file_or_shared_anon"),
        (Self::EXCLUSIVE, 'e', "exclusive"),
        (Self::SOFT_DIRTY, 'd', "soft_dirty"),
        (Self::UFFD_WP, 'p', "uffd_wp"),
    ];

    pub fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }

    /// The set letters, in display order (`fe`).
    pub fn letters(self) -> String {
        Self::NAMES
            .iter()
            .filter(|(b, _, _)| self.has(*b))
            .map(|(_, c, _)| *c)
            .collect()
    }
}

/// Decodes little-endian entries (the kernel's native order on every Linux ste runs on).
pub fn parse_entries(bytes: &[u8], out: &mut Vec<Entry>) {
    out.extend(
        bytes
            .chunks_exact(8)
            .map(|c| Entry(u64::from_ne_bytes(c.try_into().expect("8 bytes")))),
    );
}

/// An open `/proc/PID/pagemap`.
pub struct Pagemap {
    file: File,
    page_size: u64,
    buf: Vec<u8>,
}

/// Entries read per system call: 64 Ki entries (512 KiB), so a huge sparse mapping is read in
/// bounded pieces.
const CHUNK_PAGES: u64 = 64 * 1024;

impl Pagemap {
    pub fn open(root: &Path, pid: i32, page_size: u64) -> io::Result<Pagemap> {
        Ok(Pagemap {
            file: File::open(root.join(pid.to_string()).join("pagemap"))?,
            page_size,
            buf: Vec::new(),
        })
    }

    /// Appends the entries of the pages of `[start, end)` to `out`.
    pub fn read_range(&mut self, start: u64, end: u64, out: &mut Vec<Entry>) -> io::Result<()> {
        let first = start / self.page_size;
        let last = end.div_ceil(self.page_size);
        let mut page = first;
        while page < last {
            let n = (last - page).min(CHUNK_PAGES);
            self.buf.resize((n * 8) as usize, 0);
            let got = read_full_at(&self.file, &mut self.buf, page * 8)?;
            if got == 0 {
                break;
            }
            parse_entries(&self.buf[..got - got % 8], out);
            page += (got / 8) as u64;
        }
        Ok(())
    }
}

/// `pread` until `buf` is full or the file ends; returns the bytes read.
pub fn read_full_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::hex;

    /// The first four entries of a THP-backed anonymous mapping, read as root on this machine:
    /// present, exclusive, consecutive frames 0x18de00.. of one huge page.
    const ROOT_THP: &str = "00de18000000008101de18000000008102de18000000008103de180000000081";

    #[test]
    fn decodes_captured_entries() {
        let mut v = Vec::new();
        parse_entries(&hex(ROOT_THP), &mut v);
        assert_eq!(v.len(), 4);
        for (i, e) in v.iter().enumerate() {
            assert!(e.present());
            assert!(e.exclusive());
            assert!(!e.swapped() && !e.file_or_shared_anon() && !e.soft_dirty());
            assert_eq!(e.pfn(), Some(0x18de00 + i as u64));
            assert_eq!(e.bits().letters(), "e");
        }
    }

    #[test]
    fn unprivileged_entries_hide_the_frame() {
        // The same page as seen by an unprivileged reader: present and exclusive, PFN zeroed.
        let e = Entry(PRESENT | EXCLUSIVE);
        assert!(e.present());
        assert_eq!(e.pfn(), None);
        // A swapped page: not present, swap type/offset in the low bits (not a frame).
        let s = Entry(SWAPPED | 0x1234);
        assert!(!s.present() && s.swapped());
        assert_eq!(s.pfn(), None);
        assert_eq!(s.bits().letters(), "w");
        let f = Entry(PRESENT | FILE_OR_SHARED_ANON | SOFT_DIRTY | 7);
        assert_eq!(f.bits().letters(), "fd");
        assert_eq!(f.pfn(), Some(7));
    }

    #[test]
    fn reads_a_range_from_a_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("9")).unwrap();
        // A fake pagemap: entry i at byte 8·i holds i | PRESENT.
        let bytes: Vec<u8> = (0..300u64)
            .flat_map(|i| (i | PRESENT).to_ne_bytes())
            .collect();
        std::fs::write(dir.path().join("9/pagemap"), bytes).unwrap();
        let mut pm = Pagemap::open(dir.path(), 9, 4096).unwrap();
        let mut out = Vec::new();
        pm.read_range(10 * 4096, 13 * 4096, &mut out).unwrap();
        assert_eq!(
            out.iter().map(|e| e.pfn().unwrap()).collect::<Vec<_>>(),
            [10, 11, 12]
        );
        // Past the end of the (fake) file: stops quietly.
        out.clear();
        pm.read_range(299 * 4096, 310 * 4096, &mut out).unwrap();
        assert_eq!(out.len(), 1);
    }
}
