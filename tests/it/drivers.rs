//! The Morse Code, Atom and CalDAV drivers against the embedded server, on both stores: the
//! Cosmo 0.7 mix runs with zero failures, every operation of the three tables happens, the
//! server's own counters agree with the report request for request, and the measured mix
//! matches the tables (chi-square), with Morse Code sync split 80/20 by token.

use std::collections::BTreeMap;
use std::process::Command;

use crate::common::*;
use loadmix::embedded::StoreSpec;
use loadmix::embedded::{self as server, ServerConfig};

use statrs::distribution::{ChiSquared, ContinuousCDF};

fn p_value(observed: &[f64], expected_share: &[f64]) -> f64 {
    let n: f64 = observed.iter().sum();
    let stat: f64 = observed
        .iter()
        .zip(expected_share)
        .map(|(o, p)| (o - p * n).powi(2) / (p * n))
        .sum();
    1.0 - ChiSquared::new((observed.len() - 1) as f64)
        .unwrap()
        .cdf(stat)
}

fn count(r: &loadmix::reports::Report, op: &str) -> u64 {
    r.summary
        .ops
        .iter()
        .find(|o| o.op == op)
        .map_or(0, |o| o.requests)
}

#[test]
fn cosmo_mix_runs_clean_and_agrees_with_the_server_on_both_stores() {
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
        let log = tmp.path().join("ops.csv");
        let code = loadmix(&[
            "run",
            &path_str(&root().join("workloads/cosmo-0.7-saturate.yaml")),
            "--target",
            &srv.url(),
            // A fixed number of operations per user, not a duration: with a fixed seed the
            // picks are then the same however busy the machine is, and rare operations
            // (0.25 %, 0.5 %) are sure to be among them.
            "--iterations",
            "500",
            "--rounds",
            "1",
            "--set",
            "run.warmup=0s",
            "--out",
            &path_str(&out),
            "--log-ops",
            &path_str(&log),
            "--quiet",
        ]);
        assert_eq!(code, 0, "{store:?}");
        let r = read_report(&out);
        assert_eq!(r.summary.total.failures, 0, "{store:?}: {:?}", r.failures);
        for op in [
            "morse.publish",
            "morse.sync",
            "morse.sync_no_change",
            "morse.update",
            "morse.subscribe",
            "morse.delete",
            "atom.time_range_feed",
            "atom.full_feed",
            "atom.create_event",
            "atom.update_event",
            "atom.dashboard",
            "caldav.create_calendar",
            "caldav.put_event",
            "caldav.delete_event",
            "caldav.time_range_report",
            "caldav.get_event",
        ] {
            assert!(count(&r, op) > 0, "{store:?}: {op} never ran");
        }
        // What the server answered, request for request, with the set-up the report
        // counts off the clock: one CMP account per user and per preflight (3 classes),
        // the Morse Code and Atom preflights' publish and delete, each Morse Code and Atom
        // user's first collection and each CalDAV user's first calendar, and three
        // discovery PROPFINDs per CalDAV user and for the CalDAV preflight
        // (`/.well-known/caldav`, redirected; the principal; the calendar home).
        let s = &srv.stats;
        let untimed = |k: &str| {
            r.preflight.answers.get(k).copied().unwrap_or(0)
                + r.rounds
                    .iter()
                    .map(|x| x.setup.answers.get(k).copied().unwrap_or(0))
                    .sum::<u64>()
        };
        assert_eq!(
            untimed("PUT 201"),
            15 + 3 + 2 + 13,
            "accounts, preflight publishes, and 13 users' first collections"
        );
        assert_eq!(untimed("MKCALENDAR 201"), 2, "2 users' first calendars");
        assert_eq!(
            count(&r, "atom.publish"),
            0,
            "an Atom user's collection is set-up"
        );
        assert_eq!(
            s.count("PUT", 201),
            count(&r, "morse.publish")
                + count(&r, "atom.publish")
                + count(&r, "caldav.put_event")
                + untimed("PUT 201")
        );
        // After each round, every collection and calendar a user made is deleted.
        let cleanup: u64 = r.rounds.iter().map(|x| x.cleanup.requests).sum();
        assert!(cleanup >= 15, "{cleanup}");
        assert_eq!(r.rounds.iter().map(|x| x.cleanup.failures).sum::<u64>(), 0);
        assert_eq!(
            s.count("DELETE", 204),
            count(&r, "morse.delete")
                + count(&r, "caldav.delete_event")
                + untimed("DELETE 204")
                + cleanup
        );
        assert_eq!(s.count("POST", 204), count(&r, "morse.update"));
        assert_eq!(s.count("POST", 201), count(&r, "atom.create_event"));
        assert_eq!(s.count("PUT", 200), count(&r, "atom.update_event"));
        assert_eq!(
            s.count("MKCALENDAR", 201),
            count(&r, "caldav.create_calendar") + untimed("MKCALENDAR 201")
        );
        assert_eq!(
            s.count("REPORT", 207),
            count(&r, "caldav.time_range_report")
        );
        assert_eq!(s.count("PROPFIND", 207), untimed("PROPFIND 207"));
        assert_eq!(untimed("PROPFIND 207"), 2 * 2 + 2);
        assert_eq!(
            s.count("PROPFIND", 301),
            untimed("PROPFIND 301"),
            "one well-known redirect each"
        );
        assert_eq!(untimed("PROPFIND 301"), 2 + 1);
        let gets = [
            "morse.sync",
            "morse.sync_no_change",
            "morse.subscribe",
            "atom.time_range_feed",
            "atom.full_feed",
            "atom.dashboard",
            "caldav.get_event",
        ];
        assert_eq!(
            s.count("GET", 200),
            gets.iter().map(|o| count(&r, o)).sum::<u64>()
        );
        let answered: u64 = s.snapshot().iter().map(|(_, _, n)| n).sum();
        let setup = r.preflight.requests + r.rounds.iter().map(|x| x.setup.requests).sum::<u64>();
        assert_eq!(
            answered,
            r.summary.total.requests + setup + cleanup,
            "measured + set-up + cleanup is everything that reached the server"
        );

        // The measured mix, from the operations the users picked (bootstraps excluded).
        let w = loadmix::load(&root().join("workloads/cosmo-0.7-saturate.yaml"), &[]).unwrap();
        let mut picks: BTreeMap<(String, String), f64> = BTreeMap::new();
        let (mut sync, mut no_change) = (0.0, 0.0);
        for line in std::fs::read_to_string(&log).unwrap().lines().skip(1) {
            let f: Vec<&str> = line.split(',').collect();
            if f[4] == "(bootstrap)" {
                continue;
            }
            *picks
                .entry((f[1].to_string(), f[4].to_string()))
                .or_default() += 1.0;
            if f[4] == "sync" && f[9] != "skipped" {
                if f[5] == "sync_no_change" {
                    no_change += 1.0
                } else {
                    sync += 1.0
                }
            }
        }
        for c in &w.classes {
            let observed: Vec<f64> = c
                .ops
                .iter()
                .map(|o| {
                    picks
                        .get(&(c.name.clone(), o.name.clone()))
                        .copied()
                        .unwrap_or(0.0)
                })
                .collect();
            let probs: Vec<f64> = c.ops.iter().map(|o| o.probability).collect();
            let n: f64 = observed.iter().sum();
            assert!(n > 300.0, "{}: only {n} picks", c.name);
            let p = p_value(&observed, &probs);
            assert!(
                p > 0.001,
                "{store:?} {}: observed {observed:?} vs {probs:?}, p = {p}",
                c.name
            );
        }
        let p = p_value(&[no_change, sync], &[0.2, 0.8]);
        assert!(
            p > 0.001,
            "sync_no_change {no_change} vs sync {sync}: p = {p}"
        );
        rt.block_on(srv.stop());
    }
}

#[test]
fn a_target_without_the_protocol_fails_preflight_naming_class_request_and_answer() {
    let rt = runtime();
    // A server whose services live elsewhere: Morse Code is not at /cosmo.
    let srv = rt
        .block_on(server::start(ServerConfig {
            context: "/other".into(),
            ..ServerConfig::default()
        }))
        .unwrap();
    let out = loadmix_bin(&[
        "run",
        "workloads/cosmo-0.7.yaml",
        "--target",
        &srv.url(),
        "--duration",
        "2s",
        "--rounds",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("preflight of class 'morse' (morse) failed"),
        "{err}"
    );
    assert!(
        err.contains("account creation: PUT /cosmo/cmp/user/") && err.contains("-> 404"),
        "{err}"
    );
    rt.block_on(srv.stop());
}

#[test]
fn users_only_delete_what_they_created_and_name_it_after_the_run() {
    let rt = runtime();
    let run = |keep: bool| {
        let srv = rt.block_on(server::start(ServerConfig::default())).unwrap();
        let tmp = tempdir();
        let out = out_dir(&tmp);
        let out_s = path_str(&out);
        let url = srv.url();
        let mut args = vec![
            "run",
            "workloads/cosmo-0.7-saturate.yaml",
            "--target",
            &url,
            "--iterations",
            "100",
            "--rounds",
            "1",
            "--set",
            "run.warmup=0s",
            "--out",
            &out_s,
            "--quiet",
        ];
        if keep {
            args.push("--keep-data");
        }
        assert_eq!(loadmix(&args), 0);
        let r = read_report(&out);
        // Every collection left on the server was created by this run and carries its id.
        let mut left = 0;
        for class in ["morse", "atom", "caldav"] {
            for vu in 0..10 {
                let user = format!("lm-{}-r1-{class}-{vu}", r.run_id);
                for c in srv.store.collections_of(&user).unwrap() {
                    left += 1;
                    assert!(c.uid.starts_with(&format!("lm-{}-", r.run_id)), "{}", c.uid);
                }
            }
        }
        rt.block_on(srv.stop());
        (r, left)
    };
    let (kept, left) = run(true);
    assert!(left >= 15, "each user still has its collection(s): {left}");
    assert_eq!(kept.rounds[0].cleanup.requests, 0);
    let (cleaned, left) = run(false);
    assert_eq!(left, 0, "the round's cleanup deleted every collection");
    assert!(cleaned.rounds[0].cleanup.requests >= 15);
    assert_eq!(cleaned.rounds[0].cleanup.failures, 0);
}

#[test]
fn a_rejected_sync_token_triggers_a_counted_full_resync() {
    let rt = runtime();
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counter = answered.clone();
    // Issues token t1 to an initial sync, and rejects t1 afterwards, as Xandikos does (412).
    let addr = scripted(&rt, move |method, _path, body| {
        counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        match method {
            "MKCALENDAR" => http_response("201 Created", "text/plain", ""),
            "REPORT" if body.contains("<D:sync-token>t1</D:sync-token>") => http_response(
                "412 Precondition Failed",
                "application/xml",
                r#"<ns0:error xmlns:ns0="DAV:"><ns0:valid-sync-token /></ns0:error>"#,
            ),
            "REPORT" => http_response(
                "207 Multi-Status",
                "application/xml",
                r#"<ns0:multistatus xmlns:ns0="DAV:"><ns0:sync-token>t1</ns0:sync-token></ns0:multistatus>"#,
            ),
            _ => http_response("405 Method Not Allowed", "text/plain", ""),
        }
    });
    let tmp = tempdir();
    let w = tmp.path().join("w.yaml");
    std::fs::write(
        &w,
        format!(
            "target: http://{addr}\ncontext: ''\nrun: {{ iterations: 6 }}\nusers:\n  - class: c\n    protocol: caldav\n    count: 1\n    params: {{ calendar_home: /home/ }}\n    mix: {{ sync_collection: 1 }}\n"
        ),
    )
    .unwrap();
    let out = out_dir(&tmp);
    assert_eq!(
        loadmix(&["run", &path_str(&w), "--out", &path_str(&out), "--quiet"]),
        0
    );
    let r = read_report(&out);
    assert_eq!(r.summary.total.failures, 0, "{:?}", r.failures);
    let setup: u64 = r.rounds.iter().map(|x| x.setup.requests).sum();
    assert_eq!(setup, 1, "the user's calendar, made in its set-up");
    assert_eq!(
        count(&r, "c.create_calendar"),
        0,
        "not among the measured operations"
    );
    assert_eq!(count(&r, "c.sync_collection"), 1, "the initial sync");
    assert_eq!(
        count(&r, "c.sync_collection_resync"),
        5,
        "every later sync was rejected and redone"
    );
    // Both requests of a resync are in the statuses, so they add up to what the server
    // answered, request for request.
    let resync = r
        .summary
        .ops
        .iter()
        .find(|o| o.op == "c.sync_collection_resync")
        .unwrap();
    assert_eq!(resync.status.get("412"), Some(&5), "{:?}", resync.status);
    assert_eq!(resync.status.get("207"), Some(&5), "{:?}", resync.status);
    let statuses: u64 = r.summary.ops.iter().flat_map(|o| o.status.values()).sum();
    let cleanup: u64 = r.rounds.iter().map(|x| x.cleanup.requests).sum();
    assert_eq!(
        cleanup, 1,
        "the calendar it made is deleted after the round"
    );
    assert_eq!(
        statuses + setup + cleanup,
        answered.load(std::sync::atomic::Ordering::SeqCst),
        "statuses in the report, set-up and cleanup = requests the server answered"
    );
}

/// Passwords are data, not markup: one with XML's special characters still makes an
/// account through CMP and logs in. The in-process server takes the admin password the
/// users will ask for, so `$LOADMIX_ADMIN_PASSWORD` works with the default target.
#[test]
fn a_password_with_markup_characters_creates_and_uses_its_account() {
    let tmp = tempdir();
    let out = out_dir(&tmp);
    let o = Command::new(env!("CARGO_BIN_EXE_loadmix"))
        .current_dir(root())
        .env("LOADMIX_PASSWORD", "p<&>\"' ]]> x")
        .env("LOADMIX_ADMIN_PASSWORD", "adm:in <&> pw")
        .args([
            "run",
            "workloads/cosmo-0.7.yaml",
            "--iterations",
            "3",
            "--rounds",
            "1",
            "--set",
            "think=0ms",
            "--out",
            &path_str(&out),
            "--quiet",
        ])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r = read_report(&out);
    assert_eq!(r.summary.total.failures, 0, "{:?}", r.failures);
    assert!(r.summary.total.requests >= 15);
}

/// With a warm-up round and a warm-up period, every request the embedded server answered
/// is in the report: measured, warm-up (period and rounds), set-up, cleanup.
#[test]
fn warm_up_rounds_set_up_and_cleanup_add_up_to_the_servers_count() {
    let rt = runtime();
    let srv = embedded(&rt);
    let tmp = tempdir();
    let out = out_dir(&tmp);
    let code = loadmix(&[
        "run",
        &path_str(&root().join("workloads/cosmo-0.7-saturate.yaml")),
        "--target",
        &srv.url(),
        "--duration",
        "1s",
        "--rounds",
        "1",
        "--set",
        "run.warmup=300ms",
        "--set",
        "run.warmup_rounds=1",
        "--out",
        &path_str(&out),
        "--quiet",
    ]);
    assert_eq!(code, 0);
    let r = read_report(&out);
    let answered: u64 = srv.stats.snapshot().iter().map(|(_, _, n)| n).sum();
    let round = &r.rounds[0];
    let warm = &r.warmup_rounds[0];
    assert!(warm.other_requests > 0, "its set-up and cleanup");
    let reported = r.summary.total.requests
        + round.warmup_requests
        + r.preflight.requests
        + round.setup.requests
        + round.cleanup.requests
        + warm.successes
        + warm.failures
        + warm.other_requests;
    assert_eq!(answered, reported);
    rt.block_on(srv.stop());
}

#[test]
fn a_server_without_cosmos_cmp_is_told_apart_and_the_fix_is_named() {
    // A CalDAV server that refuses CMP's account creation (403), as any server but Cosmo
    // does: the run stops at preflight saying so, and what to write instead.
    let rt = runtime();
    let addr = scripted(&rt, |method, _path, _body| match method {
        "PUT" => http_response("403 Forbidden", "text/plain", "no"),
        _ => http_response("404 Not Found", "text/plain", ""),
    });
    let tmp = tempdir();
    let w = tmp.path().join("w.yaml");
    std::fs::write(
        &w,
        format!(
            "target: http://{addr}\naccounts: {{ create: cmp }}\nusers:\n  - class: c\n    protocol: caldav\n    count: 1\n    mix: {{ sync_collection: 1 }}\n"
        ),
    )
    .unwrap();
    let out = tmp.path().join("out");
    let o = loadmix_bin(&["run", &path_str(&w), "--out", &path_str(&out), "--quiet"]);
    let said = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{said}");
    assert!(
        said.contains("403 Forbidden: this server makes no accounts through Cosmo's CMP"),
        "{said}"
    );
    assert!(said.contains("create: shared"), "{said}");
}

#[test]
fn a_calendar_made_again_during_the_round_is_not_filled_and_every_request_is_counted() {
    // The first MKCALENDAR (in set-up) is refused, the next (the user's first operation,
    // measured as a bootstrap) accepted. Only set-up fills a calendar with its
    // initial_events: the measured bootstrap sends no PUT the report would not count.
    let rt = runtime();
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mkcalendars = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (counter, made) = (answered.clone(), mkcalendars.clone());
    let addr = scripted(&rt, move |method, _path, _body| {
        counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        match method {
            "MKCALENDAR" if made.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 => {
                http_response("503 Service Unavailable", "text/plain", "")
            }
            "MKCALENDAR" | "PUT" => http_response("201 Created", "text/plain", ""),
            "DELETE" => http_response("204 No Content", "text/plain", ""),
            _ => http_response("405 Method Not Allowed", "text/plain", ""),
        }
    });
    let tmp = tempdir();
    let w = tmp.path().join("w.yaml");
    std::fs::write(
        &w,
        format!(
            "target: http://{addr}\ncontext: ''\nrun: {{ iterations: 3 }}\nusers:\n  - class: c\n    protocol: caldav\n    count: 1\n    params: {{ calendar_home: /home/, initial_events: 5 }}\n    mix: {{ put_event: 1 }}\n"
        ),
    )
    .unwrap();
    let out = out_dir(&tmp);
    assert_eq!(
        loadmix(&["run", &path_str(&w), "--out", &path_str(&out), "--quiet"]),
        0
    );
    let r = read_report(&out);
    assert_eq!(
        op(&r, "c.create_calendar").bootstraps,
        1,
        "made again, measured"
    );
    let statuses: u64 = r.summary.ops.iter().flat_map(|o| o.status.values()).sum();
    let setup: u64 = r.rounds.iter().map(|x| x.setup.requests).sum();
    let cleanup: u64 = r.rounds.iter().map(|x| x.cleanup.requests).sum();
    assert_eq!(
        setup, 1,
        "the refused MKCALENDAR, and no event put after it"
    );
    assert_eq!(
        statuses + setup + cleanup,
        answered.load(std::sync::atomic::Ordering::SeqCst),
        "statuses, set-up and cleanup = requests the server answered"
    );
    // The failed set-up is said, with its user and the server's answer, and that it was
    // not retried.
    assert_eq!(r.rounds[0].setup_failures, 1);
    let text = std::fs::read_to_string(out.join("report.txt")).unwrap();
    assert!(
        text.contains("WARNING: 1 user set-up(s) failed and were not retried")
            && text.contains("First, in round 1: set-up of c#0: its first collection:")
            && text.contains("503"),
        "{text}"
    );
}

#[test]
fn a_redirect_is_the_operations_answer_and_is_not_followed() {
    // Every GET of /a is sent to /b: the operation is the one request, its 302 counted as
    // the answer (a failure unless expected), and /b is never asked for.
    let rt = runtime();
    let followed = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let seen = followed.clone();
    let addr = scripted(&rt, move |_method, path, _body| match path {
        "/a" => "HTTP/1.1 302 Found\r\nlocation: /b\r\ncontent-length: 0\r\n\r\n".to_string(),
        _ => {
            seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            http_response("200 OK", "text/plain", "b")
        }
    });
    let tmp = tempdir();
    let w = tmp.path().join("w.yaml");
    std::fs::write(
        &w,
        format!(
            "target: http://{addr}\nrun: {{ iterations: 5 }}\nusers:\n  - class: c\n    protocol: http\n    count: 1\n    mix:\n      a: {{ weight: 1, path: /a }}\n      moved: {{ weight: 1, path: /a, expect: [302] }}\n"
        ),
    )
    .unwrap();
    let out = tmp.path().join("out");
    let code = loadmix(&["run", &path_str(&w), "--out", &path_str(&out), "--quiet"]);
    assert_eq!(code, 0);
    let r = read_report(&out);
    let (a, moved) = (op(&r, "c.a"), op(&r, "c.moved"));
    assert_eq!(a.requests + moved.requests, 5);
    assert!(a.requests > 0 && moved.requests > 0);
    assert_eq!(a.failures, a.requests, "an unexpected 302 is a failure");
    assert_eq!(moved.successes, moved.requests, "an expected one is not");
    assert_eq!(r.summary.total.requests, 5);
    assert_eq!(followed.load(std::sync::atomic::Ordering::Relaxed), 0);
}
