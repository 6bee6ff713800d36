//! Readers of kernel interfaces. Each file owns one interface, parses it with pure functions
//! that are unit-tested on captured text, and knows nothing about output or the Run.

pub mod auxv;
pub mod cn_proc;
pub mod elf;
pub mod kpageflags;
pub mod pagemap;
pub mod proc;
pub mod smaps;
