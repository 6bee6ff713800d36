//! The consumer side of a BPF ring buffer (kernel/bpf/ringbuf.c): the consumer page mapped
//! read-write (the consumer position, which user space advances), the producer page and the
//! data pages mapped read-only, once. The kernel would map the data twice in a row, so that a
//! record that wraps is contiguous (as libbpf maps it); once is half the page-table entries to
//! make at the start and to tear down at ste's exit, which `ste true` waits for
//! (bench/README.md), and the rare record that wraps is copied whole instead.
//! Each record has an 8-byte header: its length with the BUSY bit (still being written: stop
//! there) and the DISCARD bit (skip it), and is padded to 8 bytes.
//! Must not know what the records mean (`track::ebpf` decodes them).

use super::maps::Map;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

const BUSY: u32 = 1 << 31;
const DISCARD: u32 = 1 << 30;
const HEADER: u64 = 8;

/// What the header at the consumer position says.
#[derive(Debug, PartialEq, Eq)]
pub enum Entry {
    /// Still being written: nothing after it can be read yet.
    Busy,
    /// A record of `len` bytes at the position + 8 (discarded or not); the next record is at
    /// `next`.
    Record {
        len: u32,
        discarded: bool,
        next: u64,
    },
}

/// Decodes a record header at consumer position `cons`.
pub fn entry(header: u32, cons: u64) -> Entry {
    if header & BUSY != 0 {
        return Entry::Busy;
    }
    let len = header & !(BUSY | DISCARD);
    Entry::Record {
        len,
        discarded: header & DISCARD != 0,
        next: cons + (u64::from(len) + HEADER).div_ceil(8) * 8,
    }
}

/// A shared mapping of a map's descriptor (the ring's pages here, an mmapable array's values
/// in `maps`).
pub(super) struct Mapping {
    pub(super) ptr: *mut libc::c_void,
    len: usize,
}

impl Mapping {
    pub(super) fn new(fd: BorrowedFd, len: usize, prot: i32, offset: usize) -> io::Result<Mapping> {
        // SAFETY: a new shared mapping of a map's descriptor; the kernel checks the length and
        // protection against the map.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                offset as libc::off_t,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping { ptr, len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `new` mapped; nothing borrows it after the drop.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// A ring buffer map, mapped for reading.
pub struct RingBuf {
    map: Map,
    consumer: Mapping,
    producer: Mapping,
    mask: u64,
    page: usize,
}

/// How a record of `len` bytes whose data begin `off` bytes into a ring's data area of `size`
/// bytes lies in it: the bytes up to the area's end, and the rest, wrapped to its start.
fn parts(off: usize, len: usize, size: usize) -> (usize, usize) {
    let first = len.min(size - off);
    (first, len - first)
}

/// A record's bytes in one slice: `first` itself when nothing wrapped, else both parts copied
/// into `scratch`.
fn joined<'a>(first: &'a [u8], rest: &'a [u8], scratch: &'a mut Vec<u8>) -> &'a [u8] {
    if rest.is_empty() {
        return first;
    }
    scratch.clear();
    scratch.extend_from_slice(first);
    scratch.extend_from_slice(rest);
    scratch
}

// SAFETY: the mappings are owned by the RingBuf and only read or written through it (the
// positions with atomics); moving it to another thread moves that ownership.
unsafe impl Send for RingBuf {}

impl RingBuf {
    pub fn new(map: Map) -> io::Result<RingBuf> {
        let size = map.def.max_entries as usize;
        if map.def.map_type != super::sys::MAP_RINGBUF || !size.is_power_of_two() {
            return Err(io::Error::other(format!(
                "BPF map `{}` is not a ring buffer",
                map.name
            )));
        }
        let page = crate::kernel::proc::page_size() as usize;
        let consumer = Mapping::new(map.as_fd(), page, libc::PROT_READ | libc::PROT_WRITE, 0)?;
        let producer = Mapping::new(map.as_fd(), page + size, libc::PROT_READ, page)?;
        Ok(RingBuf {
            map,
            consumer,
            producer,
            mask: size as u64 - 1,
            page,
        })
    }

    fn cons_pos(&self) -> &AtomicU64 {
        // SAFETY: the consumer page starts with the 8-byte-aligned consumer position, which
        // the kernel reads concurrently (hence the atomic).
        unsafe { &*(self.consumer.ptr as *const AtomicU64) }
    }

    fn prod_pos(&self) -> &AtomicU64 {
        // SAFETY: as cons_pos, for the producer position the kernel writes.
        unsafe { &*(self.producer.ptr as *const AtomicU64) }
    }

    /// Where the kernel will write its next record: every record reserved so far lies before
    /// it (some may still be being written).
    pub fn written(&self) -> u64 {
        self.prod_pos().load(Ordering::Acquire)
    }

    /// Whether every record before `pos` (from [`RingBuf::written`]) has been drained.
    pub fn drained_to(&self, pos: u64) -> bool {
        self.cons_pos().load(Ordering::Acquire) >= pos
    }

    /// Calls `f` with each record written since the last call, in order, and gives the space
    /// back to the kernel after each. Returns the number of records read.
    pub fn drain(&mut self, mut f: impl FnMut(&[u8])) -> usize {
        self.walk(true, |data| {
            f(data);
            true
        })
    }

    /// As [`RingBuf::drain`], stopping at the first record for which `f` returns false; that
    /// record is not given back, so the next drain starts with it.
    pub fn drain_while(&mut self, f: impl FnMut(&[u8]) -> bool) -> usize {
        self.walk(true, f)
    }

    /// Calls `f` with each record not yet drained, in order, while it returns true, giving
    /// nothing back (a look ahead).
    pub fn peek(&self, f: impl FnMut(&[u8]) -> bool) {
        self.walk(false, f);
    }

    fn walk(&self, consume: bool, mut f: impl FnMut(&[u8]) -> bool) -> usize {
        let mut n = 0;
        let size = self.mask as usize + 1;
        let data = (self.producer.ptr as *const u8).wrapping_add(self.page);
        let mut scratch = Vec::new();
        let mut cons = self.cons_pos().load(Ordering::Acquire);
        loop {
            let prod = self.prod_pos().load(Ordering::Acquire);
            if cons >= prod {
                break;
            }
            let at = self.page + (cons & self.mask) as usize;
            // SAFETY: `at` is inside the data pages (mask < size); the header is 8-byte
            // aligned (positions are multiples of 8) and written by the kernel with a release
            // store, hence the acquire load.
            let header = unsafe {
                (*((self.producer.ptr as *const u8).add(at) as *const AtomicU32))
                    .load(Ordering::Acquire)
            };
            match entry(header, cons) {
                Entry::Busy => break,
                Entry::Record {
                    len,
                    discarded,
                    next,
                } => {
                    if !discarded {
                        let off = ((cons + HEADER) & self.mask) as usize;
                        let (first, rest) = parts(off, len as usize, size);
                        // SAFETY: both parts lie within the data pages (`parts` keeps the
                        // first before the area's end, the rest wraps to its start); the
                        // kernel does not reuse a record's bytes before the consumer position
                        // passes it.
                        let (first, rest) = unsafe {
                            (
                                std::slice::from_raw_parts(data.add(off), first),
                                std::slice::from_raw_parts(data, rest),
                            )
                        };
                        if !f(joined(first, rest, &mut scratch)) {
                            break;
                        }
                        n += 1;
                    }
                    cons = next;
                    if consume {
                        self.cons_pos().store(cons, Ordering::Release);
                    }
                }
            }
        }
        n
    }
}

impl AsRawFd for RingBuf {
    /// The descriptor to poll for new records.
    fn as_raw_fd(&self) -> i32 {
        self.map.as_fd().as_raw_fd()
    }
}

impl AsFd for RingBuf {
    /// The descriptor to wait on for new records.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.map.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record that ends before the data area does is read in place; one that runs past the
    /// end continues at the start, and its two parts are joined in order.
    #[test]
    fn a_record_that_wraps_is_joined_from_both_ends() {
        // From the start, also after a header in the last 8 bytes (`off` is masked).
        assert_eq!(parts(0, 24, 64), (24, 0));
        assert_eq!(parts(40, 24, 64), (24, 0), "ends exactly at the end");
        assert_eq!(parts(48, 24, 64), (16, 8));
        let ring: Vec<u8> = (0..64).collect();
        let mut scratch = Vec::new();
        let (first, rest) = parts(48, 24, 64);
        let whole = joined(&ring[48..48 + first], &ring[..rest], &mut scratch);
        let want: Vec<u8> = (48..64).chain(0..8).collect();
        assert_eq!(whole, &want[..]);
        let mut scratch = Vec::new();
        assert_eq!(joined(&ring[8..16], &[], &mut scratch), &ring[8..16]);
        assert!(scratch.is_empty(), "nothing copied for a record in place");
    }

    #[test]
    fn decodes_record_headers() {
        // 24 bytes: the next record is 32 bytes on.
        assert_eq!(
            entry(24, 64),
            Entry::Record {
                len: 24,
                discarded: false,
                next: 96
            }
        );
        // 13 bytes: padded to 8 after the header.
        assert_eq!(
            entry(13, 0),
            Entry::Record {
                len: 13,
                discarded: false,
                next: 24
            }
        );
        assert_eq!(entry(BUSY | 24, 0), Entry::Busy);
        assert_eq!(
            entry(DISCARD | 40, 8),
            Entry::Record {
                len: 40,
                discarded: true,
                next: 56
            }
        );
    }
}
