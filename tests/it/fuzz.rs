//! Property tests over everything that reads hostile bytes: the workload loader, the XML,
//! WebDAV, iCalendar, EIMML and EIM-JSON parsers, and the embedded server's handlers. No
//! input may panic or hang; the server answers every request and never with a 500 (which
//! its panic guard would turn a crash into). Each property runs a fixed, bounded number of
//! cases from a fixed seed, so the test command stays deterministic.

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use crate::common::*;
use loadmix::formats::{dav, eim, ical, stomp, vcard, xml};

/// A runner with a fixed seed and `cases` cases.
fn runner(cases: u32) -> TestRunner {
    TestRunner::new_with_rng(
        Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]),
    )
}

/// Valid documents of each format, to mutate: most interesting inputs are near misses.
const SEEDS: &[&str] = &[
    r#"<?xml version="1.0"?><D:multistatus xmlns:D="DAV:"><D:response><D:href>/a</D:href><D:propstat><D:prop><D:getetag>"1"</D:getetag></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response><D:sync-token>t</D:sync-token></D:multistatus>"#,
    r#"<eim:collection uuid="C" xmlns:eim="http://osafoundation.org/eim/0"><eim:recordset uuid="I"><item:record xmlns:item="http://osafoundation.org/eim/item/0"><item:uuid eim:key="true" eim:type="text">I</item:uuid></item:record></eim:recordset></eim:collection>"#,
    "BEGIN:VCARD\r\nVERSION:3.0\r\nUID:u\r\nN:Doe;Jane;;;\r\nFN:Jane\\, D\r\nitem1.EMAIL;TYPE=INTERNET:j@x\r\n .org\r\nPHOTO;ENCODING=b:QUJD\r\nEND:VCARD\r\n",
    r#"<CR:addressbook-query xmlns:D="DAV:" xmlns:CR="urn:ietf:params:xml:ns:carddav"><D:prop><D:getetag/><CR:address-data/></D:prop><CR:filter test="allof"><CR:prop-filter name="FN" test="anyof"><CR:text-match collation="i;unicode-casemap" match-type="starts-with" negate-condition="no">Jä</CR:text-match></CR:prop-filter><CR:prop-filter name="EMAIL"><CR:is-not-defined/></CR:prop-filter></CR:filter><CR:limit><CR:nresults>2</CR:nresults></CR:limit></CR:addressbook-query>"#,
    r#"<D:mkcol xmlns:D="DAV:" xmlns:CR="urn:ietf:params:xml:ns:carddav"><D:set><D:prop><D:resourcetype><D:collection/><CR:addressbook/></D:resourcetype></D:prop></D:set></D:mkcol>"#,
    "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nUID:u\r\nDTSTART:20070101T100000Z\r\nDURATION:PT1H\r\nRRULE:FREQ=WEEKLY;COUNT=3\r\nSUMMARY:a\\, b\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n",
    r#"{"uuid":"u","records":{"item":{"prefix":"item","ns":"urn:x","key":{"uuid":["text","u"]},"fields":{"title":["text",null]}}}}"#,
    "users:\n  - class: a\n    protocol: http\n    count: 2\n    think: { uniform: [0ms, 5ms] }\n    mix:\n      get: { weight: 1, path: \"/x/{vu}\", capture: { id: { json: /id } } }\n      put: { weight: 2, method: PUT, path: \"/x/{id}\", body: { random: 1KiB } }\nthresholds:\n  - { op: a.get, p95: \"< 10ms\" }\n",
];

/// One of `seeds` with a number of `edits` of its bytes replaced, inserted or cut.
fn mutated(
    seeds: &'static [&'static str],
    edits: std::ops::Range<usize>,
) -> impl Strategy<Value = Vec<u8>> {
    (
        0..seeds.len(),
        proptest::collection::vec((any::<u16>(), any::<u8>(), 0u8..3), edits),
    )
        .prop_map(move |(i, edits)| {
            let mut b = seeds[i].as_bytes().to_vec();
            for (at, byte, kind) in edits {
                let at = at as usize % (b.len() + 1);
                match kind {
                    0 if at < b.len() => b[at] = byte,
                    1 => b.insert(at, byte),
                    _ => b.truncate(at),
                }
            }
            b
        })
}

/// Either arbitrary text, or one of the seeds with a few bytes replaced, inserted or cut.
fn hostile_text() -> impl Strategy<Value = String> {
    prop_oneof![
        mutated(SEEDS, 1..8).prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        any::<String>(),
        "[<>{}\\[\\]:;,=&\"' \r\n-]{0,200}"
    ]
}

#[test]
fn the_parsers_never_panic() {
    runner(600)
        .run(&hostile_text(), |text| {
            let _ = xml::parse(&text);
            let _ = xml::check_depth(text.as_bytes());
            let _ = dav::parse_multistatus(text.as_bytes());
            let _ = eim::parse_eimml(&text);
            let _ = eim::from_json(&text);
            if let Ok(c) = ical::parse(&text) {
                let _ = c.dtstart.as_deref().map(ical::parse_datetime);
                let _ = c.duration.as_deref().map(ical::parse_duration);
            }
            let _ = loadmix::embedded::parse_ics(&text).map(|(_, d)| d.timing());
            let _ = vcard::parse(&text);
            Ok(())
        })
        .unwrap();
}

/// STOMP frames near valid ones (a SEND, a MESSAGE with a content-length, a CONNECTED),
/// cut, changed and fed in pieces (a frame buffer, too, a few bytes at a time): the
/// decoder never panics, never takes more than it was
/// given, and stays within its bounds; what it decodes encodes and decodes to the same.
#[test]
fn the_stomp_decoder_never_panics_and_what_it_reads_round_trips() {
    const FRAMES: &[&[u8]] = &[
        b"SEND\ndestination:/queue/a\nreceipt:1\npersistent:true\n\nhello\0",
        b"MESSAGE\r\nsubscription:0\r\nmessage-id:x\\c1\r\ncontent-length:5\r\n\r\nab\0cd\0\n\n",
        b"CONNECTED\nversion:1.2\nheart-beat:0,0\nserver:a\\b\n\n\0",
        b"ERROR\nmessage:no such queue\n\nthe detail\0",
    ];
    let bytes = (
        0..FRAMES.len(),
        proptest::collection::vec((any::<u16>(), any::<u8>(), 0u8..3), 0..6),
        any::<u16>(),
    )
        .prop_map(|(i, edits, split)| {
            let mut b = FRAMES[i].to_vec();
            for (at, byte, kind) in edits {
                let at = at as usize % (b.len() + 1);
                match kind {
                    0 if at < b.len() => b[at] = byte,
                    1 => b.insert(at, byte),
                    _ => b.truncate(at),
                }
            }
            let split = split as usize % (b.len() + 1);
            (b, split)
        });
    let strategy = prop_oneof![
        bytes,
        (proptest::collection::vec(any::<u8>(), 0..300), any::<u16>()).prop_map(|(b, s)| {
            let n = s as usize % (b.len() + 1);
            (b, n)
        }),
    ];
    let limits = stomp::Limits {
        max_head: 256,
        max_headers: 8,
        max_body: 64,
    };
    runner(2000)
        .run(&strategy, |(wire, split)| {
            let mut buf = bytes::BytesMut::new();
            let mut frames = Vec::new();
            'feed: for part in [&wire[..split], &wire[split..]] {
                buf.extend_from_slice(part);
                loop {
                    match stomp::decode(&mut buf, &limits) {
                        Ok(Some(f)) => frames.push(f),
                        Ok(None) => break,
                        Err(_) => break 'feed,
                    }
                }
            }
            prop_assert!(frames.len() <= wire.len());
            // A frame buffer fed a few bytes at a time, resuming its search each time,
            // reads what the one-shot decoder reads (up to where either refuses).
            let mut fb = stomp::FrameBuffer::default();
            let mut trickled = Vec::new();
            let mut refused = false;
            'trickle: for part in wire.chunks(split % 7 + 1) {
                fb.tail().extend_from_slice(part);
                loop {
                    match fb.decode(&limits) {
                        Ok(Some(f)) => trickled.push(f),
                        Ok(None) => break,
                        Err(_) => {
                            refused = true;
                            break 'trickle;
                        }
                    }
                }
            }
            let n = trickled.len().min(frames.len());
            prop_assert_eq!(&trickled[..n], &frames[..n]);
            prop_assert!(refused || trickled.len() >= frames.len());
            for f in frames {
                prop_assert!(f.body.len() <= limits.max_body);
                prop_assert!(f.headers.len() <= limits.max_headers);
                let mut again = Vec::new();
                f.encode(&mut again);
                let back = stomp::decode(
                    &mut bytes::BytesMut::from(&again[..]),
                    &stomp::Limits::default(),
                );
                let back = back.unwrap().unwrap();
                prop_assert_eq!(&back.command, &f.command);
                prop_assert_eq!(&back.body, &f.body);
                prop_assert_eq!(back.get("destination"), f.get("destination"));
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn the_workload_loader_never_panics() {
    runner(400)
        .run(&hostile_text(), |text| {
            let _ = loadmix::load_str("fuzz.yaml", &text, &[], None);
            Ok(())
        })
        .unwrap();
}

/// The requests a user may send to the embedded server: any method and body to each
/// service, as an authenticated user.
#[test]
fn the_embedded_server_answers_every_hostile_request_without_a_500() {
    let rt = std::sync::Arc::new(runtime());
    let srv = rt
        .block_on(loadmix::embedded::start(loadmix::embedded::ServerConfig {
            no_auth: true,
            max_body: 64 * 1024,
            ..Default::default()
        }))
        .unwrap();
    let addr = srv.addr;
    let paths = [
        "/cosmo/cmp/user/fuzz",
        "/cosmo/mc/collection/fuzz",
        "/cosmo/atom/collection/fuzz",
        "/cosmo/atom/collection/fuzz/dashboard-now",
        "/cosmo/atom/collection/fuzz?start=2007-01-01T00:00:00Z&end=2008-01-01T00:00:00Z",
        "/cosmo/atom/item/fuzz",
        "/cosmo/dav/anyone/",
        "/cosmo/dav/anyone/cal/",
        "/cosmo/dav/anyone/cal/e.ics",
        "/cosmo/dav/anyone/book/",
        "/cosmo/dav/anyone/book/c.vcf",
        "/cosmo/queue/fuzz",
    ];
    let methods = [
        "GET",
        "PUT",
        "POST",
        "DELETE",
        "PROPFIND",
        "PROPPATCH",
        "REPORT",
        "MKCALENDAR",
        "MKCOL",
        "OPTIONS",
    ];
    let types = [
        "application/xml",
        "application/eim+xml",
        "application/atom+xml",
        "text/calendar",
        "text/vcard",
        "text/xml",
    ];
    // Make the collection, calendar and address book exist, so bodies reach the parsers
    // behind them.
    let send = |method: &str, path: &str, ctype: &str, body: &str| -> String {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(60)))
            .unwrap();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Basic YW55b25lOng=\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nDepth: 1\r\nConnection: close\r\n\r\n",
            body.len()
        );
        s.write_all(head.as_bytes()).unwrap();
        s.write_all(body.as_bytes()).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    };
    let _ = send(
        "MKCALENDAR",
        "/cosmo/dav/anyone/cal/",
        "application/xml",
        "",
    );
    let book = send(
        "MKCOL",
        "/cosmo/dav/anyone/book/",
        "application/xml",
        SEEDS.iter().find(|s| s.starts_with("<D:mkcol")).unwrap(),
    );
    assert!(book.starts_with("HTTP/1.1 201"), "{book}");
    let card = send(
        "PUT",
        "/cosmo/dav/anyone/book/c.vcf",
        "text/vcard",
        SEEDS.iter().find(|s| s.starts_with("BEGIN:VCARD")).unwrap(),
    );
    assert!(card.starts_with("HTTP/1.1 201"), "{card}");
    let strategy = (
        0..paths.len(),
        0..methods.len(),
        0..types.len(),
        hostile_text(),
    );
    runner(300)
        .run(&strategy, |(p, m, t, body)| {
            let answer = send(methods[m], paths[p], types[t], &body);
            prop_assert!(
                answer.starts_with("HTTP/1.1 "),
                "{} {}: no answer",
                methods[m],
                paths[p]
            );
            prop_assert!(
                !answer.starts_with("HTTP/1.1 5"),
                "{} {} ({}): {}",
                methods[m],
                paths[p],
                types[t],
                answer.lines().next().unwrap_or("")
            );
            Ok(())
        })
        .unwrap();
    // Still serving.
    assert!(send("GET", "/cosmo/_loadmix/stats", "text/plain", "").starts_with("HTTP/1.1 200"));
    let rt2 = rt.clone();
    rt2.block_on(srv.stop());
}

/// Hostile STOMP sessions against the embedded broker: after a valid CONNECT, frames near
/// the ones a client sends (SEND, SUBSCRIBE, ACK, BEGIN, COMMIT), cut and changed, and
/// arbitrary bytes. The broker answers each session (frames, or an ERROR and a close),
/// never hangs on it, and still serves a clean session afterwards; every message it
/// counts as stored was stored once.
#[test]
fn the_embedded_broker_survives_hostile_sessions() {
    use std::io::{Read, Write};
    let rt = runtime();
    let srv = rt
        .block_on(loadmix::embedded::start(loadmix::embedded::ServerConfig {
            no_auth: true,
            max_body: 64 * 1024,
            header_timeout: std::time::Duration::from_secs(2),
            ..Default::default()
        }))
        .unwrap();
    let addr = srv.stomp_addr.unwrap();
    const FRAMES: &[&[u8]] = &[
        b"SEND\ndestination:/queue/f\nreceipt:1\n\nbody\0",
        b"SEND\ndestination:/queue/f\ncontent-length:3\ntransaction:t\n\nabc\0",
        b"SUBSCRIBE\nid:0\ndestination:/queue/f\nack:client\nactivemq.prefetchSize:2\n\n\0",
        b"ACK\nid:1\n\n\0NACK\nid:2\n\n\0",
        b"BEGIN\ntransaction:t\n\n\0COMMIT\ntransaction:t\nreceipt:c\n\n\0",
        b"UNSUBSCRIBE\nid:0\n\n\0DISCONNECT\nreceipt:d\n\n\0",
    ];
    let session = (
        proptest::collection::vec(0..FRAMES.len(), 1..6),
        proptest::collection::vec((any::<u16>(), any::<u8>(), 0u8..3), 0..4),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..200)),
    )
        .prop_map(|(picks, edits, junk)| {
            let mut b: Vec<u8> = picks.iter().flat_map(|i| FRAMES[*i].to_vec()).collect();
            for (at, byte, kind) in edits {
                let at = at as usize % (b.len() + 1);
                match kind {
                    0 if at < b.len() => b[at] = byte,
                    1 => b.insert(at, byte),
                    _ => b.truncate(at),
                }
            }
            b.extend(junk.unwrap_or_default());
            b
        });
    let talk = |bytes: &[u8]| -> Vec<u8> {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        s.write_all(b"CONNECT\naccept-version:1.2\n\n\0").unwrap();
        let _ = s.write_all(bytes);
        // Half-close: the broker sees the end of what the client says.
        let _ = s.shutdown(std::net::Shutdown::Write);
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        out
    };
    runner(200)
        .run(&session, |bytes| {
            let out = talk(&bytes);
            prop_assert!(
                out.starts_with(b"CONNECTED\n"),
                "{:?}",
                String::from_utf8_lossy(&out)
            );
            Ok(())
        })
        .unwrap();
    // Still serving: a clean send is stored and receipted.
    let out = talk(b"SEND\ndestination:/queue/clean\nreceipt:ok\n\nx\0DISCONNECT\n\n\0");
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains("receipt-id:ok"), "{text}");
    assert_eq!(srv.broker.destinations()["/queue/clean"].enqueued, 1);
    rt.block_on(srv.stop());
}

/// Access log lines of each kind `infer` reads, to mutate.
const LOG_LINES: &[&str] = &[
    r#"192.0.2.7 - alice [10/Oct/2000:13:55:36.250 -0700] "PUT /cosmo/dav/alice/cal/e1.ics HTTP/1.1" 201 0 "-" "k \"q\"" 1234"#,
    r#"::1 - - [02/Dec/2026:00:33:02 +0000] "GET /item/123?page=2 HTTP/1.1" 200 12 "-" "-" 0.003"#,
    r#"h - bob [02/Dec/2026:00:33:03 +0000] "REPORT /dav/bob/cal/ HTTP/1.1" 207 99"#,
    r#"h - - [02/Dec/2026:00:33:04 +0000] "GET http://proxy.example/a/{b} HTTP/1.1" 200 1"#,
    r#"{"time":"2026-12-02T00:33:02.5Z","remote_addr":"10.0.0.1","request":"GET /x/{y} HTTP/1.1","status":200,"request_time":0.01}"#,
];

/// Whole logs of mutated lines, several clients over ten minutes: `infer` either refuses
/// them with a reason or writes a workload that loads, whatever a line holds.
#[test]
fn any_access_log_gives_a_workload_that_loads_or_a_clear_refusal() {
    let dir = tempdir();
    let file = dir.path().join("access.log");
    let lines = proptest::collection::vec((mutated(LOG_LINES, 0..6), 0u32..600, 0u8..8), 1..80);
    runner(150)
        .run(&lines, |ls| {
            let mut text = Vec::new();
            for (line, second, who) in ls {
                let line = String::from_utf8_lossy(&line)
                    .replace(
                        "00:33:02",
                        &format!("00:{:02}:{:02}", second / 60, second % 60),
                    )
                    .replace("alice", &format!("u{who}"));
                text.extend_from_slice(line.as_bytes());
                text.push(b'\n');
            }
            std::fs::write(&file, &text).unwrap();
            let o = loadmix::logs::InferOptions {
                files: vec![file.clone()],
                rules: None,
                format: None,
                timeout_us: Some(30_000_000),
                max_behaviours: 3,
                seed: 1,
            };
            match loadmix::logs::infer(&o) {
                Ok(found) => {
                    let y = loadmix::logs::workload(
                        &found,
                        &loadmix::logs::Target {
                            name: "x",
                            target: "embedded",
                            duration: "1s",
                            sources: &["access.log".into()],
                        },
                    );
                    if let Err(e) = loadmix::load_str("x.yaml", &y, &[], None) {
                        panic!("{e}\n{y}");
                    }
                }
                Err(e) => assert!(!e.to_string().is_empty()),
            }
            Ok(())
        })
        .unwrap();
}
