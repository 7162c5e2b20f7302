//! Distributions for think times, sizes and counts: `constant`, `uniform`,
//! `exponential {mean, max?}`, `normal {mean, stddev}` (truncated at 0), `lognormal
//! {median, p95}`. Values are plain `f64` in the base unit of what they describe
//! (microseconds, bytes, items); samplers are built once at resolve time so sampling on the
//! request path only draws numbers.

use rand::Rng;
use rand_distr::{Distribution, Exp, LogNormal, Normal};

/// What a distribution's numbers mean, so `10ms` and `4KiB` are read in the right unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Microseconds; written as durations.
    Duration,
    /// Bytes; written as sizes.
    Size,
    /// Plain non-negative numbers (items in a collection, say).
    Count,
}

/// A resolved, ready-to-sample distribution.
#[derive(Debug, Clone)]
pub struct Dist {
    pub spec: DistSpec,
    sampler: Sampler,
}

/// The distribution as the user described it, kept for plans and reports.
#[derive(Debug, Clone, PartialEq)]
pub enum DistSpec {
    Constant(f64),
    Uniform { low: f64, high: f64 },
    Exponential { mean: f64, max: Option<f64> },
    Normal { mean: f64, stddev: f64 },
    LogNormal { median: f64, p95: f64 },
}

#[derive(Debug, Clone)]
enum Sampler {
    Constant(f64),
    Uniform(f64, f64),
    Exp(Exp<f64>, Option<f64>),
    Normal(Normal<f64>),
    LogNormal(LogNormal<f64>),
}

/// The 95th percentile of the standard normal, to turn a lognormal's p95 into its sigma.
const Z95: f64 = 1.644_853_626_951_472_2;

/// Two distributions are equal when their specifications are (the sampler follows).
impl PartialEq for Dist {
    fn eq(&self, other: &Dist) -> bool {
        self.spec == other.spec
    }
}

impl Dist {
    pub fn constant(v: f64) -> Dist {
        Dist {
            spec: DistSpec::Constant(v),
            sampler: Sampler::Constant(v),
        }
    }

    /// Build a sampler; the message names the parameter that is out of range.
    pub fn new(spec: DistSpec) -> Result<Dist, String> {
        let sampler = match &spec {
            DistSpec::Constant(v) => {
                if *v < 0.0 {
                    return Err("must not be negative".into());
                }
                Sampler::Constant(*v)
            }
            DistSpec::Uniform { low, high } => {
                if *low < 0.0 || high < low {
                    return Err(format!(
                        "uniform needs 0 <= low <= high, got [{low}, {high}]"
                    ));
                }
                Sampler::Uniform(*low, *high)
            }
            DistSpec::Exponential { mean, max } => {
                if *mean <= 0.0 {
                    return Err("exponential mean must be positive".into());
                }
                if let Some(m) = max
                    && *m <= 0.0
                {
                    return Err("exponential max must be positive".into());
                }
                let exp = Exp::new(1.0 / mean).map_err(|e| format!("exponential: {e}"))?;
                Sampler::Exp(exp, *max)
            }
            DistSpec::Normal { mean, stddev } => {
                if *stddev < 0.0 {
                    return Err("normal stddev must not be negative".into());
                }
                Sampler::Normal(Normal::new(*mean, *stddev).map_err(|e| format!("normal: {e}"))?)
            }
            DistSpec::LogNormal { median, p95 } => {
                if *median <= 0.0 || p95 < median {
                    return Err(format!(
                        "lognormal needs 0 < median <= p95, got median {median}, p95 {p95}"
                    ));
                }
                let mu = median.ln();
                let sigma = (p95.ln() - mu) / Z95;
                Sampler::LogNormal(
                    LogNormal::new(mu, sigma).map_err(|e| format!("lognormal: {e}"))?,
                )
            }
        };
        Ok(Dist { spec, sampler })
    }

    /// Draw one value (never negative).
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        match &self.sampler {
            Sampler::Constant(v) => *v,
            Sampler::Uniform(lo, hi) => {
                if hi > lo {
                    lo + (hi - lo) * unit_f64(rng)
                } else {
                    *lo
                }
            }
            Sampler::Exp(exp, max) => {
                // Redraw above the cap, as the 2007 client did for collection sizes; the
                // bound on attempts keeps a silly cap (far below the mean) from spinning.
                for _ in 0..64 {
                    let v = exp.sample(rng);
                    if max.is_none_or(|m| v <= m) {
                        return v;
                    }
                }
                max.unwrap_or(0.0)
            }
            Sampler::Normal(n) => n.sample(rng).max(0.0),
            Sampler::LogNormal(l) => l.sample(rng),
        }
    }

    /// The mean of the distribution (before truncation or caps), for plans.
    pub fn mean(&self) -> f64 {
        match &self.spec {
            DistSpec::Constant(v) => *v,
            DistSpec::Uniform { low, high } => (low + high) / 2.0,
            DistSpec::Exponential { mean, .. } => *mean,
            DistSpec::Normal { mean, .. } => *mean,
            DistSpec::LogNormal { median, p95 } => {
                let sigma = (p95.ln() - median.ln()) / Z95;
                median * (sigma * sigma / 2.0).exp()
            }
        }
    }

    /// Describe the distribution with values rendered by `fmt` (a duration or size printer).
    pub fn describe(&self, fmt: &dyn Fn(f64) -> String) -> String {
        match &self.spec {
            DistSpec::Constant(v) => fmt(*v),
            DistSpec::Uniform { low, high } => format!("uniform [{}, {}]", fmt(*low), fmt(*high)),
            DistSpec::Exponential { mean, max } => match max {
                Some(m) => format!("exponential mean {} max {}", fmt(*mean), fmt(*m)),
                None => format!("exponential mean {}", fmt(*mean)),
            },
            DistSpec::Normal { mean, stddev } => {
                format!("normal mean {} stddev {}", fmt(*mean), fmt(*stddev))
            }
            DistSpec::LogNormal { median, p95 } => {
                format!("lognormal median {} p95 {}", fmt(*median), fmt(*p95))
            }
        }
    }
}

/// A uniform draw in [0, 1) from the top 53 bits, independent of rand's float conventions
/// so that plans stay the same across rand releases.
pub fn unit_f64<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::Xoshiro256PlusPlus;

    fn mean_of(d: &Dist, n: usize) -> f64 {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        (0..n).map(|_| d.sample(&mut rng)).sum::<f64>() / n as f64
    }

    #[test]
    fn sample_means_match() {
        let u = Dist::new(DistSpec::Uniform {
            low: 0.0,
            high: 500.0,
        })
        .unwrap();
        assert!((mean_of(&u, 100_000) - 250.0).abs() < 3.0);
        let e = Dist::new(DistSpec::Exponential {
            mean: 50.0,
            max: None,
        })
        .unwrap();
        assert!((mean_of(&e, 100_000) - 50.0).abs() < 1.0);
        let l = Dist::new(DistSpec::LogNormal {
            median: 10.0,
            p95: 30.0,
        })
        .unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let mut v: Vec<f64> = (0..100_001).map(|_| l.sample(&mut rng)).collect();
        v.sort_by(f64::total_cmp);
        assert!((v[50_000] - 10.0).abs() < 0.3, "median {}", v[50_000]);
        assert!((v[95_000] - 30.0).abs() < 1.5, "p95 {}", v[95_000]);
    }

    #[test]
    fn caps_and_truncation_hold() {
        let e = Dist::new(DistSpec::Exponential {
            mean: 50.0,
            max: Some(60.0),
        })
        .unwrap();
        let n = Dist::new(DistSpec::Normal {
            mean: 1.0,
            stddev: 10.0,
        })
        .unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        for _ in 0..10_000 {
            assert!(e.sample(&mut rng) <= 60.0);
            assert!(n.sample(&mut rng) >= 0.0);
        }
    }

    #[test]
    fn bad_parameters_are_refused() {
        assert!(
            Dist::new(DistSpec::Uniform {
                low: 5.0,
                high: 1.0
            })
            .is_err()
        );
        assert!(
            Dist::new(DistSpec::Exponential {
                mean: 0.0,
                max: None
            })
            .is_err()
        );
        assert!(
            Dist::new(DistSpec::LogNormal {
                median: 10.0,
                p95: 5.0
            })
            .is_err()
        );
        assert!(Dist::new(DistSpec::Constant(-1.0)).is_err());
    }
}
