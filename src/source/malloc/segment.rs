//! The segment shared with the malloc shim: ste's side of `shim/ste_malloc.h`, mapped from the
//! file the shim created, read while the shim writes it, and written to ask for snapshots.
//!
//! Owns the layout mirror (the `#[repr(C)]` structs below, only ever used for their offsets)
//! and every access to the mapping. ste's own low-level module: the mapping is memory another
//! process writes concurrently, so every word is read and written through `AtomicU64`, and
//! byte areas are copied with volatile reads under the shim's sequence locks.
//!
//! The command owns the file and may cut it short (`ftruncate`) while ste has it mapped: every
//! page past the new end then raises SIGBUS when touched, which killed ste (and left its
//! cgroup, its run directory and `task_delayacct` behind). So every access runs in a [`guard`]:
//! a SIGBUS on the segment's own pages replaces the mapping with zeroed memory and the read
//! returns `None`; the segment is said to be cut, and nothing it held after that is trusted.
//! (A sealed memfd the command cannot shrink was the other way: the shim would have to hand
//! each segment's descriptor to ste, which the files in the run directory spare.)

use std::fs::File;
use std::io;
use std::mem::{offset_of, size_of};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub const MAGIC: u64 = 0x314c_4c41_4d45_5453; // "STEMALL1"
pub const VERSION: u64 = 2;
pub const SLOTS: usize = 1024;
const INFO_CAP: usize = 256 * 1024;
const PATH_CAP: usize = 256;

#[repr(C)]
#[allow(dead_code)]
struct Counters {
    poll: u64,
    malloc_calls: u64,
    malloc_bytes: u64,
    allocated_chunk_bytes: u64,
    free_calls: u64,
    free_bytes: u64,
    peak_net: u64,
    flushed_net: u64,
    state: u64,
    free_null_calls: u64,
    calloc_calls: u64,
    calloc_bytes: u64,
    realloc_calls: u64,
    realloc_bytes: u64,
    memalign_calls: u64,
    memalign_bytes: u64,
    mmapped_calls: u64,
    mmapped_bytes: u64,
    failed_calls: u64,
    flush_t_ns: u64,
    flush_peak: u64,
    reserved: [u64; 3],
}

#[repr(C)]
#[allow(dead_code)]
struct Snapshot {
    seq: u64,
    answered: u64,
    t_ns: u64,
    cost_ns: u64,
    at_exit: u64,
    arena: u64,
    ordblks: u64,
    smblks: u64,
    hblks: u64,
    hblkhd: u64,
    usmblks: u64,
    fsmblks: u64,
    uordblks: u64,
    fordblks: u64,
    keepcost: u64,
    info_t_ns: u64,
    info_len: u64,
    info_truncated: u64,
    info: [u8; INFO_CAP],
}

#[repr(C)]
#[allow(dead_code)]
struct Layout {
    magic: u64,
    version: u64,
    size: u64,
    pid: i64,
    ppid: i64,
    created_ns: u64,
    origin: u64,
    allocator: u64,
    inherited_bytes: u64,
    exe: [u8; PATH_CAP],
    allocator_path: [u8; PATH_CAP],
    mmap_threshold: u64,
    trim_threshold: u64,
    thresholds_dynamic: u64,
    threshold_changes: u64,
    request: u64,
    request_full: u64,
    exited: u64,
    fold_seq: u64,
    slots_high: u64,
    threads: u64,
    overflow_threads: u64,
    snapshots: u64,
    snapshots_cost_ns: u64,
    exit_snapshot_skipped: u64,
    held_flushed: u64,
    held_peak: u64,
    held_peak_t_ns: u64,
    peak_after_ns: u64,
    peak_by_ns: u64,
    flush_bytes: u64,
    reserved: [u64; 3],
    retired: Counters,
    overflow: Counters,
    slots: [Counters; SLOTS],
    snap: Snapshot,
}

/// The size of the segment file the shim creates.
pub const SIZE: usize = size_of::<Layout>();

/// Sums of every thread's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    pub malloc_calls: u64,
    pub malloc_bytes: u64,
    pub allocated_chunk_bytes: u64,
    pub free_calls: u64,
    pub free_bytes: u64,
    pub free_null_calls: u64,
    pub calloc_calls: u64,
    pub calloc_bytes: u64,
    pub realloc_calls: u64,
    pub realloc_bytes: u64,
    pub memalign_calls: u64,
    pub memalign_bytes: u64,
    pub mmapped_calls: u64,
    pub mmapped_bytes: u64,
    pub failed_calls: u64,
    /// The sum of the threads' own peaks of allocated − freed (each ≥ 0): with one thread, its
    /// peak; with several, a bound on the image's.
    pub peak_net_sum: u64,
}

impl Counts {
    pub fn calls(&self) -> u64 {
        self.malloc_calls
            + self.calloc_calls
            + self.realloc_calls
            + self.memalign_calls
            + self.free_calls
            + self.free_null_calls
    }

    /// What the program holds: chunk bytes handed out minus given back, plus what a forked
    /// child started with.
    pub fn held_bytes(&self, inherited: u64) -> u64 {
        (inherited + self.allocated_chunk_bytes).saturating_sub(self.free_bytes)
    }
}

/// The segment's header: who wrote it and the shim's model of the thresholds.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Header {
    pub pid: i64,
    pub created_ns: u64,
    /// 1 exec, 2 fork.
    pub origin: u64,
    /// 1 glibc, 2 a library after the shim, 3 the program's own.
    pub allocator: u64,
    /// A forked child: what it held when it got its segment.
    pub inherited_bytes: u64,
    pub exe: String,
    pub allocator_path: String,
    pub mmap_threshold: u64,
    pub trim_threshold: u64,
    pub thresholds_dynamic: bool,
    pub threshold_changes: u64,
    pub exited: bool,
    pub threads: u64,
    pub overflow_threads: u64,
    /// Snapshots taken in the image, and the thread CPU they cost it in all.
    pub snapshots: u64,
    pub snapshots_cost_ns: u64,
    /// The destructor skipped its snapshot: it would have taken them over budget.
    pub exit_snapshot_skipped: bool,
    /// The shim's shared account of what the image holds (see `shim/ste_malloc.c`, "the held
    /// peak"): its high-water mark (allocated − freed of all threads, as of their last flushes;
    /// signed in the segment, so a forked child freeing what it inherited can go below 0), when
    /// it was raised, and the change a thread may keep unflushed.
    pub held_peak_flushed: i64,
    pub held_peak_t_ns: u64,
    pub flush_bytes: u64,
    /// The last rise of a thread's own peak happened between these two (CLOCK_MONOTONIC;
    /// 0: never dated).
    pub peak_after_ns: u64,
    pub peak_by_ns: u64,
    /// The most slots in use at once (slots are taken lowest first).
    pub slots_high: u64,
}

/// The shim's last snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Snap {
    /// The request it answered (0: none yet, unless `at_exit`).
    pub answered: u64,
    pub t_ns: u64,
    pub cost_ns: u64,
    pub at_exit: bool,
    pub arena: u64,
    pub ordblks: u64,
    /// Free chunks in the fastbins (`smblks`): mallinfo2 walks them too.
    pub smblks: u64,
    pub hblks: u64,
    pub hblkhd: u64,
    pub uordblks: u64,
    pub fordblks: u64,
    pub keepcost: u64,
    /// malloc_info's XML, when asked for and present.
    pub info: Option<String>,
    pub info_truncated: bool,
}

impl Snap {
    /// Whether the shim has taken any snapshot.
    pub fn taken(&self) -> bool {
        self.t_ns != 0
    }
}

/// Reads of a mapping the command may cut short, which survive the SIGBUS that follows.
mod guard {
    use std::cell::Cell;
    use std::sync::Once;
    use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering, compiler_fence};

    thread_local! {
        /// The mapping this thread is reading (base, length); (0, 0) outside a read.
        static RANGE: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
        /// A SIGBUS hit that mapping during the read.
        static FAULTED: Cell<bool> = const { Cell::new(false) };
    }

    /// The SIGBUS action before ste's (Rust's runtime installs one that reports stack
    /// overflows): every fault outside a guarded read goes to it.
    static PREVIOUS: AtomicUsize = AtomicUsize::new(libc::SIG_DFL);
    static PREVIOUS_FLAGS: AtomicI32 = AtomicI32::new(0);
    static INSTALL: Once = Once::new();

    extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
        // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
        let addr = unsafe { (*info).si_addr() } as usize;
        let (base, len) = RANGE.with(Cell::get);
        if len > 0 && addr >= base && addr - base < len {
            // Zeroed private memory in place of the cut file: the faulting read goes on and
            // reads 0, and the guard discards everything this read gave.
            // SAFETY: replaces exactly the segment's own mapping, which its `Segment` owns.
            let p = unsafe {
                libc::mmap(
                    base as *mut libc::c_void,
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                FAULTED.with(|f| f.set(true));
                return;
            }
        }
        let previous = PREVIOUS.load(Ordering::Relaxed);
        if previous == libc::SIG_DFL || previous == libc::SIG_IGN {
            // What the fault would have done without this handler: the default action, once
            // the faulting instruction runs again.
            // SAFETY: a zeroed sigaction is SIG_DFL with an empty mask.
            unsafe {
                let dfl: libc::sigaction = std::mem::zeroed();
                libc::sigaction(libc::SIGBUS, &dfl, std::ptr::null_mut());
            }
        } else if PREVIOUS_FLAGS.load(Ordering::Relaxed) & libc::SA_SIGINFO != 0 {
            // SAFETY: the handler installed before, with the signature its flags declare.
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                unsafe { std::mem::transmute(previous) };
            f(sig, info, ctx);
        } else {
            // SAFETY: as above, a plain handler.
            let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(previous) };
            f(sig);
        }
    }

    fn install() {
        // SAFETY: reading and setting the SIGBUS action with valid structures; the handler
        // only reads this thread's cells, maps memory and chains to the previous action.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = on_sigbus as *const () as usize;
            new.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER;
            libc::sigemptyset(&mut new.sa_mask);
            if libc::sigaction(libc::SIGBUS, &new, &mut old) == 0 {
                PREVIOUS.store(old.sa_sigaction, Ordering::Relaxed);
                PREVIOUS_FLAGS.store(old.sa_flags, Ordering::Relaxed);
            }
        }
    }

    /// Runs `read` over the mapping at `base` (`len` bytes): `None` when the mapping was cut
    /// short under it (its pages are zeroes from then on).
    pub(super) fn read<T>(base: *mut u8, len: usize, read: impl FnOnce() -> T) -> Option<T> {
        INSTALL.call_once(install);
        RANGE.with(|r| r.set((base as usize, len)));
        FAULTED.with(|f| f.set(false));
        // The handler runs on this thread: keep the reads between the two settings.
        compiler_fence(Ordering::SeqCst);
        let out = read();
        compiler_fence(Ordering::SeqCst);
        RANGE.with(|r| r.set((0, 0)));
        (!FAULTED.with(|f| f.replace(false))).then_some(out)
    }
}

/// A mapped segment.
pub struct Segment {
    base: *mut u8,
    /// A read found the file cut short: nothing is read from it any more.
    cut: AtomicBool,
}

// SAFETY: the mapping is process-wide memory accessed only through atomics and volatile reads;
// the pointer can move between threads.
unsafe impl Send for Segment {}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping this value owns, of the size it was mapped with.
        unsafe { libc::munmap(self.base.cast(), SIZE) };
    }
}

impl Segment {
    /// Maps `file` (opened for reading and writing). `Ok(None)` when the shim has not finished
    /// writing it yet (no magic), or it is not a segment of this layout.
    pub fn open(file: File) -> io::Result<Option<Segment>> {
        if file.metadata()?.len() != SIZE as u64 {
            return Ok(None);
        }
        // SAFETY: a shared read-write mapping of a file of exactly SIZE bytes; checked below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let seg = Segment {
            base: base.cast(),
            cut: AtomicBool::new(false),
        };
        let ours = seg.guarded(|| {
            seg.word(offset_of!(Layout, magic)) == MAGIC
                && seg.word(offset_of!(Layout, version)) == VERSION
                && seg.word(offset_of!(Layout, size)) == SIZE as u64
        });
        Ok(ours.unwrap_or(false).then_some(seg))
    }

    /// Whether a read found the file cut short under ste (the command shrank it): what it
    /// held is lost.
    pub fn is_cut(&self) -> bool {
        self.cut.load(Ordering::Relaxed)
    }

    /// Runs `read` in a [`guard`]: `None`, and the segment marked cut, when the file was cut
    /// short under it.
    fn guarded<T>(&self, read: impl FnOnce() -> T) -> Option<T> {
        if self.is_cut() {
            return None;
        }
        let out = guard::read(self.base, SIZE, read);
        if out.is_none() {
            self.cut.store(true, Ordering::Relaxed);
        }
        out
    }

    fn atomic(&self, offset: usize) -> &AtomicU64 {
        debug_assert!(offset.is_multiple_of(8) && offset + 8 <= SIZE);
        // SAFETY: `offset` is an 8-aligned offset of a u64 field inside the SIZE-byte mapping
        // (page-aligned), which lives as long as `self`; AtomicU64 has u64's layout.
        unsafe { &*(self.base.add(offset) as *const AtomicU64) }
    }

    fn word(&self, offset: usize) -> u64 {
        self.atomic(offset).load(Ordering::Acquire)
    }

    /// Copies `len` bytes at `offset` (8-aligned) with volatile reads.
    fn bytes(&self, offset: usize, len: usize) -> Vec<u8> {
        let len = len.min(SIZE - offset);
        let mut out = Vec::with_capacity(len + 8);
        for i in (0..len).step_by(8) {
            let w = self.word(offset + i);
            out.extend_from_slice(&w.to_ne_bytes());
        }
        out.truncate(len);
        out
    }

    fn c_string(&self, offset: usize, cap: usize) -> String {
        let b = self.bytes(offset, cap);
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        String::from_utf8_lossy(&b[..end]).into_owned()
    }

    /// The header; `None` once the file was cut short.
    pub fn header(&self) -> Option<Header> {
        self.guarded(|| self.header_unguarded())
    }

    fn header_unguarded(&self) -> Header {
        let w = |o| self.word(o);
        Header {
            pid: w(offset_of!(Layout, pid)) as i64,
            created_ns: w(offset_of!(Layout, created_ns)),
            origin: w(offset_of!(Layout, origin)),
            allocator: w(offset_of!(Layout, allocator)),
            inherited_bytes: w(offset_of!(Layout, inherited_bytes)),
            exe: self.c_string(offset_of!(Layout, exe), PATH_CAP),
            allocator_path: self.c_string(offset_of!(Layout, allocator_path), PATH_CAP),
            mmap_threshold: w(offset_of!(Layout, mmap_threshold)),
            trim_threshold: w(offset_of!(Layout, trim_threshold)),
            thresholds_dynamic: w(offset_of!(Layout, thresholds_dynamic)) != 0,
            threshold_changes: w(offset_of!(Layout, threshold_changes)),
            exited: w(offset_of!(Layout, exited)) != 0,
            threads: w(offset_of!(Layout, threads)),
            overflow_threads: w(offset_of!(Layout, overflow_threads)),
            snapshots: w(offset_of!(Layout, snapshots)),
            snapshots_cost_ns: w(offset_of!(Layout, snapshots_cost_ns)),
            exit_snapshot_skipped: w(offset_of!(Layout, exit_snapshot_skipped)) != 0,
            held_peak_flushed: w(offset_of!(Layout, held_peak)) as i64,
            held_peak_t_ns: w(offset_of!(Layout, held_peak_t_ns)),
            flush_bytes: w(offset_of!(Layout, flush_bytes)),
            peak_after_ns: w(offset_of!(Layout, peak_after_ns)),
            peak_by_ns: w(offset_of!(Layout, peak_by_ns)),
            slots_high: w(offset_of!(Layout, slots_high)),
        }
    }

    fn add_counters(&self, base: usize, to: &mut Counts) {
        let w = |f: usize| self.word(base + f);
        to.malloc_calls += w(offset_of!(Counters, malloc_calls));
        to.malloc_bytes += w(offset_of!(Counters, malloc_bytes));
        to.allocated_chunk_bytes += w(offset_of!(Counters, allocated_chunk_bytes));
        to.free_calls += w(offset_of!(Counters, free_calls));
        to.free_bytes += w(offset_of!(Counters, free_bytes));
        to.free_null_calls += w(offset_of!(Counters, free_null_calls));
        to.calloc_calls += w(offset_of!(Counters, calloc_calls));
        to.calloc_bytes += w(offset_of!(Counters, calloc_bytes));
        to.realloc_calls += w(offset_of!(Counters, realloc_calls));
        to.realloc_bytes += w(offset_of!(Counters, realloc_bytes));
        to.memalign_calls += w(offset_of!(Counters, memalign_calls));
        to.memalign_bytes += w(offset_of!(Counters, memalign_bytes));
        to.mmapped_calls += w(offset_of!(Counters, mmapped_calls));
        to.mmapped_bytes += w(offset_of!(Counters, mmapped_bytes));
        to.failed_calls += w(offset_of!(Counters, failed_calls));
        to.peak_net_sum = to
            .peak_net_sum
            .saturating_add(w(offset_of!(Counters, peak_net)));
    }

    fn slot(i: usize) -> usize {
        offset_of!(Layout, slots) + i * size_of::<Counters>()
    }

    fn slots_high(&self) -> usize {
        (self.word(offset_of!(Layout, slots_high)) as usize).min(SLOTS)
    }

    /// Every thread's counters summed: the retired threads', the overflow's, and each slot in
    /// use, retried while a thread's counters are being folded (the shim's `fold_seq`); `None`
    /// once the file was cut short.
    pub fn counts(&self) -> Option<Counts> {
        self.guarded(|| self.counts_unguarded())
    }

    fn counts_unguarded(&self) -> Counts {
        let seq = offset_of!(Layout, fold_seq);
        let mut sum = Counts::default();
        for _ in 0..8 {
            let before = self.word(seq);
            if before % 2 == 1 {
                std::thread::yield_now();
                continue;
            }
            sum = Counts::default();
            self.add_counters(offset_of!(Layout, retired), &mut sum);
            self.add_counters(offset_of!(Layout, overflow), &mut sum);
            for i in 0..self.slots_high() {
                if self.word(Self::slot(i) + offset_of!(Counters, state)) == 1 {
                    self.add_counters(Self::slot(i), &mut sum);
                }
            }
            if self.word(seq) == before {
                break;
            }
        }
        sum
    }

    /// The last snapshot (with malloc_info's XML when `with_info`), read under its sequence
    /// lock; `None` if the shim kept writing it, or once the file was cut short.
    pub fn snapshot(&self, with_info: bool) -> Option<Snap> {
        self.guarded(|| self.snapshot_unguarded(with_info))
            .flatten()
    }

    fn snapshot_unguarded(&self, with_info: bool) -> Option<Snap> {
        let base = offset_of!(Layout, snap);
        let w = |f: usize| self.word(base + f);
        for _ in 0..8 {
            let before = w(offset_of!(Snapshot, seq));
            if before % 2 == 1 {
                std::thread::yield_now();
                continue;
            }
            let info_len = (w(offset_of!(Snapshot, info_len)) as usize).min(INFO_CAP);
            let info = (with_info && info_len > 0).then(|| {
                let b = self.bytes(base + offset_of!(Snapshot, info), info_len);
                String::from_utf8_lossy(&b).into_owned()
            });
            let snap = Snap {
                answered: w(offset_of!(Snapshot, answered)),
                t_ns: w(offset_of!(Snapshot, t_ns)),
                cost_ns: w(offset_of!(Snapshot, cost_ns)),
                at_exit: w(offset_of!(Snapshot, at_exit)) != 0,
                arena: w(offset_of!(Snapshot, arena)),
                ordblks: w(offset_of!(Snapshot, ordblks)),
                smblks: w(offset_of!(Snapshot, smblks)),
                hblks: w(offset_of!(Snapshot, hblks)),
                hblkhd: w(offset_of!(Snapshot, hblkhd)),
                uordblks: w(offset_of!(Snapshot, uordblks)),
                fordblks: w(offset_of!(Snapshot, fordblks)),
                keepcost: w(offset_of!(Snapshot, keepcost)),
                info,
                info_truncated: w(offset_of!(Snapshot, info_truncated)) != 0,
            };
            if w(offset_of!(Snapshot, seq)) == before {
                return Some(snap);
            }
        }
        None
    }

    /// Asks for a snapshot on the program's next malloc (a malloc_info one too when `full`):
    /// bumps the request and raises every live thread's flag.
    /// Returns the request's number, which the snapshot answering it carries (`None` once the
    /// file was cut short).
    pub fn request(&self, full: bool) -> Option<u64> {
        self.guarded(|| self.request_unguarded(full))
    }

    fn request_unguarded(&self, full: bool) -> u64 {
        let n = self
            .atomic(offset_of!(Layout, request))
            .fetch_add(1, Ordering::AcqRel)
            + 1;
        if full {
            self.atomic(offset_of!(Layout, request_full))
                .store(n, Ordering::Release);
        }
        let poll = offset_of!(Counters, poll);
        for i in 0..self.slots_high() {
            if self.word(Self::slot(i) + offset_of!(Counters, state)) == 1 {
                self.atomic(Self::slot(i) + poll)
                    .store(1, Ordering::Relaxed);
            }
        }
        self.atomic(offset_of!(Layout, overflow) + poll)
            .store(1, Ordering::Relaxed);
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// The C header's layout, as its static asserts and sizes fix it.
    #[test]
    fn layout_matches_the_shim() {
        assert_eq!(size_of::<Counters>(), 24 * 8);
        assert_eq!(offset_of!(Layout, exe), 9 * 8);
        assert!(offset_of!(Counters, flushed_net) < 64);
        assert_eq!(offset_of!(Counters, failed_calls), 18 * 8);
        assert_eq!(offset_of!(Layout, retired) % 64, 0);
        assert_eq!(offset_of!(Snapshot, info) % 8, 0);
    }

    /// A segment file written the way the shim writes it: header, two slots, a snapshot.
    #[test]
    fn reads_a_segment_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("42.0");
        let mut b = vec![0u8; SIZE];
        let put =
            |b: &mut Vec<u8>, off: usize, v: u64| b[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        put(&mut b, offset_of!(Layout, magic), MAGIC);
        put(&mut b, offset_of!(Layout, version), VERSION);
        put(&mut b, offset_of!(Layout, size), SIZE as u64);
        put(&mut b, offset_of!(Layout, pid), 42);
        put(&mut b, offset_of!(Layout, origin), 1);
        b[offset_of!(Layout, exe)..][..8].copy_from_slice(b"/bin/ls\0");
        put(&mut b, offset_of!(Layout, slots_high), 2);
        for (i, calls) in [(0usize, 10u64), (1, 5)] {
            let s = Segment::slot(i);
            put(&mut b, s + offset_of!(Counters, state), 1);
            put(&mut b, s + offset_of!(Counters, malloc_calls), calls);
            put(&mut b, s + offset_of!(Counters, malloc_bytes), calls * 100);
            put(&mut b, s + offset_of!(Counters, peak_net), calls * 1000);
        }
        put(&mut b, offset_of!(Layout, held_peak), 12_000);
        put(&mut b, offset_of!(Layout, flush_bytes), 65536);
        put(
            &mut b,
            offset_of!(Layout, retired) + offset_of!(Counters, free_calls),
            7,
        );
        let snap = offset_of!(Layout, snap);
        put(&mut b, snap + offset_of!(Snapshot, t_ns), 123);
        put(&mut b, snap + offset_of!(Snapshot, uordblks), 4096);
        let xml = b"<malloc version=\"1\">\n</malloc>\n";
        b[snap + offset_of!(Snapshot, info)..][..xml.len()].copy_from_slice(xml);
        put(
            &mut b,
            snap + offset_of!(Snapshot, info_len),
            xml.len() as u64,
        );
        std::fs::write(&path, &b).unwrap();

        let rw = |p: &Path| File::options().read(true).write(true).open(p).unwrap();
        let seg = Segment::open(rw(&path)).unwrap().unwrap();
        let h = seg.header().unwrap();
        assert_eq!((h.pid, h.origin, h.exe.as_str()), (42, 1, "/bin/ls"));
        assert_eq!((h.held_peak_flushed, h.flush_bytes), (12_000, 65536));
        let c = seg.counts().unwrap();
        assert_eq!(
            (c.malloc_calls, c.malloc_bytes, c.free_calls, c.peak_net_sum),
            (15, 1500, 7, 15_000)
        );
        let s = seg.snapshot(true).unwrap();
        assert_eq!((s.t_ns, s.uordblks), (123, 4096));
        assert_eq!(
            s.info.as_deref(),
            Some("<malloc version=\"1\">\n</malloc>\n")
        );
        seg.request(true);
        seg.request(false);
        drop(seg);
        let after = std::fs::read(&path).unwrap();
        let word = |o: usize| u64::from_ne_bytes(after[o..o + 8].try_into().unwrap());
        assert_eq!(word(offset_of!(Layout, request)), 2);
        assert_eq!(word(offset_of!(Layout, request_full)), 1);
        assert_eq!(word(Segment::slot(1) + offset_of!(Counters, poll)), 1);
        // Cut short under ste (the command's ftruncate): the reads survive the SIGBUS and say
        // so, and the segment is not read again.
        let seg = Segment::open(rw(&path)).unwrap().unwrap();
        rw(&path).set_len(0).unwrap();
        assert_eq!(seg.header(), None);
        assert!(seg.is_cut());
        assert_eq!(seg.counts(), None);
        assert_eq!(seg.request(false), None);
        drop(seg);
        // A fault elsewhere is not taken for a segment's.
        assert!(Segment::open(rw(&path)).unwrap().is_none(), "empty now");
        // Not yet published: no magic.
        std::fs::write(dir.path().join("43.0"), vec![0u8; SIZE]).unwrap();
        assert!(
            Segment::open(rw(&dir.path().join("43.0")))
                .unwrap()
                .is_none()
        );
    }
}
