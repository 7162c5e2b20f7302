//! STOMP 1.2 frames (<https://stomp.github.io/stomp-specification-1.2.html>), written and
//! read by the broker client and the embedded broker alike.
//!
//! A frame is a command line, header lines `name:value`, a blank line, a body and a NUL.
//! Lines end in LF or CR LF; bare line ends between frames are heart-beats. Header names
//! and values are escaped (`\r`, `\n`, `\c` for `:`, `\\`) except in `CONNECT` and
//! `CONNECTED`; an unknown escape is an error. Of a repeated header the first counts. A
//! body is `content-length` bytes when that header is there, else everything up to the
//! first NUL.
//!
//! Everything a peer sends is hostile: [`Limits`] bounds the head (command and headers),
//! the number of headers, the body and `content-length` before any of it is buffered, and
//! [`decode`] never panics, whatever the bytes. It reads from a buffer the caller fills,
//! so a frame split over any number of reads decodes the same.

use bytes::{Buf, Bytes, BytesMut};

/// What a peer may send in one frame.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The command line and the header lines, line ends included.
    pub max_head: usize,
    /// Header lines in one frame.
    pub max_headers: usize,
    /// The body, with or without a `content-length`.
    pub max_body: usize,
}

impl Default for Limits {
    /// 64 KiB of head, 100 headers, 64 MiB of body: the largest message of the studies
    /// loadmix reproduces is 64 KiB, and a broker's headers are a few hundred bytes.
    fn default() -> Limits {
        Limits {
            max_head: 64 * 1024,
            max_headers: 100,
            max_body: 64 << 20,
        }
    }
}

/// A STOMP command, client's or server's. `Other` keeps a command this codec does not
/// know (a broker's extension), so it is counted in its own words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `CONNECT`.
    Connect,
    /// `STOMP` (CONNECT's 1.2 name).
    Stomp,
    /// `CONNECTED`.
    Connected,
    /// `SEND`.
    Send,
    /// `SUBSCRIBE`.
    Subscribe,
    /// `UNSUBSCRIBE`.
    Unsubscribe,
    /// `ACK`.
    Ack,
    /// `NACK`.
    Nack,
    /// `BEGIN`.
    Begin,
    /// `COMMIT`.
    Commit,
    /// `ABORT`.
    Abort,
    /// `DISCONNECT`.
    Disconnect,
    /// `MESSAGE`.
    Message,
    /// `RECEIPT`.
    Receipt,
    /// `ERROR`.
    Error,
    /// A command this codec does not know, as it came.
    Other(String),
}

impl Command {
    const KNOWN: [(Command, &'static str); 15] = [
        (Command::Connect, "CONNECT"),
        (Command::Stomp, "STOMP"),
        (Command::Connected, "CONNECTED"),
        (Command::Send, "SEND"),
        (Command::Subscribe, "SUBSCRIBE"),
        (Command::Unsubscribe, "UNSUBSCRIBE"),
        (Command::Ack, "ACK"),
        (Command::Nack, "NACK"),
        (Command::Begin, "BEGIN"),
        (Command::Commit, "COMMIT"),
        (Command::Abort, "ABORT"),
        (Command::Disconnect, "DISCONNECT"),
        (Command::Message, "MESSAGE"),
        (Command::Receipt, "RECEIPT"),
        (Command::Error, "ERROR"),
    ];

    /// The command as it is written on the wire.
    pub fn name(&self) -> &str {
        match self {
            Command::Other(s) => s,
            known => Self::KNOWN
                .iter()
                .find(|(c, _)| c == known)
                .map_or("?", |(_, n)| n),
        }
    }

    fn of(s: &str) -> Command {
        Self::KNOWN
            .iter()
            .find(|(_, n)| *n == s)
            .map_or_else(|| Command::Other(s.to_string()), |(c, _)| c.clone())
    }

    /// CONNECT and CONNECTED carry their headers unescaped (STOMP 1.2 §"Value Encoding"),
    /// for the sake of 1.0 peers.
    fn escapes(&self) -> bool {
        !matches!(self, Command::Connect | Command::Stomp | Command::Connected)
    }
}

/// One decoded frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// What the frame is.
    pub command: Command,
    /// In the order sent, repeats kept (the first is the one that counts).
    pub headers: Vec<(String, String)>,
    /// Its body (empty for most commands).
    pub body: Bytes,
}

impl Frame {
    /// A frame of `command` with no header and no body.
    pub fn new(command: Command) -> Frame {
        Frame {
            command,
            headers: Vec::new(),
            body: Bytes::new(),
        }
    }

    /// Add a header (builder style).
    pub fn header(mut self, name: &str, value: &str) -> Frame {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// The value of the first header called `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Append the frame's bytes to `out`: headers escaped as its command requires, and a
    /// `content-length` for any body (so a body may hold NULs). A `content-length` the
    /// caller gave is replaced by the true one.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.command.name().as_bytes());
        out.push(b'\n');
        let escape = self.command.escapes();
        for (n, v) in self.headers.iter().filter(|(n, _)| n != "content-length") {
            push_escaped(out, n, escape);
            out.push(b':');
            push_escaped(out, v, escape);
            out.push(b'\n');
        }
        if !self.body.is_empty() {
            out.extend_from_slice(format!("content-length:{}\n", self.body.len()).as_bytes());
        }
        out.push(b'\n');
        out.extend_from_slice(&self.body);
        out.push(0);
    }
}

fn push_escaped(out: &mut Vec<u8>, s: &str, escape: bool) {
    if !escape {
        // Unescaped frames cannot carry a line end or a ':' in a name; drop them rather
        // than send a frame that means something else.
        out.extend(s.bytes().filter(|b| !matches!(b, b'\r' | b'\n')));
        return;
    }
    for b in s.bytes() {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b':' => out.extend_from_slice(b"\\c"),
            _ => out.push(b),
        }
    }
}

/// Why the bytes are not a STOMP frame. The stream is out of step after any of these.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The head (command and headers) is longer than the limit.
    #[error("frame head longer than {0} bytes")]
    HeadTooLong(usize),
    /// More headers than the limit.
    #[error("more than {0} headers in one frame")]
    TooManyHeaders(usize),
    /// A body longer than the limit.
    #[error("body longer than {limit} bytes ({size})")]
    BodyTooLong {
        /// The length the frame gave, as written.
        size: String,
        /// The most this codec reads.
        limit: usize,
    },
    /// A `content-length` that is not a number.
    #[error("content-length '{0}' is not a number of bytes")]
    BadLength(String),
    /// An empty command line.
    #[error("the frame has no command")]
    NoCommand,
    /// A command that is not upper-case letters.
    #[error("command '{0}' is not upper-case letters")]
    BadCommand(String),
    /// A header line without a colon.
    #[error("header line '{0}' has no ':'")]
    NoColon(String),
    /// A header with an escape STOMP 1.2 does not define.
    #[error("header line '{0}' has an escape STOMP 1.2 does not define")]
    BadEscape(String),
    /// The head is not UTF-8.
    #[error("the frame's head is not UTF-8")]
    NotUtf8,
    /// No NUL after a body of the length the frame gave.
    #[error("the body of content-length {0} is not followed by a NUL")]
    NoNul(usize),
}

/// Take one frame from the front of `buf`: `Ok(None)` when it holds no whole frame yet
/// (read more and call again), heart-beats skipped. What is taken is removed from `buf`.
/// Each call searches `buf` from its start: a connection that reads into one buffer a
/// little at a time keeps a [`FrameBuffer`] instead.
pub fn decode(buf: &mut BytesMut, limits: &Limits) -> Result<Option<Frame>, FrameError> {
    Progress::default().decode(buf, limits)
}

/// A connection's incoming bytes, and how far the frame at their front has been read: a
/// frame that comes a few bytes at a time is searched and parsed once, not once per read
/// (which, for a 16 MiB body trickled in, would be quadratic).
#[derive(Default)]
pub struct FrameBuffer {
    bytes: BytesMut,
    progress: Progress,
}

impl FrameBuffer {
    /// An empty buffer with room for `n` bytes before it grows.
    pub fn with_capacity(n: usize) -> FrameBuffer {
        FrameBuffer {
            bytes: BytesMut::with_capacity(n),
            progress: Progress::default(),
        }
    }

    /// Bytes received and not yet taken as a frame.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Nothing received that is not yet a frame.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Where a read appends what came. Only appending keeps the buffer's progress true.
    pub fn tail(&mut self) -> &mut BytesMut {
        &mut self.bytes
    }

    /// The next whole frame, as [`decode`] takes it.
    pub fn decode(&mut self, limits: &Limits) -> Result<Option<Frame>, FrameError> {
        self.progress.decode(&mut self.bytes, limits)
    }
}

/// What is known of the frame at a buffer's front: its head once whole, and how many of
/// the buffer's bytes were searched without finding the end looked for (the blank line
/// after the head, or the NUL after a body of no stated length).
#[derive(Default)]
struct Progress {
    head: Option<Head>,
    searched: usize,
}

struct Head {
    command: Command,
    headers: Vec<(String, String)>,
    body_at: usize,
    length: Option<usize>,
}

impl Progress {
    fn decode(&mut self, buf: &mut BytesMut, limits: &Limits) -> Result<Option<Frame>, FrameError> {
        let head = match self.head.take() {
            Some(h) => h,
            None => {
                if self.searched == 0 {
                    // Heart-beats: bare line ends before a frame. A lone CR may be the
                    // first half of a CR LF; it is skipped with the rest once its LF
                    // comes, and a CR before anything else is not a command either.
                    let skip = buf
                        .iter()
                        .position(|b| !matches!(b, b'\n' | b'\r'))
                        .unwrap_or(buf.len());
                    buf.advance(skip);
                }
                let Some(at) = head_end(buf, limits.max_head, self.searched)? else {
                    self.searched = buf.len();
                    return Ok(None);
                };
                self.searched = at.body;
                parse_head(&buf[..at.head], at.body, limits)?
            }
        };
        let Some((body_len, frame_len)) = self.body_end(buf, &head, limits)? else {
            self.head = Some(head);
            return Ok(None);
        };
        self.searched = 0;
        let mut frame = buf.split_to(frame_len);
        frame.advance(head.body_at);
        frame.truncate(body_len);
        Ok(Some(Frame {
            command: head.command,
            headers: head.headers,
            body: frame.freeze(),
        }))
    }

    /// The body's length and the whole frame's, once the body and its NUL are in `buf`.
    fn body_end(
        &mut self,
        buf: &BytesMut,
        head: &Head,
        limits: &Limits,
    ) -> Result<Option<(usize, usize)>, FrameError> {
        let body_at = head.body_at;
        if let Some(n) = head.length {
            // The body and its NUL must both be here.
            let end = body_at
                .checked_add(n)
                .ok_or(FrameError::BadLength(n.to_string()))?;
            return match buf.get(end) {
                None => Ok(None),
                Some(0) => Ok(Some((n, end + 1))),
                Some(_) => Err(FrameError::NoNul(n)),
            };
        }
        let from = self.searched.max(body_at).min(buf.len());
        searching(buf.len() - from);
        match buf[from..].iter().position(|b| *b == 0) {
            Some(p) => Ok(Some((from + p - body_at, from + p + 1))),
            None if buf.len() - body_at > limits.max_body => Err(FrameError::BodyTooLong {
                size: format!("more than {}", limits.max_body),
                limit: limits.max_body,
            }),
            None => {
                self.searched = buf.len();
                Ok(None)
            }
        }
    }
}

// Counts the bytes searched for a frame's end, so that tests can hold the search to the
// bytes that came (a trickled frame must not cost a search of all it had so far).
#[cfg(test)]
thread_local! {
    static SEARCHED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

fn searching(bytes: usize) {
    #[cfg(test)]
    SEARCHED.with(|c| c.set(c.get() + bytes));
    let _ = bytes;
}

/// The command and headers of a whole head, checked and unescaped.
fn parse_head(head: &[u8], body_at: usize, limits: &Limits) -> Result<Head, FrameError> {
    let head = std::str::from_utf8(head).map_err(|_| FrameError::NotUtf8)?;
    let mut lines = head.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let command = lines
        .next()
        .filter(|c| !c.is_empty())
        .ok_or(FrameError::NoCommand)?;
    if !command.bytes().all(|b| b.is_ascii_uppercase() || b == b'_') {
        return Err(FrameError::BadCommand(shorten(command)));
    }
    let command = Command::of(command);
    let mut headers = Vec::new();
    for line in lines.filter(|l| !l.is_empty()) {
        if headers.len() >= limits.max_headers {
            return Err(FrameError::TooManyHeaders(limits.max_headers));
        }
        let (n, v) = line
            .split_once(':')
            .ok_or_else(|| FrameError::NoColon(shorten(line)))?;
        let unescape = |s: &str| match command.escapes() {
            true => unescaped(s).ok_or_else(|| FrameError::BadEscape(shorten(line))),
            false => Ok(s.to_string()),
        };
        headers.push((unescape(n)?, unescape(v)?));
    }
    let length = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .map(|(_, v)| body_length(v, limits.max_body))
        .transpose()?;
    Ok(Head {
        command,
        headers,
        body_at,
        length,
    })
}

/// Where the head ends: the head is `buf[..head]` (the command line and the header lines,
/// without the line end before the blank line) and the body starts at `body`. `None`
/// while the blank line has not come and the head is still within its bound.
struct HeadEnd {
    head: usize,
    body: usize,
}

/// The head's end, searched for from `searched` (what was searched before without
/// finding it, less the two bytes a blank line split over reads may have begun in).
fn head_end(buf: &[u8], max_head: usize, searched: usize) -> Result<Option<HeadEnd>, FrameError> {
    let window = &buf[..buf.len().min(max_head.saturating_add(3))];
    let mut i = searched.saturating_sub(2).min(window.len());
    searching(window.len() - i);
    while let Some(p) = window[i..].iter().position(|b| *b == b'\n') {
        let nl = i + p;
        // A blank line: "\n\n" or "\n\r\n" right after this line end.
        let body = match &window[nl + 1..] {
            [b'\n', ..] => Some(nl + 2),
            [b'\r', b'\n', ..] => Some(nl + 3),
            _ => None,
        };
        if let Some(body) = body {
            if nl > max_head {
                return Err(FrameError::HeadTooLong(max_head));
            }
            return Ok(Some(HeadEnd { head: nl, body }));
        }
        i = nl + 1;
    }
    if buf.len() > max_head {
        return Err(FrameError::HeadTooLong(max_head));
    }
    Ok(None)
}

fn body_length(v: &str, max: usize) -> Result<usize, FrameError> {
    let v = v.trim();
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return Err(FrameError::BadLength(shorten(v)));
    }
    match v.parse::<usize>() {
        Ok(n) if n <= max => Ok(n),
        _ => Err(FrameError::BodyTooLong {
            size: shorten(v),
            limit: max,
        }),
    }
}

/// A header name or value with its escapes undone; `None` for an escape STOMP 1.2 does
/// not define (a backslash before anything but r, n, c or a backslash, or at the end).
fn unescaped(s: &str) -> Option<String> {
    if !s.contains('\\') {
        return Some(s.to_string());
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(match chars.next()? {
            'r' => '\r',
            'n' => '\n',
            'c' => ':',
            '\\' => '\\',
            _ => return None,
        });
    }
    Some(out)
}

/// A peer's text in an error message: at most 60 characters of it.
fn shorten(s: &str) -> String {
    let mut t: String = s.chars().take(60).collect();
    if t.len() < s.len() {
        t.push('…');
    }
    t.escape_debug().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(bytes: &[u8]) -> Result<Option<Frame>, FrameError> {
        decode(&mut BytesMut::from(bytes), &Limits::default())
    }

    #[test]
    fn a_frame_written_reads_back_the_same_whatever_its_headers_hold() {
        let f = Frame {
            command: Command::Send,
            headers: vec![
                ("destination".into(), "/queue/a:b".into()),
                ("odd\\name".into(), "line\nbreak\r and \\ colon:".into()),
            ],
            body: Bytes::from_static(b"with\0nul"),
        };
        let mut out = Vec::new();
        f.encode(&mut out);
        let back = one(&out).unwrap().unwrap();
        assert_eq!(back.command, Command::Send);
        assert_eq!(back.get("destination"), Some("/queue/a:b"));
        assert_eq!(back.get("odd\\name"), Some("line\nbreak\r and \\ colon:"));
        assert_eq!(back.get("content-length"), Some("8"));
        assert_eq!(&back.body[..], b"with\0nul");
    }

    #[test]
    fn frames_split_anywhere_decode_the_same_and_heartbeats_are_skipped() {
        let mut wire = b"\n\r\n".to_vec();
        Frame::new(Command::Receipt)
            .header("receipt-id", "7")
            .encode(&mut wire);
        wire.extend_from_slice(b"\n");
        Frame::new(Command::Message)
            .header("destination", "/queue/q")
            .encode(&mut wire);
        // A body without content-length, ending at the first NUL, with CR LF line ends.
        wire.extend_from_slice(b"MESSAGE\r\nsubscription:0\r\n\r\nhello\0");
        for cut in 0..wire.len() {
            let mut buf = BytesMut::new();
            let mut got = Vec::new();
            for part in [&wire[..cut], &wire[cut..]] {
                buf.extend_from_slice(part);
                while let Some(f) = decode(&mut buf, &Limits::default()).unwrap() {
                    got.push(f);
                }
            }
            assert_eq!(got.len(), 3, "cut at {cut}");
            assert_eq!(got[0].get("receipt-id"), Some("7"));
            assert_eq!(got[1].command, Command::Message);
            assert_eq!(got[2].get("subscription"), Some("0"));
            assert_eq!(&got[2].body[..], b"hello");
        }
    }

    #[test]
    fn frames_fed_a_byte_at_a_time_into_a_frame_buffer_decode_the_same() {
        let mut wire = b"\n\r\n".to_vec();
        Frame::new(Command::Receipt)
            .header("receipt-id", "7")
            .encode(&mut wire);
        wire.extend_from_slice(b"\r\n");
        wire.extend_from_slice(b"MESSAGE\r\nsubscription:0\r\n\r\nhello\0\n");
        wire.extend_from_slice(b"SEND\ndestination:/queue/a\ncontent-length:3\n\na\0b\0");
        for step in [1, 2, 3, 5, 7] {
            let mut buf = FrameBuffer::with_capacity(4);
            let mut got = Vec::new();
            for part in wire.chunks(step) {
                buf.tail().extend_from_slice(part);
                while let Some(f) = buf.decode(&Limits::default()).unwrap() {
                    got.push(f);
                }
            }
            assert!(buf.is_empty(), "{step}: {} left", buf.len());
            let bodies: Vec<&[u8]> = got.iter().map(|f| &f.body[..]).collect();
            assert_eq!(bodies, [&b""[..], b"hello", b"a\0b"], "in steps of {step}");
            assert_eq!(got[0].get("receipt-id"), Some("7"));
            assert_eq!(got[1].get("subscription"), Some("0"));
        }
    }

    #[test]
    fn a_trickled_frame_is_searched_once_not_once_per_read() {
        // A head and a 1 MiB body of no stated length, 1 KiB a read: each byte is
        // searched about once, where searching from the start each time would search
        // half a gigabyte.
        let mut wire = b"SEND\ndestination:/queue/a\n".to_vec();
        wire.extend(std::iter::repeat_n(b"x:y\n", 90).flatten());
        wire.extend_from_slice(b"\n");
        wire.extend(std::iter::repeat_n(b'b', 1 << 20));
        wire.push(0);
        SEARCHED.with(|c| c.set(0));
        let mut buf = FrameBuffer::default();
        let mut got = None;
        for part in wire.chunks(1024) {
            buf.tail().extend_from_slice(part);
            if let Some(f) = buf.decode(&Limits::default()).unwrap() {
                got = Some(f);
            }
        }
        assert_eq!(got.map(|f| f.body.len()), Some(1 << 20));
        let searched = SEARCHED.with(|c| c.get());
        assert!(
            searched < 2 * wire.len(),
            "{searched} bytes searched for a frame of {}",
            wire.len()
        );
    }

    #[test]
    fn connect_headers_are_not_unescaped_and_the_first_of_a_repeat_counts() {
        let f = one(b"CONNECTED\nversion:1.2\nserver:x\\y\nversion:1.0\n\n\0")
            .unwrap()
            .unwrap();
        assert_eq!(f.get("server"), Some("x\\y"));
        assert_eq!(f.get("version"), Some("1.2"));
        assert_eq!(
            Command::Other("FOO".into()),
            one(b"FOO\n\n\0").unwrap().unwrap().command
        );
    }

    #[test]
    fn hostile_frames_are_refused_within_their_bounds() {
        let small = Limits {
            max_head: 64,
            max_headers: 3,
            max_body: 16,
        };
        let dec = |b: &[u8]| decode(&mut BytesMut::from(b), &small);
        assert!(matches!(
            dec(&[b'A'; 200]),
            Err(FrameError::HeadTooLong(64))
        ));
        assert!(matches!(
            dec(b"SEND\na:1\nb:2\nc:3\nd:4\n\n\0"),
            Err(FrameError::TooManyHeaders(3))
        ));
        assert!(matches!(
            dec(b"SEND\ncontent-length:99999999999999999999999\n\n"),
            Err(FrameError::BodyTooLong { .. })
        ));
        assert!(matches!(
            dec(b"SEND\ncontent-length:17\n\n"),
            Err(FrameError::BodyTooLong { .. })
        ));
        assert!(matches!(
            dec(b"SEND\ncontent-length:-1\n\n"),
            Err(FrameError::BadLength(_))
        ));
        assert!(matches!(
            dec(b"SEND\n\n01234567890123456789"),
            Err(FrameError::BodyTooLong { .. })
        ));
        assert!(matches!(
            dec(b"SEND\ncontent-length:2\n\nabc\0"),
            Err(FrameError::NoNul(2))
        ));
        assert!(matches!(dec(b"send\n\n\0"), Err(FrameError::BadCommand(_))));
        assert!(matches!(
            dec(b"SEND\nnocolon\n\n\0"),
            Err(FrameError::NoColon(_))
        ));
        assert!(matches!(
            dec(b"SEND\na:\\t\n\n\0"),
            Err(FrameError::BadEscape(_))
        ));
        assert!(matches!(
            dec(b"SEND\na:\\\n\n\0"),
            Err(FrameError::BadEscape(_))
        ));
        assert!(matches!(
            dec(b"SEND\na:\xff\n\n\0"),
            Err(FrameError::NotUtf8)
        ));
        // Incomplete, within bounds: wait for more.
        assert_eq!(dec(b"SEND\ncontent-length:3\n\nab").unwrap(), None);
        assert_eq!(dec(b"SEND\na:1").unwrap(), None);
    }
}
