//! Atom users, as the 2007 client behaved: one collection, published first through
//! Morse Code with `initial_items` items (21 by default, reported as `publish`); then
//! time-range feeds over a random week of 2007, full feeds, dashboards (now, later or done,
//! a third each), and AtomPub create and update of entries with EIM-JSON content. Feeds in
//! answers are checked for their shape as they are read ([`feed_entries`]); entries are
//! parsed with `atom_syndication`.

use std::sync::Arc;

use bytes::Bytes;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use rand::Rng;
use rand::rngs::Xoshiro256PlusPlus;

use async_trait::async_trait;

use super::contract::{Done, Preflight, Protocol, Reach};
use super::over_http::{HttpUser, OverHttp};
use super::session::{AccountPlan, Exchange, Session};
use super::{Outcome, ProtocolError, VuIds, data, expect_of, morse};
use crate::formats::xml;
use crate::transport::{Conn, Response};
use crate::workload::protocols::AtomParams;
use crate::workload::{AtomOp, UserClass};

pub(crate) struct AtomClass {
    ops: Vec<AtomOp>,
    expect: Vec<Vec<u16>>,
    params: AtomParams,
    /// How its users' accounts are made, shared by all of them.
    accounts: Arc<AccountPlan>,
}

impl AtomClass {
    pub(crate) fn new(
        class: &UserClass,
        ops: &[AtomOp],
        params: &AtomParams,
        accounts: &Arc<AccountPlan>,
    ) -> AtomClass {
        AtomClass {
            accounts: accounts.clone(),
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

pub(crate) struct AtomVu {
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
        .and_then(feed_entries)
    {
        Ok(_) => o,
        Err(m) => o.body_error(format!("{what}: not an Atom feed: {m}")),
    }
}

/// The Atom namespace.
const ATOM_NS: &[u8] = b"http://www.w3.org/2005/Atom";

/// Whether `text` is an Atom feed: well-formed by the rules every body is read by
/// ([`xml::walk`]), with a root `feed` in the Atom namespace (or in none, which lenient
/// readers accept). Returns the number of its entries.
///
/// The feed is checked as it is read: no tree, no entry objects. The client reads a feed
/// only to know it is one, and parsing every entry of it with `atom_syndication` (after a
/// separate pass for the nesting depth) cost the generator about half of what serving the
/// feed cost the server.
pub(crate) fn feed_entries(text: &str) -> Result<usize, String> {
    struct Shape {
        entries: usize,
    }
    impl xml::Visit for Shape {
        fn open(
            &mut self,
            depth: usize,
            ns: &[u8],
            e: &quick_xml::events::BytesStart<'_>,
            _reader: &quick_xml::reader::NsReader<&[u8]>,
        ) -> Result<(), String> {
            let name = e.name();
            let local = name.local_name();
            let atom = ns == ATOM_NS || ns.is_empty();
            match depth {
                1 if !(atom && local.as_ref() == b"feed") => Err(format!(
                    "root element is {{{}}}{}, not atom:feed",
                    String::from_utf8_lossy(ns),
                    String::from_utf8_lossy(local.as_ref())
                )),
                2 if atom && local.as_ref() == b"entry" => {
                    self.entries += 1;
                    Ok(())
                }
                _ => Ok(()),
            }
        }
    }
    let mut shape = Shape { entries: 0 };
    xml::walk(text, &mut shape)?;
    Ok(shape.entries)
}

fn check_entry(r: &Response, o: Outcome, what: &str) -> Outcome {
    if !o.is_ok() {
        return o;
    }
    let parsed = xml::check_depth(&r.body)
        .map_err(String::from)
        .and_then(|()| atom_syndication::Entry::read_from(&r.body[..]).map_err(|e| e.to_string()));
    match parsed {
        Ok(_) => o,
        Err(m) => o.body_error(format!("{what}: not an Atom entry: {m}")),
    }
}

impl AtomVu {
    pub(crate) fn new(class: Arc<AtomClass>, s: Session, ids: VuIds) -> AtomVu {
        AtomVu {
            class,
            s,
            ids,
            collection: None,
        }
    }
}

#[async_trait]
impl Protocol for AtomClass {
    type User = HttpUser<AtomVu>;

    fn user(self: &Arc<Self>, session: Session, ids: VuIds, reach: Reach) -> Self::User {
        let vu = AtomVu::new(self.clone(), session.clone(), ids);
        HttpUser::new(vu, session, &reach, Some(self.accounts.clone()))
    }

    /// An Atom user's collection is made through Morse Code: the probe publishes one.
    async fn preflight(self: &Arc<Self>, cx: Preflight<'_>) -> Result<(), ProtocolError> {
        morse::preflight_publish(&cx).await
    }
}

impl OverHttp for AtomVu {
    fn needs_bootstrap(&self) -> bool {
        self.collection.is_none()
    }

    async fn bootstrap(&mut self, conn: &mut Conn, rng: &mut Xoshiro256PlusPlus) -> Done {
        // `publish` sends one item more than it is asked for, as the 2007 client did.
        let extra = self.class.params.initial_items.saturating_sub(1) as usize;
        let (mut o, created) = morse::publish(&self.s, &self.ids, conn, rng, extra, &[201]).await;
        if let Some((uid, items, _)) = created {
            self.collection = Some((uid, items));
        }
        o.label = Some(self.class.params.label_publish);
        Done::Sent(o)
    }

    /// The collection this user published (through Morse Code, as it was made).
    fn leftovers(&self) -> Vec<(crate::transport::Method, super::cleanup::Place)> {
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

    async fn execute(
        &mut self,
        op: usize,
        _seq: u64,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Done {
        let class = self.class.clone();
        let expect = &class.expect[op];
        let Some((col, items)) = &self.collection else {
            return Done::Skipped;
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
                    return Done::Skipped;
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
            Exchange::Failed(o) => return Done::Sent(o),
        };
        let what = format!("{method} {path}");
        let o = Outcome::of(&r, expect, &what);
        Done::Sent(match &class.ops[op] {
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
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(entries: usize) -> String {
        let mut f = atom_syndication::Feed {
            title: "f".into(),
            id: "urn:f".into(),
            ..Default::default()
        };
        for i in 0..entries {
            let mut e = atom_syndication::Entry::default();
            e.set_id(format!("urn:e{i}"));
            e.set_title(format!("a < b & \"c\" {i}"));
            let mut c = atom_syndication::Content::default();
            c.set_value(Some(format!("{{\"uid\": \"{i}\", \"x\": \"<&>\"}}")));
            c.set_content_type(Some("text".to_string()));
            e.set_content(Some(c));
            f.entries.push(e);
        }
        f.to_string()
    }

    #[test]
    fn a_feed_is_recognised_as_atom_syndication_reads_it() {
        for n in [0, 1, 7] {
            let text = feed(n);
            let parsed: atom_syndication::Feed = text.parse().unwrap();
            assert_eq!(feed_entries(&text), Ok(parsed.entries.len()));
        }
        // No namespace: lenient readers accept it, and so does the check.
        assert_eq!(feed_entries("<feed><entry/><entry/></feed>"), Ok(2));
        // Not a feed.
        for bad in [
            "",
            "<entry xmlns='http://www.w3.org/2005/Atom'/>",
            "<feed xmlns='urn:other'/>",
            "<rss><channel/></rss>",
            "<feed><entry></feed>",
            "<feed>&nbsp;</feed>",
            "not xml",
        ] {
            assert!(feed_entries(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_cut_of_a_feed_is_refused_and_no_byte_change_panics() {
        let text = feed(3);
        let text = text.trim_end();
        for cut in 0..text.len() {
            if text.is_char_boundary(cut) {
                assert!(feed_entries(&text[..cut]).is_err(), "cut at {cut}");
            }
        }
        let bytes = text.as_bytes();
        for i in 0..bytes.len() {
            for b in [b'<', b'>', b'&', b'/', b'"', b'x'] {
                let mut v = bytes.to_vec();
                v[i] = b;
                if let Ok(t) = std::str::from_utf8(&v) {
                    let _ = feed_entries(t);
                }
            }
        }
    }
}
