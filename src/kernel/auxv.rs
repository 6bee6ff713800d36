//! Readers of `/proc/PID/auxv` and `/proc/PID/environ`: whether a program runs in secure mode
//! (`AT_SECURE`: setuid, setgid or file capabilities, where ld.so ignores `LD_PRELOAD` paths),
//! and what its environment holds. See getauxval(3), ld.so(8).
//!
//! Pure parsers and a reader taking the /proc root. Knows nothing of the malloc shim.

use std::io;
use std::path::Path;

const AT_NULL: u64 = 0;
const AT_SECURE: u64 = 23;

/// `AT_SECURE` from auxv bytes (pairs of native-endian 64-bit words); `None` if absent.
pub fn parse_secure(auxv: &[u8]) -> Option<bool> {
    for pair in auxv.chunks_exact(16) {
        let key = u64::from_ne_bytes(pair[..8].try_into().ok()?);
        let value = u64::from_ne_bytes(pair[8..].try_into().ok()?);
        match key {
            AT_SECURE => return Some(value != 0),
            AT_NULL => return None,
            _ => {}
        }
    }
    None
}

/// The value of `name` in environ bytes (`K=V\0K=V\0`).
pub fn env_value<'a>(environ: &'a [u8], name: &str) -> Option<&'a [u8]> {
    environ.split(|&b| b == 0).find_map(|kv| {
        kv.strip_prefix(name.as_bytes())
            .and_then(|rest| rest.strip_prefix(b"="))
    })
}

/// Reads `<root>/<pid>/<file>`.
pub fn read(root: &Path, pid: i32, file: &str) -> io::Result<Vec<u8>> {
    std::fs::read(root.join(pid.to_string()).join(file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secure_flag_from_auxv() {
        // This test's own auxv: a plain program, not secure.
        let mine = std::fs::read("/proc/self/auxv").unwrap();
        assert_eq!(parse_secure(&mine), Some(false));
        let words = |v: &[u64]| -> Vec<u8> { v.iter().flat_map(|w| w.to_ne_bytes()).collect() };
        assert_eq!(parse_secure(&words(&[6, 4096, 23, 1, 0, 0])), Some(true));
        assert_eq!(parse_secure(&words(&[6, 4096, 0, 0, 23, 1])), None);
        assert_eq!(parse_secure(&[]), None);
    }

    #[test]
    fn environment_values() {
        let env = b"PATH=/bin\0LD_PRELOAD=/tmp/a.so:/x.so\0LD_PRELOADX=no\0";
        assert_eq!(env_value(env, "LD_PRELOAD"), Some(&b"/tmp/a.so:/x.so"[..]));
        assert_eq!(env_value(env, "HOME"), None);
        assert_eq!(env_value(b"", "PATH"), None);
    }
}
