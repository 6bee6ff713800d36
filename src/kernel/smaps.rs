//! Readers of `/proc/PID/maps` and `/proc/PID/smaps`: every mapping of a process with its
//! header (range, permissions, offset, device, inode, path) and, for smaps, its per-mapping
//! totals (RSS, PSS, anonymous, dirty, swapped, huge pages). See proc(5).
//!
//! Owns these two text formats only: pure parsers tested on captures from this machine, and
//! readers that take the /proc root to read from. Classifying mappings (heap, stacks, …) is
//! the page-map source's business, not this file's. Full smaps costs time per mapping plus
//! time per resident page (docs/kernel-notes.md): never read it on the sampler's hot path.

use crate::kernel::proc::kb_value;
use std::io::{self, Read};
use std::path::Path;

/// The header line of one mapping, as in `/proc/PID/maps`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MapHeader {
    pub start: u64,
    pub end: u64,
    /// `rwxp` / `rw-s`: read, write, execute, then `p` (private) or `s` (shared).
    pub perms: String,
    /// Offset in the file, in bytes (0 for anonymous mappings).
    pub offset: u64,
    /// `major:minor` of the device holding the file (`00:00` for anonymous ones).
    pub dev: String,
    pub inode: u64,
    /// The file's path, or a pseudo-path (`[heap]`, `[stack]`, `[vdso]`, …); empty for
    /// anonymous mappings. A deleted file ends with ` (deleted)`.
    pub path: String,
}

impl MapHeader {
    pub fn len(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn readable(&self) -> bool {
        self.perms.as_bytes().first() == Some(&b'r')
    }

    pub fn writable(&self) -> bool {
        self.perms.as_bytes().get(1) == Some(&b'w')
    }

    pub fn shared(&self) -> bool {
        self.perms.as_bytes().get(3) == Some(&b's')
    }

    /// No access at all (`---p`): a guard page or reserved address space.
    pub fn no_access(&self) -> bool {
        self.perms.starts_with("---")
    }
}

/// The per-mapping figures of `/proc/PID/smaps`, in bytes. A line the kernel does not print
/// stays 0 here only for the figures every supported kernel prints; the rest are `Option`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SmapsFields {
    pub size: u64,
    pub rss: u64,
    pub pss: u64,
    pub pss_dirty: Option<u64>,
    pub shared_clean: u64,
    pub shared_dirty: u64,
    pub private_clean: u64,
    pub private_dirty: u64,
    pub referenced: u64,
    pub anonymous: u64,
    pub lazy_free: Option<u64>,
    pub anon_huge_pages: u64,
    pub shmem_pmd_mapped: Option<u64>,
    pub file_pmd_mapped: Option<u64>,
    pub shared_hugetlb: u64,
    pub private_hugetlb: u64,
    pub swap: u64,
    pub swap_pss: u64,
    pub locked: u64,
    /// `THPeligible`: whether the mapping may get transparent huge pages.
    pub thp_eligible: Option<bool>,
    /// `VmFlags` two-letter codes (`rd wr mr mw me ac hg`).
    pub vm_flags: Vec<String>,
}

/// One mapping of `/proc/PID/smaps`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SmapsEntry {
    pub header: MapHeader,
    pub fields: SmapsFields,
}

/// Parses one header line: `start-end perms offset dev inode [path]`. The path is everything
/// after the inode and its padding, spaces included.
pub fn parse_header(line: &str) -> Option<MapHeader> {
    let mut rest = line;
    let mut field = || -> Option<&str> {
        let trimmed = rest.trim_start_matches(' ');
        let end = trimmed.find(' ').unwrap_or(trimmed.len());
        let (f, r) = trimmed.split_at(end);
        rest = r;
        (!f.is_empty()).then_some(f)
    };
    let range = field()?;
    let perms = field()?;
    let offset = field()?;
    let dev = field()?;
    let inode = field()?;
    let (start, end) = range.split_once('-')?;
    let path = rest.trim_start_matches(' ');
    Some(MapHeader {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        perms: perms.to_string(),
        offset: u64::from_str_radix(offset, 16).ok()?,
        dev: dev.to_string(),
        inode: inode.parse().ok()?,
        path: path.to_string(),
    })
}

/// Parses `/proc/PID/maps`.
pub fn parse_maps(text: &str) -> Vec<MapHeader> {
    text.lines().filter_map(parse_header).collect()
}

/// Parses `/proc/PID/smaps`. A line that is neither a header nor a known `Key: value` line is
/// skipped, so newer kernels' additions do not break it.
pub fn parse_smaps(text: &str) -> Vec<SmapsEntry> {
    let mut out: Vec<SmapsEntry> = Vec::new();
    for line in text.lines() {
        // Field lines start with a capitalised key, header lines with a lowercase hex address.
        if line
            .as_bytes()
            .first()
            .is_some_and(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
            && let Some(header) = parse_header(line)
        {
            out.push(SmapsEntry {
                header,
                fields: SmapsFields::default(),
            });
            continue;
        }
        let Some(entry) = out.last_mut() else {
            continue;
        };
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let f = &mut entry.fields;
        match key {
            "VmFlags" => {
                f.vm_flags = value.split_ascii_whitespace().map(str::to_string).collect();
                continue;
            }
            "THPeligible" => {
                f.thp_eligible = value.trim().parse::<u8>().ok().map(|v| v != 0);
                continue;
            }
            _ => {}
        }
        let Some(bytes) = kb_value(value) else {
            continue;
        };
        match key {
            "Size" => f.size = bytes,
            "Rss" => f.rss = bytes,
            "Pss" => f.pss = bytes,
            "Pss_Dirty" => f.pss_dirty = Some(bytes),
            "Shared_Clean" => f.shared_clean = bytes,
            "Shared_Dirty" => f.shared_dirty = bytes,
            "Private_Clean" => f.private_clean = bytes,
            "Private_Dirty" => f.private_dirty = bytes,
            "Referenced" => f.referenced = bytes,
            "Anonymous" => f.anonymous = bytes,
            "LazyFree" => f.lazy_free = Some(bytes),
            "AnonHugePages" => f.anon_huge_pages = bytes,
            "ShmemPmdMapped" => f.shmem_pmd_mapped = Some(bytes),
            "FilePmdMapped" => f.file_pmd_mapped = Some(bytes),
            "Shared_Hugetlb" => f.shared_hugetlb = bytes,
            "Private_Hugetlb" => f.private_hugetlb = bytes,
            "Swap" => f.swap = bytes,
            "SwapPss" => f.swap_pss = bytes,
            "Locked" => f.locked = bytes,
            _ => {}
        }
    }
    out
}

/// Reads `<root>/<pid>/smaps`.
pub fn read_smaps(root: &Path, pid: i32) -> io::Result<Vec<SmapsEntry>> {
    Ok(parse_smaps(&read_text(root, pid, "smaps")?))
}

/// Reads `<root>/<pid>/maps`.
pub fn read_maps(root: &Path, pid: i32) -> io::Result<Vec<MapHeader>> {
    Ok(parse_maps(&read_text(root, pid, "maps")?))
}

fn read_text(root: &Path, pid: i32, file: &str) -> io::Result<String> {
    let mut f = std::fs::File::open(root.join(pid.to_string()).join(file))?;
    let mut buf = Vec::with_capacity(64 * 1024);
    f.read_to_end(&mut buf)?;
    // Paths are bytes; a non-UTF-8 path is shown with replacement characters.
    Ok(String::from_utf8(buf).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured from `memory_fixture anon 64 thp` on this machine (6.18, Debian 12): the
    /// brk heap, the 64 MiB THP mapping, libc's text, vvar, the stack and vsyscall.
    pub const SMAPS: &str = "\
55a47babd000-55a47bade000 rw-p 00000000 00:00 0                          [heap]
Size:                132 kB
KernelPageSize:        4 kB
MMUPageSize:           4 kB
Rss:                   8 kB
Pss:                   8 kB
Pss_Dirty:             8 kB
Shared_Clean:          0 kB
Shared_Dirty:          0 kB
Private_Clean:         0 kB
Private_Dirty:         8 kB
Referenced:            8 kB
Anonymous:             8 kB
KSM:                   0 kB
LazyFree:              0 kB
AnonHugePages:         0 kB
ShmemPmdMapped:        0 kB
FilePmdMapped:         0 kB
Shared_Hugetlb:        0 kB
Private_Hugetlb:       0 kB
Swap:                  0 kB
SwapPss:               0 kB
Locked:                0 kB
THPeligible:           0
ProtectionKey:         0
VmFlags: rd wr mr mw me ac 
7f9934a00000-7f9938a00000 rw-p 00000000 00:00 0 
Size:              65536 kB
KernelPageSize:        4 kB
MMUPageSize:           4 kB
Rss:               65536 kB
Pss:               65536 kB
Pss_Dirty:         65536 kB
Shared_Clean:          0 kB
Shared_Dirty:          0 kB
Private_Clean:         0 kB
Private_Dirty:     65536 kB
Referenced:        65536 kB
Anonymous:         65536 kB
KSM:                   0 kB
LazyFree:              0 kB
AnonHugePages:     65536 kB
ShmemPmdMapped:        0 kB
FilePmdMapped:         0 kB
Shared_Hugetlb:        0 kB
Private_Hugetlb:       0 kB
Swap:                  0 kB
SwapPss:               0 kB
Locked:                0 kB
THPeligible:           1
ProtectionKey:         0
VmFlags: rd wr mr mw me ac hg 
7f9938e1f000-7f9938f75000 r-xp 00026000 fe:00 326279                     /usr/lib/x86_64-linux-gnu/libc.so.6
Size:               1368 kB
KernelPageSize:        4 kB
MMUPageSize:           4 kB
Rss:                 964 kB
Pss:                  43 kB
Pss_Dirty:             0 kB
Shared_Clean:        964 kB
Shared_Dirty:          0 kB
Private_Clean:         0 kB
Private_Dirty:         0 kB
Referenced:          964 kB
Anonymous:             0 kB
KSM:                   0 kB
LazyFree:              0 kB
AnonHugePages:         0 kB
ShmemPmdMapped:        0 kB
FilePmdMapped:         0 kB
Shared_Hugetlb:        0 kB
Private_Hugetlb:       0 kB
Swap:                  0 kB
SwapPss:               0 kB
Locked:                0 kB
THPeligible:           0
ProtectionKey:         0
VmFlags: rd ex mr mw me 
7f9939006000-7f993900a000 r--p 00000000 00:00 0                          [vvar]
Size:                 16 kB
KernelPageSize:        4 kB
MMUPageSize:           4 kB
Rss:                   0 kB
Pss:                   0 kB
Pss_Dirty:             0 kB
Shared_Clean:          0 kB
Shared_Dirty:          0 kB
Private_Clean:         0 kB
Private_Dirty:         0 kB
Referenced:            0 kB
Anonymous:             0 kB
KSM:                   0 kB
LazyFree:              0 kB
AnonHugePages:         0 kB
ShmemPmdMapped:        0 kB
FilePmdMapped:         0 kB
Shared_Hugetlb:        0 kB
Private_Hugetlb:       0 kB
Swap:                  0 kB
SwapPss:               0 kB
Locked:                0 kB
THPeligible:           0
ProtectionKey:         0
VmFlags: rd mr pf io de dd 
7ffe09d48000-7ffe09d69000 rw-p 00000000 00:00 0                          [stack]
Size:                132 kB
KernelPageSize:        4 kB
MMUPageSize:           4 kB
Rss:                  12 kB
Pss:                  12 kB
Pss_Dirty:            12 kB
Shared_Clean:          0 kB
Shared_Dirty:          0 kB
Private_Clean:         0 kB
Private_Dirty:        12 kB
Referenced:           12 kB
Anonymous:            12 kB
KSM:                   0 kB
LazyFree:              0 kB
AnonHugePages:         0 kB
ShmemPmdMapped:        0 kB
FilePmdMapped:         0 kB
Shared_Hugetlb:        0 kB
Private_Hugetlb:       0 kB
Swap:                  0 kB
SwapPss:               0 kB
Locked:                0 kB
THPeligible:           0
ProtectionKey:         0
VmFlags: rd wr mr mw me gd ac 
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
Size:                  4 kB
KernelPageSize:        4 kB
MMUPageSize:           4 kB
Rss:                   0 kB
Pss:                   0 kB
Pss_Dirty:             0 kB
Shared_Clean:          0 kB
Shared_Dirty:          0 kB
Private_Clean:         0 kB
Private_Dirty:         0 kB
Referenced:            0 kB
Anonymous:             0 kB
KSM:                   0 kB
LazyFree:              0 kB
AnonHugePages:         0 kB
ShmemPmdMapped:        0 kB
FilePmdMapped:         0 kB
Shared_Hugetlb:        0 kB
Private_Hugetlb:       0 kB
Swap:                  0 kB
SwapPss:               0 kB
Locked:                0 kB
THPeligible:           0
ProtectionKey:         0
VmFlags: ex 
";

    #[test]
    fn smaps_from_a_capture() {
        let e = parse_smaps(SMAPS);
        assert_eq!(e.len(), 6);
        let heap = &e[0];
        assert_eq!(heap.header.start, 0x55a47babd000);
        assert_eq!(heap.header.end, 0x55a47bade000);
        assert_eq!(heap.header.perms, "rw-p");
        assert_eq!(heap.header.path, "[heap]");
        assert_eq!(heap.fields.size, 132 * 1024);
        assert_eq!(heap.fields.rss, 8 * 1024);
        assert_eq!(heap.fields.anonymous, 8 * 1024);
        let thp = &e[1];
        assert_eq!(thp.header.path, "");
        assert_eq!(thp.fields.anon_huge_pages, 64 << 20);
        assert_eq!(thp.fields.thp_eligible, Some(true));
        assert!(thp.fields.vm_flags.iter().any(|f| f == "hg"));
        let libc = &e[2];
        assert_eq!(libc.header.offset, 0x26000);
        assert_eq!(libc.header.dev, "fe:00");
        assert_eq!(libc.header.inode, 326279);
        assert_eq!(libc.header.path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
        assert_eq!(libc.fields.pss, 43 * 1024);
        assert_eq!(libc.fields.shared_clean, 964 * 1024);
        assert!(!libc.header.writable() && libc.header.readable() && !libc.header.shared());
        assert_eq!(e[4].header.path, "[stack]");
        assert!(e[4].fields.vm_flags.iter().any(|f| f == "gd"));
        assert_eq!(e[5].header.start, 0xffffffffff600000);
        assert_eq!(e[5].header.perms, "--xp");
    }

    #[test]
    fn paths_with_spaces_and_deleted_files() {
        let h = parse_header(
            "7f00000000-7f00001000 rw-s 00000000 00:01 1234                       /dev/zero (deleted)",
        )
        .unwrap();
        assert_eq!(h.path, "/dev/zero (deleted)");
        assert!(h.shared());
        let h = parse_header("7f00000000-7f00001000 r--p 00001000 fe:00 77 /tmp/a b  c").unwrap();
        assert_eq!(h.path, "/tmp/a b  c");
        assert_eq!(h.offset, 0x1000);
        let h = parse_header("7f00000000-7f00002000 ---p 00000000 00:00 0 ").unwrap();
        assert!(h.no_access());
        assert_eq!(h.len(), 0x2000);
        assert_eq!(parse_header("Rss: 4 kB"), None);
    }

    #[test]
    fn maps_and_smaps_from_a_fake_root() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("7")).unwrap();
        std::fs::write(dir.path().join("7/smaps"), SMAPS).unwrap();
        let maps: String = SMAPS
            .lines()
            .filter(|l| parse_header(l).is_some())
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(dir.path().join("7/maps"), maps).unwrap();
        assert_eq!(read_smaps(dir.path(), 7).unwrap().len(), 6);
        let m = read_maps(dir.path(), 7).unwrap();
        assert_eq!(m.len(), 6);
        assert_eq!(m[4].path, "[stack]");
        assert!(read_smaps(dir.path(), 8).is_err());
    }
}
