//! Watching a run while it goes: the lanes' running totals (`metrics::live`) served over
//! HTTP as a Prometheus text page (`prom.rs`, `--metrics ADDR`) and as a dashboard, one
//! self-contained page polling a JSON snapshot (`page.rs`, `--dashboard [ADDR]`).
//!
//! A [`Board`] lists the lanes (one target of one sweep point) as the run opens them and
//! keeps them to the end, so every counter a scraper saw goes on growing or stays. The
//! board's lock is taken when a lane joins and when a page is built, never by the
//! aggregators that write the totals, so a slow scraper cannot slow the run.
//!
//! The server is bounded like the embedded one: a request head must arrive within
//! [`HEADER_TIMEOUT`], at most [`MAX_CONNECTIONS`] are served at once (a newer one closes
//! the oldest, so idle sockets cannot lock a scraper out),
//! only `GET` is answered, and nothing a client sends is read beyond its request head.

pub(crate) mod page;
pub(crate) mod prom;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::metrics::Live;

/// How long a client may take to send a request head, or stay idle between requests.
pub(crate) const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections served at once; a browser tab holds one or two, a Prometheus one.
pub(crate) const MAX_CONNECTIONS: usize = 32;

#[derive(Debug, thiserror::Error)]
pub(crate) enum LiveError {
    #[error("--{what} on {addr}: {source}")]
    Bind {
        what: &'static str,
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// One lane as the pages name it.
pub(crate) struct Lane {
    pub target: String,
    /// The sweep point (`KEY=VALUE`), when the run sweeps.
    pub point: Option<String>,
    /// Measured rounds planned, and warm-up rounds (numbered after them).
    pub rounds: u32,
    pub warmup_rounds: u32,
    /// The `warmup:` window at the start of each measured round, seconds.
    pub warmup_s: f64,
    /// How long each round runs, seconds; `None` when rounds end by iterations.
    pub round_s: Option<f64>,
    pub live: Arc<Live>,
    /// The workload's thresholds, which the dashboard judges on the running totals.
    pub rules: Vec<Rule>,
    /// The watched server processes' last second (`--monitor`, a started server).
    pub watched: crate::monitor::Latest,
}

/// A threshold of the workload as the dashboard reads it: the figure it names (`total`, a
/// class, `class.op`, or a sum judged only at the end), the metric's name as written, and
/// the condition.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Rule {
    /// The rule as written: `p95 < 200ms`.
    pub text: String,
    pub op: String,
    /// `p50` … `p99.9`, `mean`, `max`, `errors`, `ops_per_sec`.
    pub metric: &'static str,
    /// `<`, `<=`, `>`, `>=`.
    pub cmp: &'static str,
    /// Milliseconds, percent or per second, as the metric is.
    pub value: f64,
}

/// What the pages show: the run, its lanes, and where its report is once written.
pub(crate) struct Board {
    pub run_id: String,
    pub workload: String,
    /// `--shard I/N` when the run is one shard of several: (I, N).
    pub shard: Option<(u32, u32)>,
    started: Instant,
    started_at: SystemTime,
    lanes: Mutex<Vec<Arc<Lane>>>,
    /// The report page written at the end (the comparison or sweep page when there is one).
    report: Mutex<Option<PathBuf>>,
    /// One summary a second while a dashboard is served, the last [`page::KEEP`].
    history: Mutex<VecDeque<page::Second>>,
}

impl Board {
    pub(crate) fn new(run_id: &str, workload: &str, shard: Option<(u32, u32)>) -> Arc<Board> {
        Arc::new(Board {
            run_id: run_id.to_string(),
            workload: workload.to_string(),
            shard,
            started: Instant::now(),
            started_at: SystemTime::now(),
            lanes: Mutex::new(Vec::new()),
            report: Mutex::new(None),
            history: Mutex::new(VecDeque::new()),
        })
    }

    /// Keep this second's summary, forgetting the oldest past [`page::KEEP`].
    pub(crate) fn remember(&self) {
        let s = page::second(self);
        if let Ok(mut h) = self.history.lock() {
            if h.len() >= page::KEEP {
                h.pop_front();
            }
            h.push_back(s);
        }
    }

    /// The seconds kept, as the page reads them.
    pub(crate) fn history_json(&self) -> String {
        self.history
            .lock()
            .map(|h| page::history_json(&h))
            .unwrap_or_else(|_| "{}".into())
    }

    pub(crate) fn add(&self, lane: Lane) {
        if let Ok(mut l) = self.lanes.lock() {
            l.push(Arc::new(lane));
        }
    }

    /// The lanes so far (cheap clones: the pages read their atomics after the lock).
    pub(crate) fn lanes(&self) -> Vec<Arc<Lane>> {
        self.lanes.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// The run is over and its report is at `path`.
    pub(crate) fn finish(&self, path: PathBuf) {
        if let Ok(mut r) = self.report.lock() {
            *r = Some(path);
        }
    }

    pub(crate) fn report(&self) -> Option<PathBuf> {
        self.report.lock().ok().and_then(|r| r.clone())
    }

    pub(crate) fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    pub(crate) fn started_at(&self) -> SystemTime {
        self.started_at
    }
}

/// What a listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Serves {
    /// `/metrics` only (`--metrics`).
    Metrics,
    /// The dashboard `/`, its `/live.json`, the final `/report`, and `/metrics` too.
    Dashboard,
}

impl Serves {
    /// Its flag's name: `dashboard`, `metrics`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Serves::Metrics => "metrics",
            Serves::Dashboard => "dashboard",
        }
    }
}

/// A listener serving the board until stopped.
pub(crate) struct Server {
    pub addr: SocketAddr,
    pub serves: Serves,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    /// Where a person or a scraper reads it.
    pub(crate) fn url(&self) -> String {
        match self.serves {
            Serves::Metrics => format!("http://{}/metrics", self.addr),
            Serves::Dashboard => format!("http://{}/", self.addr),
        }
    }

    pub(crate) async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

/// Bind `addr` and serve the board there.
pub(crate) async fn serve(
    addr: SocketAddr,
    board: Arc<Board>,
    serves: Serves,
) -> Result<Server, LiveError> {
    let what = serves.name();
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| LiveError::Bind { what, addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| LiveError::Bind { what, addr, source })?;
    let stop = CancellationToken::new();
    if serves == Serves::Dashboard {
        tokio::spawn(keep_history(board.clone(), stop.clone()));
    }
    let task = tokio::spawn(accept(listener, router(board, serves), stop.clone()));
    Ok(Server {
        addr: bound,
        serves,
        stop,
        task,
    })
}

/// Remember the board once a second until `stop`, so that a page opened at any time draws
/// the run from its start.
async fn keep_history(board: Arc<Board>, stop: CancellationToken) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => board.remember(),
            _ = stop.cancelled() => return,
        }
    }
}

fn router(board: Arc<Board>, serves: Serves) -> Router<()> {
    let r = Router::new().route("/metrics", get(metrics_page));
    let r = match serves {
        Serves::Metrics => r,
        Serves::Dashboard => r
            .route("/", get(dashboard_page))
            .route("/live.json", get(snapshot))
            .route("/history.json", get(history))
            // Browsers ask for it unprompted; a 404 would be an error in the page's console.
            .route("/favicon.ico", get(|| async { StatusCode::NO_CONTENT }))
            .route("/report", get(report_page)),
    };
    r.with_state(board)
}

async fn metrics_page(State(b): State<Arc<Board>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, prom::CONTENT_TYPE)],
        prom::render(&b),
    )
}

async fn dashboard_page() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        page::DASHBOARD,
    )
}

async fn snapshot(State(b): State<Arc<Board>>) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        page::snapshot_json(&b),
    )
}

/// The report page written at the end, once it is.
async fn history(State(b): State<Arc<Board>>) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        b.history_json(),
    )
}

async fn report_page(State(b): State<Arc<Board>>) -> Response {
    let Some(path) = b.report() else {
        return (
            StatusCode::NOT_FOUND,
            "the report is written when the run ends",
        )
            .into_response();
    };
    match crate::formats::files::read(&path, crate::formats::files::REPORT) {
        Ok(bytes) => ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], bytes).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn accept(listener: TcpListener, app: Router, stop: CancellationToken) {
    let open = Arc::new(Mutex::new(Open::default()));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT);
    loop {
        let (stream, _) = tokio::select! {
            _ = stop.cancelled() => return,
            r = listener.accept() => match r {
                Ok(c) => c,
                // Out of descriptors or a connection reset before it was taken: go on.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        let (id, evict) = open.lock().unwrap_or_else(|p| p.into_inner()).admit();
        let service = TowerToHyperService::new(app.clone());
        let conn = builder.serve_connection(TokioIo::new(stream), service);
        let (stop, open) = (stop.clone(), open.clone());
        tokio::spawn(async move {
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                // Made room for a newer one: closed at once.
                _ = evict.cancelled() => {}
                _ = stop.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    // An answer being written may finish; an idle connection ends at once.
                    let _ = tokio::time::timeout(Duration::from_secs(2), conn).await;
                }
            }
            open.lock().unwrap_or_else(|p| p.into_inner()).left(id);
        });
    }
}

/// The connections being served, oldest first. A full house makes room by closing the
/// oldest, so sockets held open and idle (which could otherwise keep every slot for
/// their head timeout, again and again) cannot lock out a scrape that asks and goes.
#[derive(Default)]
struct Open {
    next: u64,
    conns: std::collections::VecDeque<(u64, CancellationToken)>,
}

impl Open {
    /// A new connection's id and the token that closes it.
    fn admit(&mut self) -> (u64, CancellationToken) {
        if self.conns.len() >= MAX_CONNECTIONS
            && let Some((_, oldest)) = self.conns.pop_front()
        {
            oldest.cancel();
        }
        self.next += 1;
        let token = CancellationToken::new();
        self.conns.push_back((self.next, token.clone()));
        (self.next, token)
    }

    fn left(&mut self, id: u64) {
        self.conns.retain(|(i, _)| *i != id);
    }
}

/// Whether an address is on this host only; anything else is said aloud at start.
pub(crate) fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn sockets_held_idle_cannot_lock_a_scraper_out() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let board = Board::new("r", "w", None);
            let addr = "127.0.0.1:0".parse().unwrap();
            let server = serve(addr, board, Serves::Metrics).await.unwrap();
            // More idle sockets than there are slots, each sending half a head.
            let mut idle = Vec::new();
            for _ in 0..MAX_CONNECTIONS + 8 {
                let mut s = tokio::net::TcpStream::connect(server.addr).await.unwrap();
                s.write_all(b"GET /metr").await.unwrap();
                idle.push(s);
            }
            let mut scrape = tokio::net::TcpStream::connect(server.addr).await.unwrap();
            scrape
                .write_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
                .await
                .unwrap();
            let mut answer = Vec::new();
            let _ = scrape.read_to_end(&mut answer).await;
            let answer = String::from_utf8_lossy(&answer);
            assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
            server.stop().await;
        });
    }
}
