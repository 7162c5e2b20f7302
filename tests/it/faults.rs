//! A faulty target is counted and classified, and the run goes on: refused connections
//! (preflight exit 3, or `connect` errors when the probe is skipped), connections closed
//! mid-request (`reset`), answers too slow for the timeout (`timeout`), answers that are
//! not HTTP (`body`), and unexpected statuses (`status`). Ctrl-C, SIGTERM and SIGHUP still write the report.

use std::time::Duration;

use crate::common::*;

/// A one-operation GET workload against `url`, `iters` operations per user.
fn workload(dir: &std::path::Path, url: &str, iters: u32, timeout: &str) -> String {
    let p = dir.join("w.yaml");
    std::fs::write(
        &p,
        format!(
            "name: faults\ntarget: {url}\ncontext: ''\nrun: {{ iterations: {iters}, timeout: {timeout}, connect_timeout: 1s }}\nusers:\n  - class: c\n    protocol: http\n    count: 2\n    mix:\n      get: {{ weight: 1, path: /thing }}\n"
        ),
    )
    .unwrap();
    path_str(&p)
}

fn run_against(
    url: &str,
    iters: u32,
    timeout: &str,
    extra: &[&str],
) -> (i32, Option<loadmix::reports::Report>) {
    let tmp = tempdir();
    let out = out_dir(&tmp);
    let w = workload(tmp.path(), url, iters, timeout);
    let mut args = vec!["run", w.as_str(), "--out", out.to_str().unwrap(), "--quiet"];
    args.extend_from_slice(extra);
    let code = loadmix(&args);
    let report = out.join("run.json").exists().then(|| read_report(&out));
    (code, report)
}

#[test]
fn refused_target_fails_preflight_with_exit_3() {
    let addr = closed_port();
    let tmp = tempdir();
    let w = workload(tmp.path(), &format!("http://{addr}"), 5, "1s");
    let out = loadmix_bin(&["run", &w, "--out", &path_str(&out_dir(&tmp))]);
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("preflight of class 'c' (http) failed"),
        "{stderr}"
    );
    assert!(stderr.contains("refused"), "{stderr}");
    assert!(
        !out_dir(&tmp).join("run.json").exists(),
        "nothing ran, nothing reported"
    );
}

#[test]
fn refused_connections_are_counted_as_connect_errors() {
    let addr = closed_port();
    let (code, r) = run_against(&format!("http://{addr}"), 5, "1s", &["--no-preflight"]);
    assert_eq!(code, 0, "the run completes");
    let r = r.unwrap();
    let get = op(&r, "c.get");
    assert_eq!(get.requests, 10);
    assert_eq!(get.failures, 10);
    assert_eq!(get.errors.get("connect"), Some(&10));
    assert!(
        r.failures
            .iter()
            .any(|f| f.error == "connect" && f.detail.contains("refused"))
    );
}

#[test]
fn server_closing_connections_is_a_reset() {
    let rt = runtime();
    let addr = faulty(&rt, Fault::Close);
    let (code, r) = run_against(&format!("http://{addr}"), 5, "2s", &[]);
    assert_eq!(code, 0);
    let get = op(r.as_ref().unwrap(), "c.get");
    assert_eq!(get.requests, 10);
    assert_eq!(get.errors.get("reset"), Some(&10), "{:?}", get.errors);
}

#[test]
fn slow_answers_past_the_timeout_are_timeouts() {
    let rt = runtime();
    let addr = faulty(&rt, Fault::Slow(Duration::from_secs(5)));
    let (code, r) = run_against(&format!("http://{addr}"), 2, "300ms", &[]);
    assert_eq!(code, 0);
    let get = op(r.as_ref().unwrap(), "c.get");
    assert_eq!(get.requests, 4);
    assert_eq!(get.errors.get("timeout"), Some(&4), "{:?}", get.errors);
    // Each timed-out operation is in the timeline where it happened.
    let round = &r.as_ref().unwrap().rounds[0];
    let tl: u64 = round.ops[0].timeline.iter().map(|b| b.failures).sum();
    assert_eq!(tl, 4);
    // And in the per-second figures, by class; each spent its 300 ms in flight.
    let per_second: u64 = round
        .per_second
        .iter()
        .map(|s| {
            s.errors
                .get(&loadmix::client::ErrorClass::Timeout)
                .copied()
                .unwrap_or(0)
        })
        .sum();
    assert_eq!(per_second, 4);
    let in_flight: f64 = round.per_second.iter().map(|s| s.in_flight).sum();
    assert!((1.2..1.4).contains(&in_flight), "{in_flight}");
    assert!(round.per_second.iter().all(|s| s.p50_ms.is_none()));
}

#[test]
fn answers_that_are_not_http_are_body_errors() {
    let rt = runtime();
    let addr = faulty(&rt, Fault::Garbage);
    let (code, r) = run_against(&format!("http://{addr}"), 3, "2s", &[]);
    assert_eq!(code, 0);
    let get = op(r.as_ref().unwrap(), "c.get");
    assert_eq!(get.errors.get("body"), Some(&6), "{:?}", get.errors);
}

#[test]
fn unexpected_statuses_are_status_errors_keyed_by_code() {
    let rt = runtime();
    let addr = faulty(&rt, Fault::Error500);
    let (code, r) = run_against(&format!("http://{addr}"), 4, "2s", &[]);
    assert_eq!(code, 0);
    let r = r.unwrap();
    let get = op(&r, "c.get");
    assert_eq!(get.errors.get("status"), Some(&8));
    assert_eq!(get.status.get("500"), Some(&8));
    assert_eq!(r.summary.success_ratio, 0.0);
}

#[test]
fn ctrl_c_stops_the_run_and_still_writes_the_report() {
    a_signal_stops_the_run_and_still_writes_the_report("-INT");
}

/// What `timeout`, systemd and Kubernetes send, and what a closed terminal sends.
#[test]
fn sigterm_and_sighup_stop_the_run_as_ctrl_c_does() {
    a_signal_stops_the_run_and_still_writes_the_report("-TERM");
    a_signal_stops_the_run_and_still_writes_the_report("-HUP");
}

fn a_signal_stops_the_run_and_still_writes_the_report(signal: &str) {
    let tmp = tempdir();
    let out = out_dir(&tmp);
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_loadmix"))
        .current_dir(root())
        .args([
            "run",
            "fixtures/workloads/mixed-http.yaml",
            "--duration",
            "60s",
            "--rounds",
            "3",
            "--out",
            out.to_str().unwrap(),
            "--quiet",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Let it measure something, then interrupt it as a terminal would.
    std::thread::sleep(Duration::from_millis(1500));
    let killed = std::process::Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let output = child.wait_with_output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(130),
        "{signal}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let r = read_report(&out);
    assert!(r.interrupted);
    assert_eq!(r.rounds.len(), 1);
    assert!(r.rounds[0].interrupted);
    assert!(
        r.summary.total.successes > 0,
        "what was measured before Ctrl-C is kept"
    );
    assert!(r.rounds[0].elapsed_s < 30.0);
}

#[test]
fn a_report_that_cannot_be_written_exits_4_but_still_prints_the_figures() {
    let tmp = tempdir();
    // A file where the output folder should be: nothing can be created below it.
    let blocker = tmp.path().join("not-a-dir");
    std::fs::write(&blocker, "x").unwrap();
    let out = loadmix_bin(&[
        "run",
        "workloads/queue-sizes.yaml",
        "--iterations",
        "5",
        "--rounds",
        "1",
        "--out",
        &path_str(&blocker.join("out")),
        "--quiet",
    ]);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("error: cannot write"));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("producer.send") && table.contains("total successes 30"),
        "{table}"
    );
}

/// A keep-alive server that answers each request and then closes the connection without
/// saying so (no `Connection: close`), immediately (`idle: None`) or after the connection
/// has been idle for `idle`. Returns its address and the number of requests it answered.
fn silent_closer(
    rt: &tokio::runtime::Runtime,
    idle: Option<Duration>,
) -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::atomic::AtomicU64>,
) {
    answering(rt, idle, |_| {
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    })
}

/// A server that writes `answer(n)` for the n-th request head (from 0) it reads on a
/// connection and counts the answers; an idle connection is closed after `idle`,
/// silently, or after every answer when `None`.
fn answering(
    rt: &tokio::runtime::Runtime,
    idle: Option<Duration>,
    answer: fn(u64) -> &'static [u8],
) -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::atomic::AtomicU64>,
) {
    use std::sync::atomic::{AtomicU64, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let answered = std::sync::Arc::new(AtomicU64::new(0));
    let counter = answered.clone();
    let addr = rt.block_on(async move {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let counter = counter.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    for n in 0.. {
                        // Wait for a whole request head; an idle connection is closed after
                        // `idle`, silently.
                        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                            let read = match idle {
                                Some(d) => {
                                    match tokio::time::timeout(d, s.read(&mut chunk)).await {
                                        Ok(r) => r,
                                        Err(_) => return,
                                    }
                                }
                                None => s.read(&mut chunk).await,
                            };
                            match read {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        }
                        let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                        buf.drain(..end);
                        if s.write_all(answer(n)).await.is_err() {
                            return;
                        }
                        counter.fetch_add(1, Ordering::SeqCst);
                        if idle.is_none() {
                            return;
                        }
                    }
                });
            }
        });
        addr
    });
    (addr, answered)
}

fn closer_workload(
    dir: &std::path::Path,
    addr: std::net::SocketAddr,
    iters: u32,
    think: &str,
) -> String {
    let p = dir.join("w.yaml");
    std::fs::write(
        &p,
        format!(
            "name: closer\ntarget: http://{addr}\ncontext: ''\nrun: {{ iterations: {iters}, timeout: 10s }}\nthink: {think}\nusers:\n  - class: c\n    protocol: http\n    count: 2\n    mix:\n      get: {{ weight: 1, path: /thing }}\n"
        ),
    )
    .unwrap();
    path_str(&p)
}

/// The closer workload against `addr`, which must end with no failure; the report's
/// folder (kept while the first value lives) and the report.
fn run_without_failures(
    addr: std::net::SocketAddr,
    iters: u32,
    think: &str,
) -> (
    tempfile::TempDir,
    std::path::PathBuf,
    loadmix::reports::Report,
) {
    let (tmp, out, r) = run_closer(addr, iters, think);
    let t = &r.summary.total;
    assert_eq!(t.failures, 0, "{:?} {:?}", t.errors, r.failures);
    (tmp, out, r)
}

/// The closer workload against `addr`, which must exit 0; as [`run_without_failures`].
fn run_closer(
    addr: std::net::SocketAddr,
    iters: u32,
    think: &str,
) -> (
    tempfile::TempDir,
    std::path::PathBuf,
    loadmix::reports::Report,
) {
    let tmp = tempdir();
    let out = out_dir(&tmp);
    let w = closer_workload(tmp.path(), addr, iters, think);
    let code = loadmix(&[
        "run",
        &w,
        "--out",
        &path_str(&out),
        "--quiet",
        "--no-preflight",
    ]);
    assert_eq!(code, 0);
    let r = read_report(&out);
    (tmp, out, r)
}

/// The report agrees with a server that closes kept connections without a word: no
/// timeouts, no resets, and exactly the requests the server answered.
fn run_against_closer(idle: Option<Duration>, iters: u32, think: &str) {
    let rt = runtime();
    let (addr, answered) = silent_closer(&rt, idle);
    let (_tmp, _out, r) = run_without_failures(addr, iters, think);
    let t = &r.summary.total;
    assert_eq!(t.requests, 2 * iters as u64);
    assert_eq!(
        t.successes,
        answered.load(std::sync::atomic::Ordering::SeqCst),
        "the report counts what the server answered"
    );
    let round = &r.rounds[0];
    assert!(
        round.connections_opened > 2,
        "the closes were noticed and reconnected"
    );
    // Nothing waited for the timeout.
    assert!(t.latency_ms.max < 5_000.0, "{}", t.latency_ms.max);
}

#[test]
fn a_server_that_closes_after_every_response_costs_no_failure() {
    run_against_closer(None, 150, "0ms");
}

#[test]
fn a_server_that_closes_idle_connections_costs_no_failure() {
    run_against_closer(Some(Duration::from_millis(200)), 4, "500ms");
}

#[test]
fn answers_nobody_asked_for_are_counted_as_the_servers_and_every_request_has_its_own() {
    let rt = runtime();
    // With every answer, a second one nobody asked for.
    let (addr, received) = answering(&rt, Some(Duration::from_secs(60)), |_| {
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 500 Stray\r\nContent-Length: 0\r\n\r\n"
    });
    let (_tmp, out, r) = run_without_failures(addr, 60, "0ms");
    let t = &r.summary.total;
    assert_eq!(t.requests, 120);
    assert_eq!(
        t.requests,
        received.load(std::sync::atomic::Ordering::SeqCst)
    );
    let round = &r.rounds[0];
    // Every answer was followed by a stray, which arrived with it.
    assert_eq!(round.unsolicited_answers, 120);
    let text = std::fs::read_to_string(out.join("report.txt")).unwrap();
    assert!(
        text.contains("the server sent 120 times bytes no request asked for"),
        "{text}"
    );
}

#[test]
fn answers_a_stray_may_have_taken_are_counted_in_doubt_under_their_operation() {
    let rt = runtime();
    // Out of step by one: from a connection's second request on, a stray 500 (as if the
    // previous request had had two answers), then the request's own 200, in one write.
    // The client reads the stray as the request's answer.
    let (addr, read) = answering(&rt, Some(Duration::from_secs(60)), |n| {
        match n {
        0 => b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        _ => b"HTTP/1.1 500 Stray\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    }
    });
    let (_tmp, out, r) = run_closer(addr, 40, "0ms");
    let t = &r.summary.total;
    assert_eq!(t.requests, 80);
    assert_eq!(
        t.requests,
        read.load(std::sync::atomic::Ordering::SeqCst),
        "every request counted is one the server read"
    );
    // Every second request on a connection got the stray as its answer, and each of those
    // is in doubt under its operation (the bytes behind it closed the connection, so the
    // next request went on a fresh one).
    let get = r.summary.ops.iter().find(|o| o.op == "c.get").unwrap();
    let strays = get.status.get("500").copied().unwrap_or(0);
    assert_eq!(strays, 40, "{:?}", get.status);
    assert_eq!(get.in_doubt, strays);
    assert_eq!(t.in_doubt, strays);
    let text = std::fs::read_to_string(out.join("report.txt")).unwrap();
    assert!(text.contains("answers in doubt: c.get 40"), "{text}");
}

#[test]
fn a_signal_during_a_set_up_that_hangs_stops_it_and_the_report_is_written() {
    use std::sync::atomic::{AtomicU64, Ordering};
    // A server that reads requests and never answers one.
    let rt = runtime();
    let seen = std::sync::Arc::new(AtomicU64::new(0));
    let counter = seen.clone();
    let addr = rt.block_on(async move {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let counter = counter.clone();
                tokio::spawn(async move {
                    use tokio::io::AsyncReadExt;
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = s.read(&mut buf).await {
                        if n == 0 {
                            return;
                        }
                        counter.fetch_add(1, Ordering::SeqCst);
                    }
                });
            }
        });
        addr
    });
    let tmp = tempdir();
    let out = out_dir(&tmp);
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_loadmix"))
        .current_dir(root())
        .args([
            "run",
            "workloads/caldav-sync.yaml",
            "--target",
            &format!("http://{addr}"),
            "--no-preflight",
            "--set",
            "run.timeout=1h",
            "--out",
            out.to_str().unwrap(),
            "--quiet",
        ])
        .env("LOADMIX_PASSWORD", "pw")
        .env("LOADMIX_ADMIN_PASSWORD", "pw")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Once the set-up has begun: its requests reach the server, which never answers.
    let output = interrupt(child, "-INT", || seen.load(Ordering::SeqCst) > 0);
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{err}");
    assert!(read_report(&out).interrupted);
}

/// A Morse Code answer larger than a user keeps (16 MiB) is that operation's `body`
/// failure, in words that say so: what one user parses is bounded, whatever the server
/// sends, and the run goes on.
#[test]
fn a_morse_code_answer_past_what_a_user_keeps_is_a_body_failure() {
    use axum::http::{Method, StatusCode};
    let rt = runtime();
    let big = std::sync::Arc::new("x".repeat(20 << 20));
    let app = axum::Router::new().fallback(move |method: Method| {
        let big = big.clone();
        async move {
            let token = [("x-morsecode-synctoken", "t1")];
            match method {
                Method::PUT => (StatusCode::CREATED, token, String::new()),
                Method::GET => (StatusCode::OK, token, big.to_string()),
                _ => (StatusCode::NO_CONTENT, token, String::new()),
            }
        }
    });
    let addr = serve_app(&rt, app);
    let tmp = tempdir();
    let w = tmp.path().join("w.yaml");
    std::fs::write(
        &w,
        format!(
            "name: big\ntarget: http://{addr}\ncontext: ''\nrun: {{ iterations: 3, rounds: 1, seed: 1 }}\naccounts: {{ create: shared, username: u }}\nusers:\n  - class: m\n    protocol: morse\n    count: 1\n    mix: {{ sync: 1 }}\n"
        ),
    )
    .unwrap();
    let out = out_dir(&tmp);
    let code = loadmix(&[
        "run",
        &path_str(&w),
        "--out",
        &path_str(&out),
        "--quiet",
        "--no-preflight",
    ]);
    assert_eq!(code, 0);
    let r = read_report(&out);
    let sync = op(&r, "m.sync");
    assert!(sync.requests > 0, "{:?}", r.summary.ops);
    assert_eq!(
        sync.errors.get("body"),
        Some(&sync.requests),
        "{:?}",
        sync.errors
    );
    assert!(
        r.failures
            .iter()
            .any(|f| f.detail.contains("larger than 16 MiB")),
        "{:?}",
        r.failures
    );
}
