//! The embedded server's access log (`serve --access-log FILE`): one line per answered
//! request in the Combined Log Format, with the time to the answer's head in microseconds
//! at the end (Apache's `%D`), so a run against the embedded server leaves the kind of log
//! a real server's operator has. Its time carries microseconds (Apache's
//! `%{%d/%b/%Y:%H:%M:%S}t.%{usec_frac}t %{%z}t`): think times of milliseconds are then
//! measurable from the log, which whole seconds would hide. The user is the Basic-auth name; what a client sends is
//! escaped before it is written, so no request can forge a line. Lines are buffered and
//! flushed once a second and when the server stops.

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, Method, StatusCode, Uri, Version, header};
use base64::Engine as _;

/// An open access log.
#[derive(Debug)]
pub struct AccessLog {
    out: Mutex<std::io::BufWriter<std::fs::File>>,
}

/// What a line says about its request, taken before the handler runs.
pub struct Seen {
    pub peer: SocketAddr,
    pub method: Method,
    pub uri: Uri,
    pub version: Version,
    pub user: Option<String>,
    pub referer: Option<String>,
    pub agent: Option<String>,
    pub at: chrono::DateTime<chrono::Local>,
    pub started: std::time::Instant,
}

impl AccessLog {
    /// Open (create or append to) the log at `path`.
    pub fn open(path: &Path) -> std::io::Result<Arc<AccessLog>> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Arc::new(AccessLog {
            out: Mutex::new(std::io::BufWriter::with_capacity(64 << 10, f)),
        }))
    }

    /// Write the line of one answered request.
    pub fn write(&self, seen: &Seen, status: StatusCode, bytes: Option<u64>) {
        let line = line(seen, status, bytes, seen.started.elapsed());
        if let Ok(mut out) = self.out.lock() {
            // A full disk loses log lines, never the server.
            let _ = out.write_all(line.as_bytes());
        }
    }

    /// Write out what is buffered: each second, and as the server stops.
    pub fn flush(&self) {
        if let Ok(mut out) = self.out.lock() {
            let _ = out.flush();
        }
    }

    /// Flush once a second until `stop`, and once more then.
    pub async fn flusher(self: Arc<AccessLog>, stop: tokio_util::sync::CancellationToken) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(1)) => self.flush(),
                _ = stop.cancelled() => break,
            }
        }
        self.flush();
    }
}

impl Seen {
    pub fn of(
        peer: SocketAddr,
        method: &Method,
        uri: &Uri,
        version: Version,
        headers: &HeaderMap,
    ) -> Seen {
        let text = |h: header::HeaderName| {
            headers
                .get(h)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        };
        Seen {
            peer,
            method: method.clone(),
            uri: uri.clone(),
            version,
            user: headers.get(header::AUTHORIZATION).and_then(basic_user),
            referer: text(header::REFERER),
            agent: text(header::USER_AGENT),
            at: chrono::Local::now(),
            started: std::time::Instant::now(),
        }
    }
}

/// The Basic-auth user name (never the password).
fn basic_user(v: &axum::http::HeaderValue) -> Option<String> {
    let s = v.to_str().ok()?;
    let (scheme, token) = s.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .ok()?;
    let text = String::from_utf8_lossy(&raw);
    Some(text.split_once(':').map_or(&*text, |(u, _)| u).to_string())
}

/// `host - user [time] "request" status bytes "referer" "agent" micros`.
fn line(s: &Seen, status: StatusCode, bytes: Option<u64>, took: Duration) -> String {
    let mut l = String::with_capacity(200);
    let version = match s.version {
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_2 => "HTTP/2.0",
        _ => "HTTP/1.1",
    };
    let _ = writeln!(
        l,
        "{} - {} [{}] \"{} {} {version}\" {} {} \"{}\" \"{}\" {}",
        s.peer.ip(),
        s.user.as_deref().map_or("-".into(), |u| escape(u, false)),
        s.at.format("%d/%b/%Y:%H:%M:%S%.6f %z"),
        s.method,
        escape(
            s.uri.path_and_query().map_or(s.uri.path(), |p| p.as_str()),
            false
        ),
        status.as_u16(),
        bytes.map_or("-".into(), |b| b.to_string()),
        s.referer.as_deref().map_or("-".into(), |r| escape(r, true)),
        s.agent.as_deref().map_or("-".into(), |a| escape(a, true)),
        took.as_micros()
    );
    l
}

/// A client's text made safe for one field of one line: quotes, backslashes, spaces
/// (outside quoted fields) and control bytes as `\xHH`, as Apache does.
fn escape(s: &str, quoted: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'"' | b'\\' => {
                out.push('\\');
                out.push(b as char);
            }
            b' ' if !quoted => out.push_str("\\x20"),
            0x20..=0x7e => out.push(b as char),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_combined_log_format_with_micros_and_nothing_forged() {
        let mut h = HeaderMap::new();
        // alice:secret
        h.insert(
            header::AUTHORIZATION,
            "Basic YWxpY2U6c2VjcmV0".parse().unwrap(),
        );
        h.insert(
            header::USER_AGENT,
            "ua \"x\"\n"
                .parse()
                .unwrap_or(axum::http::HeaderValue::from_static("ua \"x\"")),
        );
        let mut s = Seen::of(
            "[::1]:5000".parse().unwrap(),
            &Method::GET,
            &"/a%20b?q=1".parse().unwrap(),
            Version::HTTP_11,
            &h,
        );
        s.at = chrono::DateTime::parse_from_rfc3339("2026-12-01T10:00:00+01:00")
            .unwrap()
            .with_timezone(&chrono::Local);
        let l = line(&s, StatusCode::OK, Some(42), Duration::from_micros(1234));
        assert!(l.starts_with("::1 - alice [01/Dec/2026:"), "{l}");
        assert!(l.contains(":00:00.000000 "), "{l}");
        assert!(
            l.ends_with("] \"GET /a%20b?q=1 HTTP/1.1\" 200 42 \"-\" \"ua \\\"x\\\"\" 1234\n"),
            "{l}"
        );
        assert!(!l.contains("secret"));
        assert_eq!(l.matches('\n').count(), 1);
        assert_eq!(escape("a b\u{1}", false), "a\\x20b\\x01");
    }
}
