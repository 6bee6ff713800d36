//! Human formatting of the integer units ste stores (nanoseconds, bytes), and the parsing of
//! the durations and sizes ste's options take.
//!
//! Storage is always integer `_ns` / `_bytes`; this module is the only place that turns them into
//! text, so every report prints the same figure the same way. It knows nothing about the model.
//! Durations take a bare number as seconds (as `timeout 3` and `sleep 3` do) or humantime's
//! units; sizes take bare bytes or K/M/G/T, with or without `iB`/`B` (all binary).

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

/// `3` (seconds), `0.01`, `500ms`, `2s`, `1m`: a positive duration.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    const EXAMPLES: &str = "examples: 3 (seconds), 0.5, 500ms, 2s, 1m";
    let d = match s.trim().parse::<f64>() {
        Ok(secs) => std::time::Duration::try_from_secs_f64(secs)
            .map_err(|_| format!("{s:?} is not a duration ({EXAMPLES})"))?,
        Err(_) => humantime::parse_duration(s).map_err(|e| format!("{e} ({EXAMPLES})"))?,
    };
    if d.is_zero() {
        return Err("must be greater than zero".into());
    }
    Ok(d)
}

/// `4096` (bytes), `100K`, `1.5G`, `64MiB`, `2GB`: a size in bytes (binary units).
pub fn parse_size(s: &str) -> Result<u64, String> {
    const EXAMPLES: &str = "examples: 4096, 100K, 64MiB, 1.5G";
    let t = s.trim();
    let (num, mult) = match t.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => {
            let unit = t[i..].to_ascii_lowercase();
            let m: u64 = match unit.trim_end_matches("ib").trim_end_matches('b') {
                "" => 1,
                "k" => 1 << 10,
                "m" => 1 << 20,
                "g" => 1 << 30,
                "t" => 1 << 40,
                _ => return Err(format!("{s:?}: unknown unit ({EXAMPLES})")),
            };
            (&t[..i], m)
        }
        None => (t, 1),
    };
    let v: f64 = num
        .trim()
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite())
        .ok_or_else(|| format!("{s:?} is not a size ({EXAMPLES})"))?;
    if v < 0.0 {
        return Err("must not be negative".into());
    }
    Ok((v * mult as f64) as u64)
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

    #[test]
    fn durations_take_bare_seconds_or_units() {
        use std::time::Duration;
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration("0.01"), Ok(Duration::from_millis(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("-1").is_err());
        assert!(parse_duration("inf").is_err());
        assert!(parse_duration("soon").unwrap_err().contains("3 (seconds)"));
    }

    #[test]
    fn sizes_take_bare_bytes_or_binary_units() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("100K"), Ok(100 << 10));
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("2GB"), Ok(2 << 30));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert!(parse_size("3 parsecs").is_err());
        assert!(parse_size("-1K").is_err());
        assert!(parse_size("NaN").is_err());
    }
}
