//! Which operation a logged request was. loadmix's own protocols are recognised by their
//! method and URL shapes (CalDAV and WebDAV, Morse Code, Atom, the account protocol);
//! anything else becomes a generic http operation named by its method and path template,
//! where numbers, UUIDs, hex and other generated ids are placeholders, so `GET /item/123`
//! and `GET /item/456` are one operation. What a client does only to set itself up
//! (discovery, accounts, calendars), static assets and requests no rule fits are counted
//! apart, never dropped silently.

/// The protocols an inferred class can speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    /// CalDAV and WebDAV requests.
    Caldav,
    /// Cosmo's Morse Code.
    Morse,
    /// Cosmo's Atom feeds and AtomPub.
    Atom,
    /// Any other request, by method and path template.
    Http,
}

impl Protocol {
    /// Its name in a workload (`caldav`, `morse`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            Protocol::Caldav => "caldav",
            Protocol::Morse => "morse",
            Protocol::Atom => "atom",
            Protocol::Http => "http",
        }
    }
}

/// What a request was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// An operation of a protocol's table. For http, `name` is derived from the method and
    /// `template`.
    Op {
        protocol: Protocol,
        name: String,
        /// http only: the method and path template.
        template: Option<(String, String)>,
    },
    /// What a client does to set itself up, which loadmix does itself before a round
    /// (discovery, accounts, calendars) or after it (cleanup).
    SetUp(&'static str),
    /// Stylesheets, scripts, images, fonts.
    Static,
    /// A method that is not an HTTP token: counted, never run.
    Unclassified,
}

/// A request target in origin form (`/path?query`): an absolute one (`http://host/path`,
/// as proxies log) loses its scheme and host; anything else (`*`, garbage) is `None`.
pub(crate) fn origin_form(target: &str) -> Option<&str> {
    let rest = ["http://", "https://"]
        .iter()
        .find_map(|s| {
            target
                .get(..s.len())
                .filter(|p| p.eq_ignore_ascii_case(s))
                .map(|_| &target[s.len()..])
        })
        .map(|r| r.find('/').map_or("/", |i| &r[i..]));
    let t = rest.unwrap_or(target);
    t.starts_with('/').then_some(t)
}

/// Whether `method` looks like an HTTP method (upper case letters and `-`, at most 20).
pub(crate) fn is_method(method: &str) -> bool {
    !method.is_empty()
        && method.len() <= 20
        && method.bytes().all(|b| b.is_ascii_uppercase() || b == b'-')
}

/// The operation, set-up step or static asset that `method target` with `status` was.
pub(crate) fn classify(method: &str, path: &str, query: Option<&str>, status: u16) -> Kind {
    if !is_method(method) {
        return Kind::Unclassified;
    }
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    if let Some(k) = loadmix_protocols(method, path, &segs, query, status) {
        return k;
    }
    if is_static(path) {
        return Kind::Static;
    }
    let template = template(&segs, query);
    Kind::Op {
        protocol: Protocol::Http,
        name: op_name(method, &template),
        template: Some((method.to_string(), template)),
    }
}

fn op(protocol: Protocol, name: &str) -> Option<Kind> {
    Some(Kind::Op {
        protocol,
        name: name.to_string(),
        template: None,
    })
}

/// The URL shapes of the servers loadmix's protocols speak to, anywhere under a context
/// path (`/cosmo/dav/...`, `/dav/...`).
fn loadmix_protocols(
    method: &str,
    path: &str,
    segs: &[&str],
    query: Option<&str>,
    status: u16,
) -> Option<Kind> {
    if path.starts_with("/.well-known/caldav") || path.starts_with("/.well-known/carddav") {
        return Some(Kind::SetUp("discovery"));
    }
    let at = |name: &str| segs.iter().position(|s| *s == name);
    if at("_loadmix").is_some() {
        return Some(Kind::SetUp("counters"));
    }
    if let Some(i) = at("cmp")
        && segs.get(i + 1) == Some(&"user")
    {
        return Some(Kind::SetUp("accounts"));
    }
    if let Some(i) = at("mc")
        && segs.get(i + 1) == Some(&"collection")
        && segs.len() == i + 3
    {
        return match method {
            "PUT" => op(Protocol::Morse, "publish"),
            // A sync and a subscribe differ by a header a log does not keep.
            "GET" => op(Protocol::Morse, "sync"),
            "POST" => op(Protocol::Morse, "update"),
            "DELETE" => op(Protocol::Morse, "delete"),
            _ => None,
        };
    }
    if let Some(i) = at("atom") {
        let rest = &segs[i + 1..];
        return match (method, rest) {
            ("GET", ["collection", _, "full", "eim-json", ..]) if query.is_some() => {
                op(Protocol::Atom, "time_range_feed")
            }
            ("GET", ["collection", _, "full", ..]) => op(Protocol::Atom, "full_feed"),
            ("GET", ["collection", _, d, ..]) if d.starts_with("dashboard") => {
                op(Protocol::Atom, "dashboard")
            }
            ("POST", ["collection", _]) => op(Protocol::Atom, "create_event"),
            ("PUT", ["item", _]) => op(Protocol::Atom, "update_event"),
            _ => None,
        };
    }
    let i = at("dav")?;
    let depth = segs.len() - i - 1;
    let item = path.ends_with(".ics") || (!path.ends_with('/') && depth >= 3);
    match (method, item) {
        // The principal and home sets: what a client asks on its way to its calendars.
        ("PROPFIND", false) if depth <= 1 => Some(Kind::SetUp("discovery")),
        ("MKCALENDAR" | "MKCOL", _) => Some(Kind::SetUp("calendars")),
        ("DELETE", false) => Some(Kind::SetUp("cleanup")),
        ("PROPFIND", false) => op(Protocol::Caldav, "propfind"),
        // A REPORT's kind (sync-collection, multiget, calendar-query) is in its body, which
        // a log does not keep: one operation, written as the one clients send most.
        ("REPORT", false) => op(Protocol::Caldav, "report"),
        ("GET", true) => op(Protocol::Caldav, "get_event"),
        ("DELETE", true) => op(Protocol::Caldav, "delete_event"),
        // RFC 4918: 201 when the PUT made the resource, 204 when it replaced one; 412 is a
        // replacement whose If-Match lost.
        ("PUT", true) if matches!(status, 200 | 204 | 412) => op(Protocol::Caldav, "update_event"),
        ("PUT", true) => op(Protocol::Caldav, "put_event"),
        _ => None,
    }
}

const STATIC: &[&str] = &[
    "css", "js", "mjs", "map", "png", "jpg", "jpeg", "gif", "svg", "ico", "webp", "avif", "woff",
    "woff2", "ttf", "otf", "eot",
];

fn is_static(path: &str) -> bool {
    let last = path.rsplit('/').next().unwrap_or("");
    last == "robots.txt"
        || last
            .rsplit_once('.')
            .is_some_and(|(_, ext)| STATIC.contains(&ext.to_ascii_lowercase().as_str()))
}

/// The placeholder a path segment becomes, if it is an id rather than a name.
fn placeholder(seg: &str) -> Option<&'static str> {
    let (stem, _ext) = seg.rsplit_once('.').unwrap_or((seg, ""));
    let b = stem.as_bytes();
    if !b.is_empty() && b.iter().all(u8::is_ascii_digit) {
        return Some("{n}");
    }
    let hex = |s: &[u8]| s.iter().all(u8::is_ascii_hexdigit);
    if b.len() == 36
        && [8, 13, 18, 23].iter().all(|&i| b[i] == b'-')
        && hex(&b[..8])
        && hex(&b[24..])
    {
        return Some("{uuid}");
    }
    let digits = b.iter().filter(|c| c.is_ascii_digit()).count();
    if b.len() >= 8 && hex(b) && digits > 0 {
        return Some("{hex}");
    }
    // Generated ids: long, mixing digits in, or percent-encoded blobs.
    if b.len() >= 16 && digits >= 2 || stem.contains('%') && b.len() > 24 {
        return Some("{id}");
    }
    None
}

/// `/item/123/edit?page=2&q=x` as `/item/{n}/edit?page=&q=`.
pub(crate) fn template(segs: &[&str], query: Option<&str>) -> String {
    let mut t = String::new();
    for s in segs.iter().take(16) {
        t.push('/');
        match placeholder(s) {
            Some(p) => {
                t.push_str(p);
                if let Some((_, ext)) = s.rsplit_once('.').filter(|(_, e)| e.len() <= 5) {
                    t.push('.');
                    t.push_str(ext);
                }
            }
            None => t.push_str(&s.chars().take(64).collect::<String>()),
        }
    }
    if t.is_empty() {
        t.push('/');
    }
    if let Some(q) = query.filter(|q| !q.is_empty()) {
        let mut keys: Vec<&str> = q
            .split('&')
            .map(|kv| kv.split('=').next().unwrap_or(""))
            .filter(|k| !k.is_empty())
            .take(8)
            .collect();
        keys.sort_unstable();
        keys.dedup();
        if !keys.is_empty() {
            t.push('?');
            t.push_str(
                &keys
                    .iter()
                    .map(|k| format!("{k}="))
                    .collect::<Vec<_>>()
                    .join("&"),
            );
        }
    }
    t
}

/// The longest operation name `infer` writes, its own or a rule file's.
pub(crate) const MAX_OP_NAME: usize = 48;

/// `get_item_n_edit` for `GET /item/{n}/edit`: lower case, `_` between words, at most
/// [`MAX_OP_NAME`] characters.
fn op_name(method: &str, template: &str) -> String {
    let mut n = method.to_ascii_lowercase();
    let path = template.split('?').next().unwrap_or("");
    for w in path.split(|c: char| !c.is_ascii_alphanumeric()) {
        if !w.is_empty() {
            n.push('_');
            n.push_str(&w.to_ascii_lowercase());
        }
    }
    if path == "/" {
        n.push_str("_root");
    }
    n.chars().take(MAX_OP_NAME).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(m: &str, target: &str, status: u16) -> Kind {
        let (p, q) = target
            .split_once('?')
            .map_or((target, None), |(p, q)| (p, Some(q)));
        classify(m, p, q, status)
    }

    fn is(k: Kind, protocol: Protocol, n: &str) {
        match k {
            Kind::Op {
                protocol: p, name, ..
            } => assert_eq!((p, name.as_str()), (protocol, n)),
            other => panic!("{other:?} is not {n}"),
        }
    }

    #[test]
    fn caldav_by_method_and_path_shape() {
        let cal = "/cosmo/dav/alice/lm-1-abc/";
        is(name("PROPFIND", cal, 207), Protocol::Caldav, "propfind");
        is(name("REPORT", cal, 207), Protocol::Caldav, "report");
        is(
            name("PUT", &format!("{cal}e1.ics"), 201),
            Protocol::Caldav,
            "put_event",
        );
        is(
            name("PUT", &format!("{cal}e1.ics"), 204),
            Protocol::Caldav,
            "update_event",
        );
        is(
            name("GET", &format!("{cal}e1.ics"), 200),
            Protocol::Caldav,
            "get_event",
        );
        is(
            name("DELETE", &format!("{cal}e1.ics"), 204),
            Protocol::Caldav,
            "delete_event",
        );
        assert_eq!(
            name("PROPFIND", "/cosmo/dav/", 207),
            Kind::SetUp("discovery")
        );
        assert_eq!(
            name("PROPFIND", "/dav/alice/", 207),
            Kind::SetUp("discovery")
        );
        assert_eq!(
            name("PROPFIND", "/.well-known/caldav", 301),
            Kind::SetUp("discovery")
        );
        assert_eq!(name("MKCALENDAR", cal, 201), Kind::SetUp("calendars"));
        assert_eq!(name("DELETE", cal, 204), Kind::SetUp("cleanup"));
        assert_eq!(
            name("PUT", "/cosmo/cmp/user/bob", 201),
            Kind::SetUp("accounts")
        );
    }

    #[test]
    fn morse_code_and_atom_by_the_cosmo_url_shapes() {
        let uid = "/cosmo/mc/collection/5f1c0a4e-0000-4000-8000-000000000001";
        is(name("PUT", uid, 201), Protocol::Morse, "publish");
        is(name("GET", uid, 200), Protocol::Morse, "sync");
        is(name("POST", uid, 204), Protocol::Morse, "update");
        let col = "/cosmo/atom/collection/abc";
        is(
            name("GET", &format!("{col}/full/eim-json?start=a&end=b"), 200),
            Protocol::Atom,
            "time_range_feed",
        );
        is(
            name("GET", &format!("{col}/full"), 200),
            Protocol::Atom,
            "full_feed",
        );
        is(
            name("GET", &format!("{col}/dashboard-now/eim-json"), 200),
            Protocol::Atom,
            "dashboard",
        );
        is(name("POST", col, 201), Protocol::Atom, "create_event");
        is(
            name("PUT", "/cosmo/atom/item/x", 200),
            Protocol::Atom,
            "update_event",
        );
    }

    #[test]
    fn other_requests_are_grouped_by_method_and_path_template() {
        let a = name("GET", "/item/123?page=2&q=x", 200);
        let b = name("GET", "/item/456?q=y&page=9", 404);
        assert_eq!(a, b);
        let Kind::Op {
            name: n,
            template: Some((m, t)),
            ..
        } = a
        else {
            panic!()
        };
        assert_eq!(
            (n.as_str(), m.as_str(), t.as_str()),
            ("get_item_n", "GET", "/item/{n}?page=&q=")
        );
        let u = name(
            "DELETE",
            "/u/0b7e4c1a-9f2d-4e3b-8a6c-5d4e3f2a1b0c/doc-4f9a2b7c1e.pdf",
            204,
        );
        let Kind::Op {
            template: Some((_, t)),
            ..
        } = u
        else {
            panic!()
        };
        assert_eq!(t, "/u/{uuid}/doc-4f9a2b7c1e.pdf");
        assert_eq!(name("GET", "/static/app.min.JS", 200), Kind::Static);
        assert_eq!(name("get\n", "/", 200), Kind::Unclassified);
        assert_eq!(origin_form("http://h:80/a?b"), Some("/a?b"));
        assert_eq!(origin_form("HTTPS://h"), Some("/"));
        assert_eq!(origin_form("*"), None);
        assert_eq!(origin_form("a/b"), None);
        is(name("GET", "/", 200), Protocol::Http, "get_root");
    }
}
