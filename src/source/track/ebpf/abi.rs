//! The ABI shared with `bpf/ste.bpf.c`: record kinds and flags, counter indices, and the
//! `#[repr(C)]` mirrors of the structures the BPF maps hold (plain data, hence `Pod`).
//!
//! Owns only these mirrors; they change with `bpf/ste.bpf.c` and nothing else. Must not read a
//! map or the ring buffer: `reader` and `syscall_maps` do.

use super::*;

/// Record kinds and layouts: `bpf/ste.bpf.c`.
pub(super) const EV_FORK: u32 = 1;
pub(super) const EV_EXEC: u32 = 2;
pub(super) const EV_EXIT: u32 = 3;
pub(super) const EV_CALLS: u32 = 4;
pub(super) const EV_LAST_SWITCH: u32 = 5;
pub(super) const EXIT_GROUP_DEAD: u32 = 1;
pub(super) const EXIT_HAS_MM: u32 = 2;
pub(super) const TASK_LAUNCHING: u32 = 1;
/// Syscall numbers per ABI in the kernel's arrays: native at `nr`, compat at 512 + nr.
pub(super) const NIDX: u32 = 1024;
pub(super) const CNT_DROPPED: u32 = 0;
pub(super) const CNT_UNTRACKED: u32 = 1;
pub(super) const CNT_BAD_NR: u32 = 3;
pub(super) const CNT_ERRNO_FULL: u32 = 4;
pub(super) const CNT_SDT_SIZES_FULL: u32 = 5;
/// The word of `counters` the reader writes: non-zero while it batches, and the programs then
/// ask the ring to wake it only when the data waiting passes a quarter of the ring.
pub(super) const CTL_READER_BATCHING: u32 = 6;

/// How often the reader checks the kernel's count of dropped records.
pub(super) const DROP_CHECK: Duration = Duration::from_millis(100);

/// How long the reader sleeps between drains while records keep coming (a fork storm, a
/// parallel build). Waking on the ring's notification costs a wake-up of this thread and of
/// the session thread per record when records are sparser than the reader is fast (about
/// three per process of a loop of short programs); sleeping instead lets them pile up and be
/// read together. It bounds how late an EXEC line appears. A batch is cut short when the data
/// waiting passes a quarter of the ring (`RING_BYTES`): a burst of long argv can fill the ring
/// within a batch, a fork storm cannot.
pub(super) const BATCH: Duration = Duration::from_millis(10);

/// `struct total` of the BPF object.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Total {
    pub(super) calls: u64,
    pub(super) errors: u64,
    pub(super) ns: u64,
    pub(super) max_ns: u64,
}

/// `struct errno_key` of the BPF object.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct ErrnoKey {
    pub(super) idx: u32,
    pub(super) err: i32,
}

/// `struct sdt_arg` and `struct sdt_site` of the BPF object (forms: `ARG_*` there).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct SdtArg {
    pub(super) form: u32,
    pub(super) reg: u32,
    pub(super) size: i32,
    pub(super) pad: u32,
    pub(super) disp: i64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct SdtSite {
    pub(super) kind: u32,
    pub(super) pad: u32,
    pub(super) size: SdtArg,
}

/// `struct sdt_total` and `struct sdt_size_key` of the BPF object.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct SdtTotal {
    pub(super) hits: u64,
    pub(super) sized: u64,
    pub(super) bytes: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct SdtSizeKey {
    pub(super) kind: u32,
    pub(super) pad: u32,
    pub(super) size: u64,
}

impl SdtArg {
    pub(super) fn of(arg: Option<sdt::Arg>) -> SdtArg {
        let (form, reg, size, disp) = match arg {
            None => (0, 0, 0, 0),
            Some(sdt::Arg::Reg { reg, size }) => (1, reg, size, 0),
            Some(sdt::Arg::Mem { reg, disp, size }) => (2, reg, size, disp),
            Some(sdt::Arg::Const { value, size }) => (3, 0, size, value),
        };
        SdtArg {
            form,
            reg,
            size,
            pad: 0,
            disp,
        }
    }
}

// SAFETY: plain repr(C) integers with no padding; any bit pattern is valid.
unsafe impl Pod for Total {}
// SAFETY: plain repr(C) integers with no padding; any bit pattern is valid.
unsafe impl Pod for SdtSite {}
// SAFETY: plain repr(C) integers with no padding; any bit pattern is valid.
unsafe impl Pod for SdtTotal {}
// SAFETY: plain repr(C) integers with no padding; any bit pattern is valid.
unsafe impl Pod for SdtSizeKey {}
// SAFETY: plain repr(C) integers with no padding; any bit pattern is valid.
unsafe impl Pod for ErrnoKey {}
