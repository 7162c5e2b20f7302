//! What a round leaves behind, removed when it ends: the calendars, collections and pool
//! entries each user created (never anything it found), deleted untimed after the round's
//! clock has stopped, each on a fresh connection of the user's own, with the user's own
//! credentials. Every request is counted and every failure named, in the round's report.
//! The teardown has a deadline (`--cleanup-timeout`) and stops at a signal; what it did
//! not delete then is counted and named. `--keep-data` skips it.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Session;
use super::session::Exchange;
use crate::transport::{Conn, Endpoint, Method, Reuse, Timeouts};

/// Failures named per round; the rest are counted.
pub(crate) const MAX_NOTES: usize = 20;
/// Users cleaning up at once.
const PARALLEL: usize = 64;

/// Where a leftover is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Place {
    /// A path under the target's base path (what the workload's templates name).
    Base(String),
    /// A path on the server as it is (a CalDAV href).
    Server(String),
}

/// One user's leftovers: who it was, and what to send where.
pub(crate) struct Leftovers {
    pub session: Session,
    pub items: Vec<(Method, Place)>,
}

/// When a round's teardown (its cleanup, then its broker drains) must stop: at its
/// deadline (`--cleanup-timeout`), or at once on a stop signal.
#[derive(Debug, Clone)]
pub(crate) struct Until {
    pub at: Instant,
    /// The limit that sets `at`, in words: `--cleanup-timeout 120s`.
    limit: String,
    stop: CancellationToken,
}

impl Until {
    /// `timeout` from now, or when `stop` is cancelled.
    pub(crate) fn new(timeout: Duration, stop: CancellationToken) -> Until {
        Until {
            at: Instant::now() + timeout,
            limit: format!("--cleanup-timeout {timeout:?}"),
            stop,
        }
    }

    /// The same, but at most `limit` from now (`what` names that limit).
    pub(crate) fn within(&self, limit: Duration, what: &str) -> Until {
        let at = Instant::now() + limit;
        match at < self.at {
            true => Until {
                at,
                limit: format!("{what} {limit:?}"),
                stop: self.stop.clone(),
            },
            false => self.clone(),
        }
    }

    /// Whether the teardown must stop now.
    pub(crate) fn passed(&self) -> bool {
        self.stop.is_cancelled() || Instant::now() >= self.at
    }

    /// Why it stopped, in words, once it has.
    pub(crate) fn reason(&self) -> String {
        if self.stop.is_cancelled() {
            "a stop signal".into()
        } else {
            self.limit.clone()
        }
    }

    /// Resolves when the teardown must stop.
    pub(crate) async fn reached(&self) {
        tokio::select! {
            _ = tokio::time::sleep_until(self.at) => {}
            _ = self.stop.cancelled() => {}
        }
    }
}

/// What cleaning up did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CleanupStats {
    pub requests: u64,
    pub failures: u64,
    /// The first failures: the request and what came back.
    pub notes: Vec<String>,
    /// Items not known to be deleted because the cleanup was cut short (in flight then,
    /// or never sent), and the first of them.
    pub left: u64,
    pub left_notes: Vec<String>,
    /// Why it was cut short, when it was.
    pub cut_short: Option<String>,
}

impl CleanupStats {
    pub(crate) fn absorb(&mut self, o: CleanupStats) {
        self.requests += o.requests;
        self.failures += o.failures;
        self.left += o.left;
        for n in o.notes {
            if self.notes.len() < MAX_NOTES {
                self.notes.push(n);
            }
        }
        for n in o.left_notes {
            if self.left_notes.len() < MAX_NOTES {
                self.left_notes.push(n);
            }
        }
        self.cut_short = self.cut_short.take().or(o.cut_short);
    }

    /// `items` of a user's leftovers not deleted, from the `first` on.
    fn leave(&mut self, endpoint: &Endpoint, items: &[(Method, Place)], why: &Until) {
        for (method, place) in items {
            self.left += 1;
            if self.left_notes.len() < MAX_NOTES {
                self.left_notes.push(format!(
                    "{method} {}",
                    endpoint.url_of(&path_of(endpoint, place))
                ));
            }
        }
        if !items.is_empty() {
            self.cut_short.get_or_insert_with(|| why.reason());
        }
    }
}

fn path_of(endpoint: &Endpoint, place: &Place) -> String {
    match place {
        Place::Base(p) => format!("{}{p}", endpoint.base_path),
        Place::Server(p) => p.clone(),
    }
}

/// Remove every user's leftovers; returns when all are done, or when `until` says to
/// stop (what is left is counted and named).
pub(crate) async fn run(
    endpoint: Arc<Endpoint>,
    timeouts: Timeouts,
    leftovers: Vec<Leftovers>,
    until: &Until,
) -> CleanupStats {
    let mut total = CleanupStats::default();
    let mut tasks = JoinSet::new();
    for l in leftovers {
        if until.passed() {
            total.leave(&endpoint, &l.items, until);
            continue;
        }
        if tasks.len() >= PARALLEL
            && let Some(Ok(s)) = tasks.join_next().await
        {
            total.absorb(s);
        }
        let endpoint = endpoint.clone();
        let until = until.clone();
        tasks.spawn(async move { one_user(endpoint, timeouts, l, &until).await });
    }
    while let Some(r) = tasks.join_next().await {
        if let Ok(s) = r {
            total.absorb(s);
        }
    }
    total
}

async fn one_user(
    endpoint: Arc<Endpoint>,
    timeouts: Timeouts,
    l: Leftovers,
    until: &Until,
) -> CleanupStats {
    let mut conn = Conn::new(endpoint.clone(), Reuse::KeepAlive, timeouts);
    let mut stats = CleanupStats::default();
    for (i, (method, place)) in l.items.iter().enumerate() {
        let path = path_of(&endpoint, place);
        let url = endpoint.url_of(&path);
        let sent = l
            .session
            .send_to(&mut conn, method.as_str(), &path, &[], Bytes::new());
        let exchange = tokio::select! {
            biased;
            e = sent => e,
            // In flight or not sent: not known to be deleted.
            _ = until.reached() => {
                stats.leave(&endpoint, &l.items[i..], until);
                break;
            }
        };
        stats.requests += 1;
        let failed = match exchange {
            // Gone already (the user deleted it, or its collection went first) is done.
            Exchange::Answer(r)
                if r.status.is_success() || matches!(r.status.as_u16(), 404 | 410) =>
            {
                None
            }
            Exchange::Answer(r) => Some(format!("{method} {url} -> {}", r.status)),
            Exchange::Failed(o) => {
                Some(format!("{method} {url}: {}", o.detail.unwrap_or_default()))
            }
        };
        if let Some(n) = failed {
            stats.failures += 1;
            if stats.notes.len() < MAX_NOTES {
                stats.notes.push(n);
            }
        }
    }
    stats
}
