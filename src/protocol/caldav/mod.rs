//! CalDAV users (RFC 4791, RFC 6578) that work against any
//! conforming server. Set-up discovers the calendar home (current-user-principal, then
//! calendar-home-set) unless the class gives `calendar_home`. A user with no calendar makes
//! one first (MKCALENDAR, outside its table). Operations: create_calendar, put_event
//! (`size`, `recurring`), update_event (If-Match with the known ETag), get_event,
//! delete_event, time_range_report (a random week of 2007, or `range`), multiget, propfind,
//! sync_collection (initial, then incremental; a rejected token, 403 or 412, triggers a full
//! resync reported as `sync_collection_resync`); in a team, scheduling (RFC 6638): invite,
//! inbox, answer, cancel and freebusy, their state and texts in `scheduling.rs`.
//!
//! It copes with the differences between servers (see `fixtures/peers/`): DELETE answers 200
//! or 204, tokens of any shape, `<sync-token>` first or last, any namespace prefixes.
//! Multistatus answers are parsed; events fetched are parsed as iCalendar.

use std::sync::Arc;

use rand::Rng;
use rand::rngs::Xoshiro256PlusPlus;

use async_trait::async_trait;

use super::cleanup::Place;
use super::contract::{Done, Preflight, Protocol, Reach};
use super::over_http::{HttpUser, OverHttp};
use super::scheduling::Scheduling;
use super::session::{AccountPlan, Session};
use super::teams::{Board, Membership, TeamPlan};
use super::{ProtocolError, SetupError, VuIds, bootstrap_expect, expect_of};
use crate::formats::dav::{CALDAV, DAV};
use crate::formats::xml::XmlWriter;
use crate::transport::Conn;
use crate::workload::chain::Guard;

use crate::workload::protocols::{CaldavParams, EventShape, MAX_INITIAL_EVENTS};
use crate::workload::{CaldavOp, UserClass};

mod events;
mod invitations;
mod reports;
mod setup;
mod sync;

pub(crate) struct CaldavClass {
    ops: Vec<CaldavOp>,
    expect: Vec<Vec<u16>>,
    params: CaldavParams,
    /// How its users' accounts are made, shared by all of them.
    accounts: Arc<AccountPlan>,
    /// Its team, when its users share a calendar, and where the run's teams meet.
    team: Option<TeamPlan>,
    board: Arc<Board>,
}

impl CaldavClass {
    pub(crate) fn new(
        class: &UserClass,
        ops: &[CaldavOp],
        params: &CaldavParams,
        accounts: &Arc<AccountPlan>,
        team: Option<TeamPlan>,
        board: &Arc<Board>,
    ) -> CaldavClass {
        CaldavClass {
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
                            CaldavOp::CreateCalendar => &[201],
                            CaldavOp::PutEvent(_) | CaldavOp::Invite { .. } => &[201, 204],
                            CaldavOp::UpdateEvent(_) | CaldavOp::Answer { .. } => &[200, 201, 204],
                            CaldavOp::GetEvent | CaldavOp::Freebusy { .. } => &[200],
                            CaldavOp::DeleteEvent | CaldavOp::Cancel => &[200, 204],
                            CaldavOp::TimeRangeReport { .. }
                            | CaldavOp::Multiget { .. }
                            | CaldavOp::Propfind
                            | CaldavOp::SyncCollection
                            | CaldavOp::InitialSync(_)
                            | CaldavOp::DeltaSync { .. }
                            | CaldavOp::Inbox => &[207],
                        },
                    )
                })
                .collect(),
            ops: ops.to_vec(),
            params: params.clone(),
        }
    }
}

struct Event {
    /// Path on the server (as its hrefs give it; the target's base path included).
    path: String,
    uid: String,
    etag: Option<String>,
    /// Which event it is in the stamps of its versions: the pick that made it (set-up's
    /// have numbers of their own, from the top).
    born: u64,
}

struct Calendar {
    path: String,
    /// The events this user made in it.
    events: Vec<Event>,
    sync_token: Option<String>,
    /// A team's calendar, which others write to and read.
    shared: bool,
    /// Made by this user, and so deleted by it at the round's end.
    mine: bool,
    /// Others' events this user has read in it (hrefs), which its reads may ask for.
    others: Vec<String>,
}

impl Calendar {
    fn new(path: String, shared: bool, mine: bool) -> Calendar {
        Calendar {
            path,
            events: Vec::new(),
            sync_token: None,
            shared,
            mine,
            others: Vec::new(),
        }
    }
}

/// Event numbers from here on are set-up's events (a pick's number never gets here).
const SETUP_EVENTS: u64 = 1 << 63;
/// Others' events a user remembers per shared calendar.
const MAX_OTHERS: usize = 10_000;
/// Changed events one sync of a shared calendar fetches, and how many per multiget: a
/// bound on the work one read of a team's calendar makes.
const MAX_FETCH: usize = 600;
const FETCH_CHUNK: usize = 100;

pub(crate) struct CaldavVu {
    class: Arc<CaldavClass>,
    s: Session,
    ids: VuIds,
    home: Option<String>,
    /// The principal discovery found (an owner grants members by it).
    principal: Option<String>,
    /// Others' events the last sync of a shared calendar said changed, to fetch.
    changed: Vec<String>,
    cals: Vec<Calendar>,
    /// Its team, when its class shares a calendar.
    team: Option<Membership>,
    /// Its inbox, address and calendar, when its class schedules (set-up finds them).
    sched: Option<Scheduling>,
}

/// A random event of a calendar, if it has any.
fn pick_event(cal: &Calendar, rng: &mut Xoshiro256PlusPlus) -> Option<usize> {
    (!cal.events.is_empty()).then(|| (rng.next_u64() % cal.events.len() as u64) as usize)
}

/// A `calendar-multiget` asking for the ETag and data of each of `hrefs`.
fn multiget_body<'a>(hrefs: impl Iterator<Item = &'a str>) -> String {
    let mut w = XmlWriter::new();
    w.open(
        "C:calendar-multiget",
        &[("xmlns:D", DAV), ("xmlns:C", CALDAV)],
    )
    .open("D:prop", &[])
    .empty("D:getetag", &[])
    .empty("C:calendar-data", &[])
    .close("D:prop");
    for h in hrefs {
        w.leaf("D:href", h);
    }
    w.close("C:calendar-multiget");
    w.finish()
}

#[async_trait]
impl Protocol for CaldavClass {
    type User = HttpUser<CaldavVu>;

    fn user(self: &Arc<Self>, session: Session, ids: VuIds, reach: Reach) -> Self::User {
        let team = self
            .team
            .as_ref()
            .and_then(|p| Membership::of(p, ids.vu, ids.round, &ids.run_id));
        let mut vu = CaldavVu::new(self.clone(), session.clone(), ids);
        vu.team = team;
        HttpUser::new(vu, session, &reach, Some(self.accounts.clone()))
    }

    /// An account of the probe's own, then its calendar home found as a user's set-up
    /// finds it.
    async fn preflight(self: &Arc<Self>, cx: Preflight<'_>) -> Result<(), ProtocolError> {
        let (s, mut conn) = super::over_http::probe_with_account(&cx).await?;
        let auth = s.auth.clone();
        let mut vu = CaldavVu::new(self.clone(), s, cx.ids.clone());
        let mut found = vu.discover(&mut conn).await;
        // A class that schedules needs a server that does: its inbox and address.
        if found.is_ok() && self.ops.iter().any(CaldavOp::schedules) {
            found = vu.scheduling_props(&mut conn).await.map(|_| ());
        }
        found.map_err(|e| {
            let e = match auth.as_ref().and_then(|a| a.take_refusal()) {
                Some(why) => e.explained(&why),
                None => e,
            };
            let (request, answer) = e.parts();
            cx.failed(request, answer)
        })
    }
}

impl OverHttp for CaldavVu {
    async fn setup(&mut self, conn: &mut Conn) -> Result<(), SetupError> {
        self.discover(conn).await?;
        if self.team.is_none() {
            return Ok(());
        }
        // Its own calendar first: where a server puts invitations when it has no other.
        let enrolled = match self.class.ops.iter().any(CaldavOp::schedules) {
            true => Some(self.enrol(conn).await?),
            false => None,
        };
        self.join_team(conn).await?;
        match enrolled {
            Some(entry) => self.learn_directory(entry).await,
            None => Ok(()),
        }
    }

    fn guard_holds(&self, guard: &Guard) -> bool {
        match guard {
            Guard::Invited => self.sched.as_ref().is_some_and(Scheduling::invited),
            Guard::Synced(want) => self.cals.iter().any(|c| c.sync_token.is_some()) == *want,
            Guard::Pool { .. } => false,
        }
    }

    /// A user of a team works in the team's calendar and makes none of its own.
    fn needs_bootstrap(&self) -> bool {
        self.cals.is_empty() && self.team.is_none()
    }

    fn begin_round(&mut self, round: u32) {
        if let Some(t) = &mut self.team {
            t.begin_round(round);
        }
    }

    fn take_book(&mut self) -> crate::visibility::Book {
        Membership::take_book(&mut self.team)
    }

    /// The calendars this user made (their events go with them).
    fn leftovers(&self) -> Vec<(crate::transport::Method, Place)> {
        let sched = self.sched.as_ref().filter(|s| s.mine).map(|s| &s.calendar);
        self.cals
            .iter()
            .filter(|c| c.mine)
            .map(|c| &c.path)
            .chain(sched)
            .map(|path| {
                (
                    crate::transport::Method::DELETE,
                    Place::Server(path.clone()),
                )
            })
            .collect()
    }

    async fn bootstrap(&mut self, conn: &mut Conn, rng: &mut Xoshiro256PlusPlus) -> Done {
        let expect = bootstrap_expect(
            &self.class.ops,
            &self.class.expect,
            |o| *o == CaldavOp::CreateCalendar,
            &[201],
        );
        let mut o = self.mkcalendar(conn, rng, &expect).await;
        o.label = Some(self.class.params.label_create_calendar);
        Done::Sent(o)
    }

    /// The class's `initial_events` put in the calendar set-up made, one PUT each and
    /// several at once (`dav::fill`), in the shape of the class's `put_event` (its size, recurrence, attendees, alarms; the
    /// generator's default shape when it has none), so that reports, syncs and updates
    /// meet a calendar of a realistic size and make-up from the first pick. Stops at the
    /// first failure; the rest are not sent.
    async fn prefill(
        &mut self,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Result<(), String> {
        let n = self
            .class
            .params
            .initial_events
            .as_ref()
            .map_or(0, |d| d.sample_count(rng, MAX_INITIAL_EVENTS));
        let Some(ci) = self.cals.len().checked_sub(1) else {
            return Ok(());
        };
        let class = self.class.clone();
        let default = EventShape::default();
        let shape = class
            .ops
            .iter()
            .find_map(|o| {
                let CaldavOp::PutEvent(shape) = o else {
                    return None;
                };
                Some(shape)
            })
            .unwrap_or(&default);
        self.fill(conn, rng, ci, shape, n).await
    }

    async fn execute(
        &mut self,
        op: usize,
        seq: u64,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Done {
        let class = self.class.clone();
        let expect = class.expect[op].as_slice();
        if class.ops[op] == CaldavOp::CreateCalendar {
            return self.mkcalendar(conn, rng, expect).await.into();
        }
        // Scheduling works in the user's own calendar and inbox, not one drawn.
        if class.ops[op].schedules() {
            return self.schedule(conn, rng, op, seq, expect).await;
        }
        if self.cals.is_empty() {
            return Done::Skipped;
        }
        let ci = (rng.next_u64() % self.cals.len() as u64) as usize;
        let label = u16::try_from(op).unwrap_or(u16::MAX);
        // A write to a shared calendar is stamped; a read of one notes what it reveals.
        let stamp = match (&self.team, self.cals[ci].shared) {
            (Some(_), true) if class.ops[op].shows_others() => Some((seq, label)),
            _ => None,
        };
        if let (Some(t), true) = (&mut self.team, self.cals[ci].shared)
            && class.ops[op].reveals()
        {
            let news = matches!(
                class.ops[op],
                CaldavOp::SyncCollection | CaldavOp::DeltaSync { .. }
            ) && self.cals[ci].sync_token.is_some();
            t.watch(label, news);
        }
        let done = self.run_op(conn, rng, op, ci, stamp, expect).await;
        if let Some(t) = &mut self.team {
            t.done();
        }
        done
    }
}

impl CaldavVu {
    /// Operation `op` of the class's table on calendar `ci`; a write stamped with
    /// `stamp` (its pick and label) when it goes to a shared calendar.
    async fn run_op(
        &mut self,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
        op: usize,
        ci: usize,
        stamp: Option<(u64, u16)>,
        expect: &[u16],
    ) -> Done {
        let class = self.class.clone();
        match &class.ops[op] {
            CaldavOp::CreateCalendar => Done::Skipped,
            CaldavOp::PutEvent(shape) => {
                let born = stamp.map_or(0, |(seq, _)| seq);
                let o = self.new_event(conn, rng, ci, born, shape, expect).await;
                if let Some((seq, label)) = stamp {
                    self.wrote(&o, seq, born, label);
                }
                o.into()
            }
            CaldavOp::UpdateEvent(shape) => {
                self.update_event(conn, rng, ci, shape, stamp, expect).await
            }
            CaldavOp::GetEvent => self.get_event(conn, rng, ci, expect).await,
            CaldavOp::DeleteEvent => self.delete_event(conn, rng, ci, expect).await,
            CaldavOp::TimeRangeReport { range } => self
                .time_range_report(conn, rng, ci, range, expect)
                .await
                .into(),
            CaldavOp::Multiget { count } => self.multiget(conn, rng, ci, *count, expect).await,
            CaldavOp::Propfind => self.propfind(conn, ci, expect).await.into(),
            CaldavOp::SyncCollection => self.sync_collection(conn, ci, &class, expect).await.into(),
            CaldavOp::InitialSync(how) => self
                .initial_sync(conn, ci, &class, *how, expect)
                .await
                .into(),
            CaldavOp::DeltaSync { batch } => self
                .delta_sync(conn, ci, &class, *batch, expect)
                .await
                .into(),
            // Run before a calendar is drawn (see `execute`).
            CaldavOp::Invite { .. }
            | CaldavOp::Inbox
            | CaldavOp::Answer { .. }
            | CaldavOp::Cancel
            | CaldavOp::Freebusy { .. } => Done::Skipped,
        }
    }
}

impl CaldavVu {
    pub(crate) fn new(class: Arc<CaldavClass>, s: Session, ids: VuIds) -> CaldavVu {
        CaldavVu {
            class,
            s,
            ids,
            home: None,
            principal: None,
            changed: Vec::new(),
            cals: Vec::new(),
            team: None,
            sched: None,
        }
    }
}

/// A `calendar-query` for the ETag and data of the events that `filter` (written inside
/// the VEVENT comp-filter) selects.
fn event_query(filter: impl FnOnce(&mut XmlWriter)) -> String {
    let mut w = XmlWriter::new();
    w.open("C:calendar-query", &[("xmlns:C", CALDAV), ("xmlns:D", DAV)])
        .open("D:prop", &[])
        .empty("D:getetag", &[])
        .empty("C:calendar-data", &[])
        .close("D:prop")
        .open("C:filter", &[])
        .open("C:comp-filter", &[("name", "VCALENDAR")])
        .open("C:comp-filter", &[("name", "VEVENT")]);
    filter(&mut w);
    w.close("C:comp-filter")
        .close("C:comp-filter")
        .close("C:filter")
        .close("C:calendar-query");
    w.finish()
}

#[cfg(test)]
mod tests {
    use crate::formats::dav::{href_path, parse_multistatus};

    #[test]
    fn multistatus_any_order_and_prefix() {
        let a = br#"<?xml version="1.0"?><multistatus xmlns="DAV:"><sync-token>http://radicale.org/ns/sync/abc</sync-token><response><href>/u/c/a.ics</href><propstat><prop><getetag>"e1"</getetag></prop><status>HTTP/1.1 200 OK</status></propstat></response><response><href>/u/c/b.ics</href><status>HTTP/1.1 404 Not Found</status></response></multistatus>"#;
        let b = br#"<ns0:multistatus xmlns:ns0="DAV:"><ns0:response><ns0:href>/u/c/a.ics</ns0:href><ns0:propstat><ns0:status>HTTP/1.1 200 OK</ns0:status><ns0:prop><ns0:getetag>"e1"</ns0:getetag></ns0:prop></ns0:propstat></ns0:response><ns0:response><ns0:href>/u/c/b.ics</ns0:href><ns0:status>HTTP/1.1 404 Not Found</ns0:status></ns0:response><ns0:sync-token>abc</ns0:sync-token></ns0:multistatus>"#;
        let ma = parse_multistatus(a).unwrap();
        let mb = parse_multistatus(b).unwrap();
        assert_eq!(ma.responses, mb.responses);
        assert_eq!(
            ma.responses[0],
            ("/u/c/a.ics".into(), 200, Some("\"e1\"".into()))
        );
        assert_eq!(ma.responses[1].1, 404);
        assert_eq!(
            ma.sync_token.as_deref(),
            Some("http://radicale.org/ns/sync/abc")
        );
        assert_eq!(mb.sync_token.as_deref(), Some("abc"));
        assert!(parse_multistatus(b"<html/>").is_err());
        assert!(parse_multistatus(b"garbage").is_err());
    }

    #[test]
    fn hrefs_lose_scheme_and_host() {
        assert_eq!(href_path("http://h:1/a/b/"), "/a/b/");
        assert_eq!(href_path("/a/b/"), "/a/b/");
    }
}

/// Parsers against responses captured from Radicale and Xandikos (fixtures/peers/).
#[cfg(test)]
mod peer_fixtures {
    use super::*;
    use crate::formats::dav::{find_prop_href, parse_multistatus};
    use crate::formats::xml;

    macro_rules! fixture {
        ($f:literal) => {
            include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/peers/", $f))
        };
    }

    fn root(b: &[u8]) -> xml::El {
        xml::parse(std::str::from_utf8(b).unwrap()).unwrap()
    }

    #[test]
    fn discovery_answers() {
        let r = root(fixture!("radicale-current-user-principal.xml"));
        assert_eq!(
            find_prop_href(&r, DAV, "current-user-principal").as_deref(),
            Some("/fixture/")
        );
        let r = root(fixture!("radicale-calendar-home-set.xml"));
        assert_eq!(
            find_prop_href(&r, CALDAV, "calendar-home-set").as_deref(),
            Some("/fixture/")
        );
        let x = root(fixture!("xandikos-current-user-principal.xml"));
        assert_eq!(
            find_prop_href(&x, DAV, "current-user-principal").as_deref(),
            Some("/user/")
        );
        let x = root(fixture!("xandikos-calendar-home-set.xml"));
        assert_eq!(
            find_prop_href(&x, CALDAV, "calendar-home-set").as_deref(),
            Some("/user/calendars/")
        );
    }

    #[test]
    fn calendar_query_answers() {
        for (name, body) in [
            ("radicale", &fixture!("radicale-calendar-query.xml")[..]),
            ("xandikos", &fixture!("xandikos-calendar-query.xml")[..]),
        ] {
            let m = parse_multistatus(body).unwrap();
            let mut hrefs: Vec<&str> = m
                .responses
                .iter()
                .map(|(h, _, _)| h.rsplit('/').next().unwrap())
                .collect();
            hrefs.sort();
            assert_eq!(hrefs, ["fx-1.ics", "fx-2.ics"], "{name}");
            assert!(
                m.responses.iter().all(|(_, s, e)| *s == 200 && e.is_some()),
                "{name}: {m:?}"
            );
        }
    }

    #[test]
    fn sync_answers_either_order_and_token_shape() {
        let r = parse_multistatus(fixture!("radicale-sync-initial.xml")).unwrap();
        let x = parse_multistatus(fixture!("xandikos-sync-initial.xml")).unwrap();
        for m in [&r, &x] {
            assert_eq!(m.responses.len(), 3);
            assert!(m.sync_token.is_some());
        }
        assert!(
            r.sync_token
                .as_deref()
                .unwrap()
                .starts_with("http://radicale.org/ns/sync/")
        );
        assert!(
            x.sync_token
                .as_deref()
                .unwrap()
                .chars()
                .all(|c| c.is_ascii_hexdigit())
        );
        for body in [
            &fixture!("radicale-sync-after-delete.xml")[..],
            &fixture!("xandikos-sync-after-delete.xml")[..],
        ] {
            let m = parse_multistatus(body).unwrap();
            assert_eq!(m.responses.len(), 1);
            assert!(m.responses[0].0.ends_with("fx-1.ics"));
            assert_eq!(m.responses[0].1, 404, "a deleted member is a 404 response");
            assert!(m.sync_token.is_some());
        }
    }

    #[test]
    fn invalid_token_answers_name_the_condition() {
        for body in [
            &fixture!("radicale-sync-invalid-token.xml")[..],
            &fixture!("xandikos-sync-invalid-token.xml")[..],
        ] {
            let e = root(body);
            assert!(e.is(DAV, "error"));
            assert!(e.child(DAV, "valid-sync-token").is_some());
        }
    }
}
