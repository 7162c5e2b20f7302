//! What a CardDAV user reads of its address books: `addressbook-query` for one of its
//! contacts' names, `addressbook-multiget`, PROPFIND of the ETags, and `sync-collection`
//! (initial, then incremental; a refused token a full resync, both counted). Every
//! answer is parsed, every vCard in it read, and an answer that leaves out contacts the
//! user knows are there is a failure.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use rand::Rng;
use rand::rngs::Xoshiro256PlusPlus;

use crate::formats::dav::{CARDDAV, DAV, Multistatus, href_path};
use crate::formats::vcard;
use crate::formats::xml::XmlWriter;
use crate::protocol::Outcome;
use crate::protocol::contract::Done;
use crate::protocol::session::Exchange;
use crate::transport::{Conn, Response};

use super::{CarddavVu, pick_contact};
use crate::protocol::dav::{self, depth, multistatus_outcome, xml_ct};

/// What one sync-collection request came to.
enum Synced {
    /// An answer (or a failure), with its multistatus when it parsed.
    Answered(Outcome, Option<Multistatus>),
    /// The server no longer knows the token: the request's outcome, to count.
    Refused(Outcome),
}

impl Synced {
    fn parts(self) -> (Outcome, Option<Multistatus>) {
        match self {
            Synced::Answered(o, m) => (o, m),
            Synced::Refused(o) => (o, None),
        }
    }
}

/// The vCards in a multistatus that do not parse, named by the first one's href and
/// reason; `None` when all do.
fn bad_vcard(m: &Multistatus) -> Option<String> {
    let bad = m
        .data
        .iter()
        .filter_map(|(i, text)| vcard::parse(text).err().map(|e| (*i, e)))
        .collect::<Vec<_>>();
    let (i, e) = bad.first()?;
    let href = m.responses.get(*i).map_or("?", |r| r.0.as_str());
    Some(format!("{} vCard(s) do not parse; {href}: {e}", bad.len()))
}

/// The responses of a multistatus naming members of the collection at `path` (the
/// collection's own response left out).
pub(super) fn members<'a>(
    m: &'a Multistatus,
    path: &'a str,
) -> impl Iterator<Item = (String, u16)> + 'a {
    m.responses
        .iter()
        .map(|(h, s, _)| (href_path(h), *s))
        .filter(move |(h, _)| h.trim_end_matches('/') != path.trim_end_matches('/'))
}

impl CarddavVu {
    /// An `addressbook-query` for the contacts whose FN or EMAIL contains the family
    /// name of one of the user's contacts, asking for their ETags and vCards: the contact
    /// must be in the answer.
    pub(super) async fn query(
        &mut self,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
        bi: usize,
        expect: &[u16],
    ) -> Done {
        let Some(ci) = pick_contact(&self.books[bi], rng) else {
            return Done::Skipped;
        };
        let c = &self.books[bi].contacts[ci];
        let (wanted, name) = (c.path.clone(), c.family.clone());
        let mut w = XmlWriter::new();
        w.open(
            "CR:addressbook-query",
            &[("xmlns:D", DAV), ("xmlns:CR", CARDDAV)],
        )
        .open("D:prop", &[])
        .empty("D:getetag", &[])
        .empty("CR:address-data", &[])
        .close("D:prop")
        .open("CR:filter", &[("test", "anyof")]);
        for (prop, text) in [("FN", name.clone()), ("EMAIL", name.to_ascii_lowercase())] {
            w.open("CR:prop-filter", &[("name", prop)])
                .open(
                    "CR:text-match",
                    &[
                        ("collation", "i;unicode-casemap"),
                        ("match-type", "contains"),
                    ],
                )
                .text(&text)
                .close("CR:text-match")
                .close("CR:prop-filter");
        }
        w.close("CR:filter").close("CR:addressbook-query");
        let (o, m) = self
            .report(conn, bi, w.finish(), expect, "addressbook-query")
            .await;
        let Some(m) = m else { return o.into() };
        let found = m
            .responses
            .iter()
            .any(|(h, s, _)| *s == 200 && href_path(h) == wanted);
        Done::Sent(match found {
            true => o,
            false => o.body_error(format!(
                "REPORT addressbook-query for '{name}': {wanted} is not in the answer ({} found)",
                m.responses.len()
            )),
        })
    }

    /// An `addressbook-multiget` of `count` of the book's contacts, from a random one
    /// on: each must come back with its vCard.
    pub(super) async fn multiget(
        &mut self,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
        bi: usize,
        count: u32,
        expect: &[u16],
    ) -> Done {
        let known: Vec<String> = self.books[bi]
            .contacts
            .iter()
            .map(|c| c.path.clone())
            .collect();
        if known.is_empty() {
            return Done::Skipped;
        }
        let n = (count as usize).min(known.len());
        let start = (rng.next_u64() % known.len() as u64) as usize;
        let asked: Vec<&str> = (0..n)
            .map(|i| known[(start + i) % known.len()].as_str())
            .collect();
        let (o, m) = self
            .report(
                conn,
                bi,
                multiget_body(&asked),
                expect,
                "addressbook-multiget",
            )
            .await;
        let Some(m) = m else { return o.into() };
        let with_data: Vec<String> = m
            .data
            .iter()
            .filter_map(|(i, _)| m.responses.get(*i))
            .filter(|(_, s, _)| *s == 200)
            .map(|(h, _, _)| href_path(h))
            .collect();
        let missing = asked
            .iter()
            .filter(|a| !with_data.iter().any(|h| h == *a))
            .count();
        Done::Sent(match missing {
            0 => o,
            _ => o.body_error(format!(
                "REPORT addressbook-multiget: {missing} of the {n} contacts asked for came without their vCard"
            )),
        })
    }

    /// PROPFIND Depth 1 of book `bi` for its members' ETags: a listing with no member
    /// while the user holds contacts there is a failure.
    pub(super) async fn propfind(
        &mut self,
        conn: &mut Conn,
        bi: usize,
        expect: &[u16],
    ) -> (Outcome, Option<Multistatus>) {
        let path = self.books[bi].path.clone();
        let mut w = XmlWriter::new();
        w.open("D:propfind", &[("xmlns:D", DAV)])
            .open("D:prop", &[])
            .empty("D:getetag", &[])
            .empty("D:resourcetype", &[])
            .close("D:prop")
            .close("D:propfind");
        let r = match self
            .s
            .send_to(
                conn,
                "PROPFIND",
                &path,
                &[xml_ct(), depth("1")],
                Bytes::from(w.finish()),
            )
            .await
        {
            Exchange::Answer(r) => r,
            Exchange::Failed(o) => return (o, None),
        };
        let what = format!("PROPFIND {path}");
        let (o, m) = multistatus_outcome(&r, Outcome::of(&r, expect, &what), &what);
        let Some(m) = m else { return (o, None) };
        self.learn_etags(bi, &m);
        (self.none_missing(bi, &m, o, &what), Some(m))
    }

    /// A `sync-collection` from the book's token; a token the server no longer knows is
    /// started over from scratch, both requests counted, as `sync_collection_resync`.
    /// The answer's multistatus comes with the outcome when it parsed.
    pub(super) async fn sync_collection(
        &mut self,
        conn: &mut Conn,
        bi: usize,
        expect: &[u16],
    ) -> (Outcome, Option<Multistatus>) {
        let token = self.books[bi].sync_token.clone().unwrap_or_default();
        match self.sync(conn, bi, &token, expect).await {
            Synced::Answered(o, m) => (o, m),
            Synced::Refused(refused) => {
                // From no token: never refused for it.
                let (mut again, m) = self.sync(conn, bi, "", expect).await.parts();
                again.add_cost(&refused);
                again.label = Some(self.class.params.label_resync);
                (again, m)
            }
        }
    }

    /// One sync-collection request from `token`. A sync from scratch that lists none of
    /// the contacts the user holds is a failure.
    async fn sync(&mut self, conn: &mut Conn, bi: usize, token: &str, expect: &[u16]) -> Synced {
        let (r, path) = match self.send_report(conn, bi, dav::sync_body(token)).await {
            Ok(x) => x,
            Err(o) => return Synced::Answered(o, None),
        };
        let what = format!("REPORT sync-collection {path}");
        if dav::refuses_token(&r, token) {
            return Synced::Refused(Outcome::of(&r, expect, &what));
        }
        let (o, m) = multistatus_outcome(&r, Outcome::of(&r, expect, &what), &what);
        let Some(m) = m else {
            return Synced::Answered(o, None);
        };
        let Some(t) = m.sync_token.clone() else {
            let o = o.body_error(format!("{what}: no sync-token in the answer"));
            return Synced::Answered(o, Some(m));
        };
        let o = match token.is_empty() {
            true => self.none_missing(bi, &m, o, &what),
            false => o,
        };
        let gone: HashSet<String> = m
            .responses
            .iter()
            .filter(|(_, st, _)| *st == 404)
            .map(|(h, _, _)| href_path(h))
            .collect();
        if !gone.is_empty() {
            self.books[bi].contacts.retain(|c| !gone.contains(&c.path));
        }
        self.learn_etags(bi, &m);
        self.books[bi].sync_token = Some(t);
        Synced::Answered(o, Some(m))
    }

    /// The ETags a listing gives of the user's contacts.
    fn learn_etags(&mut self, bi: usize, m: &Multistatus) {
        let book = &mut self.books[bi];
        // By path, once: a listing of a large book against its contacts one by one
        // would cost their product.
        let at: HashMap<&str, usize> = book
            .contacts
            .iter()
            .enumerate()
            .map(|(i, c)| (c.path.as_str(), i))
            .collect();
        let mut learnt = Vec::new();
        for (href, st, etag) in &m.responses {
            if let (200, Some(e)) = (*st, etag)
                && let Some(&i) = at.get(href_path(href).as_str())
            {
                learnt.push((i, e.clone()));
            }
        }
        for (i, e) in learnt {
            book.contacts[i].etag = Some(e);
        }
    }

    /// `o`, or a failure when a full listing of book `bi` names none of the contacts
    /// the user put there and holds (a server that answers empty where items exist).
    fn none_missing(&self, bi: usize, m: &Multistatus, o: Outcome, what: &str) -> Outcome {
        let book = &self.books[bi];
        if book.contacts.is_empty() || !o.is_ok() {
            return o;
        }
        let held: HashSet<&str> = book.contacts.iter().map(|c| c.path.as_str()).collect();
        let listed = members(m, &book.path)
            .filter(|(h, s)| *s == 200 && held.contains(h.as_str()))
            .count();
        match listed {
            0 => o.body_error(format!(
                "{what}: none of the {} contacts the user holds is listed",
                book.contacts.len()
            )),
            _ => o,
        }
    }

    /// Send a REPORT with `body` to book `bi`: its answer and path, or the failure.
    async fn send_report(
        &self,
        conn: &mut Conn,
        bi: usize,
        body: String,
    ) -> Result<(Response, String), Outcome> {
        let path = self.books[bi].path.clone();
        match self
            .s
            .send_to(
                conn,
                "REPORT",
                &path,
                &[xml_ct(), depth("1")],
                Bytes::from(body),
            )
            .await
        {
            Exchange::Answer(r) => Ok((r, path)),
            Exchange::Failed(o) => Err(o),
        }
    }

    /// A REPORT whose answer carries vCards: the outcome (a body failure when one does
    /// not parse) and the multistatus.
    async fn report(
        &mut self,
        conn: &mut Conn,
        bi: usize,
        body: String,
        expect: &[u16],
        kind: &str,
    ) -> (Outcome, Option<Multistatus>) {
        let (r, path) = match self.send_report(conn, bi, body).await {
            Ok(x) => x,
            Err(o) => return (o, None),
        };
        let what = format!("REPORT {kind} {path}");
        let (o, m) = multistatus_outcome(&r, Outcome::of(&r, expect, &what), &what);
        let Some(m) = m else { return (o, None) };
        match bad_vcard(&m) {
            Some(why) => (o.body_error(format!("{what}: {why}")), Some(m)),
            None => {
                self.learn_etags(bi, &m);
                (o, Some(m))
            }
        }
    }
}

/// An `addressbook-multiget` asking for the ETag and vCard of each of `hrefs`.
pub(super) fn multiget_body(hrefs: &[&str]) -> String {
    let mut w = XmlWriter::new();
    w.open(
        "CR:addressbook-multiget",
        &[("xmlns:D", DAV), ("xmlns:CR", CARDDAV)],
    )
    .open("D:prop", &[])
    .empty("D:getetag", &[])
    .empty("CR:address-data", &[])
    .close("D:prop");
    for h in hrefs {
        w.leaf("D:href", h);
    }
    w.close("CR:addressbook-multiget");
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::dav::parse_multistatus;

    #[test]
    fn a_vcard_that_does_not_parse_is_named_by_its_href() {
        let good = "BEGIN:VCARD\r\nVERSION:3.0\r\nUID:a\r\nFN:A B\r\nN:B;A;;;\r\nEND:VCARD\r\n";
        let doc = |data: &str| {
            format!(
                r#"<d:multistatus xmlns:d="DAV:" xmlns:r="urn:ietf:params:xml:ns:carddav"><d:response><d:href>/b/a.vcf</d:href><d:propstat><d:prop><d:getetag>"1"</d:getetag><r:address-data>{data}</r:address-data></d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response></d:multistatus>"#
            )
        };
        let m = parse_multistatus(doc(good).as_bytes()).unwrap();
        assert_eq!(m.data.len(), 1, "address-data is read as calendar-data is");
        assert_eq!(bad_vcard(&m), None);
        let m = parse_multistatus(doc("BEGIN:VCARD\r\nEND:VCARD\r\n").as_bytes()).unwrap();
        let why = bad_vcard(&m).unwrap();
        assert!(
            why.starts_with("1 vCard(s) do not parse; /b/a.vcf: "),
            "{why}"
        );
    }

    #[test]
    fn a_listing_names_its_members_not_the_collection() {
        let m = parse_multistatus(br#"<multistatus xmlns="DAV:"><response><href>http://h/b/</href><status>HTTP/1.1 200 OK</status></response><response><href>/b/x.vcf</href><status>HTTP/1.1 200 OK</status></response></multistatus>"#).unwrap();
        let got: Vec<(String, u16)> = members(&m, "/b").collect();
        assert_eq!(got, [("/b/x.vcf".to_string(), 200)]);
    }
}
