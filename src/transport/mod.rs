//! HTTP/1.1 to the target: one connection per virtual user (`keep_alive`) or a fresh one per
//! request (`per_request`, as the 2007 Cosmo client did), connect and whole-request timeouts,
//! reconnection after errors, any method name, and the classification of every failure into
//! `connect`, `timeout`, `reset` or `body` (an unexpected status is the protocol's call).
//! `https://` targets run the same HTTP/1.1 over a TLS stream ([`tls`]); the time spent
//! opening the TCP connection and in the TLS handshake is reported apart from the request.
//!
//! A VU owns its [`Conn`] outright: no pool is shared between users, so the number of open
//! connections is exactly the number of users, as in the system being simulated. The VU's
//! task also drives the connection while it waits for an answer (no task per connection).
//!
//! Servers close idle keep-alive connections without a word (Apache after
//! `KeepAliveTimeout`, or after every response). Before a kept connection is reused, the
//! socket is checked for the peer's close; a request the server never took (hyper hands
//! it back unsent, or a replayable request on a reused connection met a close before any
//! answer) is sent once more on a new connection. That is counted as a retry and a
//! reconnect, not as a failure, and its latency starts at the retry.

pub mod clock;
pub mod tls;

use std::future::Future;
use std::net::{SocketAddr, ToSocketAddrs};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HOST, HeaderValue};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;

pub use tls::{TlsClient, TlsError, TlsOptions};

pub use hyper::{HeaderMap, Method, Request, StatusCode};

/// Why a request did not produce a usable answer. Ordered as reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ErrorClass {
    /// The TCP connection could not be opened (refused, unreachable, connect timeout).
    Connect,
    /// No complete answer within the request timeout.
    Timeout,
    /// The connection was closed or reset before a complete answer arrived.
    Reset,
    /// The status was not one the operation expects.
    Status,
    /// The answer was complete but malformed (bad HTTP, or a body that does not parse).
    Body,
}

impl ErrorClass {
    pub const ALL: [ErrorClass; 5] = [
        ErrorClass::Connect,
        ErrorClass::Timeout,
        ErrorClass::Reset,
        ErrorClass::Status,
        ErrorClass::Body,
    ];
    pub fn name(self) -> &'static str {
        match self {
            ErrorClass::Connect => "connect",
            ErrorClass::Timeout => "timeout",
            ErrorClass::Reset => "reset",
            ErrorClass::Status => "status",
            ErrorClass::Body => "body",
        }
    }
    pub fn index(self) -> usize {
        self as usize
    }
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("{class:?}: {message}", class = .class.name())]
pub struct TransportError {
    pub class: ErrorClass,
    pub message: String,
    /// Bytes already written when the failure happened.
    pub bytes_sent: u64,
}

/// The server side of the wire: where to connect and what to call it.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub addr: SocketAddr,
    /// Value of the `Host` header.
    pub host: HeaderValue,
    /// Path prefix from the target URL, prepended to every request path.
    pub base_path: String,
    /// How the target is shown in reports.
    pub display: String,
    /// `https://` targets: the TLS client every user of this target shares.
    pub tls: Option<TlsClient>,
    /// The target's clock against ours, from the `Date` of its answers.
    pub clock: std::sync::Arc<clock::ClockBounds>,
}

impl Endpoint {
    /// The full URL of `path` (a path on the server), for messages.
    pub fn url_of(&self, path: &str) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}{path}", self.host.to_str().unwrap_or("?"))
    }

    /// The path of `location` (a `Location` header: a path, or an absolute URL) when it
    /// is on this server; `None` for another server.
    pub fn same_origin_path(&self, location: &str) -> Option<String> {
        if location.starts_with('/') {
            return Some(location.to_string());
        }
        let prefix = self.url_of("");
        let rest = location.strip_prefix(&prefix)?;
        match rest.chars().next() {
            None => Some("/".into()),
            Some('/') => Some(rest.to_string()),
            _ => None,
        }
    }
}

/// Why a target URL cannot be used.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EndpointError {
    /// The host name does not resolve.
    #[error("{0}")]
    Resolve(String),
    /// The TLS options cannot work (bad PEM, a key that is not the certificate's).
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// Whether a connection is kept for the next request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reuse {
    /// One persistent connection, re-opened after errors.
    KeepAlive,
    /// A new TCP connection for every request.
    PerRequest,
}

/// Where a target lives, as its URL says it: host, port and base path.
#[derive(Debug, Clone, Copy)]
pub struct Address<'a> {
    pub host: &'a str,
    pub port: u16,
    pub base_path: &'a str,
    /// The URL as given, for messages.
    pub raw: &'a str,
    /// `https://`.
    pub https: bool,
}

impl Endpoint {
    /// Resolve a target URL once, up front (name lookups never run on the request path).
    pub fn resolve(url: Address<'_>, tls: &TlsOptions) -> Result<Endpoint, EndpointError> {
        let addr = (url.host, url.port)
            .to_socket_addrs()
            .map_err(|e| EndpointError::Resolve(format!("cannot resolve {}: {e}", url.host)))?
            .next()
            .ok_or_else(|| {
                EndpointError::Resolve(format!("{} resolves to no address", url.host))
            })?;
        let default_port = if url.https { 443 } else { 80 };
        let host = if url.port == default_port {
            url.host.to_string()
        } else if url.host.contains(':') {
            format!("[{}]:{}", url.host, url.port)
        } else {
            format!("{}:{}", url.host, url.port)
        };
        let tls = match url.https {
            true => Some(TlsClient::new(url.host, tls)?),
            false => None,
        };
        Ok(Endpoint {
            addr,
            host: HeaderValue::from_str(&host)
                .map_err(|_| EndpointError::Resolve(format!("'{host}' is not a valid host")))?,
            base_path: url.base_path.to_string(),
            display: url.raw.to_string(),
            tls,
            clock: Default::default(),
        })
    }

    pub fn local(addr: SocketAddr, display: &str) -> Endpoint {
        Endpoint {
            addr,
            host: HeaderValue::from_str(&addr.to_string())
                .unwrap_or(HeaderValue::from_static("localhost")),
            base_path: String::new(),
            display: display.to_string(),
            tls: None,
            clock: Default::default(),
        }
    }
}

/// The time it took to open the connection a request went out on, when it needed a new
/// one: TCP connect, and the TLS handshake for https.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handshake {
    pub connect: Duration,
    pub tls: Option<Duration>,
    /// The TLS handshake resumed an earlier session (abbreviated handshake).
    pub resumed: bool,
}

/// A connection's byte stream: plain TCP, or TLS over TCP.
enum Io {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Io::Plain(s) => s.is_write_vectored(),
            Io::Tls(s) => s.is_write_vectored(),
        }
    }
}

/// A completed exchange.
#[derive(Debug)]
pub struct Response {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// Request line, headers and body as written (approximate for headers hyper adds).
    pub bytes_sent: u64,
    /// Status line, headers and body as read.
    pub bytes_received: u64,
    /// From just before the request was written (or the connection opened, when it had to
    /// be) to the last byte of the body.
    pub elapsed: Duration,
    /// The part of `elapsed` spent opening a new connection, when it needed one.
    pub handshake: Option<Handshake>,
    /// Statuses of earlier exchanges folded into this one (an authentication challenge
    /// answered by sending the request again): their bytes and time are included above.
    pub earlier: Vec<u16>,
}

impl Response {
    /// Fold an earlier exchange of the same request into this one.
    pub fn after(mut self, first: Response) -> Response {
        self.earlier.extend(first.earlier);
        self.earlier.push(first.status.as_u16());
        self.bytes_sent += first.bytes_sent;
        self.bytes_received += first.bytes_received;
        self.elapsed += first.elapsed;
        self.handshake = match (first.handshake, self.handshake) {
            (Some(a), Some(b)) => Some(a.plus(b)),
            (a, b) => a.or(b),
        };
        self
    }
}

impl Handshake {
    /// Two connections' opening times together (an operation that opened two).
    pub fn plus(self, other: Handshake) -> Handshake {
        Handshake {
            connect: self.connect + other.connect,
            tls: match (self.tls, other.tls) {
                (Some(x), Some(y)) => Some(x + y),
                (x, y) => x.or(y),
            },
            resumed: self.resumed || other.resumed,
        }
    }
}

/// Timeouts of a connection.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub connect: Duration,
    pub request: Duration,
}

/// A completed exchange before it is a [`Response`]: status, headers, body, bytes read.
type Exchanged = (StatusCode, HeaderMap, Bytes, u64);

/// One virtual user's connection.
pub struct Conn {
    endpoint: Arc<Endpoint>,
    policy: Reuse,
    timeouts: Timeouts,
    link: Option<Link>,
    /// Connections opened so far (for the report: reconnects show up here).
    pub opened: u64,
    /// Requests sent a second time because the server never took the first.
    pub retried: u64,
    /// A new TLS connection may resume an earlier session of this target.
    resume_tls: bool,
    /// The connection opened for the request under way, if one was.
    opening: Option<Handshake>,
}

type H1Conn = hyper::client::conn::http1::Connection<TokioIo<Io>, Full<Bytes>>;

/// An open HTTP/1.1 connection: the request side and the connection itself, which the VU's
/// own task drives while it waits for an answer. No second task per connection means no
/// cross-task wake-up per request, which is most of what a spawned connection costs.
struct Link {
    sender: SendRequest<Full<Bytes>>,
    conn: Pin<Box<H1Conn>>,
    /// The connection future finished (closed, or failed): it must not be polled again.
    done: bool,
    /// The socket, to look for the peer's close without going through the reactor.
    #[cfg(unix)]
    fd: std::os::fd::RawFd,
    /// An exchange has completed on it, so a close now is the server dropping an idle
    /// connection rather than refusing this request.
    reused: bool,
    /// TLS: bytes waiting on an idle socket can be the server's session tickets, which
    /// only the TLS layer reads, so only a close counts.
    tls: bool,
}

impl Link {
    /// Let the connection notice what happened while it was idle (the server closing it).
    fn settle(&mut self) {
        if self.done {
            return;
        }
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        if self.conn.as_mut().poll(&mut cx).is_ready() {
            self.done = true;
        }
    }

    fn usable(&mut self) -> bool {
        self.settle();
        !self.done && !self.sender.is_closed() && !self.peer_closed()
    }

    /// True when the peer has closed (or reset) the socket, or sent something unasked
    /// while idle. A non-blocking peek asks the kernel directly: the reactor may not have
    /// seen a FIN that has already arrived.
    #[cfg(unix)]
    fn peer_closed(&self) -> bool {
        let mut byte = 0u8;
        // SAFETY: `fd` is the connection's socket, owned by `conn`, which is alive; the
        // buffer is one valid byte; MSG_PEEK leaves the data where it is.
        let n = unsafe {
            libc::recv(
                self.fd,
                (&mut byte as *mut u8).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            return !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
            );
        }
        // 0: the peer closed; > 0 on plain HTTP: bytes nobody asked for, so the stream is
        // out of step (on TLS they may be session tickets or a close_notify, which the
        // request then meets as a close and is sent again).
        n == 0 || !self.tls
    }

    #[cfg(not(unix))]
    fn peer_closed(&self) -> bool {
        false
    }
}

/// Poll `fut` to completion while also driving `conn`, in the calling task. `None` when
/// the connection ended while `fut` still waited on it: nothing more can arrive, and
/// waiting would only run into the timeout.
async fn drive<F: Future>(
    conn: &mut Pin<Box<H1Conn>>,
    done: &mut bool,
    fut: F,
) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(|cx| {
        if !*done && conn.as_mut().poll(cx).is_ready() {
            *done = true;
        }
        match fut.as_mut().poll(cx) {
            std::task::Poll::Ready(v) => std::task::Poll::Ready(Some(v)),
            std::task::Poll::Pending if *done => std::task::Poll::Ready(None),
            std::task::Poll::Pending => std::task::Poll::Pending,
        }
    })
    .await
}

/// Why an exchange failed, and what may be sent again on a new connection: the request
/// itself when hyper gave it back unsent; and whether a reused connection closed before
/// any answer, when a replayable request may be built anew and sent once more.
struct Failure {
    error: TransportError,
    unsent: Option<Request<Full<Bytes>>>,
    closed_early: bool,
}

impl Failure {
    fn of(error: TransportError) -> Failure {
        Failure {
            error,
            unsent: None,
            closed_early: false,
        }
    }
}

/// Methods whose repetition cannot change the server's state beyond a first success
/// (RFC 9110 §9.2.2, and the WebDAV reads).
fn replayable(m: &Method) -> bool {
    matches!(
        m.as_str(),
        "GET" | "HEAD" | "OPTIONS" | "TRACE" | "PUT" | "DELETE" | "PROPFIND" | "REPORT"
    )
}

impl Conn {
    pub fn new(endpoint: Arc<Endpoint>, policy: Reuse, timeouts: Timeouts) -> Conn {
        Conn {
            endpoint,
            policy,
            timeouts,
            link: None,
            opened: 0,
            retried: 0,
            resume_tls: true,
            opening: None,
        }
    }

    /// Every new TLS connection makes a full handshake (no session resumption).
    pub fn without_tls_resumption(mut self) -> Conn {
        self.resume_tls = false;
        self
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Send one request and read the whole answer, within the request timeout. After any
    /// error the connection is dropped, so the next request starts on a fresh one. A
    /// request hyper hands back unsent is sent once more on a new connection.
    pub async fn send(&mut self, req: Request<Full<Bytes>>) -> Result<Response, TransportError> {
        self.send_with(req, None::<fn() -> Option<Request<Full<Bytes>>>>)
            .await
    }

    /// As [`Conn::send`]; and when the request is replayable (GET, PUT, DELETE, PROPFIND,
    /// ...) and a reused connection closed before any answer (the server dropped it as the
    /// request went out), `again` builds it anew to be sent once more. Building is left
    /// to the caller so that no request is copied in case it fails.
    pub async fn send_with<F>(
        &mut self,
        mut req: Request<Full<Bytes>>,
        again: Option<F>,
    ) -> Result<Response, TransportError>
    where
        F: FnOnce() -> Option<Request<Full<Bytes>>>,
    {
        let replayable = replayable(req.method());
        self.prepare(&mut req);
        let sent = request_size(&req);
        self.opening = None;
        let mut start = Instant::now();
        let mut result = self.timed(req, sent, start).await;
        if let Err(f) = &mut result {
            let retry = f.unsent.take().or_else(|| {
                (f.closed_early && replayable)
                    .then_some(again)
                    .flatten()
                    .and_then(|a| a())
                    .map(|mut r| {
                        self.prepare(&mut r);
                        r
                    })
            });
            if let Some(again) = retry {
                // The server never took it: once more on a new connection, timed afresh.
                self.link = None;
                self.retried += 1;
                self.opening = None;
                start = Instant::now();
                result = self.timed(again, sent, start).await;
            }
        }
        let result = result.map_err(|f| f.error);
        if result.is_err() || self.policy == Reuse::PerRequest {
            self.link = None;
        }
        if let Ok((_, headers, _, _)) = &result
            && self.endpoint.clock.wants()
        {
            self.endpoint
                .clock
                .observe(headers.get(hyper::header::DATE), start.elapsed());
        }
        result.map(|(status, headers, body, received)| Response {
            status,
            headers,
            body,
            bytes_sent: sent,
            bytes_received: received,
            elapsed: start.elapsed(),
            handshake: self.opening,
            earlier: Vec::new(),
        })
    }

    /// The headers this connection adds to every request: Host, and `Connection: close`
    /// when each request has its own connection.
    fn prepare(&self, req: &mut Request<Full<Bytes>>) {
        let headers = req.headers_mut();
        headers.insert(HOST, self.endpoint.host.clone());
        if self.policy == Reuse::PerRequest {
            headers.insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
        }
    }

    /// One attempt within the request timeout.
    async fn timed(
        &mut self,
        req: Request<Full<Bytes>>,
        sent: u64,
        start: Instant,
    ) -> Result<Exchanged, Failure> {
        let deadline = start + self.timeouts.request;
        match tokio::time::timeout_at(deadline, self.exchange(req, sent)).await {
            Ok(r) => r,
            Err(_) => Err(Failure::of(TransportError {
                class: ErrorClass::Timeout,
                message: format!("no complete answer within {:?}", self.timeouts.request),
                bytes_sent: sent,
            })),
        }
    }

    async fn exchange(
        &mut self,
        req: Request<Full<Bytes>>,
        sent: u64,
    ) -> Result<Exchanged, Failure> {
        let fail = Failure::of;
        // A kept-alive connection the server has since closed is not an error of this
        // request: open a new one, as any HTTP client would.
        if !self.link.as_mut().is_some_and(Link::usable) {
            self.link = Some(self.connect(sent).await.map_err(fail)?);
        }
        let Some(link) = self.link.as_mut() else {
            return Err(fail(TransportError {
                class: ErrorClass::Connect,
                message: "no connection".into(),
                bytes_sent: 0,
            }));
        };
        // A close before any answer on a reused connection is the server dropping it as the
        // request went out; on a fresh one it is the server refusing the request.
        let reused = link.reused;
        let Link {
            sender, conn, done, ..
        } = link;
        let outcome = drive(conn, done, async {
            if sender.ready().await.is_err() {
                return Err(Failure {
                    error: TransportError {
                        class: ErrorClass::Reset,
                        message: "the connection closed before the request was sent".into(),
                        bytes_sent: 0,
                    },
                    unsent: Some(req),
                    closed_early: false,
                });
            }
            let resp = match sender.try_send_request(req).await {
                Ok(r) => r,
                Err(mut e) => {
                    let unsent = e.take_message();
                    let error = classify_hyper(e.error(), if unsent.is_some() { 0 } else { sent });
                    return Err(Failure {
                        closed_early: reused && error.class == ErrorClass::Reset,
                        error,
                        unsent,
                    });
                }
            };
            let (parts, body) = resp.into_parts();
            let body = body
                .collect()
                .await
                .map_err(|e| fail(classify_hyper(&e, sent)))?
                .to_bytes();
            let received = response_size(parts.status, &parts.headers, body.len());
            Ok((parts.status, parts.headers, body, received))
        })
        .await;
        match outcome {
            Some(Ok(x)) => {
                link.reused = true;
                Ok(x)
            }
            Some(Err(f)) => Err(f),
            // The connection ended under the request: nothing more will come. On a reused
            // connection that is the server dropping it as the request went out.
            None => Err(Failure {
                error: TransportError {
                    class: ErrorClass::Reset,
                    message: "the connection closed before the answer was complete".into(),
                    bytes_sent: sent,
                },
                unsent: None,
                closed_early: reused,
            }),
        }
    }

    async fn connect(&mut self, sent: u64) -> Result<Link, TransportError> {
        let began = Instant::now();
        let (io, handshake) = open(&self.endpoint, self.timeouts.connect, self.resume_tls)
            .await
            .map_err(|e| TransportError {
                class: ErrorClass::Connect,
                message: e.message(&self.endpoint),
                bytes_sent: 0,
            })?;
        let tls = matches!(io, Io::Tls(_));
        #[cfg(unix)]
        let fd = match &io {
            Io::Plain(s) => std::os::fd::AsRawFd::as_raw_fd(s),
            Io::Tls(s) => std::os::fd::AsRawFd::as_raw_fd(s.get_ref().0),
        };
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
            .await
            .map_err(|e| classify_hyper(&e, sent))?;
        self.opened += 1;
        debug_assert!(began.elapsed() >= handshake.connect);
        self.opening = Some(handshake);
        Ok(Link {
            sender,
            conn: Box::pin(conn),
            done: false,
            #[cfg(unix)]
            fd,
            reused: false,
            tls,
        })
    }
}

/// Why a connection could not be opened.
#[derive(Debug)]
enum OpenError {
    Tcp(std::io::Error),
    TcpTimeout(Duration),
    Tls(std::io::Error),
    TlsTimeout(Duration),
}

impl OpenError {
    fn message(&self, endpoint: &Endpoint) -> String {
        let addr = endpoint.addr;
        match self {
            OpenError::Tcp(_) | OpenError::TcpTimeout(_) => {
                format!("connect to {addr}: {}", self.reason())
            }
            OpenError::Tls(_) | OpenError::TlsTimeout(_) => {
                format!("TLS with {}: {}", endpoint.display, self.reason())
            }
        }
    }

    fn reason(&self) -> String {
        match self {
            OpenError::Tcp(e) => e.to_string(),
            OpenError::TcpTimeout(t) => format!("no answer within {t:?}"),
            OpenError::Tls(e) => tls::explain(e),
            OpenError::TlsTimeout(t) => format!("no completed handshake within {t:?}"),
        }
    }
}

/// Open a TCP connection, and run the TLS handshake on it for https; each within
/// `timeout`, each timed.
async fn open(
    endpoint: &Endpoint,
    timeout: Duration,
    resume: bool,
) -> Result<(Io, Handshake), OpenError> {
    let t0 = Instant::now();
    let tcp = match tokio::time::timeout(timeout, TcpStream::connect(endpoint.addr)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(OpenError::Tcp(e)),
        Err(_) => return Err(OpenError::TcpTimeout(timeout)),
    };
    let connect = t0.elapsed();
    // Small requests must not wait for Nagle.
    let _ = tcp.set_nodelay(true);
    let Some(tls) = &endpoint.tls else {
        return Ok((
            Io::Plain(tcp),
            Handshake {
                connect,
                tls: None,
                resumed: false,
            },
        ));
    };
    let t1 = Instant::now();
    match tokio::time::timeout(timeout, tls.handshake(tcp, resume)).await {
        Ok(Ok(s)) => {
            let tls = Some(t1.elapsed());
            let resumed = s.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
            Ok((
                Io::Tls(Box::new(s)),
                Handshake {
                    connect,
                    tls,
                    resumed,
                },
            ))
        }
        Ok(Err(e)) => Err(OpenError::Tls(e)),
        Err(_) => Err(OpenError::TlsTimeout(timeout)),
    }
}

/// Why a preflight probe failed: nothing listens, or the TLS handshake failed (a
/// certificate problem, said plainly).
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProbeError {
    #[error("{0}")]
    Connect(String),
    #[error("{0}")]
    Tls(String),
}

/// Probe that something accepts connections at the endpoint, and for https that the TLS
/// handshake succeeds (preflight).
pub async fn probe(endpoint: &Endpoint, timeout: Duration) -> Result<(), ProbeError> {
    match open(endpoint, timeout, true).await {
        Ok(_) => Ok(()),
        Err(e @ (OpenError::Tls(_) | OpenError::TlsTimeout(_))) => Err(ProbeError::Tls(e.reason())),
        Err(e) => Err(ProbeError::Connect(e.message(endpoint))),
    }
}

fn classify_hyper(e: &hyper::Error, sent: u64) -> TransportError {
    let class = if e.is_timeout() {
        ErrorClass::Timeout
    } else if e.is_parse() || e.is_parse_status() {
        ErrorClass::Body
    } else if e.is_incomplete_message() || e.is_closed() || e.is_canceled() {
        ErrorClass::Reset
    } else {
        // Remaining hyper errors are I/O on the connection: resets, broken pipes.
        ErrorClass::Reset
    };
    let mut message = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        message.push_str(": ");
        // A TLS alert (the server refused a client certificate, say) in plain words.
        match s.downcast_ref::<std::io::Error>() {
            Some(io) if io.get_ref().is_some_and(|i| i.is::<rustls::Error>()) => {
                message.push_str(&tls::explain(io));
                break;
            }
            _ => message.push_str(&s.to_string()),
        }
        source = s.source();
    }
    TransportError {
        class,
        message,
        bytes_sent: sent,
    }
}

fn request_size(req: &Request<Full<Bytes>>) -> u64 {
    use hyper::body::Body;
    // Path and query as sent (no allocation: this runs for every request).
    let target = req.uri().path_and_query().map_or(1, |p| p.as_str().len());
    let line = req.method().as_str().len() + 1 + target + 11;
    let headers: usize = req
        .headers()
        .iter()
        .map(|(n, v)| n.as_str().len() + v.len() + 4)
        .sum();
    let body = req.body().size_hint().exact().unwrap_or(0) as usize;
    // Content-Length, which hyper adds for a non-empty body.
    let cl = if body > 0 {
        18 + body.to_string().len()
    } else {
        0
    };
    (line + headers + cl + 2 + body) as u64
}

fn response_size(status: StatusCode, headers: &HeaderMap, body: usize) -> u64 {
    let line = 13 + status.canonical_reason().map_or(0, str::len) + 2;
    let h: usize = headers
        .iter()
        .map(|(n, v)| n.as_str().len() + v.len() + 4)
        .sum();
    (line + h + 2 + body) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_are_followed_only_on_the_same_server() {
        let e = Endpoint::resolve(
            Address {
                host: "127.0.0.1",
                port: 5232,
                base_path: "/dav",
                raw: "http://127.0.0.1:5232/dav",
                https: false,
            },
            &TlsOptions::default(),
        )
        .unwrap();
        assert_eq!(e.url_of("/x"), "http://127.0.0.1:5232/x");
        assert_eq!(e.same_origin_path("/caldav/").as_deref(), Some("/caldav/"));
        assert_eq!(
            e.same_origin_path("http://127.0.0.1:5232/p/").as_deref(),
            Some("/p/")
        );
        assert_eq!(
            e.same_origin_path("http://127.0.0.1:5232").as_deref(),
            Some("/")
        );
        assert_eq!(e.same_origin_path("http://127.0.0.1:52320/p/"), None);
        assert_eq!(e.same_origin_path("https://127.0.0.1:5232/p/"), None);
        assert_eq!(e.same_origin_path("http://evil.example/p/"), None);
    }
}
