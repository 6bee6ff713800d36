//! The kernel matrix: ste's static release binary run on Debian's own kernels (5.10, 6.1,
//! 6.12, booted under QEMU from an initramfs this runner builds) and on this machine's kernel,
//! as root and as `nobody`, under each tracker, on workloads with known answers; counts are
//! checked exactly and every memory figure against its own label, and what each kernel is
//! known not to do is written down, with the reason, in `expect.rs`. The results come out as
//! a table (and with `--readme`, the README's table of what works on which kernel).
//!
//!   cargo test --test kernels                       the whole matrix
//!   cargo test --test kernels -- --kernels 5.10,host --readme
//!   STE_KERNEL_CASES=fill,true cargo test --test kernels
//!   STE_KERNEL_STE=target/x86_64-unknown-linux-gnu/debug/ste cargo test --test kernels
//!   STE_KERNEL_APPEND=loglevel=7 STE_KERNEL_TIMEOUT=120 cargo test --test kernels
//!
//! Each guest's whole console is kept in `target/<triple>/tmp/kernels/NAME.console`.
//!
//! Not in plain `cargo test` (`test = false` in Cargo.toml: a matrix takes minutes); `.ci/run`
//! runs it after the release build. The same binary is the guest's `/init`: started as the
//! first process of a machine, it runs the cases there (`guest`) and sends what it saw over
//! the console. Its rooms: `fetch` (the kernels, through apt), `cpio` (the initramfs's
//! format), `host` (the machines booted, the results judged and printed), `guest`, `cases`
//! (the cases, their answers and checks), `expect` (each kernel's known limits).

mod cases;
mod cpio;
mod expect;
mod fetch;
mod guest;
mod host;

use std::process::ExitCode;

fn main() -> ExitCode {
    if std::process::id() == 1 {
        return guest::pid1();
    }
    host::main(std::env::args().skip(1).collect())
}
