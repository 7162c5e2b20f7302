//! Protocol drivers: what an operation sends, how its answer is judged, and the per-VU state
//! that carries over between operations (collections, items, tokens, ETags, captures).
//!
//! The engine knows nothing of HTTP paths or bodies; a driver knows nothing of scheduling.
//! The boundary is [`VuDriver`]: `setup` (untimed: account, discovery), `needs_bootstrap` /
//! `bootstrap` (a user with no collection makes one, outside its table, as in 2007), and
//! `execute` (one operation of the table in, one [`Outcome`] out).
//!
//! An [`Outcome`] carries the protocol's [`Answer`]: an HTTP status, or a named answer in
//! the protocol's own words. The wire formats (EIMML, EIM-JSON, iCalendar, WebDAV XML,
//! STOMP frames) are parsed with `crate::formats`, the code the embedded server uses too,
//! so a client and the server cannot disagree on a grammar. Each driver's schema and
//! typed operations are in `workload/protocols/`, in the file of the same name.

pub mod amqp;
pub mod atom;
pub mod auth;
mod broker;
pub use broker::StampClock;
pub mod caldav;
pub mod cleanup;
pub mod data;
pub mod drain;
pub mod http;
pub mod morse;
pub mod session;
pub mod stomp;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;

use crate::answer::Answer;
use crate::transport::{Conn, Endpoint, ErrorClass, Handshake, Reuse, Timeouts};
use crate::workload::{ClassKind, Connection, Operation, UserClass, Workload};
pub use session::{AccountPlan, Session};

/// What one operation did.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
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
    /// Nothing to act on, nothing sent, nothing recorded (a get on an empty calendar).
    pub skipped: bool,
    /// Time spent opening connections for its requests (TCP connect, TLS handshake), part
    /// of `latency`; `None` when every request went out on an open connection.
    pub handshake: Option<Handshake>,
    /// An operation made of steps: each step's own outcome and label (reported apart,
    /// left out of the totals, which count the operation once).
    pub steps: Vec<(usize, Outcome)>,
}

/// Why a user's untimed set-up failed: the request that failed and what came back.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SetupError {
    /// Creating the user's account (CMP).
    #[error("account creation: {request} -> {answer}")]
    Account { request: String, answer: String },
    /// Finding the calendar home (CalDAV).
    #[error("calendar home discovery: {request} -> {answer}")]
    Discovery { request: String, answer: String },
    /// Connecting to a message broker, its queue or subscription (STOMP, AMQP).
    #[error("broker set-up: {request} -> {answer}")]
    Broker { request: String, answer: String },
}

impl SetupError {
    /// The request that failed.
    pub fn request(&self) -> &str {
        match self {
            SetupError::Account { request, .. }
            | SetupError::Discovery { request, .. }
            | SetupError::Broker { request, .. } => request,
        }
    }

    /// What came back.
    pub fn answer(&self) -> &str {
        match self {
            SetupError::Account { answer, .. }
            | SetupError::Discovery { answer, .. }
            | SetupError::Broker { answer, .. } => answer,
        }
    }

    /// The same failure with the reason a 401 stood added to its answer.
    fn explained(self, why: &str) -> SetupError {
        match self {
            SetupError::Account { request, answer } => SetupError::Account {
                request,
                answer: format!("{answer}: {why}"),
            },
            SetupError::Discovery { request, answer } => SetupError::Discovery {
                request,
                answer: format!("{answer}: {why}"),
            },
            SetupError::Broker { request, answer } => SetupError::Broker {
                request,
                answer: format!("{answer}: {why}"),
            },
        }
    }

    /// The request and the answer, for a preflight message.
    fn parts(self) -> (String, String) {
        match self {
            SetupError::Account { request, answer } => {
                (format!("account creation: {request}"), answer)
            }
            SetupError::Discovery { request, answer } => {
                (format!("calendar home discovery: {request}"), answer)
            }
            SetupError::Broker { request, answer } => (format!("broker set-up: {request}"), answer),
        }
    }
}

/// Errors that stop a run before it starts.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProtocolError {
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

/// A user's connection to the target, as its class says: kept alive or one per request,
/// and whether new TLS connections may resume a session.
pub fn connection(endpoint: &Arc<Endpoint>, class: &UserClass, timeouts: Timeouts) -> Conn {
    let reuse = match class.connection {
        Connection::KeepAlive => Reuse::KeepAlive,
        Connection::PerRequest => Reuse::PerRequest,
    };
    let conn = Conn::new(endpoint.clone(), reuse, timeouts);
    if class.tls_resumption {
        conn
    } else {
        conn.without_tls_resumption()
    }
}

/// The statuses an operation accepts: the workload's `expect`, or the protocol's.
pub fn expect_of(op: &Operation, default: &[u16]) -> Vec<u16> {
    op.expect.clone().unwrap_or_else(|| default.to_vec())
}

/// The statuses a bootstrap operation accepts: those of the same operation in the table
/// when it is there (`is_it`), else the protocol's.
pub fn bootstrap_expect<T>(
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

enum Kind {
    Http(Arc<http::HttpClass>),
    Morse(Arc<morse::MorseClass>),
    Atom(Arc<atom::AtomClass>),
    Caldav(Arc<caldav::CaldavClass>),
    Stomp(Arc<stomp::StompClass>),
    Amqp(Arc<amqp::AmqpClass>),
}

/// What every VU of a class shares, built once per run.
pub struct ClassDriver {
    kind: Kind,
    accounts: AccountPlan,
}

impl ClassDriver {
    pub fn new(
        workload: &Workload,
        class: &UserClass,
        seed: u64,
        accounts: AccountPlan,
        (run_id, clock): (&str, StampClock),
    ) -> ClassDriver {
        // The class's index in every stamp its producers write.
        let index = workload
            .classes
            .iter()
            .position(|c| c.name == class.name)
            .and_then(|i| u16::try_from(i).ok())
            .unwrap_or(u16::MAX);
        let kind = match &class.kind {
            ClassKind::Http { requests, pools } => Kind::Http(Arc::new(http::HttpClass::new(
                workload, class, requests, pools, seed,
            ))),
            ClassKind::Morse { params, ops } => {
                Kind::Morse(Arc::new(morse::MorseClass::new(class, ops, params)))
            }
            ClassKind::Atom { params, ops } => {
                Kind::Atom(Arc::new(atom::AtomClass::new(class, ops, params)))
            }
            ClassKind::Caldav { params, ops } => {
                Kind::Caldav(Arc::new(caldav::CaldavClass::new(class, ops, params)))
            }
            ClassKind::Stomp { params, ops } => Kind::Stomp(Arc::new(stomp::StompClass::new(
                class, ops, params, index, run_id, clock,
            ))),
            ClassKind::Amqp { params, ops } => Kind::Amqp(Arc::new(amqp::AmqpClass::new(
                class, ops, params, index, run_id, clock,
            ))),
        };
        ClassDriver { kind, accounts }
    }

    /// One probe against the target before the clock starts, with an account of its own:
    /// a TCP connect (http), a publish and delete of a one-item collection (Morse Code,
    /// Atom), or calendar-home discovery (CalDAV).
    pub async fn preflight(
        &self,
        w: &Workload,
        class: &UserClass,
        endpoint: &Arc<Endpoint>,
        timeouts: Timeouts,
        run_id: &Arc<str>,
        tally: &mut crate::transport::Tally,
    ) -> Result<(), ProtocolError> {
        let fail = |request: String, answer: String| ProtocolError::Preflight {
            class: class.name.clone(),
            protocol: class.protocol.name(),
            request,
            answer,
        };
        // Something listens, and for https the certificate is trusted: said plainly here
        // rather than as every request's failure.
        if let Kind::Stomp(_) | Kind::Amqp(_) = &self.kind {
            return self
                .broker_preflight(w, class, endpoint, timeouts, run_id)
                .await;
        }
        if !endpoint.speaks_http {
            return Err(fail(
                format!(
                    "{} over HTTP to {}",
                    class.protocol.name(),
                    endpoint.display
                ),
                "the target is a message broker (stomp://), not an HTTP server".into(),
            ));
        }
        let what = match endpoint.tls {
            Some(_) => "TLS connection to",
            None => "TCP connect to",
        };
        crate::transport::probe(endpoint, timeouts.connect)
            .await
            .map_err(|a| fail(format!("{what} {}", endpoint.display), a.to_string()))?;
        if let Kind::Http(_) = self.kind {
            return Ok(());
        }
        let ids = VuIds {
            vu: 0,
            round: 0,
            run_id: format!("{run_id}-preflight").into(),
        };
        let mut conn = Counted::new(connection(endpoint, class, timeouts), tally);
        let s = self.accounts.session(w, class, &ids);
        self.accounts
            .create_account(&s, &mut conn)
            .await
            .map_err(|e| {
                let (request, answer) = e.parts();
                fail(request, answer)
            })?;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        match &self.kind {
            Kind::Http(_) | Kind::Stomp(_) | Kind::Amqp(_) => Ok(()),
            Kind::Morse(_) | Kind::Atom(_) => {
                let (o, created) = morse::publish(&s, &ids, &mut conn, &mut rng, 0, &[201]).await;
                let Some((uid, _, _)) = created else {
                    let why = s.auth.as_ref().and_then(|a| a.take_refusal());
                    return Err(fail(
                        format!("Morse Code publish (PUT {}/mc/collection/…)", s.context),
                        match why {
                            Some(w) => format!("{}: {w}", o.detail.unwrap_or_default()),
                            None => o.detail.unwrap_or_default(),
                        },
                    ));
                };
                let path = format!("{}/mc/collection/{uid}", s.context);
                match s.send(&mut conn, "DELETE", &path, &[], Bytes::new()).await {
                    session::Exchange::Answer(r) if r.status.as_u16() == 204 => Ok(()),
                    session::Exchange::Answer(r) => {
                        Err(fail(format!("DELETE {path}"), r.status.to_string()))
                    }
                    session::Exchange::Failed(o) => {
                        Err(fail(format!("DELETE {path}"), o.detail.unwrap_or_default()))
                    }
                }
            }
            Kind::Caldav(c) => {
                let auth = s.auth.clone();
                let mut vu = caldav::CaldavVu::new(c.clone(), s, ids);
                vu.setup(&mut conn).await.map_err(|e| {
                    let e = match auth.as_ref().and_then(|a| a.take_refusal()) {
                        Some(why) => e.explained(&why),
                        None => e,
                    };
                    let (request, answer) = e.parts();
                    fail(request, answer)
                })
            }
        }
    }

    /// A broker is probed by logging in, over its own protocol, with an account of the
    /// preflight's own.
    async fn broker_preflight(
        &self,
        w: &Workload,
        class: &UserClass,
        endpoint: &Arc<Endpoint>,
        timeouts: Timeouts,
        run_id: &Arc<str>,
    ) -> Result<(), ProtocolError> {
        let ids = VuIds {
            vu: 0,
            round: 0,
            run_id: format!("{run_id}-preflight").into(),
        };
        let conn = connection(endpoint, class, timeouts);
        let s = self.accounts.session(w, class, &ids);
        match &self.kind {
            Kind::Stomp(c) => stomp::preflight(c, &s, &conn).await,
            Kind::Amqp(c) => amqp::preflight(c, &s, &ids, &conn).await,
            _ => Ok(()),
        }
    }

    /// Fresh per-VU state for a round.
    pub fn new_vu(&self, w: &Workload, class: &UserClass, ids: VuIds) -> VuDriver {
        let s = self.accounts.session(w, class, &ids);
        let accounts = self.accounts.clone();
        let state = match &self.kind {
            Kind::Http(c) => VuState::Http(c.new_vu(ids, s.auth.clone())),
            Kind::Morse(c) => VuState::Morse(morse::MorseVu::new(c.clone(), s.clone(), ids)),
            Kind::Atom(c) => VuState::Atom(atom::AtomVu::new(c.clone(), s.clone(), ids)),
            Kind::Caldav(c) => VuState::Caldav(caldav::CaldavVu::new(c.clone(), s.clone(), ids)),
            Kind::Stomp(c) => VuState::Stomp(stomp::StompVu::new(c.clone(), s.clone(), ids)),
            Kind::Amqp(c) => VuState::Amqp(amqp::AmqpVu::new(c.clone(), s.clone(), ids)),
        };
        VuDriver {
            state,
            session: s,
            accounts,
        }
    }
}

/// Who a VU is, for templates and for naming what it creates.
#[derive(Debug, Clone)]
pub struct VuIds {
    /// Index within its class, from 0.
    pub vu: u32,
    /// Round number, from 1.
    pub round: u32,
    pub run_id: Arc<str>,
}

enum VuState {
    Http(http::HttpVu),
    Morse(morse::MorseVu),
    Atom(atom::AtomVu),
    Caldav(caldav::CaldavVu),
    Stomp(stomp::StompVu),
    Amqp(amqp::AmqpVu),
}

/// Per-VU protocol state.
pub struct VuDriver {
    state: VuState,
    session: Session,
    accounts: AccountPlan,
}

impl VuDriver {
    /// Untimed preparation before the round's clock starts: the account, discovery.
    pub async fn setup(&mut self, conn: &mut Conn) -> Result<(), SetupError> {
        // Accounts are made over CMP, which a broker does not speak.
        if !matches!(
            self.state,
            VuState::Http(_) | VuState::Stomp(_) | VuState::Amqp(_)
        ) {
            self.accounts.create_account(&self.session, conn).await?;
        }
        let done = match &mut self.state {
            VuState::Caldav(v) => v.setup(conn).await,
            VuState::Stomp(v) => v.setup(conn).await,
            VuState::Amqp(v) => v.setup(conn).await,
            _ => Ok(()),
        };
        done.map_err(|e| match self.refusal() {
            Some(why) => e.explained(&why),
            None => e,
        })
    }

    /// What this user made and the end of the round removes; `None` when nothing.
    pub fn leftovers(&self) -> Option<cleanup::Leftovers> {
        let items = match &self.state {
            VuState::Http(v) => v.leftovers(),
            VuState::Morse(v) => v.leftovers(),
            VuState::Atom(v) => v.leftovers(),
            VuState::Caldav(v) => v.leftovers(),
            VuState::Stomp(v) => v.leftovers(),
            VuState::Amqp(v) => v.leftovers(),
        };
        (!items.is_empty()).then(|| cleanup::Leftovers {
            session: self.session.clone(),
            items,
        })
    }

    /// What the user still waits for when its round ends (a producer's outstanding
    /// confirms), awaited: an outcome of steps only; `None` when nothing was outstanding.
    pub async fn finish(&mut self, conn: &Conn) -> Option<Outcome> {
        match &mut self.state {
            VuState::Stomp(v) => v.finish(conn).await,
            VuState::Amqp(v) => v.finish(conn).await,
            _ => None,
        }
    }

    /// The broker destinations of the run's own this user used, for the teardown.
    pub fn queues(&self) -> Vec<drain::Queue> {
        match &self.state {
            VuState::Stomp(v) => v.queues(),
            VuState::Amqp(v) => v.queues(),
            _ => Vec::new(),
        }
    }

    /// What this user sent and received through a broker, by stamp.
    pub fn take_ledger(&mut self) -> Option<crate::ledger::Ledger> {
        match &mut self.state {
            VuState::Stomp(v) => v.take_ledger(),
            VuState::Amqp(v) => v.take_ledger(),
            _ => None,
        }
    }

    /// Why the last 401 stood, if one did since this was last asked.
    fn refusal(&self) -> Option<String> {
        self.session.auth.as_ref().and_then(|a| a.take_refusal())
    }

    /// A 401 failure says what the server asked for and whether the credentials were
    /// refused, not just "401".
    fn explained(&self, mut o: Outcome) -> Outcome {
        if let Some(why) = self.refusal()
            && o.answer == Answer::http(401)
            && o.error.is_some()
        {
            o.detail = Some(format!("{}: {why}", o.detail.unwrap_or_default()));
        }
        o
    }

    /// Whether a behaviour's guard holds for this user now. Pools are http's; the
    /// resolver refuses pool guards elsewhere, and any other driver says no.
    pub fn guard_holds(&self, guard: &crate::workload::chain::Guard) -> bool {
        match (&self.state, guard) {
            (VuState::Http(v), crate::workload::chain::Guard::Pool { index, .. }) => {
                v.pool_holds(*index)
            }
            _ => false,
        }
    }

    /// True when the VU must first make a collection (outside its table).
    pub fn needs_bootstrap(&self) -> bool {
        match &self.state {
            VuState::Http(_) | VuState::Stomp(_) | VuState::Amqp(_) => false,
            VuState::Morse(v) => v.needs_bootstrap(),
            VuState::Atom(v) => v.needs_bootstrap(),
            VuState::Caldav(v) => v.needs_bootstrap(),
        }
    }

    /// Make the first collection; the outcome's label says which operation it counts as.
    pub async fn bootstrap(&mut self, conn: &mut Conn, rng: &mut Xoshiro256PlusPlus) -> Outcome {
        let o = match &mut self.state {
            VuState::Http(_) | VuState::Stomp(_) | VuState::Amqp(_) => Outcome::skipped(),
            VuState::Morse(v) => v.bootstrap(conn, rng).await,
            VuState::Atom(v) => v.bootstrap(conn, rng).await,
            VuState::Caldav(v) => v.bootstrap(conn, rng).await,
        };
        self.explained(o)
    }

    /// Run operation `op` (index into the class's table). `seq` counts this VU's operations.
    pub async fn execute(
        &mut self,
        op: usize,
        seq: u64,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Outcome {
        let o = match &mut self.state {
            VuState::Http(v) => v.execute(op, seq, conn, rng).await,
            VuState::Morse(v) => v.execute(op, conn, rng).await,
            VuState::Atom(v) => v.execute(op, conn, rng).await,
            VuState::Caldav(v) => v.execute(op, conn, rng).await,
            VuState::Stomp(v) => v.execute(op, conn, rng).await,
            VuState::Amqp(v) => v.execute(op, conn, rng).await,
        };
        if o.answer == Answer::http(401) {
            self.explained(o)
        } else {
            o
        }
    }
}

/// A connection whose exchanges are counted into `into` for as long as it lives (the
/// preflight's, which ends at any of its returns).
struct Counted<'a> {
    conn: Conn,
    into: &'a mut crate::transport::Tally,
}

impl<'a> Counted<'a> {
    fn new(mut conn: Conn, into: &'a mut crate::transport::Tally) -> Counted<'a> {
        conn.keep_tally();
        Counted { conn, into }
    }
}

impl std::ops::Deref for Counted<'_> {
    type Target = Conn;
    fn deref(&self) -> &Conn {
        &self.conn
    }
}

impl std::ops::DerefMut for Counted<'_> {
    fn deref_mut(&mut self) -> &mut Conn {
        &mut self.conn
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        crate::transport::add_tally(self.into, self.conn.take_tally());
    }
}
