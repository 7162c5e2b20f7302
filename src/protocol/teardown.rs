//! The end of a round, after its clock has stopped, for every protocol at once: what the
//! users made over HTTP is deleted (`cleanup.rs`), then the broker destinations of the
//! run's own that they used are drained (`drain.rs`), and the round's ledger, the drain's
//! takings added, says whether every destination in it was drained. Untimed, counted
//! apart; `--keep-data` leaves everything where it is.

use std::collections::HashSet;
use std::sync::Arc;

use super::cleanup::{self, CleanupStats, Until};
use super::contract::Handoff;
use super::drain::{self, DrainStats};
use crate::ledger::Ledger;
use crate::transport::{Endpoint, Timeouts};

/// How a round's teardown runs.
pub(crate) struct Teardown<'a> {
    /// The target, and the timeouts of each request.
    pub(crate) endpoint: Arc<Endpoint>,
    pub(crate) timeouts: Timeouts,
    /// Leave everything on the target (`--keep-data`).
    pub(crate) keep_data: bool,
    /// How many shards the run has. At 1 this process runs it whole, and what the run
    /// declared may be deleted; in a shard, another shard's users may still be using it.
    pub(crate) shards: u32,
    /// When to stop: the deadline, or a signal.
    pub(crate) until: &'a Until,
}

/// What the teardown did.
#[derive(Debug, Default)]
pub(crate) struct TornDown {
    /// Deleting what the users made over HTTP.
    pub(crate) cleanup: CleanupStats,
    /// Draining the broker destinations they used.
    pub(crate) drain: DrainStats,
    /// What the users' producers sent and their consumers (and the drain) took.
    pub(crate) ledger: Ledger,
    /// What the users wrote to and saw in their teams' calendars.
    pub(crate) visibility: crate::visibility::Book,
}

impl Teardown<'_> {
    /// Remove and drain what the round's users handed over.
    pub(crate) async fn run(&self, mut handed: Handoff) -> TornDown {
        let cleanup = match self.keep_data {
            true => CleanupStats::default(),
            false => {
                let leftovers = std::mem::take(&mut handed.leftovers);
                cleanup::run(self.endpoint.clone(), self.timeouts, leftovers, self.until).await
            }
        };
        let visibility = std::mem::take(&mut handed.visibility);
        let (drain, ledger) = self.drain(handed).await;
        TornDown {
            cleanup,
            drain,
            ledger,
            visibility,
        }
    }

    /// The destinations drained (deleted when the run declared them and runs whole); the
    /// ledger with the drain's takings, marked drained when every destination in it was.
    async fn drain(&self, handed: Handoff) -> (DrainStats, Ledger) {
        let Handoff {
            queues, mut ledger, ..
        } = handed;
        if self.keep_data || (queues.is_empty() && ledger.is_empty()) {
            return (DrainStats::default(), ledger);
        }
        let names: HashSet<&str> = queues
            .iter()
            .map(|q| q.ledger_name.as_deref().unwrap_or(&q.name))
            .collect();
        let every = ledger
            .destinations()
            .all(|d| super::broker::holds_nothing(d) || names.contains(d));
        // What the round sent there, and some more, is all a drain takes from a
        // destination in a whole run: a broker flooding it past that is not the round's.
        // A shard sees only its own producers' sends; the other shards run the same plan
        // with their share of the users, so it allows as much again for each of them
        // (and the margin for each, for a destination only their producers used).
        let most = |q: &super::broker::Queue| {
            ledger
                .sent_to(q.ledger_name.as_deref().unwrap_or(&q.name))
                .saturating_add(drain::MARGIN)
                .saturating_mul(u64::from(self.shards.max(1)))
        };
        let whole_run = self.shards <= 1;
        let mut drain = match queues.is_empty() {
            true => DrainStats::default(),
            false => {
                drain::run(
                    self.endpoint.clone(),
                    self.timeouts,
                    queues,
                    (whole_run, &most),
                    self.until,
                )
                .await
            }
        };
        ledger.absorb(std::mem::take(&mut drain.ledger));
        ledger.drained = every && drain.failures == 0;
        (drain, ledger)
    }
}
