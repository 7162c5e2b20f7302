//! Morse Code (Cosmo's sync protocol) at `{ctx}/mc/collection/{uid}`: publish (PUT), subscribe
//! (GET), sync (GET with a token: only what changed since, tombstones included), update
//! (POST with the newest token: 204 and a new token; a stale token gives 205, a concurrent
//! update 423) and delete. Bodies are EIMML. A publish may ask for tickets, which let
//! others reach the collection without the owner's credentials (`tickets.rs`).

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::http::*;
use super::model::{self, ItemData};
use super::store::{CollectionInfo, CreateOutcome, ItemOp, Precondition, WriteOutcome};
use super::tickets::{Full, Kind, MAX_TICKETS, MAX_TICKETS_PER_OWNER, On};

const TOKEN: &str = "x-morsecode-synctoken";
const TICKET_TYPE: &str = "x-morsecode-tickettype";
const TICKET_ISSUED: &str = "x-morsecode-ticket";

/// The ticket kinds a publish asks for, or the 400 to send.
fn asked_tickets(headers: &HeaderMap) -> Result<Vec<Kind>, Response> {
    match header_str(headers, TICKET_TYPE) {
        None => Ok(Vec::new()),
        Some(v) => Kind::parse_list(v).map_err(|m| text(StatusCode::BAD_REQUEST, m)),
    }
}
const EIMML: &str = "application/eim+xml";

fn with_token(status: StatusCode, info_token: &str, body: Option<String>) -> Response {
    let mut r = match body {
        Some(b) => (
            status,
            [(header::CONTENT_TYPE, "application/eim+xml;charset=UTF-8")],
            b,
        )
            .into_response(),
        None => status.into_response(),
    };
    if let Ok(v) = HeaderValue::from_str(info_token) {
        r.headers_mut().insert(TOKEN, v);
    }
    r
}

fn parse_body(headers: &HeaderMap, body: &[u8], uid: &str) -> Result<model::Eimml, Response> {
    require_length(headers)?;
    if media_type(headers) != EIMML {
        return Err(text(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("Content-Type must be {EIMML}"),
        ));
    }
    let text_body = std::str::from_utf8(body)
        .map_err(|_| text(StatusCode::BAD_REQUEST, "body is not UTF-8"))?;
    let e = model::parse_eimml(text_body)
        .map_err(|m| text(StatusCode::BAD_REQUEST, format!("bad EIMML: {m}")))?;
    if e.uuid != uid {
        return Err(text(
            StatusCode::BAD_REQUEST,
            format!("collection uuid '{}' does not match the URL", e.uuid),
        ));
    }
    Ok(e)
}

pub(crate) async fn publish(
    State(st): State<AppState>,
    Path(uid): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let caller = match st.authenticate(&headers) {
        Ok(c) => c,
        Err(r) => return r,
    };
    if !safe_segment(&uid) {
        return bad_segment();
    }
    let e = match parse_body(&headers, &body, &uid) {
        Ok(e) => e,
        Err(r) => return r,
    };
    let kinds = match asked_tickets(&headers) {
        Ok(k) => k,
        Err(r) => return r,
    };
    let mut items: Vec<(String, ItemData)> = Vec::new();
    for (item_uid, data) in e.recordsets {
        if let Some(d) = data {
            if let Err(r) = st.uid_free(&caller.name, &item_uid) {
                return r;
            }
            if items.iter().any(|(u, _)| *u == item_uid) {
                return text(
                    StatusCode::BAD_REQUEST,
                    format!("item uid {item_uid} appears twice"),
                );
            }
            items.push((item_uid, d));
        }
    }
    let name = e.name.unwrap_or_default();
    let key = ckey(&caller.name, &uid);
    match st
        .store
        .create_collection(&key, &caller.name, &name, "", items)
    {
        Ok(CreateOutcome::Created(info)) => {
            let mut r = with_token(StatusCode::CREATED, &info.token(), None);
            let on = On {
                collection: &key,
                epoch: info.epoch,
                owner: &caller.name,
            };
            match st.tickets.issue(on, &kinds, |g| st.ticket_alive(g)) {
                Ok(issued) => {
                    for (kind, k) in issued {
                        if let Ok(v) = HeaderValue::from_str(&format!("{}={k}", kind.name())) {
                            r.headers_mut().append(TICKET_ISSUED, v);
                        }
                    }
                    r
                }
                Err(full) => {
                    // Nothing half made: the collection goes when its tickets cannot.
                    let _ = st.store.delete_collection(&key);
                    let whose = match full {
                        Full::Server => format!("the server holds {MAX_TICKETS} tickets"),
                        Full::Owner => format!(
                            "{} holds {MAX_TICKETS_PER_OWNER} tickets, one account's most",
                            caller.name
                        ),
                    };
                    text(StatusCode::INSUFFICIENT_STORAGE, whose)
                }
            }
        }
        Ok(CreateOutcome::Exists) => text(StatusCode::CONFLICT, "collection uid is in use"),
        Err(err) => store_error(err),
    }
}

pub(crate) async fn subscribe_or_sync(
    State(st): State<AppState>,
    Path(uid): Path<String>,
    headers: HeaderMap,
) -> Response {
    let (info, ticket) = match st.reach(&headers, &uid, Need::Read) {
        Ok(c) => c,
        Err(r) => return r,
    };
    let since = match header_str(&headers, TOKEN) {
        None => None,
        Some(t) => match info.token_version(t) {
            Some(v) => Some(v),
            None => {
                return text(
                    StatusCode::BAD_REQUEST,
                    "sync token is not valid for this collection; subscribe again",
                );
            }
        },
    };
    match st.store.items(&info.uid, since) {
        Ok(Some((info, items))) => {
            let body = model::write_eimml(
                public_uid(&info.uid),
                &info.name,
                items.iter().map(|i| (i.uid.as_str(), i.data.as_ref())),
            );
            let mut r = with_token(StatusCode::OK, &info.token(), Some(body));
            // Chandler learnt from this whether it may write back.
            if let Some(k) = ticket {
                r.headers_mut()
                    .insert(TICKET_TYPE, HeaderValue::from_static(k.name()));
            }
            r
        }
        Ok(None) => text(StatusCode::NOT_FOUND, "no such collection"),
        Err(e) => store_error(e),
    }
}

pub(crate) async fn update(
    State(st): State<AppState>,
    Path(uid): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (info, _) = match st.reach(&headers, &uid, Need::Write) {
        Ok(c) => c,
        Err(r) => return r,
    };
    let Some(token) = header_str(&headers, TOKEN) else {
        return text(
            StatusCode::BAD_REQUEST,
            "an update needs the X-MorseCode-SyncToken it is based on",
        );
    };
    let e = match parse_body(&headers, &body, &uid) {
        Ok(e) => e,
        Err(r) => return r,
    };
    // A token that is not the newest means the client missed changes: it must sync first.
    let Some(version) = info.token_version(token) else {
        return with_token(StatusCode::RESET_CONTENT, &info.token(), None);
    };
    let Some(_lock) = st.try_lock(&info.uid) else {
        return text(
            StatusCode::LOCKED,
            "another update of this collection is in progress",
        );
    };
    let ops = e
        .recordsets
        .into_iter()
        .map(|(u, d)| match d {
            Some(data) => ItemOp::Put {
                uid: u,
                name: None,
                data: Box::new(data),
                merge: true,
                global_uid: true,
            },
            None => ItemOp::Delete {
                uid: u,
                must_exist: false,
            },
        })
        .collect();
    match st
        .store
        .write(&info.uid, ops, Precondition::Version(version))
    {
        Ok(WriteOutcome::Done { version, .. }) => {
            let token = CollectionInfo { version, ..info }.token();
            with_token(StatusCode::NO_CONTENT, &token, None)
        }
        Ok(WriteOutcome::Stale) => match st.store.collection(&info.uid) {
            Ok(Some(now)) => with_token(StatusCode::RESET_CONTENT, &now.token(), None),
            _ => text(StatusCode::NOT_FOUND, "no such collection"),
        },
        Ok(WriteOutcome::Conflict(m)) => text(StatusCode::CONFLICT, m),
        Ok(WriteOutcome::NoCollection) => text(StatusCode::NOT_FOUND, "no such collection"),
        Ok(other) => text(StatusCode::BAD_REQUEST, format!("{other:?}")),
        Err(e) => store_error(e),
    }
}

pub(crate) async fn delete(
    State(st): State<AppState>,
    Path(uid): Path<String>,
    headers: HeaderMap,
) -> Response {
    let (info, _) = match st.reach(&headers, &uid, Need::Write) {
        Ok(c) => c,
        Err(r) => return r,
    };
    match st.store.delete_collection(&info.uid) {
        Ok(true) => {
            st.tickets.drop_collection(&info.uid);
            StatusCode::NO_CONTENT.into_response()
        }
        Ok(false) => text(StatusCode::NOT_FOUND, "no such collection"),
        Err(e) => store_error(e),
    }
}
