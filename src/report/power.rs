//! How much a comparison can tell, for `compare`: the correction of its many tests for
//! the chance that one of them stars by luck (Holm's step-down), the smallest difference
//! its rounds could have detected (the minimum detectable effect at α and power 0.8) and
//! the rounds an effect would need, and whether a run's throughput was the server's to
//! give at all: a closed population that spends almost all its time thinking sends what
//! its think times allow, whatever the server does (Little's law: users waiting on the
//! server = throughput × latency).

use statrs::distribution::{ContinuousCDF, StudentsT};

use super::model::RoundReport;

/// Significance level of the tests.
pub const ALPHA: f64 = 0.05;

/// The chance of detecting a true effect of the minimum detectable size.
pub(crate) const POWER: f64 = 0.8;

/// Below this share of their time spent waiting on the server (in every round of both
/// runs), users' throughput is set by their think times, pacing or arrivals.
pub(crate) const PACED_BELOW: f64 = 0.1;

/// The most rounds [`rounds_for`] looks at.
pub(crate) const MAX_ROUNDS: usize = 1000;

/// Holm's step-down adjusted p-values, in the order given (a test not run stays `None`):
/// the k-th smallest of m is multiplied by m − k + 1, and each is at least the one before
/// it. Rejecting where the adjusted value is below α keeps the chance of any false star
/// among the m tests below α, whatever their dependence.
pub(crate) fn holm(ps: &[Option<f64>]) -> Vec<Option<f64>> {
    let mut order: Vec<(usize, f64)> = ps
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.map(|p| (i, p)))
        .collect();
    order.sort_by(|a, b| a.1.total_cmp(&b.1));
    let m = order.len();
    let mut out = vec![None; ps.len()];
    let mut running: f64 = 0.0;
    for (k, (i, p)) in order.into_iter().enumerate() {
        running = running.max((p * (m - k) as f64).min(1.0));
        out[i] = Some(running);
    }
    out
}

/// Welch's t-test: two-sided p-value that two samples have the same mean.
pub fn welch_p(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let stats = |x: &[f64]| {
        let (m, v) = super::stats::mean_var(x);
        (x.len() as f64, m, v)
    };
    let (na, ma, va) = stats(a);
    let (nb, mb, vb) = stats(b);
    let se2 = va / na + vb / nb;
    if se2 == 0.0 {
        // No spread on either side: the means are equal or they are not.
        return Some(if (ma - mb).abs() < f64::EPSILON * ma.abs().max(1.0) {
            1.0
        } else {
            0.0
        });
    }
    let t = (ma - mb) / se2.sqrt();
    let df = se2 * se2 / ((va / na).powi(2) / (na - 1.0) + (vb / nb).powi(2) / (nb - 1.0));
    let dist = StudentsT::new(0.0, 1.0, df).ok()?;
    Some(2.0 * (1.0 - dist.cdf(t.abs())))
}

/// The t quantile `q` with `df` degrees of freedom.
fn t_quantile(q: f64, df: f64) -> Option<f64> {
    StudentsT::new(0.0, 1.0, df).ok().map(|t| t.inverse_cdf(q))
}

/// The pooled standard deviation of two samples (two values each at least).
pub(crate) fn pooled_sd(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (_, va) = super::stats::mean_var(a);
    let (_, vb) = super::stats::mean_var(b);
    let (na, nb) = (a.len() as f64, b.len() as f64);
    Some((((na - 1.0) * va + (nb - 1.0) * vb) / (na + nb - 2.0)).sqrt())
}

/// The smallest difference of means that samples of `n1` and `n2` values with spread
/// `sd` detect at [`ALPHA`] (two-sided) with [`POWER`]:
/// (t(1 − α/2) + t(power)) · sd · √(1/n1 + 1/n2), with n1 + n2 − 2 degrees of freedom.
pub(crate) fn mde(sd: f64, n1: usize, n2: usize) -> Option<f64> {
    if n1 < 2 || n2 < 2 || !sd.is_finite() {
        return None;
    }
    let df = (n1 + n2 - 2) as f64;
    let t = t_quantile(1.0 - ALPHA / 2.0, df)? + t_quantile(POWER, df)?;
    Some(t * sd * (1.0 / n1 as f64 + 1.0 / n2 as f64).sqrt())
}

/// The rounds each side needs for a difference of `effect` (same unit as `sd`) to be
/// detected as [`mde`] detects: `None` beyond [`MAX_ROUNDS`].
pub(crate) fn rounds_for(sd: f64, effect: f64) -> Option<usize> {
    if effect.is_nan() || effect <= 0.0 {
        return None;
    }
    (2..=MAX_ROUNDS).find(|n| mde(sd, *n, *n).is_some_and(|d| d <= effect))
}

/// The share of their time a run's users waited on the server, the lowest of its rounds:
/// its headline's throughput × mean latency ÷ its users (Little's law). `None` when a
/// round has no users or no successes.
pub(crate) fn busy_share(rounds: &[RoundReport]) -> Option<f64> {
    let mut lowest: Option<f64> = None;
    for round in rounds {
        let h = round.headline();
        if round.vus == 0 || h.successes == 0 {
            return None;
        }
        let share = h.ops_per_sec * h.latency_ms.mean / 1000.0 / round.vus as f64;
        lowest = Some(lowest.map_or(share, |l| l.min(share)));
    }
    lowest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holm_adjusts_as_the_textbook_example() {
        // p = 0.01, 0.04, 0.03, 0.005 (m = 4): sorted 0.005×4 = 0.02, 0.01×3 = 0.03,
        // 0.03×2 = 0.06, 0.04×1 = 0.04 → kept at least 0.06.
        let got = holm(&[Some(0.01), Some(0.04), Some(0.03), None, Some(0.005)]);
        let want = [Some(0.03), Some(0.06), Some(0.06), None, Some(0.02)];
        for (g, w) in got.iter().zip(want) {
            match (g, w) {
                (Some(g), Some(w)) => assert!((g - w).abs() < 1e-12, "{got:?}"),
                (g, w) => assert_eq!(*g, w),
            }
        }
        assert_eq!(holm(&[Some(0.9), Some(0.8)]), [Some(1.0), Some(1.0)]);
    }

    #[test]
    fn the_detectable_effect_matches_a_power_table() {
        // Two groups of 10, sd 1: df 18, t(0.975) = 2.101, t(0.8) = 0.862, so
        // 2.963 × √0.2 = 1.325 (the usual "d ≈ 1.3 for n = 10 per group").
        let d = mde(1.0, 10, 10).unwrap();
        assert!((d - 1.325).abs() < 0.002, "{d}");
        // More rounds detect less; the rounds for that effect give it back.
        assert!(mde(1.0, 40, 40).unwrap() < d);
        assert_eq!(rounds_for(1.0, d), Some(10));
        assert_eq!(rounds_for(1.0, 1e-6), None);
        assert_eq!(mde(1.0, 1, 5), None);
    }

    /// A/A by simulation: two samples of the same normal spread; the test is significant
    /// about α of the time, and a true difference of one MDE about `POWER` of the time.
    #[test]
    fn the_detectable_effect_is_detected_with_its_power() {
        use rand::SeedableRng;
        use rand_distr::{Distribution, Normal};
        let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(7);
        let noise = Normal::new(100.0, 5.0).unwrap();
        let n = 6;
        let effect = mde(5.0, n, n).unwrap();
        let (mut false_alarms, mut detected) = (0, 0);
        let trials = 4000;
        for _ in 0..trials {
            let a: Vec<f64> = (0..n).map(|_| noise.sample(&mut rng)).collect();
            let b: Vec<f64> = (0..n).map(|_| noise.sample(&mut rng)).collect();
            let c: Vec<f64> = b.iter().map(|x| x + effect).collect();
            if welch_p(&a, &b).unwrap() < ALPHA {
                false_alarms += 1;
            }
            if welch_p(&a, &c).unwrap() < ALPHA {
                detected += 1;
            }
        }
        let fa = false_alarms as f64 / trials as f64;
        let power = detected as f64 / trials as f64;
        assert!((0.035..0.065).contains(&fa), "false alarms {fa}");
        assert!((0.74..0.86).contains(&power), "power {power}");
    }
}
