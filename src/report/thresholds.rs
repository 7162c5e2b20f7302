//! Thresholds: rules such as `{ op: morse.sync, p95: "< 200ms" }` or
//! `{ op: total, errors: "< 1%" }`, evaluated on the summary across rounds after the run.
//! Any failure makes the exit code 1 (CI gating).

use super::model::{OpReport, Report, ThresholdInfo};
use crate::workload::{Threshold, ThresholdMetric};

/// The rows a rule names: a sum, an operation, or every operation of a class.
pub(crate) fn rows_of<'r>(r: &'r Report, op: &str) -> Vec<&'r OpReport> {
    let s = &r.summary;
    if let Some(sum) = s.sum(op) {
        vec![sum]
    } else if s.ops.iter().any(|o| o.op == op) {
        s.ops.iter().filter(|o| o.op == op).collect()
    } else {
        s.ops
            .iter()
            .filter(|o| o.class.as_deref() == Some(op))
            .collect()
    }
}

/// The rows' successes by latency, merged: as users felt it (from the intended start)
/// where it was measured so and `felt` asks for it, else the service time.
pub(crate) fn latency_histogram(rows: &[&OpReport], felt: bool) -> hdrhistogram::Histogram<u64> {
    let mut h = crate::metrics::new_histogram();
    for o in rows {
        let encoded = match (felt, &o.histogram_corrected) {
            (true, Some(c)) => c,
            _ => &o.histogram,
        };
        if let Some(x) = super::model::decode_histogram(encoded) {
            let _ = h.add(&x);
        }
    }
    h
}

/// Operations of `rows` whose answer came after their client's timeout.
pub(crate) fn timed_out_for_client(rows: &[&OpReport]) -> u64 {
    let name = crate::transport::ErrorClass::ClientTimeout.name();
    rows.iter().filter_map(|o| o.errors.get(name)).sum()
}

/// The summary figures a rule names: the total, a class (its operations merged), or one
/// operation. `felt`: latencies from each operation's intended start where it had one
/// (open arrivals, paced users: what a user waited, queueing included), else the service
/// time.
pub(crate) fn figure(r: &Report, op: &str, metric: ThresholdMetric, felt: bool) -> Option<f64> {
    let rows = rows_of(r, op);
    if rows.is_empty() {
        return None;
    }
    let requests: u64 = rows.iter().map(|o| o.requests).sum();
    let failures: u64 = rows.iter().map(|o| o.failures).sum();
    let rate: f64 = rows.iter().map(|o| o.ops_per_sec).sum();
    let shares = matches!(
        metric,
        ThresholdMetric::Errors | ThresholdMetric::TimedOutForClient | ThresholdMetric::OpsPerSec
    );
    if rows.len() > 1 && !shares {
        // Latency of a whole class: merge the operations' histograms.
        let h = latency_histogram(&rows, felt);
        if h.is_empty() {
            return None;
        }
        let ms = |v: u64| v as f64 / 1000.0;
        return Some(match metric {
            ThresholdMetric::P50 => ms(h.value_at_quantile(0.5)),
            ThresholdMetric::P90 => ms(h.value_at_quantile(0.9)),
            ThresholdMetric::P95 => ms(h.value_at_quantile(0.95)),
            ThresholdMetric::P99 => ms(h.value_at_quantile(0.99)),
            ThresholdMetric::P999 => ms(h.value_at_quantile(0.999)),
            ThresholdMetric::Mean => h.mean() / 1000.0,
            _ => ms(h.max()),
        });
    }
    let o = rows[0];
    let l = match (felt, &o.latency_corrected_ms) {
        (true, Some(c)) => c,
        _ => &o.latency_ms,
    };
    let latency_ok = o.successes > 0;
    Some(match metric {
        ThresholdMetric::Errors => {
            if requests == 0 {
                return None;
            }
            failures as f64 * 100.0 / requests as f64
        }
        ThresholdMetric::TimedOutForClient => {
            if requests == 0 {
                return None;
            }
            timed_out_for_client(&rows) as f64 * 100.0 / requests as f64
        }
        ThresholdMetric::OpsPerSec => rate,
        _ if !latency_ok => return None,
        ThresholdMetric::P50 => l.p50,
        ThresholdMetric::P90 => l.p90,
        ThresholdMetric::P95 => l.p95,
        ThresholdMetric::P99 => l.p99,
        ThresholdMetric::P999 => l.p999,
        ThresholdMetric::Mean => l.mean,
        ThresholdMetric::Max => l.max,
    })
}

/// Evaluate every rule against the report and record the results in it. Returns true when
/// all passed. A rule whose figure does not exist (no successful operation to take a
/// latency from) fails: a gate must not pass on no evidence.
pub(crate) fn evaluate(rules: &[Threshold], r: &mut Report) -> bool {
    let results: Vec<ThresholdInfo> = rules
        .iter()
        .map(|t| {
            let observed = figure(r, &t.op, t.metric, false);
            let passed = observed.is_some_and(|v| t.cmp.holds(v, t.value));
            ThresholdInfo {
                op: t.op.clone(),
                rule: t.text.clone(),
                observed,
                passed,
            }
        })
        .collect();
    let ok = results.iter().all(|t| t.passed);
    r.thresholds = results;
    ok
}

/// The pass/fail list for the console.
pub(crate) fn render(r: &Report) -> String {
    let mut out = String::new();
    if r.thresholds.is_empty() {
        return out;
    }
    out.push_str("\nthresholds:\n");
    for t in &r.thresholds {
        let seen = t
            .observed
            .map_or("no data".to_string(), |v| format!("{v:.3}"));
        out.push_str(&format!(
            "  {} {}: {} (observed {seen})\n",
            if t.passed { "PASS" } else { "FAIL" },
            t.op,
            t.rule
        ));
    }
    out
}
