//! CardDAV (RFC 6352) address books beside the calendars: a collection made by an
//! extended MKCOL whose resource type names `addressbook` is one (a mark among its
//! properties that no client can set or remove), its members are contacts, vCard 3.0 or
//! 4.0 checked as they are PUT, and it answers `addressbook-query` (prop-filters on FN,
//! EMAIL and UID with the three collations RFC 6352 names), `addressbook-multiget` and
//! `sync-collection` as a calendar answers its own.

use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;

use crate::http::*;
use crate::model::{self, ItemData, StoredCard};
use crate::store::CollectionInfo;
use loadmix_formats::dav::{CARDDAV, DAV, MultistatusWriter};
use loadmix_formats::xml::El;

use super::{Dav, PropReq, multistatus};

/// The property that marks a collection an address book: in CardDAV's namespace, which
/// no PROPPATCH may write (`super::writable`), so only its MKCOL makes one.
pub(super) const MARK: &str = "{urn:ietf:params:xml:ns:carddav}addressbook";

/// Whether a collection is an address book.
pub(super) fn is_book(c: &CollectionInfo) -> bool {
    c.props.contains_key(MARK)
}

/// Prop-filters one query may hold, and text-matches one prop-filter may: the XML
/// reader bounds the document, these bound the work per contact.
const MAX_PROP_FILTERS: usize = 32;
const MAX_TEXT_MATCHES: usize = 8;
/// The longest text a text-match may look for, in bytes.
const MAX_MATCH_TEXT: usize = 1024;

/// How a text-match compares (RFC 4790's collations, as RFC 6352 §8.3 names them).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Collation {
    /// `i;unicode-casemap`, CardDAV's default: compared after lowercasing every
    /// character (Unicode's simple case folding, near enough RFC 5051's titlecase and
    /// decomposition for the names and addresses a query looks for).
    UnicodeCasemap,
    /// `i;ascii-casemap`: ASCII letters compared without case.
    AsciiCasemap,
    /// `i;octet`: the bytes as they are.
    Octet,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum MatchType {
    Equals,
    Contains,
    StartsWith,
    EndsWith,
}

#[derive(Debug, Clone, PartialEq)]
struct TextMatch {
    text: String,
    collation: Collation,
    how: MatchType,
    negate: bool,
}

/// The contact properties a query can name: the ones stored beside the vCard.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Field {
    FullName,
    Email,
    Uid,
}

#[derive(Debug, Clone, PartialEq)]
struct PropFilter {
    field: Field,
    /// `is-not-defined`: the property must be absent.
    absent: bool,
    all: bool,
    matches: Vec<TextMatch>,
}

/// An `addressbook-query`'s filter: its prop-filters, any or all of which must hold.
#[derive(Debug, Clone, PartialEq)]
struct Filter {
    all: bool,
    props: Vec<PropFilter>,
}

/// Why a filter is refused: a 400 in words, or a 403 with CardDAV's precondition.
#[derive(Debug, PartialEq)]
enum Refused {
    Bad(String),
    Unsupported(&'static str),
}

fn test_is_all(el: &El) -> Result<bool, Refused> {
    match el.attr(None, "test").map(str::trim) {
        None | Some("anyof") => Ok(false),
        Some("allof") => Ok(true),
        Some(t) => Err(Refused::Bad(format!("test=\"{t}\": give anyof or allof"))),
    }
}

fn text_match(el: &El) -> Result<TextMatch, Refused> {
    if el.text.len() > MAX_MATCH_TEXT {
        return Err(Refused::Bad(format!(
            "a text-match of more than {MAX_MATCH_TEXT} bytes"
        )));
    }
    let collation = match el.attr(None, "collation").map(str::trim) {
        None | Some("i;unicode-casemap") => Collation::UnicodeCasemap,
        Some("i;ascii-casemap") => Collation::AsciiCasemap,
        Some("i;octet") => Collation::Octet,
        Some(_) => return Err(Refused::Unsupported("supported-collation")),
    };
    let how = match el.attr(None, "match-type").map(str::trim) {
        None | Some("contains") => MatchType::Contains,
        Some("equals") => MatchType::Equals,
        Some("starts-with") => MatchType::StartsWith,
        Some("ends-with") => MatchType::EndsWith,
        Some(m) => return Err(Refused::Bad(format!("match-type=\"{m}\""))),
    };
    let negate = match el.attr(None, "negate-condition").map(str::trim) {
        None | Some("no") => false,
        Some("yes") => true,
        Some(n) => return Err(Refused::Bad(format!("negate-condition=\"{n}\""))),
    };
    Ok(TextMatch {
        text: fold(&el.text, collation),
        collation,
        how,
        negate,
    })
}

fn prop_filter(el: &El) -> Result<PropFilter, Refused> {
    let field = match el
        .attr(None, "name")
        .map(|n| n.trim().to_ascii_uppercase())
        .as_deref()
    {
        Some("FN") => Field::FullName,
        Some("EMAIL") => Field::Email,
        Some("UID") => Field::Uid,
        Some(_) => return Err(Refused::Unsupported("supported-filter")),
        None => return Err(Refused::Bad("a prop-filter without a name".into())),
    };
    let mut f = PropFilter {
        field,
        absent: false,
        all: test_is_all(el)?,
        matches: Vec::new(),
    };
    for c in &el.children {
        if c.ns != CARDDAV {
            continue;
        }
        match c.name.as_str() {
            "is-not-defined" => f.absent = true,
            "text-match" if f.matches.len() < MAX_TEXT_MATCHES => f.matches.push(text_match(c)?),
            "text-match" => {
                return Err(Refused::Bad(format!(
                    "more than {MAX_TEXT_MATCHES} text-matches in a prop-filter"
                )));
            }
            // Parameters are not stored: a filter on one cannot be answered truly.
            "param-filter" => return Err(Refused::Unsupported("supported-filter")),
            _ => {}
        }
    }
    Ok(f)
}

/// The query's filter; RFC 6352 requires one.
fn parse_filter(root: &El) -> Result<Filter, Refused> {
    let Some(f) = root.child(CARDDAV, "filter") else {
        return Err(Refused::Bad("an addressbook-query needs a filter".into()));
    };
    let props: Vec<&El> = f.children_named(CARDDAV, "prop-filter").collect();
    if props.len() > MAX_PROP_FILTERS {
        return Err(Refused::Bad(format!(
            "more than {MAX_PROP_FILTERS} prop-filters"
        )));
    }
    Ok(Filter {
        all: test_is_all(f)?,
        props: props
            .into_iter()
            .map(prop_filter)
            .collect::<Result<_, _>>()?,
    })
}

fn fold(s: &str, c: Collation) -> String {
    match c {
        Collation::UnicodeCasemap => s.to_lowercase(),
        Collation::AsciiCasemap => s.to_ascii_lowercase(),
        Collation::Octet => s.to_string(),
    }
}

impl TextMatch {
    fn holds(&self, value: &str) -> bool {
        let v = fold(value, self.collation);
        let t = self.text.as_str();
        let found = match self.how {
            MatchType::Equals => v == t,
            MatchType::Contains => v.contains(t),
            MatchType::StartsWith => v.starts_with(t),
            MatchType::EndsWith => v.ends_with(t),
        };
        found != self.negate
    }
}

impl PropFilter {
    /// RFC 6352 §10.5.1: a prop-filter with no test holds when the property is there;
    /// otherwise any (or all) of its text-matches must hold for some value of it.
    fn holds(&self, card: &StoredCard, uid: &str) -> bool {
        let values: Vec<&str> = match self.field {
            Field::FullName => vec![card.full_name.as_str()],
            Field::Email => card.emails.iter().map(String::as_str).collect(),
            Field::Uid => vec![uid],
        };
        if self.absent {
            return values.is_empty();
        }
        if values.is_empty() {
            return false;
        }
        if self.matches.is_empty() {
            return true;
        }
        let each = |m: &TextMatch| values.iter().any(|v| m.holds(v));
        match self.all {
            true => self.matches.iter().all(each),
            false => self.matches.iter().any(each),
        }
    }
}

impl Filter {
    fn holds(&self, card: &StoredCard, uid: &str) -> bool {
        // No prop-filter: every contact.
        if self.props.is_empty() {
            return true;
        }
        match self.all {
            true => self.props.iter().all(|p| p.holds(card, uid)),
            false => self.props.iter().any(|p| p.holds(card, uid)),
        }
    }
}

/// `limit/nresults`: the most contacts the client wants, if it says.
fn nresults(root: &El) -> Result<Option<usize>, Refused> {
    let Some(n) = root
        .child(CARDDAV, "limit")
        .and_then(|l| l.child(CARDDAV, "nresults"))
    else {
        return Ok(None);
    };
    n.text
        .trim()
        .parse()
        .map(Some)
        .map_err(|_| Refused::Bad(format!("nresults '{}' is no count", n.text.trim())))
}

impl Dav<'_> {
    /// A PUT's body as a contact: its UID and data, or the answer that refuses it (a
    /// media type that is not `text/vcard`, text that is not one vCard, with the
    /// parser's reason in `x-loadmix-reason`).
    pub(super) fn contact_data(&self, body: &[u8]) -> Result<(String, ItemData), Response> {
        let mt = media_type(self.headers);
        if !mt.is_empty() && mt != "text/vcard" && mt != "text/x-vcard" {
            return Err(dav_error(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                CARDDAV,
                "supported-address-data",
            ));
        }
        let refused = |why: &str| {
            let mut r = dav_error(StatusCode::BAD_REQUEST, CARDDAV, "valid-address-data");
            if let Ok(v) = HeaderValue::from_str(&why.replace(['\r', '\n'], " ")) {
                r.headers_mut().insert("x-loadmix-reason", v);
            }
            r
        };
        let t = std::str::from_utf8(body).map_err(|_| refused("not UTF-8"))?;
        model::parse_vcard(t).map_err(|m| refused(&m))
    }

    /// `addressbook-query` on address book `c`: the contacts its filter selects, with
    /// the properties asked for, at most `nresults` of them (then a 507 for the book,
    /// as RFC 6352 §8.6.1 asks).
    pub(super) fn addressbook_query(
        &self,
        user: &str,
        book: &str,
        c: &CollectionInfo,
        root: &El,
        req: &PropReq,
    ) -> Response {
        let parsed = parse_filter(root).and_then(|f| Ok((f, nresults(root)?)));
        let (filter, limit) = match parsed {
            Ok(x) => x,
            Err(Refused::Bad(m)) => return text(StatusCode::BAD_REQUEST, &m),
            Err(Refused::Unsupported(condition)) => {
                return dav_error(StatusCode::FORBIDDEN, CARDDAV, condition);
            }
        };
        let items = match self.st.store.items(&ckey(user, book), None) {
            Ok(Some((_, items))) => items,
            Ok(None) => Vec::new(),
            Err(e) => return store_error(e),
        };
        let mut out = MultistatusWriter::new();
        let mut given = 0usize;
        for item in &items {
            let Some(card) = item.data.as_ref().and_then(|d| d.card.as_ref()) else {
                continue;
            };
            if !filter.holds(card, &item.uid) {
                continue;
            }
            if limit.is_some_and(|n| given >= n) {
                out.status(&self.cal_href(user, book), "507 Insufficient Storage");
                break;
            }
            let props = Self::props(req, &[], |ns, n| self.item_prop(c, item, ns, n));
            out.response(&self.item_href(user, book, &item.name), &props);
            given += 1;
        }
        multistatus(out)
    }
}

/// Whether a report's root is CardDAV's own, which only an address book answers (and
/// CalDAV's only a calendar); `sync-collection` is either's.
pub(super) fn report_fits(root: &El, book: bool) -> bool {
    match (root.ns.as_str(), book) {
        (CARDDAV, b) => b,
        (DAV, _) => true,
        (_, b) => !b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(filter: &str) -> Result<Filter, Refused> {
        let doc = format!(
            r#"<C:addressbook-query xmlns:C="urn:ietf:params:xml:ns:carddav" xmlns:D="DAV:"><D:prop><D:getetag/></D:prop>{filter}</C:addressbook-query>"#
        );
        parse_filter(&loadmix_formats::xml::parse(&doc).unwrap())
    }

    fn card(name: &str, emails: &[&str]) -> StoredCard {
        StoredCard {
            text: String::new(),
            full_name: name.into(),
            emails: emails.iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn a_query_matches_names_and_addresses_by_its_collation() {
        let f = parse(r#"<C:filter test="anyof"><C:prop-filter name="FN"><C:text-match match-type="contains">ÉLISE</C:text-match></C:prop-filter><C:prop-filter name="EMAIL"><C:text-match collation="i;ascii-casemap" match-type="starts-with">BOB@</C:text-match></C:prop-filter></C:filter>"#).unwrap();
        assert!(f.holds(&card("Marie élise Dupont", &[]), "u"));
        assert!(f.holds(&card("Robert", &["bob@example.com"]), "u"));
        assert!(!f.holds(&card("Robert", &["rob@example.com"]), "u"));
        let all = parse(r#"<C:filter test="allof"><C:prop-filter name="FN"><C:text-match collation="i;octet" match-type="equals">Ann Lee</C:text-match></C:prop-filter><C:prop-filter name="EMAIL"><C:is-not-defined/></C:prop-filter></C:filter>"#).unwrap();
        assert!(all.holds(&card("Ann Lee", &[]), "u"));
        assert!(!all.holds(&card("ann lee", &[]), "u"), "i;octet keeps case");
        assert!(!all.holds(&card("Ann Lee", &["a@b"]), "u"));
        let not = parse(r#"<C:filter><C:prop-filter name="UID"><C:text-match negate-condition="yes" match-type="ends-with">-1</C:text-match></C:prop-filter></C:filter>"#).unwrap();
        assert!(!not.holds(&card("x", &[]), "lm-1"));
        assert!(not.holds(&card("x", &[]), "lm-2"));
    }

    #[test]
    fn what_cannot_be_answered_truly_is_refused_with_its_precondition() {
        assert_eq!(
            parse(r#"<C:filter><C:prop-filter name="TEL"/></C:filter>"#),
            Err(Refused::Unsupported("supported-filter"))
        );
        assert_eq!(
            parse(
                r#"<C:filter><C:prop-filter name="EMAIL"><C:param-filter name="TYPE"/></C:prop-filter></C:filter>"#
            ),
            Err(Refused::Unsupported("supported-filter"))
        );
        assert_eq!(
            parse(
                r#"<C:filter><C:prop-filter name="FN"><C:text-match collation="i;basic">a</C:text-match></C:prop-filter></C:filter>"#
            ),
            Err(Refused::Unsupported("supported-collation"))
        );
        assert!(matches!(parse(""), Err(Refused::Bad(_))));
        assert!(matches!(
            parse(r#"<C:filter test="some"/>"#),
            Err(Refused::Bad(_))
        ));
        let long = "a".repeat(MAX_MATCH_TEXT + 1);
        assert!(matches!(
            parse(&format!(
                r#"<C:filter><C:prop-filter name="FN"><C:text-match>{long}</C:text-match></C:prop-filter></C:filter>"#
            )),
            Err(Refused::Bad(_))
        ));
        let many = r#"<C:prop-filter name="FN"/>"#.repeat(MAX_PROP_FILTERS + 1);
        assert!(matches!(
            parse(&format!("<C:filter>{many}</C:filter>")),
            Err(Refused::Bad(_))
        ));
    }
}
