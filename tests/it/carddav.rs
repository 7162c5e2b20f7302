//! CardDAV: the shipped address book workload against the embedded server on both stores,
//! its counts held against the server's own request for request; the server's address
//! books as a client meets them (discovery, extended MKCOL, vCards checked, queries,
//! multigets, sync, and what an address book refuses that a calendar takes and the other
//! way round); and the driver's verdict on a server that answers empty where contacts are.

use crate::common::*;
use crate::server::each_store;
use loadmix::embedded::StoreSpec;
use loadmix::embedded::{self as server, ServerConfig};

/// Every answer the server counted is one the report counted: measured (every request
/// of an operation), set-up (the preflight's too) and cleanup.
fn every_answer_counted(r: &loadmix::reports::Report, srv: &loadmix::embedded::ServerHandle) {
    let measured: u64 = r
        .summary
        .ops
        .iter()
        .map(|o| o.status.values().sum::<u64>())
        .sum();
    let setup = r.preflight.requests + r.rounds.iter().map(|x| x.setup.requests).sum::<u64>();
    let cleanup: u64 = r.rounds.iter().map(|x| x.cleanup.requests).sum();
    let answered: u64 = srv.stats.snapshot().iter().map(|(_, _, n)| n).sum();
    assert_eq!(answered, measured + setup + cleanup);
}

fn count(r: &loadmix::reports::Report, op: &str) -> u64 {
    r.summary
        .ops
        .iter()
        .find(|o| o.op == op)
        .map_or(0, |o| o.requests)
}

#[test]
fn the_address_book_workload_runs_clean_and_agrees_with_the_server_on_both_stores() {
    let dir = tempfile::tempdir().unwrap();
    for store in [
        StoreSpec::Memory,
        StoreSpec::Sqlite(dir.path().join("d.db").display().to_string()),
    ] {
        let rt = runtime();
        let srv = rt
            .block_on(server::start(ServerConfig {
                store: store.clone(),
                ..ServerConfig::default()
            }))
            .unwrap();
        let tmp = tempdir();
        let out = out_dir(&tmp);
        let code = loadmix(&[
            "run",
            &path_str(&root().join("workloads/carddav-sync.yaml")),
            "--target",
            &srv.url(),
            "--iterations",
            "150",
            "--rounds",
            "1",
            "--set",
            "think=0ms",
            "--set",
            "users.book.count=4",
            "--set",
            "users.book.params.initial_contacts=25",
            "--out",
            &path_str(&out),
            "--quiet",
        ]);
        assert_eq!(code, 0, "{store:?}");
        let r = read_report(&out);
        assert_eq!(r.summary.total.failures, 0, "{store:?}: {:?}", r.failures);
        let ops = [
            "book.delta_sync",
            "book.initial_sync",
            "book.addressbook_query",
            "book.addressbook_multiget",
            "book.get_contact",
            "book.put_contact",
            "book.update_contact",
            "book.propfind",
            "book.delete_contact",
            "book.create_addressbook",
        ];
        for op in ops {
            assert!(count(&r, op) > 0, "{store:?}: {op} never ran");
        }
        let untimed = |k: &str| {
            r.preflight.answers.get(k).copied().unwrap_or(0)
                + r.rounds
                    .iter()
                    .map(|x| x.setup.answers.get(k).copied().unwrap_or(0))
                    .sum::<u64>()
        };
        // Set-up: each user's first address book and its 25 contacts; discovery is a
        // well-known redirect, the principal and the home, for each user and the preflight.
        assert_eq!(untimed("MKCOL 201"), 4);
        assert_eq!(untimed("PUT 201"), 4 * 25 + 4 + 1, "contacts and accounts");
        assert_eq!(untimed("PROPFIND 301"), 4 + 1);
        assert_eq!(untimed("PROPFIND 207"), 2 * (4 + 1));
        let s = &srv.stats;
        let cleanup: u64 = r.rounds.iter().map(|x| x.cleanup.requests).sum();
        assert_eq!(r.rounds.iter().map(|x| x.cleanup.failures).sum::<u64>(), 0);
        assert_eq!(
            s.count("MKCOL", 201),
            count(&r, "book.create_addressbook") + untimed("MKCOL 201")
        );
        assert_eq!(
            s.count("PUT", 201),
            count(&r, "book.put_contact") + untimed("PUT 201")
        );
        assert_eq!(s.count("PUT", 204), count(&r, "book.update_contact"));
        assert_eq!(s.count("GET", 200), count(&r, "book.get_contact"));
        assert_eq!(
            s.count("DELETE", 204),
            count(&r, "book.delete_contact") + cleanup
        );
        // A sync is one operation of several REPORTs (its listing, then its fetches):
        // every answer is in the report's status counts.
        let answered_207: u64 = r
            .summary
            .ops
            .iter()
            .filter(|o| o.op != "book.propfind")
            .map(|o| o.status.get("207").copied().unwrap_or(0))
            .sum();
        assert_eq!(s.count("REPORT", 207), answered_207);
        let initial = op(&r, "book.initial_sync");
        assert!(
            initial.status.get("207").copied().unwrap_or(0) >= 2 * initial.requests,
            "a listing and at least one fetch each: {:?}",
            initial.status
        );
        assert_eq!(
            s.count("PROPFIND", 207),
            count(&r, "book.propfind") + untimed("PROPFIND 207")
        );
        // Answers, not operations: a sync is one operation of several requests.
        every_answer_counted(&r, &srv);
        rt.block_on(srv.stop());
    }
}

const XML: (&str, &str) = ("content-type", "application/xml");
const VCARD: (&str, &str) = ("content-type", "text/vcard");
const MKCOL_BOOK: &str = r#"<D:mkcol xmlns:D="DAV:" xmlns:CR="urn:ietf:params:xml:ns:carddav"><D:set><D:prop><D:resourcetype><D:collection/><CR:addressbook/></D:resourcetype><D:displayname>Friends</D:displayname><CR:addressbook-description>mine</CR:addressbook-description></D:prop></D:set></D:mkcol>"#;

fn card(uid: &str, name: &str, email: &str) -> String {
    format!(
        "BEGIN:VCARD\r\nVERSION:3.0\r\nUID:{uid}\r\nFN:{name}\r\nN:{name};;;;\r\nEMAIL;TYPE=INTERNET:{email}\r\nEND:VCARD\r\n"
    )
}

fn query(prop: &str, text: &str) -> String {
    format!(
        r#"<CR:addressbook-query xmlns:D="DAV:" xmlns:CR="urn:ietf:params:xml:ns:carddav"><D:prop><D:getetag/><CR:address-data/></D:prop><CR:filter><CR:prop-filter name="{prop}"><CR:text-match match-type="contains">{text}</CR:text-match></CR:prop-filter></CR:filter></CR:addressbook-query>"#
    )
}

#[test]
fn the_embedded_server_keeps_address_books_of_checked_vcards_apart_from_calendars() {
    each_store(|_, _, alice, bob| {
        let r = alice.send("PROPFIND", "/cosmo/dav/alice/", &[("depth", "0")], r#"<D:propfind xmlns:D="DAV:" xmlns:CR="urn:ietf:params:xml:ns:carddav"><D:prop><CR:addressbook-home-set/></D:prop></D:propfind>"#);
        assert!(
            r.body
                .contains("<CR:addressbook-home-set><D:href>/cosmo/dav/alice/</D:href>"),
            "{}",
            r.body
        );
        let book = "/cosmo/dav/alice/friends/";
        assert_eq!(alice.send("MKCOL", book, &[XML], MKCOL_BOOK).status, 201);
        let both = MKCOL_BOOK.replace(
            "<CR:addressbook/>",
            r#"<CR:addressbook/><C:calendar xmlns:C="urn:ietf:params:xml:ns:caldav"/>"#,
        );
        let r = alice.send("MKCOL", "/cosmo/dav/alice/both/", &[XML], &both);
        assert_eq!(r.status, 403, "a calendar and an address book at once");
        let r = alice.send("PROPFIND", book, &[("depth", "0")], "");
        assert!(
            r.body.contains("<CR:addressbook/>") && !r.body.contains("<C:calendar/>"),
            "{}",
            r.body
        );
        // Contacts: checked as vCards, their UID held per book.
        let ann = format!("{book}ann.vcf");
        let r = alice.send(
            "PUT",
            &ann,
            &[VCARD],
            &card("u-ann", "Ann Élise", "ann@example.org"),
        );
        assert_eq!(r.status, 201);
        let etag = r.header("etag").to_string();
        let r = alice.send(
            "PUT",
            &format!("{book}bob.vcf"),
            &[VCARD],
            &card("u-bob", "Bob Lee", "bob@example.org"),
        );
        assert_eq!(r.status, 201);
        let r = alice.send(
            "PUT",
            &format!("{book}dup.vcf"),
            &[VCARD],
            &card("u-ann", "Ann", "a@x"),
        );
        assert_eq!(r.status, 409, "{}", r.body);
        assert!(
            r.body.contains("no-uid-conflict") && r.body.contains("carddav"),
            "{}",
            r.body
        );
        let no_uid = "BEGIN:VCARD\r\nVERSION:3.0\r\nFN:X\r\nN:X;;;;\r\nEND:VCARD\r\n";
        let r = alice.send("PUT", &format!("{book}x.vcf"), &[VCARD], no_uid);
        assert_eq!(r.status, 400);
        assert!(r.body.contains("valid-address-data"), "{}", r.body);
        assert!(!r.header("x-loadmix-reason").is_empty());
        let ics = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nUID:e\r\nDTSTART:20070101T000000Z\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";
        let r = alice.send(
            "PUT",
            &format!("{book}e.ics"),
            &[("content-type", "text/calendar")],
            ics,
        );
        assert_eq!(r.status, 415, "an event is not a contact");
        let r = alice.get(&ann);
        assert_eq!(
            (r.status, r.header("content-type")),
            (200, "text/vcard; charset=utf-8")
        );
        assert!(r.body.contains("FN:Ann Élise"));
        // The whole book, as an export: its vCards one after the other.
        let r = alice.get(book);
        assert_eq!(r.header("content-type"), "text/vcard; charset=utf-8");
        assert_eq!(r.body.matches("BEGIN:VCARD").count(), 2, "{}", r.body);
        let r = alice.send(
            "PUT",
            &ann,
            &[VCARD, ("if-match", "\"nope\"")],
            &card("u-ann", "Ann", "a@x"),
        );
        assert_eq!(r.status, 412);
        let r = alice.send(
            "PUT",
            &ann,
            &[VCARD, ("if-match", &etag)],
            &card("u-ann", "Ann Élise Lee", "ann@example.org"),
        );
        assert_eq!(r.status, 204);
        // Queries: by name without case, by address; what the server cannot answer truly
        // is refused with CardDAV's precondition.
        let r = alice.send(
            "REPORT",
            book,
            &[XML, ("depth", "1")],
            &query("FN", "élise"),
        );
        assert_eq!(r.status, 207);
        assert!(
            r.body.contains("ann.vcf") && !r.body.contains("bob.vcf"),
            "{}",
            r.body
        );
        assert!(
            r.body.contains("<CR:address-data>BEGIN:VCARD"),
            "{}",
            r.body
        );
        let r = alice.send("REPORT", book, &[XML], &query("EMAIL", "bob@"));
        assert!(
            r.body.contains("bob.vcf") && !r.body.contains("ann.vcf"),
            "{}",
            r.body
        );
        let r = alice.send("REPORT", book, &[XML], &query("TEL", "555"));
        assert_eq!(r.status, 403);
        assert!(r.body.contains("supported-filter"), "{}", r.body);
        let multiget = format!(
            r#"<CR:addressbook-multiget xmlns:D="DAV:" xmlns:CR="urn:ietf:params:xml:ns:carddav"><D:prop><D:getetag/><CR:address-data/></D:prop><D:href>{ann}</D:href><D:href>{book}gone.vcf</D:href></CR:addressbook-multiget>"#
        );
        let r = alice.send("REPORT", book, &[XML], &multiget);
        assert!(
            r.body.contains("Ann Élise Lee") && r.body.contains("404 Not Found"),
            "{}",
            r.body
        );
        // Sync: everything, then only what changed.
        let sync = |t: &str| {
            format!(
                r#"<D:sync-collection xmlns:D="DAV:"><D:sync-token>{t}</D:sync-token><D:sync-level>1</D:sync-level><D:prop><D:getetag/></D:prop></D:sync-collection>"#
            )
        };
        let r = alice.send("REPORT", book, &[XML], &sync(""));
        assert_eq!(r.body.matches("<D:response>").count(), 2, "{}", r.body);
        let token = r
            .body
            .split("<D:sync-token>")
            .nth(1)
            .unwrap()
            .split('<')
            .next()
            .unwrap()
            .to_string();
        assert_eq!(
            alice
                .send("DELETE", &format!("{book}bob.vcf"), &[], "")
                .status,
            204
        );
        let r = alice.send("REPORT", book, &[XML], &sync(&token));
        assert!(
            r.body.contains("bob.vcf") && r.body.contains("404") && !r.body.contains("ann.vcf"),
            "{}",
            r.body
        );
        // A calendar's reports are not an address book's, nor the other way round.
        let cal_query = r#"<C:calendar-query xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"><D:prop><D:getetag/></D:prop><C:filter><C:comp-filter name="VCALENDAR"/></C:filter></C:calendar-query>"#;
        assert_eq!(alice.send("REPORT", book, &[XML], cal_query).status, 403);
        let mk = r#"<C:mkcalendar xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"/>"#;
        assert_eq!(
            alice
                .send("MKCALENDAR", "/cosmo/dav/alice/work/", &[XML], mk)
                .status,
            201
        );
        assert_eq!(
            alice
                .send(
                    "REPORT",
                    "/cosmo/dav/alice/work/",
                    &[XML],
                    &query("FN", "a")
                )
                .status,
            403
        );
        let r = alice.send(
            "PUT",
            "/cosmo/dav/alice/work/c.vcf",
            &[VCARD],
            &card("c", "C", "c@x"),
        );
        assert_eq!(r.status, 415, "a contact is not an event");
        // The mark cannot be written, and another user's book is not theirs to read.
        let patch = r#"<D:propertyupdate xmlns:D="DAV:" xmlns:CR="urn:ietf:params:xml:ns:carddav"><D:remove><D:prop><CR:addressbook/></D:prop></D:remove></D:propertyupdate>"#;
        let r = alice.send("PROPPATCH", book, &[XML], patch);
        assert!(r.body.contains("403 Forbidden"), "{}", r.body);
        assert!(
            alice
                .send("PROPFIND", book, &[("depth", "0")], "")
                .body
                .contains("<CR:addressbook/>")
        );
        assert_eq!(bob.get(&ann).status, 403);
    });
}

#[test]
fn a_server_that_answers_empty_where_contacts_are_fails_the_sync_and_the_query() {
    // Discovery, an address book and its contacts as a server makes them; then every
    // REPORT answered with a multistatus that names nothing but a token: the Stalwart
    // bug, an empty answer where items exist.
    let rt = runtime();
    let addr = scripted(&rt, |method, path, _body| match (method, path) {
        ("PUT", _) => http_response("201 Created", "text/plain", ""),
        ("MKCOL", _) => http_response("201 Created", "text/plain", ""),
        ("REPORT", _) => http_response(
            "207 Multi-Status",
            "application/xml",
            r#"<multistatus xmlns="DAV:"><sync-token>t1</sync-token></multistatus>"#,
        ),
        _ => http_response("404 Not Found", "text/plain", ""),
    });
    let tmp = tempdir();
    let out = out_dir(&tmp);
    let book = Book {
        iterations: 4,
        users: 1,
        contacts: 3,
    };
    let w = book_workload(
        &tmp,
        addr,
        book,
        "{ sync_collection: 1, addressbook_query: 1 }",
    );
    loadmix(&["run", &path_str(&w), "--out", &path_str(&out), "--quiet"]);
    let r = read_report(&out);
    let sync = op(&r, "c.sync_collection");
    let query = op(&r, "c.addressbook_query");
    assert!(sync.requests + query.requests > 0);
    // The first sync, from scratch, must list them; the later ones, from its token, may
    // rightly say nothing changed.
    assert!(sync.requests > 1, "{:?}", r.summary.ops);
    assert_eq!(sync.failures, 1, "{:?}", r.failures);
    assert_eq!(query.failures, query.requests, "{:?}", r.failures);
    let why: Vec<&str> = r.failures.iter().map(|f| f.detail.as_str()).collect();
    assert!(
        why.iter()
            .any(|d| d.contains("none of the 3 contacts the user holds is listed")),
        "{why:?}"
    );
    assert!(
        why.iter().any(|d| d.contains("is not in the answer")),
        "{why:?}"
    );
}

/// Syncs as clients make them, on calendars and address books alike: an initial sync
/// lists the collection (sync-collection, or PROPFIND) and fetches every member
/// (multigets of the batch, or a GET each); a delta sync fetches only what changed. Each
/// is one operation, and every request of it is in the report's answers, as the server
/// counted them.
#[test]
fn initial_and_delta_syncs_fetch_what_clients_fetch_and_every_request_is_counted() {
    let rt = runtime();
    let srv = rt.block_on(server::start(ServerConfig::default())).unwrap();
    let tmp = tempdir();
    let out = out_dir(&tmp);
    let w = tmp.path().join("w.yaml");
    std::fs::write(
        &w,
        format!(
            r#"target: {}
context: /cosmo
accounts: {{ create: cmp }}
run: {{ iterations: 3, warmup: 0s }}
think: 0ms
users:
  - class: books
    protocol: carddav
    count: 1
    params: {{ initial_contacts: 25 }}
    mix: {{ initial_sync: 1 }}
  - class: old_books
    protocol: carddav
    count: 1
    params: {{ initial_contacts: 25 }}
    mix: {{ initial_sync: {{ weight: 1, params: {{ listing: propfind, fetch: get }} }} }}
  - class: cals
    protocol: caldav
    count: 1
    params: {{ initial_events: 25 }}
    mix: {{ initial_sync: {{ weight: 1, params: {{ batch: 7 }} }} }}
  - class: writers
    protocol: carddav
    count: 1
    iterations: 8
    ops:
      put_contact: 1
      delta_sync: 1
    behaviours:
      write_then_sync:
        weight: 1
        start: put_contact
        states:
          put_contact: {{ delta_sync: 1 }}
          delta_sync: {{ put_contact: 1 }}
"#,
            srv.url()
        ),
    )
    .unwrap();
    let code = loadmix(&["run", &path_str(&w), "--out", &path_str(&out), "--quiet"]);
    assert_eq!(code, 0);
    let r = read_report(&out);
    assert_eq!(r.summary.total.failures, 0, "{:?}", r.failures);
    let status = |name: &str, code: &str| op(&r, name).status.get(code).copied().unwrap_or(0);
    // 25 contacts: a listing and 3 multigets of 10, three times.
    assert_eq!(op(&r, "books.initial_sync").requests, 3);
    assert_eq!(status("books.initial_sync", "207"), 3 * (1 + 3));
    // A PROPFIND and a GET each.
    assert_eq!(status("old_books.initial_sync", "207"), 3);
    assert_eq!(status("old_books.initial_sync", "200"), 3 * 25);
    // 25 events in multigets of 7: 4 of them.
    assert_eq!(status("cals.initial_sync", "207"), 3 * (1 + 4));
    // After each put, the delta sync lists what changed since its token and fetches it:
    // its first from no token fetches the one contact there, every later one the one new.
    assert_eq!(op(&r, "writers.delta_sync").requests, 4);
    assert_eq!(status("writers.delta_sync", "207"), 4 * 2);
    let s = &srv.stats;
    every_answer_counted(&r, &srv);
    assert_eq!(s.count("GET", 200), status("old_books.initial_sync", "200"));
    rt.block_on(srv.stop());
}

/// A user's set-up fills its address book several PUTs at a time, within the bound
/// (`SETUP_LANES`, 4), over connections of its own, and every one is counted off the
/// clock as the server answered it.
#[test]
fn set_up_fills_a_book_several_puts_at_once_within_the_bound() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let rt = runtime();
    let (now, most, puts) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    let (n, m, p) = (now.clone(), most.clone(), puts.clone());
    let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
        let (now, most, puts) = (n.clone(), m.clone(), p.clone());
        async move {
            if req.method() != axum::http::Method::PUT {
                return (axum::http::StatusCode::CREATED, String::new());
            }
            let at_once = now.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(at_once, Ordering::SeqCst);
            // Held until two PUTs have been in flight at once (however slow the machine),
            // or for 5 s when none comes: a set-up that sends one at a time shows as 1.
            for _ in 0..500 {
                if most.load(Ordering::SeqCst) >= 2 {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            now.fetch_sub(1, Ordering::SeqCst);
            puts.fetch_add(1, Ordering::SeqCst);
            (axum::http::StatusCode::CREATED, String::new())
        }
    });
    let addr = serve_app(&rt, app);
    let tmp = tempdir();
    let out = out_dir(&tmp);
    let book = Book {
        iterations: 1,
        users: 1,
        contacts: 12,
    };
    let w = book_workload(&tmp, addr, book, "{ create_addressbook: 1 }");
    assert_eq!(
        loadmix(&["run", &path_str(&w), "--out", &path_str(&out), "--quiet"]),
        0
    );
    let r = read_report(&out);
    let most = most.load(Ordering::SeqCst);
    assert!((2..=4).contains(&most), "{most} PUTs in flight at most");
    assert_eq!(puts.load(Ordering::SeqCst), 12);
    assert_eq!(r.rounds[0].setup.answers.get("PUT 201"), Some(&12));
}

/// The shipped groupware workload: returning users whose calendar and contacts apps sync
/// from scratch the first time (`when: { synced: false }`) and from their token after;
/// every count equal to the server's.
#[test]
fn groupware_users_sync_from_scratch_once_and_from_their_token_after() {
    let rt = runtime();
    let srv = rt.block_on(server::start(ServerConfig::default())).unwrap();
    let tmp = tempdir();
    let out = out_dir(&tmp);
    let code = loadmix(&[
        "run",
        &path_str(&root().join("workloads/groupware.yaml")),
        "--target",
        &srv.url(),
        "--duration",
        "8s",
        "--rounds",
        "1",
        "--set",
        "users.calendar.arrival.rate=4/s",
        "--set",
        "users.contacts.arrival.rate=4/s",
        "--set",
        "users.calendar.arrival.returning=4",
        "--set",
        "users.contacts.arrival.returning=4",
        "--set",
        "users.calendar.params.initial_events=40",
        "--set",
        "users.contacts.params.initial_contacts=40",
        "--set",
        "think=50ms",
        "--out",
        &path_str(&out),
        "--quiet",
    ]);
    assert_eq!(code, 0);
    let r = read_report(&out);
    assert_eq!(r.summary.total.failures, 0, "{:?}", r.failures);
    for class in ["calendar", "contacts"] {
        let initial = op(&r, &format!("{class}.initial_sync")).requests;
        let delta = op(&r, &format!("{class}.delta_sync")).requests;
        let sessions = op(&r, &format!("{class}.propfind")).requests;
        // A session opens with a PROPFIND; only a user's first syncs from scratch.
        assert!(
            sessions > 4,
            "{class}: no user came back ({sessions} sessions)"
        );
        assert!(
            (1..=4).contains(&initial),
            "{class}: {initial} initial syncs for 4 users"
        );
        assert!(delta >= sessions - initial, "{class}: {delta} delta syncs");
    }
    every_answer_counted(&r, &srv);
    rt.block_on(srv.stop());
}

/// A server that refuses an item over its size limit with 412, as Radicale answers one
/// over its `max_resource_size`: a sweep of the photos' size fills the book at the small
/// point and stops at the large one's first contact. The failed set-up says the item's
/// size and what such a 412 can mean, and the sweep names the point that did not measure
/// its value, in its table, `sweep.json` and `sweep.csv`.
#[test]
fn a_sweep_names_the_points_whose_set_ups_failed_and_a_412_says_the_size() {
    const LIMIT: usize = 50_000;
    let rt = runtime();
    let app = axum::Router::new().fallback(|req: axum::extract::Request| async move {
        let put = req.method() == axum::http::Method::PUT;
        let body = axum::body::to_bytes(req.into_body(), 1 << 24)
            .await
            .unwrap();
        match put && body.len() > LIMIT {
            true => (axum::http::StatusCode::PRECONDITION_FAILED, String::new()),
            false => (axum::http::StatusCode::CREATED, String::new()),
        }
    });
    let addr = serve_app(&rt, app);
    let tmp = tempdir();
    let out = out_dir(&tmp);
    let book = Book {
        iterations: 1,
        users: 2,
        contacts: 5,
    };
    let w = book_workload(
        &tmp,
        addr,
        book,
        "{ create_addressbook: 1, put_contact: { weight: 0, params: { photo: 1KiB } } }",
    );
    let o = loadmix_bin(&[
        "run",
        &path_str(&w),
        "--sweep",
        "users.c.mix.put_contact.params.photo=1KiB,64KiB",
        "--out",
        &path_str(&out),
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let key = "users.c.mix.put_contact.params.photo";
    assert!(
        stdout.contains(&format!("user set-ups failed at {key} = 64KiB (2): ")),
        "{stdout}"
    );
    assert!(!stdout.contains("= 1KiB ("), "{stdout}");
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("sweep.json")).unwrap()).unwrap();
    // The large point's report names its first failed set-up and why.
    let dir = j["reports"][1][0]["dir"].as_str().unwrap();
    let text = std::fs::read_to_string(std::path::Path::new(dir).join("report.txt")).unwrap();
    assert!(
        text.contains("initial contact 1 of 5: PUT ")
            && text.contains("bytes: a 412 to a create under a new name is how some servers refuse an item over their size limit"),
        "{text}"
    );
    assert_eq!(j["setup_failures"], serde_json::json!([[0], [2]]), "{j}");
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    assert!(
        csv.lines()
            .next()
            .unwrap()
            .ends_with(",setup_failures,failures,timed_out_for_client"),
        "{csv}"
    );
    // Two set-ups failed at the large point; no operation did.
    assert!(csv.lines().nth(2).unwrap().ends_with(",2,0,0"), "{csv}");
}

/// How long set-up held the clock back is said: a server that takes 100 ms over each
/// PUT, eight contacts four at a time, is at least two PUTs' time in set-up.
#[test]
fn the_report_says_how_long_set_up_took() {
    let rt = runtime();
    let app = axum::Router::new().fallback(|req: axum::extract::Request| async move {
        if req.method() == axum::http::Method::PUT {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        (axum::http::StatusCode::CREATED, String::new())
    });
    let addr = serve_app(&rt, app);
    let tmp = tempdir();
    let out = out_dir(&tmp);
    let book = Book {
        iterations: 1,
        users: 1,
        contacts: 8,
    };
    let w = book_workload(&tmp, addr, book, "{ create_addressbook: 1 }");
    assert_eq!(
        loadmix(&["run", &path_str(&w), "--out", &path_str(&out), "--quiet"]),
        0
    );
    let r = read_report(&out);
    assert!(r.rounds[0].setup_s >= 0.2, "{}", r.rounds[0].setup_s);
    let text = std::fs::read_to_string(out.join("report.txt")).unwrap();
    assert!(
        text.contains("the rest in the users' set-ups, which took "),
        "{text}"
    );
}

/// One class `c` of carddav users against a bare server (address books under `/home/`),
/// each filling its book with `contacts` in set-up, then making `iterations` picks.
struct Book {
    iterations: u32,
    users: u32,
    contacts: u32,
}

/// `b`'s workload against `addr`, its class's `mix` a YAML flow map, written into `tmp`;
/// its path.
fn book_workload(
    tmp: &tempfile::TempDir,
    addr: std::net::SocketAddr,
    b: Book,
    mix: &str,
) -> std::path::PathBuf {
    let w = tmp.path().join("w.yaml");
    std::fs::write(
        &w,
        format!(
            "target: http://{addr}\ncontext: ''\nrun: {{ iterations: {} }}\nusers:\n  - class: c\n    protocol: carddav\n    count: {}\n    params: {{ addressbook_home: /home/, initial_contacts: {} }}\n    mix: {mix}\n",
            b.iterations, b.users, b.contacts
        ),
    )
    .unwrap();
    w
}
