//! The brokers' teardown, after a round's clock has stopped: every destination of the
//! run's own that the round used is drained (consumed until nothing has come for a while),
//! each message taken entered in the ledger as drained, and the queues the run declared
//! are deleted. Untimed, counted apart. `--keep-data` skips it.
//!
//! Only the run's own destinations are touched: an AMQP queue named after the run or that
//! the run's declaration created (it was not there before), a STOMP destination named
//! after the run (STOMP
//! cannot tell whether one existed), and the durable topic subscriptions its users made
//! (drained as their subscriber, then unsubscribed). A sharded run drains but deletes nothing: another
//! shard's users may still be on the queue.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;

use super::broker::{Bounds, Queue};
use super::cleanup::{MAX_NOTES, Until};
use super::contract::Reach;
use crate::ledger::Ledger;
use crate::transport::{Endpoint, Reuse, Timeouts};

/// How long a destination must stay quiet to count as drained.
pub(crate) const IDLE: Duration = Duration::from_millis(500);
/// The most one destination's drain may take: a queue still filling past it is named.
const LIMIT: Duration = Duration::from_secs(120);
/// Destinations drained at once.
const PARALLEL: usize = 16;
/// Messages a drain takes from a destination past what the round sent there (sends it
/// did not count, another run's): more, and the broker is flooding it.
pub(crate) const MARGIN: u64 = 10_000;

/// What the teardown did.
#[derive(Debug, Clone, Default)]
pub(crate) struct DrainStats {
    pub destinations: u64,
    pub messages: u64,
    pub deleted: u64,
    pub failures: u64,
    pub notes: Vec<String>,
    pub ledger: Ledger,
}

impl DrainStats {
    fn absorb(&mut self, o: DrainStats) {
        self.destinations += o.destinations;
        self.messages += o.messages;
        self.deleted += o.deleted;
        self.failures += o.failures;
        for n in o.notes {
            if self.notes.len() < MAX_NOTES {
                self.notes.push(n);
            }
        }
        self.ledger.absorb(o.ledger);
    }
}

/// Drain each destination once (however many users used it), taking at most `most` of
/// its messages, and delete the created queues when `delete`.
pub(crate) async fn run(
    endpoint: Arc<Endpoint>,
    timeouts: Timeouts,
    queues: Vec<Queue>,
    delete: bool,
    most: &dyn Fn(&Queue) -> u64,
    until: &Until,
) -> DrainStats {
    let mut once: BTreeMap<(&'static str, String), Queue> = BTreeMap::new();
    for q in queues {
        let key = q.ledger_name.clone().unwrap_or_else(|| q.name.clone());
        once.entry((q.drainer.protocol(), key))
            .and_modify(|e| e.created |= q.created)
            .or_insert(q);
    }
    let mut total = DrainStats::default();
    let mut tasks = JoinSet::new();
    for q in once.into_values() {
        if tasks.len() >= PARALLEL
            && let Some(Ok(s)) = tasks.join_next().await
        {
            total.absorb(s);
        }
        let endpoint = endpoint.clone();
        let until = until.within(LIMIT, "the drain's own limit of");
        let most = most(&q);
        tasks.spawn(async move { one(endpoint, timeouts, q, delete, most, until).await });
    }
    while let Some(r) = tasks.join_next().await {
        if let Ok(s) = r {
            total.absorb(s);
        }
    }
    total.ledger.drained = total.failures == 0;
    total
}

async fn one(
    endpoint: Arc<Endpoint>,
    timeouts: Timeouts,
    q: Queue,
    delete: bool,
    most: u64,
    until: Until,
) -> DrainStats {
    let conn = Reach {
        endpoint,
        timeouts,
        reuse: Reuse::KeepAlive,
        resumes_tls: true,
        user_agent: None,
        round_end: None,
    };
    let mut stats = DrainStats {
        destinations: 1,
        ..DrainStats::default()
    };
    // What was taken is counted, whether or not the drain then failed.
    let (ledger, taken) = (&mut stats.ledger, &mut stats.messages);
    let bounds = Bounds {
        idle: IDLE,
        until: &until,
        most,
    };
    let done = q
        .drainer
        .drain(&q, &conn, bounds, delete, ledger, taken)
        .await;
    match done {
        Ok(deleted) => stats.deleted = u64::from(deleted),
        Err(e) => {
            stats.failures = 1;
            stats.notes.push(format!("draining {}: {e}", q.name));
            // What it did not take is not known lost: it may be on the broker still.
            stats
                .ledger
                .drain_stopped(q.ledger_name.as_deref().unwrap_or(&q.name));
        }
    }
    stats
}
