//! The live figures equal the report: the rate `/metrics` shows while a run goes is the
//! report's per-second series for the seconds it names.

use std::io::{Read, Write};

use crate::common::*;

/// One reading of the lane's rate now: the seconds of the round it is over, and its value.
#[derive(Debug)]
struct Reading {
    from: usize,
    to: usize,
    per_s: f64,
}

/// The lane's rate now (the sum of its operations' `loadmix_ops_per_second_now`) and its
/// window from one scrape, if present.
fn reading(page: &str) -> Option<Reading> {
    let lines: Vec<Result<String, std::io::Error>> =
        page.lines().map(|l| Ok(l.to_string())).collect();
    let scrape = prometheus_parse::Scrape::parse(lines.into_iter()).ok()?;
    let value = |s: &prometheus_parse::Sample| match s.value {
        prometheus_parse::Value::Gauge(v) | prometheus_parse::Value::Untyped(v) => Some(v),
        _ => None,
    };
    let find = |metric: &str, edge: &str| {
        scrape
            .samples
            .iter()
            .find(|s| s.metric == metric && s.labels.get("edge") == Some(edge))
            .and_then(value)
    };
    // The lane's rate is the sum over its operations.
    let per_op: Vec<f64> = scrape
        .samples
        .iter()
        .filter(|s| s.metric == "loadmix_ops_per_second_now")
        .filter_map(value)
        .collect();
    let w = "loadmix_ops_per_second_now_window_seconds";
    Some(Reading {
        per_s: (!per_op.is_empty()).then(|| per_op.iter().sum())?,
        from: find(w, "from")? as usize,
        to: find(w, "to")? as usize,
    })
}

fn scrape(port: u16) -> Option<String> {
    get(port, "/metrics")
}

/// An open class ramped from 100/s to 500/s: the rate now follows the ramp, and each
/// reading equals the report's requests per second over the seconds it names (a total
/// over the time so far would read far below, and a rate between two scrapes saw-tooths
/// with the users' hand-overs).
#[test]
fn the_rate_now_is_the_reports_per_second_series_for_the_seconds_it_names() {
    let _alone = alone();
    let rt = runtime();
    let srv = embedded(&rt);
    let tmp = tempdir();
    let w = tmp.path().join("w.yaml");
    std::fs::write(
        &w,
        format!(
            "target: {}\nrun: {{ duration: 12s, rounds: 1, warmup: 0s, seed: 5 }}\nusers:\n  - class: q\n    protocol: http\n    arrival: {{ rate: 100/s, max_concurrency: 2000 }}\n    ramp: [ {{ to: 500/s, over: 12s }} ]\n    mix:\n      wait: {{ weight: 1, path: '{{context}}/_loadmix/delay/2' }}\n",
            srv.url()
        ),
    )
    .unwrap();
    let out = out_dir(&tmp);
    let port = free_port();
    let metrics = format!("127.0.0.1:{port}");
    let args: Vec<String> = vec![
        "run".into(),
        path_str(&w),
        "--metrics".into(),
        metrics,
        "--quiet".into(),
        "--out".into(),
        path_str(&out),
    ];
    let run = std::thread::spawn(move || {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        loadmix(&a)
    });
    let mut readings = Vec::new();
    while !run.is_finished() {
        if let Some(r) = scrape(port).as_deref().and_then(reading) {
            readings.push(r);
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    assert_eq!(run.join().unwrap(), 0);
    let report = read_report(&out);
    let per_second: Vec<u64> = report.rounds[0]
        .total
        .timeline
        .iter()
        .map(|b| b.requests)
        .collect();
    assert!(readings.len() >= 10, "{} readings", readings.len());
    let mut seen_windows = std::collections::BTreeSet::new();
    for r in &readings {
        assert!(r.to > r.from && r.to <= per_second.len(), "{r:?}");
        let n: u64 = per_second[r.from..r.to].iter().sum();
        let want = n as f64 / (r.to - r.from) as f64;
        assert!(
            (r.per_s - want).abs() <= 0.02 * want,
            "{r:?}: the report counts {want:.1}/s over those seconds ({per_second:?})"
        );
        seen_windows.insert((r.from, r.to));
    }
    assert!(seen_windows.len() >= 5, "{seen_windows:?}");
    // The ramp shows: the last reading is well above the first.
    let (first, last) = (&readings[0], &readings[readings.len() - 1]);
    assert!(last.per_s > 1.8 * first.per_s, "{first:?} then {last:?}");
    rt.block_on(srv.stop());
}

fn get(port: u16, path: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    Some(text.split_once("\r\n\r\n")?.1.to_string())
}

/// One poll: seconds since the run began, the lane's fault in the snapshot, and the
/// gauge's fault and value.
#[derive(Debug)]
struct Seen {
    at_s: f64,
    fault: Option<String>,
    gauge: Option<(String, f64)>,
}

/// The snapshot's seconds since the run began and its lane's fault, when the lane was in
/// a measured round.
fn snapshot_fault(port: u16) -> Option<(f64, Option<String>)> {
    let s: serde_json::Value = serde_json::from_str(&get(port, "/live.json")?).ok()?;
    let lane = &s["lanes"][0];
    (lane["phase"] == "measured").then(|| {
        (
            s["elapsed_s"].as_f64().unwrap_or(0.0),
            lane["fault"].as_str().map(str::to_string),
        )
    })
}

/// The `loadmix_fault_active` gauge: its `fault` label and its value.
fn fault_gauge(page: &str) -> Option<(String, f64)> {
    let l = page
        .lines()
        .find(|l| l.starts_with("loadmix_fault_active{"))?;
    let name = l.split("fault=\"").nth(1)?.split('"').next()?.to_string();
    Some((name, l.rsplit(' ').next()?.parse().ok()?))
}

/// While a fault window is on, the dashboard's snapshot names it for the lane and
/// `/metrics` has `loadmix_fault_active` at 1 with its name; before and after, neither
/// does. The stretch of readings that name it lies within the window the report says it
/// had, and the readings around it bracket that window.
#[test]
fn the_dashboard_and_metrics_say_which_fault_is_on_while_it_is() {
    let _alone = alone();
    let tmp = tempdir();
    let w = tmp.path().join("w.yaml");
    std::fs::write(
        &w,
        "target: embedded\ncontext: /cosmo\nrun: { duration: 9s, rounds: 1, warmup: 1s, seed: 5 }\nthink: { constant: 20ms }\nusers:\n  - class: q\n    protocol: http\n    count: 2\n    mix:\n      wait: { weight: 1, path: '{context}/_loadmix/delay/1' }\nfaults:\n  - { fault: latency, at: 3s, for: 2s, delay: 20ms }\n",
    )
    .unwrap();
    let out = out_dir(&tmp);
    let port = free_port();
    let args: Vec<String> = vec![
        "run".into(),
        path_str(&w),
        "--dashboard".into(),
        format!("127.0.0.1:{port}"),
        "--quiet".into(),
        "--out".into(),
        path_str(&out),
    ];
    let run = std::thread::spawn(move || {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        loadmix(&a)
    });
    let mut seen: Vec<Seen> = Vec::new();
    while !run.is_finished() {
        // The gauge is read between two snapshots that agree: a window's edge between
        // two requests would make them disagree without either being wrong.
        let before = snapshot_fault(port);
        let gauge = get(port, "/metrics").as_deref().and_then(fault_gauge);
        let after = snapshot_fault(port);
        if let (Some((at_s, fault)), Some((_, again))) = (before, after)
            && fault == again
        {
            seen.push(Seen { at_s, fault, gauge });
        }
        std::thread::sleep(std::time::Duration::from_millis(150));
    }
    assert_eq!(run.join().unwrap(), 0);
    assert!(seen.iter().any(|s| s.fault.is_some()), "{seen:?}");
    for s in &seen {
        match &s.fault {
            Some(f) => {
                assert_eq!(f, "latency 20ms");
                assert_eq!(s.gauge.as_ref(), Some(&("latency 20ms".to_string(), 1.0)));
            }
            None => assert_eq!(s.gauge.as_ref(), Some(&(String::new(), 0.0)), "{seen:?}"),
        }
    }
    // Readings without it came before and after it: on is one stretch.
    let first = seen.iter().position(|s| s.fault.is_some()).unwrap_or(0);
    let last = seen.iter().rposition(|s| s.fault.is_some()).unwrap_or(0);
    assert!(first > 0 && last + 1 < seen.len(), "{seen:?}");
    assert!(
        seen[first..=last].iter().all(|s| s.fault.is_some()),
        "{seen:?}"
    );
    // Held to the window as the report has it: the readings that name it lie inside it,
    // and with the polls' gaps at its edges they cover it (the gaps are the estimate's
    // own uncertainty, however busy the host).
    let f = &read_report(&out).rounds[0].faults[0];
    let length = f.ended_s.unwrap_or(0.0) - f.began_s.unwrap_or(0.0);
    let span = seen[last].at_s - seen[first].at_s;
    let edges = (seen[first].at_s - seen[first - 1].at_s) + (seen[last + 1].at_s - seen[last].at_s);
    assert!(
        span <= length + 0.05,
        "on for {span} s of a {length} s window: {seen:?}"
    );
    assert!(
        span + edges >= length - 0.05,
        "on for {span} s (+{edges} s of gaps) of a {length} s window"
    );
}
