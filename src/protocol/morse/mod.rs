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

use hyper::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use rand::Rng;
use rand::rngs::Xoshiro256PlusPlus;

use async_trait::async_trait;

use super::contract::{Done, Preflight, Protocol, Reach};
use super::over_http::{HttpUser, OverHttp};
use super::session::{AccountPlan, Session};
use super::teams::{Board, Membership, TeamPlan};
use super::{Outcome, ProtocolError, SetupError, VuIds, bootstrap_expect, expect_of};
use crate::transport::{Conn, Response};
use crate::workload::protocols::MorseParams;
use crate::workload::{MorseOp as Op, UserClass};

mod publish;
mod sync;
mod team;

pub(crate) use publish::{preflight_publish, publish};
pub(crate) use team::{join_shared, ticket_header};

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
        ops: &[Op],
        params: &MorseParams,
        accounts: &Arc<AccountPlan>,
        team: Option<TeamPlan>,
        board: &Arc<Board>,
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
            .and_then(|p| Membership::of(p, ids.vu, ids.round, &ids.run_id));
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
            Op::Sync if teamed => Done::Sent(self.team_fetch(conn, picked, true, label).await),
            Op::Subscribe if teamed => {
                Done::Sent(self.team_fetch(conn, picked, false, label).await)
            }
            Op::Update if teamed => {
                self.team_update(&class, conn, rng, picked, seq, label)
                    .await
            }
            Op::Sync => Done::Sent(self.fetch(&class, conn, rng, picked, true).await),
            Op::Subscribe => Done::Sent(self.fetch(&class, conn, rng, picked, false).await),
            Op::Update => self.update(&class, conn, rng, picked).await,
            Op::Delete => Done::Sent(self.delete(conn, picked).await),
        }
    }
}
