//! Where a group's sessions are cut: the histogram of its gaps on a log scale, the valley
//! between think times and the pauses between sessions in it, the far-out fence of the
//! gaps when they show none, and how far a session's requests reach (for telling whether
//! a log's edges cut it).

/// How one group of clients' requests are cut into sessions: the clients of one loadmix
/// class (its User-Agent names it), or every other client (the group `""`). Each group's
/// gaps are its own: a class of pollers pausing a second and a class of people thinking
/// for seconds have no one timeout between them.
#[derive(Debug, Clone, PartialEq)]
pub struct Cut {
    /// The loadmix class, or `""`.
    pub group: String,
    /// A gap longer than this ends a session, µs.
    pub timeout_us: i64,
    /// How far a session's requests lie apart within it (the 99th percentile of the
    /// group's gaps under the timeout), µs: a session that begins this close to the log's
    /// start, or ends this close to its end, may have more requests outside it.
    pub reach_us: i64,
    /// How the timeout was found.
    pub from: String,
}

/// Bins of the gap histogram: a twentieth of a decade each, from 1 µs to 10^11 µs.
pub(super) const BINS: usize = 220;

pub(super) fn bin(gap_us: i64) -> usize {
    if gap_us <= 1 {
        return 0;
    }
    (((gap_us as f64).log10() * 20.0) as usize).min(BINS - 1)
}

/// Bins a gap count is smoothed over, either side: a tenth of a decade.
const SMOOTH: usize = 2;

/// Poisson standard deviations a valley lies below the lower of its two peaks.
const SIGMAS: f64 = 4.0;

/// The timeout between the two kinds of gap in `hist`: think times within a session and
/// pauses between sessions, from `from_us` on; `None` when the gaps show no such valley.
///
/// The valley is the bin whose smoothed count lies deepest below the lower of the two
/// highest peaks either side of it (its prominence), the peaks at least half a decade
/// apart and the valley under half the lower peak. A split that maximises the variance
/// between the groups (Otsu) is not used: exponential think times spread over two decades
/// on a log scale and that split then falls inside them.
fn valley(hist: &[u64; BINS], from_us: i64) -> Option<i64> {
    let total: u64 = hist.iter().sum();
    if total < 10 {
        return None;
    }
    let smooth: Vec<u64> = (0..BINS)
        .map(|i| {
            hist[i.saturating_sub(SMOOTH)..=(i + SMOOTH).min(BINS - 1)]
                .iter()
                .sum()
        })
        .collect();
    let peak = |r: std::ops::Range<usize>| {
        r.clone()
            .map(|j| (smooth[j], j))
            .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
    };
    let mut best: Option<(u64, usize, usize, usize)> = None;
    let start = bin(from_us).max(1);
    for (i, &here) in smooth.iter().enumerate().take(BINS - 1).skip(start) {
        let (Some((left, l)), Some((right, r))) = (peak(0..i), peak(i + 1..BINS)) else {
            continue;
        };
        let lower = left.min(right);
        // Deep against the counts' own noise too: the lower peak stands four Poisson
        // standard deviations above the valley, so that a few stragglers in one kind's
        // tail are not taken for a second kind. Four, not three: the peaks are the
        // highest of many smoothed bins and the valley the lowest, and at three 14 in 300
        // samples of one kind of gap (think times over a floor, in a log's whole
        // milliseconds: the test below) showed a valley at 4-9 ms, where a twin's open
        // editors were once cut into sessions of one request each.
        let dip = lower.saturating_sub(here) as f64;
        let deep = here * 2 < lower && r - l >= 10 && dip * dip >= SIGMAS * SIGMAS * lower as f64;
        let prominence = lower - here.min(lower);
        if deep && best.is_none_or(|b| prominence > b.0) {
            best = Some((prominence, i, l, r));
        }
    }
    let (_, _, l, r) = best?;
    // The middle of the widest run of the fewest gaps between the two peaks, so that
    // neither group's tail is cut.
    let fewest = smooth[l..=r].iter().copied().min()?;
    let (mut run, mut widest) = (None::<usize>, (l, l));
    for i in l..=r + 1 {
        match (run, i <= r && smooth.get(i) == Some(&fewest)) {
            (None, true) => run = Some(i),
            (Some(a), false) => {
                if i - a > widest.1 - widest.0 {
                    widest = (a, i);
                }
                run = None;
            }
            _ => {}
        }
    }
    let x = |i: usize| i as f64 / 20.0;
    Some(10f64.powf((x(widest.0) + x(widest.1)) / 2.0).round() as i64)
}

/// A web analytics session's usual timeout, when the log shows too few gaps for a rule.
const DEFAULT_TIMEOUT_US: i64 = 30 * 60 * 1_000_000;

/// Gaps a group needs before a rule is drawn from them.
const FEW_GAPS: u64 = 4;

/// One group's gaps, as the first pass counts them: from an answer to the client's next
/// request, and from one request to the next (all a log whose clock counts whole seconds
/// can tell).
pub(super) struct Gaps {
    pub(super) group: String,
    pub(super) after_answer: [u64; BINS],
    pub(super) between_starts: [u64; BINS],
}

/// When the gaps show no valley: the far-out fence of their logarithms (Tukey's: the
/// upper quartile plus three interquartile ranges, the range at least a tenth of a
/// decade). Think times of one kind (lognormal, exponential) lie under it but for about
/// one gap in a million; a pause between sessions of another order lies past it. `None`
/// for fewer than [`FEW_GAPS`] gaps.
fn fence(hist: &[u64; BINS]) -> Option<i64> {
    let total: u64 = hist.iter().sum();
    if total < FEW_GAPS {
        return None;
    }
    let quantile = |q: f64| {
        let rank = ((q * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        hist.iter()
            .position(|&n| {
                seen += n;
                seen >= rank
            })
            .unwrap_or(BINS - 1)
    };
    let (q1, q3) = (quantile(0.25), quantile(0.75));
    let far = (q3 + 1) as f64 + 3.0 * ((q3 - q1) as f64).max(2.0);
    Some(10f64.powf(far / 20.0).round() as i64)
}

/// How far apart a session's requests lie, for telling whether the log's edges cut it:
/// the 99th percentile of the gaps under `timeout_us` in `hist` (its bin's upper edge),
/// µs; the timeout when there are none. A session this far from an edge is whole but for
/// about one chance in a hundred.
fn reach(hist: &[u64; BINS], timeout_us: i64) -> i64 {
    let under = &hist[..bin(timeout_us).min(BINS)];
    let total: u64 = under.iter().sum();
    if total == 0 {
        return timeout_us;
    }
    let rank = (total as f64 * 0.99).ceil() as u64;
    let mut seen = 0;
    let at = under
        .iter()
        .position(|&n| {
            seen += n;
            seen >= rank
        })
        .unwrap_or(under.len().saturating_sub(1));
    (10f64.powf((at + 1) as f64 / 20.0).round() as i64).min(timeout_us)
}

/// How a group's sessions are cut: at the given timeout, else at the valley in its gaps,
/// else at their far-out fence, else (too few gaps) at 30 minutes.
pub(super) fn cut_of(g: &Gaps, given: Option<i64>, subsecond: bool) -> Cut {
    // Whole seconds leave the bins between 1 s and 2 s, 2 s and 3 s... empty: the valley
    // is looked for where a bin spans more than a second.
    let (hist, found) = match subsecond {
        true => (&g.after_answer, valley(&g.after_answer, 0)),
        false => (&g.between_starts, valley(&g.between_starts, 10_000_000)),
    };
    let (timeout_us, from) = match (given, found, fence(hist)) {
        (Some(t), ..) => (t, "given".to_string()),
        (None, Some(t), _) => (
            t,
            "the valley between think times and pauses in the gaps".into(),
        ),
        (None, None, Some(t)) => (
            t,
            "the gaps show no valley between think times and pauses: the far-out fence of \
             their logarithms, Q3 + 3 IQR"
                .into(),
        ),
        (None, None, None) => (
            DEFAULT_TIMEOUT_US,
            "30 min: too few gaps to find a timeout from".into(),
        ),
    };
    Cut {
        group: g.group.clone(),
        timeout_us,
        reach_us: reach(hist, timeout_us),
        from,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timeout_is_the_valley_between_two_kinds_of_gap() {
        let mut h = [0u64; BINS];
        // Think times around 20 ms, pauses around 2 s.
        for g in [15_000, 20_000, 25_000, 18_000, 22_000] {
            h[bin(g)] += 100;
        }
        for g in [1_500_000, 2_000_000, 2_500_000] {
            h[bin(g)] += 30;
        }
        let t = valley(&h, 0).unwrap();
        assert!((25_000..1_500_000).contains(&t), "{t}");
        // One kind of gap only: no valley.
        let mut one = [0u64; BINS];
        for g in [15_000, 20_000, 25_000, 30_000] {
            one[bin(g)] += 100;
        }
        assert_eq!(valley(&one, 0), None);
    }

    /// Think times of one kind (Weibull, shape 0.75, as `infer` fits to a twin's editors)
    /// after a client's own work of 1-4 ms, as an nginx log keeps them (whole
    /// milliseconds): in many samples of 450 gaps, none shows a valley.
    #[test]
    fn think_times_over_the_gaps_floor_show_no_valley() {
        use rand::{RngExt, SeedableRng};
        use rand_distr::Distribution;
        let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(3);
        let think = rand_distr::Weibull::new(243.0, 0.75).unwrap();
        let found: Vec<i64> = (0..300)
            .filter_map(|_| {
                let mut h = [0u64; BINS];
                for _ in 0..450 {
                    let ms: f64 = think.sample(&mut rng) + rng.random_range(1.0..4.0);
                    h[bin(ms.floor() as i64 * 1_000)] += 1;
                }
                valley(&h, 0)
            })
            .collect();
        assert!(found.is_empty(), "valleys at {found:?} µs");
    }

    #[test]
    fn a_few_stragglers_in_one_kinds_tail_are_no_second_kind() {
        // Lognormal think times (median 300 ms, p95 2 s) of people who each come once:
        // 300 gaps whose tail thins out past 3 s into a few stragglers, and no pauses.
        let mut h = [0u64; BINS];
        let sigma = (2.0f64 / 0.3).ln() / 1.645;
        for k in 0..300 {
            let q = (k as f64 + 0.5) / 300.0;
            let z = std::f64::consts::SQRT_2 * inverse_erf(2.0 * q - 1.0);
            h[bin((300_000.0 * (sigma * z).exp()) as i64)] += 1;
        }
        for g in [9_000_000, 9_500_000, 10_000_000, 11_000_000, 12_000_000] {
            h[bin(g)] += 1;
        }
        assert_eq!(valley(&h, 0), None);
        // The rule then: the far-out fence of the logarithms, past every think time.
        let t = fence(&h).unwrap();
        assert!(t > 12_000_000, "{t}");
        // A session this far from the log's edges is whole: under the longest gap.
        let r = reach(&h, t);
        assert!((2_000_000..12_000_000).contains(&r), "{r}");
    }

    /// erf⁻¹ by Newton's method on `libm`-free erf (Abramowitz and Stegun 7.1.26).
    fn inverse_erf(y: f64) -> f64 {
        let erf = |x: f64| {
            let t = 1.0 / (1.0 + 0.3275911 * x.abs());
            let p = t
                * (0.254829592
                    + t * (-0.284496736
                        + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
            (1.0 - p * (-x * x).exp()).copysign(x)
        };
        let mut x = 0.0f64;
        for _ in 0..50 {
            let d = 2.0 / std::f64::consts::PI.sqrt() * (-x * x).exp();
            x -= (erf(x) - y) / d.max(1e-12);
        }
        x
    }

    #[test]
    fn exponential_think_times_are_not_split_from_themselves() {
        // Think times exponential of mean 150 ms spread over two decades on a log scale;
        // pauses of 2-3 s. The timeout belongs between them, not inside the think times.
        let mut h = [0u64; BINS];
        let n = 600;
        for k in 0..n {
            let q = (k as f64 + 0.5) / n as f64;
            h[bin((-150_000.0 * (1.0 - q).ln()) as i64)] += 1;
        }
        for k in 0..120 {
            h[bin(2_000_000 + k * 8_000)] += 1;
        }
        let t = valley(&h, 0).unwrap();
        assert!((900_000..2_000_000).contains(&t), "{t}");
    }
}
