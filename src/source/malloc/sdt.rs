//! glibc's `memory_*` SDT probes (provider `libc`) for `--malloc`: which objects are searched
//! (the libc ste runs with, which the command's programs load in practice, and the command's
//! own program), which probe sites can get a uprobe, how each site's size argument is read
//! (the note's argument spec decoded here into what `bpf/ste.bpf.c`'s `sdt_memory` reads), and
//! the text and model figures made of what the kernel counted.
//!
//! Pure apart from reading the ELF files, each opened once ([`Image`]): its notes are parsed
//! from that descriptor and the uprobes attached through it, so the file probed is the file
//! parsed. Attaching the uprobes and reading the counts is the ebpf tracker's
//! (`track::ebpf`), which owns the BPF object. Argument forms decoded: `N@%reg`
//! (any general register or its 32/16/8-bit part except `%ah`-style high bytes), `N@$imm`,
//! `N@disp(%reg)`. Not decoded (the hit is counted, its size is not): `%rip`-relative and
//! symbolic displacements (`N@sym+8(%rip)`), indexed forms (`N@8(%rax,%rbx,4)`), segment
//! prefixes (`%fs:…`).

use crate::kernel::elf;
use crate::model::malloc::{SdtCounts, SdtObject, SdtProbeCount, SdtSize};
use std::ffi::OsString;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Probe sites and probe names the BPF object has room for (`SDT_SITES`, `SDT_KINDS`).
pub const SITES_MAX: usize = 256;
pub const KINDS_MAX: usize = 64;

/// How to read one argument at a probe site (`struct sdt_arg` of the BPF object).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    /// The register's value (`reg`: its word in x86-64's `struct pt_regs`).
    Reg {
        reg: u32,
        size: i32,
    },
    /// `size` bytes at the register's value plus `disp`, in the process's memory.
    Mem {
        reg: u32,
        disp: i64,
        size: i32,
    },
    Const {
        value: i64,
        size: i32,
    },
}

/// One probe site to attach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    /// Index in [`Plan::objects`].
    pub object: usize,
    pub file_offset: u64,
    /// Index in [`Plan::kinds`].
    pub kind: u32,
    /// How to read its size argument, when it has one and its form is decoded.
    pub size: Option<Arg>,
    /// A uprobe is attached (set by the tracker).
    pub attached: bool,
}

/// An object opened once, for both the parse of its notes and the attach of its uprobes: the
/// uprobes go to `/proc/self/fd/N` of this descriptor, the very file parsed. Attaching by the
/// path let whoever can write the path's directory (a program in /tmp, a user's build tree)
/// rename another file over it in between, and root then wrote int3 at the parsed offsets of
/// that other file into every process that maps it.
#[derive(Debug, Clone)]
pub struct Image {
    file: Arc<File>,
    /// Device and inode at the open: what the attach checks the descriptor's link leads to.
    id: (u64, u64),
}

impl Image {
    /// Opens `path`: a regular file (no FIFO blocks the open, no device is opened as one).
    pub fn open(path: &Path) -> std::io::Result<Image> {
        let file = File::options()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(path)?;
        let st = file.metadata()?;
        if !st.is_file() {
            return Err(std::io::Error::other("not a regular file"));
        }
        Ok(Image {
            file: Arc::new(file),
            id: (st.dev(), st.ino()),
        })
    }

    /// The path to attach uprobes through: the descriptor's procfs link, once checked to lead
    /// to the file opened (the kernel resolves it to that open file's inode, whatever its
    /// name leads to by then).
    pub fn attach_path(&self) -> Result<PathBuf, String> {
        let path = PathBuf::from(format!("/proc/self/fd/{}", self.file.as_raw_fd()));
        let st = std::fs::metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        if (st.dev(), st.ino()) != self.id {
            return Err(format!(
                "{} does not lead to the file whose notes were read: refused",
                path.display()
            ));
        }
        Ok(path)
    }
}

/// The same file.
impl PartialEq for Image {
    fn eq(&self, other: &Image) -> bool {
        self.id == other.id
    }
}

impl Eq for Image {}

/// Test hook, in debug builds only (`STE_TEST_SDT_SWAP=PATH`): renames `PATH.swap` over
/// `PATH` just before the uprobes are attached, as a racer who can write the program's
/// directory would, so that a test can show the uprobes go to the file parsed. A release build
/// has no such hook.
pub fn test_hook_before_attach() {
    #[cfg(debug_assertions)]
    if let Some(path) = std::env::var_os("STE_TEST_SDT_SWAP") {
        let mut from = path.clone();
        from.push(".swap");
        let _ = std::fs::rename(from, path);
    }
}

/// An object searched for probes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    pub path: PathBuf,
    /// The file as opened once (`None` when it could not be opened).
    pub image: Option<Image>,
    /// `libc` or `program`.
    pub role: &'static str,
    /// `memory_*` probe sites found.
    pub found: u32,
    /// Why sites (or the whole object) could not be attached.
    pub not_attached: Vec<String>,
}

/// What to attach, and (once the tracker tried) what was.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    pub objects: Vec<Object>,
    /// Probe names, indexed by a site's `kind`.
    pub kinds: Vec<String>,
    pub sites: Vec<Site>,
    /// Size arguments whose form is not decoded (their sizes are not known).
    pub undecoded: Vec<String>,
}

/// Which argument (from 1) of a glibc probe is a size in bytes (glibc's malloc/arena.c,
/// malloc/malloc.c; the heap ones give the heap's new size).
pub fn size_arg(name: &str) -> Option<u32> {
    match name {
        "memory_arena_new" | "memory_heap_new" | "memory_heap_free" | "memory_heap_more"
        | "memory_heap_less" | "memory_sbrk_more" | "memory_sbrk_less" => Some(2),
        "memory_malloc_retry"
        | "memory_calloc_retry"
        | "memory_realloc_retry"
        | "memory_memalign_retry"
        | "memory_arena_retry"
        | "memory_mallopt_mmap_threshold"
        | "memory_mallopt_trim_threshold"
        | "memory_mallopt_top_pad" => Some(1),
        _ => None,
    }
}

/// The word of x86-64's `struct pt_regs` that holds a general register (or its lower part).
fn register(name: &str) -> Option<u32> {
    const LEGACY: [(u32, [&str; 4]); 8] = [
        (10, ["rax", "eax", "ax", "al"]),
        (5, ["rbx", "ebx", "bx", "bl"]),
        (11, ["rcx", "ecx", "cx", "cl"]),
        (12, ["rdx", "edx", "dx", "dl"]),
        (13, ["rsi", "esi", "si", "sil"]),
        (14, ["rdi", "edi", "di", "dil"]),
        (4, ["rbp", "ebp", "bp", "bpl"]),
        (19, ["rsp", "esp", "sp", "spl"]),
    ];
    if let Some((word, _)) = LEGACY.iter().find(|(_, names)| names.contains(&name)) {
        return Some(*word);
    }
    // r8..r15, with a d/w/b (or l) suffix for the lower parts.
    let digits = name
        .strip_prefix('r')?
        .trim_end_matches(['d', 'w', 'b', 'l']);
    let suffix = &name[1 + digits.len()..];
    if suffix.len() > 1 {
        return None;
    }
    // pt_regs: r15 r14 r13 r12 bp bx r11 r10 r9 r8 …
    match digits.parse::<u32>().ok()? {
        n @ 8..=11 => Some(17 - n),
        n @ 12..=15 => Some(15 - n),
        _ => None,
    }
}

fn parse_int(s: &str) -> Option<i64> {
    let (neg, s) = s.strip_prefix('-').map_or((false, s), |r| (true, r));
    let v = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => i64::from_str_radix(hex, 16).ok()?,
        None => s.parse::<i64>().ok()?,
    };
    Some(if neg { -v } else { v })
}

/// Decodes one argument of an SDT note (`-4@%eax`, `8@-16(%rbp)`, `-8@$4096`), or says why not.
pub fn parse_arg(spec: &str) -> Result<Arg, String> {
    let (size, op) = match spec.split_once('@') {
        Some((n, op)) => (
            n.parse::<i32>()
                .map_err(|_| format!("`{spec}`: size `{n}`"))?,
            op,
        ),
        // Old notes give no size: a long.
        None => (8, spec),
    };
    if !matches!(size.unsigned_abs(), 1 | 2 | 4 | 8) {
        return Err(format!("`{spec}`: size {size}"));
    }
    let reg = |r: &str| {
        r.strip_prefix('%')
            .and_then(register)
            .ok_or_else(|| format!("`{spec}`: register `{r}` not decoded"))
    };
    if let Some(v) = op.strip_prefix('$') {
        let value = parse_int(v).ok_or_else(|| format!("`{spec}`: symbolic constant"))?;
        return Ok(Arg::Const { value, size });
    }
    if op.starts_with('%') {
        return Ok(Arg::Reg {
            reg: reg(op)?,
            size,
        });
    }
    if let Some((disp, rest)) = op.split_once('(')
        && let Some(inner) = rest.strip_suffix(')')
    {
        if inner.contains(',') {
            return Err(format!("`{spec}`: indexed addressing not decoded"));
        }
        let disp = if disp.is_empty() {
            0
        } else {
            parse_int(disp).ok_or_else(|| format!("`{spec}`: symbolic displacement"))?
        };
        return Ok(Arg::Mem {
            reg: reg(inner)?,
            disp,
            size,
        });
    }
    Err(format!("`{spec}`: form not decoded"))
}

/// The libc the command's programs load, in practice: `libc.so.6` beside the dynamic loader
/// that `program` names (glibc installs the two side by side), or, for a script or a static
/// program, the loader `/bin/sh` names. Not ste's own: ste is static (`.cargo/config.toml`).
pub fn command_libc(program: Option<&Path>) -> Option<PathBuf> {
    let loader = program
        .and_then(elf::interpreter)
        .or_else(|| elf::interpreter(Path::new("/bin/sh")))?;
    let libc = std::fs::canonicalize(loader)
        .ok()?
        .parent()?
        .join("libc.so.6");
    libc.is_file().then_some(libc)
}

/// The file the command's first word names, found as `execvp` would.
fn program_path(command: &[OsString]) -> Option<PathBuf> {
    let name = Path::new(command.first()?);
    if name.as_os_str().as_encoded_bytes().contains(&b'/') {
        return Some(name.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The plan for a command: its libc and its own program.
pub fn plan(command: &[OsString]) -> Plan {
    let mut objects: Vec<(PathBuf, &'static str)> = Vec::new();
    let program = program_path(command);
    if let Some(libc) = command_libc(program.as_deref()) {
        objects.push((libc, "libc"));
    }
    if let Some(program) = program
        && elf::summarize_file(&program).is_ok_and(|s| s.is_some())
    {
        objects.push((program, "program"));
    }
    plan_for(&objects)
}

/// The plan for these objects (path, role).
pub fn plan_for(objects: &[(PathBuf, &'static str)]) -> Plan {
    let mut plan = Plan::default();
    for (path, role) in objects {
        let index = plan.objects.len();
        let mut object = Object {
            path: path.clone(),
            image: None,
            role,
            found: 0,
            not_attached: Vec::new(),
        };
        let probes = match Image::open(path)
            .map_err(|e| format!("{}: {e}", path.display()))
            .and_then(|image| {
                let probes = elf::sdt_probes_of(&image.file, path)?;
                object.image = Some(image);
                Ok(probes)
            }) {
            Ok(p) => p,
            Err(e) => {
                object
                    .not_attached
                    .push(format!("its notes could not be read: {e}"));
                plan.objects.push(object);
                continue;
            }
        };
        for p in probes
            .iter()
            .filter(|p| p.provider == "libc" && p.name.starts_with("memory_"))
        {
            object.found += 1;
            let Some(file_offset) = p.file_offset else {
                object
                    .not_attached
                    .push(format!("{} at {:#x}: in no loadable segment", p.name, p.pc));
                continue;
            };
            if p.semaphore != 0 {
                object.not_attached.push(format!(
                    "{} at {:#x}: guarded by a semaphore, which ste does not set",
                    p.name, p.pc
                ));
                continue;
            }
            if plan.sites.len() >= SITES_MAX {
                object.not_attached.push(format!(
                    "{} at {:#x}: beyond the {SITES_MAX} sites ste attaches",
                    p.name, p.pc
                ));
                continue;
            }
            let kind = match plan.kinds.iter().position(|k| *k == p.name) {
                Some(k) => k,
                None if plan.kinds.len() < KINDS_MAX => {
                    plan.kinds.push(p.name.clone());
                    plan.kinds.len() - 1
                }
                None => {
                    object.not_attached.push(format!(
                        "{}: beyond the {KINDS_MAX} probe names ste counts",
                        p.name
                    ));
                    continue;
                }
            };
            let size = size_arg(&p.name).and_then(|n| {
                let spec = p.args.split_whitespace().nth(n as usize - 1);
                match spec.map(parse_arg) {
                    Some(Ok(a)) => Some(a),
                    Some(Err(why)) => {
                        plan.undecoded
                            .push(format!("{} argument {n}: {why}", p.name));
                        None
                    }
                    None => {
                        plan.undecoded
                            .push(format!("{} has no argument {n} (`{}`)", p.name, p.args));
                        None
                    }
                }
            });
            plan.sites.push(Site {
                object: index,
                file_offset,
                kind: kind as u32,
                size,
                attached: false,
            });
        }
        plan.objects.push(object);
    }
    plan
}

impl Plan {
    /// One line on what was searched and found.
    fn listing(&self) -> String {
        if self.objects.is_empty() {
            return "no libc found in ste's own maps, and the command's program is not an ELF file"
                .into();
        }
        self.objects
            .iter()
            .map(|o| {
                let what = if o.found == 0 && !o.not_attached.is_empty() {
                    o.not_attached.join("; ")
                } else if o.found > 0 {
                    format!("{} memory_* probe site{}", o.found, plural(o.found))
                } else if o.role == "libc" {
                    "no memory_* probes (this distribution builds glibc without systemtap probes)"
                        .into()
                } else {
                    "no memory_* probes".into()
                };
                format!("{} {}: {what}", o.role, o.path.display())
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// The text before the run: what will be attached, or why nothing will be. `bpf` is
    /// whether the BPF object loaded (the reason when not).
    pub fn text_before(&self, bpf: Result<(), String>) -> String {
        let listing = self.listing();
        if self.sites.is_empty() {
            return format!(
                "{listing}: nothing to attach, so arena creation/reuse and arena lock contention are not observed"
            );
        }
        match bpf {
            Ok(()) => format!(
                "{listing}; uprobes attached, counted by the ebpf tracker, which reports them when the tree is done (no report came: the ebpf tracker did not run)"
            ),
            Err(why) => format!(
                "{listing}; not attached: counting them needs uprobes through BPF, for the tree's tasks as the ebpf tracker marks them ({why})"
            ),
        }
    }

    /// The text after the run: what was attached where, and what not.
    pub fn text_after(&self) -> String {
        let attached = self.sites.iter().filter(|s| s.attached).count() as u32;
        let mut out = format!(
            "uprobes on {attached} libc:memory_* probe site{} counted the tree's hits in the kernel (exact): ",
            plural(attached)
        );
        let per_object: Vec<String> = self
            .objects
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let n = self
                    .sites
                    .iter()
                    .filter(|s| s.object == i && s.attached)
                    .count();
                format!(
                    "{} {}: {n} of {} site{}",
                    o.role,
                    o.path.display(),
                    o.found,
                    plural(o.found)
                )
            })
            .collect();
        out += &per_object.join("; ");
        let not: Vec<&String> = self.objects.iter().flat_map(|o| &o.not_attached).collect();
        if !not.is_empty() {
            out += &format!(
                "; not attached: {}",
                not.iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
        if !self.undecoded.is_empty() {
            out += &format!("; sizes not read: {}", self.undecoded.join("; "));
        }
        out += "; programs other than these, exec'd by the command, are counted through the libc only (their own probes are not attached)";
        out
    }

    /// The model's figures from the kernel's counts: per kind (hits, hits with a size, sum of
    /// sizes), sizes as (kind, bytes, hits), and sizes the kernel had no room for.
    pub fn counts(
        &self,
        totals: &[(u64, u64, u64)],
        sizes: &[(u32, u64, u64)],
        sizes_dropped: u64,
    ) -> SdtCounts {
        let objects = self
            .objects
            .iter()
            .enumerate()
            .map(|(i, o)| SdtObject {
                path: o.path.display().to_string(),
                found: o.found,
                attached: self
                    .sites
                    .iter()
                    .filter(|s| s.object == i && s.attached)
                    .count() as u32,
                not_attached: o.not_attached.clone(),
            })
            .collect();
        let mut probes: Vec<SdtProbeCount> = self
            .kinds
            .iter()
            .enumerate()
            .filter(|(k, _)| self.sites.iter().any(|s| s.kind == *k as u32 && s.attached))
            .map(|(k, name)| {
                let (hits, sized, bytes) = totals.get(k).copied().unwrap_or_default();
                let size_arg = size_arg(name);
                let mut sz: Vec<SdtSize> = sizes
                    .iter()
                    .filter(|(kind, _, _)| *kind == k as u32)
                    .map(|&(_, bytes, hits)| SdtSize { bytes, hits })
                    .collect();
                sz.sort_by_key(|s| s.bytes);
                SdtProbeCount {
                    name: name.clone(),
                    hits,
                    size_arg,
                    sized_hits: sized,
                    size_sum_bytes: size_arg.map(|_| bytes),
                    sizes: sz,
                }
            })
            .collect();
        probes.sort_by(|a, b| a.name.cmp(&b.name));
        SdtCounts {
            objects,
            probes,
            sizes_dropped,
        }
    }
}

fn plural(n: u32) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argument_forms() {
        // Specs as gcc 12 writes them in notes here (readelf -n of the test fixture, and
        // glibc's on distributions that build the probes).
        assert_eq!(parse_arg("8@%rax"), Ok(Arg::Reg { reg: 10, size: 8 }));
        assert_eq!(parse_arg("-4@%ebx"), Ok(Arg::Reg { reg: 5, size: -4 }));
        assert_eq!(parse_arg("8@%r12"), Ok(Arg::Reg { reg: 3, size: 8 }));
        assert_eq!(parse_arg("-4@%r9d"), Ok(Arg::Reg { reg: 8, size: -4 }));
        assert_eq!(parse_arg("8@%r15"), Ok(Arg::Reg { reg: 0, size: 8 }));
        assert_eq!(parse_arg("1@%sil"), Ok(Arg::Reg { reg: 13, size: 1 }));
        assert_eq!(
            parse_arg("-8@$4096"),
            Ok(Arg::Const {
                value: 4096,
                size: -8
            })
        );
        assert_eq!(
            parse_arg("8@-16(%rbp)"),
            Ok(Arg::Mem {
                reg: 4,
                disp: -16,
                size: 8
            })
        );
        assert_eq!(
            parse_arg("8@(%rdi)"),
            Ok(Arg::Mem {
                reg: 14,
                disp: 0,
                size: 8
            })
        );
        assert_eq!(
            parse_arg("%rsi"),
            Ok(Arg::Reg { reg: 13, size: 8 }),
            "old notes have no size"
        );
        for undecoded in [
            "8@mp_+40(%rip)",
            "8@8(%rax,%rbx,4)",
            "-4@%ah",
            "8@%fs:16",
            "3@%rax",
            "8@$sym",
            "8@%r16",
        ] {
            assert!(parse_arg(undecoded).is_err(), "{undecoded}");
        }
    }

    #[test]
    fn size_arguments_of_glibc_probes() {
        assert_eq!(size_arg("memory_arena_new"), Some(2));
        assert_eq!(size_arg("memory_sbrk_more"), Some(2));
        assert_eq!(size_arg("memory_malloc_retry"), Some(1));
        assert_eq!(size_arg("memory_arena_reuse_wait"), None);
    }

    #[test]
    fn the_commands_libc_plan() {
        let Some(libc) = command_libc(Some(Path::new("/bin/sh"))) else {
            panic!("no libc.so.6 beside the loader of /bin/sh");
        };
        // What a dynamic program (cat, reading its own maps) has mapped is that file.
        let maps = std::process::Command::new("cat")
            .arg("/proc/self/maps")
            .output()
            .unwrap();
        let canonical = std::fs::canonicalize(&libc).unwrap();
        assert!(
            String::from_utf8_lossy(&maps.stdout)
                .lines()
                .any(|l| l.ends_with(&*canonical.to_string_lossy())),
            "{}",
            libc.display()
        );
        // A static program (this test's own binary) falls back on the shell's loader.
        assert_eq!(
            command_libc(Some(&std::env::current_exe().unwrap())),
            Some(libc.clone())
        );
        let plan = plan_for(&[(libc.clone(), "libc")]);
        let text = plan.text_before(Err("not root".into()));
        if plan.objects[0].found == 0 {
            // Debian 12 (docs/kernel-notes.md): no probes.
            assert!(plan.sites.is_empty());
            assert!(text.contains("without systemtap probes"), "{text}");
            assert!(text.contains("nothing to attach"), "{text}");
        } else {
            assert!(!plan.sites.is_empty());
            assert!(
                text.contains("not attached: counting them needs uprobes"),
                "{text}"
            );
        }
    }

    #[test]
    fn counts_follow_the_attached_sites() {
        let mut plan = Plan {
            objects: vec![Object {
                path: "/x".into(),
                image: None,
                role: "program",
                found: 3,
                not_attached: vec!["memory_heap_new at 0x10: guarded by a semaphore".into()],
            }],
            kinds: vec!["memory_arena_reuse_wait".into(), "memory_arena_new".into()],
            sites: vec![
                Site {
                    object: 0,
                    file_offset: 0x1000,
                    kind: 0,
                    size: None,
                    attached: true,
                },
                Site {
                    object: 0,
                    file_offset: 0x1010,
                    kind: 1,
                    size: Some(Arg::Reg { reg: 10, size: 8 }),
                    attached: true,
                },
            ],
            undecoded: Vec::new(),
        };
        let c = plan.counts(&[(3, 0, 0), (2, 2, 300)], &[(1, 200, 1), (1, 100, 1)], 0);
        assert_eq!(c.objects[0].attached, 2);
        assert_eq!(c.probes[0].name, "memory_arena_new");
        assert_eq!(c.probes[0].hits, 2);
        assert_eq!(c.probes[0].size_sum_bytes, Some(300));
        assert_eq!(
            c.probes[0].sizes[0],
            SdtSize {
                bytes: 100,
                hits: 1
            }
        );
        assert_eq!(c.probes[1].hits, 3);
        assert_eq!(c.probes[1].size_sum_bytes, None);
        let text = plan.text_after();
        assert!(
            text.contains("uprobes on 2 libc:memory_* probe sites"),
            "{text}"
        );
        assert!(text.contains("program /x: 2 of 3 sites"), "{text}");
        assert!(text.contains("guarded by a semaphore"), "{text}");
        plan.sites[1].attached = false;
        let c = plan.counts(&[(3, 0, 0), (2, 2, 300)], &[], 0);
        assert_eq!(
            c.probes.len(),
            1,
            "a probe with no site attached is not shown"
        );
    }
}
