//! CalDAV (RFC 4791) with sync-collection (RFC 6578) at `{ctx}/dav/...`: `/dav/` (root),
//! `/dav/{user}/` (principal and calendar home), `/dav/{user}/{calendar}/` (a collection,
//! the same ones Morse Code and Atom use) and `/dav/{user}/{calendar}/{name}` (an event).
//!
//! Supported: OPTIONS, PROPFIND (Depth 0/1; current-user-principal, calendar-home-set,
//! resourcetype, displayname, getetag, getctag, sync-token, supported-report-set, ...),
//! MKCALENDAR (and MKCOL), PUT (iCalendar checked; If-Match / If-None-Match), GET, HEAD,
//! DELETE, and REPORT calendar-query (VEVENT/VTODO time-range, recurrences expanded),
//! calendar-multiget and sync-collection. PROPPATCH answers 403 per property.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::acl;
use super::expand;
use super::filter::{self, CompFilter, FilterError};
use super::freebusy;
use super::http::*;
use super::model::{self, ItemData, TooDense, parse_ical_datetime};
use super::schedule::{self, INBOX, OUTBOX, Role, Scheduler};
use super::store::{CollectionInfo, CreateOutcome, Item, ItemOp, Precondition, WriteOutcome};
use crate::formats::dav::{
    CALDAV, CS, DAV, MultistatusWriter, Prop, PropName, error_body_with_href,
};
use crate::formats::ical::COMPONENTS;
use crate::formats::ical::Component;
use crate::formats::xml::{self, El};

const ALLOW: &str =
    "OPTIONS, GET, HEAD, PUT, DELETE, PROPFIND, PROPPATCH, MKCALENDAR, MKCOL, REPORT, ACL, POST";
const TOKEN_PREFIX: &str = "urn:loadmix:sync:";

/// Where a request points.
enum Target {
    Root,
    Home(String),
    Calendar(String, String),
    Resource(String, String, String),
}

pub(crate) async fn handle(State(st): State<AppState>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let body = match axum::body::to_bytes(body, st.settings.max_body).await {
        Ok(b) => b,
        Err(_) => return text(StatusCode::PAYLOAD_TOO_LARGE, "request body too large"),
    };
    let caller = match st.authenticate(&parts.headers) {
        Ok(c) => c,
        Err(r) => return r,
    };
    let prefix = format!("{}/dav", st.settings.context);
    let raw_path = parts.uri.path();
    let Some(rest) = raw_path.strip_prefix(&prefix) else {
        return text(StatusCode::NOT_FOUND, "not found");
    };
    let mut segs = Vec::new();
    for s in rest.split('/').filter(|s| !s.is_empty()) {
        match percent_decode(s) {
            Some(d) if safe_segment(&d) => segs.push(d),
            _ => return bad_segment(),
        }
    }
    let target = match segs.len() {
        0 => Target::Root,
        1 => Target::Home(segs.remove(0)),
        2 => {
            let c = segs.remove(1);
            Target::Calendar(segs.remove(0), c)
        }
        3 => {
            let n = segs.remove(2);
            let c = segs.remove(1);
            Target::Resource(segs.remove(0), c, n)
        }
        _ => return text(StatusCode::NOT_FOUND, "not found"),
    };
    let user_of = |t: &Target| match t {
        Target::Root => None,
        Target::Home(u) | Target::Calendar(u, _) | Target::Resource(u, _, _) => Some(u.clone()),
    };
    if let Some(u) = user_of(&target)
        && !st.may_access(&caller, &u)
        && !shared_with(&st, &caller, &target, parts.method.as_str())
    {
        return text(StatusCode::FORBIDDEN, "not your calendar home");
    }
    let d = Dav {
        st: &st,
        caller: &caller,
        prefix: &prefix,
        headers: &parts.headers,
    };
    if let Some(r) = d.mailbox(parts.method.as_str(), &target, &body) {
        return r;
    }
    match (parts.method.as_str(), &target) {
        ("OPTIONS", _) => options(),
        ("PROPFIND", _) => d.propfind(&target, &body),
        ("PROPPATCH", _) => d.proppatch(&target, &body, raw_path),
        ("MKCALENDAR" | "MKCOL", Target::Calendar(u, c)) => d.mkcalendar(u, c, &body),
        ("PUT", Target::Resource(u, c, n)) => d.put(u, c, n, &body),
        ("GET" | "HEAD", Target::Resource(u, c, n)) => d.get(u, c, n, parts.method == Method::HEAD),
        ("GET" | "HEAD", Target::Calendar(u, c)) => {
            d.get_calendar(u, c, parts.method == Method::HEAD)
        }
        ("DELETE", Target::Resource(u, c, n)) => d.delete(u, c, n),
        ("DELETE", Target::Calendar(u, c)) => d.delete_calendar(u, c),
        ("ACL", Target::Calendar(u, c)) => d.acl(u, c, &body),
        ("REPORT", Target::Calendar(u, c)) => {
            // Expanding recurrences is bounded but can take a while: off the threads that
            // serve other requests.
            let (st, caller, prefix) = (st.clone(), caller.clone(), prefix.clone());
            let (headers, u, c) = (parts.headers.clone(), u.clone(), c.clone());
            tokio::task::spawn_blocking(move || {
                let d = Dav {
                    st: &st,
                    caller: &caller,
                    prefix: &prefix,
                    headers: &headers,
                };
                d.report(&u, &c, &body)
            })
            .await
            .unwrap_or_else(|_| text(StatusCode::INTERNAL_SERVER_ERROR, "internal error"))
        }
        _ => method_not_allowed(),
    }
}

/// Whether another user's calendar, or an event in it, was shared with the caller for
/// what `method` does: reading (GET, HEAD, PROPFIND, REPORT), or writing an event (PUT,
/// DELETE). Everything else on a calendar (making, deleting it, its properties, its
/// ACL) is its owner's alone.
fn shared_with(st: &AppState, caller: &Caller, target: &Target, method: &str) -> bool {
    let (user, cal, event) = match target {
        Target::Calendar(u, c) => (u, c, false),
        Target::Resource(u, c, _) => (u, c, true),
        Target::Root | Target::Home(_) => return false,
    };
    let right = match (method, event) {
        ("GET" | "HEAD" | "PROPFIND" | "REPORT" | "OPTIONS", _) => acl::Right::Read,
        ("PUT" | "DELETE", true) => acl::Right::Write,
        _ => return false,
    };
    match st.store.collection(&ckey(user, cal)) {
        Ok(Some(c)) => acl::permits(c.props.get(acl::KEY), &caller.name, right),
        _ => false,
    }
}

fn options() -> Response {
    let mut r = StatusCode::OK.into_response();
    let h = r.headers_mut();
    h.insert(header::ALLOW, HeaderValue::from_static(ALLOW));
    h.insert(
        "dav",
        HeaderValue::from_static(
            "1, 3, access-control, calendar-access, calendar-auto-schedule, extended-mkcol",
        ),
    );
    r
}

/// A scheduling write, for the deliveries after it: the owner's role, the event as
/// written (parsed and as text) and the text it replaced.
struct Scheduled {
    role: Role,
    new: Component,
    text: String,
    old: Option<String>,
}

/// RFC 6638 §3.2.11: `If-Schedule-Tag-Match` that names another tag than the resource's
/// (or a resource that has none) fails the request.
fn schedule_tag_mismatch(headers: &HeaderMap, held: Option<&ItemData>) -> Option<Response> {
    let m = header_str(headers, "if-schedule-tag-match")?;
    (held.and_then(|d| d.schedule_tag.as_deref()) != Some(m.trim())).then(|| {
        text(
            StatusCode::PRECONDITION_FAILED,
            "the Schedule-Tag does not match",
        )
    })
}

/// RFC 6638 §3.2.10: a scheduling object resource's tag on every answer that names it.
fn insert_schedule_tag(r: &mut Response, tag: Option<&str>) {
    if let Some(v) = tag.and_then(|t| HeaderValue::from_str(t).ok()) {
        r.headers_mut().insert("schedule-tag", v);
    }
}

fn method_not_allowed() -> Response {
    let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed here");
    r.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(ALLOW));
    r
}

fn multistatus(m: MultistatusWriter) -> Response {
    (
        StatusCode::MULTI_STATUS,
        [(header::CONTENT_TYPE, "application/xml; charset=utf-8")],
        m.finish(),
    )
        .into_response()
}

/// Apple's calendar colour and order, which clients set with PROPPATCH.
const ICAL: &str = "http://apple.com/ns/ical/";

/// A property's Clark name, `{namespace}local`.
fn clark(ns: &str, name: &str) -> String {
    format!("{{{ns}}}{name}")
}

/// Properties a client may set on a calendar: its name, description, Apple's colour and
/// order, and dead properties in namespaces the server does not define. The rest (DAV:
/// and CalDAV live properties, the component set after creation) are protected.
fn writable((ns, name): &PropName) -> bool {
    match ns.as_str() {
        acl::NS => false,
        DAV => name == "displayname",
        CALDAV => name == "calendar-description",
        CS => false,
        ICAL => matches!(name.as_str(), "calendar-color" | "calendar-order"),
        _ => !ns.is_empty(),
    }
}

fn no_uid_conflict(href: Option<&str>) -> Response {
    (
        StatusCode::CONFLICT,
        [(header::CONTENT_TYPE, "application/xml; charset=utf-8")],
        error_body_with_href(CALDAV, "no-uid-conflict", href),
    )
        .into_response()
}

fn parse_body(body: &[u8]) -> Result<Option<El>, Response> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let t = std::str::from_utf8(body)
        .map_err(|_| text(StatusCode::BAD_REQUEST, "body is not UTF-8"))?;
    xml::parse(t)
        .map(Some)
        .map_err(|m| text(StatusCode::BAD_REQUEST, m))
}

/// Requested properties: `None` for allprop.
type PropReq = Option<Vec<PropName>>;

fn requested_props(root: Option<&El>) -> PropReq {
    let prop = root?.child(DAV, "prop")?;
    Some(
        prop.children
            .iter()
            .map(|p| (p.ns.clone(), p.name.clone()))
            .collect(),
    )
}

/// A property value to write, or `None` when the resource has no such property.
type PropValue = Option<Prop>;

struct Dav<'a> {
    st: &'a AppState,
    caller: &'a Caller,
    prefix: &'a str,
    headers: &'a HeaderMap,
}

const PRIVILEGES: &[&str] = &["D:read", "D:write", "D:all"];

fn sync_token(c: &CollectionInfo) -> String {
    format!("{TOKEN_PREFIX}{}", c.token())
}

impl Dav<'_> {
    fn scheduler(&self) -> Scheduler<'_> {
        Scheduler {
            st: self.st,
            prefix: self.prefix,
        }
    }

    /// Requests to a user's scheduling inbox or outbox that differ from a calendar's:
    /// the inbox is made on first use and takes no PUT, the outbox is not stored and
    /// answers POST; neither can be made or removed. `None`: handle it as a calendar's.
    fn mailbox(&self, method: &str, target: &Target, body: &[u8]) -> Option<Response> {
        let (user, cal, item) = match target {
            Target::Calendar(u, c) => (u, c, false),
            Target::Resource(u, c, _) => (u, c, true),
            Target::Root | Target::Home(_) => return None,
        };
        if !schedule::is_mailbox(cal) {
            return None;
        }
        let forbidden = || dav_error(StatusCode::FORBIDDEN, DAV, "need-privileges");
        if cal == OUTBOX {
            return Some(match (method, item) {
                ("POST", false) => self.scheduler().outbox_post(user, self.headers, body),
                ("PROPFIND", false) => self.outbox_propfind(user, body),
                ("OPTIONS", _) => options(),
                ("GET" | "HEAD" | "REPORT", _) | (_, true) => {
                    text(StatusCode::NOT_FOUND, "the outbox keeps nothing")
                }
                _ => forbidden(),
            });
        }
        match (method, item) {
            ("MKCALENDAR" | "MKCOL" | "DELETE" | "PROPPATCH" | "ACL", false) | ("PUT", true) => {
                return Some(forbidden());
            }
            _ => {}
        }
        // Nobody else passed `handle`'s check: an inbox takes no ACL, so has no grantees.
        self.scheduler().ensure_inbox(user).err().map(store_error)
    }

    /// The outbox's properties: a collection of kind schedule-outbox, holding nothing.
    fn outbox_propfind(&self, user: &str, body: &[u8]) -> Response {
        let root = match parse_body(body) {
            Ok(r) => r,
            Err(r) => return r,
        };
        let req = requested_props(root.as_ref());
        let props = Self::props(
            &req,
            &[(DAV, "resourcetype"), (DAV, "displayname")],
            |ns, n| match (ns, n) {
                (DAV, "resourcetype") => Some(Prop::Marks(&["D:collection", "C:schedule-outbox"])),
                (DAV, "displayname") => Some(Prop::Text("Outbox".into())),
                (DAV, "owner") => Some(Prop::Href(self.home_href(user))),
                (DAV, "current-user-privilege-set") => Some(Prop::Privileges(PRIVILEGES)),
                _ => self.common_prop(ns, n),
            },
        );
        let mut out = MultistatusWriter::new();
        out.response(&self.cal_href(user, OUTBOX), &props);
        multistatus(out)
    }

    fn home_href(&self, user: &str) -> String {
        format!("{}/{}/", self.prefix, percent_encode(user))
    }
    fn cal_href(&self, user: &str, cal: &str) -> String {
        format!(
            "{}/{}/{}/",
            self.prefix,
            percent_encode(user),
            percent_encode(cal)
        )
    }
    fn item_href(&self, user: &str, cal: &str, name: &str) -> String {
        format!("{}{}", self.cal_href(user, cal), percent_encode(name))
    }

    /// The calendar `cal` of `user`, or the response to send.
    fn calendar(&self, user: &str, cal: &str) -> Result<CollectionInfo, Response> {
        match self.st.store.collection(&ckey(user, cal)) {
            Ok(Some(c)) if c.owner == user || self.st.settings.no_auth => Ok(c),
            Ok(_) => Err(text(StatusCode::NOT_FOUND, "no such calendar")),
            Err(e) => Err(store_error(e)),
        }
    }

    fn common_prop(&self, ns: &str, name: &str) -> PropValue {
        match (ns, name) {
            (DAV, "current-user-principal") => Some(Prop::Href(self.home_href(&self.caller.name))),
            _ => None,
        }
    }

    fn home_prop(&self, user: &str, ns: &str, name: &str) -> PropValue {
        match (ns, name) {
            (DAV, "resourcetype") => Some(Prop::Marks(&["D:collection", "D:principal"])),
            (DAV, "displayname") => Some(Prop::Text(user.to_string())),
            (DAV, "principal-URL") | (DAV, "owner") => Some(Prop::Href(self.home_href(user))),
            (CALDAV, "calendar-home-set") => Some(Prop::Href(self.home_href(user))),
            (CALDAV, "calendar-user-address-set") => Some(Prop::Href(schedule::address(user))),
            (CALDAV, "schedule-inbox-URL") => Some(Prop::Href(self.cal_href(user, INBOX))),
            (CALDAV, "schedule-outbox-URL") => Some(Prop::Href(self.cal_href(user, OUTBOX))),
            (CALDAV, "calendar-user-type") => Some(Prop::Text("INDIVIDUAL".into())),
            (DAV, "current-user-privilege-set") => Some(Prop::Privileges(PRIVILEGES)),
            _ => self.common_prop(ns, name),
        }
    }

    fn cal_prop(&self, c: &CollectionInfo, ns: &str, name: &str) -> PropValue {
        match (ns, name) {
            (DAV, "resourcetype") if public_uid(&c.uid) == INBOX => {
                Some(Prop::Marks(&["D:collection", "C:schedule-inbox"]))
            }
            (DAV, "resourcetype") => Some(Prop::Marks(&["D:collection", "C:calendar"])),
            (DAV, "displayname") => Some(Prop::Text(
                if c.name.is_empty() {
                    public_uid(&c.uid)
                } else {
                    &c.name
                }
                .to_string(),
            )),
            (CALDAV, "calendar-description") => Some(Prop::Text(c.description.clone())),
            (CS, "getctag") | (DAV, "getetag") => Some(Prop::Text(format!("\"{}\"", c.token()))),
            (DAV, "sync-token") => Some(Prop::Text(sync_token(c))),
            (DAV, "owner") => Some(Prop::Href(self.home_href(&c.owner))),
            (DAV, "supported-report-set") => Some(Prop::Reports(&[
                "C:calendar-query",
                "C:calendar-multiget",
                "C:free-busy-query",
                "D:sync-collection",
            ])),
            (CALDAV, "supported-calendar-component-set") => {
                Some(Prop::Components(components_of(c)))
            }
            (CALDAV, "max-attendees-per-instance") => {
                Some(Prop::Text(crate::formats::ical::MAX_ATTENDEES.to_string()))
            }
            (DAV, "current-user-privilege-set") => Some(Prop::Privileges(PRIVILEGES)),
            _ => c
                .props
                .get(&clark(ns, name))
                .map(|v| Prop::Text(v.clone()))
                .or_else(|| self.common_prop(ns, name)),
        }
    }

    fn item_prop(&self, c: &CollectionInfo, item: &Item, ns: &str, name: &str) -> PropValue {
        let data = item.data.as_ref()?;
        match (ns, name) {
            (DAV, "getetag") => Some(Prop::Text(item.etag(c.epoch))),
            (DAV, "getcontenttype") => Some(Prop::Text(
                "text/calendar; charset=utf-8; component=vevent".into(),
            )),
            (DAV, "resourcetype") => Some(Prop::Marks(&[])),
            (DAV, "getcontentlength") => Some(Prop::Text(data.to_ics(&item.uid).len().to_string())),
            (DAV, "getlastmodified") => Some(Prop::Text(httpdate::fmt_http_date(
                std::time::UNIX_EPOCH + std::time::Duration::from_millis(item.modified_ms),
            ))),
            (CALDAV, "calendar-data") => Some(Prop::Text(data.to_ics(&item.uid))),
            (CALDAV, "schedule-tag") => data.schedule_tag.clone().map(Prop::Text),
            _ => self.common_prop(ns, name),
        }
    }

    fn props<F: Fn(&str, &str) -> PropValue>(
        req: &PropReq,
        all: &[(&str, &str)],
        f: F,
    ) -> Vec<((String, String), PropValue)> {
        match req {
            Some(list) => list
                .iter()
                .map(|(ns, n)| ((ns.clone(), n.clone()), f(ns, n)))
                .collect(),
            None => all
                .iter()
                .map(|(ns, n)| ((ns.to_string(), n.to_string()), f(ns, n)))
                .filter(|(_, v)| v.is_some())
                .collect(),
        }
    }

    fn propfind(&self, target: &Target, body: &[u8]) -> Response {
        let root = match parse_body(body) {
            Ok(r) => r,
            Err(r) => return r,
        };
        if let Some(r) = &root
            && !r.is(DAV, "propfind")
        {
            return text(StatusCode::BAD_REQUEST, "expected a DAV:propfind body");
        }
        let req = requested_props(root.as_ref());
        let depth1 = !matches!(header_str(self.headers, "depth").map(str::trim), Some("0"));
        let mut out = MultistatusWriter::new();
        const HOME_ALL: &[(&str, &str)] = &[
            (DAV, "resourcetype"),
            (DAV, "displayname"),
            (CALDAV, "calendar-home-set"),
            (DAV, "current-user-principal"),
            (DAV, "principal-URL"),
        ];
        const CAL_ALL: &[(&str, &str)] = &[
            (DAV, "resourcetype"),
            (DAV, "displayname"),
            (CS, "getctag"),
            (DAV, "sync-token"),
            (DAV, "supported-report-set"),
            (CALDAV, "supported-calendar-component-set"),
        ];
        const ITEM_ALL: &[(&str, &str)] = &[
            (DAV, "getetag"),
            (DAV, "getcontenttype"),
            (DAV, "resourcetype"),
            (DAV, "getcontentlength"),
            (DAV, "getlastmodified"),
        ];
        match target {
            Target::Root => {
                let props = Self::props(
                    &req,
                    &[(DAV, "resourcetype"), (DAV, "current-user-principal")],
                    |ns, n| match (ns, n) {
                        (DAV, "resourcetype") => Some(Prop::Marks(&["D:collection"])),
                        _ => self.common_prop(ns, n),
                    },
                );
                out.response(&format!("{}/", self.prefix), &props);
            }
            Target::Home(user) => {
                let props = Self::props(&req, HOME_ALL, |ns, n| self.home_prop(user, ns, n));
                out.response(&self.home_href(user), &props);
                if depth1 {
                    let cals = match self.st.store.collections_of(user) {
                        Ok(c) => c,
                        Err(e) => return store_error(e),
                    };
                    for c in cals {
                        let props = Self::props(&req, CAL_ALL, |ns, n| self.cal_prop(&c, ns, n));
                        out.response(&self.cal_href(user, public_uid(&c.uid)), &props);
                    }
                }
            }
            Target::Calendar(user, cal) => {
                let c = match self.calendar(user, cal) {
                    Ok(c) => c,
                    Err(r) => return r,
                };
                let props = Self::props(&req, CAL_ALL, |ns, n| self.cal_prop(&c, ns, n));
                out.response(&self.cal_href(user, cal), &props);
                if depth1 {
                    let items = match self.st.store.items(&ckey(user, cal), None) {
                        Ok(Some((_, items))) => items,
                        Ok(None) => Vec::new(),
                        Err(e) => return store_error(e),
                    };
                    for item in &items {
                        let props =
                            Self::props(&req, ITEM_ALL, |ns, n| self.item_prop(&c, item, ns, n));
                        out.response(&self.item_href(user, cal, &item.name), &props);
                    }
                }
            }
            Target::Resource(user, cal, name) => {
                let c = match self.calendar(user, cal) {
                    Ok(c) => c,
                    Err(r) => return r,
                };
                let item = match self.st.store.item_by_name(&ckey(user, cal), name) {
                    Ok(Some(i)) => i,
                    Ok(None) => return text(StatusCode::NOT_FOUND, "no such resource"),
                    Err(e) => return store_error(e),
                };
                let props = Self::props(&req, ITEM_ALL, |ns, n| self.item_prop(&c, &item, ns, n));
                out.response(&self.item_href(user, cal, name), &props);
            }
        }
        multistatus(out)
    }

    fn proppatch(&self, target: &Target, body: &[u8], path: &str) -> Response {
        if matches!(target, Target::Resource(..) | Target::Root) {
            return method_not_allowed();
        }
        let root = match parse_body(body) {
            Ok(Some(r)) if r.is(DAV, "propertyupdate") => r,
            Ok(_) => {
                return text(
                    StatusCode::BAD_REQUEST,
                    "expected a DAV:propertyupdate body",
                );
            }
            Err(r) => return r,
        };
        let Target::Calendar(user, cal) = target else {
            // A calendar home's properties are not writable.
            let names: Vec<PropName> = root
                .children
                .iter()
                .flat_map(|op| op.children_named(DAV, "prop"))
                .flat_map(|prop| prop.children.iter())
                .map(|p| (p.ns.clone(), p.name.clone()))
                .collect();
            let mut out = MultistatusWriter::new();
            out.propstat_response(path, &names, "403 Forbidden");
            return multistatus(out);
        };
        if let Err(r) = self.calendar(user, cal) {
            return r;
        }
        // Every change in document order; all or none apply (RFC 4918 §9.2).
        let mut changes: Vec<(PropName, Option<String>)> = Vec::new();
        for op in &root.children {
            let set = if op.is(DAV, "set") {
                true
            } else if op.is(DAV, "remove") {
                false
            } else {
                continue;
            };
            for prop in op.children_named(DAV, "prop") {
                for p in &prop.children {
                    let value = set.then(|| p.text.clone());
                    changes.push(((p.ns.clone(), p.name.clone()), value));
                }
            }
        }
        let refused: Vec<&PropName> = changes
            .iter()
            .filter(|(n, _)| !writable(n))
            .map(|(n, _)| n)
            .collect();
        let mut out = MultistatusWriter::new();
        if !refused.is_empty() {
            let names: Vec<PropName> = changes.iter().map(|(n, _)| n.clone()).collect();
            let statuses: Vec<&str> = names
                .iter()
                .map(|n| {
                    if refused.contains(&n) {
                        "403 Forbidden"
                    } else {
                        "424 Failed Dependency"
                    }
                })
                .collect();
            out.propstats(path, &names, &statuses);
            return multistatus(out);
        }
        let mut name = None;
        let mut description = None;
        let mut props = Vec::new();
        for ((ns, n), v) in &changes {
            match (ns.as_str(), n.as_str()) {
                (DAV, "displayname") => name = Some(v.clone().unwrap_or_default()),
                (CALDAV, "calendar-description") => {
                    description = Some(v.clone().unwrap_or_default())
                }
                _ => props.push((clark(ns, n), v.clone())),
            }
        }
        match self.st.store.update_collection(
            &ckey(user, cal),
            name.as_deref(),
            description.as_deref(),
            &props,
        ) {
            Ok(true) => {}
            Ok(false) => return text(StatusCode::NOT_FOUND, "no such calendar"),
            Err(e) => return store_error(e),
        }
        let names: Vec<PropName> = changes.into_iter().map(|(n, _)| n).collect();
        out.propstat_response(path, &names, "200 OK");
        multistatus(out)
    }

    /// `ACL` (RFC 3744) on a calendar of the caller's own: its grants replaced by the
    /// body's; a deny, a principal not of this server or an unknown privilege refused
    /// with its precondition.
    fn acl(&self, user: &str, cal: &str, body: &[u8]) -> Response {
        if let Err(r) = self.calendar(user, cal) {
            return r;
        }
        let root = match parse_body(body) {
            Ok(Some(r)) => r,
            Ok(None) => return text(StatusCode::BAD_REQUEST, "expected a DAV:acl body"),
            Err(r) => return r,
        };
        let grants = match acl::parse(&root, self.prefix) {
            Ok(g) => g,
            Err(e) if e.condition.is_empty() => return text(StatusCode::BAD_REQUEST, &e.why),
            Err(e) => return dav_error(StatusCode::FORBIDDEN, DAV, e.condition),
        };
        match self.st.store.update_collection(
            &ckey(user, cal),
            None,
            None,
            &[(acl::KEY.to_string(), Some(grants))],
        ) {
            Ok(true) => StatusCode::OK.into_response(),
            Ok(false) => text(StatusCode::NOT_FOUND, "no such calendar"),
            Err(e) => store_error(e),
        }
    }

    fn mkcalendar(&self, user: &str, cal: &str, body: &[u8]) -> Response {
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
                            (CALDAV, "calendar-description") => description = p.text.clone(),
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
    fn calendar_data(&self, body: &[u8]) -> Result<(String, model::ItemData), Response> {
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
    fn scheduling_of_put(
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

    fn put(&self, user: &str, cal: &str, name: &str, body: &[u8]) -> Response {
        if let Err(r) = require_length(self.headers) {
            return r;
        }
        let c = match self.calendar(user, cal) {
            Ok(c) => c,
            Err(_) => return text(StatusCode::CONFLICT, "the calendar does not exist"),
        };
        let (uid, mut data) = match self.calendar_data(body) {
            Ok(x) => x,
            Err(r) => return r,
        };
        if !components_of(&c).iter().any(|k| k == data.component()) {
            return dav_error(
                StatusCode::FORBIDDEN,
                CALDAV,
                "supported-calendar-component",
            );
        }
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
            return no_uid_conflict(None);
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
                    let texts = (s.old.as_deref(), &s.new, s.text.as_str());
                    self.scheduler().after_put(user, &s.role, &uid, texts);
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
                no_uid_conflict(href.as_deref())
            }
            Ok(_) => text(StatusCode::CONFLICT, "the calendar does not exist"),
            Err(e) => store_error(e),
        }
    }

    fn get(&self, user: &str, cal: &str, name: &str, head: bool) -> Response {
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
        let body = data.to_ics(&item.uid);
        let len = body.len();
        let mut r = (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/calendar; charset=utf-8")],
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

    fn get_calendar(&self, user: &str, cal: &str, head: bool) -> Response {
        if let Err(r) = self.calendar(user, cal) {
            return r;
        }
        let items = match self.st.store.items(&ckey(user, cal), None) {
            Ok(Some((_, items))) => items,
            Ok(None) => return text(StatusCode::NOT_FOUND, "no such calendar"),
            Err(e) => return store_error(e),
        };
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

    fn delete(&self, user: &str, cal: &str, name: &str) -> Response {
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
                        .after_delete(user, role, &item.uid, (c, text));
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

    fn delete_calendar(&self, user: &str, cal: &str) -> Response {
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

    fn report(&self, user: &str, cal: &str, body: &[u8]) -> Response {
        let c = match self.calendar(user, cal) {
            Ok(c) => c,
            Err(r) => return r,
        };
        let root = match parse_body(body) {
            Ok(Some(r)) => r,
            Ok(None) => return text(StatusCode::BAD_REQUEST, "a REPORT needs a body"),
            Err(r) => return r,
        };
        let req =
            requested_props(Some(&root)).or_else(|| Some(vec![(DAV.into(), "getetag".into())]));
        let shape = match data_shape(&root) {
            Ok(s) => s,
            Err(m) => return text(StatusCode::BAD_REQUEST, m),
        };
        let mut out = MultistatusWriter::new();
        // `Err` when an item's calendar data cannot be shaped within the bounds.
        let emit = |out: &mut MultistatusWriter, item: &Item| -> Result<(), TooDense> {
            let mut props = Self::props(&req, &[], |ns, n| self.item_prop(&c, item, ns, n));
            if let (Some(how), Some(d)) = (shape, &item.data) {
                for ((ns, n), v) in props.iter_mut() {
                    if let (CALDAV, "calendar-data", Some(Prop::Text(t))) =
                        (ns.as_str(), n.as_str(), v.as_mut())
                    {
                        *t = expand::shape(t, d.timing().as_ref(), how)?;
                    }
                }
            }
            out.response(&self.item_href(user, cal, &item.name), &props);
            Ok(())
        };
        let too_dense = || {
            dav_error(
                StatusCode::INSUFFICIENT_STORAGE,
                DAV,
                "number-of-matches-within-limits",
            )
        };
        if root.is(CALDAV, "calendar-query") {
            let f = match filter::parse(&root) {
                Ok(f) => f,
                Err(FilterError::Bad(m)) => return text(StatusCode::BAD_REQUEST, m),
                Err(FilterError::Unsupported { condition, .. }) => {
                    return dav_error(StatusCode::FORBIDDEN, CALDAV, condition);
                }
            };
            let listed = match f.as_ref().and_then(filter::CompFilter::range) {
                Some((s, e)) => self.st.store.items_overlapping(
                    &ckey(user, cal),
                    s.timestamp_millis(),
                    e.timestamp_millis(),
                ),
                None => self.st.store.items(&ckey(user, cal), None),
            };
            let items = match listed {
                Ok(Some((_, items))) => items,
                Ok(None) => Vec::new(),
                Err(e) => return store_error(e),
            };
            for item in &items {
                let Some(d) = &item.data else { continue };
                let matched = match &f {
                    None => Ok(true),
                    Some(f) => query_matches(f, d, &item.uid),
                };
                match matched {
                    Ok(true) => {
                        if emit(&mut out, item).is_err() {
                            return too_dense();
                        }
                    }
                    Ok(false) => {}
                    // Answering without this item would be a wrong answer, not a short one.
                    Err(_) => return too_dense(),
                }
            }
            multistatus(out)
        } else if root.is(CALDAV, "calendar-multiget") {
            let base = self.cal_href(user, cal);
            for h in root.children_named(DAV, "href") {
                let href = h.text.trim();
                let name = href
                    .strip_prefix(&base)
                    .and_then(percent_decode)
                    .filter(|n| safe_segment(n));
                let item = match name
                    .as_deref()
                    .map(|n| self.st.store.item_by_name(&ckey(user, cal), n))
                {
                    Some(Ok(i)) => i,
                    Some(Err(e)) => return store_error(e),
                    None => None,
                };
                match item {
                    Some(i) => {
                        if emit(&mut out, &i).is_err() {
                            return too_dense();
                        }
                    }
                    None => {
                        out.status(href, "404 Not Found");
                    }
                }
            }
            multistatus(out)
        } else if root.is(DAV, "sync-collection") {
            let token = root
                .child(DAV, "sync-token")
                .map(|t| t.text.trim().to_string())
                .unwrap_or_default();
            let since = if token.is_empty() {
                None
            } else {
                match token
                    .strip_prefix(TOKEN_PREFIX)
                    .and_then(|t| c.token_version(t))
                {
                    Some(v) => Some(v),
                    None => return dav_error(StatusCode::FORBIDDEN, DAV, "valid-sync-token"),
                }
            };
            let (now, items) = match self.st.store.items(&ckey(user, cal), since) {
                Ok(Some(x)) => x,
                Ok(None) => return text(StatusCode::NOT_FOUND, "no such calendar"),
                Err(e) => return store_error(e),
            };
            for item in &items {
                if item.data.is_some() {
                    if emit(&mut out, item).is_err() {
                        return too_dense();
                    }
                } else {
                    out.status(&self.item_href(user, cal, &item.name), "404 Not Found");
                }
            }
            out.sync_token(&sync_token(&now));
            multistatus(out)
        } else if root.is(CALDAV, "free-busy-query") {
            self.free_busy(&ckey(user, cal), &root)
        } else {
            dav_error(StatusCode::FORBIDDEN, DAV, "supported-report")
        }
    }

    /// RFC 4791 §7.10: the busy time of a calendar's events in a range, as a VFREEBUSY.
    fn free_busy(&self, cal: &str, root: &El) -> Response {
        let Some(tr) = root.child(CALDAV, "time-range") else {
            return text(
                StatusCode::BAD_REQUEST,
                "a free-busy-query needs a time-range",
            );
        };
        let at = |k: &str| tr.attr(None, k).and_then(parse_ical_datetime);
        let (Some(start), Some(end)) = (at("start"), at("end")) else {
            return text(
                StatusCode::BAD_REQUEST,
                "the time-range of a free-busy-query needs a UTC start and end",
            );
        };
        if start >= end {
            return text(
                StatusCode::BAD_REQUEST,
                "the time-range ends before it starts",
            );
        }
        let periods = match freebusy::busy(&*self.st.store, &[cal.to_string()], start, end) {
            Ok(p) => p,
            Err(freebusy::BusyError::Store(e)) => return store_error(e),
            Err(freebusy::BusyError::TooDense) => {
                return dav_error(
                    StatusCode::INSUFFICIENT_STORAGE,
                    DAV,
                    "number-of-matches-within-limits",
                );
            }
        };
        let body = freebusy::vfreebusy(start, end, &periods, None, &[]);
        (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/calendar; charset=utf-8")],
            body,
        )
            .into_response()
    }
}

/// How the request wants calendar data shaped: `expand` or `limit-recurrence-set` inside
/// `calendar-data`, each with a range whose start and end are both required.
fn data_shape(root: &El) -> Result<Option<expand::Shape>, String> {
    let Some(data) = root
        .child(DAV, "prop")
        .and_then(|p| p.child(CALDAV, "calendar-data"))
    else {
        return Ok(None);
    };
    let range = |el: &El| -> Result<filter::Range, String> {
        let at = |k: &str| {
            el.attr(None, k)
                .and_then(parse_ical_datetime)
                .ok_or_else(|| format!("{} needs a UTC {k}", el.name))
        };
        let (s, e) = (at("start")?, at("end")?);
        if s >= e {
            return Err(format!("{} ends before it starts", el.name));
        }
        Ok((s, e))
    };
    if let Some(x) = data.child(CALDAV, "expand") {
        return Ok(Some(expand::Shape::Expand(range(x)?)));
    }
    if let Some(x) = data.child(CALDAV, "limit-recurrence-set") {
        return Ok(Some(expand::Shape::LimitRecurrenceSet(range(x)?)));
    }
    Ok(None)
}

/// Whether an item matches a calendar-query filter. The common query (a component and a
/// time range) is answered from the stored timing; anything more from the parsed
/// calendar text.
fn query_matches(f: &CompFilter, d: &ItemData, uid: &str) -> Result<bool, TooDense> {
    if let Some((comp, range)) = f.simple() {
        if comp.is_some_and(|want| want != d.component()) {
            return Ok(false);
        }
        return match range {
            None => Ok(true),
            Some((start, end)) => match d.timing() {
                Some(t) => Ok(!t.occurrences(start, end, 1)?.is_empty()),
                None => Ok(false),
            },
        };
    }
    let ics = d.to_ics(uid);
    let unfolded = icalendar::parser::unfold(&ics);
    match icalendar::parser::read_calendar(&unfolded) {
        Ok(cal) => filter::matches(f, &cal, d),
        // Stored text that no longer parses matches nothing.
        Err(_) => Ok(false),
    }
}

/// `.well-known/caldav` points clients at the DAV root.
pub(crate) async fn well_known(State(st): State<AppState>) -> Response {
    let mut r = StatusCode::MOVED_PERMANENTLY.into_response();
    if let Ok(v) = HeaderValue::from_str(&format!("{}/dav/", st.settings.context)) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}
