//! The statistics of repeated runs: median, minimum, maximum and spread of a figure's values,
//! and the median of per-round ratios with its 95 % bootstrap interval (bench/paired.py's
//! method: ratios taken within a round, where the machine is the same for every command).
//!
//! Pure arithmetic on `f64`s; a value ste could not measure never reaches here (the caller
//! leaves it out and counts it). Random numbers come from a seeded generator the caller owns,
//! so a seeded bench gives the same intervals.

/// How many resamples the bootstrap takes: enough for the 2.5th and 97.5th percentiles to be
/// stable to the third digit on the 5–50 rounds a bench takes.
pub const BOOTSTRAP_RESAMPLES: usize = 4000;

/// A figure's values over the runs of one command.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// `(max − min) / median`: how far apart the runs were, relative to the typical one
    /// (`None` when the median is 0).
    pub spread: Option<f64>,
}

/// The summary of `values`; `None` when there are none.
pub fn summarize(values: &[f64]) -> Option<Summary> {
    let median = median(values)?;
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some(Summary {
        median,
        min,
        max,
        spread: (median != 0.0).then(|| (max - min) / median),
    })
}

/// The median (the mean of the two middle values of an even count); `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// The 95 % bootstrap interval of the median of `values`: the 2.5th and 97.5th percentiles of
/// the medians of [`BOOTSTRAP_RESAMPLES`] resamples drawn with replacement. `None` with fewer
/// than two values, where there is nothing to resample.
pub fn bootstrap_interval(values: &[f64], rng: &mut fastrand::Rng) -> Option<(f64, f64)> {
    let n = values.len();
    if n < 2 {
        return None;
    }
    let mut sample = vec![0.0; n];
    let mut medians: Vec<f64> = (0..BOOTSTRAP_RESAMPLES)
        .map(|_| {
            for s in sample.iter_mut() {
                *s = values[rng.usize(..n)];
            }
            median(&sample).expect("a resample is not empty")
        })
        .collect();
    medians.sort_by(f64::total_cmp);
    let at = |q: f64| medians[((q * BOOTSTRAP_RESAMPLES as f64) as usize).min(medians.len() - 1)];
    Some((at(0.025), at(0.975)))
}

/// A ratio to the baseline: the median of the per-round ratios and its interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ratio {
    pub median: f64,
    pub interval: Option<(f64, f64)>,
    /// Rounds with a ratio (both figures measured, the baseline's not 0).
    pub rounds: usize,
}

impl Ratio {
    /// The per-round ratios `pairs` (figure, baseline) give; `None` when no round has one.
    pub fn of(pairs: &[(f64, f64)], rng: &mut fastrand::Rng) -> Option<Ratio> {
        let ratios: Vec<f64> = pairs
            .iter()
            .filter(|(_, base)| *base > 0.0)
            .map(|(v, base)| v / base)
            .collect();
        Some(Ratio {
            median: median(&ratios)?,
            interval: bootstrap_interval(&ratios, rng),
            rounds: ratios.len(),
        })
    }

    /// Whether the interval excludes 1: the only case a verdict is given.
    pub fn differs(&self) -> bool {
        self.interval.is_some_and(|(lo, hi)| lo > 1.0 || hi < 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        let s = summarize(&[10.0, 12.0, 11.0]).unwrap();
        assert_eq!((s.min, s.median, s.max), (10.0, 11.0, 12.0));
        assert!((s.spread.unwrap() - 2.0 / 11.0).abs() < 1e-12);
        assert_eq!(summarize(&[0.0, 0.0]).unwrap().spread, None);
    }

    #[test]
    fn the_interval_holds_the_median_and_is_reproducible_with_a_seed() {
        let v: Vec<f64> = (0..20).map(|i| 1.0 + f64::from(i) / 100.0).collect();
        let a = bootstrap_interval(&v, &mut fastrand::Rng::with_seed(7)).unwrap();
        let b = bootstrap_interval(&v, &mut fastrand::Rng::with_seed(7)).unwrap();
        assert_eq!(a, b);
        let m = median(&v).unwrap();
        assert!(a.0 <= m && m <= a.1 && a.0 >= 1.0 && a.1 <= 1.19, "{a:?}");
        assert_eq!(bootstrap_interval(&[1.0], &mut fastrand::Rng::new()), None);
    }

    #[test]
    fn ratios_are_taken_within_rounds_and_judged_by_their_interval() {
        let mut rng = fastrand::Rng::with_seed(1);
        // The machine drifts 2× over the rounds; the ratio within each round stays 2.
        let pairs: Vec<(f64, f64)> = (1..=8)
            .map(|i| (2.0 * f64::from(i), f64::from(i)))
            .collect();
        let r = Ratio::of(&pairs, &mut rng).unwrap();
        assert_eq!((r.median, r.interval, r.rounds), (2.0, Some((2.0, 2.0)), 8));
        assert!(r.differs());
        let same = [(1.0, 1.1), (1.1, 1.0), (1.0, 1.0), (0.95, 1.0), (1.05, 1.0)];
        assert!(!Ratio::of(&same, &mut rng).unwrap().differs());
        // A baseline of 0 has no ratio; none at all is no ratio.
        assert_eq!(Ratio::of(&[(1.0, 0.0)], &mut rng), None);
    }
}
