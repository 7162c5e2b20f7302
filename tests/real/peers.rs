//! Two real CalDAV and CardDAV servers from PyPI, Radicale and Xandikos, started without
//! authentication by scripts/peers_check.sh: the CalDAV and CardDAV workloads run against
//! each with only the server's URL and a user (discovery finds the rest), every operation
//! their mix or behaviours reach runs, nothing fails, and what Xandikos logged is what
//! loadmix says it sent.

use std::collections::BTreeMap;

use crate::handed::{
    Sent, common_log_statuses, loadmix, logged_during_by, path, run, scratch, var,
};

/// The two servers, by name, as the script hands them.
fn peers() -> [(&'static str, String); 2] {
    [
        ("radicale", var("LOADMIX_REAL_PEER_RADICALE")),
        ("xandikos", var("LOADMIX_REAL_PEER_XANDIKOS")),
    ]
}

fn run_against(out: &std::path::Path, workload: &str, target: &str) -> loadmix::reports::Report {
    run(
        out,
        &[
            workload,
            "--target",
            target,
            "--user",
            "loadmix",
            "--duration",
            "5s",
            "--rounds",
            "1",
        ],
    )
}

#[test]
#[ignore = "handed Radicale and Xandikos by scripts/peers_check.sh"]
fn caldav_sync_runs_its_whole_mix_on_each_server_dominated_by_sync() {
    for (peer, target) in peers() {
        let tmp = scratch();
        let r = run_against(tmp.path(), "workloads/caldav-sync.yaml", &target);
        let requests: BTreeMap<&str, u64> = r
            .summary
            .ops
            .iter()
            .map(|o| (o.op.as_str(), o.requests))
            .collect();
        eprintln!(
            "{peer}: {} requests, mix {requests:?}",
            r.summary.total.requests
        );
        assert_eq!(
            r.summary.total.failures,
            0,
            "{peer}: {:?}",
            r.failures.first()
        );
        for name in [
            "caldav.sync_collection",
            "caldav.time_range_report",
            "caldav.put_event",
            "caldav.get_event",
            "caldav.multiget",
            "caldav.propfind",
        ] {
            assert!(
                requests.get(name).copied().unwrap_or(0) > 0,
                "{peer}: {name} never ran"
            );
        }
        // Each user's calendar is made in its set-up, off the clock.
        let made = r.rounds[0]
            .setup
            .answers
            .get("MKCALENDAR 201")
            .copied()
            .unwrap_or(0);
        assert!(
            made > 0,
            "{peer}: no calendar made in set-up: {:?}",
            r.rounds[0].setup
        );
        let most = requests.iter().max_by_key(|(_, n)| **n).map(|(op, _)| *op);
        assert_eq!(most, Some("caldav.sync_collection"), "{peer}: {requests:?}");
    }
}

#[test]
#[ignore = "handed Radicale and Xandikos by scripts/peers_check.sh"]
fn carddav_sync_runs_its_whole_mix_on_each_server_and_xandikos_logged_every_request() {
    for (peer, target) in peers() {
        let tmp = scratch();
        let log = path("LOADMIX_REAL_PEER_XANDIKOS_LOG");
        let (r, logged) = logged_during_by(common_log_statuses, &log, || {
            run(
                tmp.path(),
                &[
                    "workloads/carddav-sync.yaml",
                    "--target",
                    &target,
                    "--user",
                    "loadmix",
                    "--duration",
                    "5s",
                    "--rounds",
                    "1",
                    "--set",
                    "users.book.params.initial_contacts=40",
                ],
            )
        });
        assert_eq!(
            r.summary.total.failures,
            0,
            "{peer}: {:?}",
            r.failures.first()
        );
        for name in [
            "book.delta_sync",
            "book.initial_sync",
            "book.addressbook_query",
            "book.addressbook_multiget",
            "book.get_contact",
            "book.put_contact",
            "book.update_contact",
        ] {
            let ran = r
                .summary
                .ops
                .iter()
                .find(|o| o.op == name)
                .map_or(0, |o| o.requests);
            assert!(ran > 0, "{peer}: {name} never ran");
        }
        let made = r.rounds[0]
            .setup
            .answers
            .get("MKCOL 201")
            .copied()
            .unwrap_or(0);
        assert!(
            made > 0,
            "{peer}: no address book made in set-up: {:?}",
            r.rounds[0].setup
        );
        let sent = Sent::of(&r);
        let logged: u64 = logged.values().sum();
        eprintln!(
            "{peer}: measured {} + set-up {} + cleanup {}; Xandikos logged {logged}",
            sent.measured, sent.setup, sent.cleanup
        );
        if peer == "xandikos" {
            assert_eq!(
                sent.all(),
                logged,
                "every request sent is one Xandikos logged"
            );
        }
    }
}

#[test]
#[ignore = "handed Radicale and Xandikos by scripts/peers_check.sh"]
fn behaviour_models_end_or_cut_every_session_and_reach_every_operation() {
    for (peer, target) in peers() {
        let tmp = scratch();
        let r = run_against(tmp.path(), "workloads/caldav-clients.yaml", &target);
        assert_eq!(
            r.summary.total.failures,
            0,
            "{peer}: {:?}",
            r.failures.first()
        );
        for name in [
            "poller.propfind",
            "poller.sync_collection",
            "editor.time_range_report",
            "editor.put_event",
            "editor.get_event",
        ] {
            let ran = r
                .summary
                .ops
                .iter()
                .find(|o| o.op == name)
                .map_or(0, |o| o.requests);
            assert!(ran > 0, "{peer}: {name} never ran");
        }
        let mut ended = BTreeMap::new();
        for c in &r.rounds[0].sessions {
            for b in &c.behaviours {
                let done = b.exited + b.max_ops + b.dead_ends;
                assert_eq!(
                    done + b.cut,
                    b.started,
                    "{peer}: {}.{}: {b:?}",
                    c.class,
                    b.behaviour
                );
                ended.insert(format!("{}.{}", c.class, b.behaviour), done);
            }
        }
        eprintln!("{peer}: sessions ended {ended:?}");
        for name in ["poller.poll", "editor.planner"] {
            assert!(
                ended.get(name).copied().unwrap_or(0) > 0,
                "{peer}: no session of {name} ended"
            );
        }
    }
}

#[test]
#[ignore = "handed Radicale by scripts/peers_check.sh"]
fn the_starter_loadmix_new_writes_for_radicale_is_caldav_and_runs_clean() {
    let tmp = scratch();
    let w = tmp.path().join("starter.yaml").display().to_string();
    let target = var("LOADMIX_REAL_PEER_RADICALE");
    let made = loadmix(
        &[
            "new", "--target", &target, "--user", "loadmix", "--quiet", "-o", &w,
        ],
        &[],
    );
    assert_eq!(made.code, 0, "{}", made.stderr);
    let text = std::fs::read_to_string(&w).unwrap();
    assert!(text.contains("class: caldav"), "no CalDAV class:\n{text}");
    let r = run(
        &tmp.path().join("out"),
        &[&w, "--user", "loadmix", "--duration", "4s", "--rounds", "1"],
    );
    assert!(r.summary.total.requests > 0);
    assert_eq!(r.summary.total.failures, 0, "{:?}", r.failures.first());
}
