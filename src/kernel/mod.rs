//! Readers of kernel interfaces. Each file owns one interface, parses it with pure functions
//! that are unit-tested on captured text, and knows nothing about output or the Run.

pub mod bytes;
pub mod caps;
pub mod cn_proc;
pub mod proc;
