//! The memory-over-time chart of the text report: Unicode block columns with eighth-cell
//! vertical resolution, a y axis in binary units and a time axis, for runs of a millisecond or
//! of hours alike.
//!
//! A pure function of the samples. The curve is sample-and-hold (a value stays until the next
//! sample) and each column shows the highest value within its time slice, so no peak between
//! columns disappears.
//!
//! Its arithmetic cannot wrap or loop on any Run (a hostile record's times and sizes near
//! `u64::MAX`, any width): products are taken in `u128`, the time axis has at most one tick
//! per label's room, and the plot is at most `style::MAX_WIDTH` columns.

use crate::model::Sample;
use crate::units::{bytes_human, duration_human};

const EIGHTHS: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// Renders the chart as lines of at most `width` columns; `height` rows of plot.
pub fn render(
    samples: &[Sample],
    end_ns: u64,
    width: usize,
    height: usize,
    color: bool,
) -> Vec<String> {
    let Some(max) = samples.iter().map(|s| s.pss_bytes).max() else {
        return vec![
            "(no memory samples: the tree ended before the first sampling round)".to_string(),
        ];
    };
    let height = height.max(2);
    let top = nice_ceiling(max.max(1));
    let labels = [
        (0usize, bytes_human(top)),
        (
            height / 2,
            bytes_human(top - (u128::from(top) * (height / 2) as u128 / height as u128) as u64),
        ),
    ];
    let label_w = labels
        .iter()
        .map(|(_, l)| l.chars().count())
        .max()
        .unwrap_or(1)
        .max(3);
    let plot_w = width
        .min(crate::report::style::MAX_WIDTH)
        .saturating_sub(label_w + 2)
        .max(10);
    let end_ns = end_ns
        .max(samples.last().map_or(1, |s| s.t_ns.saturating_add(1)))
        .max(1);
    let columns = column_values(samples, end_ns, plot_w);

    let mut lines = Vec::with_capacity(height + 2);
    let (on, off) = if color {
        ("\x1b[36m", "\x1b[0m")
    } else {
        ("", "")
    };
    for row in 0..height {
        let label = labels
            .iter()
            .find(|(r, _)| *r == row)
            .map(|(_, l)| l.as_str())
            .unwrap_or("");
        let tick = if label.is_empty() { '│' } else { '┤' };
        let level_from_bottom = (height - 1 - row) as u64;
        let mut bar = String::with_capacity(plot_w * 3);
        for v in &columns {
            let ch = match v {
                None => ' ',
                Some(v) => {
                    // Height in eighths of a row, rounded, so a value never reads higher than it is.
                    let eighths = (u128::from(*v) * height as u128 * 8 / u128::from(top)) as u64;
                    let in_row = eighths.saturating_sub(level_from_bottom * 8).min(8);
                    EIGHTHS[in_row as usize]
                }
            };
            bar.push(ch);
        }
        lines.push(format!(
            "{label:>label_w$} {tick}{on}{}{off}",
            bar.trim_end()
        ));
    }
    let (axis, tick_labels) = time_axis(end_ns, plot_w);
    lines.push(format!("{:>label_w$} └{axis}", "0"));
    lines.push(format!("{:>label_w$}  {tick_labels}", ""));
    lines
}

/// The highest held value within each of `width` equal slices of [0, end_ns).
fn column_values(samples: &[Sample], end_ns: u64, width: usize) -> Vec<Option<u64>> {
    let mut cols = vec![None; width];
    let mut i = 0;
    let mut held: Option<u64> = None;
    for (c, col) in cols.iter_mut().enumerate() {
        let t1 = (u128::from(end_ns) * (c as u128 + 1) / width as u128) as u64;
        let mut best = held;
        while i < samples.len() && samples[i].t_ns < t1 {
            held = Some(samples[i].pss_bytes);
            best = best.max(held);
            i += 1;
        }
        *col = best;
    }
    cols
}

/// Rounds up to 1, 2, 2.5, 5 or 10 times a power of 1024 × a power of ten, so the top label
/// reads well (`1 GiB`, `250 MiB`, `20 KiB`).
fn nice_ceiling(v: u64) -> u64 {
    let mut unit = 1u64;
    while v / unit >= 1024 {
        unit *= 1024;
    }
    let scaled = v as f64 / unit as f64;
    // The power of ten at or below `scaled`, by multiplying: `log10` and `powf` were ste's
    // only calls into libm, which every start would otherwise load and relocate.
    let mut mag = 1.0;
    while mag * 10.0 <= scaled {
        mag *= 10.0;
    }
    let step = [1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|&m| m >= scaled - 1e-9)
        .unwrap_or(10.0 * mag);
    ((step * unit as f64).ceil() as u64).max(v)
}

/// The time axis line (`─` with `┬` at ticks) and the tick labels below it.
fn time_axis(end_ns: u64, width: usize) -> (String, String) {
    // The largest tick count whose labels fit, on a 1-2-5 step. In u128: the step that fits
    // a time near u64::MAX is above it.
    let longest = duration_human(end_ns).chars().count() + 2;
    let max_ticks = (width / longest.max(6)).max(1) as u128;
    let end = u128::from(end_ns);
    let mut step = 1u128;
    let step = loop {
        if let Some(s) = [1, 2, 5]
            .into_iter()
            .map(|m| m * step)
            .find(|s| end / s <= max_ticks)
        {
            break s;
        }
        step *= 10;
    };
    let mut axis: Vec<char> = vec!['─'; width];
    let mut labels: Vec<char> = vec![' '; width];
    // At most `max_ticks + 1` ticks.
    let mut t = 0u128;
    while t <= end {
        let col = (t * width as u128 / end) as usize;
        let text: Vec<char> = duration_human(t as u64).chars().collect();
        if col < width {
            axis[col] = '┬';
        }
        // A label starts under its tick, or ends at the right edge when it would overflow.
        let start = col.min(width.saturating_sub(text.len()));
        let free = start == 0 || labels[start - 1] == ' ';
        if free
            && start + text.len() <= width
            && labels[start..start + text.len()].iter().all(|&c| c == ' ')
        {
            labels[start..start + text.len()].copy_from_slice(&text);
        }
        t += step;
    }
    let labels: String = labels.into_iter().collect();
    (axis.into_iter().collect(), labels.trim_end().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t_ns: u64, pss: u64) -> Sample {
        Sample {
            t_ns,
            pss_bytes: pss,
            ..Default::default()
        }
    }

    #[test]
    fn nice_tops() {
        assert_eq!(nice_ceiling(1 << 30), 1 << 30);
        assert_eq!(
            nice_ceiling(1100 << 20),
            (1.2 * (1u64 << 30) as f64).ceil() as u64
        );
        assert_eq!(nice_ceiling(90_911_744), 100 << 20);
        assert_eq!(nice_ceiling(1000), 1000);
        // Each decade's edges: 1, 9 → 10, 10, 99 → 100, 1023 → 1.2 × 1000.
        assert_eq!(nice_ceiling(1), 1);
        assert_eq!(nice_ceiling(9), 10);
        assert_eq!(nice_ceiling(10), 10);
        assert_eq!(nice_ceiling(99), 100);
        assert_eq!(nice_ceiling(1023), 1200);
        assert_eq!(nice_ceiling(1024), 1024);
    }

    #[test]
    fn columns_keep_peaks_between_them() {
        // A spike shorter than a column must still show.
        let samples = [s(0, 10), s(50, 1000), s(51, 10)];
        let cols = column_values(&samples, 1000, 4);
        assert_eq!(cols, vec![Some(1000), Some(10), Some(10), Some(10)]);
        // Before the first sample nothing is known.
        let cols = column_values(&[s(600, 5)], 1000, 4);
        assert_eq!(cols, vec![None, None, Some(5), Some(5)]);
    }

    #[test]
    fn staircase_fits_the_width_and_ends_full() {
        let samples: Vec<Sample> = (0..=100)
            .map(|i| s(i * 10_000_000, i * (1 << 30) / 100))
            .collect();
        let lines = render(&samples, 1_000_000_000, 80, 12, false);
        assert_eq!(lines.len(), 14);
        for l in &lines {
            assert!(l.chars().count() <= 80, "{l:?} is wider than 80");
        }
        assert!(lines[0].trim_start().starts_with("1 GiB ┤"), "{}", lines[0]);
        assert!(lines[0].ends_with('█'), "{}", lines[0]);
        assert!(lines[12].contains('└'));
        assert!(lines[13].contains("1s"), "{}", lines[13]);
    }

    #[test]
    fn readable_for_a_millisecond_and_an_hour() {
        let short = render(
            &[s(0, 1 << 20), s(400_000, 2 << 20)],
            1_000_000,
            80,
            8,
            false,
        );
        assert!(short.last().unwrap().contains("µs"), "{short:?}");
        let hour = render(
            &[s(0, 1 << 20), s(3_000_000_000_000, 2 << 20)],
            3_600_000_000_000,
            80,
            8,
            false,
        );
        assert!(hour.last().unwrap().contains("m"), "{hour:?}");
    }

    #[test]
    fn times_and_sizes_near_the_top_of_u64_end() {
        // A hostile record's times: the axis used to wrap `t += step` and loop forever.
        for end in [u64::MAX, u64::MAX - 1, u64::MAX / 3, 1 << 63] {
            let lines = render(&[s(0, 1), s(end, u64::MAX)], end, 80, 12, false);
            assert_eq!(lines.len(), 14);
            assert!(lines[13].contains('h'), "{lines:?}");
        }
        let lines = render(&[s(u64::MAX, u64::MAX)], 0, usize::MAX, 2, false);
        assert!(
            lines
                .iter()
                .all(|l| l.chars().count() <= crate::report::style::MAX_WIDTH)
        );
    }

    #[test]
    fn eighth_cells() {
        // Half of the top on a 2-row chart is exactly one full row.
        let lines = render(&[s(0, 512)], 10, 20, 2, false);
        assert!(
            lines[1].contains('█') && !lines[0].contains('█'),
            "{lines:?}"
        );
    }
}
