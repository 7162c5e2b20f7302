//! Times some of which are censored (known only to be at least what they had reached
//! when a round ended), and their Kaplan-Meier estimates: the visibility split's parts
//! and the gaps between an observer's looks.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use super::new_histogram;

/// A distribution of times some of which are censored: only known to be at least what
/// they had reached when the round ended (a gap still open then). Its percentiles are
/// estimated as survival times are (Kaplan-Meier: a censored value stays at risk up to
/// what it reached, and counts for nothing after), which is unbiased when the censoring
/// (the round's end) has nothing to do with the times themselves; a percentile the
/// exact values never reach is only a lower bound.
#[derive(Debug, Clone)]
pub(crate) struct Censored {
    /// The values known exactly (µs).
    pub exact: Histogram<u64>,
    /// The censored ones, at what they had reached (µs).
    pub censored: Histogram<u64>,
}

impl Default for Censored {
    fn default() -> Censored {
        Censored {
            exact: new_histogram(),
            censored: new_histogram(),
        }
    }
}

/// A percentile of a [`Censored`] distribution (µs), and whether it is only a lower
/// bound.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Estimate {
    pub us: u64,
    pub at_least: bool,
}

impl Censored {
    // 0 is recorded as 0 (a histogram's lowest discernible value bounds its precision,
    // not what it can hold): a staleness of none is written 0.
    pub(super) fn exact(&mut self, us: u64) {
        self.exact.saturating_record(us);
    }

    pub(super) fn at_least(&mut self, us: u64) {
        self.censored.saturating_record(us);
    }

    pub(crate) fn add(&mut self, o: &Censored) {
        // Same bounds on both sides: adding cannot fail.
        let _ = self.exact.add(&o.exact);
        let _ = self.censored.add(&o.censored);
    }

    pub(crate) fn len(&self) -> u64 {
        self.exact.len() + self.censored.len()
    }

    /// Per time (a bucket's highest value, µs): how many ended exactly there and how
    /// many were censored there, in time order.
    fn steps(&self) -> BTreeMap<u64, (u64, u64)> {
        let mut at: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
        for v in self.exact.iter_recorded() {
            at.entry(v.value_iterated_to()).or_default().0 += v.count_at_value();
        }
        for v in self.censored.iter_recorded() {
            at.entry(v.value_iterated_to()).or_default().1 += v.count_at_value();
        }
        at
    }

    /// The `q` quantile (0 < q < 1) of the times, by the Kaplan-Meier estimate over
    /// the histograms' buckets; `None` without a value.
    pub(crate) fn quantile(&self, q: f64) -> Option<Estimate> {
        let at = self.steps();
        let mut at_risk = self.len();
        let mut surviving = 1.0f64;
        for (&us, &(done, cut)) in &at {
            if done > 0 && at_risk > 0 {
                surviving *= 1.0 - done as f64 / at_risk as f64;
                if 1.0 - surviving >= q - 1e-9 {
                    return Some(Estimate {
                        us,
                        at_least: false,
                    });
                }
            }
            at_risk = at_risk.saturating_sub(done + cut);
        }
        // Beyond every exact value: at least the largest time seen.
        at.keys()
            .next_back()
            .map(|&us| Estimate { us, at_least: true })
    }

    /// The mean time by the Kaplan-Meier estimate: the area under its survival curve,
    /// when the curve reaches 0 (the longest time was seen whole); `None` otherwise.
    pub(crate) fn km_mean(&self) -> Option<f64> {
        let at = self.steps();
        let (mut at_risk, mut surviving, mut area, mut last) = (self.len(), 1.0f64, 0.0, 0u64);
        for (&us, &(done, cut)) in &at {
            area += surviving * (us - last) as f64;
            last = us;
            if done > 0 && at_risk > 0 {
                surviving *= 1.0 - done as f64 / at_risk as f64;
            }
            at_risk = at_risk.saturating_sub(done + cut);
            if surviving <= 1e-12 {
                return Some(area);
            }
        }
        None
    }

    /// The largest time, a lower bound when a censored one is the largest.
    pub(crate) fn max(&self) -> Option<Estimate> {
        let (e, c) = (!self.exact.is_empty(), !self.censored.is_empty());
        let (em, cm) = (self.exact.max(), self.censored.max());
        match (e, c) {
            (false, false) => None,
            (true, false) => Some(Estimate {
                us: em,
                at_least: false,
            }),
            (false, true) => Some(Estimate {
                us: cm,
                at_least: true,
            }),
            (true, true) => Some(Estimate {
                us: em.max(cm),
                at_least: cm > em,
            }),
        }
    }
}
