//! Comparing configurations: `compare` on saved runs with a known difference (real runs of
//! the embedded memory and SQLite stores, under fixtures/compare/), identical runs, runs of
//! different workloads; thresholds and their exit code; two targets interleaved round by
//! round; a sweep; CSV; self-contained HTML.

use crate::common::*;
use loadmix::reports::compare;

fn fixture(name: &str) -> loadmix::reports::Report {
    loadmix::reports::load(&root().join("fixtures/compare").join(name)).unwrap()
}

#[test]
fn a_known_difference_is_found_and_called_significant() {
    let (mem, sql) = (fixture("queue-memory.json"), fixture("queue-sqlite.json"));
    let c = compare::compare(
        &["memory".into(), "sqlite".into()],
        &[mem.clone(), sql.clone()],
        false,
    )
    .unwrap();
    let total = c.rows.iter().find(|r| r.op == "total").unwrap();
    let base = total.cells[0].as_ref().unwrap();
    let other = total.cells[1].as_ref().unwrap();
    assert_eq!(base.ratio, None, "the first run is the baseline");
    let ratio = other.ratio.unwrap();
    let expected = sql
        .summary
        .total
        .across_rounds
        .as_ref()
        .unwrap()
        .ops_per_sec_mean
        / mem
            .summary
            .total
            .across_rounds
            .as_ref()
            .unwrap()
            .ops_per_sec_mean;
    assert!((ratio - expected).abs() < 1e-9);
    assert!(
        ratio < 0.5,
        "SQLite is much slower on this write-heavy queue: {ratio}"
    );
    assert_eq!(other.significant, Some(true), "p = {:?}", other.p_value);
    assert!(c.method.contains("Welch"));
}

#[test]
fn identical_runs_show_no_significant_difference() {
    let mem = fixture("queue-memory.json");
    let c = compare::compare(&["a".into(), "b".into()], &[mem.clone(), mem], false).unwrap();
    for row in &c.rows {
        let x = row.cells[1].as_ref().unwrap();
        assert_eq!(x.ratio, Some(1.0), "{}", row.op);
        assert_eq!(x.significant, Some(false), "{}", row.op);
    }
    let table = compare::render_table(&c);
    assert!(table.contains("not significant"), "{table}");
}

#[test]
fn the_compare_command_refuses_different_workloads_unless_forced() {
    let a = "fixtures/compare/queue-memory.json";
    let b = "reports/example/run.json";
    let out = loadmix_bin(&["compare", a, b]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("different workloads"));
    let tmp = tempdir();
    let html = tmp.path().join("c.html");
    let out = loadmix_bin(&[
        "compare",
        a,
        b,
        "--force",
        "--format",
        "md",
        "--html",
        &path_str(&html),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(md.starts_with("### ") && md.contains("| total |"), "{md}");
    assert!(
        std::fs::read_to_string(html)
            .unwrap()
            .contains("data-chart=\"compare-throughput\"")
    );
}

/// Two runs that nothing tells apart (one target, no names, notes or labels, run folders
/// of one name) are A and B in the table, never their whole paths; the legend has them.
#[test]
fn runs_nothing_tells_apart_are_lettered_and_the_legend_gives_their_files() {
    let tmp = tempdir();
    let mut files = Vec::new();
    for side in ["before", "after"] {
        let dir = tmp.path().join(side).join("run");
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("run.json");
        std::fs::copy("reports/example/run.json", &f).unwrap();
        files.push(path_str(&f));
    }
    let out = loadmix_bin(&["compare", &files[0], &files[1]]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{table}");
    assert!(table.contains("┆ A ") && table.contains("┆ B "), "{table}");
    assert!(table.contains("vs A"), "{table}");
    // The paths are in the legend, once each, and in no cell.
    assert_eq!(table.matches(files[0].as_str()).count(), 1, "{table}");
    assert!(table.contains(&format!("A = {}", files[0])), "{table}");
    assert!(table.contains(&format!("B = {}", files[1])), "{table}");
}

fn write_workload(dir: &std::path::Path, thresholds: &str) -> String {
    let p = dir.join("w.yaml");
    std::fs::write(
        &p,
        format!(
            "name: gated\nrun: {{ iterations: 50 }}\nusers:\n  - class: q\n    protocol: http\n    count: 2\n    mix:\n      put: {{ weight: 1, method: POST, path: '{{context}}/queue/g', body: x, expect: 201 }}\nthresholds:\n{thresholds}"
        ),
    )
    .unwrap();
    path_str(&p)
}

#[test]
fn thresholds_pass_or_fail_the_run() {
    let tmp = tempdir();
    let ok = write_workload(
        tmp.path(),
        "  - { op: total, errors: \"< 1%\" }\n  - { op: q.put, p99: \"< 10s\" }\n",
    );
    let out = out_dir(&tmp);
    assert_eq!(
        loadmix(&["run", &ok, "--out", &path_str(&out), "--quiet"]),
        0
    );
    let r = read_report(&out);
    assert_eq!(r.thresholds.len(), 2);
    assert!(r.thresholds.iter().all(|t| t.passed));
    assert_eq!(r.thresholds[0].observed, Some(0.0));

    let bad = write_workload(
        tmp.path(),
        "  - { op: total, errors: \"< 1%\" }\n  - { op: q, p50: \"< 1us\" }\n  - { op: total, ops_per_sec: \"> 100000000\" }\n",
    );
    let out2 = tmp.path().join("out2");
    let res = loadmix_bin(&["run", &bad, "--out", &path_str(&out2), "--quiet"]);
    assert_eq!(res.status.code(), Some(1), "a failed threshold is exit 1");
    let printed = String::from_utf8_lossy(&res.stdout);
    assert!(
        printed.contains("PASS total: errors < 1%") && printed.contains("FAIL q: p50 < 1us"),
        "{printed}"
    );
    let r = read_report(&out2);
    assert_eq!(r.thresholds.iter().filter(|t| t.passed).count(), 1);
}

/// Which target each round belonged to, in the order the rounds started.
fn started_in_order(
    mem: &loadmix::reports::Report,
    sql: &loadmix::reports::Report,
) -> Vec<&'static str> {
    let mut starts: Vec<(String, &str)> = mem
        .rounds
        .iter()
        .map(|r| (r.started_at.clone(), "mem"))
        .chain(sql.rounds.iter().map(|r| (r.started_at.clone(), "sql")))
        .collect();
    starts.sort();
    starts.into_iter().map(|(_, n)| n).collect()
}

#[test]
fn warm_up_rounds_are_run_first_and_thrown_away_and_order_can_alternate() {
    let tmp = tempdir();
    let out = out_dir(&tmp);
    let code = loadmix(&[
        "run",
        "workloads/queue-sizes.yaml",
        "--target",
        "mem=embedded:memory",
        "--target",
        "sql=embedded:sqlite",
        "--rounds",
        "2",
        "--iterations",
        "20",
        "--set",
        "run.warmup_rounds=2",
        "--order",
        "alternate",
        "--out",
        &path_str(&out),
        "--quiet",
    ]);
    assert_eq!(code, 0);
    let mem = read_report(&out.join("mem"));
    let sql = read_report(&out.join("sql"));
    assert_eq!(started_in_order(&mem, &sql), ["mem", "sql", "mem", "sql"]);
    assert_eq!(mem.order.as_deref(), Some("alternate"));
    for r in [&mem, &sql] {
        assert_eq!(r.rounds.len(), 2, "warm-up rounds are not measured rounds");
        assert_eq!(r.warmup_rounds.len(), 2);
        assert!(r.warmup_rounds.iter().all(|w| w.successes > 0));
        // 4 producers × 20 sends per measured round, nothing from the warm-ups.
        let send = op(r, "producer.send");
        assert_eq!(send.requests, 2 * 4 * 20);
        // Warm-up rounds ran before every measured round.
        assert!(r.rounds[0].started_at > r.started_at);
    }
    // --order with one target is a usage error.
    let o = loadmix_bin(&[
        "run",
        "workloads/queue-sizes.yaml",
        "--order",
        "shuffle",
        "--iterations",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("two or more --target"));
}

#[test]
fn two_targets_alternate_round_by_round_and_are_compared() {
    let tmp = tempdir();
    let out = out_dir(&tmp);
    let code = loadmix(&[
        "run",
        "workloads/queue-sizes.yaml",
        "--target",
        "mem=embedded:memory",
        "--target",
        "sql=embedded:sqlite",
        "--rounds",
        "3",
        "--iterations",
        "30",
        "--out",
        &path_str(&out),
        "--csv",
        &path_str(&tmp.path().join("all.csv")),
        "--quiet",
    ]);
    assert_eq!(code, 0);
    for f in [
        "mem/run.json",
        "mem/report.txt",
        "mem/report.html",
        "sql/run.json",
        "sql/report.html",
        "compare.txt",
        "compare.md",
        "compare.html",
        "compare.json",
        "sql.db",
    ] {
        assert!(out.join(f).exists(), "{f} missing");
    }
    let mem = read_report(&out.join("mem"));
    let sql = read_report(&out.join("sql"));
    assert_eq!(mem.target, "embedded:memory");
    assert_eq!(sql.target, "embedded:sqlite");
    assert_eq!(mem.run_id, sql.run_id);
    // Balanced by default: A B, B A, A B.
    assert_eq!(
        started_in_order(&mem, &sql),
        ["mem", "sql", "sql", "mem", "mem", "sql"]
    );
    assert_eq!(mem.order.as_deref(), Some("balanced"));
    // The CSV holds both targets: (2 ops + total) x 3 rounds each, plus the header.
    let csv = std::fs::read_to_string(tmp.path().join("all.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 2 * 3 * 3);
    assert!(csv.starts_with("run_id,target,workload,round,op,"));
}

#[test]
fn a_sweep_runs_each_point_and_writes_a_scaling_table() {
    let tmp = tempdir();
    let out = out_dir(&tmp);
    let code = loadmix(&[
        "run",
        "workloads/queue-sizes.yaml",
        "--sweep",
        "users.producer.mix.send.body.random=1KiB,16KiB",
        "--target",
        "embedded:memory",
        "--rounds",
        "2",
        "--iterations",
        "20",
        "--out",
        &path_str(&out),
        "--quiet",
    ]);
    assert_eq!(code, 0);
    for f in ["sweep.txt", "sweep.csv", "sweep.json", "sweep.html"] {
        assert!(out.join(f).exists(), "{f} missing");
    }
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("sweep.json")).unwrap()).unwrap();
    assert_eq!(j["values"], serde_json::json!(["1KiB", "16KiB"]));
    assert_eq!(j["ops_per_sec"].as_array().unwrap().len(), 2);
    for point in [
        "users.producer.mix.send.body.random=1KiB",
        "users.producer.mix.send.body.random=16KiB",
    ] {
        let r = read_report(&out.join(point));
        assert_eq!(r.summary.rounds, 2);
    }
    let big = read_report(&out.join("users.producer.mix.send.body.random=16KiB"));
    let sent = big
        .summary
        .ops
        .iter()
        .find(|o| o.op == "producer.send")
        .unwrap()
        .bytes_sent;
    assert!(
        sent >= 4 * 20 * 2 * 16 * 1024,
        "the sweep value reached the requests: {sent}"
    );
}

#[test]
fn html_pages_are_self_contained_and_carry_every_chart() {
    let r = loadmix::reports::load(&root().join("reports/example/run.json")).unwrap();
    let page = loadmix::reports::html::report(&r);
    for chart in [
        "throughput",
        "latency-over-time",
        "concurrency",
        "errors-over-time",
        "latency",
        "spectrum",
        "rounds",
        "errors",
    ] {
        assert!(
            page.contains(&format!("<figure data-chart=\"{chart}\">")),
            "{chart}"
        );
    }
    assert_eq!(
        page.matches("<svg").count(),
        6,
        "six drawn charts, and two notes that nothing failed"
    );
    for outside in ["<script", "<link", "src=", "@import", "url("] {
        assert!(!page.contains(outside), "{outside} would load something");
    }
}

#[test]
fn four_runs_compare_in_a_narrow_table_named_by_their_targets_with_notes_and_labels() {
    let tmp = tempdir();
    let mut files = Vec::new();
    for (i, (name, note)) in [
        ("synchronous_commit-on-shared_buffers-128MB", "baseline"),
        (
            "synchronous_commit-off-shared_buffers-128MB",
            "async commit",
        ),
        ("synchronous_commit-on-shared_buffers-1GB", "more buffers"),
        ("synchronous_commit-off-shared_buffers-1GB", "both"),
    ]
    .iter()
    .enumerate()
    {
        let mut r = fixture(if i % 2 == 0 {
            "queue-memory.json"
        } else {
            "queue-sqlite.json"
        });
        r.name = Some(name.to_string());
        r.note = Some(note.to_string());
        r.labels.insert("run".into(), i.to_string());
        let dir = tmp.path().join(format!("r{i}"));
        loadmix::reports::write_dir(&r, &dir).unwrap();
        files.push(path_str(&dir.join("run.json")));
    }
    let mut args = vec!["compare"];
    args.extend(files.iter().map(String::as_str));
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_loadmix"))
        .args(&args)
        .env("COLUMNS", "120")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    for line in out.lines().filter(|l| l.starts_with(['│', '┌', '╞', '└'])) {
        assert!(
            line.chars().count() <= 120,
            "{} wide: {line}",
            line.chars().count()
        );
    }
    // Names, not paths, shortened the same way everywhere; the legend has them whole.
    assert!(!out.contains("run.json"), "{out}");
    // The words all four share are left out of the table's names.
    for short in ["on-128MB", "off-128MB", "on-1GB", "off-1GB"] {
        assert!(out.contains(&format!(" {short} ")), "{short}: {out}");
    }
    assert!(
        out.contains("off-128MB = synchronous_commit-off-shared_buffers-128MB: embedded"),
        "{out}"
    );
    assert!(out.contains("(async commit; run=1)"), "{out}");
}

#[test]
fn a_run_still_warming_up_is_flagged_in_its_report_and_in_the_comparison() {
    let mem = fixture("queue-memory.json");
    let mut warming = mem.clone();
    // A cold JVM's rounds (the issue's): 1,690 → 2,460 → 3,430 → 3,620 ops/s.
    warming.summary.drift = loadmix::reports::drift(&[], &[1690.0, 2460.0, 3430.0, 3620.0]);
    let d = warming.summary.drift.as_ref().expect("a significant rise");
    assert!(
        d.message.contains("rose") && d.message.contains("warmup_rounds"),
        "{}",
        d.message
    );
    assert!(loadmix::reports::table::render(&warming).contains("WARNING: drift: throughput rose"));
    assert!(
        loadmix::reports::drift(&[], &[3000.0, 3100.0, 2950.0, 3050.0]).is_none(),
        "noise is not drift"
    );
    let c = compare::compare(&["steady".into(), "cold".into()], &[mem, warming], false).unwrap();
    assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
    assert!(c.warnings[0].starts_with("cold: drift: throughput rose"));
    assert!(compare::render_table(&c).contains("WARNING: cold: drift"));
    assert!(loadmix::reports::html::comparison(&c).contains("cold: drift"));
}

#[test]
fn latency_differences_are_tested_over_rounds_too() {
    let (mem, sql) = (fixture("queue-memory.json"), fixture("queue-sqlite.json"));
    let c = compare::compare(
        &["memory".into(), "sqlite".into()],
        &[mem.clone(), sql],
        false,
    )
    .unwrap();
    let send = c.rows.iter().find(|r| r.op == "producer.send").unwrap();
    let x = send.cells[1].as_ref().unwrap();
    // SQLite's p50 is several times memory's in every round: a significant difference.
    assert!(x.p50_ratio.unwrap() > 2.0, "{x:?}");
    assert!(x.p50_p_value.unwrap() < 0.05, "{x:?}");
    assert!(x.p99_p_value.is_some());
    assert!(
        c.method.contains("the rounds' own p50s and p99s"),
        "{}",
        c.method
    );
    let table = compare::render_table(&c);
    assert!(table.contains("p50 ") && table.contains("×*"), "{table}");
    // The same run twice: ratios of 1, nothing significant.
    let same = compare::compare(&["a".into(), "b".into()], &[mem.clone(), mem], false).unwrap();
    for row in &same.rows {
        let x = row.cells[1].as_ref().unwrap();
        assert_eq!(x.p50_ratio, Some(1.0), "{}", row.op);
        assert!(x.p50_p_value.is_none_or(|p| p >= 0.05), "{}: {x:?}", row.op);
    }
}

/// The console report keeps to the terminal's width: at 100 and 80 columns no line is
/// wider, the essential columns stay, and the line under the table names what went;
/// `--wide` has every column, as report.txt does.
#[test]
fn the_report_fits_the_terminal_and_wide_has_every_column() {
    let run = |columns: &str, wide: bool| {
        let mut args = vec!["report", "reports/example/run.json"];
        if wide {
            args.push("--wide");
        }
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_loadmix"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(&args)
            .env("COLUMNS", columns)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    for columns in [100, 80] {
        let out = run(&columns.to_string(), false);
        for line in out.lines() {
            assert!(
                line.chars().count() <= columns,
                "{} wide at {columns}: {line}",
                line.chars().count()
            );
        }
        for essential in [
            "operation",
            "requests",
            "failed",
            "ops/s",
            "p50",
            "p95",
            "p99",
        ] {
            assert!(out.contains(essential), "{essential} at {columns}:\n{out}");
        }
        assert!(out.contains("received left out to fit"), "{out}");
        assert!(out.contains("morse.sync_no_change"), "{out}");
    }
    let wide = run("80", true);
    assert!(
        wide.contains("┆ received │") && !wide.contains("left out"),
        "{wide}"
    );
    let file = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/example/report.txt"),
    )
    .unwrap();
    assert_eq!(wide, file, "report.txt is the wide report");
}

/// Two targets on one embedded server whose only difference is the delay it answers
/// with: `a` 10 ms, `b` the `b_ms` given. Their comparison, as `run` wrote it.
fn delayed_pair(b_ms: u32) -> compare::Comparison {
    let _alone = alone();
    let rt = runtime();
    let srv = embedded(&rt);
    let tmp = tempdir();
    let w = tmp.path().join("w.yaml");
    // The target's path is the workload's context: each target its own delay.
    std::fs::write(
        &w,
        "run: { duration: 1s, warmup: 0s, rounds: 5, seed: 5 }\nthink: 0ms\nusers:\n  - class: c\n    protocol: http\n    count: 4\n    mix:\n      get: { weight: 1, path: '{context}' }\n",
    )
    .unwrap();
    let out = out_dir(&tmp);
    let base = srv.url();
    let (a, b) = (
        format!("a={base}/cosmo/_loadmix/delay/10"),
        format!("b={base}/cosmo/_loadmix/delay/{b_ms}"),
    );
    let code = loadmix(&[
        "run",
        &path_str(&w),
        "--target",
        &a,
        "--target",
        &b,
        "--out",
        &path_str(&out),
        "--quiet",
    ]);
    assert_eq!(code, 0);
    rt.block_on(srv.stop());
    let reports = [read_report(&out.join("a")), read_report(&out.join("b"))];
    compare::compare(&["a".into(), "b".into()], &reports, false).unwrap()
}

/// A server made 20 % slower (12 ms for 10 ms) is found by the primary test, and the
/// comparison says what it could have detected.
#[test]
fn a_twenty_percent_slowdown_is_detected_by_the_primary_test() {
    let c = delayed_pair(12);
    assert_eq!(c.primary, "total ops/s");
    assert!(!c.same_target);
    let total = c.rows.iter().find(|r| r.op == "total").unwrap();
    let b = total.cells[1].as_ref().unwrap();
    let ratio = b.ratio.unwrap();
    // The truth: `b` answers 2 ms later than `a`. Four users that never think each go
    // round in the delay plus what every request costs besides it (`o`: the loopback,
    // both sides' work, a busy host's share), the same for both, so the ratio is
    // (10 + o) / (12 + o), not 10/12: at o = 0.2 ms that is 0.836. `o` is read off `a`'s
    // rate; the truth must lie within what the rounds can say of the ratio (a round
    // slowed by a busy host widens the interval rather than failing the test).
    let a = total.cells[0].as_ref().unwrap();
    let o_ms = 4.0 * 1e3 / a.ops_per_sec - 10.0;
    let truth = (10.0 + o_ms) / (12.0 + o_ms);
    let ([a_lo, a_hi], [b_lo, b_hi]) = (a.ci95.unwrap(), b.ci95.unwrap());
    // A round counts whole operations, and each of the 4 users' last one ends before or
    // after the bell: a round of 1 s knows its rate to 4 operations, however alike the
    // rounds came out (rounds that all count alike give an interval of no width).
    let (a_lo, a_hi, b_lo, b_hi) = (a_lo - 4.0, a_hi + 4.0, b_lo - 4.0, b_hi + 4.0);
    // The overhead cannot be negative (the delay endpoint never answers early): `a`'s own
    // interval must allow at most the delay's 400/s. No fixed ceiling: a busy host's share
    // of `o` is not bounded, and the truth above carries it.
    let o_hi = 4.0 * 1e3 / a_lo - 10.0;
    assert!(
        o_hi >= 0.0 && b_lo / a_hi <= truth && truth <= b_hi / a_lo,
        "(10 + {o_ms:.3}) / (12 + {o_ms:.3}) = {truth:.4} outside [{}, {}] (ratio {ratio}), or o up to {o_hi:.3} ms",
        b_lo / a_hi,
        b_hi / a_lo
    );
    assert_eq!(b.significant, Some(true), "p = {:?}", b.p_value);
    // The primary test is judged alone: its p is not adjusted.
    assert_eq!(b.p_adjusted, b.p_value);
    let mde = b.mde_pct.unwrap();
    // The delay endpoint is exact enough that rounds may count alike: then any
    // difference is detectable (±0 %).
    assert!(
        (0.0..17.0).contains(&mde),
        "a 17 % drop was detectable: ±{mde} %"
    );
    assert!(
        c.power
            .iter()
            .any(|w| w.contains("could detect") && w.contains("rounds each")),
        "{:?}",
        c.power
    );
    let table = compare::render_table(&c);
    assert!(table.contains("power: b against a"), "{table}");
}

/// One server under two names: an A/A run. It is said to be one, and every test but the
/// primary is Holm-corrected, never below its own p; what the rounds could detect is the
/// noise floor it prints.
#[test]
fn an_a_a_run_is_named_and_its_secondary_tests_are_corrected() {
    let c = delayed_pair(10);
    assert!(c.same_target, "{:?}", c.details);
    assert!(
        c.power.iter().any(|w| w.starts_with("A/A calibration")),
        "{:?}",
        c.power
    );
    for row in c.rows.iter().filter(|r| r.op != "total") {
        let x = row.cells[1].as_ref().unwrap();
        for (p, adj) in [
            (x.p_value, x.p_adjusted),
            (x.p50_p_value, x.p50_p_adjusted),
            (x.p99_p_value, x.p99_p_adjusted),
        ] {
            if let (Some(p), Some(adj)) = (p, adj) {
                assert!(adj >= p, "{}: {adj} < {p}", row.op);
            }
        }
        assert_eq!(x.significant, x.p_adjusted.map(|p| p < compare::ALPHA));
    }
    let total = c.rows.iter().find(|r| r.op == "total").unwrap();
    assert!(total.cells[1].as_ref().unwrap().mde_pct.is_some());
}

/// Users who think 200 ms for every 1 ms of the server's: their throughput is their
/// think time's, so ops/s is not tested and latency is the primary test; and the drift
/// test does not read their seeded rounds as a trend.
#[test]
fn throughput_set_by_think_times_is_not_tested() {
    let (r, _) = run_embedded(
        "target: embedded\nrun: { duration: 1s, warmup: 0s, rounds: 4, seed: 9 }\nthink: 200ms\nusers:\n  - class: c\n    protocol: http\n    count: 3\n    mix:\n      get: { weight: 1, path: '{context}/_loadmix/delay/1' }\n",
    );
    assert!(r.summary.drift.is_none());
    let c = compare::compare(&["a".into(), "b".into()], &[r.clone(), r], false).unwrap();
    assert_eq!(c.primary, "total p50");
    let total = c.rows.iter().find(|r| r.op == "total").unwrap();
    let b = total.cells[1].as_ref().unwrap();
    assert!(b.paced);
    assert_eq!(b.significant, None);
    assert!(
        compare::verdict(b).contains("set by the workload"),
        "{}",
        compare::verdict(b)
    );
    assert!(
        c.power
            .iter()
            .any(|w| w.contains("throughput was set by the workload")),
        "{:?}",
        c.power
    );
}
