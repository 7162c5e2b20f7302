//! Shared pieces of the embedded server's handlers: state, authentication (HTTP Basic
//! against the store's accounts, or `--no-auth`, or a Morse Code collection's ticket),
//! per-collection write locks (Cosmo's 423), path-segment checks, and small response
//! helpers.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;

use super::ServerStats;
pub(crate) use super::settings::Settings;
use super::store::{CollectionInfo, Store, StoreError};
use super::tickets::{Grant, Kind, TICKET};

#[derive(Clone)]
pub(crate) struct AppState {
    pub store: Arc<dyn Store>,
    pub stats: Arc<ServerStats>,
    /// The STOMP broker's counts, shown beside the requests.
    pub broker: Arc<super::stomp::BrokerStats>,
    pub settings: Arc<Settings>,
    pub locks: Arc<Mutex<HashSet<String>>>,
    /// Morse Code collections' tickets.
    pub tickets: Arc<super::tickets::Tickets>,
    /// When the server started (the stall endpoint's clock).
    pub started: std::time::Instant,
}

/// What a request does with the collection it names.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Need {
    Read,
    Write,
}

/// Who is asking.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Caller {
    pub name: String,
    pub admin: bool,
}

impl AppState {
    /// The caller from Basic credentials, or the 401 to send.
    pub(crate) fn authenticate(&self, headers: &HeaderMap) -> Result<Caller, Response> {
        let creds = basic_credentials(headers);
        let s = &self.settings;
        if s.no_auth {
            let name = creds.map(|(u, _)| u).unwrap_or_else(|| "guest".into());
            return Ok(Caller {
                admin: name == s.admin_user,
                name,
            });
        }
        let Some((user, pass)) = creds else {
            return Err(unauthorized());
        };
        if user == s.admin_user {
            return if pass == s.admin_password {
                Ok(Caller {
                    name: user,
                    admin: true,
                })
            } else {
                Err(unauthorized())
            };
        }
        match self.store.user(&user) {
            Ok(Some(u)) if u.password == pass => Ok(Caller {
                name: user,
                admin: false,
            }),
            Ok(_) => Err(unauthorized()),
            Err(e) => Err(store_error(e)),
        }
    }

    /// May `caller` act on something `owner` owns?
    pub(crate) fn may_access(&self, caller: &Caller, owner: &str) -> bool {
        self.settings.no_auth || caller.admin || caller.name == owner
    }

    /// Take the write lock of a collection, or `None` when another update holds it.
    pub(crate) fn try_lock(&self, collection: &str) -> Option<CollectionLock> {
        let mut held = self.locks.lock().ok()?;
        if !held.insert(collection.to_string()) {
            return None;
        }
        Some(CollectionLock {
            locks: self.locks.clone(),
            uid: collection.to_string(),
        })
    }
}

/// The store's key of a collection: its owner and uid. Each user has a namespace of their
/// own, so one user's collection uids neither clash with nor reveal another's. ('/' is in
/// no safe segment, so the key is unambiguous.)
pub(crate) fn ckey(owner: &str, uid: &str) -> String {
    format!("{owner}/{uid}")
}

/// The uid of a collection as its users see it, from its store key.
pub(crate) fn public_uid(key: &str) -> &str {
    key.rsplit_once('/').map_or(key, |(_, u)| u)
}

/// Whether a store key belongs to `owner`'s namespace.
pub(crate) fn owned_by(key: &str, owner: &str) -> bool {
    key.split_once('/').is_some_and(|(o, _)| o == owner)
}

impl AppState {
    /// Authenticate, check the uid, and load a collection the caller may use.
    pub(crate) fn owned_collection(
        &self,
        headers: &HeaderMap,
        uid: &str,
    ) -> Result<CollectionInfo, Response> {
        let caller = self.authenticate(headers)?;
        if !safe_segment(uid) {
            return Err(bad_segment());
        }
        // Only the caller's own namespace is looked in: another user's collection with the
        // same uid is not there for this caller, and nothing says it exists.
        match self.store.collection(&ckey(&caller.name, uid)) {
            Ok(Some(c)) => Ok(c),
            Ok(None) => Err(text(StatusCode::NOT_FOUND, "no such collection")),
            Err(e) => Err(store_error(e)),
        }
    }

    /// The collection a Cosmo request (Morse Code, Atom) reaches, and the kind of the
    /// ticket it came with: through a `Ticket:` (no credentials asked), or else the
    /// caller's own.
    pub(crate) fn reach(
        &self,
        headers: &HeaderMap,
        uid: &str,
        need: Need,
    ) -> Result<(CollectionInfo, Option<Kind>), Response> {
        let Some((grant, c)) = self.ticket(headers, need)? else {
            return self.owned_collection(headers, uid).map(|c| (c, None));
        };
        if public_uid(&grant.collection) != uid {
            return Err(text(
                StatusCode::FORBIDDEN,
                "the ticket is for another collection",
            ));
        }
        Ok((c, Some(grant.kind)))
    }

    /// What the request's `Ticket:` grants, when it has one, and the collection it
    /// opens: 403 for a key the server never issued, one whose collection is gone (or
    /// made again under its name: deleted by any way, CalDAV's included), or a read-only
    /// one on a write.
    pub(crate) fn ticket(
        &self,
        headers: &HeaderMap,
        need: Need,
    ) -> Result<Option<(Grant, CollectionInfo)>, Response> {
        let Some(key) = header_str(headers, TICKET) else {
            return Ok(None);
        };
        let Some(grant) = self.tickets.find(key.trim()) else {
            return Err(text(StatusCode::FORBIDDEN, "no such ticket"));
        };
        let live = match self.store.collection(&grant.collection) {
            Ok(c) => c.filter(|c| c.epoch == grant.epoch),
            Err(e) => return Err(store_error(e)),
        };
        let Some(c) = live else {
            self.tickets.forget(key.trim());
            return Err(text(StatusCode::FORBIDDEN, "no such ticket"));
        };
        if need == Need::Write && grant.kind == Kind::ReadOnly {
            return Err(text(StatusCode::FORBIDDEN, "the ticket is read-only"));
        }
        Ok(Some((grant, c)))
    }

    /// Whether the collection a ticket was issued on is still there: the same name and
    /// the same creation epoch. A store that cannot say keeps the ticket dead.
    pub(crate) fn ticket_alive(&self, grant: &Grant) -> bool {
        matches!(self.store.collection(&grant.collection), Ok(Some(c)) if c.epoch == grant.epoch)
    }

    /// 409 when an item uid is already used by one of `owner`'s collections (Cosmo's item
    /// identity, within the owner's namespace).
    pub(crate) fn uid_free(&self, owner: &str, uid: &str) -> Result<(), Response> {
        match self.store.items_by_uid(uid) {
            Ok(found) if found.iter().any(|(k, _)| owned_by(k, owner)) => Err(text(
                StatusCode::CONFLICT,
                format!("item uid {uid} is in use"),
            )),
            Ok(_) => Ok(()),
            Err(e) => Err(store_error(e)),
        }
    }
}

/// Released when dropped.
pub(crate) struct CollectionLock {
    locks: Arc<Mutex<HashSet<String>>>,
    uid: String,
}

impl Drop for CollectionLock {
    fn drop(&mut self) {
        if let Ok(mut held) = self.locks.lock() {
            held.remove(&self.uid);
        }
    }
}

fn basic_credentials(headers: &HeaderMap) -> Option<(String, String)> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let b64 = v
        .strip_prefix("Basic ")
        .or_else(|| v.strip_prefix("basic "))?;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (u, p) = text.split_once(':')?;
    Some((u.to_string(), p.to_string()))
}

pub(crate) fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"loadmix\""),
        )],
        "authentication required\n",
    )
        .into_response()
}

pub(crate) fn text(status: StatusCode, msg: impl Into<String>) -> Response {
    let mut m = msg.into();
    if !m.ends_with('\n') {
        m.push('\n');
    }
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        m,
    )
        .into_response()
}

pub(crate) fn store_error(e: StoreError) -> Response {
    match e {
        // WebDAV's word for a store with no room: the client may try again later.
        StoreError::Full(why) => text(StatusCode::INSUFFICIENT_STORAGE, why),
        e => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("store error: {e}"),
        ),
    }
}

/// A path segment that cannot escape its place: not empty, not `.` or `..`, no slash or
/// backslash (also when it arrived percent-encoded), no control characters.
pub(crate) fn safe_segment(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 512
        && s != "."
        && s != ".."
        && !s.contains(['/', '\\'])
        && !s.chars().any(char::is_control)
}

pub(crate) fn bad_segment() -> Response {
    text(StatusCode::BAD_REQUEST, "bad path segment")
}

/// 411 when a body-carrying request says nothing of its length.
pub(crate) fn require_length(headers: &HeaderMap) -> Result<(), Response> {
    if headers.contains_key(header::CONTENT_LENGTH)
        || headers.contains_key(header::TRANSFER_ENCODING)
    {
        Ok(())
    } else {
        Err(text(StatusCode::LENGTH_REQUIRED, "Content-Length required"))
    }
}

/// The media type of the request, lower-cased, without parameters.
pub(crate) fn media_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default()
}

pub(crate) fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Percent-decode a path segment; `None` when the escapes are malformed or not UTF-8.
pub(crate) fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Percent-encode a path segment for an href.
pub(crate) fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~@:+".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Where a calendar's component set is kept among its properties.
pub(crate) const COMPONENT_SET: &str =
    "{urn:ietf:params:xml:ns:caldav}supported-calendar-component-set";

/// The components a calendar accepts: what MKCALENDAR set, else events and to-dos.
pub(crate) fn components_of(c: &CollectionInfo) -> Vec<String> {
    match c.props.get(COMPONENT_SET) {
        Some(v) => v.split(',').map(str::to_string).collect(),
        None => vec!["VEVENT".into(), "VTODO".into()],
    }
}

/// A WebDAV error: the status and a `DAV:error` body naming the precondition `cond`.
pub(crate) fn dav_error(status: StatusCode, ns: &str, cond: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/xml; charset=utf-8")],
        loadmix_formats::dav::error_body(ns, cond),
    )
        .into_response()
}
