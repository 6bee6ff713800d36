//! ste's own BPF loader: the kernel's BTF read, ste's BPF object read, its maps created, its
//! programs relocated, loaded and attached, and its maps and ring buffer read.
//!
//! Why by hand: aya (the pure-Rust loader ste used) parses the kernel's whole BTF
//! (/sys/kernel/btf/vmlinux, 5.5 MB) in `EbpfLoader::new` with no way to skip it, and a second
//! time to attach `tp_btf` programs, then probes features and relocates CO-RE: tens of
//! milliseconds of start-up and tens of MiB of memory (bench/README.md) for an object that
//! needs a dozen numbers from the BTF. libbpf-rs would need a C toolchain, libelf and zlib to build, which a plain `cargo
//! build` must not. What ste needs is small: the bpf(2) commands for maps, BTF, programs and
//! attachments (`sys`), a one-pass BTF reader (`btf`), a reader of its one object (`object`,
//! on the `object` crate), the loader (`loader`), typed map access (`maps`) and the ring-buffer
//! consumer (`ringbuf`).
//!
//! Must not know ste's programs, maps or records: `track::ebpf` does.

pub mod btf;
pub mod loader;
pub mod maps;
pub mod object;
pub mod ringbuf;
pub mod sys;

use std::fmt;

/// Why the kernel's BTF could not be used or the object could not be loaded, in words for the
/// user (what was being done, and the kernel's answer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(pub String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

fn err<T>(msg: impl Into<String>) -> Result<T, Error> {
    Err(Error(msg.into()))
}
