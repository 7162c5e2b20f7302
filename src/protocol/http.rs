//! The generic `http` protocol: each operation is a request template from the workload
//! (method, path, headers, body, expected statuses, captures). It is how users drive servers
//! that no built-in driver speaks, such as a REST message queue or a WebDAV share.
//!
//! Operations can act on what earlier ones made: `remember:` keeps a created resource's
//! path (or a captured value) in a per-user pool, `pick:` takes one back into a variable,
//! `forget:` drops it once deleted. An operation whose pool is empty sends nothing and is
//! not counted, like a driver's operation with nothing to act on. At the end of a round,
//! what is left in a pool with a `cleanup:` method is removed, untimed.

use std::sync::Arc;

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{Rng, RngExt};

use async_trait::async_trait;

use super::auth::Auth;
use super::contract::{Done, Preflight, Protocol, Reach};
use super::over_http::{HttpUser, OverHttp};
use super::session::{Session, send_authenticated};
use super::{Outcome, ProtocolError, VuIds};
use crate::answer::Answer;
use crate::transport::{Conn, ErrorClass, Method, Request};
use crate::workload::template::Ctx;
use std::collections::VecDeque;

use crate::workload::{
    Body, CaptureFrom, HttpRequest, MAX_POOL, MAX_PREFILL, Pick, PickOrder, Pool, Prefill,
    Remember, Template, UserClass, Workload,
};

/// Where `{seq}` starts for the requests of a user's set-up (its prefill), so that the
/// names they make never meet those of its picks, which count from 0 each round.
pub(crate) const PREFILL_SEQ: u64 = 1_000_000_000;

/// An operation with everything that does not change between requests prepared once.
struct PreparedOp {
    method: Method,
    path: Template,
    headers: Vec<(HeaderName, HeaderPart)>,
    body: PreparedBody,
    expect: Option<Vec<u16>>,
    captures: Vec<(usize, CaptureFrom)>,
    /// Its answers' bodies are dropped as they arrive unless a capture reads them.
    body_use: crate::transport::BodyUse,
    remember: Option<Remember>,
    pick: Option<Pick>,
    forget: bool,
    /// A sequence: its steps (each with its label), sent in order instead of this.
    steps: Vec<(usize, PreparedOp)>,
}

enum HeaderPart {
    Fixed(HeaderValue),
    Template(Template),
}

enum PreparedBody {
    None,
    Fixed(Bytes),
    Template(Template),
}

pub(crate) struct HttpClass {
    ops: Vec<PreparedOp>,
    context: Arc<str>,
    class: Arc<str>,
    /// Names of the captured variables, by index.
    vars: Vec<String>,
    pools: Vec<Pool>,
    /// Operations run in each user's set-up to fill its pools.
    prefill: Vec<Prefill>,
}

/// A request with everything that does not change between sends made once.
fn prepare(h: &HttpRequest, expect: Option<Vec<u16>>, rng: &mut Xoshiro256PlusPlus) -> PreparedOp {
    PreparedOp {
        method: h.method.clone(),
        path: h.path.clone(),
        headers: h
            .headers
            .iter()
            .filter_map(|(n, t)| {
                let name = HeaderName::from_bytes(n.as_bytes()).ok()?;
                let part = if t.is_literal() {
                    HeaderPart::Fixed(HeaderValue::from_str(&t.source).ok()?)
                } else {
                    HeaderPart::Template(t.clone())
                };
                Some((name, part))
            })
            .collect(),
        body: match &h.body {
            Body::None => PreparedBody::None,
            Body::File { bytes, .. } => PreparedBody::Fixed(bytes.clone()),
            Body::Random(n) => {
                let mut b = vec![0u8; *n as usize];
                rng.fill_bytes(&mut b);
                PreparedBody::Fixed(Bytes::from(b))
            }
            Body::Template(t) if t.is_literal() => {
                PreparedBody::Fixed(Bytes::from(t.source.clone()))
            }
            Body::Template(t) => PreparedBody::Template(t.clone()),
        },
        expect,
        captures: h.captures.iter().map(|c| (c.var, c.from.clone())).collect(),
        body_use: match h
            .captures
            .iter()
            .any(|c| matches!(c.from, CaptureFrom::JsonPointer(_)))
        {
            true => crate::transport::BodyUse::default(),
            false => crate::transport::BodyUse::Discard,
        },
        remember: h.remember.clone(),
        pick: h.pick.clone(),
        forget: h.forget,
        steps: Vec::new(),
    }
}

impl HttpClass {
    pub(crate) fn new(
        workload: &Workload,
        class: &UserClass,
        requests: &[HttpRequest],
        pools: &[Pool],
        prefill: &[Prefill],
        seed: u64,
    ) -> HttpClass {
        // Random bodies are made once per class: their content does not matter to a server,
        // and per-VU copies would cost memory with many users.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x006c_6f61_646d_6978);
        let ops = class
            .ops
            .iter()
            .zip(requests)
            .map(|(op, h)| {
                let mut p = prepare(h, op.expect.clone(), &mut rng);
                p.steps = h
                    .steps
                    .iter()
                    .map(|st| (st.label, prepare(&st.request, st.expect.clone(), &mut rng)))
                    .collect();
                p
            })
            .collect();
        HttpClass {
            ops,
            context: workload.context.as_str().into(),
            class: class.name.as_str().into(),
            vars: class.captures.clone(),
            pools: pools.to_vec(),
            prefill: prefill.to_vec(),
        }
    }

    /// What a user's templates are rendered with.
    fn ctx<'a>(
        &'a self,
        ids: &'a VuIds,
        seq: u64,
        vars: &'a [Option<String>],
        rng: &'a mut Xoshiro256PlusPlus,
    ) -> Ctx<'a, Xoshiro256PlusPlus> {
        Ctx {
            vu: ids.vu,
            round: ids.round,
            seq,
            context: &self.context,
            run_id: &ids.run_id,
            class: &self.class,
            vars,
            rng,
        }
    }

    fn new_vu(self: &Arc<HttpClass>, ids: VuIds, auth: Option<Auth>) -> HttpVu {
        HttpVu {
            class: self.clone(),
            ids,
            auth,
            vars: vec![None; self.vars.len()],
            pools: vec![VecDeque::new(); self.pools.len()],
            path_buf: String::new(),
        }
    }
}

pub(crate) struct HttpVu {
    class: Arc<HttpClass>,
    ids: VuIds,
    /// Values captured from responses, by capture index.
    vars: Vec<Option<String>>,
    /// Reused for every request path, so rendering does not allocate once warm.
    path_buf: String,
    /// The user's credentials, when the class authenticates.
    auth: Option<Auth>,
    /// What it made, by pool, oldest first.
    pools: Vec<VecDeque<String>>,
}

#[async_trait]
impl Protocol for HttpClass {
    type User = HttpUser<HttpVu>;

    fn user(self: &Arc<Self>, session: Session, ids: VuIds, reach: Reach) -> Self::User {
        let vu = self.new_vu(ids, session.auth.clone());
        // Requests are the workload's own: no account is made for them.
        HttpUser::new(vu, session, &reach, None)
    }

    /// Something listens and speaks HTTP: the workload's requests are its own, so no
    /// request of them is sent before the clock.
    async fn preflight(self: &Arc<Self>, cx: Preflight<'_>) -> Result<(), ProtocolError> {
        super::over_http::probe(&cx).await
    }
}

impl OverHttp for HttpVu {
    /// Pools are http's only guard: whether pool `index` holds a value.
    fn guard_holds(&self, guard: &crate::workload::chain::Guard) -> bool {
        match guard {
            crate::workload::chain::Guard::Pool { index, .. } => {
                self.pools.get(*index).is_some_and(|p| !p.is_empty())
            }
            crate::workload::chain::Guard::Invited => false,
        }
    }

    /// The class's `prefill:` operations, each run its drawn count of times (at most
    /// [`MAX_PREFILL`]) before the first pick, their `{seq}` from [`PREFILL_SEQ`]. Stops
    /// at the first that fails or finds nothing to act on.
    async fn prefill(
        &mut self,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Result<(), String> {
        let class = self.class.clone();
        let mut seq = PREFILL_SEQ;
        for p in &class.prefill {
            let n = p.count.sample_count(rng, MAX_PREFILL);
            for i in 0..n {
                let why = match self.execute(p.op, seq, conn, rng).await {
                    Done::Sent(o) if o.error.is_none() => None,
                    Done::Sent(o) => Some(o.detail.unwrap_or_else(|| "failed".into())),
                    Done::Skipped => Some("found nothing to act on".into()),
                };
                if let Some(why) = why {
                    return Err(format!("prefill {} {} of {n}: {why}", p.name, i + 1));
                }
                seq = seq.saturating_add(1);
            }
        }
        Ok(())
    }

    /// Its pools and variables go on; `{round}` names the round it is in.
    fn begin_round(&mut self, round: u32) {
        self.ids.round = round;
    }

    /// What the end of the round removes: `(method, path)` for every entry still held in
    /// a pool that has a cleanup method. Paths are as remembered (without the base path).
    fn leftovers(&self) -> Vec<(Method, super::cleanup::Place)> {
        self.class
            .pools
            .iter()
            .zip(&self.pools)
            .filter_map(|(def, held)| def.cleanup.as_ref().map(|m| (m, held)))
            .flat_map(|(m, held)| {
                held.iter()
                    .map(move |p| (m.clone(), super::cleanup::Place::Base(p.clone())))
            })
            .collect()
    }

    async fn execute(
        &mut self,
        op: usize,
        seq: u64,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Done {
        // Disjoint borrows of the VU's fields: no Arc clone per request, whose reference
        // count all VUs of the class would bounce between cores.
        let HttpVu {
            class,
            ids,
            vars,
            path_buf,
            auth,
            pools,
        } = self;
        let class: &HttpClass = class;
        // The resolver built the table the engine picks from: an index past it is a pick
        // of nothing.
        let Some(p) = class.ops.get(op) else {
            return Done::Skipped;
        };
        let mut st = VuData {
            vars,
            path_buf,
            pools,
        };
        if p.steps.is_empty() {
            return request(class, ids, auth.as_ref(), &mut st, p, seq, conn, rng).await;
        }
        // A sequence: timed as one operation, each step also reported under its own
        // label. It stops at the first step that fails.
        let mut done: Option<Outcome> = None;
        let mut steps = Vec::with_capacity(p.steps.len());
        for (label, step) in &p.steps {
            let mut o =
                match request(class, ids, auth.as_ref(), &mut st, step, seq, conn, rng).await {
                    Done::Sent(o) => o,
                    // Nothing to act on, nothing sent: the whole operation is skipped.
                    Done::Skipped if done.is_none() => return Done::Skipped,
                    Done::Skipped => Outcome::failed(
                        ErrorClass::Body,
                        "a step found nothing to act on after earlier steps ran".into(),
                    ),
                };
            steps.push((*label, o.clone()));
            let failed = o.error.is_some();
            if let Some(before) = &done {
                o.add_cost(before);
                if o.error.is_none() {
                    o.error = before.error;
                    o.detail = before.detail.clone();
                }
            }
            done = Some(o);
            if failed {
                break;
            }
        }
        let Some(mut o) = done else {
            return Done::Skipped;
        };
        o.steps = steps;
        Done::Sent(o)
    }
}

/// A user's mutable state that its requests read and write.
struct VuData<'a> {
    vars: &'a mut Vec<Option<String>>,
    path_buf: &'a mut String,
    pools: &'a mut Vec<VecDeque<String>>,
}

/// One request of an operation (or of one step of it): pick, render, send, judge,
/// capture, remember.
#[allow(clippy::too_many_arguments)]
async fn request(
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

/// The pool entry the operation acts on, put in its variable: `Some(None)` when it picks
/// nothing, `None` when its pool is empty (nothing to act on, nothing sent).
fn pick(
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
struct Parts {
    base_len: usize,
    /// The template headers' values, in the operation's order.
    headers: Vec<String>,
    body: Bytes,
}

/// Render the path, the template headers and the body. `None` when a variable has no
/// captured value yet: the operation cannot be sent, so it is not a request (as a
/// driver's operation with nothing to act on).
fn render(
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

/// Build and send the request, answering a challenge when the class authenticates; a
/// failure is its outcome, timed by the engine (no answer, no wire time).
async fn send(
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

/// Keep what the operation made in its pool (its path, or the rendered `value`), the
/// oldest dropped past [`MAX_POOL`].
fn remember(
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

fn capture(from: &CaptureFrom, headers: &hyper::HeaderMap, body: &[u8]) -> Result<String, String> {
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

fn failure(class: ErrorClass, detail: String, sent: u64) -> Outcome {
    let mut o = Outcome::failed(class, detail);
    o.bytes_sent = sent;
    o
}
