//! The kernels of the matrix: Debian's own packages, fetched with apt under a configuration of
//! the runner's (its own sources, state and cache: nothing is installed or changed on the
//! host), the kernel image unpacked from the package and decompressed here, so that QEMU
//! boots the ELF kernel directly (under emulation, the kernel's own decompressor took ~8 s a
//! boot). Kept in a cache between runs (`STE_KERNEL_CACHE`, else `~/.cache/ste/kernels`) and
//! looked up again once it is a week old.
//!
//! Owns which kernels and where they come from; booting them is `host`'s.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// A kernel of the matrix: a name for the tables and the Debian suites it comes from (the
/// newest `linux-image-amd64` among them).
pub struct Kernel {
    pub name: &'static str,
    pub distribution: &'static str,
    sources: &'static [(&'static str, &'static str)],
}

const DEBIAN: &str = "http://deb.debian.org/debian";
const SECURITY: &str = "http://deb.debian.org/debian-security";

/// Debian 11's, Debian 12's and Debian 12's backported 6.12 (Debian 13's kernel).
pub const KERNELS: [Kernel; 3] = [
    Kernel {
        name: "5.10",
        distribution: "Debian 11 (bullseye)",
        sources: &[(DEBIAN, "bullseye"), (SECURITY, "bullseye-security")],
    },
    Kernel {
        name: "6.1",
        distribution: "Debian 12 (bookworm)",
        sources: &[(DEBIAN, "bookworm"), (SECURITY, "bookworm-security")],
    },
    Kernel {
        name: "6.12",
        distribution: "bookworm-backports (Debian 13's kernel)",
        sources: &[(DEBIAN, "bookworm-backports")],
    },
];

/// How long a fetched kernel is used before apt is asked for a newer one.
const FRESH: Duration = Duration::from_secs(7 * 24 * 3600);

/// A kernel ready to boot.
pub struct Fetched {
    /// The ELF kernel (or the compressed image, when it could not be decompressed here).
    pub image: PathBuf,
    /// The package and its version.
    pub package: String,
    /// Why an older kernel from the cache is used, or how the image is booted.
    pub note: Option<String>,
}

pub fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("STE_KERNEL_CACHE") {
        return d.into();
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
    Path::new(&home).join(".cache/ste/kernels")
}

fn run(cmd: &mut Command) -> Result<Vec<u8>, String> {
    let shown = format!("{cmd:?}");
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{shown}: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "{shown}: {}: {}",
            out.status,
            err.lines().last().unwrap_or("")
        ));
    }
    Ok(out.stdout)
}

/// The kept kernel of `dir`: its image and package.
fn kept(dir: &Path) -> Option<(PathBuf, String, Duration)> {
    let current = dir.join("current");
    let text = std::fs::read_to_string(&current).ok()?;
    let (image, package) = text.trim().split_once(' ')?;
    let image = dir.join(image);
    let age = std::fs::metadata(&current)
        .and_then(|m| m.modified())
        .ok()?
        .elapsed()
        .unwrap_or_default();
    image.exists().then(|| (image, package.to_string(), age))
}

/// The kernel `k`, from the cache while it is fresh, else from Debian's archive.
pub fn fetch(k: &Kernel, cache: &Path) -> Result<Fetched, String> {
    let dir = cache.join(k.name);
    let old = kept(&dir);
    if let Some((image, package, age)) = &old
        && *age < FRESH
    {
        return Ok(Fetched {
            image: image.clone(),
            package: package.clone(),
            note: None,
        });
    }
    match download(k, &dir) {
        Ok(f) => Ok(f),
        Err(why) => match old {
            Some((image, package, _)) => Ok(Fetched {
                image,
                package,
                note: Some(format!(
                    "apt could not look for a newer one ({why}): the cached kernel is used"
                )),
            }),
            None => Err(why),
        },
    }
}

/// An apt configuration of the runner's own in `dir/apt`: its sources, state and cache, no
/// part of the host's (`APT_CONFIG` names it, so apt reads no file under /etc/apt).
fn apt(k: &Kernel, dir: &Path) -> Result<PathBuf, String> {
    let a = dir.join("apt");
    for d in [
        "etc/apt.conf.d",
        "etc/preferences.d",
        "etc/sources.list.d",
        "state/lists/partial",
        "cache/archives/partial",
    ] {
        std::fs::create_dir_all(a.join(d)).map_err(|e| format!("{}: {e}", a.display()))?;
    }
    let keyring = "/usr/share/keyrings/debian-archive-keyring.gpg";
    let sources: String = k
        .sources
        .iter()
        .map(|(url, suite)| format!("deb [signed-by={keyring}] {url} {suite} main\n"))
        .collect();
    let p = |s: &str| a.join(s).display().to_string();
    let conf = format!(
        "Dir::Etc \"{}\";\nDir::Etc::SourceList \"{}\";\nDir::Etc::SourceParts \"{}\";\n\
         Dir::Etc::Parts \"{}\";\nDir::Etc::PreferencesParts \"{}\";\nDir::State \"{}\";\n\
         Dir::State::status \"{}\";\nDir::Cache \"{}\";\nAPT::Architecture \"amd64\";\n\
         APT::Sandbox::User \"root\";\nAcquire::Languages \"none\";\n",
        p("etc"),
        p("etc/sources.list"),
        p("etc/sources.list.d"),
        p("etc/apt.conf.d"),
        p("etc/preferences.d"),
        p("state"),
        p("state/status"),
        p("cache"),
    );
    let w = |name: &str, text: &str| {
        std::fs::write(a.join(name), text).map_err(|e| format!("{}: {e}", a.display()))
    };
    w("etc/sources.list", &sources)?;
    w("state/status", "")?;
    w("apt.conf", &conf)?;
    Ok(a.join("apt.conf"))
}

fn download(k: &Kernel, dir: &Path) -> Result<Fetched, String> {
    let conf = apt(k, dir)?;
    let apt = |program: &str, args: &[&str]| {
        let mut c = Command::new(program);
        c.env("APT_CONFIG", &conf).args(args);
        c
    };
    run(apt("apt-get", &["-qq", "update"]).current_dir(dir))?;
    // linux-image-amd64 depends on the version's own package.
    let policy = String::from_utf8_lossy(&run(&mut apt(
        "apt-cache",
        &["policy", "linux-image-amd64"],
    ))?)
    .into_owned();
    let candidate = policy
        .lines()
        .find_map(|l| l.trim().strip_prefix("Candidate: "))
        .filter(|v| *v != "(none)")
        .ok_or_else(|| format!("apt knows no linux-image-amd64 in {:?}", k.sources))?
        .to_string();
    let show = String::from_utf8_lossy(&run(&mut apt(
        "apt-cache",
        &["show", &format!("linux-image-amd64={candidate}")],
    ))?)
    .into_owned();
    let package = show
        .lines()
        .find_map(|l| l.strip_prefix("Depends: "))
        .and_then(|d| d.split([' ', ',']).next())
        .ok_or("linux-image-amd64 names no kernel package")?
        .to_string();
    let dl = dir.join("download");
    let _ = std::fs::remove_dir_all(&dl);
    std::fs::create_dir_all(&dl).map_err(|e| format!("{}: {e}", dl.display()))?;
    run(apt("apt-get", &["-qq", "download", &package]).current_dir(&dl))?;
    let deb = std::fs::read_dir(&dl)
        .map_err(|e| e.to_string())?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .ok_or("apt-get download left no .deb")?;
    // The package's data as a tar stream, and of it only the kernel image, to stdout.
    let vmlinuz = run(Command::new("sh").arg("-c").arg(format!(
        "dpkg-deb --fsys-tarfile '{}' | tar -xO --wildcards './boot/vmlinuz-*'",
        deb.display()
    )))?;
    let _ = std::fs::remove_dir_all(&dl);
    let version = format!("{package} {candidate}");
    let (name, bytes, note) = match decompress(&vmlinuz) {
        Ok(elf) => (format!("vmlinux-{package}"), elf, None),
        Err(why) => (
            format!("vmlinuz-{package}"),
            vmlinuz,
            Some(format!("booted compressed, slower: {why}")),
        ),
    };
    std::fs::write(dir.join(&name), &bytes).map_err(|e| format!("{}: {e}", dir.display()))?;
    std::fs::write(dir.join("current"), format!("{name} {version}\n"))
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(Fetched {
        image: dir.join(name),
        package: version,
        note,
    })
}

/// The compressed kernel inside a bzImage (boot protocol ≥ 2.08: `payload_offset` and
/// `payload_length` in the setup header, Documentation/arch/x86/boot.rst), without the 4-byte
/// uncompressed size the build appends to every format but gzip's, and the tool that
/// decompresses it.
pub fn payload(bz: &[u8]) -> Result<(&[u8], &'static str), String> {
    let u32_at = |o: usize| {
        bz.get(o..o + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    if bz.get(0x202..0x206) != Some(b"HdrS") {
        return Err("not a bzImage (no HdrS)".into());
    }
    let setup_sects = match bz.get(0x1f1).copied() {
        Some(0) => 4,
        Some(n) => n as usize,
        None => return Err("a truncated bzImage".into()),
    };
    let (Some(off), Some(len)) = (u32_at(0x248), u32_at(0x24c)) else {
        return Err("a truncated bzImage".into());
    };
    let start = (setup_sects + 1) * 512 + off as usize;
    let data = bz
        .get(start..start + len as usize)
        .ok_or("the payload is outside the image")?;
    let formats: [(&[u8], &str); 4] = [
        (b"\x1f\x8b", "gzip"),
        (b"\xfd7zXZ\0", "xz"),
        (b"\x28\xb5\x2f\xfd", "zstd"),
        (b"\x02\x21\x4c\x18", "lz4"),
    ];
    let (_, tool) = formats
        .iter()
        .find(|(magic, _)| data.starts_with(magic))
        .ok_or("the payload's compression is not one ste's runner knows")?;
    let data = if *tool == "gzip" {
        data
    } else {
        &data[..data.len().saturating_sub(4)]
    };
    Ok((data, tool))
}

/// The ELF kernel of a bzImage, decompressed with the format's tool (`xz`, `zstd`, …).
fn decompress(bz: &[u8]) -> Result<Vec<u8>, String> {
    let (data, tool) = payload(bz)?;
    let mut child = Command::new(tool)
        .args(["-dc"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{tool}: {e}"))?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let data = data.to_vec();
    let writer = std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &data));
    let out = child
        .wait_with_output()
        .map_err(|e| format!("{tool}: {e}"))?;
    let _ = writer.join();
    if !out.stdout.starts_with(b"\x7fELF") {
        return Err(format!("{tool} gave no ELF kernel ({})", out.status));
    }
    Ok(out.stdout)
}
