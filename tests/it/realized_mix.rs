//! The mix sent held against the mix asked, in a real run against the embedded server: a
//! pick with nothing to act on is counted under its operation (exactly the op log's
//! `skipped` rows), the report says which share of the asked mix was not sent, and a mix
//! that can never send anything stops its users instead of spinning.

use std::collections::BTreeMap;

use crate::common::*;

fn caldav_run(
    mix: &str,
    users: u32,
    iterations: u32,
) -> (loadmix::reports::Report, String, String) {
    let rt = runtime();
    let srv = embedded(&rt);
    let tmp = tempdir();
    let w = tmp.path().join("w.yaml");
    std::fs::write(
        &w,
        format!(
            "context: /cosmo\naccounts: {{ create: cmp }}\nrun: {{ iterations: {iterations}, rounds: 1, seed: 11, warmup: 0s }}\nthink: 0ms\nusers:\n  - class: cal\n    protocol: caldav\n    count: {users}\n    mix: {mix}\n"
        ),
    )
    .unwrap();
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
    rt.block_on(srv.stop());
    let r = read_report(&out);
    let text = std::fs::read_to_string(out.join("report.txt")).unwrap_or_default();
    (r, std::fs::read_to_string(&log).unwrap(), text)
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
    let (r, log, text) = caldav_run(
        "{ sync_collection: 70, put_event: 10, update_event: 10, get_event: 10 }",
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
fn a_mix_that_can_send_nothing_stops_its_users_and_says_why() {
    let (r, _, _) = caldav_run(
        "{ update_event: 1, get_event: 1, delete_event: 1 }",
        3,
        100_000,
    );
    let skipped: u64 = ["cal.update_event", "cal.get_event", "cal.delete_event"]
        .iter()
        .map(|o| op(&r, o).skipped)
        .sum();
    // Each user stops after the same number of fruitless picks in a row.
    assert_eq!(skipped, 3 * 1_000);
    let sent: u64 = ["cal.update_event", "cal.get_event", "cal.delete_event"]
        .iter()
        .map(|o| op(&r, o).requests)
        .sum();
    assert_eq!(sent, 0);
    let warned = r.rounds[0]
        .generator
        .warnings
        .iter()
        .any(|w| w.contains("3 users stopped") && w.contains("found nothing to act on"));
    assert!(warned, "{:?}", r.rounds[0].generator.warnings);
    assert!(r.summary.mix[0].differs || r.summary.mix[0].sent == 0);
}

#[test]
fn a_mix_that_always_acts_is_sent_as_asked() {
    // Puts and syncs always have something to act on: nothing is skipped, and Pearson's
    // test finds the shares sent consistent with the shares asked.
    let (r, log, _) = caldav_run("{ sync_collection: 3, put_event: 1 }", 4, 250);
    assert!(skipped_in_log(&log).is_empty());
    let m = &r.summary.mix[0];
    assert_eq!((m.sent, m.skipped), (4 * 250, 0));
    let t = m.test.as_ref().expect("enough picks for the test");
    assert!(t.p_value > 0.001, "{t:?}");
    assert!(!m.differs, "{m:?}");
}
