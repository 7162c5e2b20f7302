//! Small statistics over rounds: mean, sample standard deviation, and the 95 % confidence
//! interval of the mean from Student's t distribution (rounds are few, so not the normal).

use statrs::distribution::{ContinuousCDF, StudentsT};
use statrs::statistics::Statistics;

/// Mean and sample variance (n − 1 in the denominator) of at least two values.
pub fn mean_var(xs: &[f64]) -> (f64, f64) {
    (xs.iter().mean(), xs.iter().variance())
}

/// Mean, sample standard deviation and 95 % CI of `xs`. The CI is `None` below two values.
pub fn mean_ci95(xs: &[f64]) -> (f64, f64, Option<(f64, f64)>) {
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
pub fn t_quantile_975(df: usize) -> f64 {
    match StudentsT::new(0.0, 1.0, df as f64) {
        Ok(t) => t.inverse_cdf(0.975),
        // df >= 1 always here; fall back to the normal quantile rather than fail a report.
        Err(_) => 1.959_964,
    }
}

#[cfg(test)]
mod tests {
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
