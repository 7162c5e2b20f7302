//! The mix sent held against the mix asked, in a real run against the embedded server: a
//! pick with nothing to act on is counted under its operation (exactly the op log's
//! `skipped` rows), the report says which share of the asked mix was not sent, and a mix
//! that can never send anything stops its users instead of spinning.

use std::collections::BTreeMap;

use crate::common::*;

/// What a CalDAV run against the embedded server came to.
struct Ran {
    r: loadmix::reports::Report,
    /// The `--log-ops` CSV.
    log: String,
    /// `report.txt`.
    text: String,
    /// PUTs the server answered 201.
    puts: u64,
}

/// A workload of `users` CalDAV users of class `cal` with `mix` (and `params`),
/// `iterations` picks each, written in `dir`.
fn caldav_workload(
    dir: &std::path::Path,
    mix: &str,
    params: &str,
    users: u32,
    iterations: u32,
) -> std::path::PathBuf {
    let w = dir.join("w.yaml");
    std::fs::write(
        &w,
        format!(
            "context: /cosmo\naccounts: {{ create: cmp }}\nrun: {{ iterations: {iterations}, rounds: 1, seed: 11, warmup: 0s }}\nthink: 0ms\nusers:\n  - class: cal\n    protocol: caldav\n    count: {users}\n    params: {{ {params} }}\n    mix: {mix}\n"
        ),
    )
    .unwrap();
    w
}

/// That workload run against the embedded server.
fn caldav_run(mix: &str, params: &str, users: u32, iterations: u32) -> Ran {
    let rt = runtime();
    let srv = embedded(&rt);
    let tmp = tempdir();
    let w = caldav_workload(tmp.path(), mix, params, users, iterations);
    let (out, log) = (out_dir(&tmp), tmp.path().join("ops.csv"));
    let code = loadmix(&[
        "run",
        &path_str(&w),
        "--target",
        &srv.url(),
        "--out",
        &path_str(&out),
        "--log-ops",
        &path_str(&log),
        "--quiet",
    ]);
    assert_eq!(code, 0);
    let puts = srv.stats.count("PUT", 201);
    rt.block_on(srv.stop());
    Ran {
        r: read_report(&out),
        log: std::fs::read_to_string(&log).unwrap(),
        text: std::fs::read_to_string(out.join("report.txt")).unwrap_or_default(),
        puts,
    }
}

/// Rows of the op log with `error` `skipped`, by operation.
fn skipped_in_log(log: &str) -> BTreeMap<String, u64> {
    let mut by = BTreeMap::new();
    for line in log.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        if f[10] == "skipped" {
            *by.entry(format!("{}.{}", f[1], f[4])).or_insert(0) += 1;
        }
    }
    by
}

#[test]
fn a_pick_with_nothing_to_act_on_is_counted_and_the_mix_sent_says_so() {
    // 20 users each begin with an empty calendar: an update or a get picked before the
    // user's first put finds nothing to act on.
    let Ran { r, log, text, .. } = caldav_run(
        "{ sync_collection: 70, put_event: 10, update_event: 10, get_event: 10 }",
        "",
        20,
        30,
    );
    let logged = skipped_in_log(&log);
    for name in [
        "cal.sync_collection",
        "cal.put_event",
        "cal.update_event",
        "cal.get_event",
    ] {
        assert_eq!(
            op(&r, name).skipped,
            logged.get(name).copied().unwrap_or(0),
            "{name}: the report's skipped picks are the op log's"
        );
    }
    assert!(op(&r, "cal.update_event").skipped > 0, "{logged:?}");
    assert_eq!(
        op(&r, "cal.put_event").skipped,
        0,
        "a put always has something to do"
    );
    let m = r
        .summary
        .mix
        .iter()
        .find(|m| m.class == "cal")
        .expect("the class's mix");
    // Each user's calendar is made in its set-up, off the clock: no measured bootstrap.
    let bootstraps: u64 = r.summary.ops.iter().map(|o| o.bootstraps).sum();
    assert_eq!(bootstraps, 0);
    let made: u64 = r
        .rounds
        .iter()
        .map(|x| x.setup.answers.get("MKCALENDAR 201").copied().unwrap_or(0))
        .sum();
    assert_eq!(made, 20, "one calendar made by each user, in its set-up");
    assert_eq!(
        m.sent + m.skipped,
        20 * 30,
        "every pick is either sent or skipped"
    );
    let skipped: u64 = logged.values().sum();
    assert_eq!(m.skipped, skipped);
    if m.differs {
        assert!(
            text.contains("WARNING: mix: cal: the mix sent is not the mix asked"),
            "{text}"
        );
    }
}

#[test]
fn a_mix_that_could_never_act_is_refused_where_it_is_written() {
    let tmp = tempdir();
    let w = tmp.path().join("noop.yaml");
    std::fs::write(
        &w,
        "accounts: { create: cmp }\nusers:\n  - class: cal\n    protocol: caldav\n    count: 3\n    mix: { update_event: 1, get_event: 1, delete_event: 1 }\n",
    )
    .unwrap();
    let o = loadmix_bin(&["validate", &path_str(&w)]);
    assert_eq!(o.status.code(), Some(2));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("noop.yaml:6:10: users.cal.mix:"), "{said}");
    assert!(
        said.contains("no operation of this class puts one"),
        "{said}"
    );
    // A put with no weight puts nothing either.
    std::fs::write(
        &w,
        "accounts: { create: cmp }\nusers:\n  - class: cal\n    protocol: caldav\n    count: 3\n    mix: { get_event: 1, put_event: 0 }\n",
    )
    .unwrap();
    assert_eq!(
        loadmix_bin(&["validate", &path_str(&w)]).status.code(),
        Some(2)
    );
}

#[test]
fn validate_foresees_the_picks_that_will_find_nothing_and_warns() {
    // One calendar each, puts rare: `validate`'s sampled plan walks the very picks the
    // run makes through the events each user holds, so it finds the skipped picks the
    // run then reports, operation by operation.
    let (mix, users, iterations) = ("{ put_event: 5, update_event: 45, get_event: 50 }", 20, 20);
    let tmp = tempdir();
    let w = caldav_workload(tmp.path(), mix, "", users, iterations);
    let o = loadmix_bin(&["validate", &path_str(&w)]);
    assert_eq!(o.status.code(), Some(0), "a warning, not a refusal");
    let (said, warned) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(
        warned.contains("warning: class 'cal':") && warned.contains("would find nothing to act on"),
        "{warned}"
    );
    let line = said
        .lines()
        .find(|l| l.starts_with("a sampled plan (20 user(s), 20 picks each)"))
        .unwrap_or_else(|| panic!("{said}"));
    let Ran { r, .. } = caldav_run(mix, "", users, iterations);
    for name in ["update_event", "get_event"] {
        let skipped = op(&r, &format!("cal.{name}")).skipped;
        assert!(skipped > 0);
        assert!(
            line.contains(&format!("{name} {skipped}")),
            "the run skipped {skipped} {name}: {line}"
        );
    }
    // With events from set-up, nothing to warn of.
    let w = caldav_workload(tmp.path(), mix, "initial_events: 20", users, iterations);
    let o = loadmix_bin(&["validate", &path_str(&w)]);
    assert!(!String::from_utf8_lossy(&o.stderr).contains("warning: class"));
}

#[test]
fn users_whose_picks_run_out_of_things_to_act_on_stop_and_say_why() {
    // Five events each, and a mix that only deletes: after five deletes every pick finds
    // nothing, and each user stops after the same number of fruitless picks in a row.
    let Ran { r, .. } = caldav_run("{ delete_event: 1 }", "initial_events: 5", 3, 100_000);
    let d = op(&r, "cal.delete_event");
    assert_eq!(d.requests, 3 * 5);
    assert_eq!(d.skipped, 3 * 1_000);
    let warned = r.rounds[0]
        .generator
        .warnings
        .iter()
        .any(|w| w.contains("3 users stopped") && w.contains("found nothing to act on"));
    assert!(warned, "{:?}", r.rounds[0].generator.warnings);
}

#[test]
fn calendars_filled_in_set_up_leave_no_pick_without_an_event() {
    // 40 events per user before the clock: updates, gets and reports all have events to
    // act on from the first pick, and the events are set-up, counted off the clock.
    let Ran { r, log, puts, .. } = caldav_run(
        "{ update_event: 1, get_event: 1, time_range_report: 1 }",
        "initial_events: 40",
        4,
        60,
    );
    assert!(skipped_in_log(&log).is_empty(), "nothing skipped");
    let m = &r.summary.mix[0];
    assert_eq!((m.sent, m.skipped), (4 * 60, 0));
    assert!(!m.differs, "{m:?}");
    let setup_puts: u64 = r
        .rounds
        .iter()
        .map(|x| x.setup.answers.get("PUT 201").copied().unwrap_or(0))
        .sum();
    let preflight_puts = r.preflight.answers.get("PUT 201").copied().unwrap_or(0);
    // Each user's CMP account and its 40 events, in its set-up.
    assert_eq!(setup_puts, 4 * (1 + 40));
    assert_eq!(
        puts,
        setup_puts + preflight_puts,
        "no PUT among the measured picks"
    );
}

#[test]
fn a_mix_that_always_acts_is_sent_as_asked() {
    // Puts and syncs always have something to act on: nothing is skipped, and Pearson's
    // test finds the shares sent consistent with the shares asked.
    let Ran { r, log, .. } = caldav_run("{ sync_collection: 3, put_event: 1 }", "", 4, 250);
    assert!(skipped_in_log(&log).is_empty());
    let m = &r.summary.mix[0];
    assert_eq!((m.sent, m.skipped), (4 * 250, 0));
    let t = m.test.as_ref().expect("enough picks for the test");
    assert!(t.p_value > 0.001, "{t:?}");
    assert!(!m.differs, "{m:?}");
}
