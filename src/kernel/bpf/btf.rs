//! BTF (include/uapi/linux/btf.h): a lean reader of a type blob (the kernel's
//! /sys/kernel/btf/vmlinux, or the `.BTF` section of ste's own BPF object), and a writer of the
//! few types ste's task-storage maps must be created with.
//!
//! The reader walks the type section once, recording where each type starts (one `Vec<u32>`,
//! no allocation per type), and only as far as it is asked: a lookup by name and kind (of
//! several types at once) stops at the last one found, comparing the kind before the name. The
//! types ste needs are among the kernel's first 12,000 of 127,000, so a lookup costs about a
//! tenth of a full walk (each type's length depends on its kind, so the walk is serial;
//! bench/README.md).
//! It answers only what ste needs: a type's id by name and kind (several at once), a member's
//! byte offset by path (descending through anonymous structs and unions, as C does), the size
//! of a type, and the members of a struct and the variables of a data section (map
//! definitions of the object). Kinds it does not know make the blob refused, never misread.
//!
//! The kernel's blob is mapped rather than read where the kernel allows it (Linux ≥ 6.16 maps
//! /sys/kernel/btf/vmlinux read-only and private): its pages are the kernel's own, so ste
//! neither copies 5.5 MB in 4 KiB reads nor holds a copy.
//!
//! Must not touch the bpf(2) system call (`sys`) or the BPF object's ELF (`object`).

use super::{Error, err};
use std::cell::{Cell, RefCell};
use std::ops::Deref;
use std::os::fd::AsRawFd;

const MAGIC: u16 = 0xeb9f;
const HEADER_LEN: usize = 24;

/// `BTF_KIND_*`.
pub const INT: u32 = 1;
pub const PTR: u32 = 2;
pub const ARRAY: u32 = 3;
pub const STRUCT: u32 = 4;
pub const UNION: u32 = 5;
pub const ENUM: u32 = 6;
pub const FWD: u32 = 7;
pub const TYPEDEF: u32 = 8;
pub const VOLATILE: u32 = 9;
pub const CONST: u32 = 10;
pub const RESTRICT: u32 = 11;
pub const FUNC: u32 = 12;
pub const FUNC_PROTO: u32 = 13;
pub const VAR: u32 = 14;
pub const DATASEC: u32 = 15;
pub const FLOAT: u32 = 16;
pub const DECL_TAG: u32 = 17;
pub const TYPE_TAG: u32 = 18;
pub const ENUM64: u32 = 19;

/// A BTF file's bytes: mapped, or read when the file cannot be mapped.
pub enum Blob {
    Mapped { ptr: *mut libc::c_void, len: usize },
    Read(Vec<u8>),
}

// SAFETY: the mapping is private, read-only and owned by the Blob: moving it to another thread
// moves that ownership.
unsafe impl Send for Blob {}

impl Deref for Blob {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            // SAFETY: `len` bytes mapped readable at `ptr`, alive until the Blob is dropped.
            Blob::Mapped { ptr, len } => unsafe {
                std::slice::from_raw_parts(*ptr as *const u8, *len)
            },
            Blob::Read(v) => v,
        }
    }
}

impl Drop for Blob {
    fn drop(&mut self) {
        if let Blob::Mapped { ptr, len } = *self {
            // SAFETY: unmaps exactly the mapping made in `read`; no borrow outlives the Blob.
            unsafe { libc::munmap(ptr, len) };
        }
    }
}

/// The BTF file at `path` (e.g. /sys/kernel/btf/vmlinux), mapped if the kernel allows it.
pub fn read(path: &std::path::Path) -> std::io::Result<Blob> {
    let file = std::fs::File::open(path)?;
    let len = file.metadata()?.len() as usize;
    if len > 0 {
        // SAFETY: a new private read-only mapping of an open file; the kernel checks the
        // length against the file.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_POPULATE,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr != libc::MAP_FAILED {
            return Ok(Blob::Mapped { ptr, len });
        }
    }
    let mut v = Vec::with_capacity(len);
    std::io::Read::read_to_end(&mut &file, &mut v)?;
    Ok(Blob::Read(v))
}

/// A parsed BTF blob, borrowing its bytes.
pub struct Btf<'a> {
    types: &'a [u8],
    strings: &'a [u8],
    /// Where each type walked so far starts in `types`; type id `i` is `starts[i - 1]` (id 0
    /// is `void`).
    starts: RefCell<Vec<u32>>,
    /// Where the walk stopped: the start of the next type.
    walked: Cell<usize>,
}

/// One type's header (`struct btf_type`).
#[derive(Debug, Clone, Copy)]
pub struct Type {
    pub name_off: u32,
    pub kind: u32,
    pub vlen: u32,
    pub kind_flag: bool,
    /// `size` or `type`, by kind.
    pub size_or_type: u32,
    /// Where the kind-specific data starts in the type section.
    data: usize,
}

/// A member of a struct or union.
#[derive(Debug, Clone, Copy)]
pub struct Member {
    pub name_off: u32,
    pub type_id: u32,
    pub bit_offset: u32,
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

/// Bytes of kind-specific data after the 12-byte header, or `None` for an unknown kind.
fn data_len(kind: u32, vlen: u32) -> Option<usize> {
    let vlen = vlen as usize;
    Some(match kind {
        INT | VAR | DECL_TAG => 4,
        PTR | FWD | TYPEDEF | VOLATILE | CONST | RESTRICT | FUNC | FLOAT | TYPE_TAG => 0,
        ARRAY => 12,
        STRUCT | UNION | DATASEC | ENUM64 => 12 * vlen,
        ENUM | FUNC_PROTO => 8 * vlen,
        _ => return None,
    })
}

impl<'a> Btf<'a> {
    /// Parses a little-endian blob (x86-64; a big-endian blob is refused by its magic).
    pub fn parse(blob: &'a [u8]) -> Result<Btf<'a>, Error> {
        let magic = blob.get(0..2).map(|m| u16::from_le_bytes([m[0], m[1]]));
        if magic != Some(MAGIC) {
            return err("not a BTF blob (bad magic)");
        }
        let word = |off| u32_at(blob, off).ok_or_else(|| Error("truncated BTF header".into()));
        let hdr_len = word(4)? as usize;
        if hdr_len < HEADER_LEN {
            return err(format!("BTF header of {hdr_len} bytes is too short"));
        }
        let (type_off, type_len) = (word(8)? as usize, word(12)? as usize);
        let (str_off, str_len) = (word(16)? as usize, word(20)? as usize);
        let section = |off: usize, len: usize, what: &str| {
            hdr_len
                .checked_add(off)
                .and_then(|s| Some((s, s.checked_add(len)?)))
                .and_then(|(s, e)| blob.get(s..e))
                .ok_or_else(|| Error(format!("the BTF {what} section is out of bounds")))
        };
        let types = section(type_off, type_len, "type")?;
        let strings = section(str_off, str_len, "string")?;
        Ok(Btf {
            types,
            strings,
            starts: RefCell::new(Vec::new()),
            walked: Cell::new(0),
        })
    }

    /// Walks to type `id`: its start, or `None` past the last type.
    fn start(&self, id: u32) -> Result<Option<usize>, Error> {
        let Some(i) = id.checked_sub(1).map(|i| i as usize) else {
            return Ok(None);
        };
        let mut starts = self.starts.borrow_mut();
        let mut at = self.walked.get();
        while starts.len() <= i {
            if at == self.types.len() {
                break;
            }
            let info = u32_at(self.types, at + 4)
                .ok_or_else(|| Error(format!("BTF type #{} is truncated", starts.len() + 1)))?;
            let (kind, vlen) = ((info >> 24) & 0x1f, info & 0xffff);
            let extra = data_len(kind, vlen).ok_or_else(|| {
                Error(format!(
                    "BTF type #{} has kind {kind}, which ste does not know",
                    starts.len() + 1
                ))
            })?;
            if at + 12 + extra > self.types.len() {
                return err(format!("BTF type #{} is truncated", starts.len() + 1));
            }
            starts.push(at as u32);
            at += 12 + extra;
            self.walked.set(at);
        }
        Ok(starts.get(i).map(|&s| s as usize))
    }

    /// The number of types (ids 1..=len), walking them all.
    pub fn count(&self) -> Result<usize, Error> {
        self.start(u32::MAX)?;
        Ok(self.starts.borrow().len())
    }

    /// The header of type `id` (not 0: `void` has none).
    pub fn get(&self, id: u32) -> Result<Type, Error> {
        let start = self
            .start(id)?
            .ok_or_else(|| Error(format!("no BTF type #{id}")))?;
        let w = |i: usize| u32_at(self.types, start + 4 * i).unwrap_or(0);
        let info = w(1);
        Ok(Type {
            name_off: w(0),
            kind: (info >> 24) & 0x1f,
            vlen: info & 0xffff,
            kind_flag: info >> 31 == 1,
            size_or_type: w(2),
            data: start + 12,
        })
    }

    /// The string at `off` of the string section (empty when out of bounds).
    pub fn name(&self, off: u32) -> &'a [u8] {
        let rest = self.strings.get(off as usize..).unwrap_or_default();
        let end = rest.iter().position(|&c| c == 0).unwrap_or(rest.len());
        &rest[..end]
    }

    /// The name of type `id`, for messages.
    pub fn type_name(&self, id: u32) -> String {
        self.get(id)
            .map(|t| String::from_utf8_lossy(self.name(t.name_off)).into_owned())
            .unwrap_or_default()
    }

    /// The ids of several types by kind and name, in one pass that stops when all are found
    /// (the first of each).
    pub fn find_many(&self, wanted: &[(u32, &str)]) -> Result<Vec<Option<u32>>, Error> {
        let mut found = vec![None; wanted.len()];
        let mut left = wanted.len();
        let mut id = 1;
        while left > 0 {
            let Some(start) = self.start(id)? else {
                break;
            };
            let kind = (u32_at(self.types, start + 4).unwrap_or(0) >> 24) & 0x1f;
            let mut name = None;
            for (slot, &(k, n)) in found.iter_mut().zip(wanted) {
                if slot.is_some() || k != kind {
                    continue;
                }
                let name = *name.get_or_insert_with(|| {
                    self.name(u32_at(self.types, start).unwrap_or(u32::MAX))
                });
                if name == n.as_bytes() {
                    *slot = Some(id);
                    left -= 1;
                }
            }
            id += 1;
        }
        Ok(found)
    }

    /// The id of one type by kind and name.
    pub fn find(&self, kind: u32, name: &str) -> Result<u32, Error> {
        self.find_many(&[(kind, name)])?[0]
            .ok_or_else(|| Error(format!("the BTF has no type `{name}` (kind {kind})")))
    }

    /// The members of a struct or union.
    pub fn members(&self, t: &Type) -> impl Iterator<Item = Member> + '_ {
        let is_su = t.kind == STRUCT || t.kind == UNION;
        let (data, n, bitfields) = (t.data, if is_su { t.vlen } else { 0 }, t.kind_flag);
        (0..n as usize).map(move |i| {
            let w = |j: usize| u32_at(self.types, data + 12 * i + 4 * j).unwrap_or(0);
            let off = w(2);
            Member {
                name_off: w(0),
                type_id: w(1),
                // With kind_flag, the top byte is the bitfield's size.
                bit_offset: if bitfields { off & 0xff_ffff } else { off },
            }
        })
    }

    /// The variables of a data section: (variable type id, offset, size).
    pub fn datasec_vars(&self, t: &Type) -> impl Iterator<Item = (u32, u32, u32)> + '_ {
        let (data, n) = (t.data, if t.kind == DATASEC { t.vlen } else { 0 });
        (0..n as usize).map(move |i| {
            let w = |j: usize| u32_at(self.types, data + 12 * i + 4 * j).unwrap_or(0);
            (w(0), w(1), w(2))
        })
    }

    /// An array's (element type, element count).
    pub fn array(&self, t: &Type) -> Option<(u32, u32)> {
        (t.kind == ARRAY).then(|| {
            let w = |j: usize| u32_at(self.types, t.data + 4 * j).unwrap_or(0);
            (w(0), w(2))
        })
    }

    /// Follows typedefs and qualifiers to the type they name.
    pub fn resolve(&self, mut id: u32) -> Result<u32, Error> {
        for _ in 0..32 {
            if id == 0 {
                return Ok(0);
            }
            let t = self.get(id)?;
            match t.kind {
                TYPEDEF | VOLATILE | CONST | RESTRICT | TYPE_TAG => id = t.size_or_type,
                _ => return Ok(id),
            }
        }
        err(format!("BTF type #{id}: a loop of typedefs"))
    }

    /// The size in bytes of type `id`.
    pub fn size_of(&self, id: u32) -> Result<u64, Error> {
        let id = self.resolve(id)?;
        let t = self.get(id)?;
        match t.kind {
            INT | STRUCT | UNION | ENUM | ENUM64 | FLOAT | DATASEC => Ok(t.size_or_type.into()),
            PTR => Ok(8),
            ARRAY => {
                let (elem, n) = self.array(&t).unwrap_or_default();
                Ok(self.size_of(elem)? * u64::from(n))
            }
            k => err(format!("BTF type #{id} (kind {k}) has no size")),
        }
    }

    /// The bit offset of member `name` of struct or union `id` (looked for in anonymous
    /// members too), and the member's type id.
    fn member(&self, id: u32, name: &[u8], depth: u32) -> Option<(u64, u32)> {
        let t = self.get(self.resolve(id).ok()?).ok()?;
        for m in self.members(&t) {
            let here = u64::from(m.bit_offset);
            if m.name_off == 0 || self.name(m.name_off).is_empty() {
                if depth < 8
                    && let Some((off, ty)) = self.member(m.type_id, name, depth + 1)
                {
                    return Some((here + off, ty));
                }
            } else if self.name(m.name_off) == name {
                return Some((here, m.type_id));
            }
        }
        None
    }

    /// The byte offset of `path` (members separated by dots, e.g. `live.counter`) in struct
    /// `id`, and the type there.
    pub fn offset_of(&self, id: u32, path: &str) -> Result<(u64, u32), Error> {
        let (mut off, mut ty) = (0u64, id);
        for part in path.split('.') {
            let (bits, next) = self.member(ty, part.as_bytes(), 0).ok_or_else(|| {
                Error(format!(
                    "the BTF's `{}` has no member `{part}` (looking for `{path}`)",
                    self.type_name(self.resolve(ty).unwrap_or(ty))
                ))
            })?;
            if bits % 8 != 0 {
                return err(format!("`{path}` is a bitfield"));
            }
            off += bits / 8;
            ty = next;
        }
        Ok((off, ty))
    }
}

/// Writes a small BTF blob: the types a map is created with (task storage needs an `int` key
/// and a value type of the value's size).
#[derive(Default)]
pub struct Writer {
    types: Vec<u8>,
    strings: Vec<u8>,
    count: u32,
}

impl Writer {
    pub fn new() -> Writer {
        Writer {
            types: Vec::new(),
            // Offset 0 is the empty name.
            strings: vec![0],
            count: 0,
        }
    }

    fn string(&mut self, s: &str) -> u32 {
        let off = self.strings.len() as u32;
        self.strings.extend_from_slice(s.as_bytes());
        self.strings.push(0);
        off
    }

    fn push(&mut self, words: &[u32]) -> u32 {
        for w in words {
            self.types.extend_from_slice(&w.to_le_bytes());
        }
        self.count += 1;
        self.count
    }

    /// An integer type of `bytes` bytes.
    pub fn int(&mut self, name: &str, bytes: u32, signed: bool) -> u32 {
        let name = self.string(name);
        let encoding = if signed { 1 << 24 } else { 0 };
        self.push(&[name, INT << 24, bytes, encoding | (bytes * 8)])
    }

    /// An array of `n` elements of type `elem`, indexed by type `index` (an integer).
    pub fn array(&mut self, elem: u32, index: u32, n: u32) -> u32 {
        self.push(&[0, ARRAY << 24, 0, elem, index, n])
    }

    /// A struct of `size` bytes with `members` (name, type, byte offset): tests build a
    /// kernel's types with it.
    #[cfg(test)]
    pub fn structure(&mut self, name: &str, size: u32, members: &[(&str, u32, u32)]) -> u32 {
        let name = self.string(name);
        let mut words = vec![name, (STRUCT << 24) | members.len() as u32, size];
        for &(m, ty, off) in members {
            let m = self.string(m);
            words.extend([m, ty, off * 8]);
        }
        self.push(&words)
    }

    /// A pointer to `ty`.
    #[cfg(test)]
    pub fn pointer(&mut self, ty: u32) -> u32 {
        self.push(&[0, PTR << 24, ty])
    }

    /// The blob.
    pub fn finish(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + self.types.len() + self.strings.len());
        out.extend_from_slice(&MAGIC.to_le_bytes());
        out.extend_from_slice(&[1, 0]); // version 1, no flags
        let tl = self.types.len() as u32;
        for w in [HEADER_LEN as u32, 0, tl, tl, self.strings.len() as u32] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out.extend_from_slice(&self.types);
        out.extend_from_slice(&self.strings);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A blob like the kernel's, built word by word: `struct inner { int pad; atomic_t live; }`
    /// reached through a typedef, an anonymous union, a pointer, an array and a bitfield.
    fn sample() -> Vec<u8> {
        let mut w = Writer::new();
        let int = w.int("int", 4, true); // 1
        let long = w.int("long", 8, true); // 2
        let s_counter = w.string("counter");
        let atomic = w.push(&[0, (STRUCT << 24) | 1, 4, s_counter, int, 0]); // 3
        let s_atomic = w.string("atomic_t");
        let atomic_t = w.push(&[s_atomic, TYPEDEF << 24, atomic]); // 4
        let (s_pad, s_live) = (w.string("pad"), w.string("live"));
        let s_inner = w.string("inner");
        let inner = w.push(&[
            s_inner,
            (STRUCT << 24) | 2,
            8,
            s_pad,
            int,
            0,
            s_live,
            atomic_t,
            32,
        ]); // 5
        let ptr = w.push(&[0, PTR << 24, inner]); // 6
        let arr = w.array(long, int, 4); // 7
        let (s_sig, s_stat) = (w.string("signal"), w.string("rss_stat"));
        // An anonymous union holding `signal` at 8, inside the struct at 16.
        let anon = w.push(&[0, (UNION << 24) | 1, 8, s_sig, ptr, 0]); // 8
        let s_bits = w.string("bits");
        let s_task = w.string("task");
        // kind_flag: member offsets carry a bitfield size in their top byte.
        let _task = w.push(&[
            s_task,
            (1 << 31) | (STRUCT << 24) | 4,
            88,
            s_bits,
            int,
            (3 << 24) | 3,
            0,
            anon,
            128,
            s_stat,
            arr,
            192,
            s_inner,
            inner,
            448,
        ]); // 9
        let s_tp = w.string("btf_trace_sched_process_fork");
        let _tp = w.push(&[s_tp, TYPEDEF << 24, ptr]); // 10
        w.finish()
    }

    #[test]
    fn finds_types_members_and_sizes() {
        let blob = sample();
        let btf = Btf::parse(&blob).unwrap();
        let ids = btf.find_many(&[
            (STRUCT, "task"),
            (TYPEDEF, "btf_trace_sched_process_fork"),
            (UNION, "task"),
            (STRUCT, "inner"),
        ]);
        assert_eq!(ids.unwrap(), vec![Some(9), Some(10), None, Some(5)]);
        assert_eq!(btf.count().unwrap(), 10);
        let task = 9;
        // Through the anonymous union.
        assert_eq!(btf.offset_of(task, "signal").unwrap().0, 16);
        assert_eq!(btf.offset_of(task, "rss_stat").unwrap().0, 24);
        // Through a typedef'd struct member.
        assert_eq!(btf.offset_of(task, "inner.live.counter").unwrap().0, 56 + 4);
        let (_, stat) = btf.offset_of(task, "rss_stat").unwrap();
        assert_eq!(btf.size_of(stat).unwrap(), 32);
        let (elem, n) = btf.array(&btf.get(stat).unwrap()).unwrap();
        assert_eq!((btf.size_of(elem).unwrap(), n), (8, 4));
        assert_eq!(btf.size_of(4).unwrap(), 4);
        assert_eq!(btf.size_of(6).unwrap(), 8);
        assert_eq!(btf.size_of(task).unwrap(), 88);
        // A bitfield has no byte offset; a missing member is named.
        let bits = btf.offset_of(task, "bits").unwrap_err().0;
        assert!(bits.contains("bitfield"), "{bits}");
        let missing = btf.offset_of(task, "inner.nope").unwrap_err().0;
        assert!(
            missing.contains("`inner` has no member `nope`"),
            "{missing}"
        );
        assert!(btf.find(STRUCT, "absent").is_err());
    }

    #[test]
    fn refuses_corrupt_blobs() {
        let blob = sample();
        assert!(Btf::parse(&blob[..10]).is_err());
        let mut bad = blob.clone();
        bad[0] = 0;
        assert_eq!(
            Btf::parse(&bad).err().unwrap().0,
            "not a BTF blob (bad magic)"
        );
        // An unknown kind (31) in the first type: found by the walk.
        let mut bad = blob.clone();
        bad[HEADER_LEN + 7] = 31;
        let btf = Btf::parse(&bad).unwrap();
        let e = btf.find(STRUCT, "task").unwrap_err().0;
        assert!(e.contains("kind 31"), "{e}");
        // The type section claims more than the blob has.
        let mut bad = blob.clone();
        bad[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(Btf::parse(&bad).is_err());
        // A type cut in the middle (the last).
        let mut bad = blob;
        let tl = u32_at(&bad, 12).unwrap();
        bad[12..16].copy_from_slice(&(tl - 4).to_le_bytes());
        let btf = Btf::parse(&bad).unwrap();
        assert!(btf.find(STRUCT, "task").is_ok());
        let e = btf.count().unwrap_err().0;
        assert!(e.contains("truncated"), "{e}");
    }

    /// The running kernel's BTF (CONFIG_DEBUG_INFO_BTF, as on this machine): the types the
    /// ebpf tracker needs are there, at offsets that agree with each other.
    #[test]
    fn reads_the_kernels_btf() {
        let path = std::path::Path::new("/sys/kernel/btf/vmlinux");
        let blob = read(path).expect("/sys/kernel/btf/vmlinux (CONFIG_DEBUG_INFO_BTF) is needed");
        // Mapped or read, the bytes are the file's.
        assert_eq!(&blob[..], &std::fs::read(path).unwrap()[..]);
        let btf = Btf::parse(&blob).unwrap();
        assert!(btf.count().unwrap() > 10_000, "{:?} types", btf.count());
        let task = btf.find(STRUCT, "task_struct").unwrap();
        let (pid, pid_ty) = btf.offset_of(task, "pid").unwrap();
        let (tgid, _) = btf.offset_of(task, "tgid").unwrap();
        assert_eq!(btf.size_of(pid_ty).unwrap(), 4);
        // pid_t pid; pid_t tgid; are adjacent in task_struct.
        assert_eq!(tgid, pid + 4);
        assert_eq!(btf.offset_of(task, "thread_info").unwrap().0, 0);
        let mm = btf.find(STRUCT, "mm_struct").unwrap();
        // Inside mm_struct's anonymous struct.
        let (start, _) = btf.offset_of(mm, "arg_start").unwrap();
        assert_eq!(btf.offset_of(mm, "arg_end").unwrap().0, start + 8);
        let signal = btf.find(STRUCT, "signal_struct").unwrap();
        assert!(btf.offset_of(signal, "live.counter").is_ok());
        assert!(btf.find(TYPEDEF, "btf_trace_sched_process_fork").is_ok());
    }

    #[test]
    fn writes_what_it_reads() {
        let mut w = Writer::new();
        let int = w.int("int", 4, true);
        let byte = w.int("unsigned char", 1, false);
        let arr = w.array(byte, int, 16);
        let blob = w.finish();
        let btf = Btf::parse(&blob).unwrap();
        assert_eq!(btf.find(INT, "int").unwrap(), int);
        assert_eq!(btf.size_of(arr).unwrap(), 16);
    }
}
