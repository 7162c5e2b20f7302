//! A run's report held to a log: what `run.json` keeps of the traffic it made. Its
//! operation mix (the measured requests, named as the log's classifier names them),
//! and for classes with behaviours the sessions' operations and durations from their
//! counts (durations to two significant digits, as the report keeps them), their rate and
//! how many were open at once on average. Transitions, think times and burstiness are not
//! in a report: those checks are not judged.

use crate::report::Report;

use super::Traffic;

/// The most samples a report's counts are expanded to per distribution; past it they are
/// scaled down, every value keeping its share.
const MAX_SAMPLES: u64 = 1_000_000;

fn protocol_of(r: &Report, class: &str) -> Option<crate::workload::Protocol> {
    let c = r.workload.classes.iter().find(|c| c.name == class)?;
    crate::workload::Protocol::ALL
        .iter()
        .copied()
        .find(|p| p.name() == c.protocol)
}

/// `counts` as samples, `scale` times each value.
fn expand(counts: &[(u64, u64)], scale: f64, out: &mut Vec<f64>) {
    let total: u64 = counts.iter().fold(0u64, |a, (_, n)| a.saturating_add(*n));
    let keep = |n: u64| {
        if total <= MAX_SAMPLES {
            n
        } else {
            (n as f64 * MAX_SAMPLES as f64 / total as f64).round() as u64
        }
    };
    for (v, n) in counts {
        for _ in 0..keep(*n) {
            out.push(*v as f64 * scale);
        }
    }
}

/// What `r` shows of its traffic.
pub(super) fn traffic(r: &Report) -> Traffic {
    let mut t = Traffic {
        span_us: (r.summary.measured_s * 1e6).max(1.0) as i64,
        ..Default::default()
    };
    for o in &r.summary.ops {
        let Some(class) = o.class.as_deref() else {
            continue;
        };
        let label = o.op.strip_prefix(class).and_then(|l| l.strip_prefix('.'));
        let (Some(label), Some(p)) = (label, protocol_of(r, class)) else {
            continue;
        };
        if let Some((lp, name)) = super::model::log_name(p, label) {
            *t.ops.entry(format!("{}.{name}", lp.name())).or_default() += o.requests as f64;
        }
    }
    for round in &r.rounds {
        for c in &round.sessions {
            for b in &c.behaviours {
                // Every session started, as a log's are counted: those the round's end
                // cut too.
                t.sessions = t
                    .sessions
                    .saturating_add(usize::try_from(b.started).unwrap_or(usize::MAX));
                expand(&b.ops_per_session.counts, 1.0, &mut t.ops_per_session);
                // Durations are counted in milliseconds.
                expand(&b.duration_s.counts, 1e3, &mut t.duration_us);
            }
        }
    }
    t.busy_us = t.duration_us.iter().sum();
    t
}
