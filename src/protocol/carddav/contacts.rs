//! A CardDAV user's address books and contacts: an address book made (extended MKCOL,
//! RFC 5689), contacts put where nothing is (`If-None-Match`), rewritten on the ETag the
//! user knows (`If-Match`), read and checked as vCards, and deleted.

use bytes::Bytes;
use hyper::header::{CONTENT_TYPE, HeaderName, HeaderValue, IF_MATCH, IF_NONE_MATCH};
use rand::rngs::Xoshiro256PlusPlus;

use crate::formats::dav::{CARDDAV, DAV};
use crate::formats::vcard;
use crate::formats::xml::XmlWriter;
use crate::protocol::contract::Done;
use crate::protocol::dav;
use crate::protocol::session::Exchange;
use crate::protocol::{Outcome, data};
use crate::transport::{Conn, ErrorClass, Response};
use crate::workload::protocols::ContactShape;

use super::{Book, CarddavVu, Contact, pick_contact};
use crate::protocol::dav::{etag_of, xml_ct};

impl CarddavVu {
    /// MKCOL an address book under the home, named for the user.
    pub(super) async fn mkcol(
        &mut self,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
        expect: &[u16],
    ) -> Outcome {
        let Some(home) = &self.home else {
            return Outcome::failed(
                ErrorClass::Body,
                "no address book home (discovery failed)".into(),
            );
        };
        let path = format!("{home}{}/", data::uid(rng, &self.ids.run_id));
        let name = format!("loadmix {} {}", self.s.user, data::string(rng, 8));
        let mut w = XmlWriter::new();
        w.open("D:mkcol", &[("xmlns:D", DAV), ("xmlns:CR", CARDDAV)])
            .open("D:set", &[])
            .open("D:prop", &[])
            .open("D:resourcetype", &[])
            .empty("D:collection", &[])
            .empty("CR:addressbook", &[])
            .close("D:resourcetype")
            .leaf("D:displayname", &name)
            .close("D:prop")
            .close("D:set")
            .close("D:mkcol");
        let r = match self
            .s
            .send_to(conn, "MKCOL", &path, &[xml_ct()], Bytes::from(w.finish()))
            .await
        {
            Exchange::Answer(r) => r,
            Exchange::Failed(o) => return o,
        };
        let o = Outcome::of(&r, expect, &format!("MKCOL {path}"));
        if o.is_ok() {
            self.books.push(Book {
                path,
                contacts: Vec::new(),
                sync_token: None,
            });
        }
        o
    }

    /// A new contact of `shape` in book `bi`, put only where nothing is.
    pub(super) async fn new_contact(
        &mut self,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
        bi: usize,
        shape: &ContactShape,
        expect: &[u16],
    ) -> Outcome {
        let uid = data::uid(rng, &self.ids.run_id);
        let path = format!("{}{uid}.vcf", self.books[bi].path);
        let (body, family) = data::vcard_contact(rng, &uid, shape);
        // Never overwrite a resource loadmix did not create.
        let cond = (IF_NONE_MATCH, HeaderValue::from_static("*"));
        let (o, etag) = self.send_put(conn, &path, body, Some(cond), expect).await;
        if o.is_ok() {
            self.books[bi].contacts.push(Contact {
                path,
                uid,
                family,
                etag,
            });
        }
        o
    }

    /// `n` contacts of `shape` put in book `bi` in set-up, several at once
    /// (`dav::fill`); stops at the first failure, and the rest are not sent.
    pub(super) async fn fill(
        &mut self,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
        bi: usize,
        shape: &ContactShape,
        n: u64,
    ) -> Result<(), String> {
        let (run_id, book) = (&self.ids.run_id, &self.books[bi].path);
        let make = || {
            let uid = data::uid(rng, run_id);
            let path = format!("{book}{uid}.vcf");
            let (body, family) = data::vcard_contact(rng, &uid, shape);
            (path.clone(), body, (path, uid, family))
        };
        let filling = dav::Filling {
            content_type: "text/vcard; charset=utf-8",
            what: "initial contact",
        };
        let kept = dav::fill(&self.s, conn, n, &filling, make).await?;
        let contacts = kept.into_iter().map(|((path, uid, family), etag)| Contact {
            path,
            uid,
            family,
            etag,
        });
        self.books[bi].contacts.extend(contacts);
        Ok(())
    }

    /// One of the user's contacts rewritten in `shape` (a new name too), on the
    /// condition that it is as last seen (`If-Match` its ETag).
    pub(super) async fn update_contact(
        &mut self,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
        bi: usize,
        shape: &ContactShape,
        expect: &[u16],
    ) -> Done {
        let Some(ci) = pick_contact(&self.books[bi], rng) else {
            return Done::Skipped;
        };
        let c = &self.books[bi].contacts[ci];
        let (path, uid) = (c.path.clone(), c.uid.clone());
        let cond = c
            .etag
            .as_deref()
            .and_then(|t| HeaderValue::from_str(t).ok())
            .map(|v| (IF_MATCH, v));
        let (body, family) = data::vcard_contact(rng, &uid, shape);
        let (o, etag) = self.send_put(conn, &path, body, cond, expect).await;
        if o.is_ok() {
            let c = &mut self.books[bi].contacts[ci];
            (c.family, c.etag) = (family, etag);
        }
        o.into()
    }

    /// PUT a vCard `body` at `path` under a precondition: the outcome, and the ETag the
    /// server gave (a server that changed what it stored gives none: the next update
    /// then goes without `If-Match`, as a client's would after reading it back).
    async fn send_put(
        &self,
        conn: &mut Conn,
        path: &str,
        body: String,
        condition: Option<(HeaderName, HeaderValue)>,
        expect: &[u16],
    ) -> (Outcome, Option<String>) {
        let mut headers = vec![(
            CONTENT_TYPE,
            HeaderValue::from_static("text/vcard; charset=utf-8"),
        )];
        headers.extend(condition);
        match self
            .s
            .send_to(conn, "PUT", path, &headers, Bytes::from(body))
            .await
        {
            Exchange::Answer(r) => (Outcome::of(&r, expect, &format!("PUT {path}")), etag_of(&r)),
            Exchange::Failed(o) => (o, None),
        }
    }

    /// Send `method` with no body to a random contact of book `bi`: the contact's index,
    /// the answer and its outcome; `Err` with what to report when nothing came back (or
    /// the book has no contact: skipped).
    async fn send_to_contact(
        &mut self,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
        bi: usize,
        method: &str,
        expect: &[u16],
    ) -> Result<(usize, Response, Outcome), Done> {
        let Some(ci) = pick_contact(&self.books[bi], rng) else {
            return Err(Done::Skipped);
        };
        let path = &self.books[bi].contacts[ci].path;
        match self.s.send_to(conn, method, path, &[], Bytes::new()).await {
            Exchange::Answer(r) => {
                let o = Outcome::of(&r, expect, &format!("{method} {path}"));
                Ok((ci, r, o))
            }
            Exchange::Failed(o) => Err(o.into()),
        }
    }

    /// GET a contact of book `bi` and check it is a vCard; learn its ETag.
    pub(super) async fn get_contact(
        &mut self,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
        bi: usize,
        expect: &[u16],
    ) -> Done {
        let (ci, r, o) = match self.send_to_contact(conn, rng, bi, "GET", expect).await {
            Ok(x) => x,
            Err(d) => return d,
        };
        if !o.is_ok() {
            return o.into();
        }
        let parsed = std::str::from_utf8(&r.body)
            .map_err(|e| e.to_string())
            .and_then(|t| vcard::parse(t).map_err(|e| e.to_string()));
        let c = &mut self.books[bi].contacts[ci];
        Done::Sent(match parsed {
            Ok(_) => {
                if let Some(e) = etag_of(&r) {
                    c.etag = Some(e);
                }
                o
            }
            Err(m) => o.body_error(format!("GET {}: not a vCard: {m}", c.path)),
        })
    }

    /// DELETE a contact of book `bi` (one this user put) and forget it.
    pub(super) async fn delete_contact(
        &mut self,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
        bi: usize,
        expect: &[u16],
    ) -> Done {
        match self.send_to_contact(conn, rng, bi, "DELETE", expect).await {
            Ok((ci, _, o)) => {
                if o.is_ok() {
                    self.books[bi].contacts.remove(ci);
                }
                o.into()
            }
            Err(d) => d,
        }
    }
}
