//! The conversions from the kernel readers' own types to the model's: `kernel/` knows nothing
//! of the Run, so the sources turn what it read into model values here, in one place.
//!
//! Owns only these conversions; reads nothing and emits nothing.

use crate::kernel::proc::IoCounters;
use crate::model::maps::PAGE_FLAGS;
use crate::model::{Arg, Io};

/// The bits of `/proc/kpageflags` ste keeps: those of the model's table. The other "kernel
/// hacking" bits (32–41: reserved, mappedtodisk — which is also anon-exclusive on anonymous
/// pages —, private, arch, …) vary with kernel internals and would split ranges for no
/// reader's benefit.
pub const KEPT_PAGE_FLAGS: u64 = {
    let mut m = 0u64;
    let mut i = 0;
    while i < PAGE_FLAGS.len() {
        m |= 1 << PAGE_FLAGS[i].0;
        i += 1;
    }
    m
};

/// The letters of the set kpageflags bits, in bit order (`UlMab`), as the model stores them.
pub fn page_flag_letters(flags: u64) -> String {
    PAGE_FLAGS
        .iter()
        .filter(|(b, _, _)| flags & (1 << b) != 0)
        .map(|(_, c, _)| *c)
        .collect()
}

/// An argv as `kernel::proc` reads it (byte strings) as the model's arguments.
pub fn argv(args: Vec<Vec<u8>>) -> Vec<Arg> {
    args.into_iter().map(Arg).collect()
}

/// `/proc/PID/io` counters as the model's `Io`.
pub fn io(c: IoCounters) -> Io {
    let IoCounters {
        rchar_bytes,
        wchar_bytes,
        syscr,
        syscw,
        read_bytes,
        write_bytes,
        cancelled_write_bytes,
    } = c;
    Io {
        rchar_bytes,
        wchar_bytes,
        syscr,
        syscw,
        read_bytes,
        write_bytes,
        cancelled_write_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::kpageflags::{ANON, THP};

    #[test]
    fn letters_of_captured_page_flags() {
        // Read as root: the head and a tail page of an anonymous THP, with bit 34
        // (mappedtodisk, i.e. anon-exclusive) set, which ste drops.
        let head = 0x40240d828u64;
        let tail = 0x402415828u64;
        assert_eq!(page_flag_letters(head & KEPT_PAGE_FLAGS), "UlMabHti");
        assert_eq!(page_flag_letters(tail & KEPT_PAGE_FLAGS), "UlMabTti");
        assert_eq!(head & !KEPT_PAGE_FLAGS, 1 << 34);
        assert!(head & THP != 0 && head & ANON != 0);
    }
}
