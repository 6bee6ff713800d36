//! cgroupfs: where this process's cgroups are (`/proc/self/cgroup` + `/proc/self/mountinfo`),
//! and the files ste reads in a cgroup (memory, CPU and pids figures), as pure parsers and a
//! reader pointed at an injectable /proc root.
//!
//! Owns the knowledge of both hierarchies: v1 (one mount per controller set: `memory`,
//! `cpuacct`, `pids` …, files such as `memory.max_usage_in_bytes`) and v2 (one `cgroup2` mount,
//! `memory.peak`, `cpu.stat`, `pids.peak`). Knows nothing of ste's own group (naming, joining,
//! removing): that is `account::group`.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

/// One line of `/proc/PID/cgroup`: `ID:CONTROLLERS:PATH` (v2: `0::PATH`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    pub hierarchy: u32,
    /// Controllers of a v1 hierarchy (`name=systemd` included as is); empty for v2.
    pub controllers: Vec<String>,
    pub path: String,
}

pub fn parse_proc_cgroup(text: &str) -> Vec<Membership> {
    text.lines()
        .filter_map(|line| {
            let mut it = line.splitn(3, ':');
            let hierarchy = it.next()?.parse().ok()?;
            let controllers = it.next()?;
            let path = it.next()?.to_string();
            Some(Membership {
                hierarchy,
                controllers: controllers
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(str::to_string)
                    .collect(),
                path,
            })
        })
        .collect()
}

/// A cgroup filesystem mount from `/proc/PID/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// The cgroup path mounted there (`/` unless inside a container).
    pub root: String,
    pub mount_point: PathBuf,
    pub v2: bool,
    /// v1: the controllers named in the super options (`memory`, `cpu`, `name=systemd`).
    pub options: Vec<String>,
}

/// The `cgroup` and `cgroup2` mounts of mountinfo(5) text.
pub fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let (pre, post) = line.split_once(" - ")?;
            let f: Vec<&str> = pre.split(' ').collect();
            let mut p = post.split(' ');
            let fstype = p.next()?;
            let _source = p.next()?;
            let options = p.next().unwrap_or("");
            let v2 = match fstype {
                "cgroup2" => true,
                "cgroup" => false,
                _ => return None,
            };
            Some(Mount {
                root: unescape(f.get(3)?),
                mount_point: PathBuf::from(unescape(f.get(4)?)),
                v2,
                options: options.split(',').map(str::to_string).collect(),
            })
        })
        .collect()
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 4 <= b.len()
            && let Ok(v) =
                u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 4]).unwrap_or(""), 8)
        {
            out.push(v);
            i += 4;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One hierarchy this process belongs to, with the directory of its own cgroup there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    pub v2: bool,
    /// v1 controllers (empty for v2).
    pub controllers: Vec<String>,
    /// The directory of the process's own cgroup.
    pub dir: PathBuf,
    /// The own cgroup is the top of the hierarchy as mounted here (its root, or a container's
    /// root): it has no parent ste could reach.
    pub top: bool,
}

/// Joins the memberships with the mounts: for each hierarchy, the directory of the own cgroup.
/// A hierarchy that is not mounted, or whose mounted root does not contain the path (another
/// namespace), is left out.
pub fn own_hierarchies(memberships: &[Membership], mounts: &[Mount]) -> Vec<Hierarchy> {
    memberships
        .iter()
        .filter_map(|m| {
            let v2 = is_v2(m);
            let mount = mounts.iter().find(|mt| {
                mt.v2 == v2
                    && (v2
                        || m.controllers
                            .iter()
                            .all(|c| mt.options.iter().any(|o| o == c)))
            })?;
            let rel = if mount.root == "/" {
                m.path.as_str()
            } else {
                m.path.strip_prefix(mount.root.as_str())?
            };
            let rel = rel.trim_start_matches('/');
            Some(Hierarchy {
                v2,
                controllers: m.controllers.clone(),
                dir: mount.mount_point.join(rel),
                top: rel.is_empty(),
            })
        })
        .collect()
}

/// The hierarchies of the process whose /proc entry is `proc_pid` (e.g. `/proc/self`): the v2
/// one and the v1 ones holding a controller of `v1_wanted`.
pub fn hierarchies_of(proc_pid: &Path, v1_wanted: &[&str]) -> io::Result<Vec<Hierarchy>> {
    let cg = std::fs::read_to_string(proc_pid.join("cgroup"))?;
    let memberships = wanted(&cg, v1_wanted);
    // This process's own: where each hierarchy is usually mounted, if each is there, spares
    // reading every mount's line of mountinfo (~0.1 ms of each run's start-up here).
    let usual = (proc_pid == Path::new("/proc/self"))
        .then(|| mounted_where_usual(&memberships))
        .flatten();
    let mounts = match usual {
        Some(m) => m,
        None => parse_mountinfo(&std::fs::read_to_string(proc_pid.join("mountinfo"))?),
    };
    Ok(own_hierarchies(&memberships, &mounts))
}

/// The memberships of `/proc/PID/cgroup` text in the v2 hierarchy and in the v1 ones holding a
/// controller of `v1_wanted`.
fn wanted(proc_cgroup: &str, v1_wanted: &[&str]) -> Vec<Membership> {
    parse_proc_cgroup(proc_cgroup)
        .into_iter()
        .filter(|m| is_v2(m) || m.controllers.iter().any(|c| v1_wanted.contains(&&**c)))
        .collect()
}

fn is_v2(m: &Membership) -> bool {
    m.hierarchy == 0 && m.controllers.is_empty()
}

/// The mounts of `memberships`' hierarchies at the places distributions mount them
/// (`/sys/fs/cgroup/unified` or `/sys/fs/cgroup` for v2, `/sys/fs/cgroup/CONTROLLERS` for v1),
/// each checked with statmount(2): the type, the mount point itself (not a directory under
/// another mount) and, for v1, the controllers. `None` when any is not there, or the kernel
/// cannot say: mountinfo then tells where they are.
fn mounted_where_usual(memberships: &[Membership]) -> Option<Vec<Mount>> {
    memberships
        .iter()
        .map(|m| {
            let v2 = is_v2(m);
            let candidates = if v2 {
                vec![
                    "/sys/fs/cgroup/unified".to_string(),
                    "/sys/fs/cgroup".to_string(),
                ]
            } else {
                vec![format!("/sys/fs/cgroup/{}", m.controllers.join(","))]
            };
            candidates.into_iter().find_map(|place| {
                let f = crate::kernel::statmount::of_path(Path::new(&place))?;
                let options: Vec<String> = f.options.split(',').map(str::to_string).collect();
                let fits = f.fs_type == if v2 { "cgroup2" } else { "cgroup" }
                    && f.point == place
                    && m.controllers.iter().all(|c| options.contains(c));
                fits.then(|| Mount {
                    root: f.root,
                    mount_point: PathBuf::from(f.point),
                    v2,
                    options,
                })
            })
        })
        .collect()
}

/// A flat keyed file (`memory.stat`, `cpu.stat`, `cpuacct.stat`): `key value` per line.
pub fn parse_keyed(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_ascii_whitespace();
            let k = it.next()?;
            let v = it.next()?.parse().ok()?;
            Some((k.to_string(), v))
        })
        .collect()
}

/// v1 `cpuacct.usage_all` (`cpu user system`, then a line per CPU, in ns): the user and system
/// sums, which are `cpuacct.usage_user` and `cpuacct.usage_sys`.
pub fn parse_usage_all(text: &str) -> Option<(u64, u64)> {
    let mut lines = text.lines();
    if lines.next()?.split_ascii_whitespace().collect::<Vec<_>>() != ["cpu", "user", "system"] {
        return None;
    }
    let mut sums = None;
    for l in lines.filter(|l| !l.trim().is_empty()) {
        let mut it = l.split_ascii_whitespace().skip(1);
        let user: u64 = it.next()?.parse().ok()?;
        let system: u64 = it.next()?.parse().ok()?;
        let (u, s) = sums.unwrap_or((0u64, 0u64));
        sums = Some((u.checked_add(user)?, s.checked_add(system)?));
    }
    // No CPU line: no split, rather than one of 0 and 0 (which gives all the time to user).
    sums
}

/// A file holding one number (`memory.max_usage_in_bytes`, `pids.peak`, `cpuacct.usage`).
pub fn parse_number(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// Anonymous and file-backed (page cache) memory charged to a group, from `memory.stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryStat {
    pub anon_bytes: u64,
    /// Page cache, shared memory (tmpfs) included.
    pub file_bytes: u64,
    /// Kernel memory (v2 only: v1 keeps it in `memory.kmem.usage_in_bytes`).
    pub kernel_bytes: Option<u64>,
}

/// `memory.stat` of v1 (`total_rss`, `total_cache`: hierarchical) or v2 (`anon`, `file`).
pub fn memory_stat(keyed: &BTreeMap<String, u64>, v2: bool) -> Option<MemoryStat> {
    if v2 {
        Some(MemoryStat {
            anon_bytes: *keyed.get("anon")?,
            file_bytes: *keyed.get("file")?,
            kernel_bytes: keyed.get("kernel").copied(),
        })
    } else {
        Some(MemoryStat {
            anon_bytes: *keyed.get("total_rss")?,
            file_bytes: *keyed.get("total_cache")?,
            kernel_bytes: None,
        })
    }
}

/// Reads `dir/file` as text. A cgroup file says its size is 0, so `read_to_string` asks for
/// the size and the position first, then reads in steps growing from 32 bytes (`memory.stat`:
/// 8 reads); a page-sized buffer takes nearly every such file in one read, then the read of 0
/// that ends it. The end of a run reads seven of these in a row, the accounts thread one or
/// three at every tick.
pub fn read(dir: &Path, file: &str) -> io::Result<String> {
    use std::io::Read;
    let mut f = std::fs::File::open(dir.join(file))?;
    text(|b, _| f.read(b))
}

/// A file's whole text, from `read(buffer, offset)` calls.
fn text(read: impl FnMut(&mut [u8], u64) -> io::Result<usize>) -> io::Result<String> {
    let mut buf = Vec::new();
    let n = super::proc::read_all(read, &mut buf)?;
    buf.truncate(n);
    String::from_utf8(buf).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// A cgroup file held open and read again from its start (`pread` at offset 0: kernfs makes
/// the text afresh, exactly as for a new open). A file read every tick is held: opening it
/// walked the path and revalidated the group's directory each time, more than the read itself.
pub struct HeldFile {
    file: std::fs::File,
}

impl HeldFile {
    pub fn open(dir: &Path, file: &str) -> io::Result<HeldFile> {
        Ok(HeldFile {
            file: std::fs::File::open(dir.join(file))?,
        })
    }

    /// The file's whole text, read now.
    pub fn read(&self) -> io::Result<String> {
        use std::os::unix::fs::FileExt;
        text(|b, at| self.file.read_at(b, at))
    }

    /// The file as one number; `None` when unreadable or not a number.
    pub fn read_number(&self) -> Option<u64> {
        self.read().ok().and_then(|t| parse_number(&t))
    }
}

/// Reads `dir/file` as one number; `None` when missing or not a number.
pub fn read_number(dir: &Path, file: &str) -> Option<u64> {
    read(dir, file).ok().and_then(|t| parse_number(&t))
}

/// The pids listed in `dir/cgroup.procs`.
pub fn procs(dir: &Path) -> io::Result<Vec<i32>> {
    Ok(read(dir, "cgroup.procs")?
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// /proc/self/cgroup on this machine (hybrid: v1 controllers, v2 at /sys/fs/cgroup/unified).
    const PROC_CGROUP: &str = "9:name=systemd:/\n8:pids:/\n7:blkio:/\n6:freezer:/\n5:devices:/\n4:memory:/process_api/5f6206966c85662728aa047696da6a1b\n3:cpuset:/\n2:cpuacct:/\n1:cpu:/\n0::/\n";

    const MOUNTINFO: &str = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn own_cgroup_directories_on_a_hybrid_machine() {
        let h = own_hierarchies(&parse_proc_cgroup(PROC_CGROUP), &parse_mountinfo(MOUNTINFO));
        let dir = |c: &str| {
            h.iter()
                .find(|h| h.controllers.iter().any(|x| x == c))
                .map(|h| h.dir.clone())
        };
        assert_eq!(
            dir("memory").unwrap(),
            Path::new("/sys/fs/cgroup/memory/process_api/5f6206966c85662728aa047696da6a1b")
        );
        assert_eq!(dir("pids").unwrap(), Path::new("/sys/fs/cgroup/pids"));
        assert_eq!(dir("cpuacct").unwrap(), Path::new("/sys/fs/cgroup/cpuacct"));
        // blkio is not mounted in this excerpt: left out.
        assert_eq!(dir("blkio"), None);
        let v2 = h.iter().find(|h| h.v2).unwrap();
        assert_eq!(v2.dir, Path::new("/sys/fs/cgroup/unified"));
        assert!(v2.top);
        assert!(!h.iter().find(|h| h.controllers == ["memory"]).unwrap().top);
    }

    #[test]
    fn pure_v2_in_a_container() {
        let cg = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/x.scope\n";
        let mi = "25 1 0:22 /user.slice /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n";
        let h = own_hierarchies(&parse_proc_cgroup(cg), &parse_mountinfo(mi));
        assert_eq!(
            h[0].dir,
            Path::new("/sys/fs/cgroup/user-1000.slice/user@1000.service/app.slice/x.scope")
        );
        assert!(h[0].v2);
        assert!(!h[0].top);
        // The container's own root is its top: nothing above it is visible.
        let h = own_hierarchies(&parse_proc_cgroup("0::/user.slice\n"), &parse_mountinfo(mi));
        assert_eq!(h[0].dir, Path::new("/sys/fs/cgroup"));
        assert!(h[0].top);
    }

    #[test]
    fn memory_stat_v1_and_v2() {
        // v1 memory.stat captured on this machine (excerpt).
        let v1 = parse_keyed(
            "cache 391573504\nrss 2240512\nrss_huge 0\nshmem 0\nmapped_file 364544\ntotal_cache 391573504\ntotal_rss 2240512\n",
        );
        let m = memory_stat(&v1, false).unwrap();
        assert_eq!(m.anon_bytes, 2240512);
        assert_eq!(m.file_bytes, 391573504);
        let v2 = parse_keyed("anon 1048576\nfile 4096\nkernel 8192\nsock 0\n");
        let m = memory_stat(&v2, true).unwrap();
        assert_eq!(
            (m.anon_bytes, m.file_bytes, m.kernel_bytes),
            (1048576, 4096, Some(8192))
        );
        assert_eq!(memory_stat(&parse_keyed(""), true), None);
    }

    #[test]
    fn numbers_and_cpu_stat() {
        assert_eq!(parse_number("631242752\n"), Some(631242752));
        assert_eq!(parse_number("max\n"), None);
        // cpu.stat of /sys/fs/cgroup/unified on this machine.
        let k = parse_keyed(
            "usage_usec 1471140730\nuser_usec 1175319910\nsystem_usec 295820820\nnice_usec 0\n",
        );
        assert_eq!(k["user_usec"], 1175319910);
    }

    #[test]
    fn the_usual_places_give_what_mountinfo_gives() {
        let want = ["memory", "cpuacct", "pids"];
        let cg = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        let memberships = wanted(&cg, &want);
        if crate::kernel::statmount::of_path(Path::new("/")).is_none() {
            eprintln!("skipped: statmount(2) does not answer here (it needs Linux 6.8)");
            return;
        }
        let usual = mounted_where_usual(&memberships);
        // A machine that mounts its hierarchies elsewhere has nothing to compare.
        if usual.is_none() {
            eprintln!("skipped: the cgroup hierarchies are not all at /sys/fs/cgroup/…");
            return;
        }
        let fast = hierarchies_of(Path::new("/proc/self"), &want).unwrap();
        // Another path to the same process: read from mountinfo.
        let by_pid = Path::new("/proc").join(std::process::id().to_string());
        let slow = hierarchies_of(&by_pid, &want).unwrap();
        assert_eq!(fast, slow);
        assert!(!fast.is_empty());
    }

    #[test]
    fn usage_all_sums_what_usage_user_and_usage_sys_say() {
        // Captured here, with usage_user 38755155708856 and usage_sys 15008492046147 read
        // right after.
        let text =
            "cpu user system\n0 15036859138838 7373460457291\n1 23718296570018 7635031588856\n";
        assert_eq!(
            parse_usage_all(text),
            Some((38_755_155_708_856, 15_008_492_046_147))
        );
        assert_eq!(parse_usage_all("cpu user\n0 1\n"), None);
        assert_eq!(parse_usage_all("cpu user system\n0 1\n"), None);
        assert_eq!(parse_usage_all("cpu user system\n"), None);
    }

    #[test]
    fn a_file_is_read_whole_past_the_first_buffer() {
        let dir = tempfile::tempdir().unwrap();
        let text = "x".repeat(10_000) + "\nend\n";
        std::fs::write(dir.path().join("memory.stat"), &text).unwrap();
        assert_eq!(read(dir.path(), "memory.stat").unwrap(), text);
        std::fs::write(dir.path().join("pids.peak"), "7\n").unwrap();
        assert_eq!(read_number(dir.path(), "pids.peak"), Some(7));
        assert!(read(dir.path(), "missing").is_err());
    }

    #[test]
    fn mountinfo_escapes() {
        assert_eq!(unescape("/a\\040b"), "/a b");
        assert_eq!(unescape("/plain"), "/plain");
    }
}
