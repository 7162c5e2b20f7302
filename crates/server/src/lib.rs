//! The embedded reference server: what `loadmix serve` and `target: embedded` run.
//!
//! Cosmo-0.7-compatible services under a context prefix (default `/cosmo`), over a memory or
//! SQLite store:
//! - CMP: `PUT {ctx}/cmp/user/{name}` as the admin creates an account;
//! - Morse Code: `{ctx}/mc/collection/{uid}` ([`morse`]);
//! - Atom: `{ctx}/atom/collection/{uid}[/{projection}[/{format}]]`, `{ctx}/atom/item/{uid}`
//!   ([`atom`]);
//! - CalDAV: `{ctx}/dav/{user}/{calendar}/{event}` ([`dav`]);
//! - a REST message queue for the generic protocol: `POST|GET {ctx}/queue/{name}`;
//! - a STOMP 1.2 broker on a port of its own, its queues in the same store ([`stomp`]);
//! - `GET {ctx}/_loadmix/stats`: requests answered, by method and status, and the broker's
//!   counts per destination (to a caller with an account); `GET {ctx}/_loadmix/metrics`:
//!   the requests and the process's cost for Prometheus (open);
//! - `{ctx}/_loadmix/delay/{ms}` answers after exactly `ms`, and
//!   `{ctx}/_loadmix/stall/{period_ms}/{stall_ms}` freezes for the end of every period:
//!   references for the generator's timing accuracy and coordinated-omission correction.
//!
//! The three protocols share one store of collections and items, so an event published
//! through Morse Code is in the Atom feed and in the CalDAV calendar. Every service except
//! the queue and `/metrics` requires HTTP Basic auth (or `--no-auth`).

// Handlers' helpers return the ready-to-send response as their error (`Result<T, Response>`),
// the usual axum shape; it is the cold path, and boxing it would only add noise.
#![allow(clippy::result_large_err)]

pub(crate) mod access_log;
pub(crate) mod acl;
pub(crate) mod atom;
pub mod certs;
pub(crate) mod cmp;
pub(crate) mod dav;
pub(crate) mod expand;
pub(crate) mod filter;
pub(crate) mod freebusy;
pub(crate) mod guard;
pub(crate) mod http;
mod listen;
pub(crate) mod model;
pub(crate) mod morse;
pub(crate) mod schedule;
mod settings;
pub(crate) mod stomp;
pub(crate) mod store;
pub(crate) mod tickets;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, put};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use http::{AppState, Settings, safe_segment, text};
pub(crate) use store::{MemoryStore, SqliteStore, Store, StoreError};

/// Why the embedded server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Its address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Its store could not be opened.
    #[error("cannot open store {spec}: {source}")]
    Store {
        /// The store, as given.
        spec: String,
        /// Why.
        source: StoreError,
    },
    /// The threads it runs on could not be started.
    #[error("cannot start the server's threads: {0}")]
    Threads(std::io::Error),
}

/// How to run the server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Where it listens (port 0: any free port).
    pub bind: SocketAddr,
    /// Where it keeps its data.
    pub store: StoreSpec,
    /// Path prefix of every service, e.g. `/cosmo` ("" for none).
    pub context: String,
    /// Larger request bodies are answered 413.
    pub max_body: usize,
    /// The admin account (CMP).
    pub admin_user: String,
    /// The admin's password.
    pub admin_password: String,
    /// Accept any credentials, skip ownership checks (quick local use).
    pub no_auth: bool,
    /// How long a client may take to send a request head, or stay idle between requests;
    /// a request body has as long, and then must keep up [`guard::MIN_BODY_RATE`].
    pub header_timeout: std::time::Duration,
    /// Connections served at once (at most [`MAX_CONNECTIONS`]).
    pub max_connections: usize,
    /// Connections one client address may have open, of those; and, apart, of the
    /// broker's.
    pub max_per_address: usize,
    /// Serve https with these settings (`certs::server_config`); plain http when `None`.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Where the STOMP broker listens (plain TCP); `None`: no broker.
    pub stomp_bind: Option<SocketAddr>,
    /// The broker takes a CONNECT without a login (one given is still checked): for the
    /// in-process server of a run, which only that run can reach.
    pub stomp_anonymous: bool,
    /// Write a line per answered request here (`serve --access-log`).
    pub access_log: Option<Arc<access_log::AccessLog>>,
}

pub use access_log::AccessLog;
pub use listen::MAX_CONNECTIONS;
pub use model::{ItemData, parse_ics};
pub use stomp::FORGOTTEN;

/// Connections one address may hold by default: half, so that one client flooding the
/// server leaves the other half to everyone else.
pub const DEFAULT_PER_ADDRESS: usize = MAX_CONNECTIONS / 2;

/// Cosmo's default administrator.
pub const DEFAULT_ADMIN: (&str, &str) = ("root", "cosmo");

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            store: StoreSpec::Memory,
            context: "/cosmo".into(),
            max_body: 16 * 1024 * 1024,
            admin_user: DEFAULT_ADMIN.0.into(),
            admin_password: DEFAULT_ADMIN.1.into(),
            no_auth: false,
            header_timeout: listen::HEADER_READ_TIMEOUT,
            max_connections: MAX_CONNECTIONS,
            max_per_address: DEFAULT_PER_ADDRESS,
            tls: None,
            stomp_bind: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            stomp_anonymous: false,
            access_log: None,
        }
    }
}

const METHODS: [&str; 10] = [
    "GET",
    "POST",
    "PUT",
    "DELETE",
    "PROPFIND",
    "REPORT",
    "MKCALENDAR",
    "HEAD",
    "OPTIONS",
    "OTHER",
];

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

    /// Requests of `method` answered with `status` (methods not listed count as `OTHER`).
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

/// A running server.
pub struct ServerHandle {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its counters.
    pub stats: Arc<ServerStats>,
    /// Its data.
    pub store: Arc<dyn Store>,
    /// `memory` or `sqlite`.
    pub store_kind: &'static str,
    /// Serving https.
    pub tls: bool,
    /// Where the STOMP broker listens, when it does.
    pub stomp_addr: Option<SocketAddr>,
    /// The broker's counts per destination.
    pub broker: Arc<stomp::BrokerStats>,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    stomp_task: Option<tokio::task::JoinHandle<()>>,
    access_log: Option<Arc<access_log::AccessLog>>,
}

impl ServerHandle {
    /// Stop accepting, let requests in progress finish, and wait.
    pub async fn stop(self) {
        self.shutdown.cancel();
        let _ = self.task.await;
        if let Some(t) = self.stomp_task {
            let _ = t.await;
        }
        // Every request answered is in the log once the server has stopped.
        if let Some(l) = &self.access_log {
            l.flush();
        }
    }

    /// The server's root URL, scheme included.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }
}

/// Which store the server keeps its data in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreSpec {
    /// In memory, gone when it stops.
    Memory,
    /// A SQLite database file (created if absent) that survives restarts.
    Sqlite(String),
}

/// Open the store a spec names.
pub(crate) fn open_store(spec: &StoreSpec) -> Result<Arc<dyn Store>, ServerError> {
    Ok(match spec {
        StoreSpec::Memory => Arc::new(MemoryStore::new()),
        StoreSpec::Sqlite(p) => Arc::new(SqliteStore::open(std::path::Path::new(p)).map_err(
            |source| ServerError::Store {
                spec: format!("sqlite:{p}"),
                source,
            },
        )?),
    })
}

/// What the handlers need of the server's configuration.
fn settings_of(cfg: &ServerConfig) -> Settings {
    Settings {
        context: cfg.context.trim_end_matches('/').to_string(),
        admin_user: cfg.admin_user.clone(),
        admin_password: cfg.admin_password.clone(),
        no_auth: cfg.no_auth,
        max_body: cfg.max_body,
    }
}

/// Bind and start serving in the background.
pub async fn start(cfg: ServerConfig) -> Result<ServerHandle, ServerError> {
    let store = open_store(&cfg.store)?;
    let store_kind = store.kind();
    let stats = Arc::new(ServerStats::default());
    let broker = Arc::new(stomp::BrokerStats::default());
    let settings = Arc::new(settings_of(&cfg));
    let state = AppState {
        store: store.clone(),
        stats: stats.clone(),
        broker: broker.clone(),
        settings: settings.clone(),
        locks: Arc::new(Mutex::new(HashSet::new())),
        tickets: Arc::default(),
        started: std::time::Instant::now(),
    };
    let app = router(&cfg, state.clone());
    let overflow = overflow_router(&cfg, state);
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
    let tls = cfg.tls.is_some();
    let acceptor = cfg.tls.clone().map(tokio_rustls::TlsAcceptor::from);
    // HTTP and the broker share the process's descriptors: each gets half of what is not
    // kept for listeners and files, so a flood of one cannot starve the other's accept.
    let share = (listen::descriptors().saturating_sub(listen::RESERVED_DESCRIPTORS) / 2).max(1);
    let (stomp_addr, stomp_task) = match cfg.stomp_bind {
        Some(bind) => {
            let l = TcpListener::bind(bind)
                .await
                .map_err(|source| ServerError::Bind { addr: bind, source })?;
            let at = l
                .local_addr()
                .map_err(|source| ServerError::Bind { addr: bind, source })?;
            let b = Arc::new(stomp::Broker::new(
                store.clone(),
                settings,
                broker.clone(),
                cfg.header_timeout,
                cfg.stomp_anonymous,
            ));
            (
                Some(at),
                Some(tokio::spawn(stomp::serve(
                    l,
                    b,
                    stomp::Admission {
                        total: stomp::MAX_CONNECTIONS.min(share),
                        per_address: cfg.max_per_address,
                    },
                    token.clone(),
                ))),
            )
        }
        None => (None, None),
    };
    let limits = listen::Limits {
        header_timeout: cfg.header_timeout,
        connections: cfg.max_connections.clamp(1, MAX_CONNECTIONS).min(share),
        per_address: cfg.max_per_address,
    };
    if let Some(log) = &cfg.access_log {
        tokio::spawn(log.clone().flusher(token.clone()));
    }
    let task = tokio::spawn(listen::serve(
        listener,
        app,
        overflow,
        limits,
        acceptor,
        cfg.access_log.clone(),
        token,
    ));
    Ok(ServerHandle {
        addr,
        stats,
        store,
        store_kind,
        tls,
        stomp_addr,
        broker,
        shutdown,
        task,
        stomp_task,
        access_log: cfg.access_log.clone(),
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
        .route(&format!("{ctx}/_loadmix/metrics"), get(metrics_text))
        .route(&format!("{ctx}/_loadmix/delay/{{ms}}"), any(delay))
        .route(
            &format!("{ctx}/_loadmix/stall/{{period_ms}}/{{stall_ms}}"),
            any(stall),
        )
        .route(&format!("{ctx}/cmp/user/{{name}}"), put(cmp::put_user))
        .route(
            &format!("{ctx}/mc/collection/{{uid}}"),
            put(morse::publish)
                .get(morse::subscribe_or_sync)
                .post(morse::update)
                .delete(morse::delete),
        )
        .route(
            &format!("{ctx}/atom/collection/{{uid}}"),
            get(atom::feed_default).post(atom::create),
        )
        .route(
            &format!("{ctx}/atom/collection/{{uid}}/{{projection}}"),
            get(atom::feed_projection),
        )
        .route(
            &format!("{ctx}/atom/collection/{{uid}}/{{projection}}/{{format}}"),
            get(atom::feed_projection_format),
        )
        .route(
            &format!("{ctx}/atom/item/{{uid}}"),
            get(atom::get_item)
                .put(atom::update)
                .delete(atom::delete_item),
        )
        // axum's method router knows only the standard methods: WebDAV goes through `any`.
        .route(&format!("{ctx}/dav"), any(dav::handle))
        .route(&format!("{ctx}/dav/"), any(dav::handle))
        .route(&format!("{ctx}/dav/{{*rest}}"), any(dav::handle))
        .route("/.well-known/caldav", any(dav::well_known))
        .route("/.well-known/carddav", any(dav::well_known))
        .fallback(|| async { text(StatusCode::NOT_FOUND, "not found") })
        .layer(DefaultBodyLimit::max(cfg.max_body))
        .layer(middleware::from_fn_with_state(
            guard::BodyRules {
                max_body: cfg.max_body,
                grace: cfg.header_timeout,
            },
            guard::read_body,
        ))
        .layer(middleware::from_fn(listen::catch_panic))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            count_requests,
        ))
        .with_state(state)
}

/// What a connection past the connection limits is served: the counters (so the server
/// can be watched under a flood), and 503 for everything else, counted like any answer.
fn overflow_router(cfg: &ServerConfig, state: AppState) -> Router {
    let ctx = cfg.context.trim_end_matches('/');
    Router::new()
        .route(&format!("{ctx}/_loadmix/stats"), get(stats_json))
        .route(&format!("{ctx}/_loadmix/metrics"), get(metrics_text))
        .fallback(guard::busy)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            count_requests,
        ))
        .with_state(state)
}

async fn count_requests(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let method = req.method().clone();
    // Looking at the counters must not change them.
    let path = req.uri().path();
    let own = path.ends_with("/_loadmix/stats") || path.ends_with("/_loadmix/metrics");
    let resp = next.run(req).await;
    if !own {
        st.stats.add(method.as_str(), resp.status().as_u16());
    }
    resp
}

fn valid_queue_name(name: &str) -> bool {
    safe_segment(name)
        && name.len() <= 200
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

async fn queue_push(State(st): State<AppState>, Path(name): Path<String>, body: Bytes) -> Response {
    if !valid_queue_name(&name) {
        return text(
            StatusCode::BAD_REQUEST,
            "queue names are letters, digits, '-', '_' or '.'",
        );
    }
    match st.store.queue_push(&name, body) {
        Ok(depth) => {
            let mut r = StatusCode::CREATED.into_response();
            r.headers_mut()
                .insert("x-queue-depth", HeaderValue::from(depth));
            r
        }
        Err(e) => http::store_error(e),
    }
}

async fn queue_pop(State(st): State<AppState>, Path(name): Path<String>) -> Response {
    if !valid_queue_name(&name) {
        return text(
            StatusCode::BAD_REQUEST,
            "queue names are letters, digits, '-', '_' or '.'",
        );
    }
    match st.store.queue_pop(&name) {
        Ok(Some(msg)) => {
            ([(header::CONTENT_TYPE, "application/octet-stream")], msg).into_response()
        }
        Ok(None) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => http::store_error(e),
    }
}

/// Answers 200 after exactly `ms` milliseconds: a reference for timing accuracy.
async fn delay(Path(ms): Path<u64>) -> Response {
    use std::time::{Duration, Instant};
    let due = Instant::now() + Duration::from_millis(ms.min(600_000));
    // tokio's timer rounds up to whole milliseconds and wakes late under load; it does
    // the long wait, a blocking thread's sleep (tens of microseconds of slack) the next
    // stretch, and this task spins the last 300 µs itself: the wake-up from the blocking
    // thread back to a worker (a futex wake of a parked thread, easily 50–100 µs on a
    // virtual machine) happens while there is time to spare, not after the due instant.
    let spin = Duration::from_micros(300);
    let coarse = due.checked_sub(Duration::from_millis(2)).unwrap_or(due);
    tokio::time::sleep_until(coarse.into()).await;
    // Only when there is more than the spin left: a trip through the blocking pool for
    // nothing (`delay/0`) would cost the very wake-up this avoids.
    // The thread measures what is left when it starts, after its own hand-over.
    if due > Instant::now() + spin {
        let _ = tokio::task::spawn_blocking(move || {
            if let Some(rest) = due.checked_duration_since(Instant::now() + spin) {
                std::thread::sleep(rest);
            }
        })
        .await;
    }
    // A reference must be exact, not cheap: a worker is held for at most the spin.
    while Instant::now() < due {
        std::hint::spin_loop();
    }
    StatusCode::OK.into_response()
}

/// A server that stalls: in every period of `period_ms` (counted from the server's start),
/// the last `stall_ms` are frozen, and a request arriving then is answered only when the
/// freeze ends. For demonstrating coordinated omission.
async fn stall(
    State(st): State<AppState>,
    Path((period_ms, stall_ms)): Path<(u64, u64)>,
) -> Response {
    let period = period_ms.max(1);
    let into = st.started.elapsed().as_millis() as u64 % period;
    let frozen_from = period.saturating_sub(stall_ms.min(period));
    if into >= frozen_from {
        tokio::time::sleep(std::time::Duration::from_millis(period - into)).await;
    }
    StatusCode::OK.into_response()
}

/// The server's own counters and process figures in the Prometheus text format, so the
/// embedded server can be watched as any server is (`monitor.prometheus`).
async fn metrics_text(State(st): State<AppState>) -> Response {
    use std::fmt::Write as _;
    let mut out = String::from(
        "# HELP loadmix_server_requests_total Requests answered, by method and status.\n# TYPE loadmix_server_requests_total counter\n",
    );
    for (m, s, n) in st.stats.snapshot() {
        let _ = writeln!(
            out,
            "loadmix_server_requests_total{{method=\"{m}\",status=\"{s}\"}} {n}"
        );
    }
    // SAFETY: getrusage fills the struct we pass and reads nothing else; a zeroed rusage
    // is a valid value of that plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } == 0 {
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        let _ = writeln!(
            out,
            "# HELP process_cpu_seconds_total User and system CPU time.\n# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total {}",
            secs(ru.ru_utime) + secs(ru.ru_stime)
        );
    }
    if let Ok(statm) = std::fs::read_to_string("/proc/self/statm") {
        // SAFETY: sysconf reads a system constant.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
        if let Some(rss) = statm
            .split_ascii_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u64>().ok())
        {
            let _ = writeln!(
                out,
                "# HELP process_resident_memory_bytes Resident memory.\n# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes {}",
                rss * page
            );
        }
    }
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        out,
    )
        .into_response()
}

/// The counters, to a caller with an account (or any, under `--no-auth`): they name every
/// destination clients used, which is theirs to see, not the network's. `/metrics` holds
/// only requests by method and status and the process's cost, and stays open, as
/// Prometheus endpoints are.
async fn stats_json(State(st): State<AppState>, headers: axum::http::HeaderMap) -> Response {
    if let Err(refused) = st.authenticate(&headers) {
        return refused;
    }
    let rows: Vec<serde_json::Value> = st
        .stats
        .snapshot()
        .into_iter()
        .map(|(m, s, n)| serde_json::json!({"method": m, "status": s, "count": n}))
        .collect();
    let destinations: Vec<serde_json::Value> = st
        .broker
        .destinations()
        .into_iter()
        .map(|(name, c)| serde_json::json!({"destination": name, "counts": c}))
        .collect();
    axum::Json(serde_json::json!({
        "store": st.store.kind(),
        "requests": rows,
        "stomp": destinations,
    }))
    .into_response()
}
