//! What the engine and the generic protocol promise beyond the happy path: warm-up is run
//! but not counted, `per_request` opens one connection per request, captured values flow
//! into later requests, and a missing capture is a `body` failure.

use crate::common::*;

fn write(dir: &std::path::Path, yaml: &str) -> String {
    let p = dir.join("w.yaml");
    std::fs::write(&p, yaml).unwrap();
    path_str(&p)
}

#[test]
fn warmup_operations_run_but_are_not_counted() {
    let rt = runtime();
    let srv = embedded(&rt);
    let tmp = tempdir();
    let w = write(
        tmp.path(),
        &format!(
            "target: {}\nrun: {{ duration: 2s, warmup: 1s }}\nthink: 5ms\nusers:\n  - class: q\n    protocol: http\n    count: 2\n    mix:\n      put: {{ weight: 1, method: POST, path: '{{context}}/queue/w', body: x, expect: 201 }}\n",
            srv.url()
        ),
    );
    let out = out_dir(&tmp);
    assert_eq!(
        loadmix(&["run", &w, "--out", &path_str(&out), "--quiet"]),
        0
    );
    let r = read_report(&out);
    let round = &r.rounds[0];
    let counted = op(&r, "q.put").requests;
    assert!(round.warmup_requests > 0);
    // The server saw both the warm-up and the measured operations.
    assert_eq!(
        srv.stats.count("POST", 201),
        counted + round.warmup_requests
    );
    // The round's clock is its duration less its warm-up, whatever was still in flight at
    // its end and however early its users stopped before the bell.
    assert_eq!(round.measured_s, 1.0);
    // Roughly half of the operations fall in the warm-up second.
    let share = round.warmup_requests as f64 / (counted + round.warmup_requests) as f64;
    assert!((0.3..0.7).contains(&share), "warm-up share {share}");
    rt.block_on(srv.stop());
}

#[test]
fn per_request_opens_a_connection_for_every_request_keep_alive_one_per_user() {
    let rt = runtime();
    let srv = embedded(&rt);
    let tmp = tempdir();
    for (policy, expect_per_user) in [("per_request", 25u64), ("keep_alive", 1)] {
        let w = write(
            tmp.path(),
            &format!(
                "target: {}\nconnection: {policy}\nrun: {{ iterations: 25 }}\nusers:\n  - class: q\n    protocol: http\n    count: 3\n    mix:\n      get: {{ weight: 1, path: '{{context}}/queue/c', expect: [200, 204] }}\n",
                srv.url()
            ),
        );
        let out = out_dir(&tmp);
        assert_eq!(
            loadmix(&["run", &w, "--out", &path_str(&out), "--quiet"]),
            0
        );
        let r = read_report(&out);
        assert_eq!(
            r.rounds[0].connections_opened,
            3 * expect_per_user,
            "{policy}"
        );
        assert_eq!(op(&r, "q.get").successes, 75, "{policy}");
    }
    rt.block_on(srv.stop());
}

#[test]
fn captured_values_are_used_by_later_requests() {
    let rt = runtime();
    let (addr, seen) = recording(&rt);
    let tmp = tempdir();
    let w = write(
        tmp.path(),
        &format!(
            r#"target: http://{addr}
context: ""
run: {{ iterations: 40, seed: 3 }}
users:
  - class: api
    protocol: http
    count: 1
    mix:
      create:
        weight: 1
        method: POST
        path: /items
        body: '{{"name": "n{{seq}}"}}'
        capture: {{ id: {{ json: /id }}, loc: {{ header: Location }}, tag: {{ json: /tags/0 }} }}
      read: {{ weight: 1, path: "{{loc}}?id={{id}}&tag={{tag}}" }}
"#
        ),
    );
    let out = out_dir(&tmp);
    let log = tmp.path().join("ops.csv");
    assert_eq!(
        loadmix(&[
            "run",
            &w,
            "--out",
            &path_str(&out),
            "--log-ops",
            &path_str(&log),
            "--quiet"
        ]),
        0
    );
    let r = read_report(&out);
    let lines = seen.lock().unwrap().clone();
    let reads: Vec<&String> = lines.iter().filter(|l| l.starts_with("GET")).collect();
    assert!(!reads.is_empty());
    for l in &reads {
        assert_eq!(l.as_str(), "GET /items/42?id=42&tag=a HTTP/1.1");
    }
    // A read picked before any create has nothing to send: it is listed as skipped in the
    // op log and is not a request.
    let ops = std::fs::read_to_string(&log).unwrap();
    let first_create = ops
        .lines()
        .skip(1)
        .position(|l| l.contains(",create,"))
        .unwrap();
    let skipped = ops.lines().filter(|l| l.ends_with(",skipped")).count();
    assert_eq!(skipped, first_create, "{ops}");
    let read = op(&r, "api.read");
    assert_eq!(read.failures, 0);
    assert_eq!(
        read.requests as usize,
        reads.len(),
        "requests = what the server saw"
    );
    assert_eq!(read.successes as usize, reads.len());
}

#[test]
fn a_round_that_runs_past_its_duration_is_measured_over_the_duration_and_says_so() {
    let rt = runtime();
    let srv = embedded(&rt);
    let tmp = tempdir();
    // Answers take 800 ms: the second request of each user ends 0.6 s after the round.
    let w = write(
        tmp.path(),
        &format!(
            "target: {}\nrun: {{ duration: 1s, warmup: 0s }}\nthink: 0ms\nusers:\n  - class: slow\n    protocol: http\n    count: 2\n    mix:\n      get: {{ weight: 1, path: '{{context}}/_loadmix/delay/800' }}\n",
            srv.url()
        ),
    );
    let out = out_dir(&tmp);
    assert_eq!(
        loadmix(&["run", &w, "--out", &path_str(&out), "--quiet"]),
        0
    );
    let r = read_report(&out);
    let round = &r.rounds[0];
    assert_eq!(round.measured_s, 1.0);
    let over = round.overran_s.expect("the overrun is recorded");
    assert!(over >= 0.5, "{over}");
    assert!((round.elapsed_s - 1.0 - over).abs() < 1e-6);
    // Every request that was answered is counted, over the duration.
    let get = op(&r, "slow.get");
    assert_eq!(get.requests, 4);
    assert_eq!(get.ops_per_sec, 4.0);
    let text = std::fs::read_to_string(out.join("report.txt")).unwrap();
    assert!(text.contains("round 1 ran"), "{text}");
    rt.block_on(srv.stop());
}

#[test]
fn a_round_whose_users_stop_before_the_bell_measures_its_whole_duration() {
    // Think times up to 600 ms: each user's next operation falls due after the 2 s bell
    // some time before it rings, so the last one ends early. The round still lasted 2 s,
    // and its ops/s is its successes over 2 s, not over the time to the last one's end.
    let rt = runtime();
    let srv = embedded(&rt);
    let tmp = tempdir();
    let w = write(
        tmp.path(),
        &format!(
            "target: {}\nrun: {{ duration: 2s, warmup: 0s, seed: 3 }}\nthink: {{ uniform: [300ms, 600ms] }}\nusers:\n  - class: c\n    protocol: http\n    count: 3\n    mix:\n      get: {{ weight: 1, path: '{{context}}/_loadmix/delay/1' }}\n",
            srv.url()
        ),
    );
    let out = out_dir(&tmp);
    assert_eq!(
        loadmix(&["run", &w, "--out", &path_str(&out), "--quiet"]),
        0
    );
    let r = read_report(&out);
    let round = &r.rounds[0];
    assert_eq!(round.measured_s, 2.0);
    let get = op(&r, "c.get");
    assert!((get.ops_per_sec - get.successes as f64 / 2.0).abs() < 1e-9);
    rt.block_on(srv.stop());
}

/// The generator's CPU shared out among a run's classes: the shares add up to the whole,
/// each counts its own class's operations, and the class whose answers cost the most to
/// read (Atom's feeds, ten times a CalDAV PUT's work in the drivers' bench) is charged
/// more per operation than the cheapest.
#[test]
fn each_class_is_charged_its_share_of_the_generators_cpu() {
    let tmp = tempdir();
    let out = out_dir(&tmp);
    // Its own process, so the CPU is the run's alone; the embedded target in it.
    let run = loadmix_bin(&[
        "run",
        "workloads/cosmo-0.7-saturate.yaml",
        "--duration",
        "2s",
        "--rounds",
        "1",
        "--set",
        "run.warmup=0s",
        "--out",
        &path_str(&out),
    ]);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let r = read_report(&out);
    let g = &r.rounds[0].generator;
    let names: Vec<&str> = g.class_cpu.iter().map(|c| c.class.as_str()).collect();
    assert_eq!(names, ["morse", "atom", "caldav"]);
    let shared: f64 = g.class_cpu.iter().map(|c| c.cpu_s).sum();
    assert!(
        (shared - g.cpu_s).abs() <= 1e-9 * g.cpu_s.max(1.0),
        "{shared} vs {}",
        g.cpu_s
    );
    for c in &g.class_cpu {
        let ops: u64 = r.rounds[0]
            .ops
            .iter()
            .filter(|o| o.class.as_deref() == Some(c.class.as_str()))
            .map(|o| o.successes)
            .sum();
        assert_eq!(c.operations, ops, "{}", c.class);
        assert!(ops > 0, "{}", c.class);
    }
    let per_op = |name: &str| {
        let c = g.class_cpu.iter().find(|c| c.class == name).unwrap();
        c.cpu_ms_per_op.unwrap()
    };
    assert!(per_op("atom") > 2.0 * per_op("caldav"), "{:?}", g.class_cpu);
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(
        text.contains("generator CPU per operation by class"),
        "{text}"
    );
}
