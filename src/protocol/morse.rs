//! Morse Code users, as the 2007 client behaved: a user with
//! no collection publishes one first (outside its table); publish sizes are exponential
//! (mean 50, at most 3000, plus one item); a sync uses the newest token with probability
//! `no_change_sync` (reported as `sync_no_change`) or else a random earlier one; an update
//! sends one changed and one new item and, with probability `tombstone` when there are more
//! than five, deletes one; subscribe; delete. Answers are checked as EIMML.

use std::sync::Arc;

use bytes::Bytes;
use hyper::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use rand::Rng;
use rand::rngs::Xoshiro256PlusPlus;

use async_trait::async_trait;

use super::contract::{Done, Preflight, Protocol, Reach};
use super::over_http::{HttpUser, OverHttp};
use super::session::{AccountPlan, Exchange, Session};
use super::{Outcome, ProtocolError, VuIds, bootstrap_expect, data, expect_of};
use crate::formats::eim;
use crate::transport::{Conn, Response};
use crate::workload::protocols::MorseParams;
use crate::workload::{MorseOp as Op, UserClass};

const TOKEN: &str = "x-morsecode-synctoken";

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
}

impl MorseClass {
    pub(crate) fn new(
        class: &UserClass,
        ops: &[Op],
        params: &MorseParams,
        accounts: &Arc<AccountPlan>,
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
        }
    }
}

#[async_trait]
impl Protocol for MorseClass {
    type User = HttpUser<MorseVu>;

    fn user(self: &Arc<Self>, session: Session, ids: VuIds, reach: Reach) -> Self::User {
        let vu = MorseVu::new(self.clone(), session.clone(), ids);
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
}

pub(crate) struct MorseVu {
    class: Arc<MorseClass>,
    s: Session,
    ids: VuIds,
    cols: Vec<Collection>,
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
    let r = match s
        .send(conn, "PUT", &path, &[eim_header()], Bytes::from(doc))
        .await
    {
        Exchange::Answer(r) => r,
        Exchange::Failed(o) => return (o, None),
    };
    let o = Outcome::of(&r, expect, &format!("PUT {path}"));
    if !o.is_ok() {
        return (o, None);
    }
    match token_of(&r) {
        Some(t) => (o, Some((uid, items, t))),
        None => (
            o.body_error(format!(
                "PUT {path}: no X-MorseCode-SyncToken in the answer"
            )),
            None,
        ),
    }
}

impl MorseVu {
    pub(crate) fn new(class: Arc<MorseClass>, s: Session, ids: VuIds) -> MorseVu {
        MorseVu {
            class,
            s,
            ids,
            cols: Vec::new(),
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
            });
        }
        o
    }
}

impl OverHttp for MorseVu {
    fn needs_bootstrap(&self) -> bool {
        self.cols.is_empty()
    }

    /// The collections this user published and has not deleted.
    fn leftovers(&self) -> Vec<(crate::transport::Method, super::cleanup::Place)> {
        self.cols
            .iter()
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
        _seq: u64,
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
        match class.ops[op] {
            // Handled before a collection is picked.
            Op::Publish => Done::Skipped,
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
