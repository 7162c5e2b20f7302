//! CalDAV scheduling (RFC 6638), implicit as calendar clients expect it. Each user has a
//! scheduling inbox, `/dav/{user}/inbox/` (a stored collection of iTIP messages, RFC 5546),
//! and outbox, `/dav/{user}/outbox/` (a POST asks for others' free-busy time). A user's
//! calendar user address is `mailto:{user}@localhost`; the principal URL is taken too.
//!
//! When an organizer writes an event whose attendees are users of this server, each gets
//! an iTIP REQUEST in the inbox and the event in their calendar (their own participation
//! status kept); an attendee the update leaves out, or every attendee when the organizer
//! deletes the event, gets a CANCEL and loses the copy. When an attendee changes their
//! participation status, or deletes their copy (a decline), the organizer gets a REPLY and
//! their copy's ATTENDEE is updated. Scheduling object resources carry a Schedule-Tag that
//! the organizer's changes move and an attendee's reply does not.
//!
//! Delivery follows the write that caused it, one store write per recipient, not in the
//! same transaction: like a server's fan-out, it is what others' sight of a change waits
//! for.

use std::sync::atomic::{AtomicU64, Ordering};

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::freebusy::{self, BusyError};
use super::http::*;
use super::model::{self, ItemData, parse_ical_datetime};
use super::store::{Item, ItemOp, Precondition, StoreError, default_name};
use loadmix_formats::dav::{CALDAV, DAV, href_path};
use loadmix_formats::ical::{self, Component};
use loadmix_formats::xml::XmlWriter;

/// The name of every user's scheduling inbox and outbox under their calendar home.
pub(crate) const INBOX: &str = "inbox";
pub(crate) const OUTBOX: &str = "outbox";
/// The calendar made for a user who is invited while having none.
const DEFAULT_CALENDAR: &str = "calendar";

/// Whether a calendar name is one of the mailboxes, which no client may make or remove.
pub(crate) fn is_mailbox(cal: &str) -> bool {
    cal == INBOX || cal == OUTBOX
}

/// A user's calendar user address.
pub(crate) fn address(user: &str) -> String {
    format!("mailto:{user}@localhost")
}

/// The user a calendar user address names: `mailto:{user}@localhost`, or the principal
/// URL `{prefix}/{user}/` (RFC 6638 §2.4.1), absolute or not.
pub(crate) fn user_of(addr: &str, prefix: &str) -> Option<String> {
    let a = addr.trim();
    if a.len() > 7 && a[..7].eq_ignore_ascii_case("mailto:") {
        let (local, domain) = a[7..].rsplit_once('@')?;
        return (domain.eq_ignore_ascii_case("localhost") && safe_segment(local))
            .then(|| local.to_string());
    }
    let path = href_path(a);
    let seg = path.strip_prefix(prefix)?.trim_matches('/');
    percent_decode(seg).filter(|u| !u.contains('/') && safe_segment(u))
}

/// What the owner of the calendar written to is to a scheduling object resource.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Role {
    Organizer,
    /// One of the attendees, by the address the event names them with.
    Attendee {
        address: String,
        organizer: String,
    },
}

/// The owner's role in an event: `None` when it is no scheduling object resource (no
/// ORGANIZER) or the owner is neither organizer nor attendee of it.
pub(crate) fn role(owner: &str, c: &Component, prefix: &str) -> Option<Role> {
    let organizer = c.organizer.as_deref()?;
    if user_of(organizer, prefix).as_deref() == Some(owner) {
        return Some(Role::Organizer);
    }
    c.attendees
        .iter()
        .find(|a| user_of(&a.address, prefix).as_deref() == Some(owner))
        .map(|a| Role::Attendee {
            address: a.address.clone(),
            organizer: organizer.to_string(),
        })
}

/// The component of a calendar text that has an ORGANIZER, or `None`: the cheap test
/// first, so a PUT of an ordinary event is not parsed twice.
pub(crate) fn scheduling_component(text: &str) -> Option<Component> {
    // Without copying the text: this runs on every PUT and DELETE of an event.
    let named = text
        .as_bytes()
        .windows(9)
        .any(|w| w.eq_ignore_ascii_case(b"ORGANIZER"));
    if !named {
        return None;
    }
    ical::parse(text).ok().filter(|c| c.organizer.is_some())
}

/// A new identifier, unique within this server's life: Schedule-Tags and inbox entries.
fn new_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!(
        "{:x}-{}",
        super::store::now_ms(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A new Schedule-Tag value, quoted as an entity tag is.
pub(crate) fn new_tag() -> String {
    format!("\"s{}\"", new_id())
}

/// The participation status `address` has in `c` (NEEDS-ACTION when not given).
fn partstat(c: &Component, address: &str) -> Option<String> {
    c.attendees
        .iter()
        .find(|a| a.address.eq_ignore_ascii_case(address))
        .map(|a| a.partstat.clone().unwrap_or_else(|| "NEEDS-ACTION".into()))
}

/// The loadmix stamps of a text's (unfolded) lines, carried into the messages it causes
/// so a reader of the inbox can tell which write a message stems from.
fn stamp_lines(text: &str) -> Vec<String> {
    ical::logical_lines(text)
        .into_iter()
        .filter(|l| l.len() > 10 && l.as_bytes()[..10].eq_ignore_ascii_case(b"X-LOADMIX-"))
        .collect()
}

/// An iTIP message about one event (`uid`, `organizer`, `attendee`) to or from one
/// attendee: a REPLY with their participation status, or a CANCEL; with the stamps of
/// `cause`, the text whose write caused it.
fn message(
    method: &str,
    uid: &str,
    organizer: &str,
    attendee: &str,
    partstat: Option<&str>,
    cause: &str,
) -> String {
    let now = freebusy::ical_utc(chrono::Utc::now());
    let mut s = format!(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//loadmix//embedded server//EN\r\n\
         METHOD:{method}\r\nBEGIN:VEVENT\r\nUID:{uid}\r\nDTSTAMP:{now}\r\nORGANIZER:{organizer}\r\n"
    );
    match partstat {
        Some(p) => s.push_str(&format!("ATTENDEE;PARTSTAT={p}:{attendee}\r\n")),
        None => s.push_str(&format!("ATTENDEE:{attendee}\r\nSTATUS:CANCELLED\r\n")),
    }
    for l in stamp_lines(cause) {
        s.push_str(&l);
        s.push_str("\r\n");
    }
    s.push_str("END:VEVENT\r\nEND:VCALENDAR\r\n");
    s
}

/// What a user holds under an event's UID, to a delivery about one organizer's event.
enum Held {
    Nothing,
    /// The organizer's event, or an attendee's copy of it: where it is (calendar key),
    /// and the event as it stands.
    Copy {
        key: String,
        item: Box<Item>,
        event: Box<Component>,
    },
    /// An object of the same UID that is not that organizer's: the holder's own.
    Theirs,
}

/// What became of one recipient's delivery.
#[derive(Debug, PartialEq)]
enum Delivery {
    Done,
    /// Not made: the recipient holds an object of that UID that is not the organizer's
    /// (or, for a reply, the organizer's event does not name the attendee).
    Refused,
}

/// Scheduling on behalf of one request: deliveries and the outbox.
pub(crate) struct Scheduler<'a> {
    pub st: &'a AppState,
    /// The principals' path, `{ctx}/dav`.
    pub prefix: &'a str,
}

impl Scheduler<'_> {
    /// The user an address names, when that user exists here.
    fn local(&self, addr: &str) -> Option<String> {
        let u = user_of(addr, self.prefix)?;
        let known = matches!(self.st.store.user(&u), Ok(Some(_)))
            || (self.st.settings.no_auth
                && matches!(self.st.store.collections_of(&u), Ok(c) if !c.is_empty()));
        known.then_some(u)
    }

    /// The local attendees of `c` other than `owner`, one per user, with their address.
    fn local_attendees(&self, owner: &str, c: &Component) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for a in &c.attendees {
            if let Some(u) = self.local(&a.address)
                && u != owner
                && !out.iter().any(|(x, _)| *x == u)
            {
                out.push((u, a.address.clone()));
            }
        }
        out
    }

    /// Make `user`'s inbox if it is not there yet: a read first, as every request to the
    /// inbox asks, and a write only the first time.
    pub(crate) fn ensure_inbox(&self, user: &str) -> Result<(), StoreError> {
        let key = ckey(user, INBOX);
        if self.st.store.collection(&key)?.is_none() {
            // Made meanwhile by another request (`Exists`): as good.
            self.st
                .store
                .create_collection(&key, user, "Inbox", "", Vec::new())?;
        }
        Ok(())
    }

    /// Put an iTIP message into `user`'s inbox.
    fn deliver(&self, user: &str, text: &str) -> Result<(), StoreError> {
        self.ensure_inbox(user)?;
        let (_, data) = model::parse_ics(text).map_err(StoreError::Corrupt)?;
        let id = new_id();
        let op = ItemOp::Put {
            uid: id.clone(),
            name: Some(format!("{id}.ics")),
            data: Box::new(data),
            merge: false,
            global_uid: false,
        };
        self.st
            .store
            .write(&ckey(user, INBOX), vec![op], Precondition::None)
            .map(|_| ())
    }

    /// What `user` holds under the UID `uid`, for a delivery about `organizer`'s event
    /// (`organizer` a user here): the organizer's own event, or an attendee's copy of it,
    /// is one whose ORGANIZER names that user (RFC 6638 §3.2: the organizer's identity
    /// and the copy's must agree). An object of the same UID that names another
    /// organizer, or none, is the holder's own: no delivery touches it.
    fn copy_of(&self, user: &str, uid: &str, organizer: &str) -> Result<Held, StoreError> {
        let mine = format!("{user}/");
        let found = self
            .st
            .store
            .items_by_uid(uid)?
            .into_iter()
            .find(|(k, i)| k.starts_with(&mine) && public_uid(k) != INBOX && i.data.is_some());
        let Some((key, item)) = found else {
            return Ok(Held::Nothing);
        };
        let event = item
            .data
            .as_ref()
            .and_then(|d| d.ics.as_deref())
            .and_then(|t| ical::parse(t).ok());
        let same = event
            .as_ref()
            .and_then(|c| c.organizer.as_deref())
            .and_then(|o| user_of(o, self.prefix))
            .is_some_and(|o| o == organizer);
        Ok(match (same, event) {
            (true, Some(event)) => Held::Copy {
                key,
                item: Box::new(item),
                event: Box::new(event),
            },
            _ => Held::Theirs,
        })
    }

    /// The calendar new invitations go to: `user`'s calendar named `calendar` (the name
    /// DAViCal delivers to as well), else their oldest calendar that takes events, or,
    /// when they have none, a new `calendar`, as a scheduling server keeps a default
    /// calendar for every user (RFC 6638 §9.2).
    fn default_calendar(&self, user: &str) -> Result<String, StoreError> {
        let takes_events: Vec<_> = self
            .st
            .store
            .collections_of(user)?
            .into_iter()
            .filter(|c| public_uid(&c.uid) != INBOX)
            .filter(|c| components_of(c).iter().any(|k| k == "VEVENT"))
            .collect();
        let named = takes_events
            .iter()
            .find(|c| public_uid(&c.uid) == DEFAULT_CALENDAR);
        if let Some(c) = named.or_else(|| takes_events.iter().min_by_key(|c| c.epoch)) {
            return Ok(c.uid.clone());
        }
        let key = ckey(user, DEFAULT_CALENDAR);
        self.st
            .store
            .create_collection(&key, user, "Calendar", "", Vec::new())?;
        Ok(key)
    }

    /// Write `text` as `user`'s copy of the event, over the copy they hold (`held`, as
    /// [`Self::copy_of`] found it) or else into their default calendar, with the
    /// Schedule-Tag given.
    fn write_copy(
        &self,
        user: &str,
        uid: &str,
        held: Option<(String, String)>,
        text: &str,
        tag: String,
    ) -> Result<(), StoreError> {
        let (key, name) = match held {
            Some(at) => at,
            None => (self.default_calendar(user)?, copy_name(uid)),
        };
        let (_, mut data) = model::parse_ics(text).map_err(StoreError::Corrupt)?;
        data.schedule_tag = Some(tag);
        let op = ItemOp::Put {
            uid: uid.to_string(),
            name: Some(name),
            data: Box::new(data),
            merge: false,
            global_uid: false,
        };
        self.st
            .store
            .write(&key, vec![op], Precondition::None)
            .map(|_| ())
    }

    /// The REQUEST and the event for one attendee of `organizer`'s event, their own
    /// answer kept in their copy; nothing when they hold an object of that UID that is
    /// not the organizer's.
    fn invite(
        &self,
        user: &str,
        addr: &str,
        uid: &str,
        organizer: &str,
        stored: &str,
        request: &str,
    ) -> Result<Delivery, StoreError> {
        let (at, theirs) = match self.copy_of(user, uid, organizer)? {
            Held::Theirs => return Ok(Delivery::Refused),
            Held::Nothing => (None, None),
            Held::Copy { key, item, event } => (Some((key, item.name)), partstat(&event, addr)),
        };
        self.deliver(user, request)?;
        let copy = match theirs {
            Some(p) => ical::set_partstat(stored, addr, &p),
            None => stored.to_string(),
        };
        self.write_copy(user, uid, at, &copy, new_tag())?;
        Ok(Delivery::Done)
    }

    /// After an organizer's write of `new` (replacing `old`, if any): a REQUEST and the
    /// event to every local attendee, a CANCEL to those the update left out. One
    /// recipient's failure is logged and the others are still served.
    fn organizer_wrote(
        &self,
        owner: &str,
        uid: &str,
        old: Option<&Component>,
        new: &Component,
        text: &str,
    ) {
        let stored = ical::without_method(text);
        let request = ical::with_method(&stored, "REQUEST");
        let now = self.local_attendees(owner, new);
        for (user, addr) in &now {
            let done = self.invite(user, addr, uid, owner, &stored, &request);
            log_delivery(done, user, uid);
        }
        let organizer = new.organizer.as_deref().unwrap_or("");
        let before = old
            .map(|o| self.local_attendees(owner, o))
            .unwrap_or_default();
        for (user, addr) in before {
            if !now.iter().any(|(u, _)| *u == user) {
                let done = self.cancel(&user, owner, (uid, organizer, &addr), text);
                log_delivery(done, &user, uid);
            }
        }
    }

    /// A CANCEL of `owner`'s event `about` (uid, organizer, attendee) into `user`'s inbox
    /// and their copy removed; nothing when what they hold under that UID is not the
    /// organizer's.
    fn cancel(
        &self,
        user: &str,
        owner: &str,
        about: (&str, &str, &str),
        cause: &str,
    ) -> Result<Delivery, StoreError> {
        let held = self.copy_of(user, about.0, owner)?;
        if matches!(held, Held::Theirs) {
            return Ok(Delivery::Refused);
        }
        let (uid, organizer, attendee) = about;
        self.deliver(
            user,
            &message("CANCEL", uid, organizer, attendee, None, cause),
        )?;
        if let Held::Copy { key, .. } = held {
            let op = ItemOp::Delete {
                uid: about.0.to_string(),
                must_exist: false,
            };
            self.st.store.write(&key, vec![op], Precondition::None)?;
        }
        Ok(Delivery::Done)
    }

    /// An attendee's answer `partstat` to the organizer: a REPLY in their inbox and their
    /// copy's ATTENDEE updated, its Schedule-Tag kept; nothing when the organizer holds
    /// no event of that UID of their own that names the attendee.
    fn reply(
        &self,
        uid: &str,
        organizer: &str,
        addr: &str,
        partstat: &str,
        cause: &str,
    ) -> Result<Delivery, StoreError> {
        let Some(org) = self.local(organizer) else {
            return Ok(Delivery::Done);
        };
        let Held::Copy { key, item, event } = self.copy_of(&org, uid, &org)? else {
            return Ok(Delivery::Refused);
        };
        let named = event
            .attendees
            .iter()
            .any(|a| a.address.eq_ignore_ascii_case(addr));
        let Some(d) = item.data.as_ref().filter(|_| named) else {
            return Ok(Delivery::Refused);
        };
        let m = message("REPLY", uid, organizer, addr, Some(partstat), cause);
        self.deliver(&org, &m)?;
        let tag = d.schedule_tag.clone().unwrap_or_else(new_tag);
        if let Some(t) = d.ics.as_deref() {
            let t = ical::set_partstat(t, addr, partstat);
            self.write_copy(&org, uid, Some((key, item.name.clone())), &t, tag)?;
        }
        Ok(Delivery::Done)
    }

    /// What follows a successful PUT into `owner`'s calendar of `new` (parsed from
    /// `text`) over `old` (the text it replaced, if any). Failures are the server's own,
    /// after the write the client asked for succeeded: they go to the server's log.
    pub(crate) fn after_put(
        &self,
        owner: &str,
        role: &Role,
        uid: &str,
        old: Option<&str>,
        new: &Component,
        text: &str,
    ) {
        let old = old.and_then(|t| ical::parse(t).ok());
        match role {
            Role::Organizer => self.organizer_wrote(owner, uid, old.as_ref(), new, text),
            Role::Attendee { address, organizer } => {
                let now = partstat(new, address).unwrap_or_else(|| "NEEDS-ACTION".into());
                let before = old.as_ref().and_then(|c| partstat(c, address));
                let answered = match before {
                    Some(b) => b != now,
                    None => now != "NEEDS-ACTION",
                };
                if answered {
                    let done = self.reply(uid, organizer, address, &now, text);
                    log_delivery(done, owner, uid);
                }
            }
        }
    }

    /// What follows a successful DELETE from `owner`'s calendar of `c` (parsed from
    /// `text`): the organizer cancels for everyone, an attendee declines.
    pub(crate) fn after_delete(
        &self,
        owner: &str,
        role: &Role,
        uid: &str,
        c: &Component,
        text: &str,
    ) {
        match role {
            Role::Organizer => {
                let organizer = c.organizer.as_deref().unwrap_or("");
                for (u, a) in self.local_attendees(owner, c) {
                    let done = self.cancel(&u, owner, (uid, organizer, &a), text);
                    log_delivery(done, &u, uid);
                }
            }
            Role::Attendee { address, organizer } => {
                let done = self.reply(uid, organizer, address, "DECLINED", text);
                log_delivery(done, owner, uid);
            }
        }
    }

    /// A POST to `owner`'s outbox: a free-busy request (RFC 6638 §5.2), answered per
    /// recipient with their busy time over all their calendars.
    pub(crate) fn outbox_post(&self, owner: &str, headers: &HeaderMap, body: &[u8]) -> Response {
        let mt = media_type(headers);
        if mt != "text/calendar" {
            return dav_error(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                CALDAV,
                "supported-calendar-data",
            );
        }
        let Some(req) = std::str::from_utf8(body)
            .ok()
            .and_then(|t| ical::parse_freebusy_request(t).ok())
        else {
            return dav_error(StatusCode::BAD_REQUEST, CALDAV, "valid-scheduling-message");
        };
        if req
            .organizer
            .as_deref()
            .and_then(|o| user_of(o, self.prefix))
            .as_deref()
            != Some(owner)
        {
            return dav_error(StatusCode::FORBIDDEN, CALDAV, "organizer-allowed");
        }
        let (Some(start), Some(end)) = (
            parse_ical_datetime(&req.start),
            parse_ical_datetime(&req.end),
        ) else {
            return text(
                StatusCode::BAD_REQUEST,
                "DTSTART and DTEND must be UTC date-times",
            );
        };
        if start >= end {
            return text(StatusCode::BAD_REQUEST, "the span ends before it starts");
        }
        let mut w = XmlWriter::new();
        w.open(
            "C:schedule-response",
            &[("xmlns:D", DAV), ("xmlns:C", CALDAV)],
        );
        for addr in &req.attendees {
            let (status, data) = self.busy_reply(&req, addr, start, end);
            w.open("C:response", &[]);
            w.open("C:recipient", &[])
                .leaf("D:href", addr)
                .close("C:recipient");
            w.leaf("C:request-status", status);
            if let Some(d) = data {
                w.leaf("C:calendar-data", &d);
            }
            w.close("C:response");
        }
        w.close("C:schedule-response");
        (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/xml; charset=utf-8")],
            w.finish(),
        )
            .into_response()
    }

    /// One recipient's answer to a free-busy request: its request status and, when it
    /// is a user here, its busy time as a VFREEBUSY reply.
    fn busy_reply(
        &self,
        req: &ical::FreeBusyRequest,
        addr: &str,
        start: chrono::DateTime<chrono::Utc>,
        end: chrono::DateTime<chrono::Utc>,
    ) -> (&'static str, Option<String>) {
        let Some(user) = self.local(addr) else {
            return ("3.7;Invalid calendar user", None);
        };
        let cals: Vec<String> = match self.st.store.collections_of(&user) {
            Ok(c) => c
                .into_iter()
                .filter(|c| public_uid(&c.uid) != INBOX)
                .map(|c| c.uid)
                .collect(),
            Err(_) => return ("5.1;Service unavailable", None),
        };
        match freebusy::busy(&*self.st.store, &cals, start, end) {
            Ok(periods) => {
                let mut lines = vec![
                    format!("ORGANIZER:{}", req.organizer.as_deref().unwrap_or("")),
                    format!("ATTENDEE:{addr}"),
                ];
                if let Some(u) = &req.uid {
                    lines.push(format!("UID:{u}"));
                }
                let text = freebusy::vfreebusy(start, end, &periods, Some("REPLY"), &lines);
                ("2.0;Success", Some(text))
            }
            Err(BusyError::TooDense) => ("5.3;Invalid date-time range", None),
            Err(BusyError::Store(_)) => ("5.1;Service unavailable", None),
        }
    }
}

/// A resource name for an attendee's copy: the UID's, when it makes a plain one.
fn copy_name(uid: &str) -> String {
    let plain = uid.len() <= 200
        && uid
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.@".contains(&b));
    if plain {
        default_name(uid)
    } else {
        format!("{}.ics", new_id())
    }
}

/// A delivery that failed or was refused after the client's own write succeeded: the
/// server's log says whose and which event, and the other recipients are still served.
fn log_delivery(done: Result<Delivery, StoreError>, user: &str, uid: &str) {
    match done {
        Ok(Delivery::Done) => {}
        Ok(Delivery::Refused) => eprintln!(
            "scheduling of {uid} for {user} refused: what they hold under that UID is not \
             the organizer's event"
        ),
        Err(e) => eprintln!("scheduling of {uid} for {user} failed: {e}"),
    }
}

/// The Schedule-Tag a write of a scheduling object resource gets: a new one when the
/// organizer writes, the one it had when an attendee does (their reply moves no tag).
pub(crate) fn tag_for(role: &Role, existing: Option<&ItemData>) -> String {
    match (role, existing.and_then(|d| d.schedule_tag.clone())) {
        (Role::Attendee { .. }, Some(t)) => t,
        _ => new_tag(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_name_users_by_mail_or_principal() {
        assert_eq!(
            user_of("mailto:bob@localhost", "/c/dav").as_deref(),
            Some("bob")
        );
        assert_eq!(
            user_of("MAILTO:bob@LocalHost", "/c/dav").as_deref(),
            Some("bob")
        );
        assert_eq!(user_of("mailto:bob@example.com", "/c/dav"), None);
        assert_eq!(
            user_of("http://h:1/c/dav/bob/", "/c/dav").as_deref(),
            Some("bob")
        );
        assert_eq!(user_of("/c/dav/bob/", "/c/dav").as_deref(), Some("bob"));
        assert_eq!(user_of("/c/dav/bob/cal/", "/c/dav"), None);
        assert_eq!(user_of("/other/bob/", "/c/dav"), None);
        assert_eq!(user_of("mailto:../x@localhost", "/c/dav"), None);
    }

    fn event(organizer: &str, attendees: &[(&str, &str)]) -> Component {
        let mut t = String::from("BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nUID:e1\r\n");
        t.push_str(&format!("ORGANIZER:{organizer}\r\n"));
        for (a, p) in attendees {
            t.push_str(&format!("ATTENDEE;CN=\"X: y\";PARTSTAT={p}:{a}\r\n"));
        }
        t.push_str("END:VEVENT\r\nEND:VCALENDAR\r\n");
        ical::parse(&t).unwrap()
    }

    #[test]
    fn the_owner_is_organizer_attendee_or_nobody() {
        let c = event(
            "mailto:ann@localhost",
            &[
                ("mailto:bob@localhost", "ACCEPTED"),
                ("mailto:cy@localhost", "NEEDS-ACTION"),
            ],
        );
        assert_eq!(role("ann", &c, "/d"), Some(Role::Organizer));
        assert_eq!(
            role("bob", &c, "/d"),
            Some(Role::Attendee {
                address: "mailto:bob@localhost".into(),
                organizer: "mailto:ann@localhost".into()
            })
        );
        assert_eq!(role("dee", &c, "/d"), None);
        assert_eq!(
            partstat(&c, "MAILTO:BOB@localhost").as_deref(),
            Some("ACCEPTED")
        );
    }

    #[test]
    fn an_attendee_reply_keeps_the_tag_an_organizer_change_moves_it() {
        let d = ItemData {
            schedule_tag: Some("\"t1\"".into()),
            ..ItemData::default()
        };
        let att = Role::Attendee {
            address: "a".into(),
            organizer: "o".into(),
        };
        assert_eq!(tag_for(&att, Some(&d)), "\"t1\"");
        assert_ne!(tag_for(&Role::Organizer, Some(&d)), "\"t1\"");
        assert_ne!(
            tag_for(&Role::Organizer, None),
            tag_for(&Role::Organizer, None)
        );
    }

    #[test]
    fn messages_parse_as_events_and_carry_stamps() {
        // A stamp folded over two lines, as a client may send it, is carried whole.
        let m = message(
            "REPLY",
            "e1",
            "mailto:ann@localhost",
            "mailto:bob@localhost",
            Some("ACCEPTED"),
            "BEGIN:VEVENT\r\nX-LOADMIX-STAMP:r/a\r\n /1\r\nX-OTHER:1\r\n",
        );
        let c = ical::parse(&m).unwrap();
        assert_eq!(c.uid, "e1");
        assert_eq!(
            partstat(&c, "mailto:bob@localhost").as_deref(),
            Some("ACCEPTED")
        );
        assert!(m.contains("X-LOADMIX-STAMP:r/a/1\r\n") && !m.contains("X-OTHER"));
        assert!(copy_name("a/b").ends_with(".ics") && !copy_name("a/b").contains('/'));
        assert_eq!(copy_name("e1"), "e1.ics");
    }
}
