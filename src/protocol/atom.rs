//! Atom users, as the 2007 client behaved: one collection, published first through
//! Morse Code with `initial_items` items (21 by default, reported as `publish`); then
//! time-range feeds over a random week of 2007, full feeds, dashboards (now, later or done,
//! a third each), and AtomPub create and update of entries with EIM-JSON content. Feeds and
//! entries in answers are parsed with `atom_syndication`.

use std::sync::Arc;

use bytes::Bytes;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use rand::Rng;
use rand::rngs::Xoshiro256PlusPlus;

use super::session::{Exchange, Session};
use super::{Outcome, VuIds, data, expect_of, morse};
use crate::formats::xml;
use crate::transport::{Conn, Response};
use crate::workload::ops::AtomParams;
use crate::workload::{AtomOp, UserClass};

pub struct AtomClass {
    ops: Vec<AtomOp>,
    expect: Vec<Vec<u16>>,
    params: AtomParams,
}

impl AtomClass {
    pub fn new(class: &UserClass, ops: &[AtomOp], params: &AtomParams) -> AtomClass {
        AtomClass {
            expect: class
                .ops
                .iter()
                .zip(ops)
                .map(|(o, k)| {
                    expect_of(
                        o,
                        match k {
                            AtomOp::CreateEvent => &[201],
                            AtomOp::TimeRangeFeed { .. }
                            | AtomOp::FullFeed
                            | AtomOp::Dashboard
                            | AtomOp::UpdateEvent => &[200],
                        },
                    )
                })
                .collect(),
            ops: ops.to_vec(),
            params: params.clone(),
        }
    }
}

pub struct AtomVu {
    class: Arc<AtomClass>,
    s: Session,
    ids: VuIds,
    collection: Option<(String, Vec<String>)>,
}

fn check_feed(r: &Response, o: Outcome, what: &str) -> Outcome {
    if !o.is_ok() {
        return o;
    }
    match std::str::from_utf8(&r.body)
        .map_err(|e| e.to_string())
        .and_then(|t| xml::check_depth(t.as_bytes()).map(|()| t))
        .and_then(|t| {
            t.parse::<atom_syndication::Feed>()
                .map_err(|e| e.to_string())
        }) {
        Ok(_) => o,
        Err(m) => o.body_error(format!("{what}: not an Atom feed: {m}")),
    }
}

fn check_entry(r: &Response, o: Outcome, what: &str) -> Outcome {
    if !o.is_ok() {
        return o;
    }
    let parsed = xml::check_depth(&r.body)
        .and_then(|()| atom_syndication::Entry::read_from(&r.body[..]).map_err(|e| e.to_string()));
    match parsed {
        Ok(_) => o,
        Err(m) => o.body_error(format!("{what}: not an Atom entry: {m}")),
    }
}

impl AtomVu {
    pub fn new(class: Arc<AtomClass>, s: Session, ids: VuIds) -> AtomVu {
        AtomVu {
            class,
            s,
            ids,
            collection: None,
        }
    }

    pub fn needs_bootstrap(&self) -> bool {
        self.collection.is_none()
    }

    pub async fn bootstrap(&mut self, conn: &mut Conn, rng: &mut Xoshiro256PlusPlus) -> Outcome {
        // `publish` sends one item more than it is asked for, as the 2007 client did.
        let extra = self.class.params.initial_items.saturating_sub(1) as usize;
        let (mut o, created) = morse::publish(&self.s, &self.ids, conn, rng, extra, &[201]).await;
        if let Some((uid, items, _)) = created {
            self.collection = Some((uid, items));
        }
        o.label = Some(self.class.params.label_publish);
        o
    }

    /// The collection this user published (through Morse Code, as it was made).
    pub fn leftovers(&self) -> Vec<(crate::transport::Method, super::cleanup::Place)> {
        self.collection
            .iter()
            .map(|(uid, _)| {
                (
                    crate::transport::Method::DELETE,
                    super::cleanup::Place::Base(format!("{}/mc/collection/{uid}", self.s.context)),
                )
            })
            .collect()
    }

    pub async fn execute(
        &mut self,
        op: usize,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Outcome {
        let class = self.class.clone();
        let expect = &class.expect[op];
        let Some((col, items)) = &self.collection else {
            return Outcome::skipped();
        };
        let base = format!("{}/atom/collection/{col}", self.s.context);
        let atom = (
            CONTENT_TYPE,
            HeaderValue::from_static("application/atom+xml"),
        );
        let (method, path, body) = match &class.ops[op] {
            AtomOp::TimeRangeFeed { range } => {
                let len = chrono::Duration::microseconds(range.sample(rng) as i64);
                let (s, e) = data::week(rng, len);
                let f = "%Y-%m-%dT%H:%M:%SZ";
                (
                    "GET",
                    format!(
                        "{base}/full/eim-json?start={}&end={}",
                        s.format(f),
                        e.format(f)
                    ),
                    None,
                )
            }
            AtomOp::FullFeed => ("GET", format!("{base}/full"), None),
            AtomOp::Dashboard => {
                let which = ["now", "later", "done"][(rng.next_u64() % 3) as usize];
                ("GET", format!("{base}/dashboard-{which}/eim-json"), None)
            }
            AtomOp::CreateEvent => {
                let uid = data::uid(rng, &self.ids.run_id);
                let entry = data::atom_entry(rng, &uid);
                ("POST", base.clone(), Some((uid, entry)))
            }
            AtomOp::UpdateEvent => {
                if items.is_empty() {
                    return Outcome::skipped();
                }
                let uid = items[(rng.next_u64() % items.len() as u64) as usize].clone();
                let entry = data::atom_entry(rng, &uid);
                (
                    "PUT",
                    format!("{}/atom/item/{uid}", self.s.context),
                    Some((uid, entry)),
                )
            }
        };
        let headers = if body.is_some() {
            vec![atom]
        } else {
            Vec::new()
        };
        let payload = body
            .as_ref()
            .map_or_else(Bytes::new, |(_, e)| Bytes::from(e.clone()));
        let r = match self.s.send(conn, method, &path, &headers, payload).await {
            Exchange::Answer(r) => r,
            Exchange::Failed(o) => return o,
        };
        let what = format!("{method} {path}");
        let o = Outcome::of(&r, expect, &what);
        match &class.ops[op] {
            AtomOp::CreateEvent => {
                let o = check_entry(&r, o, &what);
                if o.is_ok()
                    && let (Some((uid, _)), Some((_, items))) = (body, self.collection.as_mut())
                {
                    items.push(uid);
                }
                o
            }
            AtomOp::UpdateEvent => check_entry(&r, o, &what),
            AtomOp::TimeRangeFeed { .. } | AtomOp::FullFeed | AtomOp::Dashboard => {
                check_feed(&r, o, &what)
            }
        }
    }
}
