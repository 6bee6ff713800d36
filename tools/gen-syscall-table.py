#!/usr/bin/env python3
"""Generates src/source/syscalls/table.rs from a Linux source tree.

For each system call of x86_64, i386 (the compat ABI of x86_64) and aarch64:
  - its number and name, from the kernel's own tables
    (arch/x86/entry/syscalls/syscall_64.tbl, syscall_32.tbl, and for aarch64
    include/uapi/asm-generic/unistd.h expanded by the C preprocessor);
  - the file that defines it (the SYSCALL_DEFINEn / COMPAT_SYSCALL_DEFINEn of its entry point);
  - that file's MAINTAINERS entry, matched on F:/X: patterns the way
    scripts/get_maintainer.pl does (the deepest matching pattern wins);
  - a coarse group (Filesystem, Memory Mgmt., Process Mgmt., ...) from the file's path, by the
    rules in GROUPS below: one line per directory or file, not one per system call.
Also the errno names and messages (include/uapi/asm-generic/errno*.h and the kernel-internal
ones a tracer can see, include/linux/errno.h).

Usage:
  apt-get install linux-source-6.1
  tar xJf /usr/src/linux-source-6.1.tar.xz -C /tmp
  tools/gen-syscall-table.py /tmp/linux-source-6.1 > src/source/syscalls/table.rs

The output depends only on the source tree, so rerunning it on the same tree gives the same file.
"""

import os
import re
import subprocess
import sys

# Coarse groups, first match wins (so the more specific lines come first). A path ending in "/"
# is a directory prefix; anything else is a file-name prefix.
GROUPS = [
    ("kernel/futex/", "Futex"),
    ("kernel/time/", "Time"),
    ("kernel/sched/", "Scheduler"),
    ("kernel/signal.c", "Signal"),
    ("arch/x86/kernel/signal", "Signal"),
    ("arch/x86/ia32/ia32_signal.c", "Signal"),
    ("arch/arm64/kernel/signal", "Signal"),
    ("fs/signalfd.c", "Signal"),
    ("fs/timerfd.c", "Time"),
    ("fs/eventpoll.c", "Filesystem"),
    ("kernel/capability.c", "Security"),
    ("kernel/seccomp.c", "Security"),
    ("security/", "Security"),
    ("kernel/events/", "Perf Events"),
    ("kernel/bpf/", "BPF"),
    ("kernel/module/", "Modules"),
    ("kernel/kexec", "Kexec"),
    ("kernel/printk/", "Logging"),
    ("kernel/reboot.c", "Power Mgmt."),
    ("kernel/acct.c", "Accounting"),
    ("kernel/nsproxy.c", "Namespaces"),
    ("kernel/kcmp.c", "Process Mgmt."),
    ("kernel/", "Process Mgmt."),
    ("io_uring/", "io_uring"),
    ("fs/", "Filesystem"),
    ("mm/", "Memory Mgmt."),
    ("arch/x86/kernel/sys_x86_64.c", "Memory Mgmt."),
    ("arch/arm64/kernel/sys.c", "Memory Mgmt."),
    ("arch/x86/mm/", "Memory Mgmt."),
    ("arch/x86/kernel/ioport.c", "I/O Ports"),
    ("arch/x86/kernel/ldt.c", "Process Mgmt."),
    ("arch/x86/kernel/process", "Process Mgmt."),
    ("arch/x86/kernel/vm86_32.c", "Process Mgmt."),
    ("arch/x86/kernel/tls.c", "Process Mgmt."),
    ("arch/x86/um/", "Process Mgmt."),
    ("arch/x86/ia32/", "Process Mgmt."),
    ("arch/x86/kernel/", "Process Mgmt."),
    ("arch/arm64/kernel/", "Process Mgmt."),
    ("net/", "Network"),
    ("ipc/", "IPC"),
    ("block/", "Block I/O"),
    ("drivers/", "Drivers"),
]

# Files that define a system call for configurations other than the ones in this table (no MMU,
# other architectures' helpers); a definition elsewhere is preferred.
NOT_THESE_CONFIGS = ("mm/nommu.c", "kernel/time/posix-stubs.c")

# Files of compat wrappers that only convert arguments: the group and MAINTAINERS entry of such a
# system call are those of the native system call of the same name.
SHIMS = ("arch/x86/kernel/sys_ia32.c",)

ARCH_DIRS = {"x86_64": "arch/x86/", "i386": "arch/x86/", "aarch64": "arch/arm64/"}


def read(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
        return f.read()


def kernel_version(root):
    mk = read(root, "Makefile")
    v = {k: re.search(rf"^{k}\s*=\s*(\S*)", mk, re.M).group(1) for k in ("VERSION", "PATCHLEVEL", "SUBLEVEL")}
    return f"{v['VERSION']}.{v['PATCHLEVEL']}.{v['SUBLEVEL']}"


def tbl(root, rel, abis):
    """(nr, name, entry point) from an arch/*/syscall_*.tbl, for the given ABIs. The compat
    entry point (5th column) is the one that runs for a compat process."""
    out = []
    for line in read(root, rel).splitlines():
        line = line.split("#", 1)[0].split()
        if len(line) < 3 or line[1] not in abis:
            continue
        nr, name = int(line[0]), line[2]
        entry = line[4] if len(line) > 4 else (line[3] if len(line) > 3 else None)
        out.append((nr, name, entry))
    return out


def generic_unistd(root):
    """(nr, name, entry point) of the asm-generic table as a 64-bit arm64 kernel builds it,
    expanded by the C preprocessor rather than parsed by hand."""
    inc = ["-I", os.path.join(root, "arch/arm64/include/uapi"), "-I", os.path.join(root, "include/uapi")]
    hdr = os.path.join(root, "arch/arm64/include/uapi/asm/unistd.h")
    defs = subprocess.run(["cpp", "-dM", *inc, hdr], check=True, capture_output=True, text=True).stdout
    macros = dict(re.findall(r"^#define (__NR\w*) (.+)$", defs, re.M))

    def value(name, depth=0):
        v = macros.get(name, "").strip()
        if re.fullmatch(r"\d+", v):
            return int(v)
        m = re.fullmatch(r"\(?\s*(__NR\w+)\s*\+\s*(\d+)\s*\)?", v)
        if m and depth < 8:
            base = value(m.group(1), depth + 1)
            return None if base is None else base + int(m.group(2))
        if re.fullmatch(r"__NR\w+", v) and depth < 8:
            return value(v, depth + 1)
        return None

    names = {}
    for name in macros:
        if not name.startswith("__NR_") or name in ("__NR_syscalls", "__NR_arch_specific_syscall"):
            continue
        nr = value(name)
        if nr is not None:
            names.setdefault(nr, name[len("__NR_"):])
    src = '#define __SYSCALL(nr, call) STE_SYSCALL nr call\n#include <asm/unistd.h>\n'
    expanded = subprocess.run(
        ["cpp", "-P", *inc, "-"], input=src, check=True, capture_output=True, text=True
    ).stdout
    entries = {int(n): e for n, e in re.findall(r"STE_SYSCALL (\d+) (\w+)", expanded)}
    return [(nr, names[nr], entries.get(nr)) for nr in sorted(names) if nr in entries]


# SYSCALL32_DEFINEn is COMPAT_SYSCALL_DEFINEn under another name (include/linux/syscalls.h).
DEFINE = re.compile(r"^\s*(COMPAT_SYSCALL|SYSCALL32|SYSCALL)_DEFINE\d\(\s*(\w+)", re.M)


def definitions(root):
    """entry point (sys_x / compat_sys_x) -> [files that define it]."""
    defs = {}
    for top in ("arch", "block", "drivers", "fs", "io_uring", "ipc", "kernel", "mm", "net", "security"):
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for fn in sorted(filenames):
                if not fn.endswith(".c"):
                    continue
                full = os.path.join(dirpath, fn)
                rel = os.path.relpath(full, root)
                with open(full, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                if "SYSCALL" not in text:
                    continue
                for macro, name in DEFINE.findall(text):
                    entry = ("sys_" if macro == "SYSCALL" else "compat_sys_") + name
                    defs.setdefault(entry, []).append(rel)
    return defs


def pick_file(files, arch):
    """The defining file built for `arch` (a 64-bit kernel): not another architecture's, not a
    32-bit kernel's (`*_32.c`; i386 here is the compat ABI of an x86_64 kernel), not a variant
    for a configuration without an MMU or POSIX timers."""
    mine = ARCH_DIRS[arch]
    ok = [
        f
        for f in files
        if (not f.startswith("arch/") or (f.startswith(mine) and not f.endswith("_32.c")))
        and f not in NOT_THESE_CONFIGS
    ]
    return ok[0] if ok else None


def maintainers(root):
    """[(title, [F patterns as regexes with their depth], [X regexes])] in file order."""
    sections = []
    text = read(root, "MAINTAINERS")
    for block in re.split(r"\n\s*\n", text):
        lines = block.strip("\n").splitlines()
        fields = [l for l in lines if re.match(r"^[A-Z]:\t", l)]
        titles = [l for l in lines if not re.match(r"^[A-Z]:\t", l)]
        if not fields or not titles:
            continue
        title = titles[0].strip()
        f_pats = [pattern(root, l[3:].strip()) for l in fields if l.startswith("F:")]
        x_pats = [pattern(root, l[3:].strip()) for l in fields if l.startswith("X:")]
        sections.append((title, f_pats, x_pats))
    return sections


def pattern(root, value):
    """get_maintainer.pl's file pattern: '*' is '.*', '?' is '.', a directory gets a '/'."""
    raw = value
    if os.path.isdir(os.path.join(root, value)) and not value.endswith("/"):
        value += "/"
    rx = re.escape(value).replace(r"\*", ".*").replace(r"\?", ".")
    depth = value.count("/") + (0 if value.endswith("/") else 1)
    if raw.startswith("*"):
        depth = -1
    return (re.compile("^" + rx), value.endswith("/"), value.count("/"), depth)


def matches(path, pat):
    rx, is_dir, slashes, _ = pat
    if not rx.match(path):
        return False
    return is_dir or path.count("/") == slashes


def maintainer_of(path, sections, cache):
    """The MAINTAINERS section get_maintainer.pl lists first: the deepest matching F: pattern,
    so THE REST (F: *) only when nothing else matches."""
    if path in cache:
        return cache[path]
    best, best_depth = None, None
    for title, f_pats, x_pats in sections:
        if any(matches(path, x) for x in x_pats):
            continue
        for p in f_pats:
            # Deepest first; at equal depth a pattern naming the file beats a wildcard
            # (get_maintainer.pl leaves such ties in hash order).
            rank = (p[3], "*" not in p[0].pattern and "?" not in p[0].pattern and not p[1])
            if matches(path, p) and (best_depth is None or rank > best_depth):
                best, best_depth = title, rank
    cache[path] = best
    return best


def group_of(path):
    for prefix, group in GROUPS:
        if path.startswith(prefix):
            return group
    return "Other"


def errnos(root):
    out = {}
    for rel in ("include/uapi/asm-generic/errno-base.h", "include/uapi/asm-generic/errno.h", "include/linux/errno.h"):
        for name, num, msg in re.findall(r"^#define\s+(E\w+)\s+(\d+)[ \t]*(?:/\*\s*(.*?)\s*\*/)?", read(root, rel), re.M):
            out.setdefault(int(num), (name, msg))
    return sorted(out.items())


def rust_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    version = kernel_version(root)
    defs = definitions(root)
    sections = maintainers(root)
    cache = {}
    # Entry points the kernel only stubs out (`COND_SYSCALL(x)` with no definition anywhere).
    stubs = {
        p + n
        for n in re.findall(r"^COND_SYSCALL(?:_COMPAT)?\((\w+)\)", read(root, "kernel/sys_ni.c"), re.M)
        for p in ("sys_", "compat_sys_")
        if p + n not in defs
    }
    tables = {
        "X86_64": ("x86_64", tbl(root, "arch/x86/entry/syscalls/syscall_64.tbl", ("common", "64"))),
        "I386": ("i386", tbl(root, "arch/x86/entry/syscalls/syscall_32.tbl", ("i386",))),
        "AARCH64": ("aarch64", generic_unistd(root)),
    }
    out = []
    w = out.append
    w(f"//! System calls of Linux {version}: numbers, names, defining files, MAINTAINERS entries and")
    w("//! coarse groups, per architecture.")
    w("//!")
    w("//! GENERATED by `tools/gen-syscall-table.py` from the Linux source tree; do not edit. Regenerate")
    w("//! with the commands in that script's header.")
    w("")
    w("use super::TableEntry;")
    w("")
    w(f'/// The kernel release the table was generated from.')
    w(f"pub const KERNEL_VERSION: &str = {rust_str(version)};")
    unresolved = []
    for const, (arch, rows) in tables.items():
        w("")
        w(f"/// {arch}, by number.")
        w("#[rustfmt::skip]")
        w(f"pub static {const}: &[TableEntry] = &[")
        seen = set()
        for nr, name, entry in sorted(rows):
            if nr in seen:
                continue
            seen.add(nr)
            file = None
            not_implemented = entry in (None, "sys_ni_syscall") or entry in stubs
            if not not_implemented:
                file = pick_file(defs.get(entry, []), arch)
                if file is None and entry.startswith("compat_sys_"):
                    file = pick_file(defs.get(entry[len("compat_"):], []), arch)
                if file is None:
                    unresolved.append(f"{arch} {nr} {name} {entry}")
            owner = file
            if file in SHIMS:
                owner = pick_file(defs.get("sys_" + name, []), arch) or file
            subsystem = maintainer_of(owner, sections, cache) if owner else None
            group = group_of(owner) if owner else "Not implemented" if not_implemented else "Other"
            some = lambda v: f"Some({rust_str(v)})" if v else "None"
            w(f"    TableEntry::new({nr}, {rust_str(name)}, {rust_str(group)}, {some(subsystem)}, {some(file)}),")
        w("];")
    w("")
    w("/// errno values a system call can return (the kernel-internal ones included), by number:")
    w("/// (number, name, message).")
    w("#[rustfmt::skip]")
    w("pub static ERRNO: &[(i32, &str, &str)] = &[")
    for num, (name, msg) in errnos(root):
        w(f"    ({num}, {rust_str(name)}, {rust_str(msg)}),")
    w("];")
    sys.stdout.write("\n".join(out) + "\n")
    for u in unresolved:
        print(f"gen-syscall-table: no definition found for {u}", file=sys.stderr)


if __name__ == "__main__":
    main()
