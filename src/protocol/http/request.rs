//! One request of an http user: its template rendered with the values it picks from its
//! pools and its captures, sent (with its authentication), what it remembers of the
//! answer, and a failure that names what it sent.

use std::collections::VecDeque;

use bytes::Bytes;
use hyper::header::HeaderValue;
use rand::RngExt;
use rand::rngs::Xoshiro256PlusPlus;

use super::HttpClass;
use super::prepare::{HeaderPart, PreparedBody, PreparedOp};
use crate::answer::Answer;
use crate::protocol::auth::Auth;
use crate::protocol::contract::Done;
use crate::protocol::session::send_authenticated;
use crate::protocol::{Outcome, VuIds};
use crate::transport::{Conn, ErrorClass, Request};
use crate::workload::{CaptureFrom, MAX_POOL, PickOrder};

/// A user's mutable state that its requests read and write.
pub(super) struct VuData<'a> {
    pub(super) vars: &'a mut Vec<Option<String>>,
    pub(super) path_buf: &'a mut String,
    pub(super) pools: &'a mut Vec<VecDeque<String>>,
}

/// The pool entry the operation acts on, put in its variable: `Some(None)` when it picks
/// nothing, `None` when its pool is empty (nothing to act on, nothing sent).
pub(super) fn pick(
    p: &PreparedOp,
    st: &mut VuData<'_>,
    rng: &mut Xoshiro256PlusPlus,
) -> Option<Option<usize>> {
    let Some(pick) = &p.pick else {
        return Some(None);
    };
    let held = &st.pools[pick.pool];
    if held.is_empty() {
        return None;
    }
    let i = match pick.order {
        PickOrder::Oldest => 0,
        PickOrder::Newest => held.len() - 1,
        PickOrder::Random => rng.random_range(0..held.len()),
    };
    st.vars[pick.var] = held.get(i).cloned();
    Some(Some(i))
}

/// What a request is built from once its templates are rendered: the path is in the
/// user's `path_buf` (after the target's base path, which is `base_len` long).
pub(super) struct Parts {
    pub(super) base_len: usize,
    /// The template headers' values, in the operation's order.
    pub(super) headers: Vec<String>,
    pub(super) body: Bytes,
}

/// Render the path, the template headers and the body. `None` when a variable has no
/// captured value yet: the operation cannot be sent, so it is not a request (as a
/// driver's operation with nothing to act on).
pub(super) fn render(
    class: &HttpClass,
    ids: &VuIds,
    st: &mut VuData<'_>,
    p: &PreparedOp,
    seq: u64,
    conn: &Conn,
    rng: &mut Xoshiro256PlusPlus,
) -> Option<Parts> {
    let mut ctx = class.ctx(ids, seq, st.vars, rng);
    let path_buf = &mut *st.path_buf;
    path_buf.clear();
    path_buf.push_str(&conn.endpoint().base_path);
    let base_len = path_buf.len();
    p.path.render(&mut ctx, path_buf).ok()?;
    // A captured Location may be an absolute URL: keep its path, the connection is ours.
    let rendered = &path_buf[base_len..];
    if let Some(rest) = rendered
        .strip_prefix("http://")
        .or_else(|| rendered.strip_prefix("https://"))
    {
        let path = rest.find('/').map_or("/", |i| &rest[i..]).to_string();
        path_buf.truncate(base_len);
        path_buf.push_str(&path);
    }
    // Template headers rendered once; the request is built from these parts, and built
    // again only if the server asks for credentials.
    let mut headers: Vec<String> = Vec::new();
    for (_, part) in &p.headers {
        if let HeaderPart::Template(t) = part {
            let mut s = String::new();
            t.render(&mut ctx, &mut s).ok()?;
            headers.push(s);
        }
    }
    let body = match &p.body {
        PreparedBody::None => Bytes::new(),
        PreparedBody::Fixed(b) => b.clone(),
        PreparedBody::Template(t) => {
            let mut s = String::new();
            t.render(&mut ctx, &mut s).ok()?;
            Bytes::from(s)
        }
    };
    Some(Parts {
        base_len,
        headers,
        body,
    })
}

/// Keep what the operation made in its pool (its path, or the rendered `value`), the
/// oldest dropped past [`MAX_POOL`].
pub(super) fn remember(
    class: &HttpClass,
    ids: &VuIds,
    st: &mut VuData<'_>,
    p: &PreparedOp,
    seq: u64,
    base_len: usize,
    rng: &mut Xoshiro256PlusPlus,
) {
    let Some(r) = &p.remember else {
        return;
    };
    let value = match &r.value {
        None => st.path_buf[base_len..].to_string(),
        Some(t) => {
            let mut ctx = class.ctx(ids, seq, st.vars, rng);
            let mut s = String::new();
            if t.render(&mut ctx, &mut s).is_err() {
                return;
            }
            s
        }
    };
    let held = &mut st.pools[r.pool];
    if held.len() >= MAX_POOL {
        held.pop_front();
    }
    held.push_back(value);
}

pub(super) fn capture(
    from: &CaptureFrom,
    headers: &hyper::HeaderMap,
    body: &[u8],
) -> Result<String, String> {
    match from {
        CaptureFrom::Header(h) => headers
            .get(h.as_str())
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
            .ok_or_else(|| format!("response has no header {h} to capture")),
        CaptureFrom::JsonPointer(p) => {
            let v: serde_json::Value = serde_json::from_slice(body)
                .map_err(|e| format!("response body is not JSON ({e}), cannot capture {p}"))?;
            match v.pointer(p) {
                Some(serde_json::Value::String(s)) => Ok(s.clone()),
                Some(serde_json::Value::Null) | None => {
                    Err(format!("response JSON has nothing at {p}"))
                }
                Some(other) => Ok(other.to_string()),
            }
        }
    }
}

pub(super) fn failure(class: ErrorClass, detail: String, sent: u64) -> Outcome {
    let mut o = Outcome::failed(class, detail);
    o.bytes_sent = sent;
    o
}

/// One request of an operation (or of one step of it): pick, render, send, judge,
/// capture, remember.
#[allow(clippy::too_many_arguments)]
pub(super) async fn request(
    class: &HttpClass,
    ids: &VuIds,
    auth: Option<&Auth>,
    st: &mut VuData<'_>,
    p: &PreparedOp,
    seq: u64,
    conn: &mut Conn,
    rng: &mut Xoshiro256PlusPlus,
) -> Done {
    // Something made earlier to act on, or nothing to do.
    let Some(picked) = pick(p, st, rng) else {
        return Done::Skipped;
    };
    let Some(parts) = render(class, ids, st, p, seq, conn, rng) else {
        return Done::Skipped;
    };
    let path: &str = st.path_buf;
    let resp = match send(conn, auth, p, path, &parts).await {
        Ok(r) => r,
        Err(o) => return o.into(),
    };
    let status = resp.status.as_u16();
    let mut out = Outcome {
        label: None,
        answer: Answer::http(status),
        error: None,
        detail: None,
        bytes_sent: resp.bytes_sent,
        bytes_received: resp.bytes_received,
        latency: resp.elapsed,
        longest: resp.elapsed,
        prior: resp.earlier.iter().map(|&s| Answer::http(s)).collect(),
        handshake: resp.handshake,
        steps: Vec::new(),
    };
    let expected = match &p.expect {
        Some(list) => list.contains(&status),
        None => resp.status.is_success(),
    };
    // A deleted entry is gone whether this delete did it or an earlier one did.
    if let (Some(i), Some(pick), true) = (picked, &p.pick, p.forget)
        && (expected || status == 404 || status == 410)
    {
        st.pools[pick.pool].remove(i);
    }
    if !expected {
        out.error = Some(ErrorClass::Status);
        out.detail = Some(format!("{} {} -> {status}", p.method, st.path_buf));
        return out.into();
    }
    for (var, from) in &p.captures {
        match capture(from, &resp.headers, &resp.body) {
            Ok(v) => st.vars[*var] = Some(v),
            Err(m) => {
                out.error = Some(ErrorClass::Body);
                out.detail = Some(m);
                return out.into();
            }
        }
    }
    remember(class, ids, st, p, seq, parts.base_len, rng);
    out.into()
}

/// Build and send the request, answering a challenge when the class authenticates; a
/// failure is its outcome, timed by the engine (no answer, no wire time).
pub(super) async fn send(
    conn: &mut Conn,
    auth: Option<&Auth>,
    p: &PreparedOp,
    path: &str,
    parts: &Parts,
) -> Result<crate::transport::Response, Outcome> {
    conn.set_body_use(p.body_use);
    let build = |authorization: Option<&HeaderValue>| {
        let mut builder = Request::builder().method(p.method.clone()).uri(path);
        if let Some(a) = authorization {
            builder = builder.header(hyper::header::AUTHORIZATION, a.clone());
        }
        let mut values = parts.headers.iter();
        for (name, part) in &p.headers {
            builder = match part {
                HeaderPart::Fixed(v) => builder.header(name, v.clone()),
                HeaderPart::Template(_) => {
                    builder.header(name, values.next().map_or("", String::as_str))
                }
            };
        }
        builder.body(parts.body.clone())
    };
    if let Some(auth) = auth {
        return send_authenticated(conn, Some(auth), &p.method, path, &parts.body, build)
            .await
            .map_err(|mut o| {
                o.latency = std::time::Duration::ZERO;
                o
            });
    }
    // No credentials: the request path stays as lean as it was.
    let req = build(None).map_err(|e| {
        failure(
            ErrorClass::Body,
            format!("cannot build the request: {e}"),
            0,
        )
    })?;
    conn.send(req).await.map_err(|e| {
        let mut o = failure(e.class, e.message, e.bytes_sent);
        o.latency = std::time::Duration::ZERO;
        o
    })
}
