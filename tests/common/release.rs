//! The release binary (`target/<triple>/release/ste`), which `.ci/run` builds before the
//! tests, and whether it is as new as every input of its build: a test that runs it must run
//! the sources it tests. Shared by `tests/it/release.rs` and the kernel matrix
//! (`tests/kernels/`), each including this file.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The newest modification time of the files under `dir` (recursively).
fn newest(dir: &Path) -> SystemTime {
    let mut t = SystemTime::UNIX_EPOCH;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        let m = if p.is_dir() {
            newest(&p)
        } else {
            e.metadata()
                .and_then(|m| m.modified())
                .unwrap_or(SystemTime::UNIX_EPOCH)
        };
        t = t.max(m);
    }
    t
}

/// The release binary beside the debug one this test was built with, if it is as new as
/// every input of the build; else why not.
pub fn fresh_release_binary() -> Result<PathBuf, String> {
    let built = Path::new(env!("CARGO_BIN_EXE_ste"))
        .parent()
        .and_then(Path::parent)
        .map(|target| target.join("release").join("ste"))
        .ok_or("no target directory")?;
    let when = std::fs::metadata(&built)
        .and_then(|m| m.modified())
        .map_err(|_| format!("{} is missing", built.display()))?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let inputs = [
        "src",
        "bpf",
        "shim",
        "build.rs",
        "Cargo.toml",
        "Cargo.lock",
        ".cargo",
    ];
    let stale: Vec<&str> = inputs
        .iter()
        .filter(|i| {
            let p = root.join(i);
            let t = if p.is_dir() {
                newest(&p)
            } else {
                std::fs::metadata(&p)
                    .and_then(|m| m.modified())
                    .unwrap_or(SystemTime::UNIX_EPOCH)
            };
            t > when
        })
        .copied()
        .collect();
    if !stale.is_empty() {
        return Err(format!(
            "{} is older than {}",
            built.display(),
            stale.join(", ")
        ));
    }
    Ok(built)
}
