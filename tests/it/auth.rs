//! Authentication against servers that ask for it: Digest with nonce reuse and a nonce the
//! server declares stale every few requests (renewed once, counted, never a failure), and
//! credentials that never reach an output.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use digest_auth::{AuthContext, AuthorizationHeader, HttpMethod};

use crate::common::*;

const PASSWORD: &str = "pä$$ w:rd\"'{x}";

/// A Digest server: every `stale_every`-th nonce use is refused as stale; counts answers.
#[derive(Default)]
struct Dav {
    nonce: AtomicU64,
    uses: AtomicU64,
    ok: AtomicU64,
    challenged: AtomicU64,
    refused: AtomicU64,
    stale_every: u64,
}

fn challenge(nonce: u64, stale: bool) -> HeaderValue {
    HeaderValue::from_str(&format!(
        r#"Digest realm="loadmix-test", qop="auth", algorithm=SHA-256, nonce="n{nonce}", opaque="op"{}"#,
        if stale { ", stale=true" } else { "" }
    ))
    .unwrap()
}

async fn handle(State(s): State<Arc<Dav>>, req: Request) -> Response {
    let current = s.nonce.load(Ordering::SeqCst);
    let unauthorized = |stale: bool, nonce: u64| {
        let mut r = StatusCode::UNAUTHORIZED.into_response();
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, challenge(nonce, stale));
        r
    };
    let Some(h) = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        s.challenged.fetch_add(1, Ordering::SeqCst);
        return unauthorized(false, current);
    };
    let Ok(mut a) = AuthorizationHeader::parse(h) else {
        s.refused.fetch_add(1, Ordering::SeqCst);
        return unauthorized(false, current);
    };
    let sent = a.response.clone();
    let uri = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    let cx = AuthContext::new_with_method(
        a.username.clone(),
        PASSWORD,
        uri,
        Option::<&[u8]>::None,
        HttpMethod::from(req.method().as_str()),
    );
    a.digest(&cx);
    if a.response != sent || a.uri != uri {
        s.refused.fetch_add(1, Ordering::SeqCst);
        return unauthorized(false, current);
    }
    if a.nonce != format!("n{current}") {
        s.challenged.fetch_add(1, Ordering::SeqCst);
        return unauthorized(true, current);
    }
    let uses = s.uses.fetch_add(1, Ordering::SeqCst) + 1;
    if s.stale_every > 0 && uses % s.stale_every == 0 {
        // This nonce has served its time: refuse it as stale and hand out the next.
        let next = s.nonce.fetch_add(1, Ordering::SeqCst) + 1;
        s.challenged.fetch_add(1, Ordering::SeqCst);
        return unauthorized(true, next);
    }
    s.ok.fetch_add(1, Ordering::SeqCst);
    (StatusCode::OK, "fine").into_response()
}

fn start(rt: &tokio::runtime::Runtime, dav: Arc<Dav>) -> String {
    let app = Router::new().fallback(handle).with_state(dav);
    let l = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = l.local_addr().unwrap();
    rt.spawn(async move { axum::serve(l, app).await });
    format!("http://{addr}")
}

const WORKLOAD: &str = r#"
name: digest
context: ""
auth: digest
accounts: { create: shared, username: "d1gest-user" }
run: { iterations: 50, rounds: 1, warmup: 0s }
users:
  - class: api
    protocol: http
    count: 3
    mix:
      get: { weight: 3, path: "/items/{vu}" }
      put: { weight: 1, method: PUT, path: "/items/{vu}-{seq}", body: "x", expect: [200] }
"#;

/// Run the workload with `users` users against a Digest server declaring its nonce stale
/// every `stale_every` uses; the report and the server's own counts.
fn digest_run(users: u32, stale_every: u64) -> (loadmix::reports::Report, Arc<Dav>) {
    let rt = runtime();
    let dav = Arc::new(Dav {
        stale_every,
        ..Dav::default()
    });
    let url = start(&rt, dav.clone());
    let tmp = tempdir();
    let file = tmp.path().join("digest.yaml");
    std::fs::write(
        &file,
        WORKLOAD.replace("count: 3", &format!("count: {users}")),
    )
    .unwrap();
    let out = out_dir(&tmp);
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_loadmix"))
        .args([
            "run",
            &path_str(&file),
            "--target",
            &url,
            "--quiet",
            "--out",
        ])
        .arg(&out)
        .env("LOADMIX_PASSWORD", PASSWORD)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (read_report(&out), dav)
}

#[test]
fn digest_users_take_one_challenge_each_then_reuse_the_nonce() {
    let (r, dav) = digest_run(3, 0);
    let t = &r.summary.total;
    assert_eq!(t.failures, 0, "{:?}", r.failures);
    assert_eq!(t.requests, 150);
    assert_eq!(dav.ok.load(Ordering::SeqCst), 150);
    assert_eq!(dav.refused.load(Ordering::SeqCst), 0);
    assert_eq!(dav.challenged.load(Ordering::SeqCst), 3);
    assert_eq!(t.status.get("401").copied(), Some(3));
    assert_eq!(t.status.get("200").copied(), Some(150));
}

#[test]
fn a_stale_nonce_is_renewed_once_and_counted_not_failed() {
    let (r, dav) = digest_run(1, 7);
    let t = &r.summary.total;
    assert_eq!(t.failures, 0, "{:?}", r.failures);
    assert_eq!(dav.ok.load(Ordering::SeqCst), 50);
    let rotations = dav.nonce.load(Ordering::SeqCst);
    assert_eq!(rotations, 57 / 7, "a new nonce every 7th use");
    // The first challenge, then one stale challenge per new nonce: every 401 the server
    // sent is in the report, beside the 200s.
    assert_eq!(dav.challenged.load(Ordering::SeqCst), 1 + rotations);
    assert_eq!(t.status.get("401").copied(), Some(1 + rotations));
    assert_eq!(t.status.get("200").copied(), Some(50));
}

#[test]
fn wrong_credentials_are_said_to_be_refused_at_preflight_of_a_calendar_class() {
    let rt = runtime();
    let dav = Arc::new(Dav::default());
    let url = start(&rt, dav);
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_loadmix"))
        .current_dir(root())
        .args([
            "run",
            "workloads/caldav-sync.yaml",
            "--target",
            &url,
            "--set",
            "context=",
            "--set",
            "accounts.create=shared",
            "--set",
            "accounts.username=someone",
            "--set",
            "auth=digest",
            "--quiet",
        ])
        .env("LOADMIX_PASSWORD", "not-the-password")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("asks for Digest")
            && err.contains("refused the credentials of user 'someone'"),
        "{err}"
    );
    assert!(!err.contains("not-the-password"), "{err}");
}
