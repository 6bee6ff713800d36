//! Deploying the shim: the shim as build.rs built it, written into the run directory, and the
//! environment that preloads it into the command.
//!
//! Owns the shim's bytes and its place; the directory and its file operations are `rundir`'s.
//! Must not read a segment: `observer` does.

use super::*;

/// The shim, as build.rs built it (empty when no C compiler was found).
pub(super) static SHIM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/ste_malloc.so"));
/// Why it is empty, or `ok`.
pub(super) const SHIM_STATUS: &str = env!("STE_MALLOC_SHIM_STATUS");

/// The name of the shim in the run directory.
pub(super) const SHIM_NAME: &str = "ste_malloc.so";

/// The run directory, with the shim written out. Create it before the command is prepared.
pub struct Setup {
    pub(super) dir: RunDir,
    pub(super) shim: PathBuf,
}

impl Setup {
    /// `command`: the user and group the command runs as, when not ste's (under sudo), who
    /// must be able to create segments in the directory.
    pub fn new(command: Option<(u32, u32)>) -> Result<Setup> {
        if SHIM.is_empty() {
            bail!(
                "--malloc is unavailable: this ste was built without its malloc shim ({SHIM_STATUS}); install a C compiler (gcc) and rebuild ste"
            );
        }
        let bases = ["/dev/shm".into(), std::env::temp_dir()];
        let dir = RunDir::create(&bases, command, &[(SHIM_NAME, SHIM, 0o644)])?;
        let shim = dir.path().join(SHIM_NAME);
        Ok(Setup { dir, shim })
    }

    /// The environment the command starts with: the shim first in `LD_PRELOAD` (before any
    /// preload of the user's, so it sees their allocator as the one it forwards to).
    pub fn env(&self) -> EnvOverrides {
        let mut preload = OsString::from(self.shim.as_os_str());
        if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
            preload.push(":");
            preload.push(old);
        }
        vec![
            ("LD_PRELOAD".into(), preload),
            ("STE_MALLOC_DIR".into(), self.dir.path().into()),
        ]
    }
}
