//! The Universal Scalability Law fitted to a sweep over a count (users, writers):
//! X(N) = λN / (1 + σ(N − 1) + κN(N − 1)), where λ is the throughput of one, σ the share
//! lost to contention (queueing for something shared) and κ the cost of coherency (each
//! pair keeping each other up to date), which makes throughput fall past a peak at
//! N* = √((1 − σ)/κ). Least squares: λ in closed form for each (σ, κ), found by a coarse
//! grid and then a shrinking local search; intervals by resampling each point's rounds.

use serde::Serialize;

/// Resamples for the intervals; fixed seed, so a report reads the same every time.
const RESAMPLES: usize = 200;
/// A fit explaining less of the variance than this is said to be poor.
const GOOD_R2: f64 = 0.9;

/// One fitted curve.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Usl {
    pub(crate) lambda: f64,
    pub sigma: f64,
    pub kappa: f64,
}

impl Usl {
    /// Throughput at `n`.
    pub(crate) fn at(&self, n: f64) -> f64 {
        let d = 1.0 + self.sigma * (n - 1.0) + self.kappa * n * (n - 1.0);
        if d <= 0.0 { 0.0 } else { self.lambda * n / d }
    }

    /// Where throughput peaks, when coherency makes it fall again: at one user already
    /// when contention is whole (σ = 1: every user more only queues, and costs a little).
    pub(crate) fn peak_n(&self) -> Option<f64> {
        (self.kappa > 1e-12).then(|| ((1.0 - self.sigma).max(0.0) / self.kappa).sqrt().max(1.0))
    }
}

/// A fit with its intervals and how well it describes the points.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct UslFit {
    pub fit: Usl,
    /// 95 % intervals from resampling the rounds at each point: [low, high].
    pub lambda_ci: [f64; 2],
    pub sigma_ci: [f64; 2],
    pub kappa_ci: [f64; 2],
    /// The count at which throughput peaks, and the throughput predicted there; `None`
    /// when the fit has no coherency cost (it only flattens).
    pub peak_n: Option<f64>,
    pub peak_ops_per_sec: Option<f64>,
    /// Share of the points' variance the curve explains.
    pub r2: f64,
    /// Why the fit should not be trusted; `None` when it fits.
    pub poor: Option<String>,
}

/// Fit the law to points `(n, the rounds' throughputs at n)`. `None` with fewer than
/// three distinct counts (three parameters) or any count below 1.
pub(crate) fn fit(points: &[(f64, Vec<f64>)]) -> Option<UslFit> {
    let means: Vec<(f64, f64)> = points
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(n, v)| (*n, v.iter().sum::<f64>() / v.len() as f64))
        .collect();
    let mut distinct: Vec<f64> = means.iter().map(|p| p.0).collect();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup();
    if distinct.len() < 3
        || means
            .iter()
            .any(|(n, x)| !n.is_finite() || *n < 1.0 || !x.is_finite())
    {
        return None;
    }
    let best = least_squares(&means);
    let r2 = r_squared(&means, &best);
    let (lambda_ci, sigma_ci, kappa_ci) = intervals(points);
    let peak_n = best.peak_n();
    let mut poor = Vec::new();
    if distinct.len() < 4 {
        poor.push(format!(
            "{} points for 3 parameters: the curve passes near any three",
            distinct.len()
        ));
    }
    if r2 < GOOD_R2 {
        poor.push(format!("it explains {:.0} % of the variance", r2 * 100.0));
    }
    Some(UslFit {
        fit: best,
        lambda_ci,
        sigma_ci,
        kappa_ci,
        peak_ops_per_sec: peak_n.map(|n| best.at(n)),
        peak_n,
        r2,
        poor: (!poor.is_empty()).then(|| poor.join("; ")),
    })
}

/// The best λ for given σ, κ (closed form), and the squared error it leaves.
fn with_lambda(points: &[(f64, f64)], sigma: f64, kappa: f64) -> (Usl, f64) {
    let g = |n: f64| n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0));
    let (sxg, sgg) = points.iter().fold((0.0, 0.0), |(a, b), (n, x)| {
        (a + x * g(*n), b + g(*n) * g(*n))
    });
    let lambda = if sgg > 0.0 { sxg / sgg } else { 0.0 };
    let u = Usl {
        lambda,
        sigma,
        kappa,
    };
    let sse = points.iter().map(|(n, x)| (x - u.at(*n)).powi(2)).sum();
    (u, sse)
}

/// σ in [0, 1], κ ≥ 0: a grid (κ on a log scale), then a pattern search that halves its
/// steps around the best point.
fn least_squares(points: &[(f64, f64)]) -> Usl {
    let kappas: Vec<f64> = std::iter::once(0.0)
        .chain((0..=40).map(|i| 10f64.powf(-7.0 + i as f64 * 0.15)))
        .collect();
    let mut best = (f64::INFINITY, 0.0, 0.0);
    for i in 0..=50 {
        let s = i as f64 / 50.0;
        for &k in &kappas {
            let (_, e) = with_lambda(points, s, k);
            if e < best.0 {
                best = (e, s, k);
            }
        }
    }
    let (mut e, mut s, mut k) = best;
    let (mut ds, mut dk) = (0.02, (k * 0.5).max(1e-7));
    for _ in 0..200 {
        let mut moved = false;
        for (ts, tk) in [(s + ds, k), (s - ds, k), (s, k + dk), (s, k - dk)] {
            let (ts, tk) = (ts.clamp(0.0, 1.0), tk.max(0.0));
            let (_, te) = with_lambda(points, ts, tk);
            if te < e {
                (e, s, k, moved) = (te, ts, tk, true);
            }
        }
        if !moved {
            ds /= 2.0;
            dk /= 2.0;
            if ds < 1e-7 && dk < 1e-12 {
                break;
            }
        }
    }
    with_lambda(points, s, k).0
}

fn r_squared(points: &[(f64, f64)], u: &Usl) -> f64 {
    let mean = points.iter().map(|p| p.1).sum::<f64>() / points.len() as f64;
    let total: f64 = points.iter().map(|p| (p.1 - mean).powi(2)).sum();
    let resid: f64 = points.iter().map(|(n, x)| (x - u.at(*n)).powi(2)).sum();
    if total <= 0.0 {
        return if resid <= 0.0 { 1.0 } else { 0.0 };
    }
    1.0 - resid / total
}

/// 2.5th and 97.5th percentiles of λ, σ and κ over fits to resampled rounds (each
/// point's mean taken over rounds drawn with replacement from its own).
fn intervals(points: &[(f64, Vec<f64>)]) -> ([f64; 2], [f64; 2], [f64; 2]) {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x05c1_a1e5);
    let mut fits: Vec<Usl> = Vec::with_capacity(RESAMPLES);
    for _ in 0..RESAMPLES {
        let drawn: Vec<(f64, f64)> = points
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(n, v)| {
                let sum: f64 = (0..v.len()).map(|_| v[rng.random_range(0..v.len())]).sum();
                (*n, sum / v.len() as f64)
            })
            .collect();
        fits.push(least_squares(&drawn));
    }
    let ci = |pick: fn(&Usl) -> f64| {
        let mut v: Vec<f64> = fits.iter().map(pick).collect();
        v.sort_by(f64::total_cmp);
        let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        [at(0.025), at(0.975)]
    };
    (ci(|u| u.lambda), ci(|u| u.sigma), ci(|u| u.kappa))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};

    /// Rounds of a system with known λ, σ, κ, each off by up to ±`noise`.
    fn synthetic(truth: Usl, ns: &[f64], rounds: usize, noise: f64) -> Vec<(f64, Vec<f64>)> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        ns.iter()
            .map(|&n| {
                let v = (0..rounds)
                    .map(|_| truth.at(n) * (1.0 + noise * (rng.random::<f64>() * 2.0 - 1.0)))
                    .collect();
                (n, v)
            })
            .collect()
    }

    #[test]
    fn a_known_curve_is_recovered_with_intervals_that_hold_it() {
        let truth = Usl {
            lambda: 1000.0,
            sigma: 0.05,
            kappa: 0.002,
        };
        let ns = [1.0, 2.0, 4.0, 8.0, 16.0, 24.0, 32.0, 48.0, 64.0];
        let f = fit(&synthetic(truth, &ns, 5, 0.03)).unwrap();
        let near = |got: f64, want: f64, tol: f64| (got - want).abs() <= want * tol;
        assert!(near(f.fit.lambda, 1000.0, 0.05), "{f:?}");
        assert!(near(f.fit.sigma, 0.05, 0.3), "{f:?}");
        assert!(near(f.fit.kappa, 0.002, 0.3), "{f:?}");
        assert!(f.sigma_ci[0] <= 0.05 && 0.05 <= f.sigma_ci[1], "{f:?}");
        assert!(f.kappa_ci[0] <= 0.002 && 0.002 <= f.kappa_ci[1], "{f:?}");
        // N* = √(0.95 / 0.002) = 21.8
        assert!(near(f.peak_n.unwrap(), 21.8, 0.15), "{f:?}");
        assert!(f.r2 > 0.98 && f.poor.is_none(), "{f:?}");
    }

    #[test]
    fn a_curve_that_only_flattens_has_no_peak() {
        let truth = Usl {
            lambda: 500.0,
            sigma: 0.2,
            kappa: 0.0,
        };
        let f = fit(&synthetic(
            truth,
            &[1.0, 3.0, 5.0, 10.0, 15.0, 25.0],
            3,
            0.0,
        ))
        .unwrap();
        assert!((f.fit.sigma - 0.2).abs() < 0.01, "{f:?}");
        assert!(f.fit.kappa < 1e-5, "{f:?}");
        assert!(f.peak_n.is_none_or(|n| n > 100.0), "{f:?}");
    }

    #[test]
    fn whole_contention_with_a_coherency_cost_peaks_at_one() {
        // One journal every writer waits for, and each writer more costs a little: the
        // curve falls from the first writer on.
        let truth = Usl {
            lambda: 3300.0,
            sigma: 1.0,
            kappa: 0.008,
        };
        let f = fit(&synthetic(
            truth,
            &[3.0, 5.0, 10.0, 15.0, 20.0, 25.0],
            3,
            0.01,
        ))
        .unwrap();
        assert!(f.fit.sigma > 0.9, "{f:?}");
        assert_eq!(f.peak_n, Some(1.0), "{f:?}");
    }

    #[test]
    fn too_few_or_scattered_points_are_said_to_fit_poorly() {
        assert!(fit(&[(1.0, vec![10.0]), (2.0, vec![20.0])]).is_none());
        let three = fit(&[(1.0, vec![10.0]), (2.0, vec![19.0]), (4.0, vec![30.0])]).unwrap();
        assert!(three.poor.unwrap().contains("3 points"));
        let scattered = fit(&[
            (1.0, vec![100.0]),
            (2.0, vec![10.0]),
            (3.0, vec![300.0]),
            (4.0, vec![20.0]),
            (5.0, vec![250.0]),
        ])
        .unwrap();
        assert!(
            scattered.poor.as_deref().unwrap_or("").contains("variance"),
            "{scattered:?}"
        );
    }
}
