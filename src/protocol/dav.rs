//! What the CalDAV and CardDAV drivers share: finding a user's collection home as DAV
//! clients do (RFC 6764: the principal, `current-user-principal`, from a class's
//! `discovery` path, or from `/.well-known/caldav` or `carddav` at the server's root,
//! following its redirects, and then from the service's own root; then the principal's
//! home set, `calendar-home-set` or `addressbook-home-set`; set-up, untimed, every failure
//! said in the words of the request that failed), the headers of their requests, and
//! a multistatus answer read into an outcome.

use bytes::Bytes;
use hyper::header::{CONTENT_TYPE, ETAG, HeaderName, HeaderValue};

use crate::formats::dav::{DAV, Multistatus, find_prop_href, href_path, parse_multistatus};
use crate::formats::xml;
use crate::protocol::session::{Exchange, Session};
use crate::protocol::{Outcome, SetupError, Stage, VuIds};
use crate::transport::{Conn, Response};

/// `Content-Type` of an XML body.
pub(crate) fn xml_ct() -> (HeaderName, HeaderValue) {
    (
        CONTENT_TYPE,
        HeaderValue::from_static("application/xml; charset=utf-8"),
    )
}

/// A `Depth` header.
pub(crate) fn depth(d: &'static str) -> (HeaderName, HeaderValue) {
    (
        HeaderName::from_static("depth"),
        HeaderValue::from_static(d),
    )
}

/// The answer's ETag, when it gives one.
pub(crate) fn etag_of(r: &Response) -> Option<String> {
    r.headers
        .get(ETAG)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// The outcome with the answer's multistatus, or a body failure naming `what` when the
/// answer was expected and is not one.
pub(crate) fn multistatus_outcome(
    r: &Response,
    o: Outcome,
    what: &str,
) -> (Outcome, Option<Multistatus>) {
    if !o.is_ok() {
        return (o, None);
    }
    match parse_multistatus(&r.body) {
        Ok(m) => (o, Some(m)),
        Err(e) => (o.body_error(format!("{what}: bad multistatus: {e}")), None),
    }
}

/// A `sync-collection` REPORT from `token` (from scratch when empty), asking for each
/// member's ETag.
pub(crate) fn sync_body(token: &str) -> String {
    let mut w = xml::XmlWriter::new();
    w.open("D:sync-collection", &[("xmlns:D", DAV)])
        .leaf("D:sync-token", token)
        .leaf("D:sync-level", "1")
        .open("D:prop", &[])
        .empty("D:getetag", &[])
        .close("D:prop")
        .close("D:sync-collection");
    w.finish()
}

/// Whether the answer to a sync from `token` says the server no longer knows it (403 or
/// 412 with `valid-sync-token`, RFC 6578 §3.2): the client starts over from scratch.
pub(crate) fn refuses_token(r: &Response, token: &str) -> bool {
    !token.is_empty()
        && matches!(r.status.as_u16(), 403 | 412)
        && String::from_utf8_lossy(&r.body).contains("valid-sync-token")
}

/// A class's path template for this user: `{user}`, `{vu}`, `{run_id}`, `{context}`.
pub(crate) fn template(t: &str, s: &Session, ids: &VuIds) -> String {
    t.replace("{user}", &s.user)
        .replace("{vu}", &ids.vu.to_string())
        .replace("{run_id}", &ids.run_id)
        .replace("{context}", &s.context)
}

/// The home a class names (`given`, a template), or the one discovery finds from the
/// class's `start` (a template), else from the service's well-known URI and the
/// context's root: the principal (when discovery ran) and the home, ending in `/`.
pub(crate) async fn find_home(
    s: &Session,
    ids: &VuIds,
    conn: &mut Conn,
    given: Option<&str>,
    start: Option<&str>,
    service: &Service,
) -> Result<(Option<String>, String), SetupError> {
    let base = conn.endpoint().base_path.clone();
    if let Some(h) = given {
        let mut h = format!("{base}{}", template(h, s, ids));
        if !h.ends_with('/') {
            h.push('/');
        }
        return Ok((None, h));
    }
    let starts: Vec<String> = match start {
        Some(d) => vec![format!("{base}{}", template(d, s, ids))],
        None => vec![
            service.well_known.to_string(),
            format!("{base}{}/", s.context),
        ],
    };
    let found = discover(s, conn, &starts, service).await?;
    Ok((Some(found.principal), found.home))
}

/// Redirects followed from one discovery request (RFC 6764's well-known URI redirects).
const MAX_REDIRECTS: usize = 5;

const PRINCIPAL: &str =
    r#"<D:propfind xmlns:D="DAV:"><D:prop><D:current-user-principal/></D:prop></D:propfind>"#;

/// What one service's discovery looks for.
pub(crate) struct Service {
    /// `/.well-known/caldav` or `/.well-known/carddav`.
    pub(crate) well_known: &'static str,
    /// The PROPFIND body that asks a principal for its home set.
    pub(crate) home_body: &'static str,
    /// The home set property: its namespace and name.
    pub(crate) home_prop: (&'static str, &'static str),
    /// The class parameter that names the home when discovery cannot find it.
    pub(crate) home_param: &'static str,
}

/// What discovery found: the principal (an owner grants members by it) and the home,
/// a path on the server ending in `/`.
struct Found {
    principal: String,
    home: String,
}

/// The principal and home, from `starts` in order (the class's `discovery`; else the
/// service's well-known URI and the context's root): a start that leads nowhere (a
/// well-known URI a proxy maps oddly, a root that is not the service's) is not the end,
/// the next one may work. When all fail, what each one answered.
async fn discover(
    s: &Session,
    conn: &mut Conn,
    starts: &[String],
    service: &Service,
) -> Result<Found, SetupError> {
    let mut tried = Vec::new();
    for start in starts {
        let found = match find_href(s, conn, start, PRINCIPAL, DAV, "current-user-principal").await
        {
            Ok(principal) => {
                let (ns, prop) = service.home_prop;
                find_href(s, conn, &principal, service.home_body, ns, prop)
                    .await
                    .map(|home| Found { principal, home })
            }
            Err(e) => Err(e),
        };
        match found {
            Ok(mut f) => {
                if !f.home.ends_with('/') {
                    f.home.push('/');
                }
                return Ok(f);
            }
            Err(e) => tried.push(e),
        }
    }
    let request = tried
        .iter()
        .map(|e| e.request().to_string())
        .collect::<Vec<_>>()
        .join(", then ");
    let answer = tried
        .iter()
        .map(|e| e.answer().to_string())
        .collect::<Vec<_>>()
        .join("; ");
    Err(SetupError {
        stage: Stage::Discovery,
        request,
        answer: format!(
            "{answer} (give the class's {}, or discovery: PATH)",
            service.home_param
        ),
    })
}

/// PROPFIND `path` (on the server, base path included) for one href-valued property.
/// The href comes back as a path on the server: DAV users work with the server's own
/// hrefs throughout, which need not lie under the target's path.
async fn find_href(
    s: &Session,
    conn: &mut Conn,
    path: &str,
    body: &'static str,
    ns: &str,
    prop: &str,
) -> Result<String, SetupError> {
    let (root, url) = find_props(s, conn, path, body, prop).await?;
    let href = find_prop_href(&root, ns, prop).ok_or_else(|| SetupError {
        stage: Stage::Discovery,
        request: format!("PROPFIND {url} ({prop})"),
        answer: format!("207 without {prop}"),
    })?;
    Ok(href_path(&href))
}

/// PROPFIND `path` (depth 0) with `body`, following up to [`MAX_REDIRECTS`] redirects
/// on the same server: the parsed multistatus and the URL that gave it; `what` names the
/// properties in a failure.
pub(crate) async fn find_props(
    s: &Session,
    conn: &mut Conn,
    path: &str,
    body: &'static str,
    what: &str,
) -> Result<(xml::El, String), SetupError> {
    let mut path = path.to_string();
    for _ in 0..=MAX_REDIRECTS {
        let url = conn.endpoint().url_of(&path);
        let fail = |answer: String| SetupError {
            stage: Stage::Discovery,
            request: format!("PROPFIND {url} ({what})"),
            answer,
        };
        let headers = [xml_ct(), depth("0")];
        let r = match s
            .send_to(
                conn,
                "PROPFIND",
                &path,
                &headers,
                Bytes::from_static(body.as_bytes()),
            )
            .await
        {
            Exchange::Answer(r) => r,
            Exchange::Failed(o) => return Err(fail(o.detail.unwrap_or_default())),
        };
        let status = r.status.as_u16();
        if matches!(status, 301 | 302 | 303 | 307 | 308) {
            let location = r
                .headers
                .get(hyper::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            path = conn.endpoint().same_origin_path(location).ok_or_else(|| {
                fail(format!(
                    "{status} to '{location}', another server: give that URL as --target"
                ))
            })?;
            continue;
        }
        if status != 207 {
            return Err(fail(r.status.to_string()));
        }
        let text = std::str::from_utf8(&r.body).map_err(|e| fail(format!("207, {e}")))?;
        let root = xml::parse(text).map_err(|e| fail(format!("207, {e}")))?;
        return Ok((root, url));
    }
    Err(SetupError {
        stage: Stage::Discovery,
        request: format!("PROPFIND {} ({what})", conn.endpoint().url_of(&path)),
        answer: format!("more than {MAX_REDIRECTS} redirects"),
    })
}

/// How a client fetches the members a listing named: `addressbook-multiget` or
/// `calendar-multiget` in batches of its size, or a GET of each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fetch {
    /// Multigets of at most this many members each.
    Multiget(usize),
    /// One GET per member.
    Get,
}

/// What one protocol's members are: how a multiget of some of them is asked for, how
/// one is read, and what they are called in a failure.
pub(crate) struct Members {
    pub(crate) multiget: fn(&[&str]) -> String,
    pub(crate) parse: fn(&str) -> Result<(), String>,
    pub(crate) what: &'static str,
}

/// Fetch every member of `hrefs` (paths on the server) from the collection at `path` as
/// `how` says, each request's cost added to `o` (the listing's outcome) as a sync's
/// requests are one operation; stops at the first request that fails. A member that comes
/// back without its data, or with data that does not parse, fails the operation: a client
/// would have nothing to show for it.
pub(crate) async fn fetch(
    s: &Session,
    conn: &mut Conn,
    path: &str,
    hrefs: &[String],
    how: Fetch,
    members: &Members,
    mut o: Outcome,
) -> Outcome {
    let batch = match how {
        Fetch::Multiget(n) => n.max(1),
        Fetch::Get => 1,
    };
    for chunk in hrefs.chunks(batch) {
        if !o.is_ok() {
            break;
        }
        let asked: Vec<&str> = chunk.iter().map(String::as_str).collect();
        let mut f = match how {
            Fetch::Multiget(_) => multiget(s, conn, path, &asked, members).await,
            Fetch::Get => get(s, conn, asked[0], members).await,
        };
        f.add_cost(&o);
        f.label = o.label;
        o = f;
    }
    o
}

/// One multiget of `asked` from the collection at `path`: each must come with its data.
async fn multiget(
    s: &Session,
    conn: &mut Conn,
    path: &str,
    asked: &[&str],
    members: &Members,
) -> Outcome {
    let body = Bytes::from((members.multiget)(asked));
    let r = match s
        .send_to(conn, "REPORT", path, &[xml_ct(), depth("1")], body)
        .await
    {
        Exchange::Answer(r) => r,
        Exchange::Failed(o) => return o,
    };
    let what = format!("REPORT multiget {path}");
    let (o, m) = multistatus_outcome(&r, Outcome::of(&r, &[207], &what), &what);
    let Some(m) = m else { return o };
    let mut came = 0;
    for (i, text) in &m.data {
        let Some((href, 200, _)) = m.responses.get(*i) else {
            continue;
        };
        if let Err(e) = (members.parse)(text) {
            return o.body_error(format!("{what}: {href} is not {}: {e}", members.what));
        }
        came += usize::from(asked.contains(&href_path(href).as_str()));
    }
    match came < asked.len() {
        true => o.body_error(format!(
            "{what}: {} of the {} members asked for came without their {}",
            asked.len() - came,
            asked.len(),
            members.what
        )),
        false => o,
    }
}

/// A GET of one member, which must be one of `members`.
async fn get(s: &Session, conn: &mut Conn, href: &str, members: &Members) -> Outcome {
    let r = match s.send_to(conn, "GET", href, &[], Bytes::new()).await {
        Exchange::Answer(r) => r,
        Exchange::Failed(o) => return o,
    };
    let o = Outcome::of(&r, &[200], &format!("GET {href}"));
    if !o.is_ok() {
        return o;
    }
    let parsed = std::str::from_utf8(&r.body)
        .map_err(|e| e.to_string())
        .and_then(members.parse);
    match parsed {
        Ok(()) => o,
        Err(e) => o.body_error(format!("GET {href}: not {}: {e}", members.what)),
    }
}

/// How many requests one user's set-up keeps in flight while it fills a calendar or an
/// address book: its own connection and as many more, as a client's first upload of a
/// large book does, so that thousands of items are put in a fraction of the time one
/// connection takes, and the server sees no more connections than a few clients open.
pub(crate) const SETUP_LANES: usize = 4;

/// Items a set-up makes before it sends them: bounds what it holds at once.
const FILL_BATCH: u64 = 64;

/// What a set-up fills a collection with: the media type of its items, and what they
/// are called in a failure (`initial event`, `initial contact`).
pub(crate) struct Filling {
    pub(crate) content_type: &'static str,
    pub(crate) what: &'static str,
}

/// `n` new items put in set-up, [`SETUP_LANES`] at a time over `conn` and siblings whose
/// counts it gives back to `conn`, made [`FILL_BATCH`] at a time by `make` (its path,
/// its body, and what the user keeps of it): what the user keeps of each, with the
/// ETag its answer gave, in order. Stops at the first failure, which it says; the rest
/// are not sent.
pub(crate) async fn fill<T>(
    s: &Session,
    conn: &mut Conn,
    n: u64,
    filling: &Filling,
    mut make: impl FnMut() -> (String, String, T),
) -> Result<Vec<(T, Option<String>)>, String> {
    let mut lanes = Vec::new();
    let mut kept = Vec::new();
    let mut failed = None;
    while (kept.len() as u64) < n && failed.is_none() {
        let left = n - kept.len() as u64;
        let (mut puts, mut made) = (Vec::new(), Vec::new());
        for _ in 0..left.min(FILL_BATCH) {
            let (path, body, item) = make();
            made.push((item, body.len()));
            puts.push((path, body));
        }
        let answers = put_new(s, conn, &mut lanes, puts, filling.content_type).await;
        for ((item, size), (o, etag)) in made.into_iter().zip(answers) {
            if !o.is_ok() {
                let hint = size_refusal(&o, size);
                let why = o.detail.unwrap_or_default();
                let at = kept.len() + 1;
                failed = Some(format!("{} {at} of {n}: {why}{hint}", filling.what));
                break;
            }
            kept.push((item, etag));
        }
    }
    for l in lanes {
        conn.absorb(l);
    }
    match failed {
        Some(why) => Err(why),
        None => Ok(kept),
    }
}

/// What a set-up's failed create may mean beyond its status: a 412 to `If-None-Match: *`
/// on a new, random name says nothing was there, so the server refused the item on its
/// own grounds, and the one servers are known to answer so is an item over their size
/// limit (Radicale's `[server] max_resource_size`, 10,000,000 bytes unless set). Said
/// with the item's size, so a user can hold it to the limit; empty for other failures.
fn size_refusal(o: &Outcome, size: usize) -> String {
    match o.answer.http_status() {
        Some(412) => format!(
            " (the item was {} bytes: a 412 to a create under a new name is how some servers \
             refuse an item over their size limit, such as Radicale's max_resource_size)",
            size
        ),
        _ => String::new(),
    }
}

/// PUT each of `puts` (path, body) where nothing is yet (`If-None-Match: *`) as
/// `content_type`, expecting 201, at most [`SETUP_LANES`] at once: over `conn` and the
/// siblings in `lanes` (made when first needed; [`fill`] gives their counts back with
/// `Conn::absorb`). Each PUT's outcome and the ETag its answer gave, in order.
async fn put_new(
    s: &Session,
    conn: &mut Conn,
    lanes: &mut Vec<Conn>,
    puts: Vec<(String, String)>,
    content_type: &'static str,
) -> Vec<(Outcome, Option<String>)> {
    let mut out = Vec::with_capacity(puts.len());
    let mut left = puts.into_iter();
    loop {
        let chunk: Vec<(String, String)> = left.by_ref().take(SETUP_LANES).collect();
        if chunk.is_empty() {
            return out;
        }
        while lanes.len() + 1 < chunk.len() {
            lanes.push(conn.sibling());
        }
        let conns = std::iter::once(&mut *conn).chain(lanes.iter_mut());
        let sends = chunk
            .into_iter()
            .zip(conns)
            .map(|((path, body), c)| async move {
                let headers = [
                    (CONTENT_TYPE, HeaderValue::from_static(content_type)),
                    (hyper::header::IF_NONE_MATCH, HeaderValue::from_static("*")),
                ];
                match s
                    .send_to(c, "PUT", &path, &headers, Bytes::from(body))
                    .await
                {
                    Exchange::Answer(r) => {
                        let o = Outcome::of(&r, &[201], &format!("PUT {path}"));
                        (o, etag_of(&r))
                    }
                    Exchange::Failed(o) => (o, None),
                }
            });
        out.extend(futures_util::future::join_all(sends).await);
    }
}
