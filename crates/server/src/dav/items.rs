//! CalDAV calendars and events written and read: MKCALENDAR (and MKCOL), PUT of checked
//! iCalendar with its preconditions and the implicit scheduling it starts, GET and HEAD,
//! DELETE of an event or a whole calendar.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::http::*;
use crate::model::{self, ItemData};
use crate::schedule::{self};
use crate::store::{CreateOutcome, ItemOp, Precondition, WriteOutcome};
use loadmix_formats::dav::{CALDAV, CARDDAV, DAV};
use loadmix_formats::ical::COMPONENTS;
use loadmix_formats::xml::El;

use super::{
    Dav, Scheduled, book, clark, insert_schedule_tag, no_uid_conflict, parse_body,
    schedule_tag_mismatch, writable,
};

impl Dav<'_> {
    pub(super) fn mkcalendar(&self, user: &str, cal: &str, body: &[u8]) -> Response {
        let root = match parse_body(body) {
            Ok(r) => r,
            Err(r) => return r,
        };
        let mut name = String::new();
        let mut description = String::new();
        let mut props: Vec<(String, Option<String>)> = Vec::new();
        if let Some(r) = &root {
            if !(r.is(CALDAV, "mkcalendar") || r.is(DAV, "mkcol")) {
                return text(StatusCode::BAD_REQUEST, "expected a mkcalendar body");
            }
            for set in r.children_named(DAV, "set") {
                for prop in set.children_named(DAV, "prop") {
                    for p in &prop.children {
                        match (p.ns.as_str(), p.name.as_str()) {
                            (DAV, "displayname") => name = p.text.clone(),
                            (CALDAV, "calendar-description")
                            | (CARDDAV, "addressbook-description") => description = p.text.clone(),
                            // Extended MKCOL (RFC 5689): a collection, a calendar or an
                            // address book.
                            (DAV, "resourcetype") => match resource_kind(p) {
                                Some(true) => {
                                    props.push((book::MARK.to_string(), Some("1".into())))
                                }
                                Some(false) => {}
                                None => {
                                    return dav_error(
                                        StatusCode::FORBIDDEN,
                                        DAV,
                                        "valid-resourcetype",
                                    );
                                }
                            },
                            (CALDAV, "supported-calendar-component-set") => {
                                let comps: Vec<String> = p
                                    .children_named(CALDAV, "comp")
                                    .filter_map(|c| c.attr(None, "name"))
                                    .map(|n| n.trim().to_ascii_uppercase())
                                    .collect();
                                if comps.is_empty()
                                    || comps.iter().any(|c| !COMPONENTS.contains(&c.as_str()))
                                {
                                    return dav_error(
                                        StatusCode::FORBIDDEN,
                                        CALDAV,
                                        "supported-calendar-component",
                                    );
                                }
                                props.push((COMPONENT_SET.to_string(), Some(comps.join(","))));
                            }
                            _ if writable(&(p.ns.clone(), p.name.clone())) => {
                                props.push((clark(&p.ns, &p.name), Some(p.text.clone())));
                            }
                            _ => {
                                return dav_error(
                                    StatusCode::FORBIDDEN,
                                    DAV,
                                    "cannot-modify-protected-property",
                                );
                            }
                        }
                    }
                }
            }
        }
        match self.st.store.create_collection(
            &ckey(user, cal),
            user,
            &name,
            &description,
            Vec::new(),
        ) {
            Ok(CreateOutcome::Created(_)) => {
                if !props.is_empty()
                    && let Err(e) =
                        self.st
                            .store
                            .update_collection(&ckey(user, cal), None, None, &props)
                {
                    return store_error(e);
                }
                let mut r = StatusCode::CREATED.into_response();
                r.headers_mut()
                    .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
                r
            }
            Ok(CreateOutcome::Exists) => {
                dav_error(StatusCode::METHOD_NOT_ALLOWED, DAV, "resource-must-be-null")
            }
            Err(e) => store_error(e),
        }
    }

    /// A PUT's body as an iCalendar object: its UID and data, or the answer that refuses
    /// it (a media type that is not `text/calendar`, text that is not iCalendar, with
    /// the parser's reason in `x-loadmix-reason`).
    pub(super) fn calendar_data(&self, body: &[u8]) -> Result<(String, model::ItemData), Response> {
        let mt = media_type(self.headers);
        if !mt.is_empty() && mt != "text/calendar" {
            return Err(dav_error(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                CALDAV,
                "supported-calendar-data",
            ));
        }
        let Ok(t) = std::str::from_utf8(body) else {
            return Err(dav_error(
                StatusCode::BAD_REQUEST,
                CALDAV,
                "valid-calendar-data",
            ));
        };
        model::parse_ics(t).map_err(|m| {
            let mut r = dav_error(StatusCode::BAD_REQUEST, CALDAV, "valid-calendar-data");
            if let Ok(v) = HeaderValue::from_str(&m.replace(['\r', '\n'], " ")) {
                r.headers_mut().insert("x-loadmix-reason", v);
            }
            r
        })
    }

    /// What a PUT of `data` over `held` is to scheduling, with the Schedule-Tag set on
    /// `data`; or the 412 when `If-Schedule-Tag-Match` names another tag.
    pub(super) fn scheduling_of_put(
        &self,
        user: &str,
        held: Option<&ItemData>,
        data: &mut ItemData,
    ) -> Result<Option<Scheduled>, Response> {
        if let Some(r) = schedule_tag_mismatch(self.headers, held) {
            return Err(r);
        }
        let Some(text) = data.ics.as_deref() else {
            return Ok(None);
        };
        let Some((role, new)) = schedule::scheduling_component(text)
            .and_then(|c| Some((schedule::role(user, &c, self.prefix)?, c)))
        else {
            return Ok(None);
        };
        // Scheduling some attendees and not others, without a word, is worse than a
        // refusal the client can read (RFC 4791 §5.3.2.1).
        if new.attendees_past_max > 0 {
            return Err(dav_error(
                StatusCode::FORBIDDEN,
                CALDAV,
                "max-attendees-per-instance",
            ));
        }
        data.schedule_tag = Some(schedule::tag_for(&role, held));
        // Only a scheduling write keeps the texts, for the deliveries after it.
        Ok(Some(Scheduled {
            role,
            new,
            text: text.to_string(),
            old: held.and_then(|d| d.ics.clone()),
        }))
    }

    /// A PUT's body as a member of collection `c`: a contact of an address book, an
    /// event (or task, or journal) of a component the calendar takes.
    fn member_data(
        &self,
        c: &crate::store::CollectionInfo,
        body: &[u8],
    ) -> Result<(String, ItemData), Response> {
        if book::is_book(c) {
            return self.contact_data(body);
        }
        let (uid, data) = self.calendar_data(body)?;
        if !components_of(c).iter().any(|k| k == data.component()) {
            return Err(dav_error(
                StatusCode::FORBIDDEN,
                CALDAV,
                "supported-calendar-component",
            ));
        }
        Ok((uid, data))
    }

    pub(super) fn put(&self, user: &str, cal: &str, name: &str, body: &[u8]) -> Response {
        if let Err(r) = require_length(self.headers) {
            return r;
        }
        let c = match self.calendar(user, cal) {
            Ok(c) => c,
            Err(_) => return text(StatusCode::CONFLICT, "the calendar does not exist"),
        };
        let (uid, mut data) = match self.member_data(&c, body) {
            Ok(x) => x,
            Err(r) => return r,
        };
        let ns = if book::is_book(&c) { CARDDAV } else { CALDAV };
        let existing = match self.st.store.item_by_name(&ckey(user, cal), name) {
            Ok(i) => i,
            Err(e) => return store_error(e),
        };
        // Preconditions concern the URL (RFC 9110): If-None-Match: * fails when something
        // is there, whatever its UID; a UID held by another resource is a 409 below.
        let pre = if let Some(m) = header_str(self.headers, "if-match") {
            Precondition::ItemEtag {
                uid: uid.clone(),
                etag: m.trim().to_string(),
            }
        } else if header_str(self.headers, "if-none-match").is_some_and(|v| v.trim() == "*") {
            if existing.as_ref().is_some_and(|e| e.data.is_some()) {
                return text(StatusCode::PRECONDITION_FAILED, "precondition failed");
            }
            Precondition::None
        } else {
            Precondition::None
        };
        // The URL holds another UID: replacing it would change the resource's identity.
        if let Some(e) = &existing
            && e.uid != uid
        {
            return no_uid_conflict(ns, None);
        }
        let held = existing.as_ref().and_then(|e| e.data.as_ref());
        let scheduled = match self.scheduling_of_put(user, held, &mut data) {
            Ok(r) => r,
            Err(r) => return r,
        };
        let tag = data.schedule_tag.clone();
        let op = ItemOp::Put {
            uid: uid.clone(),
            name: Some(name.to_string()),
            data: Box::new(data),
            merge: false,
            global_uid: false,
        };
        match self.st.store.write(&c.uid, vec![op], pre) {
            Ok(WriteOutcome::Done { etags, .. }) => {
                let status = if existing.is_some() {
                    StatusCode::NO_CONTENT
                } else {
                    StatusCode::CREATED
                };
                let mut r = status.into_response();
                if let Some((_, e)) = etags.into_iter().next()
                    && let Ok(v) = HeaderValue::from_str(&e)
                {
                    r.headers_mut().insert(header::ETAG, v);
                }
                if let Some(s) = &scheduled {
                    let old = s.old.as_deref();
                    let scheduler = self.scheduler();
                    scheduler.after_put(user, &s.role, &uid, old, &s.new, s.text.as_str());
                }
                insert_schedule_tag(&mut r, tag.as_deref());
                r
            }
            Ok(WriteOutcome::PreconditionFailed) => {
                text(StatusCode::PRECONDITION_FAILED, "precondition failed")
            }
            Ok(WriteOutcome::Conflict(_)) => {
                // The resource holding the UID is in this calendar, which the caller may
                // see: name it, as RFC 4791 asks.
                let href = self
                    .st
                    .store
                    .items_by_uid(&uid)
                    .ok()
                    .and_then(|v| v.into_iter().find(|(col, _)| *col == ckey(user, cal)))
                    .map(|(_, i)| self.item_href(user, cal, &i.name));
                no_uid_conflict(ns, href.as_deref())
            }
            Ok(_) => text(StatusCode::CONFLICT, "the calendar does not exist"),
            Err(e) => store_error(e),
        }
    }

    pub(super) fn get(&self, user: &str, cal: &str, name: &str, head: bool) -> Response {
        let c = match self.calendar(user, cal) {
            Ok(c) => c,
            Err(r) => return r,
        };
        let item = match self.st.store.item_by_name(&ckey(user, cal), name) {
            Ok(Some(i)) => i,
            Ok(None) => return text(StatusCode::NOT_FOUND, "no such resource"),
            Err(e) => return store_error(e),
        };
        let Some(data) = &item.data else {
            return text(StatusCode::NOT_FOUND, "no such resource");
        };
        let (media, body) = data.served(&item.uid);
        let len = body.len();
        let mut r = (
            StatusCode::OK,
            [(header::CONTENT_TYPE, media)],
            if head { String::new() } else { body },
        )
            .into_response();
        if let Ok(v) = HeaderValue::from_str(&item.etag(c.epoch)) {
            r.headers_mut().insert(header::ETAG, v);
        }
        insert_schedule_tag(&mut r, data.schedule_tag.as_deref());
        if head {
            r.headers_mut()
                .insert(header::CONTENT_LENGTH, HeaderValue::from(len));
        }
        r
    }

    pub(super) fn get_calendar(&self, user: &str, cal: &str, head: bool) -> Response {
        let c = match self.calendar(user, cal) {
            Ok(c) => c,
            Err(r) => return r,
        };
        let items = match self.st.store.items(&ckey(user, cal), None) {
            Ok(Some((_, items))) => items,
            Ok(None) => return text(StatusCode::NOT_FOUND, "no such calendar"),
            Err(e) => return store_error(e),
        };
        if book::is_book(&c) {
            // An address book's export: its vCards one after the other.
            let cards = items.iter().filter_map(|i| i.data.as_ref()?.card.as_ref());
            let body: String = cards.map(|k| k.text.as_str()).collect();
            return (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "text/vcard; charset=utf-8")],
                if head { String::new() } else { body },
            )
                .into_response();
        }
        // One VCALENDAR holding every item's components.
        let mut body = String::from(
            "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//loadmix//embedded server//EN\r\n",
        );
        for i in &items {
            if let Some(d) = &i.data {
                let ics = d.to_ics(&i.uid);
                let inner = ics.find("\nBEGIN:V").map(|s| &ics[s + 1..]).unwrap_or("");
                let inner = inner
                    .rfind("END:VCALENDAR")
                    .map(|e| &inner[..e])
                    .unwrap_or(inner);
                for block in inner.split_inclusive('\n') {
                    if !block.starts_with("VERSION:") && !block.starts_with("PRODID:") {
                        body.push_str(block);
                    }
                }
            }
        }
        body.push_str("END:VCALENDAR\r\n");
        (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/calendar; charset=utf-8")],
            if head { String::new() } else { body },
        )
            .into_response()
    }

    pub(super) fn delete(&self, user: &str, cal: &str, name: &str) -> Response {
        let c = match self.calendar(user, cal) {
            Ok(c) => c,
            Err(r) => return r,
        };
        let item = match self.st.store.item_by_name(&ckey(user, cal), name) {
            Ok(Some(i)) => i,
            Ok(None) => return text(StatusCode::NOT_FOUND, "no such resource"),
            Err(e) => return store_error(e),
        };
        let pre = match header_str(self.headers, "if-match") {
            Some(m) => Precondition::ItemEtag {
                uid: item.uid.clone(),
                etag: m.trim().to_string(),
            },
            None => Precondition::None,
        };
        if let Some(r) = schedule_tag_mismatch(self.headers, item.data.as_ref()) {
            return r;
        }
        let held = item.data.as_ref().and_then(|d| d.ics.as_deref());
        // A message taken out of the inbox is read, not an answer nor a cancellation.
        let scheduling = held
            .filter(|_| !schedule::is_mailbox(cal))
            .and_then(schedule::scheduling_component)
            .and_then(|c| Some((schedule::role(user, &c, self.prefix)?, c)));
        match self.st.store.write(
            &c.uid,
            vec![ItemOp::Delete {
                uid: item.uid.clone(),
                must_exist: true,
            }],
            pre,
        ) {
            Ok(WriteOutcome::Done { .. }) => {
                if let (Some((role, c)), Some(text)) = (&scheduling, held) {
                    self.scheduler()
                        .after_delete(user, role, &item.uid, c, text);
                }
                StatusCode::NO_CONTENT.into_response()
            }
            Ok(WriteOutcome::PreconditionFailed) => {
                text(StatusCode::PRECONDITION_FAILED, "precondition failed")
            }
            Ok(_) => text(StatusCode::NOT_FOUND, "no such resource"),
            Err(e) => store_error(e),
        }
    }

    pub(super) fn delete_calendar(&self, user: &str, cal: &str) -> Response {
        if let Err(r) = self.calendar(user, cal) {
            return r;
        }
        let key = ckey(user, cal);
        match self.st.store.delete_collection(&key) {
            Ok(true) => {
                // Its tickets die with it (a later calendar of this name is another).
                self.st.tickets.drop_collection(&key);
                StatusCode::NO_CONTENT.into_response()
            }
            Ok(false) => text(StatusCode::NOT_FOUND, "no such calendar"),
            Err(e) => store_error(e),
        }
    }
}

/// What an extended MKCOL's resource type asks for: an address book (`Some(true)`), a
/// calendar or a plain collection, which this server keeps as a calendar
/// (`Some(false)`); `None` for one it cannot make (both, or neither a collection).
fn resource_kind(rt: &El) -> Option<bool> {
    let has = |ns: &str, n: &str| rt.child(ns, n).is_some();
    let (book, cal) = (has(CARDDAV, "addressbook"), has(CALDAV, "calendar"));
    (has(DAV, "collection") && !(book && cal)).then_some(book)
}
