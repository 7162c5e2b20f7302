//! The byte stream under every protocol: a TCP connection, or TLS over one, opened within
//! the connect timeout and timed (TCP connect and TLS handshake apart, resumption seen),
//! with the error classes every protocol reports (`connect`, `timeout`, `reset`), the
//! bytes written counted, a check for a peer that closed (or spoke unasked) while the
//! stream was idle, and a deadline timer that costs nothing while it is not due.
//!
//! HTTP/1.1 framing ([`super::h1`]) and the user's HTTP connection ([`super::conn`]) sit
//! on top; a frame protocol owns a [`Stream`] the same way, with the same timing and the
//! same classes, without going through HTTP.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::{Endpoint, ErrorClass, TransportError, tls};

/// The time it took to open the connection a request went out on, when it needed a new
/// one: TCP connect, and the TLS handshake for https.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handshake {
    pub connect: Duration,
    pub tls: Option<Duration>,
    /// The TLS handshake resumed an earlier session (abbreviated handshake).
    pub resumed: bool,
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

/// An open stream to the target, and the socket under it.
pub(crate) struct Stream {
    io: Io,
    /// The socket, to look for the peer's close without going through the reactor.
    #[cfg(unix)]
    fd: std::os::fd::RawFd,
}

impl Stream {
    /// Open a stream to the endpoint (TCP, then TLS for a TLS endpoint), each step within
    /// `timeout`: what it cost, or a `connect` failure in words.
    pub(crate) async fn connect(
        endpoint: &Endpoint,
        timeout: Duration,
        resume_tls: bool,
    ) -> Result<(Stream, Handshake), TransportError> {
        Stream::connect_at(endpoint, endpoint.addr, timeout, resume_tls).await
    }

    /// [`Stream::connect`] to another port of the same target (its broker's), with the
    /// target's TLS settings.
    pub(crate) async fn connect_at(
        endpoint: &Endpoint,
        addr: std::net::SocketAddr,
        timeout: Duration,
        resume_tls: bool,
    ) -> Result<(Stream, Handshake), TransportError> {
        let (io, handshake) = open(endpoint, addr, timeout, resume_tls)
            .await
            .map_err(|e| TransportError {
                class: ErrorClass::Connect,
                message: e.message(endpoint),
                bytes_sent: 0,
            })?;
        #[cfg(unix)]
        let fd = match &io {
            Io::Plain(s) => std::os::fd::AsRawFd::as_raw_fd(s),
            Io::Tls(s) => std::os::fd::AsRawFd::as_raw_fd(s.get_ref().0),
        };
        Ok((
            Stream {
                io,
                #[cfg(unix)]
                fd,
            },
            handshake,
        ))
    }

    /// What is waiting on an idle connection before a request is written. A non-blocking
    /// peek asks the kernel directly: the reactor may not have seen a FIN that has already
    /// arrived.
    #[cfg(unix)]
    pub(crate) fn waiting(&self) -> Waiting {
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
            return match e.kind() {
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted => {
                    Waiting::Nothing
                }
                _ => Waiting::Closed,
            };
        }
        match (n, &self.io) {
            (0, _) => Waiting::Closed,
            // On plain TCP, bytes nobody asked for: the stream is out of step.
            (_, Io::Plain(_)) => Waiting::Unasked,
            // On TLS they may be session tickets or a close_notify: not the server's
            // fault, but the connection is not known to be clean either.
            (_, Io::Tls(_)) => Waiting::Closed,
        }
    }

    #[cfg(not(unix))]
    pub fn waiting(&self) -> Waiting {
        Waiting::Nothing
    }

    /// Write all of `parts` in order; on failure, how many bytes went out before it.
    pub(crate) async fn write(&mut self, parts: &[&[u8]]) -> Result<(), (u64, std::io::Error)> {
        let io = &mut self.io;
        let mut written = 0u64;
        for part in parts {
            let mut rest = *part;
            while !rest.is_empty() {
                match io.write(rest).await {
                    Ok(0) => return Err((written, std::io::ErrorKind::WriteZero.into())),
                    Ok(n) => {
                        written += n as u64;
                        rest = &rest[n..];
                    }
                    Err(e) => return Err((written, e)),
                }
            }
        }
        // TLS buffers records until flushed; plain TCP has nothing to flush.
        io.flush().await.map_err(|e| (written, e))
    }
}

/// How a watched write ended.
pub(crate) struct Written {
    /// Bytes of the request that went out.
    pub bytes: u64,
    /// The server answered before all of it was written; the rest was not sent.
    pub early: bool,
}

impl Stream {
    /// Write all of `parts` in order, reading meanwhile what the server sends into `buf`:
    /// a server may answer before the body is all sent (413, 401, 417) and stop reading
    /// it (RFC 9112 §9.6), and a writer that does not read would wait for the timeout or
    /// meet a reset instead of the answer. Stops writing once a final answer's head is in
    /// `buf`, or when the write fails after some of an answer arrived.
    pub(crate) async fn write_watching(
        &mut self,
        parts: &[&[u8]],
        buf: &mut bytes::BytesMut,
    ) -> Result<Written, (u64, std::io::Error)> {
        let io = &mut self.io;
        let (mut part, mut at, mut written) = (0usize, 0usize, 0u64);
        let mut read_done = false;
        let mut chunk = [0u8; 4096];
        let early = |written| {
            Poll::Ready(Ok(Written {
                bytes: written,
                early: true,
            }))
        };
        std::future::poll_fn(|cx| {
            loop {
                if !read_done {
                    let mut rb = ReadBuf::new(&mut chunk);
                    match Pin::new(&mut *io).poll_read(cx, &mut rb) {
                        Poll::Ready(Ok(())) if rb.filled().is_empty() => read_done = true,
                        Poll::Ready(Ok(())) => {
                            buf.extend_from_slice(rb.filled());
                            if super::h1::final_head_in(buf) || buf.len() > super::h1::MAX_HEAD {
                                return early(written);
                            }
                            continue;
                        }
                        // The write side meets the failure too, and says it.
                        Poll::Ready(Err(_)) => read_done = true,
                        Poll::Pending => {}
                    }
                }
                while part < parts.len() && at == parts[part].len() {
                    part += 1;
                    at = 0;
                }
                let Some(rest) = parts.get(part).map(|p| &p[at..]) else {
                    return match Pin::new(&mut *io).poll_flush(cx) {
                        Poll::Ready(Ok(())) => Poll::Ready(Ok(Written {
                            bytes: written,
                            early: false,
                        })),
                        Poll::Ready(Err(e)) if buf.is_empty() => Poll::Ready(Err((written, e))),
                        Poll::Ready(Err(_)) => early(written),
                        Poll::Pending => Poll::Pending,
                    };
                };
                match Pin::new(&mut *io).poll_write(cx, rest) {
                    Poll::Ready(Ok(0)) => {
                        return Poll::Ready(Err((written, std::io::ErrorKind::WriteZero.into())));
                    }
                    Poll::Ready(Ok(n)) => {
                        written += n as u64;
                        at += n;
                    }
                    // Some of an answer came before the failure: it is read next.
                    Poll::Ready(Err(_)) if !buf.is_empty() => return early(written),
                    Poll::Ready(Err(e)) => return Poll::Ready(Err((written, e))),
                    Poll::Pending => return Poll::Pending,
                }
            }
        })
        .await
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

/// What an idle connection holds when it is about to be reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waiting {
    /// Nothing: it is clean.
    Nothing,
    /// The peer closed or reset it (or, on TLS, sent records between answers).
    Closed,
    /// Bytes the server sent that no request asked for.
    Unasked,
}

/// A deadline for one exchange at a time, whose one timer is kept from one exchange to
/// the next. It is not set per exchange: it stays set for an earlier exchange's
/// deadline, and when it fires before the current deadline it is moved there. An
/// exchange that completes in time (nearly all) costs no timer registration.
#[derive(Default)]
pub(crate) struct Deadline {
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Deadline {
    /// `work`'s output, or `None` when `deadline` passed first. `work` is pinned by the
    /// caller, so that it is stored once in the caller's future rather than moved in here.
    pub(crate) async fn within<F: Future>(
        &mut self,
        deadline: Instant,
        mut work: Pin<&mut F>,
    ) -> Option<F::Output> {
        let mut timer = match self.timer.take() {
            Some(t) if t.deadline() <= deadline => t,
            _ => Box::pin(tokio::time::sleep_until(deadline)),
        };
        let done = std::future::poll_fn(|cx| {
            if let Poll::Ready(r) = work.as_mut().poll(cx) {
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
        .await;
        self.timer = Some(timer);
        done
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
    addr: std::net::SocketAddr,
    timeout: Duration,
    resume: bool,
) -> Result<(Io, Handshake), OpenError> {
    let t0 = Instant::now();
    let tcp = match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
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
pub(crate) enum ProbeError {
    #[error("{0}")]
    Connect(String),
    #[error("{0}")]
    Tls(String),
}

/// Probe that something accepts connections at the endpoint, and for https that the TLS
/// handshake succeeds (preflight).
pub(crate) async fn probe(endpoint: &Endpoint, timeout: Duration) -> Result<(), ProbeError> {
    match open(endpoint, endpoint.addr, timeout, true).await {
        Ok(_) => Ok(()),
        Err(e @ (OpenError::Tls(_) | OpenError::TlsTimeout(_))) => Err(ProbeError::Tls(e.reason())),
        Err(e) => Err(ProbeError::Connect(e.message(endpoint))),
    }
}
