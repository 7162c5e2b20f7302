//! What a round leaves behind, removed when it ends: the calendars, collections and pool
//! entries each user created (never anything it found), deleted untimed after the round's
//! clock has stopped, each on a fresh connection of the user's own, with the user's own
//! credentials. Every request is counted and every failure named, in the round's report.
//! `--keep-data` skips it.

use std::sync::Arc;

use bytes::Bytes;
use tokio::task::JoinSet;

use super::Session;
use super::session::Exchange;
use crate::transport::{Conn, Endpoint, Method, Reuse, Timeouts};

/// Failures named per round; the rest are counted.
pub const MAX_NOTES: usize = 20;
/// Users cleaning up at once.
const PARALLEL: usize = 64;

/// Where a leftover is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// A path under the target's base path (what the workload's templates name).
    Base(String),
    /// A path on the server as it is (a CalDAV href).
    Server(String),
}

/// One user's leftovers: who it was, and what to send where.
pub struct Leftovers {
    pub session: Session,
    pub items: Vec<(Method, Place)>,
}

/// What cleaning up did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanupStats {
    pub requests: u64,
    pub failures: u64,
    /// The first failures: the request and what came back.
    pub notes: Vec<String>,
}

impl CleanupStats {
    fn absorb(&mut self, o: CleanupStats) {
        self.requests += o.requests;
        self.failures += o.failures;
        for n in o.notes {
            if self.notes.len() < MAX_NOTES {
                self.notes.push(n);
            }
        }
    }
}

/// Remove every user's leftovers; returns when all are done.
pub async fn run(
    endpoint: Arc<Endpoint>,
    timeouts: Timeouts,
    leftovers: Vec<Leftovers>,
) -> CleanupStats {
    let mut total = CleanupStats::default();
    let mut tasks = JoinSet::new();
    for l in leftovers {
        if tasks.len() >= PARALLEL
            && let Some(Ok(s)) = tasks.join_next().await
        {
            total.absorb(s);
        }
        let endpoint = endpoint.clone();
        tasks.spawn(async move { one_user(endpoint, timeouts, l).await });
    }
    while let Some(r) = tasks.join_next().await {
        if let Ok(s) = r {
            total.absorb(s);
        }
    }
    total
}

async fn one_user(endpoint: Arc<Endpoint>, timeouts: Timeouts, l: Leftovers) -> CleanupStats {
    let mut conn = Conn::new(endpoint.clone(), Reuse::KeepAlive, timeouts);
    let mut stats = CleanupStats::default();
    for (method, place) in &l.items {
        stats.requests += 1;
        let path = match place {
            Place::Base(p) => format!("{}{p}", endpoint.base_path),
            Place::Server(p) => p.clone(),
        };
        let url = endpoint.url_of(&path);
        let failed = match l
            .session
            .send_to(&mut conn, method.as_str(), &path, &[], Bytes::new())
            .await
        {
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
