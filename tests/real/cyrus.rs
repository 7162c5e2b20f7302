//! Cyrus IMAP (Debian's cyrus-imapd with cyrus-caldav), a scratch instance made by
//! examples/cyrus/setup.sh and handed over by scripts/cyrus_check.sh: the CalDAV and
//! CardDAV workloads run with only the URL and a user, nothing fails, and every answer
//! loadmix counted is one in Cyrus's own telemetry log of that user, status by status.

use std::collections::BTreeMap;
use std::path::Path;

use loadmix::reports::Report;

use crate::handed::{files_under, logged_during_by, path, report, run_with, scratch, var};

/// Cyrus's telemetry of one user (a file per server process, the protocol as it went,
/// each answer marked `>SECONDS>HTTP/1.1 STATUS`): answers by status.
fn telemetry_statuses(dir: &Path) -> BTreeMap<String, u64> {
    let mut by = BTreeMap::new();
    for f in files_under(dir) {
        let bytes = std::fs::read(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let text = String::from_utf8_lossy(&bytes);
        for (i, _) in text.match_indices(">HTTP/1.") {
            // `>` digits `>HTTP/1.x NNN`: an answer's first line.
            let before = &text[..i];
            let stamp = before.rsplit('>').next().unwrap_or("");
            let after = &text[i + ">HTTP/1.1 ".len()..];
            let status = after.get(..3).unwrap_or("");
            if stamp.len() >= 9
                && stamp.bytes().all(|b| b.is_ascii_digit())
                && before.len() > stamp.len()
                && status.bytes().all(|b| b.is_ascii_digit())
                && status.len() == 3
            {
                *by.entry(status.to_string()).or_insert(0) += 1;
            }
        }
    }
    by
}

/// What loadmix counted, by status: measured answers, the preflight's and set-up's, and
/// the cleanup's deletes (204 from Cyrus); the well-known redirects left out, which
/// Cyrus answers before it knows the user, and so logs in no user's telemetry.
fn counted_statuses(r: &Report) -> BTreeMap<String, u64> {
    let mut by: BTreeMap<String, u64> = BTreeMap::new();
    for o in &r.summary.ops {
        for (status, n) in &o.status {
            *by.entry(status.clone()).or_insert(0) += n;
        }
    }
    let untimed = r
        .preflight
        .answers
        .iter()
        .chain(r.rounds.iter().flat_map(|x| x.setup.answers.iter()));
    for (k, n) in untimed {
        let status = k.rsplit(' ').next().unwrap_or("").to_string();
        if status != "301" {
            *by.entry(status).or_insert(0) += n;
        }
    }
    let cleanup: u64 = r.rounds.iter().map(|x| x.cleanup.requests).sum();
    *by.entry("204".into()).or_insert(0) += cleanup;
    by
}

/// `workload` against Cyrus as user `loadmix` for a few seconds: its report, and what
/// Cyrus logged meanwhile.
fn run_against_cyrus(workload: &str, more: &[&str]) -> (Report, BTreeMap<String, u64>) {
    let tmp = scratch();
    let password = std::fs::read_to_string(path("LOADMIX_REAL_CYRUS_PASSWORD_FILE"))
        .expect("the handed password file");
    let target = var("LOADMIX_REAL_CYRUS");
    let mut args = vec![
        workload,
        "--target",
        &target,
        "--user",
        "loadmix",
        "--duration",
        "4s",
        "--rounds",
        "1",
    ];
    args.extend_from_slice(more);
    let env = [("LOADMIX_PASSWORD", password.trim())];
    let (ran, logged) =
        logged_during_by(telemetry_statuses, &path("LOADMIX_REAL_CYRUS_LOG"), || {
            run_with(tmp.path(), &args, &env)
        });
    assert_eq!(ran.code, 0, "loadmix run {args:?}:\n{}", ran.stderr);
    (report(tmp.path()), logged)
}

fn clean_and_counted(what: &str, r: &Report, logged: &BTreeMap<String, u64>) {
    let counted = counted_statuses(r);
    eprintln!("{what}: loadmix counted {counted:?}, Cyrus logged {logged:?}");
    assert!(r.summary.total.requests > 0, "{what}");
    assert_eq!(
        r.summary.total.failures,
        0,
        "{what}: {:?}",
        r.failures.first()
    );
    assert_eq!(r.rounds[0].cleanup.failures, 0, "{what}");
    assert_eq!(&counted, logged, "{what}: status by status");
}

#[test]
#[ignore = "handed Cyrus by scripts/cyrus_check.sh"]
fn carddav_sync_runs_clean_on_cyrus_and_its_telemetry_logged_every_answer() {
    let (r, logged) = run_against_cyrus(
        "workloads/carddav-sync.yaml",
        &[
            "--set",
            "users.book.count=4",
            "--set",
            "users.book.params.initial_contacts=30",
        ],
    );
    clean_and_counted("carddav", &r, &logged);
    let queried = r
        .summary
        .ops
        .iter()
        .find(|o| o.op == "book.addressbook_query")
        .map_or(0, |o| o.requests);
    assert!(queried > 0, "addressbook_query never ran");
}

#[test]
#[ignore = "handed Cyrus by scripts/cyrus_check.sh"]
fn caldav_sync_runs_clean_on_cyrus_and_its_telemetry_logged_every_answer() {
    let (r, logged) = run_against_cyrus(
        "workloads/caldav-sync.yaml",
        &["--set", "users.caldav.count=4"],
    );
    clean_and_counted("caldav", &r, &logged);
}
