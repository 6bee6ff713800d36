//! Parser of glibc's `malloc_info()` XML (malloc/malloc.c `__malloc_info`): one `<heap nr=N>`
//! element per arena with its free chunks (`<total type="fast|rest">`), the memory it got from
//! the system (`<system type="current|max">`), its address space and, for arenas other than
//! the main one, its heaps (`<aspace type="subheaps">`); then totals, among them the mmapped
//! blocks (`<total type="mmap">`).
//!
//! Pure; line-based, because glibc prints one element per line and nothing else nests. Written
//! by hand: the format is seven element names with `type`, `count` and `size` attributes, far
//! less than an XML crate handles.

use crate::model::malloc::Arena;

/// What ste takes from one malloc_info output.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Info {
    pub arenas: Vec<Arena>,
    /// mmapped blocks in use, and their bytes.
    pub mmap_count: u64,
    pub mmap_bytes: u64,
}

/// The value of attribute `name` in one element line (`type="rest" count="3"`).
fn attr<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let key = format!("{name}=\"");
    let at = line.find(&key)? + key.len();
    let end = line[at..].find('"')? + at;
    Some(&line[at..end])
}

fn num(line: &str, name: &str) -> u64 {
    attr(line, name).and_then(|v| v.parse().ok()).unwrap_or(0)
}

pub fn parse(xml: &str) -> Info {
    let mut info = Info::default();
    let mut cur: Option<Arena> = None;
    for line in xml.lines().map(str::trim) {
        if line.starts_with("<heap ") {
            cur = Some(Arena {
                index: num(line, "nr") as u32,
                ..Default::default()
            });
            continue;
        }
        if line == "</heap>" {
            if let Some(a) = cur.take() {
                info.arenas.push(a);
            }
            continue;
        }
        let kind = attr(line, "type").unwrap_or("");
        match (&mut cur, line.split(' ').next().unwrap_or("")) {
            (Some(a), "<total") if kind == "fast" || kind == "rest" => {
                a.free_bytes += num(line, "size");
                a.free_chunks += num(line, "count");
            }
            (Some(a), "<system") if kind == "current" => a.system_bytes = num(line, "size"),
            (Some(a), "<system") if kind == "max" => a.max_system_bytes = num(line, "size"),
            (Some(a), "<aspace") if kind == "total" => a.address_space_bytes = num(line, "size"),
            (Some(a), "<aspace") if kind == "subheaps" => a.heaps = Some(num(line, "size")),
            (None, "<total") if kind == "mmap" => {
                info.mmap_count = num(line, "count");
                info.mmap_bytes = num(line, "size");
            }
            _ => {}
        }
    }
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    /// malloc_info(0, stdout) of a C program on this machine (glibc 2.36): the main arena with
    /// freed chunks of seven sizes, three thread arenas of one heap each, one mmapped block.
    const CAPTURE: &str = r#"<malloc version="1">
<heap nr="0">
<sizes>
  <size from="81" to="81" total="5265" count="65"/>
  <size from="145" to="145" total="9280" count="64"/>
  <size from="209" to="209" total="13585" count="65"/>
  <size from="273" to="273" total="17472" count="64"/>
  <size from="337" to="337" total="21905" count="65"/>
  <size from="401" to="401" total="25664" count="64"/>
  <size from="465" to="465" total="29760" count="64"/>
</sizes>
<total type="fast" count="0" size="0"/>
<total type="rest" count="452" size="250995"/>
<system type="current" size="405504"/>
<system type="max" size="405504"/>
<aspace type="total" size="405504"/>
<aspace type="mprotect" size="405504"/>
</heap>
<heap nr="1">
<sizes>
  <unsorted from="9217" to="27329" total="36546" count="2"/>
</sizes>
<total type="fast" count="0" size="0"/>
<total type="rest" count="3" size="62290"/>
<system type="current" size="135168"/>
<system type="max" size="135168"/>
<aspace type="total" size="135168"/>
<aspace type="mprotect" size="135168"/>
<aspace type="subheaps" size="1"/>
</heap>
<heap nr="2">
<sizes>
  <unsorted from="9217" to="27329" total="36546" count="2"/>
</sizes>
<total type="fast" count="0" size="0"/>
<total type="rest" count="3" size="62290"/>
<system type="current" size="135168"/>
<system type="max" size="135168"/>
<aspace type="total" size="135168"/>
<aspace type="mprotect" size="135168"/>
<aspace type="subheaps" size="1"/>
</heap>
<heap nr="3">
<sizes>
  <unsorted from="9217" to="27329" total="36546" count="2"/>
</sizes>
<total type="fast" count="0" size="0"/>
<total type="rest" count="3" size="62290"/>
<system type="current" size="135168"/>
<system type="max" size="135168"/>
<aspace type="total" size="135168"/>
<aspace type="mprotect" size="135168"/>
<aspace type="subheaps" size="1"/>
</heap>
<total type="fast" count="0" size="0"/>
<total type="rest" count="461" size="437865"/>
<total type="mmap" count="1" size="1052672"/>
<system type="current" size="811008"/>
<system type="max" size="811008"/>
<aspace type="total" size="811008"/>
<aspace type="mprotect" size="811008"/>
</malloc>
"#;

    #[test]
    fn arenas_from_a_capture() {
        let i = parse(CAPTURE);
        assert_eq!(i.arenas.len(), 4);
        let main = &i.arenas[0];
        assert_eq!(main.index, 0);
        assert_eq!(main.system_bytes, 405_504);
        assert_eq!(main.free_bytes, 250_995);
        assert_eq!(main.free_chunks, 452);
        assert_eq!(main.heaps, None);
        for a in &i.arenas[1..] {
            assert_eq!(a.system_bytes, 135_168);
            assert_eq!(a.heaps, Some(1));
            assert_eq!(a.free_bytes, 62_290);
        }
        assert_eq!((i.mmap_count, i.mmap_bytes), (1, 1_052_672));
        // The totals add up as glibc printed them.
        let free: u64 = i.arenas.iter().map(|a| a.free_bytes).sum();
        assert_eq!(free, 437_865);
    }

    #[test]
    fn truncated_output_keeps_complete_arenas() {
        let cut = &CAPTURE[..CAPTURE.find("<heap nr=\"2\">").unwrap() + 20];
        assert_eq!(parse(cut).arenas.len(), 2);
        assert_eq!(parse(""), Info::default());
    }
}
