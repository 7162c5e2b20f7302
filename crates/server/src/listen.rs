//! The accept loop: every connection is served by hyper's HTTP/1.1 server with limits no
//! client can talk its way around. A request head must arrive within the header timeout
//! (default [`HEADER_READ_TIMEOUT`]), which also closes connections left idle that long between
//! requests (slowloris, and clients that open and never speak); a body is bounded by
//! [`guard::read_body`]. At most [`MAX_CONNECTIONS`] are served at once, and one address
//! has at most its share of them; a connection past either is served the overflow router
//! (the counters, 503 for the rest) or closed. A handler that panics answers 500 and the
//! server goes on. With TLS settings, every connection first completes a TLS handshake,
//! within the same header timeout. A connection lingers after its last answer, so a
//! refused upload reads its 413 rather than a reset.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::FutureExt;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use super::guard;

/// How long a client may take to send a request head, or stay silent between requests
/// (the default of `ServerConfig::header_timeout`).
pub(super) const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 10_000;
/// How long in-flight requests may take to finish once the server is asked to stop.
const DRAIN: Duration = Duration::from_secs(5);

/// A middleware that turns a panic in a handler into a 500 (and a line on stderr) instead
/// of a connection closed with no answer.
pub(super) async fn catch_panic(req: Request<Body>, next: axum::middleware::Next) -> Response {
    // Kept (cheap clones) to name the request if it panics; formatted only then.
    let (method, uri) = (req.method().clone(), req.uri().clone());
    match std::panic::AssertUnwindSafe(next.run(req))
        .catch_unwind()
        .await
    {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            eprintln!(
                "loadmix serve: {method} {}: handler panicked: {msg}",
                uri.path()
            );
            (StatusCode::INTERNAL_SERVER_ERROR, "internal error").into_response()
        }
    }
}

/// Descriptors kept for what is not a client's connection: listeners, store files, the
/// access log, the process's own.
pub(super) const RESERVED_DESCRIPTORS: usize = 64;

/// The descriptors this process may hold: its soft limit, first raised to the hard one
/// (as Go's runtime and nginx's `worker_rlimit_nofile` do), so that connections are
/// bounded by what the machine allows rather than by a shell's default of 1,024.
pub(super) fn descriptors() -> usize {
    // SAFETY: getrlimit and setrlimit read and write the plain struct passed, nothing
    // else; a zeroed rlimit is a valid value of it.
    let mut r: libc::rlimit = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return 1024;
    }
    if r.rlim_cur < r.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: r.rlim_max,
            rlim_max: r.rlim_max,
        };
        // SAFETY: as above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            r.rlim_cur = r.rlim_max;
        }
    }
    usize::try_from(r.rlim_cur).unwrap_or(usize::MAX)
}

/// What the accept loop allows (see [`guard`]).
#[derive(Clone)]
pub(super) struct Limits {
    /// How long a request head may take, and a connection stay idle between requests.
    pub header_timeout: Duration,
    /// Connections served at once.
    pub connections: usize,
    /// Connections one client address may have open among those.
    pub per_address: usize,
}

/// How long a connection is read and discarded after its last answer, so that a client
/// still sending (a body refused with 413) reads that answer instead of a reset.
const LINGER: Duration = Duration::from_secs(2);
/// At most this much is discarded while lingering.
const LINGER_BYTES: usize = 64 << 20;

/// Serve `app` on `listener` until `stop` is cancelled, then let requests in flight
/// finish (up to [`DRAIN`]). A connection past the limits (all connections taken,
/// or its address holding its share) is served `overflow` instead, one request with a
/// short head timeout: the counters stay answerable under a flood and the rest get 503;
/// past [`guard::OVERFLOW_CONNECTIONS`] of those, it is closed unanswered.
pub(super) async fn serve(
    listener: TcpListener,
    app: Router,
    overflow: Router,
    limits: Limits,
    tls: Option<TlsAcceptor>,
    log: Option<Arc<super::access_log::AccessLog>>,
    stop: CancellationToken,
) {
    let normal = Arc::new(builder(limits.header_timeout, true));
    let spill = Arc::new(builder(
        limits.header_timeout.min(guard::OVERFLOW_HEADER_TIMEOUT),
        false,
    ));
    let slots = Arc::new(Semaphore::new(limits.connections));
    let spill_slots = Arc::new(Semaphore::new(guard::OVERFLOW_CONNECTIONS));
    let addresses = guard::Addresses::new(limits.per_address);
    let mut conns = JoinSet::new();
    loop {
        let (stream, peer) = tokio::select! {
            a = listener.accept() => match a {
                Ok(a) => a,
                // Out of descriptors or similar: the next accept may succeed.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            _ = stop.cancelled() => break,
        };
        let admitted = slots
            .clone()
            .try_acquire_owned()
            .ok()
            .and_then(|p| addresses.admit(peer.ip()).map(|t| (p, t)));
        let (place, builder, service) = match admitted {
            Some((p, t)) => ((p, Some(t)), normal.clone(), app.clone()),
            None => match spill_slots.clone().try_acquire_owned() {
                Ok(p) => ((p, None), spill.clone(), overflow.clone()),
                // Closed at once: holding it would be the flood's aim.
                Err(_) => continue,
            },
        };
        let _ = stream.set_nodelay(true);
        let stop = stop.clone();
        let tls = tls.clone();
        let header_timeout = limits.header_timeout;
        let log = log.clone();
        conns.spawn(async move {
            // Its slot (and its address's, unless it is overflow), given back at the end.
            let _place = place;
            match tls {
                None => serve_one(&builder, stream, service, peer, log, &stop).await,
                Some(acceptor) => {
                    // A client that never finishes its handshake is cut off like one that
                    // never finishes its request head.
                    let handshake = tokio::time::timeout(header_timeout, acceptor.accept(stream));
                    if let Ok(Ok(s)) = handshake.await {
                        serve_one(&builder, s, service, peer, log, &stop).await;
                    }
                }
            }
        });
        // Reap finished connections so the set does not grow with every one served.
        while conns.try_join_next().is_some() {}
    }
    let _ = tokio::time::timeout(DRAIN, async { while conns.join_next().await.is_some() {} }).await;
    conns.abort_all();
}

fn builder(header_timeout: Duration, keep_alive: bool) -> hyper::server::conn::http1::Builder {
    let mut b = hyper::server::conn::http1::Builder::new();
    b.timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .keep_alive(keep_alive);
    b
}

type Answer = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Response, std::convert::Infallible>> + Send>,
>;

/// Serve one connection until it ends, or shut it down gracefully when asked to stop;
/// then linger (see [`linger`]).
async fn serve_one<S>(
    builder: &hyper::server::conn::http1::Builder,
    stream: S,
    app: Router,
    peer: std::net::SocketAddr,
    log: Option<Arc<super::access_log::AccessLog>>,
    stop: &CancellationToken,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let inner = TowerToHyperService::new(app);
    // Boxed answers make the connection Unpin, so it can hand its stream back at the end.
    let service =
        hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| -> Answer {
            let Some(log) = log.clone() else {
                return Box::pin(hyper::service::Service::call(&inner, req));
            };
            let seen = super::access_log::Seen::of(
                peer,
                req.method(),
                req.uri(),
                req.version(),
                req.headers(),
            );
            let answer = hyper::service::Service::call(&inner, req);
            Box::pin(async move {
                let r = answer.await;
                if let Ok(resp) = &r {
                    let bytes = hyper::body::Body::size_hint(resp.body()).exact();
                    log.write(&seen, resp.status(), bytes);
                }
                r
            })
        });
    let mut conn = builder.serve_connection(TokioIo::new(stream), service);
    let stopping = stop.cancelled();
    tokio::pin!(stopping);
    let mut asked = false;
    let _ = std::future::poll_fn(|cx| {
        if !asked && stopping.as_mut().poll(cx).is_ready() {
            asked = true;
            std::pin::Pin::new(&mut conn).graceful_shutdown();
        }
        conn.poll_without_shutdown(cx)
    })
    .await;
    linger(conn.into_parts().io.into_inner()).await;
}

/// Close the sending side, then read and discard what the client still sends, for at most
/// [`LINGER`] and [`LINGER_BYTES`]: closing with unread bytes would reset the connection
/// and could destroy an answer the client has not read yet (nginx's lingering close).
async fn linger<S>(mut io: S)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    if io.shutdown().await.is_err() {
        return;
    }
    let mut buf = vec![0u8; 16 << 10];
    let mut left = LINGER_BYTES;
    let _ = tokio::time::timeout(LINGER, async {
        while left > 0 {
            match io.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn started(
        app: Router,
        header_timeout: Duration,
    ) -> (std::net::SocketAddr, CancellationToken) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let stop = CancellationToken::new();
        let overflow = Router::new().fallback(guard::busy);
        let limits = Limits {
            header_timeout,
            connections: MAX_CONNECTIONS,
            per_address: MAX_CONNECTIONS,
        };
        tokio::spawn(serve(l, app, overflow, limits, None, None, stop.clone()));
        (addr, stop)
    }

    async fn read_all(s: &mut tokio::net::TcpStream) -> String {
        let mut out = Vec::new();
        // Generous: the server closes long before; a hang fails the test, not a timing.
        let _ = tokio::time::timeout(Duration::from_secs(60), s.read_to_end(&mut out)).await;
        String::from_utf8_lossy(&out).into_owned()
    }

    async fn boom() -> &'static str {
        panic!("boom")
    }

    #[tokio::test]
    async fn a_panicking_handler_answers_500_and_the_server_goes_on() {
        let app = Router::new()
            .route("/boom", get(boom))
            .route("/ok", get(|| async { "fine" }))
            .layer(axum::middleware::from_fn(catch_panic));
        let (addr, stop) = started(app, Duration::from_secs(10)).await;
        for (path, want) in [("/boom", "500 Internal Server Error"), ("/ok", "200 OK")] {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            s.write_all(
                format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
            )
            .await
            .unwrap();
            let answer = read_all(&mut s).await;
            assert!(
                answer.starts_with(&format!("HTTP/1.1 {want}")),
                "{path}: {answer}"
            );
        }
        stop.cancel();
    }

    #[tokio::test]
    async fn half_sent_and_silent_connections_are_closed() {
        let app = Router::new().route("/ok", get(|| async { "fine" }));
        let (addr, stop) = started(app, Duration::from_millis(200)).await;
        // Half a request head, then nothing; and a connection that never speaks.
        let mut half = tokio::net::TcpStream::connect(addr).await.unwrap();
        half.write_all(b"GET /ok HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        let mut silent = tokio::net::TcpStream::connect(addr).await.unwrap();
        // An idle keep-alive connection after one answer.
        let mut idle = tokio::net::TcpStream::connect(addr).await.unwrap();
        idle.write_all(b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        for s in [&mut half, &mut silent] {
            let answer = read_all(s).await;
            assert!(!answer.starts_with("HTTP/1.1 200"), "{answer}");
        }
        let answer = read_all(&mut idle).await;
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
        assert!(answer.ends_with("fine"), "{answer}");
        stop.cancel();
    }
}
