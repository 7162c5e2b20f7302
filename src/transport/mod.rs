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
//! socket is checked for the peer's close; a request the server never took (nothing of it
//! could be written, or a replayable request on a reused connection met a close before
//! any answer) is sent once more on a new connection. That is counted as a retry and a
//! reconnect, not as a failure, and its latency starts at the retry.
//!
//! The wire format itself (encoding, framing, bounds) is [`h1`]'s.

pub mod clock;
mod h1;
pub mod tls;

use std::net::{SocketAddr, ToSocketAddrs};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use hyper::header::HeaderValue;
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

/// One virtual user's connection.
pub struct Conn {
    endpoint: Arc<Endpoint>,
    policy: Reuse,
    timeouts: Timeouts,
    link: Option<Link>,
    /// The request under way, as written: kept so that a request the server never took
    /// can be sent again byte for byte, without building it anew.
    wire: Vec<u8>,
    /// Connections opened so far (for the report: reconnects show up here).
    pub opened: u64,
    /// Requests sent a second time because the server never took the first.
    pub retried: u64,
    /// A new TLS connection may resume an earlier session of this target.
    resume_tls: bool,
    /// The connection opened for the request under way, if one was.
    opening: Option<Handshake>,
    /// The request timeout's timer, kept from one request to the next (see [`Conn::timed`]).
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

/// An open connection, which the VU's own task writes and reads: no task per connection,
/// no channel between the user and its socket.
struct Link {
    io: Io,
    /// Bytes read and not yet used; its allocation is kept from one answer to the next.
    buf: BytesMut,
    /// The socket, to look for the peer's close without going through the reactor.
    #[cfg(unix)]
    fd: std::os::fd::RawFd,
    /// An exchange has completed on it, so a close now is the server dropping an idle
    /// connection rather than refusing this request.
    reused: bool,
    /// When its last answer was complete (or when it was opened).
    idle_since: Instant,
}

/// A connection idle for less than this is not peeked at before it is reused: a server
/// that closes idle connections does so after seconds, not microseconds, and a close in
/// that window is met as a close before any answer, which a replayable request survives.
/// At full speed this saves a system call per request.
const PEEK_AFTER_IDLE: Duration = Duration::from_millis(1);

impl Link {
    fn usable(&self) -> bool {
        self.idle_since.elapsed() < PEEK_AFTER_IDLE || !self.peer_closed()
    }

    /// True when the peer has closed (or reset) the socket, or sent something unasked
    /// while idle. A non-blocking peek asks the kernel directly: the reactor may not have
    /// seen a FIN that has already arrived.
    #[cfg(unix)]
    fn peer_closed(&self) -> bool {
        let mut byte = 0u8;
        // SAFETY: `fd` is the connection's socket, owned by `io`, which is alive; the
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
        n == 0 || matches!(self.io, Io::Plain(_))
    }

    #[cfg(not(unix))]
    fn peer_closed(&self) -> bool {
        false
    }
}

/// Why an exchange failed, and whether it may be sent again on a new connection: the
/// server cannot have taken it (nothing was written), or a reused connection closed before
/// any answer (the server dropped it as the request went out; only replayable requests).
struct Failure {
    error: TransportError,
    unsent: bool,
    closed_early: bool,
}

impl Failure {
    fn of(error: TransportError) -> Failure {
        Failure {
            error,
            unsent: false,
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
            wire: Vec::new(),
            opened: 0,
            retried: 0,
            resume_tls: true,
            opening: None,
            timer: None,
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
    /// request the server cannot have taken (nothing of it was written, or, for a
    /// replayable method, a reused connection closed before any answer) is sent once
    /// more on a new connection, counted as a retry.
    pub fn send(
        &mut self,
        req: Request<Bytes>,
    ) -> impl Future<Output = Result<Response, TransportError>> + '_ {
        h1::encode(
            &req,
            &self.endpoint.host,
            self.policy == Reuse::PerRequest,
            &mut self.wire,
        );
        // Only the method and a large body outlive the encoding: the request itself is not
        // part of the future, which is part of every user's state.
        let body = h1::body_apart(&req).then(|| req.body().clone());
        self.send_encoded(req.into_parts().0.method, body)
    }

    /// [`Conn::send`] once the request is in `self.wire` (and `body`, when large).
    async fn send_encoded(
        &mut self,
        method: Method,
        body: Option<Bytes>,
    ) -> Result<Response, TransportError> {
        let replayable = replayable(&method);
        let sent = self.wire.len() as u64 + body.as_ref().map_or(0, |b| b.len() as u64);
        self.opening = None;
        let mut retry = false;
        let (result, start) = loop {
            let start = Instant::now();
            let result = self.timed(&method, body.as_deref(), sent, start).await;
            match &result {
                Err(f) if !retry && (f.unsent || (f.closed_early && replayable)) => {
                    // The server never took it: once more on a new connection, timed afresh.
                    self.link = None;
                    self.retried += 1;
                    self.opening = None;
                    retry = true;
                }
                _ => break (result, start),
            }
        };
        let answer = match result {
            Ok(a) => a,
            Err(f) => {
                self.link = None;
                return Err(f.error);
            }
        };
        let ended = Instant::now();
        match self.link.as_mut() {
            Some(link) if answer.keep && self.policy == Reuse::KeepAlive => {
                link.idle_since = ended;
            }
            _ => self.link = None,
        }
        let elapsed = ended.saturating_duration_since(start);
        if self.endpoint.clock.wants() {
            self.endpoint
                .clock
                .observe(answer.headers.get(hyper::header::DATE), elapsed);
        }
        Ok(Response {
            status: answer.status,
            headers: answer.headers,
            body: answer.body,
            bytes_sent: sent,
            bytes_received: answer.received,
            elapsed,
            handshake: self.opening,
            earlier: Vec::new(),
        })
    }

    /// One attempt within the request timeout.
    ///
    /// The connection's one timer is not set per request: it stays set for an earlier
    /// request's deadline, and when it fires before this request's deadline it is moved
    /// there. A request that is answered in time (nearly all) costs no timer registration.
    async fn timed(
        &mut self,
        method: &Method,
        body: Option<&[u8]>,
        sent: u64,
        start: Instant,
    ) -> Result<h1::Answer, Failure> {
        let deadline = start + self.timeouts.request;
        let mut timer = match self.timer.take() {
            Some(t) if t.deadline() <= deadline => t,
            _ => Box::pin(tokio::time::sleep_until(deadline)),
        };
        let answered = {
            let mut exchange = std::pin::pin!(self.exchange(method, body, sent));
            std::future::poll_fn(|cx| {
                if let Poll::Ready(r) = exchange.as_mut().poll(cx) {
                    return Poll::Ready(Some(r));
                }
                while timer.as_mut().poll(cx).is_ready() {
                    if Instant::now() >= deadline {
                        return Poll::Ready(None);
                    }
                    timer.as_mut().reset(deadline);
                }
                Poll::Pending
            })
            .await
        };
        self.timer = Some(timer);
        answered.unwrap_or_else(|| {
            Err(Failure::of(TransportError {
                class: ErrorClass::Timeout,
                message: format!("no complete answer within {:?}", self.timeouts.request),
                bytes_sent: sent,
            }))
        })
    }

    async fn exchange(
        &mut self,
        method: &Method,
        body: Option<&[u8]>,
        sent: u64,
    ) -> Result<h1::Answer, Failure> {
        // A kept-alive connection the server has since closed is not an error of this
        // request: open a new one, as any HTTP client would.
        let link = match self.link.take().filter(Link::usable) {
            Some(link) => link,
            // Boxed: opening a connection (TLS handshake included) is a large future, and
            // inline it would be part of every idle user's state.
            None => Box::pin(self.connect()).await.map_err(Failure::of)?,
        };
        let link = self.link.insert(link);
        // A close before any answer on a reused connection is the server dropping it as the
        // request went out; on a fresh one it is the server refusing the request.
        let reused = link.reused;
        let parts: &[&[u8]] = match body {
            Some(b) => &[&self.wire, b],
            None => &[&self.wire],
        };
        if let Err((written, e)) = h1::write(&mut link.io, parts).await {
            return Err(Failure {
                error: TransportError {
                    class: ErrorClass::Reset,
                    message: format!("sending the request: {}", tls::explain(&e)),
                    bytes_sent: written,
                },
                unsent: written == 0,
                closed_early: reused,
            });
        }
        match h1::read_answer(&mut link.io, &mut link.buf, method).await {
            Ok(a) => {
                link.reused = true;
                Ok(a)
            }
            Err(h1::ReadError::Malformed(m)) => Err(Failure::of(TransportError {
                class: ErrorClass::Body,
                message: m,
                bytes_sent: sent,
            })),
            Err(h1::ReadError::Closed { any, cause }) => Err(Failure {
                error: TransportError {
                    class: ErrorClass::Reset,
                    message: match (any, cause) {
                        (_, Some(e)) => format!(
                            "the connection failed before the answer was complete: {}",
                            tls::explain(&e)
                        ),
                        (false, None) => "the connection closed before any answer".into(),
                        (true, None) => {
                            "the connection closed before the answer was complete".into()
                        }
                    },
                    bytes_sent: sent,
                },
                unsent: false,
                closed_early: reused && !any,
            }),
        }
    }

    async fn connect(&mut self) -> Result<Link, TransportError> {
        let (io, handshake) = open(&self.endpoint, self.timeouts.connect, self.resume_tls)
            .await
            .map_err(|e| TransportError {
                class: ErrorClass::Connect,
                message: e.message(&self.endpoint),
                bytes_sent: 0,
            })?;
        #[cfg(unix)]
        let fd = match &io {
            Io::Plain(s) => std::os::fd::AsRawFd::as_raw_fd(s),
            Io::Tls(s) => std::os::fd::AsRawFd::as_raw_fd(s.get_ref().0),
        };
        self.opened += 1;
        self.opening = Some(handshake);
        Ok(Link {
            io,
            buf: BytesMut::new(),
            #[cfg(unix)]
            fd,
            reused: false,
            idle_since: Instant::now(),
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

    /// A server that answers its first request at once and then never again.
    async fn answers_once() -> SocketAddr {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf).await;
            let _ = s
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .await;
            // Read the second request, and never answer it.
            let _ = s.read(&mut buf).await;
            std::future::pending::<()>().await;
        });
        addr
    }

    #[tokio::test]
    async fn a_request_gets_its_whole_timeout_even_though_the_timer_is_an_earlier_ones() {
        let addr = answers_once().await;
        let timeout = Duration::from_millis(300);
        let mut conn = Conn::new(
            Arc::new(Endpoint::local(addr, "t")),
            Reuse::KeepAlive,
            Timeouts {
                connect: timeout,
                request: timeout,
            },
        );
        let get = || Request::get("/").body(Bytes::new()).unwrap();
        assert_eq!(conn.send(get()).await.unwrap().status, 200);
        // The timer is still set for the first request's deadline, 200 ms before the
        // second request's.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let start = Instant::now();
        let e = conn.send(get()).await.unwrap_err();
        assert_eq!(e.class, ErrorClass::Timeout, "{e}");
        assert!(start.elapsed() >= timeout, "{:?}", start.elapsed());
        let written = format!("GET / HTTP/1.1\r\nhost: {addr}\r\n\r\n");
        assert_eq!(e.bytes_sent, written.len() as u64, "as written");
    }

    #[test]
    fn a_request_in_flight_is_a_small_part_of_a_users_state() {
        // The future of `send` is inline in every user's task, idle or not: 100,000 idle
        // users pay for each byte of it 100,000 times. Opening a connection (TLS included)
        // is boxed for this reason, and the request is not kept across the await.
        let mut conn = Conn::new(
            Arc::new(Endpoint::local("127.0.0.1:1".parse().unwrap(), "t")),
            Reuse::KeepAlive,
            Timeouts {
                connect: Duration::from_secs(1),
                request: Duration::from_secs(1),
            },
        );
        let f = conn.send(Request::get("/").body(Bytes::new()).unwrap());
        assert!(
            std::mem::size_of_val(&f) <= 1024,
            "{}",
            std::mem::size_of_val(&f)
        );
    }
}
