//! The dashboard: one page with no external resource (`dashboard.html`, its script and
//! styles inline) that polls `/live.json` once a second and draws what changed.
//!
//! The snapshot holds running totals only, the same atomics the progress line and the
//! Prometheus page read; the page works out each second's rates and percentiles from the
//! difference of two snapshots, so nothing on the run's side aggregates twice. At the end
//! its measured totals are the report's, request for request.
//!
//! The board also keeps one [`Second`] a second (each lane's operations summed, the last
//! [`KEEP`]), served as `/history.json`: a page opened late, reloaded, or after the run
//! draws its charts from the start from those, then goes on from `/live.json`.

use serde::Serialize;

use super::Board;
use crate::metrics::live::{
    BUCKETS_US, ERROR_CLASSES, LagSnapshot, LiveFailure, Phase, RateNow, TotalsSnapshot,
    error_names,
};

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
    errors: [&'static str; ERROR_CLASSES],
    lanes: Vec<LaneSnapshot>,
}

#[derive(Serialize, Clone)]
struct Process {
    cpu_s: f64,
    rss_bytes: Option<u64>,
}

#[derive(Serialize, Clone)]
struct LaneSnapshot {
    target: String,
    point: Option<String>,
    round: u32,
    rounds: u32,
    warmup_rounds: u32,
    warmup_s: f64,
    round_s: Option<f64>,
    phase: Phase,
    users: u64,
    /// Users of the round's set-up ready, and to set up.
    setup: (u64, u64),
    /// Requests off the clock: preflight, set-up, cleanup.
    untimed: [u64; 3],
    /// Each class's start lag so far.
    start_lag: Vec<LagSnapshot>,
    /// Operations per second over the round's last whole seconds (none before one).
    rate_now: Option<RateNow>,
    /// Seconds measured so far as the report counts them (rates are over these).
    measured_s: f64,
    /// The first kinds of failure, each counted, the earliest first.
    first_failures: Vec<LiveFailure>,
    /// Failures of kinds past the list.
    failures_unlisted: u64,
    ops: Vec<OpSnapshot>,
    /// The thresholds the page judges (not repeated in the history).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    rules: Vec<super::Rule>,
    /// The watched server processes' last second.
    watched: Vec<crate::monitor::Now>,
    /// The fault window on now, as the report names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    fault: Option<String>,
}

#[derive(Serialize, Clone)]
struct OpSnapshot {
    class: String,
    label: String,
    step: bool,
    measured: TotalsSnapshot,
    warmup: TotalsSnapshot,
    /// This operation's rate over the lane's last whole seconds.
    rate_now: Option<RateNow>,
}

/// Seconds of history the board keeps: the page's charts hold as many points.
pub(crate) const KEEP: usize = 1800;

/// One second of the run as the page's charts read it: each lane's operations (warm-up
/// and measured, steps apart) summed into one, with no failures listed.
#[derive(Serialize, Clone)]
pub(crate) struct Second {
    elapsed_s: f64,
    process: Process,
    lanes: Vec<LaneSnapshot>,
}

/// The board's lanes now, summed per lane, for the history.
pub(crate) fn second(b: &Board) -> Second {
    let lanes = lanes(b)
        .into_iter()
        .map(|mut l| {
            let mut all = TotalsSnapshot::default();
            for o in l.ops.iter().filter(|o| !o.step) {
                add(&mut all, &o.measured);
                add(&mut all, &o.warmup);
            }
            l.first_failures.clear();
            l.rules.clear();
            l.ops = vec![OpSnapshot {
                class: String::new(),
                label: "(all)".into(),
                step: false,
                measured: all,
                warmup: TotalsSnapshot::default(),
                rate_now: l.rate_now,
            }];
            l
        })
        .collect();
    Second {
        elapsed_s: b.elapsed().as_secs_f64(),
        process: process(),
        lanes,
    }
}

/// `x` added into `acc`.
fn add(acc: &mut TotalsSnapshot, x: &TotalsSnapshot) {
    acc.requests += x.requests;
    acc.successes += x.successes;
    for (a, f) in acc.failures.iter_mut().zip(x.failures) {
        *a += f;
    }
    acc.bytes_sent += x.bytes_sent;
    acc.bytes_received += x.bytes_received;
    if acc.buckets.len() < x.buckets.len() {
        acc.buckets.resize(x.buckets.len(), 0);
    }
    for (a, n) in acc.buckets.iter_mut().zip(&x.buckets) {
        *a += n;
    }
    acc.latency_sum_us += x.latency_sum_us;
}

/// The history as the page reads it: the latency buckets' bounds, and the [`Second`]s
/// oldest first.
pub(crate) fn history_json(seconds: &std::collections::VecDeque<Second>) -> String {
    #[derive(Serialize)]
    struct History<'a> {
        buckets_us: &'static [u64],
        seconds: &'a std::collections::VecDeque<Second>,
    }
    let h = History {
        buckets_us: &BUCKETS_US,
        seconds,
    };
    serde_json::to_string(&h).unwrap_or_else(|_| "{}".into())
}

fn process() -> Process {
    Process {
        cpu_s: crate::engine::host::cpu_time().as_secs_f64(),
        rss_bytes: crate::monitor::own_resident_bytes(),
    }
}

/// The board now, as the page reads it.
pub(crate) fn snapshot_json(b: &Board) -> String {
    let s = Snapshot {
        run_id: &b.run_id,
        workload: &b.workload,
        shard: b.shard.map(|(i, n)| format!("{i}/{n}")),
        elapsed_s: b.elapsed().as_secs_f64(),
        report: b.report().map(|p| p.display().to_string()),
        process: process(),
        buckets_us: &BUCKETS_US,
        errors: error_names(),
        lanes: lanes(b),
    };
    // Plain data with string keys: serialising it cannot fail.
    serde_json::to_string(&s).unwrap_or_else(|_| "{}".into())
}

/// Each lane's running totals, per operation.
fn lanes(b: &Board) -> Vec<LaneSnapshot> {
    b.lanes()
        .iter()
        .map(|l| {
            let (first_failures, failures_unlisted) = l.live.first_failures();
            LaneSnapshot {
                target: l.target.clone(),
                point: l.point.clone(),
                round: l.live.round(),
                rounds: l.rounds,
                warmup_rounds: l.warmup_rounds,
                warmup_s: l.warmup_s,
                round_s: l.round_s,
                phase: l.live.phase(),
                users: l.live.active_users(),
                setup: l.live.setup(),
                untimed: l.live.untimed(),
                start_lag: l.live.class_lag(),
                rate_now: l.live.rate_now(|_| true),
                measured_s: l.live.measured_s(),
                first_failures,
                failures_unlisted,
                rules: l.rules.clone(),
                watched: l.watched.lock().map(|w| w.clone()).unwrap_or_default(),
                fault: l.live.fault(),
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
                        rate_now: (!o.step)
                            .then(|| {
                                l.live
                                    .rate_now(|x| x.class == o.class && x.label == o.label)
                            })
                            .flatten(),
                    })
                    .collect(),
            }
        })
        .collect()
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

    #[test]
    fn a_second_sums_each_lanes_operations_steps_apart_and_the_history_keeps_the_last() {
        use crate::metrics::{LabelTable, Live};
        use std::sync::Arc;
        use std::sync::atomic::Ordering::Relaxed;
        let b = Board::new("r", "w", None);
        let labels = LabelTable::new(vec![(
            "reader".into(),
            vec!["get".into(), "put".into(), "get.login".into()],
        )]);
        let live = Arc::new(Live::new(&labels));
        let op = |label: &str| live.ops.iter().find(|o| o.label == label).unwrap();
        let get = &op("get").counted[0];
        get.requests.fetch_add(3, Relaxed);
        get.successes.fetch_add(2, Relaxed);
        get.failures[1].fetch_add(1, Relaxed);
        get.buckets[2].fetch_add(2, Relaxed);
        op("put").counted[1].requests.fetch_add(4, Relaxed);
        op("get.login").counted[0].requests.fetch_add(100, Relaxed);
        b.add(super::super::Lane {
            target: "t".into(),
            point: None,
            rounds: 1,
            warmup_rounds: 0,
            warmup_s: 0.0,
            round_s: Some(1.0),
            live,
            rules: vec![super::super::Rule {
                text: "p95 < 200ms".into(),
                op: "reader.get".into(),
                metric: "p95",
                cmp: "<",
                value: 200.0,
            }],
            watched: Arc::new(std::sync::Mutex::new(vec![crate::monitor::Now {
                label: "pid 7".into(),
                cpu_percent: 42.5,
            }])),
        });
        // The page judges the rules and shows the watched server from the snapshot.
        let now: serde_json::Value = serde_json::from_str(&snapshot_json(&b)).unwrap();
        let lane = &now["lanes"][0];
        assert_eq!(lane["rules"][0]["op"], "reader.get");
        assert_eq!(lane["rules"][0]["cmp"], "<");
        assert_eq!(lane["rules"][0]["value"], 200.0);
        assert_eq!(lane["watched"][0]["cpu_percent"], 42.5);
        let v = serde_json::to_value(second(&b)).unwrap();
        // A second of the history keeps the server's figures, not the rules again.
        assert!(v["lanes"][0].get("rules").is_none(), "{v}");
        assert_eq!(v["lanes"][0]["watched"][0]["label"], "pid 7");
        let ops = v["lanes"][0]["ops"].as_array().unwrap();
        assert_eq!(ops.len(), 1);
        assert_eq!(ops[0]["measured"]["requests"], 7, "{v}");
        assert_eq!(ops[0]["measured"]["failures"][1], 1);
        assert_eq!(ops[0]["measured"]["buckets"][2], 2);
        assert_eq!(ops[0]["warmup"]["requests"], 0);
        for _ in 0..KEEP + 5 {
            b.remember();
        }
        let h: serde_json::Value = serde_json::from_str(&b.history_json()).unwrap();
        let seconds = h["seconds"].as_array().unwrap();
        assert_eq!(seconds.len(), KEEP);
        assert_eq!(seconds[0]["lanes"][0]["ops"][0]["measured"]["requests"], 7);
        assert_eq!(
            h["buckets_us"].as_array().map(Vec::len),
            Some(BUCKETS_US.len())
        );
    }
}
