//! Whether a step's samples can tell a rule: a percentile or an error share judged with
//! its uncertainty. A rule `p99 < 200ms` holds when fewer than 1 % of the operations take
//! 200 ms or more; the step's count of those is binomial, so its 95 % Clopper-Pearson
//! interval says whether the share is below 1 % (passed), above it (failed), or cannot be
//! told from this many samples (undecided). A p99 seen from 20 samples is the largest of
//! them and says nothing; the arithmetic says how many it takes.

use statrs::distribution::{Beta, Binomial, ContinuousCDF, DiscreteCDF};

use crate::workload::{Comparison, ThresholdMetric};

/// Two-sided confidence of every interval a step reports.
pub(crate) const CONFIDENCE: f64 = 0.95;

/// The tail share a rule is about: a percentile's (`p99`: 1 %), or an error share's own
/// bound; `None` for rules read as plain figures (mean, max, ops/s).
pub(crate) fn tail_of(metric: ThresholdMetric, bound: f64) -> Option<f64> {
    match metric {
        ThresholdMetric::P50 => Some(0.5),
        ThresholdMetric::P90 => Some(0.1),
        ThresholdMetric::P95 => Some(0.05),
        ThresholdMetric::P99 => Some(0.01),
        ThresholdMetric::P999 => Some(0.001),
        ThresholdMetric::Errors | ThresholdMetric::TimedOutForClient => Some(bound / 100.0),
        ThresholdMetric::Mean | ThresholdMetric::Max | ThresholdMetric::OpsPerSec => None,
    }
}

/// What a step's samples say of one rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Told {
    Passed,
    Failed,
    /// The interval holds the bound: this many samples cannot tell.
    Undecided,
}

/// The Clopper-Pearson interval of a binomial share: `beyond` of `n`.
pub(crate) fn share_interval(beyond: u64, n: u64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let a = (1.0 - CONFIDENCE) / 2.0;
    if n > EXACT_UP_TO {
        return wilson(beyond.min(n), n);
    }
    let (k, n) = (beyond.min(n) as f64, n as f64);
    let low = match Beta::new(k, n - k + 1.0) {
        Ok(b) if k > 0.0 => b.inverse_cdf(a),
        _ => 0.0,
    };
    let high = match Beta::new(k + 1.0, n - k) {
        Ok(b) if k < n => b.inverse_cdf(1.0 - a),
        _ => 1.0,
    };
    (low, high)
}

/// Up to this many samples the interval is Clopper-Pearson's, exact; past it, where the
/// beta quantiles grow slow and the two agree to a few parts in a thousand, Wilson's.
const EXACT_UP_TO: u64 = 20_000;

/// Wilson's score interval of `beyond` of `n` at [`CONFIDENCE`].
fn wilson(beyond: u64, n: u64) -> (f64, f64) {
    let z = 1.959_963_984_540_054_f64;
    let (k, n) = (beyond as f64, n as f64);
    let p = k / n;
    let centre = (p + z * z / (2.0 * n)) / (1.0 + z * z / n);
    let half = z / (1.0 + z * z / n) * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt();
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// A rule on a tail share: `beyond` of `n` samples were past the bound (an operation that
/// took the bound or longer; a failure), and the rule wants fewer than `tail` of them
/// (or more, for `>`).
pub(crate) fn tell(beyond: u64, n: u64, tail: f64, cmp: Comparison) -> Told {
    let (low, high) = share_interval(beyond, n);
    let below = high < tail;
    let above = low > tail;
    match (cmp, below, above) {
        (Comparison::Lt | Comparison::Le, true, _) => Told::Passed,
        (Comparison::Lt | Comparison::Le, _, true) => Told::Failed,
        (Comparison::Gt | Comparison::Ge, _, true) => Told::Passed,
        (Comparison::Gt | Comparison::Ge, true, _) => Told::Failed,
        _ => Told::Undecided,
    }
}

/// The fewest samples that can show a share below `tail` at all (none of them past the
/// bound): 367 for a p99, 3,687 for a p99.9.
pub(crate) fn fewest(tail: f64) -> u64 {
    if !(tail > 0.0 && tail < 1.0) {
        return 1;
    }
    // With none beyond, the interval's top is 1 − (α/2)^(1/n); below `tail` from here on.
    let a = (1.0 - CONFIDENCE) / 2.0;
    let n = (a.ln() / (1.0 - tail).ln()).ceil();
    (n.max(1.0) as u64).saturating_add(u64::from(share_interval(0, n as u64).1 >= tail))
}

/// The ranks, from 1, of the order statistics that bound a quantile `q` of `n` samples
/// with [`CONFIDENCE`]: the percentile's interval is between the samples of those ranks.
/// `None` for a bound beyond the samples (too few to bound it on that side).
pub(crate) fn quantile_ranks(q: f64, n: u64) -> (Option<u64>, Option<u64>) {
    if n == 0 {
        return (None, None);
    }
    let a = (1.0 - CONFIDENCE) / 2.0;
    let Ok(b) = Binomial::new(q.clamp(0.0, 1.0), n) else {
        return (None, None);
    };
    // The l-th smallest is below the quantile with probability P(Bin ≥ l) ≥ 1 − α/2.
    let low = smallest_at(&b, n, a);
    let high = smallest_at(&b, n, 1.0 - a).saturating_add(1);
    ((low >= 1).then_some(low), (high <= n).then_some(high))
}

/// The smallest k in 0..=n whose cumulative probability reaches `p`: a bisection over the
/// distribution's own CDF (statrs's default inverse can panic at its edges).
fn smallest_at(b: &Binomial, n: u64, p: f64) -> u64 {
    let (mut lo, mut hi) = (0u64, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match b.cdf(mid) >= p {
            true => hi = mid,
            false => lo = mid + 1,
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_p99_needs_hundreds_of_samples() {
        assert_eq!(fewest(0.01), 368);
        assert!(share_interval(0, 368).1 < 0.01);
        assert!(share_interval(0, 366).1 >= 0.01);
        assert!(fewest(0.001) > 3_600);
        assert_eq!(fewest(0.5), 6);
        // 20 samples, none slow: nothing can be told of a p99.
        assert_eq!(tell(0, 20, 0.01, Comparison::Lt), Told::Undecided);
        assert_eq!(tell(0, 400, 0.01, Comparison::Lt), Told::Passed);
        assert_eq!(tell(40, 400, 0.01, Comparison::Lt), Told::Failed);
        // 1 % exactly: cannot be told either way.
        assert_eq!(tell(10, 1000, 0.01, Comparison::Lt), Told::Undecided);
        // Never a panic, whatever the counts.
        for n in [0u64, 1, 2, 10, 1_000, 20_000, 20_001, 10_000_000] {
            for k in [0, 1, n / 2, n.saturating_sub(1), n, n + 5] {
                let (lo, hi) = share_interval(k, n);
                assert!((0.0..=1.0).contains(&lo) && (0.0..=1.0).contains(&hi) && lo <= hi);
            }
        }
    }

    #[test]
    fn the_interval_holds_the_truth_as_often_as_it_says() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let (p, n, trials) = (0.02, 500u64, 2_000);
        let mut held = 0;
        for _ in 0..trials {
            let k = (0..n).filter(|_| rng.random::<f64>() < p).count() as u64;
            let (lo, hi) = share_interval(k, n);
            held += usize::from(lo <= p && p <= hi);
        }
        // Clopper-Pearson is conservative: at least 95 %, less the noise of 2,000 trials.
        assert!(held as f64 / trials as f64 > 0.94, "{held}");
    }

    #[test]
    fn a_quantile_is_bounded_by_order_statistics() {
        // The median of 100: roughly the 40th to the 61st.
        let (lo, hi) = quantile_ranks(0.5, 100);
        assert!((38..=41).contains(&lo.unwrap()), "{lo:?}");
        assert!((60..=63).contains(&hi.unwrap()), "{hi:?}");
        // A p99 of 100 has no upper bound among them.
        assert_eq!(quantile_ranks(0.99, 100).1, None);
        assert!(quantile_ranks(0.99, 1000).1.is_some());
        // Never a panic, whatever the count.
        for n in [1, 2, 3, 7, 64, 1_000, 1_000_000] {
            for q in [0.0, 0.001, 0.5, 0.9, 0.999, 1.0] {
                let (lo, hi) = quantile_ranks(q, n);
                assert!(lo.is_none_or(|l| l >= 1 && l <= n) && hi.is_none_or(|h| h <= n));
            }
        }
    }
}
