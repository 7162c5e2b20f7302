//! A CalDAV user's events: made (PUT with If-None-Match), updated with the ETag it
//! knows, read and deleted; a write to a shared calendar noted in the team's book.

use bytes::Bytes;
use hyper::header::{CONTENT_TYPE, HeaderName, HeaderValue, IF_MATCH, IF_NONE_MATCH};
use rand::rngs::Xoshiro256PlusPlus;

use crate::formats::ical;
use crate::protocol::contract::Done;
use crate::protocol::dav;
use crate::protocol::session::Exchange;
use crate::protocol::{Outcome, data};
use crate::transport::{Conn, Response};
use crate::visibility::Audience;

use crate::workload::protocols::EventShape;

use super::{CaldavVu, Event, SETUP_EVENTS, pick_event};
use crate::protocol::dav::etag_of;

/// The event a PUT writes: a new one, or the user's event at this index of the calendar
/// (which nothing else changes while the PUT is answered). Told, not searched for by
/// path: a search cost each PUT the user's whole list of events.
pub(super) enum Put {
    New(Event),
    Known(usize),
}

impl CaldavVu {
    /// A new event of about `size` bytes in calendar `ci`, created only where nothing
    /// is (`If-None-Match`); event number `born` in the stamps of its versions, which a
    /// shared calendar's events carry.
    pub(super) async fn new_event(
        &mut self,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
        ci: usize,
        born: u64,
        shape: &EventShape,
        expect: &[u16],
    ) -> Outcome {
        let uid = data::uid(rng, &self.ids.run_id);
        let path = format!("{}{uid}.ics", self.cals[ci].path);
        let size = shape.size.as_ref().map_or(0, |d| d.sample(rng) as usize);
        let mut body = data::ics_event(rng, &uid, size, shape);
        // Set-up's events are not measured and carry no stamp.
        if let (Some(t), true, false) = (&self.team, self.cals[ci].shared, born >= SETUP_EVENTS) {
            body = t.stamped(body, &t.stamp(born, born));
        }
        // Never overwrite a resource loadmix did not create.
        let cond = (IF_NONE_MATCH, HeaderValue::from_static("*"));
        let event = Event {
            path,
            uid,
            etag: None,
            born,
        };
        self.put_event(conn, ci, Put::New(event), body, Some(cond), expect)
            .await
    }

    /// `n` events of `shape` put in calendar `ci` in set-up, several at once
    /// (`dav::fill`), numbered from [`SETUP_EVENTS`]. Stops at the first failure; the
    /// rest are not sent.
    pub(super) async fn fill(
        &mut self,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
        ci: usize,
        shape: &EventShape,
        n: u64,
    ) -> Result<(), String> {
        let (run_id, cal) = (&self.ids.run_id, &self.cals[ci].path);
        let make = || {
            let uid = data::uid(rng, run_id);
            let path = format!("{cal}{uid}.ics");
            let size = shape.size.as_ref().map_or(0, |d| d.sample(rng) as usize);
            let body = data::ics_event(rng, &uid, size, shape);
            (path.clone(), body, (path, uid))
        };
        let filling = dav::Filling {
            content_type: "text/calendar; charset=utf-8",
            what: "initial event",
        };
        let kept = dav::fill(&self.s, conn, n, &filling, make).await?;
        let events = kept
            .into_iter()
            .zip(0..)
            .map(|(((path, uid), etag), i)| Event {
                path,
                uid,
                etag,
                born: SETUP_EVENTS + i,
            });
        self.cals[ci].events.extend(events);
        Ok(())
    }

    /// One of the user's events rewritten, on the condition that it is as last seen
    /// (`If-Match` its ETag).
    pub(super) async fn update_event(
        &mut self,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
        ci: usize,
        shape: &EventShape,
        stamp: Option<(u64, u16)>,
        expect: &[u16],
    ) -> Done {
        let Some(ei) = pick_event(&self.cals[ci], rng) else {
            return Done::Skipped;
        };
        let e = &self.cals[ci].events[ei];
        let size = shape.size.as_ref().map_or(0, |d| d.sample(rng) as usize);
        let mut body = data::ics_event(rng, &e.uid, size, shape);
        let born = e.born;
        if let (Some(t), Some((seq, _))) = (&self.team, stamp) {
            body = t.stamped(body, &t.stamp(seq, born));
        }
        let cond = e
            .etag
            .as_deref()
            .and_then(|t| HeaderValue::from_str(t).ok())
            .map(|v| (IF_MATCH, v));
        let o = self
            .put_event(conn, ci, Put::Known(ei), body, cond, expect)
            .await;
        if let Some((seq, label)) = stamp {
            self.wrote(&o, seq, born, label);
        }
        o.into()
    }

    /// A stamped write the server acknowledged, noted in the user's book.
    pub(super) fn wrote(&mut self, o: &Outcome, seq: u64, event: u64, label: u16) {
        if let Some(t) = &mut self.team
            && o.is_ok()
        {
            let stamp = t.stamp(seq, event);
            let team = t.team();
            t.book.wrote(
                stamp,
                team,
                Audience::Team,
                label,
                crate::visibility::now_us(),
            );
        }
    }

    /// PUT an event into calendar `ci` under a precondition; remember it and its ETag.
    pub(super) async fn put_event(
        &mut self,
        conn: &mut Conn,
        ci: usize,
        which: Put,
        body: String,
        condition: Option<(HeaderName, HeaderValue)>,
        expect: &[u16],
    ) -> Outcome {
        let path = match &which {
            Put::New(e) => &e.path,
            Put::Known(i) => &self.cals[ci].events[*i].path,
        };
        let (o, etag) = self.send_put(conn, path, body, condition, expect).await;
        if o.is_ok() {
            let events = &mut self.cals[ci].events;
            match which {
                Put::New(event) => events.push(Event { etag, ..event }),
                Put::Known(i) => events[i].etag = etag,
            }
        }
        o
    }

    /// PUT an iCalendar `body` at `path` under a precondition: the outcome, and the
    /// ETag the server gave.
    pub(super) async fn send_put(
        &self,
        conn: &mut Conn,
        path: &str,
        body: String,
        condition: Option<(HeaderName, HeaderValue)>,
        expect: &[u16],
    ) -> (Outcome, Option<String>) {
        let mut headers = vec![(
            CONTENT_TYPE,
            HeaderValue::from_static("text/calendar; charset=utf-8"),
        )];
        headers.extend(condition);
        match self
            .s
            .send_to(conn, "PUT", path, &headers, Bytes::from(body))
            .await
        {
            Exchange::Answer(r) => (Outcome::of(&r, expect, &format!("PUT {path}")), etag_of(&r)),
            Exchange::Failed(o) => (o, None),
        }
    }

    /// Send `method` with no body to a random event of calendar `ci`: the event's index,
    /// the answer and its outcome; `Err` with the outcome to report when nothing came back
    /// (or the calendar has no event: skipped).
    pub(super) async fn send_to_event(
        &mut self,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
        ci: usize,
        method: &str,
        expect: &[u16],
    ) -> Result<(usize, Response, Outcome), Done> {
        let Some(ei) = pick_event(&self.cals[ci], rng) else {
            return Err(Done::Skipped);
        };
        let path = &self.cals[ci].events[ei].path;
        match self.s.send_to(conn, method, path, &[], Bytes::new()).await {
            Exchange::Answer(r) => {
                let o = Outcome::of(&r, expect, &format!("{method} {path}"));
                Ok((ei, r, o))
            }
            Exchange::Failed(o) => Err(o.into()),
        }
    }

    /// GET an event of calendar `ci` and check it is iCalendar; learn its ETag.
    pub(super) async fn get_event(
        &mut self,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
        ci: usize,
        expect: &[u16],
    ) -> Done {
        let (ei, r, o) = match self.send_to_event(conn, rng, ci, "GET", expect).await {
            Ok(x) => x,
            Err(d) => return d,
        };
        if !o.is_ok() {
            return o.into();
        }
        let parsed = std::str::from_utf8(&r.body)
            .map_err(|e| e.to_string())
            .and_then(|t| ical::parse(t).map_err(String::from));
        Done::Sent(match parsed {
            Ok(_) => {
                if let Some(e) = etag_of(&r) {
                    self.cals[ci].events[ei].etag = Some(e);
                }
                o
            }
            Err(m) => {
                let path = &self.cals[ci].events[ei].path;
                o.body_error(format!("GET {path}: not iCalendar: {m}"))
            }
        })
    }

    /// DELETE an event of calendar `ci` (one this user created) and forget it.
    pub(super) async fn delete_event(
        &mut self,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
        ci: usize,
        expect: &[u16],
    ) -> Done {
        match self.send_to_event(conn, rng, ci, "DELETE", expect).await {
            Ok((ei, _, o)) => {
                if o.is_ok() {
                    self.cals[ci].events.remove(ei);
                }
                o.into()
            }
            Err(d) => d,
        }
    }
}
