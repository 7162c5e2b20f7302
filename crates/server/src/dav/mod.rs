//! CalDAV (RFC 4791) and CardDAV (RFC 6352) with sync-collection (RFC 6578) at
//! `{ctx}/dav/...`: `/dav/` (root), `/dav/{user}/` (principal, calendar home and address
//! book home), `/dav/{user}/{collection}/` (a calendar, the same collections Morse Code
//! and Atom use, or an address book: `book.rs`) and `/dav/{user}/{collection}/{name}` (an
//! event or a contact).
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
use super::http::*;
use super::model::ItemData;
use super::schedule::{self, OUTBOX, Role, Scheduler};
use super::store::CollectionInfo;
use loadmix_formats::dav::{
    CALDAV, CARDDAV, CS, DAV, MultistatusWriter, Prop, PropName, error_body_with_href,
};
use loadmix_formats::ical::Component;
use loadmix_formats::xml::{self, El};

mod book;
mod items;
mod props;
mod report;

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
            "1, 3, access-control, calendar-access, calendar-auto-schedule, addressbook, extended-mkcol",
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
        // The address book's mark is CardDAV's too: only its MKCOL sets it.
        CARDDAV => name == "addressbook-description",
        CS => false,
        ICAL => matches!(name.as_str(), "calendar-color" | "calendar-order"),
        _ => !ns.is_empty(),
    }
}

/// A UID another resource of the collection holds: CalDAV's precondition, or
/// CardDAV's (`ns`).
fn no_uid_conflict(ns: &str, href: Option<&str>) -> Response {
    (
        StatusCode::CONFLICT,
        [(header::CONTENT_TYPE, "application/xml; charset=utf-8")],
        error_body_with_href(ns, "no-uid-conflict", href),
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
}

/// `.well-known/caldav` and `.well-known/carddav` point clients at the DAV root.
pub(crate) async fn well_known(State(st): State<AppState>) -> Response {
    let mut r = StatusCode::MOVED_PERMANENTLY.into_response();
    if let Ok(v) = HeaderValue::from_str(&format!("{}/dav/", st.settings.context)) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(ns: &str, local: &str) -> PropName {
        (ns.to_string(), local.to_string())
    }

    #[test]
    fn a_client_may_set_a_calendars_names_and_colours_and_dead_properties_only() {
        assert!(writable(&name(DAV, "displayname")));
        assert!(writable(&name(CALDAV, "calendar-description")));
        assert!(writable(&name(ICAL, "calendar-color")));
        assert!(writable(&name("urn:example:mine", "anything")));
        // Live and protected: DAV: and CalDAV properties the server keeps, the ACL's.
        assert!(!writable(&name(DAV, "getetag")));
        assert!(!writable(&name(DAV, "resourcetype")));
        assert!(!writable(&name(CALDAV, "supported-calendar-component-set")));
        assert!(!writable(&name(acl::NS, "acl")));
        assert!(!writable(&name(CS, "getctag")));
        // No namespace is no property a client can name back.
        assert!(!writable(&name("", "colour")));
    }

    #[test]
    fn a_body_is_empty_xml_or_a_400_in_words() {
        assert!(matches!(parse_body(b" \r\n\t"), Ok(None)));
        let root = parse_body(br#"<D:propfind xmlns:D="DAV:"><D:prop><D:getetag/><C:x xmlns:C="urn:c"/></D:prop></D:propfind>"#)
            .unwrap();
        let asked = requested_props(root.as_ref()).unwrap();
        assert_eq!(asked, [name(DAV, "getetag"), name("urn:c", "x")]);
        // allprop: no prop element, every property.
        let all = parse_body(br#"<D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>"#).unwrap();
        assert_eq!(requested_props(all.as_ref()), None);
        for bad in [&b"\xff\xfe<a/>"[..], b"<a><b></a>", b"<a"] {
            let r = parse_body(bad).unwrap_err();
            assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        }
    }

    #[test]
    fn if_schedule_tag_match_fails_on_another_tag_or_none() {
        let mut headers = HeaderMap::new();
        let held = ItemData {
            schedule_tag: Some("\"t1\"".into()),
            ..ItemData::default()
        };
        assert!(
            schedule_tag_mismatch(&headers, Some(&held)).is_none(),
            "not asked"
        );
        headers.insert(
            "if-schedule-tag-match",
            HeaderValue::from_static(" \"t1\" "),
        );
        assert!(schedule_tag_mismatch(&headers, Some(&held)).is_none());
        headers.insert("if-schedule-tag-match", HeaderValue::from_static("\"t0\""));
        let r = schedule_tag_mismatch(&headers, Some(&held)).unwrap();
        assert_eq!(r.status(), StatusCode::PRECONDITION_FAILED);
        // A resource with no tag (or none at all) matches no tag.
        assert!(schedule_tag_mismatch(&headers, Some(&ItemData::default())).is_some());
        assert!(schedule_tag_mismatch(&headers, None).is_some());
    }
}
