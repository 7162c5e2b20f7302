//! DAViCal on PostgreSQL (Debian's, under Apache and mod_php), set up by
//! examples/davical-postgres and handed over by scripts/servers_check.sh: a CalDAV
//! workload with nothing but the URL and a user, and nothing it made left in the database.

use crate::handed::{ask, run, scratch, var};

#[test]
#[ignore = "handed DAViCal by scripts/servers_check.sh"]
fn caldav_sync_runs_with_only_the_url_and_a_user_and_leaves_nothing() {
    let tmp = scratch();
    let r = run(
        tmp.path(),
        &[
            "workloads/caldav-sync.yaml",
            "--target",
            &var("LOADMIX_REAL_DAVICAL"),
            "--user",
            "admin",
            "--duration",
            "4s",
            "--rounds",
            "1",
        ],
    );
    let t = &r.summary.total;
    let cleanup = &r.rounds[0].cleanup;
    eprintln!(
        "{} requests, {} calendars deleted after the round",
        t.requests, cleanup.requests
    );
    assert!(t.requests > 0);
    assert_eq!(t.failures, 0, "{:?}", r.failures.first());
    assert_eq!(cleanup.failures, 0, "{cleanup:?}");
    // The handed command counts the collections under /admin/lm-% in DAViCal's database.
    let left = ask(&var("LOADMIX_REAL_DAVICAL_LEFT"), &[]);
    assert_eq!(
        left.trim(),
        "0",
        "calendars the run made are left in DAViCal"
    );
}
