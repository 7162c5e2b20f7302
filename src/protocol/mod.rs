//! Protocol drivers: what an operation sends, how its answer is judged, and the per-VU state
//! that carries over between operations (collections, items, tokens, ETags, captures).
//!
//! The engine knows nothing of HTTP paths, bodies or brokers; a driver knows nothing of
//! scheduling. The boundary is the [`contract`]: a class's [`contract::Protocol`] (built
//! once, probed before the clock) and a user's [`User`] (`setup`, untimed; `bootstrap`,
//! a first collection made outside the table, as in 2007; `execute`, one operation of the
//! table in, one [`Done`] out; `finish`; `hand_off`, what the round's teardown removes).
//! [`ClassDriver::new`] is the one place that names each protocol; `teardown.rs` is the
//! round's end for every protocol (HTTP leftovers deleted, broker destinations drained).
//!
//! An [`Outcome`] carries the protocol's [`Answer`]: an HTTP status, or a named answer in
//! the protocol's own words. The wire formats (EIMML, EIM-JSON, iCalendar, WebDAV XML,
//! STOMP frames) are parsed with `crate::formats`, the code the embedded server uses too,
//! so a client and the server cannot disagree on a grammar. Each driver's schema and
//! typed operations are in `workload/protocols/`, in the file of the same name.

pub(crate) mod amqp;
pub(crate) mod atom;
pub(crate) mod auth;
mod broker;
pub(crate) use broker::{StampClock, Stamping};
pub(crate) mod caldav;
pub(crate) mod carddav;
pub(crate) mod cleanup;
pub(crate) mod contract;
pub(crate) mod data;
mod dav;
pub(crate) mod drain;
pub(crate) mod http;
pub(crate) mod morse;
pub(crate) mod over_broker;
pub(crate) mod over_http;
pub(crate) mod products;
pub(crate) mod scheduling;
pub(crate) mod session;
pub(crate) mod stomp;
pub(crate) mod teams;
pub(crate) mod teardown;

use std::sync::Arc;
use std::time::Duration;

use crate::answer::Answer;
use crate::transport::{Endpoint, ErrorClass, Handshake, Tally, Timeouts};
use crate::workload::{ClassKind, Operation, UserClass, Workload};
pub(crate) use contract::{Done, Handoff, Reach, User};
pub(crate) use products::{RoundProducts, RunProducts};
pub(crate) use session::{AccountPlan, Session};

/// The largest Morse Code or Atom answer a user keeps: its records are parsed whole, so
/// the bound is on what one user holds (a collection of thousands of items is a few MiB).
/// A larger answer is the operation's `body` failure.
pub(crate) const MAX_FEED_BODY: usize = 16 << 20;

/// What one operation did.
#[derive(Debug, Clone, Default)]
pub(crate) struct Outcome {
    /// A refinement of the operation's label (index into the class's labels), e.g. Morse
    /// Code `sync` reported as `sync_no_change`. `None` keeps the operation's own label.
    pub label: Option<usize>,
    /// The answer to its last request (an HTTP status, a protocol's named answer);
    /// `Answer::NONE` when none arrived.
    pub answer: Answer,
    /// The answers to earlier requests of the same operation, when it sent more than one
    /// (a sync whose token was rejected, then repeated from scratch; a 401 challenge, then
    /// the request with its answer): counted with the others, so the report's answers add
    /// up to what the server sent.
    pub prior: Vec<Answer>,
    /// `None` is success: the expected answer and a body that parses.
    pub error: Option<ErrorClass>,
    /// Why it failed, for the first few failures shown in the report.
    pub detail: Option<String>,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Time spent on the wire (the sum over the operation's requests).
    pub latency: Duration,
    /// The longest any one of its requests waited for its answer (what a client's own
    /// timeout is held to); zero when the driver does not say, and then `latency` is.
    pub longest: Duration,
    /// Time spent opening connections for its requests (TCP connect, TLS handshake), part
    /// of `latency`; `None` when every request went out on an open connection.
    pub handshake: Option<Handshake>,
    /// An operation made of steps: each step's own outcome and label (reported apart,
    /// left out of the totals, which count the operation once).
    pub steps: Vec<(usize, Outcome)>,
}

/// Where in a user's set-up a request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Creating the user's account (CMP).
    Account,
    /// Finding the calendar or address book home (CalDAV, CardDAV).
    Discovery,
    /// Connecting to a message broker, its queue or subscription (STOMP, AMQP).
    Broker,
    /// Making, granting or finding a team's shared calendar (CalDAV) or collection
    /// (Morse Code).
    Team,
}

impl Stage {
    /// The stage in a message's words.
    pub(crate) fn words(self) -> &'static str {
        match self {
            Stage::Account => "account creation",
            Stage::Discovery => "home discovery",
            Stage::Broker => "broker set-up",
            Stage::Team => "team set-up",
        }
    }
}

/// A user's set-up failed: at which stage, the request, and what came back.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}: {request} -> {answer}", stage.words())]
pub(crate) struct SetupError {
    pub(crate) stage: Stage,
    pub(crate) request: String,
    pub(crate) answer: String,
}

impl SetupError {
    /// The request that failed.
    pub(crate) fn request(&self) -> &str {
        &self.request
    }

    /// What came back.
    pub(crate) fn answer(&self) -> &str {
        &self.answer
    }

    /// The same failure with the reason a 401 stood added to its answer.
    pub(crate) fn explained(self, why: &str) -> SetupError {
        SetupError {
            answer: format!("{}: {why}", self.answer),
            ..self
        }
    }

    /// The request and the answer, for a preflight message.
    pub(crate) fn parts(self) -> (String, String) {
        (
            format!("{}: {}", self.stage.words(), self.request),
            self.answer,
        )
    }
}

/// Errors that stop a run before it starts.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum ProtocolError {
    /// A workload's account set-up cannot work (exit 2).
    #[error("accounts: {0}")]
    Setup(String),
    /// The target does not speak a protocol the workload uses (exit 3).
    #[error("preflight of class '{class}' ({protocol}) failed: {request} -> {answer}")]
    Preflight {
        class: String,
        protocol: &'static str,
        request: String,
        answer: String,
    },
}

/// The statuses an operation accepts: the workload's `expect`, or the protocol's.
pub(crate) fn expect_of(op: &Operation, default: &[u16]) -> Vec<u16> {
    op.expect.clone().unwrap_or_else(|| default.to_vec())
}

/// The statuses a bootstrap operation accepts: those of the same operation in the table
/// when it is there (`is_it`), else the protocol's.
pub(crate) fn bootstrap_expect<T>(
    ops: &[T],
    expect: &[Vec<u16>],
    is_it: impl Fn(&T) -> bool,
    default: &[u16],
) -> Vec<u16> {
    ops.iter()
        .position(is_it)
        .and_then(|i| expect.get(i).cloned())
        .unwrap_or_else(|| default.to_vec())
}

/// What every user of a class shares, built once per run: its protocol's driver and how
/// its accounts are made.
pub(crate) struct ClassDriver {
    protocol: Box<dyn contract::AnyProtocol>,
    accounts: Arc<AccountPlan>,
}

impl ClassDriver {
    /// The one place that turns a class's kind into its protocol's driver: every other
    /// step goes through the [`contract`] without asking which protocol it is.
    pub(crate) fn new(
        workload: &Workload,
        class: &UserClass,
        seed: u64,
        accounts: AccountPlan,
        run_id: &str,
        stamping: &Stamping,
        board: &Arc<teams::Board>,
    ) -> ClassDriver {
        // The class's index in every stamp its producers write.
        let index = workload
            .classes
            .iter()
            .position(|c| c.name == class.name)
            .and_then(|i| u16::try_from(i).ok())
            .unwrap_or(u16::MAX);
        let accounts = Arc::new(accounts);
        let a = &accounts;
        let protocol: Box<dyn contract::AnyProtocol> = match &class.kind {
            ClassKind::Http {
                requests,
                pools,
                prefill,
            } => Box::new(Arc::new(http::HttpClass::new(
                workload, class, requests, pools, prefill, seed,
            ))),
            ClassKind::Morse { params, ops } => {
                let team = teams::TeamPlan::of(workload, usize::from(index));
                Box::new(Arc::new(morse::MorseClass::new(
                    class, ops, params, a, team, board,
                )))
            }
            ClassKind::Atom { params, ops } => {
                let team = teams::TeamPlan::of(workload, usize::from(index));
                Box::new(Arc::new(atom::AtomClass::new(
                    class, ops, params, a, team, board,
                )))
            }
            ClassKind::Caldav { params, ops } => {
                let team = teams::TeamPlan::of(workload, usize::from(index));
                Box::new(Arc::new(caldav::CaldavClass::new(
                    class, ops, params, a, team, board,
                )))
            }
            ClassKind::Carddav { params, ops } => {
                Box::new(Arc::new(carddav::CarddavClass::new(class, ops, params, a)))
            }
            ClassKind::Stomp { params, ops } => Box::new(Arc::new(stomp::StompClass::new(
                class, ops, params, index, run_id, stamping,
            ))),
            ClassKind::Amqp { params, ops } => Box::new(Arc::new(amqp::AmqpClass::new(
                class, ops, params, index, run_id, stamping,
            ))),
        };
        ClassDriver { protocol, accounts }
    }

    /// One probe against the target before the clock starts, with an account of its own
    /// (what each protocol probes is its own: a TCP connect, a publish and delete of a
    /// one-item collection, calendar-home discovery, a broker login); its requests are
    /// counted into `tally`.
    pub(crate) async fn preflight(
        &self,
        w: &Workload,
        class: &UserClass,
        endpoint: &Arc<Endpoint>,
        timeouts: Timeouts,
        run_id: &Arc<str>,
        tally: &mut Tally,
    ) -> Result<(), ProtocolError> {
        let counted = std::sync::Mutex::new(Tally::new());
        let cx = contract::Preflight {
            workload: w,
            class,
            reach: Reach::of(endpoint, class, timeouts),
            ids: VuIds {
                vu: 0,
                round: 0,
                run_id: format!("{run_id}-preflight").into(),
            },
            accounts: &self.accounts,
            tally: &counted,
        };
        let done = self.protocol.preflight(cx).await;
        crate::transport::add_tally(
            tally,
            counted.into_inner().unwrap_or_else(|p| p.into_inner()),
        );
        done
    }

    /// Fresh state of user `ids` for a round (or an open-model session).
    pub(crate) fn new_vu(
        &self,
        w: &Workload,
        class: &UserClass,
        ids: VuIds,
        endpoint: &Arc<Endpoint>,
        timeouts: Timeouts,
    ) -> VuDriver {
        let session = self.accounts.session(w, class, &ids);
        let reach = Reach::of_user(endpoint, class, timeouts, &ids);
        VuDriver(self.protocol.user(session, ids, reach))
    }
}

/// Who a VU is, for templates and for naming what it creates.
#[derive(Debug, Clone)]
pub(crate) struct VuIds {
    /// Index within its class, from 0.
    pub vu: u32,
    /// Round number, from 1.
    pub round: u32,
    pub run_id: Arc<str>,
}

/// One user's protocol state, whatever its protocol: the engine's handle on a
/// [`contract::User`].
pub(crate) struct VuDriver(Box<dyn User>);

impl std::ops::Deref for VuDriver {
    type Target = dyn User;
    fn deref(&self) -> &(dyn User + 'static) {
        &*self.0
    }
}

impl std::ops::DerefMut for VuDriver {
    fn deref_mut(&mut self) -> &mut (dyn User + 'static) {
        &mut *self.0
    }
}
