//! `run --capacity`: the highest arrival rate each target keeps a service level at, held
//! against servers whose capacity is known (one request at a time, each taking a fixed
//! time: none can serve more than one per service time a second), the generator's own
//! limit said rather than judged, and workloads a search cannot vary refused before
//! anything is sent.

use crate::common::*;

/// Sessions of one request each, on a new connection each (an open class's users are new).
const ONE_REQUEST: &str = "name: cap-serial\nrun: { duration: 2s, warmup: 0s, seed: 3 }\nusers:\n  - class: web\n    protocol: http\n    arrival: { rate: 2/s }\n    mix:\n      work: { weight: 1, path: /work }\n";

fn json(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn a_slower_server_sustains_less_and_neither_beyond_its_service_time() {
    let _alone = alone();
    let rt = runtime();
    let (fast, slow) = (serial(&rt, 20), serial(&rt, 40));
    let tmp = tempdir();
    let w = tmp.path().join("w.yaml");
    std::fs::write(&w, ONE_REQUEST).unwrap();
    let out = out_dir(&tmp);
    let o = loadmix_bin(&[
        "run",
        &path_str(&w),
        "--capacity",
        // A median and a 20 % error share can be told from tens of samples: a p99 needs
        // hundreds, more than a short step at these servers' rates holds.
        "p50 < 80ms, errors < 20%",
        "--target",
        &format!("fast=http://{fast}"),
        "--target",
        &format!("slow=http://{slow}"),
        // The servers are this test's threads: the fast one's steps are costed by it.
        "--monitor-process",
        &format!("{}@fast", std::process::id()),
        // A bound on the test's time; a search cut short says so (`steps`).
        "--capacity-steps",
        "14",
        "--out",
        &path_str(&out),
        "--quiet",
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let c = json(&out.join("capacity.json"));
    assert_eq!(c["schema"], "loadmix/capacity/v1");
    assert_eq!(c["service_level"]["text"], "p50 < 80ms, errors < 20%");
    let (f, s) = (&c["targets"][0], &c["targets"][1]);
    assert_eq!(f["name"], "fast");
    // On a host busy with the rest of the suite the generator may fall behind first: the
    // search then stops there and says its answer is a lower bound.
    let mut found = 0;
    for (t, most) in [(f, 50.0), (s, 25.0)] {
        // Neither sustains more than it can serve.
        let lo = t["sustained"].as_f64().unwrap_or(0.0);
        assert!(lo < most, "{}: {lo}\n{stdout}", t["name"]);
        match t["end"]["kind"].as_str().unwrap() {
            "found" => {
                let hi = t["fails_from"].as_f64().expect("some rate failed");
                assert!(lo < hi, "{}: [{lo}, {hi}]\n{stdout}", t["name"]);
                found += 1;
            }
            // Cut short by the bound on steps (on a busy host a crowded step runs again
            // and an edge's twice as long): an interval when some rate failed by then,
            // else a lower bound only.
            "steps" => {
                if let Some(hi) = t["fails_from"].as_f64() {
                    assert!(lo < hi, "{}: [{lo}, {hi}]\n{stdout}", t["name"]);
                }
                assert_eq!(t["steps"].as_array().unwrap().len(), 14, "{stdout}");
            }
            // Too few samples at the rates that told nothing even over the longest step:
            // said, with the arithmetic in that step.
            "too_few" => {
                let steps = t["steps"].as_array().unwrap();
                assert!(steps.iter().any(|x| x["outcome"] == "too_few"), "{stdout}");
            }
            "generator" => {
                assert!(
                    t["verdict"].as_str().unwrap().starts_with("at least"),
                    "{stdout}"
                );
                let last = t["steps"].as_array().unwrap().last().unwrap();
                assert_eq!(last["outcome"], "generator", "{stdout}");
            }
            other => panic!("{}: ended {other}\n{stdout}", t["name"]),
        }
    }
    // The slower server sustains less than the faster one fails from.
    if let (Some(slow), Some(fast)) = (s["sustained"].as_f64(), f["fails_from"].as_f64()) {
        assert!(slow < fast, "{stdout}");
    }
    if found == 2 {
        let versus = &c["versus"][0];
        assert_eq!(versus["separate"], true, "{stdout}");
        assert!(versus["ratio"].as_f64().unwrap() < 0.6, "{stdout}");
    }
    // Each of the watched target's steps says what it cost the server; the other's none.
    for (t, watched) in [(f, true), (s, false)] {
        for step in t["steps"].as_array().unwrap() {
            let cpu = step["server"]["cpu_ms_per_op"].as_f64();
            assert_eq!(cpu.is_some(), watched, "{step}");
            assert!(cpu.is_none_or(|c| c >= 0.0) && step["server"]["gc_per_1000_ops"].is_null());
        }
    }
    for t in [f, s] {
        let steps = t["steps"].as_array().unwrap();
        let lo = t["sustained"].as_f64().unwrap_or(0.0);
        for step in steps {
            let rate = step["rate"].as_f64().unwrap();
            if step["outcome"] == "passed" {
                let p90 = &step["rules"][0];
                assert!(p90["observed"].as_f64().unwrap() < 100.0, "{step}");
                let e = &p90["evidence"];
                assert!(
                    e["samples"].as_u64().unwrap() >= e["needed"].as_u64().unwrap(),
                    "{step}"
                );
            }
            // Below the sustained rate every step that could tell passed (one that was
            // undecided, as a crowded host's may be, told nothing either way).
            if rate <= lo && ["passed", "failed"].contains(&step["outcome"].as_str().unwrap()) {
                assert_eq!(step["outcome"], "passed", "{step}");
            }
        }
        // The target's report keeps every step's round.
        let name = t["name"].as_str().unwrap();
        let rep = read_report(&out.join(name));
        assert_eq!(rep.rounds.len(), steps.len(), "{name}");
    }
    let html = std::fs::read_to_string(out.join("capacity.html")).unwrap();
    for chart in ["capacity-p99", "capacity-errors"] {
        assert!(html.contains(&format!("data-chart=\"{chart}\"")), "{chart}");
    }
    let txt = std::fs::read_to_string(out.join("capacity.txt")).unwrap();
    assert!(
        txt.contains("steps of slow")
            && txt.contains("server at that rate")
            && txt.contains("server CPU ms/op")
            && (found < 2 || txt.contains("do not overlap")),
        "{txt}"
    );

    // Saved answers compare: the same search twice is every target twice, lettered.
    let saved = path_str(&out.join("capacity.json"));
    let again = loadmix_bin(&["compare", &saved, &saved]);
    let text = String::from_utf8_lossy(&again.stdout);
    assert_eq!(again.status.code(), Some(0), "{text}");
    assert!(
        text.contains("B:slow") && text.contains("B:fast sustains 1.00×"),
        "{text}"
    );
    // A forged answer is refused, not compared.
    let forged = tmp.path().join("forged.json");
    let doctored = std::fs::read_to_string(out.join("capacity.json"))
        .unwrap()
        .replacen("\"sustained\": ", "\"sustained\": -", 1);
    std::fs::write(&forged, doctored).unwrap();
    let refused = loadmix_bin(&["compare", &saved, &path_str(&forged)]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("no search gives"));
    // So is one that sustains more than it fails from.
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("capacity.json")).unwrap()).unwrap();
    v["targets"][0]["sustained"] = serde_json::json!(1000.0);
    v["targets"][0]["fails_from"] = serde_json::json!(1.0);
    std::fs::write(&forged, v.to_string()).unwrap();
    let refused = loadmix_bin(&["compare", &saved, &path_str(&forged)]);
    assert_eq!(refused.status.code(), Some(2));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("says what no search gives"), "{said}");
}

#[test]
fn a_workload_a_search_cannot_vary_is_refused_before_anything_is_sent() {
    let tmp = tempdir();
    let cases = [
        (
            "users:\n  - class: c\n    protocol: http\n    count: 2\n    mix: { g: { weight: 1, path: /x } }\n",
            "p99 < 1s",
            "has none",
        ),
        (ONE_REQUEST, "p99 < 1s, p97 < 2s", "no metric 'p97'"),
        (
            ONE_REQUEST,
            "web.nothing p99 < 1s",
            "no operation, class or sum named 'web.nothing'",
        ),
        (
            "run: { iterations: 3 }\nusers:\n  - class: a\n    protocol: http\n    arrival: { rate: 3/s }\n    mix: { g: { weight: 1, path: /x } }\n",
            "p99 < 1s",
            "iterations",
        ),
    ];
    for (i, (yaml, level, says)) in cases.iter().enumerate() {
        let w = tmp.path().join(format!("w{i}.yaml"));
        std::fs::write(&w, yaml).unwrap();
        let o = loadmix_bin(&[
            "run",
            &path_str(&w),
            "--capacity",
            level,
            "--target",
            "embedded",
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{level}: {err}");
        assert!(err.contains(says), "{level}: {err}");
    }
}

#[test]
fn an_mm1_server_is_found_where_its_formula_puts_it() {
    // μ = 100/s, p99 < 200 ms: the capacity is μ − ln(100)/0.2 s ≈ 77/s. Steps of 5 s hold
    // the ~370 samples a p99 needs at that rate; slower steps are lengthened.
    let _alone = alone();
    let rt = runtime();
    let (addr, served) = mm1(&rt, 100.0);
    let tmp = tempdir();
    let w = tmp.path().join("w.yaml");
    std::fs::write(
        &w,
        ONE_REQUEST
            .replace("duration: 2s", "duration: 5s")
            .replace("rate: 2/s", "rate: 40/s"),
    )
    .unwrap();
    let out = out_dir(&tmp);
    let o = loadmix_bin(&[
        "run",
        &path_str(&w),
        "--capacity",
        "p99 < 200ms",
        "--capacity-steps",
        "20",
        "--target",
        &format!("http://{addr}"),
        "--out",
        &path_str(&out),
        "--quiet",
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}");
    let c = json(&out.join("capacity.json"));
    let t = &c["targets"][0];
    // The server's μ over the run, and during each step (its services in turn, as many
    // as the step measured): on a busy host the timer gives longer services while the
    // host is busier, so the capacity each step met moved between the lowest and the
    // highest of those. (Chunks of a fixed 1,000 services blurred a quiet step with the
    // crowded ones beside it: a step at 80/s passed with μ near 100 while the chunks said
    // 84 to 92.)
    let times = served.lock().unwrap().clone();
    let mu_of = |t: &[f64]| t.len() as f64 / t.iter().sum::<f64>();
    let capacity = |mu: f64| mu - 100f64.ln() / 0.2;
    let mu = mu_of(&times);
    let mut spans: Vec<f64> = Vec::new();
    let mut at = 0usize;
    for step in t["steps"].as_array().unwrap() {
        let n = step["rules"][0]["evidence"]["samples"]
            .as_u64()
            .unwrap_or(0) as usize;
        if n >= 100 && at + n <= times.len() {
            spans.push(mu_of(&times[at..at + n]));
        }
        at += n;
    }
    let (mu_lo, mu_hi) = spans
        .iter()
        .fold((mu, mu), |(a, b), &m| (a.min(m), b.max(m)));
    let (truth_lo, truth_hi) = (capacity(mu_lo), capacity(mu_hi));
    let lo = t["sustained"].as_f64();
    let hi = t["fails_from"].as_f64();
    match t["end"]["kind"].as_str().unwrap() {
        // The interval holds the truth (give or take the timer's rounding of each service,
        // which makes it not quite exponential).
        "found" | "steps" => {
            // A search cut short by its step bound may lack an end: it holds the truth
            // all the same.
            let (lo, hi) = (lo.unwrap_or(0.0), hi.unwrap_or(f64::INFINITY));
            assert!(
                lo < truth_hi * 1.05 && truth_lo * 0.95 < hi,
                "μ {mu:.1}/s ({mu_lo:.1} to {mu_hi:.1} by step), truth {truth_lo:.1} to \
                 {truth_hi:.1}/s, [{lo}, {hi}]\n{stdout}"
            );
        }
        // On a crowded host the generator may stop it first: never above the truth.
        "generator" => assert!(lo.is_none_or(|l| l < truth_hi * 1.05), "{stdout}"),
        other => {
            panic!("ended {other}: μ {mu:.1}/s, truth {truth_lo:.1} to {truth_hi:.1}/s\n{stdout}")
        }
    }
    // Every step that passed had samples enough for its p99.
    for step in t["steps"].as_array().unwrap() {
        if step["outcome"] == "passed" {
            let e = &step["rules"][0]["evidence"];
            assert!(e["samples"].as_u64() >= e["needed"].as_u64(), "{step}");
        }
    }
}
