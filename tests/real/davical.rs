//! DAViCal on PostgreSQL (Debian's, under Apache and mod_php), set up by
//! examples/davical-postgres and handed over by scripts/servers_check.sh: a CalDAV
//! workload with nothing but the URL and a user, and nothing it made left in the database;
//! and teams whose owners grant the members with DAViCal's ACLs, every request of theirs
//! equal to Apache's log; and CardDAV clients of their own address books, likewise.

use crate::handed::{
    Sent, ask, logged_during, only_500s, path, run, scratch, team_invited_and_answered, team_run,
    team_saw_every_write, var,
};

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

#[test]
#[ignore = "handed DAViCal by scripts/servers_check.sh"]
fn carddav_sync_runs_clean_on_davical_and_apache_logged_every_request() {
    let tmp = scratch();
    let (r, logged) = logged_during(&path("LOADMIX_REAL_DAVICAL_LOG"), || {
        run(
            tmp.path(),
            &[
                "workloads/carddav-sync.yaml",
                "--target",
                &var("LOADMIX_REAL_DAVICAL"),
                "--user",
                "admin",
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
        "measured {} + set-up {} + cleanup {} against Apache's {logged:?}",
        sent.measured, sent.setup, sent.cleanup
    );
    assert!(r.summary.total.requests > 0);
    assert_eq!(r.summary.total.failures, 0, "{:?}", r.failures.first());
    assert_eq!(r.rounds[0].cleanup.failures, 0);
    assert_eq!(sent.all(), logged.values().sum::<u64>());
    let left = ask(&var("LOADMIX_REAL_DAVICAL_LEFT"), &[]);
    assert_eq!(
        left.trim(),
        "0",
        "address books the run made are left in DAViCal"
    );
}

#[test]
#[ignore = "handed DAViCal and its team accounts by scripts/servers_check.sh"]
fn a_team_shares_a_calendar_on_davical_by_acl_invites_and_sees_every_write() {
    let tmp = scratch();
    // Brisk organizers and attendees: with the workload's thinks (a mean of 2 s a pick,
    // 2 s before an answer) a slow host's 10 s round can end before any answer reaches
    // an organizer's inbox; at 500 ms a pick and 300 ms before an answer, answers come
    // back several times a round.
    let (r, logged) = team_run(
        tmp.path(),
        (
            &path("LOADMIX_REAL_DAVICAL_LOG"),
            &path("LOADMIX_REAL_DAVICAL_TEAM_ACCOUNTS"),
        ),
        "10s",
        &[
            "--target",
            &var("LOADMIX_REAL_DAVICAL"),
            "--set",
            "users.organizers.think=500ms",
            "--set",
            "users.attendees.behaviours.attendee.states.inbox.answer.think=300ms",
        ],
    );
    // DAViCal 1.1.12 on PostgreSQL now and then meets a deadlock when invitations,
    // cancellations and answers cross (its log: "SQLSTATE[40P01] ... deadlock detected"),
    // and the request chosen as the victim, of any operation, gets a 500. That is the
    // server's fault: every failure is one of its 500s, as many as its log has.
    let failures = r.summary.total.failures;
    let by_op: Vec<(&str, u64)> = r
        .summary
        .ops
        .iter()
        .filter(|o| o.class.is_some() && o.failures > 0)
        .map(|o| (o.op.as_str(), o.failures))
        .collect();
    eprintln!("DAViCal's 500s: {failures} {by_op:?}");
    only_500s(&r, "the team run");
    assert_eq!(
        logged.get("500").copied().unwrap_or(0),
        failures,
        "{logged:?}"
    );
    let sent = Sent::of(&r);
    assert_eq!(sent.all(), logged.values().sum::<u64>(), "{logged:?}");
    // Each of the four owners granted its members with one ACL request.
    let acl = r.rounds[0].setup.answers.get("ACL 200").copied();
    assert_eq!(acl, Some(4), "{:?}", r.rounds[0].setup);
    // A failed write may have reached those who should see it all the same (at most the
    // three pollers of an editor's).
    team_saw_every_write(&r, 3 * failures);
    // DAViCal schedules: the organizers' invitations reach the attendees, and their
    // answers the organizers.
    team_invited_and_answered(&r);
    // The handed command counts the collections under the team accounts.
    let left = ask(&var("LOADMIX_REAL_DAVICAL_TEAM_LEFT"), &[]);
    assert_eq!(left.trim(), "0", "team calendars are left in DAViCal");
}
