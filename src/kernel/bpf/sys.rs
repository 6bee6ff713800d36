//! The bpf(2) commands ste uses (include/uapi/linux/bpf.h, `union bpf_attr`), and the uprobe
//! perf event a BPF program is linked to: map create, lookup, update, delete, get-next-key and
//! freeze; BTF load; program load (the verifier's log asked for again on failure); raw
//! tracepoint open (a `tp_btf` program's attachment); link create (a program on a perf event,
//! with a cookie).
//!
//! Each command's part of `union bpf_attr` is a `repr(C)` struct holding only the fields ste
//! sets: the kernel accepts a shorter attribute than it knows and zero-fills the rest.
//! Owns the raw descriptors' creation; must not know about ste's programs or maps.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// `enum bpf_cmd`.
const MAP_CREATE: i32 = 0;
const MAP_LOOKUP_ELEM: i32 = 1;
const MAP_UPDATE_ELEM: i32 = 2;
const MAP_DELETE_ELEM: i32 = 3;
const MAP_GET_NEXT_KEY: i32 = 4;
const PROG_LOAD: i32 = 5;
const RAW_TRACEPOINT_OPEN: i32 = 17;
const BTF_LOAD: i32 = 18;
const MAP_FREEZE: i32 = 22;
const LINK_CREATE: i32 = 28;

/// `enum bpf_map_type`.
pub const MAP_HASH: u32 = 1;
pub const MAP_ARRAY: u32 = 2;
pub const MAP_PERCPU_ARRAY: u32 = 6;
pub const MAP_RINGBUF: u32 = 27;
pub const MAP_TASK_STORAGE: u32 = 29;
/// `BPF_F_MMAPABLE`: an array whose values user space may map.
pub const MAP_F_MMAPABLE: u32 = 1 << 10;

/// `enum bpf_prog_type`.
pub const PROG_KPROBE: u32 = 2;
pub const PROG_RAW_TRACEPOINT: u32 = 17;
pub const PROG_TRACING: u32 = 26;

/// `enum bpf_attach_type`.
pub const ATTACH_TRACE_RAW_TP: u32 = 23;
pub const ATTACH_PERF_EVENT: u32 = 41;

/// Map flags.
pub const F_RDONLY_PROG: u32 = 1 << 7;

/// Instruction fields (`struct bpf_insn`, include/uapi/linux/bpf.h).
pub const PSEUDO_MAP_FD: u8 = 1;
pub const PSEUDO_MAP_VALUE: u8 = 2;
pub const PSEUDO_CALL: u8 = 1;

/// The verifier's log for a program that failed to load (1 MiB: ste's programs' logs at
/// level 1 fit, and the end of the log, which says why, is what matters).
const LOG_SIZE: usize = 1 << 20;

fn bpf<T>(cmd: i32, attr: &T) -> io::Result<i64> {
    // SAFETY: every attribute struct passed here is a repr(C) prefix of `union bpf_attr`
    // whose pointers (keys, values, names, buffers) the callers keep alive for the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *const T,
            std::mem::size_of::<T>() as u32,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn bpf_fd<T>(cmd: i32, attr: &T) -> io::Result<OwnedFd> {
    let fd = bpf(cmd, attr)?;
    // SAFETY: the command returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// A map's definition, as created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapDef {
    pub map_type: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub flags: u32,
}

/// The kernel's name field: up to 15 bytes.
fn name16(name: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (o, c) in out.iter_mut().zip(name.bytes().take(15)) {
        *o = c;
    }
    out
}

#[repr(C)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
    map_ifindex: u32,
    btf_fd: u32,
    btf_key_type_id: u32,
    btf_value_type_id: u32,
}

/// The BTF types a map is created with: the loaded blob and its key and value type ids.
pub struct MapBtf<'a> {
    pub fd: BorrowedFd<'a>,
    pub key: u32,
    pub value: u32,
}

/// `BPF_MAP_CREATE`.
pub fn map_create(name: &str, def: &MapDef, btf: Option<MapBtf>) -> io::Result<OwnedFd> {
    let (btf_fd, btf_key_type_id, btf_value_type_id) = btf
        .map(|b| (b.fd.as_raw_fd() as u32, b.key, b.value))
        .unwrap_or_default();
    let attr = MapCreateAttr {
        map_type: def.map_type,
        key_size: def.key_size,
        value_size: def.value_size,
        max_entries: def.max_entries,
        map_flags: def.flags,
        inner_map_fd: 0,
        numa_node: 0,
        map_name: name16(name),
        map_ifindex: 0,
        btf_fd,
        btf_key_type_id,
        btf_value_type_id,
    };
    bpf_fd(MAP_CREATE, &attr)
}

#[repr(C)]
struct ElemAttr {
    map_fd: u32,
    pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

fn elem(cmd: i32, map: BorrowedFd, key: *const u8, value: u64, flags: u64) -> io::Result<()> {
    let attr = ElemAttr {
        map_fd: map.as_raw_fd() as u32,
        pad: 0,
        key: key as u64,
        value,
        flags,
    };
    bpf(cmd, &attr).map(drop)
}

/// `BPF_MAP_LOOKUP_ELEM` into `value` (the map's value size, or values × CPUs for a per-CPU
/// map); `Ok(false)` when there is no such key.
pub fn map_lookup(map: BorrowedFd, key: &[u8], value: &mut [u8]) -> io::Result<bool> {
    match elem(
        MAP_LOOKUP_ELEM,
        map,
        key.as_ptr(),
        value.as_mut_ptr() as u64,
        0,
    ) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// `BPF_MAP_UPDATE_ELEM` (`flags`: `BPF_ANY` = 0).
pub fn map_update(map: BorrowedFd, key: &[u8], value: &[u8], flags: u64) -> io::Result<()> {
    elem(
        MAP_UPDATE_ELEM,
        map,
        key.as_ptr(),
        value.as_ptr() as u64,
        flags,
    )
}

/// `BPF_MAP_DELETE_ELEM`; `Ok(false)` when there was no such key.
pub fn map_delete(map: BorrowedFd, key: &[u8]) -> io::Result<bool> {
    match elem(MAP_DELETE_ELEM, map, key.as_ptr(), 0, 0) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// `BPF_MAP_GET_NEXT_KEY`: the key after `key` (the first with `None`) into `next`;
/// `Ok(false)` after the last.
pub fn map_next_key(map: BorrowedFd, key: Option<&[u8]>, next: &mut [u8]) -> io::Result<bool> {
    let key = key.map_or(std::ptr::null(), |k| k.as_ptr());
    match elem(MAP_GET_NEXT_KEY, map, key, next.as_mut_ptr() as u64, 0) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// `BPF_MAP_FREEZE`: no more writes from user space (with `F_RDONLY_PROG`, the verifier then
/// knows the map's contents as constants).
pub fn map_freeze(map: BorrowedFd) -> io::Result<()> {
    let attr: [u32; 1] = [map.as_raw_fd() as u32];
    bpf(MAP_FREEZE, &attr).map(drop)
}

#[repr(C)]
struct BtfLoadAttr {
    btf: u64,
    log_buf: u64,
    size: u32,
    log_size: u32,
    log_level: u32,
    /// Explicit: the kernel refuses non-zero bytes in fields it knows (`btf_flags`).
    pad: u32,
}

/// `BPF_BTF_LOAD`. On failure, loads again with the kernel's log, and gives its end.
pub fn btf_load(blob: &[u8]) -> io::Result<OwnedFd> {
    let mut attr = BtfLoadAttr {
        btf: blob.as_ptr() as u64,
        log_buf: 0,
        size: blob.len() as u32,
        log_size: 0,
        log_level: 0,
        pad: 0,
    };
    // Without a log first, as for programs: the log's buffer (64 KiB, zeroed) was 16 page
    // faults on the loading thread at every start, which the maps wait for.
    match bpf_fd(BTF_LOAD, &attr) {
        Ok(fd) => Ok(fd),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => Err(e),
        Err(first) => {
            let mut log = vec![0u8; 64 * 1024];
            attr.log_buf = log.as_mut_ptr() as u64;
            attr.log_size = log.len() as u32;
            attr.log_level = 1;
            match bpf_fd(BTF_LOAD, &attr) {
                Ok(fd) => Ok(fd),
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => Err(with_log(first, &log)),
                Err(e) => Err(with_log(e, &log)),
            }
        }
    }
}

#[repr(C)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
    prog_btf_fd: u32,
    func_info_rec_size: u32,
    func_info: u64,
    func_info_cnt: u32,
    line_info_rec_size: u32,
    line_info: u64,
    line_info_cnt: u32,
    attach_btf_id: u32,
}

/// A program to load.
pub struct Prog<'a> {
    pub name: &'a str,
    pub prog_type: u32,
    pub expected_attach_type: u32,
    /// `tp_btf`: the id of the tracepoint's `btf_trace_*` typedef in the kernel's BTF.
    pub attach_btf_id: u32,
    /// 8-byte instructions.
    pub insns: &'a [u8],
    pub license: &'a str,
}

/// `BPF_PROG_LOAD`. On failure, loads again with the verifier's log, and gives its end.
pub fn prog_load(p: &Prog) -> io::Result<OwnedFd> {
    let license = CString::new(p.license).map_err(|_| io::Error::other("license has a NUL"))?;
    let mut attr = ProgLoadAttr {
        prog_type: p.prog_type,
        insn_cnt: (p.insns.len() / 8) as u32,
        insns: p.insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: 0,
        log_size: 0,
        log_buf: 0,
        kern_version: 0,
        prog_flags: 0,
        prog_name: name16(p.name),
        prog_ifindex: 0,
        expected_attach_type: p.expected_attach_type,
        prog_btf_fd: 0,
        func_info_rec_size: 0,
        func_info: 0,
        func_info_cnt: 0,
        line_info_rec_size: 0,
        line_info: 0,
        line_info_cnt: 0,
        attach_btf_id: p.attach_btf_id,
    };
    // Without a log first: the verifier is faster when it does not write one.
    match bpf_fd(PROG_LOAD, &attr) {
        Ok(fd) => Ok(fd),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => Err(e),
        Err(first) => {
            let mut log = vec![0u8; LOG_SIZE];
            attr.log_level = 1;
            attr.log_size = log.len() as u32;
            attr.log_buf = log.as_mut_ptr() as u64;
            match bpf_fd(PROG_LOAD, &attr) {
                Ok(fd) => Ok(fd),
                // ENOSPC: the log did not fit; the first error is the program's.
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => Err(with_log(first, &log)),
                Err(e) => Err(with_log(e, &log)),
            }
        }
    }
}

/// The error with the last lines of a kernel log (where the verifier says why).
fn with_log(e: io::Error, log: &[u8]) -> io::Error {
    let end = log.iter().position(|&c| c == 0).unwrap_or(log.len());
    let text = String::from_utf8_lossy(&log[..end]);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return e;
    }
    let tail = lines[lines.len().saturating_sub(6)..].join(" | ");
    io::Error::new(e.kind(), format!("{e}; the kernel's log ends: {tail}"))
}

/// `BPF_RAW_TRACEPOINT_OPEN`: a raw tracepoint program on tracepoint `name`, or a `tp_btf`
/// program (`None`: the tracepoint is the program's `attach_btf_id`); attached until the
/// returned descriptor is closed.
pub fn raw_tracepoint_open(prog: BorrowedFd, name: Option<&CStr>) -> io::Result<OwnedFd> {
    #[repr(C)]
    struct Attr {
        name: u64,
        prog_fd: u32,
        pad: u32,
    }
    let attr = Attr {
        name: name.map_or(0, |n| n.as_ptr() as u64),
        prog_fd: prog.as_raw_fd() as u32,
        pad: 0,
    };
    bpf_fd(RAW_TRACEPOINT_OPEN, &attr)
}

/// `BPF_LINK_CREATE` of a program on a perf event, with the cookie the program reads with
/// `bpf_get_attach_cookie` (Linux ≥ 5.15): attached until the link is closed.
pub fn link_perf_event(prog: BorrowedFd, event: BorrowedFd, cookie: u64) -> io::Result<OwnedFd> {
    #[repr(C)]
    struct Attr {
        prog_fd: u32,
        target_fd: u32,
        attach_type: u32,
        flags: u32,
        bpf_cookie: u64,
    }
    let attr = Attr {
        prog_fd: prog.as_raw_fd() as u32,
        target_fd: event.as_raw_fd() as u32,
        attach_type: ATTACH_PERF_EVENT,
        flags: 0,
        bpf_cookie: cookie,
    };
    bpf_fd(LINK_CREATE, &attr)
}

/// The uprobe PMU's type (/sys/bus/event_source/devices/uprobe/type).
fn uprobe_pmu() -> io::Result<u32> {
    let path = "/sys/bus/event_source/devices/uprobe/type";
    let text = std::fs::read_to_string(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))?;
    text.trim()
        .parse()
        .map_err(|_| io::Error::other(format!("{path}: not a number: {text:?}")))
}

/// `struct perf_event_attr` up to `config2` (`PERF_ATTR_SIZE_VER1`, include/uapi/linux/
/// perf_event.h): the kernel takes this size and zero-fills the rest.
#[repr(C)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    /// The bitfield (disabled, inherit, …): all clear.
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
}

const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;

/// A uprobe perf event at `offset` of the file at `path`, for every process (`pid` -1, CPU 0:
/// a BPF program on it runs wherever the probe is hit).
pub fn uprobe_event(path: &std::path::Path, offset: u64) -> io::Result<OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    let pmu = uprobe_pmu()?;
    let path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::other("the path has a NUL"))?;
    let attr = PerfEventAttr {
        type_: pmu,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: 0,
        sample_period: 0,
        sample_type: 0,
        read_format: 0,
        flags: 0,
        wakeup_events: 0,
        bp_type: 0,
        // `uprobe_path` and `probe_offset`.
        config1: path.as_ptr() as u64,
        config2: offset,
    };
    // SAFETY: perf_event_open reads `attr` and the path it points to, both alive for the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const PerfEventAttr,
            -1,
            0,
            -1,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// The number of possible CPUs (/sys/devices/system/cpu/possible, e.g. `0-1`): per-CPU maps
/// hold a value for each.
pub fn possible_cpus() -> io::Result<u32> {
    let path = "/sys/devices/system/cpu/possible";
    let text = std::fs::read_to_string(path)?;
    parse_cpu_list(&text)
        .ok_or_else(|| io::Error::other(format!("{path}: cannot parse {:?}", text.trim())))
}

/// The highest CPU of a list like `0-3,5` plus one.
pub fn parse_cpu_list(text: &str) -> Option<u32> {
    let mut max = None;
    for part in text.trim().split(',') {
        let last = part.rsplit('-').next()?;
        let n: u32 = last.trim().parse().ok()?;
        max = Some(max.map_or(n, |m: u32| m.max(n)));
    }
    max.map(|m| m + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BTF the kernel refuses: loaded without a log first, the error still carries the end
    /// of the kernel's log, from the second load.
    #[test]
    #[cfg_attr(not(ste_test_root), ignore = "needs root: loads BTF into the kernel")]
    fn a_refused_btf_says_why() {
        // The header of a BTF with one type, of an unknown kind (31), and an empty string.
        let mut blob = Vec::new();
        for v in [
            0xeb9fu16.to_le_bytes().as_slice(),
            &[1, 0],
            &24u32.to_le_bytes(),
        ] {
            blob.extend_from_slice(v);
        }
        for v in [0u32, 12, 12, 1] {
            blob.extend_from_slice(&v.to_le_bytes());
        }
        blob.extend_from_slice(&0u32.to_le_bytes()); // name_off
        blob.extend_from_slice(&(31u32 << 24).to_le_bytes()); // info: kind 31
        blob.extend_from_slice(&0u32.to_le_bytes()); // size/type
        blob.push(0);
        let e = btf_load(&blob).expect_err("a type of kind 31 is refused");
        assert!(e.to_string().contains("the kernel's log ends"), "{e}");
    }

    #[test]
    fn attrs_have_the_kernels_layout() {
        // Offsets of include/uapi/linux/bpf.h's `union bpf_attr` members.
        assert_eq!(std::mem::size_of::<MapCreateAttr>(), 60);
        assert_eq!(std::mem::offset_of!(MapCreateAttr, btf_fd), 48);
        assert_eq!(std::mem::size_of::<ElemAttr>(), 32);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, prog_name), 48);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, expected_attach_type), 68);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, attach_btf_id), 108);
        assert_eq!(std::mem::size_of::<BtfLoadAttr>(), 32);
        assert_eq!(std::mem::size_of::<PerfEventAttr>(), 72);
    }

    #[test]
    fn parses_cpu_lists() {
        assert_eq!(parse_cpu_list("0-1\n"), Some(2));
        assert_eq!(parse_cpu_list("0\n"), Some(1));
        assert_eq!(parse_cpu_list("0-3,8-11"), Some(12));
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn names_are_cut_to_fifteen_bytes() {
        assert_eq!(&name16("a_rather_long_map_name")[..], b"a_rather_long_m\0");
    }
}
