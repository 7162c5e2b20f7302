//! Fitting a think-time or pause distribution to samples by maximum likelihood:
//! exponential, lognormal, Weibull and Pareto (capped at the largest sample, as loadmix
//! requires), the one with the least AIC chosen. Samples are in microseconds; values
//! below 1 µs (a log's clock resolution) are taken as 1 µs so that every family is
//! defined on them.

/// A fitted family, in the terms a workload file writes it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fitted {
    Exponential { mean: f64 },
    LogNormal { median: f64, p95: f64 },
    Weibull { scale: f64, shape: f64 },
    Pareto { scale: f64, shape: f64, max: f64 },
}

/// A fit and what it rests on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    pub dist: Fitted,
    pub aic: f64,
    pub samples: usize,
    pub median: f64,
}

const Z95: f64 = 1.644_853_626_951_472_2;

/// The best of the four families for `xs` (µs), or `None` with fewer than 2 samples or
/// samples all alike.
pub(crate) fn best(xs: &[f64]) -> Option<Fit> {
    let xs: Vec<f64> = xs
        .iter()
        .filter(|x| x.is_finite())
        .map(|x| x.max(1.0))
        .collect();
    let n = xs.len();
    if n < 2 {
        return None;
    }
    let nf = n as f64;
    let logs: Vec<f64> = xs.iter().map(|x| x.ln()).collect();
    let sum: f64 = xs.iter().sum();
    let sum_log: f64 = logs.iter().sum();
    let (min, max) = xs
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    if max <= min {
        return None;
    }
    let mut fits = Vec::new();
    // Exponential: rate 1/mean.
    let mean = sum / nf;
    fits.push((Fitted::Exponential { mean }, 1.0, -nf * mean.ln() - nf));
    // Lognormal: the mean and deviation of the logs.
    let mu = sum_log / nf;
    let var = logs.iter().map(|l| (l - mu).powi(2)).sum::<f64>() / nf;
    if var > 0.0 {
        let sigma = var.sqrt();
        let ll = -sum_log - nf * (sigma * (2.0 * std::f64::consts::PI).sqrt()).ln() - nf / 2.0;
        fits.push((
            Fitted::LogNormal {
                median: mu.exp(),
                p95: (mu + Z95 * sigma).exp(),
            },
            2.0,
            ll,
        ));
    }
    // Weibull: the shape by Newton's method on the profile likelihood.
    if let Some((scale, shape)) = weibull(&xs, &logs) {
        let ll = nf * (shape / scale).ln() + (shape - 1.0) * (sum_log - nf * scale.ln())
            - xs.iter().map(|x| (x / scale).powf(shape)).sum::<f64>();
        fits.push((Fitted::Weibull { scale, shape }, 2.0, ll));
    }
    // Pareto from the smallest sample, capped at the largest (the cap is not a parameter
    // of the likelihood, as it is the data's own maximum).
    let excess: f64 = logs.iter().map(|l| l - min.ln()).sum();
    if excess > 0.0 {
        let shape = nf / excess;
        let ll = nf * shape.ln() + nf * shape * min.ln() - (shape + 1.0) * sum_log;
        fits.push((
            Fitted::Pareto {
                scale: min,
                shape,
                max: max * 1.000_001,
            },
            2.0,
            ll,
        ));
    }
    let mut sorted = xs.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[n / 2];
    fits.into_iter()
        .filter(|(_, _, ll)| ll.is_finite())
        .map(|(dist, k, ll)| Fit {
            dist,
            aic: 2.0 * k - 2.0 * ll,
            samples: n,
            median,
        })
        .min_by(|a, b| a.aic.total_cmp(&b.aic))
}

/// The 1st percentile of `xs` (0 with fewer than 100 samples, or when it is not below
/// half the median: then there is no floor to tell from thinking).
pub(crate) fn floor(xs: &[f64]) -> f64 {
    if xs.len() < 100 {
        return 0.0;
    }
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let (p1, median) = (v[v.len() / 100], v[v.len() / 2]);
    if p1 < median / 2.0 { p1.max(0.0) } else { 0.0 }
}

/// The Weibull maximum-likelihood (scale, shape), or `None` if Newton does not settle.
fn weibull(xs: &[f64], logs: &[f64]) -> Option<(f64, f64)> {
    let nf = xs.len() as f64;
    let mean_log = logs.iter().sum::<f64>() / nf;
    // Work on x / max so that x^k stays finite for large shapes.
    let top = xs.iter().copied().fold(f64::MIN, f64::max);
    let ys: Vec<f64> = xs.iter().map(|x| x / top).collect();
    let lys: Vec<f64> = ys.iter().map(|y| y.ln()).collect();
    let mut k = 1.0f64;
    for _ in 0..100 {
        let (mut a, mut b, mut c) = (0.0, 0.0, 0.0);
        for (y, l) in ys.iter().zip(&lys) {
            let p = y.powf(k);
            a += p;
            b += p * l;
            c += p * l * l;
        }
        if a <= 0.0 {
            return None;
        }
        // f(k) = b/a - 1/k - mean(ln y) = 0
        let mean_ly = mean_log - top.ln();
        let f = b / a - 1.0 / k - mean_ly;
        let df = (c * a - b * b) / (a * a) + 1.0 / (k * k);
        if df.is_nan() || df <= 0.0 {
            return None;
        }
        let next = (k - f / df).clamp(k / 4.0, k * 4.0);
        if (next - k).abs() < 1e-9 * k {
            k = next;
            let a: f64 = ys.iter().map(|y| y.powf(k)).sum();
            let scale = top * (a / nf).powf(1.0 / k);
            return (scale.is_finite() && scale > 0.0).then_some((scale, k));
        }
        k = next;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_distr::Distribution;

    fn draw(d: impl Distribution<f64>, n: usize) -> Vec<f64> {
        let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(7);
        (0..n).map(|_| d.sample(&mut rng)).collect()
    }

    #[test]
    fn each_family_is_recognised_from_its_own_samples() {
        let ln = best(&draw(rand_distr::LogNormal::new(10.0, 0.8).unwrap(), 5000)).unwrap();
        let Fitted::LogNormal { median, .. } = ln.dist else {
            panic!("{ln:?}")
        };
        assert!((median / 10f64.exp() - 1.0).abs() < 0.05, "{ln:?}");
        let ex = best(&draw(rand_distr::Exp::new(1.0 / 50_000.0).unwrap(), 5000)).unwrap();
        let Fitted::Exponential { mean } = ex.dist else {
            panic!("{ex:?}")
        };
        assert!((mean / 50_000.0 - 1.0).abs() < 0.05, "{ex:?}");
        let wb = best(&draw(
            rand_distr::Weibull::new(20_000.0, 3.0).unwrap(),
            5000,
        ))
        .unwrap();
        let Fitted::Weibull { scale, shape } = wb.dist else {
            panic!("{wb:?}")
        };
        assert!(
            (scale / 20_000.0 - 1.0).abs() < 0.05 && (shape / 3.0 - 1.0).abs() < 0.1,
            "{wb:?}"
        );
        let pa = best(&draw(rand_distr::Pareto::new(1000.0, 1.5).unwrap(), 5000)).unwrap();
        let Fitted::Pareto { scale, shape, .. } = pa.dist else {
            panic!("{pa:?}")
        };
        assert!(
            (scale / 1000.0 - 1.0).abs() < 0.01 && (shape / 1.5 - 1.0).abs() < 0.1,
            "{pa:?}"
        );
    }

    #[test]
    fn too_few_or_identical_samples_fit_nothing() {
        assert_eq!(best(&[5.0]), None);
        assert_eq!(best(&[5.0, 5.0, 5.0]), None);
        assert_eq!(best(&[f64::NAN, 1.0]), None);
    }
}
