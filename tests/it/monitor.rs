//! The server's own cost beside its throughput: the embedded server served as a separate
//! process, watched by PID, its CPU per operation and memory in the report; a process
//! that is not there is reported and costs no load figure.

use crate::common::*;

#[test]
fn a_watched_server_process_reports_its_cpu_per_operation() {
    let (mut serve, port) = spawn_serve(&[]);
    let tmp = tempdir();
    let w = tmp.path().join("w.yaml");
    std::fs::write(
        &w,
        "context: /cosmo\nmonitor: { process: [no-such-program-xyz] }\nrun: { duration: 2s, rounds: 2 }\nusers:\n  - { class: q, protocol: http, count: 4, mix: { send: { weight: 1, method: POST, path: '{context}/queue/m', body: x, expect: [201] } } }\n",
    )
    .unwrap();
    let out = out_dir(&tmp);
    let o = loadmix_bin(&[
        "run",
        &path_str(&w),
        "--target",
        &format!("http://127.0.0.1:{port}"),
        "--monitor-process",
        &serve.id().to_string(),
        "--out",
        &path_str(&out),
        "--quiet",
    ]);
    let _ = serve.kill();
    let _ = serve.wait();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains("no process named 'no-such-program-xyz'"),
        "{stderr}"
    );
    let r = read_report(&out);
    assert!(r.summary.total.successes > 0);
    let server = &r.summary.server;
    assert_eq!(server.len(), 2, "{server:?}");
    let missing = server
        .iter()
        .find(|p| p.process == "no-such-program-xyz")
        .unwrap();
    assert!(
        missing
            .problem
            .as_deref()
            .unwrap_or("")
            .contains("no process matched")
    );
    let srv = server
        .iter()
        .find(|p| p.process.starts_with("pid "))
        .unwrap();
    assert!(srv.problem.is_none(), "{srv:?}");
    assert!(srv.cpu_user_s + srv.cpu_system_s > 0.0, "{srv:?}");
    assert!(srv.cpu_ms_per_op > 0.0 && srv.rss_peak_mib > 1.0 && srv.threads_max >= 1);
    // Each round has its own figures, on the round's clock.
    for round in &r.rounds {
        let p = round
            .server
            .iter()
            .find(|p| p.process == srv.process)
            .unwrap();
        assert!(!p.cpu_percent.is_empty());
    }
    // The server's CPU is drawn on the request timeline's time axis.
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        page.contains("<figure data-chart=\"server\"><svg"),
        "no server chart"
    );
    let table = std::fs::read_to_string(out.join("report.txt")).unwrap();
    assert!(table.contains("ms CPU per operation"), "{table}");
    assert!(table.contains("WARNING: monitor: no process matched no-such-program-xyz"));
    // compare tests the server's cost over rounds like ops/s: a run against itself is the
    // same, and the process that was never found is no row.
    let c = loadmix::reports::compare::compare(
        &["a".into(), "b".into()],
        &[r.clone(), r.clone()],
        false,
    )
    .unwrap();
    assert_eq!(c.server.len(), 1, "{:?}", c.server);
    // Each run over time: every success of every round, rounds one after another.
    let per_second: f64 = c.over_time[1].successes.iter().map(|p| p.1).sum();
    let timeline: u64 = r
        .rounds
        .iter()
        .flat_map(|x| x.total.timeline.iter().map(|b| b.successes))
        .sum();
    assert_eq!(per_second, timeline as f64);
    let xs: Vec<f64> = c.over_time[1].successes.iter().map(|p| p.0).collect();
    assert!(xs.windows(2).all(|w| w[0] < w[1]), "{xs:?}");
    let row = &c.server[0];
    assert_eq!(row.measure, format!("CPU {}", srv.process));
    let b = row.cells[1].as_ref().unwrap();
    assert_eq!((b.rounds, b.ratio, b.p_value), (2, Some(1.0), Some(1.0)));
    let table = loadmix::reports::compare::render_table(&c);
    assert!(
        table.contains(&format!("CPU {} (ms/op)", srv.process))
            && table.contains("1.00× not significant (p=1.00)"),
        "{table}"
    );
}

#[test]
fn the_embedded_servers_own_metrics_are_scraped_and_a_wrong_endpoint_is_said_plainly() {
    let rt = runtime();
    let srv = embedded(&rt);
    let base = srv.url();
    let tmp = tempdir();
    let w = tmp.path().join("w.yaml");
    std::fs::write(
        &w,
        format!(
            "context: /cosmo\nmonitor:\n  prometheus:\n    - {{ url: '{base}/cosmo/_loadmix/metrics', series: [loadmix_server_requests_total, process_resident_memory_bytes, no_such_series] }}\n    - {{ url: '{base}/cosmo/queue/nothing', series: [x] }}\nrun: {{ duration: 2s, rounds: 1 }}\nusers:\n  - {{ class: q, protocol: http, count: 2, cleanup: {{ sent: DELETE }}, mix: {{ send: {{ weight: 1, method: POST, path: '{{context}}/queue/m', body: x, expect: [201], remember: sent }} }} }}\n"
        ),
    )
    .unwrap();
    let out = out_dir(&tmp);
    let o = loadmix_bin(&[
        "run",
        &path_str(&w),
        "--target",
        &base,
        "--out",
        &path_str(&out),
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = read_report(&out);
    let m = &r.summary.metrics;
    let find = |s: &str| m.iter().find(|x| x.series == s).unwrap();
    let requests = find("loadmix_server_requests_total");
    assert_eq!(requests.kind, "counter");
    assert!(requests.problem.is_none(), "{requests:?}");
    // The server's request counter rose by what was sent (the round's end takes a last
    // look), so about 1,000 per 1,000 operations; the scrapes themselves are not counted,
    // and neither is the cleanup after the round (a DELETE for every message sent).
    assert!(r.rounds[0].cleanup.requests > 0);
    let sent = r.summary.total.requests as f64;
    assert!(
        (requests.increase - sent).abs() <= 0.02 * sent + 8.0,
        "{requests:?} vs {sent}"
    );
    // Per second in the round: the rate.
    let per_second = &r.rounds[0]
        .metrics
        .iter()
        .find(|x| x.series == "loadmix_server_requests_total")
        .unwrap()
        .values;
    assert!(
        !per_second.is_empty() && per_second.iter().all(|v| *v > 0.0),
        "{per_second:?}"
    );
    let rss = find("process_resident_memory_bytes");
    assert_eq!(rss.kind, "gauge");
    assert!(rss.max > 1e6);
    assert!(
        find("no_such_series")
            .problem
            .as_deref()
            .unwrap_or("")
            .contains("has no series")
    );
    assert!(
        find("x").problem.is_some(),
        "a page that is not metrics is reported"
    );
    // compare lists each run's scraped figures beside its name.
    let c = loadmix::reports::compare::compare(
        &["a".into(), "b".into()],
        &[r.clone(), r.clone()],
        false,
    )
    .unwrap();
    let table = loadmix::reports::compare::render_table(&c);
    // The table wraps to the terminal's width: the measure's name is checked whole in the
    // comparison, its start in the table.
    assert!(
        c.server.iter().any(
            |row| row.measure == "loadmix_server_requests_total" && row.unit == "per 1,000 ops"
        ),
        "{:?}",
        c.server
    );
    assert!(table.contains("loadmix_server_requests_total"), "{table}");
    assert!(table.contains("(one round: not tested)"), "{table}");
    assert!(
        !table.contains("no_such_series"),
        "a series that was never there is no row: {table}"
    );
    // Each kept series is drawn over time in the page.
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(page.contains("<figure data-chart=\"series-1\"><svg"));
    rt.block_on(srv.stop());
}

/// `per:` divides a scraped counter by one operation's successes: the server's request
/// counter, which counts both classes' requests, per 1,000 of class `a`'s sends is
/// 1,000 × (a + b) / a.
#[test]
fn a_scraped_counter_is_given_per_the_operation_it_names() {
    let rt = runtime();
    let srv = embedded(&rt);
    let base = srv.url();
    let tmp = tempdir();
    let w = tmp.path().join("w.yaml");
    let class = |name: &str, count: u32| {
        format!(
            "  - {{ class: {name}, protocol: http, count: {count}, cleanup: {{ sent: DELETE }}, mix: {{ send: {{ weight: 1, method: POST, path: '{{context}}/queue/{name}', body: x, expect: [201], remember: sent }} }} }}\n"
        )
    };
    std::fs::write(
        &w,
        format!(
            "context: /cosmo\nmonitor:\n  prometheus:\n    - {{ url: '{base}/cosmo/_loadmix/metrics', series: [loadmix_server_requests_total], per: a.send }}\n    - {{ url: '{base}/cosmo/_loadmix/metrics', series: [process_cpu_seconds_total] }}\nrun: {{ duration: 2s, rounds: 2 }}\nusers:\n{}{}",
            class("a", 1),
            class("b", 3)
        ),
    )
    .unwrap();
    let out = out_dir(&tmp);
    let code = loadmix(&[
        "run",
        &path_str(&w),
        "--target",
        &base,
        "--out",
        &path_str(&out),
        "--quiet",
    ]);
    assert_eq!(code, 0);
    let r = read_report(&out);
    let (a, b) = (op(&r, "a.send").successes, op(&r, "b.send").successes);
    assert!(a > 0 && b > a, "{a} {b}");
    let find = |s: &str| {
        r.summary
            .metrics
            .iter()
            .find(|x| x.series == s)
            .unwrap()
            .clone()
    };
    let requests = find("loadmix_server_requests_total");
    assert_eq!(requests.per.as_deref(), Some("a.send"));
    let want = 1000.0 * (a + b) as f64 / a as f64;
    assert!(
        (requests.per_1000_ops - want).abs() <= 0.02 * want,
        "{} per 1,000 a.send, want {want:.0}",
        requests.per_1000_ops
    );
    // Without `per:`, the headline sum (both classes here).
    let cpu = find("process_cpu_seconds_total");
    assert_eq!(cpu.per, None);
    let total = r.summary.total.successes as f64;
    assert!((cpu.per_1000_ops - cpu.increase * 1000.0 / total).abs() < 1e-9);
    // Each round divides by its own successes of a.send.
    for round in &r.rounds {
        let m = round
            .metrics
            .iter()
            .find(|x| x.series == requests.series)
            .unwrap();
        let n = round
            .ops
            .iter()
            .find(|o| o.op == "a.send")
            .unwrap()
            .successes as f64;
        assert!((m.per_1000_ops - m.increase * 1000.0 / n).abs() < 1e-9);
    }
    rt.block_on(srv.stop());
}
