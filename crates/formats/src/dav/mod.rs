//! WebDAV (RFC 4918) multistatus documents: reading them as a client (whatever the
//! prefixes and the order of elements, as Radicale, Xandikos and others write them) and
//! writing them as the embedded server, with quick-xml's writer behind [`XmlWriter`].

use super::xml::{El, XmlWriter};

/// The WebDAV namespace.
pub const DAV: &str = "DAV:";
/// The CalDAV namespace (RFC 4791).
pub const CALDAV: &str = "urn:ietf:params:xml:ns:caldav";
/// The CardDAV namespace (RFC 6352).
pub const CARDDAV: &str = "urn:ietf:params:xml:ns:carddav";
/// Apple CalendarServer's namespace (getctag and other extensions).
pub const CS: &str = "http://calendarserver.org/ns/";

/// What a multistatus answer says: per response its href and status (200 when it carries
/// only propstats), and the sync token if any.
#[derive(Debug, Default, PartialEq)]
pub struct Multistatus {
    /// Per response: its href, its status, and its ETag when it has one.
    pub responses: Vec<(String, u16, Option<String>)>,
    /// The collection's new sync token (RFC 6578), when one came.
    pub sync_token: Option<String>,
    /// The `calendar-data` (CalDAV) or `address-data` (CardDAV) of the responses that
    /// carry it: the response's index, the text.
    pub data: Vec<(usize, String)>,
}

mod read;

pub use read::parse_multistatus;

/// The responses and sync token of a parsed multistatus document, read from its tree:
/// what [`parse_multistatus`] reads as the document streams past is held to it.
#[cfg(test)]
fn multistatus_of(root: &El) -> Result<Multistatus, String> {
    if !root.is(DAV, "multistatus") {
        return Err(format!(
            "root element is {}, not DAV:multistatus",
            root.name
        ));
    }
    let mut out = Multistatus::default();
    for c in &root.children {
        if c.is(DAV, "sync-token") {
            out.sync_token = Some(c.text.trim().to_string());
        } else if c.is(DAV, "response") {
            let href = c
                .child(DAV, "href")
                .map(|h| h.text.trim().to_string())
                .ok_or("a response without href")?;
            let status = match c.child(DAV, "status") {
                Some(s) => status_code(&s.text)
                    .ok_or_else(|| format!("bad status line '{}'", s.text.trim()))?,
                None => 200,
            };
            let etag = c
                .children_named(DAV, "propstat")
                .filter(|p| p.child(DAV, "status").and_then(|s| status_code(&s.text)) == Some(200))
                .filter_map(|p| p.child(DAV, "prop").and_then(|pr| pr.child(DAV, "getetag")))
                .map(|e| e.text.trim().to_string())
                .find(|e| !e.is_empty());
            let data = c
                .children_named(DAV, "propstat")
                .filter(|p| p.child(DAV, "status").and_then(|s| status_code(&s.text)) == Some(200))
                .filter_map(|p| {
                    p.child(DAV, "prop").and_then(|pr| {
                        pr.child(CALDAV, "calendar-data")
                            .or_else(|| pr.child(CARDDAV, "address-data"))
                    })
                })
                .map(|d| d.text.clone())
                .find(|d| !d.trim().is_empty());
            if let Some(d) = data {
                out.data.push((out.responses.len(), d));
            }
            out.responses.push((href, status, etag));
        }
    }
    Ok(out)
}

/// The code of an HTTP status line (`HTTP/1.1 404 Not Found` is 404).
pub fn status_code(line: &str) -> Option<u16> {
    line.split_whitespace().nth(1)?.parse().ok()
}

/// An href as a path: absolute URLs lose their scheme and host.
pub fn href_path(h: &str) -> String {
    match h
        .strip_prefix("http://")
        .or_else(|| h.strip_prefix("https://"))
    {
        Some(rest) => rest
            .find('/')
            .map_or("/".to_string(), |i| rest[i..].to_string()),
        None => h.to_string(),
    }
}

/// The first `<D:href>` inside the named property of a 200 propstat.
pub fn find_prop_href(root: &El, ns: &str, prop: &str) -> Option<String> {
    root.children_named(DAV, "response")
        .flat_map(|r| r.children_named(DAV, "propstat"))
        .filter_map(|ps| ps.child(DAV, "prop"))
        .filter_map(|p| p.child(ns, prop))
        .filter_map(|p| p.child(DAV, "href"))
        .map(|h| h.text.trim().to_string())
        .find(|h| !h.is_empty())
}

/// The prefix the server writes a namespace with (declared on every multistatus root).
fn prefix(ns: &str) -> Option<&'static str> {
    match ns {
        DAV => Some("D"),
        CALDAV => Some("C"),
        CARDDAV => Some("CR"),
        CS => Some("CS"),
        _ => None,
    }
}

/// A property's value as the server writes it.
#[derive(Debug, Clone, PartialEq)]
pub enum Prop {
    /// Character data (escaped when written).
    Text(String),
    /// One `<D:href>`.
    Href(String),
    /// Empty child elements by qualified name, e.g. resourcetype's `D:collection`.
    Marks(&'static [&'static str]),
    /// `supported-report-set`: one `D:supported-report` per report, by qualified name.
    Reports(&'static [&'static str]),
    /// `current-user-privilege-set`: one `D:privilege` per privilege, by qualified name.
    Privileges(&'static [&'static str]),
    /// `supported-calendar-component-set`: one `C:comp` per component name.
    Components(Vec<String>),
}

/// A property by namespace and local name, as a client asked for it.
pub type PropName = (String, String);

/// A multistatus document being written: responses, then an optional sync token.
pub struct MultistatusWriter {
    w: XmlWriter,
}

impl Default for MultistatusWriter {
    fn default() -> Self {
        MultistatusWriter::new()
    }
}

impl MultistatusWriter {
    /// An empty multistatus, its root open.
    pub fn new() -> MultistatusWriter {
        let mut w = XmlWriter::new();
        w.open(
            "D:multistatus",
            &[
                ("xmlns:D", DAV),
                ("xmlns:C", CALDAV),
                ("xmlns:CR", CARDDAV),
                ("xmlns:CS", CS),
            ],
        );
        MultistatusWriter { w }
    }

    /// An element for a property name: known namespaces by their prefix, others declared
    /// on the element itself.
    fn prop_element(&mut self, (ns, name): &PropName, value: Option<&Prop>) {
        let (qname, decl) = match prefix(ns) {
            Some(p) => (format!("{p}:{name}"), None),
            None => (format!("X:{name}"), Some(ns.as_str())),
        };
        let attrs: Vec<(&str, &str)> = decl.map(|d| ("xmlns:X", d)).into_iter().collect();
        let w = &mut self.w;
        match value {
            None => {
                w.empty(&qname, &attrs);
            }
            Some(Prop::Text(t)) if t.is_empty() => {
                w.empty(&qname, &attrs);
            }
            Some(Prop::Marks([])) => {
                w.empty(&qname, &attrs);
            }
            Some(v) => {
                w.open(&qname, &attrs);
                match v {
                    Prop::Text(t) => {
                        w.text(t);
                    }
                    Prop::Href(h) => {
                        w.leaf("D:href", h);
                    }
                    Prop::Marks(marks) => {
                        for m in *marks {
                            w.empty(m, &[]);
                        }
                    }
                    Prop::Reports(reports) => {
                        for r in *reports {
                            w.open("D:supported-report", &[]).open("D:report", &[]);
                            w.empty(r, &[]);
                            w.close("D:report").close("D:supported-report");
                        }
                    }
                    Prop::Privileges(privs) => {
                        for p in *privs {
                            w.open("D:privilege", &[])
                                .empty(p, &[])
                                .close("D:privilege");
                        }
                    }
                    Prop::Components(comps) => {
                        for c in comps {
                            w.empty("C:comp", &[("name", c.as_str())]);
                        }
                    }
                }
                w.close(&qname);
            }
        }
    }

    fn propstat<'a>(
        &mut self,
        props: impl Iterator<Item = (&'a PropName, Option<&'a Prop>)>,
        status: &str,
    ) {
        self.w.open("D:propstat", &[]).open("D:prop", &[]);
        for (n, v) in props {
            self.prop_element(n, v);
        }
        self.w
            .close("D:prop")
            .leaf("D:status", &format!("HTTP/1.1 {status}"))
            .close("D:propstat");
    }

    /// One response with a `200 OK` propstat for the properties that have a value and a
    /// `404 Not Found` one for the rest.
    pub fn response(&mut self, href: &str, props: &[(PropName, Option<Prop>)]) {
        self.w.open("D:response", &[]).leaf("D:href", href);
        if props.iter().any(|(_, v)| v.is_some()) {
            self.propstat(
                props
                    .iter()
                    .filter_map(|(n, v)| v.as_ref().map(|v| (n, Some(v)))),
                "200 OK",
            );
        }
        if props.iter().any(|(_, v)| v.is_none()) {
            self.propstat(
                props
                    .iter()
                    .filter(|(_, v)| v.is_none())
                    .map(|(n, _)| (n, None)),
                "404 Not Found",
            );
        }
        self.w.close("D:response");
    }

    /// One response with one propstat naming `props` (values empty) with `status`, as a
    /// PROPPATCH answer.
    pub fn propstat_response(&mut self, href: &str, props: &[PropName], status: &str) {
        self.w.open("D:response", &[]).leaf("D:href", href);
        for p in props {
            self.propstat(std::iter::once((p, None)), status);
        }
        self.w.close("D:response");
    }

    /// One response with a propstat per property, each with its own status (a PROPPATCH
    /// that fails: the refused ones 403, the others 424).
    pub fn propstats(&mut self, href: &str, props: &[PropName], statuses: &[&str]) {
        self.w.open("D:response", &[]).leaf("D:href", href);
        for (p, st) in props.iter().zip(statuses) {
            self.propstat(std::iter::once((p, None)), st);
        }
        self.w.close("D:response");
    }

    /// A response that is only a status, e.g. a member gone since a sync token.
    pub fn status(&mut self, href: &str, status: &str) {
        self.w
            .open("D:response", &[])
            .leaf("D:href", href)
            .leaf("D:status", &format!("HTTP/1.1 {status}"))
            .close("D:response");
    }

    /// Add the collection's sync token.
    pub fn sync_token(&mut self, token: &str) {
        self.w.leaf("D:sync-token", token);
    }

    /// Close the root; the document.
    pub fn finish(mut self) -> String {
        self.w.close("D:multistatus");
        self.w.finish()
    }
}

/// A `DAV:error` body naming one precondition, e.g. `valid-sync-token`.
pub fn error_body(ns: &str, condition: &str) -> String {
    error_body_with_href(ns, condition, None)
}

/// A `DAV:error` body naming one precondition, with the resource it concerns (as
/// `no-uid-conflict` names the resource that already holds the UID).
pub fn error_body_with_href(ns: &str, condition: &str, href: Option<&str>) -> String {
    let mut w = XmlWriter::new();
    let (el, decl) = match prefix(ns) {
        Some("D") => (format!("D:{condition}"), None),
        _ => (format!("X:{condition}"), Some(ns)),
    };
    let mut attrs = vec![("xmlns:D", DAV)];
    if let Some(d) = decl {
        attrs.push(("xmlns:X", d));
    }
    w.open("D:error", &attrs);
    match href {
        Some(h) => {
            w.open(&el, &[]).leaf("D:href", h).close(&el);
        }
        None => {
            w.empty(&el, &[]);
        }
    }
    w.close("D:error");
    w.finish()
}

#[cfg(test)]
mod writer_tests {
    use super::*;
    use crate::xml;

    fn name(ns: &str, n: &str) -> PropName {
        (ns.to_string(), n.to_string())
    }

    #[test]
    fn a_written_multistatus_reads_back() {
        let mut m = MultistatusWriter::new();
        m.response(
            "/dav/u/c/",
            &[
                (name(DAV, "getetag"), Some(Prop::Text("\"e<1>\"".into()))),
                (
                    name(DAV, "resourcetype"),
                    Some(Prop::Marks(&["D:collection", "C:calendar"])),
                ),
                (
                    name(DAV, "supported-report-set"),
                    Some(Prop::Reports(&["C:calendar-query"])),
                ),
                (name("urn:other", "thing"), None),
            ],
        );
        m.status("/dav/u/c/gone.ics", "404 Not Found");
        m.sync_token("urn:x:1");
        let doc = m.finish();
        let ms = parse_multistatus(doc.as_bytes()).unwrap();
        assert_eq!(ms.sync_token.as_deref(), Some("urn:x:1"));
        assert_eq!(ms.responses[0].2.as_deref(), Some("\"e<1>\""));
        assert_eq!(ms.responses[1].1, 404);
        let root = xml::parse(&doc).unwrap();
        let r = root.child(DAV, "response").unwrap();
        let stats: Vec<_> = r.children_named(DAV, "propstat").collect();
        assert_eq!(stats.len(), 2);
        assert!(
            stats[1]
                .child(DAV, "prop")
                .unwrap()
                .child("urn:other", "thing")
                .is_some()
        );
        let rt = stats[0]
            .child(DAV, "prop")
            .unwrap()
            .child(DAV, "resourcetype")
            .unwrap();
        assert!(rt.child(CALDAV, "calendar").is_some());
    }

    #[test]
    fn error_bodies_name_the_condition() {
        for (ns, c) in [(DAV, "valid-sync-token"), (CALDAV, "valid-calendar-data")] {
            let e = xml::parse(&error_body(ns, c)).unwrap();
            assert!(e.is(DAV, "error"));
            assert!(e.child(ns, c).is_some());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FormatError, xml};

    /// What the tree reads of `body`: the reference the streaming reader is held to.
    fn by_tree(body: &[u8]) -> Result<Multistatus, FormatError> {
        let text = std::str::from_utf8(body).map_err(|e| FormatError::Xml(e.to_string()))?;
        let root = xml::parse(text)?;
        multistatus_of(&root).map_err(FormatError::Multistatus)
    }

    /// The streaming reader reads what the tree reads, refuses what it refuses and says
    /// the same: for documents whose propstats put their status last, hold a 404 before
    /// the 200, put children inside read texts, write entities and CDATA, and for each of
    /// them changed at every byte to each character that makes or breaks markup.
    #[test]
    fn the_streaming_reader_reads_what_the_tree_reads() {
        let docs = [
            r#"<d:multistatus xmlns:d="DAV:" xmlns:c="urn:ietf:params:xml:ns:caldav"><d:sync-token> t1 </d:sync-token><d:response><d:href> /a&amp;b </d:href><d:propstat><d:prop><d:getetag>"e0"</d:getetag></d:prop><d:status>HTTP/1.1 404 Not Found</d:status></d:propstat><d:propstat><d:prop><d:getetag> </d:getetag><c:calendar-data><![CDATA[BEGIN:X]]>&#10;</c:calendar-data></d:prop><d:prop><d:getetag>"no"</d:getetag></d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat><d:propstat><d:status>HTTP/1.1 200 OK</d:status><d:prop><d:getetag>"e2"</d:getetag></d:prop></d:propstat></d:response><d:sync-token>t2</d:sync-token></d:multistatus>"#,
            r#"<multistatus xmlns="DAV:"><response><href>/x<b>y</b>z</href><href>/second</href><status>HTTP/1.1 201 Created</status><status>junk</status></response><response><href><href>/in</href>/out</href></response><other><response><href>/not</href></response></other></multistatus>"#,
            r#"<D:multistatus xmlns:D="DAV:"><D:response><D:status>HTTP/1.1 200 OK</D:status></D:response><D:response><D:href>/b</D:href><D:status>bad</D:status></D:response></D:multistatus>"#,
        ];
        let mut refused = 0;
        for doc in docs {
            let good = parse_multistatus(doc.as_bytes());
            assert_eq!(good, by_tree(doc.as_bytes()), "{doc}");
            for i in 0..doc.len() {
                for b in [b'<', b'>', b'/', b'&', b'"', b' ', b'x', b'd', b'D'] {
                    let mut v = doc.as_bytes().to_vec();
                    v[i] = b;
                    let streamed = parse_multistatus(&v);
                    refused += usize::from(streamed.is_err());
                    assert_eq!(streamed, by_tree(&v), "{}", String::from_utf8_lossy(&v));
                }
            }
        }
        assert!(refused > 1000, "{refused}");
        let Ok(first) = parse_multistatus(docs[0].as_bytes()) else {
            panic!()
        };
        assert_eq!(first.sync_token.as_deref(), Some("t2"));
        assert_eq!(
            first.responses,
            vec![("/a&b".to_string(), 200, Some("\"e2\"".to_string()))]
        );
        assert_eq!(first.data, vec![(0, "BEGIN:X\n".to_string())]);
    }

    #[test]
    fn a_multistatus_is_refused_as_xml_or_as_not_a_multistatus() {
        assert!(matches!(
            parse_multistatus(b"garbage"),
            Err(FormatError::Xml(_))
        ));
        assert!(matches!(
            parse_multistatus(b"\xff<a/>"),
            Err(FormatError::Xml(_))
        ));
        let Err(FormatError::Multistatus(m)) = parse_multistatus(b"<html/>") else {
            panic!("<html/> is well-formed and not a multistatus")
        };
        assert!(m.contains("not DAV:multistatus"), "{m}");
        let ok = parse_multistatus(
            br#"<d:multistatus xmlns:d="DAV:"><d:response><d:href>/a</d:href><d:status>HTTP/1.1 404 Not Found</d:status></d:response></d:multistatus>"#,
        )
        .unwrap();
        assert_eq!(ok.responses, vec![("/a".to_string(), 404, None)]);
    }
}
