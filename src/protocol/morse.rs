//! Morse Code users, as the 2007 client behaved: a user with
//! no collection publishes one first (outside its table); publish sizes are exponential
//! (mean 50, at most 3000, plus one item); a sync uses the newest token with probability
//! `no_change_sync` (reported as `sync_no_change`) or else a random earlier one; an update
//! sends one changed and one new item and, with probability `tombstone` when there are more
//! than five, deletes one; subscribe; delete. Answers are checked as EIMML.
//!
//! In a team, Cosmo's shared collections: the owner publishes one in its set-up with a
//! read-write ticket, and the members reach it with the ticket (`Ticket:`) instead of
//! the owner's credentials. Every user of the team then syncs it with its newest token,
//! as a client does, and updates it: a new item and one of its own changed, each
//! stamped (`teams.rs`; no tombstones), so that the syncs and subscribes of the others
//! say when they first saw them. An update the server refuses because another changed
//! the collection first (205) or is changing it (423) syncs and is sent once more; a
//! second refusal is contention (`update_contended`), not a failure.

use std::sync::Arc;

use bytes::Bytes;
use hyper::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use rand::Rng;
use rand::rngs::Xoshiro256PlusPlus;

use async_trait::async_trait;

use super::contract::{Done, Preflight, Protocol, Reach};
use super::over_http::{HttpUser, OverHttp};
use super::session::{AccountPlan, Exchange, Session};
use super::teams::{Board, Membership, Shared, TeamPlan};
use super::{Outcome, ProtocolError, SetupError, VuIds, bootstrap_expect, data, expect_of};
use crate::formats::eim;
use crate::transport::{Conn, Response};
use crate::visibility::Audience;
use crate::workload::protocols::MorseParams;
use crate::workload::{MorseOp as Op, UserClass};

const TOKEN: &str = "x-morsecode-synctoken";
const TICKET_TYPE: &str = "x-morsecode-tickettype";
const TICKET_ISSUED: &str = "x-morsecode-ticket";
/// The request header a ticket's key goes in (Cosmo's, from the WebDAV ticket draft).
const TICKET: &str = "ticket";

/// The collection an operation acts on (its index among the user's and its path), and
/// the statuses the operation accepts.
#[derive(Clone, Copy)]
struct Picked<'a> {
    ci: usize,
    path: &'a str,
    expect: &'a [u16],
}

pub(crate) struct MorseClass {
    ops: Vec<Op>,
    expect: Vec<Vec<u16>>,
    params: MorseParams,
    /// How its users' accounts are made, shared by all of them.
    accounts: Arc<AccountPlan>,
    /// Its team, when its users share a collection, and where the run's teams meet.
    team: Option<TeamPlan>,
    board: Arc<Board>,
}

impl MorseClass {
    pub(crate) fn new(
        class: &UserClass,
        (ops, params): (&[Op], &MorseParams),
        accounts: &Arc<AccountPlan>,
        (team, board): (Option<TeamPlan>, &Arc<Board>),
    ) -> MorseClass {
        let expect = class
            .ops
            .iter()
            .zip(ops)
            .map(|(o, k)| {
                expect_of(
                    o,
                    match k {
                        Op::Publish => &[201],
                        Op::Sync | Op::Subscribe => &[200],
                        Op::Update | Op::Delete => &[204],
                    },
                )
            })
            .collect();
        MorseClass {
            ops: ops.to_vec(),
            expect,
            params: params.clone(),
            accounts: accounts.clone(),
            team,
            board: board.clone(),
        }
    }
}

#[async_trait]
impl Protocol for MorseClass {
    type User = HttpUser<MorseVu>;

    fn user(self: &Arc<Self>, session: Session, ids: VuIds, reach: Reach) -> Self::User {
        let team = self
            .team
            .as_ref()
            .and_then(|p| Membership::of(p, (ids.vu, ids.round), &ids.run_id));
        let mut vu = MorseVu::new(self.clone(), session.clone(), ids);
        vu.team = team;
        HttpUser::new(vu, session, &reach, Some(self.accounts.clone()))
    }

    async fn preflight(self: &Arc<Self>, cx: Preflight<'_>) -> Result<(), ProtocolError> {
        preflight_publish(&cx).await
    }
}

/// The probe of Morse Code and Atom users: an account, then a one-item collection
/// published and deleted.
pub(crate) async fn preflight_publish(cx: &Preflight<'_>) -> Result<(), ProtocolError> {
    let (s, mut conn) = super::over_http::probe_with_account(cx).await?;
    let mut rng = <Xoshiro256PlusPlus as rand::SeedableRng>::seed_from_u64(1);
    let (o, created) = publish(&s, &cx.ids, &mut conn, &mut rng, 0, &[201]).await;
    let Some((uid, _, _)) = created else {
        let why = s.auth.as_ref().and_then(|a| a.take_refusal());
        return Err(cx.failed(
            format!("Morse Code publish (PUT {}/mc/collection/…)", s.context),
            match why {
                Some(w) => format!("{}: {w}", o.detail.unwrap_or_default()),
                None => o.detail.unwrap_or_default(),
            },
        ));
    };
    let path = format!("{}/mc/collection/{uid}", s.context);
    match s.send(&mut conn, "DELETE", &path, &[], Bytes::new()).await {
        Exchange::Answer(r) if r.status.as_u16() == 204 => Ok(()),
        Exchange::Answer(r) => Err(cx.failed(format!("DELETE {path}"), r.status.to_string())),
        Exchange::Failed(o) => {
            Err(cx.failed(format!("DELETE {path}"), o.detail.unwrap_or_default()))
        }
    }
}

struct Collection {
    uid: String,
    items: Vec<String>,
    tokens: Vec<String>,
    /// This user published it (a team's member reaches its owner's by ticket).
    owned: bool,
}

pub(crate) struct MorseVu {
    class: Arc<MorseClass>,
    s: Session,
    ids: VuIds,
    cols: Vec<Collection>,
    /// Its place in its team, when its class shares a collection.
    team: Option<Membership>,
    /// The ticket that opens the team's collection to a member (not to its owner).
    ticket: Option<HeaderValue>,
    /// The items this user wrote to its team's collection, each with the pick that made
    /// it: the event its later versions belong to.
    mine: Vec<(String, u64)>,
}

fn eim_header() -> (HeaderName, HeaderValue) {
    (
        CONTENT_TYPE,
        HeaderValue::from_static("application/eim+xml"),
    )
}

fn token_of(r: &Response) -> Option<String> {
    r.headers
        .get(TOKEN)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .filter(|t| !t.is_empty())
}

/// Publish a new collection of `n + 1` items; shared with the Atom driver's first step.
pub(crate) async fn publish(
    s: &Session,
    ids: &VuIds,
    conn: &mut Conn,
    rng: &mut Xoshiro256PlusPlus,
    n: usize,
    expect: &[u16],
) -> (Outcome, Option<(String, Vec<String>, String)>) {
    let (o, p) = publish_with(s, ids, conn, (rng, n), (expect, false)).await;
    (o, p.map(|p| (p.uid, p.items, p.token)))
}

/// A collection published: its uid, its items, its first token, and the read-write
/// ticket the server issued when one was asked for.
struct Published {
    uid: String,
    items: Vec<String>,
    token: String,
    ticket: Option<String>,
}

/// Publish `n + 1` items, asking for a read-write ticket when `ticket` (Cosmo's
/// `X-MorseCode-TicketType`); a ticket asked for and not issued fails the publish.
async fn publish_with(
    s: &Session,
    ids: &VuIds,
    conn: &mut Conn,
    (rng, n): (&mut Xoshiro256PlusPlus, usize),
    (expect, ticket): (&[u16], bool),
) -> (Outcome, Option<Published>) {
    let uid = data::uid(rng, &ids.run_id);
    let mut items = Vec::with_capacity(n + 1);
    let mut sets = Vec::with_capacity(n + 1);
    for _ in 0..=n {
        let item = data::uid(rng, &ids.run_id);
        sets.push(data::eim_records(rng, &item, &s.user, true));
        items.push(item);
    }
    let name = data::text(rng);
    let doc = eim::write_eimml(
        &uid,
        &name,
        items
            .iter()
            .zip(&sets)
            .map(|(u, r)| (u.as_str(), Some(r.as_slice()))),
    );
    let path = format!("{}/mc/collection/{uid}", s.context);
    let mut headers = vec![eim_header()];
    if ticket {
        headers.push((
            HeaderName::from_static(TICKET_TYPE),
            HeaderValue::from_static("read-write"),
        ));
    }
    let r = match s.send(conn, "PUT", &path, &headers, Bytes::from(doc)).await {
        Exchange::Answer(r) => r,
        Exchange::Failed(o) => return (o, None),
    };
    let o = Outcome::of(&r, expect, &format!("PUT {path}"));
    if !o.is_ok() {
        return (o, None);
    }
    let Some(token) = token_of(&r) else {
        let why = format!("PUT {path}: no X-MorseCode-SyncToken in the answer");
        return (o.body_error(why), None);
    };
    let issued = ticket_of(&r, "read-write");
    if ticket && issued.is_none() {
        let why = format!("PUT {path}: no read-write X-MorseCode-Ticket in the answer");
        return (o.body_error(why), None);
    }
    let p = Published {
        uid,
        items,
        token,
        ticket: issued,
    };
    (o, Some(p))
}

/// The key of the `kind` ticket a publish's answer issued: `X-MorseCode-Ticket: KIND=KEY`,
/// once per ticket or several to a line, comma-separated. A key is a token of printable
/// ASCII, at most 256 bytes; anything else is not one.
fn ticket_of(r: &Response, kind: &str) -> Option<String> {
    r.headers
        .get_all(TICKET_ISSUED)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|t| t.trim().split_once('='))
        .find(|(k, _)| *k == kind)
        .map(|(_, key)| key.to_string())
        .filter(|k| !k.is_empty() && k.len() <= 256 && k.bytes().all(|b| b.is_ascii_graphic()))
}

impl MorseVu {
    pub(crate) fn new(class: Arc<MorseClass>, s: Session, ids: VuIds) -> MorseVu {
        MorseVu {
            class,
            s,
            ids,
            cols: Vec::new(),
            team: None,
            ticket: None,
            mine: Vec::new(),
        }
    }

    async fn publish(
        &mut self,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
        expect: &[u16],
    ) -> Outcome {
        let n = self.class.params.collection_size.sample(rng).max(1.0) as usize;
        let (o, created) = publish(&self.s, &self.ids, conn, rng, n, expect).await;
        if let Some((uid, items, token)) = created {
            self.cols.push(Collection {
                uid,
                items,
                tokens: vec![token],
                owned: true,
            });
        }
        o
    }
}

impl OverHttp for MorseVu {
    /// An answer past [`super::MAX_FEED_BODY`] is a `body` failure: what a user parses
    /// into records is bounded, whatever the server sends.
    fn body_use(&self) -> crate::transport::BodyUse {
        crate::transport::BodyUse::Keep(super::MAX_FEED_BODY)
    }

    async fn setup(&mut self, conn: &mut Conn) -> Result<(), SetupError> {
        self.join_team(conn).await
    }

    /// A user of a team works in the team's collection and publishes none of its own.
    fn needs_bootstrap(&self) -> bool {
        self.cols.is_empty() && self.team.is_none()
    }

    fn begin_round(&mut self, round: u32) {
        if let Some(t) = &mut self.team {
            t.begin_round(round);
        }
    }

    fn take_book(&mut self) -> crate::visibility::Book {
        Membership::take_book(&mut self.team)
    }

    /// The collections this user published and has not deleted.
    fn leftovers(&self) -> Vec<(crate::transport::Method, super::cleanup::Place)> {
        self.cols
            .iter()
            .filter(|c| c.owned)
            .map(|c| {
                (
                    crate::transport::Method::DELETE,
                    super::cleanup::Place::Base(format!(
                        "{}/mc/collection/{}",
                        self.s.context, c.uid
                    )),
                )
            })
            .collect()
    }

    async fn bootstrap(&mut self, conn: &mut Conn, rng: &mut Xoshiro256PlusPlus) -> Done {
        let expect = bootstrap_expect(
            &self.class.ops,
            &self.class.expect,
            |o| *o == Op::Publish,
            &[201],
        );
        let mut o = self.publish(conn, rng, &expect).await;
        o.label = Some(self.class.params.label_publish);
        Done::Sent(o)
    }

    async fn execute(
        &mut self,
        op: usize,
        seq: u64,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Done {
        let class = self.class.clone();
        let expect = &class.expect[op];
        if class.ops[op] == Op::Publish {
            return Done::Sent(self.publish(conn, rng, expect).await);
        }
        if self.cols.is_empty() {
            return Done::Skipped;
        }
        let ci = (rng.next_u64() % self.cols.len() as u64) as usize;
        let path = format!("{}/mc/collection/{}", self.s.context, self.cols[ci].uid);
        let picked = Picked {
            ci,
            path: &path,
            expect,
        };
        let label = u16::try_from(op).unwrap_or(u16::MAX);
        let teamed = self.team.is_some();
        match class.ops[op] {
            // Handled before a collection is picked.
            Op::Publish => Done::Skipped,
            Op::Sync if teamed => Done::Sent(self.team_fetch(conn, picked, (true, label)).await),
            Op::Subscribe if teamed => {
                Done::Sent(self.team_fetch(conn, picked, (false, label)).await)
            }
            Op::Update if teamed => {
                self.team_update(&class, conn, rng, picked, (seq, label))
                    .await
            }
            Op::Sync => Done::Sent(self.fetch(&class, conn, rng, picked, true).await),
            Op::Subscribe => Done::Sent(self.fetch(&class, conn, rng, picked, false).await),
            Op::Update => self.update(&class, conn, rng, picked).await,
            Op::Delete => Done::Sent(self.delete(conn, picked).await),
        }
    }
}

impl MorseVu {
    /// A sync (with a token the user holds: the newest one `no_change_sync` of the time,
    /// reported as `sync_no_change`) or a subscribe (no token: the whole collection); the
    /// answer must be EIMML.
    async fn fetch(
        &mut self,
        class: &MorseClass,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
        picked: Picked<'_>,
        sync: bool,
    ) -> Outcome {
        let Picked { ci, path, expect } = picked;
        let mut label = None;
        let mut headers = Vec::new();
        if sync {
            let col = &self.cols[ci];
            let token = if data::chance(rng, class.params.no_change_sync) {
                label = Some(class.params.label_sync_no_change);
                col.tokens.last()
            } else {
                col.tokens
                    .get((rng.next_u64() % col.tokens.len() as u64) as usize)
            };
            if let Some(v) = token.and_then(|t| HeaderValue::from_str(t).ok()) {
                headers.push((HeaderName::from_static(TOKEN), v));
            }
        }
        let r = match self.s.send(conn, "GET", path, &headers, Bytes::new()).await {
            Exchange::Answer(r) => r,
            Exchange::Failed(mut o) => {
                o.label = label;
                return o;
            }
        };
        let mut o = Outcome::of(&r, expect, &format!("GET {path}"));
        o.label = label;
        if o.is_ok() {
            let parsed = std::str::from_utf8(&r.body)
                .map_err(|e| e.to_string())
                .and_then(|t| eim::check_eimml(t).map_err(String::from));
            if let Err(m) = parsed {
                return o.body_error(format!("GET {path}: not EIMML: {m}"));
            }
        }
        o
    }

    /// One changed and one new item, and a third of the time a tombstone, posted with the
    /// newest token; the answer's token and items become the user's.
    async fn update(
        &mut self,
        class: &MorseClass,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
        picked: Picked<'_>,
    ) -> Done {
        let Picked { ci, path, expect } = picked;
        let col = &self.cols[ci];
        let Some(token) = col
            .tokens
            .last()
            .and_then(|t| HeaderValue::from_str(t).ok())
        else {
            return Done::Skipped;
        };
        let mut sets: Vec<eim::Recordset> = Vec::with_capacity(3);
        let changed = (!col.items.is_empty())
            .then(|| col.items[(rng.next_u64() % col.items.len() as u64) as usize].clone());
        if let Some(c) = &changed {
            let records = data::eim_records(rng, c, &self.s.user, true);
            sets.push((c.clone(), Some(records)));
        }
        let new_uid = data::uid(rng, &self.ids.run_id);
        let records = data::eim_records(rng, &new_uid, &self.s.user, true);
        sets.push((new_uid.clone(), Some(records)));
        let mut deleted = None;
        if col.items.len() > 5 && data::chance(rng, class.params.tombstone) {
            let candidates: Vec<&String> = col
                .items
                .iter()
                .filter(|u| Some(*u) != changed.as_ref())
                .collect();
            let d = candidates[(rng.next_u64() % candidates.len() as u64) as usize].clone();
            sets.push((d.clone(), None));
            deleted = Some(d);
        }
        let doc = eim::write_eimml(
            &col.uid,
            "",
            sets.iter().map(|(u, r)| (u.as_str(), r.as_deref())),
        );
        let headers = [eim_header(), (HeaderName::from_static(TOKEN), token)];
        let r = match self
            .s
            .send(conn, "POST", path, &headers, Bytes::from(doc))
            .await
        {
            Exchange::Answer(r) => r,
            Exchange::Failed(o) => return Done::Sent(o),
        };
        let o = Outcome::of(&r, expect, &format!("POST {path}"));
        if !o.is_ok() {
            return Done::Sent(o);
        }
        let Some(t) = token_of(&r) else {
            return Done::Sent(o.body_error(format!(
                "POST {path}: no X-MorseCode-SyncToken in the answer"
            )));
        };
        let col = &mut self.cols[ci];
        col.tokens.push(t);
        col.items.push(new_uid);
        if let Some(d) = deleted {
            col.items.retain(|u| *u != d);
        }
        Done::Sent(o)
    }

    /// Delete the collection; it is no longer the user's.
    async fn delete(&mut self, conn: &mut Conn, picked: Picked<'_>) -> Outcome {
        let Picked { ci, path, expect } = picked;
        let r = match self.s.send(conn, "DELETE", path, &[], Bytes::new()).await {
            Exchange::Answer(r) => r,
            Exchange::Failed(o) => return o,
        };
        let o = Outcome::of(&r, expect, &format!("DELETE {path}"));
        if o.is_ok() {
            self.cols.remove(ci);
        }
        o
    }
}

/// `Ticket:` with the team's key, for a member (the owner uses its credentials).
pub(crate) fn ticket_header(ticket: &Option<HeaderValue>) -> Option<(HeaderName, HeaderValue)> {
    ticket.clone().map(|v| (HeaderName::from_static(TICKET), v))
}

/// Where a user of a team (Morse Code or Atom) works once set up: the shared collection's
/// uid; for its owner, the items it published with it and its first token; for a member,
/// the ticket that opens it.
pub(crate) struct Joined {
    pub(crate) uid: String,
    pub(crate) items: Vec<String>,
    pub(crate) token: Option<String>,
    pub(crate) ticket: Option<HeaderValue>,
}

/// Take a place in the team's shared collection (set-up, untimed): the owner publishes it
/// (`n + 1` items, unstamped: the collection before the clock) asking for a read-write
/// ticket, and says where it is and the ticket; a member waits to hear both. A failure on
/// either side fails the members' set-up too, in the owner's words.
pub(crate) async fn join_shared(
    s: &Session,
    ids: &VuIds,
    conn: &mut Conn,
    (team, board): (&Membership, &Board),
    (rng, n): (&mut Xoshiro256PlusPlus, usize),
) -> Result<Joined, SetupError> {
    let key = team.key();
    // Every user's set-up runs at once: each side waits at most this long.
    let timeouts = conn.timeouts();
    let until = tokio::time::Instant::now() + 4 * (timeouts.connect + timeouts.request);
    if !team.seat.owner {
        let shared = board
            .shared(key, until)
            .await
            .map_err(|answer| SetupError::Team {
                request: "the shared collection of the team's owner".into(),
                answer,
            })?;
        let ticket = shared
            .ticket
            .as_deref()
            .and_then(|k| HeaderValue::from_str(k).ok());
        return Ok(Joined {
            uid: shared.path,
            items: Vec::new(),
            token: None,
            ticket,
        });
    }
    let (o, p) = publish_with(s, ids, conn, (rng, n), (&[201], true)).await;
    let Some(p) = p.filter(|_| o.is_ok()) else {
        let e = SetupError::Team {
            request: format!(
                "PUT {}/mc/collection/… asking for a read-write ticket",
                s.context
            ),
            answer: o.detail.unwrap_or_else(|| o.answer.to_string()),
        };
        board.publish(key, Err(e.to_string()));
        return Err(e);
    };
    let shared = Shared {
        path: p.uid.clone(),
        ticket: p.ticket,
    };
    board.publish(key, Ok(shared));
    Ok(Joined {
        uid: p.uid,
        items: p.items,
        token: Some(p.token),
        ticket: None,
    })
}

/// What a team member's update sends: its EIMML, the stamps it carries (the new item's,
/// then the changed one's), and the new item.
struct Changes {
    doc: Bytes,
    stamps: Vec<crate::visibility::Stamp>,
    new_uid: String,
}

/// A team's collection: joining it in set-up, and the reads and writes that are stamped.
impl MorseVu {
    /// Take this user's place in its team (set-up, untimed) and, for a member, read the
    /// collection with the ticket for its first token.
    async fn join_team(&mut self, conn: &mut Conn) -> Result<(), SetupError> {
        let Some(t) = &self.team else {
            return Ok(());
        };
        let mut rng =
            <Xoshiro256PlusPlus as rand::SeedableRng>::seed_from_u64(u64::from(self.ids.vu));
        let n = self.class.params.collection_size.sample(&mut rng).max(1.0) as usize;
        let board = self.class.board.clone();
        let j = join_shared(&self.s, &self.ids, conn, (t, &board), (&mut rng, n)).await?;
        self.ticket = j.ticket;
        match j.token {
            Some(token) => {
                self.cols.push(Collection {
                    uid: j.uid,
                    items: j.items,
                    tokens: vec![token],
                    owned: true,
                });
                Ok(())
            }
            None => self.subscribe_shared(conn, j.uid).await,
        }
    }

    /// A member's side: the whole collection read with the ticket, for its first token.
    async fn subscribe_shared(&mut self, conn: &mut Conn, uid: String) -> Result<(), SetupError> {
        let path = format!("{}/mc/collection/{uid}", self.s.context);
        let fail = |answer: String| SetupError::Team {
            request: format!("GET {path} with the team's ticket"),
            answer,
        };
        let headers: Vec<_> = ticket_header(&self.ticket).into_iter().collect();
        let r = match self
            .s
            .send(conn, "GET", &path, &headers, Bytes::new())
            .await
        {
            Exchange::Answer(r) => r,
            Exchange::Failed(o) => return Err(fail(o.detail.unwrap_or_default())),
        };
        if r.status.as_u16() != 200 {
            return Err(fail(r.status.to_string()));
        }
        let Some(token) = token_of(&r) else {
            return Err(fail("200 without an X-MorseCode-SyncToken".into()));
        };
        self.cols.push(Collection {
            uid,
            items: Vec::new(),
            tokens: vec![token],
            owned: false,
        });
        Ok(())
    }

    /// The ticket and, for a sync, the newest token the user holds of collection `ci`.
    fn shared_headers(&self, ci: usize, sync: bool) -> Vec<(HeaderName, HeaderValue)> {
        let mut headers: Vec<_> = ticket_header(&self.ticket).into_iter().collect();
        let newest = self.cols[ci].tokens.last();
        if let Some(v) = newest
            .filter(|_| sync)
            .and_then(|t| HeaderValue::from_str(t).ok())
        {
            headers.push((HeaderName::from_static(TOKEN), v));
        }
        headers
    }

    /// A sync (with the newest token: what changed since this user last looked) or a
    /// subscribe (everything) of the team's collection, observed under `label`.
    async fn team_fetch(
        &mut self,
        conn: &mut Conn,
        picked: Picked<'_>,
        (sync, label): (bool, u16),
    ) -> Outcome {
        let Picked { ci, path, expect } = picked;
        let headers = self.shared_headers(ci, sync);
        if let Some(t) = &mut self.team {
            t.watch(label, sync);
        }
        let o = self.read_shared(conn, ci, (path, expect), &headers).await;
        if let Some(t) = &mut self.team {
            t.done();
        }
        o
    }

    /// GET the team's collection: the answer must be EIMML with a token, which becomes
    /// the user's newest; the stamps in its items are noted by the observation under way.
    async fn read_shared(
        &mut self,
        conn: &mut Conn,
        ci: usize,
        (path, expect): (&str, &[u16]),
        headers: &[(HeaderName, HeaderValue)],
    ) -> Outcome {
        let r = match self.s.send(conn, "GET", path, headers, Bytes::new()).await {
            Exchange::Answer(r) => r,
            Exchange::Failed(o) => return o,
        };
        if let Some(t) = &mut self.team {
            t.answered();
        }
        let o = Outcome::of(&r, expect, &format!("GET {path}"));
        if !o.is_ok() {
            return o;
        }
        let parsed = std::str::from_utf8(&r.body)
            .map_err(|e| e.to_string())
            .and_then(|t| eim::parse_eimml(t).map_err(|e| e.to_string()));
        let e = match parsed {
            Ok(e) => e,
            Err(m) => return o.body_error(format!("GET {path}: not EIMML: {m}")),
        };
        let Some(token) = token_of(&r) else {
            return o.body_error(format!(
                "GET {path}: no X-MorseCode-SyncToken in the answer"
            ));
        };
        if let Some(t) = &mut self.team {
            let items = e.recordsets.iter().filter_map(|(_, r)| r.as_deref());
            t.read_records(items.flatten());
        }
        self.cols[ci].tokens = vec![token];
        o
    }

    /// An update of the team's collection (pick `seq`): a new item and one of this
    /// user's own changed, each stamped. Refused because another changed the collection
    /// first (205) or is changing it (423), it syncs, as a client must, and sends the
    /// same once more, every request counted; refused again, it is contention
    /// (`update_contended`), not a failure.
    async fn team_update(
        &mut self,
        class: &MorseClass,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
        picked: Picked<'_>,
        (seq, label): (u64, u16),
    ) -> Done {
        let Picked { ci, path, expect } = picked;
        let Some(c) = self.team_changes(rng, (ci, seq)) else {
            return Done::Skipped;
        };
        let (first, status) = self.post_shared(conn, (ci, path), &c.doc, expect).await;
        let (o, status) = match status {
            Some(205 | 423) => {
                self.update_again(class, conn, (picked, label), (first, &c.doc))
                    .await
            }
            _ => (first, status),
        };
        if o.is_ok() && status == Some(204) {
            self.wrote(c, label);
        }
        Done::Sent(o)
    }

    /// After a refused update: a sync (observed under the update's label: it shows the
    /// user the others' changes), then the same update once more. A second refusal is
    /// contention, labelled so, and not a failure.
    async fn update_again(
        &mut self,
        class: &MorseClass,
        conn: &mut Conn,
        (picked, label): (Picked<'_>, u16),
        (first, doc): (Outcome, &Bytes),
    ) -> (Outcome, Option<u16>) {
        let Picked { ci, path, expect } = picked;
        let headers = self.shared_headers(ci, true);
        if let Some(t) = &mut self.team {
            t.watch(label, true);
        }
        let mut synced = self.read_shared(conn, ci, (path, &[200]), &headers).await;
        if let Some(t) = &mut self.team {
            t.done();
        }
        synced.add_cost(&first);
        if !synced.is_ok() {
            return (synced, None);
        }
        let contended: Vec<u16> = expect.iter().copied().chain([205, 423]).collect();
        let (mut again, status) = self.post_shared(conn, (ci, path), doc, &contended).await;
        again.add_cost(&synced);
        if matches!(status, Some(205 | 423)) && !expect.contains(&status.unwrap_or(0)) {
            again.label = class.params.label_update_contended;
        }
        (again, status)
    }

    /// POST `doc` to the team's collection with the newest token (and the ticket); a
    /// 204's token becomes the newest. The outcome and the status that came back.
    async fn post_shared(
        &mut self,
        conn: &mut Conn,
        (ci, path): (usize, &str),
        doc: &Bytes,
        expect: &[u16],
    ) -> (Outcome, Option<u16>) {
        let mut headers = self.shared_headers(ci, true);
        headers.push(eim_header());
        let r = match self.s.send(conn, "POST", path, &headers, doc.clone()).await {
            Exchange::Answer(r) => r,
            Exchange::Failed(o) => return (o, None),
        };
        let status = r.status.as_u16();
        let o = Outcome::of(&r, expect, &format!("POST {path}"));
        if status != 204 || !o.is_ok() {
            return (o, Some(status));
        }
        match token_of(&r) {
            Some(t) => self.cols[ci].tokens = vec![t],
            None => {
                let why = format!("POST {path}: no X-MorseCode-SyncToken in the answer");
                return (o.body_error(why), Some(status));
            }
        }
        (o, Some(status))
    }

    /// What update `seq` of collection `ci` sends: a new item, and one of the user's own
    /// changed when it has one. It deletes nothing: a tombstone carries no stamp, so the
    /// earlier writes of the item it deleted could no longer be told superseded from
    /// lost for whoever had not looked yet.
    fn team_changes(
        &self,
        rng: &mut Xoshiro256PlusPlus,
        (ci, seq): (usize, u64),
    ) -> Option<Changes> {
        let t = self.team.as_ref()?;
        let stamped = |rng: &mut Xoshiro256PlusPlus, uid: &str, stamp| {
            let mut records = data::eim_records(rng, uid, &self.s.user, true);
            stamp_note(&mut records, &t.stamp_line(&stamp));
            (uid.to_string(), Some(records))
        };
        let new_uid = data::uid(rng, &self.ids.run_id);
        let fresh = t.stamp(seq, seq);
        let mut sets: Vec<eim::Recordset> = vec![stamped(rng, &new_uid, fresh)];
        let mut stamps = vec![fresh];
        let changed = (!self.mine.is_empty())
            .then(|| self.mine[(rng.next_u64() % self.mine.len() as u64) as usize].clone());
        if let Some((uid, event)) = &changed {
            let stamp = t.stamp(seq | crate::visibility::SECOND_ITEM, *event);
            sets.push(stamped(rng, uid, stamp));
            stamps.push(stamp);
        }
        let doc = eim::write_eimml(
            &self.cols[ci].uid,
            "",
            sets.iter().map(|(u, r)| (u.as_str(), r.as_deref())),
        );
        Some(Changes {
            doc: Bytes::from(doc),
            stamps,
            new_uid,
        })
    }

    /// An update the server took: its stamps noted as writes the whole team should see,
    /// and its items the user's own.
    fn wrote(&mut self, c: Changes, label: u16) {
        let Some(t) = &mut self.team else {
            return;
        };
        let (team, at) = (t.team(), crate::visibility::now_us());
        for stamp in &c.stamps {
            t.book.wrote(*stamp, (team, Audience::Team), label, at);
        }
        let event = c.stamps.first().map_or(0, |s| s.event);
        self.mine.push((c.new_uid, event));
    }
}

/// A stamp's line added to the note's body, on a line of its own.
fn stamp_note(records: &mut [eim::Record], line: &str) {
    let body = records
        .iter_mut()
        .filter(|r| r.ns == eim::NOTE_NS)
        .flat_map(|r| r.fields.iter_mut())
        .find(|f| f.name == "body");
    if let Some(f) = body {
        let v = f.value.get_or_insert_with(String::new);
        v.push('\n');
        v.push_str(line);
        v.push('\n');
    }
}
