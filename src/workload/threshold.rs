//! A workload's thresholds (`thresholds:`): a metric of an operation or of the run held to
//! a bound, judged on the measured figures (and live, on the running totals).

use crate::workload::units;

/// A pass/fail rule checked after the run.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// `total`, a class name, or `class.op`.
    pub op: String,
    pub metric: ThresholdMetric,
    pub cmp: Comparison,
    /// Milliseconds for latencies, percent for errors, per second for rates.
    pub value: f64,
    /// The rule as written, for the report.
    pub text: String,
}

impl Threshold {
    /// A rule's condition as written (`< 200ms`, `<= 1%`, `> 100/s`): its comparison and
    /// its bound in the metric's unit (milliseconds, percent, per second). The error says
    /// what is wrong with the text, for the caller to place.
    pub(crate) fn condition(
        metric: ThresholdMetric,
        text: &str,
    ) -> Result<(Comparison, f64), String> {
        let t = text.trim();
        let (cmp, rest) = if let Some(r) = t.strip_prefix("<=") {
            (Comparison::Le, r)
        } else if let Some(r) = t.strip_prefix(">=") {
            (Comparison::Ge, r)
        } else if let Some(r) = t.strip_prefix('<') {
            (Comparison::Lt, r)
        } else if let Some(r) = t.strip_prefix('>') {
            (Comparison::Gt, r)
        } else {
            return Err(format!("'{t}' needs a comparison first, e.g. \"< 200ms\""));
        };
        let rest = rest.trim();
        let value = match metric {
            ThresholdMetric::Errors | ThresholdMetric::TimedOutForClient => rest
                .strip_suffix('%')
                .and_then(|n| n.trim().parse::<f64>().ok())
                .filter(|p| (0.0..=100.0).contains(p))
                .ok_or_else(|| format!("'{rest}' is not a percentage such as 1%"))?,
            ThresholdMetric::OpsPerSec => match rest.parse::<f64>() {
                Ok(n) if n.is_finite() => n,
                _ => units::parse_rate(rest)?,
            },
            _ => units::parse_duration(rest)?.as_secs_f64() * 1e3,
        };
        Ok((cmp, value))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThresholdMetric {
    P50,
    P90,
    P95,
    P99,
    P999,
    Mean,
    Max,
    Errors,
    /// The share of operations whose answer came after the client's `client_timeout`.
    TimedOutForClient,
    OpsPerSec,
}

impl ThresholdMetric {
    pub const NAMES: &[(&'static str, ThresholdMetric)] = &[
        ("p50", ThresholdMetric::P50),
        ("p90", ThresholdMetric::P90),
        ("p95", ThresholdMetric::P95),
        ("p99", ThresholdMetric::P99),
        ("p99.9", ThresholdMetric::P999),
        ("mean", ThresholdMetric::Mean),
        ("max", ThresholdMetric::Max),
        ("errors", ThresholdMetric::Errors),
        ("timed_out_for_client", ThresholdMetric::TimedOutForClient),
        ("ops_per_sec", ThresholdMetric::OpsPerSec),
    ];
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    Lt,
    Le,
    Gt,
    Ge,
}

impl Comparison {
    /// Whether `observed` meets a rule of this comparison against `bound`.
    pub fn holds(self, observed: f64, bound: f64) -> bool {
        match self {
            Comparison::Lt => observed < bound,
            Comparison::Le => observed <= bound,
            Comparison::Gt => observed > bound,
            Comparison::Ge => observed >= bound,
        }
    }
}
