//! The dashboard: one page with no external resource (`dashboard.html`, its script and
//! styles inline) that polls `/live.json` once a second and draws what changed.
//!
//! The snapshot holds running totals only, the same atomics the progress line and the
//! Prometheus page read; the page works out each second's rates and percentiles from the
//! difference of two snapshots, so nothing on the run's side aggregates twice. At the end
//! its measured totals are the report's, request for request.

use serde::Serialize;

use super::Board;
use crate::metrics::live::{BUCKETS_US, LiveFailure, Phase, TotalsSnapshot, error_names};

pub(crate) const DASHBOARD: &str = include_str!("dashboard.html");

#[derive(Serialize)]
struct Snapshot<'a> {
    run_id: &'a str,
    workload: &'a str,
    shard: Option<String>,
    /// Seconds since the run began, on the run's monotonic clock.
    elapsed_s: f64,
    /// The report page, once written (`/report` serves it).
    report: Option<String>,
    process: Process,
    buckets_us: &'static [u64],
    errors: [&'static str; 5],
    lanes: Vec<LaneSnapshot>,
}

#[derive(Serialize)]
struct Process {
    cpu_s: f64,
    rss_bytes: Option<u64>,
}

#[derive(Serialize)]
struct LaneSnapshot {
    target: String,
    point: Option<String>,
    round: u32,
    rounds: u32,
    warmup_rounds: u32,
    warmup_s: f64,
    phase: Phase,
    users: u64,
    /// Users of the round's set-up ready, and to set up.
    setup: (u64, u64),
    /// Requests off the clock: preflight, set-up, cleanup.
    untimed: [u64; 3],
    lag_sum_us: u64,
    lag_count: u64,
    first_failures: Vec<LiveFailure>,
    ops: Vec<OpSnapshot>,
}

#[derive(Serialize)]
struct OpSnapshot {
    class: String,
    label: String,
    step: bool,
    measured: TotalsSnapshot,
    warmup: TotalsSnapshot,
}

/// The board now, as the page reads it.
pub(crate) fn snapshot_json(b: &Board) -> String {
    let lanes = b
        .lanes()
        .iter()
        .map(|l| {
            let (lag_sum_us, lag_count) = l.live.lag();
            LaneSnapshot {
                target: l.target.clone(),
                point: l.point.clone(),
                round: l.live.round(),
                rounds: l.rounds,
                warmup_rounds: l.warmup_rounds,
                warmup_s: l.warmup_s,
                phase: l.live.phase(),
                users: l.live.active_users(),
                setup: l.live.setup(),
                untimed: l.live.untimed(),
                lag_sum_us,
                lag_count,
                first_failures: l.live.first_failures(),
                ops: l
                    .live
                    .ops
                    .iter()
                    .map(|o| OpSnapshot {
                        class: o.class.clone(),
                        label: o.label.clone(),
                        step: o.step,
                        measured: o.counted[0].snapshot(),
                        warmup: o.counted[1].snapshot(),
                    })
                    .collect(),
            }
        })
        .collect();
    let s = Snapshot {
        run_id: &b.run_id,
        workload: &b.workload,
        shard: b.shard.map(|(i, n)| format!("{i}/{n}")),
        elapsed_s: b.elapsed().as_secs_f64(),
        report: b.report().map(|p| p.display().to_string()),
        process: Process {
            cpu_s: crate::engine::host::cpu_time().as_secs_f64(),
            rss_bytes: crate::monitor::own_resident_bytes(),
        },
        buckets_us: &BUCKETS_US,
        errors: error_names(),
        lanes,
    };
    // Plain data with string keys: serialising it cannot fail.
    serde_json::to_string(&s).unwrap_or_else(|_| "{}".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_needs_nothing_from_outside() {
        for banned in [
            "src=",
            "href=\"http",
            "href=\"//",
            "url(",
            "@import",
            "<link",
        ] {
            assert!(!DASHBOARD.contains(banned), "{banned} in the dashboard");
        }
        assert!(DASHBOARD.contains("live.json"));
    }

    #[test]
    fn a_snapshot_of_an_empty_board_is_json() {
        let b = Board::new("r", "w", None);
        let v: serde_json::Value = serde_json::from_str(&snapshot_json(&b)).unwrap();
        assert_eq!(v["lanes"].as_array().map(Vec::len), Some(0));
        assert_eq!(
            v["buckets_us"].as_array().map(Vec::len),
            Some(BUCKETS_US.len())
        );
    }
}
