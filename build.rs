//! Builds ste's malloc shim (`shim/ste_malloc.c`) into a shared object that ste embeds and
//! writes out for `--malloc` (LD_PRELOAD needs a file). The C compiler is the one the `cc`
//! crate finds (gcc or clang on any Linux with a toolchain). Without one, the build still
//! succeeds: the embedded object is empty and `--malloc` says why at run time.
//!
//! It also sets `cfg(ste_test_root)` when the build runs as root: the tests that need root
//! (running ste as root, or dropping to `nobody` with setpriv) carry
//! `#[cfg_attr(not(ste_test_root), ignore = "needs root: …")]`, so `cargo test` as another user
//! runs everything else and lists those as ignored, with the reason, instead of failing them.
//! A build tree belongs to the user who made it (cargo writes it), so the cfg cannot go stale.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=shim/ste_malloc.c");
    println!("cargo:rerun-if-changed=shim/ste_malloc.h");
    println!("cargo::rustc-check-cfg=cfg(ste_test_root)");
    if building_as_root() {
        println!("cargo::rustc-cfg=ste_test_root");
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let so = out.join("ste_malloc.so");
    let status = match build_shim(&so) {
        Ok(()) => "ok".to_string(),
        Err(why) => {
            std::fs::write(&so, b"").expect("write an empty shim");
            println!("cargo:warning=--malloc will be unavailable in this build: {why}");
            why
        }
    };
    // One line, as rustc-env wants it.
    let status: String = status
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    println!("cargo:rustc-env=STE_MALLOC_SHIM_STATUS={status}");
}

/// Whether this build script runs with effective uid 0 (`/proc/self/status`, std alone: the
/// build script has no libc).
fn building_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|ids| ids.split_whitespace().nth(1).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

fn build_shim(so: &Path) -> Result<(), String> {
    let compiler = cc::Build::new()
        .cargo_metadata(false)
        .try_get_compiler()
        .map_err(|e| format!("no C compiler found ({e})"))?;
    // Intel's microcode for the JCC erratum (Skylake to Cascade Lake) stops caching decoded
    // instructions around any jump that crosses or ends on a 32-byte boundary; malloc's and
    // free's fast paths are a handful of jumps run billions of times, and padding them out of
    // the way made the malloc loop measurably faster on such a CPU (bench/memory.sh; the
    // figures are in bench/README.md). GNU as takes the option through -Wa, clang's driver takes it as is; an
    // assembler without it (binutils before 2.34) builds the shim unpadded.
    let x86 = matches!(
        std::env::var("CARGO_CFG_TARGET_ARCH").as_deref(),
        Ok("x86_64" | "x86")
    );
    let jcc = match (x86, compiler.is_like_clang()) {
        (false, _) => None,
        (true, true) => Some("-mbranches-within-32B-boundaries"),
        (true, false) => Some("-Wa,-mbranches-within-32B-boundaries"),
    };
    let compile = |extra: Option<&str>| {
        Command::new(compiler.path())
            .args(extra)
            .args([
                "-O2",
                // Keep the counters' adds scalar: vectorising two adds costs more than it saves.
                "-fno-tree-vectorize",
                "-fPIC",
                "-shared",
                "-fvisibility=hidden",
                "-ftls-model=initial-exec",
                "-Wall",
                "-Wextra",
                "-o",
            ])
            .arg(so)
            .arg("shim/ste_malloc.c")
            .args(["-ldl", "-pthread"])
            .output()
            .map_err(|e| format!("cannot run {}: {e}", compiler.path().display()))
    };
    let mut output = compile(jcc)?;
    if !output.status.success() && jcc.is_some() {
        output = compile(None)?;
    }
    if !output.status.success() {
        return Err(format!(
            "{} failed on shim/ste_malloc.c: {}",
            compiler.path().display(),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(())
}
