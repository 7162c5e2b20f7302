//! A run watched live, handed over by scripts/live_check.sh once it ended: a real
//! Prometheus (Debian's, scraping `--metrics` every second) stored the run's series, and
//! `loadmix serve` in its own process counted what it was sent. Every counter Prometheus
//! stored equals the report's, all of them together equal the server's count, its latency
//! buckets agree with the report's p99, and every Grafana panel's query finds series.

use loadmix::reports::Report;
use serde_json::Value;

use crate::handed::{ask, get, path, prom_sum, report, var};

/// A PromQL query against the handed Prometheus, at `time` (RFC 3339 or Unix seconds)
/// when given: its result vector.
fn query(q: &str, time: Option<&str>) -> Vec<Value> {
    let url = format!("{}/api/v1/query", var("LOADMIX_REAL_PROMETHEUS"));
    let q = format!("query={q}");
    let mut args = vec![
        "-sfG",
        "--max-time",
        "10",
        url.as_str(),
        "--data-urlencode",
        q.as_str(),
    ];
    let t;
    if let Some(time) = time {
        t = format!("time={time}");
        args.extend(["--data-urlencode", t.as_str()]);
    }
    let body: Value = serde_json::from_str(&ask("curl", &args)).expect("Prometheus answers JSON");
    assert_eq!(body["status"], "success", "{q}: {body}");
    body["data"]["result"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The single value of a query that sums to one sample.
fn value(q: &str) -> f64 {
    let result = query(q, None);
    let v = result
        .first()
        .and_then(|s| s["value"][1].as_str())
        .unwrap_or_else(|| panic!("{q}: no sample in {result:?}"));
    v.parse().unwrap_or_else(|_| panic!("{q}: {v}"))
}

/// Every counter starts at 0 with the process, so its last value in the TSDB is its
/// increase over the run (PromQL's increase() extrapolates to the window's edges).
fn last(series: &str) -> u64 {
    value(&format!("sum(last_over_time({series}[10m]))")) as u64
}

fn the_run() -> Report {
    report(&path("LOADMIX_REAL_LIVE_RUN"))
}

#[test]
#[ignore = "handed a watched run by scripts/live_check.sh"]
fn prometheus_stored_the_reports_counts_and_together_they_are_what_the_server_counted() {
    let r = the_run();
    let measured = r.summary.total.requests;
    let warmup: u64 = r.rounds.iter().map(|x| x.warmup_requests).sum();
    let preflight = r.preflight.requests;
    let setup: u64 = r.rounds.iter().map(|x| x.setup.requests).sum();
    let cleanup: u64 = r.rounds.iter().map(|x| x.cleanup.requests).sum();
    assert_eq!(last("loadmix_requests_total{phase=\"measured\"}"), measured);
    assert_eq!(last("loadmix_requests_total{phase=\"warmup\"}"), warmup);
    for (step, want) in [
        ("preflight", preflight),
        ("setup", setup),
        ("cleanup", cleanup),
    ] {
        let got = last(&format!(
            "loadmix_untimed_requests_total{{step=\"{step}\"}}"
        ));
        assert_eq!(got, want, "requests off the clock at {step}");
    }
    assert_eq!(
        last("loadmix_failures_total{phase=\"measured\"}"),
        r.summary.total.failures
    );
    let before: f64 = var("LOADMIX_REAL_LIVE_SERVED_BEFORE")
        .parse()
        .expect("a count");
    let after = prom_sum(
        &get(&var("LOADMIX_REAL_LIVE_SERVED_URL")),
        "loadmix_server_requests_total",
    );
    let sent = measured + warmup + preflight + setup + cleanup;
    eprintln!(
        "the series say {sent} requests were sent; loadmix serve counted {}",
        after - before
    );
    assert_eq!(sent, (after - before) as u64);
}

/// The index of the `loadmix_latency_seconds` bucket a latency in ms falls in.
fn bucket(ms: f64) -> usize {
    const BOUNDS_US: [f64; 18] = [
        100.0, 250.0, 500.0, 1e3, 2.5e3, 5e3, 1e4, 2.5e4, 5e4, 1e5, 2.5e5, 5e5, 1e6, 2.5e6, 5e6,
        1e7, 3e7, 6e7,
    ];
    let us = ms * 1000.0;
    BOUNDS_US
        .iter()
        .position(|b| us <= *b)
        .unwrap_or(BOUNDS_US.len())
}

#[test]
#[ignore = "handed a watched run by scripts/live_check.sh"]
fn each_operations_p99_from_prometheus_buckets_lands_in_the_reports_bucket_or_the_next() {
    let r = the_run();
    let mut compared = 0;
    for op in r.summary.ops.iter().filter(|o| o.successes >= 100) {
        let (class, label) = op.op.split_once('.').expect("class.operation");
        let q = format!(
            "histogram_quantile(0.99, sum by (le) (last_over_time(loadmix_latency_seconds_bucket\
             {{phase=\"measured\",class=\"{class}\",operation=\"{label}\"}}[10m])))"
        );
        let p99 = value(&q) * 1000.0;
        let want = op.latency_ms.p99;
        eprintln!(
            "{}: Prometheus p99 {p99:.3} ms, the report's {want:.3} ms",
            op.op
        );
        assert!(
            bucket(p99).abs_diff(bucket(want)) <= 1,
            "{}: more than one bucket off",
            op.op
        );
        compared += 1;
    }
    assert!(compared > 0, "no operation had 100 successes to compare");
}

#[test]
#[ignore = "handed a watched run by scripts/live_check.sh"]
fn every_grafana_panel_query_finds_series_in_the_middle_of_round_two() {
    let r = the_run();
    let started =
        chrono::DateTime::parse_from_rfc3339(&r.rounds[1].started_at).expect("an RFC 3339 start");
    // 3.5 s in: the rate now is there once a round has run two whole seconds (the last
    // settled one), and a query finds the scrape before it.
    let at = format!("{:.3}", started.timestamp_millis() as f64 / 1000.0 + 3.5);
    let file = crate::handed::root().join("deploy/grafana/loadmix.json");
    let dash: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let mut n = 0;
    for panel in dash["panels"].as_array().expect("panels") {
        for t in panel["targets"].as_array().expect("targets") {
            let e = t["expr"].as_str().expect("an expression");
            let e = e
                .replace("$__rate_interval", "4s")
                .replace("\"$run_id\"", "\".*\"");
            let found = query(&e, Some(&at));
            assert!(
                !found.is_empty(),
                "Grafana panel {}: {e} finds nothing",
                panel["title"]
            );
            n += 1;
        }
    }
    assert!(n > 0);
}
