//! Distributions for think times, sizes and counts: `constant`, `uniform`,
//! `exponential {mean, max?}`, `normal {mean, stddev}` (truncated at 0), `lognormal
//! {median, p95, max?}`, `weibull {scale, shape, max?}`, `pareto {scale, shape, max}` (heavy
//! tailed, so its cap is required), `empirical: FILE` (samples, or a histogram of values
//! and counts, one a line). Values are plain `f64` in the base unit of what they describe
//! (microseconds, bytes, items); samplers are built once at resolve time so sampling on the
//! request path only draws numbers.

use rand::Rng;
use rand_distr::{Distribution, Exp, LogNormal, Normal, Pareto, Weibull};

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
    Uniform {
        low: f64,
        high: f64,
    },
    Exponential {
        mean: f64,
        max: Option<f64>,
    },
    Normal {
        mean: f64,
        stddev: f64,
    },
    /// Values above `max` are drawn again.
    LogNormal {
        median: f64,
        p95: f64,
        max: Option<f64>,
    },
    Weibull {
        scale: f64,
        shape: f64,
        max: Option<f64>,
    },
    /// `scale` is the smallest value; values above `max` are drawn again.
    Pareto {
        scale: f64,
        shape: f64,
        max: f64,
    },
    /// Values (ascending) with their cumulative counts, read from `path`.
    Empirical {
        path: String,
        values: std::sync::Arc<[f64]>,
        cumulative: std::sync::Arc<[f64]>,
    },
}

#[derive(Debug, Clone)]
enum Sampler {
    Constant(f64),
    Uniform(f64, f64),
    Exp(Exp<f64>, Option<f64>),
    Normal(Normal<f64>),
    LogNormal(LogNormal<f64>, Option<f64>),
    Weibull(Weibull<f64>, Option<f64>),
    Pareto(Pareto<f64>, f64),
    Empirical(std::sync::Arc<[f64]>, std::sync::Arc<[f64]>),
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
        Dist::new_in(spec, &|v| format!("{v}"))
    }

    /// Build a sampler whose values are in a unit: a message that is out of range writes
    /// them with `fmt` (`2s`, `4KiB`), as the user wrote them.
    pub fn new_in(spec: DistSpec, fmt: &dyn Fn(f64) -> String) -> Result<Dist, String> {
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
                        "uniform needs 0 <= low <= high, got [{}, {}]",
                        fmt(*low),
                        fmt(*high)
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
            DistSpec::LogNormal { median, p95, max } => {
                if let Some(m) = max
                    && m < median
                {
                    return Err(format!(
                        "lognormal max must be at least its median, got median {}, max {}",
                        fmt(*median),
                        fmt(*m)
                    ));
                }
                if *median <= 0.0 || p95 < median {
                    return Err(format!(
                        "lognormal needs 0 < median <= p95, got median {}, p95 {}",
                        fmt(*median),
                        fmt(*p95)
                    ));
                }
                let mu = median.ln();
                let sigma = (p95.ln() - mu) / Z95;
                Sampler::LogNormal(
                    LogNormal::new(mu, sigma).map_err(|e| format!("lognormal: {e}"))?,
                    *max,
                )
            }
            DistSpec::Weibull { scale, shape, max } => {
                if !(*scale > 0.0 && *shape > 0.0) || max.is_some_and(|m| m <= 0.0) {
                    return Err(format!(
                        "weibull needs scale > 0, shape > 0 (and max > 0), got scale {}, shape {shape}",
                        fmt(*scale)
                    ));
                }
                Sampler::Weibull(
                    Weibull::new(*scale, *shape).map_err(|e| format!("weibull: {e}"))?,
                    *max,
                )
            }
            DistSpec::Pareto { scale, shape, max } => {
                if !(*scale > 0.0 && *shape > 0.0 && max > scale) {
                    return Err(format!(
                        "pareto needs scale > 0, shape > 0 and max > scale, got scale {}, shape {shape}, max {}",
                        fmt(*scale),
                        fmt(*max)
                    ));
                }
                Sampler::Pareto(
                    Pareto::new(*scale, *shape).map_err(|e| format!("pareto: {e}"))?,
                    *max,
                )
            }
            DistSpec::Empirical {
                values, cumulative, ..
            } => {
                if values.is_empty() || cumulative.last().is_none_or(|t| *t <= 0.0) {
                    return Err("an empirical distribution needs at least one sample".into());
                }
                Sampler::Empirical(values.clone(), cumulative.clone())
            }
        };
        Ok(Dist { spec, sampler })
    }

    /// Draw one value (never negative).
    /// Draw a count: the value rounded, at least 0 and at most `max` (how many items a
    /// user's set-up makes, say).
    pub fn sample_count<R: Rng + ?Sized>(&self, rng: &mut R, max: u64) -> u64 {
        (self.sample(rng).round().max(0.0) as u64).min(max)
    }

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
            Sampler::LogNormal(l, max) => capped(|r| l.sample(r), *max, rng),
            Sampler::Weibull(w, max) => capped(|r| w.sample(r), *max, rng),
            Sampler::Pareto(p, max) => capped(|r| p.sample(r), Some(*max), rng),
            Sampler::Empirical(values, cumulative) => {
                let total = cumulative.last().copied().unwrap_or(0.0);
                let x = unit_f64(rng) * total;
                let i = cumulative.partition_point(|c| *c <= x);
                values.get(i).or(values.last()).copied().unwrap_or(0.0)
            }
        }
    }

    /// The largest value it draws, when it has one (a normal, or a lognormal without a
    /// `max`, has none).
    pub fn upper_bound(&self) -> Option<f64> {
        match &self.spec {
            DistSpec::Constant(v) => Some(*v),
            DistSpec::Uniform { high, .. } => Some(*high),
            DistSpec::Exponential { max, .. }
            | DistSpec::Weibull { max, .. }
            | DistSpec::LogNormal { max, .. } => *max,
            DistSpec::Pareto { max, .. } => Some(*max),
            DistSpec::Normal { .. } => None,
            DistSpec::Empirical { values, .. } => values.last().copied(),
        }
    }

    /// The mean of the distribution (before truncation or caps), for plans.
    pub fn mean(&self) -> f64 {
        match &self.spec {
            DistSpec::Constant(v) => *v,
            DistSpec::Uniform { low, high } => (low + high) / 2.0,
            DistSpec::Exponential { mean, .. } => *mean,
            DistSpec::Normal { mean, .. } => *mean,
            DistSpec::LogNormal { median, p95, .. } => {
                let sigma = (p95.ln() - median.ln()) / Z95;
                median * (sigma * sigma / 2.0).exp()
            }
            DistSpec::Weibull { scale, shape, .. } => {
                scale * statrs::function::gamma::gamma(1.0 + 1.0 / shape)
            }
            // The mean of the Pareto truncated to [scale, max], as it is drawn.
            DistSpec::Pareto { scale, shape, max } => {
                let (l, h, a) = (*scale, *max, *shape);
                if (a - 1.0).abs() < 1e-12 {
                    h * l / (h - l) * (h / l).ln()
                } else {
                    l.powf(a) / (1.0 - (l / h).powf(a)) * a / (a - 1.0)
                        * (l.powf(1.0 - a) - h.powf(1.0 - a))
                }
            }
            DistSpec::Empirical {
                values, cumulative, ..
            } => {
                let mut before = 0.0;
                let mut sum = 0.0;
                for (v, c) in values.iter().zip(cumulative.iter()) {
                    sum += v * (c - before);
                    before = *c;
                }
                if before > 0.0 { sum / before } else { 0.0 }
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
            DistSpec::LogNormal { median, p95, max } => match max {
                Some(m) => format!(
                    "lognormal median {} p95 {} max {}",
                    fmt(*median),
                    fmt(*p95),
                    fmt(*m)
                ),
                None => format!("lognormal median {} p95 {}", fmt(*median), fmt(*p95)),
            },
            DistSpec::Weibull { scale, shape, max } => match max {
                Some(m) => format!(
                    "weibull scale {} shape {shape} max {}",
                    fmt(*scale),
                    fmt(*m)
                ),
                None => format!("weibull scale {} shape {shape}", fmt(*scale)),
            },
            DistSpec::Pareto { scale, shape, max } => {
                format!(
                    "pareto scale {} shape {shape} max {}",
                    fmt(*scale),
                    fmt(*max)
                )
            }
            DistSpec::Empirical {
                path, cumulative, ..
            } => format!(
                "empirical {path} ({} samples, mean {})",
                cumulative.last().copied().unwrap_or(0.0),
                fmt(self.mean())
            ),
        }
    }
}

/// Sample values, ascending, and their cumulative counts.
pub(crate) type Samples = (Vec<f64>, Vec<f64>);

/// Where a samples file is wrong: line, column (from 1) and what.
pub(crate) type SampleError = (usize, usize, String);

/// The most lines an empirical distribution's file may give.
pub(crate) const MAX_SAMPLE_LINES: usize = 1_000_000;

/// An empirical distribution's samples: one value a line (`120ms`), or a value and how
/// many times it was seen (`120ms 42`); blank lines and `#` comments skipped. `value`
/// reads one value in the distribution's unit. On a mistake: its line, column and what.
pub(crate) fn parse_samples(
    text: &str,
    value: &dyn Fn(&str) -> Result<f64, String>,
) -> Result<Samples, SampleError> {
    let mut pairs: Vec<(f64, f64)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if pairs.len() >= MAX_SAMPLE_LINES {
            return Err((
                i + 1,
                1,
                format!("more than {MAX_SAMPLE_LINES} lines of samples"),
            ));
        }
        let col = |field: &str| {
            line.find(field)
                .map_or(1, |b| line[..b].chars().count() + 1)
        };
        let mut fields = trimmed.split_whitespace();
        let v_text = fields.next().unwrap_or_default();
        let v = value(v_text).map_err(|m| (i + 1, col(v_text), m))?;
        if !(v.is_finite() && v >= 0.0) {
            return Err((i + 1, col(v_text), format!("'{v_text}' is not a value ≥ 0")));
        }
        let n = match fields.next() {
            None => 1.0,
            Some(c) => match c.parse::<u64>() {
                Ok(n) if n <= 1 << 40 => n as f64,
                _ => {
                    return Err((
                        i + 1,
                        col(c),
                        format!("'{c}' is not a count (a whole number up to 2^40)"),
                    ));
                }
            },
        };
        if let Some(extra) = fields.next() {
            return Err((
                i + 1,
                col(extra),
                "a line holds a value, or a value and its count".into(),
            ));
        }
        pairs.push((v, n));
    }
    pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut total = 0.0;
    let (values, cumulative) = pairs
        .into_iter()
        .filter(|(_, n)| *n > 0.0)
        .map(|(v, n)| {
            total += n;
            (v, total)
        })
        .unzip();
    Ok((values, cumulative))
}

/// A draw at most `max`: drawn again above it, and `max` after 64 tries, so that a cap
/// far into the body of the distribution cannot spin.
fn capped<R: Rng + ?Sized>(
    mut draw: impl FnMut(&mut R) -> f64,
    max: Option<f64>,
    rng: &mut R,
) -> f64 {
    for _ in 0..64 {
        let v = draw(rng);
        if max.is_none_or(|m| v <= m) {
            return v;
        }
    }
    max.unwrap_or(0.0)
}

/// A uniform draw in [0, 1) from the top 53 bits, independent of rand's float conventions
/// so that plans stay the same across rand releases.
pub(crate) fn unit_f64<R: Rng + ?Sized>(rng: &mut R) -> f64 {
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
            max: None,
        })
        .unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let mut v: Vec<f64> = (0..100_001).map(|_| l.sample(&mut rng)).collect();
        v.sort_by(f64::total_cmp);
        assert!((v[50_000] - 10.0).abs() < 0.3, "median {}", v[50_000]);
        assert!((v[95_000] - 30.0).abs() < 1.5, "p95 {}", v[95_000]);
    }

    #[test]
    fn weibull_and_capped_pareto_have_their_means() {
        let w = Dist::new(DistSpec::Weibull {
            scale: 100.0,
            shape: 1.5,
            max: None,
        })
        .unwrap();
        let m = mean_of(&w, 200_000);
        assert!(
            (m - w.mean()).abs() / w.mean() < 0.01,
            "{m} vs {}",
            w.mean()
        );
        let p = Dist::new(DistSpec::Pareto {
            scale: 10.0,
            shape: 1.2,
            max: 1000.0,
        })
        .unwrap();
        let m = mean_of(&p, 400_000);
        assert!(
            (m - p.mean()).abs() / p.mean() < 0.02,
            "{m} vs {}",
            p.mean()
        );
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
        for _ in 0..10_000 {
            let v = p.sample(&mut rng);
            assert!((10.0..=1000.0).contains(&v), "{v}");
        }
        assert!(
            Dist::new(DistSpec::Pareto {
                scale: 10.0,
                shape: 1.0,
                max: 5.0
            })
            .is_err()
        );
    }

    #[test]
    fn an_empirical_distribution_draws_its_samples_by_their_counts() {
        let value = |t: &str| {
            t.parse::<f64>()
                .map_err(|_| format!("'{t}' is not a number"))
        };
        let (values, cumulative) = parse_samples("# think\n5 3\n\n1\n", &value).unwrap();
        assert_eq!(
            (values.clone(), cumulative.clone()),
            (vec![1.0, 5.0], vec![1.0, 4.0])
        );
        let d = Dist::new(DistSpec::Empirical {
            path: "s".into(),
            values: values.into(),
            cumulative: cumulative.into(),
        })
        .unwrap();
        assert!((d.mean() - 4.0).abs() < 1e-12);
        assert!((mean_of(&d, 100_000) - 4.0).abs() < 0.05);
        assert_eq!(parse_samples("1\n  x 2\n", &value).unwrap_err().0, 2);
        assert_eq!(parse_samples("1 2 3\n", &value).unwrap_err().1, 5);
        assert!(parse_samples("1 -2\n", &value).is_err());
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
        // A lognormal whose p95 is past its cap: one draw in ten or so is above it, and
        // is drawn again.
        let l = Dist::new(DistSpec::LogNormal {
            median: 1.0,
            p95: 4.0,
            max: Some(3.0),
        })
        .unwrap();
        assert_eq!(l.upper_bound(), Some(3.0));
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let mut near = 0;
        for _ in 0..10_000 {
            assert!(e.sample(&mut rng) <= 60.0);
            assert!(n.sample(&mut rng) >= 0.0);
            let x = l.sample(&mut rng);
            assert!(x <= 3.0, "{x}");
            near += usize::from(x > 2.5);
        }
        assert!(near > 0, "the cap is not a clamp to far below it");
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
                p95: 5.0,
                max: None
            })
            .is_err()
        );
        assert!(
            Dist::new(DistSpec::LogNormal {
                median: 10.0,
                p95: 50.0,
                max: Some(5.0)
            })
            .is_err()
        );
        assert!(Dist::new(DistSpec::Constant(-1.0)).is_err());
    }
}
