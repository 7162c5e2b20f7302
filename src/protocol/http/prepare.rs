//! An http class's requests made ready once per run: each request's template split into
//! its fixed and rendered parts, its headers and body, the statuses it expects.

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use rand::Rng;
use rand::rngs::Xoshiro256PlusPlus;

use crate::transport::Method;
use crate::workload::{Body, CaptureFrom, HttpRequest, Pick, Remember, Template};

/// Where `{seq}` starts for the requests of a user's set-up (its prefill), so that the
/// names they make never meet those of its picks, which count from 0 each round.
pub(crate) const PREFILL_SEQ: u64 = 1_000_000_000;

/// An operation with everything that does not change between requests prepared once.
pub(super) struct PreparedOp {
    pub(super) method: Method,
    pub(super) path: Template,
    pub(super) headers: Vec<(HeaderName, HeaderPart)>,
    pub(super) body: PreparedBody,
    pub(super) expect: Option<Vec<u16>>,
    pub(super) captures: Vec<(usize, CaptureFrom)>,
    /// Its answers' bodies are dropped as they arrive unless a capture reads them.
    pub(super) body_use: crate::transport::BodyUse,
    pub(super) remember: Option<Remember>,
    pub(super) pick: Option<Pick>,
    pub(super) forget: bool,
    /// A sequence: its steps (each with its label), sent in order instead of this.
    pub(super) steps: Vec<(usize, PreparedOp)>,
}

pub(super) enum HeaderPart {
    Fixed(HeaderValue),
    Template(Template),
}

pub(super) enum PreparedBody {
    None,
    Fixed(Bytes),
    Template(Template),
}

/// A request with everything that does not change between sends made once.
pub(super) fn prepare(
    h: &HttpRequest,
    expect: Option<Vec<u16>>,
    rng: &mut Xoshiro256PlusPlus,
) -> PreparedOp {
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
