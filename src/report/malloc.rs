//! Text for `--malloc`: per process image, the calls and bytes of each malloc family, what the
//! program held (peak, at the end), its arenas and heaps, sbrk versus mmap, large mmapped
//! blocks, the thresholds, the largest gap between held and resident memory; then the images
//! the shim could not reach, and why.
//!
//! A pure function of the Run.

use crate::model::malloc::{AllocatorKind, ImageOrigin, MallocImage, MallocRun};
use crate::model::{Escaped, Run};
use crate::units::{bytes_human, duration_human, group_thousands, millis, percent};
use std::collections::HashMap;
use std::io::{self, Write};

/// Arenas listed one by one under an image.
const ARENAS_LISTED: usize = 8;

pub fn render(run: &Run, w: &mut dyn Write) -> io::Result<()> {
    let Some(m) = &run.malloc else {
        return Ok(());
    };
    let shown: Vec<&MallocImage> = m.images.iter().filter(|i| worth_showing(m, i)).collect();
    writeln!(
        w,
        "malloc: {} process image{} with ste's shim (every call counted){}",
        shown.len(),
        if shown.len() == 1 { "" } else { "s" },
        if m.uncovered.is_empty() {
            String::new()
        } else {
            format!("; {} without it (below)", m.uncovered.len())
        }
    )?;
    let lives = Lives::of(run, m);
    for img in shown {
        render_image(img, lives.of_image(img), w)?;
    }
    for u in &m.uncovered {
        writeln!(
            w,
            "  not reached: pid {} {} (at {}): {}",
            u.pid,
            Escaped::str(&u.program),
            millis(u.t_ns),
            u.reason.text()
        )?;
    }
    writeln!(w, "  SDT probes: {}", m.probes)?;
    super::malloc_sdt::render(m.sdt.as_ref(), w)?;
    writeln!(
        w,
        "  ste spent {} reading segments and checking execs outside its sampling rounds",
        duration_human(m.cpu_ns)
    )
}

/// What the text says of an image's held peak: the shim's figure, exact or bounded, and when;
/// from a record without it, the sampled one, said to be sampled.
pub(crate) fn peak_text(i: &MallocImage) -> String {
    let Some(p) = &i.held_peak else {
        return match (i.peak_held_bytes, i.peak_held_t_ns) {
            (Some(b), Some(t)) => format!("peak {} (sampled, at {})", bytes_human(b), millis(t)),
            _ => "peak not sampled".into(),
        };
    };
    let when = match (p.after_ns, p.by_ns) {
        (Some(a), Some(b)) if millis(a) == millis(b) => format!(", at {}", millis(b)),
        (Some(a), Some(b)) => format!(", between {} and {}", millis(a), millis(b)),
        _ => String::new(),
    };
    if p.exact {
        return format!(
            "peak {} (exact: every call counted, one thread{when})",
            bytes_human(p.high_bytes)
        );
    }
    format!(
        "peak between {} and {} (bounded: {} threads at once, each adding its own count to a shared one every {} it moves; the shared one last rose{})",
        bytes_human(p.low_bytes),
        bytes_human(p.high_bytes),
        p.threads_at_once,
        bytes_human(p.flush_bytes),
        if when.is_empty() {
            " (not dated)".to_string()
        } else {
            when.replacen(", at", " at", 1)
        }
    )
}

/// A forked child's image with no call, replaced by an exec at once, says nothing.
pub(crate) fn worth_showing(m: &MallocRun, i: &MallocImage) -> bool {
    !(i.origin == ImageOrigin::Fork
        && i.calls.total() == 0
        && m.images
            .iter()
            .any(|o| o.pid == i.pid && o.origin == ImageOrigin::Exec && o.t_ns >= i.t_ns))
}

/// How long each image ran: until the next image of its pid (an exec) or its process's end.
/// Indexed once, so a run of many processes with the shim is not scanned once per image.
struct Lives {
    /// Each pid's image start times, sorted.
    images: HashMap<i32, Vec<u64>>,
    /// Each pid's processes (pids are reused): start and end, in start order.
    processes: HashMap<i32, Vec<(u64, Option<u64>)>>,
}

impl Lives {
    fn of(run: &Run, m: &MallocRun) -> Lives {
        let mut images: HashMap<i32, Vec<u64>> = HashMap::new();
        for i in &m.images {
            images.entry(i.pid).or_default().push(i.t_ns);
        }
        images.values_mut().for_each(|v| v.sort_unstable());
        let mut processes: HashMap<i32, Vec<(u64, Option<u64>)>> = HashMap::new();
        for p in &run.processes {
            processes
                .entry(p.pid)
                .or_default()
                .push((p.start_ns, p.end_ns));
        }
        processes.values_mut().for_each(|v| v.sort_unstable());
        Lives { images, processes }
    }

    fn of_image(&self, i: &MallocImage) -> Option<u64> {
        let next = self.images.get(&i.pid).and_then(|v| {
            let after = v.partition_point(|&t| t <= i.t_ns);
            v.get(after).copied()
        });
        let end = next.or_else(|| {
            let v = self.processes.get(&i.pid)?;
            let started = v.partition_point(|&(start, _)| start <= i.t_ns);
            v.get(started.checked_sub(1)?)?.1
        })?;
        end.checked_sub(i.t_ns)
    }
}

fn render_image(i: &MallocImage, life_ns: Option<u64>, w: &mut dyn Write) -> io::Result<()> {
    let origin = match i.origin {
        ImageOrigin::Exec => "started",
        ImageOrigin::Fork => "forked",
    };
    writeln!(
        w,
        "  pid {} {} ({origin} at {}, {} thread{}{})",
        i.pid,
        Escaped::str(&i.program),
        millis(i.t_ns),
        i.threads,
        if i.threads == 1 { "" } else { "s" },
        if i.overflow_threads > 0 {
            format!(
                "; {} beyond the shim's slots, their counts approximate",
                i.overflow_threads
            )
        } else {
            String::new()
        }
    )?;
    match i.allocator.kind {
        AllocatorKind::Program => {
            return writeln!(
                w,
                "    its own malloc ({}): the shim sees none of its calls",
                Escaped::str(&i.allocator.path)
            );
        }
        AllocatorKind::Library => writeln!(
            w,
            "    allocator: {} (not glibc's: calls and bytes only)",
            Escaped::str(&i.allocator.path)
        )?,
        AllocatorKind::Glibc | AllocatorKind::Unknown => {}
    }
    let c = &i.calls;
    let b = &i.bytes;
    writeln!(
        w,
        "    calls: malloc {} ({} bytes asked), calloc {} ({}), realloc {} ({}), memalign family {} ({}), free {} ({} bytes given back){}{}",
        group_thousands(c.malloc),
        group_thousands(b.malloc),
        group_thousands(c.calloc),
        group_thousands(b.calloc),
        group_thousands(c.realloc),
        group_thousands(b.realloc),
        group_thousands(c.memalign),
        group_thousands(b.memalign),
        group_thousands(c.free),
        group_thousands(b.freed),
        if c.free_null > 0 {
            format!(", free(NULL) {}", group_thousands(c.free_null))
        } else {
            String::new()
        },
        if c.failed > 0 {
            format!(", {} failed", group_thousands(c.failed))
        } else {
            String::new()
        }
    )?;
    if i.allocator.kind == AllocatorKind::Library {
        return Ok(());
    }
    writeln!(
        w,
        "    mmapped blocks: {} served in all ({}){}",
        group_thousands(i.mmapped_calls),
        bytes_human(i.mmapped_bytes),
        i.last
            .as_ref()
            .map(|l| format!(
                ", {} in use at the last snapshot ({})",
                group_thousands(l.mmapped_blocks),
                bytes_human(l.mmapped_bytes)
            ))
            .unwrap_or_default()
    )?;
    let t = &i.thresholds;
    writeln!(
        w,
        "    thresholds: mmap {}, trim {} ({}; {} change{})",
        bytes_human(t.mmap_bytes),
        bytes_human(t.trim_bytes),
        if t.dynamic {
            "dynamic"
        } else {
            "fixed by mallopt or the environment"
        },
        t.changes,
        if t.changes == 1 { "" } else { "s" }
    )?;
    writeln!(
        w,
        "    held (chunk bytes of live blocks): {}; {} never given back",
        peak_text(i),
        i.held_at_end_bytes
            .map_or_else(|| "n/a".to_string(), bytes_human)
    )?;
    if i.snapshots > 0 || i.exit_snapshot_skipped {
        writeln!(
            w,
            "    snapshots: {} taken in the program's own threads, {} of its CPU{} (paced to stay near 1% of its time){}",
            group_thousands(i.snapshots),
            duration_human(i.snapshots_cost_ns),
            life_ns
                .filter(|&l| l > 0)
                .map_or_else(String::new, |l| format!(
                    ", {} of its {}",
                    percent(i.snapshots_cost_ns as f64 / l as f64),
                    duration_human(l)
                )),
            if i.exit_snapshot_skipped {
                "; the one at exit was skipped to stay within that"
            } else {
                ""
            }
        )?;
    }
    let Some(last) = &i.last else {
        return writeln!(
            w,
            "    arenas: no snapshot (no malloc call after ste asked, and the image did not end with exit(): it exec'd, called _exit or was killed)"
        );
    };
    match &last.arenas {
        Some(arenas) => {
            let heaps = crate::units::sum(arenas.iter().filter_map(|a| a.heaps));
            let free = crate::units::sum(arenas.iter().map(|a| a.free_bytes));
            writeln!(
                w,
                "    arenas ({}): {} (main: {} from sbrk; {} other{}: {} heap{}, {} mmap'd), {} free in them{}",
                if last.at_exit {
                    "at exit".to_string()
                } else {
                    format!("at {}", millis(last.t_ns))
                },
                arenas.len(),
                bytes_human(last.sbrk_bytes().unwrap_or(0)),
                arenas.len().saturating_sub(1),
                if arenas.len() == 2 { "" } else { "s" },
                heaps,
                if heaps == 1 { "" } else { "s" },
                bytes_human(last.arena_heap_bytes().unwrap_or(0)),
                bytes_human(free),
                if last.info_truncated {
                    " (malloc_info truncated: some arenas missing)"
                } else {
                    ""
                }
            )?;
            for a in arenas.iter().take(ARENAS_LISTED) {
                writeln!(
                    w,
                    "      arena {}: {} from the system (at most {}), {} free in {} chunk{}{}",
                    a.index,
                    bytes_human(a.system_bytes),
                    bytes_human(a.max_system_bytes),
                    bytes_human(a.free_bytes),
                    group_thousands(a.free_chunks),
                    if a.free_chunks == 1 { "" } else { "s" },
                    a.heaps
                        .map(|h| format!(", {h} heap{}", if h == 1 { "" } else { "s" }))
                        .unwrap_or_default()
                )?;
            }
            if arenas.len() > ARENAS_LISTED {
                writeln!(w, "      and {} more", arenas.len() - ARENAS_LISTED)?;
            }
        }
        None => writeln!(
            w,
            "    arenas: {} from the system in all (no malloc_info snapshot)",
            bytes_human(last.arena_bytes)
        )?,
    }
    if let Some(g) = &i.largest_gap
        && let (Some(held), Some(gap)) = (g.held_bytes, g.gap_bytes())
        && gap > 0
    {
        writeln!(
            w,
            "    held vs resident: at {}, held {}, resident anonymous {}: {} resident but not held (kept by malloc: {} free in the arenas at the last snapshot)",
            millis(g.t_ns),
            bytes_human(held),
            bytes_human(g.resident_anon_bytes),
            bytes_human(gap),
            bytes_human(last.free_bytes)
        )?;
    }
    Ok(())
}
