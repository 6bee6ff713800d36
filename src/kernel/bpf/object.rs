//! The reader of ste's own BPF object (an ELF relocatable built by clang, `bpf/build.sh`):
//! its programs (each function of a `SEC()` section, the section's name saying the program's
//! type and where it attaches), its maps (BTF-defined: the `.maps` data section's variables in
//! the object's `.BTF`), its `.rodata` (the `const volatile` configuration), and the
//! relocations that tie them together: an `ld_imm64` of a map becomes that map's descriptor
//! (`BPF_PSEUDO_MAP_FD`), an `ld_imm64` of a `.rodata` variable the address of its value in
//! the frozen `.rodata` map (`BPF_PSEUDO_MAP_VALUE`).
//!
//! Anything else is refused with a message naming it, never loaded half-understood: BPF-to-BPF
//! and kfunc calls, relocations against other sections (`.data`, `.bss`, strings), CO-RE
//! relocations (`.BTF.ext`; ste's object reads kernel structures at offsets the loader
//! computes from the kernel's BTF instead). Pure: parses bytes, touches no kernel interface.

use super::btf::{self, Btf};
use super::sys::MapDef;
use object::{
    Object as _, ObjectSection, ObjectSymbol, RelocationTarget, SectionIndex, SectionKind,
};
use std::fmt;

/// Why the object could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(pub String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the BPF object: {}", self.0)
    }
}

impl std::error::Error for Error {}

fn err<T>(msg: impl Into<String>) -> Result<T, Error> {
    Err(Error(msg.into()))
}

impl From<super::Error> for Error {
    fn from(e: super::Error) -> Error {
        Error(format!("its BTF: {e}"))
    }
}

/// What an `ld_imm64` instruction loads once relocated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The map at this index of [`Object::maps`].
    Map(usize),
    /// The address of this offset of the `.rodata` map's value.
    Rodata(u32),
}

/// An `ld_imm64` to patch: `insn` indexes the program's instructions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reloc {
    pub insn: usize,
    pub target: Target,
}

#[derive(Debug, Clone)]
pub struct Program {
    /// The function's name.
    pub name: String,
    /// The ELF section (`tp_btf/sched_process_fork`, `uprobe`, …).
    pub section: String,
    /// 8-byte instructions, as in the object.
    pub insns: Vec<u8>,
    pub relocs: Vec<Reloc>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapSpec {
    pub name: String,
    pub def: MapDef,
}

/// A `.rodata` variable: where its value is in the section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Global {
    pub name: String,
    pub offset: usize,
    pub size: usize,
}

#[derive(Debug, Clone, Default)]
pub struct Object {
    pub license: String,
    pub programs: Vec<Program>,
    pub maps: Vec<MapSpec>,
    /// The `.rodata` section's bytes, when the object has one.
    pub rodata: Option<Vec<u8>>,
    pub globals: Vec<Global>,
}

/// `struct bpf_insn` fields.
const LD_IMM64: u8 = 0x18;
const CALL: u8 = 0x85;

/// The `.maps` variables' members: `__uint(name, n)` is `int (*name)[n]`, `__type(name, T)`
/// is `T *name`.
fn map_def(btf: &Btf, var_type: u32, name: &str) -> Result<MapDef, Error> {
    let t = btf.get(btf.resolve(var_type)?)?;
    if t.kind != btf::STRUCT {
        return err(format!("map `{name}` is not defined by a struct"));
    }
    let mut def = MapDef {
        map_type: 0,
        key_size: 0,
        value_size: 0,
        max_entries: 0,
        flags: 0,
    };
    for m in btf.members(&t) {
        let field = String::from_utf8_lossy(btf.name(m.name_off)).into_owned();
        let ptr = btf.get(btf.resolve(m.type_id)?)?;
        if ptr.kind != btf::PTR {
            return err(format!("map `{name}`: `{field}` is not a pointer"));
        }
        let uint = || -> Result<u32, Error> {
            let arr = btf.get(btf.resolve(ptr.size_or_type)?)?;
            btf.array(&arr)
                .map(|(_, n)| n)
                .ok_or_else(|| Error(format!("map `{name}`: `{field}` is not __uint(…)")))
        };
        let size = || -> Result<u32, Error> {
            let s = btf.size_of(ptr.size_or_type)?;
            u32::try_from(s).map_err(|_| Error(format!("map `{name}`: `{field}` is too large")))
        };
        match field.as_str() {
            "type" => def.map_type = uint()?,
            "max_entries" => def.max_entries = uint()?,
            "map_flags" => def.flags = uint()?,
            "key_size" => def.key_size = uint()?,
            "value_size" => def.value_size = uint()?,
            "key" => def.key_size = size()?,
            "value" => def.value_size = size()?,
            other => return err(format!("map `{name}`: `{other}` is not handled")),
        }
    }
    Ok(def)
}

/// CO-RE relocations in `.BTF.ext` (`struct btf_ext_header`: core_relo_len at 28 when the
/// header is at least 32 bytes).
fn core_relocations(ext: &[u8]) -> usize {
    let w = |o: usize| {
        ext.get(o..o + 4)
            .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    if w(4) >= 32 { w(28) } else { 0 }
}

/// The program `name`, at byte `at` of `section` (`insns`, its bytes), with its relocations:
/// an `ld_imm64` of a map or of a `.rodata` variable (of the sections given), and nothing
/// else.
fn program(
    file: &object::File,
    section: &object::Section,
    (maps_section, rodata_section): (Option<SectionIndex>, Option<SectionIndex>),
    obj: &Object,
    name: &str,
    at: usize,
    insns: Vec<u8>,
) -> Result<Program, Error> {
    let sname = section.name().unwrap_or_default().to_string();
    for (i, insn) in insns.chunks(8).enumerate() {
        if insn[0] == CALL && insn[1] >> 4 != 0 {
            return err(format!(
                "`{name}` makes a BPF-to-BPF or kfunc call (instruction {i}), which ste's loader does not link"
            ));
        }
    }
    let mut relocs = Vec::new();
    for (offset, rel) in section.relocations() {
        let Some(rel_at) = (offset as usize)
            .checked_sub(at)
            .filter(|o| *o < insns.len())
        else {
            continue;
        };
        let i = rel_at / 8;
        let RelocationTarget::Symbol(sym_idx) = rel.target() else {
            return err(format!("`{name}`: a relocation without a symbol"));
        };
        let sym = file
            .symbol_by_index(sym_idx)
            .map_err(|e| Error(e.to_string()))?;
        let sym_name = sym.name().unwrap_or_default();
        if insns.get(i * 8) != Some(&LD_IMM64) {
            return err(format!(
                "`{name}`: relocation against `{sym_name}` at instruction {i}, which is not ld_imm64"
            ));
        }
        let target = match sym.section_index() {
            Some(s) if Some(s) == maps_section => {
                let m = obj.maps.iter().position(|m| m.name == sym_name);
                Target::Map(m.ok_or_else(|| {
                    Error(format!(
                        "`{name}` uses map `{sym_name}`, not defined in .BTF"
                    ))
                })?)
            }
            Some(s) if Some(s) == rodata_section => {
                let imm = i32::from_le_bytes(
                    insns[i * 8 + 4..i * 8 + 8]
                        .try_into()
                        .map_err(|_| Error("truncated instruction".into()))?,
                );
                Target::Rodata((sym.address() as i64 + i64::from(imm)) as u32)
            }
            s => {
                let sec = s
                    .and_then(|s| file.section_by_index(s).ok())
                    .map(|s| s.name().unwrap_or_default().to_string())
                    .unwrap_or_default();
                return err(format!(
                    "`{name}` refers to `{sym_name}` in section `{sec}`, which ste's loader does not handle (only .maps and .rodata)"
                ));
            }
        };
        relocs.push(Reloc { insn: i, target });
    }
    Ok(Program {
        name: name.to_string(),
        section: sname,
        insns,
        relocs,
    })
}

impl Object {
    /// The object with every program.
    pub fn parse(data: &[u8]) -> Result<Object, Error> {
        Object::parse_only(data, |_| true)
    }

    /// The object with the programs `wanted` names only: the others are neither copied nor
    /// relocated (half of the object's programs are the variants of other kernels, and their
    /// parse was half of ste's reading of the object, on the way to loading it).
    pub fn parse_only(data: &[u8], wanted: impl Fn(&str) -> bool) -> Result<Object, Error> {
        let file = object::File::parse(data).map_err(|e| Error(format!("not an ELF file: {e}")))?;
        let section_data = |name: &str| {
            file.section_by_name(name)
                .map(|s| s.data().map_err(|e| Error(format!("{name}: {e}"))))
                .transpose()
        };
        if let Some(ext) = section_data(".BTF.ext")?
            && core_relocations(ext) > 0
        {
            return err(
                "it has CO-RE relocations (preserve_access_index), which ste's loader does not do: read kernel structures at offsets set from the kernel's BTF",
            );
        }
        let license = section_data("license")?
            .map(|l| {
                String::from_utf8_lossy(l)
                    .trim_end_matches('\0')
                    .to_string()
            })
            .ok_or_else(|| Error("no `license` section".into()))?;
        let maps_section = file.section_by_name(".maps").map(|s| s.index());
        let rodata_section = file.section_by_name(".rodata").map(|s| s.index());

        let mut obj = Object {
            license,
            ..Object::default()
        };
        if maps_section.is_some() {
            let blob = section_data(".BTF")?
                .ok_or_else(|| Error("maps are defined in `.maps`, but there is no .BTF".into()))?;
            let btf = Btf::parse(blob)?;
            let sec = btf.get(btf.find(btf::DATASEC, ".maps")?)?;
            for (var, _, _) in btf.datasec_vars(&sec) {
                let v = btf.get(var)?;
                let name = String::from_utf8_lossy(btf.name(v.name_off)).into_owned();
                let def = map_def(&btf, v.size_or_type, &name)?;
                obj.maps.push(MapSpec { name, def });
            }
        }
        // The symbols, read once: `.rodata`'s variables, and each section's functions.
        let mut funcs: Vec<(SectionIndex, String, usize, usize)> = Vec::new();
        for sym in file.symbols() {
            let Some(idx) = sym.section_index() else {
                continue;
            };
            let name = || sym.name().unwrap_or_default().to_string();
            match sym.kind() {
                object::SymbolKind::Data if Some(idx) == rodata_section => {
                    obj.globals.push(Global {
                        name: name(),
                        offset: sym.address() as usize,
                        size: sym.size() as usize,
                    })
                }
                object::SymbolKind::Text => {
                    funcs.push((idx, name(), sym.address() as usize, sym.size() as usize))
                }
                _ => {}
            }
        }
        if let Some(idx) = rodata_section {
            let s = file
                .section_by_index(idx)
                .map_err(|e| Error(e.to_string()))?;
            obj.rodata = Some(s.data().map_err(|e| Error(e.to_string()))?.to_vec());
        }

        for section in file.sections() {
            if section.kind() != SectionKind::Text {
                continue;
            }
            let sname = section.name().unwrap_or_default().to_string();
            let insns = section.data().map_err(|e| Error(e.to_string()))?.to_vec();
            if insns.is_empty() {
                continue;
            }
            if sname == ".text" {
                return err(
                    "it has functions in .text (BPF-to-BPF calls), which ste's loader does not link: make them static __always_inline",
                );
            }
            let mine: Vec<&(SectionIndex, String, usize, usize)> = funcs
                .iter()
                .filter(|(idx, ..)| *idx == section.index())
                .collect();
            if mine.is_empty() {
                return err(format!("section `{sname}` has code but no function"));
            }
            // Each function of the section is a program: the variants of a tracepoint's
            // program (for kernels that lack a map type or a tracepoint's argument) share its
            // section's name, as libbpf lets them.
            for (_, name, at, size) in mine.into_iter().filter(|(_, n, ..)| wanted(n)) {
                let (name, at, size) = (name.as_str(), *at, *size);
                let body = insns
                    .get(at..at + size)
                    .filter(|b| !b.is_empty() && b.len().is_multiple_of(8))
                    .ok_or_else(|| Error(format!("`{name}` lies outside its section `{sname}`")))?;
                let sections = (maps_section, rodata_section);
                obj.programs.push(program(
                    &file,
                    &section,
                    sections,
                    &obj,
                    name,
                    at,
                    body.to_vec(),
                )?);
            }
        }
        Ok(obj)
    }

    pub fn program(&self, name: &str) -> Option<&Program> {
        self.programs.iter().find(|p| p.name == name)
    }

    /// The tracepoint a tracepoint program attaches to, by its section: `tp_btf/<name>` or
    /// `raw_tp/<name>`.
    pub fn tracepoint(&self, name: &str) -> Option<Tracepoint<'_>> {
        let section = &self.program(name)?.section;
        if let Some(tp) = section.strip_prefix("tp_btf/") {
            Some(Tracepoint::Btf(tp))
        } else {
            section.strip_prefix("raw_tp/").map(Tracepoint::Raw)
        }
    }
}

/// A tracepoint program's kind and tracepoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tracepoint<'a> {
    /// A BTF-typed raw tracepoint: loaded with the id of the tracepoint's `btf_trace_<name>`
    /// typedef in the kernel's BTF; its arguments are typed.
    Btf(&'a str),
    /// A raw tracepoint: attached by name; its arguments are plain words.
    Raw(&'a str),
}

impl Tracepoint<'_> {
    pub fn name(&self) -> &str {
        match self {
            Tracepoint::Btf(n) | Tracepoint::Raw(n) => n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static OBJECT: &[u8] = include_bytes!("../../../bpf/ste.bpf.o");

    #[test]
    fn reads_stes_object() {
        let obj = Object::parse(OBJECT).unwrap();
        assert_eq!(obj.license, "Dual MIT/GPL");
        let fork = obj.program("handle_fork").unwrap();
        assert_eq!(fork.section, "tp_btf/sched_process_fork");
        assert_eq!(
            obj.tracepoint("handle_fork"),
            Some(Tracepoint::Btf("sched_process_fork"))
        );
        assert_eq!(
            obj.tracepoint("handle_exit"),
            Some(Tracepoint::Raw("sched_process_exit"))
        );
        assert_eq!(obj.tracepoint("sdt_memory"), None);
        assert_eq!(obj.program("sdt_memory").unwrap().section, "uprobe");
        let map = |n: &str| obj.maps.iter().find(|m| m.name == n).unwrap().def.clone();
        assert_eq!(
            map("counters"),
            MapDef {
                map_type: super::super::sys::MAP_ARRAY,
                key_size: 4,
                value_size: 8,
                max_entries: 7,
                flags: super::super::sys::MAP_F_MMAPABLE
            }
        );
        let tasks = map("tasks");
        assert_eq!(
            (tasks.map_type, tasks.key_size, tasks.value_size),
            (29, 4, 16)
        );
        assert_eq!(tasks.flags, 1, "BPF_F_NO_PREALLOC");
        assert_eq!(map("events").max_entries, 1 << 24);
        // `calls`: u64[1024] × 4.
        assert_eq!(map("calls").value_size, 32 * 1024);
        // Every map reference is an ld_imm64 of a known map; every global one of .rodata.
        let tasks_idx = obj.maps.iter().position(|m| m.name == "tasks").unwrap();
        assert!(
            fork.relocs
                .iter()
                .any(|r| r.target == Target::Map(tasks_idx))
        );
        for p in &obj.programs {
            for r in &p.relocs {
                assert_eq!(p.insns[r.insn * 8], LD_IMM64, "{}", p.name);
            }
        }
        let rodata = obj.rodata.as_ref().unwrap();
        let timed = obj.globals.iter().find(|g| g.name == "cfg_timed").unwrap();
        assert!(timed.offset + timed.size <= rodata.len());
        let exit = obj.program("sys_exit").unwrap();
        assert!(
            exit.relocs
                .iter()
                .any(|r| r.target == Target::Rodata(timed.offset as u32))
        );
    }

    /// The object with one byte of a program section changed to a BPF-to-BPF call.
    #[test]
    fn refuses_what_it_does_not_link() {
        let obj = Object::parse(OBJECT).unwrap();
        let fork = obj.program("handle_fork").unwrap();
        let at = OBJECT
            .windows(fork.insns.len())
            .position(|w| w == fork.insns.as_slice())
            .unwrap();
        let mut bad = OBJECT.to_vec();
        // The last instruction is `exit`: make it `call` with src_reg BPF_PSEUDO_CALL.
        let last = at + fork.insns.len() - 8;
        bad[last] = CALL;
        bad[last + 1] = 0x10;
        let e = Object::parse(&bad).unwrap_err().to_string();
        assert!(e.contains("BPF-to-BPF"), "{e}");
        assert!(Object::parse(b"not elf").is_err());
    }

    #[test]
    fn counts_core_relocations() {
        let mut ext = vec![0u8; 32];
        ext[4..8].copy_from_slice(&32u32.to_le_bytes());
        assert_eq!(core_relocations(&ext), 0);
        ext[28..32].copy_from_slice(&100u32.to_le_bytes());
        assert_eq!(core_relocations(&ext), 100);
        // A header from before CO-RE (24 bytes) has none.
        ext[4..8].copy_from_slice(&24u32.to_le_bytes());
        assert_eq!(core_relocations(&ext), 0);
    }
}
#[cfg(test)]
mod timing_tmp {
    fn min(f: impl Fn()) -> std::time::Duration {
        (0..5000)
            .map(|_| {
                let t = std::time::Instant::now();
                f();
                t.elapsed()
            })
            .min()
            .unwrap()
    }
    #[test]
    fn parse_time() {
        let old = std::fs::read("/tmp/i43/old.bpf.o").unwrap();
        let new = include_bytes!("../../../bpf/ste.bpf.o");
        let want = [
            "handle_fork",
            "handle_exec",
            "handle_exit",
            "handle_last_switch",
        ];
        for _ in 0..3 {
            let a = min(|| {
                std::hint::black_box(
                    super::Object::parse_only(&old, |p| want.contains(&p)).unwrap(),
                );
            });
            let b = min(|| {
                std::hint::black_box(
                    super::Object::parse_only(new, |p| want.contains(&p)).unwrap(),
                );
            });
            let c = min(|| {
                std::hint::black_box(super::Object::parse(&old).unwrap());
            });
            eprintln!("old only {a:?}, new only {b:?}, old all {c:?}");
        }
    }
}
