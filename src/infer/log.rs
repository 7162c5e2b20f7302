//! Reading access logs: Common and Combined Log Format (Apache, nginx), with a response
//! time at the end where the log has one, and JSON lines. One line becomes one [`Entry`]
//! or one counted [`Refusal`]; nothing in a line can make the reader do more than look at
//! at most [`MAX_LINE`] bytes of it.

use std::borrow::Cow;
use std::io::BufRead;

/// The longest line read; the rest of a longer one is skipped and the line refused.
pub(crate) const MAX_LINE: usize = 64 << 10;

/// One request, as the log tells it. A field is borrowed from the line where the line
/// holds it as it is (valid UTF-8, no escape undone): a log of a million lines is read
/// without a million times five strings.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry<'a> {
    /// When the request arrived, in microseconds since the Unix epoch.
    pub at_us: i64,
    pub host: Cow<'a, str>,
    /// The authenticated user, when the log names one.
    pub user: Option<Cow<'a, str>>,
    /// A session cookie or id, when the log has one (JSON lines only).
    pub cookie: Option<Cow<'a, str>>,
    pub method: Cow<'a, str>,
    /// The request target: path and query, as sent.
    pub target: Cow<'a, str>,
    pub status: u16,
    pub bytes: Option<u64>,
    pub agent: Option<Cow<'a, str>>,
    /// How long the server took, when the log says (`%D`, `$request_time`).
    pub took_us: Option<u64>,
}

impl Entry<'_> {
    /// When the answer was done: arrival plus the time taken, when known.
    pub(crate) fn done_us(&self) -> i64 {
        self.at_us
            .saturating_add(self.took_us.map_or(0, |t| t.min(i64::MAX as u64) as i64))
    }
}

/// The formats [`parse`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Common or Combined Log Format, optionally followed by a response time.
    Clf,
    /// One JSON object per line.
    Json,
}

impl Format {
    /// The format of a log whose first non-empty line is `line`.
    pub fn detect(line: &[u8]) -> Format {
        if line.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
            Format::Json
        } else {
            Format::Clf
        }
    }

    /// As a file's counts name it.
    pub fn name(self) -> &'static str {
        match self {
            Format::Clf => "common/combined",
            Format::Json => "json lines",
        }
    }
}

/// Why a line was not read as a request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refusal {
    /// 1-based column where the line stopped making sense.
    pub column: usize,
    pub why: String,
}

fn refuse<T>(column: usize, why: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal {
        column,
        why: why.into(),
    })
}

/// Read one line (without its newline) in `format`.
pub(crate) fn parse(line: &[u8], format: Format) -> Result<Entry<'_>, Refusal> {
    match format {
        Format::Clf => clf(line),
        Format::Json => json(line),
    }
}

/// A cursor over one line, which knows its column for messages.
struct Cursor<'a> {
    s: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn column(&self) -> usize {
        self.at + 1
    }

    fn skip_spaces(&mut self) {
        while self.s.get(self.at) == Some(&b' ') {
            self.at += 1;
        }
    }

    /// The next space-separated field.
    fn field(&mut self, what: &str) -> Result<&'a [u8], Refusal> {
        self.skip_spaces();
        let start = self.at;
        while self.at < self.s.len() && self.s[self.at] != b' ' {
            self.at += 1;
        }
        if start == self.at {
            return refuse(start + 1, format!("{what} missing"));
        }
        Ok(&self.s[start..self.at])
    }

    /// `[...]`.
    fn bracketed(&mut self, what: &str) -> Result<&'a [u8], Refusal> {
        self.skip_spaces();
        if self.s.get(self.at) != Some(&b'[') {
            return refuse(self.column(), format!("{what}: expected `[`"));
        }
        let start = self.at + 1;
        match self.s[start..].iter().position(|&b| b == b']') {
            Some(n) => {
                self.at = start + n + 1;
                Ok(&self.s[start..start + n])
            }
            None => refuse(self.column(), format!("{what}: no closing `]`")),
        }
    }

    /// `"..."`, with `\"` and `\\` escapes (as Apache and nginx write them) undone; a
    /// backslash before anything else is kept. The bytes between escapes are copied as
    /// runs, and a field with no escape (nearly all) is borrowed from the line.
    fn quoted(&mut self, what: &str) -> Result<Cow<'a, str>, Refusal> {
        self.skip_spaces();
        if self.s.get(self.at) != Some(&b'"') {
            return refuse(self.column(), format!("{what}: expected `\"`"));
        }
        let open = self.at;
        self.at += 1;
        // What escapes left behind, and where the run not yet copied starts.
        let mut out = Vec::new();
        let mut run = self.at;
        while let Some(n) = self.s[self.at..]
            .iter()
            .position(|&b| b == b'"' || b == b'\\')
        {
            let at = self.at + n;
            if self.s[at] == b'"' {
                self.at = at + 1;
                if out.is_empty() {
                    return Ok(text(&self.s[run..at]));
                }
                out.extend_from_slice(&self.s[run..at]);
                return Ok(Cow::Owned(String::from_utf8_lossy(&out).into_owned()));
            }
            match self.s.get(at + 1) {
                Some(&e @ (b'"' | b'\\')) => {
                    out.extend_from_slice(&self.s[run..at]);
                    out.push(e);
                    self.at = at + 2;
                    run = self.at;
                }
                // Kept in the run, and the byte after it read as any other.
                _ => self.at = at + 1,
            }
        }
        refuse(open + 1, format!("{what}: no closing `\"`"))
    }
}

fn text(b: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(b)
}

fn dash<S: AsRef<str>>(s: S) -> Option<S> {
    let t = s.as_ref();
    (t != "-" && !t.is_empty()).then_some(s)
}

/// `METHOD TARGET ...` as its first two words (the target empty after two spaces),
/// borrowed from the line where the request is.
fn method_and_target<'a>(request: &Cow<'a, str>) -> Option<(Cow<'a, str>, Cow<'a, str>)> {
    let (method, rest) = request.split_once(' ')?;
    let target = rest.split(' ').next().unwrap_or("");
    let at = method.len() + 1;
    Some((
        part(request, 0..method.len()),
        part(request, at..at + target.len()),
    ))
}

/// `range` of `s`, borrowed for as long as `s` borrows.
fn part<'a>(s: &Cow<'a, str>, range: std::ops::Range<usize>) -> Cow<'a, str> {
    match s {
        Cow::Borrowed(b) => {
            let b: &'a str = b;
            Cow::Borrowed(&b[range])
        }
        Cow::Owned(o) => Cow::Owned(o[range].to_string()),
    }
}

/// `host ident user [time] "request" status bytes ["referer" "agent"] [took]`.
fn clf(line: &[u8]) -> Result<Entry<'_>, Refusal> {
    let mut c = Cursor { s: line, at: 0 };
    let host = text(c.field("host")?);
    c.field("ident")?;
    let user = dash(text(c.field("user")?));
    let time = c.bracketed("time")?;
    let time_col = c.at - time.len();
    let at_us = clf_time(time).map_err(|why| Refusal {
        column: time_col,
        why,
    })?;
    let request_col = c.column() + 1;
    let request = c.quoted("request")?;
    let Some((method, target)) = method_and_target(&request) else {
        return refuse(
            request_col,
            format!("request `{request}` is not METHOD TARGET"),
        );
    };
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase() || b == b'-') {
        return refuse(request_col, format!("`{method}` is not a method"));
    }
    let status = c.field("status")?;
    let status_col = c.column() - status.len();
    let status = text(status);
    let status: u16 = match status.parse() {
        Ok(s) if (100..=999).contains(&s) => s,
        _ => return refuse(status_col, format!("`{status}` is not a status")),
    };
    let bytes = match c.field("bytes")? {
        b"-" => None,
        b => Some(text(b).parse().map_err(|_| Refusal {
            column: c.column() - b.len(),
            why: format!("`{}` is not a byte count", text(b)),
        })?),
    };
    let mut agent = None;
    c.skip_spaces();
    if c.s.get(c.at) == Some(&b'"') {
        c.quoted("referer")?;
        agent = dash(c.quoted("user agent")?);
    }
    // What follows is a response time: a decimal is seconds (nginx's $request_time,
    // Apache's %T with a fraction), a whole number microseconds (Apache's %D). Traefik
    // ends its line with `<count> "<router>" "<url>" <took>ms`: a last field in ms wins.
    let rest = text(&c.s[c.at..]);
    let took_us = rest
        .split_whitespace()
        .next_back()
        .and_then(|last| last.strip_suffix("ms"))
        .and_then(|ms| ms.parse::<f64>().ok())
        .filter(|ms| ms.is_finite() && (0.0..1e12).contains(ms))
        .map(|ms| (ms * 1e3).round() as u64)
        .or_else(|| rest.split_whitespace().next().and_then(response_time));
    Ok(Entry {
        at_us,
        host,
        user,
        cookie: None,
        method,
        target,
        status,
        bytes,
        agent,
        took_us,
    })
}

fn response_time(f: &str) -> Option<u64> {
    if f.contains('.') {
        let s: f64 = f.parse().ok()?;
        (s.is_finite() && (0.0..1e9).contains(&s)).then(|| (s * 1e6).round() as u64)
    } else {
        f.parse().ok()
    }
}

const MONTHS: [&[u8]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

/// `02/Dec/2026:00:33:02[.ffffff] +0000` as microseconds since the epoch.
fn clf_time(t: &[u8]) -> Result<i64, String> {
    let bad = || {
        format!(
            "`{}` is not a time like 10/Oct/2000:13:55:36 -0700",
            text(t)
        )
    };
    let num = |r: std::ops::Range<usize>| -> Result<i64, String> {
        let s = t.get(r).ok_or_else(bad)?;
        if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
            return Err(bad());
        }
        Ok(s.iter().fold(0i64, |a, d| a * 10 + i64::from(d - b'0')))
    };
    if t.len() < 26 || t[2] != b'/' || t[6] != b'/' || t[11] != b':' {
        return Err(bad());
    }
    let day = num(0..2)?;
    let month = MONTHS
        .iter()
        .position(|m| t.get(3..6) == Some(*m))
        .ok_or_else(bad)? as i64
        + 1;
    let year = num(7..11)?;
    let (h, m, s) = (num(12..14)?, num(15..17)?, num(18..20)?);
    let mut at = 20;
    let mut frac_us = 0i64;
    if t.get(at) == Some(&b'.') {
        let start = at + 1;
        let mut end = start;
        while t.get(end).is_some_and(u8::is_ascii_digit) {
            end += 1;
        }
        let digits = &t[start..end];
        if digits.is_empty() {
            return Err(bad());
        }
        for (i, d) in digits.iter().take(6).enumerate() {
            frac_us += i64::from(d - b'0') * 10i64.pow(5 - i as u32);
        }
        at = end;
    }
    if t.get(at) != Some(&b' ') || t.len() != at + 6 {
        return Err(bad());
    }
    let sign = match t[at + 1] {
        b'+' => 1,
        b'-' => -1,
        _ => return Err(bad()),
    };
    let (zh, zm) = (num(at + 2..at + 4)?, num(at + 4..at + 6)?);
    if !(1..=31).contains(&day) || h > 23 || m > 59 || s > 60 || zh > 23 || zm > 59 {
        return Err(bad());
    }
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + h * 3600 + m * 60 + s - sign * (zh * 3600 + zm * 60);
    Ok(secs * 1_000_000 + frac_us)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// One JSON object per line, with the field names nginx, Caddy, Traefik and common
/// logging set-ups use.
/// A JSON line's fields are the parsed object's, so owned.
fn json(line: &[u8]) -> Result<Entry<'static>, Refusal> {
    let v: serde_json::Value = serde_json::from_slice(line).map_err(|e| Refusal {
        column: e.column().max(1),
        why: format!("not JSON: {e}"),
    })?;
    let f = Fields::of(v.as_object().ok_or_else(|| Refusal {
        column: 1,
        why: "not a JSON object".into(),
    })?);
    let (logged_us, at_end) = f.time_us()?;
    let took_us = f.took_us();
    // A time written when the answer had gone (nginx's $msec, Caddy's ts) less the
    // response time is when the request came.
    let at_us = match (at_end, took_us) {
        (true, Some(t)) => logged_us.saturating_sub(i64::try_from(t).unwrap_or(i64::MAX)),
        _ => logged_us,
    };
    let (mut method, mut target) = (
        f.string(&["method", "request_method", "RequestMethod"]),
        f.string(&["uri", "request_uri", "RequestPath", "path", "url"]),
    );
    if let (None, Some(r)) = (&method, f.string(&["request"])) {
        let mut p = r.split(' ');
        method = p.next().map(str::to_string);
        target = target.or_else(|| p.next().map(str::to_string));
    }
    let (Some(method), Some(target)) = (method, target) else {
        return refuse(1, "no method and path (method, uri or request)");
    };
    let status = f
        .number(&["status", "status_code", "DownstreamStatus"])
        .filter(|s| (100.0..=999.0).contains(s))
        .ok_or_else(|| Refusal {
            column: 1,
            why: "no status".into(),
        })? as u16;
    Ok(Entry {
        at_us,
        host: f
            .string(&[
                "remote_addr",
                "remote_ip",
                "ClientHost",
                "client_ip",
                "ip",
                "client",
                "host",
            ])
            .map_or(Cow::Borrowed("-"), Cow::Owned),
        user: f
            .string(&[
                "remote_user",
                "user",
                "user_id",
                "username",
                "ClientUsername",
            ])
            .map(Cow::Owned),
        cookie: f
            .string(&["session", "session_id", "sid", "cookie"])
            .map(Cow::Owned),
        method: Cow::Owned(method),
        target: Cow::Owned(target),
        status,
        bytes: f
            .number(&[
                "body_bytes_sent",
                "bytes",
                "size",
                "bytes_sent",
                "DownstreamContentSize",
            ])
            .filter(|b| b.is_finite() && *b >= 0.0)
            .map(|b| b as u64),
        agent: f
            .string(&[
                "http_user_agent",
                "user_agent",
                "agent",
                "User-Agent",
                "request_User-Agent",
            ])
            .map(Cow::Owned),
        took_us: f.took_us(),
    })
}

/// The objects among a JSON object's values.
fn inner_objects(
    o: &serde_json::Map<String, serde_json::Value>,
) -> Vec<&serde_json::Map<String, serde_json::Value>> {
    o.values().filter_map(|x| x.as_object()).collect()
}

/// Fields that hold a request's time as text (RFC 3339 or a log time), first found wins.
const TEXT_TIMES: [&str; 5] = [
    "StartUTC",
    "time",
    "timestamp",
    "@timestamp",
    "time_iso8601",
];

/// Fields that hold a request's time as seconds since the epoch.
const NUMBER_TIMES: [&str; 4] = ["msec", "ts", "time", "timestamp"];

/// An RFC 3339 or log time as µs since the epoch.
fn parse_text_time(t: &str) -> Result<i64, Refusal> {
    chrono::DateTime::parse_from_rfc3339(t)
        .map(|d| d.timestamp_micros())
        .or_else(|_| clf_time(t.as_bytes()))
        .map_err(|_| Refusal {
            column: 1,
            why: format!("time `{t}` is neither RFC 3339 nor a log time"),
        })
}

/// A JSON log line's object, whose fields are found by any of their usual names: in the
/// object and in the objects nested in it two levels deep (Caddy's `request: {method, uri,
/// remote_ip, headers: {User-Agent}}`), listed once per line, outermost first.
struct Fields<'a>(Vec<&'a serde_json::Map<String, serde_json::Value>>);

impl<'a> Fields<'a> {
    fn of(top: &'a serde_json::Map<String, serde_json::Value>) -> Fields<'a> {
        let first = inner_objects(top);
        let second: Vec<_> = first.iter().flat_map(|o| inner_objects(o)).collect();
        Fields(std::iter::once(top).chain(first).chain(second).collect())
    }

    /// The first of `names` present at any level, each looked for outermost first.
    fn get(&self, names: &[&str]) -> Option<&'a serde_json::Value> {
        names
            .iter()
            .find_map(|n| self.0.iter().find_map(|o| o.get(*n)))
    }

    /// A field as text: a string (`-` is none), a number, or an array's first string.
    fn string(&self, names: &[&str]) -> Option<String> {
        self.get(names).and_then(|v| match v {
            serde_json::Value::String(s) => dash(s.clone()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            serde_json::Value::Array(a) => a.first().and_then(|x| x.as_str()).map(str::to_string),
            _ => None,
        })
    }

    /// A field as a number: a number, or a string that reads as one.
    fn number(&self, names: &[&str]) -> Option<f64> {
        self.get(names).and_then(|v| match v {
            serde_json::Value::Number(n) => n.as_f64(),
            serde_json::Value::String(s) => s.parse().ok(),
            _ => None,
        })
    }

    /// When the request came, µs since the epoch: an RFC 3339 or log time, or seconds;
    /// and whether that time is the line's writing, after the answer (nginx's `msec`,
    /// Caddy's `ts`), rather than the request's arrival. A line may carry both (nginx's `$time_iso8601` beside `$msec`): the one whose clock
    /// has a fraction of a second wins, the text on a tie. Traefik's `StartUTC` comes
    /// before its `time`, which is when the line was written, not when the request came.
    fn time_us(&self) -> Result<(i64, bool), Refusal> {
        let text = self
            .string(&TEXT_TIMES)
            .filter(|t| t.parse::<f64>().is_err());
        let number = NUMBER_TIMES.iter().find_map(|&name| {
            let at_end = matches!(name, "msec" | "ts");
            self.get(&[name]).and_then(|v| match v {
                serde_json::Value::Number(n) => n.as_f64().map(|s| (s, n.is_f64(), at_end)),
                serde_json::Value::String(s) => {
                    s.parse().ok().map(|n| (n, s.contains('.'), at_end))
                }
                _ => None,
            })
        });
        let text_is_finer = |t: &str| t.contains(['.', ',']);
        match (text, number) {
            (Some(t), Some((_, false, _))) | (Some(t), None) => Ok((parse_text_time(&t)?, false)),
            (Some(t), Some(_)) if text_is_finer(&t) => Ok((parse_text_time(&t)?, false)),
            (_, Some((s, _, at_end))) if s.is_finite() && (0.0..1e11).contains(&s) => {
                Ok(((s * 1e6).round() as i64, at_end))
            }
            (_, Some((s, ..))) => refuse(1, format!("time {s} is not seconds since the epoch")),
            (None, None) => refuse(1, "no time (time, timestamp, @timestamp, msec)"),
        }
    }

    /// How long the server took, µs: in µs, ms or seconds, whichever the line gives.
    fn took_us(&self) -> Option<u64> {
        if let Some(us) = self.number(&["duration_us"]) {
            Some(us)
        } else if let Some(ns) = self.number(&["Duration"]) {
            Some(ns / 1e3)
        } else if let Some(ms) = self.number(&["duration_ms", "elapsed_ms"]) {
            Some(ms * 1e3)
        } else {
            self.number(&["request_time", "duration", "upstream_response_time"])
                .map(|s| s * 1e6)
        }
        .filter(|t| t.is_finite() && (0.0..1e15).contains(t))
        .map(|t| t.round() as u64)
    }
}

/// What reading one line gave.
pub(crate) enum Line {
    Text(Vec<u8>),
    /// A line longer than [`MAX_LINE`]: its start, the rest skipped.
    TooLong,
    End,
}

/// The next line of `r` (its `\n` and a `\r` before it removed), reading at most
/// [`MAX_LINE`] bytes of it into memory.
pub(crate) fn next_line(r: &mut impl BufRead, buf: &mut Vec<u8>) -> std::io::Result<Line> {
    buf.clear();
    let mut too_long = false;
    let mut any = false;
    loop {
        let chunk = r.fill_buf()?;
        if chunk.is_empty() {
            break;
        }
        any = true;
        let (take, end) = match chunk.iter().position(|&b| b == b'\n') {
            Some(n) => (n, true),
            None => (chunk.len(), false),
        };
        if !too_long {
            let room = MAX_LINE.saturating_sub(buf.len());
            if take > room {
                too_long = true;
            } else {
                buf.extend_from_slice(&chunk[..take]);
            }
        }
        r.consume(take + usize::from(end));
        if end {
            break;
        }
    }
    if !any {
        return Ok(Line::End);
    }
    if too_long {
        return Ok(Line::TooLong);
    }
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    Ok(Line::Text(std::mem::take(buf)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A quoted field read a byte at a time, as the reader first did: the reference.
    fn quoted_bytewise(s: &[u8]) -> Option<(String, usize)> {
        let mut at = s.iter().position(|&b| b == b'"')? + 1;
        let mut out = Vec::new();
        while let Some(&b) = s.get(at) {
            at += 1;
            match b {
                b'"' => return Some((String::from_utf8_lossy(&out).into_owned(), at)),
                b'\\' => match s.get(at) {
                    Some(&e @ (b'"' | b'\\')) => {
                        out.push(e);
                        at += 1;
                    }
                    _ => out.push(b'\\'),
                },
                _ => out.push(b),
            }
        }
        None
    }

    /// Every string of up to six bytes over quotes, backslashes, a letter, a space and
    /// a byte that is not UTF-8 reads as the bytewise reader reads it, and ends where it
    /// ends.
    #[test]
    fn a_quoted_field_reads_as_it_did_a_byte_at_a_time() {
        let alphabet = [b'"', b'\\', b'a', b' ', 0xff];
        let mut checked = 0;
        for len in 0..=6u32 {
            for mut k in 0..alphabet.len().pow(len) {
                let mut s = vec![b'"'];
                for _ in 0..len {
                    s.push(alphabet[k % alphabet.len()]);
                    k /= alphabet.len();
                }
                let mut c = Cursor { s: &s, at: 0 };
                let got = c.quoted("f").ok().map(|v| (v.into_owned(), c.at));
                assert_eq!(
                    got,
                    quoted_bytewise(&s),
                    "{:?}",
                    String::from_utf8_lossy(&s)
                );
                checked += 1;
            }
        }
        assert!(checked > 10_000, "{checked}");
    }

    fn ok(l: &str) -> Entry<'_> {
        parse(l.as_bytes(), Format::detect(l.as_bytes())).unwrap_or_else(|e| panic!("{l}: {e:?}"))
    }

    #[test]
    fn apache_nginx_and_loadmix_lines_are_read() {
        let e = ok(
            r#"192.0.2.7 - alice [10/Oct/2000:13:55:36 -0700] "GET /a?b=1 HTTP/1.0" 200 2326 "http://x/" "Mozilla/4.08 \"q\"" 1234"#,
        );
        assert_eq!(e.at_us, 971_211_336_000_000);
        assert_eq!((&*e.method, &*e.target, e.status), ("GET", "/a?b=1", 200));
        assert_eq!(e.user.as_deref(), Some("alice"));
        assert_eq!(e.agent.as_deref(), Some("Mozilla/4.08 \"q\""));
        assert_eq!((e.bytes, e.took_us), (Some(2326), Some(1234)));
        // nginx with $request_time; common format; IPv6; a fraction of a second.
        let n = ok(
            r#"::1 - - [02/Dec/2026:00:33:02.250000 +0000] "PROPFIND /dav/ HTTP/1.1" 207 - "-" "-" 0.003"#,
        );
        assert_eq!((&*n.host, n.user, n.bytes), ("::1", None, None));
        assert_eq!(n.took_us, Some(3000));
        assert_eq!(n.at_us % 1_000_000, 250_000);
        let c = ok(r#"h - - [02/Dec/2026:00:33:02 +0100] "DELETE /x HTTP/1.1" 204 0"#);
        assert_eq!((c.agent, c.took_us), (None, None));
        // Traefik's common format: a request count, router and URL, then the time in ms.
        let t = ok(
            r#"10.0.0.9 - - [02/Dec/2026:00:33:02 +0000] "GET /x HTTP/1.1" 200 5 "-" "k6" 4711 "r@file" "http://127.0.0.1:8080" 12ms"#,
        );
        assert_eq!((t.agent.as_deref(), t.took_us), (Some("k6"), Some(12_000)));
    }

    #[test]
    fn json_lines_are_read_with_the_usual_field_names() {
        let e = ok(
            r#"{"time":"2026-12-02T00:33:02.5Z","remote_addr":"10.0.0.1","request":"GET /x?y HTTP/1.1","status":"404","body_bytes_sent":12,"request_time":0.012,"http_user_agent":"k"}"#,
        );
        assert_eq!((&*e.method, &*e.target, e.status), ("GET", "/x?y", 404));
        assert_eq!((e.took_us, e.bytes), (Some(12_000), Some(12)));
        assert_eq!(e.at_us % 1_000_000, 500_000);
        let caddy = ok(
            r#"{"ts":1764635582.25,"request":{"method":"PUT","uri":"/a","remote_ip":"::1"},"status":201,"duration":0.5}"#,
        );
        assert_eq!((&*caddy.method, &*caddy.host), ("PUT", "::1"));
        assert_eq!(caddy.took_us, Some(500_000));
        // Caddy writes `ts` when the answer has gone: the request came `duration` before.
        assert_eq!(caddy.at_us, 1_764_635_581_750_000);
        let caddy = ok(
            r#"{"ts":1764635582.25,"request":{"method":"GET","uri":"/a","headers":{"User-Agent":["ua/1"]}},"user_id":"bob","size":7,"status":200}"#,
        );
        assert_eq!(
            (caddy.agent.as_deref(), caddy.user.as_deref()),
            (Some("ua/1"), Some("bob"))
        );
        assert_eq!(caddy.bytes, Some(7));
    }

    #[test]
    fn a_json_line_with_two_clocks_is_timed_by_the_finer() {
        // nginx's $time_iso8601 counts whole seconds, $msec milliseconds.
        let n = ok(
            r#"{"time_iso8601":"2025-12-02T00:33:02+00:00","msec":"1764635582.250","request":"GET / HTTP/1.1","status":200}"#,
        );
        assert_eq!(n.at_us, 1_764_635_582_250_000);
        let n = ok(
            r#"{"time":"2025-12-02T00:33:02+00:00","msec":1764635582.25,"request":"GET / HTTP/1.1","status":200}"#,
        );
        assert_eq!(n.at_us, 1_764_635_582_250_000);
        // nginx writes $msec when the answer has gone: less $request_time is the arrival.
        let n = ok(
            r#"{"msec":1764635582.250,"request_time":0.040,"request":"GET / HTTP/1.1","status":200}"#,
        );
        assert_eq!((n.at_us, n.took_us), (1_764_635_582_210_000, Some(40_000)));
        // A text time with a fraction beats whole seconds; on a tie the text wins.
        let t = ok(
            r#"{"time":"2025-12-02T00:33:02.750Z","ts":1764635582,"request":"GET / HTTP/1.1","status":200}"#,
        );
        assert_eq!(t.at_us, 1_764_635_582_750_000);
        let t = ok(
            r#"{"time":"2025-12-02T00:33:03Z","ts":1764635582,"request":"GET / HTTP/1.1","status":200}"#,
        );
        assert_eq!(t.at_us, 1_764_635_583_000_000);
    }

    #[test]
    fn traefik_json_lines_are_read() {
        let t = ok(
            r#"{"ClientHost":"10.0.0.9","ClientUsername":"-","DownstreamContentSize":42,"DownstreamStatus":207,"Duration":3500000,"RequestMethod":"PROPFIND","RequestPath":"/dav/u/","StartUTC":"2025-12-02T00:33:02.123456789Z","request_User-Agent":"DAVx5","time":"2025-12-02T00:33:02Z"}"#,
        );
        assert_eq!(
            (&*t.method, &*t.target, t.status, &*t.host),
            ("PROPFIND", "/dav/u/", 207, "10.0.0.9")
        );
        assert_eq!((t.user, t.agent.as_deref()), (None, Some("DAVx5")));
        assert_eq!((t.bytes, t.took_us), (Some(42), Some(3_500)));
        assert_eq!(t.at_us, 1_764_635_582_123_456);
    }

    #[test]
    fn broken_lines_are_refused_saying_where() {
        for (l, col, says) in [
            (
                r#"h - - [02/Dec/2026:00:33:02 +0000] "GET /x HTTP/1.1" 2000 1"#,
                54,
                "status",
            ),
            (
                r#"h - - [02/Foo/2026:00:33:02 +0000] "GET / HTTP/1.1" 200 1"#,
                8,
                "time",
            ),
            (
                r#"h - - [02/Dec/2026:00:33:02 +0000] "GET /x HTTP/1.1 200 1"#,
                36,
                "closing",
            ),
            (
                r#"h - - [02/Dec/2026:00:33:02 +0000] "\x16\x03" 400 0"#,
                36,
                "METHOD",
            ),
            (r#"h - -"#, 6, "time"),
            (
                r#"{"time": 1e300, "request": "GET / HTTP/1.1", "status": 200}"#,
                1,
                "epoch",
            ),
            (r#"{"time": "#, 9, "JSON"),
        ] {
            let e = parse(l.as_bytes(), Format::detect(l.as_bytes())).unwrap_err();
            assert_eq!(e.column, col, "{l}: {e:?}");
            assert!(e.why.contains(says), "{l}: {e:?}");
        }
    }

    #[test]
    fn lines_are_bounded_and_bytes_need_not_be_utf8() {
        let mut input = Vec::new();
        input.extend_from_slice(b"first\r\n");
        input.extend(std::iter::repeat_n(b'x', MAX_LINE + 10));
        input.extend_from_slice(
            b"\nh - \xff\xfe [02/Dec/2026:00:33:02 +0000] \"GET / HTTP/1.1\" 200 1\n",
        );
        let mut r = std::io::BufReader::with_capacity(100, &input[..]);
        let mut buf = Vec::new();
        assert!(matches!(next_line(&mut r, &mut buf).unwrap(), Line::Text(t) if t == b"first"));
        assert!(matches!(
            next_line(&mut r, &mut buf).unwrap(),
            Line::TooLong
        ));
        let Line::Text(t) = next_line(&mut r, &mut buf).unwrap() else {
            panic!()
        };
        assert_eq!(
            parse(&t, Format::Clf).unwrap().user.as_deref(),
            Some("\u{fffd}\u{fffd}")
        );
        assert!(matches!(next_line(&mut r, &mut buf).unwrap(), Line::End));
    }
}
