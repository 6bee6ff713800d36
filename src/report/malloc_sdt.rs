//! Text for the hits of glibc's `memory_*` SDT probes (`--malloc` with uprobes): one line, per
//! probe name its hits and, for the probes with a size argument, the sizes seen.
//!
//! A pure function of the Run's malloc part.

use crate::model::malloc::{SdtCounts, SdtProbeCount};
use crate::units::group_thousands;
use std::io::{self, Write};

/// Distinct sizes listed per probe.
const SIZES_LISTED: usize = 6;

pub fn render(sdt: Option<&SdtCounts>, w: &mut dyn Write) -> io::Result<()> {
    let Some(c) = sdt else {
        return Ok(());
    };
    let probes: Vec<String> = c.probes.iter().map(probe).collect();
    writeln!(
        w,
        "  SDT probe hits: {} [uprobes on libc:memory_* probes, exact]{}",
        if probes.is_empty() {
            "none".into()
        } else {
            probes.join(", ")
        },
        if c.sizes_dropped > 0 {
            format!(
                "; {} sizes not listed (the kernel's table was full)",
                group_thousands(c.sizes_dropped)
            )
        } else {
            String::new()
        }
    )
}

fn probe(p: &SdtProbeCount) -> String {
    let name = p.name.strip_prefix("memory_").unwrap_or(&p.name);
    let mut out = format!("{name} {}", group_thousands(p.hits));
    if let Some(sum) = p.size_sum_bytes
        && p.hits > 0
    {
        let mut sizes: Vec<String> = p
            .sizes
            .iter()
            .take(SIZES_LISTED)
            .map(|s| format!("{} ×{}", group_thousands(s.bytes), group_thousands(s.hits)))
            .collect();
        if p.sizes.len() > SIZES_LISTED {
            sizes.push("…".into());
        }
        out += &format!(
            " (sizes {}; {} bytes in all",
            sizes.join(", "),
            group_thousands(sum)
        );
        if p.sized_hits < p.hits {
            out += &format!(
                "; {} hits' size not read",
                group_thousands(p.hits - p.sized_hits)
            );
        }
        out += ")";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::malloc::SdtSize;

    #[test]
    fn one_line_of_hits() {
        let c = SdtCounts {
            objects: Vec::new(),
            probes: vec![
                SdtProbeCount {
                    name: "memory_arena_new".into(),
                    hits: 3,
                    size_arg: Some(2),
                    sized_hits: 3,
                    size_sum_bytes: Some(16384),
                    sizes: vec![
                        SdtSize {
                            bytes: 4096,
                            hits: 2,
                        },
                        SdtSize {
                            bytes: 4096 * 2,
                            hits: 1,
                        },
                    ],
                },
                SdtProbeCount {
                    name: "memory_arena_reuse_wait".into(),
                    hits: 1200,
                    size_arg: None,
                    sized_hits: 0,
                    size_sum_bytes: None,
                    sizes: Vec::new(),
                },
            ],
            sizes_dropped: 0,
        };
        let mut out = Vec::new();
        render(Some(&c), &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "  SDT probe hits: arena_new 3 (sizes 4,096 ×2, 8,192 ×1; 16,384 bytes in all), arena_reuse_wait 1,200 [uprobes on libc:memory_* probes, exact]\n"
        );
    }
}
