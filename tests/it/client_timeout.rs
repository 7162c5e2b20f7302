//! Verdicts at the client's patience: an answer that came after its operation's (or
//! class's) `client_timeout` is `timed_out_for_client`, a failure for that client, while
//! the status the server sent is still counted as the server sent it; a threshold can
//! gate on the share, and `compare` says it per run.

use crate::common::*;

/// Against a server that answers every request after 200 ms, one at a time: clients that
/// wait 50 ms lose every answer; clients that wait a minute lose none. The margins are
/// wide on both sides, so a busy machine cannot change a verdict.
#[test]
fn an_answer_after_the_clients_timeout_fails_for_that_client_and_is_still_counted() {
    let rt = runtime();
    let addr = serial(&rt, 200);
    let tmp = tempdir();
    let out = out_dir(&tmp);
    let w = tmp.path().join("w.yaml");
    std::fs::write(
        &w,
        format!(
            r#"target: http://{addr}
run: {{ iterations: 3 }}
users:
  - class: hasty
    protocol: http
    count: 1
    client_timeout: 50ms
    mix:
      get: {{ weight: 1, method: GET, path: /work }}
  - class: patient
    protocol: http
    count: 1
    client_timeout: 50ms
    mix:
      get: {{ weight: 1, method: GET, path: /work, client_timeout: 60s }}
thresholds:
  - {{ op: hasty.get, timed_out_for_client: "< 1%" }}
  - {{ op: patient.get, timed_out_for_client: "< 1%" }}
"#
        ),
    )
    .unwrap();
    let code = loadmix(&["run", &path_str(&w), "--out", &path_str(&out), "--quiet"]);
    assert_ne!(code, 0, "a threshold failed");
    let r = read_report(&out);
    let hasty = op(&r, "hasty.get");
    assert_eq!((hasty.requests, hasty.failures), (3, 3));
    assert_eq!(hasty.errors.get("timed_out_for_client"), Some(&3));
    assert_eq!(
        hasty.status.get("200"),
        Some(&3),
        "the server's answers, as it sent them"
    );
    let patient = op(&r, "patient.get");
    assert_eq!(
        (patient.requests, patient.failures),
        (3, 0),
        "the operation's own patience"
    );
    let verdicts: Vec<(bool, &str)> = r
        .thresholds
        .iter()
        .map(|t| (t.passed, t.op.as_str()))
        .collect();
    assert_eq!(verdicts, [(false, "hasty.get"), (true, "patient.get")]);
    let why = &r.failures.first().expect("a failure noted").detail;
    assert!(
        why.contains("past the client's timeout of 0.050 s"),
        "{why}"
    );
    // `compare` says, run by run, what the clients lost.
    let report = path_str(&out.join("run.json"));
    let c = loadmix_bin(&["compare", &report, &report]);
    let text = String::from_utf8_lossy(&c.stdout);
    assert!(
        text.contains("timed out for the client") && text.contains("hasty.get"),
        "{text}"
    );
    assert!(!text.contains("patient.get: "), "{text}");
}

#[test]
fn a_client_timeout_of_nothing_is_refused_where_it_is_written() {
    let tmp = tempdir();
    let w = tmp.path().join("w.yaml");
    std::fs::write(
        &w,
        "target: embedded\nusers:\n  - class: c\n    protocol: caldav\n    count: 1\n    client_timeout: 0s\n    mix: { propfind: 1 }\n",
    )
    .unwrap();
    let out = loadmix_bin(&["validate", &path_str(&w)]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("w.yaml:6:21") && err.contains("client_timeout is above zero"),
        "{err}"
    );
}

/// A sweep of the clients' patience against a server that answers after 200 ms: at
/// 50 ms every answer fails for the client, so the point has no successes to give a
/// p99 of, and the sweep names it with its failures rather than leave a p99 that
/// seems to improve; at a minute none fails.
#[test]
fn a_sweep_names_the_points_whose_answers_came_after_the_clients_timeout() {
    let rt = runtime();
    let addr = serial(&rt, 200);
    let tmp = tempdir();
    let out = out_dir(&tmp);
    let w = tmp.path().join("w.yaml");
    std::fs::write(
        &w,
        format!(
            "target: http://{addr}\nrun: {{ iterations: 3 }}\nusers:\n  - class: c\n    protocol: http\n    count: 1\n    mix:\n      get: {{ weight: 1, method: GET, path: /work }}\n"
        ),
    )
    .unwrap();
    let o = loadmix_bin(&[
        "run",
        &path_str(&w),
        "--sweep",
        "users.c.client_timeout=60s,50ms",
        "--out",
        &path_str(&out),
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains(
            "operations failed at users.c.client_timeout = 50ms (3, 3 timed_out_for_client): "
        ),
        "{stdout}"
    );
    assert!(!stdout.contains("= 60s ("), "{stdout}");
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("sweep.json")).unwrap()).unwrap();
    assert_eq!(j["failures"], serde_json::json!([[0], [3]]), "{j}");
    assert_eq!(
        j["timed_out_for_client"],
        serde_json::json!([[0], [3]]),
        "{j}"
    );
}
