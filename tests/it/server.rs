//! The embedded reference server driven with real HTTP requests, on both stores: CMP,
//! Morse Code, Atom and CalDAV, the same events seen through all three, every error path
//! of the issue, concurrent updates that must not lose a write, and SQLite restarts.

use std::sync::Arc;
use std::time::Duration;

use crate::common::runtime;
use bytes::Bytes;
use loadmix::client::Reuse;
use loadmix::client::{Conn, Endpoint, Request, Response, Timeouts};
use loadmix::embedded::StoreSpec;
use loadmix::embedded::{self as server, ServerConfig, ServerHandle};

pub(crate) struct Client {
    rt: Arc<tokio::runtime::Runtime>,
    conn: Conn,
    auth: Option<String>,
}

pub(crate) struct Resp {
    pub(crate) status: u16,
    pub(crate) headers: hyper::HeaderMap,
    pub(crate) body: String,
}

impl Resp {
    pub(crate) fn header(&self, n: &str) -> &str {
        self.headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

impl Client {
    fn new(
        rt: &Arc<tokio::runtime::Runtime>,
        srv: &ServerHandle,
        user: Option<(&str, &str)>,
    ) -> Client {
        use base64::Engine as _;
        let ep = Arc::new(Endpoint::local(srv.addr, "test"));
        Client {
            rt: rt.clone(),
            conn: Conn::new(
                ep,
                Reuse::KeepAlive,
                Timeouts {
                    connect: Duration::from_secs(5),
                    request: Duration::from_secs(30),
                },
            ),
            auth: user.map(|(u, p)| {
                format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))
                )
            }),
        }
    }

    pub(crate) fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Resp {
        let mut b = Request::builder()
            .method(hyper::Method::from_bytes(method.as_bytes()).unwrap())
            .uri(path);
        if let Some(a) = &self.auth {
            b = b.header("authorization", a.as_str());
        }
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        let req = b.body(Bytes::from(body.to_string())).unwrap();
        let r: Response = self.rt.block_on(self.conn.send(req)).unwrap();
        Resp {
            status: r.status.as_u16(),
            headers: r.headers,
            body: String::from_utf8_lossy(&r.body).into_owned(),
        }
    }
    pub(crate) fn get(&mut self, path: &str) -> Resp {
        self.send("GET", path, &[], "")
    }
}

const CMP_USER: &str = r#"<user xmlns="http://osafoundation.org/cosmo/CMP"><username>NAME</username><password>pw</password><firstName>F</firstName><lastName>L</lastName><email>e@x</email></user>"#;

fn start(rt: &tokio::runtime::Runtime, store: StoreSpec) -> ServerHandle {
    rt.block_on(server::start(ServerConfig {
        store,
        max_body: 256 * 1024,
        ..ServerConfig::default()
    }))
    .unwrap()
}

/// Run `f` against a fresh server on each store, with users alice and bob created.
pub(crate) fn each_store(
    f: impl Fn(&Arc<tokio::runtime::Runtime>, &ServerHandle, &mut Client, &mut Client),
) {
    let dir = tempfile::tempdir().unwrap();
    for store in [
        StoreSpec::Memory,
        StoreSpec::Sqlite(dir.path().join("s.db").display().to_string()),
    ] {
        let rt = Arc::new(runtime());
        let srv = start(&rt, store);
        let mut admin = Client::new(&rt, &srv, Some(("root", "cosmo")));
        for u in ["alice", "bob"] {
            let r = admin.send(
                "PUT",
                &format!("/cosmo/cmp/user/{u}"),
                &[("content-type", "text/xml")],
                &CMP_USER.replace("NAME", u),
            );
            assert_eq!(r.status, 201, "{}", r.body);
        }
        let mut alice = Client::new(&rt, &srv, Some(("alice", "pw")));
        let mut bob = Client::new(&rt, &srv, Some(("bob", "pw")));
        f(&rt, &srv, &mut alice, &mut bob);
        let rt2 = rt.clone();
        rt2.block_on(srv.stop());
    }
}

fn eimml(col: &str, items: &[(&str, &str, &str)], tombstones: &[&str]) -> String {
    let mut s = format!(
        r#"<eim:collection uuid="{col}" name="Cal {col}" xmlns:eim="http://osafoundation.org/eim/0">"#
    );
    for (uid, title, start) in items {
        s.push_str(&format!(
            r#"<eim:recordset uuid="{uid}"><item:record xmlns:item="http://osafoundation.org/eim/item/0"><item:uuid eim:key="true" eim:type="text">{uid}</item:uuid><item:title eim:type="text">{title}</item:title><item:triage eim:type="text">100 10.00 1</item:triage></item:record><event:record xmlns:event="http://osafoundation.org/eim/event/0"><event:uuid eim:key="true" eim:type="text">{uid}</event:uuid><event:dtstart eim:type="text">;VALUE=DATE-TIME:{start}</event:dtstart><event:duration eim:type="text">PT60M</event:duration></event:record></eim:recordset>"#
        ));
    }
    for t in tombstones {
        s.push_str(&format!(
            r#"<eim:recordset eim:deleted="true" uuid="{t}"/>"#
        ));
    }
    s.push_str("</eim:collection>");
    s
}

const EIM: (&str, &str) = ("content-type", "application/eim+xml");
const TOKEN: &str = "x-morsecode-synctoken";
const TICKET_TYPE: &str = "x-morsecode-tickettype";

#[test]
fn cmp_creates_accounts_as_admin_only() {
    each_store(|rt, srv, alice, _| {
        let mut anon = Client::new(rt, srv, None);
        let body = CMP_USER.replace("NAME", "carol");
        let ct = [("content-type", "text/xml")];
        assert_eq!(
            anon.send("PUT", "/cosmo/cmp/user/carol", &ct, &body).status,
            401
        );
        assert_eq!(
            alice
                .send("PUT", "/cosmo/cmp/user/carol", &ct, &body)
                .status,
            403
        );
        let mut admin = Client::new(rt, srv, Some(("root", "cosmo")));
        // A name with a colon could never log in with Basic credentials.
        let colon = CMP_USER.replace("NAME", "a:b");
        assert_eq!(
            admin.send("PUT", "/cosmo/cmp/user/a:b", &ct, &colon).status,
            400
        );
        assert_eq!(
            admin
                .send("PUT", "/cosmo/cmp/user/carol", &ct, &body)
                .status,
            201
        );
        assert_eq!(
            admin
                .send("PUT", "/cosmo/cmp/user/carol", &ct, &body)
                .status,
            204
        );
        assert_eq!(
            admin.send("PUT", "/cosmo/cmp/user/dave", &ct, &body).status,
            400,
            "name mismatch"
        );
        assert_eq!(
            admin
                .send("PUT", "/cosmo/cmp/user/dave", &ct, "<user")
                .status,
            400
        );
        let mut wrong = Client::new(rt, srv, Some(("root", "nope")));
        assert_eq!(
            wrong
                .send("PUT", "/cosmo/cmp/user/carol", &ct, &body)
                .status,
            401
        );
        let mut carol = Client::new(rt, srv, Some(("carol", "pw")));
        assert_eq!(
            carol.get("/cosmo/mc/collection/none").status,
            404,
            "carol can log in"
        );
    });
}

#[test]
fn morse_code_publish_subscribe_sync_update_delete() {
    each_store(|_, _, alice, bob| {
        let p = "/cosmo/mc/collection/C1";
        let body = eimml(
            "C1",
            &[
                ("I1", "Lunch", "20070314T101500Z"),
                ("I2", "Dinner", "20070314T190000Z"),
            ],
            &[],
        );
        let r = alice.send("PUT", p, &[EIM], &body);
        assert_eq!(r.status, 201);
        let t1 = r.header(TOKEN).to_string();
        assert!(!t1.is_empty());
        assert_eq!(
            alice.send("PUT", p, &[EIM], &body).status,
            409,
            "uid in use"
        );
        assert_eq!(
            alice
                .send("PUT", "/cosmo/mc/collection/C9", &[EIM], &body)
                .status,
            400,
            "uid mismatch"
        );
        assert_eq!(
            alice
                .send("PUT", "/cosmo/mc/collection/C9", &[EIM], "<eim:collection")
                .status,
            400
        );
        assert_eq!(
            alice
                .send(
                    "PUT",
                    "/cosmo/mc/collection/C9",
                    &[("content-type", "text/plain")],
                    &body
                )
                .status,
            415
        );
        // Subscribe: everything.
        let r = alice.get(p);
        assert_eq!(r.status, 200);
        assert_eq!(r.header(TOKEN), t1);
        assert!(r.body.contains("Lunch") && r.body.contains("Dinner"));
        // Each user has a namespace of collections: Alice's is not there for Bob, and
        // nothing says it exists.
        assert_eq!(bob.get(p).status, 404, "not in bob's namespace");
        // Sync with the newest token: no records, still a token.
        let r = alice.send("GET", p, &[(TOKEN, &t1)], "");
        assert_eq!(r.status, 200);
        assert!(!r.body.contains("recordset"), "{}", r.body);
        assert_eq!(r.header(TOKEN), t1);
        // Update: change I1, add I3, delete I2.
        let upd = eimml(
            "C1",
            &[
                ("I1", "Brunch", "20070314T101500Z"),
                ("I3", "Tea", "20070315T160000Z"),
            ],
            &["I2"],
        );
        let r = alice.send("POST", p, &[EIM, (TOKEN, &t1)], &upd);
        assert_eq!(r.status, 204);
        let t2 = r.header(TOKEN).to_string();
        assert_ne!(t1, t2);
        // The old token is stale now.
        assert_eq!(
            alice.send("POST", p, &[EIM, (TOKEN, &t1)], &upd).status,
            205
        );
        assert_eq!(alice.send("POST", p, &[EIM], &upd).status, 400, "no token");
        // Sync from the first token: the two changes and the tombstone.
        let r = alice.send("GET", p, &[(TOKEN, &t1)], "");
        assert!(
            r.body.contains("Brunch") && r.body.contains("Tea"),
            "{}",
            r.body
        );
        assert!(
            r.body
                .contains(r#"<eim:recordset uuid="I2" eim:deleted="true"/>"#),
            "{}",
            r.body
        );
        assert!(!r.body.contains("Dinner"));
        assert_eq!(
            alice.send("GET", p, &[(TOKEN, "1-999")], "").status,
            400,
            "a token of no life of this collection"
        );
        assert_eq!(alice.send("DELETE", p, &[], "").status, 204);
        assert_eq!(alice.get(p).status, 404);
        assert_eq!(alice.send("DELETE", p, &[], "").status, 404);
    });
}

/// Cosmo's tickets: a publish asks for them, the answer names each, and whoever holds
/// one reaches that collection (only that one) without the owner's credentials, read-only
/// or read-write as the ticket says; the collection's deletion takes them with it.
#[test]
fn a_ticket_opens_one_collection_to_another_user_as_far_as_it_says() {
    each_store(|rt, srv, alice, bob| {
        let p = "/cosmo/mc/collection/SH";
        let body = eimml("SH", &[("S1", "Standup", "20070314T091500Z")], &[]);
        let bad = alice.send("PUT", p, &[EIM, (TICKET_TYPE, "read-only owner")], &body);
        assert_eq!(bad.status, 400, "{}", bad.body);
        let r = alice.send(
            "PUT",
            p,
            &[EIM, (TICKET_TYPE, "read-only read-write")],
            &body,
        );
        assert_eq!(r.status, 201);
        let token = r.header(TOKEN).to_string();
        let issued: Vec<(String, String)> = r
            .headers
            .get_all("x-morsecode-ticket")
            .iter()
            .map(|v| {
                let (k, key) = v.to_str().unwrap().split_once('=').unwrap();
                (k.to_string(), key.to_string())
            })
            .collect();
        let key = |kind: &str| issued.iter().find(|(k, _)| k == kind).unwrap().1.clone();
        let (ro, rw) = (key("read-only"), key("read-write"));
        assert_ne!(ro, rw);
        // Bob has no such collection of his own; with the ticket he reads Alice's.
        assert_eq!(bob.get(p).status, 404);
        let r = bob.send("GET", p, &[("ticket", &ro)], "");
        assert_eq!(r.status, 200, "{}", r.body);
        assert!(r.body.contains("Standup"));
        assert_eq!(r.header("x-morsecode-tickettype"), "read-only");
        let upd = eimml("SH", &[("S2", "Retro", "20070316T150000Z")], &[]);
        let r = bob.send("POST", p, &[EIM, (TOKEN, &token), ("ticket", &ro)], &upd);
        assert_eq!(r.status, 403, "a read-only ticket writes nothing");
        let r = bob.send("POST", p, &[EIM, (TOKEN, &token), ("ticket", &rw)], &upd);
        assert_eq!(r.status, 204, "{}", r.body);
        assert!(alice.get(p).body.contains("Retro"), "Alice sees Bob's item");
        // The same ticket opens the collection's Atom view: its feed, its entries.
        let feed = bob.send(
            "GET",
            "/cosmo/atom/collection/SH/full",
            &[("ticket", &ro)],
            "",
        );
        assert_eq!(feed.status, 200);
        assert!(feed.body.contains("Retro"), "{}", feed.body);
        let web = atom_entry("E7", "Web", "20070317T100000Z", false);
        let coll = "/cosmo/atom/collection/SH";
        assert_eq!(
            bob.send("POST", coll, &[ATOM, ("ticket", &ro)], &web)
                .status,
            403
        );
        assert_eq!(
            bob.send("POST", coll, &[ATOM, ("ticket", &rw)], &web)
                .status,
            201
        );
        let again = atom_entry("E7", "Web again", "20070317T100000Z", false);
        let item = "/cosmo/atom/item/E7";
        assert_eq!(
            bob.send("PUT", item, &[ATOM, ("ticket", &rw)], &again)
                .status,
            200
        );
        assert!(
            bob.send("GET", item, &[("ticket", &ro)], "")
                .body
                .contains("Web again")
        );
        assert_eq!(bob.get(item).status, 404, "not Bob's without the ticket");
        // A key the server never issued, or one for another collection, opens nothing.
        assert_eq!(bob.send("GET", p, &[("ticket", "nope")], "").status, 403);
        let other = eimml("OT", &[("O1", "Other", "20070314T091500Z")], &[]);
        let q = "/cosmo/mc/collection/OT";
        assert_eq!(alice.send("PUT", q, &[EIM], &other).status, 201);
        assert_eq!(bob.send("GET", q, &[("ticket", &rw)], "").status, 403);
        // Without credentials at all, the ticket alone is enough.
        let mut nobody = Client::new(rt, srv, None);
        assert_eq!(nobody.get(p).status, 401);
        assert_eq!(nobody.send("GET", p, &[("ticket", &rw)], "").status, 200);
        assert_eq!(alice.send("DELETE", p, &[], "").status, 204);
        assert_eq!(
            bob.send("GET", p, &[("ticket", &ro)], "").status,
            403,
            "gone with it"
        );
    });
}

/// A ticket belongs to its collection, not the collection's name: deleted through
/// CalDAV and made again under the same name, the collection is another, and the old
/// ticket opens nothing (not the Morse Code view, nor the Atom feed, nor a DELETE).
#[test]
fn a_ticket_dies_with_its_collection_however_it_is_deleted() {
    each_store(|rt, srv, alice, _| {
        let p = "/cosmo/mc/collection/TK";
        let body = eimml("TK", &[("T1", "Shared", "20070314T091500Z")], &[]);
        let r = alice.send("PUT", p, &[EIM, (TICKET_TYPE, "read-write")], &body);
        assert_eq!(r.status, 201, "{}", r.body);
        let rw = r
            .header("x-morsecode-ticket")
            .split_once('=')
            .unwrap()
            .1
            .to_string();
        let mut nobody = Client::new(rt, srv, None);
        assert_eq!(nobody.send("GET", p, &[("ticket", &rw)], "").status, 200);
        let r = alice.send("DELETE", "/cosmo/dav/alice/TK/", &[], "");
        assert_eq!(r.status, 204, "{}", r.body);
        let again = eimml("TK", &[("T2", "NEW PRIVATE", "20070315T091500Z")], &[]);
        assert_eq!(alice.send("PUT", p, &[EIM], &again).status, 201);
        let r = nobody.send("GET", p, &[("ticket", &rw)], "");
        assert_eq!(r.status, 403, "{}", r.body);
        let feed = "/cosmo/atom/collection/TK/full";
        assert_eq!(nobody.send("GET", feed, &[("ticket", &rw)], "").status, 403);
        assert_eq!(nobody.send("DELETE", p, &[("ticket", &rw)], "").status, 403);
        assert!(alice.get(p).body.contains("NEW PRIVATE"), "still there");
    });
}

#[test]
fn concurrent_updates_with_one_token_let_exactly_one_through() {
    each_store(|rt, srv, alice, _| {
        let p = "/cosmo/mc/collection/CC";
        let t = alice
            .send(
                "PUT",
                p,
                &[EIM],
                &eimml("CC", &[("X0", "x", "20070101T000000Z")], &[]),
            )
            .header(TOKEN)
            .to_string();
        let mut handles = Vec::new();
        for i in 0..8 {
            let ep = Arc::new(Endpoint::local(srv.addr, "t"));
            let token = t.clone();
            let body = eimml("CC", &[(&format!("N{i}"), "new", "20070101T000000Z")], &[]);
            handles.push(rt.spawn(async move {
                use base64::Engine as _;
                let mut c = Conn::new(
                    ep,
                    Reuse::KeepAlive,
                    Timeouts {
                        connect: Duration::from_secs(5),
                        request: Duration::from_secs(30),
                    },
                );
                let req = Request::builder()
                    .method("POST")
                    .uri(p)
                    .header(
                        "authorization",
                        format!(
                            "Basic {}",
                            base64::engine::general_purpose::STANDARD.encode("alice:pw")
                        ),
                    )
                    .header("content-type", "application/eim+xml")
                    .header(TOKEN, token)
                    .body(Bytes::from(body))
                    .unwrap();
                c.send(req).await.unwrap().status.as_u16()
            }));
        }
        let codes: Vec<u16> = handles
            .into_iter()
            .map(|h| rt.block_on(h).unwrap())
            .collect();
        assert_eq!(codes.iter().filter(|c| **c == 204).count(), 1, "{codes:?}");
        assert!(
            codes.iter().all(|c| [204, 205, 423].contains(c)),
            "{codes:?}"
        );
        // The winner's item is there, and only it.
        let r = alice.get(p);
        assert_eq!(r.body.matches("<eim:recordset").count(), 2, "{}", r.body);
    });
}

fn atom_entry(uid: &str, title: &str, start: &str, rrule: bool) -> String {
    let rr = if rrule {
        r#","rrule":["text",";FREQ=WEEKLY"]"#
    } else {
        ""
    };
    format!(
        r#"<entry xmlns="http://www.w3.org/2005/Atom"><title>{title}</title><id>urn:uuid:{uid}</id><updated>2007-06-05T10:58:15-07:00</updated><author><name>x</name></author><content type="application/eim+json">{{"uuid":"{uid}","records":{{"item":{{"prefix":"item","ns":"http://osafoundation.org/eim/item/0","key":{{"uuid":["text","{uid}"]}},"fields":{{"title":["text","{title}"]}}}},"event":{{"prefix":"event","ns":"http://osafoundation.org/eim/event/0","key":{{"uuid":["text","{uid}"]}},"fields":{{"dtstart":["text",";VALUE=DATE-TIME:{start}"],"duration":["text","PT30M"]{rr}}}}}}}}}</content></entry>"#
    )
}

const ATOM: (&str, &str) = ("content-type", "application/atom+xml");

/// Whether an occurrence of `atom_entry`'s weekly event (Mondays 09:00–09:30 UTC since
/// 2007-01-01) is in progress at this moment.
fn weekly_in_progress() -> bool {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs();
    // 1970-01-01 was a Thursday: day 4 after it is the first Monday.
    let monday = (secs / 86_400 + 3).is_multiple_of(7);
    let of_day = secs % 86_400;
    monday && (9 * 3600..9 * 3600 + 1800).contains(&of_day)
}

fn feed_titles(body: &str) -> Vec<String> {
    let f: atom_syndication::Feed = body
        .parse()
        .unwrap_or_else(|e| panic!("not a feed: {e}\n{body}"));
    let mut v: Vec<String> = f
        .entries()
        .iter()
        .map(|e| e.title().value.clone())
        .collect();
    v.sort();
    v
}

#[test]
fn atom_feeds_queries_dashboards_create_and_update() {
    each_store(|_, _, alice, bob| {
        alice.send(
            "PUT",
            "/cosmo/mc/collection/A1",
            &[EIM],
            &eimml("A1", &[("E1", "Lunch", "20070314T101500Z")], &[]),
        );
        let r = alice.send(
            "POST",
            "/cosmo/atom/collection/A1",
            &[ATOM],
            &atom_entry("E2", "Weekly", "20070101T090000Z", true),
        );
        assert_eq!(r.status, 201, "{}", r.body);
        assert_eq!(r.header("location"), "/cosmo/atom/item/E2");
        let etag = r.header("etag").to_string();
        assert!(!etag.is_empty());
        assert_eq!(
            alice
                .send(
                    "POST",
                    "/cosmo/atom/collection/A1",
                    &[ATOM],
                    &atom_entry("E2", "Again", "20070101T090000Z", false)
                )
                .status,
            409
        );
        assert_eq!(
            alice
                .send(
                    "POST",
                    "/cosmo/atom/collection/A1",
                    &[("content-type", "text/plain")],
                    "x"
                )
                .status,
            415
        );
        assert_eq!(
            alice
                .send(
                    "POST",
                    "/cosmo/atom/collection/A1",
                    &[ATOM],
                    "<feed xmlns=\"http://www.w3.org/2005/Atom\"/>"
                )
                .status,
            400
        );
        assert_eq!(
            bob.send(
                "POST",
                "/cosmo/atom/collection/A1",
                &[ATOM],
                &atom_entry("E9", "x", "20070101T090000Z", false)
            )
            .status,
            404
        );
        // The full feed (default format eim-json) has both.
        let r = alice.get("/cosmo/atom/collection/A1/full");
        assert_eq!(r.status, 200);
        assert_eq!(feed_titles(&r.body), ["Lunch", "Weekly"]);
        assert!(r.body.contains("application/eim+json"));
        assert_eq!(
            feed_titles(&alice.get("/cosmo/atom/collection/A1").body),
            ["Lunch", "Weekly"]
        );
        // A week in March: the lunch and one occurrence of the weekly event.
        let q = "/cosmo/atom/collection/A1/full/eim-json?start=2007-03-12T00:00:00Z&end=2007-03-19T00:00:00Z";
        assert_eq!(feed_titles(&alice.get(q).body), ["Lunch", "Weekly"]);
        // Four weeks in May: four occurrences, each its own entry.
        let q = "/cosmo/atom/collection/A1/full/eim-json?start=2007-05-07T00:00:00Z&end=2007-06-04T00:00:00Z";
        assert_eq!(feed_titles(&alice.get(q).body), ["Weekly"; 4]);
        assert_eq!(
            alice
                .get("/cosmo/atom/collection/A1/full/eim-json?start=2007-05-07T00:00:00Z")
                .status,
            400
        );
        assert_eq!(alice.get("/cosmo/atom/collection/A1/nonsense").status, 404);
        // Dashboards: the NOW-triaged lunch is in "now"; the weekly series shows its next
        // occurrence in "later" and its latest in "done".
        // The weekly event is itself "now" for half an hour each Monday from 09:00 UTC, so
        // the answer expected depends on the clock; a reading that straddles the edge of that
        // half hour is taken again.
        let now = loop {
            let before = weekly_in_progress();
            let titles = feed_titles(
                &alice
                    .get("/cosmo/atom/collection/A1/dashboard-now/eim-json")
                    .body,
            );
            if before == weekly_in_progress() {
                break (titles, before);
            }
        };
        let expected: &[&str] = if now.1 {
            &["Lunch", "Weekly"]
        } else {
            &["Lunch"]
        };
        assert_eq!(now.0, expected);
        assert_eq!(
            feed_titles(
                &alice
                    .get("/cosmo/atom/collection/A1/dashboard-later/eim-json")
                    .body
            ),
            ["Weekly"]
        );
        assert_eq!(
            feed_titles(
                &alice
                    .get("/cosmo/atom/collection/A1/dashboard-done/eim-json")
                    .body
            ),
            ["Weekly"]
        );
        // Update with If-Match.
        let upd = atom_entry("E2", "Weekly sync", "20070101T090000Z", true);
        assert_eq!(
            alice
                .send(
                    "PUT",
                    "/cosmo/atom/item/E2",
                    &[ATOM, ("if-match", "\"stale\"")],
                    &upd
                )
                .status,
            412
        );
        let r = alice.send(
            "PUT",
            "/cosmo/atom/item/E2",
            &[ATOM, ("if-match", &etag)],
            &upd,
        );
        assert_eq!(r.status, 200, "{}", r.body);
        assert_ne!(r.header("etag"), etag);
        assert_eq!(
            alice
                .send("PUT", "/cosmo/atom/item/E1", &[ATOM], &upd)
                .status,
            400,
            "uuid mismatch"
        );
        assert_eq!(
            alice
                .send("PUT", "/cosmo/atom/item/NOPE", &[ATOM], &upd)
                .status,
            404
        );
        // Updating an item created through Morse Code, without If-Match (as the 2007 client).
        assert_eq!(
            alice
                .send(
                    "PUT",
                    "/cosmo/atom/item/E1",
                    &[ATOM],
                    &atom_entry("E1", "Long lunch", "20070314T101500Z", false)
                )
                .status,
            200
        );
        assert!(
            alice
                .get("/cosmo/mc/collection/A1")
                .body
                .contains("Long lunch"),
            "Morse Code sees the Atom update"
        );
        assert_eq!(
            alice.send("DELETE", "/cosmo/atom/item/E1", &[], "").status,
            204
        );
        assert_eq!(
            feed_titles(&alice.get("/cosmo/atom/collection/A1").body),
            ["Weekly sync"]
        );
    });
}

const ICS: &str = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//EN\r\nBEGIN:VEVENT\r\nUID:UIDX\r\nDTSTAMP:20070712T182145Z\r\nDTSTART:STARTX\r\nDURATION:PT30M\r\nRRULEXSUMMARY:SUMX\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";

fn ics(uid: &str, start: &str, summary: &str, weekly: bool) -> String {
    ICS.replace("UIDX", uid)
        .replace("STARTX", start)
        .replace("SUMX", summary)
        .replace("RRULEX", if weekly { "RRULE:FREQ=WEEKLY\r\n" } else { "" })
}

pub(crate) const TEXT_CAL: (&str, &str) = ("content-type", "text/calendar");
const XML: (&str, &str) = ("content-type", "application/xml");

fn query(start: &str, end: &str) -> String {
    format!(
        r#"<C:calendar-query xmlns:C="urn:ietf:params:xml:ns:caldav"><D:prop xmlns:D="DAV:"><D:getetag/><C:calendar-data/></D:prop><C:filter><C:comp-filter name="VCALENDAR"><C:comp-filter name="VEVENT"><C:time-range start="{start}" end="{end}"/></C:comp-filter></C:comp-filter></C:filter></C:calendar-query>"#
    )
}

fn sync_body(token: &str) -> String {
    format!(
        r#"<D:sync-collection xmlns:D="DAV:"><D:sync-token>{token}</D:sync-token><D:sync-level>1</D:sync-level><D:prop><D:getetag/></D:prop></D:sync-collection>"#
    )
}

fn sync_token_of(body: &str) -> String {
    let root = loadmix::formats::xml::parse(body).unwrap();
    root.child("DAV:", "sync-token").unwrap().text.clone()
}

/// A PUT and what the server must answer it, with why.
struct Put<'a> {
    path: &'a str,
    condition: Option<(&'a str, &'a str)>,
    body: String,
    status: u16,
    why: &'a str,
}

#[test]
fn caldav_discovery_calendars_events_reports_and_sync() {
    each_store(|_, _, alice, bob| {
        // Discovery.
        let r = alice.send("PROPFIND", "/cosmo/dav/", &[("depth", "0")], r#"<D:propfind xmlns:D="DAV:"><D:prop><D:current-user-principal/></D:prop></D:propfind>"#);
        assert_eq!(r.status, 207);
        assert!(
            r.body.contains("<D:href>/cosmo/dav/alice/</D:href>"),
            "{}",
            r.body
        );
        let r = alice.send("PROPFIND", "/cosmo/dav/alice/", &[("depth", "0")], r#"<D:propfind xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"><D:prop><C:calendar-home-set/><D:foo/></D:prop></D:propfind>"#);
        assert!(
            r.body
                .contains("<C:calendar-home-set><D:href>/cosmo/dav/alice/</D:href>"),
            "{}",
            r.body
        );
        assert!(
            r.body.contains("404 Not Found"),
            "unknown property reported missing"
        );
        assert_eq!(
            bob.send("PROPFIND", "/cosmo/dav/alice/", &[("depth", "0")], "")
                .status,
            403
        );
        // Calendars.
        let mk = r#"<C:mkcalendar xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"><D:set><D:prop><D:displayname>Work</D:displayname></D:prop></D:set></C:mkcalendar>"#;
        assert_eq!(
            alice
                .send("MKCALENDAR", "/cosmo/dav/alice/work", &[XML], mk)
                .status,
            201
        );
        assert_eq!(
            alice
                .send("MKCALENDAR", "/cosmo/dav/alice/work", &[XML], mk)
                .status,
            405
        );
        assert_eq!(
            alice
                .send("MKCALENDAR", "/cosmo/dav/alice/bad", &[XML], "<oops")
                .status,
            400
        );
        let r = alice.send("PROPFIND", "/cosmo/dav/alice/", &[("depth", "1")], "");
        assert!(
            r.body.contains("<D:displayname>Work</D:displayname>")
                && r.body.contains("<C:calendar/>"),
            "{}",
            r.body
        );
        // Events.
        let ev = "/cosmo/dav/alice/work/e1.ics";
        let r = alice.send(
            "PUT",
            ev,
            &[TEXT_CAL, ("if-none-match", "*")],
            &ics("e1", "20070521T100000Z", "Planning", false),
        );
        assert_eq!(r.status, 201);
        let etag = r.header("etag").to_string();
        // Writes the server must refuse or take, one row a request: its path, its
        // condition, its body, the status, and why.
        let puts = [
            Put {
                path: ev,
                condition: Some(("if-none-match", "*")),
                body: ics("e1", "20070521T100000Z", "x", false),
                status: 412,
                why: "it exists",
            },
            Put {
                path: ev,
                condition: Some(("if-match", "\"old\"")),
                body: ics("e1", "20070521T100000Z", "x", false),
                status: 412,
                why: "another ETag",
            },
            Put {
                path: "/cosmo/dav/alice/work/e2.ics",
                condition: None,
                body: "not a calendar".into(),
                status: 400,
                why: "not iCalendar",
            },
            Put {
                path: "/cosmo/dav/alice/work/e3.ics",
                condition: None,
                body: ics("e1", "20070521T100000Z", "dup", false),
                status: 409,
                why: "same UID under another name",
            },
            Put {
                path: "/cosmo/dav/alice/nocal/e.ics",
                condition: None,
                body: ics("q", "20070521T100000Z", "x", false),
                status: 409,
                why: "no such calendar",
            },
            Put {
                path: "/cosmo/dav/alice/work/w.ics",
                condition: None,
                body: ics("w", "20070101T090000Z", "Standup", true),
                status: 201,
                why: "a weekly series",
            },
        ];
        for p in puts {
            let mut headers = vec![TEXT_CAL];
            headers.extend(p.condition);
            let r = alice.send("PUT", p.path, &headers, &p.body);
            assert_eq!(r.status, p.status, "PUT {}: {}", p.path, p.why);
        }
        let r = alice.get(ev);
        assert_eq!(r.status, 200);
        assert_eq!(r.header("etag"), etag);
        assert!(r.body.contains("SUMMARY:Planning"));
        // calendar-query: the week of May 21 holds Planning and one Standup occurrence.
        let r = alice.send(
            "REPORT",
            "/cosmo/dav/alice/work/",
            &[XML, ("depth", "1")],
            &query("20070521T000000Z", "20070528T000000Z"),
        );
        assert_eq!(r.status, 207);
        assert!(
            r.body.contains("e1.ics")
                && r.body.contains("w.ics")
                && r.body.contains("BEGIN:VCALENDAR"),
            "{}",
            r.body
        );
        let r = alice.send(
            "REPORT",
            "/cosmo/dav/alice/work/",
            &[XML],
            &query("20061201T000000Z", "20061208T000000Z"),
        );
        assert!(
            !r.body.contains("<D:response>"),
            "nothing before the series starts: {}",
            r.body
        );
        // multiget with a missing member.
        let mg = r#"<C:calendar-multiget xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"><D:prop><D:getetag/></D:prop><D:href>/cosmo/dav/alice/work/e1.ics</D:href><D:href>/cosmo/dav/alice/work/gone.ics</D:href></C:calendar-multiget>"#;
        let r = alice.send("REPORT", "/cosmo/dav/alice/work/", &[XML], mg);
        assert!(
            r.body.contains(&etag.replace('"', "&quot;"))
                && r.body.contains("gone.ics</D:href><D:status>HTTP/1.1 404"),
            "{}",
            r.body
        );
        // sync-collection: initial, then changes and a deletion.
        let r = alice.send("REPORT", "/cosmo/dav/alice/work/", &[XML], &sync_body(""));
        assert_eq!(r.status, 207);
        let t1 = sync_token_of(&r.body);
        assert!(r.body.contains("e1.ics") && r.body.contains("w.ics"));
        assert_eq!(alice.send("DELETE", ev, &[], "").status, 204);
        assert_eq!(alice.send("DELETE", ev, &[], "").status, 404);
        alice.send(
            "PUT",
            "/cosmo/dav/alice/work/n.ics",
            &[TEXT_CAL],
            &ics("n", "20070601T100000Z", "New", false),
        );
        let r = alice.send("REPORT", "/cosmo/dav/alice/work/", &[XML], &sync_body(&t1));
        assert!(
            r.body.contains("e1.ics</D:href><D:status>HTTP/1.1 404"),
            "{}",
            r.body
        );
        assert!(
            r.body.contains("n.ics") && !r.body.contains("w.ics"),
            "{}",
            r.body
        );
        let t2 = sync_token_of(&r.body);
        assert_ne!(t1, t2);
        let r = alice.send(
            "REPORT",
            "/cosmo/dav/alice/work/",
            &[XML],
            &sync_body("urn:loadmix:sync:1-1"),
        );
        assert_eq!(r.status, 403);
        assert!(r.body.contains("valid-sync-token"));
        // ctag and sync-token move with changes.
        let r = alice.send("PROPFIND", "/cosmo/dav/alice/work/", &[("depth", "0")], "");
        assert!(r.body.contains(&t2), "{}", r.body);
        assert_eq!(
            alice
                .send("DELETE", "/cosmo/dav/alice/work/", &[], "")
                .status,
            204
        );
        assert_eq!(alice.get("/cosmo/dav/alice/work/n.ics").status, 404);
    });
}

#[test]
fn one_event_seen_through_all_three_protocols() {
    each_store(|_, _, alice, _| {
        // Published through Morse Code ...
        alice.send(
            "PUT",
            "/cosmo/mc/collection/X1",
            &[EIM],
            &eimml("X1", &[("M1", "From Morse", "20070521T100000Z")], &[]),
        );
        // ... read through CalDAV.
        let r = alice.get("/cosmo/dav/alice/X1/M1.ics");
        assert_eq!(r.status, 200);
        assert!(
            r.body.contains("SUMMARY:From Morse") && r.body.contains("DTSTART:20070521T100000Z"),
            "{}",
            r.body
        );
        let r = alice.send(
            "REPORT",
            "/cosmo/dav/alice/X1/",
            &[XML],
            &query("20070521T000000Z", "20070522T000000Z"),
        );
        assert!(r.body.contains("M1.ics"));
        // Created through CalDAV ...
        alice.send(
            "PUT",
            "/cosmo/dav/alice/X1/c.ics",
            &[TEXT_CAL],
            &ics("C1", "20070522T100000Z", "From CalDAV", false),
        );
        // ... seen by Morse Code and Atom.
        assert!(
            alice
                .get("/cosmo/mc/collection/X1")
                .body
                .contains("From CalDAV")
        );
        let q = "/cosmo/atom/collection/X1/full/eim-json?start=2007-05-21T00:00:00Z&end=2007-05-28T00:00:00Z";
        assert_eq!(
            feed_titles(&alice.get(q).body),
            ["From CalDAV", "From Morse"]
        );
        // A Morse Code update is a CalDAV change.
        let t = alice
            .get("/cosmo/mc/collection/X1")
            .header(TOKEN)
            .to_string();
        let sync0 = sync_token_of(
            &alice
                .send("REPORT", "/cosmo/dav/alice/X1/", &[XML], &sync_body(""))
                .body,
        );
        alice.send(
            "POST",
            "/cosmo/mc/collection/X1",
            &[EIM, (TOKEN, &t)],
            &eimml("X1", &[], &["M1"]),
        );
        let r = alice.send("REPORT", "/cosmo/dav/alice/X1/", &[XML], &sync_body(&sync0));
        assert!(
            r.body.contains("M1.ics</D:href><D:status>HTTP/1.1 404"),
            "{}",
            r.body
        );
    });
}

#[test]
fn bad_requests_get_the_right_4xx() {
    each_store(|rt, srv, alice, _| {
        let mut anon = Client::new(rt, srv, None);
        let r = anon.get("/cosmo/mc/collection/C");
        assert_eq!(r.status, 401);
        assert!(r.header("www-authenticate").starts_with("Basic"));
        assert_eq!(
            anon.send("PROPFIND", "/cosmo/dav/alice/", &[], "").status,
            401
        );
        // Path tricks.
        for p in [
            "/cosmo/mc/collection/%2E%2E",
            "/cosmo/mc/collection/a%2Fb",
            "/cosmo/dav/alice/%2E%2E/x.ics",
            "/cosmo/dav/alice/c/a%5Cb.ics",
        ] {
            assert_eq!(alice.get(p).status, 400, "{p}");
        }
        // Unknown methods: 405 with Allow.
        let r = alice.send("PATCH", "/cosmo/mc/collection/C", &[], "");
        assert_eq!(r.status, 405);
        assert!(r.header("allow").contains("PUT"));
        let r = alice.send("FROBNICATE", "/cosmo/dav/alice/", &[], "");
        assert_eq!(r.status, 405);
        assert!(r.header("allow").contains("PROPFIND"));
        // Huge bodies: 413 and nothing stored.
        let huge = "x".repeat(300 * 1024);
        assert_eq!(
            alice
                .send("PUT", "/cosmo/mc/collection/H", &[EIM], &huge)
                .status,
            413
        );
        assert_eq!(
            alice
                .send("PUT", "/cosmo/dav/alice/H/h.ics", &[TEXT_CAL], &huge)
                .status,
            413
        );
        assert_eq!(alice.get("/cosmo/mc/collection/H").status, 404);
        // Recurrence rules RFC 5545 does not allow are refused, and nothing is stored.
        assert_eq!(
            alice
                .send("MKCALENDAR", "/cosmo/dav/alice/R/", &[], "")
                .status,
            201
        );
        for rule in [
            "FREQ=DAILY;INTERVAL=0",
            "FREQ=DAILY;INTERVAL=-1",
            "FREQ=DAILY;COUNT=0",
            "INTERVAL=2",
            "FREQ=WEEKLY;WKST=XX",
        ] {
            let body = ics("r", "20260415T100000Z", "R", true).replace("FREQ=WEEKLY", rule);
            let r = alice.send("PUT", "/cosmo/dav/alice/R/r.ics", &[TEXT_CAL], &body);
            assert_eq!(r.status, 400, "{rule}");
            assert!(r.body.contains("valid-calendar-data"), "{rule}: {}", r.body);
            assert_eq!(alice.get("/cosmo/dav/alice/R/r.ics").status, 404, "{rule}");
        }
        // Malformed XML to every XML service.
        assert_eq!(
            alice
                .send(
                    "PROPFIND",
                    "/cosmo/dav/alice/",
                    &[XML],
                    "<D:propfind xmlns:D=\"DAV:\">"
                )
                .status,
            400
        );
        assert_eq!(
            alice
                .send("REPORT", "/cosmo/dav/alice/", &[XML], "<x/>")
                .status,
            405,
            "REPORT on a home"
        );
        alice.send("MKCALENDAR", "/cosmo/dav/alice/k", &[], "");
        assert_eq!(
            alice
                .send("REPORT", "/cosmo/dav/alice/k/", &[XML], "<unclosed>")
                .status,
            400
        );
        assert_eq!(
            alice
                .send(
                    "REPORT",
                    "/cosmo/dav/alice/k/",
                    &[XML],
                    "<D:weird xmlns:D=\"DAV:\"/>"
                )
                .status,
            403
        );
        // A failed update leaves the collection as it was.
        let t = alice
            .send(
                "PUT",
                "/cosmo/mc/collection/K2",
                &[EIM],
                &eimml("K2", &[("Z1", "keep", "20070101T000000Z")], &[]),
            )
            .header(TOKEN)
            .to_string();
        let bad = eimml("K2", &[("Z2", "half", "20070101T000000Z")], &[])
            .replace("</eim:collection>", "<oops/></eim:collection>");
        assert_eq!(
            alice
                .send("POST", "/cosmo/mc/collection/K2", &[EIM, (TOKEN, &t)], &bad)
                .status,
            400
        );
        let r = alice.get("/cosmo/mc/collection/K2");
        assert_eq!(r.header(TOKEN), t);
        assert!(!r.body.contains("half"));
        assert_eq!(alice.get("/cosmo/nowhere").status, 404);
    });
}

#[test]
fn sqlite_data_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let spec = StoreSpec::Sqlite(dir.path().join("keep.db").display().to_string());
    let rt = Arc::new(runtime());
    let token = {
        let srv = start(&rt, spec.clone());
        let mut admin = Client::new(&rt, &srv, Some(("root", "cosmo")));
        admin.send(
            "PUT",
            "/cosmo/cmp/user/alice",
            &[("content-type", "text/xml")],
            &CMP_USER.replace("NAME", "alice"),
        );
        let mut alice = Client::new(&rt, &srv, Some(("alice", "pw")));
        let t = alice
            .send(
                "PUT",
                "/cosmo/mc/collection/R1",
                &[EIM],
                &eimml("R1", &[("P1", "Persisted", "20070101T000000Z")], &[]),
            )
            .header(TOKEN)
            .to_string();
        rt.block_on(srv.stop());
        t
    };
    let srv = start(&rt, spec);
    let mut alice = Client::new(&rt, &srv, Some(("alice", "pw")));
    let r = alice.get("/cosmo/mc/collection/R1");
    assert_eq!(r.status, 200, "the account and the collection survived");
    assert!(r.body.contains("Persisted"));
    assert_eq!(r.header(TOKEN), token, "and so did its change counter");
    let r = alice.send(
        "POST",
        "/cosmo/mc/collection/R1",
        &[EIM, (TOKEN, &token)],
        &eimml("R1", &[("P2", "After", "20070101T000000Z")], &[]),
    );
    assert_eq!(r.status, 204, "the old token is still the newest");
    rt.block_on(srv.stop());
}

/// One authenticated user cannot crash or hang the server: deeply nested XML and
/// iCalendar, a SECONDLY event since 1970 queried in 2030 (CalDAV and Atom), an absurd
/// DURATION, and open-ended time ranges. Each gets an answer, and the server goes on.
#[test]
fn hostile_bodies_get_answers_and_the_server_goes_on() {
    each_store(|_, _, alice, _| {
        let nest = |n: usize| format!("{}{}", "<a>".repeat(n), "</a>".repeat(n));
        let deep = nest(20_000);
        for (method, path, ctype) in [
            ("PROPFIND", "/cosmo/dav/alice/", "application/xml"),
            ("MKCALENDAR", "/cosmo/dav/alice/deep/", "application/xml"),
            ("PUT", "/cosmo/mc/collection/deep", "application/eim+xml"),
        ] {
            let r = alice.send(method, path, &[("content-type", ctype)], &deep);
            assert_eq!(r.status, 400, "{method} {path}: {}", r.body);
        }
        assert_eq!(
            alice
                .send("MKCALENDAR", "/cosmo/dav/alice/h/", &[], "")
                .status,
            201
        );
        let r = alice.send("REPORT", "/cosmo/dav/alice/h/", &[XML], &deep);
        assert_eq!(r.status, 400, "{}", r.body);
        let mut nested_ics = String::from("BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nUID:n\r\n");
        nested_ics.push_str(&"BEGIN:X\r\n".repeat(5_000));
        nested_ics.push_str(&"END:X\r\n".repeat(5_000));
        nested_ics.push_str("END:VEVENT\r\nEND:VCALENDAR\r\n");
        let r = alice.send("PUT", "/cosmo/dav/alice/h/n.ics", &[TEXT_CAL], &nested_ics);
        assert_eq!(r.status, 400, "{}", r.body);
        // Every second since 1970, queried for a day in 2030: found, and quickly.
        let secondly = ics("s", "19700101T000000Z", "tick", false)
            .replace("DURATION:PT30M\r\n", "DURATION:PT1S\r\n")
            .replace("END:VEVENT", "RRULE:FREQ=SECONDLY\r\nEND:VEVENT");
        let r = alice.send("PUT", "/cosmo/dav/alice/h/s.ics", &[TEXT_CAL], &secondly);
        assert_eq!(r.status, 201, "{}", r.body);
        let r = alice.send(
            "REPORT",
            "/cosmo/dav/alice/h/",
            &[XML],
            &query("20300101T000000Z", "20300102T000000Z"),
        );
        assert_eq!(r.status, 207, "{}", r.body);
        assert!(r.body.contains("s.ics"), "{}", r.body);
        // Open-ended ranges (RFC 4791 allows either end alone).
        for q in [
            r#"<C:calendar-query xmlns:C="urn:ietf:params:xml:ns:caldav"><D:prop xmlns:D="DAV:"><D:getetag/></D:prop><C:filter><C:comp-filter name="VCALENDAR"><C:comp-filter name="VEVENT"><C:time-range end="20300101T000000Z"/></C:comp-filter></C:comp-filter></C:filter></C:calendar-query>"#,
            r#"<C:calendar-query xmlns:C="urn:ietf:params:xml:ns:caldav"><D:prop xmlns:D="DAV:"><D:getetag/></D:prop><C:filter><C:comp-filter name="VCALENDAR"><C:comp-filter name="VEVENT"><C:time-range start="20300101T000000Z"/></C:comp-filter></C:comp-filter></C:filter></C:calendar-query>"#,
        ] {
            let r = alice.send("REPORT", "/cosmo/dav/alice/h/", &[XML], q);
            assert_eq!(r.status, 207, "{q}: {}", r.body);
            assert!(r.body.contains("s.ics"), "{}", r.body);
        }
        // The same event through Atom: a time-range feed and the dashboards.
        let r = alice
            .get("/cosmo/atom/collection/h?start=2030-01-01T00:00:00Z&end=2030-01-01T00:00:03Z");
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(feed_titles(&r.body).len(), 3, "one occurrence a second");
        for p in ["dashboard-now", "dashboard-later", "dashboard-done"] {
            let r = alice.get(&format!("/cosmo/atom/collection/h/{p}"));
            assert_eq!(r.status, 200, "{p}: {}", r.body);
        }
        // A DURATION no clock can hold is refused or ignored, never a crash.
        let huge = ics("d", "20070101T000000Z", "long", true)
            .replace("DURATION:PT30M\r\n", "DURATION:P99999999999999W\r\n");
        let r = alice.send("PUT", "/cosmo/dav/alice/h/d.ics", &[TEXT_CAL], &huge);
        assert!(r.status < 500, "{}: {}", r.status, r.body);
        let r = alice.send(
            "REPORT",
            "/cosmo/dav/alice/h/",
            &[XML],
            &query("20070101T000000Z", "20070201T000000Z"),
        );
        assert_eq!(r.status, 207, "{}", r.body);
        // Still answering.
        assert_eq!(alice.get("/cosmo/_loadmix/stats").status, 200);
    });
}

/// RFC 4791 scopes UIDs to a calendar: the same UID may live in two calendars, a
/// precondition concerns the URL, and a UID already in the calendar under another URL is
/// a 409 no-uid-conflict that names the resource holding it. Another user's item is
/// answered as absent through Atom, never as forbidden (that would say it exists).
#[test]
fn uids_are_per_calendar_and_preconditions_concern_the_url() {
    each_store(|_, _, alice, bob| {
        for cal in ["one", "two"] {
            let r = alice.send("MKCALENDAR", &format!("/cosmo/dav/alice/{cal}/"), &[], "");
            assert_eq!(r.status, 201);
        }
        let e = ics("same", "20070521T100000Z", "Twice", false);
        let nm = ("if-none-match", "*");
        for cal in ["one", "two"] {
            let r = alice.send(
                "PUT",
                &format!("/cosmo/dav/alice/{cal}/a.ics"),
                &[TEXT_CAL, nm],
                &e,
            );
            assert_eq!(r.status, 201, "{cal}: {}", r.body);
        }
        // The same UID at another URL of the same calendar.
        let r = alice.send("PUT", "/cosmo/dav/alice/one/b.ics", &[TEXT_CAL, nm], &e);
        assert_eq!(r.status, 409, "{}", r.body);
        let err = loadmix::formats::xml::parse(&r.body).unwrap();
        let href = err
            .child("urn:ietf:params:xml:ns:caldav", "no-uid-conflict")
            .and_then(|c| c.child("DAV:", "href"))
            .map(|h| h.text.clone());
        assert_eq!(href.as_deref(), Some("/cosmo/dav/alice/one/a.ics"));
        // Something at the URL already: the precondition fails, whatever the UID.
        let other = ics("other", "20070521T100000Z", "x", false);
        let r = alice.send("PUT", "/cosmo/dav/alice/one/a.ics", &[TEXT_CAL, nm], &other);
        assert_eq!(r.status, 412);
        // Bob asks Atom for Alice's item: not found, not forbidden.
        assert_eq!(bob.get("/cosmo/atom/item/same").status, 404);
    });
}

/// `<C:expand>` in calendar-data answers one instance per occurrence in its range, not
/// the master with its rule.
#[test]
fn expand_in_calendar_data_returns_instances() {
    each_store(|_, _, alice, _| {
        assert_eq!(
            alice
                .send("MKCALENDAR", "/cosmo/dav/alice/x/", &[], "")
                .status,
            201
        );
        let weekly = ics("wk", "20070507T100000Z", "Weekly", true);
        let r = alice.send("PUT", "/cosmo/dav/alice/x/wk.ics", &[TEXT_CAL], &weekly);
        assert_eq!(r.status, 201);
        let q = r#"<C:calendar-query xmlns:C="urn:ietf:params:xml:ns:caldav" xmlns:D="DAV:"><D:prop><C:calendar-data><C:expand start="20070501T000000Z" end="20070522T000000Z"/></C:calendar-data></D:prop><C:filter><C:comp-filter name="VCALENDAR"><C:comp-filter name="VEVENT"><C:time-range start="20070501T000000Z" end="20070522T000000Z"/></C:comp-filter></C:comp-filter></C:filter></C:calendar-query>"#;
        let r = alice.send("REPORT", "/cosmo/dav/alice/x/", &[XML], q);
        assert_eq!(r.status, 207, "{}", r.body);
        assert_eq!(r.body.matches("RECURRENCE-ID:").count(), 3, "{}", r.body);
        assert!(!r.body.contains("RRULE"), "{}", r.body);
    });
}

/// A calendar's name, description, colour and order are set with PROPPATCH (all or none:
/// a protected property fails the whole request), and a VTODO-only calendar refuses an
/// event.
#[test]
fn proppatch_and_the_component_set() {
    each_store(|_, _, alice, _| {
        let mk = r#"<C:mkcalendar xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"><D:set><D:prop><D:displayname>Tasks</D:displayname><C:supported-calendar-component-set><C:comp name="VTODO"/></C:supported-calendar-component-set></D:prop></D:set></C:mkcalendar>"#;
        assert_eq!(
            alice
                .send("MKCALENDAR", "/cosmo/dav/alice/t/", &[XML], mk)
                .status,
            201
        );
        let ev = ics("e", "20070521T100000Z", "An event", false);
        let r = alice.send("PUT", "/cosmo/dav/alice/t/e.ics", &[TEXT_CAL], &ev);
        assert_eq!(r.status, 403, "{}", r.body);
        assert!(
            r.body.contains("supported-calendar-component"),
            "{}",
            r.body
        );
        let todo = ev.replace("VEVENT", "VTODO");
        let r = alice.send("PUT", "/cosmo/dav/alice/t/t.ics", &[TEXT_CAL], &todo);
        assert_eq!(r.status, 201, "{}", r.body);
        let patch = r#"<D:propertyupdate xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav" xmlns:I="http://apple.com/ns/ical/"><D:set><D:prop><D:displayname>Chores</D:displayname><C:calendar-description>Things &amp; more</C:calendar-description><I:calendar-color>#FF0000FF</I:calendar-color><I:calendar-order>3</I:calendar-order></D:prop></D:set></D:propertyupdate>"#;
        let r = alice.send("PROPPATCH", "/cosmo/dav/alice/t/", &[XML], patch);
        assert_eq!(r.status, 207, "{}", r.body);
        assert!(
            r.body.contains("200 OK") && !r.body.contains("403"),
            "{}",
            r.body
        );
        let find = r#"<D:propfind xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav" xmlns:I="http://apple.com/ns/ical/"><D:prop><D:displayname/><C:calendar-description/><I:calendar-color/><I:calendar-order/><C:supported-calendar-component-set/></D:prop></D:propfind>"#;
        let r = alice.send(
            "PROPFIND",
            "/cosmo/dav/alice/t/",
            &[XML, ("depth", "0")],
            find,
        );
        assert_eq!(r.status, 207);
        for want in [
            "Chores",
            "Things &amp; more",
            "#FF0000FF",
            ">3<",
            r#"name="VTODO""#,
        ] {
            assert!(r.body.contains(want), "{want}: {}", r.body);
        }
        assert!(!r.body.contains(r#"name="VEVENT""#), "{}", r.body);
        // A protected property fails the request: nothing changes.
        let bad = r#"<D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><D:displayname>X</D:displayname><D:getetag>"1"</D:getetag></D:prop></D:set></D:propertyupdate>"#;
        let r = alice.send("PROPPATCH", "/cosmo/dav/alice/t/", &[XML], bad);
        assert!(
            r.body.contains("403 Forbidden") && r.body.contains("424 Failed Dependency"),
            "{}",
            r.body
        );
        let r = alice.send(
            "PROPFIND",
            "/cosmo/dav/alice/t/",
            &[XML, ("depth", "0")],
            find,
        );
        assert!(r.body.contains("Chores"), "{}", r.body);
    });
}

/// free-busy-query answers the busy periods of a range, recurrences expanded, merged, and
/// without transparent events.
#[test]
fn free_busy_query_answers_busy_periods() {
    each_store(|_, _, alice, _| {
        assert_eq!(
            alice
                .send("MKCALENDAR", "/cosmo/dav/alice/fb/", &[], "")
                .status,
            201
        );
        let weekly = ics("w", "20070507T100000Z", "Weekly", true);
        let free = ics("f", "20070508T100000Z", "Free", false)
            .replace("END:VEVENT", "TRANSP:TRANSPARENT\r\nEND:VEVENT");
        for (n, body) in [("w", &weekly), ("f", &free)] {
            let r = alice.send(
                "PUT",
                &format!("/cosmo/dav/alice/fb/{n}.ics"),
                &[TEXT_CAL],
                body,
            );
            assert_eq!(r.status, 201);
        }
        let q = r#"<C:free-busy-query xmlns:C="urn:ietf:params:xml:ns:caldav"><C:time-range start="20070501T000000Z" end="20070516T000000Z"/></C:free-busy-query>"#;
        let r = alice.send("REPORT", "/cosmo/dav/alice/fb/", &[XML], q);
        assert_eq!(r.status, 200, "{}", r.body);
        assert!(r.body.contains("BEGIN:VFREEBUSY"), "{}", r.body);
        let periods: Vec<&str> = r
            .body
            .lines()
            .filter(|l| l.starts_with("FREEBUSY"))
            .collect();
        assert_eq!(
            periods,
            [
                "FREEBUSY;FBTYPE=BUSY:20070507T100000Z/20070507T103000Z\r",
                "FREEBUSY;FBTYPE=BUSY:20070514T100000Z/20070514T103000Z\r"
            ]
            .map(|p| p.trim_end_matches('\r'))
        );
    });
}

/// Users have namespaces of their own: the same collection uid, calendar name or item
/// uid used by another user neither clashes nor shows; 403 and 409 never tell that
/// someone else's exists.
#[test]
fn another_users_collections_and_items_are_neither_seen_nor_revealed() {
    each_store(|_, _, alice, bob| {
        let body = eimml("SAME", &[("ITEM", "AliceItem", "20070314T101500Z")], &[]);
        assert_eq!(
            alice
                .send("PUT", "/cosmo/mc/collection/SAME", &[EIM], &body)
                .status,
            201
        );
        let body = eimml("SAME", &[("ITEM", "BobItem", "20070314T101500Z")], &[]);
        assert_eq!(
            bob.send("PUT", "/cosmo/mc/collection/SAME", &[EIM], &body)
                .status,
            201
        );
        let a = alice.get("/cosmo/mc/collection/SAME");
        let b = bob.get("/cosmo/mc/collection/SAME");
        assert!(
            a.body.contains("AliceItem") && !a.body.contains("BobItem"),
            "{}",
            a.body
        );
        assert!(
            b.body.contains("BobItem") && !b.body.contains("AliceItem"),
            "{}",
            b.body
        );
        for who in [&mut *alice, &mut *bob] {
            let r = who.send("MKCALENDAR", "/cosmo/dav/x/", &[], "");
            assert_eq!(r.status, 403, "the path names another home");
        }
        assert_eq!(
            alice
                .send("MKCALENDAR", "/cosmo/dav/alice/cal/", &[], "")
                .status,
            201
        );
        assert_eq!(
            bob.send("MKCALENDAR", "/cosmo/dav/bob/cal/", &[], "")
                .status,
            201
        );
        assert_eq!(bob.get("/cosmo/atom/collection/SAME").status, 200);
        assert_eq!(
            bob.send("DELETE", "/cosmo/mc/collection/SAME", &[], "")
                .status,
            204
        );
        assert_eq!(
            alice.get("/cosmo/mc/collection/SAME").status,
            200,
            "Alice's is untouched"
        );
    });
}

/// Europe/Berlin and America/New_York as clients send them, with their DST rules.
const ZONES: &str = "BEGIN:VTIMEZONE\r\nTZID:Europe/Berlin\r\nBEGIN:DAYLIGHT\r\nTZOFFSETFROM:+0100\r\nTZOFFSETTO:+0200\r\nTZNAME:CEST\r\nDTSTART:19700329T020000\r\nRRULE:FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU\r\nEND:DAYLIGHT\r\nBEGIN:STANDARD\r\nTZOFFSETFROM:+0200\r\nTZOFFSETTO:+0100\r\nTZNAME:CET\r\nDTSTART:19701025T030000\r\nRRULE:FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU\r\nEND:STANDARD\r\nEND:VTIMEZONE\r\nBEGIN:VTIMEZONE\r\nTZID:America/New_York\r\nBEGIN:DAYLIGHT\r\nTZOFFSETFROM:-0500\r\nTZOFFSETTO:-0400\r\nTZNAME:EDT\r\nDTSTART:20070311T020000\r\nRRULE:FREQ=YEARLY;BYMONTH=3;BYDAY=2SU\r\nEND:DAYLIGHT\r\nBEGIN:STANDARD\r\nTZOFFSETFROM:-0400\r\nTZOFFSETTO:-0500\r\nTZNAME:EST\r\nDTSTART:20071104T020000\r\nRRULE:FREQ=YEARLY;BYMONTH=11;BYDAY=1SU\r\nEND:STANDARD\r\nEND:VTIMEZONE\r\n";

fn zoned(uid: &str, tzid: &str, start: &str, end: &str, rule: &str) -> String {
    format!(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//EN\r\n{ZONES}BEGIN:VEVENT\r\nUID:{uid}\r\nDTSTAMP:20260101T000000Z\r\nDTSTART;TZID={tzid}:{start}\r\nDTEND;TZID={tzid}:{end}\r\n{rule}SUMMARY:{uid}\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
    )
}

/// Times with a TZID are the calendar's zone's local times: time-range queries, expansion
/// across a change of offset, free-busy and Atom time-range feeds all see them in UTC.
#[test]
fn times_with_a_tzid_are_resolved_through_the_calendars_vtimezone() {
    each_store(|_, _, alice, _| {
        let cal = "/cosmo/dav/alice/tz/";
        assert_eq!(alice.send("MKCALENDAR", cal, &[], "").status, 201);
        let events = [
            // 10:00-11:00 in Berlin in April (CEST, +02:00) is 08:00-09:00 UTC.
            (
                "berlin",
                zoned(
                    "berlin",
                    "Europe/Berlin",
                    "20260415T100000",
                    "20260415T110000",
                    "",
                ),
            ),
            // 09:00-10:00 in New York in January (EST, -05:00) is 14:00-15:00 UTC.
            (
                "ny",
                zoned(
                    "ny",
                    "America/New_York",
                    "20260115T090000",
                    "20260115T100000",
                    "",
                ),
            ),
            // Weekly at 10:00 Berlin time from 22 March, across the change on 29 March.
            (
                "weekly",
                zoned(
                    "weekly",
                    "Europe/Berlin",
                    "20260322T100000",
                    "20260322T103000",
                    "RRULE:FREQ=WEEKLY;COUNT=3\r\n",
                ),
            ),
        ];
        for (n, body) in &events {
            let r = alice.send("PUT", &format!("{cal}{n}.ics"), &[TEXT_CAL], body);
            assert_eq!(r.status, 201, "{n}: {}", r.body);
        }
        let mut found = |start: &str, end: &str| {
            let r = alice.send("REPORT", cal, &[XML, ("depth", "1")], &query(start, end));
            assert_eq!(r.status, 207, "{}", r.body);
            ["berlin", "ny", "weekly"]
                .into_iter()
                .filter(|n| r.body.contains(&format!("{n}.ics")))
                .collect::<Vec<_>>()
        };
        assert_eq!(found("20260415T070000Z", "20260415T090000Z"), ["berlin"]);
        assert!(found("20260415T093000Z", "20260415T103000Z").is_empty());
        assert_eq!(found("20260115T140000Z", "20260115T150000Z"), ["ny"]);
        assert!(found("20260115T090000Z", "20260115T100000Z").is_empty());
        // The weekly event: 09:00Z before the change, 08:00Z after it.
        assert_eq!(found("20260322T090000Z", "20260322T091000Z"), ["weekly"]);
        assert!(found("20260329T090000Z", "20260329T091000Z").is_empty());
        assert_eq!(found("20260329T080000Z", "20260329T081000Z"), ["weekly"]);
        assert_eq!(found("20260405T080000Z", "20260405T081000Z"), ["weekly"]);
        // Expanded, each instance in UTC.
        let expand = r#"<C:calendar-query xmlns:C="urn:ietf:params:xml:ns:caldav"><D:prop xmlns:D="DAV:"><C:calendar-data><C:expand start="20260301T000000Z" end="20260501T000000Z"/></C:calendar-data></D:prop><C:filter><C:comp-filter name="VCALENDAR"><C:comp-filter name="VEVENT"><C:time-range start="20260301T000000Z" end="20260501T000000Z"/></C:comp-filter></C:comp-filter></C:filter></C:calendar-query>"#;
        let r = alice.send("REPORT", cal, &[XML, ("depth", "1")], expand);
        for at in ["20260322T090000Z", "20260329T080000Z", "20260405T080000Z"] {
            assert!(
                r.body.contains(&format!("RECURRENCE-ID:{at}")),
                "{at}: {}",
                r.body
            );
        }
        // Free-busy: the Berlin event is busy 08:00-09:00 UTC.
        let fb = r#"<C:free-busy-query xmlns:C="urn:ietf:params:xml:ns:caldav"><C:time-range start="20260415T000000Z" end="20260416T000000Z"/></C:free-busy-query>"#;
        let r = alice.send("REPORT", cal, &[XML], fb);
        assert!(r.body.contains("20260415T080000Z/"), "{}", r.body);
        // The same calendar as an Atom time-range feed.
        let mut feed = |s: &str, e: &str| {
            feed_titles(
                &alice
                    .get(&format!("/cosmo/atom/collection/tz?start={s}&end={e}"))
                    .body,
            )
        };
        assert_eq!(
            feed("2026-04-15T07:00:00Z", "2026-04-15T09:00:00Z"),
            ["berlin"]
        );
        assert!(feed("2026-04-15T09:30:00Z", "2026-04-15T10:30:00Z").is_empty());
    });
}

#[test]
fn the_counters_name_destinations_only_to_an_account_and_metrics_stay_open() {
    each_store(|rt, srv, alice, _| {
        let mut anyone = Client::new(rt, srv, None);
        let mut wrong = Client::new(rt, srv, Some(("alice", "not-hers")));
        assert_eq!(anyone.get("/cosmo/_loadmix/stats").status, 401);
        assert_eq!(wrong.get("/cosmo/_loadmix/stats").status, 401);
        let r = alice.get("/cosmo/_loadmix/stats");
        assert_eq!(r.status, 200, "{}", r.body);
        assert!(r.body.contains("\"stomp\""), "{}", r.body);
        // Prometheus scrapes without credentials; the page names no destination.
        let m = anyone.get("/cosmo/_loadmix/metrics");
        assert_eq!(m.status, 200);
        assert!(
            m.body.contains("loadmix_server_requests_total"),
            "{}",
            m.body
        );
    });
}
