//! Honest latency: the open model achieves its arrival rate, a stalling server shows in the
//! coordinated-omission-corrected figures (not in the service time), pacing is corrected
//! the same way, the generator reports its own lag and CPU, and a deliberately overloaded
//! generator is flagged as the limit.

use crate::common::*;

fn run_yaml(yaml: &str, extra: &[&str]) -> (i32, loadmix::reports::Report) {
    let tmp = tempdir();
    let w = tmp.path().join("w.yaml");
    std::fs::write(&w, yaml).unwrap();
    let out = out_dir(&tmp);
    let mut args = vec![
        "run",
        w.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ];
    args.extend_from_slice(extra);
    let code = loadmix(&args);
    (code, read_report(&out))
}

#[test]
fn an_open_model_run_achieves_its_arrival_count() {
    let rt = runtime();
    let srv = embedded(&rt);
    let (code, r) = run_yaml(
        &format!(
            "target: {}\nrun: {{ duration: 3s, seed: 11 }}\nusers:\n  - class: q\n    protocol: http\n    arrival: {{ rate: 200/s }}\n    mix:\n      put: {{ weight: 1, method: POST, path: '{{context}}/queue/o', body: x, expect: 201 }}\n",
            srv.url()
        ),
        &[],
    );
    assert_eq!(code, 0);
    let n = r.summary.total.requests as f64;
    // Poisson: 600 expected, standard deviation about 24.5; five of them either way.
    assert!((n - 600.0).abs() < 5.0 * 600f64.sqrt(), "{n} arrivals");
    assert_eq!(srv.stats.count("POST", 201) as f64, n);
    assert_eq!(r.rounds[0].vus as f64, n, "one session per arrival");
    let g = &r.rounds[0].generator;
    assert!(
        !g.cpu_percent.is_empty() && g.cpu_percent.iter().all(|c| (0.0..=400.0).contains(c)),
        "{:?}",
        g.cpu_percent
    );
    assert!(
        g.lag_p99_ms >= 0.0 && g.lag_p99_ms < 1000.0,
        "lag {}",
        g.lag_p99_ms
    );
    let c = r
        .summary
        .total
        .latency_corrected_ms
        .as_ref()
        .expect("open model reports corrected latency");
    assert!(
        c.p50 >= r.summary.total.latency_ms.p50,
        "from the intended start, never shorter"
    );
    rt.block_on(srv.stop());
}

#[test]
fn a_stalling_server_shows_in_corrected_latency_not_in_service_time() {
    let rt = runtime();
    let srv = embedded(&rt);
    // The server freezes from 2.8 s to 4 s; four slots at most, as a client with four
    // connections. Arrivals during the freeze wait for a slot: their service time is short,
    // but they were due long before. The round goes on after the freeze, so they run.
    let (code, r) = run_yaml(
        &format!(
            "target: {}\nrun: {{ duration: 5s }}\nusers:\n  - class: s\n    protocol: http\n    arrival: {{ rate: 200/s, process: constant, max_concurrency: 4, when_full: queue }}\n    mix:\n      get: {{ weight: 1, path: '{{context}}/_loadmix/stall/4000/1200' }}\n",
            srv.url()
        ),
        &[],
    );
    assert_eq!(code, 0);
    let t = &r.summary.total;
    let corrected = t.latency_corrected_ms.as_ref().unwrap();
    assert!(
        corrected.p99 >= 1000.0,
        "corrected p99 {} ms must show the stall",
        corrected.p99
    );
    assert!(
        t.latency_ms.p50 < 50.0,
        "service time p50 {} ms stays small",
        t.latency_ms.p50
    );
    assert!(t.latency_ms.p99 < corrected.p99);
    assert!(
        r.rounds[0].generator.late > 100,
        "arrivals queued behind the stall are counted late"
    );
    rt.block_on(srv.stop());
}

#[test]
fn pacing_is_corrected_like_the_open_model() {
    let rt = runtime();
    let srv = embedded(&rt);
    // Due every 10 ms, but each answer takes 30 ms: the schedule slips further each time.
    let (code, r) = run_yaml(
        &format!(
            "target: {}\nrun: {{ iterations: 30 }}\nusers:\n  - class: p\n    protocol: http\n    count: 1\n    pacing: 10ms\n    mix:\n      get: {{ weight: 1, path: '{{context}}/_loadmix/delay/30' }}\n",
            srv.url()
        ),
        &[],
    );
    assert_eq!(code, 0);
    let t = &r.summary.total;
    assert!(
        (t.latency_ms.p50 - 30.0).abs() < 10.0,
        "service time {}",
        t.latency_ms.p50
    );
    let c = t.latency_corrected_ms.as_ref().unwrap();
    // The last operation was due at 290 ms and ended near 900 ms.
    assert!(c.max > 500.0, "corrected max {}", c.max);
    rt.block_on(srv.stop());
}

#[test]
fn an_overloaded_generator_is_flagged() {
    let _alone = alone();
    // One worker thread for generator and embedded server, far more arrivals than it can
    // start: the report must say the generator, not the server, set the pace.
    let out = loadmix_bin(&[
        "run",
        "workloads/queue-sizes.yaml",
        "--workers",
        "1",
        "--quiet",
        "--out",
        "target/overload-test",
        "--set",
        "users.producer.arrival.rate=20000/s",
        "--set",
        "users.producer.count=",
        "--users",
        "consumer=0",
        "--duration",
        "1s",
        "--rounds",
        "1",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stdout.contains("WARNING: round 1: ")
            && (stdout.contains("started late")
                || stdout.contains("arrivals could not start on time")),
        "{stdout}"
    );
    let r = read_report(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/target/overload-test"
    )));
    assert!(!r.summary.generator_warnings.is_empty());
    let g = &r.rounds[0].generator;
    assert!(g.lag_p99_ms > 10.0 || g.late > 0 || g.behind > 0, "{g:?}");
}

/// A rate faster than the server (and maybe the generator) can go: every arrival of the
/// schedule is accounted for (run, or dropped when all slots are busy), and the round ends
/// with its schedule plus at most the request timeout for operations in flight.
#[test]
fn a_rate_beyond_the_server_ends_on_time_with_every_arrival_counted() {
    let _alone = alone();
    let rt = runtime();
    let srv = embedded(&rt);
    let (code, r) = run_yaml(
        &format!(
            "target: {}\nrun: {{ duration: 1s, timeout: 2s, seed: 3 }}\nusers:\n  - class: q\n    protocol: http\n    arrival: {{ rate: 20000/s, process: constant, max_concurrency: 20, when_full: drop }}\n    mix:\n      get: {{ weight: 1, path: '{{context}}/_loadmix/delay/5' }}\n",
            srv.url()
        ),
        &[],
    );
    assert_eq!(code, 0);
    let round = &r.rounds[0];
    let g = &round.generator;
    let accounted = round.vus + g.dropped;
    assert!(
        (19_000..=20_000).contains(&accounted),
        "{} sessions + {} dropped",
        round.vus,
        g.dropped
    );
    assert!(
        g.dropped > 0,
        "20 slots cannot take 20,000 arrivals of 5 ms each"
    );
    assert_eq!(srv.stats.count("GET", 200), r.summary.total.successes);
    // The schedule's second, plus at most the timeout for operations in flight.
    assert!(round.elapsed_s < 1.0 + 2.0 + 1.0, "{}", round.elapsed_s);
    rt.block_on(srv.stop());
}

#[test]
fn an_impossible_rate_is_refused_before_anything_is_sent() {
    let tmp = tempdir();
    let w = tmp.path().join("w.yaml");
    std::fs::write(
        &w,
        "users:\n  - class: q\n    protocol: http\n    arrival: { rate: 1000000000000/s }\n    mix:\n      get: { weight: 1, path: /x }\n",
    )
    .unwrap();
    assert_eq!(loadmix(&["validate", w.to_str().unwrap()]), 2);
    assert_eq!(loadmix(&["run", w.to_str().unwrap(), "--quiet"]), 2);
}

#[test]
fn a_paced_class_behind_its_schedule_ends_its_round_on_time_and_counts_what_it_dropped() {
    let rt = runtime();
    let srv = embedded(&rt);
    // Due every 1 ms, each answer takes 20 ms, 500 ms rounds: the slots that fell due and
    // were not sent by the end are dropped, not sent after it.
    let (code, r) = run_yaml(
        &format!(
            "target: {}\nrun: {{ duration: 500ms }}\nusers:\n  - class: p\n    protocol: http\n    count: 8\n    pacing: 1ms\n    mix:\n      get: {{ weight: 1, path: '{{context}}/_loadmix/delay/20' }}\n",
            srv.url()
        ),
        &[],
    );
    assert_eq!(code, 0);
    let t = &r.summary.total;
    // Each user can send about 500 / 20 in the round; before, it sent all 500 slots.
    assert!(t.requests <= 8 * (500 / 20 + 3), "{} requests", t.requests);
    let dropped = r.rounds[0].generator.dropped;
    assert!(
        dropped + t.requests >= 8 * 500 - 8 && dropped + t.requests <= 8 * 500 + 8,
        "dropped {dropped} + sent {} is not the 4,000 slots of the round",
        t.requests
    );
    rt.block_on(srv.stop());
}

#[test]
fn on_an_idle_server_corrected_latency_is_the_service_time_not_the_timers_lateness() {
    // Sessions of 4 operations 100 ms apart on an endpoint that answers after 1 ms: no
    // operation ever waits for the server, so the corrected figure has nothing to add. The
    // timer's wake-up after each think is the generator's lateness, reported as its lag.
    let rt = runtime();
    let srv = embedded(&rt);
    let (code, r) = run_yaml(
        &format!(
            "target: {}\nrun: {{ duration: 3s, seed: 5, warmup: 0s }}\nthink: 100ms\nusers:\n  - class: s\n    protocol: http\n    arrival: {{ rate: 20/s }}\n    iterations: 4\n    mix:\n      get: {{ weight: 1, path: '{{context}}/_loadmix/delay/1' }}\n",
            srv.url()
        ),
        &[],
    );
    assert_eq!(code, 0);
    let t = &r.summary.total;
    let corrected = t.latency_corrected_ms.as_ref().expect("corrected latency");
    assert!(t.requests > 100, "{} requests", t.requests);
    assert!(
        (corrected.p50 - t.latency_ms.p50).abs() < 0.3,
        "corrected p50 {} ms against service p50 {} ms",
        corrected.p50,
        t.latency_ms.p50
    );
    assert!(corrected.p50 >= t.latency_ms.p50 - 0.01, "never shorter");
    rt.block_on(srv.stop());
}

#[test]
fn plan_shows_an_open_arrivals_session_as_the_run_makes_it() {
    // `plan --vu web#K` of an open class: arrival K's due time and its session's picks,
    // held against the run's own op log rows of that session.
    let tmp = tempdir();
    let w = tmp.path().join("w.yaml");
    std::fs::write(
        &w,
        "context: /cosmo\nrun: { duration: 1s, rounds: 1, seed: 3 }\nusers:\n  - class: web\n    protocol: http\n    arrival: { rate: 20/s }\n    iterations: 3\n    think: 10ms\n    mix:\n      a: { weight: 1, path: '{context}/_loadmix/delay/1' }\n      b: { weight: 1, path: '{context}/_loadmix/delay/1' }\n",
    )
    .unwrap();
    let (out, log) = (out_dir(&tmp), tmp.path().join("ops.csv"));
    let code = loadmix(&[
        "run",
        &path_str(&w),
        "--out",
        &path_str(&out),
        "--log-ops",
        &path_str(&log),
        "--quiet",
    ]);
    assert_eq!(code, 0);
    let log = std::fs::read_to_string(&log).unwrap();
    for k in 0..5 {
        let o = loadmix_bin(&["plan", &path_str(&w), "--vu", &format!("web#{k}")]);
        assert_eq!(o.status.code(), Some(0));
        let said = String::from_utf8_lossy(&o.stdout);
        let head = said.lines().next().unwrap_or_default();
        let due_ms: f64 = head
            .split("due ")
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{head}"));
        let planned: Vec<&str> = said
            .lines()
            .skip(2)
            .filter_map(|l| l.split('\t').nth(2))
            .collect();
        // round,class,vu,seq,op,label,think_us,start_us,...
        let rows: Vec<Vec<&str>> = log
            .lines()
            .skip(1)
            .map(|l| l.split(',').collect::<Vec<_>>())
            .filter(|f| f[1] == "web" && f[2] == k.to_string())
            .collect();
        let ran: Vec<&str> = rows.iter().map(|f| f[4]).collect();
        assert_eq!(planned, ran, "arrival {k}");
        assert_eq!(planned.len(), 3, "its iterations");
        let started_ms = rows[0][7].parse::<f64>().unwrap() / 1e3;
        assert!(started_ms >= due_ms - 0.001, "{started_ms} before {due_ms}");
        assert!(said.contains("0\ton arrival\t"), "{said}");
    }
    let o = loadmix_bin(&["plan", &path_str(&w), "--vu", "web#100000"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("has no arrival 100000"));
}

/// An open CalDAV class of 4 returning users with 10 events each, 40 sessions a second of
/// 2 picks: the report and the server's counts by (method, status).
fn returning_run(keep_state: bool) -> (loadmix::reports::Report, Vec<(String, u16, u64)>) {
    run_embedded(&format!(
        "context: /cosmo\naccounts: {{ create: cmp }}\nrun: {{ duration: 1s, rounds: 2, seed: 9, keep_state: {keep_state} }}\nusers:\n  - class: cal\n    protocol: caldav\n    arrival: {{ rate: 40/s, process: constant, returning: 4 }}\n    iterations: 2\n    params: {{ initial_events: 10 }}\n    mix: {{ update_event: 1, get_event: 1 }}\n"
    ))
}

#[test]
fn open_sessions_of_returning_users_act_on_what_those_users_made() {
    for keep_state in [false, true] {
        let (r, counts) = returning_run(keep_state);
        let rounds = r.rounds.len() as u64;
        assert_eq!(rounds, 2);
        // Many sessions, four users: each user is set up (account, calendar, 10 events)
        // before its round's clock, once per round, or once in all when kept.
        let made = if keep_state { 4 } else { 4 * rounds };
        assert_eq!(answered(&counts, "MKCALENDAR", 201), made, "{counts:?}");
        assert_eq!(answered(&counts, "DELETE", 204), made, "{counts:?}");
        // Open classes have no preflight.
        assert_eq!(r.preflight.requests, 0);
        assert_eq!(
            answered(&counts, "PUT", 201),
            made * (10 + 1),
            "an account and 10 events per user: {counts:?}"
        );
        let picks = r.summary.total.requests;
        assert!(picks >= 2 * 20, "{picks} picks: sessions came and went");
        // Every session found events: its user's calendar held them from before.
        assert_eq!(r.summary.total.skipped, 0);
        let answered: u64 = counts.iter().map(|(_, _, n)| n).sum();
        let untimed: u64 = r.preflight.requests
            + r.rounds
                .iter()
                .map(|x| x.setup.requests + x.cleanup.requests)
                .sum::<u64>();
        assert_eq!(answered, picks + untimed, "{counts:?}");
    }
}

/// Busy loops beside the run, killed when dropped (and by `timeout` in any case).
struct Hogs(Vec<std::process::Child>);

impl Hogs {
    fn start(n: usize) -> Hogs {
        Hogs(
            (0..n)
                .map(|_| {
                    std::process::Command::new("timeout")
                        .args(["60", "sh", "-c", "while :; do :; done"])
                        .spawn()
                        .unwrap()
                })
                .collect(),
        )
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            // SIGTERM, which `timeout` passes on to its loop: a SIGKILL would end
            // `timeout` alone and leave the loop spinning.
            if let Ok(pid) = i32::try_from(c.id()) {
                // SAFETY: kill sends a signal to our own child and touches no memory.
                unsafe { libc::kill(pid, libc::SIGTERM) };
            }
            let _ = c.wait();
        }
    }
}

#[test]
fn an_arrival_the_generator_acted_on_late_is_start_lag_not_corrected_latency() {
    // Four CPU-bound processes beside an open class on an endpoint that answers in 1 ms,
    // with slots to spare: the arrival loop and the runtime wake late, and that lateness
    // is the generator's, so the corrected latency is the service time plus nothing the
    // server held.
    let _alone = alone();
    let rt = runtime();
    let srv = embedded(&rt);
    let hogs = Hogs::start(4);
    let (code, r) = run_yaml(
        &format!(
            "target: {}\nrun: {{ duration: 4s, seed: 5 }}\nusers:\n  - class: o\n    protocol: http\n    arrival: {{ rate: 300/s, max_concurrency: 10000 }}\n    mix:\n      get: {{ weight: 1, path: '{{context}}/_loadmix/delay/1' }}\n",
            srv.url()
        ),
        &[],
    );
    drop(hogs);
    assert_eq!(code, 0);
    let t = &r.summary.total;
    let corrected = t.latency_corrected_ms.as_ref().unwrap();
    let g = &r.rounds[0].generator;
    assert_eq!((g.late, g.dropped), (0, 0), "no slot was ever busy");
    assert!(
        corrected.p99 - t.latency_ms.p99 < 1.0,
        "corrected p99 {} against service p99 {}: the generator's lateness got in",
        corrected.p99,
        t.latency_ms.p99
    );
    // The lateness is reported where it belongs: per class, and over the round.
    let class = g.class_lag.iter().find(|l| l.class == "o").unwrap();
    assert_eq!(class.operations, t.requests);
    assert_eq!(class.p99_ms, g.lag_p99_ms);
    assert!(class.max_ms >= class.p99_ms && class.p99_ms >= class.p50_ms);
    rt.block_on(srv.stop());
}

#[test]
fn an_embedded_target_says_it_shares_the_generators_cores() {
    // No target: the embedded server runs in loadmix's process, on its own threads; its
    // CPU is counted apart from the generator's, and the report says they share cores.
    let tmp = tempdir();
    let w = tmp.path().join("w.yaml");
    std::fs::write(
        &w,
        "run: { duration: 3s, seed: 2 }\nusers:\n  - class: o\n    protocol: http\n    arrival: { rate: 200/s }\n    mix:\n      get: { weight: 1, path: '{context}/_loadmix/delay/1' }\n",
    )
    .unwrap();
    let out = out_dir(&tmp);
    let o = loadmix_bin(&["run", &path_str(&w), "--out", &path_str(&out)]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}");
    let r = read_report(&out);
    let g = &r.rounds[0].generator;
    let served = g.embedded_cpu_mean.expect("the embedded server's CPU");
    assert!(
        served > 0.0 && served <= g.cpu_mean + 1.0,
        "{served} of {}",
        g.cpu_mean
    );
    assert!(stdout.contains("they share these cores"), "{stdout}");
}
