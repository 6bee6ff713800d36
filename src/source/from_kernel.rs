//! The conversions from the kernel readers' own types to the model's: `kernel/` knows nothing
//! of the Run, so the sources turn what it read into model values here, in one place.
//!
//! Owns only these conversions; reads nothing and emits nothing.

use crate::kernel::proc::IoCounters;
use crate::model::{Arg, Io};

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
