//! Small statistics over rounds: mean, sample standard deviation, the 95 % confidence
//! interval of the mean from Student's t distribution (rounds are few, so not the normal),
//! and a trend test over a target's rounds (drift).

use statrs::distribution::{ContinuousCDF, StudentsT};
use statrs::statistics::Statistics;

/// `mean ±half`, by one rule everywhere a figure has a confidence interval: the half-width
/// to two significant digits, the mean to the same decimal place (so `0.203 ±0.064` and
/// `24.6 ±5.1`, never `0.203 ±0.06359` beside `24.6 ±5.139`). `sep` goes between them.
pub(crate) fn with_ci(mean: f64, half: f64, sep: &str) -> String {
    if !(half.is_finite() && half > 0.0 && mean.is_finite()) {
        return format!("{mean:.1}{sep}{half:.1}");
    }
    let decimals = (1 - half.log10().floor() as i32).clamp(0, 9) as usize;
    format!("{mean:.decimals$}{sep}{half:.decimals$}")
}

/// Mean and sample variance (n − 1 in the denominator) of at least two values.
pub(crate) fn mean_var(xs: &[f64]) -> (f64, f64) {
    (xs.iter().mean(), xs.iter().variance())
}

/// Mean, sample standard deviation and 95 % CI of `xs`. The CI is `None` below two values.
pub(crate) fn mean_ci95(xs: &[f64]) -> (f64, f64, Option<(f64, f64)>) {
    let n = xs.len();
    if n == 0 {
        return (0.0, 0.0, None);
    }
    if n < 2 {
        return (xs[0], 0.0, None);
    }
    let (mean, var) = mean_var(xs);
    let sd = var.sqrt();
    let t = t_quantile_975(n - 1);
    let half = t * sd / (n as f64).sqrt();
    (mean, sd, Some((mean - half, mean + half)))
}

/// The 97.5th percentile of Student's t with `df` degrees of freedom.
pub(crate) fn t_quantile_975(df: usize) -> f64 {
    match StudentsT::new(0.0, 1.0, df as f64) {
        Ok(t) => t.inverse_cdf(0.975),
        // df >= 1 always here; fall back to the normal quantile rather than fail a report.
        Err(_) => 1.959_964,
    }
}

/// The knee of a sweep's figures (see [`knee`]): the swept values as numbers when they
/// all are (1, 2, 4, 8 users), else evenly spaced (1KiB, 4KiB, ...); every point must
/// have its figure.
pub(crate) fn sweep_knee(values: &[String], ys: &[Option<f64>]) -> Option<usize> {
    let ys: Vec<f64> = ys.iter().copied().collect::<Option<Vec<f64>>>()?;
    let numeric: Option<Vec<f64>> = values
        .iter()
        .map(|v| v.trim().parse::<f64>().ok())
        .collect();
    let xs = numeric.unwrap_or_else(|| (0..values.len()).map(|i| i as f64).collect());
    knee(&xs, &ys)
}

/// Where a rising curve bends: the swept value after which more of it stops adding much
/// (the thread sweep's "where does adding users stop adding throughput"). The Kneedle
/// rule (Satopää et al., 2011): with both axes scaled to [0, 1], the point farthest above
/// the straight line from the first point to the last. `None` for fewer than three
/// points, a curve that does not rise, or one that bends by less than a tenth of its
/// range (it is about straight).
pub(crate) fn knee(xs: &[f64], ys: &[f64]) -> Option<usize> {
    if xs.len() != ys.len() || xs.len() < 3 {
        return None;
    }
    let (x0, x1) = (xs[0], xs[xs.len() - 1]);
    let (ymin, ymax) = ys
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &y| (a.min(y), b.max(y)));
    // NaN compares false both ways: `partial_cmp` says a NaN range is no range.
    let rises = |a: f64, b: f64| b.partial_cmp(&a) == Some(std::cmp::Ordering::Greater);
    if !rises(x0, x1) || !rises(ymin, ymax) || !rises(ys[0], ys[ys.len() - 1]) {
        return None;
    }
    let (i, d) = xs
        .iter()
        .zip(ys)
        .enumerate()
        .map(|(i, (x, y))| (i, (y - ymin) / (ymax - ymin) - (x - x0) / (x1 - x0)))
        .fold((0, f64::MIN), |best, p| if p.1 > best.1 { p } else { best });
    (d >= 0.1 && i > 0 && i + 1 < xs.len()).then_some(i)
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_figure_and_its_interval_share_one_rule_for_digits() {
        assert_eq!(with_ci(0.203, 0.06359, " ±"), "0.203 ±0.064");
        assert_eq!(with_ci(24.6, 5.139, " ±"), "24.6 ±5.1");
        assert_eq!(with_ci(9891.3, 120.5, " ±"), "9891 ±120");
        assert_eq!(with_ci(5.0, 0.0, " ± "), "5.0 ± 0.0");
    }

    use super::*;

    #[test]
    fn t_quantiles_match_tables() {
        assert!((t_quantile_975(1) - 12.706).abs() < 1e-3);
        assert!((t_quantile_975(9) - 2.262).abs() < 1e-3);
        assert!((t_quantile_975(1000) - 1.962).abs() < 1e-3);
    }

    #[test]
    fn ci_of_known_sample() {
        // mean 10, sd 2 (sample), n 4: half-width 3.182 * 2 / 2 = 3.182
        let (m, sd, ci) = mean_ci95(&[8.0, 10.0, 12.0, 10.0 + 0.0]);
        assert_eq!(m, 10.0);
        assert!((sd - (8.0f64 / 3.0).sqrt()).abs() < 1e-12);
        let (lo, hi) = ci.unwrap();
        let half = 3.182_446 * sd / 2.0;
        assert!((lo - (10.0 - half)).abs() < 1e-4 && (hi - (10.0 + half)).abs() < 1e-4);
        assert_eq!(mean_ci95(&[5.0]).2, None);
    }
}

/// A trend over rounds: the least-squares line through (round, value), the change it
/// implies from the first round to the last, and the two-sided p-value of its slope
/// (Student's t with n − 2 degrees of freedom).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Trend {
    pub slope: f64,
    /// (fitted last − fitted first) ÷ fitted first.
    pub change: f64,
    pub p_value: f64,
}

/// The trend of `ys` over rounds 1..=n; `None` below three rounds or without variation.
pub(crate) fn trend(ys: &[f64]) -> Option<Trend> {
    let n = ys.len();
    if n < 3 || ys.iter().any(|y| !y.is_finite()) {
        return None;
    }
    let nf = n as f64;
    let mx = (nf + 1.0) / 2.0;
    let my = ys.iter().sum::<f64>() / nf;
    let (mut sxx, mut sxy) = (0.0, 0.0);
    for (i, y) in ys.iter().enumerate() {
        let dx = (i + 1) as f64 - mx;
        sxx += dx * dx;
        sxy += dx * (y - my);
    }
    let slope = sxy / sxx;
    let fit = |x: f64| my + slope * (x - mx);
    let sse: f64 = ys
        .iter()
        .enumerate()
        .map(|(i, y)| (y - fit((i + 1) as f64)).powi(2))
        .sum();
    let first = fit(1.0);
    if first <= 0.0 || slope == 0.0 {
        return None;
    }
    let change = (fit(nf) - first) / first;
    let se = (sse / (nf - 2.0) / sxx).sqrt();
    let p_value = if se == 0.0 {
        0.0
    } else {
        let t = (slope / se).abs();
        let dist = StudentsT::new(0.0, 1.0, nf - 2.0).ok()?;
        2.0 * (1.0 - dist.cdf(t))
    };
    Some(Trend {
        slope,
        change,
        p_value,
    })
}

#[cfg(test)]
mod trend_tests {
    use super::*;

    #[test]
    fn a_warming_jvm_is_a_trend_and_noise_is_not() {
        // The cold JVM: 1,690 → 2,460 → 3,430 → 3,620 ops/s.
        let t = trend(&[1690.0, 2460.0, 3430.0, 3620.0]).unwrap();
        assert!(t.p_value < 0.05, "{t:?}");
        assert!(t.change > 1.0, "{t:?}");
        let flat = trend(&[3000.0, 3100.0, 2950.0, 3050.0, 2990.0]).unwrap();
        assert!(flat.p_value > 0.05, "{flat:?}");
        assert!(trend(&[1.0, 2.0]).is_none());
    }

    #[test]
    fn the_knee_is_where_more_stops_adding_much() {
        // Throughput against writer threads: linear to 8, then flat.
        let xs = [1.0, 2.0, 4.0, 8.0, 16.0, 25.0];
        let ys = [100.0, 200.0, 400.0, 780.0, 800.0, 805.0];
        assert_eq!(knee(&xs, &ys), Some(3));
        // Straight: no knee; falling: none; too few points: none.
        assert_eq!(knee(&xs, &[1.0, 2.0, 4.0, 8.0, 16.0, 25.0]), None);
        assert_eq!(knee(&xs, &[6.0, 5.0, 4.0, 3.0, 2.0, 1.0]), None);
        assert_eq!(knee(&[1.0, 2.0], &[1.0, 2.0]), None);
    }
}
