//! Stateful generic http: operations act only on what their own user made (pools), an
//! empty pool skips the operation without counting it, deletes never miss, and the round's
//! cleanup removes the rest, leaving what was there before untouched.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;

use crate::common::*;

/// A tiny WebDAV-ish store: PUT, GET, PROPFIND (Depth 0) and DELETE on any path; counts
/// answers by method and status.
#[derive(Default)]
pub(crate) struct Share {
    pub(crate) files: Mutex<BTreeMap<String, Vec<u8>>>,
    pub(crate) answered: Mutex<BTreeMap<(String, u16), u64>>,
}

pub(crate) async fn handle(State(s): State<Arc<Share>>, req: Request) -> axum::response::Response {
    let method = req.method().to_string();
    let path = req.uri().path().to_string();
    let body = axum::body::to_bytes(req.into_body(), 1 << 20)
        .await
        .unwrap_or_default();
    let status = {
        let mut files = s.files.lock().unwrap();
        match method.as_str() {
            "PUT" => {
                let existed = files.insert(path.clone(), body.to_vec()).is_some();
                if existed { 204 } else { 201 }
            }
            "GET" if files.contains_key(&path) => 200,
            "PROPFIND" if files.contains_key(&path) => 207,
            "DELETE" if files.remove(&path).is_some() => 204,
            _ => 404,
        }
    };
    *s.answered
        .lock()
        .unwrap()
        .entry((method, status))
        .or_insert(0) += 1;
    StatusCode::from_u16(status).unwrap().into_response()
}

/// `workloads/webdav.yaml` against the share at `addr`, 2 rounds without think, with
/// `extra` arguments; its report, which has no failure.
fn run_webdav(addr: std::net::SocketAddr, extra: &[&str]) -> loadmix::reports::Report {
    let tmp = tempdir();
    let out = out_dir(&tmp);
    let target = format!("http://{addr}/dav");
    let mut args = vec![
        "run",
        "workloads/webdav.yaml",
        "--target",
        &target,
        "--set",
        "auth=basic",
        "--set",
        "think=0ms",
        "--rounds",
        "2",
        "--set",
        "run.warmup=0s",
        "--quiet",
    ];
    args.extend_from_slice(extra);
    let out_s = path_str(&out);
    args.extend_from_slice(&["--out", &out_s]);
    let o = loadmix_bin(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = read_report(&out);
    assert_eq!(r.summary.total.failures, 0, "{:?}", r.failures);
    r
}

#[test]
fn users_act_only_on_what_they_made_and_the_round_cleans_up() {
    let rt = runtime();
    let share = Arc::new(Share::default());
    // Someone else's file, there before the run.
    share
        .files
        .lock()
        .unwrap()
        .insert("/dav/theirs.txt".into(), b"keep me".to_vec());
    let app = Router::new().fallback(handle).with_state(share.clone());
    let addr = serve_app(&rt, app);
    let r = run_webdav(addr, &["--iterations", "60"]);
    let answered = share.answered.lock().unwrap().clone();
    // Nothing ever missed: no GET, PROPFIND or DELETE of a file that was not there.
    for ((m, status), n) in &answered {
        assert_ne!(*status, 404, "{m} -> 404 ×{n}");
    }
    // Each round's leftovers were deleted, and only the run's own files.
    let files = share.files.lock().unwrap();
    assert_eq!(
        files.keys().collect::<Vec<_>>(),
        ["/dav/theirs.txt"],
        "only what was there before is left"
    );
    assert_eq!(files["/dav/theirs.txt"], b"keep me");
    let cleanup: u64 = r.rounds.iter().map(|x| x.cleanup.requests).sum();
    assert!(cleanup > 0);
    let puts = answered.get(&("PUT".into(), 201)).copied().unwrap_or(0);
    let deletes = answered.get(&("DELETE".into(), 204)).copied().unwrap_or(0);
    assert_eq!(
        puts, deletes,
        "every file put was deleted, by the users or the cleanup"
    );
    // Operations on an empty pool were skipped, not counted: the counts add up to the
    // server's, cleanup apart.
    let reported: u64 = r.summary.ops.iter().flat_map(|o| o.status.values()).sum();
    let total: u64 = answered.values().sum();
    assert_eq!(reported + cleanup, total);
}

#[test]
fn pools_are_checked_before_anything_is_sent() {
    let tmp = tempdir();
    let cases = [
        (
            "users: [{class: a, protocol: http, count: 1, mix: {g: {weight: 1, path: '{f}', pick: files}}}]",
            "no operation fills pool 'files'",
        ),
        (
            "users: [{class: a, protocol: http, count: 1, mix: {g: {weight: 1, path: /x, forget: true}}}]",
            "needs pick: POOL",
        ),
        (
            "users: [{class: a, protocol: http, count: 1, cleanup: {docs: DELETE}, mix: {p: {weight: 1, method: PUT, path: /x, remember: files}}}]",
            "no operation remembers into a pool 'docs'",
        ),
        (
            "users: [{class: a, protocol: http, count: 1, mix: {p: {weight: 1, method: PUT, path: /x, remember: files}, g: {weight: 1, path: '{f}', pick: {pool: files, as: f, order: sideways}}}}]",
            "unknown order 'sideways'",
        ),
        (
            "users: [{class: a, protocol: http, count: 1, mix: {p: {weight: 1, method: PUT, path: /x, remember: files}, g: {weight: 1, path: '{x}', pick: {pool: files, as: file}}}}]",
            "'file' is a built-in variable",
        ),
        (
            "users: [{class: a, protocol: http, count: 1, mix: {s: {weight: 1, steps: [{name: a, path: /1}, {name: b, path: /2}, {name: c, path: /3}, {name: d, path: /4}, {name: e, path: /5}]}}}]",
            "an operation has 1 to 4 steps, found 5",
        ),
        (
            "users: [{class: a, protocol: http, count: 1, mix: {s: {weight: 1, steps: [{name: a, path: /1}, {name: a, path: /2}]}}}]",
            "step 'a' appears twice",
        ),
        (
            "users: [{class: a, protocol: http, count: 1, mix: {s: {weight: 1, method: GET, steps: [{name: a, path: /1}]}}}]",
            "unknown key",
        ),
    ];
    for (i, (yaml, said)) in cases.iter().enumerate() {
        let f = tmp.path().join(format!("p{i}.yaml"));
        std::fs::write(&f, yaml).unwrap();
        let o = loadmix_bin(&["validate", &path_str(&f)]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{yaml}: {err}");
        assert!(err.contains(said), "{yaml}: {err}");
        assert!(err.contains(&format!("p{i}.yaml:")), "{err}");
    }
}

#[test]
fn an_operation_of_steps_is_timed_once_and_each_step_reported_apart() {
    let rt = runtime();
    let share = Arc::new(Share::default());
    let app = Router::new().fallback(handle).with_state(share.clone());
    let addr = serve_app(&rt, app);
    let tmp = tempdir();
    let w = tmp.path().join("steps.yaml");
    std::fs::write(
        &w,
        format!(
            r#"
target: http://{addr}
context: ""
run: {{ iterations: 40, rounds: 1, warmup: 0s }}
users:
  - class: c
    protocol: http
    count: 3
    cleanup: {{ files: DELETE }}
    mix:
      put_get:
        weight: 3
        steps:
          - {{ name: put, method: PUT, path: "/f-{{vu}}-{{seq}}", body: x, expect: [201], remember: files }}
          - {{ name: get, path: "/f-{{vu}}-{{seq}}", expect: [200] }}
      missing:
        weight: 1
        steps:
          - {{ name: get, path: "/nowhere-{{seq}}", expect: [200] }}
          - {{ name: never, path: /x }}
"#
        ),
    )
    .unwrap();
    let out = out_dir(&tmp);
    let o = loadmix_bin(&["run", &path_str(&w), "--out", &path_str(&out), "--quiet"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = read_report(&out);
    let row = |name: &str| {
        r.summary
            .ops
            .iter()
            .find(|o| o.op == name)
            .unwrap_or_else(|| panic!("no row {name}"))
    };
    let (op, put, get) = (row("c.put_get"), row("c.put_get.put"), row("c.put_get.get"));
    assert_eq!(op.requests, put.requests);
    assert_eq!(op.requests, get.requests);
    assert_eq!(op.failures, 0);
    // The operation's latency is its steps' together.
    assert!(op.latency_ms.mean >= put.latency_ms.mean + get.latency_ms.mean - 0.01);
    // A failing first step stops the sequence: the second step never runs.
    let missing = row("c.missing");
    assert_eq!(missing.failures, missing.requests);
    assert_eq!(row("c.missing.get").failures, missing.requests);
    assert!(
        r.summary
            .ops
            .iter()
            .all(|o| o.op != "c.missing.never" || o.requests == 0)
    );
    // The total counts each operation once, not its steps again.
    assert_eq!(r.summary.total.requests, 3 * 40);
    assert_eq!(r.summary.total.requests, op.requests + missing.requests);
    // Every request the server answered is in the statuses, cleanup apart.
    let answered: u64 = share.answered.lock().unwrap().values().sum();
    let cleanup: u64 = r.rounds.iter().map(|x| x.cleanup.requests).sum();
    let total_statuses: u64 = r.summary.total.status.values().sum();
    assert_eq!(total_statuses + cleanup, answered);
    assert!(share.files.lock().unwrap().is_empty());
}

/// A store whose DELETEs never answer, with the PUTs it took and the DELETEs it saw.
#[derive(Default)]
struct Stuck {
    puts: std::sync::atomic::AtomicU64,
    deletes: std::sync::atomic::AtomicU64,
}

async fn stuck(State(s): State<Arc<Stuck>>, req: Request) -> axum::response::Response {
    use std::sync::atomic::Ordering;
    if req.method() == "DELETE" {
        s.deletes.fetch_add(1, Ordering::SeqCst);
        std::future::pending::<()>().await;
    }
    let _ = axum::body::to_bytes(req.into_body(), 1 << 20).await;
    s.puts.fetch_add(1, Ordering::SeqCst);
    StatusCode::CREATED.into_response()
}

/// Users that only PUT into a pool, so that only the cleanup deletes; the server hangs.
fn against_stuck_deletes(rt: &tokio::runtime::Runtime) -> (Arc<Stuck>, String, tempfile::TempDir) {
    let share = Arc::new(Stuck::default());
    let app = Router::new().fallback(stuck).with_state(share.clone());
    let addr = serve_app(rt, app);
    let tmp = tempdir();
    let w = tmp.path().join("w.yaml");
    std::fs::write(
        &w,
        format!(
            "name: stuck\ntarget: http://{addr}\ncontext: ''\nrun: {{ iterations: 5, timeout: 60s }}\nusers:\n  - class: a\n    protocol: http\n    count: 2\n    cleanup: {{ files: DELETE }}\n    mix:\n      put: {{ weight: 1, method: PUT, path: '/f-{{vu}}-{{seq}}', body: x, remember: files }}\n"
        ),
    )
    .unwrap();
    (share, path_str(&w), tmp)
}

#[test]
fn a_cleanup_past_its_deadline_stops_and_names_what_it_left() {
    let rt = runtime();
    let (share, w, tmp) = against_stuck_deletes(&rt);
    let out = out_dir(&tmp);
    let o = loadmix_bin(&[
        "run",
        &w,
        "--cleanup-timeout",
        "1s",
        "--out",
        &path_str(&out),
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = read_report(&out);
    let c = &r.rounds[0].cleanup;
    assert_eq!(
        c.cut_short.as_deref(),
        Some("--cleanup-timeout 1s"),
        "{c:?}"
    );
    let puts = share.puts.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(puts, 10);
    assert_eq!(c.left, puts, "every file is left: no DELETE was answered");
    assert!(
        c.left_items.iter().all(|i| i.starts_with("DELETE http://")),
        "{:?}",
        c.left_items
    );
    let text = std::fs::read_to_string(out.join("report.txt")).unwrap();
    assert!(
        text.contains("cleanup was cut short by --cleanup-timeout 1s: 10 item(s)"),
        "{text}"
    );
}

#[test]
fn a_signal_during_cleanup_cuts_it_short_and_the_report_is_written() {
    let rt = runtime();
    let (share, w, tmp) = against_stuck_deletes(&rt);
    let out = out_dir(&tmp);
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_loadmix"))
        .current_dir(root())
        .args(["run", &w, "--out", &path_str(&out), "--quiet"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Once the cleanup has begun (its DELETEs reach the server).
    let begun = || share.deletes.load(std::sync::atomic::Ordering::SeqCst) > 0;
    let output = interrupt(child, "-INT", begun);
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{err}");
    let r = read_report(&out);
    let c = &r.rounds[0].cleanup;
    assert_eq!(c.cut_short.as_deref(), Some("a stop signal"), "{c:?}");
    assert_eq!(c.left, 10);
    // The round itself had ended: its figures are whole.
    assert_eq!(r.summary.total.successes, 10);
}

#[test]
fn a_prefill_fills_each_users_pool_in_set_up_off_the_clock() {
    // WebDAV users with 10 files each before their first pick: their gets, PROPFINDs and
    // deletes find files from the start, the puts that made them are set-up's, and every
    // request the server answered is accounted for.
    let rt = runtime();
    let share = Arc::new(Share::default());
    let app = Router::new().fallback(handle).with_state(share.clone());
    let addr = serve_app(&rt, app);
    let r = run_webdav(
        addr,
        &["--iterations", "20", "--set", "users.dav.prefill={put: 10}"],
    );
    for round in &r.rounds {
        assert_eq!(
            round.setup.answers.get("PUT 201"),
            Some(&(8 * 10)),
            "round {}: {:?}",
            round.index,
            round.setup.answers
        );
    }
    // With ten files each, no pick found its pool empty.
    assert_eq!(r.summary.total.skipped, 0);
    let answered: u64 = share.answered.lock().unwrap().values().sum();
    let cleanup: u64 = r.rounds.iter().map(|x| x.cleanup.requests).sum();
    let setup: u64 = r.rounds.iter().map(|x| x.setup.requests).sum();
    let measured: u64 = r.summary.total.status.values().sum();
    assert_eq!(measured + setup + cleanup, answered);
    assert!(share.files.lock().unwrap().is_empty(), "all removed");
    // A prefill names an operation that fills a pool.
    let bad = loadmix_bin(&[
        "validate",
        "workloads/webdav.yaml",
        "--set",
        "users.dav.prefill={get: 10}",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("'get' fills no pool"));
}
