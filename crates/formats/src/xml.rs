//! XML for both sides: a small namespace-aware tree that WebDAV, EIMML and CMP bodies are
//! read into (parsed with quick-xml), a document writer that escapes attribute values
//! and text as quick-xml does, so no body is assembled by hand, and text escaping (also
//! used for HTML).
//! A caller that needs only a document's shape, or a few of its texts, walks it as it
//! streams past instead of building the tree.

use quick_xml::events::{BytesStart, Event};
use quick_xml::name::ResolveResult;
use quick_xml::reader::NsReader;

use super::FormatError;

/// One element: its namespace, local name, the prefix it was written with, attributes
/// (namespace, local name, value), children and text.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct El {
    /// Its namespace URI (empty for none).
    pub ns: String,
    /// Its local name.
    pub name: String,
    /// The prefix it was written with.
    pub prefix: String,
    /// Its attributes: namespace, local name, value.
    pub attrs: Vec<(String, String, String)>,
    /// Its child elements, in order.
    pub children: Vec<El>,
    /// Its text, the pieces between its children joined.
    pub text: String,
}

impl El {
    /// Whether it is element `name` of namespace `ns`.
    pub fn is(&self, ns: &str, name: &str) -> bool {
        self.ns == ns && self.name == name
    }
    /// Its first child `name` of namespace `ns`.
    pub fn child(&self, ns: &str, name: &str) -> Option<&El> {
        self.children.iter().find(|c| c.is(ns, name))
    }
    /// Its children `name` of namespace `ns`, in order.
    pub fn children_named<'a>(
        &'a self,
        ns: &'a str,
        name: &'a str,
    ) -> impl Iterator<Item = &'a El> + 'a {
        self.children.iter().filter(move |c| c.is(ns, name))
    }
    /// An attribute by local name, in no namespace or in `ns`.
    pub fn attr(&self, ns: Option<&str>, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(n, l, _)| l == name && ns.is_none_or(|ns| n == ns))
            .map(|(_, _, v)| v.as_str())
    }
}

/// The deepest nesting [`parse`] accepts. WebDAV, EIMML and CMP bodies are a few levels
/// deep; a limit keeps a hostile document from building a tree whose drop (recursive)
/// would overflow the stack.
pub const MAX_DEPTH: usize = 64;

/// What a walk over a document sees, in order: each element as it opens (its depth from
/// 1, namespace, and start tag, whose attributes the reader resolves) and closes, and the
/// text between (decoded, references resolved). [`parse`] builds a tree from it; a caller
/// that only needs to check a document's shape walks it without allocating one.
pub trait Visit {
    /// An element opens: its depth from 1, namespace and start tag.
    fn open(
        &mut self,
        depth: usize,
        ns: &[u8],
        e: &BytesStart<'_>,
        reader: &NsReader<&[u8]>,
    ) -> Result<(), String>;
    /// The element last opened closes.
    fn close(&mut self) -> Result<(), String> {
        Ok(())
    }
    /// Text inside the element open now.
    fn text(&mut self, _text: &str) -> Result<(), String> {
        Ok(())
    }
    /// Whether [`Visit::text`] is to be called for the text that comes next: a visitor
    /// that reads no text there spares the walk decoding it (text of a `&str` cannot fail
    /// to decode, so nothing is refused the less; references are checked either way).
    fn wants_text(&self) -> bool {
        true
    }
}

/// Walk a document, with the rules every body is read by: well-formed, one root, prefixes
/// declared, only the predefined entities, at most [`MAX_DEPTH`] levels.
pub fn walk(text: &str, v: &mut impl Visit) -> Result<(), FormatError> {
    walk_text(text, v).map_err(FormatError::Xml)
}

/// [`walk`], its message as the visitor or the reader gave it.
fn walk_text(text: &str, v: &mut impl Visit) -> Result<(), String> {
    let mut reader = NsReader::from_str(text);
    let mut depth = 0usize;
    let mut seen_root = false;
    loop {
        let ev = reader
            .read_event()
            .map_err(|e| format!("malformed XML: {e}"))?;
        match ev {
            Event::Start(ref e) | Event::Empty(ref e) => {
                if seen_root && depth == 0 {
                    return Err("malformed XML: content after the root element".into());
                }
                let (res, _) = reader.resolver().resolve_element(e.name());
                let ns: &[u8] = match res {
                    ResolveResult::Bound(n) => n.into_inner(),
                    ResolveResult::Unbound => b"",
                    ResolveResult::Unknown(p) => {
                        return Err(format!(
                            "malformed XML: undeclared prefix '{}'",
                            String::from_utf8_lossy(&p)
                        ));
                    }
                };
                let empty = matches!(ev, Event::Empty(_));
                if !empty && depth >= MAX_DEPTH {
                    return Err(format!(
                        "malformed XML: elements nested deeper than {MAX_DEPTH} levels"
                    ));
                }
                // Every attribute is well-formed and its value decodes, whatever the visitor
                // reads of them (namespace declarations are the reader's own business). A
                // value of a `&str` with no reference in it cannot fail to: only one with
                // a `&` is decoded here.
                let mut names = Names::default();
                for a in e.attributes().with_checks(false) {
                    let a = a.map_err(|e| format!("malformed XML attribute: {e}"))?;
                    names.first(a.key.into_inner())?;
                    if a.key.as_namespace_binding().is_none() && a.value.contains(&b'&') {
                        a.decoded_and_normalized_value(
                            quick_xml::XmlVersion::Implicit1_0,
                            reader.decoder(),
                        )
                        .map_err(|e| format!("malformed XML attribute value: {e}"))?;
                    }
                }
                seen_root = true;
                v.open(depth + 1, ns, e, &reader)?;
                if empty {
                    v.close()?;
                } else {
                    depth += 1;
                }
            }
            Event::End(_) => {
                depth = depth
                    .checked_sub(1)
                    .ok_or("malformed XML: unexpected end tag")?;
                v.close()?;
            }
            Event::Text(t) if depth > 0 && v.wants_text() => {
                v.text(&t.decode().map_err(|e| format!("malformed XML text: {e}"))?)?;
            }
            Event::CData(t) if depth > 0 && v.wants_text() => {
                v.text(
                    &t.decode()
                        .map_err(|e| format!("malformed XML CDATA: {e}"))?,
                )?;
            }
            Event::GeneralRef(r) if depth > 0 => {
                let ch = reference(&r)?;
                if v.wants_text() {
                    v.text(ch.encode_utf8(&mut [0u8; 4]))?;
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if depth > 0 {
        return Err("malformed XML: unclosed element".into());
    }
    if !seen_root {
        return Err("malformed XML: no root element".into());
    }
    Ok(())
}

/// The attribute names of one start tag, to refuse one written twice. quick-xml's own
/// check allocates its list of names for every element that has attributes; most have
/// one to three, so the first few are kept on the stack, the rest in a set made only for
/// a tag with more (a tag of thousands of names costs each one a lookup, not a scan).
#[derive(Default)]
struct Names<'a> {
    few: [&'a [u8]; 8],
    n: usize,
    more: Option<std::collections::HashSet<&'a [u8]>>,
}

impl<'a> Names<'a> {
    /// Takes `name` when it is the first of its name in the tag.
    fn first(&mut self, name: &'a [u8]) -> Result<(), String> {
        let kept = self.n.min(self.few.len());
        let again = self.more.as_ref().is_some_and(|m| m.contains(name));
        if again || self.few[..kept].contains(&name) {
            return Err(format!(
                "malformed XML attribute: duplicated attribute '{}'",
                String::from_utf8_lossy(name)
            ));
        }
        match self.few.get_mut(self.n) {
            Some(slot) => *slot = name,
            None => {
                self.more.get_or_insert_with(Default::default).insert(name);
            }
        }
        self.n += 1;
        Ok(())
    }
}

/// The character a general reference in text stands for: a character reference, or one
/// of the five predefined entities (its name's bytes compared as they are: a `&str`'s).
fn reference(r: &quick_xml::events::BytesRef<'_>) -> Result<char, String> {
    let ch = if r.is_char_ref() {
        r.resolve_char_ref().ok().flatten()
    } else {
        match &**r {
            b"amp" => Some('&'),
            b"lt" => Some('<'),
            b"gt" => Some('>'),
            b"quot" => Some('"'),
            b"apos" => Some('\''),
            other => {
                return Err(format!(
                    "malformed XML: unknown entity &{};",
                    String::from_utf8_lossy(other)
                ));
            }
        }
    };
    ch.ok_or_else(|| "malformed XML: bad character reference".into())
}

/// Builds the tree [`parse`] returns.
#[derive(Default)]
struct Tree {
    stack: Vec<El>,
    root: Option<El>,
}

impl Visit for Tree {
    fn open(
        &mut self,
        _depth: usize,
        ns: &[u8],
        e: &BytesStart<'_>,
        reader: &NsReader<&[u8]>,
    ) -> Result<(), String> {
        let name = e.name();
        let mut el = El {
            ns: String::from_utf8_lossy(ns).into_owned(),
            name: String::from_utf8_lossy(name.local_name().as_ref()).into_owned(),
            prefix: name
                .prefix()
                .map(|p| String::from_utf8_lossy(p.as_ref()).into_owned())
                .unwrap_or_default(),
            ..El::default()
        };
        for a in e.attributes() {
            let a = a.map_err(|e| format!("malformed XML attribute: {e}"))?;
            let key = a.key;
            if key.as_namespace_binding().is_some() {
                continue;
            }
            let (ans, local) = reader.resolver().resolve_attribute(key);
            let ans = match ans {
                ResolveResult::Bound(n) => String::from_utf8_lossy(n.as_ref()).into_owned(),
                _ => String::new(),
            };
            let v = a
                .decoded_and_normalized_value(quick_xml::XmlVersion::Implicit1_0, reader.decoder())
                .map_err(|e| format!("malformed XML attribute value: {e}"))?;
            el.attrs.push((
                ans,
                String::from_utf8_lossy(local.as_ref()).into_owned(),
                v.into_owned(),
            ));
        }
        self.stack.push(el);
        Ok(())
    }

    fn close(&mut self) -> Result<(), String> {
        let el = self
            .stack
            .pop()
            .ok_or("malformed XML: unexpected end tag")?;
        close(&mut self.stack, &mut self.root, el);
        Ok(())
    }

    fn text(&mut self, text: &str) -> Result<(), String> {
        if let Some(top) = self.stack.last_mut() {
            top.text.push_str(text);
        }
        Ok(())
    }
}

/// Parse a document into its root element. The message says what is wrong, for a 400.
pub fn parse(text: &str) -> Result<El, FormatError> {
    let mut tree = Tree::default();
    walk(text, &mut tree)?;
    tree.root
        .ok_or_else(|| FormatError::Xml("malformed XML: no root element".into()))
}

/// Refuse a document nested deeper than [`MAX_DEPTH`] without building anything, before it
/// goes to a parser that recurses per level (`atom_syndication`'s extensions). Other
/// mistakes are left to that parser.
pub fn check_depth(bytes: &[u8]) -> Result<(), FormatError> {
    let mut reader = quick_xml::Reader::from_reader(bytes);
    let mut buf = Vec::new();
    let mut depth = 0usize;
    loop {
        match reader.read_event_into(&mut buf) {
            Ok(Event::Start(_)) => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(FormatError::Xml(format!(
                        "malformed XML: elements nested deeper than {MAX_DEPTH} levels"
                    )));
                }
            }
            Ok(Event::End(_)) => depth = depth.saturating_sub(1),
            Ok(Event::Eof) | Err(_) => return Ok(()),
            Ok(_) => {}
        }
        buf.clear();
    }
}

fn close(stack: &mut [El], root: &mut Option<El>, el: El) {
    match stack.last_mut() {
        Some(parent) => parent.children.push(el),
        None => *root = Some(el),
    }
}

/// Escape text for element content or attribute values (XML and HTML alike).
pub fn esc(s: &str) -> std::borrow::Cow<'_, str> {
    quick_xml::escape::escape(s)
}

/// A document written element by element. Names are written as given (`D:prop`), so the
/// caller declares its prefixes on the root; text and attribute values are escaped as
/// quick-xml escapes them (all five of `<>&'"`). The bytes are what quick-xml's `Writer`
/// writes for the same events (a test holds them to it), pushed straight into the
/// document: building an event per element cost a CalDAV user about a twentieth of its
/// CPU on the query it writes per request.
pub struct XmlWriter {
    doc: String,
}

impl Default for XmlWriter {
    fn default() -> Self {
        XmlWriter::new()
    }
}

impl XmlWriter {
    /// A document that starts with `<?xml version="1.0" encoding="utf-8"?>`.
    pub fn new() -> XmlWriter {
        let mut w = XmlWriter::fragment();
        w.doc.push_str(r#"<?xml version="1.0" encoding="utf-8"?>"#);
        w
    }

    /// A fragment with no XML declaration.
    pub fn fragment() -> XmlWriter {
        XmlWriter {
            doc: String::with_capacity(1024),
        }
    }

    /// `<name` and each ` key="value"`, the tag left for the caller to end.
    fn tag(&mut self, name: &str, attrs: &[(&str, &str)]) {
        self.doc.push('<');
        self.doc.push_str(name);
        for (k, v) in attrs {
            self.doc.push(' ');
            self.doc.push_str(k);
            self.doc.push_str("=\"");
            self.doc.push_str(&esc(v));
            self.doc.push('"');
        }
    }

    /// `<name attrs...>`
    pub fn open(&mut self, name: &str, attrs: &[(&str, &str)]) -> &mut Self {
        self.tag(name, attrs);
        self.doc.push('>');
        self
    }

    /// `</name>`
    pub fn close(&mut self, name: &str) -> &mut Self {
        self.doc.push_str("</");
        self.doc.push_str(name);
        self.doc.push('>');
        self
    }

    /// `<name attrs.../>`
    pub fn empty(&mut self, name: &str, attrs: &[(&str, &str)]) -> &mut Self {
        self.tag(name, attrs);
        self.doc.push_str("/>");
        self
    }

    /// Escaped character data.
    pub fn text(&mut self, text: &str) -> &mut Self {
        self.doc.push_str(&esc(text));
        self
    }

    /// `<name>text</name>`, or `<name/>` for empty text.
    pub fn leaf(&mut self, name: &str, text: &str) -> &mut Self {
        if text.is_empty() {
            return self.empty(name, &[]);
        }
        self.open(name, &[]).text(text).close(name)
    }

    /// Close what is open; the document.
    pub fn finish(self) -> String {
        self.doc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dav::{CALDAV, DAV};

    #[test]
    fn namespaces_prefixes_attrs_and_text() {
        let el = parse(
            r#"<?xml version="1.0"?><D:propfind xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"><D:prop><D:getetag/><C:calendar-data/></D:prop><x a="1 &amp; 2">t &lt;3 &#65;</x></D:propfind>"#,
        )
        .unwrap();
        assert!(el.is(DAV, "propfind"));
        assert_eq!(el.prefix, "D");
        let prop = el.child(DAV, "prop").unwrap();
        assert!(prop.child(CALDAV, "calendar-data").is_some());
        let x = el.child("", "x").unwrap();
        assert_eq!(x.attr(None, "a"), Some("1 & 2"));
        assert_eq!(x.text, "t <3 A");
    }

    #[test]
    fn the_writer_escapes_and_reads_back() {
        let mut w = XmlWriter::new();
        w.open("D:a", &[("xmlns:D", "DAV:"), ("k", "1 & \"2\"")])
            .leaf("D:b", "x < y & z")
            .leaf("D:c", "")
            .close("D:a");
        let doc = w.finish();
        assert!(
            doc.starts_with(r#"<?xml version="1.0" encoding="utf-8"?>"#),
            "{doc}"
        );
        let el = parse(&doc).unwrap();
        assert_eq!(el.attr(None, "k"), Some("1 & \"2\""));
        assert_eq!(el.child(DAV, "b").unwrap().text, "x < y & z");
        assert!(el.child(DAV, "c").unwrap().children.is_empty());
    }

    #[test]
    fn the_writer_writes_what_quick_xml_writes() {
        use quick_xml::events::{BytesDecl, BytesEnd, BytesText};
        let texts = [
            "",
            "plain",
            "a < b & c > d",
            "it's \"quoted\"",
            "é ☃ \u{1F600}",
            "&amp;",
        ];
        let mut ours = XmlWriter::new();
        let mut theirs = quick_xml::Writer::new(Vec::new());
        let mut put = |e: Event<'_>| theirs.write_event(e).unwrap();
        put(Event::Decl(BytesDecl::new("1.0", Some("utf-8"), None)));
        for (i, t) in texts.iter().enumerate() {
            let attrs = [
                ("xmlns:D", "DAV:"),
                ("k", *t),
                ("D:n", texts[(i + 1) % texts.len()]),
            ];
            let attrs = &attrs[..i % 4];
            let tag = |name| {
                let mut b = BytesStart::new(name);
                attrs.iter().for_each(|a| b.push_attribute(*a));
                b
            };
            ours.open("D:a", attrs)
                .text(t)
                .empty("D:e", attrs)
                .leaf("D:l", t);
            ours.close("D:a");
            put(Event::Start(tag("D:a")));
            put(Event::Text(BytesText::new(t)));
            put(Event::Empty(tag("D:e")));
            match t.is_empty() {
                true => put(Event::Empty(BytesStart::new("D:l"))),
                false => {
                    put(Event::Start(BytesStart::new("D:l")));
                    put(Event::Text(BytesText::new(t)));
                    put(Event::End(BytesEnd::new("D:l")));
                }
            }
            put(Event::End(BytesEnd::new("D:a")));
        }
        assert_eq!(ours.finish().as_bytes(), theirs.into_inner().as_slice());
        let mut f = XmlWriter::fragment();
        f.empty("x", &[]);
        assert_eq!(f.finish(), "<x/>");
    }

    #[test]
    fn nesting_is_bounded() {
        let nest = |n: usize| format!("{}{}", "<a>".repeat(n), "</a>".repeat(n));
        assert!(parse(&nest(MAX_DEPTH)).is_ok());
        let FormatError::Xml(e) = parse(&nest(MAX_DEPTH + 1)).unwrap_err() else {
            panic!("too deep is an XML error")
        };
        assert!(e.contains("nested deeper"), "{e}");
        // What crashed the server before: 60,000 levels.
        assert!(parse(&nest(60_000)).is_err());
        assert!(check_depth(nest(MAX_DEPTH).as_bytes()).is_ok());
        assert!(check_depth(nest(60_000).as_bytes()).is_err());
    }

    #[test]
    fn malformed_documents_are_refused() {
        for bad in ["", "<a>", "<a></b>", "<a/><b/>", "<p:a/>", "<a>&bogus;</a>"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    /// A visitor that reads nothing: what the walk refuses, it refuses on its own.
    struct Blind;

    impl Visit for Blind {
        fn open(
            &mut self,
            _: usize,
            _: &[u8],
            _: &BytesStart<'_>,
            _: &NsReader<&[u8]>,
        ) -> Result<(), String> {
            Ok(())
        }
        fn wants_text(&self) -> bool {
            false
        }
    }

    /// A walk that reads no text (it decodes only what a reference is in) refuses
    /// exactly what a walk that decodes every text and attribute refuses: each byte of a
    /// document with references in its text and attributes, changed to each character
    /// that makes or breaks one.
    #[test]
    fn a_walk_that_reads_no_text_refuses_what_parse_refuses() {
        let doc = "<d:r xmlns:d='urn:d' a='x &amp; &#65;'><d:t b=\"&lt;q&gt;\">one &quot;two&quot; \
                   &#x263A; <![CDATA[<&>]]></d:t><e c='plain'/>tail &apos;</d:r>";
        let mut changed = 0;
        for i in 0..doc.len() {
            for b in [b'&', b';', b'#', b'x', b'<', b'\'', b'"', b'q'] {
                let mut v = doc.as_bytes().to_vec();
                v[i] = b;
                let Ok(t) = std::str::from_utf8(&v) else {
                    continue;
                };
                let blind = walk(t, &mut Blind);
                assert_eq!(blind.is_ok(), parse(t).is_ok(), "{t}: {blind:?}");
                changed += usize::from(blind.is_err());
            }
        }
        assert!(changed > 100, "{changed} refused");
    }

    /// A name given twice is refused with quick-xml's own words, among few attributes
    /// or many (where its check hashes them); distinct names, however many, are not; a
    /// walk and `parse` agree on each.
    #[test]
    fn a_repeated_attribute_name_is_refused_however_many_there_are() {
        let element = |names: &[String]| {
            let attrs: String = names.iter().map(|n| format!(" {n}='v'")).collect();
            format!("<r xmlns:p='urn:p'><e{attrs}/></r>")
        };
        let many: Vec<String> = (0..40).map(|i| format!("a{i}")).collect();
        let mut twice = many.clone();
        twice.push("a3".into());
        // Past the first eight names, which the walk keeps apart from the rest.
        let mut late_twice = many.clone();
        late_twice.push("a30".into());
        let few_twice = vec!["a".to_string(), "p:a".to_string(), "a".to_string()];
        for (names, ok) in [
            (vec!["a".to_string(), "p:a".to_string()], true),
            (many, true),
            (few_twice, false),
            (twice, false),
            (late_twice, false),
            (vec!["a".to_string(), "a".to_string()], false),
        ] {
            let doc = element(&names);
            let walked = walk(&doc, &mut Blind);
            assert_eq!(walked.is_ok(), ok, "{doc}: {walked:?}");
            assert_eq!(walked.is_ok(), parse(&doc).is_ok(), "{doc}");
            if let Err(e) = walked {
                assert!(e.to_string().contains("duplicated attribute"), "{e}");
            }
        }
    }
}
