//! Readers of `/proc/kpageflags` and `/proc/kpagecount`: one 64-bit word per physical page
//! frame, its flags and the number of times it is mapped. Root only (CAP_SYS_ADMIN).
//! See Documentation/admin-guide/mm/pagemap.rst and include/uapi/linux/kernel-page-flags.h.
//!
//! Owns the bits ste tests itself (anonymous, THP, zero page) and the batched reads; the
//! flags' letters and names, which the Run stores, are the model's (`model::maps::PAGE_FLAGS`,
//! applied by `source::from_kernel`). The batched reads: frames are read in sorted, coalesced runs
//! (one `pread` per run of nearby frames instead of one per page: ~3× faster, docs/kernel-notes.md).
//! Knows nothing about processes or mappings.

use crate::kernel::pagemap::read_full_at;
use std::fs::File;
use std::io;
use std::path::Path;

pub const ANON: u64 = 1 << 12;
pub const THP: u64 = 1 << 22;
pub const ZERO_PAGE: u64 = 1 << 24;

/// Splits sorted frame numbers into runs to read at once: a new run starts when the next frame
/// is more than `max_gap` frames past the end of the current one, or when the run would exceed
/// `max_len` frames. Returns (first frame, number of frames) per run. Duplicates are allowed.
pub fn coalesce(sorted_pfns: &[u64], max_gap: u64, max_len: u64) -> Vec<(u64, u64)> {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for &pfn in sorted_pfns {
        if let Some((start, len)) = runs.last_mut() {
            let end = *start + *len;
            if pfn < end {
                continue;
            }
            if pfn - end <= max_gap && pfn + 1 - *start <= max_len {
                *len = pfn + 1 - *start;
                continue;
            }
        }
        runs.push((pfn, 1));
    }
    runs
}

/// `pfns` sorted, and the index each sorted frame came from. Frame numbers and indexes are
/// packed into one word when they fit (frames below 2^40, i.e. 4 PiB of RAM, and 2^24 pages,
/// 64 GiB, per map), which sorts plain integers: about twice as fast as sorting indexes by key.
fn sort_frames(pfns: &[u64]) -> (Vec<u32>, Vec<u64>) {
    const INDEX_BITS: u32 = 24;
    if pfns.len() < 1 << INDEX_BITS && pfns.iter().all(|&p| p < 1 << (64 - INDEX_BITS)) {
        let mut packed: Vec<u64> = pfns
            .iter()
            .enumerate()
            .map(|(i, &p)| (p << INDEX_BITS) | i as u64)
            .collect();
        packed.sort_unstable();
        let order = packed
            .iter()
            .map(|&w| (w & ((1 << INDEX_BITS) - 1)) as u32)
            .collect();
        let sorted = packed.iter().map(|&w| w >> INDEX_BITS).collect();
        return (order, sorted);
    }
    let mut order: Vec<u32> = (0..pfns.len() as u32).collect();
    order.sort_unstable_by_key(|&i| pfns[i as usize]);
    let sorted = order.iter().map(|&i| pfns[i as usize]).collect();
    (order, sorted)
}

/// Frames closer than this are read in one run (reading 32 unneeded words, 256 bytes, costs
/// less than another system call).
const MAX_GAP: u64 = 32;
/// At most this many frames per read (512 KiB).
const MAX_RUN: u64 = 64 * 1024;

/// The open `kpageflags` and `kpagecount` files.
pub struct KPages {
    flags: File,
    count: File,
    buf: Vec<u8>,
}

/// Flags and map count of one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FrameInfo {
    pub flags: u64,
    pub map_count: u64,
}

impl KPages {
    /// Opens `<root>/kpageflags` and `<root>/kpagecount`. Fails with EACCES without root.
    pub fn open(root: &Path) -> io::Result<KPages> {
        Ok(KPages {
            flags: File::open(root.join("kpageflags"))?,
            count: File::open(root.join("kpagecount"))?,
            buf: Vec::new(),
        })
    }

    /// Looks up every frame of `pfns` (any order, duplicates allowed) and returns their flags
    /// and map counts in the same order. Frames are visited sorted, in coalesced runs. A frame
    /// marked in `mapped_once` (the pagemap's exclusive bit, which the kernel sets for a page
    /// mapped once) gets map count 1 without reading kpagecount: for private memory, that
    /// halves the reads.
    pub fn lookup(&mut self, pfns: &[u64], mapped_once: &[bool]) -> io::Result<Vec<FrameInfo>> {
        let (order, sorted) = sort_frames(pfns);
        let mut out = vec![FrameInfo::default(); pfns.len()];
        let mut flags = Vec::new();
        let mut counts = Vec::new();
        let mut next = 0usize;
        for (start, len) in coalesce(&sorted, MAX_GAP, MAX_RUN) {
            let end = next + sorted[next..].partition_point(|&p| p < start + len);
            let members = &order[next..end];
            self.read_words(Which::Flags, start, len, &mut flags)?;
            let need_counts = members
                .iter()
                .any(|&i| !mapped_once.get(i as usize).copied().unwrap_or(false));
            if need_counts {
                self.read_words(Which::Count, start, len, &mut counts)?;
            }
            for (&i, &pfn) in members.iter().zip(&sorted[next..end]) {
                let k = (pfn - start) as usize;
                let once = mapped_once.get(i as usize).copied().unwrap_or(false);
                out[i as usize] = FrameInfo {
                    flags: flags.get(k).copied().unwrap_or(0),
                    map_count: if once {
                        1
                    } else {
                        counts.get(k).copied().unwrap_or(0)
                    },
                };
            }
            next = end;
        }
        Ok(out)
    }

    fn read_words(
        &mut self,
        which: Which,
        start: u64,
        len: u64,
        out: &mut Vec<u64>,
    ) -> io::Result<()> {
        self.buf.resize((len * 8) as usize, 0);
        let file = match which {
            Which::Flags => &self.flags,
            Which::Count => &self.count,
        };
        let got = read_full_at(file, &mut self.buf, start * 8)?;
        out.clear();
        out.extend(
            self.buf[..got - got % 8]
                .chunks_exact(8)
                .map(|c| u64::from_ne_bytes(c.try_into().expect("8 bytes"))),
        );
        Ok(())
    }
}

enum Which {
    Flags,
    Count,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalescing_runs() {
        assert_eq!(coalesce(&[], 32, 100), vec![]);
        assert_eq!(coalesce(&[5, 5, 6, 7], 32, 100), vec![(5, 3)]);
        // A gap of 32 frames joins; 33 splits.
        assert_eq!(coalesce(&[0, 33], 32, 100), vec![(0, 34)]);
        assert_eq!(coalesce(&[0, 34], 32, 100), vec![(0, 1), (34, 1)]);
        // Runs are bounded in length.
        assert_eq!(coalesce(&[0, 1, 2, 3], 32, 2), vec![(0, 2), (2, 2)]);
    }

    #[test]
    fn sorting_frames_keeps_their_origin() {
        let pfns = [7u64, 3, 9, 3, 1];
        let (order, sorted) = sort_frames(&pfns);
        assert_eq!(sorted, [1, 3, 3, 7, 9]);
        for (o, s) in order.iter().zip(&sorted) {
            assert_eq!(pfns[*o as usize], *s);
        }
        // Frames too large to pack take the other path, with the same result.
        let big = [1u64 << 50, 5, 1 << 45];
        let (order, sorted) = sort_frames(&big);
        assert_eq!(sorted, [5, 1 << 45, 1 << 50]);
        assert_eq!(order, [1, 2, 0]);
    }

    #[test]
    fn lookup_in_any_order() {
        let dir = tempfile::tempdir().unwrap();
        // Frame i has flags i·10 and map count i % 3.
        let flags: Vec<u8> = (0..1000u64).flat_map(|i| (i * 10).to_ne_bytes()).collect();
        let counts: Vec<u8> = (0..1000u64).flat_map(|i| (i % 3).to_ne_bytes()).collect();
        std::fs::write(dir.path().join("kpageflags"), flags).unwrap();
        std::fs::write(dir.path().join("kpagecount"), counts).unwrap();
        let mut k = KPages::open(dir.path()).unwrap();
        let got = k.lookup(&[900, 3, 500, 3, 4], &[]).unwrap();
        let want = [900u64, 3, 500, 3, 4].map(|i| FrameInfo {
            flags: i * 10,
            map_count: i % 3,
        });
        assert_eq!(got, want);
        // Frames known to be mapped once are not looked up in kpagecount.
        let got = k.lookup(&[500, 4], &[true, false]).unwrap();
        assert_eq!(got[0].map_count, 1);
        assert_eq!(got[1].map_count, 1);
        assert_eq!(got[0].flags, 5000);
        let got = k.lookup(&[5], &[true]).unwrap();
        assert_eq!(
            got[0].map_count, 1,
            "kpagecount says 2, the pagemap said once"
        );
    }
}
