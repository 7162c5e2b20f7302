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
    let sigma = |f: &serde_json::Value| f["fit"]["sigma"].as_f64().unwrap();
    assert!(
        sigma(serial_fit) > 0.5,
        "one at a time: {serial_fit}\n{stdout}"
    );
    assert!(
        sigma(parallel_fit) < 0.1,
        "all at once: {parallel_fit}\n{stdout}"
    );
    assert!(
        serial_fit["sigma_ci"][0].as_f64().unwrap() > parallel_fit["sigma_ci"][1].as_f64().unwrap(),
        "{stdout}"
    );
    // One user waits 20 ms a request and a little more: λ, one user's rate, is under 50/s.
    for f in [serial_fit, parallel_fit] {
        let lambda = f["fit"]["lambda"].as_f64().unwrap();
        assert!(lambda > 20.0 && lambda < 50.0, "{f}");
    }
    assert!(stdout.contains("serial: USL λ ="), "{stdout}");
    assert!(
        stdout.contains("parallel against serial: contention σ"),
        "{stdout}"
    );
    let html = std::fs::read_to_string(out.join("sweep.html")).unwrap();
    assert!(html.contains("USL fit"), "the fitted curves are drawn");
}
