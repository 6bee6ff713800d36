//! What ste reads from ELF files: whether a program is dynamic (it names a program
//! interpreter, so ld.so runs and honours `LD_PRELOAD`), which interpreter, and of this
//! machine's class, from the first bytes of the file; and the SystemTap SDT probes of an
//! object (`.note.stapsdt`), such as glibc's `memory_*` malloc probes on distributions that
//! build them.
//!
//! Owns these two formats. The header check is hand-written (a few fixed offsets of the ELF
//! header, read from a prefix, so a 200 MB program costs one small read); sections are found
//! with the `object` crate. The SDT note layout is systemtap's `sys/sdt.h`: three addresses
//! (probe, `.stapsdt.base` at link time, semaphore), then provider, name and argument strings.

use object::{Object, ObjectSection, ObjectSegment};
use std::io::Read;
use std::path::Path;

/// What the start of an ELF file says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElfSummary {
    /// `ELFCLASS64`.
    pub class64: bool,
    /// `e_machine` (62: x86-64, 183: aarch64).
    pub machine: u16,
    /// Where in the file its `PT_INTERP` program header says the interpreter's path is
    /// (offset, size).
    interp_at: Option<(u64, u64)>,
}

impl ElfSummary {
    /// It has a `PT_INTERP` program header: a dynamically linked program.
    pub fn interp(&self) -> bool {
        self.interp_at.is_some()
    }
}

const PT_INTERP: u32 = 3;

/// Parses the ELF header and program headers found in `prefix`; `None` if it is not ELF or the
/// program headers lie beyond the prefix.
pub fn summarize(prefix: &[u8]) -> Option<ElfSummary> {
    if prefix.get(..4)? != b"\x7fELF" {
        return None;
    }
    let class64 = *prefix.get(4)? == 2;
    let little = *prefix.get(5)? == 1;
    let u16_at = |o: usize| -> Option<u16> {
        let b: [u8; 2] = prefix.get(o..o + 2)?.try_into().ok()?;
        Some(if little {
            u16::from_le_bytes(b)
        } else {
            u16::from_be_bytes(b)
        })
    };
    let u32_at = |o: usize| -> Option<u32> {
        let b: [u8; 4] = prefix.get(o..o + 4)?.try_into().ok()?;
        Some(if little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        })
    };
    let u64_at = |o: usize| -> Option<u64> {
        let b: [u8; 8] = prefix.get(o..o + 8)?.try_into().ok()?;
        Some(if little {
            u64::from_le_bytes(b)
        } else {
            u64::from_be_bytes(b)
        })
    };
    let machine = u16_at(18)?;
    let (phoff, phentsize, phnum) = if class64 {
        (
            u64_at(32)? as usize,
            u16_at(54)? as usize,
            u16_at(56)? as usize,
        )
    } else {
        (
            u32_at(28)? as usize,
            u16_at(42)? as usize,
            u16_at(44)? as usize,
        )
    };
    let mut interp_at = None;
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        if u32_at(ph)? == PT_INTERP {
            interp_at = Some(if class64 {
                (u64_at(ph + 8)?, u64_at(ph + 32)?)
            } else {
                (u64::from(u32_at(ph + 4)?), u64::from(u32_at(ph + 16)?))
            });
        }
    }
    Some(ElfSummary {
        class64,
        machine,
        interp_at,
    })
}

/// Reads the start of `path` and summarises it: 4 KiB, which holds the program headers of
/// every program linkers make, then 64 KiB if they lie further.
pub fn summarize_file(path: &Path) -> std::io::Result<Option<ElfSummary>> {
    let mut file = std::fs::File::open(path)?;
    let mut buf = Vec::with_capacity(4096);
    (&mut file).take(4096).read_to_end(&mut buf)?;
    if let Some(s) = summarize(&buf) {
        return Ok(Some(s));
    }
    if buf.len() == 4096 {
        file.take(60 * 1024).read_to_end(&mut buf)?;
    }
    Ok(summarize(&buf))
}

/// The program interpreter (the dynamic loader) that the program at `path` names, if it is a
/// dynamically linked ELF program.
pub fn interpreter(path: &Path) -> Option<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::FileExt;
    let (offset, size) = summarize_file(path).ok()??.interp_at?;
    // A path, NUL-terminated; PATH_MAX bounds what the kernel would accept.
    if size == 0 || size > 4096 {
        return None;
    }
    let mut buf = vec![0u8; size as usize];
    std::fs::File::open(path)
        .ok()?
        .read_exact_at(&mut buf, offset)
        .ok()?;
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    (end > 0).then(|| std::ffi::OsStr::from_bytes(&buf[..end]).into())
}

/// The machine ste itself was built for, as `e_machine` names it.
pub fn own_machine() -> u16 {
    match std::env::consts::ARCH {
        "x86_64" => 62,
        "aarch64" => 183,
        "riscv64" => 243,
        "powerpc64" => 21,
        "s390x" => 22,
        _ => 0,
    }
}

/// One SDT probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SdtProbe {
    pub provider: String,
    pub name: String,
    /// The probe's address, adjusted for where `.stapsdt.base` really is (prelink).
    pub pc: u64,
    /// The semaphore's address (0: none).
    pub semaphore: u64,
    /// The argument specification (`8@%rax -4@%ebx`).
    pub args: String,
    /// Where the probe's instruction is in the file (what a uprobe is attached at): `pc`
    /// through the loadable segment that holds it; `None` from the notes alone, or when no
    /// segment holds it.
    pub file_offset: Option<u64>,
}

const NT_STAPSDT: u32 = 3;

/// Parses the contents of a `.note.stapsdt` section of a 64-bit little-endian object;
/// `actual_base` is the address of its `.stapsdt.base` section, if any.
pub fn parse_sdt_notes(data: &[u8], actual_base: Option<u64>) -> Vec<SdtProbe> {
    let u32_at = |o: usize| -> Option<u32> {
        Some(u32::from_le_bytes(data.get(o..o + 4)?.try_into().ok()?))
    };
    let u64_at = |o: usize| -> Option<u64> {
        Some(u64::from_le_bytes(data.get(o..o + 8)?.try_into().ok()?))
    };
    let align4 = |n: usize| n.div_ceil(4) * 4;
    let mut out = Vec::new();
    let mut at = 0;
    while let (Some(namesz), Some(descsz), Some(kind)) =
        (u32_at(at), u32_at(at + 4), u32_at(at + 8))
    {
        let name_at = at + 12;
        let desc_at = name_at + align4(namesz as usize);
        let next = desc_at + align4(descsz as usize);
        let owner = data.get(name_at..name_at + namesz as usize).unwrap_or(&[]);
        if kind == NT_STAPSDT
            && owner == b"stapsdt\0"
            && let (Some(pc), Some(base), Some(semaphore)) =
                (u64_at(desc_at), u64_at(desc_at + 8), u64_at(desc_at + 16))
            && let Some(desc) = data.get(desc_at + 24..desc_at + descsz as usize)
        {
            let mut strings = desc.split(|&b| b == 0).map(String::from_utf8_lossy);
            let provider = strings.next().unwrap_or_default().into_owned();
            let name = strings.next().unwrap_or_default().into_owned();
            let args = strings.next().unwrap_or_default().into_owned();
            let shift = actual_base.map_or(0, |a| a.wrapping_sub(base));
            out.push(SdtProbe {
                provider,
                name,
                pc: pc.wrapping_add(shift),
                semaphore: if semaphore == 0 {
                    0
                } else {
                    semaphore.wrapping_add(shift)
                },
                args,
                file_offset: None,
            });
        }
        if next <= at {
            break;
        }
        at = next;
    }
    out
}

/// The SDT probes of the object at `path` (empty when it has none).
pub fn sdt_probes(path: &Path) -> Result<Vec<SdtProbe>, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    sdt_probes_of(&file, path)
}

/// The SDT probes of the object open as `file` (`path` names it in messages), read through
/// that descriptor: whoever attaches uprobes at these offsets must attach them to this very
/// file, not to whatever its path names later (`malloc::sdt::Image`).
pub fn sdt_probes_of(file: &std::fs::File, path: &Path) -> Result<Vec<SdtProbe>, String> {
    use std::os::unix::fs::FileExt;
    let len = file
        .metadata()
        .map_err(|e| format!("{}: {e}", path.display()))?
        .len();
    let mut data =
        vec![0u8; usize::try_from(len).map_err(|_| format!("{}: too large", path.display()))?];
    file.read_exact_at(&mut data, 0)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let file = object::File::parse(&*data).map_err(|e| format!("{}: {e}", path.display()))?;
    let Some(notes) = file.section_by_name(".note.stapsdt") else {
        return Ok(Vec::new());
    };
    let base = file.section_by_name(".stapsdt.base").map(|s| s.address());
    let bytes = notes
        .data()
        .map_err(|e| format!("{}: .note.stapsdt: {e}", path.display()))?;
    let segments: Vec<(u64, u64, u64)> = file
        .segments()
        .map(|seg| {
            let (offset, size) = seg.file_range();
            (seg.address(), size, offset)
        })
        .collect();
    let mut probes = parse_sdt_notes(bytes, base);
    for p in &mut probes {
        p.file_offset = file_offset(&segments, p.pc);
    }
    Ok(probes)
}

/// The file offset of the address `pc`, given the loadable segments as (address, file size,
/// file offset): what the kernel's uprobes take, as the dynamic loader maps the file.
pub fn file_offset(segments: &[(u64, u64, u64)], pc: u64) -> Option<u64> {
    segments
        .iter()
        .find(|&&(addr, size, _)| pc >= addr && pc - addr < size)
        .map(|&(addr, _, offset)| pc - addr + offset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::hex;

    /// `.note.stapsdt` of a test program built here with sys/sdt.h (systemtap-sdt-dev 4.8):
    /// `DTRACE_PROBE2(ste_test, memory_arena_new, p, argc)` and
    /// `DTRACE_PROBE1(ste_test, memory_sbrk_more, 4096L)`; `readelf -n` shows them at 0x1070
    /// and 0x1071 with base 0x2004.
    const NOTES: &str = "08000000410000000300000073746170736474007010000000000000042000000000000000000000000000007374655f74657374006d656d6f72795f6172656e615f6e657700384025726178202d34402565627800000000080000003b0000000300000073746170736474007110000000000000042000000000000000000000000000007374655f74657374006d656d6f72795f7362726b5f6d6f7265002d384024343039360000";

    #[test]
    fn sdt_notes_from_a_capture() {
        let p = parse_sdt_notes(&hex(NOTES), Some(0x2004));
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].provider, "ste_test");
        assert_eq!(p[0].name, "memory_arena_new");
        assert_eq!(p[0].pc, 0x1070);
        assert_eq!(p[0].semaphore, 0);
        assert_eq!(p[0].args, "8@%rax -4@%ebx");
        assert_eq!(p[1].name, "memory_sbrk_more");
        assert_eq!(p[1].pc, 0x1071);
        assert_eq!(p[1].args, "-8@$4096");
        // Prelinked elsewhere: addresses follow .stapsdt.base.
        let moved = parse_sdt_notes(&hex(NOTES), Some(0x3004));
        assert_eq!(moved[0].pc, 0x2070);
        assert!(parse_sdt_notes(&[], None).is_empty());
        assert_eq!(p[0].file_offset, None);
    }

    #[test]
    fn file_offsets_follow_the_segments() {
        // `readelf -l` of a PIE built here: text at 0x1000 from offset 0x1000, data at
        // 0x3df0 from offset 0x2df0.
        let segs = [
            (0, 0x628, 0),
            (0x1000, 0x1a5, 0x1000),
            (0x3df0, 0x248, 0x2df0),
        ];
        assert_eq!(file_offset(&segs, 0x1070), Some(0x1070));
        assert_eq!(file_offset(&segs, 0x3e00), Some(0x2e00));
        assert_eq!(file_offset(&segs, 0x2000), None);
    }

    #[test]
    fn elf_headers_of_real_programs() {
        // The shell: a dynamic 64-bit program of this machine (ste and its tests are static:
        // .cargo/config.toml), whose loader is there.
        let sh = summarize_file(Path::new("/bin/sh")).unwrap().unwrap();
        assert!(sh.class64 && sh.interp());
        assert_eq!(sh.machine, own_machine());
        let loader = interpreter(Path::new("/bin/sh")).expect("/bin/sh names its loader");
        assert!(
            loader.is_absolute() && loader.exists(),
            "{}",
            loader.display()
        );
        assert!(
            loader.to_string_lossy().contains("ld-"),
            "{}",
            loader.display()
        );
        // This test's own binary is static: no interpreter.
        let me = summarize_file(&std::env::current_exe().unwrap())
            .unwrap()
            .unwrap();
        assert!(me.class64 && !me.interp());
        assert_eq!(interpreter(&std::env::current_exe().unwrap()), None);
        assert_eq!(summarize(b"#!/bin/sh\n"), None);
        // A truncated header is not a summary.
        assert_eq!(summarize(b"\x7fELF\x02\x01"), None);
    }

    #[test]
    fn debian_libc_has_no_sdt_probes() {
        // docs/kernel-notes.md: Debian 12's libc has no .note.stapsdt.
        let libc = Path::new("/lib/x86_64-linux-gnu/libc.so.6");
        if libc.exists() {
            assert!(sdt_probes(libc).unwrap().is_empty());
        }
    }
}
