//! Atom users, as the 2007 client behaved: one collection, published first through
//! Morse Code with `initial_items` items (21 by default, reported as `publish`); then
//! time-range feeds over a random week of 2007, full feeds, dashboards (now, later or done,
//! a third each), and AtomPub create and update of entries with EIM-JSON content. Feeds in
//! answers are checked for their shape as they are read ([`feed_entries`]); entries are
//! parsed with `atom_syndication`.
//!
//! In a team, Cosmo's web view of a shared collection: the collection is the one its owner
//! published through Morse Code with a ticket (`morse::join_shared`), members reach it
//! with the ticket, an entry created or updated (only one the user created) carries a
//! stamp in its note, and the feeds note the first time each stamp reaches the user,
//! whoever wrote it, over Atom or Morse Code. A write refused because another member was
//! writing (423) is sent once more; refused again it is contention (`contended`).

use std::sync::Arc;

use bytes::Bytes;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use rand::Rng;
use rand::rngs::Xoshiro256PlusPlus;

use async_trait::async_trait;

use super::contract::{Done, Preflight, Protocol, Reach};
use super::over_http::{HttpUser, OverHttp};
use super::session::{AccountPlan, Exchange, Session};
use super::teams::{Board, Membership, TeamPlan};
use super::{Outcome, ProtocolError, SetupError, VuIds, data, expect_of, morse};
use crate::formats::{eim, xml};
use crate::transport::{Conn, Response};
use crate::visibility::Audience;
use crate::workload::protocols::AtomParams;
use crate::workload::{AtomOp, UserClass};

pub(crate) struct AtomClass {
    ops: Vec<AtomOp>,
    expect: Vec<Vec<u16>>,
    params: AtomParams,
    /// How its users' accounts are made, shared by all of them.
    accounts: Arc<AccountPlan>,
    /// Its team, when its users share a collection, and where the run's teams meet.
    team: Option<TeamPlan>,
    board: Arc<Board>,
}

impl AtomClass {
    pub(crate) fn new(
        class: &UserClass,
        ops: &[AtomOp],
        params: &AtomParams,
        accounts: &Arc<AccountPlan>,
        team: Option<TeamPlan>,
        board: &Arc<Board>,
    ) -> AtomClass {
        AtomClass {
            accounts: accounts.clone(),
            team,
            board: board.clone(),
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
    /// This user published its collection (a team's member reaches its owner's).
    owned: bool,
    /// Its place in its team, when its class shares a collection.
    team: Option<Membership>,
    /// The ticket that opens the team's collection to a member (not to its owner).
    ticket: Option<HeaderValue>,
    /// The entries this user created in its team's collection, each with the pick that
    /// made it: the event its later versions belong to.
    mine: Vec<(String, u64)>,
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
    let mut shape = Shape::default();
    xml::walk(text, &mut shape)?;
    Ok(shape.entries)
}

/// The text of each entry's `content` (entities decoded), for a team's observer, which
/// reads the stamps in them; the feed is checked as [`feed_entries`] checks it.
fn feed_contents(text: &str) -> Result<Vec<String>, String> {
    let mut shape = Shape {
        contents: Some(Vec::new()),
        ..Shape::default()
    };
    xml::walk(text, &mut shape)?;
    Ok(shape.contents.unwrap_or_default())
}

/// What a walk of a feed finds: its entries, and their contents when asked for.
#[derive(Default)]
struct Shape {
    entries: usize,
    /// The depth of the element open now.
    depth: usize,
    /// Inside an entry's `content`.
    in_content: bool,
    contents: Option<Vec<String>>,
}

impl xml::Visit for Shape {
    fn open(
        &mut self,
        depth: usize,
        ns: &[u8],
        e: &quick_xml::events::BytesStart<'_>,
        _reader: &quick_xml::reader::NsReader<&[u8]>,
    ) -> Result<(), String> {
        self.depth = depth;
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
            3 if atom && local.as_ref() == b"content" => {
                if let Some(c) = &mut self.contents {
                    self.in_content = true;
                    c.push(String::new());
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn close(&mut self) -> Result<(), String> {
        if self.depth == 3 {
            self.in_content = false;
        }
        self.depth = self.depth.saturating_sub(1);
        Ok(())
    }

    fn wants_text(&self) -> bool {
        self.in_content && self.contents.is_some()
    }

    fn text(&mut self, text: &str) -> Result<(), String> {
        if let (true, Some(c)) = (self.in_content, &mut self.contents)
            && let Some(last) = c.last_mut()
        {
            last.push_str(text);
        }
        Ok(())
    }
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

/// The path of a feed's GET (a time-range feed over a random week of 2007, the full feed,
/// one of the three dashboards), drawn as the 2007 client drew it.
fn feed_path(op: &AtomOp, base: &str, rng: &mut Xoshiro256PlusPlus) -> String {
    match op {
        AtomOp::TimeRangeFeed { range } => {
            let len = chrono::Duration::microseconds(range.sample(rng) as i64);
            let (s, e) = data::week(rng, len);
            let f = "%Y-%m-%dT%H:%M:%SZ";
            format!(
                "{base}/full/eim-json?start={}&end={}",
                s.format(f),
                e.format(f)
            )
        }
        AtomOp::Dashboard => {
            let which = ["now", "later", "done"][(rng.next_u64() % 3) as usize];
            format!("{base}/dashboard-{which}/eim-json")
        }
        AtomOp::FullFeed | AtomOp::CreateEvent | AtomOp::UpdateEvent => format!("{base}/full"),
    }
}

impl AtomVu {
    pub(crate) fn new(class: Arc<AtomClass>, s: Session, ids: VuIds) -> AtomVu {
        AtomVu {
            class,
            s,
            ids,
            collection: None,
            owned: true,
            team: None,
            ticket: None,
            mine: Vec::new(),
        }
    }
}

#[async_trait]
impl Protocol for AtomClass {
    type User = HttpUser<AtomVu>;

    fn user(self: &Arc<Self>, session: Session, ids: VuIds, reach: Reach) -> Self::User {
        let team = self
            .team
            .as_ref()
            .and_then(|p| Membership::of(p, ids.vu, ids.round, &ids.run_id));
        let mut vu = AtomVu::new(self.clone(), session.clone(), ids);
        vu.team = team;
        HttpUser::new(vu, session, &reach, Some(self.accounts.clone()))
    }

    /// An Atom user's collection is made through Morse Code: the probe publishes one.
    async fn preflight(self: &Arc<Self>, cx: Preflight<'_>) -> Result<(), ProtocolError> {
        morse::preflight_publish(&cx).await
    }
}

impl OverHttp for AtomVu {
    /// An answer past [`super::MAX_FEED_BODY`] is a `body` failure: what a user parses
    /// into records is bounded, whatever the server sends.
    fn body_use(&self) -> crate::transport::BodyUse {
        crate::transport::BodyUse::Keep(super::MAX_FEED_BODY)
    }

    /// A user of a team takes its place in the team's collection.
    async fn setup(&mut self, conn: &mut Conn) -> Result<(), SetupError> {
        let Some(t) = &self.team else {
            return Ok(());
        };
        let mut rng =
            <Xoshiro256PlusPlus as rand::SeedableRng>::seed_from_u64(u64::from(self.ids.vu));
        let n = self.class.params.initial_items.saturating_sub(1) as usize;
        let board = self.class.board.clone();
        let j = morse::join_shared(&self.s, &self.ids, conn, t, &board, &mut rng, n).await?;
        self.owned = j.token.is_some();
        self.ticket = j.ticket;
        self.collection = Some((j.uid, Vec::new()));
        Ok(())
    }

    /// A user of a team works in the team's collection and publishes none of its own.
    fn needs_bootstrap(&self) -> bool {
        self.collection.is_none() && self.team.is_none()
    }

    fn begin_round(&mut self, round: u32) {
        if let Some(t) = &mut self.team {
            t.begin_round(round);
        }
    }

    fn take_book(&mut self) -> crate::visibility::Book {
        Membership::take_book(&mut self.team)
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
            .filter(|_| self.owned)
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
        seq: u64,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Done {
        if self.team.is_some() {
            return self.team_execute(op, seq, conn, rng).await;
        }
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
            AtomOp::TimeRangeFeed { .. } | AtomOp::FullFeed | AtomOp::Dashboard => {
                ("GET", feed_path(&class.ops[op], &base, rng), None)
            }
            AtomOp::CreateEvent => {
                let uid = data::uid(rng, &self.ids.run_id);
                let entry = data::atom_entry(rng, &uid, None);
                ("POST", base.clone(), Some((uid, entry)))
            }
            AtomOp::UpdateEvent => {
                if items.is_empty() {
                    return Done::Skipped;
                }
                let uid = items[(rng.next_u64() % items.len() as u64) as usize].clone();
                let entry = data::atom_entry(rng, &uid, None);
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

/// A team's collection: its entries written stamped, its feeds observed.
impl AtomVu {
    /// Operation `op` (pick `seq`) in the team's collection: a feed observed, an entry
    /// created, or one this user created updated.
    async fn team_execute(
        &mut self,
        op: usize,
        seq: u64,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Done {
        let class = self.class.clone();
        let expect = class.expect[op].as_slice();
        let Some((col, _)) = &self.collection else {
            return Done::Skipped;
        };
        let base = format!("{}/atom/collection/{col}", self.s.context);
        let label = u16::try_from(op).unwrap_or(u16::MAX);
        let aop = &class.ops[op];
        if aop.reveals() {
            let path = feed_path(aop, &base, rng);
            return Done::Sent(self.observe(conn, &path, label, expect).await);
        }
        let (method, path, uid, event) = match aop {
            AtomOp::UpdateEvent if self.mine.is_empty() => return Done::Skipped,
            AtomOp::UpdateEvent => {
                let (uid, event) =
                    self.mine[(rng.next_u64() % self.mine.len() as u64) as usize].clone();
                let path = format!("{}/atom/item/{uid}", self.s.context);
                ("PUT", path, uid, event)
            }
            AtomOp::CreateEvent
            | AtomOp::FullFeed
            | AtomOp::TimeRangeFeed { .. }
            | AtomOp::Dashboard => ("POST", base, data::uid(rng, &self.ids.run_id), seq),
        };
        let Some(t) = &self.team else {
            return Done::Skipped;
        };
        let stamp = t.stamp(seq, event);
        let entry = data::atom_entry(rng, &uid, Some(&t.stamp_line(&stamp)));
        let (o, taken) = self
            .write(conn, method, &path, Bytes::from(entry), &class, expect)
            .await;
        if let (true, Some(t)) = (taken, &mut self.team) {
            let team = t.team();
            let at = crate::visibility::now_us();
            t.book.wrote(stamp, team, Audience::Team, label, at);
            if method == "POST" {
                self.mine.push((uid, seq));
            }
        }
        Done::Sent(o)
    }

    /// GET a feed of the team's collection, observed under `label`: the stamps in its
    /// entries' contents are first sights, whoever wrote them.
    async fn observe(
        &mut self,
        conn: &mut Conn,
        path: &str,
        label: u16,
        expect: &[u16],
    ) -> Outcome {
        let headers: Vec<_> = morse::ticket_header(&self.ticket).into_iter().collect();
        if let Some(t) = &mut self.team {
            t.watch(label, false);
        }
        let r = match self.s.send(conn, "GET", path, &headers, Bytes::new()).await {
            Exchange::Answer(r) => r,
            Exchange::Failed(o) => {
                if let Some(t) = &mut self.team {
                    t.done();
                }
                return o;
            }
        };
        if let Some(t) = &mut self.team {
            t.answered();
        }
        let what = format!("GET {path}");
        let mut o = Outcome::of(&r, expect, &what);
        if o.is_ok() {
            match std::str::from_utf8(&r.body)
                .map_err(|e| e.to_string())
                .and_then(feed_contents)
            {
                Ok(contents) => self.read_contents(&contents),
                Err(m) => o = o.body_error(format!("{what}: not an Atom feed: {m}")),
            }
        }
        if let Some(t) = &mut self.team {
            t.done();
        }
        o
    }

    /// The stamps in a feed's entries: each content read as EIM-JSON (one that is not
    /// shows nothing).
    fn read_contents(&mut self, contents: &[String]) {
        let Some(t) = &mut self.team else {
            return;
        };
        for c in contents {
            if let Ok((_, records)) = eim::from_json(c) {
                t.read_records(&records);
            }
        }
    }

    /// POST or PUT an entry to the team's collection, with the ticket. A 423 (another
    /// member writing) sends it once more; a second is contention, labelled so and not a
    /// failure. The outcome, and whether the server took the entry.
    async fn write(
        &mut self,
        conn: &mut Conn,
        method: &str,
        path: &str,
        entry: Bytes,
        class: &AtomClass,
        expect: &[u16],
    ) -> (Outcome, bool) {
        let mut headers: Vec<_> = morse::ticket_header(&self.ticket).into_iter().collect();
        headers.push((
            CONTENT_TYPE,
            HeaderValue::from_static("application/atom+xml"),
        ));
        let what = format!("{method} {path}");
        let locked = |r: &Response| r.status.as_u16() == 423 && !expect.contains(&423);
        let send = self
            .s
            .send(conn, method, path, &headers, entry.clone())
            .await;
        let r = match send {
            Exchange::Answer(r) if locked(&r) => r,
            Exchange::Answer(r) => {
                let o = check_entry(&r, Outcome::of(&r, expect, &what), &what);
                let taken = o.is_ok();
                return (o, taken);
            }
            Exchange::Failed(o) => return (o, false),
        };
        let first = Outcome::of(&r, expect, &what);
        let (mut o, taken) = match self.s.send(conn, method, path, &headers, entry).await {
            Exchange::Answer(r) if locked(&r) => {
                let mut o = Outcome::of(&r, &[423], &what);
                o.label = class.params.label_contended;
                (o, false)
            }
            Exchange::Answer(r) => {
                let o = check_entry(&r, Outcome::of(&r, expect, &what), &what);
                let taken = o.is_ok();
                (o, taken)
            }
            Exchange::Failed(o) => (o, false),
        };
        o.add_cost(&first);
        (o, taken)
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
