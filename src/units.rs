//! Human formatting of the integer units ste stores (nanoseconds, bytes).
//!
//! Storage is always integer `_ns` / `_bytes`; this module is the only place that turns them into
//! text, so every report prints the same figure the same way. It knows nothing about the model.

/// `1073762304` → `"1,073,762,304"`: the seed's grouping for exact byte counts.
pub fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The sum of figures, saturating: a crafted Run's figures near `u64::MAX` must not wrap a
/// report's totals (no figure ste measures comes near).
pub fn sum(figures: impl IntoIterator<Item = u64>) -> u64 {
    figures.into_iter().fold(0, u64::saturating_add)
}

/// Milliseconds with thousands grouping, as the seed prints times: `1,229ms`.
/// Rounds to the nearest millisecond.
pub fn millis(ns: u64) -> String {
    // Not `(ns + 500_000) / 1_000_000`: a hostile record's time near u64::MAX would wrap.
    let rounded = ns / 1_000_000 + u64::from(ns % 1_000_000 >= 500_000);
    format!("{}ms", group_thousands(rounded))
}

/// Binary-prefixed size with up to three significant digits: `512 B`, `1.5 KiB`, `1.00 GiB`.
pub fn bytes_human(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    let text = if value >= 100.0 {
        format!("{value:.0}")
    } else if value >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    };
    format!("{} {}", trim_zeros(&text), UNITS[unit])
}

/// A duration for axes and notes: `0`, `850µs`, `12ms`, `1.5s`, `2m05s`, `1h02m`.
pub fn duration_human(ns: u64) -> String {
    const US: u64 = 1_000;
    const MS: u64 = 1_000_000;
    const S: u64 = 1_000_000_000;
    match ns {
        0 => "0".to_string(),
        n if n < MS => format!("{}µs", trim_zeros(&format!("{:.1}", n as f64 / US as f64))),
        n if n < S => format!("{}ms", trim_zeros(&format!("{:.1}", n as f64 / MS as f64))),
        n if n < 60 * S => format!("{}s", trim_zeros(&format!("{:.2}", n as f64 / S as f64))),
        n if n < 3600 * S => {
            let s = n / S;
            format!("{}m{:02}s", s / 60, s % 60)
        }
        n => {
            let m = n / (60 * S);
            format!("{}h{:02}m", m / 60, m % 60)
        }
    }
}

/// A fraction as a percentage with sensible precision: `0.43%`, `12%`.
pub fn percent(fraction: f64) -> String {
    let p = fraction * 100.0;
    if p < 10.0 {
        format!("{}%", trim_zeros(&format!("{p:.2}")))
    } else {
        format!("{p:.0}%")
    }
}

fn trim_zeros(s: &str) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_like_the_seed() {
        assert_eq!(group_thousands(0), "0");
        assert_eq!(group_thousands(999), "999");
        assert_eq!(group_thousands(1000), "1,000");
        assert_eq!(group_thousands(1_073_762_304), "1,073,762,304");
        assert_eq!(millis(1_229_400_000), "1,229ms");
        assert_eq!(millis(87_600_000), "88ms");
    }

    #[test]
    fn human_sizes() {
        assert_eq!(bytes_human(0), "0 B");
        assert_eq!(bytes_human(1536), "1.5 KiB");
        assert_eq!(bytes_human(1 << 30), "1 GiB");
        assert_eq!(bytes_human(150 << 20), "150 MiB");
        assert_eq!(bytes_human(15 << 19), "7.5 MiB");
    }

    #[test]
    fn human_durations() {
        assert_eq!(duration_human(0), "0");
        assert_eq!(duration_human(850_000), "850µs");
        assert_eq!(duration_human(12_000_000), "12ms");
        assert_eq!(duration_human(1_500_000_000), "1.5s");
        assert_eq!(duration_human(125_000_000_000), "2m05s");
        assert_eq!(duration_human(3_720_000_000_000), "1h02m");
        assert_eq!(percent(0.0043), "0.43%");
    }
}
