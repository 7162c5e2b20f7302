//! The Universal Scalability Law fitted to a sweep of a user count, held against servers
//! whose scaling is known: one that answers a request at a time (every user more only
//! queues: contention σ near 1, less the share of each cycle spent in the client and on
//! the wire) and one that answers every request at once after the same time (throughput
//! grows with users: σ near 0), both at 20 ms.

use crate::common::*;

#[test]
fn a_serial_server_shows_contention_and_a_parallel_one_none() {
    let _alone = alone();
    let rt = runtime();
    let one_at_a_time = serial(&rt, 20);
    let all_at_once = embedded(&rt);
    let tmp = tempdir();
    let w = tmp.path().join("w.yaml");
    std::fs::write(
        &w,
        "name: scaling\nrun: { duration: 1s, warmup: 0s, rounds: 2, seed: 9 }\nthink: 0ms\nusers:\n  - class: web\n    protocol: http\n    count: 1\n    mix:\n      work: { weight: 1, path: '{context}' }\n",
    )
    .unwrap();
    let out = out_dir(&tmp);
    let o = loadmix_bin(&[
        "run",
        &path_str(&w),
        "--sweep",
        "users.web.count=1,2,4,8",
        "--target",
        &format!("serial=http://{one_at_a_time}/work"),
        "--target",
        &format!("parallel={}/cosmo/_loadmix/delay/20", all_at_once.url()),
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
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("sweep.json")).unwrap()).unwrap();
    let (serial_fit, parallel_fit) = (&j["usl"][0], &j["usl"][1]);
    // Each bound held against the estimate's interval, not its point: a busy host moves
    // the point, and widens the interval.
    let ci = |f: &serde_json::Value, k: &str, i: usize| f[k][i].as_f64().unwrap();
    assert!(
        ci(serial_fit, "sigma_ci", 1) > 0.5,
        "one at a time: {serial_fit}\n{stdout}"
    );
    assert!(
        ci(parallel_fit, "sigma_ci", 0) < 0.1,
        "all at once: {parallel_fit}\n{stdout}"
    );
    assert!(
        serial_fit["sigma_ci"][0].as_f64().unwrap() > parallel_fit["sigma_ci"][1].as_f64().unwrap(),
        "{stdout}"
    );
    // One user waits 20 ms a request and a little more: λ, one user's rate, is under 50/s.
    for f in [serial_fit, parallel_fit] {
        assert!(
            ci(f, "lambda_ci", 1) > 20.0 && ci(f, "lambda_ci", 0) < 50.0,
            "{f}"
        );
    }
    assert!(stdout.contains("serial: USL λ ="), "{stdout}");
    assert!(
        stdout.contains("parallel against serial: contention σ"),
        "{stdout}"
    );
    let html = std::fs::read_to_string(out.join("sweep.html")).unwrap();
    assert!(html.contains("USL fit"), "the fitted curves are drawn");
}

#[test]
fn a_sweep_divides_by_the_time_its_rounds_ran_and_calls_a_flat_curve_flat() {
    // 20 to 40 users against a server of at most 50 requests a second, 1 s rounds: at 40
    // the last requests sent before the bell are answered up to 0.8 s after it. Over the
    // nominal second the point would read ~90/s; over the time it ran, at most 50/s.
    let _alone = alone();
    let rt = runtime();
    let one_at_a_time = serial(&rt, 20);
    let tmp = tempdir();
    let w = tmp.path().join("w.yaml");
    std::fs::write(
        &w,
        "name: overrun\nrun: { duration: 1s, warmup: 0s, rounds: 2, seed: 9 }\nthink: 0ms\nusers:\n  - class: web\n    protocol: http\n    count: 1\n    mix:\n      work: { weight: 1, path: '{context}' }\n",
    )
    .unwrap();
    let out = out_dir(&tmp);
    let o = loadmix_bin(&[
        "run",
        &path_str(&w),
        "--sweep",
        "users.web.count=20,30,40",
        "--target",
        &format!("serial=http://{one_at_a_time}/work"),
        "--out",
        &path_str(&out),
        "--quiet",
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}");
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("sweep.json")).unwrap()).unwrap();
    for (i, point) in j["ops_per_sec"].as_array().unwrap().iter().enumerate() {
        let ops = point[0].as_f64().unwrap();
        assert!(
            ops <= 52.0,
            "point {i}: {ops} ops/s from a server of 50/s\n{stdout}"
        );
        assert!(j["overran_s"][i][0].as_f64().unwrap() > 0.3, "{stdout}");
    }
    assert!(
        stdout.contains("rounds ran past their duration"),
        "{stdout}"
    );
    // Three points at the server's ceiling: nothing rises, so no knee is named.
    assert!(!stdout.contains("knee at"), "{stdout}");
}
