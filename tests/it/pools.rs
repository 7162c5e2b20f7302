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
struct Share {
    files: Mutex<BTreeMap<String, Vec<u8>>>,
    answered: Mutex<BTreeMap<(String, u16), u64>>,
}

async fn handle(State(s): State<Arc<Share>>, req: Request) -> axum::response::Response {
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
    let l = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = l.local_addr().unwrap();
    rt.spawn(async move { axum::serve(l, app).await });
    let tmp = tempdir();
    let out = out_dir(&tmp);
    let o = loadmix_bin(&[
        "run",
        "workloads/webdav.yaml",
        "--target",
        &format!("http://{addr}/dav"),
        "--set",
        "auth=basic",
        "--set",
        "think=0ms",
        "--iterations",
        "60",
        "--rounds",
        "2",
        "--set",
        "run.warmup=0s",
        "--out",
        &path_str(&out),
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = read_report(&out);
    assert_eq!(r.summary.total.failures, 0, "{:?}", r.failures);
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
