//! An http class's requests as the workload writes them out: each request's steps, the
//! values it remembers and picks from pools, its pools and their prefill, its bodies and
//! captures, and the bounds on each.

use bytes::Bytes;

use crate::workload::dist::Dist;
use crate::workload::template::Template;

/// A generic request template.
#[derive(Debug, Clone)]
pub struct HttpRequest {
    pub method: hyper::Method,
    pub path: Template,
    pub headers: Vec<(String, Template)>,
    pub body: Body,
    pub captures: Vec<Capture>,
    /// After a success, keep what the request made in a per-user pool.
    pub remember: Option<Remember>,
    /// Before sending, take an entry of a pool into a variable; an empty pool skips the
    /// operation (nothing sent, nothing counted).
    pub pick: Option<Pick>,
    /// After a success (or a 404/410: it is gone either way), drop the picked entry.
    pub forget: bool,
    /// `steps:` an operation that is a short sequence of requests, timed as one; when
    /// given, they are sent instead of this request (whose own fields are then unused).
    pub steps: Vec<HttpStep>,
}

/// Most steps in one operation.
pub(crate) const MAX_STEPS: usize = 4;

/// One step of an http operation made of steps.
#[derive(Debug, Clone)]
pub struct HttpStep {
    pub name: String,
    /// Its label in the class (`op.step`), reported apart from the operation.
    pub label: usize,
    pub expect: Option<Vec<u16>>,
    pub request: HttpRequest,
}

/// Step labels are `operation.step`; operation names cannot hold a '.'.
pub(crate) fn is_step_label(label: &str) -> bool {
    label.contains('.')
}

/// `remember:` of an http operation.
#[derive(Debug, Clone)]
pub struct Remember {
    /// Index into the class's pools.
    pub pool: usize,
    /// What to keep; `None` keeps the request's path as sent (without the target's base).
    pub value: Option<Template>,
}

/// `pick:` of an http operation.
#[derive(Debug, Clone)]
pub struct Pick {
    pub pool: usize,
    pub order: PickOrder,
    /// Index into the class's captures: the variable the entry is read into.
    pub var: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PickOrder {
    Random,
    Oldest,
    Newest,
}

/// Most entries one user keeps in one pool; the oldest goes when a new one comes (and is
/// then neither picked nor cleaned up).
pub(crate) const MAX_POOL: usize = 100_000;

/// A per-user pool of what a class's operations created.
#[derive(Debug, Clone)]
pub struct Pool {
    pub name: String,
    /// At the end of each round, send this method to every entry still in the pool (its
    /// entries are paths), untimed: what the run made, it removes.
    pub cleanup: Option<hyper::Method>,
}

/// `prefill: { OPERATION: COUNT }` of an http class: an operation that fills a pool, run
/// this many times in each user's set-up, off the clock, so that its first picks find
/// something to act on.
#[derive(Debug, Clone)]
pub struct Prefill {
    /// Index of the operation in the class's table.
    pub op: usize,
    /// Its name, for messages.
    pub name: String,
    /// How many times (a count or a distribution, drawn per user).
    pub count: Dist,
}

/// The most times set-up runs one prefill operation for one user, whatever its count
/// draws.
pub(crate) const MAX_PREFILL: u64 = 100_000;

#[derive(Debug, Clone)]
pub enum Body {
    None,
    Template(Template),
    /// Contents of a file, read when the workload is loaded.
    File {
        path: String,
        bytes: Bytes,
    },
    /// This many random bytes (generated once per VU and reused).
    Random(u64),
}

/// Take a value from a successful response into a variable.
#[derive(Debug, Clone)]
pub struct Capture {
    /// Index into the class's `captures`.
    pub var: usize,
    pub from: CaptureFrom,
}

#[derive(Debug, Clone)]
pub enum CaptureFrom {
    Header(String),
    /// RFC 6901 JSON pointer into the response body.
    JsonPointer(String),
}
