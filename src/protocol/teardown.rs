//! The end of a round, after its clock has stopped, for every protocol at once: what the
//! users made over HTTP is deleted (`cleanup.rs`), then the broker destinations of the
//! run's own that they used are drained (`drain.rs`), and the round's ledger, the drain's
//! takings added, says whether every destination in it was drained; the teams' books are
//! settled against the workload's teams over the round's window. Untimed, counted apart;
//! `--keep-data` leaves everything where it is.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::cleanup::{self, CleanupStats, Until};
use super::contract::Handoff;
use super::drain::{self, DrainStats};
use super::products::RoundProducts;
use crate::ledger::Ledger;
use crate::transport::{Endpoint, Timeouts};
use crate::visibility::{Audiences, Book, Settled, TeamId, Window};
use crate::workload::Workload;

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

/// What the teardown did, before the round's books are settled.
#[derive(Debug, Default)]
pub(crate) struct TornDown {
    /// Deleting what the users made over HTTP.
    cleanup: CleanupStats,
    /// Draining the broker destinations they used.
    drain: DrainStats,
    /// What the users' producers sent and their consumers (and the drain) took.
    ledger: Ledger,
    /// What the users wrote to and saw in their teams' calendars.
    visibility: Book,
}

/// When a round's clock ran: its start, and how long until its last user stopped.
#[derive(Debug, Clone)]
pub(crate) struct RoundWindow {
    /// The round's number, from 1.
    pub(crate) index: u32,
    pub(crate) started_at: SystemTime,
    pub(crate) elapsed: Duration,
    /// Its fault windows as they happened, in order of begin: from the round's start.
    pub(crate) faults: Vec<(Duration, Duration)>,
}

impl TornDown {
    /// The requests the teardown sent (untimed, counted apart).
    pub(crate) fn requests(&self) -> u64 {
        self.cleanup.requests
    }

    /// The round's products: the books settled against the workload's teams over the
    /// round's window.
    pub(crate) fn settle(self, w: &Workload, round: RoundWindow) -> RoundProducts {
        RoundProducts {
            visibility: settle_visibility(w, round, &self.visibility),
            cleanup: self.cleanup,
            drain: self.drain,
            ledger: self.ledger,
        }
    }

    /// A teardown after the last round (what users kept from round to round made): its
    /// cleanup added to that round's.
    pub(crate) fn add_cleanup_to(self, round: &mut RoundProducts) {
        round.cleanup.absorb(self.cleanup);
    }
}

/// A round's visibility books settled against the workload's teams: each write held
/// against the members of its team who read; `None` when the workload has no team.
fn settle_visibility(w: &Workload, r: RoundWindow, book: &Book) -> Option<Settled> {
    if w.teams.is_empty() {
        return None;
    }
    let round = u16::try_from(r.index).unwrap_or(u16::MAX);
    let wall_us = |t: SystemTime| {
        t.duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
    };
    let window = Window {
        from_us: wall_us(r.started_at),
        to_us: wall_us(r.started_at + r.elapsed),
    };
    let faults: Vec<Window> = r
        .faults
        .iter()
        .map(|(from, to)| Window {
            from_us: wall_us(r.started_at + *from),
            to_us: wall_us(r.started_at + *to),
        })
        .collect();
    Some(book.settle(
        window,
        &faults,
        Audiences {
            observers: |(kind, team): TeamId| {
                w.observers(kind as usize, team)
                    .into_iter()
                    .map(|(class, vu)| crate::ledger::Producer {
                        class: u16::try_from(class).unwrap_or(u16::MAX),
                        round,
                        vu,
                    })
                    .collect()
            },
            users: |class: u16| {
                w.classes
                    .get(usize::from(class))
                    .map_or(0, |c| u64::from(Workload::peak_users(c)))
            },
        },
    ))
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
                    whole_run,
                    &most,
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
