//! What one client may hold of the embedded server: how long a request body may take
//! (a grace period, then a minimum average rate, as Apache's `mod_reqtimeout` does), how
//! many connections one address may keep open, and what a connection past the limits is
//! still answered (the counters, and a 503 for the rest).
//!
//! A request head is bounded by hyper's header timeout; the body is read here, whole and
//! bounded in size and time, before any handler sees it, so no handler waits on a client.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;

/// The slowest average a request body may arrive at, once the grace period is over
/// (bytes per second): a body of `n` bytes has `grace + n / MIN_BODY_RATE` in all.
pub(crate) const MIN_BODY_RATE: u64 = 1_000;

/// Connections past the limits that are still served (the counters and a 503), at once.
pub(crate) const OVERFLOW_CONNECTIONS: usize = 256;

/// How long a connection past the limits may take to send its request head.
pub(crate) const OVERFLOW_HEADER_TIMEOUT: Duration = Duration::from_secs(2);

/// How a request body is bounded.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyRules {
    /// Larger bodies are answered 413.
    pub max_body: usize,
    /// Time a body has before the minimum rate applies (the header timeout).
    pub grace: Duration,
}

impl BodyRules {
    /// When a body of which `received` bytes have arrived must be complete or cut off.
    fn deadline(&self, started: Instant, received: u64) -> Instant {
        // A day at most: the bound is against clients that stall, not a schedule.
        let earned = Duration::from_millis(received.saturating_mul(1_000) / MIN_BODY_RATE)
            .min(Duration::from_secs(86_400));
        started + self.grace.min(Duration::from_secs(86_400)) + earned
    }
}

/// The answer that ends a request the server will read no further, with the connection.
fn refuse(status: StatusCode, msg: &str) -> Response {
    let mut r = (status, format!("{msg}\n")).into_response();
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

/// Middleware: read the request body whole under [`BodyRules`] and hand the handler the
/// bytes. A body declared or found larger than the limit gets 413; one that falls behind
/// the minimum rate gets 408; one the client breaks off gets 400. Each closes the
/// connection, as the rest of the body would be read as the next request.
pub(crate) async fn read_body(
    State(rules): State<BodyRules>,
    req: Request,
    next: Next,
) -> Response {
    let (parts, body) = req.into_parts();
    if HttpBody::is_end_stream(&body) {
        return next.run(Request::from_parts(parts, body)).await;
    }
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > rules.max_body as u64) {
        return refuse(StatusCode::PAYLOAD_TOO_LARGE, "request body too large");
    }
    let bytes = match collect(body, rules).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

async fn collect(mut body: Body, rules: BodyRules) -> Result<Bytes, Response> {
    let started = Instant::now();
    let mut received: u64 = 0;
    let mut chunks: Vec<Bytes> = Vec::new();
    loop {
        let due = rules.deadline(started, received);
        let frame = match tokio::time::timeout_at(due.into(), body.frame()).await {
            Err(_) => {
                return Err(refuse(StatusCode::REQUEST_TIMEOUT, "request body too slow"));
            }
            Ok(None) => break,
            Ok(Some(Err(_))) => {
                return Err(refuse(StatusCode::BAD_REQUEST, "request body broken off"));
            }
            Ok(Some(Ok(f))) => f,
        };
        if let Ok(data) = frame.into_data() {
            received = received.saturating_add(data.len() as u64);
            if received > rules.max_body as u64 {
                return Err(refuse(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "request body too large",
                ));
            }
            chunks.push(data);
        }
    }
    Ok(match chunks.len() {
        0 => Bytes::new(),
        1 => chunks.pop().unwrap_or_default(),
        _ => {
            let mut all = Vec::with_capacity(received as usize);
            for c in &chunks {
                all.extend_from_slice(c);
            }
            Bytes::from(all)
        }
    })
}

/// Open connections per client address.
#[derive(Debug)]
pub(crate) struct Addresses {
    open: Mutex<HashMap<IpAddr, usize>>,
    per_address: usize,
}

/// One connection's place in [`Addresses`], given back when dropped.
pub(crate) struct Ticket {
    table: Arc<Addresses>,
    ip: IpAddr,
}

impl Addresses {
    pub(crate) fn new(per_address: usize) -> Arc<Self> {
        Arc::new(Addresses {
            open: Mutex::new(HashMap::new()),
            per_address: per_address.max(1),
        })
    }

    /// A place for one more connection from `ip`, or `None` when it has its share.
    pub(crate) fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<Ticket> {
        let mut open = self.open.lock().ok()?;
        let n = open.entry(ip).or_insert(0);
        if *n >= self.per_address {
            return None;
        }
        *n += 1;
        Some(Ticket {
            table: self.clone(),
            ip,
        })
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let Ok(mut open) = self.table.open.lock()
            && let Some(n) = open.get_mut(&self.ip)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// What a connection past the limits gets for anything but the counters.
pub(crate) async fn busy() -> Response {
    let mut r = refuse(StatusCode::SERVICE_UNAVAILABLE, "server busy");
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_earns_time_at_the_minimum_rate_after_the_grace() {
        let r = BodyRules {
            max_body: 1 << 20,
            grace: Duration::from_secs(10),
        };
        let t = Instant::now();
        assert_eq!(r.deadline(t, 0), t + Duration::from_secs(10));
        assert_eq!(r.deadline(t, 5_000), t + Duration::from_secs(15));
        // No overflow however much is claimed.
        assert!(r.deadline(t, u64::MAX) > t);
    }

    #[test]
    fn an_address_gets_its_share_and_no_more() {
        let a = Addresses::new(2);
        let ip: IpAddr = [127, 0, 0, 1].into();
        let other: IpAddr = [127, 0, 0, 2].into();
        let t1 = a.admit(ip).unwrap();
        let _t2 = a.admit(ip).unwrap();
        assert!(a.admit(ip).is_none());
        let t3 = a.admit(other).unwrap();
        drop(t1);
        let _t4 = a.admit(ip).unwrap();
        assert!(a.admit(ip).is_none());
        // An address with nothing open is forgotten.
        drop(t3);
        assert_eq!(a.open.lock().unwrap().len(), 1);
    }
}
