//! The scheduling side of a CalDAV user (RFC 6638): its set-up (inbox, address, the
//! team's directory) and the operations that invite, cancel, ask free-busy, read the
//! inbox and answer. Its state and texts are `protocol/scheduling.rs`'s.

use bytes::Bytes;
use hyper::header::{CONTENT_TYPE, HeaderValue, IF_MATCH, IF_NONE_MATCH};
use rand::rngs::Xoshiro256PlusPlus;

use crate::formats::dav::{CALDAV, Multistatus, find_prop_href, href_path};
use crate::formats::xml::{self};
use crate::protocol::contract::Done;
use crate::protocol::scheduling::{self, Scheduling};
use crate::protocol::session::Exchange;
use crate::protocol::teams::Entry;
use crate::protocol::{Outcome, SetupError, Stage, data};
use crate::transport::{Conn, Response};
use crate::visibility::Audience;

use crate::workload::CaldavOp;
use crate::workload::protocols::EventShape;

use super::{CaldavVu, FETCH_CHUNK, event_query, multiget_body};
use crate::protocol::dav::{depth, multistatus_outcome, xml_ct};

impl CaldavVu {
    /// Set-up of a user that schedules: its principal's inbox and address, then its own
    /// calendar (`calendar` in its home, the name servers deliver invitations to when
    /// no other is set: DAViCal, the embedded server), made unless it is there. Its
    /// entry in the team's directory is what it returns.
    pub(super) async fn enrol(&mut self, conn: &mut Conn) -> Result<Entry, SetupError> {
        let fail = |answer: String| SetupError {
            stage: Stage::Team,
            request: "scheduling".into(),
            answer,
        };
        let (boxes, address) = self.scheduling_props(conn).await?;
        let home = self.home.clone().unwrap_or_default();
        let calendar = format!("{home}calendar/");
        let mine = match self.send_mkcalendar(conn, &calendar, "Calendar").await {
            Ok(r) if r.status.is_success() => true,
            // Already there (RFC 4791 §5.3.1: 405 on an existing resource).
            Ok(r) if r.status.as_u16() == 405 => false,
            Ok(r) => return Err(fail(format!("MKCALENDAR {calendar} -> {}", r.status))),
            Err(o) => {
                let why = o.detail.unwrap_or_default();
                return Err(fail(format!("MKCALENDAR {calendar} -> {why}")));
            }
        };
        let Some(t) = &self.team else {
            return Err(fail("a user that schedules must be in a team".into()));
        };
        let entry = Entry {
            who: t.who,
            address: address.clone(),
            reads_inbox: self.class.ops.contains(&CaldavOp::Inbox),
        };
        self.class.board.enrolled(t.key(), entry.clone());
        let (inbox, outbox) = boxes;
        self.sched = Some(Scheduling::new(inbox, outbox, address, calendar, mine));
        Ok(entry)
    }

    /// The principal's schedule-inbox-URL and, when it gives one, schedule-outbox-URL (as
    /// paths), and its calendar user address; discovery must have found the principal.
    pub(super) async fn scheduling_props(
        &self,
        conn: &mut Conn,
    ) -> Result<((String, Option<String>), String), SetupError> {
        let Some(principal) = self.principal.as_deref() else {
            return Err(SetupError {
 stage: Stage::Discovery,
                request: "scheduling".into(),
                answer: "no principal (calendar_home skips discovery): give the class no calendar_home to schedule".into(),
            });
        };
        let what = "schedule-inbox-URL, schedule-outbox-URL, calendar-user-address-set";
        let (root, url) = self
            .find_props(conn, principal, scheduling::PRINCIPAL_PROPS, what)
            .await?;
        let fail = |answer: &str| SetupError {
            stage: Stage::Discovery,
            request: format!("PROPFIND {url} ({what})"),
            answer: format!(
                "{answer}: the server does not schedule (RFC 6638); take invite, inbox and answer out of the workload for it"
            ),
        };
        let inbox = find_prop_href(&root, CALDAV, "schedule-inbox-URL")
            .ok_or_else(|| fail("207 without schedule-inbox-URL"))?;
        let address =
            scheduling::address_of(&root).ok_or_else(|| fail("207 without an address"))?;
        let outbox = find_prop_href(&root, CALDAV, "schedule-outbox-URL").map(|h| href_path(&h));
        let mut inbox = href_path(&inbox);
        if !inbox.ends_with('/') {
            inbox.push('/');
        }
        Ok(((inbox, outbox), address))
    }

    /// Wait (in set-up) until every member of the team that schedules has said its
    /// address.
    pub(super) async fn learn_directory(&mut self, me: Entry) -> Result<(), SetupError> {
        let (Some(t), Some(_)) = (&self.team, &self.sched) else {
            return Ok(());
        };
        let (key, n) = (t.key(), t.schedulers);
        let until = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
        let directory = self
            .class
            .board
            .directory(key, n, until)
            .await
            .map_err(|answer| SetupError {
                stage: Stage::Team,
                request: format!("the team's addresses (this user's: {})", me.address),
                answer,
            })?;
        if let Some(s) = &mut self.sched {
            s.directory = directory;
        }
        Ok(())
    }

    /// A scheduling operation of the class's table.
    pub(super) async fn schedule(
        &mut self,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
        op: usize,
        seq: u64,
        expect: &[u16],
    ) -> Done {
        if self.sched.is_none() || self.team.is_none() {
            return Done::Skipped;
        }
        let class = self.class.clone();
        let label = u16::try_from(op).unwrap_or(u16::MAX);
        match &class.ops[op] {
            CaldavOp::Invite { shape, invitees } => {
                self.invite(conn, rng, (shape, *invitees), (seq, label), expect)
                    .await
            }
            CaldavOp::Inbox => self.inbox(conn, label, expect).await.into(),
            CaldavOp::Answer { accept } => {
                let yes = data::chance(rng, *accept);
                self.answer(conn, yes, label, expect).await
            }
            CaldavOp::Cancel => self.cancel(conn, label, expect).await,
            CaldavOp::Freebusy { range, attendees } => {
                self.freebusy(conn, rng, range, *attendees, expect).await
            }
            // Not scheduling: the driver's dispatch never sends these here.
            CaldavOp::CreateCalendar
            | CaldavOp::PutEvent(_)
            | CaldavOp::UpdateEvent(_)
            | CaldavOp::GetEvent
            | CaldavOp::DeleteEvent
            | CaldavOp::TimeRangeReport { .. }
            | CaldavOp::Multiget { .. }
            | CaldavOp::SyncCollection
            | CaldavOp::Propfind
            | CaldavOp::InitialSync(_)
            | CaldavOp::DeltaSync { .. } => Done::Skipped,
        }
    }

    /// An event with this user as organizer and some of its team's inbox readers as
    /// attendees, put in its own calendar (the server delivers the invitations); stamped,
    /// for the attendees to see.
    pub(super) async fn invite(
        &mut self,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
        (shape, invitees): (&EventShape, Option<u32>),
        (seq, label): (u64, u16),
        expect: &[u16],
    ) -> Done {
        let (Some(t), Some(s)) = (&self.team, &self.sched) else {
            return Done::Skipped;
        };
        let all = s.invitees(t.who);
        if all.is_empty() {
            return Done::Skipped;
        }
        let chosen = Scheduling::draw(&all, invitees, rng);
        let addresses: Vec<&str> = chosen.iter().map(|e| e.address.as_str()).collect();
        let audience = scheduling::audience_of(&chosen);
        let uid = data::uid(rng, &self.ids.run_id);
        let path = format!("{}{uid}.ics", s.calendar);
        let size = shape.size.as_ref().map_or(0, |d| d.sample(rng) as usize);
        let body = scheduling::invitation(
            data::ics_event(rng, &uid, size, shape),
            &s.address,
            &addresses,
        );
        let stamp = t.stamp(seq, seq);
        let body = t.stamped(body, &stamp);
        let cond = (IF_NONE_MATCH, HeaderValue::from_static("*"));
        let (o, _) = self.send_put(conn, &path, body, Some(cond), expect).await;
        if o.is_ok()
            && let Some(s) = &mut self.sched
        {
            s.sent(scheduling::Sent {
                uid,
                path,
                audience: audience.clone(),
            });
        }
        if let Some(t) = &mut self.team
            && o.is_ok()
        {
            let team = t.team();
            t.book.wrote(
                stamp,
                team,
                Audience::Only(audience),
                label,
                crate::visibility::now_us(),
            );
        }
        o.into()
    }

    /// The user's oldest invitation still standing deleted from its calendar; the server
    /// sends its attendees a CANCEL, which they see as this write (see
    /// `scheduling::cancel_seq`).
    pub(super) async fn cancel(&mut self, conn: &mut Conn, label: u16, expect: &[u16]) -> Done {
        let Some(sent) = self.sched.as_mut().and_then(Scheduling::next_to_cancel) else {
            return Done::Skipped;
        };
        let path = &sent.path;
        let o = match self
            .s
            .send_to(conn, "DELETE", path, &[], Bytes::new())
            .await
        {
            Exchange::Answer(r) => Outcome::of(&r, expect, &format!("DELETE {path}")),
            Exchange::Failed(o) => o,
        };
        if let (Some(t), true) = (&mut self.team, o.is_ok()) {
            let seq = scheduling::cancel_seq(&sent.uid);
            let stamp = t.stamp(seq, seq);
            let team = t.team();
            let only = Audience::Only(sent.audience);
            t.book
                .wrote(stamp, team, only, label, crate::visibility::now_us());
        }
        o.into()
    }

    /// A free-busy query (RFC 6638 §5.2): a VFREEBUSY REQUEST about some of the team's
    /// other schedulers POSTed to the user's outbox, answered with a `schedule-response`
    /// that must give each of them a 2.x request status (they are the server's users).
    pub(super) async fn freebusy(
        &mut self,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
        range: &crate::workload::Dist,
        k: Option<u32>,
        expect: &[u16],
    ) -> Done {
        let (Some(t), Some(s)) = (&self.team, &self.sched) else {
            return Done::Skipped;
        };
        let Some(outbox) = s.outbox.clone() else {
            let why = "the principal gives no schedule-outbox-URL".to_string();
            return Outcome::failed(crate::transport::ErrorClass::Body, why).into();
        };
        let others = s.others(t.who);
        if others.is_empty() {
            return Done::Skipped;
        }
        let asked: Vec<&str> = Scheduling::draw(&others, k, rng)
            .iter()
            .map(|e| e.address.as_str())
            .collect();
        let len = chrono::Duration::microseconds(range.sample(rng) as i64);
        let (start, end) = data::week(rng, len);
        let (start, end) = (data::ical_utc(start), data::ical_utc(end));
        let uid = data::uid(rng, &self.ids.run_id);
        let body = scheduling::freebusy_request(&uid, &s.address, &asked, &start, &end);
        let what = format!("POST {outbox} (free-busy of {})", asked.len());
        let n = asked.len();
        let headers = [(
            CONTENT_TYPE,
            HeaderValue::from_static("text/calendar; charset=utf-8"),
        )];
        let r = match self
            .s
            .send_to(conn, "POST", &outbox, &headers, Bytes::from(body))
            .await
        {
            Exchange::Answer(r) => r,
            Exchange::Failed(o) => return o.into(),
        };
        let o = Outcome::of(&r, expect, &what);
        match o.is_ok() {
            true => freebusy_checked(o, &r, n, &what).into(),
            false => o.into(),
        }
    }

    /// The inbox read as a client reads it: listed (PROPFIND, depth 1), the new
    /// messages fetched (calendar-multiget) and deleted once read; the invitations among
    /// them wait for an answer, the stamps they carry are sights. Every request counts in
    /// the one outcome; the first that fails ends the operation.
    pub(super) async fn inbox(&mut self, conn: &mut Conn, label: u16, expect: &[u16]) -> Outcome {
        let Some(inbox) = self.sched.as_ref().map(|s| s.inbox.clone()) else {
            return Outcome::failed(crate::transport::ErrorClass::Body, "no inbox".into());
        };
        if let Some(t) = &mut self.team {
            t.watch(label, true);
        }
        let o = self.read_inbox(conn, &inbox, expect).await;
        if let Some(t) = &mut self.team {
            t.done();
        }
        o
    }

    pub(super) async fn read_inbox(
        &mut self,
        conn: &mut Conn,
        inbox: &str,
        expect: &[u16],
    ) -> Outcome {
        let body = r#"<D:propfind xmlns:D="DAV:"><D:prop><D:getetag/></D:prop></D:propfind>"#;
        let r = match self
            .s
            .send_to(
                conn,
                "PROPFIND",
                inbox,
                &[xml_ct(), depth("1")],
                Bytes::from_static(body.as_bytes()),
            )
            .await
        {
            Exchange::Answer(r) => r,
            Exchange::Failed(o) => return o,
        };
        if let Some(t) = &mut self.team {
            t.answered();
        }
        let what = format!("PROPFIND {inbox}");
        let (mut o, m) = multistatus_outcome(&r, Outcome::of(&r, expect, &what), &what);
        let (Some(m), Some(s)) = (m, &self.sched) else {
            return o;
        };
        let listed: Vec<String> = m
            .responses
            .iter()
            .filter(|(_, st, _)| *st != 404)
            .map(|(h, _, _)| href_path(h))
            .collect();
        let unread = s.unread(listed.iter().map(String::as_str));
        if !unread.is_empty() {
            let chunk = &unread[..unread.len().min(FETCH_CHUNK)];
            if !self.fetch_messages(conn, inbox, chunk, &mut o).await {
                return o;
            }
        }
        self.delete_messages(conn, &mut o).await;
        o
    }

    /// Fetch messages `hrefs` of the inbox (one calendar-multiget) and read them; its
    /// cost added to `o`, or its failure made the outcome (`false`).
    pub(super) async fn fetch_messages(
        &mut self,
        conn: &mut Conn,
        inbox: &str,
        hrefs: &[String],
        o: &mut Outcome,
    ) -> bool {
        let body = multiget_body(hrefs.iter().map(String::as_str));
        let what = format!("REPORT calendar-multiget {inbox}");
        let f = match self.send_report_to(conn, inbox.to_string(), body).await {
            Ok((r, _)) => {
                let (f, m) = multistatus_outcome(&r, Outcome::of(&r, &[207], &what), &what);
                if let Some(m) = &m {
                    self.read_messages(m);
                }
                f
            }
            Err(f) => f,
        };
        let fetched = f.is_ok();
        if let (Some(s), true) = (&mut self.sched, fetched) {
            s.fetched(hrefs);
        }
        absorb(o, f)
    }

    /// Delete messages read, the oldest first, at most [`scheduling::DELETES_PER_POLL`]
    /// a poll (the rest wait for the next), each cost added to `o`; the first that fails
    /// becomes the outcome.
    pub(super) async fn delete_messages(&mut self, conn: &mut Conn, o: &mut Outcome) {
        for _ in 0..scheduling::DELETES_PER_POLL {
            let Some(href) = self.sched.as_mut().and_then(Scheduling::next_to_delete) else {
                return;
            };
            let f = match self
                .s
                .send_to(conn, "DELETE", &href, &[], Bytes::new())
                .await
            {
                // Already gone is as good: DAViCal, for one, replaces a message about
                // the same event under the same name.
                Exchange::Answer(r) => Outcome::of(&r, &[200, 204, 404], &format!("DELETE {href}")),
                Exchange::Failed(f) => f,
            };
            let ok = f.is_ok();
            if let Some(s) = &mut self.sched {
                s.deleted(&href, ok);
            }
            if !absorb(o, f) {
                return;
            }
        }
    }

    /// What fetched inbox messages say: their stamps, first sights of what caused them;
    /// the invitations among them, to answer.
    pub(super) fn read_messages(&mut self, m: &Multistatus) {
        for (_, text) in &m.data {
            let msg = scheduling::message(text);
            let stamped = !crate::visibility::stamps_in(text).is_empty();
            // A CANCEL carries the stamps of the invitation it withdraws, seen before:
            // what it shows is the cancellation, named from its UID.
            let cancel = msg.as_ref().is_ok_and(|m| m.method == "CANCEL");
            if let (Some(t), false) = (&mut self.team, cancel) {
                t.read(text);
            }
            // A message that is not iCalendar is the server's to answer for; it is
            // deleted with the rest and asks nothing of the user.
            let (Ok(msg), Some(s)) = (msg, &mut self.sched) else {
                continue;
            };
            s.received(&msg, &self.ids.run_id);
            let Some(t) = &mut self.team else {
                continue;
            };
            let known = match (s.cancellation_in(&msg), stamped) {
                (Some(c), _) => vec![c],
                (None, false) => s.answers_in(&msg),
                (None, true) => Vec::new(),
            };
            for (writer, seq) in known {
                t.saw(&crate::visibility::Stamp {
                    writer,
                    seq,
                    event: seq,
                });
            }
        }
    }

    /// The oldest invitation waiting, answered in the user's copy of the event (found by
    /// its UID in the user's calendar, then PUT back with its PARTSTAT under
    /// `If-Match`); the server sends the organizer the REPLY, whose stamp is this
    /// answer's.
    pub(super) async fn answer(
        &mut self,
        conn: &mut Conn,
        accept: bool,
        label: u16,
        expect: &[u16],
    ) -> Done {
        let Some(p) = self.sched.as_mut().and_then(Scheduling::next_pending) else {
            return Done::Skipped;
        };
        let mut spent: Option<Outcome> = None;
        loop {
            let (found, mut o) = self.find_copy(conn, &p.uid).await;
            if let Some(earlier) = &spent {
                o.add_cost(earlier);
            }
            let Some(copy) = found else {
                if o.is_ok() {
                    o.label = self.class.params.label_answer_gone;
                }
                return o.into();
            };
            let mut f = self.put_answer(conn, &p, copy, accept, label, expect).await;
            f.add_cost(&o);
            // The server changed the copy between the query and the PUT (DAViCal does
            // when another attendee answers): read it again and answer once more, as a
            // client does.
            if spent.is_none() && f.answer.http_status() == Some(412) {
                spent = Some(f);
                continue;
            }
            return f.into();
        }
    }

    /// The user's answer to invitation `p` PUT into its copy (path, ETag, text) under
    /// `If-Match`; noted in its book once acknowledged.
    pub(super) async fn put_answer(
        &mut self,
        conn: &mut Conn,
        p: &scheduling::Pending,
        copy: HeldCopy,
        accept: bool,
        label: u16,
        expect: &[u16],
    ) -> Outcome {
        let (Some(t), Some(s)) = (&self.team, &self.sched) else {
            return Outcome::failed(crate::transport::ErrorClass::Body, "no team".into());
        };
        // Numbered by the invitation, not the pick: see `scheduling::answer_seq`.
        let answer = scheduling::answer_seq(&p.uid);
        let stamp = t.stamp(answer, answer);
        let line = p.organizer.map(|_| t.stamp_line(&stamp));
        let body = scheduling::answer(&copy.text, &s.address, accept, line.as_deref());
        let cond = copy
            .etag
            .as_deref()
            .and_then(|e| HeaderValue::from_str(e).ok())
            .map(|v| (IF_MATCH, v));
        let (f, _) = self.send_put(conn, &copy.path, body, cond, expect).await;
        if let (Some(s), true) = (&mut self.sched, f.is_ok()) {
            s.has_answered(&p.uid);
        }
        if let (Some(t), Some(organizer), true) = (&mut self.team, p.organizer, f.is_ok()) {
            let team = t.team();
            let only = Audience::Only(std::sync::Arc::from([organizer]));
            t.book
                .wrote(stamp, team, only, label, crate::visibility::now_us());
        }
        f
    }

    /// The user's copy of event `uid` in its calendar (a calendar-query on the UID): its
    /// path, ETag and text, with the query's outcome; none when the calendar has none
    /// (the invitation was cancelled meanwhile, or the server never put it there).
    pub(super) async fn find_copy(
        &mut self,
        conn: &mut Conn,
        uid: &str,
    ) -> (Option<HeldCopy>, Outcome) {
        let Some(cal) = self.sched.as_ref().map(|s| s.calendar.clone()) else {
            return (
                None,
                Outcome::failed(crate::transport::ErrorClass::Body, "no calendar".into()),
            );
        };
        let body = event_query(|w| {
            w.open("C:prop-filter", &[("name", "UID")])
                .open("C:text-match", &[("collation", "i;octet")])
                .text(uid)
                .close("C:text-match")
                .close("C:prop-filter");
        });
        let what = format!("REPORT calendar-query {cal} (UID {uid})");
        let (r, _) = match self.send_report_to(conn, cal.clone(), body).await {
            Ok(x) => x,
            Err(o) => return (None, o),
        };
        let (o, m) = multistatus_outcome(&r, Outcome::of(&r, &[207], &what), &what);
        // Only a copy inside the user's calendar is one it may write.
        let found = m.and_then(|m| {
            let (i, text) = m.data.into_iter().next()?;
            let (href, _, etag) = m.responses.into_iter().nth(i)?;
            let path = href_path(&href);
            (path.len() > cal.len() && path.starts_with(&cal)).then_some(HeldCopy {
                path,
                etag,
                text,
            })
        });
        (found, o)
    }
}

/// A user's copy of an invitation, found in its calendar: where, its ETag, its text.
pub(super) struct HeldCopy {
    path: String,
    etag: Option<String>,
    text: String,
}

/// A free-busy answer `r` held to what was asked: a `schedule-response` giving each of
/// the `n` recipients a 2.x request status, else a body failure naming the first that
/// was not.
fn freebusy_checked(o: Outcome, r: &Response, n: usize, what: &str) -> Outcome {
    let answered = std::str::from_utf8(&r.body)
        .map_err(|e| e.to_string())
        .and_then(|t| xml::parse(t).map_err(|e| e.to_string()))
        .and_then(|root| scheduling::schedule_response(&root));
    match answered {
        Ok(rs) if rs.len() < n => {
            o.body_error(format!("{what}: {} of {n} recipients answered", rs.len()))
        }
        Ok(rs) => match rs.iter().find(|(_, st)| !st.starts_with("2.")) {
            Some((who, st)) => o.body_error(format!("{what}: {who} answered {st}")),
            None => o,
        },
        Err(e) => o.body_error(format!("{what}: {e}")),
    }
}

/// `f`'s costs added to `o` when it succeeded (`true`); else `f`, with `o`'s costs and
/// label, becomes the outcome (`false`: stop).
fn absorb(o: &mut Outcome, mut f: Outcome) -> bool {
    if f.is_ok() {
        o.add_cost(&f);
        return true;
    }
    f.add_cost(o);
    f.label = o.label;
    *o = f;
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, body: &str) -> Response {
        Response::canned(status, &[], body)
    }

    fn schedule_response(statuses: &[(&str, &str)]) -> String {
        let each: String = statuses
            .iter()
            .map(|(who, st)| {
                format!(
                    "<C:response><C:recipient><D:href>{who}</D:href></C:recipient>\
                     <C:request-status>{st}</C:request-status></C:response>"
                )
            })
            .collect();
        format!(
            r#"<C:schedule-response xmlns:C="urn:ietf:params:xml:ns:caldav" xmlns:D="DAV:">{each}</C:schedule-response>"#
        )
    }

    #[test]
    fn a_free_busy_answer_is_held_to_every_recipient_asked() {
        let ok = schedule_response(&[
            ("mailto:bob@localhost", "2.0;Success"),
            ("mailto:carol@localhost", "2.0;Success"),
        ]);
        let r = answer(200, &ok);
        let o = Outcome::of(&r, &[200], "freebusy");
        assert!(freebusy_checked(o.clone(), &r, 2, "freebusy").is_ok());
        // One recipient fewer than asked, a recipient refused, a body that is no XML.
        let e = freebusy_checked(o.clone(), &r, 3, "freebusy");
        assert_eq!(
            e.detail.as_deref(),
            Some("freebusy: 2 of 3 recipients answered")
        );
        let refused = schedule_response(&[("mailto:bob@localhost", "3.7;Invalid user")]);
        let r = answer(200, &refused);
        let e = freebusy_checked(Outcome::of(&r, &[200], "fb"), &r, 1, "fb");
        assert_eq!(
            e.detail.as_deref(),
            Some("fb: mailto:bob@localhost answered 3.7;Invalid user")
        );
        let r = answer(200, "<not xml");
        assert!(!freebusy_checked(Outcome::of(&r, &[200], "fb"), &r, 1, "fb").is_ok());
    }

    #[test]
    fn a_failed_step_becomes_the_outcome_with_every_cost_before_it() {
        let first = answer(207, "");
        let mut o = Outcome::of(&first, &[207], "read inbox");
        o.label = Some(4);
        // A step that succeeded: its cost added, go on.
        assert!(absorb(&mut o, Outcome::of(&answer(200, ""), &[200], "get")));
        assert_eq!(
            (o.bytes_sent, o.bytes_received, o.is_ok()),
            (200, 400, true)
        );
        // One that failed: it is the outcome now, under the operation's label, with what
        // the steps before it cost.
        assert!(!absorb(
            &mut o,
            Outcome::of(&answer(500, ""), &[204], "delete")
        ));
        assert_eq!(o.detail.as_deref(), Some("delete -> 500"));
        assert_eq!((o.bytes_sent, o.label), (300, Some(4)));
    }
}
