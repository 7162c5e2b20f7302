//! Users that keep their data from round to round (`run.keep_state`), against the
//! embedded server: each user's calendar is made and filled once, before the first round
//! (a warm-up round included), its events are acted on in every round after, and it is
//! removed once, after the last; every request the server answered is in the report.

use crate::common::*;

/// CalDAV users with 10 events each and no put in their mix, over a warm-up round and
/// three measured rounds: the report, and the server's counts by (method, status).
fn run(keep_state: bool) -> (loadmix::reports::Report, Vec<(String, u16, u64)>) {
    run_embedded(&format!(
        "context: /cosmo\naccounts: {{ create: cmp }}\nrun: {{ duration: 500ms, rounds: 3, warmup_rounds: 1, keep_state: {keep_state}, seed: 5 }}\nthink: 20ms\nusers:\n  - class: cal\n    protocol: caldav\n    count: 4\n    params: {{ initial_events: 10 }}\n    mix: {{ sync_collection: 40, update_event: 40, get_event: 20 }}\n"
    ))
}

/// Everything the report accounts for: measured, preflight, set-up, cleanup and the
/// warm-up round's.
fn reported(r: &loadmix::reports::Report) -> u64 {
    r.summary.total.requests
        + r.preflight.requests
        + r.rounds
            .iter()
            .map(|x| x.warmup_requests + x.setup.requests + x.cleanup.requests)
            .sum::<u64>()
        + r.warmup_rounds
            .iter()
            .map(|w| w.successes + w.failures + w.other_requests)
            .sum::<u64>()
}

#[test]
fn kept_users_are_set_up_once_and_cleaned_up_once_and_every_request_is_counted() {
    let (r, counts) = run(true);
    assert!(r.workload.run.keep_state);
    let total: u64 = counts.iter().map(|(_, _, n)| n).sum();
    assert_eq!(total, reported(&r), "the server's count: {counts:?}");
    // Made and filled once, in the warm-up round's set-up, before any measured round.
    assert_eq!(answered(&counts, "MKCALENDAR", 201), 4);
    for round in &r.rounds {
        assert_eq!(round.setup.requests, 0, "round {}: no set-up", round.index);
    }
    let updates = op(&r, "cal.update_event").successes;
    assert!(updates > 0);
    assert_eq!(
        answered(&counts, "PUT", 201),
        4 * 10 + 4 + 1,
        "the 40 events and the 4 accounts (CMP's PUT) were made once, and the preflight's \
         account: {counts:?}"
    );
    assert!(
        answered(&counts, "PUT", 204) > updates,
        "then only updated, in the warm-up round and the measured ones: {counts:?}"
    );
    // Removed once, after the last round, in its cleanup.
    let cleanups: Vec<u64> = r.rounds.iter().map(|x| x.cleanup.requests).collect();
    assert_eq!(cleanups, vec![0, 0, 4]);
    assert_eq!(answered(&counts, "DELETE", 204), 4);
    // Every pick found an event: the calendars held data in every round.
    assert_eq!(r.summary.total.skipped, 0);
}

#[test]
fn without_kept_state_each_round_starts_its_users_afresh() {
    let (r, counts) = run(false);
    assert!(!r.workload.run.keep_state);
    let total: u64 = counts.iter().map(|(_, _, n)| n).sum();
    assert_eq!(total, reported(&r), "the server's count: {counts:?}");
    // A warm-up round and three measured ones, each with its own calendars.
    assert_eq!(answered(&counts, "MKCALENDAR", 201), 4 * 4);
    assert_eq!(answered(&counts, "DELETE", 204), 4 * 4);
    assert_eq!(answered(&counts, "PUT", 201), 4 * (4 * 10 + 4) + 1);
    for round in &r.rounds {
        assert_eq!(round.setup.answers.get("MKCALENDAR 201"), Some(&4));
        assert_eq!(round.cleanup.requests, 4);
    }
}
