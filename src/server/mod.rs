//! The embedded reference server: what `loadmix serve` and `target: embedded` run.
//!
//! Today it serves a small REST message queue under the context prefix (for the generic
//! `http` protocol and JMS-style tests): `POST {ctx}/queue/{name}` enqueues the body (201),
//! `GET {ctx}/queue/{name}` removes and returns the oldest message (200) or answers 204 when
//! the queue is empty. It counts every request it answers by method and status, so tests
//! and users can check a report against what the server actually saw
//! (`GET {ctx}/_loadmix/stats`).

pub mod store;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::workload::StoreSpec;
pub use store::{MemoryStore, Store, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(
        "store {0}: not available in this version (the SQLite store comes with the Cosmo services); use memory"
    )]
    StoreUnavailable(String),
}

/// How to run the server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub bind: SocketAddr,
    pub store: StoreSpec,
    /// Path prefix of every service, e.g. `/cosmo` ("" for none).
    pub context: String,
    /// Larger request bodies are answered 413.
    pub max_body: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            store: StoreSpec::Memory,
            context: "/cosmo".into(),
            max_body: 16 * 1024 * 1024,
        }
    }
}

const METHODS: [&str; 5] = ["GET", "POST", "PUT", "DELETE", "OTHER"];

/// Requests answered, by method and status. Atomics, so counting never serialises requests.
pub struct ServerStats {
    counts: Vec<AtomicU64>,
}

impl Default for ServerStats {
    fn default() -> Self {
        ServerStats {
            counts: (0..METHODS.len() * 600)
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }
}

impl ServerStats {
    fn slot(method: &str, status: u16) -> usize {
        let m = METHODS
            .iter()
            .position(|m| *m == method)
            .unwrap_or(METHODS.len() - 1);
        m * 600 + (status as usize).min(599)
    }

    fn add(&self, method: &str, status: u16) {
        self.counts[Self::slot(method, status)].fetch_add(1, Ordering::Relaxed);
    }

    /// Requests of `method` answered with `status`.
    pub fn count(&self, method: &str, status: u16) -> u64 {
        self.counts[Self::slot(method, status)].load(Ordering::Relaxed)
    }

    /// Requests of `method`, any status.
    pub fn method_total(&self, method: &str) -> u64 {
        (100..600).map(|s| self.count(method, s)).sum()
    }

    /// Non-zero counts as (method, status, count).
    pub fn snapshot(&self) -> Vec<(String, u16, u64)> {
        let mut out = Vec::new();
        for (mi, m) in METHODS.iter().enumerate() {
            for s in 100..600u16 {
                let n = self.counts[mi * 600 + s as usize].load(Ordering::Relaxed);
                if n > 0 {
                    out.push((m.to_string(), s, n));
                }
            }
        }
        out
    }
}

#[derive(Clone)]
struct AppState {
    store: Arc<dyn Store>,
    stats: Arc<ServerStats>,
}

/// A running server.
pub struct ServerHandle {
    pub addr: SocketAddr,
    pub stats: Arc<ServerStats>,
    pub store_kind: &'static str,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl ServerHandle {
    /// Stop accepting, let requests in progress finish, and wait.
    pub async fn stop(self) {
        self.shutdown.cancel();
        let _ = self.task.await;
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// Bind and start serving in the background.
pub async fn start(cfg: ServerConfig) -> Result<ServerHandle, ServerError> {
    let store: Arc<dyn Store> = match &cfg.store {
        StoreSpec::Memory => Arc::new(MemoryStore::new()),
        StoreSpec::Sqlite(p) => return Err(ServerError::StoreUnavailable(format!("sqlite:{p}"))),
    };
    let store_kind = store.kind();
    let stats = Arc::new(ServerStats::default());
    let app = router(
        &cfg,
        AppState {
            store,
            stats: stats.clone(),
        },
    );
    let listener = TcpListener::bind(cfg.bind)
        .await
        .map_err(|source| ServerError::Bind {
            addr: cfg.bind,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| ServerError::Bind {
        addr: cfg.bind,
        source,
    })?;
    let shutdown = CancellationToken::new();
    let token = shutdown.clone();
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move { token.cancelled().await })
            .await;
    });
    Ok(ServerHandle {
        addr,
        stats,
        store_kind,
        shutdown,
        task,
    })
}

fn router(cfg: &ServerConfig, state: AppState) -> Router {
    let ctx = cfg.context.trim_end_matches('/');
    Router::new()
        .route(
            &format!("{ctx}/queue/{{name}}"),
            get(queue_pop).post(queue_push),
        )
        .route(&format!("{ctx}/_loadmix/stats"), get(stats_json))
        .layer(DefaultBodyLimit::max(cfg.max_body))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            count_requests,
        ))
        .with_state(state)
}

async fn count_requests(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let method = req.method().clone();
    // Looking at the counters must not change them.
    let own = req.uri().path().ends_with("/_loadmix/stats");
    let resp = next.run(req).await;
    if !own {
        st.stats.add(method.as_str(), resp.status().as_u16());
    }
    resp
}

fn valid_queue_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 200
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && name != "."
        && name != ".."
}

async fn queue_push(State(st): State<AppState>, Path(name): Path<String>, body: Bytes) -> Response {
    if !valid_queue_name(&name) {
        return (
            StatusCode::BAD_REQUEST,
            "queue names are letters, digits, '-', '_' or '.'\n",
        )
            .into_response();
    }
    match st.store.queue_push(&name, body) {
        Ok(depth) => {
            let mut r = StatusCode::CREATED.into_response();
            if let Ok(v) = HeaderValue::from_str(&depth.to_string()) {
                r.headers_mut().insert("x-queue-depth", v);
            }
            r
        }
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
    }
}

async fn queue_pop(State(st): State<AppState>, Path(name): Path<String>) -> Response {
    if !valid_queue_name(&name) {
        return (
            StatusCode::BAD_REQUEST,
            "queue names are letters, digits, '-', '_' or '.'\n",
        )
            .into_response();
    }
    match st.store.queue_pop(&name) {
        Ok(Some(msg)) => {
            ([(header::CONTENT_TYPE, "application/octet-stream")], msg).into_response()
        }
        Ok(None) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
    }
}

async fn stats_json(State(st): State<AppState>) -> Response {
    let rows: Vec<serde_json::Value> = st
        .stats
        .snapshot()
        .into_iter()
        .map(|(m, s, n)| serde_json::json!({"method": m, "status": s, "count": n}))
        .collect();
    axum::Json(serde_json::json!({ "store": st.store.kind(), "requests": rows })).into_response()
}
