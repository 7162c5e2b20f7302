//! `infer` on the log a user has: nginx in front of the embedded server, logging with the
//! JSON `log_format` the book recommends (scripts/servers_check.sh takes it from
//! docs/src/infer.md). A known population runs through it; `infer` must recover its two
//! classes (closed pollers, open editors), their behaviours' rows and their think times,
//! and the inferred workload, run through nginx again, must pass `fidelity` against it.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use loadmix::logs::{self, Population};

use crate::handed::{loadmix, path, run, scratch, var};

/// Run `workload` through nginx and keep what nginx logged meanwhile in `name`.
fn logged_through_nginx(tmp: &Path, workload: &str, name: &str) -> PathBuf {
    logged_through_nginx_with(tmp, workload, name, &[])
}

/// As [`logged_through_nginx`], with more arguments to `run`.
fn logged_through_nginx_with(tmp: &Path, workload: &str, name: &str, more: &[&str]) -> PathBuf {
    let log = path("LOADMIX_REAL_NGINX_JSON_LOG");
    let before = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
    let target = var("LOADMIX_REAL_NGINX_JSON");
    let mut args = vec![workload, "--target", &target];
    args.extend_from_slice(more);
    let r = run(&tmp.join(format!("{name}-out")), &args);
    assert_eq!(r.summary.total.failures, 0, "{:?}", r.failures.first());
    let mut f = std::fs::File::open(&log).expect("nginx's log");
    f.seek(SeekFrom::Start(before)).unwrap();
    let mut gained = Vec::new();
    f.read_to_end(&mut gained).unwrap();
    let kept = tmp.join(format!("{name}.json"));
    std::fs::write(&kept, gained).unwrap();
    kept
}

/// The one closed class and the one open class `infer` must find.
fn closed_and_open(inf: &logs::Inferred) -> (&logs::Class, &logs::Class) {
    let of = |closed: bool| -> Vec<&logs::Class> {
        inf.classes
            .iter()
            .filter(|c| matches!(c.population, Population::Closed { .. }) == closed)
            .collect()
    };
    let (closed, open) = (of(true), of(false));
    let ([c], [o]) = (&closed[..], &open[..]) else {
        panic!(
            "{:?}",
            inf.classes
                .iter()
                .map(|c| &c.population)
                .collect::<Vec<_>>()
        );
    };
    (c, o)
}

/// How `infer` cut the sessions of loadmix class `group`.
fn cut<'a>(inf: &'a logs::Inferred, group: &str) -> &'a logs::Cut {
    inf.scan
        .cuts
        .iter()
        .find(|c| c.group == group)
        .unwrap_or_else(|| panic!("no group {group}: {:?}", inf.scan.cuts))
}

/// `x` within a factor `by` of `truth`.
fn near(what: &str, x: f64, truth: f64, by: f64) {
    assert!(
        x >= truth / by && x <= truth * by,
        "{what}: {x:.3} against {truth:.3} (within ×{by})"
    );
}

#[test]
#[ignore = "handed nginx in front of the embedded server by scripts/servers_check.sh"]
fn infer_recovers_closed_pollers_and_open_editors_from_an_nginx_json_log() {
    let tmp = scratch();
    let truth = logged_through_nginx(tmp.path(), "fixtures/infer/two-classes.yaml", "truth");
    let inf = logs::infer(&logs::InferOptions::of(vec![truth.clone()])).unwrap();
    // The pollers' think times reach about 1 s, their pauses start at 2 s: their
    // timeout falls between.
    let timeout = cut(&inf, "poller").timeout_us;
    assert!(
        (700_000..=2_000_000).contains(&timeout),
        "timeout {timeout} µs"
    );
    let (pollers, editors) = closed_and_open(&inf);
    let Population::Closed {
        count,
        pause: Some(pause),
    } = &pollers.population
    else {
        panic!("{:?}", pollers.population)
    };
    assert_eq!(*count, 6);
    // uniform [2 s, 3 s]: the median 2.5 s, plus what a session's end costs.
    near("the pollers' pause median", pause.median, 2_500_000.0, 1.2);
    let Population::Open { rate, .. } = &editors.population else {
        unreachable!()
    };
    near("the editors' arrival rate", *rate, 4.0, 1.15);
    for (class, truth_median) in [
        // exponential of mean 150 ms (at most 1 s) and 300 ms (at most 2 s).
        (pollers, 150_000.0 * std::f64::consts::LN_2),
        (editors, 300_000.0 * std::f64::consts::LN_2),
    ] {
        assert_eq!(
            class.behaviours.len(),
            1,
            "{}: BIC {:?}",
            class.name,
            class.bic
        );
        let think = class.think.as_ref().expect("a think time");
        near(
            &format!("{}'s think median", class.name),
            think.median,
            truth_median,
            1.35,
        );
    }
    // The rows: propfind → report 0.9 for the pollers, put → put 0.6 for the editors.
    let row = |c: &logs::Class, from: &str, to: &str| {
        let local = |name: &str| {
            (0..c.ops.len())
                .find(|&i| inf.scan.ops[c.ops[i]].name == name)
                .unwrap_or_else(|| panic!("{}: no {name}", c.name))
        };
        let counts = &c.behaviours[0].chain.counts[local(from)];
        let n: f64 = counts.iter().sum();
        (counts[local(to)] / n, n)
    };
    for (c, from, to, truth) in [
        (pollers, "propfind", "report", 0.9),
        (editors, "put_event", "put_event", 0.6),
    ] {
        let (p, n) = row(c, from, to);
        let se = (truth * (1.0 - truth) / n).sqrt();
        assert!(
            (p - truth).abs() <= 3.0 * se,
            "{from} → {to}: {p:.3} against {truth} (n {n})"
        );
    }

    let inferred = tmp.path().join("inferred.yaml");
    let truth_arg = truth.display().to_string();
    let o = loadmix(
        &["infer", &truth_arg, "-o", &inferred.display().to_string()],
        &[],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let twin = logged_through_nginx(tmp.path(), &inferred.display().to_string(), "twin");
    let f = logs::compare(truth, twin, None, None).unwrap();
    eprintln!("{}", f.table());
    assert!(f.passed(), "{}", f.table());
}

/// The book's own example workload through nginx for 120 s, inferred with no timeout
/// given: its pollers pause 1-3 s and think up to 0.5 s, its editors think for seconds
/// (lognormal, p95 2 s) and come once each, so no one timeout cuts both. Each class the
/// User-Agent names is cut at its own gaps: the pollers at the valley in theirs, the
/// editors (whose gaps have none) each one session. The editors' two behaviours come back
/// apart: planners who put and read, tidiers who delete (their calendars hold events from
/// their set-up, which `infer` leaves out). The twin, run for 40 s from what is inferred,
/// passes `fidelity`. (On 40 s, about 110 sessions of two or three operations, BIC keeps
/// one behaviour: what tells a tidier from a planner is in the few sessions that come
/// back to the report.)
#[test]
#[ignore = "handed nginx in front of the embedded server by scripts/servers_check.sh"]
fn infer_needs_no_timeout_for_clients_a_user_agent_names() {
    let tmp = scratch();
    let truth = logged_through_nginx_with(
        tmp.path(),
        "workloads/caldav-clients.yaml",
        "clients",
        &["--duration", "120s", "--rounds", "1"],
    );
    let inf = logs::infer(&logs::InferOptions::of(vec![truth.clone()])).unwrap();
    let (pollers, editors) = (cut(&inf, "poller"), cut(&inf, "editor"));
    // The pollers think at most 500 ms and pause at least 1 s.
    assert!(
        (500_000..=1_000_000).contains(&pollers.timeout_us) && pollers.from.contains("valley"),
        "{pollers:?}"
    );
    assert!(editors.from.contains("no valley"), "{editors:?}");
    let (p, e) = closed_and_open(&inf);
    assert!(
        matches!(p.population, Population::Closed { count: 6, .. }),
        "{:?}",
        p.population
    );
    let Population::Open { rate, .. } = &e.population else {
        unreachable!()
    };
    near("the editors' arrival rate", *rate, 4.0, 1.15);
    // Each editor came once: as many sessions as editors.
    assert_eq!(
        e.sessions + e.cut,
        e.clients,
        "{} sessions + {} cut",
        e.sessions,
        e.cut
    );
    editors_plan_and_tidy(&inf, e);

    // The editors read and delete events they never put (their calendars held some
    // from their set-up, which infer leaves out): each user of the replay must hold a
    // few; the pollers only look.
    assert!((1..=30).contains(&e.held), "editors hold {}", e.held);
    assert_eq!(p.held, 0);

    let inferred = tmp.path().join("clients-inferred.yaml");
    let o = loadmix(
        &[
            "infer",
            &truth.display().to_string(),
            "-o",
            &inferred.display().to_string(),
        ],
        &[],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let twin = logged_through_nginx_with(
        tmp.path(),
        &inferred.display().to_string(),
        "clients-twin",
        &["--duration", "40s", "--rounds", "1"],
    );
    let f = logs::compare(truth, twin, None, None).unwrap();
    eprintln!("{}", f.table());
    assert!(f.passed(), "{}", f.table());
}

/// The editors' two behaviours, told apart by the row of the report each session starts
/// with: the planners' goes on to put or read and never deletes (truth: put 0.5, get 0.3,
/// exit 0.2), the tidiers' deletes and neither puts nor reads (truth: delete 0.6, exit
/// 0.4; a planner's "report, leave" may be taken for a tidier's, which lowers it), and
/// the tidiers are about a quarter of the sessions (truth 1 : 3).
fn editors_plan_and_tidy(inf: &logs::Inferred, e: &logs::Class) {
    assert_eq!(e.behaviours.len(), 2, "BIC {:?}", e.bic);
    let local = |name: &str| {
        (0..e.ops.len())
            .find(|&i| inf.scan.ops[e.ops[i]].name == name)
            .unwrap_or_else(|| panic!("{}: no {name}", e.name))
    };
    let (put, get, delete) = (
        local("put_event"),
        local("get_event"),
        local("delete_event"),
    );
    // Each behaviour's first operation, and its row's shares.
    let first_row = |b: &logs::Behaviour| -> (Vec<f64>, f64) {
        let c = &b.chain;
        let start = (0..c.start.len())
            .max_by(|&i, &j| c.start[i].total_cmp(&c.start[j]))
            .unwrap();
        let n: f64 = c.counts[start].iter().sum();
        (c.counts[start].iter().map(|x| x / n).collect(), n)
    };
    let (tidier, planner) =
        match first_row(&e.behaviours[0]).0[delete] > first_row(&e.behaviours[1]).0[delete] {
            true => (&e.behaviours[0], &e.behaviours[1]),
            false => (&e.behaviours[1], &e.behaviours[0]),
        };
    let (t, tn) = first_row(tidier);
    let (p, pn) = first_row(planner);
    assert!(
        t[delete] >= 0.3 && t[put] + t[get] <= 0.05,
        "the tidiers' report row {t:?} (n {tn})"
    );
    assert!(p[delete] <= 0.02, "the planners' report row {p:?} (n {pn})");
    let se = (0.5_f64 * 0.5 / pn).sqrt();
    assert!(
        (p[put] - 0.5).abs() <= 3.0 * se,
        "the planners' report → put {:.3} (n {pn})",
        p[put]
    );
    assert!(
        (0.15..=0.40).contains(&tidier.chain.weight),
        "the tidiers' share of sessions {:.3}",
        tidier.chain.weight
    );
}
