//! What every driver over HTTP/1.1 shares: a user that owns its connection
//! ([`HttpUser`], the [`User`] of every HTTP protocol, around the protocol's own
//! [`OverHttp`] state), Cosmo's accounts made in its set-up when the protocol has them, a
//! refused 401 explained in the failure it caused, and the preflight's first probe.

use std::sync::Arc;

use async_trait::async_trait;

use super::contract::{DataRng, Done, Handoff, Preflight, Reach, User, Wire};
use super::session::{AccountPlan, Session};
use super::{ProtocolError, SetupError, cleanup};
use crate::answer::Answer;
use crate::transport::{Conn, Method, Tally};
use crate::workload::chain::Guard;

/// One user's state of a protocol over HTTP: the steps of [`User`], each given the
/// user's connection. Used only inside [`HttpUser`], never as a trait object, so its
/// steps are plain futures: the one allocation per step is [`User`]'s.
pub(crate) trait OverHttp: Send + 'static {
    /// Untimed preparation after the account: discovery.
    fn setup(&mut self, _conn: &mut Conn) -> impl Future<Output = Result<(), SetupError>> + Send {
        async { Ok(()) }
    }

    /// How the user's answers are read: kept whole up to the transport's bound, unless
    /// the protocol bounds them closer.
    fn body_use(&self) -> crate::transport::BodyUse {
        crate::transport::BodyUse::default()
    }

    /// True when the user must first make a collection, outside its table.
    fn needs_bootstrap(&self) -> bool {
        false
    }

    /// Make the first collection.
    fn bootstrap(
        &mut self,
        _conn: &mut Conn,
        _rng: &mut DataRng,
    ) -> impl Future<Output = Done> + Send {
        async { Done::Skipped }
    }

    /// Give the user the data its class asks for before the first pick (set-up only).
    fn prefill(
        &mut self,
        _conn: &mut Conn,
        _rng: &mut DataRng,
    ) -> impl Future<Output = Result<(), String>> + Send {
        async { Ok(()) }
    }

    /// Run operation `op` of the class's table.
    fn execute(
        &mut self,
        op: usize,
        seq: u64,
        conn: &mut Conn,
        rng: &mut DataRng,
    ) -> impl Future<Output = Done> + Send;

    /// Whether a behaviour's guard holds.
    fn guard_holds(&self, _guard: &Guard) -> bool {
        false
    }

    /// A kept user begins round `round`.
    fn begin_round(&mut self, _round: u32) {}

    /// What the user wrote to and saw in a team's calendar, by stamp, since it was last
    /// taken (nothing for a protocol without teams).
    fn take_book(&mut self) -> crate::visibility::Book {
        crate::visibility::Book::default()
    }

    /// What the user made and the end of the round removes.
    fn leftovers(&self) -> Vec<(Method, cleanup::Place)>;
}

/// A user over HTTP: the protocol's state, the connection it owns, its credentials.
pub(crate) struct HttpUser<V> {
    vu: V,
    conn: Conn,
    session: Session,
    /// How its account is made in set-up (Cosmo's CMP, when the workload asks for it);
    /// `None` for a protocol whose requests are the workload's own.
    accounts: Option<Arc<AccountPlan>>,
}

impl<V: OverHttp> HttpUser<V> {
    /// A user whose connection is built from `reach`.
    pub(crate) fn new(
        vu: V,
        session: Session,
        reach: &Reach,
        accounts: Option<Arc<AccountPlan>>,
    ) -> Self {
        let mut conn = connection(reach);
        conn.set_body_use(vu.body_use());
        HttpUser {
            vu,
            conn,
            session,
            accounts,
        }
    }

    /// Why the last 401 stood, if one did since this was last asked.
    fn refusal(&self) -> Option<String> {
        self.session.auth.as_ref().and_then(|a| a.take_refusal())
    }

    /// A 401 failure says what the server asked for and whether the credentials were
    /// refused, not just "401".
    fn explained(&self, done: Done) -> Done {
        let Done::Sent(mut o) = done else {
            return done;
        };
        if o.answer == Answer::http(401)
            && o.error.is_some()
            && let Some(why) = self.refusal()
        {
            o.detail = Some(format!("{}: {why}", o.detail.unwrap_or_default()));
        }
        Done::Sent(o)
    }
}

/// A user's HTTP/1.1 connection, as its reach says.
pub(crate) fn connection(reach: &Reach) -> Conn {
    let conn = Conn::new(reach.endpoint.clone(), reach.reuse, reach.timeouts)
        .with_user_agent(reach.user_agent.clone());
    match reach.resumes_tls {
        true => conn,
        false => conn.without_tls_resumption(),
    }
}

#[async_trait]
impl<V: OverHttp> User for HttpUser<V> {
    async fn setup(&mut self) -> Result<(), SetupError> {
        // Counted from here until the engine takes them: set-up is off the clock.
        self.conn.keep_tally();
        if let Some(accounts) = &self.accounts {
            accounts
                .create_account(&self.session, &mut self.conn)
                .await?;
        }
        let done = self.vu.setup(&mut self.conn).await;
        done.map_err(|e| match self.refusal() {
            Some(why) => e.explained(&why),
            None => e,
        })
    }

    fn take_untimed(&mut self) -> Tally {
        self.conn.take_tally()
    }

    fn keeps_state(&self) -> bool {
        true
    }

    fn begin_round(&mut self, round: u32) {
        self.vu.begin_round(round);
    }

    fn take_wire(&mut self) -> Wire {
        Wire {
            opened: std::mem::take(&mut self.conn.opened),
            retried: std::mem::take(&mut self.conn.retried),
            unsolicited: std::mem::take(&mut self.conn.unsolicited),
        }
    }

    fn take_doubt(&mut self) -> crate::transport::Doubt {
        std::mem::take(&mut self.conn.doubt)
    }

    fn needs_bootstrap(&self) -> bool {
        self.vu.needs_bootstrap()
    }

    async fn bootstrap(&mut self, rng: &mut DataRng) -> Done {
        let done = self.vu.bootstrap(&mut self.conn, rng).await;
        self.explained(done)
    }

    async fn prefill(&mut self, rng: &mut DataRng) -> Result<(), String> {
        self.vu.prefill(&mut self.conn, rng).await
    }

    async fn execute(&mut self, op: usize, seq: u64, rng: &mut DataRng) -> Done {
        let done = self.vu.execute(op, seq, &mut self.conn, rng).await;
        self.explained(done)
    }

    fn guard_holds(&self, guard: &Guard) -> bool {
        self.vu.guard_holds(guard)
    }

    fn hand_off(&mut self) -> Handoff {
        let items = self.vu.leftovers();
        Handoff {
            leftovers: (!items.is_empty())
                .then(|| cleanup::Leftovers {
                    session: self.session.clone(),
                    items,
                })
                .into_iter()
                .collect(),
            wire: self.take_wire(),
            visibility: self.vu.take_book(),
            ..Handoff::default()
        }
    }
}

/// The first probe of every protocol over HTTP: something listens, speaks HTTP, and for
/// https has a certificate loadmix trusts; said plainly here rather than as every
/// request's failure.
pub(crate) async fn probe(cx: &Preflight<'_>) -> Result<(), ProtocolError> {
    let endpoint = &cx.reach.endpoint;
    if !endpoint.scheme.speaks_http() {
        return Err(cx.failed(
            format!(
                "{} over HTTP to {}",
                cx.class.protocol.name(),
                endpoint.display
            ),
            "the target is a message broker (stomp://), not an HTTP server".into(),
        ));
    }
    let what = match endpoint.tls {
        Some(_) => "TLS connection to",
        None => "TCP connect to",
    };
    crate::transport::probe(endpoint, cx.reach.timeouts.connect)
        .await
        .map_err(|a| cx.failed(format!("{what} {}", endpoint.display), a.to_string()))
}

/// The probe, then an account of the preflight's own: its session, and a connection
/// whose requests count into the preflight's tally for as long as it lives.
pub(crate) async fn probe_with_account<'t>(
    cx: &'t Preflight<'_>,
) -> Result<(Session, Counted<'t>), ProtocolError> {
    probe(cx).await?;
    let session = cx.accounts.session(cx.workload, cx.class, &cx.ids);
    let mut conn = Counted::new(connection(&cx.reach), cx.tally);
    match cx.accounts.create_account(&session, &mut conn).await {
        Ok(()) => Ok((session, conn)),
        Err(e) => {
            let (request, answer) = e.parts();
            Err(cx.failed(request, answer))
        }
    }
}

/// A connection whose exchanges are counted into `into` for as long as it lives (the
/// preflight's, which ends at any of its returns).
pub(crate) struct Counted<'a> {
    conn: Conn,
    into: &'a std::sync::Mutex<Tally>,
}

impl<'a> Counted<'a> {
    fn new(mut conn: Conn, into: &'a std::sync::Mutex<Tally>) -> Counted<'a> {
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
        // A poisoned lock still holds the counts: a panic elsewhere loses none of them.
        let mut into = self.into.lock().unwrap_or_else(|p| p.into_inner());
        crate::transport::add_tally(&mut into, self.conn.take_tally());
    }
}
