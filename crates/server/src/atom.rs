//! Cosmo's Atom feed service at `{ctx}/atom/...`: collection feeds by projection (`full`,
//! `details`, `basic`, `dashboard-now|later|done`) and format (`eim-json`, the default;
//! `eimml`; `text`), time-range queries with recurring events expanded into occurrences,
//! and AtomPub create (POST an entry with EIM-JSON content) and update (PUT, honouring
//! If-Match). Feeds and entries are written and read with `atom_syndication`.

use std::collections::HashMap;

use atom_syndication::{Content, Entry, Feed, Link, Person};
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Duration, FixedOffset, TimeZone, Utc};

use super::http::*;
use super::model::{self, ItemData, TooDense};
use super::store::{CollectionInfo, Item, ItemOp, Precondition, WriteOutcome};

const ATOM: &str = "application/atom+xml";

#[derive(Clone, Copy, PartialEq)]
enum Projection {
    Full,
    Basic,
    Now,
    Later,
    Done,
}

#[derive(Clone, Copy, PartialEq)]
enum Format {
    EimJson,
    Eimml,
    Text,
}

fn projection(p: &str) -> Option<Projection> {
    Some(match p {
        "full" | "details" => Projection::Full,
        "basic" => Projection::Basic,
        "dashboard-now" => Projection::Now,
        "dashboard-later" => Projection::Later,
        "dashboard-done" => Projection::Done,
        _ => return None,
    })
}

fn format(f: &str) -> Option<Format> {
    Some(match f {
        "eim-json" => Format::EimJson,
        "eimml" => Format::Eimml,
        "text" | "html" => Format::Text,
        _ => return None,
    })
}

pub(crate) async fn feed_default(
    st: State<AppState>,
    Path(uid): Path<String>,
    q: Query<HashMap<String, String>>,
    h: HeaderMap,
) -> Response {
    let expands = expands("full", &q);
    in_place_or_off_thread(expands, move || feed(st, uid, "full", None, q, h)).await
}

pub(crate) async fn feed_projection(
    st: State<AppState>,
    Path((uid, p)): Path<(String, String)>,
    q: Query<HashMap<String, String>>,
    h: HeaderMap,
) -> Response {
    let expands = expands(&p, &q);
    in_place_or_off_thread(expands, move || feed(st, uid, &p, None, q, h)).await
}

pub(crate) async fn feed_projection_format(
    st: State<AppState>,
    Path((uid, p, f)): Path<(String, String, String)>,
    q: Query<HashMap<String, String>>,
    h: HeaderMap,
) -> Response {
    let expands = expands(&p, &q);
    in_place_or_off_thread(expands, move || feed(st, uid, &p, Some(&f), q, h)).await
}

/// Whether a feed expands recurrences: a time range, or a dashboard.
fn expands(proj: &str, q: &HashMap<String, String>) -> bool {
    proj.starts_with("dashboard") || q.contains_key("start") || q.contains_key("end")
}

/// Run a feed that expands recurrences (a time range, or a dashboard) off the threads that
/// serve other requests: expansion is bounded ([`model::SCAN_LIMIT`]) but can still take a
/// while. Other feeds run in place, without a thread hop.
async fn in_place_or_off_thread(
    expands: bool,
    f: impl FnOnce() -> Response + Send + 'static,
) -> Response {
    if !expands {
        return f();
    }
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|_| text(StatusCode::INTERNAL_SERVER_ERROR, "internal error"))
}

fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|d| d.with_timezone(&Utc))
}

fn feed(
    State(st): State<AppState>,
    uid: String,
    proj: &str,
    fmt: Option<&str>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let (info, _) = match st.reach(&headers, &uid, Need::Read) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let Some(proj) = projection(proj) else {
        return text(StatusCode::NOT_FOUND, "unknown projection");
    };
    let Some(fmt) = format(fmt.unwrap_or("eim-json")) else {
        return text(StatusCode::NOT_FOUND, "unknown format");
    };
    let range = match (q.get("start"), q.get("end")) {
        (None, None) => None,
        (Some(s), Some(e)) => match (parse_time(s), parse_time(e)) {
            (Some(s), Some(e)) if s < e => Some((s, e)),
            _ => {
                return text(
                    StatusCode::BAD_REQUEST,
                    "start and end must be RFC 3339 times, start before end",
                );
            }
        },
        _ => {
            return text(
                StatusCode::BAD_REQUEST,
                "Both start and end parameters must be provided for a time-range query",
            );
        }
    };
    let listed = match range {
        Some((s, e)) => {
            st.store
                .items_overlapping(&info.uid, s.timestamp_millis(), e.timestamp_millis())
        }
        None => st.store.items(&info.uid, None),
    };
    let items = match listed {
        Ok(Some((_, items))) => items,
        Ok(None) => return text(StatusCode::NOT_FOUND, "no such collection"),
        Err(e) => return store_error(e),
    };
    match shown(&items, proj, range, Utc::now()) {
        Ok(shown) => render_feed(&st, &info, &items, proj, fmt, shown),
        Err(e) => text(StatusCode::INSUFFICIENT_STORAGE, e.to_string()),
    }
}

/// An item a feed shows, with the start of the occurrence when it is one of a recurrence.
type Shown<'a> = (&'a Item, Option<DateTime<Utc>>);

/// What a feed shows: every item, the occurrences in a range, or a dashboard's selection.
fn shown(
    items: &[Item],
    proj: Projection,
    range: Option<(DateTime<Utc>, DateTime<Utc>)>,
    now: DateTime<Utc>,
) -> Result<Vec<Shown<'_>>, TooDense> {
    let mut shown: Vec<Shown> = Vec::new();
    for item in items {
        let Some(data) = &item.data else { continue };
        let timing = data.timing();
        let recurring = timing.as_ref().is_some_and(|t| t.rrule.is_some());
        if let Some((s, e)) = range {
            if let Some(t) = &timing {
                for occ in t.occurrences(s, e, 100)? {
                    shown.push((item, recurring.then_some(occ)));
                }
            }
            continue;
        }
        match proj {
            Projection::Full | Projection::Basic => shown.push((item, None)),
            Projection::Now => {
                if recurring {
                    if let Some(t) = &timing
                        && let Some(o) = t.occurrences(now, now + Duration::seconds(1), 1)?.first()
                    {
                        shown.push((item, Some(*o)));
                    }
                } else if matches!(data.triage(), None | Some(100)) {
                    shown.push((item, None));
                }
            }
            Projection::Later => {
                if recurring {
                    if let Some(t) = &timing
                        && let Some(o) = t.occurrences(now, now + Duration::days(30), 1)?.first()
                    {
                        shown.push((item, Some(*o)));
                    }
                } else if data.triage() == Some(200) {
                    shown.push((item, None));
                }
            }
            Projection::Done => {
                if recurring {
                    if let Some(t) = &timing
                        && let Some(o) = t.occurrences(now - Duration::days(30), now, 1000)?.last()
                    {
                        shown.push((item, Some(*o)));
                    }
                } else if data.triage() == Some(300) {
                    shown.push((item, None));
                }
            }
        }
    }
    if proj == Projection::Done {
        shown.truncate(25);
    }
    // Most recently updated first, as Cosmo's full feed.
    shown.sort_by(|a, b| {
        b.0.modified_ms
            .cmp(&a.0.modified_ms)
            .then_with(|| a.1.cmp(&b.1))
    });
    Ok(shown)
}

/// The feed document for the items `shown`.
fn render_feed(
    st: &AppState,
    info: &CollectionInfo,
    items: &[Item],
    proj: Projection,
    fmt: Format,
    shown: Vec<Shown>,
) -> Response {
    let fmt = if proj == Projection::Basic {
        Format::Text
    } else {
        fmt
    };
    let ctx = &st.settings.context;
    let mut f = Feed::default();
    let uid = public_uid(&info.uid);
    f.set_id(format!("urn:uuid:{uid}"));
    f.set_title(if info.name.is_empty() {
        uid.to_string()
    } else {
        info.name.clone()
    });
    f.set_updated(fixed(
        items.iter().map(|i| i.modified_ms).max().unwrap_or(0),
    ));
    let mut self_link = Link::default();
    self_link.set_href(format!("{ctx}/atom/collection/{uid}"));
    self_link.set_rel("self");
    f.set_links(vec![self_link]);
    f.set_entries(
        shown
            .into_iter()
            .filter_map(|(item, occ)| {
                item.data
                    .as_ref()
                    .map(|d| entry(ctx, &item.uid, occ, d, item.modified_ms, fmt))
            })
            .collect::<Vec<_>>(),
    );
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/atom+xml; charset=utf-8")],
        f.to_string(),
    )
        .into_response()
}

fn fixed(ms: u64) -> DateTime<FixedOffset> {
    let utc = Utc
        .timestamp_millis_opt(ms as i64)
        .single()
        .unwrap_or_default();
    utc.fixed_offset()
}

fn entry(
    ctx: &str,
    uid: &str,
    occ: Option<DateTime<Utc>>,
    data: &ItemData,
    modified_ms: u64,
    fmt: Format,
) -> Entry {
    let id = match occ {
        Some(o) => format!("{uid}:{}", o.format("%Y%m%dT%H%M%SZ")),
        None => uid.to_string(),
    };
    let mut e = Entry::default();
    e.set_id(format!("urn:uuid:{id}"));
    e.set_title(data.title().to_string());
    e.set_updated(fixed(modified_ms));
    let mut author = Person::default();
    author.set_name("loadmix");
    e.set_authors(vec![author]);
    let mut link = Link::default();
    link.set_href(format!("{ctx}/atom/item/{uid}"));
    link.set_rel("self");
    e.set_links(vec![link]);
    let mut c = Content::default();
    match fmt {
        Format::EimJson => {
            c.set_content_type("application/eim+json".to_string());
            c.set_value(data.to_eim_json(&id).to_string());
        }
        Format::Eimml => {
            c.set_content_type("application/eim+xml".to_string());
            c.set_value(model::write_eimml(
                uid,
                "",
                std::iter::once((id.as_str(), Some(data))),
            ));
        }
        Format::Text => {
            c.set_content_type("text".to_string());
            c.set_value(data.title().to_string());
        }
    }
    e.set_content(c);
    e
}

/// Read an AtomPub request body: an `<entry>` whose content is EIM-JSON.
fn read_entry(headers: &HeaderMap, body: &[u8]) -> Result<(String, ItemData), Response> {
    if body.is_empty() {
        return Err(text(StatusCode::LENGTH_REQUIRED, "an entry is required"));
    }
    require_length(headers)?;
    if media_type(headers) != ATOM && media_type(headers) != "application/atom+xml;type=entry" {
        return Err(text(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("Content-Type must be {ATOM}"),
        ));
    }
    loadmix_formats::xml::check_depth(body)
        .map_err(|m| text(StatusCode::BAD_REQUEST, format!("not an Atom entry: {m}")))?;
    let e = Entry::read_from(body)
        .map_err(|m| text(StatusCode::BAD_REQUEST, format!("not an Atom entry: {m}")))?;
    let content = e
        .content()
        .ok_or_else(|| text(StatusCode::BAD_REQUEST, "the entry has no content"))?;
    let ctype = content.content_type().unwrap_or("text");
    if ctype != "application/eim+json" && ctype != "text/eim+json" {
        return Err(text(
            StatusCode::BAD_REQUEST,
            format!("unsupported content type {ctype}; use application/eim+json"),
        ));
    }
    model::from_eim_json(content.value().unwrap_or(""))
        .map_err(|m| text(StatusCode::BAD_REQUEST, m))
}

fn entry_response(
    status: StatusCode,
    ctx: &str,
    uid: &str,
    data: &ItemData,
    etag: &str,
) -> Response {
    let now = Utc::now().timestamp_millis() as u64;
    let body = entry(ctx, uid, None, data, now, Format::EimJson).to_string();
    let mut r = (
        status,
        [(
            header::CONTENT_TYPE,
            "application/atom+xml; type=entry; charset=utf-8",
        )],
        body,
    )
        .into_response();
    let h = r.headers_mut();
    let loc = format!("{ctx}/atom/item/{uid}");
    for (k, v) in [
        (header::ETAG, etag.to_string()),
        (
            header::LAST_MODIFIED,
            httpdate::fmt_http_date(std::time::SystemTime::now()),
        ),
        (header::LOCATION, loc.clone()),
        (header::CONTENT_LOCATION, loc),
    ] {
        if let Ok(v) = HeaderValue::from_str(&v) {
            h.insert(k, v);
        }
    }
    r
}

fn outcome(o: WriteOutcome, status: StatusCode, ctx: &str, uid: &str, data: &ItemData) -> Response {
    match o {
        WriteOutcome::Done { etags, .. } => {
            let etag = etags
                .into_iter()
                .find(|(u, _)| u == uid)
                .map(|(_, e)| e)
                .unwrap_or_default();
            entry_response(status, ctx, uid, data, &etag)
        }
        WriteOutcome::PreconditionFailed => text(
            StatusCode::PRECONDITION_FAILED,
            "If-Match does not match the item's ETag",
        ),
        WriteOutcome::Conflict(m) => text(StatusCode::CONFLICT, m),
        WriteOutcome::NoCollection | WriteOutcome::NoItem => {
            text(StatusCode::NOT_FOUND, "not found")
        }
        WriteOutcome::Stale => text(StatusCode::CONFLICT, "collection changed"),
    }
}

pub(crate) async fn create(
    State(st): State<AppState>,
    Path(uid): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (info, _) = match st.reach(&headers, &uid, Need::Write) {
        Ok(c) => c,
        Err(r) => return r,
    };
    let (item_uid, data) = match read_entry(&headers, &body) {
        Ok(x) => x,
        Err(r) => return r,
    };
    if !safe_segment(&item_uid) {
        return text(StatusCode::BAD_REQUEST, "bad item uuid");
    }
    if let Err(r) = st.uid_free(&info.owner, &item_uid) {
        return r;
    }
    let Some(_lock) = st.try_lock(&info.uid) else {
        return text(StatusCode::LOCKED, "the collection is being updated");
    };
    let op = ItemOp::Put {
        uid: item_uid.clone(),
        name: None,
        data: Box::new(data.clone()),
        merge: false,
        global_uid: true,
    };
    let pre = Precondition::ItemAbsent {
        uid: item_uid.clone(),
    };
    match st.store.write(&info.uid, vec![op], pre) {
        Ok(WriteOutcome::PreconditionFailed) => text(
            StatusCode::CONFLICT,
            format!("item uid {item_uid} is in use"),
        ),
        Ok(o) => outcome(
            o,
            StatusCode::CREATED,
            &st.settings.context,
            &item_uid,
            &data,
        ),
        Err(e) => store_error(e),
    }
}

/// The live item `uid` and its collection, if the caller may use it: one of the
/// caller's own, or one in the collection the request's ticket opens.
fn owned_item(
    st: &AppState,
    headers: &HeaderMap,
    uid: &str,
    need: Need,
) -> Result<(CollectionInfo, Item), Response> {
    let ticket = st.ticket(headers, need)?;
    let caller = match &ticket {
        Some(_) => None,
        None => Some(st.authenticate(headers)?),
    };
    if !safe_segment(uid) {
        return Err(bad_segment());
    }
    let found = st.store.items_by_uid(uid).map_err(store_error)?;
    // The caller's own item, if several collections hold the uid (CalDAV calendars may).
    // Another user's item is answered as absent: a 403 would tell that it exists.
    for (col, item) in found {
        match (&ticket, &caller) {
            // The ticket's collection was read when the ticket was checked.
            (Some((g, c)), _) if g.collection == col => return Ok((c.clone(), item)),
            (None, Some(who)) if owned_by(&col, &who.name) => match st.store.collection(&col) {
                Ok(Some(c)) => return Ok((c, item)),
                Ok(None) => {}
                Err(e) => return Err(store_error(e)),
            },
            _ => {}
        }
    }
    Err(text(StatusCode::NOT_FOUND, "no such item"))
}

pub(crate) async fn get_item(
    State(st): State<AppState>,
    Path(uid): Path<String>,
    headers: HeaderMap,
) -> Response {
    let (col, item) = match owned_item(&st, &headers, &uid, Need::Read) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let Some(data) = &item.data else {
        return text(StatusCode::NOT_FOUND, "no such item");
    };
    entry_response(
        StatusCode::OK,
        &st.settings.context,
        &uid,
        data,
        &item.etag(col.epoch),
    )
}

pub(crate) async fn update(
    State(st): State<AppState>,
    Path(uid): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (col, _) = match owned_item(&st, &headers, &uid, Need::Write) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let (body_uid, data) = match read_entry(&headers, &body) {
        Ok(x) => x,
        Err(r) => return r,
    };
    if body_uid != uid {
        return text(
            StatusCode::BAD_REQUEST,
            format!("entry uuid '{body_uid}' does not match the URL"),
        );
    }
    let pre = match header_str(&headers, "if-match") {
        Some(etag) => Precondition::ItemEtag {
            uid: uid.clone(),
            etag: etag.trim().to_string(),
        },
        None => Precondition::None,
    };
    if headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim() == "*")
    {
        return text(StatusCode::PRECONDITION_FAILED, "the item exists");
    }
    let Some(_lock) = st.try_lock(&col.uid) else {
        return text(StatusCode::LOCKED, "the collection is being updated");
    };
    let op = ItemOp::Put {
        uid: uid.clone(),
        name: None,
        data: Box::new(data.clone()),
        merge: true,
        global_uid: true,
    };
    match st.store.write(&col.uid, vec![op], pre) {
        Ok(o) => outcome(o, StatusCode::OK, &st.settings.context, &uid, &data),
        Err(e) => store_error(e),
    }
}

pub(crate) async fn delete_item(
    State(st): State<AppState>,
    Path(uid): Path<String>,
    headers: HeaderMap,
) -> Response {
    let (col, _) = match owned_item(&st, &headers, &uid, Need::Write) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let Some(_lock) = st.try_lock(&col.uid) else {
        return text(StatusCode::LOCKED, "the collection is being updated");
    };
    match st.store.write(
        &col.uid,
        vec![ItemOp::Delete {
            uid,
            must_exist: true,
        }],
        Precondition::None,
    ) {
        Ok(WriteOutcome::Done { .. }) => StatusCode::NO_CONTENT.into_response(),
        Ok(_) => text(StatusCode::NOT_FOUND, "no such item"),
        Err(e) => store_error(e),
    }
}
