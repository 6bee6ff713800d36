//! Readers of kernel interfaces. Each file owns one interface, parses it with pure functions
//! that are unit-tested on captured text, and knows nothing about output or the Run.

pub mod affinity;
pub mod alarm;
pub mod auxv;
pub mod bpf;
pub mod bytes;
pub mod calls;
pub mod caps;
pub mod cgroup;
pub mod cn_proc;
pub mod elf;
pub mod exe;
pub mod kpageflags;
pub mod netlink;
pub mod pagemap;
pub mod proc;
pub mod release;
pub mod smaps;
pub mod statmount;
pub mod taskstats;

/// Decodes a hex string: tests paste binary kernel captures (pagemap words, ELF notes) as hex.
#[cfg(test)]
pub(crate) fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}
