//! HTTP servers users own, started by scripts/servers_check.sh with access logs of one
//! `METHOD STATUS` line per request: nginx terminating TLS in front of Radicale, nginx's
//! and Apache's WebDAV, the embedded server over https, a Radicale holding someone
//! else's calendar, and a team sharing a calendar on Radicale by its rights. What each
//! logged is held against what loadmix says it sent.

use std::collections::BTreeMap;
use std::path::Path;

use crate::handed::{
    Sent, files_under, logged_during, path, run, run_code, scratch, team_run, team_saw_every_write,
    var,
};

#[test]
#[ignore = "handed nginx and Radicale by scripts/servers_check.sh"]
fn over_https_every_request_sent_is_one_nginx_logged() {
    let tmp = scratch();
    let target = var("LOADMIX_REAL_TLS_TARGET");
    let ca = var("LOADMIX_REAL_CA");
    let (r, logged) = logged_during(&path("LOADMIX_REAL_TLS_LOG"), || {
        run(
            tmp.path(),
            &[
                "workloads/caldav-sync.yaml",
                "--target",
                &target,
                "--user",
                "loadmix",
                "--ca-cert",
                &ca,
                "--duration",
                "4s",
                "--rounds",
                "1",
            ],
        )
    });
    let sent = Sent::of(&r);
    let logged: u64 = logged.values().sum();
    eprintln!(
        "measured {} + warm-up {} + set-up {} + cleanup {} against nginx's {logged}",
        sent.measured, sent.warmup, sent.setup, sent.cleanup
    );
    assert_eq!(r.summary.total.failures, 0, "{:?}", r.failures.first());
    assert!(
        r.tls.as_ref().is_some_and(|t| t.verified),
        "the certificate was verified"
    );
    assert_eq!(sent.all(), logged);
}

#[test]
#[ignore = "handed nginx and Radicale by scripts/servers_check.sh"]
fn carddav_over_https_to_radicale_every_request_sent_is_one_nginx_logged() {
    let tmp = scratch();
    let target = var("LOADMIX_REAL_TLS_TARGET");
    let ca = var("LOADMIX_REAL_CA");
    let (r, logged) = logged_during(&path("LOADMIX_REAL_TLS_LOG"), || {
        run(
            tmp.path(),
            &[
                "workloads/carddav-sync.yaml",
                "--target",
                &target,
                "--user",
                "loadmix",
                "--ca-cert",
                &ca,
                "--duration",
                "4s",
                "--rounds",
                "1",
                "--set",
                "users.book.count=4",
                "--set",
                "users.book.params.initial_contacts=30",
            ],
        )
    });
    let sent = Sent::of(&r);
    eprintln!(
        "measured {} + set-up {} + cleanup {} against nginx's {logged:?}",
        sent.measured, sent.setup, sent.cleanup
    );
    assert_eq!(r.summary.total.failures, 0, "{:?}", r.failures.first());
    assert!(r.summary.total.requests > 0);
    assert_eq!(sent.all(), logged.values().sum::<u64>());
    // Status by status: what loadmix counted as each answer is what nginx logged.
    let mut counted: BTreeMap<String, u64> = BTreeMap::new();
    for o in &r.summary.ops {
        for (status, n) in &o.status {
            *counted.entry(status.to_string()).or_insert(0) += n;
        }
    }
    for (k, n) in r
        .preflight
        .answers
        .iter()
        .chain(r.rounds.iter().flat_map(|x| x.setup.answers.iter()))
    {
        let status = k.rsplit(' ').next().unwrap_or("").to_string();
        *counted.entry(status).or_insert(0) += n;
    }
    // The cleanup deletes each user's address book, which Radicale answers 200.
    assert_eq!(r.rounds.iter().map(|x| x.cleanup.failures).sum::<u64>(), 0);
    let cleanup: u64 = r.rounds.iter().map(|x| x.cleanup.requests).sum();
    *counted.entry("200".into()).or_insert(0) += cleanup;
    assert_eq!(counted, logged, "status by status");
}

#[test]
#[ignore = "handed nginx and Radicale by scripts/servers_check.sh"]
fn a_certificate_from_another_ca_stops_the_run_at_preflight_naming_the_unknown_issuer() {
    let tmp = scratch();
    let ran = run_code(
        tmp.path(),
        &[
            "workloads/caldav-sync.yaml",
            "--target",
            &var("LOADMIX_REAL_TLS_TARGET"),
            "--user",
            "loadmix",
            "--ca-cert",
            &var("LOADMIX_REAL_OTHER_CA"),
            "--duration",
            "2s",
            "--rounds",
            "1",
        ],
    );
    assert_eq!(ran.code, 3, "{}", ran.stderr);
    assert!(ran.stderr.contains("unknown issuer"), "{}", ran.stderr);
}

#[test]
#[ignore = "handed nginx's WebDAV by scripts/servers_check.sh"]
fn webdav_on_nginx_answers_what_nginx_logged_no_404_and_leaves_the_share_empty() {
    let tmp = scratch();
    let target = var("LOADMIX_REAL_NGINX_DAV");
    let (r, logged) = logged_during(&path("LOADMIX_REAL_NGINX_DAV_LOG"), || {
        run(
            tmp.path(),
            &[
                "workloads/webdav.yaml",
                "--target",
                &target,
                "--user",
                "loadmix",
                "--set",
                "run.warmup=0s",
                "--duration",
                "4s",
                "--rounds",
                "2",
            ],
        )
    });
    let sent = Sent::of(&r);
    eprintln!(
        "report {} + cleanup {} against nginx's {logged:?}",
        sent.measured, sent.cleanup
    );
    assert_eq!(r.summary.total.failures, 0, "{:?}", r.failures.first());
    assert_eq!(logged.get("404"), None, "a delete of something not there");
    assert_eq!(sent.measured + sent.cleanup, logged.values().sum::<u64>());
    let share = path("LOADMIX_REAL_NGINX_DAV_SHARE");
    let left: Vec<_> = std::fs::read_dir(&share).unwrap().collect();
    assert!(left.is_empty(), "{} files left on the share", left.len());
}

#[test]
#[ignore = "handed Apache's mod_dav by scripts/servers_check.sh"]
fn webdav_on_apache_with_digest_is_challenged_once_per_user() {
    let tmp = scratch();
    let target = var("LOADMIX_REAL_APACHE_DAV");
    let (r, logged) = logged_during(&path("LOADMIX_REAL_APACHE_LOG"), || {
        run(
            tmp.path(),
            &[
                "workloads/webdav.yaml",
                "--target",
                &target,
                "--user",
                "loadmix",
                "--set",
                "run.warmup=0s",
                "--duration",
                "4s",
                "--rounds",
                "1",
            ],
        )
    });
    let users = u64::from(r.workload.classes[0].count);
    let challenged = logged.get("401").copied().unwrap_or(0);
    let reported = r.summary.total.status.get("401").copied().unwrap_or(0);
    eprintln!("{users} users: Apache answered 401 {challenged} times, the report says {reported}");
    assert_eq!(r.summary.total.failures, 0, "{:?}", r.failures.first());
    assert!(reported > 0, "the Digest challenge is in the report");
    assert!(
        challenged <= 2 * users,
        "a challenge per request, not per user"
    );
    assert_eq!(logged.get("404"), None);
}

#[test]
#[ignore = "handed the embedded server over https by scripts/servers_check.sh"]
fn the_cosmo_workload_runs_on_the_embedded_server_over_https() {
    let tmp = scratch();
    let r = run(
        tmp.path(),
        &[
            "workloads/cosmo-0.7.yaml",
            "--target",
            &var("LOADMIX_REAL_EMBEDDED_HTTPS"),
            "--ca-cert",
            &var("LOADMIX_REAL_CA"),
            "--set",
            "run.warmup=0s",
            "--duration",
            "4s",
            "--rounds",
            "1",
        ],
    );
    let t = &r.summary.total;
    eprintln!(
        "{} requests, TLS handshake p50 {:?} ms, {} resumed",
        t.requests,
        t.tls_handshake_ms.as_ref().map(|p| p.p50),
        t.tls_resumed
    );
    assert_eq!(t.failures, 0, "{:?}", r.failures.first());
    // The 2007 client opened a connection per request: each has its handshake.
    assert!(t.tls_handshake_ms.is_some());
}

/// Every file under `dir`, by path, with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<std::path::PathBuf, Vec<u8>> {
    files_under(dir)
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, bytes)
        })
        .collect()
}

#[test]
#[ignore = "handed a pre-filled Radicale by scripts/servers_check.sh"]
fn other_peoples_calendars_on_radicale_are_never_touched() {
    let tmp = scratch();
    let home = path("LOADMIX_REAL_RADICALE_HOME");
    let precious = home.join("precious");
    let before = snapshot(&precious);
    assert_eq!(
        before
            .keys()
            .filter(|p| p.parent() == Some(&precious) && p.extension().is_some_and(|e| e == "ics"))
            .count(),
        3,
        "the script pre-fills three events (Radicale keeps caches of them beside)"
    );
    for w in ["caldav-sync", "caldav-saturate"] {
        run(
            &tmp.path().join(w),
            &[
                &format!("workloads/{w}.yaml"),
                "--target",
                &var("LOADMIX_REAL_RADICALE"),
                "--user",
                "loadmix",
                "--set",
                "run.warmup=0s",
                "--duration",
                "3s",
                "--rounds",
                "1",
            ],
        );
    }
    assert!(
        snapshot(&precious) == before,
        "the pre-filled calendar changed"
    );
    let made: Vec<_> = std::fs::read_dir(&home)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name != "precious" && !name.starts_with(".Radicale")
        })
        .collect();
    assert!(
        made.is_empty(),
        "calendars the runs made are left: {made:?}"
    );
}

#[test]
#[ignore = "handed nginx, Radicale and its team accounts by scripts/servers_check.sh"]
fn a_team_shares_a_calendar_on_radicale_by_its_rights_and_sees_every_write() {
    let tmp = scratch();
    let (r, logged) = team_run(
        tmp.path(),
        (
            &path("LOADMIX_REAL_TLS_LOG"),
            &path("LOADMIX_REAL_RADICALE_TEAM_ACCOUNTS"),
        ),
        "5s",
        &[
            "--target",
            &var("LOADMIX_REAL_TLS_TARGET"),
            "--ca-cert",
            &var("LOADMIX_REAL_CA"),
            // Radicale shares by its rights file, not by ACL requests, and does not
            // schedule.
            "--set",
            "teams.project.grant=server",
            "--users",
            "organizers=0,attendees=0",
        ],
    );
    assert_eq!(r.summary.total.failures, 0, "{:?}", r.failures.first());
    let sent = Sent::of(&r);
    assert_eq!(sent.all(), logged.values().sum::<u64>(), "{logged:?}");
    assert!(
        !logged.contains_key("403"),
        "no request was refused: {logged:?}"
    );

    team_saw_every_write(&r, 0);

    // With its invitations on, the workload stops at the preflight, in Radicale's words.
    let accounts = format!(
        "accounts.file={}",
        path("LOADMIX_REAL_RADICALE_TEAM_ACCOUNTS").display()
    );
    let ran = run_code(
        tmp.path(),
        &[
            "workloads/caldav-team.yaml",
            "--target",
            &var("LOADMIX_REAL_TLS_TARGET"),
            "--ca-cert",
            &var("LOADMIX_REAL_CA"),
            "--set",
            "accounts.create=existing",
            "--set",
            &accounts,
            "--set",
            "teams.project.grant=server",
        ],
    );
    assert_eq!(ran.code, 3, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("schedule-inbox-URL") && ran.stderr.contains("does not schedule"),
        "{}",
        ran.stderr
    );

    // The owners' shared calendars are gone with the run; the accounts' homes are bare.
    let root = path("LOADMIX_REAL_RADICALE_HOME");
    let root = root.parent().unwrap();
    let left: Vec<_> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("team-")
        })
        .flat_map(|home| std::fs::read_dir(home).unwrap().map(|e| e.unwrap().path()))
        .filter(|p| {
            p.is_dir()
                && !p
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(".Radicale")
        })
        .collect();
    assert!(left.is_empty(), "calendars left: {left:?}");
}
