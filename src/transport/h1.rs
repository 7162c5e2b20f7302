//! HTTP/1.1 on one connection, written and read in the virtual user's own task: a request
//! is encoded into one buffer and written in one go; the answer's head is parsed with
//! httparse, interim (1xx) answers are skipped, and the body is framed by `Content-Length`,
//! the chunked coding, or the close (RFC 9112 §6). Everything a server sends is bounded:
//! the head, the number of headers, interim answers, chunk-size lines, trailers and the
//! body. The byte counts are the bytes that crossed the socket, framing included.
//!
//! This replaces hyper's client on the request path. hyper's dispatch channel, its
//! connection future and its header encoding cost several microseconds per request that a
//! load generator spends on every request it sends (profile in `bench/README.md`).

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::{Buf, Bytes, BytesMut};
use hyper::header::{
    CONNECTION, CONTENT_LENGTH, HOST, HeaderName, HeaderValue, TRANSFER_ENCODING, USER_AGENT,
};
use hyper::{HeaderMap, Method, Request, StatusCode};
use tokio::io::{AsyncRead, AsyncReadExt};

/// Longest answer head (status line and headers), and longest trailer section.
pub(super) const MAX_HEAD: usize = 64 * 1024;
/// Most headers in one answer head.
pub(super) const MAX_HEADERS: usize = 100;
/// Largest body read into memory.
pub(super) const MAX_BODY: usize = 64 << 20;

/// Bytes of answer bodies over [`INLINE_BODY`] that users may hold at once, and how many
/// they hold. Small bodies are in the memory the run already counts for every user.
#[derive(Debug)]
pub(crate) struct Budget {
    limit: AtomicU64,
    held: AtomicU64,
}

/// The process's budget: unbounded until the run sets it from the machine's memory
/// ([`limit_kept_bodies`]).
pub(crate) static BODIES: Budget = Budget::new(u64::MAX);

/// Let the users of this process hold at most `bytes` of large answer bodies at once: one
/// past it fails (`body`, in words that say why) instead of the process growing until the
/// machine ends it.
pub(crate) fn limit_kept_bodies(bytes: u64) {
    BODIES.limit.store(bytes, Ordering::Relaxed);
}

impl Budget {
    pub(crate) const fn new(limit: u64) -> Budget {
        Budget {
            limit: AtomicU64::new(limit),
            held: AtomicU64::new(0),
        }
    }

    /// `bytes` more of the budget, or the failure to report when it has no room.
    fn take(&'static self, bytes: u64) -> Result<BodyLease, ReadError> {
        let limit = self.limit.load(Ordering::Relaxed);
        let now = self
            .held
            .fetch_add(bytes, Ordering::AcqRel)
            .saturating_add(bytes);
        if now > limit {
            self.held.fetch_sub(bytes, Ordering::AcqRel);
            return Err(ReadError::Malformed(format!(
                "the answer's body of {:.1} MiB does not fit: the users hold {:.1} MiB of answers, \
                 the most this machine's memory allows them",
                bytes as f64 / 1048576.0,
                (now - bytes) as f64 / 1048576.0
            )));
        }
        Ok(BodyLease {
            bytes,
            from: Some(self),
        })
    }

    /// A body of `len` bytes leased when it is large.
    fn lease_for(&'static self, len: usize) -> Result<BodyLease, ReadError> {
        match len > INLINE_BODY {
            true => self.take(len as u64),
            false => Ok(BodyLease::default()),
        }
    }

    /// Bytes held now.
    #[cfg(test)]
    pub(crate) fn held(&self) -> u64 {
        self.held.load(Ordering::Acquire)
    }
}

/// A large body's share of a [`Budget`], given back when the answer holding it goes.
#[derive(Debug, Default)]
pub struct BodyLease {
    bytes: u64,
    from: Option<&'static Budget>,
}

impl Drop for BodyLease {
    fn drop(&mut self) {
        if let Some(b) = self.from {
            b.held.fetch_sub(self.bytes, Ordering::AcqRel);
        }
    }
}

/// How an answer's body is read: kept or dropped, and where a large kept one is counted.
#[derive(Debug, Clone, Copy)]
pub(super) struct Reading {
    pub body_use: BodyUse,
    pub budget: &'static Budget,
}

impl Default for Reading {
    fn default() -> Self {
        Reading {
            body_use: BodyUse::default(),
            budget: &BODIES,
        }
    }
}

/// What becomes of an answer's body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyUse {
    /// Kept whole, up to this many bytes; a larger one is a `body` failure.
    Keep(usize),
    /// Counted and dropped as it arrives: the driver reads nothing of it, so a body of
    /// any size costs a read buffer, not its size.
    Discard,
}

impl Default for BodyUse {
    fn default() -> Self {
        BodyUse::Keep(MAX_BODY)
    }
}
/// Most interim (1xx) answers before the final one.
const MAX_INTERIM: usize = 16;
/// Longest chunk-size line (size and extensions).
const MAX_CHUNK_LINE: usize = 4096;
/// Bodies up to this size are copied after the head and go out in one write.
const INLINE_BODY: usize = 16 * 1024;
/// Each read asks for at least this much room.
const READ_CHUNK: usize = 16 * 1024;

/// Append the request line and headers of `req` to `out`, as they go on the wire: the
/// request's own headers, `Host` when it has none, the user's `User-Agent` when it has
/// none, `Connection: close` when asked, and the body's `Content-Length` (a request's own
/// `Content-Length` or `Transfer-Encoding` is replaced: the body is always sent whole).
/// The body itself follows when it is small.
pub(super) fn encode(
    req: &Request<Bytes>,
    host: &HeaderValue,
    agent: Option<&HeaderValue>,
    close: bool,
    out: &mut Vec<u8>,
) {
    out.clear();
    let body = req.body();
    out.extend_from_slice(req.method().as_str().as_bytes());
    out.push(b' ');
    let target = req.uri().path_and_query().map_or("/", |p| p.as_str());
    out.extend_from_slice(if target.is_empty() {
        b"/"
    } else {
        target.as_bytes()
    });
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let headers = req.headers();
    if !headers.contains_key(HOST) {
        header(out, HOST.as_str(), host.as_bytes());
    }
    if let Some(agent) = agent.filter(|_| !headers.contains_key(USER_AGENT)) {
        header(out, USER_AGENT.as_str(), agent.as_bytes());
    }
    for (name, value) in headers {
        if name == CONTENT_LENGTH || name == TRANSFER_ENCODING {
            continue;
        }
        header(out, name.as_str(), value.as_bytes());
    }
    if close && !headers.contains_key(CONNECTION) {
        header(out, CONNECTION.as_str(), b"close");
    }
    // An empty body is announced only where a body is expected (as browsers do).
    if !body.is_empty() || matches!(*req.method(), Method::POST | Method::PUT | Method::PATCH) {
        use std::io::Write as _;
        // Writing to a Vec cannot fail.
        let _ = write!(out, "{CONTENT_LENGTH}: {}\r\n", body.len());
    }
    out.extend_from_slice(b"\r\n");
    if body.len() <= INLINE_BODY {
        out.extend_from_slice(body);
    }
}

/// Whether [`encode`] left the body out of the buffer, to be written after it.
pub(super) fn body_apart(req: &Request<Bytes>) -> bool {
    req.body().len() > INLINE_BODY
}

fn header(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// A complete answer.
#[derive(Debug)]
pub(super) struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// Bytes of this answer read from the connection: interim answers, head, body framing.
    pub received: u64,
    /// The connection may carry the next request.
    pub keep: bool,
    /// Bytes followed the answer that no request asked for (they were dropped, and
    /// `keep` is false).
    pub unasked: bool,
    /// The body's share of the process's budget for large bodies.
    pub lease: BodyLease,
}

/// Why no complete answer was read.
#[derive(Debug)]
pub(super) enum ReadError {
    /// The connection closed or failed; `any` when some of the answer had arrived.
    Closed { any: bool, cause: Option<io::Error> },
    /// The bytes are not an HTTP/1.x answer, or break a bound.
    Malformed(String),
}

/// How the body is delimited.
enum Framing {
    Empty,
    Length(usize),
    Chunked,
    ToClose,
}

/// The connection's read side: the bytes read but not yet used, and the count of bytes
/// taken from the socket for the answer under way.
struct Reader<'a, R> {
    io: &'a mut R,
    buf: &'a mut BytesMut,
    received: u64,
}

impl<R: AsyncRead + Unpin> Reader<'_, R> {
    /// Read more into the buffer. `Ok(false)` at the end of the stream.
    async fn fill(&mut self) -> Result<bool, ReadError> {
        if self.buf.capacity() - self.buf.len() < READ_CHUNK / 2 {
            self.buf.reserve(READ_CHUNK);
        }
        match self.io.read_buf(self.buf).await {
            Ok(0) => Ok(false),
            Ok(n) => {
                self.received += n as u64;
                Ok(true)
            }
            Err(e) => Err(ReadError::Closed {
                any: self.received > 0,
                cause: Some(e),
            }),
        }
    }

    /// Take `n` bytes of the answer and drop them, a read at a time.
    async fn skip(&mut self, mut n: usize) -> Result<(), ReadError> {
        loop {
            let take = n.min(self.buf.len());
            self.buf.advance(take);
            n -= take;
            if n == 0 {
                return Ok(());
            }
            self.more().await?;
        }
    }

    /// As [`Reader::fill`], where the end of the stream cuts the answer short.
    async fn more(&mut self) -> Result<(), ReadError> {
        if self.fill().await? {
            Ok(())
        } else {
            Err(ReadError::Closed {
                any: self.received > 0,
                cause: None,
            })
        }
    }
}

/// Read one answer to a request with `method`. `buf` holds what was read beyond earlier
/// answers (normally nothing) and keeps its allocation from one answer to the next.
pub(super) async fn read_answer<R: AsyncRead + Unpin>(
    io: &mut R,
    buf: &mut BytesMut,
    method: &Method,
    Reading { body_use, budget }: Reading,
) -> Result<Answer, ReadError> {
    let mut r = Reader {
        io,
        buf,
        received: 0,
    };
    // Nothing is left over from an earlier answer (bytes after an answer end the
    // connection); what is in `buf` is the start of this answer, read while the request
    // was still being written.
    let mut interim = 0;
    let (status, headers, keep_version) = loop {
        let head = parse_head(r.buf)?;
        let Some((status, headers, keep)) = head else {
            if r.buf.len() > MAX_HEAD {
                return Err(head_too_long());
            }
            r.more().await?;
            continue;
        };
        if status.is_informational() && status != StatusCode::SWITCHING_PROTOCOLS {
            interim += 1;
            if interim > MAX_INTERIM {
                return Err(ReadError::Malformed(format!(
                    "more than {MAX_INTERIM} interim (1xx) answers"
                )));
            }
            continue;
        }
        break (status, headers, keep);
    };
    // After 101 the connection speaks another protocol.
    let mut keep = keep_version
        && status != StatusCode::SWITCHING_PROTOCOLS
        && !has_token(&headers, CONNECTION, "close");
    let framing = framing(method, status, &headers)?;
    // A body whose length is known is leased before it is read; one that is not, once
    // it has come (each is at most the `Keep` limit meanwhile).
    let mut lease = BodyLease::default();
    let body = match framing {
        Framing::Empty => Bytes::new(),
        Framing::Length(n) => match body_use {
            BodyUse::Keep(limit) if n > limit => return Err(too_large(limit)),
            BodyUse::Keep(_) => {
                lease = budget.lease_for(n)?;
                while r.buf.len() < n {
                    let want = (n - r.buf.len()).min(1 << 20);
                    r.buf.reserve(want);
                    r.more().await?;
                }
                r.buf.split_to(n).freeze()
            }
            BodyUse::Discard => {
                r.skip(n).await?;
                Bytes::new()
            }
        },
        Framing::Chunked => {
            // Transfer-Encoding with Content-Length: the answer is suspect, do not reuse
            // the connection after it (RFC 9112 §6.3).
            if headers.contains_key(CONTENT_LENGTH) {
                keep = false;
            }
            chunked(&mut r, body_use).await?
        }
        Framing::ToClose => {
            keep = false;
            while r.fill().await? {
                match body_use {
                    BodyUse::Keep(limit) if r.buf.len() > limit => return Err(too_large(limit)),
                    BodyUse::Keep(_) => {}
                    BodyUse::Discard => r.buf.clear(),
                }
            }
            r.buf.split().freeze()
        }
    };
    if lease.from.is_none() {
        lease = budget.lease_for(body.len())?;
    }
    // Bytes after the answer were not asked for: the stream is out of step.
    let unasked = !r.buf.is_empty();
    if unasked {
        keep = false;
        r.buf.clear();
    }
    Ok(Answer {
        status,
        headers,
        body,
        received: r.received,
        keep,
        unasked,
        lease,
    })
}

type Head = (StatusCode, HeaderMap, bool);

/// Whether `buf` holds a whole answer head that is not an interim (1xx) one: the server
/// has answered the request, whatever is still to come.
pub(super) fn final_head_in(buf: &[u8]) -> bool {
    let mut rest = buf;
    while let Some(end) = rest.windows(4).position(|w| w == b"\r\n\r\n") {
        // `HTTP/1.1 1xx`: the status's first digit is the tenth byte.
        if rest.get(9) != Some(&b'1') {
            return true;
        }
        rest = &rest[end + 4..];
    }
    false
}

fn head_too_long() -> ReadError {
    ReadError::Malformed(format!(
        "the answer's head is longer than {} KiB",
        MAX_HEAD / 1024
    ))
}

/// Headers most answers fit in; a head with more is parsed again with room for
/// [`MAX_HEADERS`].
const FEW_HEADERS: usize = 24;

/// The answer head at the start of `buf`, when it is all there: it is taken off `buf`,
/// and its status, headers, and whether its HTTP version keeps the connection by default
/// are returned. Header values share the head's bytes (no allocation per header).
fn parse_head(buf: &mut BytesMut) -> Result<Option<Head>, ReadError> {
    if buf.is_empty() {
        return Ok(None);
    }
    match parse_head_in::<FEW_HEADERS>(buf)? {
        Parsed::TooMany => match parse_head_in::<MAX_HEADERS>(buf)? {
            Parsed::TooMany => Err(ReadError::Malformed(format!(
                "more than {MAX_HEADERS} headers in the answer"
            ))),
            Parsed::Head(h) => Ok(h),
        },
        Parsed::Head(h) => Ok(h),
    }
}

/// A parse with room for `N` headers.
enum Parsed {
    /// The head, when it is all there.
    Head(Option<Head>),
    /// More than `N` headers.
    TooMany,
}

fn parse_head_in<const N: usize>(buf: &mut BytesMut) -> Result<Parsed, ReadError> {
    let mut slots = [const { std::mem::MaybeUninit::<httparse::Header>::uninit() }; N];
    let mut resp = httparse::Response::new(&mut []);
    let parsed = httparse::ParserConfig::default()
        .parse_response_with_uninit_headers(&mut resp, buf, &mut slots);
    let len = match parsed {
        // The bound is on the head, however its bytes arrived: one read may bring a head
        // that, in smaller reads, would have been refused before it was complete.
        Ok(httparse::Status::Complete(n)) if n > MAX_HEAD => return Err(head_too_long()),
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(Parsed::Head(None)),
        Err(httparse::Error::TooManyHeaders) => return Ok(Parsed::TooMany),
        Err(e) => {
            return Err(ReadError::Malformed(format!("not an HTTP/1.x answer: {e}")));
        }
    };
    let code = resp.code.unwrap_or(0);
    let status = StatusCode::from_u16(code)
        .map_err(|_| ReadError::Malformed(format!("status {code} is out of range")))?;
    let version = resp.version;
    // Where each name and value lies in the head, so the head can be taken off the buffer
    // and the values made slices of it.
    let base = buf.as_ptr() as usize;
    let mut spans = [(0usize, 0usize, 0usize, 0usize); N];
    let count = resp.headers.len();
    for (span, h) in spans.iter_mut().zip(resp.headers.iter()) {
        *span = (
            h.name.as_ptr() as usize - base,
            h.name.len(),
            h.value.as_ptr() as usize - base,
            h.value.len(),
        );
    }
    let head = buf.split_to(len).freeze();
    let mut headers = HeaderMap::with_capacity(count);
    for &(n, nl, v, vl) in &spans[..count] {
        let name = HeaderName::from_bytes(&head[n..n + nl]).map_err(|_| {
            ReadError::Malformed(format!(
                "'{}' is not a header name",
                head[n..n + nl].escape_ascii()
            ))
        })?;
        let value = HeaderValue::from_maybe_shared(head.slice(v..v + vl))
            .map_err(|_| ReadError::Malformed(format!("the value of '{name}' is not valid")))?;
        headers.append(name, value);
    }
    // HTTP/1.0 closes unless the answer asks to keep it.
    let keep = version == Some(1) || has_token(&headers, CONNECTION, "keep-alive");
    Ok(Parsed::Head(Some((status, headers, keep))))
}

/// Whether a comma-separated header (any of its lines) lists `token`.
fn has_token(headers: &HeaderMap, name: HeaderName, token: &str) -> bool {
    headers.get_all(name).iter().any(|v| {
        v.to_str()
            .is_ok_and(|s| s.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    })
}

/// How the body of an answer is delimited (RFC 9112 §6.3).
fn framing(method: &Method, status: StatusCode, headers: &HeaderMap) -> Result<Framing, ReadError> {
    if *method == Method::HEAD
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        return Ok(Framing::Empty);
    }
    if headers.contains_key(TRANSFER_ENCODING) {
        let last = headers
            .get_all(TRANSFER_ENCODING)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|s| s.split(','))
            .map(str::trim)
            .rfind(|t| !t.is_empty());
        return Ok(match last {
            Some(t) if t.eq_ignore_ascii_case("chunked") => Framing::Chunked,
            _ => Framing::ToClose,
        });
    }
    let mut length: Option<u64> = None;
    for v in headers.get_all(CONTENT_LENGTH) {
        let bad = || ReadError::Malformed("the answer's Content-Length is not valid".into());
        let s = v.to_str().map_err(|_| bad())?;
        for part in s.split(',') {
            let part = part.trim();
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            let n: u64 = part.parse().map_err(|_| too_large(MAX_BODY))?;
            if length.is_some_and(|l| l != n) {
                return Err(ReadError::Malformed(
                    "the answer has two different Content-Length values".into(),
                ));
            }
            length = Some(n);
        }
    }
    match length {
        Some(n) => Ok(Framing::Length(
            usize::try_from(n).map_err(|_| too_large(MAX_BODY))?,
        )),
        None => Ok(Framing::ToClose),
    }
}

fn too_large(limit: usize) -> ReadError {
    ReadError::Malformed(format!(
        "the answer's body is larger than {} MiB",
        limit >> 20
    ))
}

/// A chunked body, and its trailer section (read and dropped).
async fn chunked<R: AsyncRead + Unpin>(
    r: &mut Reader<'_, R>,
    body_use: BodyUse,
) -> Result<Bytes, ReadError> {
    let mut body = BytesMut::new();
    loop {
        let (line, size) = match httparse::parse_chunk_size(r.buf) {
            Ok(httparse::Status::Complete(x)) => x,
            Ok(httparse::Status::Partial) => {
                if r.buf.len() > MAX_CHUNK_LINE {
                    return Err(ReadError::Malformed("a chunk-size line is too long".into()));
                }
                r.more().await?;
                continue;
            }
            Err(_) => return Err(ReadError::Malformed("a chunk size is not valid".into())),
        };
        let size = usize::try_from(size).map_err(|_| too_large(MAX_BODY))?;
        r.buf.advance(line);
        if size == 0 {
            break;
        }
        match body_use {
            BodyUse::Keep(limit) if size > limit - body.len() => return Err(too_large(limit)),
            // The chunk as it arrives, never the whole of it in the read buffer first.
            BodyUse::Keep(_) => {
                let mut left = size;
                while left > 0 {
                    if r.buf.is_empty() {
                        r.more().await?;
                    }
                    let take = left.min(r.buf.len());
                    body.extend_from_slice(&r.buf[..take]);
                    r.buf.advance(take);
                    left -= take;
                }
            }
            BodyUse::Discard => r.skip(size).await?,
        }
        while r.buf.len() < 2 {
            r.more().await?;
        }
        if &r.buf[..2] != b"\r\n" {
            return Err(ReadError::Malformed(
                "a chunk does not end where its size says".into(),
            ));
        }
        r.buf.advance(2);
    }
    // Trailer fields, up to the empty line.
    let mut trailer = 0usize;
    loop {
        match r.buf.iter().position(|&b| b == b'\n') {
            Some(end) => {
                let empty = end == 0 || (end == 1 && r.buf[0] == b'\r');
                trailer += end + 1;
                r.buf.advance(end + 1);
                if empty {
                    return Ok(body.freeze());
                }
            }
            None => {
                if trailer + r.buf.len() > MAX_HEAD {
                    return Err(ReadError::Malformed(
                        "the trailer section is too long".into(),
                    ));
                }
                r.more().await?;
            }
        }
        if trailer > MAX_HEAD {
            return Err(ReadError::Malformed(
                "the trailer section is too long".into(),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(bytes: &[u8], method: Method) -> (Result<Answer, ReadError>, BytesMut) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut io = bytes;
        let mut buf = BytesMut::new();
        let r = rt.block_on(read_answer(&mut io, &mut buf, &method, Reading::default()));
        (r, buf)
    }

    fn ok(bytes: &[u8]) -> Answer {
        read(bytes, Method::GET).0.unwrap()
    }

    fn malformed(bytes: &[u8]) -> String {
        match read(bytes, Method::GET).0 {
            Err(ReadError::Malformed(m)) => m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_request_is_encoded_as_it_goes_on_the_wire() {
        let req = Request::builder()
            .method("PROPFIND")
            .uri("/dav/a%20b?x=1")
            .header("depth", "1")
            .header("content-length", "999")
            .body(Bytes::from_static(b"<x/>"))
            .unwrap();
        let mut out = Vec::new();
        encode(
            &req,
            &HeaderValue::from_static("h:80"),
            None,
            true,
            &mut out,
        );
        assert_eq!(
            String::from_utf8(out.clone()).unwrap(),
            "PROPFIND /dav/a%20b?x=1 HTTP/1.1\r\nhost: h:80\r\ndepth: 1\r\nconnection: close\r\ncontent-length: 4\r\n\r\n<x/>"
        );
        let get = Request::get("/").body(Bytes::new()).unwrap();
        encode(&get, &HeaderValue::from_static("h"), None, false, &mut out);
        assert_eq!(out, b"GET / HTTP/1.1\r\nhost: h\r\n\r\n");
        let put = Request::put("/p")
            .header("host", "mine")
            .body(Bytes::new())
            .unwrap();
        encode(&put, &HeaderValue::from_static("h"), None, false, &mut out);
        assert_eq!(
            out,
            b"PUT /p HTTP/1.1\r\nhost: mine\r\ncontent-length: 0\r\n\r\n"
        );
        let big = Request::put("/p")
            .body(Bytes::from(vec![b'x'; INLINE_BODY + 1]))
            .unwrap();
        encode(&big, &HeaderValue::from_static("h"), None, false, &mut out);
        assert!(body_apart(&big));
        assert!(out.ends_with(b"content-length: 16385\r\n\r\n"));
    }

    #[test]
    fn the_users_agent_goes_on_every_request_that_names_none_of_its_own() {
        let agent = HeaderValue::from_static("loadmix/1 (run r; c#0)");
        let mut out = Vec::new();
        let get = Request::get("/").body(Bytes::new()).unwrap();
        encode(
            &get,
            &HeaderValue::from_static("h"),
            Some(&agent),
            false,
            &mut out,
        );
        assert_eq!(
            out,
            b"GET / HTTP/1.1\r\nhost: h\r\nuser-agent: loadmix/1 (run r; c#0)\r\n\r\n"
        );
        let own = Request::get("/")
            .header("user-agent", "mine")
            .body(Bytes::new())
            .unwrap();
        encode(
            &own,
            &HeaderValue::from_static("h"),
            Some(&agent),
            false,
            &mut out,
        );
        assert_eq!(
            out,
            b"GET / HTTP/1.1\r\nhost: h\r\nuser-agent: mine\r\n\r\n"
        );
    }

    #[test]
    fn answers_are_framed_by_length_chunks_or_close() {
        let a = ok(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX: y\r\n\r\nhello");
        assert_eq!(
            (a.status.as_u16(), &a.body[..], a.keep),
            (200, &b"hello"[..], true)
        );
        assert_eq!(a.received, 49);
        assert_eq!(a.headers["x"], "y");
        let c = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n1\r\n!\r\n0\r\nT: v\r\n\r\n";
        let a = ok(c);
        assert_eq!(
            (&a.body[..], a.keep, a.received),
            (&b"hello!"[..], true, c.len() as u64)
        );
        let a = ok(b"HTTP/1.1 200 OK\r\n\r\nto the end");
        assert_eq!((&a.body[..], a.keep), (&b"to the end"[..], false));
        let a = ok(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n");
        assert!(!a.keep, "HTTP/1.0 closes by default");
        let a = ok(b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n");
        assert!(a.keep);
        let a = ok(b"HTTP/1.1 200 OK\r\nConnection: x, close\r\nContent-Length: 0\r\n\r\n");
        assert!(!a.keep);
        let a = ok(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n");
        assert_eq!((a.status.as_u16(), a.body.len(), a.keep), (204, 0, true));
        let (a, _) = read(
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n",
            Method::HEAD,
        );
        assert_eq!(a.unwrap().body.len(), 0);
        let a = ok(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA");
        assert!(!a.keep, "bytes nobody asked for put the stream out of step");
        let a = ok(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n");
        assert_eq!(
            (a.status.as_u16(), a.keep),
            (101, false),
            "another protocol follows"
        );
        let a = ok(b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok");
        assert_eq!(&a.body[..], b"ok");
    }

    #[test]
    fn hostile_answers_are_refused_with_a_reason() {
        assert!(malformed(b"SSH-2.0-OpenSSH\r\n\r\n").contains("not an HTTP"));
        assert!(
            malformed(b"HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\n").contains("two different")
        );
        assert!(malformed(b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n").contains("not valid"));
        assert!(
            malformed(b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n")
                .contains("larger")
        );
        assert!(
            malformed(b"HTTP/1.1 200 OK\r\nContent-Length: 999999999999\r\n\r\n")
                .contains("larger")
        );
        assert!(
            malformed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
                .contains("chunk size")
        );
        assert!(
            malformed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokXX0\r\n\r\n")
                .contains("does not end")
        );
        assert!(
            malformed(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\n"
            )
            .contains("chunk size")
        );
        let mut many = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..=MAX_HEADERS {
            many.extend_from_slice(format!("h{i}: v\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert!(malformed(&many).contains("headers"));
        let mut long = b"HTTP/1.1 200 OK\r\nX: ".to_vec();
        long.resize(MAX_HEAD + 10, b'a');
        assert!(malformed(&long).contains("longer"));
        let interim = b"HTTP/1.1 100 Continue\r\n\r\n".repeat(MAX_INTERIM + 1);
        assert!(malformed(&interim).contains("interim"));
        assert!(malformed(b"HTTP/1.1 099 No\r\n\r\n").contains("out of range"));
    }

    /// An answer of `head` then `len` bytes of body, made as it is read (no copy of it
    /// exists anywhere), in reads of up to 64 KiB.
    struct Endless {
        head: Vec<u8>,
        at: usize,
        len: u64,
        chunked: bool,
    }

    impl AsyncRead for Endless {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            if self.at < self.head.len() {
                let n = (self.head.len() - self.at).min(buf.remaining());
                let at = self.at;
                buf.put_slice(&self.head[at..at + n]);
                self.at += n;
            } else if self.len > 0 {
                let piece = (64u64 << 10).min(self.len);
                let mut bytes = Vec::new();
                if self.chunked {
                    bytes.extend_from_slice(format!("{piece:x}\r\n").as_bytes());
                }
                bytes.resize(bytes.len() + piece as usize, b'x');
                if self.chunked {
                    bytes.extend_from_slice(b"\r\n");
                }
                self.len -= piece;
                if self.chunked && self.len == 0 {
                    bytes.extend_from_slice(b"0\r\n\r\n");
                }
                // Put back what does not fit.
                let n = bytes.len().min(buf.remaining());
                buf.put_slice(&bytes[..n]);
                let mut rest = bytes[n..].to_vec();
                rest.extend_from_slice(&self.head[self.at..]);
                self.head = rest;
                self.at = 0;
            }
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[test]
    fn a_body_nobody_reads_is_dropped_as_it_arrives_and_one_that_is_read_is_bounded() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let len: u64 = 300 << 20;
        for chunked in [false, true] {
            let framing = match chunked {
                true => "Transfer-Encoding: chunked".to_string(),
                false => format!("Content-Length: {len}"),
            };
            let head = format!("HTTP/1.1 200 OK\r\n{framing}\r\n\r\n").into_bytes();
            let answer = |body_use| {
                let mut io = Endless {
                    head: head.clone(),
                    at: 0,
                    len,
                    chunked,
                };
                let mut buf = BytesMut::new();
                let reading = Reading {
                    body_use,
                    budget: &BODIES,
                };
                let r = rt.block_on(read_answer(&mut io, &mut buf, &Method::GET, reading));
                (r, buf.capacity())
            };
            let (r, held) = answer(BodyUse::Discard);
            let a = r.unwrap();
            assert!(a.body.is_empty());
            assert!(a.received > len, "chunked {chunked}: {}", a.received);
            // A read buffer's worth, never the body's size.
            assert!(held <= 4 * READ_CHUNK, "chunked {chunked}: {held}");
            match answer(BodyUse::default()).0 {
                Err(ReadError::Malformed(m)) => assert!(m.contains("larger than 64 MiB"), "{m}"),
                other => panic!("chunked {chunked}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_head_past_the_bound_is_refused_however_its_bytes_arrived() {
        let mut head = b"HTTP/1.1 200 OK\r\nX: ".to_vec();
        head.resize(100 * 1024, b'a');
        head.extend_from_slice(b"\r\nContent-Length: 0\r\n\r\n");
        // All of it in the buffer at once, as one large read brings it.
        let mut buf = BytesMut::from(&head[..]);
        match parse_head(&mut buf) {
            Err(ReadError::Malformed(m)) => assert!(m.contains("longer"), "{m}"),
            other => panic!("{other:?}"),
        }
        // In the smaller reads a slice gives.
        assert!(malformed(&head).contains("longer"));
    }

    #[test]
    fn an_answer_cut_short_says_whether_any_of_it_arrived() {
        for (bytes, any) in [
            (&b""[..], false),
            (&b"HTTP/1.1 200"[..], true),
            (
                &b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel"[..],
                true,
            ),
            (
                &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"[..],
                true,
            ),
        ] {
            match read(bytes, Method::GET).0 {
                Err(ReadError::Closed {
                    any: a,
                    cause: None,
                }) => assert_eq!(a, any, "{bytes:?}"),
                other => panic!("{bytes:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn every_truncation_and_byte_flip_of_an_answer_is_handled_without_panic() {
        let good = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
        for cut in 0..good.len() {
            let _ = read(&good[..cut], Method::GET);
        }
        for i in 0..good.len() {
            for b in [0u8, b'\n', b'\r', b':', b' ', b'9', 0xff] {
                let mut v = good.to_vec();
                v[i] = b;
                let _ = read(&v, Method::GET);
            }
        }
    }
}
