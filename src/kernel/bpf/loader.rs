//! Loading a parsed BPF object ([`Object`]) into the kernel: its maps created (task-storage
//! maps with the small BTF they need, written here), its `.rodata` set by the caller and
//! frozen read-only (so the verifier knows the configuration as constants and prunes what it
//! switches off), its programs relocated and loaded, and attached: tracepoint programs with
//! `BPF_RAW_TRACEPOINT_OPEN` (a `tp_btf` program's tracepoint is the `btf_trace_<name>`
//! typedef the kernel's BTF names, a `raw_tp` program's is named), uprobe programs on uprobe
//! perf events through `BPF_LINK_CREATE` with a cookie.
//! Everything is detached and freed when the [`Loaded`] is dropped (descriptors closed).
//! Must not know ste's programs and maps by name (`track::ebpf` does).

use super::btf::{self, Btf};
use super::maps::{Map, Pod};
use super::object::{MapSpec, Object, Target, Tracepoint};
use super::sys::{self, MapBtf, MapDef};
use super::{Error, err};
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The object, with its map sizes set, before anything is created.
pub struct Loader {
    obj: Object,
    max_entries: Vec<(&'static str, u32)>,
    /// Maps another thread creates ([`Loader::leave`]).
    left: Vec<String>,
}

/// What creating one map needs, for a thread other than the loader's ([`Loader::leave`]).
#[derive(Clone)]
pub struct MapPlan {
    name: String,
    def: MapDef,
}

impl MapPlan {
    pub fn create(&self) -> Result<Map, Error> {
        let fd = sys::map_create(&self.name, &self.def, None)
            .map_err(|e| Error(format!("creating map `{}`: {e}", self.name)))?;
        Ok(Map::new(self.name.clone(), self.def.clone(), fd))
    }
}

impl Loader {
    pub fn new(obj: Object) -> Loader {
        Loader {
            obj,
            max_entries: Vec::new(),
            left: Vec::new(),
        }
    }

    /// Creates map `name` with `n` entries instead of its definition's.
    pub fn max_entries(&mut self, name: &'static str, n: u32) -> &mut Self {
        self.max_entries.push((name, n));
        self
    }

    /// Leaves map `name` out of [`Loader::create_maps`], for another thread to create from
    /// the plan returned (a large map beside the rest); [`Loaded::put_map`] takes it back
    /// before any program is loaded. `None` for a map the object lacks, or a task-storage map
    /// (its BTF is written by `create_maps`). Call it after [`Loader::max_entries`].
    pub fn leave(&mut self, name: &str) -> Option<MapPlan> {
        let spec = self.obj.maps.iter().find(|m| m.name == name)?;
        if spec.def.map_type == sys::MAP_TASK_STORAGE {
            return None;
        }
        let def = self.sized(spec);
        self.left.push(name.to_string());
        Some(MapPlan {
            name: spec.name.clone(),
            def,
        })
    }

    /// A map's definition with the size [`Loader::max_entries`] set, if it set one.
    fn sized(&self, spec: &MapSpec) -> MapDef {
        let mut def = spec.def.clone();
        if let Some(&(_, n)) = self.max_entries.iter().find(|(m, _)| *m == spec.name) {
            def.max_entries = n;
        }
        def
    }

    /// Creates the maps that `programs` use (the others cost kernel memory and time for
    /// nothing: a per-CPU array's values, a hash's preallocated entries).
    pub fn create_maps(self, programs: &[&str]) -> Result<Loaded, Error> {
        let obj = &self.obj;
        let mut used = vec![false; obj.maps.len()];
        for name in programs {
            let p = obj
                .program(name)
                .ok_or_else(|| Error(format!("the BPF object has no program `{name}`")))?;
            for r in &p.relocs {
                if let Target::Map(i) = r.target {
                    used[i] = true;
                }
            }
        }
        // Task storage needs BTF for its key (an int) and value (any type of its size).
        let storage: Vec<usize> = (0..obj.maps.len())
            .filter(|&i| used[i] && obj.maps[i].def.map_type == sys::MAP_TASK_STORAGE)
            .collect();
        let mut value_ids = vec![0u32; obj.maps.len()];
        let mut btf_fd = None;
        let mut int = 0;
        if !storage.is_empty() {
            let mut w = btf::Writer::new();
            int = w.int("int", 4, true);
            let byte = w.int("unsigned char", 1, false);
            for &i in &storage {
                value_ids[i] = w.array(byte, int, obj.maps[i].def.value_size);
            }
            btf_fd = Some(
                sys::btf_load(&w.finish())
                    .map_err(|e| Error(format!("loading the task-storage maps' BTF: {e}")))?,
            );
        }
        let mut maps = Vec::with_capacity(obj.maps.len());
        for (i, spec) in obj.maps.iter().enumerate() {
            if !used[i] || self.left.contains(&spec.name) {
                maps.push(None);
                continue;
            }
            let def = self.sized(spec);
            let btf = btf_fd
                .as_ref()
                .filter(|_| value_ids[i] != 0)
                .map(|fd| MapBtf {
                    fd: fd.as_fd(),
                    key: int,
                    value: value_ids[i],
                });
            let fd = sys::map_create(&spec.name, &def, btf)
                .map_err(|e| Error(format!("creating map `{}`: {e}", spec.name)))?;
            maps.push(Some(Map::new(spec.name.clone(), def, fd)));
        }
        Ok(Loaded {
            rodata_bytes: self.obj.rodata.clone(),
            obj: self.obj,
            maps,
            rodata: None,
            progs: Vec::new(),
            links: Vec::new(),
        })
    }
}

/// The ids of the kernel's tracepoints (the `btf_trace_<name>` typedefs: a `tp_btf` program's
/// attach target), looked up in one pass.
pub fn tracepoint_ids<S: AsRef<str>>(kernel: &Btf, tracepoints: &[S]) -> Result<Vec<u32>, Error> {
    let names: Vec<String> = tracepoints
        .iter()
        .map(|t| format!("btf_trace_{}", t.as_ref()))
        .collect();
    let wanted: Vec<(u32, &str)> = names.iter().map(|n| (btf::TYPEDEF, n.as_str())).collect();
    let ids = kernel
        .find_many(&wanted)
        .map_err(|e| Error(format!("the kernel's BTF: {e}")))?;
    tracepoints
        .iter()
        .zip(ids)
        .map(|(tp, id)| {
            let tp = tp.as_ref();
            id.ok_or_else(|| {
                Error(format!(
                    "the kernel's BTF has no tracepoint `{tp}` (btf_trace_{tp})"
                ))
            })
        })
        .collect()
}

impl Loaded {
    /// Sets the `const volatile` global `name` (in `.rodata`) to `value`.
    pub fn set_global<T: Pod>(&mut self, name: &str, value: &T) -> Result<&mut Self, Error> {
        let obj = &self.obj;
        let g =
            obj.globals.iter().find(|g| g.name == name).ok_or_else(|| {
                Error(format!("the BPF object has no global `{name}` in .rodata"))
            })?;
        let size = std::mem::size_of::<T>();
        if g.size != size {
            return err(format!(
                "the BPF object's global `{name}` has {} bytes, not {size}",
                g.size
            ));
        }
        if self.rodata.is_some() {
            return err(format!("`{name}` set after a program was loaded"));
        }
        let rodata = self
            .rodata_bytes
            .as_mut()
            .ok_or_else(|| Error("no .rodata".into()))?;
        let dst = rodata
            .get_mut(g.offset..g.offset + size)
            .ok_or_else(|| Error(format!("the global `{name}` is outside .rodata")))?;
        // SAFETY: `T: Pod` has no padding: its size_of bytes are initialized.
        let src = unsafe { std::slice::from_raw_parts((value as *const T).cast::<u8>(), size) };
        dst.copy_from_slice(src);
        Ok(self)
    }
}

/// The `.rodata` map: one value holding the section, read-only for programs, frozen.
fn rodata_map(bytes: &[u8]) -> Result<OwnedFd, Error> {
    let def = MapDef {
        map_type: sys::MAP_ARRAY,
        key_size: 4,
        value_size: bytes.len() as u32,
        max_entries: 1,
        flags: sys::F_RDONLY_PROG,
    };
    let e = |what: &str, e: std::io::Error| Error(format!("{what} the .rodata map: {e}"));
    let fd = sys::map_create(".rodata", &def, None).map_err(|x| e("creating", x))?;
    sys::map_update(fd.as_fd(), &0u32.to_ne_bytes(), bytes, 0).map_err(|x| e("writing", x))?;
    sys::map_freeze(fd.as_fd()).map_err(|x| e("freezing", x))?;
    Ok(fd)
}

/// A program relocated and typed, ready for `BPF_PROG_LOAD`.
struct Pending {
    name: String,
    prog_type: u32,
    expected_attach_type: u32,
    attach_btf_id: u32,
    insns: Vec<u8>,
}

impl Pending {
    fn load(&self, license: &str) -> Result<OwnedFd, Error> {
        sys::prog_load(&sys::Prog {
            name: &self.name,
            prog_type: self.prog_type,
            expected_attach_type: self.expected_attach_type,
            attach_btf_id: self.attach_btf_id,
            insns: &self.insns,
            license,
        })
        .map_err(|e| Error(format!("loading {}: {e}", self.name)))
    }
}

/// A program's descriptor and its attachment's, or why it is not attached.
type Attached = Result<(OwnedFd, OwnedFd), Error>;

/// Tracepoint programs ready to load and attach ([`Loaded::tracepoints`]). Any number of
/// threads may take turns loading them ([`Tracepoints::take_turns`]): the kernel checks
/// programs side by side (root's loads take no common lock), and each is attached as soon as
/// it is loaded (attaching takes the kernel's tracepoint and jump-label locks, so attaches
/// queue, but behind another CPU's load, not after it). [`Loaded::attached`] keeps the result.
pub struct Tracepoints {
    /// Each program with its tracepoint's name, and whether it is attached by that name
    /// (`raw_tp`) rather than by the id it was loaded with (`tp_btf`).
    work: Vec<(Pending, CString, bool)>,
    license: String,
    next: AtomicUsize,
}

/// What one thread loaded and attached: each program's index in the work, and the outcome.
pub struct Turns(Vec<(usize, Attached)>);

impl Tracepoints {
    /// Loads and attaches programs until none is left.
    pub fn take_turns(&self) -> Turns {
        let mut out = Vec::new();
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            let Some((p, tp, by_name)) = self.work.get(i) else {
                return Turns(out);
            };
            let loaded = crate::bus::phases::span("bpf: prog load", || p.load(&self.license));
            out.push((
                i,
                loaded.and_then(|fd| {
                    let name = by_name.then_some(tp.as_c_str());
                    let link = crate::bus::phases::span("bpf: attach", || {
                        sys::raw_tracepoint_open(fd.as_fd(), name)
                    })
                    .map_err(|e| Error(format!("attaching {} to {tp:?}: {e}", p.name)))?;
                    Ok((fd, link))
                }),
            ));
        }
    }
}

/// A loaded program, by index in [`Loaded`].
#[derive(Debug, Clone, Copy)]
pub struct ProgId(usize);

/// The maps created; programs loaded and attached on demand.
pub struct Loaded {
    obj: Object,
    /// By index in the object's maps; `None` when no program to load uses it.
    maps: Vec<Option<Map>>,
    /// `.rodata` as set, until the first program is loaded; then the frozen map holding it.
    rodata_bytes: Option<Vec<u8>>,
    rodata: Option<OwnedFd>,
    progs: Vec<OwnedFd>,
    /// Attachments (raw tracepoints, links, their perf events): closing them detaches.
    links: Vec<OwnedFd>,
}

/// The program type, expected attach type and tracepoint of a program's section.
fn section_type(section: &str) -> Option<(u32, u32, Option<&str>)> {
    if let Some(tp) = section.strip_prefix("tp_btf/") {
        Some((sys::PROG_TRACING, sys::ATTACH_TRACE_RAW_TP, Some(tp)))
    } else if let Some(tp) = section.strip_prefix("raw_tp/") {
        Some((sys::PROG_RAW_TRACEPOINT, 0, Some(tp)))
    } else if section == "uprobe" || section.starts_with("uprobe/") {
        Some((sys::PROG_KPROBE, 0, None))
    } else {
        None
    }
}

impl Loaded {
    /// Detaches every program (closes the attachments); the maps and programs stay, so what
    /// the maps hold can still be read.
    pub fn detach(&mut self) {
        self.links.clear();
    }

    /// Takes back a map [`Loader::leave`] left out, created from its plan; before any
    /// program is loaded (the programs refer to it).
    pub fn put_map(&mut self, map: Map) -> Result<(), Error> {
        let i = self
            .obj
            .maps
            .iter()
            .position(|m| m.name == map.name)
            .ok_or_else(|| Error(format!("the BPF object has no map `{}`", map.name)))?;
        if self.maps[i].is_some() || !self.progs.is_empty() {
            return Err(Error(format!(
                "map `{}` was created already, or programs are loaded",
                map.name
            )));
        }
        self.maps[i] = Some(map);
        Ok(())
    }

    /// A handle on map `name`.
    pub fn map(&self, name: &str) -> Result<Map, Error> {
        let i = self
            .obj
            .maps
            .iter()
            .position(|m| m.name == name)
            .ok_or_else(|| Error(format!("the BPF object has no map `{name}`")))?;
        let map = self.maps[i].as_ref().ok_or_else(|| {
            Error(format!(
                "map `{name}` was not created: no program it was loaded for uses it"
            ))
        })?;
        map.try_clone()
            .map_err(|e| Error(format!("map `{name}`: {e}")))
    }

    /// The program's instructions with its map and `.rodata` references resolved.
    fn relocated(&self, name: &str) -> Result<Vec<u8>, Error> {
        let p = self
            .obj
            .program(name)
            .ok_or_else(|| Error(format!("the BPF object has no program `{name}`")))?;
        let mut insns = p.insns.clone();
        for r in &p.relocs {
            let at = r.insn * 8;
            let (src, fd, second_imm) = match r.target {
                Target::Map(i) => {
                    let map = self.maps[i].as_ref().ok_or_else(|| {
                        Error(format!(
                            "`{name}` uses map `{}`, created only for the programs named when loading",
                            self.obj.maps[i].name
                        ))
                    })?;
                    (sys::PSEUDO_MAP_FD, map.as_fd().as_raw_fd(), 0)
                }
                Target::Rodata(off) => {
                    let fd = self
                        .rodata
                        .as_ref()
                        .ok_or_else(|| Error("no .rodata map".into()))?;
                    (sys::PSEUDO_MAP_VALUE, fd.as_raw_fd(), off)
                }
            };
            let insn = insns
                .get_mut(at..at + 16)
                .ok_or_else(|| Error(format!("`{name}`: ld_imm64 cut at its end")))?;
            insn[1] = (insn[1] & 0x0f) | (src << 4);
            insn[4..8].copy_from_slice(&fd.to_le_bytes());
            insn[12..16].copy_from_slice(&second_imm.to_le_bytes());
        }
        Ok(insns)
    }

    /// Program `name` ready for the kernel (`attach_btf_id`: a `tp_btf` program's
    /// tracepoint). The first call freezes `.rodata`.
    fn pending(&mut self, name: &str, attach_btf_id: u32) -> Result<Pending, Error> {
        if self.rodata.is_none()
            && let Some(bytes) = &self.rodata_bytes
        {
            self.rodata = Some(crate::bus::phases::span("bpf: rodata", || {
                rodata_map(bytes)
            })?);
        }
        let insns = self.relocated(name)?;
        let section = self.obj.program(name).map(|p| p.section.as_str());
        let (prog_type, expected_attach_type, _) = section
            .and_then(section_type)
            .ok_or_else(|| Error(format!("program `{name}`: its section type is not handled")))?;
        Ok(Pending {
            name: name.to_string(),
            prog_type,
            expected_attach_type,
            attach_btf_id,
            insns,
        })
    }

    /// Loads program `name` (see [`Loaded::pending`]).
    fn load(&mut self, name: &str, attach_btf_id: u32) -> Result<ProgId, Error> {
        let fd = self.pending(name, attach_btf_id)?.load(&self.obj.license)?;
        self.progs.push(fd);
        Ok(ProgId(self.progs.len() - 1))
    }

    /// Tracepoint programs to load and attach, each with its tracepoint's id for a `tp_btf`
    /// one ([`tracepoint_ids`]; a `raw_tp` one is attached by name, its id is not read). A
    /// `tp_btf` load costs more than a `raw_tp` one: the kernel's linear search of its own BTF
    /// for the tracepoint's function (`bpf_check_attach_target`; bench/README.md).
    pub fn tracepoints(&mut self, programs: &[(&str, u32)]) -> Result<Tracepoints, Error> {
        let work = programs
            .iter()
            .map(|&(name, id)| {
                let tp = self.obj.tracepoint(name).ok_or_else(|| {
                    Error(format!("program `{name}` is not a tracepoint program"))
                })?;
                let by_name = matches!(tp, Tracepoint::Raw(_));
                let tp = CString::new(tp.name())
                    .map_err(|_| Error(format!("`{name}`: a NUL in its section's name")))?;
                Ok((self.pending(name, id)?, tp, by_name))
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(Tracepoints {
            work,
            license: self.obj.license.clone(),
            next: AtomicUsize::new(0),
        })
    }

    /// Keeps the programs the turns taken on `tracepoints` loaded and attached (detached when
    /// this is dropped); the first failure, by program, otherwise.
    pub fn attached(
        &mut self,
        tracepoints: &Tracepoints,
        turns: impl IntoIterator<Item = Turns>,
    ) -> Result<(), Error> {
        let mut done: Vec<Option<Attached>> = tracepoints.work.iter().map(|_| None).collect();
        for Turns(t) in turns {
            for (i, r) in t {
                done[i] = Some(r);
            }
        }
        for ((p, _, _), r) in tracepoints.work.iter().zip(done) {
            let (fd, link) =
                r.ok_or_else(|| Error(format!("loading {}: no thread took it", p.name)))??;
            self.progs.push(fd);
            self.links.push(link);
        }
        Ok(())
    }

    /// Loads a uprobe program.
    pub fn load_uprobe(&mut self, name: &str) -> Result<ProgId, Error> {
        self.load(name, 0)
    }

    /// Attaches a uprobe program at `offset` of the file at `path`, for every process, with
    /// the cookie it reads with `bpf_get_attach_cookie`.
    pub fn attach_uprobe(
        &mut self,
        prog: ProgId,
        path: &Path,
        offset: u64,
        cookie: u64,
    ) -> std::io::Result<()> {
        let event = sys::uprobe_event(path, offset)?;
        let link = sys::link_perf_event(self.progs[prog.0].as_fd(), event.as_fd(), cookie)?;
        self.links.push(link);
        self.links.push(event);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn section_names_give_program_types() {
        assert_eq!(
            section_type("tp_btf/sys_exit"),
            Some((
                sys::PROG_TRACING,
                sys::ATTACH_TRACE_RAW_TP,
                Some("sys_exit")
            ))
        );
        assert_eq!(
            section_type("raw_tp/sched_process_exit"),
            Some((sys::PROG_RAW_TRACEPOINT, 0, Some("sched_process_exit")))
        );
        assert_eq!(section_type("uprobe"), Some((sys::PROG_KPROBE, 0, None)));
        assert_eq!(section_type("kprobe/do_exit"), None);
    }

    #[test]
    fn a_map_left_out_is_planned_with_its_size_and_taken_back_once() {
        let obj = Object::parse(include_bytes!("../../../bpf/ste.bpf.o")).unwrap();
        let mut loader = Loader::new(obj.clone());
        loader.max_entries("events", 1 << 16);
        let plan = loader
            .leave("events")
            .expect("a ring buffer can be left out");
        assert_eq!(
            (plan.name.as_str(), plan.def.max_entries),
            ("events", 1 << 16)
        );
        assert!(loader.left.contains(&"events".to_string()));
        // Task storage needs the BTF create_maps writes; no such map, nothing to leave.
        assert!(loader.leave("tasks").is_none());
        assert!(loader.leave("nothing").is_none());
        let fake = || std::fs::File::open("/dev/null").unwrap().into();
        let mut loaded = Loaded {
            obj: obj.clone(),
            rodata_bytes: None,
            maps: obj.maps.iter().map(|_| None).collect(),
            rodata: None,
            progs: Vec::new(),
            links: Vec::new(),
        };
        let made = || Map::new(plan.name.clone(), plan.def.clone(), fake());
        loaded.put_map(made()).unwrap();
        assert!(loaded.map("events").is_ok());
        assert!(loaded.put_map(made()).is_err(), "a second one");
        assert!(
            loaded
                .put_map(Map::new("nothing".into(), plan.def.clone(), fake()))
                .is_err()
        );
    }

    #[test]
    fn relocations_point_at_maps_and_rodata() {
        let obj = Object::parse(include_bytes!("../../../bpf/ste.bpf.o")).unwrap();
        // Descriptors stand in for created maps: any open descriptor works for patching.
        let fake = || std::fs::File::open("/dev/null").unwrap().into();
        let loaded = Loaded {
            obj: obj.clone(),
            rodata_bytes: None,
            maps: obj
                .maps
                .iter()
                .map(|m| Some(Map::new(m.name.clone(), m.def.clone(), fake())))
                .collect(),
            rodata: Some(fake()),
            progs: Vec::new(),
            links: Vec::new(),
        };
        let p = obj.program("sys_exit").unwrap();
        let insns = loaded.relocated("sys_exit").unwrap();
        for r in &p.relocs {
            let insn = &insns[r.insn * 8..r.insn * 8 + 16];
            let imm = i32::from_le_bytes(insn[4..8].try_into().unwrap());
            let imm2 = u32::from_le_bytes(insn[12..16].try_into().unwrap());
            match r.target {
                Target::Map(i) => {
                    assert_eq!(insn[1] >> 4, sys::PSEUDO_MAP_FD);
                    assert_eq!(imm, loaded.maps[i].as_ref().unwrap().as_fd().as_raw_fd());
                }
                Target::Rodata(off) => {
                    assert_eq!(insn[1] >> 4, sys::PSEUDO_MAP_VALUE);
                    assert_eq!(imm, loaded.rodata.as_ref().unwrap().as_raw_fd());
                    assert_eq!(imm2, off);
                }
            }
        }
        assert!(
            p.relocs
                .iter()
                .any(|r| matches!(r.target, Target::Rodata(_)))
        );
    }
}
