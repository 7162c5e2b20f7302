//! The contract between the engine and a protocol's driver: what a class of users shares
//! and probes ([`Protocol`]), what one user holds and does ([`User`]), the plain context a
//! driver reaches its target through ([`Reach`]), what a pick came to ([`Done`]) and what a
//! user hands over when it ends ([`Handoff`]).
//!
//! Every step of a user but `execute` and `hand_off` has a default that does nothing, so a
//! protocol says what it does and nothing more, and the engine calls every step of every
//! user alike: it never asks which protocol it drives. The traits are object-safe through
//! `async_trait`: each step's future is boxed once, which the engine did for every
//! operation before (an inline future as large as the largest driver's would sit in every
//! user's task while it thinks).

use std::sync::Arc;

use async_trait::async_trait;
use rand::rngs::Xoshiro256PlusPlus;

use super::{Outcome, ProtocolError, SetupError, VuIds, broker, cleanup, session::AccountPlan};
use crate::ledger::Ledger;
use crate::transport::{Endpoint, Reuse, Tally, Timeouts};
use crate::workload::chain::Guard;
use crate::workload::{Connection, UserClass, Workload};

/// Every random draw a driver makes for its data (bodies, picks of what to act on).
pub(crate) type DataRng = Xoshiro256PlusPlus;

/// What one pick came to: an operation that went on the wire, or one that found nothing
/// to act on and sent nothing (a get on a calendar that holds no event yet). The two
/// cannot both be true of one pick.
#[derive(Debug, Clone)]
pub(crate) enum Done {
    /// Sent, with what came back (a failure included).
    Sent(Outcome),
    /// Nothing to act on: nothing sent, nothing timed.
    Skipped,
}

impl From<Outcome> for Done {
    fn from(o: Outcome) -> Done {
        Done::Sent(o)
    }
}

/// Where a user's requests go and how long each may take: what a driver that opens its
/// own streams needs, and what an HTTP driver builds its connection from. The engine
/// hands every user one; no driver is given another protocol's connection.
#[derive(Clone)]
pub(crate) struct Reach {
    /// The target.
    pub(crate) endpoint: Arc<Endpoint>,
    /// The connect and request timeouts.
    pub(crate) timeouts: Timeouts,
    /// Kept alive or one connection per request, as the class says.
    pub(crate) reuse: Reuse,
    /// Whether new TLS connections may resume an earlier session of this target.
    pub(crate) resumes_tls: bool,
    /// What the user's requests say it is (`User-Agent`), for protocols over HTTP.
    pub(crate) user_agent: Option<hyper::header::HeaderValue>,
    /// When the user's round (or its active window) ends: a wait for a message that may
    /// come ends there, not past the bell.
    pub(crate) round_end: Option<tokio::time::Instant>,
}

impl Reach {
    /// Where a user reaches its target, as its class says.
    pub(crate) fn of(endpoint: &Arc<Endpoint>, class: &UserClass, timeouts: Timeouts) -> Reach {
        Reach {
            endpoint: endpoint.clone(),
            timeouts,
            reuse: match class.connection {
                Connection::KeepAlive => Reuse::KeepAlive,
                Connection::PerRequest => Reuse::PerRequest,
            },
            resumes_tls: class.tls_resumption,
            user_agent: None,
            round_end: None,
        }
    }

    /// Until when to wait for a message that may come, from `start`, at most `wait`: the
    /// round's end when that comes first (never before `start`).
    pub(crate) fn wait_until(
        &self,
        start: tokio::time::Instant,
        wait: std::time::Duration,
    ) -> tokio::time::Instant {
        // A wait too long for the clock to hold is as good as none: the round's end, or
        // a day, whichever the clock holds.
        let until = start
            .checked_add(wait)
            .or_else(|| start.checked_add(std::time::Duration::from_secs(86_400)))
            .unwrap_or(start);
        self.round_end
            .map_or(until, |end| until.min(end.max(start)))
    }

    /// The reach of user `ids` of `class`, its `User-Agent` filled in from the class's.
    pub(crate) fn of_user(
        endpoint: &Arc<Endpoint>,
        class: &UserClass,
        timeouts: Timeouts,
        ids: &VuIds,
    ) -> Reach {
        Reach {
            user_agent: user_agent(&class.user_agent, &class.name, ids),
            ..Reach::of(endpoint, class, timeouts)
        }
    }

    /// The target.
    pub(crate) fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The connect and request timeouts.
    pub(crate) fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    /// Whether new TLS connections may resume an earlier session of this target.
    pub(crate) fn resumes_tls(&self) -> bool {
        self.resumes_tls
    }
}

/// What a user's connections came to over its life: the report's connection figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Wire {
    /// Connections (or broker sessions) opened.
    pub(crate) opened: u64,
    /// Requests sent again on a new connection because the server never took them.
    pub(crate) retried: u64,
    /// Bytes found on a connection that no request asked for.
    pub(crate) unsolicited: u64,
}

impl Wire {
    /// Add another user's.
    pub(crate) fn absorb(&mut self, o: Wire) {
        self.opened += o.opened;
        self.retried += o.retried;
        self.unsolicited += o.unsolicited;
    }
}

/// What a user hands over when it ends: what it left on the target for the round's
/// teardown, what it counted, and its connections.
#[derive(Default)]
pub(crate) struct Handoff {
    /// What it made over HTTP and the end of the round removes.
    pub(crate) leftovers: Vec<cleanup::Leftovers>,
    /// The broker destinations of the run's own it used, drained after the round.
    pub(crate) queues: Vec<broker::Queue>,
    /// What it sent and received through a broker, by stamp.
    pub(crate) ledger: Ledger,
    /// What it wrote to and saw in a team's calendar, by stamp.
    pub(crate) visibility: crate::visibility::Book,
    /// Its connections.
    pub(crate) wire: Wire,
}

impl Handoff {
    /// Add another user's.
    pub(crate) fn absorb(&mut self, o: Handoff) {
        self.leftovers.extend(o.leftovers);
        self.queues.extend(o.queues);
        self.ledger.absorb(o.ledger);
        self.visibility.absorb(o.visibility);
        self.wire.absorb(o.wire);
    }
}

/// One user of a protocol, for one round (or one open-model session): fresh state each
/// time, its own connection, no lock shared with another user.
#[async_trait]
pub(crate) trait User: Send {
    /// Untimed preparation before the round's clock starts: an account, discovery, a
    /// broker session.
    async fn setup(&mut self) -> Result<(), SetupError> {
        Ok(())
    }

    /// The requests sent off the clock since this was last asked (set-up's), by method
    /// and status.
    fn take_untimed(&mut self) -> Tally {
        Tally::new()
    }

    /// Whether the user can go on into the next round with what it holds (its account,
    /// what it made, its connection) when the run keeps state (`run.keep_state`): a user
    /// over HTTP can; a broker user's subscription and ledger belong to their round.
    fn keeps_state(&self) -> bool {
        false
    }

    /// A kept user begins round `round` (from 1): what it numbers by round (a template's
    /// `{round}`) follows.
    fn begin_round(&mut self, _round: u32) {}

    /// A kept user's connection counts since it last handed them over, at the end of a
    /// round or session it goes on from: what it made stays its own, and is not listed.
    fn take_wire(&mut self) -> Wire {
        Wire::default()
    }

    /// The answers put in doubt since this was last asked: bytes nobody asked for were
    /// found after them on their connection (see [`crate::transport::Doubt`]).
    fn take_doubt(&mut self) -> crate::transport::Doubt {
        crate::transport::Doubt::default()
    }

    /// When the user's round ends (`None`: when its iterations are done): a protocol that
    /// waits for what may come (a consumer's receive) stops waiting there.
    fn round_ends_at(&mut self, _end: Option<tokio::time::Instant>) {}

    /// True when the user must first make something of its own (a collection, outside
    /// its table, as the 2007 client did).
    fn needs_bootstrap(&self) -> bool {
        false
    }

    /// Make that first thing; the outcome's label says which operation it counts as.
    async fn bootstrap(&mut self, _rng: &mut DataRng) -> Done {
        Done::Skipped
    }

    /// Give the user the data the class asks for before the first pick: a calendar's
    /// `initial_events` in what set-up's bootstrap made, an http class's `prefill:` in its
    /// pools. Set-up only: a bootstrap made again during the round is measured and is
    /// not filled. Why it failed, if it did.
    async fn prefill(&mut self, _rng: &mut DataRng) -> Result<(), String> {
        Ok(())
    }

    /// Run operation `op` (an index into the class's table, which the resolver built the
    /// driver from); `seq` counts this user's picks.
    async fn execute(&mut self, op: usize, seq: u64, rng: &mut DataRng) -> Done;

    /// Whether a behaviour's guard holds for this user now; a protocol without guards
    /// says no (the resolver refuses guards it does not have).
    fn guard_holds(&self, _guard: &Guard) -> bool {
        false
    }

    /// What the user still waits for when its round ends (a producer's outstanding
    /// confirms), awaited: an outcome of steps only; `None` when nothing was outstanding.
    async fn finish(&mut self) -> Option<Outcome> {
        None
    }

    /// A returning user's session is over and the user will be back for another: what it
    /// waits for is awaited as at [`User::finish`], but its connections stay open, as a
    /// client that stays running keeps them between bursts of work.
    async fn rest(&mut self) -> Option<Outcome> {
        self.finish().await
    }

    /// What it leaves for the round's teardown and its connection counts, taken once
    /// when it ends.
    fn hand_off(&mut self) -> Handoff;
}

/// What the preflight of a class is given: one probe against the target before any
/// round, with an account of its own.
pub(crate) struct Preflight<'a> {
    /// The workload, for the account's session.
    pub(crate) workload: &'a Workload,
    /// The class probed.
    pub(crate) class: &'a UserClass,
    /// The target and its timeouts.
    pub(crate) reach: Reach,
    /// The probe's own ids (round 0, a run id of its own).
    pub(crate) ids: VuIds,
    /// How accounts are made.
    pub(crate) accounts: &'a AccountPlan,
    /// The probe's requests, by method and status (behind a lock only so that a
    /// connection can count into it while the probe still reads the rest).
    pub(crate) tally: &'a std::sync::Mutex<Tally>,
}

impl Preflight<'_> {
    /// A failed probe, in the words every protocol's preflight uses.
    pub(crate) fn failed(&self, request: String, answer: String) -> ProtocolError {
        ProtocolError::Preflight {
            class: self.class.name.clone(),
            protocol: self.class.protocol.name(),
            request,
            answer,
        }
    }
}

/// A protocol's driver: what every user of a class shares, built once per run, and the
/// users it makes.
#[async_trait]
pub(crate) trait Protocol: Send + Sync + 'static {
    /// One user's state.
    type User: User + 'static;

    /// Fresh state for one user (a round's, or an open-model session's).
    fn user(self: &Arc<Self>, session: super::Session, ids: VuIds, reach: Reach) -> Self::User;

    /// One probe against the target before the clock starts (exit 3 when it fails).
    async fn preflight(self: &Arc<Self>, cx: Preflight<'_>) -> Result<(), ProtocolError>;
}

/// A protocol with its user type erased, so that classes of several protocols sit side
/// by side.
#[async_trait]
pub(super) trait AnyProtocol: Send + Sync {
    fn user(&self, session: super::Session, ids: VuIds, reach: Reach) -> Box<dyn User>;
    async fn preflight(&self, cx: Preflight<'_>) -> Result<(), ProtocolError>;
}

#[async_trait]
impl<P: Protocol> AnyProtocol for Arc<P> {
    fn user(&self, session: super::Session, ids: VuIds, reach: Reach) -> Box<dyn User> {
        Box::new(Protocol::user(self, session, ids, reach))
    }

    async fn preflight(&self, cx: Preflight<'_>) -> Result<(), ProtocolError> {
        Protocol::preflight(self, cx).await
    }
}

/// A class's `User-Agent` template with the user's own values in it; `None` if what came
/// out is no header value (the workload checks the template; the run id is loadmix's).
fn user_agent(template: &str, class: &str, ids: &VuIds) -> Option<hyper::header::HeaderValue> {
    let text = template
        .replace("{version}", env!("CARGO_PKG_VERSION"))
        .replace("{run_id}", &ids.run_id)
        .replace("{class}", class)
        .replace("{vu}", &ids.vu.to_string());
    hyper::header::HeaderValue::from_str(&text).ok()
}
