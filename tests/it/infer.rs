//! `infer` and `fidelity` closing the loop on one machine: a known, seeded two-behaviour
//! workload runs against the embedded server, which logs every request; `infer` must
//! recover its weights, rows, think and pause times within their confidence intervals;
//! the inferred workload, run the same way, must pass `fidelity` against the first log,
//! and a deliberately different workload must fail it.

use crate::common::*;
use loadmix::logs::{self, Population};

/// Run `workload` for `secs` against a fresh embedded server and return its access log.
fn logged_run(
    tmp: &tempfile::TempDir,
    workload: &str,
    name: &str,
    secs: &str,
) -> std::path::PathBuf {
    let log = tmp.path().join(format!("{name}.log"));
    let (serve, port) = spawn_serve(&[
        "--stomp-bind",
        "127.0.0.1:0",
        "--access-log",
        &path_str(&log),
    ]);
    let out = tmp.path().join(format!("{name}-out"));
    let o = loadmix_bin(&[
        "run",
        workload,
        "--target",
        &format!("http://127.0.0.1:{port}/cosmo"),
        "--duration",
        secs,
        "--out",
        &path_str(&out),
        "--quiet",
    ]);
    stop_serve(serve);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(read_report(&out).summary.total.failures, 0);
    log
}

/// `|x - truth|` within three standard errors of a proportion estimated from `n`.
fn within(what: &str, x: f64, truth: f64, n: f64) {
    let se = (truth * (1.0 - truth) / n).sqrt();
    assert!(
        (x - truth).abs() <= 3.0 * se,
        "{what}: {x:.3} against {truth} (n {n:.0}, se {se:.3})"
    );
}

fn name_of(inf: &logs::Inferred, c: &logs::Class, local: usize) -> String {
    inf.scan.ops[c.ops[local]].name.clone()
}

#[test]
fn a_known_workload_is_recovered_from_its_log_and_its_inferred_twin_passes_fidelity() {
    let _alone = alone();
    let tmp = tempdir();
    let truth = logged_run(&tmp, "fixtures/infer/truth.yaml", "truth", "12s");
    let inf = logs::infer(&logs::InferOptions::of(vec![truth.clone()])).unwrap();
    // Think times are at most 150 ms and pauses at least 300 ms: the timeout falls between.
    let [cut] = &inf.scan.cuts[..] else {
        panic!("{:?}", inf.scan.cuts)
    };
    assert!(
        (150_000..=300_000).contains(&cut.timeout_us),
        "{}",
        cut.timeout_us
    );
    let [c] = &inf.classes[..] else {
        panic!(
            "{:?}",
            inf.classes.iter().map(|c| &c.name).collect::<Vec<_>>()
        )
    };
    let Population::Closed {
        count,
        pause: Some(pause),
    } = &c.population
    else {
        panic!("{:?}", c.population)
    };
    assert_eq!(*count, 6);
    // uniform [300 ms, 600 ms]: the median 450 ms, plus what a session's end costs.
    assert!((400_000.0..=520_000.0).contains(&pause.median), "{pause:?}");
    let [poll, write] = &c.behaviours[..] else {
        panic!("{} behaviours, BIC {:?}", c.behaviours.len(), c.bic)
    };
    let n = c.sessions as f64;
    within("poll's weight", poll.chain.weight, 2.0 / 3.0, n);
    let local = |name: &str| {
        (0..c.ops.len())
            .find(|&i| name_of(&inf, c, i) == name)
            .unwrap()
    };
    let (propfind, report, put) = (local("propfind"), local("report"), local("put_event"));
    let row = |b: &logs::Behaviour, from: usize, to: usize| {
        let counts = &b.chain.counts[from];
        (
            counts[to] / counts.iter().sum::<f64>(),
            counts.iter().sum::<f64>(),
        )
    };
    let (p, rows) = row(poll, propfind, report);
    within("poll: propfind → report", p, 0.9, rows);
    let (p, rows) = row(poll, report, c.ops.len());
    within("poll: report → exit", p, 0.75, rows);
    let (p, rows) = row(write, put, put);
    within("write: put_event → put_event", p, 0.6, rows);
    assert!(write.chain.start[put] > 0.9, "{:?}", write.chain.start);
    // exponential, mean 15 ms, at most 150 ms: median 10.4 ms; the log adds what passes
    // between one answer's head and the next request, a few milliseconds at most.
    for b in [poll, write] {
        let t = b.think.unwrap();
        assert!((8_000.0..=17_000.0).contains(&t.median), "{t:?}");
    }

    let inferred = tmp.path().join("inferred.yaml");
    let o = loadmix_bin(&[
        "infer",
        &path_str(&truth),
        "--duration",
        "12s",
        "-o",
        &path_str(&inferred),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let twin = logged_run(&tmp, &path_str(&inferred), "twin", "12s");
    let f = logs::compare(truth.clone(), twin, None, None).unwrap();
    assert!(f.passed(), "{}", f.table());
    assert!(
        f.checks.iter().filter(|c| c.pass.is_some()).count() >= 7,
        "{}",
        f.table()
    );

    // The model, sampled without traffic: the truth's own workload passes against its log,
    // the different one fails, and infer prints its model's table.
    let o = loadmix_bin(&["fidelity", &path_str(&truth), "fixtures/infer/truth.yaml"]);
    let table = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{table}");
    assert!(table.contains("sampled without traffic"), "{table}");
    // The run's own report against its log: the mix and the sessions agree; what a report
    // does not keep is not judged.
    let report = tmp.path().join("truth-out").join("run.json");
    let o = loadmix_bin(&["fidelity", &path_str(&truth), &path_str(&report)]);
    let table = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{table}");
    assert!(
        table.contains("a run's report") && table.contains("not judged"),
        "{table}"
    );
    let o = loadmix_bin(&[
        "fidelity",
        &path_str(&truth),
        "fixtures/infer/different.yaml",
    ]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let o = loadmix_bin(&["infer", &path_str(&truth), "-o", &path_str(&inferred)]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("every judged check passes"), "{err}");

    let other = logged_run(&tmp, "fixtures/infer/different.yaml", "other", "12s");
    let o = loadmix_bin(&["fidelity", &path_str(&truth), &path_str(&other)]);
    let table = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{table}");
    assert!(
        table.contains("operation mix") && table.contains("FAIL"),
        "{table}"
    );
}

#[test]
fn logs_that_are_not_logs_are_refused_and_bad_lines_counted() {
    let _alone = alone();
    let tmp = tempdir();
    let bad = tmp.path().join("bad.log");
    std::fs::write(&bad, "not a log line\n\u{0}\u{1}\n").unwrap();
    let o = loadmix_bin(&["infer", &path_str(&bad)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no line of it is a request"));
    let o = loadmix_bin(&["infer", &path_str(&tmp.path().join("missing.log"))]);
    assert_eq!(o.status.code(), Some(2));
    // A log of one client is said to be that, not to want a shorter timeout.
    let one = tmp.path().join("one.log");
    let lines: String = (0..50)
        .map(|i| {
            format!(
                "127.0.0.1 - - [02/Dec/2026:00:{:02}:{:02} +0000] \"GET /item/{i} HTTP/1.1\" 200 12 \"-\" \"curl/8\"\n",
                i / 10,
                (i % 10) * 5
            )
        })
        .collect();
    std::fs::write(&one, lines).unwrap();
    let o = loadmix_bin(&["infer", &path_str(&one)]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("comes from one client") && !err.contains("shorter"),
        "{err}"
    );
    // A device would never end, and a folder is no log.
    for special in ["/dev/zero", "fixtures"] {
        let o = loadmix_bin(&["infer", special]);
        assert_eq!(o.status.code(), Some(2), "{special}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("not an access log"),
            "{special}"
        );
    }
    // A broken report is named as one, not only as a log without a request.
    let broken = tmp.path().join("run.json");
    std::fs::write(&broken, "{\"schema\": ").unwrap();
    let o = loadmix_bin(&["fidelity", "fixtures/infer/mixed.log", &path_str(&broken)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a run's report"));
    let o = loadmix_bin(&[
        "infer",
        "fixtures/infer/mixed.log",
        "--session-timeout",
        "0s",
    ]);
    assert_eq!(o.status.code(), Some(2));
    // A log with good, broken and hostile lines: the good ones are read, the others counted
    // and the first shown with file:line:column.
    let o = loadmix_bin(&[
        "infer",
        "fixtures/infer/mixed.log",
        "--session-timeout",
        "30s",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("fixtures/infer/mixed.log:3:"), "{err}");
    assert!(err.contains("refused"), "{err}");
    let yaml = String::from_utf8_lossy(&o.stdout);
    assert!(
        loadmix::load_str("x.yaml", &yaml, &[], None).is_ok(),
        "{yaml}"
    );
    assert!(!yaml.contains("\nevil:"), "{yaml}");
}

/// A rule file names requests before the built-in classifiers: its operations appear in
/// the workload under its names, a static rule counts requests apart, and a broken rule
/// file is refused with file:line:column before any log is read.
#[test]
fn a_rule_file_names_the_requests_first() {
    let _alone = alone();
    let o = loadmix_bin(&[
        "infer",
        "fixtures/infer/mixed.log",
        "--session-timeout",
        "30s",
        "--rules",
        "fixtures/infer/rules.yaml",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let yaml = String::from_utf8_lossy(&o.stdout);
    for op in ["view_item:", "edit_item:", "save_item:"] {
        assert!(yaml.contains(op), "{op}: {yaml}");
    }
    assert!(yaml.contains("GET /item/{id}"), "{yaml}");
    assert!(!yaml.contains("get_item_n"), "{yaml}");
    // `^/a` takes the hostile path as a static file.
    assert!(!yaml.contains("evil"), "{yaml}");
    let tmp = tempdir();
    let bad = tmp.path().join("rules.yaml");
    std::fs::write(&bad, "rules:\n  - { op: x, path: '[' }\n").unwrap();
    let o = loadmix_bin(&[
        "infer",
        "fixtures/infer/mixed.log",
        "--rules",
        &path_str(&bad),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("rules.yaml:2:") && err.contains("not a regular expression"),
        "{err}"
    );
}

#[test]
fn each_user_names_itself_in_its_user_agent_though_all_share_one_account() {
    let _alone = alone();
    // Three CalDAV users behind the one admin account: only their User-Agent tells them
    // apart in the server's log, which is what `infer` keys a loadmix user by.
    let tmp = tempdir();
    let log = tmp.path().join("ua.log");
    let (serve, port) = spawn_serve(&["--access-log", &path_str(&log)]);
    let w = tmp.path().join("ua.yaml");
    std::fs::write(
        &w,
        "context: /cosmo\nrun: { iterations: 20, rounds: 1, seed: 3, warmup: 0s }\nusers:\n  - class: cal\n    protocol: caldav\n    count: 3\n    mix: { sync_collection: 3, put_event: 1 }\n",
    )
    .unwrap();
    let out = tmp.path().join("out");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_loadmix"))
        .args([
            "run",
            &path_str(&w),
            "--target",
            &format!("http://127.0.0.1:{port}/cosmo"),
        ])
        .args(["--user", "root", "--quiet", "--out", &path_str(&out)])
        .env("LOADMIX_PASSWORD", "cosmo")
        .output()
        .unwrap();
    stop_serve(serve);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = read_report(&out);
    let text = std::fs::read_to_string(&log).unwrap();
    let mut by_agent = std::collections::BTreeMap::new();
    for line in text.lines() {
        // Combined Log Format: the agent is the third quoted field.
        let agent = line.split('"').nth(5).unwrap_or("-");
        *by_agent.entry(agent.to_string()).or_insert(0u64) += 1;
    }
    let version = env!("CARGO_PKG_VERSION");
    for vu in 0..3 {
        let agent = format!("loadmix/{version} (run {}; cal#{vu})", r.run_id);
        // 20 operations each, its calendar's bootstrap among them (its set-up says so).
        assert!(
            by_agent.get(&agent).copied().unwrap_or(0) >= 20,
            "{agent}: {by_agent:?}"
        );
    }
}

/// A run's set-up (accounts, calendars, the events its users start with, the collections
/// they publish) is in the server's log but not in the run's mix: loadmix marks it in its
/// `User-Agent`, and `infer` and `fidelity` read it as set-up, so a log held against its
/// own run's report has the same mix.
#[test]
fn a_logs_mix_held_against_its_own_runs_report_leaves_the_set_up_out() {
    let _alone = alone();
    let tmp = tempdir();
    let log = logged_run(&tmp, "workloads/cosmo-0.7.yaml", "cosmo", "6s");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("; setup)"), "no set-up request marked");
    let report = tmp.path().join("cosmo-out").join("run.json");
    let o = loadmix_bin(&["fidelity", &path_str(&log), &path_str(&report)]);
    let table = String::from_utf8_lossy(&o.stdout);
    let mix = table
        .lines()
        .find(|l| l.contains("operation mix"))
        .unwrap_or_default();
    assert!(mix.contains("pass"), "{table}");
}
