//! The house's rules, checked on the source tree (docs/DESIGN.md, "The map"): `model/` uses
//! nothing but std and serde, `report/` nothing of the crate but `model`, `units` and its own
//! rooms, `unsafe` stands only in the rooms the design lists, each for its reason, and nothing
//! calls a glibc function that the static release build leaves unresolved.
//!
//! Reads `src/` with std alone, as text: comments, strings and test-only code are left out
//! first (a report's tests may build their Run through the ledger; the compiled report does
//! not see it). A lexer of its own because no dependency is worth a check this small.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Rooms whose files may hold `unsafe`, and why (the same list as docs/DESIGN.md).
const UNSAFE_ROOMS: &[(&str, &str)] = &[
    (
        "kernel/",
        "the kernel interfaces themselves: system calls, mappings, BPF, netlink sockets",
    ),
    (
        "launch/",
        "the child between clone and exec makes raw system calls; signal masks",
    ),
    (
        "source/track/",
        "ptrace requests and wait statuses nix cannot decode, pidfds, the BPF records' plain-data types",
    ),
    (
        "source/malloc/",
        "the segment the shim writes is shared memory, read as atomics in place",
    ),
    (
        "main.rs",
        "`#[unsafe(link_section)]`: a function that runs before Rust's runtime opens /dev/null; the allocator that ends ste with a line, not an abort, when memory runs out",
    ),
];

/// The crate's top-level rooms a room may name through `crate::`, per checked room.
const IMPORTS: &[(&str, &[&str])] = &[
    ("model/", &["model"]),
    ("report/", &["model", "units", "report"]),
    // Never a source, the kernel or the face: sources may read the ledger (the accounts match
    // taskstats records against the recorder's processes), so the ledger must not see them.
    // The record file keeps the text layout (`report::style::Style`), is written through
    // `output` and drops its writer thread's privileges (`launch::privilege`).
    (
        "ledger/",
        &[
            "model", "units", "bus", "ledger", "output", "report", "launch",
        ],
    ),
    // Readers of kernel interfaces know nothing of the Run (their own types; the sources
    // convert them) nor of who reads them; the BPF loader logs its phases (`bus::phases`,
    // which imports nothing of the crate).
    ("kernel/", &["kernel", "bus"]),
];

/// Roots other than the crate a `model/` path may start with.
const MODEL_ROOTS: &[&str] = &["std", "core", "alloc", "serde", "serde_json"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`, relative to `src/`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path.strip_prefix(src()).unwrap().to_path_buf());
        }
    }
}

/// Whether `c[i]` starts a word, or follows only a `b` that does (`br"…"`).
fn word_start(c: &[char], i: usize) -> bool {
    let part = |k: usize| c[k].is_alphanumeric() || c[k] == '_';
    i == 0 || !part(i - 1) || (c[i - 1] == 'b' && (i == 1 || !part(i - 2)))
}

/// The code of a file with comments, string and char literals blanked (so their text cannot
/// look like code), line breaks kept.
fn code_only(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    while i < c.len() {
        let at = |j: usize| c.get(j).copied();
        if c[i] == '/' && at(i + 1) == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
                out.push(' ');
            }
        } else if c[i] == '/' && at(i + 1) == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && at(i + 1) == Some('*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == Some('/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if c[i] == 'r'
            && (at(i + 1) == Some('"') || at(i + 1) == Some('#'))
            && word_start(&c, i)
        {
            // A raw string: r"…" or r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while c.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if c.get(j) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            out.push('r');
            for _ in i + 1..=j {
                out.push(' ');
            }
            i = j + 1;
            let close: String = std::iter::once('"')
                .chain((0..hashes).map(|_| '#'))
                .collect();
            while i < c.len() && !c[i..].iter().collect::<String>().starts_with(&close) {
                blank(&mut out, c[i]);
                i += 1;
            }
            for _ in 0..close.len() {
                out.push(' ');
            }
            i += close.len();
        } else if c[i] == '"' {
            out.push(' ');
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < c.len() {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c[i] == '\'' {
            // A char literal ('x', '\n', '\u{..}'), or a lifetime ('a), which stays.
            let end = if at(i + 1) == Some('\\') {
                (i + 2..c.len()).find(|&k| c[k] == '\'')
            } else if at(i + 2) == Some('\'') {
                Some(i + 2)
            } else {
                None
            };
            match end {
                Some(e) => {
                    for &ch in &c[i..=e] {
                        blank(&mut out, ch);
                    }
                    i = e + 1;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// `code` without its `#[cfg(test)]` items: a `mod … { … }` block, or a `mod …;` whose file
/// is then test-only (returned in the second value, by module name).
fn without_tests(code: &str) -> (String, Vec<String>) {
    let mut out = code.to_string();
    let mut test_mods = Vec::new();
    while let Some(at) = out.find("#[cfg(test)]") {
        let after = at + "#[cfg(test)]".len();
        let tail = &out[after..];
        let item_end = match (tail.find('{'), tail.find(';')) {
            (Some(b), s) if s.is_none_or(|s| b < s) => {
                let mut depth = 0;
                let mut end = tail.len();
                for (k, ch) in tail[b..].char_indices() {
                    match ch {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = b + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (_, Some(s)) => {
                let words: Vec<&str> = tail[..s].split_whitespace().collect();
                if let Some(i) = words.iter().position(|w| *w == "mod") {
                    test_mods.push(words[i + 1].to_string());
                }
                s + 1
            }
            _ => tail.len(),
        };
        let blanked: String = out[at..after + item_end]
            .chars()
            .map(|ch| if ch == '\n' { '\n' } else { ' ' })
            .collect();
        out.replace_range(at..after + item_end, &blanked);
    }
    (out, test_mods)
}

struct File {
    /// Relative to `src/`, with `/`.
    path: String,
    /// The module path, e.g. `["report", "html"]` for report/html.rs or report/html/mod.rs.
    module: Vec<String>,
    code: String,
}

/// The crate's non-test code, file by file.
fn files() -> Vec<File> {
    let mut paths = Vec::new();
    rust_files(&src(), &mut paths);
    paths.sort();
    let mut parsed: Vec<(File, Vec<String>)> = paths
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(src().join(p)).unwrap();
            let (code, test_mods) = without_tests(&code_only(&text));
            let path = p.to_string_lossy().replace('\\', "/");
            let mut module: Vec<String> = path
                .trim_end_matches(".rs")
                .split('/')
                .map(str::to_string)
                .collect();
            if module
                .last()
                .is_some_and(|m| m == "mod" || m == "lib" || m == "main")
            {
                module.pop();
            }
            (File { path, module, code }, test_mods)
        })
        .collect();
    // Files declared `#[cfg(test)] mod x;` are test-only.
    let test_only: BTreeSet<Vec<String>> = parsed
        .iter()
        .flat_map(|(f, mods)| {
            mods.iter().map(|m| {
                let mut path = f.module.clone();
                path.push(m.clone());
                path
            })
        })
        .collect();
    parsed.retain(|(f, _)| !test_only.iter().any(|t| f.module.starts_with(t)));
    parsed.into_iter().map(|(f, _)| f).collect()
}

/// The first segment below the crate root of every path in `code` that starts at `crate::`
/// or climbs there with `super::`, with `use crate::{a, b::c}` groups opened; and the roots of
/// the paths that start elsewhere (`std::…`, `serde::…`, a local module).
fn path_roots(file: &File) -> (BTreeSet<String>, BTreeSet<String>) {
    let code = &file.code;
    let mut crate_rooms = BTreeSet::new();
    let mut other_roots = BTreeSet::new();
    let bytes = code.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while i < bytes.len() {
        if !(ident(bytes[i]) && (i == 0 || !(ident(bytes[i - 1]) || bytes[i - 1] == b':'))) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && ident(bytes[i]) {
            i += 1;
        }
        if !code[i..].starts_with("::") {
            continue;
        }
        let root = &code[start..i];
        // Resolve `crate::` and `super::…` to the module path they name.
        let mut base: Vec<String> = match root {
            "crate" => Vec::new(),
            "super" => {
                let mut m = file.module.clone();
                m.pop();
                m
            }
            "self" => file.module.clone(),
            _ => {
                if root.chars().next().is_some_and(|c| c.is_ascii_lowercase()) {
                    other_roots.insert(root.to_string());
                }
                continue;
            }
        };
        let mut j = i + 2;
        while code[j..].starts_with("super::") {
            base.pop();
            j += "super::".len();
        }
        let names: Vec<String> = if code[j..].starts_with('{') {
            // A group: its top-level items.
            let mut depth = 0;
            let mut item = String::new();
            let mut items = Vec::new();
            for ch in code[j..].chars() {
                match ch {
                    '{' => {
                        depth += 1;
                        if depth == 1 {
                            continue;
                        }
                    }
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            items.push(std::mem::take(&mut item));
                            break;
                        }
                    }
                    ',' if depth == 1 => {
                        items.push(std::mem::take(&mut item));
                        continue;
                    }
                    _ => {}
                }
                item.push(ch);
            }
            items
        } else {
            vec![code[j..].to_string()]
        };
        for name in names {
            let first: String = name
                .trim()
                .chars()
                .take_while(|&c| c.is_ascii_alphanumeric() || c == '_')
                .collect();
            let room = base.first().cloned().unwrap_or(first);
            if !room.is_empty() && room != "self" {
                crate_rooms.insert(room);
            }
        }
        i = j;
    }
    (crate_rooms, other_roots)
}

#[test]
fn the_checked_rooms_import_only_what_the_design_allows() {
    let files = files();
    assert!(
        files.iter().any(|f| f.path.starts_with("report/")),
        "no report/ under src/"
    );
    let mut wrong = Vec::new();
    for f in &files {
        for (room, allowed) in IMPORTS {
            if !f.path.starts_with(room) {
                continue;
            }
            let (crate_rooms, other_roots) = path_roots(f);
            for r in crate_rooms
                .iter()
                .filter(|r| !allowed.contains(&r.as_str()))
            {
                wrong.push(format!("src/{} names crate::{r}", f.path));
            }
            if *room == "model/" {
                // Its own submodules are local roots.
                let local: BTreeSet<String> = files
                    .iter()
                    .filter(|g| g.module.len() == 2 && g.module[0] == "model")
                    .map(|g| g.module[1].clone())
                    .collect();
                let primitive = |r: &str| {
                    matches!(
                        r,
                        "u8" | "u16"
                            | "u32"
                            | "u64"
                            | "u128"
                            | "usize"
                            | "i8"
                            | "i16"
                            | "i32"
                            | "i64"
                            | "i128"
                            | "isize"
                            | "f32"
                            | "f64"
                            | "str"
                            | "char"
                            | "bool"
                    )
                };
                for r in other_roots.iter().filter(|r| {
                    !MODEL_ROOTS.contains(&r.as_str()) && !local.contains(*r) && !primitive(r)
                }) {
                    wrong.push(format!("src/{} uses {r}::", f.path));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports the design forbids (docs/DESIGN.md, \"The map\"):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn unsafe_stands_only_in_the_rooms_the_design_allows() {
    let files = files();
    let design =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/DESIGN.md"))
            .unwrap();
    for (room, _) in UNSAFE_ROOMS {
        assert!(
            design.contains(&format!("`src/{room}`")),
            "docs/DESIGN.md does not list `src/{room}` among the rooms that may hold unsafe"
        );
    }
    let word = |code: &str| {
        code.match_indices("unsafe").any(|(at, _)| {
            let before = code[..at].chars().next_back();
            let after = code[at + "unsafe".len()..].chars().next();
            let part = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
            !part(before) && !part(after)
        })
    };
    let wrong: Vec<String> = files
        .iter()
        .filter(|f| {
            !UNSAFE_ROOMS
                .iter()
                .any(|(room, _)| f.path.starts_with(room))
        })
        .filter(|f| word(&f.code))
        .map(|f| format!("src/{}", f.path))
        .collect();
    assert!(
        wrong.is_empty(),
        "unsafe outside the rooms docs/DESIGN.md allows ({}):\n{}",
        UNSAFE_ROOMS
            .iter()
            .map(|(r, _)| *r)
            .collect::<Vec<_>>()
            .join(", "),
        wrong.join("\n")
    );
}

/// glibc functions that Rust's std declares weak (it checks them for null before a call). ste is
/// linked statically with fat LTO in its release build, where a direct call to one through the
/// `libc` crate merged with std's weak declaration and came out unresolved: a call to address
/// 0, in the release build only (`gettid` crashed every ptrace run, `statx` every run). ste
/// makes these system calls itself (`libc::syscall`). The names are the release binary's weak
/// undefined symbols (`nm`), less the runtime's own (`_ITM_*`, `__gmon_start__`, `__cxa_*`).
const WEAK_IN_STD: &[&str] = &[
    "gettid",
    "statx",
    "pidfd_getpid",
    "pidfd_spawnp",
    "posix_spawn_file_actions_addchdir",
    "posix_spawn_file_actions_addchdir_np",
];

/// The calls in `code` to a function of [`WEAK_IN_STD`] through the `libc` crate.
fn weak_calls(code: &str) -> Vec<&'static str> {
    WEAK_IN_STD
        .iter()
        .filter(|name| {
            let call = format!("libc::{name}");
            code.match_indices(&call)
                .any(|(at, _)| code[at + call.len()..].trim_start().starts_with('('))
        })
        .copied()
        .collect()
}

#[test]
fn no_call_to_a_glibc_function_std_declares_weak() {
    let wrong: Vec<String> = files()
        .iter()
        .flat_map(|f| {
            weak_calls(&f.code)
                .into_iter()
                .map(move |n| format!("src/{}: libc::{n}(…)", f.path))
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "calls that the static release build leaves unresolved (use libc::syscall):\n{}",
        wrong.join("\n")
    );
}

/// The checks must be able to fail: planted code is caught, and what only looks like it is not.
#[test]
fn the_checks_see_code_and_nothing_else() {
    let file = |path: &str, text: &str| {
        let (code, _) = without_tests(&code_only(text));
        let mut module: Vec<String> = path
            .trim_end_matches(".rs")
            .split('/')
            .map(str::to_string)
            .collect();
        if module.last().is_some_and(|m| m == "mod") {
            module.pop();
        }
        File {
            path: path.into(),
            module,
            code,
        }
    };
    let f = file(
        "report/x.rs",
        "use crate::{model::Run, kernel::proc};\nfn f() { super::super::ledger::g(); }\n",
    );
    let (rooms, _) = path_roots(&f);
    assert_eq!(
        rooms.into_iter().collect::<Vec<_>>(),
        ["kernel", "ledger", "model"]
    );
    let f = file(
        "report/x.rs",
        "// crate::kernel\nconst S: &str = \"crate::bus \\\" unsafe\";\nconst R: &str = r#\"crate::cli\"#;\nfn f<'a>(c: char) -> bool { c == '\"' }\n#[cfg(test)]\nmod tests { use crate::ledger; fn g() { unsafe {} } }\nuse super::text;\n",
    );
    let (rooms, _) = path_roots(&f);
    assert_eq!(rooms.into_iter().collect::<Vec<_>>(), ["report"]);
    assert!(!f.code.contains("unsafe"), "{}", f.code);
    // A call is caught; the struct of the same name, a comment and a string are not.
    let f = file(
        "kernel/z.rs",
        "fn f() { let s: libc::statx = z(); unsafe { libc::gettid () }; }\n// libc::statx(\nconst S: &str = \"libc::statx(\";\n",
    );
    assert_eq!(weak_calls(&f.code), ["gettid"]);
    let f = file(
        "model/y.rs",
        "use libc::c_int;\nfn f() -> u64 { u64::MAX }\n",
    );
    let (_, roots) = path_roots(&f);
    assert_eq!(roots.into_iter().collect::<Vec<_>>(), ["libc", "u64"]);
}
