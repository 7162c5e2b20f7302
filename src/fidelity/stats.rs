//! The tests `fidelity` judges by: χ² homogeneity of two count vectors, total variation
//! distance, the two-sample Kolmogorov–Smirnov test (ties stepped over together, so
//! discrete samples such as operations per session are handled; its p-value is then
//! conservative), and the index of dispersion of counts per window.

use statrs::distribution::{ChiSquared, ContinuousCDF, FisherSnedecor};

/// Half the summed absolute difference of the two count vectors' shares: 0 alike, 1
/// disjoint.
pub(crate) fn tvd(a: &[f64], b: &[f64]) -> f64 {
    let (ta, tb): (f64, f64) = (a.iter().sum(), b.iter().sum());
    if ta <= 0.0 || tb <= 0.0 {
        return if ta == tb { 0.0 } else { 1.0 };
    }
    a.iter()
        .zip(b)
        .map(|(x, y)| (x / ta - y / tb).abs())
        .sum::<f64>()
        / 2.0
}

/// The p-value of χ² homogeneity of two samples' counts over the same categories
/// (categories empty in both are left out); 1 with fewer than two categories.
pub(crate) fn chi2_p(a: &[f64], b: &[f64]) -> f64 {
    let (ta, tb): (f64, f64) = (a.iter().sum(), b.iter().sum());
    let t = ta + tb;
    if ta <= 0.0 || tb <= 0.0 {
        return if ta == tb { 1.0 } else { 0.0 };
    }
    let mut stat = 0.0;
    let mut cats = 0;
    for (x, y) in a.iter().zip(b) {
        let col = x + y;
        if col <= 0.0 {
            continue;
        }
        cats += 1;
        let (ea, eb) = (col * ta / t, col * tb / t);
        stat += (x - ea).powi(2) / ea + (y - eb).powi(2) / eb;
    }
    if cats < 2 {
        return 1.0;
    }
    ChiSquared::new((cats - 1) as f64).map_or(1.0, |d| 1.0 - d.cdf(stat))
}

/// The two-sample KS statistic D and its asymptotic p-value; `None` if a sample is empty.
pub(crate) fn ks(a: &[f64], b: &[f64]) -> Option<(f64, f64)> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let mut a = a.to_vec();
    let mut b = b.to_vec();
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (mut i, mut j, mut d) = (0usize, 0usize, 0f64);
    while i < a.len() && j < b.len() {
        let v = a[i].min(b[j]);
        while i < a.len() && a[i] <= v {
            i += 1;
        }
        while j < b.len() && b[j] <= v {
            j += 1;
        }
        d = d.max((i as f64 / na - j as f64 / nb).abs());
    }
    let ne = (na * nb / (na + nb)).sqrt();
    let lambda = (ne + 0.12 + 0.11 / ne) * d;
    Some((d, kolmogorov_q(lambda)))
}

/// P(K > λ) of the Kolmogorov distribution.
fn kolmogorov_q(lambda: f64) -> f64 {
    if lambda < 0.2 {
        return 1.0;
    }
    let mut sum = 0.0;
    for k in 1..=100 {
        let k = f64::from(k);
        let term = (-2.0 * k * k * lambda * lambda).exp();
        sum += if k as u32 % 2 == 1 { term } else { -term };
        if term < 1e-12 {
            break;
        }
    }
    (2.0 * sum).clamp(0.0, 1.0)
}

/// The two-sided p-value that two dispersion indices over `na` and `nb` windows differ
/// only by chance (an F test of the two variances, each over its own mean).
pub(crate) fn dispersion_p(a: f64, na: usize, b: f64, nb: usize) -> f64 {
    if a <= 0.0 || b <= 0.0 || na < 2 || nb < 2 {
        return 1.0;
    }
    FisherSnedecor::new((na - 1) as f64, (nb - 1) as f64).map_or(1.0, |f| {
        let c = f.cdf(a / b);
        (2.0 * c.min(1.0 - c)).clamp(0.0, 1.0)
    })
}

/// The variance over the mean of the number of events per window of `window_us`, over
/// `[first, last]`, and the number of windows; `None` with fewer than 10 windows or no
/// events. 1 for a Poisson process; above 1 burstier.
pub(crate) fn dispersion(
    times_us: &[i64],
    first: i64,
    last: i64,
    window_us: i64,
) -> Option<(f64, usize)> {
    let windows = usize::try_from((last - first) / window_us.max(1)).ok()?;
    if !(10..=10_000_000).contains(&windows) {
        return None;
    }
    let mut counts = vec![0f64; windows];
    for &t in times_us {
        if let Ok(i) = usize::try_from((t - first) / window_us)
            && i < windows
        {
            counts[i] += 1.0;
        }
    }
    let n = windows as f64;
    let mean = counts.iter().sum::<f64>() / n;
    if mean <= 0.0 {
        return None;
    }
    let var = counts.iter().map(|c| (c - mean).powi(2)).sum::<f64>() / (n - 1.0);
    Some((var / mean, windows))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tests_tell_alike_from_unlike() {
        assert_eq!(tvd(&[1.0, 1.0], &[2.0, 2.0]), 0.0);
        assert_eq!(tvd(&[1.0, 0.0], &[0.0, 1.0]), 1.0);
        assert!(chi2_p(&[500.0, 500.0], &[510.0, 490.0]) > 0.5);
        assert!(chi2_p(&[500.0, 500.0], &[700.0, 300.0]) < 1e-6);
        let a: Vec<f64> = (0..1000).map(f64::from).collect();
        let b: Vec<f64> = (0..1000).map(|x| f64::from(x) + 0.5).collect();
        let (d, p) = ks(&a, &b).unwrap();
        assert!(d < 0.01 && p > 0.9, "{d} {p}");
        let c: Vec<f64> = (0..1000).map(|x| f64::from(x) + 300.0).collect();
        assert!(ks(&a, &c).unwrap().1 < 1e-6);
        // Ties: two samples of the same discrete values are alike.
        let t1: Vec<f64> = (0..600).map(|x| f64::from(x % 3)).collect();
        let t2: Vec<f64> = (0..300).map(|x| f64::from(x % 3)).collect();
        assert_eq!(ks(&t1, &t2).unwrap().0, 0.0);
    }

    #[test]
    fn dispersion_is_one_for_even_arrivals_only_when_they_are_random() {
        // Evenly spaced: no variance at all.
        let even: Vec<i64> = (0..1000).map(|i| i * 1000).collect();
        assert!(dispersion(&even, 0, 1_000_000, 10_000).unwrap().0 < 0.01);
        // All in one burst: far above 1.
        let burst: Vec<i64> = vec![5; 1000];
        assert!(dispersion(&burst, 0, 1_000_000, 10_000).unwrap().0 > 100.0);
        assert!(dispersion_p(1.0, 100, 1.1, 100) > 0.5);
        assert!(dispersion_p(1.0, 1000, 3.0, 1000) < 1e-6);
    }
}
