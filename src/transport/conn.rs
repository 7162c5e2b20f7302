//! One virtual user's HTTP/1.1 connection to the target: kept alive (`keep_alive`) or
//! fresh per request (`per_request`, as the 2007 Cosmo client did), the whole-request
//! timeout, reconnection after errors, and the retry of a request the server never took.
//! The stream under it (connect, TLS, timing, error classes) is [`super::stream`]'s; the
//! wire format (encoding, framing, bounds) is [`super::h1`]'s.
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

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use hyper::{HeaderMap, Method, Request, StatusCode};
use tokio::time::Instant;

use super::stream::{Deadline, Handshake, Stream, Waiting, Written};
use super::{Endpoint, ErrorClass, Reuse, Timeouts, TransportError, h1, tls};

/// A completed exchange.
#[derive(Debug)]
pub struct Response {
    /// The answer's status.
    pub status: StatusCode,
    /// Its headers.
    pub headers: HeaderMap,
    /// Its body (empty when the request said to drop it).
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
    /// A large body's share of the process's budget for them, given back with it.
    pub lease: super::BodyLease,
}

impl Response {
    /// An answer as a server might give it, for the drivers' unit tests.
    #[cfg(test)]
    pub(crate) fn canned(status: u16, headers: &[(&str, &str)], body: &str) -> Response {
        let mut h = HeaderMap::new();
        for (k, v) in headers {
            if let (Ok(k), Ok(v)) = (
                hyper::header::HeaderName::from_bytes(k.as_bytes()),
                hyper::header::HeaderValue::from_str(v),
            ) {
                h.append(k, v);
            }
        }
        Response {
            status: StatusCode::from_u16(status).unwrap_or(StatusCode::OK),
            headers: h,
            body: Bytes::from(body.to_string()),
            bytes_sent: 100,
            bytes_received: 200,
            elapsed: Duration::from_millis(3),
            handshake: None,
            earlier: Vec::new(),
            lease: Default::default(),
        }
    }

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

/// Answers put in doubt by bytes nobody asked for (see [`Conn::doubt`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Doubt {
    /// The answer read before the bytes were found, on an earlier exchange.
    pub earlier: u32,
    /// The answer the bytes came right behind, on this exchange.
    pub this: u32,
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
    /// Times bytes no request asked for were found on the connection (before a request
    /// was written, or after an answer): the server's protocol errors; each closed it.
    pub unsolicited: u64,
    /// The answers those bytes put in doubt, since last taken: the one read before them
    /// (found before the next request went out: an earlier exchange's answer) and the
    /// one they came right behind (found with it: this exchange's). Either may have been
    /// a stray answer to an earlier request rather than its own.
    pub(crate) doubt: Doubt,
    /// A new TLS connection may resume an earlier session of this target.
    resume_tls: bool,
    /// The connection opened for the request under way, if one was.
    opening: Option<Handshake>,
    /// The request timeout, one timer kept from one request to the next.
    deadline: Deadline,
    /// What becomes of answers' bodies (kept, bounded, unless the driver says).
    /// What it keeps of answers' bodies, and where it counts the large ones.
    reading: h1::Reading,
    /// Exchanges counted by method and status while untimed work (set-up) is tallied.
    tally: Option<Box<Tally>>,
    /// What every request says it is, unless it says so itself.
    user_agent: Option<hyper::header::HeaderValue>,
    /// What it says off the clock (while a tally is kept): loadmix's own agent marked
    /// `; setup`, so that a server's log tells set-up apart from the workload.
    setup_agent: Option<hyper::header::HeaderValue>,
}

/// loadmix's own `User-Agent` (`loadmix/V (run R; class#N)`) marked as set-up
/// (`...; setup)`); any other is left as its class wrote it.
fn setup_agent(agent: &hyper::header::HeaderValue) -> hyper::header::HeaderValue {
    agent
        .to_str()
        .ok()
        .filter(|a| a.starts_with("loadmix/"))
        .and_then(|a| a.strip_suffix(')'))
        .and_then(|a| hyper::header::HeaderValue::from_str(&format!("{a}; setup)")).ok())
        .unwrap_or_else(|| agent.clone())
}

/// Requests by method and the status they got (0: no answer), for work done off the
/// clock, so that what the server logged adds up.
pub(crate) type Tally = std::collections::BTreeMap<(String, u16), u64>;

/// Add `more` to `into`.
pub(crate) fn add_tally(into: &mut Tally, more: Tally) {
    for (k, n) in more {
        *into.entry(k).or_insert(0) += n;
    }
}

/// An open connection, which the VU's own task writes and reads: no task per connection,
/// no channel between the user and its socket.
struct Link {
    stream: Stream,
    /// Bytes read and not yet used; its allocation is kept from one answer to the next.
    buf: BytesMut,
    /// An exchange has completed on it, so a close now is the server dropping an idle
    /// connection rather than refusing this request.
    reused: bool,
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
    /// A connection to `endpoint`, kept or not as `policy` says; nothing is opened yet.
    pub fn new(endpoint: Arc<Endpoint>, policy: Reuse, timeouts: Timeouts) -> Conn {
        Conn {
            endpoint,
            policy,
            timeouts,
            link: None,
            wire: Vec::new(),
            opened: 0,
            retried: 0,
            unsolicited: 0,
            doubt: Doubt::default(),
            resume_tls: true,
            opening: None,
            deadline: Deadline::default(),
            reading: h1::Reading::default(),
            tally: None,
            user_agent: None,
            setup_agent: None,
        }
    }

    /// Every request says it is `agent` (`User-Agent`), unless it says so itself.
    pub fn with_user_agent(mut self, agent: Option<hyper::header::HeaderValue>) -> Conn {
        self.setup_agent = agent.as_ref().map(setup_agent);
        self.user_agent = agent;
        self
    }

    /// Every new TLS connection makes a full handshake (no session resumption).
    pub fn without_tls_resumption(mut self) -> Conn {
        self.resume_tls = false;
        self
    }

    /// What becomes of the bodies of the answers from now on: a driver that reads
    /// nothing of them has them dropped as they arrive.
    pub fn set_body_use(&mut self, body_use: h1::BodyUse) {
        self.reading.body_use = body_use;
    }

    /// Another connection to the same target, as this one is set up (its policy,
    /// timeouts, agent, TLS resumption, the reading of bodies, and counting when this one
    /// counts), opened on its first request: a user's set-up sending several requests at
    /// once. [`Conn::absorb`] gives back what it counted.
    pub fn sibling(&self) -> Conn {
        let mut c = Conn::new(self.endpoint.clone(), self.policy, self.timeouts);
        c.user_agent = self.user_agent.clone();
        c.setup_agent = self.setup_agent.clone();
        c.resume_tls = self.resume_tls;
        c.reading.body_use = self.reading.body_use;
        if self.tally.is_some() {
            c.keep_tally();
        }
        c
    }

    /// What a [`Conn::sibling`] counted (its exchanges by method and status, its retries
    /// and stray bytes) added to this connection's, which it closes.
    pub fn absorb(&mut self, mut other: Conn) {
        if let Some(t) = &mut self.tally {
            add_tally(t, other.take_tally());
        }
        self.opened += other.opened;
        self.retried += other.retried;
        self.unsolicited += other.unsolicited;
    }

    /// Count every exchange from now on, by method and status, until [`Conn::take_tally`].
    pub fn keep_tally(&mut self) {
        self.tally = Some(Box::default());
    }

    /// What was counted since [`Conn::keep_tally`]; counting stops.
    pub fn take_tally(&mut self) -> Tally {
        self.tally.take().map(|t| *t).unwrap_or_default()
    }

    /// Where it connects.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The connect and request timeouts, for a protocol that opens a stream of its own to
    /// the same target.
    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    /// Whether new TLS connections to this target may resume a session.
    pub fn resumes_tls(&self) -> bool {
        self.resume_tls
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
            match self.tally {
                Some(_) => self.setup_agent.as_ref(),
                None => self.user_agent.as_ref(),
            },
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
        if let Some(t) = self.tally.as_mut() {
            let status = result.as_ref().map_or(0, |(a, _)| a.status.as_u16());
            *t.entry((method.to_string(), status)).or_insert(0) += 1;
        }
        let (answer, sent) = match result {
            Ok(a) => a,
            Err(f) => {
                self.link = None;
                return Err(f.error);
            }
        };
        let ended = Instant::now();
        if !(answer.keep && self.policy == Reuse::KeepAlive) {
            self.link = None;
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
            lease: answer.lease,
        })
    }

    /// One attempt within the request timeout.
    async fn timed(
        &mut self,
        method: &Method,
        body: Option<&[u8]>,
        sent: u64,
        start: Instant,
    ) -> Result<(h1::Answer, u64), Failure> {
        let deadline = start + self.timeouts.request;
        let mut timer = std::mem::take(&mut self.deadline);
        let answered = {
            let exchange = std::pin::pin!(self.exchange(method, body, sent));
            timer.within(deadline, exchange).await
        };
        self.deadline = timer;
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
    ) -> Result<(h1::Answer, u64), Failure> {
        // A kept-alive connection the server has since closed is not an error of this
        // request: open a new one, as any HTTP client would. One that holds bytes no
        // request asked for is out of step (the next answer read would be them): that is
        // the server's protocol error, counted, and the request goes on a fresh one.
        // Checked before every reuse: a stray answer follows its request's within
        // microseconds, when the next request is already due.
        let kept = self.link.take().filter(|l| match l.stream.waiting() {
            Waiting::Nothing => true,
            Waiting::Closed => false,
            Waiting::Unasked => {
                self.unsolicited += 1;
                self.doubt.earlier = self.doubt.earlier.saturating_add(1);
                false
            }
        });
        let link = match kept {
            Some(link) => link,
            // Boxed: opening a connection (TLS handshake included) is a large future, and
            // inline it would be part of every idle user's state.
            None => Box::pin(self.connect()).await.map_err(Failure::of)?,
        };
        let link = self.link.insert(link);
        // A close before any answer on a reused connection is the server dropping it as the
        // request went out; on a fresh one it is the server refusing the request.
        let reused = link.reused;
        let written = match body {
            // A large body is written watching for an early answer (boxed: its read
            // buffer would otherwise be part of every user's state).
            Some(b) => {
                let parts = [&self.wire[..], b];
                Box::pin(link.stream.write_watching(&parts, &mut link.buf)).await
            }
            None => link.stream.write(&[&self.wire]).await.map(|()| Written {
                bytes: sent,
                early: false,
            }),
        };
        let written = match written {
            Ok(w) => w,
            Err((written, e)) => {
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
        };
        match h1::read_answer(&mut link.stream, &mut link.buf, method, self.reading).await {
            Ok(mut a) => {
                link.reused = true;
                if a.unasked {
                    self.unsolicited += 1;
                    self.doubt.this = self.doubt.this.saturating_add(1);
                }
                // The rest of the body was never sent: the connection is out of step.
                if written.early {
                    a.keep = false;
                }
                Ok((a, written.bytes))
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
        let (stream, handshake) =
            Stream::connect(&self.endpoint, self.timeouts.connect, self.resume_tls).await?;
        self.opened += 1;
        self.opening = Some(handshake);
        Ok(Link {
            stream,
            buf: BytesMut::new(),
            reused: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

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

    /// A kept-alive connection to `addr` with generous timeouts.
    fn kept_alive(addr: SocketAddr) -> Conn {
        let timeouts = Timeouts {
            connect: Duration::from_secs(5),
            request: Duration::from_secs(30),
        };
        Conn::new(
            Arc::new(Endpoint::local(addr, "t")),
            Reuse::KeepAlive,
            timeouts,
        )
    }

    /// A server that answers every request on a kept connection with `size` bytes.
    fn sends_bodies_of(size: usize) -> SocketAddr {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { return };
                std::thread::spawn(move || {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    let body = vec![b'x'; size];
                    loop {
                        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                            match s.read(&mut chunk) {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        }
                        buf.clear();
                        let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {size}\r\n\r\n");
                        if s.write_all(head.as_bytes())
                            .and_then(|()| s.write_all(&body))
                            .is_err()
                        {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    #[tokio::test(flavor = "current_thread")]
    async fn large_bodies_held_at_once_are_bounded_and_given_back() {
        let budget: &'static h1::Budget = Box::leak(Box::new(h1::Budget::new(250 << 10)));
        let addr = sends_bodies_of(100 << 10);
        let mut conn = kept_alive(addr);
        conn.reading.budget = budget;
        let get = || Request::get("/").body(Bytes::new()).unwrap();
        let first = conn.send(get()).await.unwrap();
        let second = conn.send(get()).await.unwrap();
        assert_eq!(budget.held(), 200 << 10);
        // A third while both are held does not fit: a body failure, in words that say why.
        let e = conn.send(get()).await.unwrap_err();
        assert_eq!(e.class, ErrorClass::Body);
        assert!(e.message.contains("does not fit"), "{}", e.message);
        drop((first, second));
        assert_eq!(budget.held(), 0);
        let third = conn.send(get()).await.unwrap();
        assert_eq!(third.body.len(), 100 << 10);
    }

    /// A server that sends an unsolicited 500 `gap` after every 200; it counts the requests
    /// it received and the strays it sent.
    fn stray_sender(gap: Duration) -> (SocketAddr, Arc<[std::sync::atomic::AtomicU64; 2]>) {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let counts = Arc::new([const { std::sync::atomic::AtomicU64::new(0) }; 2]);
        let counter = counts.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { return };
                let counter = counter.clone();
                std::thread::spawn(move || {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    loop {
                        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                            match s.read(&mut chunk) {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        }
                        let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                        buf.drain(..end);
                        counter[0].fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
                        std::thread::sleep(gap);
                        if s.write_all(b"HTTP/1.1 500 Stray\r\nContent-Length: 0\r\n\r\n")
                            .is_ok()
                        {
                            counter[1].fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        }
                    }
                });
            }
        });
        (addr, counts)
    }

    #[tokio::test(flavor = "current_thread")]
    async fn bytes_waiting_on_a_connection_just_reused_are_counted_and_never_read_as_an_answer() {
        let (addr, counts) = stray_sender(Duration::from_micros(100));
        let mut conn = kept_alive(addr);
        let n = 50;
        for i in 0..n {
            let r = conn
                .send(Request::get("/").body(Bytes::new()).unwrap())
                .await
                .unwrap();
            assert_eq!(r.status, 200, "request {i} was answered by the stray");
            // Idle until the stray is on the connection (on loopback it is once the
            // server's write returns): a fraction of a millisecond, the window in which a
            // connection used to be reused unchecked.
            while counts[1].load(std::sync::atomic::Ordering::SeqCst) <= i {
                std::hint::spin_loop();
            }
        }
        assert_eq!(counts[0].load(std::sync::atomic::Ordering::SeqCst), n);
        // Every connection was found out of step: before its next request (the answer read
        // before it put in doubt), or, when the client came to read only after the stray
        // had followed its answer (1 run in 60 on an idle machine), behind that very answer
        // (this one in doubt). The last connection's stray may not have come in time.
        let (earlier, this) = (u64::from(conn.doubt.earlier), u64::from(conn.doubt.this));
        assert_eq!(conn.unsolicited, earlier + this);
        assert!(
            (n - 1..=n).contains(&conn.unsolicited),
            "{} of {n}: in doubt earlier {earlier}, this {this}",
            conn.unsolicited
        );
        assert!(
            earlier >= n / 2,
            "the check before reuse found {earlier} of {n}"
        );
        assert_eq!(conn.opened, n);
    }

    /// A server that reads a request head, answers 413 at once and reads no more; then
    /// closes the connection, or holds it open.
    async fn refuses_uploads(close: bool) -> SocketAddr {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && s.read(&mut byte).await.unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let _ = s
                .write_all(
                    b"HTTP/1.1 413 Too Large\r\nConnection: close\r\nContent-Length: 3\r\n\r\nbig",
                )
                .await;
            if !close {
                std::future::pending::<()>().await;
            }
        });
        addr
    }

    #[tokio::test]
    async fn an_answer_that_comes_while_the_body_is_sent_is_the_answer() {
        for close in [false, true] {
            let addr = refuses_uploads(close).await;
            let mut conn = kept_alive(addr);
            let body = Bytes::from(vec![b'x'; 32 << 20]);
            let r = conn
                .send(Request::put("/big").body(body).unwrap())
                .await
                .unwrap_or_else(|e| panic!("close {close}: {e}"));
            assert_eq!(r.status, 413, "close {close}");
            assert_eq!(&r.body[..], b"big");
            assert!(r.bytes_sent < 32 << 20, "close {close}: {}", r.bytes_sent);
        }
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
